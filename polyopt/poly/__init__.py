"""Polyhedral model: isl domains and accesses, the bounds proof, dependences."""

from __future__ import annotations

from polyopt.poly.bounds import check_bounds
from polyopt.poly.deps import Deps, compute_deps
from polyopt.poly.model import PolyProgram, PolyStmt, ReadAccess, affine_text, build_poly

__all__ = ["Deps", "PolyProgram", "PolyStmt", "ReadAccess", "affine_text", "build_poly",
           "check_bounds", "compute_deps"]
