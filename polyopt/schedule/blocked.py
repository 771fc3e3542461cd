"""Blocked layouts for the CPU pipeline: when an output's stride-1 dimension makes poor
vector tiles (a convolution's 56- or 14-wide rows), compute the output with another of its
dimensions (the channels) blocked by the vector width, NCHW16c-style.

The contraction's vector loop is then that block's offset, its weights are packed along the
same dimension so each vector is one contiguous load, and padded inputs are copied with
their padding, so the statement needs no border piece. Every choice is a ``pack`` verb.
"""

from __future__ import annotations

import contextlib

from polyopt import ir
from polyopt.dtypes import DTYPES
from polyopt.errors import ScheduleError
from polyopt.poly.model import PolyStmt
from polyopt.schedule.machine import Machine, gemm_blocking
from polyopt.schedule.schedule import Schedule


def block_outputs(schedule: Schedule, machine: Machine) -> Schedule:
    """Pack the output of each contraction whose last dimension vectorizes badly."""
    program = schedule.poly.program
    if program.sizes:  # extents unknown: keep the layouts
        return schedule
    for s in schedule.poly.stmts:
        plan = _plan(program, s, machine)
        if plan is None:
            continue
        tensor, dim, lanes = plan
        with contextlib.suppress(ScheduleError):
            blocked = schedule.pack(tensor, dim, lanes, dim)
            schedule = _pack_operands(blocked, s, s.stmt.lhs[dim], lanes)
        break  # one output per def: its statements were rewritten
    return schedule


def _plan(program: ir.Program, s: PolyStmt,
          machine: Machine) -> tuple[str, int, int] | None:
    """(output, dimension to block, lanes) for a contraction that wants it."""
    t = program.tensors[s.stmt.tensor]
    if (s.kind != "update" or s.stmt.op != "+" or t.role != "output" or t.rank < 3
            or not s.stmt.reduction_iters or t.dtype not in ("float32", "float64")):
        return None
    lanes = gemm_blocking(machine, DTYPES[t.dtype].np.itemsize).lanes
    extents = [ir.extent_value(e, {}) for e in t.shape]
    if extents[-1] % lanes == 0 and extents[-1] >= 4 * lanes:
        return None  # the natural layout vectorizes well
    fits = [d for d in range(t.rank - 1) if extents[d] % lanes == 0]
    if not fits:
        return None
    return t.name, max(fits, key=lambda d: extents[d]), lanes


def _pack_operands(schedule: Schedule, s: PolyStmt, it: str, lanes: int) -> Schedule:
    """Weights along the blocked index; padded inputs with their padding."""
    program = schedule.poly.program
    for read in {r.read.tensor: r.read for r in s.reads}.values():
        t = program.tensors[read.tensor]
        if t.role != "input":
            continue
        plain = [d for d, ix in enumerate(read.indices)
                 if isinstance(ix, ir.Var) and ix.name == it]
        with contextlib.suppress(ScheduleError):
            if plain:
                schedule = schedule.pack(read.tensor, plain[0], lanes)
            elif read.pad is not None and any(w != "0" for side in read.pad for w in side):
                dim = next(d for d, side in enumerate(read.pad) if side == ("0", "0"))
                schedule = schedule.pack(read.tensor, dim, 1, dim)
    return schedule
