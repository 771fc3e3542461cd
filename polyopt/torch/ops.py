"""PyTorch front end: a TC definition as a PyTorch custom operator (``pip install polyopt[torch]``).

``op(source, name=None, **compile_options)`` compiles def ``name`` with ``polyopt.compile``
and registers it with ``torch.library`` as ``polyopt::<name>_<digest>`` (one operator per
definition and options), so that it runs eagerly and inside ``torch.compile`` without graph
breaks:

- the implementation hands CPU tensors to the compiled kernel without copying (a
  non-contiguous tensor is made contiguous first, which copies it) and returns the kernel's
  output buffers as tensors, again without copying; sizes are bound at each call, and each
  new set of shapes compiles (once) a kernel of its own;
- the fake implementation, which ``torch.compile`` traces, infers the outputs' shapes and
  dtypes by polyopt's own range inference at the inputs' shapes (symbolic ones included):
  nothing is compiled or run;
- the backward is the definition's gradient, derived as TC source by ``polyopt.grad`` for the
  inputs that need one and compiled as an operator of its own (see ``Op.backward_op``).

An eager call on plain CPU tensors that need no gradient skips the operator's dispatch
(``_plain_call``). CUDA tensors run with ``target="cuda"`` (PyCUDA): the kernels read and
write the tensors' device memory in place. ``einsum`` is ``polyopt.einsum`` as the operator
``polyopt::einsum``; ``polyopt.einsum`` given tensors comes here once this module is imported.

Only this module imports torch; ``import polyopt`` does not import it.
"""

from __future__ import annotations

import hashlib
import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import islpy as isl
import ml_dtypes
import numpy as np
import torch

from polyopt import api, autodiff, dtypes, ir, lang
from polyopt.errors import (
    InputTypeError,
    NotDifferentiableError,
    OptionError,
    PolyoptError,
    ShapeError,
    SizesRequiredError,
)
from polyopt.lang import syntax
from polyopt.runtime.calls import bind_sizes
from polyopt.subscripts.call import einsum as numpy_einsum
from polyopt.subscripts.call import use_array_type

__all__ = ["Op", "einsum", "op"]

NAMESPACE = "polyopt"

# TC scalar type -> torch dtype. torch's unsigned types past uint8 have few operators but
# hold data, which is all a kernel's arguments need.
TORCH_DTYPES: dict[str, torch.dtype] = {
    "bool": torch.bool, "uint8": torch.uint8, "uint16": torch.uint16,
    "uint32": torch.uint32, "uint64": torch.uint64, "int8": torch.int8,
    "int16": torch.int16, "int32": torch.int32, "int64": torch.int64,
    "float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32,
    "float64": torch.float64,
}
_TC_OF_TORCH = {v: k for k, v in TORCH_DTYPES.items()}

_ops: dict[str, Op] = {}  # by qualified name: torch.library registers a name only once
_ops_lock = threading.Lock()


def op(source: str, name: str | None = None, *, differentiable: bool | None = True,
       **compile_options: Any) -> Op:
    """The PyTorch operator computing def ``name`` of ``source`` (TC language).

    ``compile_options`` are ``polyopt.compile``'s (``target``, ``sizes``, ``parametric``,
    ``schedule``, ``options``). The same definition with the same options gives the same
    ``Op`` (torch registers an operator name once per process).

    ``differentiable``: True (the default) derives the gradient now, so a definition that
    cannot be differentiated (a gather into a floating-point input, a product reduction)
    raises ``NotDifferentiableError`` here; False makes a forward-only operator, whose
    backward raises; None derives at the first backward (polyopt's own gradient operators,
    whose gradients are second derivatives).
    """
    if not isinstance(source, str):
        raise OptionError(f"source must be a string of TC definitions, not {type(source).__name__}")
    definition = lang.define(source, name)
    if differentiable is True:
        _check_differentiable(definition)
    key = {**compile_options, "differentiable": differentiable}
    qualname = f"{NAMESPACE}::{definition.name}_{_digest(definition, key)}"
    with _ops_lock:
        if qualname not in _ops:
            _ops[qualname] = Op(definition, qualname, compile_options, differentiable)
        return _ops[qualname]


def _check_differentiable(definition: lang.Definition) -> None:
    """Raise ``NotDifferentiableError`` now for a definition ``polyopt.grad`` cannot
    differentiate (a few ms to 0.1 s: the derivation, not its compilation)."""
    try:
        autodiff.grad(definition.source, definition.name)
    except SizesRequiredError:
        return  # affine only at known sizes: the first backward says whether it can be
    except NotDifferentiableError as e:
        raise NotDifferentiableError(f"{e}\n(op(..., differentiable=False) makes a "
                                     "forward-only operator)") from e


def _digest(definition: lang.Definition, options: Mapping[str, Any]) -> str:
    """A short digest of what the operator computes: the source, the def and the options
    (a Schedule object by identity: its text is not a stable key)."""
    shown = sorted((k, repr(v) if k != "schedule" or isinstance(v, str | None)
                    else f"schedule@{id(v)}") for k, v in options.items())
    text = f"{definition.source}\0{definition.name}\0{shown}"
    return hashlib.sha256(text.encode()).hexdigest()[:12]


@dataclass(frozen=True)
class _Output:
    """What the fake implementation promises of one output."""

    name: str
    shape: tuple[int, ...]
    dtype: torch.dtype


class Op:
    """A TC definition registered as a PyTorch custom operator; call it with tensors in the
    definition's input order (Python numbers for rank-0 inputs). Returns a tensor, or a tuple
    of tensors for a def with several outputs."""

    def __init__(self, definition: lang.Definition, qualname: str,
                 compile_options: Mapping[str, Any], differentiable: bool | None = True) -> None:
        self.definition = definition
        self.differentiable = differentiable
        self.name = definition.name
        self.qualname = qualname
        self.compile_options = dict(compile_options)
        self.kernel = api.compile(definition.source, definition.name, **compile_options)
        self._inputs = definition.syntax.inputs
        self._wanted = tuple((TORCH_DTYPES[dtypes.get(d.type.name).name], len(d.type.dims))
                             for d in self._inputs if d.type is not None)
        self._outputs = definition.syntax.outputs
        self._sizes = dict(compile_options.get("sizes") or {})
        self._target = str(compile_options.get("target", "c"))
        self._backward: dict[tuple[str, ...], Op] = {}
        self._lock = threading.Lock()
        self.custom_op = torch.library.custom_op(qualname, self._forward, mutates_args=(),
                                                 schema=self._schema())
        self.custom_op.register_fake(self._fake)
        self.custom_op.register_autograd(self._backward_of, setup_context=_save_inputs)

    def __call__(self, *inputs: Any) -> Any:
        if len(inputs) != len(self._inputs):
            names = ", ".join(d.name for d in self._inputs)
            raise ShapeError(f"def '{self.name}' takes {len(self._inputs)} input(s) ({names}), "
                             f"got {len(inputs)}")
        args = [x if isinstance(x, torch.Tensor) else self._scalar(x, d)
                for x, d in zip(inputs, self._inputs, strict=True)]
        if _plain_call(args):
            return self._forward(*args)
        return self.custom_op(*args)

    def __repr__(self) -> str:
        return f"<polyopt.torch.Op {self.qualname} target={self._target!r}>"

    # -- registration ----------------------------------------------------------------------
    def _schema(self) -> str:
        params = ", ".join(f"Tensor {d.name}" for d in self._inputs)
        outs = ", ".join("Tensor" for _ in self._outputs)
        return f"({params}) -> " + (outs if len(self._outputs) == 1 else f"({outs})")

    def _scalar(self, x: Any, decl: syntax.TensorDecl) -> torch.Tensor:
        """A Python number given for a rank-0 input, as a tensor of the declared type."""
        assert decl.type is not None
        if decl.type.dims or not isinstance(x, int | float | bool):
            raise InputTypeError(f"def '{self.name}': input {decl.name} must be a torch.Tensor"
                                 f"{' (or a Python number)' if not decl.type.dims else ''}, "
                                 f"not {type(x).__module__}.{type(x).__name__}")
        return torch.tensor(x, dtype=TORCH_DTYPES[dtypes.get(decl.type.name).name])

    # -- forward ---------------------------------------------------------------------------
    def _forward(self, *inputs: torch.Tensor) -> Any:
        """The real implementation: the compiled kernel on the tensors' memory."""
        self._check(inputs)
        if all(t.is_cpu for t in inputs):
            result = self.kernel(*(as_array(t) for t in inputs))
            outs = [as_tensor(a) for a in (result if isinstance(result, tuple) else (result,))]
        elif any(t.is_cuda for t in inputs):
            outs = self._on_cuda(inputs)
        else:
            devices = ", ".join(sorted({t.device.type for t in inputs}))
            raise InputTypeError(f"def '{self.name}' runs on CPU tensors (and CUDA tensors "
                                 f"with target='cuda'), not on {devices}")
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _on_cuda(self, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """Run a ``target="cuda"`` kernel in place on CUDA tensors (device 0's context)."""
        device = inputs[0].device
        if self._target != "cuda" or any(t.device != device for t in inputs) \
                or device.index not in (0, None):
            where = ", ".join(str(t.device) for t in inputs)
            raise InputTypeError(f"def '{self.name}': CUDA tensors need target='cuda' (this op "
                                 f"has target={self._target!r}), all on device cuda:0; got "
                                 f"tensors on {where}")
        outs = [torch.empty(o.shape, dtype=o.dtype, device=device)
                for o in self.output_specs([tuple(t.shape) for t in inputs])]
        # PyCUDA launches on the legacy default stream: wait for torch's work on its stream.
        torch.cuda.current_stream(device).synchronize()
        buffers = [_DeviceBuffer(t.detach().contiguous()) for t in inputs]
        self.kernel(*buffers, outputs=[_DeviceBuffer(t) for t in outs])  # type: ignore[misc]
        return outs

    def _check(self, inputs: Sequence[torch.Tensor]) -> None:
        """Each input's layout, dtype and rank against its declaration, with torch's names
        in the message."""
        for t, d in zip(inputs, self._inputs, strict=True):
            _check_dense(t, f"def '{self.name}': input {d.name}")
        for t, (want, rank), d in zip(inputs, self._wanted, self._inputs, strict=True):
            if t.dtype == want and t.dim() == rank:
                continue
            assert d.type is not None
            if t.dtype != want:
                raise ShapeError(f"def '{self.name}': input {d.name} must have dtype {want}, "
                                 f"got {t.dtype}")
            if t.dim() != len(d.type.dims):
                raise ShapeError(f"def '{self.name}': input {d.name} must have rank "
                                 f"{len(d.type.dims)}, got shape {tuple(t.shape)}")

    # -- shapes (the fake implementation) ------------------------------------------------------
    def _fake(self, *inputs: torch.Tensor) -> Any:
        """Empty outputs of the right shapes and dtypes, for tracing: computed by range
        inference at the inputs' shapes, symbolic ones included (see ``symbolic_specs``)."""
        self._check(inputs)
        shapes = [tuple(t.shape) for t in inputs]
        if all(type(n) is int for shape in shapes for n in shape):
            specs = self.output_specs(shapes)
        else:
            specs = self.symbolic_specs(shapes)
        device = inputs[0].device if inputs else None
        outs = [torch.empty(o.shape, dtype=o.dtype, device=device) for o in specs]
        return outs[0] if len(outs) == 1 else tuple(outs)

    def symbolic_specs(self, shapes: Sequence[tuple[Any, ...]]) -> list[_Output]:
        """``output_specs`` at symbolic shapes (torch's SymInts, under ``dynamic=True``): the
        size-generic program's output extents, affine in the sizes, evaluated on them. Where
        an extent is not one affine piece, or the def needs its sizes to be affine, the
        sizes are specialized to their values (torch then traces each shape on its own)."""
        bound = bind_sizes(self.name, self._inputs, self._sizes, shapes)
        sizes = {**self._sizes, **bound}
        try:
            program = lang.build_program(self.definition, sizes=self._sizes)
        except SizesRequiredError:
            program = None
        if program is not None and set(program.sizes) <= set(sizes):
            specs = []
            for t in program.outputs:
                shape = [_affine_value(e, program.sizes, sizes) for e in t.shape]
                specs.append(_Output(t.name, tuple(shape), TORCH_DTYPES[t.dtype]))
            if all(n is not None for o in specs for n in o.shape):
                return specs
        return self.output_specs([tuple(int(n) for n in shape) for shape in shapes])

    def output_specs(self, shapes: Sequence[tuple[int, ...]]) -> list[_Output]:
        """Each output's name, shape and dtype when the inputs have ``shapes``."""
        sizes = {**self._sizes, **bind_sizes(self.name, self._inputs, self._sizes, shapes)}
        program = lang.build_program(self.definition, sizes=sizes)
        return [_Output(t.name, tuple(ir.extent_value(e, sizes) for e in t.shape),
                        TORCH_DTYPES[t.dtype]) for t in program.outputs]

    # -- backward --------------------------------------------------------------------------
    def _backward_of(self, ctx: Any, *grads: torch.Tensor | None) -> tuple[Any, ...]:
        """The gradients of the inputs that need one, by the derived gradient's operator."""
        inputs = ctx.saved_tensors
        wrt = tuple(d.name for d, need in zip(self._inputs, ctx.needs_input_grad, strict=True)
                    if need)
        if not wrt:
            return tuple(None for _ in inputs)
        full = [g if g is not None else torch.zeros(shape, dtype=dt, device=inputs[0].device)
                for g, (shape, dt) in zip(grads, ctx.polyopt_outputs, strict=True)]
        # One gradient definition per input: the scheduler tiles each contraction of a
        # definition with one of them well, but not both of a convolution's gradients in
        # one (3x3, 64 channels at 28x28, batch 8: 19 + 56 ms apart, 700-900 ms together).
        by_name = {x: self.backward_op((x,))(*inputs, *full) for x in wrt}
        return tuple(by_name.get(d.name) for d in self._inputs)

    def backward_op(self, wrt: Sequence[str] | None = None) -> Op:
        """The operator of the gradient of the inputs ``wrt`` (default: every floating-point
        input): ``polyopt.grad``'s definition, compiled with this op's options (a ``Schedule``
        object aside: it is the forward's). It takes the forward's inputs, then one gradient per
        output, and returns the gradients of ``wrt`` in that order. Derived at the first
        backward that needs it; a definition that cannot be differentiated raises here, so
        the forward op works all the same."""
        key = tuple(wrt) if wrt is not None else ()
        with self._lock:
            if key not in self._backward:
                text = self._derive(list(wrt) if wrt is not None else None)
                options = {k: v for k, v in self.compile_options.items()
                           if k != "schedule" or isinstance(v, str)}
                self._backward[key] = op(text, f"{self.name}_grad", differentiable=None,
                                         **options)
            return self._backward[key]

    def _derive(self, wrt: list[str] | None) -> str:
        if self.differentiable is False:
            raise NotDifferentiableError(f"def '{self.name}': made with differentiable=False, "
                                         "it has no gradient")
        text = autodiff.grad(self.definition.source, self.name, wrt)
        if not isinstance(text, str):
            raise PolyoptError(f"polyopt.grad returned {type(text).__name__}, not TC source")
        return text


def _plain_call(args: Sequence[torch.Tensor]) -> bool:
    """Whether a call can skip the custom operator's dispatch, which costs about 60 us in
    torch's Python machinery (an op that does nothing takes as long): eager, no mode or
    transform active, plain CPU tensors none of which needs a gradient. Its result is the
    same: the operator would run the same implementation and record nothing."""
    if torch.compiler.is_compiling():  # first: dynamo reads no further, and traces the op
        return False
    if torch._C._len_torch_dispatch_stack() or torch._C._is_torch_function_mode_enabled() \
            or torch._C._are_functorch_transforms_active():
        return False
    grad = torch.is_grad_enabled()
    return all(type(t) is torch.Tensor and t.is_cpu and not (grad and t.requires_grad)
               for t in args)


def _save_inputs(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
    """What a backward needs: the forward's inputs, and the outputs' shapes and dtypes (an
    unused output's gradient may come as None)."""
    ctx.save_for_backward(*inputs)
    outs = output if isinstance(output, tuple) else (output,)
    ctx.polyopt_outputs = [(tuple(o.shape), o.dtype) for o in outs]


def _affine_value(extent: str, names: Sequence[str], sizes: Mapping[str, Any]) -> Any:
    """``extent`` (isl affine text over ``names``) at ``sizes``, which may be SymInts: its
    one affine piece evaluated term by term, floor divisions included; None for several
    pieces."""
    pa = isl.PwAff(f"[{', '.join(names)}] -> {{ [({extent})] }}")
    pieces = pa.get_pieces()
    return _floor_of(pieces[0][1], sizes) if len(pieces) == 1 else None


def _floor_of(aff: isl.Aff, sizes: Mapping[str, Any]) -> Any:
    """floor(``aff``) at ``sizes``. isl's coefficients may be fractions: scaled to integers
    by their common denominator, the sum is floor-divided by it (exact for an integer aff)."""
    param, div = isl.dim_type.param, isl.dim_type.div
    terms: list[tuple[Fraction, Any]] = [(_fraction(aff.get_constant_val()), 1)]
    for i in range(aff.dim(param)):
        c = _fraction(aff.get_coefficient_val(param, i))
        if c:
            terms.append((c, sizes[str(aff.get_dim_name(param, i))]))
    for i in range(aff.dim(div)):  # a div's own expression shares the local space: skip 0s
        c = _fraction(aff.get_coefficient_val(div, i))
        if c:
            terms.append((c, _floor_of(aff.get_div(i), sizes)))
    den = math.lcm(*(c.denominator for c, _ in terms))
    total = sum(int(c * den) * v for c, v in terms)
    return total // den if den != 1 else total


def _fraction(v: isl.Val) -> Fraction:
    return Fraction(str(v))


# -- zero-copy conversions -------------------------------------------------------------------
def _check_dense(t: torch.Tensor, what: str) -> None:
    """InputTypeError for a tensor whose elements are not in one strided buffer (sparse,
    MKL-DNN, nested, quantized): the kernels read dense row-major memory."""
    kind = ("sparse" if t.is_sparse or t.layout != torch.strided else "nested" if t.is_nested
            else "quantized" if t.is_quantized else None)
    if kind is not None:
        fix = ".to_dense()" if kind == "sparse" else (".dequantize()" if kind == "quantized"
                                                      else ".to_padded_tensor(0.0)")
        raise InputTypeError(f"{what} is a {kind} tensor (layout {t.layout}, dtype {t.dtype});"
                             f" polyopt reads plain dense tensors: pass it as {fix}")


def as_array(t: torch.Tensor) -> np.ndarray:
    """A numpy array on a CPU tensor's memory (a contiguous copy of a strided tensor: the
    kernels read dense row-major buffers). numpy has no bfloat16: ml_dtypes' shares the bits.
    A lazily negated or conjugated view (``x.conj()``) is made real first."""
    if t.requires_grad:
        t = t.detach()
    if not t.is_contiguous() or t.is_neg() or t.is_conj():
        t = t.resolve_conj().resolve_neg().contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def as_tensor(a: np.ndarray) -> torch.Tensor:
    """A tensor on a numpy array's memory."""
    if a.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


class _DeviceBuffer:
    """A contiguous CUDA tensor as the runtime's device arrays look (PyCUDA's GPUArray):
    ``gpudata`` (an address PyCUDA passes as a kernel argument), shape, dtype, nbytes, flags."""

    class _Flags:
        c_contiguous = True
        aligned = True
        writeable = True

    flags = _Flags()

    def __init__(self, t: torch.Tensor) -> None:
        self.tensor = t  # keeps the memory alive while the kernel runs
        self.gpudata = np.uintp(t.data_ptr())
        self.shape = tuple(t.shape)
        self.dtype = dtypes.get(_TC_OF_TORCH[t.dtype]).np
        self.nbytes = t.numel() * t.element_size()


# -- einsum ----------------------------------------------------------------------------------
def _einsum_run(subscripts: str, operands: list[torch.Tensor]) -> torch.Tensor:
    result = numpy_einsum(subscripts, *(as_array(t) for t in operands))
    return as_tensor(np.require(np.asarray(result), requirements="C"))


_einsum_op = torch.library.custom_op(f"{NAMESPACE}::einsum", _einsum_run, mutates_args=())


@_einsum_op.register_fake
def _einsum_fake(subscripts: str, operands: list[torch.Tensor]) -> torch.Tensor:
    # numpy's subscripts are torch's; the dtype is numpy's promotion, as polyopt.einsum's.
    dtype = TORCH_DTYPES[_result_type(operands)]
    return torch.einsum(subscripts, *(t.to(dtype) for t in operands))


def _result_type(operands: Sequence[torch.Tensor]) -> str:
    kinds = []
    for t in operands:
        if t.dtype not in _TC_OF_TORCH:
            raise OptionError(f"einsum does not support dtype {t.dtype}")
        kinds.append(dtypes.get(_TC_OF_TORCH[t.dtype]).np)
    found = dtypes.from_numpy(np.result_type(*kinds))
    if found is None:
        raise OptionError(f"einsum does not support the operands' dtypes {kinds}")
    return found.name


def einsum(subscripts: str, *operands: torch.Tensor) -> torch.Tensor:
    """``polyopt.einsum`` on CPU tensors, returning a tensor (the subscripts string form; no
    ``out=``/``dtype=``). An operator of its own, ``polyopt::einsum``, so it runs under
    ``torch.compile``; it has no gradient (``op`` on the same contraction written in TC has)."""
    if not isinstance(subscripts, str):
        raise OptionError("polyopt.torch.einsum takes the subscripts as a string "
                          f"('ij,jk->ik'), not {type(subscripts).__name__}")
    bad = [type(x).__name__ for x in operands if not isinstance(x, torch.Tensor)]
    if bad:
        raise InputTypeError(f"polyopt.torch.einsum takes torch tensors, got {bad[0]}")
    if not all(x.is_cpu for x in operands):
        devices = sorted({x.device.type for x in operands} - {"cpu"})
        raise InputTypeError(f"polyopt.torch.einsum runs on CPU tensors, not {devices[0]}")
    for k, x in enumerate(operands):
        _check_dense(x, f"polyopt.torch.einsum: operand {k}")
    if _plain_call(operands):  # as Op.__call__: the dispatch would add nothing but time
        return _einsum_run(subscripts, list(operands))
    return _einsum_op(subscripts, list(operands))  # type: ignore[no-any-return]


def _einsum_hook(subscripts: Any, *operands: Any, out: Any = None, dtype: Any = None,
                 casting: str = "safe", optimize: Any = None, **unsupported: Any) -> Any:
    """``polyopt.einsum`` given torch tensors: computed by ``einsum``, returned as a tensor.
    ``optimize`` is left to ``polyopt.einsum``'s default, whatever was asked."""
    given = {"out": out, "dtype": dtype, **unsupported}
    refused = [k for k, v in given.items() if v is not None]
    if refused or casting != "safe":
        raise OptionError(f"polyopt.einsum on torch tensors does not take "
                          f"{', '.join(refused or ['casting'])}")
    return einsum(subscripts, *operands)


use_array_type(torch.Tensor, _einsum_hook)
