"""How much a strided read costs a vectorized loop: ``cost.MAX_VECTOR_STRIDE``.

Times ``o[i] = o[i] > x[k*i] ? o[i] : x[k*i]`` over 2048 floats (in L1) under ``omp simd``
and as a scalar loop, for strides k = 1..6 and 8, with the flags polyopt compiles kernels
with. The model counts a strided read as vectorizing while the compiler's vector loop stays
well ahead of the scalar one (it loads the vectors a stride spans and permutes them).

    flock /tmp/bench.lock python scripts/calibrate/bench_strided_loads.py
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from polyopt.runtime.compiler import DEFAULT_FLAGS

STRIDES = (1, 2, 3, 4, 5, 6, 8)
PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#define N 2048
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec; }
#define F(S) \
__attribute__((noinline)) void v##S(float *restrict o, const float *restrict x) { \
  _Pragma("omp simd") for (long i = 0; i < N; i++) o[i] = o[i] > x[S*i] ? o[i] : x[S*i]; } \
__attribute__((noinline, optimize("no-tree-vectorize"))) \
void s##S(float *restrict o, const float *restrict x) { \
  for (long i = 0; i < N; i++) o[i] = o[i] > x[S*i] ? o[i] : x[S*i]; }
%(defs)s
typedef void (*fn)(float *, const float *);
static double best(fn f, float *o, const float *x) {
  double b = 1e9;
  for (int r = 0; r < 20; r++) { double t = now(); for (int j = 0; j < 200; j++) f(o, x);
    t = now() - t; if (t < b) b = t; }
  return b / 200 / N * 1e9; }
int main(void) {
  float *o = calloc(N, 4), *x = malloc(4 * N * 8);
  for (int i = 0; i < 8 * N; i++) x[i] = rand() / 1e9f;
  fn vs[] = {%(vs)s}, ss[] = {%(ss)s}; int st[] = {%(st)s};
  for (int k = 0; k < %(n)d; k++)
    printf("stride %%d: vector %%.3f ns/element, scalar %%.3f\n", st[k], best(vs[k], o, x),
           best(ss[k], o, x));
  return 0; }
"""


def main() -> None:
    text = PROGRAM % {"defs": " ".join(f"F({k})" for k in STRIDES),
                      "vs": ", ".join(f"v{k}" for k in STRIDES),
                      "ss": ", ".join(f"s{k}" for k in STRIDES),
                      "st": ", ".join(map(str, STRIDES)), "n": len(STRIDES)}
    flags = [f for f in DEFAULT_FLAGS if f not in ("-fPIC", "-shared")]
    with tempfile.TemporaryDirectory() as tmp:
        src, exe = Path(tmp) / "strided.c", Path(tmp) / "strided"
        src.write_text(text)
        subprocess.run(["cc", *flags, str(src), "-o", str(exe)], check=True)
        print(subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout,
              end="")


if __name__ == "__main__":
    main()
