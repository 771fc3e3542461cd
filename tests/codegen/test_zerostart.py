"""Dead zeroing passes (``codegen/zerostart.py``): a ``+=!`` contraction whose every
instance runs in register tiles that start at zero prints no ``_init`` fill; one with a
padded window's border piece, a blocked reduction or no register tile keeps it. Results
are checked against NumPy in float64 with the output buffer filled with NaN, so a fill
left out wrongly shows."""

from __future__ import annotations

import numpy as np
import pytest

import polyopt
from polyopt import kernels

cc = pytest.mark.cc
AVX512 = "vector_bytes=64,vector_registers=32,cores=2,l1d_bytes=48K,l2_bytes=2M,l3_bytes=32M"
MM = "def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,r_k) * B(r_k,n) }"


def compile_dw(n: int, c: int, h: int, w: int, pad: int = 1) -> polyopt.Kernel:
    src = kernels.get("depthwise_conv2d", stride=1, padding=pad)
    return polyopt.compile(src, "depthwise_conv2d", target="c",
                           sizes={"N": n, "C": c, "H": h, "W": w, "KH": 3, "KW": 3},
                           options={"tuned": False, "machine": AVX512})


def dw_reference(x: np.ndarray, w: np.ndarray, pad: int) -> np.ndarray:
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    ho, wo = xp.shape[2] - 2, xp.shape[3] - 2
    out = np.zeros((*x.shape[:2], ho, wo))
    for i in range(3):
        for j in range(3):
            out += xp[:, :, i:i + ho, j:j + wo] * w[None, :, 0, i, j, None, None]
    return out


def fills(kernel: polyopt.Kernel) -> int:
    return kernel.source.count("_init */")


@cc
@pytest.mark.parametrize("shape", [(1, 24, 40, 48), (1, 5, 37, 35), (2, 6, 32, 32)],
                         ids=lambda s: "x".join(map(str, s)))
def test_tiles_from_zero_drop_the_fill(shape: tuple[int, int, int, int]) -> None:
    """Rows layout, the padded copy taken first: every update is in a register tile (full,
    or partial through the zeroed scratch tile) that starts at zero; no fill is printed,
    and the NaN the output buffer held is overwritten everywhere."""
    kernel = compile_dw(*shape)
    assert fills(kernel) == 0
    rng = np.random.default_rng(sum(shape))
    x = rng.standard_normal(shape).astype(np.float32)
    wt = rng.standard_normal((shape[1], 1, 3, 3)).astype(np.float32)
    out = np.full(shape, np.nan, np.float32)
    kernel(x, wt, outputs=[out])
    np.testing.assert_allclose(out, dw_reference(x, wt, 1), rtol=1e-5, atol=1e-5)


@cc
def test_blocked_reduction_keeps_the_fill() -> None:
    """With a 256 KiB L2, K = 4096 is split in blocks (KC = 128): each tile adds one
    block to what the one before stored, so it loads the output and the fill stays."""
    small_l2 = AVX512.replace("l2_bytes=2M", "l2_bytes=256K")
    kernel = polyopt.compile(MM, sizes={"M": 128, "K": 4096, "N": 128},
                             options={"tuned": False, "machine": small_l2})
    assert "reduction k in blocks of 128" in str(kernel.schedule)
    assert fills(kernel) == 1
    rng = np.random.default_rng(7)
    a = rng.standard_normal((128, 4096)).astype(np.float32)
    b = rng.standard_normal((4096, 128)).astype(np.float32)
    out = np.full((128, 128), np.nan, np.float32)
    kernel(a, b, outputs=[out])
    tol = 1e-6 * 4096
    np.testing.assert_allclose(out, a.astype(np.float64) @ b, rtol=tol, atol=tol)


@cc
def test_no_register_tile_keeps_the_fill() -> None:
    """A reduction into a vector (a row sum) runs no register tile: its fill stays."""
    src = "def rs(float(M,K) A) -> (S) { S(m) +=! A(m,r_k) }"
    kernel = polyopt.compile(src, sizes={"M": 64, "K": 96}, options={"tuned": False})
    assert fills(kernel) == 1
    a = np.random.default_rng(3).standard_normal((64, 96)).astype(np.float32)
    np.testing.assert_allclose(kernel(a), a.astype(np.float64).sum(1), rtol=1e-4, atol=1e-4)


@cc
@pytest.mark.parametrize("mnk", [(512, 512, 512), (500, 512, 300)],
                         ids=lambda s: "x".join(map(str, s)))
def test_partial_rows_over_an_unpacked_column_operand_drop_the_fill(
        mnk: tuple[int, int, int]) -> None:
    """B left unpacked (by the knob: its rows' L1 sets would have it packed), the columns
    a multiple of the tile's: a partial row tile reads no more of B than a full one, so it
    runs as a register tile through the zeroed scratch tile (it needs no padded copy of B),
    and no fill is printed."""
    m, n, k = mnk
    knobs = {"mr": 14, "pack_b": False}  # 14 divides neither
    kernel = polyopt.compile(MM, sizes={"M": m, "N": n, "K": k},
                             options={"tuned": False, "machine": AVX512, "knobs": knobs})
    assert "B_pack" not in kernel.source and "po_tile" in kernel.source
    assert fills(kernel) == 0 and "B" not in dict(kernel.lowered().source.tails)
    rng = np.random.default_rng(m + n + k)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    out = np.full((m, n), np.nan, np.float32)
    kernel(a, b, outputs=[out])
    tol = 1e-6 * k
    np.testing.assert_allclose(out, a.astype(np.float64) @ b, rtol=tol, atol=tol)
