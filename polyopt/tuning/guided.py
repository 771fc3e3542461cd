"""Model-guided search: rank a pool of candidates (the whole space when small, else a
large uniform sample) and measure the best-ranked first.

Before there is enough to learn from, the rank is the prior: the cycles the pipeline's
cost model (``polyopt.costmodel.cost``) predicts for a configuration's schedule (it does not
see the register tile: ties are broken at random). Then a ridge model of log time on the
configuration's knobs (one-hot) and analytic features, the prediction among them, refit on
every measurement. Each batch takes the best-ranked candidates of the pool, the
best-ranked local move from the fastest so far (one knob changed; in a fixed pool, the
nearest candidates) and one random candidate (exploration: the models can be wrong).

Candidates whose register tile needs more accumulators than the machine has vector
registers are proposed only when no other is left, by every pick: the accumulators spill.
On the measured tables of ``scripts/studies/search_vs_random.py`` such tiles ran at a median of
55-82x the table's best on the large products (attn_pv, bmm, mm_square, mm_odd, linear),
9x on mm_skinny_k and 3-18x on the convolutions, and about 40% of a uniform sample of a
product's space is such a tile; neither the prior (it leaves the register tile at the
model's) nor a fit on a few measurements sees it. The flag reads the knobs, not the
schedule built: where the pipeline does not apply a tile as asked, a flagged configuration
may run well (conv_7x7_s2's second best, 1.03x the best, is one), and it is tried last.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from polyopt.tuning.features import ACCUMULATORS, N_FEATURES
from polyopt.tuning.history import State, key
from polyopt.tuning.space import Config, Space

POOL = 1024  # candidates ranked when the space is larger
MIN_FIT = 6  # finite measurements before the fitted model replaces the prior
GLOBAL, LOCAL, EXPLORE = 2, 1, 1  # picks per batch
RIDGE = 1.0

Score = Callable[[Sequence[Config]], np.ndarray]


def run(state: State) -> None:
    pool = state.pool if state.pool is not None else state.space.pool(POOL, state.rng)
    while state.left > 0:
        batch = _batch(state, pool)
        if not batch:
            return
        state.measure(batch)


def _batch(state: State, pool: list[Config]) -> list[Config]:
    fresh = [c for c in pool if state.fresh(c)]
    unseen = _unspilled(state, fresh)
    spill_ok = len(unseen) == len(fresh)  # nothing filtered, or nothing else left
    local = [c for c in _local(state, unseen) if state.fresh(c)
             and (spill_ok or not _spills(state, c))]
    if not unseen and not local:
        return []
    score = _scorer(state)
    out: dict[str, Config] = {}
    for cands, n in ((unseen, GLOBAL), (local, LOCAL)):
        if cands:
            s = score(cands)
            for i in np.argsort(s, kind="stable")[:n]:
                out.setdefault(key(cands[i]), cands[i])
    rest = [c for c in unseen if key(c) not in out]
    for c in state.rng.sample(rest, min(EXPLORE, len(rest))):
        out.setdefault(key(c), c)
    return list(out.values())


def _unspilled(state: State, configs: list[Config]) -> list[Config]:
    """``configs`` less those whose accumulators outnumber the vector registers, unless
    that leaves none."""
    kept = [c for c in configs if not _spills(state, c)]
    return kept or configs


def _spills(state: State, config: Config) -> bool:
    return state.features is not None and spills(state.features(config))


def spills(row: Sequence[float]) -> bool:
    """Does the register tile of a configuration with these features need more
    accumulators than there are vector registers? Known from a CPU row (``Footprints``'
    features, then the predicted cycles) only.

    Deliberately not the features' budget flag (accumulators plus a vector per column plus
    a broadcast): the compiler folds the broadcast into the FMA's memory operand and
    reloads column vectors: tiles between the two rules (4-10 per search table) run at a
    median 1.2-2x the table's best on nine of the ten tables (conv_7x7_s2: 7x), like tiles
    within the budget, while tiles whose accumulators alone overflow run at a median
    4-85x. Only those are deferred."""
    return len(row) == N_FEATURES + 1 and row[ACCUMULATORS] > 1.0


def _local(state: State, pool: list[Config]) -> list[Config]:
    """Moves from the fastest configuration so far: one knob changed, or in a fixed pool
    the candidates of ``pool`` (its unseen ones) nearest to it (fewest knobs changed)."""
    best = state.best(1)[0]
    if state.pool is None:
        return state.space.neighbours(best)
    dist = [sum(c.get(k) != v for k, v in best.items()) for c in pool]
    near = min((d for d, c in zip(dist, pool, strict=True) if d > 0 and state.fresh(c)),
               default=None)
    return [c for d, c in zip(dist, pool, strict=True) if d == near]


def _scorer(state: State) -> Score:
    finite = [t for _, t in state.history if math.isfinite(t)]
    if len(finite) >= MIN_FIT:
        return _fitted(state)
    return _prior(state)


def _prior(state: State) -> Score:
    """The predicted log2 cycles, ties broken at random. (Breaking them toward fewer knobs
    moved off the model's choice kept the first picks near a mediocre default on the
    products' tables of scripts/studies/search_vs_random.py: attn_pv's median best at 8 trials
    1.83x the table's best, against 1.41x.)"""
    prior = state.prior
    jitter = state.rng.random

    def score(configs: Sequence[Config]) -> np.ndarray:
        return np.array([(prior(c) if prior else 0.0) + 1e-6 * jitter() for c in configs])
    return score


def _fitted(state: State) -> Score:
    """Ridge regression of log time on the inputs, fit on the measurements (a failed one
    counts as twice the slowest)."""
    finite = [t for _, t in state.history if math.isfinite(t)]
    worst = 2 * max(finite)
    y = np.log([t if math.isfinite(t) else worst for _, t in state.history])
    x = np.stack([_inputs(state, c) for c, _ in state.history])
    mu, sd = x.mean(axis=0), x.std(axis=0)
    sd[sd == 0] = 1.0
    z = (x - mu) / sd
    w = np.linalg.solve(z.T @ z + RIDGE * np.eye(z.shape[1]), z.T @ (y - y.mean()))
    mean = float(y.mean())

    def score(configs: Sequence[Config]) -> np.ndarray:
        rows = np.stack([_inputs(state, c) for c in configs])
        return ((rows - mu) / sd) @ w + mean
    return score


def _inputs(state: State, config: Config) -> np.ndarray:
    """One-hot knob values and the analytic features (the prior among them; alone when
    there are none)."""
    row = _one_hot(state.space, config)
    if state.features is not None:
        row += [float(v) for v in state.features(config)]
    elif state.prior is not None:
        row.append(state.prior(config))
    return np.array(row, dtype=np.float64)


def _one_hot(space: Space, config: Config) -> list[float]:
    return [float(config.get(name) == v) for name, values in space.knobs for v in values]
