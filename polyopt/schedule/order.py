"""Loop orders chosen by the cost model (``polyopt.schedule.cost``) for nests that are not
register-tiled contractions.

For a chain of perfectly nested loops over statements, the candidates are its loop orders
(every permutation up to ``CpuPolicy.order_max_permuted`` loops, else each loop moved
innermost), and for an order whose innermost loop vectorizes and may run in parallel while
no loop outside it can (a column sum: the reduction over rows outside), strips of that loop
with a parallel loop of strips outermost (``for j_o: for i: for j_i``), the strip sizes
from ``strip_min_vectors`` vectors up to the size that leaves ``parallel_trips`` strips. A
fused nest (a chain over a sequence of nests) is compared with its distributed nests, each
in its best order. The model's best candidate is applied through the checked verbs
(``distribute``, ``split``, ``reorder``) when it predicts ``order_min_gain`` over the
pipeline's order; an illegal one is skipped for the next. Each decision is noted on the
schedule (``Schedule.notes``) with the predicted cycles of the chosen and the next-best
candidate.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

from polyopt.dtypes import DTYPES
from polyopt.errors import ScheduleError
from polyopt.schedule import transform as tf
from polyopt.schedule.cost import Estimate, estimate, free_loop
from polyopt.schedule.nest import chain_of
from polyopt.schedule.policy import CAPS, CpuPolicy
from polyopt.schedule.schedule import Schedule
from polyopt.schedule.tree import Loop, Node, Sequence, stmts_of


@dataclass(frozen=True)
class Plan:
    """A candidate for a chain: its loop order (after the strip's split, if any)."""

    order: tuple[str, ...]
    strip: tuple[str, int] | None
    estimate: Estimate

    def describe(self) -> str:
        cut = f"split({self.strip[0]}, {self.strip[1]}) " if self.strip else ""
        return f"{cut}order {', '.join(self.order)}: {self.estimate.cycles:.3g} cycles"


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
        est = estimate(poly, top, policy, outer)
        if est is None:
            return []
        out.append(Plan(order, None, est))
        out += _strips(schedule, root, order, est, policy, outer)
    # Ties (a stream bound by memory) go to the longer strip: longer runs per row suit the
    # prefetcher, and fewer strips mean fewer loop overheads.
    return sorted(out, key=lambda p: (p.estimate.cycles, -(p.strip[1] if p.strip else 0)))


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
        e = estimate(schedule.poly, top, policy, outer, parallel=_named(vo))
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


def choose_order(schedule: Schedule, chain: list[Loop],
                 policy: CpuPolicy) -> tuple[Schedule, Plan | None]:
    """The chain in the model's best legal order when it predicts ``order_min_gain`` over
    the current one (else unchanged, and None)."""
    plans = candidates(schedule, chain, policy)
    names = tuple(lp.name for lp in chain)
    base = next((p for p in plans if p.order == names and p.strip is None), None)
    if base is None:
        return schedule, None
    for k, plan in enumerate(plans):
        if plan.estimate.cycles * policy.order_min_gain > base.estimate.cycles:
            break
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


def best_cycles(schedule: Schedule, chain: list[Loop], policy: CpuPolicy) -> float | None:
    plans = candidates(schedule, chain, policy)
    return plans[0].estimate.cycles if plans else None


def choose_distribution(schedule: Schedule, top: Loop, policy: CpuPolicy) -> Schedule | None:
    """Distribute the top-level nest ``top`` (a chain over a sequence of nests) when its
    nests, each in its best order, are predicted ``order_min_gain`` faster than the fused
    nest; None otherwise, or when the nest holds more than ``Caps.model_statements``."""
    if len(stmts_of(top)) > CAPS.model_statements:
        return None
    if _outer(schedule.root, top) or not isinstance(chain_of(top)[-1].child, Sequence):
        return None
    fused = estimate(schedule.poly, top, policy)
    try:
        split = schedule.distribute(top.name)
    except ScheduleError:
        return None
    before = {lp.name for lp in _tops(schedule.root)} - {top.name}
    total = 0.0
    for nest in [lp for lp in _tops(split.root) if lp.name not in before]:
        best = best_cycles(split, chain_of(nest), policy)
        if best is None or fused is None:
            return None
        total += best
    if fused is None or total * policy.order_min_gain > fused.cycles:
        return None
    return split.note(f"{top.name}: distribute: {total:.3g} cycles in the best orders; "
                      f"fused {fused.cycles:.3g}")


def _tops(root: Node) -> list[Loop]:
    if isinstance(root, Loop):
        return [root]
    if isinstance(root, Sequence):
        return [c for c in root.children if isinstance(c, Loop)]
    return []
