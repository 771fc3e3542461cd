"""Polyhedral model: isl domains and accesses, the bounds proof, dependences."""

from __future__ import annotations

import functools

from polyopt import ir
from polyopt.poly.bounds import check_bounds
from polyopt.poly.deps import Deps, compute_deps, relaid_deps
from polyopt.poly.model import PolyProgram, PolyStmt, ReadAccess, affine_text, build_poly


def analyze(program: ir.Program, borders: bool = True) -> tuple[PolyProgram, Deps]:
    """The polyhedral model of ``program`` (bounds proven) and its exact dependences
    (``borders``: see ``build_poly``). Built once per program: compile, its tuning lookup,
    the schedule it replays and the tuner's space share it (the model and its artifacts are
    immutable)."""
    return _analyze(program, program.source, bool(borders))


def analyze_relaid(program: ir.Program, before: PolyProgram,
                   deps: Deps) -> tuple[PolyProgram, Deps]:
    """``analyze`` of ``program``, a relayout of ``before`` (whose dependences are ``deps``),
    with its dependences derived from ``deps`` when the relayout only reads inputs through
    packed copies (``deps.relaid_deps``), else analysed."""
    pp = model_of(program, before.borders)
    derived = relaid_deps(before, deps, pp)
    if derived is None:
        return analyze(program, before.borders)
    check_bounds(pp)
    return pp, derived


def model_of(program: ir.Program, borders: bool = True) -> PolyProgram:
    """``build_poly``, once per program (what ``analyze`` builds on)."""
    return _model(program, program.source, bool(borders))


# Keyed by the program and its source text: programs compare without their source
# positions, which error messages quote.
@functools.lru_cache(maxsize=32)
def _analyze(program: ir.Program, source: str, borders: bool) -> tuple[PolyProgram, Deps]:
    pp = model_of(program, borders)
    check_bounds(pp)
    return pp, compute_deps(pp)


@functools.lru_cache(maxsize=32)
def _model(program: ir.Program, source: str, borders: bool) -> PolyProgram:
    return build_poly(program, borders)


__all__ = [
    "Deps",
    "PolyProgram",
    "PolyStmt",
    "ReadAccess",
    "affine_text",
    "analyze",
    "analyze_relaid",
    "build_poly",
    "check_bounds",
    "compute_deps",
    "model_of",
]
