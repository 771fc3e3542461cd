"""TVM's GEMM, the peer of the 2-D matmuls of ``polyopt bench ops`` and ``suite``: the
blocked, packed, vectorized and parallel schedule of TVM's CPU GEMM tutorial. Imports TVM only
when a case asks for it."""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from polyopt.bench.measure import Bench, Prepared, describe, log, prepare_baseline
from polyopt.bench.operators import Case, Inputs
from polyopt.bench.tvm_conv import native_cpu  # one definition for both benchmarks


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


