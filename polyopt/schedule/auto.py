"""Automatic scheduling with isl's scheduler (``ScheduleConstraints.compute_schedule``).

isl's scheduler runs under a budget of operations (``operations_budget``, from
``policy.Caps.scheduler_work``) and with its schedule's coefficients bounded
(``Caps.scheduler_max_coefficient``: the budget does not count its integer programs' pivots).
When it runs out:

- a def of one statement (with its ``op=!`` fill, if any) gets one loop nest over its
  iterators in order, the fill inside its output's loops (``single_nest``): what isl's
  scheduler gives such a nest up to the order of its loops. It is not built in place of
  isl's schedule: isl drops loops of one iteration and orders the others by its own
  objective (``w, f, h`` for a 1x1 convolution), and the pipeline's code follows that;
- any other def gets program order with a ``PolyoptWarning`` (the CPU pipeline still
  fuses its nests where that is legal).

Reductions over many small extents no longer need the fallback: their chains are built
uncoalesced (``poly/deps.py``), and 8 reduction indices schedule in 80k operations.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

import islpy as isl

from polyopt.errors import IllegalScheduleError, PolyoptWarning
from polyopt.poly.deps import Deps
from polyopt.poly.model import PolyProgram, PolyStmt
from polyopt.schedule.canonical import unshift
from polyopt.schedule.legality import check_legal
from polyopt.schedule.policy import CAPS, Caps
from polyopt.schedule.schedule import Schedule, program_order
from polyopt.schedule.tree import Leaf, Loop, Node, from_isl, name_loops, nest_of, sequence

FUSION = ("min", "smart", "max")


class _OutOfBudget(Exception):
    pass


def operations_budget(n_stmts: int, caps: Caps | None = None) -> int:
    """isl's operations for scheduling ``n_stmts`` statements (``Caps.scheduler_work``)."""
    caps = caps or CAPS
    return min(caps.max_scheduler_operations, caps.scheduler_work // max(n_stmts, 1))


def compute_schedule(pp: PolyProgram, deps: Deps, *, fusion: str = "smart") -> Schedule:
    """isl's schedule for ``pp``: validity = every dependence, proximity = flow and output.

    ``fusion="min"`` serializes strongly connected components (no fusion across them);
    ``"smart"`` and ``"max"`` let isl fuse wherever its proximity objective gains.
    """
    if not pp.stmts:
        return program_order(pp, deps)
    ctx = pp.context.get_ctx()
    budget = operations_budget(len(pp.stmts))
    try:
        with _isl_options(ctx, fusion, budget):
            tree = _isl_schedule(pp, deps, coincidence=True)
            if tree is None:  # isl can fail to carry some dependences with coincidence asked
                tree = _isl_schedule(pp, deps, coincidence=False)
    except _OutOfBudget:
        direct = single_nest(pp, deps)
        if direct is not None:  # one statement: the nest isl gives it, up to loop order
            return replace(direct, fusion=fusion)
        warnings.warn(f"isl's scheduler ran out of its budget ({budget} operations) on def "
                      f"'{pp.program.name}' ({len(pp.stmts)} statements): its base schedule "
                      f"is program order (one nest per statement, which the CPU pipeline "
                      f"fuses where legal)", PolyoptWarning, stacklevel=2)
        out = replace(program_order(pp, deps), fusion=fusion)
        check_legal(out.map, deps)  # legal by construction (the dependences follow it)
        return out
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


@contextmanager
def _isl_options(ctx: isl.Context, fusion: str, budget: int) -> Iterator[None]:
    """The scheduler's fusion option and operation budget (isl counts from 0), restored
    after: later isl calls keep whatever budget they had."""
    serialize, most = ctx.get_schedule_serialize_sccs(), ctx.get_max_operations()
    coefficient = ctx.get_schedule_max_coefficient()
    ctx.set_schedule_serialize_sccs(1 if fusion == "min" else 0)
    ctx.set_schedule_max_coefficient(CAPS.scheduler_max_coefficient)
    ctx.reset_operations()
    ctx.set_max_operations(budget)
    try:
        yield
    finally:
        ctx.set_max_operations(most)
        ctx.reset_operations()
        ctx.set_schedule_max_coefficient(coefficient)
        ctx.set_schedule_serialize_sccs(serialize)


def _isl_schedule(pp: PolyProgram, deps: Deps, *, coincidence: bool) -> isl.Schedule | None:
    try:  # the budget counts the constraints' setup too
        sc = isl.ScheduleConstraints.on_domain(pp.domain).set_context(pp.context)
        sc = sc.set_validity(deps.all).set_proximity(deps.flow.union(deps.output))
        if coincidence:
            sc = sc.set_coincidence(deps.all)
        return sc.compute_schedule()
    except isl.Error as e:
        if "maximal number of operations exceeded" in str(e):
            raise _OutOfBudget from e
        return None


def single_nest(pp: PolyProgram, deps: Deps) -> Schedule | None:
    """The schedule of a def that is one statement, alone or after its ``op=!`` fill: its
    iterators in order, the fill inside the loops over the output's indices, ahead of the
    reduction loops. None for other defs (or if that order were illegal)."""
    stmts = pp.stmts
    params = pp.program.params
    root: Node | None = None
    if len(stmts) == 1:
        root = nest_of(stmts[0], params, set())
    elif (len(stmts) == 2 and stmts[0].kind == "init" and stmts[1].kind == "update"
          and stmts[0].stmt is stmts[1].stmt):
        root = _fill_then_update(stmts[0], stmts[1], params)
    if root is None:
        return None
    out = Schedule(root, pp, deps, "isl")
    try:
        check_legal(out.map, deps)
    except IllegalScheduleError:
        return None
    return out


def _fill_then_update(init: PolyStmt, update: PolyStmt, params: str) -> Node | None:
    """``for lhs...: init; for reductions...: update``."""
    lhs, its = _iterators(init), _iterators(update)
    if its[:len(lhs)] != lhs:
        return None
    node: Node = Leaf((update.name,))
    for it in reversed(its[len(lhs):]):
        node = Loop("", _expr(params, {update.name: its}, it), node)
    node = sequence((Leaf((init.name,)), node))
    for it in reversed(lhs):
        node = Loop("", _expr(params, {init.name: lhs, update.name: its}, it), node)
    return name_loops(node, (init.name, update.name))


def _iterators(s: PolyStmt) -> list[str]:
    space = s.domain.get_space()
    return [str(space.get_dim_name(isl.dim_type.set, d))
            for d in range(space.dim(isl.dim_type.set))]


def _expr(params: str, stmts: dict[str, list[str]], it: str) -> isl.UnionPwAff:
    pieces = "; ".join(f"{name}[{', '.join(its)}] -> [({it})]" for name, its in stmts.items())
    return isl.UnionPwAff(f"{params} -> {{ {pieces} }}")

