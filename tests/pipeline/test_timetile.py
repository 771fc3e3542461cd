"""Time tiling of stencil bands (polyopt/pipeline/timetile.py): the tiled schedules are legal
(every verb is checked), compute what PolyBench's loops compute, and are really tiled, run
as a wavefront of parallel tiles, with the decisions noted."""

from __future__ import annotations

from typing import Any

import numpy as np
import polybench_refs as refs
import pytest

import polyopt
from polyopt import kernels, lang
from polyopt.costmodel.machine import Machine, configured
from polyopt.errors import OptionError
from polyopt.pipeline.knobs import Knobs
from polyopt.pipeline.policy import cpu_policy
from polyopt.pipeline.timetile import time_tile
from polyopt.runtime.interp import evaluate
from polyopt.schedules.marks import Tag
from polyopt.schedules.tree import loops

# small tiles, so that the small sizes hold several tiles per wavefront
SMALL_TILES = {"time_tile": 2, "space_tile": 8}


def _options(fusion: str = "min", **knobs: Any) -> dict[str, Any]:
    return {"fusion": fusion, "knobs": {**SMALL_TILES, **knobs}}


def _check(name: str, sizes: dict[str, int], options: dict[str, Any]) -> polyopt.Schedule:
    return refs.check_kernel(name, sizes, options, 7).schedule


@pytest.mark.cc
@pytest.mark.parametrize("name,sizes", [
    ("jacobi_1d", {"N": 40, "T": 8}),
    ("jacobi_2d", {"N": 24, "T": 6}),
    ("heat_3d", {"N": 10, "T": 4}),
])
def test_time_tiled_matches_reference(name: str, sizes: dict[str, int]) -> None:
    s = _check(name, sizes, _options())
    assert "w" in s.loops, s  # the wavefront of tiles, outermost in its nest
    w = s.loop("w")
    tiles = [lp for lp in s.loops if lp.endswith("_o")]
    assert Tag.PARALLEL in s.loop(tiles[0]).tags, s  # the time tiles of a wavefront
    assert w.child is s.loop(tiles[0])
    points = [lp for lp in s.loops if lp.endswith("_i")]
    assert len(points) == len(tiles) + 1, s  # time and space point loops below the tiles
    notes = "\n".join(s.notes)
    assert "time tiled 2 x 8" in notes and "parallelogram" in notes, notes
    assert "wavefront of tiles" in notes and "parallel" in notes, notes
    vectors = [lp for lp in s.loops if Tag.VECTORIZE in s.loop(lp).tags]
    assert vectors, s  # each statement's innermost loop below the tiles
    assert any("vector loop" in n and "stride 1" in n for n in s.notes), notes


@pytest.mark.cc
def test_row_tiled_matches_reference() -> None:
    """The row (innermost level) tiled too: three tile loops, the wavefront over the first
    two, the row's tile loop inside each parallel tile, a vector loop per statement."""
    s = _check("jacobi_2d", {"N": 30, "T": 6}, _options(row_tile=8))
    tiles = [lp for lp in s.loops if lp.endswith("_o")]
    assert len(tiles) == 2 and Tag.PARALLEL in s.loop(tiles[0]).tags, s  # t_o, the row's
    assert s.loop(tiles[0]).child is s.loop(tiles[1]), s
    notes = "\n".join(s.notes)
    assert "time tiled 2 x 8 x 8" in notes and "row 8" in notes, notes
    inside = loops(s.loop(tiles[1]))
    assert sum(Tag.VECTORIZE in lp.tags for lp in inside) == 2, s


@pytest.mark.cc
def test_seidel_matches_reference() -> None:
    """seidel-2d's in-place sweep: tiled or not, what runs is what PolyBench computes."""
    _check("seidel_2d", {"N": 20, "T": 4}, _options())


@pytest.mark.cc
def test_default_fusion_switches_to_min_for_stencils() -> None:
    """isl's default (smart) fusion puts the border copies into the stencil's band: the
    pipeline takes the min fusion schedule instead and says so; the schedule replays."""
    src = kernels.get("jacobi_2d")
    sizes = {"N": 24, "T": 6}
    s = _check("jacobi_2d", sizes, {"knobs": SMALL_TILES})
    assert s.fusion == "min" and "w" in s.loops, s
    assert any("min fusion, not smart" in n for n in s.notes), s.notes
    again = polyopt.schedule_from_json(s.as_json(), src, "jacobi_2d", sizes=sizes)
    assert again.loops == s.loops


def test_smart_band_alone_is_tiled_without_vector_loop() -> None:
    """A smart-fused band (as isl gives it, no switch) tiles t and i with j whole; the note
    says why j is not vectorized."""
    s = polyopt.schedule(kernels.get("jacobi_2d"), "jacobi_2d", sizes={"N": 24, "T": 6},
                         auto="isl")
    policy = cpu_policy(configured(None))
    tiled, done = time_tile(s, "t", policy, Knobs(**SMALL_TILES))
    assert done and {"w", "t_o", "t_i", "i_i", "j"} <= set(tiled.loops), tiled
    assert any("not vectorized" in n for n in tiled.notes), tiled.notes


def test_model_sizes_and_notes() -> None:
    """Without knobs the sizes come from the cache rule (``CpuPolicy.time_tile``)."""
    s = polyopt.schedule(kernels.get("jacobi_2d"), "jacobi_2d", sizes={"N": 600, "T": 16},
                         options={"fusion": "min", "machine": {"l2_bytes": 1 << 20}})
    tiled = next(n for n in s.notes if "time tiled" in n)
    assert "L2 1048576 B" in tiled and "row whole" in tiled, tiled


def test_time_tile_rule() -> None:
    policy = cpu_policy(Machine(64, 32, l1d_bytes=48 << 10, l2_bytes=2 << 20))
    # jacobi-2d at N=3000: 3 planes of 4 B; 3 rows of 3000 outgrow L1, so the row is cut
    # in 3 (1000, rounded up to whole vectors of 16); 64 + 4 rows of 1008 fit in 1 MB,
    # 128 + 4 do not; height 64 // (2 * slope), evened out over 60 steps: 4 tiles of 15
    tile = policy.time_tile(12, 1, 2, 60, 3000, 4)
    assert (tile.height, tile.width, tile.row) == (15, 64, 1008), tile
    assert policy.time_tile(12, 1, 2, 3, 3000, 4).height == 3  # no taller than the steps
    two = cpu_policy(Machine(64, 32, cores=2, l1d_bytes=48 << 10, l2_bytes=2 << 20))
    assert two.time_tile(12, 1, 2, 6, 3000, 4).height == 3  # a tile per core in a wavefront
    # a short row stays whole, and the space tile shrinks to keep a step in L2: heat-3d
    # at N=120 (2 space loops above the row, slope 1): 12 B x 120 x (16 + 2)^2 <= 1 MB
    heat = policy.time_tile(12, 2, 1, 60, 120, 4)
    assert (heat.row, heat.width, heat.height) == (0, 16, 8), heat
    # a smaller L2 halves the space tile (the model, not a constant, decides)
    small = cpu_policy(Machine(64, 32, l1d_bytes=48 << 10, l2_bytes=1 << 20))
    assert small.time_tile(12, 1, 2, 60, 3000, 4).width == 32


def test_knobs_off_and_checked() -> None:
    s = polyopt.schedule(kernels.get("jacobi_2d"), "jacobi_2d", sizes={"N": 24, "T": 6},
                         options={"fusion": "min", "knobs": {"time_tile": 0}})
    assert "w" not in s.loops
    with pytest.raises(OptionError, match="tile_shape"):
        Knobs.from_options({"tile_shape": "hexagon"})
    s = polyopt.schedule(kernels.get("jacobi_2d"), "jacobi_2d", sizes={"N": 24, "T": 6},
                         options=_options(tile_shape="diamond"))
    assert any("diamond tiles (concurrent start)" in n for n in s.notes), s.notes


JACOBI_ACOS = """
def jacobi_acos<T=6>(float(N) A, float(N) B) -> (float(N) Ao, float(N) Bo)
        local (float(T,N) At, float(T,N) Bt) {
    At(t,i) = A(i) where t in 0:T, i in 0:1
    At(t,i) = A(i) where t in 0:T, i in N-1:N
    Bt(t,i) = B(i) where t in 0:T, i in 0:1
    Bt(t,i) = B(i) where t in 0:T, i in N-1:N
    Bt(t,i) = 0.33333 * (A(i-1) + A(i) + A(i+1)) where t in 0:1, i in 1:N-1
    Bt(t,i) = 0.33333 * (At(t-1,i-1) + At(t-1,i) + At(t-1,i+1)) where t in 1:T, i in 1:N-1
    At(t,i) = 0.3 * acos(0.3 * (Bt(t,i-1) + Bt(t,i) + Bt(t,i+1))) where t in 0:T, i in 1:N-1
    Ao(i) = At(T-1,i)
    Bo(i) = Bt(T-1,i)
}
"""


@pytest.mark.cc
def test_time_tiled_loop_calling_a_scalar_builtin_is_not_a_vector_loop() -> None:
    """Below the time tiles, a statement's loop that calls acos (no vector variant) gets no
    simd mark, as cpu._vectorize's loops do; its neighbour's loop still vectorizes, and the
    result is the float64 interpreter's."""
    sizes = {"N": 40, "T": 6}
    s = polyopt.schedule(JACOBI_ACOS, sizes=sizes, options=_options())
    assert "w" in s.loops, s
    scalar = [n for n in s.notes if "not vectorized: it calls acos" in n]
    assert len(scalar) == 1, s.notes
    below = loops(s.loop("w"))
    assert [Tag.VECTORIZE in lp.tags for lp in below if lp.name.startswith("c_i")] \
        == [True, False], s
    k = polyopt.compile(JACOBI_ACOS, sizes=sizes, schedule=s)
    ins = [np.random.default_rng(3).random(40, dtype=np.float32) for _ in range(2)]
    want = evaluate(lang.build_program(JACOBI_ACOS, "jacobi_acos", sizes), ins, {})
    for got, ref in zip(k(*ins), want, strict=True):
        np.testing.assert_allclose(np.asarray(got), ref, rtol=1e-5, atol=1e-6)
