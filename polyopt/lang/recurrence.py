"""The rule a def with recurrences keeps (reference §5.5): each element of each tensor is
written by one statement (a reduction's instances together), so that a read has one value
to get, whichever statement and instance computes it."""

from __future__ import annotations

import islpy as isl

from polyopt import ir
from polyopt.errors import LanguageError

_SET = isl.dim_type.set


def check_single_assignment(program: ir.Program) -> None:
    """Raise LanguageError naming two statements of ``program`` that write one element."""
    if not program.value_semantics:
        return
    seen: dict[str, list[tuple[ir.Stmt, isl.Set]]] = {}
    # Each tensor's elements written so far, coalesced: one test per statement, not one per
    # pair (2,000,000 intersections, 12 s, for one output written in 2000 pieces).
    written: dict[str, isl.Set] = {}
    for stmt in program.stmts:
        image = _written(stmt)
        so_far = written.get(stmt.tensor)
        written[stmt.tensor] = image if so_far is None else so_far.union(image).coalesce()
        if so_far is None or image.intersect(so_far).is_empty():
            seen.setdefault(stmt.tensor, []).append((stmt, image))
            continue
        for other, theirs in seen[stmt.tensor]:
            both = image.intersect(theirs)
            if both.is_empty():
                continue
            hint = (" (the pieces may be disjoint only from some sizes on: compile with "
                    "sizes=)" if program.sizes else "")
            raise LanguageError(
                f"in a def with recurrences each element is written by one statement, but "
                f"{other.name} and {stmt.name} both write {sample_element(both)}{hint}",
                program.source, stmt.pos)


def _written(stmt: ir.Stmt) -> isl.Set:
    """The elements ``stmt`` writes, named after its tensor, for admissible sizes."""
    dom = isl.Set(stmt.domain)
    for k in range(dom.dim(isl.dim_type.param)):
        dom = dom.lower_bound_val(isl.dim_type.param, k, isl.Val(0))
    nl = len(stmt.lhs)
    return dom.project_out(_SET, nl, dom.dim(_SET) - nl).set_tuple_name(stmt.tensor)


def sample_element(s: isl.Set) -> str:
    """One element of ``s``, as ``T(1, 2)``, and the sizes isl picked (``at N = 1``)."""
    point = s.sample_point()
    coords = [str(point.get_coordinate_val(_SET, k)) for k in range(s.dim(_SET))]
    sizes = sizes_at(point)
    return f"{s.get_tuple_name()}({', '.join(coords)})" + (f" (at {sizes})" if sizes else "")


def sizes_at(point: isl.Point) -> str:
    """The sizes (parameters) of ``point``, as ``N = 1, T = 2``; empty when there are none."""
    space = point.get_space()
    return ", ".join(f"{space.get_dim_name(isl.dim_type.param, k)} = "
                     f"{point.get_coordinate_val(isl.dim_type.param, k)}"
                     for k in range(space.dim(isl.dim_type.param)))
