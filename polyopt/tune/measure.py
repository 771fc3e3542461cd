"""Measuring candidates, each in a worker process: a crash, a hang or a wrong result costs
that candidate only.

The parent draws the inputs once and computes the float64 reference once (the interpreter,
``polyopt.runtime.interp``), writes both to a scratch ``.npz``, and hands workers its path.
A worker compiles the candidate (the kernel cache makes a recompile cheap), checks every
output against the reference (relative L2 error), then times ``repeat`` calls. Workers are
fresh processes here, or whatever runs the jobs of an executor with ``submit`` (a
``dask.distributed.Client``).
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import io
import os
import pickle
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from polyopt import dtypes, ir, lang

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


def prepare(source: str, name: str | None, sizes: Mapping[str, int], seed: int = 0,
            directory: str | None = None) -> str:
    """Draw inputs, compute the float64 reference, save both; the ``.npz`` path."""
    from polyopt.runtime.interp import evaluate

    program = lang.build_program(source, name, sizes)
    rng = np.random.default_rng(seed)
    inputs = [_random(t, rng) for t in program.inputs]
    ref = evaluate(program, inputs, {})
    path = Path(tempfile.mkdtemp(prefix="polyopt-tune-", dir=directory)) / "data.npz"
    arrays: dict[str, Any] = {f"in{i}": a for i, a in enumerate(inputs)}
    arrays.update({f"ref{i}": r for i, r in enumerate(ref)})
    np.savez(path, **arrays)
    return str(path)


def _random(t: ir.Tensor, rng: np.random.Generator) -> np.ndarray:
    shape = tuple(ir.extent_value(e, {}) for e in t.shape)
    d = dtypes.DTYPES[t.dtype]
    if d.is_float:
        return rng.standard_normal(shape).astype(d.np)
    return rng.integers(0, 2, shape).astype(d.np)


def run(job: Job) -> Result:
    """Compile, check and time one candidate (in a worker process)."""
    import polyopt

    try:
        start = time.perf_counter()
        kernel = polyopt.compile(job.source, job.name, target=job.target,
                                 sizes=dict(job.sizes), options=_candidate(job.options))
        with _load(job.data) as data:
            inputs = [data[f"in{i}"] for i in range(len(kernel.program.inputs))]
            refs = [data[f"ref{i}"] for i in range(len(kernel.program.outputs))]
        got = kernel(*inputs)
        compile_s = time.perf_counter() - start
        schedule = kernel.schedule.as_json()
        got = got if isinstance(got, tuple) else (got,)
        worst = max((_error(g, r) for g, r in zip(got, refs, strict=True)), default=0.0)
        if not worst <= TOLERANCE:
            return Result("wrong", error=f"relative L2 error {worst:.3g}", schedule=schedule)
        # The first calls after the check ran 2-3x slow (OpenMP's threads waking up):
        # let them settle before timing.
        time.sleep(SETTLE_S)
        kernel(*inputs)
        times = []
        for _ in range(max(1, job.repeat)):
            t0 = time.perf_counter()
            kernel(*inputs)
            times.append(time.perf_counter() - t0)
        return Result("ok", tuple(times), schedule=schedule, compile_s=compile_s)
    except Exception as e:  # a candidate's failure is its result, never the tuner's
        return Result("error", error=f"{type(e).__name__}: {e}\n{traceback.format_exc(-3)}")


def build(job: Job) -> None:
    """Compile one candidate and run it once (untimed): fills the kernel cache."""
    import polyopt

    kernel = polyopt.compile(job.source, job.name, target=job.target,
                             sizes=dict(job.sizes), options=_candidate(job.options))
    with _load(job.data) as data:
        kernel(*[data[f"in{i}"] for i in range(len(kernel.program.inputs))])


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
    """Runs each job in a fresh worker process (``python -m polyopt.tune.worker``): a crash
    or a hang costs that candidate only, and no state (an OpenMP pool, a loaded library)
    leaks between candidates. ``executor``: run them there instead (e.g. on Dask)."""

    def __init__(self, timeout: float = 120.0, executor: Any = None) -> None:
        self.timeout = timeout
        self.executor = executor
        self._dir = tempfile.TemporaryDirectory(prefix="polyopt-tune-jobs-")

    def measure(self, job: Job) -> Result:
        if self.executor is not None:
            return self._remote(job)
        src, dst = Path(self._dir.name) / "job.pkl", Path(self._dir.name) / "result.pkl"
        dst.unlink(missing_ok=True)
        src.write_bytes(pickle.dumps(job))
        argv = [sys.executable, "-m", "polyopt.tune.worker", str(src), str(dst)]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=self.timeout,
                                  check=False)
        except subprocess.TimeoutExpired:
            return Result("timeout", error=f"no result within {self.timeout:g} s")
        if not dst.is_file():
            tail = (proc.stderr or proc.stdout).strip()[-2000:]
            return Result("error", error=f"the worker process died (exit {proc.returncode}): "
                                         f"{tail}")
        return pickle.loads(dst.read_bytes())  # type: ignore[no-any-return]

    def map(self, jobs: Sequence[Job]) -> list[Result]:
        """Build every job's kernel in parallel processes (one per core: the C compiler
        and isl run concurrently, and fill the kernel cache), then measure them one at a
        time (measurements must not share the cores)."""
        if self.executor is None and len(jobs) > 1:
            self._build_all(jobs)
        return [self.measure(j) for j in jobs]

    def _build_all(self, jobs: Sequence[Job]) -> None:
        def build(i: int) -> None:
            path = Path(self._dir.name) / f"build{i}.pkl"
            path.write_bytes(pickle.dumps(jobs[i]))
            with contextlib.suppress(subprocess.TimeoutExpired):  # measure() reports it
                subprocess.run([sys.executable, "-m", "polyopt.tune.worker", "--build",
                                str(path)], capture_output=True, timeout=self.timeout,
                               check=False)

        workers = max(1, min(len(jobs), os.cpu_count() or 1))
        with cf.ThreadPoolExecutor(workers) as pool:
            list(pool.map(build, range(len(jobs))))

    def _remote(self, job: Job) -> Result:
        if isinstance(job.data, str):  # the workers may be other machines: send the data
            job = replace(job, data=Path(job.data).read_bytes())
        future = self.executor.submit(run, job, pure=False) if _is_dask(self.executor) \
            else self.executor.submit(run, job)
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


def _is_dask(executor: Any) -> bool:
    return type(executor).__module__.startswith("distributed")
