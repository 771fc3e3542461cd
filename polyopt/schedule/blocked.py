"""Blocked layouts for the CPU pipeline: when an output's stride-1 dimension makes poor
vector tiles (a convolution's 56- or 14-wide rows), compute the output with another of its
dimensions (the channels) blocked by the vector width, NCHW16c-style.

The contraction's vector loop is then that block's offset, its weights are packed along the
same dimension so each vector is one contiguous load, and padded inputs are copied with
their padding, so the statement needs no border piece. The driver applies the layouts to
the program before it is scheduled, and the schedule records each as a ``pack`` step.
"""

from __future__ import annotations

import contextlib

import islpy as isl

from polyopt import ir
from polyopt.dtypes import DTYPES
from polyopt.errors import ScheduleError
from polyopt.poly.model import PolyProgram, PolyStmt
from polyopt.poly.relayout import Pack, relayout
from polyopt.schedule.machine import Machine, gemm_blocking


def plan_layout(pp: PolyProgram, machine: Machine, block: int | None = None) -> tuple[Pack, ...]:
    """The layouts for the CPU pipeline, decided before scheduling: the output of a
    contraction whose last dimension vectorizes badly in channel blocks of ``block``
    (default: the vector lanes; a multiple of them lets a register tile hold several
    vectors of channels), its weights along the same channels and its padded inputs with
    their padding; for a convolution left unblocked, its padded inputs. Each layout is
    tried on the program, and one that does not apply is left out."""
    program = pp.program
    if program.sizes:  # extents unknown: keep the layouts
        return ()
    for s in pp.stmts:
        plan = plan_blocking(program, s, machine, block)
        if plan is None:
            continue
        tensor, dim, lanes = plan
        output = _applicable(program, [Pack(tensor, dim, lanes, dim)])
        if output:
            return _applicable(program, [*output, *_operand_packs(program, s, s.stmt.lhs[dim],
                                                                   lanes)])
        break  # one output per def: its statements were rewritten
    packs: list[Pack] = []
    for s in pp.stmts:  # unblocked convolutions: copy padded inputs, so the
        if s.kind == "update" and s.stmt.op == "+" and s.stmt.reduction_iters and not s.guarded:
            packs += _operand_packs(program, s, "", 1)  # partial tiles can run packed
    return _applicable(program, packs)


def _applicable(program: ir.Program, packs: list[Pack]) -> tuple[Pack, ...]:
    """``packs`` without those that do not apply after the ones before them."""
    done: list[Pack] = []
    for p in packs:
        with contextlib.suppress(ScheduleError):
            program, _ = relayout(program, [p])
            done.append(p)
    return tuple(done)


def plan_blocking(program: ir.Program, s: PolyStmt, machine: Machine,
                  block: int | None = None) -> tuple[str, int, int] | None:
    """(output, dimension to block, block size) for a contraction that wants it."""
    t = program.tensors[s.stmt.tensor]
    if (s.kind != "update" or s.stmt.op != "+" or t.role != "output" or t.rank < 3
            or not s.stmt.reduction_iters or t.dtype not in ("float32", "float64")):
        return None
    lanes = gemm_blocking(machine, DTYPES[t.dtype].np.itemsize).lanes
    extents = [ir.extent_value(e, {}) for e in t.shape]
    if extents[-1] % lanes == 0 and extents[-1] >= 4 * lanes and _unit_stride(s):
        return None  # the natural layout vectorizes well
    # A channel: an output index that some operand (the weights) is indexed by directly,
    # and no operand that moves with the output's last index is (a depthwise input would
    # need a blocked copy of its own: one more pass than the blocking saves).
    last = s.stmt.lhs[-1]
    plain = {ix.name for r in s.reads for ix in r.read.indices if isinstance(ix, ir.Var)}
    streamed = {ix.name for r in s.reads if r.read.uses(last) for ix in r.read.indices
                if isinstance(ix, ir.Var)}
    # Two vectors of channels per block for a filter with taps over wide rows (the register
    # tile then holds two accumulators per output pixel: ResNet-50's 3x3 layers on 28- and
    # 56-wide rows ran 1.4-1.6x faster; 1x1 layers and rows of 14 or 7 ran slower), else one.
    wide = extents[-1] >= WIDE_ROWS and _has_taps(s)
    for size in [block] if block else [2 * lanes, lanes] if wide else [lanes]:
        fits = [d for d in range(t.rank - 1) if extents[d] % size == 0
                and s.stmt.lhs[d] in plain and s.stmt.lhs[d] not in streamed]
        if fits:
            return t.name, max(fits, key=lambda d: extents[d]), size
    return None


WIDE_ROWS = 28

# Reductions this short (filter taps) join a register tile's reduction loops (cpu.py).
SMALL_REDUCTION = 16


def _has_taps(s: PolyStmt) -> bool:
    """Does the contraction have a short reduction besides its longest (filter taps)?"""
    extents = sorted(s.extent(it) or 0 for it in s.stmt.reduction_iters)
    return len(extents) > 1 and 1 < extents[0] <= SMALL_REDUCTION


def _unit_stride(s: PolyStmt) -> bool:
    """Does every operand that moves with the output's last index move by one element
    (not a strided convolution's two)?"""
    it = s.stmt.lhs[-1]
    pos = s.iters.index(it)
    for r in s.reads:
        if not r.affine or r.relation.dim(isl.dim_type.out) == 0:
            continue
        last = isl.PwMultiAff.from_map(r.relation).get_at(r.relation.dim(isl.dim_type.out) - 1)
        if last.n_piece() != 1:
            return False
        coefficient = last.get_pieces()[0][1].get_coefficient_val(isl.dim_type.in_, pos)
        if not (coefficient.is_zero() or coefficient.is_one()):
            return False
    return True


def _operand_packs(program: ir.Program, s: PolyStmt, it: str, lanes: int) -> list[Pack]:
    """Weights along the blocked index ``it``; padded inputs with their padding."""
    out = []
    for read in {r.read.tensor: r.read for r in s.reads}.values():
        if program.tensors[read.tensor].role != "input":
            continue
        plain = [d for d, ix in enumerate(read.indices)
                 if isinstance(ix, ir.Var) and ix.name == it]
        if plain:
            out.append(Pack(read.tensor, plain[0], lanes))
        elif read.pad is not None and any(w != "0" for side in read.pad for w in side):
            dim = next((d for d, side in enumerate(read.pad) if side == ("0", "0")), None)
            if dim is not None:
                out.append(Pack(read.tensor, dim, 1, dim))
    return out
