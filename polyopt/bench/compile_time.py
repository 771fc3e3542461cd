"""``polyopt bench compile-time``: compile-time reproducers (issue 13, item 4), defs whose
lowering used to explode.

Each case runs in a subprocess of its own, under a wall-clock limit (--timeout) and an
address-space limit (--memory-gb), with a fresh compile cache, and reports:

- lower s: polyopt's own work (``Kernel.lowered()``: front end, dependences, schedule, AST, C);
- total s: up to the first result, the C compiler included (cases too big to run: "-");
- peak MB: the subprocess's peak resident memory.

Cases:
- einsum7, einsum8: ``polyopt.einsum("abcdefg->", x)`` on a (2,)*7 (and (2,)*8) array;
- chain160, chain2000: ``T1(i) = A(i) * 2; T2(i) = T1(i) + 2; ...; O(i) = T159(i) * 3``,
  a chain of elementwise statements through locals;
- indep160, indep2000: ``O0(i) = A(i) * 1; O1(i) = A(i) * 2; ...``, independent outputs;
- overwrite160, overwrite2000: ``B(i) = A(i) + 0; B(i) = A(i) + 1; ...``, one output written
  by every statement (issue 40; dead-statement elimination keeps the last);
- updates160, updates2000: ``B(i) = A(i) + 0; B(i) = B(i) + 1; ...``, the same kept live
  (every pair of statements has an output and an anti dependence);
- pieces160, pieces2000: ``B(i) = A(i) + B(i - 10k) where i in 10k:10k+10``, one declared
  output written piecewise (value semantics), a nest per piece;
- bcast: ``O(i,j,k) = A(i,k) where j in 0:131072`` at I=64, K=131072, lowered only (the
  output would be 4 PB): a 3-D broadcast whose inner copy the transpose printer examines.

Run against another checkout (main, say) with --repo PATH (it goes first on PYTHONPATH; this
module runs there, so the checkout needs ``polyopt.subscripts``: older ones have
``scripts/compile_time.py``, which takes the same cases and ``--repo``):
    polyopt bench compile-time                     # every case, this checkout
    polyopt bench compile-time --repo /tmp/ct-main --cases einsum7,chain160

Each child runs this file (``runpy``) with the checkout first on its path, so a checkout
that predates this module is measured too.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from polyopt import api
from polyopt.bench.entry import suite_main
from polyopt.errors import OptionError
from polyopt.subscripts.call import einsum_plan

# The directory polyopt is imported from (a checkout, or site-packages).
ROOT = Path(__file__).resolve().parents[2]
# A child: this file run as __main__ with the options that follow it.
CHILD = ("import runpy, sys; sys.argv = sys.argv[1:]; "
         "runpy.run_path(sys.argv[0], run_name='__main__')")


def chain(n: int) -> str:
    locals_ = ", ".join(f"T{k}" for k in range(1, n))
    body = ["T1(i) = A(i) * 2", *(f"T{k}(i) = T{k - 1}(i) + {k}" for k in range(2, n)),
            f"O(i) = T{n - 1}(i) * 3"]
    return f"def chain(float(N) A) -> (O) local ({locals_}) {{\n" + "\n".join(body) + "\n}"


def independent(n: int) -> str:
    outs = ", ".join(f"O{k}" for k in range(n))
    body = [f"O{k}(i) = A(i) * {k + 1}" for k in range(n)]
    return f"def indep(float(N) A) -> ({outs}) {{\n" + "\n".join(body) + "\n}"


def overwrite(n: int) -> str:
    body = [f"B(i) = A(i) + {k}" for k in range(n)]
    return "def overwrite(float(N) A) -> (B) {\n" + "\n".join(body) + "\n}"


def updates(n: int) -> str:
    body = ["B(i) = A(i) + 0", *(f"B(i) = B(i) + {k}" for k in range(1, n))]
    return "def upd(float(N) A) -> (B) {\n" + "\n".join(body) + "\n}"


def pieces(n: int) -> str:
    body = ["B(i) = A(i) where i in 0:10", *(
        f"B(i) = A(i) + B(i - {10 * k}) where i in {10 * k}:{10 * k + 10}" for k in range(1, n))]
    return (f"def pieces(float({10 * n}) A) -> (float({10 * n}) B) {{\n" + "\n".join(body)
            + "\n}")


BCAST = "def bcast(float(I,K) A) -> (O) { O(i,j,k) = A(i,k) where j in 0:131072 }"


def _einsum(n: int) -> Callable[[], tuple[float, float]]:
    def run() -> tuple[float, float]:
        x = np.random.default_rng(0).random((2,) * n).astype(np.float32)
        plan = einsum_plan("abcdefgh"[:n] + "->", x)  # what polyopt.einsum compiles
        t0 = time.perf_counter()
        kernel = api.compile(plan.text, sizes=plan.sizes)
        kernel.lowered()
        lowered = time.perf_counter() - t0
        got = kernel(*plan.operands)
        total = time.perf_counter() - t0
        assert np.isclose(got, x.sum(dtype=np.float64), rtol=1e-4), (got, x.sum())
        return lowered, total
    return run


def _many(source: Callable[[int], str], n: int) -> Callable[[], tuple[float, float]]:
    def run() -> tuple[float, float]:
        size = 10 * n if source is pieces else 64
        a = np.random.default_rng(0).random(size).astype(np.float32)
        t0 = time.perf_counter()
        kernel = api.compile(source(n), sizes={} if source is pieces else {"N": size})
        kernel.lowered()
        lowered = time.perf_counter() - t0
        out = kernel(a)  # reuses the lowering: the C compiler, then the call
        total = time.perf_counter() - t0
        first = out if isinstance(out, np.ndarray) else out[0]
        assert np.allclose(first, _want(source, a, n), rtol=1e-5), "wrong result"
        return lowered, total
    return run


def _want(source: Callable[[int], str], a: np.ndarray, n: int) -> np.ndarray:
    if source is chain:
        return _chain_value(a, n)
    if source is overwrite:
        return a + np.float32(n - 1)
    if source is updates:  # summed in the program's order, in float32
        t = a.astype(np.float32)
        for k in range(1, n):
            t = t + np.float32(k)
        return t
    if source is pieces:
        first = np.tile(a[:10], n)
        return np.where(np.arange(10 * n) < 10, a, a + first)
    return a * 1


def _chain_value(a: np.ndarray, n: int) -> np.ndarray:
    t = a.astype(np.float32) * np.float32(2)
    for k in range(2, n):
        t = t + np.float32(k)
    return t * np.float32(3)


def _bcast() -> tuple[float, float]:
    t0 = time.perf_counter()
    api.compile(BCAST, sizes={"I": 64, "K": 131072}).lowered()
    return time.perf_counter() - t0, float("nan")


CASES: dict[str, Callable[[], tuple[float, float]]] = {
    "einsum7": _einsum(7), "einsum8": _einsum(8),
    "chain160": _many(chain, 160), "indep160": _many(independent, 160),
    "chain2000": _many(chain, 2000), "indep2000": _many(independent, 2000),
    **{f"{f.__name__}{n}": _many(f, n) for f in (overwrite, updates, pieces) for n in (160, 2000)},
    "bcast": _bcast,
}


def run_one(case: str, memory_gb: float) -> None:
    """In the subprocess: run ``case`` and print one JSON line."""
    limit = int(memory_gb * (1 << 30))
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    try:
        lowered, total = CASES[case]()
        status = "ok"
    except MemoryError:
        lowered, total, status = float("nan"), float("nan"), f"out of memory (> {memory_gb} GB)"
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"lower": lowered, "total": total, "peak": peak, "status": status}))


def measure(case: str, repo: Path, timeout: float, memory_gb: float) -> dict[str, object]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(repo), *filter(None, [os.environ.get("PYTHONPATH")])]))
    with tempfile.TemporaryDirectory() as cache:
        env["POLYOPT_CACHE_DIR"] = cache
        cmd = [sys.executable, "-c", CHILD, __file__, "--one", case, "--memory-gb",
               str(memory_gb)]
        t0 = time.perf_counter()
        try:
            # cwd: with ``-c``, the working directory comes first on sys.path, before
            # PYTHONPATH: run from a checkout, its own polyopt would be measured.
            done = subprocess.run(cmd, env=env, capture_output=True, text=True,
                                  timeout=timeout, check=False, cwd=cache)
        except subprocess.TimeoutExpired:
            return {"status": f"did not finish in {timeout:.0f} s"}
        wall = time.perf_counter() - t0
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    if done.returncode or not lines:
        tail = (done.stderr.strip().splitlines() or ["?"])[-1]
        return {"status": f"failed ({tail[:60]})", "wall": wall}
    return {**json.loads(lines[-1]), "wall": wall}


def _cell(value: object, fmt: str) -> str:
    return "-" if not isinstance(value, float) or value != value else format(value, fmt)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``polyopt bench compile-time``."""
    p.add_argument("--cases", default=",".join(CASES), help="comma-separated: " + ", ".join(CASES))
    p.add_argument("--repo", type=Path, action="append",
                   help="checkout to import polyopt from (repeat to compare); default: this one")
    p.add_argument("--timeout", type=float, default=90.0, help="seconds per case")
    p.add_argument("--memory-gb", type=float, default=4.0, help="address-space limit per case")
    p.add_argument("--one", help=argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    """Every case of ``--cases`` in a child per checkout, one line each (``--one``: be the
    child)."""
    if args.one:
        run_one(args.one, args.memory_gb)
        return 0
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = sorted(set(cases) - set(CASES))
    if unknown:
        raise OptionError(f"unknown --cases {','.join(unknown)}; choose from {','.join(CASES)}")
    repos = args.repo or [ROOT]
    print(f"{'case':<13} {'checkout':<28} {'lower s':>8} {'total s':>8} {'peak MB':>8}  status")
    for case in cases:
        for repo in repos:
            r = measure(case, repo, args.timeout, args.memory_gb)
            print(f"{case:<13} {str(repo)[-28:]:<28} {_cell(r.get('lower'), '8.2f')} "
                  f"{_cell(r.get('total'), '8.2f')} {_cell(r.get('peak'), '8.0f')}  "
                  f"{r['status']}", flush=True)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``polyopt bench compile-time ...`` as a module or file of its own."""
    return suite_main("compile-time", __doc__, add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
