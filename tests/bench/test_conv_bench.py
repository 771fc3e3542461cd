"""``polyopt bench conv`` end to end on small layers, its files, and its error paths."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from polyopt import cli
from polyopt.bench import conv, layers, tvm_conv
from polyopt.bench.conv import records, report
from polyopt.bench.peers import Context, Prepared, conv_reference, numpy_conv
from polyopt.errors import OptionError

# Two small layers (a pointwise and a 3x3), shapes divided by 16: seconds, not minutes.
SMALL = ["--layers", "2,3", "--scale", "16", "--repeat", "2", "--settle", "0"]


def _bench(argv: list[str], out: Path, blocked: tuple[str, ...] = ()) -> int:
    """Run the CLI with ``blocked`` modules made unimportable and the env restored after."""
    with pytest.MonkeyPatch.context() as mp:
        for name in ("OMP_NUM_THREADS", "OMP_PROC_BIND", "TVM_NUM_THREADS"):
            mp.setenv(name, {"OMP_PROC_BIND": "spread"}.get(name, "2"))
        for name in blocked:
            mp.setitem(sys.modules, name, None)  # import raises ImportError
        return cli.main(["bench", "conv", *argv, "--out", str(out)])


@pytest.fixture(scope="module")
def small_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One run on two layers; TVM blocked, so it must show as skipped (and costs no import)."""
    out = tmp_path_factory.mktemp("bench")
    assert _bench(SMALL, out, blocked=("tvm",)) == 0
    yield out


@pytest.mark.cc
def test_csv_holds_one_record_per_layer_and_system(small_run: Path) -> None:
    with (small_run / "resnet50.csv").open(newline="") as f:
        reader = csv.DictReader(f)
        assert tuple(reader.fieldnames or ()) == records.FIELDS
        rows = list(reader)
    assert [(r["layer"], r["system"]) for r in rows] == [
        (n, s) for n in ("2", "3") for s in ("polyopt", "numpy", "torch", "tvm")]
    assert {r["kind"] for r in rows} == {"pointwise", "regular"}
    by = {(r["layer"], r["system"]): r for r in rows}
    for n in ("2", "3"):
        mine = by[n, "polyopt"]
        assert mine["status"] == "ok" and mine["matched"] == "True"
        assert float(mine["min_ms"]) <= float(mine["median_ms"]) <= float(mine["max_ms"])
        assert float(mine["gflops"]) > 0 and float(mine["rel_error"]) <= 1e-4
        assert by[n, "numpy"]["status"] == "ok"
        tvm = by[n, "tvm"]
        assert tvm["status"] == "skipped" and "TVM is not installed" in tvm["reason"]
        assert tvm["median_ms"] == ""  # nothing estimated
    assert by["3", "polyopt"]["count"] == "3"


@pytest.mark.cc
def test_json_holds_records_machine_versions_and_command(small_run: Path) -> None:
    doc = json.loads((small_run / "resnet50.json").read_text())
    assert doc["model"] == "resnet50"
    assert doc["command"].startswith("polyopt bench conv --model resnet50 --layers 2,3")
    assert doc["machine"]["cpu"] and doc["machine"]["cores"] >= 1
    assert {"python", "numpy", "torch", "tvm", "polyopt"} <= set(doc["versions"])
    assert doc["settings"]["repeat"] == 2 and doc["settings"]["scale"] == 16
    assert doc["settings"]["rounds"] == conv.ROUNDS and "--rounds 3" in doc["command"]
    assert len(doc["records"]) == 8 and set(doc["records"][0]) == set(records.FIELDS)
    totals = {t["system"]: t for t in doc["totals"]}
    mine = [r for r in doc["records"] if r["system"] == "polyopt"]
    weighted = sum(r["count"] * r["median_ms"] for r in mine)
    assert totals["polyopt"]["weighted_ms"] == pytest.approx(weighted)
    assert totals["tvm"]["layers"] == 0 and totals["tvm"]["weighted_ms"] is None


@pytest.mark.cc
def test_plot_is_written(small_run: Path) -> None:
    pytest.importorskip("matplotlib")
    assert (small_run / "resnet50.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.cc
def test_missing_torch_is_skipped_and_another_baseline_works(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]
                                                              ) -> None:
    argv = ["--layers", "2", "--scale", "16", "--repeat", "1", "--settle", "0",
            "--baseline", "numpy"]
    assert _bench(argv, tmp_path, blocked=("torch", "tvm")) == 0
    rows = {r["system"]: r for r in csv.DictReader((tmp_path / "resnet50.csv").open())}
    assert rows["torch"]["status"] == "skipped"
    assert "torch is not installed" in rows["torch"]["reason"]
    assert float(rows["numpy"]["speedup"]) == 1.0 and float(rows["polyopt"]["speedup"]) > 0
    assert "torch skipped: torch is not installed" in capsys.readouterr().out


@pytest.mark.cc
def test_a_missing_baseline_falls_back_to_a_peer_that_ran(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    """The README's command without torch: every speed-up was '-' and the chart empty."""
    argv = ["--layers", "2", "--scale", "16", "--repeat", "1", "--settle", "0"]
    assert _bench(argv, tmp_path, blocked=("torch", "tvm")) == 0
    rows = {r["system"]: r for r in csv.DictReader((tmp_path / "resnet50.csv").open())}
    assert float(rows["numpy"]["speedup"]) == 1.0 and float(rows["polyopt"]["speedup"]) > 0
    out = capsys.readouterr().out
    assert ("Baseline: torch has no correct timing (skipped: torch is not installed"
            in out and "speed-ups are relative to numpy instead." in out)
    assert "| | speed-up vs numpy, count-weighted |" in out
    doc = json.loads((tmp_path / "resnet50.json").read_text())
    assert doc["settings"]["baseline"] == "numpy"
    assert "--baseline torch" in doc["command"] and "numpy instead" in doc["settings"][
        "baseline_note"]


def test_choose_baseline() -> None:
    def rec(system: str, ok: bool) -> records.Record:
        r = records.Record("m", 1, "l1", "regular", 1, "", 1, 1.0, system, matched=ok,
                           median_ms=1.0 if ok else None)
        r.status, r.reason = ("ok", "") if ok else ("skipped", f"{system} is not installed")
        return r

    systems = ("polyopt", "numpy", "torch", "tvm")
    recs = [rec("polyopt", True), rec("numpy", True), rec("torch", False), rec("tvm", True)]
    assert conv.choose_baseline(recs, "tvm", systems) == ("tvm", "")
    assert conv.choose_baseline(recs, "torch", systems) == (
        "numpy", "torch has no correct timing (skipped: torch is not installed): speed-ups "
        "are relative to numpy instead")
    assert conv.choose_baseline(recs[:1] + recs[2:3], "torch", systems)[0] == "polyopt"
    baseline, note = conv.choose_baseline(recs[2:3], "torch", systems)
    assert baseline == "torch" and note.endswith("nor has any other system: there are no "
                                                 "speed-ups")


def test_the_chart_legend_lists_only_systems_that_ran(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("matplotlib")
    shown: list[list[str]] = []
    monkeypatch.setattr(report, "_decorate", lambda ax, recs, layers, systems, base:
                        shown.append(list(systems)))
    recs = []
    for system, ms in (("polyopt", 1.0), ("numpy", 2.0), ("torch", None), ("tvm", None)):
        recs.append(records.Record("m", 1, "l1", "regular", 1, "", 1, 1.0, system,
                                   status="ok" if ms else "skipped", matched=ms is not None,
                                   median_ms=ms))
    records.add_speedups(recs, "numpy")
    assert report.plot(tmp_path / "a.png", recs, "numpy", "t") is None
    assert shown == [["polyopt"]]
    records.add_speedups(recs, "torch")  # skipped: no speed-ups
    note = report.plot(tmp_path / "b.png", recs, "torch", "t")
    assert note == "no system has a speed-up against torch to plot"


@pytest.mark.cc
def test_the_benchmark_leaves_the_callers_cpu_affinity_alone(tmp_path: Path) -> None:
    """OMP_PROC_BIND=spread, set by the benchmark, pinned the calling thread (and threads it
    started later) to one CPU once libgomp loaded, and the JSON said usable_cpus: 1."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two usable CPUs to show a pinning")
    script = (
        "import json, os, sys, threading\n"
        "from polyopt import cli\n"
        "before = sorted(os.sched_getaffinity(0))\n"
        "argv = ['bench', 'conv', '--layers', '2', '--scale', '4', '--repeat', '1',\n"
        "        '--settle', '0', '--out', sys.argv[1]]\n"
        "assert cli.main(argv) == 0\n"
        "later = []\n"
        "t = threading.Thread(target=lambda: later.extend(os.sched_getaffinity(0)))\n"
        "t.start(); t.join()\n"
        "doc = json.load(open(os.path.join(sys.argv[1], 'resnet50.json')))\n"
        "gomp = any('libgomp' in line for line in open('/proc/self/maps'))\n"
        "print(json.dumps([before, sorted(os.sched_getaffinity(0)), sorted(later),\n"
        "                  doc['machine']['usable_cpus'], gomp]))\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OMP_")}
    proc = subprocess.run([sys.executable, "-c", script, str(tmp_path)], env=env, text=True,
                          capture_output=True, check=True, cwd=Path(__file__).parents[2])
    before, after, later, usable, gomp = json.loads(proc.stdout.splitlines()[-1])
    if not gomp:
        pytest.skip("no OpenMP region ran at this scale on this machine")
    assert after == before and later == before and usable == len(before)


@pytest.mark.cc
def test_cuda_target_times_polyopt_against_torch_only(tmp_path: Path) -> None:
    argv = ["--layers", "2", "--scale", "16", "--repeat", "1", "--settle", "0",
            "--target", "cuda"]
    _bench(argv, tmp_path)
    rows = {r["system"]: r for r in csv.DictReader((tmp_path / "resnet50.csv").open())}
    assert set(rows) == {"polyopt", "torch"}
    # Without a CUDA backend polyopt fails with the compiler's reason, never silently.
    mine = rows["polyopt"]
    assert mine["status"] == "ok" or (mine["status"] == "failed" and "Error" in mine["reason"])


def _calls(log: list[str], name: str, fail_at: int = 0) -> Prepared:
    """A system whose calls append ``name`` to ``log`` (the ``fail_at``-th call raises)."""
    def call() -> None:
        log.append(name)
        if len(log) == fail_at:
            raise RuntimeError("lost the device")
    return Prepared(call, name)


def test_rounds_interleave_every_system_in_rotated_order() -> None:
    """Each round runs every system's block of calls, the order rotated by one per round,
    so no system always goes first (after the pause) or last; every call is kept."""
    log: list[str] = []
    ready = {s: _calls(log, s) for s in ("a", "b", "c")}
    times, failed = conv.time_rounds(ready, repeat=2, rounds=4, settle=0.0)
    blocks = [log[i] for i in range(0, len(log), 2)]
    assert blocks == ["a", "b", "c", "b", "c", "a", "c", "a", "b", "a", "b", "c"]
    assert not failed and all(len(t) == 8 and min(t) >= 0 for t in times.values())


def test_a_system_failing_in_a_round_leaves_the_others_timed() -> None:
    log: list[str] = []
    ready = {"a": _calls(log, "a"), "b": _calls(log, "b", fail_at=3)}
    times, failed = conv.time_rounds(ready, repeat=2, rounds=3, settle=0.0)
    assert failed == {"b": "RuntimeError: lost the device"}
    assert len(times["a"]) == 6 and log.count("b") == 1


def test_the_figure_is_the_median_of_every_call_of_every_round() -> None:
    layer = layers.MODELS["mobilenetv2"][2]
    rec = records.Record.start("mobilenetv2", layer, 1, "polyopt")
    rec.matched = True
    conv.finish(rec, [5.0, 1.0, 2.0, 9.0, 3.0])
    assert (rec.median_ms, rec.min_ms, rec.max_ms) == (3.0, 1.0, 9.0)
    assert rec.gflops == pytest.approx(rec.gflop / 3e-3) and rec.reason == ""


@pytest.mark.parametrize("argv, message", [
    (["--layers", "0,24"], "resnet50 has no layer 0, 24; its layers are numbered 1-23"),
    (["--model", "vgg16"], "unknown model 'vgg16'; valid models: resnet50, mobilenetv2"),
    (["--layers", "3-x"], "--layers item '3-x' is not a number"),
    (["--baseline", "tensorflow"], "unknown --baseline 'tensorflow'"),
    (["--repeat", "0"], "--repeat must be at least 1"),
    (["--rounds", "0"], "--rounds must be at least 1"),
])
def test_bad_options_are_one_line_errors(argv: list[str], message: str, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["bench", "conv", *argv, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("polyopt: error: ") and message in err and err.count("\n") == 1
    assert not list(tmp_path.iterdir())  # checked before anything runs


def test_unknown_layer_raises_option_error() -> None:
    with pytest.raises(OptionError, match="mobilenetv2 has no layer 33"):
        layers.select("mobilenetv2", "1,33")


def test_layer_tables_match_the_survey() -> None:
    resnet, mobile = layers.MODELS["resnet50"], layers.MODELS["mobilenetv2"]
    assert (len(resnet), sum(x.count for x in resnet)) == (23, 53)
    assert (len(mobile), sum(x.count for x in mobile)) == (32, 54)
    assert sum(x.count * x.macs(1) for x in resnet) / 1e9 == pytest.approx(4.09, abs=0.005)
    assert sum(x.count * x.macs(1) for x in mobile) / 1e9 == pytest.approx(0.314, abs=0.001)
    assert [x.number for x in mobile if x.kind == "depthwise"] == [3, 6, 9, 11, 14, 16, 19,
                                                                   23, 25, 28]
    small = layers.scaled(mobile[2], 16)
    assert (small.kind, small.cin, small.hw) == ("depthwise", 2, 7)


def test_totals_weight_layers_by_count() -> None:
    def rec(layer: int, count: int, system: str, ms: float | None) -> records.Record:
        r = records.Record("m", layer, f"l{layer}", "regular", count, "", 1, 1.0, system,
                           matched=ms is not None, median_ms=ms)
        r.status = "ok" if ms is not None else "failed"
        return r

    recs = [rec(1, 1, "a", 2.0), rec(1, 1, "b", 1.0), rec(2, 3, "a", 1.0), rec(2, 3, "b", None)]
    records.add_speedups(recs, "a")
    assert [r.speedup for r in recs] == [1.0, 2.0, 1.0, None]
    a, b = records.totals(recs, "a", ["a", "b"])
    assert (a.weighted_ms, a.speedup) == (5.0, 1.0)
    assert (b.weighted_ms, b.layers, b.common_layers, b.speedup) == (1.0, 1, 1, 2.0)


def test_numpy_peer_matches_the_reference_on_every_kind() -> None:
    rng = np.random.default_rng(1)
    for model, n in (("resnet50", 1), ("resnet50", 9), ("mobilenetv2", 6)):
        layer = layers.scaled(layers.select(model, str(n))[0], 16)
        x = rng.standard_normal(layer.input_shape(2), dtype=np.float32)
        w = rng.standard_normal(layer.weight_shape(), dtype=np.float32)
        np.testing.assert_allclose(numpy_conv(x, w, layer), conv_reference(x, w, layer),
                                   rtol=1e-4, atol=1e-4)


def test_plot_without_matplotlib_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                          ) -> None:
    for name in ("matplotlib", "matplotlib.figure", "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, name, None)  # also when another test imported it
    note = report.plot(tmp_path / "x.png", [], "torch", "t")
    assert note is not None and "matplotlib is not installed" in note
    assert not (tmp_path / "x.png").exists()


def test_tuning_crash_becomes_a_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    def crashed(argv: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(argv, -11, '{"layer": 2, "result": "/t/l2.so"}\n',
                                           "  File x\n!!!!!!! Segfault encountered !!!!!!!\n")

    monkeypatch.setattr(tvm_conv.subprocess, "run", crashed)
    got = tvm_conv.tune_layers(layers.select("resnet50", "2,3"), 1, 8, 2, "/t")
    assert got == {2: "/t/l2.so", 3: "the tuning process died of SIGSEGV (Segfault encountered)"}


@pytest.mark.cc
def test_tvm_schedules_match_the_reference() -> None:
    pytest.importorskip("tvm")
    ctx = Context("c", 2)
    rng = np.random.default_rng(2)
    for model, n in (("resnet50", 1), ("resnet50", 9), ("mobilenetv2", 6), ("mobilenetv2", 32)):
        layer = layers.scaled(layers.select(model, str(n))[0], 16)
        x = rng.standard_normal(layer.input_shape(1), dtype=np.float32)
        w = rng.standard_normal(layer.weight_shape(), dtype=np.float32)
        ref = conv_reference(x, w, layer)
        prepared = tvm_conv.prepare_tvm(layer, (x, w), ctx)
        np.testing.assert_allclose(prepared.to_numpy(prepared.call()), ref, rtol=1e-4,
                                   atol=1e-4)
        if n not in (1, 6):
            continue
        # One sample of MetaSchedule's design space, applied without the tuner.
        tvm, target = tvm_conv.load(2, ctx)
        func = tvm_conv.define(tvm, layer, 1)
        sch = tvm_conv.design_space(tvm, func, layer)(tvm.s_tir.Schedule(func, seed=n))
        out = tvm.runtime.tensor(np.zeros(ref.shape, np.float32))
        tvm.compile(sch.mod, target=target)["main"](tvm.runtime.tensor(x),
                                                    tvm.runtime.tensor(w), out)
        np.testing.assert_allclose(out.numpy(), ref, rtol=1e-4, atol=1e-4)
