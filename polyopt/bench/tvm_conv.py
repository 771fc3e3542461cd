"""TVM as a peer: a convolution in TE, scheduled the way TVM's CPU tutorials do it.

- Default (``--tvm-trials 0``): a fixed schedule in the style of TVM's CPU GEMM tutorial,
  written with the ``s_tir`` Schedule API (TE's ``create_schedule`` is gone in 0.27). The
  output is computed NCHW[bf]c (``bf`` = 16 output channels, the weight packed to match)
  into a cached register tile of ``bw`` output columns x ``bf`` channels, the channel loop
  vectorized, the columns unrolled, output rows in parallel; the zero padding is a separate
  padded copy, as in TVM's own conv2d. Depthwise layers vectorize along the output row.
- ``--tvm-trials N``: MetaSchedule searches the tile sizes of that schedule (``ScheduleFn``
  design space, N trials per layer). Tuning runs in a child process, all layers in one:
  TVM's tuner can crash the interpreter, and a crash must become a reported failure, not
  the end of the benchmark. The child exports one library per layer; the parent loads it.
  (With TVM 0.27 here, creating MetaSchedule's default rule-based space segfaults, and so
  does its task scheduler with this space: the failure is what gets reported.)

Written against TVM 0.27 (``tvm.tirx``, ``tvm.s_tir``); with another release a changed API
shows as TVM's failure on each layer, with the error.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

import numpy as np

from polyopt.bench.layers import Layer
from polyopt.bench.peers import Context, Inputs, Prepared, Skip

__all__ = ["native_cpu", "prepare_tvm", "tune_layers"]

CHANNEL_BLOCK = 16  # output channels per vector tile (bf); smaller when Cout is not a multiple


def _divisors(n: int, lo: int, hi: int) -> list[int]:
    return [d for d in range(lo, min(hi, n) + 1) if n % d == 0]


def native_cpu() -> str | None:
    """The CPU name gcc picks for -march=native (e.g. znver3), for LLVM's -mcpu."""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run(["gcc", "-march=native", "-Q", "--help=target"],
                             capture_output=True, text=True, timeout=30, check=False).stdout
        for line in out.splitlines():
            words = line.split()
            if len(words) == 2 and words[0] == "-march=":
                return words[1]
    return None


def load(threads: int, ctx: Context | None = None) -> tuple[Any, Any]:
    """(tvm, llvm target) with TVM's thread pool sized like the other systems."""
    # TVM reads TVM_NUM_THREADS when its thread pool starts, i.e. at the first parallel call.
    os.environ["TVM_NUM_THREADS"] = str(threads)
    tvm = ctx.load("tvm", "TVM") if ctx else importlib.import_module("tvm")
    if ctx is not None and "tvm-target" in ctx.modules:
        return tvm, ctx.modules["tvm-target"]
    cpu = native_cpu()
    spec: dict[str, Any] = {"kind": "llvm", "num-cores": threads}
    target = tvm.target.Target({**spec, "mcpu": cpu} if cpu else spec)
    if ctx is not None:
        ctx.modules["tvm-target"] = target
    return tvm, target


# ------------------------------------------------------------------ TE definitions
def padded(tvm: Any, data: Any, layer: Layer) -> Any:
    te, p = tvm.te, layer.pad
    if not p:
        return data
    lim = layer.hw + p
    zero = tvm.tirx.const(0.0, "float32")
    return te.compute(
        (data.shape[0], layer.cin, lim + p, lim + p),
        lambda n, c, y, x: te.if_then_else(tvm.tirx.all(y >= p, y < lim, x >= p, x < lim),
                                           data[n, c, y - p, x - p], zero), name="pad")


def define(tvm: Any, layer: Layer, batch: int) -> Any:
    """The layer as a TE PrimFunc (I, W) -> O, NCHW in and out, for the tutorial schedule."""
    te, s, k = tvm.te, layer.stride, layer.k
    data = te.placeholder(layer.input_shape(batch), name="I")
    weight = te.placeholder(layer.weight_shape(), name="W")
    padded_data = padded(tvm, data, layer)
    ry, rx = te.reduce_axis((0, k), "ry"), te.reduce_axis((0, k), "rx")
    shape = layer.output_shape(batch)
    if layer.kind == "depthwise":
        out = te.compute(shape, lambda n, c, y, x: te.sum(
            padded_data[n, c, y * s + ry, x * s + rx] * weight[c, 0, ry, rx], axis=[ry, rx]),
            name="conv")
        return te.create_prim_func([data, weight, out])
    if layer.groups > 1:
        raise Skip("the TVM schedule here covers groups=1 and depthwise layers only")
    bf = _channel_block(layer)
    packed = te.compute((layer.cout // bf, layer.cin, k, k, bf),
                        lambda fo, c, y, x, fi: weight[fo * bf + fi, c, y, x], name="wpack")
    rc = te.reduce_axis((0, layer.cin), "rc")
    blocked = te.compute((batch, layer.cout // bf, *shape[2:], bf), lambda n, fo, y, x, fi: te.sum(
        padded_data[n, rc, y * s + ry, x * s + rx] * packed[fo, rc, ry, rx, fi], axis=[rc, ry, rx]),
        name="conv")
    out = te.compute(shape, lambda n, f, y, x: blocked[n, f // bf, y, x, tvm.tirx.indexmod(f, bf)],
                     name="unpack")
    return te.create_prim_func([data, weight, out])


def _channel_block(layer: Layer) -> int:
    return next(b for b in (CHANNEL_BLOCK, 8, 4, 2, 1) if layer.cout % b == 0)


def _column_block(layer: Layer) -> int:
    """Output columns per register tile: the largest divisor of the row width up to 8."""
    return max(_divisors(layer.hw_out, 1, 8))


# ------------------------------------------------------------------ schedules
def schedule(tvm: Any, func: Any, layer: Layer, sch: Any = None, knobs: dict[str, Any] | None = None
             ) -> Any:
    """Apply the tutorial-style schedule to ``func`` (or to ``sch``, MetaSchedule's)."""
    sch = sch or tvm.s_tir.Schedule(func)
    knobs = knobs or {}
    if layer.kind == "depthwise":
        _schedule_depthwise(sch, layer, knobs.get("bw", max(_divisors(layer.hw_out, 1, 16))))
    else:
        _schedule_blocked(sch, layer, knobs.get("bw", _column_block(layer)), knobs.get("bc"))
        wpack = sch.get_loops(sch.get_sblock("wpack"))
        sch.parallel(wpack[0])
        sch.vectorize(wpack[-1])
        unpack = sch.get_loops(sch.get_sblock("unpack"))
        sch.parallel(sch.fuse(unpack[0], unpack[1]))
    if layer.pad:
        pad = sch.get_loops(sch.get_sblock("pad"))
        sch.parallel(sch.fuse(pad[0], pad[1]))
        sch.vectorize(pad[-1])
    return sch


def _inner(loops: Sequence[Any], named: Sequence[tuple[str, int]]) -> dict[str, Any]:
    """Name the loops under a compute_at: isl-like, TVM drops the ones of extent 1."""
    present = [name for name, extent in named if extent > 1]
    if len(present) != len(loops):
        raise RuntimeError(f"unexpected loop nest: {len(loops)} loops for {present}")
    return dict(zip(present, loops, strict=True))


def _schedule_blocked(sch: Any, layer: Layer, bw: Any, bc: Any) -> None:
    """GEMM-tutorial style: a bw x bf register tile in a write cache, reduction outside.

    ``bc`` (MetaSchedule only) splits the input channels into blocks of ``bc``, the taps
    loop between the two halves.
    """
    conv = sch.get_sblock("conv")
    out = sch.cache_write(conv, 0, "global")
    n, fo, y, x, fi = sch.get_loops(out)
    xo, xi = sch.split(x, [None, bw])
    sch.reorder(n, fo, y, xo, xi, fi)
    sch.compute_at(conv, xo)
    width = bw if isinstance(bw, int) else int(sch.get(bw))
    loops = _inner(sch.get_loops(conv)[4:], [("xi", width), ("fi", _channel_block(layer)),
                                             ("rc", layer.cin), ("ry", layer.k), ("rx", layer.k)])
    names = ["rc", "ry", "rx", "xi", "fi"]
    if bc is not None and "rc" in loops:
        loops["rco"], loops["rci"] = sch.split(loops.pop("rc"), [None, bc])
        names = ["rco", "ry", "rx", "rci", "xi", "fi"]
    order = [loops[name] for name in names if name in loops]
    sch.reorder(*order)
    if "xi" in loops:
        sch.unroll(loops["xi"])
    if "fi" in loops:
        sch.vectorize(loops["fi"])
        sch.vectorize(fi)
    sch.parallel(sch.fuse(n, fo, y))
    init = sch.decompose_reduction(conv, order[0])
    if "fi" in loops:
        sch.vectorize(sch.get_loops(init)[-1])


def _schedule_depthwise(sch: Any, layer: Layer, bw: Any) -> None:
    """One channel's output row in vector tiles of bw columns; the taps loop outside."""
    conv = sch.get_sblock("conv")
    out = sch.cache_write(conv, 0, "global")
    n, c, y, x = sch.get_loops(out)
    xo, xi = sch.split(x, [None, bw])
    sch.compute_at(conv, xo)
    width = bw if isinstance(bw, int) else int(sch.get(bw))
    loops = _inner(sch.get_loops(conv)[4:], [("xi", width), ("ry", layer.k), ("rx", layer.k)])
    order = [loops[name] for name in ("ry", "rx", "xi") if name in loops]
    sch.reorder(*order)
    if "xi" in loops:
        sch.vectorize(loops["xi"])
        sch.vectorize(xi)
    sch.parallel(sch.fuse(n, c, y))
    if len(order) > 1:
        init = sch.decompose_reduction(conv, order[0])
        if "xi" in loops:
            sch.vectorize(sch.get_loops(init)[-1])


# ------------------------------------------------------------------ the peer
def prepare_tvm(layer: Layer, inputs: Inputs, ctx: Context) -> Prepared:
    if ctx.target != "c":
        raise Skip("TVM runs as a CPU peer only")
    tvm, target = load(ctx.threads, ctx)
    if ctx.tvm_trials:
        tuned = ctx.tuned.get(layer.number, "not tuned")
        if not tuned.endswith(".so"):
            raise RuntimeError(f"MetaSchedule tuning failed: {tuned}")
        entry = tvm.runtime.load_module(tuned)["main"]
        variant = (f"MetaSchedule, {ctx.tvm_trials} trials over the tutorial schedule's tile "
                   f"sizes; tvm {tvm.__version__}")
    else:
        func = define(tvm, layer, inputs[0].shape[0])
        entry = tvm.compile(schedule(tvm, func, layer).mod, target=target)["main"]
        variant = (f"tutorial-style schedule (NCHW{_channel_block(layer)}c register tiles, "
                   f"vectorized, parallel); tvm {tvm.__version__}"
                   if layer.kind != "depthwise" else
                   f"tutorial-style schedule (vectorized rows, parallel); tvm {tvm.__version__}")
    tensor = getattr(tvm.runtime, "tensor", None) or tvm.nd.array
    dev = tvm.cpu()
    x, w = (tensor(a, dev) for a in inputs)
    out = tensor(np.zeros(layer.output_shape(inputs[0].shape[0]), np.float32), dev)

    def call() -> Any:
        entry(x, w, out)
        return out

    return Prepared(call, variant, lambda o: o.numpy())


# ------------------------------------------------------------------ MetaSchedule
def tune_layers(layers: Sequence[Layer], batch: int, trials: int, threads: int,
                workdir: str) -> dict[int, str]:
    """layer number -> path of its tuned library (in ``workdir``), or why there is none.

    One child process tunes every layer in turn and prints a JSON line per layer, so the
    layers done before a crash keep their libraries.
    """
    spec = json.dumps({"layers": [asdict(x) for x in layers], "batch": batch,
                       "trials": trials, "threads": threads, "workdir": workdir})
    proc = subprocess.run([sys.executable, "-m", "polyopt.bench.tvm_conv", spec],
                          capture_output=True, text=True, check=False)
    done: dict[int, str] = {}
    for line in proc.stdout.splitlines():
        with contextlib.suppress(ValueError, KeyError, TypeError):
            item = json.loads(line)
            done[int(item["layer"])] = str(item["result"])
    why = _child_failure(proc)
    return {x.number: done.get(x.number, why) for x in layers}


def _child_failure(proc: subprocess.CompletedProcess[str]) -> str:
    tail = [line for line in proc.stderr.splitlines() if line.strip()
            and not line.startswith("  File")][-1:]
    last = tail[0].strip(" !") if tail else "no message"  # TVM frames its crash in "!!!"
    if proc.returncode < 0:
        with contextlib.suppress(ValueError):
            name = signal.Signals(-proc.returncode).name
            return f"the tuning process died of {name} ({last})"
        return f"the tuning process died of signal {-proc.returncode} ({last})"
    if proc.returncode:
        return f"the tuning process exited with status {proc.returncode} ({last})"
    return "the tuning process did not report this layer"


def design_space(tvm: Any, func: Any, layer: Layer) -> Any:
    """The tutorial schedule with its tile sizes sampled, for MetaSchedule's ``ScheduleFn``.

    Every candidate is > 1 so that no loop vanishes: the loop structure, which the schedule
    names by position, is then the same for every sample.
    """
    wide = _divisors(layer.hw_out, 2, 16)
    channels = [d for d in _divisors(layer.cin, 4, 64) if d < layer.cin]

    def space(sch: Any) -> Any:
        knobs: dict[str, Any] = {}
        if wide:
            knobs["bw"] = sch.sample_categorical(wide, [1.0 / len(wide)] * len(wide))
        if channels and layer.kind != "depthwise":
            knobs["bc"] = sch.sample_categorical(channels, [1.0 / len(channels)] * len(channels))
        return schedule(tvm, func, layer, sch=sch, knobs=knobs)

    return space


def _tune_one(tvm: Any, target: Any, layer: Layer, batch: int, trials: int, workdir: str) -> str:
    from tvm.s_tir import meta_schedule as ms

    func = define(tvm, layer, batch)
    generator = ms.space_generator.ScheduleFn(design_space(tvm, func, layer), sch_rules=[],
                                              postprocs=[],
                                              mutator_probs={})
    db = ms.tune_tir(func, target, os.path.join(workdir, f"layer{layer.number}"), trials,
                     num_trials_per_iter=min(trials, 16), num_tuning_cores=1, space=generator,
                     database="json", cost_model="random")
    best = ms.tir_integration.compile_tir(db, func, target)
    if best is None:
        return "MetaSchedule found no valid schedule"
    path = os.path.join(workdir, f"layer{layer.number}.so")
    tvm.compile(best.mod, target=target).export_library(path)
    return path


def _child(argv: Sequence[str]) -> int:
    spec = json.loads(argv[0])
    tvm, target = load(int(spec["threads"]))
    for row in spec["layers"]:
        layer = Layer(**row)
        try:
            result = _tune_one(tvm, target, layer, int(spec["batch"]), int(spec["trials"]),
                               spec["workdir"])
        except Exception as exc:  # one layer's failure must not stop the others
            first = next((x for x in str(exc).splitlines() if x.strip()), "")
            result = f"{type(exc).__name__}: {first.strip()}"
        print(json.dumps({"layer": layer.number, "result": result}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1:]))
