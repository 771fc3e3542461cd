"""An analytic model of the host CPU, used to pick tile sizes, register tiles and vector widths.

The model follows BLIS (Low et al., "Analytical modeling is enough for high-performance BLIS",
TOMS 2016) and the MLIR GEMM case study (Bondhugula, arXiv 2003.00532).  A :class:`Machine`
holds what ``polyopt.host`` reads from Linux (sysfs caches and ``/proc/cpuinfo``)
or overridden through ``POLYOPT_MACHINE="vector_bytes=32,l2_bytes=1M"``.

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

import dataclasses
import functools
import os
import platform
from collections.abc import Mapping
from dataclasses import dataclass

from polyopt import host as hostinfo
from polyopt.errors import OptionError
from polyopt.host import parse_cache_size

ENV_VAR = "POLYOPT_MACHINE"
ELEM_BYTES = (1, 2, 4, 8, 16)  # 16: long double (numpy longdouble), 16 bytes on x86-64


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


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

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            low = 0 if field.name == "l3_bytes" else 1
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValueError(f"Machine.{field.name} must be an integer >= {low}, not {value!r}")

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
                f"{self.line_bytes}-byte lines")


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
    changes: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        key, eq, value = (s.strip() for s in item.partition("="))
        if key not in valid or not eq:
            raise OptionError(f"{what}: unknown field {key!r} in {item!r}; "
                              f"valid fields: {', '.join(valid)}")
        try:
            changes[key] = parse_cache_size(value)
        except ValueError:
            raise OptionError(f"{what}: {key}={value!r} is not a non-negative integer; "
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
    vector_bytes, registers = _vector_shape(platform.machine(), hostinfo.cpu_flags())
    return Machine(vector_bytes, registers, cores=hostinfo.usable_cores(), **hostinfo.cache_sizes())


def configured(spec: str | Mapping[str, int] | None) -> Machine:
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
    lanes = max(1, machine.vector_bytes // elem_bytes)
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
