"""The argument checks of the schedule verbs (``Schedule.tile``, ``split``, ...).

A verb is called from Python or replayed from a hand-edited JSON schedule, so any value may
arrive for any argument: a list for a loop name, a float or a 40-digit int for a factor.
``checked`` wraps each verb so that such a call raises ``ScheduleArgumentError`` (a
``ScheduleError`` and a ``TypeError``) naming the verb, the argument, the value and every
argument's valid kinds, before the verb runs (a list used as a dict key deep inside raised a
bare ``TypeError``; an int past 64 bits, islpy's). Whether a well-typed value fits the
schedule (a loop of that name, a legal order) stays the verb's own check.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any, TypeVar

from polyopt.errors import PolyoptError, ScheduleArgumentError

# Factors, offsets and sizes are int32s: isl's values and the generated C's loop bounds.
INT_LIMIT = 2**31


@dataclass(frozen=True)
class Kind:
    """The values one argument takes, and how the message names them."""

    text: str
    test: Callable[[Any], bool]


def _int(v: Any) -> bool:
    """An int (numpy's too), not a bool."""
    return not isinstance(v, bool) and isinstance(v, Integral) and -INT_LIMIT < int(v) < INT_LIMIT


def _seq(v: Any, each: Callable[[Any], bool]) -> bool:
    return isinstance(v, list | tuple) and all(each(x) for x in v)


def _name(v: Any) -> bool:
    return isinstance(v, str)


def _offsets(v: Any) -> bool:
    """A dict from statement names to ints, or its pairs (a step's record, JSON's lists)."""
    if isinstance(v, Mapping):
        return all(_name(k) and _seq(x, _int) for k, x in v.items())
    return _seq(v, lambda p: isinstance(p, list | tuple) and len(p) == 2 and _name(p[0])
                and _seq(p[1], _int))


NAME = Kind("a name (str)", _name)
NAMES = Kind("a list or tuple of names", lambda v: _seq(v, _name))
NAME_OR_NAMES = Kind("a name or a list or tuple of names", lambda v: _name(v) or _seq(v, _name))
INT = Kind(f"an int (|n| < 2**{INT_LIMIT.bit_length() - 1})", _int)
LEVEL = Kind("an int or a list or tuple of ints", lambda v: _int(v) or _seq(v, _int))
BOOL = Kind("a bool", lambda v: isinstance(v, bool))
PAIR = Kind("a pair of ints", lambda v: _seq(v, _int) and len(v) == 2)
ROWS = Kind("a list or tuple of rows, each a list or tuple of ints",
            lambda v: _seq(v, lambda r: _seq(r, _int)))
NAME_LISTS = Kind("a list or tuple of lists or tuples of names",
                  lambda v: _seq(v, lambda r: _seq(r, _name)))
OFFSETS = Kind("a dict from statement names to lists or tuples of ints", _offsets)


def optional(kind: Kind) -> Kind:
    return Kind(f"{kind.text} or None", lambda v: v is None or kind.test(v))


# Each verb's parameters (a ``*`` parameter's kind is each value's).
SIGNATURES: dict[str, dict[str, Kind]] = {
    "tile": {"loops": NAME_OR_NAMES, "sizes": LEVEL, "names": optional(NAME_LISTS)},
    "split": {"loop": NAME, "factor": INT, "names": optional(NAMES)},
    "reorder": {"order": NAME},
    "interchange": {"a": NAME, "b": NAME},
    "fuse": {"first": NAME, "second": NAME, "more": NAME},
    "distribute": {"loop": NAME},
    "compute_at": {"nest": NAME, "loop": NAME},
    "skew": {"outer": NAME, "inner": NAME, "factor": INT},
    "shift": {"loop": NAME, "offset": INT, "stmts": optional(NAMES)},
    "hyperplanes": {"loops": NAMES, "rows": ROWS, "names": optional(NAMES),
                    "offsets": optional(OFFSETS)},
    "reverse": {"loop": NAME},
    "parallel": {"loop": NAME},
    "bind": {"loop": NAME, "axis": NAME},
    "gpu_tile": {"loop": NAME, "regs": PAIR, "shared": BOOL, "unroll": optional(INT)},
    "vectorize": {"loop": NAME, "lanes": optional(INT)},
    "unroll": {"loop": NAME, "factor": optional(INT)},
    "unroll_and_jam": {"loop": NAME, "factor": INT, "names": optional(NAMES)},
    "separate": {"loop": NAME},
    "pack": {"tensor": NAME, "dim": INT, "factor": INT, "outer": INT, "phase": BOOL,
             "subsample": BOOL},
    "merge": {"tensor": NAME, "dim": INT},
    "contract": {"tensor": NAME, "loop": NAME},
}

F = TypeVar("F", bound=Callable[..., Any])


def usage(verb: str) -> str:
    """``verb(loop: a name (str), factor: an int, ...)``: what each argument takes."""
    return f"{verb}({', '.join(f'{p}: {k.text}' for p, k in SIGNATURES[verb].items())})"


def checked(fn: F) -> F:
    """``fn`` (a Schedule verb) with its arguments checked against ``SIGNATURES``."""
    verb = fn.__name__
    kinds = SIGNATURES[verb]
    @functools.cache
    def signature() -> tuple[inspect.Signature, set[str]]:
        """The verb's signature and its ``*args`` names, at the first call, not at import."""
        sig = inspect.signature(fn)
        return sig, {p.name for p in sig.parameters.values() if p.kind is p.VAR_POSITIONAL}

    @functools.wraps(fn)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        sig, star = signature()
        try:
            bound = sig.bind(self, *args, **kwargs)
        except TypeError as e:
            raise ScheduleArgumentError(f"{verb}: {e}; {usage(verb)}") from None
        bad = next(((p, v) for p, value in list(bound.arguments.items())[1:]
                    for v in (value if p in star else (value,)) if not kinds[p].test(v)), None)
        if bad is None:
            return fn(self, *args, **kwargs)
        param, value = bad
        if isinstance(value, Real):  # a float, bool or huge int: the verb's own check
            try:  # words it best ("split factor of k must be a positive integer, not 2.5")
                fn(self, *args, **kwargs)
            except PolyoptError:
                raise
            except Exception:  # a crash inside: the message below says why
                pass
        raise ScheduleArgumentError(f"{verb}: argument {param!r} must be {kinds[param].text}, "
                                    f"not {_shown(value)}; {usage(verb)}")
    return wrapper  # type: ignore[return-value]


def _shown(v: Any) -> str:
    text = repr(v)
    return f"{type(v).__name__} {text if len(text) <= 60 else text[:60] + '...'}"
