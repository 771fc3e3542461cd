"""Index expressions of the gradient def: linear forms, and isl's affine functions as TC.

``Lin`` keeps an index expression as a sum of variables with integer coefficients, a constant
and non-linear terms (``(f / 3) * 2``), so the inverse of an access can solve for one
variable and the printed result reads like hand-written TC (``h + 1 - 2 * r_kh``).
``aff_expr`` and ``pw_expr`` turn the ranges and extents isl computes into TC expressions
(isl's ``floor(e/d)`` is TC's integer ``e / d``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import islpy as isl

from polyopt import ir
from polyopt.errors import NotDifferentiableError

_PARAM = isl.dim_type.param
Range = tuple[ir.Expr, ir.Expr]  # [lo, hi)


def ivar(name: str) -> ir.Var:
    return ir.Var("int32", name, "index")


def icst(v: int) -> ir.Const:
    return ir.Const("int32", v)


# ---------------------------------------------------------------- isl to expressions

def aff_expr(aff: isl.Aff) -> ir.Expr:
    """An integer-valued isl affine expression over parameters as a TC expression (isl's
    ``floor(e/d)`` is TC's integer ``e / d``)."""
    lin = Lin()
    for i in range(aff.dim(_PARAM)):
        c = _int(aff.get_coefficient_val(_PARAM, i))
        if c:
            lin = lin.plus(Lin({(str(aff.get_dim_name(_PARAM, i)), "size"): c}))
    for i in range(aff.dim(isl.dim_type.div)):
        c = _int(aff.get_coefficient_val(isl.dim_type.div, i))
        if c:
            div = aff.get_div(i)
            den = _int(div.get_denominator_val())
            num = aff_expr(div.scale_val(isl.Val(str(den))))
            lin = lin.plus(Lin(other=((c, ir.Binary("int32", "/", num, icst(den))),)))
    return lin.plus(Lin(const=_int(aff.get_constant_val()))).expr()


def set_range(s: isl.Set, context: isl.Set, what: str) -> Range:
    """``[lo, hi)`` of the one set dimension of ``s`` over its parameters."""
    lo = pw_expr(s.dim_min(0), context, f"the lower bound of {what}")
    hi = pw_expr(s.dim_max(0), context, f"the upper bound of {what}")
    return lo, tidy(ir.Binary("int32", "+", hi, icst(1)))


def _int(v: isl.Val) -> int:
    if not v.is_int():
        raise NotDifferentiableError(f"a range or extent is not integral ({v})")
    return int(v.to_python())


def pw_expr(pa: isl.PwAff, context: isl.Set, what: str, nonneg: bool = False) -> ir.Expr:
    """One affine expression for ``pa`` on ``context``: a piece equal to it everywhere
    (``min(floor((H-1)/3), floor((H-2)/3))`` is the second); with ``nonneg`` (pad widths),
    one that bounds it from above, a piece raised by a constant until it bounds them all
    and is >= 0 wherever ``pa`` is defined."""
    dom = pa.domain().intersect_params(context)
    pieces: list[isl.Aff] = []
    pa.foreach_piece(lambda _s, a: pieces.append(a))
    for a in pieces:
        whole = isl.PwAff.from_aff(a)
        exact = len(pieces) == 1 or dom.is_subset(pa.eq_set(whole))
        if exact and (not nonneg or dom.is_subset(whole.nonneg_set())):
            return aff_expr(a)
    if not nonneg:
        raise NotDifferentiableError(f"cannot write {what} ({pa}) as one affine expression")
    for a in pieces:
        whole = isl.PwAff.from_aff(a)
        shift = 0
        if len(pieces) > 1:
            gap = pa.sub(whole).intersect_params(context).max_val()
            if not gap.is_int():
                continue
            shift = max(0, int(gap.to_python()))
        low = whole.intersect_params(dom).min_val()
        if not low.is_int():
            continue
        shift = max(shift, -int(low.to_python()))
        expr = aff_expr(a)
        return expr if shift == 0 else tidy(ir.Binary("int32", "+", expr, icst(shift)))
    raise NotDifferentiableError(f"cannot write {what} ({pa}) as one affine expression")


# ---------------------------------------------------------------- linear forms

@dataclass(frozen=True)
class Lin:
    """``sum(c * var) + const + sum(other)``: an index expression, linear where it can be."""

    coefs: Mapping[tuple[str, str], int] = field(default_factory=dict)  # (name, kind) -> c
    const: int = 0
    other: tuple[tuple[int, ir.Expr], ...] = ()  # (c, non-linear term)

    def plus(self, o: Lin) -> Lin:
        coefs = dict(self.coefs)
        for k, c in o.coefs.items():
            coefs[k] = coefs.get(k, 0) + c
        return Lin({k: c for k, c in coefs.items() if c}, self.const + o.const,
                   self.other + o.other)

    def times(self, c: int) -> Lin:
        return Lin({k: v * c for k, v in self.coefs.items() if v * c}, self.const * c,
                   tuple((k * c, e) for k, e in self.other if k * c))

    def uses(self, name: str) -> bool:
        """Does ``name`` occur in a non-linear term?"""
        return any(isinstance(v, ir.Var) and v.name == name for _, e in self.other
                   for v in e.walk())

    def expr(self) -> ir.Expr:
        terms: list[tuple[int, ir.Expr]] = [(c, ir.Var("int32", n, k))
                                            for (n, k), c in self.coefs.items()]
        terms += list(self.other)
        if self.const:
            terms.append((self.const, icst(1)))
        terms.sort(key=lambda t: t[0] < 0)  # a positive term first: no leading minus
        out: ir.Expr | None = None
        for c, e in terms:
            mag = _scaled(abs(c), e)
            if out is None:
                out = mag if c > 0 else ir.Unary("int32", "-", mag)
            else:
                out = ir.Binary("int32", "+" if c > 0 else "-", out, mag)
        return out if out is not None else icst(0)


def _scaled(c: int, e: ir.Expr) -> ir.Expr:
    if isinstance(e, ir.Const):
        return icst(c * int(e.value))
    return e if c == 1 else ir.Binary("int32", "*", icst(c), e)


def linear(e: ir.Expr) -> Lin:
    if isinstance(e, ir.Const) and not isinstance(e.value, bool):
        return Lin(const=int(e.value))
    if isinstance(e, ir.Var):
        return Lin({(e.name, e.kind): 1})
    if isinstance(e, ir.Cast):
        return linear(e.x)
    if isinstance(e, ir.Unary) and e.op == "-":
        return linear(e.x).times(-1)
    if isinstance(e, ir.Binary) and e.op in ("+", "-"):
        return linear(e.a).plus(linear(e.b).times(1 if e.op == "+" else -1))
    if isinstance(e, ir.Binary) and e.op == "*":
        for x, y in ((e.a, e.b), (e.b, e.a)):
            if isinstance(x, ir.Const) and not isinstance(x.value, bool):
                return linear(y).times(int(x.value))
    if isinstance(e, ir.Binary) and e.op in ("/", "%") and isinstance(e.b, ir.Const):
        if e.b.value == 1:  # grouped convolutions with one filter per group: f / 1
            return linear(e.a) if e.op == "/" else Lin()
        e = ir.Binary(e.dtype, e.op, tidy(e.a), e.b)
    return Lin(other=((1, e),))


def tidy(e: ir.Expr) -> ir.Expr:
    """An index expression in normal form (``((1 * h) + (1 * r)) - 0`` is ``h + r``)."""
    return linear(e).expr()


def substitute(e: ir.Expr, values: Mapping[str, ir.Expr]) -> ir.Expr:
    def fn(x: ir.Expr) -> ir.Expr:
        if isinstance(x, ir.Var) and x.kind == "index" and x.name in values:
            return values[x.name]
        return x
    return ir.rewrite(e, fn)


def tidy_indices(e: ir.Expr) -> ir.Expr:
    def fn(x: ir.Expr) -> ir.Expr:
        if isinstance(x, ir.Read) and x.indices:
            return ir.Read(x.dtype, x.tensor, tuple(tidy(i) for i in x.indices), x.pad, x.fill)
        return x
    return ir.rewrite(e, fn)
