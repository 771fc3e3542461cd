"""The reference interpreter against NumPy, on hand-built programs and on TC text."""

from __future__ import annotations

import math

import numpy as np
import pytest

from polyopt import ir
from polyopt.errors import BoundsError, OptionError, ShapeError
from polyopt.runtime import interp
from polyopt.runtime.interp import domain_points, evaluate

F, I32 = "float32", "int32"
RNG = np.random.default_rng(0)


def ix(name: str) -> ir.Var:
    return ir.Var(I32, name, "index")


def c(value: int | float, dtype: str = I32) -> ir.Const:
    return ir.Const(dtype, value)


def rd(tensor: str, *indices: ir.Expr, dtype: str = F, **kw) -> ir.Read:
    return ir.Read(dtype, tensor, tuple(indices), **kw)


def b(op: str, x: ir.Expr, y: ir.Expr, dtype: str = F) -> ir.Binary:
    return ir.Binary(dtype, op, x, y)


def t(name: str, role: str, *shape: str, dtype: str = F) -> ir.Tensor:
    return ir.Tensor(name, dtype, tuple(shape), role)


def st(name: str, tensor: str, lhs: str, iters: str, op: str, rhs: ir.Expr, cons: str,
       params: str, init: bool = False) -> ir.Stmt:
    its = tuple(iters.split()) if iters else ()
    dom = f"[{params}] -> {{ {name}[{', '.join(its)}] : {cons} }}"
    return ir.Stmt(name, tensor, tuple(lhs.split()) if lhs else (), its, op, init, rhs, dom)


def prog(sizes: str, ins: list[ir.Tensor], outs: list[ir.Tensor], stmts: list[ir.Stmt],
         locs: tuple[ir.Tensor, ...] = ()) -> ir.Program:
    return ir.Program("p", tuple(sizes.split()), (), tuple(ins), tuple(outs), locs,
                      tuple(stmts))


def matmul() -> ir.Program:
    rhs = b("*", rd("A", ix("m"), ix("k")), rd("B", ix("k"), ix("n")))
    s = st("C_0", "C", "m n", "m n k", "+", rhs,
           "0 <= m < M and 0 <= n < N and 0 <= k < K", "M, K, N", init=True)
    return prog("M K N", [t("A", "input", "M", "K"), t("B", "input", "K", "N")],
                [t("C", "output", "M", "N")], [s])


def test_matmul() -> None:
    A, B = RNG.standard_normal((5, 7)), RNG.standard_normal((7, 3))
    (C,) = evaluate(matmul(), [A, B], {"M": 5, "K": 7, "N": 3})
    assert C.dtype == np.float64
    np.testing.assert_allclose(C, A @ B, rtol=1e-12)


def test_matmul_sizes_from_inputs_and_empty_reduction() -> None:
    A, B = RNG.standard_normal((4, 6)).astype(np.float32), RNG.standard_normal((6, 2))
    np.testing.assert_allclose(evaluate(matmul(), [A, B], {})[0], A.astype(float) @ B)
    (C,) = evaluate(matmul(), [np.zeros((3, 0)), np.zeros((0, 2))], {})
    np.testing.assert_array_equal(C, np.zeros((3, 2)))  # init fills the whole first-writer


def test_float_dtype_option() -> None:
    A, B = RNG.standard_normal((3, 2)), RNG.standard_normal((2, 4))
    (C,) = evaluate(matmul(), [A, B], {}, dtype=np.float32)
    assert C.dtype == np.float32
    np.testing.assert_allclose(C, A @ B, rtol=1e-5)
    with pytest.raises(OptionError):
        evaluate(matmul(), [A, B], {}, dtype=np.int32)


def test_shape_errors() -> None:
    with pytest.raises(ShapeError):
        evaluate(matmul(), [np.zeros((2, 3)), np.zeros((4, 2))], {})
    with pytest.raises(ShapeError):
        evaluate(matmul(), [np.zeros((2, 3))], {})


def test_relu() -> None:
    rhs = ir.Call(F, "fmax", (rd("X", ix("i"), ix("j")), c(0.0, F)))
    p = prog("M N", [t("X", "input", "M", "N")], [t("Y", "output", "M", "N")],
             [st("Y_0", "Y", "i j", "i j", "=", rhs, "0 <= i < M and 0 <= j < N", "M, N")])
    X = RNG.standard_normal((4, 5))
    np.testing.assert_array_equal(evaluate(p, [X], {"M": 4, "N": 5})[0], np.maximum(X, 0))


def test_max_reduction() -> None:
    s = st("Y_0", "Y", "i", "i r", "max", rd("X", ix("i"), ix("r")),
           "0 <= i < M and 0 <= r < N", "M, N", init=True)
    p = prog("M N", [t("X", "input", "M", "N")], [t("Y", "output", "M")], [s])
    X = RNG.standard_normal((6, 3))
    np.testing.assert_array_equal(evaluate(p, [X], {"M": 6, "N": 3})[0], X.max(1))
    assert np.all(evaluate(p, [np.zeros((6, 0))], {})[0] == -np.inf)


def test_triangular_domain() -> None:
    cons = "0 <= i < N and 0 <= j <= i"
    s0 = st("L_0", "L", "i j", "i j", "=", rd("A", ix("i"), ix("j")), cons, "N")
    s1 = st("S_0", "S", "i", "i j", "+", rd("A", ix("i"), ix("j")), cons, "N", init=True)
    p = prog("N", [t("A", "input", "N", "N")], [t("L", "output", "N", "N"),
                                                 t("S", "output", "N")], [s0, s1])
    A = RNG.standard_normal((5, 5))
    L, S = evaluate(p, [A], {"N": 5})
    np.testing.assert_array_equal(L, np.tril(A))
    np.testing.assert_allclose(S, np.tril(A).sum(1))
    pts = np.concatenate(list(domain_points(s0.domain, {"N": 4})))
    assert pts.tolist() == [[i, j] for i in range(4) for j in range(i + 1)]


def test_strided_domain_enumerates_points() -> None:
    dom = "[N] -> { S[i, j] : 0 <= i < N and 0 <= j < 3 and (i + j) mod 2 = 0 }"
    pts = np.concatenate(list(domain_points(dom, {"N": 5})))
    want = [[i, j] for i in range(5) for j in range(3) if (i + j) % 2 == 0]
    assert pts.tolist() == want
    assert list(domain_points(dom, {"N": 0})) == []


def test_padded_read() -> None:
    # O(i) +=! I(i + r - 1) * W(r) with I zero-padded by 1 on both sides
    read = rd("I", b("-", b("+", ix("i"), ix("r"), I32), c(1), I32), pad=(ir.Pad("1", "1"),))
    s = st("O_0", "O", "i", "i r", "+", b("*", read, rd("W", ix("r"))),
           "0 <= i < N - K + 3 and 0 <= r < K", "N, K", init=True)
    p = prog("N K", [t("I", "input", "N"), t("W", "input", "K")],
             [t("O", "output", "N - K + 3")], [s])
    x, w = RNG.standard_normal(7), RNG.standard_normal(3)
    (out,) = evaluate(p, [x, w], {})
    np.testing.assert_allclose(out, np.correlate(np.pad(x, 1), w, "valid"))
    far = rd("I", b("-", ix("i"), c(2), I32), pad=(ir.Pad("1", "1"),))  # i = 0 reads I(-2)
    bad = prog("N", [t("I", "input", "N")], [t("O", "output", "N")],
               [st("O_0", "O", "i", "i", "=", far, "0 <= i < N", "N")])
    with pytest.raises(BoundsError, match="padding"):
        evaluate(bad, [x], {})


def gather() -> ir.Program:
    s = st("Y_0", "Y", "m", "m", "=", rd("X", rd("Idx", ix("m"), dtype=I32)), "0 <= m < M",
           "N, M")
    return prog("N M", [t("X", "input", "N"), t("Idx", "input", "M", dtype=I32)],
                [t("Y", "output", "M")], [s])


def test_gather_and_bounds_error() -> None:
    x, idx = RNG.standard_normal(6), np.array([5, 0, 3, 3], np.int32)
    np.testing.assert_array_equal(evaluate(gather(), [x, idx], {})[0], x[idx])
    for bad in (6, -1):
        with pytest.raises(BoundsError, match="Y_0"):
            evaluate(gather(), [x, np.array([0, bad], np.int32)], {})


def test_second_statement_reads_local() -> None:
    # tmp(i) +=! A(i, k) * x(k);  y(i) = 2 * tmp(i) + x(i)
    s0 = st("tmp_0", "tmp", "i", "i k", "+", b("*", rd("A", ix("i"), ix("k")), rd("x", ix("k"))),
            "0 <= i < N and 0 <= k < N", "N", init=True)
    s1 = st("y_0", "y", "i", "i", "=", b("+", b("*", c(2.0, F), rd("tmp", ix("i"))),
                                         rd("x", ix("i"))), "0 <= i < N", "N")
    p = prog("N", [t("A", "input", "N", "N"), t("x", "input", "N")], [t("y", "output", "N")],
             [s0, s1], (t("tmp", "local", "N"),))
    A, x = RNG.standard_normal((4, 4)), RNG.standard_normal(4)
    np.testing.assert_allclose(evaluate(p, [A, x], {})[0], 2 * A @ x + x)


def test_accumulate_onto_given_outputs_and_partial_init() -> None:
    # Y(i) += X(i) (no "!": starts from outputs=); Y(i) max=! X(i) over i < 2 only resets i < 2
    s0 = st("Y_0", "Y", "i", "i", "+", rd("X", ix("i")), "0 <= i < N", "N")
    s1 = st("Y_1", "Y", "i", "i", "max", rd("X", ix("i")), "0 <= i < 2", "N", init=True)
    p = prog("N", [t("X", "input", "N")], [t("Y", "output", "N")], [s0, s1])
    x, y0 = np.array([1.0, -2.0, 3.0]), np.array([10.0, 10.0, 10.0])
    np.testing.assert_array_equal(evaluate(p, [x], {}, outputs=[y0])[0], [1.0, -2.0, 13.0])
    assert y0.tolist() == [10.0, 10.0, 10.0]
    np.testing.assert_array_equal(evaluate(p, [x], {})[0], [1.0, -2.0, 3.0])


def test_scalar_output_and_self_read_rounds(monkeypatch: pytest.MonkeyPatch) -> None:
    # s +=! X(r);  C(i) += C(i) * 0.5 + A(i, r)  (reads its running value: sequential in r)
    s0 = st("s_0", "s", "", "r", "+", rd("X", ix("r")), "0 <= r < N", "N", init=True)
    rhs = b("+", b("*", rd("C", ix("i")), c(0.5, F)), rd("A", ix("i"), ix("r")))
    s1 = st("C_0", "C", "i", "i r", "+", rhs, "0 <= i < N and 0 <= r < N", "N")
    p = prog("N", [t("X", "input", "N"), t("A", "input", "N", "N")],
             [t("s", "output"), t("C", "output", "N")], [s0, s1])
    x, A = RNG.standard_normal(4), RNG.standard_normal((4, 4))
    want = np.ones(4)
    for r in range(4):
        want = 1.5 * want + A[:, r]
    for slab in (1 << 20, 1, 3):
        monkeypatch.setattr(interp, "_SLAB", slab)
        s, C = evaluate(p, [x, A], {}, outputs=[np.zeros(()), np.ones(4)])
        assert s.shape == () and math.isclose(float(s), x.sum())
        np.testing.assert_allclose(C, want)


def test_assign_with_reduction_index_keeps_last(monkeypatch: pytest.MonkeyPatch) -> None:
    s = st("Y_0", "Y", "i", "i r", "=", rd("X", ix("i"), ix("r")),
           "0 <= i < 3 and 0 <= r < 4", "")
    p = prog("", [t("X", "input", "3", "4")], [t("Y", "output", "3")], [s])
    X = RNG.standard_normal((3, 4))
    monkeypatch.setattr(interp, "_SLAB", 2)
    np.testing.assert_array_equal(evaluate(p, [X], {})[0], X[:, -1])


def test_integer_semantics() -> None:
    a, y = rd("a", ix("i"), dtype=I32), rd("y", ix("i"), dtype=I32)
    exprs = [b("/", a, y, I32), b("%", a, y, I32), b("min", a, y, I32),
             ir.Cast("int8", b("*", a, c(100), I32)),
             ir.Select(I32, b("<", a, y, "bool"), a, ir.Unary(I32, "-", y)),
             b("%", ir.Cast(F, a), ir.Cast(F, y)),
             b("&&", ir.Unary("bool", "!", b("<", a, y, "bool")), b("!=", y, c(0), "bool"),
               "bool")]
    outs = [t(f"o{k}", "output", "N", dtype=e.dtype) for k, e in enumerate(exprs)]
    stmts = [st(f"o{k}_0", f"o{k}", "i", "i", "=", e, "0 <= i < N", "N")
             for k, e in enumerate(exprs)]
    p = prog("N", [t("a", "input", "N", dtype=I32), t("y", "input", "N", dtype=I32)],
             outs, stmts)
    av, yv = np.array([7, -7, 7, -7, 5], np.int32), np.array([2, 2, -2, -2, 0], np.int32)
    div, mod, mn, wrap, sel, fmod, logic = evaluate(p, [av, yv], {})
    assert div.dtype == np.int32 and wrap.dtype == np.int8
    assert div.tolist() == [3, -4, -4, 3, 0] and mod.tolist() == [1, 1, -1, -1, 0]
    assert mn.tolist() == np.minimum(av, yv).tolist()
    assert wrap.tolist() == (av * 100).astype(np.int8).tolist()
    assert sel.tolist() == np.where(av < yv, av, -yv).tolist()
    np.testing.assert_array_equal(fmod[:4], np.mod(av[:4], yv[:4]).astype(float))
    assert logic.dtype == bool and logic.tolist() == ((av >= yv) & (yv != 0)).tolist()


def test_builtins() -> None:
    names = ["round", "erf", "rsqrt", "normcdf", "exp10", "fdim", "trunc", "cbrt"]
    x = np.array([0.5, 1.5, 2.5, -0.5, -2.5, 0.49999999999999994, 3.2])
    calls = [ir.Call(F, n, (rd("X", ix("i")),) * (2 if n == "fdim" else 1)) for n in names]
    outs = [t(f"o{k}", "output", "N") for k in range(len(calls))]
    stmts = [st(f"o{k}_0", f"o{k}", "i", "i", "=", e, "0 <= i < N", "N")
             for k, e in enumerate(calls)]
    p = prog("N", [t("X", "input", "N")], outs, stmts)
    with np.errstate(all="ignore"):
        r, erf, rsq, ncdf, e10, fdim, trunc, cbrt = evaluate(p, [x], {})
        np.testing.assert_allclose(rsq, 1 / np.sqrt(x))
    assert r.tolist() == [1.0, 2.0, 3.0, -1.0, -3.0, 0.0, 3.0]
    np.testing.assert_allclose(erf, [math.erf(v) for v in x])
    np.testing.assert_allclose(ncdf, [0.5 * math.erfc(-v / math.sqrt(2)) for v in x])
    np.testing.assert_allclose(e10, 10.0 ** x)
    assert fdim.tolist() == [0.0] * 7 and trunc.tolist() == np.trunc(x).tolist()
    np.testing.assert_allclose(cbrt, np.cbrt(x))
    bad = prog("N", [t("X", "input", "N")], [t("Y", "output", "N")],
               [st("Y_0", "Y", "i", "i", "=", ir.Call(F, "frobnicate", (rd("X", ix("i")),)),
                   "0 <= i < N", "N")])
    with pytest.raises(NotImplementedError, match="frobnicate"):
        evaluate(bad, [x], {})


# --- programs from TC text (the language front end) ---------------------------------------

lang = pytest.importorskip("polyopt.lang")


def build(source: str, name: str, **sizes: int) -> ir.Program:
    return lang.build_program(source, name, sizes)


def test_tc_matmul() -> None:
    p = build("def matmul(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,r_k)*B(r_k,n) }",
              "matmul")
    A, B = RNG.standard_normal((8, 5)), RNG.standard_normal((5, 6))
    np.testing.assert_allclose(evaluate(p, [A, B], {"M": 8, "K": 5, "N": 6})[0], A @ B)


def test_tc_softmax_layernorm() -> None:
    src = """
    def softmax(float(N,D) X) -> (Y) local (mx, den) {
        mx(n)  max=! X(n,r_d)
        den(n) +=! exp(X(n,r_d) - mx(n))
        Y(n,d)  = exp(X(n,d) - mx(n)) / den(n)
    }
    def layernorm(float(N,D) X, float(D) gamma, float(D) beta) -> (Y) local (mu, var) {
        mu(n)  +=! X(n,r_d)
        mu(n)   = mu(n) / D
        var(n) +=! (X(n,r_d) - mu(n)) * (X(n,r_d) - mu(n))
        var(n)  = var(n) / D
        Y(n,d)  = gamma(d) * (X(n,d) - mu(n)) * rsqrt(var(n) + 1e-5) + beta(d)
    }"""
    X, g, be = RNG.standard_normal((4, 9)), RNG.standard_normal(9), RNG.standard_normal(9)
    E = np.exp(X - X.max(1, keepdims=True))
    np.testing.assert_allclose(evaluate(build(src, "softmax"), [X], {})[0],
                               E / E.sum(1, keepdims=True))
    mu, var = X.mean(1, keepdims=True), X.var(1, keepdims=True)
    np.testing.assert_allclose(evaluate(build(src, "layernorm"), [X, g, be], {})[0],
                               g * (X - mu) / np.sqrt(var + 1e-5) + be, rtol=1e-6)


def test_tc_strided_padded_conv() -> None:
    src = """def conv(float(N,C,H,W) I, float(F,C,KH,KW) Wt) -> (O) {
        O(n,f,h,w) +=! I(n, r_c, 2*h + r_kh - 1, 2*w + r_kw - 1) * Wt(f, r_c, r_kh, r_kw)
            where pad I(0, 0, 1, 1)
    }"""
    x, wt = RNG.standard_normal((2, 3, 9, 8)), RNG.standard_normal((4, 3, 3, 3))
    (out,) = evaluate(build(src, "conv"), [x, wt], {})
    win = np.lib.stride_tricks.sliding_window_view(
        np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1))), (3, 3), axis=(2, 3))[:, :, ::2, ::2]
    np.testing.assert_allclose(out, np.einsum("nchwij,fcij->nfhw", win, wt), rtol=1e-12)


def test_tc_gather() -> None:
    p = build("def g(float(N) X, int32(M) Idx) -> (Y) { Y(m) = X(Idx(m)) }", "g")
    x = RNG.standard_normal(5)
    np.testing.assert_array_equal(evaluate(p, [x, np.array([4, 0, 2], np.int32)], {})[0],
                                  x[[4, 0, 2]])
    with pytest.raises(BoundsError):
        evaluate(p, [x, np.array([5], np.int32)], {})
