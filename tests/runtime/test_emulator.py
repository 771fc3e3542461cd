"""cuda-emulated execution: hand-written sources that follow the printer's contract, run on the
CPU through cuda_emu.h, checked against numpy and against the race checker's reports."""

from __future__ import annotations

import ctypes
import functools
import os
import shlex
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from polyopt.errors import CompileError, EmulationError, OptionError
from polyopt.runtime import emulator
from polyopt.runtime.nvcc import nvcc_path

pytestmark = pytest.mark.cc

PROLOGUE = """\
#ifndef POLYOPT_SHARED
#define POLYOPT_SHARED(T, name, n) __shared__ T name[n]
#endif
"""

SGEMM = PROLOGUE + """
extern "C" __global__ void __launch_bounds__(256) sgemm(float *__restrict__ C,
    const float *__restrict__ A, const float *__restrict__ B, float alpha, int M, int N, int K)
{
  POLYOPT_SHARED(float, A_sh, 256);
  POLYOPT_SHARED(float, B_sh, 256);
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row = blockIdx.y * 16 + ty, col = blockIdx.x * 16 + tx;
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += 16) {
    A_sh[ty * 16 + tx] = (row < M && k0 + tx < K) ? __ldg(&A[row * K + k0 + tx]) : 0.0f;
    B_sh[ty * 16 + tx] = (k0 + ty < K && col < N) ? B[(k0 + ty) * N + col] : 0.0f;
    __syncthreads();  /* after the loads */
#pragma unroll
    for (int k = 0; k < 16; ++k)
      acc = fmaf(A_sh[ty * 16 + k], B_sh[k * 16 + tx], acc);
    __syncthreads();  /* before the next loads */
  }
  if (row < M && col < N)
    C[row * N + col] = alpha * acc;
}

#ifdef POLYOPT_EMULATED
POLYOPT_EMU_ENTRY(sgemm, (float *__restrict__ C, const float *__restrict__ A,
    const float *__restrict__ B, float alpha, int M, int N, int K), (C, A, B, alpha, M, N, K))
#endif
"""

BLOCK_SUM = PROLOGUE + """
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1)
    v += __shfl_down_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int mask = 16; mask > 0; mask >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, mask));
  return v;
}

extern "C" __global__ void __launch_bounds__(256) block_sum(float *__restrict__ sums,
    float *__restrict__ maxes, const float *__restrict__ x, int n)
{
  POLYOPT_SHARED(float, part_sh, 32);
  POLYOPT_SHARED(float, max_sh, 32);
  const int tid = threadIdx.x, lane = tid % warpSize, warp = tid / warpSize;
  float v = 0.0f, m = -INFINITY;
  for (int i = blockIdx.x * blockDim.x + tid; i < n; i += blockDim.x * gridDim.x) {
    v += x[i];
    m = max(m, x[i]);
  }
  v = warp_sum(v);
  m = warp_max(m);
  if (lane == 0) {
    part_sh[warp] = v;
    max_sh[warp] = m;
  }
  __syncthreads();
  if (warp == 0) {
    const int warps = (int)(blockDim.x / warpSize);
    v = lane < warps ? part_sh[lane] : 0.0f;
    m = lane < warps ? (float)max_sh[lane] : -INFINITY;
    v = warp_sum(v);
    m = warp_max(m);
    if (lane == 0) {
      sums[blockIdx.x] = v;
      maxes[blockIdx.x] = m;
    }
  }
}

#ifdef POLYOPT_EMULATED
POLYOPT_EMU_ENTRY(block_sum, (float *__restrict__ sums, float *__restrict__ maxes,
    const float *__restrict__ x, int n), (sums, maxes, x, n))
#endif
"""

ATOMIC_SUM = PROLOGUE + """
extern "C" __global__ void __launch_bounds__(128) atomic_sum(double *__restrict__ total,
    int *__restrict__ count, const double *__restrict__ x, int n)
{
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    atomicAdd(total, x[i]);
    atomicAdd(count, 1);
  }
}

#ifdef POLYOPT_EMULATED
POLYOPT_EMU_ENTRY(atomic_sum, (double *__restrict__ total, int *__restrict__ count,
    const double *__restrict__ x, int n), (total, count, x, n))
#endif
"""

EARLY_EXIT = PROLOGUE + """
extern "C" __global__ void __launch_bounds__(64) early_exit(float *__restrict__ out)
{
  POLYOPT_SHARED(float, s_sh, 64);
  if (threadIdx.x < 8)
    return;
  s_sh[threadIdx.x] = 1.0f;
  __syncthreads();
  out[threadIdx.x] = s_sh[63 - threadIdx.x];
}

#ifdef POLYOPT_EMULATED
POLYOPT_EMU_ENTRY(early_exit, (float *__restrict__ out), (out))
#endif
"""

HALF_FILLED = PROLOGUE + """
extern "C" __global__ void __launch_bounds__(128) half_filled(float *__restrict__ out, int bound)
{
  POLYOPT_SHARED(float, t_sh, 128);
  if (threadIdx.x < 64)
    t_sh[threadIdx.x] = 2.0f;
  __syncthreads();
  out[threadIdx.x] = t_sh[min(threadIdx.x, bound)];
}

#ifdef POLYOPT_EMULATED
POLYOPT_EMU_ENTRY(half_filled, (float *__restrict__ out, int bound), (out, bound))
#endif
"""

# Warp-synchronous shared memory: ordered by __syncwarp() alone, which the checker honours.
WARP_STAGES = PROLOGUE + """
extern "C" __global__ void __launch_bounds__(64) warp_stages(float *__restrict__ out)
{
  POLYOPT_SHARED(float, w_sh, 64);
  const int lane = threadIdx.x % 32, base = threadIdx.x - lane;
  w_sh[threadIdx.x] = (float)threadIdx.x;
  __syncwarp();
  for (int s = 16; s > 0; s >>= 1) {
    float other = lane < s ? (float)w_sh[base + lane + s] : 0.0f;
    __syncwarp();
    if (lane < s) w_sh[base + lane] += other;
    __syncwarp();
  }
  if (lane == 0) out[threadIdx.x / 32] = w_sh[base];
}

#ifdef POLYOPT_EMULATED
POLYOPT_EMU_ENTRY(warp_stages, (float *__restrict__ out), (out))
#endif
"""

# 100 threads: the last warp has 4 lanes, which shuffle and vote among themselves.
PARTIAL_WARP = PROLOGUE + """
extern "C" __global__ void __launch_bounds__(128) partial_warp(float *__restrict__ out,
    int *__restrict__ votes)
{
  const int t = threadIdx.x, lane = t % warpSize;
  float v = (float)t;
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float w = __shfl_down_sync(0xffffffffu, v, offset);
    if (lane + offset < warpSize && t + offset < (int)blockDim.x) v += w;
  }
  if (lane == 0) out[t / warpSize] = v;
  const int multiples = __syncthreads_count(t % 3 == 0);
  const unsigned odd = __ballot_sync(0xffffffffu, t & 1);
  const float third = __shfl_sync(0xffffffffu, (float)t, 3);
  const float prev = __shfl_up_sync(0xffffffffu, (float)t, 1);
  if (t == 96) {
    votes[0] = multiples;
    votes[1] = (int)odd;
    out[4] = third;
    out[5] = prev;
  }
}

#ifdef POLYOPT_EMULATED
POLYOPT_EMU_ENTRY(partial_warp, (float *__restrict__ out, int *__restrict__ votes), (out, votes))
#endif
"""

# A 3-D grid of 3-D blocks; compound assignments and atomics on a shared int array.
COUNTS_3D = PROLOGUE + """
extern "C" __global__ void counts_3d(int *__restrict__ out)
{
  POLYOPT_SHARED(int, hist_sh, 8);
  const int lin = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  if (lin < 8) hist_sh[lin] = 0;
  __syncthreads();
  if (lin == 0)
    for (int i = 0; i < 8; ++i) {
      hist_sh[i] += 3;
      hist_sh[i]++;
      hist_sh[i] *= 2;
    }
  __syncthreads();
  atomicAdd(&hist_sh[threadIdx.z], (int)(blockIdx.z + 1));
  __syncthreads();
  const int blk = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  if (lin < 8) out[blk * 8 + lin] = hist_sh[lin];
}

#ifdef POLYOPT_EMULATED
POLYOPT_EMU_ENTRY(counts_3d, (int *__restrict__ out), (out))
#endif
"""

BROKEN = PROLOGUE + """
extern "C" __global__ void broken(float *__restrict__ out)
{
  out[threadIdx.x] = undeclared_name;
}
"""

SOURCES = {"sgemm": SGEMM, "block_sum": BLOCK_SUM, "atomic_sum": ATOMIC_SUM,
           "early_exit": EARLY_EXIT, "half_filled": HALF_FILLED, "warp_stages": WARP_STAGES,
           "partial_warp": PARTIAL_WARP, "counts_3d": COUNTS_3D}


@functools.cache
def _have_cxx() -> bool:
    """Whether ``$CC`` (the compiler the emulator drives) compiles C++ at all."""
    cc = shlex.split(os.environ.get("CC", "")) or ["cc"]
    if shutil.which(cc[0]) is None:
        return False
    proc = subprocess.run([*cc, "-x", "c++", "-std=c++17", "-fsyntax-only", "-"],
                          input="#include <type_traits>\nint main() { return 0; }\n",
                          capture_output=True, text=True, check=False)
    return proc.returncode == 0


@pytest.fixture(autouse=True)
def _need_cxx() -> None:
    if not _have_cxx():
        pytest.skip("needs a C++ compiler: `cc` (or $CC) cannot compile C++17")


def _ptr(a: np.ndarray) -> ctypes.c_void_p:
    return a.ctypes.data_as(ctypes.c_void_p)


def _sgemm(source: str, m: int, n: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    c = np.full((m, n), np.nan, dtype=np.float32)
    lib = emulator.build(source)
    grid = ((n + 15) // 16, (m + 15) // 16, 1)
    emulator.launch(lib, "sgemm", grid, (16, 16, 1),
                    [_ptr(c), _ptr(a), _ptr(b), ctypes.c_float(0.5), ctypes.c_int(m),
                     ctypes.c_int(n), ctypes.c_int(k)])
    return c, 0.5 * (a.astype(np.float64) @ b.astype(np.float64))


def test_tiled_sgemm_matches_numpy() -> None:
    c, ref = _sgemm(SGEMM, 37, 29, 45)
    tol = 4 * 45 * float(np.finfo(np.float32).eps)  # float32 sums of K=45 products
    np.testing.assert_allclose(c, ref, rtol=tol, atol=tol)


def test_missing_second_barrier_is_a_race() -> None:
    source = SGEMM.replace("__syncthreads();  /* before the next loads */", "")
    with pytest.raises(EmulationError, match=r"race on shared array 'A_sh'") as info:
        _sgemm(source, 37, 29, 45)
    message = str(info.value)
    assert "kernel 'sgemm', block (0,0,0)" in message
    assert "write by thread (0,0,0), then read by thread (1,0,0)" in message


def test_missing_first_barrier_is_a_race() -> None:
    source = SGEMM.replace("__syncthreads();  /* after the loads */", "")
    with pytest.raises(EmulationError, match=r"race on shared array '[AB]_sh' at index \d+: "
                                             r"read by thread \(\d+,\d+,0\), then write"):
        _sgemm(source, 37, 29, 45)


def test_block_reduction_with_shuffles() -> None:
    n, blocks = 10007, 7
    x = np.random.default_rng(1).standard_normal(n, dtype=np.float32)
    sums = np.zeros(blocks, np.float32)
    maxes = np.zeros(blocks, np.float32)
    lib = emulator.build(BLOCK_SUM)
    emulator.launch(lib, "block_sum", (blocks, 1, 1), (256, 1, 1),
                    [sums, maxes, x, ctypes.c_int(n)])
    np.testing.assert_allclose(sums.sum(dtype=np.float64), x.sum(dtype=np.float64), rtol=1e-5)
    assert maxes.max() == x.max()


def test_atomic_add_sum() -> None:
    n = 1000
    x = np.random.default_rng(2).standard_normal(n)
    total = np.zeros(1, np.float64)
    count = np.zeros(1, np.int32)
    lib = emulator.build(ATOMIC_SUM)
    emulator.launch(lib, "atomic_sum", ((n + 127) // 128,), (128,),
                    [total, count, x, ctypes.c_int(n)])
    np.testing.assert_allclose(total[0], x.sum(), rtol=1e-12)
    assert count[0] == n


def test_early_return_before_barrier_is_divergence() -> None:
    out = np.zeros(64, np.float32)
    lib = emulator.build(EARLY_EXIT)
    with pytest.raises(EmulationError, match=r"barrier divergence: thread \(8,0,0\) waits at "
                                             r"__syncthreads\(\) but thread \(0,0,0\) has "
                                             r"returned"):
        emulator.launch(lib, "early_exit", (1, 1, 1), (64, 1, 1), [out])


def test_uninitialized_shared_read() -> None:
    out = np.zeros(128, np.float32)
    lib = emulator.build(HALF_FILLED)
    emulator.launch(lib, "half_filled", (2,), (128,), [out, ctypes.c_int(63)])
    assert (out == 2.0).all()
    with pytest.raises(EmulationError, match=r"uninitialized shared read: thread \(64,0,0\) "
                                             r"read 't_sh' at index 64"):
        emulator.launch(lib, "half_filled", (2,), (128,), [out, ctypes.c_int(127)])


def test_out_of_bounds_shared_index() -> None:
    out = np.zeros(256, np.float32)
    lib = emulator.build(HALF_FILLED)
    with pytest.raises(EmulationError, match=r"shared index out of bounds: thread \(128,0,0\) "
                                             r"reads 't_sh' at index 128, but 't_sh' has 128"):
        emulator.launch(lib, "half_filled", (1,), (256,), [out, ctypes.c_int(200)])


def test_syncwarp_orders_a_warp() -> None:
    out = np.zeros(2, np.float32)
    lib = emulator.build(WARP_STAGES)
    emulator.launch(lib, "warp_stages", (1,), (64,), [out])
    np.testing.assert_array_equal(out, [sum(range(32)), sum(range(32, 64))])
    racy = WARP_STAGES.replace("+= other;\n    __syncwarp();", "+= other;")
    with pytest.raises(EmulationError, match=r"race on shared array 'w_sh' at index 8: read by "
                                             r"thread \(0,0,0\), then write by thread \(8,0,0\)"):
        emulator.launch(emulator.build(racy), "warp_stages", (1,), (64,), [out])


def test_partial_last_warp() -> None:
    out = np.zeros(6, np.float32)
    votes = np.zeros(2, np.int32)
    emulator.launch(emulator.build(PARTIAL_WARP), "partial_warp", (1,), (100,), [out, votes])
    sums = [sum(range(32 * w, min(32 * w + 32, 100))) for w in range(4)]
    np.testing.assert_array_equal(out, [*sums, 99.0, 96.0])  # lane 0 keeps its own value
    assert votes[0] == len(range(0, 100, 3)) and votes[1] == 0b1010


def test_three_dimensional_indices() -> None:
    out = np.zeros((2, 3, 2, 8), np.int32)
    emulator.launch(emulator.build(COUNTS_3D), "counts_3d", (2, 3, 2), (4, 2, 8), [out])
    # (0 + 3 + 1) * 2, then 8 threads per threadIdx.z each add blockIdx.z + 1.
    expected = 8 + 8 * (np.arange(2) + 1)
    np.testing.assert_array_equal(out, np.broadcast_to(expected[:, None, None, None], out.shape))


def test_invalid_launch_shapes() -> None:
    lib = emulator.build(EARLY_EXIT)
    out = np.zeros(64, np.float32)
    with pytest.raises(EmulationError, match=r"invalid block \(2048,1,1\)"):
        emulator.launch(lib, "early_exit", (1,), (2048,), [out])
    with pytest.raises(EmulationError, match=r"invalid grid \(0,1,1\)"):
        emulator.launch(lib, "early_exit", (0,), (64,), [out])
    with pytest.raises(OptionError, match="no kernel 'nope'"):
        emulator.launch(lib, "nope", (1,), (64,), [out])
    with pytest.raises(OptionError, match="must be a ctypes value"):
        emulator.launch(lib, "early_exit", (1,), (64,), [1.5])


def test_compile_error_carries_the_log() -> None:
    with pytest.raises(CompileError, match="undeclared_name") as info:
        emulator.build(BROKEN)
    assert "undeclared_name" in info.value.log
    assert info.value.source_path and Path(info.value.source_path).read_text() == BROKEN


def test_header_change_changes_the_cache_key(monkeypatch: pytest.MonkeyPatch,
                                             tmp_path: Path) -> None:
    header = tmp_path / "cuda_emu.h"
    header.write_text(emulator.HEADER.read_text())
    monkeypatch.setattr(emulator, "HEADER", header)
    before = emulator.flags()
    header.write_text(header.read_text() + "\n/* edited */\n")
    assert emulator.flags() != before


def test_hundreds_of_blocks_run_quickly() -> None:
    n, blocks = 300 * 256, 300
    x = np.ones(n, np.float32)
    sums = np.zeros(blocks, np.float32)
    maxes = np.zeros(blocks, np.float32)
    lib = emulator.build(BLOCK_SUM)
    start = time.perf_counter()
    emulator.launch(lib, "block_sum", (blocks,), (256,), [sums, maxes, x, ctypes.c_int(n)])
    assert time.perf_counter() - start < 2.0  # about 0.1 s here; generous for loaded CI hosts
    assert (sums == 256).all()


def test_header_is_warning_free(tmp_path: Path) -> None:
    # Compiled, not just parsed: some warnings (-Wclobbered) come from the optimizer.
    cc = shlex.split(os.environ.get("CC", "")) or ["cc"]
    proc = subprocess.run([*cc, "-x", "c++", "-std=c++17", "-O1", "-Wall", "-Wextra", "-Werror",
                           "-Wno-unknown-pragmas", "-c", "-o", str(tmp_path / "k.o"),
                           "-DPOLYOPT_EMULATED", "-include", str(emulator.HEADER), "-"],
                          input=SGEMM + BLOCK_SUM.replace(PROLOGUE, ""), capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.cuda
def test_sources_are_valid_cuda(tmp_path: Path) -> None:
    """The contract stays valid CUDA: nvcc compiles every source above (as one translation
    unit, so nvcc starts once; the kernel and helper names are distinct)."""
    nvcc = nvcc_path()
    if nvcc is None:  # the cuda marker skips first; this keeps the type checker informed
        pytest.skip("needs nvcc")
    src = tmp_path / "all.cu"
    src.write_text("".join(SOURCES.values()))
    proc = subprocess.run([nvcc, "-arch=sm_90", "-c", str(src), "-o", str(tmp_path / "all.o")],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
