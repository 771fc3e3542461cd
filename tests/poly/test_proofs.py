"""What isl proves for the printer: a never-negative index, a loop that carries nothing."""

from __future__ import annotations

import islpy as isl

from polyopt import ir
from polyopt.lang import build_program
from polyopt.poly import build_poly
from polyopt.poly.proofs import innermost_carries_nothing, never_negative

SHIFT = "def shift(float(N) A) -> (B) { B(i) = A(i) where i in 0:N-2 }"


def _index(name: str) -> ir.Var:
    return ir.Var(dtype="int64", name=name, kind="index")


def test_never_negative_over_a_statement_domain() -> None:
    pp = build_poly(build_program(SHIFT, "shift", {"N": 9}))
    s = pp.stmts[0]
    i = _index(s.iters[0])
    assert never_negative(pp, s, i)
    assert never_negative(pp, s, ir.Binary(dtype="int64", op="-", a=i, b=ir.Const(
        dtype="int64", value=0)))
    assert not never_negative(pp, s, ir.Binary(dtype="int64", op="-", a=i, b=ir.Const(
        dtype="int64", value=1)))  # i = 0 gives -1


def test_a_loop_carries_a_dependence_only_along_it() -> None:
    deps = isl.UnionMap("{ S[i, j] -> S[i + 1, j] }")
    outer = isl.UnionMap("{ S[i, j] -> [i] }")
    both = isl.UnionMap("{ S[i, j] -> [i, j] }")
    inner_first = isl.UnionMap("{ S[i, j] -> [j] }")
    assert not innermost_carries_nothing(outer, deps)
    assert innermost_carries_nothing(both, deps)  # i carries it, outside j
    assert innermost_carries_nothing(inner_first, deps)
    assert innermost_carries_nothing(outer, isl.UnionMap("{ S[i, j] -> S[i, j + 1] }"))
