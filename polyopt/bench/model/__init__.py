"""``polyopt bench model``: whole models (ResNet-50, MobileNetV2, a BERT-base encoder; see
``networks``) through eager torch, Inductor (``torch.compile``'s default), polyopt
(``backend="polyopt"``) and ONNX Runtime when installed, at each batch size.

Per model and batch, each compiling system runs in child processes (``child``) with
new, empty cache dirs (POLYOPT_CACHE_DIR, TORCHINDUCTOR_CACHE_DIR): a first child times its
cold compile (the first call after a reset), a second child with the same caches its warm
start (compile to first result). Then one more child compiles every system (from those
caches) and times single calls, round-robin in an order rotated each round, for the median
latency and the max relative L2 error against eager. Every system gets the same threads
(``torch.set_num_threads`` and OMP_NUM_THREADS) and runs under ``torch.no_grad()``. For
polyopt the table also gives the partitions and the ATen ops left in torch. This command
imports no torch itself, so ``--help`` is quick and a missing torch is a message.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from polyopt import config, host
from polyopt.bench.entry import suite_main
from polyopt.bench.model import records as model_records
from polyopt.bench.model.records import ModelRecord
from polyopt.errors import OptionError

__all__ = ["MODELS", "SYSTEMS", "Settings", "add_arguments", "main", "run", "settings_from"]

MODELS = ("resnet50", "mobilenetv2", "bert")  # networks.NETWORKS, without importing torch
SYSTEMS = ("eager", "inductor", "polyopt", "onnxruntime", "polyopt-all")
DEFAULT_SYSTEMS = SYSTEMS[:4]
"""``polyopt-all`` (not run by default) is polyopt with every supported op in its partitions,
none measured against torch (``make_backend(choose=False)``): the same run then shows what
the measured choice gains. It shares polyopt's caches, so its compile times are not cold."""
# A pause before each timed call, so the previous system's OpenMP threads stop spinning.
SETTLE_S = 0.1


@dataclass(frozen=True)
class Settings:
    """The validated options of one run."""

    models: tuple[str, ...]
    systems: tuple[str, ...]
    batches: tuple[int, ...]
    repeat: int
    threads: int
    quick: bool
    baseline: str
    seed: int
    settle: float
    timeout: float
    json: str | None
    csv: str | None
    png: str | None
    command: str
    usable_cpus: int


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``polyopt bench model``."""
    p.add_argument("--models", default=",".join(MODELS),
                   help=f"comma-separated, from {', '.join(MODELS)} (default all)")
    p.add_argument("--systems", default=",".join(DEFAULT_SYSTEMS),
                   help=f"comma-separated, from {', '.join(SYSTEMS)} (default "
                   f"{','.join(DEFAULT_SYSTEMS)}; eager is always run: it is the reference; "
                   "polyopt-all: no op measured against torch, polyopt's caches reused)")
    p.add_argument("--batches", default="1,8", help="comma-separated batch sizes (default 1,8)")
    p.add_argument("--repeat", type=int, default=10,
                   help="timed calls per system, interleaved round-robin (default 10)")
    p.add_argument("--threads", type=int, default=0,
                   help="threads for every system (default: $OMP_NUM_THREADS, else every CPU "
                   "this process may use)")
    p.add_argument("--quick", action="store_true",
                   help="tiny models (fewer blocks and channels, small inputs): a smoke test")
    p.add_argument("--baseline", default="inductor", choices=SYSTEMS,
                   help="the system speed-ups are relative to (default inductor)")
    p.add_argument("--seed", type=int, default=0, help="seed of the weights and inputs")
    p.add_argument("--settle", type=float, default=SETTLE_S, metavar="SECONDS",
                   help=f"pause before each timed call (default {SETTLE_S})")
    p.add_argument("--timeout", type=float, default=3600, metavar="SECONDS",
                   help="limit of each child process (default 3600)")
    p.add_argument("--json", metavar="PATH", help="write the records, settings and machine")
    p.add_argument("--csv", metavar="PATH", help="write the records as CSV")
    p.add_argument("--png", metavar="PATH", help="write a bar chart (needs matplotlib)")


def _ints(text: str, what: str) -> tuple[int, ...]:
    try:
        values = tuple(int(w) for w in text.split(",") if w.strip())
    except ValueError:
        raise OptionError(f"--{what} takes comma-separated integers, not {text!r}") from None
    if not values or min(values) < 1:
        raise OptionError(f"--{what} needs positive integers, not {text!r}")
    return values


def settings_from(args: argparse.Namespace) -> Settings:
    """Check the options; every mistake is an OptionError naming the valid choices."""
    models = tuple(m.strip() for m in args.models.split(",") if m.strip())
    unknown = [m for m in models if m not in MODELS]
    if unknown or not models:
        raise OptionError(f"unknown --models {','.join(unknown)!r}; choose from "
                          f"{', '.join(MODELS)}")
    systems = ("eager", *(s.strip() for s in args.systems.split(",")
                          if s.strip() and s.strip() != "eager"))
    if set(systems) - set(SYSTEMS) or args.baseline not in systems:
        raise OptionError(f"--systems {args.systems!r} with --baseline {args.baseline}: choose "
                          f"from {', '.join(SYSTEMS)}, the baseline among them")
    batches = _ints(args.batches, "batches")
    for name, least in (("repeat", 1), ("threads", 0)):
        if getattr(args, name) < least:
            raise OptionError(f"--{name} must be at least {least}")
    if args.settle < 0 or args.timeout <= 0:
        raise OptionError("--settle must not be negative and --timeout must be positive")
    threads = args.threads or _default_threads()
    words = ["polyopt", "bench", "model", "--models", ",".join(models), "--systems",
             ",".join(systems), "--batches",
             ",".join(map(str, batches)), "--repeat", str(args.repeat), "--threads",
             str(threads), "--baseline", args.baseline, "--seed", str(args.seed)]
    words += ["--quick"] if args.quick else []
    return Settings(models, systems, batches, args.repeat, threads, args.quick, args.baseline,
                    args.seed, args.settle, args.timeout, args.json, args.csv, args.png,
                    shlex.join(words), host.usable_cores())


def _default_threads() -> int:
    env = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    return int(env) if env.isdigit() and int(env) > 0 else host.usable_cores()


# ------------------------------------------------------------------ child processes
def _child_env(settings: Settings, caches: Path) -> dict[str, str]:
    """This environment, the threads, the run's cache dirs, and this polyopt first."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[3])  # the dir that holds polyopt/
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    env["OMP_NUM_THREADS"] = str(settings.threads)
    # the host's measured machine profile lives under the user's cache dir: the children's
    # empty ones would leave the model unmeasured (a compile a user makes finds it)
    profile = config.machine_profile()
    if profile is not None and profile.is_file():
        env.setdefault("POLYOPT_PROFILE", str(profile))
    env["POLYOPT_CACHE_DIR"] = str(caches / "polyopt")
    env["TORCHINDUCTOR_CACHE_DIR"] = str(caches / "inductor")
    return env


def run_child(settings: Settings, env: dict[str, str], task: str, model: str, batch: int,
              *options: str) -> dict[str, Any]:
    """One ``child`` process; its JSON, or a failure with the reason."""
    with tempfile.TemporaryDirectory(prefix="polyopt-bench-model-") as tmp:
        result = Path(tmp) / "result.json"
        argv = [sys.executable, "-m", "polyopt.bench.model.child", task, "--model", model,
                "--batch", str(batch), "--seed", str(settings.seed), "--threads",
                str(settings.threads), "--result", str(result), *options]
        argv += ["--tiny"] if settings.quick else []
        try:
            proc = subprocess.run(argv, env=env, capture_output=True, text=True,
                                  timeout=settings.timeout, check=False)
        except subprocess.TimeoutExpired:
            return {"status": "failed", "reason": f"timed out after {settings.timeout:g} s"}
        if result.exists():
            found: dict[str, Any] = json.loads(result.read_text(encoding="utf-8"))
            return found
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        return {"status": "failed", "reason": f"child exited {proc.returncode}: "
                + (lines[-1][:300] if lines else "no output")}


def _note_compile(rec: ModelRecord, found: dict[str, Any], warm: bool) -> None:
    if found.get("status") != "ok":
        rec.fail("failed", f"{'warm start' if warm else 'compile'}: {found.get('reason')}")
        return
    if warm:
        rec.warm_s = found["seconds"]
        return
    rec.compile_s = found["seconds"]
    if "partitions" in found:
        rec.partitions, rec.torch_ops = found["partitions"], found["torch_ops"]
        rec.fallback_ops = ", ".join(found["fallback_ops"])


def _note_latency(rec: ModelRecord, found: dict[str, Any]) -> None:
    if found.get("status") != "ok":
        rec.fail("failed", str(found.get("reason")))
        return
    times = found["times_ms"]
    rec.median_ms = float(np.median(times))
    rec.min_ms, rec.max_ms, rec.calls = float(min(times)), float(max(times)), len(times)
    rec.rel_error = found["rel_error"]


def measure(settings: Settings, model: str, batch: int, say: Any) -> list[ModelRecord]:
    """Every system on ``model`` at ``batch``: cold and warm compiles, then latencies."""
    records = {s: ModelRecord(model, batch, s) for s in settings.systems}
    if "onnxruntime" in records and importlib.util.find_spec("onnxruntime") is None:
        records["onnxruntime"].fail("skipped", "onnxruntime is not installed")
    with tempfile.TemporaryDirectory(prefix="polyopt-bench-caches-") as caches:
        env = _child_env(settings, Path(caches))
        for system in settings.systems[1:]:
            for warm in (False, True):
                if records[system].status != "ok":
                    break
                say(f"{model} batch {batch}: {system} {'warm start' if warm else 'cold'}")
                _note_compile(records[system], run_child(
                    settings, env, "compile", model, batch, "--system", system), warm)
        ready = [s for s in settings.systems if records[s].status == "ok"]
        say(f"{model} batch {batch}: latency of {', '.join(ready)}")
        found = run_child(settings, env, "latency", model, batch, "--systems",
                          ",".join(ready), "--repeat", str(settings.repeat), "--settle",
                          str(settings.settle))
    for system in ready:
        _note_latency(records[system], found.get(system, found))
    return list(records.values())


# ------------------------------------------------------------------ entry points
def _write(settings: Settings, records: Sequence[ModelRecord]) -> None:
    document = asdict(settings) | {"tolerance": model_records.TOLERANCE}
    if settings.json:
        model_records.write_json(Path(settings.json), records, document)
        print(f"wrote {settings.json}")
    if settings.csv:
        model_records.write_csv(Path(settings.csv), records)
        print(f"wrote {settings.csv}")
    if settings.png:
        title = f"{settings.threads} threads; speed relative to {settings.baseline}"
        note = model_records.plot(Path(settings.png), records, settings.baseline, title)
        print(f"PNG skipped: {note}" if note else f"wrote {settings.png}")


def run(args: argparse.Namespace) -> int:
    """Run the benchmark for parsed options; 1 when polyopt computed a wrong result."""
    settings = settings_from(args)
    if importlib.util.find_spec("torch") is None:
        raise OptionError("polyopt bench model needs PyTorch (pip install polyopt[torch])")

    def say(message: str) -> None:
        print(f"polyopt bench model: {message}", file=sys.stderr, flush=True)

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    if load > 0.5:
        say(f"note: the 1-minute load average is {load:.1f}; the times will be noisy")
    records = [r for model in settings.models for batch in settings.batches
               for r in measure(settings, model, batch, say)]
    model_records.add_speedups(records, settings.baseline)
    print(model_records.table(records, settings.baseline))
    _write(settings, records)
    wrong = [f"{r.model}/{r.batch}" for r in records
             if r.system.startswith("polyopt") and r.rel_error is not None and not r.matched]
    if wrong:
        print(f"polyopt: wrong results on {', '.join(wrong)}", file=sys.stderr)
    return 1 if wrong else 0


def main(argv: Sequence[str] | None = None) -> int:
    """``polyopt bench model ...`` as a module of its own (``python3 -m polyopt.bench.model``)."""
    return suite_main("model", __doc__, add_arguments, run, argv)

