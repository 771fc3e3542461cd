"""``polyopt bench latency``, ``memory``, ``compile-time`` and ``formulations`` (each
measures processes) and ``einsum-paths`` on tiny settings: their tables and option errors.
The figures are theirs to measure, never a test's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from polyopt import cli


@pytest.mark.cc
def test_latency_writes_every_row(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "latency.json"
    assert cli.main(["bench", "latency", "--repeat", "1", "--cold-repeat", "1", "--batch", "5",
                     "--rounds", "1", "--json", str(out)]) == 0
    figures = json.loads(out.read_text())["this checkout"]
    for key in ("import", "einsum cold", "kernel warm", "kernel", "np.einsum"):
        assert figures[key] > 0, key
    assert "| call: mm 16x16x16 kernel |" in capsys.readouterr().out


@pytest.mark.cc
def test_memory_prints_a_line_per_interval(capsys: pytest.CaptureFixture[str],
                                           monkeypatch: pytest.MonkeyPatch,
                                           tmp_path: Path) -> None:
    monkeypatch.setenv("POLYOPT_CACHE_DIR", str(tmp_path))
    assert cli.main(["bench", "memory", "--cases", "parametric", "--calls", "20",
                     "--every", "10"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("parametric:")
    assert len(lines) == 11  # a line every 2 calls: at most a tenth of --calls


def test_memory_names_an_unknown_case(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["bench", "memory", "--cases", "nope"]) == 2
    assert "unknown --cases nope" in capsys.readouterr().err


@pytest.mark.cc
def test_compile_time_runs_each_case_in_a_child(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["bench", "compile-time", "--cases", "einsum7,bcast"]) == 0
    rows = capsys.readouterr().out.splitlines()[1:]
    assert [r.split()[0] for r in rows] == ["einsum7", "bcast"]
    assert all(r.endswith(" ok") for r in rows), rows


def test_compile_time_names_an_unknown_case(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["bench", "compile-time", "--cases", "einsum7,nope"]) == 2
    assert "unknown --cases nope" in capsys.readouterr().err


@pytest.mark.cc
def test_formulations_times_every_variant_in_a_child(capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     tmp_path: Path) -> None:
    monkeypatch.setenv("POLYOPT_CACHE_DIR", str(tmp_path))
    assert cli.main(["bench", "formulations", "--quick", "--names", "jacobi_1d",
                     "--reps", "1"]) == 0
    rows = capsys.readouterr().out.splitlines()[2:]
    assert [r.split(" | ")[2] for r in rows] == [
        "input", "previous", "staged", "piecewise", "program-order", "numpy"]
    assert not [r for r in rows if "error" in r], rows


@pytest.mark.cc
def test_einsum_paths_checks_each_expression(capsys: pytest.CaptureFixture[str],
                                             monkeypatch: pytest.MonkeyPatch,
                                             tmp_path: Path) -> None:
    monkeypatch.setenv("POLYOPT_CACHE_DIR", str(tmp_path))
    assert cli.main(["bench", "einsum-paths", "--only", "ij,jk,kl->il", "--rounds", "1",
                     "--budget", "0.001", "--breakdown"]) == 0
    out = capsys.readouterr().out
    assert "ij,jk,kl->il" in out and "WRONG RESULT" not in out
    assert "geomean polyopt / numpy optimize=True:" in out
