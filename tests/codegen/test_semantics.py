"""Arithmetic semantics that C leaves undefined or that differ from numpy, defined the same way
on every target (C, cuda-emulated) and in the float64 interpreter: NaN through min/max,
integer MIN / -1, and float-to-integer conversions out of range."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import polyopt
from polyopt import lang
from polyopt.runtime.interp import evaluate

pytestmark = pytest.mark.cc

TARGETS = ("c", "cuda-emulated")


def run_all(src: str, *inputs: np.ndarray, **kw: object) -> list[np.ndarray]:
    """The result of ``src`` on each target and in the interpreter (its own dtypes kept)."""
    program = lang.build_program(src)
    interp = evaluate(program, list(inputs), {}, dtype=np.float32)[0]
    return [polyopt.compile(src, target=t, **kw)(*inputs) for t in TARGETS] + [interp]


@pytest.mark.parametrize("op, ref", [("max", np.max), ("min", np.min)])
@pytest.mark.parametrize("row", [0, 5, 63])
def test_min_max_reductions_propagate_nan(op: str, ref: object, row: int) -> None:
    A = np.random.default_rng(row).random((8, 64)).astype(np.float32)
    A[row % 8, row] = np.nan
    src = f"def r(float(N,K) A) -> (B) {{ B(i) {op}=! A(i,r_k) }}"
    want = ref(A, axis=1)  # type: ignore[operator]
    for got in run_all(src, A):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("op, ref", [("max", np.maximum), ("min", np.minimum)])
def test_min_max_of_two_values_propagate_nan_and_fmax_ignores_it(op: str, ref: object) -> None:
    a = np.array([1, np.nan, 3, np.nan], np.float32)
    b = np.array([np.nan, 2, 1, np.nan], np.float32)
    src = f"def m(float(N) a, float(N) b) -> (o) {{ o(i) = {op}(a(i), b(i)) }}"
    for got in run_all(src, a, b):
        np.testing.assert_array_equal(got, ref(a, b))  # type: ignore[operator]
    c_fn = {"max": np.fmax, "min": np.fmin}[op]
    src = f"def m(float(N) a, float(N) b) -> (o) {{ o(i) = f{op}(a(i), b(i)) }}"
    for got in run_all(src, a, b):
        np.testing.assert_array_equal(got, c_fn(a, b))


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64"])
def test_integer_min_divided_by_minus_one_is_defined(dtype: str) -> None:
    lo = np.iinfo(dtype).min
    a = np.array([lo, lo, 7, -7, lo + 1], dtype)
    b = np.array([-1, 1, -1, 0, -1], dtype)
    src = (f"def d({dtype}(N) a, {dtype}(N) b) -> (q, r) {{ q(i) = a(i) / b(i)\n"
           f"  r(i) = a(i) % b(i) }}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numpy warns of the overflow it wraps
        want_q = np.where(b == 0, 0, a // np.where(b == 0, 1, b))
        want_r = np.where(b == 0, 0, a % np.where(b == 0, 1, b))
    program = lang.build_program(src)
    interp = evaluate(program, [a, b], {})
    for t in TARGETS:
        q, r = polyopt.compile(src, target=t)(a, b)
        np.testing.assert_array_equal(q, want_q)
        np.testing.assert_array_equal(r, want_r)
    np.testing.assert_array_equal(interp[0], want_q)
    np.testing.assert_array_equal(interp[1], want_r)


SPECIAL = np.array([np.nan, np.inf, -np.inf, 3e9, -3e9, 1e19, 300.7, -300.7, 0.5, -0.5],
                   np.float32)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32", "uint32", "int64", "uint64"])
def test_float_to_integer_conversion_saturates(dtype: str) -> None:
    info = np.iinfo(dtype)

    def saturated(x: float) -> int:
        if np.isnan(x):
            return 0
        return int(min(max(np.trunc(x), info.min), info.max)) if np.isfinite(x) else (
            info.max if x > 0 else info.min)
    want = np.array([saturated(float(x)) for x in SPECIAL], dtype)
    src = f"def c(float(N) x) -> (o) {{ o(i) = {dtype}(x(i)) }}"
    for got in run_all(src, SPECIAL):
        assert got.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(got, want)


def test_gather_through_a_converted_float_index() -> None:
    """An index converted from a float saturates like any conversion, so a huge value is
    still reported as out of range."""
    src = "def g(float(N) X, float(M) A) -> (O) { O(i) = A(int32(X(i))) }"
    A = np.arange(4, dtype=np.float32)
    k = polyopt.compile(src)
    np.testing.assert_array_equal(k(np.array([0.5, 3.9, np.nan], np.float32), A), [0, 3, 0])
    with pytest.raises(polyopt.BoundsError, match="2147483647"):
        k(np.array([1e20], np.float32), A)


def test_signed_overflow_wraps_like_numpy() -> None:
    info = np.iinfo(np.int32)
    a = np.array([info.min, info.max, 5], np.int32)
    src = "def w(int32(N) a) -> (o) { o(i) = -a(i) + a(i) * 3 + 2147483647 }"
    with np.errstate(over="ignore"):
        want = -a + a * np.int32(3) + np.int32(info.max)
    for got in run_all(src, a):
        np.testing.assert_array_equal(got, want)
