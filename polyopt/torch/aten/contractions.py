"""Contractions (mm, addmm, bmm, convolution with groups, stride, padding and dilation)
and pooling: one reduction each, padding as the language's ``pad`` (never a padded copy)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from polyopt.torch.aten.pointwise import pointwise
from polyopt.torch.aten.table import (
    Builder,
    Lowering,
    Out,
    const,
    out_index,
    writer,
)
from polyopt.torch.graph import (
    Merged,
    Stored,
    Unsupported,
    Value,
)

aten = torch.ops.aten
LOWERINGS: dict[Any, Lowering] = {}
lowers = writer(LOWERINGS)


def _acc(dtype: str) -> str:
    return "float" if dtype in ("float16", "bfloat16") else dtype


@lowers(aten.mm.default)
def mm(b: Builder, out: Out, x: Value | Merged, y: Value) -> Stored | Merged:
    if isinstance(x, Merged):  # a merged reshape: rows batched, the reduction over its dims
        rows, red = x.groups
        shape = x.value.shape
        ks = [f"k{d}" for d in range(len(red))]
        flat = " + ".join(f"{math.prod(shape[red[0] + j + 1:red[-1] + 1])}*{k}"
                          for j, k in enumerate(ks[:-1])) + (" + " if len(ks) > 1 else "")
        c = b.fresh("mm", (*shape[:len(rows)], out.shape[1]), out.dtype)
        i = out_index(len(rows) + 1)
        b.emit(c, "+=!", f"{x.value.read([*i[:-1], *ks])} * {y.read([flat + ks[-1], i[-1]])}",
               reduce=[shape[d] for d in red])
        return Merged(c, out.shape, (rows, (len(rows),)))
    c = b.fresh("mm", out.shape, out.dtype)
    b.emit(c, "+=!", f"{x.read(['i0', 'k0'])} * {y.read(['k0', 'i1'])}", reduce=[x.shape[1]])
    return c


@lowers(aten.bmm.default)
def bmm(b: Builder, out: Out, x: Value | Merged, y: Value | Merged) -> Stored | Merged:
    merged = x if isinstance(x, Merged) else y if isinstance(y, Merged) else None
    if merged is None:
        c = b.fresh("bmm", out.shape, out.dtype)
        b.emit(c, "+=!", f"{x.read(['i0', 'i1', 'k0'])} * {y.read(['i0', 'k0', 'i2'])}",
               reduce=[x.shape[2]])
        return c
    # batch dims merged by a reshape: computed on them unmerged; an operand stored merged is
    # read at their linear index (affine)
    group = merged.groups[0]
    batch = merged.value.shape[:len(group)]
    lead = len(group)
    i = out_index(lead + 2)
    flat = " + ".join(f"{math.prod(batch[j + 1:])}*{i[j]}" for j in range(lead - 1))
    flat = f"{flat} + {i[lead - 1]}" if flat else i[lead - 1]

    def read(v: Value | Merged, rest: list[str]) -> str:
        if isinstance(v, Merged):
            if v.groups[0] != group or any(len(g) != 1 for g in v.groups[1:]):
                raise Unsupported("batched matmul whose operands merge different dims")
            return v.value.read([*i[:lead], *rest])
        return v.read([flat, *rest])
    c = b.fresh("bmm", (*batch, out.shape[1], out.shape[2]), out.dtype)
    b.emit(c, "+=!", f"{read(x, [i[lead], 'k0'])} * {read(y, ['k0', i[lead + 1]])}",
           reduce=[x.shape[2]])
    return Merged(c, out.shape, (group, (lead,), (lead + 1,)))


@lowers(aten.addmm.default)
def addmm(b: Builder, out: Out, bias: Value, x: Value | Merged, y: Value, *, beta: Any = 1,
          alpha: Any = 1) -> Value | Merged:
    c = mm(b, out, x, y)
    a, s = const(alpha, "float"), const(beta, "float")
    return pointwise(b, out, lambda p, q: f"{p if alpha == 1 else f'{a} * {p}'} + "
                                          f"{q if beta == 1 else f'{s} * {q}'}", c, bias)


@lowers(aten.convolution.default)
def convolution(b: Builder, out: Out, x: Value, w: Value, bias: Value | None,
                stride: Sequence[int], padding: Sequence[int], dilation: Sequence[int],
                transposed: bool, output_padding: Sequence[int], groups: int) -> Stored:
    """A 1-, 2- or 3-D convolution (groups, stride, padding, dilation) as one reduction;
    padding is the language's ``pad`` (no padded copy), the bias a second statement."""
    if transposed:
        raise Unsupported("transposed convolution")
    spatial = len(x.shape) - 2
    f_all, c_all = w.shape[0], x.shape[1]
    fg, cg = f_all // groups, c_all // groups
    xs = b.store(x, "convin") if any(padding) else x
    chan = "k0" if groups == 1 else ("i1" if cg == 1 and fg == 1 else f"(i1 / {fg}) * {cg} + k0")
    taps = [f"{stride[d]}*i{d + 2} + {dilation[d]}*k{d + 1} - {padding[d]}"
            .replace(" - 0", "").replace("1*", "") for d in range(spatial)]
    ks = [f"k{d + 1}" for d in range(spatial)]
    reads = f"{xs.read(['i0', chan, *taps])} * {w.read(['i1', 'k0', *ks])}"
    u = b.fresh("conv", out.shape, _acc(out.dtype) if bias is not None else out.dtype)
    pad = f"pad {xs.base.name}({', '.join(['0', '0', *map(str, padding)])})" if any(padding) else ""
    b.emit(u, "+=!", reads, reduce=[w.shape[1], *w.shape[2:]], pad=pad)
    if bias is None:
        return u
    y = b.fresh("convb", out.shape, out.dtype)
    idx = out_index(len(out.shape))
    b.emit(y, "=", f"{u.read(idx)} + {bias.read(['i1'])}")
    return y


# ------------------------------------------------------------------ pooling
def _per_dim(values: Sequence[int], n: int) -> list[int]:
    """A pooling argument per spatial dim (ATen gives one value for all, or one each)."""
    return list(values) * n if len(values) == 1 else list(values)


def _window(b: Builder, out: Out, x: Value, kernel: Sequence[int], stride: Sequence[int],
            padding: Sequence[int], dilation: Sequence[int], op: str, fill: str,
            hint: str) -> Stored:
    """A 2-d pooling window reduced by ``op``, padding reading ``fill``."""
    ks, pads, dil = _per_dim(kernel, 2), _per_dim(padding, 2), _per_dim(dilation, 2)
    strd = _per_dim(stride, 2) if stride else ks  # ATen: no stride is the kernel's
    lead = len(x.shape) - 2
    xs = b.store(x, "poolin") if any(pads) else x
    taps = [f"{strd[d]}*i{lead + d} + {dil[d]}*k{d} - {pads[d]}" for d in range(2)]
    target = b.fresh(hint, out.shape, _acc(out.dtype))
    pad = (f"pad {xs.base.name}({', '.join(['0'] * lead + [str(p) for p in pads])}) = {fill}"
           if any(pads) else "")
    b.emit(target, op, xs.read([*out_index(lead), *taps]), reduce=ks, pad=pad)
    return target


@lowers(aten.max_pool2d_with_indices.default)
def max_pool(b: Builder, out: Out, x: Value, kernel: Sequence[int],
             stride: Sequence[int] = (), padding: Sequence[int] = (0,),
             dilation: Sequence[int] = (1,), ceil_mode: bool = False) -> tuple[Value]:
    """Values only: the indices output stays unsupported (a user of it keeps the op in
    torch). Padding reads the lowest finite value, which no window of torch's (padding at
    most half the kernel) takes as its maximum."""
    lowest = {"float": "-3.4028234663852886e+38", "double": "-1.7976931348623157e+308"}
    if out.dtype not in lowest:
        raise Unsupported(f"max pooling of {out.dtype}")
    return (_window(b, out, x, kernel, stride, padding, dilation, "max=!", lowest[out.dtype],
                    "maxpool"),)


@lowers(aten.avg_pool2d.default)
def avg_pool(b: Builder, out: Out, x: Value, kernel: Sequence[int],
             stride: Sequence[int] = (), padding: Sequence[int] = (0,),
             ceil_mode: bool = False, count_include_pad: bool = True,
             divisor_override: int | None = None) -> Stored:
    if any(padding) and not count_include_pad:
        raise Unsupported("avg_pool2d with count_include_pad=False and padding")
    s = _window(b, out, x, kernel, stride, padding, (1,), "+=!", "0.0", "avgsum")
    y = b.fresh("avgpool", out.shape, out.dtype)
    n = divisor_override or math.prod(_per_dim(kernel, 2))
    b.emit(y, "=", f"{s.read(out_index(len(out.shape)))} / {const(n, 'float')}")
    return y


@lowers(aten._adaptive_avg_pool2d.default)
def adaptive_avg_pool(b: Builder, out: Out, x: Value, size: Sequence[int]) -> Stored | Merged:
    """Windows of equal size when each output extent divides the input's: an average pool
    whose kernel is its stride."""
    ins = x.shape[-2:]
    if any(n % o for n, o in zip(ins, size, strict=True)):
        raise Unsupported(f"adaptive pooling {tuple(ins)} -> {tuple(size)} with unequal windows")
    k = [n // o for n, o in zip(ins, size, strict=True)]
    return avg_pool(b, out, x, k, k)
