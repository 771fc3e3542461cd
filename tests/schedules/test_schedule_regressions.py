"""Schedule bugs that the differential fuzzer (tests/schedules/test_fuzz_schedules.py) found,
each minimized to the smallest program and verbs that still showed it."""

from __future__ import annotations

import islpy as isl
import numpy as np
import pytest

import polyopt
from polyopt.runtime.interp import evaluate
from polyopt.schedules.transform import trip_count
from polyopt.schedules.tree import Leaf, Loop

cc = pytest.mark.cc


def reference(source: str, name: str, inputs: list[np.ndarray]) -> list[np.ndarray]:
    return evaluate(polyopt.lang.build_program(source, name, {}), inputs, {})


def test_trip_count_of_values_that_isl_writes_with_a_fraction() -> None:
    # On this domain isl simplifies the loop's values k to (h)/2, which its min_val and
    # max_val reject ("expecting integer affine expression").
    lp = Loop("k", isl.UnionPwAff("{ S[h, k] -> [(k)] }"), Leaf(("S",)))
    domain = isl.UnionSet("{ S[h, k] : (h = 0 and k = 0) or (h = 2 and k = 1) }")
    assert trip_count(lp, domain) == 2


@cc
def test_strided_padded_conv_border_compiles_at_call_sizes() -> None:
    # The automatic schedule, made size-generic, failed at the call's sizes with an internal
    # isl error: the border piece's vectorized filter loop had a fractional value form.
    src = """def cv(float(C,H) I pad(0, 2), float(F,C,KH) Wt) -> (O) {
        O(f, h) +=! I(r_c, 2*h + 2*r_kh - 2) * Wt(f, r_c, r_kh)
    }"""
    rng = np.random.default_rng(0)
    x, w = rng.uniform(-1, 1, (2, 4)).astype(np.float32), rng.uniform(-1, 1, (2, 2, 2))
    w = w.astype(np.float32)
    got = polyopt.compile(src, schedule=polyopt.schedule(src))(x, w)
    np.testing.assert_allclose(got, reference(src, "cv", [x, w])[0], rtol=1e-5, atol=1e-6)


@cc
def test_shifted_loop_of_a_border_piece_that_is_empty_at_the_call_sizes() -> None:
    # shift restricts the loop's values to its statements' instances; at H=8 no window
    # reaches the padding, the border piece has none, and fixing the sizes left an empty
    # expression that isl cannot read back ("the schedule does not fit def").
    src = """def pool(float(H) I) -> (O) {
        O(h) +=! I(2*h + r_k) where r_k in 0:2, pad I(0:1)
    }"""
    s = polyopt.schedule(src, auto=False).shift("h3", 1)
    assert s.stmts[-1] == "O_0_border" and s.loop("h3").child.child.stmts == ("O_0_border",)
    x = np.arange(8, dtype=np.float32)
    np.testing.assert_array_equal(polyopt.compile(src, schedule=s)(x), [1, 5, 9, 13])


@cc
def test_packed_output_read_after_its_last_write() -> None:
    # pack made z_1 the epilogue that writes z straight from the blocked local, and
    # rewrote w's read of z into a read of that local, which never got z_1's values:
    # w was 2*x instead of 2*(x + 1).
    src = """def ew(float(N,M) x) -> (z, w) {
        z(i, j) = x(i, j)
        z(i, j) = z(i, j) + 1
        w(i, j) = z(i, j) * 2
    }"""
    s = polyopt.schedule(src, auto=False).pack("z", 1, 4, 1)
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    z, w = polyopt.compile(src, schedule=s)(x)
    np.testing.assert_array_equal(z, x + 1)
    np.testing.assert_array_equal(w, 2 * (x + 1))
