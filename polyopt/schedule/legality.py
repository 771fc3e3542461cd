"""Legality: a schedule must run every dependence's source before its sink.

``check_legal`` tests a whole schedule; ``carried`` tests one loop (parallel or vector
execution needs a loop that carries no dependence).
"""

from __future__ import annotations

import islpy as isl

from polyopt.errors import IllegalScheduleError
from polyopt.poly.deps import Deps
from polyopt.schedule.tree import Loop, Node, filter_domain, path_to, stmts_of


def check_legal(smap: isl.UnionMap, deps: Deps, what: str = "the schedule") -> None:
    """Raise IllegalScheduleError naming the first dependence that ``smap`` violates."""
    before = smap.lex_lt_union_map(smap)
    for kind, dep in deps.named():
        bad = dep.subtract(before)
        if bad.is_empty():
            continue
        one = _first_map(bad)
        src = one.get_tuple_name(isl.dim_type.in_)
        dst = one.get_tuple_name(isl.dim_type.out)
        raise IllegalScheduleError(
            f"{what} violates a {kind} dependence from statement {src} to statement "
            f"{dst}: these instances of {dst} would run before (or with) the instances of "
            f"{src} they depend on:\n  {one}")


def carried(root: Node, loop: Loop, deps: Deps, domain: isl.UnionSet) -> isl.UnionMap:
    """The dependences ``loop`` carries: both ends below it, equal outer loops, different
    values of ``loop``. Empty when its iterations may run in parallel."""
    stmts = stmts_of(loop)
    dom = filter_domain(domain, stmts)
    dep = deps.all.intersect_domain(dom).intersect_range(dom)
    outer = [n for n in path_to(root, loop)[:-1] if isinstance(n, Loop)]
    if outer:
        prefix = _as_map(outer[0], dom)
        for lp in outer[1:]:
            prefix = prefix.flat_range_product(_as_map(lp, dom))
        dep = dep.intersect(prefix.apply_range(prefix.reverse()))
    here = _as_map(loop, dom)
    return dep.subtract(here.apply_range(here.reverse()))


def _as_map(loop: Loop, dom: isl.UnionSet) -> isl.UnionMap:
    return isl.UnionMap.from_union_pw_aff(loop.expr.intersect_domain_union_set(dom))


def _first_map(umap: isl.UnionMap) -> isl.Map:
    maps: list[isl.Map] = []
    umap.foreach_map(maps.append)
    return maps[0]
