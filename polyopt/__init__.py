"""polyopt: a polyhedral loop-nest optimizer for tensor operators in Einstein notation."""

from __future__ import annotations

from polyopt.errors import (
    BoundsError,
    CodegenError,
    CompileError,
    IllegalScheduleError,
    LanguageError,
    OptionError,
    PolyoptError,
    PolyoptWarning,
    ScheduleError,
    ShapeError,
)

__version__ = "0.1.0"

__all__ = [
    "BoundsError",
    "CodegenError",
    "CompileError",
    "IllegalScheduleError",
    "LanguageError",
    "OptionError",
    "PolyoptError",
    "PolyoptWarning",
    "ScheduleError",
    "ShapeError",
]
