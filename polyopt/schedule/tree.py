"""The Schedule artifact: an isl schedule tree plus how it was obtained."""

from __future__ import annotations

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
