"""``target="cuda-emulated"``: the exact CUDA source of a kernel run on the CPU by
``polyopt.runtime.emulator`` (threads of a block as fibers, shared memory race-checked)."""

from __future__ import annotations

import ctypes
from collections.abc import Sequence

import numpy as np

from polyopt.codegen.contract import KernelSource
from polyopt.runtime import emulator
from polyopt.runtime.launch import LaunchPlan


class EmulatedKernel(LaunchPlan):
    """A CUDA ``KernelSource`` compiled for the CPU: ``run(buffers, dims)`` launches each
    kernel in turn on numpy buffers (host memory plays the device's)."""

    def __init__(self, source: KernelSource) -> None:
        super().__init__(source)
        self._lib = emulator.build(source.text)

    def run(self, buffers: Sequence[np.ndarray], dims: Sequence[int]) -> None:
        err = np.zeros(4, np.int64)
        scalars = [ctypes.c_long(v) for v in self.scalar_args(dims)]
        for launch, grid, block in self.launches(dims):
            emulator.launch(self._lib, launch.symbol, grid, block, [*buffers, err, *scalars])
            self.check(err)
