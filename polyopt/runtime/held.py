"""The copies a kernel keeps of its constant inputs (``KernelSource.held``: packed weights),
per call plan, shared by every thread.

The kernel's ``once`` function makes a set of them at the first call with constants at new
addresses, and later calls with the same constants read that set. One kernel may serve
several sets of constants (a network's repeated layers share one compile): each has its own
copies, and a reference to its constants, so that no other array can take their addresses
while the copies are kept. What a call changes in place in a constant is not seen: that is
what declaring it constant means (the ``constants`` option).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from polyopt.runtime.arrays import scratch_zeros
from polyopt.runtime.bounded import bounded_put

# Sets of copies kept per call plan: a BERT-base encoder's twelve layers share each of their
# kernels, as ResNet-50's repeated blocks do; past this many the oldest set goes.
MAX_SETS = 64


class Held:
    """The held locals of one call plan: ``shapes`` (shape and dtype) by position among the
    kernel's locals, made by ``make`` (the kernel's ``once`` function, given the call's
    buffers and its locals' addresses) from the inputs at positions ``constants``."""

    def __init__(self, shapes: dict[int, tuple[tuple[int, ...], np.dtype]],
                 constants: tuple[int, ...],
                 make: Callable[[Sequence[Any], Sequence[int]], None]) -> None:
        self.shapes = shapes
        self.constants = constants
        self._make = make
        # the constants' addresses -> (the copies by local position, the constants kept)
        self._sets: dict[tuple[int, ...], tuple[dict[int, int], Any]] = {}
        self._lock = threading.Lock()

    def addresses(self, buffers: Sequence[Any], scratch: Sequence[int]
                  ) -> tuple[tuple[int, ...], Any]:
        """The call's locals' addresses: ``scratch`` (this thread's), with the copies made
        from the constants among ``buffers`` (the call's inputs and outputs) in place of the
        held ones, made now if they were not before; and what keeps those copies alive
        (another thread may drop the set meanwhile), to hold until the call returns."""
        stamp = tuple(buffers[k].__array_interface__["data"][0] for k in self.constants)
        made = self._sets.get(stamp)
        if made is None:
            with self._lock:  # two threads' first calls make them once
                made = self._sets.get(stamp) or self._new_set(stamp, buffers, scratch)
        copies = made[0]
        return tuple(copies.get(k, a) for k, a in enumerate(scratch)), made

    def _new_set(self, stamp: tuple[int, ...], buffers: Sequence[Any],
                 scratch: Sequence[int]) -> tuple[dict[int, int], Any]:
        arrays = {k: scratch_zeros(*shape) for k, shape in self.shapes.items()}
        copies = {k: a.ctypes.data for k, a in arrays.items()}
        self._make(buffers, [copies.get(k, a) for k, a in enumerate(scratch)])
        # the arrays live as long as their addresses are handed out; the constants, so
        # that no other array takes their addresses meanwhile
        made = (copies, (arrays, [buffers[k] for k in self.constants]))
        bounded_put(self._sets, stamp, made, MAX_SETS)
        return made
