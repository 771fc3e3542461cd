"""A search in progress (``State``): the measurements so far, in order, and what may
still be proposed; shared by the strategies of ``polyopt.tuning.search`` and
``polyopt.tuning.guided``."""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable, Sequence

from polyopt.tuning.model import Features
from polyopt.tuning.space import Config, Space

Evaluate = Callable[[list[Config]], list[float]]
Prior = Callable[[Config], float]  # the pipeline's cost model: predicted log2 cycles


class State:
    """A search in progress: what was measured, in order, and what may still be."""

    def __init__(self, space: Space, evaluate: Evaluate, trials: int, rng: random.Random,
                 pool: Sequence[Config] | None = None) -> None:
        self.space, self.evaluate, self.trials, self.rng = space, evaluate, trials, rng
        self.pool = list(pool) if pool is not None else None
        self.history: list[tuple[Config, float]] = []
        self.seen: set[str] = set()
        self.features: Features | None = None
        self.prior: Prior | None = None

    @property
    def left(self) -> int:
        return self.trials - len(self.history)

    def fresh(self, config: Config) -> bool:
        return key(config) not in self.seen

    def measure(self, configs: Sequence[Config]) -> None:
        batch: list[Config] = []
        for c in configs:
            if self.fresh(c) and len(batch) < self.left:
                self.seen.add(key(c))
                batch.append(c)
        if batch:
            self.history += list(zip(batch, self.evaluate(batch), strict=True))

    def best(self, k: int) -> list[Config]:
        ranked = sorted(self.history, key=lambda h: h[1])
        return [c for c, t in ranked[:k] if math.isfinite(t)] or [self.space.default]

    def propose(self, n: int, tries: int = 50) -> list[Config]:
        """Up to ``n`` unseen configurations drawn at random (from the pool if any)."""
        if self.pool is not None:
            left = [c for c in self.pool if self.fresh(c)]
            return self.rng.sample(left, min(n, len(left)))
        return self.unseen(lambda: self.space.sample(self.rng), n, n * tries)

    def unseen(self, make: Callable[[], Config], n: int, tries: int) -> list[Config]:
        """Up to ``n`` distinct unseen configurations from ``tries`` calls of ``make``."""
        out: dict[str, Config] = {}
        for _ in range(tries):
            c = make()
            if self.fresh(c):
                out.setdefault(key(c), c)
            if len(out) >= n:
                break
        return list(out.values())


def key(config: Config) -> str:
    return json.dumps(config, sort_keys=True, default=str)
