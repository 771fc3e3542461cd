"""Read bandwidth of one core from each cache level, in bytes per cycle of its clock: the
figures behind ``Machine.l2_bytes_per_cycle`` and its neighbours.

A C loop sums a buffer of ``--sizes`` KiB with four independent accumulators of the host's
vector width (GCC's vector extension), again and again; the least time of
``--rounds`` is kept, and a cycle is the add chain of ``bench_fork_join.py``. A buffer that
fits in L1 gives L1's rate, one between L1 and L2 L2's, and so on (the boundaries are the
host's, ``polyopt.costmodel.machine.host``).

    OMP_NUM_THREADS=1 python3 scripts/calibrate/bench_cache_bandwidth.py
"""

from __future__ import annotations

import argparse
import ctypes

from polyopt.costmodel.machine import host
from polyopt.runtime import probe
from polyopt.runtime.compiler import load_library

SOURCE = r"""
#include <stdlib.h>
#include <time.h>
typedef float vec __attribute__((vector_size(VB)));
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
                          return t.tv_sec + t.tv_nsec * 1e-9; }
/* Seconds of the fastest of `rounds` passes, each summing `n` floats `reps` times with four
   vector accumulators (one vector add per load, four chains: the adds never wait). */
double stream(long n, long reps, int rounds) {
  const long w = VB / 4;
  float *a = aligned_alloc(64, (size_t)n * 4);
  for (long i = 0; i < n; i++) a[i] = 1.0f;
  double best = 1e30; volatile float sink = 0;
  for (int r = 0; r < rounds; r++) {
    vec s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
    double t = now();
    for (long k = 0; k < reps; k++)
      for (long i = 0; i < n; i += 4 * w) {
        s0 += *(const vec *)(a + i); s1 += *(const vec *)(a + i + w);
        s2 += *(const vec *)(a + i + 2 * w); s3 += *(const vec *)(a + i + 3 * w);
      }
    t = now() - t;
    vec s = s0 + s1 + s2 + s3;
    sink = s[0];
    if (t < best) best = t;
  }
  (void)sink;
  free(a);
  return best;
}
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="16,32,128,256,512,4096,65536", help="KiB")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--bytes", type=float, default=4e9, help="bytes read per round")
    args = ap.parse_args()
    m = host()
    lib = load_library(SOURCE.replace("VB", str(m.vector_bytes)))
    lib.stream.restype = ctypes.c_double
    lib.stream.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_int]
    cycle = probe.cycle_seconds(host())
    print(f"one cycle {cycle * 1e9:.3f} ns; L1d {m.l1d_bytes >> 10} KiB, L2 {m.l2_bytes >> 10} "
          f"KiB, L3 {m.l3_bytes >> 10} KiB")
    for kib in (int(k) for k in args.sizes.split(",")):
        n = kib * 256
        reps = max(1, int(args.bytes / (n * 4)))
        t = lib.stream(n, reps, args.rounds)
        rate = n * 4 * reps / t
        print(f"{kib:8d} KiB: {rate * cycle:6.1f} bytes/cycle ({rate / 1e9:6.1f} GB/s)")


if __name__ == "__main__":
    main()
