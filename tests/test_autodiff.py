"""polyopt.grad: derived gradients, compiled by polyopt and checked against central finite
differences of the forward kernel (also compiled by polyopt), in float64.

Each case compiles the forward def and its gradient def at small shapes; the loss is
``sum(dO * O)`` over the outputs with seeded random ``dO``, so the gradient def's outputs must
equal its partial derivatives, which ``_numeric`` takes element by element.
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

import polyopt
import polyopt.lang
from polyopt import cli, kernels
from polyopt.errors import NotDifferentiableError, OptionError

pytestmark = pytest.mark.cc

EPS = 1e-6


def _f64(source: str) -> str:
    """The def in float64 (the bundled kernels are float32), for finite differences."""
    return re.sub(r"\bfloat(32)?\b", "float64", source)


def _numeric(fwd: polyopt.Kernel, args: list[np.ndarray], seeds: list[np.ndarray],
             k: int) -> np.ndarray:
    def loss() -> float:
        outs = fwd(*args)
        outs = outs if isinstance(outs, tuple) else (outs,)
        return sum(float(np.sum(s * o)) for s, o in zip(seeds, outs, strict=True))

    x = args[k]
    out = np.empty_like(x)
    for i in np.ndindex(*x.shape):
        keep = x[i]
        x[i] = keep + EPS
        up = loss()
        x[i] = keep - EPS
        down = loss()
        x[i] = keep
        out[i] = (up - down) / (2 * EPS)
    return out


def check(source: str, name: str, shapes: list[tuple[int, ...]],
          wrt: list[str] | None = None, reduce: int = 1, seed: int = 0) -> str:
    """Compile ``name`` and its gradient; compare with finite differences. ``reduce``: the
    longest reduction feeding an output, to scale the tolerance."""
    source = _f64(source)
    text = polyopt.grad(source, name, wrt=wrt)
    rng = np.random.default_rng(seed)
    program = polyopt.lang.build_program(source, name)
    args = [rng.standard_normal(s) if t.dtype.startswith("float") else
            rng.integers(-3, 4, s).astype(t.dtype)
            for s, t in zip(shapes, program.inputs, strict=True)]
    # Program order: the derivation is under test, not the scheduler (which lowered the
    # gradients of padded and strided windows in several seconds each).
    fwd = polyopt.compile(source, name, schedule="program-order")
    outs = fwd(*args)
    outs = outs if isinstance(outs, tuple) else (outs,)
    # an integer output (an argmax) has a gradient input too, which the gradient ignores
    seeds = [rng.standard_normal(o.shape) if o.dtype.kind == "f" else np.zeros_like(o)
             for o in outs]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the derived def must not need any warning
        back = polyopt.compile(text, f"{name}_grad", schedule="program-order")
    got = back(*args, *seeds)
    got = got if isinstance(got, tuple) else (got,)
    inputs = [t.name for t in program.inputs]
    names = wrt if wrt is not None else [n for n, a in zip(inputs, args, strict=True)
                                         if a.dtype.kind == "f"]
    assert len(got) == len(names)
    for g, n in zip(got, names, strict=True):
        k = inputs.index(n)
        want = _numeric(fwd, args, seeds, k)
        assert g.shape == args[k].shape
        np.testing.assert_allclose(g, want, rtol=1e-6 * reduce, atol=1e-6 * reduce,
                                   err_msg=f"d_{n} of {name}\n{text}")
    return text


# ---------------------------------------------------------------- bundled kernels

@pytest.mark.parametrize("name, shapes", [
    ("matmul", [(3, 4), (4, 5)]),
    ("matmul_nt", [(3, 4), (5, 4)]),
    ("matmul_tn", [(4, 3), (4, 5)]),
    ("batch_matmul", [(2, 3, 4), (2, 4, 3)]),
    ("matvec", [(3, 4), (4,)]),
])
def test_products(name: str, shapes: list[tuple[int, ...]]) -> None:
    check(kernels.get(name), name, shapes, reduce=5)


@pytest.mark.parametrize("params", [
    {"stride": 2, "padding": 1},
    {"dilation": 2, "padding": 2},
    {"groups": 2, "in_channels": 4, "out_channels": 2},
    pytest.param({"groups": 2, "in_channels": 4, "out_channels": 6}, marks=pytest.mark.slow),
])
def test_conv2d(params: dict[str, int]) -> None:
    c = params.get("in_channels", 2)
    f = params.get("out_channels", 3)
    cg = c // params.get("groups", 1)
    check(kernels.get("conv2d", **params), "conv2d", [(2, c, 6, 7), (f, cg, 3, 2)],
          reduce=20)


def test_depthwise_strided() -> None:
    check(kernels.get("depthwise_conv2d", stride=2, padding=1), "depthwise_conv2d",
          [(2, 3, 7, 6), (3, 1, 3, 3)], reduce=10)


def test_conv2d_bias_relu() -> None:
    check(kernels.get("conv2d_bias_relu"), "conv2d_bias_relu",
          [(1, 2, 5, 5), (3, 2, 2, 2), (3,)], reduce=10)


@pytest.mark.parametrize("params", [{}, {"kernel_size": 3, "stride": 2, "padding": 1}])
def test_maxpool(params: dict[str, int]) -> None:
    check(kernels.get("maxpool2d", **params), "maxpool2d", [(2, 2, 7, 6)])


def test_avgpool() -> None:
    check(kernels.get("avgpool2d", kernel_size=3, stride=2, padding=1), "avgpool2d",
          [(2, 2, 7, 6)], reduce=9)


def test_softmax() -> None:
    check(kernels.get("softmax"), "softmax", [(3, 5)], reduce=5)


def test_layernorm() -> None:
    check(kernels.get("layernorm"), "layernorm", [(3, 6), (6,), (6,)], reduce=6)


def test_bias_relu_epilogue() -> None:
    check(kernels.get("matmul_bias_relu"), "matmul_bias_relu", [(3, 4), (4, 5), (5,)],
          reduce=5)


def test_polybench_gemver_versions() -> None:
    """Ah is read, then xo is written three times and read by wo: intermediate versions."""
    check(kernels.get("polybench_gemver"), "polybench_gemver",
          [(), (), (4, 4), (4,), (4,), (4,), (4,), (4,), (4,), (4,), (4,)], reduce=8)


def test_polybench_gemm_accumulates() -> None:
    check(kernels.get("polybench_gemm"), "polybench_gemm",
          [(), (), (3, 4), (4, 5), (3, 5)], reduce=5)


# ---------------------------------------------------------------- written here

MLP = """
def mlp2(float(B,I) X, float(J,I) W1, float(J) b1, float(O,J) W2, float(O) b2) -> (Y, H) {
    H(b,j) +=! X(b,r_i) * W1(j,r_i)
    H(b,j)  = fmax(H(b,j) + b1(j), 0)
    Y(b,o) +=! H(b,r_j) * W2(o,r_j)
    Y(b,o)  = Y(b,o) + b2(o)
}
"""

GELU = """
def gelu(float(M,N) X) -> (Y) {
    Y(m,n) = 0.5 * X(m,n) * (1.0 + tanh(0.7978845608 * (X(m,n) + 0.044715 * x3)))
        where x3 = X(m,n) * X(m,n) * X(m,n)
}
def gelu_erf(float(M,N) X) -> (Y) {
    Y(m,n) = 0.5 * X(m,n) * (1.0 + erf(X(m,n) * 0.7071067811865476))
}
"""

CHAIN = """
def chain(float(N) x, float(N) y) -> (z) {
    z(i) = log(1.0 + exp(x(i))) * sqrt(y(i) * y(i) + 1.0) / (1.0 + exp(-y(i)))
         + pow(fabs(x(i)) + 1.0, y(i)) - fmin(x(i), y(i)) + rsqrt(x(i) * x(i) + 2.0)
}
"""

SUMS = """
def rowsum(float(N,K) X) -> (s) { s(n) +=! X(n,r_k) }
def trace(float(N,N) A) -> (t) { t +=! A(r_i, r_i) }
def moments(float(N,K) X) -> (mean, var) {
    mean(n) +=! X(n,r_k)
    mean(n)  = mean(n) / K
    var(n)  +=! (X(n,r_k) - mean(n)) * (X(n,r_k) - mean(n))
    var(n)   = var(n) / K
}
"""


CORNERS = """
def gemv(float(M,K) A, float(K) x, float alpha) -> (y) { y(m) +=! alpha * A(m,r_k) * x(r_k) }
def flip(float(N) x) -> (y) { y(i) = x(N - 1 - i) }
def argmax(float(N,D) X) -> (mx, idx) {
    mx(n)  max=! X(n,r_d)
    idx(n) min=! (X(n,r_d) == mx(n)) ? r_d : D
}
def kron2(float(P0,Q0) W0, float(P1,Q1) W1, float(M,Q0,Q1) X) -> (Y, T) {
    T(m,q0,p1) +=! X(m,q0,r_q1) * W1(p1,r_q1)
    Y(m,p0,p1) +=! T(m,r_q0,p1) * W0(p0,r_q0)
}
def minpool(float(N) x) -> (y) { y(i) min=! x(2*i + r) where r in 0:3 }
def trmv(float(N,N) L, float(N) x) -> (y) { y(i) +=! L(i,r_j) * x(r_j) where r_j in 0:i+1 }
def diff(float(N) x) -> (y) { y(i) = x(i + 1) - x(i) where i in 0:N-1 }
def scaled(float(N) x, int32(N) k) -> (y) { y(i) = x(i) * float(k(i)) }
"""


@pytest.mark.parametrize("name, shapes", [
    ("gemv", [(3, 4), (4,), ()]),  # a 0-d input
    ("flip", [(5,)]),  # an index with coefficient -1
    ("argmax", [(3, 5)]),  # an integer output beside a float one
    ("kron2", [(2, 3), (2, 2), (2, 3, 2)]),  # an output read by a later statement
    ("minpool", [(9,)]),  # min=! through a stride
    ("trmv", [(4, 4), (4,)]),  # a triangular reduction
    ("diff", [(6,)]),  # two reads of one input, one shifted
    ("scaled", [(5,), (5,)]),  # an integer input: not differentiated by default
])
def test_language_corners(name: str, shapes: list[tuple[int, ...]]) -> None:
    if name == "scaled":
        text = check(CORNERS, name, shapes)
        assert "-> (d_x)" in text
        return
    check(CORNERS, name, shapes, reduce=4)


@pytest.mark.parametrize("name, shapes", [
    ("polybench_syrk", [(), (), (4, 3), (4, 4)]),  # a triangle, written over part of Co
    ("polybench_2mm", [(), (), (2, 3), (3, 2), (2, 3), (2, 3)]),
    ("polybench_atax", [(3, 4), (4,)]),
    ("polybench_mvt", [(3, 3), (3,), (3,), (3,), (3,)]),
])
def test_polybench(name: str, shapes: list[tuple[int, ...]]) -> None:
    check(kernels.get(name), name, shapes, reduce=4)


VERSIONS = """
def versions(float(N) x, float(N,K) A) -> (y) {
    y(i) = exp(x(i))
    y(i) = y(i) * y(i)
    y(i) += A(i,r_k) * x(i)
    y(i) *= x(i)
    y(i) = sin(y(i))
}
"""


def test_intermediate_versions() -> None:
    """Four versions of y before the last are read by adjoints: each gets a tensor of its
    own; the one before ``*=`` starts as a copy."""
    text = check(VERSIONS, "versions", [(4,), (4, 3)], reduce=3)
    assert "y_0(i) = exp(x(i))" in text and "y_2(i) = y_0(i) * y_0(i)" in text
    assert "y_3(n) = y_2(n)" in text and "y_3(i) *= x(i)" in text
    assert "y(i) = sin(y_3(i))" not in text  # the last value itself is not needed


def test_mlp_two_statements() -> None:
    check(MLP, "mlp2", [(3, 4), (5, 4), (5,), (2, 5), (2,)], reduce=5)


@pytest.mark.parametrize("name", ["gelu", "gelu_erf"])
def test_gelu(name: str) -> None:
    check(GELU, name, [(3, 4)])


def test_elementwise_chain() -> None:
    check(CHAIN, "chain", [(6,), (6,)])


@pytest.mark.parametrize("name, shapes", [("rowsum", [(3, 4)]), ("trace", [(4, 4)]),
                                          ("moments", [(3, 5)])])
def test_reductions(name: str, shapes: list[tuple[int, ...]]) -> None:
    check(SUMS, name, shapes, reduce=5)


def test_wrt_subset_and_order() -> None:
    text = check(kernels.get("matmul"), "matmul", [(3, 4), (4, 5)], wrt=["B", "A"])
    assert "-> (d_B, d_A)" in text


# ---------------------------------------------------------------- readable output

def test_matmul_gradient_text() -> None:
    text = polyopt.grad(kernels.get("matmul"), "matmul")
    body = [ln.strip() for ln in text.splitlines() if ln.strip() and not
            ln.lstrip().startswith("#")]
    assert body == [
        "def matmul_grad(float32(M, K) A, float32(K, N) B, float32(M, N) d_C) -> (d_A, d_B) {",
        "d_A(m, k) +=! d_C(m, r_n) * B(k, r_n)",
        "d_B(k, n) +=! d_C(r_m, n) * A(r_m, k)",
        "}",
    ]


def test_syrk_text() -> None:
    text = polyopt.grad(kernels.get("polybench_syrk"), "polybench_syrk")
    # Co_1 overwrites the lower triangle of Co_0 = C: the rest keeps C's gradient
    assert "d_Co_0(n, n2) = !(n2 < n + 1) ? d_Co(n, n2) : 0.0" in text
    assert "d_A(i, k) +=! d_Co(i, r_j) * alpha * A(r_j, k) where r_j in 0:i + 1" in text


def test_relu_epilogue_text() -> None:
    text = polyopt.grad(kernels.get("matmul_bias_relu"), "matmul_bias_relu")
    # the pre-activation gets a tensor of its own: relu overwrites Y
    assert "Y_0(m, n) +=! A(m, r_k) * B(r_k, n)" in text
    assert "d_Y_0(m, n) = Y_0(m, n) + bias(n) >= 0 ? d_Y(m, n) : 0.0" in text
    assert "d_bias(n) +=! Y_0(r_m, n) + bias(n) >= 0 ? d_Y(r_m, n) : 0.0" in text


def test_strided_conv_text() -> None:
    text = polyopt.grad(kernels.get("conv2d", stride=2), "conv2d")
    # the stride is a divisibility condition; the output's border, zero padding of d_O
    assert "(h - r_kh) % 2 == 0 && (w - r_kw) % 2 == 0 ?" in text
    assert "d_O(n, r_f, (h - r_kh) / 2, (w - r_kw) / 2) * Wt(r_f, c, r_kh, r_kw)" in text
    assert "float32(N, F, H_O, W_O) d_O" in text


# ---------------------------------------------------------------- refusals

def test_gather_into_differentiated_input() -> None:
    src = "def embed(float(V,E) Tab, int32(B,L) Idx) -> (Out) { Out(b,l,e) = Tab(Idx(b,l), e) }"
    with pytest.raises(NotDifferentiableError, match=r"data-dependent index.*'Tab'"):
        polyopt.grad(src)


def test_integer_wrt() -> None:
    src = "def embed(float(V,E) Tab, int32(B,L) Idx) -> (Out) { Out(b,l,e) = Tab(Idx(b,l), e) }"
    with pytest.raises(NotDifferentiableError, match=r"'Idx' .* is int32"):
        polyopt.grad(src, wrt=["Idx"])


def test_unknown_wrt() -> None:
    with pytest.raises(OptionError, match=r"wrt='Z'.*inputs are A, B"):
        polyopt.grad(kernels.get("matmul"), wrt=["Z"])


def test_product_reduction() -> None:
    src = "def prod(float(N,K) X) -> (P) { P(n) *=! X(n,r_k) }"
    with pytest.raises(NotDifferentiableError, match="product reduction"):
        polyopt.grad(src)


def test_builtin_without_derivative() -> None:
    src = "def lg(float(N) x) -> (y) { y(i) = lgamma(x(i)) }"
    with pytest.raises(NotDifferentiableError, match="'lgamma' has no derivative"):
        polyopt.grad(src)


def test_max_over_a_triangle() -> None:
    src = "def tmax(float(N,N) L) -> (m) { m(i) max=! L(i,r_j) where r_j in 0:i+1 }"
    with pytest.raises(NotDifferentiableError, match="non-rectangular domain"):
        polyopt.grad(src)


def test_several_defs_need_a_name() -> None:
    with pytest.raises(polyopt.PolyoptError, match="several defs"):
        polyopt.grad(SUMS)


def test_cli_grad(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["grad", "matmul", "--wrt", "B"]) == 0
    out = capsys.readouterr().out
    assert "-> (d_B)" in out and "d_B(k, n) +=! d_C(r_m, n) * A(r_m, k)" in out
    assert cli.main(["grad", "matmul", "--wrt", "Z"]) == 2
    assert "wrt='Z'" in capsys.readouterr().err


def test_nothing_to_differentiate() -> None:
    with pytest.raises(OptionError, match="wrt is empty"):
        polyopt.grad(kernels.get("matmul"), wrt=[])
    with pytest.raises(NotDifferentiableError, match="no floating-point input"):
        polyopt.grad("def cnt(int32(N) k) -> (s) { s +=! k(r_i) }")
