"""Common-subexpression elimination on the program (polyopt.lang.cse)."""

from __future__ import annotations

import numpy as np
import pytest
from lang_helpers import build, same_set

import polyopt
from polyopt import ir

SOFTMAX = """def softmax(float(N,D) X) -> (Y) local (mx, den) {
    mx(n)  max=! X(n,r_d)
    den(n) +=! exp(X(n,r_d) - mx(n))
    Y(n,d)  = exp(X(n,d) - mx(n)) / den(n)
}"""


def calls(p: ir.Program, fn: str) -> int:
    return sum(1 for s in p.stmts for e in s.rhs.walk() if isinstance(e, ir.Call) and e.fn == fn)


def test_shared_call_is_computed_once_before_its_first_use() -> None:
    p = build(SOFTMAX)
    assert [s.name for s in p.stmts] == ["mx_0", "cse0_0", "den_0", "Y_0"]
    assert calls(p, "exp") == 1
    cse = p.stmts[1]
    assert (cse.lhs, str(cse.rhs)) == (("n", "r_d"), "exp((X(n, r_d) - mx(n)))")
    assert same_set(cse.domain, "[N, D] -> { cse0_0[n, r_d] : 0 <= n < N and 0 <= r_d < D }")
    assert str(p.stmts[3].rhs) == "(cse0(n, d) / den(n))"
    assert p.locals[-1] == ir.Tensor("cse0", "float32", ("N", "D"), "local")


@pytest.mark.cc
def test_shared_call_kernel_matches_numpy_and_contracts_the_local() -> None:
    x = np.random.default_rng(0).standard_normal((37, 101)).astype(np.float32)
    k = polyopt.compile(SOFTMAX, sizes={"N": 37, "D": 101})
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(k(x), e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)
    assert ".contract('cse0', 'n')" in k.schedule.as_python()


def test_points_are_the_union_of_the_uses() -> None:
    src = """def f(float(N) A) -> (B, C) {
        B(i) = exp(A(i)) where i in 0:3
        C(j) = exp(A(j)) + 1
    }"""
    p = build(src, sizes={"N": 10})
    assert p.locals[0].shape == ("10",)
    assert same_set(p.stmts[0].domain, "{ cse0_0[i] : 0 <= i < 10 }")
    # Parametric, its extent is max(3, N): no affine box, so nothing is hoisted.
    assert calls(build(src), "exp") == 2


def test_not_shared_when_an_operand_changes_in_between() -> None:
    p = build("""def f(float(N) A) -> (B, C) {
        B(i) = A(i)
        B(i) = B(i) + exp(B(i))
        C(i) = exp(B(i))
    }""")
    assert calls(p, "exp") == 2 and not p.locals


def test_not_shared_under_a_select_or_within_one_statement_or_cheap() -> None:
    p = build("""def f(float(N) A) -> (B, C) {
        B(i) = A(i) > 0 ? exp(A(i)) : 0
        C(i) = exp(A(i)) * exp(A(i)) + fmax(A(i), 0) + fmax(A(i), 0) * B(i)
    }""")
    assert calls(p, "exp") == 3 and not p.locals


def test_new_local_name_avoids_user_names() -> None:
    p = build("""def f(float(N) cse0) -> (B, C) {
        B(i) = exp(cse0(i))
        C(i) = exp(cse0(i)) * 2
    }""")
    assert [t.name for t in p.locals] == ["cse1"]


def test_duplicate_local_is_merged_into_the_first() -> None:
    p = build("""def f(float(N,D) X) -> (Y) local (a, b) {
        a(n) +=! X(n,r_d) * 2
        b(m) +=! X(m,r_k) * 2
        Y(n,d) = X(n,d) * a(n) + b(n)
    }""")
    assert [t.name for t in p.locals] == ["a"]
    assert str(p.stmts[-1].rhs) == "((X(n, d) * a(n)) + a(n))"


def test_locals_differing_in_domain_or_reading_changed_tensors_stay() -> None:
    p = build("""def f(float(N,D) X) -> (Y) local (a, b) {
        a(n) +=! X(n,r_d) where r_d in 0:2
        b(n) +=! X(n,r_d)
        Y(n,d) = a(n) + b(n) + X(n,d)
    }""")
    assert [t.name for t in p.locals] == ["a", "b"]
