"""16-bit float reductions accumulate in float32 and store in the declared type."""

from __future__ import annotations

import numpy as np
import pytest

import polyopt
from polyopt import lang

SUM = "def s(float16(N) A) -> (s) { s +=! A(r_i) }"
MM = "def mm(float16(M,K) A, float16(K,N) B) -> (C) { C(m,n) +=! A(m,r_k) * B(r_k,n) }"


def test_an_output_reduction_gets_a_float32_accumulator_and_a_store_back() -> None:
    p = lang.build_program(MM + "\n", sizes={"M": 4, "N": 4, "K": 4})
    assert [(t.name, t.dtype) for t in p.locals] == [("C_acc", "float32")]
    assert [(s.name, s.tensor) for s in p.stmts] == [("C_0", "C_acc"), ("C_1", "C")]
    assert str(p.stmts[0].rhs) == "(float32(A(m, r_k)) * float32(B(r_k, n)))"
    assert str(p.stmts[1].rhs) == "float16(C_acc(m, n))"


def test_reads_after_the_reduction_see_the_declared_type() -> None:
    src = ("def f(float16(M,K) A) -> (C) { C(m) +=! A(m,r_k)\n"
           "  C(m) = C(m) * 2 }")
    p = lang.build_program(src)
    assert str(p.stmts[1].rhs) == "(float16(C_acc(m)) * 2)"


def test_a_local_is_retyped_and_elementwise_defs_are_unchanged() -> None:
    src = ("def f(float16(M,K) A) -> (O) local (T) { T(m) +=! A(m,r_k)\n"
           "  O(m) = T(m) + 1 }")
    p = lang.build_program(src)
    assert [(t.name, t.dtype) for t in p.locals] == [("T", "float32")]
    assert str(p.stmts[1].rhs) == "(float16(T(m)) + 1)"
    same = "def g(float16(N) A) -> (O) { O(i) = A(i) * 2\n }"
    assert not lang.build_program(same).locals


@pytest.mark.cc
@pytest.mark.parametrize("target", ["c", "cuda-emulated"])
def test_float16_sums_accumulate_in_float32(target: str) -> None:
    x = np.random.default_rng(0).random(20000).astype(np.float16)
    want = x.astype(np.float64).sum()
    got = polyopt.compile(SUM, target=target)(x)
    assert got.dtype == np.float16
    assert abs(float(got) - want) <= 2e-3 * want  # the float16 result's own rounding
    if target == "c":
        assert abs(float(polyopt.einsum("i->", x)) - want) <= 2e-3 * want


@pytest.mark.cc
@pytest.mark.parametrize("target", ["c", "cuda-emulated"])
def test_float16_matmul_with_a_long_reduction(target: str) -> None:
    rng = np.random.default_rng(1)
    A = (rng.random((16, 4096)) - 0.5).astype(np.float16)
    B = (rng.random((4096, 8)) - 0.5).astype(np.float16)
    want = A.astype(np.float64) @ B.astype(np.float64)
    got = polyopt.compile(MM, target=target)(A, B)
    # float32 accumulation: only the final float16 rounding (and float32 sums) remain
    np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-3 * np.abs(want).max())


@pytest.mark.cc
def test_accumulating_onto_the_callers_buffer_loads_it_first() -> None:
    src = "def acc(float16(M,K) A) -> (float16(M) C) { C(m) += A(m,r_k) }"
    with pytest.warns(polyopt.PolyoptWarning, match="caller's buffer"):
        p = lang.build_program(src)
    assert p.stmts[0].name == "C_widen"
    A = np.random.default_rng(2).random((3, 5000)).astype(np.float16)
    C = np.array([100, -7, 0.5], np.float16)
    want = C.astype(np.float64) + A.astype(np.float64).sum(axis=1)
    with pytest.warns(polyopt.PolyoptWarning, match="caller's buffer"):
        kernel = polyopt.compile(src)
    kernel(A, outputs=[C])
    np.testing.assert_allclose(C, want, rtol=2e-3)
