"""Compile time of each suite operator (issue 15: at most 1 s each), split by stage.

For every operator of ``polyopt bench suite`` (or --ops), in one process after a warm-up
compile, with an empty kernel cache each (``polyopt.config.scratch_cache``): the time from
``polyopt.compile`` to the first result, minus one call (as bench_suite's "compile s"),
and its parts:

- lower: the schedule (front end, dependences, layout, the CPU pipeline);
- ast, render: isl's AST and the C printer;
- gcc: the C compiler (its child processes' CPU time);

each as wall seconds and CPU seconds (process time plus children: on a loaded machine
the CPU time is the steadier figure). The rest (parsing, loading the object) is the total
minus the parts. Two more columns tell a slow machine from a slow process: "gc", the
milliseconds the garbage collector ran during the compile, and "gauge", the CPU
milliseconds of a fixed pure-Python loop run just before it (the least of three). This
VM's speed drifts by up to 1.6x within minutes, gcc and Python alike: a compile that is
slow while the gauge (or gcc, on the same C) is slow was slowed by the machine.

``--ops`` keeps its order and may repeat a name, and ``--rounds`` runs the list again in
the same process: each repeat compiles the operator's source with a comment appended, so
nothing lowered before is reused (what a long process with many distinct operators sees):
    python3 scripts/dev/compile_split.py --ops conv_3x3 --then-all --rounds 2
Compare two checkouts by running this with each first on PYTHONPATH:
    python3 scripts/dev/compile_split.py --ops conv_3x3,conv_5x5 --json /tmp/new.json
    PYTHONPATH=/tmp/old python3 scripts/dev/compile_split.py --json /tmp/old.json
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import resource
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

import polyopt
from polyopt import driver
from polyopt.bench import suite, suite_cases
from polyopt.bench.measure import make_inputs
from polyopt.config import scratch_cache
from polyopt.runtime import compiler

STAGES = (("lower", driver, "_schedule"), ("ast", driver, "build_ast"),
          ("render", driver, "render"), ("gcc", compiler, "_run"))
GAUGE_STEPS = 100_000  # about 10 ms of this VM at its usual speed


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


@contextmanager
def instrumented(parts: dict[str, list[float]]) -> Iterator[None]:
    """Time each stage's entry point into ``parts`` (stage -> [wall, cpu]) in the block."""
    saved = [(module, name, getattr(module, name)) for _, module, name in STAGES]
    for key, module, name in STAGES:
        setattr(module, name, _timed(parts, key, getattr(module, name)))
    try:
        yield
    finally:
        for module, name, fn in saved:
            setattr(module, name, fn)


class GcClock:
    """The wall seconds the garbage collector has run since ``reset`` (the owner removes
    ``event`` from ``gc.callbacks`` when done)."""

    def __init__(self) -> None:
        self.spent = 0.0
        self._start = 0.0
        gc.callbacks.append(self.event)

    def event(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.spent += time.perf_counter() - self._start

    def reset(self) -> None:
        self.spent = 0.0


def gauge(tries: int = 3) -> float:
    """CPU milliseconds of a fixed pure-Python loop, the least of ``tries``: the machine's
    speed just now (the least, as an interrupt slows one try; a slow phase lasts minutes)."""
    best = float("inf")
    for _ in range(tries):
        start = time.process_time()
        total = 0
        for k in range(GAUGE_STEPS):
            total += k * k % 7
        best = min(best, (time.process_time() - start) * 1e3)
    return best


def measure(case: Any, parts: dict[str, list[float]],
            gc_clock: GcClock | None = None) -> dict[str, Any]:
    """One operator's cold compile: totals and stages, in seconds (gc in milliseconds)."""
    inputs = make_inputs(case, np.random.default_rng(0))
    parts.clear()
    if gc_clock is not None:
        gc_clock.reset()
    with scratch_cache(), _clock() as total:
        kernel = polyopt.compile(case.source, case.kernel, sizes=case.sizes)
        kernel(*inputs)
    gc_ms = gc_clock.spent * 1e3 if gc_clock is not None else 0.0
    with _clock() as call:  # as bench_suite: the first result minus one call
        kernel(*inputs)
    row: dict[str, Any] = {"op": case.op, "wall": total[0] - call[0],
                           "cpu": total[1] - call[1], "gc_ms": gc_ms}
    row.update({key: list(parts.get(key, [0.0, 0.0])) for key, _, _ in STAGES})
    return row


def sequence(cases: Sequence[Any], ops_arg: str | None, then_all: bool,
             rounds: int) -> list[Any]:
    """The compiles to run, in order: ``ops_arg``'s operators as listed (every one without
    it), with ``then_all`` every other operator and the listed ones again, all ``rounds``
    times. A repeat gets a comment appended to its source, so that it is compiled anew."""
    by_name = {c.op: c for c in cases}
    listed = ops_arg.split(",") if ops_arg else list(by_name)
    unknown = set(listed) - set(by_name)
    if unknown:
        raise ValueError(f"unknown operators: {', '.join(sorted(unknown))}")
    names = listed
    if then_all:
        names = [*listed, *(n for n in by_name if n not in listed), *listed]
    seen: Counter[str] = Counter()
    out = []
    for name in names * rounds:
        seen[name] += 1
        case = by_name[name]
        if seen[name] > 1:
            case = dataclasses.replace(case, text=f"{case.source}\n# repeat {seen[name]}\n")
        out.append(case)
    return out


def _line(row: dict[str, Any], gauge_ms: float) -> str:
    stages = " ".join(f"{row[k][0]:5.2f}/{row[k][1]:5.2f}" for k, _, _ in STAGES)
    flag = "  > 1 s" if row["cpu"] > suite.COMPILE_BUDGET_S else ""
    return (f"{row['op']:18s} {row['wall']:5.2f} {row['cpu']:5.2f} | {stages} | "
            f"{row['gc_ms']:5.1f} {gauge_ms:5.1f}{flag}")


def summary(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The slowest five compiles (CPU seconds), those over the budget, gc and the gauge."""
    if not rows:
        return ["no operator compiled"]
    slow = sorted(rows, key=lambda r: -r["cpu"])
    over = [r for r in rows if r["cpu"] > suite.COMPILE_BUDGET_S]
    gauges = [r["gauge_ms"] for r in rows]
    return [
        "slowest: " + ", ".join(f"{r['op']} {r['cpu']:.2f}" for r in slow[:5]),
        f"over {suite.COMPILE_BUDGET_S:g} s: {len(over)} of {len(rows)}"
        + (f" ({', '.join(r['op'] for r in over)})" if over else ""),
        f"gc: {sum(r['gc_ms'] for r in rows):.0f} ms in all, at most "
        f"{max(r['gc_ms'] for r in rows):.1f} ms in one compile",
        f"gauge: {min(gauges):.1f}-{max(gauges):.1f} ms (max/min {max(gauges) / min(gauges):.2f})",
    ]


def run(todo: Sequence[Any], gc_clock: GcClock) -> list[dict[str, Any]]:
    """Compile each of ``todo`` in turn, printing a line each; the rows."""
    parts: dict[str, list[float]] = {}
    rows = []
    with instrumented(parts):
        for case in todo:
            gauge_ms = gauge()
            try:
                row = measure(case, parts, gc_clock)
            except Exception as exc:  # report and go on, as bench_suite does
                print(f"{case.op:18s} ERROR {type(exc).__name__}: {str(exc)[:200]}",
                      flush=True)
                continue
            row["gauge_ms"] = gauge_ms
            rows.append(row)
            print(_line(row, gauge_ms), flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", help="comma-separated operator names, in order, repeats allowed "
                                  "(default: every one)")
    ap.add_argument("--then-all", action="store_true",
                    help="after --ops, every other operator, then --ops again")
    ap.add_argument("--rounds", type=int, default=1, help="run the whole list this many times")
    ap.add_argument("--json", help="write the figures (one row per compile) to this file")
    args = ap.parse_args(argv)
    try:
        todo = sequence(suite_cases.all_cases(False), args.ops, args.then_all,
                        max(1, args.rounds))
    except ValueError as exc:
        ap.error(str(exc))
    with scratch_cache():  # imports, isl and the compiler's first run out of the figures
        polyopt.compile("def w(float(N) A) -> (B) { B(i) = A(i) + 1 }",
                        sizes={"N": 8})(np.ones(8, np.float32))
    print(f"{'operator':18s} {'wall':>5s} {'cpu':>5s} | " +
          " ".join(f"{k:>11s}" for k, _, _ in STAGES) + " | gc ms gauge ms  (wall/cpu s)")
    gc_clock = GcClock()
    try:
        rows = run(todo, gc_clock)
    finally:
        gc.callbacks.remove(gc_clock.event)
    print("\n".join(summary(rows)))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
