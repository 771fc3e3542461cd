"""Loop extents for the cost model: a statement's domain with the loops above it fixed at
their first value, a loop's trip count in one execution, and a domain's box volume. Shared
by the model's levels (``cost``: loops and caches, ``printed``: what the C printer makes of
a nest)."""

from __future__ import annotations

import islpy as isl

from polyopt.costmodel.strides import loop_map
from polyopt.poly.model import PolyProgram, PolyStmt
from polyopt.schedules.memo import Memo
from polyopt.schedules.tree import Loop, stmts_of

_SET = isl.dim_type.set

# Shared by every estimate: a nest's candidate orders rebuild its Loop nodes but keep their
# ``expr`` objects, so domains with outer loops fixed and trip counts are computed once for
# all candidates. A lowering asks for a few hundred of each; the limits bound what a long
# process keeps.
_FIXED: Memo[isl.Set] = Memo(2048)
_POINTS: Memo[int | None] = Memo(2048)
_TRIPS: Memo[int | None] = Memo(2048)


def fixed_domain(s: PolyStmt, outer: list[Loop] | tuple[Loop, ...]) -> isl.Set:
    """``s``'s domain with each loop of ``outer`` fixed at its first value, in turn (the
    domain with the loops before it fixed, memoized: candidate orders share prefixes)."""
    if not outer:
        return s.domain
    return _FIXED.get((s, *(lp.expr for lp in outer)), None, lambda: _fix(
        fixed_domain(s, outer[:-1]), outer[-1], s.name))


def _fix(dom: isl.Set, lp: Loop, stmt: str) -> isl.Set:
    """``dom`` with loop ``lp`` fixed at its first value (empty stays empty)."""
    m = loop_map(lp, stmt)
    if m is None:
        return dom
    m = m.intersect_domain(dom)
    if m.is_empty():
        return dom.empty(dom.get_space())
    return m.intersect_range(m.range().lexmin()).domain()


def trip(poly: PolyProgram, lp: Loop, outer: list[Loop]) -> int | None:
    """Iterations of ``lp`` in one execution (outer loops fixed at their first value)."""
    # The candidates of a nest ask again for its loops (rebuilt, with the same functions).
    return _TRIPS.get((poly, lp.expr, *(o.expr for o in outer)), stmts_of(lp),
                      lambda: _trip(poly, lp, tuple(outer)))


def _trip(poly: PolyProgram, lp: Loop, outer: tuple[Loop, ...]) -> int | None:
    lo: int | None = None
    hi: int | None = None
    for name in stmts_of(lp):
        m = loop_map(lp, name)
        if m is None:
            continue
        vals = m.intersect_domain(fixed_domain(poly.stmt(name), list(outer))).range()
        if vals.is_empty():
            continue
        a, b = vals.dim_min_val(0), vals.dim_max_val(0)
        if not (a.is_int() and b.is_int()):
            return None
        lo = min(int(a.to_python()), lo if lo is not None else int(a.to_python()))
        hi = max(int(b.to_python()), hi if hi is not None else int(b.to_python()))
    return 0 if lo is None or hi is None else hi - lo + 1


def path_trips(poly: PolyProgram, path: list[Loop]) -> list[int | None]:
    """The trip of each loop of ``path`` (outermost first), the loops above it fixed."""
    return [trip(poly, lp, path[:i]) for i, lp in enumerate(path)]


def points(dom: isl.Set) -> int | None:
    """Points of ``dom``'s bounding box (None: an extent is not constant)."""
    return _POINTS.get((dom,), None, lambda: _count(dom))


def _count(dom: isl.Set) -> int | None:
    if dom.is_empty():
        return 0
    n = 1
    for k in range(dom.dim(_SET)):
        lo, hi = dom.dim_min_val(k), dom.dim_max_val(k)
        if not (lo.is_int() and hi.is_int()):
            return None
        n *= int(hi.to_python()) - int(lo.to_python()) + 1
    return n
