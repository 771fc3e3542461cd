"""Time tiling of stencil bands (polyopt/schedule/timetile.py): the tiled schedules are legal
(every verb is checked), compute what PolyBench's loops compute, and are really tiled, run
as a wavefront of parallel tiles, with the decisions noted."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import polybench_refs as refs
import pytest

import polyopt
from polyopt import kernels
from polyopt.errors import OptionError
from polyopt.schedule.knobs import Knobs
from polyopt.schedule.machine import Machine, configured
from polyopt.schedule.marks import Tag
from polyopt.schedule.policy import cpu_policy
from polyopt.schedule.timetile import time_tile

# small tiles, so that the small sizes hold several tiles per wavefront
SMALL_TILES = {"time_tile": 2, "space_tile": 8}


def _options(fusion: str = "min", **knobs: Any) -> dict[str, Any]:
    return {"fusion": fusion, "knobs": {**SMALL_TILES, **knobs}}


def _check(name: str, sizes: dict[str, int], options: dict[str, Any]) -> polyopt.Schedule:
    src = kernels.get(name)
    k = polyopt.compile(src, name, sizes=sizes, options=options)
    ins, want, red = refs.CASES[name][0](np.random.default_rng(7), sizes)
    got = k(*ins)
    got = got if isinstance(got, tuple) else (got,)
    tol = 2e-5 * math.sqrt(red)
    for g, w in zip(got, want, strict=True):
        scale = max(1.0, float(np.abs(w).max()))
        np.testing.assert_allclose(np.asarray(g), w, rtol=tol, atol=tol * scale, err_msg=name)
    return k.schedule


@pytest.mark.cc
@pytest.mark.parametrize("name,sizes", [
    ("jacobi_1d", {"N": 40, "T": 8}),
    ("jacobi_2d", {"N": 24, "T": 6}),
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


# heat_3d is left out: isl's scheduler alone takes minutes on it (scripts/stencil_study.py
# checks it against its numpy loop).
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
    again = polyopt.Schedule.from_json(s.as_json(), src, "jacobi_2d", sizes=sizes)
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
    policy = cpu_policy(configured({"l2_bytes": 1 << 20}))
    height, width = policy.time_tile(3 * 600 * 4, 1, 2, 16)
    assert any(f"time tiled {height} x {width}" in n and "L2" in n for n in s.notes), s.notes


def test_time_tile_rule() -> None:
    policy = cpu_policy(Machine(64, 32, l2_bytes=2 << 20))
    low = policy.time_tile_space[0]
    # jacobi-2d at N=3000: 3 planes of 3000 floats per row; 1 MB holds fewer than 2*64 + 4
    # rows: the smallest width, leaning by half of it (slope 2)
    assert policy.time_tile(36000, 1, 2, 60) == (low // 4, low)
    assert policy.time_tile(36000, 1, 2, 3) == (3, low)  # no taller than the steps
    two = cpu_policy(Machine(64, 32, cores=2, l2_bytes=2 << 20))
    assert two.time_tile(36000, 1, 2, 6) == (3, low)  # a tile per core in a wavefront
    # 5000 B per row (jacobi-2d at N=416): 2*64 + 4 rows fit in 1 MB, 2*128 + 4 not
    assert policy.time_tile(5000, 1, 2, 60) == (128 // 4, 128)


def test_knobs_off_and_checked() -> None:
    s = polyopt.schedule(kernels.get("jacobi_2d"), "jacobi_2d", sizes={"N": 24, "T": 6},
                         options={"fusion": "min", "knobs": {"time_tile": 0}})
    assert "w" not in s.loops
    with pytest.raises(OptionError, match="tile_shape"):
        Knobs.from_options({"tile_shape": "hexagon"})
    s = polyopt.schedule(kernels.get("jacobi_2d"), "jacobi_2d", sizes={"N": 24, "T": 6},
                         options=_options(tile_shape="diamond"))
    assert any("diamond tiles (concurrent start)" in n for n in s.notes), s.notes
