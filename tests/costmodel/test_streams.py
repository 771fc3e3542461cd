"""Memory streams (costmodel/streams.py) and what the cost model makes of them: the order of
a sum over a tensor's first axis, a register tile's rows over an input from memory, a
transposed strip's pages, and a parallel loop that would fork once per row."""
from __future__ import annotations

import numpy as np

import polyopt
from polyopt.costmodel import cost, streams
from polyopt.costmodel.machine import Machine
from polyopt.pipeline.cpu import _cache_tile
from polyopt.pipeline.policy import cpu_policy
from polyopt.schedules import transform as tf
from polyopt.schedules.nest import chain_of
from polyopt.schedules.tree import loops

MACHINE = ("vector_bytes=64,vector_registers=32,l1d_bytes=32768,l2_bytes=1048576,"
           "l3_bytes=33554432,cores=2,fma_units=2,fma_latency=4")
POLICY = cpu_policy(Machine(64, 32, cores=2, l3_bytes=32 << 20))
SUM0 = "def s(float(A,B,C) X) -> (Y) { Y(b,c) +=! X(r_a,b,c) }"
SIZES = {"A": 64, "B": 512, "C": 512}


def _walk(order: tuple[str, ...]) -> streams.Walk | None:
    s = polyopt.schedule(SUM0, sizes=SIZES, auto=False).reorder(*order)
    stmt = s.poly.stmt("Y_0")
    path = [lp for lp in loops(s.root) if "Y_0" in tf.stmts_of(lp)]
    read = next(a for a in cost.accesses(s.poly, "Y_0") if a.tensor == "X")
    return streams.walk(s.poly, stmt, [], path, read, 64)


def test_planes_read_together_are_streams() -> None:
    """``b, a, c``: the ``a`` loop reads a row of each of 64 planes, ``b`` moves them all
    on: 64 streams. ``a, b, c`` reads each plane whole: one."""
    w = _walk(("b2", "a", "c2"))
    assert w is not None and w.streams == 64 and w.at == 0
    w = _walk(("a", "b2", "c2"))
    assert w is not None and w.streams == 1 and w.at is None


def test_share_falls_past_the_prefetchers() -> None:
    p = POLICY.machine.prefetch_streams
    assert streams.share(POLICY.machine, 1) == streams.share(POLICY.machine, p) == 1.0
    assert POLICY.machine.untracked_share < streams.share(POLICY.machine, 4 * p) < streams.share(
        POLICY.machine, 2 * p) < 1.0


def test_sum_over_the_first_axis_reads_each_plane_whole() -> None:
    """64 x 512 x 512: ``a, b, c`` with ``b`` parallel inside (2.34 ms measured against
    3.91 for ``b, a, c``, 1.6-2x on one thread), and it sums like numpy."""
    s = polyopt.schedule(SUM0, sizes=SIZES, options={"machine": MACHINE})
    nest = [lp.name for lp in loops(s.root) if "Y_0" in tf.stmts_of(lp)]
    assert nest == ["a", "b2", "c2"]
    k = polyopt.compile(SUM0, sizes={"A": 8, "B": 40, "C": 48}, options={"machine": MACHINE})
    x = np.random.default_rng(0).random((8, 40, 48), dtype=np.float32)
    np.testing.assert_allclose(k(x), x.sum(0), rtol=1e-5)


def test_tile_rows_stay_within_the_streams_from_memory() -> None:
    """A 3x3 blur of 4096^2 (64 MB): the register tile's input rows (its rows and two tap
    rows) stay within the streams one core's prefetchers follow (21 rows ran 1.3x the
    time of 8-10). On 512^2 (data in cache) the streams do not count."""
    src = "def b(float(H,W) X) -> (Y) { Y(i,j) +=! X(i + r_y, j + r_x) / 9 " \
          "where r_y in 0:3, r_x in 0:3 }"
    big = polyopt.schedule(src, sizes={"H": 4096, "W": 4096}, options={"machine": MACHINE})
    note = next(n for n in big.notes if "register tile rows" in n)
    rows = int(note.split("register tile rows ")[1].split(",")[0])
    assert rows + 2 <= POLICY.machine.prefetch_streams
    small = polyopt.schedule(src, sizes={"H": 512, "W": 512}, options={"machine": MACHINE})
    note = next(n for n in small.notes if "register tile rows" in n)
    assert int(note.split("register tile rows ")[1].split(",")[0]) > POLICY.machine.prefetch_streams


def test_a_transposed_strip_of_rows_pages_apart_is_cut() -> None:
    """Strips of ``c`` above ``a`` whose rows are 256 KB apart: 128 pages a strip row, more
    than the first TLB level holds; ``a`` is cut in strips too."""
    src = "def p(float(A,B,C) X) -> (Y) { Y(c,b,a) = X(a,b,c) }"
    s = polyopt.schedule(src, sizes={"A": 128, "B": 256, "C": 256}, auto=False)
    s = s.reorder("c", "b", "a")
    out, inner = _cache_tile(s, chain_of(tf.find(s.root, "c")), POLICY)
    assert inner == "a_i" and any("first TLB level" in n for n in out.notes)
    names = [lp.name for lp in loops(out.root)]
    assert names == ["c_o", "b", "a_o", "c_i", "a_i"]
