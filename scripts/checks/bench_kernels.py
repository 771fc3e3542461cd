"""Every bundled kernel: polyopt's default schedule against program order, in one run.

A regression check for the automatic pipeline (no kernel should get slower than its plain
loop nest) and a correctness check of each against the other:

    OMP_PROC_BIND=spread python3 scripts/checks/bench_kernels.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

import polyopt
from polyopt import ir, kernels

SIZES: dict[str, dict[str, int]] = {
    "polybench_gemm": {"NI": 300, "NJ": 300, "NK": 300},
    "polybench_2mm": {"NI": 200, "NJ": 200, "NK": 200, "NL": 200},
    "polybench_3mm": {"NI": 200, "NJ": 200, "NK": 200, "NL": 200, "NM": 200},
    "polybench_atax": {"M": 1000, "N": 1000},
    "polybench_bicg": {"N": 1000, "M": 1000},
    "polybench_mvt": {"N": 1000},
    "polybench_gemver": {"N": 1000},
    "polybench_gesummv": {"N": 1000},
    "polybench_doitgen": {"NR": 64, "NQ": 64, "NP": 64},
    "polybench_syrk": {"N": 300, "M": 300},
    "matvec": {"M": 2000, "K": 2000},
    "matmul_nt": {"M": 300, "N": 300, "K": 300},
    "matmul_tn": {"M": 300, "N": 300, "K": 300},
    "batch_matmul": {"B": 4, "M": 128, "N": 128, "K": 128},
    "maxpool2d": {"N": 1, "C": 64, "H": 112, "W": 112},
    "avgpool2d": {"N": 1, "C": 64, "H": 112, "W": 112},
    "bias_add": {"M": 2000, "N": 2000},
    "relu": {"M": 2000, "N": 2000},
    "matmul_bias_relu": {"M": 300, "N": 300, "K": 300},
}


def best(fn: Callable[[], object], repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def inputs(program: ir.Program) -> list[object]:
    rng = np.random.default_rng(0)
    out: list[object] = []
    for t in program.inputs:
        shape = [ir.extent_value(e, {}) for e in t.shape]
        out.append(rng.standard_normal(shape).astype(np.float32) if shape else np.float32(1.5))
    return out


def as_tuple(x: object) -> tuple[np.ndarray, ...]:
    return x if isinstance(x, tuple) else (x,)  # type: ignore[return-value]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print("| kernel | default ms | program-order ms | speedup | same result |")
    print("|---|---|---|---|---|")
    for name, sizes in SIZES.items():
        src = kernels.get(name)
        auto = polyopt.compile(src, name, sizes=sizes)
        plain = polyopt.compile(src, name, sizes=sizes, schedule="program-order")
        data = inputs(auto.program)
        same = all(np.allclose(a, b, rtol=1e-3, atol=1e-2)
                   for a, b in zip(as_tuple(auto(*data)), as_tuple(plain(*data)), strict=True))
        ta = best(lambda auto=auto, data=data: auto(*data), args.repeat)
        tp = best(lambda plain=plain, data=data: plain(*data), args.repeat)
        print(f"| {name} | {ta * 1e3:.3f} | {tp * 1e3:.3f} | {tp / ta:.1f} | "
              f"{'yes' if same else 'NO'} |")


if __name__ == "__main__":
    main()
