"""Tune the library's matmul at one size and compare, in the same process, the default
schedule, the tuned one and numpy's BLAS (a first check of issue 6's matmul target; the
full study is scripts/studies/tuning_study.py, still to come).

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_PROC_BIND=spread \\
        python3 scripts/studies/tune_matmul.py --size 1024 --trials 32 [--strategy model]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polyopt.kernels as kernels

import polyopt
from polyopt.schedules import Schedule
from polyopt.tuning.tuner import tune


def best(fn: Callable[[], object], repeat: int = 10) -> float:
    fn()
    out = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        out = min(out, time.perf_counter() - start)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--trials", type=int, default=32)
    p.add_argument("--strategy", default="model", choices=("random", "genetic", "model"))
    p.add_argument("--rounds", type=int, default=3, help="same-run comparisons after tuning")
    args = p.parse_args()
    src, n = kernels.source("matmul"), args.size
    sizes = {"M": n, "N": n, "K": n}
    with tempfile.TemporaryDirectory() as tmp:  # a fresh database: no earlier results
        start = time.perf_counter()
        result = tune(src, "matmul", sizes=sizes, trials=args.trials,
                              strategy=args.strategy, db=str(Path(tmp) / "t.sqlite"))
        wall = time.perf_counter() - start
    default = polyopt.compile(src, "matmul", sizes=sizes, options={"tuned": False})
    tuned = polyopt.compile(src, "matmul", sizes=sizes,
                            schedule=Schedule.from_json(result.schedule, src, "matmul",
                                                        sizes=sizes))
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
    flop = 2.0 * n ** 3
    print(f"{result}\ntuning wall time {wall:.1f} s\n")
    print("| round | default GFLOP/s | tuned GFLOP/s | numpy GFLOP/s | tuned/numpy |")
    print("|---|---|---|---|---|")
    for r in range(args.rounds):
        d, t, ref = best(lambda: default(a, b)), best(lambda: tuned(a, b)), best(lambda: a @ b)
        print(f"| {r + 1} | {flop / d / 1e9:.0f} | {flop / t / 1e9:.0f} | {flop / ref / 1e9:.0f} "
              f"| {ref / t:.2f} |")


if __name__ == "__main__":
    main()
