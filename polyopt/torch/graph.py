"""An FX graph's tensors as the lowering sees them: stored tensors and views read through.

A ``Stored`` is a tensor the def holds (an input, a local or an output); a ``View`` reads a
stored tensor through an index map, one affine template per stored dimension over the view's
indices (``{0}``, ``{1}``...), so a permute, expand or reshape costs nothing: the reads of its
consumers go straight to the stored tensor. Both are frozen and print as TC would.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from polyopt.errors import PolyoptError

# torch dtype -> TC scalar type, for the dtypes a partition holds.
TC_TYPES: dict[torch.dtype, str] = {
    torch.float32: "float", torch.float64: "double", torch.float16: "float16",
    torch.bfloat16: "bfloat16", torch.int64: "int64", torch.int32: "int32", torch.bool: "bool",
}
FLOAT_TYPES = ("float", "double", "float16", "bfloat16")

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_AFFINE = re.compile(r"[0-9{}()+\-* ]+")  # a view's index template without / or %


class Unsupported(PolyoptError):
    """An operator (or an argument of one) this lowering does not take: it stays in torch,
    and ``explain`` prints this message as the reason."""


def tc_type(dtype: torch.dtype) -> str:
    if dtype not in TC_TYPES:
        raise Unsupported(f"dtype {dtype} has no TC type (supported: "
                          f"{', '.join(str(d) for d in TC_TYPES)})")
    return TC_TYPES[dtype]


def tensor_name(fx_name: str) -> str:
    """The TC name of an FX value: its own name, checked, behind a prefix no TC keyword or
    builtin starts with (FX names are identifiers, but this text goes into generated C)."""
    if not _NAME.match(fx_name):
        raise Unsupported(f"FX value name {fx_name!r} is not an identifier")
    return "t_" + fx_name


@dataclass(frozen=True)
class Stored:
    """A tensor the def holds."""

    name: str
    shape: tuple[int, ...]
    dtype: str

    def read(self, idx: Sequence[str]) -> str:
        return f"{self.name}({', '.join(idx)})"

    @property
    def base(self) -> Stored:
        return self

    def __str__(self) -> str:
        return f"{self.dtype}({','.join(map(str, self.shape))}) {self.name}"


@dataclass(frozen=True)
class View:
    """``base`` read through ``exprs``: base dim ``d`` at ``exprs[d]`` formatted with the view's
    indices."""

    base: Stored
    shape: tuple[int, ...]
    exprs: tuple[str, ...]

    @property
    def dtype(self) -> str:
        return self.base.dtype

    def read(self, idx: Sequence[str]) -> str:
        return self.base.read(substitute(self.exprs, idx))

    def splitting(self) -> tuple[tuple[int, ...], ...] | None:
        """Per ``base`` dim, the view dims it is split into (consecutive, row-major), when
        the view is ``base``'s memory reshaped: dims split (a linear's ``(B, T, C)`` view of
        its ``(B*T, C)`` product) or unit dims added or dropped, the order kept; else None.
        Torch then makes it without a copy, and a pointwise op on it can run in ``base``'s
        shape, where it folds into the product (``torch/epilogue.py``)."""
        groups = merge_groups(self.shape, self.base.shape)
        if groups is None or not all(_AFFINE.fullmatch(x) for x in self.exprs):
            return None
        # An affine map is fixed by the origin and each unit step; the far corner catches a
        # product of two indices.
        at = [[0] * len(self.shape), [n - 1 for n in self.shape]] + [
            [int(d == e) for d in range(len(self.shape))]
            for e, n in enumerate(self.shape) if n != 1]
        for e, group in enumerate(groups):
            weight = {d: math.prod(self.shape[g] for g in group[k + 1:])
                      for k, d in enumerate(group)}
            for point in at:
                if _integer(self.exprs[e].format(*point)) != sum(
                        weight.get(d, 0) * i for d, i in enumerate(point)):
                    return None
        return groups

    def __str__(self) -> str:
        dims = ", ".join(f"i{d}" for d in range(len(self.shape)))
        at = substitute(self.exprs, [f"i{d}" for d in range(len(self.shape))])
        return f"view({dims}) -> {self.base.name}({', '.join(at)})"


Value = Stored | View


def substitute(exprs: Sequence[str], idx: Sequence[str]) -> tuple[str, ...]:
    """``exprs`` with ``{d}`` replaced by ``idx[d]`` (parenthesized unless a name, an integer
    or another template's ``{d}``)."""
    args = [i if re.fullmatch(r"-?[A-Za-z0-9_]+|\{\d+\}", i) else f"({i})" for i in idx]
    return tuple(e.format(*args) for e in exprs)


def _integer(text: str) -> int:
    """The value of integer arithmetic (``+ - *``, parentheses) a view's template gave."""
    def value(node: ast.AST) -> int:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -value(node.operand)
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult)):
            a, b = value(node.left), value(node.right)
            return a + b if isinstance(node.op, ast.Add) else \
                a - b if isinstance(node.op, ast.Sub) else a * b
        raise ValueError(f"not integer arithmetic: {text!r}")
    return value(ast.parse(text, mode="eval").body)


def view_of(value: Any, shape: Sequence[int], exprs: Sequence[str]) -> Value:
    """``value`` seen through ``exprs`` (templates over the new view's indices, one per dim of
    ``value``): views of views compose into one map over the stored tensor, and a map that
    is the identity is the stored tensor itself (a transpose of a transpose, which a
    partition would else copy out as an output of its own: 4 MB per call for a weight's
    gradient in a training step)."""
    if isinstance(value, Stored):
        base, exprs = value, tuple(exprs)
    elif isinstance(value, View):
        base, exprs = value.base, substitute(value.exprs, list(exprs))
    else:  # a Merged: its reads would need / and %
        raise Unsupported(f"a view of a reshape that merges dims ({value})")
    if tuple(shape) == base.shape and exprs == tuple(f"{{{d}}}" for d in range(len(shape))):
        return base
    return View(base, tuple(shape), tuple(exprs))


@dataclass(frozen=True)
class Merged:
    """A reshape that merges dims, kept unmerged: ``value`` seen with ``shape``, logical dim
    ``d`` being ``value``'s dims ``groups[d]`` (consecutive). A read through it would need
    ``/`` and ``%`` (which isl's scheduler does not finish on), so only the lowerings that keep
    merged dims whole take it: pointwise ops and a matmul's rows compute on ``value``'s
    shape, and a reshape that splits the dims again reads ``value`` directly."""

    value: Stored | View
    shape: tuple[int, ...]
    groups: tuple[tuple[int, ...], ...]

    @property
    def dtype(self) -> str:
        return self.value.dtype

    def read(self, idx: Sequence[str]) -> str:
        raise Unsupported(f"reads a reshape {self.value.shape} -> {self.shape} that merges "
                          f"dims, which only pointwise ops, a matmul's rows and a reshape "
                          f"back read")

    def __str__(self) -> str:
        return f"merged{self.shape} of {self.value}"


def merge_groups(old: Sequence[int], new: Sequence[int]) -> tuple[tuple[int, ...], ...] | None:
    """For a reshape where each new dim is a product of consecutive old dims: the old dims of
    each new dim; else None."""
    groups: list[tuple[int, ...]] = []
    i = 0
    for n in new:
        group: list[int] = []
        prod = 1
        while i < len(old) and (prod < n or (not group and n == 1 and old[i] == 1)):
            group.append(i)
            prod *= old[i]
            i += 1
        if prod != n:
            return None
        groups.append(tuple(group))
    while groups and i < len(old) and old[i] == 1:  # trailing 1s join the last group
        groups[-1] += (i,)
        i += 1
    return tuple(groups) if i == len(old) else None
