"""Finding register tiles in the isl AST: the loop shape ``for k { for r (unroll) { for v
(vectorize) { S } } }`` (``match``) and the small AST queries the printers share (a loop's
only child, its trip count as C text)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import islpy as isl

from polyopt.codegen.exprs import AstExprPrinter
from polyopt.codegen.linear import ast_lin
from polyopt.poly.model import PolyStmt
from polyopt.schedules.limits import CAPS
from polyopt.schedules.marks import Marks, Tag, marked_loop

MAX_REDUCTION_LOOPS = CAPS.max_reduction_loops  # the limits say why (limits.Caps)


@dataclass(frozen=True)
class Tile:
    stmt: PolyStmt
    ks: tuple[isl.AstNode, ...]  # the reduction loops, outermost first
    u: isl.AstNode  # the unrolled rows
    v: isl.AstNode  # the vector columns
    args: tuple[isl.AstExpr, ...]  # the statement's iterator values
    rows: int
    cols: int


def match(k: isl.AstNode, tags: dict[str, Marks], trips: dict[str, int | None],
          stmt_of: Callable[[str], PolyStmt]) -> Tile | None:
    """The register tile rooted at for-loop ``k``, or None when the shape does not fit:
    ``k`` and the untagged loops right inside it (reductions, e.g. ``c, kh, kw`` of a
    convolution) run with the accumulators in registers."""
    ks = [k]
    while True:
        nxt, name = only_for(ks[-1].for_get_body())
        if nxt is None or len(ks) > MAX_REDUCTION_LOOPS:
            return None
        label = tags.get(name, frozenset())
        if Tag.UNROLL in label:
            u, u_name = nxt, name
            break
        if label:
            return None
        ks.append(nxt)
    v, v_name = only_for(u.for_get_body())
    if v is None or Tag.VECTORIZE not in tags.get(v_name, frozenset()):
        return None
    call = only_user(v.for_get_body())
    if call is None or any(x.for_is_degenerate() for x in ks):
        return None
    s = stmt_of(call.get_op_arg(0).get_id().get_name())
    if s.kind != "update" or s.stmt.op != "+" or s.guarded or not all(r.affine
                                                                      for r in s.reads):
        return None
    rows, cols = trips.get(u_name), trips.get(v_name)  # full tiles; partial ones are guarded
    if rows is None or cols is None:
        return None
    # The accumulators stay in registers across the ks only if the tile does not move or
    # change shape with them (a padded window's rows end earlier as kh grows).
    k_its = {n.for_get_iterator().get_id().get_name() for n in ks}
    if any(k_its & expr_ids(e) for n in (u, v) for e in (n.for_get_init(), n.for_get_cond())):
        return None
    args = tuple(call.get_op_arg(i + 1) for i in range(call.get_op_n_arg() - 1))
    return Tile(s, tuple(ks), u, v, args, rows, cols)


def expr_ids(e: isl.AstExpr) -> set[str]:
    """The names an isl AST expression reads."""
    kind = e.get_type()
    if kind == isl.ast_expr_type.id:
        return {e.get_id().get_name()}
    if kind != isl.ast_expr_type.op:
        return set()
    return set().union(*(expr_ids(e.get_op_arg(i)) for i in range(e.get_op_n_arg())))


def only_for(node: isl.AstNode, name: str = "") -> tuple[isl.AstNode | None, str]:
    """The single for loop ``node`` consists of (through marks), and its loop name."""
    while node.get_type() == isl.ast_node_type.mark:
        name = marked_loop(node) or name
        node = node.mark_get_node()
    if node.get_type() == isl.ast_node_type.block:
        kids = node.block_get_children()
        if kids.n_ast_node() != 1:
            return None, name
        return only_for(kids.get_at(0), name)
    return (node, name) if node.get_type() == isl.ast_node_type.for_ else (None, name)


def only_user(node: isl.AstNode) -> isl.AstExpr | None:
    if node.get_type() == isl.ast_node_type.block:
        kids = node.block_get_children()
        return only_user(kids.get_at(0)) if kids.n_ast_node() == 1 else None
    if node.get_type() != isl.ast_node_type.user:
        return None
    return node.user_get_expr()


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
