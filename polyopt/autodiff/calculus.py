"""Derivatives of one statement's right-hand side with respect to its reads.

``partials(rhs, active)`` runs reverse mode over the expression tree, seeded with 1, and
returns one derivative expression per read group: the reads of one tensor at the same
indices (``(X(n,r) - mu(n)) * (X(n,r) - mu(n))`` gives one term for ``X(n,r)``). ``None``
stands for zero throughout, so untouched branches vanish instead of printing ``* 0.0``.

Tie rules (where the function has no derivative): ``max``/``fmax`` give the whole gradient to
their first argument when the two are equal (so ``fmax(x, 0)`` passes it at ``x == 0``),
``min``/``fmin`` likewise; ``fabs`` counts 0 as positive; ``floor``, ``ceil``, ``round``,
``trunc`` have derivative 0.
"""

from __future__ import annotations

from collections.abc import Callable

from polyopt import dtypes, ir
from polyopt.errors import NotDifferentiableError

D = ir.Expr | None  # a derivative; None is zero
ReadKey = tuple[str, tuple[ir.Expr, ...]]


def const(v: float) -> ir.Const:
    return ir.Const("float32", float(v))


def _is(e: D, v: float) -> bool:
    return isinstance(e, ir.Const) and not isinstance(e.value, bool) and e.value == v


def _dt(*es: ir.Expr) -> str:
    return dtypes.promote(*(e.dtype for e in es))


def add(a: D, b: D) -> D:
    if a is None:
        return b
    if b is None:
        return a
    if isinstance(b, ir.Unary) and b.op == "-":
        return ir.Binary(_dt(a, b), "-", a, b.x)
    return ir.Binary(_dt(a, b), "+", a, b)


def neg(a: D) -> D:
    if a is None:
        return None
    if isinstance(a, ir.Unary) and a.op == "-":
        return a.x
    if isinstance(a, ir.Const) and not isinstance(a.value, bool):
        return ir.Const(a.dtype, -a.value)
    return ir.Unary(a.dtype, "-", a)


def mul(a: D, b: D) -> D:
    if a is None or b is None:
        return None
    if _is(a, 1):
        return b
    if _is(b, 1):
        return a
    if _is(a, -1):
        return neg(b)
    if _is(b, -1):
        return neg(a)
    if isinstance(b, ir.Unary) and b.op == "-":
        return neg(mul(a, b.x))
    if isinstance(b, ir.Binary) and b.op == "/" and _is(b.a, 1):
        return div(a, b.b)
    for x, y in ((a, b), (b, a)):
        if isinstance(y, ir.Select) and (_is(y.a, 0) or _is(y.b, 0)):
            # g * (c ? 1 : 0) is c ? g : 0: the mask of relu, max and argmax routing
            return select(y.cond, None if _is(y.a, 0) else mul(x, y.a),
                          None if _is(y.b, 0) else mul(x, y.b))
    return ir.Binary(_dt(a, b), "*", a, b)


def div(a: D, b: ir.Expr) -> D:
    if a is None:
        return None
    if isinstance(a, ir.Unary) and a.op == "-":
        return neg(div(a.x, b))
    return ir.Binary(_dt(a, b), "/", a, b)


def select(c: ir.Expr, a: D, b: D) -> D:
    if a is None and b is None:
        return None
    x = a if a is not None else const(0)
    y = b if b is not None else const(0)
    return ir.Select(_dt(x, y), c, x, y)


def call(fn: str, *args: ir.Expr) -> ir.Expr:
    return ir.Call(dtypes.promote("float32", *(a.dtype for a in args)), fn, args)


def cmp(op: str, a: ir.Expr, b: ir.Expr) -> ir.Expr:
    return ir.Binary("bool", op, a, b)


def _times(a: ir.Expr, b: ir.Expr) -> ir.Expr:
    return ir.Binary(_dt(a, b), "*", a, b)


def square(x: ir.Expr) -> ir.Expr:
    return ir.Binary(x.dtype, "*", x, x)


# ---------------------------------------------------------------- builtins

Rule = Callable[[tuple[ir.Expr, ...], ir.Expr], tuple[D, ...]]
_LN2, _LN10 = 0.6931471805599453, 2.302585092994046
_TWO_OVER_SQRT_PI, _INV_SQRT_2PI = 1.1283791670955126, 0.3989422804014327


def _one(f: Callable[[ir.Expr, ir.Expr], D]) -> Rule:
    return lambda a, g: (f(a[0], g),)


def _sub1(x: ir.Expr, c: float = 1.0, sign: str = "-") -> ir.Expr:
    """``c - x*x`` (sign "-") or ``x*x - c`` (sign "+")."""
    if sign == "-":
        return ir.Binary(x.dtype, "-", const(c), square(x))
    return ir.Binary(x.dtype, "-", square(x), const(c))


def _gauss(x: ir.Expr, c: float) -> ir.Expr:
    """``exp(-c*x*x)``."""
    return call("exp", ir.Binary(x.dtype, "*", const(-c), square(x)))


def _maxlike(op: str) -> Rule:
    def rule(a: tuple[ir.Expr, ...], g: ir.Expr) -> tuple[D, ...]:
        first = cmp(op, a[0], a[1])
        return select(first, g, None), select(first, None, g)
    return rule


def _pow(a: tuple[ir.Expr, ...], g: ir.Expr) -> tuple[D, ...]:
    x, y = a
    dx = mul(g, mul(y, call("pow", x, ir.Binary(y.dtype, "-", y, const(1)))))
    return dx, mul(g, mul(call("pow", x, y), call("log", x)))


def _atan2(a: tuple[ir.Expr, ...], g: ir.Expr) -> tuple[D, ...]:
    y, x = a
    r2 = ir.Binary(_dt(x, y), "+", square(x), square(y))
    return div(mul(g, x), r2), neg(div(mul(g, y), r2))


def _hypot(a: tuple[ir.Expr, ...], g: ir.Expr) -> tuple[D, ...]:
    h = call("hypot", *a)
    return div(mul(g, a[0]), h), div(mul(g, a[1]), h)


def _fdim(a: tuple[ir.Expr, ...], g: ir.Expr) -> tuple[D, ...]:
    above = cmp(">", a[0], a[1])
    return select(above, g, None), select(above, neg(g), None)


_RULES: dict[str, Rule] = {
    "exp": _one(lambda x, g: mul(g, call("exp", x))),
    "expm1": _one(lambda x, g: mul(g, call("exp", x))),
    "exp2": _one(lambda x, g: mul(g, mul(call("exp2", x), const(_LN2)))),
    "exp10": _one(lambda x, g: mul(g, mul(call("exp10", x), const(_LN10)))),
    "log": _one(lambda x, g: div(g, x)),
    "log1p": _one(lambda x, g: div(g, ir.Binary(x.dtype, "+", const(1), x))),
    "log2": _one(lambda x, g: div(g, _times(x, const(_LN2)))),
    "log10": _one(lambda x, g: div(g, _times(x, const(_LN10)))),
    "sqrt": _one(lambda x, g: div(g, _times(const(2), call("sqrt", x)))),
    "rsqrt": _one(lambda x, g: neg(div(mul(mul(const(0.5), g), call("rsqrt", x)), x))),
    "cbrt": _one(lambda x, g: div(g, _times(const(3), square(call("cbrt", x))))),
    "rcbrt": _one(lambda x, g: neg(div(mul(g, call("rcbrt", x)), _times(const(3), x)))),
    "tanh": _one(lambda x, g: mul(g, _sub1(call("tanh", x)))),
    "sin": _one(lambda x, g: mul(g, call("cos", x))),
    "cos": _one(lambda x, g: neg(mul(g, call("sin", x)))),
    "tan": _one(lambda x, g: mul(g, ir.Binary(x.dtype, "+", const(1),
                                                square(call("tan", x))))),
    "sinh": _one(lambda x, g: mul(g, call("cosh", x))),
    "cosh": _one(lambda x, g: mul(g, call("sinh", x))),
    "asin": _one(lambda x, g: mul(g, call("rsqrt", _sub1(x)))),
    "acos": _one(lambda x, g: neg(mul(g, call("rsqrt", _sub1(x))))),
    "atan": _one(lambda x, g: div(g, ir.Binary(x.dtype, "+", const(1), square(x)))),
    "asinh": _one(lambda x, g: mul(g, call("rsqrt", ir.Binary(x.dtype, "+", square(x),
                                                                const(1))))),
    "acosh": _one(lambda x, g: mul(g, call("rsqrt", _sub1(x, sign="+")))),
    "atanh": _one(lambda x, g: div(g, _sub1(x))),
    "erf": _one(lambda x, g: mul(g, mul(const(_TWO_OVER_SQRT_PI), _gauss(x, 1.0)))),
    "erfc": _one(lambda x, g: neg(mul(g, mul(const(_TWO_OVER_SQRT_PI), _gauss(x, 1.0))))),
    "normcdf": _one(lambda x, g: mul(g, mul(const(_INV_SQRT_2PI), _gauss(x, 0.5)))),
    "fabs": _one(lambda x, g: select(cmp(">=", x, const(0)), g, neg(g))),
    "floor": _one(lambda x, g: None),
    "ceil": _one(lambda x, g: None),
    "round": _one(lambda x, g: None),
    "trunc": _one(lambda x, g: None),
    "fmax": _maxlike(">="),
    "fmin": _maxlike("<="),
    "pow": _pow,
    "atan2": _atan2,
    "hypot": _hypot,
    "fdim": _fdim,
    "fdivide": lambda a, g: (div(g, a[1]), neg(div(mul(g, a[0]), square(a[1])))),
    "fma": lambda a, g: (mul(g, a[1]), mul(g, a[0]), g),
    "fmod": lambda a, g: (g, neg(mul(g, call("trunc", ir.Binary(_dt(*a), "/", *a))))),
}


def builtins_with_derivatives() -> list[str]:
    return sorted(_RULES)


# ---------------------------------------------------------------- reverse mode

class Partials:
    """Reverse mode over one right-hand side: ``run(rhs)`` fills ``terms``."""

    def __init__(self, active: Callable[[ir.Read], bool], where: str) -> None:
        self.active = active
        self.where = where  # the statement, for error messages
        self.terms: dict[ReadKey, ir.Expr] = {}

    def run(self, rhs: ir.Expr) -> dict[ReadKey, ir.Expr]:
        self.back(rhs, const(1))
        return self.terms

    def live(self, e: ir.Expr) -> bool:
        return any(isinstance(x, ir.Read) and self.active(x) for x in e.walk())

    def back(self, e: ir.Expr, g: D) -> None:
        if g is None or not self.live(e):
            return
        if isinstance(e, ir.Read):
            key = (e.tensor, e.indices)
            self.terms[key] = add(self.terms.get(key), g)  # type: ignore[assignment]
        elif isinstance(e, ir.Unary):
            self.back(e.x, neg(g) if e.op == "-" else None)
        elif isinstance(e, ir.Binary):
            self.binary(e, g)
        elif isinstance(e, ir.Select):
            self.back(e.a, select(e.cond, g, None))
            self.back(e.b, select(e.cond, None, g))
        elif isinstance(e, ir.Cast):
            if dtypes.get(e.dtype).is_float:
                self.back(e.x, g)
        elif isinstance(e, ir.Call):
            rule = _RULES.get(e.fn)
            if rule is None:
                raise NotDifferentiableError(
                    f"{self.where}: builtin '{e.fn}' has no derivative in polyopt.grad (it "
                    f"differentiates {', '.join(builtins_with_derivatives())})")
            for arg, d in zip(e.args, rule(e.args, g), strict=True):
                self.back(arg, d)

    def binary(self, e: ir.Binary, g: ir.Expr) -> None:
        a, b = e.a, e.b
        if e.op == "+":
            self.back(a, g)
            self.back(b, g)
        elif e.op == "-":
            self.back(a, g)
            self.back(b, neg(g))
        elif e.op == "*":
            self.back(a, mul(g, b))
            self.back(b, mul(a, g))
        elif e.op == "/":
            self.back(a, div(g, b))
            self.back(b, neg(div(mul(g, a), square(b))))
        elif e.op in ("max", "min"):
            da, db = _maxlike(">=" if e.op == "max" else "<=")((a, b), g)
            self.back(a, da)
            self.back(b, db)
        elif dtypes.get(e.dtype).is_float:
            raise NotDifferentiableError(
                f"{self.where}: operator '{e.op}' on floating-point values has no derivative "
                "in polyopt.grad")
        # comparisons, && || and integer % carry no derivative
