"""Blocked layouts: packed inputs (with their padding), blocked outputs, and the CPU
pipeline's NCHW16c convolutions, each checked against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import polyopt
from polyopt import ScheduleError, ir, kernels

cc = pytest.mark.cc
CONV = kernels.source("conv2d")


def conv_reference(x: np.ndarray, w: np.ndarray, pad: int) -> np.ndarray:
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    kh, kw = w.shape[2:]
    win = np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(2, 3))
    return np.einsum("nchwij,fcij->nfhw", win, w.astype(np.float64))


def check_conv(kernel: polyopt.Kernel, shape: tuple[int, ...], pad: int) -> None:
    n, c, h, w, f, k = shape
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    wt = rng.standard_normal((f, c, k, k)).astype(np.float32)
    tol = 1e-4 * np.sqrt(c * k * k)
    np.testing.assert_allclose(kernel(x, wt), conv_reference(x, wt, pad), rtol=tol, atol=tol)


@cc
def test_blocked_output_with_packed_weights_and_padded_input() -> None:
    sizes = {"PH": 1, "PW": 1}
    s = polyopt.schedule(CONV, "conv2d", auto=False, sizes=sizes)
    s = s.pack("O", 1, 4, 1).pack("Wt", 0, 4).pack("I", 0, 1, 0)
    text = str(s)
    assert "O_pack_0" in text and "O_0" in text and "I_pack_0_border" in text
    assert "O_pack_0_border" not in text  # the padded copy absorbed the border piece
    assert s.stmts[-1] == "O_0"  # the unpack runs last
    check_conv(polyopt.compile(CONV, "conv2d", schedule=s, sizes=sizes), (2, 6, 9, 7, 5, 3), 1)


def test_outputs_are_packed_before_other_steps() -> None:
    s = polyopt.schedule(CONV, "conv2d", auto=False).reverse("w")
    with pytest.raises(ScheduleError, match="pack or merge O before other transformations"):
        s.pack("O", 1, 4, 1)


@cc
@pytest.mark.parametrize(("shape", "pad"), [((1, 16, 10, 10, 32, 3), 1),
                                            ((1, 32, 7, 9, 16, 1), 0)])
def test_auto_pipeline_blocks_conv_outputs(shape: tuple[int, ...], pad: int,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POLYOPT_MACHINE", "vector_bytes=64,vector_registers=32")
    n, c, h, w, f, k = shape
    sizes = {"N": n, "C": c, "H": h, "W": w, "F": f, "KH": k, "KW": k, "PH": pad,
             "PW": pad}
    kernel = polyopt.compile(CONV, "conv2d", sizes=sizes)
    steps = kernel.schedule.as_python()
    assert "pack('O', 1, 16, 1)" in steps and "pack('Wt', 0, 16, 0)" in steps
    assert "register tile" in kernel.source
    check_conv(kernel, shape, pad)


@cc
def test_every_output_that_wants_channel_blocks_gets_them(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Both gradients of a convolution in one def: the input's and the weights'. Blocking
    only the first left the weights' as a plain loop nest, 25x slower than alone."""
    monkeypatch.setenv("POLYOPT_MACHINE", "vector_bytes=64,vector_registers=32")
    grad = polyopt.grad(kernels.get("conv2d", padding=1), "conv2d")
    sizes = {"N": 2, "C": 32, "H": 8, "W": 8, "F": 32, "KH": 3, "KW": 3, "H_O": 8, "W_O": 8}
    steps = polyopt.schedule(grad, "conv2d_grad", sizes=sizes).as_python()
    assert "pack('d_I', 1, 16, 1)" in steps and "pack('d_Wt', 0, 16, 0)" in steps
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 32, 8, 8)).astype(np.float32)
    wt = rng.standard_normal((32, 32, 3, 3)).astype(np.float32)
    d_o = rng.standard_normal((2, 32, 8, 8)).astype(np.float32)
    d_x, d_wt = polyopt.compile(grad, "conv2d_grad", sizes=sizes)(x, wt, d_o)
    apart = [polyopt.compile(polyopt.grad(kernels.get("conv2d", padding=1), "conv2d", wrt=[w]),
                             "conv2d_grad", sizes=sizes)(x, wt, d_o) for w in ("I", "Wt")]
    np.testing.assert_allclose(d_x, apart[0], rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(d_wt, apart[1], rtol=1e-4, atol=1e-3)


@cc
def test_an_elementwise_epilogue_runs_in_the_blocked_local() -> None:
    src = kernels.source("conv2d_bias_relu")
    sizes = {"PH": 1, "PW": 1}
    s = polyopt.schedule(src, "conv2d_bias_relu", auto=False, sizes=sizes).pack("O", 1, 4, 1)
    # bias + ReLU runs over the block and its lanes, then a plain copy unpacks O
    assert s.stmts[-1] == "O_0" and "O_pack_1" in s.stmts
    program = s.poly.program
    relu = next(st for st in program.stmts if st.name == "O_pack_1")
    reads = [e for e in relu.rhs.walk() if isinstance(e, ir.Read) and e.tensor == "O_pack"]
    # its own element: the block and lane iterators, no division to gather through
    assert reads and all(isinstance(ix, ir.Var) for r in reads for ix in r.indices)
    unpack = program.stmts[-1]
    assert isinstance(unpack.rhs, ir.Read) and unpack.rhs.tensor == "O_pack"
    kernel = polyopt.compile(src, "conv2d_bias_relu", schedule=s, sizes=sizes)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 5, 6, 7)).astype(np.float32)
    wt = rng.standard_normal((8, 5, 3, 3)).astype(np.float32)
    bias = rng.standard_normal(8).astype(np.float32)
    want = np.maximum(conv_reference(x, wt, 1) + bias[None, :, None, None], 0)
    np.testing.assert_allclose(kernel(x, wt, bias), want, rtol=1e-4, atol=1e-4 * np.sqrt(45))


@cc
def test_contracted_locals_live_in_per_iteration_slices() -> None:
    src = kernels.get("softmax")
    sizes = {"N": 9, "D": 13}
    s = polyopt.schedule(src, "softmax", sizes=sizes)
    assert ("E", "n", 0) in s.contractions  # the automatic pipeline contracts the row
    kernel = polyopt.compile(src, "softmax", sizes=sizes)
    assert "float po_slice_E[13];" in kernel.source
    x = np.random.default_rng(2).standard_normal((9, 13)).astype(np.float32)
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(kernel(x), e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-6)


def test_contraction_refuses_what_crosses_iterations() -> None:
    src = kernels.get("softmax")
    s = polyopt.schedule(src, "softmax", auto=False)
    with pytest.raises(ScheduleError, match="E is used outside loop n2"):
        s.contract("E", "n2")  # program order: E's reader runs in another nest
    with pytest.raises(ScheduleError, match="'X' is not a local"):
        s.contract("X", "n")


@cc
def test_the_machine_option_sizes_tiles_and_vectors() -> None:
    src = "def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,r_k) * B(r_k,n) }"
    avx2 = {"vector_bytes": 32, "vector_registers": 16}
    # 48 rows: whole 6-row tiles (A stays unpacked, so rows that 6 does not divide would
    # take a divisor of their own)
    kernel = polyopt.compile(src, sizes={"M": 48, "N": 64, "K": 70},
                             options={"machine": avx2})
    assert "po_v8_float32" in kernel.source  # 8 lanes, not the host's
    assert "split('m2', 6" in kernel.schedule.as_python()  # the 6 x 16 AVX2 register tile
    rng = np.random.default_rng(3)
    a, b = (rng.standard_normal(s).astype(np.float32) for s in ((48, 70), (70, 64)))
    np.testing.assert_allclose(kernel(a, b), a @ b, rtol=1e-4, atol=1e-3)
    with pytest.raises(polyopt.OptionError, match="option machine: unknown field 'bogus'"):
        polyopt.compile(src, options={"machine": "bogus=1"})


LAYOUT_MACHINE = ("vector_bytes=64,vector_registers=32,cores=2,l1d_bytes=32K,l2_bytes=1M,"
                  "l3_bytes=32M")


def _layout_note(stride: int, pad: int, sizes: dict[str, int],
                 knobs: dict | None = None) -> tuple[polyopt.Schedule, str]:
    s = polyopt.schedule(kernels.get("conv2d", stride=stride, padding=pad), "conv2d",
                         sizes=sizes, options={"machine": LAYOUT_MACHINE, "tuned": False,
                                               "knobs": knobs or {}})
    return s, next((n for n in s.notes if n.startswith("layout:")), "")


def test_the_cost_model_chooses_the_layout() -> None:
    """Both layouts are scheduled and the one predicted faster is kept (``faster_layout``).
    A 1x1 convolution 24 -> 144 at 56x56 (MobileNetV2 layer 8) in channel blocks: its
    own layout ran 1.3-1.6x slower (0.18-0.23 against 0.14-0.16 ms); a 3x3 stride-2
    convolution of 3 channels at 224x224 (MobileNetV2 layer 1) in its own layout with a
    padded copy of its input: 0.135-0.227 ms against 0.147-0.249 in blocks of 32
    (each pair measured in one process; the machine's phase moved both)."""
    pointwise = {"N": 1, "C": 24, "H": 56, "W": 56, "F": 144, "KH": 1, "KW": 1}
    s, note = _layout_note(1, 0, pointwise, {"merge": False})  # its pixels as written
    assert note.startswith("layout: O in blocks of 16") and "O" in {p.tensor for p in s.layout}
    first = {"N": 1, "C": 3, "H": 224, "W": 224, "F": 32, "KH": 3, "KW": 3}
    s, note = _layout_note(2, 1, first)
    assert note.startswith("layout: the def's own") and "O" not in {p.tensor for p in s.layout}
    s, note = _layout_note(2, 1, first, {"block": 32})  # the knob fixes it: no comparison
    assert note == "" and "O" in {p.tensor for p in s.layout}


@cc
def test_the_layout_the_model_keeps_computes_the_same() -> None:
    sizes = {"N": 1, "C": 3, "H": 30, "W": 30, "F": 32, "KH": 3, "KW": 3}
    for knobs in ({}, {"block": 32}, {"block": 0}):
        k = polyopt.compile(kernels.get("conv2d", stride=1, padding=1), "conv2d", sizes=sizes,
                            options={"machine": LAYOUT_MACHINE, "knobs": knobs, "tuned": False})
        check_conv(k, (1, 3, 30, 30, 32, 3), 1)
