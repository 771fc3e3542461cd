"""Helpers shared by the language front-end tests."""

from __future__ import annotations

import warnings

import islpy as isl

from polyopt import ir
from polyopt.lang import build_program


def same_set(a: str, b: str) -> bool:
    return isl.Set(a).is_equal(isl.Set(b))


def build(source: str, **kw: object) -> ir.Program:
    """build_program, failing on any warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return build_program(source, **kw)  # type: ignore[arg-type]
