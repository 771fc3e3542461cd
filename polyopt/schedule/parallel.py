"""The parallel loop of each nest (OpenMP), or why a nest runs on one thread, and split-K
for nests that reduce into one element."""

from __future__ import annotations

import contextlib
import math

from polyopt.dtypes import DTYPES
from polyopt.errors import ScheduleError
from polyopt.poly.model import PolyStmt
from polyopt.schedule import transform as tf
from polyopt.schedule.fusion import loop_free, nests
from polyopt.schedule.marks import Tag
from polyopt.schedule.nest import UNKNOWN_TRIP, chain_of, trip
from polyopt.schedule.policy import CpuPolicy
from polyopt.schedule.schedule import Schedule
from polyopt.schedule.tree import Loop, Sequence


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
        if trip(lp, schedule.poly.domain) >= least:
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
    n = trip(inner, schedule.poly.domain)
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
