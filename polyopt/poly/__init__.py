"""Polyhedral model: isl domains and accesses, the bounds proof, dependences."""

from __future__ import annotations

from polyopt import ir
from polyopt.poly.bounds import check_bounds
from polyopt.poly.deps import Deps, compute_deps
from polyopt.poly.model import PolyProgram, PolyStmt, ReadAccess, affine_text, build_poly


def analyze(program: ir.Program, borders: bool = True) -> tuple[PolyProgram, Deps]:
    """The polyhedral model of ``program`` (bounds proven) and its exact dependences
    (``borders``: see ``build_poly``)."""
    pp = build_poly(program, borders)
    check_bounds(pp)
    return pp, compute_deps(pp)


__all__ = [
    "Deps",
    "PolyProgram",
    "PolyStmt",
    "ReadAccess",
    "affine_text",
    "analyze",
    "build_poly",
    "check_bounds",
    "compute_deps",
]
