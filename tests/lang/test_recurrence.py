"""Recurrences (README, "Extensions"): value semantics, its errors, the interpreter, and
storage contraction modulo."""

from __future__ import annotations

import numpy as np
import pytest

import polyopt
from polyopt import LanguageError, kernels
from polyopt.lang import build_program
from polyopt.poly import analyze
from polyopt.runtime.interp import evaluate
from polyopt.schedules.storage import modulo_storage

JACOBI = """def jacobi1d<T=100>(float(N) A0) -> (B) local (float(T,N) A) {
    A(t,i) = A0(i)                                         where t in 0:1, i in 0:N
    A(t,i) = A(t-1,i)                                      where t in 1:T, i in 0:1
    A(t,i) = A(t-1,i)                                      where t in 1:T, i in N-1:N
    A(t,i) = (A(t-1,i-1) + A(t-1,i) + A(t-1,i+1)) / 3.0    where t in 1:T, i in 1:N-1
    B(i)   = A(T-1,i)
}"""

TRISOLV = """def trisolv(float(N,N) L, float(N) b) -> (float(N) x) local (float(N) s) {
    s(i) +=! L(i,r_j) * x(r_j) where i in 0:N, r_j in 0:i
    x(i) = (b(i) - s(i)) / L(i,i)
}"""


def jacobi_ref(a0: np.ndarray, steps: int) -> np.ndarray:
    a = a0.astype(np.float64).copy()
    for _ in range(1, steps):
        a[1:-1] = (a[:-2] + a[1:-1] + a[2:]) / 3.0
    return a


def test_the_reference_example_has_value_semantics() -> None:
    """§5.5's example with its boundary statements after the interior: in text order the
    interior would read A(1, 0) before it is written; with value semantics it is right."""
    lines = JACOBI.splitlines()
    interior_last = "\n".join([*lines[:2], lines[4], lines[2], lines[3], *lines[5:]])
    a0 = np.random.default_rng(0).random(12).astype(np.float32)
    for src in (JACOBI, interior_last):
        program = build_program(src, sizes={"N": 12, "T": 9})
        assert program.recurrent == ("A",)
        (got,) = evaluate(program, [a0], {})
        np.testing.assert_allclose(got, jacobi_ref(a0, 9), rtol=1e-12)
        kernel = polyopt.compile(src, sizes={"N": 12, "T": 9})
        np.testing.assert_allclose(kernel(a0), jacobi_ref(a0, 9), rtol=1e-5)


def test_a_forward_read_orders_the_statements_by_their_dataflow() -> None:
    rng = np.random.default_rng(1)
    low = (np.tril(rng.random((9, 9))) + 9 * np.eye(9)).astype(np.float32)
    b = rng.random(9).astype(np.float32)
    want = np.linalg.solve(low.astype(np.float64), b)
    np.testing.assert_allclose(evaluate(build_program(TRISOLV), [low, b], {})[0], want,
                               rtol=1e-12)
    for sizes in ({"N": 9}, None):
        kernel = polyopt.compile(TRISOLV, sizes=sizes)
        np.testing.assert_allclose(kernel(low, b), want, rtol=1e-5)


@pytest.mark.parametrize(("source", "message"), [
    ("def f(float(N) A) -> (B) local (C) { B(i) = C(i)\n C(i) = A(i) }",
     r"recurrence .* needs the type and shape of 'C' declared"),
    ("def f(float(N) A) -> (B) { B(i) = A(i) where i in 0:1\n B(i) = B(i-1) where i in 1:N }",
     r"outside its shape \(1\), which the first statement writing it fixed \(declare"),
    ("def f(float(N) A) -> (float(N) B) { B(i) = A(i)\n B(i) = B(i-1) where i in 1:N }",
     r"B_0 and B_1 both write"),
    ("def f(float(N) A) -> (B) { B(i) = B(i-1) + A(i) where i in 1:N }",
     r"reading 'B' before it is defined: a recurrence .* needs the type and shape"),
])
def test_recurrence_errors_in_the_language(source: str, message: str) -> None:
    with pytest.raises(LanguageError, match=message):
        build_program(source, sizes={"N": 8})


def test_a_read_of_an_unwritten_local_element_is_an_error() -> None:
    src = ("def f(float(N) A) -> (B) local (float(N) C) {\n  C(i) = A(i) where i in 1:2\n"
           "  C(i) = C(i-1) + A(i) where i in 2:N\n  B(i) = C(i) where i in 0:N }")
    program = build_program(src, sizes={"N": 8})
    with pytest.raises(LanguageError, match=r"B_0 reads C\(0\) of local 'C', which no "):
        analyze(program)


@pytest.mark.parametrize("source", [
    "def f(float(N) A) -> (B) local (float(N) C) { C(i) = C(i) + A(i)\n B(i) = C(i) }",
    "def f(float(N) A) -> (B) local (float(N) C, float(N) D) {\n"
    "  C(i) = D(i) + A(i)\n  D(i) = C(i)\n  B(i) = D(i) }",
])
def test_a_dependence_cycle_is_an_error(source: str) -> None:
    with pytest.raises(LanguageError, match=r"dependence cycle"):
        polyopt.compile(source, sizes={"N": 8})


def test_storage_is_contracted_to_what_the_schedule_keeps_alive() -> None:
    """jacobi-2d: isl's skewed order reads each plane before it overwrites it, so one plane
    is enough; the C says so and the results stay right."""
    sizes = {"N": 14, "T": 7}
    kernel = polyopt.compile(kernels.get("jacobi_2d"), "jacobi_2d", sizes=sizes)
    mods = modulo_storage(kernel.schedule)
    assert [(m.tensor, m.dim, m.extent) for m in mods] == [("At", 0, 7), ("Bt", 0, 7)]
    assert all(m.modulus < 7 and f"/* storage: {m} */" in kernel.source for m in mods)
    rng = np.random.default_rng(2)
    a, b = (rng.random((14, 14)).astype(np.float32) for _ in range(2))
    got = kernel(a, b)
    want = evaluate(kernel.program, [a, b], {})
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(("boundary", "modulus"), [("X(i)", 2), ("X(i) * float(t)", None)])
def test_a_boundary_written_for_every_plane_first(boundary: str, modulus: int | None) -> None:
    """In an order that writes every plane's boundary first, a boundary that is the same in
    every plane may share its cells (two planes serve the interior); one that is not keeps
    the planes whole."""
    src = f"""def f<T=6>(float(N) X) -> (Y) local (float(T,N) A) {{
    A(t,i) = {boundary} where t in 0:T, i in 0:1
    A(t,i) = X(i) where t in 0:1, i in 1:N
    A(t,i) = A(t-1,i) + A(t-1,i-1) where t in 1:T, i in 1:N
    Y(i) = A(T-1,i)
}}"""
    sched = polyopt.schedule(src, sizes={"N": 8}, auto=False)
    assert [m.modulus for m in modulo_storage(sched)] == ([modulus] if modulus else [])


def test_a_def_with_recurrences_is_refused_by_grad() -> None:
    with pytest.raises(polyopt.NotDifferentiableError, match=r"recurrences \(x\)"):
        polyopt.grad(TRISOLV, wrt=["b"])


def test_stats_count_a_recurrence_s_reads_as_its_own_values() -> None:
    """x is read before its statement, but every read gets a value the def computes: no
    traffic from memory."""
    stats = polyopt.compile(TRISOLV, sizes={"N": 50}).stats()
    traffic = {t.tensor: t for t in stats.traffic}
    assert traffic["x"].read.value == 0 and traffic["x"].written.value == 50
    assert traffic["b"].read.value == 50


def test_a_packed_copy_is_no_candidate_for_storage_modulo() -> None:
    """Found by the recurrence fuzz family (issue 40): a packed input's block count is
    text (floor((2 + 2)/3)), and modulo_storage's int() of it raised ValueError."""
    src = """def rc<T=1>(float(N) A0, int32(N) idx) -> (B) local (float(T,N) A) {
        A(t,i) = A0(i) where t in 0:1, i in 0:N
        A(t,i) = (A(t-1, i) + A(t-1, idx(i))) * 0.5 where t in 1:T, i in 0:N
        B(i) = A(T-1, i)
    }"""
    s = polyopt.schedule(src, "rc", auto=False, options={"fusion": "min"}).pack("A0", 0, 3, 0)
    a0 = np.array([0.25, -0.5], np.float32)
    got = polyopt.compile(src, "rc", schedule=s)(a0, np.zeros(2, np.int32))
    np.testing.assert_allclose(got, a0)
