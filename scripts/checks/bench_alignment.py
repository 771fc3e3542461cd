"""What the alignment of a kernel's scratch (packed copies, locals) costs: the same kernel
with its scratch at numpy's alignment (large arrays start 16 or 32 bytes past a cache line)
and at ``polyopt.runtime.arrays.alignment()``, against numpy's BLAS, interleaved.

Each kernel is compiled once; one copy's cached scratch is replaced by numpy-aligned zeros
before its first call. Each round times every system after a 0.3 s pause (OpenBLAS's
threads spin about 0.1 s after a call) as the least of 3 calls after a warm-up; the table
gives the median over rounds and the median of each round's ratio numpy/system.

    flock -x /tmp/bench.lock env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE \
        python3 scripts/checks/bench_alignment.py --size 1024 --rounds 30
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np

import polyopt
from polyopt.runtime.arrays import alignment

MATMUL = "def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,r_k) * B(r_k,n) }"


def misaligned(kernel: polyopt.Kernel, call: Callable[[], object]) -> None:
    """Give ``kernel`` scratch at numpy's alignment: a first call fills its per-thread
    cache, whose arrays are then swapped for numpy's zeros of the same shapes."""
    call()
    cache = kernel._calls._scratch.buffers
    for key, (arrays, _) in list(cache.items()):
        fresh = [np.zeros(a.shape, a.dtype) for a in arrays]
        cache[key] = fresh, tuple(a.ctypes.data for a in fresh)


def best_of(call: Callable[[], object], pause: float) -> float:
    time.sleep(pause)
    call()
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--pause", type=float, default=0.3)
    args = parser.parse_args()
    n = args.size
    rng = np.random.default_rng(0)
    a, b = (rng.random((n, n), dtype=np.float32) for _ in range(2))
    sizes = {"M": n, "N": n, "K": n}
    off, on = (polyopt.compile(MATMUL, sizes=sizes) for _ in range(2))
    assert off.source == on.source
    misaligned(off, lambda: off(a, b))
    systems: dict[str, Callable[[], object]] = {
        "numpy's alignment": lambda: off(a, b), f"{alignment()} bytes": lambda: on(a, b),
        "numpy": lambda: a @ b}
    for call in systems.values():
        np.testing.assert_allclose(call(), a @ b, rtol=1e-3, atol=1e-3 * n ** 0.5)
    times: dict[str, list[float]] = {name: [] for name in systems}
    for _ in range(args.rounds):
        for name, call in systems.items():
            times[name].append(best_of(call, args.pause))
    print(f"matmul {n}^3, {args.rounds} rounds: scratch at")
    print("| scratch | median ms | numpy/polyopt (median of ratios) |\n|---|---|---|")
    for name in list(systems)[:2]:
        ratio = statistics.median(x / y for x, y in zip(times["numpy"], times[name],
                                                         strict=True))
        print(f"| {name} | {statistics.median(times[name]) * 1e3:.2f} | {ratio:.3f} |")
    print(f"| numpy | {statistics.median(times['numpy']) * 1e3:.2f} | - |")


if __name__ == "__main__":
    main()
