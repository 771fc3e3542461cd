"""The tuning database: canonical definition hash, keys, records, concurrency, crash safety,
and the ``polyopt db`` command."""

from __future__ import annotations

import io
import json
import math
import multiprocessing
import signal
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from polyopt import cli, lang
from polyopt.errors import OptionError
from polyopt.tuning import Database, Key, Record, canonical_hash, default_path, machine_id
from polyopt.tuning.db import DatabaseError

MLP = """
def mlp(float(B,I) X, float(J,I) W, float(J) b) -> (Y) {
    Y(n,j) +=! X(n,r_i) * W(j,r_i)
    Y(n,j)  = fmax(Y(n,j) + b(j), 0)
}"""

# The same def: other def, tensor, index and size names, whitespace and a comment.
MLP_RENAMED = """
# a comment
def dense(float(N,K) In, float(M,K) Wt, float(M) bias)->(Out){
  Out(row, col) +=! In(row, kk) * Wt(col, kk)
  Out(row, col) = fmax(Out(row, col) + bias(col), 0)   # relu
}"""

MLP_OTHER_OP = MLP.replace("X(n,r_i) * W(j,r_i)", "X(n,r_i) + W(j,r_i)")
MLP_OTHER_DOMAIN = MLP.replace("W(j,r_i)", "W(j,r_i) where r_i in 0:4", 1)
MLP_OTHER_DTYPE = MLP.replace("float", "double")

MM = "def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,r_k) * B(r_k,n) }"


def _hash(source: str) -> str:
    return canonical_hash(lang.build_program(source))


def _key(shapes: tuple[tuple[int, ...], ...] = ((64, 32), (32, 16))) -> Key:
    return Key.make(lang.build_program(MM), shapes, "c", machine="test-machine")


def _record(key: Key, times: tuple[float, ...], status: str = "ok", tag: str = "") -> Record:
    return Record(key, json.dumps({"def": "mm", "steps": [], "tag": tag}), times, status,
                  {"fusion": "smart"})


def test_canonical_hash_ignores_names_and_whitespace() -> None:
    assert _hash(MLP) == _hash(MLP_RENAMED)
    assert _hash(MM) == _hash(MM.replace("r_k", "q").replace("A", "P").replace("mm", "g"))


@pytest.mark.parametrize("changed", [MLP_OTHER_OP, MLP_OTHER_DOMAIN, MLP_OTHER_DTYPE])
def test_canonical_hash_sees_ops_domains_and_dtypes(changed: str) -> None:
    assert _hash(changed) != _hash(MLP)


def test_canonical_hash_sees_operand_order() -> None:
    swapped = MM.replace("A(m,r_k) * B(r_k,n)", "B(r_k,n) * A(m,r_k)")
    assert _hash(swapped) != _hash(MM)


def test_key_identity_and_machine_id() -> None:
    a, b = _key(), _key()
    assert a == b and a.id == b.id and len(a.id) == 24
    assert Key.from_dict(a.as_dict()) == a
    renamed = Key.make(lang.build_program(MM.replace("mm", "other")), a.shapes, "c",
                       machine="test-machine")
    assert renamed.id == a.id and renamed.def_name == "other"  # the name is informational
    assert _key(((64, 32), (32, 17))).id != a.id
    assert machine_id("cuda-emulated") == f"emulated:{machine_id('c')}"
    with pytest.raises(OptionError, match="unknown target"):
        machine_id("opencl")


def test_default_path_is_in_the_cache_dir(monkeypatch: pytest.MonkeyPatch,
                                          tmp_path: Path) -> None:
    monkeypatch.setenv("POLYOPT_CACHE_DIR", str(tmp_path))
    assert default_path() == tmp_path / "tuning.sqlite"


def test_add_best_records_and_nearest(tmp_path: Path) -> None:
    key = _key()
    with Database(tmp_path / "t.sqlite") as db:
        assert db.best(key) is None
        assert db.add(_record(key, (3e-3, 2e-3), tag="a"))
        assert db.add(_record(key, (1e-3,), status="wrong", tag="wrong is never best"))
        assert db.add(_record(key, (1.5e-3, 4e-3), tag="b"))
        assert db.add(_record(key, (), status="error", tag="c"))
        best = db.best(key)
        assert best is not None and best.best == 1.5e-3 and "\"b\"" in best.schedule_json
        assert [r.status for r in db.records(key)] == ["ok", "wrong", "ok", "error"]
        assert db.records(key)[3].best == math.inf
        for shapes in [((128, 32), (32, 16)), ((64, 32), (32, 1024)), ((8, 8), (8, 8))]:
            db.add(_record(_key(shapes), (1e-3,)))
        db.add(_record(Key.make(lang.build_program(MLP), ((64, 32), (32, 16), (16,)), "c",
                                machine="test-machine"), (1e-4,)))
        near = db.nearest(_key(((100, 32), (32, 16))), k=2)
        assert [r.key.shapes for r in near] == [((128, 32), (32, 16)), ((64, 32), (32, 16))]
        assert db.nearest(key, k=10)[0].key.shapes == ((128, 32), (32, 16))  # never itself
        stats = db.stats()
        assert stats["records"] == 8 and stats["keys"] == 5 and stats["definitions"] == 2


def test_export_import_round_trip(tmp_path: Path) -> None:
    key = _key()
    with Database(tmp_path / "a.sqlite") as a:
        for i in range(5):
            a.add(_record(key, (i + 1.0,), tag=str(i)))
        assert not a.add(a.records()[0])  # an exact duplicate is not stored twice
        out = io.StringIO()
        assert a.export(out) == 5
    text = out.getvalue()
    assert len(text.splitlines()) == 5 and json.loads(text.splitlines()[0])["key_id"] == key.id
    with Database(tmp_path / "b.sqlite") as b:
        assert b.import_(io.StringIO(text)) == 5
        assert b.import_(io.StringIO(text)) == 0
        assert b.records() == Database(tmp_path / "a.sqlite").records()
        with pytest.raises(OptionError, match="line 2 is not a tuning record"):
            b.import_(io.StringIO(text.splitlines()[0] + "\n{\"key\": 1}\n"))


def test_bad_file_and_newer_schema(tmp_path: Path) -> None:
    bad = tmp_path / "bad.sqlite"
    bad.write_text("not a database" * 100)
    with pytest.raises(DatabaseError, match="not a database"):
        Database(bad)
    path = tmp_path / "new.sqlite"
    Database(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value = '99' WHERE name = 'schema'")
    with pytest.raises(DatabaseError, match="schema version 99"):
        Database(path)


def _writer(path: str, worker: int, count: int, start: Any = None) -> None:
    """Child process: ``count`` records on its own connection (count < 0: until killed),
    after every writer has opened the database (``start``, a barrier) so they overlap."""
    key = _key(((worker + 1, 2), (2, 3)))
    with Database(path) as db:
        if start is not None:
            start.wait(60)
        i = 0
        while count < 0 or i < count:
            db.add(_record(key, (float(i), 1.0 + i), tag=f"{worker}-{i}"))
            i += 1


def test_concurrent_processes_lose_nothing(tmp_path: Path) -> None:
    path = str(tmp_path / "c.sqlite")
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(4)
    procs = [ctx.Process(target=_writer, args=(path, w, 200, start)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    with Database(path) as db:
        records = db.records()
    assert len(records) == 800
    tags = {json.loads(r.schedule_json)["tag"] for r in records}
    assert tags == {f"{w}-{i}" for w in range(4) for i in range(200)}


def test_threads_share_one_database(tmp_path: Path) -> None:
    with Database(tmp_path / "threads.sqlite") as db:
        def work(t: int) -> None:
            for i in range(50):
                db.add(_record(_key(((t + 1, 1), (1, 1))), (float(i),), tag=f"{t}-{i}"))
                db.records(definition=_key().definition)

        threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert len(db.records()) == 200 and len(db.summary()) == 4


def test_killed_writer_leaves_a_valid_database(tmp_path: Path) -> None:
    path = tmp_path / "k.sqlite"
    proc = multiprocessing.get_context("spawn").Process(target=_writer, args=(str(path), 0, -1))
    proc.start()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not _count(path):  # until it is writing
        time.sleep(0.05)
    time.sleep(0.3)
    proc.kill()
    proc.join()
    assert proc.exitcode == -signal.SIGKILL  # it was still writing
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    with Database(path) as db:
        records = db.records()
        tags = [json.loads(r.schedule_json)["tag"] for r in records]
        assert tags == [f"0-{i}" for i in range(len(records))] and len(records) > 0
        assert db.add(_record(_key(), (1.0,)))  # and it is still writable


def _count(path: Path) -> int:
    if not path.exists():
        return 0
    try:
        with sqlite3.connect(path, timeout=5) as conn:
            return int(conn.execute("SELECT COUNT(*) FROM records").fetchone()[0])
    except sqlite3.OperationalError:  # no table yet
        return 0


def test_cli_list_show_export_import(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db_path, dump = str(tmp_path / "cli.sqlite"), tmp_path / "dump.jsonl"
    key = _key()
    with Database(db_path) as db:
        db.add(_record(key, (2e-3, 1e-3), tag="x"))
        db.add(_record(key, (5e-3,), tag="y"))
    assert cli.main(["db", "list", "--db", db_path]) == 0
    out = capsys.readouterr().out
    assert key.id[:12] in out and "mm" in out and "1.0000" in out and "64x32 32x16" in out
    assert cli.main(["db", "show", key.id[:6], "--db", db_path]) == 0
    out = capsys.readouterr().out
    assert out.count("-- ") == 2 and '"tag": "y"' in out
    assert cli.main(["db", "show", "ffffffffffff", "--db", db_path]) == 2
    assert "no key id" in capsys.readouterr().err
    assert cli.main(["db", "export", str(dump), "--db", db_path]) == 0
    assert len(dump.read_text().splitlines()) == 2
    assert cli.main(["db", "export", "--db", db_path]) == 0
    assert capsys.readouterr().out == dump.read_text()
    other = str(tmp_path / "other.sqlite")
    assert cli.main(["db", "import", str(dump), "--db", other]) == 0
    assert "imported 2 new records" in capsys.readouterr().out
    assert len(Database(other).records()) == 2


def _bad_line(tmp_path: Path, **changes: Any) -> Path:
    line = {**_record(_key(), (1e-3,)).as_dict(), **changes}
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(line) + "\n")
    return path


@pytest.mark.parametrize("times, message", [
    ([-1.0], "finite non-negative seconds, not -1.0"),
    ([math.nan], "finite non-negative seconds, not nan"),
    ([math.inf], "finite non-negative seconds, not inf"),
    ([True], "finite non-negative seconds, not True"),
    ("abc", "times must be a list of seconds, not str"),
])
def test_import_refuses_times_that_are_not_seconds(tmp_path: Path, times: object,
                                                    message: str) -> None:
    with Database(tmp_path / "t.sqlite") as db, pytest.raises(OptionError, match=message):
        db.import_(_bad_line(tmp_path, times=times).open())
    assert Database(tmp_path / "t.sqlite").records() == []  # nothing of the file added
    with pytest.raises(OptionError, match="Record times"):
        Record(_key(), "{}", times)  # type: ignore[arg-type]


@pytest.mark.parametrize("text, message", [
    ("[" * 100_000, "RecursionError"),
    ("[1, 2]", "a record is a JSON object"),
    (json.dumps({"key": {"shapes": [["a"]]}}), "KeyError"),
    (json.dumps({**_record(_key(), ()).as_dict(), "options": [1]}), "options must be a mapping"),
])
def test_import_refuses_lines_that_are_not_records(tmp_path: Path, text: str,
                                                    message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(text + "\n")
    with Database(tmp_path / "t.sqlite") as db, pytest.raises(OptionError, match=message):
        db.import_(path.open())


def _corrupt(path: Path, column: str, value: object) -> Key:
    key = _key()
    with Database(path) as db:
        db.add(_record(key, (1e-3,)))
    with sqlite3.connect(path) as conn:
        conn.execute(f"UPDATE records SET {column} = ?", [value])
    return key


@pytest.mark.parametrize("column, value, message", [
    ("shapes", "[" * 100_000, "shapes is not JSON (RecursionError"),
    ("shapes", '[["a"]]', "Key shapes must be tuples of ints"),
    ("options", "{bad", "options is not JSON (JSONDecodeError"),
    ("times", '[1, "x"]', "not 'x'"),
    ("dtypes", '"float32"', "not a list of names"),
    ("status", "great", "Record status 'great'"),
])
def test_a_malformed_row_is_one_database_error(tmp_path: Path, column: str, value: object,
                                               message: str) -> None:
    key = _corrupt(tmp_path / "t.sqlite", column, value)
    with Database(tmp_path / "t.sqlite") as db:
        with pytest.raises(DatabaseError, match=r"t.sqlite: record 1 is malformed: .*"
                           + message.replace("(", r"\(").replace("[", r"\[")):
            db.records()
        if column != "status":  # best() reads ok and confirmed records only
            with pytest.raises(DatabaseError, match="record 1 is malformed"):
                db.best(key)


def test_a_schema_version_that_is_not_a_number(tmp_path: Path) -> None:
    Database(tmp_path / "t.sqlite").close()
    with sqlite3.connect(tmp_path / "t.sqlite") as conn:
        conn.execute("UPDATE meta SET value = 'x1' WHERE name = 'schema'")
    with pytest.raises(DatabaseError, match="schema version is 'x1', not a number"):
        Database(tmp_path / "t.sqlite")


@pytest.mark.parametrize("argv", [["list"], ["show", "KEY"], ["export"], ["import", "BAD"]])
def test_cli_db_commands_print_one_line_and_exit_2(tmp_path: Path, argv: list[str],
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    db_path = tmp_path / "t.sqlite"
    key = _corrupt(db_path, "shapes", "[" * 100_000)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({**_record(key, ()).as_dict(), "times": [math.nan]}) + "\n")
    args = [{"KEY": key.id[:8], "BAD": str(bad)}.get(a, a) for a in argv]
    assert cli.main(["db", *args, "--db", str(db_path)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("polyopt: error: ") and err.count("\n") == 1
