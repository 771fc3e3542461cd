"""The public API end to end: compile, call, call-time checks, specialization, stages."""

from __future__ import annotations

import numpy as np
import pytest

import polyopt
from polyopt import BoundsError, LanguageError, OptionError, ShapeError

pytestmark = pytest.mark.cc

MATMUL = "def matmul(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,r_k) * B(r_k,n) }"
RNG = np.random.default_rng(0)


def rand(*shape: int, dtype: type = np.float32) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


def test_matmul_matches_numpy_at_odd_sizes() -> None:
    k = polyopt.compile(MATMUL)
    for m, kk, n in [(7, 13, 5), (33, 17, 29), (1, 1, 1)]:
        a, b = rand(m, kk), rand(kk, n)
        np.testing.assert_allclose(k(a, b), a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)


def test_one_specialized_kernel_per_shape_and_parametric_serves_all() -> None:
    k = polyopt.compile(MATMUL)
    k(rand(3, 4), rand(4, 5))
    k(rand(3, 4), rand(4, 5))
    k(rand(6, 4), rand(4, 2))
    assert len(k._variants) == 2
    p = polyopt.compile(MATMUL, parametric=True)
    for m in (2, 9):
        a, b = rand(m, 3), rand(3, 4)
        np.testing.assert_allclose(p(a, b), a @ b, rtol=1e-5, atol=1e-6)
    assert len(p._variants) == 1
    assert "dims[0]" in p.source


def test_source_is_specialized_when_sizes_are_given() -> None:
    k = polyopt.compile(MATMUL, sizes={"M": 8, "K": 4, "N": 2})
    assert "8L" in k.source and "s_M" not in k.source
    # Too little work to pay for OpenMP's fork and join; a larger one runs in parallel.
    assert "#pragma omp parallel for" not in k.source
    big = polyopt.compile(MATMUL, sizes={"M": 128, "K": 128, "N": 128})
    assert "#pragma omp parallel for" in big.source
    generic = polyopt.compile(MATMUL).source
    assert "s_M = dims[0]" in generic


def test_schedule_prints_and_program_order_agrees() -> None:
    k = polyopt.compile(MATMUL)
    assert "C_0" in str(k.schedule) and "domain" in str(k.schedule.tree)
    po = polyopt.compile(MATMUL, schedule="program-order")
    a, b = rand(5, 6), rand(6, 7)
    np.testing.assert_allclose(k(a, b), po(a, b), rtol=1e-6)


def test_every_stage_prints() -> None:
    lowered = polyopt.compile(MATMUL).lowered()
    for stage in ("ir", "domains", "deps", "schedule", "ast", "c"):
        assert lowered.emit(stage).strip()
    assert "flow" in lowered.emit("deps")
    with pytest.raises(OptionError, match="unknown stage"):
        lowered.emit("asm")


def test_several_outputs_come_back_as_a_tuple_in_declared_order() -> None:
    src = """def two(float(N) x) -> (s, d) { s(i) = x(i) + x(i)
        d(i) = x(i) - 1.0 }"""
    x = rand(6)
    s, d = polyopt.compile(src)(x)
    np.testing.assert_allclose(s, 2 * x)
    np.testing.assert_allclose(d, x - 1)


def test_caller_buffer_for_op_without_bang() -> None:
    src = "def accum(float(N,K) A) -> (acc) { acc(n) += A(n,r_k) }"
    a = rand(4, 3)
    acc = np.ones(4, np.float32)
    with pytest.warns(polyopt.PolyoptWarning):
        k = polyopt.compile(src)
    k(a, outputs=[acc])
    np.testing.assert_allclose(acc, 1 + a.sum(1), rtol=1e-5)


@pytest.mark.parametrize("n", [4, 16, 70])
def test_an_output_that_is_an_input_gets_the_right_product(n: int) -> None:
    a, b = rand(n, n), rand(n, n)
    want = a @ b
    out = polyopt.compile(MATMUL)(a, b, outputs=[a])
    assert out is a
    np.testing.assert_allclose(a, want, rtol=1e-5, atol=1e-5)


def test_an_output_overlapping_an_input_view_gets_the_right_product() -> None:
    big, b = rand(17, 16), rand(16, 16)
    a, c = big[:16], big[1:]  # rows 1..15 of each are the same memory
    want = a @ b
    polyopt.compile(MATMUL)(a, b, outputs=[c])
    np.testing.assert_allclose(big[1:], want, rtol=1e-5, atol=1e-5)


def test_accumulating_onto_an_output_that_is_an_input() -> None:
    src = "def acc(float(N) x) -> (y) { y(i) += x(i) * x(i) }"
    x = rand(6)
    want = x + x * x
    with pytest.warns(polyopt.PolyoptWarning):
        k = polyopt.compile(src)
    k(x, outputs=[x])
    np.testing.assert_allclose(x, want, rtol=1e-6)


def test_one_buffer_for_two_outputs_is_refused() -> None:
    src = """def two(float(N) x) -> (s, d) { s(i) = x(i) + x(i)
        d(i) = x(i) - 1.0 }"""
    buf = np.empty(6, np.float32)
    with pytest.raises(ShapeError, match="outputs s and d were given overlapping buffers"):
        polyopt.compile(src)(rand(6), outputs=[buf, buf])


def test_einsum_out_may_be_an_operand() -> None:
    a, b = rand(8, 8), rand(8, 8)
    want = a @ b
    assert polyopt.einsum("ij,jk->ik", a, b, out=a) is a
    np.testing.assert_allclose(a, want, rtol=1e-5, atol=1e-5)


def test_unaligned_inputs_and_outputs_work_through_aligned_copies() -> None:
    def unaligned(n: int) -> np.ndarray:
        a = np.frombuffer(bytearray(4 * n + 8), np.float32, count=n, offset=1)
        assert not a.flags.aligned
        return a

    x, out = unaligned(1000), unaligned(1000)
    x[:] = np.arange(1000)
    polyopt.compile("def f(float(N) x) -> (o) { o(i) = x(i) * 2 + 1 }")(x, outputs=[out])
    np.testing.assert_array_equal(out, np.arange(1000) * 2 + 1)


def test_noncontiguous_inputs_are_copied() -> None:
    a = rand(8, 6)[:, ::2]
    b = rand(3, 4)
    np.testing.assert_allclose(polyopt.compile(MATMUL)(a, b), a @ b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(("args", "message"), [
    ((rand(2, 3),), r"takes 2 input\(s\) \(A, B\), got 1"),
    ((rand(2, 3), rand(3)), r"input B must have rank 2"),
    ((rand(2, 3), rand(4, 5)), r"size K is 3 from A dim 1 but 4 from B dim 0"),
    ((rand(2, 3, dtype=np.float64), rand(3, 4)), r"input A must have dtype float32"),
])
def test_call_time_errors(args: tuple, message: str) -> None:
    with pytest.raises(ShapeError, match=message):
        polyopt.compile(MATMUL)(*args)


@pytest.mark.parametrize("value", [[[1.0]], (1.0,), "A", memoryview(b"1234")])
def test_a_non_array_input_is_a_type_error_naming_what_is_accepted(value: object) -> None:
    with pytest.raises(TypeError, match="input A must be a numpy array") as info:
        polyopt.compile(MATMUL)(value, rand(1, 1))
    assert isinstance(info.value, polyopt.InputTypeError | ShapeError)
    with pytest.raises(polyopt.InputTypeError, match="output C must be a numpy array"):
        polyopt.compile(MATMUL)(rand(1, 1), rand(1, 1), outputs=[[[0.0]]])


def test_a_python_int_out_of_range_for_a_rank_0_input() -> None:
    k = polyopt.compile("def f(int8 a, float(N) x) -> (o) { o(i) = x(i) * a }")
    np.testing.assert_array_equal(k(-128, np.ones(2, np.float32)), [-128, -128])
    for bad, message in ((300, r"int8, which holds -128..127; got 300"),
                         (2.5, r"int8; got the float 2.5")):
        with pytest.raises(ShapeError, match=message):
            k(bad, np.ones(2, np.float32))


@pytest.mark.parametrize("schedule", ["pluto", 42, "Auto"])
def test_a_bad_schedule_argument_is_refused_at_compile(schedule: object) -> None:
    with pytest.raises(OptionError, match=r"schedule must be 'auto' or 'program-order' or a "
                                          r"polyopt\.Schedule"):
        polyopt.compile(MATMUL, schedule=schedule)


@pytest.mark.parametrize("key", ["openmp", "tuned"])
@pytest.mark.parametrize("value", ["no", 0, 1, None])
def test_boolean_options_must_be_bools(key: str, value: object) -> None:
    with pytest.raises(OptionError, match=f"option {key} must be True or False"):
        polyopt.compile(MATMUL, options={key: value})
    polyopt.compile(MATMUL, options={key: np.False_})


def test_wrong_output_buffer() -> None:
    k = polyopt.compile(MATMUL)
    with pytest.raises(ShapeError, match="output C must be float32 of shape"):
        k(rand(2, 3), rand(3, 4), outputs=[np.empty((4, 2), np.float32)])


def test_gather_index_out_of_range_is_reported_not_crashed() -> None:
    src = "def embed(float(V,E) Tab, int32(B,L) Idx) -> (Out) { Out(b,l,e) = Tab(Idx(b,l), e) }"
    k = polyopt.compile(src)
    tab = rand(5, 3)
    idx = np.array([[0, 4], [2, 1]], np.int32)
    np.testing.assert_array_equal(k(tab, idx), tab[idx])
    with pytest.raises(BoundsError, match=r"Tab\(Idx\(b, l\), e\).*index 7"):
        k(tab, np.array([[0, 7]], np.int32))
    with pytest.raises(BoundsError, match="index -1"):
        k(tab, np.array([[-1, 0]], np.int32))


def test_static_bounds_proof_refuses_out_of_bounds_definition() -> None:
    src = "def shift(float(N) A) -> (B) { B(i) = A(i + 1) where i in 0:N }"
    with pytest.raises(BoundsError, match=r"read A\(\(i \+ 1\)\).*outside tensor A"):
        polyopt.compile(src)


def test_sizes_that_make_an_extent_negative() -> None:
    src = "def valid(float(N) x, float(K) w) -> (y) { y(i) +=! x(i + r_k) * w(r_k) }"
    k = polyopt.compile(src)
    np.testing.assert_allclose(k(rand(5), np.ones(2, np.float32)).shape, (4,))
    with pytest.raises(ShapeError, match="negative"):
        k(rand(2), rand(5))


def test_unknown_option_target_and_def() -> None:
    with pytest.raises(OptionError, match=r"unknown option 'tile'.*fusion"):
        polyopt.compile(MATMUL, options={"tile": 32})
    with pytest.raises(OptionError, match="target 'opencl'"):
        polyopt.compile(MATMUL, target="opencl")
    with pytest.raises(OptionError, match=r"no def named 'mm'.*matmul"):
        polyopt.compile(MATMUL, "mm")
    with pytest.raises(OptionError, match="unknown size"):
        polyopt.compile(MATMUL, sizes={"Q": 3})


def test_language_errors_carry_a_caret() -> None:
    with pytest.raises(LanguageError) as info:
        polyopt.compile("def f(float(N) A) -> (B) {\n  B(i) = A(i) + Q(i)\n}")
    assert info.value.line == 2
    assert "^" in str(info.value)


@pytest.mark.parametrize("fusion", ["min", "smart", "max"])
def test_fusion_options_compute_the_same(fusion: str) -> None:
    src = """def mlp(float(B,I) X, float(J,I) W, float(J) b) -> (Y) {
        Y(n,j) +=! X(n,r_i) * W(j,r_i)
        Y(n,j)  = fmax(Y(n,j) + b(j), 0)
    }"""
    x, w, b = rand(4, 5), rand(3, 5), rand(3)
    got = polyopt.compile(src, options={"fusion": fusion})(x, w, b)
    np.testing.assert_allclose(got, np.maximum(x @ w.T + b, 0), rtol=1e-5, atol=1e-6)


def test_build_loads_the_compile_time_kernel_before_its_first_call() -> None:
    """``build`` compiles and loads now: the first call then finds its variant ready; a
    kernel without its sizes builds nothing until a call brings them."""
    k = polyopt.compile(MATMUL, sizes={"M": 5, "K": 3, "N": 4})
    assert len(k._variants) == 0
    assert k.build() is k and len(k._variants) == 1
    a, b = rand(5, 3), rand(3, 4)
    np.testing.assert_allclose(k(a, b), a @ b, rtol=1e-5, atol=1e-6)
    assert len(k._variants) == 1
    assert len(polyopt.compile(MATMUL).build()._variants) == 0
