"""Scratch arrays aligned to the host's cache line and vector width."""

from __future__ import annotations

import numpy as np
import pytest

import polyopt
from polyopt.costmodel.machine import host
from polyopt.runtime.arrays import aligned_zeros, alignment


@pytest.mark.parametrize("shape", [(), (0,), (3, 5), (1 << 20,), (7, 1 << 16)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8])
def test_aligned_zeros_are_zeros_on_a_line(shape: tuple[int, ...], dtype: type) -> None:
    a = aligned_zeros(shape, dtype)
    assert a.shape == shape and a.dtype == dtype and a.flags.c_contiguous and a.flags.writeable
    assert not a.any() and (a.size == 0 or a.ctypes.data % alignment() == 0)
    a[...] = 1  # its own memory
    assert a.sum() == a.size


def test_alignment_covers_a_vector_and_a_line() -> None:
    m = host()
    assert alignment() >= max(m.line_bytes, m.vector_bytes) and alignment() % 16 == 0


def test_kernels_pack_into_aligned_scratch() -> None:
    """numpy's large arrays start 16 bytes past a line; the packed copies must not."""
    src = "def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,r_k) * B(r_k,n) }"
    k = polyopt.compile(src, sizes={"M": 512, "N": 512, "K": 512},
                        options={"knobs": {"pack_a": True}})
    a = np.ones((512, 512), np.float32)
    np.testing.assert_allclose(k(a, a), a @ a)
    (_, addresses), = k._calls._scratch.buffers.values()
    assert "A_pack" in k.source and addresses
    assert all(x % alignment() == 0 for x in addresses)
