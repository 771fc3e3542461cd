"""The pool of output memory: large outputs reuse the memory of dead ones."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import polyopt
from polyopt.runtime import pool
from polyopt.runtime.arrays import alignment


@pytest.fixture(autouse=True)
def empty_pool() -> None:
    pool.release()


BIG = (pool.min_bytes() // 4096, 1024)  # float32: pooled, whatever the host's L2


def test_a_dead_outputs_memory_serves_the_next_of_its_size() -> None:
    a = pool.empty(BIG, np.dtype(np.float32))
    address = a.ctypes.data
    assert a.flags.c_contiguous and a.flags.writeable and address % alignment() == 0
    del a
    assert pool.kept_bytes() > 0
    b = pool.empty(BIG, np.dtype(np.float32))
    assert b.ctypes.data == address and pool.kept_bytes() == 0


def test_a_view_keeps_the_memory_out_of_the_pool() -> None:
    a = pool.empty(BIG, np.dtype(np.float32))
    a[...] = 3.0
    view = a[1:, ::2]
    del a
    gc.collect()
    assert pool.kept_bytes() == 0
    other = pool.empty(BIG, np.dtype(np.float32))
    other[...] = 0.0  # its own memory: the view still reads 3
    assert (view == 3.0).all()
    del view
    assert pool.kept_bytes() > 0


def test_any_dtype_numpy_knows_is_pooled() -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    for dtype in (np.dtype(ml_dtypes.bfloat16), np.dtype(np.complex64), np.dtype(np.int8)):
        a = pool.empty(BIG, dtype)
        assert a.dtype == dtype and a.shape == BIG and a.flags.c_contiguous


def test_small_outputs_are_numpys_own() -> None:
    assert not pool.pooled((16, 16), np.dtype(np.float32))
    small = pool.empty((16, 16), np.dtype(np.float32))
    assert small.base is None
    assert pool.pooled(BIG, np.dtype(np.float32))


def test_the_pool_keeps_no_more_than_its_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    bound = 3 * pool.min_bytes() + 3 * 8192  # three outputs (each a page or two over)
    monkeypatch.setattr(pool, "keep_bytes", lambda: bound)
    arrays = [pool.empty(BIG, np.dtype(np.float32)) for _ in range(5)]
    del arrays
    assert 0 < pool.kept_bytes() <= bound


@pytest.mark.parametrize("openmp", [False, True])
def test_a_kernels_output_reuses_a_dead_ones_memory(openmp: bool) -> None:
    """Both call paths (the trampoline's bound call, and Python's) take outputs from the
    pool, and the values are the kernel's."""
    k = polyopt.compile("def add1(float(M,N) A) -> (B) { B(i,j) = A(i,j) + 1 }", "add1",
                        options={"openmp": openmp})
    x = np.random.default_rng(0).standard_normal(BIG, dtype=np.float32)
    first = k(x)
    address = first.ctypes.data
    np.testing.assert_array_equal(first, x + 1)
    del first
    again = k(x)
    assert again.ctypes.data == address
    np.testing.assert_array_equal(again, x + 1)
    keep = k(x)  # while ``again`` lives, memory of its own
    assert keep.ctypes.data != again.ctypes.data
