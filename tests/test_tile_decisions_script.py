"""scripts/checks/bench_tile_decisions.py: the quick run prints a row per nest with the pipeline's
choice, the model's and both times."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.cc


@pytest.mark.parametrize("decision", ["register", "layout", "candidates"])
def test_quick_run_prints_each_nest(decision: str) -> None:
    checks = ROOT / "scripts" / "checks"
    run = subprocess.run([sys.executable, str(checks / "bench_tile_decisions.py"),
                          "--quick", "--decision", decision],
                         capture_output=True, text=True, timeout=600, cwd=checks)
    assert run.returncode == 0, run.stdout + run.stderr
    rows = [line for line in run.stdout.splitlines() if line.startswith("| ") and "ms" not in
            line and not line.startswith("|---")]
    assert len(rows) == 2, run.stdout
    for line in rows:
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert cells[1] in ("on", "off", "other") and cells[2].split(":")[0] in ("on", "off")
        assert float(cells[3]) > 0 and float(cells[4]) > 0 and cells[5] in ("yes", "no")
