"""Pictures of a schedule: its loop tree and its dependence graph, as indented text or as
Graphviz DOT (rendered to SVG or PNG by graphviz's ``dot`` program when it is installed).

Dependence edges join statements and carry their kind (flow, anti, output, and the
unordered reduction chains) and a distance vector: isl's ``deltas`` of the dependence over
the leading iterators the two statements share by name (``C_0_init[m, n] -> C_0[m, n,
r_k]``: over ``m, n``), each entry a number, a range ``lo..hi`` or ``*`` (unbounded or
symbolic). Statements that share no leading iterator get the relation itself.

Names in DOT come from the user's source: every label is quoted and escaped here, and
node ids are generated (``n0``, ``n1``...), never taken from a name.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass

import islpy as isl

from polyopt.errors import MissingToolError, PolyoptError
from polyopt.schedules.marks import listed
from polyopt.schedules.schedule import Schedule
from polyopt.schedules.tree import Leaf, Loop, Node, Sequence, expr_text

_IN, _OUT = isl.dim_type.in_, isl.dim_type.out
FORMATS = ("svg", "png")
LABEL_LIMIT = 300  # characters of a relation printed on an edge (the text form has it all)


@dataclass(frozen=True)
class DepEdge:
    kind: str  # flow | anti | output | reduction
    source: str
    target: str
    shared: tuple[str, ...]  # the leading iterators both statements have
    distance: tuple[str, ...]  # one entry per shared iterator
    relation: str  # the dependence as isl text

    def label(self) -> str:
        if self.shared:
            return f"{self.kind} ({', '.join(self.shared)}): ({', '.join(self.distance)})"
        return f"{self.kind}: {self.relation}"


def dep_edges(schedule: Schedule) -> tuple[DepEdge, ...]:
    """Every (kind, source, target) dependence of the schedule's statements."""
    deps = schedule.deps
    kinds = [*deps.named(), *([("reduction", deps.reduction)] if deps.reduction else [])]
    out = []
    for kind, umap in kinds:
        maps: list[isl.Map] = []
        umap.foreach_map(maps.append)
        for m in sorted(maps, key=lambda m: (m.get_tuple_name(_IN), m.get_tuple_name(_OUT))):
            out.append(_edge(kind, m))
    return tuple(out)


def _edge(kind: str, m: isl.Map) -> DepEdge:
    src, dst = m.get_tuple_name(_IN), m.get_tuple_name(_OUT)
    a = [str(m.get_dim_name(_IN, i)) for i in range(m.dim(_IN))]
    b = [str(m.get_dim_name(_OUT, i)) for i in range(m.dim(_OUT))]
    k = 0
    while k < min(len(a), len(b)) and a[k] == b[k]:
        k += 1
    if k == 0:
        return DepEdge(kind, src, dst, (), (), str(m))
    common = m.project_out(_IN, k, len(a) - k).project_out(_OUT, k, len(b) - k)
    deltas = common.set_tuple_name(_IN, "d").set_tuple_name(_OUT, "d").deltas()
    return DepEdge(kind, src, dst, tuple(a[:k]), tuple(_entry(deltas, i) for i in range(k)),
                   str(m))


def _entry(deltas: isl.Set, i: int) -> str:
    lo, hi = deltas.dim_min_val(i), deltas.dim_max_val(i)
    if not (lo.is_int() and hi.is_int()):
        return f"{lo.to_python()}..*" if lo.is_int() else "*"
    low, high = int(lo.to_python()), int(hi.to_python())
    return str(low) if low == high else f"{low}..{high}"


# -- text -------------------------------------------------------------------------------------

def tree_text(schedule: Schedule) -> str:
    """The loop tree, one node a line: loops with their value and marks, sequences,
    leaves with their statements."""
    return "\n".join(_tree_lines(schedule.root, 0))


def _tree_lines(node: Node, depth: int) -> list[str]:
    pad = "  " * depth
    if isinstance(node, Leaf):
        return [f"{pad}leaf: {', '.join(node.stmts)}"]
    if isinstance(node, Sequence):
        return [f"{pad}sequence", *(ln for c in node.children
                                    for ln in _tree_lines(c, depth + 1))]
    return [f"{pad}{_loop_text(node)}", *_tree_lines(node.child, depth + 1)]


def _loop_text(lp: Loop) -> str:
    value = expr_text(lp.expr)
    head = f"loop {lp.name}" + ("" if value == lp.name else f" = {value}")
    return head + (f"  [{listed(lp.tags)}]" if lp.tags else "")


def deps_text(schedule: Schedule) -> str:
    """The dependence graph: the statements, then one line per edge (with its relation
    when it has a distance vector)."""
    lines = [f"statements: {', '.join(schedule.stmts)}"]
    for e in dep_edges(schedule):
        lines.append(f"{e.source} -> {e.target}  {e.label()}")
        if e.shared:
            lines.append(f"    {e.relation}")
    return "\n".join(lines)


# -- DOT --------------------------------------------------------------------------------------

def quote(text: str) -> str:
    """A DOT double-quoted string of ``text``: backslashes and quotes escaped, line breaks
    as DOT's ``\\n``, other control characters dropped."""
    clean = "".join(ch for ch in text if ch == "\n" or ch >= " ")
    body = clean.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{body}"'


def _short(text: str) -> str:
    return text if len(text) <= LABEL_LIMIT else text[:LABEL_LIMIT] + " ... (truncated)"


def to_dot(schedule: Schedule, tree: bool = True, deps: bool = True) -> str:
    """One DOT digraph: the tree and the dependence graph, each in a cluster."""
    lines = [f"digraph {quote('schedule of ' + schedule.poly.program.name)} {{",
             "  node [fontname=monospace, fontsize=10];",
             "  edge [fontname=monospace, fontsize=9];"]
    ids: list[int] = [0]
    if tree:
        lines += ["  subgraph cluster_tree {", f"    label={quote('schedule tree')};"]
        lines += [f"    {ln}" for ln in _dot_tree(schedule.root, ids)[1]]
        lines.append("  }")
    if deps:
        lines += ["  subgraph cluster_deps {", f"    label={quote('dependences')};"]
        lines += [f"    {ln}" for ln in _dot_deps(schedule, ids)]
        lines.append("  }")
    return "\n".join([*lines, "}"]) + "\n"


def _fresh(ids: list[int]) -> str:
    ids[0] += 1
    return f"n{ids[0]}"


def _dot_tree(node: Node, ids: list[int]) -> tuple[str, list[str]]:
    """The DOT id of ``node`` and the lines of its subtree."""
    me = _fresh(ids)
    if isinstance(node, Leaf):
        return me, [f"{me} [shape=note, label={quote(chr(10).join(node.stmts))}];"]
    if isinstance(node, Loop):
        marks = f"\n[{listed(node.tags)}]" if node.tags else ""
        value = expr_text(node.expr)
        label = f"loop {node.name}" + ("" if value == node.name else f"\n= {value}") + marks
        kids: tuple[Node, ...] = (node.child,)
        lines = [f"{me} [shape=box, label={quote(_short(label))}];"]
    else:
        kids = node.children
        lines = [f"{me} [shape=ellipse, label={quote('sequence')}];"]
    for pos, child in enumerate(kids):
        cid, sub = _dot_tree(child, ids)
        order = f" [label={quote(str(pos))}]" if len(kids) > 1 else ""
        lines += [*sub, f"{me} -> {cid}{order};"]
    return me, lines


def _dot_deps(schedule: Schedule, ids: list[int]) -> list[str]:
    nodes = {s: _fresh(ids) for s in schedule.stmts}
    lines = [f"{nid} [shape=box, style=rounded, label={quote(s)}];" for s, nid in nodes.items()]
    styles = {"flow": "solid", "anti": "dashed", "output": "dotted", "reduction": "bold"}
    for e in dep_edges(schedule):
        if e.source in nodes and e.target in nodes:
            lines.append(f"{nodes[e.source]} -> {nodes[e.target]} [style={styles[e.kind]}, "
                         f"label={quote(_short(e.label()))}];")
    return lines


def dot_program() -> str | None:
    """The path of graphviz's ``dot``, or None."""
    return shutil.which("dot")


def render(dot_text: str, fmt: str, path: str) -> None:
    """Write ``dot_text`` drawn as ``fmt`` (svg or png) to ``path`` with graphviz."""
    if fmt not in FORMATS:
        raise PolyoptError(f"render: format {fmt!r}; valid: {', '.join(FORMATS)}")
    exe = dot_program()
    if exe is None:
        raise MissingToolError("drawing a graph needs graphviz's `dot` program on PATH "
                               "(e.g. apt-get install graphviz)")
    try:
        done = subprocess.run([exe, f"-T{fmt}", "-o", path], input=dot_text.encode(),
                              capture_output=True, timeout=120, check=False)
    except subprocess.TimeoutExpired as e:
        raise PolyoptError(f"dot took more than {e.timeout} s to draw the graph") from e
    if done.returncode != 0:
        raise PolyoptError(f"dot failed (exit {done.returncode}): "
                           f"{done.stderr.decode(errors='replace').strip()}")
