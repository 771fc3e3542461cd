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
        model = CostModel.fit(state.space, state.history, extra=state.features)
        ranked = sorted(candidates, key=model.predict)
        explore = [state.rng.choice(candidates)]  # one guess the model does not pick
        state.measure(ranked[:measure] + explore)


def _candidates(state: _State, n: int) -> list[Config]:
    parents = state.best(8)

    def make() -> Config:
        if state.rng.random() < 0.7:
            return state.space.mutate(state.rng.choice(parents), state.rng)
        return state.space.sample(state.rng)
    return state.unseen(make, n, n * 4)


class CostModel:
    """Ridge regression of log time on the configuration's features and their pairwise
    products, refit on every measurement so far (failed ones count as twice the slowest)."""

    def __init__(self, space: Space, weights: np.ndarray | None, mean: float,
                 extra: Features | None = None) -> None:
        self.space, self.weights, self.mean, self.extra = space, weights, mean, extra

    @staticmethod
    def features(space: Space, config: Config, extra: Features | None = None) -> np.ndarray:
        x = np.array([*space.encode(config), *(extra(config) if extra else ())],
                     dtype=np.float64)
        pairs = np.outer(x, x)[np.triu_indices(len(x))]
        return np.concatenate([[1.0], x, pairs])

    @classmethod
    def fit(cls, space: Space, history: list[tuple[Config, float]], ridge: float = 1.0,
            extra: Features | None = None) -> CostModel:
        finite = [t for _, t in history if math.isfinite(t)]
        if len(finite) < 3:
            return cls(space, None, 0.0, extra)
        worst = 2 * max(finite)
        y = np.log([t if math.isfinite(t) else worst for _, t in history])
        x = np.stack([cls.features(space, c, extra) for c, _ in history])
        mean = float(y.mean())
        a = x.T @ x + ridge * np.eye(x.shape[1])
        w = np.linalg.solve(a, x.T @ (y - mean))
        return cls(space, w, mean, extra)

    def predict(self, config: Config) -> float:
        if self.weights is None:
            return 0.0
        return float(self.features(self.space, config, self.extra) @ self.weights) + self.mean
