"""Calling a compiled kernel: each input checked, the sizes bound from the shapes, and a
call plan per tuple of input shapes (the variant's kernel, the output shapes, the dims[]
argument, the scratch) made once; the hot path checks, allocates and calls in C.

``Calls`` serves one ``polyopt.Kernel``: the kernel for a tuple of sizes comes from the
``variant`` function it is given (the API's per-shape variant cache), so this layer knows
nothing of lowering.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from polyopt import dtypes, ir
from polyopt.errors import InputTypeError, ShapeError
from polyopt.lang import syntax
from polyopt.runtime import pool
from polyopt.runtime.arrays import scratch_zeros
from polyopt.runtime.bounded import bounded_put
from polyopt.runtime.cpu import CpuKernel
from polyopt.runtime.cuda import is_device_array
from polyopt.runtime.held import Held
from polyopt.runtime.warm import Compiled, Signature

# What a Kernel keeps per shape, so that a long-lived one called at ever-new shapes stays
# within bounds (issue 40); past a bound the oldest entry goes (a later call remakes it).
MAX_PLANS = 64  # call plans, by input shapes (each holds its variant's kernel)
MAX_SCRATCH = 4  # scratch buffer sets per thread, by shape

Variant = Callable[[dict[str, int]], tuple[Compiled, Any]]


class Calls:
    """The calls of one kernel: its inputs' declarations, the sizes fixed at compile time,
    whether inputs may be GPU arrays, and where a tuple of sizes gets its kernel."""

    def __init__(self, name: str, inputs: Sequence[syntax.TensorDecl], sizes: dict[str, int],
                 device: bool, variant: Variant, constants: Sequence[str] = ()) -> None:
        self.name = name
        self._inputs = tuple(inputs)
        # the positions of the inputs declared constant (the option ``constants``)
        self._constants = tuple(k for k, d in enumerate(self._inputs) if d.name in constants)
        self._sizes = sizes
        self._device = device
        self._variant = variant
        self.plans: dict[tuple[tuple[int, ...], ...], CallPlan] = {}
        self.hot: Callable[[tuple[Any, ...]], Any] | None = None  # the last plan's C call
        self._scratch = threading.local()
        # What a host call checks of each input on the fast path (``host_call``).
        self._wanted = tuple((dtypes.get(d.type.name).np, len(d.type.dims))  # type: ignore
                             for d in self._inputs)

    def __call__(self, inputs: tuple[Any, ...], outputs: Sequence[np.ndarray] | None) -> Any:
        """A call off the hot path: the host path if it serves, else every check."""
        if outputs is None:
            result = self.host_call(inputs)
            if result is not None:
                return result
        arrays = self._check_inputs(inputs)
        plan = self.plans.get(tuple(a.shape for a in arrays))
        if plan is None:
            plan = self._plan(arrays)
        if outputs is None:
            device = any(is_device_array(a) for a in arrays)  # GPUArrays in, GPUArrays out
            outs = [plan.kernel.empty(shape, dtype) if device else pool.empty(shape, dtype)
                    for shape, dtype in plan.outputs]
        else:
            outs = self._outputs(plan.program, plan.sizes, outputs)
        given = list(outs)
        if outputs is not None:
            outs = self._unaliased(plan.program, outs, arrays)
        scratch, addresses = self._locals(plan)
        if plan.held is not None:  # ``_alive``: the copies of constants, while the call runs
            addresses, _alive = plan.held.addresses([*arrays, *outs], addresses)
        if isinstance(plan.kernel, CpuKernel):  # the scratch's addresses, found once
            plan.kernel.run([*arrays, *outs], plan.dims, addresses)
        else:
            plan.kernel.run([*arrays, *outs, *scratch], plan.dims)
        for out, buf in zip(outs, given, strict=True):
            if out is not buf:
                buf[...] = out
        return given[0] if len(given) == 1 else tuple(given)

    def host_call(self, inputs: tuple[Any, ...]) -> Any:
        """The common call, with the fewest checks that keep it safe: C-contiguous, aligned
        numpy arrays of the declared dtypes and ranks, at shapes called before, on the CPU.
        None when anything differs: the full path checks and explains."""
        wanted = self._wanted
        if len(inputs) != len(wanted):
            return None
        shapes = []
        for x, (dtype, rank) in zip(inputs, wanted, strict=True):
            # ``is``: numpy's built-in dtypes are singletons; an equal one that is not
            # (another byte order spelled the same) only takes the checked path.
            if type(x) is not np.ndarray or x.dtype is not dtype or x.ndim != rank:
                return None
            flags = x.flags
            if not (flags.c_contiguous and flags.aligned):
                return None
            shapes.append(x.shape)
        plan = self.plans.get(tuple(shapes))
        if plan is None or plan.host is None:
            return None
        self.hot = plan.bound
        outs = [pool.empty(shape, dtype) for shape, dtype in plan.outputs]
        addresses = self._locals(plan)[1]
        if plan.held is not None:  # ``_alive``: the copies of constants, while the call runs
            addresses, _alive = plan.held.addresses([*inputs, *outs], addresses)
        plan.host(*inputs, *outs, *addresses)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _unaliased(self, program: Signature, outs: list[Any], inputs: list[Any]) -> list[Any]:
        """``outs`` with a private copy for each buffer that overlaps an input (the kernel
        reads inputs while it writes outputs) or is not aligned for its dtype; the copy is
        stored back after the call. Two
        outputs in overlapping memory cannot both hold their result: an error."""
        safe = []
        for k, buf in enumerate(outs):
            for j in range(k):
                if _overlap(buf, outs[j]):
                    raise ShapeError(f"def '{self.name}': outputs {program.outputs[j].name} "
                                     f"and {program.outputs[k].name} were given overlapping "
                                     f"buffers; each output needs memory of its own")
            # Vectorized code may assume elements at their natural alignment, as C does.
            clash = not _aligned(buf) or any(_overlap(buf, x) for x in inputs)
            safe.append(buf.copy() if clash else buf)  # a copy keeps what op= combines with
        return safe

    def _plan(self, arrays: list[np.ndarray]) -> CallPlan:
        """Everything a call at these input shapes needs besides the data, made once: the
        kernel, the output shapes and the dims[] argument."""
        sizes = {**self._sizes, **self._bind_sizes(arrays)}
        compiled, kernel = self._variant(sizes)
        signature = compiled.signature
        dims = [sizes[n] for n in signature.sizes]
        dims += [d for t in signature.tensors.values() for d in _shape(t, sizes)]
        outs = tuple((_shape(t, sizes), dtypes.DTYPES[t.dtype].np) for t in signature.outputs)
        slices, tails = kernel.source.slices, dict(kernel.source.tails)
        scratch = tuple((_scratch_shape(_shape(t, sizes), t.name in slices, tails.get(t.name)),
                         dtypes.DTYPES[t.dtype].np) for t in signature.locals)
        held = self._held(kernel, signature, scratch, dims)
        if held is not None:  # each thread's scratch holds a placeholder in their place
            scratch = tuple(((1,), dt) if k in held.shapes else (shape, dt)
                            for k, (shape, dt) in enumerate(scratch))
        dims_arg = kernel.dims_array(dims)
        host = kernel.caller(dims_arg) if isinstance(kernel, CpuKernel) else None
        bound = None
        if host is not None and not scratch:  # scratch is per thread: passed by _host_call
            bound = kernel.bind(dims, [(want, a.shape) for (want, _), a in
                                       zip(self._wanted, arrays, strict=True)], outs)
        plan = CallPlan(sizes, signature, kernel, outs, dims_arg, scratch, host, bound, held)
        bounded_put(self.plans, tuple(a.shape for a in arrays), plan, MAX_PLANS)
        return plan

    def _locals(self, plan: CallPlan) -> tuple[list[np.ndarray], tuple[int, ...]]:
        """Scratch tensors (locals, packed operands) and their addresses, kept per thread and
        shape: fresh pages on every call would cost more than a small kernel's work. A local
        the kernel keeps as slices of its own gets a one-element placeholder, and so does a
        copy of constants (the plan's ``Held`` has those, for every thread)."""
        if not plan.locals:
            return [], ()
        cache = self._scratch.__dict__.setdefault("buffers", {})
        key = (id(plan.program), plan.locals)
        if key not in cache:
            arrays = [scratch_zeros(shape, dtype) for shape, dtype in plan.locals]
            bounded_put(cache, key, (arrays, tuple(a.ctypes.data for a in arrays)), MAX_SCRATCH)
        return cache[key]  # type: ignore[no-any-return]

    def _held(self, kernel: Any, signature: Signature,
              scratch: tuple[tuple[tuple[int, ...], np.dtype], ...], dims: list[int]
              ) -> Held | None:
        """The copies of constants a CPU kernel keeps (``KernelSource.held``), allocated."""
        names = kernel.source.held if isinstance(kernel, CpuKernel) else ()
        if not names:
            return None
        shapes = {k: scratch[k] for k, t in enumerate(signature.locals) if t.name in names}
        dims_arg = kernel.dims_array(dims)
        return Held(shapes, self._constants,
                    lambda buffers, addresses: kernel.run(buffers, dims_arg, addresses,
                                                          once=True))

    def _check_inputs(self, inputs: tuple[Any, ...]) -> list[np.ndarray]:
        decls = self._inputs
        if len(inputs) != len(decls):
            names = ", ".join(d.name for d in decls)
            raise ShapeError(f"def '{self.name}' takes {len(decls)} input(s) ({names}), "
                             f"got {len(inputs)}")
        device = self._device
        return [_as_input(x, d, self.name, device) for x, d in zip(inputs, decls, strict=True)]

    def _bind_sizes(self, arrays: list[np.ndarray]) -> dict[str, int]:
        return bind_sizes(self.name, self._inputs, self._sizes,
                          [tuple(int(n) for n in a.shape) for a in arrays])

    def _outputs(self, program: Signature, sizes: dict[str, int],
                 given: Any) -> list[np.ndarray]:
        if given is None:
            return [np.empty(_shape(t, sizes), dtypes.DTYPES[t.dtype].np)
                    for t in program.outputs]
        if isinstance(given, np.ndarray) or len(given) != len(program.outputs):
            raise ShapeError(f"def '{self.name}': outputs= needs a sequence of "
                             f"{len(program.outputs)} array(s), one per output")
        for buf, t in zip(given, program.outputs, strict=True):
            _check_output(buf, t, _shape(t, sizes), self.name)
        return list(given)


def bind_sizes(def_name: str, decls: Sequence[syntax.TensorDecl], fixed: Mapping[str, int],
                shapes: Sequence[tuple[int, ...]]) -> dict[str, int]:
    """The size names' values given by the inputs' shapes, checked against each other and
    the compile-time ``fixed`` sizes (a call's arguments; symbolic extents too)."""
    sizes: dict[str, int] = {}
    where: dict[str, str] = {}
    for shape, d in zip(shapes, decls, strict=True):
        assert d.type is not None
        for k, dim in enumerate(d.type.dims):
            extent, here = shape[k], f"{d.name} dim {k}"
            if dim.name is None:
                if extent != dim.value:
                    raise ShapeError(f"def '{def_name}': input {d.name} dim {k} must have "
                                     f"extent {dim.value}, got {extent}")
                continue
            bound = fixed.get(dim.name, sizes.get(dim.name))
            if bound is not None and bound != extent:
                seen = where.get(dim.name, "the compile-time sizes")
                raise ShapeError(f"def '{def_name}': size {dim.name} is {bound} from {seen} "
                                 f"but {extent} from {here}")
            sizes[dim.name] = extent
            where.setdefault(dim.name, here)
    return sizes


@dataclass(frozen=True, eq=False)
class CallPlan:
    sizes: dict[str, int]
    program: Signature  # the lowered program's size names and tensors
    kernel: Any  # CpuKernel, EmulatedKernel or CudaKernel
    outputs: tuple[tuple[tuple[int, ...], np.dtype], ...]
    dims: Any  # the kernel's dims[] argument, built once
    locals: tuple[tuple[tuple[int, ...], np.dtype], ...]  # scratch shapes (slices: one element)
    host: Callable[..., None] | None = None  # a CPU kernel's call on buffers (the fast path)
    bound: Callable[[tuple[Any, ...]], Any] | None = None  # the same, checked in C (the hot path)
    held: Held | None = None  # the copies of constant inputs kept (``runtime.held``)


def _overlap(a: Any, b: Any) -> bool:
    """Whether two arrays (numpy, or GPU arrays by their address ranges) share memory."""
    if is_device_array(a) or is_device_array(b):
        if not (is_device_array(a) and is_device_array(b)):
            return False
        lo_a, lo_b = int(a.gpudata), int(b.gpudata)
        return lo_a < lo_b + b.nbytes and lo_b < lo_a + a.nbytes and min(a.nbytes, b.nbytes) > 0
    return bool(np.may_share_memory(a, b))  # exact for the contiguous arrays a call holds


def _aligned(a: Any) -> bool:
    return bool(getattr(a.flags, "aligned", True))  # GPU arrays are always aligned


def _shape(t: ir.Tensor, sizes: Mapping[str, int]) -> tuple[int, ...]:
    shape = tuple(ir.extent_value(e, sizes) for e in t.shape)
    if any(n < 0 for n in shape):
        raise ShapeError(f"tensor {t.name} would have negative extent {shape} at sizes "
                         f"{dict(sizes)}")
    return shape


def _scratch_shape(shape: tuple[int, ...], sliced: bool, tail: int | None) -> tuple[int, ...]:
    """A local's allocation: one element for a local the kernel keeps as slices; flat with
    ``tail`` more elements for one that partial register tiles read past."""
    if sliced:
        return (1,)
    return (math.prod(shape) + tail,) if tail else shape


def _as_input(x: Any, decl: syntax.TensorDecl, def_name: str, device: bool) -> Any:
    assert decl.type is not None
    want = dtypes.get(decl.type.name)
    if is_device_array(x):
        if not device:
            raise ShapeError(f"def '{def_name}': input {decl.name} is a GPU array; compile "
                             f"with target='cuda' to pass GPU arrays")
        _check_array(x, decl, def_name, want.np)
        if not x.flags.c_contiguous:
            raise ShapeError(f"def '{def_name}': GPU input {decl.name} must be C-contiguous")
        return x
    if not isinstance(x, np.ndarray | np.generic):
        if isinstance(x, int | float | bool) and not decl.type.dims:
            return _python_scalar(x, decl, def_name, want)
        scalar = ", or a Python int, float or bool" if not decl.type.dims else ""
        raise InputTypeError(f"def '{def_name}': input {decl.name} must be a numpy array "
                             f"(or, with target='cuda', a PyCUDA GPUArray){scalar}, not "
                             f"{type(x).__module__}.{type(x).__name__}")
    a = np.asarray(x)
    _check_array(a, decl, def_name, want.np)
    if a.flags.c_contiguous and a.flags.aligned:
        return a
    return np.require(a, requirements=["C", "A"])  # contiguous and aligned, copied if not


def _python_scalar(x: int | float | bool, decl: syntax.TensorDecl, def_name: str,
                   want: dtypes.DType) -> np.ndarray:
    """A rank-0 input given as a Python number, checked to fit the declared integer type."""
    if want.kind in "iu" and isinstance(x, int) and not isinstance(x, bool):
        info = np.iinfo(want.np)
        if not info.min <= x <= info.max:
            raise ShapeError(f"def '{def_name}': input {decl.name} is {want.name}, which holds "
                             f"{info.min}..{info.max}; got {x}")
    elif want.kind in "iu" and isinstance(x, float):
        raise ShapeError(f"def '{def_name}': input {decl.name} is {want.name}; got the float "
                         f"{x!r} (pass an int, or a numpy array of that dtype)")
    return np.asarray(x, dtype=want.np)


def _check_array(a: Any, decl: syntax.TensorDecl, def_name: str, want: np.dtype) -> None:
    assert decl.type is not None
    if a.dtype != want:
        raise ShapeError(f"def '{def_name}': input {decl.name} must have dtype "
                         f"{np.dtype(want).name}, got {a.dtype}")
    if len(a.shape) != len(decl.type.dims):
        raise ShapeError(f"def '{def_name}': input {decl.name} must have rank "
                         f"{len(decl.type.dims)}, got shape {a.shape}")


def _check_output(buf: Any, t: ir.Tensor, shape: tuple[int, ...], def_name: str) -> None:
    want = dtypes.DTYPES[t.dtype].np
    if not isinstance(buf, np.ndarray) and not is_device_array(buf):
        raise InputTypeError(f"def '{def_name}': output {t.name} must be a numpy array (or, "
                             f"with target='cuda', a PyCUDA GPUArray), not "
                             f"{type(buf).__module__}.{type(buf).__name__}")
    if buf.shape != shape or buf.dtype != want:
        raise ShapeError(f"def '{def_name}': output {t.name} must be {want} of shape {shape}, "
                         f"got {buf.dtype} of shape {buf.shape}")
    if not (buf.flags.c_contiguous and getattr(buf.flags, "writeable", True)):
        raise ShapeError(f"def '{def_name}': output {t.name} must be C-contiguous and writeable")
