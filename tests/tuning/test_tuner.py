"""polyopt.tune (polyopt.tuning): the search space, the strategies, measurement in worker
processes, the database record, and compile's use of the best recorded schedule."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import numpy as np
import pytest

import polyopt
from polyopt import kernels
from polyopt.tuning.db import Database
from polyopt.tuning.lookup import lookup
from polyopt.tuning.measure import Confirm, Job, Runner, prepare, reference
from polyopt.tuning.search import CostModel, search
from polyopt.tuning.space import space_for
from polyopt.tuning.tuner import config_of, tune

MM = "def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,r_k) * B(r_k,n) }"
SIZES = {"M": 64, "N": 48, "K": 40}


def test_space_has_the_knobs_that_matter_and_round_trips_options() -> None:
    space = space_for(MM, None, SIZES)
    names = [n for n, _ in space.knobs]
    assert {"mr", "nr", "kc", "mc", "pack_a", "pack_b"} <= set(names) and "fusion" not in names
    conv = dict(space_for(kernels.source("conv2d"), "conv2d", {
        "N": 1, "C": 8, "H": 9, "W": 9, "F": 16, "KH": 3, "KW": 3, "PH": 1, "PW": 1}).knobs)
    assert "block" in conv and "mc" not in conv  # a convolution's rows are too short to cut
    rng = random.Random(0)
    for _ in range(20):
        c = space.sample(rng)
        assert config_of(space, space.options(c)) == c
        assert set(space.mutate(c, rng)) == set(c)
    assert "search space (c," in str(space) and space.as_json().startswith("{")
    cuda = space_for(MM, None, SIZES, "cuda")
    assert "gpu_tile" in dict(cuda.knobs)
    assert cuda.options({"gpu_tile": (64, 64, 8), "gpu_regs": None})["gpu"] == {
        "tile": [64, 64, 8]}


@pytest.mark.parametrize("strategy", ["random", "genetic", "model"])
def test_strategies_measure_distinct_configurations_default_first(strategy: str) -> None:
    space = space_for(MM, None, SIZES)
    target = {"mr": 8, "nr": 32, "kc": 64}

    def fake(configs: list[dict]) -> list[float]:  # fastest at ``target``
        return [1.0 + sum(abs(math.log2((c[k] or 16) / v)) for k, v in target.items())
                for c in configs]

    history = search(space, fake, 24, strategy, seed=1)
    assert len(history) == 24 and history[0][0] == space.default
    keys = {str(sorted(c.items())) for c, _ in history}
    assert len(keys) == 24


@pytest.mark.parametrize("learner", ["ridge", "boosted"])
def test_cost_model_ranks_what_it_was_fitted_on(learner: str) -> None:
    if learner == "boosted":
        pytest.importorskip("xgboost", reason="the boosted cost model needs xgboost")
    space = space_for(MM, None, SIZES)
    rng = random.Random(2)
    configs = [space.sample(rng) for _ in range(40)]
    timing = [2.0 ** (c["kc"] is None) * (1 + (c["pack_b"] is False)) for c in configs]
    model = CostModel.fit(space, list(zip(configs, timing, strict=True)), learner=learner)
    fast = next(c for c, t in zip(configs, timing, strict=True) if t == min(timing))
    slow = next(c for c, t in zip(configs, timing, strict=True) if t == max(timing))
    assert model.predict(fast) < model.predict(slow)
    assert model.predict_many([fast, slow]) == pytest.approx([model.predict(fast),
                                                           model.predict(slow)])
    with pytest.raises(polyopt.OptionError, match="learner"):
        CostModel.fit(space, [], learner="forest")


@pytest.mark.cc
def test_runner_checks_results_and_survives_failures(tmp_path: Path) -> None:
    data = prepare(MM, None, SIZES, directory=str(tmp_path))
    wrong_data = str(tmp_path / "wrong.npz")
    with np.load(data) as d:
        np.savez(wrong_data, in0=d["in0"], in1=d["in1"], ref0=d["ref0"] + 1)
    sizes = tuple(SIZES.items())
    jobs = [Job(MM, None, sizes, "c", {}, data, repeat=2),
            Job(MM, None, sizes, "c", {"knobs": {"mr": -1}}, data),
            Job(MM, None, sizes, "c", {}, wrong_data),
            Job(MM, None, sizes, "c", {}, str(tmp_path / "missing.npz"))]
    with Runner(timeout=60) as runner:
        ok, bad, wrong, missing = runner.map(jobs)  # one batch: built at once, timed in turn
        assert ok.status == "ok" and len(ok.times) == 2 and '"steps"' in ok.schedule
        assert bad.status == "error" and "knobs" in bad.error
        assert wrong.status == "wrong" and "relative L2 error" in wrong.error
        assert missing.status == "error" and "missing.npz" in missing.error
    with Runner(timeout=60) as runner:  # side by side in one process
        ok, bad, wrong, missing = runner.confirm(Confirm(tuple(jobs), rounds=2))
        assert ok.status == "ok" and len(ok.times) == 4 and '"steps"' in ok.schedule
        assert bad.status == "error" and wrong.status == "wrong" and missing.status == "error"
    with Runner(timeout=0.01) as runner:
        late = runner.measure(jobs[0])
        assert late.status == "timeout" and "time limit" in late.error


@pytest.mark.cc
def test_reference_is_the_float64_result() -> None:
    rng = np.random.default_rng(1)
    a = rng.standard_normal((64, 40)).astype(np.float32)
    b = rng.standard_normal((40, 48)).astype(np.float32)
    (ref,) = reference(MM, None, SIZES, [a, b])
    assert ref.dtype == np.float64
    np.testing.assert_allclose(ref, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-12)


@pytest.mark.cc
def test_tune_records_every_trial_and_compile_uses_the_best(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    monkeypatch.setenv("POLYOPT_CACHE_DIR", str(tmp_path / "cache"))
    db = Database(tmp_path / "cache" / "tuning.sqlite")  # the default database
    result = tune(MM, sizes=SIZES, trials=5, strategy="random", db=db, repeat=2)
    assert len(result.trials) == 5 and "5 trials" in str(result)
    records = db.records(result.key)
    assert len([r for r in records if r.status != "confirmed"]) == 5
    # The fastest schedules and the default were timed again side by side; the best is
    # the fastest of those, and the database prefers it.
    again = dict(result.confirmed)
    assert len([r for r in records if r.status == "confirmed"]) == len(again) >= 2
    assert 0 in again and result.trials.index(result.best) in again
    assert result.best_time == min(r.best for r in again.values()) <= result.default_time
    best = lookup(MM, None, SIZES, "c")
    assert best is not None and best.best == pytest.approx(result.best_time)
    kernel = polyopt.compile(MM, sizes=SIZES)
    assert kernel.schedule.as_json() == best.schedule_json
    a = np.ones((64, 40), np.float32)
    b = np.ones((40, 48), np.float32)
    np.testing.assert_allclose(kernel(a, b), a @ b)
    untuned = polyopt.compile(MM, sizes=SIZES, options={"tuned": False})
    assert untuned.schedule.as_json() == result.trials[0].result.schedule
    # A new shape starts from the nearest tuned one: its best configuration comes second.
    seeded = tune(MM, sizes={"M": 72, "N": 48, "K": 40}, trials=2, strategy="random",
                  db=db, repeat=1)
    if result.best is not result.trials[0]:  # a default best is not measured twice
        assert seeded.trials[1].options == result.best.options


@pytest.mark.cc
def test_cli_tune_prints_a_table_and_records(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    from polyopt.cli import main

    db = str(tmp_path / "t.sqlite")
    src = tmp_path / "mm.tc"
    src.write_text(MM)
    assert main([ "tune", str(src), "--sizes", "M=32,N=32,K=32", "--trials", "3",
                 "--strategy", "random", "--repeat", "1", "--db", db]) == 0
    out = capsys.readouterr().out
    assert "| rank | ms | confirmed ms | status | options |" in out and "after 3 trials" in out
    assert main(["db", "list", "--db", db]) == 0
    assert "mm" in capsys.readouterr().out


@pytest.mark.cc
def test_cuda_mappings_tune_in_the_emulator(tmp_path: Path) -> None:
    """The CUDA space end to end without a GPU: each mapping compiles for CUDA, runs in the
    emulator against the float64 reference, and the fastest are confirmed."""
    result = tune(MM, sizes=SIZES, target="cuda-emulated", trials=3, strategy="random",
                  repeat=1, db=str(tmp_path / "g.sqlite"))
    assert [t.result.status for t in result.trials] == ["ok"] * 3
    assert all("gpu" in t.options for t in result.trials)
    assert result.key.target == "cuda-emulated" and result.best_time < math.inf


@pytest.mark.cc
def test_measurements_run_on_a_dask_cluster(tmp_path: Path) -> None:
    distributed = pytest.importorskip("dask.distributed")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        result = tune(MM, sizes=SIZES, trials=3, strategy="random", repeat=1,
                      db=str(tmp_path / "d.sqlite"), executor=client)
    assert [t.result.status for t in result.trials] == ["ok"] * 3
    assert result.best_time < math.inf
    assert all(r.status == "ok" for _, r in result.confirmed)  # confirmed there too


def test_isl_footprints_of_register_and_panel_tiles() -> None:
    from polyopt.costmodel.machine import Machine
    from polyopt.tuning.features import N_FEATURES, Footprints

    machine = Machine(vector_bytes=64, vector_registers=32, l1d_bytes=32768, l2_bytes=1 << 20)
    fp = Footprints(MM, None, {"M": 64, "N": 48, "K": 40}, machine)
    f = fp.features(4, 16, 8)
    assert len(f) == N_FEATURES
    tile, panel, reuse_l1, reuse_l2, accs, spills, lanes, strided, _, blocked, rows = f
    assert tile == (4 * 8 + 8 * 16) * 4 / 32768  # A's 4x8 and B's 8x16 elements
    assert panel == (64 * 8 + 8 * 16) * 4 / (1 << 20)  # A's panel spans every row
    assert reuse_l1 == 0.0 and reuse_l2 == 0.0  # A's panel (2.5 KB) fits L1
    assert accs == 4 / 32 and spills == 0.0 and strided == 0.0 and lanes == 1.0
    assert blocked == 0.0 and rows == 4 / 64
    assert fp.features(28, 64, 8)[5] == 1.0  # 28 x 4 accumulators cannot fit 32 registers
    assert fp.features(4, 32, 8)[6] == 48 / 64  # two column tiles of 32: 16 lanes idle
    big = Footprints(MM, None, {"M": 1024, "N": 1024, "K": 1024}, machine)
    assert big.features(4, 16, 256, mc=0)[2] == math.log2((1024 + 16) * 256 * 4 / 32768)  # A
    nt = "def nt(float(M,K) A, float(N,K) B) -> (C) { C(m,n) +=! A(m,r_k) * B(n,r_k) }"
    assert Footprints(nt, None, {"M": 8, "N": 8, "K": 8}, machine).features(2, 16, 4)[7] == 1


def test_footprints_follow_the_channel_blocking_and_the_gpu_tile() -> None:
    from polyopt.costmodel.machine import Machine
    from polyopt.tuning.features import Footprints

    conv = ("def conv(float(N,C,H,W) I, float(F,C,KH,KW) Wt) -> (O) {\n"
            "  O(n,f,h,w) +=! I(n,r_c,h + r_kh,w + r_kw) * Wt(f,r_c,r_kh,r_kw)\n}")
    machine = Machine(vector_bytes=64, vector_registers=32, l1d_bytes=32768, l2_bytes=1 << 20)
    fp = Footprints(conv, None, {"N": 1, "C": 8, "H": 14, "W": 14, "F": 64, "KH": 3, "KW": 3},
                    machine)
    blocked = fp.of({"block": 32, "mr": 7, "nr": 32, "kc": 8})
    # Rows are 7 output columns, columns the 32 channels of a block, with the 3x3 taps:
    # the input's 8 x 3 x 9 window and the weights' 32 x 8 x 3 x 3.
    assert blocked[0] == (8 * 3 * 9 + 32 * 8 * 9) * 4 / 32768 and blocked[9] == 1.0
    assert fp.of({"block": 0, "mr": 7, "nr": 16, "kc": 8})[9] == 0.0
    gpu = fp.of({"gpu_tile": (64, 64, 8), "gpu_regs": (4, 4), "gpu_block": None})
    assert gpu[0] == math.log2(256) / 10 and gpu[1] == (64 + 64) * 8 * 4 / (48 << 10)


@pytest.mark.cc
def test_candidates_are_measured_as_given_not_as_the_database_best(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POLYOPT_CACHE_DIR", str(tmp_path / "cache"))
    db = Database(tmp_path / "cache" / "tuning.sqlite")  # the default one, with a record
    tune(MM, sizes=SIZES, trials=1, strategy="random", db=db, repeat=1)
    data = prepare(MM, None, SIZES, directory=str(tmp_path))
    with Runner(timeout=60) as runner:
        job = Job(MM, None, tuple(SIZES.items()), "c", {"knobs": {"mr": 4, "nr": 16}}, data, 1)
        result = runner.measure(job)
    steps = [(st["verb"], st["args"][:2]) for st in json.loads(result.schedule)["steps"]]
    assert result.status == "ok" and ("split", ["m2", 4]) in steps
