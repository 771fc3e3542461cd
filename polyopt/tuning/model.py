"""The tuner's learned cost model: log time from a configuration's knob encoding and
analytic features (``polyopt.tuning.features``), refit on the measurements of a search."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from polyopt.errors import OptionError
from polyopt.tuning.space import Config, Space

Features = Callable[[Config], Sequence[float]]  # analytic features of a configuration

LEARNERS = ("auto", "boosted", "ridge")


class CostModel:
    """Log time predicted from a configuration's knob encoding and isl features, refit on
    every measurement so far (failed ones count as twice the slowest).

    ``boosted``: gradient-boosted trees (XGBoost). On a study's 1,400 measured schedules
    (scripts/checks/cost_model_eval.py, 32 for training) they ranked held-out schedules with
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
