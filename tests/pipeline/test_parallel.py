"""Which nests run in parallel: the cost model's one-core cycles against a fork and join
(``Machine.parallel_pays``), not a count of statement instances."""

from __future__ import annotations

import numpy as np
import pytest

import polyopt
from polyopt import kernels
from polyopt.costmodel import cost
from polyopt.costmodel.machine import Machine
from polyopt.pipeline.fusion import nests
from polyopt.pipeline.policy import cpu_policy
from polyopt.schedules.marks import Tag
from polyopt.schedules.tree import Sequence

# Every field given, so that the host's caches and cores do not move the predictions.
MACHINE = ("vector_bytes=64,vector_registers=32,l1d_bytes=32768,l2_bytes=1048576,"
           "l3_bytes=33554432,cores={}")
BROADCAST = "def f(float(I) A, float(J) B) -> (O) { O(i) +=! A(i) * B(r_j) }"
SCALE = "def f(float(N) A) -> (O) { O(i) = A(i) * 2 }"
TRANSPOSE = "def f(float(N,M) A) -> (O) { O(j,i) = A(i,j) }"
LGAMMA = "def f(float(N) A) -> (O) { O(i) = lgamma(A(i)) * 2 }"  # no vector variant


def _threads(source: str, sizes: dict[str, int], cores: int) -> str:
    schedule = polyopt.schedule(source, sizes=sizes, options={"machine": MACHINE.format(cores)})
    return next(n for n in schedule.notes if "thread" in n or ": parallel" in n)


def test_few_cycles_run_on_one_thread_however_many_instances() -> None:
    """64 x 1024 multiply-adds (65536 instances, twice the old 2**15 threshold) over 4 KB of
    data: the model predicts a few thousand cycles, less than a fork and join."""
    why = _threads(BROADCAST, {"I": 64, "J": 1024}, 2)
    assert "one thread" in why and "cycles on one core (predicted)" in why


def test_many_cycles_run_in_parallel_with_few_instances() -> None:
    """A 128 x 128 transpose has 16384 instances (under the old threshold), but its
    128 KB of strided traffic is predicted well above a fork and join."""
    assert ": parallel" in _threads(TRANSPOSE, {"N": 128, "M": 128}, 2)


@pytest.mark.parametrize(("source", "n", "cores", "parallel"), [
    (SCALE, 8000, 2, False),   # 64 KB from memory: 2 cores share its bandwidth, save ~1e4
    (SCALE, 8000, 16, False),  # ... and 16 save no more: the memory bounds it either way
    (SCALE, 1 << 20, 1, False),
    (LGAMMA, 500, 2, False),   # scalar calls: 2 cores save less than a fork and join
    (LGAMMA, 500, 16, True),   # 16 save more
    (LGAMMA, 250, 16, False),  # even all of them is under a fork and join
])
def test_the_machines_cores_move_the_decision(source: str, n: int, cores: int,
                                              parallel: bool) -> None:
    why = _threads(source, {"N": n}, cores)
    assert (": parallel" in why) is parallel, why


@pytest.mark.cc
@pytest.mark.parametrize("sizes", [{"I": 64, "J": 1024}, {"I": 4096, "J": 64}])
def test_either_decision_computes_the_same_sums(sizes: dict[str, int]) -> None:
    """Sizes on either side of the rule: at 64 x 1024 the schedule runs on one thread, at
    4096 x 64 (4x the instances, a longer output) in parallel, by their notes."""
    rng = np.random.default_rng(7)
    a = rng.standard_normal(sizes["I"]).astype(np.float32)
    b = rng.standard_normal(sizes["J"]).astype(np.float32)
    kernel = polyopt.compile(BROADCAST, sizes=sizes)
    got = kernel(a, b)
    want = a.astype(np.float64) * b.astype(np.float64).sum()
    np.testing.assert_allclose(got, want, rtol=1e-4 * np.sqrt(sizes["J"]), atol=1e-4)


def test_the_model_runs_a_sequence_of_parallel_nests_in_parallel() -> None:
    """A blocked output's zeroing, product and copy back sit under its block loop, each
    nest with a parallel loop of its own: the model runs the three in parallel (it took
    the block loop's chain only, found no parallel loop there, and priced the layout on
    one core: ResNet-50 layer 3 in blocks of 32, 3.86e6 cycles against 2.17e6)."""
    machine = ("vector_bytes=64,vector_registers=32,cores=2,l1d_bytes=32K,l2_bytes=1M,"
               "l3_bytes=32M")
    s = polyopt.schedule(kernels.get("conv2d", stride=1, padding=1), "conv2d",
                         sizes={"N": 1, "C": 64, "H": 56, "W": 56, "F": 64, "KH": 3, "KW": 3},
                         options={"machine": machine, "knobs": {"block": 32}, "tuned": False})
    top = next(t for t in nests(s.root) if isinstance(t.child, Sequence))
    assert Tag.PARALLEL not in top.tags
    policy = cpu_policy(Machine(vector_bytes=64, vector_registers=32, cores=2,
                                l2_bytes=1 << 20, l3_bytes=32 << 20))
    est = cost.estimate(s.poly, top, policy.machine, parallel=lambda lp: Tag.PARALLEL in lp.tags,
                        printed=cost.printing(s.poly, s.root, s.buffers),
                        parallel_trips=policy.parallel_trips)
    assert est is not None and est.parallel is not None and "," in est.parallel
    assert est.core < est.compute  # two cores share it


# A 1x1 convolution, computed in 4 channel blocks of 16 (the ``block`` knob).
POINTWISE = """def f(float(1,64,28,28) I, float(64,64,1,1) W) -> (O) {
    O(n,f,h,w) +=! I(n,c,h,w) * W(f,c,0,0)
}"""


def test_a_core_whose_data_outgrow_l2_splits_the_input_rather_than_the_channels() -> None:
    """Parallel channel blocks give every core the whole 200 KiB input, once per block;
    its rows in parallel give each core half of it, which then stays in its (256 KiB) L2
    across the blocks: the rows are the parallel loop, and the note gives both shares.
    With 1 MiB of L2 the whole input stays in each core's L2: the channel blocks."""
    knobs = {"block": 16, "merge": False}
    machine = MACHINE.format(2) + ",fork_join_cycles=1000"
    small = machine.replace("l2_bytes=1048576", "l2_bytes=262144")
    tuned = polyopt.schedule(POINTWISE, options={"machine": small, "knobs": knobs})
    assert any(", not f_b: a core reads" in n for n in tuned.notes), tuned.notes
    roomy = polyopt.schedule(POINTWISE, options={"machine": machine, "knobs": knobs})
    assert not any("a core reads" in n for n in roomy.notes)
    kernel = polyopt.compile(POINTWISE, schedule=tuned)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 64, 28, 28)).astype(np.float32)
    w = rng.standard_normal((64, 64, 1, 1)).astype(np.float32)
    want = np.einsum("nchw,fc->nfhw", x, w[:, :, 0, 0])
    np.testing.assert_allclose(kernel(x, w), want, rtol=1e-4, atol=1e-4 * np.sqrt(64))
