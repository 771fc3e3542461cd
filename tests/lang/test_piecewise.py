"""Piecewise statements (lang/piecewise.py): a select on an affine condition of the
iterators is cut into a statement per arm, over the part of the domain where that arm is
taken; an arm's reads are made only there."""

from __future__ import annotations

import islpy as isl
import numpy as np
import pytest

import polyopt
from polyopt import ir
from polyopt.lang import build_program

EDGES = """def e(float(N) A) -> (B) {
    B(i) = (i == 0 || i == N-1) ? A(i) : 0.5 * (A(i-1) + A(i+1)) where i in 0:N
}"""


def _pieces(src: str, sizes: dict[str, int] | None = None) -> list[tuple[str, isl.Set]]:
    return [(str(s.rhs), isl.Set(s.domain).set_tuple_name("S"))
            for s in build_program(src, sizes=sizes).stmts]


def _set(text: str) -> isl.Set:
    return isl.Set(text)


def test_the_arms_partition_the_domain_and_read_only_where_taken() -> None:
    pieces = _pieces(EDGES)
    edges = [d for rhs, d in pieces if rhs == "A(i)"]
    inner = [d for rhs, d in pieces if rhs != "A(i)"]
    assert len(edges) == 2 and len(inner) == 1  # one statement per convex piece
    assert edges[0].union(edges[1]).is_equal(_set("[N] -> { S[i] : N > 0 and (i = 0 or "
                                                  "i = N - 1) }"))
    assert inner[0].is_equal(_set("[N] -> { S[i] : 0 < i < N - 1 }"))
    names = [s.name for s in build_program(EDGES).stmts]
    assert names == ["B_0", "B_1", "B_2"]  # numbered again


def test_a_piecewise_stencil_computes_and_reads_no_element_outside() -> None:
    """Without the cut, the inner arm's A(i-1) at i = 0 was a BoundsError."""
    a = np.random.default_rng(0).random(9).astype(np.float32)
    got = polyopt.compile(EDGES, sizes={"N": 9})(a)
    want = a.copy()
    want[1:-1] = 0.5 * (a[:-2] + a[2:])
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_an_arm_taken_outside_the_tensor_is_still_refused() -> None:
    src = "def f(float(N) A) -> (B) { B(i) = i >= 0 ? A(i-1) : 0.0 where i in 0:N }"
    with pytest.raises(polyopt.BoundsError):
        polyopt.compile(src, sizes={"N": 8})


@pytest.mark.parametrize(("cond", "where"), [
    ("i != 3", "i < 3 or i > 3"),
    ("!(i < 3)", "i >= 3"),
    ("i < 2 || i >= 6", "i < 2 or i >= 6"),
    ("i >= 2 && i < 6 && j == i", "2 <= i < 6 and j = i"),
    ("i % 2 == 0", "exists (k: i = 2k)"),
    ("2 * i + 1 <= N", "2i + 1 <= N"),
])
def test_conditions(cond: str, where: str) -> None:
    src = (f"def f(float(N,N) A) -> (B) {{ B(i,j) = ({cond}) ? A(i,j) : 0.0 "
           f"where i in 0:N, j in 0:N }}")
    got = [d for rhs, d in _pieces(src) if rhs == "A(i, j)"]
    want = _set(f"[N] -> {{ S[i,j] : 0 <= i < N and 0 <= j < N and ({where}) }}")
    assert got and isl.Set.from_basic_set(got[0].get_basic_sets()[0]).is_subset(want)
    union = got[0]
    for d in got[1:]:
        union = union.union(d)
    assert union.is_equal(want)
    a = np.random.default_rng(1).random((8, 8)).astype(np.float32)
    py = cond.replace("&&", " and ").replace("||", " or ").replace("!(", " not (")
    mask = np.array([[eval(py.replace("N", "8"), {"i": i, "j": j}) for j in range(8)]
                     for i in range(8)], dtype=bool)
    got_values = polyopt.compile(src, sizes={"N": 8})(a)
    np.testing.assert_allclose(got_values, np.where(mask, a, 0.0), rtol=1e-6)


@pytest.mark.parametrize("src", [
    # a statement reading its own tensor, in program order
    "def f(float(N) A) -> (B) { B(i) = A(i)\n B(i) = i == 0 ? 1.0 : B(i) }",
    # a condition that reads a tensor
    "def f(float(N) A) -> (B) { B(i) = A(i) > 0 ? A(i) : 0.0 }",
    # an accumulation
    "def f(float(N,M) A) -> (B) { B(i) +=! j < 2 ? A(i,j) : 0.0 }",
    # a select inside the expression, not the whole of it
    "def f(float(N) A) -> (B) { B(i) = 2.0 * (i < 2 ? A(i) : 0.0) }",
])
def test_left_as_a_select(src: str) -> None:
    s = build_program(src).stmts[-1]
    assert any(isinstance(e, ir.Select) for e in s.rhs.walk())
