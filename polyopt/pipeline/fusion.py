"""Fusion of loop nests in the CPU pipeline: nests over the same values share their outer
loops, so what one writes is still in cache when the next reads it.

Both passes fuse only along loops that stay free of dependences, so the parallel loop the
pipeline picks afterwards is still there.
"""

from __future__ import annotations

from itertools import pairwise

import islpy as isl

from polyopt import ir
from polyopt.errors import ScheduleError
from polyopt.poly.model import PolyStmt
from polyopt.schedules import transform as tf
from polyopt.schedules.legality import carried
from polyopt.schedules.nest import chain_of
from polyopt.schedules.schedule import Schedule
from polyopt.schedules.tree import Loop, Node, Sequence, loops


def nests(root: Node) -> list[Loop]:
    kids = root.children if isinstance(root, Sequence) else (root,)
    return [k for k in kids if isinstance(k, Loop)]


def fuse_outer(schedule: Schedule) -> Schedule:
    """Fuse consecutive nests over the same range at their outer loop, where that is legal
    and the fused loop stays parallel (a row of softmax is then read once from memory).
    Contractions keep their own nests: they become GotoBLAS nests.

    Each run of such nests is fused by one step when that is legal and parallel, else by
    the longest prefix for which it is (fusing nests one at a time cost a legality check
    of the whole schedule per nest: 70 s for 160 independent statements)."""
    at = 0
    while True:
        tops = nests(schedule.root)
        if at >= len(tops) - 1:
            return schedule
        run = _run(schedule, tops, at)
        if len(run) > 1:
            schedule = _fuse_prefix(schedule, run)
        at += 1  # past the nest at ``at``, fused or not


def _run(schedule: Schedule, tops: list[Loop], at: int) -> list[Loop]:
    """The nests from ``tops[at]`` on that might fuse with it (just it, if none)."""
    first = tops[at]
    if tf.trip_count(first, schedule.poly.domain) == 1 or not _fusable(schedule, first):
        return [first]  # fusing a loop of one iteration gains no locality
    run = [first]
    for b in tops[at + 1:]:
        if not (_fusable(schedule, b) and _same_range(schedule, first, b)):
            break
        run.append(b)
    return run


def _fuse_prefix(schedule: Schedule, run: list[Loop]) -> Schedule:
    """``schedule`` with the longest prefix of ``run`` that fuses legally into a parallel
    loop fused. A prefix of a run that fuses does too (its loop carries fewer dependences,
    it reorders fewer instances): bisect."""
    good, bad = 1, len(run) + 1
    best = schedule
    while bad - good > 1:
        n = len(run) if bad == len(run) + 1 and good == 1 else (good + bad) // 2
        candidate = _fused(schedule, run[:n])
        if candidate is None:
            bad = n
        else:
            good, best = n, candidate
    return best


def _fused(schedule: Schedule, run: list[Loop]) -> Schedule | None:
    try:
        candidate = schedule.fuse(*(lp.name for lp in run))
    except ScheduleError:
        return None
    return candidate if loop_free(candidate, tf.find(candidate.root, run[0].name)) else None


def _fusable(schedule: Schedule, top: Loop) -> bool:
    return not any(is_contraction(schedule.poly.stmt(s)) for s in tf.stmts_of(top))


def _same_range(schedule: Schedule, a: Loop, b: Loop) -> bool:
    dom = schedule.poly.domain
    program = schedule.poly.program
    # Compared where every size is positive: an empty tensor makes some nests vanish.
    positive = " and ".join(f"{n} > 0" for n in program.sizes) or "true"
    params = isl.Set(f"{program.params} -> {{ : {positive} }}")
    ranges = [isl.UnionMap.from_union_pw_aff(lp.expr.intersect_domain_union_set(dom)).range()
              .intersect_params(params) for lp in (a, b)]
    return bool(ranges[0].is_equal(ranges[1]))


def fuse_tiled(schedule: Schedule) -> Schedule:
    """After register tiling, fuse each contraction's nest with the nests next to it (a
    blocked output's zeroing before it, its copy back after it) along the outer loops they
    share that carry no dependence: a row of output blocks is then zeroed, computed and
    copied back while it is in L1, instead of in three passes over the whole output."""
    fused = True
    while fused:
        fused = False
        for a, b in pairwise(nests(schedule.root)):
            if not (_has_contraction(schedule, a) or _has_contraction(schedule, b)):
                continue
            candidate = _fuse_levels(schedule, a.name, b.name)
            if candidate is schedule:
                candidate = _fuse_sunk(schedule, a, b)
            if candidate is not schedule:
                schedule, fused = candidate, True
                break
    return schedule


def fuse_inner(schedule: Schedule) -> Schedule:
    """After ``fuse_tiled``, inside each loop, fuse the runs of consecutive nests without a
    contraction over the same range as ``fuse_outer`` fuses the root's, but never innermost
    loops: a convolution's bias, residual add and activation, which ``fuse_tiled`` leaves
    beside it in the image's loop, then read each channel's row while it is in L1 instead of
    in one pass each over the image (ResNet-50's 1x1 64->256 layer with its residual at
    batch 8: 4.37 ms against 4.89 ms, the same run). Each statement keeps a vector loop of
    its own: GCC vectorizes no loop over the five arrays of five transcendental functions
    inside a parallel one (``tests/codegen/test_vector_math.py``)."""
    failed: set[tuple[str, ...]] = set()  # runs that fused no prefix: not checked again
    while True:
        parents = [lp for lp in loops(schedule.root) if isinstance(lp.child, Sequence)]
        fused = next((f for lp in parents if (f := _fuse_first_run(
            schedule, nests(lp.child), failed)) is not None), None)
        if fused is None:
            return schedule
        schedule = fused  # the tree changed: walk it again


def _fuse_first_run(schedule: Schedule, kids: list[Loop],
                    failed: set[tuple[str, ...]]) -> Schedule | None:
    """``schedule`` with the first run of ``kids`` (sibling nests) that fuses fused, or None
    when none does; a run that does not is added to ``failed``, which are skipped (their
    statements' dependences do not change as other loops fuse)."""
    for at in range(len(kids) - 1):
        run = _outer_run(_run(schedule, kids, at))
        names = tuple(lp.name for lp in run)
        if len(run) > 1 and names not in failed:
            fused = _fuse_prefix(schedule, run)
            if fused is not schedule:
                return fused
            failed.add(names)
    return None


def _outer_run(run: list[Loop]) -> list[Loop]:
    """The loops of ``run`` up to the first innermost one (a loop with no loop inside)."""
    out = []
    for lp in run:
        kids = lp.child.children if isinstance(lp.child, Sequence) else (lp.child,)
        if not any(isinstance(k, Loop) for k in kids):
            break
        out.append(lp)
    return out


def _fuse_sunk(schedule: Schedule, a: Loop, b: Loop) -> Schedule:
    """``_fuse_levels`` after moving the loops of one iteration that head a nest without a
    contraction (a padded copy's batch of one and block of one), and those of a
    contraction's nest when the other nest copies its window operand (a blocked
    convolution's batch of one), below its first loop with work: a depthwise
    convolution's padded copy then shares its channel loop (or channel-block loop), and
    each channel is copied just before it is convolved, in one parallel loop, instead of
    in passes of their own. A loop of one iteration orders nothing, so the contraction's
    register tile keeps its order. ``schedule`` itself when that does not fuse them."""
    sunk, names = schedule, []
    for top, other in ((a, b), (b, a)):
        name = top.name
        if not _has_contraction(schedule, top) or _copies_a_window(schedule, other, top):
            sunk, name = _sink_units(sunk, name)
        names.append(name)
    if sunk is schedule:
        return schedule
    fused = _fuse_levels(sunk, names[0], names[1])
    return schedule if fused is sunk else _refuse_children(fused, names[0])


def _copies_a_window(schedule: Schedule, copy: Loop, top: Loop) -> bool:
    """Does the nest at ``copy`` write an operand that the contraction at ``top`` reads
    through a window (an output index plus a reduction index: ``I_pack(h + kh)``)? Only
    such a copy gains from running just before the block it feeds (it moves with the
    output, and stays in cache); a copy of weights (a 1x1 convolution's, fused the same
    way: MobileNetV2 layer 8 ran 1.34x slower) is reused by every row anyway."""
    written = {schedule.poly.stmt(n).stmt.tensor for n in tf.stmts_of(copy)}
    for name in tf.stmts_of(top):
        s = schedule.poly.stmt(name)
        if not is_contraction(s):
            continue
        outs, reds = set(s.stmt.lhs), set(s.stmt.reduction_iters)
        for r in s.reads:
            if r.read.tensor in written and any(
                    (names := ir.index_names(ix)) & outs and names & reds
                    for ix in r.read.indices):
                return True
    return False


def _refuse_children(schedule: Schedule, top: str) -> Schedule:
    """Fuse again, level by level, the nests right below ``top`` that the sink pulled apart:
    moving a loop of one iteration down splits the nests fused below it (a blocked output's
    copy back, fused with each of its rows), which should still copy each row back while it
    is in L1."""
    changed = True
    while changed:
        changed = False
        below = tf.find(schedule.root, top).child
        kids = [k for k in below.children if isinstance(k, Loop)] \
            if isinstance(below, Sequence) else []
        for a, b in pairwise(kids):
            if _has_contraction(schedule, a) or _has_contraction(schedule, b):
                candidate = _fuse_levels(schedule, a.name, b.name)
                if candidate is not schedule:
                    schedule, changed = candidate, True
                    break
    return schedule


def _sink_units(schedule: Schedule, top: str) -> tuple[Schedule, str]:
    """The nest at ``top`` with its leading loops of one iteration moved just below its
    first loop with more, when that reorder is legal; and the nest's new top loop."""
    chain = chain_of(tf.find(schedule.root, top))
    trips = [tf.trip_count(lp, schedule.poly.domain) for lp in chain]
    lead = next((i for i, n in enumerate(trips) if n != 1), None)
    if not lead or lead == len(chain) - 1:  # none leads, or the innermost would move
        return schedule, top
    names = [lp.name for lp in chain]
    order = [names[lead], *names[:lead], *names[lead + 1:]]
    try:
        return schedule.reorder(*order), order[0]
    except ScheduleError:
        return schedule, top


def _fuse_levels(schedule: Schedule, a: str, b: str) -> Schedule:
    """Fuse sibling loops ``a`` and ``b``, then their child loops, and so on, while the
    loops span the same values and stay free of dependences. Loops of one iteration (a batch
    of one) fuse only on the way to a longer loop: alone they gain no locality. Below the
    first level every child loop fuses at once (a batch's per-sample input copy, zeroing
    and convolution fuse per channel: the copy's channel is then still in cache)."""
    if not _longer_shared_loop(schedule, tf.find(schedule.root, a), tf.find(schedule.root, b)):
        return schedule  # each fusion is a legality check: skip those that would be undone
    out, best, names = schedule, schedule, [a, b]
    while True:
        level = [tf.find(out.root, n) for n in names]
        if not all(_same_range(out, level[0], lp) for lp in level[1:]):
            return best
        try:
            candidate = out.fuse(*names)
        except ScheduleError:
            return best
        # The fused loop carries whatever any of the loops carried: one check covers all.
        if not loop_free(candidate, tf.find(candidate.root, names[0])):
            return best
        out = candidate
        if tf.trip_count(level[0], out.poly.domain) != 1:
            best = out
        kids = tf.find(out.root, names[0]).child
        if not (isinstance(kids, Sequence) and len(kids.children) >= 2
                and all(isinstance(k, Loop) for k in kids.children)):
            return best
        names = [k.name for k in kids.children]  # type: ignore[union-attr]


def _longer_shared_loop(schedule: Schedule, a: Node, b: Node) -> bool:
    """Do the nests at ``a`` and ``b`` share, level by level, a run of loops over the same
    values that reaches one of more than one iteration?"""
    while isinstance(a, Loop) and isinstance(b, Loop) and _same_range(schedule, a, b):
        if tf.trip_count(a, schedule.poly.domain) != 1:
            return True
        a, b = a.child, b.child
    return False


def _has_contraction(schedule: Schedule, top: Loop) -> bool:
    return any(is_contraction(schedule.poly.stmt(s)) for s in tf.stmts_of(top))


def is_contraction(s: PolyStmt) -> bool:
    """A ``+=`` with a reduction and an output of two or more dimensions."""
    return (s.kind == "update" and s.stmt.op == "+" and not s.guarded
            and len(s.stmt.lhs) >= 2 and bool(s.stmt.reduction_iters))


def loop_free(schedule: Schedule, lp: Loop) -> bool:
    """Does ``lp`` carry no dependence (its iterations may run in any order)?"""
    current = tf.find(schedule.root, lp.name)
    return carried(schedule.root, current, schedule.deps, schedule.poly.domain).is_empty()
