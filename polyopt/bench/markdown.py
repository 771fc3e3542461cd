"""The BENCHMARKS.md machinery the suites share: a number's format, the environment bullets
(machine, versions, threads), a section's text with the command that made it, and the rewrite
of one section (``--update``)."""

from __future__ import annotations

import contextlib
import datetime
import importlib.metadata
import os
import platform
import shlex
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from polyopt.version import __version__


def given_options(benchmark: str) -> list[str]:
    """This process's options after ``bench <benchmark>`` (all of them when run otherwise)."""
    argv = sys.argv[1:]
    for i in range(len(argv) - 1):
        if argv[i:i + 2] == ["bench", benchmark]:
            return argv[i + 2:]
    return argv


def benchmarks_file() -> Path:
    """The checkout's BENCHMARKS.md (``--update`` rewrites it), else ./BENCHMARKS.md."""
    checkout = Path(__file__).resolve().parents[2] / "BENCHMARKS.md"
    return checkout if checkout.exists() else Path.cwd() / "BENCHMARKS.md"


def fmt(value: float) -> str:
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}" if value >= 0.1 else f"{value:.2g}"



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


def environment_lines(torch: Any | None) -> list[str]:
    """Machine, versions and thread settings, one bullet each."""
    env = {k: os.environ.get(k, "unset") for k in
           ("OMP_NUM_THREADS", "OMP_PROC_BIND", "OPENBLAS_NUM_THREADS", "TVM_NUM_THREADS",
            "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    threads = ", ".join(f"{k}={v}" for k, v in env.items())
    torch_threads = f"torch threads {torch.get_num_threads()}" if torch else "no torch"
    return [f"- Machine: {cpu_model()}, {os.cpu_count()} cores ({platform.machine()})",
            f"- Versions: python {platform.python_version()}, numpy {np.__version__} "
            f"({blas_name()}), torch {dist_version('torch')}, tvm {dist_version('apache-tvm')}, "
            f"polyopt {__version__}; {first_line(['gcc', '--version'])}",
            f"- Threads: {threads}; {torch_threads}; polyopt's OpenMP, numpy's BLAS and TVM at "
            "their defaults"]


def section_text(argv: Sequence[str], env_lines: Sequence[str], table: Sequence[str], *,
                 heading: str, prefix: str, notes: str) -> str:
    command = " ".join([prefix, shlex.join(argv)]).strip()
    return "\n".join([f"{heading} ({datetime.date.today().isoformat()})", "",
                      f"Command: `{command}`", "", *env_lines, "", notes, "", *table, ""])


def replace_section(text: str, section: str, heading: str) -> str:
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


def update_section(section: str, heading: str) -> Path:
    """Rewrite the ``heading`` section of BENCHMARKS.md with ``section``; the file's path."""
    path = benchmarks_file()
    path.write_text(replace_section(path.read_text(), section, heading))
    return path
