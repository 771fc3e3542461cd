"""Exact counting of integer points: the cardinality of an isl set as a piecewise
quasi-polynomial of the sizes, and its value when every size is known.

The islpy wheel has no barvinok, so isl's ``card`` is missing. This module counts by
iterated summation (Faulhaber's formulas), innermost dimension first: a dimension bounded
below by ``L_1..L_p`` and above by ``U_1..U_q`` (affine in the outer dimensions and the
sizes) splits the outer space into chambers where one ``L_j`` is the greatest and one
``U_k`` the least (ties to the first), and on each chamber the sum over ``L_j..U_k`` of a
polynomial is a polynomial. Floors of the sizes alone (``floor((H - KH)/2)``, a stride)
are kept as opaque atoms; a floor of a summed dimension (a set with holes, ``i = 2e``)
becomes a dimension of its own, summed after the dimensions it is a floor of (the lifted
set has the same number of points). An existential that is no known floor is beyond this
method: ``Uncountable``; a caller with concrete sizes then falls back on
``isl_set_count_val``, which scans the points (exact, slower).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from math import comb

import islpy as isl

from polyopt.errors import PolyoptError

_SET, _PARAM, _IN, _DIV = isl.dim_type.set, isl.dim_type.param, isl.dim_type.in_, isl.dim_type.div

# A variable: ("d", k) the k-th set dimension, ("p", name) a size, ("f", text) a floor of
# sizes. A monomial: sorted ((variable, exponent), ...). A polynomial: monomial -> coefficient.
Var = tuple[str, int | str]
Mono = tuple[tuple[Var, int], ...]
Poly = dict[Mono, Fraction]


class Uncountable(PolyoptError):
    """A set this module cannot count symbolically (the reason says why)."""


@dataclass(frozen=True, eq=False)
class Count:
    """The number of points of a set: ``qpoly`` over the sizes, ``value`` when it is a
    constant (every size known); neither, and ``missing`` says why, when the set was
    beyond this module (``try_count``)."""

    qpoly: isl.PwQPolynomial | None
    value: int | None
    missing: str = ""

    def __str__(self) -> str:
        if self.value is not None:
            return str(self.value)
        return str(self.qpoly) if self.qpoly is not None else "not counted"


def try_count(s: isl.Set | isl.UnionSet | isl.BasicSet) -> Count:
    """``count``, or a Count that says why there is none."""
    try:
        return count(s)
    except Uncountable as e:
        return Count(None, None, str(e))


def scaled(c: Count, k: int) -> Count:
    """``c`` times the integer ``k``."""
    if c.value is not None:
        return Count(isl.PwQPolynomial(f"{{ {c.value * k} }}"), c.value * k)
    if c.qpoly is None:
        return c
    return Count(c.qpoly.scale_val(isl.Val(str(k))), None)


def count(s: isl.Set | isl.UnionSet | isl.BasicSet) -> Count:
    """The exact number of points of ``s`` (see the module docstring)."""
    sets = _sets(s)
    params = s.get_space().params()
    total: isl.PwQPolynomial | None = None
    value = Fraction(0)
    constant = params.dim(_PARAM) == 0
    for one in sets:
        if constant:  # every size known: a number, summed piece by piece
            value += _count_value(one)
            continue
        q = _count_set(one)
        total = q if total is None else total.add(q)
    if constant:
        n = int(value)
        return Count(isl.PwQPolynomial(f"{{ {n} }}"), n)
    if total is None:
        total = isl.PwQPolynomial(f"{_param_list(params)} -> {{ 0 }}")
    return Count(total.coalesce(), None)


def count_at(c: Count, sizes: dict[str, int]) -> int:
    """``c`` at concrete ``sizes`` (every size it involves must be given)."""
    if c.value is not None:
        return c.value
    if c.qpoly is None:
        raise Uncountable(c.missing)
    space = c.qpoly.get_domain_space()
    point = isl.Point.zero(space)
    for i in range(space.dim(_PARAM)):
        name = space.get_dim_name(_PARAM, i)
        if name not in sizes:
            raise Uncountable(f"count at sizes {sizes}: size {name} not given")
        point = point.set_coordinate_val(_PARAM, i, isl.Val(str(int(sizes[name]))))
    return int(Fraction(str(c.qpoly.eval(point))))


def _sets(s: isl.Set | isl.UnionSet | isl.BasicSet) -> list[isl.Set]:
    if isinstance(s, isl.BasicSet):
        return [isl.Set.from_basic_set(s)]
    if isinstance(s, isl.Set):
        return [s]
    out: list[isl.Set] = []
    s.foreach_set(out.append)
    return out


def _count_value(s: isl.Set) -> Fraction:
    try:
        got = sum((_poly_value(p) for _, p in _pieces(s)), Fraction(0))
        if got.denominator != 1:  # a count is an integer: never pass a wrong one on
            raise Uncountable(f"a fractional count {got} of {s}")
        return got
    except Uncountable:
        return Fraction(int(s.count_val().to_python()))  # scans: exact, slower


def _poly_value(p: Poly) -> Fraction:
    if any(m for m in p):
        raise Uncountable(f"a constant set counted to a non-constant {p}")
    return p.get((), Fraction(0))


def _count_set(s: isl.Set) -> isl.PwQPolynomial:
    params = _param_list(s.get_space().params())
    total = isl.PwQPolynomial(f"{params} -> {{ 0 }}")
    for chamber, p in _pieces(s):
        q = isl.PwQPolynomial(f"{params} -> {{ {_poly_text(p)} }}")
        total = total.add(q.intersect_domain(chamber.params()))
    return total


def _pieces(s: isl.Set) -> list[tuple[isl.BasicSet, Poly]]:
    """Disjoint chambers of the sizes, each with the count as a polynomial on it."""
    out: list[tuple[isl.BasicSet, Poly]] = []
    n = s.dim(_SET)
    work = _Work()
    for b in s.compute_divs().coalesce().make_disjoint().get_basic_sets():
        if not b.is_empty():
            out += _sum_basic(b, {(): Fraction(1)}, n, work)
    return out


MAX_LIFTS = 6  # floors made dimensions on one path before giving up (each adds a level)
MAX_STEPS = 2000  # summation steps for one set: chambers can multiply past any use


@dataclass
class _Work:
    steps: int = 0


def _sum_basic(b: isl.BasicSet, summand: Poly, n: int, work: _Work, lifts: int = 0
               ) -> list[tuple[isl.BasicSet, Poly]]:
    """The sum of ``summand`` over the last ``n`` dimensions of ``b``, by chamber."""
    if n == 0:
        return [(b, summand)]
    work.steps += 1
    if lifts > MAX_LIFTS or work.steps > MAX_STEPS:
        raise Uncountable(f"more than {MAX_LIFTS} floors to lift or {MAX_STEPS} "
                          f"summation steps for {b}")
    if _has_floors_of_dims(b):
        k = b.dim(_DIV)
        return _sum_basic(_lifted(b), _shifted(summand, k), n + k, work, lifts + k)
    x = n - 1
    cons = [c for c in b.get_constraints() if c.involves_dims(_SET, x, 1)]
    rest = b.drop_constraints_involving_dims(_SET, x, 1).project_out(_SET, x, 1)
    eq = next((c for c in cons if c.is_equality()), None)
    if eq is not None:  # x is an affine function of the outer dimensions
        # x = e/c: the projection keeps "c divides e" (a floor, lifted at the next level if
        # it is one of the dimensions), and where it holds e/c is x.
        value = _aff_poly(eq.get_bound(_SET, x))
        within = b.project_out(_SET, x, 1)
        out = []
        for piece in _basic_sets(within):
            out += _sum_basic(piece, _substitute(summand, ("d", x), value), n - 1, work,
                              lifts)
        return out
    lows = [c.get_bound(_SET, x).ceil() for c in cons if c.is_lower_bound(_SET, x)]
    highs = [c.get_bound(_SET, x).floor() for c in cons if c.is_upper_bound(_SET, x)]
    if not lows or not highs:
        raise Uncountable(f"dimension {x} of {b} is unbounded")
    out = []
    for j, low in enumerate(lows):
        for k, high in enumerate(highs):
            region = _chamber(lows, j, highs, k)
            region = region.project_out(_SET, x, 1).intersect(isl.Set.from_basic_set(rest))
            if region.is_empty():
                continue
            inner = _sum_range(summand, ("d", x), _aff_poly(low), _aff_poly(high))
            for piece in _basic_sets(region):
                out += _sum_basic(piece, inner, n - 1, work, lifts)
    return out


def _has_floors_of_dims(b: isl.BasicSet) -> bool:
    """Does ``b`` have an existential variable that is a floor of its dimensions (a set
    with holes, ``i = 2e``, or a bound such as ``2*floor(i/2) <= H - 2``)? Floors of the
    sizes alone are atoms. An existential that is no known floor cannot be counted."""
    found = False
    for i in range(b.dim(_DIV)):
        try:
            div = b.get_div(i)
        except isl.Error:
            raise Uncountable(f"an existential without a known floor in {b}") from None
        if div.is_nan():
            raise Uncountable(f"an existential without a known floor in {b}")
        found = found or div.involves_dims(_IN, 0, div.dim(_IN))
    return found


def _lifted(b: isl.BasicSet) -> isl.BasicSet:
    """``b`` with each floor as a dimension of its own, placed outermost: a floor is a
    function of the point, so the lifted set has as many points, and the dimensions are
    bounded by affine functions of the floors (``2e <= i <= 2e + 1``)."""
    flat = b.lift().flatten()
    n, k = b.dim(_SET), b.dim(_DIV)
    names = [f"x{i}" for i in range(n + k)]
    params = _param_list(b.get_space())
    perm = f"{params} -> {{ [{', '.join(names)}] -> [{', '.join(names[n:] + names[:n])}] }}"
    return flat.apply(isl.BasicMap(perm))


def _shifted(p: Poly, k: int) -> Poly:
    """``p`` with dimension ``i`` renamed ``i + k`` (``k`` dimensions put in front)."""
    out: Poly = {}
    for m, c in p.items():
        mono = tuple(sorted((((v[0], int(v[1]) + k) if v[0] == "d" else v, e) for v, e in m),
                            key=lambda t: repr(t[0])))
        out[mono] = c
    return out


def _chamber(lows: list[isl.Aff], j: int, highs: list[isl.Aff], k: int) -> isl.Set:
    """Where ``lows[j]`` is the greatest lower bound and ``highs[k]`` the least upper bound
    (ties go to the first listed, so chambers are disjoint) and the range is not empty."""
    region = highs[k].ge_set(lows[j])
    for i, other in enumerate(lows):
        if i != j:
            region = region.intersect(lows[j].gt_set(other) if i < j else lows[j].ge_set(other))
    for i, other in enumerate(highs):
        if i != k:
            region = region.intersect(highs[k].lt_set(other) if i < k else
                                      highs[k].le_set(other))
    return region


def _basic_sets(s: isl.Set | isl.BasicSet) -> list[isl.BasicSet]:
    if isinstance(s, isl.BasicSet):
        return [] if s.is_empty() else [s]
    return [b for b in s.make_disjoint().get_basic_sets() if not b.is_empty()]


# -- polynomials ------------------------------------------------------------------------------

def _aff_poly(aff: isl.Aff) -> Poly:
    """An affine function as a polynomial; a floor must involve the sizes only."""
    out: Poly = {}
    const = Fraction(str(aff.get_constant_val()))
    if const:
        out[()] = const
    for kind, key in ((_IN, "d"), (_PARAM, "p")):
        for i in range(aff.dim(kind)):
            c = Fraction(str(aff.get_coefficient_val(kind, i)))
            if c:
                var: Var = (key, i) if key == "d" else (key, str(aff.get_dim_name(kind, i)))
                out[((var, 1),)] = out.get(((var, 1),), Fraction(0)) + c
    for i in range(aff.dim(_DIV)):
        c = Fraction(str(aff.get_coefficient_val(_DIV, i)))
        if c:
            div = aff.get_div(i)
            if div.involves_dims(_IN, 0, div.dim(_IN)):
                raise Uncountable(f"a floor of a summed dimension: {aff}")
            atom: Var = ("f", f"floor({_affine_text(_aff_poly(div))})")
            out[((atom, 1),)] = out.get(((atom, 1),), Fraction(0)) + c
    return {m: c for m, c in out.items() if c}


def _add(a: Poly, b: Poly, scale: Fraction = Fraction(1)) -> Poly:
    out = dict(a)
    for m, c in b.items():
        out[m] = out.get(m, Fraction(0)) + scale * c
    return {m: c for m, c in out.items() if c}


def _mul(a: Poly, b: Poly) -> Poly:
    out: Poly = {}
    for ma, ca in a.items():
        for mb, cb in b.items():
            m = _mono_mul(ma, mb)
            out[m] = out.get(m, Fraction(0)) + ca * cb
    return {m: c for m, c in out.items() if c}


def _mono_mul(a: Mono, b: Mono) -> Mono:
    exps = dict(a)
    for v, e in b:
        exps[v] = exps.get(v, 0) + e
    return tuple(sorted(exps.items(), key=lambda t: repr(t[0])))


def _power(p: Poly, k: int) -> Poly:
    out: Poly = {(): Fraction(1)}
    for _ in range(k):
        out = _mul(out, p)
    return out


def _split(p: Poly, var: Var) -> dict[int, Poly]:
    """``p`` as a polynomial in ``var``: exponent -> coefficient polynomial."""
    out: dict[int, Poly] = {}
    for m, c in p.items():
        e = dict(m).get(var, 0)
        rest = tuple(t for t in m if t[0] != var)
        out.setdefault(e, {})[rest] = out.get(e, {}).get(rest, Fraction(0)) + c
    return out


def _substitute(p: Poly, var: Var, value: Poly) -> Poly:
    out: Poly = {}
    for e, coef in _split(p, var).items():
        out = _add(out, _mul(coef, _power(value, e)))
    return out


def _sum_range(p: Poly, var: Var, low: Poly, high: Poly) -> Poly:
    """sum over var = low..high of p (high >= low - 1): S_e(high) - S_e(low - 1) per
    power, with S_e(n) = 0^e + 1^e + ... + n^e, a polynomial identity for every integer n."""
    out: Poly = {}
    below = _add(low, {(): Fraction(-1)})
    for e, coef in _split(p, var).items():
        faul = _faulhaber(e)
        diff = _add(_horner(faul, high), _horner(faul, below), Fraction(-1))
        out = _add(out, _mul(coef, diff))
    return out


def _horner(coeffs: tuple[Fraction, ...], x: Poly) -> Poly:
    out: Poly = {}
    for c in reversed(coeffs):
        out = _add(_mul(out, x), {(): c} if c else {})
    return out


@lru_cache(maxsize=32)
def _faulhaber(e: int) -> tuple[Fraction, ...]:
    """Coefficients (constant first) of S_e(n) = sum_{x=0}^{n} x^e."""
    bern = _bernoulli_plus(e)
    coeffs = [Fraction(0)] * (e + 2)
    for j in range(e + 1):
        coeffs[e + 1 - j] += Fraction(comb(e + 1, j)) * bern[j] / (e + 1)
    if e == 0:
        coeffs[0] += 1  # the x = 0 term, 0^0 = 1
    return tuple(coeffs)


@lru_cache(maxsize=32)
def _bernoulli_plus(n: int) -> tuple[Fraction, ...]:
    """B_0..B_n with B_1 = +1/2 (the convention of sum_{x=1}^{n} x^e)."""
    b = [Fraction(1)]
    for m in range(1, n + 1):
        b.append(-sum((Fraction(comb(m + 1, k)) * b[k] for k in range(m)), Fraction(0))
                 / (m + 1))
    if n >= 1:
        b[1] = Fraction(1, 2)
    return tuple(b)


# -- isl text -------------------------------------------------------------------------------

def _param_list(space: isl.Space) -> str:
    names = (str(space.get_dim_name(_PARAM, i)) for i in range(space.dim(_PARAM)))
    return f"[{', '.join(names)}]"


def _var_text(v: Var) -> str:
    kind, what = v
    if kind == "d":
        raise Uncountable("a summed dimension left in a count")
    return str(what)


def _mono_text(m: Mono) -> str:
    return " * ".join(_var_text(v) if e == 1 else f"{_var_text(v)}^{e}" for v, e in m)


def _poly_text(p: Poly) -> str:
    """isl quasi-polynomial text; coefficients as ``num/den``."""
    if not p:
        return "0"
    terms = []
    for m, c in sorted(p.items(), key=lambda t: (-sum(e for _, e in t[0]), repr(t[0]))):
        coef = f"{c.numerator}/{c.denominator}" if c.denominator != 1 else str(c.numerator)
        terms.append(f"({coef})" if not m else f"({coef}) * {_mono_text(m)}")
    return " + ".join(terms)


def _affine_text(p: Poly) -> str:
    """``(a*N + b*M + c)/d`` with integer a, b, c, d: a floor's argument as isl reads it."""
    den = 1
    for c in p.values():
        den = den * c.denominator // _gcd(den, c.denominator)
    terms = [f"{int(c * den)}*{_mono_text(m)}" if m else str(int(c * den))
             for m, c in p.items()]
    return f"(({' + '.join(terms) or '0'})/{den})"


def _gcd(a: int, b: int) -> int:
    while b:
        a, b = b, a % b
    return a


def total(counts: Iterable[Count]) -> Count:
    """The sum of counts (all constant, or all over the same sizes)."""
    items = list(counts)
    lost = next((c for c in items if c.value is None and c.qpoly is None), None)
    if lost is not None:
        return lost
    if all(c.value is not None for c in items):
        n = sum(c.value or 0 for c in items)
        return Count(isl.PwQPolynomial(f"{{ {n} }}"), n)
    q = None
    for c in items:
        assert c.qpoly is not None
        q = c.qpoly if q is None else q.add(c.qpoly)
    assert q is not None
    return Count(q.coalesce(), None)
