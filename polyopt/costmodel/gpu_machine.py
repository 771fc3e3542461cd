"""What the CUDA pipeline, its code and its features need of a GPU: :class:`GpuModel`, read
from the device (``runtime.cuda.device_model``) or the named default, :data:`DEFAULT_GPU`.
The CUDA mapping's thresholds are ``pipeline/gpu_policy.py``'s.
"""

from __future__ import annotations

from dataclasses import dataclass


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
