"""The child processes of ``polyopt bench model``: the torch side, which the command itself
never imports (so ``polyopt --help`` loads no torch).

``python3 -m polyopt.bench.model.child compile ...``: build one model, compile it with one
system and time the first call (a cold compile when the cache dirs the parent set are empty,
a warm start when an earlier child filled them). ``... latency ...``: compile every system,
then time single calls in rounds, the systems' order rotated each round, and check each
output against eager. Either writes its findings as JSON to ``--result``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from polyopt.bench import timing
from polyopt.bench.model import networks
from polyopt.errors import CompileError
from polyopt.torch import compiler

__all__ = ["compile_system", "main", "reason", "relative_error"]

Call = Callable[[torch.Tensor], torch.Tensor]


def relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """Relative L2 error of ``out`` against ``ref``, in float64 (inf on a shape mismatch)."""
    if out.shape != ref.shape:
        return float("inf")
    diff = float((out.double() - ref.double()).norm())
    return diff / max(float(ref.double().norm()), 1e-30)


def _onnxruntime(module: torch.nn.Module, x: torch.Tensor, threads: int) -> Call:
    """The model exported to ONNX and run by ONNX Runtime (ImportError when not installed)."""
    ort = importlib.import_module("onnxruntime")
    path = Path(tempfile.mkdtemp(prefix="polyopt-onnx-")) / "model.onnx"
    # The encoder layer's fused fast path (aten::_transformer_encoder_layer_fwd) has no ONNX
    # export; export its composite ops instead, as in training mode.
    fastpath = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        torch.onnx.export(module, (x,), str(path), input_names=["x"], dynamo=False)
    finally:
        torch.backends.mha.set_fastpath_enabled(fastpath)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return lambda t: torch.from_numpy(session.run(None, {"x": t.numpy()})[0])


def reason(exc: BaseException) -> str:
    """One line: the C compiler's first error when there is one (a CompileError's first
    line is the compiler's command), else the exception's first line."""
    lines = [line.strip() for line in str(exc).splitlines() if "error:" in line]
    if lines and isinstance(exc, CompileError):
        return f"{type(exc).__name__}: {lines[0].split('/')[-1]}"[:300]
    return timing.describe(exc)


def compile_system(system: str, module: torch.nn.Module, x: torch.Tensor, threads: int,
                   record: compiler.Record | None = None) -> Call:
    """``module`` as ``system`` runs it; compiled systems compile at their first call."""
    if system == "eager":
        return module
    if system == "inductor":
        return torch.compile(module)  # type: ignore[return-value]
    if system == "polyopt":
        # make_backend(record) is what backend="polyopt" runs, with the record kept
        return torch.compile(module, backend=compiler.make_backend(record))  # type: ignore
    if system == "polyopt-all":  # every supported op in polyopt, none measured against torch
        return torch.compile(module,  # type: ignore[return-value]
                             backend=compiler.make_backend(record, choose=False))
    if system == "onnxruntime":
        return _onnxruntime(module, x, threads)
    raise ValueError(f"unknown system {system!r}")


def _network(args: argparse.Namespace) -> tuple[torch.nn.Module, torch.Tensor]:
    torch.set_num_threads(args.threads)
    net = networks.build(args.model, tiny=args.tiny, seed=args.seed)
    return net.module, net.example(args.batch, args.seed)


def _plan_counts(record: compiler.Record) -> dict[str, Any]:
    """Partitions, ops left in torch, and which ATen ops those are, over every graph."""
    fallbacks = [f for cut in record.plans for f in cut.fallbacks]
    return {"partitions": sum(len(cut.partitions) for cut in record.plans),
            "torch_ops": len(fallbacks), "graphs": len(record.plans),
            "fallback_ops": sorted({f.target for f in fallbacks})}


def first_result(args: argparse.Namespace) -> dict[str, Any]:
    """Compile with ``args.system`` and time up to the first result."""
    module, x = _network(args)
    record = compiler.Record()
    with torch.no_grad():
        ref = module(x)
        torch._dynamo.reset()
        start = time.perf_counter()
        call = compile_system(args.system, module, x, args.threads, record)
        out = call(x)
        seconds = time.perf_counter() - start
    found: dict[str, Any] = {"seconds": seconds, "rel_error": relative_error(out, ref)}
    return found | (_plan_counts(record) if args.system.startswith("polyopt") else {})


def latencies(args: argparse.Namespace) -> dict[str, Any]:
    """Every system compiled here, then single calls in rotated rounds: ms and max error."""
    module, x = _network(args)
    found: dict[str, Any] = {}
    calls: dict[str, Call] = {}
    with torch.no_grad():
        ref = module(x)
        # No dynamo reset between systems: it would drop the ones compiled before (each
        # compiled frame is guarded on its backend, so they coexist).
        for system in args.systems.split(","):
            try:
                calls[system] = compile_system(system, module, x, args.threads)
                calls[system](x)  # compile (from the warm caches) and warm up
            except Exception as exc:  # one system's failure must not end the others
                found[system] = {"status": "failed", "reason": reason(exc)}
        errors = {s: 0.0 for s in calls}

        def sampler(system: str) -> Callable[[], list[float]]:
            def one() -> list[float]:
                start = time.perf_counter()
                out = calls[system](x)
                spent = (time.perf_counter() - start) * 1e3
                errors[system] = max(errors[system], relative_error(out, ref))
                return [spent]
            return one

        times, failed = timing.time_rounds({s: sampler(s) for s in calls}, args.repeat,
                                           args.settle)
    for system in calls:
        if system in failed:
            found[system] = {"status": "failed", "reason": failed[system]}
        else:
            found[system] = {"status": "ok", "times_ms": times[system],
                             "rel_error": errors[system]}
    return found


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python3 -m polyopt.bench.model.child")
    p.add_argument("task", choices=("compile", "latency"))
    p.add_argument("--model", required=True, choices=tuple(networks.NETWORKS))
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--tiny", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--system", default="polyopt", help="compile: the system")
    p.add_argument("--systems", default="eager", help="latency: the systems, comma-separated")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--settle", type=float, default=0.0)
    p.add_argument("--result", required=True, help="where the JSON goes")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        found = first_result(args) if args.task == "compile" else latencies(args)
        found = {"status": "ok"} | found
    except Exception as exc:  # reported as the system's failure by the parent
        found = {"status": "failed", "reason": reason(exc)}
    Path(args.result).write_text(json.dumps(found) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
