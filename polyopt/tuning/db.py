"""The tuning database: every schedule tried for a definition, its times, and the best one.

A record's :class:`~polyopt.tuning.key.Key` says what the times are valid for: the definition
(a canonical hash that ignores whitespace, comments and every name), the input shapes and
dtypes, the target, the machine and the polyopt version. Its value is the schedule as
replayable JSON (``Schedule.as_json()``), the compile options, every time sample, a status
and the date.

Storage is one SQLite file (``<cache dir>/tuning.sqlite`` unless a path is given) in WAL
mode: readers never block the writer, each ``add`` is one short ``BEGIN IMMEDIATE``
transaction, and a process killed mid-write leaves the last committed state. Several
processes (each with its own :class:`Database`) may write at once; threads share one
connection under a lock.

In a shared sticky cache root (README, Security) anyone can create ``tuning.sqlite`` first, so
before SQLite opens it the database and its ``-wal``, ``-shm`` and ``-journal`` files must
pass :func:`polyopt.trust.opened` (regular files of ours, at most ``CAPS["database"]``; a
FIFO, which SQLite would read forever, is looked at without blocking); a missing database is
created ``0600`` first. Else a :class:`DatabaseError` names the file and why (compiles warn
once and run untuned).

Schema (version 1)::

    meta(name TEXT PRIMARY KEY, value TEXT)          -- name 'schema' holds the version
    records(id INTEGER PRIMARY KEY AUTOINCREMENT,
            key_id, definition, def_name, shapes, dtypes, target, machine, version,
            schedule, options, times, best, status, error, source, created,
            digest UNIQUE)                            -- shapes..times are JSON text
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any, TypeVar

from polyopt import config, trust
from polyopt.errors import OptionError, PolyoptError
from polyopt.runtime import cache
from polyopt.tuning.key import Key, Shapes, shape_distance, shapes_of

SCHEMA_VERSION = 1
# "confirmed": a schedule timed again with the fastest others of its search, side by side
# (polyopt.tuning.tuner); a key's best is its fastest confirmed record when it has one.
STATUSES = ("ok", "confirmed", "wrong", "error", "timeout")
BUSY_TIMEOUT_S = 60.0
_RETRIES = 8
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
T = TypeVar("T")


class DatabaseError(PolyoptError):
    """The tuning database file is unreadable, corrupt, from a newer polyopt, or locked."""


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def _times(times: object) -> tuple[float, ...]:
    """Time samples: seconds, each a finite non-negative number (an imported or stored list
    with NaN, a negative or a non-number would make every comparison of records wrong)."""
    if isinstance(times, (str, bytes)) or not isinstance(times, Sequence):
        raise OptionError(f"Record times must be a list of seconds, not {type(times).__name__}")
    for t in times:
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 <= t < math.inf:
            raise OptionError(f"Record times must be finite non-negative seconds, not {t!r}")
    return tuple(float(t) for t in times)


@dataclass(frozen=True)
class Record:
    """One schedule tried at ``key``: every time sample (seconds), its status and the date.

    ``source`` is the TC text the schedule JSON replays on (its loop, statement and tensor
    names are that def's, which the key's hash ignores).
    """

    key: Key
    schedule_json: str
    times: tuple[float, ...] = ()
    status: str = "ok"
    options: Mapping[str, Any] = field(default_factory=dict, hash=False)
    error: str = ""
    source: str = ""
    created: str = field(default_factory=_now)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise OptionError(f"Record status {self.status!r}; valid: {', '.join(STATUSES)}")
        for name in ("schedule_json", "error", "source", "created"):
            if not isinstance(getattr(self, name), str):
                raise OptionError(f"Record {name} must be a string, not "
                                  f"{type(getattr(self, name)).__name__}")
        object.__setattr__(self, "times", _times(self.times))
        if not isinstance(self.options, Mapping):
            raise OptionError(f"Record options must be a mapping, not "
                              f"{type(self.options).__name__}")
        object.__setattr__(self, "options", dict(self.options))

    @property
    def best(self) -> float:
        """The fastest sample in seconds (``inf`` when there is none)."""
        return min(self.times, default=math.inf)

    def as_dict(self) -> dict[str, Any]:
        return {"key_id": self.key.id, "key": self.key.as_dict(), "schedule": self.schedule_json,
                "options": dict(self.options), "times": list(self.times), "status": self.status,
                "error": self.error, "source": self.source, "created": self.created}

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> Record:
        """The record of an exported line; OptionError (a ValueError) when it is not one."""
        if not isinstance(d, Mapping) or not isinstance(d.get("key"), Mapping):
            raise OptionError("a record is a JSON object with a 'key' object")
        return Record(Key.from_dict(d["key"]), d["schedule"], d.get("times", ()),
                      d.get("status", "ok"), d.get("options", {}), d.get("error", ""),
                      d.get("source", ""), d["created"])

    @property
    def digest(self) -> str:
        """Identifies an exact duplicate (import skips those)."""
        text = json.dumps(self.as_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()


# ---------------------------------------------------------------- the database

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS records (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    key_id TEXT NOT NULL, definition TEXT NOT NULL, def_name TEXT NOT NULL,
    shapes TEXT NOT NULL, dtypes TEXT NOT NULL, target TEXT NOT NULL, machine TEXT NOT NULL,
    version TEXT NOT NULL, schedule TEXT NOT NULL, options TEXT NOT NULL, times TEXT NOT NULL,
    best REAL, status TEXT NOT NULL, error TEXT NOT NULL, source TEXT NOT NULL,
    created TEXT NOT NULL, digest TEXT NOT NULL UNIQUE);
CREATE INDEX IF NOT EXISTS records_key ON records (key_id, status, best);
CREATE INDEX IF NOT EXISTS records_definition ON records (definition, target, machine);
"""
_COLUMNS = ("key_id, definition, def_name, shapes, dtypes, target, machine, version, schedule, "
            "options, times, best, status, error, source, created, digest")
_INSERT = (f"INSERT OR IGNORE INTO records ({_COLUMNS}) "
           f"VALUES ({', '.join('?' * len(_COLUMNS.split(', ')))})")
_SELECT = f"SELECT id, {_COLUMNS} FROM records"


def default_path() -> Path:
    """``tuning.sqlite`` in polyopt's cache dir (``POLYOPT_CACHE_DIR`` or the user's), or in
    the private fallback when others could write to that dir (see :mod:`polyopt.trust`)."""
    try:
        return cache.usable_root(config.cache_dir()) / "tuning.sqlite"
    except trust.UntrustedLocationError:
        raise
    except OSError:  # cannot be created: opening it reports why, as a DatabaseError
        return config.cache_dir() / "tuning.sqlite"


def state(path: str | Path | None = None) -> str:
    """A summary of the database at ``path`` (default: the user's) that changes whenever its
    contents may have: for the file and its write-ahead log, the size, modification time,
    inode and header (SQLite's counts commits, the log's checkpoints). Compile keys its warm
    starts on it (``polyopt.api.Kernel``): a few system calls, where a lookup costs ms."""
    db = Path(path) if path is not None else default_path()
    parts = [str(db)]
    for file in (db, db.with_name(f"{db.name}-wal")):
        try:
            with trust.opened(file, trust.CAPS["database"]) as (fd, st):
                head = os.read(fd, 100)
        except FileNotFoundError:
            parts.append("-")
            continue
        except OSError as exc:  # a lookup would fail and warn: no warm start records that
            return f"unreadable: {exc}"
        parts.append(f"{st.st_size}:{st.st_mtime_ns}:{st.st_ino}:{head.hex()}")
    return " | ".join(parts)


@dataclass(frozen=True)
class Summary:
    """One key of the database, for ``polyopt db list``."""

    key_id: str
    def_name: str
    target: str
    shapes: Shapes
    records: int
    best: float  # seconds, of the ok records; inf when none
    last: str  # the newest record's date


class Database:
    """The tuning database at ``path`` (default :func:`default_path`); see the module doc."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path is not None else default_path()
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._pid = -1
        self._connection()  # open now, so a bad path fails here

    def __fspath__(self) -> str:  # so that options={"tuned": database} names its file
        return str(self.path)

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None

    def add(self, record: Record) -> bool:
        """Store ``record`` in one transaction; False if an identical one was there."""
        return self._write(lambda c: c.execute(_INSERT, _row(record)).rowcount) > 0

    def records(self, key: Key | str | None = None, definition: str | None = None) -> list[Record]:
        """Records in insertion order: all, those of ``key`` (a Key or a key id), or those of
        one definition hash."""
        where, args = [], []
        if key is not None:
            where.append("key_id = ?")
            args.append(key.id if isinstance(key, Key) else key)
        if definition is not None:
            where.append("definition = ?")
            args.append(definition)
        sql = _SELECT + (f" WHERE {' AND '.join(where)}" if where else "") + " ORDER BY id"
        return [_record(self.path, r) for r in self._read(sql, args)]

    def best(self, key: Key) -> Record | None:
        """The fastest confirmed record of ``key``, else its fastest ok one, or None."""
        rows = self._read(f"{_SELECT} WHERE key_id = ? AND status IN ('ok', 'confirmed') "
                          "AND best IS NOT NULL ORDER BY status != 'confirmed', best, id LIMIT 1",
                          [key.id])
        return _record(self.path, rows[0]) if rows else None

    def nearest(self, key: Key, k: int = 3) -> list[Record]:
        """The best ok record of up to ``k`` other keys of the same definition, target and
        machine (any version), nearest shapes first (:func:`shape_distance`)."""
        rows = self._read(f"{_SELECT} WHERE definition = ? AND target = ? AND machine = ? "
                          "AND key_id != ? AND status IN ('ok', 'confirmed') AND best IS NOT NULL "
                          "ORDER BY status != 'confirmed', best, id",
                          [key.definition, key.target, key.machine, key.id])
        seen: set[str] = set()
        ranked: list[tuple[float, float, Record]] = []
        for row in rows:  # by best time, so the first row of a key is its best record
            rec = _record(self.path, row)
            dist = shape_distance(key.shapes, rec.key.shapes)
            if rec.key.id in seen or dist is None:
                continue
            seen.add(rec.key.id)
            ranked.append((dist, rec.best, rec))
        ranked.sort(key=lambda x: x[:2])
        return [rec for _, _, rec in ranked[:max(k, 0)]]

    def summary(self) -> list[Summary]:
        """One line per key: name, target, shapes, record count, best ok time, last date."""
        rows = self._read("SELECT key_id, MAX(def_name), target, shapes, COUNT(*), "
                          "MIN(CASE WHEN status IN ('ok', 'confirmed') THEN best END), "
                          "MAX(created) "
                          "FROM records GROUP BY key_id ORDER BY 2, target, shapes", [])
        return [self._summary(*r) for r in rows]

    def _summary(self, key_id: str, def_name: object, target: object, shapes: object,
                 records: int, best: object, last: object) -> Summary:
        try:
            if best is not None and (isinstance(best, bool) or not isinstance(
                    best, (int, float))):
                raise _Malformed(f"best is {type(best).__name__}, not seconds")
            return Summary(key_id, _text(def_name, "def_name"), _text(target, "target"),
                           _shapes(shapes), records, math.inf if best is None else best,
                           _text(last, "created"))
        except (_Malformed, OptionError) as e:
            raise DatabaseError(f"tuning database {self.path}: a record of key {key_id} is "
                                f"malformed: {e}") from None

    def find_key(self, prefix: str) -> str:
        """The one key id starting with ``prefix``."""
        if not re.fullmatch(r"[0-9a-f]+", prefix):
            raise OptionError(f"{prefix!r} is not a key id (hex digits; see `polyopt db list`)")
        ids = [r[0] for r in self._read("SELECT DISTINCT key_id FROM records WHERE "
                                        "substr(key_id, 1, ?) = ?", [len(prefix), prefix])]
        if not ids:
            raise OptionError(f"no key id in {self.path} starts with {prefix!r}")
        if len(ids) > 1:
            raise OptionError(f"{len(ids)} key ids start with {prefix!r} "
                              f"({', '.join(sorted(ids)[:5])}); give more digits")
        return str(ids[0])

    def export(self, fileobj: IO[str]) -> int:
        """Write every record as one JSON object per line; returns how many."""
        n = 0
        for rec in self.records():
            fileobj.write(json.dumps(rec.as_dict(), sort_keys=True) + "\n")
            n += 1
        return n

    def import_(self, fileobj: IO[str]) -> int:
        """Add the records of an export (all in one transaction, exact duplicates skipped);
        returns how many were new. A malformed line raises OptionError and adds nothing."""
        name = getattr(fileobj, "name", "<input>")
        rows = []
        try:
            lines = list(fileobj)
        except UnicodeDecodeError as e:
            raise OptionError(f"{name} is not UTF-8 text ({e}); expected JSON lines written "
                              f"by `polyopt db export`") from None
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                rows.append(_row(Record.from_dict(json.loads(line))))
            except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as e:
                raise OptionError(f"{name}: line {n} is not a tuning record "
                                  f"({type(e).__name__}: {str(e)[:200]})") from None

        def insert(c: sqlite3.Connection) -> int:
            before = c.total_changes
            c.executemany(_INSERT, rows)
            return c.total_changes - before
        return self._write(insert)

    def stats(self) -> dict[str, Any]:
        """Counts (records, keys, definitions, records per status), the path and its size."""
        [(records, keys, defs)] = self._read(
            "SELECT COUNT(*), COUNT(DISTINCT key_id), COUNT(DISTINCT definition) FROM records", [])
        status = dict(self._read("SELECT status, COUNT(*) FROM records GROUP BY status", []))
        return {"path": str(self.path), "bytes": self.path.stat().st_size, "records": records,
                "keys": keys, "definitions": defs, "status": status}

    # -------------------------------------------------------------- connection and retries

    def _connection(self) -> sqlite3.Connection:
        """This process's connection (a forked child must not reuse its parent's)."""
        if self._conn is None or self._pid != os.getpid():
            self._conn, self._pid = self._open(), os.getpid()
        return self._conn

    def _open(self) -> sqlite3.Connection:
        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            _claim(self.path)
            conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None,
                                   check_same_thread=False)
        except trust.UntrustedLocationError as e:
            raise DatabaseError(f"refusing the tuning database: {e}") from None
        except (OSError, sqlite3.Error) as e:
            raise DatabaseError(f"cannot open the tuning database {self.path}: {e}") from None
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            # WAL needs a moment of exclusive access: retry while another process holds it.
            _retry(self.path, lambda: conn.execute("PRAGMA journal_mode = WAL").fetchone())
            conn.execute("PRAGMA synchronous = NORMAL")
            _retry(self.path, lambda: _transaction(conn, _create_schema))
        except BaseException:
            conn.close()
            raise
        return conn

    def _write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        with self._lock:
            conn = self._connection()
            return _retry(self.path, lambda: _transaction(conn, fn))

    def _read(self, sql: str, args: Sequence[object]) -> list[Any]:
        with self._lock:
            conn = self._connection()
            return _retry(self.path, lambda: conn.execute(sql, args).fetchall())


def _claim(path: Path) -> None:
    """Create the database ``path`` (0600, ours) when it is missing; raise
    :class:`~polyopt.trust.UntrustedLocationError` when it, or its WAL, shared-memory or
    journal file, is not a file only we could have written (see the module doc)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) \
        | getattr(os, "O_CLOEXEC", 0)
    with contextlib.suppress(FileExistsError):  # another process's, or anyone's: checked
        os.close(os.open(path, flags, 0o600))
    for suffix in ("", "-wal", "-shm", "-journal"):
        with contextlib.suppress(FileNotFoundError), \
                trust.opened(path.with_name(path.name + suffix), trust.CAPS["database"]):
            pass


def _transaction(conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], T]) -> T:
    """``fn`` in one ``BEGIN IMMEDIATE`` transaction: the write lock is taken up front, so
    it never has to be upgraded (which can fail with SQLITE_BUSY without waiting)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        out = fn(conn)
        conn.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        raise
    return out


def _retry(path: Path, fn: Callable[[], T]) -> T:
    """``fn``, retried with backoff when SQLite reports a lock its busy timeout could not
    wait out; any other SQLite failure becomes a one-line DatabaseError."""
    for attempt in range(_RETRIES):
        try:
            return fn()
        except sqlite3.OperationalError as e:
            busy = "locked" in str(e) or "busy" in str(e)
            if not busy or attempt == _RETRIES - 1:
                raise DatabaseError(f"tuning database {path}: {e}") from None
            time.sleep(0.01 * 2 ** attempt)
        except sqlite3.DatabaseError as e:
            raise DatabaseError(f"tuning database {path}: {e}") from None
    raise AssertionError("unreachable")


def _create_schema(conn: sqlite3.Connection) -> None:
    for statement in filter(str.strip, _SCHEMA.split(";")):
        conn.execute(statement)
    conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", [str(SCHEMA_VERSION)])
    [(found,)] = conn.execute("SELECT value FROM meta WHERE name = 'schema'").fetchall()
    if not re.fullmatch(r"[0-9]{1,9}", str(found)):
        raise DatabaseError(f"the tuning database's schema version is {str(found)[:40]!r}, "
                            f"not a number: the file was not written by polyopt")
    if int(found) > SCHEMA_VERSION:
        raise DatabaseError(f"the tuning database has schema version {found}, newer than this "
                            f"polyopt's {SCHEMA_VERSION}; upgrade polyopt or use --db")


def _json(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _row(rec: Record) -> tuple[object, ...]:
    k = rec.key
    best = None if not rec.times else rec.best
    return (k.id, k.definition, k.def_name, _json(k.shapes), _json(k.dtypes), k.target,
            k.machine, k.version, rec.schedule_json, _json(rec.options), _json(rec.times), best,
            rec.status, rec.error, rec.source, rec.created, rec.digest)


class _Malformed(Exception):
    """One column of a stored row is not what ``add`` writes (raised as a DatabaseError)."""


def _column(value: object, column: str) -> Any:
    """The JSON text of ``column``, parsed; SQLite keeps whatever type was stored, and the
    text may be anything (deep nesting makes json raise RecursionError)."""
    if not isinstance(value, str):
        raise _Malformed(f"{column} is {type(value).__name__}, not JSON text")
    try:
        return json.loads(value)
    except (ValueError, RecursionError) as e:
        raise _Malformed(f"{column} is not JSON ({type(e).__name__}: {str(e)[:80]})") from None


def _text(value: object, column: str) -> str:
    if not isinstance(value, str):
        raise _Malformed(f"{column} is {type(value).__name__}, not text")
    return value


def _shapes(value: object) -> Shapes:
    shapes = _column(value, "shapes")
    if not isinstance(shapes, list) or not all(isinstance(s, list) for s in shapes):
        raise _Malformed(f"shapes is {str(shapes)[:80]}, not a list of lists of sizes")
    return shapes_of(shapes)


def _dtypes(value: object) -> tuple[str, ...]:
    dtypes = _column(value, "dtypes")
    if not isinstance(dtypes, list) or not all(isinstance(d, str) for d in dtypes):
        raise _Malformed(f"dtypes is {str(dtypes)[:80]}, not a list of names")
    return tuple(dtypes)


def _record(path: Path, row: Sequence[Any]) -> Record:
    """The Record of a stored row, or a DatabaseError naming the row and its bad column."""
    (row_id, _, definition, def_name, shapes, dtypes, target, machine, version, schedule,
     options, times, _, status, error, source, created, _) = row
    try:
        key = Key(_text(definition, "definition"), _shapes(shapes), _dtypes(dtypes),
                  _text(target, "target"), _text(machine, "machine"), _text(version, "version"),
                  def_name=_text(def_name, "def_name"))
        return Record(key, schedule, _column(times, "times"), status,
                      _column(options, "options"), error, source, created)
    except (_Malformed, OptionError) as e:
        raise DatabaseError(f"tuning database {path}: record {row_id} is malformed: "
                            f"{e}") from None
