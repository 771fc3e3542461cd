"""The register level of the cost model: a register tile's micro-kernel.

The C printer turns ``for k.. { for r (unroll) { for v (vectorize) { S } } }``, S adding
into an element the ``k`` loops do not move, into a micro-kernel (``codegen/microkernel.py``,
found by ``codegen/tilematch.py``): ``rows x vectors`` accumulators held in registers
across the ``k`` loops, each operand loaded once per step of the innermost ``k``, where the
tile spans the same rows and vectors at every step (``rectangular``). The loops
of that shape run as straight-line code the out-of-order core overlaps, so a step costs the
slowest of three bounds (``step_cycles``):

* the FMA pipes: each accumulator's operations, a product added into it one fused
  multiply-add (``-std=gnu11`` contracts them), and the operations on one operand alone
  (``X / 9``) once per value loaded (``kernel_ops``);
* the load ports: each operand's distinct values in the tile (the printer loads each once),
  a vector one slot per cache line it spans (``line_slots``: a window read's vectors
  start a lane apart and most straddle two lines), a broadcast one;
* the accumulators' dependence: each waits ``fma_latency`` cycles for its last update.

Where the printer unrolls a short reduction loop into the step (``unrolled``: a filter
row that moves the input as the tile's rows do, within ``Caps.max_unrolled_updates``), the
step spans its trip, and an input row loaded serves up to that many updates.

The accumulators' loads and stores run once per execution of the ``k`` loops. The partial
tiles at the ends of the rows and columns print as plain loops and cost what the plain vector
loop does, the last column tile at its own width (one column: scalar), unless the operands
moving along them are zero-padded packed copies: then the kernel computes whole tiles
(``kernel_share``).

Two more things the printer does in registers, which the loops alone misprice: a ``+=!``
whose every instance runs in tiles that start at zero needs no zeroing pass
(``dead_inits``, as ``codegen/zerostart.py`` decides), and a copy read strided along its
vector loop and contiguous along the loop above is transposed in ``lanes x lanes`` blocks
(``transposed_copy``, as ``codegen/transpose.py`` prints it). A plain nest
(no such shape) has no register level in the model: its target is loaded and stored each
iteration (``cost._iteration``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import islpy as isl

from polyopt import ir
from polyopt.costmodel.machine import Machine
from polyopt.costmodel.strides import (
    GATHER,
    INVARIANT,
    UNIT,
    Access,
    accesses,
    elem_bytes,
    extents,
    loop_map,
    step_map,
    stride,
)
from polyopt.costmodel.trips import fixed_domain, path_trips, trip
from polyopt.poly.model import PolyProgram, PolyStmt
from polyopt.poly.pieces import all_updated, update_pieces, whole_reductions
from polyopt.schedules.limits import CAPS
from polyopt.schedules.marks import Tag
from polyopt.schedules.memo import Memo
from polyopt.schedules.tree import Leaf, Loop, Node, leaf_paths, pieces


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


@dataclass(frozen=True)
class Share:
    """How a register tile's statement runs: ``kernel`` of its instances in the
    micro-kernel, each at ``work`` a full tile's work per instance (whole tiles over padded
    partial ones); ``tail`` of them in the last column tile's plain loops, ``tail_cols``
    columns wide (0: none there)."""

    kernel: float
    work: float
    tail: float = 0.0
    tail_cols: int = 0


def kernel_share(poly: PolyProgram, s: PolyStmt, path: list[Loop], tile: MicroKernel,
                 rows: int, cols: int, padded: frozenset[str]) -> Share:
    """How much of ``s`` the micro-kernel runs. A tile dimension whose extent
    (``s.domain``'s box) the tile does not divide ends in partial tiles. They print as the
    micro-kernel on a scratch tile when every operand moving along that dimension is a
    zero-padded packed copy (``padded``, ``microkernel.Emitter.edge_lines``): all
    instances then run in the kernel, which computes whole tiles (24 rows in tiles of 14:
    28/24 the work). Otherwise they print as plain loops (``tilematch.match`` takes
    constant trips only): a 56-wide row in tiles of 16 runs 48/56 of its instances in the
    kernel, and the other 8/56 in a vector loop 8 columns wide (``Share.tail``)."""
    share, work, edge, tail, tail_cols = 1.0, 1.0, True, 0.0, 0
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
        if lp is path[-1]:
            tail, tail_cols = (extent % size) / extent, extent % size
    return Share(1.0, work) if edge else Share(share, 1.0, tail, tail_cols)


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


def step_cycles(poly: PolyProgram, machine: Machine, s: PolyStmt, path: list[Loop],
                at: TileAt, vectors: int) -> float | None:
    """Cycles of one step of the innermost ``k`` loop of the tile ``at`` (``vectors``
    vectors a row): the slowest of its bounds (the module docstring), over the reduction
    loop the printer unrolls into the step where it does (``unrolled``). None when the
    target moves with the ``k`` loops or an operand strides along ``v``: no micro-kernel
    the model knows, and when the tile's accumulators outnumber the vector registers: the
    compiler keeps them in memory, and the tile costs what the plain nest does (a target
    loaded and stored at each update). On the tuner's tables such tiles (12 x 4 vectors,
    28 x 4) ran 8-21x the best of a 1000 x 1100 x 1200 product, a step the registers
    would take in some 50 cycles."""
    m = machine
    if at.rows * vectors > m.vector_registers:
        return None
    moves = _moves(poly, m, s, path, at.tile)
    if moves is None:
        return None
    lanes = m.lanes(elem_bytes(poly, s.stmt.tensor))
    grid = Grid(at.rows, vectors, lanes)
    k, t = unrolled(moves, at, grid)
    values = [_distinct(mv, grid, k, t) for mv in moves]
    loads = sum(n * mv.slots for n, mv in zip(values, moves, strict=True))
    ops = kernel_ops(s)
    work = t * at.rows * vectors * ops.update + sum(
        n * v for n, v in zip(values, ops.value, strict=True))
    return max(work / m.fma_units, loads / m.loads_per_cycle,
               t * ops.update * m.fma_latency) / t


@dataclass(frozen=True)
class Move:
    """How one operand of a micro-kernel moves: its flat index's elements per row and
    per step of each ``k`` loop (None: not a constant step), whether it is a vector
    (contiguous along the lanes) or a broadcast, and the load slots a load of it takes
    (``line_slots``)."""

    rows: int | None
    ks: tuple[int | None, ...]
    vector: bool
    slots: float = 1.0


@dataclass(frozen=True)
class Grid:
    """A tile's updates in one step: ``rows`` by ``vectors`` vectors of ``lanes``."""

    rows: int
    vectors: int
    lanes: int


def _moves(poly: PolyProgram, machine: Machine, s: PolyStmt, path: list[Loop],
           tile: MicroKernel) -> list[Move] | None:
    """Each read's ``Move`` in the tile; None when the target does not stay in registers
    (it moves with a ``k`` loop or is not contiguous along ``v``) or a read strides along
    ``v``."""
    ks = [step_map(path, lp, s) for lp in path[tile.k: tile.rows]]
    rows, lanes = step_map(path, path[tile.rows], s), step_map(path, path[-1], s)
    out = []
    for a in accesses(poly, s.name):
        along = None if lanes is None else stride(poly, a, lanes).kind
        if a.write:
            if along != UNIT or any(st is None or stride(poly, a, st).kind != INVARIANT
                                    for st in ks):
                return None
            continue
        if along not in (INVARIANT, UNIT):
            return None
        slots = line_slots(poly, machine, s, a, path[-1]) if along == UNIT else 1.0
        out.append(Move(_elems(poly, a, rows), tuple(_elems(poly, a, st) for st in ks),
                        along == UNIT, slots))
    return out


_SLOTS: Memo[float] = Memo(1024)


def line_slots(poly: PolyProgram, machine: Machine, s: PolyStmt, a: Access,
               lanes_loop: Loop) -> float:
    """Load slots per vector load of ``a`` along ``lanes_loop`` (``_line_slots``), for
    every estimate of the same loop (candidate orders keep the loops' ``expr`` objects)."""
    return _SLOTS.get((poly, s, a.relation, lanes_loop.expr), machine,
                      lambda: _line_slots(poly, machine, s, a, lanes_loop))


def _line_slots(poly: PolyProgram, machine: Machine, s: PolyStmt, a: Access,
                lanes_loop: Loop) -> float:
    """Load slots per vector load of ``a`` along ``lanes_loop`` (a vector loop whose
    vectors start at multiples of the lanes): one per cache line it spans, on average
    over where its vectors start. Those starts are the flat index (``a``'s, on the
    statement's iterators) modulo a line's elements: the residues its coefficients and
    constant reach, the vector loop's iterator stepping a vector at a time, and the
    array's base, which is a line apart for the runtime's scratch (locals, packed copies:
    ``runtime/arrays.py``) and only 16 bytes apart for a numpy input or output. A window
    read (``I(h + kh, w + kw)``: every ``kw`` a lane further) or rows of a width that is
    no multiple of a line split most vectors across two lines; each then takes two
    slots. Other shapes (a guard, an index the model cannot flatten): one slot."""
    m, elem = machine, elem_bytes(poly, a.tensor)
    ext = extents(poly, a.tensor)
    line = max(1, m.line_bytes // elem)
    if ext is None or a.write or m.vector_bytes % elem:
        return 1.0
    lanes = m.vector_bytes // elem
    n = s.domain.dim(isl.dim_type.set)
    cols = set(_iterators(lanes_loop, s.name, n))
    step, rest = line, []
    for aff in _flat_affs(a, ext):
        const = int(aff.get_constant_val().to_python())
        for d in range(n):
            coef = int(aff.get_coefficient_val(isl.dim_type.in_, d).to_python())
            lo, hi = s.domain.dim_min_val(d), s.domain.dim_max_val(d)
            if not (lo.is_int() and hi.is_int()):
                return 1.0
            if lo.eq(hi):
                const += coef * int(lo.to_python())
            else:
                step = math.gcd(step, coef * (lanes if d in cols else 1))
        rest.append(const)
    if poly.program.tensors[a.tensor].role in ("input", "output"):
        step = math.gcd(step, max(1, 16 // elem))  # numpy's 16-byte alignment
    starts = {(c + step * j) % line for c in rest for j in range(line // step)}
    least = -(-m.vector_bytes // m.line_bytes)
    spans = [-(-(r * elem + m.vector_bytes) // m.line_bytes) for r in starts]
    return sum(spans) / len(spans) / least if spans else 1.0


def _flat_affs(a: Access, ext: tuple[int, ...]) -> list[isl.Aff]:
    """The row-major flat index of ``a`` (a tensor of extents ``ext``) as an affine
    function of its statement's iterators, one per piece of the access; none when the
    access is no affine function (a gather)."""
    try:
        pma = isl.PwMultiAff.from_map(a.relation)
    except isl.Error:
        return []
    ctx, flat = a.relation.get_ctx(), None
    for k in range(pma.dim(isl.dim_type.out)):
        term = pma.get_pw_aff(k).scale_val(isl.Val.int_from_si(ctx, math.prod(ext[k + 1:])))
        flat = term if flat is None else flat.add(term)
    return [] if flat is None else [aff for _, aff in flat.get_pieces()]

def _elems(poly: PolyProgram, a: Access, step: isl.Map | None) -> int | None:
    st = None if step is None else stride(poly, a, step)
    return None if st is None or st.kind == GATHER else st.elems


def unrolled(moves: list[Move], at: TileAt, grid: Grid) -> tuple[int | None, int]:
    """(the index among the tile's ``k`` loops of the one the printer unrolls into a step,
    its trip), or (None, 1): as ``microkernel.Emitter._unrolled``, the innermost of
    constant trip whose unrolled step has at most ``Caps.max_unrolled_updates`` updates
    and loads fewer vectors than its trip's rolled steps (a filter row ``kh`` that moves
    the input as the rows do: each input row loaded serves up to ``kh`` output rows)."""
    trips = at.trips[at.tile.k: at.tile.rows]
    base = sum(_distinct(mv, grid, None, 1) for mv in moves if mv.vector)
    for k in reversed(range(len(trips))):
        t = trips[k] or 0
        if t < 2 or t * grid.rows * grid.vectors > CAPS.max_unrolled_updates:
            continue
        if sum(_distinct(mv, grid, k, t) for mv in moves if mv.vector) < t * base:
            return k, t
    return None, 1


def _distinct(mv: Move, grid: Grid, k: int | None, trip: int) -> int:
    """Distinct values ``mv``'s operand loads over ``trip`` steps of the ``k``-th loop
    (None: one step) and the tile's rows and vectors: the printer loads each once. A
    step that is not constant makes every value distinct along it."""
    step = mv.ks[k] if k is not None else 0
    seen = set()
    for j in range(trip):
        for r in range(grid.rows):
            for v in range(grid.vectors if mv.vector else 1):
                flat = (j * (step or 0) + r * (mv.rows or 0) + v * grid.lanes)
                seen.add((flat, j if step is None else 0, r if mv.rows is None else 0))
    return len(seen)


@dataclass(frozen=True)
class Ops:
    """Vector operations of a micro-kernel: per update of an accumulator (a product on
    top added in the same fused multiply-add), and per distinct value loaded of each read
    (by position in ``PolyStmt.reads``): the operations on that read alone (``X / 9``),
    which the compiler computes once per value and shares among the updates using it."""

    update: float
    value: tuple[float, ...]


def kernel_ops(s: PolyStmt) -> Ops:
    """The ``Ops`` of ``s``'s right-hand side; operations on constants alone fold away."""
    rhs = s.stmt.rhs
    slot = {id(r.read): n for n, r in enumerate(s.reads)}
    value = [0.0] * len(s.reads)
    update = 0
    for e in rhs.walk_values():
        if not isinstance(e, (ir.Binary, ir.Unary, ir.Select)):
            continue
        reads = {slot.get(id(r), -1) for r in e.walk_values() if isinstance(r, ir.Read)}
        if len(reads) == 1 and -1 not in reads:
            value[reads.pop()] += 1
        elif reads:
            update += 1
    fused = isinstance(rhs, ir.Binary) and rhs.op == "*" and update > 0
    return Ops(max(1.0, float(update + (0 if fused else 1))), tuple(value))


def spill_cycles(machine: Machine, rows: int, vectors: int) -> float:
    """Cycles of loading and storing the tile's accumulators, once per execution of its
    ``k`` loops."""
    return rows * vectors * (1 / machine.loads_per_cycle + 1.0)


def starts_at_zero(poly: PolyProgram, s: PolyStmt, path: list[Loop], at: TileAt,
                   padded: frozenset[str]) -> bool:
    """Does every instance of ``s`` run in tiles whose accumulators start at zero
    (``microkernel.Emitter``): a ``+=!`` whose reduction moves with the tile's own ``k``
    loops only (no outer block of it runs more than once), all of whose instances run in
    the kernel (``kernel_share``), no other piece updating its elements?"""
    if not s.stmt.init or s.stmt.op != "+":
        return False
    share = kernel_share(poly, s, path, at.tile, at.rows, at.cols, padded).kernel
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


def transposed_copy(poly: PolyProgram, machine: Machine, s: PolyStmt,
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
    most = min(machine.vector_bytes // elem, rows or 0, cols or 0)
    lanes = 1 << (most.bit_length() - 1) if most > 0 else 0
    if rows is None or cols is None or lanes < CAPS.min_transpose_lanes or elem not in (4, 8):
        return None
    blocks = -(-rows // lanes) * -(-cols // lanes)
    if blocks > CAPS.max_transpose_blocks or not _transposes(poly, s, path):
        return None
    block = lanes / machine.loads_per_cycle + lanes * (lanes.bit_length() - 1) / \
        machine.fma_units
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
