"""Zeroing passes that register tiles make dead.

A ``+=!`` contraction's register tile whose accumulators start at zero
(``microkernel.Emitter``: it runs every update of each element it holds) never reads what
the statement's ``_init`` wrote. When every instance of every piece of the statement runs in
such tiles (full tiles, and partial tiles through the zeroed scratch tile), and every
element the init writes gets at least one update, the init is dead: the printer leaves it
out. On a depthwise convolution at 112x112 that zeroing was a sixth of the kernel's time (a
``memset`` of each channel before its tiles overwrote it).

The analysis walks the AST as the C walker will print it: a loop where a register tile
prints is not entered; a tile that cannot start at zero, or whose partial tiles fall back
to plain loops (which read the output), keeps the init alive.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import islpy as isl

from polyopt.codegen.ast import children
from polyopt.poly.model import PolyProgram, PolyStmt
from polyopt.poly.pieces import all_updated, update_pieces

# A register tile at this AST loop, as the walker prints it: (its statement, whether
# every instance it prints starts at zero), or None where no tile prints.
TileAt = Callable[[isl.AstNode], tuple[PolyStmt, bool] | None]


def dead_inits(root: isl.AstNode, poly: PolyProgram, tile_at: TileAt) -> frozenset[str]:
    """The ``_init`` statements no instance of which is ever read (see the module doc)."""
    zeroed: Counter[str] = Counter()  # instances in tiles that start at zero
    other: Counter[str] = Counter()  # instances printed any other way
    _walk(root, tile_at, zeroed, other)
    dead = set()
    for init in poly.stmts:
        if init.kind != "init":
            continue
        pieces = update_pieces(poly, init)
        if pieces and all(zeroed[s.name] and not other[s.name] for s in pieces) \
                and all_updated(init, pieces):
            dead.add(init.name)
    return frozenset(dead)


def _walk(node: isl.AstNode, tile_at: TileAt, zeroed: Counter[str], other: Counter[str]
          ) -> None:
    kind = node.get_type()
    if kind == isl.ast_node_type.for_:
        got = tile_at(node)
        if got is not None:
            (zeroed if got[1] else other)[got[0].name] += 1
            return
    if kind == isl.ast_node_type.user:
        other[node.user_get_expr().get_op_arg(0).get_id().get_name()] += 1
    for child in children(node):
        _walk(child, tile_at, zeroed, other)


def used_names(node: isl.AstNode) -> set[str]:
    """The statements AST ``node`` runs instances of."""
    if node.get_type() == isl.ast_node_type.user:
        return {node.user_get_expr().get_op_arg(0).get_id().get_name()}
    return set().union(*(used_names(c) for c in children(node)))

