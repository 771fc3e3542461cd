"""What one OpenMP parallel region costs on this host: the model's ``fork_join_cycles``.

A region whose threads do nothing (each bumps its own counter), compiled the way polyopt
compiles kernels (``polyopt.runtime.compiler``) and timed inside C. Two settings:

* ``back to back``: regions one after the other, the threads still spinning in libgomp's
  barrier (the cost inside one kernel with several parallel nests);
* ``after a gap of G ms``: one region per call from Python, G ms of sleep before each, the
  threads asleep once libgomp's spin ends (how a kernel called from Python meets them).

Cycles come from timing a chain of dependent register adds (one cycle each,
``polyopt.runtime.probe.cycle_seconds``), so the figure is in the core's own clock whatever
its frequency does.

    python3 scripts/calibrate/bench_fork_join.py
    OMP_PROC_BIND=spread python3 scripts/calibrate/bench_fork_join.py --calls 400
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import time

from polyopt.costmodel.machine import host
from polyopt.runtime import probe
from polyopt.runtime.compiler import load_library

SOURCE = r"""
#include <omp.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

static volatile long counters[1024];

/* Seconds per region over `reps` regions back to back. */
double regions(int reps) {
    int threads = omp_get_max_threads();
    double t0 = now();
    for (int r = 0; r < reps; r++) {
        #pragma omp parallel for schedule(static)
        for (int i = 0; i < threads; i++) counters[(i * 16) % 1024] += 1;
    }
    return (now() - t0) / reps;
}

int threads(void) { return omp_get_max_threads(); }
"""


def library() -> ctypes.CDLL:
    lib = load_library(SOURCE)
    lib.regions.restype = ctypes.c_double
    lib.regions.argtypes = [ctypes.c_int]
    return lib


def cycle_seconds() -> float:
    """One cycle of this core's clock now (``polyopt.runtime.probe``'s add chain)."""
    return probe.cycle_seconds(host())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=200, help="calls per gap")
    p.add_argument("--gaps", default="0.01,1,10", help="ms of sleep before each call")
    args = p.parse_args()
    lib = library()
    cycle = cycle_seconds()
    rows = [("back to back", min(lib.regions(2000) for _ in range(5)))]
    for gap in [float(g) for g in args.gaps.split(",")]:
        times = []
        for _ in range(args.calls):
            time.sleep(gap / 1e3)
            times.append(lib.regions(1))
        rows.append((f"after a gap of {gap:g} ms", statistics.median(times)))
    cycle = min(cycle, cycle_seconds())  # the clock may have ramped up meanwhile
    model = host().fork_join_cycles
    print(f"{lib.threads()} OpenMP threads; one add {cycle * 1e9:.3f} ns "
          f"({1e-9 / cycle:.2f} GHz); the model's fork_join_cycles: {model:.0f}")
    print("| region | us | cycles | model / measured |")
    print("|---|---|---|---|")
    for what, t in rows:
        print(f"| {what} | {t * 1e6:.2f} | {t / cycle:.0f} | {model / (t / cycle):.2f} |")


if __name__ == "__main__":
    main()
