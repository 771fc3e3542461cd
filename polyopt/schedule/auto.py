"""Automatic scheduling with isl's scheduler (``ScheduleConstraints.compute_schedule``)."""

from __future__ import annotations

import islpy as isl

from polyopt.errors import IllegalScheduleError
from polyopt.poly.deps import Deps
from polyopt.poly.model import PolyProgram
from polyopt.schedule.canonical import unshift
from polyopt.schedule.legality import check_legal
from polyopt.schedule.schedule import Schedule, program_order
from polyopt.schedule.tree import from_isl, name_loops

FUSION = ("min", "smart", "max")


def compute_schedule(pp: PolyProgram, deps: Deps, *, fusion: str = "smart") -> Schedule:
    """isl's schedule for ``pp``: validity = every dependence, proximity = flow and output.

    ``fusion="min"`` serializes strongly connected components (no fusion across them);
    ``"smart"`` and ``"max"`` let isl fuse wherever its proximity objective gains.
    """
    if not pp.stmts:
        return program_order(pp, deps)
    ctx = pp.context.get_ctx()
    old = ctx.get_schedule_serialize_sccs()
    try:
        ctx.set_schedule_serialize_sccs(1 if fusion == "min" else 0)
        tree = _isl_schedule(pp, deps, coincidence=True)
        if tree is None:  # isl can fail to carry some dependences with coincidence asked for
            tree = _isl_schedule(pp, deps, coincidence=False)
    finally:
        ctx.set_schedule_serialize_sccs(old)
    if tree is None:
        # isl gives up on some all-to-one reductions at small fixed sizes ("unable to carry
        # dependences"); program order is always legal there.
        return program_order(pp, deps)
    order = tuple(s.name for s in pp.stmts)
    root = name_loops(from_isl(tree), order)
    out = Schedule(root, pp, deps, "isl", fusion)
    plain = unshift(root, pp.domain, order)
    if plain is not root:
        candidate = Schedule(plain, pp, deps, "isl", fusion)
        try:
            check_legal(candidate.map, deps)
            out = candidate
        except IllegalScheduleError:
            pass
    return out


def _isl_schedule(pp: PolyProgram, deps: Deps, *, coincidence: bool) -> isl.Schedule | None:
    sc = isl.ScheduleConstraints.on_domain(pp.domain).set_context(pp.context)
    sc = sc.set_validity(deps.all).set_proximity(deps.flow.union(deps.output))
    if coincidence:
        sc = sc.set_coincidence(deps.all)
    try:
        return sc.compute_schedule()
    except isl.Error:
        return None


