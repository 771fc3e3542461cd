"""The automatic CPU pipeline's decisions (polyopt.schedule.cpu), read from the recorded
steps, and the results they give."""

from __future__ import annotations

import numpy as np
import pytest

import polyopt

TRANSPOSED = "def tr(float(N,M) A, float(M,N) B) -> (C) { C(i,j) = A(j,i) + B(i,j) }"


def test_transposed_access_is_cache_tiled_by_a_line() -> None:
    steps = polyopt.schedule(TRANSPOSED, sizes={"N": 512, "M": 512}).as_python()
    assert "s.tile(('i', 'j'), 16)" in steps and "s.vectorize('j_i')" in steps
    # Too small to tile, or no transposed access: no tiling.
    assert "tile" not in polyopt.schedule(TRANSPOSED, sizes={"N": 20, "M": 20}).as_python()
    plain = "def add(float(N,M) A, float(N,M) B) -> (C) { C(i,j) = A(i,j) + B(i,j) }"
    assert "tile" not in polyopt.schedule(plain, sizes={"N": 512, "M": 512}).as_python()


@pytest.mark.cc
def test_cache_tiled_transpose_matches_numpy() -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((77, 70)).astype(np.float32)
    b = rng.standard_normal((70, 77)).astype(np.float32)
    k = polyopt.compile(TRANSPOSED)
    np.testing.assert_array_equal(k(a, b), a.T + b)
    assert "tile" in k.schedule.as_python()
