"""scripts/studies/search_vs_random.py: the best at a budget is the best of the first trials, the
table takes the side-by-side times' medians over seeds when there are some, and in table
mode the strategies propose only tabled configurations and are scored against the table's
best."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "studies" / "search_vs_random.py"
spec = importlib.util.spec_from_file_location("search_vs_random", SCRIPT)
assert spec is not None and spec.loader is not None
svr = importlib.util.module_from_spec(spec)
spec.loader.exec_module(svr)


def run(strategy: str, seed: int, ms: list, retimed: dict | None = None) -> dict:
    out = {"op": "k", "strategy": strategy, "seed": seed, "ms": ms, "space": 9,
           "configs": [{}] * len(ms)}
    if retimed is not None:
        out.update(retimed=retimed, default_retimed=4.0)
    return out


def test_best_at_a_budget_is_the_best_of_its_first_trials() -> None:
    r = run("model", 0, [4.0, None, 3.0, 1.0])
    assert svr.best_at(r, 3) == 3.0 and svr.best_at(r, 4) == 1.0
    assert svr._best_index(r, 3) == 2


def test_the_table_takes_medians_of_the_side_by_side_times() -> None:
    runs = [run(s, seed, [4.0, 2.0], {"1": 4.0, "2": x})
            for seed, (a, b) in enumerate([(2.0, 1.0), (3.0, 1.5), (2.5, 2.5)])
            for s, x in (("random", a), ("model", b))]
    row = svr.table(runs, [1, 2]).splitlines()[-1]
    assert row == "| k | 9 | 0,1,2 | 4 | 4 | 4 | 2.5 | 1.5 | 1.000 | 0.600 |"


def synthetic_table(n: int = 4) -> dict:
    """A table of every configuration of two knobs; the time grows with both knobs'
    positions and the prediction follows it."""
    values = [None, *range(1, n)]
    configs = [{"a": a, "b": b} for a in values for b in values]
    ms = [1.0 + values.index(c["a"]) + 2 * values.index(c["b"]) for c in configs]
    ms[-1] = None  # a failed configuration
    return {"knobs": {"a": values, "b": values}, "space_size": n * n, "configs": configs,
            "ms": ms, "features": [[float(m or 99)] for m in ms],
            "prior": [float(m or 99) for m in ms]}


def test_a_simulated_strategy_proposes_table_configurations_once_each() -> None:
    table = synthetic_table()
    for strategy in svr.STRATEGIES:
        got = svr.simulate(table, strategy, 64, seed=3)
        assert len(got) == len(table["configs"]) and got[0] == 1.0  # default first
        assert sorted(got) == sorted(m if m is not None else float("inf")
                                     for m in table["ms"])


def test_the_study_reports_best_found_over_the_table_best(tmp_path: Path) -> None:
    tables = {"k": synthetic_table()}
    result = svr.study(tables, [1, 2, 16], seeds=5)
    assert result["k"]["random"]["1"] == [1.0] * 5  # the default is the table's best
    text = svr.study_table(tables, result, [1, 2, 16])
    assert text.splitlines()[2].startswith("| k | 16 | 16 | 1.000 | 1.000 (1.000-1.000)")
    path = tmp_path / "tables.json"
    path.write_text(json.dumps(tables))
    assert svr.main(["--tables", str(path), "--budgets", "1,2", "--seeds", "3"]) == 0


def test_tables_of_several_files_are_studied_together(tmp_path: Path) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps({"k": synthetic_table()}))
    b.write_text(json.dumps({"j": synthetic_table(3)}))
    assert svr.main(["--tables", f"{a},{b}", "--ops", "j,k", "--budgets", "1",
                     "--seeds", "2"]) == 0
    try:
        svr.main(["--tables", str(a), "--ops", "j", "--seeds", "2"])
    except SystemExit as e:
        assert "no table for j" in str(e)
    else:
        raise AssertionError("a missing table must stop the study")


def test_kernels_far_slower_than_the_default_are_capped() -> None:
    path = SCRIPT.parent / "search_table.py"
    spec = importlib.util.spec_from_file_location("search_table", path)
    assert spec is not None and spec.loader is not None
    st = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(st)
    once = {"d": 0.01, "fast": 0.005, "slow": 0.2, "absurd": 1.5}
    assert st._slow(once, "d", 10.0) == {"slow": 200.0, "absurd": 1500.0}
    assert st._slow({"d": 0.5, "e": 1.2, "f": 0.9}, "d", 10.0) == {"e": 1200.0}  # over 1 s
    assert st._slow({"d": 2.0, "e": 1.2}, "d", 10.0) == {}  # not slower than the default


def test_triples_count_each_disjoint_group_of_three_seeds() -> None:
    # seeds 0-2: the model is better; seeds 3-5: worse; one operator, one budget
    result = {"op": {"model": {"8": [1.0, 1.0, 1.0, 2.0, 2.0, 2.0]},
                     "random": {"8": [1.5, 1.5, 1.5, 1.5, 1.5, 1.5]}}}
    line = svr.triples(result, [8])
    assert "wins 0-1 cells" in line and "loses 0-1" in line
    assert "more cells than it loses in 1 of 2 triples" in line
