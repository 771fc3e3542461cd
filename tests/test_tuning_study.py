"""scripts/studies/tuning_study.py --quick: every strategy's history and budgets in the JSON, the
search-quality metrics, the Markdown table, the plot, and a MetaSchedule crash recorded as
a failure (a stand-in TVM whose import segfaults the child), never estimated."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "studies" / "tuning_study.py"

# One kernel: the study's machinery is the same for every kernel, and each costs CI ~45 s
# (the conv paths of the tuner are tested in tests/tuning).
KERNELS = ("matmul",)

CRASHING_TVM = """\
import os, resource, signal
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
os.kill(os.getpid(), signal.SIGSEGV)
"""


@pytest.fixture(scope="module")
def quick(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, str, Path]:
    tmp = tmp_path_factory.mktemp("study")
    (tmp / "fake" / "tvm").mkdir(parents=True)
    (tmp / "fake" / "tvm" / "__init__.py").write_text(CRASHING_TVM)
    path = os.pathsep.join(filter(None, [str(tmp / "fake"), os.environ.get("PYTHONPATH")]))
    out = tmp / "out"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--kernels", ",".join(KERNELS),
         "--strategies", "random,model,metaschedule", "--out", str(out)],
        capture_output=True, text=True, cwd=ROOT, timeout=600, check=False,
        env={**os.environ, "PYTHONPATH": path})
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    return json.loads((out / "tuning_study.json").read_text()), proc.stdout, out


@pytest.mark.cc
def test_every_run_has_its_trials_and_budget_points(quick: tuple[dict, str, Path]) -> None:
    study, _, _ = quick
    assert study["settings"]["budgets"] == [4, 8]
    assert [k["name"] for k in study["kernels"]] == list(KERNELS)
    runs = {(r["kernel"], r["strategy"]): r for r in study["runs"]}
    assert set(runs) == {(k, s) for k in KERNELS
                         for s in ("random", "model", "metaschedule")}
    for kernel in KERNELS:
        for strategy in ("random", "model"):
            run = runs[kernel, strategy]
            assert not run["failed"] and len(run["history"]) == 8
            elapsed = [h["elapsed_s"] for h in run["history"]]
            assert elapsed == sorted(elapsed) and elapsed[0] > 0
            points = {p["trials"]: p for p in run["points"]}
            assert sorted(points) == [4, 8]
            assert points[8]["best_ms"] <= points[4]["best_ms"]
            assert points[4]["best_ms"] == min(h["ms"] for h in run["history"][:4])
            # the clock runs from before the child process to its end, confirmation included
            assert points[8]["wall_s"] == run["end_s"] > elapsed[-1] > elapsed[0]
        same = study["same_process"][kernel]
        peers = {"torch"} if importlib.util.find_spec("torch") else set()  # torch: optional
        assert {"default", "random", "model", *peers} <= set(same["ms"])
        assert not same["wrong"]
    assert "numpy" in study["same_process"]["matmul"]["ms"]


@pytest.mark.cc
def test_metaschedule_crash_is_recorded_not_estimated(quick: tuple[dict, str, Path]) -> None:
    study, stdout, _ = quick
    for kernel in KERNELS:
        run = next(r for r in study["runs"]
                   if r["kernel"] == kernel and r["strategy"] == "metaschedule")
        assert run["failed"].startswith("failed: SIGSEGV") and "(after 0 trials)" in run["failed"]
        assert run["points"] == [] and run["history"] == []
    assert "| matmul | metaschedule | failed: SIGSEGV" in stdout


@pytest.mark.cc
def test_search_quality_metrics_table_and_plot(quick: tuple[dict, str, Path]) -> None:
    study, stdout, out = quick
    early = study["metrics"]["early_fraction"]
    assert (early["early"], early["full"]) == (4, 8)
    for strategy in ("random", "model"):
        fraction = early["strategies"][strategy]["median"]
        assert 0 < fraction <= 1
    seeding = study["metrics"]["seeding"]
    assert seeding["size"] == 80 and seeding["trials"] == 8 and seeding["seeds"] >= 1
    assert 0 < seeding["fraction"] <= 1
    assert "| kernel | strategy | best ms @4 | best ms @8 | wall s @4 |" in stdout
    assert (out / "tuning_study.md").read_text().strip() in stdout
    if importlib.util.find_spec("matplotlib") is None:
        pytest.skip("matplotlib is not installed")
    png = out / "tuning_study.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.cc
def test_retime_measures_a_saved_study_again(quick: tuple[dict, str, Path],
                                             tmp_path: Path) -> None:
    _, _, out = quick
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--retime", str(out / "tuning_study.json"),
         "--rounds", "2", "--pause", "0.1", "--out", str(tmp_path)],
        capture_output=True, text=True, cwd=ROOT, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    again = json.loads((tmp_path / "tuning_study.json").read_text())
    assert again["retimed"]["rounds"] == 2 and again["retimed"]["pause_s"] == 0.1
    assert {"default", "random", "model"} <= set(again["same_process"][KERNELS[-1]]["ms"])
    assert "Measured again with `--retime`" in proc.stdout
