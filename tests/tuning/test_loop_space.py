"""The tuner's loop knobs (order, vector, parallel, split_k) and the cost model's
prediction as a feature: only knobs that change the schedule are in the space, and every
value in it computes what numpy does."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

import polyopt
from polyopt import lang
from polyopt.tuning import features
from polyopt.tuning.features import Predicted
from polyopt.tuning.search import search
from polyopt.tuning.space import Space, space_for
from polyopt.tuning.tuner import analytic

COLSUM = "def colsum(float(M,N) A) -> (S) { S(n) +=! A(m,n) }"
TRANSPOSE = "def tr(float(M,N) A) -> (B) { B(n,m) = A(m,n) }"
ROWSUM = "def rs(float(M,N) A) -> (S) { S(m) +=! A(m,n) }"
DOT = "def dot(float(N) a, float(N) b) -> (s) { s +=! a(r_n) * b(r_n) }"
ADD = "def add(float(M,N) A, float(M,N) B) -> (C) { C(m,n) = A(m,n) + B(m,n) }"
MM = "def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,r_k) * B(r_k,n) }"


def knobs(source: str, sizes: dict) -> dict:
    return dict(space_for(source, None, sizes).knobs)


def test_the_space_holds_the_loop_knobs_that_change_the_schedule() -> None:
    tr = knobs(TRANSPOSE, {"M": 64, "N": 96})
    assert tr["order"] == (None, 1) and tr["vector"] == (None, "n")
    assert "split_k" not in tr  # nothing reduces
    few = knobs(ROWSUM, {"M": 4, "N": 1 << 14})
    assert few["split_k"] == (None, True)  # four long rows: the rows' loop is not enough
    assert knobs(DOT, {"N": 1 << 16})["split_k"] == (None, False)  # split by default


def test_the_space_omits_knobs_that_change_nothing() -> None:
    rs = knobs(ROWSUM, {"M": 64, "N": 96})
    assert "order" not in rs and "vector" not in rs  # one loop below the output's
    assert "split_k" not in knobs(COLSUM, {"M": 64, "N": 4096})  # outputs enough for all
    assert "vector" not in knobs(ADD, {"M": 64, "N": 96})  # n is innermost already
    assert all(values[0] is None and len(set(map(repr, values))) == len(values)
               for values in knobs(MM, {"M": 64, "N": 48, "K": 40}).values())
    # a sum over the outer axis can be register-tiled (the model predicts it no faster, so
    # its default is the plain nest): the space asks the tuner whether it pays
    outer = "def s0(float(A,B,C) X) -> (Y) { Y(b,c) +=! X(r_a,b,c) }"
    sizes = {"A": 8, "B": 64, "C": 64}
    assert {"register_tile", "mr", "nr", "kc"} <= set(knobs(outer, sizes))
    s = polyopt.schedule(outer, sizes=sizes)
    assert any("no register tile" in n for n in s.notes), s.notes
    assert not any("unroll" in str(s.loop(n).tags) for n in s.loops), s
    elementwise = "def e(float(M,N) A) -> (B) { B(m,n) = A(m,n) * 2.0 }"
    assert not {"register_tile", "mr"} & set(knobs(elementwise, {"M": 64, "N": 96}))


CASES = {
    "colsum": (COLSUM, {"M": 64, "N": 96}, lambda a: a.sum(0)),
    "transpose": (TRANSPOSE, {"M": 64, "N": 96}, lambda a: a.T),
    "rowsum": (ROWSUM, {"M": 4, "N": 1 << 14}, lambda a: a.sum(1)),
}


def one_at_a_time(space: Space) -> list[dict]:
    """The default with each loop knob at each of its values, and a few mixtures."""
    loop = {n: v for n, v in space.knobs if n in ("order", "vector", "parallel", "split_k")}
    out = [{**space.default, name: v} for name, values in loop.items() for v in values[1:]]
    rng = random.Random(0)
    return out + [space.sample(rng) for _ in range(3)]


@pytest.mark.cc
@pytest.mark.parametrize("case", sorted(CASES))
def test_every_value_in_the_space_computes_the_same(case: str) -> None:
    source, sizes, ref = CASES[case]
    space = space_for(source, None, sizes)
    a = np.random.default_rng(0).standard_normal((sizes["M"], sizes["N"]), np.float32)
    for config in one_at_a_time(space):
        k = polyopt.compile(source, sizes=sizes, options=space.options(config))
        np.testing.assert_allclose(k(a), ref(a), rtol=1e-4, atol=1e-3, err_msg=str(config))


@pytest.mark.cc
def test_every_split_k_value_of_a_dot_product_computes_the_same() -> None:
    sizes = {"N": 1 << 14}
    space = space_for(DOT, None, sizes)
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal(1 << 14, np.float32), rng.standard_normal(1 << 14, np.float32)
    for config in one_at_a_time(space):
        k = polyopt.compile(DOT, sizes=sizes, options=space.options(config))
        np.testing.assert_allclose(k(a, b), a.astype(np.float64) @ b, rtol=1e-3, atol=1e-2)


def test_the_models_prediction_is_a_finite_feature_and_cheap_once_cached(
        monkeypatch: pytest.MonkeyPatch) -> None:
    sizes = {"M": 64, "N": 96}
    space = space_for(TRANSPOSE, None, sizes)
    row, prior = analytic(lang.define(TRANSPOSE), None, sizes)
    rng = random.Random(0)
    pool = [space.sample(rng) for _ in range(64)]
    values = [row(c) for c in pool]
    assert all(len(v) == 1 and math.isfinite(v[0]) and v[0] > 0 for v in values)
    assert prior is not None and [(prior(c),) for c in pool] == values

    def no_lowering(*args: object, **kwargs: object) -> None:
        raise AssertionError("a cached prediction lowered the definition again")

    # One schedule per distinct loop-knob setting, cached: asking again lowers nothing.
    with monkeypatch.context() as m:
        m.setattr(features, "base_schedule", no_lowering)
        assert [row(c) for c in pool] == values
    mm = analytic(lang.define(MM), None, {"M": 64, "N": 48, "K": 40})[0]({})
    assert len(mm) == 12 and all(math.isfinite(x) for x in mm)


def test_the_prediction_follows_the_schedule() -> None:
    p = Predicted(ROWSUM, None, {"M": 4, "N": 1 << 16})
    assert p.of({}) != p.of({"split_k": True})  # split-K runs the long rows on every core
    assert p.of({"mr": 4}) == p.of({})  # the register tile is the footprints' part


def test_the_encoding_tells_the_models_choice_from_each_value() -> None:
    space = space_for(DOT, None, {"N": 1 << 16})
    codes = {repr(v): space.encode({**space.default, "split_k": v})
             for v in dict(space.knobs)["split_k"]}
    assert len({tuple(c) for c in codes.values()}) == len(codes)  # None and False differ


def test_the_model_search_tries_the_predicted_fastest_first() -> None:
    """Before it has measurements to learn from, model-guided search ranks the space by
    the pipeline's predicted cycles: its first batch holds the configuration with the
    least prediction (there, with no features, only the prior guides it)."""
    space = space_for(TRANSPOSE, None, {"M": 64, "N": 96})
    _, prior = analytic(lang.define(TRANSPOSE), None, {"M": 64, "N": 96})
    assert prior is not None
    pool = space.pool(1000, random.Random(0))
    fastest = min(prior(c) for c in pool)
    history = search(space, lambda cs: [1.0] * len(cs), 5, "model", 0, prior=prior)
    assert history[0][0] == space.default
    assert min(prior(c) for c, _ in history[1:]) == fastest
