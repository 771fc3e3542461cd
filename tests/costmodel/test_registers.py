"""The register level of the CPU cost model (``polyopt.costmodel.registers``) and the decision
it makes: a contraction is register-tiled when the model predicts the micro-kernel faster
than the plain nest in its best order (``cpu._faster``), not because it is a contraction."""

from __future__ import annotations

import numpy as np
import pytest

import polyopt
from polyopt import kernels
from polyopt.costmodel import cost, registers
from polyopt.costmodel.machine import Machine
from polyopt.pipeline.fusion import nests
from polyopt.pipeline.knobs import Knobs
from polyopt.pipeline.policy import cpu_policy
from polyopt.pipeline.register_tile import rows_in_ways
from polyopt.schedules.marks import Tag
from polyopt.schedules.nest import UNKNOWN_TRIP
from polyopt.schedules.tree import Loop, Node, leaf_paths, stmts_of
from polyopt.tuning.space import space_for

MACHINE = ("vector_bytes=64,vector_registers=32,l1d_bytes=32768,l2_bytes=1048576,"
           "l3_bytes=33554432,cores=2,fma_units=2,fma_latency=4")
AVX512 = Machine(vector_bytes=64, vector_registers=32, cores=2, l3_bytes=32 << 20)
TRIPS = cpu_policy(AVX512).parallel_trips  # the pipeline's parallel loop: 2 per core
MM = "def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,r_k) * B(r_k,n) }"
SIZES = {"M": 192, "N": 256, "K": 128}


def _path_to(root: Node, tag: Tag) -> list[Loop]:
    """The loops above the first statement with a loop tagged ``tag`` above it."""
    return next(path for _, path in leaf_paths(root) if any(tag in lp.tags for lp in path))


def _tile_path(root: Node) -> list[Loop]:
    """The loops above the statement of the nest holding an unrolled loop."""
    return _path_to(root, Tag.UNROLL)


@pytest.mark.parametrize(("mr", "vectors", "step"), [
    (2, 1, 4.0),    # 2 accumulators: each waits the FMA latency (4 cycles) per step
    (8, 2, 8.0),    # 16 accumulators: 16 FMAs on 2 pipes; 8 + 2 loads on 2 ports: 5
    # 14 broadcasts and one vector of B, read in place (numpy aligns to 16 bytes: 3 of 4
    # vectors straddle two lines, 1.75 load slots): 15.75 slots on 2 ports, over 7 FMA cycles
    (14, 1, 7.875),
])
def test_a_step_costs_its_slowest_bound(mr: int, vectors: int, step: float) -> None:
    """One step of the micro-kernel's reduction loop costs the most of its FMA pipes' time,
    its loads' and its accumulators' latency (the module docstring of registers.py)."""
    s = polyopt.schedule(MM, sizes=SIZES, options={
        "machine": MACHINE, "knobs": {"mr": mr, "nr": 16 * vectors, "pack": False}})
    path = _tile_path(s.root)
    stmt = s.poly.stmt(path[-1].child.stmts[0])  # type: ignore[union-attr]
    at = registers.tile_at(s.poly, stmt, path)
    assert at is not None and at.tile.rows == len(path) - 2
    assert registers.step_cycles(s.poly, AVX512, stmt, path, at, vectors) == step


def test_accumulators_beyond_the_registers_are_priced_as_the_plain_nest() -> None:
    """12 rows of 4 vectors need 48 accumulators on 32 registers: the compiler keeps them
    in memory, so the model has no register level for the tile (None) and prices the
    nest as plain loops; 6 x 4 (24) still run in registers and predict faster."""
    cycles = {}
    for mr in (6, 12):
        s = polyopt.schedule(MM, sizes=SIZES, options={
            "machine": MACHINE, "knobs": {"mr": mr, "nr": 64, "pack": False}})
        path = _tile_path(s.root)
        stmt = s.poly.stmt(path[-1].child.stmts[0])  # type: ignore[union-attr]
        at = registers.tile_at(s.poly, stmt, path)
        assert at is not None
        step = registers.step_cycles(s.poly, AVX512, stmt, path, at, 4)
        assert (step is None) == (mr == 12)
        est = cost.estimate(s.poly, s.root, AVX512, parallel_trips=TRIPS)
        assert est is not None
        cycles[mr] = est.cycles
    assert cycles[12] > 2 * cycles[6]


def test_a_product_added_is_one_fused_operation() -> None:
    s = polyopt.schedule(MM, sizes=SIZES)
    stmt = next(st for st in s.poly.stmts if st.kind == "update" and st.stmt.tensor == "C")
    assert registers.kernel_ops(stmt) == registers.Ops(1.0, (0.0, 0.0))


@pytest.mark.cc
def test_matmul_is_register_tiled_because_the_model_predicts_it_faster() -> None:
    k = polyopt.compile(MM, sizes=SIZES, options={"machine": MACHINE})
    notes = [n for n in k.schedule.notes if "register tile: predicted" in n]
    assert notes and "the plain nest" in notes[0], k.schedule.notes
    plain = polyopt.compile(MM, sizes=SIZES, options={
        "machine": MACHINE, "knobs": {"register_tile": False}})
    assert not any(Tag.UNROLL in plain.schedule.loop(n).tags for n in plain.schedule.loops)
    rng = np.random.default_rng(0)
    a = rng.random((192, 128), dtype=np.float32)
    b = rng.random((128, 256), dtype=np.float32)
    for kern in (k, plain):
        np.testing.assert_allclose(kern(a, b), a.astype(np.float64) @ b, rtol=1e-4)


def test_a_triangular_tile_is_no_micro_kernel() -> None:
    """trmm's reduction starts past the row (r_k in i+1:M): the tile's rows change with
    the reduction step, the printer keeps no accumulators in registers, the model does not
    price it as a micro-kernel, and the plain nest is predicted (and measured, 60x80:
    ~equal, 500x600: 1.8 ms against 19.7) faster."""
    src = kernels.get("polybench_trmm")
    sizes = {"M": 60, "N": 80}
    tiled = polyopt.schedule(src, "polybench_trmm", sizes=sizes, options={
        "machine": MACHINE, "knobs": {"register_tile": True}})
    path = _tile_path(tiled.root)
    stmt = tiled.poly.stmt(path[-1].child.stmts[0])  # type: ignore[union-attr]
    tile = registers.micro_kernel(path, stmt)
    assert tile is not None
    assert not registers.rectangular(stmt.domain, path, tile, stmt.name)
    assert cost._in_registers(cost._Ctx(tiled.poly, AVX512), stmt, path) is None
    default = polyopt.schedule(src, "polybench_trmm", sizes=sizes, options={"machine": MACHINE})
    assert any("no register tile: the plain nest is predicted" in n for n in default.notes)


def test_a_register_knob_asks_for_the_register_tile() -> None:
    assert Knobs(mr=4).register_tiled is True
    assert Knobs(mr=4, register_tile=False).register_tiled is False
    assert Knobs().register_tiled is None


def test_the_tuner_space_has_the_decision() -> None:
    space = space_for(MM, None, SIZES, "c", AVX512)
    assert dict(space.knobs)["register_tile"] == (None, True, False)


def _tiled(sizes: dict[str, int], pack: bool) -> tuple[polyopt.Schedule, registers.Share,
                                                       tuple[float, registers.Share] | None]:
    """MM at ``sizes`` in register tiles of 8 x 16, ``pack`` or not: the schedule,
    kernel_share, and the cost model's (cycles per instance, share) of the micro-kernel."""
    s = polyopt.schedule(MM, sizes=sizes, options={
        "machine": MACHINE, "knobs": {"mr": 8, "nr": 16, "pack": pack}})
    path = _tile_path(s.root)
    stmt = s.poly.stmt(path[-1].child.stmts[0])  # type: ignore[union-attr]
    tile = registers.micro_kernel(path, stmt)
    assert tile is not None
    padded = frozenset(s.buffers)
    assert bool(padded) == pack
    share = registers.kernel_share(s.poly, stmt, path, tile, 8, 16, padded)
    ctx = cost._Ctx(s.poly, AVX512, padded)
    return s, share, cost._in_registers(ctx, stmt, path)


def _partial_tiles(pack: bool) -> tuple[registers.Share, tuple[float, registers.Share] | None]:
    """100 x 56 outputs in register tiles of 8 x 16 (``_tiled``)."""
    _, share, got = _tiled({"M": 100, "N": 56, "K": 64}, pack)
    return share, got


def test_partial_tiles_are_priced_as_plain_loops() -> None:
    """100 rows in tiles of 8 and 56 columns in tiles of 16: 96/100 x 48/56 of the
    instances run in full tiles; the rest print as plain loops (tilematch takes constant
    trips only) and cost what the plain vector loop does, so the nest's compute lies between
    the micro-kernel's and the plain loop's. The last 8 columns are a vector loop 8 wide
    (``Share.tail``), priced at its own width."""
    share, got = _partial_tiles(pack=False)
    assert (share.kernel, share.work) == pytest.approx((96 / 100 * 48 / 56, 1.0))
    assert (share.tail, share.tail_cols) == (pytest.approx(8 / 56), 8)
    assert got is not None and got[1] == share


def test_partial_tiles_over_packed_operands_run_in_the_kernel() -> None:
    """Packed, both operands are zero-padded to whole tiles: the partial tiles print as the
    micro-kernel on a scratch tile (``Emitter.edge_lines``), every instance runs there, and
    the kernel computes 104 x 64 outputs for 100 x 56."""
    share, got = _partial_tiles(pack=True)
    assert (share.kernel, share.work) == pytest.approx((1.0, 104 / 100 * 64 / 56))
    assert (share.tail, share.tail_cols) == (0.0, 0)
    assert got is not None and got[1].kernel == 1.0


def test_a_one_column_tail_is_priced_scalar() -> None:
    """49 columns in tiles of 16 leave one column in plain loops: a scalar loop, which
    the model prices per instance at many times a vector lane's cost (it had priced it as
    a lane of a full vector: 2048 x 49 x 512 ran 1.35 ms that way, 0.51 with the column
    operand packed, the tail then in the kernel)."""
    sizes = {"M": 64, "N": 49, "K": 64}
    s, share, _ = _tiled(sizes, pack=False)
    assert (share.kernel, share.tail, share.tail_cols) == (pytest.approx(48 / 49),
                                                           pytest.approx(1 / 49), 1)
    scalar = cost.estimate(s.poly, s.root, AVX512, parallel_trips=TRIPS).compute  # type: ignore[union-attr]
    s16, _, _ = _tiled({**sizes, "N": 48}, pack=False)
    whole = cost.estimate(s16.poly, s16.root, AVX512, parallel_trips=TRIPS).compute  # type: ignore[union-attr]
    # one column in 49 costs more than the 48 in the kernel: a scalar FMA with its loads
    assert scalar > 2 * whole


def test_a_few_tail_columns_run_as_the_full_tiles_loop_splits_them() -> None:
    """The tail's plain loop is printed once for every column tile, at the full tiles'
    width (16 lanes): its trip is known only at run time, and GCC runs 4 columns as 4 scalar
    iterations (``-fopt-info-vec``: a 64-byte loop with a 32-byte epilogue, neither entered).
    So 4 tail columns cost 4 times 1 (MobileNetV2's 1x1 convolutions at 14x14, 196 pixels in
    tiles of 32, had priced theirs as one 4-lane vector, merged them, and ran 1.8-2.2x
    slower)."""
    compute = {}
    for n in (48, 49, 52):
        s, share, _ = _tiled({"M": 64, "N": n, "K": 64}, pack=False)
        assert share.tail_cols == n - 48
        compute[n] = cost.estimate(s.poly, s.root, AVX512, parallel_trips=TRIPS).compute  # type: ignore[union-attr]
    one, four = compute[49] - compute[48], compute[52] - compute[48]
    assert four == pytest.approx(4 * one, rel=0.1)


def test_partial_columns_price_the_padded_copy() -> None:
    """Where the columns end in a partial tile and the column operand stays in place, the
    model also prices it packed (zero-padded: the kernel runs the partial tile), and keeps
    the faster: 2048 x 49 x 512 packs B; at N = 48 (no partial tile) nothing more is
    priced."""
    odd = polyopt.schedule(MM, sizes={"M": 2048, "N": 49, "K": 512},
                           options={"machine": MACHINE})
    notes = "\n".join(odd.notes)
    assert "packing B" in notes and "packs B" in notes
    even = polyopt.schedule(MM, sizes={"M": 2048, "N": 48, "K": 512},
                            options={"machine": MACHINE})
    assert "packing B" not in "\n".join(even.notes)


def _printed_inits(kernel: polyopt.Kernel) -> set[str]:
    inits = {s.name for s in kernel.schedule.poly.stmts if s.kind == "init"}
    return {i for i in inits if f"/* {i} */" in kernel.source}


@pytest.mark.cc
@pytest.mark.parametrize("case", [
    ("mm", MM, None, {"M": 48, "N": 64, "K": 40}, None),  # full tiles from zero
    ("mm", MM, None, {"M": 100, "N": 56, "K": 64}, None),  # partial tiles, plain loops
    ("mm", MM, None, {"M": 256, "N": 256, "K": 4096}, "l2_bytes=256K"),  # reduction blocks
    ("dw", kernels.get("depthwise_conv2d", stride=1, padding=1), "depthwise_conv2d",
     {"N": 1, "C": 5, "H": 37, "W": 35, "KH": 3, "KW": 3}, None),  # partial, padded copy
    ("conv", kernels.get("conv2d", stride=2, padding=1), "conv2d",
     {"N": 1, "C": 3, "H": 64, "W": 64, "F": 32, "KH": 3, "KW": 3}, None),
], ids=lambda c: f"{c[0]}-{'x'.join(map(str, c[3].values()))}")
def test_the_model_leaves_out_the_zeroing_the_printer_leaves_out(case: tuple) -> None:
    """The model's dead inits (``registers.dead_inits``, skipped by ``cost.estimate``) are
    the ones ``codegen/zerostart.py`` does not print, zeroing or not."""
    _, src, name, sizes, machine = case
    options: dict = {"tuned": False}
    if machine:
        options["machine"] = machine
    k = polyopt.compile(src, name, sizes=sizes, options=options)
    s = k.schedule
    inits = {st.name for st in s.poly.stmts if st.kind == "init"}
    assert cost.printing(s.poly, s.root, s.buffers).skip == inits - _printed_inits(k)


def test_a_dead_zeroing_nest_costs_nothing() -> None:
    """48 x 64 outputs in 12 x 32 tiles over the whole reduction: the fill is left out,
    and its nest is predicted at 0 cycles (it was priced as a pass over C)."""
    s = polyopt.schedule(MM, sizes={"M": 48, "N": 64, "K": 40},
                         options={"machine": MACHINE, "knobs": {"mr": 12, "nr": 32}})
    printed = cost.printing(s.poly, s.root, s.buffers)
    assert printed.skip == {"C_0_init"}
    init = next(top for top in nests(s.root) if set(stmts_of(top)) == {"C_0_init"})
    assert cost.estimate(s.poly, init, AVX512, printed=printed, parallel_trips=TRIPS).cycles == 0.0
    assert cost.estimate(s.poly, init, AVX512, parallel_trips=TRIPS).cycles > 0.0


TRANSPOSE = "def t(float(M,N) X) -> (Y) { Y(j,i) = X(i,j) }"


@pytest.mark.cc
def test_a_transposed_copy_is_priced_as_register_transposes() -> None:
    """A 512 x 512 transpose, cache-tiled: its vector loop reads X 512 floats apart, which
    the plain model prices as scalar loads; the printer copies 16 x 16 blocks through
    registers (16 loads and 4 rounds of 16 shuffles each), and the model prices that."""
    k = polyopt.compile(TRANSPOSE, sizes={"M": 512, "N": 512},
                        options={"machine": MACHINE, "tuned": False})
    assert "transposed copy" in k.source
    s = k.schedule
    path = _path_to(s.root, Tag.VECTORIZE)
    stmt = s.poly.stmt(path[-1].child.stmts[0])  # type: ignore[union-attr]
    per = registers.transposed_copy(s.poly, AVX512, stmt, path)
    assert per == pytest.approx((16 / 2 + 16 * 4 / 2) / 256)  # one 16 x 16 block
    assert cost.vector_loads(s.poly, stmt, path, cost.MAX_VECTOR_STRIDE) is None



DEPTHWISE = kernels.get("depthwise_conv2d", stride=1, padding=1)
DW_SIZES = {"N": 1, "C": 16, "H": 56, "W": 56, "KH": 3, "KW": 3}


def _tile(s: polyopt.Schedule) -> tuple[registers.TileAt, list[Loop], object]:
    path = _tile_path(s.root)
    stmt = s.poly.stmt(path[-1].child.stmts[0])  # type: ignore[union-attr]
    at = registers.tile_at(s.poly, stmt, path)
    assert at is not None
    return at, path, stmt


def _per_update(mr: int) -> float:
    """Predicted cycles of one update of a 3x3 depthwise tile of ``mr`` rows."""
    s = polyopt.schedule(DEPTHWISE, "depthwise_conv2d", sizes=DW_SIZES,
                         options={"machine": MACHINE, "knobs": {"mr": mr}})
    at, path, stmt = _tile(s)
    step = registers.step_cycles(s.poly, AVX512, stmt, path,  # type: ignore[arg-type]
                                 at, -(-at.cols // 16))
    assert step is not None
    return step / (at.rows * -(-at.cols // 16))


def test_a_tap_unrolled_into_the_step_shares_its_loads() -> None:
    """A 3x3 depthwise tile whose rows move the input as the filter's rows do: at 14 rows
    the printer unrolls the filter row into the step (42 updates, under the cap of 64),
    each input row loaded serves up to 3 output rows, and the step is FMA-bound; at 28
    rows (84 updates) it stays rolled and every update loads a vector of its own, most of
    them across two cache lines (a window read): load-bound, the step costs more per
    update (measured, MobileNetV2 layer 3: 28 rows 0.180 ms, 14 rows 0.132)."""
    assert _per_update(14) < 0.75 * _per_update(28)


def test_a_window_read_splits_its_vectors_across_lines() -> None:
    """``I(h + kh, w + kw)`` read as vectors along ``w``: each ``kw`` starts a lane
    further, so 15 of 16 starts straddle two 64-byte lines (two load slots); a packed
    panel's vectors start on lines (one slot)."""
    s = polyopt.schedule(DEPTHWISE, "depthwise_conv2d", sizes=DW_SIZES,
                         options={"machine": MACHINE, "knobs": {"mr": 14}})
    at, path, stmt = _tile(s)
    moves = registers._moves(s.poly, AVX512, stmt, path, at.tile)  # type: ignore[arg-type]
    assert moves is not None
    assert [mv.slots for mv in moves if mv.vector] == [1.9375]
    mm = polyopt.schedule(MM, sizes=SIZES, options={"machine": MACHINE,
                                                    "knobs": {"pack": True}})
    at, path, stmt = _tile(mm)
    moves = registers._moves(mm.poly, AVX512, stmt, path, at.tile)  # type: ignore[arg-type]
    assert moves is not None and [mv.slots for mv in moves if mv.vector] == [1.0]


def test_an_operation_on_one_operand_is_computed_once_per_value() -> None:
    """``X(i + r_y, j + r_x) / 9``: the division depends on the loaded value alone, and
    the compiler shares it among the updates that use the value; the add is per update."""
    src = "def b(float(H,W) X) -> (Y) { Y(i,j) +=! X(i + r_y, j + r_x) / 9 " \
          "where r_y in 0:3, r_x in 0:3 }"
    s = polyopt.schedule(src, sizes={"H": 64, "W": 64})
    stmt = next(st for st in s.poly.stmts if st.kind == "update")
    assert registers.kernel_ops(stmt) == registers.Ops(1.0, (1.0,))


def test_the_rows_are_the_models_choice() -> None:
    """The register tile's rows are the candidate the model predicts fastest, each
    prediction noted: a blur over 510 rows prices 28 (as many as the registers hold),
    rows that divide 510, and 21 (its 3 filter rows unroll into the step, 63 updates),
    and takes rows under which the filter rows unroll."""
    src = "def b(float(H,W) X) -> (Y) { Y(i,j) +=! X(i + r_y, j + r_x) / 9 " \
          "where r_y in 0:3, r_x in 0:3 }"
    s = polyopt.schedule(src, sizes={"H": 512, "W": 512}, options={"machine": MACHINE})
    note = next(n for n in s.notes if "register tile rows" in n)
    chosen = int(note.split("register tile rows ")[1].split(",")[0])
    priced = {int(p.split()[0]): float(p.split()[1]) for p in note.split(": ")[-1].split("; ")}
    assert {28, 21} <= set(priced) and priced[chosen] == min(priced.values())
    assert chosen * 3 <= 64 and _tile(s)[0].rows == chosen


@pytest.mark.parametrize(("m", "k", "ways", "most"), [
    (4096, 1024, 8, 8),     # A's rows 4 KB apart: one L1 set of 8 ways holds 8 rows' lines
    (128, 1024, 8, 8),      # the same with A in L2: its lines would come from there each step
    (4096, 1040, 8, 28),    # rows 65 lines apart fall in 64 sets: as many as the registers hold
    (4096, 1024, 16, 16),   # a 16-way L1 (a synthetic machine) holds 16
])
def test_rows_read_in_place_fit_the_ways_of_their_l1_set(m: int, k: int, ways: int,
                                                          most: int) -> None:
    """mm Mx16xK with A read in place (swept once): the tile's rows are bounded by the rows
    whose lines L1 holds at once (``register_tile._conflict_rows``): at K = 1024 every
    row's line falls in one set (mm 128x16x1024 ran 0.097 ms at 16 rows, 0.038 at 8)."""
    machine = MACHINE + f",l1d_ways={ways}"
    s = polyopt.schedule(MM, sizes={"M": m, "N": 16, "K": k}, options={"machine": machine})
    at, _, _ = _tile(s)
    assert at.rows <= most and (most == 8 or at.rows > 8)


def test_rows_in_ways_counts_lines_per_set() -> None:
    assert rows_in_ways(4096, 64, 64, 8) == 8
    assert rows_in_ways(2048, 64, 64, 8) == 16         # two sets
    assert rows_in_ways(4160, 64, 64, 8) == UNKNOWN_TRIP  # every set once before a repeat
    assert rows_in_ways(96, 64, 64, 8) == UNKNOWN_TRIP
