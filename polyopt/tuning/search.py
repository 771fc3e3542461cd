"""Search strategies over a ``Space``: random, genetic (as Tensor Comprehensions) and
model-guided (``polyopt.tuning.guided``: the pipeline's cost model ranks the candidates
first, then a model fit on the measurements, with local moves from the best so far and
random picks for exploration).

A strategy asks ``evaluate(configs)`` for measurements (seconds, inf for a failed one) and
never proposes a configuration twice; the first proposal is always the default. With a
``pool`` (a fixed list of configurations, such as a measured table's), random and
model-guided search propose only from it.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from polyopt.errors import OptionError
from polyopt.tuning import guided
from polyopt.tuning.history import Evaluate, Prior, State
from polyopt.tuning.model import CostModel, Features
from polyopt.tuning.space import Config, Space

__all__ = ["STRATEGIES", "CostModel", "Evaluate", "Features", "Prior", "search"]
STRATEGIES = ("random", "genetic", "model")


def search(space: Space, evaluate: Evaluate, trials: int, strategy: str = "model",
           seed: int = 0, seeds: Sequence[Config] = (),
           features: Features | None = None, prior: Prior | None = None,
           pool: Sequence[Config] | None = None) -> list[tuple[Config, float]]:
    """Measure up to ``trials`` configurations, the default first, then ``seeds`` (the
    best of earlier searches); every (configuration, seconds) in order. ``features`` and
    ``prior`` (the pipeline's predicted log2 cycles) guide the model strategy."""
    if strategy not in STRATEGIES:
        raise OptionError(f"unknown strategy {strategy!r}; valid: {', '.join(STRATEGIES)}")
    state = State(space, evaluate, trials, random.Random(seed), pool)
    state.features, state.prior = features, prior
    state.measure([space.default])
    state.measure(list(seeds))
    {"random": _random, "genetic": _genetic, "model": guided.run}[strategy](state)
    return state.history


def _random(state: State) -> None:
    while state.left > 0:
        batch = state.propose(min(8, state.left))
        if not batch:
            return
        state.measure(batch)


def _genetic(state: State, population: int = 8) -> None:
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
