"""Schedules are checked against every exact dependence."""

from __future__ import annotations

import itertools

import islpy as isl
import numpy as np
import pytest

import polyopt
from polyopt import IllegalScheduleError, kernels
from polyopt.schedules import legality
from polyopt.schedules.legality import _PairOrders
from polyopt.schedules.marks import Tag
from polyopt.schedules.memo import Memo
from polyopt.schedules.tree import Sequence, filter_domain, loops, order_of, reordered

MM = "def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,r_k) * B(r_k,n) }"
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


THREE = """def f(float(N) X) -> (A, B, C) {
    A(i) = X(i) * 2.0
    B(i) = A(i) + 1.0
    C(i) = X(i) - 1.0
}"""


def test_a_step_checks_the_statements_it_may_reorder() -> None:
    """``reordered`` names the statements below the nodes where two trees first differ:
    none for a tag, the fused nests' for a fusion, the loop's for a reorder inside it."""
    s = polyopt.schedule(THREE, auto=False)
    assert reordered(s.root, s.parallel("i").root) == ()
    assert reordered(s.root, s.fuse("i", "i2").root) == ("A_0", "B_0")
    assert reordered(s.root, s.reverse("i3").root) == ("C_0",)
    mm = polyopt.schedule(MM, auto=False)
    assert reordered(mm.root, mm.reorder("m2", "k", "n2").root) == ("C_0",)


def test_a_reversed_consumer_fused_with_its_producer_is_still_refused() -> None:
    """The scoped check still sees a dependence inside the part a step changed."""
    s = polyopt.schedule(THREE, auto=False).reverse("i2")
    fused = polyopt.schedule(THREE, auto=False).fuse("i", "i2")
    assert fused.reverse("i").stmts  # reversing both together keeps A before B per i
    with pytest.raises(IllegalScheduleError, match="flow dependence from statement A_0"):
        s.fuse("i", "i2")  # A(i) would run after B(i) reads it for i > 0


CONV = kernels.source("conv2d")


CONV_SIZES = dict(N=1, C=4, H=6, W=6, F=16, KH=3, KW=3, PH=1, PW=1)


@pytest.mark.parametrize("src, sizes", [(SOFTMAX_LIKE, dict(N=5, D=7)), (THREE, dict(N=9)),
                                        (CONV, CONV_SIZES)])
def test_pair_orders_agree_with_the_whole_order(src, sizes) -> None:
    """The check's order built per pair of statements a dependence joins says what the
    whole lexicographic order says, for legal schedules (the pipeline's and program
    order) and for an illegal one (program order with its statements run in reverse)."""
    auto = polyopt.schedule(src, sizes=sizes)
    plain = polyopt.schedule(src, auto=False, sizes=sizes)
    backwards = plain.map.apply_range(isl_negate(plain.map))
    for smap, deps in ((auto.map, auto.deps), (plain.map, plain.deps), (backwards, plain.deps)):
        whole = smap.lex_lt_union_map(smap)
        orders = _PairOrders(smap)
        for _, dep in deps.named():
            assert orders.covers(dep) == dep.is_subset(whole)
    assert not all(_PairOrders(backwards).covers(d) for _, d in plain.deps.named())


def isl_negate(smap):
    """``[t] -> [-t]`` on the schedule's time space (the reversed order)."""
    times = []
    smap.range().foreach_set(times.append)
    n = times[0].dim(isl.dim_type.set)
    xs = ", ".join(f"t{k}" for k in range(n))
    neg = ", ".join(f"-t{k}" for k in range(n))
    return isl.UnionMap(f"{{ [{xs}] -> [{neg}] }}").align_params(smap.get_space())


@pytest.mark.parametrize("src, sizes", [(SOFTMAX_LIKE, dict(N=5, D=7)), (CONV, CONV_SIZES)])
def test_carried_memos_give_what_a_fresh_check_gives(src, sizes, monkeypatch) -> None:
    """``carried`` keeps its answers and the outer loops' comparisons per loop functions:
    every loop of the pipeline's schedule (a tiled, fused convolution) and of program
    order, asked again with memos that forget at once, carries the same dependences."""
    schedules = [polyopt.schedule(src, sizes=sizes), polyopt.schedule(src, auto=False,
                                                                       sizes=sizes)]

    def every(s):
        return [legality.carried(s.root, lp, s.deps, s.poly.domain) for lp in loops(s.root)]

    kept = [every(s) for s in schedules]
    assert any(not c.is_empty() for got in kept for c in got)
    monkeypatch.setattr(legality, "_CARRIED", Memo(0))
    monkeypatch.setattr(legality, "_LEVELS", Memo(0))
    for s, got in zip(schedules, kept, strict=True):
        assert all(a.is_equal(b) for a, b in zip(every(s), got, strict=True))


@pytest.mark.parametrize("src, sizes", [(kernels.source("softmax"), dict(N=3, D=5)),
                                        (CONV, CONV_SIZES)])
def test_a_steps_order_of_its_statements_is_the_whole_trees(src, sizes) -> None:
    """``order_of`` (a step's legality check reads the statements it moved from their
    subtree alone) orders their instances as the whole schedule's map does, for each
    statement, each pair and all of them, on the pipeline's schedule (fused, tiled)."""
    s = polyopt.schedule(src, "softmax" if "softmax" in src else None, sizes=sizes)
    names = s.stmts
    assert len(names) >= 3
    subsets = [(n,) for n in names] + list(itertools.combinations(names, 2)) + [names]
    for stmts in subsets:
        whole = s.map.intersect_domain(filter_domain(s.poly.domain, stmts))
        part = order_of(s.root, s.poly.domain, stmts)
        assert part.domain().is_equal(whole.domain())
        assert part.lex_lt_union_map(part).is_equal(whole.lex_lt_union_map(whole)), stmts


WAVE = """def wave(float(N,N) A) -> (float(N,N) B) {
    B(i,j) = A(i,j) where i in 0:1, j in 0:N
    B(i,j) = A(i,j) where i in 1:N, j in 0:1
    B(i,j) = B(i-1,j) + B(i,j-1) + B(i-1,j+1) where i in 1:N, j in 1:N-1
    B(i,j) = B(i-1,j) + B(i,j-1) where i in 1:N, j in N-1:N
}"""


def _wave(a: np.ndarray) -> np.ndarray:
    b = a.astype(np.float64)
    n = len(a)
    for i in range(1, n):
        for j in range(1, n):
            b[i, j] = b[i - 1, j] + b[i, j - 1] + (b[i - 1, j + 1] if j < n - 1 else 0.0)
    return b


@pytest.mark.cc
def test_a_permutable_band_proves_its_tiles() -> None:
    """Tiling a permutable band is legal without checking the tiled order (whose floor
    divisions by sizes that are not powers of two cost isl minutes on a large stencil);
    a band with a negative distance is still checked, and refused."""
    s = polyopt.schedule(WAVE, sizes={"N": 12}, auto=False)
    band = [lp.name for lp in loops(s.root) if lp.name in ("i2", "c")]
    assert band == ["i2", "c"], s  # isl's dataflow order: i, then the skewed i + j
    assert legality.permutable(s.root, band, s.deps, s.poly.domain)
    tiled = s.tile(tuple(band), (3, 5)).skew("i2_o", "c_o", 1).reorder("c_o", "i2_o")
    a = np.random.default_rng(3).random((12, 12)).astype(np.float32)
    got = polyopt.compile(WAVE, sizes={"N": 12}, schedule=tiled)(a)
    np.testing.assert_allclose(got, _wave(a), rtol=1e-5)
    leaning = s.skew("i2", "c", -1)  # distances (1, 0), (0, 1), (1, -1): legal, not permutable
    assert not legality.permutable(leaning.root, band, leaning.deps, leaning.poly.domain)
    with pytest.raises(IllegalScheduleError, match="violates a"):
        leaning.tile(tuple(band), 4)


def test_distribution_is_proven_or_refused() -> None:
    """``legality.distributable``: a dependence from a later statement back to an earlier
    one at another iteration of the loop forbids distributing it (every iteration of the
    earlier statement would run first); one forward is fine."""
    src = """def f(float(N) A) -> (float(N) B, float(N) C) {
        B(i) = A(i) where i in 0:1
        B(i) = C(i-1) + A(i) where i in 1:N
        C(i) = 2.0 * B(i)
    }"""
    s = polyopt.schedule(src, sizes={"N": 8}, auto=False)
    with_seq = [lp for lp in loops(s.root) if isinstance(lp.child, Sequence)]
    assert with_seq, s
    loop = with_seq[0].name
    assert not legality.distributable(s.root, loop, s.deps, s.poly.domain)
    with pytest.raises(IllegalScheduleError):
        s.distribute(loop)
    fwd = """def g(float(N) A) -> (float(N) B, float(N) C) {
        B(i) = 2.0 * A(i)
        C(i) = B(i) + 1.0
    }"""
    g = polyopt.schedule(fwd, sizes={"N": 8}, auto=False).fuse("i", "i2")
    assert legality.distributable(g.root, "i", g.deps, g.poly.domain)
    assert len(g.distribute("i").loops) == 2
