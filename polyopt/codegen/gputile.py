"""CUDA register tiles with shared-memory operands, for loops tagged ``gpu.tile RxC``.

The schedule (``Schedule.gpu_tile``) leaves, under a kernel's block loops, some reduction
loops and then the tile: rows, columns and one reduction loop over one ``+=`` statement.
Each thread owns R x C outputs of the block's tile (rows ``ty + a*TY``, columns
``tx + b*TX``, so a warp's stores are contiguous) and keeps them in registers from the
first reduction loop to the last (the accumulator scope). At each tile step every operand
that moves with only the rows or only the columns is copied by all threads into shared
memory, as values indexed by (reduction, row) or (reduction, column), with reads outside
the tile's range (a partial tile) filled with zeros and never used; a barrier; the threads
accumulate from shared memory; a barrier. Other operands are read where they are used.
"""

from __future__ import annotations

from dataclasses import dataclass

import islpy as isl

from polyopt import ir
from polyopt.codegen.exprs import AstExprPrinter, cname, literal
from polyopt.codegen.linear import ast_lin
from polyopt.codegen.stmt import StmtPrinter
from polyopt.errors import CodegenError
from polyopt.poly.model import PolyStmt
from polyopt.schedules.marks import Marks, Tag, gpu_tile_of, gpu_unroll_of, marked_loop


@dataclass
class TileLoop:
    var: str  # the AST iterator
    cond: isl.AstExpr
    extent: int  # the tile size (the loop's constant trip count)


@dataclass
class Tile:
    """One ``gpu.tile`` nest as the printer sees it in the isl AST."""

    row: TileLoop
    col: TileLoop
    red: TileLoop
    regs: tuple[int, int]
    shared: bool  # stage operands through shared memory
    unroll: int | None  # of the reduction loop; None: fully
    stmt: PolyStmt
    args: list[isl.AstExpr]  # the statement's iterators over the AST's loop variables

    @property
    def threads(self) -> tuple[int, int]:
        """(x, y): columns and rows of threads."""
        return self.col.extent // self.regs[1], self.row.extent // self.regs[0]


def find_tile(node: isl.AstNode, tags: dict[str, Marks]) -> isl.AstNode | None:
    """The marked ``gpu.tile`` loop under ``node`` (its mark node), if any."""
    kind = node.get_type()
    if kind == isl.ast_node_type.mark:
        loop = marked_loop(node)
        if loop is not None and gpu_tile_of(tags.get(loop, frozenset())):
            return node
        return find_tile(node.mark_get_node(), tags)
    if kind == isl.ast_node_type.block:
        kids = node.block_get_children()
        found = [find_tile(kids.get_at(i), tags) for i in range(kids.n_ast_node())]
        return next((f for f in found if f is not None), None)
    if kind == isl.ast_node_type.for_:
        return find_tile(node.for_get_body(), tags)
    if kind == isl.ast_node_type.if_:
        return find_tile(node.if_get_then_node(), tags)
    return None


def analyze(mark: isl.AstNode, tags: dict[str, Marks],
            extents: dict[str, tuple[isl.PwAff, int | None]], stmt_of: object) -> Tile:
    """The tile under a ``gpu.tile`` mark; CodegenError when the AST is not the plain nest
    rows > columns > reduction > statement the schedule promised."""
    name = marked_loop(mark)
    tile = gpu_tile_of(tags[name]) if name is not None else None
    assert name is not None and tile is not None
    loops: list[TileLoop] = []
    names: list[str] = []
    node = mark
    for _ in range(3):
        if node.get_type() != isl.ast_node_type.mark:
            raise CodegenError(f"gpu_tile {name}: isl split the tile's loops; expected three "
                               f"plain nested loops")
        loop = marked_loop(node) or ""
        names.append(loop)
        node = node.mark_get_node()
        extent = extents[loop][1] if loop in extents else None
        if node.get_type() != isl.ast_node_type.for_ or extent is None or \
                ast_lin(node.for_get_init()) != {"": 0} or ast_lin(node.for_get_inc()) != {"": 1}:
            raise CodegenError(f"gpu_tile {name}: loop {loop} is not a plain loop from 0")
        loops.append(TileLoop(node.for_get_iterator().get_id().get_name(),
                              node.for_get_cond(), extent))
        node = node.for_get_body()
    if node.get_type() == isl.ast_node_type.block and node.block_get_children().n_ast_node() == 1:
        node = node.block_get_children().get_at(0)
    if node.get_type() != isl.ast_node_type.user:
        raise CodegenError(f"gpu_tile {name}: expected one statement inside the tile")
    call = node.user_get_expr()
    stmt = stmt_of(call.get_op_arg(0).get_id().get_name())  # type: ignore[operator]
    args = [call.get_op_arg(i + 1) for i in range(call.get_op_n_arg() - 1)]
    unroll = gpu_unroll_of(tags.get(names[2], frozenset()))
    return Tile(loops[0], loops[1], loops[2], (tile.rows, tile.cols),
                Tag.GPU_TILE_GLOBAL not in tags[name], unroll, stmt, args)


class TileEmitter:
    """Prints a ``Tile``'s accumulator prologue and epilogue and its tile step."""

    def __init__(self, tile: Tile, sp: StmtPrinter, sizes: frozenset[str]) -> None:
        self.t = tile
        self.sp = sp
        self.sizes = sizes
        s = tile.stmt
        self.dtype = sp.ctx.poly.program.tensors[s.stmt.tensor].dtype
        self.ctype = sp.ctx.types.value(self.dtype)
        moves = {it: ast_lin(a) or {} for it, a in zip(s.iters, tile.args, strict=True)}
        if any(not ast_lin(a) for a in tile.args):
            raise CodegenError(f"gpu_tile: statement {s.name} has non-affine iterators")
        self.rows_of = {it for it, lin in moves.items() if lin.get(tile.row.var)}
        self.cols_of = {it for it, lin in moves.items() if lin.get(tile.col.var)}
        self.row_reads, self.col_reads = [], []
        for r in s.reads if tile.shared else ():
            on_row = any(r.read.uses(it) for it in self.rows_of)
            on_col = any(r.read.uses(it) for it in self.cols_of)
            if on_row and not on_col:
                self.row_reads.append(r.read)
            elif on_col and not on_row:
                self.col_reads.append(r.read)

    # -- pieces ---------------------------------------------------------------------------
    def _printer(self, row: str, col: str, red: str) -> AstExprPrinter:
        t = self.t
        return AstExprPrinter(self.sizes, {t.row.var: row, t.col.var: col, t.red.var: red})

    def _ok(self, loop: TileLoop, value: str) -> str:
        return AstExprPrinter(self.sizes, {loop.var: value}).expr(loop.cond, top=True)

    def _binds(self, pad: str, row: str, col: str, red: str | None) -> list[str]:
        """The statement's iterators at a tile position; only the output's (``lhs``)
        when ``red`` is None (outside the reduction loops)."""
        p = self._printer(row, col, red or "0L")
        keep = self.t.stmt.stmt.iters if red is not None else self.t.stmt.stmt.lhs
        return [f"{pad}const long {cname('index', it)} = {p.expr(a, top=True)};"
                for it, a in zip(self.t.stmt.iters, self.t.args, strict=True) if it in keep]

    def _target(self) -> str:
        t = self.sp.ctx.poly.program.tensors[self.t.stmt.stmt.tensor]
        return self.sp.target(t)

    def _each_output(self, pad: str, body: list[str], red: str | None = None) -> list[str]:
        """``body`` for each of the thread's outputs (``po_a``, ``po_b``; row and column
        ``po_r``, ``po_c`` inside the tile), with the statement's iterators bound (the
        reduction's tile position at ``red``; without it, the output's only)."""
        tx, ty = self.t.threads
        rm, rn = self.t.regs
        inner = pad + "    "
        return [f"{pad}#pragma unroll", f"{pad}for (int po_a = 0; po_a < {rm}; po_a++) {{",
                f"{pad}  #pragma unroll", f"{pad}  for (int po_b = 0; po_b < {rn}; po_b++) {{",
                f"{inner}const long po_r = (long)threadIdx.y + po_a * {ty}L;",
                f"{inner}const long po_c = (long)threadIdx.x + po_b * {tx}L;",
                *self._binds(inner, "po_r", "po_c", red), *(inner + b for b in body),
                f"{pad}  }}", f"{pad}}}"]

    def _inside(self) -> str:
        return f"{self._ok(self.t.row, 'po_r')} && {self._ok(self.t.col, 'po_c')}"

    # -- the three parts ------------------------------------------------------------------
    def prologue(self, pad: str) -> list[str]:
        rm, rn = self.t.regs
        zero = literal(0, self.dtype)
        load = (f"po_acc[po_a][po_b] = ({self._inside()}) ? {self._target()} : {zero};")
        return [f"{pad}{self.ctype} po_acc[{rm}][{rn}];", *self._each_output(pad, [load])]

    def epilogue(self, pad: str) -> list[str]:
        store = f"if ({self._inside()}) {self._target()} = po_acc[po_a][po_b];"
        return self._each_output(pad, [store])

    def step(self, pad: str) -> list[str]:
        t = self.t
        out = [f"{pad}{{ /* tile of {t.stmt.name}: shared operands, registers */"]
        inner = pad + "  "
        for n, read in enumerate(self.row_reads):
            out += self._stage(inner, f"po_As{n}", read, t.row, "po_r")
        for n, read in enumerate(self.col_reads):
            out += self._stage(inner, f"po_Bs{n}", read, t.col, "po_c")
        staged = bool(self.row_reads or self.col_reads)
        sync = [f"{inner}__syncthreads();"] if staged else []
        return [*out, *sync, *self._accumulate(inner), *sync, f"{pad}}}"]

    def _stage(self, pad: str, array: str, read: ir.Read, loop: TileLoop,
               var: str) -> list[str]:
        """All threads copy one operand's values over (reduction, rows or columns), stored
        as ``[k][n + 1]`` (the pad keeps a warp's transposed stores off one bank). Consecutive
        threads take consecutive reduction steps when the reduction walks the operand's
        last (stride-1) dimension, else consecutive rows or columns: coalesced loads."""
        tx, ty = self.t.threads
        n, bk = loop.extent, self.t.red.extent
        is_row = loop is self.t.row
        row, col = (var, "0L") if is_row else ("0L", var)
        red_its = {it for it, a in zip(self.t.stmt.iters, self.t.args, strict=True)
                   if (ast_lin(a) or {}).get(self.t.red.var)}
        k_fast = any(read.indices[-1:] and _uses(read.indices[-1], it) for it in red_its)
        split = (f"const long {var} = po_e / {bk}L, po_k = po_e % {bk}L;" if k_fast else
                 f"const long po_k = po_e / {n}L, {var} = po_e % {n}L;")
        self.sp.preloaded.clear()
        value = self.sp.rhs.cast(read, self.dtype)
        ok = f"{self._ok(loop, var)} && {self._ok(self.t.red, 'po_k')}"
        inner = pad + "  "
        return [f"{pad}POLYOPT_SHARED({self.ctype}, {array}, {(n + 1) * bk});",
                f"{pad}#pragma unroll",  # a constant count per thread: all loads in flight
                f"{pad}for (long po_e = (long)threadIdx.y * {tx}L + threadIdx.x; "
                f"po_e < {n * bk}L; po_e += {tx * ty}L) {{",
                f"{inner}{split}", *self._binds(inner, row, col, "po_k"),
                f"{inner}{array}[po_k * {n + 1}L + {var}] = ({ok}) ? {value} : "
                f"{literal(0, self.dtype)};", f"{pad}}}"]

    def _accumulate(self, pad: str) -> list[str]:
        t = self.t
        rm, rn = t.regs
        tx, ty = t.threads
        unroll = "#pragma unroll" + (f" {t.unroll}" if t.unroll else "")
        lines = [f"{pad}{unroll}", f"{pad}for (long po_k = 0; po_k < {t.red.extent}L; "
                 f"po_k++) {{", f"{pad}  if (!({self._ok(t.red, 'po_k')})) break;"]
        inner = pad + "  "
        for n, _ in enumerate(self.row_reads):
            lines.append(f"{inner}{self.ctype} po_a{n}[{rm}];")
            lines.append(f"{inner}for (int i = 0; i < {rm}; i++) po_a{n}[i] = "
                         f"po_As{n}[po_k * {t.row.extent + 1}L + threadIdx.y + i * {ty}];")
        for n, _ in enumerate(self.col_reads):
            lines.append(f"{inner}{self.ctype} po_b{n}[{rn}];")
            lines.append(f"{inner}for (int j = 0; j < {rn}; j++) po_b{n}[j] = "
                         f"po_Bs{n}[po_k * {t.col.extent + 1}L + threadIdx.x + j * {tx}];")
        self.sp.preloaded.clear()
        for n, read in enumerate(self.row_reads):
            self.sp.preloaded[id(read)] = f"po_a{n}[po_a]"
        for n, read in enumerate(self.col_reads):
            self.sp.preloaded[id(read)] = f"po_b{n}[po_b]"
        value = self.sp.rhs.cast(t.stmt.stmt.rhs, self.dtype)
        self.sp.preloaded.clear()
        update = f"po_acc[po_a][po_b] = ({self.ctype})(po_acc[po_a][po_b] + {value});"
        if self._reads_global():  # a partial tile's outside outputs would read past them
            update = f"if ({self._inside()}) {update}"
        return [*lines, *self._each_output(inner, [update], "po_k"), f"{pad}}}"]

    def _reads_global(self) -> bool:
        """Does the update read an operand that moves with the tile's rows or columns from
        global memory unchecked: not staged in shared memory (whose copies are zero
        outside), nor a padded read the printer checks against the extents?"""
        staged = {id(r) for r in (*self.row_reads, *self.col_reads)}
        moving = self.rows_of | self.cols_of
        checked = self.sp.s.guarded
        return any(id(r.read) not in staged and not (r.read.pad is not None and checked)
                   and any(r.read.uses(it) for it in moving) for r in self.t.stmt.reads)


def _uses(e: ir.Expr, it: str) -> bool:
    return any(isinstance(v, ir.Var) and v.kind == "index" and v.name == it for v in e.walk())
