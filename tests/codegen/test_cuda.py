"""The CUDA target without a GPU: the mapping, the emitted source, nvcc and ptxas."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import polybench_refs
import pytest

import polyopt
from polyopt import IllegalScheduleError, ScheduleError, kernels
from polyopt.runtime import nvcc

MATMUL = "def matmul(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,r_k) * B(r_k,n) }"


def cuda(source: str, name: str | None = None, **kw: object) -> polyopt.Kernel:
    return polyopt.compile(source, name, target="cuda", **kw)  # type: ignore[arg-type]


def test_plain_mapping_puts_x_on_the_stride_one_index() -> None:
    k = cuda(MATMUL, sizes={"M": 100, "N": 70, "K": 30}, options={"gpu": {"tiles": False}})
    steps = k.schedule.as_python()
    assert "s.bind('n_o', 'blockIdx.x')" in steps and "s.bind('n_i', 'threadIdx.x')" in steps
    assert "s.bind('m_o', 'blockIdx.y')" in steps and "s.bind('m_i', 'threadIdx.y')" in steps
    assert k.launch == [{"kernel": "polyopt_matmul_k0", "grid": ("3", "13", "1"),
                         "block": ("32", "8", "1")}]
    assert "c0 += (long)gridDim.y" in k.source
    assert "POLYOPT_EMU_ENTRY(polyopt_matmul_k0" in k.source


def test_matmul_is_register_tiled_through_shared_memory() -> None:
    k = cuda(MATMUL, sizes={"M": 100, "N": 70, "K": 30})
    assert "s.gpu_tile('m2_i', (4, 4))" in k.schedule.as_python()
    _, tiled = k.launch  # the init runs first, as a kernel of its own
    assert tiled == {"kernel": "polyopt_matmul_k1", "grid": ("2", "2", "1"),
                     "block": ("16", "16", "1")}
    body = k.source.split("polyopt_matmul_k1(")[1]
    assert body.count("__syncthreads();") == 2 and "po_acc[4][4]" in body
    assert "POLYOPT_SHARED(float, po_As0, 520)" in body  # 8 x (64 + 1)
    big = cuda(MATMUL, sizes={"M": 512, "N": 256, "K": 64})
    assert "s.gpu_tile('m2_i', (8, 8))" in big.schedule.as_python()
    assert big.launch[1]["grid"] == ("2", "4", "1")


def test_parametric_launch_is_an_expression_of_the_sizes() -> None:
    k = cuda(MATMUL, parametric=True, options={"gpu": {"tiles": False}})
    (launch,) = k.launch
    assert launch["grid"] == ("(N + 31) / 32", "(M + 7) / 8", "1")
    assert launch["block"] == ("N >= 32 ? 32 : N", "M >= 8 ? 8 : M", "1")
    plan = k.lowered().source.launches[0]
    assert plan.shape({"M": 100, "N": 70, "K": 3}) == ((3, 13, 1), (32, 8, 1))
    assert plan.shape({"M": 5, "N": 7, "K": 3}) == ((1, 1, 1), (7, 5, 1))
    tiled = cuda(MATMUL, parametric=True).launch[1]
    assert tiled["grid"] == ("(N + 127) / 128", "(M + 127) / 128", "1")


@pytest.mark.cc
@pytest.mark.parametrize("size", [(37, 29, 45), (130, 129, 17)])
def test_tiled_matmul_runs_emulated_on_partial_tiles(size: tuple[int, int, int]) -> None:
    m, k_, n = size
    k = polyopt.compile(MATMUL, target="cuda-emulated")
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((m, k_), np.float32), rng.standard_normal((k_, n), np.float32)
    np.testing.assert_allclose(k(a, b), a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.cc
@pytest.mark.parametrize("which", [0, 1])
def test_a_removed_barrier_is_reported(which: int) -> None:
    from polyopt.runtime import emulated

    k = cuda(MATMUL, sizes={"M": 40, "N": 40, "K": 20})
    source = k.lowered().source
    head, sep, tail = source.text.partition("polyopt_matmul_k1(")
    parts = tail.split("__syncthreads();")
    assert len(parts) == 3
    cut = sep.join([head, "".join([parts[0], "__syncthreads();" if which else "",
                                    parts[1], "" if which else "__syncthreads();", parts[2]])])
    kernel = emulated.EmulatedKernel(replace(source, text=cut))
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((40, 20), np.float32), rng.standard_normal((20, 40), np.float32)
    c = np.zeros((40, 40), np.float32)
    with pytest.raises(polyopt.EmulationError, match=r"race on shared array 'po_[AB]s0'"):
        kernel.run([a, b, c], [])


def test_statements_outside_the_thread_loops_run_once() -> None:
    src = """def f(float(N) A) -> (s, B) {
        s +=! A(r_i)
        B(i) = A(i) * 2
    }"""
    k = cuda(src, sizes={"N": 40})
    # The scalar reduction has no parallel loop: its init and its sum run on one thread.
    assert [ln["block"] for ln in k.launch] == [("1", "1", "1"), ("1", "1", "1"),
                                                 ("40", "1", "1")]
    # B's block loop has one value, so isl drops it: B runs on block 0's threads only.
    last = k.source.split("polyopt_f_k2(")[1]
    assert "(long)threadIdx.x" in last and "if (blockIdx.x == 0)" in last


def test_bind_checks_dependences_and_axes() -> None:
    s = polyopt.schedule(MATMUL, auto="isl")
    with pytest.raises(IllegalScheduleError, match="carries a dependence"):
        s.bind("k", "threadIdx.x")
    with pytest.raises(ScheduleError, match="unknown axis"):
        s.bind("m", "warp.x")
    t = s.bind("m", "blockIdx.x")
    with pytest.raises(ScheduleError, match="already bound"):
        t.bind("m", "blockIdx.y")
    assert polyopt.schedule(MATMUL, auto="isl").steps == ()  # verbs return new schedules


def test_user_bound_schedule_runs_emulated() -> None:
    s = polyopt.schedule(MATMUL, auto="isl").split("m", 4).bind("m_o", "blockIdx.x") \
        .bind("m_i", "threadIdx.y").bind("n", "threadIdx.x")
    k = polyopt.compile(MATMUL, schedule=s, target="cuda-emulated")
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((9, 5), np.float32), rng.standard_normal((5, 6), np.float32)
    np.testing.assert_allclose(k(a, b), a @ b, rtol=1e-5, atol=1e-5)


def test_cuda_without_pycuda_says_what_to_install() -> None:
    pytest.importorskip("numpy")
    try:
        import pycuda  # noqa: F401
        pytest.skip("PyCUDA is installed here")
    except ImportError:
        pass
    k = cuda(MATMUL)
    with pytest.raises(polyopt.PolyoptError, match="needs PyCUDA"):
        k(np.ones((2, 3), np.float32), np.ones((3, 4), np.float32))
    assert "__global__" in k.source  # the source needs no GPU


def test_ptxas_report_is_parsed() -> None:
    text = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'polyopt_f_k0' for 'sm_90'
ptxas info    : Function properties for polyopt_f_k0
    8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 8192 bytes smem, 400 bytes cmem[0]
"""
    (r,) = nvcc.parse_report(text).values()
    assert (r.name, r.registers, r.shared_bytes, r.stack_bytes) == ("polyopt_f_k0", 40, 8192, 8)
    assert r.spills and (r.spill_stores, r.spill_loads) == (4, 12)


@pytest.mark.cuda
@pytest.mark.parametrize("name", ["matmul", "conv2d"])
def test_default_matmul_and_conv_use_shared_memory_and_register_tiles(name: str) -> None:
    sizes = {"matmul": {"M": 256, "N": 256, "K": 256},
             "conv2d": {"N": 1, "C": 64, "H": 56, "W": 56, "F": 64, "KH": 3, "KW": 3}}[name]
    k = cuda(kernels.get(name, padding=1) if name == "conv2d" else kernels.source(name),
             name, sizes=sizes)
    _, report = nvcc.build_cubin(k.source, "sm_90")
    tiled = k.launch[-1]["kernel"]
    assert report[tiled].shared_bytes > 0 and "po_acc[" in k.source
    assert not report[tiled].spills


@pytest.mark.cuda
@pytest.mark.parametrize("name", kernels.names())
def test_every_library_kernel_compiles_with_nvcc_without_spills(name: str) -> None:
    # PolyBench's recurrences are valid only from some sizes on (boundary rows at 0:1 and
    # N-1:N): those compile at PolyBench's MINI sizes.
    sizes = polybench_refs.CASES[name][1][0] if name in polybench_refs.CASES else None
    k = cuda(kernels.source(name), name, parametric=sizes is None, sizes=sizes)
    _, report = nvcc.build_cubin(k.source, "sm_90")
    symbols = [ln["kernel"] for ln in k.launch]
    assert sorted(report) == sorted(symbols)
    spilled = {s: r for s, r in report.items() if r.spills}
    assert not spilled, f"{name}: ptxas spills {spilled}"


@pytest.mark.cc
@pytest.mark.parametrize("gpu", [{"shared": False}, {"unroll": 2}, {"grid": (1, 1, 1)},
                                 {"tile": (32, 32, 4), "regs": (2, 4)}, {"tiles": False},
                                 {"block": (64,)}])
def test_mapping_options_keep_results(gpu: dict) -> None:
    k = polyopt.compile(MATMUL, target="cuda-emulated", options={"gpu": gpu})
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((70, 33), np.float32), rng.standard_normal((33, 90), np.float32)
    np.testing.assert_allclose(k(a, b), a @ b, rtol=1e-4, atol=1e-4)
    if "shared" in gpu:
        assert "POLYOPT_SHARED(" not in k.source.split("#endif", 1)[1]
        assert "__syncthreads" not in k.source


@pytest.mark.parametrize("gpu", [{"tile": (32, 32)}, {"regs": (3, 4), "tile": (32, 32, 8)},
                                 {"block": (64, 64)}, {"unroll": 0}, {"grid": (0, 1, 1)},
                                 {"warps": 4}, "fast"])
def test_bad_mapping_options_are_reported(gpu: object) -> None:
    with pytest.raises(polyopt.OptionError, match="option gpu"):
        cuda(MATMUL, options={"gpu": gpu})
