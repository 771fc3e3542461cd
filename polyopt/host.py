"""What this machine is: the one place that reads the host (``/proc/cpuinfo``, sysfs caches,
CPU affinity, physical memory).

The machine model (``polyopt.costmodel.machine``) sizes tiles from it, the compiler keys
``-march=native`` objects by its fingerprint, the tuning database keys times by its CPU, and
the benchmarks record it. Each reading is taken once per process, except the usable cores
(the OpenMP runtime's thread count, which a program may change).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import hashlib
import os
import platform
import re
from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")
SYSFS_CACHE = Path("/sys/devices/system/cpu/cpu0/cache")
DEFAULT_CACHES = {"line_bytes": 64, "l1d_bytes": 32 << 10, "l1d_ways": 8,
                  "l2_bytes": 1 << 20, "l3_bytes": 8 << 20}
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
# cpuinfo fields that name the processor and its features (what -march=native depends on),
# not ones that change while it runs (MHz, bogomips).
_IDENTITY_KEYS = frozenset({"vendor_id", "cpu family", "model", "model name", "stepping",
                            "flags", "Features", "CPU implementer", "CPU architecture",
                            "CPU variant", "CPU part", "isa", "cpu"})


@functools.cache
def _first_cpu_lines(path: Path = CPUINFO) -> tuple[str, ...]:
    """The lines of the first processor in cpuinfo (none when unreadable)."""
    try:
        return tuple(path.read_text().split("\n\n")[0].splitlines())
    except OSError:
        return ()


def _first_cpu(path: Path = CPUINFO) -> list[tuple[str, str]]:
    """The first processor's ``key: value`` pairs."""
    pairs = (line.partition(":") for line in _first_cpu_lines(path))
    return [(k.strip(), v.strip()) for k, _, v in pairs if k.strip()]


def cpu_model() -> str:
    """The processor's name (``model name``), or what the platform module says."""
    for key, value in _first_cpu():
        if key in ("model name", "Model", "cpu model"):
            return value
    return platform.processor() or platform.machine()


def cpu_flags(path: Path = CPUINFO) -> set[str]:
    """The instruction-set flags (x86 ``flags``, Arm ``Features``)."""
    for key, value in _first_cpu(path):
        if key in ("flags", "Features"):
            return set(value.split())
    return set()


@functools.cache
def fingerprint() -> str:
    """The architecture and a hash of the processor's identity and features."""
    stable = [line for line in _first_cpu_lines() if line.split(":")[0].strip() in _IDENTITY_KEYS]
    if not _first_cpu_lines():
        return f"{platform.machine()}:{platform.processor()}"
    return f"{platform.machine()}:{hashlib.sha256(repr(stable).encode()).hexdigest()[:16]}"


def usable_cores() -> int:
    """The threads a kernel's parallel region gets: the OpenMP runtime's own count
    (``omp_get_max_threads``: ``OMP_NUM_THREADS``, else the CPUs the process could use when
    the runtime started), else the calling thread's affinity, else every CPU.

    Not the affinity first: under ``OMP_PROC_BIND`` a runtime pins the initial thread to
    its first place when it starts, and ``import torch`` starts torch's. That thread's mask
    then holds one CPU while the runtime's teams span them all, and the machine model
    scheduled for one core what ran on two (matmul 1024^3 8.8 ms against 6.8,
    ``scripts/checks/bench_omp_order.py``)."""
    threads = _openmp_threads()
    if threads:
        return threads
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _openmp_threads() -> int | None:
    """``omp_get_max_threads()`` of the libgomp the kernels link (by soname: one already in
    the process, torch's, answers for the runtime they will share), or None without it."""
    lib = _libgomp()
    if lib is None:
        return None
    try:
        return int(lib.omp_get_max_threads()) or None
    except (AttributeError, OSError):
        return None


@functools.cache
def _libgomp() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("gomp")
    if name is None:
        return None
    try:
        return ctypes.CDLL(name)
    except OSError:
        return None


def physical_memory() -> int | None:
    """Bytes of physical memory (None where the OS does not say)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, OSError, ValueError):
        return None


def parse_cache_size(text: str) -> int:
    """Bytes in a size such as ``"48K"``, ``"2048K"``, ``"32M"``, ``"1 GiB"`` or ``"512"``."""
    match = re.fullmatch(r"\s*(\d+)\s*([KMG]?)(?:I?B)?\s*", text.upper())
    if match is None:
        raise ValueError(f"not a cache size: {text!r}")
    return int(match.group(1)) * _UNITS[match.group(2)]


def cache_sizes(root: Path = SYSFS_CACHE) -> dict[str, int]:
    """Line and L1d/L2/L3 sizes and L1d's ways from a sysfs ``cpuN/cache`` folder; defaults
    for what is missing (and an L3 of 0 when the hierarchy was read and has none; a fully
    associative L1d, which sysfs may show as 0 ways, as the default)."""
    found: dict[str, int] = {}
    if not root.is_dir():
        return dict(DEFAULT_CACHES)
    seen_l3 = False
    for index in sorted(root.glob("index*")):
        try:
            level = int((index / "level").read_text())
            kind = (index / "type").read_text().strip()
            size = parse_cache_size((index / "size").read_text())
        except (OSError, ValueError):
            continue
        key = {1: "l1d_bytes", 2: "l2_bytes", 3: "l3_bytes"}.get(level)
        if key is None or kind == "Instruction":
            continue
        seen_l3 = seen_l3 or level == 3
        found[key] = size
        if level == 1:
            with contextlib.suppress(OSError, ValueError):
                ways = int((index / "ways_of_associativity").read_text())
                if ways > 0:
                    found["l1d_ways"] = ways
        if level == 1 or "line_bytes" not in found:
            with contextlib.suppress(OSError, ValueError):
                found["line_bytes"] = int((index / "coherency_line_size").read_text())
    result = {**DEFAULT_CACHES, **found}
    if not seen_l3 and "l1d_bytes" in found:
        result["l3_bytes"] = 0
    return result
