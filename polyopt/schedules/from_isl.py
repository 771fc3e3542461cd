"""Schedules written in isl's notation, read for ``Schedule.from_isl``: a researcher's own
schedule (Pluto's, a hand-written skew or interchange) as a loop tree every verb can address.

The schedule is an isl schedule tree (an ``isl.Schedule``, or its YAML text as
``isl.Schedule.to_str()`` prints it) or a union map from statement instances to times,
``{ C_0[m, n, k] -> [n, m, k] }``: a flat schedule, one band whose members are the times'
dimensions (a statement with fewer dimensions than the longest gets zeros after its own).
Statements carry polyopt's names (``Schedule.stmts``; their domains print with
``print(s.poly)`` or ``polyopt compile FILE --emit domains``); the size parameters are the
def's size names.

Each band member becomes a loop, named (uniquely in the tree) by the first rule that applies:

1. an isl mark right above the band names its outermost member: the mark's name when it is an
   identifier, after ``loop `` if present (``Schedule.to_isl``'s marks); other marks are
   ignored, and two loops marked alike are refused;
2. a member whose value is, for every statement below it, one domain dimension with
   coefficient 1 plus a constant, the same TC index for all: that index (``r_k`` gives
   ``k``), as polyopt's own loops;
3. a member affine in several dimensions of the first statement below it (program order):
   those indices joined by ``_`` (``t_i`` for a skew ``t + i``); one dimension with
   coefficient -1: the index and ``_rev`` (``i_rev`` for ``-i``);
4. otherwise (a constant, a division, statements that disagree) ``c`` and the loop's depth,
   as isl's AST generator names loops (``c0`` outermost).

A name already taken gets ``2``, ``3``, ... (``i2``). Nothing but loop order and names is
read: band options, coincidence and marks other than names are dropped (verbs add tags).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

import islpy as isl

from polyopt.errors import ScheduleError
from polyopt.ir import fresh_name
from polyopt.lang.flow import sets_of as sets
from polyopt.poly.model import PolyProgram
from polyopt.schedules.tree import (
    Leaf,
    Loop,
    Node,
    Sequence,
    expr_of,
    fix_params,
    from_isl,
    loops,
    pieces,
    prune,
    rename,
    sequence,
    stmts_of,
    to_isl,
)

_TREE = re.compile(r"\s*(\{\s*)?domain\s*:")  # YAML's flow style (to_str's) or block style


@dataclass(frozen=True)
class Given:
    """A schedule read from isl: its loop tree over the def's statements and its text."""

    root: Node
    text: str


def read(poly: PolyProgram, given: isl.Schedule | str) -> Given:
    """``given`` as a named loop tree over ``poly``'s statements (its sizes fixed as the
    program fixes them); ScheduleError when it cannot be read or does not schedule each
    instance of the def exactly once."""
    if isinstance(given, isl.Schedule):
        text = given.to_str()
    elif isinstance(given, str):
        text = given
    else:
        raise ScheduleError(f"Schedule.from_isl takes an isl.Schedule or its text, not "
                            f"{type(given).__name__}")
    parsed = _parse(text, poly.context.get_ctx())
    try:
        return Given(_tree_of(poly, parsed), text)
    except isl.Error as e:  # never a bare isl.Error out of a public call
        raise ScheduleError(f"Schedule.from_isl: isl failed on this schedule: {e}\n  "
                            f"{_clip(text)}") from e


def _tree_of(poly: PolyProgram, parsed: isl.Schedule | isl.UnionMap) -> Node:
    if isinstance(parsed, isl.Schedule):
        _check_kinds(parsed.get_root())
    _check_params(poly, (parsed.get_map() if isinstance(parsed, isl.Schedule) else
                         parsed).get_space())
    if isinstance(parsed, isl.Schedule):
        _check_cover(poly, parsed.get_map().intersect_domain(parsed.get_domain()).domain())
        root = from_isl(parsed)
    else:
        root = sequenced(from_isl(_flat(poly, parsed)))
    root = name_loops_given(root, tuple(s.name for s in poly.stmts))
    _check_once(root)
    root = fix_params(root, dict(poly.program.bound))
    _check_injective(to_isl(root, poly.domain).get_map())
    return root


# The node kinds a loop tree holds (``tree.from_isl``); isl's others add or
# rename instances (extension, expansion) or guard the generated code (guard).
_KINDS = ("domain", "band", "sequence", "set", "filter", "mark", "context", "leaf")


def _check_kinds(node: isl.ScheduleNode, path: str = "") -> None:
    """ScheduleError naming the first node at or below ``node`` (reached by ``path``) that a
    loop tree cannot hold: an extension, expansion or guard node, or a sequence or set child
    that is no filter (isl's own calls fail on one, with a message that names neither)."""
    name = _kind(node)
    path = f"{path} > {name}" if path else name
    if name not in _KINDS:
        article = "an" if name[0] in "aeiou" else "a"
        raise ScheduleError(f"Schedule.from_isl: the schedule tree has {article} {name} node "
                            f"(at {path}); polyopt reads {', '.join(_KINDS)} nodes")
    for i in range(node.n_children()):
        child = node.child(i)
        if name in ("sequence", "set") and _kind(child) != "filter":
            raise ScheduleError(f"Schedule.from_isl: child {i} of the {name} node (at {path}) "
                                f"is no filter node; each child of a sequence or set is a "
                                f"filter naming the statements it runs")
        _check_kinds(child, f"{path} {i}" if node.n_children() > 1 else path)


def _kind(node: isl.ScheduleNode) -> str:
    return str(node.get_type()).rsplit(".", 1)[-1]


def _parse(text: str, ctx: isl.Context) -> isl.Schedule | isl.UnionMap:
    tree = _TREE.match(text)
    try:
        if tree and tree.group(1):  # flow style: isl's strings may not span lines
            return isl.Schedule.read_from_str(ctx, " ".join(text.split()))
        if tree:
            return isl.Schedule.read_from_str(ctx, text)
        return isl.UnionMap.read_from_str(ctx, text)
    except isl.Error as e:
        kind = "schedule tree (YAML)" if tree else "union map (a schedule tree starts with " \
                                                   "'{ domain:')"
        raise ScheduleError(f"Schedule.from_isl: isl cannot read this {kind}: {e}\n  "
                            f"{_clip(text)}") from e


def _clip(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= 300 else flat[:300] + " ..."


def _check_params(poly: PolyProgram, space: isl.Space) -> None:
    known = set(poly.program.sizes) | {k for k, _ in poly.program.bound}
    used = [str(space.get_dim_name(isl.dim_type.param, i)) for i in range(
        space.dim(isl.dim_type.param))]
    unknown = [p for p in used if p not in known]
    if unknown:
        raise ScheduleError(f"Schedule.from_isl: the schedule uses parameter(s) "
                            f"{', '.join(unknown)}, which are not sizes of def "
                            f"'{poly.program.name}' (its sizes: "
                            f"{', '.join(sorted(known)) or 'none'})")


def _flat(poly: PolyProgram, umap: isl.UnionMap) -> isl.Schedule:
    """The one-band schedule tree of a union map, over the def's domain."""
    _check_cover(poly, umap.domain(), exact=False)  # a map's domain may be wider
    umap = umap.intersect_domain(poly.domain)
    if not umap.is_single_valued():
        raise ScheduleError("Schedule.from_isl: the map gives some instance several times "
                            "(a schedule is a function of each instance)")
    maps: list[isl.Map] = []
    umap.foreach_map(maps.append)
    depth = max((m.dim(isl.dim_type.out) for m in maps), default=0)
    flat = isl.UnionMap.empty(umap.get_space())
    for m in maps:
        n = m.dim(isl.dim_type.out)
        m = m.reset_tuple_id(isl.dim_type.out).add_dims(isl.dim_type.out, depth - n)
        for k in range(n, depth):
            m = m.fix_val(isl.dim_type.out, k, isl.Val.zero(m.get_ctx()))
        flat = flat.union(isl.UnionMap.from_map(m))
    tree = isl.Schedule.from_domain(poly.domain)
    if depth == 0:
        return tree
    try:
        return tree.insert_partial_schedule(isl.MultiUnionPwAff.from_union_map(flat))
    except isl.Error as e:
        raise ScheduleError(f"Schedule.from_isl: the map is not a piecewise quasi-affine "
                            f"function of each instance: {e}") from e


def sequenced(node: Node) -> Node:
    """A flat schedule's constant members (the 2d+1 form of Pluto and CLooG) as sequences:
    a loop whose value is a constant for each statement below it runs them in the order of
    those values, one after another; one value for all of them orders nothing (it goes)."""
    if isinstance(node, Leaf):
        return node
    if isinstance(node, Sequence):
        return sequence(tuple(sequenced(c) for c in node.children))
    below = stmts_of(node)
    expr = expr_of(node.expr, set(below))  # only the statements a branch kept
    values = _constants(expr, below)
    if values is None:
        return replace(node, expr=expr, child=sequenced(node.child))
    parts = [prune(node.child, {s for s, v in values.items() if v == at})
             for at in sorted(set(values.values()))]
    return sequence(tuple(sequenced(p) for p in parts if p is not None))


def _constants(upa: isl.UnionPwAff, stmts: tuple[str, ...]) -> dict[str, int] | None:
    """The integer each statement of ``stmts`` gets from ``upa``; None unless each gets
    one (not depending on its indices or the sizes)."""
    out: dict[str, int] = {}
    for pa in pieces(upa):
        aff = pa.get_pieces()[0][1] if pa.n_piece() == 1 else None
        if aff is None or not aff.is_cst() or aff.dim(isl.dim_type.div) or any(
                not aff.get_coefficient_val(isl.dim_type.param, i).is_zero()
                for i in range(aff.dim(isl.dim_type.param))):
            return None
        value = aff.get_constant_val()
        if not value.is_int():
            return None
        out[pa.get_domain_space().get_tuple_name(isl.dim_type.set)] = int(value.to_python())
    return out if set(stmts) == out.keys() else None


def _check_cover(poly: PolyProgram, given: isl.UnionSet, exact: bool = True) -> None:
    """``given`` (the instances a schedule gives a time) must hold the def's instances (be
    them, when ``exact``) at every admissible size."""
    known = [s.name for s in poly.stmts]
    names = sorted({s.get_tuple_name() for s in sets(given)} - set(known))
    if names:
        raise ScheduleError(f"Schedule.from_isl: def '{poly.program.name}' has no statement "
                            f"{', '.join(names)}; its statements: {', '.join(known)} "
                            f"(print(polyopt.schedule(source, auto=False).poly) shows their "
                            f"domains)")
    sizes = _admissible(poly)
    missing = poly.domain.subtract(given).intersect_params(sizes)
    if not missing.is_empty():
        raise ScheduleError(f"Schedule.from_isl: the schedule leaves out instances of def "
                            f"'{poly.program.name}': {missing.coalesce()}")
    extra = given.subtract(poly.domain).intersect_params(sizes)
    if exact and not extra.is_empty():
        raise ScheduleError(f"Schedule.from_isl: the schedule has instances def "
                            f"'{poly.program.name}' does not: {extra.coalesce()}")


def _admissible(poly: PolyProgram) -> isl.Set:
    """The sizes the def admits: its context, the sizes it fixes at their values."""
    bound = dict(poly.program.bound)
    if not bound:
        return poly.context
    fixed = " and ".join(f"{k} = {v}" for k, v in bound.items())
    return poly.context.intersect_params(isl.Set(f"[{', '.join(bound)}] -> {{ : {fixed} }}"))


def _check_once(root: Node) -> None:
    """Each statement at one leaf: polyopt's trees place whole statements, not instances
    split by filters."""
    seen: set[str] = set()
    for s in stmts_of(root):
        if s in seen:
            raise ScheduleError(f"Schedule.from_isl: statement {s} is split between branches "
                                f"of the tree; a statement's instances must stay together "
                                f"(write the split as a loop's value instead)")
        seen.add(s)


def _check_injective(smap: isl.UnionMap) -> None:
    maps: list[isl.Map] = []
    smap.foreach_map(maps.append)
    for m in maps:
        if not m.is_injective():
            s = m.get_tuple_name(isl.dim_type.in_)
            raise ScheduleError(f"Schedule.from_isl: the schedule gives several instances of "
                                f"{s} the same time; add loops until each instance has its "
                                f"own: {m}")


# -- names ------------------------------------------------------------------------------------

def name_loops_given(root: Node, order: tuple[str, ...]) -> Node:
    """Name the unnamed loops of ``root`` by the rules of this module's doc (``order``: the
    statements in program order)."""
    taken: set[str] = set()
    for lp in loops(root):
        if lp.name in taken:
            raise ScheduleError(f"Schedule.from_isl: two loops are marked {lp.name!r}; loop "
                                f"names must be unique")
        if lp.name:
            taken.add(lp.name)
    renames: dict[int, str] = {}
    stack: list[tuple[Node, int]] = [(root, 0)]
    while stack:  # pre-order, so outer loops take the plain names
        node, depth = stack.pop()
        if isinstance(node, Loop):
            if not node.name:
                renames[id(node)] = fresh_name(loop_name(node.expr, order) or f"c{depth}",
                                               taken)
            stack.append((node.child, depth + 1))
        elif isinstance(node, Sequence):
            stack.extend((c, depth) for c in reversed(node.children))
    return rename(root, renames)


def loop_name(upa: isl.UnionPwAff, order: tuple[str, ...]) -> str | None:
    """The name rules 2 and 3 give a loop of value ``upa`` (None: rule 4)."""
    terms = {pa.get_domain_space().get_tuple_name(isl.dim_type.set): _terms(pa)
             for pa in pieces(upa)}
    plain = {_index(t[0][0]) if t is not None and len(t) == 1 and t[0][1] == 1 else None
             for t in terms.values()}
    if len(plain) == 1 and None not in plain:
        return plain.pop()
    first = next((terms[s] for s in order if s in terms), None)
    if not first:
        return None
    if len(first) > 1:
        return "_".join(_index(name) for name, _ in first)
    return f"{_index(first[0][0])}_rev" if first[0][1] == -1 else None


def _terms(pa: isl.PwAff) -> list[tuple[str, int]] | None:
    """The (dimension, coefficient) pairs of a one-piece affine value without divisions."""
    if pa.n_piece() != 1:
        return None
    aff = pa.get_pieces()[0][1]
    if aff.dim(isl.dim_type.div):
        return None
    out = []
    for i in range(aff.dim(isl.dim_type.in_)):
        c = aff.get_coefficient_val(isl.dim_type.in_, i)
        if not c.is_zero():
            if not c.is_int():
                return None
            out.append((str(aff.get_space().get_dim_name(isl.dim_type.in_, i)),
                        int(c.to_python())))
    return out


def _index(dim: str) -> str:
    return dim[2:] if dim.startswith("r_") and len(dim) > 2 else dim

