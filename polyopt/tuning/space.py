"""The search space of a definition on a target: named knobs, each with its candidate values.

A configuration picks one value per knob and becomes ``polyopt.compile`` options: on the
CPU, ``fusion`` and the pipeline's ``knobs`` (register and reduction tiles, packing, channel
blocking, cache tiles, and the loop knobs: the order model's k best loop orders, the vector
loop and its width in lanes, the parallel loop, split-K); on CUDA, the ``gpu`` mapping
(block tile, registers per thread, threads per block, shared memory, unrolling). Only knobs
that change something for the definition are in its space (no register tile knobs without
a contraction). Every value builds its schedule through checked verbs, so every
configuration is legal; one the pipeline cannot apply falls back to the model's choice,
which the measured schedule records. The candidates and the thresholds that pick them are
the pipelines' policies' (``CpuPolicy`` for the machine model, in the contraction's vector
lanes; ``GpuPolicy``).
"""

from __future__ import annotations

import itertools
import json
import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from polyopt import ir, lang
from polyopt.costmodel.lanes import candidates
from polyopt.costmodel.machine import Machine, host
from polyopt.costmodel.strides import index_use
from polyopt.driver import base_schedule, check_options
from polyopt.dtypes import DTYPES
from polyopt.pipeline.gpu_policy import GPU_POLICY, GpuPolicy
from polyopt.pipeline.knobs import REGISTER_KNOBS
from polyopt.pipeline.policy import CpuPolicy, cpu_policy
from polyopt.poly.merge import mergeable

Config = dict[str, Any]


@dataclass(frozen=True)
class CpuSpace:
    """The values the tuner tries for the CPU pipeline's knobs besides the model's own: the
    search's bounds, not thresholds of the pipeline (``pipeline/policy.py``)."""

    conv_rank: int = 4
    """Outputs of this rank or more (NCHW) are convolutions to the tuner: it offers channel
    blocks (``block_vectors``) instead of L2 row blocks (a convolution's rows are too short
    to cut)."""

    mr: tuple[int, ...] = (4, 6, 8, 12, 14, 16, 20, 24, 28)
    """Register-tile rows (up to ``CpuPolicy.max_rows``)."""

    nr_vectors: tuple[int, ...] = (1, 2, 3, 4)
    """Register-tile columns, in vectors of the contraction's lanes."""

    kc: tuple[int, ...] = (32, 64, 96, 128, 192, 256, 384, 512)
    """Reduction tiles (the model's kc lies in [16, 512])."""

    mc: tuple[int, ...] = (64, 128, 256, 512)
    """L2 row blocks, for contractions that are not convolutions."""

    block_vectors: tuple[int, ...] = (2, 4)
    """Channel blocks besides one vector (the default) and none, in vectors."""

    cache_tile: tuple[int, ...] = (8, 32, 64)
    """Cache tiles for transposed accesses besides the line (the default) and none."""


@dataclass(frozen=True)
class GpuSpace:
    """The values the tuner tries for the CUDA mapping's knobs (``pipeline/gpu.py``)."""

    blocks: tuple[tuple[int, int], ...] = ((32, 8), (64, 4), (16, 16), (128, 2))
    """Threads per block (all 256 threads)."""

    tiles: tuple[tuple[int, int, int], ...] = (
        (64, 64, 8), (128, 128, 8), (64, 128, 8), (128, 64, 8), (32, 32, 8), (64, 64, 16),
        (128, 128, 16))
    """Block tiles."""

    regs: tuple[tuple[int, int], ...] = ((4, 4), (8, 8), (4, 8), (8, 4), (2, 2))
    """Per-thread register tiles."""

    unroll: tuple[int, ...] = (2, 4)
    """Unroll factors of the tile's reduction loop (default: fully)."""


CPU_SPACE = CpuSpace()
GPU_SPACE = GpuSpace()


@dataclass(frozen=True)
class Space:
    """Knob name -> candidate values (the first is the model's default)."""

    target: str
    knobs: tuple[tuple[str, tuple[Any, ...]], ...]

    def __str__(self) -> str:
        rows = [f"{name}: {', '.join(map(repr, values))}" for name, values in self.knobs]
        size = math.prod(len(v) for _, v in self.knobs)
        return "\n".join([f"search space ({self.target}, {size} configurations)", *rows])

    def as_json(self) -> str:
        return json.dumps({"target": self.target,
                           "knobs": {n: list(v) for n, v in self.knobs}})

    @property
    def default(self) -> Config:
        return {name: values[0] for name, values in self.knobs}

    def sample(self, rng: random.Random) -> Config:
        return {name: rng.choice(values) for name, values in self.knobs}

    def mutate(self, config: Config, rng: random.Random, rate: float = 0.3) -> Config:
        """Each knob moves to a neighbouring value with probability ``rate`` (at least one)."""
        out = dict(config)
        names = [n for n, v in self.knobs if len(v) > 1]
        picked = [n for n in names if rng.random() < rate]
        if not picked and names:
            picked = [rng.choice(names)]
        for name in picked:
            values = dict(self.knobs)[name]
            i = values.index(out[name]) if out[name] in values else 0
            out[name] = values[max(0, min(len(values) - 1, i + rng.choice((-1, 1))))]
        return out

    def neighbours(self, config: Config) -> list[Config]:
        """Every configuration that differs from ``config`` in one knob."""
        return [{**config, name: v} for name, values in self.knobs for v in values
                if v != config.get(name)]

    def pool(self, n: int, rng: random.Random) -> list[Config]:
        """The whole space when it has at most ``n`` configurations, else the default and
        ``n - 1`` distinct ones drawn uniformly."""
        if math.prod(len(v) for _, v in self.knobs) <= n:
            return [dict(zip((k for k, _ in self.knobs), vs, strict=True))
                    for vs in itertools.product(*(v for _, v in self.knobs))]
        out = {json.dumps(self.default, sort_keys=True, default=str): self.default}
        while len(out) < n:
            c = self.sample(rng)
            out.setdefault(json.dumps(c, sort_keys=True, default=str), c)
        return list(out.values())

    def crossover(self, a: Config, b: Config, rng: random.Random) -> Config:
        return {name: (a if rng.random() < 0.5 else b)[name] for name, _ in self.knobs}

    def options(self, config: Config) -> dict[str, Any]:
        """The ``polyopt.compile`` options of a configuration."""
        if self.target.startswith("cuda"):
            gpu = {k[4:]: (list(v) if isinstance(v, tuple) else v)
                   for k, v in config.items() if k.startswith("gpu_")}
            return {"gpu": {k: v for k, v in gpu.items() if v is not None}}
        knobs = {k: v for k, v in config.items() if k != "fusion" and v is not None}
        return {"fusion": config.get("fusion", "smart"), "knobs": knobs}

    def encode(self, config: Config) -> list[float]:
        """Numbers a cost model can learn from: each knob as its value (log2 for sizes, 0
        for the model's); a bool or name as its position among the knob's values, so that
        None (the model's choice), True and False differ (the isl features and the cost
        model's prediction of ``polyopt.tuning.features`` come on top)."""
        out: list[float] = []
        for name, values in self.knobs:
            v = config[name]
            if isinstance(v, (bool, str)) or (v is None and not _sizes(values)):
                out.append(float(values.index(v)) if v in values else 0.0)
            elif v is None:
                out.append(0.0)
            elif isinstance(v, (int, float)):
                out.append(math.log2(v + 1))
            elif isinstance(v, tuple):
                out += [math.log2(x + 1) for x in v]
            else:
                out.append(float(values.index(v)))
        return out


def _sizes(values: tuple[Any, ...]) -> bool:
    return any(isinstance(v, int) and not isinstance(v, bool) for v in values)


def space_for(source: str | lang.Definition, name: str | None, sizes: Mapping[str, int],
              target: str = "c", machine: Machine | None = None) -> Space:
    """The search space of def ``name`` at ``sizes`` on ``target`` (CPU: for ``machine``'s
    model, default the host's)."""
    definition = lang.define(source, name)
    program = lang.build_program(definition, sizes=sizes)
    if target.startswith("cuda"):
        return Space(target, _cuda_knobs(program, GPU_POLICY))
    policy = cpu_policy(machine or host())
    knobs = _cpu_knobs(program, policy)
    probe = _Probe(program, machine)
    if not probe.cache_tiled():  # the knob would change nothing
        knobs = tuple(k for k in knobs if k[0] != "cache_tile")
    if _contractions(program) and not _register_tiled(probe, policy):
        knobs = tuple(k for k in knobs if k[0] not in REGISTER_KNOBS | {"register_tile"})
    return Space(target, knobs + _loop_knobs(program, policy, probe))


class _Probe:
    """The pipeline's schedule steps for ``program`` under some knobs, on the space's
    machine, each asked once (a lowering costs 15 ms to a second)."""

    def __init__(self, program: ir.Program, machine: Machine | None) -> None:
        self.program, self.machine = program, machine
        self._memo: dict[str, tuple[Any, ...]] = {}

    def steps(self, **knobs: Any) -> tuple[Any, ...]:
        key = repr(sorted(knobs.items()))
        if key not in self._memo:
            options: dict[str, Any] = {"tuned": False, "knobs": knobs}
            if self.machine is not None:
                options["machine"] = self.machine.spec()
            sched = base_schedule(self.program, check_options(options, "c"), True)
            self._memo[key] = tuple(sched.steps)
        return self._memo[key]

    def key(self, **knobs: Any) -> str:
        """The schedule's verbs (its notes left out), to tell schedules apart."""
        return repr([(st.verb, st.args, st.kwargs) for st in self.steps(**knobs)])

    def cache_tiled(self) -> bool:
        """Does the default schedule tile a nest for a transposed access (a ``tile`` step;
        register tiles are ``split`` steps)? That depends on the statements the pipeline
        adds (a blocked output's copy back), so ask the pipeline."""
        return any(st.verb == "tile" for st in self.steps())


# The loop knobs' candidates (each kept only when its schedule differs from the default's
# and from the other candidates'): the order model's ORDER_RANKS cheapest loop orders, and
# split-K for reductions into fewer than SPLIT_K_OUTPUTS_PER_THREAD outputs per thread
# (more keep every thread busy with whole outputs).
ORDER_RANKS = 3
SPLIT_K_OUTPUTS_PER_THREAD = 8


def _loop_knobs(program: ir.Program, policy: CpuPolicy,
                probe: _Probe) -> tuple[tuple[str, tuple[Any, ...]], ...]:
    """Loop order, vector loop, parallel loop and split-K, each with the values that change
    the pipeline's schedule: the pipeline is asked (a schedule per candidate, 15-50 ms for
    an operator), since whether a value applies depends on the nests it builds."""
    stmts = [s for s in program.stmts if s not in _contractions(program)]
    wanted: list[tuple[str, tuple[Any, ...]]] = [
        ("order", tuple(range(ORDER_RANKS))),
        ("vector", tuple(sorted({it for s in stmts for it in _unit_stride_iters(s)}))),
        ("lanes", tuple(v for v in candidates(policy.lanes(max(
            DTYPES[t.dtype].np.itemsize for t in program.tensors.values()))) if v >= 2)),
        ("parallel", tuple(sorted({it for s in program.stmts for it in s.iters})))]
    few = policy.parallel_trips * SPLIT_K_OUTPUTS_PER_THREAD
    if any(s.reduction_iters and _outputs(program, s) < few for s in program.stmts):
        wanted.append(("split_k", (True, False)))
    default = probe.key()
    out = []
    for name, values in wanted:
        seen, kept = {default}, []
        for v in values:
            got = probe.key(**{name: v})
            if got not in seen:
                seen.add(got)
                kept.append(v)
        if kept:
            out.append((name, (None, *kept)))
    return tuple(out)


def _unit_stride_iters(s: ir.Stmt) -> set[str]:
    """Iterators in the last index of one of ``s``'s accesses (candidate vector loops)."""
    reads = [r for r in s.rhs.walk() if isinstance(r, ir.Read)]
    return set(s.lhs[-1:]) | {it for it in s.iters for r in reads
                              if index_use(r.indices, it).last}


def _outputs(program: ir.Program, s: ir.Stmt) -> int:
    return math.prod(ir.extent_value(e, {}) for e in program.tensors[s.tensor].shape)


def _register_tiled(probe: _Probe, policy: CpuPolicy) -> bool:
    """Does the pipeline register-tile a contraction of ``program``? A sum over the outer
    axis (``Y(b,c) +=! X(a,b,c)``, no operand broadcast along a row) is a ``+=`` into a
    matrix but no GotoBLAS nest; its search space was 364,500 configurations of which 9
    differed. Asked of the pipeline: the smallest and largest register rows change the
    schedule of a register-tiled nest (one of them is not the model's)."""
    default = probe.key(register_tile=True)
    return any(probe.key(mr=mr) != default for mr in (min(CPU_SPACE.mr), max(CPU_SPACE.mr)))


def _contractions(program: ir.Program) -> list[ir.Stmt]:
    return [s for s in program.stmts if s.op == "+" and s.reduction_iters and len(s.lhs) >= 2]


def _cpu_knobs(program: ir.Program,
               policy: CpuPolicy) -> tuple[tuple[str, tuple[Any, ...]], ...]:
    knobs: list[tuple[str, tuple[Any, ...]]] = []
    if len(program.stmts) > 1:
        knobs.append(("fusion", ("smart", "min", "max")))
    contractions = _contractions(program)
    if contractions:
        lanes = policy.lanes(DTYPES[program.tensors[contractions[0].tensor].dtype].np.itemsize)
        knobs += [("register_tile", (None, True, False)),
                  ("mr", (None, *CPU_SPACE.mr)),
                  ("nr", (None, *(v * lanes for v in CPU_SPACE.nr_vectors))),
                  ("kc", (None, *CPU_SPACE.kc)),
                  ("pack_a", (None, True, False)),
                  ("pack_b", (None, True, False)),
                  ("rows_outer", (None, True, False))]
        if any(len(s.lhs) >= CPU_SPACE.conv_rank for s in program.stmts):  # NCHW: channel
            # blocks of the default (None), none, or several vectors (more accumulators)
            knobs.append(("block", (None, 0, *(v * lanes for v in CPU_SPACE.block_vectors))))
        else:  # L2 row blocks (a convolution's rows are too short to cut)
            knobs.append(("mc", (None, 0, *CPU_SPACE.mc)))
    if any(len(s.lhs) >= 2 for s in program.stmts):
        knobs.append(("cache_tile", (None, 0, *CPU_SPACE.cache_tile)))
    if mergeable(program):  # merged loops (a 1x1 convolution's pixels) or as written
        knobs.append(("merge", (None, True, False)))
    return tuple(knobs)


def _cuda_knobs(program: ir.Program,
                policy: GpuPolicy) -> tuple[tuple[str, tuple[Any, ...]], ...]:
    knobs: list[tuple[str, tuple[Any, ...]]] = [("gpu_block", (None, *GPU_SPACE.blocks))]
    if _contractions(program):
        knobs += [("gpu_tile", (None, *GPU_SPACE.tiles)),
                  ("gpu_regs", (None, *GPU_SPACE.regs)),
                  ("gpu_shared", (None, False)),
                  ("gpu_unroll", (None, *GPU_SPACE.unroll))]
    return tuple(knobs)
