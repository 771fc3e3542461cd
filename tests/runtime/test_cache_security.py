"""The cache trusts only what the current user alone could have written; temp dirs do not leak.

Root bypasses permission bits, so these tests check polyopt's own ownership and mode checks,
not the kernel's. Tests that need another user's files chown them to ``nobody`` and skip
unless run as root.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

import polyopt
from polyopt import config, lang, trust
from polyopt.costmodel import machine as mm
from polyopt.costmodel.machine import Machine
from polyopt.runtime import cache, compiler, nvcc, records
from polyopt.runtime.compiler import compile_shared, load_library
from polyopt.tuning import db
from polyopt.tuning.replay import TuningWarning, tuned_schedule

ADD = "int add(int a, int b) { return a + b; }\n"
EVIL = "int add(int a, int b) { return 1000; }\n"
NOBODY = 65534
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")


@pytest.fixture(autouse=True)
def tmpdir_(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private system temp dir, so fallbacks and scratch dirs land where the test looks."""
    tmp = tmp_path / "tmp"
    tmp.mkdir(mode=0o700)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    monkeypatch.setenv("TMPDIR", str(tmp))
    return tmp


def _fallback(tmpdir_: Path) -> Path:
    return tmpdir_ / f"polyopt-{os.geteuid()}"


def _plant(root: Path, source: str = ADD) -> Path:
    """Write an object that returns 1000 as the cache entry of ``source``, with metadata whose
    checksum matches it: what anyone who can write to the cache dir can do."""
    with tempfile.TemporaryDirectory(dir=root.parent) as other:
        os.environ["POLYOPT_CACHE_DIR"] = other
        data = compile_shared(EVIL).read_bytes()
    os.environ["POLYOPT_CACHE_DIR"] = str(root)
    key = compiler._prepare(source, None).key
    so = cache.entry_path(root, key)
    so.parent.mkdir(parents=True, exist_ok=True)
    cache.store(root, key, data, EVIL, {})
    cache.clear_memory()
    compiler._LIBS.clear()
    return so


@pytest.mark.cc
def test_planted_object_in_world_writable_cache_is_not_loaded(
        cache_dir: Path, tmpdir_: Path, caplog: pytest.LogCaptureFixture) -> None:
    cache_dir.mkdir()
    _plant(cache_dir)
    os.chmod(cache_dir, 0o777)
    with caplog.at_level(logging.WARNING, logger="polyopt.runtime"):
        assert load_library(ADD).add(1, 2) == 3
    assert str(cache_dir) in caplog.text and "writable by others" in caplog.text
    assert list(_fallback(tmpdir_).glob("c/*/*.so"))
    assert stat.S_IMODE(_fallback(tmpdir_).stat().st_mode) == 0o700


@pytest.mark.cc
def test_sticky_world_writable_root_is_trusted(cache_dir: Path, tmpdir_: Path) -> None:
    cache_dir.mkdir()
    os.chmod(cache_dir, 0o1777)  # like /tmp: others cannot replace what we create in it
    assert cache_dir in compile_shared(ADD).parents
    assert not _fallback(tmpdir_).exists()


@pytest.mark.cc
@needs_root
def test_subdirectory_of_another_user_is_refused(cache_dir: Path, tmpdir_: Path,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    cache_dir.mkdir()
    so = _plant(cache_dir)
    os.chown(so.parent, NOBODY, NOBODY)
    with caplog.at_level(logging.WARNING, logger="polyopt.runtime"):
        assert load_library(ADD).add(1, 2) == 3
    assert str(so.parent) in caplog.text and f"owned by uid {NOBODY}" in caplog.text
    assert list(_fallback(tmpdir_).glob("c/*/*.so"))


@pytest.mark.cc
@needs_root
def test_entry_of_another_user_is_rebuilt(cache_dir: Path, tmpdir_: Path,
                                          caplog: pytest.LogCaptureFixture) -> None:
    cache_dir.mkdir()
    so = _plant(cache_dir)
    os.chown(so, NOBODY, NOBODY)
    with caplog.at_level(logging.WARNING, logger="polyopt.runtime"):
        assert load_library(ADD).add(1, 2) == 3
    assert f"owned by uid {NOBODY}" in caplog.text
    assert so.stat().st_uid == os.geteuid()  # replaced in place: the directory is ours
    assert not _fallback(tmpdir_).exists()


@pytest.mark.cc
def test_group_writable_entry_is_rebuilt(cache_dir: Path) -> None:
    cache_dir.mkdir()
    so = _plant(cache_dir)
    os.chmod(so, 0o775)
    assert load_library(ADD).add(1, 2) == 3
    assert stat.S_IMODE(so.stat().st_mode) == 0o700


@pytest.mark.cc
def test_symlinked_lock_file_does_not_create_its_target(cache_dir: Path, tmp_path: Path,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    key = compiler._prepare(ADD, None).key
    lock = cache.entry_path(cache_dir, key, ".lock")
    lock.parent.mkdir(parents=True, mode=0o700)
    victim = tmp_path / "victim"
    lock.symlink_to(victim)
    with caplog.at_level(logging.WARNING, logger="polyopt.runtime"):
        assert load_library(ADD).add(2, 2) == 4
    assert not victim.exists() and lock.is_symlink()
    assert str(lock) in caplog.text


@pytest.mark.cc
def test_cache_dirs_and_files_are_private(cache_dir: Path) -> None:
    old = os.umask(0o022)
    try:
        so = compile_shared(ADD)
    finally:
        os.umask(old)
    for d in (cache_dir, cache_dir / "c", so.parent):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d
    assert stat.S_IMODE(so.stat().st_mode) == 0o700
    for suffix in (".json", ".c", ".lock"):
        assert stat.S_IMODE(so.with_suffix(suffix).stat().st_mode) == 0o600, suffix


@pytest.mark.cc
def test_untrusted_fallback_compiles_uncached(cache_dir: Path, tmpdir_: Path,
                                              caplog: pytest.LogCaptureFixture) -> None:
    cache_dir.mkdir(mode=0o777)
    os.chmod(cache_dir, 0o777)
    _fallback(tmpdir_).mkdir(mode=0o777)
    os.chmod(_fallback(tmpdir_), 0o777)
    with caplog.at_level(logging.WARNING, logger="polyopt.runtime"):
        assert load_library(ADD).add(3, 4) == 7
    assert "compiling uncached" in caplog.text
    assert not list(cache_dir.rglob("*.so")) and not list(_fallback(tmpdir_).rglob("*.so"))


UNCACHED = """
from polyopt.runtime.compiler import compile_shared, load_library
for i in range(5):
    src = f"int f{i}(void) {{ return {i}; }}\\n"
    assert getattr(load_library(src), f"f{i}")() == i
    assert compile_shared(src).is_file()
"""


@pytest.mark.cc
def test_uncached_compiles_leave_no_temp_dirs(tmpdir_: Path) -> None:
    env = {**os.environ, "POLYOPT_NO_CACHE": "1", "TMPDIR": str(tmpdir_)}
    proc = subprocess.run([sys.executable, "-c", UNCACHED], env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert not list(tmpdir_.iterdir())


@pytest.mark.cc
def test_uncached_load_leaves_no_object(monkeypatch: pytest.MonkeyPatch, tmpdir_: Path) -> None:
    monkeypatch.setenv("POLYOPT_NO_CACHE", "1")
    assert load_library(ADD).add(1, 1) == 2
    assert not list(tmpdir_.rglob("*.so"))


KILLER = """#!/bin/sh
case "$*" in *--version*) echo "fake cc 1.0"; exit 0;; esac
kill -9 $PPID
sleep 5
"""


def _age(path: Path, seconds: float) -> None:
    for p in (path, *path.iterdir()):
        st = p.lstat()
        os.utime(p, (st.st_atime - seconds, st.st_mtime - seconds), follow_symlinks=False)


@pytest.mark.cc
def test_dir_of_a_killed_compile_is_removed_on_the_next_run(tmp_path: Path,
                                                            tmpdir_: Path) -> None:
    killer = tmp_path / "killer-cc"
    killer.write_text(KILLER)
    killer.chmod(0o755)
    env = {**os.environ, "CC": str(killer), "TMPDIR": str(tmpdir_)}
    proc = subprocess.run([sys.executable, "-c", UNCACHED], env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == -9, proc.stderr
    # the first compile is the compiler self-test's (runtime/miscompiles.py)
    (left,) = [*tmpdir_.glob("polyopt-cc-*"), *tmpdir_.glob("polyopt-selftest-*")]
    _age(left, 3600)
    compile_shared(ADD)
    assert not left.exists()


@pytest.mark.cc
def test_live_temp_dirs_are_kept(tmpdir_: Path) -> None:
    from polyopt.runtime import tempdirs

    with tempdirs.private_tempdir("polyopt-cc-") as live:
        _age(live, 3600)
        tempdirs._CLEANED.clear()
        compile_shared(ADD)
        assert live.is_dir()
    assert not live.exists()
    young = tmpdir_ / "polyopt-cc-young"
    young.mkdir()
    foreign = tmpdir_ / "polyopt-cc-notours"
    foreign.mkdir()
    _age(foreign, 7 * 86400)
    if os.geteuid() == 0:
        os.chown(foreign, NOBODY, NOBODY)
    tempdirs._CLEANED.clear()
    compile_shared(ADD + "\n")
    assert young.is_dir() and foreign.is_dir() == (os.geteuid() == 0)
    shutil.rmtree(foreign, ignore_errors=True)


@pytest.mark.cuda
def test_planted_cubin_in_world_writable_cache_is_not_used(cache_dir: Path,
                                                           tmpdir_: Path) -> None:
    from polyopt.runtime import nvcc

    source = 'extern "C" __global__ void k(float *x) { x[threadIdx.x] = 1.0f; }\n'
    good, report = nvcc.build_cubin(source)
    (cubin,) = cache_dir.glob("c/*/*.cubin")
    cubin.write_bytes(b"planted")
    os.chmod(cache_dir, 0o777)
    cache.clear_memory()  # as in a new process
    assert nvcc.build_cubin(source) == (good, report)
    assert list(_fallback(tmpdir_).glob("c/*/*.cubin"))


def test_tuning_database_avoids_a_world_writable_cache_dir(cache_dir: Path,
                                                           tmpdir_: Path) -> None:
    from polyopt.tuning.db import default_path

    assert default_path() == cache_dir / "tuning.sqlite"
    os.chmod(cache_dir, 0o777)
    cache.clear_memory()
    assert default_path() == _fallback(tmpdir_) / "tuning.sqlite"


def test_cache_under_a_parent_writable_by_all_is_refused(tmp_path: Path, tmpdir_: Path) -> None:
    parent = tmp_path / "shared"
    parent.mkdir()
    os.chmod(parent, 0o775)  # group-writable parents pass (user-private groups, umask 002)
    assert cache.usable_root(parent / "cache") == parent / "cache"
    os.chmod(parent, 0o777)  # anyone could rename cache/ away and put their own in its place
    cache.clear_memory()
    assert cache.usable_root(parent / "cache") == _fallback(tmpdir_)
    os.chmod(parent, 0o1777)
    cache.clear_memory()
    assert cache.usable_root(parent / "cache") == parent / "cache"


@needs_root
def test_cache_under_a_parent_of_another_user_is_refused(tmp_path: Path, tmpdir_: Path) -> None:
    parent = tmp_path / "theirs"
    parent.mkdir()
    os.chown(parent, NOBODY, NOBODY)
    assert cache.usable_root(parent / "cache") == _fallback(tmpdir_)


# ---- every file read from a cache root passes one rule (polyopt.trust.read_trusted): a
# regular file of ours, not writable by group or others, no larger than its kind's cap, read
# without following a symlink or blocking. Each kind of file, each way of being bad.

FOREIGN = 12345  # the uid: no user of this machine
T = TypeVar("T")
BAD = ["fifo", "dev-zero", "foreign", "0666", "oversized"]
BASE = Machine(64, 32)


def _in_time(fn: Callable[[], T]) -> T:
    """``fn()``, which must not block: run in a thread that is given 10 s (it takes ms), so
    that a read that hangs fails the test instead of hanging the suite."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # re-raised in the test's thread
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(10)
    assert not thread.is_alive(), "the read blocked"
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]


def _spoil(path: Path, how: str, cap: int) -> str:
    """Make the file ``path`` bad in the way ``how``; what a refusal of it says."""
    if how == "foreign" and os.geteuid() != 0:
        pytest.skip("chown to another user needs root")
    if how == "fifo":
        path.unlink()
        os.mkfifo(path, 0o600)
        return "is not a regular file (a FIFO)"
    if how == "dev-zero":
        path.unlink()
        path.symlink_to("/dev/zero")
        return "is a symlink"
    if how == "foreign":
        os.chown(path, FOREIGN, FOREIGN)
        return f"is owned by uid {FOREIGN}"
    if how == "0666":
        os.chmod(path, 0o666)
        return "is writable by others (mode 0666)"
    os.truncate(path, cap + 1)  # sparse: nothing is written, and nothing must be read
    return f"is larger than the {cap}-byte cap"


_CAP_OF = {"cubin": "object", "ptxas log": "metadata"}  # the caps nvcc's files read under


def _cached_file(kind: str, root: Path) -> tuple[Path, Callable[[], bool]]:
    """A valid file of ``kind`` in the cache at ``root`` and whether its reader (in a new
    process: nothing remembered) uses it."""
    if kind in ("object", "metadata"):
        key = "ab" + "0" * 62
        cache.store(root, key, b"\x7fELF not really", "int f;", {})

        def used() -> bool:
            cache.clear_memory()
            return cache.lookup(root, key) is not None
        return cache.entry_path(root, key, ".so" if kind == "object" else ".json"), used
    if kind in ("cubin", "ptxas log"):
        key, report = "cd" + "0" * 62, "ef" + "0" * 62
        trust.make_private_dirs(root, Path("c", "cd"))
        trust.make_private_dirs(root, Path("c", "ef"))
        cache.atomic_write(cache.entry_path(root, key, ".cubin"), b"not really a cubin")
        cache.atomic_write(cache.entry_path(root, report, ".log"), b"ptxas info")
        return (cache.entry_path(root, key, ".cubin") if kind == "cubin" else
                cache.entry_path(root, report, ".log"),
                lambda: nvcc._cached(config.current(), key, report) is not None)
    if kind == "record":
        key = records.key_of("a record")
        records.write(root, "objects", key, {"object": "f" * 64})
        return (records.record_path(root, "objects", key),
                lambda: records.read(root, "objects", key) is not None)
    path = config.machine_profile()
    assert path is not None and root in path.parents
    mm.save_profile(path, {"prefetch_streams": 40}, {})
    return path, lambda: mm.measured(BASE, path).prefetch_streams == 40


@pytest.mark.parametrize("how", BAD)
@pytest.mark.parametrize("kind", ["object", "metadata", "record", "profile", "cubin",
                                  "ptxas log"])
def test_a_bad_cache_file_is_ignored_with_a_warning(
        cache_dir: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        kind: str, how: str) -> None:
    monkeypatch.delenv("POLYOPT_PROFILE", raising=False)
    path, used = _cached_file(kind, cache.usable_root(cache_dir))
    assert _in_time(used)  # the good file is read
    why = _spoil(path, how, trust.CAPS[_CAP_OF.get(kind, kind)])
    with caplog.at_level(logging.WARNING, logger="polyopt.runtime"):
        assert not _in_time(used)
    assert str(path) in caplog.text and why in caplog.text
    assert len(caplog.records) == 1


def test_read_trusted_reads_at_most_the_cap(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * 100)
    assert trust.read_trusted(path, 100) == b"x" * 100
    with pytest.raises(trust.UntrustedLocationError, match="larger than the 99-byte cap"):
        trust.read_trusted(path, 99)
    with pytest.raises(FileNotFoundError):
        trust.read_trusted(tmp_path / "missing", 100)


def test_a_device_node_is_refused_without_being_opened(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("mknod needs root")
    node = tmp_path / "zero"
    os.mknod(node, 0o600 | stat.S_IFCHR, os.makedev(1, 5))  # /dev/zero's numbers
    with pytest.raises(trust.UntrustedLocationError, match="a character device"):
        _in_time(lambda: trust.read_trusted(node, 1 << 20))


def test_the_profile_of_a_refused_root_is_never_read(
        cache_dir: Path, tmpdir_: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """A world-writable POLYOPT_CACHE_DIR is refused for the private fallback: the profile
    is read from, and saved to, the fallback; the one planted in the refused root is not."""
    monkeypatch.delenv("POLYOPT_PROFILE", raising=False)
    monkeypatch.delenv(mm.ENV_VAR, raising=False)
    name = _in_time(config.machine_profile).name  # type: ignore[union-attr]
    planted = cache_dir / "machine" / name
    planted.parent.mkdir()
    planted.write_text('{"fields": {"prefetch_streams": 40}}')
    os.chmod(planted, 0o666)
    if os.geteuid() == 0:
        os.chown(planted, FOREIGN, FOREIGN)
    os.chmod(cache_dir, 0o777)
    mm.forget()
    try:
        with caplog.at_level(logging.WARNING, logger="polyopt.runtime"):
            assert config.machine_profile() == _fallback(tmpdir_) / "machine" / name
            assert mm.host().prefetch_streams != 40
        assert f"refusing the cache dir {cache_dir}" in caplog.text
        mm.save_profile(_fallback(tmpdir_) / "machine" / name, {"prefetch_streams": 41}, {})
        assert mm.host().prefetch_streams == 41
        assert stat.S_IMODE((_fallback(tmpdir_) / "machine" / name).stat().st_mode) == 0o600
    finally:
        mm.forget()


def test_a_profile_in_a_directory_of_another_user_is_ignored(
        cache_dir: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.delenv("POLYOPT_PROFILE", raising=False)
    path, used = _cached_file("profile", cache.usable_root(cache_dir))
    os.chmod(path.parent, 0o777)  # anyone could have put the file there
    with caplog.at_level(logging.WARNING, logger="polyopt.runtime"):
        assert not _in_time(used)
    assert f"ignoring the machine profile {path}" in caplog.text
    assert "writable by others" in caplog.text


# ---- the tuning database in a shared root with the sticky bit, as the README allows:
# anyone can create tuning.sqlite there before us.

MUL = "def mul(float(N) A) -> (B) { B(i) = A(i) * 2 }"


def _shared_database(cache_dir: Path, how: str) -> tuple[Path, str]:
    """The default database, made and then spoiled ``how``, in a sticky world-writable root."""
    cache_dir.mkdir()
    os.chmod(cache_dir, 0o1777)
    path = db.default_path()
    assert path == cache_dir / "tuning.sqlite"
    db.Database(path).close()
    return path, _spoil(path, how, trust.CAPS["database"])


@pytest.mark.parametrize("how", BAD)
def test_a_bad_tuning_database_in_a_shared_root_is_refused(cache_dir: Path, how: str) -> None:
    path, why = _shared_database(cache_dir, how)
    with pytest.raises(db.DatabaseError, match="refusing the tuning database") as err:
        _in_time(lambda: db.Database(path))
    assert str(path) in str(err.value) and why in str(err.value)
    state = _in_time(db.state)  # what every compile asks: a few system calls, no hang
    assert state.startswith("unreadable") and why in state


@pytest.mark.parametrize("how", ["fifo", "foreign"])
def test_a_compile_beside_a_bad_tuning_database_runs_untuned(cache_dir: Path,
                                                             how: str) -> None:
    _shared_database(cache_dir, how)
    definition = lang.define(MUL)
    with pytest.warns(TuningWarning, match="refusing the tuning database"):
        assert _in_time(lambda: tuned_schedule(definition, {"N": 8}, "c")) is None


def test_a_fifo_as_tuning_database_does_not_hang_a_compile(cache_dir: Path) -> None:
    """The issue's reproducer: compile asks the database's state and its best record."""
    _shared_database(cache_dir, "fifo")
    with pytest.warns(TuningWarning, match="is not a regular file"):
        kernel = _in_time(lambda: polyopt.compile(MUL, sizes={"N": 8}))
    assert "t_A[(i_i)] *" in kernel.source


def test_another_users_sidecar_file_refuses_the_database(cache_dir: Path) -> None:
    """SQLite would replay a planted journal or WAL into the database."""
    cache_dir.mkdir()
    os.chmod(cache_dir, 0o1777)
    path = db.default_path()
    wal = path.with_name(path.name + "-wal")
    wal.write_bytes(b"")
    os.chmod(wal, 0o666)
    with pytest.raises(db.DatabaseError, match=f"{wal} is writable by others"):
        db.Database(path)


def test_a_new_tuning_database_is_private(cache_dir: Path) -> None:
    old = os.umask(0o022)
    try:
        db.Database(db.default_path()).close()
    finally:
        os.umask(old)
    assert stat.S_IMODE(db.default_path().stat().st_mode) == 0o600
