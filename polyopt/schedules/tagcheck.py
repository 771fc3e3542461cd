"""Tags that promise independent iterations (parallel, vectorize, a CUDA axis) and their
checks: a loop is tagged only when it carries no dependence, or only a reduction's
accumulation, and a later step that moves it is checked again."""

from __future__ import annotations

import islpy as isl

from polyopt.errors import IllegalScheduleError, ScheduleError
from polyopt.poly.deps import Deps
from polyopt.poly.model import PolyProgram
from polyopt.schedules import transform as tf
from polyopt.schedules.legality import carried
from polyopt.schedules.marks import Bind, Mark, Tag
from polyopt.schedules.tree import Loop, Node, Sequence, involves, loops, stmts_of


def tag_free(poly: PolyProgram, deps: Deps, root: Node, name: str, label: Mark) -> Node:
    """``root`` with loop ``name`` tagged ``label``, which needs iterations that carry no
    dependence (a vectorized reduction may carry its accumulation)."""
    lp = tf.find(root, name)
    bad = carried(root, lp, deps, poly.domain)
    if label == Tag.VECTORIZE and not bad.is_empty() and reduction(poly, lp, bad):
        return tf.tag(root, name, label)  # a reduction: vector partial results
    if not bad.is_empty():
        raise IllegalScheduleError(
            f"{label}: loop {name} carries a dependence (its iterations are not "
            f"independent):\n  {first(bad)}")
    return tf.tag(root, name, label)


def reduction(poly: PolyProgram, lp: Loop, bad: isl.UnionMap) -> bool:
    """Does ``lp`` carry only the accumulation of one ``+ * min max`` statement into an
    element that stays put along ``lp``? Its iterations then combine in any order
    (TC's reductions are unordered), so vector partial results are exact enough."""
    stmts = stmts_of(lp)
    if len(stmts) != 1:
        return False
    s = poly.stmt(stmts[0])
    if not s.accumulates or s.stmt.op not in ("+", "*", "min", "max"):
        return False
    if any(involves(lp.expr, s.domain, i) for i in s.stmt.lhs) or not all(
            r.affine for r in s.reads):
        return False  # the target moves with the loop: no reduction over it
    maps: list[isl.Map] = []
    bad.foreach_map(maps.append)
    return all(m.get_tuple_name(isl.dim_type.in_) == s.name ==
               m.get_tuple_name(isl.dim_type.out) for m in maps) and not any(
        r.read.tensor == s.stmt.tensor for r in s.reads)


def split_reduction(poly: PolyProgram, lp: Loop, bad: isl.UnionMap) -> bool:
    """Can ``lp`` run as a parallel reduction: it carries only the ``+``/``*``
    accumulation of its one statement, whose target moves with no loop below it (one
    element per execution of ``lp``, which each thread keeps a private copy of)?"""
    if not reduction(poly, lp, bad):
        return False
    s = poly.stmt(stmts_of(lp)[0])
    return s.stmt.op in ("+", "*") and not any(
        involves(n.expr, s.domain, i) for n in loops(lp) for i in s.stmt.lhs)


def check_tags(poly: PolyProgram, deps: Deps, root: Node, before: Node, what: str) -> None:
    """Parallel and vectorized loops must still carry no dependence (and a vectorized
    loop must stay innermost) after a later step (``root``, from ``before``) moved, fused or
    shifted them."""
    fresh, gone = _placed_anew(root, before)
    old = {lp.name: lp for lp in gone}
    for lp in fresh:
        for label in sorted(_checked(lp.tags), key=str):
            if label == Tag.VECTORIZE and loops(lp.child):
                raise ScheduleError(f"{what}: loop {lp.name} is vectorized, so it must "
                                    f"stay innermost")
            prev = old.get(lp.name)
            if prev is not None and label in prev.tags and _same_place(
                    root, lp, before, prev):
                continue  # checked when it was tagged, and nothing it depends on moved
            bad = carried(root, lp, deps, poly.domain)
            if label == Tag.VECTORIZE and not bad.is_empty() and reduction(poly, lp, bad):
                continue
            if label == Tag.PARALLEL_REDUCTION and not bad.is_empty() and \
                    split_reduction(poly, lp, bad):
                continue
            if not bad.is_empty():
                raise IllegalScheduleError(
                    f"{what}: loop {lp.name} is tagged {label} but would now carry a "
                    f"dependence (its iterations are not independent):\n  {first(bad)}")


def _checked(marks: frozenset[Mark]) -> list[Mark]:
    """The marks that promise independent iterations: parallel, vectorize, a CUDA axis."""
    return [m for m in marks if m in (Tag.PARALLEL, Tag.PARALLEL_REDUCTION, Tag.VECTORIZE)
            or isinstance(m, Bind)]


def _placed_anew(root: Node, before: Node) -> tuple[list[Loop], list[Loop]]:
    """The loops of ``root`` and of ``before`` outside the subtrees the two share at the same
    place (below the same outer loop expressions): those were checked when they were made,
    and carry what they carried (a check of every tagged loop per step, each finding its
    outer loops by a walk of the tree, was cubic in the nests: 66 s of 85 for 500). A loop's
    name is unique in its tree, so a loop of ``root`` named like one of ``before`` finds it
    among the latter."""
    if root is before:
        return [], []
    if isinstance(root, Loop) and isinstance(before, Loop) and root.name == before.name \
            and root.expr is before.expr:
        fresh, gone = _placed_anew(root.child, before.child)
        return [root, *fresh], [before, *gone]
    if isinstance(root, Sequence) and isinstance(before, Sequence):
        new, old = {id(c) for c in root.children}, {id(c) for c in before.children}
        return ([lp for c in root.children if id(c) not in old for lp in loops(c)],
                [lp for c in before.children if id(c) not in new for lp in loops(c)])
    return loops(root), loops(before)


def _same_place(root: Node, lp: Loop, old_root: Node, old: Loop) -> bool:
    """Whether ``lp`` in ``root`` runs as ``old`` did in ``old_root``: the same loop
    expression and body below the same outer loop expressions (what ``carried`` reads)."""
    if lp.expr is not old.expr or lp.child is not old.child:
        return False
    outer = [n.expr for n in tf.path_to(root, lp)[:-1] if isinstance(n, Loop)]
    outer_old = [n.expr for n in tf.path_to(old_root, old)[:-1] if isinstance(n, Loop)]
    return len(outer) == len(outer_old) and all(
        a is b for a, b in zip(outer, outer_old, strict=True))


def first(umap: isl.UnionMap) -> str:
    maps: list[isl.Map] = []
    umap.foreach_map(maps.append)
    return str(maps[0]) if maps else str(umap)
