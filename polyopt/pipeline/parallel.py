"""The parallel loop of each nest (OpenMP), or why a nest runs on one thread, and split-K
for nests that reduce into one element."""

from __future__ import annotations

import contextlib
import math

from polyopt.costmodel.cost import Printing, core_lines, estimate, l2_fill_rate, vector_width
from polyopt.dtypes import DTYPES
from polyopt.errors import ScheduleError
from polyopt.pipeline.fusion import loop_free, nests
from polyopt.pipeline.knobs import DEFAULT_KNOBS, Knobs
from polyopt.pipeline.policy import CpuPolicy
from polyopt.poly.model import PolyStmt
from polyopt.schedules import transform as tf
from polyopt.schedules.marks import Tag
from polyopt.schedules.nest import UNKNOWN_TRIP, chain_of, trip
from polyopt.schedules.schedule import Schedule
from polyopt.schedules.tree import Leaf, Loop, Sequence, loops, raw_iterator


def parallelize(schedule: Schedule, policy: CpuPolicy,
                knobs: Knobs = DEFAULT_KNOBS) -> Schedule:
    """In each top-level nest that gains from a parallel region (``_one_thread``), run the
    outermost dependence-free loop with at least ``policy.parallel_trips``
    iterations in parallel; when the nest's outer loops have fewer (a batch of one), look
    inside the nests below them instead (else take the one with the most). The ``parallel``
    and ``split_k`` knobs come first where they apply (``_by_knobs``), at any size: they are
    a person's or the tuner's decision."""
    for top in nests(schedule.root):
        if any(Tag.PARALLEL in lp.tags for lp in loops(top)):
            continue  # the time tiler's wavefront (``timetile.py``) chose its parallel loop
        schedule, why = _by_knobs(schedule, top.name, policy, knobs)
        if not why:
            why = _one_thread(schedule, top, policy)
        if not why:
            schedule, why = _by_model(schedule, top.name, policy, knobs.split_k is not False)
        schedule = schedule.note(f"{top.name}: {why}")
    return schedule


def _by_model(schedule: Schedule, top: str, policy: CpuPolicy,
              split: bool) -> tuple[Schedule, str]:
    before = len(schedule.steps)
    schedule, shared = _parallelize_nest(schedule, top, policy)
    chosen = [st.args[0] for st in schedule.steps[before:]]
    if shared:
        return schedule, "; ".join(shared)
    if chosen:
        return schedule, (f"parallel {', '.join(chosen)}: the outermost dependence-free loop "
                          f"with {policy.parallel_trips}+ iterations")
    got = _split_k(schedule, top, policy) if split else None
    if got is None:
        return schedule, "no dependence-free loop: one thread" + (
            "" if split else " (split_k knob False)")
    return got, (f"split-K: parallel reduction {got.steps[-1].args[0]} (no loop of "
                 "independent iterations; one output element)")


def _by_knobs(schedule: Schedule, top: str, policy: CpuPolicy,
              knobs: Knobs) -> tuple[Schedule, str]:
    """The nest's parallel loop by the ``parallel`` knob, else split-K by the ``split_k``
    knob: (schedule, why), or an empty why when neither applies (a note says when one
    could not be honoured)."""
    if knobs.parallel is not None:
        lp = _named_loop(schedule, top, knobs.parallel)
        if lp is not None:
            try:
                out = schedule.parallel(lp)
                kind = "parallel reduction" if Tag.PARALLEL_REDUCTION in tf.find(
                    out.root, lp).tags else "parallel"
                return out, f"{kind} {lp}: the parallel knob"
            except ScheduleError as e:
                schedule = schedule.note(f"{top}: parallel knob {knobs.parallel}: "
                                         f"{str(e).splitlines()[0]}; the model's choice")
        else:
            schedule = schedule.note(f"{top}: parallel knob {knobs.parallel}: no such loop "
                                     "in this nest; the model's choice")
    if knobs.split_k:
        split = _split_k(schedule, top, policy, force=True)
        if split is not None:
            return split, (f"split-K: parallel reduction {split.steps[-1].args[0]}: the "
                           "split_k knob")
        schedule = schedule.note(f"{top}: split_k knob: no reduction loop splits here; the "
                                 "model's choice")
    return schedule, ""


def _named_loop(schedule: Schedule, top: str, want: str) -> str | None:
    """The outermost loop of nest ``top`` named ``want`` or ``want``_o, or over iterator
    ``want``."""
    for lp in loops(tf.find(schedule.root, top)):
        if lp.name in (want, f"{want}_o") or any(
                raw_iterator(lp.expr, s) == want for s in tf.stmts_of(lp)):
            return lp.name
    return None


def _split_k(schedule: Schedule, top: str, policy: CpuPolicy,
             force: bool = False) -> Schedule | None:
    """A nest that reduces into one element (a dot product, a whole sum) with no loop of
    independent iterations: its outermost loop with ``parallel_trips`` iterations runs as a
    parallel reduction (each thread sums a private copy; ``Schedule.parallel``). A single
    vectorized loop is first cut in ``parallel_trips`` strips of whole vectors. ``force``
    (the ``split_k`` knob): the outermost loop of the nest that carries the reduction, below
    loops of independent iterations too (a sum of a few long rows)."""
    if force:
        return _split_any(schedule, top, policy)
    chain = chain_of(tf.find(schedule.root, top))
    for lp in chain[:-1]:
        if trip(lp, schedule.poly.domain) >= policy.parallel_trips:
            return _reduction(schedule, lp.name)
    if len(chain) != 1:
        return None
    return _split_strips(schedule, chain[-1], policy)


def _split_any(schedule: Schedule, top: str, policy: CpuPolicy) -> Schedule | None:
    for lp in loops(tf.find(schedule.root, top)):  # outermost first
        if loop_free(schedule, lp):
            continue
        if trip(lp, schedule.poly.domain) >= policy.parallel_trips and (
                not _leaf_below(lp) or Tag.VECTORIZE not in lp.tags):
            return _reduction(schedule, lp.name)
        return _split_strips(schedule, lp, policy) if _leaf_below(lp) else None
    return None


def _reduction(schedule: Schedule, loop: str) -> Schedule | None:
    """``loop`` as a parallel reduction, None when it is not one."""
    with contextlib.suppress(ScheduleError):
        out = schedule.parallel(loop)
        if Tag.PARALLEL_REDUCTION in tf.find(out.root, loop).tags:
            return out
    return None


def _leaf_below(lp: Loop) -> bool:
    return isinstance(lp.child, Leaf)


def _split_strips(schedule: Schedule, inner: Loop, policy: CpuPolicy) -> Schedule | None:
    """A vectorized innermost reduction loop cut in ``parallel_trips`` strips of whole
    vectors, the strips' loop a parallel reduction."""
    stmts = tf.stmts_of(inner)
    least = policy.parallel_trips
    if len(stmts) != 1 or Tag.VECTORIZE not in inner.tags:
        return None
    s = schedule.poly.stmt(stmts[0])
    lanes = policy.lanes(DTYPES[schedule.poly.program.tensors[s.stmt.tensor].dtype]
                         .np.itemsize)
    n = trip(inner, schedule.poly.domain)
    strip = -(-n // (least * lanes)) * lanes
    if n >= UNKNOWN_TRIP or strip < policy.strip_min_vectors * lanes:
        return None
    outer, below = tf.split_names(inner.name)
    try:
        out = schedule.split(inner.name, strip, (outer, below))
        width, _ = vector_width(out.poly, out.root, tf.find(out.root, below),
                                policy.machine)
        out = out.vectorize(below, lanes=width)
        out = out.parallel(outer)
    except ScheduleError:
        return None
    return out if Tag.PARALLEL_REDUCTION in tf.find(out.root, outer).tags else None


def _one_thread(schedule: Schedule, top: Loop, policy: CpuPolicy) -> str:
    """Why nest ``top`` runs on one thread, or "" when a parallel region pays for its fork
    and join (``Machine.parallel_pays``) by the cost model's cycles on one core. A nest
    the model does not estimate (an unknown extent, more than ``model_statements``
    statements) counts a cycle per statement instance; one of unknown sizes runs in
    parallel. A nest whose instances pay even at the model's least cost of one (a byte's
    lane of a vector, each pipe busy) skips the estimate."""
    n = _instances(schedule, top)
    if n >= UNKNOWN_TRIP:
        return ""
    m = policy.machine
    if m.cores == 1:
        return "one thread: the machine model has one core"
    if m.parallel_pays(n / (m.vector_bytes * max(m.fma_units, m.loads_per_cycle))):
        # pays at a vector lane of bytes per pipe and cycle: no estimate (ms) needed, unless
        # the parallel loop would sit inside another and fork once per iteration of it
        return "" if loop_free(schedule, top) else _forks_cost(schedule, top, policy)
    got = None
    if len(tf.stmts_of(top)) <= policy.caps.model_statements:
        # the packed copies only: a zeroing the printer leaves out keeps the decision its
        # loops would get (its nest prints nothing either way)
        got = estimate(schedule.poly, top, m, parallel=lambda lp: False,
                       printed=Printing(frozenset(schedule.buffers)),
                       parallel_trips=policy.parallel_trips)
    cycles, basis = (got.cycles, "predicted") if got else (float(n), f"{n} instances")
    if m.parallel_pays(cycles):
        return _forks_cost(schedule, top, policy) if got else ""
    return (f"one thread: {cycles:.3g} cycles on one core ({basis}); "
            f"{m.cores} cores would save less than a fork and join "
            f"({m.fork_join_cycles:.3g} cycles)")


def _forks_cost(schedule: Schedule, top: Loop, policy: CpuPolicy) -> str:
    """Why nest ``top`` runs on one thread although the cores would save more than one
    fork and join, or "": the model predicts its parallel loop no faster, its forks (one
    per iteration of the loops outside it) costing more than the cores save, or the
    memory they share bounding it anyway (``cost.estimate``, which then prices it on one
    thread). A nest of more statements than the model takes runs in parallel."""
    if len(tf.stmts_of(top)) > policy.caps.model_statements or not any(
            loop_free(schedule, lp) for lp in loops(top)):
        return ""  # no estimate, or no parallel loop but split-K's (``_by_model``)
    got = estimate(schedule.poly, top, policy.machine,
                   parallel=lambda lp: loop_free(schedule, lp),
                   printed=Printing(frozenset(schedule.buffers)),
                   parallel_trips=policy.parallel_trips)
    if got is None or got.parallel is not None:
        return ""
    return (f"one thread: {got.cycles:.3g} cycles on one core (predicted); in parallel its "
            f"forks and joins, or the memory the cores share, would take what they save")


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


def _parallelize_nest(schedule: Schedule, top: str,
                      policy: CpuPolicy) -> tuple[Schedule, list[str]]:
    """``schedule`` with nest ``top``'s parallel loops, and the reasons of those that are
    not the outermost candidate (``_least_shared``)."""
    least = policy.parallel_trips
    node = tf.find(schedule.root, top)
    chain = chain_of(node)
    free = [lp for lp in chain if loop_free(schedule, lp)]
    trips = {lp.name: tf.trip_count(lp, schedule.poly.domain) for lp in free}
    many = [lp for lp in free if (trips[lp.name] or least) >= least]
    if many:
        lp, why = _least_shared(schedule, node, chain, many, policy)
        return schedule.parallel(lp.name), [why] if why else []
    below = chain[-1].child
    whys: list[str] = []
    if isinstance(below, Sequence):
        for name in [c.name for c in below.children if isinstance(c, Loop)]:
            schedule, inner = _parallelize_nest(schedule, name, policy)
            whys += inner
        return schedule, whys
    if free:
        return schedule.parallel(max(free, key=lambda lp: trips[lp.name] or 0).name), []
    return schedule, []


def _least_shared(schedule: Schedule, top: Loop, chain: list[Loop], candidates: list[Loop],
                  policy: CpuPolicy) -> tuple[Loop, str]:
    """Of the loops of ``top``'s ``chain`` that may run in parallel (outermost first), the
    outermost, unless a core's data then outgrow half its L2 and an inner loop leaves each
    core fewer lines to read (``cost.core_lines``) by more cycles from the level behind L2
    than its extra forks cost: a channel-block loop gives every core the whole input of a
    1x1 convolution (ResNet-50's 256x56x56: 0.71 ms, its rows in parallel 0.46 ms). The
    reason, or "" for the outermost."""
    m, poly = policy.machine, schedule.poly
    shares = core_lines(poly, top, candidates, m)
    base = shares[0]
    if base is None or base * m.line_bytes <= m.l2_bytes // 2:
        return candidates[0], ""

    def forks(lp: Loop) -> int:  # one region per iteration of the loops above it
        return math.prod(tf.trip_count(o, poly.domain) or 1 for o in chain[:chain.index(lp)])

    first, rate = candidates[0], l2_fill_rate(m)
    best, fewest, why = first, base, ""
    for lp, lines in zip(candidates[1:], shares[1:], strict=True):
        if lines is None or lines >= fewest:
            continue
        n = forks(lp)
        if (base - lines) * m.line_bytes / rate > (n - forks(first)) * m.fork_join_cycles:
            best, fewest = lp, lines
            why = (f"parallel {lp.name}, not {first.name}: a core reads "
                   f"{lines * m.line_bytes / 2**20:.2g} MiB against "
                   f"{base * m.line_bytes / 2**20:.2g} MiB ({n} forks)")
    return best, why
