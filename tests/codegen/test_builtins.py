"""Every builtin the language accepts has a C implementation, and nothing else does."""

from __future__ import annotations

import pytest

from polyopt.codegen.builtins import EXTRA, LIBM, c_function
from polyopt.errors import CodegenError
from polyopt.lang.resolve import BUILTINS


def test_codegen_covers_exactly_the_language_builtins() -> None:
    assert set(BUILTINS) == LIBM | EXTRA
    assert not LIBM & EXTRA


def test_an_unknown_builtin_is_refused_not_misspelled_into_c() -> None:
    with pytest.raises(CodegenError, match="no C implementation of builtin 'relu'"):
        c_function("relu", "float32")
