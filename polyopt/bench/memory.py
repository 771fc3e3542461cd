"""``polyopt bench memory``: native memory of a long-running process (issue 40): RSS
(``VmRSS``) and the number of ``/proc/self/maps`` entries every ``--every`` calls, for the
issue's cases:

- ``parametric``: one size-generic kernel called at ever-new shapes;
- ``packed``: a size-generic matmul that packs its operands (scratch per shape);
- ``einsum``: ``polyopt.einsum`` over small varying shapes;
- ``unload``: ``--defs`` distinct defs compiled, called once and deleted (the ``.so`` of
  each is unmapped when its last kernel goes).

With the caches bounded (``Kernel`` plans, variants and scratch, einsum's plans and kernels,
loaded libraries), every column must level off. Linux only (it reads ``/proc/self``).

    polyopt bench memory                       # all cases, 100k calls each
    polyopt bench memory --cases einsum --calls 20000 --every 2000
"""

from __future__ import annotations

import argparse
import gc
import sys
from collections.abc import Callable, Iterator, Sequence

import numpy as np

from polyopt import api
from polyopt.bench.entry import suite_main
from polyopt.errors import OptionError
from polyopt.runtime import compiler
from polyopt.subscripts.call import einsum

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
    kernel = api.compile(PARAMETRIC, parametric=True)
    shape = shapes(0)

    def call(_: int) -> None:
        n, m = next(shape)
        a = np.ones((n, m), np.float32)
        kernel(a, a)
    return call


def packed_calls() -> Callable[[int], None]:
    kernel = api.compile(MATMUL, parametric=True)
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
        einsum("ij,jk->ik", np.ones((n % 40 + 1, m % 40 + 1), np.float32),
                       np.ones((m % 40 + 1, (n + m) % 40 + 1), np.float32))
    return call


def unload_calls() -> Callable[[int], None]:
    def call(k: int) -> None:
        kernel = api.compile(f"def d{k}(float(N) A) -> (O) {{ O(i) = A(i) * {k}.0 }}",
                                 parametric=True)
        kernel(np.ones(8, np.float32))
        del kernel
    return call


def watch(case: str, calls: int, every: int) -> None:
    """Call ``case`` ``calls`` times; every ``every`` calls, print RSS, maps and libraries."""
    call = {"parametric": parametric_calls, "packed": packed_calls, "einsum": einsum_calls,
            "unload": unload_calls}[case]()
    print(f"{case}: calls, RSS MiB, map entries, loaded libraries")
    for k in range(1, calls + 1):
        call(k)
        if k % every == 0:
            gc.collect()
            print(f"  {k:>7} {vm_rss_mb():8.1f} {map_entries():6d} {compiler.loaded_count():5d}",
                  flush=True)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``polyopt bench memory``."""
    parser.add_argument("--cases", default=",".join(CASES), help=f"of {', '.join(CASES)}")
    parser.add_argument("--calls", type=int, default=100_000)
    parser.add_argument("--every", type=int, default=10_000)
    parser.add_argument("--defs", type=int, default=500, help="defs of the unload case")


def run(args: argparse.Namespace) -> int:
    """Watch each of ``--cases``; an unknown case is an OptionError naming the cases."""
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = sorted(set(cases) - set(CASES))
    if unknown:
        raise OptionError(f"unknown --cases {','.join(unknown)}; choose from {','.join(CASES)}")
    for case in cases:
        calls = args.defs if case == "unload" else args.calls
        watch(case, calls, min(args.every, max(1, calls // 10)))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``polyopt bench memory ...`` as a module of its own (``python3 -m
    polyopt.bench.memory``)."""
    return suite_main("memory", __doc__, add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
