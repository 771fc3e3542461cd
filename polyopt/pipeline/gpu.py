"""The automatic CUDA mapping of a schedule (``target="cuda"``).

Each top-level nest becomes one kernel launch (a launch boundary is the grid-wide barrier
between nests). In each nest, the outermost perfectly nested loops that carry no dependence
form the band that is mapped, as PPCG does:

- the loop that walks the written tensor's last (stride-1) dimension goes innermost, so
  consecutive threads touch consecutive addresses (coalesced global accesses);
- the innermost two are tiled by the block shape: tile loops are bound to ``blockIdx.x/y``,
  point loops to ``threadIdx.x/y``; a third loop above them is bound to ``blockIdx.z``;
- everything below the band runs sequentially in its thread, so reductions stay race-free.

The block shapes, tiles and limits are fields of a :class:`~polyopt.pipeline.gpu_policy.GpuPolicy`
(default: ``GPU_POLICY``, for the named default GPU model). A nest with no such loop runs on
one thread. Every step is a recorded, checked verb
(``tile``, ``reorder``, ``bind``), so ``Kernel.schedule.as_python()`` shows the mapping.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from polyopt import ir
from polyopt.costmodel.strides import index_use
from polyopt.errors import OptionError, ScheduleError
from polyopt.pipeline.gpu_policy import GPU_POLICY, GpuPolicy
from polyopt.poly.model import PolyStmt
from polyopt.schedules import transform as tf
from polyopt.schedules.legality import carried
from polyopt.schedules.nest import UNKNOWN_TRIP, chain_of, invariant_reads, vector_rows
from polyopt.schedules.schedule import Schedule
from polyopt.schedules.tree import Leaf, Loop, Node, Sequence, raw_iterator, stmts_of

MAX_THREADS = GPU_POLICY.model.max_threads_per_block  # per block (GpuModel says why)


@dataclass(frozen=True)
class GpuMapping:
    """Mapping options: threads per block along x and y (x is the stride-1 loop) for plain
    nests; for contractions, whether to tile them (``tiles``), the block tile
    ``tile = (rows, columns, reduction)`` and each thread's ``regs = (rows, columns)``
    (default: the policy's, ``GpuPolicy.tile_for``: 128 x 128 x 8 with 8 x 8, or 64 x 64 x 8
    with 4 x 4 for outputs under 128 on a side; both give 16 x 16 threads)."""

    block: tuple[int, int] = GPU_POLICY.block
    tiles: bool = True
    tile: tuple[int, int, int] | None = None
    regs: tuple[int, int] | None = None
    shared: bool = True  # stage tile operands through shared memory
    unroll: int | None = None  # the tile's reduction loop; None: fully
    grid: tuple[int, int, int] | None = None  # most blocks per grid dimension

    def tile_for(self, rows: int, cols: int,
                 policy: GpuPolicy = GPU_POLICY) -> tuple[int, int, int, int, int]:
        """(rows, columns, reduction, rows and columns per thread) of a contraction's block
        tile over ``rows x cols`` outputs: these options', else ``policy``'s."""
        return policy.tile_for(rows, cols, self.tile, self.regs)

    @staticmethod
    def from_options(value: Any) -> GpuMapping:
        if value is None:
            return GpuMapping()
        keys = {"block", "tiles", "tile", "regs", "shared", "unroll", "grid"}
        if not isinstance(value, Mapping) or set(value) - keys:
            raise OptionError(f"option gpu must be a dict with keys {sorted(keys)}, e.g. "
                              f"{{'block': (32, 8), 'tile': (64, 64, 8), 'regs': (4, 4)}}, "
                              f"not {value!r}")
        block = tuple(value.get("block", GPU_POLICY.block))
        if (len(block) not in (1, 2) or not all(isinstance(b, int) and b > 0 for b in block)
                or _product(block) > MAX_THREADS):
            raise OptionError(f"option gpu block={block!r}: one or two positive thread "
                              f"counts whose product is at most {MAX_THREADS}")
        tile, regs = value.get("tile"), value.get("regs")
        if tile is not None and (len(tile) != 3 or not all(
                isinstance(t, int) and t > 0 for t in tile)):
            raise OptionError(f"option gpu tile={tile!r}: three positive sizes (rows, "
                              f"columns, reduction)")
        if regs is not None and (len(regs) != 2 or not all(
                isinstance(r, int) and r > 0 for r in regs)):
            raise OptionError(f"option gpu regs={regs!r}: two positive sizes (rows, columns)")
        if tile is not None:
            rm, rn = regs or GPU_POLICY.small_regs
            if tile[0] % rm or tile[1] % rn or (tile[0] // rm) * (tile[1] // rn) > MAX_THREADS:
                raise OptionError(f"option gpu: regs {(rm, rn)} must divide the tile's rows "
                                  f"and columns {tile[:2]}, leaving at most {MAX_THREADS} "
                                  f"threads")
        unroll, grid = value.get("unroll"), value.get("grid")
        if unroll is not None and (not isinstance(unroll, int) or unroll < 1):
            raise OptionError(f"option gpu unroll={unroll!r}: a positive int")
        if grid is not None and (len(grid) != 3 or not all(
                isinstance(g, int) and g > 0 for g in grid)):
            raise OptionError(f"option gpu grid={grid!r}: three positive block counts "
                              f"(x, y, z); grid-stride loops cover the rest")
        return GpuMapping((block[0], block[1] if len(block) > 1 else 1),
                          bool(value.get("tiles", True)),
                          tuple(tile) if tile else None, tuple(regs) if regs else None,
                          bool(value.get("shared", True)), unroll,
                          tuple(grid) if grid else None)


def map_to_gpu(sched: Schedule, mapping: GpuMapping = GpuMapping(),
               policy: GpuPolicy = GPU_POLICY) -> Schedule:
    """``sched`` with each contraction nest register-tiled through shared memory, and every
    other top-level nest's outer parallel band bound to blocks and threads (``mapping``'s
    options, else ``policy``'s defaults)."""
    if mapping.tiles:
        sched = _split_inits(sched)
    for top in [n.name for n in _nests(sched.root) if isinstance(n, Loop)]:
        tiled = _map_contraction(sched, top, mapping, policy) if mapping.tiles else None
        sched = tiled if tiled is not None else _map_nest(sched, top, mapping)
    return sched


def _map_contraction(sched: Schedule, top: str, mapping: GpuMapping,
                     policy: GpuPolicy = GPU_POLICY) -> Schedule | None:
    """A nest of one ``+=`` contraction over a box: rows and columns of the output tiled
    onto blocks, the largest reduction tiled by BK, other reductions outside the tiles,
    the tile staged through shared memory with a register tile per thread (``gpu_tile``).
    None when the nest does not qualify or a step is illegal."""
    chain = chain_of(tf.find(sched.root, top))
    below = chain[-1].child
    if not isinstance(below, Leaf) or len(below.stmts) != 1:
        return None
    s = sched.poly.stmt(below.stmts[0])
    if not _gpu_contraction(s) or not all(r.affine for r in s.reads) or not s.domain.is_box():
        return None
    its = {lp.name: raw_iterator(lp.expr, s.name) for lp in chain}
    by_iter = {it: name for name, it in its.items() if it is not None}
    if len(by_iter) != len(chain) or s.stmt.lhs[-1] not in by_iter:
        return None
    trips = {lp.name: tf.trip_count(lp, sched.poly.domain) or UNKNOWN_TRIP for lp in chain}
    col = by_iter[s.stmt.lhs[-1]]
    rows = [by_iter[i] for i in s.stmt.lhs[:-1] if i in by_iter]
    reds = [by_iter[i] for i in s.stmt.reduction_iters if i in by_iter]
    if not rows or not reds:
        return None
    row = max(rows, key=lambda n: (invariant_reads(s, its[n] or ""),
                                   -vector_rows(s, its[n] or "", its[col] or ""), trips[n]))
    red = max(reds, key=lambda n: trips[n])
    bm, bn, bk, rm, rn = mapping.tile_for(trips[row], trips[col], policy)
    try:
        return _tile_contraction(sched, chain, (row, col, red), (bm, bn, bk, rm, rn), mapping)
    except ScheduleError:
        return None


def _split_inits(sched: Schedule) -> Schedule:
    """A contraction gets a nest of its own (its init runs as a kernel before it)."""
    for top in _nests(sched.root):
        if not isinstance(top, Loop):
            continue
        stmts = [sched.poly.stmt(s) for s in stmts_of(top)]
        if len(stmts) > 1 and any(_gpu_contraction(s) for s in stmts):
            with contextlib.suppress(ScheduleError):  # illegal: keep the nest whole
                sched = sched.distribute(top.name)
    return sched


def _gpu_contraction(s: PolyStmt) -> bool:
    """A ``+=`` with reductions into a tensor of rank 2 or more (padded reads may be
    guarded: the tile stages them with their zero fill)."""
    return (s.kind == "update" and s.stmt.op == "+" and len(s.stmt.lhs) >= 2
            and bool(s.stmt.reduction_iters))


def _tile_contraction(sched: Schedule, chain: list[Loop], loops: tuple[str, str, str],
                      sizes: tuple[int, int, int, int, int], mapping: GpuMapping) -> Schedule:
    row, col, red = loops
    bm, bn, bk, rm, rn = sizes
    (row_o, row_i), (col_o, col_i), (red_o, red_i) = (tf.split_names(n) for n in loops)
    out = sched.split(row, bm).split(col, bn).split(red, bk)
    others = [lp.name for lp in chain if lp.name not in loops]
    outer = [n for n in others if n not in _reductions(sched, chain)]
    inner = [n for n in others if n not in outer]
    out = out.reorder(*outer, row_o, col_o, *inner, red_o, row_i, col_i, red_i)
    out = out.bind(col_o, "blockIdx.x").bind(row_o, "blockIdx.y")
    free = [n for n in outer if carried(out.root, tf.find(out.root, n), out.deps,
                                        out.poly.domain).is_empty()]
    if free:
        out = out.bind(free[-1], "blockIdx.z")
    return out.gpu_tile(row_i, (rm, rn), shared=mapping.shared, unroll=mapping.unroll)


def _reductions(sched: Schedule, chain: list[Loop]) -> set[str]:
    names = set()
    for lp in chain:
        for st in stmts_of(lp):
            it = raw_iterator(lp.expr, st)
            if it is not None and it in sched.poly.stmt(st).stmt.reduction_iters:
                names.add(lp.name)
    return names


def _nests(root: Node) -> tuple[Node, ...]:
    return root.children if isinstance(root, Sequence) else (root,)


def _map_nest(sched: Schedule, top: str, mapping: GpuMapping) -> Schedule:
    band = _parallel_band(sched, top)
    if not band:
        return sched
    x = _stride_one(sched, band)
    if x != band[-1]:
        order = [lp for lp in band if lp != x] + [x]
        sched = sched.reorder(*order)
        band = order
    mapped = band[-2:]
    sizes = _block_shape(sched, mapped, mapping)
    sched = sched.tile(tuple(mapped), tuple(sizes))
    axes = (("blockIdx.x", "threadIdx.x"), ("blockIdx.y", "threadIdx.y"))
    for name, (block, thread) in zip(reversed(mapped), axes, strict=False):
        outer_name, inner_name = tf.split_names(name)
        sched = sched.bind(outer_name, block).bind(inner_name, thread)
    if len(band) > 2:
        sched = sched.bind(band[-3], "blockIdx.z")
    return sched


def _parallel_band(sched: Schedule, top: str) -> list[str]:
    """The outermost perfectly nested loops from ``top`` down that carry no dependence."""
    band: list[str] = []
    node: Node = tf.find(sched.root, top)
    while isinstance(node, Loop):
        if not carried(sched.root, node, sched.deps, sched.poly.domain).is_empty():
            break
        band.append(node.name)
        node = node.child
    return band


def _stride_one(sched: Schedule, band: list[str]) -> str:
    """The band loop that walks the last dimension of the first statement's target (its
    write's unit stride, ``strides.index_use``)."""
    first = tf.find(sched.root, band[0])
    stmt = sched.poly.stmt(stmts_of(first)[0]).stmt
    write = tuple(ir.Var("int64", name, "index") for name in stmt.lhs)
    for name in band:
        it = raw_iterator(tf.find(sched.root, name).expr, stmt.name)
        if it is not None and index_use(write, it).alone:
            return name
    return band[-1]


def _block_shape(sched: Schedule, mapped: list[str], mapping: GpuMapping) -> list[int]:
    """Threads per mapped loop (outer first): the requested block, with a short loop's
    unused threads moved to the other loop."""
    trips = [tf.trip_count(tf.find(sched.root, n), sched.poly.domain) for n in mapped]
    if len(mapped) == 1:
        return [_fit(_product(mapping.block), trips[0])]
    bx = _fit(mapping.block[0], trips[1])
    by = _fit(max(1, _product(mapping.block) // bx), trips[0])
    return [by, bx]


def _fit(threads: int, trips: int | None) -> int:
    return threads if trips is None else max(1, min(threads, trips))


def _product(xs: tuple[int, ...] | list[int]) -> int:
    out = 1
    for x in xs:
        out *= x
    return out
