"""numpy's own einsum tests against polyopt.einsum.

numpy ships them in its wheel (``numpy/_core/tests/test_einsum.py``); class ``TestEinsum``
runs here with ``numpy.einsum`` replaced by ``polyopt.einsum`` (and ``numpy.einsum_path`` by
``polyopt.einsum_path``), so every assertion numpy makes about its einsum is made about
polyopt's. Skipped: the object-dtype tests, with the reason (polyopt compiles C kernels, and
object arrays hold Python objects whose ``+`` and ``*`` only Python can run).
"""

from __future__ import annotations

import numpy as np
import pytest

import polyopt

numpy_tests = pytest.importorskip("numpy._core.tests.test_einsum",
                                  reason="numpy's test suite is not installed with numpy")

pytestmark = pytest.mark.cc

OBJECT_DTYPE = {"test_einsum_object_errors", "test_object_loop", "test_einsum_sums_object"}


@pytest.fixture(autouse=True)
def _polyopt_einsum(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    name = request.node.originalname
    if name in OBJECT_DTYPE:
        pytest.skip("object dtype: polyopt compiles C kernels for numeric dtypes")
    monkeypatch.setattr(np, "einsum", polyopt.einsum)
    monkeypatch.setattr(np, "einsum_path", polyopt.einsum_path)


class TestEinsum(numpy_tests.TestEinsum):  # type: ignore[misc]
    """numpy's ``TestEinsum``, with numpy.einsum replaced by polyopt.einsum."""

    # numpy's version binds np.einsum and np.einsum_path as parameters at import time,
    # before any replacement: these are looked up when the test runs.
    @pytest.mark.parametrize("do_opt", [True, False])
    @pytest.mark.parametrize("einsum_fn", ["einsum", "einsum_path"])
    def test_einsum_errors(self, do_opt: bool, einsum_fn: str) -> None:
        fn = np.einsum if einsum_fn == "einsum" else np.einsum_path
        super().test_einsum_errors(do_opt, fn)

