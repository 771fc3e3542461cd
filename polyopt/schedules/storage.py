"""Storage contraction modulo (reference §5.5, issue 17): a local of a def with recurrences
whose elements die a bounded distance after they are written along one dimension is stored
modulo that distance — jacobi's ``(T, N, N)`` planes as ``(2, N, N)``.

The modulus is chosen after scheduling, for the schedule at hand, along a local's first
dimension (the step of a recurrence, by the convention of its declaration ``(T, N, N)``):
storing ``X(x0, ..)`` at ``X(x0 % m, ..)`` makes elements ``k`` planes apart share a cell
whenever ``m`` divides ``k``. The later one may be written only after every read of the
earlier one (memory-based anti dependences) and after the earlier one's write (output
dependences). One isl computation against the schedule's order finds every distance ``k``
at which some such pair runs the wrong way (``_clashes``); the smallest ``m`` that divides
none of them is the minimal modulus for the schedule (where the lattice method of Darte,
Schreiber and Villard finds minimal moduli for any linear mapping). A statement that stores
the same value in every plane (a boundary copied from an input) may overwrite its own cells
in any order.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import islpy as isl

from polyopt import ir
from polyopt.lang.flow import union_all
from polyopt.poly.deps import Deps
from polyopt.poly.model import PolyProgram
from polyopt.schedules.legality import carried
from polyopt.schedules.marks import Tag
from polyopt.schedules.schedule import Schedule
from polyopt.schedules.tree import loops

_SET = isl.dim_type.set

# The largest modulus taken: a recurrence whose values live longer than this many planes
# saves too little to be worth a modulo in every index.
MAX_MODULUS = 16


@dataclass(frozen=True)
class Modulo:
    """``tensor`` stored with dimension ``dim`` taken modulo ``modulus``."""

    tensor: str
    dim: int
    modulus: int
    extent: int  # the declared extent of ``dim``

    def __str__(self) -> str:
        return (f"{self.tensor}: stored modulo {self.modulus} along dim {self.dim} "
                f"({self.modulus} of {self.extent})")


def modulo_storage(sched: Schedule) -> tuple[Modulo, ...]:
    """For each local of a def with recurrences (all sizes bound; not kept as slices, not
    read through padding), the smallest modulus along its first dimension that the
    schedule allows (its order, and no parallel loop carrying what sharing cells adds), if
    one saves storage."""
    pp, smap = sched.poly, sched.map
    sliced = {t for t, _, _ in sched.contractions}
    program = pp.program
    if not program.value_semantics or program.sizes:
        return ()
    padded = {r.read.tensor for s in pp.stmts for r in s.reads if r.read.pad is not None}
    # a packed copy (pack) is a stream the micro-kernels read whole, not a recurrence
    candidates = [t for t in program.locals if t.name not in sliced and t.name not in padded
                  and t.name not in sched.buffers and t.rank >= 2]
    if not candidates:
        return ()
    before = smap.lex_lt_union_map(smap)  # a -> b: a runs before b
    out = []
    for t in candidates:
        extent = ir.extent_value(t.shape[0], {})  # a block count is text: floor((N + 3)/4)
        clashes = _clashes(pp, before.reverse(), t.name, t.rank)
        m = next((m for m in range(1, min(extent, MAX_MODULUS + 1))
                  if not any(k % m == 0 for k in clashes)
                  and _parallel_safe(sched, _shared(pp, t.name, t.rank, m))), None)
        if m is not None:
            out.append(Modulo(t.name, 0, m, extent))
    return tuple(out)


def _parallel_safe(sched: Schedule, shared: Deps) -> bool:
    """No parallel loop carries a dependence that sharing cells adds (its iterations run
    at once: the schedule's order says nothing about them)."""
    return all(carried(sched.root, lp, shared, sched.poly.domain).is_empty()
               for lp in loops(sched.root) if Tag.PARALLEL in lp.tags)


def _shared(pp: PolyProgram, tensor: str, rank: int, m: int) -> Deps:
    """The memory-based dependences of storing ``tensor`` modulo ``m`` along dimension 0:
    the reads and write of an element before the writes of the elements that share its
    cell in later planes (as anti dependences: a parallel loop must carry none of them)."""
    alias = _planes(pp, tensor, rank, f"exists (q : q >= 1 and y0 = x0 + {m} * q)")
    empty = isl.UnionMap.empty(pp.context.get_space())
    shared = union_all([users.apply_range(alias.apply_range(later.reverse()))
                        for users, later in _sharing(pp, tensor)], empty)
    return Deps(empty, shared.subtract(pp.domain.identity()), empty)


def _clashes(pp: PolyProgram, after: isl.UnionMap, tensor: str, rank: int) -> set[int]:
    """The distances ``k >= 1`` along dimension 0 at which sharing a cell breaks the
    schedule: an element's read runs after the write of the element ``k`` planes on, or
    its write after that one's (``after``: b -> a, a runs before b)."""
    later_plane = _planes(pp, tensor, rank, "y0 > x0")
    out: set[int] = set()
    for users, later in _sharing(pp, tensor):
        # [user -> writer] -> [element -> its later element], for the pairs whose writer
        # runs first: exact per pair of elements (a composition through the instances
        # would mix in the other elements a user reads).
        pairs = users.product(later).intersect_domain(after.wrap())
        elements = pairs.range().unwrap().intersect(later_plane)
        elements.deltas().foreach_set(lambda d: d.foreach_point(
            lambda p: out.add(int(p.get_coordinate_val(_SET, 0).to_python()))))
    return out


def _sharing(pp: PolyProgram, tensor: str) -> list[tuple[isl.UnionMap, isl.UnionMap]]:
    """(users, later writes) per pair of statements writing ``tensor``: the reads and the
    write of the first one's elements, and the second one's writes, which may share their
    cells. A statement storing the same value in every plane (``_plane_invariant``) shares
    with its own writes harmlessly: that pair is left out."""
    writers = [s for s in pp.stmts if s.stmt.tensor == tensor]
    invariant = {s.name for s in writers if _plane_invariant(s.stmt)}
    out = []
    for w in writers:
        reads = [r.relation.intersect_range(w.write.range()) for s in pp.stmts
                 for r in s.reads if r.read.tensor == tensor]
        users = _union([*reads, w.write], pp)
        out += [(users, isl.UnionMap.from_map(w2.write)) for w2 in writers
                if not (w2.stmt is w.stmt and w.name in invariant)]
    return out


def _planes(pp: PolyProgram, tensor: str, rank: int, condition: str) -> isl.UnionMap:
    """``tensor[x0, ...] -> tensor[y0, ...]``: the elements of the same cell position in
    other planes (``y0`` against ``x0`` as ``condition`` says)."""
    xs = [f"x{k}" for k in range(rank)]
    ys = ["y0", *xs[1:]]
    return isl.UnionMap(f"{pp.program.params} -> {{ {tensor}[{', '.join(xs)}] -> "
                        f"{tensor}[{', '.join(ys)}] : {condition} }}")


def _plane_invariant(stmt: ir.Stmt) -> bool:
    """Does ``stmt`` store one value per element of its planes (its first LHS index in
    neither its right-hand side nor another index's range)? Then its writes of one cell
    from different planes store the same value, in any order."""
    v = stmt.lhs[0]
    if any(isinstance(e, ir.Var) and e.name == v for e in stmt.rhs.walk()):
        return False
    dom = isl.Set(stmt.domain)
    k = dom.find_dim_by_name(_SET, v)
    lo, hi = dom.dim_min_val(k), dom.dim_max_val(k)
    if not (lo.is_int() and hi.is_int()):
        return False
    box = dom.eliminate(_SET, k, 1).lower_bound_val(_SET, k, lo).upper_bound_val(_SET, k, hi)
    return bool(dom.is_equal(box))


def _union(maps: list[isl.Map], pp: PolyProgram) -> isl.UnionMap:
    return union_all([isl.UnionMap.from_map(m) for m in maps],
                     isl.UnionMap.empty(pp.context.get_space()))


def stored(program: ir.Program, storage: tuple[Modulo, ...]) -> ir.Program:
    """``program`` with the locals of ``storage`` at the shapes they are allocated with."""
    if not storage:
        return program
    by_name = {m.tensor: m for m in storage}

    def shape(t: ir.Tensor) -> ir.Tensor:
        m = by_name.get(t.name)
        if m is None:
            return t
        dims = list(t.shape)
        dims[m.dim] = str(m.modulus)
        return replace(t, shape=tuple(dims))

    return replace(program, locals=tuple(shape(t) for t in program.locals))
