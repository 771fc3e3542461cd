"""Hypothesis: random contractions and elementwise programs against numpy."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polyopt

pytestmark = pytest.mark.cc

SETTINGS = settings(max_examples=25, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])
LETTERS = "ijklm"


@st.composite
def contractions(draw: st.DrawFn) -> tuple[str, list[str], str, dict[str, int]]:
    """(TC source, operand subscripts, output subscripts, extents) of a random contraction."""
    n_ops = draw(st.integers(1, 3))
    used = draw(st.lists(st.sampled_from(LETTERS), min_size=1, max_size=4, unique=True))
    ops = [draw(st.lists(st.sampled_from(used), min_size=1, max_size=3, unique=True))
           for _ in range(n_ops)]
    present = sorted({c for op in ops for c in op})
    out = draw(st.lists(st.sampled_from(present), max_size=3, unique=True))
    extents = {c: draw(st.integers(1, 5)) for c in present}
    sizes = {c: c.upper() + "_" for c in present}
    params = ", ".join(f"float({', '.join(sizes[c] for c in op)}) T{k}"
                       for k, op in enumerate(ops))
    rhs = " * ".join(f"T{k}({', '.join(op)})" for k, op in enumerate(ops))
    assign = "+=!" if set(present) - set(out) else "="
    lhs = f"O({', '.join(out)})" if out else "O"
    src = f"def rc({params}) -> (O) {{ {lhs} {assign} {rhs} }}"
    return src, ["".join(op) for op in ops], "".join(out), extents


@given(contractions(), st.integers(0, 2**16))
@SETTINGS
def test_random_contraction_matches_einsum(case: tuple, seed: int) -> None:
    src, ops, out, extents = case
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal([extents[c] for c in op]).astype(np.float32) for op in ops]
    want = np.einsum(f"{','.join(ops)}->{out}", *(a.astype(np.float64) for a in arrays))
    got = polyopt.compile(src)(*arrays)
    red = int(np.prod([extents[c] for c in set("".join(ops)) - set(out)] or [1]))
    np.testing.assert_allclose(got, want, rtol=1e-5 * np.sqrt(red) + 1e-6,
                               atol=1e-5 * red)


UNARY = {"exp": np.exp, "tanh": np.tanh, "fabs": np.abs, "-": np.negative}
BINARY = {"+": np.add, "-": np.subtract, "*": np.multiply, "fmax": np.fmax, "fmin": np.fmin}


@st.composite
def elementwise(draw: st.DrawFn) -> tuple[str, object]:
    """A random expression tree over two same-shaped inputs, and its numpy function."""
    def build(depth: int) -> tuple[str, object]:
        if depth == 0 or draw(st.booleans()):
            leaf = draw(st.sampled_from(["x", "y", "c"]))
            if leaf == "c":
                v = draw(st.sampled_from([0.5, 2.0, -1.25]))
                return repr(v), lambda x, y, v=v: np.full_like(x, v)
            return f"{leaf}(i, j)", (lambda x, y: x) if leaf == "x" else (lambda x, y: y)
        if draw(st.booleans()):
            name = draw(st.sampled_from(sorted(UNARY)))
            text, f = build(depth - 1)
            fn = UNARY[name]
            tc = f"(-{text})" if name == "-" else f"{name}({text})"
            return tc, lambda x, y, f=f, fn=fn: fn(f(x, y))
        name = draw(st.sampled_from(sorted(BINARY)))
        (ta, fa), (tb, fb) = build(depth - 1), build(depth - 1)
        fn = BINARY[name]
        tc = f"{name}({ta}, {tb})" if name.startswith("f") else f"({ta} {name} {tb})"
        return tc, lambda x, y, fa=fa, fb=fb, fn=fn: fn(fa(x, y), fb(x, y))

    return build(3)


@given(elementwise(), st.integers(1, 6), st.integers(1, 6))
@SETTINGS
def test_random_elementwise_matches_numpy(case: tuple, n: int, m: int) -> None:
    text, fn = case
    src = f"def ew(float(N,M) x, float(N,M) y) -> (z) {{ z(i, j) = {text} where exists x(i, j) }}"
    rng = np.random.default_rng(n * 7 + m)
    x, y = (rng.uniform(-1, 1, (n, m)).astype(np.float32) for _ in range(2))
    want = fn(x.astype(np.float64), y.astype(np.float64))
    got = polyopt.compile(src)(x, y)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)

