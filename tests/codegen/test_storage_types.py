"""16-bit floats: float16 native in C, float16 and bfloat16 kept as bits where a target cannot
compute on them (the prelude's loads, stores and rounding), checked exhaustively against
numpy's and ml_dtypes' conversions."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import polyopt

pytestmark = pytest.mark.cc

BF16 = np.dtype(ml_dtypes.bfloat16)
CASES = [("float16", np.dtype(np.float16), "c"), ("float16", np.dtype(np.float16), "cuda-emulated"),
         ("bfloat16", BF16, "c"), ("bfloat16", BF16, "cuda-emulated")]


def same(got: np.ndarray, want: np.ndarray) -> bool:
    with np.errstate(invalid="ignore"):
        g, w = got.astype(np.float64), want.astype(np.float64)
    return bool(np.all((g == w) | (np.isnan(g) & np.isnan(w))))


@pytest.mark.parametrize("name, dtype, target", CASES)
def test_every_16_bit_pattern_loads_exactly(name: str, dtype: np.dtype, target: str) -> None:
    x = np.arange(1 << 16, dtype=np.uint16).view(dtype)
    k = polyopt.compile(f"def l({name}(N) x) -> (o) {{ o(i) = float32(x(i)) }}", target=target)
    got = k(x)
    assert got.dtype == np.float32 and same(got, x.astype(np.float32))


def float32_samples() -> np.ndarray:
    """Random magnitudes over float32's range, every halfway case near float16's and
    bfloat16's rounding points, and the special values."""
    rng = np.random.default_rng(0)
    wide = rng.standard_normal(50000) * 10.0 ** rng.integers(-45, 38, 50000)
    halves = np.arange(1, 1 << 16, dtype=np.int64) << 13  # float16's and bfloat16's rounding
    near = np.concatenate([halves + d for d in (-1, 0, 1, 0x1000, 0x1001)])  # points, around
    near = np.concatenate([near, near << 3]).astype(np.uint32).view(np.float32)
    specials = [0.0, -0.0, np.inf, -np.inf, np.nan, 65504.0, 65519.996, 65520.0, 3.39e38,
                5.96e-8, 2.98e-8, 2.99e-8, 1e-40, -1e-45]
    with np.errstate(over="ignore"):
        return np.concatenate([wide.astype(np.float32), near, np.array(specials, np.float32)])


@pytest.mark.parametrize("name, dtype, target", CASES)
def test_stores_round_to_nearest_even(name: str, dtype: np.dtype, target: str) -> None:
    f = float32_samples()
    k = polyopt.compile(f"def s(float(N) x) -> (o) {{ o(i) = {name}(x(i)) }}", target=target)
    got = k(f)
    with np.errstate(over="ignore", invalid="ignore"):
        want = f.astype(dtype)
    assert got.dtype == dtype and same(got, want)


@pytest.mark.parametrize("target", ["c", "cuda-emulated"])
def test_bfloat16_arithmetic_and_reductions(target: str) -> None:
    rng = np.random.default_rng(3)
    A = (rng.random((8, 3000)) - 0.25).astype(BF16)
    b = rng.random(8).astype(BF16)
    src = ("def f(bfloat16(M,K) A, bfloat16(M) b) -> (s, e) {\n"
           "  s(m) +=! A(m,r_k) * A(m,r_k)\n"
           "  e(m) = bfloat16(exp(b(m))) * 2 + b(m) * b(m)\n}")
    s, e = polyopt.compile(src, target=target)(A, b)
    A64, b64 = A.astype(np.float64), b.astype(np.float64)
    assert s.dtype == BF16 and e.dtype == BF16
    np.testing.assert_allclose(s.astype(np.float64), (A64 * A64).sum(axis=1), rtol=8e-3)
    np.testing.assert_allclose(e.astype(np.float64), np.exp(b64) * 2 + b64 * b64, rtol=8e-3)


def test_bfloat16_einsum_and_dtype_checks() -> None:
    x = np.random.default_rng(4).random((64, 32)).astype(BF16)
    got = polyopt.einsum("ij->j", x)
    assert got.dtype == BF16
    np.testing.assert_allclose(got.astype(np.float64), x.astype(np.float64).sum(0), rtol=8e-3)
    k = polyopt.compile("def f(bfloat16(N) x) -> (o) { o(i) = x(i) + 1 }")
    with pytest.raises(polyopt.ShapeError, match="bfloat16"):
        k(np.zeros(3, np.float16))
