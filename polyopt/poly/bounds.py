"""Static safety: prove with isl that every affine access stays inside its tensor.

The proof runs before any C is compiled, for the concrete sizes of a specialized program or
for every admissible size of a parametric one. Data-dependent indices cannot be bounded
statically; the generated code checks them at run time. Padded reads are exempt: interior
pieces read inside the tensor by construction and border pieces guard their loads.
"""

from __future__ import annotations

import islpy as isl

from polyopt import ir
from polyopt.errors import BoundsError
from polyopt.poly.model import PolyProgram, PolyStmt, tensor_box


def check_bounds(pp: PolyProgram) -> None:
    """Raise BoundsError naming the first access that may leave its tensor."""
    for s in pp.stmts:
        _check(pp, s, s.write, f"write of {s.stmt.tensor}({', '.join(s.stmt.lhs)})")
        for r in s.reads:
            if r.affine and r.read.pad is None:
                _check(pp, s, r.relation, f"read {r.read}")


def _check(pp: PolyProgram, s: PolyStmt, relation: isl.Map, what: str) -> None:
    tensor = relation.get_tuple_name(isl.dim_type.out)
    box = tensor_box(pp.program, tensor).intersect_params(pp.context)
    image = relation.range().intersect_params(pp.context)
    outside = image.subtract(box)
    if outside.is_empty():
        return
    t = pp.program.tensors[tensor]
    ranges = _dim_ranges(image)
    extents = ", ".join(f"[0, {e})" for e in t.shape)
    raise BoundsError(
        f"{what} in statement {s.stmt.name} of def '{pp.program.name}' may fall outside "
        f"tensor {tensor} of extents {extents}: its index range is {ranges}"
        f"{_sizes_note(pp.program)}; e.g. at {_example(relation, outside)}")


def _dim_ranges(image: isl.Set) -> str:
    parts = []
    for i in range(image.dim(isl.dim_type.set)):
        lo, hi = image.dim_min(i), image.dim_max(i)
        parts.append(f"[{_pw_text(lo)}, {_pw_text(hi)}]")
    return " x ".join(parts)


def _pw_text(pa: isl.PwAff) -> str:
    """``expr`` or ``expr (when cond)`` per piece, without the parameter prefix."""
    pieces: list[str] = []

    def piece(dom: isl.Set, aff: isl.Aff) -> None:
        expr = str(aff)
        expr = expr[expr.find("[(") + 2:expr.rfind(")]")]
        cond = str(dom)
        cond = cond[cond.find(":") + 1:cond.rfind("}")].strip() if ":" in cond else ""
        pieces.append(f"{expr} (when {cond})" if cond else expr)

    pa.foreach_piece(piece)
    return " or ".join(pieces)


def _example(relation: isl.Map, outside: isl.Set) -> str:
    return str(relation.intersect_range(outside).wrap().sample_point())


def _sizes_note(program: ir.Program) -> str:
    if program.bound:
        return " with " + ", ".join(f"{k}={v}" for k, v in program.bound)
    return " for some admissible sizes" if program.sizes else ""
