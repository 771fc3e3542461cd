"""Model-guided search (polyopt.tuning.guided) on synthetic tables: where the cost model's
prediction correlates with the truth it finds the best sooner than random search, and it
proposes only from a given pool. Deterministic: no timing, seeded."""

from __future__ import annotations

import math
import random

import pytest

from polyopt.tuning.history import key
from polyopt.tuning.search import search
from polyopt.tuning.space import Config, Space

SPACE = Space("c", (("a", (None, 1, 2, 3, 4, 5, 6, 7)), ("b", (None, 1, 2, 3, 4, 5, 6, 7)),
                    ("c", (None, True, False)), ("d", (None, "x", "y", "z"))))


def _truth(seed: int) -> dict[str, float]:
    """A seeded landscape: each knob value has an effect, plus an interaction and noise."""
    rng = random.Random(seed)
    effect = {(n, v): rng.uniform(0, 1.5) for n, vs in SPACE.knobs for v in vs}
    out = {}
    for c in SPACE.pool(10_000, rng):
        s = sum(effect[n, c[n]] for n, _ in SPACE.knobs)
        s += 0.8 * (c["a"] == c["b"]) + rng.gauss(0, 0.2)
        out[key(c)] = math.exp(s)
    return out


def _run(strategy: str, truth: dict[str, float], seed: int, trials: int,
         noise: float = 0.5) -> list[float]:
    rng = random.Random(1000 + seed)
    # The prediction: log2 of the truth blurred by noise that does not change per call.
    blur = {k: rng.gauss(0, noise) for k in truth}

    def prior(c: Config) -> float:
        return math.log2(truth[key(c)]) + blur[key(c)]

    history = search(SPACE, lambda cs: [truth[key(c)] for c in cs], trials, strategy, seed,
                     prior=prior, features=lambda c: (prior(c),))
    return [t for _, t in history]


def test_the_model_finds_the_best_more_often_than_random_when_the_prior_correlates() -> None:
    found = {"random": 0, "model": 0}
    near = {"random": 0.0, "model": 0.0}
    for seed in range(12):
        truth = _truth(seed)
        best = min(truth.values())
        for strategy in found:
            got = min(_run(strategy, truth, seed, 24))
            found[strategy] += got == best
            near[strategy] += got / best
    assert found["model"] > found["random"]
    assert near["model"] < near["random"]


def test_without_a_prior_the_fitted_model_still_beats_random() -> None:
    wins = 0
    for seed in range(12):
        truth = _truth(seed)
        model = search(SPACE, lambda cs, t=truth: [t[key(c)] for c in cs], 32, "model",
                       seed)
        rand = search(SPACE, lambda cs, t=truth: [t[key(c)] for c in cs], 32, "random",
                      seed)
        wins += min(t for _, t in model) < min(t for _, t in rand)
    assert wins >= 8


@pytest.mark.parametrize("strategy", ["random", "model"])
def test_with_a_pool_only_its_configurations_are_proposed(strategy: str) -> None:
    pool = SPACE.pool(40, random.Random(3))
    allowed = {key(c) for c in pool}
    history = search(SPACE, lambda cs: [1.0 + len(key(c)) % 7 for c in cs], 64, strategy, 5,
                     prior=lambda c: 0.0, pool=pool)
    assert history[0][0] == SPACE.default
    assert len(history) == 40  # the pool, each once
    assert {key(c) for c, _ in history} == allowed


def test_failed_measurements_are_learned_as_slow() -> None:
    def evaluate(cs: list[Config]) -> list[float]:
        return [math.inf if c["c"] is False else 1.0 + (c["a"] or 0) for c in cs]
    history = search(SPACE, evaluate, 30, "model", 0)
    late = [c for c, _ in history[15:]]
    assert sum(c["c"] is False for c in late) <= 4  # exploration only


def test_space_neighbours_and_pool() -> None:
    assert len(SPACE.neighbours(SPACE.default)) == 7 + 7 + 2 + 3
    assert len(SPACE.pool(10_000, random.Random(0))) == 8 * 8 * 3 * 4
    sample = SPACE.pool(50, random.Random(0))
    assert len({key(c) for c in sample}) == 50 and sample[0] == SPACE.default


def test_register_tiles_that_spill_are_proposed_last() -> None:
    """A CPU feature row (footprints, then the prediction) whose accumulators outnumber
    the vector registers marks a tile that spills: the model proposes none while others
    are left, though its prior ranks them first."""
    from polyopt.tuning.features import N_FEATURES
    from polyopt.tuning.guided import ACCUMULATORS

    def row(c: Config) -> tuple[float, ...]:
        out = [0.0] * (N_FEATURES + 1)
        out[ACCUMULATORS] = 2.0 if c["a"] in (5, 6, 7) else 0.5
        return tuple(out)

    pool = SPACE.pool(10_000, random.Random(0))
    fitting = sum(1 for c in pool if c["a"] not in (5, 6, 7))
    for seed in range(3):
        history = search(SPACE, lambda cs: [1.0 + (c["b"] or 0) for c in cs], 64, "model",
                         seed, features=row, prior=lambda c: -float(c["a"] or 0))
        assert fitting > 64 and not any(c["a"] in (5, 6, 7) for c, _ in history)


def test_a_matmul_tile_too_large_for_the_registers_spills() -> None:
    from polyopt.tuning.guided import spills
    from polyopt.tuning.tuner import analytic

    mm = "def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,r_k) * B(r_k,n) }"
    features, _ = analytic(mm, None, {"M": 256, "N": 256, "K": 64})
    assert not spills(features({}))  # the model's own tile fits
    assert spills(features({"mr": 28, "nr": 64}))  # 28 rows of 64 lanes fit no machine's
    assert not spills((0.0, 2.0))  # not a CPU footprint row
