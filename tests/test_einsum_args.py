"""polyopt.subscripts.args: numpy's calling forms and options, and numpy's exception types."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

from polyopt.errors import InputTypeError, OptionError, OptionTypeError, PolyoptError, ShapeError
from polyopt.subscripts.args import parse_args
from polyopt.subscripts.call import einsum

A = np.arange(6.0).reshape(2, 3)


@pytest.mark.parametrize(("args", "subscripts"), [
    ((A, [0, 1]), "AB"),
    ((A, np.array([0, 1])), "AB"),  # numpy's ints in an integer array (gh-15961)
    ((A, range(2)), "AB"),
    ((A, (26, 51), [51]), "az->z"),
    ((A, [Ellipsis, 1], [1, Ellipsis]), "...B->B..."),
    ((A, [0, ...], np.ones(3), [...], [0]), "A...,...->A"),
    ((3, [], A, [0, 1], []), ",AB->"),  # a Python scalar operand
    (("ij", A), "ij"),
])
def test_forms(args: tuple[Any, ...], subscripts: str) -> None:
    parsed = parse_args(args)
    assert parsed.subscripts == subscripts
    assert all(isinstance(op, np.ndarray) for op in parsed.operands)


def test_options_normalized() -> None:
    parsed = parse_args(("ij", A), dtype="f4", order="f", casting="unsafe")
    assert (parsed.dtype, parsed.order, parsed.casting) == (np.dtype(np.float32), "F", "unsafe")


def _numpy_error(call: Any) -> type[Exception]:
    """TypeError or ValueError: the builtin class of what numpy raises for ``call``."""
    try:
        call(np.einsum)
    except (TypeError, ValueError) as e:
        return TypeError if isinstance(e, TypeError) else ValueError
    raise AssertionError("numpy accepted the call")


# Each bad call raises a PolyoptError that is also the ValueError or TypeError numpy raises.
@pytest.mark.parametrize(("call", "error", "message"), [
    (lambda f: f(), OptionError, "einsum needs the subscripts and at least one operand"),
    (lambda f: f(""), OptionError, "einsum subscripts '' were given no operand"),
    (lambda f: f(0, 0), OptionTypeError, "einsum expected a sublist (list of ints), not 0"),
    (lambda f: f(*(None,) * 63), OptionTypeError, "not None"),
    (lambda f: f(A, [0, 1.5]), OptionTypeError,
     "einsum sublists must hold ints in [0, 52) and Ellipsis, not 1.5"),
    (lambda f: f(A, [0, 52]), OptionError, "not 52"),
    (lambda f: f("", 0, 0), ShapeError, "name 1 operand(s) but 2 were given"),
    (lambda f: f("ij", A, out="test"), OptionTypeError, "einsum out= must be a numpy array, "
     "not str"),
    (lambda f: f("ij", A, order="W"), OptionError, "einsum order='W' is not one of"),
    (lambda f: f("ij", A, order=3), OptionTypeError, "einsum order= must be a string, not int"),
    (lambda f: f("ij", A, casting="same_value"), OptionError,
     "einsum casting='same_value' is not one of"),
    (lambda f: f("ij", A, dtype="bad_data_type"), OptionTypeError,
     "einsum dtype='bad_data_type' is not a numpy dtype"),
    (lambda f: f("ij", A, bad_arg=0), OptionTypeError,
     "einsum got unexpected keyword argument(s) 'bad_arg'"),
    (lambda f: f("i,i", np.ones(2), np.ones(2), dtype=np.int32), InputTypeError,
     "einsum operand 0 of dtype float64 cannot be cast to int32 under casting='safe'"),
    (lambda f: f("ij->", A, out=np.empty((), np.int64)), InputTypeError,
     "einsum result of dtype float64 cannot be written to out= of dtype int64"),
    (lambda f: f("i,i", np.ones(2), np.array(["a", "b"])), OptionTypeError,
     "einsum does not support dtype <U32; only bool, integer"),
    (lambda f: f("i,i", np.ones(1), np.array([np.datetime64(0, "s")])), OptionTypeError,
     "einsum operands of dtypes float64, datetime64[s] have no common dtype"),
])
def test_errors_as_numpy(call: Any, error: type[PolyoptError], message: str) -> None:
    with pytest.raises(error, match=re.escape(message)) as info:
        call(einsum)
    assert isinstance(info.value, PolyoptError)
    numpy_raises = _numpy_error(call)
    assert isinstance(info.value, numpy_raises), f"numpy raises {numpy_raises.__name__}"
