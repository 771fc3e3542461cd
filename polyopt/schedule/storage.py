"""Storage contraction modulo (reference §5.5, issue 17): a local of a def with recurrences
whose elements die a bounded distance after they are written along one dimension is stored
modulo that distance — jacobi's ``(T, N, N)`` planes as ``(2, N, N)``.

The modulus is chosen after scheduling, for the schedule at hand: the smallest ``m`` for
which storing ``X(.., x_d, ..)`` at ``X(.., x_d % m, ..)`` keeps every value until its last
read. Two elements share a cell when they differ by a multiple of ``m`` along ``d`` only;
the later one (larger ``x_d``) may be written only after every read of the earlier one
(memory-based anti dependences) and after the earlier one's write (output dependences).
Those are checked exactly against the schedule with isl, as any verb is; this finds the
minimal modulus along one dimension for the schedule (a search over ``m``, where the
lattice method of Darte, Schreiber and Villard finds minimal moduli for any mapping).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import islpy as isl

from polyopt import ir
from polyopt.errors import IllegalScheduleError
from polyopt.poly.deps import Deps
from polyopt.poly.model import PolyProgram
from polyopt.schedule.legality import check_legal

# The largest modulus tried: a recurrence whose values live longer than this many planes
# saves too little to be worth the search (each try is one legality check).
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


def modulo_storage(pp: PolyProgram, smap: isl.UnionMap,
                   sliced: tuple[str, ...] = ()) -> tuple[Modulo, ...]:
    """For each local of a def with recurrences (all sizes bound; not kept as slices, not
    read through padding), the dimension and smallest modulus that ``smap`` allows, if any
    saves storage."""
    program = pp.program
    if not program.value_semantics or program.sizes:
        return ()
    padded = {r.read.tensor for s in pp.stmts for r in s.reads if r.read.pad is not None}
    out = []
    for t in program.locals:
        if t.name in sliced or t.name in padded or t.rank < 2:
            continue
        best = _best(pp, smap, t.name, [int(e) for e in t.shape])
        if best is not None:
            out.append(best)
    return tuple(out)


def _best(pp: PolyProgram, smap: isl.UnionMap, tensor: str,
          shape: list[int]) -> Modulo | None:
    writes = _union([s.write for s in pp.stmts if s.stmt.tensor == tensor], pp)
    reads = _union([r.relation for s in pp.stmts for r in s.reads if r.read.tensor == tensor]
                   + [s.write for s in pp.stmts if s.stmt.tensor == tensor and s.accumulates],
                   pp)
    best: Modulo | None = None
    for dim in range(len(shape) - 1):  # never the stride-1 dimension: vector loads stay
        for m in range(1, min(shape[dim], MAX_MODULUS + 1)):
            if best is not None and shape[dim] // m <= best.extent // best.modulus:
                break
            if _legal(pp, smap, writes, reads, tensor, len(shape), dim, m):
                best = Modulo(tensor, dim, m, shape[dim])
                break
    return best


def _legal(pp: PolyProgram, smap: isl.UnionMap, writes: isl.UnionMap, reads: isl.UnionMap,
           tensor: str, rank: int, dim: int, m: int) -> bool:
    """Does ``smap`` keep every value of ``tensor`` stored modulo ``m`` along ``dim``?"""
    xs = [f"x{k}" for k in range(rank)]
    ys = [f"y{k}" if k == dim else f"x{k}" for k in range(rank)]
    alias = isl.UnionMap(f"{pp.program.params} -> {{ {tensor}[{', '.join(xs)}] -> "
                         f"{tensor}[{', '.join(ys)}] : exists (q : q >= 1 and "
                         f"y{dim} = x{dim} + {m} * q) }}")
    later = alias.apply_range(writes.reverse())
    # A read of a value -> a write of its cell after it; an instance reads before it writes.
    anti = reads.apply_range(later).subtract(pp.domain.identity())
    output = writes.apply_range(later)
    empty = isl.UnionMap.empty(anti.get_space())
    try:
        check_legal(smap, Deps(empty, anti.coalesce(), output.coalesce()), "storage")
    except IllegalScheduleError:
        return False
    return True


def _union(maps: list[isl.Map], pp: PolyProgram) -> isl.UnionMap:
    out = isl.UnionMap.empty(pp.context.get_space())
    for m in maps:
        out = out.union(isl.UnionMap.from_map(m))
    return out


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
