"""Long differential-testing campaigns of schedules (the CI test runs a few hundred pairs).

Each program drawn (tests/fuzz_programs.py) gets several random verb sequences
(tests/fuzz_verbs.py); every accepted schedule is compiled, run, and compared with the
float64 interpreter. Prints the tried/refused/accepted/wrong/crash counts and every
failure's reproducer (the source, the verbs, the compile and the call), and with --out
writes them as JSON. Programs run in worker processes, so a crash of the generated code
(a segfault) is recorded as such rather than ending the campaign.

    python3 scripts/dev/fuzz_schedules.py --pairs 10000 --seed 0 --jobs 1 --out fuzz.json \\
        --progress fuzz.log
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures as cf
import dataclasses
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import fuzz_programs  # noqa: E402
import fuzz_verbs  # noqa: E402


def run_program(seed: int, index: int, per_program: int, families: tuple[str, ...],
                max_steps: int = 5, malformed: float = 0.1) -> dict:
    """Draw program ``index`` of campaign ``seed`` and check ``per_program`` schedules of
    up to ``max_steps`` verbs, each with hostile arguments with probability ``malformed``
    (it must be refused with a PolyoptError, called and replayed from JSON)."""
    rng = random.Random(f"{seed}-{index}")
    prog = fuzz_programs.draw_program(rng, rng.choice(families))
    head = {"index": index, "family": prog.family}
    try:
        inputs = prog.arrays(index)
        want = fuzz_verbs.reference(prog, inputs)
    except Exception as e:  # the generator wrote a def the front end rejects
        return {**head, "invalid": f"{type(e).__name__}: {e}", "source": prog.source}
    outs = [fuzz_verbs.check_pair(prog, inputs, want, rng, max_steps, malformed)
            for _ in range(per_program)]
    return {**head, "outcomes": [dataclasses.asdict(o) for o in outs]}


class Tally:
    """Counts over a campaign, and the failures with their reproducers."""

    def __init__(self) -> None:
        self.status: collections.Counter[str] = collections.Counter()
        self.by_family: dict[str, collections.Counter[str]] = collections.defaultdict(
            collections.Counter)
        self.refusals: collections.Counter[str] = collections.Counter()
        self.accepted: collections.Counter[str] = collections.Counter()
        self.compile_refused: collections.Counter[str] = collections.Counter()
        self.compile_refused_examples: list[dict[str, Any]] = []  # the first few, runnable
        self.verbs = [0, 0]  # tried, refused
        self.failures: list[dict[str, Any]] = []
        self.invalid: list[dict[str, Any]] = []

    def add(self, result: dict[str, Any]) -> None:
        if "invalid" in result:
            self.invalid.append(result)
            return
        for o in result["outcomes"]:
            self.status[o["status"]] += 1
            self.by_family[o["family"]][o["status"]] += 1
            self.verbs[0] += o["verbs_tried"]
            self.verbs[1] += o["verbs_refused"]
            self.refusals.update(o["refusals"])
            self.accepted.update(o["accepted"])
            if o["status"] == "compile-refused":
                self.compile_refused[o["message"].split("\n")[0][:160]] += 1
                if len(self.compile_refused_examples) < 10:
                    self.compile_refused_examples.append({"program": result["index"], **o})
            if o["status"] in ("wrong", "crash"):
                self.failures.append({"program": result["index"], **o})

    def add_dead_worker(self, index: int, family: str, per_program: int) -> None:
        """A worker process died on this program (a crash in generated code)."""
        self.status["crash"] += per_program
        self.by_family[family]["crash"] += per_program
        self.failures.append({"program": index, "status": "crash", "family": family,
                              "message": "the worker process died (segfault or abort?)",
                              "reproducer": f"run_program(seed, {index}, ...)"})

    @property
    def pairs(self) -> int:
        return sum(self.status.values())

    def summary(self) -> dict[str, Any]:
        refused = self.status["refused"] + self.status["compile-refused"]
        return {"pairs_tried": self.pairs, "refused": refused,
                "refused_no_verb_accepted": self.status["refused"],
                "refused_at_compile": self.status["compile-refused"],
                "accepted": self.status["ok"] + self.status["wrong"],
                "wrong": self.status["wrong"], "crash": self.status["crash"],
                "verbs_tried": self.verbs[0], "verbs_refused": self.verbs[1],
                "verbs_accepted_by_verb": dict(sorted(self.accepted.items())),
                "verbs_refused_by_verb": dict(sorted(self.refusals.items())),
                "invalid_programs": len(self.invalid)}


def _commit() -> str:
    try:
        return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def campaign(args: argparse.Namespace, log: Any) -> Tally:
    tally = Tally()
    n_programs = -(-args.pairs // args.per_program)
    families = tuple(args.families.split(",")) if args.families else fuzz_programs.FAMILIES
    started, pending = time.time(), list(range(n_programs))
    while pending:
        with cf.ProcessPoolExecutor(max_workers=args.jobs) as pool:
            futures = {pool.submit(run_program, args.seed, k, args.per_program, families,
                                   args.max_steps, args.malformed): k for k in pending}
            pending = []
            for fut in cf.as_completed(futures):
                k = futures[fut]
                try:
                    tally.add(fut.result())
                except cf.process.BrokenProcessPool:
                    pending.append(k)  # rerun alone below, to tell which program died
                    continue
                done = tally.pairs
                if log and (done // args.per_program) % args.every == 0:
                    s = tally.summary()
                    print(f"{time.time() - started:8.0f}s pairs {done} refused {s['refused']} "
                          f"accepted {s['accepted']} wrong {s['wrong']} crash {s['crash']}",
                          file=log, flush=True)
        if pending:
            pending = _isolate(args, families, sorted(pending), tally)
    return tally


def _isolate(args: argparse.Namespace, families: tuple[str, ...], programs: list[int],
             tally: Tally) -> list[int]:
    """Run the first program of a broken pool alone: record it if it kills its worker."""
    first, rest = programs[0], programs[1:]
    with cf.ProcessPoolExecutor(max_workers=1) as pool:
        try:
            tally.add(pool.submit(run_program, args.seed, first, args.per_program,
                                  families, args.max_steps, args.malformed).result())
        except cf.process.BrokenProcessPool:
            rng = random.Random(f"{args.seed}-{first}")
            family = fuzz_programs.draw_program(rng, rng.choice(families)).family
            tally.add_dead_worker(first, family, args.per_program)
    return rest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=1000, help="program x schedule pairs")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--per-program", type=int, default=6, help="schedules per program")
    ap.add_argument("--max-steps", type=int, default=5, help="verbs drawn per schedule")
    ap.add_argument("--malformed", type=float, default=0.1,
                    help="chance that a verb gets hostile arguments (must be refused)")
    ap.add_argument("--families", default="", help=f"comma-separated subset of "
                    f"{','.join(fuzz_programs.FAMILIES)}")
    ap.add_argument("--out", type=Path, help="write the counts and failures as JSON")
    ap.add_argument("--progress", type=Path, help="append progress lines to this file")
    ap.add_argument("--every", type=int, default=25, help="progress every N programs")
    args = ap.parse_args(argv)
    log = open(args.progress, "a") if args.progress else sys.stderr  # noqa: SIM115
    t0 = time.time()
    tally = campaign(args, log)
    wall = time.time() - t0
    summary = {**tally.summary(), "wall_s": round(wall, 1), "seed": args.seed,
               "commit": _commit(), "date": time.strftime("%Y-%m-%d"),
               "command": " ".join(["python3", "scripts/dev/fuzz_schedules.py", *sys.argv[1:]]),
               "by_family": {f: dict(c) for f, c in sorted(tally.by_family.items())}}
    for f in tally.failures:
        print(f"\n=== {f['status']} ({f['family']}, program {f['program']}): {f['message']}\n"
              f"{f['reproducer']}")
    for msg, n in tally.compile_refused.most_common():
        print(f"compile-refused x{n}: {msg}")
    print(json.dumps(summary, indent=1))
    if args.out:
        args.out.write_text(json.dumps({**summary, "failures": tally.failures,
                                        "compile_refused": dict(tally.compile_refused),
                                        "compile_refused_examples":
                                            tally.compile_refused_examples,
                                        "invalid": tally.invalid}, indent=1))
    return 1 if tally.failures else 0


if __name__ == "__main__":
    sys.exit(main())
