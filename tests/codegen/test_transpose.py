"""Transposing copies printed as vector-register transposes (polyopt.codegen.transpose):
whole and overlapping blocks, narrower blocks for short sides, float64, the scalar
fallback, the interior of a padded read, and the copies it must leave alone, against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import polyopt
from polyopt.codegen import transpose

pytestmark = [pytest.mark.cc, pytest.mark.usefixtures("avx512")]

TR = "def tr({t}(N,M) A) -> (B) {{ B(i,j) = A(j,i) }}"
NUMPY = {"float": np.float32, "double": np.float64}
CONV = ("def conv(float(N,C,H,W) I, float(F,C,KH,KW) Wt) -> (O) {\n"
        "  O(n,f,h,w) +=! I(n,r_c,h + r_kh,w + r_kw) * Wt(f,r_c,r_kh,r_kw)\n}")


@pytest.mark.parametrize(("dtype", "shape"), [("float", (77, 70)), ("float", (64, 48)),
                                              ("double", (77, 70))])
def test_transposed_copy_matches_numpy(dtype: str, shape: tuple[int, int]) -> None:
    n, m = shape
    kernel = polyopt.compile(TR.format(t=dtype), sizes={"N": n, "M": m})
    assert "transposed copy" in kernel.source  # 16 x 16 tiles: whole (and partial) blocks
    a = np.random.default_rng(0).standard_normal((n, m)).astype(NUMPY[dtype])
    np.testing.assert_array_equal(kernel(a), a.T)


def test_scalar_fallback_matches_numpy() -> None:
    """Compilers without ``__builtin_shufflevector`` transpose through a local array."""
    kernel = polyopt.compile(TR.format(t="float"), sizes={"N": 40, "M": 33},
                             options={"cflags": ["-DPO_NO_SHUFFLEVECTOR"]})
    assert "transposed copy" in kernel.source
    a = np.random.default_rng(1).standard_normal((40, 33)).astype(np.float32)
    np.testing.assert_array_equal(kernel(a), a.T)


def test_short_sides_take_narrower_overlapping_blocks() -> None:
    """A blocked convolution's copy back over 10-wide rows: 8 x 8 blocks at 0 and 2."""
    sizes = {"N": 1, "C": 16, "H": 12, "W": 12, "F": 32, "KH": 3, "KW": 3}
    kernel = polyopt.compile(CONV, sizes=sizes)
    assert "pack('O', 1, 16, 1)" in kernel.schedule.as_python()
    assert "transposed copy O_0: 16 x 10" in kernel.source
    # The weights' rows c, kh, kw are one contiguous run of 16 * 3 * 3 in Wt.
    assert "transposed copy Wt_pack_0: 144 x 16" in kernel.source
    assert "po_transpose_8_float32" in kernel.source
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 16, 12, 12)).astype(np.float32)
    w = rng.standard_normal((32, 16, 3, 3)).astype(np.float32)
    want = _conv(x, w)
    np.testing.assert_allclose(kernel(x, w), want, rtol=1e-4, atol=1e-4 * np.sqrt(16 * 9))


@pytest.mark.parametrize(("src", "n"), [
    ("def tr(float(N,M) A) -> (B) { B(i,j) = 2 * A(j,i) }", 64),  # not a plain copy
    ("def tr(float(N,M) A) -> (B) { B(i,j) = A(i,j) }", 64),  # nothing to transpose
    ("def tr(float(N,M) A) -> (B) { B(i,j) = A(j,i) }", 3),  # sides shorter than 4 lanes
])
def test_other_copies_stay_plain(src: str, n: int) -> None:
    kernel = polyopt.compile(src, sizes={"N": n, "M": n})
    assert "transposed copy" not in kernel.source
    a = np.random.default_rng(3).standard_normal((n, n)).astype(np.float32)
    want = 2 * a.T if "2 *" in src else a.T if "A(j,i)" in src else a
    np.testing.assert_array_equal(kernel(a), want)


def test_pointwise_weights_pack_as_transposed_copies() -> None:
    """A 1x1 filter's weights ``Wt(f, c, 0, 0)`` are contiguous along ``c`` (its extent-1
    dims do not count): their pack into channel blocks is cut in strips of 16 channels and
    transposed in registers (layer 22 of ResNet-50: 446 us as gathers, 115 us so)."""
    sizes = {"N": 1, "C": 96, "H": 7, "W": 7, "F": 32, "KH": 1, "KW": 1}
    kernel = polyopt.compile(CONV, sizes=sizes)
    assert "s.split('wtp1', 16" in kernel.schedule.as_python()
    assert "transposed copy Wt_pack_0: 96 x 16" in kernel.source  # one run of 96 rows
    rng = np.random.default_rng(6)
    x = rng.standard_normal((1, 96, 7, 7)).astype(np.float32)
    w = rng.standard_normal((32, 96, 1, 1)).astype(np.float32)
    want = np.einsum("nchw,fc->nfhw", x, w[:, :, 0, 0])
    np.testing.assert_allclose(kernel(x, w), want, rtol=1e-4, atol=1e-4 * np.sqrt(96))


def test_large_copies_are_refused_before_listing_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """A broadcast's inner copy ``O(i, j, k) = A(i, k)`` over 4096 x 4096 has 65536 blocks of
    16 x 16, far beyond MAX_BLOCKS: the printer must refuse it from the count (at 131072 x
    131072 the list of blocks took all memory) and print plain loops."""
    listed: list[int] = []
    blocks = transpose.Emitter.blocks

    def counted(self: transpose.Emitter) -> list[tuple[int, int]]:
        out = blocks(self)
        listed.append(len(out))
        return out

    monkeypatch.setattr(transpose.Emitter, "blocks", counted)
    src = "def bcast(float(I,K) A) -> (O) { O(i,j,k) = A(i,k) where j in 0:4096 }"
    text = polyopt.compile(src, sizes={"I": 64, "K": 4096}).source
    assert "transposed copy" not in text
    assert all(n <= transpose.MAX_BLOCKS for n in listed), listed


def test_many_blocks_loop_over_the_columns() -> None:
    """A copy back of 32 x 35 (2 x 3 blocks of 16) loops over each row's blocks, the last
    flush with the end (gcc inlined a transpose per unrolled block: most of its time for a
    strided convolution). Copies of fewer blocks stay unrolled (the 16 x 16 tiles above)."""
    sizes = {"N": 1, "C": 8, "H": 9, "W": 37, "F": 32, "KH": 3, "KW": 3}
    kernel = polyopt.compile(CONV, sizes=sizes)
    text = kernel.source
    assert "transposed copy O_0: 32 x 35" in text
    assert "for (long po_j = 0; po_j < 35L; po_j += 16L) {" in text
    assert "const long po_c = po_j + 16L <= 35L ? po_j : 19L;" in text
    rng = np.random.default_rng(7)
    x = rng.standard_normal((1, 8, 9, 37)).astype(np.float32)
    w = rng.standard_normal((32, 8, 3, 3)).astype(np.float32)
    want = _conv(x, w)
    np.testing.assert_allclose(kernel(x, w), want, rtol=1e-4, atol=1e-4 * np.sqrt(8 * 9))


def test_a_long_copy_reads_one_group_of_source_rows_at_a_time() -> None:
    """Weights packed into 32-channel blocks, 144 x 32: each group of 16 columns (16 source
    rows, ``Wt(f, ...)`` for 16 ``f``) is copied whole before the next, so a pass reads 16
    streams, not 32 (ResNet-50 layer 23 in 32-channel blocks ran 1.14x slower so)."""
    sizes = {"N": 1, "C": 16, "H": 10, "W": 28, "F": 32, "KH": 3, "KW": 3}
    kernel = polyopt.compile(CONV, sizes=sizes, options={"knobs": {"block": 32}})
    text = kernel.source
    assert "transposed copy Wt_pack_0: 144 x 32" in text
    assert text.index("for (long po_j = 0; po_j < 32L") < text.index("for (long po_i = 0; "
                                                                      "po_i < 144L")
    rng = np.random.default_rng(8)
    x = rng.standard_normal((1, 16, 10, 28)).astype(np.float32)
    w = rng.standard_normal((32, 16, 3, 3)).astype(np.float32)
    np.testing.assert_allclose(kernel(x, w), _conv(x, w), rtol=1e-4, atol=1e-4 * np.sqrt(144))


DEPTHWISE = ("def dw(float(N,C,H,W) I, float(C,KH,KW) Wt) -> (O) {\n"
             "  O(n,c,h,w) +=! I(n,c,h + r_kh - 1,w + r_kw - 1) * Wt(c,r_kh,r_kw)\n"
             "      where pad I(0, 0, 1, 1)\n}")


def test_padded_input_packs_its_interior_as_transposed_copies() -> None:
    """A padded depthwise convolution at 14x14 computes in channel blocks: the interior
    piece of its input's pack (every load inside ``I``, no check) is transposed in
    registers, 8 x 8 blocks over 14-wide rows; the border piece stays plain, guarded loops.
    (MobileNetV2's 576-channel layer: the pack had been a scalar gather, 40% of the
    kernel's samples.)"""
    sizes = {"N": 1, "C": 64, "H": 14, "W": 14, "KH": 3, "KW": 3}
    kernel = polyopt.compile(DEPTHWISE, sizes=sizes)
    text = kernel.source
    assert "transposed copy I_pack_0: 14 x 16" in text
    assert "transposed copy I_pack_0_border" not in text
    rng = np.random.default_rng(8)
    x = rng.standard_normal((1, 64, 14, 14)).astype(np.float32)
    w = rng.standard_normal((64, 3, 3)).astype(np.float32)
    win = np.lib.stride_tricks.sliding_window_view(
        np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1))), (3, 3), axis=(2, 3))
    want = np.einsum("nchwij,cij->nchw", win, w)
    np.testing.assert_allclose(kernel(x, w), want, rtol=1e-4, atol=1e-4 * np.sqrt(9))

def _conv(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The unpadded 3x3 convolution CONV computes, in float32 through numpy."""
    return np.einsum("nchwij,fcij->nfhw",
                     np.lib.stride_tricks.sliding_window_view(x, (3, 3), axis=(2, 3)), w)
