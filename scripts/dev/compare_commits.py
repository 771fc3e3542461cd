"""Two commits of polyopt in one run: lowering time, C compile time and kernel speed.

For refactorings that must not change behaviour: each commit is checked out into a
temporary git worktree, and every measurement runs in a fresh process that imports that
commit's package (PYTHONPATH), with a cold, private kernel cache. The commits alternate
within each round (ABBA...), so a drift of this machine's speed hits both alike; the table
gives medians over the rounds and the ratio new/old (below 1: the new commit is faster).

    python scripts/dev/compare_commits.py d2f641c HEAD --rounds 3
    python scripts/dev/compare_commits.py OLD NEW --cases matmul,r50:1,r50:6 --calls 20

Cases: ``matmul`` (1024^3 float32), ``mm_odd`` (1000 x 1100 x 1200), ``r50:N`` / ``mv2:N``
(layer N of ResNet-50 / MobileNetV2 as ``polyopt bench conv`` runs it, batch 1), ``r50``
(every ResNet-50 layer), ``ops:NAME`` (an operator of ``polyopt bench ops``, float32). Each
case checks the two commits' outputs against each other.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]

# Runs inside a commit's package: compile (lowering, cold cache), first call (C compile
# and load), then the median of timed calls; prints one JSON line.
WORKER = r"""
import json, sys, time
import numpy as np
import polyopt
from polyopt.bench.layers import MODELS
from polyopt.bench.peers import polyopt_definition

case, calls, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rng = np.random.default_rng(0)
if case in ("matmul", "mm_odd"):
    m, n, k = (1024, 1024, 1024) if case == "matmul" else (1000, 1100, 1200)
    src = "def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,r_k) * B(r_k,n) }"
    name, sizes = "mm", {"M": m, "N": n, "K": k}
    args = [rng.standard_normal((m, k), np.float32), rng.standard_normal((k, n), np.float32)]
elif case.startswith("ops:"):
    from polyopt.bench.suite_cases import all_cases
    op = next(c for c in all_cases(False) if c.op == case[4:])
    name, src, sizes = op.kernel, op.source, dict(op.sizes)
    args = [rng.standard_normal(shape).astype(np.float32) for shape in op.shapes]
else:
    model, number = case.split(":")
    layer = next(x for x in MODELS[{"r50": "resnet50", "mv2": "mobilenetv2"}[model]]
                 if x.number == int(number))
    name, src, sizes = polyopt_definition(layer)
    sizes["N"] = 1
    args = [rng.standard_normal(layer.input_shape(1), np.float32),
            rng.standard_normal(layer.weight_shape(), np.float32)]
t0 = time.perf_counter()
kernel = polyopt.compile(src, name, sizes=sizes, options={"tuned": False})
t1 = time.perf_counter()
result = kernel(*args)
t2 = time.perf_counter()
times = []
for _ in range(calls):
    t = time.perf_counter()
    kernel(*args)
    times.append(time.perf_counter() - t)
np.save(out, np.asarray(result[0] if isinstance(result, (tuple, list)) else result))
call = sorted(times)[len(times) // 2]
print(json.dumps({"lower": t1 - t0, "build": t2 - t1 - call, "call": call}))
"""


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("old", help="the earlier commit")
    p.add_argument("new", nargs="?", default="HEAD", help="the later commit (HEAD)")
    p.add_argument("--cases", default="matmul,mm_odd,r50", help="comma-separated, see above")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--calls", type=int, default=10, help="timed calls per measurement")
    args = p.parse_args(argv)
    cases = _expand(args.cases.split(","))
    with contextlib.ExitStack() as stack, tempfile.TemporaryDirectory() as tmp:
        trees = [stack.enter_context(_worktree(rev, Path(tmp) / f"tree{i}"))
                 for i, rev in enumerate((args.old, args.new))]
        rows = {c: [[], []] for c in cases}  # case -> [old runs, new runs]
        for r in range(args.rounds):
            for case in cases:
                order = (0, 1) if r % 2 == 0 else (1, 0)
                for side in order:
                    rows[case][side].append(_measure(trees[side], case, args.calls, tmp, side))
                _check(case, tmp)
        _print(rows, args)
    return 0


def _expand(cases: list[str]) -> list[str]:
    out = []
    for c in cases:
        if c == "r50":
            out += [f"r50:{n}" for n in range(1, 24)]
        elif c == "mv2":
            out += [f"mv2:{n}" for n in range(1, 33)]
        else:
            out.append(c)
    return out


@contextlib.contextmanager
def _worktree(rev: str, path: Path) -> Iterator[Path]:
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(path),
                    rev], check=True)
    try:
        yield path
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(path)],
                       check=False)


def _measure(tree: Path, case: str, calls: int, tmp: str, side: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(dir=tmp) as cache:
        env = {**os.environ, "PYTHONPATH": str(tree), "POLYOPT_CACHE_DIR": cache}
        out = str(Path(tmp) / f"out{side}.npy")
        proc = subprocess.run([sys.executable, "-c", WORKER, case, str(calls), out], env=env,
                              cwd=tmp, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{case} failed at {tree}:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _check(case: str, tmp: str) -> None:
    a, b = (np.load(Path(tmp) / f"out{s}.npy") for s in (0, 1))
    scale = max(1.0, float(np.abs(a).max()))
    if a.shape != b.shape or not np.allclose(a, b, rtol=1e-4, atol=1e-4 * scale):
        raise SystemExit(f"{case}: the two commits' outputs differ")


def _print(rows: dict[str, list[list[dict[str, float]]]], args: argparse.Namespace) -> None:
    print(f"old {args.old}, new {args.new}: medians over {args.rounds} rounds "
          f"(each a fresh process, cold cache), ratio new/old")
    head = ("case", "lower old", "lower new", "ratio", "build old", "build new", "ratio",
            "call old ms", "call new ms", "ratio")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    ratios: dict[str, list[float]] = {"lower": [], "build": [], "call": []}
    for case, (old, new) in rows.items():
        cells = [case]
        for what in ("lower", "build", "call"):
            o = statistics.median(x[what] for x in old)
            n = statistics.median(x[what] for x in new)
            scale, fmt = (1e3, "{:.2f}") if what == "call" else (1.0, "{:.2f} s")
            ratios[what].append(n / o)
            cells += [fmt.format(o * scale), fmt.format(n * scale), f"{n / o:.2f}"]
        print("| " + " | ".join(cells) + " |")
    geo = {k: statistics.geometric_mean(v) for k, v in ratios.items()}
    print(f"geometric mean of ratios: lowering {geo['lower']:.3f}, build {geo['build']:.3f}, "
          f"call {geo['call']:.3f}")


if __name__ == "__main__":
    sys.exit(main())
