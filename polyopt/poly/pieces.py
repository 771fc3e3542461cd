"""How a TC statement's pieces (``poly/model.py``: the interior and the border of a padded
window, and the ``_init`` of an ``op=!``) cover its elements: what a register tile that
starts its accumulators at zero needs to know (``codegen/microkernel.py``), and what makes
the zeroing pass dead (``codegen/zerostart.py``; the cost model predicts the same,
``costmodel/cost.py``)."""

from __future__ import annotations

import islpy as isl

from polyopt.poly.model import PolyProgram, PolyStmt


def update_pieces(poly: PolyProgram, init: PolyStmt) -> list[PolyStmt]:
    """The update pieces of the statement ``init`` zeroes."""
    return [s for s in poly.stmts if s.kind == "update" and s.stmt is init.stmt]


def whole_reductions(poly: PolyProgram, s: PolyStmt) -> bool:
    """Does piece ``s`` hold every update of each element it updates: no other piece of
    its statement (the border of a padded window) updates those elements too?"""
    n_lhs, n_red = len(s.stmt.lhs), len(s.stmt.reduction_iters)
    for other in poly.stmts:
        if other is s or other.stmt is not s.stmt or other.kind != "update":
            continue
        theirs = other.domain.set_tuple_name(s.name).project_out(
            isl.dim_type.set, n_lhs, n_red)
        mine = s.domain.project_out(isl.dim_type.set, n_lhs, n_red)
        if not theirs.intersect(mine).is_empty():
            return False
    return True


def all_updated(init: PolyStmt, pieces: list[PolyStmt]) -> bool:
    """Does every element ``init`` writes get an update from one of ``pieces`` (an empty
    reduction range would leave the init's value as the result)? Compared as tensor
    elements, the images of the domains under the write accesses."""
    written = init.write.intersect_domain(init.domain).range()
    updated = None
    for s in pieces:
        elems = s.write.intersect_domain(s.domain).range()
        updated = elems if updated is None else updated.union(elems)
    return updated is not None and bool(written.is_subset(updated))
