"""longdouble: computed in C's long double, numpy's longdouble (x86-64: 80-bit x87)."""

from __future__ import annotations

import numpy as np
import pytest

import polyopt
from polyopt.errors import CodegenError

WIDER = np.finfo(np.longdouble).nmant > np.finfo(np.float64).nmant
X = np.array([0, 1, 2, 5], np.longdouble) / 3


@pytest.mark.cc
def test_builtins_in_long_double() -> None:
    k = polyopt.compile("def f(longdouble(N) A) -> (B) { B(i) = exp(A(i)) * sqrt(A(i)) }")
    want = np.exp(X) * np.sqrt(X)
    eps = np.finfo(np.longdouble).eps if WIDER else np.finfo(np.float64).eps
    np.testing.assert_allclose(k(X), want, rtol=8 * eps, atol=0)  # libm's expl, sqrtl


@pytest.mark.cc
def test_reductions_conversions_and_modulo() -> None:
    top = polyopt.compile("def f(longdouble(N) A) -> (B) { B max=! A(i) }")
    assert top(X) == X.max()
    assert np.isnan(top(np.append(X, np.nan)))  # NaN propagates, as numpy's max
    cvt = polyopt.compile("def f(longdouble(N) A) -> (B) { B(i) = int32(A(i) * 1e10) }")
    np.testing.assert_array_equal(cvt(np.append(X, np.nan)),
                                  [0, 2**31 - 1, 2**31 - 1, 2**31 - 1, 0])  # saturates
    mod = polyopt.compile("def f(longdouble(N) A) -> (B) { B(i) = A(i) % 0.75 }")
    np.testing.assert_array_equal(mod(X), np.mod(X, np.longdouble(0.75)))


def test_cuda_has_no_long_double() -> None:
    with pytest.raises(CodegenError, match="tensor A is longdouble, which CUDA has no type"):
        polyopt.compile("def f(longdouble(N) A) -> (B) { B(i) = A(i) * 2 }", target="cuda",
                        sizes={"N": 4})
