"""The GPU suite's results (``polyopt bench gpu``): one row per case, its JSON record, the
Markdown table and header, and the ``--json``/``--md`` files."""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from polyopt.bench.gpu.cases import TOLERANCE, Case
from polyopt.bench.gpu.device import Timing

HEADER = ("op", "shape", "polyopt ms", "polyopt GFLOP/s", "torch ms", "torch GFLOP/s",
          "polyopt/torch speed", "matched")


@dataclass
class Row:
    case: Case
    polyopt: Timing | None = None
    torch: Timing | None = None
    matched: bool | None = None  # None: nothing to compare with
    rel_error: float | None = None
    reference: str = "-"
    compile_s: float | None = None  # polyopt.compile + first call (lowering, nvcc, load)
    kernels: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None  # why polyopt has no time
    torch_error: str | None = None

    def record(self) -> dict[str, Any]:
        """The JSON form: the table's values plus what explains them."""
        case = self.case
        return {"op": case.op, "kernel": case.kernel, "shape": case.shape, "sizes": case.sizes,
                "gflop": case.flops / 1e9,
                "polyopt": asdict(self.polyopt) if self.polyopt else None,
                "polyopt_gflops": gflops(case, self.polyopt),
                "torch": asdict(self.torch) if self.torch else None,
                "torch_gflops": gflops(case, self.torch), "speed_vs_torch": self.speed(),
                "matched": self.matched, "rel_error": finite_or_text(self.rel_error),
                "reference": self.reference, "compile_s": self.compile_s,
                "kernels": self.kernels, "error": self.error, "torch_error": self.torch_error}

    def speed(self) -> float | None:
        """torch's time over polyopt's: > 1 means polyopt is faster."""
        if self.polyopt is None or self.torch is None:
            return None
        return self.torch.median_ms / self.polyopt.median_ms


def finite_or_text(value: float | None) -> float | str | None:
    """JSON has no infinity: a NaN-poisoned result's error is written as "inf"."""
    return value if value is None or math.isfinite(value) else "inf"


def gflops(case: Case, timing: Timing | None) -> float | None:
    return None if timing is None else case.flops / (timing.median_ms * 1e-3) / 1e9


def fmt(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.3g}" if value < 1000 else f"{value:.0f}"


def matched_cell(row: Row) -> str:
    if row.error is not None:
        return "ERROR"
    if row.matched is None:
        return "-"
    word = "yes" if row.matched else "WRONG"
    return f"{word} ({row.rel_error:.1e} vs {row.reference})"


def cells(row: Row) -> list[str]:
    case = row.case
    mine = fmt(row.polyopt.median_ms) if row.polyopt else "ERROR" if row.error else "-"
    theirs = fmt(row.torch.median_ms) if row.torch else "ERROR" if row.torch_error else "-"
    return [case.op, case.shape, mine, fmt(gflops(case, row.polyopt)), theirs,
            fmt(gflops(case, row.torch)), fmt(row.speed()), matched_cell(row)]


def table_lines(rows: Sequence[Row]) -> list[str]:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    return lines + ["| " + " | ".join(cells(row)) + " |" for row in rows]


def header_lines(env: dict[str, Any], args: argparse.Namespace) -> list[str]:
    versions = ", ".join(f"{k} {v}" for k, v in env["versions"].items())
    return [f"- GPU: {env['device']} ({env['arch']}, {env['memory_gib']} GiB), driver CUDA "
            f"{env['driver_cuda']}; PyCUDA built for CUDA {env['pycuda_built_for_cuda']}",
            f"- nvcc: {env['nvcc']}", f"- Peer: {env['torch']}", f"- Versions: {versions}",
            f"- float32; median of {args.repeat} calls after {args.warmup} warm-up calls, "
            "CUDA events around each call (a polyopt call includes its error-flag check and "
            "synchronize); speed ratio = torch ms / polyopt ms (> 1: polyopt faster); "
            f"matched: relative L2 error <= {TOLERANCE:g}"]


def command(args: argparse.Namespace) -> list[str]:
    """The words of the command that made a result file, from its parsed options."""
    words = ["polyopt", "bench", "gpu", *(["--quick"] if args.quick else [])]
    return [*words, "--repeat", str(args.repeat), "--warmup", str(args.warmup),
            *(["--json", args.json] if args.json else []), *(["--md", args.md] if args.md else [])]


def write_outputs(args: argparse.Namespace, env: dict[str, Any], rows: Sequence[Row]) -> None:
    """Rewritten after every case, so a run cut short still leaves the cases it finished."""
    if args.json:
        data = {**env, "command": command(args),
                "settings": {"repeat": args.repeat, "warmup": args.warmup, "quick": args.quick,
                             "tf32": False, "tolerance": TOLERANCE},
                "rows": [row.record() for row in rows]}
        Path(args.json).write_text(json.dumps(data, indent=2) + "\n")
    if args.md:
        text = "\n".join([*header_lines(env, args), "", *table_lines(rows)])
        Path(args.md).write_text(text + "\n")
