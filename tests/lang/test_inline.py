"""Pointwise locals inlined into their one reader (polyopt.lang.inline)."""

from __future__ import annotations

import numpy as np
import pytest
from lang_helpers import build

import polyopt

CHAIN = """def gelu_grad(float(M,N) X, float(M,N) G) -> (Y, T) local (a, b, c, d) {
    a(i,j) = X(i,j) * 0.7071067811865476
    b(i,j) = erf(a(i,j)) + 1.0
    c(i,j) = exp(X(i,j) * X(i,j) * -0.5) * 0.3989422804014327
    d(i,j) = b(i,j) * 0.5 + X(i,j) * c(i,j)
    Y(i,j) = G(i,j) * d(i,j)
    T(j,i) = Y(i,j)
}"""


def test_a_chain_of_pointwise_locals_becomes_one_statement() -> None:
    p = build(CHAIN)
    assert [s.name for s in p.stmts] == ["Y_0", "T_0"] and not p.locals
    assert str(p.stmts[0].rhs).count("X(i, j)") == 4  # each read as the links read it


@pytest.mark.cc
def test_the_inlined_chain_matches_numpy() -> None:
    rng = np.random.default_rng(0)
    x, g = (rng.standard_normal((33, 70)).astype(np.float32) for _ in range(2))
    y, t = polyopt.compile(CHAIN, sizes={"M": 33, "N": 70})(x, g)
    erf = np.vectorize(__import__("math").erf)
    want = g * ((erf(x / np.sqrt(2)) + 1) * 0.5 + x * np.exp(-x * x / 2) / np.sqrt(2 * np.pi))
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(t, want.T, rtol=1e-5, atol=1e-6)


def test_a_permuted_read_renames_the_writers_iterators() -> None:
    p = build("""def f(float(M,N) A) -> (B) local (t) {
        t(i,j) = A(i,j) * 2.0 + A(i,j)
        B(j,i) = t(i,j) + 1.0
    }""")
    assert [s.name for s in p.stmts] == ["B_0"]
    assert str(p.stmts[0].rhs) == "(((A(i, j) * 2.0) + A(i, j)) + 1.0)"
    q = build("""def f(float(M,N) A) -> (B) local (t) {
        t(j,i) = A(i,j) * 2.0
        B(i,j) = t(j,i) + 1.0
    }""")
    assert str(q.stmts[0].rhs) == "((A(i, j) * 2.0) + 1.0)"


@pytest.mark.parametrize("src, why", [
    ("""def f(float(N) A) -> (B, C) local (t) {
        t(i) = exp(A(i))
        B(i) = t(i) + 1.0
        C(i) = t(i) * 2.0
    }""", "two readers: computed once, kept"),
    ("""def f(float(N) A) -> (B) local (t) {
        t(i) = exp(A(i))
        B(i) = t(i) * t(i)
    }""", "read twice by its reader"),
    ("""def f(float(M) A, float(N) C) -> (B) local (t) {
        t(i) = exp(A(i))
        B(i,j) = t(i) * C(j)
    }""", "each element read by N instances: the call would run N times"),
    ("""def f(float(M,K) A, float(K,N) W) -> (B) local (t) {
        t(i,k) = exp(A(i,k))
        B(i,j) +=! t(i,k) * W(k,j)
    }""", "a contraction reads each element N times"),
    ("""def f(float(N) A) -> (B) local (t) {
        t(i) = exp(A(i)) where i in 0:N-1
        B(i) = t(i) + 1.0 where i in 0:N
    }""", "a read the writer does not cover"),
    ("""def f(float(N) A) -> (B) local (t) {
        t(i) +=! A(r) * A(i)
        B(i) = t(i) + 1.0
    }""", "a reduction"),
])
def test_what_is_not_inlined(src: str, why: str) -> None:
    p = build(src)
    assert [t.name for t in p.locals][:1] == ["t"], why


def test_a_reduction_reading_each_element_once_takes_the_value() -> None:
    p = build("""def f(float(M,N) A) -> (S) local (t) {
        t(i,j) = A(i,j) * A(i,j)
        S(j) +=! t(r_i, j)
    }""")
    assert not p.locals and str(p.stmts[0].rhs) == "(A(r_i, j) * A(r_i, j))"
