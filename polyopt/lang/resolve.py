"""Name resolution and typing of expressions: syntax trees to typed ``ir.Expr`` trees."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

from polyopt import dtypes, ir
from polyopt.errors import LanguageError
from polyopt.lang import syntax as S
from polyopt.lang.affine import Lin

Pos = tuple[int, int]

BUILTINS: dict[str, int] = {n: 1 for n in (
    "acos acosh asin asinh atan atanh cbrt ceil cos cosh cospi cyl_bessel_i0 cyl_bessel_i1 "
    "erf erfc erfcinv erfcx erfinv exp exp2 exp10 expm1 fabs floor j0 j1 lgamma log log10 "
    "log1p log2 logb normcdf normcdfinv rcbrt round rsqrt sin sinh sinpi sqrt tan tanh tgamma "
    "trunc y0 y1").split()}
BUILTINS.update({n: 2 for n in (
    "atan2 copysign fdim fdivide fmax fmin fmod hypot nextafter pow remainder rhypot").split()})
BUILTINS.update({"fma": 3, "norm3d": 3, "rnorm3d": 3, "norm4d": 4, "rnorm4d": 4})

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


@dataclass(frozen=True)
class PadInfo:
    widths: tuple[tuple[Lin, Lin], ...]
    fill: float

    def ir(self) -> tuple[ir.Pad, ...]:
        return tuple(ir.Pad(str(lo), str(hi)) for lo, hi in self.widths)


@dataclass
class TensorInfo:
    name: str
    role: str  # "input" | "output" | "local"
    pos: Pos
    dtype: str | None = None  # None: not declared and not yet written
    dims: tuple[Lin, ...] | None = None  # declared dims (inputs; typed outputs/locals)
    rank: int | None = None
    pad: PadInfo | None = None


@dataclass
class DefScope:
    """The def-level names: sizes (with bound values), parameters and tensors."""

    source: str
    sizes: dict[str, Lin]  # every size and parameter: a name (unbound) or its value
    params: set[str]
    tensors: dict[str, TensorInfo]
    written: set[str] = field(default_factory=set)
    targets: set[str] = field(default_factory=set)  # every statement's target, found first
    # Tensors with a recurrence read (reference §5.5): read before their statement, or by it
    # at other indices. A def with any has value semantics (see polyopt.poly.deps).
    recurrent: set[str] = field(default_factory=set)
    # Warnings of statements re-initializing a tensor: TC's accumulation pitfall, but with
    # recurrences (value semantics) a tensor written piecewise.
    reinit: list[tuple[str, Pos]] = field(default_factory=list)

    def error(self, message: str, pos: Pos | None) -> LanguageError:
        return LanguageError(message, self.source, pos)

    def close(self, name: str, candidates: list[str]) -> str:
        near = difflib.get_close_matches(name, candidates, n=3, cutoff=0.6)
        return f"; did you mean {' or '.join(map(repr, near))}?" if near else ""


@dataclass
class StmtScope:
    """The statement-level names: LHS and other index variables, lets, pads."""

    target: str
    lhs: tuple[str, ...]
    index: dict[str, Pos]  # index variable -> first occurrence
    lets: dict[str, int]  # let name -> where-item number
    let_values: dict[str, ir.Expr] = field(default_factory=dict)
    pads: dict[str, PadInfo] = field(default_factory=dict)
    reads: list[ir.Read] = field(default_factory=list)
    item: int = 1 << 30  # the where item being resolved (lets before it are visible)


class Resolver:
    """Resolves one expression tree in ``mode``: "value" (RHS, lets, exists: reads allowed),
    "bound" (where ranges: no reads) or "size" (pad widths: sizes and constants only)."""

    def __init__(self, scope: DefScope, stmt: StmtScope | None, mode: str) -> None:
        self.d = scope
        self.s = stmt
        self.mode = mode

    def expr(self, n: S.Node) -> ir.Expr:
        if isinstance(n, S.Num):
            return self.num(n)
        if isinstance(n, S.Name):
            return self.name(n)
        if isinstance(n, S.Apply):
            return self.apply(n)
        if isinstance(n, S.CastE):
            return ir.Cast(dtypes.TYPE_NAMES[n.type], self.expr(n.arg), pos=n.pos)
        if isinstance(n, S.UnaryE):
            return self.unary(n)
        if isinstance(n, S.BinaryE):
            return self.binary(n)
        assert isinstance(n, S.Ternary)
        c, a, b = self.expr(n.cond), self.expr(n.a), self.expr(n.b)
        self.need_bool(c, "the condition of '?:'")
        return ir.Select(dtypes.promote(a.dtype, b.dtype), c, a, b, pos=n.pos)

    def num(self, n: S.Num) -> ir.Expr:
        if n.is_float:
            return ir.Const("float32", float(n.value), pos=n.pos)
        return ir.Const("int32", int(n.value), pos=n.pos)

    def need_bool(self, e: ir.Expr, what: str) -> None:
        if e.dtype != "bool":
            raise self.d.error(f"{what} must be bool (a comparison), not {e.dtype}", e.pos)

    def unary(self, n: S.UnaryE) -> ir.Expr:
        x = self.expr(n.x)
        if n.op == "!":
            self.need_bool(x, "the operand of '!'")
            return ir.Unary("bool", "!", x, pos=n.pos)
        if isinstance(x, ir.Const) and not isinstance(x.value, bool):
            return ir.Const(x.dtype, -x.value, pos=n.pos)
        return ir.Unary(x.dtype, "-", x, pos=n.pos)

    def binary(self, n: S.BinaryE) -> ir.Expr:
        a, b = self.expr(n.a), self.expr(n.b)
        if n.op in ("&&", "||"):
            self.need_bool(a, f"the operands of '{n.op}'")
            self.need_bool(b, f"the operands of '{n.op}'")
            return ir.Binary("bool", n.op, a, b, pos=n.pos)
        if n.op in ("<", ">", "<=", ">=", "==", "!="):
            return ir.Binary("bool", n.op, a, b, pos=n.pos)
        return ir.Binary(dtypes.promote(a.dtype, b.dtype), n.op, a, b, pos=n.pos)

    # ------------------------------------------------------------ names

    def name(self, n: S.Name) -> ir.Expr:
        s, name = self.s, n.id
        if s is not None and self.mode != "size":
            if name in s.index:
                s.index[name] = min(s.index[name], n.pos)
                return ir.Var("int32", name, "index", pos=n.pos)
            if name in s.lets:
                return self.let(n)
        if name in self.d.sizes:
            v = self.d.sizes[name]
            if v.is_const:
                return ir.Const("int32", v.const, pos=n.pos)
            return ir.Var("int32", name, "size", pos=n.pos)
        t = self.d.tensors.get(name)
        if t is not None:
            if t.rank:
                raise self.d.error(f"tensor '{name}' has rank {t.rank}; index it as "
                                   f"{name}({', '.join('…' for _ in range(t.rank))})", n.pos)
            return self.read(S.Apply(n.pos, name, ()), t)
        if s is None or self.mode == "size":
            raise self.d.error(f"unknown size '{name}' (pad widths and dims are expressions "
                               "in sizes and <...> parameters)"
                               + self.d.close(name, list(self.d.sizes)), n.pos)
        s.index[name] = n.pos  # TC: an unknown name is a new index variable
        return ir.Var("int32", name, "index", pos=n.pos)

    def let(self, n: S.Name) -> ir.Expr:
        s = self.s
        assert s is not None
        if s.lets[n.id] >= s.item:
            raise self.d.error(f"let '{n.id}' is used before its definition", n.pos)
        value = s.let_values[n.id]
        if self.mode == "bound" and any(isinstance(x, ir.Read) for x in value.walk()):
            raise self.d.error(f"a where bound cannot read a tensor (let '{n.id}' does)",
                               n.pos)
        return value

    # ------------------------------------------------------------ calls and reads

    def apply(self, n: S.Apply) -> ir.Expr:
        t = self.d.tensors.get(n.fn)
        if t is not None:
            return self.read(n, t)
        if n.fn in BUILTINS:
            if len(n.args) != BUILTINS[n.fn]:
                raise self.d.error(f"builtin '{n.fn}' takes {BUILTINS[n.fn]} argument(s), "
                                   f"got {len(n.args)}", n.pos)
            args = tuple(self.expr(a) for a in n.args)
            return ir.Call(dtypes.promote("float32", *(a.dtype for a in args)), n.fn, args,
                           pos=n.pos)
        s = self.s
        if n.fn in self.d.sizes or (s is not None and (n.fn in s.index or n.fn in s.lets)):
            raise self.d.error(f"'{n.fn}' is not a tensor or a function and cannot be called",
                               n.pos)
        names = [*self.d.tensors, *BUILTINS]
        raise self.d.error(f"unknown tensor or function '{n.fn}'" + self.d.close(n.fn, names),
                           n.pos)

    def read(self, n: S.Apply, t: TensorInfo) -> ir.Expr:
        if self.mode != "value":
            what = "a where bound" if self.mode == "bound" else "a size expression"
            raise self.d.error(f"{what} cannot read a tensor ('{t.name}')", n.pos)
        s = self.s
        assert s is not None
        if t.role != "input" and t.name not in self.d.written:
            self.forward_read(n, t)
        rank = t.rank or 0
        if len(n.args) != rank:
            raise self.d.error(f"'{t.name}' has rank {rank} but is read with {len(n.args)} "
                               "indices", n.pos)
        idx = tuple(self.expr(a) for a in n.args)
        for e in idx:
            if not dtypes.get(e.dtype).is_integral:
                raise self.d.error(f"a tensor index must be integral, not {e.dtype}", e.pos)
        if t.name == s.target:
            self.check_self_read(n, idx)
        pad = s.pads.get(t.name, t.pad)
        assert t.dtype is not None
        r = ir.Read(t.dtype, t.name, idx, None if pad is None else pad.ir(),
                    0.0 if pad is None else pad.fill, pos=n.pos)
        s.reads.append(r)
        return r

    def forward_read(self, n: S.Apply, t: TensorInfo) -> None:
        """A read of ``t`` before any statement wrote it: a recurrence when a statement
        (this one or a later one) writes ``t`` and its type and shape are declared."""
        if t.name not in self.d.targets:
            raise self.d.error(f"reading '{t.name}' before it is defined (no statement "
                               "writes it)", n.pos)
        if t.dtype is None or t.dims is None:
            raise self.d.error(f"reading '{t.name}' before it is defined: a recurrence (a "
                               f"read before the statement that writes it) needs the type "
                               f"and shape of '{t.name}' declared, e.g. "
                               f"local (float(N) {t.name})", n.pos)
        self.d.recurrent.add(t.name)

    def check_self_read(self, n: S.Apply, idx: tuple[ir.Expr, ...]) -> None:
        s = self.s
        assert s is not None
        ok = all(isinstance(e, ir.Var) and e.kind == "index" and e.name == v
                 for e, v in zip(idx, s.lhs, strict=True))
        if ok:
            return
        t = self.d.tensors[s.target]
        if t.dtype is None or (t.dims is None and t.name not in self.d.written):
            want = f"{s.target}({', '.join(s.lhs)})" if s.lhs else s.target
            raise self.d.error(f"a statement reads its own target at other indices than the "
                               f"LHS ones ({want}): a recurrence, which needs the type and "
                               f"shape of '{t.name}' declared (or fixed by an earlier "
                               f"statement), e.g. local (float(T,N) {t.name})", n.pos)
        self.d.recurrent.add(t.name)
