"""Recursive-descent parser: source text to ``syntax.File`` (reference §2, extensions §5)."""

from __future__ import annotations

import contextlib
import difflib
import sys
from collections.abc import Iterator
from dataclasses import replace

from polyopt.dtypes import TYPE_NAMES
from polyopt.errors import LanguageError
from polyopt.lang import syntax as S
from polyopt.lang.lexer import Token, tokenize

# The one limit on nesting (parentheses, calls, casts, unary operators, operator chains):
# deeper expressions are a LanguageError, never a RecursionError from a later stage.
MAX_DEPTH = 200
# Python frames one level of nesting may take in the parser (expr, binary, unary, primary,
# exprs and a right operand's binary) or in a later stage's walk over the tree.
FRAMES_PER_LEVEL = 8

_BINARY_PREC = {
    "||": 1, "&&": 2,
    "<": 3, ">": 3, "<=": 3, ">=": 3, "==": 3, "!=": 3,
    "+": 4, "-": 4, "*": 5, "/": 5, "%": 5,
}


def parse(source: str) -> S.File:
    """Parse a whole file; an empty file (no def) is an error."""
    p = Parser(source)
    with stack_room():
        f = p.file()
    if not f.defs:
        raise LanguageError("empty source: expected at least one 'def'", source, None)
    return f


@contextlib.contextmanager
def stack_room() -> Iterator[None]:
    """Room on Python's stack for a walk over an expression nested ``MAX_DEPTH`` deep, above
    what the caller already uses (the default limit of 1000 frames is not enough for the
    parser at that depth)."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(old + MAX_DEPTH * FRAMES_PER_LEVEL)
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


class Parser:
    def __init__(self, source: str) -> None:
        self.source = source
        self.toks = tokenize(source)
        self.i = 0
        self.depth = 0

    # ------------------------------------------------------------ token helpers

    @property
    def tok(self) -> Token:
        return self.toks[self.i]

    def peek(self, k: int = 1) -> Token:
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def at(self, text: str) -> bool:
        t = self.tok
        return t.kind in ("punct", "keyword", "assign") and t.text == text

    def accept(self, text: str) -> Token | None:
        if self.at(text):
            return self.advance()
        return None

    def advance(self) -> Token:
        t = self.tok
        if t.kind != "eof":
            self.i += 1
        return t

    def expect(self, text: str, what: str = "") -> Token:
        if not self.at(text):
            self.fail(f"expected '{text}'{what}")
        return self.advance()

    def ident(self, what: str) -> Token:
        if self.tok.kind != "ident":
            self.fail(f"expected {what}")
        return self.advance()

    def fail(self, message: str, tok: Token | None = None) -> None:
        t = tok or self.tok
        found = "end of input" if t.kind == "eof" else f"'{t.text}'"
        raise LanguageError(f"{message}, found {found}", self.source, t.pos)

    # ------------------------------------------------------------ defs

    def file(self) -> S.File:
        defs = []
        while self.tok.kind != "eof":
            if not self.at("def"):
                self.fail("expected 'def'")
            defs.append(self.def_())
        return S.File(tuple(defs))

    def def_(self) -> S.Def:
        start = self.expect("def")
        name = self.ident("a def name").text
        params = self.size_params() if self.at("<") else ()
        self.expect("(", " after the def name")
        inputs = self.decl_list(")", typed=True)
        self.expect("->", " after the inputs")
        self.expect("(", " around the outputs")
        outputs = self.decl_list(")", typed=False)
        locals_: tuple[S.TensorDecl, ...] = ()
        if self.tok.is_("ident", "local") and self.peek().is_("punct", "("):
            self.advance()
            self.advance()
            locals_ = self.decl_list(")", typed=False)
        self.expect("{", " to open the def body")
        stmts = []
        while not self.at("}"):
            if self.tok.kind == "eof":
                self.fail("expected '}' to close the def body")
            stmts.append(self.statement())
        self.advance()
        return S.Def(start.pos, name, params, inputs, outputs, locals_, tuple(stmts))

    def size_params(self) -> tuple[S.SizeParam, ...]:
        self.expect("<")
        params = []
        while True:
            t = self.ident("a size parameter name")
            default = None
            if self.accept("="):
                neg = self.accept("-") is not None
                if self.tok.kind != "int":
                    self.fail("expected an integer default")
                v = self.advance().value
                assert isinstance(v, int)
                default = -v if neg else v
            params.append(S.SizeParam(t.pos, t.text, default))
            if not self.accept(","):
                break
        self.expect(">", " after the size parameters")
        return tuple(params)

    def decl_list(self, close: str, typed: bool) -> tuple[S.TensorDecl, ...]:
        out: list[S.TensorDecl] = []
        if self.accept(close):
            return ()
        while True:
            out.append(self.decl(typed))
            if self.accept(close):
                return tuple(out)
            self.expect(",", f" or '{close}'")

    def decl(self, typed: bool) -> S.TensorDecl:
        start = self.tok
        type_ = None
        if start.kind == "keyword" and start.text in TYPE_NAMES:
            type_ = self.type_ref()
        elif start.kind == "ident" and (self.peek().kind == "ident"
                                        or self.peek().is_("punct", "(")):
            close = difflib.get_close_matches(start.text, list(TYPE_NAMES), n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            known = ", ".join(sorted(TYPE_NAMES))
            raise LanguageError(f"unknown type '{start.text}'{hint} (types: {known})",
                                self.source, start.pos)
        elif typed:
            raise LanguageError(f"input '{start.text}' needs a type, e.g. float(N) {start.text}",
                                self.source, start.pos)
        name = self.ident("a tensor name")
        pad = None
        if self.tok.is_("ident", "pad") and self.peek().is_("punct", "("):
            pad_tok = self.advance()
            pad = self.pad_spec(pad_tok, name.text)
        return S.TensorDecl(start.pos, type_, name.text, pad)

    def type_ref(self) -> S.TypeRef:
        t = self.advance()
        dims: list[S.Dim] = []
        if self.accept("("):
            while not self.at(")"):
                d = self.tok
                if d.kind == "ident":
                    dims.append(S.Dim(d.pos, d.text, None))
                elif d.kind == "int":
                    assert isinstance(d.value, int)
                    dims.append(S.Dim(d.pos, None, d.value))
                else:
                    self.fail("expected a size name or an integer dimension")
                self.advance()
                if not self.accept(","):
                    break
            self.expect(")", " after the dimensions")
        return S.TypeRef(t.pos, t.text, tuple(dims))

    # ------------------------------------------------------------ statements

    def statement(self) -> S.Statement:
        target = self.ident("a statement (a tensor name)")
        indices: list[S.Ident] = []
        if self.accept("("):
            while not self.at(")"):
                t = self.tok
                if t.kind != "ident":
                    self.fail("expected an index name (LHS indices are identifiers)")
                indices.append(S.Ident(t.pos, t.text))
                self.advance()
                if not self.accept(","):
                    break
            self.expect(")", " after the LHS indices")
        if self.tok.kind != "assign":
            self.fail("expected an assignment operator (=, +=!, max=!, ...)")
        op = self.advance().text
        rhs = self.expr()
        if self.accept("<=>"):
            self.ident("a library op name")
            self.expect("(")
            if not self.at(")"):
                self.exprs()
            self.expect(")")
        where: list[S.WhereItem] = []
        if self.accept("where"):
            where.append(self.where_item())
            while self.accept(","):
                where.append(self.where_item())
        self.check_depth(rhs)
        for w in where:
            self.check_depth(_item_exprs(w))
        tpos = target.pos
        return S.Statement(tpos, S.Ident(tpos, target.text), tuple(indices), op, rhs,
                           tuple(where))

    def check_depth(self, node: S.Node | tuple[S.Node, ...]) -> None:
        for n in node if isinstance(node, tuple) else (node,):
            if S.depth(n) > MAX_DEPTH:
                raise LanguageError(f"expression nested more than {MAX_DEPTH} levels deep",
                                    self.source, n.pos)

    def where_item(self) -> S.WhereItem:
        t = self.tok
        if self.accept("exists"):
            return S.Exists(t.pos, self.expr())
        name = self.ident("a where item (i in lo:hi, x = e, exists e or pad T(...))")
        if name.text == "pad" and self.tok.kind == "ident" and self.peek().is_("punct", "("):
            tensor = self.advance()
            return S.Pad(t.pos, self.pad_spec(tensor, tensor.text))
        if self.accept("in"):
            lo = self.expr()
            self.expect(":", " between the bounds of a range")
            return S.Range(t.pos, name.text, lo, self.expr())
        if self.accept("="):
            return S.Let(t.pos, name.text, self.expr())
        self.fail(f"expected 'in' or '=' after '{name.text}' in a where clause")
        raise AssertionError  # unreachable

    def pad_spec(self, at: Token, tensor: str) -> S.PadSpec:
        self.expect("(", " after pad")
        widths: list[tuple[S.Node, S.Node]] = []
        while True:
            lo = self.expr()
            hi = self.expr() if self.accept(":") else lo
            widths.append((lo, hi))
            if not self.accept(","):
                break
        self.expect(")", " after the pad widths")
        fill = 0.0
        if self.accept("="):
            neg = self.accept("-") is not None
            if self.tok.kind not in ("int", "float"):
                self.fail("expected a number as the pad fill value")
            v = float(self.advance().value or 0)
            fill = -v if neg else v
        return S.PadSpec(at.pos, tensor, tuple(widths), fill)

    # ------------------------------------------------------------ expressions

    def exprs(self) -> tuple[S.Node, ...]:
        out = [self.expr()]
        while self.accept(","):
            out.append(self.expr())
        return tuple(out)

    def expr(self) -> S.Node:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise LanguageError(f"expression nested more than {MAX_DEPTH} levels deep",
                                self.source, self.tok.pos)
        try:
            cond = self.binary(1)
            if not self.accept("?"):
                return cond
            a = self.expr()
            self.expect(":", " in a conditional expression")
            return S.Ternary(cond.pos, cond, a, self.expr())
        finally:
            self.depth -= 1

    def binary(self, min_prec: int) -> S.Node:
        left = self.unary()
        while True:
            t = self.tok
            prec = _BINARY_PREC.get(t.text) if t.kind == "punct" else None
            if prec is None or prec < min_prec:
                return left
            self.advance()
            right = self.binary(prec + 1)
            left = S.BinaryE(left.pos, t.text, left, right)

    def unary(self) -> S.Node:
        t = self.tok
        if self.at("-") or self.at("!"):
            self.advance()
            self.depth += 1
            try:
                if self.depth > MAX_DEPTH:
                    raise LanguageError(f"expression nested more than {MAX_DEPTH} levels deep",
                                        self.source, t.pos)
                return S.UnaryE(t.pos, t.text, self.unary())
            finally:
                self.depth -= 1
        return self.primary()

    def primary(self) -> S.Node:
        t = self.tok
        if t.kind in ("int", "float"):
            self.advance()
            assert t.value is not None
            return S.Num(t.pos, t.text, t.value, t.kind == "float")
        if self.accept("("):
            e = self.expr()
            self.expect(")", " to close the parenthesis")
            return replace(e, pos=t.pos)
        if t.kind == "keyword" and t.text in TYPE_NAMES:
            self.advance()
            self.expect("(", f" after the type name '{t.text}' (a cast)")
            e = self.expr()
            self.expect(")", " to close the cast")
            return S.CastE(t.pos, t.text, e)
        if t.kind == "keyword" and t.text in ("min", "max"):
            self.advance()
            self.expect("(", f" after '{t.text}'")
            a = self.expr()
            self.expect(",", f" ('{t.text}' takes exactly two arguments)")
            b = self.expr()
            self.expect(")", f" ('{t.text}' takes exactly two arguments)")
            return S.BinaryE(t.pos, t.text, a, b)
        if t.kind == "ident":
            self.advance()
            if self.accept("("):
                args = () if self.at(")") else self.exprs()
                self.expect(")", " to close the argument list")
                return S.Apply(t.pos, t.text, args)
            return S.Name(t.pos, t.text)
        self.fail("expected an expression")
        raise AssertionError  # unreachable


def _item_exprs(item: S.WhereItem) -> tuple[S.Node, ...]:
    if isinstance(item, S.Let | S.Exists):
        return (item.value,)
    if isinstance(item, S.Range):
        return (item.lo, item.hi)
    return tuple(e for w in item.spec.widths for e in w)
