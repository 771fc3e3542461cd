"""What ``polyopt bench conv`` writes: the terminal table, CSV, JSON and the per-layer plot."""

from __future__ import annotations

import contextlib
import csv
import datetime
import importlib.metadata
import json
import os
import platform
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from polyopt import host
from polyopt.bench.conv.records import FIELDS, TOLERANCE, Record, Settings, Total
from polyopt.costmodel import machine
from polyopt.version import __version__

__all__ = ["environment", "plot", "table", "write_all"]

HATCHES = {"depthwise": "///", "pointwise": "...", "grouped": "xx", "regular": ""}
COLORS = {"polyopt": "#d62728", "numpy": "#1f77b4", "torch": "#ff7f0e", "tvm": "#2ca02c"}


# ------------------------------------------------------------------ terminal table
def _cell(rec: Record | None) -> str:
    if rec is None:
        return "-"
    if rec.status != "ok" or rec.median_ms is None:
        return rec.status
    text = f"{rec.median_ms:.3f}"
    if not rec.matched:
        return text + " WRONG"
    return text + (f" ({rec.speedup:.2f}x)" if rec.speedup is not None else "")


def table(records: Sequence[Record], summary: Sequence[Total], systems: Sequence[str],
          baseline: str, baseline_note: str = "") -> str:
    """A Markdown table: one row per layer, median ms (speed-up vs the baseline) per system;
    ``baseline_note`` says why the baseline is not the one asked for."""
    by = {(r.layer, r.system): r for r in records}
    layers = list(dict.fromkeys(r.layer for r in records))
    head = ["#", "layer", "kind", "count", "shape", "GFLOP", *[f"{s} ms" for s in systems]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for n in layers:
        first = by[n, systems[0]]
        row = [str(n), first.name, first.kind, str(first.count), first.shape,
               f"{first.gflop:.3f}", *[_cell(by.get((n, s))) for s in systems]]
        lines.append("| " + " | ".join(row) + " |")
    totals = {t.system: t for t in summary}
    lines.append("| | total, count-weighted (ms) | | | | | " + " | ".join(
        "-" if totals[s].weighted_ms is None else
        f"{totals[s].weighted_ms:.2f} ({totals[s].layers} layers)" for s in systems) + " |")
    lines.append(f"| | speed-up vs {baseline}, count-weighted | | | | | " + " | ".join(
        "-" if totals[s].speedup is None else
        f"{totals[s].speedup:.2f}x ({totals[s].common_layers} layers)" for s in systems) + " |")
    return "\n".join(lines + _notes(records, systems, baseline, baseline_note))


def _notes(records: Sequence[Record], systems: Sequence[str], baseline: str,
           baseline_note: str) -> list[str]:
    """What ran for each system, and why cells are skipped, failed or WRONG (each once)."""
    out = ["", "Median of every timed call in ms, over interleaved rounds of all systems; "
           f"(Nx) = {baseline}'s time / this system's "
           f"time. WRONG: relative L2 error against the float64 reference > {TOLERANCE:g}."]
    if baseline_note:
        out.append(f"Baseline: {baseline_note}.")
    for system in systems:
        mine = [r for r in records if r.system == system]
        variants = list(dict.fromkeys(r.variant for r in mine if r.variant))
        if variants:
            out.append(f"{system}: {'; '.join(variants[:2])}"
                       + (f" (+{len(variants) - 2} more)" if len(variants) > 2 else ""))
        reasons: dict[str, list[int]] = {}
        for r in mine:
            if r.reason:
                reasons.setdefault(f"{r.status}: {r.reason}", []).append(r.layer)
        for reason, layers in reasons.items():
            out.append(f"{system} {reason} (layers {', '.join(map(str, layers))})")
    return out


# ------------------------------------------------------------------ files
def write_all(settings: Settings, records: Sequence[Record], summary: Sequence[Total]
              ) -> tuple[list[Path], str | None]:
    """Write CSV, JSON and PNG; return the paths written and why the PNG was not, if not."""
    settings.out.mkdir(parents=True, exist_ok=True)
    stem = settings.out / settings.model
    csv_path, json_path = stem.with_suffix(".csv"), stem.with_suffix(".json")
    with csv_path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(r.as_dict() for r in records)
    document = {
        "model": settings.model, "command": settings.command,
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "settings": {"batch": settings.batch, "target": settings.target,
                     "repeat": settings.repeat, "rounds": settings.rounds,
                     "baseline": settings.baseline,
                     "tvm_trials": settings.tvm_trials, "threads": settings.threads,
                     "settle_s": settings.settle, "scale": settings.scale,
                     "seed": settings.seed, "tolerance": TOLERANCE,
                     "baseline_note": settings.baseline_note},
        **environment(settings.usable_cpus),
        "records": [r.as_dict() for r in records],
        "totals": [t.as_dict() for t in summary]}
    json_path.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    written = [csv_path, json_path]
    title = (f"{settings.model}, batch {settings.batch}, {settings.threads} threads, "
             f"{document['machine']['cpu']}\ncount-weighted speed-up vs {settings.baseline}: "
             + ", ".join(f"{t.system} {t.speedup:.2f}x" for t in summary
                         if t.speedup is not None and t.system != settings.baseline))
    note = plot(stem.with_suffix(".png"), records, settings.baseline, title)
    if note is None:
        written.append(stem.with_suffix(".png"))
    else:  # not an earlier run's chart next to this run's table
        stem.with_suffix(".png").unlink(missing_ok=True)
    return written, note


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _first_line(argv: Sequence[str]) -> str:
    with contextlib.suppress(OSError, subprocess.SubprocessError, IndexError):
        out = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
        return (out.stdout or out.stderr).strip().splitlines()[0]
    return "unavailable"


def environment(usable_cpus: int | None = None) -> dict[str, Any]:
    """The machine, library versions and thread settings, for the JSON file.
    ``usable_cpus``: the caller's CPU count, taken before anything ran (default: now)."""
    usable = usable_cpus
    if usable is None:
        usable = host.usable_cores()
    blas = "unknown"
    with contextlib.suppress(Exception):  # numpy's build info moves between releases
        info = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        blas = f"{info['name']} {info.get('version', '')}".strip()
    return {
        "machine": {"cpu": host.cpu_model(), "cores": os.cpu_count(), "usable_cpus": usable,
                    "arch": platform.machine(), "os": platform.platform(),
                    "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
                    "model": machine.host().spec()},
        "versions": {"python": platform.python_version(), "polyopt": __version__,
                     "numpy": np.__version__, "blas": blas, "torch": _version("torch"),
                     "tvm": _version("apache-tvm"), "islpy": _version("islpy"),
                     "matplotlib": _version("matplotlib"),
                     "cc": _first_line([os.environ.get("CC", "cc"), "--version"])},
        "env": {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "OMP_PROC_BIND",
                                               "TVM_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                               "POLYOPT_MACHINE", "POLYOPT_PROFILE", "CC",
                                               "POLYOPT_CFLAGS")}}


# ------------------------------------------------------------------ plot
def plot(path: Path, records: Sequence[Record], baseline: str, title: str) -> str | None:
    """Grouped bars per layer, one per system, speed relative to the baseline (1.0 = line).

    The style of the survey's per-layer figures; depthwise and pointwise layers are hatched.
    Returns why no PNG was written, or None.
    """
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        return f"matplotlib is not installed ({exc})"
    layers = list(dict.fromkeys(r.layer for r in records))
    # Only systems with a bar: the legend lists what ran against the baseline.
    systems = [s for s in dict.fromkeys(r.system for r in records)
               if s != baseline and any(r.system == s and r.speedup is not None
                                        for r in records)]
    if not systems:
        return f"no system has a speed-up against {baseline} to plot"
    width = min(12.0, max(6.0, 0.12 * len(layers) * max(len(systems), 2) + 2))
    fig = Figure(figsize=(width, 4.0), dpi=100)
    FigureCanvasAgg(fig)  # Agg, without pyplot's global state
    ax = fig.add_subplot()
    heights = _bars(ax, records, layers, systems)
    if heights and (max(heights) > 8 or min(heights) < 1 / 8):
        ax.set_yscale("log")
    _decorate(ax, records, layers, systems, baseline)
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
    return None


def _bars(ax: Any, records: Sequence[Record], layers: Sequence[int], systems: Sequence[str]
          ) -> list[float]:
    """Draw the bars; a skipped, failed or wrong result (or no baseline) has none."""
    by = {(r.layer, r.system): r for r in records}
    width = 0.8 / max(len(systems), 1)
    heights = []
    for i, system in enumerate(systems):
        for j, n in enumerate(layers):
            rec = by.get((n, system))
            if rec is None or rec.speedup is None:
                continue
            heights.append(rec.speedup)
            ax.bar(j + (i - (len(systems) - 1) / 2) * width, rec.speedup, width,
                   color=COLORS.get(system, f"C{i}"), edgecolor="black", linewidth=0.4,
                   hatch=HATCHES.get(rec.kind, ""))
    return heights


def _decorate(ax: Any, records: Sequence[Record], layers: Sequence[int],
              systems: Sequence[str], baseline: str) -> None:
    """The 1.0 line, layer labels with their counts, and a legend of systems and kinds."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    kinds = {r.layer: (r.kind, r.count) for r in records}
    ax.axhline(1.0, color="black", linewidth=1.0, linestyle="--")
    ax.set_xticks(range(len(layers)))
    ax.set_xticklabels([f"{n}\n×{kinds[n][1]}" for n in layers], fontsize=7)
    ax.set_xlim(-0.6, len(layers) - 0.4)
    ax.set_xlabel("layer (× occurrences in the model)", fontsize=8)
    ax.set_ylabel(f"speed relative to {baseline}\n(higher is faster)", fontsize=8)
    ax.tick_params(axis="y", labelsize=7)
    handles: list[Any] = [Patch(facecolor=COLORS.get(s, f"C{i}"), edgecolor="black", label=s)
                          for i, s in enumerate(systems)]
    handles += [Patch(facecolor="white", edgecolor="black", hatch=HATCHES[k], label=k)
                for k in ("pointwise", "depthwise") if any(v[0] == k for v in kinds.values())]
    handles.append(Line2D([0], [0], color="black", linestyle="--", label=f"{baseline} = 1.0"))
    ax.legend(handles=handles, fontsize=7, ncol=len(handles), loc="upper center",
              bbox_to_anchor=(0.5, -0.25), frameon=False)
