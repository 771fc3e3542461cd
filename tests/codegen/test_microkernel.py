"""Register-tile micro-kernels: full tiles, partial tiles (scratch tile or plain loops),
float64, size-generic kernels, and the shapes they must refuse, against NumPy."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import polyopt
from polyopt import kernels
from polyopt.codegen import microkernel

pytestmark = [pytest.mark.cc, pytest.mark.usefixtures("avx512")]

MM = "def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,r_k) * B(r_k,n) }"
MM64 = "def mm(double(M,K) A, double(K,N) B) -> (C) { C(m,n) +=! A(m,r_k) * B(r_k,n) }"


def operands(m: int, k: int, n: int, dtype: type = np.float32) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(m * 10007 + k * 101 + n)
    return tuple(rng.standard_normal(s).astype(dtype) for s in ((m, k), (k, n)))


@pytest.mark.parametrize("shape", [(28, 70, 64), (37, 70, 45), (100, 130, 90)])
def test_specialized_register_tiles_match_numpy(shape: tuple[int, int, int]) -> None:
    """The tile is asked for: the model may find plain loops faster (37 x 70 x 45, whose
    13-column tail runs 6 vector iterations at 16 lanes: 7-10 us against 15-29 tiled)."""
    m, k, n = shape
    kernel = polyopt.compile(MM, sizes={"M": m, "K": k, "N": n},
                             options={"knobs": {"register_tile": True}})
    assert "register tile" in kernel.source
    a, b = operands(m, k, n)
    np.testing.assert_allclose(kernel(a, b), a @ b, rtol=1e-4, atol=1e-4 * np.sqrt(k))


def test_partial_tiles_of_packed_operands_use_a_scratch_tile() -> None:
    kernel = polyopt.compile(MM, sizes={"M": 100, "K": 130, "N": 90},
                             options={"knobs": {"pack": True}})
    assert "po_tile[" in kernel.source  # the edge tiles run the micro-kernel too


def test_partial_tiles_read_within_the_packed_locals_allocation() -> None:
    """A partial tile reads its missing rows and lanes too (and discards them): for each
    packed local it reads so, the kernel says how many elements past the local's end the
    reads may reach, and the local is allocated with them. A 100 x 130 x 90 product's
    last row tile of 14 reads 13 rows past A_pack's end (one element each, the rows being its
    innermost dimension); a depthwise convolution's tiles of R rows of 58-element rows
    read R - 1 rows and a vector's lanes past its padded copy."""
    mm = polyopt.compile(MM, sizes={"M": 100, "K": 130, "N": 90},
                         options={"knobs": {"pack": True, "mr": 14}})
    note = next(n for n in mm.schedule.notes if "register tile" in n)
    mr, nr = map(int, re.search(r"register tile (\d+)x(\d+)", note).groups())  # type: ignore[union-attr]
    assert dict(mm.lowered().source.tails) == {"A_pack": mr - 1, "B_pack": nr - 1}
    dw = kernels.get("depthwise_conv2d", PH=1, PW=1)
    sizes = {"N": 1, "C": 144, "H": 56, "W": 56, "KH": 3, "KW": 3}
    kernel = polyopt.compile(dw, "depthwise_conv2d", sizes=sizes)
    rows = int(re.search(r"po_tile\[(\d+)\]\[\d+\] = ", kernel.source).group(1))  # type: ignore[union-attr]
    assert dict(kernel.lowered().source.tails)["I_pack"] >= (rows - 1) * 58


def test_an_operand_that_moves_with_rows_and_columns_gets_no_register_tile() -> None:
    """A batched matrix-vector product: X(b,i,j) moves with the rows (b) and the columns
    (i), so no operand is reused across rows, and packing X for a tile would only copy
    it (and read past its rows on partial tiles). It runs as dot products over j."""
    src = "def bmv(float(B,M,N) X, float(B,N) Y) -> (Z) { Z(b,i) +=! X(b,i,r_j) * Y(b,r_j) }"
    kernel = polyopt.compile(src, sizes={"B": 20, "M": 40, "N": 64})
    assert "register tile" not in kernel.source and "X_pack" not in kernel.source
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal((20, 40, 64), np.float32), rng.standard_normal((20, 64),
                                                                              np.float32)
    np.testing.assert_allclose(kernel(x, y), np.einsum("bij,bj->bi", x, y), rtol=1e-4,
                               atol=1e-4 * 8)


def test_float64_register_tiles() -> None:
    kernel = polyopt.compile(MM64, sizes={"M": 30, "K": 70, "N": 40})
    assert "po_v8_float64" in kernel.source
    a, b = operands(30, 70, 40, np.float64)
    np.testing.assert_allclose(kernel(a, b), a @ b, rtol=1e-12, atol=1e-12 * np.sqrt(70))


@pytest.mark.parametrize("shape", [(1, 1, 1), (13, 5, 17), (64, 80, 96), (65, 81, 97)])
def test_size_generic_kernels_guard_every_tile(shape: tuple[int, int, int]) -> None:
    kernel = polyopt.compile(MM, parametric=True)
    assert "register tile" in kernel.source
    m, k, n = shape
    a, b = operands(m, k, n)
    np.testing.assert_allclose(kernel(a, b), a @ b, rtol=1e-4, atol=1e-4 * np.sqrt(k))


def test_one_operand_read_twice_broadcast_and_as_vectors() -> None:
    # A(m, k) is a broadcast along the rows and A(n, k) a vector along the columns.
    src = "def f(float(M,K) A) -> (C) { C(m,n) +=! A(m,r_k) * A(n,r_k) }"
    kernel = polyopt.compile(src, sizes={"M": 40, "K": 50})
    a = np.random.default_rng(0).standard_normal((40, 50)).astype(np.float32)
    np.testing.assert_allclose(kernel(a), a @ a.T, rtol=1e-4, atol=1e-3)


def test_transposed_and_triangular_operands() -> None:
    nt = polyopt.compile(kernels.get("matmul_nt"), "matmul_nt", sizes={"M": 40, "N": 70,
                                                                        "K": 90})
    assert "B_pack" in nt.source  # B(n, k) is packed so its columns are contiguous lanes
    a, bt = operands(40, 90, 70)
    b = np.ascontiguousarray(bt.T)
    np.testing.assert_allclose(nt(a, b), a @ b.T, rtol=1e-4, atol=1e-3)
    syrk = polyopt.compile(kernels.get("polybench_syrk"), "polybench_syrk",
                           sizes={"N": 70, "M": 80})
    rng = np.random.default_rng(4)
    x = rng.standard_normal((70, 80)).astype(np.float32)
    c = rng.standard_normal((70, 70)).astype(np.float32)
    want = np.where(np.tri(70, dtype=bool), 0.5 * c + 1.5 * (x @ x.T), c)
    got = syrk(np.float32(1.5), np.float32(0.5), x, c)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)


def test_depthwise_register_tile_loads_vectors_through_a_pack_by_one() -> None:
    """Depthwise convolution: the padded input copy is ``I_pack(n, c, h, w, 0)`` (a pack by
    1 leaves a last dim of extent 1), so its lanes run along ``w``: vector loads, not a
    broadcast of one element."""
    src = kernels.get("depthwise_conv2d", padding=1)
    sizes = {"N": 1, "C": 3, "H": 56, "W": 40, "KH": 3, "KW": 3}
    k = polyopt.compile(src, "depthwise_conv2d", sizes=sizes)
    assert "register tile of O_0" in k.source
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 3, 56, 40)).astype(np.float32)
    w = rng.standard_normal((3, 1, 3, 3)).astype(np.float32)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1))).astype(np.float64)
    want = sum(xp[:, :, i:i + 56, j:j + 40] * w[None, :, 0, i, j, None, None]
               for i in range(3) for j in range(3))
    np.testing.assert_allclose(k(x, w), want, rtol=1e-5, atol=1e-5)


# -- accumulators that start at zero ---------------------------------------------------------
MM_ACC = "def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) += A(m,r_k) * B(r_k,n) }"


def _zero_starts(source: str) -> int:
    return source.count("acc_0_0 = {0};")


def test_a_tile_that_runs_the_whole_reduction_starts_at_zero() -> None:
    """+=! zeroes C before its first update, so a tile over all of K never reads C."""
    kernel = polyopt.compile(MM, sizes={"M": 64, "K": 32, "N": 64})
    assert _zero_starts(kernel.source) and "memcpy(&acc_0_0" not in kernel.source
    a, b = operands(64, 32, 64)
    np.testing.assert_allclose(kernel(a, b), a @ b, rtol=1e-4, atol=1e-4 * np.sqrt(32))


def test_blocks_of_the_reduction_and_the_callers_buffer_load_the_accumulators() -> None:
    """A tile over one block of K continues the previous block's sums; ``+=`` without ``!``
    adds to what the caller's buffer holds."""
    blocked = polyopt.compile(MM, sizes={"M": 64, "K": 64, "N": 64},
                              options={"knobs": {"kc": 16}})
    assert not _zero_starts(blocked.source) and "memcpy(&acc_0_0" in blocked.source
    a, b = operands(64, 64, 64)
    np.testing.assert_allclose(blocked(a, b), a @ b, rtol=1e-4, atol=1e-4 * 8)
    acc = polyopt.compile(MM_ACC, sizes={"M": 64, "K": 32, "N": 64})
    assert not _zero_starts(acc.source)
    a, b = operands(64, 32, 64)
    c = np.ones((64, 64), np.float32)
    acc(a, b, outputs=[c])
    np.testing.assert_allclose(c, 1 + a @ b, rtol=1e-4, atol=1e-4 * np.sqrt(32))


@pytest.mark.parametrize("padding", [0, 1])
def test_a_padded_window_split_into_interior_and_border_sums_right(padding: int) -> None:
    """The border piece of a padded window updates the same outputs as the interior's
    tiles near the edge (the interior may start at zero only where it runs every tap)."""
    sizes = {"N": 1, "C": 8, "H": 12, "W": 40, "F": 32, "KH": 3, "KW": 3}
    kernel = polyopt.compile(kernels.get("conv2d", padding=padding), sizes=sizes)
    rng = np.random.default_rng(padding)
    x = rng.standard_normal((1, 8, 12, 40)).astype(np.float32)
    w = rng.standard_normal((32, 8, 3, 3)).astype(np.float32)
    xp = np.pad(x, ((0, 0), (0, 0), (padding,) * 2, (padding,) * 2))
    windows = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3))
    want = np.einsum("nchwij,fcij->nfhw", windows, w)
    np.testing.assert_allclose(kernel(x, w), want, rtol=1e-4, atol=1e-4 * 9)


# -- a filter's rows unrolled into the tile ----------------------------------------------------
def _tile_body(source: str) -> str:
    """The first full register tile's text (accumulators, loop, stores)."""
    start = source.index("register tile of O_0")
    end = source.find("} else {", start)  # none when every tile is full
    return source[start:end if end >= 0 else len(source)]


@pytest.mark.parametrize("shape", [(1, 4, 40, 48, 1, 1, 1), (1, 3, 37, 35, 1, 1, 1),
                                   (1, 4, 64, 64, 2, 1, 1), (1, 4, 33, 35, 1, 2, 2)],
                         ids=lambda s: "x".join(map(str, s)))
def test_filter_rows_unrolled_share_the_input_rows(shape: tuple[int, ...],
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path: Path) -> None:
    """``kh`` moves the input as the tile's rows do: unrolled into the tile, each input row
    loaded per ``kw`` step serves up to three output rows, so the tile loads fewer vectors
    than it updates (it loaded one per update before); ``kw`` stays a loop. Odd sizes
    (partial tiles), stride 2 (a phase copy: rows two apart) and dilation 2 too. The cap
    on unrolled updates (``Caps.max_unrolled_updates``) is raised so these tiles unroll."""
    monkeypatch.setattr(microkernel, "MAX_UNROLLED_UPDATES", 128)
    monkeypatch.setenv("POLYOPT_CACHE_DIR", str(tmp_path))  # not the default cap's kernels
    n, c, h, w, stride, pad, dilation = shape
    extra = {"dilation": dilation} if dilation != 1 else {}
    src = kernels.get("depthwise_conv2d", stride=stride, padding=pad, **extra)
    k = polyopt.compile(src, "depthwise_conv2d", sizes={"N": n, "C": c, "H": h, "W": w,
                                                        "KH": 3, "KW": 3})
    body = _tile_body(k.source)
    loads, updates = body.count("__builtin_memcpy(&x0_"), body.count(" += (x0_")
    assert updates and loads < updates
    assert body.count("for (long") == 1  # kw; kh is unrolled
    rng = np.random.default_rng(sum(shape))
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    wt = rng.standard_normal((c, 1, 3, 3)).astype(np.float32)
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad))).astype(np.float64)
    ho = (h + 2 * pad - 2 * dilation - 1) // stride + 1
    wo = (w + 2 * pad - 2 * dilation - 1) // stride + 1
    want = sum(xp[:, :, i * dilation:i * dilation + stride * (ho - 1) + 1:stride,
                  j * dilation:j * dilation + stride * (wo - 1) + 1:stride]
               * wt[None, :, 0, i, j, None, None] for i in range(3) for j in range(3))
    np.testing.assert_allclose(k(x, wt), want, rtol=1e-5, atol=1e-5)


def test_a_long_reduction_stays_a_loop() -> None:
    """A matmul's k loop shares no loads between its steps and is long: not unrolled."""
    kernel = polyopt.compile(MM, sizes={"M": 28, "K": 70, "N": 64})
    body = kernel.source[kernel.source.index("register tile of C_0"):]
    assert "for (long" in body[:body.index(" += (")]


def test_each_operand_is_addressed_from_one_pointer() -> None:
    """28 rows of an unpacked A: the rows are constant offsets from one pointer per
    operand (GCC kept a pointer per row when indexed from the array, and reloaded 15 of
    them from the stack at every step), and the reduction loop is not unrolled by the
    compiler (the printer unrolls what pays)."""
    kernel = polyopt.compile(MM, sizes={"M": 56, "K": 70, "N": 16},
                             options={"knobs": {"mr": 28, "pack": False}})
    assert "const float *po_p0 = " in kernel.source
    assert "#pragma GCC unroll 1" in kernel.source
    a, b = operands(56, 70, 16)
    np.testing.assert_allclose(kernel(a, b), a @ b, rtol=1e-4, atol=1e-4 * np.sqrt(70))


def test_a_tile_with_rolled_tap_loops_turns_off_predictive_commoning() -> None:
    """A convolution's tile keeps its taps as loops inside the reduction's: the kernel's
    function is compiled without GCC's predictive commoning, which carried the input's
    broadcast values from one tap to the next and spilled them (``Dialect``). A matmul's
    tile has one rolled loop and keeps it; the guard leaves other compilers alone."""
    sizes = {"N": 1, "C": 16, "H": 10, "W": 28, "F": 32, "KH": 3, "KW": 3}
    conv = polyopt.compile(kernels.get("conv2d"), sizes=sizes)
    header = next(x for x in conv.source.splitlines() if "int polyopt_conv2d(" in x)
    assert header.startswith("PO_NESTED_TILE_LOOPS ")
    assert '#if defined(__GNUC__) && !defined(__clang__)' in conv.source
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 16, 10, 28)).astype(np.float32)
    w = rng.standard_normal((32, 16, 3, 3)).astype(np.float32)
    windows = np.lib.stride_tricks.sliding_window_view(x, (3, 3), axis=(2, 3))
    want = np.einsum("nchwij,fcij->nfhw", windows, w)
    np.testing.assert_allclose(conv(x, w), want, rtol=1e-4, atol=1e-4 * np.sqrt(144))
    mm = polyopt.compile(MM, sizes={"M": 56, "K": 70, "N": 64})
    assert "PO_NESTED_TILE_LOOPS int" not in mm.source
