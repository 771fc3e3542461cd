"""Legality: a schedule must run every dependence's source before its sink.

``check_legal`` tests a whole schedule; ``carried`` tests one loop (parallel or vector
execution needs a loop that carries no dependence).
"""

from __future__ import annotations

import islpy as isl

from polyopt.errors import IllegalScheduleError
from polyopt.lang.flow import maps_of as _maps
from polyopt.lang.flow import union_all
from polyopt.poly.deps import Deps
from polyopt.schedules.limits import CAPS
from polyopt.schedules.memo import Memo
from polyopt.schedules.tree import Loop, Node, Sequence, filter_domain, loops, path_to, stmts_of


def check_legal(smap: isl.UnionMap, deps: Deps, what: str = "the schedule",
                within: isl.UnionSet | None = None) -> None:
    """Raise IllegalScheduleError naming the first dependence that ``smap`` violates; with
    ``within`` (the instances a step may have reordered), only the dependences between
    those (the order of any other pair is the one already checked)."""
    if within is not None:
        smap = smap.intersect_domain(within)
    whole = smap.n_map() <= CAPS.legality_whole_order
    orders = _PairOrders(smap) if whole else None
    times = None if whole else _as_times(smap)
    for kind, dep in deps.named():
        if within is not None:
            dep = dep.intersect_domain(within).intersect_range(within)
        if orders.covers(dep) if orders is not None else _respects(times, dep):
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


class _PairOrders:
    """``smap``'s lexicographic order, one pair of statements at a time, built for the pairs
    a dependence joins only (a fused convolution's six statements have 36 pairs, and its
    dependences join a few: 5x less time per check than the whole order)."""

    def __init__(self, smap: isl.UnionMap) -> None:
        self._times: dict[str, isl.UnionMap] = {}
        smap.foreach_map(lambda m: self._times.__setitem__(
            m.get_tuple_name(isl.dim_type.in_), isl.UnionMap.from_map(m)))
        self._orders: dict[tuple[str, str], isl.UnionMap] = {}

    def covers(self, dep: isl.UnionMap) -> bool:
        """Does every pair of ``dep`` run its source before its sink?"""
        maps: list[isl.Map] = []
        dep.foreach_map(maps.append)
        for m in maps:
            pair = (m.get_tuple_name(isl.dim_type.in_), m.get_tuple_name(isl.dim_type.out))
            if pair not in self._orders:
                if pair[0] not in self._times or pair[1] not in self._times:
                    return False  # an end without a time: the caller looks closer
                self._orders[pair] = self._times[pair[0]].lex_lt_union_map(
                    self._times[pair[1]])
            if not isl.UnionMap.from_map(m).is_subset(self._orders[pair]):
                return False
        return True


def _as_times(smap: isl.UnionMap) -> isl.MultiUnionPwAff | None:
    """``smap`` as one time function (every statement's time has the same dimensions, as
    in an isl schedule tree's map); None if it is not one."""
    try:
        return isl.MultiUnionPwAff.from_union_map(smap)
    except isl.Error:
        return None


def _respects(times: isl.MultiUnionPwAff | None, dep: isl.UnionMap) -> bool:
    """Do ``times`` run every source of ``dep`` before its sinks? The dependences whose
    ends are in lexicographic order (isl's lex_lt_at) must be all of them. False when that
    is not shown (no ``times``, an instance without a time): the caller looks closer.
    Mapping each dependence to its two times took 3 s for a chain of 2000 (0.8 s so)."""
    if dep.is_empty():
        return True
    if times is None:
        return False
    return bool(dep.is_subset(dep.lex_lt_at_multi_union_pw_aff(times)))


def carried(root: Node, loop: Loop, deps: Deps, domain: isl.UnionSet) -> isl.UnionMap:
    """The dependences ``loop`` carries: both ends below it, equal outer loops, different
    values of ``loop``. Empty when its iterations may run in parallel.

    It depends on the loop's and its outer loops' functions, the statements below and the
    dependences only: the pipeline asks again for a loop that a later step rebuilt without
    changing those (a third of the calls for a convolution), so the answer is kept."""
    outer = [n for n in path_to(root, loop)[:-1] if isinstance(n, Loop)]
    return _CARRIED.get((deps, domain, loop.expr, *(n.expr for n in outer)), stmts_of(loop),
                        lambda: _carried(outer, loop, deps, domain))


_CARRIED: Memo[isl.UnionMap] = Memo(1024)


def _carried(outer: list[Loop], loop: Loop, deps: Deps, domain: isl.UnionSet) -> isl.UnionMap:
    stmts = stmts_of(loop)
    dep = _level(deps, domain, stmts, outer)
    if dep.is_empty():
        return dep
    here = _at(loop, filter_domain(domain, stmts))
    return dep.lex_lt_at_multi_union_pw_aff(here).union(
        dep.lex_gt_at_multi_union_pw_aff(here))


def _level(deps: Deps, domain: isl.UnionSet, stmts: tuple[str, ...],
           outer: list[Loop]) -> isl.UnionMap:
    """The dependences between instances of ``stmts`` with equal values of the loops of
    ``outer``, each prefix kept: the loops of a nest share their outer loops, so a deep
    register-tiled nest costs one comparison per loop, not one per loop and level."""
    def make() -> isl.UnionMap:
        dom = filter_domain(domain, stmts)
        if not outer:
            return _among(deps, stmts).intersect_domain(dom).intersect_range(dom)
        dep = _level(deps, domain, stmts, outer[:-1])
        # Compared at the dependences' ends only: the pairs of instances with equal loop
        # values are quadratic in the statements below the loop (6.8 s of 11 for 160 fused
        # ones).
        return dep if dep.is_empty() else dep.eq_at_multi_union_pw_aff(_at(outer[-1], dom))
    return _LEVELS.get((deps, domain, *(lp.expr for lp in outer)), stmts, make)


_LEVELS: Memo[isl.UnionMap] = Memo(1024)


def _among(deps: Deps, stmts: tuple[str, ...]) -> isl.UnionMap:
    """The maps of ``deps.all`` between statements of ``stmts``, found through an index by
    source statement: restricting the whole union per nest was quadratic in the nests
    (4.6 s for 1000)."""
    index = _BY_SOURCE.get((deps,), None, lambda: _by_source(deps.all))
    inside = dict.fromkeys(stmts)  # in order: the union's maps come in the same order
    found = [isl.UnionMap.from_map(m) for s in inside for m in index.get(s, ())
             if _end(m, isl.dim_type.out) in inside]
    return union_all(found, isl.UnionMap.empty(deps.all.get_space()))


def _by_source(umap: isl.UnionMap) -> dict[str, list[isl.Map]]:
    out: dict[str, list[isl.Map]] = {}
    for m in _maps(umap):
        out.setdefault(_end(m, isl.dim_type.in_), []).append(m)
    return out


_BY_SOURCE: Memo[dict[str, list[isl.Map]]] = Memo(16)


def _at(loop: Loop, dom: isl.UnionSet) -> isl.MultiUnionPwAff:
    return isl.MultiUnionPwAff.from_union_pw_aff(loop.expr.intersect_domain_union_set(dom))


def _first_map(umap: isl.UnionMap) -> isl.Map:
    return _maps(umap)[0]


def permutable(root: Node, band: list[str], deps: Deps, domain: isl.UnionSet) -> bool:
    """Are the perfectly nested loops ``band`` (outermost first) permutable: does every
    dependence between instances below them, at equal values of the loops above, have a
    distance >= 0 along each? Then tiling them rectangularly, reordering them, or skewing
    one by a multiple (>= 0) of an outer one keeps every dependence in order (Irigoin and
    Triolet), and the verb needs no check of the whole order: a tiled order's floor
    divisions by sizes that are not powers of two make isl's lexicographic test take
    minutes (jacobi-2d time-tiled 15 x 64 x 1008 at N=3000)."""
    named = {lp.name: lp for lp in loops(root)}
    if any(name not in named for name in band):
        return False
    top = named[band[0]]
    inside = filter_domain(domain, stmts_of(top))
    outer = [n for n in path_to(root, top)[:-1] if isinstance(n, Loop)]
    for _kind, dep in deps.named():
        d = _at_equal(dep.intersect_domain(inside).intersect_range(inside), outer)
        for name in band:
            if d.is_empty():
                break
            at = isl.MultiUnionPwAff.from_union_pw_aff(named[name].expr)
            if not d.is_subset(d.lex_le_at_multi_union_pw_aff(at)):
                return False
    return True


def distributable(root: Node, loop: str, deps: Deps, domain: isl.UnionSet) -> bool:
    """Can ``loop`` be distributed over the children of the sequence right below it with no
    check of the whole order: does no dependence run from a later child's instance back to
    an earlier child's at equal values of the loops above ``loop`` (at any of its own)?
    Distribution runs every iteration of an earlier child first, so only such a
    dependence could break (a time-tiled fdtd-2d's point loop, tiles of 15 steps: the
    whole check took minutes)."""
    named = {lp.name: lp for lp in loops(root)}
    lp = named.get(loop)
    if lp is None or not isinstance(lp.child, Sequence):
        return False
    at = [n for n in path_to(root, lp)[:-1] if isinstance(n, Loop)]
    child = {name: k for k, kid in enumerate(lp.child.children) for name in stmts_of(kid)}
    if len(child) != sum(len(stmts_of(kid)) for kid in lp.child.children):
        return False  # a statement under two children: the whole check decides
    below = filter_domain(domain, tuple(child))
    for _kind, dep in deps.named():
        # One pass over the dependence's maps (each joins two statements): a check per
        # pair of children was cubic in the statements (54 s for 160 writing one tensor).
        back = [isl.UnionMap.from_map(m) for m in _maps(dep)
                if child.get(_end(m, isl.dim_type.in_), -1)
                > child.get(_end(m, isl.dim_type.out), len(child))]
        if back and not _at_equal(union_all(back, isl.UnionMap.empty(dep.get_space()))
                                  .intersect_domain(below).intersect_range(below),
                                  at).is_empty():
            return False
    return True


def _end(m: isl.Map, end: isl.dim_type) -> str:
    return str(m.get_tuple_name(end))


def _at_equal(dep: isl.UnionMap, outer: list[Loop]) -> isl.UnionMap:
    """The pairs of ``dep`` whose ends share the values of the loops ``outer``."""
    for lp in outer:
        if dep.is_empty():
            break
        dep = dep.eq_at_multi_union_pw_aff(isl.MultiUnionPwAff.from_union_pw_aff(lp.expr))
    return dep
