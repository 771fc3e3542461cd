"""``polyopt bench einsum-paths``: multi-operand einsum along a path, polyopt vs numpy, on
opt_einsum's test expressions.

The expressions are those of opt_einsum's own contraction tests (``tests/test_contract.py``)
with three or more operands, plus ``ij,jk,kl->il``, at opt_einsum's default extents
(``a``=2, ``b``=3, ``c``=4, ``d``=5, ...; ``--scale k`` multiplies each by k), in float64.
Per expression, in one run, interleaved and repeated (the median is printed):

- ``polyopt``: ``polyopt.einsum(..., optimize=True)``, a kernel per pairwise step; its first
  call (path search, compiling every step, first run) is timed apart, in the ``first`` column;
- ``np opt``: ``numpy.einsum(..., optimize=True)`` (its path is searched on every call);
- ``np``: ``numpy.einsum`` with numpy's default, one nest (``optimize=False``); skipped
  (nan) above ``--max-naive`` flops, where one call takes seconds.

The ratios are polyopt's time over numpy's (< 1: polyopt is faster). ``--breakdown`` also
times each step of polyopt's path three ways: the whole ``einsum`` call, its compiled
kernel called directly on prepared operands, and what numpy's path takes for that step.

    flock -s /tmp/bench.lock polyopt bench einsum-paths [--breakdown] [--only EXPR]
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np

from polyopt import api
from polyopt.bench.entry import suite_main
from polyopt.subscripts.call import einsum, einsum_plan
from polyopt.subscripts.path import contraction_path

# opt_einsum's tests/test_contract.py, the expressions of three or more operands.
EXPRESSIONS = [
    "ij,jk,kl->il",
    "a,ab,abc->abc", "a,b,ab->ab",
    "ea,fb,gc,hd,abcd->efgh", "ea,fb,abcd,gc,hd->efgh", "abcd,ea,fb,gc,hd->efgh",
    "acdf,jbje,gihb,hfac,gfac,gifabc,hfac", "cd,bdhe,aidb,hgca,gc,hgibcd,hgac",
    "abhe,hidj,jgba,hiab,gab", "bde,cdh,agdb,hica,ibd,hgicd,hiac",
    "chd,bde,agbc,hiad,hgc,hgi,hiad", "chd,bde,agbc,hiad,bdi,cgh,agdb",
    "bdhe,acad,hiab,agac,hibd",
    "ab,ab,c->", "ab,ab,c->c", "ab,ab,cd,cd->", "ab,ab,cd,cd->ac", "ab,ab,cd,cd->cd",
    "ab,ab,cd,cd,ef,ef->",
    "ab,cd,ef->abcdef", "ab,cd,ef->acdf", "ab,cd,de->abcde", "ab,cd,de->be",
    "ab,bcd,cd->abcd", "ab,bcd,cd->abd",
    "eb,cb,fb->cef", "dd,fb,be,cdb->cef", "bca,cdb,dbf,afc->", "dcc,fce,ea,dbf->ab",
    "fdf,cdd,ccd,afe->ae", "ed,fcd,ff,bcf->be", "baa,dcf,af,cde->be", "bd,db,eac->ace",
    "fff,fae,bef,def->abd", "efc,dbc,acf,fd->abe",
    "aab,fa,df,ecc->bde", "ecb,fef,bad,ed->ac", "bcf,bbb,fbf,fc->", "bb,ff,be->e",
    "bcb,bb,fc,fff->", "fbb,dfd,fc,fc->", "afd,ba,cc,dc->bf", "adb,bc,fa,cfc->d",
    "bbd,bda,fc,db->acf", "dba,ead,cad->bce", "aef,fbc,dca->bde",
]
# opt_einsum's default extent of each letter (its testing._default_dim_dict).
EXTENTS = dict(zip("abcdefghijklmnopqABC",
                   [2, 3, 4, 5, 4, 3, 2, 6, 5, 4, 3, 2, 5, 7, 4, 3, 2, 3, 4, 9], strict=True))


def operands(expr: str, scale: int, rng: np.random.Generator) -> list[np.ndarray]:
    terms = expr.split("->")[0].split(",")
    return [rng.random([EXTENTS[c] * scale for c in t]) for t in terms]


def per_call(fn: Callable[[], Any], budget: float) -> float:
    """Seconds per call of ``fn``, from as many calls as fit in about ``budget`` seconds."""
    t = time.perf_counter()
    fn()
    once = max(time.perf_counter() - t, 1e-7)
    n = max(1, int(budget / once))
    t = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t) / n


def measure(expr: str, ops: list[np.ndarray], rounds: int, budget: float,
            naive: bool) -> dict[str, Any]:
    """First call of polyopt, then the ways interleaved over ``rounds`` rounds (numpy's one
    nest only if ``naive``)."""
    t = time.perf_counter()
    got = einsum(expr, *ops, optimize=True)
    first = time.perf_counter() - t
    want = np.einsum(expr, *ops, optimize=True)
    ways: dict[str, Callable[[], Any]] = {
        "polyopt": lambda: einsum(expr, *ops, optimize=True),
        "np opt": lambda: np.einsum(expr, *ops, optimize=True),
    }
    if naive:
        ways["np"] = lambda: np.einsum(expr, *ops)
    times: dict[str, list[float]] = {k: [] for k in ways}
    names = list(ways)
    for r in range(rounds):  # rotating the order: no way always runs after the same one
        for name in names[r % len(names):] + names[:r % len(names)]:
            times[name].append(per_call(ways[name], budget))
    med = {k: statistics.median(v) for k, v in times.items()}
    med.setdefault("np", math.nan)
    # The operands are in [0, 1): no cancellation, so the error bound scales with the result.
    extents = dict(contraction_path(expr, [o.shape for o in ops], False).sizes)
    reduction = math.prod(extents.values()) // max(1, np.size(want))
    bound = 4 * np.finfo(np.float64).eps * (reduction + 1) * np.abs(want) + 1e-300
    ok = bool(np.all(np.abs(np.asarray(got) - want) <= bound))
    return {"first": first, "ok": ok, **med}


def breakdown(expr: str, ops: list[np.ndarray], budget: float) -> None:
    """Each step of polyopt's path: the einsum call, its bare kernel, numpy's own step."""
    path = contraction_path(expr, [o.shape for o in ops], True)
    pending = list(ops)
    print(f"  {'step':28} {'einsum us':>10} {'kernel us':>10} {'np step us':>10}")
    for step in path.steps:
        args = [pending.pop(p) for p in step.operands]
        plan = einsum_plan(step.subscripts, *args)
        kernel = api.compile(plan.text, "einsum", sizes=plan.sizes)
        call = per_call(partial(einsum, step.subscripts, *args, optimize=False), budget)
        bare = per_call(partial(kernel, *plan.operands), budget)
        mine = per_call(partial(np.einsum, step.subscripts, *args, optimize=True), budget)
        print(f"  {step.subscripts:28} {call * 1e6:10.1f} {bare * 1e6:10.1f} {mine * 1e6:10.1f}")
        pending.append(np.einsum(step.subscripts, *args))
    search = per_call(lambda: np.einsum_path(expr, *ops, optimize=True), budget)
    print(f"  numpy's path search on each call: {search * 1e6:.1f} us")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``polyopt bench einsum-paths``."""
    parser.add_argument("--only", action="append", help="an expression to run (repeatable)")
    parser.add_argument("--scale", type=int, default=1, help="multiply every extent by this")
    parser.add_argument("--rounds", type=int, default=7,
                        help="interleaved rounds (median kept)")
    parser.add_argument("--budget", type=float, default=0.02, help="seconds per timing")
    parser.add_argument("--breakdown", action="store_true", help="time each step of the path")
    parser.add_argument("--max-naive", type=float, default=1e9,
                        help="skip numpy's one nest above this many flops (it takes seconds)")


def run(args: argparse.Namespace) -> int:
    """A line per expression of ``--only`` (default: all), then the geometric mean."""
    rng = np.random.default_rng(0)
    # polyopt's kernels run OpenMP threads: on a busy machine they wait for each other.
    print(f"load average at start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    print(f"{'expression':40} {'steps':>5} {'first s':>7} {'polyopt us':>10} {'np opt us':>9} "
          f"{'np us':>9} {'/np opt':>7} {'/np':>7}")
    ratios = []
    for expr in args.only or EXPRESSIONS:
        ops = operands(expr, args.scale, rng)
        path = contraction_path(expr, [o.shape for o in ops], True)
        m = measure(expr, ops, args.rounds, args.budget, path.naive_flops <= args.max_naive)
        ratios.append(m["polyopt"] / m["np opt"])
        flag = "" if m["ok"] else "  WRONG RESULT"
        print(f"{expr:40} {len(path.steps):5d} {m['first']:7.2f} {m['polyopt'] * 1e6:10.1f} "
              f"{m['np opt'] * 1e6:9.1f} {m['np'] * 1e6:9.1f} {ratios[-1]:7.2f} "
              f"{m['polyopt'] / m['np']:7.2f}{flag}", flush=True)
        if args.breakdown:
            breakdown(expr, ops, args.budget)
    geo = float(np.exp(np.mean(np.log(ratios))))
    over = sum(r > 1.5 for r in ratios)
    print(f"geomean polyopt / numpy optimize=True: {geo:.2f}; over 1.5x: {over} of {len(ratios)}")
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``polyopt bench einsum-paths ...`` as a module of its own (``python3 -m
    polyopt.bench.einsum_paths``)."""
    return suite_main("einsum-paths", __doc__, add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
