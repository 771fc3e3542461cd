"""Loop orders of plain nests (issue 15 item 1): polyopt's automatic schedule against its own
program order and numpy, in one process (float32, best of ``--calls`` calls).

    python scripts/checks/bench_nests.py                 # every case
    python scripts/checks/bench_nests.py --cases colsum,blur --calls 20

For polyopt before and after a change, run this script under each commit
(``PYTHONPATH=<worktree>``) or ``scripts/dev/compare_commits.py``. Each case checks polyopt's
output against numpy. Prints a markdown table and each case's schedule notes (``# why``).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

import polyopt

BLUR = """def blur(float(H,W) I) -> (T, O) {
  T(y,x) = (I(y,x) + I(y,x+1) + I(y,x+2)) / 3.0 where y in 0:H, x in 0:W-2
  O(y,x) = (T(y,x) + T(y+1,x) + T(y+2,x)) / 3.0 where y in 0:H-2, x in 0:W-2
}"""


def _blur_ref(img: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    t = (img[:, :-2] + img[:, 1:-1] + img[:, 2:]) / np.float32(3)
    return t, (t[:-2] + t[1:-1] + t[2:]) / np.float32(3)


# name: (source, input shape, numpy reference)
CASES: dict[str, tuple[str, tuple[int, ...], Callable[[np.ndarray], object]]] = {
    "colsum": ("def colsum(float(N,M) A) -> (s) { s(j) +=! A(r_i,j) }", (4096, 4096),
               lambda a: a.sum(0)),
    "rowsum": ("def rowsum(float(N,M) A) -> (s) { s(i) +=! A(i,r_j) }", (4096, 4096),
               lambda a: a.sum(1)),
    "blur": (BLUR, (2050, 2050), _blur_ref),
    "transpose": ("def tr(float(N,M) A) -> (B) { B(j,i) = A(i,j) }", (4096, 4096),
                  lambda a: np.ascontiguousarray(a.T)),
    "midsum": ("def mid(float(P,Q,R) X) -> (s) { s(i,k) +=! X(i,r_j,k) }", (16, 1024, 1024),
               lambda x: x.sum(1)),
    # split-K: one output element, so the reduction itself runs on the threads
    "total": ("def total(float(N,M) A) -> (s) { s +=! A(r_i,r_j) }", (4096, 4096),
              lambda a: np.float32(a.sum(dtype=np.float64))),
    "sumsq": ("def sumsq(float(N,M) A) -> (s) { s +=! A(r_i,r_j) * A(r_i,r_j) }", (4096, 4096),
              lambda a: np.float32(np.vdot(a, a))),
}


def _best(fn: Callable[[], object], calls: int) -> float:
    fn()
    best = float("inf")
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best * 1e3


def _check(got: object, want: object, rtol: float = 1e-3) -> None:
    gots = got if isinstance(got, tuple) else (got,)
    wants = want if isinstance(want, tuple) else (want,)
    for g, w in zip(gots, wants, strict=True):
        np.testing.assert_allclose(g, w, rtol=rtol, atol=1e-2)


def run(name: str, calls: int) -> tuple[str, float, float, float]:
    src, shape, ref = CASES[name]
    x = np.random.default_rng(0).random(shape, dtype=np.float32)
    auto = polyopt.compile(src)
    plain = polyopt.compile(src, schedule="program-order")
    _check(auto(x), ref(x))
    # Program order sums a whole tensor into one float32 accumulator, in sequence: over
    # 16M elements its rounding reaches percents (the split schedule's partial sums do not).
    _check(plain(x), ref(x), rtol=0.1 if name in ("total", "sumsq") else 1e-3)
    times = (_best(lambda: auto(x), calls), _best(lambda: plain(x), calls),
             _best(lambda: ref(x), calls))
    names = dict(zip(("N", "M") if len(shape) == 2 else ("P", "Q", "R"), shape, strict=True))
    if name == "blur":
        names = {"H": shape[0], "W": shape[1]}
    notes = polyopt.schedule(src, sizes=names).notes
    print(f"{name}: " + ("; ".join(notes) if notes else "(no model decision)"))
    return (name, *times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", default=",".join(CASES))
    p.add_argument("--calls", type=int, default=10)
    args = p.parse_args()
    rows = [run(c, args.calls) for c in args.cases.split(",")]
    print("| case | polyopt auto ms | polyopt program order ms | numpy ms |")
    print("|---|---|---|---|")
    for name, a, b, c in rows:
        print(f"| {name} | {a:.2f} | {b:.2f} | {c:.2f} |")


if __name__ == "__main__":
    main()
