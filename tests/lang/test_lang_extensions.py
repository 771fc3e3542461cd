"""Extensions: zero padding, <...> parameters, locals, affine where bounds, sizes=."""

from __future__ import annotations

import islpy as isl
import pytest
from lang_helpers import build, same_set

from polyopt import ir
from polyopt.errors import LanguageError


def reads(p: ir.Program, k: int = 0) -> list[ir.Read]:
    return [e for e in p.stmts[k].rhs.walk() if isinstance(e, ir.Read)]


def test_conv_same_with_statement_pad():
    p = build("""def conv_same(float(N,C,H,W) I, float(F,C,3,3) Wt) -> (O) {
        O(n,f,h,w) +=! I(n,r_c,h+r_kh-1,w+r_kw-1) * Wt(f,r_c,r_kh,r_kw) where pad I(0,0,1,1)
    }""")
    assert p.outputs[0].shape == ("N", "F", "H", "W")
    i, wt = reads(p)
    assert i.pad == (ir.Pad(), ir.Pad(), ir.Pad("1", "1"), ir.Pad("1", "1")) and i.fill == 0.0
    assert wt.pad is None
    assert same_set(p.stmts[0].domain, "[N, C, H, W, F] -> { O_0[n, f, h, w, c, y, x] : "
                    "0 <= n < N and 0 <= f < F and 0 <= h < H and 0 <= w < W and 0 <= c < C "
                    "and 0 <= y < 3 and 0 <= x < 3 }")


def test_pad_before_after_and_fill():
    p = build("def f(float(N,C,H,W) I) -> (O) "
              "{ O(n,c,h,w) = I(n,c,h-1,w-1) where pad I(0,0,1:2,1:2) = 0.5 }")
    (i,) = reads(p)
    assert i.pad == (ir.Pad(), ir.Pad(), ir.Pad("1", "2"), ir.Pad("1", "2")) and i.fill == 0.5
    assert p.outputs[0].shape == ("N", "C", "H + 3", "W + 3")


def test_signature_pad_applies_to_every_statement():
    p = build("""def f(float(N,H) I pad(0,1) = -1) -> (O, P) {
        O(n,h) = I(n,h-1)
        P(n,h) +=! I(n,h+r-1) where r in 0:3
    }""")
    assert [r.pad for r in reads(p, 0) + reads(p, 1)] == [(ir.Pad(), ir.Pad("1", "1"))] * 2
    assert reads(p, 0)[0].fill == -1.0
    assert p.outputs[0].shape == ("N", "H + 2") and p.outputs[1].shape == ("N", "H")


def test_pad_widths_are_size_expressions():
    p = build("def f<P=2>(float(N,K) I) -> (O) { O(n) +=! I(n - K, r) where pad I(K:P, 0) }")
    assert reads(p)[0].pad == (ir.Pad("K", "2"), ir.Pad())
    assert p.outputs[0].shape == ("N + K + 2",)


def test_pad_named_let_is_still_a_let():
    p = build("def f(float(N) A) -> (B) { B(i) = A(i) * pad where pad = 2.0 }")
    assert p.stmts[0].rhs.b == ir.Const("float32", 2.0)


CONV = """def conv<SH=1, SW=1, DH=1, DW=1>(float(N,C,H,W) I, float(F,C,KH,KW) Wt) -> (O) {
    O(n,f,h,w) +=! I(n,r_c,SH*h+DH*r_kh,SW*w+DW*r_kw) * Wt(f,r_c,r_kh,r_kw)
}"""


def test_params_take_defaults():
    p = build(CONV)
    assert p.bound == (("SH", 1), ("SW", 1), ("DH", 1), ("DW", 1))
    assert p.sizes == ("N", "C", "H", "W", "F", "KH", "KW")
    assert p.outputs[0].shape == ("N", "F", "H - KH + 1", "W - KW + 1")


@pytest.mark.parametrize(("sh", "dh", "h", "kh"), [(2, 1, 11, 3), (2, 2, 11, 3), (3, 2, 20, 4),
                                                   (1, 3, 9, 3)])
def test_params_strides_and_dilations(sh, dh, h, kh):
    p = build(CONV, sizes={"SH": sh, "DH": dh})
    ext = p.outputs[0].shape[2]
    assert ir.extent_value(ext, {"H": h, "KH": kh}) == (h - dh * (kh - 1) - 1) // sh + 1
    consts = [e for e in p.stmts[0].rhs.walk() if isinstance(e, ir.Const)]
    assert ir.Const("int32", sh) in consts


def test_bound_sizes_become_constants():
    p = build(CONV, sizes={"H": 10, "KH": 3, "N": 1})
    assert p.sizes == ("C", "W", "F", "KW")
    assert dict(p.bound) == {"SH": 1, "SW": 1, "DH": 1, "DW": 1, "N": 1, "H": 10, "KH": 3}
    assert p.inputs[0].shape == ("1", "C", "10", "W")
    assert p.outputs[0].shape == ("1", "F", "8", "W - KW + 1")
    assert p.stmts[0].domain.startswith("[C, W, F, KW] -> { O_0[")
    mean = build("def m(float(N,K) X) -> (Y) { Y(n) +=! X(n, r) / K }", sizes={"K": 4})
    assert mean.stmts[0].rhs.b == ir.Const("int32", 4)


def test_size_times_index_needs_binding():
    src = "def f(float(N) A, float(S) s) -> (B) { B(i) = A(S*i) }"
    with pytest.raises(LanguageError, match="sizes="):
        build(src)
    assert build(src, sizes={"S": 3}).outputs[0].shape == ("floor((N - 1)/3) + 1",)


def test_locals_are_not_returned():
    p = build("""def softmax(float(N,D) X) -> (Y) local (mx, float(N) den) {
        mx(n)  max=! X(n,r_d)
        den(n) +=! exp(X(n,r_d) - mx(n))
        Y(n,d)  = exp(X(n,d) - mx(n)) / den(n)
    }""")
    assert [t.name for t in p.outputs] == ["Y"]
    assert [(t.name, t.role, t.shape) for t in p.locals] == [
        ("mx", "local", ("N",)), ("den", "local", ("N",)), ("cse0", "local", ("N", "D"))]


def test_triangular_domain():
    p = build("def syrk(float(N,K) A) -> (C) { C(i,j) +=! A(i,k)*A(j,k) where j in 0:i+1 }")
    s = p.stmts[0]
    assert s.iters == ("i", "j", "k") and p.outputs[0].shape == ("N", "N")
    assert same_set(s.domain, "[N, K] -> { C_0[i, j, k] : 0 <= j <= i < N and 0 <= k < K }")


def test_bound_depending_on_inferred_reduction():
    p = build("def f(float(N) A) -> (B) { B(i) +=! A(r) where i in 0:r+1 }")
    assert p.outputs[0].shape == ("N",)
    assert same_set(p.stmts[0].domain, "[N] -> { B_0[i, r] : 0 <= r < N and 0 <= i <= r }")


def test_quasi_affine_indices():
    p = build("def up(float(N) A) -> (B) { B(i) = A(i / 2) }")
    assert p.outputs[0].shape == ("2*N",)
    p = build("def f(float(N) A) -> (B) { B(i) = A(i) + A(i % 2) }")
    assert p.outputs[0].shape == ("N",)
    dom = isl.Set(p.stmts[0].domain)
    assert dom.dim(isl.dim_type.set) == 1


def test_where_bounds_only_affine_in_sizes():
    p = build("def f(float(N) A) -> (B) { B(i) +=! A(i) * r where r in 1:N-1 }")
    assert same_set(p.stmts[0].domain, "[N] -> { B_0[i, r] : 0 <= i < N and 1 <= r < N - 1 }")


def test_min_extent_and_partial_later_write():
    p = build("""def f(float(N) A, float(M) C) -> (B) {
        B(i) = A(i) + C(i)
        B(i) = 0.0 where i in 1:min(N, M)
    }""")
    assert p.outputs[0].shape == ("min(N, M)",)
    assert ir.extent_value(p.outputs[0].shape[0], {"N": 5, "M": 3}) == 3


def test_reduction_order_of_first_appearance():
    p = build("def f(float(A,B,C) X) -> (Y) { Y(a) +=! X(a, q, p) where p in 0:C, q in 0:B }")
    assert p.stmts[0].iters == ("a", "q", "p")
    p = build("def f(float(A,B,C) X) -> (Y) { Y(a) +=! x where x = X(a, q, p) }")
    assert p.stmts[0].iters == ("a", "q", "p")


def test_exists_feeds_inference_only():
    p = build("def f(float(N,M) A) -> (B) { B(i) +=! 1.0 where exists A(i, r) }")
    assert p.outputs[0].shape == ("N",) and p.stmts[0].iters == ("i", "r")
    assert p.stmts[0].rhs == ir.Const("float32", 1.0)


def test_later_write_must_fit():
    with pytest.raises(LanguageError, match="outside its shape"):
        build("def f(float(N) A, float(M) C) -> (B) { B(i) = A(i) + C(i)\n"
              " B(i) = 0.0 where i in 0:2 }")
