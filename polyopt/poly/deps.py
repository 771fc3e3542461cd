"""Exact dependences from isl's dataflow analysis (``UnionAccessInfo.compute_flow``).

``flow`` (read after write) is exact value-based dataflow; ``anti`` (write after read) and
``output`` (write after write) are memory-based, so every schedule that respects all three
computes what the sequential program computes.

Reductions are unordered in TC (``+=!`` sums in any order), so the dependences that chain
the instances of one accumulating statement through its target are kept apart, in
``reduction``: a schedule may run them in any order, but never two at once (they conflict
in ``all``, which parallelism checks use). The dependences that enter or leave such a chain
are widened to every instance of the chain that updates the same element, since without
the chain nothing else orders them.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import islpy as isl

from polyopt.errors import LanguageError, PolyoptError
from polyopt.poly.model import PolyProgram, PolyStmt, union_all


@dataclass(frozen=True, eq=False)
class Deps:
    flow: isl.UnionMap
    anti: isl.UnionMap
    output: isl.UnionMap
    reduction: isl.UnionMap | None = None  # unordered accumulation chains (see above)
    # False: keep one piece per read (value semantics: coalescing a stencil's reads gave
    # shapes on which isl's scheduler took minutes for heat-3d, 0.02 s without).
    coalesce: bool = True

    @cached_property
    def all(self) -> isl.UnionMap:
        """Every conflict, reductions included: what parallel loops must not carry."""
        out = self.flow.union(self.anti).union(self.output)
        out = out.coalesce() if self.coalesce else out
        # Not coalesced with the rest: see _chain.
        return out if self.reduction is None else out.union(self.reduction)

    def named(self) -> list[tuple[str, isl.UnionMap]]:
        return [("flow", self.flow), ("anti", self.anti), ("output", self.output)]

    def __str__(self) -> str:
        lines = [f"{kind}: {m}" for kind, m in self.named()]
        return "\n".join([*lines, f"reduction (unordered): {self.reduction}"])


def compute_deps(pp: PolyProgram) -> Deps:
    """Flow, anti and output dependences of ``pp`` under its sequential program order (or,
    for a def with recurrences, under value semantics: ``_value_deps``)."""
    if pp.program.value_semantics:
        return _value_deps(pp)
    try:
        order = pp.program_order
        flow = _flow_by_array(pp.reads, must=pp.writes, may=None, order=order)
        anti = _flow_by_array(pp.writes, must=None, may=pp.reads, order=order)
        output = _flow_by_array(pp.writes, must=None, may=pp.writes, order=order)
    except isl.Error as e:
        raise PolyoptError(f"isl dependence analysis failed for '{pp.program.name}': {e}") from e
    ctx = pp.context
    flow, anti, output = (m.intersect_params(ctx).coalesce() for m in (flow, anti, output))
    return _unorder_reductions(pp, Deps(flow, anti, output))


def _unorder_reductions(pp: PolyProgram, deps: Deps) -> Deps:
    chains = [s for s in pp.stmts if s.accumulates and s.stmt.op in ("+", "*", "min", "max")
              and all(r.read.tensor != s.stmt.tensor and r.affine for r in s.reads)]
    if not chains:
        return deps
    flow, anti, output = deps.flow, deps.anti, deps.output
    reduction = isl.UnionMap.empty(flow.get_space())
    for s in chains:
        write = isl.UnionMap.from_map(s.write)
        same = write.apply_range(write.reverse())  # instances updating the same element
        maps = []
        for m in (flow, anti, output):
            rest, into, out_of = _around(m, s.name)
            m = rest.union(into.apply_range(same)).union(same.apply_range(out_of))
            maps.append(m.coalesce() if deps.coalesce else m)
        flow, anti, output = maps
        reduction = reduction.union(_chain(s, same))
    return Deps(flow, anti, output, reduction, deps.coalesce)


def _around(deps: isl.UnionMap, stmt: str) -> tuple[isl.UnionMap, ...]:
    """``deps`` without those of ``stmt`` on itself, those into ``stmt`` from others and
    those out of it to others, split by statement name (subtracting the chain took 0.2 s
    a map for 8 reduction indices)."""
    parts = [isl.UnionMap.empty(deps.get_space()) for _ in range(3)]

    def add(m: isl.Map) -> None:
        src, dst = (m.get_tuple_name(d) for d in (isl.dim_type.in_, isl.dim_type.out))
        um = isl.UnionMap.from_map(m)
        if src != stmt or dst != stmt:
            parts[0] = parts[0].union(um)
        if dst == stmt != src:
            parts[1] = parts[1].union(um)
        elif src == stmt != dst:
            parts[2] = parts[2].union(um)

    deps.foreach_map(add)
    return tuple(parts)


def _chain(s: PolyStmt, same: isl.UnionMap) -> isl.UnionMap:
    """The dependences of accumulating statement ``s`` on itself: every earlier instance
    updating the same element (the only tensor it both reads and writes is its target, so
    its flow, anti and output dependences on itself are all among these, and the output
    ones are all of these). Built as the lexicographic order, one piece per iterator, and
    never coalesced: over extents of 2, coalescing merged those pieces into a few with
    dozens of constraints each, on which isl's scheduler took 38 s for 7 reduction
    indices (0.007 s so) and did not finish for 8."""
    return same.intersect(isl.UnionMap.from_map(s.domain.lex_lt_set(s.domain)))


def _flow_by_array(sink: isl.UnionMap, must: isl.UnionMap | None, may: isl.UnionMap | None,
                   order: isl.UnionMap) -> isl.UnionMap:
    """``_flow`` one array at a time: a dependence joins accesses to one array, and isl's
    analysis of all of them at once took 3.9 s for a chain of 2000 statements through
    locals (1.1 s so). Each statement writes one array, so each pair of statements
    depends through one array, whose analysis is the same alone."""
    sinks, musts, mays = (_by_array(m) for m in (sink, must, may))
    times: dict[str, isl.Map] = {}
    order.foreach_map(lambda m: times.__setitem__(m.get_tuple_name(isl.dim_type.in_), m))
    out: list[isl.UnionMap] = []
    for array, into in sinks.items():
        if array not in musts and array not in mays:
            continue
        parts = [p for p in (into, musts.get(array), mays.get(array)) if p is not None]
        users = {m.get_tuple_name(isl.dim_type.in_) for p in parts for m in _maps(p)}
        mine = union_all([isl.UnionMap.from_map(times[u]) for u in sorted(users)],
                         isl.UnionMap.empty(order.get_space()))
        out.append(_flow(into, musts.get(array) if must is not None else None,
                         mays.get(array) if may is not None else None, mine))
    return union_all(out, isl.UnionMap.empty(sink.get_space()))


def _by_array(umap: isl.UnionMap | None) -> dict[str, isl.UnionMap]:
    """The accesses in ``umap`` by array."""
    if umap is None:
        return {}
    groups: dict[str, list[isl.UnionMap]] = {}
    for m in _maps(umap):
        groups.setdefault(m.get_tuple_name(isl.dim_type.out), []).append(
            isl.UnionMap.from_map(m))
    return {a: union_all(g, isl.UnionMap.empty(umap.get_space())) for a, g in groups.items()}


def _maps(umap: isl.UnionMap) -> list[isl.Map]:
    out: list[isl.Map] = []
    umap.foreach_map(out.append)
    return out


def _flow(sink: isl.UnionMap, must: isl.UnionMap | None, may: isl.UnionMap | None,
          order: isl.UnionMap) -> isl.UnionMap:
    info = isl.UnionAccessInfo.from_sink(sink)
    if must is not None:
        info = info.set_must_source(must)
    if may is not None:
        info = info.set_may_source(may)
    return info.set_schedule_map(order).compute_flow().get_may_dependence()


# ------------------------------------------------------------------ value semantics (§5.5)
def _value_deps(pp: PolyProgram) -> Deps:
    """The dependences of a def with recurrences. Each element is written by one statement
    (a reduction's instances together; ``lang.recurrence`` checks it), so a read's source
    is the writer of its element, wherever that statement stands in the text: the flow
    dependences join writes and reads of the same element. Within one statement (its init,
    interior and border pieces) the accumulation keeps program order. With one writer per
    element there is nothing to overwrite: no anti or output dependences across statements.
    """
    _check_written(pp)
    by_stmt: dict[str, list[PolyStmt]] = {}
    for s in pp.stmts:
        by_stmt.setdefault(s.stmt.name, []).append(s)
    empty = isl.UnionMap.empty(pp.domain.get_space())
    within = [_within(pp, pieces) for pieces in by_stmt.values()]
    flow = union_all([w.flow for w in within] + _element_flow(pp), empty)
    anti = union_all([w.anti for w in within], empty)
    output = union_all([w.output for w in within], empty)
    ctx = pp.context
    flow, anti, output = (m.intersect_params(ctx) for m in (flow, anti, output))
    _check_self_reads(pp, flow)
    return _unorder_reductions(pp, Deps(flow, anti, output, coalesce=False))


def _within(pp: PolyProgram, pieces: list[PolyStmt]) -> Deps:
    """The dependences among the pieces of one statement through its target (its
    accumulation), in program order."""
    names = {s.name for s in pieces}
    empty = isl.UnionMap.empty(pp.domain.get_space())
    writes = union_all([isl.UnionMap.from_map(s.write) for s in pieces], empty)
    reads = union_all([isl.UnionMap.from_map(s.write) for s in pieces if s.accumulates], empty)
    order = pp.program_order.intersect_domain(
        union_all([isl.UnionSet.from_set(s.domain) for s in pieces],
                  isl.UnionSet.empty(pp.domain.get_space())))
    if not names or writes.is_empty():
        return Deps(empty, empty, empty)
    flow = _flow(reads, writes, None, order) if not reads.is_empty() else empty
    anti = _flow(writes, None, reads, order) if not reads.is_empty() else empty
    output = _flow(writes, None, writes, order)
    return Deps(flow, anti, output)


def _element_flow(pp: PolyProgram) -> list[isl.UnionMap]:
    """writer instance -> reader instance, for every read of an element some statement
    writes (a reduction's every update, so the read sees its final value)."""
    writers: dict[str, list[PolyStmt]] = {}
    for s in pp.stmts:
        writers.setdefault(s.stmt.tensor, []).append(s)
    out = []
    for s in pp.stmts:
        for r in s.reads:
            for w in writers.get(r.read.tensor, []):
                m = w.write.apply_range(r.relation.reverse())
                if not m.is_empty():
                    out.append(isl.UnionMap.from_map(m))
    return out


def _check_written(pp: PolyProgram) -> None:
    """A read of a local's element that no statement writes has no value."""
    locals_ = {t.name for t in pp.program.locals}
    written: dict[str, isl.Set] = {}
    for s in pp.stmts:
        image = s.write.range()
        old = written.get(s.stmt.tensor)
        written[s.stmt.tensor] = image if old is None else old.union(image)
    for s in pp.stmts:
        for r in s.reads:
            if r.read.tensor not in locals_ or not r.affine:
                continue
            missing = r.relation.range().subtract(written[r.read.tensor]).intersect_params(
                pp.context)
            if not missing.is_empty():
                raise LanguageError(
                    f"{s.stmt.name} reads {_sample(missing)} of local '{r.read.tensor}', "
                    f"which no statement writes", pp.program.source, r.read.pos)


def _check_self_reads(pp: PolyProgram, flow: isl.UnionMap) -> None:
    """An instance that reads the element it writes itself (not as an accumulation)."""
    loops = flow.intersect(pp.domain.identity())
    if loops.is_empty():
        return
    name = _first_name(loops)
    s = pp.stmt(name)
    raise LanguageError(f"{s.stmt.name} reads the element of '{s.stmt.tensor}' that it "
                        f"writes: with recurrences a read gets the element's one value, so "
                        f"this is a dependence cycle", pp.program.source, s.stmt.pos)


def _first_name(umap: isl.UnionMap) -> str:
    names: list[str] = []
    umap.foreach_map(lambda m: names.append(m.get_tuple_name(isl.dim_type.in_)))
    return names[0]


def _sample(s: isl.Set) -> str:
    """One element of ``s`` as ``T(1, 2)`` (at the smallest sizes isl finds)."""
    point = s.sample_point()
    n = s.dim(isl.dim_type.set)
    coords = [str(point.get_coordinate_val(isl.dim_type.set, k).to_python()) for k in range(n)]
    return f"{s.get_tuple_name()}({', '.join(coords)})"
