"""``polyopt bench gpu`` where there is no GPU: its options, its compile-only run without
nvcc, the numpy reference it falls back on, and its table and JSON rows from given timings.
(tests/test_gpu_scripts.py runs it as a child: without PyCUDA, with nvcc, on a GPU.)"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from polyopt import cli
from polyopt.bench import gpu
from polyopt.bench.gpu import cases as gpu_cases
from polyopt.bench.gpu import records as gpu_records
from polyopt.bench.gpu.device import Timing
from polyopt.runtime import nvcc


def test_help_names_every_option(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["bench", "gpu", "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    for option in ("--quick", "--repeat", "--warmup", "--json", "--md", "--compile-only"):
        assert option in out


@pytest.mark.parametrize("words", [["--repeat", "0"], ["--warmup", "-1"]])
def test_bad_counts_are_an_error(words: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["bench", "gpu", *words]) == 2
    assert "--repeat must be at least 1" in capsys.readouterr().err


def test_compile_only_without_nvcc_fails_each_case(capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nvcc, "nvcc_path", lambda: None)
    assert gpu.main(["--quick", "--compile-only"]) == 1
    rows = [r for r in capsys.readouterr().out.splitlines() if r.startswith("| ")][1:]
    assert len(rows) == 7 and all("ERROR: CompileError: nvcc was not found" in r for r in rows)


def test_importing_the_suite_loads_neither_pycuda_nor_torch() -> None:
    code = ("import sys, polyopt.cli, polyopt.bench.gpu; "
            "print(' '.join(m for m in sys.modules if m.split('.')[0] in ('pycuda', 'torch')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == ""


@pytest.mark.parametrize("case", [gpu_cases.conv_case(3, 4, 9, 3, 2, 1),
                                  gpu_cases.conv_case(4, 4, 7, 3, 1, 1, depthwise=True)],
                         ids=["conv", "depthwise"])
def test_numpy_reference_is_a_direct_convolution(case: gpu_cases.Case) -> None:
    rng = np.random.default_rng(0)
    x, w = (rng.standard_normal(s) for s in case.inputs)
    ref, rows = gpu_cases.numpy_reference(case, [x, w])
    assert rows is None and ref.shape == case.output
    xp = np.pad(x, ((0, 0), (0, 0), (case.pad, case.pad), (case.pad, case.pad)))
    k, s = w.shape[2], case.stride
    for f, i, j in [(0, 0, 0), (case.output[1] - 1, case.output[2] - 1, 1)]:
        patch = xp[0, :, i * s:i * s + k, j * s:j * s + k]
        want = (patch[f] * w[f, 0]).sum() if case.op == "depthwise" else (patch * w[f]).sum()
        assert math.isclose(ref[0, f, i, j], want, rel_tol=1e-12)


def test_a_large_matmul_is_checked_on_its_first_rows() -> None:
    case = gpu_cases.matmul_case(300, 5, 4)
    a, b = np.ones((300, 4), np.float32), np.ones((4, 5), np.float32)
    ref, rows = gpu_cases.numpy_reference(case, [a, b])
    assert rows == gpu_cases.SAMPLED_ROWS and ref.shape == (rows, 5)


def test_rows_give_the_table_and_the_json(tmp_path: Path) -> None:
    case = gpu_cases.matmul_case(100, 70, 30)
    fast = gpu_records.Row(case, Timing(0.5, 0.4, 0.6), Timing(1.0, 0.9, 1.1), True, 1e-7,
                           "torch")
    poisoned = gpu_records.Row(case, Timing(0.5, 0.4, 0.6), None, False, math.inf, "numpy")
    failed = gpu_records.Row(case, error="CompileError: no")
    lines = gpu_records.table_lines([fast, poisoned, failed])
    assert lines[0].startswith("| op | shape | polyopt ms |")
    assert lines[2].endswith("| 2 | yes (1.0e-07 vs torch) |")
    assert "WRONG (inf vs numpy)" in lines[3] and lines[4].endswith("| ERROR |")
    args = argparse.Namespace(quick=True, repeat=3, warmup=1, json=str(tmp_path / "r.json"),
                              md=str(tmp_path / "r.md"))
    env = {"device": "test", "arch": "sm_90", "memory_gib": 1.0, "driver_cuda": "12.4",
           "pycuda_built_for_cuda": "12.4", "nvcc": "none", "torch": "none",
           "versions": {"polyopt": "0"}}
    gpu_records.write_outputs(args, env, [fast, poisoned])
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["command"][:6] == ["polyopt", "bench", "gpu", "--quick", "--repeat", "3"]
    assert data["rows"][0]["speed_vs_torch"] == 2.0 and data["rows"][1]["rel_error"] == "inf"
    assert "| op | shape | polyopt ms |" in (tmp_path / "r.md").read_text()
