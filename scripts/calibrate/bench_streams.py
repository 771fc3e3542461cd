"""How a core reads memory in runs and in interleaved streams: the figures behind the cost
model's memory-stream terms (``CpuPolicy.stream_start_lines``, ``Machine.prefetch_streams``,
which ``polyopt machine --calibrate`` measures on its own).

Two patterns, each over a buffer far larger than the last cache level, summed with vector
adds (GCC's vector extension, four chains: the adds never wait), the fastest of
``--rounds`` passes kept, in lines per cycle of the core's own clock (the add chain of
``bench_fork_join.py``):

* ``runs``: runs of L contiguous lines, each run ``--gap`` KiB after the one before it
  (a column sum walking rows of a tensor: ``Y(b,c) +=! X(r_a,b,c)`` in order ``b, a, c``
  reads 64 runs of C floats, a plane apart), against one contiguous stream;
* ``rows``: S rows read together, one vector of each row per step (a register tile's rows
  of an operand read in place), the rows ``--ld`` floats apart: a power of two puts every
  row's line in the same cache set, an odd multiple of a line spreads them.

Both run on ``OMP_NUM_THREADS`` threads, each over its own part of the buffer (memory
bandwidth is shared; prefetchers and caches are per core).

    OMP_PROC_BIND=spread python3 scripts/calibrate/bench_streams.py
    OMP_PROC_BIND=spread python3 scripts/calibrate/bench_streams.py --mode rows --ld 1024,1040
"""

from __future__ import annotations

import argparse
import ctypes

from polyopt.costmodel.machine import host
from polyopt.runtime import probe
from polyopt.runtime.compiler import load_library

SOURCE = r"""
#include <omp.h>
#include <stdlib.h>
#include <time.h>
typedef float vec __attribute__((vector_size(VB)));
#define W (VB / 4)
#define LINE 16
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
                          return t.tv_sec + t.tv_nsec * 1e-9; }
static float *buffer(long n) {
  float *a = aligned_alloc(4096, (size_t)n * 4);
  #pragma omp parallel for schedule(static)
  for (long i = 0; i < n; i++) a[i] = 1.0f;
  return a;
}
/* Runs of `len` floats (whole lines): the buffer is rows of `gap` floats, and group g reads
   run g of every row, one row after the other (every float is read once). */
double runs(long n, long len, long gap, int rounds) {
  float *a = buffer(n);
  long per = n / gap, groups = gap / len;
  double best = 1e30; volatile float sink = 0;
  for (int r = 0; r < rounds; r++) {
    double t = now();
    #pragma omp parallel
    {
      vec s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
      #pragma omp for schedule(static)
      for (long g = 0; g < groups; g++) {
        long base = g * len;
        for (long j = 0; j < per; j++) {
          const float *p = a + base + j * gap;
          for (long i = 0; i < len; i += 4 * W) {
            s0 += *(const vec *)(p + i); s1 += *(const vec *)(p + i + W);
            s2 += *(const vec *)(p + i + 2 * W); s3 += *(const vec *)(p + i + 3 * W);
          }
        }
      }
      vec s = s0 + s1 + s2 + s3;
      sink = s[0];
    }
    t = now() - t;
    if (t < best) best = t;
  }
  (void)sink;
  free(a);
  return best;
}
/* Rows of `cols` floats, `ld` apart, read `rows` at a time: `chunk` floats of each row a
   step (a whole number of vectors). */
double rows(long n, long rows_, long ld, long cols, long chunk, int rounds, int threads,
            int write) {
  float *a = buffer(n);
  int was = omp_get_max_threads();
  if (threads > 0) omp_set_num_threads(threads);
  long blocks = n / (rows_ * ld);
  double best = 1e30; volatile float sink = 0;
  for (int r = 0; r < rounds; r++) {
    double t = now();
    #pragma omp parallel
    {
      vec s[32] = {{0}};
      #pragma omp for schedule(static)
      for (long b = 0; b < blocks; b++) {
        float *p = a + b * rows_ * ld;
        for (long k = 0; k < cols; k += chunk)
          for (long i = 0; i < rows_; i++)
            for (long c = 0; c < chunk; c += W) {
              if (write) *(vec *)(p + i * ld + k + c) = s[i & 31];
              else s[i & 31] += *(const vec *)(p + i * ld + k + c);
            }
      }
      vec t0 = {0};
      for (int i = 0; i < 32; i++) t0 += s[i];
      sink = t0[0];
    }
    t = now() - t;
    if (t < best) best = t;
  }
  (void)sink;
  omp_set_num_threads(was);
  free(a);
  return best;
}
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=("runs", "rows", "both", "cores"), default="both")
    ap.add_argument("--mib", type=int, default=256, help="buffer size")
    ap.add_argument("--lines", default="1,2,4,8,16,32,64,128,256",
                    help="run lengths (runs mode)")
    ap.add_argument("--gap", type=int, default=1024, help="KiB between runs (runs mode)")
    ap.add_argument("--rows", default="1,2,4,6,8,10,12,14,16,20,24,28", help="rows mode")
    ap.add_argument("--ld", default="1024,1040", help="floats between rows (rows mode)")
    ap.add_argument("--chunk", default="1", help="lines of a row read a step (rows mode)")
    ap.add_argument("--write", action="store_true", help="rows mode: store the lines instead")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    m = host()
    lib = load_library(SOURCE.replace("VB", str(m.vector_bytes)))
    lib.runs.restype = lib.rows.restype = ctypes.c_double
    lib.runs.argtypes = [ctypes.c_long] * 3 + [ctypes.c_int]
    lib.rows.argtypes = [ctypes.c_long] * 5 + [ctypes.c_int] * 3
    cycle = probe.cycle_seconds(host())
    n = args.mib << 18
    lines = n * 4 / m.line_bytes
    print(f"one cycle {cycle * 1e9:.3f} ns; {args.mib} MiB; lines per cycle of the whole "
          "buffer (all threads)")
    floats = m.line_bytes // 4
    if args.mode == "cores":
        for _ in range(args.rounds):
            one = lib.rows(n, 8, 1 << 16, 1 << 16, floats, 3, 1, 0)
            every = lib.rows(n, 8, 1 << 16, 1 << 16, floats, 3, 0, 0)
            print(f"8 streams: one thread {lines / one * cycle:.3f} lines/cycle, every thread "
                  f"{lines / every * cycle:.3f}: one core streams {every / one:.2f} of it")
    if args.mode in ("runs", "both"):
        flat = lib.rows(n, 1, 1 << 16, 1 << 16, 16, args.rounds, 0, 0)  # each thread: its half
        print(f"one stream: {lines / flat * cycle:.3f} lines/cycle")
        gap = args.gap * 256
        for run in (int(x) for x in args.lines.split(",")):
            t = lib.runs(n, run * floats, gap, args.rounds)
            extra = (t - flat) / cycle / (lines / run)
            print(f"runs of {run:4d} lines, {args.gap} KiB apart: "
                  f"{lines / t * cycle:.3f} lines/cycle, {t / flat:5.2f}x one stream, "
                  f"{extra:7.1f} cycles more a run")
    if args.mode in ("rows", "both"):
        for ld, chunk in ((int(x), int(c)) for x in args.ld.split(",")
                          for c in args.chunk.split(",")):
            for r in (int(x) for x in args.rows.split(",")):
                t = lib.rows(n, r, ld, ld, chunk * floats, args.rounds, 0, args.write)
                print(f"{r:3d} rows {ld} floats apart, {chunk} lines a step: "
                      f"{lines / t * cycle:.3f} lines/cycle{' written' * args.write}")


if __name__ == "__main__":
    main()
