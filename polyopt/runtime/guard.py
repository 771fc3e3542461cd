"""Scratch that ends at an inaccessible page (``POLYOPT_GUARD_SCRATCH=1``).

A generated kernel's locals and packed copies are allocated by the runtime. Partial
register tiles read past a packed copy's last element by design (into the tail the kernel
asks for, ``KernelSource.tails``); any read beyond that is a bug, but a read a few bytes
past a large allocation usually lands in mapped memory and goes unnoticed. Here each
scratch array is placed so that it ends exactly where a page mapped with no access begins:
the first byte read past it faults at once, in tests, instead of some day in a user's run.
Linux and macOS (``mmap`` and ``mprotect``); elsewhere plain zeroed arrays.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import math
import mmap

import numpy as np

PROT_NONE = 0


@functools.cache
def _libc() -> ctypes.CDLL | None:
    """libc, for ``mprotect``; looked up at the first guarded array, not at import (the
    system's library lookup takes milliseconds)."""
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name, use_errno=True) if name else None
    except OSError:
        return None


def guarded_zeros(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """Zeros of ``shape`` whose last byte is followed by an inaccessible page."""
    dtype = np.dtype(dtype)
    nbytes = max(1, math.prod(shape)) * dtype.itemsize
    libc = _libc()
    if libc is None or not hasattr(mmap, "MAP_ANONYMOUS"):
        return np.zeros(shape, dtype)
    page = mmap.PAGESIZE
    pages = -(-nbytes // page)
    buf = mmap.mmap(-1, (pages + 1) * page)  # anonymous: zero-filled
    base = ctypes.addressof(ctypes.c_char.from_buffer(buf))
    if libc.mprotect(ctypes.c_void_p(base + pages * page), ctypes.c_size_t(page),
                      PROT_NONE) != 0:
        return np.zeros(shape, dtype)
    start = pages * page - nbytes  # the array's end meets the guard page
    flat = np.frombuffer(buf, np.uint8, count=nbytes, offset=start)  # keeps ``buf`` alive
    return flat.view(dtype)[:math.prod(shape)].reshape(shape)
