"""The IR's fast path of the stride analysis (costmodel/strides.index_use): where an
iterator appears in an access's indices, before any schedule exists."""

from __future__ import annotations

import pytest

from polyopt.costmodel.strides import IndexUse, index_use
from polyopt.lang import build_program


def _read(src_rhs: str) -> tuple:
    src = ("def f(float(N,C,H,W) I) -> (O) { O(n,c,h,w) = " + src_rhs
           + " where n in 0:N, c in 0:C, h in 0:4, w in 0:4 }")
    return build_program(src).stmts[0].rhs.indices


@pytest.mark.parametrize(("rhs", "it", "want"), [
    ("I(n,c,h,w)", "w", IndexUse(0, True, 1)),  # unit stride
    ("I(n,c,h,2*w+1)", "w", IndexUse(0, False, 2)),  # a strided convolution's
    ("I(n,c,h,w)", "c", IndexUse(2, False, 0)),  # another dimension, two from the last
    ("I(n,c,w,h)", "w", IndexUse(1, False, 0)),  # transposed
    ("I(n,c,h,0)", "w", IndexUse(None, False, 0)),  # not used: a broadcast along w
    ("I(n,c,h,max(w-1,0))", "w", IndexUse(0, False, None)),  # no one coefficient
    ("I(n,c,h,w/2)", "w", IndexUse(0, False, 0)),  # inside a floor, as isl's form has it
])
def test_where_an_iterator_appears(rhs: str, it: str, want: IndexUse) -> None:
    assert index_use(_read(rhs), it) == want
