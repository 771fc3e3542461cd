"""``cuda-emulated`` execution: run the exact emitted CUDA source on the CPU, race-checked.

CI machines have nvcc but no GPU. ``build`` compiles a CUDA source as C++ with
``cuda_emu.h`` force-included: the header stands in for the CUDA built-ins, runs the threads of
each block as cooperative fibers and checks every access to a ``POLYOPT_SHARED`` array, so a
missing ``__syncthreads()`` is reported on every run instead of by chance. ``launch`` runs one
kernel over a grid and raises :class:`~polyopt.errors.EmulationError` with the checker's report.

The source must follow the printer's contract: shared arrays declared with
``POLYOPT_SHARED(T, name, n)`` and, per kernel, a ``POLYOPT_EMU_ENTRY(name, (params), (args))``
line under ``#ifdef POLYOPT_EMULATED`` (see ``cuda_emu.h``).
"""

from __future__ import annotations

import ctypes
import hashlib
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from polyopt.errors import EmulationError, OptionError
from polyopt.runtime import compiler

HEADER = Path(__file__).with_name("cuda_emu.h")
"""The header force-included in front of every emulated source."""

LINK_FLAGS: tuple[str, ...] = ("-lstdc++",)
"""The C compiler driver (``$CC``) links C++ objects without the C++ runtime unless told."""

_MAX_DIM = 2**32 - 1


def flags() -> tuple[str, ...]:
    """The compile flags: C++17 with the header force-included.

    The header's hash rides along as an unused define, so editing the header changes the cache
    key and never reuses an object built with the old one. ``#pragma unroll`` is CUDA's, not
    GCC's: its warning would only be noise in the log. ``-fwrapv``: signed integers wrap, as
    on the C target and on the GPU, instead of being undefined on overflow.
    """
    digest = hashlib.sha256(HEADER.read_bytes()).hexdigest()[:16]
    return ("-x", "c++", "-std=c++17", "-O1", "-fwrapv", "-fPIC", "-shared", "-Wno-unknown-pragmas",
            "-DPOLYOPT_EMULATED", f"-DPOLYOPT_EMU_HEADER={digest}", "-include", str(HEADER))


def build(source: str) -> ctypes.CDLL:
    """Compile ``source`` (CUDA, emitted per the printer's contract) for the CPU and load it.

    Uses the C compiler (``$CC``, default ``cc``) in C++ mode and the kernel cache, like C
    kernels. Raises :class:`~polyopt.errors.CompileError` with the log and the saved source.
    """
    return compiler.load_library(source, flags=flags(), link_flags=LINK_FLAGS)


def launch(lib: ctypes.CDLL, name: str, grid: Sequence[int], block: Sequence[int],
           args: Sequence[object], shared_bytes: int = 0) -> None:
    """Run kernel ``name`` of ``lib`` over ``grid`` x ``block`` threads with ``args``.

    ``grid`` and ``block`` are ``(x, y, z)``, missing trailing dimensions counting as 1.
    ``args`` are ctypes values in the kernel's parameter order (``c_int``, ``c_float``,
    ``c_void_p``...); a C-contiguous numpy array passes its data pointer. Raises
    :class:`~polyopt.errors.EmulationError` with the checker's report when the launch finds a
    race, an uninitialized shared read, barrier divergence, an out-of-bounds shared index or an
    invalid launch shape, and :class:`~polyopt.errors.OptionError` for a bad argument.
    """
    entry = _entry(lib, name)
    if not isinstance(shared_bytes, int) or not 0 <= shared_bytes <= _MAX_DIM:
        raise OptionError(f"shared_bytes must be an int in 0..{_MAX_DIM}, not {shared_bytes!r}")
    values = [_ctypes_value(name, i, a) for i, a in enumerate(args)]
    # The report lives in a thread-local buffer of the library: read it on this thread, now.
    if entry(_dims("grid", grid), _dims("block", block), ctypes.c_uint(shared_bytes), *values):
        report = ctypes.cast(lib.po_emu_report(), ctypes.c_char_p).value or b""
        raise EmulationError(report.decode(errors="replace")
                             or f"emulated launch of {name!r} failed without a report")


def _entry(lib: ctypes.CDLL, name: str) -> Callable[..., int]:
    try:
        entry = getattr(lib, f"po_emu_launch_{name}")
    except AttributeError:
        raise OptionError(f"the emulated library has no kernel {name!r}: po_emu_launch_{name} is "
                          "missing (is its POLYOPT_EMU_ENTRY line there?)") from None
    entry.restype = ctypes.c_int
    lib.po_emu_report.restype = ctypes.c_void_p
    return entry


def _dims(what: str, dims: Sequence[int]) -> ctypes.Array[ctypes.c_uint]:
    """``(x, y, z)`` as a C ``unsigned[3]``; zeros pass through for the header to report."""
    values = list(dims)
    if not 1 <= len(values) <= 3 or not all(
            isinstance(v, (int, np.integer)) and not isinstance(v, bool) and 0 <= v <= _MAX_DIM
            for v in values):
        raise OptionError(f"{what} must be 1 to 3 non-negative ints (x, y, z), not {dims!r}")
    values += [1] * (3 - len(values))
    return (ctypes.c_uint * 3)(*(int(v) for v in values))


def _ctypes_value(name: str, index: int, arg: object) -> object:
    """A ctypes value as is; an array as its data pointer. Plain Python numbers are refused:
    without a declared type ctypes would pass a float as a double."""
    if isinstance(arg, np.ndarray):
        if not arg.flags.c_contiguous:
            raise OptionError(f"argument {index} of {name!r} is a non-contiguous array; the "
                              "kernel would write to a copy")
        return arg.ctypes.data_as(ctypes.c_void_p)
    if isinstance(arg, (ctypes._SimpleCData, ctypes._Pointer, ctypes.Array)):
        return arg
    raise OptionError(f"argument {index} of {name!r} must be a ctypes value (c_int, c_float, "
                      f"c_void_p...) or a numpy array, not {type(arg).__name__}")
