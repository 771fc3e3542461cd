"""Time tiling of stencil bands in the CPU pipeline (Pluto's approach, parallelogram tiles).

A time-iterated stencil (jacobi, heat) comes from isl's scheduler as one permutable band
skewed in time: ``for t: for i = 2t + i: for j = 2t + j``. No loop of it is free of
dependences (each step reads the previous one, and the skew makes the space loops carry the
reads of neighbours), so plain tiling and parallelizing find nothing. Skewed, the band is
permutable: every dependence distance is >= 0 along each of its loops, so parallelogram
tiles of it are legal, and the tiles themselves form a permutable band whose dependences
have distances 0 or 1. The pipeline here

1. gathers the band: the loops above the statements, fusing sibling sub-nests level by
   level (isl's ``fusion="min"`` schedule gives each statement of a step its own nest under
   the time loop) down to the innermost level, which stays one loop per statement;
2. tiles every loop of the band (``Schedule.tile``, checked against the dependences): the
   tile sizes are ``CpuPolicy.time_tile``'s (a tile's working set against the L2 cache);
3. skews the first two tile loops into a wavefront (``skew(t_o, w)``: ``w = t_o + i_o``)
   and moves it outermost: the tiles of one wavefront depend only on earlier wavefronts, so
   ``t_o`` below it is free of dependences and the parallel stage runs it on the threads;
4. vectorizes each statement's innermost loop where it carries no dependence (it is
   stride 1 when that loop is the stride-1 index plus a multiple of the time: the skew
   adds ``2t``, not a multiple of ``j``).

Each decision is a note on the schedule. ``tile_shape="diamond"`` cuts the band's
``(t, x)`` plane into diamonds instead, whose wavefronts start with a whole row of tiles
(concurrent start; ``pipeline/diamond.py``: the faces ``x`` and ``a*t - x`` through the
``hyperplanes`` verb, the remaining space loops tiled as above); when it cannot (no scale
``a`` keeps the dependences' distances >= 0), a note says why and the parallelogram tiles
above are built.
"""

from __future__ import annotations

from dataclasses import replace

import islpy as isl

from polyopt.costmodel.cost import scalar_reason, vector_width
from polyopt.costmodel.strides import UNIT, accesses, step_map, stride
from polyopt.dtypes import DTYPES
from polyopt.errors import ScheduleError
from polyopt.ir import fresh_name
from polyopt.pipeline.auto import compute_schedule
from polyopt.pipeline.diamond import diamond_tile
from polyopt.pipeline.fusion import loop_free, nests
from polyopt.pipeline.knobs import DEFAULT_KNOBS, Knobs
from polyopt.pipeline.policy import CpuPolicy, TimeTile
from polyopt.schedules import transform as tf
from polyopt.schedules.nest import chain_of, trip
from polyopt.schedules.schedule import Schedule
from polyopt.schedules.tree import Leaf, Loop, Sequence, loops, pieces


def time_tile(schedule: Schedule, top: str, policy: CpuPolicy,
              knobs: Knobs = DEFAULT_KNOBS, *, openmp: bool = True) -> tuple[Schedule, bool]:
    """The nest at loop ``top`` time-tiled (module docstring) and True; or ``schedule`` and
    False when it is not a stencil band (``stencil_band``), with a note when its band
    takes no parallelogram tile legally (the ordinary pipeline then takes the nest)."""
    found = stencil_band(schedule, top, knobs)
    if found is None:
        return schedule, False
    out = _tile_band(*found, policy, knobs, openmp)
    if isinstance(out, str):
        return schedule.note(out), False
    return out, True


def stencil_band(schedule: Schedule, top: str,
                 knobs: Knobs = DEFAULT_KNOBS) -> tuple[Schedule, list[Loop]] | None:
    """The band of the nest at loop ``top`` to time-tile, with the schedule whose sub-nests
    were fused to form it; None when the knobs turn time tiling off, or for a def without
    recurrences, fewer than two loops above the innermost level, a statement that
    accumulates (a reduction), or a loop of the band free of dependences (the ordinary
    pipeline parallelizes that one)."""
    if knobs.time_tile == 0 or knobs.tile_shape == "none":
        return None
    if not schedule.poly.program.value_semantics:
        return None  # no recurrence: a nest whose loops all carry dependences reduces
    lp = tf.find(schedule.root, top)
    if isinstance(lp.child, Leaf) or loop_free(schedule, lp):
        return None
    gathered, chain = _gather(schedule, top, deep=False)
    if gathered is not None and len(_band(chain)) < 2:
        gathered, chain = _gather(schedule, top, deep=True)
    if gathered is None:
        return None
    band = _band(chain)
    if len(band) < 2 or any(gathered.poly.stmt(s).accumulates for s in tf.stmts_of(band[0])):
        return None  # a reduction (lu's, cholesky's): split-K or the order model serve it
    if any(loop_free(gathered, lp) for lp in band):
        return None
    return gathered, band


def stencil_base(schedule: Schedule, knobs: Knobs = DEFAULT_KNOBS) -> Schedule:
    """isl's ``min`` fusion schedule in place of its ``smart`` one when that has a stencil
    band holding statements that read none of the band's tensors (the border copies of
    kernels/stencil.tc):
    their guards then run in the band's innermost loop, which cannot vectorize (jacobi-2d
    at N=3000, T=60: 9.4 s against 2.2 s, BENCHMARKS.md). Under ``min`` fusion the copies
    are nests of their own and the stencil's statements sub-nests that ``stencil_band``
    fuses down to per-statement vector loops. The schedule's ``fusion`` says ``min``, so
    its steps replay on the base they were made on."""
    if schedule.base != "isl" or schedule.fusion != "smart" or schedule.steps or \
            not schedule.poly.program.value_semantics:
        return schedule
    for top in nests(schedule.root):
        found = stencil_band(schedule, top.name, knobs)
        if found is None:
            continue
        stmts = [schedule.poly.stmt(s) for s in tf.stmts_of(found[1][0])]
        written = {s.stmt.tensor for s in stmts}
        copies = [s.name for s in stmts if not any(r.read.tensor in written for r in s.reads)]
        if copies:
            other = replace(compute_schedule(schedule.poly, schedule.deps, fusion="min"),
                            notes=schedule.notes)
            return other.note(f"{top.name}: isl's min fusion, not smart: smart put "
                              f"{len(copies)} statements that read none of the band's "
                              f"tensors (copies of inputs: {', '.join(copies[:4])}...) into "
                              "the stencil's band, whose innermost loop then runs their "
                              "guards and does not vectorize")
    return schedule


def _gather(schedule: Schedule, top: str, deep: bool) -> tuple[Schedule | None, list[Loop]]:
    """The chain of loops from ``top`` after fusing sibling sub-nests below it level by
    level (isl's ``min`` fusion gives each statement of a time step its own nest under the
    time loop), down to the level of loops right above statements, which stays one loop
    per statement unless ``deep`` (then it fuses too). None when a fusion is illegal."""
    out = schedule
    while True:
        chain = chain_of(tf.find(out.root, top))
        below = chain[-1].child
        kids = below.children if isinstance(below, Sequence) else (below,)
        if not all(isinstance(k, Loop) and (deep or not isinstance(k.child, Leaf))
                   for k in kids):
            return out, chain
        try:
            out = out.fuse(*[k.name for k in kids if isinstance(k, Loop)])
        except ScheduleError:
            return (out, chain) if out is not schedule else (None, [])

def _band(chain: list[Loop]) -> list[Loop]:
    """The loops to tile: the whole chain above per-statement loops; above statements
    alone (isl's ``smart`` fusion puts all in one leaf), the chain without its innermost
    loop, which stays whole for the vector unit, when that leaves a time and a space loop."""
    below = chain[-1].child
    kids = below.children if isinstance(below, Sequence) else (below,)
    if all(isinstance(k, Leaf) for k in kids) and len(chain) >= 3:
        return chain[:-1]
    return chain

def _tile_band(schedule: Schedule, band: list[Loop], policy: CpuPolicy,
               knobs: Knobs, openmp: bool) -> Schedule | str:
    """The band tiled, or why it cannot be."""
    tile = _sizes(schedule, band, policy, knobs)
    if tile.row:
        rows, chain = _gather(schedule, band[0].name, deep=True)
        if rows is None or len(chain) != len(band) + 1:
            tile = replace(tile, row=0, why=f"{tile.why}; the row stays whole: its "
                           "statements' row loops do not fuse")
        else:
            schedule, band = rows, chain
    names = [lp.name for lp in band]
    sizes = [tile.height] + [tile.width] * (len(band) - 1)
    if tile.row:
        sizes[-1] = tile.row
    if knobs.tile_shape == "diamond":
        built = diamond_tile(schedule, band, [sizes[1], *sizes[1:]], tile.why, openmp)
        if not isinstance(built, str):
            out, above = _distribute_points(*built)
            return _vectorize_inner(out, above, policy)
        schedule = schedule.note(built)  # why not: parallelogram tiles instead
    taken = {lp.name for lp in loops(schedule.root)} - set(names)
    labels = [[fresh_name(f"{n}_o", taken), fresh_name(f"{n}_i", taken)] for n in names]
    wave = labels[1][0] = fresh_name("w", taken)  # the space tile loop, skewed into it
    try:
        tiled = schedule.tile(tuple(names), tuple(sizes), names=labels)
    except ScheduleError as e:
        return f"{names[0]}: no time tiling: {str(e).splitlines()[0]}"
    why = (f"{names[0]}: time tiled {' x '.join(map(str, sizes))} (parallelogram, "
           f"loops {', '.join(names)}): no loop of the band is dependence-free; {tile.why}")
    out = tiled.skew(labels[0][0], wave, 1).reorder(wave, labels[0][0])
    out = out.note(why)
    if openmp:
        out = _parallel_wavefront(out, wave, labels[0][0], names[1])
    out, above = _distribute_points(out, labels[-1][1], labels[-2][1])
    return _vectorize_inner(out, above, policy)

def _sizes(schedule: Schedule, band: list[Loop], policy: CpuPolicy, knobs: Knobs) -> TimeTile:
    """The model's tile (``CpuPolicy.time_tile``), with the knobs' sizes in its place."""
    program = schedule.poly.program
    stmts = [schedule.poly.stmt(s) for s in tf.stmts_of(band[-1])]
    written = {s.stmt.tensor for s in stmts}
    elem = max(DTYPES[program.tensors[t].dtype].np.itemsize for t in written)
    row = max((trip(lp, schedule.poly.domain) for lp in _innermost(band[-1])), default=1)
    # every written plane once, and once more for what a step reads of the one before
    tile = policy.time_tile((len(written) + 1) * elem, len(band) - 1, _slope(band),
                            trip(band[0], schedule.poly.domain), row, elem)
    given = {"height": knobs.time_tile, "width": knobs.space_tile, "row": knobs.row_tile}
    mine = {k: v for k, v in given.items() if v is not None}
    if not mine:
        return tile
    return replace(tile, **mine, why=f"sizes {', '.join(f'{k} {v}' for k, v in mine.items())} "
                   f"from the knobs; the model's: {tile.height} x {tile.width}, row "
                   f"{tile.row or 'whole'}")

def _parallel_wavefront(schedule: Schedule, wave: str, tiles: str, space: str) -> Schedule:
    """Run the time tiles of each wavefront in parallel: ``tiles`` is dependence-free below
    the wavefront loop ``wave`` (the parallel stage leaves this nest alone)."""
    n = tf.trip_count(tf.find(schedule.root, tiles), schedule.poly.domain)
    if n is not None and n < 2:
        return schedule.note(f"{wave}: wavefront of tiles ({tiles} + {space}_o): one thread, "
                             f"{tiles} has one tile")
    try:
        out = schedule.parallel(tiles)
    except ScheduleError as e:  # not expected: the wavefront orders every dependence
        return schedule.note(f"{wave}: wavefront of tiles: one thread: {str(e).splitlines()[0]}")
    return out.note(
        f"{wave}: wavefront of tiles ({tiles} + {space}_o, outermost): parallel {tiles}, "
        f"dependence-free below it ({n or 'unknown'} tiles; OpenMP's barrier per wavefront)")

def _distribute_points(schedule: Schedule, inner: str, outer: str) -> tuple[Schedule, str]:
    """A point loop ``inner`` right above several statements: one loop per statement
    instead (when legal), so that each can vectorize. Returns the schedule and the loop
    whose innermost loops below are the candidates to vectorize (``outer`` once
    distributed)."""
    lp = tf.find(schedule.root, inner)
    if not isinstance(lp.child, Sequence) or not all(
            isinstance(k, Leaf) for k in lp.child.children):
        return schedule, inner
    try:
        out = schedule.distribute(inner)
    except ScheduleError as e:
        return schedule.note(f"{inner}: not distributed over its statements: "
                             f"{str(e).splitlines()[0]}"), inner
    return out.note(f"{inner}: distributed, one loop per statement (to vectorize each)"), \
        outer

def _vectorize_inner(schedule: Schedule, inner: str, policy: CpuPolicy) -> Schedule:
    """Vectorize the innermost loop of each nest right below loop ``inner``."""
    below = tf.find(schedule.root, inner).child
    kids = below.children if isinstance(below, Sequence) else (below,)
    leaves = [k for k in kids if isinstance(k, Loop)]
    if not leaves:
        return schedule.note(f"{inner}: the band's innermost loop: not vectorized (its "
                             "statements share it, and it carries their dependence)")
    for k in leaves:
        name = chain_of(k)[-1].name
        scalar = scalar_reason(schedule.poly, chain_of(k)[-1])
        if scalar:
            schedule = schedule.note(f"{name}: not vectorized: {scalar}")
            continue
        lanes, why = vector_width(schedule.poly, schedule.root, chain_of(k)[-1],
                                  policy.machine)
        try:
            schedule = schedule.vectorize(name, lanes=lanes).note(
                f"{name}: vector loop: a statement's innermost loop below the time tiles, "
                f"dependence-free; {_stride(schedule, chain_of(k)[-1])}; {why}")
        except ScheduleError as e:
            schedule = schedule.note(f"{name}: not vectorized: {str(e).splitlines()[0]}")
    return schedule

def _stride(schedule: Schedule, lp: Loop) -> str:
    """How the vector loop ``lp`` moves its statements' targets (``strides.stride``): the
    skew adds a multiple of ``t``, not of ``j``, so the loop still walks ``j`` one by one."""
    poly = schedule.poly
    path = [n for n in tf.path_to(schedule.root, lp) if isinstance(n, Loop)]
    out = []
    for name in tf.stmts_of(lp):
        step = step_map(path, lp, poly.stmt(name))
        if step is None:
            continue
        write = next(a for a in accesses(poly, name) if a.write)
        moved = stride(poly, write, step)
        out.append(f"{name} stride {'1' if moved.kind == UNIT else moved.kind}")
    return ", ".join(out) or "stride unknown"


def _slope(band: list[Loop]) -> int:
    """How far the band's second loop moves per time step: the largest ratio of its
    coefficient of a statement's time iterator to the time loop's (2 for jacobi's
    ``2t + i``)."""
    time = {pa.get_domain_space().get_tuple_name(isl.dim_type.set): pa
            for pa in pieces(band[0].expr)}
    out = 1
    for pa in pieces(band[1].expr):
        tpa = time.get(pa.get_domain_space().get_tuple_name(isl.dim_type.set))
        if tpa is None or tpa.n_piece() != 1 or pa.n_piece() != 1:
            continue
        out = max(out, _ratio(pa.get_pieces()[0][1], tpa.get_pieces()[0][1]))
    return out

def _ratio(aff: isl.Aff, taff: isl.Aff) -> int:
    """The coefficient of the time iterator (the first one ``taff`` uses) in ``aff``, over
    its coefficient in ``taff``."""
    for d in range(taff.dim(isl.dim_type.in_)):
        c = taff.get_coefficient_val(isl.dim_type.in_, d)
        if not c.is_zero():
            a = aff.get_coefficient_val(isl.dim_type.in_, d)
            return max(1, abs(int(a.to_python()) // int(c.to_python())))
    return 1

def _innermost(lp: Loop) -> list[Loop]:
    below = lp.child
    kids = below.children if isinstance(below, Sequence) else (below,)
    return [chain_of(k)[-1] for k in kids if isinstance(k, Loop)]
