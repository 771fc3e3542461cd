"""Compile CUDA sources with nvcc (no GPU needed) and read ptxas' resource report.

``build_cubin`` returns the cubin (cached like C objects, keyed by the source, the flags and
nvcc's version) and, per kernel, what ptxas reports: registers, shared memory, stack frame
and spill traffic. The GPU runtime loads the cubin; the tests check the report.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from polyopt import config, trust
from polyopt.errors import CompileError
from polyopt.runtime import cache, tempdirs

DEFAULT_ARCH = "sm_90"
FLAGS = ("-std=c++17", "-O3", "-Xptxas", "-v", "--cubin")


@dataclass(frozen=True)
class KernelResources:
    """ptxas' report for one kernel."""

    name: str
    registers: int
    shared_bytes: int
    stack_bytes: int
    spill_stores: int
    spill_loads: int

    @property
    def spills(self) -> bool:
        return bool(self.spill_stores or self.spill_loads)


def nvcc_path() -> str | None:
    """nvcc from ``$NVCC``, the PATH or ``$CUDA_HOME/bin``; None when there is none."""
    for cand in (os.environ.get("NVCC"), shutil.which("nvcc"),
                 os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "nvcc")):
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    return None


def build_cubin(source: str, arch: str = DEFAULT_ARCH) -> tuple[bytes, dict[str, KernelResources]]:
    """The cubin of ``source`` for ``arch`` (e.g. ``sm_90``) and ptxas' report per kernel.
    Raises ``CompileError`` (with nvcc's log and the saved source) when nvcc fails or is
    missing."""
    if not re.fullmatch(r"sm_[0-9]+[a-z]?", arch):
        raise CompileError(f"invalid CUDA architecture {arch!r}; expected e.g. 'sm_90'")
    nvcc = nvcc_path()
    if nvcc is None:
        raise CompileError("nvcc was not found (set NVCC or CUDA_HOME, or put it on PATH); it "
                           "is needed to compile CUDA kernels")
    cfg = config.current()
    flags = (*FLAGS, f"-arch={arch}")
    key = cache.cache_key(source, _version(nvcc), flags)
    report_key = cache.cache_key(source + "\0report", _version(nvcc), flags)
    if not cfg.no_cache:
        hit = _cached(cfg, key, report_key)
        if hit is not None:
            return hit[0], parse_report(hit[1])
    data, text = _run(nvcc, flags, source, cfg)
    if not cfg.no_cache:
        with contextlib.suppress(OSError):  # an unusable cache only costs a recompile
            root = cache.usable_root(cfg.cache_dir, key)
            trust.make_private_dirs(root, Path("c", report_key[:2]))
            cache.atomic_write(cache.entry_path(root, key, ".cubin"), data)
            cache.atomic_write(cache.entry_path(root, report_key, ".log"), text.encode())
    return data, parse_report(text)


def _cached(cfg: config.Config, key: str, report_key: str) -> tuple[bytes, str] | None:
    """The cached cubin and ptxas log, when both are there and only we could have written
    them (see :mod:`.trust`); None otherwise."""
    try:
        root = cache.usable_root(cfg.cache_dir, key)
        cache.check_tree(root, Path("c", key[:2]))
        cache.check_tree(root, Path("c", report_key[:2]))
        data = cache.read_file(cache.entry_path(root, key, ".cubin"), "object")
        log = cache.read_file(cache.entry_path(root, report_key, ".log"), "metadata")
        if data is not None and log is not None:
            return data, log.decode(errors="replace")
    except OSError:  # an unusable or untrusted cache: compile afresh
        return None
    return None


def _run(nvcc: str, flags: tuple[str, ...], source: str,
         cfg: config.Config) -> tuple[bytes, str]:
    with tempdirs.private_tempdir("polyopt-nvcc-") as tmp:
        src, out = tmp / "kernel.cu", tmp / "kernel.cubin"
        src.write_text(source)
        argv = [nvcc, *flags, "-o", str(out), str(src)]
        proc = subprocess.run(argv, capture_output=True, text=True, cwd=tmp, check=False,
                              env={**os.environ, "LC_ALL": "C"})
        log = proc.stderr + proc.stdout
        if proc.returncode != 0 or not out.is_file():
            saved = cache.save_failed(cfg.cache_dir, cache.cache_key(source, nvcc, flags),
                                      source)
            raise CompileError(f"nvcc failed (exit {proc.returncode}): {' '.join(argv)}",
                               log.replace(str(src), str(saved)), str(saved))
        return out.read_bytes(), log


@functools.cache
def _version(nvcc: str) -> str:
    proc = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=False)
    lines = proc.stdout.strip().splitlines()
    return f"{os.path.realpath(nvcc)} | {lines[-1] if lines else proc.returncode}"


_FUNCTION = re.compile(r"Function properties for (\w+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Compiling entry function '(\w+)'|Used (\d+) registers(?:.*?(\d+) bytes smem)?")


def parse_report(text: str) -> dict[str, KernelResources]:
    """Per kernel: registers, shared memory, stack and spills, from ``ptxas -v`` output."""
    frames: dict[str, tuple[int, int, int]] = {}
    current = None
    for line in text.splitlines():
        m = _FUNCTION.search(line)
        if m:
            current = m.group(1)
            continue
        m = _FRAME.search(line)
        if m and current is not None:
            frames[current] = (int(m.group(1)), int(m.group(2)), int(m.group(3)))
    out: dict[str, KernelResources] = {}
    entry = None
    for m in _USED.finditer(text):
        if m.group(1):
            entry = m.group(1)
        elif entry is not None:
            stack, stores, loads = frames.get(entry, (0, 0, 0))
            out[entry] = KernelResources(entry, int(m.group(2)), int(m.group(3) or 0), stack,
                                         stores, loads)
            entry = None
    return out
