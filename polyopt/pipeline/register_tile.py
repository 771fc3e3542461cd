"""Register tiles: a contraction's nest as a GotoBLAS nest (Low et al., TOMS 2016;
Bondhugula, arXiv 2003.00532), planned from the machine model (``TilePlan``).

The column loop (the output's stride-1 index) is split by NR and vectorized, a row loop (the
output index whose operands are broadcasts and reused) split by MR and unrolled and jammed,
the largest reduction split by KC with the short ones (filter taps) inside, ordered
``others, k_o, j_o, i_o, k_i, taps, i_r, j_v`` with full tiles separated; each operand is
packed into panels when the tiles sweep it often enough (``_pays_to_pack``; a copied row
operand is also priced in place, ``_bases``). The printer turns the inner loops into a
register-tile micro-kernel (``codegen/microkernel.py``).

The rows are the cost model's (``_fewest_cycles``): as many as the registers hold, or
fewer that leave no partial tile or let a filter tap unroll into the micro-kernel's step,
whichever it predicts fastest (its register level prices the step's loads, shared across
an unrolled tap and split across cache lines, ``costmodel/registers.py``); rows of an
operand read in place stay within what L1's ways hold of lines that share a set
(``_conflict_rows``). Columns that end in a partial tile are also priced with the column
operand packed (``_padded``), whose zero padding lets the kernel run that tile.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator
from dataclasses import dataclass, replace

from polyopt import ir
from polyopt.costmodel.cost import Estimate
from polyopt.costmodel.machine import Blocking, Machine
from polyopt.costmodel.strides import index_use, iterator_bytes
from polyopt.costmodel.verdict import compare
from polyopt.dtypes import DTYPES
from polyopt.errors import ScheduleError
from polyopt.pipeline.knobs import DEFAULT_KNOBS, Knobs
from polyopt.pipeline.order import nests_estimate
from polyopt.pipeline.policy import CpuPolicy
from polyopt.poly.model import PolyStmt
from polyopt.schedules import transform as tf
from polyopt.schedules.limits import CAPS
from polyopt.schedules.nest import UNKNOWN_TRIP, invariant_reads, trip, vector_rows
from polyopt.schedules.schedule import Schedule
from polyopt.schedules.tree import Loop, raw_iterator


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
    iterators: tuple[str, str]  # the statement's iterators of the rows and the columns
    mc: int | None  # rows per L2 block (``row_block``)
    rows_outer: bool = False  # row tiles outside the column tiles (``_rows_outer``)
    # loops besides the tiles that move only operands the columns do not (a convolution's
    # output rows ``h`` over a channel block): inside the reduction blocks (``_panel_loops``)
    panel_loops: tuple[str, ...] = ()

    def describe(self) -> str:
        taps = f", taps {', '.join(self.inner)} inside" if self.inner else ""
        packs = "; ".join(f"{'packs' if p else 'leaves'} {op} (swept {n}x)"
                          for op, p, n in zip("AB", self.pack, self.sweeps, strict=True))
        v = self.nr // self.lanes
        outer = ("; row tiles outside: the output outweighs its operands, and its rows are "
                 "the threads' (as its zeroing's)" if self.rows_outer else "")
        block = (f"; rows in L2 blocks of {self.mc} ({self.row}_c), the parallel loop"
                 if self.mc else "")
        panel = (f"; {', '.join(self.panel_loops)} inside the reduction blocks: the column "
                 f"operand's block stays in L1 across them" if self.panel_loops else "")
        return (f"{self.row}: register tile {self.mr}x{self.nr} ({v} vector{'s' * (v > 1)} "
                f"of {self.lanes} lanes), rows {self.row}, columns {self.col}, reduction "
                f"{self.red} in blocks of {self.kc}{taps}; {packs}{outer}{block}{panel}")


def register_tile(schedule: Schedule, chain: list[Loop], s: PolyStmt,
                  policy: CpuPolicy, knobs: Knobs = DEFAULT_KNOBS) -> Schedule | None:
    """The nest of ``chain`` over statement ``s`` as a GotoBLAS nest, its plan noted; None
    when ``s`` is no contraction a register tile can be built for. Whether it serves (an
    operand reused across the tile's rows or columns) is the cost model's question
    (``cpu._faster``): a sum over a middle axis or a batched matrix-vector product keeps
    nothing in registers, and the model predicts its plain nest faster. Its rows are the
    model's too, unless the knobs fix them (``_fewest_cycles``)."""
    plan = _tile_plan(schedule, chain, s, policy, knobs)
    if plan is None:
        return None
    if knobs.mr:
        return _built(schedule, chain, s, plan)
    return _fewest_cycles(schedule, chain, s, plan, policy, knobs)


def _built(schedule: Schedule, chain: list[Loop], s: PolyStmt, plan: TilePlan) -> Schedule:
    out = _goto_nest(schedule, chain, plan.col, plan.row, plan.red, (plan.mr, plan.nr, plan.kc),
                     plan.inner, rows_outer=plan.rows_outer, mc=plan.mc,
                     panel_loops=plan.panel_loops)
    if any(plan.pack):
        row_it, col_it = plan.iterators
        out = pack_operands(out, s, col_it, row_it, plan.mr, plan.nr, rows=plan.pack[0],
                            cols=plan.pack[1])
        plan = replace(plan, pack=_packed(out, s, col_it))
    return out.note(plan.describe())


def _packed(schedule: Schedule, s: PolyStmt, col_it: str) -> tuple[bool, bool]:
    """Which of ``s``'s operands (A, B) ``schedule`` copies into panels: the plan's wish
    where ``pack_operands`` could serve it (a padded read, a gather or a read two ways it
    leaves in place: the note said "packs B" of a 1x1 convolution's input written with
    ``pad I(0, 0, 0, 0)``, read in place)."""
    packed = {st.args[0] for st in schedule.steps if st.verb == "pack"}
    cols = {r.read.tensor for r in s.reads
            if any(isinstance(ix, ir.Var) and ix.name == col_it for ix in r.read.indices)}
    mine = packed & {r.read.tensor for r in s.reads}
    return bool(mine - cols), bool(mine & cols)


def _fewest_cycles(schedule: Schedule, chain: list[Loop], s: PolyStmt, plan: TilePlan,
                   policy: CpuPolicy, knobs: Knobs) -> Schedule:
    """The tile with the rows the cost model predicts fastest (its nest and packing;
    ``_faster``: a tie to the one computing less, then to more rows): ``plan``'s, as
    many as the registers hold, or fewer (``_fewer_rows``) where that leaves no partial
    row tile, or lets the printer unroll a filter tap into the micro-kernel's step, which
    then loads each operand row once for up to the tap's trip of updates. Where the
    columns end in a partial tile and the column operand is left in place, each is also
    priced with that operand packed (``_padded``), and where the packing rule copies the
    row operand, each is also priced with it read in place (``_bases``). Each prediction is
    noted."""
    trips = {lp.name: trip(lp, schedule.poly.domain) for lp in chain}
    taps = _shared_taps(chain, s, plan, trips)
    mine = set(tf.stmts_of(chain[0]))
    best: tuple[Schedule, Estimate, str] | None = None
    seen = []

    def priced(got: TilePlan) -> tuple[Schedule, Estimate | None] | None:
        try:
            built = _built(schedule, chain, s, got)
        except ScheduleError:
            return None
        packs = {x.name for x in built.poly.stmts} - {x.name for x in schedule.poly.stmts}
        return built, nests_estimate(built, mine | packs, policy)

    first = priced(plan)
    # the prefetchers' streams count only for rows read from memory
    cold = first is not None and first[1] is not None and first[1].warm is None
    done: set[tuple[object, ...]] = set()  # a pack that does not apply builds the same nest
    for label, got in _candidates(schedule, chain, s, plan, policy, knobs, trips, taps,
                                  policy.machine.prefetch_streams if cold else None):
        found = first if got is plan else priced(got)
        if found is None or found[0].steps in done:
            continue
        built, est = found
        done.add(built.steps)
        if est is None:
            return built if best is None else best[0]
        seen.append((label, est))
        if best is None or _faster(est, best[1]):
            best = (built, est, label)
    if best is None:
        return _built(schedule, chain, s, plan)
    if len(seen) < 2:
        return best[0]
    told = "; ".join(f"{label} {e.describe() if e.warm is None else f'{e.warm:.3g} from cache'}"
                     for label, e in seen)
    return best[0].note(f"{plan.row}: register tile rows {best[2]}, the least predicted "
                        f"cycles of: {told}")


def _candidates(schedule: Schedule, chain: list[Loop], s: PolyStmt, plan: TilePlan,
                policy: CpuPolicy, knobs: Knobs, trips: dict[str, int], taps: list[int],
                streams: int | None) -> Iterator[tuple[str, TilePlan]]:
    """The labelled plans ``_fewest_cycles`` prices, ``plan`` first: for each base plan
    (``_bases``), its rows and fewer (``_fewer_rows``), each also with its column operand
    packed where that pads a partial tile (``_padded``)."""
    for base, own, tag in _bases(schedule, chain, s, plan, policy, knobs):
        for mr in (base.mr, *_fewer_rows(base.mr, trips[base.row], taps,
                                         base.nr // base.lanes, streams)):
            got = base if mr == base.mr else _tile_plan(schedule, chain, s, policy, own, mr)
            if got is None or got.mr != mr:
                continue
            yield f"{mr}{tag}", got
            padded = _padded(got, trips, own)
            if padded is not None:
                yield f"{mr}{tag} packing B", padded


def _bases(schedule: Schedule, chain: list[Loop], s: PolyStmt, plan: TilePlan,
           policy: CpuPolicy, knobs: Knobs) -> list[tuple[TilePlan, Knobs, str]]:
    """The plans whose rows ``_fewest_cycles`` varies, each with its knobs and label:
    ``plan``, and where ``_pays_to_pack`` copies the row operand ``A`` and no knob says so,
    the plan reading it in place (its rows within L1's ways, ``_conflict_rows``). The copy
    is one more pass over ``A`` and a fork; reading in place is ``mr`` streams, not one.
    The rule alone copied A larger than half of L2: BERT's FFN down (MxNxK 128x768x3072,
    B transposed, 2 threads) ran 2.15 ms copied, 1.91 in place (MKL 2.04); ResNet-50's 1x1
    layers 4, 5, 6, 8, 10 and 12 0.88-1.00x the time copied
    (``scripts/dev/compare_commits.py``, BENCHMARKS.md)."""
    bases = [(plan, knobs, "")]
    if plan.pack[0] and knobs.pack_a is None and knobs.pack is None:
        unpacked = replace(knobs, pack_a=False)
        in_place = _tile_plan(schedule, chain, s, policy, unpacked)
        if in_place is not None:
            bases.append((in_place, unpacked, " A in place"))
    return bases


def _padded(plan: TilePlan, trips: dict[str, int], knobs: Knobs) -> TilePlan | None:
    """``plan`` with its column operand packed, where its columns end in a partial tile
    and the operand is left in place by the packing rule (``_pays_to_pack``), not by a
    knob: the padded copy lets the micro-kernel run the partial tile too, which else
    prints as plain loops (scalar for a one-column tail: 49 columns in tiles of 16, 2048 x
    49 x 512 ran 1.35 ms with its last column in plain loops, 0.51 packed)."""
    if plan.pack[1] or knobs.pack_b is not None or knobs.pack is not None \
            or trips[plan.col] >= UNKNOWN_TRIP or trips[plan.col] % plan.nr == 0:
        return None
    return replace(plan, pack=(plan.pack[0], True))


def _shared_taps(chain: list[Loop], s: PolyStmt, plan: TilePlan,
                 trips: dict[str, int]) -> list[int]:
    """The trips of the tile's reduction loops (the taps inside, the reduction's block)
    that move a vector operand as the rows do (``I(h + kh, w)``, vectors along ``w``): the
    printer unrolls only such a loop, where unrolling loads fewer vectors
    (``microkernel.Emitter._unrolled``)."""
    its = {lp.name: raw_iterator(lp.expr, s.name) for lp in chain}
    row_it, col_it = plan.iterators
    steps = {**{n: trips[n] for n in plan.inner}, plan.red: min(plan.kc, trips[plan.red])}
    return [k for n, k in steps.items() if any(
        r.read.uses(col_it) and any({row_it, its[n]} <= ir.index_names(ix)
                                    for ix in r.read.indices) for r in s.reads)]


def _faster(a: Estimate, b: Estimate) -> bool:
    """Is ``a`` predicted faster than ``b`` (``verdict.compare``), or on a tie, with less
    work on the cores (``Estimate.compute``): where both are bound by the same traffic,
    which does not change with the rows, the one computing less overlaps it better?"""
    order = compare(a, b).order
    return order < 0 or (order == 0 and a.compute < b.compute)


def _fewer_rows(mr: int, rows: int, taps: list[int], vectors: int,
                streams: int | None = None) -> list[int]:
    """Row counts below ``mr`` worth pricing for ``rows`` rows: for each filter tap of
    trip ``t``, the most rows whose step, the tap unrolled, stays within the printer's
    cap (``Caps.max_unrolled_updates``); given ``streams`` (rows read from memory), the
    most whose rows of memory, the taps' rows with them, stay within the streams a core's
    prefetchers follow (``Machine.prefetch_streams``); and for those and ``mr``, when
    they leave a partial row tile, the divisors of the rows down to half of them. A search
    range, not a cost: the model prices each."""
    if rows >= UNKNOWN_TRIP:
        return []
    tops = [mr, *(min(mr, CAPS.max_unrolled_updates // (t * max(vectors, 1)))
                  for t in taps if t > 1)]
    if streams is not None:
        tops.insert(1, min(mr, streams - max([t - 1 for t in taps], default=0)))
    out: dict[int, None] = {}
    for top in tops:
        if top < 1:
            continue
        out[top] = None
        if rows % top:
            out.update(dict.fromkeys(d for d in range(top - 1, max(1, top // 2) - 1, -1)
                                     if rows % d == 0))
    return [m for m in out if m < mr]

def _tile_plan(schedule: Schedule, chain: list[Loop], s: PolyStmt, policy: CpuPolicy,
               knobs: Knobs = DEFAULT_KNOBS, rows_of: int | None = None) -> TilePlan | None:
    """The plan of the register tile, with ``rows_of`` rows (else the knob's, else as many
    as the registers hold: ``_register_shape``)."""
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
    trips = {lp.name: trip(lp, schedule.poly.domain) for lp in chain}
    elem = DTYPES[dtype].np.itemsize
    b = policy.blocking(elem)
    nr, mr = _register_shape(b, policy, trips[col])
    nr, mr = knobs.nr or nr, rows_of or knobs.mr or mr
    fixed = bool(rows_of or knobs.mr)
    # Rows: the index most operands do not move with (they are reused across rows), that
    # fills the register tile, whose operand rows are closest in memory.
    row = max(rows, key=lambda n: (invariant_reads(s, its[n]),
                                   -vector_rows(s, its[n], its[col]), min(trips[n], mr),
                                   -_stride_rank(s, its[n]), trips[n]))
    red = max(reds, key=lambda n: trips[n])
    inner = tuple(n for n in reds if n != red and trips[n] <= policy.small_reduction)
    if nr < b.lanes or nr % b.lanes:
        return None
    pays = functools.partial(_pays_to_pack, policy, trips[red])
    taps = math.prod(trips[n] for n in inner)
    outer = knobs.rows_outer if knobs.rows_outer is not None else _rows_outer(
        trips[row], trips[col], trips[red] * taps)
    blocked = not outer and _row_blocked(policy, knobs.mc, (trips[row], trips[col], trips[red]))
    pack_a = _choice(knobs.pack_a, knobs.pack, pays(-(-trips[col] // nr), trips[row] * elem,
                                                    broadcast=True, l2_blocked=blocked))
    if not pack_a and not fixed:
        mr = min(mr, _conflict_rows(schedule, s, its[row], its[col], policy))
    mr = min(mr, trips[row])
    panel = _panel_loops(s, [lp.name for lp in chain if lp.name not in (col, row, red, *inner)],
                         its, its[col], trips)
    kc = knobs.kc or _reduction_block(b, policy, trips[red], taps * nr * elem)
    if panel and not knobs.kc:
        kc = _l1_block(policy, trips[red], taps * nr * elem, taps * (mr + nr) * elem)
    kc = min(kc, trips[red])
    if mr < 1 or kc < 1:
        return None
    panel = panel if kc < trips[red] else ()
    sweeps = (-(-trips[col] // nr), -(-trips[row] // mr))
    crowded = _conflict_rows(schedule, s, its[red], its[row], policy) < kc
    pack = (pack_a, _choice(knobs.pack_b, knobs.pack, pays(
        sweeps[1], trips[col] * elem, _unit_stride(s, its[col]), crowded=crowded)))
    mc = None if outer else row_block(policy, knobs.mc, (mr, nr, b.lanes),
                                       (trips[row], trips[col], kc * taps), elem, sweeps[0])
    return TilePlan(row, col, red, inner, mr, nr, kc, b.lanes, sweeps, pack,
                    (its[row], its[col]), mc, outer, panel)


def _conflict_rows(schedule: Schedule, s: PolyStmt, along: str, across: str,
                   policy: CpuPolicy) -> int:
    """The most steps of iterator ``along`` whose lines of each operand read in place that
    moves with ``along`` but not with ``across`` share no L1 set beyond its ways
    (``Machine.l1d_ways``); no bound when no such operand's steps are a line or more apart.
    Along the tile's rows (across its columns): the micro-kernel reads one line of each
    row for a line's worth of steps; rows a power of two of lines apart (a 1024-float row
    is 64 lines: every row in one set of a 64-set L1) evict each other's lines before
    their next step, and every broadcast then comes from L2. Along the reduction (across
    the rows): the steps of the column operand's panel that stay in L1 between the row
    tiles' sweeps (``_pays_to_pack``'s ``crowded``)."""
    m, bound = policy.machine, UNKNOWN_TRIP
    sets = max(1, m.l1d_bytes // (m.line_bytes * m.l1d_ways))
    for r in s.reads:
        if not r.read.uses(along) or r.read.uses(across):
            continue
        gap = iterator_bytes(schedule.poly, r.read.tensor, r.read.indices, along)
        if gap is not None and gap >= m.line_bytes:
            bound = min(bound, rows_in_ways(gap, m.line_bytes, sets, m.l1d_ways))
    return bound


def rows_in_ways(gap: int, line: int, sets: int, ways: int, most: int = 64) -> int:
    """The most rows ``gap`` bytes apart (up to ``most``) whose lines at one column fill
    no cache set of ``sets`` beyond its ``ways``; ``UNKNOWN_TRIP`` when ``most`` do."""
    count: dict[int, int] = {}
    for n in range(most):
        k = (n * gap // line) % sets
        count[k] = count.get(k, 0) + 1
        if count[k] > ways:
            return n
    return UNKNOWN_TRIP


def _panel_loops(s: PolyStmt, others: list[str], its: dict[str, str], col_it: str,
                 trips: dict[str, int]) -> tuple[str, ...]:
    """The loops of ``others`` (outside the tiles) that move some operand but none that
    moves with the columns: a convolution's output rows ``h`` and batch ``n`` over an
    NCHW16c channel block. Each of their iterations sweeps the column operand's panel (the
    block's weights) again; a product of their trips of 1 reuses nothing (empty)."""
    found = []
    for name in others:
        moved = [r for r in s.reads if r.read.tensor != s.stmt.tensor
                 and r.read.uses(its[name])]
        if moved and not any(r.read.uses(col_it) for r in moved):
            found.append(name)
    return tuple(found) if math.prod(trips[n] for n in found) > 1 else ()


def _l1_block(policy: CpuPolicy, red: int, panel_bytes: int, step_bytes: int) -> int:
    """The reduction whole when the column operand's panel (``panel_bytes`` a step) fits in
    L1, where most of it stays while the row operand streams past; else cut in equal blocks
    whose steps (``step_bytes`` each: a step of that panel and of the row operand's
    micro-panel) fill half of L1. With loops that re-sweep the panel inside the blocks
    (``_panel_loops``), it stays in L1 across them rather than streaming from L2 at every
    row; an output tile then loads and stores its sums once per block. ResNet-50's layer
    16 (1x1, 1024->256 at 14x14, 14x16 tiles over NCHW16c): perf put a third of the
    micro-kernel's samples on the FMA after the load of the weights' vector (a 64 KB
    panel, from L2 at each of 14 rows); 6 blocks of 171 inside ``f_b`` with ``h`` inside
    them: 0.46 against 0.52 ms (same run; 4 blocks 0.46, 8 blocks 0.47, 2 blocks 0.55).
    Panels that fit in L1 ran slower cut (compare_commits, new/old, 3 rounds): layer 14
    (a 16 KB panel) 1.12 in 2 blocks, layer 10 (512->128 at 28x28, 32 KB) 1.26 in 4."""
    half = policy.machine.l1d_bytes // 2
    if red >= UNKNOWN_TRIP or red * panel_bytes <= policy.machine.l1d_bytes:
        return red
    fits = max(1, half // max(step_bytes, 1))
    blocks = -(-red // fits)
    return -(-red // blocks)


def _rows_outer(rows: int, cols: int, red: int) -> bool:
    """Row tiles outermost when the output outweighs both operands (a short reduction:
    ``red * (rows + cols) < rows * cols``). Its traffic then dominates, and the threads
    should write the rows they zeroed (the zeroing nest runs in parallel along the output's
    rows), each core keeping its own rows in its L2. Otherwise the column tiles go outside,
    so the operand that moves with the columns stays in cache while the rows pass. Measured
    on the suite's 1024x1024x16 product (same-run A/B, 3 rounds): 0.62 ms columns outside,
    0.44 ms rows outside."""
    return red < UNKNOWN_TRIP and red * (rows + cols) < rows * cols


def _reduction_block(b: Blocking, policy: CpuPolicy, red: int, step_bytes: int) -> int:
    """The reduction tile: the whole reduction when the column operand's panel for it
    (``step_bytes`` per step: the taps' rows of NR columns) fits in half of L2, which then
    feeds the micro-kernel (its ``nr`` elements per step against ``mr * nr / lanes`` FMAs
    stay far below L2's bandwidth); else the model's ``kc`` (the panel in L1). A split
    costs a pass over the output and, the parallel loop being inside it, a fork and join
    per block: 4096 x 16 x 1024 ran 1.75 ms with kc = 128 and 1.29 ms unsplit, 2 threads
    (``scripts/checks/bench_gemm_plans.py --variants kc=1024``; 1024^3 12.7 against 13.1 ms)."""
    if red < UNKNOWN_TRIP and red * step_bytes <= policy.machine.l2_bytes // 2:
        return red
    return b.kc


def _pays_to_pack(policy: CpuPolicy, reduction: int, sweeps: int, row_bytes: int,
                  unit_stride: bool = True, broadcast: bool = False,
                  l2_blocked: bool = False, crowded: bool = False) -> bool:
    """Does copying an operand into panels pay? Always after ``pack_min_sweeps`` passes when
    it is ``crowded``: its panel's steps share L1's sets beyond their ways (rows a power of
    two apart), so no pass finds it in L1 (512 x 512 x 512, rows 2 KB apart: 0.61x MKL in
    place, 0.84x packed); or when it is a vector operand whose lanes are not
    ``unit_stride``, each of whose vectors in place is a gather, however small it is
    (attention's scores, 16 x 64 x 64 x 32 with keys ``W(b, j, k)``: 145-209 us in the plain
    nest the gathers left it, 28 us packed, torch 30-40). Else for a long reduction, at least
    ``pack_min_sweeps`` passes of the register tiles over it, and more of it (``row_bytes``
    per step of the reduction) than half of L1 holds, where it would stay between passes
    (the weights of a 1 x 1 convolution with 24 outputs, 9 KB, gained nothing packed)? One
    that half of L2 holds is read from there between the passes, and its copy is one more
    pass: a ``broadcast`` (row) operand is copied only after ``pack_l2_min_sweeps`` passes,
    a unit-stride vector operand never. A larger operand is
    copied, unless ``l2_blocked``: the nest's row blocks keep a block of it in L2 for the
    passes (attn_pv, 1 MB a head swept twice: 1.4-2.1 ms copied, 0.89 ms not, on a 1 MB L2
    core where a copy is a third pass over memory)."""
    if (crowded or not (unit_stride or broadcast)) and sweeps >= policy.pack_min_sweeps:
        return True
    footprint = reduction * row_bytes
    if (reduction < policy.pack_min_reduction or sweeps < policy.pack_min_sweeps
            or footprint <= policy.machine.l1d_bytes // 2):
        return False
    if footprint > policy.machine.l2_bytes // 2 and not l2_blocked:
        return True
    return broadcast and sweeps >= policy.pack_l2_min_sweeps


def _unit_stride(s: PolyStmt, it: str) -> bool:
    """Do the operands that move with ``it`` index it in their last dimension?"""
    return all(index_use(r.read.indices, it).alone for r in s.reads if r.read.uses(it))


def _choice(own: bool | None, both: bool | None, model: bool) -> bool:
    """A knob for one operand, else the knob for both, else the model's decision."""
    return own if own is not None else both if both is not None else model


def _row_blocked(policy: CpuPolicy, knob: int | None, extents: tuple[int, int, int]) -> bool:
    """Will ``row_block`` hold the rows' operand in L2 between the column tiles' passes,
    as far as is known before the register tile's rows and the reduction block: a positive
    knob cuts blocks, 0 none, and the model cuts them on known extents where the operand
    overflows L2 (where it fits, it stays there whole just the same)."""
    knob = policy.row_block if knob is None else knob
    return bool(knob) if knob is not None else max(extents) < UNKNOWN_TRIP


def row_block(policy: CpuPolicy, knob: int | None, tile: tuple[int, int, int],
               extents: tuple[int, int, int], elem: int, col_sweeps: int) -> int | None:
    """Rows per L2 block (GotoBLAS's MC), a multiple of the register tile's rows; None for
    no such level. ``tile`` is (mr, nr, lanes), ``extents`` (rows, columns, depth: the
    reduction block's steps times the taps inside).

    The knob (or ``policy.row_block``) when set, 0 for none. Else the model, when the
    column tiles pass more than once over the operand that moves with the rows and its rows
    for one reduction block overflow L2 less two panels of the other operand (the one
    streamed and the next): the rows may be cut into blocks that fit there, the block loop
    the parallel one, so each core keeps its block in its own L2 while the column tiles
    pass, rather than re-reading the whole operand from L3 for each of them; but then each
    core streams the whole other operand once per block. The number of blocks is a
    multiple of the cores, at least ``policy.parallel_trips``, and the one with the least
    predicted cycles on the busiest core (OpenMP's static schedule gives each core a run of
    blocks), if fewer than without blocks (``_row_block_cycles``).
    Same-run A/B on 2 cores (each variant compiled in one process, 20-25 rounds after
    0.3 s pauses, median of the ratio), time with ``mc=0`` over the model's blocks:
    1023x1025x1021 1.085 and 1.106, 1024^3 1.134, the suite's ffn 0.95 and 1.01. Cold
    operands (``scripts/checks/bench_row_block.py``, as a model's weights are, in BENCHMARKS'
    decisions) rule the blocks out where the other operand is the larger."""
    if knob is None:
        knob = policy.row_block
    mr, nr, lanes = tile
    rows, cols, depth = extents
    if knob is None:
        m = policy.machine
        budget = m.l2_bytes - 2 * depth * nr * elem
        if col_sweeps < 2 or max(rows, cols, depth) >= UNKNOWN_TRIP \
                or rows * depth * elem <= budget:
            return None
        tiles, cores = -(-rows // mr), max(1, m.cores)
        fits = [b for b in range(cores, tiles + 1, cores) if b >= policy.parallel_trips
                and -(-tiles // b) * mr * depth * elem <= budget]
        if not fits:
            return None
        cycles = functools.partial(_row_block_cycles, m, (mr, lanes), extents, elem,
                                   col_sweeps)
        blocks = min(fits, key=lambda b: (cycles(b), b))
        if cycles(blocks) >= cycles(None):
            return None
        knob = -(-tiles // blocks) * mr
    if not knob:
        return None
    mc = -(-knob // mr) * mr
    return mc if mc < rows else None


def _row_block_cycles(m: Machine, tile: tuple[int, int], extents: tuple[int, int, int],
                      elem: int, col_sweeps: int, blocks: int | None) -> float:
    """Predicted cycles on the busiest core of a register-tiled nest in ``blocks`` row
    blocks (None: none) for ``row_block``: the row tiles' multiply-adds at ``fma_units``
    vectors a cycle; with blocks, the other operand once per block from L3
    (``l3_bytes_per_cycle``), and, in the first round, from memory, every core streaming
    the whole of it at once (its share of ``memory_bytes_per_cycle``): what the first
    block's multiply-adds do not hide. Without blocks, the row operand from L3 once per
    column tile, and each core's part of the other operand from memory, beyond what all
    its multiply-adds hide."""
    (mr, lanes), (rows, cols, depth) = tile, extents
    cores = max(1, m.cores)
    tiles = -(-rows // mr)
    per_tile = mr * cols * depth / (lanes * m.fma_units)
    other = cols * depth * elem
    from_memory = other / (m.memory_bytes_per_cycle / cores)  # every core at once
    if blocks is None:
        fmas = tiles * per_tile / cores
        again = col_sweeps / cores * rows * depth * elem / m.l3_bytes_per_cycle
        return fmas + again + max(0.0, from_memory / cores - fmas)
    fmas = -(-tiles // blocks) * per_tile
    return (blocks // cores * (fmas + other / m.l3_bytes_per_cycle)
            + max(0.0, from_memory - fmas))


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
               rows_outer: bool = False, mc: int | None = None,
               panel_loops: tuple[str, ...] = ()) -> Schedule:
    """The GotoBLAS order; the small reductions ``inner`` (a convolution's ``kh, kw``) run
    inside the register tile too, so its accumulators stay in registers across them. With
    ``mc``, the rows are first cut in blocks of ``mc`` (``row_c``), and the tiles of a block
    run inside it: its operand panel stays in L2 while every column tile passes. The
    ``panel_loops`` run inside the reduction blocks, like row tiles."""
    mr, nr, kc = blocking
    names = {n: _parts(n) for n in (col, row, red)}
    out = schedule.split(col, nr, names[col])
    blocks = [f"{row}_c"] if mc else []
    if mc:
        out = out.split(row, mc, (blocks[0], f"{row}_m")).split(f"{row}_m", mr, names[row])
    else:
        out = out.split(row, mr, names[row])
    out = out.split(red, kc, names[red])
    others = [lp.name for lp in chain if lp.name not in (col, row, red, *inner, *panel_loops)]
    tiles = [names[row][0], names[col][0]] if rows_outer else [names[col][0], names[row][0]]
    order = [*others, names[red][0], *panel_loops, *blocks, *tiles, names[red][1], *inner,
             names[row][1], names[col][1]]
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
    ranks = [u.rank for r in s.reads if (u := index_use(r.read.indices, it)).rank is not None]
    return min(ranks, default=0)
