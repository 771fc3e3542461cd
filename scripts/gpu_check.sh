#!/usr/bin/env bash
# The GPU check, run on the lent GPU machine (no network) from the repository root, with
# wheelhouse/ carried along (scripts/dev/fetch_gpu_deps.sh fills it here):
#     bash scripts/gpu_check.sh
# Phases, each under its own timeout and all within GPU_CHECK_BUDGET_S (default 470 s):
#     info     nvidia-smi, nvcc --version, the Python, the CUDA toolkit found
#     venv     python3 -m venv --system-site-packages .gpuvenv (a preinstalled torch stays
#              visible); kept and reused if a previous run left it
#     deps     polyopt's and PyCUDA's dependencies, from wheelhouse/ only
#     pycuda   a PyCUDA wheel in wheelhouse/ if one imports, else built from the sdist
#              against this machine's CUDA (the wheel is saved with the results for reuse)
#     polyopt  pip install --no-deps -e .
#     tests    python -m pytest -q -m "gpu or cuda" tests
#     bench    polyopt bench gpu, the venv's console script (extra arguments: BENCH_ARGS,
#              e.g. "--quick")
# Results (logs, bench_gpu.md, bench_gpu.json, pytest-gpu.xml, summary.txt) go to $OUT when
# set (the device runner collects it), else to gpu_results/. A phase that fails or times out
# is recorded and the later phases still run where they can; the exit status is always 0.
# Settings: PYTHON (python3), GPU_VENV (.gpuvenv), GPU_CHECK_BUDGET_S (470), BENCH_ARGS.
# shellcheck disable=SC2317,SC2012  # phases run through "__phase NAME"; ls on known names
set -uo pipefail  # no -e: every phase's failure is recorded, never fatal

SELF="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"
ROOT="$(cd "$(dirname "$SELF")/.." && pwd)"

# polyopt's requirements (setup.cfg, with the test extra less matplotlib), PyCUDA's, and the
# tools that build both without build isolation (no index to fetch them from).
DEPS=("setuptools>=64" "wheel" "numpy>=1.24" "islpy>=2024.1" "sympy>=1.12" "platformdirs>=3"
      "pytest>=7" "hypothesis>=6" "pytools>=2011.2" "mako")

# ------------------------------------------------------------------ phases
# Each runs in a child bash under `timeout`; its output goes to RESULTS/NN-name.log.

phase_info() {
    echo "== nvidia-smi"
    nvidia-smi || echo "nvidia-smi failed (exit $?)"
    echo "== nvcc --version"
    if command -v nvcc > /dev/null; then nvcc --version; else echo "nvcc: not found"; fi
    echo "== toolkit"
    echo "CUDA_ROOT=${CUDA_ROOT:-not found}"
    echo "libcuda for linking: ${LIBCUDA_DIRS:-none found}"
    echo "libcuda.so.1 at run time: $(ldconfig -p 2> /dev/null | awk '/libcuda\.so\.1 /{print $NF; exit}')"
    echo "compilers: $(command -v g++ c++ gcc | tr '\n' ' ')"
    echo "== python"
    "$PYTHON" -c 'import sys, sysconfig, os
print(sys.version.replace("\n", " "))
inc = sysconfig.get_paths()["include"]
print("Python.h:", "present" if os.path.exists(os.path.join(inc, "Python.h")) else "MISSING", inc)'
    local py others=()
    for py in /usr/bin/python3.* /usr/local/bin/python3.*; do
        [[ "$py" =~ python3\.[0-9]+$ ]] && others+=("$py")
    done
    echo "other pythons (for PYTHON=...): ${others[*]:-none}"
    for m in numpy torch pycuda islpy; do
        "$PYTHON" -c "import $m; print('system $m', getattr($m, '__version__', '?'))" 2> /dev/null \
            || echo "system $m: not importable"
    done
    echo "== machine"
    uname -a
    echo "cpus: $(nproc)"
    free -g 2> /dev/null | head -2
    df -h "$ROOT" 2> /dev/null | tail -1
    echo "== wheelhouse"
    ls "$ROOT/wheelhouse" 2> /dev/null || echo "wheelhouse/ is missing: run scripts/dev/fetch_gpu_deps.sh"
}

phase_venv() {
    if "$VPY" -m pip --version 2> /dev/null; then
        echo "reusing $VENV"
        return 0
    fi
    rm -rf "$VENV"
    if "$PYTHON" -m venv --system-site-packages "$VENV"; then
        "$VPY" -m pip --version
        return
    fi
    # Debian's Python without python3-venv has no ensurepip: make the venv bare, then run
    # pip from its wheel (a wheel is a zip that Python can import from) to install itself.
    echo "venv with pip failed; trying --without-pip and the pip wheel"
    rm -rf "$VENV"
    local pip_wheel
    pip_wheel="$(ls "$ROOT"/wheelhouse/pip-*.whl | sort -V | tail -1)"
    "$PYTHON" -m venv --system-site-packages --without-pip "$VENV" &&
        "$VPY" "$pip_wheel/pip" install --no-index --find-links "$ROOT/wheelhouse" pip &&
        "$VPY" -m pip --version
}

phase_deps() {
    "$VPY" -m pip install --no-index --find-links "$ROOT/wheelhouse" "${DEPS[@]}" &&
        "$VPY" -m pip list
}

pycuda_works() {
    "$VPY" -c 'import pycuda, pycuda.autoprimaryctx, pycuda.driver as drv
dev = drv.Context.get_device()
print("PyCUDA", pycuda.VERSION_TEXT, "on", dev.name(), "sm_%d%d" % dev.compute_capability(),
      "driver CUDA", drv.get_driver_version(), "built for", drv.get_version())'
}

phase_pycuda() {
    if pycuda_works; then
        echo "PyCUDA already installed"
        return 0
    fi
    echo "== a PyCUDA wheel from wheelhouse/ (one a previous run built here)"
    if "$VPY" -m pip install --no-index --find-links "$ROOT/wheelhouse" --only-binary pycuda \
        pycuda && pycuda_works; then
        return 0
    fi
    "$VPY" -m pip uninstall -y pycuda > /dev/null 2>&1
    build_pycuda && pycuda_works
}

build_pycuda() {
    echo "== building PyCUDA from its sdist"
    local sdist src
    sdist="$(ls "$ROOT"/wheelhouse/pycuda-*.tar.gz 2> /dev/null | sort -V | tail -1)"
    if [[ -z "$sdist" ]]; then
        echo "no pycuda-*.tar.gz in wheelhouse/: run scripts/dev/fetch_gpu_deps.sh"
        return 1
    fi
    if [[ -z "${CUDA_ROOT:-}" ]]; then
        echo "no CUDA toolkit found (include/cuda.h under CUDA_ROOT, CUDA_HOME, nvcc's" \
            "prefix, /usr/local/cuda*); set CUDA_ROOT"
        return 1
    fi
    if ! "$VPY" -c 'import os, sys, sysconfig
sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))'; then
        echo "Python.h is missing (the python3-dev package): PyCUDA cannot be built here"
        return 1
    fi
    mkdir -p "$WORK/pycuda-src" "$WORK/dist"
    tar xzf "$sdist" -C "$WORK/pycuda-src"
    src="$(ls -d "$WORK"/pycuda-src/pycuda-* | head -1)"
    write_siteconf > "$src/siteconf.py"
    cat "$src/siteconf.py"
    "$VPY" -m pip wheel --no-index --find-links "$ROOT/wheelhouse" --no-build-isolation \
        --no-deps -w "$WORK/dist" "$src" || return 1
    cp "$WORK"/dist/pycuda-*.whl "$RESULTS/"  # reusable: copy it into wheelhouse/ next time
    "$VPY" -m pip install --no-index --find-links "$ROOT/wheelhouse" "$WORK"/dist/pycuda-*.whl
}

write_siteconf() {
    # PyCUDA's aksetup reads siteconf.py from its source directory; without one it waits
    # 10 s and guesses. curand is off: polyopt does not use it and its headers may be absent.
    local dirs=() d
    for d in $LIBCUDA_DIRS; do dirs+=("'$d'"); done
    echo "CUDA_ROOT = '$CUDA_ROOT'"
    echo "CUDA_INC_DIR = ['$CUDA_ROOT/include']"
    echo "CUDADRV_LIB_DIR = [$(IFS=,; echo "${dirs[*]}")]"
    echo "CUDADRV_LIBNAME = ['cuda']"
    echo "CUDA_ENABLE_CURAND = False"
}

phase_polyopt() {
    cd "$ROOT" &&
        "$VPY" -m pip install --no-index --no-deps --no-build-isolation -e . &&
        "$VPY" -c 'import polyopt, polyopt.kernels as k; print("polyopt", polyopt.__version__,
              "from", polyopt.__file__, "with", len(k.names()), "kernels")'
}

phase_tests() {
    cd "$ROOT" &&
        "$VPY" -m pytest -q -m "gpu or cuda" tests --junitxml "$RESULTS/pytest-gpu.xml"
}

phase_bench() {
    local extra
    read -r -a extra <<< "${BENCH_ARGS:-}"  # words, e.g. "--quick --repeat 50"
    # The console script that phase_polyopt's `pip install -e .` put in the venv.
    cd "$ROOT" &&
        "$VENV/bin/polyopt" bench gpu "${extra[@]}" --json "$RESULTS/bench_gpu.json" \
            --md "$RESULTS/bench_gpu.md"
}

if [[ "${1:-}" == __phase ]]; then  # the child that runs one phase
    "phase_$2"
    exit
fi

# ------------------------------------------------------------------ setup
find_cuda_root() {
    local nv prefix c
    nv="$(command -v nvcc || true)"
    # nvcc may be a wrapper script elsewhere on the PATH: then its prefix has no cuda.h.
    prefix="${nv:+$(dirname "$(dirname "$(readlink -f "$nv")")")}"
    for c in "${CUDA_ROOT:-}" "${CUDA_HOME:-}" "${CUDA_PATH:-}" "$prefix" /usr/local/cuda \
        $(ls -d /usr/local/cuda-* 2> /dev/null | sort -V -r) /opt/cuda /usr; do
        if [[ -n "$c" && -f "$c/include/cuda.h" ]]; then
            echo "$c"
            return
        fi
    done
}

find_libcuda_dirs() {
    # Linking needs an unversioned libcuda.so: the toolkit's stubs or the driver's own. Where
    # the driver ships only libcuda.so.1, a private symlink stands in. Never put the stubs on
    # LD_LIBRARY_PATH: loaded at run time, they make cuInit fail.
    local d found=() real
    for d in "$CUDA_ROOT/lib64/stubs" "$CUDA_ROOT/lib/stubs" \
        "$CUDA_ROOT/targets/x86_64-linux/lib/stubs" /usr/lib/x86_64-linux-gnu /usr/lib64 \
        /usr/local/nvidia/lib64; do
        [[ -e "$d/libcuda.so" ]] && found+=("$d")
    done
    if ((${#found[@]} == 0)); then
        real="$(ldconfig -p 2> /dev/null | awk '/libcuda\.so\.1 /{print $NF; exit}')"
        if [[ -n "$real" ]]; then
            mkdir -p "$WORK/libcuda"
            ln -sf "$real" "$WORK/libcuda/libcuda.so"
            found+=("$WORK/libcuda")
        fi
    fi
    echo "${found[*]:-}"
}

RESULTS="${OUT:-$ROOT/gpu_results}"
mkdir -p "$RESULTS"
RESULTS="$(cd "$RESULTS" && pwd)"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
BUDGET_S="${GPU_CHECK_BUDGET_S:-470}"
RESERVE_S=10  # for the summary at the end
PYTHON="${PYTHON:-python3}"
VENV="${GPU_VENV:-$ROOT/.gpuvenv}"
VPY="$VENV/bin/python"
CUDA_ROOT="$(find_cuda_root)"
if [[ -n "$CUDA_ROOT" ]]; then
    export CUDA_HOME="$CUDA_ROOT"  # polyopt's nvcc lookup falls back to $CUDA_HOME/bin/nvcc
    command -v nvcc > /dev/null || export PATH="$CUDA_ROOT/bin:$PATH"
fi
LIBCUDA_DIRS="$( [[ -n "$CUDA_ROOT" ]] && find_libcuda_dirs)"
# pip must not look for a network (its version check would wait on a timeout).
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
export POLYOPT_CACHE_DIR="${POLYOPT_CACHE_DIR:-$WORK/polyopt-cache}"
export ROOT RESULTS WORK PYTHON VENV VPY CUDA_ROOT LIBCUDA_DIRS BENCH_ARGS="${BENCH_ARGS:-}"

# ------------------------------------------------------------------ running the phases
declare -A STATUS=()
ORDER=()
SUMMARY=()

elapsed() { echo $((SECONDS - START)); }

# run_phase NAME CAP KEEP [NEEDS...]: at most CAP seconds, leaving KEEP seconds of the budget
# for the phases after it; skipped when a phase it NEEDS did not pass.
run_phase() {
    local name="$1" cap="$2" keep="$3" need limit started rc status log
    shift 3
    ORDER+=("$name")
    log="$RESULTS/$(printf %02d "${#ORDER[@]}")-$name.log"
    for need in "$@"; do
        if [[ "${STATUS[$need]:-}" != passed ]]; then
            note "$name" "skipped ($need did not pass)" 0 "$log"
            return
        fi
    done
    limit=$((BUDGET_S - RESERVE_S - $(elapsed) - keep))
    ((limit > cap)) && limit=$cap
    if ((limit < 5)); then
        note "$name" "skipped (no time left in the ${BUDGET_S} s budget)" 0 "$log"
        return
    fi
    echo "---- $name (up to ${limit} s; log: $log)"
    started=$SECONDS
    if command -v timeout > /dev/null; then
        timeout -k 10 "$limit" bash "$SELF" __phase "$name" > "$log" 2>&1
    else  # no coreutils timeout: the phase runs unbounded
        bash "$SELF" __phase "$name" > "$log" 2>&1
    fi
    rc=$?
    case $rc in
        0) status=passed ;;
        124 | 137) status="TIMED OUT after ${limit} s" ;;
        *) status="FAILED (exit $rc)" ;;
    esac
    note "$name" "$status" $((SECONDS - started)) "$log"
}

note() {  # note NAME STATUS SECONDS LOG
    STATUS[$1]="$2"
    [[ -f "$4" ]] || echo "$2" > "$4"
    SUMMARY+=("$(printf '%-8s %-48s %4d s' "$1" "$2" "$3")")
    echo "     $1: $2 ($3 s)"
}

START=$SECONDS
echo "gpu_check: results in $RESULTS; budget ${BUDGET_S} s; CUDA_ROOT=${CUDA_ROOT:-none}"
run_phase info 40 400
sed -n '1,/^== machine/p' "$RESULTS/01-info.log" | head -60  # GPU, toolkit, Python: on stdout
run_phase venv 60 360
run_phase deps 120 300 venv
run_phase pycuda 240 180 deps
run_phase polyopt 60 170 deps
run_phase tests 150 150 polyopt
run_phase bench 300 0 polyopt

{
    echo "gpu_check summary ($(date -u +%Y-%m-%dT%H:%M:%SZ), $(elapsed) s of ${BUDGET_S} s)"
    printf '%s\n' "${SUMMARY[@]}"
    grep -m1 -A0 '^PyCUDA ' "$RESULTS"/*-pycuda.log 2> /dev/null
    tail -n 3 "$RESULTS"/*-tests.log 2> /dev/null | grep -E "passed|failed|error" | tail -1
} > "$RESULTS/summary.txt"

for name in "${ORDER[@]}"; do  # each failed phase's errors, for the output tail
    if [[ "${STATUS[$name]:-}" != passed && "${STATUS[$name]:-}" != skipped* ]]; then
        log="$(ls "$RESULTS"/*-"$name".log)"
        echo "==== $name: error lines, then the last lines, of $log (cut at 240 characters)"
        # Compiler logs hold multi-kilobyte command lines: the device runner keeps only the
        # last 12,000 characters of the output, so keep each line short.
        tail -n 300 "$log" | grep -E -i "error|fatal|cannot|not found|no such file|missing|Traceback" |
            cut -c1-240 | tail -n 12
        echo "  ..."
        tail -n 6 "$log" | cut -c1-240
    fi
done
if [[ -f "$RESULTS/bench_gpu.md" ]]; then
    echo "==== bench_gpu.md"
    cat "$RESULTS/bench_gpu.md"
fi
echo "===="
cat "$RESULTS/summary.txt"
exit 0
