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

from polyopt.errors import PolyoptError
from polyopt.poly.model import PolyProgram, PolyStmt, union_all


@dataclass(frozen=True, eq=False)
class Deps:
    flow: isl.UnionMap
    anti: isl.UnionMap
    output: isl.UnionMap
    reduction: isl.UnionMap | None = None  # unordered accumulation chains (see above)

    @cached_property
    def all(self) -> isl.UnionMap:
        """Every conflict, reductions included: what parallel loops must not carry."""
        out = self.flow.union(self.anti).union(self.output).coalesce()
        # Not coalesced with the rest: see _chain.
        return out if self.reduction is None else out.union(self.reduction)

    def named(self) -> list[tuple[str, isl.UnionMap]]:
        return [("flow", self.flow), ("anti", self.anti), ("output", self.output)]

    def __str__(self) -> str:
        lines = [f"{kind}: {m}" for kind, m in self.named()]
        return "\n".join([*lines, f"reduction (unordered): {self.reduction}"])


def compute_deps(pp: PolyProgram) -> Deps:
    """Flow, anti and output dependences of ``pp`` under its sequential program order."""
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


def _chains(pp: PolyProgram) -> list[PolyStmt]:
    """The accumulating statements whose instances may run in any order (the module's
    docstring): reductions that read their target only through the update."""
    return [s for s in pp.stmts if s.accumulates and s.stmt.op in ("+", "*", "min", "max")
            and all(r.read.tensor != s.stmt.tensor and r.affine for r in s.reads)]


def _same(s: PolyStmt) -> isl.UnionMap:
    """Pairs of instances of ``s`` that update the same element."""
    write = isl.UnionMap.from_map(s.write)
    return write.apply_range(write.reverse())


def _unorder_reductions(pp: PolyProgram, deps: Deps) -> Deps:
    chains = _chains(pp)
    if not chains:
        return deps
    flow, anti, output = deps.flow, deps.anti, deps.output
    reduction = isl.UnionMap.empty(flow.get_space())
    for s in chains:
        same = _same(s)
        maps = []
        for m in (flow, anti, output):
            rest, into, out_of = _around(m, s.name)
            maps.append(rest.union(into.apply_range(same))
                        .union(same.apply_range(out_of)).coalesce())
        flow, anti, output = maps
        reduction = reduction.union(_chain(s, same))
    return Deps(flow, anti, output, reduction)


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


def relaid_deps(before: PolyProgram, deps: Deps, after: PolyProgram) -> Deps | None:
    """The dependences of ``after``, a relayout of ``before`` (dependences ``deps``) that
    reads inputs through packed copies (``poly.relayout.pack_program``, ``phase_program``),
    derived without a dataflow analysis; None when ``after`` changes more than that (an
    output computed in a blocked local, a padded read whose border piece the copy absorbed).

    Why they are ``deps`` plus the copies' flow into their readers: ``after`` runs the same
    statement instances as ``before`` (checked: names, domains, writes, every read but those
    of the packed inputs), in the same order, after copies that run first. An input is never
    written, so its reads, and their replacements by reads of the copies, take part in no
    dependence among those instances: the dataflow among them is ``before``'s. Each element
    of a copy is written once, by one copy instance (checked: the copies' writes are
    injective), before any read of it: its readers' flow comes from that instance, and no
    anti or output dependence involves a copy. A reduction chain's flow in is widened to
    every instance updating the same element, as ``compute_deps`` does; the chains are
    ``before``'s (checked). A test compares the result with a fresh analysis."""
    new = [s for s in after.stmts if s.name not in {t.name for t in before.stmts}]
    kept = [s for s in after.stmts if s not in new]
    if (not new or len(kept) != len(before.stmts) or after.stmts[:len(new)] != tuple(new)
            or not after.context.is_equal(before.context)
            or [s.name for s in _chains(after)] != [s.name for s in _chains(before)]):
        return None
    copied = {s.stmt.tensor for s in new}
    inputs = {t.name for t in before.program.inputs}
    if not all(_same_stmt(a, b, copied, inputs) for a, b in zip(before.stmts, kept,
                                                                 strict=True)):
        return None
    writes = union_all([isl.UnionMap.from_map(s.write.intersect_domain(s.domain)) for s in new],
                       isl.UnionMap.empty(after.context.get_space()))
    if any(r.read.tensor in copied for s in new for r in s.reads) or not writes.is_injective():
        return None
    chains = {s.name for s in _chains(after)}
    flow = deps.flow
    for s in kept:
        reads = [isl.UnionMap.from_map(r.relation) for r in s.reads if r.read.tensor in copied]
        if not reads:
            continue
        into = union_all([writes.apply_range(r.reverse()) for r in reads],
                         isl.UnionMap.empty(writes.get_space())).intersect_params(after.context)
        flow = flow.union(into.apply_range(_same(s)) if s.name in chains else into)
    return Deps(flow.coalesce(), deps.anti, deps.output, deps.reduction)


def _same_stmt(a: PolyStmt, b: PolyStmt, copied: set[str], inputs: set[str]) -> bool:
    """Are ``a`` and ``b`` the same instances, writing and reading the same, but for ``b``
    reading ``copied`` tensors where ``a`` read inputs (which no statement writes)?"""
    if (a.name != b.name or a.kind != b.kind or a.stmt.op != b.stmt.op
            or len(a.reads) != len(b.reads)
            or not a.domain.is_equal(b.domain) or not a.write.is_equal(b.write)):
        return False
    mine = [r for r in b.reads if r.read.tensor not in copied]
    packed = {r.read.tensor for r in a.reads} - {r.read.tensor for r in mine}
    if not packed <= inputs:
        return False
    theirs = [r for r in a.reads if r.read.tensor not in packed]
    return len(theirs) == len(mine) and all(
        x.read.tensor == y.read.tensor and x.affine == y.affine
        and x.relation.is_equal(y.relation) for x, y in zip(theirs, mine, strict=True))
