"""The automatic CPU pipeline's decisions (polyopt.pipeline.cpu), read from the recorded
steps, and the results they give."""

from __future__ import annotations

import re

import numpy as np
import pytest

import polyopt
from polyopt import kernels

TRANSPOSED = "def tr(float(N,M) A, float(M,N) B) -> (C) { C(i,j) = A(j,i) + B(i,j) }"


def test_transposed_access_is_cache_tiled_by_a_line() -> None:
    steps = polyopt.schedule(TRANSPOSED, sizes={"N": 512, "M": 512}).as_python()
    assert "s.tile(('i', 'j'), 16)" in steps and "s.vectorize('j_i', lanes=" in steps
    # Too small to tile, or no transposed access: no tiling.
    assert "tile" not in polyopt.schedule(TRANSPOSED, sizes={"N": 20, "M": 20}).as_python()
    plain = "def add(float(N,M) A, float(N,M) B) -> (C) { C(i,j) = A(i,j) + B(i,j) }"
    assert "tile" not in polyopt.schedule(plain, sizes={"N": 512, "M": 512}).as_python()


# Two statements isl fuses into one body (C reads B where B writes it), both reading A
# transposed.
FUSED_TRANSPOSED = """def f(float(M,N) A, float(M,N) D) -> (B, C) {
  B(i,j) = A(j,i) * D(j,i)
  C(i,j) = B(i,j) * A(j,i)
}"""


def test_a_fused_body_of_statements_gets_the_order_model_and_the_cache_tile() -> None:
    """One body of fused statements is planned as one statement's is: the order model's
    note, the line-square tile of its transposed reads, the vector loop inside (it was
    left in isl's order, walking A by column: 45.4-47.5 ms against 13.1 ms at 2048^2, 2 threads,
    with a third transposed read)."""
    s = polyopt.schedule(FUSED_TRANSPOSED, sizes={"M": 512, "N": 512})
    assert any(n.startswith("i: order") for n in s.notes), s.notes
    steps = s.as_python()
    assert "s.tile(('i', 'j'), 16)" in steps and "s.vectorize('j_i', lanes=" in steps


@pytest.mark.cc
def test_a_fused_transposed_body_matches_numpy() -> None:
    rng = np.random.default_rng(2)
    a, d = (rng.standard_normal((150, 150)).astype(np.float32) for _ in range(2))
    k = polyopt.compile(FUSED_TRANSPOSED, sizes={"M": 150, "N": 150})
    b, c = k(a, d)
    np.testing.assert_array_equal(b, (a * d).T)
    np.testing.assert_array_equal(c, b * a.T)
    assert "tile" in k.schedule.as_python()


ROW_SUM = "def rs(float(A,B,C) X) -> (Y) { Y(a,b) +=! X(a,b,r_c) }"


def test_a_row_sum_reduces_its_contiguous_rows_in_vectors_without_a_cache_tile() -> None:
    """The output is invariant along the reduction (it stays in a register), so it is no
    transposed access: no tile cuts the rows, and the reduction loop is the vector loop
    (it was tiled 16 x 16 and ran scalar: 19.4 ms against 6.8 ms of CPU time at
    64 x 512 x 512 on one thread)."""
    steps = polyopt.schedule(ROW_SUM, sizes={"A": 8, "B": 512, "C": 512}).as_python()
    verbs = "\n".join(line for line in steps.splitlines() if not line.startswith("#"))
    assert "s.tile(" not in verbs and "s.vectorize('c', lanes=" in verbs


@pytest.mark.cc
def test_a_row_sum_matches_numpy() -> None:
    x = np.random.default_rng(1).standard_normal((3, 70, 77)).astype(np.float32)
    k = polyopt.compile(ROW_SUM)
    np.testing.assert_allclose(k(x), x.sum(2), rtol=1e-5, atol=1e-4)


@pytest.mark.cc
def test_cache_tiled_transpose_matches_numpy() -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((77, 70)).astype(np.float32)
    b = rng.standard_normal((70, 77)).astype(np.float32)
    k = polyopt.compile(TRANSPOSED)
    np.testing.assert_array_equal(k(a, b), a.T + b)
    assert "tile" in k.schedule.as_python()


PADDED = {"N": 1, "C": 16, "H": 10, "W": 10, "F": 32, "KH": 3, "KW": 3, "PH": 1, "PW": 1}


@pytest.mark.usefixtures("avx512")
def test_a_padded_copy_vectorizes_its_rows_not_its_unit_dims() -> None:
    """The padded input's copy has block dims of one: they move outermost, so the loop
    that vectorizes is the row, not a loop of one iteration."""
    steps = polyopt.schedule(kernels.source("conv2d"), "conv2d", sizes=PADDED).as_python()
    assert "s.reorder('ip0', 'ip4', 'ip1', 'ip2', 'ip3')\ns = s.vectorize('ip3', lanes=" in steps


@pytest.mark.usefixtures("avx512")
def test_a_blocked_output_is_zeroed_computed_and_copied_back_in_one_nest() -> None:
    """The copy back runs in strips of whole channel blocks, and it and the zeroing fuse
    with the register-tiled nest along (n, channel block, row): each row of blocks is
    copied back while it is in cache."""
    steps = polyopt.schedule(kernels.source("conv2d"), "conv2d", sizes=PADDED).as_python()
    assert "s.split('ou1', 16, names=('ou1_o', 'ou1_i'))" in steps
    assert "s.reorder('ou0', 'ou1_o', 'ou2', 'ou1_i', 'ou3')" in steps
    for a, b in [("n", "n2"), ("f_b", "f_b2"), ("h", "h2"), ("n", "ou0"), ("f_b", "ou1_o"),
                 ("h", "ou2")]:
        assert f"s.fuse('{a}', '{b}')" in steps
    # 0.46M multiply-adds in registers: the model predicts 2.3e4 cycles, under what a fork
    # and join of two threads saves (measured: 6.2 us on one thread, 6.0 on two)
    notes = polyopt.schedule(kernels.source("conv2d"), "conv2d", sizes=PADDED).notes
    assert any(n.startswith("n: one thread:") and "predicted" in n for n in notes), notes


@pytest.mark.cc
@pytest.mark.usefixtures("avx512")
def test_fused_blocked_conv_matches_numpy() -> None:
    from test_layout import check_conv  # same directory: pytest puts it on the path

    kernel = polyopt.compile(kernels.source("conv2d"), "conv2d", sizes=PADDED)
    check_conv(kernel, (1, 16, 10, 10, 32, 3), 1)


@pytest.mark.usefixtures("avx512")
def test_the_schedule_says_why_for_each_decision() -> None:
    """Register tile, packing, vector loop, loop order and parallel loop each come with a
    reason in the schedule's notes (printed as ``# why:`` lines)."""
    mm = "def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,r_k) * B(r_k,n) }"
    text = str(polyopt.schedule(mm, sizes={"M": 4096, "N": 16, "K": 1024}))
    assert re.search(r"# why: m2: register tile \d+x16 \(1 vector of 16 lanes\)", text)
    assert re.search(r"leaves A \(swept 1x\); (packs|leaves) B \(swept \d+x\)", text)
    assert "parallel m2_o: the outermost dependence-free loop" in text
    tiny = polyopt.schedule(mm, sizes={"M": 16, "N": 16, "K": 16})
    assert any("one thread: " in n and "cycles on one core (predicted)" in n for n in tiny.notes)
    rs = polyopt.schedule(ROW_SUM, sizes={"A": 64, "B": 512, "C": 512})
    assert any(n.startswith("c: vector loop") for n in rs.notes)
    assert any("order kept" in n and "cycles" in n for n in rs.notes)
    tr = polyopt.schedule(TRANSPOSED, sizes={"N": 512, "M": 512})
    assert any("transposed access" in n and "tiled 16 x 16" in n for n in tr.notes)
