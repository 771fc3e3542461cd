"""``polyopt.tune``: search a definition's schedule space at given sizes, record every
measurement in the tuning database, and return the best schedule found.

The fastest few schedules of the search and the default one are then timed again, side by
side in one process (``confirm``): the fastest of many noisy measurements is often a lucky
one. The best is the fastest of those, and the database prefers such records.

``polyopt.compile`` then uses the best recorded schedule for its key (definition, shapes,
dtypes, target, machine, version) when there is one (``polyopt.tuning.replay``); a search at
a new shape starts from the best schedules of the nearest tuned shapes.
"""

from __future__ import annotations

import functools
import math
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from polyopt import lang
from polyopt.errors import OptionError
from polyopt.runtime.cuda import device_model
from polyopt.tuning.db import Database, Record
from polyopt.tuning.features import Footprints, Predicted
from polyopt.tuning.key import Key
from polyopt.tuning.lookup import make_key, open_database
from polyopt.tuning.measure import Confirm, Job, Result, Runner, prepare
from polyopt.tuning.search import STRATEGIES, Features, Prior, search
from polyopt.tuning.space import Config, Space, space_for


@dataclass(frozen=True)
class Trial:
    config: Config
    options: dict[str, Any]
    result: Result


@dataclass(frozen=True)
class TuneResult:
    """What a search found: the best schedule (replayable JSON) and how it compares."""

    key: Key
    space: Space
    trials: tuple[Trial, ...]
    wall_s: float
    confirmed: tuple[tuple[int, Result], ...] = ()  # (trial index, its confirmation)

    @property
    def best(self) -> Trial:
        """The fastest trial: of the confirmed ones when there are any."""
        return self.trials[self._best_index]

    @property
    def best_time(self) -> float:
        return self._time(self._best_index)

    @property
    def default_time(self) -> float:
        return self._time(0)

    @property
    def _best_index(self) -> int:
        times = {i: r.best for i, r in self.confirmed if r.status == "ok"}
        if not times:
            times = {i: t.result.best for i, t in enumerate(self.trials)}
        return min(times, key=lambda i: (times[i], i))

    def _time(self, i: int) -> float:
        """Trial ``i``'s time: its confirmation's when both it and the best have one (taken
        in the same process, they compare fairly), else its own measurement."""
        confirmed = {j: r for j, r in self.confirmed if r.status == "ok"}
        if i in confirmed and self._best_index in confirmed:
            return confirmed[i].best
        return self.trials[i].result.best

    @property
    def schedule(self) -> str:
        return self.best.result.schedule

    @property
    def speedup(self) -> float:
        return self.default_time / self.best_time if self.best_time > 0 else math.nan

    def __str__(self) -> str:
        ok = sum(1 for t in self.trials if t.result.status == "ok")
        return (f"{self.key.def_name}: best {self.best_time * 1e3:.4g} ms "
                f"(default {self.default_time * 1e3:.4g} ms, {self.speedup:.2f}x) after "
                f"{len(self.trials)} trials ({ok} ok) in {self.wall_s:.1f} s; best options "
                f"{self.best.options}")


def tune(source: str | lang.Definition, name: str | None = None, *, sizes: Mapping[str, int],
         target: str = "c", trials: int = 64, strategy: str = "model",
         db: str | Database | bool | None = None, executor: Any = None, seed: int = 0,
         repeat: int = 5, timeout: float = 120.0,
         progress: Callable[[int, int, Trial], None] | None = None) -> TuneResult:
    """Search the schedule space of def ``name`` at ``sizes`` with ``trials`` measurements.

    ``strategy``: "random", "genetic" or "model" (``polyopt.tuning.guided``: the pipeline's
    predicted cycles rank the space first, then a model fit on the measurements, with local
    moves from the fastest so far and random picks). ``db``: a path
    or ``Database`` (default: the user's tuning database; False: record nothing).
    ``executor``: where to measure (default: a worker process here; a
    ``dask.distributed.Client`` measures on its cluster).
    """
    if strategy not in STRATEGIES or trials < 1:
        raise OptionError(f"tune: strategy must be one of {', '.join(STRATEGIES)} and trials "
                          f">= 1, not {strategy!r} and {trials!r}")
    start = time.perf_counter()
    definition = lang.define(source, name)  # parsed once, here
    source, name = definition.source, definition.name  # what workers compile
    key = make_key(definition, None, sizes, target)
    space = space_for(definition, None, sizes, target)
    database = open_database(db)
    data = prepare(definition, None, sizes, seed)
    done: list[Trial] = []
    seeds = _seeds(database, key, space)

    def evaluate(configs: list[Config]) -> list[float]:
        out = []
        jobs = [Job(source, name, tuple(sorted(sizes.items())), target, space.options(c),
                    data, repeat) for c in configs]
        for config, job, result in zip(configs, jobs, runner.map(jobs), strict=True):
            options = dict(job.options)
            trial = Trial(config, options, result)
            done.append(trial)
            if database is not None:
                database.add(Record(key, trial.result.schedule, trial.result.times,
                                    trial.result.status, options, trial.result.error, source))
            if progress is not None:
                progress(len(done), trials, trial)
            out.append(trial.result.best)
        return out

    features, prior = analytic(definition, None, sizes, target)
    try:
        with Runner(timeout, executor) as runner:
            search(space, evaluate, trials, strategy, seed, seeds, features, prior=prior)
            confirmed = _confirm(runner, done, source, name, sizes, target, data, repeat)
    finally:  # the inputs and reference (tens of MB for a large kernel) are scratch
        shutil.rmtree(Path(data).parent, ignore_errors=True)
    if database is not None:
        for i, result in confirmed:
            if result.status == "ok":
                database.add(Record(key, result.schedule, result.times, "confirmed",
                                    done[i].options, "", source))
    return TuneResult(key, space, tuple(done), time.perf_counter() - start, tuple(confirmed))


# The fastest few distinct schedules (and the default) are timed again, side by side.
CONFIRM_TOP = 4


def _confirm(runner: Runner, done: list[Trial], source: str, name: str | None,
             sizes: Mapping[str, int], target: str, data: str,
             repeat: int) -> list[tuple[int, Result]]:
    """Time the ``CONFIRM_TOP`` fastest distinct schedules and the default again, in one
    process, interleaved; nothing when fewer than two schedules ran."""
    ranked = sorted((i for i, t in enumerate(done) if t.result.status == "ok"),
                    key=lambda i: done[i].result.best)
    picked: dict[str, int] = {}  # schedule -> its first trial: the default, then the fastest
    for i in [0, *ranked] if ranked and done[0].result.status == "ok" else ranked:
        if len(picked) > CONFIRM_TOP:
            break
        picked.setdefault(done[i].result.schedule, i)
    if len(picked) < 2:
        return []
    chosen = sorted(picked.values())
    jobs = tuple(Job(source, name, tuple(sorted(sizes.items())), target, done[i].options, data,
                     repeat) for i in chosen)
    return list(zip(chosen, runner.confirm(Confirm(jobs)), strict=True))


def analytic(source: str | lang.Definition, name: str | None, sizes: Mapping[str, int],
             target: str = "c") -> tuple[Features, Prior | None]:
    """What the search knows of a configuration before measuring it: its features (isl
    footprints of its tiles, when the definition has a contraction to tile, and on the CPU
    the pipeline's own cost model's predicted cycles of its schedule; on ``cuda``, against
    the device's GPU model, the named default without one) and, on the CPU, that prediction
    alone (log2 cycles), the model-guided search's prior."""
    definition = lang.define(source, name)
    gpu = device_model() if target == "cuda" else None
    fp = Footprints(definition, None, sizes, gpu=gpu)
    predicted = None if target.startswith("cuda") else Predicted(definition, None, sizes)
    features = functools.partial(_feature_row, fp if fp.stmt is not None else None, predicted)
    return features, (predicted.of if predicted is not None else None)


def _feature_row(fp: Footprints | None, predicted: Predicted | None,
                 config: Config) -> tuple[float, ...]:
    return (*(fp.of(config) if fp else ()), *((predicted.of(config),) if predicted else ()))


def _seeds(database: Database | None, key: Key, space: Space) -> list[Config]:
    """Configurations of the best schedules at the nearest tuned shapes (and this one)."""
    if database is None:
        return []
    records = [r for r in [database.best(key)] if r is not None] + database.nearest(key)
    seeds = []
    for r in records:
        try:
            seeds.append(config_of(space, r.options))
        except (TypeError, ValueError, AttributeError):  # options of no configuration
            continue
    return seeds


def config_of(space: Space, options: Mapping[str, Any]) -> Config:
    """The configuration whose options are ``options`` (inverse of ``Space.options``)."""
    config = space.default
    if space.target.startswith("cuda"):
        for k, v in dict(options.get("gpu", {})).items():
            config[f"gpu_{k}"] = tuple(v) if isinstance(v, list) else v
    else:
        config.update(dict(options.get("knobs", {})))
        if "fusion" in config:
            config["fusion"] = options.get("fusion", "smart")
    known = dict(space.knobs)
    return {k: v for k, v in config.items() if k in known}
