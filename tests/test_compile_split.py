"""scripts/dev/compile_split.py: the order of its compiles (repeats compiled anew), its summary
and one short run. Speed itself is what the script measures, never a test."""

from __future__ import annotations

import gc
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from polyopt.bench import suite_cases

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts" / "dev"


@pytest.fixture(scope="module")
def split() -> ModuleType:
    sys.path.insert(0, str(SCRIPTS))
    try:
        import compile_split
    finally:
        sys.path.remove(str(SCRIPTS))
    return compile_split


@pytest.fixture(scope="module")
def cases(split: ModuleType) -> list:
    return suite_cases.all_cases(False)


def test_ops_keep_their_order_and_repeats_are_new_sources(split: ModuleType,
                                                          cases: list) -> None:
    todo = split.sequence(cases, "conv_3x3,mm_tiny,conv_3x3", False, 2)
    assert [c.op for c in todo] == ["conv_3x3", "mm_tiny", "conv_3x3"] * 2
    first = todo[0].source
    assert first == next(c for c in cases if c.op == "conv_3x3").source
    sources = [c.source for c in todo if c.op == "conv_3x3"]
    assert len(set(sources)) == 4  # nothing lowered before is reused
    assert all(s.startswith(first) for s in sources)


def test_then_all_runs_the_others_between(split: ModuleType, cases: list) -> None:
    todo = split.sequence(cases, "conv_3x3", True, 1)
    names = [c.op for c in todo]
    assert names[0] == names[-1] == "conv_3x3"
    assert sorted(names[1:-1]) == sorted(c.op for c in cases if c.op != "conv_3x3")
    assert [c.op for c in split.sequence(cases, None, False, 1)] == [c.op for c in cases]


def test_unknown_operator_is_named(split: ModuleType, cases: list) -> None:
    with pytest.raises(ValueError, match="no_such_op"):
        split.sequence(cases, "mm_tiny,no_such_op", False, 1)


def test_summary_names_the_slowest_and_those_over_budget(split: ModuleType) -> None:
    rows = [{"op": f"op{k}", "cpu": 0.2 * k, "gc_ms": 1.0, "gauge_ms": 10.0 + k}
            for k in range(7)]
    lines = split.summary(rows)
    assert lines[0] == "slowest: op6 1.20, op5 1.00, op4 0.80, op3 0.60, op2 0.40"
    assert lines[1] == "over 1 s: 1 of 7 (op6)"
    assert "7 ms in all" in lines[2]
    assert lines[3] == "gauge: 10.0-16.0 ms (max/min 1.60)"
    assert split.summary([]) == ["no operator compiled"]


def test_gc_clock_counts_collections(split: ModuleType) -> None:
    clock = split.GcClock()
    try:
        junk = [[k] for k in range(100_000)]
        gc.collect()
        assert clock.spent > 0
        clock.reset()
        assert clock.spent == 0
        del junk
    finally:
        gc.callbacks.remove(clock.event)


@pytest.mark.cc
def test_a_repeated_operator_is_compiled_twice(split: ModuleType, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    out = tmp_path / "split.json"
    assert split.main(["--ops", "mm_tiny,mm_tiny", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())
    assert [r["op"] for r in rows] == ["mm_tiny", "mm_tiny"]
    for r in rows:  # a cache hit would compile nothing: no C compiler time
        assert r["gcc"][0] > 0 and r["lower"][0] > 0 and r["gauge_ms"] > 0
    assert split.driver._schedule.__name__ == "_schedule"  # the timers are gone
    assert split.GcClock.event not in [getattr(f, "__func__", None) for f in gc.callbacks]
