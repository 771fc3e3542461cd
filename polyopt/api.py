"""The public entry point: ``compile`` a TC definition into a callable ``Kernel``."""

from __future__ import annotations

import math
import threading
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from polyopt import config, dtypes, ir, lang
from polyopt.codegen.contract import KernelSource
from polyopt.driver import (
    Lowered,
    check_accesses,
    check_options,
    check_schedule,
    lower,
    lower_or_load,
    schedule_of,
)
from polyopt.errors import (
    InputTypeError,
    OptionError,
    PolyoptWarning,
    ShapeError,
    SizesRequiredError,
)
from polyopt.lang import syntax
from polyopt.runtime.arrays import aligned_zeros
from polyopt.runtime.cpu import CpuKernel, flags_for
from polyopt.runtime.cuda import CudaKernel, is_device_array
from polyopt.runtime.emulated import EmulatedKernel
from polyopt.runtime.guard import guarded_zeros
from polyopt.runtime.warm import Compiled, Signature
from polyopt.schedules import Schedule
from polyopt.tuning.db import state as database_state
from polyopt.tuning.replay import tuned_schedule
from polyopt.views.stats import Stats, schedule_stats


def compile(source: str, name: str | None = None, *, target: str = "c",
            sizes: Mapping[str, int] | None = None, parametric: bool = False,
            schedule: Schedule | str | None = None,
            options: Mapping[str, Any] | None = None) -> Kernel:
    """Compile def ``name`` of ``source`` (TC language) for ``target``.

    ``sizes`` fixes size names and ``<...>`` parameters at compile time. By default every
    distinct tuple of input shapes gets its own specialized kernel, built at its first call;
    with ``parametric=True`` one size-generic kernel serves every shape.
    """
    if not isinstance(source, str):
        raise OptionError(f"source must be a string of TC definitions, not {type(source).__name__}")
    opts = check_options(options, target)
    check_schedule(schedule)
    return Kernel(source, name, dict(sizes or {}), parametric, schedule, opts)


def schedule(source: str, name: str | None = None, *, auto: bool | str = True,
             sizes: Mapping[str, int] | None = None,
             options: Mapping[str, Any] | None = None, target: str = "c") -> Schedule:
    """The schedule of def ``name``, to transform and pass to ``compile(schedule=...)``.

    ``auto=True`` is what ``compile`` would use for ``target``; ``"isl"`` is isl's scheduler
    before the CPU or GPU pipeline; ``False`` is program order. Without ``sizes`` it is
    size-generic.
    """
    if not isinstance(source, str):
        raise OptionError(f"source must be a string of TC definitions, not {type(source).__name__}")
    return schedule_of(source, name, sizes, check_options(options, target), auto)



# What a Kernel keeps per shape, so that a long-lived one called at ever-new shapes stays
# within bounds (issue 40); past a bound the oldest entry goes (a later call remakes it).
MAX_PLANS = 64  # call plans, by input shapes (each holds its variant's kernel)
MAX_VARIANTS = 16  # specialized variants, by sizes: each a compiled library, loaded
MAX_SCRATCH = 4  # scratch buffer sets per thread, by shape


class Kernel:
    """A compiled definition. Call it with numpy arrays in signature order."""

    def __init__(self, source: str, name: str | None, sizes: dict[str, int], parametric: bool,
                 schedule: Schedule | str | None, options: dict[str, Any]) -> None:
        self._definition = lang.define(source, name)  # parsed here, once
        self._sizes = sizes
        self._parametric = parametric
        self._schedule_arg = schedule
        self._options = options
        self._decl = self._definition.syntax
        self.name = self._definition.name
        self._variants: dict[tuple[tuple[str, int], ...], tuple[Compiled, Any]] = {}
        self._lock = threading.Lock()
        self._plans: dict[tuple[tuple[int, ...], ...], _CallPlan] = {}
        self._hot: Callable[[tuple[Any, ...]], Any] | None = None  # the last plan's C call
        self._scratch = threading.local()
        # What a host call checks of each input on the fast path (``_host_call``).
        self._wanted = tuple((dtypes.get(d.type.name).np, len(d.type.dims))  # type: ignore
                             for d in self._decl.inputs)
        # Check now what can be checked now, so errors show at compile time; lower now only
        # what a call will use (a size-generic lowering is costly and per-shape calls
        # lower their own specialized variants). What an earlier process lowered (or
        # checked) with the same key is not lowered again: _static stays None until asked.
        self._static: Lowered | None = None
        self._ready: Compiled | None = None  # what calls at the compile-time sizes run
        self._declared: ir.Program | None = None  # built on first ask (Kernel.program)
        try:
            program = lang.build_program(self._definition, sizes=sizes)
        except SizesRequiredError:
            if parametric:  # a size-generic kernel is impossible for this def
                raise
            return
        self._declared = program
        if parametric or not program.sizes or isinstance(schedule, Schedule):
            self._ready, self._static = lower_or_load(  # a user's Schedule is checked here
                program, options, lambda: schedule if schedule is not None or parametric
                else self._tuned(sizes), self._asked())
        else:
            check_accesses(program)

    # -- introspection -------------------------------------------------------------------
    @property
    def program(self) -> ir.Program:
        """The def's program at the compile-time sizes, as written: the tensors its callers
        pass and receive. What the kernel computes after its layout (packed copies, merged
        loops: ``Schedule.merge``) is ``lowered().program``."""
        if self._declared is None:
            self._declared = lang.build_program(self._definition, sizes=self._sizes)
        return self._declared

    @property
    def source(self) -> str:
        """Generated code: specialized when all sizes were given, size-generic otherwise."""
        ready = self._ready  # the lowering's own source, recorded or just made
        return ready.source.text if ready is not None else self._lowered().source.text

    @property
    def schedule(self) -> Schedule:
        return self._lowered().schedule

    @property
    def launch(self) -> list[dict[str, Any]]:
        """CUDA targets: each kernel's name, grid and block (x first), as C expressions of
        the sizes; empty for C."""
        return [ln.describe() for ln in self._lowered().source.launches]

    def stats(self, *, seconds: float | None = None, freq_ghz: float | None = None,
              bandwidth_gbs: float | None = None) -> Stats:
        """Flops, traffic, intensity, footprints, marked loops of the compile-time lowering
        and, for C when every size is known, the roofline (``polyopt.views.stats``).
        ``seconds``: a measured run; ``freq_ghz``, ``bandwidth_gbs``: the ceilings' own."""
        if seconds is not None and not (isinstance(seconds, int | float) and seconds > 0):
            raise OptionError(f"stats: seconds must be a positive number, not {seconds!r}")
        if self._options["target"] == "c":
            return schedule_stats(self._lowered().schedule, self._options["machine"],
                                  seconds=seconds, freq_ghz=freq_ghz,
                                  bandwidth_gbs=bandwidth_gbs)
        got = schedule_stats(self._lowered().schedule, None, seconds=seconds)
        return replace(got, notes=(*got.notes, "no roofline: the machine model is a CPU's"))

    def lowered(self) -> Lowered:
        """Every stage's artifact for the compile-time sizes."""
        return self._lowered()

    def _lowered(self) -> Lowered:
        with self._lock:
            if self._static is None:  # raises the reason when it cannot be built
                with warnings.catch_warnings():  # shown at compile time already
                    warnings.simplefilter("ignore", PolyoptWarning)
                    self._static = lower(self._definition, self._sizes,
                                         self._options, self._schedule_arg or
                                         self._tuned(self._sizes))
            return self._static

    # -- calling -------------------------------------------------------------------------
    def __call__(self, *inputs: Any, outputs: Sequence[np.ndarray] | None = None) -> Any:
        if outputs is None:
            hot = self._hot  # checks, allocates and calls in C; None for other inputs
            if hot is not None:
                result = hot(inputs)
                if result is not None:
                    return result
            result = self._host_call(inputs)
            if result is not None:
                return result
        arrays = self._check_inputs(inputs)
        plan = self._plans.get(tuple(a.shape for a in arrays))
        if plan is None:
            plan = self._plan(arrays)
        if outputs is None:
            device = any(is_device_array(a) for a in arrays)  # GPUArrays in, GPUArrays out
            outs = [plan.kernel.empty(shape, dtype) if device else np.empty(shape, dtype)
                    for shape, dtype in plan.outputs]
        else:
            outs = self._outputs(plan.program, plan.sizes, outputs)
        given = list(outs)
        if outputs is not None:
            outs = self._unaliased(plan.program, outs, arrays)
        scratch, addresses = self._locals(plan)
        if isinstance(plan.kernel, CpuKernel):  # the scratch's addresses, found once
            plan.kernel.run([*arrays, *outs], plan.dims, addresses)
        else:
            plan.kernel.run([*arrays, *outs, *scratch], plan.dims)
        for out, buf in zip(outs, given, strict=True):
            if out is not buf:
                buf[...] = out
        return given[0] if len(given) == 1 else tuple(given)

    def _host_call(self, inputs: tuple[Any, ...]) -> Any:
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
        plan = self._plans.get(tuple(shapes))
        if plan is None or plan.host is None:
            return None
        self._hot = plan.bound
        outs = [np.empty(shape, dtype) for shape, dtype in plan.outputs]
        plan.host(*inputs, *outs, *self._locals(plan)[1])
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

    def _plan(self, arrays: list[np.ndarray]) -> _CallPlan:
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
        dims_arg = kernel.dims_array(dims)
        host = kernel.caller(dims_arg) if isinstance(kernel, CpuKernel) else None
        bound = None
        if host is not None and not scratch:  # scratch is per thread: passed by _host_call
            bound = kernel.bind(dims, [(want, a.shape) for (want, _), a in
                                       zip(self._wanted, arrays, strict=True)], outs)
        plan = _CallPlan(sizes, signature, kernel, outs, dims_arg, scratch, host, bound)
        _bounded_put(self._plans, tuple(a.shape for a in arrays), plan, MAX_PLANS)
        return plan

    def _locals(self, plan: _CallPlan) -> tuple[list[np.ndarray], tuple[int, ...]]:
        """Scratch tensors (locals, packed operands) and their addresses, kept per thread and
        shape: fresh pages on every call would cost more than a small kernel's work. A local
        the kernel keeps as slices of its own gets a one-element placeholder."""
        if not plan.locals:
            return [], ()
        cache = self._scratch.__dict__.setdefault("buffers", {})
        key = (id(plan.program), plan.locals)
        if key not in cache:
            # Zeroed once: packed copies never write their blocks' padding, which register
            # tiles on partial blocks read (and discard).
            zeros = guarded_zeros if config.guard_scratch() else aligned_zeros
            arrays = [zeros(shape, dtype) for shape, dtype in plan.locals]
            _bounded_put(cache, key, (arrays, tuple(a.ctypes.data for a in arrays)), MAX_SCRATCH)
        return cache[key]  # type: ignore[no-any-return]

    def _variant(self, sizes: dict[str, int]) -> tuple[Compiled, Any]:
        key = () if self._parametric else tuple(sorted(sizes.items()))  # one kernel per shape
        hit = self._variants.get(key)
        if hit is not None:
            return hit
        with self._lock:
            if key not in self._variants:
                if self._reuses_static(sizes):
                    assert self._ready is not None
                    compiled = self._ready
                else:
                    with warnings.catch_warnings():  # a def's warnings show at compile
                        warnings.simplefilter("ignore", PolyoptWarning)
                        program = lang.build_program(self._definition, sizes=sizes)
                        compiled, _ = lower_or_load(
                            program, self._options,
                            lambda: self._schedule_arg or self._tuned(sizes), self._asked())
                # An evicted variant's library closes once no plan holds its kernel.
                _bounded_put(self._variants, key, (compiled, _load(compiled.source,
                                                                   self._options)),
                             MAX_VARIANTS)
            return self._variants[key]

    def _tuned(self, sizes: Mapping[str, int]) -> Schedule | None:
        """The tuning database's best schedule for these sizes, when there is one and the
        caller chose neither a schedule nor the size-generic kernel (``tuned`` option)."""
        if not self._may_tune():
            return None
        # Never raises: a record that cannot be used is a TuningWarning and the default.
        return tuned_schedule(self._definition, sizes, self._options["target"], self._database())

    def _may_tune(self) -> bool:
        return self._options.get("tuned", True) is not False and not self._parametric

    def _database(self) -> Path | None:
        """The tuning database the ``tuned`` option names: a path, or None for the user's."""
        tuned = self._options.get("tuned", True)
        return tuned if isinstance(tuned, Path) else None

    def _asked(self) -> str | None:
        """What a variant's schedule depends on besides its program and the options, for the
        warm-start key: the schedule asked for and, when the tuning database may choose, its
        state (a few system calls, where a lookup costs ms); None when that cannot be named
        (a Schedule object)."""
        if isinstance(self._schedule_arg, Schedule):
            return None
        if self._schedule_arg is not None or not self._may_tune():
            return f"schedule={self._schedule_arg}"
        return f"tuning={database_state(self._database())}"

    def _reuses_static(self, sizes: dict[str, int]) -> bool:
        """Does the compile-time lowering already serve a call at ``sizes``?"""
        if self._ready is None:
            return False
        return self._parametric or (not self._ready.signature.sizes and sizes == self._sizes)

    def _check_inputs(self, inputs: tuple[Any, ...]) -> list[np.ndarray]:
        decls = self._decl.inputs
        if len(inputs) != len(decls):
            names = ", ".join(d.name for d in decls)
            raise ShapeError(f"def '{self.name}' takes {len(decls)} input(s) ({names}), "
                             f"got {len(inputs)}")
        device = self._options["target"] == "cuda"
        return [_as_input(x, d, self.name, device) for x, d in zip(inputs, decls, strict=True)]

    def _bind_sizes(self, arrays: list[np.ndarray]) -> dict[str, int]:
        return bind_sizes(self.name, self._decl.inputs, self._sizes,
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

    def __repr__(self) -> str:
        return f"<polyopt.Kernel {self.name} sizes={self._sizes} parametric={self._parametric}>"


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


def _bounded_put(cache: dict[Any, Any], key: Any, value: Any, most: int) -> None:
    """``cache[key] = value``, the oldest entries dropped to keep at most ``most``."""
    cache.pop(key, None)
    for old in list(cache)[:max(0, len(cache) - most + 1)]:  # a copy: threads may share it
        cache.pop(old, None)
    cache[key] = value


def _load(source: KernelSource, options: Mapping[str, Any]) -> Any:
    """The runtime kernel for ``source``'s target (CpuKernel, EmulatedKernel...)."""
    if source.target == "cuda" and options["target"] == "cuda-emulated":
        return EmulatedKernel(source)
    if source.target == "cuda":
        return CudaKernel(source)  # imports PyCUDA
    return CpuKernel(source, flags_for(options["openmp"], options["cflags"]))


@dataclass(frozen=True, eq=False)
class _CallPlan:
    sizes: dict[str, int]
    program: Signature  # the lowered program's size names and tensors
    kernel: Any  # CpuKernel, EmulatedKernel or CudaKernel
    outputs: tuple[tuple[tuple[int, ...], np.dtype], ...]
    dims: Any  # the kernel's dims[] argument, built once
    locals: tuple[tuple[tuple[int, ...], np.dtype], ...]  # scratch shapes (slices: one element)
    host: Callable[..., None] | None = None  # a CPU kernel's call on buffers (the fast path)
    bound: Callable[[tuple[Any, ...]], Any] | None = None  # the same, checked in C (the hot path)


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
