"""An analytic model of the host CPU, used to pick tile sizes, register tiles and vector widths.

The model follows BLIS (Low et al., "Analytical modeling is enough for high-performance BLIS",
TOMS 2016) and the MLIR GEMM case study (Bondhugula, arXiv 2003.00532).  A :class:`Machine`
holds what ``polyopt.host`` reads from Linux (sysfs caches and ``/proc/cpuinfo``), the memory
system as ``polyopt machine --calibrate`` measured it (the host's profile, :func:`measured`),
or overridden through ``POLYOPT_MACHINE="vector_bytes=32,l2_bytes=1M"``. Whatever the source,
each field must lie within its :data:`BOUNDS` (what real machines have, with room): a model
no machine has would only make the scheduler's searches absurdly long (a 1 GiB cache line
once made a 64^3 matmul take 66 s to compile).

GEMM blocking, :func:`gemm_blocking` (``C[MxN] += A[MxK] B[KxN]``; L = lanes = vector_bytes //
elem_bytes; the micro-kernel broadcasts ``mr`` elements of A and loads ``v = nr/L`` vectors of B
per step of k, and keeps ``mr*v`` vector accumulators):

* registers:   ``mr*v + v + 1 <= vector_registers``   (accumulators, B vectors, one broadcast);
* latency:     ``mr*v >= fma_latency * fma_units``    (enough independent FMA chains);
* load issue:  ``mr + v <= mr*v``                      (one load per FMA at most: the loads keep
  pace with the FMA pipes on cores with as many load ports as FMA pipes; without this rule AVX2
  float32 would pick 14x8, 15 loads for 14 FMAs, instead of the classic 6x16);
* among the feasible ``1 <= mr <= 16``, ``1 <= v <= 4`` maximise the compute intensity
  ``mr*nr / (mr+nr)`` (FLOPs per element loaded), ties to the larger ``nr``.  When nothing is
  feasible the load rule, then the latency rule, is dropped.  This gives 14x32 (float32) and
  14x16 (float64) on AVX-512, 6x16 and 6x8 on AVX2 - the BLIS SKX and Haswell kernels;
* ``kc``: the largest multiple of 8 in [16, 512] with ``(mr + nr) * kc * elem_bytes <= L1d/2``;
* ``mc``: the largest multiple of mr in [mr, 1024] with ``mc * kc * elem_bytes <= L2/2``;
* ``nc``: the largest multiple of nr in [nr, 4096] with ``kc * nc * elem_bytes <= S/2``, where S
  is the per-core share of L3, ``L3 / cores`` (L2 when there is no L3).

Generic permutable bands, :func:`cube_tile`: the largest power of two ``T`` in [8, 256] with
``n_arrays * T**min(n_dims, 2) * elem_bytes <= L2/2`` (8 when even that does not fit): each
array touched by the band contributes a ``T x T`` tile (a ``T`` strip for 1-d bands).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import math
import os
import platform
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from polyopt import config, trust
from polyopt import host as hostinfo
from polyopt.errors import OptionError
from polyopt.host import parse_cache_size

ENV_VAR = "POLYOPT_MACHINE"
# Fields a machine profile may set (``polyopt machine --calibrate``).
MEASURED = frozenset({"l3_bytes", "l3_bytes_per_cycle", "memory_bytes_per_cycle",
                      "core_memory_share", "prefetch_streams", "untracked_share",
                      "fork_join_cycles"})
# Fields that take a real number (the rest take integers, sizes such as ``1M`` included).
REAL_FIELDS = frozenset({"memory_bytes_per_cycle", "core_memory_share", "untracked_share",
                         "fork_join_cycles", "l2_bytes_per_cycle", "l3_bytes_per_cycle",
                         "tlb_miss_cycles"})
ELEM_BYTES = (1, 2, 4, 8, 16)  # 16: long double (numpy longdouble), 16 bytes on x86-64


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


@dataclass(frozen=True)
class Bound:
    """The values one field of :class:`Machine` may take."""

    low: float
    high: float
    doc: str
    power_of_two: bool = False
    above_low: bool = False  # ``low`` itself excluded (a rate or a share: > 0)
    none: bool = False  # 0 allowed too (no such level)
    size: bool = False  # shown as a size (KiB, MiB, GiB)

    def allows(self, value: float) -> bool:
        inside = self.low < value <= self.high if self.above_low else \
            self.low <= value <= self.high
        if self.power_of_two:
            inside = inside and int(value) & (int(value) - 1) == 0
        return inside or (self.none and value == 0)

    def describe(self) -> str:
        def show(v: float) -> str:
            return _size(int(v)) if self.size else f"{v:g}"

        text = f"> {show(self.low)} and <= {show(self.high)}" if self.above_low else \
            f"{show(self.low)}..{show(self.high)}"
        text = f"a power of two in {text}" if self.power_of_two else text
        return f"0 or {text}" if self.none else text


KIB, GIB = 1 << 10, 1 << 30
BOUNDS: dict[str, Bound] = {
    "vector_bytes": Bound(8, 256, "SIMD register bytes: 16 (SSE, NEON) to 256 (2048-bit "
                          "SVE)", power_of_two=True),
    "vector_registers": Bound(4, 128, "architectural vector registers: 16 or 32 on real cores"),
    "fma_latency": Bound(1, 64, "cycles from an FMA to its result: 3-6 on real cores"),
    "fma_units": Bound(1, 8, "FMA pipes a core: 1-4 on real cores"),
    "cores": Bound(1, 4096, "cores a kernel runs on: the largest hosts have ~1000"),
    "line_bytes": Bound(16, 1024, "cache line bytes: 64 (x86), 64-128 (Arm), 256 (A64FX)",
                        power_of_two=True),
    "l1d_bytes": Bound(KIB, 16 << 20, "L1d bytes: 16-192 KiB on real cores", size=True),
    "l1d_ways": Bound(1, 64, "L1d associativity: 4-16 on real cores"),
    "l2_bytes": Bound(KIB, GIB, "L2 bytes a core: 256 KiB-16 MiB on real cores", size=True),
    "l3_bytes": Bound(KIB, 64 * GIB, "last-level bytes: up to ~1.1 GiB (EPYC with 3D V-Cache);"
                      " 0: none", none=True, size=True),
    "memory_bytes_per_cycle": Bound(0, 4096, "bytes a cycle from memory: 3-300 on real hosts",
                                    above_low=True),
    "core_memory_share": Bound(0, 1, "share of the memory rate one core streams alone",
                               above_low=True),
    "prefetch_streams": Bound(1, 1024, "streams a core's prefetchers follow: 8-32 on real "
                              "cores; calibration tries up to 128"),
    "untracked_share": Bound(0, 1, "share of a core's rate the streams past prefetch_streams "
                             "get", above_low=True),
    "fork_join_cycles": Bound(0, 1e9, "cycles of a parallel region's fork and join: 3e3-1e5 "
                              "on real hosts, up to 2e7 with a VM's idle vCPUs", above_low=True),
    "loads_per_cycle": Bound(1, 8, "loads a core issues a cycle: 2-3 on real cores"),
    "copy_loads_per_cycle": Bound(1, 8, "element loads a cycle in a gathering copy: 2-3 on "
                                  "real cores"),
    "store_forward_cycles": Bound(1, 64, "cycles of a store-to-load forward: 4-5 on real "
                                  "cores"),
    "l2_bytes_per_cycle": Bound(0, 1024, "bytes a cycle from L2 into L1: 32-64 on real cores",
                                above_low=True),
    "l3_bytes_per_cycle": Bound(0, 1024, "bytes a cycle from L3 into L2, per core: 16-32 on "
                                "real cores", above_low=True),
    "page_bytes": Bound(KIB, GIB, "page bytes: 4 KiB (x86, most Arm), 16-64 KiB (Arm), 2 MiB "
                        "huge pages", power_of_two=True, size=True),
    "l1_tlb_entries": Bound(1, 65536, "first-level data TLB entries: 32-96 on real cores"),
    "tlb_entries": Bound(1, 1 << 20, "second-level TLB entries: 1024-3072 on real cores"),
    "tlb_miss_cycles": Bound(0, 1e4, "cycles of a page walk that hits the caches: 20-40 on "
                             "real cores", above_low=True),
}
"""Every field's bounds, what real machines have with room to spare (the scheduler's
searches grow with some of them: a cache line's elements, the registers, the streams)."""


@dataclass(frozen=True)
class Machine:
    """One core of the target CPU and its cache hierarchy (sizes in bytes)."""

    vector_bytes: int
    vector_registers: int
    fma_latency: int = 4
    """Cycles from an FMA to its result. Not detected: 4 on every host, as on Intel's cores
    since Skylake and AMD's since Zen 3 (Zen 2: 5); set it with ``POLYOPT_MACHINE``
    (``fma_latency=5``) for a core that differs. With ``fma_units`` it sets the register
    tile's least accumulator count (``gemm_blocking``'s latency rule)."""
    fma_units: int = 2
    """FMA pipes per core. Not detected: 2 on every host (a one-pipe core: ``fma_units=1``)."""
    cores: int = 1
    line_bytes: int = 64
    l1d_bytes: int = 32 << 10
    l1d_ways: int = 8
    """L1d associativity (sysfs ``ways_of_associativity``): lines whose addresses agree
    modulo ``l1d_bytes / l1d_ways`` share a set of this many. It bounds a register tile's
    rows over an operand read in place (``register_tile._conflict_rows``)."""
    l2_bytes: int = 1 << 20
    l3_bytes: int = 8 << 20
    """The last level, shared by the cores: sysfs's size, or the part of it a virtual
    machine really gets as measured by ``polyopt machine --calibrate`` (the largest
    buffer every core's read stream still reads faster than from memory)."""

    # ---- the memory system: measured (``polyopt machine --calibrate``, the profile this
    # host keeps, ``polyopt.runtime.probe``); the defaults are the 2-core AMD EPYC VM's of
    # BENCHMARKS.md. Not read from the host: no kernel interface describes them.
    memory_bytes_per_cycle: float = 3.0
    """Bytes per cycle from memory, shared by the cores: every core streaming reads of a
    buffer far past the last level (the default: numpy's column sum of 4096 x 4096 float32
    in 8.8 ms, ~7 GB/s at ~2.5 GHz)."""
    core_memory_share: float = 0.71
    """The share of ``memory_bytes_per_cycle`` one core streams alone (8 interleaved
    streams, one thread against every thread): a core keeps too few lines in flight to take
    all of it. A ratio within one run, so it holds through a VM's slow phases."""
    prefetch_streams: int = 12
    """Streams from memory one core's prefetchers follow at once (``costmodel/streams``):
    the most rows, read a line of each at a time, that one thread still reads at the rate of
    a few (the default: 4-12 rows at 0.073-0.115 lines a cycle, 16 at 0.061-0.065, 24-128 at
    0.038-0.069). A host on which no count tried reads slower gets the largest tried."""
    untracked_share: float = 0.45
    """The share of a core's streaming rate the lines of streams beyond
    ``prefetch_streams`` get, the followed ones at the full rate: fitted to the rows past
    ``prefetch_streams`` (the default's 24-128 rows fit 0.35-0.6)."""
    fork_join_cycles: float = 15000.0
    """Cycles of one OpenMP parallel region's fork and join, which decides which nests run
    in parallel (:meth:`parallel_pays`): calibration times an empty region 0.1 ms
    after the last (a kernel called in a loop; the median of 100; the Intel VM of the
    twenty-first round: 3900 cycles, and 2.5e7 after 1 ms, its idle vCPUs descheduled,
    which no fork price makes up for). ``python3 scripts/calibrate/bench_fork_join.py`` times it
    after other gaps: on the 2-core AMD VM (3.5 GHz) about 3000 cycles back to back,
    4000-6000 after 0.01-0.1 ms of sleep and 8800-10200 after 1 ms, 3e5 after 10 ms under
    ``OMP_PROC_BIND=spread`` and 2e7 unbound (this host's vCPUs descheduled). The default
    sits above the 1 ms row; it is where the ``--quick`` 30x20x25 matmul of
    ``polyopt/bench/ops.py`` ran 4x slower in parallel."""

    # ---- facts of the core the host does not report (no kernel interface, no CPUID field
    # read): the values of Intel's cores since Skylake and AMD's since Zen (Agner Fog's
    # tables), which the cost model and the pipeline read; BENCHMARKS.md, "Decisions and how
    # to re-measure them", checks each. Set one with ``POLYOPT_MACHINE`` for a core that
    # differs.
    loads_per_cycle: int = 2
    """Loads a core issues per cycle (two load ports on x86 since Sandy Bridge and on
    Neoverse); with ``fma_units`` it sets the model's compute time."""
    copy_loads_per_cycle: int = 2
    """Element loads per cycle in a copy gathering one element per lane (a depthwise input
    copied into channel blocks): two load ports on Intel since Haswell, AMD since Zen."""
    store_forward_cycles: int = 5
    """Cycles of a store-to-load forward (4-5): with ``fma_latency``, the cost of a sum kept
    in memory between two filter taps."""
    l2_bytes_per_cycle: float = 32.0
    """Bytes per cycle from L2 into L1: half a line (Zen 2-4, Skylake)."""
    l3_bytes_per_cycle: float = 16.0
    """Bytes per cycle from L3 into L2, per core: a quarter line (Zen, Skylake-SP). Measured
    (``polyopt machine --calibrate``) as every core's rate together over a buffer past the
    L2s, per core: 6.8-7.2 on the Intel Xeon VM, where 16 made a 1x1 convolution's blocked
    layout look free of its input's reads from L3 once per channel block."""
    page_bytes: int = 4096
    """Page size: the TLB's granule in the model (Linux's default pages)."""
    l1_tlb_entries: int = 64
    """First-level data TLB entries (Zen 2-4: 64-72; Skylake: 64); CPUID has them, sysfs
    not: a strip of a transposed access whose rows are pages apart keeps no more rows."""
    tlb_entries: int = 2048
    """Second-level TLB entries (Zen 2-3: 2048; Skylake: 1536): a loop whose consecutive
    iterations touch more pages walks a page per access."""
    tlb_miss_cycles: float = 30.0
    """Cycles of a page walk that hits the caches."""

    def __post_init__(self) -> None:
        """Each field of the right type and within its :data:`BOUNDS`; OptionError (a
        ValueError) names the field, the value and the range otherwise."""
        for field in dataclasses.fields(self):
            name, value, bound = field.name, getattr(self, field.name), BOUNDS[field.name]
            real = name in REAL_FIELDS
            types = (int, float) if real else (int,)
            if isinstance(value, bool) or not isinstance(value, types) \
                    or (real and not math.isfinite(value)):
                raise OptionError(f"Machine.{name} must be {'a number' if real else 'an integer'}"
                                  f" ({bound.describe()}), not {value!r}")
            if not bound.allows(value):
                raise OptionError(f"Machine.{name} = {value!r} is out of range: it must be "
                                  f"{bound.describe()} ({bound.doc})")

    def lanes(self, elem_bytes: int) -> int:
        """Elements of ``elem_bytes`` bytes per vector register (at least one)."""
        _check_elem(elem_bytes)
        return max(1, self.vector_bytes // elem_bytes)

    def parallel_pays(self, serial_cycles: float) -> bool:
        """Whether a nest predicted at ``serial_cycles`` on one core gains from a parallel
        region: the most the other cores can save, ``serial_cycles * (1 - 1 / cores)`` with
        the work evenly shared, must exceed one fork and join (``fork_join_cycles``)."""
        cores = self.cores
        return cores > 1 and serial_cycles * (cores - 1) / cores > self.fork_join_cycles

    def spec(self) -> str:
        """Every field as a ``POLYOPT_MACHINE`` string: a process given it models exactly
        this machine, whatever its own CPU affinity (a tuner's worker started by a thread
        that OpenMP pinned to one CPU would otherwise see one core)."""
        return ",".join(f"{f.name}={getattr(self, f.name)}" for f in dataclasses.fields(self))

    def describe(self) -> str:
        l3 = _size(self.l3_bytes) if self.l3_bytes else "none"
        return (f"{self.vector_bytes * 8}-bit vectors x {self.vector_registers} registers, "
                f"FMA latency {self.fma_latency} x {self.fma_units} pipes, {self.cores} cores, "
                f"L1d {_size(self.l1d_bytes)} ({self.l1d_ways}-way), "
                f"L2 {_size(self.l2_bytes)}, L3 {l3}, "
                f"{self.line_bytes}-byte lines; memory {self.memory_bytes_per_cycle:.3g} "
                f"bytes/cycle, {self.core_memory_share:.2f} of it from one core, "
                f"{self.prefetch_streams} prefetched streams a core "
                f"(others at {self.untracked_share:.2f} of the rate)")


@dataclass(frozen=True)
class Blocking:
    """GEMM blocking: an ``mr x nr`` register tile inside ``mc x kc`` / ``kc x nc`` cache tiles."""

    lanes: int
    mr: int
    nr: int
    kc: int
    mc: int
    nc: int

    def describe(self) -> str:
        return (f"register tile {self.mr}x{self.nr} ({self.nr // self.lanes} vectors of "
                f"{self.lanes} lanes), kc={self.kc} mc={self.mc} nc={self.nc}")


def _vector_shape(arch: str, flags: set[str]) -> tuple[int, int]:
    """``(vector_bytes, vector_registers)`` from ``platform.machine()`` and the cpuinfo flags."""
    arch = arch.lower()
    if arch in ("aarch64", "arm64"):
        return 16, 32
    if "avx512f" in flags:
        return 64, 32
    if "avx2" in flags or "avx" in flags:
        return 32, 16
    return 16, 16


def _override(machine: Machine, spec: str, what: str = ENV_VAR) -> Machine:
    """``machine`` with the ``key=value`` fields of a comma list replaced (values may be ``1M``)."""
    valid = [f.name for f in dataclasses.fields(Machine)]
    changes: dict[str, Any] = {}  # each field's own type, checked by Machine
    for item in filter(None, (part.strip() for part in spec.split(","))):
        key, eq, value = (s.strip() for s in item.partition("="))
        if key not in valid or not eq:
            raise OptionError(f"{what}: unknown field {key!r} in {item!r}; "
                              f"valid fields: {', '.join(valid)}")
        try:
            changes[key] = float(value) if key in REAL_FIELDS else parse_cache_size(value)
        except ValueError:
            kind = "a number" if key in REAL_FIELDS else "a non-negative integer"
            raise OptionError(f"{what}: {key}={value!r} is not {kind}; "
                              f"valid fields: {', '.join(valid)}") from None
    try:
        return dataclasses.replace(machine, **changes)
    except ValueError as err:
        raise OptionError(f"{what}: {err}; valid fields: {', '.join(valid)}") from None


def host() -> Machine:
    """The machine polyopt runs on, with ``POLYOPT_MACHINE`` overrides applied. The hardware
    is read once per process; the variable at every call, so a change applies to the next
    compile."""
    return _overridden(os.environ.get(ENV_VAR, ""))


@functools.lru_cache(maxsize=16)
def _overridden(spec: str) -> Machine:
    return _override(_hardware(), spec)


@functools.cache
def _hardware() -> Machine:
    read, path = unmeasured(), config.machine_profile()
    return read if path is None else measured(read, path)


def unmeasured() -> Machine:
    """The host as Linux describes it (cpuinfo, sysfs), before its profile: the memory
    fields at their defaults. What a calibration starts from."""
    vector_bytes, registers = _vector_shape(platform.machine(), hostinfo.cpu_flags())
    detected = {"cores": hostinfo.usable_cores(), **hostinfo.cache_sizes()}
    return Machine(vector_bytes, registers, **_plausible(detected))


def _plausible(detected: Mapping[str, int]) -> dict[str, int]:
    """The fields read from the host that lie within their :data:`BOUNDS`; one that does not
    (a VM's sysfs may show anything) takes its default, with a warning, so that what the host
    says never fails every compile."""
    kept = {}
    for name, value in detected.items():
        if BOUNDS[name].allows(value):
            kept[name] = value
        else:
            trust.warn_once(f"the host reports {name} = {value}, not {BOUNDS[name].describe()}:"
                            " the machine model takes the default (set it with POLYOPT_MACHINE)")
    return kept


def measured(machine: Machine, path: Path) -> Machine:
    """``machine`` with the measured fields of the profile at ``path`` (:func:`save_profile`),
    or ``machine`` itself when there is none. A profile is data from disk, read under the
    trust rule of cache files (:func:`polyopt.trust.read_trusted`): one others could have
    written, or no regular file, is ignored with a warning; anything but a JSON object of
    known measured fields with values in their :data:`BOUNDS` is refused, naming the file."""
    text = _profile_text(path)
    if text is None:
        return machine
    try:
        data = json.loads(text)
        fields = data["fields"]
        if not isinstance(fields, dict) or set(fields) - MEASURED:
            raise ValueError(f"fields must be some of {', '.join(sorted(MEASURED))}")
        return dataclasses.replace(machine, **fields)
    except (ValueError, KeyError, TypeError, RecursionError) as err:
        raise OptionError(f"machine profile {path}: {err} (remove it, or run `polyopt "
                          "machine --calibrate` again; POLYOPT_PROFILE=none ignores it)") from None


def _profile_text(path: Path) -> bytes | None:
    """The profile's bytes; None when it is missing, or refused (with a warning, once) as
    a file others could have written, in a directory others could write to, not a regular
    file or larger than ``CAPS["profile"]``."""
    found = trust.tree_problem(path.parent)
    if found is not None:
        if os.path.lexists(path):
            trust.warn_once(f"ignoring the machine profile {path}: {found[0]} {found[1]}")
        return None
    try:
        return trust.read_trusted(path, trust.CAPS["profile"])
    except FileNotFoundError:
        return None
    except OSError as err:  # UntrustedLocationError included
        trust.warn_once(f"ignoring the machine profile {path}: {err}")
        return None


def save_profile(path: Path, fields: Mapping[str, float], readings: Mapping[str, object]) -> None:
    """Write a profile: the ``fields`` a machine takes (checked here) and the ``readings``
    they came from, kept for a person to read. Its directory is made private (0700) and
    checked as a cache directory is; the file is written 0600 and moved into place."""
    checked: dict[str, Any] = dict(fields)
    dataclasses.replace(Machine(64, 32), **checked)  # an OptionError names a bad value
    trust.make_private_dirs(path.parent)
    text = json.dumps({"fingerprint": hostinfo.fingerprint(), "cpu": hostinfo.cpu_model(),
                       "fields": dict(fields), "readings": dict(readings)}, indent=1)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text + "\n")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    forget()


def forget() -> None:
    """Read the host, and its profile, again at the next :func:`host` (they are read once
    a process otherwise)."""
    _hardware.cache_clear()
    _overridden.cache_clear()


def configured(spec: str | Mapping[str, float] | None) -> Machine:
    """The host's model with the overrides of a compile option: a ``POLYOPT_MACHINE``-style
    string or a mapping of field names to values."""
    if spec is None:
        return host()
    if isinstance(spec, Mapping):
        spec = ",".join(f"{k}={v}" for k, v in spec.items())
    if not isinstance(spec, str):
        raise OptionError(f"option machine must be a string or a mapping, not {spec!r}")
    return _override(host(), spec, "option machine")


def _check_elem(elem_bytes: int) -> None:
    if elem_bytes not in ELEM_BYTES:
        raise ValueError(f"elem_bytes must be one of {ELEM_BYTES}, not {elem_bytes!r}")


def _largest_multiple(step: int, low: int, high: int, fits: int) -> int:
    """The largest multiple of ``step`` that is <= min(fits, high), and at least ``low``."""
    return max(low, min(fits, high) // step * step)


def _register_tile(machine: Machine, lanes: int) -> tuple[int, int]:
    """``(mr, vectors)`` of the register tile, by the rules of the module docstring."""
    need = machine.fma_latency * machine.fma_units
    pairs = [(mr, v) for mr in range(1, 17) for v in range(1, 5)
             if mr * v + v + 1 <= machine.vector_registers]
    rules = [lambda mr, v: mr * v >= need and mr + v <= mr * v, lambda mr, v: mr * v >= need]
    for rule in rules:
        feasible = [(mr, v) for mr, v in pairs if rule(mr, v)]
        if feasible:
            pairs = feasible
            break
    if not pairs:
        return 1, 1
    return max(pairs, key=lambda p: (p[0] * p[1] * lanes / (p[0] + p[1] * lanes), p[1]))


def gemm_blocking(machine: Machine, elem_bytes: int) -> Blocking:
    """Register and cache tiles for a GEMM on ``elem_bytes``-byte elements (docstring model)."""
    _check_elem(elem_bytes)
    lanes = machine.lanes(elem_bytes)
    mr, vectors = _register_tile(machine, lanes)
    nr = vectors * lanes
    kc = _largest_multiple(8, 16, 512, machine.l1d_bytes // 2 // ((mr + nr) * elem_bytes))
    mc = _largest_multiple(mr, mr, 1024, machine.l2_bytes // 2 // (kc * elem_bytes))
    share = machine.l3_bytes // machine.cores if machine.l3_bytes else machine.l2_bytes
    nc = _largest_multiple(nr, nr, 4096, share // 2 // (kc * elem_bytes))
    return Blocking(lanes=lanes, mr=mr, nr=nr, kc=kc, mc=mc, nc=nc)


def cube_tile(machine: Machine, elem_bytes: int, n_arrays: int, n_dims: int) -> int:
    """Tile size for every loop of a generic permutable band (see the module docstring)."""
    _check_elem(elem_bytes)
    if n_arrays < 1 or n_dims < 1:
        raise ValueError(f"n_arrays and n_dims must be >= 1, not {n_arrays} and {n_dims}")
    budget = machine.l2_bytes // 2
    tile = 8
    while tile < 256 and n_arrays * (2 * tile) ** min(n_dims, 2) * elem_bytes <= budget:
        tile *= 2
    return tile
