"""Issue 6's search study: random, genetic and model-guided search (and TVM MetaSchedule
when installed) at equal trial budgets, on a matmul and three ResNet-50 conv layers.

Each (kernel, strategy) is one ``polyopt.tune`` run of max(budgets) trials into a fresh
database and a fresh kernel cache (no run profits from another's compiles), in a child
process of its own; MetaSchedule runs once per kernel at the largest budget in a child
process too (TVM can crash the interpreter; a crash is recorded as "failed: <reason>",
never estimated), with TVM's defaults (64 trials per round, one builder per physical core,
its XGBoost model when xgboost is installed). The comparison is fair by construction:

- clocks: both start before the child process is spawned, so they include the
  interpreter's start, the imports (TVM's) and each system's setup (polyopt's float64
  reference, MetaSchedule's task extraction and design space); a trial's time is when its
  result was known, and the largest budget's is the process's end: polyopt's after its
  confirmation (the fastest few schedules timed again side by side), MetaSchedule's after
  compiling and exporting its best;
- statistic: a trial's ms is the mean of its calls for both (MetaSchedule's runner reports
  a mean; polyopt's worker makes 5 calls); the same-process table times every system with
  one function (the best of 10 calls, in interleaved rounds);
- affinity: every process gets the CPUs the study started with back after its imports
  (under ``OMP_PROC_BIND=spread``, ``import tvm`` pins the process and the builders it
  starts to one CPU);
- ``--retime`` times every system together again, MetaSchedule's kept libraries
  (``OUT/tvm/<kernel>-<trials>.so``) included; one it cannot time leaves the table.

The best found at budget B is the best of the first B trials. After a kernel's runs, its
default schedule, each strategy's best, MetaSchedule's best, torch and (matmul) numpy are
timed in this process, interleaved.

Search quality, as the issue states it: the fraction of each strategy's best at the largest
budget reached within 32 trials (median over kernels), and a new matmul shape tuned from the
database of the first (the best of its first 16 trials against its 64-trial best).

    OMP_PROC_BIND=spread env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE \\
        python3 scripts/studies/tuning_study.py --out /tmp/study [--budgets 16,32,64,128] [--quick]

Writes DIR/tuning_study.json (after every run), .md and .png (best found speed over the
default schedule against trials and against wall time, one column per kernel);
``--from-json FILE`` writes the .md and .png of a saved study without running anything.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import functools
import importlib.util
import json
import math
import os
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

STRATEGIES = ("random", "genetic", "model")
TVM = "metaschedule"
TOLERANCE = 1e-4  # relative L2 error against float64, as the tuner checks
SETTLE_S = 0.3  # pause before each timing: other runtimes' spinning threads go idle
COLORS = {"random": "#1f77b4", "genetic": "#2ca02c", "model": "#d62728", TVM: "#9467bd"}
# Option defaults: the study, and --quick (tiny sizes, for tests).
FULL = {"matmul_size": 1024, "seed_size": 1152, "budgets": "16,32,64,128", "early": 32,
        "seed_trials": 64, "seed_early": 16, "scale": 1, "rounds": 3}
QUICK = {"matmul_size": 64, "seed_size": 80, "budgets": "4,8", "early": 4,
         "seed_trials": 8, "seed_early": 4, "scale": 8, "rounds": 1}


@dataclass(frozen=True)
class Kernel:
    name: str  # "matmul" or "conv<N>": ResNet-50 layer N in the survey's numbering
    shape: str
    def_name: str
    source: str
    sizes: dict[str, int]
    gflop: float
    layer: Any = None  # polyopt.bench.layers.Layer for a conv


@dataclass
class Run:
    """One strategy on one kernel: every trial (polyopt) or one child per budget (TVM)."""

    kernel: str
    strategy: str
    history: list[tuple[float, float, str]] = field(default_factory=list)  # (s, ms, status)
    points: dict[int, tuple[float, float]] = field(default_factory=dict)  # B -> (ms, wall s)
    options: dict[str, Any] = field(default_factory=dict)
    failed: str = ""
    libraries: dict[int, tuple[str, float]] = field(default_factory=dict)  # TVM: B -> (.so, s)
    confirm_s: float = 0.0  # polyopt: timing the fastest schedules again, after the last trial
    end_s: float = 0.0  # the process's end (polyopt: after confirming; TVM: after compiling)

    def best_over(self, n: int) -> float:
        return min((ms for _, ms, _ in self.history[:n]), default=math.inf)

    def derive(self, budgets: Sequence[int]) -> None:
        """Best and wall time at each budget; the last trial's wall time is the process's
        end, so the result a user gets (confirmed, or compiled) is in it."""
        for b in budgets:
            n = min(b, len(self.history))
            if n:
                last = n == len(self.history) and self.end_s > 0
                self.points[b] = (self.best_over(n),
                                  self.end_s if last else self.history[n - 1][0])

    def as_json(self) -> dict[str, Any]:
        return {"kernel": self.kernel, "strategy": self.strategy, "failed": self.failed,
                "best_options": self.options, "confirm_s": self.confirm_s,
                "end_s": self.end_s,
                "libraries": {str(b): p for b, (p, _) in self.libraries.items()},
                "points": [{"trials": b, "best_ms": _num(ms), "wall_s": wall}
                           for b, (ms, wall) in sorted(self.points.items())],
                "history": [{"elapsed_s": s, "ms": _num(ms), "status": st}
                            for s, ms, st in self.history]}


def _num(x: float) -> float | None:
    return x if math.isfinite(x) else None


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------ kernels
def matmul_kernel(n: int) -> Kernel:
    import polyopt.kernels as kernels

    return Kernel("matmul", f"{n}^3", "matmul", kernels.source("matmul"),
                  {"M": n, "N": n, "K": n}, 2.0 * n**3 / 1e9)


def conv_kernel(number: int, scale: int) -> Kernel:
    from polyopt.bench.layers import scaled, select
    from polyopt.bench.peers import polyopt_definition

    layer = scaled(select("resnet50", str(number))[0], scale)
    name, source, sizes = polyopt_definition(layer)
    sizes["N"] = 1
    return Kernel(f"conv{number}", layer.shape, name, source, sizes, 2.0 * layer.macs(1) / 1e9,
                  layer)


def kernels_for(args: argparse.Namespace) -> list[Kernel]:
    from polyopt.bench.layers import parse_numbers

    convs = [f"conv{n}" for n in parse_numbers(args.layers)][:1 if args.quick else None]
    names = args.kernels.split(",") if args.kernels else ["matmul", *convs]
    out = []
    for name in filter(None, (x.strip() for x in names)):
        if name == "matmul":
            out.append(matmul_kernel(args.matmul_size))
        elif name.startswith("conv") and name[4:].isdigit():
            out.append(conv_kernel(int(name[4:]), args.scale))
        else:
            raise SystemExit(f"--kernels: {name!r} is neither matmul nor conv<N> "
                             "(N a ResNet-50 layer number, 1-23)")
    return out


# ------------------------------------------------------------------ polyopt's searches
def tune_run(kernel: Kernel, strategy: str, trials: int, seed: int, db: Path,
             cpus: Sequence[int] = ()) -> Run:
    """One ``polyopt.tune`` run in a fresh Python process (as MetaSchedule's): the clock
    starts before the process does, so it includes the interpreter's start, the imports
    and the float64 reference; each trial's time is when its result was known, and the
    run's end (``end_s``) is the process's, after the confirmation. Each trial's ms is the
    mean of its calls (MetaSchedule's runner reports a mean too)."""
    run = Run(kernel.name, strategy)
    start = time.perf_counter()  # CLOCK_MONOTONIC: the child's perf_counter shares it
    with tempfile.TemporaryDirectory(prefix="polyopt-run-") as tmp:
        out = Path(tmp) / "run.json"
        spec = {"source": kernel.source, "def": kernel.def_name, "sizes": kernel.sizes,
                "strategy": strategy, "trials": trials, "seed": seed, "db": str(db),
                "start": start, "out": str(out), "cpus": list(cpus), "name": kernel.name}
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--polyopt-child",
                               json.dumps(spec)], check=False)
        run.end_s = time.perf_counter() - start
        if proc.returncode or not out.exists():
            run.failed = f"failed: exit status {proc.returncode}"
            return run
        got = json.loads(out.read_text())
    run.history = [(h[0], math.inf if h[1] is None else h[1], h[2]) for h in got["history"]]
    run.options, run.confirm_s = got["options"], got["confirm_s"]
    return run


def polyopt_child(spec_text: str) -> int:
    """``tune_run``'s process: tunes, writes the trials' (elapsed s, mean ms, status)."""
    spec = json.loads(spec_text)
    from polyopt.config import scratch_cache
    from polyopt.tuning.tuner import tune

    restore_affinity(spec["cpus"])
    start, history = float(spec["start"]), []

    def progress(done: int, total: int, trial: Any) -> None:
        r = trial.result
        ms = statistics.mean(r.times) * 1e3 if r.status == "ok" and r.times else None
        history.append((time.perf_counter() - start, ms, r.status))
        if done % 8 == 0 or done == total:
            best = min((h[1] for h in history if h[1] is not None), default=math.inf)
            log(f"{spec['name']} {spec['strategy']}: {done}/{total} trials, best {best:.4g} "
                f"ms, {history[-1][0]:.0f} s")

    with scratch_cache():  # no run reuses another's compiles or the user's database
        result = tune(spec["source"], spec["def"], sizes=spec["sizes"], trials=spec["trials"],
                      strategy=spec["strategy"], db=spec["db"], seed=spec["seed"],
                      progress=progress)
    end = time.perf_counter() - start
    Path(spec["out"]).write_text(json.dumps({
        "history": history, "options": dict(result.best.options),  # the confirmed fastest
        "confirm_s": end - (history[-1][0] if history else 0.0)}))
    return 0


def restore_affinity(cpus: Sequence[int]) -> None:
    """Give this process the study's CPUs back: under ``OMP_PROC_BIND=spread``, ``import
    tvm`` (its OpenMP runtime) pins every process that imports it to one CPU, the study's
    TVM child and MetaSchedule's builder and runner workers alike. Every system runs on the
    CPUs the study started with."""
    if cpus:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, set(cpus))


def seeding(kernel: Kernel, db: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Tune a new matmul shape from the database of the first: how soon is it near its best?"""
    from polyopt.tuning import Database
    from polyopt.tuning.lookup import make_key

    key = make_key(kernel.source, kernel.def_name, kernel.sizes, "c")
    with Database(db) as database:
        seeds = len(database.nearest(key))
    run = tune_run(kernel, "model", args.seed_trials, args.seed, db, args.cpus)
    early, full = run.best_over(args.seed_early), run.best_over(args.seed_trials)
    return {"size": kernel.sizes["M"], "from": f"{db.stem} (matmul {args.matmul_size}^3)",
            "trials": len(run.history), "early": args.seed_early, "seeds": seeds,
            "default_ms": run.history[0][1], "best_ms_early": _num(early),
            "best_ms_full": _num(full), "wall_s_early": run.history[
                min(args.seed_early, len(run.history)) - 1][0],
            "fraction": _num(full / early) if math.isfinite(early) else None,
            "history": run.as_json()["history"]}


def early_fractions(runs: Sequence[Run], early: int, full: int) -> dict[str, Any]:
    """Per strategy: its best at ``full`` trials over its best within ``early`` (1.0: it had
    its final best by then), per kernel and the median over kernels."""
    out: dict[str, Any] = {}
    for strategy in dict.fromkeys(r.strategy for r in runs if r.history):
        per = {r.kernel: r.best_over(full) / r.best_over(early) for r in runs
               if r.strategy == strategy and len(r.history) >= full and early < full}
        per = {k: v for k, v in per.items() if math.isfinite(v)}
        out[strategy] = {"per_kernel": per,
                         "median": statistics.median(per.values()) if per else None}
    return {"early": early, "full": full, "strategies": out}


# ------------------------------------------------------------------ TVM MetaSchedule
def tvm_run(kernel: Kernel, budgets: Sequence[int], threads: int, workdir: str,
            keep: Path, cpus: Sequence[int] = ()) -> Run:
    """MetaSchedule once at the largest budget, in a child process. Its JSON database gets
    each round's records as they are measured: the parent watches it, so every trial has
    its own measured time (MetaSchedule's runner) and the wall time its round ended, and the
    best at budget B is the best of the first B, as for polyopt's searches. The tuned
    library is kept in ``keep`` so that ``--retime`` times it again with the others."""
    run = Run(kernel.name, TVM)
    if importlib.util.find_spec("tvm") is None:
        run.failed = "skipped: TVM is not installed"
        return run
    trials = max(budgets)
    log(f"{kernel.name} {TVM}: {trials} trials in a child process")
    os.makedirs(workdir, exist_ok=True)
    start = time.perf_counter()
    result = tvm_child(kernel, trials, threads, workdir, run, start, cpus)
    run.end_s = time.perf_counter() - start
    if not result.endswith(".so"):
        run.failed = f"failed: {result} (after {len(run.history)} trials)"
        log(f"{kernel.name} {TVM}: {run.failed}")
        return run
    keep.mkdir(parents=True, exist_ok=True)
    kept = keep / f"{kernel.name}-{trials}.so"
    shutil.copyfile(result, kept)
    run.libraries[trials] = (str(kept.resolve()), run.end_s)
    run.derive(budgets)
    log(f"{kernel.name} {TVM}: best {run.best_over(trials):.4g} ms, "
        f"{time.perf_counter() - start:.0f} s")
    return run


def tvm_child(kernel: Kernel, trials: int, threads: int, workdir: str, run: Run,
              start: float, cpus: Sequence[int] = ()) -> str:
    """The tuned library's path, or why there is none (``tvm_default_child``); appends
    each measured record to ``run.history`` while the child runs."""
    spec: dict[str, Any] = {"trials": trials, "threads": threads, "workdir": workdir,
                            "cpus": list(cpus)}
    if kernel.layer is None:
        spec["n"] = kernel.sizes["M"]
    else:
        spec["layer"] = asdict(kernel.layer)
    argv = [sys.executable, os.path.abspath(__file__), "--tvm-child"]
    records = Path(workdir) / "database_tuning_record.json"
    limit = 120 + 20 * trials
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen([*argv, json.dumps(spec)], stdout=out, stderr=err, text=True)
        while proc.poll() is None and time.perf_counter() - start < limit:
            time.sleep(0.5)
            _watch(records, run, start)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
            return f"no result within {limit} s"
        _watch(records, run, start)
        out.seek(0)
        err.seek(0)
        done = subprocess.CompletedProcess(argv, proc.returncode, out.read(), err.read())
    for line in done.stdout.splitlines():
        with contextlib.suppress(ValueError, KeyError, TypeError):
            return str(json.loads(line)["result"])
    return crash_reason(done)


def _watch(records: Path, run: Run, start: float) -> None:
    """Append MetaSchedule's newly committed records (one per trial: its mean measured
    time; inf for a failed build or run) to ``run.history``."""
    with contextlib.suppress(OSError):
        lines = records.read_text().splitlines()
        now = time.perf_counter() - start
        for line in lines[len(run.history):]:
            secs = _run_secs(line)
            ok = bool(secs) and all(math.isfinite(x) and x < 1e9 for x in secs)
            run.history.append((now, statistics.mean(secs) * 1e3 if ok else math.inf,
                                "ok" if ok else "error"))


def _run_secs(line: str) -> list[float]:
    """The measured seconds of one MetaSchedule tuning record (a JSON line
    ``[workload, [trace, run_secs, ...]]``): its first list of numbers."""
    with contextlib.suppress(ValueError, TypeError, IndexError):
        for item in json.loads(line)[1]:
            if isinstance(item, list) and item and all(
                    isinstance(x, (int, float)) for x in item):
                return [float(x) for x in item]
    return []


def crash_reason(proc: subprocess.CompletedProcess[str]) -> str:
    """How the child ended: its signal or status, its last message and TVM's frame."""
    lines = [x.strip() for x in proc.stderr.splitlines() if x.strip()]
    frame = next((x.split(", in ", 1)[1].split("(")[0] for x in lines if ", in tvm::" in x), "")
    last = next((x.strip(" !") for x in reversed(lines) if not x.startswith("File ")),
                "no message")
    what = f"{last} in {frame}" if frame else last
    if proc.returncode < 0:
        with contextlib.suppress(ValueError):
            return f"{signal.Signals(-proc.returncode).name} ({what})"
        return f"signal {-proc.returncode} ({what})"
    if proc.returncode:
        return f"exit status {proc.returncode} ({what})"
    return "the child reported no result"


def tvm_default_child(spec_text: str) -> int:
    """MetaSchedule as shipped (its default design space for LLVM, its defaults of 64
    trials per round and one builder per physical core, and, when xgboost is installed, its
    XGBoost cost model) on a TE matmul or conv, on the study's CPUs; prints one JSON
    line. Its builder and runner are TVM's defaults given an initializer that gives each
    worker process the study's CPUs back: each imports tvm, which under
    ``OMP_PROC_BIND=spread`` pins it to one CPU (both builders then shared CPU 0)."""
    spec = json.loads(spec_text)
    try:
        from polyopt.bench import tvm_conv

        tvm, target = tvm_conv.load(int(spec["threads"]))
        from tvm.s_tir import meta_schedule as ms

        cpus = tuple(spec.get("cpus", ()))
        restore_affinity(cpus)  # this process; its workers get ``pin`` below

        func = _te_conv(tvm, spec["layer"]) if "layer" in spec else _te_matmul(tvm, spec["n"])
        model = "xgb" if importlib.util.find_spec("xgboost") else "random"
        pin = functools.partial(restore_affinity, cpus)  # its workers import tvm too
        builder = ms.builder.LocalBuilder(max_workers=ms.utils.cpu_count(logical=False),
                                          initializer=pin)
        db = ms.tune_tir(func, target, spec["workdir"], int(spec["trials"]), database="json",
                         cost_model=model, builder=builder,
                         runner=ms.runner.LocalRunner(initializer=pin))
        sch = ms.tir_integration.compile_tir(db, func, target)
        result = "MetaSchedule found no valid schedule"
        if sch is not None:
            result = os.path.join(spec["workdir"], "tuned.so")
            tvm.compile(sch.mod, target=target).export_library(result)
    except Exception as exc:  # reported as the failure, with TVM's first line
        first = next((x for x in str(exc).splitlines() if x.strip()), "")
        result = f"{type(exc).__name__}: {first.strip()}"
    print(json.dumps({"layer": 0, "result": result}), flush=True)
    return 0


def _te_matmul(tvm: Any, n: int) -> Any:
    te = tvm.te
    a, b = te.placeholder((n, n), name="A"), te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), "k")
    c = te.compute((n, n), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    return te.create_prim_func([a, b, c])


def _te_conv(tvm: Any, row: dict[str, Any]) -> Any:
    """A plain NCHW convolution (zero padding, no layout choices): MetaSchedule's rules
    pick the tiling."""
    from polyopt.bench.layers import Layer
    from polyopt.bench.tvm_conv import padded

    layer, te = Layer(**row), tvm.te
    data = te.placeholder(layer.input_shape(1), name="I")
    weight = te.placeholder(layer.weight_shape(), name="W")
    pad, s, k = padded(tvm, data, layer), layer.stride, layer.k
    rc = te.reduce_axis((0, layer.cin), "rc")
    ry, rx = te.reduce_axis((0, k), "ry"), te.reduce_axis((0, k), "rx")
    out = te.compute(layer.output_shape(1), lambda n, f, y, x: te.sum(
        pad[n, rc, y * s + ry, x * s + rx] * weight[f, rc, ry, rx], axis=[rc, ry, rx]),
        name="conv")
    return te.create_prim_func([data, weight, out])


# ------------------------------------------------------------------ same-process timing
Call = Callable[[], np.ndarray]


def inputs_and_reference(kernel: Kernel, seed: int) -> tuple[list[np.ndarray], np.ndarray]:
    from polyopt.bench.peers import conv_reference

    rng = np.random.default_rng(seed)
    if kernel.layer is None:
        n = kernel.sizes["M"]
        a, b = (rng.standard_normal((n, n), dtype=np.float32) for _ in range(2))
        return [a, b], a.astype(np.float64) @ b.astype(np.float64)
    x = rng.standard_normal(kernel.layer.input_shape(1), dtype=np.float32)
    w = rng.standard_normal(kernel.layer.weight_shape(), dtype=np.float32)
    return [x, w], conv_reference(x, w, kernel.layer)


def peer_calls(kernel: Kernel, inputs: list[np.ndarray], threads: int) -> dict[str, Call]:
    """torch (F.conv2d / torch.matmul, ``threads`` threads) and, for matmul, numpy."""
    calls: dict[str, Call] = {}
    with contextlib.suppress(ImportError):
        import torch

        torch.set_num_threads(threads)
        x, w = (torch.from_numpy(a) for a in inputs)
        layer = kernel.layer
        if layer is None:
            calls["torch"] = lambda: torch.matmul(x, w).numpy()
        else:
            conv = torch.nn.functional.conv2d
            calls["torch"] = lambda: conv(x, w, stride=layer.stride, padding=layer.pad,
                                          groups=layer.groups).numpy()
    if kernel.layer is None:
        calls["numpy"] = lambda: inputs[0] @ inputs[1]
    return calls


def polyopt_calls(kernel: Kernel, runs: Sequence[Run], inputs: list[np.ndarray]
                  ) -> dict[str, Call]:
    """The default schedule and each strategy's best, compiled here from their options."""
    import polyopt

    def compiled(options: dict[str, Any]) -> Call:
        fn = polyopt.compile(kernel.source, kernel.def_name, sizes=kernel.sizes,
                             options={**options, "tuned": False})
        return lambda: fn(*inputs)

    calls = {"default": compiled({})}
    calls.update({r.strategy: compiled(r.options) for r in runs if r.options})
    return calls


def tvm_calls(kernel: Kernel, run: Run | None, inputs: list[np.ndarray], threads: int
              ) -> dict[str, Call]:
    """Each tuned MetaSchedule library (none when tuning failed)."""
    if run is None or not run.libraries:
        return {}
    from polyopt.bench import tvm_conv

    cpus = sorted(os.sched_getaffinity(0))
    tvm, _ = tvm_conv.load(threads)
    restore_affinity(cpus)
    dev = tvm.cpu()
    tensor = getattr(tvm.runtime, "tensor", None) or tvm.nd.array
    args = [tensor(a, dev) for a in inputs]
    shape = kernel.layer.output_shape(1) if kernel.layer else inputs[0].shape
    out = tensor(np.zeros(shape, np.float32), dev)
    calls: dict[str, Call] = {}
    for b, (path, _) in run.libraries.items():
        calls[f"{TVM} {b}"] = _tvm_call(tvm.runtime.load_module(path)["main"], args, out)
    return calls


def _tvm_call(entry: Any, args: list[Any], out: Any) -> Call:
    def call() -> np.ndarray:
        entry(*args, out)
        return np.asarray(out.numpy())

    return call


def best_time(call: Call, repeat: int = 10) -> float:
    call()
    out = math.inf
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        out = min(out, time.perf_counter() - start)
    return out


def same_process(kernel: Kernel, runs: Sequence[Run], threads: int, rounds: int,
                 seed: int, pause: float = 0.0) -> dict[str, Any]:
    """Every system once checked against float64, then timed in ``rounds`` interleaved
    rounds ``pause`` s apart (best of 10 calls each, after a settling pause); ms per
    system, and the wrong ones."""
    inputs, ref = inputs_and_reference(kernel, seed)
    tvm = next((r for r in runs if r.strategy == TVM), None)
    calls = {**polyopt_calls(kernel, [r for r in runs if r.strategy != TVM], inputs),
             **tvm_calls(kernel, tvm, inputs, threads), **peer_calls(kernel, inputs, threads)}
    errors = {name: _error(call(), ref) for name, call in calls.items()}
    times = dict.fromkeys(calls, math.inf)
    for i in range(rounds):
        time.sleep(pause if i else 0.0)
        for name, call in calls.items():
            time.sleep(SETTLE_S)
            times[name] = min(times[name], best_time(call))
    return {"ms": {k: v * 1e3 for k, v in times.items()},
            "wrong": {k: v for k, v in errors.items() if not v <= TOLERANCE}}


def _error(got: Any, ref: np.ndarray) -> float:
    g = np.asarray(got, np.float64)
    if g.shape != ref.shape:
        return math.inf
    return float(np.linalg.norm(g - ref) / max(float(np.linalg.norm(ref)), 1e-30))


# ------------------------------------------------------------------ report
def ratio(num: float | None, den: float | None) -> str:
    if num is None or den is None or not den > 0 or not math.isfinite(num / den):
        return "-"
    return f"{num / den:.2f}"


def table(study: dict[str, Any]) -> str:
    """Best ms and wall s at each budget, then speed vs the default, torch and numpy."""
    budgets = study["settings"]["budgets"]
    head = ["kernel", "strategy", *[f"best ms @{b}" for b in budgets],
            *[f"wall s @{b}" for b in budgets], "x default", "x torch", "x numpy"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for run in study["runs"]:
        same = study["same_process"].get(run["kernel"], {}).get("ms", {})
        points = {p["trials"]: p for p in run["points"]}
        cells = [_ms(points.get(b, {}).get("best_ms")) for b in budgets]
        walls = [_s(points.get(b, {}).get("wall_s")) for b in budgets]
        if run["failed"]:
            cells = [run["failed"], *["-"] * (len(budgets) - 1)]
        last = points.get(budgets[-1], {}).get("best_ms")
        default = default_ms(study, run["kernel"]) if run["history"] else same.get("default")
        mine = same.get(f"{TVM} {budgets[-1]}" if run["strategy"] == TVM else run["strategy"])
        lines.append("| " + " | ".join([
            run["kernel"], run["strategy"], *cells, *walls, ratio(default, last),
            ratio(same.get("torch"), mine), ratio(same.get("numpy"), mine)]) + " |")
    return "\n".join(lines)


def default_ms(study: dict[str, Any], kernel: str) -> float | None:
    """The default schedule's time: trial 1 of each of the kernel's runs, the best of them
    (one noisy measurement per run would otherwise scale each run's speed-ups)."""
    first = [r["history"][0]["ms"] for r in study["runs"] if r["kernel"] == kernel
             and r["history"] and r["history"][0]["ms"]]
    return min(first) if first else None


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x:.4g}"


def _s(x: float | None) -> str:
    return "-" if x is None else f"{x:.0f}"


def same_table(study: dict[str, Any]) -> str:
    systems = ["default", *study["settings"]["strategies"], "torch", "numpy"]
    head = ["kernel", "GFLOP", *[f"{s} ms" for s in systems]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for k in study["kernels"]:
        same = study["same_process"].get(k["name"], {})
        ms = same.get("ms", {})
        if s := [x for x in ms if x.startswith(TVM)]:
            ms = {**ms, TVM: ms[s[-1]]}
        cells = [_ms(ms.get(s)) + (" WRONG" if s in same.get("wrong", {}) else "")
                 for s in systems]
        lines.append("| " + " | ".join([k["name"], f"{k['gflop']:.3g}", *cells]) + " |")
    return "\n".join(lines)


def quality_lines(study: dict[str, Any]) -> list[str]:
    m = study["metrics"]
    early = m["early_fraction"]
    lines = [f"- Fraction of the {early['full']}-trial best reached within {early['early']} "
             "trials (best time at the full budget over the best within the early one; "
             "median over kernels):"]
    for s, v in early["strategies"].items():
        per = ", ".join(f"{k} {x:.2f}" for k, x in v["per_kernel"].items())
        med = "-" if v["median"] is None else f"{v['median']:.2f}"
        lines.append(f"  - {s}: {med} ({per})")
    seed = m.get("seeding")
    if seed and "fraction" in seed:
        frac = "-" if seed["fraction"] is None else f"{seed['fraction']:.2f}"
        lines.append(
            f"- Seeding: matmul {seed['size']}^3 tuned into the database of {seed['from']} "
            f"({seed['seeds']} seed schedule(s) from the nearest tuned shape): best within "
            f"{seed['early']} trials {_ms(seed['best_ms_early'])} ms "
            f"({_s(seed['wall_s_early'])} s), after {seed['trials']} trials "
            f"{_ms(seed['best_ms_full'])} ms: fraction {frac} (default "
            f"{_ms(seed['default_ms'])} ms).")
    elif seed:
        lines.append(f"- Seeding: {seed.get('skipped', 'not run')}")
    return lines


def markdown(study: dict[str, Any]) -> str:
    env = study["environment"]
    rounds = study["settings"]["rounds"]
    return "\n".join([
        "# polyopt tuning study", "", f"Command: `{study['command']}`", "",
        f"- Date: {study['date']}; machine: {env['machine']['cpu']}, "
        f"{env['machine']['cores']} cores; threads {study['settings']['threads']}",
        f"- Versions: {', '.join(f'{k} {v}' for k, v in env['versions'].items() if v)}", "",
        "## Best found at each trial budget", "", table(study), "",
        "best ms: each system's own measurement of the best of the first B trials, the mean "
        "of its calls for both (polyopt: 5 calls in a fresh worker process; MetaSchedule: its "
        "runner's mean); wall s: from before the system's process started (interpreter, "
        "imports, setup) to that trial's result, and at the largest budget to the process's "
        "end (polyopt: after timing its fastest few schedules and the default again side by "
        f"side, at most {_confirm_s(study):.0f} s; MetaSchedule: after compiling its best). "
        "x default: the default schedule's time (trial 1 of each run, the best of the "
        "kernel's runs) over the best at the largest budget; x torch / x numpy: from the "
        "same-process times below.", "",
        f"## Same-process times at the end of each kernel's runs (ms, best over {rounds} "
        "interleaved rounds of 10 calls)", "", *_retimed(study), same_table(study), "",
        "## Search quality", "", *quality_lines(study), ""])


def _retimed(study: dict[str, Any]) -> list[str]:
    r = study.get("retimed")
    if not r:
        return []
    lost = sorted({x for v in study["same_process"].values() for x in v.get("not_retimed", [])})
    gone = f"; not timed again (library gone): {', '.join(lost)}" if lost else ""
    return [f"Measured again with `--retime` on {r['date']}: every system together, best over "
            f"{r['rounds']} rounds {r['pause_s']:g} s apart{gone}.", ""]


def _confirm_s(study: dict[str, Any]) -> float:
    return max((r.get("confirm_s", 0.0) for r in study["runs"]), default=0.0)


def plot(study: dict[str, Any], path: Path) -> str | None:
    """Best found speed relative to the default schedule against trials (top row) and wall
    time (bottom), one column per kernel; torch and numpy as lines (same-process ratios)."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        return f"matplotlib is not installed ({exc})"
    kernels = study["kernels"]
    fig = Figure(figsize=(3.1 * len(kernels) + 0.6, 5.6), dpi=90)
    FigureCanvasAgg(fig)
    axes = fig.subplots(2, len(kernels), squeeze=False)
    legend: dict[str, Any] = {}
    for j, k in enumerate(kernels):
        _plot_kernel(axes[0][j], axes[1][j], k, study)
        for ax in (axes[0][j], axes[1][j]):
            handles, labels = ax.get_legend_handles_labels()
            legend.update(zip(labels, handles, strict=True))
    fig.legend(list(legend.values()), list(legend), loc="lower center", ncol=len(legend),
               fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(path)
    return None


def _plot_kernel(top: Any, bottom: Any, k: dict[str, Any], study: dict[str, Any]) -> None:
    same = study["same_process"].get(k["name"], {}).get("ms", {})
    default = default_ms(study, k["name"])
    for run in (r for r in study["runs"] if r["kernel"] == k["name"]):
        if run["strategy"] == TVM:
            _plot_tvm(top, bottom, run, same.get("default"))
            continue
        best, xs, ts, ys = math.inf, [], [], []
        for i, h in enumerate(run["history"]):
            best = min(best, h["ms"] if h["ms"] is not None else math.inf)
            if math.isfinite(best) and default:
                xs.append(i + 1)
                ts.append(h["elapsed_s"])
                ys.append(default / best)
        color = COLORS.get(run["strategy"], "gray")
        top.step(xs, ys, where="post", color=color, label=run["strategy"])
        bottom.step(ts, ys, where="post", color=color, label=run["strategy"])
    for peer, style in (("torch", "--"), ("numpy", ":")):
        if same.get(peer) and same.get("default"):
            for ax in (top, bottom):
                ax.axhline(same["default"] / same[peer], color="black", linestyle=style,
                           linewidth=1, label=f"{peer} (same-process ratio)")
    top.set_title(f"{k['name']}: {k['shape']}", fontsize=9)
    top.set_xscale("log", base=2)
    top.set_xlabel("trials", fontsize=8)
    bottom.set_xlabel("wall time (s)", fontsize=8)
    for ax in (top, bottom):
        ax.set_ylabel("best found speed / default", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)


def _plot_tvm(top: Any, bottom: Any, run: dict[str, Any], default_ms: float | None) -> None:
    """MetaSchedule's tuned libraries as points, or why there are none as a note."""
    pts = [p for p in run["points"] if p["best_ms"] and default_ms]
    if not pts:
        top.text(0.98, 0.03, f"{TVM}: {run['failed'].split(' (')[0]}", fontsize=7,
                 transform=top.transAxes, ha="right", va="bottom", color=COLORS[TVM])
        return
    for ax, x in ((top, "trials"), (bottom, "wall_s")):
        ax.plot([p[x] for p in pts], [default_ms / p["best_ms"] for p in pts], "o",
                color=COLORS[TVM], label=TVM)


# ------------------------------------------------------------------ driver
def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--budgets", help=f"trial budgets (default {FULL['budgets']})")
    p.add_argument("--strategies", default=",".join([*STRATEGIES, TVM]),
                   help="random, genetic, model and metaschedule (TVM, when installed)")
    p.add_argument("--kernels", help="matmul,conv<N>,... (default: matmul and --layers)")
    p.add_argument("--layers", default="3,11,17", help="ResNet-50 layer numbers")
    p.add_argument("--matmul-size", type=int)
    p.add_argument("--seed-size", type=int, help="the new matmul shape tuned from the database")
    p.add_argument("--seed-trials", type=int)
    p.add_argument("--seed-early", type=int)
    p.add_argument("--early", type=int, help="the early budget of the search-quality metric")
    p.add_argument("--rounds", type=int, help="same-process timing rounds")
    p.add_argument("--scale", type=int, help="divide conv channels and sizes (tests)")
    p.add_argument("--quick", action="store_true", help="tiny sizes and budgets 4,8 (tests)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="tuning-study")
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--keep-dbs", metavar="DIR", help="keep the runs' tuning databases here "
                   "(<kernel>-<strategy>.sqlite; for scripts/checks/cost_model_eval.py)")
    p.add_argument("--from-json", metavar="FILE",
                   help="write the table and plot of a saved study to --out; run nothing")
    p.add_argument("--retime", metavar="FILE",
                   help="time a saved study's systems again (polyopt's default and best "
                        "schedules, torch, numpy; --rounds rounds, --pause s apart) and "
                        "write it to --out with the new same-process table")
    p.add_argument("--pause", type=float, default=0.0,
                   help="seconds between same-process rounds (catch this VM's fast phases)")
    args = p.parse_args(argv)
    for name, value in (QUICK if args.quick else FULL).items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    args.budgets = sorted({int(b) for b in str(args.budgets).split(",") if b.strip()})
    args.strategies = [s.strip() for s in args.strategies.split(",") if s.strip()]
    bad = [s for s in args.strategies if s not in (*STRATEGIES, TVM)]
    if bad or not args.budgets or min(args.budgets) < 1:
        p.error(f"unknown strategies {bad} or empty budgets")
    args.cpus = sorted(os.sched_getaffinity(0))  # every system runs on these
    args.threads = args.threads or int(os.environ.get("OMP_NUM_THREADS", "").split(",")[0]
                                       or len(os.sched_getaffinity(0)))
    return args


def new_study(args: argparse.Namespace, kernels: Sequence[Kernel]) -> dict[str, Any]:
    from polyopt.bench.conv.report import environment

    settings = {k: v for k, v in vars(args).items()
                if k not in ("out", "kernels", "from_json", "keep_dbs")}
    return {"command": "python3 " + shlex.join(["scripts/studies/tuning_study.py", *sys.argv[1:]]),
            "date": datetime.datetime.now().isoformat(timespec="seconds"),
            "environment": environment(), "settings": settings,
            "kernels": [{"name": k.name, "shape": k.shape, "def": k.def_name, "sizes": k.sizes,
                         "gflop": k.gflop} for k in kernels],
            "runs": [], "same_process": {}, "metrics": {}}


def save(study: dict[str, Any], runs: Sequence[Run], out: Path) -> None:
    study["runs"] = [r.as_json() for r in runs]
    (out / "tuning_study.json").write_text(json.dumps(study, indent=1) + "\n")


def study_kernel(kernel: Kernel, args: argparse.Namespace, dbdir: Path,
                 workdir: str) -> list[Run]:
    runs = []
    for strategy in (s for s in args.strategies if s != TVM):
        db = dbdir / f"{kernel.name}-{strategy}.sqlite"
        runs.append(tune_run(kernel, strategy, max(args.budgets), args.seed, db, args.cpus))
        runs[-1].derive(args.budgets)
    if TVM in args.strategies:
        runs.append(tvm_run(kernel, args.budgets, args.threads,
                            os.path.join(workdir, kernel.name), Path(args.out) / "tvm",
                            args.cpus))
    return runs


def run_study(args: argparse.Namespace) -> dict[str, Any]:
    from polyopt.bench.conv import configure_threads

    configure_threads(args.threads)
    kernels = kernels_for(args)
    study, runs, out = new_study(args, kernels), [], Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="polyopt-study-") as tmp:
        dbdir, workdir = Path(args.keep_dbs or tmp), os.path.join(tmp, "tvm")
        dbdir.mkdir(parents=True, exist_ok=True)
        for kernel in kernels:
            mine = study_kernel(kernel, args, dbdir, workdir)
            runs += mine
            study["same_process"][kernel.name] = same_process(
                kernel, mine, args.threads, args.rounds, args.seed, args.pause)
            # OpenMP (OMP_PROC_BIND=spread) bound this thread to one CPU: the next children
            # and the machine's tuning key (its usable cores) need the study's CPUs back
            restore_affinity(args.cpus)
            if kernel.name == "matmul":
                study["metrics"]["seeding"] = seed_metric(args, dbdir)
            save(study, runs, out)
    study["metrics"]["early_fraction"] = early_fractions(
        [r for r in runs if r.strategy != TVM], args.early, max(args.budgets))
    save(study, runs, out)
    return study


def retime(study: dict[str, Any], args: argparse.Namespace) -> None:
    """The same-process table of a saved study, every system measured again here together:
    polyopt's default and best schedules, torch, numpy and MetaSchedule's kept libraries (a
    system that cannot be timed again leaves the table, never keeps an older time)."""
    from polyopt.bench.conv import configure_threads

    configure_threads(args.threads)
    saved = argparse.Namespace(**{**vars(args), **study["settings"],
                                  "kernels": ",".join(k["name"] for k in study["kernels"])})
    for kernel in kernels_for(saved):
        runs = [_saved_run(r) for r in study["runs"] if r["kernel"] == kernel.name]
        old = study["same_process"].get(kernel.name, {"ms": {}, "wrong": {}})
        new = same_process(kernel, runs, args.threads, args.rounds, args.seed, args.pause)
        lost = sorted(set(old["ms"]) - set(new["ms"]))
        study["same_process"][kernel.name] = {**new, "not_retimed": lost}
    study["retimed"] = {"date": datetime.datetime.now().isoformat(timespec="seconds"),
                        "rounds": args.rounds, "pause_s": args.pause}


def _saved_run(row: dict[str, Any]) -> Run:
    run = Run(row["kernel"], row["strategy"], options=row["best_options"])
    run.libraries = {int(b): (p, 0.0) for b, p in row.get("libraries", {}).items()
                     if Path(p).exists()}
    return run


def seed_metric(args: argparse.Namespace, dbdir: Path) -> dict[str, Any]:
    db = next((dbdir / f"matmul-{s}.sqlite" for s in ("model", *STRATEGIES)
               if (dbdir / f"matmul-{s}.sqlite").exists()), None)
    if db is None:
        return {"skipped": "no polyopt search ran on matmul"}
    return seeding(matmul_kernel(args.seed_size), db, args)


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["--tvm-child"]:
        return tvm_default_child(argv[1])
    if argv[:1] == ["--polyopt-child"]:
        return polyopt_child(argv[1])
    args = parse_args(argv)
    out = Path(args.out)
    if args.from_json or args.retime:
        study = json.loads(Path(args.from_json or args.retime).read_text())
        out.mkdir(parents=True, exist_ok=True)
        if args.retime:
            retime(study, args)
            (out / "tuning_study.json").write_text(json.dumps(study, indent=1) + "\n")
    else:
        study = run_study(args)
    text = markdown(study)
    (out / "tuning_study.md").write_text(text)
    print(text)
    why = plot(study, out / "tuning_study.png")
    print(f"PNG skipped: {why}" if why else f"wrote {out / 'tuning_study.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
