"""Measuring candidates, each in a worker process: a crash, a hang or a wrong result costs
that candidate only.

The parent draws the inputs once and computes the float64 reference once (``reference``),
writes both to a scratch ``.npz``, and hands workers its path. The workers of a batch compile
their candidates at once, then, in turn, check every output against the reference (relative
L2 error) and time ``repeat`` calls. Workers are fresh processes here, or whatever runs the
jobs of an executor with ``submit`` (a ``dask.distributed.Client``).
"""

from __future__ import annotations

import contextlib
import io
import os
import pickle
import selectors
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from polyopt import api, dtypes, ir, lang
from polyopt.costmodel.machine import ENV_VAR, host
from polyopt.errors import PolyoptError
from polyopt.lang.lexer import widen_floats
from polyopt.runtime.interp import evaluate

TOLERANCE = 1e-4  # relative L2 error against the float64 reference
SETTLE_S = 0.2  # pause between the checked call and the timed ones


@dataclass(frozen=True)
class Job:
    source: str
    name: str | None
    sizes: tuple[tuple[str, int], ...]
    target: str
    options: Mapping[str, Any]
    data: str | bytes  # .npz with in0.., ref0.. (its path, or its bytes for other machines)
    repeat: int = 5


@dataclass(frozen=True)
class Confirm:
    """Time several measured candidates again in one process, interleaved: a candidate's
    best of a few calls in its own process is a noisy sample, and the fastest of many such
    samples is too often a lucky one (the winner's curse)."""

    jobs: tuple[Job, ...]
    rounds: int = 3


@dataclass(frozen=True)
class Result:
    status: str  # "ok" | "wrong" | "error" | "timeout"
    times: tuple[float, ...] = ()
    error: str = ""
    schedule: str = ""  # the measured schedule as replayable JSON
    compile_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def best(self) -> float:
        return min(self.times) if self.status == "ok" and self.times else float("inf")


def prepare(source: str | lang.Definition, name: str | None, sizes: Mapping[str, int],
            seed: int = 0, directory: str | None = None) -> str:
    """Draw inputs, compute the float64 reference, save both; the ``.npz`` path."""
    definition = lang.define(source, name)
    program = lang.build_program(definition, sizes=sizes)
    rng = np.random.default_rng(seed)
    inputs = [_random(t, rng) for t in program.inputs]
    ref = reference(definition.source, definition.name, sizes, inputs)
    path = Path(tempfile.mkdtemp(prefix="polyopt-tune-", dir=directory)) / "data.npz"
    arrays: dict[str, Any] = {f"in{i}": a for i, a in enumerate(inputs)}
    arrays.update({f"ref{i}": r for i, r in enumerate(ref)})
    np.savez(path, **arrays)
    return str(path)


def reference(source: str, name: str | None, sizes: Mapping[str, int],
              inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The outputs in float64: the definition retyped to float64, compiled in program order
    (none of the transformations under test; ~100x faster than the interpreter, which takes
    a minute for one ResNet layer), or the interpreter when that cannot be compiled."""
    try:
        kernel = api.compile(widen_floats(source), name, sizes=dict(sizes),
                                 schedule="program-order", options={"tuned": False})
        wide = [a.astype(np.float64) if a.dtype.kind == "f" else a for a in inputs]
        got = kernel(*wide)
        return [np.asarray(g) for g in (got if isinstance(got, tuple) else (got,))]
    except PolyoptError:
        return evaluate(lang.build_program(source, name, sizes), inputs, {})


def _random(t: ir.Tensor, rng: np.random.Generator) -> np.ndarray:
    shape = tuple(ir.extent_value(e, {}) for e in t.shape)
    d = dtypes.DTYPES[t.dtype]
    if d.is_float:
        return rng.standard_normal(shape).astype(d.np)
    return rng.integers(0, 2, shape).astype(d.np)


def run(job: Job, ready: Callable[[], None] | None = None) -> Result:
    """Compile, check and time one candidate (in a worker process). ``ready``: called once
    the candidate is compiled, to wait there until the cores are free for timing."""
    try:
        kernel, inputs, refs, got, compile_s = _compile(job)
    except Exception as e:  # a candidate's failure is its result, never the tuner's
        return _failure(e)
    if ready is not None:
        ready()
    try:
        schedule = kernel.schedule.as_json()
        worst = max((_error(g, r) for g, r in zip(got, refs, strict=True)), default=0.0)
        if not worst <= TOLERANCE:
            return Result("wrong", error=f"relative L2 error {worst:.3g}", schedule=schedule)
        # The first calls after a pause ran 2-3x slow (OpenMP's threads waking up): one
        # untimed call after a settling pause before timing.
        time.sleep(SETTLE_S)
        kernel(*inputs)
        times = []
        for _ in range(max(1, job.repeat)):
            t0 = time.perf_counter()
            kernel(*inputs)
            times.append(time.perf_counter() - t0)
        return Result("ok", tuple(times), schedule=schedule, compile_s=compile_s)
    except Exception as e:
        return _failure(e)


def confirm(task: Confirm, ready: Callable[[], None] | None = None) -> list[Result]:
    """Compile every candidate of ``task``, then time them in turn, ``rounds`` times (each
    ``repeat`` calls after an untimed one): their times are comparable, taken alike."""
    built: list[Any] = []
    for job in task.jobs:
        try:
            kernel, inputs, refs, got, _ = _compile(job)
            worst = max((_error(g, r) for g, r in zip(got, refs, strict=True)), default=0.0)
            built.append((kernel, inputs) if worst <= TOLERANCE else
                         Result("wrong", error=f"relative L2 error {worst:.3g}"))
        except Exception as e:
            built.append(_failure(e))
    if ready is not None:
        ready()
    times: list[list[float]] = [[] for _ in built]
    time.sleep(SETTLE_S)
    for _ in range(max(1, task.rounds)):
        for b, samples, job in zip(built, times, task.jobs, strict=True):
            if isinstance(b, Result):
                continue
            kernel, inputs = b
            kernel(*inputs)
            for _ in range(max(1, job.repeat)):
                t0 = time.perf_counter()
                kernel(*inputs)
                samples.append(time.perf_counter() - t0)
    return [b if isinstance(b, Result) else Result("ok", tuple(s), schedule=b[0].schedule.as_json())
            for b, s in zip(built, times, strict=True)]


def _compile(job: Job) -> tuple[Any, list[np.ndarray], list[np.ndarray], tuple[Any, ...],
                                float]:
    """The kernel, its inputs and references, and its outputs: the first call builds and
    loads the library, so the checked result comes out of the parallel compile phase."""
    start = time.perf_counter()
    kernel = api.compile(job.source, job.name, target=job.target,
                             sizes=dict(job.sizes), options=_candidate(job.options))
    with _load(job.data) as data:
        inputs = [data[f"in{i}"] for i in range(len(kernel.program.inputs))]
        refs = [data[f"ref{i}"] for i in range(len(kernel.program.outputs))]
    got = kernel(*inputs)
    return (kernel, inputs, refs, got if isinstance(got, tuple) else (got,),
            time.perf_counter() - start)


def _failure(e: Exception) -> Result:
    return Result("error", error=f"{type(e).__name__}: {e}\n{traceback.format_exc(-3)}")


def _candidate(options: Mapping[str, Any]) -> dict[str, Any]:
    """A candidate's options: never the database's best schedule instead of its own."""
    return {**options, "tuned": False}


def _load(data: str | bytes) -> Any:
    return np.load(io.BytesIO(data) if isinstance(data, bytes) else data)


def _error(got: Any, ref: np.ndarray) -> float:
    g = np.asarray(got, np.float64)
    if g.shape != ref.shape:
        return float("inf")
    return float(np.linalg.norm(g - ref) / max(float(np.linalg.norm(ref)), 1e-30))


class Runner:
    """Runs each job in a fresh worker process (``python -m polyopt.tuning.worker``): a crash
    or a hang costs that candidate only, and no state (an OpenMP pool, a loaded library)
    leaks between candidates. ``executor``: run them there instead (e.g. on Dask)."""

    def __init__(self, timeout: float = 120.0, executor: Any = None) -> None:
        self.timeout = timeout
        self.executor = executor
        self._dir = tempfile.TemporaryDirectory(prefix="polyopt-tune-jobs-")

    def measure(self, job: Job) -> Result:
        return self.map([job])[0]

    def map(self, jobs: Sequence[Job]) -> list[Result]:
        """Start a worker per job: all compile at once (the C compiler and isl use every
        core), then, once every one is built, each in turn checks and times its candidate
        while the others wait (measurements must not share the cores)."""
        if self.executor is not None:
            return [self._remote(j) for j in jobs]
        workers = [_Worker(j, Path(self._dir.name), i) for i, j in enumerate(jobs)]
        try:
            deadline = time.monotonic() + self.timeout
            failed = [w.wait_built(deadline) for w in workers]
            return [f or w.finish(self.timeout) for w, f in zip(workers, failed, strict=True)]
        finally:
            for w in workers:
                w.kill()

    def confirm(self, task: Confirm) -> list[Result]:
        """``confirm(task)`` in one worker process (or one task of the executor)."""
        if self.executor is not None:
            out = self._remote(task)
            return out if isinstance(out, list) else [out] * len(task.jobs)
        worker = _Worker(task, Path(self._dir.name), -1)
        try:
            deadline = time.monotonic() + self.timeout * len(task.jobs)
            out = worker.wait_built(deadline) or worker.finish(self.timeout)
        finally:
            worker.kill()
        return out if isinstance(out, list) else [out] * len(task.jobs)

    def _remote(self, job: Job | Confirm) -> Any:
        fn: Callable[..., Any] = confirm if isinstance(job, Confirm) else run
        job = _shipped(job)
        future = self.executor.submit(fn, job, pure=False) if _is_dask(self.executor) \
            else self.executor.submit(fn, job)
        try:
            return future.result(timeout=self.timeout)  # type: ignore[no-any-return]
        except Exception as e:  # a lost worker or a timeout: that candidate fails
            return Result("error", error=f"remote measurement failed: {type(e).__name__}: {e}")

    def close(self) -> None:
        self._dir.cleanup()

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Worker:
    """One worker process. It says "built" on its stdout once compiled, then waits for a
    line on its stdin before it checks and times, and leaves its ``Result`` in a file."""

    def __init__(self, job: Job | Confirm, directory: Path, i: int) -> None:
        src, self.dst = directory / f"job{i}.pkl", directory / f"result{i}.pkl"
        self.dst.unlink(missing_ok=True)
        src.write_bytes(pickle.dumps(job))
        self.log = directory / f"log{i}.txt"
        with self.log.open("w") as log:
            # The worker schedules for this process's machine model, not for what it reads
            # itself: it inherits the starting thread's CPU affinity, one CPU once OpenMP
            # pinned that thread (OMP_PROC_BIND), and its default schedules would differ.
            env = {**os.environ, ENV_VAR: host().spec()}
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "polyopt.tuning.worker", str(src), str(self.dst)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True, env=env)

    def wait_built(self, deadline: float) -> Result | None:
        """None once the candidate is built; else why it failed (a compile error, a crash or
        no word before ``deadline``)."""
        assert self.proc.stdout is not None
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            if not sel.select(max(0.0, deadline - time.monotonic())):
                return Result("timeout", error="not compiled within the time limit")
        if self.proc.stdout.readline().strip() == "built":
            return None
        return self._outcome()

    def finish(self, timeout: float) -> Any:
        assert self.proc.stdin is not None
        with contextlib.suppress(OSError):
            self.proc.stdin.write("go\n")
            self.proc.stdin.flush()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return Result("timeout", error=f"no result within {timeout:g} s")
        return self._outcome()

    def _outcome(self) -> Any:
        self.proc.wait()
        if self.dst.is_file():
            return pickle.loads(self.dst.read_bytes())
        tail = self.log.read_text(errors="replace").strip()[-2000:]
        return Result("error", error=f"the worker process died (exit {self.proc.returncode}): "
                                     f"{tail}")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout):
            if f is not None:
                f.close()


def _shipped(job: Any) -> Any:
    """``job`` with its data inlined: the workers may be other machines."""
    if isinstance(job, Confirm):
        return replace(job, jobs=tuple(_shipped(j) for j in job.jobs))
    if isinstance(job.data, str):
        return replace(job, data=Path(job.data).read_bytes())
    return job


def _is_dask(executor: Any) -> bool:
    return type(executor).__module__.startswith("distributed")
