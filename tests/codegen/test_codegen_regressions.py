"""Code-generation bugs that the differential fuzzer (tests/schedules/test_fuzz_schedules.py)
found, each minimized to the smallest program and verbs that still showed it."""

from __future__ import annotations

import numpy as np
import pytest

import polyopt
from polyopt.codegen.cuda import CudaDialect
from polyopt.codegen.dialect import Dialect
from polyopt.runtime.interp import evaluate

pytestmark = pytest.mark.cc


def reference(source: str, name: str, inputs: list[np.ndarray]) -> list[np.ndarray]:
    return evaluate(polyopt.lang.build_program(source, name, {}), inputs, {})


def test_slice_of_a_loop_that_isl_drops_is_declared() -> None:
    # Contracted at i, t0 is a slice declared in loop i's body. At N=1, once k is skewed
    # by i, isl prints no loop i at all (i is 0 throughout) and the slice went undeclared:
    # the C compiler rejected the kernel ("'po_slice_t0' undeclared"). (t1 is no plain
    # copy: reads would see through that to t0, and t1's statement would go; it reads t0
    # twice: a local read once is inlined into its reader.)
    src = """def ml(float(N,M) a0, float(M,K) a1) -> (t2) local (t0, t1) {
        t0(i, j) = exp(a0(i, j))
        t1(i, j) = t0(i, j) * t0(i, j)
        t2(i, k) +=! t1(i, r_j) * a1(r_j, k)
    }"""
    s = polyopt.schedule(src, auto="isl").distribute("i").fuse("i", "i2").fuse("i", "i3")
    s = s.contract("t0", "i").skew("i", "k", 1)
    rng = np.random.default_rng(0)
    a0, a1 = (rng.uniform(-1, 1, shape).astype(np.float32) for shape in [(1, 5), (5, 3)])
    kernel = polyopt.compile(src, schedule=s, sizes={"N": 1, "M": 5, "K": 3})
    assert "po_slice_t0[5];" in kernel.source
    np.testing.assert_allclose(kernel(a0, a1), reference(src, "ml", [a0, a1])[0],
                               rtol=1e-5, atol=1e-6)


def test_register_tile_does_not_hoist_a_reduction_its_rows_depend_on() -> None:
    # The padded window's output rows end at 15 - kh: the tile's trip count moves with the
    # reduction loop kh. Hoisting kh into the register tile tested that trip count outside
    # kh's loop ("'c0' undeclared"); such a tile now keeps kh outside its accumulators.
    src = """def cv(float(C,H) I pad(0, 0:1), float(F,C,KH) Wt, float(F) bias) -> (O) {
        O(f, h) +=! I(r_c, h + r_kh) * Wt(f, r_c, r_kh)
        O(f, h) = fmax(O(f, h) + bias(f), 0)
    }"""
    s = polyopt.schedule(src, "cv", auto=True, options={"fusion": "smart"}).parallel("wtp0")
    kernel = polyopt.compile(src, "cv", schedule=s)
    rng = np.random.default_rng(0)
    inputs = [rng.uniform(-1, 1, shape).astype(np.float32) for shape in [(9, 16), (2, 9, 2), (2,)]]
    np.testing.assert_allclose(kernel(*inputs), reference(src, "cv", inputs)[0],
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("tail", ["/ 9", "* 2", "+ 1", "/ 9.0"])
def test_register_tile_promotes_integer_literals(tail: str) -> None:
    # An int literal in a float contraction's body (a 3x3 box blur's '/ 9') made the
    # register tile print 'acc += None;' (a compile failure the operator suite found): the
    # micro-kernel's vector expression refused the int32 constant.
    src = f"def f(float(M,K) A, float(K,N) B) -> (C) {{ C(m,n) +=! A(m,r_k) * B(r_k,n) {tail} }}"
    a = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    kernel = polyopt.compile(src, sizes={"M": 64, "N": 64, "K": 64})
    np.testing.assert_allclose(kernel(a, a), reference(src, "f", [a, a])[0], rtol=1e-4,
                               atol=1e-4)


_DIAGONAL = """def diag(float(N,M) B) -> (float(N,M) S) {
    S(i,j) = B(i,j) where i in 0:1, j in 0:M
    S(i,j) = B(i,j) where i in 1:N, j in 0:1
    S(i,j) = 0.46 * S(i-1,j-1) where i in 1:N, j in 1:M
}"""


@pytest.mark.parametrize("n,m", [(8, 16), (12, 13), (8, 3), (16, 4), (33, 7)])
def test_diagonal_recurrence_survives_the_c_compilers_vectorizer(n: int, m: int) -> None:
    # GCC 12.2 at -O3 vectorized the i loop, which carries S(i,j) = f(S(i-1,j-1)), once j
    # was peeled: NaN or 0.0529 where 0.25 * 0.46^min(i,j) is right, no error raised. The
    # loop that carries a dependence now ends in the guard that keeps the vectorizer off.
    kernel = polyopt.compile(_DIAGONAL, schedule="program-order", sizes={"N": n, "M": m})
    rows = [line for line in kernel.source.splitlines() if "carries a dependence" in line]
    assert len(rows) == 1  # the i loop; the j loop and the borders' loops carry nothing
    got = kernel(np.full((n, m), 0.25, np.float32))
    i, j = np.indices((n, m))
    np.testing.assert_allclose(got, 0.25 * 0.46 ** np.minimum(i, j), rtol=1e-5)


def test_cuda_prints_no_carried_loop_guard() -> None:
    assert Dialect.carried_loop_guard and not CudaDialect.carried_loop_guard


GATHER_RECURRENCE = """def g<T=5>(float(N) A0, int32(N) idx) -> (B) local (float(T,N) A) {
    A(t,i) = A0(i) where t in 0:1, i in 0:N
    A(t,i) = A(t-1, idx(i)) * 2.0 + A(t-1,i) where t in 1:T, i in 0:N
    B(i) = A(T-1,i)
}"""


def test_a_gather_from_a_contracted_local_checks_the_declared_extent() -> None:
    """Issue 40: A's 5 planes are stored as 2 (storage contraction); the range check of the
    gather A(t-1, idx(i)) compared t-1 with 2 and raised a false BoundsError at t = 4."""
    a0 = np.arange(6, dtype=np.float32)
    idx = np.array([5, 4, 3, 2, 1, 0], np.int32)
    kernel = polyopt.compile(GATHER_RECURRENCE, sizes={"N": 6})
    assert "/* storage: A: stored modulo 2 along dim 0 (2 of 5) */" in kernel.source
    assert "< 0 || g_0_0_0 >= 5L)" in kernel.source  # the declared extent, not e_A_0 = 2
    np.testing.assert_allclose(kernel(a0, idx), _gather_reference(a0, idx, 5))
    with pytest.raises(polyopt.BoundsError, match=r"A\(\(t - 1\), idx\(i\)\).*computed index 6"):
        kernel(a0, np.array([6, 4, 3, 2, 1, 0], np.int32))  # a true positive stays one


def _gather_reference(a0: np.ndarray, idx: np.ndarray, steps: int) -> np.ndarray:
    a = a0.astype(np.float64)
    for _ in range(1, steps):
        a = a[idx] * 2.0 + a
    return a
