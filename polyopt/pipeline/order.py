"""Loop orders chosen by the cost model (``polyopt.costmodel.cost``) for nests that are not
register-tiled contractions.

For a chain of perfectly nested loops over statements, the candidates are its loop orders
(every permutation up to ``CpuPolicy.order_max_permuted`` loops, else each loop moved
innermost), and for an order whose innermost loop vectorizes and may run in parallel while
no loop outside it can (a column sum: the reduction over rows outside), strips of that loop
with a parallel loop of strips outermost (``for j_o: for i: for j_i``), the strip sizes
from ``strip_min_vectors`` vectors up to the size that leaves ``parallel_trips`` strips. A
fused nest (a chain over a sequence of nests) is compared with its distributed nests, each
in its best order (a fused body of statements only in its own best order too). The
model's best candidate is applied through the checked verbs (``distribute``, ``split``,
``reorder``) when it predicts ``order_min_gain`` over the pipeline's order; an illegal one
is skipped for the next. Each decision is noted on the schedule (``Schedule.notes``) with
the predicted cycles of the chosen and the next-best candidate.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

from polyopt.costmodel.cost import Estimate, estimate, free_loop, printing
from polyopt.costmodel.verdict import clear_gain
from polyopt.dtypes import DTYPES
from polyopt.errors import ScheduleError
from polyopt.pipeline.fusion import loop_free, nests
from polyopt.pipeline.policy import CpuPolicy
from polyopt.schedules import transform as tf
from polyopt.schedules.limits import CAPS
from polyopt.schedules.marks import Tag
from polyopt.schedules.nest import chain_of
from polyopt.schedules.schedule import Schedule
from polyopt.schedules.tree import Loop, Node, Sequence, loops, stmts_of


@dataclass(frozen=True)
class Plan:
    """A candidate for a chain: its loop order (after the strip's split, if any)."""

    order: tuple[str, ...]
    strip: tuple[str, int] | None
    estimate: Estimate

    def describe(self) -> str:
        cut = f"split({self.strip[0]}, {self.strip[1]}) " if self.strip else ""
        return (f"{cut}order {', '.join(self.order)}: {self.estimate.cycles:.3g} cycles "
                f"({self.estimate.core:.3g} per core)")


def _outer(root: Node, top: Loop) -> list[Loop]:
    return [n for n in tf.path_to(root, top)[:-1] if isinstance(n, Loop)]


def _orders(names: list[str], policy: CpuPolicy) -> list[tuple[str, ...]]:
    if len(names) <= policy.order_max_permuted:
        return [tuple(p) for p in itertools.permutations(names)]
    return [tuple(names)] + [tuple([*(n for n in names if n != v), v]) for v in names]


def candidates(schedule: Schedule, chain: list[Loop], policy: CpuPolicy) -> list[Plan]:
    """Every candidate of the chain with its estimate, cheapest first (the chain's own
    order among them); empty when the model does not apply (an extent unknown)."""
    poly, names = schedule.poly, [lp.name for lp in chain]
    outer = _outer(schedule.root, chain[0])
    out: list[Plan] = []
    for order in _orders(names, policy):
        root = tf.reorder(schedule.root, order) if list(order) != names else schedule.root
        top = tf.find(root, order[0])
        est = estimate(poly, top, policy.machine, outer, parallel_trips=policy.parallel_trips)
        if est is None:
            return []
        out.append(Plan(order, None, est))
        out += _strips(schedule, root, order, est, policy, outer)
    # Ties (a stream bound by memory) go to the fewer cycles of the cores' own work (their
    # cache and TLB traffic: ``Estimate.core``), then to the less arithmetic, then to the
    # longer strip: longer runs per row suit the prefetcher, and fewer strips mean fewer loop
    # overheads.
    return sorted(out, key=lambda p: (p.estimate.cycles, p.estimate.core, p.estimate.compute,
                                      -(p.strip[1] if p.strip else 0)))


def _strips(schedule: Schedule, root: Node, order: tuple[str, ...], est: Estimate,
            policy: CpuPolicy, outer: list[Loop]) -> list[Plan]:
    """Strip-mined variants of ``order`` when its innermost loop vectorizes and is free but
    the parallel loop (if any) is inside a sequential one."""
    inner = tf.find(root, order[-1])
    if len(order) < 2 or order[-1] not in est.vector or est.parallel == order[0]:
        return []
    if not free_loop(schedule.poly, inner):
        return []
    n = tf.trip_count(inner, schedule.poly.domain) or 0
    program = schedule.poly.program
    elem = max(DTYPES[program.tensors[schedule.poly.stmt(s).stmt.tensor].dtype].np.itemsize
               for s in tf.stmts_of(inner))
    lanes = policy.lanes(elem)
    size, out = policy.strip_min_vectors * lanes, []
    while size * policy.parallel_trips <= n:
        vo, vi = tf.split_names(order[-1])
        cut = tf.reorder(tf.split(root, order[-1], size), (vo, *order[:-1], vi))
        top = tf.find(cut, vo)
        e = estimate(schedule.poly, top, policy.machine, outer, parallel=_named(vo),
                     parallel_trips=policy.parallel_trips)
        if e is not None:
            out.append(Plan((vo, *order[:-1], vi), (order[-1], size), e))
        size *= 2
    return out


def _named(name: str) -> Callable[[Loop], bool]:
    """The strips' loop alone runs in parallel (its value is not an iterator)."""
    return lambda lp: lp.name == name


def _apply(schedule: Schedule, plan: Plan) -> Schedule:
    out = schedule
    if plan.strip:
        out = out.split(*plan.strip)
    return out.reorder(*plan.order)


def choose_order(schedule: Schedule, chain: list[Loop], policy: CpuPolicy,
                 rank: int | None = None) -> tuple[Schedule, Plan | None]:
    """The chain in the model's best legal order when it predicts ``order_min_gain`` over
    the current one (else unchanged, and None); ``rank`` (the ``order`` knob): the
    candidate of that rank instead, cheapest first, when there is one and it is legal."""
    plans = candidates(schedule, chain, policy)
    names = tuple(lp.name for lp in chain)
    base = next((p for p in plans if p.order == names and p.strip is None), None)
    if base is None:
        return schedule, None
    if rank is not None:
        picked = _ranked(schedule, plans, base, rank)
        if picked is not None:
            return picked
        schedule = schedule.note(f"{names[0]}: order knob {rank}: not among the {len(plans)} "
                                 "candidates, or illegal; the model's choice")
    for k, plan in enumerate(plans):
        if plan.estimate.cycles > base.estimate.cycles:
            break
        if clear_gain(plan.estimate, base.estimate, policy.order_min_gain).order >= 0:
            continue
        try:
            out = _apply(schedule, plan)
        except ScheduleError:
            continue  # illegal (a dependence): the next candidate
        rest = [p for p in plans[k + 1:] if p.order != plan.order or p.strip != plan.strip]
        runner = f"; next {rest[0].describe()}" if rest else ""
        return out.note(f"{names[0]}: {plan.describe()}{runner}; as scheduled "
                        f"{base.estimate.cycles:.3g}"), plan
    rest = [p for p in plans if p is not base]
    runner = f"; best other {rest[0].describe()}" if rest else ""
    return schedule.note(f"{names[0]}: order kept, {base.describe()}{runner} (a change needs "
                         f"{policy.order_min_gain}x)"), None


def _ranked(schedule: Schedule, plans: list[Plan], base: Plan,
            rank: int) -> tuple[Schedule, Plan | None] | None:
    """The chain in candidate ``plans[rank]``'s order (None when there is no such candidate
    or it is illegal)."""
    if rank >= len(plans):
        return None
    plan = plans[rank]
    why = f"{base.order[0]}: order knob {rank}: {plan.describe()}; as scheduled " \
          f"{base.estimate.cycles:.3g}"
    if plan is base:
        return schedule.note(why), None
    try:
        return _apply(schedule, plan).note(why), plan
    except ScheduleError:
        return None


def best_cycles(schedule: Schedule, chain: list[Loop], policy: CpuPolicy) -> float | None:
    plans = candidates(schedule, chain, policy)
    return plans[0].estimate.cycles if plans else None


def choose_distribution(schedule: Schedule, top: Loop,
                        policy: CpuPolicy) -> tuple[Schedule, list[str]] | None:
    """Distribute the nest ``top`` (a chain over a sequence of nests) at the loop of its
    chain where its nests, each in its best order, are predicted fastest, when that
    ``verdict.clear_gain`` over the fused nest: the schedule and the new nests' top loops. None
    otherwise, or when the nest holds more than ``Caps.model_statements``. Below the top,
    the loops above stay shared (a pooling window's ``for c: for h:``, its init's row apart
    from the taps, which may then run outside the row: ``for y: for x: for w``); ties go to
    the deepest."""
    if len(stmts_of(top)) > CAPS.model_statements:
        return None
    chain, outer = chain_of(top), _outer(schedule.root, top)
    if not isinstance(chain[-1].child, Sequence):
        return None
    fused = _fused_estimate(schedule, top, policy, outer)
    if fused is None:
        return None
    best: tuple[Estimate, str, Schedule, list[str]] | None = None
    for k, lp in enumerate(chain):
        try:
            split = schedule.distribute(lp.name)
        except ScheduleError:
            continue
        parent = chain[k - 1] if k else (outer[-1] if outer else None)
        names = _new_nests(split, parent, lp)
        est = _split_estimate(split, names, top if k else None, outer, policy)
        if est is not None and (best is None or (est.cycles, est.compute) <= (
                best[0].cycles, best[0].compute)):
            best = (est, f" at {lp.name}" if k else "", split, names)
    if best is None:
        return None
    verdict = clear_gain(best[0], fused, policy.order_min_gain)
    if verdict.order >= 0:
        return None
    est, where, split, names = best
    cached = (f", {est.warm:.3g} from cache against {fused.warm:.3g}"
              if est.warm is not None and fused.warm is not None else "")
    return split.note(f"{top.name}: distribute{where}: {est.cycles:.3g} cycles in the best "
                      f"orders; fused {fused.cycles:.3g}{cached} ({verdict.basis})"), names


def _fused_estimate(schedule: Schedule, top: Loop, policy: CpuPolicy,
                    outer: list[Loop]) -> Estimate | None:
    """The fused nest's estimate: over statements only (one innermost body), in the
    order ``choose_order`` would give it, as its distributed nests get theirs."""
    chain = chain_of(top)
    plan = None if loops(chain[-1].child) else choose_order(schedule, chain, policy)[1]
    if plan is not None:
        return plan.estimate
    return estimate(schedule.poly, top, policy.machine, outer, parallel_trips=policy.parallel_trips)


def _new_nests(split: Schedule, parent: Loop | None, lp: Loop) -> list[str]:
    """The nests that ``lp`` was distributed into, below ``parent`` (None: the top level)."""
    siblings = _tops(split.root if parent is None else tf.find(split.root, parent.name).child)
    mine = set(stmts_of(lp))
    return [c.name for c in siblings if set(stmts_of(c)) <= mine]


def _split_estimate(split: Schedule, names: list[str], top: Loop | None, outer: list[Loop],
                    policy: CpuPolicy) -> Estimate | None:
    """The estimate of a distributed nest: at its top (``top`` None), its nests' in their
    best orders, summed; below (at a loop of ``top``'s chain), ``top``'s nest with each new
    nest in the order ``choose_order`` gives it."""
    if top is None:
        best: list[Estimate] = []
        for name in names:
            plans = candidates(split, chain_of(tf.find(split.root, name)), policy)
            if not plans:
                return None
            best.append(plans[0].estimate)
        return _total(best)
    trial = split
    for name in names:
        trial, _ = choose_order(trial, chain_of(tf.find(trial.root, name)), policy)
    return estimate(trial.poly, tf.find(trial.root, top.name), policy.machine, outer,
                    parallel_trips=policy.parallel_trips)


def nests_estimate(schedule: Schedule, stmts: set[str], policy: CpuPolicy) -> Estimate | None:
    """The summed estimate of ``schedule``'s top-level nests over any of ``stmts``, each
    dependence-free loop a candidate parallel loop (``fusion.loop_free``: tile loops too):
    how the nests a pass rebuilt (a register tile and its packing) weigh against others."""
    return _summed(schedule, [top for top in nests(schedule.root)
                              if stmts & set(stmts_of(top))],
                   policy, lambda lp: loop_free(schedule, lp))


def schedule_estimate(schedule: Schedule, policy: CpuPolicy) -> Estimate | None:
    """The summed estimate of every nest of a finished schedule, each in parallel where it
    is marked so: how two whole schedules of a def (two layouts) weigh."""
    return _summed(schedule, nests(schedule.root), policy, lambda lp: bool(
        {Tag.PARALLEL, Tag.PARALLEL_REDUCTION} & lp.tags))


def _summed(schedule: Schedule, tops: list[Loop], policy: CpuPolicy,
            parallel: Callable[[Loop], bool]) -> Estimate | None:
    printed = printing(schedule.poly, schedule.root, schedule.buffers)
    got = [estimate(schedule.poly, top, policy.machine, parallel=parallel, printed=printed,
                    parallel_trips=policy.parallel_trips) for top in tops]
    if not got or any(e is None for e in got):
        return None
    return _total([e for e in got if e is not None])


def _total(est: list[Estimate]) -> Estimate:
    """Nests run one after another: their cycles, work and cycles from cache (when each
    has them) summed."""
    warm = [e.warm for e in est if e.warm is not None]
    return Estimate(sum(e.cycles for e in est), sum(e.compute for e in est), (), None, (),
                    sum(e.core for e in est), sum(warm) if len(warm) == len(est) else None)


def _tops(root: Node) -> list[Loop]:
    if isinstance(root, Loop):
        return [root]
    if isinstance(root, Sequence):
        return [c for c in root.children if isinstance(c, Loop)]
    return []
