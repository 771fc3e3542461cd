"""Grouped, depthwise and strided convolutions through the automatic CPU pipeline, checked
against NumPy: channels in vector lanes only where a vector loads whole (no per-lane
gather across groups), floor-division indices and strided reads in register tiles, and
the phase copy that makes a strided read unit-stride."""

from __future__ import annotations

import numpy as np
import pytest

import polyopt
from polyopt import ir, kernels
from polyopt.codegen.linear import LANE, index_lin, text
from polyopt.poly.relayout import Pack

cc = pytest.mark.cc
AVX512 = "vector_bytes=64,vector_registers=32"


def grouped_reference(x: np.ndarray, w: np.ndarray, groups: int, stride: int,
                      pad: int) -> np.ndarray:
    """PyTorch's conv2d (weights (F, C // groups, KH, KW)) in float64."""
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    kh, kw = w.shape[2:]
    win = np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(2, 3))
    win = win[:, :, ::stride, ::stride]
    cg, fg = x.shape[1] // groups, w.shape[0] // groups
    parts = [np.einsum("nchwij,fcij->nfhw", win[:, g * cg:(g + 1) * cg],
                       w[g * fg:(g + 1) * fg].astype(np.float64)) for g in range(groups)]
    return np.concatenate(parts, axis=1)


def run(kernel: polyopt.Kernel, x: np.ndarray, w: np.ndarray, groups: int, stride: int,
        pad: int) -> None:
    tol = 1e-4 * np.sqrt(w.shape[1] * w.shape[2] * w.shape[3])
    np.testing.assert_allclose(kernel(x, w), grouped_reference(x, w, groups, stride, pad),
                               rtol=tol, atol=tol)


def inputs(n: int, c: int, h: int, w: int, f: int, cg: int,
           k: int = 3) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(n * 1000 + c * 10 + f)
    return (rng.standard_normal((n, c, h, w)).astype(np.float32),
            rng.standard_normal((f, cg, k, k)).astype(np.float32))


# (N, groups, channels per group in, out per group, stride, H, W)
GROUPED = [
    (1, 2, 8, 8, 1, 9, 11),
    (1, 4, 3, 3, 2, 13, 10),
    (1, 32, 4, 4, 1, 7, 9),
    (2, 32, 4, 4, 2, 11, 7),
    (1, 4, 1, 1, 2, 9, 13),
    (2, 2, 4, 8, 2, 10, 9),
    (1, 4, 8, 8, 2, 15, 17),
    (1, 2, 32, 32, 1, 6, 5),
]


@cc
@pytest.mark.parametrize(("n", "groups", "cg", "fg", "stride", "h", "w"), GROUPED)
def test_grouped_conv_matches_numpy(n: int, groups: int, cg: int, fg: int, stride: int,
                                    h: int, w: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POLYOPT_MACHINE", AVX512)
    c, f = groups * cg, groups * fg
    src = kernels.get("conv2d", stride=stride, padding=1, groups=groups, in_channels=c,
                      out_channels=f)
    sizes = {"N": n, "C": c, "H": h, "W": w, "F": f, "CK": cg, "KH": 3, "KW": 3}
    kernel = polyopt.compile(src, "conv2d", sizes=sizes)
    steps = kernel.schedule.as_python()
    if fg % 16:  # 16 lanes would span groups: the channels stay out of the vector lanes
        assert "pack('O'" not in steps
    run(kernel, *inputs(n, c, h, w, f, cg), groups, stride, 1)


@cc
def test_a_group_of_fewer_channels_than_lanes_is_register_tiled(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """ResNeXt's 4 channels per group: no channel blocks (each lane would read another
    group's input), rows of the image in a register tile whose input channel is a
    floor-division of the output channel."""
    monkeypatch.setenv("POLYOPT_MACHINE", AVX512)
    src = kernels.get("conv2d", padding=1, groups=8, in_channels=32, out_channels=32)
    sizes = {"N": 1, "C": 32, "H": 20, "W": 32, "F": 32, "CK": 4, "KH": 3, "KW": 3}
    kernel = polyopt.compile(src, "conv2d", sizes=sizes)
    assert "pack('O'" not in kernel.schedule.as_python()
    assert "register tile of O_0" in kernel.source and "po_floord" in kernel.source
    run(kernel, *inputs(1, 32, 20, 32, 32, 4), 8, 1, 1)


@cc
def test_a_block_that_keeps_one_group_stays_blocked(monkeypatch: pytest.MonkeyPatch) -> None:
    """32 channels per group: a 16-lane block reads one input channel (a broadcast)."""
    monkeypatch.setenv("POLYOPT_MACHINE", AVX512)
    src = kernels.get("conv2d", padding=1, groups=2, in_channels=64, out_channels=64)
    sizes = {"N": 1, "C": 64, "H": 7, "W": 7, "F": 64, "CK": 32, "KH": 3, "KW": 3}
    kernel = polyopt.compile(src, "conv2d", sizes=sizes)
    assert "pack('O', 1, 16, 1)" in kernel.schedule.as_python()
    run(kernel, *inputs(1, 64, 7, 7, 64, 32), 2, 1, 1)


@cc
@pytest.mark.parametrize(("n", "c", "h", "w", "stride"),
                         [(3, 5, 13, 11, 2), (2, 16, 40, 38, 2), (1, 7, 9, 8, 1),
                          (2, 3, 35, 33, 2)])
def test_depthwise_conv_matches_numpy(n: int, c: int, h: int, w: int, stride: int,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POLYOPT_MACHINE", AVX512)
    src = kernels.get("depthwise_conv2d", stride=stride, padding=1)
    kernel = polyopt.compile(src, "depthwise_conv2d",
                             sizes={"N": n, "C": c, "H": h, "W": w, "KH": 3, "KW": 3})
    # the padded copy splits the strided dimension in phases where the output's rows fill
    # at least half their vectors (policy.phase_min_lane_fill): 6 of 16 lanes do not
    phased = f"pack('I', 3, {stride}, 3, True)" in kernel.schedule.as_python()
    assert phased == (stride > 1 and (w - 1) // stride + 1 >= 8)
    run(kernel, *inputs(n, c, h, w, c, 1), c, stride, 1)


@cc
def test_a_strided_depthwise_conv_is_register_tiled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POLYOPT_MACHINE", AVX512)
    src = kernels.get("depthwise_conv2d", stride=2, padding=1)
    kernel = polyopt.compile(src, "depthwise_conv2d",
                             sizes={"N": 2, "C": 4, "H": 64, "W": 64, "KH": 3, "KW": 3})
    assert "register tile of O_0" in kernel.source
    run(kernel, *inputs(2, 4, 64, 64, 4, 1), 4, 2, 1)


@cc
def test_the_phase_pack_verb(monkeypatch: pytest.MonkeyPatch) -> None:
    """``pack(.., phase=True)`` by hand, on a program-order schedule of a strided
    convolution (stride 3, an extent that is no multiple of it)."""
    src = kernels.get("conv2d", stride=3, padding=2)
    sizes = {"N": 1, "C": 3, "H": 11, "W": 10, "F": 2, "KH": 3, "KW": 3}
    s = polyopt.schedule(src, "conv2d", auto=False, sizes=sizes).pack("I", 3, 3, 2, True)
    assert "pack('I', 3, 3, 2, True)" in s.as_python()
    assert s.layout == (Pack("I", 3, 3, 2, True),)
    kernel = polyopt.compile(src, "conv2d", schedule=s, sizes=sizes)
    x, w = inputs(1, 3, 11, 10, 2, 3)
    run(kernel, x, w, 1, 3, 2)


def test_floor_division_atoms_in_linear_forms() -> None:
    def var(n: str) -> ir.Var:
        return ir.Var("int32", n, "index")

    def const(v: int) -> ir.Const:
        return ir.Const("int32", v)

    def op(o: str, a: ir.Expr, b: ir.Expr) -> ir.Binary:
        return ir.Binary("int32", o, a, b)

    env = {"w": {"c2": 16, LANE: 1}, "kw": {"c6": 1}, "f": {"c0": 1}}
    strided = op("+", op("*", const(2), var("w")), var("kw"))  # 2*w + kw
    assert index_lin(op("/", strided, const(2)), env, 16) is None  # not without atoms
    quotient = index_lin(op("/", strided, const(2)), env, 16, atoms=True)
    assert quotient is not None and quotient[LANE] == 1  # unit stride along the lanes
    assert text(quotient, str) == "(po_floord((c6), 2L) + 16L * c2)"
    rem = index_lin(op("%", strided, const(2)), env, 16, atoms=True)
    assert rem is not None and LANE not in rem
    group = op("+", op("*", op("/", var("f"), const(4)), const(4)), var("kw"))
    lin = index_lin(group, env, 16, atoms=True)
    assert lin is not None and text(lin, str) == "(4L * po_floord((c0), 4L) + c6)"
    lanes = op("/", op("+", var("w"), var("kw")), const(4))  # each lane its own quotient
    assert index_lin(lanes, env, 16, atoms=True) is None


@cc
def test_a_batch_copies_and_convolves_each_channel_in_turn(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Below the batch loop, the input copy (and its border), the zeroing and the
    convolution fuse per channel: the channel's copy is still in cache when it is read."""
    monkeypatch.setenv("POLYOPT_MACHINE", AVX512)
    src = kernels.get("depthwise_conv2d", stride=2, padding=1)
    kernel = polyopt.compile(src, "depthwise_conv2d",
                             sizes={"N": 2, "C": 3, "H": 34, "W": 34, "KH": 3, "KW": 3})
    assert "s.fuse('ip1', 'ip12', 'c', 'c2')" in kernel.schedule.as_python()
    run(kernel, *inputs(2, 3, 34, 34, 3, 1), 3, 2, 1)
