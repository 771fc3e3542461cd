"""``torch.compile(model, backend="polyopt")``: whole graphs through polyopt.

Dynamo hands over an FX graph; AOTAutograd (with core ATen decompositions) turns it into ATen
graphs, the forward and, when training, the backward. ``compile_graph`` cuts each into
partitions (``partition.plan``), compiles every partition's TC def with ``polyopt.compile``
(cached on disk like every kernel) and rewrites the graph so that each partition is one call
of its kernel; what stays in torch runs as torch runs it. ``explain`` prints the cut.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import operator
import pickle
import sys
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx
from torch._dynamo.backends.common import aot_autograd
from torch._functorch.aot_autograd import make_boxed_func
from torch.fx.experimental.proxy_tensor import make_fx

from polyopt import api, host
from polyopt.errors import PolyoptError, PolyoptWarning
from polyopt.runtime import warm
from polyopt.torch import choice
from polyopt.torch.choice import Verdict
from polyopt.torch.decompositions import decompositions
from polyopt.torch.freezing import constant_nodes, fold_batch_norms, parameters
from polyopt.torch.ops import as_array, as_tensor
from polyopt.torch.partition import (
    CONTRACTIONS,
    DEF_NAME,
    MAX_CONTRACTIONS,
    Fallback,
    Partition,
    Plan,
    input_name,
    plan,
)

# Once a graph's compile has taken this many seconds, each partition compiled prints a line.
PROGRESS_SECONDS = 1.0


class PartitionCall:
    """A compiled partition as the rewritten graph calls it: tensors in, tensors out, no
    copies of contiguous CPU tensors."""

    def __init__(self, part: Partition, kernel: api.Kernel) -> None:
        self.part = part
        self.kernel = kernel
        self.__name__ = part.name  # FX prints call targets by name

    def __call__(self, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        if self.part.layouts:  # permuted dense inputs, as the def declares them: row-major
            tensors = tuple(t if order is None else t.permute(order)
                            for t, order in zip(tensors, self.part.layouts, strict=True))
        result = self.kernel(*(as_array(t) for t in tensors))
        outs = result if isinstance(result, tuple) else (result,)
        return tuple(as_tensor(a) for a in outs)

    def __repr__(self) -> str:
        return f"PartitionCall({self.part.name})"


@dataclass
class Record:
    """What the backend did with the graphs it was given (``explain`` prints it)."""

    plans: list[Plan] = field(default_factory=list)
    kernels: dict[str, api.Kernel] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    """Per partition measured against torch (``choice``), and kept: the times."""
    left: list[tuple[Partition, Verdict]] = field(default_factory=list)
    """Partitions torch ran faster, as they were when measured (their matrix product then
    went back to torch)."""


def partition_options(part: Partition, options: dict[str, Any] | None,
                      constants: frozenset[str]) -> dict[str, Any] | None:
    """``options`` for ``part``'s compile: its inputs among the graph's ``constants`` (frozen
    weights) declared constant, so that its kernel packs them once."""
    names = [input_name(k) for k, name in enumerate(part.inputs) if name in constants]
    return {**(options or {}), "constants": names} if names else options


def compile_partition(part: Partition, options: dict[str, Any] | None) -> api.Kernel:
    """``part``'s kernel, with its own options (``partition_options``)."""
    return compile_partition_source(part.source, options)


def lower_ahead(jobs: Sequence[tuple[str, dict[str, Any] | None]]) -> None:
    """Compile the distinct ``jobs`` (sources and their options) in worker processes, one
    per usable core, into the disk cache, where the compiles that follow
    (``compile_partition``) load them: lowering
    is Python and isl, one core per process (ResNet-50 at batch 1: 20.9 s of a 28.3 s cold
    compile lowering, 4.6 s in gcc). Nothing is done with one core, without records of
    lowerings (no disk cache, or ``POLYOPT_DEBUG``) or without fork, and a worker's failure
    is left for the compile that follows to report. A job an earlier process lowered
    (``warm.hinted``) is left out: a warm start of ResNet-50 forked workers that only
    loaded records, 0.33 s of its 3.4."""
    distinct = [job for job in {_key(*job): job for job in jobs}.values()
                if not warm.hinted(_hint(*job))]
    workers = min(host.usable_cores(), len(distinct))
    if (workers < 2 or warm.records_root() is None  # nothing a worker lowers would be kept
            or "fork" not in mp.get_all_start_methods()):
        return
    try:
        with ProcessPoolExecutor(workers, mp_context=mp.get_context("fork")) as pool:
            for _ in pool.map(_lower_one, *zip(*distinct, strict=True)):
                pass
    except (OSError, BrokenProcessPool, pickle.PicklingError):
        return  # the compiles that follow lower what is missing, here


# A def the toolchain builds while Dynamo and AOTAutograd trace (``warm_toolchain``).
TINY = "def partition(float(4) in0) -> (o) { o(i) = in0(i) * 2.0 }"
_toolchain: list[threading.Thread] = []


def warm_toolchain() -> None:
    """Build a tiny kernel in a thread of its own, once per process, so that what a first
    build with an empty cache does besides the kernel (the C compiler's self-test,
    ``runtime/miscompiles.py``; the trampoline) runs while the graph is traced, in the C
    compiler's processes, on another core: 0.75 s of 0.81 for the first build, against
    0.06 s for the next. ``toolchain_ready`` waits for it before any build or fork."""
    if not _toolchain and warm.records_root() is not None:
        _toolchain.append(threading.Thread(target=_build_tiny, name="polyopt-toolchain",
                                           daemon=True))
        _toolchain[0].start()


def toolchain_ready() -> None:
    """Wait for ``warm_toolchain``'s build, if one was started."""
    if _toolchain:
        _toolchain[0].join()


def _build_tiny() -> None:
    with warnings.catch_warnings(), contextlib.suppress(Exception):  # the real build reports
        warnings.simplefilter("ignore")
        api.compile(TINY, DEF_NAME).build()


def _lower_one(source: str, options: dict[str, Any] | None) -> None:
    # said again when the parent loads the record; a failure, when the parent compiles
    with warnings.catch_warnings(), contextlib.suppress(Exception):
        warnings.simplefilter("ignore")
        compile_partition_source(source, options)


def compile_partition_source(source: str, options: dict[str, Any] | None) -> api.Kernel:
    # Every size is a number, so compile lowers now, or loads what an earlier process
    # lowered from the disk cache (a warm start lowers nothing); the C compiler runs now
    # too, so that compile times say what compiling took, and a measurement runs none.
    kernel = api.compile(source, DEF_NAME, options=options).build()
    warm.note_hint(_hint(source, options))
    return kernel


def _hint(source: str, options: dict[str, Any] | None) -> str:
    """The hint that ``source`` with ``options`` was lowered (``lower_ahead``): the machine
    model and the tuning database may have changed since, which costs a lowering here."""
    return warm.hint_key("partition", source, repr(options))


def compile_graph(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], *,
                  record: Record | None = None, options: dict[str, Any] | None = None,
                  max_contractions: int | None = MAX_CONTRACTIONS,
                  choose: bool = True, constants: frozenset[str] = frozenset()
                  ) -> Callable[..., Any]:
    """AOTAutograd's compiler: ``gm`` with each partition replaced by its kernel's call (a
    graph with symbolic sizes: per concrete shape, ``PerShape``). With ``choose``, the matrix
    product of a partition that torch runs faster (``choice``: measured) goes back to torch,
    and the operators around it are partitioned again; then a partition torch runs faster
    without a convolution goes back whole. ``constants``: the nodes whose values are the
    same at every call (an inference graph's weights)."""
    if symbolic(gm):
        return make_boxed_func(PerShape(gm, record, options, max_contractions, choose))
    prefix = f"part{len(record.plans) if record else 0}_"
    build = _Build(options, record, constants)
    cut = build.compile(plan(gm, prefix, max_contractions))
    if choose:
        keep = build.judge(gm, cut)
        target = {n.name: n.target for n in gm.graph.nodes}
        moved = {n: why for n, why in keep.items() if target[n] in choice.MEASURED}
        if moved:  # the matrix products torch runs faster: partition the rest again
            cut = build.compile(plan(gm, prefix, max_contractions, moved))
            keep = build.judge(gm, cut)
        cut = build.drop(cut, keep)
    if record is not None:
        record.plans.append(cut)
        record.verdicts.update((p.name, build.measured[build.keys[p.name]])
                               for p in cut.partitions if build.keys[p.name] in build.measured)
        record.left += build.left
    rewrite(gm, cut, build.calls)
    return make_boxed_func(gm.forward)


class _Build:
    """One graph's compile: each partition's kernel (a repeated block shares its twin's) and
    verdict (``choice``), by source and options."""

    def __init__(self, options: dict[str, Any] | None, record: Record | None,
                 constants: frozenset[str]) -> None:
        self.options, self.record, self.constants = options, record, constants
        self.calls: dict[str, PartitionCall] = {}
        self.kernels: dict[tuple[str, str], api.Kernel] = {}  # by source and options
        self.keys: dict[str, tuple[str, str]] = {}  # partition -> its kernel's source, options
        self.measured: dict[tuple[str, str], Verdict] = {}  # by the same
        self.left: list[tuple[Partition, Verdict]] = []
        self.settled = False  # whether the governor has seen the machine quiet since a compile

    def compile(self, cut: Plan) -> Plan:
        """``cut`` with each partition compiled; one that fails to runs in torch."""
        self.calls, failed, self.settled = {}, [], False
        begin = time.perf_counter()
        toolchain_ready()  # no fork while it runs, and its work is not done twice
        jobs = {p.name: (p.source, partition_options(p, self.options, self.constants))
                for p in cut.partitions}
        self.keys.update((name, _key(*job)) for name, job in jobs.items())
        ahead = {self.keys[name]: job for name, job in jobs.items()
                 if self.keys[name] not in self.kernels}
        lower_ahead(list(ahead.values()))
        if time.perf_counter() - begin > PROGRESS_SECONDS:
            print(f"polyopt: {len(ahead)} distinct partitions lowered in worker processes "
                  f"in {time.perf_counter() - begin:.1f} s", file=sys.stderr)
        for k, part in enumerate(cut.partitions):
            start = time.perf_counter()
            try:
                kernel = (self.kernels.get(self.keys[part.name])
                          or compile_partition(part, jobs[part.name][1]))
            except PolyoptError as e:  # polyopt's own bug: that partition runs in torch
                reason = f"partition {part.name} failed to compile: {first_line(e)}"
                warnings.warn(f"polyopt: {reason}; its operators run in torch", PolyoptWarning,
                              stacklevel=3)
                failed += [Fallback(n, "partition", reason) for n in part.nodes]
                continue
            self.kernels[self.keys[part.name]] = kernel
            self.calls[part.name] = PartitionCall(part, kernel)
            done = time.perf_counter()
            if self.record is not None:
                self.record.kernels[part.name] = kernel
                self.record.seconds[part.name] = done - start
            if done - begin > PROGRESS_SECONDS:  # a long compile says where it is
                print(f"polyopt: [{k + 1}/{len(cut.partitions)}] {part.name} "
                      f"({len(part.nodes)} ops) in {done - start:.1f} s, "
                      f"{done - begin:.1f} s so far", file=sys.stderr)
        return Plan(tuple(p for p in cut.partitions if p.name in self.calls),
                    (*cut.fallbacks, *failed))

    def judge(self, gm: torch.fx.GraphModule, cut: Plan) -> dict[str, str]:
        """The nodes torch should run, each with its reason, of each partition without a
        convolution that torch runs faster: its matrix products (``choice.MEASURED``), or
        all its nodes when it has none."""
        keep: dict[str, str] = {}
        target = {n.name: n.target for n in gm.graph.nodes}
        made = frozenset(name for p in cut.partitions for name in p.outputs)
        for part in cut.partitions:
            targets = [target[n] for n in part.nodes]
            if any(t in CONTRACTIONS and t not in choice.MEASURED for t in targets):
                continue  # a convolution: polyopt's (choice.MEASURED says why)
            call = self.calls[part.name]
            verdict = self.measured.get(self.keys[part.name])
            if verdict is None:
                verdict, timed = choice.judge(gm, part, call, call.kernel.source,
                                              self.settled, made)
                self.settled |= timed  # no compile runs between two measurements
                self.measured[self.keys[part.name]] = verdict
            if verdict.torch_faster:
                self.left.append((part, verdict))
                held = [n for n, t in zip(part.nodes, targets, strict=True)
                        if t in choice.MEASURED] or part.nodes
                keep.update((n, f"torch runs {part.name} faster ({verdict})") for n in held)
        return keep

    def drop(self, cut: Plan, keep: dict[str, str]) -> Plan:
        """``cut`` without the partitions that hold a node of ``keep``."""
        gone = [p for p in cut.partitions if any(n in keep for n in p.nodes)]
        falls = [Fallback(n, "partition", next(keep[m] for m in p.nodes if m in keep))
                 for p in gone for n in p.nodes]
        return Plan(tuple(p for p in cut.partitions if p not in gone), (*cut.fallbacks, *falls))


def _key(source: str, options: dict[str, Any] | None) -> tuple[str, str]:
    return source, repr(options)


def first_line(error: Exception) -> str:
    """An error's own first line (a CompileError's: the compiler's first error)."""
    log = getattr(error, "log", None)
    lines = [ln for ln in (log or str(error)).splitlines() if ln.strip()]
    picked = next((ln for ln in lines if "error" in ln), lines[0] if lines else "")
    return picked.strip()[:200]


def symbolic(gm: torch.fx.GraphModule) -> bool:
    """Whether an input of ``gm`` has a symbolic size (``torch.compile(dynamic=True)``)."""
    for node in gm.graph.nodes:
        val = node.meta.get("val") if node.op == "placeholder" else None
        if isinstance(val, torch.SymInt) or (isinstance(val, torch.Tensor) and any(
                not isinstance(s, int) for s in val.shape)):
            return True
    return False


class PerShape:
    """A graph with symbolic sizes, run per concrete shape: at the first call with new
    shapes it is traced again at those shapes (``make_fx``, fake tensors: nothing runs) and
    compiled as a static graph; later calls with the same shapes reuse that. polyopt's
    kernels are specialized per shape (their loops, tiles and vector loops are sized from
    them), so one graph serves every shape with a compile per shape, as torch's guards would
    recompile it, but without a new Dynamo trace."""

    def __init__(self, gm: torch.fx.GraphModule, record: Record | None,
                 options: dict[str, Any] | None, max_contractions: int | None,
                 choose: bool) -> None:
        self.gm, self.record, self.options, self.limit = gm, record, options, max_contractions
        self.choose = choose
        self.compiled: dict[tuple[Any, ...], Callable[..., Any]] = {}

    def __call__(self, *args: Any) -> Any:
        key = tuple((tuple(a.shape), a.dtype) if isinstance(a, torch.Tensor) else a
                    for a in args)
        fn = self.compiled.get(key)
        if fn is None:
            static = make_fx(self.gm, tracing_mode="fake")(*args)
            fn = compile_graph(static, args, record=self.record, options=self.options,
                               max_contractions=self.limit, choose=self.choose)
            self.compiled[key] = fn
        return fn(list(args))


def rewrite(gm: torch.fx.GraphModule, cut: Plan, calls: dict[str, PartitionCall]) -> None:
    """Replace each partition's nodes by one call at its last node; the nodes torch keeps
    between them do not read the partition (``plan`` closes it before such a node)."""
    by_name = {n.name: n for n in gm.graph.nodes}
    member = {name: p for p in cut.partitions for name in p.nodes}
    new = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    for node in gm.graph.nodes:
        part = member.get(node.name)
        if part is None:
            env[node] = new.node_copy(node, lambda n: env[n])
            continue
        if node.name != part.nodes[-1]:
            continue
        args = tuple(env[by_name[i]] for i in part.inputs)
        call = new.call_function(calls[part.name], args)
        for k, out in enumerate(part.outputs):
            got = new.call_function(operator.getitem, (call, part.pick(k)))
            shape = part.reshapes[k] if part.reshapes else None
            env[by_name[out]] = got if shape is None else new.call_function(
                torch.ops.aten.view.default, (got, list(shape)))
    new.eliminate_dead_code()  # the views only partitions read
    gm.graph = new
    gm.recompile()


def make_backend(record: Record | None = None, options: dict[str, Any] | None = None,
                 max_contractions: int | None = MAX_CONTRACTIONS, choose: bool = True
                 ) -> Callable[..., Any]:
    """A ``torch.compile`` backend; ``record`` keeps what it did, ``options`` go to
    ``polyopt.compile``, and ``choose=False`` runs every partition in polyopt, faster or not."""
    warm_toolchain()

    def compiler(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Any:
        return compile_graph(gm, example_inputs, record=record, options=options,
                             max_contractions=max_contractions, choose=choose)

    frozen: list[torch.Tensor | None] = []

    def inference(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Any:
        fold_batch_norms(gm, frozen)  # no gradient: the weights are constants
        return compile_graph(gm, example_inputs, record=record, options=options,
                             max_contractions=max_contractions, choose=choose,
                             constants=constant_nodes(gm, frozen))
    aot = aot_autograd(fw_compiler=compiler, bw_compiler=compiler, inference_compiler=inference,
                       decompositions=decompositions())

    def dynamo_backend(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Any:
        frozen[:] = parameters(example_inputs)
        return aot(gm, example_inputs)
    return dynamo_backend


def backend(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], **kwargs: Any) -> Any:
    """The ``torch.compile`` backend (``backend="polyopt"`` through the entry point, or this
    function itself). ``options=`` of ``torch.compile`` reaches polyopt.compile's options,
    but for ``"choose"``: False runs every partition in polyopt, faster than torch or not."""
    options = dict(kwargs.get("options") or {})
    choose = bool(options.pop("choose", True))
    return make_backend(options=options or None, choose=choose)(gm, example_inputs)


def explain(model: Callable[..., Any], *inputs: Any, options: dict[str, Any] | None = None,
            choose: bool = True) -> str:
    """Compile ``model`` at ``inputs`` and say what runs where: each partition's TC, its
    kernel's schedule, compile time and measured time against torch's, and each op left in
    torch with the reason."""
    record = Record()
    torch._dynamo.reset()
    compiled = torch.compile(model, backend=make_backend(record, options, choose=choose))
    compiled(*inputs)
    lines = []
    for k, cut in enumerate(record.plans):
        lines.append(f"== graph {k}: {len(cut.partitions)} partitions, "
                     f"{len(cut.fallbacks)} ops in torch")
        for part in cut.partitions:
            kernel = record.kernels[part.name]
            verdict = record.verdicts.get(part.name)
            lines += [str(part), f"-- {predicted(kernel)}"]
            lines += [f"-- {verdict}"] if verdict else []
            held = kernel.lowered().source.held
            lines += [f"-- packed once (constants): {', '.join(held)}"] if held else []
            lines += [f"-- schedule ({record.seconds[part.name]:.2f} s to compile):",
                      str(kernel.schedule)]
        lines += [f"torch: {f.node} ({f.target}): {f.reason}" for f in cut.fallbacks]
    if record.left:
        lines.append(f"== {len(record.left)} partitions torch ran faster, as measured")
    for part, verdict in record.left:
        lines += [str(part), f"-- {verdict}"]
    return "\n".join(lines)


def predicted(kernel: api.Kernel) -> str:
    """The cost model's bound on a partition's time: its flops at the roofline's attainable
    rate for its compulsory DRAM traffic (``Kernel.stats``)."""
    stats = kernel.stats()
    flops, top = stats.flops.value, stats.attainable_gflops
    if flops is None or not top:
        return "predicted: no roofline (symbolic sizes or no traffic)"
    return (f"predicted: {flops / 1e6:.2f} MFLOP, {(stats.dram_bytes.value or 0) / 1e6:.2f} MB "
            f"from DRAM, at least {flops / top / 1e6:.3f} ms (roofline at {top:.1f} GFLOP/s)")
