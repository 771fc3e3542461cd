"""The sequential order of a def with value semantics (reference §5.5).

Such a def's text order need not be an order of its instances (a statement may read what a
later one writes), so its "program order" is one that isl's scheduler finds for the flow
dependences alone: no proximity, no coincidence, strongly connected components serialized.
A def without one has a dependence cycle (or needs a non-affine order), which is an error.
"""

from __future__ import annotations

import islpy as isl

from polyopt.errors import IllegalScheduleError, LanguageError
from polyopt.poly.deps import Deps
from polyopt.poly.model import PolyProgram
from polyopt.schedules.legality import check_legal
from polyopt.schedules.tree import Node, from_isl, name_loops, to_isl


def dataflow_order(pp: PolyProgram, deps: Deps) -> Node:
    """A loop tree over ``pp``'s statements that respects ``deps``."""
    ctx = pp.context.get_ctx()
    serialize = ctx.get_schedule_serialize_sccs()
    outer = ctx.get_schedule_outer_coincidence()
    ctx.set_schedule_serialize_sccs(1)
    ctx.set_schedule_outer_coincidence(0)
    try:
        sc = isl.ScheduleConstraints.on_domain(pp.domain).set_context(pp.context)
        tree = sc.set_validity(deps.all).compute_schedule()
    except isl.Error as e:
        raise _cycle(pp, deps, str(e)) from None
    finally:
        ctx.set_schedule_serialize_sccs(serialize)
        ctx.set_schedule_outer_coincidence(outer)
    root = name_loops(from_isl(tree), tuple(s.name for s in pp.stmts))
    try:
        check_legal(to_isl(root, pp.domain).get_map(), deps)
    except IllegalScheduleError as e:  # isl's order breaks a dependence: none exists
        raise _cycle(pp, deps, str(e)) from None
    return root


def _cycle(pp: PolyProgram, deps: Deps, why: str) -> LanguageError:
    """The error for a def isl found no order for: the instance on a dependence cycle
    (from the transitive closure of the dependences), else isl's reason."""
    closure, _ = deps.all.transitive_closure()
    on_cycle = closure.intersect(pp.domain.identity()).domain()
    if not on_cycle.is_empty():
        point = on_cycle.sample_point()
        name = point.get_space().get_tuple_name(isl.dim_type.set)
        s = pp.stmt(name)
        coords = [str(point.get_coordinate_val(isl.dim_type.set, k))
                  for k in range(point.get_space().dim(isl.dim_type.set))]
        return LanguageError(f"def '{pp.program.name}': a dependence cycle: instance "
                             f"{name}[{', '.join(coords)}] of {s.stmt.name} depends on its own "
                             f"value through the reads of its recurrences",
                             pp.program.source, s.stmt.pos)
    return LanguageError(f"def '{pp.program.name}': no affine order of its statement instances "
                         f"respects its dataflow: {why}", pp.program.source, None)
