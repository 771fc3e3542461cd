"""The GPU suite's machine (``polyopt bench gpu``): PyCUDA and torch loaded when first needed
(never at import), CUDA-event timing of both, ptxas' report per kernel, and the versions that
the results name.

Timing: ``warmup`` calls, then the median of ``repeat`` calls, each between two CUDA events on
the default stream. A polyopt call also allocates, checks and frees its 32-byte error flag and
synchronizes (what every Kernel call costs); torch's calls are timed the same way.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import platform
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from polyopt import api
from polyopt.runtime import cuda as cuda_runtime
from polyopt.runtime import nvcc
from polyopt.version import __version__


@dataclass
class Timing:
    median_ms: float
    min_ms: float
    max_ms: float


@dataclass(frozen=True)
class Gpu:
    """PyCUDA's driver and gpuarray modules, a context on device 0, and its architecture."""

    drv: Any
    gpuarray: Any
    arch: str


def load_gpu() -> Gpu:
    """Raises PolyoptError (saying what is missing) without PyCUDA or a usable GPU."""
    drv, gpuarray = cuda_runtime.pycuda()
    major, minor = drv.Context.get_device().compute_capability()
    return Gpu(drv, gpuarray, f"sm_{major}{minor}")


def load_torch() -> tuple[Any | None, str]:
    """torch with TF32 off, or None and the reason its columns are '-'."""
    try:
        torch = importlib.import_module("torch")
    except ImportError as exc:
        return None, f"torch is not installed ({exc})"
    if not torch.cuda.is_available():
        return None, f"torch {torch.__version__} has no CUDA device (CUDA {torch.version.cuda})"
    # Full float32 on both sides: TF32 would trade accuracy for a speed polyopt cannot use.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    return torch, f"torch {torch.__version__}"


def summarize(times_ms: Sequence[float]) -> Timing:
    return Timing(float(np.median(times_ms)), min(times_ms), max(times_ms))


def time_pycuda(drv: Any, fn: Callable[[], Any], repeat: int, warmup: int) -> Timing:
    """Median of ``repeat`` calls, each between two events on the default stream."""
    for _ in range(warmup):
        fn()
    drv.Context.synchronize()
    times = []
    for _ in range(repeat):
        start, stop = drv.Event(), drv.Event()
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(stop.time_since(start))
    return summarize(times)


def time_torch(torch: Any, fn: Callable[[], Any], repeat: int, warmup: int) -> Timing:
    """As ``time_pycuda``, with torch's events on its current (default) stream."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeat):
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return summarize(times)


def kernel_resources(kernel: api.Kernel, arch: str) -> list[dict[str, Any]]:
    """Per CUDA kernel: launch shape (C expressions of the sizes) and ptxas' report. nvcc's
    output is cached, so this costs no second compile."""
    _, report = nvcc.build_cubin(kernel.source, arch)
    out = []
    for launch in kernel.launch:
        res = report.get(launch["kernel"])
        out.append({**launch, "registers": res.registers if res else None,
                    "shared_bytes": res.shared_bytes if res else None,
                    "spills": res.spills if res else None})
    return out


def version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def nvcc_version() -> str:
    path = nvcc.nvcc_path()
    if path is None:
        return "not found"
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        proc = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30,
                              check=False)
        lines = proc.stdout.strip().splitlines()
        return f"{path}: {lines[-1] if lines else 'no output'}"
    return f"{path}: did not run"


def cuda_version(code: int) -> str:
    """The driver's CUDA version from its integer form (12040 -> 12.4)."""
    return f"{code // 1000}.{code % 1000 // 10}"


def environment(gpu: Gpu, torch: Any, torch_note: str) -> dict[str, Any]:
    """The device, toolkit, peer and versions that a result file names."""
    dev = gpu.drv.Context.get_device()
    torch_info = torch_note if torch is None else (
        f"torch {torch.__version__} (CUDA {torch.version.cuda}, cuDNN "
        f"{torch.backends.cudnn.version()}), cudnn.benchmark={torch.backends.cudnn.benchmark},"
        " TF32 off")
    return {"device": dev.name(), "arch": gpu.arch,
            "memory_gib": round(dev.total_memory() / 2**30, 1),
            "driver_cuda": cuda_version(gpu.drv.get_driver_version()),
            "pycuda_built_for_cuda": ".".join(map(str, gpu.drv.get_version())),
            "nvcc": nvcc_version(), "torch": torch_info,
            "versions": {"python": platform.python_version(), "numpy": np.__version__,
                         "polyopt": __version__, "pycuda": version("pycuda"),
                         "torch": version("torch")}}
