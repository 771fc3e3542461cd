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
kernel computes whole tiles (``kernel_share``).

Two more things the printer does in registers, which the loops alone misprice: a ``+=!``
whose every instance runs in tiles that start at zero needs no zeroing pass
(``dead_inits``, as ``codegen/zerostart.py`` decides), and a copy read strided along its
vector loop and contiguous along the loop above is transposed in ``lanes x lanes`` blocks
(``transposed_copy``, as ``codegen/transpose.py`` prints it). A plain nest
(no such shape) has no register level in the model: its target is loaded and stored each
iteration (``cost._iteration``).
"""

from __future__ import annotations

from dataclasses import dataclass

import islpy as isl

from polyopt import ir
from polyopt.poly.model import PolyProgram, PolyStmt
from polyopt.poly.pieces import all_updated, update_pieces, whole_reductions
from polyopt.schedule.marks import Tag
from polyopt.schedule.policy import CAPS, CpuPolicy
from polyopt.schedule.strides import (
    INVARIANT,
    UNIT,
    accesses,
    elem_bytes,
    loop_map,
    step_map,
    stride,
)
from polyopt.schedule.tree import Leaf, Loop, Node, leaf_paths, pieces
from polyopt.schedule.trips import fixed_domain, path_trips, trip


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


@dataclass(frozen=True)
class TileAt:
    """A micro-kernel ``path`` ends in, with its loops' trips (the loops above fixed)."""

    tile: MicroKernel
    trips: tuple[int | None, ...]

    @property
    def rows(self) -> int:
        return self.trips[-2] or 0

    @property
    def cols(self) -> int:
        return self.trips[-1] or 0


def tile_at(poly: PolyProgram, s: PolyStmt, path: list[Loop]) -> TileAt | None:
    """The micro-kernel the printer makes of ``s`` at the end of ``path`` (from the
    schedule's root or a nest's, the loops above it fixed), None for any other shape or an
    unknown trip."""
    tile = micro_kernel(path, s)
    if tile is None or not rectangular(fixed_domain(s, path[: tile.k]), path, tile, s.name):
        return None
    trips = tuple(path_trips(poly, path))
    if not trips[-2] or not trips[-1] or None in trips[tile.k: tile.rows]:
        return None
    return TileAt(tile, trips)


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


def starts_at_zero(poly: PolyProgram, s: PolyStmt, path: list[Loop], at: TileAt,
                   padded: frozenset[str]) -> bool:
    """Does every instance of ``s`` run in tiles whose accumulators start at zero
    (``microkernel.Emitter``): a ``+=!`` whose reduction moves with the tile's own ``k``
    loops only (no outer block of it runs more than once), all of whose instances run in
    the kernel (``kernel_share``), no other piece updating its elements?"""
    if not s.stmt.init or s.stmt.op != "+":
        return False
    share, _ = kernel_share(poly, s, path, at.tile, at.rows, at.cols, padded)
    if share < 1.0:
        return False
    n = s.domain.dim(isl.dim_type.set)
    red = {d for d, it in enumerate(s.iters) if it in s.stmt.reduction_iters}
    for lp, n_trip in zip(path[: at.tile.k], at.trips, strict=False):
        if (n_trip or 0) > 1 and red & set(_iterators(lp, s.name, n)):
            return False
    return whole_reductions(poly, s)


def dead_inits(poly: PolyProgram, root: Node, padded: frozenset[str]) -> frozenset[str]:
    """The ``_init`` statements under ``root`` (a whole schedule's tree) that the printer
    leaves out (``codegen/zerostart.py``): every update piece of their statement runs in
    register tiles that start at zero, and each element they write gets an update."""
    paths = dict(leaf_paths(root))
    dead = set()
    for init in poly.stmts:
        if init.kind != "init" or init.name not in paths:
            continue
        ups = update_pieces(poly, init)
        if ups and all(_zero_started(poly, s, paths.get(s.name), padded) for s in ups) \
                and all_updated(init, ups):
            dead.add(init.name)
    return frozenset(dead)


def _zero_started(poly: PolyProgram, s: PolyStmt, path: list[Loop] | None,
                  padded: frozenset[str]) -> bool:
    if not path:
        return False
    at = tile_at(poly, s, path)
    return at is not None and starts_at_zero(poly, s, path, at, padded)


def transposed_copy(poly: PolyProgram, policy: CpuPolicy, s: PolyStmt,
                    path: list[Loop]) -> float | None:
    """Cycles per instance of a copy the printer transposes in vector registers
    (``codegen/transpose.py``): ``for r { for v (vectorize) { T[.., v] = U[.., r] } }``, U
    contiguous along ``r`` and strided along ``v``, T contiguous along ``v``, constant
    trips. Its blocks of ``lanes x lanes`` elements (the last along each side flush with
    the end, overlapping the one before) each cost ``lanes`` vector loads and
    ``log2(lanes)`` rounds of ``lanes`` two-vector shuffles (as ``cost._iteration``
    prices a strided read's shuffles, on the FMA pipes); None for any other shape, which
    then costs what its plain loop does."""
    if len(path) < 2 or not _copy(poly, s) or Tag.VECTORIZE not in path[-1].tags:
        return None
    r, v = path[-2], path[-1]
    if r.tags - {Tag.SEPARATE} or r.child is not v or not isinstance(v.child, Leaf) \
            or len(v.child.stmts) != 1:
        return None
    rows, cols = trip(poly, r, path[:-2]), trip(poly, v, path[:-1])
    elem = elem_bytes(poly, s.stmt.tensor)
    most = min(policy.machine.vector_bytes // elem, rows or 0, cols or 0)
    lanes = 1 << (most.bit_length() - 1) if most > 0 else 0
    if rows is None or cols is None or lanes < CAPS.min_transpose_lanes or elem not in (4, 8):
        return None
    blocks = -(-rows // lanes) * -(-cols // lanes)
    if blocks > CAPS.max_transpose_blocks or not _transposes(poly, s, path):
        return None
    block = lanes / policy.loads_per_cycle + lanes * (lanes.bit_length() - 1) / \
        policy.machine.fma_units
    return blocks * block / (rows * cols)


def _copy(poly: PolyProgram, s: PolyStmt) -> bool:
    """Is ``s`` a plain copy of one affine read of another tensor of its type?"""
    rhs, dtype = s.stmt.rhs, poly.program.tensors[s.stmt.tensor].dtype
    return (s.kind == "update" and s.stmt.op == "=" and not s.guarded
            and isinstance(rhs, ir.Read) and rhs.tensor != s.stmt.tensor
            and all(x.affine for x in s.reads) and rhs.dtype == dtype)


def _transposes(poly: PolyProgram, s: PolyStmt, path: list[Loop]) -> bool:
    """Is the read contiguous along ``path[-2]`` and strided along ``path[-1]``, the write
    contiguous along ``path[-1]``?"""
    r, v = step_map(path, path[-2], s), step_map(path, path[-1], s)
    if r is None or v is None:
        return False
    read, write = accesses(poly, s.name)
    return (stride(poly, read, r).kind == UNIT and stride(poly, read, v).kind not in
            (UNIT, INVARIANT) and stride(poly, write, v).kind == UNIT)
