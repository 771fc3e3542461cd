"""The isl AST walker every dialect prints with: loops, guards, marks and statement
instances, with extension points for loops a dialect prints its own way.

``AstWalker`` prints a plain loop nest; the C printer's walker adds micro-kernels
(``polyopt.codegen.printer.CWalker``), the CUDA printer's binds loops to blocks and threads
(``polyopt.codegen.cuda.CudaWalker``).
"""

from __future__ import annotations

import islpy as isl

from polyopt.codegen.ast import loop_is_parallel, loop_printed, straight_line_group
from polyopt.codegen.dialect import Dialect
from polyopt.codegen.exprs import AstExprPrinter
from polyopt.codegen.stmt import KernelContext, StmtPrinter
from polyopt.codegen.zerostart import used_names
from polyopt.dtypes import DTYPES
from polyopt.errors import CodegenError
from polyopt.schedules.contraction import slice_bytes
from polyopt.schedules.marks import Marks, Tag, bind_of, marked_loop


class AstWalker:
    """Walks the isl AST and prints loops, guards and statement instances."""

    def __init__(self, ctx: KernelContext, dialect: Dialect, tags: dict[str, Marks],
                 trips: dict[str, int | None], padded: frozenset[str]) -> None:
        self.padded = padded
        self.ctx = ctx
        self.dialect = dialect
        self.tags = tags
        self.trips = trips
        self.ast_expr = AstExprPrinter(frozenset(ctx.poly.program.sizes))
        self.dead: frozenset[str] = frozenset()  # statements whose instances print nothing
        self.tails: dict[str, int] = {}  # packed locals: elements partial tiles read past them

    def node(self, node: isl.AstNode, depth: int, in_parallel: bool,
             loop: str = "") -> list[str]:
        """The lines of AST ``node`` at indentation ``depth``, inside AST loop ``loop`` (the
        name of the mark above it) and inside a parallel loop or not."""
        if self.dead and not used_names(node) - self.dead:
            return []  # only instances of dead statements (zerostart): nothing to print
        kind = node.get_type()
        if kind == isl.ast_node_type.block:
            kids = node.block_get_children()
            out: list[str] = []
            for i in range(kids.n_ast_node()):  # pieces of one marked loop keep its name
                out += self.node(kids.get_at(i), depth, in_parallel, loop)
            return out
        if kind == isl.ast_node_type.for_:
            return self.for_loop(node, depth, in_parallel, loop)
        if kind == isl.ast_node_type.if_:
            return self._if(node, depth, in_parallel, loop)
        if kind == isl.ast_node_type.mark:
            name = marked_loop(node) or ""
            inner = node.mark_get_node()
            slices = self.slice_decls(name, depth + 1)
            if slices and not loop_printed(inner):  # its slices still need a scope
                pad = "  " * depth
                body = self.node(inner, depth + 1, in_parallel, name)
                return [f"{pad}{{", *slices, *body, f"{pad}}}"]
            return self.node(inner, depth, in_parallel, name)
        if kind == isl.ast_node_type.user:
            return self.user(node.user_get_expr(), depth)
        raise CodegenError(f"unsupported isl AST node type {kind}")

    def for_loop(self, node: isl.AstNode, depth: int, in_parallel: bool, loop: str,
             plain: bool = False) -> list[str]:
        """A ``for`` node (of AST loop ``loop``); ``plain``: no micro-kernel for it (its
        partial tiles, printed by the micro-kernel's own fallback)."""
        pad = "  " * depth
        tags = self.tags.get(loop, frozenset())
        tile = self.kernel_loop(node, depth, in_parallel, loop, tags, plain)
        if tile is not None:
            return tile
        it = self.ast_expr.expr(node.for_get_iterator())
        init = self.ast_expr.expr(node.for_get_init(), top=True)
        if node.for_is_degenerate():
            body = self.node(node.for_get_body(), depth + 1, in_parallel)  # first: its
            # register tiles' tails size the slices
            return [f"{pad}{{", f"{pad}  const long {it} = {init};",
                    *self.slice_decls(loop, depth + 1), *body, f"{pad}}}"]
        cond = self.ast_expr.expr(node.for_get_cond(), top=True)
        inc = self.ast_expr.expr(node.for_get_inc(), top=True)
        out = []
        parallel = not in_parallel and Tag.PARALLEL in tags
        bound = bind_of(tags)
        if (parallel or bound) and not loop_is_parallel(node):  # the verb's check and the
            label = "parallel" if parallel else f"bound to {bound}"  # AST's disagree
            raise CodegenError(f"loop {loop} is {label} but carries a dependence")
        simd = Tag.VECTORIZE in tags and self.dialect.simd_pragma
        clauses = self.dialect.simd_clauses(tags) if simd else ""
        if parallel and self.dialect.parallel_pragma:
            out.append(self.dialect.parallel_pragma + (" simd" if simd else "") + clauses)
        elif simd:
            out.append(self.dialect.simd_pragma + clauses)
        note = f"  /* {loop} */" if loop else ""
        hoisted: list[str] = []
        inner: list[str] | None = None
        if simd:
            hoisted, inner = self.vector_body(node, depth)
        out.append(f"{pad}{self.dialect.loop_header(it, init, cond, inc, tags)} {{{note}")
        body = inner if inner is not None else self.node(node.for_get_body(), depth + 1,
                                                          in_parallel or parallel)  # first:
        # its register tiles' tails size the slices
        guard = [f"{pad}  {self.dialect.carried_loop_guard}  /* carries a dependence */"
                 ] if self._guarded(node) else []
        out += [*self.slice_decls(loop, depth + 1), *body, *guard, f"{pad}}}"]
        if hoisted:  # the pragma must stay right above its loop
            return [f"{pad}{{", *hoisted, *out, f"{pad}}}"]
        return out

    def _guarded(self, node: isl.AstNode) -> bool:
        """Whether loop ``node`` ends in the dialect's carried-loop guard: it carries a
        dependence and its body is, to the C compiler, a group of statements. Other loops
        are left alone, since the guard costs what it keeps the compiler from: deriche's
        one-statement recurrences ran 1.6x slower guarded, lu's loop around variable
        loops 1.05x."""
        return bool(self.dialect.carried_loop_guard) and not loop_is_parallel(node) and \
            straight_line_group(node)

    def slice_decls(self, loop: str, depth: int) -> list[str]:
        """The slices of contracted locals that this loop keeps, one per iteration."""
        out = []
        for tensor, (owner, dim) in self.ctx.contracted.items():
            if owner == loop and loop:
                t = self.ctx.poly.program.tensors[tensor]
                size = slice_bytes(self.ctx.poly, tensor, dim, self.ctx.values or {})
                elems = size // DTYPES[t.dtype].np.itemsize + self._slack(tensor)
                c = self.ctx.types.storage(t.dtype)
                out.append(f"{'  ' * depth}{c} po_slice_{tensor}[{elems}];")
        return out

    def _slack(self, tensor: str) -> int:
        """Elements past a slice's end that the register tiles in its loop read (and
        discard): the tails their partial tiles computed (``microkernel.Emitter.edge_lines``,
        the same count the runtime adds to heap locals), known once the loop's body is
        printed. A slice lives on the stack, near the top of a worker thread's: a load past
        it could fault, and the scratch guard (``runtime.guard``) covers only the heap."""
        return self.tails.get(tensor, 0)

    def _if(self, node: isl.AstNode, depth: int, in_parallel: bool, loop: str) -> list[str]:
        pad = "  " * depth
        cond = self.ast_expr.expr(node.if_get_cond(), top=True)
        out = [f"{pad}if ({cond}) {{",
               *self.node(node.if_get_then_node(), depth + 1, in_parallel, loop)]
        if node.if_has_else_node():
            out += [f"{pad}}} else {{",
                    *self.node(node.if_get_else_node(), depth + 1, in_parallel, loop)]
        return [*out, f"{pad}}}"]

    def user(self, call: isl.AstExpr, depth: int) -> list[str]:
        name = call.get_op_arg(0).get_id().get_name()
        s = self.ctx.poly.stmt(name)
        args = [self.ast_expr.expr(call.get_op_arg(i + 1), top=True)
                for i in range(call.get_op_n_arg() - 1)]
        return StmtPrinter(self.ctx, s).lines(args, "  " * depth)

    # -- extension points ---------------------------------------------------------------
    def kernel_loop(self, node: isl.AstNode, depth: int, in_parallel: bool, loop: str,
                    tags: Marks, plain: bool) -> list[str] | None:
        """The lines of a loop a dialect prints its own way (a micro-kernel), or ``None``
        for a plain ``for``."""
        return None

    def vector_body(self, node: isl.AstNode, depth: int) -> tuple[list[str], list[str] | None]:
        """For a vectorized loop: lines to print before it, and its body (``None``: walk
        the body as usual)."""
        return [], None
