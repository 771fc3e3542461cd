"""compile() and the tuning database: a record that cannot be read, parsed or applied is
never used and never stops compile (one TuningWarning, the default schedule); schedules
whose scratch tensors would not fit in memory are a ScheduleError, not a MemoryError."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import polyopt
from polyopt.costmodel import memory
from polyopt.tuning import TuningWarning
from polyopt.tuning.db import Database, Record
from polyopt.tuning.lookup import make_key
from polyopt.tuning.replay import check_step, tuned_schedule

MM = "def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,r_k) * B(r_k,n) }"
SIZES = {"M": 64, "N": 48, "K": 40}
DEEP = "[" * 100_000 + "]" * 100_000  # json.loads raises RecursionError on this


@pytest.fixture
def db_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The default tuning database, in a cache dir of this test's own."""
    monkeypatch.setenv("POLYOPT_CACHE_DIR", str(tmp_path))
    yield tmp_path / "tuning.sqlite"


def _steps(*steps: tuple[str, list[object]]) -> str:
    return json.dumps({"def": "mm", "base": "isl", "fusion": "smart",
                       "steps": [{"verb": v, "args": a, "kwargs": {}} for v, a in steps]})


def _store(path: Path, schedule: str, column: str | None = None, value: object = None) -> None:
    """One record of MM at SIZES; then ``column`` overwritten with ``value`` behind the
    Database's back (SQLite keeps whatever it is given)."""
    with Database(path) as db:
        db.add(Record(make_key(MM, None, SIZES, "c"), schedule, (1e-3,), "ok", {}, "", MM))
    if column is not None:
        with sqlite3.connect(path) as conn:
            table = "meta" if column == "schema" else "records"
            target = "value" if column == "schema" else column
            conn.execute(f"UPDATE {table} SET {target} = ?", [value])


def _default() -> str:
    return polyopt.schedule(MM, sizes=SIZES).as_json()


def _compile_warns(match: str) -> polyopt.Kernel:
    """compile(MM) at SIZES: exactly one TuningWarning matching ``match``, and the default
    schedule."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kernel = polyopt.compile(MM, sizes=SIZES)
    tuning = [w for w in caught if issubclass(w.category, TuningWarning)]
    assert len(tuning) == 1, [str(w.message) for w in caught]
    assert match in str(tuning[0].message), str(tuning[0].message)
    assert "compiling with the default schedule" in str(tuning[0].message)
    assert kernel.schedule.as_json() == _default()
    return kernel


@pytest.mark.parametrize("schedule, match", [
    (DEEP, "maximum recursion depth"),
    ("{not json", "not a polyopt schedule in JSON"),
    (json.dumps({"def": "mm", "base": "isl", "steps": 5}), "not a polyopt schedule"),
    (_steps(("tile", [{"a": 1}, 4])), "is not a loop or tensor name"),
    (_steps(("pack", ["B", 1, 10**9])), "1000000000 is beyond 65536"),
    (_steps(("tile", ["m", -3])), "-3 is not an int from 1 to 65536"),
    (_steps(("unroll", ["m", 1000])), "1000 is not an int from 1 to 64"),
    (_steps(("split", ["m", 2.5])), "argument 2.5 is not a loop or tensor name, an int"),
    (_steps(("split", ["no_such_loop", 4])), "no_such_loop"),
    (_steps(("dance", ["m"])), "unknown schedule verb"),
])
def test_a_schedule_that_cannot_be_applied_falls_back(db_path: Path, schedule: str,
                                                      match: str) -> None:
    _store(db_path, schedule)
    _compile_warns(match)


@pytest.mark.parametrize("column, value, match", [
    ("shapes", DEEP, "shapes is not JSON (RecursionError"),
    ("options", "{bad", "options is not JSON (JSONDecodeError"),
    ("options", "[1, 2]", "Record options must be a mapping"),
    ("times", '["x"]', "finite non-negative seconds, not 'x'"),
    ("times", '"abc"', "times must be a list of seconds"),
    ("times", "[-1.0]", "finite non-negative seconds, not -1.0"),
    ("dtypes", "5", "dtypes is 5, not a list of names"),
    ("schedule", 5, "not a polyopt schedule in JSON"),  # stored as the text '5'
    ("schedule", b"{}", "schedule_json must be a string, not bytes"),
    ("schema", "abc", "schema version is 'abc', not a number"),
    ("shapes", "[[64, 40], [40, 99]]", "do not give its key id"),
])
def test_a_malformed_record_falls_back(db_path: Path, column: str, value: object,
                                       match: str) -> None:
    _store(db_path, _default(), column, value)
    _compile_warns(match)


def test_an_unreadable_database_falls_back(db_path: Path) -> None:
    db_path.write_bytes(b"not a database" * 100)
    _compile_warns("file is not a database")


@pytest.mark.cc
def test_a_huge_pack_record_runs_with_the_default_schedule(db_path: Path) -> None:
    """pack("B", 1, 10**9) compiled, then every call asked numpy for 149 GiB."""
    _store(db_path, _steps(("pack", ["B", 1, 10**9])))
    kernel = _compile_warns("beyond")
    a, b = np.ones((64, 40), np.float32), np.ones((40, 48), np.float32)
    np.testing.assert_allclose(kernel(a, b), a @ b)


def test_a_record_whose_scratch_exceeds_memory_falls_back(db_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    # B_pack(1, 40, 4096) float32 is 640 KiB: over a 512 KiB machine.
    monkeypatch.setattr(memory, "physical_memory", lambda: 512 << 10)
    _store(db_path, _steps(("pack", ["B", 1, 4096])))
    _compile_warns("(the largest, B_pack, is float32 of shape (1, 40, 4096))")


@pytest.mark.cc
def test_a_bad_record_at_a_call_time_shape_warns_too(db_path: Path) -> None:
    """Shapes known only at the call: the warning is not swallowed with the definition's
    PolyoptWarnings (shown at compile time already)."""
    _store(db_path, "{not json")
    kernel = polyopt.compile(MM)
    a, b = np.ones((64, 40), np.float32), np.ones((40, 48), np.float32)
    with pytest.warns(TuningWarning, match="not a polyopt schedule"):
        np.testing.assert_allclose(kernel(a, b), a @ b)


def test_a_size_generic_kernel_never_looks_up_a_key(db_path: Path) -> None:
    """With a database present, lowering without sizes raised isl's syntax error."""
    _store(db_path, _default())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert "mm" in polyopt.compile(MM).source
        assert tuned_schedule(MM, None, {}, "c") is None
    with pytest.raises(polyopt.OptionError, match=r"needs every size of def .mm.; unbound: M, "):
        make_key(MM, None, {}, "c")


def test_a_good_record_is_used_without_a_warning(db_path: Path) -> None:
    tuned = polyopt.schedule(MM, sizes=SIZES, options={"knobs": {"mr": 4, "kc": 16}})
    _store(db_path, tuned.as_json())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert polyopt.compile(MM, sizes=SIZES).schedule.as_json() == tuned.as_json()


def test_the_tuned_option_names_a_database(tmp_path: Path, db_path: Path) -> None:
    """options={"tuned": ...}: a Path or an open Database is read instead of the default
    one; False reads none; a str (which might be "no") is refused."""
    tuned = polyopt.schedule(MM, sizes=SIZES, options={"knobs": {"mr": 4, "kc": 16}})
    other = tmp_path / "other.sqlite"
    _store(other, tuned.as_json())
    default = _default()
    assert polyopt.compile(MM, sizes=SIZES).schedule.as_json() == default
    with Database(other) as db:
        for given in (other, db):
            kernel = polyopt.compile(MM, sizes=SIZES, options={"tuned": given})
            assert kernel.schedule.as_json() == tuned.as_json()
    assert polyopt.compile(MM, sizes=SIZES, options={"tuned": False}).schedule.as_json() == \
        default
    with pytest.raises(polyopt.OptionError, match="option tuned must be True or False"):
        polyopt.compile(MM, sizes=SIZES, options={"tuned": str(other)})


def test_compile_reads_the_database_without_the_search(db_path: Path) -> None:
    """The read path sits below compile: a fresh process uses a record without importing
    polyopt.tune's search, whatever it imported first."""
    tuned = polyopt.schedule(MM, sizes=SIZES, options={"knobs": {"mr": 4, "kc": 16}})
    _store(db_path, tuned.as_json())
    code = ("import json, sys, polyopt\n"
            f"k = polyopt.compile({MM!r}, sizes={SIZES!r})\n"
            "print(json.dumps([k.schedule.as_json(),\n"
            "    sorted(m for m in sys.modules if m.startswith('polyopt.tuning.'))]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={**os.environ, "POLYOPT_CACHE_DIR": str(db_path.parent)})
    schedule, loaded = json.loads(out.stdout)
    assert schedule == tuned.as_json()
    assert loaded == ["polyopt.tuning.db", "polyopt.tuning.key", "polyopt.tuning.lookup",
                      "polyopt.tuning.replay"]


def test_steps_of_the_pipeline_pass_the_record_checks() -> None:
    conv = polyopt.kernels.get("conv2d", padding=1)
    sizes = {"N": 1, "C": 8, "H": 9, "W": 9, "F": 16, "KH": 3, "KW": 3}
    for schedule in (polyopt.schedule(MM, sizes=SIZES, options={"knobs": {"pack": True}}),
                     polyopt.schedule(conv, "conv2d", sizes=sizes),
                     polyopt.schedule(MM, sizes=SIZES, target="cuda")):
        for step in schedule.steps:
            check_step(step)


def test_a_users_schedule_over_memory_is_a_schedule_error(monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    monkeypatch.setattr(memory, "physical_memory", lambda: 512 << 10)
    big = polyopt.schedule(MM, sizes=SIZES).pack("B", 1, 4096)
    with pytest.raises(polyopt.ScheduleError, match=r"need 0.000\d+ GiB .* B_pack"):
        polyopt.compile(MM, sizes=SIZES, schedule=big)
    small = polyopt.schedule(MM, sizes=SIZES).pack("B", 1, 16)
    assert polyopt.compile(MM, sizes=SIZES, schedule=small).schedule.buffers == ("B_pack",)


@pytest.mark.cc
def test_a_users_schedule_over_memory_fails_at_the_first_call(monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    monkeypatch.setattr(memory, "physical_memory", lambda: 512 << 10)
    kernel = polyopt.compile(MM, schedule=polyopt.schedule(MM).pack("B", 1, 4096))
    with pytest.raises(polyopt.ScheduleError, match="more than this machine's"):
        kernel(np.ones((64, 40), np.float32), np.ones((40, 48), np.float32))


def test_scratch_counts_locals_but_not_slices() -> None:
    program = polyopt.schedule(MM, sizes=SIZES).pack("B", 1, 16).pack("A", 0, 8).poly.program
    sizes = [(n, t.name, shape) for n, t, shape in memory.scratch(program, {})]
    assert sizes == [(8 * 40 * 8 * 4, "A_pack", (8, 40, 8)),  # largest first
                     (3 * 40 * 16 * 4, "B_pack", (3, 40, 16))]
    assert [t.name for _, t, _ in memory.scratch(program, {}, sliced={"A_pack"})] == ["B_pack"]
    memory.check_scratch(program, limit=sum(n for n, _, _ in sizes))
    with pytest.raises(polyopt.ScheduleError, match="the largest, A_pack"):
        memory.check_scratch(program, limit=sum(n for n, _, _ in sizes) - 1)
    assert (memory.physical_memory() or 1) > 0


def test_sizes_the_definition_rejects_are_not_a_database_problem(db_path: Path) -> None:
    _store(db_path, _default())
    src = "def valid(float(N) x, float(K) w) -> (y) { y(i) +=! x(i + r_k) * w(r_k) }"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no TuningWarning: compile reports the sizes
        kernel = polyopt.compile(src)  # the sizes come with the call
        with pytest.raises(polyopt.ShapeError, match="negative"):
            kernel(np.ones(2, np.float32), np.ones(5, np.float32))
