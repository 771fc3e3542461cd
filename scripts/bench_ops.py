"""Operator speed: polyopt against program order, numpy, torch and TVM, float32, in one run.

Run with numpy's BLAS at full speed (the command recorded in BENCHMARKS.md):
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python3 scripts/bench_ops.py

Smoke test in seconds:  python3 scripts/bench_ops.py --quick
A subset:               ... scripts/bench_ops.py --ops matmul,softmax --repeat 3
Record the result:      ... scripts/bench_ops.py --update   (rewrites "## CPU: operators")

Every system is built and its result checked first, then the systems are timed in --rounds
interleaved rounds (default 3) of --repeat calls each, and a cell is the median of all those
calls: on this VM the same kernel timed in blocks seconds apart moves by 0.7-1.4x, so one
block per system would decide a ratio by chance. Results are checked
against a float64 numpy reference (rtol 1e-3, atol 1e-3*sqrt(reduction size)); a mismatch
shows as WRONG. Throughput is GFLOP/s, or GB/s for the memory-bound softmax and layernorm
(bytes = inputs read once + output written once). Columns:
- polyopt: polyopt.compile's default schedule; program-order: schedule="program-order"
  (skipped above 2 GFLOP unless --all-baselines); polyopt fusion=min: options={"fusion": "min"}
  (softmax and layernorm only).
- numpy: BLAS matmul; convolutions as im2col (sliding_window_view) + tensordot; depthwise
  as einsum. torch: torch.matmul/bmm, F.conv2d, torch.softmax, F.layer_norm, 2 threads.
  TVM: matmul only, the blocked/packed/vectorized/parallel schedule of TVM's CPU GEMM tutorial.
- compile: polyopt.compile up to the first result with a fresh POLYOPT_CACHE_DIR (cold
  cache), minus one steady-state call. overhead: median time of a call on 1-element inputs.
- Each measurement starts after a 0.3 s pause, so that the previous runtime's spinning worker
  threads have gone idle (on 2 cores they stall the next OpenMP call by ~8 ms).
- Thread counts stay at their defaults. --omp-bind sets OMP_PROC_BIND=spread: on VMs whose
  kernel packs threads onto one vCPU (sched_vcpu_pack in /proc/cmdline) unpinned OpenMP teams
  (polyopt's and torch's) otherwise lose a 4 ms scheduler tick at every barrier.
Shapes: odd matmul is M=1000, N=1100, K=1200; conv_bias_relu uses conv1's shape (N=1);
softmax and layernorm are 16384 x 1024 (each tensor 64 MB: beyond the L3).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import functools
import importlib
import importlib.metadata
import math
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import polyopt
from polyopt import kernels
from polyopt.bench.timing import sample_seconds, time_rounds
from polyopt.bench.tvm_conv import native_cpu  # one definition for both benchmarks
from polyopt.config import scratch_cache

SECTION = "## CPU: operators"
BENCHMARKS = Path(__file__).resolve().parent.parent / "BENCHMARKS.md"
COMMAND_PREFIX = "env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python3 scripts/bench_ops.py"
PROGRAM_ORDER_MAX_FLOP = 2e9
OVERHEAD_CALLS = 200
# Pause before each measurement: OpenBLAS's idle workers spin ~0.15 s after a call, and on a
# 2-core machine a spinning runtime stalls another runtime's OpenMP calls by ~8 ms each.
SETTLE_S = 0.3
OPS = ("matmul", "bmm", "2mm", "softmax", "layernorm", "conv1", "conv2", "conv3", "conv4",
       "dwconv", "conv_bias_relu")
SYSTEMS = ("polyopt", "program-order", "fusion=min", "numpy", "torch", "tvm")
Inputs = list[Any]


# ------------------------------------------------------------------ operator cases
@dataclass(frozen=True)
class Case:
    """One operator at one shape."""

    op: str  # the --ops name
    kernel: str  # def name in kernels/*.tc
    shape: str  # as shown in the table
    shapes: tuple[tuple[int, ...], ...]  # input shapes in signature order; () is a scalar
    sizes: dict[str, int]  # every size and <...> parameter, for polyopt.compile(sizes=)
    flops: float
    reduction: int  # length of the reductions behind one output, for the tolerance
    reference: Callable[..., np.ndarray]  # numpy formulation, also the float64 reference
    torch_fn: Callable[..., Any] | None = None  # takes torch tensors (0-d ones for scalars)
    params: dict[str, int] = field(default_factory=dict)  # the <...> parameters alone
    nbytes: float | None = None  # set for memory-bound ops: report GB/s
    unfused: bool = False  # also run options={"fusion": "min"}
    tvm: bool = False  # matmul: also run TVM
    text: str | None = None  # the def's TC source; None: ``kernel`` from polyopt.kernels

    @property
    def source(self) -> str:
        return self.text if self.text is not None else kernel_text(self.kernel)

    @property
    def unit(self) -> str:
        return "GB/s" if self.nbytes else "GFLOP/s"

    def throughput(self, seconds: float) -> float:
        return (self.nbytes or self.flops) / seconds / 1e9


def matmul_case(m: int, n: int, k: int) -> Case:
    return Case("matmul", "matmul", f"{m}x{n}x{k} (MxNxK)", ((m, k), (k, n)),
                {"M": m, "N": n, "K": k}, 2.0 * m * n * k, k, np.matmul,
                torch_fn=lambda a, b: a @ b, tvm=True)


def bmm_case(b: int, n: int) -> Case:
    return Case("bmm", "batch_matmul", f"B={b}, {n}^3", ((b, n, n), (b, n, n)),
                {"B": b, "M": n, "N": n, "K": n}, 2.0 * b * n**3, n, np.matmul,
                torch_fn=lambda x, y: x.bmm(y))


def np_2mm(alpha: Any, beta: Any, a: Any, b: Any, c: Any, d: Any) -> np.ndarray:
    return beta * d + (alpha * (a @ b)) @ c


def two_mm_case(n: int) -> Case:
    sizes = {"NI": n, "NJ": n, "NK": n, "NL": n}
    return Case("2mm", "polybench_2mm", f"NI=NJ=NK=NL={n}", ((), (), *[(n, n)] * 4), sizes,
                4.0 * n**3, n * n, np_2mm, torch_fn=np_2mm)


def np_softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def np_layernorm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray) -> np.ndarray:
    mu, var = x.mean(1, keepdims=True), x.var(1, keepdims=True)
    return gamma * (x - mu) / np.sqrt(var + 1e-5) + beta


def norm_cases(n: int, d: int) -> list[Case]:
    def torch_layernorm(x: Any, gamma: Any, beta: Any) -> Any:
        import torch

        return torch.nn.functional.layer_norm(x, (d,), gamma, beta, eps=1e-5)

    def torch_softmax(x: Any) -> Any:
        import torch

        return torch.softmax(x, 1)

    io = 2.0 * n * d * 4
    return [Case("softmax", "softmax", f"N={n}, D={d}", ((n, d),), {"N": n, "D": d},
                 5.0 * n * d, d, np_softmax, torch_softmax, nbytes=io, unfused=True),
            Case("layernorm", "layernorm", f"N={n}, D={d}", ((n, d), (d,), (d,)),
                 {"N": n, "D": d}, 8.0 * n * d, d, np_layernorm, torch_layernorm,
                 nbytes=io + 2.0 * d * 4, unfused=True)]


def conv_window(x: np.ndarray, k: int, stride: int, pad: int) -> np.ndarray:
    """(N, C, Ho, Wo, k, k) view of the zero-padded input (no copy)."""
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    win = np.lib.stride_tricks.sliding_window_view(xp, (k, k), axis=(2, 3))
    return win[:, :, ::stride, ::stride]


def np_conv2d(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None = None, *, stride: int,
              pad: int, relu: bool = False) -> np.ndarray:
    """im2col + matmul: tensordot copies the window view into a matrix and calls BLAS."""
    out = np.tensordot(conv_window(x, w.shape[2], stride, pad), w, axes=([1, 4, 5], [1, 2, 3]))
    out = np.ascontiguousarray(out.transpose(0, 3, 1, 2))
    if bias is not None:
        out += bias[None, :, None, None]
    return np.maximum(out, 0) if relu else out


def np_depthwise(x: np.ndarray, w: np.ndarray, *, stride: int, pad: int) -> np.ndarray:
    return np.einsum("nchwij,cij->nchw", conv_window(x, w.shape[2], stride, pad), w[:, 0])


def torch_conv2d(x: Any, w: Any, bias: Any = None, *, stride: int, pad: int, groups: int = 1,
                 relu: bool = False) -> Any:
    import torch

    out = torch.nn.functional.conv2d(x, w, bias, stride=stride, padding=pad, groups=groups)
    return torch.relu(out) if relu else out


def conv_case(op: str, c: int, f: int, hw: int, k: int, stride: int = 1, pad: int = 0, *,
              kernel: str = "conv2d") -> Case:
    """A batch-1 square convolution; ``kernel`` is conv2d, conv2d_bias_relu or depthwise."""
    params = {"SH": stride, "SW": stride} if stride != 1 else {}
    params |= {"PH": pad, "PW": pad} if pad else {}
    depthwise, bias = kernel == "depthwise_conv2d", kernel == "conv2d_bias_relu"
    ho = (hw + 2 * pad - k) // stride + 1
    per_output = k * k * (1 if depthwise else c)
    sizes = {"N": 1, "C": c, "H": hw, "W": hw, "KH": k, "KW": k, **params}
    shapes: tuple[tuple[int, ...], ...] = ((1, c, hw, hw), (c, 1, k, k))
    if depthwise:
        reference: Callable[..., np.ndarray] = np_depthwise
        kw: dict[str, Any] = {"groups": c}
        label = f"dw {k}x{k} {c}ch"
    else:
        sizes["F"] = f
        shapes = ((1, c, hw, hw), (f, c, k, k), *([(f,)] if bias else []))
        reference = functools.partial(np_conv2d, relu=bias)
        kw = {"relu": bias}
        label = f"{k}x{k} {c}->{f}"
    label += f" {hw}x{hw}" + (f" s{stride}" if stride != 1 else "") + (f" p{pad}" if pad else "")

    def ref(*a: Any) -> np.ndarray:
        return reference(*a, stride=stride, pad=pad)

    def torch_fn(*a: Any) -> Any:
        return torch_conv2d(*a, stride=stride, pad=pad, **kw)

    return Case(op, kernel, label, shapes, sizes, 2.0 * ho * ho * f * per_output, per_output,
                ref, torch_fn, params=params)


def all_cases(quick: bool) -> list[Case]:
    """The benchmark set (ResNet-50 layers for conv), or tiny shapes for --quick."""
    if quick:
        mats = [matmul_case(64, 64, 64), matmul_case(30, 20, 25)]
        rest = [bmm_case(2, 32), two_mm_case(32), *norm_cases(64, 64)]
        convs = [(8, 8, 14, 3, 1, 1), (16, 8, 14, 1, 1, 0), (8, 8, 7, 3, 1, 1),
                 (3, 8, 28, 7, 2, 3), (8, 8, 14, 3, 1, 1)]
    else:
        mats = [matmul_case(n, n, n) for n in (256, 512, 1024, 2048)]
        mats.append(matmul_case(1000, 1100, 1200))
        # Normalizations at 16384 x 1024 (64 MB, twice this L3): fusion is about memory
        # traffic, which a working set that stays in the L3 hides.
        rest = [bmm_case(8, 256), two_mm_case(512), *norm_cases(16384, 1024)]
        convs = [(64, 64, 56, 3, 1, 1), (256, 64, 56, 1, 1, 0), (256, 256, 14, 3, 1, 1),
                 (3, 64, 224, 7, 2, 3), (144, 144, 56, 3, 1, 1)]
    conv_ops = [conv_case(f"conv{i + 1}", *cv) for i, cv in enumerate(convs[:4])]
    conv_ops.append(conv_case("dwconv", *convs[4], kernel="depthwise_conv2d"))
    conv_ops.append(conv_case("conv_bias_relu", *convs[0], kernel="conv2d_bias_relu"))
    return [*mats, *rest, *conv_ops]


# ------------------------------------------------------------------ measuring
@dataclass
class Timing:
    """A median time, or the note shown instead (-, WRONG, ERROR, skipped)."""

    seconds: float | None = None
    note: str = "-"


@dataclass
class Prepared:
    """A system's call, its result checked, or the note shown instead of its time."""

    call: Callable[[], Any] | None = None
    note: str = "-"


@dataclass
class Row:
    case: Case
    timings: dict[str, Timing] = field(default_factory=dict)
    compile_s: float | None = None
    overhead_us: float | None = None


@dataclass(frozen=True)
class Bench:
    """What every measurement needs: settings and the optional baselines."""

    repeat: int
    cache_root: Path
    all_baselines: bool
    torch: Any | None
    tvm: tuple[Any, Any] | None  # (tvm module, target)
    settle_s: float = SETTLE_S  # pause before each measurement; 0 for --quick
    rounds: int = 3  # interleaved rounds of ``repeat`` calls per system


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def median_seconds(fn: Callable[[], Any], repeat: int) -> float:
    """Median of ``repeat`` timed calls (``sample_seconds``)."""
    return float(np.median(sample_seconds(fn, repeat)))


def time_interleaved(bench: Bench, systems: dict[str, Prepared]) -> dict[str, Timing]:
    """Each system's median over ``bench.rounds`` interleaved rounds (``time_rounds``) of
    ``bench.repeat`` batched samples (``sample_seconds``); a system that raises while
    timed shows ERROR."""
    samplers = {name: functools.partial(sample_seconds, p.call, bench.repeat)
                for name, p in systems.items() if p.call is not None}
    samples, failed = time_rounds(samplers, bench.rounds, bench.settle_s)
    for name, why in failed.items():
        log(f"  {name} failed while timed: {why}")
    return {name: Timing(note="ERROR") if name in failed
            else Timing(float(np.median(samples[name]))) if name in samples
            else Timing(note=p.note) for name, p in systems.items()}


def describe(exc: BaseException, lines: int = 8) -> str:
    """The exception's type and the first lines of its message (compiler logs are long)."""
    text = str(exc).splitlines() or [""]
    more = f" [... {len(text) - lines} more lines]" if len(text) > lines else ""
    return f"{type(exc).__name__}: " + "\n    ".join(text[:lines]) + more


def settle(bench: Bench) -> None:
    """Let the last runtime's spinning worker threads go to sleep before timing another."""
    time.sleep(bench.settle_s)


def matches(out: Any, ref: np.ndarray, reduction: int) -> bool:
    out = out.numpy() if hasattr(out, "numpy") else np.asarray(out)
    if out.shape != ref.shape or not np.isfinite(out).all():
        return False
    return bool(np.allclose(out, ref, rtol=1e-3, atol=1e-3 * math.sqrt(reduction)))


def make_inputs(case: Case, rng: np.random.Generator, ones: bool = False) -> Inputs:
    """Standard-normal float32 inputs (all extents 1 and value 1 with ``ones``)."""
    scalars = iter((1.5, 1.2))  # PolyBench's alpha and beta
    out: Inputs = []
    for shape in case.shapes:
        if not shape:
            out.append(np.float32(next(scalars)))
        elif ones:
            out.append(np.ones((1,) * len(shape), np.float32))
        else:
            out.append(rng.standard_normal(shape, dtype=np.float32))
    return out


def kernel_text(name: str) -> str:
    """The library's def with its ``<...>`` parameters intact, so sizes= can set them.

    ``kernels.get(name)`` without keywords writes zero paddings into the body as literals and
    drops PH/PW from the parameter list, after which ``sizes={"PH": 1}`` is an unknown size.
    """
    return kernels.source(name)


def prepare_polyopt(bench: Bench, case: Case, inputs: Inputs, ref: np.ndarray,
                    **compile_kw: Any) -> tuple[Prepared, float | None]:
    """The checked call and the cold-cache seconds to its first result (compile + first
    call; ``compile_seconds`` takes one call off)."""
    settle(bench)
    with scratch_cache(bench.cache_root):
        start = time.perf_counter()
        try:
            kernel = polyopt.compile(case.source, case.kernel, sizes=case.sizes, **compile_kw)
            first = kernel(*inputs)
        except Exception as exc:  # polyopt is a moving target: report and carry on
            log(f"  polyopt {compile_kw or 'default'} failed on {case.op}: "
                f"{describe(exc)}")
            return Prepared(note="ERROR"), None
        elapsed = time.perf_counter() - start
    if not matches(first, ref, case.reduction):
        log(f"  polyopt {compile_kw or 'default'} gives a WRONG result on {case.op}")
        return Prepared(note="WRONG"), None
    return Prepared(lambda: kernel(*inputs)), elapsed


def compile_seconds(first_s: float | None, timing: Timing) -> float | None:
    """Seconds to a first result less one steady-state call."""
    if first_s is None or timing.seconds is None:
        return None
    return max(first_s - timing.seconds, 0.0)


def call_overhead_us(bench: Bench, case: Case) -> float | None:
    """Median time of a default-compiled call with every extent 1, in microseconds."""
    ones = make_inputs(case, np.random.default_rng(0), ones=True)
    settle(bench)
    with scratch_cache(bench.cache_root):
        try:
            kernel = polyopt.compile(kernel_text(case.kernel), case.kernel, sizes=case.params)
            kernel(*ones)
        except Exception as exc:
            log(f"  polyopt failed on 1-element {case.op}: {describe(exc)}")
            return None
    return median_seconds(lambda: kernel(*ones), OVERHEAD_CALLS) * 1e6


def prepare_baseline(bench: Bench, name: str, fn: Callable[[], Any], ref: np.ndarray,
                     case: Case) -> Prepared:
    """``fn`` once, its result checked against ``ref``."""
    settle(bench)
    try:
        out = fn()
    except Exception as exc:
        log(f"  {name} failed on {case.op}: {describe(exc)}")
        return Prepared(note="ERROR")
    if not matches(out, ref, case.reduction):
        log(f"  {name} gives a WRONG result on {case.op}")
        return Prepared(note="WRONG")
    return Prepared(fn)


def prepare_torch(bench: Bench, case: Case, inputs: Inputs, ref: np.ndarray) -> Prepared:
    torch = bench.torch
    if torch is None or case.torch_fn is None:
        return Prepared()
    tensors = [torch.from_numpy(np.asarray(x)) for x in inputs]
    torch_fn = case.torch_fn
    return prepare_baseline(bench, "torch", lambda: torch_fn(*tensors), ref, case)


# ------------------------------------------------------------------ TVM (matmul only)
def first_module(tvm: Any, names: Sequence[str]) -> Any:
    """TVM renames modules between releases (tir -> tirx, s_tir): the first that imports."""
    for name in names:
        with contextlib.suppress(ImportError):
            return importlib.import_module(f"tvm.{name}")
    raise ImportError(f"none of tvm.{', tvm.'.join(names)}")


def load_tvm(cases: Sequence[Case]) -> tuple[Any, Any] | None:
    if not any(c.tvm for c in cases):
        return None
    try:
        tvm = importlib.import_module("tvm")
    except ImportError:
        log("TVM is not installed: the TVM column is '-'")
        return None
    cpu = native_cpu()
    specs: list[Any] = [{"kind": "llvm", "mcpu": cpu}, f"llvm -mcpu={cpu}"] if cpu else []
    for spec in [*specs, {"kind": "llvm"}, "llvm"]:
        with contextlib.suppress(Exception):  # dict form since TVM 0.2x, strings before
            return tvm, tvm.target.Target(spec)
    log("TVM has no usable llvm target: the TVM column is '-'")
    return None


def schedule_gemm(tvm: Any, func: Any, bn: int) -> Any:
    """The tutorial's final CPU schedule: bn x bn blocks, k split by 4, write cache,
    unrolled ki, vectorized inner loop, parallel outer loop; packed B vectorized/parallel."""
    sch = first_module(tvm, ("s_tir", "tir")).Schedule(func)
    block = getattr(sch, "get_sblock", None) or sch.get_block
    gemm = block("C")
    out = sch.cache_write(gemm, 0, "global")
    i, j = sch.get_loops(out)
    io, ii = sch.split(i, [None, bn])
    jo, ji = sch.split(j, [None, bn])
    sch.reorder(io, jo, ii, ji)
    sch.compute_at(gemm, jo)
    x, y, kk = sch.get_loops(gemm)[2:]
    ko, ki = sch.split(kk, [None, 4])
    sch.reorder(ko, x, ki, y)
    sch.unroll(ki)
    sch.vectorize(y)
    sch.vectorize(ji)
    sch.parallel(io)
    init = sch.decompose_reduction(gemm, ko)
    sch.vectorize(sch.get_loops(init)[-1])
    pack = sch.get_loops(block("packedB"))
    sch.parallel(pack[0])
    sch.vectorize(pack[2])
    return sch


def build_tvm_matmul(tvm: Any, target: Any, m: int, n: int, k: int, bn: int = 32) -> Any:
    """C = A @ B with B packed into (ceil(N/bn), K, bn) panels, as in TVM's GEMM tutorial."""
    te, tir = tvm.te, first_module(tvm, ("tirx", "tir"))
    a = te.placeholder((m, k), name="A")
    b = te.placeholder((k, n), name="B")
    zero = tir.const(0.0, "float32")
    packed = te.compute(((n + bn - 1) // bn, k, bn),
                        lambda x, y, z: te.if_then_else(x * bn + z < n, b[y, x * bn + z], zero),
                        name="packedB")
    r = te.reduce_axis((0, k), "k")
    c = te.compute((m, n), lambda x, y: te.sum(
        a[x, r] * packed[y // bn, r, tir.indexmod(y, bn)], axis=r), name="C")
    sch = schedule_gemm(tvm, te.create_prim_func([a, b, c]), bn)
    build = getattr(tvm, "compile", None) or tvm.build
    return build(sch.mod, target=target)


def prepare_tvm(bench: Bench, case: Case, inputs: Inputs, ref: np.ndarray) -> Prepared:
    if bench.tvm is None or not case.tvm:
        return Prepared()
    tvm, target = bench.tvm
    (m, k), (_, n) = case.shapes
    try:
        fn = build_tvm_matmul(tvm, target, m, n, k)
        tensor = getattr(tvm.runtime, "tensor", None) or tvm.nd.array
        dev = tvm.cpu()
        a, b = (tensor(x, dev) for x in inputs)
        c = tensor(np.zeros((m, n), np.float32), dev)
    except Exception as exc:
        log(f"  TVM build failed on {case.shape}: {describe(exc)}")
        return Prepared(note="ERROR")

    def run() -> Any:
        fn(a, b, c)
        return c

    return prepare_baseline(bench, "tvm", run, ref, case)


# ------------------------------------------------------------------ one row
def run_case(bench: Bench, case: Case) -> Row:
    log(f"{case.op} {case.shape}")
    inputs = make_inputs(case, np.random.default_rng(0))
    ref = case.reference(*[np.asarray(x, np.float64) for x in inputs])
    row = Row(case)
    systems: dict[str, Prepared] = {}
    systems["polyopt"], first_s = prepare_polyopt(bench, case, inputs, ref)
    if case.flops > PROGRAM_ORDER_MAX_FLOP and not bench.all_baselines:
        systems["program-order"] = Prepared(note="skipped")
    else:
        systems["program-order"], _ = prepare_polyopt(bench, case, inputs, ref,
                                                      schedule="program-order")
    if case.unfused:
        systems["fusion=min"], _ = prepare_polyopt(bench, case, inputs, ref,
                                                   options={"fusion": "min"})
    systems["numpy"] = prepare_baseline(bench, "numpy", lambda: case.reference(*inputs),
                                        ref, case)
    systems["torch"] = prepare_torch(bench, case, inputs, ref)
    systems["tvm"] = prepare_tvm(bench, case, inputs, ref)
    row.timings = time_interleaved(bench, systems)
    row.compile_s = compile_seconds(first_s, row.timings["polyopt"])
    row.overhead_us = call_overhead_us(bench, case)
    return row


# ------------------------------------------------------------------ report
HEADER = ("operator", "shape", "unit", "polyopt", "program-order", "polyopt fusion=min",
          "numpy", "torch", "TVM", "polyopt/numpy", "polyopt/torch", "polyopt/program-order",
          "compile s (cold cache)", "call overhead µs")


def fmt(value: float) -> str:
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}" if value >= 0.1 else f"{value:.2g}"


def cells(row: Row) -> list[str]:
    case, got = row.case, row.timings
    mine = got.get("polyopt", Timing())

    def speed(name: str) -> str:
        t = got.get(name, Timing())
        return t.note if t.seconds is None else fmt(case.throughput(t.seconds))

    def ratio(name: str) -> str:
        other = got.get(name, Timing())
        if mine.seconds is None or other.seconds is None:
            return "-"
        return fmt(other.seconds / mine.seconds)

    extra = [fmt(row.compile_s) if row.compile_s is not None else "-",
             f"{row.overhead_us:.1f}" if row.overhead_us is not None else "-"]
    return [case.op, case.shape, case.unit, *map(speed, SYSTEMS),
            *map(ratio, ("numpy", "torch", "program-order")), *extra]


def table_lines(rows: Sequence[Row]) -> list[str]:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    return lines + ["| " + " | ".join(cells(row)) + " |" for row in rows]


NOTES = """\
float32, batch 1 for conv; each system is built and checked, then the systems are timed in
interleaved rounds (--rounds, default 3) and each cell is the median of all its calls.
Throughput in GFLOP/s, or GB/s for softmax and layernorm (inputs read once + output written
once). Ratios are polyopt (default schedule) over the other, >1 means polyopt is faster.
program-order: `schedule="program-order"`, skipped above 2 GFLOP unless `--all-baselines`;
polyopt fusion=min: `options={"fusion": "min"}`. numpy: BLAS matmul, conv as im2col
(sliding_window_view) + tensordot, depthwise as einsum. TVM: the blocked/packed/vectorized/parallel
schedule of TVM's CPU GEMM tutorial, matmul only. compile: `polyopt.compile` to first result with
an empty POLYOPT_CACHE_DIR, minus one steady-state call; call overhead: median call with every
extent 1. The odd matmul is M=1000, N=1100, K=1200; conv_bias_relu has conv1's shape. Each
measurement starts after a 0.3 s pause, so the previous runtime's spinning threads (OpenBLAS,
libgomp) have gone idle: on 2 cores they otherwise stall OpenMP calls by ~8 ms. `--omp-bind`
sets OMP_PROC_BIND=spread (see Threads above)."""


def first_line(argv: Sequence[str]) -> str:
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
        return (out.stdout or out.stderr).strip().splitlines()[0]
    return "unavailable"


def cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def blas_name() -> str:
    with contextlib.suppress(Exception):
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        return f"{blas['name']} {blas.get('version', '')}".strip()
    return "unknown BLAS"


def dist_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def environment_lines(bench: Bench) -> list[str]:
    """Machine, versions and thread settings, one bullet each."""
    env = {k: os.environ.get(k, "unset") for k in
           ("OMP_NUM_THREADS", "OMP_PROC_BIND", "OPENBLAS_NUM_THREADS", "TVM_NUM_THREADS",
            "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    threads = ", ".join(f"{k}={v}" for k, v in env.items())
    torch_threads = f"torch threads {bench.torch.get_num_threads()}" if bench.torch else "no torch"
    return [f"- Machine: {cpu_model()}, {os.cpu_count()} cores ({platform.machine()})",
            f"- Versions: python {platform.python_version()}, numpy {np.__version__} "
            f"({blas_name()}), torch {dist_version('torch')}, tvm {dist_version('apache-tvm')}, "
            f"polyopt {polyopt.__version__}; {first_line(['gcc', '--version'])}",
            f"- Threads: {threads}; {torch_threads}; polyopt's OpenMP, numpy's BLAS and TVM at "
            "their defaults"]


def section_text(argv: Sequence[str], env_lines: Sequence[str], table: Sequence[str], *,
                 heading: str = SECTION, prefix: str = COMMAND_PREFIX, notes: str = NOTES) -> str:
    command = " ".join([prefix, shlex.join(argv)]).strip()
    return "\n".join([f"{heading} ({datetime.date.today().isoformat()})", "",
                      f"Command: `{command}`", "", *env_lines, "", notes, "", *table, ""])


def replace_section(text: str, section: str, heading: str = SECTION) -> str:
    """``text`` with the ``heading`` section replaced by (or appended as) ``section``."""
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.startswith(heading)), None)
    if start is None:
        return text.rstrip("\n") + "\n\n" + section
    end = next((j for j in range(start + 1, len(lines)) if lines[j].startswith("## ")),
               len(lines))
    rest = "".join(lines[end:])
    return "".join(lines[:start]) + section + ("\n" + rest if rest else "")


# ------------------------------------------------------------------ main
def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny shapes, a smoke test")
    parser.add_argument("--ops", default=",".join(OPS),
                        help=f"comma-separated subset of {','.join(OPS)} (default: all)")
    parser.add_argument("--repeat", type=int, default=5, help="timed calls per round")
    parser.add_argument("--rounds", type=int, default=3,
                        help="interleaved rounds: every system, --repeat calls each")
    parser.add_argument("--all-baselines", action="store_true",
                        help="also run program order above 2 GFLOP (slow)")
    parser.add_argument("--omp-bind", action="store_true",
                        help="set OMP_PROC_BIND=spread (unless set) before any OpenMP runtime "
                        "loads, so polyopt's and torch's threads sit on different cores")
    parser.add_argument("--update", action="store_true",
                        help=f"rewrite the '{SECTION}' section of BENCHMARKS.md")
    args = parser.parse_args(argv)
    args.ops = [op.strip() for op in args.ops.split(",") if op.strip()]
    unknown = sorted(set(args.ops) - set(OPS))
    if unknown:
        parser.error(f"unknown --ops {','.join(unknown)}; choose from {','.join(OPS)}")
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    if args.update and args.quick:
        parser.error("--update records full-size results; drop --quick")
    return args


def configure_omp(bind: bool) -> None:
    """Pin OpenMP threads (before libgomp loads), or say why that may be needed here."""
    if bind:
        os.environ.setdefault("OMP_PROC_BIND", "spread")
        return
    with contextlib.suppress(OSError):
        if "sched_vcpu_pack" in Path("/proc/cmdline").read_text():
            log("note: this kernel packs threads onto one vCPU (sched_vcpu_pack): unpinned OpenMP "
                "threads then wait a 4 ms tick per barrier; consider --omp-bind")


def load_torch() -> Any | None:
    try:
        torch = importlib.import_module("torch")
    except ImportError:
        log("torch is not installed: the torch column is '-'")
        return None
    torch.set_num_threads(2)
    torch.set_grad_enabled(False)  # inference: no autograd bookkeeping in any timed call
    return torch


def warm_up_polyopt(root: Path) -> None:
    """One tiny compile, so one-off costs (imports, compiler probe) miss the first row."""
    with scratch_cache(root):
        polyopt.compile(kernel_text("relu"), "relu")(np.ones((1, 1), np.float32))


def main(argv: Sequence[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    cases = [c for c in all_cases(args.quick) if c.op in args.ops]
    configure_omp(args.omp_bind)
    cache_root = Path(tempfile.mkdtemp(prefix="polyopt-bench-"))
    try:
        with scratch_cache(cache_root):  # nothing reaches the user's cache
            bench = Bench(args.repeat, cache_root, args.all_baselines, load_torch(),
                          load_tvm(cases), settle_s=0.0 if args.quick else SETTLE_S,
                          rounds=args.rounds)
            env_lines = environment_lines(bench)
            print("\n".join(env_lines), flush=True)
            warm_up_polyopt(cache_root)
            rows = [run_case(bench, case) for case in cases]
    finally:
        shutil.rmtree(cache_root, ignore_errors=True)
    table = table_lines(rows)
    print("\n" + "\n".join(table))
    if args.update:
        BENCHMARKS.write_text(replace_section(BENCHMARKS.read_text(), section_text(
            argv, env_lines, table)))
        print(f"\nupdated the '{SECTION}' section of {BENCHMARKS}")


if __name__ == "__main__":
    main()
