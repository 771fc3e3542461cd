"""The abstract syntax of a TC source file, as parsed (no names resolved, no types)."""

from __future__ import annotations

from dataclasses import dataclass

Pos = tuple[int, int]


# ---------------------------------------------------------------- expressions

@dataclass(frozen=True)
class Node:
    pos: Pos


@dataclass(frozen=True)
class Num(Node):
    text: str
    value: int | float
    is_float: bool


@dataclass(frozen=True)
class Name(Node):
    """A bare identifier: size, index variable, let or 0-d tensor."""

    id: str


@dataclass(frozen=True)
class Apply(Node):
    """``f(args)``: a tensor read or a builtin call (decided by sema)."""

    fn: str
    args: tuple[Node, ...]


@dataclass(frozen=True)
class CastE(Node):
    type: str
    arg: Node


@dataclass(frozen=True)
class UnaryE(Node):
    op: str
    x: Node


@dataclass(frozen=True)
class BinaryE(Node):
    """Also ``min(a, b)`` / ``max(a, b)`` (op "min" / "max")."""

    op: str
    a: Node
    b: Node


@dataclass(frozen=True)
class Ternary(Node):
    cond: Node
    a: Node
    b: Node


# ---------------------------------------------------------------- where items

@dataclass(frozen=True)
class Let(Node):
    name: str
    value: Node


@dataclass(frozen=True)
class Range(Node):
    name: str
    lo: Node
    hi: Node


@dataclass(frozen=True)
class Exists(Node):
    value: Node


@dataclass(frozen=True)
class PadSpec(Node):
    """Zero padding (extension §5.2): per dim (before, after) widths and a fill value."""

    tensor: str
    widths: tuple[tuple[Node, Node], ...]
    fill: float


@dataclass(frozen=True)
class Pad(Node):
    """``where pad T(...) [= fill]``."""

    spec: PadSpec


WhereItem = Let | Range | Exists | Pad


# ---------------------------------------------------------------- statements and defs

@dataclass(frozen=True)
class Ident(Node):
    id: str


@dataclass(frozen=True)
class Statement(Node):
    target: Ident
    indices: tuple[Ident, ...]
    op: str  # the assignment token: "=", "+=!", "min=", ...
    rhs: Node
    where: tuple[WhereItem, ...]


@dataclass(frozen=True)
class Dim(Node):
    """A dimension of a declared type: a size name or an integer literal."""

    name: str | None
    value: int | None


@dataclass(frozen=True)
class TypeRef(Node):
    name: str  # as written: "float", "int32", ...
    dims: tuple[Dim, ...]  # () for a 0-d tensor


@dataclass(frozen=True)
class TensorDecl(Node):
    """An input, output or local: ``[type] name [pad(...)]``."""

    type: TypeRef | None
    name: str
    pad: PadSpec | None = None


@dataclass(frozen=True)
class SizeParam(Node):
    """``<NAME[=default]>`` (extension §5.3)."""

    name: str
    default: int | None


@dataclass(frozen=True)
class Def(Node):
    name: str
    params: tuple[SizeParam, ...]
    inputs: tuple[TensorDecl, ...]
    outputs: tuple[TensorDecl, ...]
    locals: tuple[TensorDecl, ...]
    stmts: tuple[Statement, ...]


@dataclass(frozen=True)
class File:
    defs: tuple[Def, ...]


def children(node: Node) -> tuple[Node, ...]:
    if isinstance(node, Apply):
        return node.args
    if isinstance(node, CastE | UnaryE):
        return (node.arg if isinstance(node, CastE) else node.x,)
    if isinstance(node, BinaryE):
        return (node.a, node.b)
    if isinstance(node, Ternary):
        return (node.cond, node.a, node.b)
    return ()


def depth(node: Node) -> int:
    """The nesting depth of an expression tree, computed without recursion."""
    best = 0
    stack = [(node, 1)]
    while stack:
        n, d = stack.pop()
        best = max(best, d)
        stack.extend((c, d + 1) for c in children(n))
    return best
