"""Equivalent formulations of the bundled stencils (polyopt/bench/stencil_forms.py, issue 40)
compute the bundled values and compile to the same storage and time tiling: the copies of
the ``previous`` and ``staged`` forms are seen through (``lang.copyflow``), and the
``piecewise`` form's statements are cut into their arms (``lang.piecewise``)."""

from __future__ import annotations

import islpy as isl
import numpy as np
import polybench_refs as refs
import pytest

import polyopt
from polyopt import lang
from polyopt.bench import stencil_forms as forms
from polyopt.schedules.storage import stored

SIZES = {"jacobi_1d": {"N": 40, "T": 8}, "jacobi_2d": {"N": 24, "T": 6},
         "heat_3d": {"N": 10, "T": 4}}


def _decisions(kernel: polyopt.Kernel) -> tuple[list[str], list[tuple[str, ...]], list[str]]:
    """What the issue compares: the storage decisions, the shapes of the locals the kernel
    allocates, and the time tiling note (its sizes and shape)."""
    low = kernel.lowered()
    shapes = [t.shape for t in stored(low.program, low.ast.storage).locals]
    tiled = [": ".join(n.split(": ")[:2]) for n in low.schedule.notes if "time tiled" in n]
    return [str(m) for m in low.ast.storage], shapes, tiled


@pytest.mark.parametrize("name", forms.NAMES)
@pytest.mark.parametrize("kind", ["previous", "staged"])
def test_same_program_as_bundled(name: str, kind: str) -> None:
    """Seen through its copies, each formulation is the bundled def's program (names,
    right-hand sides, domains as sets)."""
    sizes = SIZES[name]
    want = lang.build_program(forms.source(name, "input"), sizes=sizes)
    got = lang.build_program(forms.source(name, kind), sizes=sizes)
    assert [t.name for t in got.locals] == [t.name for t in want.locals]
    assert [(s.name, s.rhs) for s in got.stmts] == [(s.name, s.rhs) for s in want.stmts], got
    for a, b in zip(got.stmts, want.stmts, strict=True):
        assert isl.Set(a.domain).is_equal(isl.Set(b.domain)), (a, b)


@pytest.mark.cc
@pytest.mark.parametrize("name", forms.NAMES)
def test_same_values_storage_and_tiles(name: str) -> None:
    sizes = SIZES[name]
    inputs, want, _ = refs.CASES[name][0](np.random.default_rng(7), sizes)
    seen = {}
    for kind in forms.KINDS:
        kernel = polyopt.compile(forms.source(name, kind), sizes=sizes)
        for got, ref in zip(kernel(*inputs), want, strict=True):
            np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5, err_msg=kind)
        seen[kind] = _decisions(kernel)
    storage, shapes, tiled = seen["input"]
    assert storage and tiled, seen  # the bundled def is contracted and time tiled
    assert all(s[0] in ("1", "2") for s in shapes), shapes  # a plane or two, not T
    assert all(d == seen["input"] for d in seen.values()), seen
