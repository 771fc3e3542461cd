"""Measuring the host's memory system: the machine model's measured fields
(``Machine.MEASURED``), which ``polyopt machine --calibrate`` keeps in the host's profile.

Each figure is the fastest of a few passes of a small C loop, compiled the way kernels are
(``runtime.compiler``), over a buffer each thread reads its own part of, summed with vector
adds of the host's width in four chains (the adds never wait); a cycle is a chain of
dependent integer adds in the same library, so figures are in the core's own clock whatever
its frequency does. What is measured, and the rule that turns it into a field:

* ``memory_bytes_per_cycle``: every thread reading a buffer far past the last level;
* ``core_memory_share``: 8 interleaved streams (rows a page and a line apart, a line of each
  at a time) on one thread over the same on every thread;
* ``l3_bytes``: every thread reading buffers from ``4 x L2 x cores`` up, sizes ``sqrt(2)``
  apart: the largest whose rate is still above the geometric mean of the first size's and
  memory's (where the last level gives less than 1.5x memory's rate, none is set: sysfs's
  stays);
* ``prefetch_streams``: one thread reading 2-64 rows together, as above: the most rows
  that, with every count below, read at 0.8 or more of the rate of 4-8 rows;
* ``untracked_share``: fitted (median) to the counts past ``prefetch_streams``,
  ``rate = base / (p/n + (1 - p/n) / share)`` (``costmodel/streams.share``); not set when
  no count was past it;
* ``fork_join_cycles``: an empty parallel region 0.1 ms after the last (a kernel called in
  a loop), the median of 100, on more than one core; the readings keep it 1 and 10 ms after
  too, when the threads sleep (on a VM whose idle vCPUs are descheduled, waking them cost
  2.5e7 cycles here).
"""

from __future__ import annotations

import ctypes
import math
import os
import platform
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field

from polyopt.costmodel.machine import Machine
from polyopt.errors import PolyoptError
from polyopt.runtime.compiler import load_library

_ADD = {"x86_64": "add %1, %0", "aarch64": "add %0, %0, %1"}  # register operands: an
# immediate add chain runs faster than a cycle each on cores that fold immediates at rename

SOURCE = r"""
#include <omp.h>
#include <stdlib.h>
#include <time.h>
typedef float vec __attribute__((vector_size(VB)));
#define W (VB / 4)
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
                          return t.tv_sec + t.tv_nsec * 1e-9; }
static volatile float sink;
/* Seconds per dependent add over `n` rounds of 8. */
double add_chain(long n) {
  long x = 0, one = n > 0;
  double t0 = now();
  for (long i = 0; i < n; i++)
    __asm__ volatile(ADD "\n\t" ADD "\n\t" ADD "\n\t" ADD "\n\t"
                     ADD "\n\t" ADD "\n\t" ADD "\n\t" ADD : "+r"(x) : "r"(one));
  double t = now() - t0;
  sink = (float)x;
  return t / (8.0 * n);
}
/* A buffer of `n` floats, first touched by the threads that will read it. */
float *buffer(long n) {
  float *a = aligned_alloc(4096, (size_t)n * 4);
  if (!a) return a;
  #pragma omp parallel for schedule(static)
  for (long i = 0; i < n; i++) a[i] = 1.0f;
  return a;
}
void release(float *a) { free(a); }
static volatile long counters[1024];
/* Seconds of one empty parallel region (each thread bumps its own counter), `gap`
   seconds after the last: its threads then wait as a kernel's meet them between calls. */
double region_after(double gap) {
  struct timespec pause = {(time_t)gap, (long)((gap - (double)(time_t)gap) * 1e9)};
  nanosleep(&pause, NULL);
  int threads = omp_get_max_threads();
  double t = now();
  #pragma omp parallel for schedule(static)
  for (int i = 0; i < threads; i++) counters[(i * 16) % 1024] += 1;
  return now() - t;
}
/* Seconds of the fastest of `rounds` passes, each reading the first `n` floats of `a`
   `reps` times on `threads` threads (0: all), each thread its own part. */
double read(const float *a, long n, long reps, int rounds, int threads) {
  double best = 1e30;
  for (int r = 0; r < rounds; r++) {
    double t = now();
    #pragma omp parallel num_threads(threads > 0 ? threads : omp_get_max_threads())
    {
      vec s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
      for (long k = 0; k < reps; k++) {
        #pragma omp for schedule(static) nowait
        for (long i = 0; i < n; i += 4 * W) {
          s0 += *(const vec *)(a + i); s1 += *(const vec *)(a + i + W);
          s2 += *(const vec *)(a + i + 2 * W); s3 += *(const vec *)(a + i + 3 * W);
        }
      }
      vec s = s0 + s1 + s2 + s3;
      sink = s[0];
    }
    t = now() - t;
    if (t < best) best = t;
  }
  return best;
}
/* Seconds of the fastest of `rounds` passes over `n` floats as blocks of `rows` rows `ld`
   floats apart, read a line (`line` floats) of each row at a time. */
double rows(const float *a, long n, long rows_, long ld, long line, int rounds, int threads) {
  long blocks = n / (rows_ * ld);
  double best = 1e30;
  for (int r = 0; r < rounds; r++) {
    double t = now();
    #pragma omp parallel num_threads(threads > 0 ? threads : omp_get_max_threads())
    {
      vec s[128] = {{0}};
      #pragma omp for schedule(static)
      for (long b = 0; b < blocks; b++) {
        const float *p = a + b * rows_ * ld;
        for (long k = 0; k < ld; k += line)
          for (long i = 0; i < rows_; i++)
            for (long c = 0; c < line; c += W) s[i & 127] += *(const vec *)(p + i * ld + k + c);
      }
      vec t0 = {0};
      for (int i = 0; i < 128; i++) t0 += s[i];
      sink = t0[0];
    }
    t = now() - t;
    if (t < best) best = t;
  }
  return best;
}
"""

ROUNDS = 3  # passes a reading keeps the fastest of
SWEEPS = 2  # sweeps over the sizes or row counts, each point's fastest kept
ROW_COUNTS = (2, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128)
SHARE_STREAMS = 8
BASE_ROWS = (4, 6, 8)
KEEP_RATE = 0.8  # a row count "still reads at the rate of a few" down to this share of it
L3_GAIN = 1.5  # a last level that reads less than this much faster than memory is no level
FORK_GAP_S = 1e-4  # a fork this long after the last: a kernel called in a loop
FORK_WAKE_GAPS_S = (1e-3, 1e-2)  # and after these (readings): its threads asleep
FORK_CALLS = 100


class ProbeError(PolyoptError):
    """The host could not be measured (no cycle probe for its architecture, no memory for
    the buffer); a failed compile of the probes is a ``CompileError``."""


@dataclass(frozen=True)
class Calibration:
    """The fields measured (only those a reading supports) and the readings behind them."""

    fields: dict[str, float | int]
    readings: dict[str, object] = field(default_factory=dict)

    def describe(self) -> str:
        lines = [f"  {k} = {v:.4g}" if isinstance(v, float) else f"  {k} = {v}"
                 for k, v in self.fields.items()]
        return "\n".join(["measured fields:", *lines])


class _Lib:
    """The compiled probes, their buffer, and the core's cycle."""

    def __init__(self, machine: Machine, floats: int) -> None:
        add = _ADD.get(platform.machine())
        if add is None:
            raise ProbeError(f"no cycle probe for {platform.machine()}: calibration needs "
                             f"one of {', '.join(_ADD)}")
        lib = load_library(SOURCE.replace("VB", str(machine.vector_bytes))
                           .replace("ADD", f'"{add}"'))
        lib.add_chain.restype = lib.read.restype = lib.rows.restype = ctypes.c_double
        lib.region_after.restype = ctypes.c_double
        lib.region_after.argtypes = [ctypes.c_double]
        lib.add_chain.argtypes = [ctypes.c_long]
        lib.buffer.restype = ctypes.c_void_p
        lib.buffer.argtypes = [ctypes.c_long]
        lib.release.argtypes = [ctypes.c_void_p]
        lib.read.argtypes = [ctypes.c_void_p, ctypes.c_long, ctypes.c_long, ctypes.c_int,
                             ctypes.c_int]
        lib.rows.argtypes = [ctypes.c_void_p] + [ctypes.c_long] * 4 + [ctypes.c_int] * 2
        self.lib, self.machine, self.floats = lib, machine, floats
        self.buf = lib.buffer(floats) if floats else None
        if floats and not self.buf:
            raise ProbeError(f"calibration needs a buffer of {floats * 4 >> 20} MiB")

    def cycle(self) -> float:
        return min(self.lib.add_chain(10_000_000) for _ in range(5))

    def read_rate(self, floats: int, threads: int) -> float:
        """Bytes a second reading ``floats`` floats again and again (some 256 MiB a pass)."""
        reps = max(1, (64 << 20) // floats)
        return floats * 4 * reps / self.lib.read(self.buf, floats, reps, ROUNDS, threads)

    def rows_rate(self, rows: int, threads: int) -> float:
        """Bytes a second reading the buffer ``rows`` rows at a time, a line of each."""
        line = self.machine.line_bytes // 4
        ld = 4096 // 4 * 64 + line  # 256 KiB and a line: no two rows share an L2 set
        n = self.floats // (rows * ld) * (rows * ld)
        return n * 4 / self.lib.rows(self.buf, n, rows, ld, line, ROUNDS, threads)

    def fork_join(self, gap: float = FORK_GAP_S) -> float:
        """Seconds of a parallel region's fork and join, ``gap`` seconds after the last
        (the median of ``FORK_CALLS``)."""
        return statistics.median(self.lib.region_after(gap) for _ in range(FORK_CALLS))

    def close(self) -> None:
        if self.buf:
            self.lib.release(self.buf)


def cycle_seconds(machine: Machine) -> float:
    """Seconds of one cycle of this core's clock now (a chain of dependent adds)."""
    return _Lib(machine, 0).cycle()


def calibrate(machine: Machine, say: Callable[[str], None] = lambda _: None,
              buffer_bytes: int | None = None) -> Calibration:
    """Measure ``machine``'s host (its sysfs sizes and cores guide the sizes probed) over a
    buffer of ``buffer_bytes`` (default: 4x sysfs's L3, 256 MiB to 1 GiB)."""
    past = buffer_bytes or min(max(4 * machine.l3_bytes, 256 << 20), 1 << 30)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    if load > machine.cores / 2:
        say(f"warning: load average {load:.2f} on {machine.cores} cores: other work shares "
            "the memory system, and the figures will be low")
    probe = _Lib(machine, past // 4)
    try:
        cycle = probe.cycle()
        memory = probe.read_rate(probe.floats, 0) * cycle
        one, every = (probe.rows_rate(SHARE_STREAMS, t) for t in (1, 0))
        say(f"one cycle {cycle * 1e9:.3f} ns; memory {memory:.2f} bytes/cycle on every core; "
            f"{SHARE_STREAMS} streams: one core {one * cycle:.2f}, every core "
            f"{every * cycle:.2f}")
        sizes = _sizes(4 * machine.l2_bytes * machine.cores, probe.floats * 4)
        reads = _best_of(sizes, lambda b: probe.read_rate(b // 4 // 4096 * 4096, 0) * cycle)
        say("every core reading: " + ", ".join(f"{b >> 20} MiB {r:.1f}"
                                               for b, r in reads.items()) + " bytes/cycle")
        line = machine.line_bytes
        rows = _best_of(list(ROW_COUNTS), lambda n: probe.rows_rate(n, 1) * cycle / line)
        say("one core reading rows together: " + ", ".join(f"{n} {r:.3f}"
                                                           for n, r in rows.items())
            + " lines/cycle")
        forks = {gap: probe.fork_join(gap) / cycle for gap in (FORK_GAP_S, *FORK_WAKE_GAPS_S)}
        say("a parallel region after the last by " + ", ".join(
            f"{gap * 1e3:g} ms: {c:.3g}" for gap, c in forks.items()) + " cycles")
    finally:
        probe.close()
    fields: dict[str, float | int] = {"memory_bytes_per_cycle": round(memory, 3),
                                      "core_memory_share": round(min(1.0, one / every), 3)}
    last = last_level_bytes(reads, memory)
    if last is not None:
        fields["l3_bytes"] = last
        # the model's L3 rate is a core's while every core reads (its parallel loops do)
        fields["l3_bytes_per_cycle"] = round(next(iter(reads.values())) / machine.cores, 3)
    if machine.cores > 1:
        fields["fork_join_cycles"] = round(forks[FORK_GAP_S])
    followed, untracked = prefetched_streams(rows)
    fields["prefetch_streams"] = followed
    if untracked is not None:
        fields["untracked_share"] = untracked
    readings = {"cycle_ns": round(cycle * 1e9, 4), "load_average": round(load, 2),
                "read_bytes_per_cycle_by_mib": {b >> 20: round(r, 2) for b, r in reads.items()},
                "rows_lines_per_cycle": {n: round(r, 4) for n, r in rows.items()},
                "fork_join_cycles_by_gap_ms": {g * 1e3: round(c) for g, c in forks.items()}}
    return Calibration(fields, readings)


def last_level_bytes(reads: dict[int, float], memory: float) -> int | None:
    """The last level's size from every core's read rate by buffer bytes (ascending, the
    first past the L2s) and memory's rate: the largest buffer still read faster than the
    geometric mean of the first's and memory's; None when the first is not ``L3_GAIN``
    times memory's (no level worth a term: sysfs's stays)."""
    first = next(iter(reads.values()), 0.0)
    if first < L3_GAIN * memory:
        return None
    middle = math.sqrt(first * memory)
    return max(b for b, r in reads.items() if r >= middle)


def prefetched_streams(rows: dict[int, float]) -> tuple[int, float | None]:
    """``(prefetch_streams, untracked_share)`` from one core's rate by rows read together
    (ascending counts, ``BASE_ROWS`` among them): the most rows that, with every count
    below, read at ``KEEP_RATE`` or more of the base rows' median rate; the share fitted
    to the counts past it (None without one)."""
    base = statistics.median(rows[n] for n in BASE_ROWS)
    kept = 0
    for n, rate in rows.items():
        if rate < KEEP_RATE * base and n > max(BASE_ROWS):
            break
        kept = n
    fits = [(1 - kept / n) / (base / r - kept / n) for n, r in rows.items()
            if n > kept and base / r > kept / n]
    if not fits:
        return kept, None
    return kept, round(min(1.0, max(0.05, statistics.median(fits))), 3)


def _sizes(low: int, high: int) -> list[int]:
    """Buffer sizes from ``low`` to below ``high``, whole MiB about ``sqrt(2)`` apart."""
    out, size = [], low
    while size < high:
        out.append(size)
        size = int(size * math.sqrt(2)) // (1 << 20) * (1 << 20)
    return out


def _best_of(points: list[int], rate: Callable[[int], float]) -> dict[int, float]:
    """The fastest of ``SWEEPS`` sweeps over ``points`` for each: a sweep takes seconds, in
    which another tenant of a shared host may take the memory for a while."""
    best = dict.fromkeys(points, 0.0)
    for _ in range(SWEEPS):
        for p in points:
            best[p] = max(best[p], rate(p))
    return best
