"""How the CPU and CUDA pipelines read a loop nest: its chain of perfectly nested loops and
how a contraction's operands move with its loops."""

from __future__ import annotations

import islpy as isl

from polyopt.poly.model import PolyStmt
from polyopt.schedules.transform import trip_count
from polyopt.schedules.tree import Loop

# The trip count of a loop whose extent is a size: large, so tiles fit any size.
UNKNOWN_TRIP = 1 << 30


def chain_of(top: Loop) -> list[Loop]:
    """``top`` and the loops perfectly nested below it, outermost first."""
    out = [top]
    while isinstance(out[-1].child, Loop):
        out.append(out[-1].child)
    return out


def vector_rows(s: PolyStmt, row: str, col: str) -> int:
    """Operands that move with both the rows and the columns: each row then needs vector
    loads of its own (better that rows only move broadcast operands)."""
    return sum(1 for r in s.reads if r.read.uses(row) and r.read.uses(col))


def invariant_reads(s: PolyStmt, it: str) -> int:
    """How many operands do not move with iterator ``it`` (reused across its values)."""
    return sum(1 for r in s.reads if not r.read.uses(it))


def trip(lp: Loop, domain: isl.UnionSet) -> int:
    """A loop's trip count; a size-generic one counts as large (tiles fit any size)."""
    n = trip_count(lp, domain)
    return UNKNOWN_TRIP if n is None else n
