"""Schedule → isl AST, with each loop annotated by whether it carries a dependence.

A loop is parallel when, for every dependence whose endpoints share all outer loop
iterations, the endpoints also share this loop's iteration (PPCG's ``cpu.c`` test).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import islpy as isl

from polyopt.errors import CodegenError
from polyopt.poly.deps import Deps
from polyopt.poly.model import PolyProgram
from polyopt.poly.proofs import innermost_carries_nothing
from polyopt.schedules.marks import Marks, Tag, bind_of, gpu_tile_of
from polyopt.schedules.schedule import Schedule
from polyopt.schedules.storage import Modulo
from polyopt.schedules.transform import trip_count, value_extent
from polyopt.schedules.tree import Loop, loops

PARALLEL = "parallel"
SEQUENTIAL = "sequential"


@dataclass(frozen=True, eq=False)
class Ast:
    root: isl.AstNode
    poly: PolyProgram
    tags: dict[str, Marks]  # loop name (an AST mark, marks.loop_mark) -> its marks
    trips: dict[str, int | None]  # loop name -> its largest trip count, when constant
    padded: frozenset[str] = frozenset()  # tensors allocated (zeroed) in whole blocks
    contractions: tuple[tuple[str, str, int], ...] = ()  # (local, loop, dim): one slice
    # Loops bound to CUDA blocks or threads, or in a gpu.tile -> (number of values as a
    # function of the sizes, its largest value over all sizes when bounded): the launch's
    # grid and block extents, and the tile sizes.
    extents: dict[str, tuple[isl.PwAff, int | None]] = field(default_factory=dict)
    storage: tuple[Modulo, ...] = ()  # locals stored modulo a distance (schedules/storage.py)

    def __str__(self) -> str:
        return self.root.to_C_str()


def build_ast(pp: PolyProgram, schedule: Schedule, deps: Deps,
              storage: tuple[Modulo, ...] = (), only: isl.UnionSet | None = None) -> Ast:
    """The isl AST of ``schedule``; ``for`` nodes carry a "parallel"/"sequential" Id;
    ``storage``: the locals to store modulo a distance; ``only``: the statement instances
    to run, when not all (``schedules.constants``: the copies made once, or the rest)."""
    errors: list[BaseException] = []
    dep_all = deps.all

    def before_for(build: isl.AstBuild) -> isl.Id:
        # An exception must not cross into isl: record it and re-raise after the build.
        try:
            par = innermost_carries_nothing(build.get_schedule(), dep_all)
        except BaseException as e:
            errors.append(e)
            par = False
        return isl.Id(PARALLEL if par else SEQUENTIAL)

    try:
        build = isl.AstBuild.from_context(pp.context)
        build, _keep = build.set_before_each_for(before_for)  # handle lives through the build
        tree = schedule.tree if only is None else schedule.tree.intersect_domain(only)
        root = build.node_from_schedule(tree)
    except isl.Error as e:
        raise CodegenError(f"isl's AST builder failed for '{pp.program.name}': {e}") from e
    if errors:
        raise CodegenError(f"AST annotation failed: {errors[0]!r}") from errors[0]
    # Tagged loops, and the loops right around vector loops (transposing copies' rows).
    tagged = [lp for lp in loops(schedule.root) if lp.tags or (
        isinstance(lp.child, Loop) and Tag.VECTORIZE in lp.child.tags)]
    extents = {lp.name: value_extent(lp, pp.domain) for lp in tagged
               if bind_of(lp.tags) or gpu_tile_of(lp.tags) or lp.tags & _TILE_ROLES}
    return Ast(root, pp, {lp.name: lp.tags for lp in tagged if lp.tags},
               {lp.name: trip_count(lp, pp.domain) for lp in tagged},
               frozenset(schedule.buffers), schedule.contractions, extents, storage)


# The loops of a GPU block tile whose extents the printer needs.
_TILE_ROLES = frozenset({Tag.GPU_TILE_COLS, Tag.GPU_TILE_REDUCTION, Tag.GPU_TILE_GLOBAL})


def loop_is_parallel(node: isl.AstNode) -> bool:
    ann = node.get_annotation()
    return ann is not None and ann.get_name() == PARALLEL


def loop_printed(node: isl.AstNode) -> bool:
    """Whether the AST below a ``loop <name>`` mark prints that loop as a ``for`` (maybe in
    pieces, maybe under guards). isl drops a loop of one iteration when an outer value
    fixes it (a skew of an inner loop by it), leaving its body bare."""
    kind = node.get_type()
    if kind == isl.ast_node_type.for_:
        return True
    if kind == isl.ast_node_type.block:
        kids = node.block_get_children()
        return any(loop_printed(kids.get_at(i)) for i in range(kids.n_ast_node()))
    if kind == isl.ast_node_type.if_:
        return loop_printed(node.if_get_then_node()) or (
            node.if_has_else_node() and loop_printed(node.if_get_else_node()))
    return False


def children(node: isl.AstNode) -> list[isl.AstNode]:
    """The AST nodes right below ``node`` (a for's body, a mark's node, an if's branches,
    a block's statements)."""
    kind = node.get_type()
    if kind == isl.ast_node_type.for_:
        return [node.for_get_body()]
    if kind == isl.ast_node_type.mark:
        return [node.mark_get_node()]
    if kind == isl.ast_node_type.if_:
        return [node.if_get_then_node(), *([node.if_get_else_node()]
                                           if node.if_has_else_node() else [])]
    if kind == isl.ast_node_type.block:
        kids = node.block_get_children()
        return [kids.get_at(i) for i in range(kids.n_ast_node())]
    return []


def descendants(node: isl.AstNode) -> list[isl.AstNode]:
    """``node`` and every AST node below it, in order."""
    out = [node]
    for child in children(node):
        out += descendants(child)
    return out


# Loops of at most this many iterations, constant, a C compiler may peel completely (GCC's
# ``max-completely-peel-times``), leaving their bodies written out in the loop around them.
PEELED_TRIPS = 16


def straight_line_group(loop: isl.AstNode) -> bool:
    """Whether the body of ``for`` node ``loop`` is, once a C compiler has peeled its short
    constant loops, a group of two statements or more: the shape whose dependences GCC
    12.2's vectorizer misjudged. A body with a longer or variable loop, or one statement, is
    not (GCC vectorized no outer loop around one in 24 such shapes)."""
    body = descendants(loop.for_get_body())
    inner = [n for n in body if n.get_type() == isl.ast_node_type.for_]
    trips = [_constant_trips(n) for n in inner]
    if any(t is None or t > PEELED_TRIPS for t in trips):
        return False
    statements = sum(n.get_type() == isl.ast_node_type.user for n in body)
    return statements > 1 or any(t is not None and t > 1 for t in trips)


def _constant_trips(loop: isl.AstNode) -> int | None:
    """The iterations of ``for`` node ``loop`` when its bounds and step are constants."""
    init, cond, inc = loop.for_get_init(), loop.for_get_cond(), loop.for_get_inc()
    ints = isl.ast_expr_type.int
    if init.get_type() != ints or inc.get_type() != ints or cond.get_type() != \
            isl.ast_expr_type.op or cond.get_op_n_arg() != 2 or \
            cond.get_op_arg(1).get_type() != ints:
        return None
    low, high, step = (e.get_val().to_python() for e in (init, cond.get_op_arg(1), inc))
    last = {isl.ast_expr_op_type.le: high, isl.ast_expr_op_type.lt: high - 1}.get(
        cond.get_op_type())
    if last is None or step <= 0:
        return None
    return max(0, (last - low) // step + 1)
