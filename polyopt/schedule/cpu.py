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
   micro-kernel. MR, NR and KC come from the machine model (``polyopt.schedule.machine``);
4. other nests vectorize their innermost loop when it carries no dependence (or only an
   unordered reduction), after moving loops of one iteration outermost; a nest with a
   transposed access is tiled first (the printer transposes such copies in registers);
5. the contraction's nest fuses with its neighbours along the dependence-free outer loops
   they share (a blocked output's zeroing and copy back, ``fusion.py``);
6. the outermost dependence-free loop with enough iterations runs in parallel (OpenMP);
7. locals that live within one iteration of their nest's outer loop are contracted.

Every threshold (packing, parallel work, tap rows, channel blocks...) is a field of the
machine's :class:`~polyopt.schedule.policy.CpuPolicy`, which says where it comes from.
"""

from __future__ import annotations

import contextlib
import functools
import math
from dataclasses import dataclass

from polyopt import ir
from polyopt.dtypes import DTYPES
from polyopt.errors import ScheduleError
from polyopt.poly.model import PolyStmt
from polyopt.schedule import transform as tf
from polyopt.schedule.fusion import fuse_outer, fuse_tiled, is_contraction, loop_free, nests
from polyopt.schedule.knobs import DEFAULT_KNOBS, Knobs
from polyopt.schedule.machine import Blocking, Machine, host
from polyopt.schedule.marks import Tag
from polyopt.schedule.nest import UNKNOWN_TRIP, chain_of, invariant_reads, vector_rows
from polyopt.schedule.order import choose_distribution, choose_order
from polyopt.schedule.policy import CpuPolicy, cpu_policy
from polyopt.schedule.schedule import Schedule
from polyopt.schedule.tree import Leaf, Loop, Sequence, raw_iterator


def optimize(schedule: Schedule, *, openmp: bool = True,
             machine: Machine | None = None, knobs: Knobs = DEFAULT_KNOBS) -> Schedule:
    """The default CPU schedule for ``schedule``'s def (``knobs`` fix some decisions), after
    its layout (``blocked.plan_layout``)."""
    policy = cpu_policy(machine or host())
    schedule = split_inits(schedule)
    if schedule.fusion != "min":
        schedule = fuse_outer(schedule)
    for name in [n.name for n in nests(schedule.root)]:
        schedule = tile_nest(schedule, name, policy, knobs)
    schedule = fuse_tiled(schedule)
    if openmp:
        schedule = parallelize(schedule, policy)
    return contract_locals(schedule)


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
    """Register-tile the nest at loop ``top`` when it is a contraction; else vectorize its
    innermost loops (in every sub-nest of a fused nest)."""
    chain = chain_of(tf.find(schedule.root, top))
    below = chain[-1].child
    if isinstance(below, Leaf) and len(below.stmts) == 1:
        s = schedule.poly.stmt(below.stmts[0])
        try:
            tiled = _register_tile(schedule, chain, s, policy, knobs)
        except ScheduleError:  # an illegal tiling: keep the nest as it was
            tiled = None
        if tiled is not None:
            return tiled
    if isinstance(below, Sequence):
        return _tile_fused(schedule, chain[0], policy, knobs)
    schedule, plan = choose_order(schedule, chain, policy)
    if plan is not None:
        chain = chain_of(tf.find(schedule.root, plan.order[0]))
        if plan.strip:  # the strip's inner loop is innermost: vectorize it, no cache tile
            return _vectorize(schedule, plan.order[-1])
    schedule, chain = _hoist_unit_loops(schedule, chain)
    schedule, inner = _cache_tile(schedule, chain, policy, knobs)
    return _vectorize(schedule, inner)


def _tile_fused(schedule: Schedule, top: Loop, policy: CpuPolicy, knobs: Knobs) -> Schedule:
    """A chain over a sequence of nests: distributed when the cost model predicts its
    nests in their best orders faster (``order.choose_distribution``), then each nest
    below tiled on its own."""
    got = choose_distribution(schedule, top, policy)
    if got is not None:
        split, names = got
        for name in names:
            split = tile_nest(split, name, policy, knobs)
        return split
    below = chain_of(tf.find(schedule.root, top.name))[-1].child
    assert isinstance(below, Sequence)
    for name in [c.name for c in below.children if isinstance(c, Loop)]:
        schedule = tile_nest(schedule, name, policy, knobs)
    return schedule


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
    if len(chain) < 2 or not isinstance(below, Leaf):
        return schedule, chain[-1].name
    inner = chain[-1]
    stmts = [schedule.poly.stmt(n) for n in below.stmts]
    program = schedule.poly.program
    movers = [lp for lp in chain[:-1] if any(_transposed(program, s, lp, inner) for s in stmts)]
    if not movers:
        return schedule, inner.name
    tensors = {r.read.tensor for s in stmts for r in s.reads} | {s.stmt.tensor for s in stmts}
    elem = max(DTYPES[program.tensors[t].dtype].np.itemsize for t in tensors)
    size = policy.cache_tile(elem) if knobs.cache_tile is None else knobs.cache_tile
    outer, least = movers[-1], policy.cache_tile_min_tiles * size
    if size < 2 or _trip(outer, schedule) < least:
        return schedule, inner.name
    why = f"{outer.name}: a transposed access's stride-1 index moves with it"
    try:
        if outer is chain[-2] and _trip(inner, schedule) >= least:
            tiled = schedule.tile((outer.name, inner.name), size)
            return tiled.note(f"{why}: tiled {size} x {size} with {inner.name}"), \
                tf.split_names(inner.name)[1]
        block = _block_of(stmts, outer) or size
        cut = _strip_transpose(schedule, chain, outer.name, block)
        return cut.note(f"{why}: strips of {block} above {inner.name}"), inner.name
    except ScheduleError:
        return schedule, inner.name


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
    parts = _parts(outer)
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
    for tensor, indices in accesses:
        last = len(indices) - 1 - ir.unit_tail(program.tensors[tensor])
        moves = _index_vars(indices[last]) if last >= 0 else set()
        if a in moves and b not in moves and any(b in _index_vars(ix) for ix in indices):
            return True
    return False


def _index_vars(ix: ir.Expr) -> set[str]:
    return {v.name for v in ix.walk() if isinstance(v, ir.Var) and v.kind == "index"}


def _vectorize(schedule: Schedule, name: str) -> Schedule:
    if not isinstance(tf.find(schedule.root, name).child, Leaf):
        return schedule
    try:
        out = schedule.vectorize(name)
    except ScheduleError as e:
        return schedule.note(f"{name}: not vectorized: {str(e).splitlines()[0]}")
    return out.note(f"{name}: vector loop: the innermost, it carries no dependence (or an "
                    "unordered reduction only)")


@dataclass(frozen=True)
class TilePlan:
    """A register-tiled contraction: its loops' roles, tiles and packed operands."""

    row: str
    col: str
    red: str
    inner: tuple[str, ...]
    mr: int
    nr: int
    kc: int
    lanes: int
    sweeps: tuple[int, int]  # passes of the tiles over A (per column tile) and B (per row tile)
    pack: tuple[bool, bool]  # A, B

    def describe(self) -> str:
        taps = f", taps {', '.join(self.inner)} inside" if self.inner else ""
        packs = "; ".join(f"{'packs' if p else 'leaves'} {op} (swept {n}x)"
                          for op, p, n in zip("AB", self.pack, self.sweeps, strict=True))
        v = self.nr // self.lanes
        return (f"{self.row}: register tile {self.mr}x{self.nr} ({v} vector{'s' * (v > 1)} "
                f"of {self.lanes} lanes), rows {self.row}, columns {self.col}, reduction "
                f"{self.red} in blocks of {self.kc}{taps}; {packs}")


def _register_tile(schedule: Schedule, chain: list[Loop], s: PolyStmt,
                   policy: CpuPolicy, knobs: Knobs = DEFAULT_KNOBS) -> Schedule | None:
    plan = _tile_plan(schedule, chain, s, policy, knobs)
    if plan is None:
        return None
    mc = _row_block(policy.row_block if knobs.mc is None else knobs.mc, plan.mr,
                    _trip(tf.find(schedule.root, plan.row), schedule))
    out = _goto_nest(schedule, chain, plan.col, plan.row, plan.red, (plan.mr, plan.nr, plan.kc),
                     plan.inner, rows_outer=bool(knobs.rows_outer), mc=mc)
    if any(plan.pack):
        its = {lp.name: raw_iterator(lp.expr, s.name) for lp in chain}
        out = pack_operands(out, s, str(its[plan.col]), str(its[plan.row]), plan.mr, plan.nr,
                            rows=plan.pack[0], cols=plan.pack[1])
    return out.note(plan.describe())


def _tile_plan(schedule: Schedule, chain: list[Loop], s: PolyStmt,
               policy: CpuPolicy, knobs: Knobs = DEFAULT_KNOBS) -> TilePlan | None:
    if s.kind != "update" or s.stmt.op != "+" or s.guarded or not s.stmt.lhs:
        return None
    raw = {lp.name: raw_iterator(lp.expr, s.name) for lp in chain}
    its = {name: it for name, it in raw.items() if it is not None}
    if len(its) != len(raw):
        return None
    by_iter = {it: name for name, it in its.items()}
    col = by_iter.get(s.stmt.lhs[-1])
    rows = [by_iter[i] for i in s.stmt.lhs[:-1] if i in by_iter]
    reds = [by_iter[i] for i in s.stmt.reduction_iters if i in by_iter]
    dtype = schedule.poly.program.tensors[s.stmt.tensor].dtype
    if col is None or not rows or not reds or dtype not in ("float32", "float64"):
        return None
    if all(all(r.read.uses(i) for i in s.stmt.lhs) for r in s.reads):
        return None  # no operand is reused across outputs (a sum over a middle axis): the
        # register tile would keep nothing in registers; the cost model orders it instead
    trips = {lp.name: _trip(lp, schedule) for lp in chain}
    elem = DTYPES[dtype].np.itemsize
    b = policy.blocking(elem)
    nr, mr = _register_shape(b, policy, trips[col])
    nr, mr = knobs.nr or nr, knobs.mr or mr
    # Rows: the index most operands do not move with (they are reused across rows), that
    # fills the register tile, whose operand rows are closest in memory.
    row = max(rows, key=lambda n: (invariant_reads(s, its[n]),
                                   -vector_rows(s, its[n], its[col]), min(trips[n], mr),
                                   -_stride_rank(s, its[n]), trips[n]))
    red = max(reds, key=lambda n: trips[n])
    inner = tuple(n for n in reds if n != red and trips[n] <= policy.small_reduction)
    if inner and not knobs.mr and nr >= policy.tap_rows_vectors * b.lanes and trips[col] == nr:
        mr = _tap_rows(trips[row], policy)  # filter taps in a tile of a channel block
    program = schedule.poly.program
    if any(r.read.uses(its[row]) and program.tensors[r.read.tensor].role != "input"
           for r in s.reads):  # an operand that cannot be packed: avoid partial row tiles
        mr = _dividing_rows(mr, trips[row], policy)
    mr, kc = min(mr, trips[row]), min(knobs.kc or b.kc, trips[red])
    if nr < b.lanes or nr % b.lanes or mr < 1 or kc < 1:
        return None
    sweeps = (-(-trips[col] // nr), -(-trips[row] // mr))
    pays = functools.partial(_pays_to_pack, policy, trips[red])
    pack = (_choice(knobs.pack_a, knobs.pack, pays(sweeps[0], trips[row] * elem)),
            _choice(knobs.pack_b, knobs.pack, pays(sweeps[1], trips[col] * elem)))
    return TilePlan(row, col, red, inner, mr, nr, kc, b.lanes, sweeps, pack)


def _pays_to_pack(policy: CpuPolicy, reduction: int, sweeps: int, row_bytes: int) -> bool:
    """Does copying an operand into panels pay: a long reduction, at least
    ``pack_min_sweeps`` passes of the register tiles over it, and more of it (``row_bytes``
    per step of the reduction) than half of L1 holds, where it would stay between passes
    (the weights of a 1 x 1 convolution with 24 outputs, 9 KB, gained nothing packed)?"""
    return (reduction >= policy.pack_min_reduction and sweeps >= policy.pack_min_sweeps
            and reduction * row_bytes > policy.machine.l1d_bytes // 2)


def _choice(own: bool | None, both: bool | None, model: bool) -> bool:
    """A knob for one operand, else the knob for both, else the model's decision."""
    return own if own is not None else both if both is not None else model


def _row_block(mc: int | None, mr: int, rows: int) -> int | None:
    """Rows per L2 block (GotoBLAS's MC), a multiple of ``mr``; None when there is no such
    level (not asked for, or one block would hold every row)."""
    if not mc:
        return None
    mc = -(-mc // mr) * mr
    return mc if mc < rows else None


def _tap_rows(rows: int, policy: CpuPolicy) -> int:
    """Rows of a register tile with filter taps inside: the largest divisor of ``rows`` in
    ``policy.tap_rows``, else ``tap_rows_default`` (at most ``rows``)."""
    low, high = policy.tap_rows
    fits = [m for m in range(high, low - 1, -1) if rows % m == 0]
    return fits[0] if fits else min(rows, policy.tap_rows_default)


def _dividing_rows(mr: int, rows: int, policy: CpuPolicy) -> int:
    """Fewer rows (down to half, and to ``policy.dividing_rows_min``) when that makes every
    row tile full: partial tiles of an operand that is not packed run as plain loops."""
    if rows >= UNKNOWN_TRIP or rows % mr == 0:
        return mr
    low = max(policy.dividing_rows_min, mr // 2)
    fits = [m for m in range(mr - 1, low - 1, -1) if rows % m == 0]
    return fits[0] if fits else mr


def _register_shape(b: Blocking, policy: CpuPolicy, cols: int) -> tuple[int, int]:
    """(NR, MR): the model's tile, unless fewer vectors per row leave a smaller partial
    column tile (56 columns: 3 x 16 + 8 rather than 32 + 24); then as many rows as the
    registers hold (``policy.register_rows``)."""
    best = b.nr // b.lanes
    waste = {nv: (cols % (nv * b.lanes)) / cols for nv in range(1, best + 1)
             if nv * b.lanes <= cols}
    if not waste or cols >= UNKNOWN_TRIP:
        return (b.nr if cols >= b.nr else b.lanes * (cols // b.lanes)), b.mr
    nv = min(waste, key=lambda v: (waste[v], -v))
    if nv == best:
        return b.nr, b.mr
    return nv * b.lanes, policy.register_rows(nv)


def _goto_nest(schedule: Schedule, chain: list[Loop], col: str, row: str, red: str,
               blocking: tuple[int, int, int], inner: tuple[str, ...] = (), *,
               rows_outer: bool = False, mc: int | None = None) -> Schedule:
    """The GotoBLAS order; the small reductions ``inner`` (a convolution's ``kh, kw``) run
    inside the register tile too, so its accumulators stay in registers across them. With
    ``mc``, the rows are first cut in blocks of ``mc`` (``row_c``), and the tiles of a block
    run inside it: its operand panel stays in L2 while every column tile passes."""
    mr, nr, kc = blocking
    names = {n: _parts(n) for n in (col, row, red)}
    out = schedule.split(col, nr, names[col])
    blocks = [f"{row}_c"] if mc else []
    if mc:
        out = out.split(row, mc, (blocks[0], f"{row}_m")).split(f"{row}_m", mr, names[row])
    else:
        out = out.split(row, mr, names[row])
    out = out.split(red, kc, names[red])
    others = [lp.name for lp in chain if lp.name not in (col, row, red, *inner)]
    tiles = [names[row][0], names[col][0]] if rows_outer else [names[col][0], names[row][0]]
    order = [*others, names[red][0], *blocks, *tiles, names[red][1], *inner, names[row][1],
             names[col][1]]
    out = out.reorder(*order).vectorize(names[col][1]).unroll(names[row][1])
    return out.separate(names[row][0]).separate(names[col][0])


def pack_operands(schedule: Schedule, s: PolyStmt, col_it: str, row_it: str,
                  mr: int, nr: int, *, rows: bool = True, cols: bool = True) -> Schedule:
    """Copy input operands of ``s`` into panels the micro-kernel streams through:
    ``B(k, n)`` (or ``B(n, k)``) → ``B_pack(n/NR, k, n%NR)`` when it moves with the columns
    (and ``cols``), ``A(m, k)`` → ``A_pack(m/MR, k, m%MR)`` when it moves with the rows only
    (and ``rows``)."""
    program = schedule.poly.program
    readers = [r.read.tensor for r in s.reads]
    for r in s.reads:
        read = r.read
        t = program.tensors[read.tensor]
        if t.role != "input" or read.pad is not None or not r.affine:
            continue
        if readers.count(read.tensor) > 1:
            continue  # read in two roles (A(i,k) and A(j,k)): one layout cannot serve both
        plain = [i for i, ix in enumerate(read.indices) if isinstance(ix, ir.Var)]
        where = {read.indices[i].name: i for i in plain}  # type: ignore[attr-defined]
        uses = {v.name for ix in read.indices for v in ix.walk() if isinstance(v, ir.Var)}
        if col_it in where and t.rank > 1:  # B(n, k) as well as B(k, n): lanes along n
            if cols:
                schedule = _try_pack(schedule, read.tensor, where[col_it], nr)
        elif rows and row_it in where and col_it not in uses and t.rank > 1:
            schedule = _try_pack(schedule, read.tensor, where[row_it], mr)
    return schedule


def _try_pack(schedule: Schedule, tensor: str, dim: int, factor: int) -> Schedule:
    if any(st.verb == "pack" and st.args[0] == tensor for st in schedule.steps):
        return schedule
    try:
        return schedule.pack(tensor, dim, factor)
    except ScheduleError:
        return schedule


def _parts(loop: str) -> tuple[str, str]:
    return tf.split_names(loop)


def _stride_rank(s: PolyStmt, it: str) -> int:
    """How far from the last (stride-1) dimension ``it`` indexes the operands it moves:
    rows of a register tile read best from neighbouring addresses."""
    ranks = [len(r.read.indices) - 1 - d for r in s.reads for d, ix in enumerate(r.read.indices)
             if any(isinstance(v, ir.Var) and v.kind == "index" and v.name == it
                    for v in ix.walk())]
    return min(ranks, default=len(ranks))


def parallelize(schedule: Schedule, policy: CpuPolicy) -> Schedule:
    """In each top-level nest of at least ``policy.min_parallel_work`` statement instances,
    run the outermost dependence-free loop with at least ``policy.parallel_trips``
    iterations in parallel; when the nest's outer loops have fewer (a batch of one), look
    inside the nests below them instead (else take the one with the most)."""
    for top in nests(schedule.root):
        n = _instances(schedule, top)
        if n >= policy.min_parallel_work:
            before = len(schedule.steps)
            schedule = _parallelize_nest(schedule, top.name, policy.parallel_trips)
            chosen = [st.args[0] for st in schedule.steps[before:]]
            why = (f"parallel {', '.join(chosen)}: the outermost dependence-free loop with "
                   f"{policy.parallel_trips}+ iterations" if chosen else
                   "no dependence-free loop: one thread")
            if not chosen:
                split = _split_k(schedule, top.name, policy)
                if split is not None:
                    schedule, why = split, (f"split-K: parallel reduction "
                                            f"{split.steps[-1].args[0]} (no loop of "
                                            "independent iterations; one output element)")
        else:
            why = (f"one thread: {n} instances < {policy.min_parallel_work} "
                   "(OpenMP's fork and join would cost more)")
        schedule = schedule.note(f"{top.name}: {why}")
    return schedule


def _split_k(schedule: Schedule, top: str, policy: CpuPolicy) -> Schedule | None:
    """A nest that reduces into one element (a dot product, a whole sum) with no loop of
    independent iterations: its outermost loop with ``parallel_trips`` iterations runs as a
    parallel reduction (each thread sums a private copy; ``Schedule.parallel``). A single
    vectorized loop is first cut in ``parallel_trips`` strips of whole vectors."""
    chain = chain_of(tf.find(schedule.root, top))
    least = policy.parallel_trips
    for lp in chain[:-1]:
        if _trip(lp, schedule) >= least:
            with contextlib.suppress(ScheduleError):
                out = schedule.parallel(lp.name)
                if Tag.PARALLEL_REDUCTION in tf.find(out.root, lp.name).tags:
                    return out
            return None
    inner = chain[-1]
    stmts = tf.stmts_of(inner)
    if len(chain) != 1 or len(stmts) != 1 or Tag.VECTORIZE not in inner.tags:
        return None
    s = schedule.poly.stmt(stmts[0])
    lanes = policy.lanes(DTYPES[schedule.poly.program.tensors[s.stmt.tensor].dtype]
                         .np.itemsize)
    n = _trip(inner, schedule)
    strip = -(-n // (least * lanes)) * lanes
    if n >= UNKNOWN_TRIP or strip < policy.strip_min_vectors * lanes:
        return None
    outer, below = tf.split_names(inner.name)
    try:
        out = schedule.split(inner.name, strip, (outer, below)).vectorize(below)
        out = out.parallel(outer)
    except ScheduleError:
        return None
    return out if Tag.PARALLEL_REDUCTION in tf.find(out.root, outer).tags else None


def _instances(schedule: Schedule, top: Loop) -> int:
    """How many statement instances a nest runs, at most (large when the sizes are
    unknown): the points of each domain's bounding box, exact for rectangular nests; an
    exact count of a padded convolution's domain took isl 0.2 s, a tenth of its lowering."""
    if schedule.poly.program.sizes:
        return UNKNOWN_TRIP
    return sum(_box_points(schedule.poly.stmt(name)) for name in tf.stmts_of(top))


def _box_points(s: PolyStmt) -> int:
    extents = [s.extent(it) for it in s.iters]
    return UNKNOWN_TRIP if None in extents else math.prod(e or 0 for e in extents)


def _parallelize_nest(schedule: Schedule, top: str, least: int) -> Schedule:
    chain = chain_of(tf.find(schedule.root, top))
    free = [lp for lp in chain if loop_free(schedule, lp)]
    trips = {lp.name: tf.trip_count(lp, schedule.poly.domain) for lp in free}
    many = [lp for lp in free if (trips[lp.name] or least) >= least]
    if many:
        return schedule.parallel(many[0].name)
    below = chain[-1].child
    if isinstance(below, Sequence):
        for name in [c.name for c in below.children if isinstance(c, Loop)]:
            schedule = _parallelize_nest(schedule, name, least)
        return schedule
    if free:
        return schedule.parallel(max(free, key=lambda lp: trips[lp.name] or 0).name)
    return schedule


def _trip(lp: Loop, schedule: Schedule) -> int:
    """A loop's trip count; a size-generic one counts as large (tiles fit any size)."""
    n = tf.trip_count(lp, schedule.poly.domain)
    return UNKNOWN_TRIP if n is None else n

