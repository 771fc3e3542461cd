"""The automatic CUDA mapping of a schedule (``target="cuda"``).

Each top-level nest becomes one kernel launch (a launch boundary is the grid-wide barrier
between nests). In each nest, the outermost perfectly nested loops that carry no dependence
form the band that is mapped, as PPCG does:

- the loop that walks the written tensor's last (stride-1) dimension goes innermost, so
  consecutive threads touch consecutive addresses (coalesced global accesses);
- the innermost two are tiled by the block shape: tile loops are bound to ``blockIdx.x/y``,
  point loops to ``threadIdx.x/y``; a third loop above them is bound to ``blockIdx.z``;
- everything below the band runs sequentially in its thread, so reductions stay race-free.

A nest with no such loop runs on one thread. Every step is a recorded, checked verb
(``tile``, ``reorder``, ``bind``), so ``Kernel.schedule.as_python()`` shows the mapping.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from polyopt.errors import OptionError
from polyopt.schedule import transform as tf
from polyopt.schedule.legality import carried
from polyopt.schedule.schedule import Schedule
from polyopt.schedule.tree import Loop, Node, Sequence, raw_iterator, stmts_of

MAX_THREADS = 1024  # per block, on every CUDA GPU since compute capability 2.0


@dataclass(frozen=True)
class GpuMapping:
    """Mapping options: threads per block along x and y (x is the stride-1 loop)."""

    block: tuple[int, int] = (32, 8)

    @staticmethod
    def from_options(value: Any) -> GpuMapping:
        if value is None:
            return GpuMapping()
        if not isinstance(value, Mapping) or set(value) - {"block"}:
            raise OptionError(f"option gpu must be a dict with key 'block' (threads per block, "
                              f"x first, e.g. {{'block': (32, 8)}}), not {value!r}")
        block = tuple(value.get("block", (32, 8)))
        if (len(block) not in (1, 2) or not all(isinstance(b, int) and b > 0 for b in block)
                or _product(block) > MAX_THREADS):
            raise OptionError(f"option gpu block={block!r}: one or two positive thread "
                              f"counts whose product is at most {MAX_THREADS}")
        return GpuMapping((block[0], block[1] if len(block) > 1 else 1))


def map_to_gpu(sched: Schedule, mapping: GpuMapping = GpuMapping()) -> Schedule:
    """``sched`` with each top-level nest's outer parallel band bound to blocks and threads."""
    for top in [n.name for n in _nests(sched.root) if isinstance(n, Loop)]:
        sched = _map_nest(sched, top, mapping)
    return sched


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
        sched = sched.bind(f"{name}_o", block).bind(f"{name}_i", thread)
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
    """The band loop that walks the last dimension of the first statement's target."""
    first = tf.find(sched.root, band[0])
    stmt = sched.poly.stmt(stmts_of(first)[0]).stmt
    if stmt.lhs:
        for name in band:
            if raw_iterator(tf.find(sched.root, name).expr, stmt.name) == stmt.lhs[-1]:
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
