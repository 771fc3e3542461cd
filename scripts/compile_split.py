"""Compile time of each suite operator (issue 15: at most 1 s each), split by stage.

For every operator of ``scripts/bench_suite.py`` (or --ops), in one process after a warm-up
compile, with an empty kernel cache each (``polyopt.config.scratch_cache``): the time from
``polyopt.compile`` to the first result, minus one call (as bench_suite's "compile s"),
and its parts:

- lower: the schedule (front end, dependences, layout, the CPU pipeline);
- ast, render: isl's AST and the C printer;
- gcc: the C compiler (its child processes' CPU time);

each as wall seconds and CPU seconds (process time plus children: on a loaded machine
the CPU time is the steadier figure). The rest (parsing, loading the object) is the total
minus the parts. Compare two checkouts by running this with each first on PYTHONPATH:
    python3 scripts/compile_split.py --ops conv_3x3,conv_5x5 --json /tmp/new.json
    PYTHONPATH=/tmp/old python3 scripts/compile_split.py --json /tmp/old.json
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # scripts/ is not a package

import bench_ops as ops
import bench_suite

import polyopt
from polyopt import driver
from polyopt.config import scratch_cache
from polyopt.runtime import compiler

STAGES = (("lower", driver, "_schedule"), ("ast", driver, "build_ast"),
          ("render", driver, "render"), ("gcc", compiler, "_run"))


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@contextmanager
def _clock() -> Iterator[list[float]]:
    """[wall, cpu] of the block, children's CPU included, filled in when it ends."""
    out = [0.0, 0.0]
    wall, cpu, kids = time.perf_counter(), time.process_time(), _children_cpu()
    try:
        yield out
    finally:
        out[0] = time.perf_counter() - wall
        out[1] = time.process_time() - cpu + _children_cpu() - kids


def _timed(parts: dict[str, list[float]], key: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def counted(*args: Any, **kwargs: Any) -> Any:
        with _clock() as spent:
            result = fn(*args, **kwargs)
        total = parts.setdefault(key, [0.0, 0.0])
        total[0] += spent[0]
        total[1] += spent[1]
        return result
    return counted


def instrument(parts: dict[str, list[float]]) -> None:
    """Time each stage's entry point into ``parts`` (stage -> [wall, cpu])."""
    for key, module, name in STAGES:
        setattr(module, name, _timed(parts, key, getattr(module, name)))


def measure(case: Any, parts: dict[str, list[float]]) -> dict[str, Any]:
    """One operator's cold compile: totals and stages, in seconds."""
    inputs = ops.make_inputs(case, np.random.default_rng(0))
    parts.clear()
    with scratch_cache(), _clock() as total:
        kernel = polyopt.compile(case.source, case.kernel, sizes=case.sizes)
        kernel(*inputs)
    with _clock() as call:  # as bench_suite: the first result minus one call
        kernel(*inputs)
    row: dict[str, Any] = {"wall": total[0] - call[0], "cpu": total[1] - call[1]}
    row.update({key: list(parts.get(key, [0.0, 0.0])) for key, _, _ in STAGES})
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", help="comma-separated operator names (default: every one)")
    ap.add_argument("--json", help="write the figures to this file")
    args = ap.parse_args(argv)
    cases = bench_suite.all_cases(False)
    if args.ops:
        wanted = args.ops.split(",")
        unknown = set(wanted) - {c.op for c in cases}
        if unknown:
            ap.error(f"unknown operators: {', '.join(sorted(unknown))}")
        cases = [c for c in cases if c.op in wanted]
    parts: dict[str, list[float]] = {}
    instrument(parts)
    with scratch_cache():  # imports, isl and the compiler's first run out of the figures
        polyopt.compile("def w(float(N) A) -> (B) { B(i) = A(i) + 1 }",
                        sizes={"N": 8})(np.ones(8, np.float32))
    print(f"{'operator':18s} {'wall':>5s} {'cpu':>5s} | " +
          " ".join(f"{k:>11s}" for k, _, _ in STAGES) + "  (wall/cpu s)")
    rows = {}
    for case in cases:
        try:
            row = rows[case.op] = measure(case, parts)
        except Exception as exc:  # report and go on, as bench_suite does
            print(f"{case.op:18s} ERROR {type(exc).__name__}: {str(exc)[:200]}", flush=True)
            continue
        stages = " ".join(f"{row[k][0]:5.2f}/{row[k][1]:5.2f}" for k, _, _ in STAGES)
        flag = "  > 1 s" if row["cpu"] > bench_suite.COMPILE_BUDGET_S else ""
        print(f"{case.op:18s} {row['wall']:5.2f} {row['cpu']:5.2f} | {stages}{flag}",
              flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
