"""``polyopt bench model``: its options, the networks it builds, and a quick run end to end."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from polyopt import cli
from polyopt.bench import model
from polyopt.bench.model import records as model_records
from polyopt.bench.model.records import ModelRecord
from polyopt.errors import OptionError


def test_help_lists_the_options(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(["bench", "model", "--help"])
    assert exc.value.code == 0
    text = capsys.readouterr().out
    for option in ("--models", "--batches", "--repeat", "--threads", "--quick", "--json",
                   "--csv", "--png", "--systems"):
        assert option in text


def test_importing_the_cli_loads_no_torch() -> None:
    code = "import sys, polyopt.cli; print(' '.join(sys.modules))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True).stdout.split()
    assert not [m for m in loaded if m.split(".")[0] == "torch" or m.startswith("polyopt.torch")]


@pytest.mark.parametrize("argv", [["--models", "alexnet"], ["--batches", "0"],
                                  ["--batches", "one"], ["--repeat", "0"],
                                  ["--systems", "tvm"], ["--systems", "polyopt"]])
def test_bad_options_are_option_errors(argv: list[str]) -> None:
    parser = cli._parser()
    args = parser.parse_args(["bench", "model", *argv])
    with pytest.raises(OptionError):
        model.settings_from(args)
    assert model.main(argv) == 2  # the message, not a traceback


def test_speedups_and_the_table_say_why_a_cell_is_empty() -> None:
    recs = [ModelRecord("bert", 1, "inductor", median_ms=4.0, rel_error=0.0),
            ModelRecord("bert", 1, "polyopt", median_ms=2.0, rel_error=1e-7, partitions=3,
                        torch_ops=1, fallback_ops="aten.foo.default"),
            ModelRecord("bert", 1, "eager", median_ms=8.0, rel_error=2e-3),
            ModelRecord("bert", 1, "onnxruntime", status="skipped", reason="not installed")]
    model_records.add_speedups(recs, "inductor")
    assert [r.speedup for r in recs] == [1.0, 2.0, None, None]  # eager: wrong, no speed-up
    text = model_records.table(recs, "inductor")
    assert "| bert | 1 | polyopt | - | - | 2.00 (2.00x) | 1.0e-07 | 3 / 1 |" in text
    assert "onnxruntime skipped: not installed (bert/1)" in text
    assert "polyopt left in torch: aten.foo.default (bert/1)" in text


# ------------------------------------------------------------------ with torch
def test_networks_have_torchvisions_sizes() -> None:
    torch = pytest.importorskip("torch")
    networks = pytest.importorskip("polyopt.bench.model.networks")

    def count(m: torch.nn.Module) -> int:
        return sum(p.numel() for p in m.parameters())
    # torchvision's resnet50() and mobilenet_v2() parameter counts
    assert count(networks.resnet50()) == 25_557_032
    assert count(networks.mobilenet_v2()) == 3_504_872
    assert count(networks.bert_encoder()) == 12 * 7_087_872


@pytest.mark.parametrize(("name", "shape"), [("resnet50", (3, 10)), ("mobilenetv2", (3, 10)),
                                             ("bert", (3, 16, 32))])
def test_tiny_networks_output_shapes(name: str, shape: tuple[int, ...]) -> None:
    torch = pytest.importorskip("torch")
    networks = pytest.importorskip("polyopt.bench.model.networks")

    net = networks.build(name, tiny=True)
    assert not net.module.training
    with torch.no_grad():
        assert tuple(net.module(net.example(3)).shape) == shape
    variances = [m.running_var for m in net.module.modules()
                 if isinstance(m, torch.nn.BatchNorm2d)]
    assert all(float((v - 1).abs().max()) > 0.1 for v in variances)  # not the identity


@pytest.mark.cc
def test_quick_run_writes_the_records(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    # Inductor's compile would double the time: eager and polyopt only (eager the baseline).
    argv = ["--quick", "--models", "bert", "--systems", "polyopt", "--baseline", "eager",
            "--batches", "1", "--repeat", "2", "--threads", "1", "--settle", "0",
            "--json", str(tmp_path / "m.json"), "--csv", str(tmp_path / "m.csv"),
            "--png", str(tmp_path / "m.png")]
    assert model.main(argv) == 0
    document = json.loads((tmp_path / "m.json").read_text())
    assert document["settings"]["models"] == ["bert"] and document["settings"]["quick"]
    assert "machine" in document and "versions" in document
    by = {r["system"]: r for r in document["records"]}
    assert list(by) == ["eager", "polyopt"]
    for system in ("eager", "polyopt"):
        rec = by[system]
        assert rec["status"] == "ok", rec["reason"]
        assert rec["calls"] == 2 and rec["min_ms"] <= rec["median_ms"] <= rec["max_ms"]
        assert rec["rel_error"] <= model_records.TOLERANCE
    assert by["polyopt"]["compile_s"] > 0 and by["polyopt"]["warm_s"] > 0
    assert by["polyopt"]["partitions"] >= 1 and by["polyopt"]["torch_ops"] >= 0
    assert by["eager"]["speedup"] == 1.0 and by["polyopt"]["speedup"] > 0
    with (tmp_path / "m.csv").open(newline="") as f:
        assert tuple(csv.DictReader(f).fieldnames or ()) == model_records.FIELDS


@pytest.mark.parametrize("name", ["mobilenetv2", "bert"])
def test_onnxruntime_runs_the_tiny_networks(name: str) -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("onnxruntime", reason="onnxruntime is not installed")
    pytest.importorskip("onnx", reason="onnx (torch.onnx.export's) is not installed")
    networks = pytest.importorskip("polyopt.bench.model.networks")
    child = pytest.importorskip("polyopt.bench.model.child")

    net = networks.build(name, tiny=True)
    x = net.example(2)
    with torch.no_grad():
        ref = net.module(x)
        call = child.compile_system("onnxruntime", net.module, x, threads=1)
        # the encoder layer exports its composite ops: the fast path stays on for torch
        assert torch.backends.mha.get_fastpath_enabled()
        assert child.relative_error(call(x), ref) <= model_records.TOLERANCE
