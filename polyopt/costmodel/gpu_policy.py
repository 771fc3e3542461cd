"""The thresholds of the CUDA mapping (``pipeline/gpu.py``) and its tuning space:
:class:`GpuPolicy`, with the :class:`GpuModel` the CUDA features measure against. The CPU
pipeline's are in ``costmodel/policy.py``; :class:`~polyopt.schedules.limits.Caps` bounds
generated code on every target. Each field says where its value comes from, as there.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from polyopt.schedules.limits import CAPS, Caps


@dataclass(frozen=True)
class GpuModel:
    """What the CUDA pipeline and features need of a GPU. ``runtime.cuda.device_model()``
    reads it from the device when there is one; :data:`DEFAULT_GPU` otherwise."""

    name: str
    """The device's name, or which default this is."""

    shared_bytes_per_block: int = 48 << 10
    """Shared memory one block may use without opting in to more (48 KB on every GPU since
    Fermi; the device's ``MAX_SHARED_MEMORY_PER_BLOCK``)."""

    multiprocessors: int = 132
    """Streaming multiprocessors (``MULTIPROCESSOR_COUNT``): 132 on an H100 SXM or H200."""

    registers_per_thread: int = 255
    """Registers one thread may hold before spilling (255 since compute capability 3.5; no
    device attribute reports it)."""

    registers_per_multiprocessor: int = 64 << 10
    """32-bit registers per multiprocessor (``MAX_REGISTERS_PER_MULTIPROCESSOR``)."""

    max_threads_per_block: int = 1024
    """Threads per block (``MAX_THREADS_PER_BLOCK``: 1024 since compute capability 2.0)."""

    @property
    def registers_per_full_block(self) -> int:
        """Registers per thread when a block of the most threads is resident (64 = 65536 /
        1024 on every GPU since Kepler): the budget a thread's accumulators are measured
        against."""
        return self.registers_per_multiprocessor // self.max_threads_per_block


H100 = GpuModel("NVIDIA H100/H200 (default model)")
DEFAULT_GPU = H100


@dataclass(frozen=True)
class GpuPolicy:
    """The CUDA mapping's and the CUDA tuner's thresholds for one GPU model
    (:func:`gpu_policy`). None of the tile shapes is measured yet (BENCHMARKS.md: no GPU was
    lent); ``scripts/bench_gpu.py`` measures them against cuBLAS/cuDNN."""

    model: GpuModel = DEFAULT_GPU
    """The GPU the features and the thread limit come from."""

    block: tuple[int, int] = (32, 8)
    """Threads per block (x, y) for plain nests: a warp along the stride-1 loop (coalesced
    accesses), 256 threads in all. Chosen, not measured."""

    big_tile: tuple[int, int, int] = (128, 128, 8)
    """Block tile (rows, columns, reduction) of a contraction whose output is at least
    ``big_min`` on both sides: the classic SGEMM tile (CUTLASS's 128x128x8), not measured
    here; 8 KB of shared memory, 256 threads of ``big_regs``."""

    big_regs: tuple[int, int] = (8, 8)
    """Each thread's outputs (rows, columns) in the big tile: 64 accumulators, which compile
    without spills (``scripts/bench_gpu.py --compile-only``; BENCHMARKS.md, GPU)."""

    small_tile: tuple[int, int, int] = (64, 64, 8)
    """Block tile of smaller outputs (and with a tile given without ``regs``): 256 threads
    of ``small_regs``, so a small output still has several blocks."""

    small_regs: tuple[int, int] = (4, 4)
    """Each thread's outputs in the small tile, and with any tile given without ``regs``."""

    big_min: int = 128
    """Rows and columns from which a contraction takes the big tile (one big tile's side)."""

    caps: Caps = CAPS
    """Code-size limits (machine-independent)."""

    def tile_for(self, rows: int, cols: int, tile: tuple[int, int, int] | None = None,
                 regs: tuple[int, int] | None = None) -> tuple[int, int, int, int, int]:
        """(rows, columns, reduction, rows and columns per thread) of a contraction's block
        tile: ``tile`` and ``regs`` when given, else the big tile for outputs of at least
        ``big_min`` on both sides and the small one otherwise."""
        big = rows >= self.big_min and cols >= self.big_min
        bm, bn, bk = tile or (self.big_tile if big else self.small_tile)
        rm, rn = regs or (self.big_regs if tile is None and big else self.small_regs)
        return bm, bn, bk, rm, rn


@functools.lru_cache(maxsize=16)
def gpu_policy(model: GpuModel | None = None) -> GpuPolicy:
    """The CUDA policy for ``model`` (default: :data:`DEFAULT_GPU`)."""
    return GpuPolicy(model or DEFAULT_GPU)


GPU_POLICY = gpu_policy()
