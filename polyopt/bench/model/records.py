"""What ``polyopt bench model`` finds and writes: one record per model, batch and system,
the Markdown table, and the CSV, JSON and PNG files (in ``bench conv``'s shape)."""

from __future__ import annotations

import csv
import datetime
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from polyopt.bench.conv import report
from polyopt.bench.markdown import fmt

__all__ = ["FIELDS", "TOLERANCE", "ModelRecord", "add_speedups", "plot", "table", "write_csv",
           "write_json"]

# The target: float32 outputs within this relative L2 error of eager.
TOLERANCE = 1e-4
COLORS = {"eager": "#7f7f7f", "inductor": "#1f77b4", "polyopt": "#d62728",
          "onnxruntime": "#2ca02c"}


@dataclass
class ModelRecord:
    """One system on one model at one batch size."""

    model: str
    batch: int
    system: str
    status: str = "ok"  # ok, failed or skipped
    reason: str = ""
    compile_s: float | None = None  # cold: first call after a reset, empty caches
    warm_s: float | None = None  # a second process, same caches: compile to first result
    median_ms: float | None = None
    min_ms: float | None = None
    max_ms: float | None = None
    calls: int = 0  # timed calls behind the median
    rel_error: float | None = None  # max relative L2 error against eager over the calls
    speedup: float | None = None  # the baseline's median / this median; > 1 is faster
    partitions: int | None = None  # polyopt: partitions over every graph
    torch_ops: int | None = None  # polyopt: ATen ops left in torch
    fallback_ops: str = ""  # polyopt: which ATen ops those are

    @property
    def matched(self) -> bool:
        return self.rel_error is not None and self.rel_error <= TOLERANCE

    @property
    def usable(self) -> bool:
        """Timed and correct: only such records get a speed-up."""
        return self.status == "ok" and self.median_ms is not None and self.matched

    def fail(self, status: str, reason: str) -> None:
        """Mark failed or skipped, keeping the first reason."""
        if self.status == "ok":
            self.status, self.reason = status, reason


FIELDS = tuple(f.name for f in fields(ModelRecord))


def add_speedups(records: Sequence[ModelRecord], baseline: str) -> None:
    """Fill ``speedup`` in place against the baseline's median at the same model and batch."""
    base = {(r.model, r.batch): r.median_ms for r in records
            if r.system == baseline and r.usable}
    for r in records:
        ref = base.get((r.model, r.batch))
        r.speedup = ref / r.median_ms if r.usable and ref and r.median_ms else None


# ------------------------------------------------------------------ table
def _seconds(value: float | None) -> str:
    return "-" if value is None else fmt(value)


def _latency(rec: ModelRecord) -> str:
    if rec.status != "ok" or rec.median_ms is None:
        return rec.status
    text = fmt(rec.median_ms)
    return text + (f" ({rec.speedup:.2f}x)" if rec.speedup is not None else "")


def _error(rec: ModelRecord) -> str:
    if rec.rel_error is None or rec.system == "eager":
        return "-"
    return f"{rec.rel_error:.1e}" + ("" if rec.matched else " WRONG")


def _plan(rec: ModelRecord) -> str:
    if rec.partitions is None:
        return "-"
    return f"{rec.partitions} / {rec.torch_ops}"


def table(records: Sequence[ModelRecord], baseline: str) -> str:
    """A Markdown table, one row per model, batch and system, then each failure's reason."""
    head = ["model", "batch", "system", "cold compile s", "warm start s",
            f"median ms (vs {baseline})", "max rel. error", "partitions / torch ops"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in records:
        row = [r.model, str(r.batch), r.system, _seconds(r.compile_s), _seconds(r.warm_s),
               _latency(r), _error(r), _plan(r)]
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", f"Median of single calls in ms, the systems interleaved round-robin; (Nx) "
              f"= {baseline}'s median / this one's. Max relative L2 error against eager over "
              f"every timed call; WRONG: above {TOLERANCE:g}. Cold compile: the first call "
              "after a reset with empty caches; warm start: a second process with the same "
              "caches, from compile to its first result."]
    reasons: dict[str, list[str]] = {}
    for r in records:
        if r.reason:
            reasons.setdefault(f"{r.system} {r.status}: {r.reason}", []).append(
                f"{r.model}/{r.batch}")
        if r.fallback_ops:
            reasons.setdefault(f"{r.system} left in torch: {r.fallback_ops}", []).append(
                f"{r.model}/{r.batch}")
    lines += [f"{why} ({', '.join(where)})" for why, where in reasons.items()]
    return "\n".join(lines)


# ------------------------------------------------------------------ files
def write_csv(path: Path, records: Sequence[ModelRecord]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(asdict(r) for r in records)


def write_json(path: Path, records: Sequence[ModelRecord], settings: dict[str, Any]) -> None:
    """The records with the settings, the machine, versions and thread variables."""
    path.parent.mkdir(parents=True, exist_ok=True)
    document = {"command": settings.get("command", ""),
                "date": datetime.datetime.now().isoformat(timespec="seconds"),
                "settings": settings, **report.environment(settings.get("usable_cpus")),
                "records": [asdict(r) for r in records]}
    path.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")


def plot(path: Path, records: Sequence[ModelRecord], baseline: str, title: str
         ) -> str | None:
    """Bars per model and batch, one per system: speed relative to the baseline. Returns why
    no PNG was written, or None."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        return f"matplotlib is not installed ({exc})"
    groups = list(dict.fromkeys((r.model, r.batch) for r in records))
    systems = [s for s in dict.fromkeys(r.system for r in records)
               if any(r.system == s and r.speedup is not None for r in records)]
    if not systems:
        return f"no system has a speed-up against {baseline} to plot"
    by = {(r.model, r.batch, r.system): r for r in records}
    fig = Figure(figsize=(max(5.0, 1.2 * len(groups) + 2), 3.6), dpi=100)
    FigureCanvasAgg(fig)  # Agg, without pyplot's global state
    ax = fig.add_subplot()
    width = 0.8 / len(systems)
    for i, system in enumerate(systems):
        bars = [(j, speedup) for j, (m, b) in enumerate(groups)
                if (speedup := getattr(by.get((m, b, system)), "speedup", None)) is not None]
        ax.bar([j + (i - (len(systems) - 1) / 2) * width for j, _ in bars],
               [height for _, height in bars], width, color=COLORS.get(system, f"C{i}"),
               edgecolor="black", linewidth=0.4, label=system)
    ax.axhline(1.0, color="black", linewidth=1.0, linestyle="--")
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([f"{m}\nbatch {b}" for m, b in groups], fontsize=8)
    ax.set_ylabel(f"speed relative to {baseline}\n(higher is faster)", fontsize=8)
    ax.legend(fontsize=7)
    ax.set_title(title, fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    return None
