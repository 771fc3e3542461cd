"""Views as index maps (permute, transpose, expand, squeeze, unsqueeze, reshape, slice,
select: no statement), and cat, embedding and a multi-output op's items."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import torch

from polyopt.torch.aten.table import (
    Builder,
    Lowering,
    Out,
    out_index,
    writer,
)
from polyopt.torch.graph import (
    Merged,
    Stored,
    Unsupported,
    Value,
    merge_groups,
    view_of,
)

aten = torch.ops.aten
LOWERINGS: dict[Any, Lowering] = {}
lowers = writer(LOWERINGS)


@lowers(aten.permute.default)
def permute(b: Builder, out: Out, x: Value, dims: Sequence[int]) -> Value:
    rank = len(x.shape)
    exprs = [""] * rank
    for j, d in enumerate(dims):
        exprs[d % rank] = f"{{{j}}}"
    return view_of(x, out.shape, exprs)


@lowers(aten.transpose.int)
def transpose(b: Builder, out: Out, x: Value, d0: int, d1: int) -> Value:
    dims = list(range(len(x.shape)))
    a, c = d0 % len(dims), d1 % len(dims)
    dims[a], dims[c] = dims[c], dims[a]
    return permute(b, out, x, dims)


LOWERINGS[aten.t.default] = lambda b, out, x: transpose(b, out, x, 0, -1)


@lowers(aten.expand.default)
def expand(b: Builder, out: Out, x: Value, sizes: Sequence[int], implicit: bool = False
           ) -> Value:
    off = len(out.shape) - len(x.shape)
    return view_of(x, out.shape, ["0" if n == 1 and out.shape[d + off] != 1 else
                                  f"{{{d + off}}}" for d, n in enumerate(x.shape)])


@lowers(aten.unsqueeze.default, aten.squeeze.dim, aten.squeeze.dims, aten.squeeze.default,
        aten.view.default, aten._unsafe_view.default, aten.reshape.default)
def reshape(b: Builder, out: Out, x: Value | Merged, *args: Any) -> Value | Merged:
    base = x.value if isinstance(x, Merged) else x
    try:
        return view_of(base, out.shape, reshape_map(base.shape, out.shape))
    except Unsupported:
        groups = merge_groups(base.shape, out.shape)
        if groups is None:
            raise
        return Merged(base, out.shape, groups)


def reshape_map(old: Sequence[int], new: Sequence[int]) -> list[str]:
    """Each old dim's index as an affine expression of the new indices, when the reshape
    splits old dims (affine) or merges dims of which at most one is not 1; a merge of
    several real dims would need ``/`` and ``%`` on every read (isl's scheduler does not
    finish on those), so it is unsupported and the reshape stays in torch."""
    exprs = ["0"] * len(old)
    i = j = 0
    while i < len(old) or j < len(new):
        if i < len(old) and old[i] == 1:
            i += 1
            continue
        if j < len(new) and new[j] == 1:
            j += 1
            continue
        gi, gj, po, pn = [i], [j], old[i], new[j]
        while po != pn:
            if po < pn:
                i += 1
                gi.append(i)
                po *= old[i]
            else:
                j += 1
                gj.append(j)
                pn *= new[j]
        real = [d for d in gi if old[d] != 1]
        if len(real) != 1:
            raise Unsupported(f"reshape {tuple(old)} -> {tuple(new)} merges dims "
                              f"{tuple(old[d] for d in real)}: a read would need / and %")
        terms, stride = [], 1
        for d in reversed(gj):
            terms.append(f"{{{d}}}" if stride == 1 else f"{stride}*{{{d}}}")
            stride *= new[d]
        exprs[real[0]] = " + ".join(reversed(terms))
        i, j = i + 1, j + 1
    return exprs


@lowers(aten.slice.Tensor)
def slice_(b: Builder, out: Out, x: Value, dim: int = 0, start: Any = None, end: Any = None,
           step: int = 1) -> Value:
    d = dim % len(x.shape)
    first = 0 if start is None else (start + x.shape[d] if start < 0 else start)
    first = max(0, min(first, x.shape[d]))
    exprs = [f"{{{k}}}" for k in range(len(x.shape))]
    exprs[d] = f"{first} + {step}*{{{d}}}" if step != 1 else f"{first} + {{{d}}}"
    return view_of(x, out.shape, exprs)


@lowers(aten.select.int)
def select(b: Builder, out: Out, x: Value, dim: int, index: int) -> Value:
    d = dim % len(x.shape)
    at = index + x.shape[d] if index < 0 else index
    exprs = [f"{{{k if k < d else k - 1}}}" for k in range(len(x.shape))]
    exprs[d] = str(at)
    return view_of(x, out.shape, exprs)


@lowers(aten.cat.default)
def cat(b: Builder, out: Out, xs: Sequence[Value], dim: int = 0) -> Stored:
    """One select on the position along ``dim`` (the front end cuts it into one statement
    per input, each over its own range: no test per element)."""
    d = dim % len(out.shape)
    idx = out_index(len(out.shape))
    parts = [x for x in xs if x.shape[d] != 0]
    offsets = [sum(p.shape[d] for p in parts[:k]) for k in range(len(parts))]
    expr = ""
    for x, off in reversed(list(zip(parts, offsets, strict=True))):
        at = list(idx)
        at[d] = f"{idx[d]} - {off}" if off else idx[d]
        read = x.read(at)
        expr = f"({idx[d]} < {off + x.shape[d]} ? {read} : {expr})" if expr else read
    y = b.fresh("cat", out.shape, out.dtype)
    b.emit(y, "=", expr)
    return y


@lowers(aten.embedding.default)
def embedding(b: Builder, out: Out, w: Value, ids: Value, padding_idx: int = -1,
              scale_grad: bool = False, sparse: bool = False) -> Stored:
    """A gather: each id reads its row (ids are checked against the table at call time)."""
    idx = out_index(len(out.shape))
    y = b.fresh("embed", out.shape, out.dtype)
    b.emit(y, "=", w.read([ids.read(idx[:-1]), idx[-1]]))
    return y


LOWERINGS[operator.getitem] = lambda b, out, xs, k: xs[k]
