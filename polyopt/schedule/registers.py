"""The register level of the cost model: a register tile's micro-kernel.

The C printer turns ``for k.. { for r (unroll) { for v (vectorize) { S } } }``, S adding
into an element the ``k`` loops do not move, into a micro-kernel (``codegen/microkernel.py``,
found by ``codegen/tilematch.py``): ``rows x vectors`` accumulators held in registers
across the ``k`` loops, each operand loaded once per step of the innermost ``k``, where the
tile spans the same rows and vectors at every step (``rectangular``). The loops
of that shape run as straight-line code the out-of-order core overlaps, so a step costs the
slowest of three bounds (``step_cycles``):

* the FMA pipes: each accumulator's operations, a product added into it one fused
  multiply-add (``-std=gnu11`` contracts them);
* the load ports: each operand's distinct vectors in the tile, one per register row it moves
  along and per vector of ``v`` it is contiguous along (a broadcast when it does not move
  with ``v``);
* the accumulators' dependence: each waits ``fma_latency`` cycles for its last update.

The accumulators' loads and stores run once per execution of the ``k`` loops. The partial
tiles at the ends of the rows and columns print as plain loops and cost what the plain vector
loop does, unless the operands moving along them are zero-padded packed copies: then the
kernel computes whole tiles (``kernel_share``). A plain nest
(no such shape) has no register level in the model: its target is loaded and stored each
iteration (``cost._iteration``).
"""

from __future__ import annotations

from dataclasses import dataclass

import islpy as isl

from polyopt import ir
from polyopt.poly.model import PolyProgram, PolyStmt
from polyopt.schedule.marks import Tag
from polyopt.schedule.policy import CAPS, CpuPolicy
from polyopt.schedule.strides import INVARIANT, UNIT, accesses, loop_map, step_map, stride
from polyopt.schedule.tree import Loop, pieces


@dataclass(frozen=True)
class MicroKernel:
    """Where a statement's path ends in a micro-kernel: the index in the path of the
    outermost ``k`` loop (the accumulators stay in registers below it) and of the
    unrolled rows; the vector loop is the path's last."""

    k: int
    rows: int


def micro_kernel(path: list[Loop], s: PolyStmt) -> MicroKernel | None:
    """The micro-kernel ``path`` (a statement's loops, outermost first) ends in, the shape
    ``tilematch.match`` prints as one; None for any other."""
    if len(path) < 3 or Tag.VECTORIZE not in path[-1].tags or Tag.UNROLL not in path[-2].tags:
        return None
    if s.kind != "update" or s.stmt.op != "+" or s.guarded or not all(r.affine
                                                                      for r in s.reads):
        return None
    k = len(path) - 3
    while k > 0 and not path[k - 1].tags and len(path) - 2 - k < CAPS.max_reduction_loops:
        k -= 1
    if path[k].tags:
        return None
    return MicroKernel(k, len(path) - 2)


def rectangular(domain: isl.Set, path: list[Loop], tile: MicroKernel, stmt: str) -> bool:
    """Do the tile's rows and vectors span the same values at every step of its ``k``
    loops, over ``domain`` (the statement's, the loops above fixed)? The printer keeps the
    accumulators in registers only then (``tilematch.match``: a triangle's rows start later
    as ``k`` grows, and its tile prints as plain loops)."""
    m: isl.Map | None = None
    for lp in path[tile.k:]:
        nxt = loop_map(lp, stmt)
        if nxt is None:
            return False
        m = nxt if m is None else m.flat_range_product(nxt)
    if m is None:
        return False
    values = domain.apply(m.intersect_domain(domain))
    n = values.dim(isl.dim_type.set)
    steps = values.project_out(isl.dim_type.set, n - 2, 2)
    tiles = values.project_out(isl.dim_type.set, 0, n - 2)
    return values.is_equal(steps.flat_product(tiles))


def kernel_share(poly: PolyProgram, s: PolyStmt, path: list[Loop], tile: MicroKernel,
                 rows: int, cols: int, padded: frozenset[str]) -> tuple[float, float]:
    """(the share of ``s``'s instances the micro-kernel runs, its work per instance against
    a full tile's). A tile dimension whose extent (``s.domain``'s box) the tile does not
    divide ends in partial tiles. They print as the micro-kernel on a scratch tile when
    every operand moving along that dimension is a zero-padded packed copy (``padded``,
    ``microkernel.Emitter.edge_lines``): all instances then run in the kernel, which
    computes whole tiles (24 rows in tiles of 14: 28/24 the work). Otherwise they print as
    plain loops (``tilematch.match`` takes constant trips only): a 56-wide row in tiles of
    16 runs 48/56 of its instances in the kernel."""
    share, work, edge = 1.0, 1.0, True
    n = s.domain.dim(isl.dim_type.set)
    for lp, size in ((path[tile.rows], rows), (path[-1], cols)):
        dims = _iterators(lp, s.name, n)
        if len(dims) != 1:
            continue
        lo, hi = s.domain.dim_min_val(dims[0]), s.domain.dim_max_val(dims[0])
        if not (lo.is_int() and hi.is_int()):
            continue
        extent = int(hi.to_python()) - int(lo.to_python()) + 1
        if extent % size == 0:
            continue
        share *= (extent // size) * size / extent
        work *= -(-extent // size) * size / extent
        edge = edge and _padded_along(poly, s, path, lp, padded)
    return (1.0, work) if edge else (share, 1.0)


def _padded_along(poly: PolyProgram, s: PolyStmt, path: list[Loop], lp: Loop,
                  padded: frozenset[str]) -> bool:
    """Is every operand of ``s`` that moves along ``lp`` one of the ``padded`` copies?"""
    step = step_map(path, lp, s)
    if step is None:
        return False
    return all(a.write or a.tensor in padded or stride(poly, a, step).kind == INVARIANT
               for a in accesses(poly, s.name))


def _iterators(lp: Loop, stmt: str, n: int) -> list[int]:
    """The dimensions of ``stmt``'s domain (of ``n``) that loop ``lp``'s value moves with."""
    affs = [aff for pa in pieces(lp.expr)
            if pa.get_domain_space().get_tuple_name(isl.dim_type.set) == stmt
            for _, aff in pa.get_pieces()]
    return [d for d in range(n) if any(a.involves_dims(isl.dim_type.in_, d, 1) for a in affs)]


def step_cycles(poly: PolyProgram, policy: CpuPolicy, s: PolyStmt, path: list[Loop],
                tile: MicroKernel, rows: int, vectors: int) -> float | None:
    """Cycles of one step of the innermost ``k`` loop of ``tile`` (``rows`` unrolled rows,
    ``vectors`` vectors): the slowest of its bounds (the module docstring). None when the
    target moves with the ``k`` loops or an operand strides along ``v``: no micro-kernel
    the model knows."""
    m = policy.machine
    steps = {"rows": step_map(path, path[tile.rows], s), "v": step_map(path, path[-1], s)}
    ks = [step_map(path, lp, s) for lp in path[tile.k: tile.rows]]
    loads = 0
    for a in accesses(poly, s.name):
        along = {name: None if st is None else stride(poly, a, st).kind
                 for name, st in steps.items()}
        if a.write:
            if along["v"] != UNIT or any(st is None or stride(poly, a, st).kind != INVARIANT
                                         for st in ks):
                return None  # the accumulators would not stay in registers
            continue
        if along["v"] not in (INVARIANT, UNIT):
            return None
        loads += (rows if along["rows"] != INVARIANT else 1) * (
            vectors if along["v"] == UNIT else 1)
    ops = fused_ops(s)
    fma = rows * vectors * ops / m.fma_units
    return max(fma, loads / policy.loads_per_cycle, ops * m.fma_latency)


def fused_ops(s: PolyStmt) -> float:
    """Vector operations of one update of an accumulator: its right-hand side's, a product
    on top added in the same fused multiply-add."""
    rhs = s.stmt.rhs
    n = sum(1 for e in rhs.walk_values() if isinstance(e, (ir.Binary, ir.Unary, ir.Select)))
    fused = isinstance(rhs, ir.Binary) and rhs.op == "*"
    return max(1.0, float(n + (0 if fused else 1)))


def spill_cycles(policy: CpuPolicy, rows: int, vectors: int) -> float:
    """Cycles of loading and storing the tile's accumulators, once per execution of its
    ``k`` loops."""
    return rows * vectors * (1 / policy.loads_per_cycle + 1.0)
