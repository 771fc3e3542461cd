"""How ``polyopt bench ops`` and ``polyopt bench suite`` build, check and time a system: each
system's call is made and its result checked first, then all are timed in interleaved rounds
(``timing.time_rounds``) after a pause that lets other runtimes' threads go idle."""

from __future__ import annotations

import contextlib
import functools
import importlib
import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from polyopt import api
from polyopt.bench.operators import Case, Inputs, kernel_text
from polyopt.bench.timing import sample_seconds, time_rounds
from polyopt.config import scratch_cache

OVERHEAD_CALLS = 200
# Pause before each measurement: OpenBLAS's idle workers spin ~0.15 s after a call, and on a
# 2-core machine a spinning runtime stalls another runtime's OpenMP calls by ~8 ms each.
SETTLE_S = 0.3


@dataclass
class Timing:
    """A median time, or the note shown instead (-, WRONG, ERROR, skipped)."""

    seconds: float | None = None
    note: str = "-"


@dataclass
class Prepared:
    """A system's call, its result checked, or the note shown instead of its time."""

    call: Callable[[], Any] | None = None
    note: str = "-"



@dataclass(frozen=True)
class Bench:
    """What every measurement needs: settings and the optional baselines."""

    repeat: int
    cache_root: Path
    all_baselines: bool
    torch: Any | None
    tvm: tuple[Any, Any] | None  # (tvm module, target)
    settle_s: float = SETTLE_S  # pause before each measurement; 0 for --quick
    rounds: int = 3  # interleaved rounds of ``repeat`` calls per system


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def median_seconds(fn: Callable[[], Any], repeat: int) -> float:
    """Median of ``repeat`` timed calls (``sample_seconds``)."""
    return float(np.median(sample_seconds(fn, repeat)))


def time_interleaved(bench: Bench, systems: dict[str, Prepared]) -> dict[str, Timing]:
    """Each system's median over ``bench.rounds`` interleaved rounds (``time_rounds``) of
    ``bench.repeat`` batched samples (``sample_seconds``); a system that raises while
    timed shows ERROR."""
    samplers = {name: functools.partial(sample_seconds, p.call, bench.repeat)
                for name, p in systems.items() if p.call is not None}
    samples, failed = time_rounds(samplers, bench.rounds, bench.settle_s)
    for name, why in failed.items():
        log(f"  {name} failed while timed: {why}")
    return {name: Timing(note="ERROR") if name in failed
            else Timing(float(np.median(samples[name]))) if name in samples
            else Timing(note=p.note) for name, p in systems.items()}


def describe(exc: BaseException, lines: int = 8) -> str:
    """The exception's type and the first lines of its message (compiler logs are long)."""
    text = str(exc).splitlines() or [""]
    more = f" [... {len(text) - lines} more lines]" if len(text) > lines else ""
    return f"{type(exc).__name__}: " + "\n    ".join(text[:lines]) + more


def settle(bench: Bench) -> None:
    """Let the last runtime's spinning worker threads go to sleep before timing another."""
    time.sleep(bench.settle_s)


def matches(out: Any, ref: np.ndarray, reduction: int) -> bool:
    out = out.numpy() if hasattr(out, "numpy") else np.asarray(out)
    if out.shape != ref.shape or not np.isfinite(out).all():
        return False
    return bool(np.allclose(out, ref, rtol=1e-3, atol=1e-3 * math.sqrt(reduction)))


def make_inputs(case: Case, rng: np.random.Generator, ones: bool = False) -> Inputs:
    """Standard-normal float32 inputs (all extents 1 and value 1 with ``ones``)."""
    scalars = iter((1.5, 1.2))  # PolyBench's alpha and beta
    out: Inputs = []
    for shape in case.shapes:
        if not shape:
            out.append(np.float32(next(scalars)))
        elif ones:
            out.append(np.ones((1,) * len(shape), np.float32))
        else:
            out.append(rng.standard_normal(shape, dtype=np.float32))
    return out


def prepare_polyopt(bench: Bench, case: Case, inputs: Inputs, ref: np.ndarray,
                    **compile_kw: Any) -> tuple[Prepared, float | None]:
    """The checked call and the cold-cache seconds to its first result (compile + first
    call; ``compile_seconds`` takes one call off)."""
    settle(bench)
    with scratch_cache(bench.cache_root):
        start = time.perf_counter()
        try:
            kernel = api.compile(case.source, case.kernel, sizes=case.sizes, **compile_kw)
            first = kernel(*inputs)
        except Exception as exc:  # polyopt is a moving target: report and carry on
            log(f"  polyopt {compile_kw or 'default'} failed on {case.op}: "
                f"{describe(exc)}")
            return Prepared(note="ERROR"), None
        elapsed = time.perf_counter() - start
    if not matches(first, ref, case.reduction):
        log(f"  polyopt {compile_kw or 'default'} gives a WRONG result on {case.op}")
        return Prepared(note="WRONG"), None
    return Prepared(lambda: kernel(*inputs)), elapsed


def compile_seconds(first_s: float | None, timing: Timing) -> float | None:
    """Seconds to a first result less one steady-state call."""
    if first_s is None or timing.seconds is None:
        return None
    return max(first_s - timing.seconds, 0.0)


def call_overhead_us(bench: Bench, case: Case) -> float | None:
    """Median time of a default-compiled call with every extent 1, in microseconds."""
    ones = make_inputs(case, np.random.default_rng(0), ones=True)
    settle(bench)
    with scratch_cache(bench.cache_root):
        try:
            kernel = api.compile(kernel_text(case.kernel), case.kernel, sizes=case.params)
            kernel(*ones)
        except Exception as exc:
            log(f"  polyopt failed on 1-element {case.op}: {describe(exc)}")
            return None
    return median_seconds(lambda: kernel(*ones), OVERHEAD_CALLS) * 1e6


def prepare_baseline(bench: Bench, name: str, fn: Callable[[], Any], ref: np.ndarray,
                     case: Case) -> Prepared:
    """``fn`` once, its result checked against ``ref``."""
    settle(bench)
    try:
        out = fn()
    except Exception as exc:
        log(f"  {name} failed on {case.op}: {describe(exc)}")
        return Prepared(note="ERROR")
    if not matches(out, ref, case.reduction):
        log(f"  {name} gives a WRONG result on {case.op}")
        return Prepared(note="WRONG")
    return Prepared(fn)


def prepare_torch(bench: Bench, case: Case, inputs: Inputs, ref: np.ndarray) -> Prepared:
    torch = bench.torch
    if torch is None or case.torch_fn is None:
        return Prepared()
    tensors = [torch.from_numpy(np.asarray(x)) for x in inputs]
    torch_fn = case.torch_fn
    return prepare_baseline(bench, "torch", lambda: torch_fn(*tensors), ref, case)


def configure_omp(bind: bool) -> None:
    """Pin OpenMP threads (before libgomp loads), or say why that may be needed here."""
    if bind:
        os.environ.setdefault("OMP_PROC_BIND", "spread")
        return
    with contextlib.suppress(OSError):
        if "sched_vcpu_pack" in Path("/proc/cmdline").read_text():
            log("note: this kernel packs threads onto one vCPU (sched_vcpu_pack): unpinned OpenMP "
                "threads then wait a 4 ms tick per barrier; consider --omp-bind")


def load_torch() -> Any | None:
    try:
        torch = importlib.import_module("torch")
    except ImportError:
        log("torch is not installed: the torch column is '-'")
        return None
    torch.set_num_threads(2)
    torch.set_grad_enabled(False)  # inference: no autograd bookkeeping in any timed call
    return torch


def warm_up_polyopt(root: Path) -> None:
    """One tiny compile, so one-off costs (imports, compiler probe) miss the first row."""
    with scratch_cache(root):
        api.compile(kernel_text("relu"), "relu")(np.ones((1, 1), np.float32))


