"""isl AST → CUDA C: the C printer with a CUDA dialect, one ``__global__`` kernel per
top-level nest of the schedule (see ``polyopt.pipeline.gpu``).

A loop bound to ``blockIdx.x`` prints as a grid-stride loop, ``for (c = lb + blockIdx.x;
c <= ub; c += gridDim.x)``, and one bound to ``threadIdx.x`` as a block-stride loop: any
launch shape is then correct, and the launch we pick (``Launch``: as many blocks and threads
as the loops have values) gives each thread one iteration. A statement outside some bound
loop of its kernel runs on thread (and block) 0 of that axis only.

Kernels take their tensors as pointers, ``err`` (run-time index errors, as in C) and, when
size-generic, every ``dims`` entry by value. Each kernel also gets an entry for the CPU
emulator (``polyopt.runtime.emulator``), compiled only there.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import islpy as isl

from polyopt.codegen.ast import Ast
from polyopt.codegen.builtins import PRELUDE
from polyopt.codegen.contract import KernelSource, Launch
from polyopt.codegen.dialect import Dialect
from polyopt.codegen.exprs import Types, cname
from polyopt.codegen.gputile import TileEmitter, analyze, find_tile
from polyopt.codegen.stmt import KernelContext, StmtPrinter, specialized_values
from polyopt.codegen.walker import AstWalker
from polyopt.costmodel.gpu_machine import DEFAULT_GPU
from polyopt.errors import CodegenError
from polyopt.schedules.marks import GPU_AXES, Marks, bind_of, marked_loop

_STRIDE = {"blockIdx": "gridDim", "threadIdx": "blockDim"}


class CudaDialect(Dialect):
    """CUDA C: bound loops stride over blocks or threads; no OpenMP, no vector types."""

    name = "cuda"
    prelude = ("#define PO_FN __device__ __forceinline__\n"
               "#ifndef POLYOPT_SHARED\n"
               "#define POLYOPT_SHARED(T, name, n) __shared__ T name[n]\n"
               "#endif" + PRELUDE)
    restrict = "__restrict__"
    nested_tile_loops_attribute = ""  # no register tiles here, and nvcc is no GCC
    parallel_pragma = ""
    simd_pragma = ""
    carried_loop_guard = ""  # nvcc vectorizes no loops
    vector_bytes = 0
    # 16-bit floats as bits, computed in float: one portable path for nvcc and the emulator
    types = Types(frozenset({"float16", "bfloat16"}))

    def loop_header(self, it: str, init: str, cond: str, inc: str,
                    tags: Marks) -> str:
        axis = _axis(tags)
        if axis is None:
            return super().loop_header(it, init, cond, inc, tags)
        kind, dim = axis.split(".")
        step = "" if inc == "1L" else f" * {inc}"
        start = f"(long){axis}{step}" if init == "0L" else f"{init} + (long){axis}{step}"
        return (f"for (long {it} = {start}; {cond}; "
                f"{it} += (long){_STRIDE[kind]}.{dim}{step})")


def render_cuda(ast: Ast, *, specialized: bool,
                grid_cap: tuple[int, int, int] | None = None) -> KernelSource:
    """The CUDA source of every kernel of ``ast`` and how to launch each (at most
    ``grid_cap`` blocks per grid dimension)."""
    dialect = CudaDialect()
    program = ast.poly.program
    wide = [t.name for t in program.tensors.values() if t.dtype == "longdouble"]
    if wide:  # nvcc would silently compute it as double
        raise CodegenError(f"tensor {wide[0]} is longdouble, which CUDA has no type for; "
                           "compile it for target='c' or use float64")
    base = cname("tensor", program.name).replace("t_", "polyopt_", 1)
    buffers = tuple(program.tensors)
    dims = tuple(program.sizes) + tuple(
        f"{t.name}.{d}" for t in program.tensors.values() for d in range(t.rank))
    ctx = KernelContext(ast.poly, specialized_values(program) if specialized else None,
                   types=dialect.types)
    params = _params(ctx, dialect, dims)
    lines, entries, launches = [dialect.prelude], [], []
    for k, node in enumerate(_kernels(ast.root)):
        symbol = f"{base}_k{k}"
        bound = _bound_loops(node, ast.tags)
        tile = _tile(node, ast, ctx)
        launch = _launch(symbol, bound, ast, tile[0].t.threads if tile else None)
        if grid_cap is not None:
            launch = replace(launch, grid_cap=grid_cap)
        bounds = _bounds(launch.threads, tile is not None and specialized)
        body = CudaWalker(ctx, dialect, ast.tags, ast.trips, ast.padded, frozenset(bound),
                         tile).node(node, 1, in_parallel=False)
        lines += [f'extern "C" __global__ void {bounds}{symbol}({", ".join(params)}) {{',
                  *_extents(ctx, dims), *body, "}", ""]
        args = ", ".join(p.rsplit(" ", 1)[1] for p in params)
        entries.append(f"POLYOPT_EMU_ENTRY({symbol}, ({', '.join(params)}), ({args}))")
        launches.append(launch)
    lines += ["#ifdef POLYOPT_EMULATED", *entries, "#endif", ""]
    return KernelSource(program.name, base, "\n".join(lines), buffers, dims,
                        tuple(ctx.gathers), specialized, "cuda", (), tuple(launches),
                        tuple(t.role for t in program.tensors.values()))


def _kernels(root: isl.AstNode) -> list[isl.AstNode]:
    """The AST of each top-level nest: the root block's children, or the root alone."""
    if root.get_type() != isl.ast_node_type.block:
        return [root]
    kids = root.block_get_children()
    return [kids.get_at(i) for i in range(kids.n_ast_node())]


def _bound_loops(node: isl.AstNode, tags: dict[str, Marks]) -> dict[str, str]:
    """axis -> loop for the loops of one kernel bound to blocks or threads, checking that
    each axis is bound once and block loops enclose thread loops."""
    out: dict[str, str] = {}
    for loop, inside_thread in _marked_loops(node, tags, False):
        bound = bind_of(tags.get(loop, frozenset()))
        if bound is None:
            continue
        axis = bound.axis
        if out.get(axis, loop) != loop:
            raise CodegenError(f"loops {out[axis]} and {loop} are both bound to {axis} in "
                               f"one kernel (a top-level nest)")
        if bound.is_block and inside_thread:
            raise CodegenError(f"loop {loop} is bound to {axis} inside a thread loop; block "
                               f"loops must enclose thread loops")
        out[axis] = loop
    return out


def _marked_loops(node: isl.AstNode, tags: dict[str, Marks],
                  inside_thread: bool) -> Iterator[tuple[str, bool]]:
    kind = node.get_type()
    if kind == isl.ast_node_type.mark:
        loop = marked_loop(node)
        if loop is not None:
            yield loop, inside_thread
            bound = bind_of(tags.get(loop, frozenset()))
            inside_thread = inside_thread or (bound is not None and bound.is_thread)
        yield from _marked_loops(node.mark_get_node(), tags, inside_thread)
    elif kind == isl.ast_node_type.block:
        kids = node.block_get_children()
        for i in range(kids.n_ast_node()):
            yield from _marked_loops(kids.get_at(i), tags, inside_thread)
    elif kind == isl.ast_node_type.for_:
        yield from _marked_loops(node.for_get_body(), tags, inside_thread)
    elif kind == isl.ast_node_type.if_:
        yield from _marked_loops(node.if_get_then_node(), tags, inside_thread)
        if node.if_has_else_node():
            yield from _marked_loops(node.if_get_else_node(), tags, inside_thread)


def _bounds(threads: int | None, tiled: bool) -> str:
    """``__launch_bounds__`` for a kernel. A specialized register tile asks for two blocks
    per SM: left alone, ptxas gave the 128x128 matmul tile 254 registers (one block of 256
    threads per SM); with the bound it needs 125 and does not spill. (Size-generic tiles,
    with their index arithmetic, spilled under it.) Other kernels of up to 256 threads fit
    any register count, where a bound would only trade registers for spills."""
    if tiled and threads is not None and threads <= 256:
        return f"__launch_bounds__({threads}, 2) "
    if threads is None or threads > 256:
        return f"__launch_bounds__({threads or DEFAULT_GPU.max_threads_per_block}) "
    return ""


def _tile(node: isl.AstNode, ast: Ast,
          ctx: KernelContext) -> tuple[TileEmitter, str, str] | None:
    """The kernel's ``gpu.tile``: its emitter, its loop and the loop that holds the
    accumulators (the first loop on the way to the tile below every block loop)."""
    mark = find_tile(node, ast.tags)
    if mark is None:
        return None
    tile = analyze(mark, ast.tags, ast.extents, ctx.poly.stmt)
    path = _path_to(node, marked_loop(mark) or "") or []
    binds = [bind_of(ast.tags.get(n, frozenset())) for n in path]
    blocks = [i for i, b in enumerate(binds) if b is not None and b.is_block]
    acc_root = path[blocks[-1] + 1 if blocks else 0]
    emitter = TileEmitter(tile, StmtPrinter(ctx, tile.stmt), frozenset(ctx.poly.program.sizes))
    return emitter, path[-1], acc_root


def _path_to(node: isl.AstNode, target: str) -> list[str] | None:
    """The names of the marked loops from ``node`` down to the mark of loop ``target``."""
    kind = node.get_type()
    if kind == isl.ast_node_type.mark:
        name = marked_loop(node) or ""
        if name == target:
            return [name]
        below = _path_to(node.mark_get_node(), target)
        return None if below is None else [name, *below]
    kids: list[isl.AstNode] = []
    if kind == isl.ast_node_type.block:
        ch = node.block_get_children()
        kids = [ch.get_at(i) for i in range(ch.n_ast_node())]
    elif kind == isl.ast_node_type.for_:
        kids = [node.for_get_body()]
    elif kind == isl.ast_node_type.if_:
        kids = [node.if_get_then_node()]
    for kid in kids:
        found = _path_to(kid, target)
        if found is not None:
            return found
    return None


def _launch(symbol: str, bound: dict[str, str], ast: Ast,
            tile_threads: tuple[int, int] | None = None) -> Launch:
    build = isl.AstBuild.from_context(ast.poly.context)
    space = ast.poly.context.get_space()
    one = isl.PwAff.from_aff(isl.Aff.val_on_domain_space(space, isl.Val(1)))
    texts: dict[str, tuple[str, str]] = {}
    threads: int | None = 1
    fixed = {"threadIdx.x": tile_threads[0], "threadIdx.y": tile_threads[1]} \
        if tile_threads else {}
    for axis in GPU_AXES:
        extent, most = ast.extents[bound[axis]] if axis in bound else (one, 1)
        if axis in fixed:
            extent, most = one.scale_val(isl.Val(fixed[axis])), fixed[axis]
        texts[axis] = (str(extent), build.expr_from_pw_aff(extent).to_C_str())
        if axis.startswith("threadIdx"):
            threads = None if threads is None or most is None else threads * most
    grid = tuple(texts[f"blockIdx.{d}"] for d in "xyz")
    block = tuple(texts[f"threadIdx.{d}"] for d in "xyz")
    return Launch(symbol, _firsts(grid), _firsts(block), _seconds(grid), _seconds(block),
                  threads)


def _firsts(pairs: tuple[tuple[str, str], ...]) -> tuple[str, str, str]:
    return pairs[0][0], pairs[1][0], pairs[2][0]


def _seconds(pairs: tuple[tuple[str, str], ...]) -> tuple[str, str, str]:
    return pairs[0][1], pairs[1][1], pairs[2][1]


def _params(ctx: KernelContext, dialect: Dialect, dims: tuple[str, ...]) -> list[str]:
    program = ctx.poly.program
    out = []
    for t in program.tensors.values():
        const = "const " if t.role == "input" else ""
        c = dialect.types.storage(t.dtype)
        out.append(f"{const}{c} *{dialect.restrict} {cname('tensor', t.name)}")
    out.append(f"long *{dialect.restrict} err")
    if ctx.values is None:
        out += [f"long {_dim_var(d)}" for d in dims]
    return out


def _extents(ctx: KernelContext, dims: tuple[str, ...]) -> list[str]:
    """A specialized kernel's extents as constants (a size-generic one takes them)."""
    if ctx.values is None:
        return []
    return [f"  const long {_dim_var(d)} = {ctx.values[d]}L;" for d in dims if "." in d]


def _dim_var(d: str) -> str:
    if "." in d:
        tensor, k = d.split(".")
        return f"{cname('extent', tensor)}_{k}"
    return cname("size", d)


def _axis(tags: Marks) -> str | None:
    bound = bind_of(tags)
    return bound.axis if bound else None


class CudaWalker(AstWalker):
    """The AST walker for a CUDA kernel: loops bound to blocks or threads stride over them,
    a block tile prints its register micro-kernel, and what a kernel's threads must not all
    run is guarded to index 0 of the axes around it."""

    def __init__(self, ctx: KernelContext, dialect: Dialect, tags: dict[str, Marks],
                 trips: dict[str, int | None], padded: frozenset[str],
                 axes: frozenset[str], tile: tuple[TileEmitter, str, str] | None) -> None:
        super().__init__(ctx, dialect, tags, trips, padded)
        self.axes = axes  # bound somewhere in this kernel
        self.enclosing: list[str] = []  # axes of the loops around the current node
        self.tile = tile

    def for_loop(self, node: isl.AstNode, depth: int, in_parallel: bool, loop: str,
             plain: bool = False) -> list[str]:
        if self.tile is not None and loop in self.tile[1:]:
            emitter, tile_loop, acc_root = self.tile
            pad = "  " * depth
            lines = emitter.step(pad + "  ") if loop == tile_loop else \
                self._bound_for(node, depth + 1, in_parallel, loop, plain)
            if loop != acc_root:
                return lines
            return [f"{pad}{{ /* accumulators of {emitter.t.stmt.name} in registers */",
                    *emitter.prologue(pad + "  "), *lines, *emitter.epilogue(pad + "  "),
                    f"{pad}}}"]
        return self._bound_for(node, depth, in_parallel, loop, plain)

    def _bound_for(self, node: isl.AstNode, depth: int, in_parallel: bool, loop: str,
                   plain: bool = False) -> list[str]:
        axis = _axis(self.tags.get(loop, frozenset()))
        if axis is None:
            return super().for_loop(node, depth, in_parallel, loop, plain)
        self.enclosing.append(axis)
        try:
            if not node.for_is_degenerate():
                return super().for_loop(node, depth, in_parallel, loop, plain)
            # One iteration: printed without a loop, so only that axis' index 0 runs it.
            pad = "  " * depth
            inner = super().for_loop(node, depth + 1, in_parallel, loop, plain)
            return [f"{pad}if ({axis} == 0) {{", *inner, f"{pad}}}"]
        finally:
            self.enclosing.pop()

    def user(self, call: isl.AstExpr, depth: int) -> list[str]:
        missing = sorted(self.axes - set(self.enclosing))
        if not missing:
            return super().user(call, depth)
        pad = "  " * depth
        cond = " && ".join(f"{a} == 0" for a in missing)
        return [f"{pad}if ({cond}) {{", *super().user(call, depth + 1), f"{pad}}}"]
