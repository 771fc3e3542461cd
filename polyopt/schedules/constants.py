"""What a kernel makes once for its constant inputs, rather than at every call.

A caller may declare inputs *constant*: the same values at every call (a model's frozen
weights, ``polyopt.torch``'s inference graphs). A packed copy of a constant (``Schedule.pack``:
the panels and blocks a register tile streams) depends on nothing else, so the kernel makes it
in a function of its own, run when the constants are new, and keeps it; the per-call function
only reads it. A BERT-base layer's four weights (7.1 M floats, 28 MB) were all copied into
panels at each call; Inductor's ``freezing`` likewise packs weights once.

A copy is made once when every statement writing it reads only constants through affine
accesses (a gather's error report belongs to the per-call function), nothing else writes it
and it is stored whole: then it holds the same values whatever the schedule, so the split
keeps every dependence. A copy kept as one slice per iteration of a loop it shares with its
readers (``Schedule.contractions``), or stored modulo a distance (``storage``), is remade in
each of them, so it stays in the per-call function.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

import islpy as isl

from polyopt.poly.model import PolyStmt
from polyopt.schedules.schedule import Schedule


@dataclass(frozen=True, eq=False)
class Hoisted:
    """A schedule's statements split by when they run: ``once`` writes ``buffers`` (packed
    copies of constants) when the constants are new, ``each`` at every call."""

    buffers: tuple[str, ...]
    once: isl.UnionSet
    each: isl.UnionSet

    def __str__(self) -> str:
        return f"made once: {', '.join(self.buffers)}"


def hoisted(schedule: Schedule, constants: Collection[str],
            stored_apart: Collection[str] = ()) -> Hoisted | None:
    """The packed copies of ``constants`` (input names) that ``schedule`` can make once, or
    None when it has none; ``stored_apart``: the locals stored modulo a distance."""
    if not constants:
        return None
    pp = schedule.poly
    partial = {t for t, _, _ in schedule.contractions} | set(stored_apart)
    buffers = tuple(b for b in schedule.buffers if b not in partial
                    and _made_from(_writers(pp.stmts, b), frozenset(constants)))
    if not buffers:
        return None
    once = isl.UnionSet.empty(pp.domain.get_space())
    for b in buffers:
        for s in _writers(pp.stmts, b):
            once = once.union(isl.UnionSet.from_set(s.domain))
    return Hoisted(buffers, once, pp.domain.subtract(once))


def _writers(stmts: Collection[PolyStmt], tensor: str) -> list[PolyStmt]:
    return [s for s in stmts if s.stmt.tensor == tensor]


def _made_from(writers: list[PolyStmt], constants: frozenset[str]) -> bool:
    """Whether ``writers`` (a copy's statements) read nothing but ``constants``, affinely."""
    return bool(writers) and all(
        not s.accumulates and all(r.affine and r.read.tensor in constants for r in s.reads)
        for s in writers)
