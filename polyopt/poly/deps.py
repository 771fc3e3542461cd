"""Exact dependences from isl's dataflow analysis (``UnionAccessInfo.compute_flow``).

``flow`` (read after write) is exact value-based dataflow; ``anti`` (write after read) and
``output`` (write after write) are memory-based, so every schedule that respects all three
computes what the sequential program computes.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import islpy as isl

from polyopt.errors import PolyoptError
from polyopt.poly.model import PolyProgram


@dataclass(frozen=True, eq=False)
class Deps:
    flow: isl.UnionMap
    anti: isl.UnionMap
    output: isl.UnionMap

    @cached_property
    def all(self) -> isl.UnionMap:
        return self.flow.union(self.anti).union(self.output).coalesce()

    def named(self) -> list[tuple[str, isl.UnionMap]]:
        return [("flow", self.flow), ("anti", self.anti), ("output", self.output)]

    def __str__(self) -> str:
        return "\n".join(f"{kind}: {m}" for kind, m in self.named())


def compute_deps(pp: PolyProgram) -> Deps:
    """Flow, anti and output dependences of ``pp`` under its sequential program order."""
    try:
        order = pp.program_order
        flow = _flow(pp.reads, must=pp.writes, may=None, order=order)
        anti = _flow(pp.writes, must=None, may=pp.reads, order=order)
        output = _flow(pp.writes, must=None, may=pp.writes, order=order)
    except isl.Error as e:
        raise PolyoptError(f"isl dependence analysis failed for '{pp.program.name}': {e}") from e
    ctx = pp.context
    return Deps(*(m.intersect_params(ctx).coalesce() for m in (flow, anti, output)))


def _flow(sink: isl.UnionMap, must: isl.UnionMap | None, may: isl.UnionMap | None,
          order: isl.UnionMap) -> isl.UnionMap:
    info = isl.UnionAccessInfo.from_sink(sink)
    if must is not None:
        info = info.set_must_source(must)
    if may is not None:
        info = info.set_may_source(may)
    return info.set_schedule_map(order).compute_flow().get_may_dependence()
