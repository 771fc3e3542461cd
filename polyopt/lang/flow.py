"""Exact instance-wise dataflow of a checked ``ir.Program``, for the front end's rewrites
(``copyflow``: reads that see through copies; ``dead``: writes that no read sees).

The polyhedral model (``polyopt.poly``) sits above the front end, so this is the small part
of it that the rewrites need, built from the statements' text: each statement's domain, its
write and its affine reads, and the source of a read: the writer instance whose value it
gets. With value semantics (a def with recurrences) that is the one writer of the element;
otherwise isl's ``compute_flow`` under the text's sequential order. A statement with
``op=!`` first fills its LHS range (``<name>_init``, ordered before its updates).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeVar

import islpy as isl

from polyopt import ir
from polyopt.lang.affine import NotAffine, context, from_expr

_SET = isl.dim_type.set
T = TypeVar("T", isl.UnionMap, isl.UnionSet)


@dataclass(frozen=True, eq=False)
class Access:
    """Read ``k`` (in ``reads_of`` order) of statement ``stmt``: its isl relation
    (``stmt[iters] -> tensor[dims]`` on the domain) or None when an index is not affine."""

    stmt: ir.Stmt
    k: int
    read: ir.Read
    relation: isl.Map | None


@dataclass(frozen=True, eq=False)
class Flow:
    program: ir.Program
    domains: dict[str, isl.Set]  # by statement name, and ``<name>_init`` for fills
    writes: dict[str, isl.Map]  # likewise: instance -> element
    reads: tuple[Access, ...]
    order: isl.UnionMap = field(repr=False)  # the text's sequential order (no value semantics)
    _written: dict[tuple[str, frozenset[str] | None], isl.UnionMap] = field(
        default_factory=dict, repr=False)  # writes_of's, by tensor and statements

    def writers(self, tensor: str) -> list[str]:
        """The names (fills included) of the instances that write ``tensor``."""
        return [n for n, w in self.writes.items() if w.get_tuple_name(isl.dim_type.out) == tensor]

    def writes_of(self, tensor: str, among: frozenset[str] | None = None) -> isl.UnionMap:
        """Every instance's write of ``tensor`` (of the statements ``among`` only, if given),
        made once: each read's source asks."""
        key = (tensor, among)
        got = self._written.get(key)
        if got is None:
            names = [n for n in self.writers(tensor) if among is None or n in among]
            got = self._written[key] = _union([self.writes[n] for n in names], self.space)
        return got

    @property
    def space(self) -> isl.Space:
        return context(self.program.sizes).get_space()

    def source(self, sinks: list[isl.Map], tensor: str, after: isl.UnionMap | None = None,
               among: frozenset[str] | None = None) -> isl.UnionMap:
        """reader instance -> writer instance of ``tensor`` whose value the ``sinks`` (reads
        of ``tensor``) get; with value semantics every writer of the element (a reduction's
        every instance). ``after``: the order of sinks that are no statement's. ``among``:
        only sources that are instances of these statements are wanted (with value
        semantics the others are left out at once: each element has one writer)."""
        sink = _union(sinks, self.space)
        if self.program.value_semantics or sink.is_empty():
            return sink.apply_range(self.writes_of(tensor, among).reverse())
        order = self.order if after is None else self.order.union(after)
        must, _ = compute_flow(sink, self.writes_of(tensor), None, None, order)
        return must.reverse()


def dataflow(program: ir.Program) -> Flow | None:
    """The accesses of ``program``; None when isl cannot model a statement."""
    ctx = context(program.sizes)
    domains: dict[str, isl.Set] = {}
    writes: dict[str, isl.Map] = {}
    reads: list[Access] = []
    times: list[isl.Map] = []
    depth = max((len(s.iters) for s in program.stmts), default=0)
    try:
        for pos, s in enumerate(program.stmts):
            dom = isl.Set(s.domain).intersect_params(ctx)
            if s.init:
                fill = dom.project_out(_SET, len(s.lhs), len(s.iters) - len(s.lhs))
                _add(program, s, f"{s.name}_init", s.lhs, fill, domains, writes)
                times.append(_time(program, f"{s.name}_init", s.lhs, pos, 0, depth, fill))
            _add(program, s, s.name, s.iters, dom, domains, writes)
            times.append(_time(program, s.name, s.iters, pos, 1, depth, dom))
            reads += [Access(s, k, r, _read_map(program, s, r, dom))
                      for k, r in enumerate(reads_of(s.rhs))]
    except isl.Error:
        return None
    return Flow(program, domains, writes, tuple(reads),
                _union(times, ctx.get_space()))


def reads_of(e: ir.Expr) -> list[ir.Read]:
    """The reads of ``e`` in the order ``ir.rewrite`` visits them (children first): read
    ``k`` of a statement is the ``k``-th that a rewrite sees."""
    out = [r for c in e.children() for r in reads_of(c)]
    return [*out, e] if isinstance(e, ir.Read) else out


def _add(program: ir.Program, s: ir.Stmt, name: str, iters: tuple[str, ...], dom: isl.Set,
         domains: dict[str, isl.Set], writes: dict[str, isl.Map]) -> None:
    dom = dom.set_tuple_name(name)
    domains[name] = dom
    writes[name] = _map(program, name, iters, s.tensor, s.lhs).intersect_domain(dom)


def _time(program: ir.Program, name: str, iters: tuple[str, ...], pos: int, phase: int,
          depth: int, dom: isl.Set) -> isl.Map:
    its = ", ".join(iters)
    pad = ", 0" * (depth - len(iters))
    text = f"{program.params} -> {{ {name}[{its}] -> [{pos}, {phase}{', ' if its else ''}" \
           f"{its}{pad}] }}"
    return isl.Map(text).intersect_domain(dom.set_tuple_name(name))


def _read_map(program: ir.Program, s: ir.Stmt, r: ir.Read, dom: isl.Set) -> isl.Map | None:
    if r.pad is not None:
        return None  # outside the tensor a padded read is its fill, not an element
    try:
        index = tuple(str(from_expr(ix, frozenset(s.iters))) for ix in r.indices)
        return _map(program, s.name, s.iters, r.tensor, index).intersect_domain(dom)
    except (NotAffine, isl.Error):
        return None


def _map(program: ir.Program, name: str, iters: tuple[str, ...], tensor: str,
         index: tuple[str, ...]) -> isl.Map:
    body = f"{name}[{', '.join(iters)}] -> {tensor}[{', '.join(index)}]"
    return isl.Map(f"{program.params} -> {{ {body} }}")


# How many statements (text order) one analysis of ``compute_flow`` takes as sinks, and how
# many before them it first searches for their sources: isl's analysis of one array over n
# statements is quadratic in n (the output dependences of 1000 statements updating one
# array: 4.0 s whole, 0.4 s in windows, one run with the test suite running alongside).
SINKS_PER_WINDOW = 32
REACH = 32


def compute_flow(sink: isl.UnionMap, must: isl.UnionMap | None, may: isl.UnionMap | None,
                 kill: isl.UnionMap | None, order: isl.UnionMap, width: int = SINKS_PER_WINDOW,
                 reach: int = REACH) -> tuple[isl.UnionMap, isl.UnionMap]:
    """(must, may) dependences, source -> sink, as isl's ``compute_flow`` finds them under
    ``order``, a sequence of statements (its first output is the statement's position).

    Found in windows: the sinks of ``width`` consecutive statements, against the sources of
    those and the ``reach`` before them. Where each sink has a must source or kill in its
    window, the window's answer is the whole program's (every source outside it comes
    earlier than that one); the sinks without one are analysed again with every source
    before them (isl: ``get_may_no_source``)."""
    where = _positions(order)
    roles = {"sink": sink, "must": must, "may": may, "kill": kill}
    placed = {k: _by_position(m, where) for k, m in roles.items() if m is not None}
    if where is None or len(set(where.values())) <= width + reach or None in placed.values():
        got = _flow(sink, must, may, kill, order)
        return got[0], got[1]
    groups = {k: g for k, g in placed.items() if g is not None}
    times = _by_position(order, where) or {}
    empty = isl.UnionMap.empty(sink.get_space())

    Window = tuple[isl.UnionMap | None, isl.UnionMap | None, isl.UnionMap | None, isl.UnionMap]

    def window(lo: int, hi: int) -> Window:
        """must, may, kill and the order of the statements at positions lo..hi-1."""
        must, may, kill = (_gather(groups[k], lo, hi, empty) if k in groups else None
                           for k in ("must", "may", "kill"))
        return must, may, kill, _gather(times, lo, hi, empty)

    musts, mays, left = [], [], []
    for block in sorted({pos // width for pos in groups["sink"]}):
        first, end = block * width, (block + 1) * width
        got = _flow(_gather(groups["sink"], first, end, empty), *window(first - reach, end))
        musts.append(got[0])
        mays.append(got[1])
        if first - reach > 0:  # sources before the window: not yet searched
            left.append(got[2])
    rest = union_all(left, empty)
    if not rest.is_empty():
        end = max(where[m.get_tuple_name(isl.dim_type.in_)] for m in maps_of(rest)) + 1
        got = _flow(rest, *window(0, end))
        musts.append(got[0])
        mays.append(got[1])
    return union_all(musts, empty), union_all(mays, empty)


def _flow(sink: isl.UnionMap, must: isl.UnionMap | None, may: isl.UnionMap | None,
          kill: isl.UnionMap | None,
          order: isl.UnionMap) -> tuple[isl.UnionMap, isl.UnionMap, isl.UnionMap]:
    info = isl.UnionAccessInfo.from_sink(sink)
    if must is not None:
        info = info.set_must_source(must)
    if may is not None:
        info = info.set_may_source(may)
    if kill is not None:
        info = info.set_kill(kill)
    got = info.set_schedule_map(order).compute_flow()
    return got.get_must_dependence(), got.get_may_dependence(), got.get_may_no_source()


def _positions(order: isl.UnionMap) -> dict[str, int] | None:
    """Each statement's position in ``order`` (its first output); None where one has no
    fixed position."""
    out = {}
    for m in maps_of(order):
        val = m.range().plain_get_val_if_fixed(_SET, 0)
        if not val.is_int():
            return None
        out[m.get_tuple_name(isl.dim_type.in_)] = val.to_python()
    return out


def _by_position(umap: isl.UnionMap,
                 where: dict[str, int] | None) -> dict[int, list[isl.Map]] | None:
    """The maps of ``umap`` by their statement's position; None for a statement ``where``
    does not place."""
    out: dict[int, list[isl.Map]] = {}
    for m in maps_of(umap):
        pos = (where or {}).get(m.get_tuple_name(isl.dim_type.in_))
        if pos is None:
            return None
        out.setdefault(pos, []).append(m)
    return out


def _gather(groups: dict[int, list[isl.Map]], lo: int, hi: int,
            empty: isl.UnionMap) -> isl.UnionMap:
    """The maps of ``groups`` at positions lo..hi-1, as one union."""
    return union_all([isl.UnionMap.from_map(m) for pos in range(max(lo, 0), hi)
                      for m in groups.get(pos, [])], empty)


def _union(maps: list[isl.Map], space: isl.Space) -> isl.UnionMap:
    return union_all([isl.UnionMap.from_map(m) for m in maps], isl.UnionMap.empty(space))


def union_all(parts: list[T], empty: T) -> T:
    """The union of ``parts`` (``empty`` when there are none), pairwise: one at a time,
    each union copies the whole so far (quadratic in the parts: 4 s for 500 statements'
    writes, asked once per read)."""
    if not parts:
        return empty
    while len(parts) > 1:
        parts = [parts[i].union(parts[i + 1]) if i + 1 < len(parts) else parts[i]
                 for i in range(0, len(parts), 2)]
    return parts[0]


def maps_of(umap: isl.UnionMap) -> list[isl.Map]:
    out: list[isl.Map] = []
    umap.foreach_map(out.append)
    return out


def sets_of(uset: isl.UnionSet) -> list[isl.Set]:
    out: list[isl.Set] = []
    uset.foreach_set(out.append)
    return out
