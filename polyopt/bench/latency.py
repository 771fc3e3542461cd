"""``polyopt bench latency`` (issue 16, item 3): how long a fresh process waits for its first
result, and what one call of a tiny kernel costs.

- first result: a new Python process imports polyopt, then times (from the end of the
  import) its first ``polyopt.einsum("ij,jk->ik", a, b)`` (8x8 float32 operands), or its
  first ``polyopt.compile(MM)(a, b)`` (16x16x16 matmul), with a cold cache (a new, empty
  ``POLYOPT_CACHE_DIR`` each time) and with a warm one (a cache the same code filled
  before). Each is the median of ``--repeat`` processes (``--cold-repeat`` cold), the
  checkouts taking turns. The import itself is reported too, and for warm starts the
  process's CPU time over the same span (less sensitive than wall time to a busy machine).
- call overhead: in one process per checkout, batches of ``--batch`` calls of the 16x16x16
  matmul kernel and of ``numpy.matmul``, of the tiny einsum and of ``numpy.einsum``, taking
  turns for ``--rounds`` rounds; each figure is the median batch's time per call.

With ``--before PATH`` (another checkout, e.g. the main branch) every measurement is made
for both, in the same run, and the table shows both columns:

    polyopt bench latency --before /work/main
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# The directory polyopt is imported from (a checkout, or site-packages): the children's PYTHONPATH.
ROOT = Path(__file__).resolve().parents[2]
MM = "def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,r_k) * B(r_k,n) }"

FIRST = """
import json, sys, time
t0 = time.perf_counter()
import numpy as np
import polyopt
t1, c1 = time.perf_counter(), time.process_time()
rng = np.random.default_rng(0)
if sys.argv[1] == "einsum":
    a, b = rng.random((8, 8), np.float32), rng.random((8, 8), np.float32)
    got = polyopt.einsum("ij,jk->ik", a, b)
else:
    a, b = rng.random((16, 16), np.float32), rng.random((16, 16), np.float32)
    got = polyopt.compile(sys.argv[2])(a, b)
t2, c2 = time.perf_counter(), time.process_time()
assert np.allclose(got, a @ b, rtol=1e-5), "wrong result"
print(json.dumps({"import": t1 - t0, "first": t2 - t1, "cpu": c2 - c1,
                  "polyopt": polyopt.__file__}))
"""

CALLS = """
import json, statistics, sys, time
import numpy as np
import polyopt
batch, rounds = int(sys.argv[2]), int(sys.argv[3])
rng = np.random.default_rng(0)
a, b = rng.random((16, 16), np.float32), rng.random((16, 16), np.float32)
x, y = rng.random((8, 8), np.float32), rng.random((8, 8), np.float32)
k = polyopt.compile(sys.argv[1])
cases = {"kernel": lambda: k(a, b), "matmul": lambda: np.matmul(a, b),
         "einsum": lambda: polyopt.einsum("ij,jk->ik", x, y),
         "np.einsum": lambda: np.einsum("ij,jk->ik", x, y)}
assert np.allclose(k(a, b), a @ b, rtol=1e-5)
assert np.allclose(polyopt.einsum("ij,jk->ik", x, y), x @ y, rtol=1e-5)
times = {name: [] for name in cases}
for _ in range(3):  # warm up: plans, the fast paths
    for f in cases.values():
        f()
for _ in range(rounds):
    for name, f in cases.items():
        t0 = time.perf_counter()
        for _ in range(batch):
            f()
        times[name].append((time.perf_counter() - t0) / batch)
print(json.dumps({**{name: statistics.median(ts) for name, ts in times.items()},
                  "polyopt": polyopt.__file__}))
"""


def _run(code: str, tree: Path, cache: Path, *args: str) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree), "POLYOPT_CACHE_DIR": str(cache)}
    for knob in ("POLYOPT_NO_CACHE", "POLYOPT_DEBUG"):
        env.pop(knob, None)
    # cwd: the cache, not a checkout ("-c" puts the working directory first on sys.path).
    done = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True,
                          text=True, timeout=600, check=False, cwd=cache)
    if done.returncode:
        raise SystemExit(f"a child failed ({tree}):\n{done.stderr[-3000:]}")
    got = json.loads(done.stdout.splitlines()[-1])
    if not Path(got.pop("polyopt")).is_relative_to(tree):
        raise SystemExit(f"the child imported polyopt from outside {tree}")
    return got  # type: ignore[no-any-return]


def first_results(trees: dict[str, Path], scratch: Path, repeat: int,
                  cold_repeat: int) -> dict[str, dict[str, float]]:
    """Median import and first-result times (s) per checkout, cold and warm."""
    samples: dict[str, dict[str, list[float]]] = {name: {} for name in trees}
    warm = {name: scratch / f"warm-{name}" for name in trees}
    for name, tree in trees.items():  # fill each warm cache once
        warm[name].mkdir(mode=0o700)
        for mode in ("einsum", "kernel"):
            _run(FIRST, tree, warm[name], mode, MM)
    for r in range(max(repeat, cold_repeat)):
        for name, tree in trees.items():
            for mode in ("einsum", "kernel"):
                kinds = (["warm"] if r < repeat else []) + (["cold"] if r < cold_repeat else [])
                for kind in kinds:
                    cache = warm[name] if kind == "warm" else Path(tempfile.mkdtemp(
                        dir=scratch))
                    got = _run(FIRST, tree, cache, mode, MM)
                    samples[name].setdefault(f"{mode} {kind}", []).append(got["first"])
                    samples[name].setdefault(f"{mode} {kind} cpu", []).append(got["cpu"])
                    samples[name].setdefault("import", []).append(got["import"])
                    if kind == "cold":
                        shutil.rmtree(cache, ignore_errors=True)
    return {name: {k: statistics.median(v) for k, v in got.items()}
            for name, got in samples.items()}


def call_costs(trees: dict[str, Path], scratch: Path, batch: int,
               rounds: int) -> dict[str, dict[str, float]]:
    """Median time per call (s) of each case, per checkout (one process each)."""
    return {name: _run(CALLS, tree, scratch / f"warm-{name}", MM, str(batch), str(rounds))
            for name, tree in trees.items()}


ROWS = [("import polyopt", "import", 1e3, "ms"),
        ("first einsum result, cold cache", "einsum cold", 1e3, "ms"),
        ("first einsum result, warm cache", "einsum warm", 1e3, "ms"),
        ("  the same, CPU time of the process", "einsum warm cpu", 1e3, "ms"),
        ("first compile+call (mm 16^3), cold cache", "kernel cold", 1e3, "ms"),
        ("first compile+call (mm 16^3), warm cache", "kernel warm", 1e3, "ms"),
        ("  the same, CPU time of the process", "kernel warm cpu", 1e3, "ms"),
        ("call: mm 16x16x16 kernel", "kernel", 1e6, "us"),
        ("call: numpy.matmul, same operands", "matmul", 1e6, "us"),
        ("call: einsum ij,jk->ik 8x8", "einsum", 1e6, "us"),
        ("call: numpy.einsum, same operands", "np.einsum", 1e6, "us")]


def table(results: dict[str, dict[str, float]]) -> str:
    names = list(results)
    lines = [f"| measure | {' | '.join(names)} |", f"|---|{'---:|' * len(names)}"]
    for label, key, scale, unit in ROWS:
        cells = [f"{results[n][key] * scale:.1f} {unit}" if key in results[n] else "-"
                 for n in names]
        lines.append(f"| {label} | {' | '.join(cells)} |")
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``polyopt bench latency``."""
    parser.add_argument("--before", type=Path, help="another checkout, measured alongside")
    parser.add_argument("--repeat", type=int, default=7, help="warm processes per case")
    parser.add_argument("--cold-repeat", type=int, default=3, help="cold processes per case")
    parser.add_argument("--batch", type=int, default=2000, help="calls per timed batch")
    parser.add_argument("--rounds", type=int, default=15, help="batches per case")
    parser.add_argument("--json", type=Path, help="also write the figures here")


def run(args: argparse.Namespace) -> int:
    """Measure this checkout (and ``--before``) and print the table."""
    trees = {"before": args.before.resolve()} if args.before else {}
    trees["after" if args.before else "this checkout"] = ROOT
    with tempfile.TemporaryDirectory(prefix="polyopt-latency-") as tmp:
        scratch = Path(tmp)
        results: dict[str, dict[str, Any]] = first_results(trees, scratch, args.repeat,
                                                           args.cold_repeat)
        for name, costs in call_costs(trees, scratch, args.batch, args.rounds).items():
            results[name].update(costs)
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``polyopt bench latency ...`` as a module of its own (``python3 -m
    polyopt.bench.latency``)."""
    parser = argparse.ArgumentParser(prog="polyopt bench latency", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
