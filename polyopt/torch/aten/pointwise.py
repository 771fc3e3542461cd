"""Elementwise operators (arithmetic, comparisons, activations, casts): one statement
each, broadcast as numpy does; on a merging reshape's result, computed unmerged."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from polyopt.torch.aten.table import (
    Builder,
    Lowering,
    Out,
    broadcast,
    const,
    writer,
)
from polyopt.torch.graph import (
    FLOAT_TYPES,
    Merged,
    Stored,
    Unsupported,
    Value,
    View,
    view_of,
)

aten = torch.ops.aten
LOWERINGS: dict[Any, Lowering] = {}
lowers = writer(LOWERINGS)


def pointwise(b: Builder, out: Out, expr: Callable[..., str], *args: Any) -> Value | Merged:
    merged = next((a for a in args if isinstance(a, Merged)), None)
    if merged is not None:  # computed on the unmerged shape, merged again for its readers
        full = Out(merged.value.shape, out.dtype)
        inner = [unmerge(a, merged) for a in args]
        return Merged(pointwise(b, full, expr, *inner), out.shape, merged.groups)  # type: ignore
    for view in args:
        if not (isinstance(view, View) and view.shape == out.shape
                and any(s.target == view.base.name for s in b.stmts)):
            continue
        groups = view.splitting()
        if groups is not None:
            # computed in the shape of the tensor it views, and viewed the same way: the
            # bias and activation of a linear on a 3-D input then fold into its product
            # (``torch/epilogue.py``), and a squeeze back is no copy
            inner = [_onto(a, view, groups) for a in args]
            if all(a is not None for a in inner):
                return view_of(_stored(b, Out(view.base.shape, out.dtype), expr, *inner),
                               out.shape, view.exprs)
    return _stored(b, out, expr, *args)


def _stored(b: Builder, out: Out, expr: Callable[..., str], *args: Any) -> Stored:
    kind = "float" if out.dtype in FLOAT_TYPES else out.dtype
    target = b.fresh("pw", out.shape, out.dtype)
    b.emit(target, "=", expr(*[broadcast(a, out.shape, kind) for a in args]))
    return target


def _onto(x: Any, view: View, groups: tuple[tuple[int, ...], ...]) -> Any:
    """Operand ``x`` of a pointwise op on ``view`` read at the indices of ``view.base``,
    whose dim ``e`` is ``view``'s dims ``groups[e]`` (``View.splitting``): a view through
    the same map is its base; else ``x`` may vary only along view dims left whole (a split
    one would be read with / and %); None where it cannot be."""
    if isinstance(x, View) and x.exprs == view.exprs and x.shape == view.shape \
            and x.base.shape == view.base.shape:
        return x.base
    if isinstance(x, Merged):
        return None
    if not isinstance(x, (Stored, View)):
        return x
    owner = {d: e for e, group in enumerate(groups) for d in group}
    off = len(view.shape) - len(x.shape)
    exprs = []
    for d, n in enumerate(x.shape):
        if n == 1:
            exprs.append("0")
            continue
        e = owner[d + off]
        if any(view.shape[g] != 1 for g in groups[e] if g != d + off):
            return None
        exprs.append(f"{{{e}}}")
    return view_of(x, view.base.shape, exprs)


def unmerge(x: Any, merged: Merged) -> Any:
    """An operand of a pointwise op on ``merged`` as a value of ``merged.value``'s shape: the
    same merge, or one that broadcasts only along dims no merge touches."""
    if isinstance(x, Merged):
        if x.value.shape != merged.value.shape or x.groups != merged.groups:
            raise Unsupported("pointwise op on two different merging reshapes")
        return x.value
    if not isinstance(x, (Stored, View)):
        return x
    off = len(merged.shape) - len(x.shape)
    exprs = []
    for d, n in enumerate(x.shape):
        group = merged.groups[d + off]
        if n == 1 and merged.shape[d + off] != 1:
            exprs.append("0")
        elif len(group) == 1:
            exprs.append(f"{{{group[0]}}}")
        else:
            raise Unsupported("pointwise op broadcasting along a merged dim")
    return view_of(x, merged.value.shape, exprs)


def _sigmoid(x: str) -> str:
    return f"1.0 / (1.0 + exp(-{x}))"


UNARY: dict[Any, Callable[[str], str]] = {
    aten.relu.default: lambda x: f"max({x}, 0.0)",
    aten.neg.default: lambda x: f"-{x}",
    aten.exp.default: lambda x: f"exp({x})",
    aten.log.default: lambda x: f"log({x})",
    aten.sqrt.default: lambda x: f"sqrt({x})",
    aten.rsqrt.default: lambda x: f"rsqrt({x})",
    aten.tanh.default: lambda x: f"tanh({x})",
    aten.erf.default: lambda x: f"erf({x})",
    aten.abs.default: lambda x: f"fabs({x})",
    aten.sin.default: lambda x: f"sin({x})",
    aten.cos.default: lambda x: f"cos({x})",
    aten.log1p.default: lambda x: f"log1p({x})",
    aten.expm1.default: lambda x: f"expm1({x})",
    aten.reciprocal.default: lambda x: f"1.0 / {x}",
    aten.sigmoid.default: _sigmoid,
}
BINARY: dict[Any, Callable[[str, str], str]] = {
    aten.mul.Tensor: lambda x, y: f"{x} * {y}",
    aten.mul.Scalar: lambda x, y: f"{x} * {y}",
    aten.div.Tensor: lambda x, y: f"{x} / {y}",
    aten.div.Scalar: lambda x, y: f"{x} / {y}",
    aten.maximum.default: lambda x, y: f"max({x}, {y})",
    aten.minimum.default: lambda x, y: f"min({x}, {y})",
    aten.pow.Tensor_Tensor: lambda x, y: f"pow({x}, {y})",
}
COMPARE = {aten.gt: ">", aten.lt: "<", aten.ge: ">=", aten.le: "<=", aten.eq: "==",
           aten.ne: "!="}


def _unary(fn: Callable[[str], str]) -> Lowering:
    return lambda b, out, x: pointwise(b, out, lambda a: f"({fn(a)})", x)


for _op, _fn in UNARY.items():
    LOWERINGS[_op] = _unary(_fn)
for _op, _fn2 in BINARY.items():
    LOWERINGS[_op] = (lambda f: lambda b, out, x, y: pointwise(b, out, f, x, y))(_fn2)
for _packet, _sym in COMPARE.items():
    for _overload in (_packet.Tensor, _packet.Scalar):
        LOWERINGS[_overload] = (lambda s: lambda b, out, x, y: pointwise(
            b, out, lambda p, q: f"{p} {s} {q}", x, y))(_sym)


@lowers(aten.add.Tensor, aten.add.Scalar)
def add(b: Builder, out: Out, x: Any, y: Any, alpha: Any = 1) -> Value | Merged:
    return pointwise(b, out, lambda p, q: f"{p} + {q}" if alpha == 1 else
                     f"{p} + {const(alpha, out.dtype)} * {q}", x, y)


for _sub in (aten.sub.Tensor, aten.sub.Scalar):
    LOWERINGS[_sub] = lambda b, out, x, y, alpha=1: pointwise(
        b, out, lambda p, q: f"{p} - {q}" if alpha == 1 else
        f"{p} - {const(alpha, out.dtype)} * {q}", x, y)


@lowers(aten.rsub.Scalar)
def rsub(b: Builder, out: Out, x: Any, y: Any, alpha: Any = 1) -> Value | Merged:
    return pointwise(b, out, lambda p, q: f"{q} - {const(alpha, out.dtype)} * {p}", x, y)


@lowers(aten.pow.Tensor_Scalar)
def power(b: Builder, out: Out, x: Value, e: Any) -> Value | Merged:
    if e == 2:
        return pointwise(b, out, lambda p: f"{p} * {p}", x)
    if e == 0.5:
        return pointwise(b, out, lambda p: f"sqrt({p})", x)
    return pointwise(b, out, lambda p: f"pow({p}, {const(e, 'float')})", x)


@lowers(aten.gelu.default)
def gelu(b: Builder, out: Out, x: Value, approximate: str = "none") -> Value | Merged:
    if approximate == "tanh":
        return pointwise(b, out, lambda p: f"0.5 * {p} * (1.0 + tanh(0.7978845608028654 * "
                                           f"({p} + 0.044715 * {p} * {p} * {p})))", x)
    if approximate != "none":
        raise Unsupported(f"gelu approximate={approximate!r} (supported: 'none', 'tanh')")
    return pointwise(b, out, lambda p: f"0.5 * {p} * (1.0 + erf({p} * 0.7071067811865476))",
                     x)


@lowers(aten.hardtanh.default, aten.clamp.default)
def clamp(b: Builder, out: Out, x: Value, lo: Any = None, hi: Any = None) -> Value | Merged:
    def expr(p: str) -> str:
        if lo is not None:
            p = f"max({p}, {const(lo, out.dtype)})"
        return p if hi is None else f"min({p}, {const(hi, out.dtype)})"
    if lo is None and hi is None:
        raise Unsupported("clamp without bounds")
    return pointwise(b, out, expr, x)


LOWERINGS[aten.clamp_min.default] = lambda b, out, x, lo: clamp(b, out, x, lo, None)
LOWERINGS[aten.clamp_max.default] = lambda b, out, x, hi: clamp(b, out, x, None, hi)


@lowers(aten.leaky_relu.default)
def leaky_relu(b: Builder, out: Out, x: Value, slope: Any = 0.01) -> Value | Merged:
    return pointwise(b, out, lambda p: f"({p} > 0.0 ? {p} : {const(slope, out.dtype)} * {p})",
                     x)


@lowers(aten.where.self)
def where(b: Builder, out: Out, cond: Value, x: Any, y: Any) -> Value | Merged:
    return pointwise(b, out, lambda c, p, q: f"({c} ? {p} : {q})", cond, x, y)


@lowers(aten._to_copy.default)
def to_copy(b: Builder, out: Out, x: Value, **kwargs: Any) -> Value | Merged:
    for key in ("layout", "device"):
        if kwargs.get(key) not in (None, torch.strided, torch.device("cpu")):
            raise Unsupported(f"_to_copy with {key}={kwargs[key]}")
    return pointwise(b, out, lambda p: f"{out.dtype}({p})", x)


@lowers(aten.clone.default, aten.alias.default, aten.lift_fresh_copy.default,
        aten.detach.default)
def identity(b: Builder, out: Out, x: Value, **kwargs: Any) -> Value:
    return x


@lowers(aten.full.default, aten.scalar_tensor.default)
def full(b: Builder, out: Out, size: Any, value: Any = None, **kwargs: Any) -> Stored | Merged:
    fill = size if value is None else value  # scalar_tensor(value)
    target = b.fresh("full", out.shape, out.dtype)
    b.emit(target, "=", _typed(const(fill, out.dtype), out.dtype))
    return target


@lowers(aten.full_like.default)
def full_like(b: Builder, out: Out, x: Any, value: Any, **kwargs: Any) -> Stored | Merged:
    return full(b, out, None, value)


@lowers(aten.arange.start_step, aten.arange.start, aten.arange.default)
def arange(b: Builder, out: Out, start: Any, end: Any = None, step: Any = 1,
           **kwargs: Any) -> Stored | Merged:
    first = 0 if end is None else start
    target = b.fresh("arange", out.shape, out.dtype)
    b.emit(target, "=", _typed(f"{const(first, 'int64')} + {const(step, 'int64')} * i0",
                               out.dtype))
    return target


def _typed(expr: str, dtype: str) -> str:
    """``expr`` cast to ``dtype`` (TC infers a tensor's type from what it stores)."""
    return f"{dtype}({expr})"


@lowers(aten.logical_not.default, aten.bitwise_not.default)
def logical_not(b: Builder, out: Out, x: Value) -> Value | Merged:
    if out.dtype != "bool":
        raise Unsupported(f"bitwise not of {out.dtype}")
    return pointwise(b, out, lambda p: f"!({p})", x)


for _target, _sym in ((aten.logical_and.default, "&&"), (aten.logical_or.default, "||"),
                      (aten.bitwise_and.Tensor, "&&"), (aten.bitwise_or.Tensor, "||")):
    LOWERINGS[_target] = (lambda s: lambda b, out, x, y: _boolean(b, out, x, y, s))(_sym)


def _boolean(b: Builder, out: Out, x: Any, y: Any, sym: str) -> Value | Merged:
    if out.dtype != "bool":
        raise Unsupported(f"bitwise operator on {out.dtype}")
    return pointwise(b, out, lambda p, q: f"(bool({p}) {sym} bool({q}))", x, y)
