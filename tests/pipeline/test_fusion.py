"""Fusion after register tiling (``pipeline/fusion.py``): a padded copy whose nest starts with
loops of one iteration (batch of one, block of one) fuses into the convolution's channel
loop, so the copy, the zeroing and the register tiles of a channel run in one parallel loop
with the copy kept as a slice; a copy that the convolution reads across all channels stays
a pass of its own. A blocked depthwise convolution's copies fuse into its channel blocks
the same way, a weights copy does not. Results checked against NumPy in float64."""

from __future__ import annotations

import numpy as np
import pytest

# same directory: pytest puts it on the path
from test_depthwise_layout import AVX512
from test_depthwise_layout import sizes as dw_sizes
from test_depthwise_layout import source as depthwise

import polyopt
from polyopt import kernels

cc = pytest.mark.cc


def verbs(sched: polyopt.Schedule, verb: str) -> list[tuple[object, ...]]:
    return [st.args for st in sched.steps if st.verb == verb]


def test_padded_copy_fuses_into_the_channel_loop() -> None:
    """48-wide rows keep the rows layout (whole vectors); the padded copy of I and its
    border piece join the convolution's channel loop, which is the one parallel loop, and
    the copy shrinks to one channel's slice."""
    sched = polyopt.schedule(depthwise(), "depthwise_conv2d", sizes=dw_sizes(1, 24, 40, 48),
                             options={"machine": AVX512})
    assert not any(args[0] == "O" for args in verbs(sched, "pack"))
    assert len(verbs(sched, "parallel")) == 1
    (top,) = verbs(sched, "parallel")
    assert ("I_pack", top[0]) in verbs(sched, "contract")


def test_strided_copy_fuses_too() -> None:
    """A stride-2 layer's copy split in phases has no block of one, only the batch: it
    fuses the same way."""
    sched = polyopt.schedule(depthwise(stride=2), "depthwise_conv2d",
                             sizes=dw_sizes(1, 24, 64, 64), options={"machine": AVX512})
    assert len(verbs(sched, "parallel")) == 1
    assert any(args[0] == "I_pack" for args in verbs(sched, "contract"))


def test_copy_read_across_channels_stays_apart() -> None:
    """conv2d reads every input channel for each output channel: fusing the copy at the
    channel loop would be illegal (even with C = F), so the copy keeps its own nest."""
    conv = kernels.get("conv2d", stride=1, padding=1)
    sched = polyopt.schedule(conv, "conv2d", sizes={"N": 1, "C": 16, "F": 16, "H": 64,
                                                     "W": 64, "KH": 3, "KW": 3},
                             options={"machine": AVX512})
    assert not any(args[0] == "I_pack" for args in verbs(sched, "contract"))
    assert len(verbs(sched, "parallel")) > 1


def test_blocked_copies_fuse_into_the_channel_blocks() -> None:
    """14-wide rows compute in channel blocks (NCHW16c): the input's blocked copy (a window
    operand) and the weights' copy join the block loop below the batch of one, one
    parallel loop instead of two, and the copy back still runs with each row's tiles."""
    sched = polyopt.schedule(depthwise(), "depthwise_conv2d", sizes=dw_sizes(1, 64, 14, 14),
                             options={"machine": AVX512})
    assert any(args[0] == "O" for args in verbs(sched, "pack"))
    assert len(verbs(sched, "parallel")) == 1
    text = str(sched)
    assert "O_0: ou0" in text and "O_0: ou2" in text  # the copy back fused per row


def test_a_weights_copy_keeps_its_own_pass() -> None:
    """A 1x1 convolution's weights copy is no window operand: it keeps its nest (fused into
    the block loop, MobileNetV2 layer 8 ran 1.34x slower)."""
    conv = kernels.get("conv2d", stride=1, padding=0)
    sizes = {"N": 1, "C": 24, "F": 144, "H": 56, "W": 56, "KH": 1, "KW": 1}
    sched = polyopt.schedule(conv, "conv2d", sizes=sizes, options={
        "machine": AVX512, "knobs": {"merge": False}})  # h, w as written
    tops = [line for line in str(sched).splitlines() if line.startswith("for ")]
    assert len(tops) == 2 and tops[0] == "for wtp2:" and "Wt_pack_0" not in tops[1]

def reference(x: np.ndarray, w: np.ndarray, stride: int, pad: int,
              dilation: int) -> np.ndarray:
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    _, _, h, wd = x.shape
    ho = (h + 2 * pad - 2 * dilation - 1) // stride + 1
    wo = (wd + 2 * pad - 2 * dilation - 1) // stride + 1
    out = np.zeros((x.shape[0], x.shape[1], ho, wo))
    for i in range(3):
        for j in range(3):
            win = xp[:, :, i * dilation:i * dilation + stride * (ho - 1) + 1:stride,
                     j * dilation:j * dilation + stride * (wo - 1) + 1:stride]
            out += win * w[None, :, 0, i, j, None, None].astype(np.float64)
    return out


# (N, C, H, W, stride, pad, dilation): rows wide enough for whole vectors, so the copy
# fuses; odd sizes (partial register tiles), stride 2, dilation 2 with pad 2, batch 2;
# then channel blocks (rows shorter than a vector): 14 and 7 wide, stride 2, batch 2.
SHAPES = [
    (1, 24, 40, 48, 1, 1, 1), (1, 5, 37, 35, 1, 1, 1), (1, 8, 64, 64, 2, 1, 1),
    (1, 8, 33, 35, 1, 2, 2), (2, 6, 32, 32, 1, 1, 1), (1, 3, 45, 51, 2, 1, 1),
    (1, 64, 14, 14, 1, 1, 1), (1, 48, 7, 7, 1, 1, 1), (1, 32, 28, 28, 2, 1, 1),
    (2, 32, 14, 14, 1, 1, 1),
]


@cc
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_fused_copy_matches_numpy(shape: tuple[int, ...]) -> None:
    n, c, h, w, stride, pad, dilation = shape
    kernel = polyopt.compile(depthwise(stride, pad, dilation), "depthwise_conv2d",
                             target="c", sizes=dw_sizes(n, c, h, w),
                             options={"tuned": False, "machine": AVX512})
    rng = np.random.default_rng(sum(shape))
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    wt = rng.standard_normal((c, 1, 3, 3)).astype(np.float32)
    tol = 1e-6 * 9  # float32 sums of 9 taps
    np.testing.assert_allclose(kernel(x, wt), reference(x, wt, stride, pad, dilation),
                               rtol=tol, atol=tol)
