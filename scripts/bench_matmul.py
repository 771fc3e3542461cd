"""Matmul speed: polyopt's default compile against numpy (BLAS), in the same run.

Run with numpy's BLAS at full speed:
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python3 scripts/bench_matmul.py
"""

from __future__ import annotations

import argparse
import platform
import time

import numpy as np

import polyopt
from polyopt import kernels


def median_time(fn, repeat: int) -> float:
    fn()  # warm-up (and compile)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="256,512,1000", help="square sizes to run")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    kernel = polyopt.compile(kernels.get("matmul"))
    rng = np.random.default_rng(0)
    print(f"machine: {platform.processor() or platform.machine()}, numpy {np.__version__}")
    print("| n | polyopt GFLOP/s | numpy GFLOP/s | polyopt / numpy |")
    print("|---|---|---|---|")
    for n in map(int, args.sizes.split(",")):
        a, b = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
        np.testing.assert_allclose(kernel(a, b), a @ b, rtol=1e-3, atol=1e-3 * np.sqrt(n))
        tp = median_time(lambda a=a, b=b: kernel(a, b), args.repeat)
        tn = median_time(lambda a=a, b=b: a @ b, args.repeat)
        flops = 2 * n**3 / 1e9
        print(f"| {n} | {flops / tp:.2f} | {flops / tn:.1f} | {tn / tp:.4f} |")


if __name__ == "__main__":
    main()
