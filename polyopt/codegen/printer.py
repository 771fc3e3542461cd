"""isl AST → C source: one printer; targets differ by their Dialect.

The function it prints follows the calling convention of ``polyopt.codegen.contract``. A
specialized kernel bakes sizes and extents in as constants and ignores ``dims``. The walker
is ``polyopt.codegen.walker``'s, with the C micro-kernels (``microkernel``, ``transpose``)
plugged in at its extension points.
"""

from __future__ import annotations

import islpy as isl

from polyopt.codegen import linear, microkernel, tilematch, transpose, zerostart
from polyopt.codegen.ast import Ast, descendants
from polyopt.codegen.contract import KernelSource
from polyopt.codegen.dialect import Dialect, dialect_for, host_dialect
from polyopt.codegen.exprs import cname
from polyopt.codegen.linear import ast_lin
from polyopt.codegen.stmt import KernelContext, StmtPrinter, specialized_values
from polyopt.codegen.walker import AstWalker
from polyopt.dtypes import DTYPES
from polyopt.errors import CodegenError
from polyopt.poly.model import PolyStmt
from polyopt.schedules.contraction import MAX_SLICE_BYTES, slice_bytes
from polyopt.schedules.marks import Marks, Tag

__all__ = ["CWalker", "Dialect", "dialect_for", "host_dialect", "render"]


# The suffix of the function that makes a kernel's copies of its constants
# (``schedules.constants``), beside the kernel's own.
ONCE_SUFFIX = "_once"


def render(ast: Ast, dialect: Dialect | None = None, *, specialized: bool,
           once: Ast | None = None, held: tuple[str, ...] = ()) -> KernelSource:
    """The source of one kernel for ``ast``; with ``once``, a second function of the same
    calling convention runs that AST's statements (``<symbol>_once``: the copies ``held`` of
    the constant inputs, made when they are new: ``schedules.constants``)."""
    dialect = dialect or host_dialect()
    program = ast.poly.program
    symbol = cname("tensor", program.name).replace("t_", "polyopt_", 1)
    dims = tuple(program.sizes) + tuple(
        f"{t.name}.{d}" for t in program.tensors.values() for d in range(t.rank))
    ctx, walker, lines = _function(ast, dialect, specialized, symbol, dims)
    helpers = dict(ctx.helpers)
    if once is not None:
        once_ctx, _, once_lines = _function(once, dialect, specialized, symbol + ONCE_SUFFIX,
                                            dims)
        if once_ctx.gathers:  # its errors would report another function's reads
            raise CodegenError(f"'{program.name}': a copy made once reads through a gather")
        helpers.update(once_ctx.helpers)
        lines += once_lines
    storage = [m for m in ast.storage if m.tensor in ctx.modulo]
    head = [dialect.prelude, *([transpose.SHUFFLE_CHECK, *helpers.values()] if helpers else []),
            *(f"/* storage: {m} */" for m in storage)]
    return KernelSource(program.name, symbol, "\n".join([*head, *lines]), tuple(program.tensors),
                        dims, tuple(ctx.gathers), specialized, dialect.name,
                        tuple(ctx.contracted), tails=tuple(sorted(walker.tails.items())),
                        once=symbol + ONCE_SUFFIX if once is not None else None,
                        held=held if once is not None else ())


def _function(ast: Ast, dialect: Dialect, specialized: bool, symbol: str,
              dims: tuple[str, ...]) -> tuple[KernelContext, CWalker, list[str]]:
    """One C function running ``ast``, its printing context and walker."""
    pp = ast.poly
    program = pp.program
    ctx = KernelContext(pp, specialized_values(program) if specialized else None,
                        types=dialect.types)
    ctx.contracted = _slices(ast, ctx)
    if ctx.values is not None:
        for m in ast.storage:  # its extent along the stored dimension is the modulus
            if m.tensor in ctx.contracted:
                continue
            ctx.modulo[m.tensor] = (m.dim, m.modulus)
            ctx.values[f"{m.tensor}.{m.dim}"] = m.modulus
            ctx.logical[f"{m.tensor}.{m.dim}"] = m.extent  # what range checks compare with
    walker = CWalker(ctx, dialect, ast.tags, ast.trips, ast.padded)
    walker.dead = zerostart.dead_inits(ast.root, pp, walker.tile_at)
    body = walker.node(ast.root, 1, in_parallel=False)
    lines = [dialect.function_header(symbol, ctx.nested_tile_loops) + " {",
             *_declarations(ctx, dialect, dims), *body,
             "  (void)dims; (void)err;", "  return 0;", "}", ""]
    return ctx, walker, lines


def _slices(ast: Ast, ctx: KernelContext) -> dict[str, tuple[str, int]]:
    """The contractions that fit: a specialized kernel, a slice small enough for a stack."""
    if ctx.values is None:
        return {}
    return {tensor: (loop, dim) for tensor, loop, dim in ast.contractions
            if slice_bytes(ctx.poly, tensor, dim, ctx.values) <= MAX_SLICE_BYTES}


def _declarations(ctx: KernelContext, dialect: Dialect, dims: tuple[str, ...]) -> list[str]:
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


# TC reduction operators → OpenMP reduction identifiers.
OMP_REDUCTION = {"+": "+", "*": "*", "min": "min", "max": "max"}
# Types whose reductions print as an OpenMP ``simd reduction``: C's own arithmetic types
# (16-bit floats may be bits computed in float; bool's max/min is no OpenMP reduction).
REDUCTION_DTYPES = frozenset(n for n, d in DTYPES.items() if n != "bool" and (
    n in ("float32", "float64") or not d.is_float))



class CWalker(AstWalker):
    """The walker for C: register-tile and transposing-copy micro-kernels, vectorized
    reductions in an OpenMP ``simd reduction``, and loop-invariant operands hoisted out of
    vector loops."""

    def kernel_loop(self, node: isl.AstNode, depth: int, in_parallel: bool, loop: str,
                    tags: Marks, plain: bool) -> list[str] | None:
        """A register tile or transposing copy (full tiles), or a vector reduction."""
        if Tag.PARALLEL_REDUCTION in tags and not in_parallel and not plain and (
                self.dialect.parallel_pragma and not node.for_is_degenerate()):
            split = self._parallel_reduction(node, depth, loop)
            if split is not None:
                return split
        tile = None if plain else (self._register_tile(node, depth, in_parallel, loop)
                                   or self._transpose(node, depth, in_parallel, loop))
        if tile is None and Tag.VECTORIZE in tags and not node.for_is_degenerate():
            tile = self._reduction(node, depth, self.dialect.simd_clauses(tags))
        return tile

    def vector_body(self, node: isl.AstNode, depth: int) -> tuple[list[str], list[str] | None]:
        """Operands of a vector loop's one statement that do not move with the loop, loaded
        once before it (GCC's PRE otherwise can leave them in a form it cannot vectorize)."""
        call = tilematch.only_user(node.for_get_body())
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

    accumulating: str | None = None
    """The statement whose target a parallel reduction holds in ``po_acc`` while its loop's
    body prints (its instances, and a vector reduction inside, update that local)."""

    def user(self, call: isl.AstExpr, depth: int) -> list[str]:
        s = self.ctx.poly.stmt(call.get_op_arg(0).get_id().get_name())
        if s.name != self.accumulating:
            return super().user(call, depth)
        args = [self.ast_expr.expr(call.get_op_arg(i + 1), top=True)
                for i in range(call.get_op_n_arg() - 1)]
        return StmtPrinter(self.ctx, s).lines(args, "  " * depth, accumulator="po_acc")

    def _parallel_reduction(self, node: isl.AstNode, depth: int,
                            loop: str) -> list[str] | None:
        """Split-K: the loop's threads each accumulate a private copy of the one element
        its statement reduces into (OpenMP's ``reduction`` clause), combined after it."""
        calls = [n.user_get_expr() for n in descendants(node)
                 if n.get_type() == isl.ast_node_type.user]
        names = {c.get_op_arg(0).get_id().get_name() for c in calls}
        if len(names) != 1 or self.accumulating is not None:
            return None
        s = self.ctx.poly.stmt(names.pop())
        t = self.ctx.poly.program.tensors[s.stmt.tensor]
        op = OMP_REDUCTION.get(s.stmt.op)
        if op not in ("+", "*") or not s.accumulates or t.dtype not in ("float32", "float64"):
            return None
        wheres = [dict(zip(s.iters, [c.get_op_arg(i + 1) for i in range(len(s.iters))],
                           strict=True)) for c in calls]
        where = wheres[0]
        inner = {n.for_get_iterator().get_id().get_name() for n in descendants(node)
                 if n.get_type() == isl.ast_node_type.for_}
        if any(inner & set(ast_lin(where[i]) or inner) for i in s.stmt.lhs):
            return None  # the target's index is not a function of the outer loops alone
        if len({tuple(self.ast_expr.expr(w[i], top=True) for i in s.stmt.lhs)
                for w in wheres}) > 1:
            return None  # the body's branches (an unrolled loop's) update other elements
        pad, sp, c = "  " * depth, StmtPrinter(self.ctx, s), self.ctx.types.value(t.dtype)
        binds, target = self._target_binds(s, where, pad), sp.target(t)
        head = self._loop_head(node)
        self.accumulating = s.name
        try:
            body = self.node(node.for_get_body(), depth + 2, True)
        finally:
            self.accumulating = None
        return [f"{pad}{{ /* parallel reduction of {s.name} */", *binds,
                f"{pad}  {c} po_acc = {target};",
                f"{self.dialect.parallel_pragma} reduction({op}:po_acc)",
                f"{pad}  {head} {{  /* {loop} */", *body, f"{pad}  }}",
                f"{pad}  {target} = po_acc;", f"{pad}}}"]

    def _target_binds(self, s: PolyStmt, where: dict[str, isl.AstExpr],
                      pad: str) -> list[str]:
        """The target's index variables of a reduction kept in ``po_acc``."""
        return [f"{pad}  const long {cname('index', i)} = "
                f"{self.ast_expr.expr(where[i], top=True)};" for i in s.stmt.lhs]

    def _loop_head(self, node: isl.AstNode) -> str:
        """The ``for`` line of AST loop ``node`` (its tags printed elsewhere)."""
        return self.dialect.loop_header(
            node.for_get_iterator().get_id().get_name(),
            self.ast_expr.expr(node.for_get_init(), top=True),
            self.ast_expr.expr(node.for_get_cond(), top=True),
            self.ast_expr.expr(node.for_get_inc(), top=True), frozenset())

    def _reduction(self, node: isl.AstNode, depth: int, clauses: str = ""
                   ) -> list[str] | None:
        """A vectorized reduction loop: the element it accumulates into stays in a local
        that OpenMP's ``simd reduction`` gives each lane a copy of."""
        call = tilematch.only_user(node.for_get_body())
        if call is None or not self.dialect.simd_pragma:
            return None
        s = self.ctx.poly.stmt(call.get_op_arg(0).get_id().get_name())
        t = self.ctx.poly.program.tensors[s.stmt.tensor]
        op = OMP_REDUCTION.get(s.stmt.op)
        if op is None or not s.accumulates or t.dtype not in REDUCTION_DTYPES or not all(
                r.affine for r in s.reads):
            return None
        it = node.for_get_iterator().get_id().get_name()
        args = [call.get_op_arg(i + 1) for i in range(call.get_op_n_arg() - 1)]
        where = dict(zip(s.iters, args, strict=True))
        if any(it in (ast_lin(where[i]) or {it: 1}) for i in s.stmt.lhs):
            return None  # the target moves with the loop: not a reduction over it
        pad = "  " * depth
        sp = StmtPrinter(self.ctx, s)
        binds, target = self._target_binds(s, where, pad), sp.target(t)
        head = f"{pad}  {self._loop_head(node)} {{"
        texts = [self.ast_expr.expr(a, top=True) for a in args]
        if s.name == self.accumulating:  # inside a parallel reduction: its po_acc
            return [f"{pad}{self.dialect.simd_pragma} reduction({op}:po_acc){clauses}",
                    head[2:],
                    *sp.lines(texts, pad + "  ", accumulator="po_acc"), f"{pad}}}"]
        # Float min/max: the accumulator skips NaN (one vmaxps/vminps on its chain; OpenMP's
        # combine of the lanes would drop a NaN anyway) and a flag of NaN seen, the initial
        # value's included, makes the result NaN (StmtPrinter.reduction_lines).
        nan = s.stmt.op in ("min", "max") and DTYPES[t.dtype].is_float
        c = self.ctx.types.value(t.dtype)
        flag = ([f"{pad}  int po_nan = po_acc != po_acc;"], " reduction(|:po_nan)",
                f"po_nan ? ({c})NAN : po_acc") if nan else ([], "", "po_acc")
        return [f"{pad}{{ /* reduction of {s.name} */", *binds,
                f"{pad}  {c} po_acc = {target};", *flag[0],
                f"{pad}{self.dialect.simd_pragma} reduction({op}:po_acc){flag[1]}{clauses}",
                head,
                *sp.lines(texts, pad + "    ", accumulator="po_acc",
                          nan_flag="po_nan" if nan else None), f"{pad}  }}",
                f"{pad}  {target} = {flag[2]};", f"{pad}}}"]

    def _register_tile(self, node: isl.AstNode, depth: int, in_parallel: bool,
                       loop: str) -> list[str] | None:
        """A register-tile micro-kernel for full tiles, plain loops for partial ones."""
        pad = "  " * depth
        got = self._tile(node, pad + "  ")
        if got is None:
            return None
        emitter, full, lines = got
        if emitter.always_full():
            return lines
        edge = emitter.edge_lines(pad + "  ", self.padded)
        for tensor, tail in emitter.tails.items() if edge is not None else ():
            self.tails[tensor] = max(self.tails.get(tensor, 0), tail)
        rest = edge if edge is not None else self.for_loop(node, depth + 1, in_parallel, loop,
                                                       plain=True)
        return [f"{pad}if ({full}) {{", *lines, f"{pad}}} else {{", *rest, f"{pad}}}"]

    def _tile(self, node: isl.AstNode, pad: str
              ) -> tuple[microkernel.Emitter, str, list[str]] | None:
        """The register tile at AST loop ``node``: its emitter, the C condition of a full
        tile and the full tile's lines; None where no register tile prints."""
        if self.dialect.vector_bytes <= 0:
            return None
        tile = tilematch.match(node, self.tags, self.trips, self.ctx.poly.stmt)
        if tile is None:
            return None
        t = self.ctx.poly.program.tensors[tile.stmt.stmt.tensor]
        sp = StmtPrinter(self.ctx, tile.stmt)
        emitter = microkernel.Emitter(tile, sp, self.ast_expr, t.dtype, self.dialect.vector_bytes)
        full = emitter.full_tile()
        lines = None if full is None else emitter.lines(pad)
        return None if full is None or lines is None else (emitter, full, lines)

    def tile_at(self, node: isl.AstNode) -> tuple[PolyStmt, bool] | None:
        """The statement of the register tile printed at ``node``, and whether every
        instance it prints starts at zero (partial tiles too); None: no tile there."""
        got = self._tile(node, "")
        if got is None:
            return None
        emitter = got[0]
        return emitter.t.stmt, emitter.zero and (
            emitter.always_full() or emitter.edge_lines("", self.padded) is not None)

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
        plain = self.for_loop(node, depth + 1, in_parallel, loop, plain=True)
        return [f"{pad}if ({full}) {{", *lines, f"{pad}}} else {{", *plain, f"{pad}}}"]
