"""The frozen Program: what the language front end hands to the polyhedral stages.

Everything here is checked, typed and range-inferred already:

- every ``Expr`` node carries its canonical dtype name (see ``polyopt.dtypes``) and, for
  error messages, the (line, column) of its first token (``pos``, ignored by equality);
- lets are inlined, and so are pointwise locals read once (``lang.inline``); ``exists``
  clauses are gone (they only fed range inference), and
  ``<...>`` parameters and sizes fixed by the caller are substituted as constants;
- each statement's iteration domain is isl set text whose tuple is the statement's name and
  whose dims are its index variables (``Stmt.iters``), parametric in the unbound sizes;
- tensor extents are isl affine expression text over the size names ("M", "3", "H - KH + 1",
  "floor((H - 1)/2) + 1"), evaluated with ``extent_value``.

``str(program)`` prints the whole artifact (``polyopt compile --emit ir``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache

import islpy as isl

Pos = tuple[int, int] | None


@dataclass(frozen=True)
class Expr:
    dtype: str
    pos: Pos = field(default=None, compare=False, repr=False, kw_only=True)

    def children(self) -> tuple[Expr, ...]:
        return ()

    def walk(self) -> Iterator[Expr]:
        """This node and all nodes below it, parents first."""
        yield self
        for c in self.children():
            yield from c.walk()

    def walk_values(self) -> Iterator[Expr]:
        """The nodes of the value this expression computes, parents first: ``walk`` without
        a read's indices (address arithmetic, which the compiler strength-reduces)."""
        yield self
        if not isinstance(self, Read):
            for c in self.children():
                yield from c.walk_values()


@dataclass(frozen=True)
class Const(Expr):
    value: int | float | bool

    def __str__(self) -> str:
        return repr(self.value) if not isinstance(self.value, float) else f"{self.value!r}"


@dataclass(frozen=True)
class Var(Expr):
    """An index variable (``kind="index"``) or a size used as a value (``kind="size"``)."""

    name: str
    kind: str  # "index" | "size"

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Pad:
    """The padding of one dimension of a read: widths before and after the tensor's extent,
    each isl affine text over sizes (as extents are), in the front end's normal form (so a
    width of zero is ``"0"``)."""

    before: str = "0"
    after: str = "0"

    @property
    def is_zero(self) -> bool:
        return self.before == "0" and self.after == "0"

    def __str__(self) -> str:
        return f"({self.before}, {self.after})"

    def __repr__(self) -> str:
        # A (before, after) pair, as widths were before they had a type: the tuning key
        # hashes reprs (tune.key.canonical_text), and padded defs keep their keys.
        return repr((self.before, self.after))


@dataclass(frozen=True)
class Read(Expr):
    """``tensor(indices...)``. An index that contains a Read is data dependent (a gather).

    ``pad`` (language extension, zero padding): one ``Pad`` per dim, or None. A padded read
    outside the tensor but inside the padding yields ``fill`` without touching memory.
    """

    tensor: str
    indices: tuple[Expr, ...]
    pad: tuple[Pad, ...] | None = None
    fill: float = 0.0

    def children(self) -> tuple[Expr, ...]:
        return self.indices

    def uses(self, index: str) -> bool:
        """Does index variable ``index`` appear in this read's indices? (Stops at the first;
        called often while lowering, so no set as ``index_names`` builds.)"""
        return any(isinstance(v, Var) and v.kind == "index" and v.name == index
                   for ix in self.indices for v in ix.walk())

    def __str__(self) -> str:
        pad = "" if self.pad is None else f" pad[{', '.join(map(str, self.pad))}]={self.fill}"
        return f"{self.tensor}({', '.join(map(str, self.indices))}){pad}"


@dataclass(frozen=True)
class Unary(Expr):
    op: str  # "-" | "!"
    x: Expr

    def children(self) -> tuple[Expr, ...]:
        return (self.x,)

    def __str__(self) -> str:
        return f"({self.op}{self.x})"


@dataclass(frozen=True)
class Binary(Expr):
    """Arithmetic ``+ - * / %`` (integer ``/`` and ``%`` floor), comparisons
    ``< > <= >= == !=``, logic ``&& ||``, and ``min``/``max``."""

    op: str
    a: Expr
    b: Expr

    def children(self) -> tuple[Expr, ...]:
        return (self.a, self.b)

    def __str__(self) -> str:
        if self.op in ("min", "max"):
            return f"{self.op}({self.a}, {self.b})"
        return f"({self.a} {self.op} {self.b})"


@dataclass(frozen=True)
class Select(Expr):
    cond: Expr
    a: Expr
    b: Expr

    def children(self) -> tuple[Expr, ...]:
        return (self.cond, self.a, self.b)

    def __str__(self) -> str:
        return f"({self.cond} ? {self.a} : {self.b})"


@dataclass(frozen=True)
class Call(Expr):
    """A builtin math function (``exp``, ``fmax``, ...), arity already checked."""

    fn: str
    args: tuple[Expr, ...]

    def children(self) -> tuple[Expr, ...]:
        return self.args

    def __str__(self) -> str:
        return f"{self.fn}({', '.join(map(str, self.args))})"


@dataclass(frozen=True)
class Cast(Expr):
    x: Expr

    def children(self) -> tuple[Expr, ...]:
        return (self.x,)

    def __str__(self) -> str:
        return f"{self.dtype}({self.x})"


@dataclass(frozen=True)
class Tensor:
    name: str
    dtype: str
    shape: tuple[str, ...]  # isl affine expressions over size names, one per dim
    role: str  # "input" | "output" | "local"
    pos: Pos = field(default=None, compare=False, repr=False)

    @property
    def rank(self) -> int:
        return len(self.shape)

    def __str__(self) -> str:
        return f"{self.role} {self.dtype}({', '.join(self.shape)}) {self.name}"


@dataclass(frozen=True)
class Stmt:
    """``tensor(lhs...) op rhs`` over ``domain``.

    ``name`` is ``<tensor>_<k>``, the k-th statement writing ``tensor`` (from 0).
    ``op`` is "=", "+", "*", "min" or "max"; ``init`` is True for the ``op=!`` forms, which
    first set every element of ``tensor`` in the LHS range to the identity of ``op``.
    ``iters`` lists the LHS indices in LHS order, then the reduction indices in order of first
    appearance; ``domain`` is isl set text ``[sizes] -> { name[iters] : ... }``.
    """

    name: str
    tensor: str
    lhs: tuple[str, ...]
    iters: tuple[str, ...]
    op: str
    init: bool
    rhs: Expr
    domain: str
    pos: Pos = field(default=None, compare=False, repr=False)

    @property
    def reduction_iters(self) -> tuple[str, ...]:
        return self.iters[len(self.lhs):]

    def __str__(self) -> str:
        op = "=" if self.op == "=" else f"{self.op}={'!' if self.init else ''}"
        lhs = ", ".join(self.lhs)
        return f"{self.name}: {self.tensor}({lhs}) {op} {self.rhs}\n    {self.domain}"


def index_names(e: Expr) -> set[str]:
    """The index variables ``e`` uses (a read: in any of its indices)."""
    return {v.name for v in e.walk() if isinstance(v, Var) and v.kind == "index"}


def rewrite(e: Expr, fn: Callable[[Expr], Expr]) -> Expr:
    """``e`` rebuilt bottom-up with ``fn`` applied to every node (children first)."""
    if isinstance(e, Read):
        e = replace(e, indices=tuple(rewrite(i, fn) for i in e.indices))
    elif isinstance(e, (Unary, Cast)):
        e = replace(e, x=rewrite(e.x, fn))
    elif isinstance(e, Binary):
        e = replace(e, a=rewrite(e.a, fn), b=rewrite(e.b, fn))
    elif isinstance(e, Select):
        e = replace(e, cond=rewrite(e.cond, fn), a=rewrite(e.a, fn), b=rewrite(e.b, fn))
    elif isinstance(e, Call):
        e = replace(e, args=tuple(rewrite(a, fn) for a in e.args))
    return fn(e)


def substitute_indices(e: Expr, values: Mapping[str, Expr]) -> Expr:
    """``e`` with each index variable ``values`` names replaced by its value, all at once
    (everywhere, a read's indices too)."""
    return rewrite(e, lambda x: values[x.name] if isinstance(x, Var) and x.kind == "index"
                   and x.name in values else x)


def node_count(e: Expr) -> int:
    """The nodes of ``e``, its reads' indices included."""
    return sum(1 for _ in e.walk())


@dataclass(frozen=True)
class Program:
    """One checked ``def``: its tensors and statements in source order."""

    name: str
    sizes: tuple[str, ...]  # unbound size names (isl parameters), in signature order
    bound: tuple[tuple[str, int], ...]  # sizes fixed at compile time (already substituted)
    inputs: tuple[Tensor, ...]
    outputs: tuple[Tensor, ...]
    locals: tuple[Tensor, ...]
    stmts: tuple[Stmt, ...]
    # Tensors with a recurrence read (reference §5.5); when there are any, the def has value
    # semantics: each element written once, each read gets its element's value.
    recurrent: tuple[str, ...] = ()
    source: str = field(default="", compare=False, repr=False)

    @property
    def value_semantics(self) -> bool:
        return bool(self.recurrent)

    @cached_property
    def tensors(self) -> dict[str, Tensor]:
        """By name (built once per program: the front end asks per statement)."""
        return {t.name: t for t in (*self.inputs, *self.outputs, *self.locals)}

    @property
    def params(self) -> str:
        """The isl parameter list ``[M, N]`` of this program's sets."""
        return f"[{', '.join(self.sizes)}]"

    def __str__(self) -> str:
        head = f"def {self.name}  sizes {list(self.sizes)}  bound {dict(self.bound)}"
        parts = [head, *(f"  {t}" for t in self.tensors.values())]
        parts += [f"  {s}" for s in self.stmts]
        if self.recurrent:
            parts.append(f"  recurrences {', '.join(self.recurrent)} (value semantics)")
        return "\n".join(parts)


def fresh_name(base: str, taken: set[str]) -> str:
    """``base``, or ``base2``, ``base3``... whichever is not in ``taken`` (then it is)."""
    name, n = base, 2
    while name in taken:
        name, n = f"{base}{n}", n + 1
    taken.add(name)
    return name


def unit_tail(t: Tensor) -> int:
    """How many trailing dimensions of ``t`` have extent 1 (a pack by 1 leaves one, a 1x1
    filter has two): its stride-1 dimension is the last one before them."""
    n = 0
    for e in reversed(t.shape):
        try:
            if extent_value(e, {}) != 1:
                break
        except isl.Error:  # an extent of unknown sizes
            break
        n += 1
    return n


def extent_value(extent: str, sizes: Mapping[str, int]) -> int:
    """Evaluate an extent (isl affine text over size names) at concrete sizes."""
    names = tuple(sorted(sizes))
    return _eval_extent(extent, names, tuple(sizes[n] for n in names))


@lru_cache(maxsize=4096)
def _eval_extent(extent: str, names: tuple[str, ...], values: tuple[int, ...]) -> int:
    # The sizes as the text's constraints, which isl's parser substitutes: one constant
    # piece, read without a Point or a Val's text (islpy 2026.2 leaks 30-200 bytes for
    # each of those: 40 MB over 100k calls at new shapes, issue 40).
    fixed = " and ".join(f"{n} = {int(v)}" for n, v in zip(names, values, strict=True))
    pa = isl.PwAff(f"[{', '.join(names)}] -> {{ [({extent})]{' : ' if fixed else ''}{fixed} }}")
    pieces = pa.get_pieces()
    if len(pieces) == 1 and pieces[0][1].is_cst() and pieces[0][1].get_constant_val().is_int():
        return int(pieces[0][1].get_constant_val().get_num_si())
    pa = isl.PwAff(f"[{', '.join(names)}] -> {{ [({extent})] }}")
    space = pa.get_domain_space()
    point = isl.Point.zero(space)
    for i in range(space.dim(isl.dim_type.param)):
        name = space.get_dim_name(isl.dim_type.param, i)
        value = sizes_val(values[names.index(name)])
        point = point.set_coordinate_val(isl.dim_type.param, i, value)
    return pa.eval(point).to_python()


def sizes_val(v: int) -> isl.Val:
    return isl.Val(str(int(v)))
