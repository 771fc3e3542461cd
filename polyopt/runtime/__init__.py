"""Runtime: compile generated code, cache it on disk, load it and call it."""

from __future__ import annotations

from polyopt.runtime.compiler import compile_shared, compiler_identity, load_library
from polyopt.runtime.cpu import CpuKernel

__all__ = ["CpuKernel", "compile_shared", "compiler_identity", "load_library"]
