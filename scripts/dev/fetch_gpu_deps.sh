#!/usr/bin/env bash
# Fill wheelhouse/ with everything scripts/gpu_check.sh installs on the lent GPU machine, which
# has no network: PyCUDA's source archive (built there against that machine's CUDA), the
# wheels PyCUDA and polyopt need at run time, the test tools, and the build tools.
#
# Run it here, where the package registries are reachable, from any directory:
#     scripts/dev/fetch_gpu_deps.sh
# Settings (environment variables):
#     PY_VERSIONS  Pythons to fetch binary wheels for, most likely first
#                  (default: this machine's, then 3.12 3.10 3.13)
#     PLATFORMS    wheel platform tags accepted (default: manylinux 2.28 down to 2014, x86_64)
#     MAX_MIB      size cap (default 60): numpy (16 MiB a Python) is skipped for the Pythons
#                  that would pass it; gpu_check.sh then uses the machine's own numpy
#     PYTHON       the interpreter whose pip downloads (default python3)
# Running it again downloads nothing new; delete wheelhouse/ to start afresh.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
WHEELHOUSE="$ROOT/wheelhouse"
PYTHON="${PYTHON:-python3}"
HOST_PY="$("$PYTHON" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
PY_VERSIONS="${PY_VERSIONS:-$HOST_PY 3.12 3.10 3.13}"
# pip takes an explicit --platform literally (no older manylinux tags implied), and recent
# numpy and islpy wheels are tagged 2_27/2_28 while others stop at 2_17/2014: name them all.
PLATFORMS="${PLATFORMS:-manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64}"
MAX_MIB="${MAX_MIB:-60}"

# polyopt (setup.cfg install_requires and the test extra, less matplotlib, which no GPU test
# needs), PyCUDA's run-time requirements (pytools pulls siphash24 and typing_extensions), and
# the tools to build PyCUDA and polyopt without build isolation. pip itself, so a venv made
# --without-pip can be given one.
PACKAGES=(
    "islpy>=2024.1" "numpy>=1.24" "sympy>=1.12" "platformdirs>=3"
    "pytest>=7" "hypothesis>=6"
    "pytools>=2011.2" "mako"
    "setuptools>=64" "wheel" "pip"
)
# pip download evaluates environment markers against the running Python, not --python-version:
# pytest's and hypothesis' backports for Pythons before 3.11 have to be named.
BACKPORTS=("exceptiongroup>=1" "tomli>=1")

shopt -s nullglob
mkdir -p "$WHEELHOUSE"
STAGING="$(mktemp -d)"
trap 'rm -rf "$STAGING"' EXIT
platform_args=()
for p in $PLATFORMS; do platform_args+=(--platform "$p"); done

pip_quiet() {  # pip, less its warnings about this machine's unused file:// index entries
    "$PYTHON" -m pip "$@" 2>&1 | { grep -v "is neither a file nor a directory" || true; }
}

mib() {  # size of a directory in whole MiB, rounded up
    du -sk "$1" | awk '{ printf "%d", ($1 + 1023) / 1024 }'
}

fetch_pycuda() {
    # The source archive only: PyCUDA links against the CUDA driver of the machine it runs on.
    local have=("$WHEELHOUSE"/pycuda-*.tar.gz)
    if ((${#have[@]})); then
        echo "pycuda: $(basename "${have[-1]}") already here"
        return
    fi
    pip_quiet download --quiet --no-binary pycuda --no-deps pycuda -d "$WHEELHOUSE"
    have=("$WHEELHOUSE"/pycuda-*.tar.gz)
    echo "pycuda: fetched $(basename "${have[-1]}")"
}

fetch_python() {  # $1: a Python version such as 3.12
    local version="$1" stage="$STAGING/$1" new_kib have_kib cap_kib
    local wanted=("${PACKAGES[@]}")
    if [[ "$(printf '%s\n' "$version" 3.11 | sort -V | head -1)" != 3.11 ]]; then
        wanted+=("${BACKPORTS[@]}")
    fi
    pip_quiet download --quiet --only-binary=:all: --implementation cp \
        --python-version "$version" "${platform_args[@]}" -d "$stage" "${wanted[@]}"
    new_kib=0
    for f in "$stage"/*; do
        [[ -e "$WHEELHOUSE/$(basename "$f")" ]] || new_kib=$((new_kib + $(du -k "$f" | cut -f1)))
    done
    have_kib="$(du -sk "$WHEELHOUSE" | cut -f1)"
    cap_kib=$((MAX_MIB * 1024))
    if ((have_kib + new_kib > cap_kib)); then
        for f in "$stage"/numpy-*.whl; do
            [[ -e "$WHEELHOUSE/$(basename "$f")" ]] && continue
            echo "python $version: $(basename "$f") skipped (wheelhouse would pass ${MAX_MIB} MiB);" \
                "gpu_check.sh then needs the machine's own numpy"
            rm -f "$f"
        done
    fi
    local fetched=()
    for f in "$stage"/*; do
        [[ -e "$f" && ! -e "$WHEELHOUSE/$(basename "$f")" ]] || continue
        mv "$f" "$WHEELHOUSE/"
        fetched+=("$(basename "$f")")
    done
    if ((${#fetched[@]})); then
        echo "python $version: fetched ${fetched[*]}"
    else
        echo "python $version: nothing new"
    fi
}

echo "wheelhouse: $WHEELHOUSE (pythons: $PY_VERSIONS; cap ${MAX_MIB} MiB)"
fetch_pycuda
seen=" "
for v in $PY_VERSIONS; do
    [[ "$seen" == *" $v "* ]] && continue  # the host's version may also be listed
    seen+="$v "
    fetch_python "$v"
done
files=("$WHEELHOUSE"/*)
echo "wheelhouse: ${#files[@]} files, $(mib "$WHEELHOUSE") MiB"
if (($(mib "$WHEELHOUSE") > MAX_MIB)); then
    echo "warning: the wheelhouse is over ${MAX_MIB} MiB; the device run carries at most 64 MiB" >&2
fi
