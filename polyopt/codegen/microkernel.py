"""Register tiles: an unroll-and-jammed, vectorized reduction printed as a micro-kernel.

The schedule shape ``for k { for r (unroll) { for v (vectorize) { S } } }``, where S
accumulates with ``+`` into an element that does not move with ``k``, is printed as the
BLIS/Goto micro-kernel: ``MR x NR/lanes`` accumulators in vector registers (GCC/Clang
vector extensions, sized from the machine's vector width), loaded before the ``k`` loop (or
zeroed, when the tile runs every update of a ``+=!``) and stored after it; inside, each
operand is loaded once per ``k`` step, as a vector when it is contiguous along ``v`` and as
a broadcast scalar when it does not move with ``v``.

It applies only where that is exact: full tiles (constant trip counts), affine accesses,
the target written nowhere else in the tile, and a right-hand side of ``+ - * /``, reads
and constants in the target's floating type. Anything else prints as plain loops. The tiles
are found in the isl AST by ``tilematch.match``.
"""

from __future__ import annotations

import math
from typing import Any

import islpy as isl

from polyopt import ir
from polyopt.codegen.exprs import AstExprPrinter, ctype, literal
from polyopt.codegen.linear import (
    LANE,
    Lin,
    add,
    ast_lin,
    const_trip,
    index_lin,
    names_in,
    substitute,
    text,
)
from polyopt.codegen.tilematch import Tile, expr_ids, trip_text
from polyopt.dtypes import DTYPES
from polyopt.poly.model import PolyStmt
from polyopt.poly.pieces import whole_reductions
from polyopt.schedules.limits import CAPS

MAX_ACCUMULATORS = CAPS.max_accumulators  # the limits say why (limits.Caps)
MAX_UNROLLED_UPDATES = CAPS.max_unrolled_updates
Key = tuple[int, int, int]  # (step of the unrolled reduction loop, row, vector) of a tile


def vector_rhs(e: ir.Expr, dtype: str, value: dict[int, str]) -> str | None:
    """The right-hand side over hoisted operand values (``value[id(read)]``), or None when
    it uses anything a vector expression cannot."""
    if isinstance(e, ir.Read):
        return value.get(id(e))
    if isinstance(e, ir.Const) and (e.dtype == dtype or DTYPES[e.dtype].is_integral):
        return literal(e.value, dtype)  # an integer literal promoted, as C would (``/ 9``)
    if e.dtype != dtype:
        return None
    if isinstance(e, ir.Cast):
        return vector_rhs(e.x, dtype, value)
    if isinstance(e, ir.Unary) and e.op == "-":
        a = vector_rhs(e.x, dtype, value)
        return None if a is None else f"(-{a})"
    if isinstance(e, ir.Binary) and e.op in ("+", "-", "*", "/"):
        a, b = vector_rhs(e.a, dtype, value), vector_rhs(e.b, dtype, value)
        return None if a is None or b is None else f"({a} {e.op} {b})"
    return None


def unit_dims(sp: Any, tensor: str) -> int:
    """How many trailing dims of ``tensor`` have extent 1 (a pack by 1 leaves one; a 1x1
    filter has two), in a specialized kernel; ``sp`` is a statement printer."""
    return 0 if sp.ctx.values is None else ir.unit_tail(sp.ctx.poly.program.tensors[tensor])


def vector_type(dtype: str, lanes: int) -> tuple[str, str]:
    """(typedef line, type name) for ``lanes`` elements of ``dtype``."""
    c = ctype(dtype)
    name = f"po_v{lanes}_{dtype}"
    size = lanes * DTYPES[dtype].np.itemsize
    return f"typedef {c} {name} __attribute__((vector_size({size})));", name


class Emitter:
    """Prints one register tile. ``sp`` is the statement's printer (flat addresses);
    ``ast_expr`` prints isl AST expressions."""

    def __init__(self, tile: Tile, sp: Any, ast_expr: AstExprPrinter, dtype: str,
                 vector_bytes: int) -> None:
        self.t, self.sp, self.ast_expr, self.dtype = tile, sp, ast_expr, dtype
        self.lanes = vector_bytes // DTYPES[dtype].np.itemsize
        self.k_its = [n.for_get_iterator().get_id().get_name() for n in tile.ks]
        self.u_it, self.v_it = (n.for_get_iterator().get_id().get_name()
                                for n in (tile.u, tile.v))
        self.nv = tile.cols // self.lanes if self.lanes else 0
        self.plan: dict[int, dict[Key, list[Lin]]] | None = None  # set by lines()
        self.target: dict[tuple[int, int], list[Lin]] | None = None
        self.zero = False  # set by lines(): the accumulators start at zero
        # set by lines(): (iterator, first value, trip count) of a reduction loop unrolled
        # into the body, whose steps share operand loads (a filter's rows)
        self.unroll: tuple[str, int, int] | None = None
        # set by edge_lines(): elements a partial tile may read past each packed local's end
        self.tails: dict[str, int] = {}

    def full_tile(self) -> str | None:
        """The C condition under which this instance is a full tile (None: cannot tell)."""
        u, v = trip_text(self.t.u, self.ast_expr), trip_text(self.t.v, self.ast_expr)
        if u is None or v is None:
            return None
        return f"{u} == {self.t.rows}L && {v} == {self.t.cols}L"

    def always_full(self) -> bool:
        """Is every instance a full tile (``full_dims`` both)? Then nothing prints for
        partial tiles, and none can keep the output's zeroing alive."""
        return all(self.full_dims())

    def full_dims(self) -> tuple[bool, bool]:
        """Are the tile's rows, and its columns, never partial: their loop has a constant
        trip of the tile's size (the tile divides them)?"""
        rows, cols = ((const_trip(n) or (0, 0))[1] == size
                      for n, size in ((self.t.u, self.t.rows), (self.t.v, self.t.cols)))
        return rows, cols

    def lines(self, pad: str) -> list[str] | None:
        t = self.t
        if self.dtype not in ("float32", "float64") or not self.nv or t.cols % self.lanes:
            return None
        if t.rows * self.nv > MAX_ACCUMULATORS:
            return None
        args = [ast_lin(a) for a in t.args]
        bases = [ast_lin(n.for_get_init()) for n in (t.u, t.v)]
        if any(a is None for a in args) or any(
                b is None or any(k in b for k in self.k_its) for b in bases):
            return None
        if vector_rhs(t.stmt.stmt.rhs, self.dtype, {id(r.read): "" for r in t.stmt.reads}) \
                is None:
            return None  # the right-hand side has what vectors cannot compute: plain loops
        self.args = dict(zip(t.stmt.iters, args, strict=True))
        self.bases = bases
        target = self._target()
        plan = self._plan() if target is not None else None
        if plan is None or target is None:
            return None
        self.target = target
        plan = self._unrolled(plan)
        self.plan, self.zero = plan, self._starts_at_zero()
        return self._print(target, plan, pad, zero=self.zero)

    def _starts_at_zero(self) -> bool:
        """Do the accumulators start at zero rather than at the target's contents? They do
        when the statement is a ``+=!`` (its elements are zeroed before their first update,
        and nothing else writes them in between) and this tile runs every update of each
        element it holds: the reduction iterators move with the tile's own reduction loops
        only (no outer block of the reduction), and no other piece of the statement (a
        padded window's border) updates these elements. Then the tile never reads the
        output: a pass over it saved where the reduction is short (1024 x 1024 x 16)."""
        s = self.t.stmt
        if not s.stmt.init or s.stmt.op != "+":
            return False
        mine = set(self.k_its) | {""}
        for it in s.stmt.reduction_iters:
            lin = self.args[it]
            if lin is None or set(lin) - mine:
                return False
        return whole_reductions(self.sp.ctx.poly, s)

    def _env(self, j: int, r: int, v: int) -> dict[str, Lin]:
        """The statement's iterators at row ``r`` of the tile, lane 0 of vector ``v`` (and
        step ``j`` of the unrolled reduction loop)."""
        u0, v0 = self.bases
        values = {self.u_it: add(u0, {"": r}),  # type: ignore[arg-type]
                  self.v_it: add(v0, {"": v * self.lanes, LANE: 1})}  # type: ignore[arg-type]
        if self.unroll is not None:
            values[self.unroll[0]] = {"": self.unroll[1] + j}
        return {it: substitute(a, values) for it, a in self.args.items()}  # type: ignore[arg-type]

    def _dims(self, indices: tuple[ir.Expr, ...], key: Key) -> list[Lin] | None:
        env = self._env(*key)
        dims = [index_lin(ix, env, self.lanes, atoms=True) for ix in indices]
        return None if any(d is None for d in dims) else dims  # type: ignore[return-value]

    def _grid(self, indices: tuple[ir.Expr, ...], tensor: str) -> dict[Key, list[Lin]] | None:
        out = {}
        unit = unit_dims(self.sp, tensor)
        steps = 1 if self.unroll is None else self.unroll[2]
        for j in range(steps):
            for r in range(self.t.rows):
                for v in range(self.nv):
                    dims = self._dims(indices, (j, r, v))
                    if dims is None or not self._lanes_ok(dims, unit):
                        return None
                    out[(j, r, v)] = dims
        return out


    def _lanes_ok(self, dims: list[Lin], unit: int = 0) -> bool:
        """Lanes run with stride 1 along the last dimension that is not of extent 1, or not
        at all (broadcast)."""
        last = len(dims) - 1 - unit
        if last < 0:
            return not any(LANE in d for d in dims)
        if any(LANE in d for i, d in enumerate(dims) if i != last):
            return False
        return dims[last].get(LANE, 1) == 1

    def _target(self) -> dict[tuple[int, int], list[Lin]] | None:
        """The accumulators' addresses: contiguous lanes, distinct rows, fixed along k."""
        s = self.t.stmt.stmt
        found = self._grid(tuple(ir.Var("int32", i, "index") for i in s.lhs), s.tensor)
        if found is None or not s.lhs:
            return None
        grid = {(r, v): dims for (_, r, v), dims in found.items()}
        if any(set(self.k_its) & names_in(d) for dims in grid.values() for d in dims):
            return None  # the accumulators must stay put along the reduction
        if any(LANE not in dims[-1] for dims in grid.values()):
            return None  # and be contiguous vectors
        first = grid[(0, 0)]
        if self.t.rows > 1 and grid[(1, 0)][:-1] == first[:-1]:
            return None  # rows would share accumulators
        return grid

    def _plan(self) -> dict[int, dict[Key, list[Lin]]] | None:
        """Each operand's addresses over the tile; None when one is not affine enough."""
        s = self.t.stmt
        plan = {}
        for r in s.reads:
            if r.read.tensor == s.stmt.tensor or r.read.dtype != self.dtype:
                return None
            grid = self._grid(r.read.indices, r.read.tensor)
            if grid is None:
                return None
            plan[id(r.read)] = grid
        return plan

    def _address(self, tensor: str, dims: list[Lin]) -> str:
        t = self.sp.ctx.poly.program.tensors[tensor]
        index = [text(d, self.ast_expr.ident) for d in dims]
        return f"&{self.sp.ref(t)}[{self.sp.flat(t, index)}]"

    def edge_lines(self, pad: str, padded: frozenset[str]) -> list[str] | None:
        """The register tile on a partial tile: accumulators go through a zeroed scratch
        tile, of which only the valid rows and columns are read from and written back to
        the target. Operands that move along a dimension that can be partial (rows, or
        vectors and lanes) must be packed copies: how far the extra rows and lanes read past
        each goes to ``self.tails``, which the runtime allocates (``KernelSource.tails``),
        so no read leaves an allocation."""
        plan, target = self.plan, self.target
        if plan is None or target is None:  # lines() found no register tile
            return None
        reads = {id(r.read): r.read for r in self.t.stmt.reads}
        full = self.full_dims()
        tails: dict[str, int] = {}
        for rid, grid in plan.items():
            moving = _moving_dims(grid)
            if not moving or all(f or not m for f, m in zip(full, _moves_with(grid),
                                                            strict=True)):
                continue  # it moves only along tile dimensions that are never partial: a
                # partial tile reads no more of it than a full one
            tensor = reads[rid].tensor
            tail = self._overrun(tensor, grid, moving) if tensor in padded else None
            if tail is None:
                return None
            tails[tensor] = max(tails.get(tensor, 0), tail)
        self.tails = tails
        rows = trip_text(self.t.u, self.ast_expr)
        cols = trip_text(self.t.v, self.ast_expr)
        c, cols_total = ctype(self.dtype), self.t.cols
        tmp = f"{pad}  {c} po_tile[{self.t.rows}][{cols_total}] = {{{{0}}}};"
        copy_in, copy_out = self._edge_copies(rows or "0L", cols or "0L")
        if self.zero:
            copy_in = []  # the zeroed scratch tile is the start
        body = self._print(target, plan, pad + "  ", scratch=True)
        return [f"{pad}{{", tmp, *[f"{pad}  {x}" for x in copy_in], *body,
                *[f"{pad}  {x}" for x in copy_out], f"{pad}}}"]

    def _overrun(self, tensor: str, grid: dict[Key, list[Lin]], moving: set[int]) -> int | None:
        """How many elements past the end of ``tensor`` a partial tile may read (and
        discard): along each dimension it moves in, the span of its rows', vectors' and
        lanes' offsets times the dimension's stride; the local is allocated with that many
        more. None when a stride is not known (a size-generic kernel)."""
        values, rank = self.sp.ctx.values, len(grid[(0, 0, 0)])
        total = 0
        for d in moving:
            offsets = [dims[d].get("", 0) for dims in grid.values()]
            lanes = max(abs(dims[d].get(LANE, 0)) for dims in grid.values()) * (self.lanes - 1)
            inner = range(d + 1, rank)
            if inner and values is None:
                return None
            stride = math.prod(values[f"{tensor}.{e}"] for e in inner) if values else 1
            total += (max(offsets) - min(offsets) + lanes) * stride
        return total

    def _edge_copies(self, rows: str, cols: str) -> tuple[list[str], list[str]]:
        """Loops moving the valid part of the target tile into and out of ``po_tile``."""
        s = self.t.stmt.stmt
        u0, v0 = self.bases
        values = {self.u_it: add(u0, {"po_r": 1}),  # type: ignore[arg-type]
                  self.v_it: add(v0, {"po_j": 1})}  # type: ignore[arg-type]
        env = {it: substitute(a, values) for it, a in self.args.items()}  # type: ignore[arg-type]
        dims = [index_lin(ir.Var("int32", i, "index"), env) for i in s.lhs]
        names = {"po_r": "po_r", "po_j": "po_j"}
        index = [text(d or {}, lambda k: names.get(k) or self.ast_expr.ident(k)) for d in dims]
        t = self.sp.ctx.poly.program.tensors[s.tensor]
        elem = f"{self.sp.ref(t)}[{self.sp.flat(t, index)}]"
        head = (f"for (long po_r = 0; po_r < {rows}; po_r++) "
                f"for (long po_j = 0; po_j < {cols}; po_j++) ")
        return ([head + f"po_tile[po_r][po_j] = {elem};"],
                [head + f"{elem} = po_tile[po_r][po_j];"])

    def _print(self, target: dict[tuple[int, int], list[Lin]],
               plan: dict[int, dict[Key, list[Lin]]], pad: str,
               scratch: bool = False, zero: bool = False) -> list[str]:
        t = self.t
        typedef, vec = vector_type(self.dtype, self.lanes)
        tensor = t.stmt.stmt.tensor
        accs = sorted(target)
        out = [f"{pad}{{ /* register tile of {t.stmt.name}: {t.rows} x {t.cols} */",
               f"{pad}  {typedef}"]
        def home(r: int, v: int) -> str:  # where accumulator (r, v) lives in memory
            if scratch:
                return f"&po_tile[{r}][{v * self.lanes}]"
            return self._address(tensor, target[(r, v)])
        for r, v in accs:
            out.append(f"{pad}  {vec} acc_{r}_{v} = {{0}};" if zero else
                       f"{pad}  {vec} acc_{r}_{v}; __builtin_memcpy(&acc_{r}_{v}, "
                       f"{home(r, v)}, sizeof acc_{r}_{v});")
        ap = self.ast_expr
        inner = pad + "  "
        rolled = len(t.ks) - (self.unroll is not None)
        self.sp.ctx.nested_tile_loops |= rolled > 1
        for k, it in zip(t.ks, self.k_its, strict=True):
            if self.unroll is not None and it == self.unroll[0]:
                continue  # its steps are in the body
            # the printer unrolls what pays (``_unrolled``); GCC 12 unrolling a 3-tap loop
            # of 28 rows whole kept 84 products' operands live and spilled them
            out.append(f"{inner}#pragma GCC unroll 1")
            out.append(f"{inner}for (long {it} = {ap.expr(k.for_get_init(), top=True)}; "
                       f"{ap.expr(k.for_get_cond(), top=True)}; {it} += "
                       f"{ap.expr(k.for_get_inc(), top=True)}) {{")
            inner += "  "
        if self.unroll is not None:
            out += [f"{inner}{x}" for x in self._interleaved(plan, vec)]
        else:
            body, values = self._loads(plan, vec)
            out += [f"{inner}{x}" for x in body]
            for r, v in accs:
                expr = vector_rhs(t.stmt.stmt.rhs, self.dtype,
                                  {rid: values[(rid, 0, r, v)] for rid in plan})
                out.append(f"{inner}acc_{r}_{v} += {expr};")
        for depth in reversed(range(rolled)):
            out.append(f"{pad}  {'  ' * depth}}}")
        for r, v in accs:
            out.append(f"{pad}  __builtin_memcpy({home(r, v)}, &acc_{r}_{v}, "
                       f"sizeof acc_{r}_{v});")
        return [*out, f"{pad}}}"]

    def _loads(self, plan: dict[int, dict[Key, list[Lin]]],
               vec: str) -> tuple[list[str], dict[tuple[int, int, int, int], str]]:
        """Each distinct operand value loaded once per reduction step; the value's name
        for every (read, row, vector)."""
        reads = {id(r.read): r.read for r in self.t.stmt.reads}
        c = ctype(self.dtype)
        body, bases = self._pointers(plan)
        values: dict[tuple[int, int, int, int], str] = {}
        for n, (rid, grid) in enumerate(plan.items()):
            seen: dict[str, str] = {}
            for key, dims in sorted(grid.items()):
                addr = self._operand(bases, rid, reads[rid].tensor, dims)
                vector = _has_lane(dims)
                if addr + str(vector) not in seen:
                    name = f"x{n}_{len(seen)}"
                    seen[addr + str(vector)] = name
                    body.append(f"{vec} {name}; __builtin_memcpy(&{name}, {addr}, sizeof {name});"
                                if vector else f"const {c} {name} = *{addr};")
                values[(rid, *key)] = seen[addr + str(vector)]
        return body, values

    def _pointers(self, plan: dict[int, dict[Key, list[Lin]]]
                  ) -> tuple[list[str], dict[int, tuple[str, list[Lin]]]]:
        """A pointer per operand to its first value in the step, where every other value
        is a constant offset from it (its declaration; each operand's name and first
        index): the compiler then addresses the rows as displacements from one register.
        Indexed from the array, GCC 12 kept a pointer per row of an unpacked matrix:
        28 rows (mm 4096x16x1024) reloaded 15 of them from the stack at every step."""
        reads = {id(r.read): r.read for r in self.t.stmt.reads}
        c = ctype(self.dtype)
        lines: list[str] = []
        bases: dict[int, tuple[str, list[Lin]]] = {}
        for n, (rid, grid) in enumerate(plan.items()):
            tensor = reads[rid].tensor
            first = grid[min(grid)]
            if tensor in self.sp.ctx.modulo or not all(
                    _constant_offset(dims, first) for dims in grid.values()):
                continue
            name = f"po_p{n}"
            lines.append(f"const {c} *{name} = {self._address(tensor, first)};")
            bases[rid] = (name, first)
        return lines, bases

    def _operand(self, bases: dict[int, tuple[str, list[Lin]]], rid: int, tensor: str,
                 dims: list[Lin]) -> str:
        """The address of an operand's value: from its pointer (``_pointers``) if it has
        one."""
        if rid not in bases:
            return self._address(tensor, dims)
        name, first = bases[rid]
        t = self.sp.ctx.poly.program.tensors[tensor]
        offset = [f"({d.get('', 0) - f.get('', 0)}L)" for d, f in zip(dims, first, strict=True)]
        return f"&{name}[{self.sp.flat(t, offset)}]"

    def _unrolled(self, plan: dict[int, dict[Key, list[Lin]]]) -> dict[int, dict[Key, list[Lin]]]:
        """``plan``, or the plan with one reduction loop of the tile (innermost first, a
        constant trip) unrolled into its body when that loads fewer vectors per update: a
        filter's row ``kh`` moves the input as the tile's rows do, so each input row loaded
        serves ``KH`` output rows (3x fewer loads for a 3x3 filter). Sets ``self.unroll``."""
        base = _vector_loads(plan)
        for k, it in reversed(list(zip(self.t.ks, self.k_its, strict=True))):
            trip = const_trip(k)
            if trip is None or trip[1] < 2 or \
                    trip[1] * self.t.rows * self.nv > MAX_UNROLLED_UPDATES:
                continue
            if any(it in expr_ids(e) for n in self.t.ks if n is not k
                   for e in (n.for_get_init(), n.for_get_cond())):
                continue  # another loop of the tile is bounded by it
            self.unroll = (it, *trip)
            wide = self._plan()
            if wide is not None and _vector_loads(wide) < trip[1] * base:
                return wide
            self.unroll = None
        return plan

    def _interleaved(self, plan: dict[int, dict[Key, list[Lin]]], vec: str) -> list[str]:
        """The body of a tile with an unrolled reduction loop: each operand value loaded
        once, just before the first update that needs it, and each update right after the
        last load it needs; a loaded row then serves its updates and dies (one vector live
        besides the accumulators, where loading every value first would need a register
        per input row)."""
        reads = {id(r.read): r.read for r in self.t.stmt.reads}
        c = ctype(self.dtype)
        pointers, bases = self._pointers(plan)
        names: dict[tuple[int, str], str] = {}
        order: list[str] = []  # the values' names, in load order
        decl: dict[str, str] = {}
        after: dict[str, list[str]] = {}  # a value's name -> the updates right after it
        for j, r, v in sorted(next(iter(plan.values())), key=lambda k: (k[1], k[2], k[0])):
            values, last = {}, 0
            for n, (rid, grid) in enumerate(plan.items()):
                dims = grid[(j, r, v)]
                addr = self._operand(bases, rid, reads[rid].tensor, dims)
                vector = _has_lane(dims)
                key = (n, addr + str(vector))
                if key not in names:
                    name = names[key] = f"x{n}_{sum(1 for m, _ in names if m == n)}"
                    decl[name] = (f"{vec} {name}; __builtin_memcpy(&{name}, {addr}, "
                                  f"sizeof {name});" if vector else f"const {c} {name} = *{addr};")
                    order.append(name)
                values[rid] = names[key]
                last = max(last, order.index(names[key]))
            expr = vector_rhs(self.t.stmt.stmt.rhs, self.dtype, values)
            after.setdefault(order[last], []).append(f"acc_{r}_{v} += {expr};")
        return [*pointers, *(line for name in order
                             for line in (decl[name], *after.get(name, [])))]


def _constant_offset(dims: list[Lin], first: list[Lin]) -> bool:
    """Do ``dims`` differ from ``first`` by constants only (the lane's term too)?"""
    return all(all(d.get(k, 0) == f.get(k, 0) for k in set(d) | set(f) if k != "")
               for d, f in zip(dims, first, strict=True))


def _vector_loads(plan: dict[int, dict[Key, list[Lin]]]) -> int:
    """Distinct vector loads of a tile step's operands (broadcasts not counted)."""
    return sum(len({str(d) for d in grid.values() if _has_lane(d)}) for grid in plan.values())


def _moving_dims(grid: dict[Key, list[Lin]]) -> set[int]:
    """The dimensions of an operand's index that change across a tile's rows and vectors
    (at one step of the reduction), or move with the lanes."""
    out = set()
    for (j, _, _), dims in grid.items():
        first = grid[(j, 0, 0)]
        out |= {d for d, lin in enumerate(dims) if LANE in lin or lin != first[d]}
    return out


def _moves_with(grid: dict[Key, list[Lin]]) -> tuple[bool, bool]:
    """Does an operand's index change across a tile's rows, and across its vectors or
    lanes (the columns)?"""
    rows = any(dims != grid[(j, 0, v)] for (j, r, v), dims in grid.items() if r)
    cols = any(_has_lane(dims) or dims != grid[(j, r, 0)] for (j, r, v), dims in grid.items())
    return rows, cols


def _has_lane(dims: list[Lin]) -> bool:
    """Does an operand move with the vector lanes (in its last dim of extent above 1)?"""
    return any(LANE in d for d in dims)


def invariant_reads(s: PolyStmt, args: list[isl.AstExpr],
                    it: str) -> list[tuple[ir.Read, list[Lin]]]:
    """The affine reads of ``s`` (at AST arguments ``args``) that do not move with loop
    iterator ``it`` and read no tensor ``s`` writes: each with its index as linear forms."""
    lins = [ast_lin(a) for a in args]
    if any(x is None for x in lins) or not all(r.affine for r in s.reads):
        return []
    env = dict(zip(s.iters, lins, strict=True))
    out = []
    for r in s.reads:
        if r.read.tensor == s.stmt.tensor or r.read.pad is not None:
            continue
        dims = [index_lin(ix, env) for ix in r.read.indices]  # type: ignore[arg-type]
        if all(d is not None and it not in d for d in dims):
            out.append((r.read, [d for d in dims if d is not None]))
    return out
