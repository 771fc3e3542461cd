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
from pathlib import Path

import pytest

from polyopt.runtime import cache, compiler
from polyopt.runtime.compiler import compile_shared, load_library

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
    (left,) = tmpdir_.glob("polyopt-cc-*")
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
    from polyopt.tune.db import default_path

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
