"""Knobs: the CPU pipeline's decisions fixed by options={"knobs": ...}."""

from __future__ import annotations

import numpy as np
import pytest

import polyopt

MM = "def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,r_k) * B(r_k,n) }"
SIZES = {"M": 200, "N": 200, "K": 200}


def steps(knobs: dict) -> str:
    return polyopt.schedule(MM, sizes=SIZES, options={"knobs": knobs}).as_python()


def test_register_and_reduction_tiles_follow_the_knobs() -> None:
    code = steps({"mr": 6, "nr": 32, "kc": 64})
    assert "s.split('n2', 32" in code and "s.split('m2', 6" in code and "s.split('k', 64" in code
    assert "pack(" in steps({"pack": True}) and "pack(" not in steps({"pack": False})


def test_mc_cuts_the_rows_in_l2_blocks() -> None:
    code = steps({"mc": 60, "mr": 6})  # a multiple of the register tile's rows
    assert "s.split('m2', 60, names=('m2_c', 'm2_m'))" in code
    assert "s.split('m2_m', 6, names=('m2_o', 'm2_i'))" in code
    assert "s.reorder('k_o', 'm2_c', 'n2_o', 'm2_o', 'k_i'" in code
    assert "m2_c" not in steps({"mc": 256})  # one block would hold all 200 rows


def test_rows_outer_swaps_the_tile_loops() -> None:
    assert "s.reorder('k_o', 'n2_o', 'm2_o', 'k_i'" in steps({})
    assert "s.reorder('k_o', 'm2_o', 'n2_o', 'k_i'" in steps({"rows_outer": True})


@pytest.mark.cc
@pytest.mark.parametrize("knobs", [{"mr": 4, "nr": 16, "kc": 32}, {"pack": False},
                                   {"mr": 28, "nr": 48, "kc": 512, "pack": True},
                                   {"rows_outer": True, "mr": 6}, {"mc": 64, "mr": 12},
                                   {"mc": 30, "mr": 7, "pack": False}])
def test_every_knob_setting_computes_the_same(knobs: dict) -> None:
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((200, 200), np.float32), rng.standard_normal((200, 200), np.float32)
    k = polyopt.compile(MM, sizes=SIZES, options={"knobs": knobs})
    np.testing.assert_allclose(k(a, b), a @ b, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("knobs", [{"mr": 0}, {"pack": 1}, {"tile": 4}, "fast", {"kc": 2.5}])
def test_bad_knobs_are_reported(knobs: object) -> None:
    with pytest.raises(polyopt.OptionError, match="option knobs"):
        polyopt.compile(MM, sizes=SIZES, options={"knobs": knobs})


@pytest.mark.cc
@pytest.mark.usefixtures("avx512")
def test_register_tiles_narrower_than_the_channel_block_stay_vectorized() -> None:
    """Channel blocks of 32 with 16-wide tiles: the packed weights' index (32*f_b + f_v)/32
    simplifies to f_b, so the micro-kernel still finds its vectors (it ran 20x slower as
    scalar loops)."""
    from polyopt import kernels
    sizes = {"N": 1, "C": 16, "H": 14, "W": 14, "F": 64, "KH": 3, "KW": 3, "PH": 1, "PW": 1}
    k = polyopt.compile(kernels.source("conv2d"), "conv2d", sizes=sizes,
                        options={"knobs": {"block": 32, "nr": 16}})
    assert "pack('O', 1, 32, 1)" in k.schedule.as_python()
    assert "register tile" in k.source
    assert not [ln for ln in k.source.splitlines() if "t_Wt_pack[" in ln and "/ 32L" in ln]
    from test_layout import check_conv  # same directory: pytest puts it on the path

    check_conv(k, (1, 16, 14, 14, 64, 3), 1)


def packs(sizes: dict, knobs: dict | None = None, machine: str | None = None) -> set[str]:
    """The tensors the pipeline packs for ``MM`` at ``sizes``."""
    options: dict = {"knobs": knobs or {}}
    if machine:
        options["machine"] = machine
    s = polyopt.schedule(MM, sizes=sizes, options=options)
    return {p.tensor for p in s.layout}


@pytest.mark.usefixtures("avx512")
def test_each_operand_is_packed_when_the_register_tiles_sweep_it_twice() -> None:
    """The packing rule, the rows fixed (so the cost model weighs no other plan): A is
    swept once per column tile, B once per row tile: 16 output columns (one column tile)
    leave A as it is (packing it made the product 1.9x slower), and B (64 KB) stays in L2
    between its sweeps, unit-stride; a square product packs both; a short reduction
    neither, unless its rows crowd L1's sets (B's 16 rows 4 KB apart in one set of an 8-way
    L1); A (56 KB) swept 128 times is packed though L2 holds it."""
    assert packs({"M": 4096, "N": 16, "K": 1024}, {"mr": 8}) == set()
    assert packs({"M": 1024, "N": 1024, "K": 1024}, {"mr": 8}) == {"A", "B"}
    assert packs({"M": 1024, "N": 1024, "K": 16}, {"mr": 8}) == {"B"}
    assert packs({"M": 1024, "N": 1000, "K": 16}, {"mr": 8}) == set()  # rows 4000 B apart
    assert packs({"M": 14, "N": 4096, "K": 1024}, {"mr": 14}) == {"A"}  # B swept once


@pytest.mark.usefixtures("avx512")
def test_a_transposed_column_operand_is_packed_however_small() -> None:
    """Attention's scores at 4 heads x 4 sequences of 64, head size 32: ``W(b, j, k)`` moves
    with the tile's columns at a stride of 32 floats, so each vector read in place is a
    gather. Its 8 KB panel fits in L1 and its reduction is short, which left it in place:
    the register tile was then predicted 2.1e6 cycles and the plain nest ran, 145-209 us
    against torch's 30-40; packed, the register tile takes 28 us."""
    src = "def f(float(16,64,32) A, float(16,64,32) W) -> (C) { C(b,i,j) +=! A(b,i,k) * W(b,j,k) }"
    s = polyopt.schedule(src, options={})
    assert {p.tensor for p in s.layout} == {"W"}
    assert "register tile 8x32" in str(s)


@pytest.mark.usefixtures("avx512")
def test_the_cost_model_weighs_the_row_operand_in_place_against_its_copy() -> None:
    """Where the rule copies A, the plan reading it in place is priced too: this product at
    128 x 768 x 3072 (A 1.5 MB) ran 2.13 ms copied and 1.97 ms in place on the Xeon VM,
    2 threads (torch 1.91, the same run)."""
    s = polyopt.schedule(MM, sizes={"M": 128, "N": 768, "K": 3072}, options={})
    assert {p.tensor for p in s.layout} == {"B"}
    assert "8 A in place" in "\n".join(s.notes)


@pytest.mark.usefixtures("avx512")
def test_an_operand_that_stays_in_l1_is_not_packed() -> None:
    """24 x 96 floats (9 KB) of A stay in half of a 48 KB L1 between sweeps; with a 16 KB L1
    they do not, and the packing rule copies A (the rows fixed: the cost model weighs no
    other plan)."""
    sizes = {"M": 24, "N": 3136, "K": 96}
    assert "A" not in packs(sizes, {"mr": 12})
    small_l1 = "vector_bytes=64,vector_registers=32,l1d_bytes=16K"
    assert "A" in packs(sizes, {"mr": 12}, machine=small_l1)


@pytest.mark.usefixtures("avx512")
def test_pack_a_and_pack_b_fix_each_operand() -> None:
    sizes = {"M": 1024, "N": 1024, "K": 1024}
    assert packs(sizes, {"pack_a": False}) == {"B"}
    assert "B" not in packs(sizes, {"pack_b": False})
    assert packs(sizes, {"pack_b": False, "pack_a": True}) == {"A"}
    assert packs(sizes, {"pack": False, "pack_a": True}) == {"A"}
    assert packs({"M": 4096, "N": 16, "K": 1024}, {"pack": True}) == {"A", "B"}
