"""The lowering's frame: a def being written (``Builder``, its ``Statement``s), the result's
shape and type (``Out``), and the literals and broadcast reads every lowering uses."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from polyopt.torch.graph import FLOAT_TYPES, Stored, Unsupported, Value, View


@dataclass(frozen=True)
class Statement:
    """One TC statement over its target's whole shape; ``reads`` names the tensors its right
    side reads."""

    target: str
    text: str
    reads: frozenset[str]
    op: str = "="
    shape: tuple[int, ...] = ()
    dtype: str = "float"


@dataclass
class Builder:
    """The statements of one def, in order, and the names it has used."""

    stmts: list[Statement] = field(default_factory=list)
    count: int = 0

    def fresh(self, hint: str, shape: Sequence[int], dtype: str) -> Stored:
        self.count += 1
        return Stored(f"{hint}_{self.count}", tuple(shape), dtype)

    def emit(self, target: Stored, op: str, rhs: str, *, reduce: Sequence[int] = (),
             pad: str = "") -> None:
        """``target(i0..) op rhs`` over the target's whole shape, with reduction indices
        ``k0..`` of extents ``reduce`` and a ``pad`` clause."""
        if op == "=" and target.dtype in ("float16", "bfloat16"):
            rhs = f"{target.dtype}({rhs})"  # stored in its own type, as eager stores each op
        idx = out_index(len(target.shape))
        bounds = [*zip(idx, target.shape, strict=True),
                  *((f"k{d}", n) for d, n in enumerate(reduce))]
        clauses = ", ".join([*(f"{i} in 0:{n}" for i, n in bounds), *([pad] if pad else [])])
        text = f"{target.name}({', '.join(idx)}) {op} {rhs}"
        if clauses:
            text += f" where {clauses}"
        reads = frozenset(re.findall(r"\b(t_\w+|[a-z]+_\d+)\(", rhs + " " + pad))
        self.stmts.append(Statement(target.name, text, reads, op, target.shape, target.dtype))

    def store(self, value: Value, hint: str = "copy") -> Stored:
        """``value`` as a tensor the def holds (a view is copied)."""
        if isinstance(value, Stored):
            return value
        out = self.fresh(hint, value.shape, value.dtype)
        self.emit(out, "=", value.read(out_index(len(value.shape))))
        return out


def out_index(rank: int) -> list[str]:
    return [f"i{d}" for d in range(rank)]


def const(x: Any, dtype: str) -> str:
    """A Python number as a TC literal of ``dtype``'s kind (checked: this text reaches C)."""
    if isinstance(x, bool):
        return f"bool({int(x)})"
    if not isinstance(x, (int, float)):
        raise Unsupported(f"constant {x!r} is not a number")
    if dtype in FLOAT_TYPES or isinstance(x, float):
        v = float(x)
        if math.isnan(v):
            return "(0.0 / 0.0)"  # IEEE division: what C computes (no trap: -fno-trapping-math)
        if math.isinf(v):
            return "(1.0 / 0.0)" if v > 0 else "(-1.0 / 0.0)"
        return repr(v) if v >= 0 else f"({v!r})"
    return str(int(x)) if x >= 0 else f"({int(x)})"


def broadcast(x: Value | int | float, shape: Sequence[int], dtype: str) -> str:
    """``x`` read at the output index ``i0..`` of ``shape``, broadcast as numpy does."""
    if not isinstance(x, (Stored, View)):
        return const(x, dtype)
    off = len(shape) - len(x.shape)
    idx = ["0" if n == 1 and shape[d + off] != 1 else f"i{d + off}"
           for d, n in enumerate(x.shape)]
    return x.read(idx)


def dims_of(dims: Any, rank: int) -> list[int]:
    if dims is None or dims == []:
        return list(range(rank))
    return sorted({d % max(rank, 1) for d in ([dims] if isinstance(dims, int) else dims)})


@dataclass(frozen=True)
class Out:
    """The result torch's fake tensor gives: shape and TC dtype (of the first result, for
    an operator with several: ``tuple``)."""

    shape: tuple[int, ...]
    dtype: str
    tuple: bool = False


Lowering = Callable[..., Any]


def writer(table: dict[Any, Lowering]) -> Callable[..., Callable[[Lowering], Lowering]]:
    """A decorator that enters a lowering in ``table`` (each module's own ``LOWERINGS``;
    ``aten/__init__.py`` joins them) under the ATen overloads it lowers."""
    def lowers(*targets: Any) -> Callable[[Lowering], Lowering]:
        def add(fn: Lowering) -> Lowering:
            for t in targets:
                table[t] = fn
            return fn
        return add
    return lowers
