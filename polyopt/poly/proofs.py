"""Facts isl proves about a program, for stages that print differently when they hold.

Each function answers one question exactly, over the program's domains and dependences, and
answers ``False`` whenever it cannot prove the fact (the caller then prints the general form).
"""

from __future__ import annotations

import islpy as isl

from polyopt import ir
from polyopt.poly.model import PolyProgram, PolyStmt, affine_text


def never_negative(pp: PolyProgram, s: PolyStmt, e: ir.Expr) -> bool:
    """Whether the affine expression ``e`` over ``s``'s iterators and the sizes is ``>= 0``
    at every instance of ``s`` (``False`` also when ``e`` is not affine)."""
    text = affine_text(e)
    if text is None:
        return False
    space = s.domain.get_space()
    iters = ", ".join(str(space.get_dim_name(isl.dim_type.set, d))
                      for d in range(space.dim(isl.dim_type.set)))
    try:
        pa = isl.PwAff(f"{pp.program.params} -> {{ {s.name}[{iters}] -> [({text})] }}")
        low = pa.intersect_domain(s.domain).min_val()
    except isl.Error:
        return False
    return bool(low.is_int() and not low.is_neg())


def innermost_carries_nothing(schedule: isl.UnionMap, deps: isl.UnionMap) -> bool:
    """Whether no dependence of ``deps`` is carried by the last dimension of ``schedule``
    (a partial schedule, as isl's AST builder has it at a ``for``): pairs equal on the outer
    dimensions are also equal on the last one."""
    pairs = deps.apply_domain(schedule).apply_range(schedule)
    if pairs.is_empty():
        return True
    maps: list[isl.Map] = []
    pairs.foreach_map(maps.append)
    for m in maps:
        n = m.dim(isl.dim_type.out)
        for i in range(n - 1):
            m = m.equate(isl.dim_type.in_, i, isl.dim_type.out, i)
        if m.is_empty():
            continue
        delta = m.deltas()
        last = delta.dim(isl.dim_type.set) - 1
        zero = delta.fix_val(isl.dim_type.set, last, isl.Val.zero(delta.get_ctx()))
        if not delta.is_subset(zero):
            return False
    return True
