"""The PolyoptError hierarchy: every failure that reaches a user is one of these."""

from __future__ import annotations


class PolyoptError(Exception):
    """Base class of every error polyopt raises on purpose."""


class PolyoptWarning(UserWarning):
    """Something accepted that may not mean what the author intended (TC's two warnings)."""


class LanguageError(PolyoptError, ValueError):
    """A definition that is not valid TC (syntax, names, types, affinity, ranges).

    ``line`` and ``col`` are 1-based; the message shows the source line with a caret.
    """

    def __init__(self, message: str, source: str | None = None,
                 pos: tuple[int, int] | None = None) -> None:
        self.bare_message = message
        self.line: int | None = pos[0] if pos is not None else None
        self.col: int | None = pos[1] if pos is not None else None
        super().__init__(format_at(message, source, pos))


class SizesRequiredError(LanguageError):
    """A def that is affine only once some sizes are known (``SH*h`` with SH unbound)."""


class ShapeError(PolyoptError, ValueError):
    """Arguments whose count, rank, extents or dtypes do not fit the definition."""


class InputTypeError(ShapeError, TypeError):
    """An argument of a kind polyopt does not take (a list, a torch tensor where a numpy array
    is expected); also a ``TypeError``, as Python's own functions raise for one."""


class BoundsError(PolyoptError):
    """An access that may fall outside its tensor (found by the isl proof or at call time)."""


class OptionError(PolyoptError, ValueError):
    """An unknown option, target or argument value given to the public API."""


class OptionTypeError(OptionError, TypeError):
    """An option or argument of the wrong kind (``dtype='bogus'``, an unknown keyword, an
    einsum sublist that is not a sequence); also a ``TypeError``, as numpy raises for one."""


class EinsumPathError(OptionError):
    """An einsum ``optimize=`` value that is no path method, or a path that does not contract
    the operands given. The subclasses are also the builtin error numpy raises for each."""


class PathTypeError(EinsumPathError, TypeError):
    """``optimize=`` of a form numpy does not take, or a path step that is no tuple of ints."""


class PathNameError(EinsumPathError, KeyError):
    """A path method other than 'greedy' and 'optimal'."""

    __str__ = Exception.__str__  # the message, not KeyError's repr of it


class PathIndexError(EinsumPathError, IndexError):
    """A path step naming a position that is not in the operand list at that step."""


class IncompletePathError(EinsumPathError, RuntimeError):
    """A path that leaves more than one operand uncontracted."""


class UnknownDefError(LanguageError, OptionError):
    """A def name the source does not define (or none given where it holds several): a fault
    of the source as much as of the ``name=`` argument, so both kinds of error."""


class NotDifferentiableError(PolyoptError, ValueError):
    """A definition ``polyopt.grad`` cannot differentiate as written: a data-dependent index
    (gather) into a differentiated tensor, an integer-typed input asked for, a product
    reduction, a builtin without a derivative; the message names the statement and access."""


class ScheduleError(PolyoptError):
    """A schedule that cannot be built or applied."""


class ScheduleArgumentError(ScheduleError, TypeError):
    """A schedule verb given arguments of the wrong number or kind (a list for a loop name,
    a float for a factor); also a ``TypeError``, as Python raises for one."""


class IllegalScheduleError(ScheduleError):
    """A schedule that violates a dependence; the message prints the dependence as isl text."""


class MissingToolError(PolyoptError, RuntimeError):
    """An optional program or package a feature needs is not installed (graphviz's
    ``dot``, matplotlib); the message names it and how to get it."""


class CodegenError(PolyoptError):
    """The code generator met something it cannot print."""


class CompileError(PolyoptError):
    """The system compiler rejected generated code; carries its log and the saved source."""

    def __init__(self, message: str, log: str = "", source_path: str | None = None) -> None:
        self.log = log
        self.source_path = source_path
        detail = f"\n--- compiler log ---\n{log.strip()}" if log.strip() else ""
        where = f"\nsource saved at {source_path}" if source_path else ""
        super().__init__(f"{message}{where}{detail}")


class EmulationError(PolyoptError):
    """The CUDA emulator found a race, an uninitialized shared read, barrier divergence or an
    out-of-bounds shared access; the message is the checker's report."""


def format_at(message: str, source: str | None, pos: tuple[int, int] | None) -> str:
    """``message`` followed by the offending source line and a caret under column ``pos``."""
    if source is None or pos is None:
        return message
    line, col = pos
    lines = source.splitlines()
    if not 1 <= line <= len(lines):
        return f"{message} (line {line}, column {col})"
    text = lines[line - 1].expandtabs(1)
    return f"{message}\n  line {line}, column {col}:\n    {text}\n    {' ' * (col - 1)}^"
