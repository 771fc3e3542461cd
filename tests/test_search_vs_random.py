"""scripts/search_vs_random.py: the best at a budget is the best of the first trials, and
the table takes the side-by-side times' medians over seeds when there are some."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "search_vs_random.py"
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
