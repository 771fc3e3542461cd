"""Register-tile plans (``pipeline/register_tile.py``) on 1x1 convolutions: row tiles that
divide the rows when the operand moving with them stays unpacked, and the reduction cut in
L1 blocks with the loops that re-sweep the column operand's panel inside them. Each plan is
checked in its notes and, compiled, against NumPy in float64 (tolerances scaled to the
reduction's length). The machine is written out, so no test depends on this host."""

from __future__ import annotations

import numpy as np
import pytest

import polyopt
from polyopt import kernels

cc = pytest.mark.cc
AVX512 = "vector_bytes=64,vector_registers=32,cores=2,l1d_bytes=48K,l2_bytes=2M,l3_bytes=32M"


def conv1x1(c: int, f: int, hw: int, knobs: dict[str, object] | None = None) -> polyopt.Kernel:
    src = kernels.get("conv2d", stride=1, padding=0)
    options: dict[str, object] = {"tuned": False, "machine": AVX512}
    if knobs:
        options["knobs"] = knobs
    return polyopt.compile(src, "conv2d", target="c", options=options,
                           sizes={"N": 1, "C": c, "F": f, "H": hw, "W": hw, "KH": 1, "KW": 1})


def tile_note(kernel: polyopt.Kernel) -> str:
    return next(line for line in str(kernel.schedule).splitlines() if "register tile" in line)


def check(kernel: polyopt.Kernel, c: int, f: int, hw: int, seed: int) -> None:
    """The kernel against NumPy, the output buffer filled with NaN first (so a zeroing
    pass left out wrongly shows)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((1, c, hw, hw)).astype(np.float32)
    w = rng.standard_normal((f, c, 1, 1)).astype(np.float32)
    out = np.full((1, f, hw, hw), np.nan, np.float32)
    kernel(x, w, outputs=[out])
    ref = np.einsum("fc,nchw->nfhw", w[:, :, 0, 0].astype(np.float64), x.astype(np.float64))
    tol = 1e-6 * c
    np.testing.assert_allclose(out, ref, rtol=tol, atol=tol)


@cc
@pytest.mark.parametrize(("c", "f", "rows"), [(32, 32, 16), (16, 96, 24), (8, 30, 15)])
def test_unpacked_weights_take_dividing_rows(c: int, f: int, rows: int) -> None:
    """A short reduction leaves the weights (the operand moving with the rows, f) unpacked:
    the row tile shrinks from the registers' 28 to a divisor of f, so no partial tile runs
    as plain loops, every tile is full and starts at zero, and no zeroing pass prints."""
    # 80 columns: 5 vectors, the natural layout, 1 vector a row (as written, not merged)
    kernel = conv1x1(c, f, 80, {"merge": False})
    assert f"register tile {rows}x16" in tile_note(kernel)
    assert "leaves A" in tile_note(kernel)
    assert kernel.source.count("_init */") == 0
    assert "} else {" not in kernel.source.split("register tile of", 1)[1]
    check(kernel, c, f, 80, seed=c + f)


@cc
def test_knob_rows_keep_the_partial_tile() -> None:
    """Rows fixed by the knobs stay as given: the partial tile runs as plain loops, which
    read the output, so its zeroing stays."""
    kernel = conv1x1(32, 32, 80, {"mr": 28})
    assert "register tile 28x16" in tile_note(kernel)
    assert kernel.source.count("_init */") == 1
    check(kernel, 32, 32, 80, seed=3)


@cc
def test_long_reduction_blocks_fit_l1_with_rows_inside() -> None:
    """A 1x1 convolution at 14x14 computes NCHW16c (rows of 14 are no whole vectors): its
    16-channel blocks' weights (1024 x 16 floats, 64 KiB) would stream from L2 at each of
    the 14 output rows. The reduction is cut in equal blocks whose steps of both panels
    fill half of L1 (6 x 171 for a 14x16 tile), with the rows ``h`` inside the blocks."""
    kernel = conv1x1(1024, 64, 14)
    note = tile_note(kernel)
    assert "register tile 14x16" in note
    assert "reduction c in blocks of 171" in note
    assert "h2 inside the reduction blocks" in note
    check(kernel, 1024, 64, 14, seed=11)


@cc
def test_short_reduction_stays_whole() -> None:
    """A reduction whose panel steps fit in half of L1 whole is not cut (nothing to keep
    there), and no loop moves inside it."""
    kernel = conv1x1(128, 32, 14)
    note = tile_note(kernel)
    assert "reduction c in blocks of 128" in note
    assert "inside the reduction blocks" not in note
    check(kernel, 128, 32, 14, seed=5)


@cc
def test_kc_knob_keeps_rows_outside() -> None:
    """A reduction block fixed by the knobs is the model's no more: at the whole reduction
    the rows stay outside it, as before."""
    kernel = conv1x1(1024, 32, 14, {"kc": 1024})
    note = tile_note(kernel)
    assert "reduction c in blocks of 1024" in note
    assert "inside the reduction blocks" not in note
    check(kernel, 1024, 32, 14, seed=13)


PV = "def pv(float(H,S,T) P, float(H,T,D) V) -> (O) { O(h,s,d) +=! P(h,s,r_t) * V(h,r_t,d) }"


@cc
@pytest.mark.parametrize(("knobs", "packed"), [({}, False), ({"mc": 0, "mr": 8}, True)])
def test_a_row_operand_held_in_l2_row_blocks_is_not_copied(knobs: dict[str, object],
                                                         packed: bool) -> None:
    """attention's P @ V: P (1 MB a head, over half of a 1 MB L2) is swept twice by the two
    column tiles of D = 64. The row blocks keep a block of it in L2 between the passes, so a
    copy would only add a pass over memory; without row blocks (``mc=0``) the packing rule
    copies it (the rows fixed: the cost model weighs no other plan)."""
    machine = AVX512.replace("l2_bytes=2M", "l2_bytes=1M")
    sizes = {"H": 2, "S": 512, "T": 512, "D": 64}
    kernel = polyopt.compile(PV, sizes=sizes, options={"tuned": False, "machine": machine,
                                                       "knobs": knobs})
    note = tile_note(kernel)
    assert ("packs A (swept 2x)" if packed else "leaves A (swept 2x)") in note
    assert ("L2 blocks" in note) != packed
    rng = np.random.default_rng(5)
    p = rng.standard_normal((2, 512, 512)).astype(np.float32)
    v = rng.standard_normal((2, 512, 64)).astype(np.float32)
    np.testing.assert_allclose(kernel(p, v), p.astype(np.float64) @ v, rtol=1e-4, atol=1e-3)
