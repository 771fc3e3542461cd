"""Memory streams: how many runs of memory an access reads together, and the share of a
core's streaming rate its prefetchers keep for them (the cost model's memory level,
``costmodel/cost``).

Going outward from the innermost loop of a statement's path, an access's stride along
each loop (``costmodel/strides``) either is zero (the loop re-reads what the loops inside
it read: the caches' question), continues what the loops inside read (its stride no more
than their contiguous bytes, or a line), or jumps (each of its iterations starts another
run). Jumping loops inside a loop that continues them make **streams** read together:
a register tile's rows over an operand read in place, or ``Y(b,c) +=! X(a,b,c)`` in
order ``b, a, c``, whose ``a`` reads a row of each of 64 planes before ``b`` moves every
plane's run on. Their number is the runs of memory the continuing loop's body touches
(``cost._rows``: taps that re-read a tile's rows add none).

A core's prefetchers follow ``Machine.prefetch_streams`` streams; the lines of the
others come at ``untracked_share`` of the rate a followed stream gets (:func:`share`).
Both are measured by ``scripts/calibrate/bench_streams.py --mode rows`` on one thread.
"""

from __future__ import annotations

from dataclasses import dataclass

from polyopt.costmodel.machine import Machine
from polyopt.costmodel.strides import GATHER, Access, elem_bytes, step_map, stride
from polyopt.costmodel.trips import trip
from polyopt.poly.model import PolyProgram, PolyStmt
from polyopt.schedules.tree import Loop


@dataclass(frozen=True)
class Walk:
    """The streams one access reads together in one execution of its loops, and the loop
    (its place in the statement's path) that moves them on; None: a single stream."""

    streams: int
    at: int | None = None


def walk(poly: PolyProgram, s: PolyStmt, outer: list[Loop], path: list[Loop], acc: Access,
         line: int) -> Walk | None:
    """The ``Walk`` of ``acc`` (of statement ``s``) along ``path`` (outermost first, the
    loops above ``s`` below the fixed loops ``outer``), with lines of ``line`` bytes; None
    where a stride or a trip is not known (a gather)."""
    run = elem_bytes(poly, acc.tensor)
    streams, pending, at = 1, 1, None
    full = [*outer, *path]
    for k in range(len(full) - 1, len(outer) - 1, -1):
        step = step_map(full, full[k], s)
        n = trip(poly, full[k], full[:k])
        if step is None or n is None:
            return None
        st = stride(poly, acc, step)
        if st.kind == GATHER:
            return None
        if st.bytes == 0 or n <= 1:
            continue
        if st.bytes <= max(run, line):
            run += (n - 1) * st.bytes
            if pending > 1:
                streams, at = pending, k
        else:
            pending *= n
    return Walk(streams, at)


def share(machine: Machine, streams: int) -> float:
    """The share of a core's streaming rate from memory that reading ``streams`` streams
    together gets (the module docstring's rule), in (0, 1]."""
    if streams <= machine.prefetch_streams:
        return 1.0
    tracked = machine.prefetch_streams / streams
    return 1.0 / (tracked + (1.0 - tracked) / machine.untracked_share)
