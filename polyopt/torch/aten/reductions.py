"""Reductions and the normalizations built on them (sum, mean, amax, amin, softmax,
log_softmax, layer norm, batch norm in inference): locals over the kept dims."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch

from polyopt.torch.aten.table import (
    Builder,
    Lowering,
    Out,
    const,
    dims_of,
    out_index,
    writer,
)
from polyopt.torch.graph import (
    Stored,
    Value,
    view_of,
)

aten = torch.ops.aten
LOWERINGS: dict[Any, Lowering] = {}
lowers = writer(LOWERINGS)


def reduce(b: Builder, x: Value, dims: Sequence[int], op: str, term: Callable[[str], str],
           hint: str, dtype: str) -> Stored:
    """``op`` over ``dims`` of ``x`` (``+=!``, ``max=!``...), each term ``term(read)``; the
    result keeps the other dims (rank ``len(x.shape) - len(dims)``)."""
    kept = [d for d in range(len(x.shape)) if d not in dims]
    target = b.fresh(hint, [x.shape[d] for d in kept], dtype)
    idx, j = [], 0
    for d in range(len(x.shape)):
        if d in dims:
            idx.append(f"k{dims.index(d)}")
        else:
            idx.append(f"i{j}")
            j += 1
    b.emit(target, op, term(x.read(idx)), reduce=[x.shape[d] for d in dims])
    return target


def keep(value: Stored, rank: int, dims: Sequence[int], keepdim: bool) -> Value:
    """A reduction's result with its reduced dims back as size 1 (``keepdim``)."""
    if not keepdim:
        return value
    shape, exprs, j = [], [], 0
    for d in range(rank):
        if d in dims:
            shape.append(1)
        else:
            shape.append(value.shape[j])
            exprs.append(f"{{{d}}}")
            j += 1
    return view_of(value, shape, exprs)


@lowers(aten.mean.dim, aten.mean.default)
def mean(b: Builder, out: Out, x: Value, dims: Any = None, keepdim: bool = False,
         dtype: Any = None) -> Value:
    d = dims_of(dims, len(x.shape))
    s = reduce(b, x, d, "+=!", lambda r: r, "sum", out.dtype)
    m = b.fresh("mean", s.shape, out.dtype)
    b.emit(m, "=", f"{s.read(out_index(len(s.shape)))} / "
                   f"{const(math.prod(x.shape[k] for k in d), out.dtype)}")
    return keep(m, len(x.shape), d, keepdim)


def _reduction(op: str, hint: str) -> Lowering:
    """sum, amax, amin: ``op`` over ``dims`` (all when none are given)."""
    def lower(b: Builder, out: Out, x: Value, dims: Any = None, keepdim: bool = False,
              dtype: Any = None) -> Value:
        d = dims_of(dims, len(x.shape))
        return keep(reduce(b, x, d, op, lambda r: r, hint, out.dtype), len(x.shape), d, keepdim)
    return lower


LOWERINGS[aten.sum.dim_IntList] = LOWERINGS[aten.sum.default] = _reduction("+=!", "sum")
LOWERINGS[aten.amax.default] = _reduction("max=!", "max")
LOWERINGS[aten.amin.default] = _reduction("min=!", "min")


def _without(idx: Sequence[str], dims: Sequence[int]) -> list[str]:
    return [i for d, i in enumerate(idx) if d not in dims]


@lowers(aten._softmax.default, aten._log_softmax.default)
def softmax(b: Builder, out: Out, x: Value, dim: int, half_to_float: bool = False, *,
            log: bool = False) -> Stored:
    """Max, then the sum of ``exp(x - max)``, then each element: three passes that the
    scheduler may fuse (the max and sum are locals over the other dims)."""
    d = dim % len(x.shape)
    idx = out_index(len(x.shape))
    m = reduce(b, x, [d], "max=!", lambda r: r, "smax", "float")
    row = _without(idx, [d])
    s = reduce(b, x, [d], "+=!", lambda r: f"exp({r} - {m.read(out_index(len(row)))})", "ssum",
               "float")
    y = b.fresh("softmax", x.shape, out.dtype)
    shifted = f"{x.read(idx)} - {m.read(row)}"
    b.emit(y, "=", f"{shifted} - log({s.read(row)})" if log
           else f"exp({shifted}) / {s.read(row)}")
    return y


LOWERINGS[aten._log_softmax.default] = lambda b, out, x, dim, h=False: softmax(b, out, x, dim, h,
                                                                           log=True)


def _moments(b: Builder, x: Value, dims: list[int], mean_dtype: str,
             names: tuple[str, str, str]) -> tuple[Stored, Stored]:
    """The mean over ``dims`` and the sum of squared deviations from it (two passes, as
    torch computes them), each over the kept dims (named ``i0..`` in order)."""
    s = reduce(b, x, dims, "+=!", lambda r: r, names[0], "float")
    mu = b.fresh(names[1], s.shape, mean_dtype)
    kept = out_index(len(s.shape))
    count = const(math.prod(x.shape[k] for k in dims), "float")
    b.emit(mu, "=", f"{s.read(kept)} / {count}")
    sq = reduce(b, x, dims, "+=!", lambda r: f"({r} - {mu.read(kept)}) * ({r} - "
                                             f"{mu.read(kept)})", names[2], "float")
    return mu, sq


def _affine(expr: str, w: Value | None, bias: Value | None, at: Sequence[str]) -> str:
    """A normalization's optional scale and shift, read at ``at``."""
    if w is not None:
        expr = f"{expr} * {w.read(at)}"
    return expr if bias is None else f"{expr} + {bias.read(at)}"


@lowers(aten.native_layer_norm.default)
def layer_norm(b: Builder, out: Out, x: Value, shape: Sequence[int], w: Value | None,
               bias: Value | None, eps: float) -> tuple[Value, Value, Value]:
    rank, n = len(x.shape), len(shape)
    dims = list(range(rank - n, rank))
    mu, v = _moments(b, x, dims, "float", ("lnsum", "lnmean", "lnvar"))
    outer = out_index(rank - n)
    r = b.fresh("lnrstd", mu.shape, "float")
    b.emit(r, "=", f"rsqrt({v.read(outer)} / {const(math.prod(shape), 'float')} + "
                   f"{const(eps, 'float')})")
    idx = out_index(rank)
    y = b.fresh("ln", x.shape, out.dtype)
    b.emit(y, "=", _affine(f"({x.read(idx)} - {mu.read(outer)}) * {r.read(outer)}", w, bias,
                           idx[rank - n:]))
    return y, keep(mu, rank, dims, True), keep(r, rank, dims, True)


@lowers(aten._native_batch_norm_legit_no_training.default)
def batch_norm(b: Builder, out: Out, x: Value, w: Value | None, bias: Value | None,
               mean_: Value, var: Value, momentum: float, eps: float) -> tuple[Value, ...]:
    """Inference: statistics are inputs, so each element is one affine map of its channel."""
    idx = out_index(len(x.shape))
    c = [idx[1]]
    y = b.fresh("bn", x.shape, out.dtype)
    b.emit(y, "=", _affine(f"({x.read(idx)} - {mean_.read(c)}) * rsqrt({var.read(c)} + "
                           f"{const(eps, 'float')})", w, bias, c))
    return (y,)


@lowers(aten.any.dim, aten.any.dims, aten.any.default)
def any_(b: Builder, out: Out, x: Value, dims: Any = None, keepdim: bool = False) -> Value:
    """Whether any element is true (non-zero): the largest of 0 and 1 over ``dims``."""
    d = dims_of(dims, len(x.shape))
    m = reduce(b, x, d, "max=!", lambda r: f"int32({r} != 0)", "anymax", "int32")
    y = b.fresh("any", m.shape, "bool")
    b.emit(y, "=", f"bool({m.read(out_index(len(m.shape)))} > 0)")
    return keep(y, len(x.shape), d, keepdim)


@lowers(aten.var_mean.correction, aten.var.correction)
def var_mean(b: Builder, out: Out, x: Value, dims: Any = None, *, correction: Any = 1,
             keepdim: bool = False) -> Any:
    """Variance about the mean (two passes, as torch computes it), divided by ``n -
    correction``; ``var_mean`` returns both."""
    d = dims_of(dims, len(x.shape))
    n = math.prod(x.shape[k] for k in d)
    mu, sq = _moments(b, x, d, out.dtype, ("vsum", "vmean", "vsq"))
    var = b.fresh("var", mu.shape, out.dtype)
    b.emit(var, "=", f"{sq.read(out_index(len(mu.shape)))} / "
                     f"{const(float(n - (correction or 0)), 'float')}")
    both = (keep(var, len(x.shape), d, keepdim), keep(mu, len(x.shape), d, keepdim))
    return both if out.tuple else both[0]
