"""scripts/bench_suite.py: the operator list, and a --quick run of two families."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "bench_suite.py"

pytestmark = pytest.mark.cc


@pytest.fixture(scope="module")
def suite() -> object:
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import bench_suite
    finally:
        sys.path.remove(str(SCRIPT.parent))
    return bench_suite


def test_full_list_covers_every_family(suite: object) -> None:
    cases = suite.all_cases(quick=False)  # type: ignore[attr-defined]
    assert len(cases) >= 30
    assert len({c.op for c in cases}) == len(cases)
    assert {c.family for c in cases} == set(suite.FAMILIES)  # type: ignore[attr-defined]
    quick = suite.all_cases(quick=True)  # type: ignore[attr-defined]
    assert [c.op for c in quick] == [c.op for c in cases]
    for c in cases:
        assert c.flops or c.nbytes, c.op
        assert c.text is not None or c.kernel in ("matmul", "matmul_nt", "batch_matmul",
                                                  "matvec", "softmax", "layernorm"), c.op


def test_quick_run_writes_table_and_json(tmp_path: Path) -> None:
    out = tmp_path / "suite.json"
    env = {**os.environ, "POLYOPT_CACHE_DIR": str(tmp_path / "cache"), "TMPDIR": str(tmp_path)}
    run = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--repeat", "1",
                          "--families", "reduction,transpose", "--json", str(out)],
                         capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
    assert run.returncode == 0, run.stdout + run.stderr
    data = json.loads(out.read_text())
    records = data["operators"]
    assert {r["family"] for r in records} == {"reduction", "transpose"}
    assert len(records) >= 8
    for r in records:
        assert r["status"] == "OK", r
        assert r["seconds"]["polyopt"] > 0 and r["seconds"]["numpy"] > 0
        assert r["best_peer"] == "numpy" or r["best_peer"] in ("torch", "tvm")
        assert r["ratio_vs_best_peer"] > 0 and r["compile_s"] is not None
    assert set(data["summary"]["per_family"]) == {"reduction", "transpose"}
    assert data["summary"]["failed"] == []
    lines = run.stdout.splitlines()
    header = next(line for line in lines if line.startswith("| operator | family |"))
    assert "speed vs best peer" in header and "compile s" in header and "status" in header
    rows = [line for line in lines if line.startswith("| ") and line.endswith(" OK |")]
    assert len(rows) == len(records)
    assert any(line.startswith("| **all** |") for line in lines)
    assert any(line.startswith("Worst operators: ") for line in lines)
