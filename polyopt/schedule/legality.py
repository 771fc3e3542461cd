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
    for kind, dep in deps.named():
        if _respects(smap, dep):
            continue
        # The instances at fault: ``smap``'s whole order (every pair of statements) is
        # quadratic in the statements, so only that of the dependence's ends.
        before = smap.intersect_domain(dep.domain()).lex_lt_union_map(
            smap.intersect_domain(dep.range()))
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


def _respects(smap: isl.UnionMap, dep: isl.UnionMap) -> bool:
    """Does ``smap`` run every source of ``dep`` before its sinks? Each dependence is mapped
    to its two times, which must be in lexicographic order (every statement's time has the
    same dimensions)."""
    if dep.is_empty():
        return True
    if not (dep.domain().is_subset(smap.domain()) and dep.range().is_subset(smap.domain())):
        return False  # an instance without a time: let the caller find it
    times = dep.apply_domain(smap).apply_range(smap)
    space = _first_map(smap).get_space().range()
    return bool(times.is_subset(isl.UnionMap.from_map(isl.Map.lex_lt(space))))


def carried(root: Node, loop: Loop, deps: Deps, domain: isl.UnionSet) -> isl.UnionMap:
    """The dependences ``loop`` carries: both ends below it, equal outer loops, different
    values of ``loop``. Empty when its iterations may run in parallel."""
    dom = filter_domain(domain, stmts_of(loop))
    dep = deps.all.intersect_domain(dom).intersect_range(dom)
    if dep.is_empty():
        return dep
    # Compared at the dependences' ends only: the pairs of instances with equal loop values
    # are quadratic in the statements below the loop (6.8 s of 11 for 160 fused ones).
    for outer in (n for n in path_to(root, loop)[:-1] if isinstance(n, Loop)):
        dep = dep.eq_at_multi_union_pw_aff(_at(outer, dom))
    here = _at(loop, dom)
    return dep.lex_lt_at_multi_union_pw_aff(here).union(
        dep.lex_gt_at_multi_union_pw_aff(here))


def _at(loop: Loop, dom: isl.UnionSet) -> isl.MultiUnionPwAff:
    return isl.MultiUnionPwAff.from_union_pw_aff(loop.expr.intersect_domain_union_set(dom))


def _first_map(umap: isl.UnionMap) -> isl.Map:
    maps: list[isl.Map] = []
    umap.foreach_map(maps.append)
    return maps[0]
