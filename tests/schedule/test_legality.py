"""Schedules are checked against every exact dependence."""

from __future__ import annotations

import numpy as np
import pytest

import polyopt
from polyopt import IllegalScheduleError
from polyopt.schedule.marks import Tag

SOFTMAX_LIKE = """def f(float(N,D) X) -> (Y, s) {
    s(n) +=! X(n,r_d)
    Y(n,d) = X(n,d) / s(n)
}"""


def test_reading_before_the_reduction_finishes_is_illegal() -> None:
    s = polyopt.schedule(SOFTMAX_LIKE, auto=False).fuse("n2", "n3")
    # Y_0 interleaved with the reduction over r_d: it would read s before s is complete.
    with pytest.raises(IllegalScheduleError, match="flow dependence from statement s_0 to "
                                                   "statement Y_0"):
        s.fuse("d", "d2")


def test_a_legal_user_schedule_runs() -> None:
    good = polyopt.schedule(SOFTMAX_LIKE, auto=False).fuse("n2", "n3").parallel("n2")
    x = np.random.default_rng(1).random((3, 4)).astype(np.float32)
    y, _ = polyopt.compile(SOFTMAX_LIKE, schedule=good)(x)
    np.testing.assert_allclose(y, x / x.sum(1, keepdims=True), rtol=1e-5)


def test_auto_schedule_never_parallelizes_the_reduction_loop() -> None:
    src = "def mv(float(M,K) A, float(K) x) -> (y) { y(m) +=! A(m,r_k) * x(r_k) }"
    lines = polyopt.compile(src).source.splitlines()
    loops = [lines[i + 1] for i, line in enumerate(lines)
             if line.startswith("#pragma omp parallel")]
    assert loops and all("/* m" in line for line in loops)
    schedule = polyopt.compile(src).schedule
    reduction = [n for n in schedule.loops if n[0] == "k"]
    assert reduction  # the check below must have a loop to look at
    assert all(Tag.PARALLEL not in schedule.loop(n).tags for n in reduction)
