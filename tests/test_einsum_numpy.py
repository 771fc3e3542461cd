"""numpy's own einsum tests against polyopt.einsum.

numpy ships them in its wheel (``numpy/_core/tests/test_einsum.py``); class ``TestEinsum``
runs here with ``numpy.einsum`` replaced by ``polyopt.einsum`` (and ``numpy.einsum_path`` by
``polyopt.einsum_path`` once polyopt has one), so every assertion numpy makes about its
einsum is made about polyopt's. Skipped, each with its reason:

- the object-dtype tests: polyopt compiles C kernels, and object arrays hold Python objects
  whose ``+`` and ``*`` only Python can run;
- ``test_einsum_0d_out``: it writes a float64 result into an int64 ``out=`` under the
  default casting='safe', which numpy's own plain path refuses (TypeError) and its
  optimized path lets through (its pairwise steps assign the result without the check);
  polyopt applies ``casting=`` to ``out=`` whatever ``optimize=`` says;
- (only in a checkout without polyopt's ``einsum_path``/``optimize=``) the tests of
  ``einsum_path``; the other tests' ``optimize=`` arguments are then dropped: in numpy they
  choose an order of pairwise contractions, which must give the result of the single
  contraction, so every result is still checked.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import polyopt
from polyopt.errors import OptionError

numpy_tests = pytest.importorskip("numpy._core.tests.test_einsum",
                                  reason="numpy's test suite is not installed with numpy")

pytestmark = pytest.mark.cc

OBJECT_DTYPE = {"test_einsum_object_errors", "test_object_loop", "test_einsum_sums_object"}
# np.einsum(..., out=<int64 0-d>, optimize='optimal') on float64 operands: numpy's optimized
# path skips the casting='safe' check of out= that its plain path makes; polyopt's does not.
UNCHECKED_OUT_CAST = {"test_einsum_0d_out"}


def _has_optimize() -> bool:
    try:
        polyopt.einsum("i", np.ones(1), optimize=True)  # a view: nothing is compiled
    except OptionError:
        return False
    return True


def _without_optimize(*operands: Any, optimize: Any = False, **options: Any) -> Any:
    """polyopt.einsum with numpy's ``optimize=`` dropped (see the module docstring)."""
    return polyopt.einsum(*operands, **options)


EINSUM = polyopt.einsum if _has_optimize() else _without_optimize
EINSUM_PATH = getattr(polyopt, "einsum_path", None)


@pytest.fixture(autouse=True)
def _polyopt_einsum(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    name = request.node.originalname
    if name in OBJECT_DTYPE:
        pytest.skip("object dtype: polyopt compiles C kernels for numeric dtypes")
    if name in UNCHECKED_OUT_CAST:
        pytest.skip("numpy's optimize= path writes out= without the casting='safe' check "
                    "its plain path makes; polyopt checks casting= on every path")
    monkeypatch.setattr(np, "einsum", EINSUM)
    if EINSUM_PATH is not None:
        monkeypatch.setattr(np, "einsum_path", EINSUM_PATH)


def _path_or_skip() -> Any:
    if EINSUM_PATH is None:
        pytest.skip("polyopt has no einsum_path yet (issue 16, item 2)")
    return EINSUM_PATH


class TestEinsum(numpy_tests.TestEinsum):  # type: ignore[misc]
    """numpy's ``TestEinsum``, with numpy.einsum replaced by polyopt.einsum."""

    # numpy's version binds np.einsum and np.einsum_path as parameters at import time,
    # before any replacement: these are looked up when the test runs.
    @pytest.mark.parametrize("do_opt", [True, False])
    @pytest.mark.parametrize("einsum_fn", ["einsum", "einsum_path"])
    def test_einsum_errors(self, do_opt: bool, einsum_fn: str) -> None:
        fn = np.einsum if einsum_fn == "einsum" else _path_or_skip()
        super().test_einsum_errors(do_opt, fn)

    def test_einsum_sorting_behavior(self) -> None:
        _path_or_skip()
        super().test_einsum_sorting_behavior()
