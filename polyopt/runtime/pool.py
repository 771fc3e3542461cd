"""Memory for the outputs of CPU kernels, kept for the next call when the arrays die.

A large ``np.empty`` is fresh memory from the OS more often than not: glibc maps
allocations above its threshold (up to 32 MiB) anew and returns freed ones, and gives the
top of its heap back once more than twice that is free, so a model whose tensors churn
through tens of MiB keeps getting fresh pages, each faulting at its first write in the
kernel's parallel loops. ResNet-50 at batch 8 under ``backend="polyopt"`` (Intel Xeon VM,
2 threads): a 1 x 1 convolution writing 25.7 MB (8 x 256 x 56 x 56) took 40-60 ms in the
calls with some 650 page faults and 6 ms in those with none, two of its three calls a
forward faulting; alone, on reused memory, it ran in a third of torch's time
(``scripts/checks/model_partitions.py --model resnet50 --batch 8 --torch``). Inductor
plans its buffers' reuse within a graph; a kernel called from Python cannot know its
output's lifetime, so outputs of at least ``min_bytes()`` come from this pool: the array's
base is a ``_Block`` whose death (the last array or tensor on its memory gone) returns the
memory to the pool, which hands it to the next output of that size. Whole models, 4
alternating processes each against f7edb3e: ResNet-50 at batch 8 0.771x -> 0.833x
Inductor; MobileNetV2 at batch 8 0.954x -> 1.105x and BERT-base at batch 1 unchanged
(126.7 and 125.8 ms), both with outputs pooled from 256 KiB. Free memory kept is bounded
by ``keep_bytes()``; a block freed beyond it goes back to the allocator. Blocks start on
``arrays.alignment()``, as scratch does.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os

import numpy as np

from polyopt.costmodel.machine import host
from polyopt.runtime.arrays import alignment

PAGE = 4096  # blocks are whole pages, so outputs a few bytes apart share a size


@functools.cache
def min_bytes() -> int:
    """Outputs from this size up are pooled: twice a core's L2. A smaller one is written
    faster into the block glibc freed last, which may still be in the writing core's L2
    (MobileNetV2 at batch 1, 6 alternating processes each: pooled from 256 KiB up 17.8 ms
    against 14.2 without the pool, from 2 MiB up 16.1 against 14.5, though the same code
    moved by 2 ms between runs; from 4 MiB up, as fast); a larger one is in no core's L2
    whichever block it gets, and fresh pages cost far more (the pool's own cost is about
    1 us an output)."""
    return 2 * host().l2_bytes


@functools.cache
def keep_bytes() -> int:
    """Free memory the pool keeps at most: an eighth of physical memory, at most 1 GiB."""
    try:
        physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        physical = 8 << 30
    return min(1 << 30, physical // 8)


_free: dict[int, list[np.ndarray]] = {}
_kept = [0]  # bytes in _free


class _Block:
    """The base of a pooled output array: holds the raw memory while any array reads it,
    and gives it back when none does."""

    __slots__ = ("__array_interface__", "raw")

    def __init__(self, raw: np.ndarray, nbytes: int) -> None:
        self.raw = raw
        start = raw.ctypes.data
        start += -start % alignment()
        # bytes, viewed as the dtype after: a typestr cannot name every dtype (bfloat16)
        self.__array_interface__ = {"data": (start, False), "shape": (nbytes,),
                                    "typestr": "|u1", "version": 3}

    def __del__(self) -> None:
        # at interpreter shutdown the module's globals may be gone
        with contextlib.suppress(Exception):
            _give_back(self.raw)


def pooled(shape: tuple[int, ...], dtype: np.dtype) -> bool:
    """Does an output of ``shape`` and ``dtype`` come from the pool?"""
    return _pooled(math.prod(shape) * dtype.itemsize, dtype)


def _pooled(nbytes: int, dtype: np.dtype) -> bool:
    return nbytes >= min_bytes() and not dtype.hasobject


def empty(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """An uninitialized C-contiguous array, from the pool when it is ``min_bytes()`` or more."""
    nbytes = math.prod(shape) * dtype.itemsize
    if not _pooled(nbytes, dtype):
        return np.empty(shape, dtype)
    size = -(-(nbytes + alignment()) // PAGE) * PAGE
    kept = _free.get(size)
    if kept:
        raw = kept.pop()
        _kept[0] -= size
    else:
        raw = np.empty(size, np.uint8)
    return np.asarray(_Block(raw, nbytes)).view(dtype).reshape(shape)


def _give_back(raw: np.ndarray) -> None:
    size = raw.nbytes
    if _kept[0] + size > keep_bytes():
        return  # beyond the bound: the allocator has it back
    _free.setdefault(size, []).append(raw)
    _kept[0] += size


def kept_bytes() -> int:
    """Free memory the pool holds now."""
    return _kept[0]


def release() -> None:
    """Give every kept block back to the allocator."""
    _free.clear()
    _kept[0] = 0
