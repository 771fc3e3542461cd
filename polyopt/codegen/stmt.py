"""One statement instance as C: its iterators bound, its reads loaded (checked where they
gather by data), its value combined and stored; and the context every statement and loop of
a kernel prints against."""

from __future__ import annotations

from dataclasses import dataclass, field

import islpy as isl

from polyopt import ir
from polyopt.codegen.exprs import C_TYPES, AstExprPrinter, RhsPrinter, Types, cname
from polyopt.dtypes import DTYPES, identity
from polyopt.errors import CodegenError
from polyopt.poly.model import PolyProgram, PolyStmt
from polyopt.poly.proofs import never_negative


@dataclass
class KernelContext:
    """What every statement and loop of one kernel prints against (shared, mutable while
    the kernel is printed: the gathers, contracted slices and helpers it collects)."""

    poly: PolyProgram
    values: dict[str, int] | None  # concrete sizes and extents when specialized
    gathers: list[str] = field(default_factory=list)
    contracted: dict[str, tuple[str, int]] = field(default_factory=dict)  # -> (loop, dim)
    modulo: dict[str, tuple[int, int]] = field(default_factory=dict)  # -> (dim, modulus)
    # "T.d" -> the declared extent of a dimension stored modulo: its range checks compare
    # with it (``values`` holds the modulus, the extent addresses use)
    logical: dict[str, int] = field(default_factory=dict)
    helpers: dict[str, str] = field(default_factory=dict)  # C functions the body calls
    types: Types = C_TYPES
    # a register tile keeps a rolled loop inside another (filter taps): the kernel's
    # function is compiled without GCC's predictive commoning (``Dialect.function_header``)
    nested_tile_loops: bool = False


def specialized_values(program: ir.Program) -> dict[str, int]:
    """Every tensor extent's value, for a kernel that bakes them in as constants."""
    if program.sizes:
        raise CodegenError(f"cannot specialize def '{program.name}': sizes "
                           f"{', '.join(program.sizes)} are unbound")
    return {f"{t.name}.{d}": ir.extent_value(e, {})
            for t in program.tensors.values() for d, e in enumerate(t.shape)}



class StmtPrinter:
    """One statement instance: binds its iterators, runs gather checks, stores the value."""

    def __init__(self, ctx: KernelContext, s: PolyStmt) -> None:
        self.ctx = ctx
        self.s = s
        self.hoisted: list[str] = []
        self.rhs = RhsPrinter(self._load, ctx.types)
        self.env: dict[str, str] = {}  # index variables printed as expressions
        self.preloaded: dict[int, str] = {}  # id(read) -> a local holding its value

    def target(self, t: ir.Tensor) -> str:
        """The element this statement writes, over its bound LHS iterators."""
        lhs = [cname("index", i) for i in self.s.stmt.lhs]
        return f"{self.ref(t)}[{self.flat(t, lhs)}]"

    def lines(self, args: list[str], pad: str, accumulator: str | None = None,
              nan_flag: str | None = None) -> list[str]:
        """One instance; with ``accumulator``, an update combines into that local instead
        of into its target; with ``nan_flag`` too, a float ``min``/``max`` combines by a
        plain comparison (``vminps``/``vmaxps``) and ORs whether the value is NaN into that
        local (``reduction_lines``)."""
        s, stmt = self.s, self.s.stmt
        binds = [f"const long {cname('index', it)} = {a};" for it, a in zip(s.iters, args,
                                                                              strict=True)]
        t, ty = self.ctx.poly.program.tensors[stmt.tensor], self.ctx.types
        target, current = self.target(t), ty.load(t.dtype, self.target(t))
        if accumulator is not None:  # a local of the value type
            binds = [b for b, it in zip(binds, s.iters, strict=True) if it not in stmt.lhs]
            target = current = accumulator
        if s.kind == "init":
            value = ty.literal(identity(stmt.op, t.dtype), t.dtype)
        elif accumulator is not None and nan_flag is not None:
            value = ""
        else:
            value = self._value(current, t.dtype)
        if value:
            store = [f"{target} = {value if accumulator else ty.store(t.dtype, value)};"]
        else:
            assert accumulator is not None and nan_flag is not None
            store = self.reduction_lines(accumulator, nan_flag, t.dtype)
        inner = [*self.hoisted, *store]
        if self.hoisted:  # gather checks leave the instance with ``break``
            inner = ["do {", *(f"  {x}" for x in inner), "} while (0);"]
        return [f"{pad}{{ /* {s.name} */", *(f"{pad}  {x}" for x in binds + inner), f"{pad}}}"]

    def reduction_lines(self, acc: str, flag: str, dtype: str) -> list[str]:
        """A float ``min``/``max`` update of the local ``acc``: a comparison that keeps
        ``acc`` when the value is NaN (x86's ``vmaxps``/``vminps``, one instruction on the
        loop-carried chain) and ``flag |= value is NaN`` off that chain. ``po_max``'s NaN test
        on the accumulator puts a compare, a mask OR and a blend on the chain instead: 17.9
        ms against 4.0 for torch on ``max_axis2`` 64x512x512 (polyopt/bench/suite.py)."""
        stmt = self.s.stmt
        rhs = self.rhs.cast(stmt.rhs, dtype)
        cmp = ">" if stmt.op == "max" else "<"
        return [f"const {self.ctx.types.value(dtype)} po_x = {rhs};",
                f"{acc} = po_x {cmp} {acc} ? po_x : {acc};", f"{flag} |= po_x != po_x;"]

    def _value(self, current: str, dtype: str) -> str:
        """The value stored: the right-hand side, combined with ``current`` by an update."""
        stmt, ty = self.s.stmt, self.ctx.types
        rhs = self.rhs.cast(stmt.rhs, dtype)
        if stmt.op == "=":
            return rhs
        if stmt.op in ("min", "max"):
            return f"po_{stmt.op}_{ty.arith(dtype)}({current}, {rhs})"
        return f"(({ty.value(dtype)})({current} {stmt.op} {rhs}))"

    def flat(self, t: ir.Tensor, index: list[str]) -> str:
        dims = list(range(t.rank))
        if t.name in self.ctx.contracted:  # one slice: the contracted index is implicit
            dims.remove(self.ctx.contracted[t.name][1])
        if not dims:
            return "0"
        if t.name in self.ctx.modulo:  # stored modulo a distance along one dimension
            d, m = self.ctx.modulo[t.name]
            index = [*index[:d], "0" if m == 1 else f"(({index[d]}) % {m})", *index[d + 1:]]
        flat = f"({index[dims[0]]})"
        for d in dims[1:]:
            flat = f"({flat} * {cname('extent', t.name)}_{d} + ({index[d]}))"
        return flat

    def ref(self, t: ir.Tensor) -> str:
        """The C array holding ``t``: its buffer, or the slice a loop keeps of it."""
        return f"po_slice_{t.name}" if t.name in self.ctx.contracted else cname("tensor", t.name)

    def _load(self, read: ir.Read) -> str:
        if id(read) in self.preloaded:
            return self.preloaded[id(read)]
        t = self.ctx.poly.program.tensors[read.tensor]
        index = [self._index(ix) for ix in read.indices]
        if not self._affine(read):
            index = self._checked(read, t, index, read.pad)
        access = f"{self.ref(t)}[{self.flat(t, index)}]"
        if read.pad is not None and self.s.guarded:
            cond = " && ".join(f"0 <= {ix} && {ix} < {self.checked_extent(t, d)}"
                               for d, ix in enumerate(index))
            return (f"(({cond}) ? {self.ctx.types.load(t.dtype, access)} : "
                    f"{self.ctx.types.literal(read.fill, t.dtype)})")
        return self.ctx.types.load(t.dtype, access)

    def _affine(self, read: ir.Read) -> bool:
        return all(r.affine for r in self.s.reads if r.read is read)

    def _checked(self, read: ir.Read, t: ir.Tensor, index: list[str],
                 pad: tuple[ir.Pad, ...] | None) -> list[str]:
        """Hoist each index into a variable, reporting values outside the (padded) extent."""
        gid = len(self.ctx.gathers)
        self.ctx.gathers.append(f"{read} in statement {self.s.stmt.name}")
        out = []
        for d, ix in enumerate(index):
            var = f"g_{gid}_{d}_{len(self.hoisted)}"
            ext = self.checked_extent(t, d)
            lo, hi = ("0", ext) if pad is None else (f"-({self._size_expr(pad[d].before)})",
                                                     f"{ext} + ({self._size_expr(pad[d].after)})")
            self.hoisted += [
                f"const long {var} = {ix};",
                f"if ({var} < {lo} || {var} >= {hi}) {{ err[0] = 1; err[1] = {gid}; "
                f"err[2] = {var}; err[3] = {d}; break; }}"]
            out.append(var)
        return out

    def checked_extent(self, t: ir.Tensor, d: int) -> str:
        """The extent an index of ``t``'s dimension ``d`` is checked against: the declared
        one, also where storage keeps fewer planes (``schedules/storage.py``): plane ``T-1``
        of a ``(T, N)`` local stored as ``(2, N)`` is in range, at address ``(T-1) % 2``."""
        logical = self.ctx.logical.get(f"{t.name}.{d}")
        return f"{logical}L" if logical is not None else f"{cname('extent', t.name)}_{d}"

    def _size_expr(self, text: str) -> str:
        """A padding width (isl affine text over sizes) as C, through isl's AST builder."""
        program = self.ctx.poly.program
        pa = isl.PwAff(f"{program.params} -> {{ [({text})] }}")
        build = isl.AstBuild.from_context(self.ctx.poly.context)
        return AstExprPrinter(frozenset(program.sizes)).expr(build.expr_from_pw_aff(pa))

    def _natural(self, e: ir.Binary) -> bool:
        """A positive constant divisor of a dividend that is never negative in this
        statement's domain (isl proves it), where C's truncating ``/`` and ``%`` are TC's."""
        if not (isinstance(e.b, ir.Const) and isinstance(e.b.value, int) and e.b.value > 0):
            return False
        return never_negative(self.ctx.poly, self.s, e.a)

    def _index(self, e: ir.Expr) -> str:
        """An integral index expression as C ``long`` arithmetic (floor ``/`` and ``%``)."""
        if isinstance(e, ir.Const):
            return f"{int(e.value)}L"
        if isinstance(e, ir.Var):
            return self.env.get(e.name) or cname(e.kind, e.name)
        if isinstance(e, ir.Cast) and not DTYPES[e.dtype].is_float:
            if DTYPES[e.x.dtype].is_float:
                return f"((long){self.rhs.cast(e.x, e.dtype)})"
            return self._index(e.x)
        if isinstance(e, ir.Unary) and e.op == "-":
            return f"(-{self._index(e.x)})"
        if isinstance(e, ir.Binary) and e.op in ("+", "-", "*"):
            return f"({self._index(e.a)} {e.op} {self._index(e.b)})"
        if isinstance(e, ir.Binary) and e.op in ("/", "%") and self._natural(e):
            return f"({self._index(e.a)} {e.op} {self._index(e.b)})"  # C's / and % agree
        if isinstance(e, ir.Binary) and e.op in ("/", "%", "min", "max"):
            fn = {"/": "div", "%": "mod"}.get(e.op, e.op)
            return f"po_{fn}_int64({self._index(e.a)}, {self._index(e.b)})"
        return f"((long)({self.rhs.expr(e)}))"
