"""Depthwise convolutions: rows, or channels in vector lanes (NCHW16c with the input copied
blocked), as ``blocked.streamed_costs`` predicts; each decision stated from the model, read
from the schedule's steps and notes, and the results checked against NumPy on the
MobileNetV2 shapes and on shapes nobody tuned on."""

from __future__ import annotations

import numpy as np
import pytest

import polyopt
from polyopt import ir, kernels
from polyopt.costmodel.machine import Machine
from polyopt.lang import build_program
from polyopt.pipeline.blocked import plan_blocking, streamed_costs
from polyopt.pipeline.policy import cpu_policy
from polyopt.poly import model_of
from polyopt.poly.model import PolyStmt
from polyopt.schedules.limits import CAPS

cc = pytest.mark.cc
AVX512 = "vector_bytes=64,vector_registers=32,cores=2,l1d_bytes=48K,l2_bytes=2M,l3_bytes=32M"


def source(stride: int = 1, pad: int = 1, dilation: int = 1) -> str:
    extra = {"dilation": dilation} if dilation != 1 else {}
    return kernels.get("depthwise_conv2d", stride=stride, padding=pad, **extra)


def sizes(n: int, c: int, h: int, w: int) -> dict[str, int]:
    return {"N": n, "C": c, "H": h, "W": w, "KH": 3, "KW": 3}


def update_of(src: str, sz: dict[str, int]) -> tuple[ir.Program, PolyStmt]:
    program = build_program(src, "depthwise_conv2d", sz)
    s = next(x for x in model_of(program).stmts if x.kind == "update")
    return program, s


def blocked(sched: polyopt.Schedule) -> bool:
    return any(st.verb == "pack" and st.args[0] == "O" for st in sched.steps)


def layout_note(sched: polyopt.Schedule) -> str:
    return next(n for n in sched.notes if n.startswith("layout of O"))


def schedule(c: int, hw: int, stride: int = 1, machine: str = AVX512) -> polyopt.Schedule:
    return polyopt.schedule(source(stride), "depthwise_conv2d", sizes=sizes(1, c, hw, hw),
                            options={"machine": machine})


def test_rows_shorter_than_a_vector_put_channels_in_lanes() -> None:
    """14 outputs per row on 16 lanes: no whole vector, so rows keep each tap's sum in
    memory (9 taps x 14 rows x 384 channels, 9 cycles each, 4.4e5) while channels in lanes
    take 9 FMAs per pixel vector at 2 a cycle plus 8 cycles per copied vector (1.1e5):
    blocked, the input copied blocked too."""
    sched = schedule(384, 14)
    assert blocked(sched)
    assert any(st.verb == "pack" and st.args[0] == "I" and st.args[2] == 16
               for st in sched.steps)
    note = layout_note(sched)
    assert "channels in lanes (blocks of 16)" in note and "for rows" in note


def test_rows_with_whole_vectors_stay_rows() -> None:
    """56 outputs per row hold three whole vectors: a register tile keeps the sums in
    registers, and the copies would cost more than the partial vector saves."""
    sched = schedule(144, 56)
    assert not blocked(sched)
    assert "layout of O: rows" in layout_note(sched)


def test_narrower_vectors_keep_the_rows() -> None:
    """On 4-lane vectors (SSE) the 14-wide row holds three whole vectors: rows predicted
    faster (9.7e4 against 1.7e5 cycles), the same layer keeps its natural layout."""
    sse = AVX512.replace("vector_bytes=64", "vector_bytes=16")
    assert blocked(schedule(384, 14))
    assert not blocked(schedule(384, 14, machine=sse))


def test_wider_vectors_block_wider_rows() -> None:
    """On 32 lanes a 28-wide row is shorter than a vector: blocked (the 16-lane machine
    keeps it in rows), in blocks of two vectors as every convolution with taps over rows
    of ``wide_rows`` or more."""
    program, s = update_of(source(), sizes(1, 192, 28, 28))
    assert plan_blocking(program, s, cpu_policy(Machine(64, 32))) is None
    assert plan_blocking(program, s, cpu_policy(Machine(128, 32))) == ("O", 1, 64)


def test_a_slower_fma_raises_the_rows_cost() -> None:
    """The rows' cost of a short row grows with the FMA's latency (each tap waits for the
    last one's sum, through memory); the channels' does not (independent accumulators)."""
    program, s = update_of(source(), sizes(1, 384, 14, 14))
    policy = cpu_policy(Machine(64, 32))
    slow = cpu_policy(Machine(64, 32, fma_latency=8))
    a, b = streamed_costs(program, s, policy), streamed_costs(program, s, slow)
    assert a is not None and b is not None
    assert b.rows > a.rows and b.blocked == a.blocked


def test_regular_and_grouped_convolutions_have_no_streamed_channel() -> None:
    """conv2d's output channel f indexes no operand that moves with the rows; a grouped
    input reads ``(f / FG) * CG + c``, no plain f: neither is priced here."""
    conv = kernels.get("conv2d", stride=1, padding=1)
    program = build_program(conv, "conv2d", {"N": 1, "C": 3, "F": 32, "H": 14, "W": 14,
                                              "KH": 3, "KW": 3})
    s = next(x for x in model_of(program).stmts if x.kind == "update")
    assert streamed_costs(program, s, cpu_policy(Machine(64, 32))) is None
    grouped = kernels.get("conv2d", stride=1, padding=1, groups=4, in_channels=32,
                          out_channels=32)
    program = build_program(grouped, "conv2d", {"N": 1, "C": 32, "F": 32, "CK": 8, "H": 14,
                                                 "W": 14, "KH": 3, "KW": 3})
    s = next(x for x in model_of(program).stmts if x.kind == "update")
    assert streamed_costs(program, s, cpu_policy(Machine(64, 32))) is None



def tile_note(sched: polyopt.Schedule) -> str:
    return next(n for n in sched.notes if ": register tile " in n)


def test_tile_rows_let_the_filter_rows_unroll() -> None:
    """A one-vector tile over rows (112 wide): the model's 28 rows would unroll 3 x 28 = 84
    updates of ``kh``, past ``Caps.max_unrolled_updates``, and load a vector per update;
    the model weighs them against what the cap unrolls (21) and the divisors of 112 below
    it, and takes 16 rows, whose 18 input rows serve 48 updates."""
    assert CAPS.max_unrolled_updates == 64  # the numbers below follow from it
    assert "register tile 16x16 " in tile_note(schedule(32, 112))
    assert "register tile 14x16 " in tile_note(schedule(144, 56))


def test_a_long_fma_latency_keeps_the_rows() -> None:
    """The model weighs the FMA latency against the loads: at 64 cycles every step waits
    64 cycles for its accumulators, whatever it loads, so 28 rows (28 updates a step)
    beat 21 rows with ``kh`` unrolled (21 a step, loads shared): the tile keeps its 28
    rows. (At 4 cycles the loads decide: ``test_tile_rows_let_the_filter_rows_unroll``.)"""
    slow = AVX512 + ",fma_latency=64"
    assert "register tile 28x16 " in tile_note(schedule(32, 112, machine=slow))


@cc
def test_capped_rows_unroll_and_match_numpy() -> None:
    """Compiled with the default cap, the 56-wide tile's ``kh`` is unrolled: fewer vector
    loads than updates (it loaded one per update at 28 rows)."""
    kernel = polyopt.compile(source(), "depthwise_conv2d", target="c",
                             sizes=sizes(1, 16, 56, 56), options={"tuned": False})
    start = kernel.source.index("register tile of O_0")
    body = kernel.source[start:kernel.source.index("} else {", start)]
    assert 0 < body.count("__builtin_memcpy(&x0_") < body.count(" += (x0_")
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 16, 56, 56)).astype(np.float32)
    wt = rng.standard_normal((16, 1, 3, 3)).astype(np.float32)
    np.testing.assert_allclose(kernel(x, wt), reference(x, wt, 1, 1, 1), rtol=1e-4,
                               atol=1e-4 * np.sqrt(9))

def reference(x: np.ndarray, w: np.ndarray, stride: int, pad: int,
              dilation: int) -> np.ndarray:
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    n, c, h, wd = x.shape
    ho = (h + 2 * pad - 2 * dilation - 1) // stride + 1
    wo = (wd + 2 * pad - 2 * dilation - 1) // stride + 1
    out = np.zeros((n, c, ho, wo))
    for i in range(3):
        for j in range(3):
            win = xp[:, :, i * dilation:i * dilation + stride * (ho - 1) + 1:stride,
                     j * dilation:j * dilation + stride * (wo - 1) + 1:stride]
            out += win * w[None, :, 0, i, j, None, None]
    return out


# (N, C, H, W, stride, pad, dilation): MobileNetV2's depthwise layers, then shapes off it
# (odd sizes, batch 2, channels no multiple of the lanes, dilation 2, no padding).
SHAPES = [
    (1, 192, 28, 28, 2, 1, 1), (1, 384, 14, 14, 1, 1, 1), (1, 576, 14, 14, 1, 1, 1),
    (1, 576, 14, 14, 2, 1, 1), (1, 960, 7, 7, 1, 1, 1), (1, 144, 56, 56, 2, 1, 1),
    (1, 48, 33, 33, 1, 1, 1), (1, 1000, 9, 9, 1, 1, 1), (2, 64, 14, 14, 1, 1, 1),
    (1, 32, 15, 15, 2, 1, 1), (1, 64, 17, 13, 2, 1, 1), (1, 32, 14, 14, 1, 2, 2),
    (1, 32, 10, 10, 1, 0, 1), (2, 48, 7, 7, 2, 1, 1),
]


@cc
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_depthwise_matches_numpy(shape: tuple[int, ...]) -> None:
    n, c, h, w, stride, pad, dilation = shape
    kernel = polyopt.compile(source(stride, pad, dilation), "depthwise_conv2d", target="c",
                             sizes=sizes(n, c, h, w), options={"tuned": False})
    rng = np.random.default_rng(sum(shape))
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    wt = rng.standard_normal((c, 1, 3, 3)).astype(np.float32)
    np.testing.assert_allclose(kernel(x, wt), reference(x, wt, stride, pad, dilation),
                               rtol=1e-4, atol=1e-4)
