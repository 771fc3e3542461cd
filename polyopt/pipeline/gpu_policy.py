"""The thresholds of the CUDA mapping (``pipeline/gpu.py``) and its tuning space:
:class:`GpuPolicy`, for a :class:`~polyopt.costmodel.gpu_machine.GpuModel` (the GPU's facts).
The CPU pipeline's are in ``pipeline/policy.py``; :class:`~polyopt.schedules.limits.Caps`
bounds generated code on every target. Each field says where its value comes from, as there.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from polyopt.costmodel.gpu_machine import DEFAULT_GPU, GpuModel
from polyopt.schedules.limits import CAPS, Caps


@dataclass(frozen=True)
class GpuPolicy:
    """The CUDA mapping's and the CUDA tuner's thresholds for one GPU model
    (:func:`gpu_policy`). None of the tile shapes is measured yet (BENCHMARKS.md: no GPU was
    lent); ``polyopt bench gpu`` measures them against cuBLAS/cuDNN."""

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
    without spills (``polyopt bench gpu --compile-only``; BENCHMARKS.md, GPU)."""

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
