"""``polyopt bench conv``: time every convolution layer of a model on polyopt and its peers.

For each layer: random float32 inputs (seeded), a float64 reference, then each system
built and checked on one warm-up call; then ``--rounds`` interleaved rounds, in which every
system, in an order rotated each round, gets a ``--settle`` pause and ``--repeat`` timed
calls. Each system's figure is the median of all its timed calls (and their min, max):
the same statistic for every system, and a drift of the machine's speed (other processes,
the host) hits every system's rounds alike instead of whichever system ran at the time.
Peers that are not installed are reported as skipped, and failures as failed, each with
the reason; nothing is estimated. Results go to the terminal (a table) and to
``DIR/<model>.csv``, ``.json`` and ``.png``.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shlex
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO, TypeVar

import numpy as np

from polyopt import host
from polyopt.bench import timing, tvm_conv
from polyopt.bench.conv import report
from polyopt.bench.conv.records import SYSTEMS, TOLERANCE, Record, Settings, add_speedups, totals
from polyopt.bench.entry import suite_main
from polyopt.bench.layers import MODELS, Layer, scaled, select
from polyopt.bench.peers import (
    Context,
    Inputs,
    Prepared,
    Skip,
    conv_reference,
    prepare_numpy,
    prepare_polyopt,
    prepare_torch,
)
from polyopt.bench.timing import describe
from polyopt.errors import OptionError

__all__ = ["Settings", "add_arguments", "choose_baseline", "in_own_thread", "main",
           "measure_layer", "run", "settings_from", "time_rounds"]

T = TypeVar("T")

# Per target, the systems timed, in table order. On CUDA only torch has a GPU path here.
# A pause before each measurement: on a 2-core machine the previous runtime's spinning
# worker threads (OpenBLAS, libgomp, TVM's pool) otherwise stall the next one's by ~8 ms.
SETTLE_S = 0.3
# Rounds per layer: on the 2-core VM a block of calls of the same kernel varied 0.7-1.4x
# between blocks seconds apart (MobileNetV2's depthwise layers, 50-200 us a call), while
# within a block the calls agreed; one block per system decided a 0.9x ratio by chance.
ROUNDS = 3


def _prepare_tvm(layer: Layer, inputs: Inputs, ctx: Context) -> Prepared:
    return tvm_conv.prepare_tvm(layer, inputs, ctx)


PREPARE: dict[str, Callable[[Layer, Inputs, Context], Prepared]] = {
    "polyopt": prepare_polyopt, "numpy": prepare_numpy, "torch": prepare_torch,
    "tvm": _prepare_tvm}


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``polyopt bench conv``."""
    p.add_argument("--model", default="resnet50",
                   help=f"which network's layers: {' or '.join(MODELS)} (default resnet50)")
    p.add_argument("--layers", default="",
                   help="layer numbers as in the survey's tables, e.g. 1,3,7 or 1-5 (default all)")
    p.add_argument("--batch", type=int, default=1, help="batch size (default 1)")
    p.add_argument("--target", choices=tuple(SYSTEMS), default="c",
                   help="c: CPU; cuda: polyopt's CUDA backend, against torch on the GPU")
    p.add_argument("--repeat", type=int, default=10,
                   help="timed calls per layer, system and round, after one checked warm-up "
                   "(default 10)")
    p.add_argument("--rounds", type=int, default=ROUNDS,
                   help="interleaved rounds per layer: each runs every system's --repeat calls, "
                   f"in an order rotated each round; the median is over all calls (default "
                   f"{ROUNDS})")
    p.add_argument("--baseline", default="torch",
                   help="the system speed-ups are relative to (default torch)")
    p.add_argument("--tvm-trials", type=int, default=0, metavar="N",
                   help="MetaSchedule trials per layer; 0 (default) runs TVM's tutorial-style "
                   "hand-written schedule only")
    p.add_argument("--out", default="bench-conv", metavar="DIR",
                   help="where <model>.csv, .json and .png go (default ./bench-conv)")
    p.add_argument("--threads", type=int, default=0,
                   help="threads for every system (default: $OMP_NUM_THREADS, else every CPU "
                   "this process may use)")
    p.add_argument("--settle", type=float, default=SETTLE_S, metavar="SECONDS",
                   help="pause before each measurement so other runtimes' threads go idle "
                   f"(default {SETTLE_S})")
    p.add_argument("--scale", type=int, default=1, metavar="K",
                   help="for tests: divide channels and spatial sizes by K (the shapes are then "
                   "no longer the model's)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    p.add_argument("--tuned", action="store_true",
                   help="polyopt uses the best schedules `polyopt tune` recorded for each "
                   "layer (default: its automatic schedules)")


def settings_from(args: argparse.Namespace) -> Settings:
    """Check the options; every mistake is an OptionError naming the valid choices."""
    for name, least in (("batch", 1), ("repeat", 1), ("rounds", 1), ("tvm_trials", 0),
                        ("scale", 1), ("threads", 0)):
        if getattr(args, name) < least:
            raise OptionError(f"--{name.replace('_', '-')} must be at least {least}")
    if args.settle < 0:
        raise OptionError("--settle must not be negative")
    layers = tuple(scaled(x, args.scale) for x in select(args.model, args.layers))
    systems = SYSTEMS[args.target]
    if args.baseline not in systems:
        raise OptionError(f"unknown --baseline {args.baseline!r} for target {args.target}; "
                          f"choose from {', '.join(systems)}")
    threads = args.threads or _default_threads()
    return Settings(args.model, layers, args.batch, args.target, args.repeat, args.baseline,
                    args.tvm_trials, Path(args.out), threads, args.settle, args.scale,
                    args.seed, _command(args, threads), bool(getattr(args, "tuned", False)),
                    host.usable_cores(), rounds=args.rounds)


def _default_threads() -> int:
    env = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    if env.isdigit() and int(env) > 0:
        return int(env)
    return host.usable_cores()


def _command(args: argparse.Namespace, threads: int) -> str:
    """The run as a command line with every option explicit."""
    words = ["polyopt", "bench", "conv", "--model", args.model]
    if args.layers:
        words += ["--layers", args.layers]
    words += ["--batch", str(args.batch), "--target", args.target, "--repeat", str(args.repeat),
              "--rounds", str(args.rounds), "--baseline", args.baseline, "--tvm-trials",
              str(args.tvm_trials), "--out", args.out, "--threads", str(threads), "--settle",
              str(args.settle)]
    if args.scale != 1:
        words += ["--scale", str(args.scale)]
    if getattr(args, "tuned", False):
        words.append("--tuned")
    return shlex.join([*words, "--seed", str(args.seed)])


# ------------------------------------------------------------------ progress
class Progress:
    """A text progress bar on a terminal; one line per layer when stderr is a file."""

    def __init__(self, total: int, stream: TextIO | None = None) -> None:
        self.total, self.done = total, 0
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.layer: int | None = None

    def step(self, layer: Layer, system: str) -> None:
        self.done += 1
        if self.tty:
            filled = 30 * (self.done - 1) // max(self.total, 1)
            bar = "#" * filled + "." * (30 - filled)
            self.stream.write(f"\r[{bar}] {self.done}/{self.total} layer {layer.number} "
                              f"({layer.kind}) {system:<8}")
        elif layer.number != self.layer:
            self.stream.write(f"[{self.done}/{self.total}] layer {layer.number} {layer.name} "
                              f"{layer.shape}\n")
        self.layer = layer.number
        self.stream.flush()

    def note(self, message: str) -> None:
        self.stream.write(("\r" + " " * 79 + "\r" if self.tty else "") + message + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.tty:
            self.stream.write("\r" + " " * 79 + "\r")
            self.stream.flush()


# ------------------------------------------------------------------ measuring
def _timed(prepared: Prepared) -> tuple[object, float]:
    start = time.perf_counter()
    out = prepared.call()
    prepared.sync()
    return out, (time.perf_counter() - start) * 1e3


def prepare(rec: Record, layer: Layer, inputs: Inputs, ref: np.ndarray, ctx: Context
            ) -> Prepared | None:
    """Build ``rec``'s system and check one warm-up call against ``ref``; None when the
    system is skipped or failed (``rec`` says why)."""
    start = time.perf_counter()
    try:
        prepared = PREPARE[rec.system](layer, inputs, ctx)
        rec.variant = prepared.variant
        out = prepared.to_numpy(_timed(prepared)[0])
        rec.setup_s = time.perf_counter() - start
        rec.rel_error = relative_error(out, ref)
        rec.matched = rec.rel_error <= TOLERANCE
    except Skip as exc:
        rec.status, rec.reason = "skipped", str(exc)
        return None
    except Exception as exc:  # a system's failure on one layer must not end the benchmark
        rec.status, rec.reason = "failed", describe(exc)
        return None
    return prepared


def time_rounds(ready: dict[str, Prepared], repeat: int, rounds: int, settle: float
                ) -> tuple[dict[str, list[float]], dict[str, str]]:
    """(ms of every timed call, why a system failed) per system: ``timing.time_rounds``
    with ``repeat`` calls a block, each timed alone and synchronized (a layer's call is
    tens of microseconds at least, and a GPU's must be waited for)."""
    def block(prepared: Prepared) -> Callable[[], list[float]]:
        return lambda: [_timed(prepared)[1] for _ in range(repeat)]
    return timing.time_rounds({name: block(p) for name, p in ready.items()}, rounds, settle)


def finish(rec: Record, times: Sequence[float]) -> Record:
    """Fill ``rec``'s statistics from every call timed: median, min and max."""
    rec.median_ms = float(np.median(times))
    rec.min_ms, rec.max_ms = float(min(times)), float(max(times))
    rec.gflops = rec.gflop / (rec.median_ms / 1e3)
    if not rec.matched:
        rec.reason = f"relative L2 error {rec.rel_error:.2e} > {TOLERANCE:g}"
    return rec


def measure_layer(layer: Layer, inputs: Inputs, ctx: Context, settings: Settings,
                  progress: Progress) -> list[Record]:
    """One record per system: each built and checked, then timed in interleaved rounds."""
    ref = conv_reference(*inputs, layer)
    records, ready = [], {}
    for system in settings.systems:
        progress.step(layer, system)
        rec = Record.start(settings.model, layer, settings.batch, system)
        records.append(rec)
        prepared = prepare(rec, layer, inputs, ref, ctx)
        if prepared is not None:
            ready[system] = prepared
    times, failed = time_rounds(ready, settings.repeat, settings.rounds, settings.settle)
    for rec in records:
        if rec.system in failed:
            rec.status, rec.reason = "failed", failed[rec.system]
        elif times.get(rec.system):
            finish(rec, times[rec.system])
    return records


def relative_error(out: np.ndarray, ref: np.ndarray) -> float:
    out = np.asarray(out, np.float64)
    if out.shape != ref.shape:
        return float("inf")
    diff = float(np.linalg.norm(out - ref))
    return diff / max(float(np.linalg.norm(ref)), 1e-30) if np.isfinite(diff) else float("inf")


def _inputs(layer: Layer, batch: int, rng: np.random.Generator) -> Inputs:
    return (rng.standard_normal(layer.input_shape(batch), dtype=np.float32),
            rng.standard_normal(layer.weight_shape(), dtype=np.float32))


def _tune(settings: Settings, ctx: Context, progress: Progress, workdir: str) -> None:
    """MetaSchedule tuning of every layer, before anything is timed (see tvm_conv.py)."""
    if not settings.tvm_trials or "tvm" not in settings.systems:
        return
    try:
        ctx.load("tvm", "TVM")
    except Skip:
        return  # each layer reports TVM as skipped
    progress.note(f"tuning {len(settings.layers)} layer(s) with MetaSchedule "
                  f"({settings.tvm_trials} trials each) ...")
    ctx.tuned = tvm_conv.tune_layers(settings.layers, settings.batch, settings.tvm_trials,
                                     settings.threads, workdir)


def collect(settings: Settings, progress: Progress) -> list[Record]:
    """Every layer on every system, in table order."""
    ctx = Context(settings.target, settings.threads, settings.tvm_trials,
                  use_db=settings.tuned)
    rng = np.random.default_rng(settings.seed)
    records = []
    # The tuned TVM libraries live here until every layer has run.
    with tempfile.TemporaryDirectory(prefix="polyopt-tvm-tune-") as workdir:
        _tune(settings, ctx, progress, workdir)
        for layer in settings.layers:
            inputs = _inputs(layer, settings.batch, rng)
            records += measure_layer(layer, inputs, ctx, settings, progress)
    progress.close()
    return records


def choose_baseline(records: Sequence[Record], asked: str,
                    systems: Sequence[str]) -> tuple[str, str]:
    """The system speed-ups are relative to, and a note when it is not ``asked``: a baseline
    with no correct timing at all (torch not installed) would leave every speed-up empty,
    so the first peer that has one (numpy before torch and TVM; polyopt last) stands in."""
    ran = {r.system for r in records if r.usable}
    if asked in ran:
        return asked, ""
    reasons = [f"{r.status}: {r.reason}" if r.reason else r.status
               for r in records if r.system == asked]
    why = f"{asked} has no correct timing ({reasons[0] if reasons else 'not run'})"
    others = sorted((s for s in systems if s in ran), key=lambda s: (s == "polyopt",
                                                                     systems.index(s)))
    if not others:
        return asked, f"{why}, nor has any other system: there are no speed-ups"
    return others[0], f"{why}: speed-ups are relative to {others[0]} instead"


def in_own_thread(fn: Callable[[], T]) -> T:
    """``fn()`` in a thread of its own. With OMP_PROC_BIND set, the OpenMP runtime pins the
    thread that loads it (polyopt's first parallel kernel, or torch) to one place for good:
    run in the caller's thread, the caller and every thread it started afterwards were left
    on one CPU (``os.sched_getaffinity(0)`` went from {0, 1} to {0})."""
    out: list[T] = []
    failed: list[BaseException] = []

    def target() -> None:
        try:
            out.append(fn())
        except BaseException as exc:  # re-raised in the caller's thread
            failed.append(exc)

    # A daemon: Ctrl-C in the caller ends the process without waiting for the layer at hand.
    thread = threading.Thread(target=target, name="polyopt-bench", daemon=True)
    thread.start()
    thread.join()
    if failed:
        raise failed[0]
    return out[0]


def configure_threads(threads: int) -> None:
    """One thread count for every runtime, OpenMP threads spread over the cores.

    libgomp reads these when it loads (at the first polyopt kernel or torch import), so a
    process that already ran OpenMP code keeps its earlier settings.
    """
    os.environ["OMP_NUM_THREADS"] = str(threads)
    os.environ.setdefault("OMP_PROC_BIND", "spread")


def _warn_if_busy(progress: Progress) -> None:
    """Other processes on the CPUs make every system wait for scheduler ticks: say so."""
    if not hasattr(os, "getloadavg"):
        return
    load, cpus = os.getloadavg()[0], os.cpu_count() or 1
    if load > 0.5:
        progress.note(f"note: the 1-minute load average is {load:.1f} on {cpus} CPUs; other "
                      "processes compete for them and the times will be noisy")


# ------------------------------------------------------------------ entry points
def run(args: argparse.Namespace) -> int:
    """Run the benchmark for parsed options; 1 when polyopt computed a wrong result."""
    settings = settings_from(args)
    configure_threads(settings.threads)
    progress = Progress(len(settings.layers) * len(settings.systems))
    _warn_if_busy(progress)
    records = in_own_thread(lambda: collect(settings, progress))
    baseline, note = choose_baseline(records, settings.baseline, settings.systems)
    settings = dataclasses.replace(settings, baseline=baseline, baseline_note=note)
    add_speedups(records, baseline)
    summary = totals(records, baseline, settings.systems)
    print(report.table(records, summary, settings.systems, baseline, note))
    written, png_note = report.write_all(settings, records, summary)
    for path in written:
        print(f"wrote {path}")
    if png_note:
        print(f"PNG skipped: {png_note}")
    wrong = [r for r in records if r.system == "polyopt" and r.status == "ok" and not r.matched]
    if wrong:
        print(f"polyopt: wrong results on layer(s) {', '.join(str(r.layer) for r in wrong)}",
              file=sys.stderr)
    return 1 if wrong else 0


def main(argv: Sequence[str] | None = None) -> int:
    """``polyopt bench conv ...`` as a module of its own (``python3 -m polyopt.bench.conv``)."""
    return suite_main("conv", __doc__, add_arguments, run, argv)

