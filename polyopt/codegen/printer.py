"""isl AST → C source: one printer; targets differ by their Dialect.

The function it prints follows the calling convention of ``polyopt.codegen.contract``. A
specialized kernel bakes sizes and extents in as constants and ignores ``dims``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import islpy as isl

from polyopt import ir
from polyopt.codegen import linear, microkernel, transpose
from polyopt.codegen.ast import Ast, loop_is_parallel, loop_printed
from polyopt.codegen.builtins import PRELUDE
from polyopt.codegen.contract import KernelSource
from polyopt.codegen.exprs import C_TYPES, AstExprPrinter, RhsPrinter, Types, cname
from polyopt.codegen.linear import ast_lin
from polyopt.dtypes import DTYPES, identity
from polyopt.errors import CodegenError
from polyopt.poly.model import PolyProgram, PolyStmt, affine_text
from polyopt.schedule.contraction import MAX_SLICE_BYTES, slice_bytes
from polyopt.schedule.machine import Machine, host
from polyopt.schedule.marks import Marks, Tag, bind_of, marked_loop


class Dialect:
    """C with OpenMP. Other targets override these attributes and a few methods."""

    name = "c"
    prelude = "#define _GNU_SOURCE\n#define PO_FN static inline" + PRELUDE
    function_qualifier = ""
    restrict = "restrict"
    parallel_pragma = "#pragma omp parallel for"
    simd_pragma = "#pragma omp simd"
    vector_bytes = 0  # register tiles use vectors this wide (0: plain loops)
    types: Types = C_TYPES  # bfloat16 as bits; C computes on _Float16 natively

    def function_header(self, symbol: str) -> str:
        return (f"{self.function_qualifier}int {symbol}(void **bufs, const long *dims, "
                f"long *err)")

    def loop_header(self, it: str, init: str, cond: str, inc: str,
                    tags: Marks) -> str:
        """The ``for`` line of an AST loop (the loop's ``tags`` may change how it runs)."""
        return f"for (long {it} = {init}; {cond}; {it} += {inc})"


def host_dialect() -> Dialect:
    """C for this machine: register tiles as wide as its vector registers."""
    return dialect_for(host())


def dialect_for(machine: Machine) -> Dialect:
    """C for ``machine``: register tiles as wide as its vector registers."""
    out = Dialect()
    out.vector_bytes = machine.vector_bytes
    return out


@dataclass
class _Context:
    poly: PolyProgram
    values: dict[str, int] | None  # concrete sizes and extents when specialized
    gathers: list[str] = field(default_factory=list)
    contracted: dict[str, tuple[str, int]] = field(default_factory=dict)  # -> (loop, dim)
    helpers: dict[str, str] = field(default_factory=dict)  # C functions the body calls
    types: Types = C_TYPES


def render(ast: Ast, dialect: Dialect | None = None, *, specialized: bool) -> KernelSource:
    """The source of one kernel for ``ast``."""
    dialect = dialect or host_dialect()
    pp = ast.poly
    program = pp.program
    symbol = cname("tensor", program.name).replace("t_", "polyopt_", 1)
    buffers = tuple(program.tensors)
    dims = tuple(program.sizes) + tuple(
        f"{t.name}.{d}" for t in program.tensors.values() for d in range(t.rank))
    ctx = _Context(pp, _specialized_values(program) if specialized else None,
                   types=dialect.types)
    ctx.contracted = _slices(ast, ctx)
    body = _Body(ctx, dialect, ast.tags, ast.trips, ast.padded).node(ast.root, 1,
                                                                     in_parallel=False)
    helpers = [transpose.SHUFFLE_CHECK, *ctx.helpers.values()] if ctx.helpers else []
    lines = [dialect.prelude, *helpers, dialect.function_header(symbol) + " {"]
    lines += _declarations(ctx, dialect, dims)
    lines += body
    lines += ["  (void)dims; (void)err;", "  return 0;", "}", ""]
    return KernelSource(program.name, symbol, "\n".join(lines), buffers, dims,
                        tuple(ctx.gathers), specialized, dialect.name, tuple(ctx.contracted))


def _specialized_values(program: ir.Program) -> dict[str, int]:
    if program.sizes:
        raise CodegenError(f"cannot specialize def '{program.name}': sizes "
                           f"{', '.join(program.sizes)} are unbound")
    return {f"{t.name}.{d}": ir.extent_value(e, {})
            for t in program.tensors.values() for d, e in enumerate(t.shape)}


def _slices(ast: Ast, ctx: _Context) -> dict[str, tuple[str, int]]:
    """The contractions that fit: a specialized kernel, a slice small enough for a stack."""
    if ctx.values is None:
        return {}
    return {tensor: (loop, dim) for tensor, loop, dim in ast.contractions
            if slice_bytes(ctx.poly, tensor, dim, ctx.values) <= MAX_SLICE_BYTES}


def _declarations(ctx: _Context, dialect: Dialect, dims: tuple[str, ...]) -> list[str]:
    program = ctx.poly.program
    out = []
    for i, t in enumerate(program.tensors.values()):
        const = "const " if t.role == "input" else ""
        c = dialect.types.storage(t.dtype)
        out.append(f"  {const}{c} *{dialect.restrict} {cname('tensor', t.name)} = "
                   f"({const}{c} *)bufs[{i}];")
    for i, d in enumerate(dims):
        if "." in d:
            tensor, k = d.split(".")
            var = f"{cname('extent', tensor)}_{k}"
            value = f"{ctx.values[d]}L" if ctx.values is not None else f"dims[{i}]"
        else:
            var, value = cname("size", d), f"dims[{i}]"
        out.append(f"  const long {var} = {value};")
    return out


class _Body:
    """Walks the isl AST and prints loops, guards and statement instances."""

    def __init__(self, ctx: _Context, dialect: Dialect, tags: dict[str, Marks],
                 trips: dict[str, int | None], padded: frozenset[str]) -> None:
        self.padded = padded
        self.ctx = ctx
        self.dialect = dialect
        self.tags = tags
        self.trips = trips
        self.ast_expr = AstExprPrinter(frozenset(ctx.poly.program.sizes))

    def node(self, node: isl.AstNode, depth: int, in_parallel: bool,
             loop: str = "") -> list[str]:
        kind = node.get_type()
        if kind == isl.ast_node_type.block:
            kids = node.block_get_children()
            out: list[str] = []
            for i in range(kids.n_ast_node()):  # pieces of one marked loop keep its name
                out += self.node(kids.get_at(i), depth, in_parallel, loop)
            return out
        if kind == isl.ast_node_type.for_:
            return self._for(node, depth, in_parallel, loop)
        if kind == isl.ast_node_type.if_:
            return self._if(node, depth, in_parallel, loop)
        if kind == isl.ast_node_type.mark:
            name = marked_loop(node) or ""
            inner = node.mark_get_node()
            slices = self._slice_decls(name, depth + 1)
            if slices and not loop_printed(inner):  # its slices still need a scope
                pad = "  " * depth
                body = self.node(inner, depth + 1, in_parallel, name)
                return [f"{pad}{{", *slices, *body, f"{pad}}}"]
            return self.node(inner, depth, in_parallel, name)
        if kind == isl.ast_node_type.user:
            return self._user(node.user_get_expr(), depth)
        raise CodegenError(f"unsupported isl AST node type {kind}")

    def _for(self, node: isl.AstNode, depth: int, in_parallel: bool, loop: str,
             plain: bool = False) -> list[str]:
        pad = "  " * depth
        tags = self.tags.get(loop, frozenset())
        tile = None if plain else (self._register_tile(node, depth, in_parallel, loop)
                                   or self._transpose(node, depth, in_parallel, loop))
        if tile is None and Tag.VECTORIZE in tags and not node.for_is_degenerate():
            tile = self._reduction(node, depth)
        if tile is not None:
            return tile
        it = self.ast_expr.expr(node.for_get_iterator())
        init = self.ast_expr.expr(node.for_get_init(), top=True)
        if node.for_is_degenerate():
            body = self.node(node.for_get_body(), depth + 1, in_parallel)
            return [f"{pad}{{", f"{pad}  const long {it} = {init};",
                    *self._slice_decls(loop, depth + 1), *body, f"{pad}}}"]
        cond = self.ast_expr.expr(node.for_get_cond(), top=True)
        inc = self.ast_expr.expr(node.for_get_inc(), top=True)
        out = []
        parallel = not in_parallel and Tag.PARALLEL in tags
        bound = bind_of(tags)
        if (parallel or bound) and not loop_is_parallel(node):  # the verb's check and the
            label = "parallel" if parallel else f"bound to {bound}"  # AST's disagree
            raise CodegenError(f"loop {loop} is {label} but carries a dependence")
        simd = Tag.VECTORIZE in tags and self.dialect.simd_pragma
        if parallel and self.dialect.parallel_pragma:
            out.append(self.dialect.parallel_pragma + (" simd" if simd else ""))
        elif simd:
            out.append(self.dialect.simd_pragma)
        note = f"  /* {loop} */" if loop else ""
        hoisted: list[str] = []
        inner: list[str] | None = None
        if simd:
            hoisted, inner = self._hoisted(node, depth)
        out.append(f"{pad}{self.dialect.loop_header(it, init, cond, inc, tags)} {{{note}")
        out += self._slice_decls(loop, depth + 1)
        out += inner if inner is not None else self.node(node.for_get_body(), depth + 1,
                                                          in_parallel or parallel)
        out.append(f"{pad}}}")
        if hoisted:  # the pragma must stay right above its loop
            return [f"{pad}{{", *hoisted, *out, f"{pad}}}"]
        return out

    def _slice_decls(self, loop: str, depth: int) -> list[str]:
        """The slices of contracted locals that this loop keeps, one per iteration."""
        out = []
        for tensor, (owner, dim) in self.ctx.contracted.items():
            if owner == loop and loop:
                t = self.ctx.poly.program.tensors[tensor]
                size = slice_bytes(self.ctx.poly, tensor, dim, self.ctx.values or {})
                elems = size // DTYPES[t.dtype].np.itemsize
                c = self.ctx.types.storage(t.dtype)
                out.append(f"{'  ' * depth}{c} po_slice_{tensor}[{elems}];")
        return out

    def _hoisted(self, node: isl.AstNode, depth: int) -> tuple[list[str], list[str] | None]:
        """Operands of a vector loop's one statement that do not move with the loop, loaded
        once before it (GCC's PRE otherwise can leave them in a form it cannot vectorize)."""
        call = microkernel.only_user(node.for_get_body())
        if call is None:
            return [], None
        s = self.ctx.poly.stmt(call.get_op_arg(0).get_id().get_name())
        args = [call.get_op_arg(i + 1) for i in range(call.get_op_n_arg() - 1)]
        it = node.for_get_iterator().get_id().get_name()
        fixed = microkernel.invariant_reads(s, args, it)
        if not fixed:
            return [], None
        sp = StmtPrinter(self.ctx, s)
        pad = "  " * (depth + 1)
        lines = []
        for n, (read, dims) in enumerate(fixed):
            t = self.ctx.poly.program.tensors[read.tensor]
            index = [linear.text(d, self.ast_expr.ident) for d in dims]
            value = self.ctx.types.load(t.dtype, f"{sp.ref(t)}[{sp.flat(t, index)}]")
            lines.append(f"{pad}const {self.ctx.types.value(t.dtype)} po_h{n} = {value};")
            sp.preloaded[id(read)] = f"po_h{n}"
        texts = [self.ast_expr.expr(a, top=True) for a in args]
        return lines, sp.lines(texts, "  " * (depth + 1))

    def _reduction(self, node: isl.AstNode, depth: int) -> list[str] | None:
        """A vectorized reduction loop: the element it accumulates into stays in a local
        that OpenMP's ``simd reduction`` gives each lane a copy of."""
        call = microkernel.only_user(node.for_get_body())
        if call is None or not self.dialect.simd_pragma:
            return None
        s = self.ctx.poly.stmt(call.get_op_arg(0).get_id().get_name())
        t = self.ctx.poly.program.tensors[s.stmt.tensor]
        op = OMP_REDUCTION.get(s.stmt.op)
        if op is None or not s.accumulates or t.dtype not in ("float32", "float64") or not all(
                r.affine for r in s.reads):
            return None
        it = node.for_get_iterator().get_id().get_name()
        args = [call.get_op_arg(i + 1) for i in range(call.get_op_n_arg() - 1)]
        where = dict(zip(s.iters, args, strict=True))
        if any(it in (ast_lin(where[i]) or {it: 1}) for i in s.stmt.lhs):
            return None  # the target moves with the loop: not a reduction over it
        pad = "  " * depth
        sp = StmtPrinter(self.ctx, s)
        binds = [f"{pad}  const long {cname('index', i)} = "
                 f"{self.ast_expr.expr(where[i], top=True)};" for i in s.stmt.lhs]
        target = sp.target(t)
        head = (f"{pad}  for (long {it} = {self.ast_expr.expr(node.for_get_init(), top=True)}; "
                f"{self.ast_expr.expr(node.for_get_cond(), top=True)}; {it} += "
                f"{self.ast_expr.expr(node.for_get_inc(), top=True)}) {{")
        texts = [self.ast_expr.expr(a, top=True) for a in args]
        # OpenMP combines the lanes' min/max as it likes, which may drop a NaN that one lane
        # holds (po_min/po_max keep it within a lane): a flag carries it across lanes.
        nan, c = s.stmt.op in ("min", "max"), self.ctx.types.value(t.dtype)
        flag = ([f"{pad}  int po_nan = 0;"], " reduction(|:po_nan)",
                [f"{pad}    po_nan |= po_acc != po_acc;"],
                f"po_nan ? ({c})NAN : po_acc") if nan else ([], "", [], "po_acc")
        return [f"{pad}{{ /* reduction of {s.name} */", *binds,
                f"{pad}  {c} po_acc = {target};", *flag[0],
                f"{pad}{self.dialect.simd_pragma} reduction({op}:po_acc){flag[1]}", head,
                *sp.lines(texts, pad + "    ", accumulator="po_acc"), *flag[2], f"{pad}  }}",
                f"{pad}  {target} = {flag[3]};", f"{pad}}}"]

    def _register_tile(self, node: isl.AstNode, depth: int, in_parallel: bool,
                       loop: str) -> list[str] | None:
        """A register-tile micro-kernel for full tiles, plain loops for partial ones."""
        if self.dialect.vector_bytes <= 0:
            return None
        tile = microkernel.match(node, self.tags, self.trips, self.ctx.poly.stmt)
        if tile is None:
            return None
        t = self.ctx.poly.program.tensors[tile.stmt.stmt.tensor]
        sp = StmtPrinter(self.ctx, tile.stmt)
        emitter = microkernel.Emitter(tile, sp, self.ast_expr, t.dtype, self.dialect.vector_bytes)
        pad = "  " * depth
        full = emitter.full_tile()
        lines = None if full is None else emitter.lines(pad + "  ")
        if full is None or lines is None:
            return None
        edge = emitter.edge_lines(pad + "  ", self.padded)
        rest = edge if edge is not None else self._for(node, depth + 1, in_parallel, loop,
                                                       plain=True)
        return [f"{pad}if ({full}) {{", *lines, f"{pad}}} else {{", *rest, f"{pad}}}"]

    def _transpose(self, node: isl.AstNode, depth: int, in_parallel: bool,
                   loop: str) -> list[str] | None:
        """A transposing copy in vector registers for whole tiles, plain loops otherwise."""
        if self.dialect.vector_bytes <= 0:
            return None
        tp = transpose.match(node, self.tags, self.trips, loop, self.ctx.poly.stmt)
        if tp is None:
            return None
        dtype = self.ctx.poly.program.tensors[tp.stmt.stmt.tensor].dtype
        pad = "  " * depth
        # One run over flattened rows when the strides allow; else unrolled blocks of a tile.
        for kind in (transpose.NestEmitter, *(() if tp.outer else (transpose.Emitter,))):
            emitter = kind(tp, StmtPrinter(self.ctx, tp.stmt), self.ast_expr, dtype,
                           self.dialect.vector_bytes)
            full = emitter.full_tile()
            lines = None if full is None else emitter.lines(pad + "  ")
            if full is not None and lines is not None:
                break
        if full is None or lines is None:
            return None
        self.ctx.helpers[transpose.helper_name(dtype, emitter.lanes)] = transpose.helper(
            dtype, emitter.lanes)
        if not full:  # every instance is whole
            return lines
        plain = self._for(node, depth + 1, in_parallel, loop, plain=True)
        return [f"{pad}if ({full}) {{", *lines, f"{pad}}} else {{", *plain, f"{pad}}}"]

    def _if(self, node: isl.AstNode, depth: int, in_parallel: bool, loop: str) -> list[str]:
        pad = "  " * depth
        cond = self.ast_expr.expr(node.if_get_cond(), top=True)
        out = [f"{pad}if ({cond}) {{",
               *self.node(node.if_get_then_node(), depth + 1, in_parallel, loop)]
        if node.if_has_else_node():
            out += [f"{pad}}} else {{",
                    *self.node(node.if_get_else_node(), depth + 1, in_parallel, loop)]
        return [*out, f"{pad}}}"]

    def _user(self, call: isl.AstExpr, depth: int) -> list[str]:
        name = call.get_op_arg(0).get_id().get_name()
        s = self.ctx.poly.stmt(name)
        args = [self.ast_expr.expr(call.get_op_arg(i + 1), top=True)
                for i in range(call.get_op_n_arg() - 1)]
        return StmtPrinter(self.ctx, s).lines(args, "  " * depth)


# TC reduction operators → OpenMP reduction identifiers.
OMP_REDUCTION = {"+": "+", "*": "*", "min": "min", "max": "max"}


class StmtPrinter:
    """One statement instance: binds its iterators, runs gather checks, stores the value."""

    def __init__(self, ctx: _Context, s: PolyStmt) -> None:
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

    def lines(self, args: list[str], pad: str, accumulator: str | None = None) -> list[str]:
        """One instance; with ``accumulator``, an update combines into that local instead
        of into its target."""
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
        else:
            value = self._value(current, t.dtype)
        store = f"{target} = {value if accumulator else ty.store(t.dtype, value)};"
        inner = [*self.hoisted, store]
        if self.hoisted:  # gather checks leave the instance with ``break``
            inner = ["do {", *(f"  {x}" for x in inner), "} while (0);"]
        return [f"{pad}{{ /* {s.name} */", *(f"{pad}  {x}" for x in binds + inner), f"{pad}}}"]

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
            cond = " && ".join(f"0 <= {ix} && {ix} < {cname('extent', t.name)}_{d}"
                               for d, ix in enumerate(index))
            return (f"(({cond}) ? {self.ctx.types.load(t.dtype, access)} : "
                    f"{self.ctx.types.literal(read.fill, t.dtype)})")
        return self.ctx.types.load(t.dtype, access)

    def _affine(self, read: ir.Read) -> bool:
        return all(r.affine for r in self.s.reads if r.read is read)

    def _checked(self, read: ir.Read, t: ir.Tensor, index: list[str],
                 pad: tuple[tuple[str, str], ...] | None) -> list[str]:
        """Hoist each index into a variable, reporting values outside the (padded) extent."""
        gid = len(self.ctx.gathers)
        self.ctx.gathers.append(f"{read} in statement {self.s.stmt.name}")
        out = []
        for d, ix in enumerate(index):
            var = f"g_{gid}_{d}_{len(self.hoisted)}"
            ext = f"{cname('extent', t.name)}_{d}"
            lo, hi = ("0", ext) if pad is None else (
                f"-({self._size_expr(pad[d][0])})", f"{ext} + ({self._size_expr(pad[d][1])})")
            self.hoisted += [
                f"const long {var} = {ix};",
                f"if ({var} < {lo} || {var} >= {hi}) {{ err[0] = 1; err[1] = {gid}; "
                f"err[2] = {var}; err[3] = {d}; break; }}"]
            out.append(var)
        return out

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
        text = affine_text(e.a)
        if text is None:
            return False
        space = self.s.domain.get_space()
        iters = ", ".join(str(space.get_dim_name(isl.dim_type.set, d))
                          for d in range(space.dim(isl.dim_type.set)))
        program = self.ctx.poly.program
        try:
            pa = isl.PwAff(f"{program.params} -> {{ {self.s.name}[{iters}] -> [({text})] }}")
            low = pa.intersect_domain(self.s.domain).min_val()
        except isl.Error:
            return False
        return bool(low.is_int() and not low.is_neg())

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
