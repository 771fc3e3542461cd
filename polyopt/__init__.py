"""polyopt: a polyhedral loop-nest optimizer for tensor operators in Einstein notation.

``polyopt.compile`` turns a Tensor Comprehensions definition into a callable kernel;
``polyopt.einsum`` is a drop-in for ``numpy.einsum`` built on the same pipeline.
"""

from __future__ import annotations

import importlib

from polyopt import tune  # the package, callable as polyopt.tune(...)
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
