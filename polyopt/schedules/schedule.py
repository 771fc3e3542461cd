"""The Schedule artifact: a loop tree for one def, the dependences it must respect, and the
transformations (steps) that produced it from its base.

Every verb returns a new Schedule and is checked against the exact dependences; an illegal
one raises ``IllegalScheduleError`` naming the violated dependence. Schedules are data:
``as_python()`` and ``as_json()`` print the steps, ``polyopt.schedule_from_json`` replays them
(in the driver: a replay starts from the base schedule the pipeline builds).
``Schedule.from_isl`` reads a schedule written in isl's notation (``to_isl`` writes one).
"""

from __future__ import annotations

import importlib
import json
import warnings
from collections.abc import Callable, Mapping
from collections.abc import Sequence as Seq
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

import islpy as isl

from polyopt.errors import ScheduleError
from polyopt.lang import Definition, build_program
from polyopt.poly import analyze, analyze_relaid
from polyopt.poly.deps import Deps
from polyopt.poly.merge import Merge
from polyopt.poly.model import PolyProgram
from polyopt.poly.relayout import LAYOUT_VERBS, Layout, Pack, layout_of, relayout, rewrites_stmts
from polyopt.schedules import hyperplane as hp
from polyopt.schedules import tagcheck
from polyopt.schedules import transform as tf
from polyopt.schedules.contraction import contracted_dim
from polyopt.schedules.from_isl import read
from polyopt.schedules.legality import carried, check_legal, distributable, permutable
from polyopt.schedules.marks import Bind, GpuTile, GpuUnroll, Tag, VectorLanes, bind_of
from polyopt.schedules.sequential import dataflow_order
from polyopt.schedules.tree import (
    Leaf,
    Loop,
    Node,
    filter_domain,
    fix_params,
    loops,
    nest_of,
    order_of,
    prune,
    pseudo_code,
    reordered,
    sequence,
    stmts_of,
    substitute,
    to_isl,
    widen,
)
from polyopt.schedules.verb_args import checked

VERBS = ("tile", "split", "reorder", "interchange", "fuse", "distribute", "skew", "shift",
         "reverse", "hyperplanes", "parallel", "vectorize", "unroll", "unroll_and_jam",
         "separate", "pack", "merge", "contract", "bind", "gpu_tile", "compute_at")


@dataclass(frozen=True)
class Step:
    """One recorded verb call."""

    verb: str
    args: tuple[Any, ...]
    kwargs: tuple[tuple[str, Any], ...] = ()

    def python(self) -> str:
        parts = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs]
        return f"{self.verb}({', '.join(parts)})"

    def as_dict(self) -> dict[str, Any]:
        return {"verb": self.verb, "args": list(self.args), "kwargs": dict(self.kwargs)}


@dataclass(frozen=True, eq=False)
class Schedule:
    """A loop tree over the statements of one def (see ``polyopt.schedules.tree``)."""

    root: Node
    poly: PolyProgram
    deps: Deps
    base: str  # "isl" (isl's scheduler) | "program-order" | "from_isl" (``from_isl``)
    fusion: str = "smart"
    steps: tuple[Step, ...] = ()
    buffers: tuple[str, ...] = ()  # packed copies of inputs (zero-padded to whole blocks)
    # (local, loop, dim): the local keeps only one slice, private to each iteration of loop
    contractions: tuple[tuple[str, str, int], ...] = ()
    # Why the automatic pipeline chose what it did (the cost model's predictions): printed
    # and saved with the steps, not replayed (replaying the steps rebuilds the schedule).
    notes: tuple[str, ...] = ()
    isl_text: str = ""  # base "from_isl": the isl schedule it was read from (for replays)

    # -- views ---------------------------------------------------------------------------
    @cached_property
    def tree(self) -> isl.Schedule:
        """The isl schedule tree (one band per loop, under a mark ``loop <name>``), as the
        AST builder reads it; ``to_isl()`` returns it."""
        return to_isl(self.root, self.poly.domain)

    def to_isl(self) -> isl.Schedule:
        """This schedule as an isl schedule tree: one single-member band per loop, under an
        isl mark ``loop <name>`` naming it (``from_isl`` reads those names back). It carries
        the loops' order and names; the marks verbs add (parallel, vectorize, ...) are not
        in it, except unroll and separate as the bands' AST loop types (which ``from_isl``
        does not read). After ``pack`` it holds the copies' statements, which ``from_isl``
        refuses: it reads schedules of the def as written."""
        return self.tree

    @cached_property
    def map(self) -> isl.UnionMap:
        """Statement instances → their (flattened) schedule time."""
        return self.tree.get_map()

    @property
    def loops(self) -> tuple[str, ...]:
        return tuple(lp.name for lp in loops(self.root))

    @property
    def stmts(self) -> tuple[str, ...]:
        return stmts_of(self.root)

    def loop(self, name: str) -> Loop:
        return tf.find(self.root, name)

    def __str__(self) -> str:
        head = f"# schedule of def {self.poly.program.name} ({self.base}"
        head += f", {len(self.steps)} steps)" if self.steps else ")"
        why = [f"# why: {n}" for n in self.notes]
        return "\n".join([head, *why, *pseudo_code(self.root)])

    def note(self, text: str) -> Schedule:
        """This schedule with ``text`` added to its notes (no change to the loops)."""
        return replace(self, notes=(*self.notes, text))

    # -- verbs ---------------------------------------------------------------------------
    @checked
    def tile(self, loops: Seq[str] | str, *sizes: int | Seq[int],
             names: Seq[Seq[str]] | None = None) -> Schedule:
        """Tile adjacent loops; one ``sizes`` argument per level, outermost level first:
        ``s.tile(("i", "j"), 32)`` or ``s.tile(("i", "j"), (256, 128), (8, 32))``."""
        group = [loops] if isinstance(loops, str) else list(loops)
        if not sizes:
            raise ScheduleError("tile needs at least one level of sizes")
        levels = [[lv] * len(group) if isinstance(lv, int) else list(lv) for lv in sizes]
        if any(len(lv) != len(group) for lv in levels):
            raise ScheduleError(f"tile of {group}: each level needs {len(group)} sizes, "
                                f"got {[list(lv) for lv in levels]}")
        return self._step("tile", lambda r: tf.tile(r, group, levels, names),
                          (loops, *sizes), proven=self._permutable(group), names=names)

    @checked
    def split(self, loop: str, factor: int, names: Seq[str] | None = None) -> Schedule:
        return self._step("split", lambda r: tf.split(r, loop, factor, names),
                          (loop, factor), names=names)

    @checked
    def reorder(self, *order: str) -> Schedule:
        """Reorder perfectly nested loops, listed outermost first (as TVM)."""
        return self._step("reorder", lambda r: tf.reorder(r, order), order,
                          proven=self._permutable(order))

    @checked
    def interchange(self, a: str, b: str) -> Schedule:
        def swap(r: Node) -> Node:
            ch = tf.chain(r, (a, b))
            names = [lp.name for lp in ch if lp.name in (a, b)]
            return tf.reorder(r, names[::-1])
        return self._step("interchange", swap, (a, b), proven=self._permutable((a, b)))

    @checked
    def fuse(self, first: str, second: str, *more: str) -> Schedule:
        """Fuse sibling loop nests' outer loops into one (named ``first``), their bodies in
        the order the nests ran: ``fuse(a, b, c)`` is ``fuse(a, b).fuse(a, c)``, checked
        once."""
        return self._step("fuse", lambda r: tf.fuse(r, first, second, *more),
                          (first, second, *more))

    @checked
    def distribute(self, loop: str) -> Schedule:
        """Give each statement group below ``loop`` its own copy of the nest."""
        return self._step("distribute", lambda r: tf.distribute(r, loop, self.poly.domain),
                          (loop,), proven=distributable(self.root, loop, self.deps,
                                                        self.poly.domain))

    @checked
    def compute_at(self, nest: str, loop: str) -> Schedule:
        """Move the top-level nest starting at loop ``nest`` into ``loop`` of another nest
        (Halide's ``compute_at``): a producer's instances run in the first iteration that
        needs them, before ``loop``'s body (an ``_init`` fill just ahead of the register tile
        it fills); a consumer's in the last iteration they read from, after it (an epilogue
        on a tile while it is in cache)."""
        return self._step("compute_at", lambda r: tf.compute_at(
            r, nest, loop, self.deps.all, self.poly.domain), (nest, loop))

    @checked
    def skew(self, outer: str, inner: str, factor: int = 1) -> Schedule:
        return self._step("skew", lambda r: tf.skew(r, outer, inner, factor),
                          (outer, inner, factor),
                          proven=factor >= 0 and self._permutable((outer, inner)))

    @checked
    def shift(self, loop: str, offset: int, stmts: Seq[str] | None = None) -> Schedule:
        def fn(r: Node) -> Node:
            chosen = None if stmts is None else self._stmt_names(
                stmts, stmts_of(tf.find(r, loop)))
            return tf.shift(r, loop, offset, chosen, self.poly.domain)
        return self._step("shift", fn, (loop, offset), stmts=stmts)

    @checked
    def hyperplanes(self, loops: Seq[str], rows: Seq[Seq[int]], names: Seq[str] | None = None,
                    offsets: Mapping[str, Seq[int]] | None = None) -> Schedule:
        """Replace the band ``loops`` by one loop per row, ``sum_k row[k] * loops[k]`` plus
        ``offsets[stmt][row]`` (``schedules/hyperplane.py``)."""
        pairs = hp.offset_pairs(offsets)
        return self._step("hyperplanes", lambda r: hp.replace_band(
            r, loops, rows, names, pairs, self.poly.domain), (loops, rows), names=names,
            offsets=pairs)

    @checked
    def reverse(self, loop: str) -> Schedule:
        return self._step("reverse", lambda r: tf.reverse(r, loop), (loop,))

    @checked
    def parallel(self, loop: str) -> Schedule:
        """Run ``loop``'s iterations in parallel (OpenMP); it must carry no dependence, or
        only the accumulation (``+``, ``*``) of one statement into one element per execution
        of the loop (a dot product's, a whole sum's): then each thread sums a private copy
        and the copies combine at the end (split-K; TC's reductions are unordered)."""
        def fn(r: Node) -> Node:
            lp = tf.find(r, loop)
            bad = carried(r, lp, self.deps, self.poly.domain)
            if not bad.is_empty() and tagcheck.split_reduction(self.poly, lp, bad):
                return tf.tag(r, loop, Tag.PARALLEL_REDUCTION)
            return tagcheck.tag_free(self.poly, self.deps, r, loop, Tag.PARALLEL)
        return self._step("parallel", fn, (loop,))

    @checked
    def bind(self, loop: str, axis: str) -> Schedule:
        """Run ``loop``'s iterations on different CUDA blocks or threads (TVM's ``bind``):
        ``axis`` is one of ``blockIdx.x/y/z`` or ``threadIdx.x/y/z``. The loop must carry no
        dependence; in each kernel (top-level nest) block loops enclose thread loops."""
        mark = Bind(axis)  # checks the axis

        def fn(r: Node) -> Node:
            bound = bind_of(tf.find(r, loop).tags)
            if bound:
                raise ScheduleError(f"bind: loop {loop} is already bound to {bound}")
            return tagcheck.tag_free(self.poly, self.deps, r, loop, mark)
        return self._step("bind", fn, (loop, axis))

    @checked
    def gpu_tile(self, loop: str, regs: Seq[int] = (4, 4), shared: bool = True,
                 unroll: int | None = None) -> Schedule:
        """CUDA: run the tile at ``loop`` (rows, with the perfectly nested columns and one
        reduction below it, over one ``+=`` statement) on a block's threads: the operands
        that move with only the rows or only the columns are staged through shared memory
        one reduction tile at a time, and each thread keeps ``regs`` = (rows, columns)
        outputs in registers across the reduction loops below the innermost block loop.
        ``shared=False`` reads the operands from global memory instead; ``unroll`` unrolls
        the tile's reduction loop by that factor (default: fully)."""
        rm, rn = (int(r) for r in regs)
        if unroll is not None and (not isinstance(unroll, int) or unroll < 1):
            raise ScheduleError(f"gpu_tile: unroll must be a positive int, not {unroll!r}")

        def fn(r: Node) -> Node:
            lp = tf.find(r, loop)
            col = lp.child
            red = col.child if isinstance(col, Loop) else None
            if not isinstance(col, Loop) or not isinstance(red, Loop) or not isinstance(
                    red.child, Leaf) or len(red.child.stmts) != 1:
                raise ScheduleError(f"gpu_tile: {loop} must hold a column loop, then one "
                                    f"reduction loop, then one statement")
            for name, n in ((loop, rm), (col.name, rn)):
                _, most = tf.value_extent(tf.find(r, name), self.poly.domain)
                if n < 1 or most is None or most % n:
                    raise ScheduleError(f"gpu_tile: loop {name} needs a bounded number of "
                                        f"values that {n} divides (it has {most})")
                tagcheck.tag_free(self.poly, self.deps, r, name, Tag.GPU_THREADS)
            r = tf.tag(tf.tag(r, col.name, Tag.GPU_TILE_COLS), red.name, Tag.GPU_TILE_REDUCTION)
            if not shared:
                r = tf.tag(r, loop, Tag.GPU_TILE_GLOBAL)
            if unroll is not None:
                r = tf.tag(r, red.name, GpuUnroll(unroll))
            return tf.tag(r, loop, GpuTile(rm, rn))
        kw: dict[str, Any] = {"shared": None if shared else False, "unroll": unroll}
        return self._step("gpu_tile", fn, (loop, (rm, rn)), **kw)

    @checked
    def vectorize(self, loop: str, lanes: int | None = None) -> Schedule:
        """Vectorize the innermost ``loop``; it must carry no dependence. ``lanes`` fixes
        its width (a power of two; the C printer's ``simdlen``), else the compiler's."""
        width = None if lanes is None else VectorLanes(lanes)

        def fn(r: Node) -> Node:
            if loops(tf.find(r, loop).child):
                raise ScheduleError(f"vectorize: loop {loop} is not innermost")
            r = tagcheck.tag_free(self.poly, self.deps, r, loop, Tag.VECTORIZE)
            lp = tf.find(r, loop)
            kept = frozenset(m for m in lp.tags if not isinstance(m, VectorLanes))
            return substitute(r, lp, replace(lp, tags=kept | ({width} if width else set())))
        return self._step("vectorize", fn, (loop,), lanes=lanes)

    @checked
    def unroll(self, loop: str, factor: int | None = None) -> Schedule:
        """Unroll ``loop`` fully (a constant trip count of at most 64), or split it by
        ``factor`` and unroll the inner part (``loop_i``)."""
        def fn(r: Node) -> Node:
            if factor is not None:
                r = tf.split(r, loop, factor)
                return tf.tag(r, tf.split_names(loop)[1], Tag.UNROLL)
            n = tf.trip_count(tf.find(r, loop), self.poly.domain)
            if n is None or n > tf.MAX_FULL_UNROLL:
                count = "a non-constant" if n is None else n
                raise ScheduleError(f"unroll: loop {loop} has {count} trip count; give a "
                                    f"factor (full unrolling allows at most "
                                    f"{tf.MAX_FULL_UNROLL})")
            return tf.tag(r, loop, Tag.UNROLL)
        return self._step("unroll", fn, (loop,) if factor is None else (loop, factor))

    @checked
    def unroll_and_jam(self, loop: str, factor: int,
                       names: Seq[str] | None = None) -> Schedule:
        """Register tiling: split ``loop`` by ``factor``, sink the inner part below the
        loops it encloses (above a vectorized loop) and unroll it."""
        def fn(r: Node) -> Node:
            r = tf.split(r, loop, factor, names)  # checks the names
            inner = names[1] if names else tf.split_names(loop)[1]
            return tf.tag(tf.jam(r, inner), inner, Tag.UNROLL)
        return self._step("unroll_and_jam", fn, (loop, factor), names=names)

    @checked
    def separate(self, loop: str) -> Schedule:
        """Generate ``loop``'s full tiles apart from its partial ones, so the full tiles'
        inner loops have constant bounds and no guards (isl's ``separate`` option)."""
        return self._step("separate", lambda r: tf.tag(r, loop, Tag.SEPARATE), (loop,))

    @checked
    def pack(self, tensor: str, dim: int, factor: int, outer: int = 0,
             phase: bool = False, subsample: bool = False) -> Schedule:
        """Blocked layouts. An input is read through a copy made before everything else:
        dimension ``dim`` splits into a block index (at position ``outer``) and an offset
        (innermost), e.g. ``pack("B", 1, 32)`` gives ``B_pack(n/32, k, n%32)``; the copy,
        which also holds the input's zero padding, gets its own loop nest. An output is
        computed in such a blocked local and unpacked at the end (``pack("O", 1, 16, 1)``
        is NCHW16c); its statements change, so pack outputs before other steps, and the
        nests restart from program order. ``phase=True`` (inputs): the offset goes to
        position ``outer`` and the block index stays at ``dim``, ``pack("I", 3, 2, 3,
        True)`` gives ``I_pack(n, c, h, w % 2, w / 2)``: a read at stride 2 along ``w``
        becomes a unit-stride one. ``subsample=True`` (inputs): a compact copy of the
        elements reads at a stride of ``factor`` touch, ``dim`` moved to ``outer``:
        ``pack("I", 2, 2, 1, subsample=True)`` gives ``I_pack(n, h, c, w) = I(n, c, 2*h,
        2*w)`` for a strided 1x1 convolution (``polyopt.poly.subsample``)."""
        return self.relayout([Pack(tensor, dim, factor, outer, phase, subsample)])

    @checked
    def merge(self, tensor: str, dim: int) -> Schedule:
        """Loop coalescing: dimensions ``dim`` and ``dim + 1`` of ``tensor`` as one, and
        in each statement the two loops that walk them as one loop over their run
        (``polyopt.poly.merge``), with every tensor and statement that must merge with
        them. ``merge("O", 2)`` turns a 1x1 convolution's ``O(n, f, h, w)`` into
        ``O(n, f, hw)`` over ``hw`` in ``[0, H*W)``. Only where every access walks the two
        as one run (the same bytes, so the caller's arrays serve as they are); statements
        change, so merge before other steps, and the nests restart from program order."""
        return self.relayout([Merge(tensor, dim)])

    def relayout(self, packs: Seq[Layout]) -> Schedule:
        """``pack`` (or ``merge``) each of ``packs`` in turn, with one dependence analysis
        for them all (``polyopt.poly.relayout``)."""
        program, names = relayout(self.poly.program, packs)
        rewrites = rewrites_stmts(self.poly.program, packs)
        poly, deps = analyze(program, self.poly.borders) if any(
            isinstance(p, Merge) for p in packs) else analyze_relaid(program, self.poly,
                                                                    self.deps)
        steps = tuple(Step(p.verb, p.args) for p in packs)
        base = self._rebased(poly, deps, packs[0].tensor) if rewrites \
            else self._with_copies(poly)
        new = replace(base, poly=poly, deps=deps, steps=(*self.steps, *steps),
                      buffers=(*self.buffers, *names))
        check_legal(new.map, deps, "; ".join(st.python() for st in steps))
        return new

    @property
    def layout(self) -> tuple[Layout, ...]:
        """The layouts this schedule's ``merge`` and ``pack`` steps chose, in order."""
        return tuple(layout_of(st.verb, st.args) for st in self.steps
                     if st.verb in LAYOUT_VERBS)

    @checked
    def contract(self, tensor: str, loop: str) -> Schedule:
        """Keep local ``tensor`` as one slice per iteration of ``loop`` (a stack array in
        the generated code): every access must sit under ``loop``, index one dimension
        by its value, and read only what the same iteration wrote."""
        lp = tf.find(self.root, loop)
        dim = contracted_dim(lp, self.poly, tensor, self.map)
        if any(c[0] == tensor for c in self.contractions):
            raise ScheduleError(f"contract: {tensor} is already contracted")
        step = Step("contract", (tensor, loop))
        out = replace(self, steps=(*self.steps, step),
                      contractions=(*self.contractions, (tensor, loop, dim)))
        # The same tree: its isl form and map carry over (building them again per local
        # was quadratic in the statements: 28 s of 34 for 500).
        for view in ("tree", "map"):
            if view in self.__dict__:
                out.__dict__[view] = self.__dict__[view]
        return out

    def _with_copies(self, poly: PolyProgram) -> Schedule:
        """The copies (and their padding pieces) first, each in a nest of its own; reads no
        longer through padding lose their border pieces."""
        old = set(stmts_of(self.root))
        copies = [st for st in poly.stmts if st.name not in old]
        taken = {lp.name for lp in loops(self.root)}
        nests = tuple(nest_of(st, poly.program.params, taken) for st in copies)
        rest = prune(self.root, {st.name for st in poly.stmts})
        if rest is not None:  # a statement may have absorbed its border piece's instances
            rest = widen(rest)
        return replace(self, root=sequence((*nests, rest) if rest is not None else nests))

    def _rebased(self, poly: PolyProgram, deps: Deps, tensor: str) -> Schedule:
        if any(st.verb not in ("pack", "merge") for st in self.steps):
            raise ScheduleError(f"pack or merge {tensor} before other transformations "
                                f"(its statements are rewritten)")
        # Program order, whatever the base: isl's scheduler tends to skew the blocked
        # statement into its unpack, which no register tile fits.
        return replace(program_order(poly, deps), base=self.base, fusion=self.fusion,
                       isl_text=self.isl_text)

    # -- machinery -----------------------------------------------------------------------
    def _stmt_names(self, stmts: Seq[str], below: Seq[str]) -> tuple[str, ...]:
        """Statement names, where a TC statement (``O_0``) also names its padding piece
        when that piece runs ``below`` the loop at hand."""
        known = stmts_of(self.root)
        out: list[str] = []
        for s in stmts:
            border = self.poly.border_of(s)
            pieces = [k for k in known if k == s or (
                border is not None and k == border.name and k in below)]
            if not pieces:
                raise ScheduleError(f"no statement {s!r}; statements: {', '.join(known)}")
            out += pieces
        return tuple(out)

    def _permutable(self, names: Seq[str]) -> bool:
        """Do the perfectly nested loops from the outermost to the innermost of ``names``
        form a permutable band (``legality.permutable``)? That proves a tile, reorder or
        skew (by a factor >= 0) of them legal without the check of the whole order."""
        try:
            band = [lp.name for lp in tf.chain(self.root, names)]
        except ScheduleError:
            return False  # the verb itself says what is wrong
        return permutable(self.root, band, self.deps, self.poly.domain)

    def _step(self, verb: str, fn: Callable[[Node], Node], args: tuple[Any, ...],
              proven: bool = False, **kwargs: Any) -> Schedule:
        root = fn(self.root)
        kw = tuple((k, _plain(v)) for k, v in kwargs.items() if v is not None)
        new = replace(self, root=root, steps=(*self.steps, Step(verb, _plain(args), kw)))
        what = Step(verb, _plain(args), kw).python()
        moved = reordered(self.root, root)
        if moved and not proven:  # a tag alone leaves the execution order
            check_legal(order_of(root, self.poly.domain, moved), self.deps, what,
                        filter_domain(self.poly.domain, moved))
        if moved:
            for tensor, loop, _ in self.contractions:  # a slice must still suffice
                try:
                    contracted_dim(tf.find(root, loop), self.poly, tensor, new.map)
                except ScheduleError as e:
                    raise ScheduleError(f"{what} breaks contract({tensor!r}, {loop!r}): "
                                        f"{e}") from e
        tagcheck.check_tags(new.poly, new.deps, new.root, self.root, what)
        return new

    # -- data ----------------------------------------------------------------------------
    def as_json(self) -> str:
        return json.dumps({"def": self.poly.program.name, "base": self.base,
                           **({"isl": self.isl_text} if self.base == "from_isl" else {}),
                           "fusion": self.fusion,
                           "steps": [s.as_dict() for s in self.steps],
                           **({"notes": list(self.notes)} if self.notes else {})}, indent=1)

    def as_python(self) -> str:
        auto = "'isl'" if self.base == "isl" else "False"
        name = self.poly.program.name
        lines = [f"s = polyopt.schedule(source, {name!r}, auto={auto}"
                 f"{', options={' + repr('fusion') + ': ' + repr(self.fusion) + '}'})"]
        if self.base == "from_isl":
            lines = [f"s = polyopt.Schedule.from_isl(source, {self.isl_text!r}, name={name!r})"]
        lines += [f"# {n}" for n in self.notes]
        lines += [f"s = s.{step.python()}" for step in self.steps]
        return "\n".join(lines)

    def replay(self, steps: Seq[Step]) -> Schedule:
        out = self
        for st in steps:
            if st.verb not in VERBS:
                raise ScheduleError(f"unknown schedule verb {st.verb!r}; verbs: {', '.join(VERBS)}")
            try:
                out = getattr(out, st.verb)(*st.args, **dict(st.kwargs))
            except TypeError as e:
                raise ScheduleError(f"bad arguments for schedule verb {st.python()}: {e}") from e
        return out

    @staticmethod
    def from_isl(definition: str | Definition, schedule: isl.Schedule | str, *,
                 name: str | None = None, sizes: Mapping[str, int] | None = None) -> Schedule:
        """The schedule ``schedule`` (an ``isl.Schedule``, its YAML text, or a union map
        ``{ C_0[m, n, k] -> [n, m, k] }`` from instances to times) of def ``name`` of
        ``definition`` (TC source) at ``sizes`` (None: size-generic), as a loop tree the verbs
        address by name and ``compile`` runs. Statements carry polyopt's names (``.stmts`` of
        ``polyopt.schedule(source, auto=False)``; ``print(s.poly)`` shows their domains).

        Loops are named by a mark right above their band (``loop x`` or ``x``), else after
        the TC index they scan (its value plus a constant in every statement: ``r_k`` gives
        ``k``), else after a skew's indices (``t_i`` for ``t + i``, ``i_rev`` for ``-i``),
        else ``c<depth>``; ``polyopt.schedules.from_isl`` gives the rules in full.

        ScheduleError when isl cannot read the text, or the schedule leaves out instances
        of the def or has others, splits a statement between branches or gives two of its
        instances one time; IllegalScheduleError, naming the dependence, when it runs an
        instance before one it depends on. ``as_json`` keeps the text for replays."""
        program = build_program(definition, name, sizes)
        poly, deps = analyze(program)
        given = read(poly, schedule)
        out = Schedule(given.root, poly, deps, "from_isl", isl_text=given.text)
        check_legal(out.map, deps, "the schedule given to Schedule.from_isl")
        return out

    @staticmethod
    def from_json(text: str, source: str, name: str | None = None, *,
                  sizes: Mapping[str, int] | None = None) -> Schedule:
        """Deprecated: use ``polyopt.schedule_from_json`` (removed in the next release).

        Replaying needs the base schedule, which the automatic pipeline (a layer above this
        one) builds; so the replay lives there, and this alias reaches it by name."""
        warnings.warn("Schedule.from_json is deprecated; use polyopt.schedule_from_json "
                      "(same arguments)", DeprecationWarning, stacklevel=2)
        driver = importlib.import_module("polyopt.driver")
        out: Schedule = driver.schedule_from_json(text, source, name, sizes=sizes)
        return out

    @staticmethod
    def parse_steps(text: str) -> tuple[dict[str, Any], tuple[Step, ...]]:
        try:
            data = json.loads(text)
            steps = tuple(Step(d["verb"], tuple(d.get("args", ())),
                               tuple(d.get("kwargs", {}).items())) for d in data["steps"])
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as e:
            raise ScheduleError(f"not a polyopt schedule in JSON: {str(e)[:200]}") from None
        return data, steps

    def specialize(self, poly: PolyProgram, deps: Deps, bound: Mapping[str, int]) -> Schedule:
        """This schedule for ``poly``: the same def with the sizes in ``bound`` fixed and
        this schedule's ``layout`` applied already (``polyopt.poly.relayout``)."""
        root = fix_params(self.root, bound)
        out = replace(self, root=root, poly=poly, deps=deps)
        if not poly.domain.is_subset(out.map.domain()):
            fixed = ", ".join(f"{k}={v}" for k, v in self.poly.program.bound) or "no sizes"
            raise ScheduleError(
                f"the schedule of def '{poly.program.name}' was made for {fixed} and does not "
                f"cover every instance at these sizes; make it without sizes (size-generic) "
                f"or compile with the sizes it was made for")
        check_legal(out.map, deps)
        return out


def program_order(pp: PolyProgram, deps: Deps) -> Schedule:
    """The sequential source order: one loop nest per statement, in program order (for a
    def with value semantics, an order of its dataflow: ``dataflow_order``)."""
    if pp.program.value_semantics:
        return Schedule(dataflow_order(pp, deps), pp, deps, "program-order")
    taken: set[str] = set()
    nests = [nest_of(s, pp.program.params, taken) for s in pp.stmts]
    root = sequence(tuple(nests)) if nests else Leaf(())
    return Schedule(root, pp, deps, "program-order")


def _plain(value: Any) -> Any:
    """Tuples all the way down, so steps compare and print the same after a JSON trip."""
    if isinstance(value, (list, tuple)):
        return tuple(_plain(v) for v in value)
    return value
