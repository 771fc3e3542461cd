"""Diamond tiles of a stencil band, with concurrent start (Bandishti, Pananilath and
Bondhugula, SC'12; Pluto's ``--partlbtile``): ``tile_shape="diamond"`` in the time tiling
of ``pipeline/timetile.py``.

The band comes from isl's scheduler skewed in time: ``(t, x, y, ..)`` with ``x = s*t + i``
(``s`` = 2 for jacobi, whose steps hold two sweeps). Parallelogram tiles of it run as a
wavefront that starts with one tile and widens (pipelined start). Diamond tiles cut the
``(t, x)`` plane along two faces instead, ``x`` and ``a*t - x + o_S``: their sum ``a*t + o_S``
is the time, so the tiles of a wavefront of tiles lie side by side along the start face
``t = 0`` and all tiles of the first row start together. ``a`` is the smallest scale that
keeps every dependence distance along the second face >= 0, with a constant ``o_S`` per
statement (``faces``): jacobi's sweep ``A(t, i)`` reads ``B(t, i+1)`` of the same step, so
A's face leans 2 ahead of B's, and then ``a = 4 = 2s``. The other space loops ``y`` keep
their skew and get ordinary tiles (concurrent start in one dimension, as Pluto's
recommended ``--partlbtile``); a long row (jacobi-2d's ``j``) is in the band, fused from
its statements' loops, when ``CpuPolicy.time_tile`` cuts it, as for parallelogram tiles.

Built with checked verbs only:

1. ``hyperplanes``: the band becomes ``(x, a*t - x + o, y.., t, x, y..)``: the faces, then
   the band's own loops to scan a tile;
2. ``tile`` the faces (``x`` and the second face by the same size, ``y`` by the space size);
3. ``hyperplanes`` again drops the faces' point loops (``face mod size``), which the
   band's own loops determine: a tile runs in the band's order (``t``, then the skewed
   space loops), so its innermost loops stay stride 1 and vectorize;
4. ``skew`` + ``reorder``: the wavefront ``w`` = sum of the two face tiles outermost, the
   diamonds of one row (``x``'s tile loop) ``parallel`` below it, the ``y`` tiles inside.
"""

from __future__ import annotations

from dataclasses import dataclass

import islpy as isl

from polyopt.errors import ScheduleError
from polyopt.ir import fresh_name
from polyopt.schedules.schedule import Schedule
from polyopt.schedules.tree import Loop, filter_domain, loops, stmts_of

# The largest face scale ``a`` tried: 2s for a stencil of slope s; beyond, the band is not
# a stencil of the kind diamond tiles serve.
MAX_SCALE = 32


@dataclass(frozen=True)
class Faces:
    """The second face of a band's diamonds, ``scale * t - x + offset[statement]``."""

    scale: int
    offsets: tuple[tuple[str, int], ...]


def faces(schedule: Schedule, band: list[Loop]) -> Faces | str:
    """The smallest scale with per-statement offsets that keep every dependence between
    the band's statements at a distance >= 0 along ``scale * t - x + o`` (a system of
    difference constraints ``o_T - o_S >= max(dx - scale*dt)``, solved by longest paths);
    or why there is none."""
    deltas = _deltas(schedule, band)
    if isinstance(deltas, str):
        return deltas
    stmts = stmts_of(band[0])
    for scale in range(1, MAX_SCALE + 1):
        bounds = {pair: _max(d, scale) for pair, d in deltas.items()}
        if any(b is None for b in bounds.values()):
            return f"a dependence distance along {band[1].name} grows without bound"
        offsets = _longest_paths(stmts, bounds)  # type: ignore[arg-type]
        if offsets is not None:
            low = min(offsets.values())
            return Faces(scale, tuple(sorted((s, o - low) for s, o in offsets.items())))
    return (f"no face {band[0].name} * a - {band[1].name} with a <= {MAX_SCALE} keeps the "
            f"dependences' distances >= 0: {_culprit(deltas)}")


def _culprit(deltas: dict[tuple[str, str], isl.Set]) -> str:
    """A dependence no scale helps: one of a statement on itself within a time step,
    forward along the space loop (the face goes backward along it), with a distance."""
    for (src, dst), dist in deltas.items():
        if src != dst:
            continue
        same = dist.fix_val(isl.dim_type.set, 0, isl.Val(0))
        ahead = same.lower_bound_val(isl.dim_type.set, 1, isl.Val(1))
        if not ahead.is_empty():
            point = ahead.sample_point()
            dx = point.get_coordinate_val(isl.dim_type.set, 1).to_python()
            return (f"{src} depends on itself {dx} further along the space loop in the "
                    f"same step (distance (0, {dx}))")
    return f"the statements' dependences ask for a scale above {MAX_SCALE}"


def _deltas(schedule: Schedule, band: list[Loop]) -> dict[tuple[str, str], isl.Set] | str:
    """The dependence distances in the band's ``(t, x)`` values, per pair of its
    statements; why not, when ``x`` is not >= 0 along every one (no permutable band)."""
    domain = schedule.poly.domain
    stmts = stmts_of(band[0])
    times = {s: _band_map(band[:2], filter_domain(domain, (s,))) for s in stmts}
    out: dict[tuple[str, str], isl.Set] = {}
    for src in stmts:
        for dst in stmts:
            dep = schedule.deps.all.intersect_domain(filter_domain(domain, (src,)))
            dep = dep.intersect_range(filter_domain(domain, (dst,)))
            if dep.is_empty():
                continue
            rel = dep.apply_domain(times[src]).apply_range(times[dst])
            dist = isl.Set.from_union_set(rel.deltas())
            least = dist.dim_min_val(1)
            if not least.is_int() or least.to_python() < 0:
                return (f"the band is not permutable: a dependence from {src} to {dst} "
                        f"goes back along {band[1].name} (distance {least})")
            out[(src, dst)] = dist
    return out


def _band_map(band: list[Loop], within: isl.UnionSet) -> isl.UnionMap:
    out = isl.UnionMap.from_union_pw_aff(band[0].expr)
    for lp in band[1:]:
        out = out.flat_range_product(isl.UnionMap.from_union_pw_aff(lp.expr))
    return out.intersect_domain(within)


def _max(dist: isl.Set, scale: int) -> int | None:
    """The largest ``dx - scale * dt`` over the distances ``dist``; None if unbounded."""
    aff = isl.Aff(f"{{ [dt, dx] -> [(dx - {scale}dt)] }}", context=dist.get_ctx())
    aff = aff.align_params(dist.get_space())
    top = dist.max_val(aff)
    return int(top.to_python()) if top.is_int() else None


def _longest_paths(stmts: tuple[str, ...],
                   bounds: dict[tuple[str, str], int]) -> dict[str, int] | None:
    """Offsets with ``o[dst] - o[src] >= bounds[src, dst]``; None when a cycle asks more
    than it gives (Bellman-Ford)."""
    offsets = dict.fromkeys(stmts, 0)
    for _ in range(len(stmts) + 1):
        moved = False
        for (src, dst), b in bounds.items():
            if offsets[dst] < offsets[src] + b:
                offsets[dst] = offsets[src] + b
                moved = True
        if not moved:
            return offsets
    return None


def diamond_tile(schedule: Schedule, band: list[Loop], widths: list[int], sizes_why: str,
                 openmp: bool) -> tuple[Schedule, str, str] | str:
    """The band diamond-tiled (module docstring), the two faces and the other space loops
    ``widths`` wide, with the names of its innermost point loop and the one above (to
    distribute and vectorize); or why not (the caller builds parallelogram tiles then)."""
    found = faces(schedule, band)
    if isinstance(found, str):
        return f"{band[0].name}: tile_shape diamond refused: {found}; parallelogram tiles"
    names = [lp.name for lp in band]
    taken = {lp.name for lp in loops(schedule.root)}
    n = len(band)
    plus, minus = fresh_name(f"{names[1]}_p", taken), fresh_name(f"{names[1]}_m", taken)
    rest = [fresh_name(f"{x}_f", taken) for x in names[2:]]
    rows = [_unit(n, 1), [found.scale, -1] + [0] * (n - 2)]
    rows += [_unit(n, d) for d in range(2, n)] + [_unit(n, d) for d in range(n)]
    offsets = {s: (0, o) + (0,) * (2 * n - 2) for s, o in found.offsets if o}
    face_loops = [plus, minus, *rest]
    tiles = [fresh_name(f"{names[1]}_d", taken), fresh_name("w", taken),
             *(fresh_name(f"{x}_o", taken) for x in names[2:])]
    points = [fresh_name(f"{f}_i", taken) for f in face_loops]
    try:
        out = schedule.hyperplanes(names, rows, names=[*face_loops, *names],
                                   offsets=offsets or None)
        out = out.tile(face_loops, tuple(widths), names=[list(p) for p in zip(tiles, points,
                                                                      strict=True)])
        out = out.hyperplanes([*points, *names], [_unit(2 * n, d) for d in range(n, 2 * n)],
                              names=names)
        out = out.skew(tiles[0], tiles[1], 1).reorder(tiles[1], tiles[0])
    except ScheduleError as e:
        return (f"{names[0]}: tile_shape diamond refused: {str(e).splitlines()[0]}; "
                f"parallelogram tiles")
    shifted = ", ".join(f"{s} {o:+d}" for s, o in found.offsets if o)
    out = out.note(
        f"{names[0]}: diamond tiles (concurrent start), faces {names[1]} and "
        f"{found.scale}*{names[0]} - {names[1]}{f' (offsets {shifted})' if shifted else ''}"
        f", {widths[0]} wide (a tile spans about {max(1, 2 * widths[0] // found.scale)} steps)"
        f"{''.join(f', {x} tiled {w}' for x, w in zip(names[2:], widths[2:], strict=True))}"
        f"; {sizes_why}")
    if openmp:
        out = _parallel_row(out, tiles[1], tiles[0])
    inner = names[-1]
    return out, inner, names[-2]


def _unit(n: int, d: int) -> list[int]:
    return [1 if k == d else 0 for k in range(n)]


def _parallel_row(schedule: Schedule, wave: str, row: str) -> Schedule:
    """Run the diamonds of each wavefront (``row`` below ``wave``) in parallel; the note
    counts those of the first wavefront, which all start at once."""
    try:
        out = schedule.parallel(row)
    except ScheduleError as e:  # not expected: the wavefront orders every dependence
        return schedule.note(f"{wave}: wavefront of diamonds: one thread: "
                             f"{str(e).splitlines()[0]}")
    first = _first_front(schedule, wave, row)
    return out.note(f"{wave}: wavefront of diamonds (outermost), parallel {row} below it, "
                    f"{first} tiles in the first wavefront start together "
                    f"(OpenMP's barrier per wavefront)")


def _first_front(schedule: Schedule, wave: str, row: str) -> str:
    """How many values ``row`` takes at the first value of ``wave``."""
    both = isl.UnionMap.from_union_pw_aff(schedule.loop(wave).expr).flat_range_product(
        isl.UnionMap.from_union_pw_aff(schedule.loop(row).expr))
    values = isl.Set.from_union_set(both.intersect_domain(schedule.poly.domain).range())
    low = values.dim_min_val(0)
    if not low.is_int():
        return "the"
    first = values.fix_val(isl.dim_type.set, 0, low).project_out(isl.dim_type.set, 0, 1)
    count = first.count_val()
    return str(count.to_python()) if count.is_int() else "the"
