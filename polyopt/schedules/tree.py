"""Schedule trees with named loops, and their isl form.

A schedule is a tree of three node kinds, as isl's schedule trees but one loop per node:

- ``Loop``: one loop, a quasi-affine function of each statement's iterators (an isl
  ``UnionPwAff`` over the statements below it), with a name and typed marks
  (``polyopt.schedules.marks``: parallel, vectorize, unroll, GPU bindings and tiles);
- ``Sequence``: its children run one after another;
- ``Leaf``: the statements whose instances run at that point.

``to_isl`` turns a tree into an isl schedule tree for the AST builder: each loop becomes a
one-member band under an isl mark naming it (``marks.loop_mark``), so the printer knows which
AST loop is which.
``from_isl`` reads an isl schedule tree back (isl's scheduler's, or one written by hand:
``Schedule.from_isl``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

import islpy as isl

from polyopt.errors import ScheduleError
from polyopt.ir import fresh_name
from polyopt.lang.flow import sets_of as sets
from polyopt.lang.flow import union_all
from polyopt.schedules.marks import NO_MARKS, Marks, Tag, listed, loop_mark, marked_name


@dataclass(frozen=True, eq=False)
class Leaf:
    stmts: tuple[str, ...]


@dataclass(frozen=True, eq=False)
class Loop:
    name: str
    expr: isl.UnionPwAff  # statement instance -> loop value, for every statement below
    child: Node
    tags: Marks = NO_MARKS


@dataclass(frozen=True, eq=False)
class Sequence:
    children: tuple[Node, ...]


Node = Loop | Sequence | Leaf


def stmts_of(node: Node) -> tuple[str, ...]:
    """The statements below ``node``, in tree order."""
    if isinstance(node, Leaf):
        return node.stmts
    if isinstance(node, Loop):
        return stmts_of(node.child)
    return tuple(s for c in node.children for s in stmts_of(c))


# id(node) -> (node, the statements below it): trees never change; the node is kept so
# that its id stays its own.
_BELOW: dict[int, tuple[Node, frozenset[str]]] = {}


def stmt_set(node: Node) -> frozenset[str]:
    """The statements below ``node``, remembered for the last nodes asked (checks per
    local of one loop listed its statements each time: quadratic in the statements)."""
    hit = _BELOW.get(id(node))
    if hit is None or hit[0] is not node:
        if len(_BELOW) >= 64:
            _BELOW.clear()
        hit = _BELOW[id(node)] = (node, frozenset(stmts_of(node)))
    return hit[1]


def walk(node: Node) -> Iterator[Node]:
    """Every node, pre-order."""
    stack = [node]  # not recursive: a generator per level cost each node its depth
    while stack:
        n = stack.pop()
        yield n
        if isinstance(n, Loop):
            stack.append(n.child)
        elif isinstance(n, Sequence):
            stack.extend(reversed(n.children))


def loops(root: Node) -> list[Loop]:
    return [n for n in walk(root) if isinstance(n, Loop)]


def leaf_paths(node: Node, path: list[Loop] | None = None) -> list[tuple[str, list[Loop]]]:
    """Each statement below ``node`` with the loops from ``node`` down to it (after
    ``path``), in tree order."""
    path = path or []
    if isinstance(node, Leaf):
        return [(s, path) for s in node.stmts]
    if isinstance(node, Loop):
        return leaf_paths(node.child, [*path, node])
    return [p for c in node.children for p in leaf_paths(c, path)]


def path_to(root: Node, target: Node) -> list[Node]:
    """The nodes from ``root`` down to ``target`` (inclusive); empty when absent."""
    if root is target:
        return [root]
    for c in _holding(root, target):
        p = path_to(c, target)
        if p:
            return [root, *p]
    return []


def substitute(root: Node, old: Node, new: Node) -> Node:
    """``root`` with the subtree ``old`` (by identity) replaced by ``new``."""
    if root is old:
        return new
    if isinstance(root, Loop):
        child = substitute(root.child, old, new)
        return root if child is root.child else replace(root, child=child)
    if isinstance(root, Sequence):
        holding = {id(c) for c in _holding(root, old)}
        kids = tuple(substitute(c, old, new) if id(c) in holding else c
                     for c in root.children)
        if all(a is b for a, b in zip(kids, root.children, strict=True)):
            return root
        return Sequence(_flatten(kids))
    return root


def _holding(node: Node, target: Node) -> list[Node]:
    """The child of ``node`` whose subtree holds ``target`` (none or one: each statement
    sits in one leaf, so no node sits in two places). A sequence's children are indexed by
    the ids of their nodes, once per sequence, so a path to one nest of 2000 does not walk
    the others (each step walked the whole tree several times: quadratic in the nests)."""
    if isinstance(node, Loop):
        return [node.child]
    if isinstance(node, Sequence):
        hit = _CHILD.get(id(node))
        if hit is None or hit[0] is not node:
            if len(_CHILD) >= 64:
                _CHILD.clear()
            index: dict[int, int] = {}
            for k in range(len(node.children) - 1, -1, -1):  # the first child wins
                index.update(dict.fromkeys(_ids_below(node.children[k]), k))
            hit = _CHILD[id(node)] = (node, index)
        at = hit[1].get(id(target))
        return [] if at is None else [node.children[at]]
    return []


# id(node) -> (node, the ids of the nodes below it, itself included); id(sequence) -> (it,
# each id below it -> its child holding that node). The node is kept, and with it every
# node below, so that those ids stay their own.
_NODES: dict[int, tuple[Node, frozenset[int]]] = {}
_CHILD: dict[int, tuple[Sequence, dict[int, int]]] = {}


def _ids_below(node: Node) -> frozenset[int]:
    hit = _NODES.get(id(node))
    if hit is None or hit[0] is not node:
        if isinstance(node, Loop):
            ids = _ids_below(node.child) | {id(node)}
        elif isinstance(node, Sequence):
            ids = frozenset({id(node)}).union(*(_ids_below(c) for c in node.children))
        else:
            ids = frozenset({id(node)})
        if len(_NODES) >= 1 << 15:
            _NODES.clear()
        hit = _NODES[id(node)] = (node, ids)
    return hit[1]


def loops_by_name(node: Node) -> dict[str, Loop]:
    """The loops below ``node`` (itself included) by name, the first of each name in tree
    order; remembered per node, so a new tree indexes only the nodes a step made (a walk
    of the whole tree per step was quadratic in the nests: 15 s for 1000). Do not mutate."""
    hit = _NAMED.get(id(node))
    if hit is None or hit[0] is not node:
        index: dict[str, Loop] = {}
        if isinstance(node, Loop):
            index = {**loops_by_name(node.child), node.name: node}
        elif isinstance(node, Sequence):
            for c in reversed(node.children):  # the first of each name wins
                index.update(loops_by_name(c))
        if len(_NAMED) >= 1 << 15:
            _NAMED.clear()
        hit = _NAMED[id(node)] = (node, index)
    return hit[1]


_NAMED: dict[int, tuple[Node, dict[str, Loop]]] = {}


def _flatten(children: tuple[Node, ...]) -> tuple[Node, ...]:
    out: list[Node] = []
    for c in children:
        out += c.children if isinstance(c, Sequence) else [c]
    return tuple(out)


def sequence(children: tuple[Node, ...]) -> Node:
    kids = _flatten(children)
    return kids[0] if len(kids) == 1 else Sequence(kids)


def prune(node: Node, keep: set[str]) -> Node | None:
    """``node`` with only the statements in ``keep``; None when none is left."""
    if isinstance(node, Leaf):
        stmts = tuple(st for st in node.stmts if st in keep)
        return Leaf(stmts) if stmts else None
    if isinstance(node, Loop):
        child = prune(node.child, keep)
        return None if child is None else replace(node, child=child)
    kids = tuple(k for k in (prune(c, keep) for c in node.children) if k is not None)
    return sequence(kids) if kids else None


def widen(node: Node) -> Node:
    """``node`` with each loop's one-piece expressions defined on their whole statement
    space (not only on the instances they were computed for)."""
    if isinstance(node, Loop):
        out = isl.UnionPwAff.empty(node.expr.get_space())
        for pa in pieces(node.expr):
            if pa.n_piece() == 1:
                pa = isl.PwAff.from_aff(pa.get_pieces()[0][1])
            out = out.union_add(isl.UnionPwAff.from_pw_aff(pa))
        return replace(node, expr=out, child=widen(node.child))
    if isinstance(node, Sequence):
        return Sequence(tuple(widen(c) for c in node.children))
    return node


def restrict(upa: isl.UnionPwAff, domain: isl.UnionSet, stmts: tuple[str, ...]) -> isl.UnionPwAff:
    return upa.intersect_domain_union_set(filter_domain(domain, stmts))


def reordered(old: Node, new: Node) -> tuple[str, ...]:
    """The statements whose instances may run in another relative order in ``new`` than in
    ``old``: those below the nodes where the two trees first differ (loops of the same
    name and expression, and sequences' equal leading and trailing children, keep the
    order of everything else). Empty when only tags differ."""
    if old is new:  # an untouched subtree (a step rebuilds only the path it changes)
        return ()
    if isinstance(old, Loop) and isinstance(new, Loop) and old.name == new.name and (
            old.expr is new.expr or old.expr.plain_is_equal(new.expr)):
        return reordered(old.child, new.child)
    if isinstance(old, Sequence) and isinstance(new, Sequence):
        # Bounds, not slices, and shared children skipped without a call: slicing per
        # child was quadratic in the children (29 s of a step per nest, for 2000 nests).
        a, b = old.children, new.children
        lo, hi_a, hi_b = 0, len(a), len(b)
        while lo < min(hi_a, hi_b) and (a[lo] is b[lo] or not reordered(a[lo], b[lo])):
            lo += 1
        while hi_a > lo and hi_b > lo and (a[hi_a - 1] is b[hi_b - 1]
                                           or not reordered(a[hi_a - 1], b[hi_b - 1])):
            hi_a, hi_b = hi_a - 1, hi_b - 1
        a, b = a[lo:hi_a], b[lo:hi_b]
        if len(a) == len(b) == 1:
            return reordered(a[0], b[0])
        return tuple(dict.fromkeys(s for n in a + b for s in stmts_of(n)))
    if isinstance(old, Leaf) and isinstance(new, Leaf) and old.stmts == new.stmts:
        return ()
    return tuple(dict.fromkeys((*stmts_of(old), *stmts_of(new))))


def filter_domain(domain: isl.UnionSet, stmts: tuple[str, ...]) -> isl.UnionSet:
    """The part of ``domain`` of the statements ``stmts``."""
    index = _by_name(domain)
    return union_all([isl.UnionSet.from_set(index[s]) for s in dict.fromkeys(stmts)
                      if s in index], isl.UnionSet.empty(domain.get_space()))


# id(domain) -> (domain, its sets by statement name); the domain is kept so the id stays its
# own. Every leaf of a schedule tree and every legality check filters the domain: a scan of
# all its sets each time made them quadratic in the statements (3.5 s of 22 for 160).
_INDEX: dict[int, tuple[isl.UnionSet, dict[str, isl.Set]]] = {}


def _by_name(domain: isl.UnionSet) -> dict[str, isl.Set]:
    hit = _INDEX.get(id(domain))
    if hit is None or hit[0] is not domain:
        if len(_INDEX) >= 16:
            _INDEX.clear()
        hit = (domain, {s.get_tuple_name(): s for s in sets(domain)})
        _INDEX[id(domain)] = hit
    return hit[1]


# id(schedule map) -> (the map, its maps by statement name), as _INDEX.
_MAPS: dict[int, tuple[isl.UnionMap, dict[str, isl.Map]]] = {}


def filter_map(umap: isl.UnionMap, stmts: tuple[str, ...] | set[str]) -> isl.UnionMap:
    """The part of ``umap`` (a schedule's map: one map per statement) of ``stmts``."""
    hit = _MAPS.get(id(umap))
    if hit is None or hit[0] is not umap:
        if len(_MAPS) >= 16:
            _MAPS.clear()
        found: list[isl.Map] = []
        umap.foreach_map(found.append)
        hit = (umap, {m.get_tuple_name(isl.dim_type.in_): m for m in found})
        _MAPS[id(umap)] = hit
    index = hit[1]
    out = isl.UnionMap.empty(umap.get_space())
    for s in sorted(set(stmts) & index.keys()):
        out = out.union(isl.UnionMap.from_map(index[s]))
    return out


# id(loop expression) -> (the expression, its pieces by statement name), as _INDEX.
_PIECES: dict[int, tuple[isl.UnionPwAff, dict[str, isl.PwAff]]] = {}


def expr_of(upa: isl.UnionPwAff, stmts: set[str] | frozenset[str]) -> isl.UnionPwAff:
    """The part of loop expression ``upa`` on the statements ``stmts``: the pieces of a
    loop over 2000 statements, indexed once (restricting the whole expression per local
    was quadratic in the statements)."""
    index = piece_of(upa)
    out = isl.UnionPwAff.empty(upa.get_space())
    for name in sorted(set(stmts) & index.keys()):
        out = out.union_add(isl.UnionPwAff.from_pw_aff(index[name]))
    return out


def piece_of(upa: isl.UnionPwAff) -> dict[str, isl.PwAff]:
    """Loop expression ``upa``'s pieces by statement name, indexed once per expression."""
    hit = _PIECES.get(id(upa))
    if hit is None or hit[0] is not upa:
        if len(_PIECES) >= 16:
            _PIECES.clear()
        hit = (upa, {pa.get_domain_space().get_tuple_name(isl.dim_type.set): pa
                    for pa in pieces(upa)})
        _PIECES[id(upa)] = hit
    return hit[1]


def pieces(upa: isl.UnionPwAff) -> list[isl.PwAff]:
    """The per-statement pieces of a loop expression."""
    out: list[isl.PwAff] = []
    upa.foreach_pw_aff(out.append)
    return out




# -- isl conversion -------------------------------------------------------------------------

def order_of(root: Node, domain: isl.UnionSet, stmts: tuple[str, ...]) -> isl.UnionMap:
    """The schedule map of ``root`` for the statements ``stmts`` alone: among their
    instances it orders as the whole tree's map does (pruning keeps every loop's values
    and the order of a sequence's remaining children), at the cost of their subtree (a
    step's legality check needs only the statements it moved: a third of the time of the
    whole map for a blocked convolution's register tile)."""
    kept = prune(root, set(stmts))
    if kept is None:
        return isl.UnionMap.empty(domain.get_space())
    return to_isl(kept, filter_domain(domain, stmts)).get_map()


def to_isl(root: Node, domain: isl.UnionSet) -> isl.Schedule:
    """The isl schedule tree of ``root`` over ``domain``, one marked band per loop."""
    if isinstance(root, Leaf):
        return isl.Schedule.from_domain(filter_domain(domain, root.stmts))
    if isinstance(root, Sequence):
        # Pairwise: isl flattens a sequence of sequences, and one child at a time copied the
        # whole so far (quadratic in the children).
        parts = [to_isl(c, domain) for c in root.children]
        while len(parts) > 1:
            parts = [parts[i].sequence(parts[i + 1]) if i + 1 < len(parts) else parts[i]
                     for i in range(0, len(parts), 2)]
        return parts[0]
    inner = to_isl(root.child, domain)
    upa = root.expr.intersect_domain_union_set(inner.get_domain())
    band = inner.insert_partial_schedule(isl.MultiUnionPwAff.from_union_pw_aff(upa))
    node = band.get_root().child(0)
    if Tag.UNROLL in root.tags and not _jammed(root):
        node = node.band_member_set_ast_loop_type(0, isl.ast_loop_type.unroll)
    elif Tag.SEPARATE in root.tags:
        node = node.band_member_set_ast_loop_type(0, isl.ast_loop_type.separate)
    return node.insert_mark(loop_mark(root.name)).get_schedule()


def _jammed(loop: Loop) -> bool:
    """An unrolled loop right above a vectorized innermost one is a register tile: the
    printer unrolls it (with accumulators in registers), not isl."""
    return isinstance(loop.child, Loop) and Tag.VECTORIZE in loop.child.tags


def from_isl(schedule: isl.Schedule) -> Node:
    """Our tree for an isl schedule tree: bands become nested loops, unnamed (``name_loops``
    names them) except the outermost loop of a band right below a mark whose name is an
    identifier, optionally after ``loop `` (``marked_name``): the mark names it."""
    return _from_node(schedule.get_root())


def _from_node(node: isl.ScheduleNode) -> Node:
    kind = node.get_type()
    if kind == isl.schedule_node_type.band:
        mupa = node.band_get_partial_schedule()
        out = _from_node(node.child(0))
        for i in reversed(range(node.band_n_member())):
            out = Loop("", mupa.get_at(i), out)
        return out
    if kind in (isl.schedule_node_type.sequence, isl.schedule_node_type.set):
        return sequence(tuple(_from_node(node.child(i)) for i in range(node.n_children())))
    if kind == isl.schedule_node_type.leaf:
        return Leaf(tuple(s.get_tuple_name() for s in sets(node.get_domain())))
    if kind == isl.schedule_node_type.mark:
        out = _from_node(node.child(0))
        name = marked_name(node.mark_get_id().get_name())
        if isinstance(out, Loop) and not out.name and name:
            return replace(out, name=name)
        return out
    if kind in (isl.schedule_node_type.domain, isl.schedule_node_type.filter,
                isl.schedule_node_type.context):
        return _from_node(node.child(0))
    raise ScheduleError(f"unsupported isl schedule node {kind} (polyopt reads domain, band, "
                        f"sequence, set, filter, mark, context and leaf nodes)")


def fix_params(node: Node, bound: Mapping[str, int]) -> Node:
    """``node`` with the size parameters in ``bound`` fixed to their values (and gone)."""
    if isinstance(node, Loop):
        return replace(node, expr=_fix_upa(node.expr, bound),
                       child=fix_params(node.child, bound))
    if hasattr(node, "children"):
        return type(node)(tuple(fix_params(c, bound) for c in node.children))  # type: ignore
    return node


def _fix_upa(upa: isl.UnionPwAff, bound: Mapping[str, int]) -> isl.UnionPwAff:
    space = upa.get_space()
    names = [n for n in bound if space.find_dim_by_name(isl.dim_type.param, n) >= 0]
    if not names:
        return upa
    fixed = " and ".join(f"{n} = {bound[n]}" for n in names)
    umap = _drop_params(isl.UnionMap.from_union_pw_aff(upa).intersect_params(
        isl.Set(f"[{', '.join(names)}] -> {{ : {fixed} }}")), names)
    if umap.is_empty():  # no statement below runs at these sizes: any value will do
        domain = _drop_params(isl.UnionMap.from_domain(upa.domain().universe()), names)
        return isl.UnionPwAff.val_on_domain(domain.domain(), isl.Val(0))
    return isl.MultiUnionPwAff.from_union_map(umap).get_at(0)


def _drop_params(umap: isl.UnionMap, names: list[str]) -> isl.UnionMap:
    for n in names:
        sp = umap.get_space()
        umap = umap.project_out_param_id(
            sp.get_dim_id(isl.dim_type.param, sp.find_dim_by_name(isl.dim_type.param, n)))
    return umap


def nest_of(stmt: Any, params: str, taken: set[str]) -> Node:
    """One loop per iterator of polyhedral statement ``stmt``, outermost first, named after
    the iterators (unique against ``taken``, which grows)."""
    space = stmt.domain.get_space()
    its = [str(space.get_dim_name(isl.dim_type.set, d))
           for d in range(space.dim(isl.dim_type.set))]
    node: Node = Leaf((stmt.name,))
    for it in reversed(its):
        expr = isl.UnionPwAff(f"{params} -> {{ {stmt.name}[{', '.join(its)}] -> [({it})] }}")
        node = Loop("", expr, node)
    return name_loops(node, (stmt.name,), taken)


# -- names ------------------------------------------------------------------------------------

def name_loops(root: Node, order: tuple[str, ...], taken: set[str] | None = None) -> Node:
    """Give unnamed loops the TC index they run over (``r_k`` → ``k``), unique in the tree
    and against ``taken`` (which grows)."""
    taken = {lp.name for lp in loops(root) if lp.name} if taken is None else taken
    renames = {id(lp): fresh_name(iterator_of(lp.expr, order) or "c", taken)
               for lp in loops(root) if not lp.name}
    return rename(root, renames)


def rename(node: Node, renames: dict[int, str]) -> Node:
    """``node`` with the loops whose ids are keys of ``renames`` renamed."""
    if isinstance(node, Loop):
        return replace(node, name=renames.get(id(node), node.name),
                       child=rename(node.child, renames))
    if isinstance(node, Sequence):
        return Sequence(tuple(rename(c, renames) for c in node.children))
    return node


def iterator_of(upa: isl.UnionPwAff, order: tuple[str, ...]) -> str | None:
    """The index a loop runs over: the first statement (in ``order``) whose value is a bare
    iterator names it (``r_k`` → ``k``)."""
    for stmt in order:
        name = raw_iterator(upa, stmt)
        if name is not None:
            return name[2:] if name.startswith("r_") else name
    return None


def raw_iterator(upa: isl.UnionPwAff, stmt: str) -> str | None:
    """The iterator of ``stmt`` that the loop value ``upa`` equals, if any (a scan of the
    pieces per statement was quadratic in the statements: 7.9 s for 2000)."""
    pa = piece_of(upa).get(stmt)
    if pa is None or pa.n_piece() != 1:
        return None
    return bare_iterator(pa.get_pieces()[0][1])


def involves(upa: isl.UnionPwAff, domain: isl.Set, iterator: str) -> bool:
    """Does the loop value ``upa`` of the statement whose domain is ``domain`` vary with
    its ``iterator`` over that domain (a dimension the domain fixes does not vary)?"""
    pa = piece_of(upa).get(domain.get_tuple_name())
    if pa is None:
        return False
    k = pa.get_domain_space().find_dim_by_name(isl.dim_type.set, iterator)
    if k < 0 or domain.dim_min_val(k).eq(domain.dim_max_val(k)):
        return False
    return bool(pa.gist(domain).involves_dims(isl.dim_type.in_, k, 1))


def bare_iterator(aff: isl.Aff) -> str | None:
    if aff.dim(isl.dim_type.div) or not aff.get_constant_val().is_zero():
        return None
    if any(not aff.get_coefficient_val(isl.dim_type.param, i).is_zero()
           for i in range(aff.dim(isl.dim_type.param))):
        return None
    ones = [i for i in range(aff.dim(isl.dim_type.in_))
            if not aff.get_coefficient_val(isl.dim_type.in_, i).is_zero()]
    if len(ones) == 1 and aff.get_coefficient_val(isl.dim_type.in_, ones[0]).is_one():
        return str(aff.get_space().get_dim_name(isl.dim_type.in_, ones[0]))
    return None


# -- printing ---------------------------------------------------------------------------------

def pseudo_code(root: Node, depth: int = 0) -> list[str]:
    """The loop nest as indented pseudo-code, one line per loop or statement."""
    pad = "  " * depth
    if isinstance(root, Leaf):
        return [f"{pad}{s}" for s in root.stmts]
    if isinstance(root, Sequence):
        return [line for c in root.children for line in pseudo_code(c, depth)]
    tags = f"  # {listed(root.tags)}" if root.tags else ""
    text = expr_text(root.expr)
    head = f"for {root.name}" if text == root.name else f"for {root.name} = {text}"
    return [f"{pad}{head}:{tags}",
            *pseudo_code(root.child, depth + 1)]


def expr_text(upa: isl.UnionPwAff) -> str:
    """``floor(m/32)`` when every statement agrees, else ``C_0: ..., D_0: ...``."""
    texts: dict[str, list[str]] = {}
    for pa in pieces(upa):
        stmt = pa.get_domain_space().get_tuple_name(isl.dim_type.set)
        match = _PIECE.search(str(pa))
        body = match.group(1) if match and pa.n_piece() == 1 else str(pa)
        texts.setdefault(body, []).append(stmt)
    if len(texts) == 1:
        return next(iter(texts))
    return "; ".join(f"{'/'.join(v)}: {k}" for k, v in texts.items())


_PIECE = re.compile(r"\{ \w+\[[^\]]*\] -> \[\((.*?)\)\](?: : .*)? \}$")
