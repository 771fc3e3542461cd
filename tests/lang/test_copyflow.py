"""Reads that see through copies (polyopt/lang/copyflow.py) and the dead writes that
polyopt/lang/dead.py drops (issue 40), on minimized programs; the interpreter checks
that each rewritten program computes what the text says."""

from __future__ import annotations

import warnings

import islpy as isl
import numpy as np
import pytest

from polyopt import ir, lang
from polyopt.errors import PolyoptWarning
from polyopt.lang.copyflow import is_copy
from polyopt.runtime.interp import evaluate


def _build(src: str, **sizes: int) -> ir.Program:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a rewrite of this pass says nothing
        return lang.build_program(src, sizes=sizes or None)


def _reads(s: ir.Stmt) -> list[str]:
    return [str(e) for e in s.rhs.walk() if isinstance(e, ir.Read)]


CHAIN = """
def jacobi1d<T=6>(float(N) A0) -> (B) local (float(T,N) A) {
    A(t,i) = A0(i)                                         where t in 0:1, i in 0:N
    A(t,i) = A(t-1,i)                                      where t in 1:T, i in 0:1
    A(t,i) = A(t-1,i)                                      where t in 1:T, i in N-1:N
    A(t,i) = (A(t-1,i-1) + A(t-1,i) + A(t-1,i+1)) / 3.0    where t in 1:T, i in 1:N-1
    B(i)   = A(T-1,i)
}
"""


def test_chain_of_copies_reads_the_input() -> None:
    """README's jacobi1d: the boundary copies chain back to A0's first plane copy, which
    copies the input: each boundary copy reads A0 itself."""
    p = _build(CHAIN, N=9)
    by = {s.name: s for s in p.stmts}
    assert _reads(by["A_1"]) == ["A0(i)"] and _reads(by["A_2"]) == ["A0(i)"], p
    assert _reads(by["A_3"])[0].startswith("A("), p  # the stencil reads it partly: kept
    a0 = np.arange(9, dtype=np.float32)
    out = evaluate(p, [a0], {})[0]
    want = a0.astype(np.float64)
    for _ in range(5):
        want[1:-1] = (want[:-2] + want[1:-1] + want[2:]) / 3.0
    np.testing.assert_allclose(out, want, rtol=1e-6)


def test_copied_local_is_bypassed_and_dropped() -> None:
    src = """
def f(float(N) A) -> (C) local (B) {
    B(i) = A(i+1) where i in 0:N-1
    C(i) = B(i) * 2.0
}
"""
    p = _build(src)
    assert [s.name for s in p.stmts] == ["C_0"] and not p.locals, p
    assert _reads(p.stmts[0]) == ["A((i + 1))"], p


def test_partly_copied_read_is_kept() -> None:
    """A read some of whose instances get a copy's value keeps its statement whole."""
    src = """
def f<T=4>(float(N) A) -> (float(N) Bo) local (float(T,N) B) {
    B(t,i) = A(i) where t in 0:1, i in 0:N
    B(t,i) = B(t-1,i) * 0.5 where t in 1:T, i in 0:N
    Bo(i) = B(T-1,i)
}
"""
    p = _build(src, N=5)
    assert _reads(p.stmts[1]) == ["B((t - 1), i)"], p


def test_not_copies() -> None:
    """Arithmetic, a cast or a padded read is not a copy."""
    src = """
def f(float(N) A, int32(N) K) -> (C, D, E, H) local (B, F, G) {
    B(i) = A(i) + 0.0
    F(i) = float(K(i))
    G(i) = A(i-1) where pad A(1:0)
    C(i) = B(i)
    D(i) = F(i)
    E(i) = G(i)
    H(i) = B(i) + F(i) + G(i)
}
"""
    # H reads B, F and G too: a local read once would be inlined into its reader
    p = _build(src, N=4)
    copies = [s.name for s in p.stmts if is_copy(p, s)]
    assert copies == ["C_0", "D_0", "E_0"], copies  # G_0's read is padded
    assert [s.tensor for s in p.stmts][:3] == ["B", "F", "G"], p  # all still read


def test_overwritten_copy_source_is_not_seen_through() -> None:
    """C's value is the second write of B, not the copy's."""
    src = """
def f(float(N) A) -> (C) local (float(N) B) {
    B(i) = A(i)
    B(i) = B(i) * 2.0
    C(i) = B(i)
}
"""
    p = _build(src)
    assert str(p.stmts[-1].rhs) == "(A(i) * 2.0)", p  # B's second write, inlined into C


def test_overwritten_statement_is_dropped_with_a_warning() -> None:
    src = """
def f(float(N) A) -> (B) {
    B(i) = A(i) + 0.0
    B(i) = A(i) + 1.0
}
"""
    with pytest.warns(PolyoptWarning, match=r"B_0 write only values that no read gets"):
        p = lang.build_program(src)
    assert [s.name for s in p.stmts] == ["B_1"], p
    a = np.arange(4, dtype=np.float32)
    np.testing.assert_allclose(evaluate(p, [a], {})[0], a + 1.0)


def test_partly_overwritten_statement_keeps_its_live_piece() -> None:
    """syrk's form: a default, then the lower triangle overwritten: the default keeps the
    upper triangle, silently."""
    src = """
def f(float(N,N) C) -> (float(N,N) Co) {
    Co(i,j) = C(i,j)
    Co(i,j) = 2.0 * C(i,j) where j in 0:i+1
}
"""
    p = _build(src)
    upper = isl.Set("[N] -> { Co_0[i, j] : 0 <= i < j < N }")
    assert isl.Set(p.stmts[0].domain).is_equal(upper), p
    c = np.arange(9, dtype=np.float32).reshape(3, 3)
    want = np.where(np.tril(np.ones((3, 3), bool)), 2.0 * c, c)
    np.testing.assert_allclose(evaluate(p, [c], {})[0], want)


def test_dead_only_at_some_sizes_is_kept() -> None:
    """Writes dead only where a size is small (nothing reads them when N < 3) stay."""
    src = """
def f(float(N) A) -> (B) local (s) {
    s = A(0) * 2.0
    B(i) = s() + A(i) where i in 0:N-2
}
"""
    p = _build(src)
    assert isl.Set(p.stmts[0].domain).is_equal(isl.Set("[N] -> { s_0[] }")), p
