"""The ``hyperplanes`` verb (polyopt/schedules/hyperplane.py): a band of loops replaced by
integer combinations of them, checked against the exact dependences (refusals name the
dependence), refused when the new loops do not determine the old ones, recorded as a step
that prints as Python and replays from JSON."""

from __future__ import annotations

import math

import numpy as np
import polybench_refs as refs
import pytest

import polyopt
from polyopt import IllegalScheduleError, ScheduleError, kernels
from polyopt.pipeline.knobs import DEFAULT_KNOBS
from polyopt.pipeline.timetile import stencil_band

SIZES = {"N": 40, "T": 8}
# jacobi-1d's band as isl skews it: t5 = t, c = 2t + i (Bt_3), 1 + 2t + i (At_2)
FACES = ((0, 1), (4, -1), (1, 0), (0, 1))  # diamond faces, then the band's own loops
LEAN = {"At_2": (0, 2, 0, 0)}  # A's second face 2 ahead: A(t, i) reads B(t, i+1)


def _band() -> polyopt.Schedule:
    s = polyopt.schedule(kernels.get("jacobi_1d"), "jacobi_1d", sizes=SIZES, auto="isl",
                         options={"fusion": "min"})
    found = stencil_band(s, "t5", DEFAULT_KNOBS)
    assert found is not None and [lp.name for lp in found[1]] == ["t5", "c"], s
    return found[0]


def test_faces_then_band_is_legal_and_prints() -> None:
    s = _band().hyperplanes(("t5", "c"), FACES, names=("p", "m", "t5", "c"), offsets=LEAN)
    assert s.loops[-6:-2] == ("p", "m", "t5", "c"), s
    assert "At_2: 1 + 2t - i; Bt_3: 2t - i" in str(s), s  # the offset leans A's face
    step = s.steps[-1]
    assert step.verb == "hyperplanes" and dict(step.kwargs)["offsets"] == (
        ("At_2", (0, 2, 0, 0)),)
    assert "s = s.hyperplanes(('t5', 'c'), ((0, 1), (4, -1), (1, 0), (0, 1)), " \
        "names=('p', 'm', 't5', 'c'), offsets=(('At_2', (0, 2, 0, 0)),))" in s.as_python()


def test_illegal_rows_name_the_dependence() -> None:
    with pytest.raises(IllegalScheduleError, match=r"hyperplanes\(.*violates a flow "
                       r"dependence from statement Bt_3 to statement At_2"):
        _band().hyperplanes(("t5", "c"), ((1, 0), (0, -1)))  # space reversed


def test_rows_must_determine_the_band() -> None:
    with pytest.raises(ScheduleError, match=r"do not determine the band's loops t5, c for "
                       r"statement .*rank 1 for 2 loops"):
        _band().hyperplanes(("t5", "c"), ((1, 1),))
    # more rows than loops, and a lattice (2 t5, 2 c): the values still fix t5 and c
    s = _band().hyperplanes(("t5", "c"), ((2, 0), (0, 2), (1, 1)))
    assert s.loops[-5:-2] == ("h0", "h1", "h2"), s  # no row copies a loop: h<row>


@pytest.mark.parametrize("rows,kwargs,match", [
    (((0, 1, 0),), {}, r"row 0 must hold 2 integers"),
    (((0, 0), (1, 0)), {}, r"row 0 is zero"),
    (((True, 0), (0, 1)), {}, r"'rows' must be a list or tuple of rows, each a list or tuple of "
                               r"ints, not tuple \(\(True, 0\)"),
    ((), {}, r"non-empty integer matrix"),
    (((1, 0), (0, 1)), {"names": ("a",)}, r"one loop name per row \(2\)"),
    (((1, 0), (0, 1)), {"names": ("a", "t")}, r"loop name 't' is already used"),
    (((1, 0), (0, 1)), {"offsets": {"Zz_0": (0, 1)}}, r"not one of the band's: Bt_3, At_2"),
    (((1, 0), (0, 1)), {"offsets": {"At_2": (1,)}}, r"offsets of At_2 must be 2 integers"),
    (((1, 0), (0, 1)), {"offsets": 5}, r"offsets must map statement names to one integer"),
    (((1, 0), (0, 1)), {"offsets": [("At_2", 1)]}, r"'offsets' must be a dict from statement "
                                                    r"names"),
])
def test_misuse(rows: tuple, kwargs: dict, match: str) -> None:
    with pytest.raises(ScheduleError, match=match):
        _band().hyperplanes(("t5", "c"), rows, **kwargs)


def test_band_must_be_adjacent() -> None:
    with pytest.raises(ScheduleError, match="loops c, t5 must be adjacent and in nest order"):
        _band().hyperplanes(("c", "t5"), ((1, 0), (0, 1)))


@pytest.mark.cc
def test_replays_from_json_and_runs() -> None:
    """A diamond's faces tiled, their point loops dropped (the band's loops determine them):
    the JSON replays to the same loops, and the kernel computes what PolyBench does."""
    src = kernels.get("jacobi_1d")
    s = _band().hyperplanes(("t5", "c"), FACES, names=("p", "m", "t5", "c"), offsets=LEAN)
    s = s.tile(("p", "m"), 8).hyperplanes(
        ("p_i", "m_i", "t5", "c"), ((0, 0, 1, 0), (0, 0, 0, 1)), names=("t5", "c"))
    again = polyopt.schedule_from_json(s.as_json(), src, "jacobi_1d", sizes=SIZES)
    assert again.loops == s.loops and str(again) == str(s)
    k = polyopt.compile(src, "jacobi_1d", sizes=SIZES, schedule=again)
    ins, want, red = refs.CASES["jacobi_1d"][0](np.random.default_rng(3), SIZES)
    tol = 2e-5 * math.sqrt(red)
    for got, w in zip(k(*ins), want, strict=True):
        np.testing.assert_allclose(np.asarray(got), w, rtol=tol, atol=tol)
