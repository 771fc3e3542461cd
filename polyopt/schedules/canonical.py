"""Undo isl's shifted fusion of inner loops.

isl's scheduler often fuses the inner loops of a chain of reductions by shifting them apart
(``mx: d; den: 63 + d; Y: 126 + d``). That is a sequence in disguise: the loop runs each
statement in its own range, but one loop over all of them cannot be vectorized, and its
name and bounds read badly. ``unshift`` turns such a loop back into one loop nest per
statement, in program order, each over the statement's own iterators. This is legal when
the loops above stay fused: within one iteration of the outer loops, program order is
always a legal order (the dependences were computed from it); ``Schedule`` checks it anyway.
"""

from __future__ import annotations

import islpy as isl

from polyopt.ir import fresh_name
from polyopt.schedules.tree import (
    Leaf,
    Loop,
    Node,
    bare_iterator,
    loops,
    path_to,
    pieces,
    restrict,
    sequence,
    stmts_of,
    substitute,
)


def unshift(root: Node, domain: isl.UnionSet, order: tuple[str, ...]) -> Node:
    """``root`` with every shifted multi-statement loop distributed per statement."""
    for lp in loops(root):
        if len(stmts_of(lp)) > 1 and _shifted(lp.expr):
            return unshift(_distribute(root, lp, domain, order), domain, order)
    return root


def _shifted(upa: isl.UnionPwAff) -> bool:
    """Does some statement run this loop at an offset of (or instead of) its iterator?"""
    for pa in pieces(upa):
        if pa.n_piece() != 1:
            return True
        aff = pa.get_pieces()[0][1]
        if bare_iterator(aff) is None:
            return True
    return False


def _distribute(root: Node, top: Loop, domain: isl.UnionSet,
                order: tuple[str, ...]) -> Node:
    own = set(stmts_of(top))
    taken = {lp.name for lp in loops(root)}
    given: set[str] = set()  # each loop's name goes to the first nest that keeps the loop
    nests: list[Node] = []
    for stmt in (s for s in order if s in own):
        leaf = _leaf_of(top, stmt)
        chain = [n for n in path_to(top, leaf) if isinstance(n, Loop)]
        node: Node = Leaf((stmt,))
        for lp in reversed(chain):
            expr = _plain(restrict(lp.expr, domain, (stmt,)))
            if expr is None:
                continue  # constant for this statement: orders nothing
            name = lp.name if lp.name not in given else fresh_name(lp.name, taken)
            given.add(lp.name)
            node = Loop(name, expr, node)
        nests.append(node)
    return substitute(root, top, sequence(tuple(nests)))


def _leaf_of(node: Node, stmt: str) -> Node:
    if isinstance(node, Leaf):
        return node
    if isinstance(node, Loop):
        return _leaf_of(node.child, stmt)
    return _leaf_of(next(c for c in node.children if stmt in stmts_of(c)), stmt)


def _plain(upa: isl.UnionPwAff) -> isl.UnionPwAff | None:
    """The statement's iterator this loop runs over, without isl's offset; None when the
    loop is constant for it (or a sum of iterators: then keep the expression)."""
    parts = pieces(upa)
    if len(parts) != 1 or parts[0].n_piece() != 1:
        return upa
    aff = parts[0].get_pieces()[0][1]
    ones = [i for i in range(aff.dim(isl.dim_type.in_))
            if not aff.get_coefficient_val(isl.dim_type.in_, i).is_zero()]
    if not ones:
        return None
    if len(ones) != 1 or not aff.get_coefficient_val(isl.dim_type.in_, ones[0]).is_one():
        return upa
    if aff.dim(isl.dim_type.div):
        return upa
    space = aff.get_domain_space()
    bare = isl.Aff.var_on_domain(isl.LocalSpace.from_space(space), isl.dim_type.set, ones[0])
    return isl.UnionPwAff.from_pw_aff(isl.PwAff.from_aff(bare)).intersect_domain_union_set(
        isl.UnionSet.from_set(parts[0].domain()))
