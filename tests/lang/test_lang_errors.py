"""Every error (and warning) of the front end, with its message and caret position."""

from __future__ import annotations

import re

import numpy as np
import pytest

import polyopt
from polyopt.errors import (
    LanguageError,
    OptionError,
    PolyoptWarning,
    ShapeError,
    SizesRequiredError,
)
from polyopt.lang import build_program, def_names
from polyopt.runtime.interp import evaluate

A = "def f(float(N) A) -> (B) { "

# (id, source, message regex, line, column)
ERRORS = [
    ("empty", "", r"empty source", None, None),
    ("comments-only", "# nothing\n", r"empty source", None, None),
    ("missing-expr", A + "B(i) = A(i) + }", r"expected an expression, found '\}'", 1, 42),
    ("outputs-need-parens", "def f(float(N) A) -> B { B(i) = A(i) }",
     r"expected '\(' around the outputs, found 'B'", 1, 22),
    ("split-compound-op", A + "B(i) max =! A(i) }", r"expected an assignment operator", 1, 33),
    ("lhs-literal", A + "B(0) = A(0) }", r"LHS indices are identifiers", 1, 30),
    ("bad-char", A + "B(i) = A(i) @ 2 }", r"unexpected character '@'", 1, 40),
    ("unknown-tensor", A + "B(i) = AA(i) }", r"unknown tensor or function 'AA'; did you mean 'A'",
     1, 35),
    ("unknown-function", A + "B(i) = exq(A(i)) }", r"unknown .* 'exq'; did you mean 'exp'", 1, 35),
    ("unknown-type", "def f(half(N) A) -> (B) { B(i) = A(i) }", r"unknown type 'half'", 1, 7),
    ("untyped-input", "def f(A) -> (B) { B(i) = A(i) }", r"input 'A' needs a type", 1, 7),
    ("rank-read", A + "B(i) = A(i, i) }", r"'A' has rank 1 but is read with 2 indices", 1, 35),
    ("rank-lhs", A + "B(i) = A(i)\n B(i, j) = A(i) }", r"'B' has rank 1 but is written with 2",
     2, 2),
    ("rank-declared", "def f(float(N) A) -> (float(N) B) { B = A(0) }", r"'B' has rank 1", 1, 37),
    ("duplicate-def", A + "B(i) = A(i) }\n" + A + "B(i) = A(i) }", r"duplicate def name 'f'", 2, 1),
    ("duplicate-input", "def f(float(N) A, float(N) A) -> (B) { B(i) = A(i) }",
     r"duplicate input 'A'", 1, 19),
    ("duplicate-output", "def f(float(N) A) -> (B, B) { B(i) = A(i) }", r"duplicate output 'B'",
     1, 26),
    ("duplicate-lhs", "def f(float(N,N) A) -> (B) { B(i, i) = A(i, i) }",
     r"duplicate LHS index 'i'", 1, 35),
    ("output-is-input", "def f(float(N) A) -> (A) { A(i) = A(i) }",
     r"'A' is declared both as an input and as an output", 1, 23),
    ("write-input", A + "B(i) = A(i)\n A(i) = B(i) }", r"cannot write input 'A'.*immutable", 2, 2),
    ("write-undeclared", A + "B(i) = A(i)\n Cc(i) = B(i) }", r"'Cc' is written but not declared",
     2, 2),
    ("never-written", "def f(float(N) A) -> (B, C) { B(i) = A(i) }", r"output 'C' is never written",
     1, 26),
    ("local-never-written", "def f(float(N) A) -> (B) local (T) { B(i) = A(i) }",
     r"local 'T' is never written", 1, 33),
    ("read-before-def", "def f(float(N) A) -> (B, C) { B(i) = A(i) + C(i)\n C(i) = A(i) }",
     r"reading 'C' before it is defined", 1, 45),
    ("self-read-first", A + "B(i) = B(i) + A(i) }", r"reading 'B' before it is defined", 1, 35),
    ("local-without-init", "def f(float(N) A) -> (B) local (T) { T(i) += A(i)\n B(i) = T(i) }",
     r"local 'T' starts uninitialized.*'\+=!'", 1, 38),
    ("assign-with-reduction", "def f(float(N,K) A) -> (B) { B(i) = A(i, k) }",
     r"'=' does not specify a reduction.*index 'k'", 1, 42),
    ("self-read-shifted", A + "B(i) = A(i)\n B(i) = B(i - 1) + A(i) }",
     r"each element is written by one statement, but B_0 and B_1 both write B\(\d+\)", 2, 2),
    ("read-then-rewrite", "def f(float(N) A) -> (B, C) { B(i) = A(i)\n C(i) = B(i)\n"
     " B(i) = A(i) * 2.0 }", r"B_1 writes 'B' after C_0 \(line 2\) read it", 3, 2),
    ("cycle", "def f(float(N) A) -> (B, C) { B(i) = A(i)\n C(i) = B(i)\n B(i) = C(i) }",
     r"cycle between tensors 'C' and 'B'", 3, 2),
    ("read-in-bound", "def f(float(N) A, int32 n) -> (B) { B(i) +=! A(i) where i in 0:n }",
     r"where bound cannot read a tensor \('n'\)", 1, 64),
    ("read-in-bound-let", A + "B(i) = A(i) where x = A(0), i in 0:x }",
     r"where bound cannot read a tensor \(let 'x'", 1, 63),
    ("range-twice", A + "B(i) = A(i) where i in 0:N, i in 0:3 }", r"'i' is constrained twice",
     1, 56),
    ("let-and-range", A + "B(i) = x where x = A(i), x in 0:3 }", r"'x' is constrained twice",
     1, 53),
    ("cyclic-bounds", "def f(float(N,N) A) -> (B) { B(i) +=! A(i,j) where i in 0:j, j in 0:i }",
     r"cyclic where bounds: i -> j -> i", 1, 52),
    ("self-bound", A + "B(i) = A(i) where i in 0:i }", r"cyclic where bounds: i -> i", 1, 46),
    ("builtin-declared", "def f(float(N) exp) -> (B) { B(i) = exp(i) }",
     r"'exp' is a builtin function and cannot be declared", 1, 7),
    ("builtin-output", "def f(float(N) A) -> (sqrt) { sqrt(i) = A(i) }",
     r"'sqrt' is a builtin", 1, 23),
    ("index-squared", A + "B(i) = A(i*i) }", r"index 0 of 'A' is not affine.*product", 1, 37),
    ("index-product", "def f(float(N,N) A) -> (B) { B(i) +=! A(i*j, j) }", r"not affine", 1, 41),
    ("size-times-index", "def f(float(N) A, float(S) s) -> (B) { B(i) = A(S*i) }",
     r"size 'S' is not a constant; bind it at compile time with sizes=\{'S': ...\}", 1, 49),
    ("index-div-size", "def f(float(N) A, float(S) s) -> (B) { B(i) = A(i / S) }",
     r"sizes=", 1, 53),
    ("cannot-infer", A + "B(i) = 1.0 }", r"could not infer the range of index 'i'.*where", 1, 30),
    ("cannot-infer-typo", "def f(float(N) A, float alpha) -> (B) { B(i) +=! A(i) * alpah }",
     r"(?s)could not infer the range of index 'alpah'.*typo for 'alpha'", 1, 57),
    ("nonzero-lower", A + "B(i) = A(i - 1) }", r"index 'i' of 'B' starts at 1, not 0", 1, 30),
    ("cond-not-bool", A + "B(i) = A(i) ? 1.0 : 0.0 }", r"condition of '\?:' must be bool", 1, 35),
    ("and-not-bool", A + "B(i) = (A(i) && A(i) > 0) ? 1.0 : 0.0 }", r"operands of '&&' must be",
     1, 36),
    ("not-not-bool", A + "B(i) = !A(i) }", r"operand of '!' must be bool", 1, 36),
    ("float-index", A + "B(i) = A(1.5) + A(i) }", r"index must be integral, not float32", 1, 37),
    ("float-bound", A + "B(i) +=! A(i) * r where r in 0:2.5 }", r"bound must be integral", 1, 59),
    ("int32-overflow", A + "B(i) = A(i) + 2147483648 }", r"does not fit in int32", 1, 42),
    ("too-deep-parens", A + "B(i) = " + "(" * 300 + "A(i)" + ")" * 300 + "}",
     r"nested more than 200 levels", 1, None),
    ("too-deep-chain", A + "B(i) = " + "+".join(["A(i)"] * 3000) + "}", r"nested more than 200",
     1, 35),
    ("too-deep-unary", A + "B(i) = " + "-" * 3000 + "A(i) }", r"nested more than 200", 1, None),
    ("narrowing", "def f(float(N) A) -> (int32(N) B) { B(i) = A(i) }",
     r"'B' has type int32 but the right-hand side is float32.*explicit cast", 1, 44),
    ("narrowing-later", A + "B(i) = int32(A(i))\n B(i) = A(i) }", r"narrower type", 2, 9),
    ("builtin-arity", A + "B(i) = fmax(A(i)) }", r"'fmax' takes 2 argument\(s\), got 1", 1, 35),
    ("minmax-arity", A + "B(i) = min(A(i)) }", r"'min' takes exactly two arguments", 1, 43),
    ("declared-dims", "def f(float(N) A, float(M) C) -> (float(M) B) { B(i) = A(i) }",
     r"output 'B' is declared with dim 0 = M but B_0 gives it extent N", 1, 35),
    ("unknown-dim", "def f(float(N) A) -> (float(P) B) { B(i) = A(i) }", r"unknown size 'P'",
     1, 29),
    ("bare-tensor", A + "B(i) = A + 1.0 }", r"tensor 'A' has rank 1; index it", 1, 35),
    ("call-size", A + "B(i) = A(i) * N(i) }", r"'N' is not a tensor or a function", 1, 42),
    ("later-outside-shape", "def f(float(N) A, float(M) C) -> (B) { B(i) = A(i)\n B(i) = C(i) }",
     r"B_1 writes 'B' outside its shape \(N\)", 2, 2),
    ("param-no-default", "def f<S>(float(N) A) -> (B) { B(i) = A(S*i) }",
     r"parameter 'S' has no default", 1, 7),
    ("duplicate-param", "def f<S=1, S=2>(float(N) A) -> (B) { B(i) = A(i) }",
     r"duplicate parameter 'S'", 1, 12),
    ("param-is-size", "def f<N=1>(float(N) A) -> (B) { B(i) = A(i) }",
     r"size 'N' is also a <...> parameter", 1, 18),
    ("size-is-tensor", "def f(float(N) N) -> (B) { B(i) = N(i) }", r"'N' is already a size name",
     1, 7),
    ("range-on-size", A + "B(i) = A(i) where N in 0:3 }", r"cannot give a range to 'N'", 1, 46),
    ("let-before-def", A + "B(i) = A(i) where y = x, x = 1 }", r"let 'x' is used before", 1, 50),
    ("pad-rank", A + "B(i) = A(i - 1) where pad A(1, 1) }", r"'A' has rank 1 but pad gives 2",
     1, 54),
    ("pad-unknown", A + "B(i) = A(i) where pad Q(1) }", r"pad of unknown tensor 'Q'", 1, 50),
    ("pad-index", A + "B(i) = A(i) where pad A(i) }", r"unknown size 'i'", 1, 52),
    ("pad-negative", A + "B(i) = A(i) where pad A(-1) }", r"pad width must be >= 0", 1, 52),
    ("pad-twice", A + "B(i) = A(i) where pad A(1), pad A(2) }", r"padded twice", 1, 60),
    ("lhs-is-tensor", A + "B(A) = 1.0 }", r"LHS index 'A' is the name of a tensor", 1, 30),
    ("bound-not-affine", "def f(float(N,N) A) -> (B) { B(i) +=! A(i, j) where j in 0:i*i }",
     r"not affine", 1, 60),
    ("zero-divisor", A + "B(i) = A(i / 0) }", r"divisor .* must be a positive constant", 1, 41),
]


@pytest.mark.parametrize(("source", "message", "line", "col"),
                         [c[1:] for c in ERRORS], ids=[c[0] for c in ERRORS])
def test_language_errors(source, message, line, col):
    with pytest.raises(LanguageError, match=message) as info:
        build_program(source)
    err = info.value
    assert err.line == line
    if col is not None:
        assert err.col == col
    if line is not None:
        assert f"line {line}, column {err.col}:" in str(err) and "^" in str(err)


def test_internal_messages_never_leak():
    for c in ERRORS:
        with pytest.raises(LanguageError) as info:
            build_program(c[1])
        assert "internal error" not in str(info.value)


def test_def_selection():
    two = A + "B(i) = A(i) }\ndef g(float(N) A) -> (B) { B(i) = A(i) }"
    assert def_names(two) == ["f", "g"]
    assert build_program(two, "g").name == "g"
    with pytest.raises(LanguageError, match=r"several defs \(f, g\).*name="):
        build_program(two)
    with pytest.raises(LanguageError, match=r"no def named 'h'.*f, g"):
        build_program(two, "h")
    with pytest.raises(LanguageError, match="duplicate def name"):
        def_names(A + "B(i) = A(i) }\n" + A + "B(i) = A(i) }")


def test_size_binding_errors():
    src = "def f<S=1>(float(N,M) A) -> (B) { B(i) = A(i, 0) }"
    with pytest.raises(OptionError, match=r"unknown size\(s\) 'Q'.*valid names: S, N, M"):
        build_program(src, sizes={"Q": 3})
    with pytest.raises(ShapeError, match=r"size N = -1 \(input 'A', dim 0\) must be >= 0"):
        build_program(src, sizes={"N": -1})
    with pytest.raises(ShapeError, match=r"parameter S = -1 must be >= 0"):
        build_program(src, sizes={"S": -1})
    with pytest.raises(OptionError, match="must be an integer"):
        build_program(src, sizes={"N": 2.5})
    conv = ("def c(float(H) I, float(KH) K) -> (O) { O(h) +=! I(h + r) * K(r) }")
    with pytest.raises(ShapeError, match=r"output 'O' dim 0 \(index 'h'\) has negative extent "
                       r"-2 with H=3, KH=6"):
        build_program(conv, sizes={"H": 3, "KH": 6})
    with pytest.raises(ShapeError, match="negative extent -1"):
        build_program("def c(float(3) I, float(5) K) -> (O) { O(h) +=! I(h + r) * K(r) }")


def test_sizes_required_error():
    with pytest.raises(SizesRequiredError, match=r"sizes=\{'S': ...\}"):
        build_program("def f(float(N) A, float(S) s) -> (B) { B(i) = A(S*i) }")
    with pytest.raises(LanguageError) as info:
        build_program(A + "B(i) = A(i*i) }")
    assert not isinstance(info.value, SizesRequiredError)


def test_warnings():
    with pytest.warns(PolyoptWarning, match=r"(?s)B_1 re-initializes 'B'.*line 2, column 2"):
        build_program("def f(float(N,K) A) -> (B) { B(i) +=! A(i,k)\n B(i) +=! A(i,k) }")
    with pytest.warns(PolyoptWarning, match=r"(?s)LHS index 'N' shadows the size 'N'.*column 30"):
        p = build_program(A + "B(N) = A(N) }")
    assert p.stmts[0].iters == ("N",)
    with pytest.warns(PolyoptWarning, match=r"'3E-5' is float32 here"):
        p = build_program(A + "B(i) = A(i) + 3E-5 }")
    assert p.stmts[0].rhs.b.dtype == "float32"


def test_messages_are_single_language_errors():
    # the message of a LanguageError shows exactly one caret line
    with pytest.raises(LanguageError) as info:
        build_program(A + "B(i) = A(i*i) }")
    assert len(re.findall(r"\^", str(info.value))) == 1


def test_statements_that_feed_no_output_are_dropped_with_a_warning() -> None:
    src = """def f(float(N) x) -> (y) local (t, u) {
    t(i) = x(i) * 2
    u(i) = t(i) + 1
    y(i) = x(i) + 3
}"""
    with pytest.warns(PolyoptWarning, match=r"local\(s\) t, u feed no output; "
                                                    r"statement\(s\) t_0, u_0 are dropped"):
        kernel = polyopt.compile(src)
    assert [s.name for s in kernel.program.stmts] == ["y_0"]
    assert kernel.program.locals == ()
    np.testing.assert_array_equal(kernel(np.ones(4, np.float32)), np.full(4, 4, np.float32))


NESTINGS = {"call": "exp({})", "parens": "({} + 1)", "unary": "-{}", "minmax": "max({}, 1.0)",
            "cast": "float({})", "ternary": "({} > 0 ? {} : 1.0)"}


@pytest.mark.cc
@pytest.mark.parametrize("kind", NESTINGS)
def test_one_nesting_limit_for_every_form(kind: str) -> None:
    """Nesting just under the limit compiles, runs and interprets; just over it is a
    LanguageError with a caret, whatever the form (calls hit RecursionError before)."""
    def nest(levels: int) -> str:
        e = "x(i)"
        for _ in range(levels):
            e = NESTINGS[kind].replace("{}", e, 1).replace("{}", "x(i)")
        return f"def f(float(N) x) -> (o) {{ o(i) = {e} }}"

    x = np.full(3, 0.5, np.float32)
    ok = nest(95 if kind == "ternary" else 190)  # a ternary nests two levels at a time
    for target in ("c", "cuda-emulated"):
        kernel = polyopt.compile(ok, target=target)
        kernel(x)
    evaluate(kernel.program, [x], {})
    for levels in (205, 2000):
        with pytest.raises(LanguageError, match="nested more than 200 levels") as info:
            polyopt.compile(nest(levels))
        assert "^" in str(info.value)
