"""Split-K: a nest that reduces into one element runs its reduction in parallel, each
thread on a private copy of the element, combined at the end (``Schedule.parallel`` on a
reduction loop; ``parallel._split_k``)."""

from __future__ import annotations

import numpy as np
import pytest

import polyopt
from polyopt import IllegalScheduleError
from polyopt.schedule.marks import Tag

DOT = "def dot(float(N) x, float(N) y) -> (s) { s +=! x(r_i) * y(r_i) }"
TOTAL = "def total(float(N,M) X) -> (s) { s +=! X(r_i, r_j) }"
ROWS = "def rows(float(N,M) X) -> (s) { s(i) +=! X(i, r_j) }"
BIGGEST = "def biggest(float(N) x) -> (m) { m max=! x(r_i) }"


def tags(s: polyopt.Schedule, loop: str) -> frozenset:
    return s.loop(loop).tags


def test_parallel_on_a_reduction_into_one_element_is_a_parallel_reduction() -> None:
    s = polyopt.schedule(TOTAL, auto=False, sizes={"N": 64, "M": 64}).parallel("i")
    assert Tag.PARALLEL_REDUCTION in tags(s, "i") and Tag.PARALLEL not in tags(s, "i")


def test_a_target_that_moves_below_the_loop_is_refused() -> None:
    """Interchanged, the rows' sums move with the inner loop: no single private element."""
    s = polyopt.schedule(ROWS, auto=False, sizes={"N": 64, "M": 64}).reorder("j", "i2")
    with pytest.raises(IllegalScheduleError, match="carries a dependence"):
        s.parallel("j")


def test_max_is_not_split() -> None:
    """OpenMP's max combine would drop a NaN one thread saw: only + and * split."""
    s = polyopt.schedule(BIGGEST, auto=False, sizes={"N": 1 << 20})
    with pytest.raises(IllegalScheduleError):
        s.parallel("i")


def test_the_pipeline_splits_a_dot_product_and_a_whole_sum() -> None:
    dot = polyopt.schedule(DOT, sizes={"N": 1 << 20})
    assert Tag.PARALLEL_REDUCTION in tags(dot, "i_o") and Tag.VECTORIZE in tags(dot, "i_i")
    assert any("split-K" in n for n in dot.notes)
    total = polyopt.schedule(TOTAL, sizes={"N": 1000, "M": 1000})
    assert Tag.PARALLEL_REDUCTION in tags(total, "i")
    small = polyopt.schedule(DOT, sizes={"N": 1000})  # below the parallel work
    assert not any(Tag.PARALLEL_REDUCTION in lp.tags for lp in map(small.loop, small.loops))


@pytest.mark.cc
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1 << 16, 100_003])
def test_split_dot_matches_numpy(dtype: type, n: int) -> None:
    rng = np.random.default_rng(n)
    x, y = rng.standard_normal(n).astype(dtype), rng.standard_normal(n).astype(dtype)
    src = DOT if dtype is np.float32 else DOT.replace("float(", "double(")
    k = polyopt.compile(src, sizes={"N": n})
    assert "reduction(+:po_acc)" in k.source and "#pragma omp parallel for" in k.source
    ref = x.astype(np.float64) @ y
    tol = 1e-3 if dtype is np.float32 else 1e-9
    assert abs(float(k(x, y)) - ref) <= tol * np.sqrt(n)


@pytest.mark.cc
def test_split_whole_sum_matches_numpy() -> None:
    x = np.random.default_rng(3).standard_normal((333, 517)).astype(np.float32)
    k = polyopt.compile(TOTAL, sizes={"N": 333, "M": 517})
    assert "parallel reduction of s_0" in k.source
    assert abs(float(k(x)) - x.astype(np.float64).sum()) <= 1e-3 * np.sqrt(x.size)
