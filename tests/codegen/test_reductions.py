"""Vectorized reductions (``CWalker._reduction``): a float ``min``/``max`` combines by a plain
comparison with a NaN flag beside it, every other reduction of C's arithmetic types in an
OpenMP ``simd reduction``; each against numpy on NaN, infinities, signed zeros, lengths that
are not a multiple of the vector lanes, and a target that holds a value already."""

from __future__ import annotations

import numpy as np
import pytest

import polyopt

pytestmark = pytest.mark.cc

NUMPY = {"max": np.max, "min": np.min, "+": np.sum}


def row_reduction(op: str, dtype: str, rows: int, length: int) -> polyopt.Kernel:
    src = f"def r({dtype}(N,K) A) -> (B) {{ B(i) {op}=! A(i,r_k) }}"
    return polyopt.compile(src, "r", sizes={"N": rows, "K": length})


def special_rows(dtype: str, length: int) -> np.ndarray:
    """Rows of random values with NaN, infinities and signed zeros at the ends, in the body
    and in the part past the last whole vector."""
    rng = np.random.default_rng(length)
    a = rng.standard_normal((8, length)).astype(dtype)
    last = length - 1
    a[0, 0] = np.nan
    a[1, last] = np.nan
    a[2, length // 2] = np.nan
    a[2, last] = np.inf
    a[3, 0], a[3, last] = np.inf, -np.inf
    a[4, :] = -0.0
    a[4, length // 2] = 0.0
    a[5, :] = -np.inf
    a[6, :] = np.nan
    return a


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("length", [1, 7, 16, 17, 33, 100])
def test_float_min_max_reduction_matches_numpy(op: str, dtype: str, length: int) -> None:
    k = row_reduction(op, dtype, 8, length)
    a = special_rows(dtype, length)
    np.testing.assert_array_equal(k(a), NUMPY[op](a, axis=1))


@pytest.mark.parametrize("op, cmp", [("max", ">"), ("min", "<")])
def test_float_min_max_reduction_keeps_nan_off_the_accumulator_chain(op: str, cmp: str) -> None:
    source = row_reduction(op, "float32", 64, 512).source
    assert f"po_acc = po_x {cmp} po_acc ? po_x : po_acc;" in source
    assert "po_nan |= po_x != po_x;" in source
    assert f"reduction({op}:po_acc) reduction(|:po_nan)" in source


@pytest.mark.filterwarnings("ignore:reduction without initialization")
@pytest.mark.parametrize("op", ["max", "min"])
def test_min_max_reduction_into_a_nan_target_stays_nan(op: str) -> None:
    src = f"def r(float(N,K) A) -> (B) {{ B(i) {op}= A(i,r_k) }}"
    k = polyopt.compile(src, "r", sizes={"N": 4, "K": 40})
    a = np.random.default_rng(1).standard_normal((4, 40)).astype(np.float32)
    b = np.array([np.nan, 0.5, -9.0, 9.0], np.float32)
    want = (np.maximum if op == "max" else np.minimum)(b, NUMPY[op](a, axis=1))
    got = k(a, outputs=[b.copy()])
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32", "int64", "uint64"])
@pytest.mark.parametrize("op", ["max", "min", "+"])
@pytest.mark.parametrize("length", [5, 64, 131])
def test_integer_reduction_is_a_simd_reduction(op: str, dtype: str, length: int) -> None:
    k = row_reduction(op, dtype, 6, length)
    info = np.iinfo(dtype)
    a = np.random.default_rng(length).integers(info.min, info.max, (6, length), dtype=dtype,
                                               endpoint=True)
    a[0, length - 1], a[1, 0] = info.max, info.min
    assert f"reduction({'+' if op == '+' else op}:po_acc)" in k.source
    want = NUMPY[op](a, axis=1, dtype=dtype) if op == "+" else NUMPY[op](a, axis=1)
    np.testing.assert_array_equal(k(a), want)
