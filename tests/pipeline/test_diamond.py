"""Diamond tiles with concurrent start (polyopt/pipeline/diamond.py, ``tile_shape="diamond"``):
the tiled stencils compute what PolyBench's loops compute, the faces are the ones the
dependences ask for, the diamonds of a wavefront run in parallel and all tiles of the first
wavefront start together, and a band that takes no diamonds says why and gets
parallelogram tiles."""

from __future__ import annotations

from typing import Any

import polybench_refs as refs
import pytest

import polyopt
from polyopt import kernels
from polyopt.pipeline import diamond
from polyopt.pipeline.timetile import stencil_band
from polyopt.schedules.marks import Tag
from polyopt.schedules.tree import Loop


def _options(space: int, row: int | None = None) -> dict[str, Any]:
    knobs = {"tile_shape": "diamond", "space_tile": space}
    return {"fusion": "min", "knobs": knobs if row is None else {**knobs, "row_tile": row}}


def _check(name: str, sizes: dict[str, int], space: int,
           row: int | None = None) -> polyopt.Kernel:
    kernel: polyopt.Kernel = refs.check_kernel(name, sizes, _options(space, row), 11)
    return kernel


def _wavefront(s: polyopt.Schedule) -> None:
    """The wavefront loop, with the parallel row of diamonds right below it."""
    w = s.loop("w")
    assert not w.tags, s
    row = w.child
    assert isinstance(row, Loop) and row.name.endswith("_d"), s
    assert Tag.PARALLEL in row.tags, s


@pytest.mark.cc
@pytest.mark.parametrize("name,sizes,space,scale,rest", [
    ("jacobi_1d", {"N": 40, "T": 8}, 8, 4, 0),
    ("jacobi_1d", {"N": 37, "T": 9}, 4, 4, 0),  # sizes no tile divides
    ("jacobi_2d", {"N": 24, "T": 6}, 8, 4, 1),  # j fused into the band and tiled (row 8)
    ("heat_3d", {"N": 10, "T": 4}, 4, 4, 1),  # j tiled (skewed) inside the diamonds
    ("fdtd_2d", {"NX": 20, "NY": 24, "T": 5}, 8, 2, 1),  # three sweeps; j fused, tiled
])
def test_diamond_matches_reference(name: str, sizes: dict[str, int], space: int, scale: int,
                                   rest: int) -> None:
    # the row tile (knob) makes j one loop of the band where its rows would be cut
    k = _check(name, sizes, space, 8 if name in ("jacobi_2d", "fdtd_2d") else None)
    s = k.schedule
    _wavefront(s)
    notes = "\n".join(s.notes)
    assert f"diamond tiles (concurrent start), faces c and {scale}*" in notes, notes
    assert "tiles in the first wavefront start together" in notes, notes
    assert "refused" not in notes, notes
    tiles = [lp for lp in s.loops if lp.endswith("_o") and lp.startswith("c")]
    assert len(tiles) == rest, s  # the other space loops' tiles, inside the row
    assert any(Tag.VECTORIZE in s.loop(lp).tags for lp in s.loops), s
    # the C: the wavefront loop, then the parallel row of diamonds
    lines = k.source.splitlines()
    at = next(i for i, line in enumerate(lines) if "#pragma omp parallel for" in line)
    assert any(line.lstrip().startswith("for (") and " w " in f" {line} "
               for line in lines[max(0, at - 3):at]), "\n".join(lines[at - 3:at + 2])


def test_faces_of_jacobi() -> None:
    """jacobi-1d's band (t, 2t + i): the second face is 4t - x, A's leaning 2 ahead of B's
    (A(t, i) reads B(t, i+1) of the same step), the smallest scale that works."""
    s = polyopt.schedule(kernels.get("jacobi_1d"), "jacobi_1d", sizes={"N": 40, "T": 8},
                         auto="isl", options={"fusion": "min"})
    found = stencil_band(s, "t5")
    assert found is not None
    faces = diamond.faces(*found)
    assert faces == diamond.Faces(4, (("At_2", 2), ("Bt_3", 0))), faces


def test_refused_diamond_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    """With scales up to 3 only (jacobi needs 4), no diamond: the note says why, and the
    band gets parallelogram tiles."""
    monkeypatch.setattr(diamond, "MAX_SCALE", 3)
    s = polyopt.schedule(kernels.get("jacobi_2d"), "jacobi_2d", sizes={"N": 24, "T": 6},
                         options=_options(8))
    notes = "\n".join(s.notes)
    assert "tile_shape diamond refused: no face" in notes and "parallelogram tiles" in notes
    assert "ask for a scale above 3" in notes, notes
    assert "time tiled" in notes and "w" in s.loops, s


@pytest.mark.cc
def test_seidel_takes_no_diamond() -> None:
    """seidel-2d's sweep reads its own row's new values (distance 0 in time, +1 in space),
    so no face ``a*t - x`` keeps that distance >= 0: refused with the reason, parallelogram
    tiles, and still what PolyBench computes."""
    s = _check("seidel_2d", {"N": 20, "T": 4}, 8).schedule
    notes = "\n".join(s.notes)
    assert "tile_shape diamond refused: no face" in notes, notes
    assert "depends on itself 1 further along the space loop in the same step" in notes, notes
    assert "time tiled" in notes and "diamond tiles" not in notes, notes
