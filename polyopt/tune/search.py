"""Search strategies over a ``Space``: random, genetic (as Tensor Comprehensions) and
model-guided evolution (as Ansor/MetaSchedule: propose many, rank with a cost model, measure
the best few, refit).

A strategy asks ``evaluate(configs)`` for measurements (seconds, inf for a failed one) and
never proposes a configuration twice; the first proposal is always the default.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from polyopt.errors import OptionError
from polyopt.tune.space import Config, Space

Evaluate = Callable[[list[Config]], list[float]]
Features = Callable[[Config], Sequence[float]]  # analytic features of a configuration
STRATEGIES = ("random", "genetic", "model")


def search(space: Space, evaluate: Evaluate, trials: int, strategy: str = "model",
           seed: int = 0, seeds: Sequence[Config] = (),
           features: Features | None = None) -> list[tuple[Config, float]]:
    """Measure up to ``trials`` configurations, the default first, then ``seeds`` (the
    best of earlier searches); every (configuration, seconds) in order."""
    if strategy not in STRATEGIES:
        raise OptionError(f"unknown strategy {strategy!r}; valid: {', '.join(STRATEGIES)}")
    state = _State(space, evaluate, trials, random.Random(seed))
    state.features = features
    state.measure([space.default])
    state.measure(list(seeds))
    {"random": _random, "genetic": _genetic, "model": _model}[strategy](state)
    return state.history


class _State:
    def __init__(self, space: Space, evaluate: Evaluate, trials: int,
                 rng: random.Random) -> None:
        self.space, self.evaluate, self.trials, self.rng = space, evaluate, trials, rng
        self.history: list[tuple[Config, float]] = []
        self.seen: set[str] = set()
        self.features: Features | None = None

    @property
    def left(self) -> int:
        return self.trials - len(self.history)

    def fresh(self, config: Config) -> bool:
        return _key(config) not in self.seen

    def measure(self, configs: Sequence[Config]) -> None:
        batch: list[Config] = []
        for c in configs:
            if self.fresh(c) and len(batch) < self.left:
                self.seen.add(_key(c))
                batch.append(c)
        if batch:
            self.history += list(zip(batch, self.evaluate(batch), strict=True))

    def best(self, k: int) -> list[Config]:
        ranked = sorted(self.history, key=lambda h: h[1])
        return [c for c, t in ranked[:k] if math.isfinite(t)] or [self.space.default]

    def propose(self, n: int, tries: int = 50) -> list[Config]:
        """Up to ``n`` unseen configurations drawn at random."""
        return self.unseen(lambda: self.space.sample(self.rng), n, n * tries)

    def unseen(self, make: Callable[[], Config], n: int, tries: int) -> list[Config]:
        """Up to ``n`` distinct unseen configurations from ``tries`` calls of ``make``."""
        out: dict[str, Config] = {}
        for _ in range(tries):
            c = make()
            if self.fresh(c):
                out.setdefault(_key(c), c)
            if len(out) >= n:
                break
        return list(out.values())


def _key(config: Config) -> str:
    return json.dumps(config, sort_keys=True, default=str)


def _random(state: _State) -> None:
    while state.left > 0:
        batch = state.propose(min(8, state.left))
        if not batch:
            return
        state.measure(batch)


def _genetic(state: _State, population: int = 8) -> None:
    state.measure(state.propose(population - 1))
    while state.left > 0:
        parents = state.best(population)

        def child(parents: list[Config] = parents) -> Config:
            a, b = state.rng.choice(parents), state.rng.choice(parents)
            return state.space.mutate(state.space.crossover(a, b, state.rng), state.rng)
        children = state.unseen(child, min(population, state.left), population * 20)
        if not children:
            return
        state.measure(children)


def _model(state: _State, pool: int = 256, measure: int = 4) -> None:
    state.measure(state.propose(min(7, state.left)))
    while state.left > 0:
        candidates = _candidates(state, pool)
        if not candidates:
            return
        scores = _optimistic(state, candidates)
        ranked = [candidates[i] for i in sorted(range(len(candidates)), key=scores.__getitem__)]
        explore = [state.rng.choice(candidates)]  # one guess the model does not pick
        state.measure(ranked[:measure] + explore)


# Models of the ensemble behind ``_optimistic``, and how many of their standard deviations
# a candidate's predicted log time is lowered by.
ENSEMBLE, KAPPA = 5, 1.0


def _optimistic(state: _State, candidates: list[Config]) -> list[float]:
    """Each candidate's predicted log time, lowered by the models' doubt about it: the
    mean minus ``KAPPA`` standard deviations of ``ENSEMBLE`` cost models, the first fit on
    every measurement and the others on resamples of them (a lower confidence bound, as in
    Bayesian optimization). One model ranked the mutations of the best schedule so far
    first, all alike to it: on a kernel whose default sits apart from the fast schedules (a
    column sum's register tiles) the search stayed around it while random search found
    schedules 1.7x faster."""
    history, n = state.history, len(state.history)
    rng = np.random.default_rng(state.rng.randrange(1 << 32))
    rows = []
    for k in range(ENSEMBLE):
        sample = history if k == 0 else [history[i] for i in rng.integers(0, n, n)]
        model = CostModel.fit(state.space, sample, extra=state.features)
        rows.append(model.predict_many(candidates))
    p = np.array(rows)
    return [float(v) for v in p.mean(axis=0) - KAPPA * p.std(axis=0)]


def _candidates(state: _State, n: int) -> list[Config]:
    parents = state.best(8)

    def make() -> Config:
        if state.rng.random() < 0.7:
            return state.space.mutate(state.rng.choice(parents), state.rng)
        return state.space.sample(state.rng)
    return state.unseen(make, n, n * 4)


LEARNERS = ("auto", "boosted", "ridge")


class CostModel:
    """Log time predicted from a configuration's knob encoding and isl features, refit on
    every measurement so far (failed ones count as twice the slowest).

    ``boosted``: gradient-boosted trees (XGBoost). On a study's 1,400 measured schedules
    (scripts/cost_model_eval.py, 32 for training) they ranked held-out schedules with
    Spearman's rho 0.65-0.78, and their top five held the best to within 0.4-3% on
    the convolutions, against rho 0.47-0.60 and 13-28% for ``ridge``: ridge regression on the
    encoding and its pairwise products (no dependency; the fallback when XGBoost is not
    installed, or with fewer than ``MIN_BOOSTED`` measurements). ``auto``: boosted when it
    can."""

    MIN_BOOSTED = 8

    def __init__(self, space: Space, predict: Callable[[np.ndarray], np.ndarray] | None,
                 extra: Features | None = None, pairs: bool = True) -> None:
        self.space, self.extra, self.pairs = space, extra, pairs
        self._predict = predict

    def inputs(self, config: Config) -> np.ndarray:
        return _inputs(self.space, self.extra, self.pairs, config)

    @classmethod
    def fit(cls, space: Space, history: list[tuple[Config, float]], ridge: float = 1.0,
            extra: Features | None = None, learner: str = "auto") -> CostModel:
        if learner not in LEARNERS:
            raise OptionError(f"unknown learner {learner!r}; valid: {', '.join(LEARNERS)}")
        finite = [t for _, t in history if math.isfinite(t)]
        if len(finite) < 3:
            return cls(space, None, extra)
        worst = 2 * max(finite)
        y = np.log([t if math.isfinite(t) else worst for _, t in history])
        booster = _xgboost() if learner != "ridge" and len(finite) >= cls.MIN_BOOSTED else None
        if learner == "boosted" and booster is None:
            raise OptionError("the boosted cost model needs xgboost (pip install xgboost-cpu) "
                              f"and {cls.MIN_BOOSTED} measurements")
        pairs = booster is None  # trees find the interactions themselves
        x = np.stack([_inputs(space, extra, pairs, c) for c, _ in history])
        predict = _boosted(booster, x, y) if booster else _ridge(x, y, ridge)
        return cls(space, predict, extra, pairs)

    def predict_many(self, configs: Sequence[Config]) -> list[float]:
        if self._predict is None or not configs:
            return [0.0] * len(configs)
        x = np.stack([self.inputs(c) for c in configs])
        return [float(v) for v in self._predict(x)]

    def predict(self, config: Config) -> float:
        return self.predict_many([config])[0]


def _inputs(space: Space, extra: Features | None, pairs: bool, config: Config) -> np.ndarray:
    """The knob encoding and isl features (with their pairwise products for ridge)."""
    x = np.array([*space.encode(config), *(extra(config) if extra else ())], dtype=np.float64)
    if not pairs:
        return x
    return np.concatenate([[1.0], x, np.outer(x, x)[np.triu_indices(len(x))]])


def _ridge(x: np.ndarray, y: np.ndarray, ridge: float) -> Callable[[np.ndarray], np.ndarray]:
    mean = float(y.mean())
    w = np.linalg.solve(x.T @ x + ridge * np.eye(x.shape[1]), x.T @ (y - mean))
    return lambda rows: rows @ w + mean


def _boosted(xgboost: Any, x: np.ndarray, y: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    # Shallow trees, one thread: the tuner's own process must not compete with measurements.
    params = {"max_depth": 3, "eta": 0.1, "nthread": 1, "verbosity": 0, "seed": 0}
    booster = xgboost.train(params, xgboost.DMatrix(x, label=y), num_boost_round=200)
    return lambda rows: booster.predict(xgboost.DMatrix(rows))


def _xgboost() -> Any:
    try:
        import xgboost
    except ImportError:
        return None
    return xgboost
