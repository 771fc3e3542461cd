"""A cost model of loop nests on the CPU: strides, footprints and a cycle estimate, read from
isl's access relations over a schedule tree (``polyopt.schedules.tree``).

For a nest (a subtree of the schedule) the model computes:

* the **stride class** of each access along a loop (:func:`stride`): the access relation
  composed with "the next iteration of that loop, the other loops of the statement's path
  fixed", whose deltas are one vector (``invariant`` if zero, ``unit`` if one element in
  row-major order, else ``strided``) or several (``gather``: a data-dependent index);
* the **footprint** of each loop node (:func:`footprint`): the cache lines (or pages) one
  whole execution of the node touches, its outer loops fixed at their first value: the
  image of the statement domains under the access relations, per tensor a bounding box,
  counted as a leading part times a contiguous block of the trailing fully covered dims;
* the **traffic** into each cache level of capacity C (:func:`traffic`): a node whose
  footprint fits is loaded once; a loop whose consecutive iterations fit together (its
  body's footprint plus the average growth per iteration) loads its body once and the
  growth per iteration after that; else every iteration reloads its body;
* a **cycle estimate** (:func:`estimate`), a roofline: the largest of the compute time
  (vectorized when every access is invariant or unit along the innermost loop, or a read
  strided by a few elements, :func:`vector_loads`, and no builtin call without a vector
  variant; each vector loop at the width predicted fastest, its whole vectors, epilogue
  and scalar remainder each at their width's cost, :func:`vector_splits`; a builtin call
  at its measured cost, ``polyopt.costmodel.calls``) and each
  level's traffic over its bandwidth, plus the TLB misses (pages as lines, the TLB as the
  cache) at their walk latency, divided over the cores of the parallel loop (memory
  bandwidth is shared), plus OpenMP fork/join per execution of the parallel loop. Each
  core also pulls its share of the lines from memory at ``Machine.core_memory_share`` of the
  bandwidth, less where it reads more streams together than its prefetchers follow
  (``polyopt.costmodel.streams``); a parallel loop that forks more often than the cores
  save runs on one thread.

Every fact of the core comes from the :class:`~polyopt.costmodel.machine.Machine`: sizes of
caches and vectors, the constants the host does not report (cache bandwidths, the TLB), and
the memory system and fork cost (measured on the host by ``polyopt machine --calibrate``).
The one threshold of the pipeline the model mirrors, the iterations a parallel loop needs,
is an argument (``parallel_trips``).
The model needs every extent known (a schedule made for given sizes); :func:`estimate`
returns None otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import islpy as isl

from polyopt import ir
from polyopt.costmodel import calls, streams
from polyopt.costmodel import lanes as vl
from polyopt.costmodel import registers as reg
from polyopt.costmodel.machine import Machine
from polyopt.costmodel.strides import (
    GATHER,
    INVARIANT,
    UNIT,
    accesses,
    elem_bytes,
    extents,
    step_map,
    stride,
)
from polyopt.costmodel.trips import fixed_domain, points, trip
from polyopt.poly.model import PolyProgram, PolyStmt
from polyopt.schedules.memo import Memo
from polyopt.schedules.tree import (
    Leaf,
    Loop,
    Node,
    Sequence,
    leaf_paths,
    path_to,
    raw_iterator,
    stmts_of,
)

_SET = isl.dim_type.set


@dataclass(frozen=True)
class Estimate:
    """Predicted cycles of one execution of a nest, and what they are made of."""

    cycles: float
    compute: float
    traffic: tuple[tuple[str, float], ...]  # (level, lines or pages moved into it)
    parallel: str | None
    vector: tuple[str, ...]  # innermost loops whose accesses all vectorize
    # Cycles of one thread's share of everything but the memory stream the cores share:
    # when two candidates wait on the same stream, the one whose cores do less between
    # its lines keeps more requests in flight (column sums: 2x apart at the same stream).
    core: float = 0.0
    # Cycles when the data starts in the last cache level (it fits there: an operator run
    # after the one that wrote its inputs, a benchmark's repeats), None when it does not
    # fit: the roofline's memory stream left out, each thread's share and the forks kept.
    warm: float | None = None

    def describe(self) -> str:
        moved = ", ".join(f"{k} {v:.3g}" for k, v in self.traffic)
        par = f", parallel {self.parallel}" if self.parallel else ""
        return f"{self.cycles:.3g} cycles (compute {self.compute:.3g}; {moved}{par})"


# The model's sub-results, shared by every estimate: a nest's candidate orders rebuild its
# Loop nodes but keep their ``expr`` objects, so what depends only on the statements and the
# loops' functions (domains with outer loops fixed, access boxes, strides, trip counts) is
# computed once for all candidates (0.5 s of a 1.1 s lowering of a batch-8 convolution).
# A lowering asks for a few hundred of each; the limits bound what a long process keeps.
_BOXES: Memo[dict[str, Box | None]] = Memo(2048)


def _granules(lo: list[int], hi: list[int], ext: tuple[int, ...], elem: int,
              granule: int) -> int:
    """Lines (or pages) of the box ``lo..hi`` in a row-major tensor of extents ``ext``: the
    trailing dims the box covers whole merge with the first one it covers in part into a
    contiguous block, one run of granules per value of the dims before it; and no more
    than the granules its address range spans (rows shorter than a granule share one)."""
    counts = [b - a + 1 for a, b in zip(lo, hi, strict=True)]
    block, k = 1, len(counts) - 1
    while k >= 0:
        block *= counts[k]
        k -= 1
        if counts[k + 1] < ext[k + 1]:
            break
    runs = math.prod(counts[: k + 1]) * max(1, -(-block * elem // granule))
    first = last = 0
    for a, b, e in zip(lo, hi, ext, strict=True):
        first, last = first * e + a, last * e + b
    return min(runs, last * elem // granule - first * elem // granule + 1)


Box = tuple[list[int], list[int]]  # the lowest and highest index of each dimension

MAX_VECTOR_STRIDE = 4
"""Reads strided by at most this many elements along the innermost loop vectorize in the
model (a pooling window's ``I(2*w + x)``), at a load per element of stride and a shuffle per
extra load: a fact of the compiler (GCC 12 permutes up to stride 4)."""


@dataclass
class _Ctx:
    """One model evaluation: the program and memo tables (per tree node identity)."""

    poly: PolyProgram
    machine: Machine
    padded: frozenset[str] = frozenset()  # zero-padded packed copies (Schedule.buffers)
    skip: frozenset[str] = frozenset()  # statements the printer leaves out (dead inits)
    foot: dict[tuple[int, int, int, str | None], int | None] = field(default_factory=dict)
    boxes: dict[tuple[int, int], dict[str, Box | None]] = field(default_factory=dict)


def footprint(ctx: _Ctx, node: Node, outer: list[Loop], granule: int,
              only: str | None = None) -> int | None:
    """Lines (``granule`` bytes each) one execution of ``node`` touches with the loops of
    ``outer`` fixed at their first value (of tensor ``only`` alone when given); None when
    an extent is unknown."""
    key = (id(node), len(outer), granule, only)
    if key in ctx.foot:
        return ctx.foot[key]
    total: int | None = 0
    for tensor, box in _boxes(ctx, node, outer).items():
        if only is not None and tensor != only:
            continue
        ext = extents(ctx.poly, tensor)
        if box is None or ext is None:
            total = None
            break
        lo, hi = box
        total = (total or 0) + (_granules(lo, hi, ext, elem_bytes(ctx.poly, tensor), granule)
                                if lo else 1)
    ctx.foot[key] = total
    return total


def _boxes(ctx: _Ctx, node: Node, outer: list[Loop]) -> dict[str, Box | None]:
    """The bounding box of each tensor's elements one execution of ``node`` touches (None:
    not constant), computed once for every granule the levels ask for."""
    key = (id(node), len(outer))
    if key not in ctx.boxes:
        live = _live(ctx, node)
        ctx.boxes[key] = _BOXES.get((ctx.poly, *(lp.expr for lp in outer)), live,
                                    lambda: {t: _box(img) for t, img in _images(
                                        ctx.poly, live, outer).items()
                                        if not img.is_empty()})
    return ctx.boxes[key]


def _live(ctx: _Ctx, node: Node) -> tuple[str, ...]:
    """The statements below ``node`` that the printer prints."""
    return tuple(s for s in stmts_of(node) if s not in ctx.skip)


def _images(poly: PolyProgram, stmts: tuple[str, ...], outer: list[Loop]) -> dict[str, isl.Set]:
    """The elements of each tensor that ``stmts`` touch with ``outer`` fixed."""
    images: dict[str, isl.Set] = {}
    for name in stmts:
        dom = fixed_domain(poly.stmt(name), outer)
        for acc in accesses(poly, name):
            img = dom.apply(acc.relation)
            images[acc.tensor] = images[acc.tensor].union(img) if acc.tensor in images else img
    return images


def _box(img: isl.Set) -> Box | None:
    lo, hi = [], []
    for k in range(img.dim(_SET)):
        a, b = img.dim_min_val(k), img.dim_max_val(k)
        if not (a.is_int() and b.is_int()):
            return None
        lo.append(int(a.to_python()))
        hi.append(int(b.to_python()))
    return lo, hi


def traffic(ctx: _Ctx, node: Node, outer: list[Loop], granule: int,
            capacity: int, only: str | None = None) -> float | None:
    """Granules moved into a cache of ``capacity`` granules by one execution of ``node``
    (the module docstring's rule); of tensor ``only`` alone in that cache when given."""
    whole = footprint(ctx, node, outer, granule, only)
    if whole is None or whole <= capacity or isinstance(node, Leaf):
        return whole
    if isinstance(node, Sequence):
        parts = [traffic(ctx, c, outer, granule, capacity, only) for c in node.children]
        return None if None in parts else sum(p for p in parts if p is not None)
    inner = [*outer, node]
    body = footprint(ctx, node.child, inner, granule, only)
    n = trip(ctx.poly, node, outer)
    once = traffic(ctx, node.child, inner, granule, capacity, only)
    if body is None or n is None or once is None:
        return None
    if n <= 1:
        return once
    growth = max(0.0, (whole - body) / (n - 1))
    if body + growth <= capacity:
        return once + (n - 1) * growth
    return n * once


def _chain(node: Node) -> list[Loop]:
    out: list[Loop] = []
    while isinstance(node, Loop):
        out.append(node)
        node = node.child
    return out


def _ops(s: PolyStmt, lanes: int, elem: int) -> float:
    """Arithmetic operations of one instance in a vector of ``lanes`` elements of ``elem``
    bytes (one lane: scalar code), at least one (the store or the update): one each, a
    builtin call what ``polyopt.costmodel.calls`` measured it to cost."""
    n = sum(calls.call_ops(e.fn, lanes, elem) if isinstance(e, ir.Call) else 1.0
            for e in s.stmt.rhs.walk() if isinstance(e, (ir.Binary, ir.Call, ir.Unary,
                                                         ir.Select)))
    return max(1.0, n + (1 if s.accumulates else 0))


def _scalar_calls(s: PolyStmt) -> tuple[str, ...]:
    """The builtins ``s`` calls that have no vector variant (its loop stays scalar)."""
    return tuple(dict.fromkeys(e.fn for e in s.stmt.rhs.walk()
                               if isinstance(e, ir.Call) and not calls.vectorizes(e.fn)))


def vector_loads(poly: PolyProgram, s: PolyStmt, path: list[Loop],
                 max_stride: int = 1) -> int | None:
    """Vector loads of one vector of ``s``'s instances along its innermost loop: one per
    read invariant or unit-stride along it, ``k`` per read strided by ``k <= max_stride``
    elements (the compiler loads the ``k`` vectors it spans and shuffles them); None when an
    access does not vectorize (a gather, a longer stride, a write that is not unit-stride)
    or ``s`` calls a builtin with no vector variant."""
    step = step_map(path, path[-1], s) if path else None
    if step is None or _scalar_calls(s):
        return None
    loads = 0
    for a in accesses(poly, s.name):
        st = stride(poly, a, step)
        k = 1 if st.kind in (INVARIANT, UNIT) else st.bytes // elem_bytes(poly, a.tensor)
        if st.kind == GATHER or k > (1 if a.write else max_stride):
            return None
        loads += 0 if a.write else k
    return loads


def vectorizes(poly: PolyProgram, s: PolyStmt, path: list[Loop]) -> bool:
    """Are all of ``s``'s accesses invariant or unit-stride along its innermost loop?"""
    return vector_loads(poly, s, path) is not None


def vector_splits(poly: PolyProgram, root: Node, loop: Loop,
                  machine: Machine) -> tuple[vl.Split, ...]:
    """The widths innermost ``loop`` of ``root`` may vectorize at, best first
    (``polyopt.costmodel.lanes.choose``): its trip count with the outer loops at their first
    value, a register's lanes of its statements' widest output element, whether a read
    strided along it keeps its last iteration scalar, and the predicted cycles of its body
    at each width (``_iteration``)."""
    return _splits(poly, machine, *_loop_group(poly, root, loop, machine))


def _loop_group(poly: PolyProgram, root: Node, loop: Loop, machine: Machine
                ) -> tuple[list[Loop], list[tuple[PolyStmt, int | None]]]:
    """``loop``'s path from ``root``, and its statements with their vector loads."""
    path = [*(n for n in path_to(root, loop)[:-1] if isinstance(n, Loop)), loop]
    return path, [(poly.stmt(n), vector_loads(poly, poly.stmt(n), path,
                                              MAX_VECTOR_STRIDE))
                  for n in stmts_of(loop)]


def _splits(poly: PolyProgram, machine: Machine, path: list[Loop],
            group: list[tuple[PolyStmt, int | None]]) -> tuple[vl.Split, ...]:
    """``vector_splits`` of ``path[-1]`` for its statements and their vector loads."""
    elem = max((elem_bytes(poly, s.stmt.tensor) for s, _ in group), default=4)
    return vl.choose(trip(poly, path[-1], path[:-1]), machine.lanes(elem), _gap(group),
                     _body_cost(poly, machine, group))


def _gap(group: list[tuple[PolyStmt, int | None]]) -> bool:
    """Does a statement of ``group`` load more vectors than it reads (a strided read)?"""
    return any(loads is not None and loads > len(s.reads) for s, loads in group)


def _iteration(poly: PolyProgram, machine: Machine, s: PolyStmt, loads: int,
               lanes: int) -> float:
    """Cycles of one vector iteration of ``s`` at ``lanes`` (1: a scalar remainder's):
    its operations and a strided read's shuffles on the FMA pipes, its vector loads."""
    ops = _ops(s, lanes, elem_bytes(poly, s.stmt.tensor)) + loads - len(s.reads)
    return ops / machine.fma_units + loads / machine.loads_per_cycle


def _body_cost(poly: PolyProgram, machine: Machine,
               group: list[tuple[PolyStmt, int | None]]) -> vl.Cost:
    """Cycles of one iteration of a vector loop over ``group`` at each width."""
    body = [(s, k) for s, k in group if k is not None]
    if not body:
        return lambda lanes: 1.0
    return lambda lanes: sum(_iteration(poly, machine, s, k, lanes) for s, k in body)


def scalar_calls(poly: PolyProgram, loop: Loop) -> tuple[str, ...]:
    """The builtins the statements below ``loop`` call that have no vector variant: a loop
    calling one does not vectorize in the C kernels (``polyopt.costmodel.calls``)."""
    return tuple(dict.fromkeys(f for n in stmts_of(loop) for f in _scalar_calls(poly.stmt(n))))


def scalar_reason(poly: PolyProgram, loop: Loop) -> str:
    """Why ``loop`` stays scalar whatever its dependences ("" when its calls vectorize):
    GCC refuses a simd loop calling a builtin with no vector variant, and the model
    predicts such a loop scalar too."""
    scalar = scalar_calls(poly, loop)
    return (f"it calls {', '.join(scalar)}, which has no vector variant "
            f"(polyopt.costmodel.calls)") if scalar else ""


def vector_width(poly: PolyProgram, root: Node, loop: Loop,
                 machine: Machine) -> tuple[int | None, str]:
    """The lanes vector loop ``loop`` runs at (the best of ``vector_splits``) and why; None
    on a machine without vector lanes (the compiler decides)."""
    path, group = _loop_group(poly, root, loop, machine)
    splits = _splits(poly, machine, path, group)
    best, cost = splits[0], _body_cost(poly, machine, group)
    if best.lanes < 2:
        return None, "the machine has no vector lanes"
    if not best.iterations:
        return best.lanes, f"{best.lanes} lanes (a whole register: the trip is not known)"
    others = "; ".join(f"{sp.lanes} lanes: {sp}, {sp.cycles(cost):.3g} cycles"
                       for sp in splits[1:])
    return best.lanes, (f"{best.lanes} lanes: {best}, {best.cycles(cost):.3g} cycles"
                        + (f" (against {others})" if others else ""))


def free_loop(poly: PolyProgram, lp: Loop) -> bool:
    """Can ``lp`` run in parallel in any position (a cheap, conservative reading of the
    statements, not the dependences): each statement below writes along it and does not
    reduce over it, and a read of a tensor written below indexes it the way the write does."""
    written: dict[str, tuple[str, ...]] = {}
    its: dict[str, str] = {}
    for name in stmts_of(lp):
        s = poly.stmt(name)
        it = raw_iterator(lp.expr, name)
        if it is None or it not in s.stmt.lhs or it in s.stmt.reduction_iters:
            return False
        written[s.stmt.tensor], its[name] = s.stmt.lhs, it
    for name in stmts_of(lp):
        for r in poly.stmt(name).reads:
            lhs = written.get(r.read.tensor)
            if lhs is None:
                continue
            k = lhs.index(its[name]) if its[name] in lhs else -1
            ix = r.read.indices[k] if 0 <= k < len(r.read.indices) else None
            if not (isinstance(ix, ir.Var) and ix.name == its[name]):
                return False
    return True


def _compute(ctx: _Ctx, node: Node, outer: list[Loop]) -> tuple[float, tuple[str, ...]]:
    """(cycles of arithmetic and loads, vectorizing innermost loops). A vector loop runs
    at its best width (``vector_splits``, as ``vector_width`` prints it): each part of its
    split (whole vectors, the epilogue, the scalar remainder, ``polyopt.costmodel.lanes``)
    costs one instance's operations, shuffles and loads at that part's width
    (``_iteration``); a statement that does not vectorize, its scalar operations."""
    m, cycles = ctx.machine, 0.0
    vector: dict[int, tuple[list[Loop], list[tuple[PolyStmt, int, int]]]] = {}
    for name, path in leaf_paths(node):
        if name in ctx.skip:
            continue
        s = ctx.poly.stmt(name)
        n = points(fixed_domain(s, outer))
        if n is None:
            raise _Unknown
        loads = vector_loads(ctx.poly, s, [*outer, *path], MAX_VECTOR_STRIDE) \
            if path else None
        transposed = reg.transposed_copy(ctx.poly, m, s, [*outer, *path]) \
            if loads is None else None
        if transposed is not None:
            cycles += n * transposed
        elif loads is None:
            ops = _ops(s, 1, elem_bytes(ctx.poly, s.stmt.tensor))
            cycles += n * (ops / m.fma_units + len(s.reads) / m.loads_per_cycle)
        else:
            vector.setdefault(id(path[-1]), ([*outer, *path], []))[1].append((s, loads, n))
    for full, group in vector.values():
        pairs: list[tuple[PolyStmt, int | None]] = [(s, k) for s, k, _ in group]
        chosen = _splits(ctx.poly, m, full, pairs)[0]
        short = trip(ctx.poly, full[-1], full[:-1])
        for s, loads, n in group:
            one = _body_cost(ctx.poly, m, [(s, loads)])
            # per instance: the split's cycles over its trip (unknown: a whole vector each)
            plain = chosen.cycles(one) / short if short else one(chosen.lanes)
            tile = _in_registers(ctx, s, full)
            if tile is None:
                cycles += n * plain
                continue
            tiled, share = tile
            # the last column tile's plain loops: the loop printed once for every column
            # tile, at the full tiles' width, so its trip is known only at run time and
            # the compiler splits the tail's few columns as it would any trip (4 columns
            # at 16 lanes: 4 scalar iterations; 1 column: one)
            cols = share.tail_cols
            tail = share.tail * vl.split(cols, chosen.lanes, _gap(pairs)).cycles(
                one) / cols if cols else 0.0
            cycles += n * (share.kernel * tiled + tail
                           + (1 - share.kernel - share.tail) * plain)
    return cycles, tuple(dict.fromkeys(full[-1].name for full, _ in vector.values()))


def _in_registers(ctx: _Ctx, s: PolyStmt, path: list[Loop]
                  ) -> tuple[float, reg.Share] | None:
    """Cycles per instance of ``s`` in the register tile's micro-kernel ``path`` ends in
    (``polyopt.costmodel.registers``), and how its instances share out between the kernel
    and plain loops; None for a plain vector loop."""
    at = reg.tile_at(ctx.poly, s, path)
    if at is None:
        return None
    tile, rows, cols = at.tile, at.rows, at.cols
    lanes = ctx.machine.lanes(elem_bytes(ctx.poly, s.stmt.tensor))
    vectors = -(-cols // lanes)
    step = reg.step_cycles(ctx.poly, ctx.machine, s, path, at, vectors)
    if step is None:
        return None
    steps = math.prod(t or 1 for t in at.trips[tile.k: tile.rows])
    share = reg.kernel_share(ctx.poly, s, path, tile, rows, cols, ctx.padded)
    per_tile = step + reg.spill_cycles(ctx.machine, rows, vectors) / steps
    return per_tile * share.work / (rows * cols), share


class _Unknown(Exception):
    """An extent is not known: the model does not apply."""


def _levels(machine: Machine) -> list[tuple[str, int, int, float]]:
    """(name, granule bytes, capacity in granules, bytes per cycle into it)."""
    m, line = machine, machine.line_bytes
    out = [("L1", line, m.l1d_bytes // line, m.l2_bytes_per_cycle)]
    if m.l3_bytes:
        out.append(("L2", line, m.l2_bytes // line, m.l3_bytes_per_cycle))
        out.append(("L3", line, m.l3_bytes // m.cores // line, m.memory_bytes_per_cycle))
    else:
        out.append(("L2", line, m.l2_bytes // line, m.memory_bytes_per_cycle))
    return out


@dataclass(frozen=True)
class Printing:
    """What the C printer does with a whole schedule beyond its loops that the model
    needs: the zero-padded packed copies (``Schedule.buffers``), over which a register
    tile's partial tiles run in its micro-kernel, and the statements it leaves out (the
    zeroing of outputs whose register tiles start at zero)."""

    padded: frozenset[str] = frozenset()
    skip: frozenset[str] = frozenset()


def printing(poly: PolyProgram, root: Node, buffers: tuple[str, ...]) -> Printing:
    """The ``Printing`` of a schedule's tree ``root`` with packed copies ``buffers``."""
    padded = frozenset(buffers)
    return Printing(padded, reg.dead_inits(poly, root, padded))


def estimate(poly: PolyProgram, node: Node, machine: Machine, outer: list[Loop] | None = None,
             parallel: Callable[[Loop], bool] | None = None,
             printed: Printing = Printing(), *, parallel_trips: int) -> Estimate | None:
    """Predicted cycles of one execution of ``node`` (``outer`` loops fixed), None when an
    extent is unknown. ``parallel`` says which loops of its outer chain may run in
    parallel (default :func:`free_loop`); the outermost with at least ``parallel_trips``
    iterations (the pipeline's rule, ``CpuPolicy.parallel_trips``) does when a parallel
    region pays for its fork and join by the one-core cycles (``Machine.parallel_pays``,
    the rule ``parallelize`` applies) and its forks, one per
    iteration of the loops outside it, cost less than the cores save. ``printed`` says
    what the printer makes of the whole schedule (:func:`printing`; by default nothing
    beyond its loops)."""
    ctx, outer = _Ctx(poly, machine, printed.padded, printed.skip), list(outer or [])
    if not _live(ctx, node):
        return Estimate(0.0, 0.0, (), None, (), 0.0, 0.0)
    try:
        compute, vec = _compute(ctx, node, outer)
    except _Unknown:
        return None
    moved, core, shared, pull = [], compute, 0.0, 0.0
    for name, granule, cap, bw in _levels(machine):
        t = traffic(ctx, node, outer, granule, cap)
        if t is None:
            return None
        moved.append((name, t))
        if name == _levels(machine)[-1][0]:
            shared = t * granule / bw
            # one core's own pull from memory: a part of the bandwidth, less where it
            # reads more streams together than its prefetchers follow
            pull = shared / machine.core_memory_share * _walks(ctx, node, outer, t) \
                if shared else 0.0
        else:
            core = max(core, t * granule / bw)
    tlb = traffic(ctx, node, outer, machine.page_bytes, machine.tlb_entries)
    if tlb is None:
        return None
    moved.append(("TLB", tlb))
    # page walks stall a core whether it waits on its caches or on its pull from memory
    busy = max(core, pull) + tlb * machine.tlb_miss_cycles
    core += tlb * machine.tlb_miss_cycles
    speedup, forks, par = 1.0, 0, None
    if machine.parallel_pays(max(busy, shared)):
        speedup, forks, par = _parallel(ctx, node, outer, parallel or (lambda lp: free_loop(
            poly, lp)), parallel_trips)
        if max(busy / speedup, shared) + forks * machine.fork_join_cycles >= max(busy, shared):
            speedup, forks, par = 1.0, 0, None  # its loop forks too often: one thread
    cycles = max(busy / speedup, shared) + forks * machine.fork_join_cycles
    last = footprint(ctx, node, outer, machine.line_bytes)
    fits = last is not None and last * machine.line_bytes <= _last_level(machine)
    warm = core / speedup + forks * machine.fork_join_cycles if fits else None
    return Estimate(cycles, compute, tuple(moved), par, vec, core / speedup, warm)


def _walks(ctx: _Ctx, node: Node, outer: list[Loop], total: float) -> float:
    """A core's time for the node's ``total`` lines from memory over its time at its full
    streaming rate: each tensor's lines from memory (as if alone in the last level) over
    the share its most streams read together get (``polyopt.costmodel.streams``).
    Only tensors larger than the last level count: one it holds is read from there
    whenever the data start warm (``Estimate.warm``), and a handful of its lines are no
    stream to follow."""
    _, granule, capacity, _ = _levels(ctx.machine)[-1]
    big: dict[str, bool] = {}  # a tensor the last level holds comes from there warm
    most: dict[str, int] = {}
    for name, path in leaf_paths(node):
        if name in ctx.skip:
            continue
        s, full = ctx.poly.stmt(name), [*outer, *path]
        for acc in accesses(ctx.poly, name):
            if acc.tensor not in big:
                whole = footprint(ctx, node, outer, granule, acc.tensor)
                big[acc.tensor] = whole is not None and whole > capacity
            w = streams.walk(ctx.poly, s, outer, path, acc, granule) \
                if big[acc.tensor] else None
            if w is None or w.at is None:
                continue
            rows = _rows(ctx, full[w.at], full[: w.at + 1], acc.tensor) or w.streams
            most[acc.tensor] = max(most.get(acc.tensor, 1), min(w.streams, rows))
    lines = slow = 0.0
    for tensor, n in most.items():
        if n > ctx.machine.prefetch_streams:
            t = traffic(ctx, node, outer, granule, capacity, tensor) or 0.0
            lines, slow = lines + t, slow + t / streams.share(ctx.machine, n)
    if not lines or not total:
        return 1.0  # every walk at the full rate: no traffic to weigh
    return (total - lines + slow) / total


def _rows(ctx: _Ctx, lp: Loop, outer: list[Loop], tensor: str) -> int | None:
    """The contiguous runs of ``tensor`` one iteration of ``lp`` touches (``outer`` its
    loops and itself, fixed): the rows of its box before the trailing dims it covers
    whole (``_granules``)."""
    box = _boxes(ctx, lp.child, outer).get(tensor)
    ext = extents(ctx.poly, tensor)
    if box is None or ext is None or not box[0]:
        return None
    counts = [b - a + 1 for a, b in zip(*box, strict=True)]
    k = len(counts) - 1
    while k > 0 and counts[k] == ext[k]:
        k -= 1
    return math.prod(counts[:k])


def core_lines(poly: PolyProgram, top: Loop, candidates: list[Loop],
               machine: Machine) -> list[float | None]:
    """Per loop of ``candidates`` (loops of ``top``'s chain), the lines one core touches
    running nest ``top`` with that loop in parallel (OpenMP's static schedule: a core takes
    ``ceil(n / cores)`` of its ``n`` iterations, every loop above it whole); None when an
    extent is unknown. Per tensor, the share of the loop's footprint a core's iterations
    touch, of the whole nest's: a tensor the loop does not index (the input of a
    channel-block loop) counts whole."""
    ctx, line = _Ctx(poly, machine), machine.line_bytes
    chain = _chain(top)
    nest = {t: footprint(ctx, top, [], line, t) for t in _boxes(ctx, top, [])}

    def share(lp: Loop) -> float | None:
        above = chain[:chain.index(lp)]
        n = trip(poly, lp, above)
        total = 0.0
        for tensor, lines in nest.items():
            whole = footprint(ctx, lp, above, line, tensor)
            one = footprint(ctx, lp.child, [*above, lp], line, tensor)
            if n is None or n < 1 or lines is None or whole is None or one is None:
                return None
            if whole:
                total += lines * min(1.0, one * -(-n // machine.cores) / whole)
        return total
    return [share(lp) for lp in candidates]


def l2_fill_rate(machine: Machine) -> float:
    """Bytes a cycle into one core's L2 from the level behind it (``_levels``)."""
    return _levels(machine)[1][3]


def _last_level(machine: Machine) -> int:
    """Bytes of the last cache level, shared by the cores."""
    return machine.l3_bytes or machine.l2_bytes * machine.cores


def _parallel(ctx: _Ctx, node: Node, outer: list[Loop],
              free: Callable[[Loop], bool], trips: int) -> tuple[float, int, str | None]:
    """(speedup, fork/joins, loop) of the outermost free loop of the chain with at least
    ``trips`` iterations; where the chain ends in a sequence of nests that each
    have one (a blocked output's zeroing, product and copy back under its block loop), the
    least speedup of theirs and all their forks."""
    forks, above, last = 1, list(outer), node
    for lp in _chain(node):
        n = trip(ctx.poly, lp, above) or 1
        if n >= trips and free(lp):
            # OpenMP's static schedule: the core with the most iterations sets the time
            return n / -(-n // ctx.machine.cores), forks, lp.name
        forks *= n
        above.append(lp)
        last = lp.child
    kids = [c for c in last.children if _live(ctx, c)] if isinstance(last, Sequence) else []
    if not kids or not all(isinstance(c, Loop) for c in kids):
        return 1, 0, None
    each = [_parallel(ctx, c, above, free, trips) for c in kids]
    if any(par is None for _, _, par in each):
        return 1, 0, None
    return (min(n for n, _, _ in each), forks * sum(f for _, f, _ in each),
            ", ".join(par for _, _, par in each if par))
