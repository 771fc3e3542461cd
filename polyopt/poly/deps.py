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
from polyopt.lang.flow import compute_flow, union_all
from polyopt.lang.flow import maps_of as _maps
from polyopt.lang.recurrence import sample_element
from polyopt.poly.model import PolyProgram, PolyStmt


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
    # A chain's dependences on itself are replaced by _chain (_unorder_reductions), so
    # they are not analysed: the exact flow of a border piece's chain on itself was 90 ms
    # of a 3x3 convolution's 140.
    apart = frozenset(s.name for s in _chains(pp))
    try:
        order = pp.program_order
        flow = _flow_by_array(pp.reads, must=pp.writes, may=None, order=order, apart=apart)
        # Memory-based, but each only up to the next write of the element: the later ones
        # follow through the output dependences (each write's on the one before it), so a
        # schedule respecting these respects all. Every pair was 12,700 maps for 160
        # statements updating one array, and 9.6 s of their compile.
        anti = _flow_by_array(pp.writes, must=None, may=pp.reads, order=order, apart=apart,
                              kill=pp.writes)
        output = _flow_by_array(pp.writes, must=pp.writes, may=None, order=order, apart=apart)
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
                   order: isl.UnionMap, apart: frozenset[str] = frozenset(),
                   kill: isl.UnionMap | None = None) -> isl.UnionMap:
    """``_flow`` one array at a time: a dependence joins accesses to one array, and isl's
    analysis of all of them at once took 3.9 s for a chain of 2000 statements through
    locals (1.1 s so). Each statement writes one array, so each pair of statements
    depends through one array, whose analysis is the same alone.

    The sinks of each statement in ``apart`` (reduction chains) are analysed without that
    statement's own accesses as sources: no dependence of a chain on itself, and the
    statements before a chain reach every instance of it that they reach the first of
    (its instances run together in program order, so nothing else writes in between):
    the same dependences once ``_unorder_reductions`` widens them over the chain."""
    sinks, musts, mays, kills = (by_array(m) for m in (sink, must, may, kill))
    times: dict[str, isl.Map] = {}
    order.foreach_map(lambda m: times.__setitem__(m.get_tuple_name(isl.dim_type.in_), m))
    out: list[isl.UnionMap] = []
    for array, whole in sinks.items():
        if array not in musts and array not in mays:
            continue
        for into, skip in _sink_groups(whole, apart):
            sources = [_without(m.get(array), skip) for m in (musts, mays, kills)]
            parts = [p for p in (into, *sources) if p is not None]
            users = {m.get_tuple_name(isl.dim_type.in_) for p in parts for m in _maps(p)}
            mine = union_all([isl.UnionMap.from_map(times[u]) for u in sorted(users)],
                             isl.UnionMap.empty(order.get_space()))
            out.append(_flow(into, sources[0] if must is not None else None,
                             sources[1] if may is not None else None, mine,
                             sources[2] if kill is not None else None))
    return union_all(out, isl.UnionMap.empty(sink.get_space()))


def _sink_groups(sinks: isl.UnionMap,
                 apart: frozenset[str]) -> list[tuple[isl.UnionMap, str | None]]:
    """``sinks`` as (the sinks of the statements outside ``apart``, None) and (the sinks of
    one statement of ``apart``, its name) for each of those, the empty groups left out."""
    if not apart:
        return [(sinks, None)]
    groups: dict[str | None, list[isl.UnionMap]] = {}
    for m in _maps(sinks):
        name = m.get_tuple_name(isl.dim_type.in_)
        groups.setdefault(name if name in apart else None, []).append(isl.UnionMap.from_map(m))
    return [(union_all(g, isl.UnionMap.empty(sinks.get_space())), name)
            for name, g in groups.items()]


def _without(accesses: isl.UnionMap | None, stmt: str | None) -> isl.UnionMap | None:
    """``accesses`` less those of statement ``stmt``."""
    if accesses is None or stmt is None:
        return accesses
    kept = [isl.UnionMap.from_map(m) for m in _maps(accesses)
            if m.get_tuple_name(isl.dim_type.in_) != stmt]
    return union_all(kept, isl.UnionMap.empty(accesses.get_space()))


def by_array(umap: isl.UnionMap | None) -> dict[str, isl.UnionMap]:
    """The accesses in ``umap`` (statement -> array) by array."""
    if umap is None:
        return {}
    groups: dict[str, list[isl.UnionMap]] = {}
    for m in _maps(umap):
        groups.setdefault(m.get_tuple_name(isl.dim_type.out), []).append(
            isl.UnionMap.from_map(m))
    return {a: union_all(g, isl.UnionMap.empty(umap.get_space())) for a, g in groups.items()}


def _flow(sink: isl.UnionMap, must: isl.UnionMap | None, may: isl.UnionMap | None,
          order: isl.UnionMap, kill: isl.UnionMap | None = None) -> isl.UnionMap:
    return compute_flow(sink, must, may, kill, order)[1]


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
    accumulation), in program order. A statement of one piece that does not accumulate
    writes each element once: none (most statements of a stencil)."""
    empty = isl.UnionMap.empty(pp.domain.get_space())
    if len(pieces) == 1 and not pieces[0].accumulates:
        return Deps(empty, empty, empty)
    writes = union_all([isl.UnionMap.from_map(s.write) for s in pieces], empty)
    reads = union_all([isl.UnionMap.from_map(s.write) for s in pieces if s.accumulates], empty)
    order = pp.program_order.intersect_domain(
        union_all([isl.UnionSet.from_set(s.domain) for s in pieces],
                  isl.UnionSet.empty(pp.domain.get_space())))
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
                    f"{s.stmt.name} reads {sample_element(missing)} of local '{r.read.tensor}', "
                    f"which no statement writes", pp.program.source, r.read.pos)


def _check_self_reads(pp: PolyProgram, flow: isl.UnionMap) -> None:
    """An instance that reads the element it writes itself (not as an accumulation)."""
    loops = flow.intersect(pp.domain.identity())
    if loops.is_empty():
        return
    s = pp.stmt(_maps(loops)[0].get_tuple_name(isl.dim_type.in_))
    raise LanguageError(f"{s.stmt.name} reads the element of '{s.stmt.tensor}' that it "
                        f"writes: with recurrences a read gets the element's one value, so "
                        f"this is a dependence cycle", pp.program.source, s.stmt.pos)


def relaid_deps(before: PolyProgram, deps: Deps, after: PolyProgram) -> Deps | None:
    """The dependences of ``after``, a relayout of ``before`` (dependences ``deps``) that
    reads inputs through packed copies (``poly.relayout.pack_program``, ``phase_program``),
    derived without a dataflow analysis; None when ``after`` changes more than that (an
    output computed in a blocked local).

    Why: ``after`` runs ``before``'s statement instances (checked: the same domains, writes
    and reads but of the packed inputs), after copies that run first. A padded read's
    border piece is absorbed into its statement (the copy holds the padding): that
    statement's instances are its pieces', renamed; its pieces ran one after the other,
    it runs them interleaved, which changes only the order among its own instances. An
    input is never written, so the reads that moved to the copies take part in no
    dependence among the statements. So the dependences between different statements are
    ``before``'s, renamed: between a statement and a reduction chain they are widened to
    every instance of the chain updating the same element (``compute_deps``), and a merged
    chain's are widened again over all its pieces' instances (the pieces' last writer or
    first reader of an element is one of the merged instances, whose widening they all
    share); the order among a merged chain's own instances is its new reduction chain (a
    merged statement that is not a chain must not accumulate). Each copied element is
    written once (checked: the copies' writes are injective), before every read: its
    readers' flow comes from that instance (widened into chains), and no anti or output
    dependence involves a copy. A test compares the result with a fresh analysis."""
    if before.program.value_semantics:  # its dependences are not program-order ones
        return None
    olds = {s.name for s in before.stmts}
    new = [s for s in after.stmts if s.name not in olds]
    kept = after.stmts[len(new):]
    if (not new or tuple(new) != after.stmts[:len(new)] or any(s.name not in olds for s in kept)
            or not after.context.is_equal(before.context)):
        return None
    pieces = _pieces(before, kept)
    copied = {s.stmt.tensor for s in new}
    if pieces is None or not _same_instances(before, after, pieces, copied):
        return None
    writes = union_all([isl.UnionMap.from_map(s.write.intersect_domain(s.domain)) for s in new],
                       isl.UnionMap.empty(after.context.get_space()))
    if any(r.read.tensor in copied for s in new for r in s.reads) or not writes.is_injective():
        return None
    rename = {p.name: n for n, ps in pieces.items() for p in ps}
    maps = [_renamed(m, rename) for m in (deps.flow, deps.anti, deps.output)]
    chains = {s.name: s for s in _chains(after)}
    flow = maps[0]
    for s in kept:
        reads = [isl.UnionMap.from_map(r.relation) for r in s.reads if r.read.tensor in copied]
        if reads:
            flow = flow.union(union_all([writes.apply_range(r.reverse()) for r in reads],
                                        isl.UnionMap.empty(writes.get_space()))
                              .intersect_params(after.context))
    maps[0] = flow
    for name, s in chains.items():  # the copies' flow in; a merged chain's pieces
        if len(pieces[name]) > 1 or any(r.read.tensor in copied for r in s.reads):
            maps = _widened(maps, s)
    reduction = union_all([_chain(s, _same(s)) for s in chains.values()],
                          isl.UnionMap.empty(after.context.get_space())) if chains else None
    flow, anti, output = (m.coalesce() for m in maps)
    return Deps(flow, anti, output, reduction)


def _pieces(before: PolyProgram, kept: tuple[PolyStmt, ...]) -> dict[str, list[PolyStmt]] | None:
    """The statements of ``before`` behind each statement of ``after`` (``kept``): the one
    of the same name, and the border pieces whose statement lost its border; None when a
    statement of ``before`` has no counterpart."""
    out: dict[str, list[PolyStmt]] = {s.name: [] for s in kept}
    unguarded = {s.stmt.name: s.name for s in kept if not s.guarded}
    for p in before.stmts:
        name = p.name if p.name in out else unguarded.get(p.stmt.name) if p.guarded else None
        if name is None:
            return None
        out[name].append(p)
    return out


def _same_instances(before: PolyProgram, after: PolyProgram,
                    pieces: dict[str, list[PolyStmt]], copied: set[str]) -> bool:
    """Does each statement of ``after`` run its pieces' instances, write what they wrote
    and read what they read, but inputs now read through ``copied`` tensors; and is it a
    reduction chain when they were (a merged one that is not must not accumulate)?"""
    inputs = {t.name for t in before.program.inputs}
    was, now = {s.name for s in _chains(before)}, {s.name for s in _chains(after)}
    for name, ps in pieces.items():
        n = after.stmt(name)
        if any((p.name in was) != (name in now) for p in ps) or (
                len(ps) > 1 and n.accumulates and name not in now):
            return False
        doms = [p.domain.set_tuple_name(name) for p in ps]
        if not union_all([isl.UnionSet.from_set(d) for d in doms], isl.UnionSet.empty(
                n.domain.get_space())).is_equal(isl.UnionSet.from_set(n.domain)):
            return False
        if not all(_same_accesses(p, n, d, copied, inputs) for p, d in zip(ps, doms,
                                                                         strict=True)):
            return False
    return True


def _same_accesses(p: PolyStmt, n: PolyStmt, dom: isl.Set, copied: set[str],
                   inputs: set[str]) -> bool:
    """Does ``n`` over piece ``p``'s instances ``dom`` write and read what ``p`` did (but for
    ``p``'s reads of inputs that ``n`` reads through ``copied`` tensors)?"""
    if (p.kind != n.kind or p.stmt.op != n.stmt.op or len(p.reads) != len(n.reads)
            or not n.write.intersect_domain(dom).is_equal(
                p.write.intersect_domain(p.domain).set_tuple_name(isl.dim_type.in_, n.name))):
        return False
    for x, y in zip(p.reads, n.reads, strict=True):
        if y.read.tensor in copied:
            if x.read.tensor not in inputs:
                return False
        elif x.read.tensor != y.read.tensor or x.affine != y.affine or not y.relation \
                .intersect_domain(dom).is_equal(x.relation.set_tuple_name(isl.dim_type.in_,
                                                                          n.name)):
            return False
    return True


def _renamed(umap: isl.UnionMap, rename: dict[str, str]) -> isl.UnionMap:
    """``umap`` with each statement named as ``rename`` says."""
    out = isl.UnionMap.empty(umap.get_space())
    for m in _maps(umap):
        for kind in (isl.dim_type.in_, isl.dim_type.out):
            m = m.set_tuple_name(kind, rename.get(m.get_tuple_name(kind), m.get_tuple_name(kind)))
        out = out.union(isl.UnionMap.from_map(m))
    return out


def _widened(maps: list[isl.UnionMap], s: PolyStmt) -> list[isl.UnionMap]:
    """``maps`` without chain ``s`` on itself, the dependences into and out of it widened
    to every instance updating the same element (``_unorder_reductions``' step)."""
    same = _same(s)
    out = []
    for m in maps:
        rest, into, out_of = _around(m, s.name)
        out.append(rest.union(into.apply_range(same)).union(same.apply_range(out_of)))
    return out
