"""Every example of §4 of the language reference: iters, domains, extents, dtypes."""

from __future__ import annotations

import pytest
from lang_helpers import build, same_set

from polyopt import ir
from polyopt.errors import PolyoptWarning
from polyopt.lang import build_program


def shapes(p: ir.Program) -> dict[str, tuple[str, ...]]:
    return {n: t.shape for n, t in p.tensors.items()}


def test_matmul():
    src = "def matmul(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,r_k)*B(r_k,n) }"
    p = build(src)
    assert p.name == "matmul" and p.sizes == ("M", "K", "N") and p.bound == ()
    (s,) = p.stmts
    assert (s.name, s.tensor, s.lhs, s.iters, s.op, s.init) == (
        "C_0", "C", ("m", "n"), ("m", "n", "r_k"), "+", True)
    assert s.reduction_iters == ("r_k",)
    assert s.domain == ("[M, K, N] -> { C_0[m, n, r_k] : 0 <= m <= M - 1 and "
                        "0 <= n <= N - 1 and 0 <= r_k <= K - 1 }")
    assert p.outputs == (ir.Tensor("C", "float32", ("M", "N"), "output"),)
    assert [t.role for t in p.inputs] == ["input", "input"]
    assert s.rhs == ir.Binary("float32", "*",
                              ir.Read("float32", "A", (ir.Var("int32", "m", "index"),
                                                       ir.Var("int32", "r_k", "index"))),
                              ir.Read("float32", "B", (ir.Var("int32", "r_k", "index"),
                                                       ir.Var("int32", "n", "index"))))
    assert s.pos == (1, src.index("C(m") + 1) and s.rhs.pos == (1, src.index("A(m") + 1)
    assert s.rhs.b.indices[0].pos == (1, src.index("r_k,n") + 1)


def test_mm_nt_and_bmm_and_tdot():
    p = build("def mm_nt(float(M,K) A, float(N,K) B) -> (C) { C(m,n) +=! A(m,r_k)*B(n,r_k) }")
    assert p.outputs[0].shape == ("M", "N")
    p = build("def bmm(float(B,M,K) X, float(B,K,N) Y) -> (Z) "
              "{ Z(b,m,n) +=! X(b,m,r_k)*Y(b,r_k,n) }")
    assert p.outputs[0].shape == ("B", "M", "N") and p.stmts[0].iters == ("b", "m", "n", "r_k")
    p = build("def tdot(float(A,B,C) X, float(B,C,D) Y) -> (Z) "
              "{ Z(a,d) +=! X(a,r_b,r_c)*Y(r_b,r_c,d) }")
    assert p.outputs[0].shape == ("A", "D") and p.stmts[0].iters == ("a", "d", "r_b", "r_c")


def test_gemv_scalar_input():
    p = build("def gemv(float(M,K) A, float(K) x, float alpha) -> (y) "
              "{ y(m) +=! alpha*A(m,r_k)*x(r_k) }")
    assert p.inputs[2] == ir.Tensor("alpha", "float32", (), "input")
    reads = [e for e in p.stmts[0].rhs.walk() if isinstance(e, ir.Read)]
    assert reads[0] == ir.Read("float32", "alpha", ())


def test_fc_relu_two_statements():
    p = build("""def fc_relu(float(B,I) X, float(O,I) W, float(O) bias) -> (Y) {
        Y(b,o) +=! X(b,r_i)*W(o,r_i)
        Y(b,o)  = fmax(Y(b,o) + bias(o), 0)
    }""")
    s0, s1 = p.stmts
    assert (s0.name, s1.name) == ("Y_0", "Y_1")
    assert (s1.op, s1.init, s1.iters) == ("=", False, ("b", "o"))
    assert isinstance(s1.rhs, ir.Call) and s1.rhs.fn == "fmax" and s1.rhs.dtype == "float32"
    assert s1.rhs.args[1] == ir.Const("int32", 0)
    assert same_set(s1.domain, "[B, I, O] -> { Y_1[b, o] : 0 <= b < B and 0 <= o < O }")


def test_mlp2_intermediate_output():
    p = build("""def mlp2(float(B,I) X, float(J,I) W1, float(J) b1, float(O,J) W2, float(O) b2)
        -> (Y, H) {
        H(b,j) +=! X(b,r_i)*W1(j,r_i)
        H(b,j)  = fmax(H(b,j) + b1(j), 0)
        Y(b,o) +=! H(b,r_j)*W2(o,r_j)
        Y(b,o)  = Y(b,o) + b2(o)
    }""")
    assert [s.name for s in p.stmts] == ["H_0", "H_1", "Y_0", "Y_1"]
    assert shapes(p)["H"] == ("B", "J") and shapes(p)["Y"] == ("B", "O")
    assert same_set(p.stmts[2].domain, "[B, I, J, O] -> { Y_0[b, o, r_j] : 0 <= b < B and "
                    "0 <= o < O and 0 <= r_j < J }")


CONVS = {
    "conv2d": ("h+r_kh", "w+r_kw", "H - KH + 1", "W - KW + 1"),
    "conv2d_s2": ("2*h+r_kh", "2*w+r_kw", "floor((H - KH)/2) + 1", "floor((W - KW)/2) + 1"),
    "conv2d_d2": ("h+2*r_kh", "w+2*r_kw", "H - 2*KH + 2", "W - 2*KW + 2"),
}


@pytest.mark.parametrize("name", CONVS)
def test_convolutions(name):
    ih, iw, eh, ew = CONVS[name]
    p = build(f"""def {name}(float(N,C,H,W) I, float(F,C,KH,KW) Wt) -> (O) {{
        O(n,f,h,w) +=! I(n,r_c,{ih},{iw})*Wt(f,r_c,r_kh,r_kw)
    }}""")
    assert p.outputs[0].shape == ("N", "F", eh, ew)
    assert p.stmts[0].iters == ("n", "f", "h", "w", "r_c", "r_kh", "r_kw")
    sizes = {"N": 1, "C": 1, "H": 11, "W": 12, "F": 1, "KH": 3, "KW": 2}
    got = [ir.extent_value(e, sizes) for e in p.outputs[0].shape[2:]]
    want = {"conv2d": [9, 11], "conv2d_s2": [5, 6], "conv2d_d2": [7, 10]}[name]
    assert got == want


def test_gconv():
    p = build("""def gconv(float(N,G,C,H,W) I, float(G,F,C,KH,KW) Wt) -> (O) {
        O(n,g,f,h,w) +=! I(n,g,r_c,h+r_kh,w+r_kw)*Wt(g,f,r_c,r_kh,r_kw)
    }""")
    assert p.outputs[0].shape == ("N", "G", "F", "H - KH + 1", "W - KW + 1")


def test_maxpool_and_avgpool():
    p = build("""def maxpool2(float(N,C,H,W) I) -> (O) {
        O(n,c,h,w) max=! I(n,c,2*h+r_y,2*w+r_x) where r_y in 0:2, r_x in 0:2
    }""")
    s = p.stmts[0]
    assert (s.op, s.init, s.iters) == ("max", True, ("n", "c", "h", "w", "r_y", "r_x"))
    assert [ir.extent_value(e, {"N": 1, "C": 1, "H": 7, "W": 8}) for e in
            p.outputs[0].shape] == [1, 1, 3, 4]
    assert "0 <= r_y < 2" in s.domain
    p = build("""def avgpool3(float(N,C,H,W) I) -> (O) {
        O(n,c,h,w) +=! I(n,c,h+r_y,w+r_x) / 9.0 where r_y in 0:3, r_x in 0:3
    }""")
    assert p.outputs[0].shape == ("N", "C", "H - 2", "W - 2")
    assert p.stmts[0].rhs.b == ir.Const("float32", 9.0)


def test_softmax_layernorm_moments():
    p = build("""def softmax(float(N,D) X) -> (Y, mx, den) {
        mx(n)  max=! X(n,r_d)
        den(n) +=! exp(X(n,r_d) - mx(n))
        Y(n,d)  = exp(X(n,d) - mx(n)) / den(n)
    }""")
    # The shared exp(...) is computed once, into a local (polyopt.lang.cse).
    assert shapes(p) == {"X": ("N", "D"), "Y": ("N", "D"), "mx": ("N",), "den": ("N",),
                         "cse0": ("N", "D")}
    assert [s.iters for s in p.stmts] == [("n", "r_d"), ("n", "r_d"), ("n", "r_d"), ("n", "d")]
    p = build("""def layernorm(float(N,D) X, float(D) g, float(D) b) -> (Y, mu, var) {
        mu(n)  +=! X(n,r_d) / D
        var(n) +=! (X(n,r_d) - mu(n))*(X(n,r_d) - mu(n)) / D
        Y(n,d)  = g(d)*xc*rsqrt(var(n) + 1e-5) + b(d) where xc = X(n,d) - mu(n)
    }""")
    y = p.stmts[2]
    assert y.iters == ("n", "d")
    assert ir.Var("int32", "D", "size") in list(p.stmts[0].rhs.walk())
    assert sum(isinstance(e, ir.Read) and e.tensor == "X" for e in y.rhs.walk()) == 1
    p = build("""def moments(float(N,K) X) -> (mean, var) {
        mean(n) +=! X(n,r_k)
        mean(n)  = mean(n) / K
        var(n)  +=! (X(n,r_k) - mean(n))*(X(n,r_k) - mean(n))
        var(n)   = var(n) / K
    }""")
    assert [s.name for s in p.stmts] == ["mean_0", "mean_1", "var_0", "var_1"]


def test_kron2():
    p = build("""def kron2(float(P0,Q0) W0, float(P1,Q1) W1, float(M,Q0,Q1) X) -> (Y, T) {
        T(m,q0,p1) +=! X(m,q0,r_q1)*W1(p1,r_q1)
        Y(m,p0,p1) +=! T(m,r_q0,p1)*W0(p0,r_q0)
    }""")
    assert shapes(p)["T"] == ("M", "Q0", "P1") and shapes(p)["Y"] == ("M", "P0", "P1")


def test_gathers():
    p = build("def embed(float(V,E) Tab, int32(B,L) Idx) -> (Out) "
              "{ Out(b,l,e) = Tab(Idx(b,l), e) }")
    assert p.outputs[0].shape == ("B", "L", "E") and p.stmts[0].iters == ("b", "l", "e")
    read = p.stmts[0].rhs
    assert isinstance(read, ir.Read) and isinstance(read.indices[0], ir.Read)
    p = build("def bag(float(V,E) Tab, int32(B,L) Idx) -> (Out) "
              "{ Out(b,e) +=! Tab(Idx(b,r_l), e) }")
    assert p.outputs[0].shape == ("B", "E") and p.stmts[0].iters == ("b", "e", "r_l")


def test_argmax_types():
    p = build("""def argmax(float(N,D) X) -> (mx, idx) {
        mx(n)  max=! X(n,r_d)
        idx(n) min=! (X(n,r_d) == mx(n)) ? r_d : D
    }""")
    assert [t.dtype for t in p.outputs] == ["float32", "int32"]
    sel = p.stmts[1].rhs
    assert isinstance(sel, ir.Select) and sel.cond.dtype == "bool"
    assert sel.a == ir.Var("int32", "r_d", "index") and sel.b == ir.Var("int32", "D", "size")


def test_to_chw_cast():
    p = build("def to_chw(uint8(H,W,C) Img) -> (Out) "
              "{ Out(c,h,w) = float(Img(h,w,c)) / 255.0 }")
    assert p.inputs[0].dtype == "uint8" and p.outputs[0].shape == ("C", "H", "W")
    cast = p.stmts[0].rhs.a
    assert isinstance(cast, ir.Cast) and cast.dtype == "float32" and cast.x.dtype == "uint8"


def test_fill_like_exists():
    p = build("def fill_like(float(N,M) A, float v) -> (B) { B(i,j) = v where exists A(i,j) }")
    assert p.outputs[0].shape == ("N", "M")
    assert p.stmts[0].rhs == ir.Read("float32", "v", ())


def test_flip():
    p = build("def flip(float(N) x) -> (y) { y(i) = x(N - 1 - i) }")
    assert p.outputs[0].shape == ("N",)
    assert same_set(p.stmts[0].domain, "[N] -> { y_0[i] : 0 <= i < N }")


def test_trace_0d_output():
    p = build("def trace(float(N,M) A) -> (t) { t +=! A(r_i, r_i) }")
    assert p.outputs[0].shape == () and p.stmts[0].lhs == ()
    assert p.stmts[0].iters == ("r_i",)
    assert same_set(p.stmts[0].domain, "[N, M] -> { t_0[r] : 0 <= r < N and r < M }")
    p2 = build("def trace(float(N,M) A) -> (t) { t() +=! A(r_i, r_i) }")
    assert p2.stmts == p.stmts


def test_accum_warns():
    with pytest.warns(PolyoptWarning, match=r"(?s)without initialization.*line 1, column 36"):
        p = build_program("def accum(float(N,K) A) -> (acc) { acc(n) += A(n,r_k) }")
    assert (p.stmts[0].op, p.stmts[0].init) == ("+", False)


def test_unused_sizes_are_parameters():
    p = build("def f(float(N,M) A) -> (B) { B(i) +=! A(i, 0) }")
    assert p.sizes == ("N", "M") and p.stmts[0].domain.startswith("[N, M] -> ")
