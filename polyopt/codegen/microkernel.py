"""Register tiles: an unroll-and-jammed, vectorized reduction printed as a micro-kernel.

The schedule shape ``for k { for r (unroll) { for v (vectorize) { S } } }``, where S
accumulates with ``+`` into an element that does not move with ``k``, is printed as the
BLIS/Goto micro-kernel: ``MR x NR/lanes`` accumulators in vector registers (GCC/Clang
vector extensions, sized from the machine's vector width), loaded before the ``k`` loop and
stored after it; inside, each operand is loaded once per ``k`` step, as a vector when it
is contiguous along ``v`` and as a broadcast scalar when it does not move with ``v``.

It applies only where that is exact: full tiles (constant trip counts), affine accesses,
the target written nowhere else in the tile, and a right-hand side of ``+ - * /``, reads
and constants in the target's floating type. Anything else prints as plain loops.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import islpy as isl

from polyopt import ir
from polyopt.codegen.exprs import AstExprPrinter, cname, ctype, literal
from polyopt.poly.model import PolyStmt
from polyopt.schedule.tree import MARK_PREFIX

Lin = dict[str, int]  # name -> coefficient; "" is the constant
MAX_ACCUMULATORS = 32


@dataclass(frozen=True)
class Tile:
    stmt: PolyStmt
    k: isl.AstNode  # the reduction loop
    u: isl.AstNode  # the unrolled rows
    v: isl.AstNode  # the vector columns
    args: tuple[isl.AstExpr, ...]  # the statement's iterator values
    rows: int
    cols: int


def match(k: isl.AstNode, tags: dict[str, frozenset[str]], trips: dict[str, int | None],
          stmt_of: Callable[[str], PolyStmt]) -> Tile | None:
    """The register tile rooted at for-loop ``k``, or None when the shape does not fit."""
    u, u_name = _only_for(k.for_get_body())
    if u is None or "unroll" not in tags.get(u_name, frozenset()):
        return None
    v, v_name = _only_for(u.for_get_body())
    if v is None or "vectorize" not in tags.get(v_name, frozenset()):
        return None
    call = _only_user(v.for_get_body())
    if call is None or k.for_is_degenerate():
        return None
    s = stmt_of(call.get_op_arg(0).get_id().get_name())
    if s.kind != "update" or s.stmt.op != "+" or s.guarded or not all(r.affine
                                                                      for r in s.reads):
        return None
    rows, cols = trips.get(u_name), trips.get(v_name)  # full tiles; partial ones are guarded
    if rows is None or cols is None:
        return None
    args = tuple(call.get_op_arg(i + 1) for i in range(call.get_op_n_arg() - 1))
    return Tile(s, k, u, v, args, rows, cols)


def _only_for(node: isl.AstNode, name: str = "") -> tuple[isl.AstNode | None, str]:
    """The single for loop ``node`` consists of (through marks), and its loop name."""
    while node.get_type() == isl.ast_node_type.mark:
        mark = node.mark_get_id().get_name()
        name = mark[len(MARK_PREFIX):] if mark.startswith(MARK_PREFIX) else name
        node = node.mark_get_node()
    if node.get_type() == isl.ast_node_type.block:
        kids = node.block_get_children()
        if kids.n_ast_node() != 1:
            return None, name
        return _only_for(kids.get_at(0), name)
    return (node, name) if node.get_type() == isl.ast_node_type.for_ else (None, name)


def _only_user(node: isl.AstNode) -> isl.AstExpr | None:
    if node.get_type() == isl.ast_node_type.block:
        kids = node.block_get_children()
        return _only_user(kids.get_at(0)) if kids.n_ast_node() == 1 else None
    if node.get_type() != isl.ast_node_type.user:
        return None
    return node.user_get_expr()


def ast_lin(e: isl.AstExpr) -> Lin | None:
    """An isl AST expression as a linear form, when it is one."""
    kind = e.get_type()
    if kind == isl.ast_expr_type.int:
        return {"": int(e.int_get_val().to_python())}
    if kind == isl.ast_expr_type.id:
        return {e.get_id().get_name(): 1}
    op = e.get_op_type()
    args = [ast_lin(e.get_op_arg(i)) for i in range(e.get_op_n_arg())]
    if any(a is None for a in args):
        return None
    parts: list[Lin] = [a for a in args if a is not None]
    if op == isl.ast_expr_op_type.add:
        return _add(parts[0], parts[1])
    if op == isl.ast_expr_op_type.sub:
        return _add(parts[0], _scale(parts[1], -1))
    if op == isl.ast_expr_op_type.minus:
        return _scale(parts[0], -1)
    if op == isl.ast_expr_op_type.mul:
        a, b = parts
        if set(a) <= {""}:
            return _scale(b, a.get("", 0))
        if set(b) <= {""}:
            return _scale(a, b.get("", 0))
    return None


def _add(a: Lin, b: Lin) -> Lin:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + v
    return {k: v for k, v in out.items() if v or k == ""}


def _scale(a: Lin, f: int) -> Lin:
    return {k: v * f for k, v in a.items() if v * f or k == ""}


def trip_text(loop: isl.AstNode, printer: AstExprPrinter) -> str | None:
    """The trip count of a unit-stride ``for (it = lo; it <= hi; ...)`` as C text."""
    cond = loop.for_get_cond()
    if ast_lin(loop.for_get_inc()) != {"": 1} or cond.get_type() != isl.ast_expr_type.op:
        return None
    op = cond.get_op_type()
    it = loop.for_get_iterator().get_id().get_name()
    if op not in (isl.ast_expr_op_type.le, isl.ast_expr_op_type.lt) or ast_lin(
            cond.get_op_arg(0)) != {it: 1}:
        return None
    one = " + 1L" if op == isl.ast_expr_op_type.le else ""
    return (f"({printer.expr(cond.get_op_arg(1))} - {printer.expr(loop.for_get_init())}"
            f"{one})")


def index_lin(e: ir.Expr, env: dict[str, Lin]) -> Lin | None:
    """An index expression over the statement's iterators, as a linear form over ``env``."""
    if isinstance(e, ir.Const) and not isinstance(e.value, float):
        return {"": int(e.value)}
    if isinstance(e, ir.Var):
        return env.get(e.name) if e.kind == "index" else {e.name: 1}
    if isinstance(e, ir.Cast) and not e.dtype.startswith("float"):
        return index_lin(e.x, env)
    if isinstance(e, ir.Unary) and e.op == "-":
        a = index_lin(e.x, env)
        return None if a is None else _scale(a, -1)
    if isinstance(e, ir.Binary) and e.op in ("+", "-", "*"):
        a, b = index_lin(e.a, env), index_lin(e.b, env)
        if a is None or b is None:
            return None
        if e.op == "+":
            return _add(a, b)
        if e.op == "-":
            return _add(a, _scale(b, -1))
        if set(a) <= {""}:
            return _scale(b, a.get("", 0))
        if set(b) <= {""}:
            return _scale(a, b.get("", 0))
    return None


def vector_rhs(e: ir.Expr, dtype: str, value: dict[int, str]) -> str | None:
    """The right-hand side over hoisted operand values (``value[id(read)]``), or None when
    it uses anything a vector expression cannot."""
    if isinstance(e, ir.Read):
        return value.get(id(e))
    if e.dtype != dtype:
        return None
    if isinstance(e, ir.Const):
        return literal(e.value, dtype)
    if isinstance(e, ir.Cast):
        return vector_rhs(e.x, dtype, value)
    if isinstance(e, ir.Unary) and e.op == "-":
        a = vector_rhs(e.x, dtype, value)
        return None if a is None else f"(-{a})"
    if isinstance(e, ir.Binary) and e.op in ("+", "-", "*", "/"):
        a, b = vector_rhs(e.a, dtype, value), vector_rhs(e.b, dtype, value)
        return None if a is None or b is None else f"({a} {e.op} {b})"
    return None


def vector_type(dtype: str, lanes: int) -> tuple[str, str]:
    """(typedef line, type name) for ``lanes`` elements of ``dtype``."""
    c = ctype(dtype)
    name = f"po_v{lanes}_{dtype}"
    size = lanes * (8 if dtype == "float64" else 4)
    return f"typedef {c} {name} __attribute__((vector_size({size})));", name


class Emitter:
    """Prints one register tile. ``sp`` is the statement's printer (index and flat address
    text); ``ast_expr`` prints isl AST expressions."""

    def __init__(self, tile: Tile, sp: Any, ast_expr: AstExprPrinter, dtype: str,
                 vector_bytes: int) -> None:
        self.t, self.sp, self.ast_expr, self.dtype = tile, sp, ast_expr, dtype
        self.lanes = vector_bytes // (8 if dtype == "float64" else 4)
        self.k_it, self.u_it, self.v_it = (n.for_get_iterator().get_id().get_name()
                                           for n in (tile.k, tile.u, tile.v))

    def lines(self, pad: str) -> list[str] | None:
        t, lanes = self.t, self.lanes
        if self.dtype not in ("float32", "float64") or t.cols % lanes:
            return None
        nv = t.cols // lanes
        if t.rows * nv > MAX_ACCUMULATORS:
            return None
        env = [ast_lin(a) for a in t.args]
        if any(e is None for e in env) or not self._bases_free():
            return None
        lin_env = dict(zip(t.stmt.iters, env, strict=True))
        plan = self._plan(lin_env)  # type: ignore[arg-type]
        if plan is None:
            return None
        return self._print(plan, nv, pad)

    def full_tile(self) -> str | None:
        """The C condition under which this instance is a full tile (None: cannot tell)."""
        u, v = trip_text(self.t.u, self.ast_expr), trip_text(self.t.v, self.ast_expr)
        if u is None or v is None:
            return None
        return f"{u} == {self.t.rows}L && {v} == {self.t.cols}L"

    def _bases_free(self) -> bool:
        """The rows' and columns' first values must not move with the reduction loop."""
        for n in (self.t.u, self.t.v):
            lin = ast_lin(n.for_get_init())
            if lin is None or self.k_it in lin:
                return False
        return True

    def _plan(self, env: dict[str, Lin]) -> dict[int, tuple[bool, bool]] | None:
        """For each read: (moves with the rows, moves with the columns); None if unfit."""
        s = self.t.stmt
        target = s.stmt.tensor
        lhs = [index_lin(ir.Var("int64", i, "index"), env) for i in s.stmt.lhs]
        if not self._target_fits(lhs):
            return None
        plan: dict[int, tuple[bool, bool]] = {}
        for r in s.reads:
            if r.read.tensor == target or r.read.dtype != self.dtype:
                return None
            dims = [index_lin(ix, env) for ix in r.read.indices]
            if any(d is None for d in dims):
                return None
            moves = self._moves(dims)  # type: ignore[arg-type]
            if moves is None:
                return None
            plan[id(r.read)] = moves
        return plan

    def _target_fits(self, lhs: list[Lin | None]) -> bool:
        """Contiguous along the columns, one row per unrolled row, fixed along ``k``."""
        if not lhs or any(d is None for d in lhs):
            return False
        dims: list[Lin] = [d for d in lhs if d is not None]
        if any(self.k_it in d for d in dims) or not self._contiguous(dims):
            return False
        row_dims = [i for i, d in enumerate(dims) if d.get(self.u_it, 0)]
        return len(row_dims) == 1 and row_dims[0] != len(dims) - 1

    def _contiguous(self, dims: list[Lin]) -> bool:
        return (dims[-1].get(self.v_it, 0) == 1
                and all(not d.get(self.v_it, 0) for d in dims[:-1]))

    def _moves(self, dims: list[Lin]) -> tuple[bool, bool] | None:
        by_row = any(d.get(self.u_it, 0) for d in dims)
        by_col = any(d.get(self.v_it, 0) for d in dims)
        if by_col and not self._contiguous(dims):
            return None
        return by_row, by_col

    def _address(self, read_or_lhs: ir.Read | None, r: int, v: int) -> str:
        """``&T[flat]`` of a read (or the target when None) at row ``r``, vector ``v``."""
        rename = {self.u_it: f"({self.u_it} + {r}L)",
                  self.v_it: f"({self.v_it} + {v * self.lanes}L)"}
        printer = AstExprPrinter(self.ast_expr.sizes, rename)
        s = self.t.stmt
        self.sp.env = {it: printer.expr(a) for it, a in zip(s.iters, self.t.args, strict=True)}
        try:
            if read_or_lhs is None:
                tensor = s.stmt.tensor
                index = [self.sp._index(ir.Var("int64", i, "index")) for i in s.stmt.lhs]
            else:
                tensor = read_or_lhs.tensor
                index = [self.sp._index(ix) for ix in read_or_lhs.indices]
            t = self.sp.ctx.poly.program.tensors[tensor]
            return f"&{cname('tensor', tensor)}[{self.sp._flat(t, index)}]"
        finally:
            self.sp.env = {}

    def _print(self, plan: dict[int, tuple[bool, bool]], nv: int, pad: str) -> list[str]:
        t, vt = self.t, vector_type(self.dtype, self.lanes)
        typedef, vec = vt
        c = ctype(self.dtype)
        ap = self.ast_expr
        out = [f"{pad}{{ /* register tile of {t.stmt.name}: {t.rows} x {t.cols} */",
               f"{pad}  {typedef}",
               f"{pad}  const long {self.u_it} = {ap.expr(t.u.for_get_init(), top=True)};",
               f"{pad}  const long {self.v_it} = {ap.expr(t.v.for_get_init(), top=True)};"]
        accs = [(r, v) for r in range(t.rows) for v in range(nv)]
        for r, v in accs:
            out.append(f"{pad}  {vec} acc_{r}_{v}; __builtin_memcpy(&acc_{r}_{v}, "
                       f"{self._address(None, r, v)}, sizeof acc_{r}_{v});")
        k = t.k
        it = self.k_it
        out.append(f"{pad}  for (long {it} = {ap.expr(k.for_get_init(), top=True)}; "
                   f"{ap.expr(k.for_get_cond(), top=True)}; {it} += "
                   f"{ap.expr(k.for_get_inc(), top=True)}) {{")
        body, values = self._loads(plan, nv, vec, c)
        out += [f"{pad}    {x}" for x in body]
        rhs = t.stmt.stmt.rhs
        for r, v in accs:
            expr = vector_rhs(rhs, self.dtype, {rid: values[(rid, r, v)] for rid in plan})
            out.append(f"{pad}    acc_{r}_{v} += {expr};")
        out.append(f"{pad}  }}")
        for r, v in accs:
            out.append(f"{pad}  __builtin_memcpy({self._address(None, r, v)}, &acc_{r}_{v}, "
                       f"sizeof acc_{r}_{v});")
        return [*out, f"{pad}}}"]

    def _loads(self, plan: dict[int, tuple[bool, bool]], nv: int, vec: str,
               c: str) -> tuple[list[str], dict[tuple[int, int, int], str]]:
        """Each operand loaded once per reduction step; the value name per (read, r, v)."""
        reads = {id(r.read): r.read for r in self.t.stmt.reads}
        body: list[str] = []
        values: dict[tuple[int, int, int], str] = {}
        for n, (rid, (by_row, by_col)) in enumerate(plan.items()):
            for r in range(self.t.rows if by_row else 1):
                for v in range(nv if by_col else 1):
                    name = f"x{n}_{r}_{v}"
                    addr = self._address(reads[rid], r, v)
                    if by_col:
                        body.append(f"{vec} {name}; __builtin_memcpy(&{name}, {addr}, "
                                    f"sizeof {name});")
                    else:
                        body.append(f"const {c} {name} = *{addr};")
            for r in range(self.t.rows):
                for v in range(nv):
                    values[(rid, r, v)] = f"x{n}_{r if by_row else 0}_{v if by_col else 0}"
        return body, values
