"""What a builtin call (and a division) costs inside a vector loop, in the cost model's
operations (an instance's operations run ``Machine.fma_units`` per cycle): the table the
cost model prices calls by, ``polyopt.costmodel.calls`` (its docstring has the commands).

Each builtin ``f`` runs as ``O(i) = f(A(i))`` (binary ones as ``f(A(i), B(i))``, and so
on) over ``--n`` floats that stay in L2, vectorized at ``--lanes`` (default a whole
register), one thread. Against the same loop copying (``O(i) = A(i)``), a call costs
``t_f - t_copy`` per vector, in cycles of the core's clock (a register add chain,
``bench_fork_join.cycle_seconds``), times ``fma_units``. A chain of 40 multiply-adds per
element is printed as a check (40 if the core overlaps enough elements' chains to keep its
pipes busy; more when their latency shows). Each of ``--rounds`` rounds times every
kernel; the median of the rounds' least times is kept.

    OMP_NUM_THREADS=1 python3 scripts/calibrate/bench_call_cost.py
    OMP_NUM_THREADS=1 python3 scripts/calibrate/bench_call_cost.py --only exp,tanh,sqrt --lanes 8
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import polyopt
from polyopt.costmodel.machine import host
from polyopt.lang.resolve import BUILTINS
from polyopt.pipeline.policy import cpu_policy
from polyopt.runtime import probe

COPY = "O(i) = A(i)"
def chain(k: int) -> str:
    """``k`` dependent multiply-adds per element."""
    return "O(i) = " + "(" * k + "A(i)" + "".join(f" * 0.99{j % 10} + 0.0{j % 10})"
                                                   for j in range(k))
DIVIDE = "O(i) = 1.5 / A(i)"


def body(fn: str) -> str:
    if fn == "/":
        return DIVIDE
    args = ", ".join(("A(i)", "B(i)", "A(i)", "B(i)")[: BUILTINS[fn]])
    return f"O(i) = {fn}({args})"


def kernel(stmt: str, n: int, lanes: int, dtype: str = "float") -> polyopt.Kernel:
    """``stmt`` over ``n`` floats, its loop vectorized at ``lanes`` (1: left scalar, for a
    process run with ``POLYOPT_CFLAGS=-fno-tree-vectorize``)."""
    source = f"def f({dtype}(N) A, {dtype}(N) B) -> (O) {{ {stmt} }}"
    sizes = {"N": n}
    s = polyopt.schedule(source, sizes=sizes, auto=lanes > 1)  # program order: no simd loop
    if lanes > 1:
        s = s.vectorize(s.loops[-1], lanes=lanes)
    return polyopt.compile(source, sizes=sizes, schedule=s, options={"tuned": False})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=16384, help="floats per call (default 16384)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=50, help="calls per round and kernel")
    ap.add_argument("--lanes", type=int, default=0,
                    help="vector lanes (default: a whole register of floats; 1: scalar code, "
                         "run with POLYOPT_CFLAGS=-fno-tree-vectorize)")
    ap.add_argument("--only", default="", help="comma-separated builtins (default: all)")
    ap.add_argument("--double", action="store_true", help="float64 elements (default float32)")
    args = ap.parse_args()
    machine = host()
    dtype, np_type = ("double", np.float64) if args.double else ("float", np.float32)
    lanes = args.lanes or cpu_policy(machine).lanes(np.dtype(np_type).itemsize)
    cycle = probe.cycle_seconds(host())
    names = args.only.split(",") if args.only else ["/", *sorted(BUILTINS)]
    rng = np.random.default_rng(0)
    a = rng.uniform(0.5, 2.0, args.n).astype(np_type)  # in every builtin's domain
    b = rng.uniform(0.5, 2.0, args.n).astype(np_type)
    stmts = {"copy": COPY, "fma40": chain(40), **{f: body(f) for f in names}}
    kernels = {k: kernel(v, args.n, lanes, dtype) for k, v in stmts.items()}
    best: dict[str, list[float]] = {k: [] for k in kernels}
    for _ in range(args.rounds):
        for k, kern in kernels.items():
            kern(a, b)
            ts = []
            for _ in range(args.calls):
                t = time.perf_counter()
                kern(a, b)
                ts.append(time.perf_counter() - t)
            best[k].append(min(ts))
    t = {k: statistics.median(v) for k, v in best.items()}
    cycle = min(cycle, probe.cycle_seconds(host()))
    op = cycle / machine.fma_units * args.n / lanes  # one operation per vector, all of them
    print(f"{args.n} {dtype}s, {lanes} lanes, one cycle {cycle * 1e9:.3f} ns: copy "
          f"{t['copy'] * 1e6:.2f} us, the check fma40 {(t['fma40'] - t['copy']) / op:.1f}")
    for f in names:
        print(f"{f:14s} {(t[f] - t['copy']) / op:7.1f} operations")


if __name__ == "__main__":
    main()
