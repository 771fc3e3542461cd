"""A roofline chart of one kernel's stats (log-log: the memory and compute ceilings of the
machine model, the kernel's attainable point and, when timed, its measured one), drawn
with matplotlib when it is installed (an optional package: MissingToolError otherwise)."""

from __future__ import annotations

import os
from typing import Any

from polyopt.errors import MissingToolError, OptionError
from polyopt.views.stats import Stats

PLOT_FORMATS = (".png", ".svg", ".pdf")


def plot_roofline(stats: Stats, path: str) -> None:
    """Draw ``stats`` against its roofline into ``path`` (.png, .svg or .pdf)."""
    ext = os.path.splitext(path)[1].lower()
    if ext not in PLOT_FORMATS:
        raise OptionError(f"roofline plot {path!r}: the file name must end in one of "
                          f"{', '.join(PLOT_FORMATS)}")
    roof, intensity = stats.roofline, stats.intensity
    if roof is None or intensity is None:
        raise OptionError(f"def '{stats.name}': a roofline needs every size known (--sizes) "
                          f"and a C target; {'; '.join(stats.notes) or 'no intensity'}")
    fig = _figure()
    ax = fig.subplots()
    low = min(intensity, roof.ridge) / 16
    high = max(intensity, roof.ridge) * 16
    xs = [low, roof.ridge, high]
    ax.plot(xs, [roof.attainable(x) for x in xs], color="black", lw=1.5)
    ax.annotate(f"{roof.bandwidth_gbs:.3g} GB/s", (low, roof.attainable(low)),
                textcoords="offset points", xytext=(4, 6), fontsize=8)
    ax.annotate(f"peak {roof.peak_gflops:.4g} GFLOP/s", (roof.ridge, roof.peak_gflops),
                textcoords="offset points", xytext=(4, 6), fontsize=8)
    ax.plot([intensity], [roof.attainable(intensity)], "o", mfc="none", mec="tab:blue",
            label=f"{stats.name}: attainable")
    achieved = stats.achieved_gflops
    if achieved is not None:
        share = f" ({100 * stats.fraction:.1f}%)" if stats.fraction is not None else ""
        ax.plot([intensity], [achieved], "o", color="tab:red",
                label=f"{stats.name}: measured{share}")
    _finish(ax, stats)
    fig.tight_layout()
    fig.savefig(path)


def _finish(ax: Any, stats: Stats) -> None:
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (flop / byte of compulsory DRAM traffic)")
    ax.set_ylabel("GFLOP/s")
    sizes = ", ".join(f"{k}={v}" for k, v in stats.sizes)
    ax.set_title(f"roofline: {stats.name}" + (f" ({sizes})" if sizes else ""), fontsize=10)
    ax.grid(True, which="both", lw=0.3)
    ax.legend(fontsize=8, loc="lower right")


def _figure() -> Any:
    """A matplotlib Figure (an optional dependency), without pyplot: no global backend is
    chosen for the caller's process."""
    try:
        from matplotlib.figure import Figure
    except ImportError as e:
        raise MissingToolError(f"--plot needs the matplotlib package (pip install "
                               f"matplotlib): {e}") from e
    return Figure(figsize=(6.4, 4.4))
