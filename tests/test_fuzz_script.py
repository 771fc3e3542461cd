"""scripts/dev/fuzz_schedules.py: a short seeded campaign writes its counts and no failures."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.cc


def test_short_campaign_counts_every_pair(tmp_path: Path) -> None:
    out = tmp_path / "fuzz.json"
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "dev" / "fuzz_schedules.py"),
                          "--pairs", "12", "--per-program", "3", "--seed", "7", "--jobs", "1",
                          "--families", "contraction,multi", "--out", str(out),
                          "--progress", str(tmp_path / "log")],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    data = json.loads(out.read_text())
    assert data["pairs_tried"] == 12
    assert data["refused"] + data["accepted"] + data["crash"] == 12
    assert data["wrong"] == data["crash"] == 0 and data["failures"] == []
    assert set(data["by_family"]) <= {"contraction", "multi"}
    assert data["command"].startswith("python3 scripts/dev/fuzz_schedules.py --pairs 12")
