"""Schedule transformations on loop trees: each a pure function from one tree to the next.

These only rewrite the tree; ``Schedule`` records each call and checks the result against
the exact dependences (``legality``). Loops are addressed by name; new loops get derived
names (``i_o``/``i_i``) unless the caller names them.
"""

from __future__ import annotations

from collections.abc import Iterator
from collections.abc import Sequence as Seq
from dataclasses import replace
from itertools import pairwise

import islpy as isl

from polyopt.errors import ScheduleError
from polyopt.ir import fresh_name
from polyopt.schedules.limits import CAPS
from polyopt.schedules.marks import Mark, Tag
from polyopt.schedules.tree import (
    Leaf,
    Loop,
    Node,
    Sequence,
    filter_domain,
    loops,
    loops_by_name,
    path_to,
    restrict,
    sequence,
    stmts_of,
    substitute,
)

MAX_FULL_UNROLL = CAPS.max_full_unroll


def find(root: Node, name: str) -> Loop:
    """The loop called ``name``; the error lists the valid names."""
    index = loops_by_name(root)
    if name in index:
        return index[name]
    valid = ", ".join(lp.name for lp in loops(root)) or "(none: the schedule has no loops)"
    raise ScheduleError(f"no loop named {name!r}; loops: {valid}")


def chain(root: Node, names: Seq[str]) -> list[Loop]:
    """The perfectly nested loops from the outermost to the innermost of ``names``."""
    if not names:
        raise ScheduleError("no loops given")
    found = [find(root, n) for n in names]
    if len({id(f) for f in found}) != len(found):
        raise ScheduleError(f"loops {list(names)} repeat a loop")
    depth = {id(f): len(path_to(root, f)) for f in found}
    top = min(found, key=lambda f: depth[id(f)])
    bottom = max(found, key=lambda f: depth[id(f)])
    if not path_to(top, bottom):
        raise ScheduleError(f"loops {', '.join(names)} are not nested in one another: "
                            f"{bottom.name} does not sit inside {top.name}")
    out: list[Loop] = [top]
    while out[-1] is not bottom:
        nxt = out[-1].child
        if not isinstance(nxt, Loop):
            raise ScheduleError(f"loops {', '.join(names)} are not perfectly nested: "
                                f"statements run between them")
        out.append(nxt)
    missing = [n for n in names if not any(lp.name == n for lp in out)]
    if missing:
        raise ScheduleError(f"loop(s) {', '.join(missing)} do not enclose or sit inside "
                            f"{top.name}")
    return out


def _rebuild(root: Node, old: list[Loop], new: list[Loop]) -> Node:
    """Replace the perfectly nested chain ``old`` by ``new`` (same innermost child)."""
    child = old[-1].child
    for lp in reversed(new):
        child = replace(lp, child=child)
    return substitute(root, old[0], child)


def check_names(root: Node, names: Seq[str], freed: Seq[str] | set[str] = ()) -> None:
    """New loop names must be identifiers, unused except by the loops ``freed`` replaces."""
    taken = {lp.name for lp in loops(root)} - set(freed)
    for n in names:
        if not n.isidentifier():
            raise ScheduleError(f"loop name {n!r} is not an identifier")
        if n in taken:
            raise ScheduleError(f"loop name {n!r} is already used; loops: {', '.join(taken)}")
        taken.add(n)


def _size(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ScheduleError(f"{what} must be a positive integer, not {value!r}")
    return value


def split_names(name: str) -> tuple[str, str]:
    """The default names of the outer and inner loops that splitting ``name`` makes."""
    return f"{name}_o", f"{name}_i"


def split(root: Node, name: str, factor: int, names: Seq[str] | None = None) -> Node:
    """``name`` → ``name_o`` (``floor(x/factor)``) around ``name_i`` (``x mod factor``)."""
    f = _size(factor, f"split factor of {name}")
    lp = find(root, name)
    if names is not None and (isinstance(names, str) or len(names) != 2):
        raise ScheduleError(f"split of {name}: names must be two loop names (outer, inner), "
                            f"not {names!r}")
    outer_name, inner_name = names or split_names(name)
    check_names(root, (outer_name, inner_name), freed={name})
    val = isl.Val(f)
    inner = Loop(inner_name, lp.expr.mod_val(val), lp.child)
    outer = Loop(outer_name, lp.expr.scale_down_val(val).floor(), inner)
    return substitute(root, lp, outer)


def reorder(root: Node, order: Seq[str]) -> Node:
    """Reorder perfectly nested loops; ``order`` lists them outermost first."""
    ch = chain(root, order)
    positions = [i for i, lp in enumerate(ch) if lp.name in order]
    new = list(ch)
    for pos, name in zip(positions, order, strict=True):
        new[pos] = next(lp for lp in ch if lp.name == name)
    return _rebuild(root, ch, new)


def tile(root: Node, names: Seq[str], levels: Seq[Seq[int]],
         new_names: Seq[Seq[str]] | None = None) -> Node:
    """Tile adjacent perfectly nested loops: ``levels[t][d]`` is loop d's size at level t.

    Each level's size must divide the one above. Result: every loop's outermost part, then
    each level's parts, then the points (``i_o, j_o, i_m, j_m, i_i, j_i``).
    """
    ch = chain(root, names)
    idx = [next(i for i, lp in enumerate(ch) if lp.name == n) for n in names]
    if idx != list(range(idx[0], idx[0] + len(idx))):
        raise ScheduleError(f"tile needs adjacent loops in nest order; the nest is "
                            f"{', '.join(lp.name for lp in ch)}")
    sizes = [[_size(v, f"tile size of {n}") for v, n in zip(lv, names, strict=True)]
             for lv in levels]
    for upper, lower in pairwise(sizes):
        for a, b, n in zip(upper, lower, names, strict=True):
            if a % b:
                raise ScheduleError(f"tile sizes of {n}: {b} does not divide {a}")
    suffixes = _level_suffixes(len(sizes))
    parts = [_tile_parts(ch[i], [lv[d] for lv in sizes]) for d, i in enumerate(idx)]
    if new_names is not None and (len(new_names) != len(names) or any(
            isinstance(row, str) or len(row) != len(suffixes) for row in new_names)):
        raise ScheduleError(f"tile of {', '.join(names)}: names must give each loop "
                            f"{len(suffixes)} names (outermost first), not {new_names!r}")
    labels = new_names or [[f"{n}_{s}" for s in suffixes] for n in names]
    check_names(root, [x for row in labels for x in row], freed=set(names))
    tiled = [Loop(labels[d][t], parts[d][t], Leaf(()))
             for t in range(len(suffixes)) for d in range(len(names))]
    return _rebuild(root, ch, ch[:idx[0]] + tiled + ch[idx[-1] + 1:])


def _level_suffixes(levels: int) -> list[str]:
    if levels == 1:
        return ["o", "i"]
    if levels == 2:
        return ["o", "m", "i"]
    return ["o", *(f"m{t}" for t in range(1, levels)), "i"]


def _tile_parts(lp: Loop, sizes: list[int]) -> list[isl.UnionPwAff]:
    e = lp.expr
    parts = [e.scale_down_val(isl.Val(sizes[0])).floor()]
    for upper, lower in pairwise(sizes):
        parts.append(e.mod_val(isl.Val(upper)).scale_down_val(isl.Val(lower)).floor())
    parts.append(e.mod_val(isl.Val(sizes[-1])))
    return parts


def fuse(root: Node, first: str, *others: str) -> Node:
    """Fuse sibling loops (children of one sequence) into one loop named ``first``, at the
    place of the earliest, their bodies in their order."""
    group = [find(root, name) for name in (first, *others)]
    names = f"{', '.join((first, *others)[:-1])} and {(first, *others)[-1]}"
    if not others or len({id(lp) for lp in group}) != len(group):
        raise ScheduleError(f"fuse needs two different loops (or more), got {names}")
    parent = _parent(root, group[0])
    ids = {id(lp) for lp in group}
    if not isinstance(parent, Sequence) or len(
            [c for c in parent.children if id(c) in ids]) != len(group):
        raise ScheduleError(f"loops {names} are not siblings: fuse joins loop nests that "
                            f"run one after the other")
    ordered = [c for c in parent.children if id(c) in ids]
    assert all(isinstance(lp, Loop) for lp in ordered)
    fused = Loop(first, _union(lp.expr for lp in group),
                 sequence(tuple(lp.child for lp in ordered)),  # type: ignore[union-attr]
                 frozenset.intersection(*(lp.tags for lp in group)))
    kids = [fused if c is ordered[0] else c for c in parent.children if id(c) not in ids
            or c is ordered[0]]
    return substitute(root, parent, sequence(tuple(kids)))


def _union(exprs: Iterator[isl.UnionPwAff]) -> isl.UnionPwAff:
    """The union of loop expressions over disjoint statements, pairwise (one at a time, each
    union copies the whole so far)."""
    parts = list(exprs)
    while len(parts) > 1:
        parts = [parts[i].union_add(parts[i + 1]) if i + 1 < len(parts) else parts[i]
                 for i in range(0, len(parts), 2)]
    return parts[0]


def _parent(root: Node, node: Node) -> Node | None:
    path = path_to(root, node)
    return path[-2] if len(path) > 1 else None


def distribute(root: Node, name: str, domain: isl.UnionSet) -> Node:
    """Split the nest from loop ``name`` down into one nest per statement group below it."""
    top = find(root, name)
    ch = [top]
    while isinstance(ch[-1].child, Loop):
        ch.append(ch[-1].child)
    below = ch[-1].child
    groups: tuple[Node, ...] = (below.children if isinstance(below, Sequence)
                                else tuple(Leaf((s,)) for s in stmts_of(below)))
    if len(groups) < 2:
        raise ScheduleError(f"loop {name} runs a single statement group: nothing to distribute")
    kept = [[replace(lp, expr=restrict(lp.expr, domain, stmts_of(g))) for lp in ch]
            for g in groups]
    kept = [[lp for lp in group if trip_count(lp, domain) != 1] for group in kept]
    owner = max(range(len(groups)), key=lambda k: len(kept[k]))  # the deepest keeps the names
    taken = {lp.name for lp in loops(root)}
    nests: list[Node] = []
    for k, group in enumerate(groups):
        child: Node = group
        for lp in reversed(kept[k]):  # a loop of one iteration orders nothing in its group
            label = lp.name if k == owner else fresh_name(lp.name, taken)
            child = Loop(label, lp.expr, child, lp.tags)
        nests.append(child)
    return substitute(root, top, sequence(tuple(nests)))


def compute_at(root: Node, nest: str, at: str, deps: isl.UnionMap,
               domain: isl.UnionSet) -> Node:
    """Move the top-level nest ``nest`` into loop ``at`` of a later or earlier nest (Halide's
    ``compute_at``). Each instance runs in the iteration of ``at`` and the loops around it
    where it is needed: a producer (``nest`` runs before) at the first iteration that depends
    on it, ahead of ``at``'s body; a consumer at the last iteration it depends on, after."""
    src, dst = find(root, nest), find(root, at)
    top = _parent(root, src)
    path = [n for n in path_to(root, dst) if isinstance(n, Loop)]
    if not isinstance(top, Sequence) or top is not root or not path or src in path or \
            path_to(src, dst):
        raise ScheduleError(f"compute_at: {nest} must be a top-level nest apart from the one "
                            f"holding {at}")
    kids = list(top.children)
    producer = kids.index(src) < kids.index(path[0])
    ours, theirs = filter_domain(domain, stmts_of(src)), filter_domain(domain, stmts_of(path[0]))
    rel = deps.intersect_domain(ours).intersect_range(theirs) if producer else \
        deps.intersect_domain(theirs).intersect_range(ours).reverse()
    if not rel.domain().is_equal(ours):
        raise ScheduleError(f"compute_at: not every instance of {nest}'s statements "
                            f"{'feeds' if producer else 'reads'} the nest of {at}")
    prefix = isl.UnionMap.from_union_pw_aff(path[0].expr)
    for lp in path[1:]:
        prefix = prefix.flat_range_product(isl.UnionMap.from_union_pw_aff(lp.expr))
    rel = rel.apply_range(prefix)
    where = isl.UnionPwMultiAff.from_union_map(rel.lexmin() if producer else rel.lexmax())
    moved = _untag(src, Tag.PARALLEL)  # it now runs inside another nest's iterations
    body = sequence((moved, dst.child) if producer else (dst.child, moved))
    new: list[Loop] = [replace(lp, expr=lp.expr.union_add(where.get_union_pw_aff(i)))
                       for i, lp in enumerate(path)]
    child: Node = body
    for lp in reversed(new):
        child = replace(lp, child=child)
    rest = [c for c in kids if c is not src]
    return sequence(tuple(child if c is path[0] else c for c in rest))


def _untag(node: Node, label: Mark) -> Node:
    if isinstance(node, Loop):
        return replace(node, tags=node.tags - {label}, child=_untag(node.child, label))
    if isinstance(node, Sequence):
        return Sequence(tuple(_untag(c, label) for c in node.children))
    return node


def skew(root: Node, outer: str, inner: str, factor: int) -> Node:
    """``inner`` ← ``inner + factor * outer``; ``outer`` must enclose ``inner``."""
    a, b = find(root, outer), find(root, inner)
    if b is a or not path_to(a, b):
        raise ScheduleError(f"skew: loop {outer} does not enclose loop {inner}")
    if isinstance(factor, bool) or not isinstance(factor, int):
        raise ScheduleError(f"skew factor must be an integer, not {factor!r}")
    expr = b.expr.add(a.expr.scale_val(isl.Val(factor)))
    return substitute(root, b, replace(b, expr=expr))


def shift(root: Node, name: str, offset: int, stmts: Seq[str] | None,
          domain: isl.UnionSet) -> Node:
    """Add ``offset`` to loop ``name`` for ``stmts`` (all of its statements by default)."""
    lp = find(root, name)
    if isinstance(offset, bool) or not isinstance(offset, int):
        raise ScheduleError(f"shift offset must be an integer, not {offset!r}")
    own = stmts_of(lp)
    chosen = tuple(own) if stmts is None else tuple(stmts)
    unknown = [s for s in chosen if s not in own]
    if unknown:
        raise ScheduleError(f"shift: loop {name} runs statements {', '.join(own)}, "
                            f"not {', '.join(unknown)}")
    moved = restrict(lp.expr, domain, chosen)
    const = isl.UnionPwAff.val_on_domain(moved.domain(), isl.Val(offset))
    expr = moved.add(const)
    rest = tuple(s for s in own if s not in chosen)
    if rest:
        expr = expr.union_add(restrict(lp.expr, domain, rest))
    return substitute(root, lp, replace(lp, expr=expr))


def reverse(root: Node, name: str) -> Node:
    lp = find(root, name)
    return substitute(root, lp, replace(lp, expr=lp.expr.neg()))


def tag(root: Node, name: str, label: Mark) -> Node:
    lp = find(root, name)
    return substitute(root, lp, replace(lp, tags=lp.tags | {label}))


def trip_count(lp: Loop, domain: isl.UnionSet) -> int | None:
    """The loop's value range size over its statements, when it is a constant."""
    # From the set of values, not the function: restricted to the domain, isl may write
    # the function with a rational coefficient ((h)/2 where h is even), which its
    # min_val/max_val reject.
    umap = isl.UnionMap.from_union_pw_aff(lp.expr).intersect_domain(domain)
    if umap.is_empty():
        return None
    values = isl.Set.from_union_set(umap.range())
    lo, hi = values.dim_min_val(0), values.dim_max_val(0)
    if not (lo.is_int() and hi.is_int()):
        return None
    return int(hi.to_python()) - int(lo.to_python()) + 1


def value_extent(lp: Loop, domain: isl.UnionSet) -> tuple[isl.PwAff, int | None]:
    """How many values ``lp`` takes over the statement instances (max - min + 1, a function
    of the sizes), and the most it takes for any sizes when that is finite (a tile loop's
    size)."""
    umap = isl.UnionMap.from_union_pw_aff(lp.expr).intersect_domain(domain)
    values = isl.Set.from_union_set(umap.range())
    extent = values.dim_max(0).sub(values.dim_min(0)).add_constant_val(isl.Val(1))
    bound = isl.Set.from_pw_aff(extent).dim_max_val(0)
    return extent.coalesce(), int(bound.to_python()) if bound.is_int() else None


def jam(root: Node, name: str) -> Node:
    """Sink loop ``name`` through the perfectly nested loops below it, stopping above a
    vectorized loop (the register tile's columns stay innermost)."""
    lp = find(root, name)
    ch = [lp]
    while isinstance(ch[-1].child, Loop) and Tag.VECTORIZE not in ch[-1].child.tags:
        ch.append(ch[-1].child)
    return _rebuild(root, ch, [*ch[1:], lp])
