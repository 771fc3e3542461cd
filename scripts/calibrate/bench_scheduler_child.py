"""What scheduling in a forked child costs a compile (issue 40: isl's scheduler runs in a
child that a limit or Ctrl-C can end): ``polyopt.schedule`` of a few bundled operators with
the child and in-process, alternating within one process, the median difference of each.

    python3 scripts/calibrate/bench_scheduler_child.py [--rounds 15] [--torch]

``--torch`` imports torch first (a larger heap to fork). Run on a quiet machine.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import polyopt
from polyopt import kernels
from polyopt.pipeline import auto

CASES = {"relu": ("relu", {"M": 64, "N": 128}),
         "softmax": ("softmax", {"N": 64, "D": 128}),
         "matmul": ("matmul", {"M": 256, "N": 256, "K": 256})}


def _seconds(name: str, sizes: dict[str, int]) -> float:
    t0 = time.perf_counter()
    polyopt.schedule(kernels.source(name), name, sizes=sizes)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--torch", action="store_true", help="import torch first")
    args = ap.parse_args()
    if args.torch:
        import torch  # noqa: F401
    warnings.simplefilter("ignore")
    real = auto.isolated
    print("| operator | in-process ms | child ms | difference ms |\n|---|---|---|---|")
    for label, (name, sizes) in CASES.items():
        _seconds(name, sizes)
        here, child = [], []
        for _ in range(args.rounds):
            auto.isolated = lambda deps: False
            here.append(_seconds(name, sizes))
            auto.isolated = lambda deps: True
            child.append(_seconds(name, sizes))
        auto.isolated = real
        a, b = statistics.median(here) * 1e3, statistics.median(child) * 1e3
        diff = statistics.median(c - h for c, h in zip(child, here, strict=True)) * 1e3
        print(f"| {label} | {a:.1f} | {b:.1f} | {diff:.1f} |")


if __name__ == "__main__":
    main()
