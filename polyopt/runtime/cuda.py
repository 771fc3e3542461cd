"""``target="cuda"``: launch a kernel's CUDA source on the GPU through PyCUDA.

The source is compiled by nvcc to a cubin for the device's architecture (cached) and loaded
into PyCUDA's primary context at the first call. ``run`` takes numpy arrays (copied to the
device and back) or PyCUDA ``GPUArray``s (used in place).
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from polyopt.codegen.contract import KernelSource
from polyopt.costmodel.gpu_machine import GpuModel
from polyopt.errors import CompileError, PolyoptError
from polyopt.runtime import nvcc
from polyopt.runtime.launch import LaunchPlan


def pycuda() -> tuple[Any, Any]:
    """(pycuda.driver, pycuda.gpuarray) with a context on device 0, or a clear error."""
    try:
        importlib.import_module("pycuda.autoprimaryctx")
        return (importlib.import_module("pycuda.driver"),
                importlib.import_module("pycuda.gpuarray"))
    except ImportError as e:
        raise PolyoptError("target 'cuda' needs PyCUDA (pip install -e '.[cuda]', which builds "
                           "it against the CUDA headers and driver; see README) and a GPU; "
                           f"import failed: {e}. target='cuda-emulated' runs the same kernels "
                           "on the CPU") from e
    except Exception as e:  # no driver, no device: PyCUDA raises its own errors
        raise PolyoptError(f"target 'cuda': no usable CUDA device ({e})") from e


@functools.cache
def device_model() -> GpuModel | None:
    """The :class:`GpuModel` of device 0 from its attributes (the driver alone: no context
    is created), or None without PyCUDA, a driver or a device (then the schedule layer's
    named default, ``gpu_machine.DEFAULT_GPU``, applies). Registers per thread have no device
    attribute and keep the model's default."""
    try:
        drv = importlib.import_module("pycuda.driver")
        drv.init()
        device = drv.Device(0)
        attr = drv.device_attribute
        return GpuModel(
            name=str(device.name()),
            shared_bytes_per_block=int(device.get_attribute(attr.MAX_SHARED_MEMORY_PER_BLOCK)),
            multiprocessors=int(device.get_attribute(attr.MULTIPROCESSOR_COUNT)),
            registers_per_multiprocessor=int(
                device.get_attribute(attr.MAX_REGISTERS_PER_MULTIPROCESSOR)),
            max_threads_per_block=int(device.get_attribute(attr.MAX_THREADS_PER_BLOCK)))
    except Exception:  # no PyCUDA, no driver, no device: PyCUDA raises its own errors
        return None


def is_device_array(x: Any) -> bool:
    return hasattr(x, "gpudata") and hasattr(x, "shape") and hasattr(x, "dtype")


class CudaKernel(LaunchPlan):
    """A CUDA ``KernelSource`` loaded on the GPU: ``run(buffers, dims)`` launches its
    kernels in order on one stream."""

    def __init__(self, source: KernelSource) -> None:
        super().__init__(source)
        self._drv, self._gpuarray = pycuda()
        major, minor = self._drv.Context.get_device().compute_capability()
        cubin, self.resources = nvcc.build_cubin(source.text, f"sm_{major}{minor}")
        try:
            self._module = self._drv.module_from_buffer(cubin)
        except self._drv.Error as e:
            raise CompileError(f"the CUDA driver could not load the kernels of "
                               f"'{source.name}': {e}") from e
        self._fns = {ln.symbol: self._module.get_function(ln.symbol)
                     for ln in source.launches}
        self._scratch: dict[tuple[int, tuple[int, ...]], Any] = {}
        self._err = self._gpuarray.zeros(4, np.int64)  # kept: no allocation per call

    def empty(self, shape: tuple[int, ...], dtype: np.dtype) -> Any:
        return self._gpuarray.empty(shape, dtype)

    def run(self, buffers: Sequence[Any], dims: Sequence[int]) -> None:
        device = [self._on_device(i, b) for i, b in enumerate(buffers)]
        err = self._err
        self._drv.memset_d8(err.gpudata, 0, err.nbytes)
        scalars = [np.int64(v) for v in self.scalar_args(dims)]
        args = [*(d.gpudata for d in device), err.gpudata, *scalars]
        for launch, grid, block in self.launches(dims):
            self._fns[launch.symbol](*args, grid=grid, block=block)
        self._drv.Context.synchronize()
        for host, dev, role in zip(buffers, device, self.source.roles, strict=True):
            if role == "output" and host is not dev:
                dev.get(host)
        self.check(err.get())

    def _on_device(self, i: int, buf: Any) -> Any:
        """A buffer on the device: as given, copied there (inputs, outputs), or the
        kernel's own zeroed scratch for a local (kept across calls, like the C path's)."""
        if is_device_array(buf):
            return buf
        if self.source.roles[i] != "local":
            return self._gpuarray.to_gpu(buf)
        key = (i, buf.shape)
        if key not in self._scratch:
            self._scratch[key] = self._gpuarray.zeros(buf.shape, buf.dtype)
        return self._scratch[key]
