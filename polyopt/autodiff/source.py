"""The gradient def as data, and its TC text.

A ``GradDef`` is what the derivation builds: statements over ``ir.Expr`` trees with explicit
``where`` ranges and pads. ``str(GradDef)`` prints it as TC source that polyopt's own front end
reads back (the printer parenthesizes by TC's precedence, §2.2 of the language reference, so
the text stays close to what a person would write).
"""

from __future__ import annotations

from dataclasses import dataclass

from polyopt import ir


@dataclass(frozen=True)
class PadSpec:
    """``pad T(before:after, ...) = fill`` of one statement."""

    tensor: str
    widths: tuple[tuple[ir.Expr, ir.Expr], ...]
    fill: float = 0.0

    def __str__(self) -> str:
        dims = []
        for lo, hi in self.widths:
            a, b = expr_text(lo), expr_text(hi)
            dims.append(a if a == b else f"{a}:{b}")
        fill = "" if self.fill == 0.0 else f" = {_number(self.fill)}"
        return f"pad {self.tensor}({', '.join(dims)}){fill}"


@dataclass(frozen=True)
class GStmt:
    """``tensor(lhs) op rhs where ranges, pads`` (``ranges``: ``v in lo:hi``)."""

    tensor: str
    lhs: tuple[str, ...]
    op: str  # TC spelling: "=", "+=!", "+=", "max=!", ...
    rhs: ir.Expr
    ranges: tuple[tuple[str, ir.Expr, ir.Expr], ...] = ()
    pads: tuple[PadSpec, ...] = ()
    comment: str = ""

    def lines(self) -> list[str]:
        head = f"{self.tensor}({', '.join(self.lhs)})" if self.lhs else self.tensor
        text = f"    {head} {self.op} {expr_text(self.rhs)}"
        items = [f"{v} in {expr_text(lo)}:{expr_text(hi)}" for v, lo, hi in self.ranges]
        items += [str(p) for p in self.pads]
        out = [f"    # {self.comment}"] if self.comment else []
        if not items:
            return [*out, text]
        where = f"where {', '.join(items)}"
        if len(text) + len(where) + 1 <= 100:
            return [*out, f"{text} {where}"]
        return [*out, text, f"        {where}"]


@dataclass(frozen=True)
class GradDef:
    name: str
    inputs: tuple[tuple[str, str, tuple[str, ...]], ...]  # (name, dtype, dims)
    outputs: tuple[str, ...]
    locals: tuple[str, ...]
    stmts: tuple[GStmt, ...]
    header: str = ""

    def __str__(self) -> str:
        params = ", ".join(f"{dt}({', '.join(dims)}) {n}" if dims else f"{dt} {n}"
                           for n, dt, dims in self.inputs)
        local = f" local ({', '.join(self.locals)})" if self.locals else ""
        lines = [f"# {h}" for h in self.header.splitlines()]
        lines.append(f"def {self.name}({params}) -> ({', '.join(self.outputs)}){local} {{")
        for s in self.stmts:
            lines += s.lines()
        lines.append("}")
        return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- expressions

# TC precedence (language reference §2.2), loosest first.
_PREC = {"?": 1, "||": 2, "&&": 3, "<": 4, ">": 4, "<=": 4, ">=": 4, "==": 4, "!=": 4,
         "+": 5, "-": 5, "*": 6, "/": 6, "%": 6}
_UNARY, _ATOM = 7, 8
_FLAT = {("+", "+"), ("+", "-"), ("*", "*")}


def expr_text(e: ir.Expr) -> str:
    return _text(e)[0]


def _number(v: float) -> str:
    text = repr(float(v))
    return text if ("." in text or "e" in text) else f"{text}.0"


def _text(e: ir.Expr) -> tuple[str, int]:
    """The text of ``e`` and the precedence of its outermost operator."""
    if isinstance(e, ir.Const):
        if isinstance(e.value, bool):
            return ("(0 == 0)" if e.value else "(0 != 0)"), _ATOM
        text = _number(e.value) if isinstance(e.value, float) else str(e.value)
        return text, (_UNARY if text.startswith("-") else _ATOM)
    if isinstance(e, ir.Var):
        return e.name, _ATOM
    if isinstance(e, ir.Read):
        if not e.indices:
            return e.tensor, _ATOM
        return f"{e.tensor}({', '.join(expr_text(i) for i in e.indices)})", _ATOM
    if isinstance(e, ir.Unary):
        return f"{e.op}{_wrap(e.x, _UNARY)}", _UNARY
    if isinstance(e, ir.Binary):
        if e.op in ("min", "max"):
            return f"{e.op}({expr_text(e.a)}, {expr_text(e.b)})", _ATOM
        p = _PREC[e.op]
        # Left-associative: an operand of the same level on the right keeps its parentheses
        # (a - (b - c), and 2 * (y / 2), which integer division makes differ from 2 * y / 2),
        # except a sum under + and a product under *; comparisons keep both.
        left = _wrap(e.a, p + 1 if p == 4 else p)
        flat = isinstance(e.b, ir.Binary) and (e.op, e.b.op) in _FLAT
        right = _wrap(e.b, p if flat else p + 1)
        return f"{left} {e.op} {right}", p
    if isinstance(e, ir.Select):
        # a ? (b ? c : d) : e parses without the parentheses, but reads better with them
        return f"{_wrap(e.cond, 2)} ? {_wrap(e.a, 2)} : {_wrap(e.b, 2)}", 1
    if isinstance(e, ir.Call):
        return f"{e.fn}({', '.join(expr_text(a) for a in e.args)})", _ATOM
    if isinstance(e, ir.Cast):
        return f"{e.dtype}({expr_text(e.x)})", _ATOM
    raise AssertionError(f"unknown expression node {type(e).__name__}")


def _wrap(e: ir.Expr, at_least: int) -> str:
    text, p = _text(e)
    return text if p >= at_least else f"({text})"
