"""The schedule-transformation API: every verb, legality, misuse, schedules as data.

Each verb returns a new Schedule (the old one is unchanged), prints its new loops, and
compiles to a kernel that matches a float64 NumPy reference at sizes that no tile size
divides. Illegal verbs raise ``IllegalScheduleError`` naming the dependence; misuse raises
``ScheduleError`` saying what is wrong.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polyopt
from polyopt import IllegalScheduleError, ScheduleError, kernels, schedule_from_json
from polyopt.schedules import Schedule
from polyopt.schedules.marks import Tag
from polyopt.schedules.tree import Loop, stmts_of
from polyopt.schedules.tree import loops as tree_loops

cc = pytest.mark.cc  # the tests that compile and run C

F32 = np.float32
MM = "def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,r_k) * B(r_k,n) }"
ROWNORM = """def rn(float(N,D) X) -> (Y, s) {
    s(n) +=! X(n,r_d)
    Y(n,d) = X(n,d) / s(n)
}"""
PREFIX = "def f(float(N) x) -> (y) { y(i) +=! x(r_j) where i in 0:N, r_j in 0:i+1 }"
PAIR = """def g(float(N,M) x) -> (y, z) {
    y(i,j) = x(i,j) * 2
    z(i,j) = y(i,j) + 1
}"""
TWOMM = kernels.get("polybench_2mm")
CONV = kernels.get("conv2d", padding=1)


# ------------------------------------------------------------------------------ helpers

def rand(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.uniform(-1.0, 1.0, size=shape).astype(F32)


def conv_ref(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Stride 1, padding 1, NCHW/FCKhKw, in float64."""
    kh, kw = w.shape[2:]
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    win = np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(2, 3))
    return np.einsum("nchwij,fcij->nfhw", win, w.astype(np.float64))


# A def: its inputs at one shape, its float64 outputs, and the reduction size (tolerance).
Case = Callable[[np.random.Generator], tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...], int]]


def mm_case(m: int = 7, k: int = 13, n: int = 5) -> Case:
    def make(rng: np.random.Generator) -> Any:
        a, b = rand(rng, m, k), rand(rng, k, n)
        return (a, b), (a.astype(np.float64) @ b,), k
    return make


def rownorm_case(rng: np.random.Generator) -> Any:
    x = rng.uniform(0.5, 1.5, size=(7, 13)).astype(F32)  # positive row sums
    s = x.astype(np.float64).sum(1)
    return (x,), (x / s[:, None], s), 13


def prefix_case(rng: np.random.Generator) -> Any:
    x = rand(rng, 13)
    return (x,), (np.cumsum(x.astype(np.float64)),), 13


def pair_case(rng: np.random.Generator) -> Any:
    x = rand(rng, 7, 6)
    y = 2 * x.astype(np.float64)
    return (x,), (y, y + 1), 1


def twomm_case(rng: np.random.Generator) -> Any:
    al, be = np.array(1.25, F32), np.array(0.75, F32)
    a, b, c, d = rand(rng, 7, 5), rand(rng, 5, 13), rand(rng, 13, 6), rand(rng, 7, 6)
    a64, b64, c64, d64 = (v.astype(np.float64) for v in (a, b, c, d))
    return (al, be, a, b, c, d), (0.75 * d64 + (1.25 * a64 @ b64) @ c64,), 5 * 13


def conv_case(rng: np.random.Generator) -> Any:
    x, w = rand(rng, 2, 3, 7, 6), rand(rng, 2, 3, 3, 3)
    return (x, w), (conv_ref(x, w),), 27


CASES: dict[str, tuple[str, Case]] = {
    "mm": (MM, mm_case()), "rn": (ROWNORM, rownorm_case), "f": (PREFIX, prefix_case),
    "g": (PAIR, pair_case), "polybench_2mm": (TWOMM, twomm_case), "conv2d": (CONV, conv_case),
}


def assert_close(got: Any, want: tuple[np.ndarray, ...], red: int) -> None:
    got = got if isinstance(got, tuple) else (got,)
    assert len(got) == len(want)
    tol = 2e-5 * math.sqrt(max(red, 1))
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape and g.dtype == F32
        scale = max(1.0, float(np.abs(w).max(initial=0.0)))
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol * scale)


def check_runs(s: Schedule, case: Case | None = None, seed: int = 0, **kw: Any) -> polyopt.Kernel:
    """Compile ``s`` and compare the kernel with the def's NumPy reference."""
    name = s.poly.program.name
    src, default = CASES[name]
    kernel = polyopt.compile(src, name, schedule=s, **kw)
    inputs, want, red = (case or default)(np.random.default_rng(seed))
    assert_close(kernel(*inputs), want, red)
    return kernel


def snapshot(s: Schedule) -> tuple[str, tuple[str, ...], tuple[Any, ...], str]:
    return str(s), s.loops, s.steps, s.as_json()


def under(s: Schedule, loop: str) -> tuple[str, ...]:
    """The statements that run inside ``loop``."""
    return stmts_of(s.loop(loop))


def around(s: Schedule, *stmts: str) -> list[str]:
    """The loops that run every statement in ``stmts``, outermost first (isl's schedule
    changes with the scheduler's options, so its tests look loops up by what they run)."""
    return [lp.name for lp in tree_loops(s.root) if set(stmts) <= set(stmts_of(lp))]


@pytest.fixture(scope="module")
def mm0() -> Schedule:
    return polyopt.schedule(MM, auto=False)


@pytest.fixture(scope="module")
def mm_isl() -> Schedule:
    return polyopt.schedule(MM, auto="isl")


def test_program_order_base_names_loops_after_indices(mm0: Schedule) -> None:
    assert mm0.loops == ("m", "n", "m2", "n2", "k")
    assert mm0.stmts == ("C_0_init", "C_0")
    assert str(mm0).splitlines() == [
        "# schedule of def mm (program-order)",
        "for m:", "  for n:", "    C_0_init",
        "for m2 = m:", "  for n2 = n:", "    for k = r_k:", "      C_0"]
    conv = polyopt.schedule(CONV, auto=False)
    assert set(conv.stmts) == {"O_0_init", "O_0", "O_0_border"}
    assert {"c", "kh", "kw"} <= set(conv.loops)
    assert polyopt.schedule(PREFIX, auto=False).loops == ("i", "i2", "j")


# ------------------------------------------------------------------------ 1. each verb

# (id, base, verb calls, loops that must appear, loops that must be gone, text in print)
VERBS: list[tuple[str, str, Callable[[Schedule], Schedule], list[str], list[str], str]] = [
    ("tile", "po", lambda s: s.tile(("m2", "n2"), 4),
     ["m2_o", "n2_o", "m2_i", "n2_i"], ["m2", "n2"], "for m2_o = floor((m)/4):"),
    ("tile-3d-sizes", "po", lambda s: s.tile(("m2", "n2", "k"), (4, 3, 5)),
     ["m2_o", "n2_o", "k_o", "m2_i", "n2_i", "k_i"], ["k"], "for k_i = (r_k) mod 5:"),
    ("tile-named", "po", lambda s: s.tile(("m2", "n2"), 2, names=(("I", "ii"), ("J", "jj"))),
     ["I", "J", "ii", "jj"], ["m2_o"], "for jj = (n) mod 2:"),
    ("split", "po", lambda s: s.split("k", 4), ["k_o", "k_i"], ["k"], "for k_o = floor((r_k)/4):"),
    ("split-named", "po", lambda s: s.split("k", 3, names=("kb", "kk")), ["kb", "kk"], ["k_o"],
     "for kk = (r_k) mod 3:"),
    ("reorder", "po", lambda s: s.reorder("k", "m2", "n2"), ["k", "m2", "n2"], [],
     "for k = r_k:\n  for m2 = m:\n    for n2 = n:"),
    ("interchange", "po", lambda s: s.interchange("m2", "n2"), [], [],
     "for n2 = n:\n  for m2 = m:"),
    ("interchange-far", "po", lambda s: s.interchange("m2", "k"), [], [],
     "for k = r_k:\n  for n2 = n:\n    for m2 = m:"),
    ("fuse", "po", lambda s: s.fuse("m", "m2"), ["m", "n2"], ["m2"],
     "for m:\n  for n:\n    C_0_init\n  for n2 = n:"),
    ("fuse-twice", "po", lambda s: s.fuse("m", "m2").fuse("n", "n2"), ["m", "n", "k"],
     ["m2", "n2"], "    C_0_init\n    for k = r_k:"),
    ("distribute", "po", lambda s: s.fuse("m", "m2").fuse("n", "n2").distribute("n"),
     ["m", "n", "k"], ["m2"], "for m:\n  for n"),
    ("skew", "po", lambda s: s.skew("m2", "n2"), [], [], "for n2 = m + n:"),
    ("skew-factor", "po", lambda s: s.skew("m2", "k", 2), [], [], "for k = 2m + r_k:"),
    ("skew-negative", "po", lambda s: s.skew("n2", "k", -1), [], [], "for k = -n + r_k:"),
    ("shift", "po", lambda s: s.shift("m2", 3), [], [], "for m2 = 3 + m:"),
    ("shift-one-stmt", "isl", lambda s: s.shift(around(s, "C_0")[-1], 1, stmts=["C_0"]), [], [],
     "1 + r_k"),
    ("reverse", "po", lambda s: s.reverse("n2"), [], [], "for n2 = -n:"),
    ("parallel", "po", lambda s: s.parallel("m2"), [], [], "for m2 = m:  # parallel"),
    ("vectorize", "po", lambda s: s.interchange("n2", "k").vectorize("n2"), [], [],
     "for n2 = n:  # vectorize"),
    ("unroll-factor", "po", lambda s: s.unroll("k", 4), ["k_o", "k_i"], ["k"],
     "for k_i = (r_k) mod 4:  # unroll"),
    ("unroll-full", "po", lambda s: s.split("n2", 4).unroll("n2_i"), [], [],
     "for n2_i = (n) mod 4:  # unroll"),
    ("unroll-and-jam", "po", lambda s: s.unroll_and_jam("m2", 2), ["m2_o", "m2_i"], ["m2"],
     "for k = r_k:\n      for m2_i = (m) mod 2:  # unroll"),
    ("register-tile", "po",
     lambda s: s.interchange("n2", "k").vectorize("n2").unroll_and_jam("m2", 4, names=("R", "r")),
     ["R", "r"], [], "for r = (m) mod 4:  # unroll\n      for n2 = n:  # vectorize"),
    ("separate", "po", lambda s: s.split("n2", 4).separate("n2_o"), [], [],
     "for n2_o = floor((n)/4):  # separate"),
    ("isl-tile-parallel", "isl", lambda s: s.tile(("m", "n"), 4).parallel("m_o"),
     ["m_o", "n_o", "m_i", "n_i"], ["m"], "for m_o = floor((m)/4):  # parallel"),
]


@cc
@pytest.mark.parametrize(("base", "verb", "present", "gone", "text"),
                         [v[1:] for v in VERBS], ids=[v[0] for v in VERBS])
def test_verb_prints_new_loops_runs_and_leaves_the_original(
        mm0: Schedule, mm_isl: Schedule, base: str, verb: Callable[[Schedule], Schedule],
        present: list[str], gone: list[str], text: str) -> None:
    s = mm0 if base == "po" else mm_isl
    before = snapshot(s)
    new = verb(s)
    assert snapshot(s) == before, "a verb changed the schedule it was called on"
    assert new is not s and new.steps[:len(s.steps)] == s.steps
    assert len(new.steps) > len(s.steps)
    printed = str(new)
    assert text in printed, printed
    for name in present:
        assert name in new.loops and f"for {name}" in printed
    for name in gone:
        assert name not in new.loops
    assert sorted(new.stmts) == sorted(s.stmts)
    kernel = check_runs(new)
    if "parallel" in text:
        assert "#pragma omp parallel for" in kernel.source
    if "vectorize" in text:
        assert "simd" in kernel.source


@cc
def test_distribute_gives_each_statement_its_own_nest(mm0: Schedule,
                                                      mm_isl: Schedule) -> None:
    fused = mm0.fuse("m", "m2").fuse("n", "n2")
    assert around(fused, "C_0_init", "C_0") == ["m", "n"]
    d = fused.distribute("n")
    assert around(d, "C_0_init", "C_0") == ["m"]
    assert "k" in d.loops and under(d, "k") == ("C_0",)  # the reduction keeps its name
    assert len(d.loops) == 4 and str(d).count("    C_0_init") == 1
    check_runs(d)
    back = d.distribute("m")
    assert around(back, "C_0_init", "C_0") == []
    check_runs(back)
    with pytest.raises(ScheduleError, match="loop k runs a single statement group"):
        d.distribute("k")
    shared = around(mm_isl, "C_0_init", "C_0")
    before = snapshot(mm_isl)
    split = mm_isl.distribute(shared[-1])
    assert snapshot(mm_isl) == before
    assert around(split, "C_0_init", "C_0") == shared[:-1]
    check_runs(split)


@cc
def test_rownorm_fused_distributed_and_parallel() -> None:
    po = polyopt.schedule(ROWNORM, auto=False)
    assert po.loops == ("n", "n2", "d", "n3", "d2")
    fused = po.fuse("n2", "n3").parallel("n2")
    assert under(fused, "n2") == ("s_0", "Y_0")
    assert "for n2 = n:  # parallel" in str(fused)
    check_runs(fused)
    isl_ = polyopt.schedule(ROWNORM, auto="isl")
    check_runs(isl_)
    shared = around(isl_, "s_0", "Y_0")
    if shared:  # isl may already give each statement its own nest
        dist = isl_.distribute(shared[-1])
        assert around(dist, "s_0", "Y_0") == shared[:-1]
        check_runs(dist.parallel(around(dist, "Y_0")[0]))


@cc
def test_two_mm_chain() -> None:
    po = polyopt.schedule(TWOMM, auto=False)
    assert po.stmts == ("tmp_0_init", "tmp_0", "Do_0", "Do_1")
    s = po.fuse("i", "i2").fuse("i3", "i4").fuse("l", "l2").parallel("i").parallel("i3")
    s = s.tile(("j2", "k"), (4, 2)).split("j3", 5)
    assert {"j2_o", "k_o", "j2_i", "k_i", "j3_o", "j3_i"} <= set(s.loops)
    check_runs(s)
    auto = polyopt.schedule(TWOMM, auto="isl")
    check_runs(auto)
    top = auto.loops[0]
    check_runs(auto.tile(top, 4).parallel(f"{top}_o"))


@cc
def test_prefix_sum_with_a_carried_reduction() -> None:
    p = polyopt.schedule(PREFIX, auto=False)
    check_runs(p)
    s = p.reverse("i2").split("j", 4).parallel("i2")
    assert "for i2 = -i:  # parallel" in str(s)
    check_runs(s)
    check_runs(p.tile(("i2", "j"), 4))  # triangular: partial tiles on the diagonal
    check_runs(p.fuse("i", "i2").unroll("j", 3))


@cc
def test_conv2d_with_padding() -> None:
    c = polyopt.schedule(CONV, auto=False)
    assert under(c, "n2") == ("O_0",) and under(c, "n3") == ("O_0_border",)
    s = c.parallel("f2").tile(("h2", "w2"), 4).interchange("n2", "f2").reverse("w2_i")
    s = s.interchange("f3", "h3").parallel("n3").skew("h2_o", "w2_o")
    assert "for w2_o = floor((h)/4) + floor((w)/4):" in str(s)
    check_runs(s, parametric=True)  # one size-generic lowering: conv's dependences are costly
    check_runs(c.interchange("c", "kh"), parametric=True)  # a reduction's order is free
    fused = c.fuse("n2", "n3").fuse("f2", "f3")
    assert under(fused, "f2") == ("O_0", "O_0_border")
    # "O_0" names the interior piece and, where it runs under the loop, its border piece
    alone = c.shift("h2", 1, stmts=["O_0"])
    assert "for h2 = 1 + h:" in str(alone) and "for h3 = h:" in str(alone)
    both = fused.shift("f2", 2, stmts=["O_0"]).parallel("f2")
    assert "for f2 = 2 + f:  # parallel" in str(both)
    check_runs(both, parametric=True)
    border = fused.shift("f2", 1, stmts=["O_0_border"])
    assert "O_0_border: 1 + f" in str(border) and "O_0: f" in str(border)


@cc
def test_a_loop_over_several_statements_vectorizes_and_jams() -> None:
    s = polyopt.schedule(PAIR, auto=False).fuse("i", "i2").fuse("j", "j2")
    v = s.vectorize("j").unroll_and_jam("i", 2)
    assert "for i_i = (i) mod 2:  # unroll\n    for j:  # vectorize\n      y_0\n      z_0" in str(v)
    check_runs(v)
    check_runs(v, parametric=True)


@cc
def test_pack_copies_an_input_into_blocks(mm0: Schedule) -> None:
    s = mm0.pack("B", 1, 4).tile(("m2", "n2"), 4).parallel("m2_o")
    assert s.stmts[0] == "B_pack_0" and mm0.stmts == ("C_0_init", "C_0")
    assert "s = s.pack('B', 1, 4" in s.as_python()
    assert str(schedule_from_json(s.as_json(), MM)) == str(s)
    check_runs(s)
    with pytest.raises(ScheduleError, match="'Q' is not an input or output of def 'mm'"):
        mm0.pack("Q", 1, 4)


# -------------------------------------------------------------------- 2. illegal verbs

def test_parallel_on_a_reduction_loop_is_illegal(mm0: Schedule) -> None:
    """Unless the loop reduces into one element (then it is a parallel reduction, split-K:
    tests/pipeline/test_split_k.py): here the output's columns move below it."""
    swapped = mm0.reorder("m2", "k", "n2")
    before = snapshot(swapped)
    with pytest.raises(IllegalScheduleError, match=r"parallel: loop k carries a dependence") as e:
        swapped.parallel("k")
    assert "C_0[" in str(e.value)
    assert snapshot(swapped) == before
    assert Tag.PARALLEL_REDUCTION in mm0.parallel("k").loop("k").tags


def test_vectorize_on_a_carried_loop_is_illegal() -> None:
    fused = polyopt.schedule(PAIR, auto=False).fuse("i", "i2").fuse("j", "j2")
    assert "# vectorize" in str(fused.vectorize("j"))  # y(i,j) then z(i,j): independent
    shifted = fused.shift("j", 1, stmts=["z_0"])  # z(i,j) now runs with y(i,j+1)
    with pytest.raises(IllegalScheduleError, match=r"vectorize: loop j carries a dependence"
                                                   r"(.|\n)*y_0\[i, j\] -> z_0"):
        shifted.vectorize("j")


@cc
def test_vectorizing_a_reduction_loop_is_refused_or_correct() -> None:
    p = polyopt.schedule(PREFIX, auto=False)
    try:
        v = p.vectorize("j")  # an unordered TC reduction may run as vector partial sums
    except IllegalScheduleError as e:
        assert "loop j carries a dependence" in str(e)
    else:
        assert "for j = r_j:  # vectorize" in str(v)
        check_runs(v)


@pytest.mark.parametrize(("src", "loop"), [(PREFIX, "j"), (MM, "k")])
def test_reversing_a_reduction_loop_is_legal(src: str, loop: str) -> None:
    # TC reductions are unordered: any order of the sum is the same computation.
    check_runs(polyopt.schedule(src, auto=False).reverse(loop))


def test_running_a_reduction_in_parallel_is_illegal() -> None:
    s = polyopt.schedule(MM, auto=False).reorder("k", "n2")  # n2 moves the target below k
    with pytest.raises(IllegalScheduleError, match="loop k carries a dependence"):
        s.parallel("k")


def test_fusing_a_consumer_into_the_producers_reduction_loop_is_illegal() -> None:
    s = polyopt.schedule(ROWNORM, auto=False).fuse("n2", "n3")
    with pytest.raises(IllegalScheduleError,
                       match="fuse\\('d', 'd2'\\) violates a flow dependence from statement s_0 "
                             "to statement Y_0"):
        s.fuse("d", "d2")
    t = polyopt.schedule(TWOMM, auto=False).fuse("i", "i2").fuse("i", "i3").fuse("i", "i4")
    with pytest.raises(IllegalScheduleError, match=r"flow dependence from statement (tmp_0|Do_0) "
                                                   r"to statement Do_1"):
        t.fuse("j2", "l2")


def test_interchange_that_breaks_a_dependence_is_illegal() -> None:
    # z(i,j) reads y(i,j) one step later in i and one earlier in j: distance (1, -1)
    s = (polyopt.schedule(PAIR, auto=False).fuse("i", "i2").fuse("j", "j2")
         .shift("i", 1, stmts=["z_0"]).shift("j", -1, stmts=["z_0"]))
    with pytest.raises(IllegalScheduleError,
                       match="interchange\\('i', 'j'\\) violates a flow dependence from "
                             "statement y_0 to statement z_0"):
        s.interchange("i", "j")
    with pytest.raises(IllegalScheduleError, match="parallel: loop i carries"):
        s.parallel("i")
    assert "parallel" in str(s.parallel("j"))  # j carries nothing inside i


def test_a_tag_stays_valid_through_later_steps() -> None:
    fused = polyopt.schedule(PAIR, auto=False).fuse("i", "i2").parallel("i")
    with pytest.raises(IllegalScheduleError, match="loop i is tagged parallel but would now "
                                                   "carry a dependence"):
        fused.shift("i", 1, stmts=["z_0"])  # legal order, but i now carries y -> z
    vec = polyopt.schedule(PAIR, auto=False).fuse("i", "i2").fuse("j", "j2").vectorize("j")
    with pytest.raises(IllegalScheduleError, match="loop j is tagged vectorize"):
        vec.shift("j", 1, stmts=["z_0"])
    with pytest.raises(ScheduleError, match="loop j is vectorized, so it must stay innermost"):
        vec.interchange("i", "j")
    two = polyopt.schedule(PAIR, auto=False).parallel("i").parallel("i2").fuse("i", "i2")
    assert "# parallel" in str(two)  # both were parallel and the fusion carries nothing


def test_illegal_shift_and_skew_name_the_dependence() -> None:
    s = polyopt.schedule(PAIR, auto=False).fuse("i", "i2")
    with pytest.raises(IllegalScheduleError, match="from statement y_0 to statement z_0"):
        s.shift("i", 1, stmts=["y_0"])  # y(i) would be written after z(i) reads it
    p = polyopt.schedule(PREFIX, auto=False)
    skewed = p.reorder("j", "i2").skew("j", "i2", -1)
    assert "for i2 = i - r_j:" in str(skewed)
    check_runs(skewed.reorder("i2", "j"))  # only the (unordered) sum chains y_0 to itself


# ----------------------------------------------------------------------------- 3. misuse

def test_unknown_loop_lists_the_loops(mm0: Schedule) -> None:
    for call in (lambda: mm0.split("q", 2), lambda: mm0.parallel("q"),
                 lambda: mm0.tile(("m2", "q"), 4), lambda: mm0.reorder("q", "m2"),
                 lambda: mm0.fuse("m", "q"), lambda: mm0.loop("q")):
        with pytest.raises(ScheduleError, match=r"no loop named 'q'; loops: m, n, m2, n2, k"):
            call()


@pytest.mark.parametrize(("call", "message"), [
    (lambda s: s.tile(("m2", "k"), 4), "adjacent loops in nest order; the nest is m2, n2, k"),
    (lambda s: s.tile(("n2", "m2"), 4), "adjacent loops in nest order"),
    (lambda s: s.tile(("n", "k"), 4), "not nested in one another"),
    (lambda s: s.tile(("m", "m2"), 4), "do not enclose or sit inside"),
    (lambda s: s.tile(("m2", "n2"), (8, 8), (3, 2)), "tile sizes of m2: 3 does not divide 8"),
    (lambda s: s.tile(("m2", "n2"), (8, 4), (4, 8)), "tile sizes of n2: 8 does not divide 4"),
    (lambda s: s.tile(("m2", "n2"), (4, 4, 4)), "each level needs 2 sizes"),
    (lambda s: s.tile(("m2", "n2")), "at least one level of sizes"),
    (lambda s: s.tile(("m2", "n2"), 0), "tile size of m2 must be a positive integer, not 0"),
    (lambda s: s.tile(("m2", "n2"), 2, names=(("a", "b"),)), "names must give each loop 2"),
    (lambda s: s.split("k", 0), "split factor of k must be a positive integer, not 0"),
    (lambda s: s.split("k", -2), "must be a positive integer, not -2"),
    (lambda s: s.split("k", 2.5), "must be a positive integer, not 2.5"),
    (lambda s: s.split("k", True), "must be a positive integer, not True"),
    (lambda s: s.unroll("k", 0), "positive integer, not 0"),
    (lambda s: s.unroll_and_jam("m2", -1), "positive integer, not -1"),
    (lambda s: s.split("k", 2, names=("m", "k_i")), "loop name 'm' is already used"),
    (lambda s: s.split("k", 2, names=("kk", "kk")), "loop name 'kk' is already used"),
    (lambda s: s.split("k", 2, names=("k o", "k_i")), "'k o' is not an identifier"),
    (lambda s: s.split("k", 2, names=("a",)), "names must be two loop names"),
    (lambda s: s.unroll_and_jam("m2", 2, names=("a", "b", "c")), "names must be two"),
    (lambda s: s.tile(("m2", "n2"), 4, names=(("n", "x"), ("y", "z"))), "'n' is already used"),
    (lambda s: s.split("k", 2).split("k_o", 2, names=("k_i", "z")), "'k_i' is already used"),
    (lambda s: s.skew("n2", "m2"), "skew: loop n2 does not enclose loop m2"),
    (lambda s: s.skew("m", "k"), "skew: loop m does not enclose loop k"),
    (lambda s: s.skew("k", "k"), "does not enclose"),
    (lambda s: s.skew("m2", "k", 0.5), "skew factor must be an integer"),
    (lambda s: s.shift("m2", 1.5), "shift offset must be an integer"),
    (lambda s: s.shift("m2", 1, stmts=["Q_0"]), "no statement 'Q_0'; statements: C_0_init, C_0"),
    (lambda s: s.shift("m2", 1, stmts=["C_0_init"]), "loop m2 runs statements C_0, not C_0_init"),
    (lambda s: s.unroll("k"), "unroll: loop k has a non-constant trip count; give a factor"),
    (lambda s: s.unroll("m2"), "non-constant trip count"),
    (lambda s: s.vectorize("m2"), "vectorize: loop m2 is not innermost"),
    (lambda s: s.fuse("m", "n2"), "loops m and n2 are not siblings"),
    (lambda s: s.fuse("m", "m"), "two different loops"),
    (lambda s: s.distribute("m2"), "single statement group: nothing to distribute"),
    (lambda s: s.reorder("m2", "m2"), "repeat a loop"),
    (lambda s: s.reorder(), "no loops given"),
    (lambda s: s.reorder("n", "k"), "not nested in one another: k does not sit inside n"),
    (lambda s: s.interchange("m", "m2"), "do not enclose or sit inside"),
])
def test_misuse_raises_a_helpful_schedule_error(
        mm0: Schedule, call: Callable[[Schedule], Schedule], message: str) -> None:
    before = snapshot(mm0)
    with pytest.raises(ScheduleError, match=message.replace("(", r"\(").replace(")", r"\)")) as e:
        call(mm0)
    assert not isinstance(e.value, IllegalScheduleError)
    assert snapshot(mm0) == before


def test_full_unroll_needs_a_small_constant_trip_count() -> None:
    sized = polyopt.schedule(MM, auto=False, sizes={"M": 3, "K": 100, "N": 2})
    assert "# unroll" in str(sized.unroll("m2"))  # 3 iterations
    with pytest.raises(ScheduleError, match=r"loop k has 100 trip count; .* at most 64"):
        sized.unroll("k")


# ------------------------------------------------------------------ 4. multi-level tiles

@cc
def test_multi_level_tile_names_and_results(mm0: Schedule) -> None:
    s = mm0.tile(("m2", "n2"), (8, 8), (4, 2))
    assert s.loops == ("m", "n", "m2_o", "n2_o", "m2_m", "n2_m", "m2_i", "n2_i", "k")
    text = str(s)
    assert "for m2_o = floor((m)/8):" in text and "for n2_i = (n) mod 2:" in text
    for shape in [(13, 7, 17), (7, 13, 5), (16, 3, 8), (1, 1, 1)]:
        check_runs(s, mm_case(*shape), seed=sum(shape))
    three = mm0.tile(("m2", "n2", "k"), (12, 12, 12), (6, 4, 6), (3, 2, 2))
    assert three.loops[2:8] == ("m2_o", "n2_o", "k_o", "m2_m1", "n2_m1", "k_m1")
    assert three.loops[-3:] == ("m2_i", "n2_i", "k_i")
    check_runs(three, mm_case(13, 14, 7))


# --------------------------------------------------------------- 5. schedules as data

def _steps_of_every_kind(s: Schedule) -> Schedule:
    return (s.fuse("m", "m2")
            .tile(("n2", "k"), (4, 4), (2, 2), names=(("A", "B", "C"), ("D", "E", "F")))
            .interchange("D", "B").skew("A", "D").shift("B", 1).reverse("A").parallel("m")
            .unroll("C").split("F", 2).separate("A").unroll_and_jam("B", 2).distribute("m"))


@cc
def test_json_round_trip_reproduces_the_schedule(mm0: Schedule) -> None:
    s = _steps_of_every_kind(mm0)
    text = s.as_json()
    data = json.loads(text)
    assert data["def"] == "mm" and data["base"] == "program-order"
    assert [d["verb"] for d in data["steps"]] == [st.verb for st in s.steps]
    back = schedule_from_json(text, MM)
    assert str(back) == str(s)
    assert back.steps == s.steps and back.as_json() == text
    assert polyopt.compile(MM, schedule=back).source == polyopt.compile(MM, schedule=s).source
    check_runs(back)
    isl_ = polyopt.schedule(MM, auto="isl")
    shifted = isl_.shift(around(isl_, "C_0")[-1], 1, stmts=["C_0"]).distribute("m")
    again = schedule_from_json(shifted.as_json(), MM)
    assert str(again) == str(shifted) and again.steps == shifted.steps


def test_as_python_shows_each_step_and_replays(mm0: Schedule) -> None:
    s = _steps_of_every_kind(mm0)
    code = s.as_python()
    lines = code.splitlines()
    assert lines[0].startswith("s = polyopt.schedule(source, 'mm', auto=False")
    assert len(lines) == len(s.steps) + 1
    for step, line in zip(s.steps, lines[1:], strict=True):
        assert line == f"s = s.{step.python()}"
    assert ("s = s.tile(('n2', 'k'), (4, 4), (2, 2), "
            "names=(('A', 'B', 'C'), ('D', 'E', 'F')))") in code
    scope: dict[str, Any] = {"polyopt": polyopt, "source": MM}
    exec(code, scope)
    assert str(scope["s"]) == str(s)
    isl_code = polyopt.schedule(MM, auto="isl").parallel("m").as_python()
    assert "auto='isl'" in isl_code and "s = s.parallel('m')" in isl_code


@cc
def test_the_automatic_schedule_round_trips() -> None:
    for src in (MM, ROWNORM, TWOMM):
        auto = polyopt.schedule(src)  # the CPU pipeline: only its replayability is checked
        back = schedule_from_json(auto.as_json(), src)
        assert str(back) == str(auto)
        check_runs(back)


@pytest.mark.parametrize(("text", "message"), [
    ('{"def": "mm", "base": "program-order", "steps": [{"verb": "frobnicate", "args": []}]}',
     "unknown schedule verb 'frobnicate'; verbs: tile, split"),
    ('{"def": "mm", "base": "program-order", "steps": [{"verb": "_step", "args": []}]}',
     "unknown schedule verb '_step'"),
    ('{"def": "mm", "base": "program-order", "steps": [{"verb": "split", "args": ["k"]}]}',
     "bad arguments for schedule verb split\\('k'\\)"),
    ('{"def": "mm", "base": "program-order", "steps": [{"verb": "split", "args": ["k", 2], '
     '"kwargs": {"colour": 1}}]}', "bad arguments"),
    ('{"def": "mm", "base": "program-order", "steps": [{"verb": "split", "args": ["q", 2]}]}',
     "no loop named 'q'"),
    ('{"def": "mm", "steps": [{"args": ["k", 2]}]}', "not a polyopt schedule in JSON"),
    ("not json", "not a polyopt schedule in JSON"),
    ("[1, 2]", "not a polyopt schedule in JSON"),
])
def test_bad_schedule_json_raises_schedule_error(text: str, message: str) -> None:
    with pytest.raises(ScheduleError, match=message):
        schedule_from_json(text, MM)


def test_illegal_json_step_raises_illegal_schedule_error() -> None:
    text = json.dumps({"def": "mm", "base": "program-order",
                       "steps": [{"verb": "reorder", "args": ["k", "n2"]},
                                 {"verb": "parallel", "args": ["k"]}]})
    with pytest.raises(IllegalScheduleError, match="loop k carries a dependence"):
        schedule_from_json(text, MM)


# ------------------------------------------------------------ 6. size-generic schedules

@cc
def test_a_size_generic_schedule_serves_several_shapes(mm0: Schedule) -> None:
    s = mm0.tile(("m2", "n2"), 4).split("k", 3).parallel("m2_o")
    kernel = polyopt.compile(MM, schedule=s)
    for shape, seed in [((7, 13, 5), 0), ((13, 4, 9), 1)]:
        inputs, want, red = mm_case(*shape)(np.random.default_rng(seed))
        assert_close(kernel(*inputs), want, red)
    assert len(kernel._variants) == 2
    par = polyopt.compile(MM, schedule=s, parametric=True)
    for shape, seed in [((7, 13, 5), 2), ((9, 2, 11), 3)]:
        inputs, want, red = mm_case(*shape)(np.random.default_rng(seed))
        assert_close(par(*inputs), want, red)
    assert len(par._variants) == 1
    assert "s_M = dims[0]" in par.source


@cc
def test_a_schedule_made_at_fixed_sizes() -> None:
    sizes = {"M": 7, "K": 13, "N": 5}
    s = polyopt.schedule(MM, auto=False, sizes=sizes).fuse("m", "m2").fuse("n", "n2")
    s = s.shift("k", 1, stmts=["C_0"]).distribute("n")
    check_runs(s, sizes=sizes)
    with pytest.raises(ScheduleError, match="was made for M=7, K=13, N=5"):
        polyopt.compile(MM, schedule=s)


def test_a_schedule_for_another_def_is_refused(mm0: Schedule) -> None:
    with pytest.raises(ScheduleError, match="the schedule is for def 'mm'"):
        polyopt.compile(PREFIX, schedule=mm0)


# ------------------------------------------------------------------- 7. random sequences

LOOP_VERBS = ("split", "tile", "reorder", "interchange", "parallel", "reverse", "unroll",
              "vectorize", "skew", "unroll_and_jam")


@st.composite
def verb_calls(draw: st.DrawFn) -> list[tuple[str, int, int, int]]:
    """Verbs with loop picks as indices into the loops of the schedule at that step."""
    n = draw(st.integers(1, 4))
    return [(draw(st.sampled_from(LOOP_VERBS)), draw(st.integers(0, 20)),
             draw(st.integers(0, 20)), draw(st.integers(-1, 5))) for _ in range(n)]


def _apply(s: Schedule, call: tuple[str, int, int, int]) -> Schedule:
    verb, a, b, factor = call
    loops = s.loops
    x, y = loops[a % len(loops)], loops[b % len(loops)]
    if verb in ("split", "unroll", "unroll_and_jam"):
        return getattr(s, verb)(x, factor)
    if verb == "tile":
        return s.tile((x, y), factor)
    if verb == "reorder":
        return s.reorder(y, x)
    if verb in ("interchange", "skew"):
        return getattr(s, verb)(x, y)
    return getattr(s, verb)(x)


@cc
@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(calls=verb_calls(), isl_base=st.booleans())
def test_random_verb_sequences_are_legal_or_refused(
        mm0: Schedule, mm_isl: Schedule, calls: list[tuple[str, int, int, int]],
        isl_base: bool) -> None:
    s = mm_isl if isl_base else mm0
    for i, call in enumerate(calls):
        before = snapshot(s)
        try:
            new = _apply(s, call)
        except ScheduleError:  # also IllegalScheduleError
            assert snapshot(s) == before
            continue
        assert snapshot(s) == before
        assert new.steps[:-1] == s.steps
        s = new
        check_runs(s, mm_case(7, 6, 5), seed=i, parametric=True)


def test_compute_at_moves_a_producer_and_a_consumer_into_a_tile() -> None:
    src = """def f(float(M,K) A, float(K,N) B, float(N) b) -> (Y) local (C) {
        C(m,n) +=! A(m,r_k) * B(r_k,n)
        Y(m,n)  = fmax(C(m,n) + b(n), 0)
    }"""
    sizes = {"M": 9, "K": 5, "N": 7}  # size-generic, K = 0 would leave the init unplaced
    s = polyopt.schedule(src, auto=False, sizes=sizes)
    names = [lp.name for lp in s.root.children]  # the init, the product, the epilogue
    t = s.split("m2", 4).compute_at(names[0], "m2_o").compute_at(names[2], "m2_o")
    assert isinstance(t.root, Loop) and t.root.name == "m2_o"  # one nest left
    assert ".compute_at(" in t.as_python()
    with pytest.raises(ScheduleError, match="not every instance"):
        polyopt.schedule(src, auto=False).split("m2", 4).compute_at(names[0], "m2_o")
    rng = np.random.default_rng(4)
    a, b_, bias = (rng.standard_normal(sh).astype(np.float32) for sh in ((9, 5), (5, 7), (7,)))
    got = polyopt.compile(src, sizes=sizes, schedule=t)(a, b_, bias)
    np.testing.assert_allclose(got, np.maximum(a @ b_ + bias, 0), rtol=1e-5, atol=1e-5)


def test_compute_at_refuses_what_breaks_a_dependence_or_is_not_a_nest() -> None:
    src = """def f(float(N) A) -> (B, C) {
        B(i) = A(i) * 2
        C(i) = B(N - 1 - i)
    }"""
    s = polyopt.schedule(src, auto=False, sizes={"N": 6})
    first, second = (lp.name for lp in s.root.children)
    with pytest.raises(ScheduleError):
        s.compute_at(first, first)
    moved = s.compute_at(first, second)  # each B(i) is produced where C first needs it
    x = np.arange(6, dtype=np.float32)
    b, c = polyopt.compile(src, sizes={"N": 6}, schedule=moved)(x)
    np.testing.assert_array_equal(b, 2 * x)
    np.testing.assert_array_equal(c, (2 * x)[::-1])


def test_schedule_from_json_old_name_warns_and_replays() -> None:
    """``Schedule.from_json`` (the old name) still replays, for one release, and says where the
    replay lives now."""
    s = polyopt.schedule(MM, sizes={"M": 4, "K": 3, "N": 5}).tile("m", 2)
    with pytest.warns(DeprecationWarning, match="polyopt.schedule_from_json"):
        again = Schedule.from_json(s.as_json(), MM, sizes={"M": 4, "K": 3, "N": 5})
    assert str(again) == str(s)
