"""polyopt.subscripts.tc: the canonical TC form of a contraction, complex contractions lowered to
real parts, and the dtypes computed in C types numpy has no TC name for."""

from __future__ import annotations

import math

import numpy as np
import pytest

from polyopt.errors import OptionError
from polyopt.subscripts.call import GENERIC_POINTS, contraction, einsum, einsum_plan

compiled = pytest.mark.cc


def _text(spec: str, *shapes: tuple[int, ...], dtype: object = np.float64) -> str:
    return einsum_plan(spec, *(np.zeros(s, dtype) for s in shapes)).text


@pytest.mark.parametrize(("one", "one_shapes", "other", "other_shapes"), [
    ("ij,jk->ik", [(2, 3), (3, 4)], "ab,bc->ac", [(2, 3), (3, 4)]),
    ("ij,jk->ik", [(2, 3), (3, 4)], "AB,BC->AC", [(2, 3), (3, 4)]),  # sublists' letters
    ("i,->i", [(3,), ()], ",i->i", [(), (3,)]),  # operands ordered by rank
    ("...i->...", [(2, 3, 4)], "ij->i", [(6, 4)]),  # adjacent dims merged
    ("i...->...", [(4, 2, 3)], "ij->j", [(4, 6)]),
    ("...i,...i", [(2, 3, 4), (4,)], "ij,j->i", [(6, 4), (4,)]),
])
def test_equivalent_calls_share_a_definition(one: str, one_shapes: list[tuple[int, ...]],
                                             other: str,
                                             other_shapes: list[tuple[int, ...]]) -> None:
    assert _text(one, *one_shapes) == _text(other, *other_shapes)


@pytest.mark.parametrize(("spec", "shapes", "text"), [
    # a broadcast dim (declared 1, read at 0) merges with nothing
    ("ij,ij->ij", [(1, 4), (3, 4)], "def einsum(float64(1,N0) T0, float64(N1,N0) T1) -> (O) "
     "{ O(b_,a_) = T0(0,a_) * T1(b_,a_) }"),
    ("iij->ij", [(3, 3, 4)], "def einsum(float64(N0,N0,N1) T0) -> (O) { O(a_,b_) = "
     "T0(a_,a_,b_) }"),  # nor does a diagonal
    ("ijk,jk->i", [(2, 3, 4), (3, 4)], "def einsum(float64(N0) T0, float64(N1,N0) T1) -> (O) "
     "{ O(b_) +=! T0(a_) * T1(b_,a_) }"),
    # j, k are adjacent in one operand but in the other order in the other
    ("ijk,kj->i", [(2, 3, 4), (4, 3)], "def einsum(float64(N0,N1) T0, float64(N2,N1,N0) T1) -> "
     "(O) { O(c_) +=! T0(a_,b_) * T1(c_,b_,a_) }"),
])
def test_what_merges(spec: str, shapes: list[tuple[int, ...]], text: str) -> None:
    assert _text(spec, *shapes) == text


def test_complex_lowered_to_real_parts() -> None:
    text = _text("ij,jk->ik", (2, 3), (3, 4), dtype=np.complex64)
    assert text == (
        "def einsum(float32(N0,N1,2) T0, float32(N1,N2,2) T1) -> (O, Oi) { "
        "O(a_,c_) +=! T0(a_,b_,0) * T1(b_,c_,0) - T0(a_,b_,1) * T1(b_,c_,1)  "
        "Oi(a_,c_) +=! T0(a_,b_,0) * T1(b_,c_,1) + T0(a_,b_,1) * T1(b_,c_,0) }")
    mixed = einsum_plan("i,i->i", np.zeros(3), np.zeros(3, np.complex128))
    assert mixed.text == (  # a real operand has no imaginary part to read
        "def einsum(float64(N0) T0, float64(N0,2) T1) -> (O, Oi) { "
        "O(a_) = T0(a_) * T1(a_,0)  Oi(a_) = T0(a_) * T1(a_,1) }")
    assert mixed.dtype == np.complex128
    assert mixed.operands[1].shape == (3, 2)


def test_too_many_complex_operands() -> None:
    ops = [np.ones(2, np.complex64)] * 9
    with pytest.raises(OptionError, match="at most 8 complex operands"):
        einsum_plan(",".join("i" * 9), *ops)


def test_integers_of_one_width_share_a_kernel() -> None:
    texts = {_text("ij,j", (2, 3), (3,), dtype=d) for d in (np.int32, np.uint32)}
    assert texts == {_text("ij,j", (2, 3), (3,), dtype=np.uint32)}
    assert _text("i", (2,), dtype=np.uint16).startswith("def einsum(int16(")


def test_generic_kernels_only_for_small_problems() -> None:
    def generic(shape: tuple[int, ...]) -> bool:
        c = contraction("ij->", [np.zeros(shape)], dtype=None, casting="safe", order="K")
        return c.generic

    assert generic((8, GENERIC_POINTS // 8))
    assert not generic((8, GENERIC_POINTS // 8 + 1))


def _tolerance(dtype: np.dtype, reduction: int, magnitude: np.ndarray) -> np.ndarray:
    return 8 * np.finfo(dtype).eps * (reduction + 1) * magnitude + 1e-30


@compiled
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128, np.clongdouble])
@pytest.mark.parametrize(("spec", "shapes"), [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("i,i", [(7,), (7,)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
    ("ii->i", [(4, 4)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    (",ij->ji", [(), (3, 4)]),
])
def test_complex(dtype: type, spec: str, shapes: list[tuple[int, ...]]) -> None:
    rng = np.random.default_rng(7)
    ops = [(rng.standard_normal(s) + 1j * rng.standard_normal(s)).astype(dtype) for s in shapes]
    got = einsum(spec, *ops)
    want = np.einsum(spec, *ops)
    assert got.dtype == want.dtype
    reduction = max(1, math.prod(max(s, default=1) for s in shapes))
    magnitude = np.einsum(spec, *(np.abs(op).astype(np.float64) for op in ops))
    err = np.abs(np.asarray(got, np.clongdouble) - np.asarray(want, np.clongdouble))
    assert np.all(err <= _tolerance(np.dtype(dtype), reduction, magnitude))


@compiled
def test_complex_large_and_mixed() -> None:
    """A specialized (scheduled) complex kernel, and real operands promoted as numpy does."""
    rng = np.random.default_rng(8)
    n = int(GENERIC_POINTS ** (1 / 3)) + 8
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = (rng.standard_normal((n, n)) + 1j * rng.standard_normal((n, n))).astype(np.complex64)
    got, want = einsum("ij,jk", a, b), np.einsum("ij,jk", a, b)
    assert got.dtype == want.dtype == np.complex64
    tol = _tolerance(np.dtype(np.complex64), n, np.abs(a) @ np.abs(b))
    assert np.all(np.abs(got - want) <= tol)
    ints = np.arange(6, dtype=np.int32).reshape(2, 3)
    got = einsum("ij,j->i", ints, np.array([1j, 2, 3 - 1j], np.complex64))
    assert got.dtype == np.complex128  # int32 with complex64: numpy's result type
    np.testing.assert_allclose(got, ints @ np.array([1j, 2, 3 - 1j]), rtol=1e-12)
    real_as_complex = einsum("i,i", np.ones(3), np.ones(3), dtype=np.complex128)
    assert real_as_complex == 3 and type(real_as_complex) is np.complex128


@compiled
def test_longdouble_is_computed_in_long_double() -> None:
    """Sums that float64 rounds: 1 + 2**-60 survives only in the 64-bit mantissa."""
    if np.finfo(np.longdouble).nmant <= np.finfo(np.float64).nmant:
        pytest.skip("this platform's long double is double")
    tiny = np.longdouble(2) ** -60
    a = np.array([1, tiny, tiny], np.longdouble)
    assert einsum("i->", a) == 1 + 2 * tiny != 1
    b = np.array([[1, tiny], [tiny, 1]], np.longdouble)
    np.testing.assert_array_equal(einsum("ij,jk", b, b), np.einsum("ij,jk", b, b))
    z = np.array([1 + tiny * 1j], np.clongdouble)
    assert einsum("i,i", z, z) == np.einsum("i,i", z, z)
