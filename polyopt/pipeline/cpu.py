"""The automatic CPU pipeline: from isl's schedule to a tiled, parallel, vectorized one.

Every decision is a recorded verb on the Schedule, so ``Kernel.schedule.as_python()`` shows
what was done, and each verb's legality check covers it. The steps:

1. (before it, the driver lays out convolution outputs that vectorize badly in channel
   blocks, ``blocked.plan_layout``, so the schedule starts with those ``pack`` steps);
2. init statements (``C_0_init``) of contractions get their own nest (``distribute``), and
   other nests over the same range fuse at their outer parallel loop;
3. a nest of one ``+=`` statement whose output's last index has a loop becomes a GotoBLAS
   nest (Low et al., TOMS 2016; Bondhugula, arXiv 2003.00532): the column loop (the
   output's stride-1 index) split by NR and vectorized, a row loop (the output index whose
   operands are broadcasts and reused) split by MR and unrolled and jammed, the largest
   reduction split by KC with the short ones (filter taps) inside, ordered
   ``others, k_o, j_o, i_o, k_i, taps, i_r, j_v`` with full tiles separated and the
   operands packed into panels; the printer turns the inner loops into a register-tile
   micro-kernel. NR and KC come from the machine model (``polyopt.costmodel.machine``),
   MR from the cost model's prediction of the candidates (``register_tile.py``);
4. a stencil band whose loops all carry dependences (a time-iterated recurrence; on isl's
   ``min`` fusion schedule, which replaces a ``smart`` one that fused border copies into
   the band, ``timetile.stencil_base``) is time-tiled: parallelogram tiles of isl's
   skewed band, run as a wavefront of parallel tiles (``timetile.py``); otherwise
4'. other nests vectorize their innermost loop when it carries no dependence (or only an
   unordered reduction), after moving loops of one iteration outermost; a nest with a
   transposed access is tiled first (the printer transposes such copies in registers);
5. the contraction's nest fuses with its neighbours along the dependence-free outer loops
   they share (a blocked output's zeroing and copy back, ``fusion.py``);
6. the outermost dependence-free loop with enough iterations runs in parallel (OpenMP), or
   a reduction into one element splits across the threads (``parallel.py``);
7. locals that live within one iteration of their nest's outer loop are contracted.

Every threshold (packing, parallel work, tap rows, channel blocks...) is a field of the
machine's :class:`~polyopt.pipeline.policy.CpuPolicy`, which says where it comes from.
"""

from __future__ import annotations

import contextlib

from polyopt import ir
from polyopt.costmodel.cost import scalar_reason, vector_width
from polyopt.costmodel.machine import Machine, host
from polyopt.costmodel.strides import iterator_bytes
from polyopt.costmodel.verdict import compare
from polyopt.dtypes import DTYPES
from polyopt.errors import ScheduleError
from polyopt.pipeline.fusion import fuse_inner, fuse_outer, fuse_tiled, is_contraction, nests
from polyopt.pipeline.knobs import DEFAULT_KNOBS, Knobs
from polyopt.pipeline.order import (
    choose_distribution,
    choose_order,
    nests_estimate,
    schedule_estimate,
)
from polyopt.pipeline.parallel import parallelize
from polyopt.pipeline.policy import CpuPolicy, cpu_policy
from polyopt.pipeline.register_tile import register_tile
from polyopt.pipeline.timetile import stencil_base, time_tile
from polyopt.poly.model import PolyStmt
from polyopt.poly.relayout import Pack
from polyopt.schedules import transform as tf
from polyopt.schedules.nest import chain_of, trip
from polyopt.schedules.schedule import Schedule
from polyopt.schedules.tree import Leaf, Loop, Sequence, loops, raw_iterator, stmts_of


def optimize(schedule: Schedule, *, openmp: bool = True,
             machine: Machine | None = None, knobs: Knobs = DEFAULT_KNOBS) -> Schedule:
    """The default CPU schedule for ``schedule``'s def (``knobs`` fix some decisions), after
    its layout (``blocked.plan_layout``)."""
    policy = cpu_policy(machine or host())
    schedule = split_inits(stencil_base(schedule, knobs))
    if schedule.fusion != "min":
        schedule = fuse_outer(schedule)
    for name in [n.name for n in nests(schedule.root)]:
        schedule, tiled = time_tile(schedule, name, policy, knobs, openmp=openmp)
        if not tiled:
            schedule = tile_nest(schedule, name, policy, knobs)
    schedule = fuse_tiled(schedule)
    if schedule.fusion != "min":
        schedule = fuse_inner(schedule)
    if openmp:
        schedule = parallelize(schedule, policy, knobs)
    return contract_locals(schedule)


def faster_layout(blocked: Schedule, own: Schedule, machine: Machine | None = None
                  ) -> Schedule:
    """Of a def's schedule with outputs in channel blocks and the one in its own layout,
    the one the cost model predicts faster (every nest, its copies included, at its
    parallel loop; ``verdict.compare``: from cache when both fit the last level), both
    predictions noted; a tie keeps the def's own layout, which copies nothing. Where the
    model does not apply (an extent unknown), the channel blocks stand."""
    policy = cpu_policy(machine or host())
    a, b = schedule_estimate(blocked, policy), schedule_estimate(own, policy)
    blocks = ", ".join(f"{p.tensor} in blocks of {p.factor} along dim {p.dim}"
                       for p in blocked.layout if isinstance(p, Pack)
                       and p.tensor in blocked.poly.program.tensors
                       and blocked.poly.program.tensors[p.tensor].role == "output")
    if a is None or b is None:
        return blocked.note(f"layout: {blocks}: the cost model does not apply (an extent is "
                            "not known)")
    v = compare(b, a)
    if v.first_no_slower:
        return own.note(f"layout: the def's own, predicted {v.first}; {blocks}: {v.second}")
    return blocked.note(f"layout: {blocks}: predicted {v.second}; the def's own: {v.first}")


def faster_merge(merged: Schedule, plain: Schedule, machine: Machine | None = None
                 ) -> Schedule:
    """Of a def's schedule with loops merged (``Schedule.merge``) and the one without, the
    one the cost model predicts faster (``verdict.compare``), both predictions noted; a
    tie, or no prediction, keeps the loops as written."""
    policy = cpu_policy(machine or host())
    a, b = schedule_estimate(merged, policy), schedule_estimate(plain, policy)
    what = ", ".join(f"{st.args[0]} dims {st.args[1]}-{st.args[1] + 1}"
                     for st in merged.steps if st.verb == "merge")
    if a is None or b is None:
        return plain.note(f"merge: not {what}: the cost model does not apply")
    v = compare(b, a)
    if v.first_no_slower:
        return plain.note(f"merge: not {what}: predicted {v.first}; merged: {v.second}")
    return merged.note(f"merge: {what} as one: predicted {v.second}; as written: {v.first}")


def contract_locals(schedule: Schedule) -> Schedule:
    """Keep each local that lives within one iteration of its nest's outer loop as a slice
    (a row of softmax's ``E``) instead of a whole tensor in memory."""
    trips: dict[int, tuple[Loop, int | None]] = {}  # one count per nest, not per local
    for t in schedule.poly.program.locals:
        for top in nests(schedule.root):
            if id(top) not in trips:
                trips[id(top)] = (top, tf.trip_count(top, schedule.poly.domain))
            if trips[id(top)][1] == 1:
                continue  # a slice per iteration of one is the whole tensor
            with contextlib.suppress(ScheduleError):
                schedule = schedule.contract(t.name, top.name)
                break
    return schedule


def split_inits(schedule: Schedule) -> Schedule:
    """Distribute each nest holding a contraction (a ``+=`` with a reduction and an output
    of two or more dimensions) together with other statements, so the contraction can
    become a GotoBLAS nest of its own."""
    for top in nests(schedule.root):
        stmts = [schedule.poly.stmt(s) for s in tf.stmts_of(top)]
        if len(stmts) > 1 and any(is_contraction(s) for s in stmts):
            with contextlib.suppress(ScheduleError):  # illegal: keep the nest whole
                schedule = schedule.distribute(top.name)
    return schedule


def tile_nest(schedule: Schedule, top: str, policy: CpuPolicy,
              knobs: Knobs = DEFAULT_KNOBS) -> Schedule:
    """Register-tile the nest at loop ``top`` when it is a contraction the cost model
    predicts faster so (``_faster``); else take the cost model's loop order, tile a
    transposed access by cache lines and vectorize the innermost loops (in every sub-nest of
    a fused nest: the one body of fused statements like one statement's)."""
    chain = chain_of(tf.find(schedule.root, top))
    below = chain[-1].child
    if isinstance(below, Leaf) and len(below.stmts) == 1 and knobs.register_tiled is not False:
        s = schedule.poly.stmt(below.stmts[0])
        try:
            tiled = register_tile(schedule, chain, s, policy, knobs)
        except ScheduleError:  # an illegal tiling: keep the nest as it was
            tiled = None
        if tiled is not None:
            tiled = _tile_packs(schedule, tiled, policy, knobs)
            return tiled if knobs.register_tiled else _faster(schedule, tiled, top, policy,
                                                              knobs)
    return _plain_nest(schedule, top, policy, knobs)


def _tile_packs(schedule: Schedule, tiled: Schedule, policy: CpuPolicy,
                knobs: Knobs) -> Schedule:
    """``tiled`` with the nests of the panel copies the register tile added (``pack``) each
    scheduled as a plain nest: a copy that transposes (``B(n, k)`` into ``B_pack(n/NR, k,
    n%NR)``) is then tiled by cache lines and transposed in registers, instead of gathering
    each vector from NR rows. A linear layer's 512 x 512 weight, packed for a 64-row
    product: its copy 0.13 ms gathered (the whole product 0.27 ms, MKL 0.20; the product
    alone on a panel packed ahead 0.15), 0.03 ms as a def of its own, tiled."""
    new = {s.name for s in tiled.poly.stmts} - {s.name for s in schedule.poly.stmts}
    for name in [n.name for n in nests(tiled.root) if set(stmts_of(n)) <= new]:
        tiled = _plain_nest(tiled, name, policy, knobs)
    return tiled


def _faster(schedule: Schedule, tiled: Schedule, top: str, policy: CpuPolicy,
            knobs: Knobs) -> Schedule:
    """The register-tiled nest ``tiled`` or the plain one (``_plain_nest``), whichever the
    cost model predicts faster (packing included; ``verdict.compare``), with both
    predictions noted. The tile
    must be predicted faster: on a tie the plain nest, the simpler code, stands (a sum over
    the outer axis, 16x256x512 from cache: both 3.3e5 cycles predicted, the register tile
    measured 0.108 ms, the plain nest 0.064)."""
    plain = _plain_nest(schedule, top, policy, knobs)
    mine = set(tf.stmts_of(tf.find(schedule.root, top)))
    packs = {s.name for s in tiled.poly.stmts} - {s.name for s in schedule.poly.stmts}
    a = nests_estimate(tiled, mine | packs, policy)
    b = nests_estimate(plain, mine, policy)
    if a is None or b is None:
        return tiled.note(f"{top}: register tile: the cost model does not apply (an extent "
                          "is not known)")
    v = compare(b, a)
    if v.first_no_slower:
        return plain.note(f"{top}: no register tile: the plain nest is predicted {v.first}, "
                          f"the register tile {v.second}")
    return tiled.note(f"{top}: register tile: predicted {v.second}, the plain nest {v.first}")


def _plain_nest(schedule: Schedule, top: str, policy: CpuPolicy, knobs: Knobs) -> Schedule:
    """The nest at ``top`` in the cost model's loop order, a transposed access tiled by
    cache lines, its innermost loops vectorized (a fused nest's each)."""
    chain = chain_of(tf.find(schedule.root, top))
    if isinstance(chain[-1].child, Sequence):
        fused = _tile_fused(schedule, chain[0], policy, knobs)
        if fused is not None:
            return fused
    schedule, plan = choose_order(schedule, chain, policy, knobs.order)
    if plan is not None:
        chain = chain_of(tf.find(schedule.root, plan.order[0]))
        if plan.strip:  # the strip's inner loop is innermost: vectorize it, no cache tile
            return _vectorize(schedule, plan.order[-1], policy, knobs.lanes)
    if knobs.vector is not None:
        schedule, chain = _vector_knob(schedule, chain, knobs.vector)
    schedule, chain = _hoist_unit_loops(schedule, chain)
    schedule, inner = _cache_tile(schedule, chain, policy, knobs)
    return _vectorize(schedule, inner, policy, knobs.lanes)


def _tile_fused(schedule: Schedule, top: Loop, policy: CpuPolicy,
                knobs: Knobs) -> Schedule | None:
    """A chain over a sequence: distributed when the cost model predicts its nests in
    their best orders faster (``order.choose_distribution``), then each nest below tiled
    on its own; None when it stays one body of statements (``tile_nest`` goes on)."""
    got = choose_distribution(schedule, top, policy)
    if got is not None:
        split, names = got
        for name in names:
            split = tile_nest(split, name, policy, knobs)
        return split
    below = chain_of(tf.find(schedule.root, top.name))[-1].child
    if not loops(below):
        return None
    assert isinstance(below, Sequence)
    for name in [c.name for c in below.children if isinstance(c, Loop)]:
        schedule = tile_nest(schedule, name, policy, knobs)
    return schedule


def _vector_knob(schedule: Schedule, chain: list[Loop], want: str) -> tuple[Schedule, list[Loop]]:
    """The ``vector`` knob: the chain's loop named ``want`` (or over iterator ``want``)
    moved innermost, when that order is legal and the loop vectorizes there; else the chain
    as it is, with a note (the model's vector loop stands)."""
    stmts = tf.stmts_of(chain[-1])
    hit = [lp for lp in chain if lp.name == want or any(
        raw_iterator(lp.expr, s) == want for s in stmts)]
    if not hit or loops(chain[-1].child):
        return schedule.note(f"{chain[0].name}: vector knob {want}: no such loop in a "
                             "perfect nest here; the model's vector loop"), chain
    lp = hit[0]
    order = [x.name for x in chain if x is not lp] + [lp.name]
    try:
        moved = schedule.reorder(*order) if lp is not chain[-1] else schedule
        moved.vectorize(lp.name)  # a check only: the pipeline vectorizes after tiling
    except ScheduleError as e:
        return schedule.note(f"{chain[0].name}: vector knob {want}: "
                             f"{str(e).splitlines()[0]}; the model's vector loop"), chain
    out = moved.note(f"{chain[0].name}: vector knob: {lp.name} innermost")
    return out, chain_of(tf.find(out.root, order[0]))


def _hoist_unit_loops(schedule: Schedule, chain: list[Loop]) -> tuple[Schedule, list[Loop]]:
    """Move loops of one iteration (a packed copy's block of one) outermost, so the
    innermost loop that vectorizes is one with work to do."""
    trips = [tf.trip_count(lp, schedule.poly.domain) for lp in chain]
    units = [lp.name for lp, n in zip(chain, trips, strict=True) if n == 1]
    order = units + [lp.name for lp, n in zip(chain, trips, strict=True) if n != 1]
    if order == [lp.name for lp in chain] or len(units) == len(chain):
        return schedule, chain
    try:
        schedule = schedule.reorder(*order)
    except ScheduleError:
        return schedule, chain
    return schedule, chain_of(tf.find(schedule.root, order[0]))


def _cache_tile(schedule: Schedule, chain: list[Loop], policy: CpuPolicy,
                knobs: Knobs = DEFAULT_KNOBS) -> tuple[Schedule, str]:
    """Tile a nest's innermost two loops when a tensor's stride-1 index moves with the outer
    one only (a transposed access): each cache line it brings in then serves a whole tile
    row instead of one iteration. The tiles are one cache line square
    (``CpuPolicy.cache_tile``): the transposed operand then keeps one line (and one TLB
    entry) per tile row. Returns the schedule and the innermost loop."""
    below = chain[-1].child
    if len(chain) < 2 or loops(below):
        return schedule, chain[-1].name
    inner = chain[-1]
    stmts = [schedule.poly.stmt(n) for n in tf.stmts_of(inner)]
    program = schedule.poly.program
    movers = [lp for lp in chain[:-1] if any(_transposed(program, s, lp, inner) for s in stmts)]
    if not movers:
        return schedule, inner.name
    tensors = {r.read.tensor for s in stmts for r in s.reads} | {s.stmt.tensor for s in stmts}
    elem = max(DTYPES[program.tensors[t].dtype].np.itemsize for t in tensors)
    size = policy.cache_tile(elem) if knobs.cache_tile is None else knobs.cache_tile
    outer, least = movers[-1], policy.cache_tile_min_tiles * size
    if size < 2 or trip(outer, schedule.poly.domain) < least:
        return schedule, inner.name
    why = f"{outer.name}: a transposed access's stride-1 index moves with it"
    try:
        if outer is chain[-2] and trip(inner, schedule.poly.domain) >= least:
            tiled = schedule.tile((outer.name, inner.name), size)
            return tiled.note(f"{why}: tiled {size} x {size} with {inner.name}"), \
                tf.split_names(inner.name)[1]
        block = _block_of(stmts, outer) or size
        cut = _strip_transpose(schedule, chain, outer.name, block)
        if not _pages_apart(schedule, stmts, outer, inner, policy):
            return cut.note(f"{why}: strips of {block} above {inner.name}"), inner.name
        parts = tf.split_names(inner.name)
        cut = cut.split(inner.name, size, parts)
        cut = cut.reorder(parts[0], tf.split_names(outer.name)[1], parts[1])
        return cut.note(f"{why}: strips of {block} above {inner.name}, itself in strips of "
                        f"{size}: its rows are pages apart, more than the first TLB level "
                        "holds"), parts[1]
    except ScheduleError:
        return schedule, inner.name


def _pages_apart(schedule: Schedule, stmts: list[PolyStmt], outer: Loop, inner: Loop,
                 policy: CpuPolicy) -> bool:
    """Does ``inner`` move an access that ``outer`` walks along its stride-1 index (a
    transposed access) a page or more per step, over more pages than the first TLB level
    holds (``Machine.l1_tlb_entries``)? A strip of ``outer`` then keeps a translation
    per ``inner`` step (permute_210, 128 x 256 x 256 in order ``c, b, a``: 128 pages a
    strip row, each load a first-level miss)."""
    if trip(inner, schedule.poly.domain) <= policy.machine.l1_tlb_entries:
        return False
    for s in stmts:
        a, b = raw_iterator(outer.expr, s.name), raw_iterator(inner.expr, s.name)
        if a is None or b is None:
            continue
        for r in s.reads:
            tensor = schedule.poly.program.tensors[r.read.tensor]
            if not _walks_across(tensor, r.read.indices, a, b):
                continue
            gap = iterator_bytes(schedule.poly, r.read.tensor, r.read.indices, b)
            if gap is not None and gap >= policy.machine.page_bytes:
                return True
    return False


def _block_of(stmts: list[PolyStmt], lp: Loop) -> int | None:
    """The block size of a blocked layout read along ``lp`` (``O_pack(.., f % 32)``): strips
    of whole blocks let the copy back fuse with the nest that computes the blocks."""
    for s in stmts:
        it = raw_iterator(lp.expr, s.name)
        for r in s.reads:
            last = r.read.indices[-1] if r.read.indices else None
            if (isinstance(last, ir.Binary) and last.op == "%" and isinstance(last.b, ir.Const)
                    and isinstance(last.a, ir.Var) and last.a.name == it):
                return int(last.b.value)
    return None


def _strip_transpose(schedule: Schedule, chain: list[Loop], outer: str, size: int) -> Schedule:
    """Split ``outer`` (the loop a transposed access's stride-1 index moves with, not next
    to the innermost: a blocked output's copy back, ``O(f, h, w) = O_pack(f/32, h, w,
    f%32)``) by ``size`` and sink its inner part just above the innermost loop: the lines it
    reads then serve ``size`` rows while they are in L1 (layer 3 of ResNet-50's copy back
    went through all 400 KB of a block once per channel)."""
    parts = tf.split_names(outer)
    out = schedule.split(outer, size, parts)
    order = [parts[0] if lp.name == outer else lp.name for lp in chain[:-1]]
    return out.reorder(*order, parts[1], chain[-1].name)


def _transposed(program: ir.Program, s: PolyStmt, outer: Loop, inner: Loop) -> bool:
    """Does an access of ``s`` walk its stride-1 dimension (its last one of extent above
    one) with ``outer`` but not ``inner``, while ``inner`` moves it along another dimension?
    An access that ``inner`` does not move at all (a row sum's output) stays in a register
    across the inner loop: tiling would only cut the contiguous run of the others."""
    a, b = raw_iterator(outer.expr, s.name), raw_iterator(inner.expr, s.name)
    if a is None or b is None:
        return False
    accesses = [(r.read.tensor, r.read.indices) for r in s.reads]
    accesses.append((s.stmt.tensor, tuple(ir.Var("int32", i, "index") for i in s.stmt.lhs)))
    return any(_walks_across(program.tensors[tensor], indices, a, b)
               and any(b in ir.index_names(ix) for ix in indices)
               for tensor, indices in accesses)


def _walks_across(tensor: ir.Tensor, indices: tuple[ir.Expr, ...], outer_it: str,
                  inner_it: str) -> bool:
    """Does an access of ``tensor`` at ``indices`` walk its stride-1 dimension (its last one
    of extent above one) with ``outer_it`` and not with ``inner_it``?"""
    last = len(indices) - 1 - ir.unit_tail(tensor)
    moves = ir.index_names(indices[last]) if last >= 0 else set()
    return outer_it in moves and inner_it not in moves


def _vectorize(schedule: Schedule, name: str, policy: CpuPolicy,
               knob: int | None = None) -> Schedule:
    loop = tf.find(schedule.root, name)
    if loops(loop.child):  # not innermost
        return schedule
    scalar = scalar_reason(schedule.poly, loop)
    if scalar:
        return schedule.note(f"{name}: not vectorized: {scalar}")
    lanes, why = (knob, f"{knob} lanes (the lanes knob)") if knob else vector_width(
        schedule.poly, schedule.root, loop, policy.machine)
    try:
        out = schedule.vectorize(name, lanes=lanes)
    except ScheduleError as e:
        return schedule.note(f"{name}: not vectorized: {str(e).splitlines()[0]}")
    return out.note(f"{name}: vector loop: the innermost, it carries no dependence (or an "
                    f"unordered reduction only); {why}")

