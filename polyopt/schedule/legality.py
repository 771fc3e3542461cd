"""Legality: a schedule must run every dependence's source before its sink."""

from __future__ import annotations

import islpy as isl

from polyopt.errors import IllegalScheduleError
from polyopt.poly.deps import Deps
from polyopt.schedule.tree import Schedule


def check_legal(schedule: Schedule, deps: Deps) -> None:
    """Raise IllegalScheduleError naming the first dependence that ``schedule`` violates."""
    smap = schedule.map
    before = smap.lex_lt_union_map(smap)
    for kind, dep in deps.named():
        bad = dep.subtract(before)
        if bad.is_empty():
            continue
        one = _first_map(bad)
        src = one.get_tuple_name(isl.dim_type.in_)
        dst = one.get_tuple_name(isl.dim_type.out)
        raise IllegalScheduleError(
            f"the schedule violates a {kind} dependence from statement {src} to statement "
            f"{dst}: these instances of {dst} would run before (or with) the instances of "
            f"{src} they depend on:\n  {one}")


def _first_map(umap: isl.UnionMap) -> isl.Map:
    maps: list[isl.Map] = []
    umap.foreach_map(maps.append)
    return maps[0]
