"""The roofline of the machine model: peak arithmetic and memory bandwidth, and the
performance they allow a kernel of a given arithmetic intensity (Williams, Waterman and
Patterson, CACM 2009).

Peak = lanes (``vector_bytes`` / element size) x 2 (an FMA is two flops) x ``fma_units`` x
the clock x ``cores``. The model has neither clock nor bandwidth: the clock is the CPU's
maximum from sysfs (``cpuinfo_max_freq``), else the ``cpu MHz`` of ``/proc/cpuinfo``; the
bandwidth is measured once per process as a numpy copy of 64 MiB (read + write bytes over
the best of five copies), which is what a streaming kernel gets here, not the DRAM's
datasheet figure. Both can be given instead (``freq_ghz``, ``bandwidth_gbs``).
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from polyopt.costmodel.machine import Machine
from polyopt.errors import OptionError

MAX_FREQ = Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
CPUINFO = Path("/proc/cpuinfo")


@dataclass(frozen=True)
class Roofline:
    """Ceilings for one element size; GFLOP/s and GB/s (1e9)."""

    peak_gflops: float
    bandwidth_gbs: float
    freq_ghz: float
    lanes: int
    fma_units: int
    cores: int
    sources: str  # where the clock and the bandwidth came from

    @property
    def ridge(self) -> float:
        """The intensity (flop/byte) where the kernel stops being memory bound."""
        return self.peak_gflops / self.bandwidth_gbs

    def attainable(self, intensity: float) -> float:
        """GFLOP/s the roofline allows at ``intensity`` flop/byte."""
        return min(self.peak_gflops, self.bandwidth_gbs * intensity)

    def describe(self) -> str:
        return (f"peak {self.peak_gflops:.1f} GFLOP/s = {self.lanes} lanes x 2 (FMA) x "
                f"{self.fma_units} FMA units x {self.freq_ghz:.2f} GHz x {self.cores} cores; "
                f"bandwidth {self.bandwidth_gbs:.1f} GB/s; ridge {self.ridge:.2f} flop/B "
                f"({self.sources})")

    def as_dict(self) -> dict[str, object]:
        return {"peak_gflops": self.peak_gflops, "bandwidth_gbs": self.bandwidth_gbs,
                "freq_ghz": self.freq_ghz, "lanes": self.lanes, "fma_units": self.fma_units,
                "cores": self.cores, "ridge": self.ridge, "sources": self.sources}


def roofline(machine: Machine, elem_bytes: int, freq_ghz: float | None = None,
             bandwidth_gbs: float | None = None) -> Roofline:
    """The roofline of ``machine`` for ``elem_bytes``-byte elements (module docstring)."""
    for name, value in (("freq_ghz", freq_ghz), ("bandwidth_gbs", bandwidth_gbs)):
        if value is not None and not (isinstance(value, int | float) and value > 0):
            raise OptionError(f"roofline: {name} must be a positive number, not {value!r}")
    if elem_bytes < 1:
        raise OptionError(f"roofline: element size must be positive, not {elem_bytes}")
    sources = []
    if freq_ghz is None:
        freq_ghz, where = host_ghz()
        sources.append(f"clock from {where}")
    else:
        sources.append("clock given")
    if bandwidth_gbs is None:
        bandwidth_gbs = measured_bandwidth()
        sources.append("bandwidth measured by a numpy copy")
    else:
        sources.append("bandwidth given")
    lanes = max(1, machine.vector_bytes // elem_bytes)
    peak = lanes * 2 * machine.fma_units * freq_ghz * machine.cores
    return Roofline(peak, float(bandwidth_gbs), float(freq_ghz), lanes, machine.fma_units,
                    machine.cores, ", ".join(sources))


@functools.cache
def host_ghz() -> tuple[float, str]:
    """The CPU's clock in GHz and where it was read (1 GHz, said so, when nowhere)."""
    try:
        return int(MAX_FREQ.read_text().strip()) / 1e6, "cpuinfo_max_freq"
    except (OSError, ValueError):
        pass
    try:
        for line in CPUINFO.read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "cpu MHz":
                return float(value) / 1e3, "/proc/cpuinfo cpu MHz"
    except (OSError, ValueError):
        pass
    return 1.0, "nowhere: 1 GHz assumed"


@functools.cache
def measured_bandwidth(nbytes: int = 64 << 20, repeat: int = 5) -> float:
    """GB/s of a numpy copy of ``nbytes`` (bytes read plus bytes written), best of
    ``repeat``; the first copy touches the pages and is not timed."""
    src = np.ones(nbytes // 8)
    dst = np.empty_like(src)
    np.copyto(dst, src)
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - start)
    return 2 * nbytes / best / 1e9
