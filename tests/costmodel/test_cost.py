"""The loop-order cost model (costmodel/cost.py) and the orders it picks (pipeline/order.py)."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import polyopt
from polyopt import kernels
from polyopt.costmodel import cost, strides
from polyopt.costmodel.cost import Estimate
from polyopt.costmodel.machine import Machine
from polyopt.costmodel.verdict import compare
from polyopt.pipeline import order
from polyopt.pipeline.fusion import nests
from polyopt.pipeline.policy import cpu_policy
from polyopt.schedules import transform as tf
from polyopt.schedules.memo import Memo
from polyopt.schedules.nest import chain_of

COLSUM = "def colsum(float(N,M) A) -> (s) { s(j) +=! A(r_i,j) }"
ROWSUM = "def rowsum(float(N,M) A) -> (s) { s(i) +=! A(i,r_j) }"
TRANSPOSE = "def tr(float(N,M) A) -> (B) { B(j,i) = A(i,j) }"
MIDDLE = "def mid(float(P,Q,R) X) -> (s) { s(i,k) +=! X(i,r_j,k) }"
BLUR = """def blur(float(H,W) I) -> (T, O) {
  T(y,x) = (I(y,x) + I(y,x+1) + I(y,x+2)) / 3.0 where y in 0:H, x in 0:W-2
  O(y,x) = (T(y,x) + T(y+1,x) + T(y+2,x)) / 3.0 where y in 0:H-2, x in 0:W-2
}"""
MIXED = """def mixed(float(N,M) A, float(M,N) B, int32(N) idx) -> (C) {
  C(i,j) = A(i,j) + B(j,i) + A(0,j) + A(idx(i),j)
}"""
POLICY = cpu_policy(Machine(64, 32, cores=2, l1d_bytes=48 << 10, l2_bytes=2 << 20,
                            l3_bytes=32 << 20))


def _strides(src, sizes, loop):
    s = polyopt.schedule(src, auto=False, sizes=sizes)
    lp = tf.find(s.root, loop)
    path = [n for n in tf.path_to(s.root, tf.find(s.root, "j")) if isinstance(n, type(lp))]
    (name,) = tf.stmts_of(lp)
    stmt = s.poly.stmt(name)
    step = strides.step_map(path, lp, stmt)
    return [strides.stride(s.poly, a, step) for a in strides.accesses(s.poly, name)]


def test_stride_classes():
    # reads in source order (a gather's index read after it), then the write
    inner = _strides(MIXED, dict(N=32, M=48), "j")
    assert [st.kind for st in inner] == ["unit", "strided", "unit", "gather", "invariant",
                                         "unit"]
    assert inner[1].bytes == 32 * 4  # B(j, i) along j: one row of B
    outer = _strides(MIXED, dict(N=32, M=48), "i")
    assert [st.kind for st in outer] == ["strided", "unit", "invariant", "gather", "unit",
                                         "strided"]
    assert outer[0].bytes == 48 * 4


def test_footprints_in_lines():
    s = polyopt.schedule(COLSUM, auto=False, sizes=dict(N=64, M=64))
    ctx = cost._Ctx(s.poly, POLICY.machine)
    top = tf.find(s.root, "j2")
    inner = tf.find(s.root, "i")
    # one column of A (64 rows, a line each) and one element of s
    assert cost.footprint(ctx, inner, [top], 64) == 64 + 1
    # the whole nest: A is 64 x 64 floats = 256 lines, s 64 floats = 4 lines
    assert cost.footprint(ctx, top, [], 64) == 256 + 4
    # in pages: A is 16 KB, four pages; a column touches all four (rows share pages)
    assert cost.footprint(ctx, inner, [top], 4096) == 4 + 1
    # a row of A: 64 floats, four lines
    rows = s.reorder("i", "j2")
    ctx = cost._Ctx(rows.poly, POLICY.machine)
    assert cost.footprint(ctx, tf.find(rows.root, "j2"), [tf.find(rows.root, "i")], 64) == 8


def test_column_walk_costs_more_than_row_walk():
    """On one core (no fork/join inside the row loop): a column walk of 4096 rows of 16 KB
    takes a page walk per element."""
    s = polyopt.schedule(COLSUM, auto=False, sizes=dict(N=4096, M=4096))
    serial = {"parallel": lambda lp: False, "parallel_trips": POLICY.parallel_trips}
    by_column = cost.estimate(s.poly, tf.find(s.root, "j2"), POLICY.machine, **serial)
    rows = s.reorder("i", "j2")
    by_row = cost.estimate(rows.poly, tf.find(rows.root, "i"), POLICY.machine, **serial)
    assert by_column is not None and by_row is not None
    assert by_row.vector == ("j2",) and by_column.vector == ()
    assert by_row.cycles * 4 < by_column.cycles


def test_a_parallel_loop_takes_the_time_of_its_busiest_core():
    """OpenMP's static schedule gives 5 rows to 2 cores as 3 and 2: the nest takes 3 rows'
    time, as 6 rows do, not 2.5 rows' (the speedup is 5/3, not 2)."""
    scale = "def scale(float(A,B) X) -> (Y) { Y(a,b) = X(a,b) * 2.0 }"
    # memory fast enough that the cores' work, not the shared bandwidth, sets the time
    policy = cpu_policy(dataclasses.replace(POLICY.machine, memory_bytes_per_cycle=1e3))
    core = {}
    for rows in (5, 6):
        s = polyopt.schedule(scale, auto=False, sizes=dict(A=rows, B=1 << 16))
        est = cost.estimate(s.poly, s.root, policy.machine, parallel_trips=policy.parallel_trips)
        assert est is not None and est.parallel == "a"
        core[rows] = est.core
    assert core[5] == pytest.approx(core[6], rel=0.01)


def test_unknown_sizes_leave_the_model_out():
    s = polyopt.schedule(COLSUM, auto=False)
    assert cost.estimate(s.poly, tf.find(s.root, "j2"), POLICY.machine,
                         parallel_trips=POLICY.parallel_trips) is None


def _loops(s):
    """(name, tags) of every loop, outermost first."""
    from polyopt.schedules.tree import loops
    return [(lp.name, {str(t) for t in lp.tags}) for lp in loops(s.root)]


def test_colsum_runs_rows_inside_parallel_strips():
    """4 cores: strips of columns in parallel, the rows inside them, a strip row vectorized.
    2 cores: the same strips read 4096 runs of 4 KB as streams, which the model prices at
    what one core pulls from one stream (4.0 against 4.1 ms measured); either way no
    parallel loop forks once per row."""
    four = {**_MACHINE, "cores": 4}
    s = polyopt.schedule(COLSUM, sizes=dict(N=4096, M=4096), options={"machine": four})
    verbs = [st.verb for st in s.steps]
    assert verbs[0] == "distribute" and "split" in verbs and "reorder" in verbs
    nest = _loops(s)[1:]
    assert [n for n, _ in nest] == ["j2_o", "i", "j2_i"]
    assert "parallel" in nest[0][1] and "vectorize" in nest[2][1]
    assert any("distribute" in n for n in s.notes) and any("next" in n for n in s.notes)
    two = polyopt.schedule(COLSUM, sizes=dict(N=4096, M=4096), options={"machine": _MACHINE})
    nest = _loops(two)[1:]
    assert [n for n, _ in nest] == ["i", "j2"] and "vectorize" in nest[1][1]
    assert not any("parallel" in tags for _, tags in nest)
    assert any("forks and joins, or the memory" in n for n in two.notes)


# every field the decisions read, so that no test depends on the host's caches (a VM may
# report a whole chip's L3, 480 MiB, as its own)
_MACHINE = {"vector_bytes": 64, "vector_registers": 32, "cores": 2, "line_bytes": 64,
            "l1d_bytes": 48 << 10, "l1d_ways": 8, "l2_bytes": 2 << 20, "l3_bytes": 32 << 20}


def test_strip_follows_the_cores():
    """More cores need more strips: the model's strip halves from 4 to 8 cores."""
    four = polyopt.schedule(COLSUM, sizes=dict(N=4096, M=4096),
                            options={"machine": {**_MACHINE, "cores": 4}})
    eight = polyopt.schedule(COLSUM, sizes=dict(N=4096, M=4096),
                             options={"machine": {**_MACHINE, "cores": 8}})
    strip4 = [st.args[1] for st in four.steps if st.verb == "split"]
    strip8 = [st.args[1] for st in eight.steps if st.verb == "split"]
    assert strip4 == [512] and strip8 == [256]


def test_rowsum_and_transpose_keep_their_order():
    rs = polyopt.schedule(ROWSUM, sizes=dict(N=2048, M=2048), options={"machine": _MACHINE})
    assert [st.verb for st in rs.steps] == ["vectorize", "parallel"]
    assert "order kept" in rs.notes[0] and "cycles" in rs.notes[0]
    tr = polyopt.schedule(TRANSPOSE, sizes=dict(N=2048, M=2048), options={"machine": _MACHINE})
    assert tr.steps[0].verb == "tile" and "order kept" in tr.notes[0]


def test_blur_walks_rows():
    s = polyopt.schedule(BLUR, sizes=dict(H=2050, W=2050), options={"machine": _MACHINE})
    assert s.steps[0].verb == "distribute"
    nest = _loops(s)
    assert [n for n, _ in nest] == ["y", "x", "y2", "x2"]
    assert "vectorize" in nest[1][1] and "vectorize" in nest[3][1]
    assert "parallel" in nest[0][1]


def test_middle_axis_reduction_vectorizes_the_last_axis():
    s = polyopt.schedule(MIDDLE, sizes=dict(P=1, Q=2048, R=2048), options={"machine": _MACHINE})
    nest = _loops(s)
    assert [n for n, _ in nest][-3:] == ["k2_o", "j", "k2_i"]
    assert "parallel" in nest[-3][1] and "vectorize" in nest[-1][1]


@pytest.mark.parametrize("k", [1, 2, 4, 5])
def test_reads_strided_by_a_few_elements_vectorize(k):
    src = f"def s(float(N) I) -> (O) {{ O(i) = I({k}*i) + I(0) where i in 0:N/{k} }}"
    s = polyopt.schedule(src, auto=False, sizes=dict(N=1000))
    lp = tf.find(s.root, "i")
    (name,) = tf.stmts_of(lp)
    loads = cost.vector_loads(s.poly, s.poly.stmt(name), [lp], cost.MAX_VECTOR_STRIDE)
    assert loads == (None if k > cost.MAX_VECTOR_STRIDE else k + 1)  # and I(0), invariant
    assert cost.vectorizes(s.poly, s.poly.stmt(name), [lp]) == (k == 1)


POOLS = [(3, 2, 1, dict(N=1, C=64, H=112, W=112)), (2, 2, 0, dict(N=1, C=128, H=128, W=128))]


@pytest.mark.parametrize("k,stride,pad,sizes", POOLS)
def test_pooling_runs_its_window_outside_the_row(k, stride, pad, sizes):
    """The init's row apart (distributed at w), the taps outside the row: each tap one
    vector pass over an output row, its input read at stride 2 (the window innermost ran a
    simd reduction of 2-3 elements per output)."""
    src = kernels.get("maxpool2d", kernel_size=k, stride=stride, padding=pad)
    s = polyopt.schedule(src, sizes=sizes, options={"machine": _MACHINE})
    assert any("distribute at w" in n for n in s.notes)
    names = [n for n, _ in _loops(s)]
    tags = dict(_loops(s))
    y = names.index("y")
    assert names[y + 1] == "x" and "vectorize" in tags[names[y + 2]]


@pytest.mark.parametrize("k,stride,pad,sizes", POOLS)
def test_pooling_against_numpy(k, stride, pad, sizes):
    sizes = {**sizes, "C": 3, "H": sizes["H"] // 4 + 3, "W": sizes["W"] // 4 + 1}
    src = kernels.get("maxpool2d", kernel_size=k, stride=stride, padding=pad)
    x = np.random.default_rng(2).standard_normal(tuple(sizes.values())).astype(np.float32)
    x[0, 0, 1, 2], x[0, 1, 0, 0], x[0, 2, -1, -1] = np.nan, np.inf, -np.inf
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)), constant_values=-np.inf)
    ho, wo = ((e + 2 * pad - k) // stride + 1 for e in x.shape[2:])
    want = np.full((1, 3, ho, wo), -np.inf, np.float32)
    hs, ws = stride * (ho - 1) + 1, stride * (wo - 1) + 1
    for dy in range(k):
        for dx in range(k):
            want = np.maximum(want, xp[:, :, dy:dy + hs:stride, dx:dx + ws:stride])
    kernel = polyopt.compile(src, sizes=sizes, options={"machine": _MACHINE})
    np.testing.assert_array_equal(kernel(x), want)


def test_notes_print_and_survive_json():
    s = polyopt.schedule(COLSUM, sizes=dict(N=4096, M=4096), options={"machine": _MACHINE})
    assert "# why: " in str(s) and "# j" in s.as_python()
    again = polyopt.schedule_from_json(s.as_json(), COLSUM, sizes=dict(N=4096, M=4096))
    assert again.steps == s.steps and again.notes == s.notes


CASES = [
    (COLSUM, dict(N=300, M=700), lambda A: A.sum(0)),
    (ROWSUM, dict(N=300, M=700), lambda A: A.sum(1)),
    (TRANSPOSE, dict(N=300, M=700), lambda A: A.T),
    (MIDDLE, dict(P=3, Q=200, R=300), lambda X: X.sum(1)),
    (MIDDLE, dict(P=1, Q=600, R=1000), lambda X: X.sum(1)),
]


@pytest.mark.parametrize("src,sizes,ref", CASES)
def test_against_numpy(src, sizes, ref):
    rng = np.random.default_rng(0)
    shape = tuple(sizes.values())
    x = rng.random(shape, dtype=np.float32)
    k = polyopt.compile(src, sizes=sizes)
    np.testing.assert_allclose(k(x), ref(x), rtol=1e-4, atol=1e-3)


def test_blur_against_numpy():
    rng = np.random.default_rng(1)
    img = rng.random((130, 260), dtype=np.float32)
    k = polyopt.compile(BLUR, sizes=dict(H=130, W=260))
    t, o = k(img)
    t_ref = (img[:, :-2] + img[:, 1:-1] + img[:, 2:]) / np.float32(3)
    np.testing.assert_allclose(t, t_ref, rtol=1e-5)
    np.testing.assert_allclose(o, (t_ref[:-2] + t_ref[1:-1] + t_ref[2:]) / np.float32(3),
                               rtol=1e-5)


OUTER_AXIS = "def sum0(float(A,B,C) X) -> (Y) { Y(b,c) +=! X(r_a,b,c) }"


def test_outer_axis_sum_keeps_whole_rows_under_a_parallel_loop():
    """Strips of the rows and whole rows under the parallel loop ``b`` wait on the same
    stream of X; whole rows keep the output's row in L1 and touch fewer pages, so the cores'
    own cycles (``Estimate.core``) break the tie for them."""
    sizes = dict(A=16, B=256, C=512)
    s = polyopt.schedule(OUTER_AXIS, sizes=sizes, options={"machine": _MACHINE})
    nest = _loops(s)
    assert [n for n, _ in nest] == ["b", "c", "a", "c2"]
    assert "parallel" in nest[0][1] and "vectorize" in nest[3][1]
    assert not any(st.verb == "split" for st in s.steps)
    assert any("per core" in n and "next split" in n for n in s.notes)
    x = np.random.default_rng(0).random((16, 256, 512), dtype=np.float32)
    k = polyopt.compile(OUTER_AXIS, sizes=sizes, schedule=s)
    np.testing.assert_allclose(k(x), x.sum(0), rtol=1e-5)


POOL = """def pool(float(N,C,H,W) I) -> (O) {
  O(n,c,h,w) max=! I(n,c,2*h+r_kh,2*w+r_kw) where r_kh in 0:3, r_kw in 0:3
}"""


@pytest.mark.parametrize("src, sizes", [
    (POOL, dict(N=2, C=8, H=15, W=15)),
    (BLUR, dict(H=130, W=130)),
    (MIDDLE, dict(P=4, Q=64, R=96)),
])
def test_memos_give_what_a_fresh_model_gives(src, sizes, monkeypatch):
    """The model's memos (keyed by the loops' functions, shared by the candidate orders of a
    nest) change no estimate: each candidate of each chain, estimated again with no memo
    (a memo of no entries forgets at once), is the same."""
    s = polyopt.schedule(src, auto=False, sizes=sizes)
    chains = [chain_of(top) for top in nests(s.root)]
    kept = [order.candidates(s, ch, POLICY) for ch in chains]
    assert sum(len(plans) for plans in kept) > 1
    for module in (cost, strides):
        for name in [n for n in vars(module) if isinstance(getattr(module, n), Memo)]:
            monkeypatch.setattr(module, name, Memo(0))
    assert [order.candidates(s, ch, POLICY) for ch in chains] == kept


def test_two_nests_waiting_on_memory_are_weighed_with_their_cores_work():
    """From memory, a roofline's max hides the cores' work: 1.69e7 against 1.70e7 cycles,
    both waiting on memory, goes to the one whose cores do less (a blur's 21 rows with its
    tap unrolled over 23 without, 12 against 22 ms); from cache, the prediction decides."""
    tiled = Estimate(1.70e7, 8.7e6, (), "i", (), 4.4e6, None)
    loop = Estimate(1.69e7, 1.16e7, (), "i", (), 5.8e6, None)
    assert compare(tiled, loop).first_no_slower and not compare(loop, tiled).first_no_slower
    warm = [Estimate(e.cycles, e.compute, (), "i", (), e.core, e.cycles) for e in (tiled, loop)]
    assert compare(warm[1], warm[0]).first_no_slower
    assert not compare(warm[0], warm[1]).first_no_slower
