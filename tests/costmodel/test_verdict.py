"""The one comparison of two predictions (costmodel/verdict.py): each regime, its reason,
and that swapping the two turns the verdict around."""

from __future__ import annotations

import itertools

import pytest

from polyopt.costmodel.cost import Estimate
from polyopt.costmodel.verdict import clear_gain, compare


def est(cycles: float, compute: float = 1.0, core: float = 0.0,
        warm: float | None = None) -> Estimate:
    return Estimate(cycles, compute, (), None, (), core, warm)


@pytest.mark.parametrize(("a", "b", "order", "basis"), [
    (est(10, warm=3), est(5, warm=4), -1, "cycles from cache"),  # cache decides, not cycles
    (est(10, core=2), est(9, core=4), -1, "cycles from memory and the cores' own work"),
    (est(10, core=10), est(10, core=12), -1, "the cores' own work at the same cycles"),
    (est(10, core=12), est(11, core=11), -1, "cycles"),
    (est(7, warm=2), est(9, warm=2), 0, "cycles from cache"),
])
def test_the_regime_decides(a: Estimate, b: Estimate, order: int, basis: str) -> None:
    v = compare(a, b)
    assert (v.order, v.basis) == (order, basis)
    assert v.first_no_slower
    assert compare(b, a).order == -order


def test_antisymmetric_over_a_grid() -> None:
    grid = [est(c, 1, core, warm) for c, core, warm in
            itertools.product((5, 10), (0, 5, 10, 20), (None, 3))]
    for a, b in itertools.product(grid, grid):
        assert compare(a, b).order == -compare(b, a).order


def test_a_clear_gain_needs_the_margin() -> None:
    assert clear_gain(est(6), est(10), 1.5).order < 0  # 1.67x fewer cycles
    assert clear_gain(est(8), est(10), 1.5).order > 0  # 1.25x: not enough
    got = clear_gain(est(10, compute=2), est(10, compute=4), 1.5)  # same cycles, 2x less work
    assert got.order < 0 and "arithmetic" in got.basis
    assert clear_gain(est(11, compute=1), est(10, compute=4), 1.5).order > 0  # more cycles
