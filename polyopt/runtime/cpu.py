"""Load a generated C kernel and call it with numpy buffers."""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from polyopt.codegen.contract import KernelSource
from polyopt.errors import BoundsError
from polyopt.runtime import pool, trampoline
from polyopt.runtime.compiler import DEFAULT_FLAGS, load_library

# -fwrapv: integer arithmetic wraps like numpy's instead of being undefined on overflow.
# -fno-math-errno: generated code never reads errno, and libm calls that may set it can be
# neither hoisted nor vectorized. -fno-trapping-math: nor does it read the floating-point
# exception flags, and GCC will not if-convert (so vectorize) a select whose arm converts or
# multiplies, e.g. the clamps of polyopt's own vector math (codegen/vmath.py). Neither
# changes a result: NaN, infinities and signed zeros keep IEEE semantics.
C_FLAGS = (*DEFAULT_FLAGS, "-fwrapv", "-fno-math-errno", "-fno-trapping-math")


def flags_for(openmp: bool = True, extra: Sequence[str] = ()) -> tuple[str, ...]:
    base = C_FLAGS if openmp else tuple(f for f in C_FLAGS if f != "-fopenmp")
    return (*base, *extra)


class CpuKernel:
    """A loaded ``KernelSource``: ``run(buffers, dims)`` executes it."""

    def __init__(self, source: KernelSource, flags: Sequence[str] = C_FLAGS) -> None:
        self.source = source
        lib = load_library(source.text, flags=list(flags))
        fn = _function(lib, source.symbol)
        self._lib = lib  # keeps the library loaded as long as the kernel lives
        self._fn = fn
        # the function making the copies of constant inputs, when the kernel keeps some
        self._once = None if source.once is None else _function(lib, source.once)
        self._once_address = ctypes.cast(self._once, ctypes.c_void_p).value if self._once \
            else None
        self._pointers = ctypes.c_void_p * max(1, len(source.buffers))
        # The extension call (trampoline.py) when it builds; ctypes otherwise.
        tramp = trampoline.load()
        fits = tramp is not None and len(source.buffers) <= trampoline.MAX_BUFFERS
        self._call = tramp.call if fits else None  # type: ignore[union-attr]
        self._prepare = getattr(tramp, "prepare", None) if fits else None
        self._run = getattr(tramp, "run", None)
        self._address = ctypes.cast(fn, ctypes.c_void_p).value

    @staticmethod
    def dims_array(dims: Sequence[int]) -> ctypes.Array:
        """The ``dims`` argument, to build once and pass to many ``run`` calls."""
        return (ctypes.c_long * max(1, len(dims)))(*dims)

    def caller(self, dims: ctypes.Array) -> Callable[..., None]:
        """``run`` at fixed ``dims``, taking the buffers then the scratch addresses as
        arguments: the least a call can do."""
        call, address = self._call, self._address
        if call is None:
            return lambda *buffers: self.run([b for b in buffers if not isinstance(b, int)],
                                             dims, [b for b in buffers if isinstance(b, int)])

        def run(*buffers: np.ndarray | int) -> None:
            failure = call(address, dims, *buffers)
            if failure is not None:
                self._raise(failure)
        return run

    def bind(self, dims: Sequence[int], inputs: Sequence[tuple[np.dtype, tuple[int, ...]]],
             outputs: Sequence[tuple[tuple[int, ...], np.dtype]]) -> Callable[[tuple[Any, ...]],
                                                                             Any] | None:
        """A call at fixed ``dims`` of a kernel without scratch, made in C (the trampoline's
        ``run``): given the inputs as a tuple, it returns the new outputs (one array or a
        tuple), or None when an input is not an exact C-contiguous, aligned ndarray of the
        dtype object and shape in ``inputs`` (the caller checks and explains). Outputs the
        pool serves (``pool.pooled``) come from it, the rest from numpy. None where the
        trampoline was built without numpy."""
        if self._prepare is None or self._run is None or not outputs:
            return None
        plan = self._prepare(self._address, tuple(int(d) for d in dims),
                             tuple((dt, tuple(shape)) for dt, shape in inputs),
                             tuple((dt, tuple(shape)) for shape, dt in outputs), self._raise,
                             tuple(functools.partial(pool.empty, tuple(shape), dt)
                                   if pool.pooled(shape, dt) else None
                                   for shape, dt in outputs))
        return functools.partial(self._run, plan)

    def run(self, buffers: Sequence[np.ndarray], dims: Sequence[int] | ctypes.Array,
            addresses: Sequence[int] = (), *, once: bool = False) -> None:
        """Call the kernel on ``buffers``, then the buffers at ``addresses`` (scratch whose
        addresses the caller keeps: finding an array's address costs a microsecond); with
        ``once``, its function that makes the copies of constants (``KernelSource.once``)."""
        dim_arr = dims if isinstance(dims, ctypes.Array) else self.dims_array(dims)
        fn = self._once if once else self._fn
        if fn is None:
            raise ValueError(f"kernel {self.source.name} makes no copies of constants")
        if self._call is not None:
            address = self._once_address if once else self._address
            failure = self._call(address, dim_arr, *buffers, *addresses)
            if failure is not None:
                self._raise(failure)
            return
        ptrs = self._pointers(*(b.ctypes.data for b in buffers), *addresses)
        err = (ctypes.c_long * 4)()
        fn(ptrs, dim_arr, err)
        if err[0]:
            self._raise(tuple(err))

    def _raise(self, err: Sequence[int]) -> None:
        what = self.source.gathers[err[1]] if err[1] < len(self.source.gathers) else "a read"
        raise BoundsError(
            f"data-dependent index out of range in def '{self.source.name}': {what} "
            f"computed index {err[2]} in dim {err[3]}, outside the tensor's extent")


def _function(lib: ctypes.CDLL, symbol: str) -> Any:
    """A kernel function of ``lib`` (``codegen.contract``'s calling convention)."""
    fn = lib[symbol]
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    return fn
