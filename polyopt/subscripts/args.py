"""``numpy.einsum``'s calling forms and options, normalized and checked.

numpy takes the subscripts as a string, ``einsum("ij,jk->ik", a, b)``, or interleaved with
the operands as sublists of ints, ``einsum(a, [0, 1], b, [1, 2], [0, 2])``: any sequence of
ints in [0, 52) (a list, a tuple, a range, an integer array) and ``Ellipsis``, int ``k``
meaning numpy's letter ``k`` of ``A..Za..z``. ``parse_args`` turns either into one subscripts
string and a tuple of arrays, and checks ``out=``, ``dtype=``, ``order=`` and ``casting=``
as numpy does, raising what numpy raises (a ``ValueError`` or ``TypeError``) as a
``PolyoptError``. It reads shapes and dtypes, never the data.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast, get_args

import numpy as np

from polyopt.errors import OptionError, OptionTypeError

__all__ = ["CASTINGS", "ORDERS", "Casting", "EinsumArgs", "parse_args"]

Casting = Literal["no", "equiv", "safe", "same_kind", "unsafe"]
CASTINGS: tuple[str, ...] = get_args(Casting)
ORDERS = ("C", "F", "A", "K")
SUBLIST_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"  # numpy's int -> letter


@dataclass(frozen=True)
class EinsumArgs:
    """One einsum call in a single form: subscripts as a string, operands as arrays."""

    subscripts: str
    operands: tuple[np.ndarray, ...]
    out: np.ndarray | None
    dtype: np.dtype | None  # None: the operands' result type
    order: str  # "C", "F", "A" or "K"
    casting: Casting


def parse_args(args: tuple[Any, ...], *, out: Any = None, dtype: Any = None,
               order: Any = "K", casting: Any = "safe",
               unknown: Mapping[str, Any] | None = None) -> EinsumArgs:
    """The call ``einsum(*args, out=, dtype=, order=, casting=, **unknown)``, normalized."""
    if unknown:
        raise OptionTypeError(f"einsum got unexpected keyword argument(s) "
                              f"{', '.join(map(repr, unknown))}")
    if not args:
        raise OptionError("einsum needs the subscripts and at least one operand")
    if isinstance(args[0], str):
        subscripts, operands = args[0], args[1:]
    else:
        subscripts, operands = _from_sublists(args)
    if not operands:
        raise OptionError(f"einsum subscripts {subscripts!r} were given no operand")
    if out is not None and not isinstance(out, np.ndarray):
        raise OptionTypeError(f"einsum out= must be a numpy array, not {type(out).__name__}")
    return EinsumArgs(subscripts, tuple(np.asarray(op) for op in operands), out,
                      _dtype(dtype), _order(order), _casting(casting))


def _dtype(dtype: Any) -> np.dtype | None:
    if dtype is None:
        return None
    try:
        return np.dtype(dtype)
    except TypeError as e:
        raise OptionTypeError(f"einsum dtype={dtype!r} is not a numpy dtype") from e


def _order(order: Any) -> str:
    if not isinstance(order, str):
        raise OptionTypeError(f"einsum order= must be a string, not {type(order).__name__}")
    if order.upper() not in ORDERS:
        raise OptionError(f"einsum order={order!r} is not one of 'C', 'F', 'A' or 'K'")
    return order.upper()


def _casting(casting: Any) -> Casting:
    if casting not in CASTINGS:
        raise OptionError(f"einsum casting={casting!r} is not one of {', '.join(CASTINGS)}")
    return cast(Casting, casting)


def _from_sublists(args: tuple[Any, ...]) -> tuple[str, tuple[Any, ...]]:
    """numpy's interleaved form ``(op0, sublist0, op1, sublist1, ..., [out])`` as a string."""
    pairs = args if len(args) % 2 == 0 else args[:-1]
    ins = ",".join(_term(s) for s in pairs[1::2])
    return (ins if pairs is args else f"{ins}->{_term(args[-1])}"), pairs[0::2]


def _term(sublist: Any) -> str:
    """One sublist as subscript letters (and '...')."""
    if isinstance(sublist, str | bytes) or not _iterable(sublist):
        raise OptionTypeError(f"einsum expected a sublist (list of ints), not {sublist!r}")
    return "".join(_letter(s) for s in sublist)


def _iterable(x: Any) -> bool:
    if isinstance(x, np.ndarray):
        return x.ndim == 1
    try:
        iter(x)
    except TypeError:
        return False
    return True


def _letter(s: Any) -> str:
    if s is Ellipsis:
        return "..."
    try:
        k = operator.index(s)
    except TypeError as e:
        raise OptionTypeError(f"einsum sublists must hold ints in [0, 52) and Ellipsis, "
                              f"not {s!r}") from e
    if not 0 <= k < len(SUBLIST_LETTERS):
        raise OptionError(f"einsum sublists must hold ints in [0, 52) and Ellipsis, not {s!r}")
    return SUBLIST_LETTERS[k]
