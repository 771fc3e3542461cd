"""Measure a tuning table: a fixed sample of an operator's schedule space (the whole space
when it is small), each configuration compiled once and timed in interleaved rounds, saved
as JSON with the tuner's analytic features and the cost model's prediction of each
configuration. ``scripts/studies/search_vs_random.py --simulate`` then runs the search strategies
on the table (see its docstring).

Timing: the CPU time of the calling thread (``time.thread_time``) with one OpenMP thread
(the measuring child runs with ``OMP_NUM_THREADS=1``): on this shared 2-core machine, wall
time picks up other jobs' load, CPU time of one thread much less so. The parallel-loop
knob therefore shows its single-thread cost only. Configurations that lower to the same C
source are one kernel, timed once. Each round visits every kernel in a new random order,
calls it once to warm it and keeps the least per-call time of 3 samples (of enough calls
to last about 2 ms); a configuration's time is the median over rounds. A kernel whose
output differs from the default's (relative L2 error over 1e-4) counts as failed (None).

A kernel whose second call (the first builds it) takes over ``--cap`` times the
default's (default 10), or over 1 s and the default's, is not timed in rounds: its time is
that one call's, and the table lists it under ``capped``. Register tiles that spill ran
at a median of 55-82x the table's best on the large products, and on mm_square the rounds
of such kernels would have taken over 20 minutes for times that can only be far from the
best. Compiles are not capped.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

SAMPLE_SECONDS = 2e-3
TOLERANCE = 1e-4
CAP_RATIO = 10.0
CAP_SECONDS = 1.0


def _key(config: dict[str, Any]) -> str:
    return json.dumps(config, sort_keys=True, default=str)


def measure_op(case: Any, n: int, rounds: int, seed: int, log: Callable[[str], None],
               cap: float = CAP_RATIO) -> dict[str, Any]:
    """The table of one suite case (run with ``OMP_NUM_THREADS=1``)."""
    import numpy as np

    import polyopt
    from polyopt.config import scratch_cache
    from polyopt.tuning.space import space_for
    from polyopt.tuning.tuner import analytic

    start = time.perf_counter()
    space = space_for(case.source, case.kernel, case.sizes)
    configs = space.pool(n, random.Random(seed))
    features, prior = analytic(case.source, case.kernel, case.sizes)
    rng = np.random.default_rng(seed)
    inputs = [rng.standard_normal(s).astype(np.float32) if s else np.float32(1.0)
              for s in case.shapes]
    kernels: dict[str, Any] = {}  # C source hash -> kernel
    which: list[str | None] = []
    with scratch_cache():
        for i, config in enumerate(configs):
            options = {**space.options(config), "tuned": False}
            try:
                k = polyopt.compile(case.source, case.kernel, sizes=case.sizes,
                                    options=options)
                h = hashlib.sha1(k.source.encode()).hexdigest()
                if h not in kernels:
                    k(*inputs)  # builds it
                    kernels[h] = k
                which.append(h)
            except polyopt.PolyoptError as e:
                log(f"  {case.op} config {i} failed: {str(e)[:120]}")
                which.append(None)
            if i % 32 == 31:
                log(f"  {case.op}: {i + 1}/{len(configs)} compiled, {len(kernels)} kernels, "
                    f"{time.perf_counter() - start:.0f} s")
        ok, once = _check(kernels, which[0], inputs)
        capped = _slow(once, which[0], cap)
        for h in capped:
            log(f"  {case.op} kernel {h[:8]} capped: {capped[h]:.0f} ms a call")
        per_round = _time_rounds({h: k for h, k in kernels.items() if ok[h] and h not in capped},
                                 inputs, rounds, seed)
    ms = {h: statistics.median(v) for h, v in per_round.items()}
    ms.update({h: v for h, v in capped.items() if ok[h]})
    return {"op": case.op, "sizes": case.sizes, "knobs": json.loads(space.as_json())["knobs"],
            "space_size": math.prod(len(v) for _, v in space.knobs),
            "configs": configs, "kernel": which,
            "ms": [ms.get(h) if h else None for h in which],
            "rounds_ms": {h: v for h, v in per_round.items()},
            "capped": sorted(capped), "cap": [cap, CAP_SECONDS],
            "features": [list(features(c)) for c in configs],
            "prior": [prior(c) if prior else None for c in configs],
            "clock": "time.thread_time, OMP_NUM_THREADS=1", "rounds": rounds,
            "seconds": time.perf_counter() - start}


def _check(kernels: dict[str, Any], default: str | None,
           inputs: list[Any]) -> tuple[dict[str, bool], dict[str, float]]:
    """Each kernel's output against the default's (the first configuration's), and the
    thread CPU time of that call (s)."""
    import numpy as np

    ok, once = {}, {}
    want = None if default is None else np.asarray(kernels[default](*inputs), np.float64)
    for h, k in kernels.items():
        t = time.thread_time()
        out = k(*inputs)
        once[h] = time.thread_time() - t
        got = np.asarray(out, dtype=np.float64)
        if want is None:
            ok[h] = True
            continue
        err = float(np.linalg.norm(got - want)) / max(float(np.linalg.norm(want)), 1e-30)
        ok[h] = bool(got.shape == want.shape and err <= TOLERANCE)
    return ok, once


def _slow(once: dict[str, float], default: str | None, ratio: float) -> dict[str, float]:
    """The kernels whose one call took over ``ratio`` times the default's, or over
    ``CAP_SECONDS`` and the default's: ms."""
    base = once.get(default, 0.0) if default is not None else 0.0
    limit = min(max(CAP_SECONDS, base), ratio * base) if base else CAP_SECONDS
    return {h: s * 1e3 for h, s in once.items() if s > limit and h != default}


def _time_rounds(kernels: dict[str, Any], inputs: list[Any], rounds: int,
                 seed: int) -> dict[str, list[float]]:
    """Per kernel, per round: the least per-call thread CPU time (ms) of 3 samples."""
    calls = {}
    for h, k in kernels.items():
        t = time.thread_time()
        k(*inputs)
        once = max(time.thread_time() - t, 1e-6)
        calls[h] = max(1, min(1000, round(SAMPLE_SECONDS / once)))
    out: dict[str, list[float]] = {h: [] for h in kernels}
    order = list(kernels)
    rng = random.Random(seed)
    for _ in range(rounds):
        rng.shuffle(order)
        for h in order:
            k = kernels[h]
            k(*inputs)
            best = math.inf
            for _ in range(3):
                t = time.thread_time()
                for _ in range(calls[h]):
                    k(*inputs)
                best = min(best, (time.thread_time() - t) / calls[h])
            out[h].append(best * 1e3)
    return out


def measure(ops: Sequence[str], n: int, rounds: int, seed: int, path: Path,
            cases: dict[str, Any], cap: float = CAP_RATIO) -> None:
    """Measure each operator in a child process with one OpenMP thread; tables are added
    to ``path`` (keyed by operator) as each finishes."""
    for op in ops:
        if op not in cases:
            raise SystemExit(f"unknown operator {op!r}; the suite has {', '.join(cases)}")
        env = dict(os.environ, OMP_NUM_THREADS="1")
        child = [sys.executable, __file__, op, str(n), str(rounds), str(seed), str(cap)]
        got = subprocess.run(child, env=env, stdout=subprocess.PIPE, text=True, check=False)
        if got.returncode != 0:
            raise SystemExit(f"measuring {op} failed (exit {got.returncode})")
        tables = json.loads(path.read_text()) if path.exists() else {}
        tables[op] = json.loads(got.stdout)
        path.write_text(json.dumps(tables))


def suite_cases() -> dict[str, Any]:
    """``polyopt bench suite``'s operators at their benchmark sizes, by name."""
    from polyopt.bench.suite_cases import all_cases

    return {c.op: c for c in all_cases(False)}


def _child(argv: Sequence[str]) -> None:
    op, n, rounds, seed, cap = argv[0], int(argv[1]), int(argv[2]), int(argv[3]), float(argv[4])
    table = measure_op(suite_cases()[op], n, rounds, seed,
                       lambda s: print(s, file=sys.stderr, flush=True), cap)
    print(json.dumps(table))


def main(argv: Sequence[str]) -> None:
    """Measure ``--ops`` into the tables file ``--tables`` (what ``search_vs_random.py
    --measure`` runs)."""
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tables", required=True, type=Path, help="the tables file to add to")
    p.add_argument("--ops", required=True, help="comma-separated suite operators")
    p.add_argument("--sample", type=int, default=192, help="configurations per table")
    p.add_argument("--rounds", type=int, default=5, help="timing rounds per table")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cap", type=float, default=CAP_RATIO,
                   help="time once a kernel this much slower than the default")
    args = p.parse_args(argv)
    ops = [op.strip() for op in args.ops.split(",") if op.strip()]
    measure(ops, args.sample, args.rounds, args.seed, args.tables, suite_cases(), args.cap)


if __name__ == "__main__":  # options: a user's run; an operator first: a measuring child
    (main if sys.argv[1:2] and sys.argv[1].startswith("-") else _child)(sys.argv[1:])
