"""The subsampled copy of an input read at a stride (``polyopt.poly.subsample``): which
dimensions it keeps one phase of, the ``pack(.., subsample=True)`` verb against NumPy (and
with a factor of 1, a copy in panel order), its refusals, and the automatic CPU pipeline
choosing it for 1x1 convolutions."""

from __future__ import annotations

import numpy as np
import pytest

import polyopt
from polyopt import ScheduleError, ir, kernels
from polyopt.lang import build_program, define
from polyopt.poly.relayout import Pack
from polyopt.poly.subsample import read_phases

cc = pytest.mark.cc
AVX512 = "vector_bytes=64,vector_registers=32"


def program_of(src: str, sizes: dict[str, int]) -> ir.Program:
    return build_program(define(src), sizes=sizes)

# A strided 1x1 convolution whose reads start at an offset (phase 1 along h, 2 along w).
SHIFTED = """
def shifted(float(N,C,H,W) I, float(F,C) Wt) -> (O) {
    O(n,f,h,w) +=! I(n, r_c, 2*h + 1, 3*w + 2) * Wt(f, r_c)
}
"""


def reference(x: np.ndarray, w: np.ndarray, stride: tuple[int, int],
              start: tuple[int, int], out: tuple[int, int]) -> np.ndarray:
    """``O(n,f,h,w) = sum_c I(n, c, sh*h + h0, sw*w + w0) Wt(f, c)`` in float64."""
    (sh, sw), (h0, w0), (ho, wo) = stride, start, out
    sub = x[:, :, h0:h0 + sh * ho:sh, w0:w0 + sw * wo:sw].astype(np.float64)
    return np.einsum("nchw,fc->nfhw", sub, w.reshape(w.shape[0], -1).astype(np.float64))


def check(got: np.ndarray, want: np.ndarray, reduction: int) -> None:
    # float32 sums of `reduction` products: error grows like sqrt(reduction) * eps
    tol = 4 * np.sqrt(reduction) * np.finfo(np.float32).eps
    assert np.linalg.norm(got - want) <= tol * np.linalg.norm(want)


def test_the_phases_a_strided_1x1_convolution_reads() -> None:
    sizes = {"N": 1, "C": 4, "H": 8, "W": 8, "F": 2, "KH": 1, "KW": 1}
    conv = program_of(kernels.get("conv2d", stride=2, padding=0), sizes)
    assert read_phases(conv, "I", 2) == {2: 0, 3: 0}  # the 1x1 taps are one value each
    assert read_phases(conv, "I", 3) == {}
    shifted = program_of(SHIFTED, {"N": 1, "C": 4, "H": 9, "W": 11, "F": 2})
    assert read_phases(shifted, "I", 2) == {2: 1}
    assert read_phases(shifted, "I", 3) == {3: 2}


def test_a_3x3_strided_convolution_reads_every_phase() -> None:
    sizes = {"N": 1, "C": 4, "H": 8, "W": 8, "F": 2, "KH": 3, "KW": 3}
    conv = program_of(kernels.get("conv2d", stride=2, padding=1), sizes)
    assert read_phases(conv, "I", 2) == {}


@cc
@pytest.mark.parametrize("factor, kept", [(2, 2), (3, 3)])
def test_the_subsample_pack_verb(factor: int, kept: int) -> None:
    """By hand on a program-order schedule: phase 1 of h (stride 2) or phase 2 of w
    (stride 3), extents that are no multiple of the stride, h moved before the channels."""
    sizes = {"N": 2, "C": 5, "H": 9, "W": 11, "F": 3}
    s = polyopt.schedule(SHIFTED, "shifted", auto=False, sizes=sizes)
    s = s.pack("I", kept, factor, 1, subsample=True)
    assert s.layout == (Pack("I", kept, factor, 1, subsample=True),)
    assert f"pack('I', {kept}, {factor}, 1, False, True)" in s.as_python()
    kernel = polyopt.compile(SHIFTED, "shifted", schedule=s, sizes=sizes)
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 5, 9, 11), np.float32)
    w = rng.standard_normal((3, 5), np.float32)
    check(kernel(x, w), reference(x, w, (2, 3), (1, 2), (4, 3)), 5)


@pytest.mark.parametrize("factor, dim, padding, message", [
    (2, 2, 1, "padded along a dimension read at a stride"),
    (1, 1, 0, "nothing to do"),
])
def test_subsample_refusals(factor: int, dim: int, padding: int, message: str) -> None:
    src = kernels.get("conv2d", stride=2, padding=padding)
    sizes = {"N": 1, "C": 4, "H": 8, "W": 8, "F": 2, "KH": 1, "KW": 1}
    s = polyopt.schedule(src, "conv2d", auto=False, sizes=sizes)
    with pytest.raises(ScheduleError, match=message):
        s.pack("I", dim, factor, 1, subsample=True)


@cc
def test_a_factor_of_one_moves_a_dimension() -> None:
    """``I_pack(n, h, c, w) = I(n, c, h, w)``: a 1x1 convolution's input in panel order
    (a blocked copy would add a last dimension of one element), with its padding."""
    src = kernels.get("conv2d", stride=1, padding=1)
    sizes = {"N": 2, "C": 6, "H": 5, "W": 7, "F": 3, "KH": 1, "KW": 1}
    s = polyopt.schedule(src, "conv2d", auto=False, sizes=sizes)
    s = s.pack("I", 2, 1, 1, subsample=True)
    assert [t.shape for t in s.poly.program.locals] == [("2", "(5) + (1) + (1)", "6",
                                                         "(7) + (1) + (1)")]
    kernel = polyopt.compile(src, "conv2d", schedule=s, sizes=sizes)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 6, 5, 7), np.float32)
    w = rng.standard_normal((3, 6, 1, 1), np.float32)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    check(kernel(x, w), reference(xp, w, (1, 1), (0, 0), (7, 9)), 6)


def test_no_phase_no_subsample() -> None:
    src = kernels.get("conv2d", stride=2, padding=1)
    sizes = {"N": 1, "C": 4, "H": 8, "W": 8, "F": 2, "KH": 3, "KW": 3}
    s = polyopt.schedule(src, "conv2d", auto=False, sizes=sizes)
    with pytest.raises(ScheduleError, match="in one phase"):
        s.pack("I", 2, 2, 1, subsample=True)
    with pytest.raises(ScheduleError, match="not both"):
        s.pack("I", 2, 2, 1, True, True)


@cc
@pytest.mark.parametrize("f, c, hw, stride, copied", [
    (64, 96, 28, 2, True),  # 64 output channels reuse each input element: the copy pays
    (16, 96, 28, 2, False),  # one channel block reads it once (policy.pack_min_sweeps)
    (64, 96, 15, 2, True),  # an odd input: the last row and column are never read
    (512, 256, 14, 1, True),  # unit stride: the rows move before the channels only...
    (128, 96, 14, 1, False),  # ...when the copy is cheap beside the contraction (its input
    # fits in L2: policy.panel_l2_max_share)
])
def test_the_pipeline_copies_1x1_convolution_inputs_in_panels(
        monkeypatch: pytest.MonkeyPatch, f: int, c: int, hw: int, stride: int,
        copied: bool) -> None:
    monkeypatch.setenv("POLYOPT_MACHINE", AVX512 + ",cores=2,l2_bytes=2M")
    src = kernels.get("conv2d", stride=stride, padding=0)
    sizes = {"N": 1, "C": c, "H": hw, "W": hw, "F": f, "KH": 1, "KW": 1}
    # its pixels as written (merged, a unit-stride 1x1 is a product over 196 pixels)
    kernel = polyopt.compile(src, "conv2d", sizes=sizes, options={"knobs": {"merge": False}})
    steps = kernel.schedule.as_python()
    assert (f"pack('I', 2, {stride}, 1, False, True)" in steps) == copied, steps
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, c, hw, hw), np.float32)
    w = rng.standard_normal((f, c, 1, 1), np.float32)
    out = (hw - 1) // stride + 1
    check(kernel(x, w), reference(x, w, (stride, stride), (0, 0), (out, out)), c)


@cc
def test_a_3x3_convolution_gets_no_panel_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Filter taps read each input element several times: no compact copy of them."""
    monkeypatch.setenv("POLYOPT_MACHINE", AVX512)
    src = kernels.get("conv2d", stride=2, padding=1)
    sizes = {"N": 1, "C": 96, "H": 14, "W": 14, "F": 64, "KH": 3, "KW": 3}
    steps = polyopt.schedule(src, "conv2d", sizes=sizes).as_python()
    assert "True)" not in steps, steps
