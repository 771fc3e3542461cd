"""Quasi-affine expressions over index variables and sizes, printed as isl text.

A ``Lin`` is ``sum(coeff * atom) + const`` where an atom is a name (index variable or size),
``Floor(num, den)`` (``floor(num/den)``) or ``MinMax("min"|"max", args)``. Construction keeps
things small: terms combine, exact divisions divide, and ``min``/``max`` of expressions that
differ by a constant pick one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import islpy as isl

from polyopt import ir


@dataclass(frozen=True)
class Floor:
    num: Lin
    den: int

    def __str__(self) -> str:
        n = str(self.num)
        simple = self.num.const == 0 and [c for _, c in self.num.terms] == [1]
        inner = n if simple and isinstance(self.num.terms[0][0], str) else f"({n})"
        return f"floor({inner}/{self.den})"


@dataclass(frozen=True)
class MinMax:
    op: str
    args: tuple[Lin, ...]

    def __str__(self) -> str:
        return f"{self.op}({', '.join(map(str, self.args))})"


Atom = str | Floor | MinMax


class Lin:
    """An immutable quasi-affine expression; terms keep their insertion order for printing."""

    __slots__ = ("const", "terms")

    def __init__(self, terms: Iterable[tuple[Atom, int]] = (), const: int = 0) -> None:
        merged: dict[Atom, int] = {}
        for atom, c in terms:
            merged[atom] = merged.get(atom, 0) + c
        self.terms: tuple[tuple[Atom, int], ...] = tuple(
            (a, c) for a, c in merged.items() if c != 0)
        self.const = const

    @staticmethod
    def var(name: str) -> Lin:
        return Lin(((name, 1),))

    @staticmethod
    def num(value: int) -> Lin:
        return Lin((), value)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Lin) and self.const == other.const
                and dict(self.terms) == dict(other.terms))

    def __hash__(self) -> int:
        return hash((frozenset(self.terms), self.const))

    def __repr__(self) -> str:
        return f"Lin({self})"

    # ------------------------------------------------------------ arithmetic

    def __add__(self, other: Lin | int) -> Lin:
        o = other if isinstance(other, Lin) else Lin.num(other)
        return Lin((*self.terms, *o.terms), self.const + o.const)

    def __neg__(self) -> Lin:
        return self.scale(-1)

    def __sub__(self, other: Lin | int) -> Lin:
        o = other if isinstance(other, Lin) else Lin.num(other)
        return self + (-o)

    def scale(self, k: int) -> Lin:
        return Lin(((a, c * k) for a, c in self.terms), self.const * k)

    def floordiv(self, d: int) -> Lin:
        """floor(self / d) for a positive integer d."""
        assert d > 0
        if d == 1:
            return self
        if not self.terms:
            return Lin.num(self.const // d)
        if all(c % d == 0 for _, c in self.terms):
            return Lin(((a, c // d) for a, c in self.terms), self.const // d)
        return Lin(((Floor(self, d), 1),))

    def ceildiv(self, d: int) -> Lin:
        return -((-self).floordiv(d))

    # ------------------------------------------------------------ queries

    @property
    def is_const(self) -> bool:
        return not self.terms

    def coeff(self, name: str) -> int:
        return dict(self.terms).get(name, 0)

    def names(self) -> set[str]:
        """All names, including those inside floor/min/max atoms."""
        out: set[str] = set()
        for a, _ in self.terms:
            if isinstance(a, str):
                out.add(a)
            elif isinstance(a, Floor):
                out |= a.num.names()
            else:
                for x in a.args:
                    out |= x.names()
        return out

    def top_names(self) -> set[str]:
        return {a for a, _ in self.terms if isinstance(a, str)}

    def compound_names(self) -> set[str]:
        """Names that occur inside floor/min/max atoms."""
        out: set[str] = set()
        for a, _ in self.terms:
            if not isinstance(a, str):
                out |= Lin(((a, 1),)).names()
        return out

    def without(self, names: Iterable[str]) -> Lin:
        return self.without_atoms(names)

    def without_atoms(self, atoms: Iterable[Atom]) -> Lin:
        drop = set(atoms)
        return Lin(((a, c) for a, c in self.terms if a not in drop), self.const)

    def subst(self, values: Mapping[str, Lin]) -> Lin:
        out = Lin.num(self.const)
        for a, c in self.terms:
            if isinstance(a, str):
                out = out + (values[a] if a in values else Lin.var(a)).scale(c)
            elif isinstance(a, Floor):
                out = out + a.num.subst(values).floordiv(a.den).scale(c)
            else:
                out = out + minmax(a.op, [x.subst(values) for x in a.args]).scale(c)
        return out

    # ------------------------------------------------------------ printing

    def __str__(self) -> str:
        parts: list[str] = []
        for a, c in self.terms:
            text = str(a)
            mag = abs(c)
            body = text if mag == 1 else f"{mag}*{text}"
            if not parts:
                parts.append(body if c > 0 else f"-{body}")
            else:
                parts.append(f"+ {body}" if c > 0 else f"- {body}")
        if not parts:
            return str(self.const)
        if self.const:
            parts.append(f"+ {self.const}" if self.const > 0 else f"- {-self.const}")
        return " ".join(parts)


def minmax(op: str, args: Iterable[Lin]) -> Lin:
    """min or max of affine expressions, simplified where the choice is constant."""
    flat: list[Lin] = []
    for x in args:
        inner = x.terms[0][0] if len(x.terms) == 1 and x.const == 0 else None
        if isinstance(inner, MinMax) and inner.op == op and x.terms[0][1] == 1:
            flat.extend(inner.args)
        else:
            flat.append(x)
    kept: list[Lin] = []
    for x in flat:
        for k, y in enumerate(kept):
            d = x - y
            if d.is_const:
                if (d.const < 0) == (op == "min") and d.const != 0:
                    kept[k] = x
                break
        else:
            kept.append(x)
    if len(kept) == 1:
        return kept[0]
    common = min(kept, key=lambda x: abs(x.const)).const
    if all(x.const == common for x in kept):
        return Lin(((MinMax(op, tuple(x - common for x in kept)), 1),), common)
    return Lin(((MinMax(op, tuple(kept)), 1),))


def box_bounds(e: Lin, ranges: Mapping[str, tuple[Lin, Lin]]) -> tuple[Lin, Lin]:
    """The smallest and largest value of ``e`` when each top-level name in ``ranges`` varies
    over its inclusive range (worst-case endpoints)."""
    lo = hi = e.without(ranges)
    for name, (rlo, rhi) in ranges.items():
        c = e.coeff(name)
        if c > 0:
            lo, hi = lo + rlo.scale(c), hi + rhi.scale(c)
        elif c < 0:
            lo, hi = lo + rhi.scale(c), hi + rlo.scale(c)
    return lo, hi


# ---------------------------------------------------------------- isl helpers

def params_text(sizes: Iterable[str]) -> str:
    return f"[{', '.join(sizes)}]"


def pw_aff(e: Lin, sizes: tuple[str, ...]) -> isl.PwAff:
    return isl.PwAff(f"{params_text(sizes)} -> {{ [({e})] }}")


def context(sizes: tuple[str, ...]) -> isl.Set:
    cons = " and ".join(f"{s} >= 0" for s in sizes)
    return isl.Set(f"{params_text(sizes)} -> {{ : {cons or '0 = 0'} }}")


def always_equal(a: Lin, b: Lin, sizes: tuple[str, ...]) -> bool:
    """Whether a == b for all sizes >= 0."""
    if a == b:
        return True
    return context(sizes).is_subset(pw_aff(a, sizes).eq_set(pw_aff(b, sizes)))


# ---------------------------------------------------------------- from ir expressions

class NotAffine(Exception):
    """Raised by ``from_expr``; carries a message and the position of the culprit."""

    def __init__(self, message: str, pos: tuple[int, int] | None,
                 needs_sizes: bool = False) -> None:
        super().__init__(message)
        self.pos = pos
        self.needs_sizes = needs_sizes  # affine once some sizes are bound


def from_expr(e: ir.Expr, index: set[str] | frozenset[str]) -> Lin:
    """``e`` (integral, without reads) as a quasi-affine expression, or NotAffine."""
    if isinstance(e, ir.Const) and not isinstance(e.value, float):
        return Lin.num(int(e.value))
    if isinstance(e, ir.Var):
        return Lin.var(e.name)
    if isinstance(e, ir.Unary) and e.op == "-":
        return -from_expr(e.x, index)
    if isinstance(e, ir.Cast) and e.dtype in ("int32", "int64"):
        return from_expr(e.x, index)
    if isinstance(e, ir.Binary):
        return _binary(e, index)
    raise NotAffine(f"'{e}' is not an affine expression", e.pos)


def _binary(e: ir.Binary, index: set[str] | frozenset[str]) -> Lin:
    if e.op in ("+", "-", "*", "/", "%", "min", "max"):
        a, b = from_expr(e.a, index), from_expr(e.b, index)
    else:
        raise NotAffine(f"'{e}' is not an affine expression", e.pos)
    if e.op == "+":
        return a + b
    if e.op == "-":
        return a - b
    if e.op in ("min", "max"):
        return minmax(e.op, (a, b))
    if e.op == "*":
        if a.is_const:
            return b.scale(a.const)
        if b.is_const:
            return a.scale(b.const)
        raise NotAffine(_product_message(e, a, b, index), e.pos, _has_sizes(a, b, index))
    if not b.is_const:
        raise NotAffine(_product_message(e, a, b, index, "divisor"), e.b.pos,
                        _has_sizes(a, b, index))
    if b.const <= 0:
        raise NotAffine(f"the divisor in '{e}' must be a positive constant", e.b.pos)
    q = a.floordiv(b.const)
    return q if e.op == "/" else a - q.scale(b.const)


def _has_sizes(a: Lin, b: Lin, index: set[str] | frozenset[str]) -> bool:
    return bool((a.names() | b.names()) - set(index))


def _product_message(e: ir.Expr, a: Lin, b: Lin, index: set[str] | frozenset[str],
                     what: str = "product") -> str:
    sizes = sorted((a.names() | b.names()) - set(index))
    idx = (a.names() | b.names()) & set(index)
    if sizes:
        binding = ", ".join(f"'{s}': ..." for s in sizes)
        return (f"'{e}' is not affine: size {', '.join(map(repr, sizes))} is not a constant; "
                f"bind it at compile time with sizes={{{binding}}} (or a <...> parameter)")
    kinds = "index variables" if idx else "terms"
    return f"'{e}' is not affine: a {what} of {kinds} (only constant factors are allowed)"
