"""polyopt.subscripts.layout: the result's memory layout under order= and out=, and the views
einsum returns; numpy's einsum is the oracle for both."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import polyopt
from polyopt.subscripts.args import parse_args
from polyopt.subscripts.call import contraction, einsum
from polyopt.subscripts.layout import memory_order, memory_views

compiled = pytest.mark.cc


def _axes_by_stride(a: np.ndarray) -> tuple[int, ...]:
    """The axes from the outermost to the innermost in memory."""
    return tuple(sorted(range(a.ndim), key=lambda j: -abs(a.strides[j])))


def _layout_cases() -> list[tuple[str, list[np.ndarray], str]]:
    rng = np.random.default_rng(0)
    f = np.asfortranarray(rng.random((2, 3, 5)))
    c = rng.random((2, 3, 5))
    m = np.asfortranarray(rng.random((4, 3)))
    return [
        ("...ft,mf->...mt", [f, m], "K"),  # numpy's test_output_order: neither C nor F
        ("...ft,mf->...mt", [f, m], "A"),
        ("...ft,mf->...mt", [f, m.copy()], "A"),
        ("...ft,mf->...mt", [c, m], "K"),
        ("ij,jk->ik", [rng.random((3, 4)).T, rng.random((3, 5))], "K"),
        ("ijk,k->kji", [c, rng.random(5)], "K"),
        ("ijk,k->kji", [c, rng.random(5)], "C"),
        ("ijk,k->kji", [c, rng.random(5)], "F"),
        ("ijk->jk", [c.transpose(2, 0, 1)], "K"),
        ("ii,ij->ji", [rng.random((3, 3)), rng.random((3, 4))], "K"),
        ("ij,ij->ij", [rng.random((4, 6))[::2, ::-1], rng.random((2, 6))], "K"),
        ("abc,cd->dba", [rng.random((2, 3, 4)).transpose(1, 2, 0), rng.random((2, 5))], "K"),
    ]


@pytest.mark.parametrize(("spec", "ops", "order"), _layout_cases())
def test_memory_order_as_numpy(spec: str, ops: list[np.ndarray], order: str) -> None:
    want = np.einsum(spec, *ops, order=order)
    args = parse_args((spec, *ops), order=order)
    c = contraction(args.subscripts, args.operands, dtype=None, casting="safe", order=order)
    assert c.order == _axes_by_stride(want)
    assert memory_order(order, c.out, c.labels, ops) == c.order


@compiled
@pytest.mark.parametrize(("spec", "ops", "order"), _layout_cases())
def test_result_layout(spec: str, ops: list[np.ndarray], order: str) -> None:
    want = np.einsum(spec, *ops, order=order)
    got = einsum(spec, *ops, order=order)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert _axes_by_stride(got) == _axes_by_stride(want)
    assert got.flags.c_contiguous == want.flags.c_contiguous
    assert got.flags.f_contiguous == want.flags.f_contiguous


def _outs() -> list[Any]:
    return [
        np.full((3, 5), -1.0),
        np.full((3, 5), -1.0, order="F"),
        np.full((6, 10), -1.0)[::2, 1::2],  # strided view
        np.full((5, 3), -1.0).T,  # transposed
        np.full((3, 5, 2), -1.0)[..., 0],  # non-contiguous last dim
        np.full((3, 5), -1.0, np.complex128),  # a wider dtype: a safe cast
    ]


@compiled
@pytest.mark.parametrize("out", _outs())
def test_out_of_any_layout(out: np.ndarray) -> None:
    rng = np.random.default_rng(1)
    a, b = rng.random((3, 4)), rng.random((4, 5))  # positive: no result is -1
    base = out.base if out.base is not None else out
    assert einsum("ij,jk", a, b, out=out) is out
    np.testing.assert_allclose(out, a @ b, rtol=1e-12)
    assert np.count_nonzero(base == -1) == base.size - out.size  # nothing else written


@compiled
def test_out_overlapping_an_operand() -> None:
    a = np.arange(9.0).reshape(3, 3)
    want = a @ a
    assert einsum("ij,jk->ik", a, a, out=a) is a
    np.testing.assert_array_equal(a, want)


@pytest.mark.parametrize(("spec", "shape"), [
    ("...", (2, 3)), ("ij", (2, 3)), ("ji", (2, 3)), ("ii->i", (3, 3)),
    ("...ii->...i", (2, 3, 3)), ("ii...->...i", (3, 3, 2)), ("...ii->i...", (2, 3, 3)),
    ("jii->ij", (2, 3, 3)), ("i...i->...i", (3, 2, 3)), ("iii->i", (3, 3, 3)),
    ("ijk->jik", (2, 3, 4)),
])
def test_single_operand_views(spec: str, shape: tuple[int, ...]) -> None:
    """One operand summed over nothing: a view of it, as numpy returns (no compiler)."""
    a = np.arange(np.prod(shape)).reshape(shape)
    got, want = einsum(spec, a), np.einsum(spec, a)
    assert got.base is a.base
    np.testing.assert_array_equal(got, want)
    assert got.strides == want.strides
    assert got.flags.writeable
    a.flags.writeable = False
    assert not einsum(spec, a).flags.writeable


def test_views_only_without_out_and_dtype() -> None:
    a = np.arange(6).reshape(2, 3)
    c = contraction("ij", [a], dtype=np.dtype(np.float64), casting="safe", order="K")
    assert not c.view
    c = contraction("ij", [a], dtype=None, casting="safe", order="K", out=np.empty((2, 3), int))
    assert not c.view
    assert polyopt.einsum("ij", a).base is a.base


def test_permuted_views_are_read_in_place() -> None:
    """A transposed view is taken as its memory, its labels permuted: no C-order copy."""
    rng = np.random.default_rng(1)
    a = rng.random((6, 4))
    b = rng.random((6, 4, 5)).transpose(2, 0, 1)  # (5, 6, 4), memory (6, 4, 5)
    views = memory_views([a.T, a, a[:, ::2], a[:, ::2].T, b, np.asfortranarray(a)])
    assert views == ((1, 0), None, None, None, (1, 2, 0), (1, 0))
    args = parse_args(("ij,kji->jk", a.T, b), dtype=None, order="K", casting="safe")
    c = contraction(args.subscripts, args.operands, dtype=None, casting="safe", order="K")
    assert c.views == ((1, 0), (1, 2, 0))


@compiled
@pytest.mark.parametrize("spec", ["ij,ij->i", "ij,jk->ik", "ji,kij->k", "bi,ij,bj->b"])
def test_permuted_views_match_numpy(spec: str) -> None:
    rng = np.random.default_rng(2)
    n = {"i": 5, "j": 7, "k": 3, "b": 4}
    ops = []
    for term in spec.split("->")[0].split(","):
        base = rng.standard_normal([n[x] for x in reversed(term)])
        ops.append(base.T)  # every operand a transposed view
    np.testing.assert_allclose(einsum(spec, *ops), np.einsum(spec, *ops), rtol=1e-12)
