"""Split-K: a nest that reduces into one element runs its reduction in parallel, each
thread on a private copy of the element, combined at the end (``Schedule.parallel`` on a
reduction loop; ``parallel._split_k``)."""

from __future__ import annotations

import numpy as np
import pytest

import polyopt
from polyopt import IllegalScheduleError
from polyopt.schedules.marks import Tag

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


PADDED_ROW = """def cv(float(C,H,W) I pad(0, 0, 1:2) = 0.5, float(C,KH,KW) Wt) -> (O) {
    O(c, h, w) +=! I(c, h + r_kh, w + r_kw - 1) * Wt(c, r_kh, r_kw)
}"""


@pytest.mark.cc
def test_unrolled_branches_that_update_other_elements_are_not_split() -> None:
    """Unrolled by 2, the padded border's reduction loop holds one instance for w = 0 and
    one for w = 8 under branches on the outer loop, printed with constant targets: one
    po_acc for both lost w = 0's border terms (found by tests/schedule/test_fuzz_schedules)."""
    sizes = {"C": 1, "KH": 2, "H": 2, "KW": 2, "W": 7}
    s = polyopt.schedule(PADDED_ROW, auto="isl", sizes=sizes, options={"fusion": "smart"})
    s = s.unroll("w", 2).parallel("w_i").parallel("kh2")
    assert Tag.PARALLEL_REDUCTION in tags(s, "kh2")
    k = polyopt.compile(PADDED_ROW, schedule=s, sizes=sizes)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 2, 7)).astype(np.float32)
    w = rng.standard_normal((1, 2, 2)).astype(np.float32)
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 2)), constant_values=0.5)
    want = np.array([[[sum(xp[0, a, j + b] * w[0, a, b] for a in range(2) for b in range(2))
                       for j in range(9)]]])
    np.testing.assert_allclose(k(x, w), want, rtol=1e-5, atol=1e-6)
