"""Does it matter which OpenMP runtime a process loads first? polyopt's matmul 1024^3 timed
in fresh processes that import torch before polyopt's runtime or not, with
OMP_PROC_BIND=spread or unbound (BENCHMARKS.md, issue 15 ninth round).

torch ships its own libgomp.so.1; a kernel loaded after it runs on that runtime (same
soname), and under OMP_PROC_BIND=spread ``import torch`` pins the main thread to CPU 0.

    python3 scripts/checks/bench_omp_order.py --rounds 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

CHILD = r"""
import os, sys
if sys.argv[1] == "torch-first":
    import torch  # noqa: F401
import numpy as np
import polyopt
from polyopt.bench.timing import sample_seconds
src = "def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,r_k) * B(r_k,n) }"
k = polyopt.compile(src, sizes={"M": 1024, "N": 1024, "K": 1024})
a = np.random.default_rng(0).standard_normal((1024, 1024), dtype=np.float32)
k(a, a)
print(1e3 * float(np.median(sample_seconds(lambda: k(a, a), 20))))
"""

CASES = [("torch-first", "spread"), ("polyopt-first", "spread"), ("torch-first", None),
         ("polyopt-first", None)]


def run(order: str, bind: str | None) -> float:
    env = {k: v for k, v in os.environ.items() if k != "OMP_PROC_BIND"}
    if bind:
        env["OMP_PROC_BIND"] = bind
    out = subprocess.run([sys.executable, "-c", CHILD, order], env=env, check=True,
                         capture_output=True, text=True).stdout
    return float(out.split()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3, help="processes per case, interleaved")
    args = p.parse_args()
    times: dict[tuple[str, str | None], list[float]] = {c: [] for c in CASES}
    for _ in range(args.rounds):
        for case in CASES:
            times[case].append(run(*case))
    print("| load order | OMP_PROC_BIND | matmul 1024^3 ms (median of processes) |")
    print("|---|---|---|")
    for (order, bind), ms in times.items():
        print(f"| {order} | {bind or 'unset'} | {statistics.median(ms):.2f} |")


if __name__ == "__main__":
    main()
