"""Array contraction: a local temporary that lives within one iteration of a loop.

When every access to local ``T`` sits under loop ``L``, indexes ``T``'s dimension ``d``
by ``L``'s own value, and every value read from ``T`` was written in the same iteration of
``L``, then each iteration needs only its slice of ``T``: the generated code keeps that
slice in a local array declared inside ``L`` (private to each thread when ``L`` runs in
parallel) instead of the whole tensor in memory. Dependences are those of the whole
tensor; only storage changes (the slice is reused from one iteration to the next, which
the flow check above makes safe).
"""

from __future__ import annotations

from functools import lru_cache

import islpy as isl

from polyopt.dtypes import DTYPES
from polyopt.errors import ScheduleError
from polyopt.lang.flow import maps_of as _maps
from polyopt.poly.model import PolyProgram, PolyStmt
from polyopt.schedules.limits import CAPS
from polyopt.schedules.tree import Loop, expr_of, filter_domain, filter_map, stmt_set

# A contracted slice lives on the stack of each thread (limits.Caps.max_slice_bytes).
MAX_SLICE_BYTES = CAPS.max_slice_bytes


def contracted_dim(loop: Loop, poly: PolyProgram, tensor: str, order: isl.UnionMap) -> int:
    """The dimension of local ``tensor`` that ``loop`` can contract, in the schedule whose
    map is ``order``; ScheduleError when it cannot (the message says why)."""
    t = poly.program.tensors.get(tensor)
    if t is None or t.role != "local":
        locals_ = ", ".join(x.name for x in poly.program.locals) or "none"
        raise ScheduleError(f"contract: {tensor!r} is not a local of def "
                            f"'{poly.program.name}'; locals: {locals_}")
    inside = stmt_set(loop)
    writes, reads = _accesses(poly, tensor)
    users = {m.get_tuple_name(isl.dim_type.in_) for m in _maps(writes.union(reads))}
    if not users <= inside:
        raise ScheduleError(f"contract: {tensor} is used outside loop {loop.name} "
                            f"(by {', '.join(sorted(users - inside))})")
    users_domain = filter_domain(poly.domain, tuple(users))
    value = isl.UnionMap.from_union_pw_aff(
        expr_of(loop.expr, users).intersect_domain_union_set(users_domain))
    dims = [d for d in range(t.rank) if _follows(writes.union(reads), value, d)]
    if not dims:
        raise ScheduleError(f"contract: no dimension of {tensor} is indexed by loop "
                            f"{loop.name}'s value in every access")
    # Every access indexes dimension dims[0] by the loop's value, so a value flows within
    # one iteration of the loop; what is left is that every read sees a write. A schedule
    # respects its dependences (each step is checked), and a flow dependence, widened to
    # every instance of a reduction chain updating the element, orders a read after the
    # write program order gives it: a read that sees a write in program order sees one in
    # every schedule. So one check in program order per local serves every schedule and
    # loop (5x cheaper than under a tiled schedule, and asked again after each later step);
    # the schedule's own order decides only when it fails.
    if not _sourced(poly, tensor):
        # The users' times alone: the flow among them is the same, and the whole tree of
        # 160 statements took 0.11 s per local.
        _check_flow(reads, writes, value, filter_map(order, users), tensor, loop.name)
    return dims[0]


@lru_cache(maxsize=32)
def _sourced(poly: PolyProgram, tensor: str) -> bool:
    """Does every read of local ``tensor`` see a write before it in program order?"""
    writes, reads = _accesses(poly, tensor)
    # The users' times alone: the whole program's order cost isl a pass over every
    # statement per local (56 s of 95 for a chain of 2000 locals).
    users = {m.get_tuple_name(isl.dim_type.in_) for m in _maps(writes.union(reads))}
    order = filter_map(poly.program_order, users)
    info = isl.UnionAccessInfo.from_sink(reads).set_must_source(writes)
    flow = info.set_schedule_map(order).compute_flow()
    return bool(flow.get_may_no_source().is_empty())


def _accesses(poly: PolyProgram, tensor: str) -> tuple[isl.UnionMap, isl.UnionMap]:
    space = poly.context.get_space()
    writes = isl.UnionMap.empty(space)
    reads = isl.UnionMap.empty(space)
    for s in _users(poly).get(tensor, ()):
        if s.write.get_tuple_name(isl.dim_type.out) == tensor:
            writes = writes.union(isl.UnionMap.from_map(s.write))
            if s.accumulates:
                reads = reads.union(isl.UnionMap.from_map(s.write))
        for r in s.reads:
            if r.read.tensor == tensor:
                if not r.affine:
                    raise ScheduleError(f"contract: {s.name} reads {tensor} at a "
                                        f"data-dependent index")
                reads = reads.union(isl.UnionMap.from_map(r.relation))
    return writes, reads


@lru_cache(maxsize=8)
def _users(poly: PolyProgram) -> dict[str, list[PolyStmt]]:
    """The statements accessing each tensor, in program order: a scan of every statement
    per local made contracting locals quadratic in the statements."""
    out: dict[str, list[PolyStmt]] = {}
    for s in poly.stmts:
        names = {s.write.get_tuple_name(isl.dim_type.out), *(r.read.tensor for r in s.reads)}
        for name in names:
            out.setdefault(name, []).append(s)
    return out


def _follows(accesses: isl.UnionMap, value: isl.UnionMap, d: int) -> bool:
    """Does every access index dimension ``d`` with the loop's value?"""
    for m in _maps(accesses):
        n = m.dim(isl.dim_type.out)
        index = m.project_out(isl.dim_type.out, d + 1, n - d - 1).project_out(
            isl.dim_type.out, 0, d)
        mine = value.intersect_domain(isl.UnionSet.from_set(m.domain()))
        if not isl.UnionMap.from_map(index.reset_tuple_id(isl.dim_type.out)).is_equal(mine):
            return False
    return True


def _check_flow(reads: isl.UnionMap, writes: isl.UnionMap, value: isl.UnionMap,
                order: isl.UnionMap, tensor: str, loop: str) -> None:
    info = isl.UnionAccessInfo.from_sink(reads).set_must_source(writes)
    flow = info.set_schedule_map(order).compute_flow()
    if not flow.get_may_no_source().is_empty():
        raise ScheduleError(f"contract: some reads of {tensor} see no write under loop "
                            f"{loop}")
    pairs = flow.get_may_dependence()
    across = pairs.apply_domain(value).apply_range(value).deltas()
    if not across.subtract(isl.UnionSet("{ [0] }")).is_empty():
        raise ScheduleError(f"contract: a value of {tensor} flows from one iteration of "
                            f"loop {loop} to another")


def slice_bytes(poly: PolyProgram, tensor: str, dim: int, values: dict[str, int]) -> int:
    t = poly.program.tensors[tensor]
    size = 1
    for d in range(t.rank):
        if d != dim:
            size *= values[f"{tensor}.{d}"]
    return size * int(DTYPES[t.dtype].np.itemsize)
