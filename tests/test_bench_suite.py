"""``polyopt bench suite``: the operator list, a --quick run of two families, its option errors,
and ``polyopt bench ops``' operator list."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from polyopt import cli
from polyopt.bench import operators, suite_cases

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.cc


def test_full_list_covers_every_family() -> None:
    cases = suite_cases.all_cases(quick=False)
    assert len(cases) >= 30
    assert len({c.op for c in cases}) == len(cases)
    assert {c.family for c in cases} == set(suite_cases.FAMILIES)
    quick = suite_cases.all_cases(quick=True)
    assert [c.op for c in quick] == [c.op for c in cases]
    for c in cases:
        assert c.flops or c.nbytes, c.op
        assert c.text is not None or c.kernel in ("matmul", "matmul_nt", "batch_matmul",
                                                  "matvec", "softmax", "layernorm"), c.op


def test_quick_run_writes_table_and_json(tmp_path: Path) -> None:
    out = tmp_path / "suite.json"
    env = {**os.environ, "POLYOPT_CACHE_DIR": str(tmp_path / "cache"), "TMPDIR": str(tmp_path)}
    run = subprocess.run([sys.executable, "-m", "polyopt.bench.suite", "--quick", "--repeat", "1",
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


def test_ops_cases_are_the_named_operators() -> None:
    for quick in (False, True):
        assert {c.op for c in operators.all_cases(quick)} == set(operators.OPS)


@pytest.mark.parametrize(("argv", "message"), [
    (["suite", "--ops", "no_such_op"], "unknown --ops no_such_op"),
    (["suite", "--families", "nope"], "unknown --families nope"),
    (["suite", "--quick", "--update"], "drop --quick"),
    (["ops", "--ops", "matmul,nope"], "unknown --ops nope"),
    (["ops", "--repeat", "0"], "--repeat must be at least 1"),
])
def test_option_mistakes_exit_2_and_say_why(argv: list[str], message: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["bench", *argv]) == 2
    assert message in capsys.readouterr().err


def test_suite_list_through_the_cli(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["bench", "suite", "--list", "--families", "transpose"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines and all(line.startswith("transpose") for line in lines)
