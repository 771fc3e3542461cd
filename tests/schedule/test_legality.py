"""Schedules are checked against every exact dependence."""

from __future__ import annotations

import islpy as isl
import numpy as np
import pytest

import polyopt
from polyopt import IllegalScheduleError, Schedule
from polyopt.pipeline import check_options, lower

SOFTMAX_LIKE = """def f(float(N,D) X) -> (Y, s) {
    s(n) +=! X(n,r_d)
    Y(n,d) = X(n,d) / s(n)
}"""


def _schedule(lowered, text: str) -> Schedule:
    mupa = isl.MultiUnionPwAff.from_union_map(isl.UnionMap(text))
    tree = isl.Schedule.from_domain(lowered.poly.domain).insert_partial_schedule(mupa)
    return Schedule(tree, "user")


def test_reading_before_the_reduction_finishes_is_illegal() -> None:
    lowered = lower(SOFTMAX_LIKE, "f", None, check_options(None, "c"))
    # Y_0 interleaved with the reduction over r_d: it would read s before s is complete.
    bad = _schedule(lowered, "[N, D] -> { s_0_init[n] -> [n, 0, 0]; s_0[n, r] -> [n, 1, r]; "
                             "Y_0[n, d] -> [n, 1, d] }")
    with pytest.raises(IllegalScheduleError, match="flow dependence from statement s_0 to "
                                                   "statement Y_0"):
        polyopt.compile(SOFTMAX_LIKE, schedule=bad)


def test_a_legal_user_schedule_runs() -> None:
    lowered = lower(SOFTMAX_LIKE, "f", None, check_options(None, "c"))
    good = _schedule(lowered, "[N, D] -> { s_0_init[n] -> [n, 0, 0]; s_0[n, r] -> [n, 1, r]; "
                              "Y_0[n, d] -> [n, 2, d] }")
    x = np.random.default_rng(1).random((3, 4)).astype(np.float32)
    y, _ = polyopt.compile(SOFTMAX_LIKE, schedule=good)(x)
    np.testing.assert_allclose(y, x / x.sum(1, keepdims=True), rtol=1e-5)


def test_auto_schedule_marks_reduction_loop_sequential() -> None:
    src = "def mv(float(M,K) A, float(K) x) -> (y) { y(m) +=! A(m,r_k) * x(r_k) }"
    c = polyopt.compile(src).source
    assert c.count("#pragma omp parallel for") == 1
    pragma_line = c.splitlines().index("#pragma omp parallel for")
    assert "c0" in c.splitlines()[pragma_line + 1]
