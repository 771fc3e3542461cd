"""polyopt: a polyhedral loop-nest optimizer for tensor operators in Einstein notation.

``polyopt.compile`` turns a Tensor Comprehensions definition into a callable kernel;
``polyopt.einsum`` is a drop-in for ``numpy.einsum`` built on the same pipeline.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from polyopt.api import Kernel, compile
from polyopt.autodiff import grad
from polyopt.errors import (
    BoundsError,
    CodegenError,
    CompileError,
    EinsumPathError,
    EmulationError,
    IllegalScheduleError,
    InputTypeError,
    LanguageError,
    NotDifferentiableError,
    OptionError,
    PolyoptError,
    PolyoptWarning,
    ScheduleError,
    ShapeError,
    SizesRequiredError,
)
from polyopt.schedule import Schedule
from polyopt.subscripts.call import einsum, einsum_path
from polyopt.version import __version__ as __version__

# The operator library, reachable after a bare `import polyopt` (the README's use). It is
# installed from the top-level kernels/ (setup.cfg's package_dir), which type checkers
# cannot follow: hence a module object rather than an import statement.
kernels = importlib.import_module("polyopt.kernels")

if TYPE_CHECKING:
    from polyopt.tuning.tuner import tune


def __getattr__(name: str) -> Any:
    """The public names that only some users need, loaded at first use (PEP 562), so that
    ``import polyopt`` does not load them: ``tune`` (the search and its measurement)."""
    if name == "tune":
        from polyopt.tuning.tuner import tune

        globals()["tune"] = tune  # later lookups find it without coming here
        return tune
    raise AttributeError(f"module 'polyopt' has no attribute {name!r}")

__all__ = [
    "BoundsError",
    "CodegenError",
    "CompileError",
    "EinsumPathError",
    "EmulationError",
    "IllegalScheduleError",
    "InputTypeError",
    "Kernel",
    "LanguageError",
    "NotDifferentiableError",
    "OptionError",
    "PolyoptError",
    "PolyoptWarning",
    "Schedule",
    "ScheduleError",
    "ShapeError",
    "SizesRequiredError",
    "compile",
    "einsum",
    "einsum_path",
    "grad",
    "kernels",
    "schedule",
    "tune",
]
