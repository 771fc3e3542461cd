"""The GPU run (scripts/gpu_check.sh, dev/fetch_gpu_deps.sh, ``polyopt bench gpu``) checked
where there is no GPU: the shell parses, the benchmark's options and its exit without PyCUDA,
and every benchmark case compiled with nvcc. On a GPU machine, the quick benchmark itself.
The benchmark runs as a child (``python -m polyopt.cli``): a stand-in pycuda must come first
on its path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "scripts"
BENCH = ("-m", "polyopt.cli", "bench", "gpu")


def _bench(*args: str, env: dict[str, str] | None = None,
           timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *BENCH, *args], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=timeout, check=False)


@pytest.mark.parametrize("script", ["gpu_check.sh", "dev/fetch_gpu_deps.sh"])
def test_shell_script_parses(script: str) -> None:
    proc = subprocess.run(["bash", "-n", str(SCRIPTS / script)], capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 0, proc.stderr


def test_bench_help_lists_the_options() -> None:
    proc = _bench("--help")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: polyopt bench gpu")
    for option in ("--quick", "--repeat", "--warmup", "--json", "--md", "--compile-only"):
        assert option in proc.stdout


def test_bench_without_pycuda_exits_2_and_says_why(tmp_path: Path) -> None:
    # A pycuda package that fails to import stands in for a machine without it, so the test
    # means the same on a GPU machine.
    fake = tmp_path / "pycuda"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('no PyCUDA in this test')\n")
    path = os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))
    json_path = tmp_path / "out.json"
    proc = _bench("--quick", "--json", str(json_path), env={**os.environ, "PYTHONPATH": path})
    assert proc.returncode == 2
    assert "polyopt bench gpu: needs PyCUDA and an NVIDIA GPU" in proc.stderr
    assert "no PyCUDA in this test" in proc.stderr
    assert not json_path.exists()  # nothing is written, nothing estimated


@pytest.mark.cuda
def test_bench_cases_all_compile_with_nvcc() -> None:
    proc = _bench("--quick", "--compile-only")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| ")][1:]
    assert len(rows) == 7 and not any("ERROR" in row for row in rows)
    assert all("_k1 (" in row for row in rows)  # every case has its compute kernel
    # The same cases as before the move to polyopt bench gpu, in the same order.
    assert [row.split(" | ")[1] for row in rows] == [
        "256x256x256 (MxNxK)", "100x70x30 (MxNxK)", "3x3 8->8 14x14 p1", "1x1 16->8 14x14",
        "3x3 8->8 7x7 p1", "7x7 3->8 28x28 s2 p3", "dw 3x3 8ch 14x14 p1"]


@pytest.mark.gpu
def test_quick_bench_runs_and_matches(tmp_path: Path) -> None:
    out_json, out_md = tmp_path / "bench.json", tmp_path / "bench.md"
    proc = _bench("--quick", "--repeat", "3", "--json", str(out_json), "--md", str(out_md),
                  timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads(out_json.read_text())
    assert data["device"] and len(data["rows"]) == 7
    assert data["command"][:4] == ["polyopt", "bench", "gpu", "--quick"]
    for row in data["rows"]:
        assert row["error"] is None and row["matched"] is True, row
        assert row["polyopt"]["min_ms"] <= row["polyopt"]["median_ms"] <= row["polyopt"]["max_ms"]
    assert "| op | shape | polyopt ms |" in out_md.read_text()
