"""polyopt: a polyhedral loop-nest optimizer for tensor operators in Einstein notation.

``polyopt.compile`` turns a Tensor Comprehensions definition into a callable kernel;
``polyopt.einsum`` is a drop-in for ``numpy.einsum`` built on the same pipeline.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from polyopt.api import Kernel, compile, schedule
from polyopt.driver import schedule_from_json
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
from polyopt.schedules import Schedule
from polyopt.version import __version__ as __version__

# The operator library, reachable after a bare `import polyopt` (the README's use). It is
# installed from the top-level kernels/ (setup.cfg's package_dir), which type checkers
# cannot follow: hence a module object rather than an import statement.
kernels = importlib.import_module("polyopt.kernels")

if TYPE_CHECKING:
    from polyopt.autodiff import grad
    from polyopt.subscripts.call import einsum, einsum_path
    from polyopt.tuning.tuner import tune

# Public names that only some users need, loaded at their first use (PEP 562 __getattr__), so
# that `import polyopt` stays fast: the tuner's search and measurement, einsum, autodiff.
_LAZY = ("einsum", "einsum_path", "grad", "tune")


def __getattr__(name: str) -> Any:
    if name == "tune":
        from polyopt.tuning.tuner import tune

        return _keep(name, tune)
    if name == "grad":
        from polyopt.autodiff import grad

        return _keep(name, grad)
    if name in ("einsum", "einsum_path"):
        from polyopt.subscripts import call

        return _keep(name, getattr(call, name))
    raise AttributeError(f"module 'polyopt' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


def _keep(name: str, value: Any) -> Any:
    globals()[name] = value  # later lookups find it without calling __getattr__
    return value


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
    "schedule_from_json",
    "tune",
]
