"""What a load costs when its page's translation misses each TLB level: the figures behind
``Machine.l1_tlb_entries``, ``l1_tlb_miss_cycles`` and ``tlb_miss_cycles``.

A chain of dependent loads visits one line of each of N pages in a random cycle, each
page's line at another offset (so the lines spread over L1's sets and stay in the data
caches while the pages outgrow the TLBs). Cycles per load are the least of ``--rounds``
passes, in the core's own clock (the add chain of ``bench_fork_join.py``): up to the first
level's entries a load costs the L1 hit; past them, the second level's hit more; past
that, a page walk.

    python3 scripts/calibrate/bench_tlb.py
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
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
                          return t.tv_sec + t.tv_nsec * 1e-9; }
/* Seconds per load of a pointer chase over one line of each of `pages` pages. */
double chase(long pages, long loads, int rounds, unsigned seed) {
  char *buf = aligned_alloc(4096, (size_t)pages * 4096);
  long *order = malloc(sizeof(long) * pages);
  for (long i = 0; i < pages; i++) order[i] = i;
  srand(seed);
  for (long i = pages - 1; i > 0; i--) {
    long j = rand() % (i + 1), t = order[i]; order[i] = order[j]; order[j] = t;
  }
  for (long i = 0; i < pages; i++) {
    long a = order[i], b = order[(i + 1) % pages];
    *(void **)(buf + a * 4096 + (a % 64) * 64) = buf + b * 4096 + (b % 64) * 64;
  }
  double best = 1e30;
  void *p = buf + order[0] * 4096 + (order[0] % 64) * 64;
  for (int r = 0; r < rounds; r++) {
    double t = now();
    for (long i = 0; i < loads; i++) {
      p = *(void **)p;
      __asm__ volatile("" : "+r"(p));  /* keep every load */
    }
    t = now() - t;
    if (t < best) best = t;
  }
  volatile void *sink = p;
  (void)sink;
  free(order);
  free(buf);
  return best / loads;
}
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pages", default="16,32,48,64,96,128,256,512,1024,2048,4096,8192")
    ap.add_argument("--loads", type=int, default=2_000_000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    lib = load_library(SOURCE)
    lib.chase.restype = ctypes.c_double
    lib.chase.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_int, ctypes.c_uint]
    cycle = probe.cycle_seconds(host())
    print(f"one cycle {cycle * 1e9:.3f} ns")
    for n in (int(x) for x in args.pages.split(",")):
        t = lib.chase(n, args.loads, args.rounds, 1)
        print(f"{n:6d} pages: {t / cycle:6.1f} cycles a load")


if __name__ == "__main__":
    main()
