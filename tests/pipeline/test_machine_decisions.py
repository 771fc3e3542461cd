"""Synthetic machine descriptions change the CPU pipeline's decisions the way its model says
(issue 15 item 4): each test states the model's prediction, then reads the decision from the
schedule's steps and notes. The machines are written out in full, so no test depends on the
host."""

from __future__ import annotations

import polyopt
from polyopt.costmodel import cost
from polyopt.costmodel.machine import Machine, gemm_blocking
from polyopt.pipeline.policy import cpu_policy
from polyopt.schedules.tree import loops

MM = "def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,r_k) * B(r_k,n) }"
BMM = "def bmm(float(B,M,K) X, float(B,K,N) Y) -> (Z) { Z(b,m,n) +=! X(b,m,r_k) * Y(b,r_k,n) }"
AVX512 = "vector_bytes=64,vector_registers=32,cores=2,l1d_bytes=48K,l2_bytes=2M,l3_bytes=32M"
AVX2 = "vector_bytes=32,vector_registers=16,cores=2,l1d_bytes=32K,l2_bytes=512K,l3_bytes=8M"


def schedule(src: str, sizes: dict[str, int], machine: str,
             knobs: dict[str, object] | None = None) -> polyopt.Schedule:
    return polyopt.schedule(src, sizes=sizes, options={"machine": machine, "knobs": knobs})


def tile_note(s: polyopt.Schedule) -> str:
    return next(n for n in s.notes if "register tile" in n)


def test_register_tile_follows_the_vector_registers() -> None:
    """16 registers of 8 floats hold 6 x 2 accumulators, 2 B vectors and a broadcast (the
    BLIS Haswell kernel); 32 registers of 16 floats 14 x 2 (the Skylake-X kernel). 504
    rows, which both divide: fewer rows that leave no partial tile are not weighed."""
    sizes = {"M": 504, "N": 512, "K": 512}
    assert "register tile 6x16 (2 vectors of 8 lanes)" in tile_note(schedule(MM, sizes, AVX2))
    assert "register tile 14x32 (2 vectors of 16 lanes)" in tile_note(
        schedule(MM, sizes, AVX512))


def test_fma_latency_asks_for_more_accumulators() -> None:
    """An FMA latency of 8 on 2 pipes needs 16 independent accumulators. AVX-512's 14 x 2
    vector tile (28) has them. AVX2's 6 x 2 (12, enough for latency 4) does not, and no tile
    within 16 registers does: the model drops the load rule, then the latency rule, and
    takes the densest tile, 14 x 1 vector (14 chains)."""
    base = Machine(64, 32, fma_latency=8)
    mr, nr = gemm_blocking(base, 4).mr, gemm_blocking(base, 4).nr
    assert mr * nr // 16 >= 16
    avx2 = [gemm_blocking(Machine(32, 16, fma_latency=lat), 4) for lat in (4, 8)]
    assert [(b.mr, b.nr) for b in avx2] == [(6, 16), (14, 8)]


def test_a_smaller_l1_packs_an_operand_that_no_longer_stays_there() -> None:
    """A's 24 x 96 floats (9 KB) fit in half of a 48 KB L1, not of a 16 KB one (the
    packing rule's decision: the rows fixed, the cost model weighs no other plan)."""
    sizes, rows = {"M": 24, "N": 3136, "K": 96}, {"mr": 12}
    assert "leaves A" in tile_note(schedule(MM, sizes, AVX512, rows))
    assert "packs A" in tile_note(schedule(MM, sizes, AVX512.replace("48K", "16K"), rows))


def test_more_cores_move_the_parallel_loop_to_one_with_enough_iterations() -> None:
    """Two iterations per core: a batch of 8 feeds 2 cores (4+ iterations), not 16
    (32+ needed); then the parallel loop is the register tiles' column loop inside it."""
    sizes = {"B": 8, "M": 256, "N": 1024, "K": 64}
    two = schedule(BMM, sizes, AVX512)
    many = schedule(BMM, sizes, AVX512.replace("cores=2", "cores=16"))
    assert ("parallel", ("b",)) in [(st.verb, st.args) for st in two.steps]
    par = [st.args[0] for st in many.steps if st.verb == "parallel"]
    assert "b" not in par and par


def test_a_smaller_l2_predicts_more_traffic_beyond_it() -> None:
    """Each row of a matrix-vector product reads all of x (1 MB): a 4 MB L2 keeps x
    between rows, a 512 KB one brings it in again for each of the 8 rows."""
    mv = "def mv(float(N,M) A, float(M) x) -> (y) { y(i) +=! A(i,r_j) * x(r_j) }"
    s = polyopt.schedule(mv, auto=False, sizes={"N": 8, "M": 1 << 18})
    policies = [cpu_policy(Machine(64, 32, cores=2, l1d_bytes=48 << 10, l2_bytes=l2,
                                   l3_bytes=32 << 20)) for l2 in (4 << 20, 512 << 10)]
    moved = [dict(cost.estimate(s.poly, s.root, p.machine, parallel_trips=p.parallel_trips)
                  .traffic)["L2"] for p in policies]
    x_lines = (1 << 20) // 64
    assert abs(moved[1] - moved[0] - 7 * x_lines) <= 16  # (and a line of y per row)


def test_the_reduction_splits_only_when_its_panel_leaves_half_of_l2() -> None:
    """The column operand's panel, K x 16 floats (one-vector tiles for 16 columns): 1024
    deep is 64 KB, in half of either L2, so the reduction runs whole; 8192 deep is 512 KB,
    beyond half of a 512 KB L2, so it splits in the model's L1-sized blocks."""
    sizes = {"M": 512, "N": 16, "K": 1024}
    assert "blocks of 1024" in tile_note(schedule(MM, sizes, AVX512))
    deep = {"M": 512, "N": 16, "K": 8192}
    assert "blocks of 8192" in tile_note(schedule(MM, deep, AVX512))
    assert "blocks of 8192" not in tile_note(schedule(MM, deep, AVX512.replace("2M", "512K")))


def _tile_loops(s: polyopt.Schedule) -> list[str]:
    return [lp.name for lp in loops(s.root) if lp.name in ("m2_o", "n2_o")]


def test_row_tiles_go_outside_when_the_output_outweighs_its_operands() -> None:
    """A short reduction (K=16) makes the output the traffic: the threads take the rows
    they zeroed. A square product keeps the column tiles outside; the knob overrides."""
    skinny = schedule(MM, {"M": 512, "N": 512, "K": 16}, AVX512)
    assert _tile_loops(skinny) == ["m2_o", "n2_o"] and "row tiles outside" in tile_note(skinny)
    square = schedule(MM, {"M": 512, "N": 512, "K": 512}, AVX512)
    assert _tile_loops(square) == ["n2_o", "m2_o"]
    forced = polyopt.schedule(MM, sizes={"M": 512, "N": 512, "K": 16},
                              options={"machine": AVX512, "knobs": {"rows_outer": False}})
    assert _tile_loops(forced) == ["n2_o", "m2_o"]


def test_rows_are_cut_in_l2_blocks_when_their_operand_overflows_l2() -> None:
    """1024^3: A's 1024 rows of 4 KB overflow a 2 MB L2 (less two 128 KB panels of B), so
    they are cut in blocks that fit, as many as a multiple of the cores and at least two per
    core: 4 blocks of 32 register tiles of 8 rows (256 rows, 1 MB) on 2 cores, 8 of 16
    on 4. An 8 MB L2 holds all of A, and a 512^3 product's A fits the 2 MB one: no
    blocks."""
    sizes = {"M": 1024, "N": 1024, "K": 1024}
    two = schedule(MM, sizes, AVX512)
    assert "rows in L2 blocks of 256 (m2_c), the parallel loop" in tile_note(two)
    assert ("parallel", ("m2_c",)) in [(st.verb, st.args) for st in two.steps]
    four = schedule(MM, sizes, AVX512.replace("cores=2", "cores=4"))
    assert "rows in L2 blocks of 128 (m2_c)" in tile_note(four)
    assert "L2 blocks" not in tile_note(schedule(MM, sizes, AVX512.replace("2M", "8M")))
    assert "L2 blocks" not in tile_note(schedule(MM, {"M": 512, "N": 512, "K": 512}, AVX512))
    off = polyopt.schedule(MM, sizes=sizes, options={"machine": AVX512, "knobs": {"mc": 0}})
    assert "L2 blocks" not in tile_note(off)
