"""What a scheduling researcher counts first: flops, compulsory traffic, intensity, the
footprint of each loop of the schedule, its parallel and vector loops, and the roofline.

Everything is counted on the program as scheduled: a schedule's pack step adds a copy
statement and a local, and its copy reads the whole input it packs (rows a strided window
skips included), so the compulsory traffic of a packed schedule can exceed the plain one's.

Counting rules (exact, from isl cardinalities: ``polyopt.poly.count``):

- flops of a statement = instances x operations per instance. An operation is one
  arithmetic node of the right-hand side on values (``+ - * / %``, ``min``, ``max``, unary
  ``-``, each builtin call such as ``exp``), weight 1 each; index arithmetic, comparisons,
  selects and casts count 0 (the operations in both arms of a select count). An
  accumulation (``+=``, ``*=``, ``min=``, ``max=``, with or without ``!``) adds its
  update, 1 more. The ``!`` fill is no flop. Integer statements count too (they are
  "operations").
- compulsory traffic of a tensor = its distinct elements x element size: read = the
  elements read before anything in the def writes them (isl dataflow, no source), written =
  the elements written. DRAM bytes count inputs and outputs only: a local lives between its
  writer and readers inside the kernel (registers, scratch kept in cache), as it would with
  an infinite cache; its bytes are listed apart. A data-dependent read (a gather) counts the
  whole dimension it may read (the relation over-approximates).
- footprint of a loop = the distinct elements (bytes) of each tensor touched by one
  iteration of it: the first (every enclosing loop at its first value, then this one): the
  schedule's loop values down to this loop fixed, the accesses of the instances at that
  point counted. For tiled loops that is one full tile when the extent allows one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import islpy as isl

from polyopt import dtypes, ir
from polyopt.costmodel.machine import Machine
from polyopt.costmodel.roofline import Roofline, roofline
from polyopt.lang.flow import union_all
from polyopt.poly.count import Count, scaled, total, try_count
from polyopt.poly.deps import by_array
from polyopt.poly.model import PolyProgram
from polyopt.schedules.marks import Bind, Tag, listed
from polyopt.schedules.schedule import Schedule
from polyopt.schedules.tree import Loop, Node, Sequence, expr_of, pieces, stmt_set

_IN, _OUT = isl.dim_type.in_, isl.dim_type.out
VALUE_OPS = ("+", "-", "*", "/", "%", "min", "max")
UPDATES = ("+", "*", "min", "max")


@dataclass(frozen=True, eq=False)
class StmtStats:
    name: str  # the TC statement (``C_0``), all its pieces (interior, border) together
    text: str  # the statement as written
    instances: Count
    ops: int  # operations per instance (module docstring)
    flops: Count


@dataclass(frozen=True, eq=False)
class TensorTraffic:
    tensor: str
    role: str  # input | output | local
    elem_bytes: int
    read: Count  # distinct elements read from memory (before any write of the def)
    written: Count  # distinct elements written

    @property
    def bytes(self) -> Count:
        return scaled(total([self.read, self.written]), self.elem_bytes)


@dataclass(frozen=True, eq=False)
class LoopFootprint:
    loop: str
    depth: int  # 1: outermost
    marks: str
    bytes: tuple[tuple[str, Count], ...]  # tensor -> bytes touched by one iteration


@dataclass(frozen=True, eq=False)
class Stats:
    """``Kernel.stats()``: print it for a table, ``as_dict()`` for JSON."""

    name: str
    sizes: tuple[tuple[str, int], ...]  # fixed at compile time
    params: tuple[str, ...]  # left symbolic: counts are quasi-polynomials of these
    statements: tuple[StmtStats, ...]
    traffic: tuple[TensorTraffic, ...]
    footprints: tuple[LoopFootprint, ...]
    parallel: tuple[str, ...]  # loops run by threads (or GPU blocks/threads)
    vector: tuple[str, ...]  # loops vectorized
    flops: Count
    dram_bytes: Count
    roofline: Roofline | None = None
    seconds: float | None = None  # a measured run, when given
    notes: tuple[str, ...] = ()

    @property
    def intensity(self) -> float | None:
        """flop/byte of compulsory DRAM traffic (None: symbolic sizes, or no traffic)."""
        if self.flops.value is None or not self.dram_bytes.value:
            return None
        return self.flops.value / self.dram_bytes.value

    @property
    def attainable_gflops(self) -> float | None:
        i = self.intensity
        return None if i is None or self.roofline is None else self.roofline.attainable(i)

    @property
    def achieved_gflops(self) -> float | None:
        if self.seconds is None or self.flops.value is None or self.seconds <= 0:
            return None
        return self.flops.value / self.seconds / 1e9

    @property
    def fraction(self) -> float | None:
        """The measured run's share of the attainable performance."""
        got, top = self.achieved_gflops, self.attainable_gflops
        return None if got is None or not top else got / top

    def as_dict(self) -> dict[str, Any]:
        return _as_dict(self)

    def __str__(self) -> str:
        return "\n".join(_table(self))


def schedule_stats(schedule: Schedule, machine: Machine | None = None, *,
                   seconds: float | None = None, freq_ghz: float | None = None,
                   bandwidth_gbs: float | None = None) -> Stats:
    """The stats of ``schedule``; the roofline from ``machine`` (None: no roofline), only
    when every size is known."""
    pp = schedule.poly
    program = pp.program
    stmts = _statements(pp)
    traffic = _traffic(pp)
    flops = total([s.flops for s in stmts])
    dram = total([t.bytes for t in traffic if t.role != "local"])
    roof = None
    notes = []
    if machine is not None and flops.value is not None:
        roof = roofline(machine, _elem_bytes(program), freq_ghz, bandwidth_gbs)
    elif machine is not None:
        notes.append("no roofline: some sizes are symbolic")
    if any(not r.affine for s in pp.stmts for r in s.reads):
        notes.append("a gather's read counts the whole dimension it may read")
    tree_loops = _loops(schedule.root)
    feet = _footprints(schedule, tree_loops)
    counts = [*(c for st in stmts for c in (st.instances, st.flops)),
              *(c for t in traffic for c in (t.read, t.written)),
              *(b for f in feet for _, b in f.bytes)]
    notes += sorted({f"not counted: {c.missing}" for c in counts if c.missing})
    return Stats(program.name, program.bound, program.sizes, stmts, traffic, feet,
                 _marked(tree_loops, _is_parallel),
                 _marked(tree_loops, lambda lp: Tag.VECTORIZE in lp.tags), flops, dram,
                 roof, seconds, tuple(notes))


# -- flops --------------------------------------------------------------------------------

def value_ops(e: ir.Expr) -> int:
    """Operations on values in ``e`` (module docstring); a read's indices are not values."""
    if isinstance(e, ir.Read):
        return 0
    own = (isinstance(e, ir.Binary) and e.op in VALUE_OPS) or isinstance(e, ir.Call) or (
        isinstance(e, ir.Unary) and e.op == "-")
    return int(own) + sum(value_ops(c) for c in e.children())


def _statements(pp: PolyProgram) -> tuple[StmtStats, ...]:
    out = []
    for st in pp.program.stmts:
        # The whole domain, not the interior and border pieces: fewer chambers to count.
        instances = try_count(isl.Set(st.domain).intersect_params(pp.context))
        ops = value_ops(st.rhs) + (1 if st.op in UPDATES else 0)
        text = str(st).split("\n")[0].split(": ", 1)[-1]
        out.append(StmtStats(st.name, text, instances, ops, scaled(instances, ops)))
    return tuple(out)


# -- traffic ------------------------------------------------------------------------------

def _traffic(pp: PolyProgram) -> tuple[TensorTraffic, ...]:
    first = _unwritten_reads(pp)
    reads, writes = by_array(first), by_array(pp.writes)
    out = []
    for t in pp.program.tensors.values():
        if t.name not in reads and t.name not in writes:
            continue
        read = try_count(reads[t.name].range()) if t.name in reads else _zero(pp)
        written = try_count(writes[t.name].range()) if t.name in writes else _zero(pp)
        out.append(TensorTraffic(t.name, t.role, _itemsize(t.dtype), read, written))
    return tuple(out)


def _unwritten_reads(pp: PolyProgram) -> isl.UnionMap:
    """The reads whose value no write of the def produced (they come from memory). With
    recurrences (value semantics) a read gets its element's value wherever it is written:
    the reads of elements no statement writes."""
    if pp.program.value_semantics:
        return pp.reads.subtract_range(pp.writes.range())
    info = isl.UnionAccessInfo.from_sink(pp.reads).set_must_source(pp.writes)
    flow = info.set_schedule_map(pp.program_order).compute_flow()
    return flow.get_may_no_source()


def _zero(pp: PolyProgram) -> Count:
    return try_count(isl.UnionSet.empty(pp.context.get_space()))


def _itemsize(dtype: str) -> int:
    return int(dtypes.DTYPES[dtype].np.itemsize)  # type: ignore[attr-defined]


def _elem_bytes(program: ir.Program) -> int:
    """The element size the roofline's lanes are counted in: the outputs' widest."""
    return max((_itemsize(t.dtype) for t in program.outputs), default=4)


# -- the schedule's loops -----------------------------------------------------------------

def _loops(root: Node) -> list[tuple[Loop, tuple[Loop, ...]]]:
    """Every loop with the loops enclosing it (outermost first), pre-order."""
    out: list[tuple[Loop, tuple[Loop, ...]]] = []

    def visit(node: Node, above: tuple[Loop, ...]) -> None:
        if isinstance(node, Loop):
            out.append((node, above))
            visit(node.child, (*above, node))
        elif isinstance(node, Sequence):
            for c in node.children:
                visit(c, above)

    visit(root, ())
    return out


def _is_parallel(lp: Loop) -> bool:
    return bool({Tag.PARALLEL, Tag.PARALLEL_REDUCTION} & lp.tags) or any(
        isinstance(m, Bind) for m in lp.tags)


def _marked(tree_loops: list[tuple[Loop, tuple[Loop, ...]]], test: Any) -> tuple[str, ...]:
    return tuple(lp.name for lp, _ in tree_loops if test(lp))


def _footprints(schedule: Schedule, tree_loops: list[tuple[Loop, tuple[Loop, ...]]]
                ) -> tuple[LoopFootprint, ...]:
    pp = schedule.poly
    accesses = pp.reads.union(pp.writes)
    out = []
    for lp, above in tree_loops:
        chain = (*above, lp)
        prefix = _prefix_map(chain, stmt_set(lp), pp)
        first = prefix.range().lexmin()
        instances = prefix.intersect_range(first).domain()
        touched = by_array(accesses.intersect_domain(instances))
        sized = tuple((t, scaled(try_count(m.range()), _itemsize(pp.program.tensors[t].dtype)))
                      for t, m in sorted(touched.items()))
        out.append(LoopFootprint(lp.name, len(chain), listed(lp.tags), sized))
    return tuple(out)


def _prefix_map(chain: tuple[Loop, ...], below: frozenset[str], pp: PolyProgram
                ) -> isl.UnionMap:
    """Each statement instance below the last loop of ``chain`` -> the values of the
    loops of ``chain`` (outermost first) at that instance."""
    maps = []
    for name in sorted(below):
        m = None
        for lp in chain:
            (pa,) = pieces(expr_of(lp.expr, {name}))
            step = isl.Map.from_pw_aff(pa)
            m = step if m is None else m.flat_range_product(step)
        assert m is not None
        maps.append(isl.UnionMap.from_map(m.intersect_domain(pp.stmt(name).domain)))
    return union_all(maps, isl.UnionMap.empty(pp.context.get_space()))


# -- printing -----------------------------------------------------------------------------

def _num(c: Count | float | None, unit: str = "") -> str:
    if c is None:
        return "-"
    if isinstance(c, Count):
        return str(c)
    return f"{c:.4g}{unit}"


def _table(s: Stats) -> list[str]:
    fixed = ", ".join(f"{k}={v}" for k, v in s.sizes)
    head = f"stats of def {s.name}" + (f" at {fixed}" if fixed else "")
    if s.params:
        head += f" (symbolic sizes {', '.join(s.params)}: counts are quasi-polynomials)"
    lines = [head, "", "statements (instances x ops per instance = flops):"]
    lines += [f"  {st.name}: {st.text}\n    {_num(st.instances)} x {st.ops} = {_num(st.flops)}"
              for st in s.statements]
    lines += [f"  total flops: {_num(s.flops)}", "",
              "compulsory traffic (distinct elements; bytes = elements x element size):",
              f"  {'tensor':12} {'role':7} {'B/elem':>6}  {'read':>14} {'written':>14}"
              f" {'bytes':>14}"]
    for t in s.traffic:
        lines.append(f"  {t.tensor:12} {t.role:7} {t.elem_bytes:6d}  {_num(t.read):>14} "
                     f"{_num(t.written):>14} {_num(t.bytes):>14}")
    lines += [f"  DRAM bytes (inputs and outputs; locals stay on chip): {_num(s.dram_bytes)}",
              f"  arithmetic intensity: {_num(s.intensity, ' flop/B')}", ""]
    lines += _loop_lines(s) + _roof_lines(s) + [f"note: {n}" for n in s.notes]
    return lines


def _loop_lines(s: Stats) -> list[str]:
    lines = [f"parallel loops: {', '.join(s.parallel) or 'none'}",
             f"vector loops: {', '.join(s.vector) or 'none'}", "",
             "footprint of one iteration of each loop (the first; bytes per tensor):"]
    for f in s.footprints:
        per = ", ".join(f"{t} {_num(b)}" for t, b in f.bytes)
        marks = f" [{f.marks}]" if f.marks else ""
        lines.append(f"  {'  ' * (f.depth - 1)}{f.loop}{marks}: {per}")
    return [*lines, ""]


def _roof_lines(s: Stats) -> list[str]:
    if s.roofline is None:
        return []
    lines = [f"roofline: {s.roofline.describe()}"]
    top, i = s.attainable_gflops, s.intensity
    if top is not None and i is not None:
        bound = "memory" if i < s.roofline.ridge else "compute"
        lines.append(f"  attainable at this intensity: {top:.4g} GFLOP/s ({bound} bound)")
    if s.seconds is not None:
        lines.append(f"  measured: {s.seconds * 1e3:.4g} ms = {_num(s.achieved_gflops)} "
                     f"GFLOP/s = {_num(None if s.fraction is None else 100 * s.fraction)}% "
                     f"of attainable")
    return lines


def _count_json(c: Count) -> int | str | None:
    """An int, the quasi-polynomial's isl text, or None (not counted: see the notes)."""
    return c.value if c.value is not None else None if c.qpoly is None else str(c.qpoly)


def _as_dict(s: Stats) -> dict[str, Any]:
    return {
        "name": s.name, "sizes": dict(s.sizes), "symbolic": list(s.params),
        "statements": [{"name": st.name, "text": st.text, "instances": _count_json(st.instances),
                        "ops_per_instance": st.ops, "flops": _count_json(st.flops)}
                       for st in s.statements],
        "flops": _count_json(s.flops),
        "traffic": [{"tensor": t.tensor, "role": t.role, "elem_bytes": t.elem_bytes,
                     "read_elements": _count_json(t.read),
                     "written_elements": _count_json(t.written), "bytes": _count_json(t.bytes)}
                    for t in s.traffic],
        "dram_bytes": _count_json(s.dram_bytes), "intensity": s.intensity,
        "parallel_loops": list(s.parallel), "vector_loops": list(s.vector),
        "footprints": [{"loop": f.loop, "depth": f.depth, "marks": f.marks,
                        "bytes": {t: _count_json(b) for t, b in f.bytes}}
                       for f in s.footprints],
        "roofline": None if s.roofline is None else s.roofline.as_dict(),
        "attainable_gflops": s.attainable_gflops, "seconds": s.seconds,
        "achieved_gflops": s.achieved_gflops, "fraction_of_attainable": s.fraction,
        "notes": list(s.notes),
    }
