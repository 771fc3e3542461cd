"""Native memory of a long-running process (issue 40): RSS (``VmRSS``) and the number of
``/proc/self/maps`` entries every ``--every`` calls, for the issue's cases:

- ``parametric``: one size-generic kernel called at ever-new shapes;
- ``packed``: a size-generic matmul that packs its operands (scratch per shape);
- ``einsum``: ``polyopt.einsum`` over small varying shapes;
- ``unload``: ``--defs`` distinct defs compiled, called once and deleted (the ``.so`` of
  each is unmapped when its last kernel goes).

With the caches bounded (``Kernel`` plans, variants and scratch, einsum's plans and kernels,
loaded libraries), every column must level off. Linux only (it reads ``/proc/self``).

    python3 scripts/bench_memory.py                       # all cases, 100k calls each
    python3 scripts/bench_memory.py --cases einsum --calls 20000 --every 2000
"""

from __future__ import annotations

import argparse
import gc
from collections.abc import Callable, Iterator

import numpy as np

import polyopt
from polyopt.runtime import compiler

PARAMETRIC = "def add(float(N,M) A, float(N,M) B) -> (O) { O(i,j) = A(i,j) * B(i,j) + 1.0 }"
MATMUL = "def mm(float(N,K) A, float(K,M) B) -> (C) { C(i,j) +=! A(i,r_k) * B(r_k,j) }"
CASES = ("parametric", "packed", "einsum", "unload")


def vm_rss_mb() -> float:
    """This process's resident memory in MiB (``VmRSS``)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def map_entries() -> int:
    with open("/proc/self/maps") as f:
        return sum(1 for _ in f)


def shapes(seed: int) -> Iterator[tuple[int, int]]:
    """Ever-new (mostly) small shapes."""
    rng = np.random.default_rng(seed)
    while True:
        yield int(rng.integers(1, 300)), int(rng.integers(1, 300))


def parametric_calls() -> Callable[[int], None]:
    kernel = polyopt.compile(PARAMETRIC, parametric=True)
    shape = shapes(0)

    def call(_: int) -> None:
        n, m = next(shape)
        a = np.ones((n, m), np.float32)
        kernel(a, a)
    return call


def packed_calls() -> Callable[[int], None]:
    kernel = polyopt.compile(MATMUL, parametric=True)
    shape = shapes(1)

    def call(_: int) -> None:
        n, m = next(shape)
        kernel(np.ones((n % 64 + 1, m % 64 + 1), np.float32),
               np.ones((m % 64 + 1, n % 32 + 1), np.float32))
    return call


def einsum_calls() -> Callable[[int], None]:
    shape = shapes(2)

    def call(_: int) -> None:
        n, m = next(shape)
        polyopt.einsum("ij,jk->ik", np.ones((n % 40 + 1, m % 40 + 1), np.float32),
                       np.ones((m % 40 + 1, (n + m) % 40 + 1), np.float32))
    return call


def unload_calls() -> Callable[[int], None]:
    def call(k: int) -> None:
        kernel = polyopt.compile(f"def d{k}(float(N) A) -> (O) {{ O(i) = A(i) * {k}.0 }}",
                                 parametric=True)
        kernel(np.ones(8, np.float32))
        del kernel
    return call


def run(case: str, calls: int, every: int) -> None:
    call = {"parametric": parametric_calls, "packed": packed_calls, "einsum": einsum_calls,
            "unload": unload_calls}[case]()
    print(f"{case}: calls, RSS MiB, map entries, loaded libraries")
    for k in range(1, calls + 1):
        call(k)
        if k % every == 0:
            gc.collect()
            print(f"  {k:>7} {vm_rss_mb():8.1f} {map_entries():6d} {compiler.loaded_count():5d}",
                  flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default=",".join(CASES), help=f"of {', '.join(CASES)}")
    ap.add_argument("--calls", type=int, default=100_000)
    ap.add_argument("--every", type=int, default=10_000)
    ap.add_argument("--defs", type=int, default=500, help="defs of the unload case")
    args = ap.parse_args()
    for case in args.cases.split(","):
        calls = args.defs if case == "unload" else args.calls
        run(case, calls, min(args.every, max(1, calls // 10)))


if __name__ == "__main__":
    main()
