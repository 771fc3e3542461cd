"""The Schedule artifact: an isl schedule tree plus how it was obtained."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import islpy as isl


@dataclass(frozen=True, eq=False)
class Schedule:
    """A schedule for one def: the isl schedule tree and the strategy that produced it."""

    tree: isl.Schedule
    strategy: str  # "isl" (isl's scheduler) | "program-order"

    @property
    def map(self) -> isl.UnionMap:
        """Statement instances → their (flattened) schedule time."""
        return self.tree.get_map()

    def __str__(self) -> str:
        return str(self.tree)

    def specialize(self, domain: isl.UnionSet, bound: Mapping[str, int]) -> Schedule:
        """This schedule on ``domain``, with the sizes in ``bound`` fixed to their values.

        Schedules are written against the size-generic program; a specialized program has no
        size parameters, so the bound ones are fixed and projected out.
        """
        smap = self.map
        names = [n for n in bound if _has_param(smap, n)]
        if not names:
            return self
        fixed = " and ".join(f"{n} = {bound[n]}" for n in names)
        smap = smap.intersect_params(isl.Set(f"[{', '.join(names)}] -> {{ : {fixed} }}"))
        for n in names:
            space = smap.get_space()
            ident = space.get_dim_id(isl.dim_type.param,
                                     space.find_dim_by_name(isl.dim_type.param, n))
            smap = smap.project_out_param_id(ident)
        smap = smap.intersect_domain(domain)
        tree = isl.Schedule.from_domain(domain).insert_partial_schedule(
            isl.MultiUnionPwAff.from_union_map(smap))
        return Schedule(tree, self.strategy)


def _has_param(umap: isl.UnionMap, name: str) -> bool:
    space = umap.get_space()
    return space.find_dim_by_name(isl.dim_type.param, name) >= 0
