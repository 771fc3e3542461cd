"""Expressions to C: statement right-hand sides (ir.Expr) and isl AST expressions.

Every name that reaches C goes through ``cname``, which validates it and prefixes it by kind
(``t_`` tensor, ``i_`` index, ``s_`` size, ``e_`` extent), so TC identifiers such as ``for``
or ``restrict`` cannot collide with C keywords or with each other.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

import islpy as isl

from polyopt import ir
from polyopt.codegen.builtins import c_function
from polyopt.dtypes import DTYPES, promote
from polyopt.errors import CodegenError

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_ITER = re.compile(r"c[0-9]+\Z")
PREFIX = {"tensor": "t_", "index": "i_", "size": "s_", "extent": "e_", "gather": "g_"}


def cname(kind: str, name: str) -> str:
    """The C spelling of a user-visible name; refuses anything that is not an identifier."""
    if not _IDENT.match(name):
        raise CodegenError(f"refusing to emit {kind} name {name!r}: not a C identifier")
    return PREFIX[kind] + name


def ctype(dtype: str) -> str:
    return DTYPES[dtype].c


@dataclass(frozen=True)
class Types:
    """How a target spells TC's types. Most are native C types; a 16-bit float the target
    cannot compute on (``bits``) is stored as its bit pattern (``uint16_t``), converted to
    float by every load and rounded back by every store (the prelude's ``po_<type>_load``,
    ``_store`` and ``_round``), and computed on in float."""

    bits: frozenset[str] = frozenset({"bfloat16"})

    def value(self, dtype: str) -> str:
        """The C type values of ``dtype`` are computed in."""
        return "float" if dtype in self.bits else DTYPES[dtype].c

    def storage(self, dtype: str) -> str:
        """The C type of a ``dtype`` tensor's elements in memory."""
        return "uint16_t" if dtype in self.bits else DTYPES[dtype].c

    def arith(self, dtype: str) -> str:
        """The type whose prelude helpers (``po_max_<type>``...) compute ``dtype``."""
        return "float32" if dtype in self.bits else dtype

    def load(self, dtype: str, text: str) -> str:
        return f"po_{dtype}_load({text})" if dtype in self.bits else text

    def store(self, dtype: str, text: str) -> str:
        return f"po_{dtype}_store({text})" if dtype in self.bits else text

    def literal(self, value: int | float | bool, dtype: str) -> str:
        return literal(value, self.arith(dtype))

    def convert(self, text: str, src: str, dst: str) -> str:
        """C ``text`` of type ``src`` converted to ``dst``: a float to an integer saturates
        and maps NaN to 0 (the prelude's ``po_cvt``), where a C cast would be undefined; a
        conversion to a ``bits`` type rounds to it."""
        if dst in self.bits:
            return f"po_{dst}_round(((float)({text})))"
        src = self.arith(src)
        if DTYPES[src].is_float and DTYPES[dst].kind in "iu":
            return f"po_cvt_{dst}_{src}({text})"
        return f"(({self.value(dst)})({text}))"


C_TYPES = Types()


def literal(value: int | float | bool, dtype: str) -> str:
    """A C literal of ``dtype``."""
    d = DTYPES[dtype]
    if d.kind == "b":
        return "true" if value else "false"
    if d.is_float:
        v = float(value)
        if math.isnan(v):
            text = "NAN"
        elif math.isinf(v):
            text = "INFINITY" if v > 0 else "(-INFINITY)"
        else:
            text = repr(v) + {"float64": "", "longdouble": "L"}.get(dtype, "f")
        return f"(({d.c}){text})" if dtype == "float16" else text
    v = int(value)
    if d.kind == "u":
        return f"(({d.c}){v}ULL)"
    if v == -(2 ** 63):
        return "((int64_t)(-9223372036854775807LL - 1))"
    return f"(({d.c}){v}LL)"


class RhsPrinter:
    """Prints a statement's right-hand side. ``load(read)`` renders a tensor read."""

    def __init__(self, load: Callable[[ir.Read], str], types: Types = C_TYPES) -> None:
        self.load = load
        self.types = types

    def expr(self, e: ir.Expr) -> str:
        method = getattr(self, f"_{type(e).__name__.lower()}")
        return method(e)

    def cast(self, e: ir.Expr, dtype: str) -> str:
        text = self.expr(e)
        return text if e.dtype == dtype else self.types.convert(text, e.dtype, dtype)

    def _const(self, e: ir.Const) -> str:
        return self.types.literal(e.value, e.dtype)

    def _var(self, e: ir.Var) -> str:
        return f"(({self.types.value(e.dtype)}){cname(e.kind, e.name)})"

    def _read(self, e: ir.Read) -> str:
        return self.load(e)

    def _cast(self, e: ir.Cast) -> str:
        return self.types.convert(self.expr(e.x), e.x.dtype, e.dtype)

    def _unary(self, e: ir.Unary) -> str:
        if e.op == "!":
            return f"(!({self.expr(e.x)}))"
        return f"(({self.types.value(e.dtype)})(-{self.cast(e.x, e.dtype)}))"

    def _select(self, e: ir.Select) -> str:
        return f"(({self.expr(e.cond)}) ? {self.cast(e.a, e.dtype)} : {self.cast(e.b, e.dtype)})"

    def _call(self, e: ir.Call) -> str:
        fn, comp = c_function(e.fn, self.types.arith(e.dtype))
        args = ", ".join(f"(({comp})({self.expr(a)}))" for a in e.args)
        return f"(({self.types.value(e.dtype)}){fn}({args}))"

    def _binary(self, e: ir.Binary) -> str:
        op = e.op
        if op in ("&&", "||"):
            return f"(({self.expr(e.a)}) {op} ({self.expr(e.b)}))"
        if op in ("<", ">", "<=", ">=", "==", "!="):
            t = promote(e.a.dtype, e.b.dtype)
            return f"({self.cast(e.a, t)} {op} {self.cast(e.b, t)})"
        a, b = self.cast(e.a, e.dtype), self.cast(e.b, e.dtype)
        t = self.types.arith(e.dtype)
        if op in ("min", "max"):
            return f"po_{op}_{t}({a}, {b})"
        if op == "%" or (op == "/" and not DTYPES[t].is_float):
            fn = "fmod" if op == "%" and DTYPES[t].is_float else ("div" if op == "/" else "mod")
            return f"po_{fn}_{t}({a}, {b})"
        return f"(({self.types.value(e.dtype)})({a} {op} {b}))"


_AST_BINARY = {
    isl.ast_expr_op_type.add: "+", isl.ast_expr_op_type.sub: "-",
    isl.ast_expr_op_type.mul: "*", isl.ast_expr_op_type.div: "/",
    isl.ast_expr_op_type.pdiv_q: "/", isl.ast_expr_op_type.pdiv_r: "%",
    isl.ast_expr_op_type.zdiv_r: "%", isl.ast_expr_op_type.eq: "==",
    isl.ast_expr_op_type.le: "<=", isl.ast_expr_op_type.lt: "<",
    isl.ast_expr_op_type.ge: ">=", isl.ast_expr_op_type.gt: ">",
    isl.ast_expr_op_type.and_: "&&", isl.ast_expr_op_type.and_then: "&&",
    isl.ast_expr_op_type.or_: "||", isl.ast_expr_op_type.or_else: "||",
}


class AstExprPrinter:
    """Prints isl AST expressions (loop bounds, guards, statement arguments) as C ``long``."""

    def __init__(self, sizes: frozenset[str], rename: dict[str, str] | None = None) -> None:
        self.sizes = sizes
        self.rename = rename or {}  # iterators printed as other expressions

    def expr(self, e: isl.AstExpr, top: bool = False) -> str:
        kind = e.get_type()
        if kind == isl.ast_expr_type.int:
            return f"{e.int_get_val().to_python()}L"
        if kind == isl.ast_expr_type.id:
            return self.ident(e.get_id().get_name())
        return self._op(e, top)

    def ident(self, name: str) -> str:
        if name in self.rename:
            return self.rename[name]
        if name in self.sizes:
            return cname("size", name)
        if _ITER.match(name):
            return name
        raise CodegenError(f"unexpected name {name!r} in an isl AST expression")

    def args(self, e: isl.AstExpr) -> list[str]:
        return [self.expr(e.get_op_arg(i)) for i in range(e.get_op_n_arg())]

    def _op(self, e: isl.AstExpr, top: bool) -> str:
        op = e.get_op_type()
        args = self.args(e)
        if op in _AST_BINARY:
            text = f" {_AST_BINARY[op]} ".join(args)
            return text if top else f"({text})"
        if op == isl.ast_expr_op_type.minus:
            return f"(-{args[0]})"
        if op in (isl.ast_expr_op_type.min, isl.ast_expr_op_type.max):
            fn = "po_min_int64" if op == isl.ast_expr_op_type.min else "po_max_int64"
            out = args[0]
            for a in args[1:]:
                out = f"{fn}({out}, {a})"
            return out
        if op == isl.ast_expr_op_type.fdiv_q:
            return f"po_floord({args[0]}, {args[1]})"
        if op in (isl.ast_expr_op_type.cond, isl.ast_expr_op_type.select):
            return f"({args[0]} ? {args[1]} : {args[2]})"
        raise CodegenError(f"unsupported isl AST operation {op} in {e.to_C_str()}")
