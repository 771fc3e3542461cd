"""Blocked layouts for the CPU pipeline: when an output's stride-1 dimension makes poor
vector tiles (a convolution's 56- or 14-wide rows), compute the output with another of its
dimensions (the channels) blocked by the vector width, NCHW16c-style.

The contraction's vector loop is then that block's offset, its weights are packed along the
same dimension so each vector is one contiguous load, and padded inputs are copied with
their padding, so the statement needs no border piece. A channel that also indexes an
operand moving along the rows (a depthwise convolution's input, which then needs a blocked
copy of its own) is blocked only where the model predicts it faster than the rows
(``streamed_costs``: rows shorter than a vector). The driver applies the layouts to
the program before it is scheduled, and the schedule records each as a ``pack`` step.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass

import islpy as isl

from polyopt import ir
from polyopt.costmodel.machine import Machine
from polyopt.costmodel.strides import index_use
from polyopt.dtypes import DTYPES
from polyopt.errors import ScheduleError
from polyopt.pipeline.policy import CpuPolicy, cpu_policy
from polyopt.poly import model_of
from polyopt.poly.model import PolyProgram, PolyStmt, ReadAccess
from polyopt.poly.relayout import Pack, relayout


def plan_layout(pp: PolyProgram, machine: Machine, block: int | None = None) -> tuple[Pack, ...]:
    """The layouts for the CPU pipeline, decided before scheduling: each output of a
    contraction whose last dimension vectorizes badly in channel blocks of ``block``
    (default: the vector lanes; a multiple of them lets a register tile hold several
    vectors of channels), its weights along the same channels and its padded inputs with
    their padding (every such output of a def: both gradients of a convolution); for a
    def with no output blocked, ``own_layout``. Each layout is tried on the program, and
    one that does not apply is left out."""
    return blocked_layout(pp, machine, block) or own_layout(pp, machine)


def blocked_layout(pp: PolyProgram, machine: Machine,
                   block: int | None = None) -> tuple[Pack, ...]:
    """``plan_layout``'s channel blocks of the outputs that want them (none: ())."""
    program = pp.program
    if program.sizes:  # extents unknown: keep the layouts
        return ()
    policy = cpu_policy(machine)
    packs: list[Pack] = []
    while (found := _next_blocking(pp, policy, block, packs)) is not None:
        packs += found
        if not _other_outputs(pp, packs):
            break  # one output (every network layer): no second analysis
        program, _ = relayout(program, list(found))
        pp = model_of(program)  # the blocked output's statements were rewritten
    return tuple(packs)


def own_layout(pp: PolyProgram, machine: Machine) -> tuple[Pack, ...]:
    """The layouts of a def whose outputs keep their own: the padded inputs of its
    convolutions copied with their padding (partial tiles can then run packed), strided
    ones split in phases."""
    program = pp.program
    if program.sizes:
        return ()
    policy = cpu_policy(machine)
    packs: list[Pack] = []
    for s in pp.stmts:
        if s.kind == "update" and s.stmt.op == "+" and s.stmt.reduction_iters and not s.guarded:
            lanes = policy.lanes(DTYPES[program.tensors[s.stmt.tensor].dtype].np.itemsize)
            compact = _panel_copies(program, s, policy, lanes, blocked=False)
            packs += [*compact, *_operand_packs(program, s, "", 1, _strides(program, s, policy),
                                                skip={p.tensor for p in compact})]
    return _applicable(program, packs)


def _other_outputs(pp: PolyProgram, done: list[Pack]) -> bool:
    """Does another output than those ``done`` blocks come out of a contraction?"""
    blocked = {p.tensor for p in done}
    return any(s.kind == "update" and s.stmt.op == "+" and s.stmt.reduction_iters
               and pp.program.tensors[s.stmt.tensor].role == "output"
               and s.stmt.tensor not in blocked for s in pp.stmts)


def _next_blocking(pp: PolyProgram, policy: CpuPolicy, block: int | None,
                   done: list[Pack]) -> tuple[Pack, ...] | None:
    """The layouts of the first output of ``pp`` (its program laid out by ``done``
    already) that wants blocking: the output's, then its operands'; None if none does.
    As before several outputs were blocked, the first contraction whose output cannot
    be blocked ends the search."""
    program = pp.program
    for s in pp.stmts:
        plan = plan_blocking(program, s, policy, block)
        if plan is None or any(p.tensor == plan[0] for p in done):
            continue
        tensor, dim, lanes = plan
        output = _applicable(program, [Pack(tensor, dim, lanes, dim)])
        if not output:
            return None
        laid, _ = relayout(program, list(output))
        compact = _panel_copies(laid, s, policy, lanes, blocked=True)
        return _applicable(program, [*output, *compact, *_operand_packs(
            program, s, s.stmt.lhs[dim], lanes, skip={p.tensor for p in compact})])
    return None


def layout_notes(pp: PolyProgram, machine: Machine) -> tuple[str, ...]:
    """Why each contraction whose channels move a streamed operand got its layout (the
    two layouts' predicted cycles, ``streamed_costs``), for the schedule's notes."""
    if pp.program.sizes:
        return ()
    policy = cpu_policy(machine)
    notes = []
    for s in pp.stmts:
        if s.kind == "update" and s.stmt.op == "+" and not s.guarded:
            costs = streamed_costs(pp.program, s, policy)
            if costs is not None:
                notes.append(costs.describe(s.stmt.tensor))
    return tuple(notes)


def _applicable(program: ir.Program, packs: list[Pack]) -> tuple[Pack, ...]:
    """``packs`` without those that do not apply after the ones before them."""
    done: list[Pack] = []
    for p in packs:
        with contextlib.suppress(ScheduleError):
            program, _ = relayout(program, [p])
            done.append(p)
    return tuple(done)


def plan_blocking(program: ir.Program, s: PolyStmt, policy: CpuPolicy,
                  block: int | None = None) -> tuple[str, int, int] | None:
    """(output, dimension to block, block size) for a contraction that wants it: one whose
    last extent is not ``policy.natural_vectors`` whole vectors (or moves strided), blocked
    along a channel by ``block`` (default: the lanes, or ``wide_block_vectors`` vectors for
    a filter with taps over ``wide_rows`` or more)."""
    t = program.tensors[s.stmt.tensor]
    if (s.kind != "update" or s.stmt.op != "+" or t.role != "output" or t.rank < 3
            or s.guarded or not s.stmt.reduction_iters or t.dtype not in ("float32", "float64")):
        return None
    lanes = policy.lanes(DTYPES[t.dtype].np.itemsize)
    extents = [ir.extent_value(e, {}) for e in t.shape]
    if (extents[-1] % lanes == 0 and extents[-1] >= policy.natural_vectors * lanes
            and _unit_stride(s)):
        return None  # the natural layout vectorizes well
    # A channel: an output index that some operand (the weights) is indexed by directly,
    # and no operand that moves with the output's last index is, unless the model predicts
    # the blocking pays for that operand's blocked copy (a depthwise convolution's input:
    # ``streamed_costs``).
    last = s.stmt.lhs[-1]
    plain = {ix.name for r in s.reads for ix in r.read.indices if isinstance(ix, ir.Var)}
    streamed = {ix.name for r in s.reads if r.read.uses(last) for ix in r.read.indices
                if isinstance(ix, ir.Var)}
    costs = streamed_costs(program, s, policy)
    if costs is not None and costs.blocked < costs.rows:
        streamed -= set(costs.channels)  # the copies pay: these channels may go in lanes
    # Several vectors of channels per block for a filter with taps over wide rows (the
    # register tile then holds several accumulators per output pixel), else one.
    wide = extents[-1] >= policy.wide_rows and _has_taps(s, policy.small_reduction)
    several = policy.wide_block_vectors * lanes
    for size in [block] if block else [several, lanes] if wide else [lanes]:
        fits = [d for d in range(t.rank - 1) if extents[d] % size == 0
                and s.stmt.lhs[d] in plain and s.stmt.lhs[d] not in streamed
                and _lanes_contiguous(s, s.stmt.lhs[d], size)]
        if fits:
            return t.name, max(fits, key=lambda d: extents[d]), size
    return None


@dataclass(frozen=True)
class StreamedCosts:
    """Predicted cycles of a contraction whose channel index also moves an operand that
    moves with the output's last index (a depthwise convolution's input): computed in its
    natural layout (vectors along the output rows) or with channels in lanes."""

    rows: float
    blocked: float
    lanes: int
    channels: tuple[str, ...]  # the output indices that may go in lanes
    whole_vectors: bool  # does an output row hold a whole vector (then a register tile)?

    def describe(self, tensor: str) -> str:
        chosen, other = (("channels in lanes", "rows") if self.blocked < self.rows
                         else ("rows", "channels in lanes"))
        unit = (f"blocks of {self.lanes}" if self.blocked < self.rows
                else f"vectors of {self.lanes} along the rows")
        costs = {"rows": self.rows, "channels in lanes": self.blocked}
        why = ("rows hold whole vectors: a register tile keeps the taps' sums in registers"
               if self.whole_vectors else "rows shorter than a vector: the taps' sums go "
               "through memory, one store-to-load chain per tap")
        return (f"layout of {tensor}: {chosen} ({unit}): {costs[chosen]:.3g} "
                f"cycles predicted against {costs[other]:.3g} for {other}; {why}")


def streamed_costs(program: ir.Program, s: PolyStmt, policy: CpuPolicy) -> StreamedCosts | None:
    """The two layouts' predicted cycles for a contraction with taps whose channel index
    is read plainly by an operand that moves with the output's last index (None for any
    other statement). In lanes-wide vector steps, over the whole output:

    - rows: each output row in ``ceil(W / lanes)`` vectors per tap. With a whole vector in
      the row, a register tile keeps the sums in registers and the taps issue at
      ``fma_units`` per cycle; in a shorter row the sum of each tap is stored and loaded
      back by the next (``fma_latency + store_forward_cycles`` per tap and row);
    - channels in lanes: every output pixel is one full vector per tap at ``fma_units`` per
      cycle, plus the blocked copies: the streamed operand in (with its padding) and the
      output back, each vector one load per lane at ``copy_loads_per_cycle`` (a row
      narrower than a transpose block is copied in by a gather; the copy out, an
      in-register transpose, costs less: the model takes the gather's cost for both).
    """
    t = program.tensors[s.stmt.tensor]
    taps = _taps(s, policy.small_reduction)
    if taps is None or t.rank < 2:
        return None
    last = s.stmt.lhs[-1]
    moving = [r.read for r in s.reads if r.read.uses(last)]
    # A channel: an output index read plainly both by an operand that moves with the rows
    # and by one that does not (the weights): a depthwise convolution's c, not a batch n.
    channels = _plain(moving) & _plain([r.read for r in s.reads if not r.read.uses(last)])
    channels &= set(s.stmt.lhs[:-1])
    if not channels:
        return None
    m = policy.machine
    lanes = policy.lanes(DTYPES[t.dtype].np.itemsize)
    extents = [ir.extent_value(e, {}) for e in t.shape]
    outputs, width = math.prod(extents), extents[-1]
    whole = width >= lanes
    per_tap = 1 / m.fma_units if whole else m.fma_latency + m.store_forward_cycles
    rows = outputs // width * -(-width // lanes) * taps * per_tap
    copied = sum(_padded_elements(program, rd) for rd in {rd.tensor: rd for rd in moving}.values())
    per_copy = lanes / m.copy_loads_per_cycle
    blocked = (outputs * taps / m.fma_units + (copied + outputs) * per_copy) / lanes
    return StreamedCosts(rows, blocked, lanes, tuple(sorted(channels)), whole)


def _plain(reads: list[ir.Read]) -> set[str]:
    """The index variables ``reads`` index some dimension by directly."""
    return {ix.name for rd in reads for ix in rd.indices if isinstance(ix, ir.Var)}


def _taps(s: PolyStmt, small: int) -> int | None:
    """The product of the statement's reduction extents when every one is at most
    ``small`` (filter taps only, no long channel reduction); else None."""
    extents = [s.extent(it) for it in s.stmt.reduction_iters]
    if not extents or any(e is None or not 1 <= e <= small for e in extents):
        return None
    return math.prod(e for e in extents if e is not None)


def _padded_elements(program: ir.Program, read: ir.Read) -> int:
    """Elements of ``read``'s tensor with its zero padding (what its copy holds)."""
    shape = program.tensors[read.tensor].shape
    pads = read.pad or tuple(ir.Pad() for _ in shape)
    return math.prod(ir.extent_value(f"({e}) + ({p.before}) + ({p.after})", {})
                     for e, p in zip(shape, pads, strict=True))


def _lanes_contiguous(s: PolyStmt, it: str, size: int) -> bool:
    """Can a vector of ``size`` lanes along ``it`` (a block ``it = size * b + v``) load
    each operand whole: does every read index ``it`` plainly (the blocked copy is then
    contiguous along it) or read one element for the whole block (a broadcast)? A grouped
    convolution's input ``I((f / FG) * CG + c, ..)`` with fewer than ``size`` channels per
    group moves with ``f`` in steps within a block: each lane would load from its own
    channel (a gather)."""
    pos = s.iters.index(it)
    for r in s.reads:
        if not r.affine or not r.read.uses(it):
            continue
        if any(isinstance(ix, ir.Var) and ix.name == it for ix in r.read.indices):
            continue
        if not _block_invariant(r.relation, pos, size):
            return False
    return True


def _block_invariant(rel: isl.Map, pos: int, size: int) -> bool:
    """Does ``rel`` map every two points that differ only in dimension ``pos``, within one
    block of ``size`` along it, to the same element?"""
    dom = rel.domain()
    n, name = dom.dim(isl.dim_type.set), dom.get_tuple_name()
    xs, ys = [f"i{k}" for k in range(n)], [f"j{k}" for k in range(n)]
    same = [f"{y} = {x}" for k, (x, y) in enumerate(zip(xs, ys, strict=True)) if k != pos]
    same.append(f"floor({xs[pos]} / {size}) = floor({ys[pos]} / {size})")
    pairs = isl.Map(f"{{ {name}[{', '.join(xs)}] -> {name}[{', '.join(ys)}] : "
                    f"{' and '.join(same)} }}").align_params(rel.get_space())
    pairs = pairs.intersect_domain(dom).intersect_range(dom)
    return pairs.is_subset(rel.apply_range(rel.reverse()))


def _has_taps(s: PolyStmt, small: int) -> bool:
    """Does the contraction have a reduction of at most ``small`` besides its longest
    (filter taps)?"""
    extents = sorted(s.extent(it) or 0 for it in s.stmt.reduction_iters)
    return len(extents) > 1 and 1 < extents[0] <= small


def _unit_stride(s: PolyStmt) -> bool:
    """Does every operand that moves with the output's last index move by one element
    (not a strided convolution's two)?"""
    return all(_stride(s, r) in (0, 1) for r in s.reads
               if r.affine and r.relation.dim(isl.dim_type.out))


def _stride(s: PolyStmt, r: ReadAccess) -> int | None:
    """How far read ``r``'s last index moves per step of the output's last index (None:
    not affine)."""
    return index_use(r.read.indices, s.stmt.lhs[-1]).coefficient


def _strides(program: ir.Program, s: PolyStmt, policy: CpuPolicy) -> dict[str, int]:
    """The inputs whose last index moves by more than one element per step of the output's
    last index (the vector loop of an unblocked convolution), with that stride; none when
    that loop fills too few of its vectors' lanes (``policy.phase_min_lane_fill``)."""
    t = program.tensors[s.stmt.tensor]
    if not s.stmt.lhs or not t.shape:
        return {}  # a scalar output: no vector loop along an output index
    extent = ir.extent_value(t.shape[-1], {})
    if policy.lane_fill(extent, DTYPES[t.dtype].np.itemsize) < policy.phase_min_lane_fill:
        return {}
    out = {}
    for r in s.reads:
        if r.affine and r.relation.dim(isl.dim_type.out):
            step = _stride(s, r)
            if step is not None and step > 1:
                out[r.read.tensor] = step
    return out


def _operand_packs(program: ir.Program, s: PolyStmt, it: str, lanes: int,
                   strides: dict[str, int] | None = None,
                   skip: set[str] | None = None) -> list[Pack]:
    """Weights along the blocked index ``it``; padded inputs with their padding, split in
    phases along their last dimension when read at a stride there (``strides``: a stride-2
    convolution's vectors then load whole, ``relayout.phase_program``); none of ``skip``
    (inputs copied already)."""
    out = []
    strides = strides or {}
    for read in {r.read.tensor: r.read for r in s.reads}.values():
        if program.tensors[read.tensor].role != "input" or read.tensor in (skip or ()):
            continue
        plain = [d for d, ix in enumerate(read.indices)
                 if isinstance(ix, ir.Var) and ix.name == it]
        last = len(read.indices) - 1
        if plain:
            out.append(Pack(read.tensor, plain[0], lanes))
        elif read.tensor in strides:
            out.append(Pack(read.tensor, last, strides[read.tensor], last, phase=True))
        elif read.pad is not None and not all(p.is_zero for p in read.pad):
            dim = next((d for d, p in enumerate(read.pad) if p.is_zero), None)
            if dim is not None:
                out.append(Pack(read.tensor, dim, 1, dim))
    return out


def _panel_copies(program: ir.Program, s: PolyStmt, policy: CpuPolicy, lanes: int,
                  blocked: bool) -> list[Pack]:
    """Copies of the inputs of a 1x1 contraction ``s`` (no taps) that its register tiles
    broadcast, in the order they read them (``poly/subsample.py``): the dimension after the
    reduction's indexed by another output index than the last (the rows ``h`` of
    ``I(n, c, h, w)``) moves before it, so one step of the reduction reads the rows next to
    the previous step's, not a plane away (GotoBLAS packs its A panel for the same reason);
    a read at a stride along the output's last index in one phase (a strided convolution's
    ``I(n, c, 2*h, 2*w)``) keeps only that phase. Only where the copy pays as a panel does:
    a reduction of at least ``policy.pack_min_reduction``, each element read by at least
    ``policy.pack_min_sweeps`` vector tiles (the output elements that do not move the
    input, in ``lanes``-wide blocks), and for an unstrided input that stays in L2, a copy
    cheap beside the contraction (``_copy_pays``). Unless the output is ``blocked`` in channels (its
    tiles then broadcast the input), only strided reads are copied. ``program`` has
    ``s``'s output laid out already."""
    reds = [it for it in s.stmt.reduction_iters if s.extent(it) is not None]
    if not reds or not s.stmt.lhs:
        return []
    red = max(reds, key=lambda it: s.extent(it) or 0)
    if any(s.extent(it) != 1 for it in s.stmt.reduction_iters if it != red):
        return []  # filter taps: the copy would not be the input's own elements once
    out: list[Pack] = []
    for r in s.reads:
        step = _stride(s, r) if r.affine and r.relation.dim(isl.dim_type.out) else None
        t = program.tensors.get(r.read.tensor)
        if step is None or t is None or t.role != "input" or (step < 2 and not blocked):
            continue
        reuse = math.prod(s.extent(it) or 1 for it in s.stmt.lhs if not r.read.uses(it))
        if (s.extent(red) or 0) < policy.pack_min_reduction or reuse < (
                policy.pack_min_sweeps * lanes) or not _copy_pays(s, t, step, lanes, policy):
            continue
        dims = [d for d, ix in enumerate(r.read.indices) if ir.index_names(ix) == {red}]
        rows = [d for d, ix in enumerate(r.read.indices) if dims and d > dims[0]
                and ir.index_names(ix) & set(s.stmt.lhs[:-1])]
        dim, outer = (rows[0], dims[0]) if rows else (0, 0)
        if step >= 2 or dim != outer:
            out += _applicable(program, [Pack(r.read.tensor, dim, max(step, 1), outer,
                                              subsample=True)])
    return out


def _copy_pays(s: PolyStmt, t: ir.Tensor, step: int, lanes: int, policy: CpuPolicy) -> bool:
    """Does the panel copy of input ``t`` of ``s`` pay for itself? Always for a strided
    read (the copy holds a fraction of the input, and its rows come from memory otherwise)
    or an input outgrowing half of L2; else only when the copy's predicted cycles are at
    most ``policy.panel_l2_max_share`` of the contraction's (its rows are L2 hits)."""
    m = policy.machine
    size = math.prod(ir.extent_value(e, {}) for e in t.shape) * DTYPES[t.dtype].np.itemsize
    if step >= 2 or size > m.l2_bytes // 2:
        return True
    macs = math.prod(s.extent(it) or 1 for it in (*s.stmt.lhs, *s.stmt.reduction_iters))
    compute = macs / (lanes * m.fma_units * m.cores)
    copy = m.fork_join_cycles + 2 * size / (m.l2_bytes_per_cycle * m.cores)
    return copy <= policy.panel_l2_max_share * compute
