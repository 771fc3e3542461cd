"""Lexer and parser details (reference §1, §2)."""

from __future__ import annotations

import islpy as isl
import pytest
from lang_helpers import build

from polyopt import ir
from polyopt.errors import LanguageError
from polyopt.lang import build_program, def_names
from polyopt.lang import syntax as S
from polyopt.lang.lexer import tokenize, widen_floats
from polyopt.lang.parser import parse

A = "def f(float(N) A) -> (B) { "


def kinds(src: str) -> list[tuple[str, str]]:
    return [(t.kind, t.text) for t in tokenize(src)[:-1]]


def test_tokens():
    assert kinds("max=! min= +=! += <=> <= in index") == [
        ("assign", "max=!"), ("assign", "min="), ("assign", "+=!"), ("assign", "+="),
        ("punct", "<=>"), ("punct", "<="), ("keyword", "in"), ("ident", "index")]
    assert kinds("max =!") == [("keyword", "max"), ("assign", "="), ("punct", "!")]
    assert kinds("12 3. .5 1.5e-3 0x1F info") == [
        ("int", "12"), ("float", "3."), ("float", ".5"), ("float", "1.5e-3"), ("int", "0x1F"),
        ("ident", "info")]
    assert [t.value for t in tokenize("0x1F 3.")[:2]] == [31, 3.0]
    assert kinds("a # comment\nb") == [("ident", "a"), ("ident", "b")]
    assert [t.pos for t in tokenize("a\n  bb c")[:3]] == [(1, 1), (2, 3), (2, 6)]


def test_literals_types():
    p = build(A + "B(i) = A(i) + 1 + 2.5 + .5 + 0x10 }")
    consts = [e for e in p.stmts[0].rhs.walk() if isinstance(e, ir.Const)]
    assert consts == [ir.Const("int32", 1), ir.Const("float32", 2.5), ir.Const("float32", 0.5),
                      ir.Const("int32", 16)]


def test_precedence():
    p = build("def f(float(N) A) -> (B) { B(i) = (-3 % 2 == 1 < 2) ? A(i) : -A(i) * 2.0 }")
    sel = p.stmts[0].rhs
    assert str(sel.cond) == "(((-3 % 2) == 1) < 2)"
    assert str(sel.b) == "((-A(i)) * 2.0)"
    p = build("def f(float(N) A) -> (B) { B(i) = A(i) > 0 || A(i) < 1 && !(A(i) == 2) }")
    assert str(p.stmts[0].rhs) == "((A(i) > 0) || ((A(i) < 1) && (!(A(i) == 2))))"
    assert p.outputs[0].dtype == "bool"
    # ``?:`` nests to the right; on affine conditions it is cut into pieces (lang/piecewise)
    p = build("def f(float(N) A) -> (B) { B(i) = i < 1 ? 1.0 : i < 2 ? 2.0 : 3.0 where i in 0:N }")
    want = [("1.0", "i = 0 < N"), ("2.0", "i = 1 < N"), ("3.0", "2 <= i < N")]
    assert len(p.stmts) == len(want)
    for s, (rhs, where) in zip(p.stmts, want, strict=True):
        assert str(s.rhs) == rhs
        assert isl.Set(s.domain).is_equal(isl.Set(f"[N] -> {{ {s.name}[i] : {where} }}")), s


def test_positions_of_expressions():
    src = A + "B(i) = (A(i) + 1.0) * max(A(i), 0.0) }"
    p = build(src)
    rhs = p.stmts[0].rhs
    assert rhs.pos == (1, src.index("(A(i) +") + 1)
    assert rhs.b.pos == (1, src.index("max") + 1) and rhs.b.op == "max"
    assert rhs.b.dtype == "float32"


def test_statements_span_and_share_lines():
    p = build("def f(float(N) A) -> (B, C) { B(i) = A(i) C(i) =\n B(i)\n + 1.0 }")
    assert [s.name for s in p.stmts] == ["B_0", "C_0"]


def test_equivalence_annotation_is_ignored():
    p = build("def mm(float(M,K) A, float(K,N) B) -> (C) "
              "{ C(m,n) +=! A(m,k)*B(k,n) <=> matmul(A, B) }")
    assert p.stmts[0].iters == ("m", "n", "k")


def test_types_and_promotion():
    p = build("""def f(int8(N) a, uint8(N) b, float16(N) h, double(N) d, bool(N) t)
        -> (x, y, z, w) {
        x(i) = a(i) + b(i)
        y(i) = h(i) + 1
        z(i) = sqrt(a(i)) + float16(d(i))
        w(i) = t(i) && t(i)
    }""")
    assert [t.dtype for t in p.outputs] == ["int8", "float16", "float32", "bool"]
    assert p.inputs[3].dtype == "float64"
    p = build("def f(int8(N) a) -> (x) { x(i) = a(i) + 1 }")
    assert p.outputs[0].dtype == "int32"


def test_declared_output_type_is_kept():
    p = build("def f(float(N) A) -> (double(N) B) { B(i) = A(i) }")
    assert p.outputs[0].dtype == "float64"


def test_let_inlining():
    p = build("def f(float(N) A) -> (B) { B(i) = y * y where x = A(i), y = x + 1.0 }")
    assert str(p.stmts[0].rhs) == "((A(i) + 1.0) * (A(i) + 1.0))"


def test_def_names_and_syntax_tree():
    src = "def a(float(N) X) -> (Y) { Y(i) = X(i) }\ndef b(float X) -> (Y) { Y = X }"
    assert def_names(src) == ["a", "b"]
    f = parse(src)
    assert isinstance(f, S.File) and f.defs[1].stmts[0].indices == ()
    p = build_program(src, "b")
    assert p.outputs[0].shape == () and p.stmts[0].domain == "[] -> { Y_0[] }"


def test_recursion_never_escapes():
    src = A + "B(i) = " + "exp(" * 150 + "A(i)" + ")" * 150 + " where x = " + "(" * 150 + "1" \
        + ")" * 150 + " }"
    p = build(src)
    assert p.stmts[0].rhs.dtype == "float32"
    with pytest.raises(LanguageError, match="nested"):
        build_program(A + "B(i) = " + "A(" * 400 + "i" + ")" * 400 + " }")


def test_depth_after_let_inlining():
    deep = "-" * 150 + "A(i)"
    with pytest.raises(LanguageError, match="once lets are inlined"):
        build_program(A + "B(i) = " + "exp(" * 120 + "x" + ")" * 120 + " where x = exp(" + deep
                      + ") }")


def test_widen_floats_retypes_every_float_type_name_and_nothing_else() -> None:
    src = ("def f(float(M) A, float16(M) B, int32(M) I) -> (C) {\n"
           "  C(i) = A(i) * float32(B(i)) + I(i) # a float comment\n}")
    assert widen_floats(src) == (
        "def f(float64(M) A, float64(M) B, int32(M) I) -> (C) {\n"
        "  C(i) = A(i) * float64(B(i)) + I(i) # a float comment\n}")
