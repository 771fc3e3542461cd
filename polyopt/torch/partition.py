"""An FX graph of ATen operators cut into partitions, each one TC def of several statements.

Nodes are taken in the graph's order. A supported node joins the open partition; a node that
stays in torch closes it only when it reads a value the partition computes (it must run
after the partition's call), otherwise it runs before that call. So each partition is a
maximal run of supported operators, and fusing, contracting and laying out across them is
the scheduler's and the cost model's decision, not a pattern list's. A partition without a
statement (only views) or without a computation worth a call stays in torch.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import torch
import torch.fx

from polyopt.torch.aten import TABLE, Builder, Out, Statement
from polyopt.torch.epilogue import NARROW, fold_epilogues
from polyopt.torch.graph import Merged, Stored, Unsupported, Value, View, tc_type, tensor_name

aten = torch.ops.aten


@dataclass(frozen=True)
class Fallback:
    """A node left to torch, and why."""

    node: str
    target: str
    reason: str


@dataclass(frozen=True)
class Partition:
    """One TC def: the FX nodes it computes, its inputs and outputs (FX value names, in the
    def's order) and its source."""

    name: str
    nodes: tuple[str, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    source: str
    reshapes: tuple[tuple[int, ...] | None, ...] = ()
    """Per output, the shape torch views it as (a merging reshape's result, which the def
    computes unmerged), or None."""
    picks: tuple[int, ...] = ()
    """Per output, the def's output it is (two FX values of one tensor, a layer norm's result
    and its reshape, are one output of the def, which torch views); empty: one each."""
    layouts: tuple[tuple[int, ...] | None, ...] = ()
    """Per input, the permutation of its dims that is row-major in memory (``dense_order``:
    the def declares that layout and reads through it), or None; empty: none."""

    def pick(self, k: int) -> int:
        """The def's output that FX output ``k`` reads."""
        return self.picks[k] if self.picks else k

    def __str__(self) -> str:
        permuted = [f"{input_name(k)} is {self.inputs[k]} permuted {order}"
                    for k, order in enumerate(self.layouts) if order is not None]
        return (f"partition {self.name}: {len(self.nodes)} ops ({', '.join(self.nodes)})"
                + "".join(f"\n-- {line} (its memory's order)" for line in permuted)
                + f"\n{self.source}")


@dataclass(frozen=True)
class Plan:
    """A graph's partitions and fallbacks, in graph order."""

    partitions: tuple[Partition, ...]
    fallbacks: tuple[Fallback, ...]

    def __str__(self) -> str:
        lines = [str(p) for p in self.partitions]
        lines += [f"torch: {f.node} ({f.target}): {f.reason}" for f in self.fallbacks]
        return "\n\n".join(lines)


@dataclass
class _Open:
    """The partition being built."""

    builder: Builder = field(default_factory=Builder)
    values: dict[str, Any] = field(default_factory=dict)  # FX name -> Value or tuple
    free: dict[str, torch.fx.Node] = field(default_factory=dict)  # VIEWS left to readers
    made: set[str] = field(default_factory=set)  # earlier partitions' outputs: row-major
    viewed: dict[str, Any] = field(default_factory=dict)  # free views lowered here
    nodes: list[torch.fx.Node] = field(default_factory=list)
    inputs: dict[str, Stored] = field(default_factory=dict)
    layouts: dict[str, tuple[int, ...]] = field(default_factory=dict)  # ``dense_order``


# Views (index maps, no statement) of values no open partition computes: each partition that
# reads one lowers it again, reading the tensor under it directly, so that a view of a weight
# is never a partition's output (a copy per call) nor a strided input (a copy per call).
VIEWS = frozenset({aten.permute.default, aten.transpose.int, aten.t.default,
                   aten.expand.default, aten.view.default, aten._unsafe_view.default,
                   aten.reshape.default, aten.unsqueeze.default, aten.squeeze.dim,
                   aten.squeeze.dims, aten.squeeze.default, aten.slice.Tensor, aten.select.int,
                   aten.alias.default, aten.clone.default})  # a functional graph's clone
# is never written again: reading the tensor it copies reads the same values

CONTRACTIONS = frozenset({aten.convolution.default, aten.mm.default, aten.addmm.default,
                          aten.bmm.default})

MAX_CONTRACTIONS = 1
"""Contractions one partition holds: a run is cut before each one past this many, so a
partition is a contraction with the operators around it (its prologue and epilogue). Measured
(``scripts/checks/bench_partition_size.py``, quiet): a chain of six 3x3 conv blocks ran 1.99x
eager with one a partition, 0.42x with two and 0.20x as one def (compiled in 4.7, 9.6 and
11.6 s); a transformer encoder layer ran 0.47x, 0.53x and 0.61x. The scheduler does not yet
gain from fusing two convolutions; an encoder layer loses a quarter by the cut."""


def plan(gm: torch.fx.GraphModule, prefix: str = "part",
         max_contractions: int | None = MAX_CONTRACTIONS,
         keep: Mapping[str, str] | None = None) -> Plan:
    """Cut ``gm``'s graph into partitions (``Partition``) and fallbacks; a partition holds at
    most ``max_contractions`` contractions (None: no limit). The nodes ``keep`` names stay in
    torch, each for the reason it gives."""
    parts: list[Partition] = []
    falls: list[Fallback] = []
    free: dict[str, torch.fx.Node] = {}
    cur = _Open(free=free)
    for node in gm.graph.nodes:
        if node.op in ("placeholder", "get_attr", "output"):
            continue
        if node.op != "call_function":
            falls.append(Fallback(node.name, str(node.target), f"{node.op} node"))
            cur = _close(cur, gm, parts, prefix)
            continue
        if node.target in VIEWS and all(_name(a) not in cur.values or _name(a) in free
                                        for a in node.all_input_nodes):
            free[_name(node)] = node  # lowered where it is read, in each partition
            continue
        if (node.target in CONTRACTIONS and max_contractions is not None
                and sum(n.target in CONTRACTIONS for n in cur.nodes) >= max_contractions):
            cur = _close(cur, gm, parts, prefix)
        reason = (keep or {}).get(node.name) or _try_lower(cur, node)
        if reason is None:
            continue
        falls.append(Fallback(node.name, str(node.target), reason))
        if any(_name(a) in cur.values for a in node.all_input_nodes):
            cur = _close(cur, gm, parts, prefix)
    _close(cur, gm, parts, prefix)
    return Plan(tuple(parts), tuple(falls))


def _name(node: torch.fx.Node) -> str:
    return str(node.name)


def _try_lower(cur: _Open, node: torch.fx.Node) -> str | None:
    """Lower ``node`` into the open partition; the reason it stays in torch, or None."""
    fn = TABLE.get(node.target)
    if fn is None:
        return f"no lowering for {node.target}"
    mark = (len(cur.builder.stmts), cur.builder.count, dict(cur.inputs), dict(cur.viewed),
            dict(cur.layouts))
    reason = None
    try:
        out = _out_of(node)
        args = [_value(cur, a) for a in node.args]
        kwargs = {k: _value(cur, v) for k, v in node.kwargs.items()}
        result = fn(cur.builder, out, *args, **kwargs)
    except Unsupported as e:
        reason = str(e)
    except (TypeError, ValueError, IndexError, KeyError) as e:  # an argument form not handled
        reason = f"arguments not supported ({type(e).__name__}: {e})"
    else:
        if isinstance(result, tuple) and any(
                u.target is not operator.getitem or not isinstance(u.args[1], int)
                or u.args[1] >= len(result) for u in node.users):
            reason = "a result this lowering does not compute is used (e.g. pooling's indices)"
    if reason is not None:  # the partition as it was before this node
        del cur.builder.stmts[mark[0]:]
        cur.builder.count, cur.inputs, cur.viewed, cur.layouts = mark[1:]
        return reason
    cur.values[_name(node)] = result
    cur.nodes.append(node)
    return None


def _out_of(node: torch.fx.Node) -> Out | None:
    val = node.meta.get("val")
    if isinstance(val, torch.Tensor):
        if any(not isinstance(s, int) for s in val.shape):
            raise Unsupported("symbolic shape (dynamic=True): not lowered yet")
        if val.device.type != "cpu":
            raise Unsupported(f"device {val.device}: the backend lowers CPU tensors")
        return Out(tuple(int(s) for s in val.shape), tc_type(val.dtype))
    if isinstance(val, (tuple, list)) and val and isinstance(val[0], torch.Tensor):
        first = val[0]
        return Out(tuple(int(s) for s in first.shape), tc_type(first.dtype), True)
    if node.target is operator.getitem:
        return None
    raise Unsupported("no tensor metadata")


def _value(cur: _Open, arg: Any) -> Any:
    """An argument as the lowering takes it: a node's Value (an input of the def when it is
    computed outside the partition), lists element by element, the rest as is."""
    if isinstance(arg, (list, tuple)):
        return type(arg)(_value(cur, a) for a in arg)
    if not isinstance(arg, torch.fx.Node):
        return arg
    key = _name(arg)
    if key in cur.values:
        return cur.values[key]
    if key in cur.free and key not in cur.viewed:
        cur.viewed[key] = _view(cur, arg)
    if cur.viewed.get(key) is not None:
        return cur.viewed[key]
    if key not in cur.inputs:
        val = arg.meta.get("val")
        if not isinstance(val, torch.Tensor):
            raise Unsupported(f"input {key} is not a tensor")
        if any(not isinstance(s, int) for s in val.shape):
            raise Unsupported("symbolic shape (dynamic=True): not lowered yet")
        shape = tuple(int(s) for s in val.shape)
        # An earlier partition's output is row-major whatever strides ATen's would have had
        # (a transpose it computes is copied out): read through them, the call copied it back.
        order = None if key in cur.made else dense_order(shape, tuple(int(s) for s in val.stride()))
        stored = Stored(tensor_name(key), shape if order is None else
                        tuple(shape[d] for d in order), tc_type(val.dtype))
        cur.inputs[key] = stored
        if order is not None:
            cur.layouts[key] = order
    order = cur.layouts.get(key)
    if order is None:
        return cur.inputs[key]
    stored = cur.inputs[key]  # base dim p is logical dim order[p]
    shape = tuple(stored.shape[order.index(d)] for d in range(len(order)))
    return View(stored, shape, tuple(f"{{{d}}}" for d in order))


def dense_order(shape: Sequence[int], stride: Sequence[int]) -> tuple[int, ...] | None:
    """The dims of a strided tensor in memory order (by falling stride; ``t.permute(order)`` is
    contiguous), when it is a permuted dense tensor that is not already row-major, else None.
    The def then declares the memory's layout and reads the tensor through the permutation,
    instead of the call copying it row-major: a weight's transpose saved for the backward pass
    (a 512 x 16 view of a 16 x 512 weight) cost a copy and a transposed matrix product, 0.103
    ms against torch's 0.013."""
    if 0 in shape:
        return None
    big = [d for d, n in enumerate(shape) if n != 1]  # a unit dim's stride means nothing
    ranked = sorted(big, key=lambda d: -stride[d])
    expected = 1
    for d in reversed(ranked):
        if stride[d] != expected:
            return None
        expected *= shape[d]
    order = list(range(len(shape)))
    for slot, d in zip(big, ranked, strict=True):
        order[slot] = d
    return tuple(order) if order != sorted(order) else None


def _view(cur: _Open, node: torch.fx.Node) -> Any:
    """A free view lowered in this partition, or None where it cannot be (then the partition
    reads torch's result of it as an input)."""
    try:
        args = [_value(cur, a) for a in node.args]
        value = TABLE[node.target](cur.builder, _out_of(node), *args)
    except (Unsupported, TypeError, ValueError, IndexError, KeyError):
        return None
    if isinstance(value, Merged):
        return None  # torch's reshape costs nothing on unit strides and copies to them else,
    return value     # where a merged read would stride (and tie a matmul's reduction)


def _close(cur: _Open, gm: torch.fx.GraphModule, parts: list[Partition], prefix: str
           ) -> _Open:
    """Finish the open partition as a ``Partition`` (when it computes anything) and open a
    new one."""
    if cur.nodes:
        part = _assemble(cur, f"{prefix}{len(parts)}")
        if part is not None:
            parts.append(part)
            cur.made.update(part.outputs)
    return _Open(free=cur.free, made=cur.made)


def _assemble(cur: _Open, name: str) -> Partition | None:
    # A view computed here and read outside is copied out (an output of its own): read
    # through its permutation instead, the next contraction strides (BERT's attention:
    # 0.45x Inductor, against 0.80x copied). A tensor two values name (a result and its
    # reshape) is one output, which torch views: its copy's index map ran isl's scheduler
    # to its 20 s limit (BERT's out-projection at batch 8).
    inside = {_name(n) for n in cur.nodes}
    escaping = [n for n in cur.nodes if any(_name(u) not in inside for u in n.users)]
    b = cur.builder
    outs: list[tuple[str, Stored]] = []  # the def's outputs, each with its first FX value
    names: list[str] = []  # the FX values computed here and read outside
    picks: list[int] = []
    shapes: list[tuple[int, ...] | None] = []
    taken: dict[str, int] = {}  # a tensor's name -> the def's output that holds it
    for node in escaping:
        value = cur.values[_name(node)]
        if isinstance(value, tuple):
            continue  # a multi-output op: its getitems escape instead
        logical = None
        if isinstance(value, Merged):
            logical, value = value.shape, value.value
        if isinstance(value, View) and value.splitting() is not None \
                and not _is_input(cur, value.base):
            logical, value = logical or value.shape, value.base  # torch views it: no copy
        key = value.name if isinstance(value, Stored) else None
        if key is not None and key in taken:  # one tensor two values name: torch views it
            index = taken[key]
            logical = logical or _out_of(node).shape  # type: ignore[union-attr]
        else:
            if key is None or _is_input(cur, value):  # a view, or an input: copied out
                stored = b.fresh("out", value.shape, value.dtype)
                b.emit(stored, "=", value.read([f"i{d}" for d in range(len(value.shape))]))
            else:
                stored = value
            index = taken[key or stored.name] = len(outs)
            outs.append((_name(node), stored))
        names.append(_name(node))
        picks.append(index)
        shapes.append(logical)
    if not outs:
        return None
    stmts = _live(b.stmts, {s.name for _, s in outs})
    if not stmts:
        return None
    stmts, renames = fold_epilogues(
        stmts, {s.name for s in cur.inputs.values()}, {s.name for _, s in outs},
        narrow=any(s.dtype in NARROW for s in cur.inputs.values()))
    outs = [(n, replace(s, name=renames.get(s.name, s.name))) for n, s in outs]
    # Inputs only dead statements read (a view lowered for a node whose result nobody
    # needed) are no inputs: each cost the call a conversion, and torch their values (an
    # encoder layer's backward declared 10 such in its 12 partitions).
    read = {name for s in stmts for name in s.reads}
    inputs = {k: v for k, v in cur.inputs.items() if v.name in read}
    layouts = tuple(cur.layouts.get(k) for k in inputs)
    return Partition(name, tuple(_name(n) for n in cur.nodes), tuple(inputs),
                     tuple(names), _source(inputs, stmts, outs), tuple(shapes),
                     tuple(picks) if picks != list(range(len(picks))) else (),
                     layouts if any(layouts) else ())


def _is_input(cur: _Open, value: Value) -> bool:
    return any(value is s or (isinstance(value, Stored) and value.name == s.name)
               for s in cur.inputs.values())


def _live(stmts: Sequence[Statement], outputs: set[str]) -> list[Statement]:
    """The statements an output needs (a lowering may compute what nobody reads, such as
    layer norm's mean and rstd)."""
    needed, keep = set(outputs), []
    for s in reversed(stmts):
        if s.target in needed:
            keep.append(s)
            needed |= s.reads
    return list(reversed(keep))


DEF_NAME = "partition"
"""Every partition's def has this name, and its tensors are named by position (inputs) and
order of appearance (the rest): two partitions that compute the same thing at the same shapes
(a network's repeated blocks) have one source, so they share one compile and one kernel."""


def input_name(k: int) -> str:
    """The name of a partition def's ``k``-th input (``Partition.inputs[k]``)."""
    return f"in{k}"


def _source(inputs: Mapping[str, Stored], stmts: Sequence[Statement],
            outs: Sequence[tuple[str, Stored]]) -> str:
    names = {s.name: input_name(k) for k, s in enumerate(inputs.values())}
    for s in stmts:
        if s.target not in names:
            names[s.target] = f"{s.target.rsplit('_', 1)[0]}_{len(names)}"
    params = [f"{s.dtype}({','.join(map(str, s.shape))}) {names[s.name]}"
              for s in inputs.values()]
    out_names = [names[s.name] for _, s in outs]
    locals_ = [names[t] for t in dict.fromkeys(s.target for s in stmts)
               if names[t] not in out_names]
    head = f"def {DEF_NAME}({', '.join(params)}) -> ({', '.join(out_names)})"
    if locals_:
        head += f" local ({', '.join(locals_)})"
    pattern = re.compile(r"\b(\w+)\(")
    body = "\n".join("    " + pattern.sub(lambda m: f"{names.get(m[1], m[1])}(", s.text)
                      for s in stmts)
    return f"{head} {{\n{body}\n}}"


__all__ = ["Fallback", "Partition", "Plan", "dense_order", "input_name", "plan"]
