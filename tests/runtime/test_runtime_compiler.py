"""compile_shared / load_library: building, caching, flags and error reporting."""

from __future__ import annotations

import ctypes
import logging
import os
import stat
from pathlib import Path

import pytest

from polyopt.errors import CompileError
from polyopt.runtime import cache, compiler
from polyopt.runtime.compiler import compile_shared, compiler_identity, load_library

ADD = "int add(int a, int b) { return a + b; }\n"


def _count_runs(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Record every compiler invocation (still running it)."""
    calls: list[list[str]] = []
    real = compiler._run

    def spy(job, flags, src, out):  # type: ignore[no-untyped-def]
        calls.append(list(flags))
        return real(job, flags, src, out)

    monkeypatch.setattr(compiler, "_run", spy)
    return calls


@pytest.mark.cc
def test_compile_and_call(cache_dir: Path) -> None:
    lib = load_library(ADD)
    lib.add.argtypes = [ctypes.c_int, ctypes.c_int]
    assert lib.add(40, 2) == 42
    path = compile_shared(ADD)
    assert path.is_file() and cache_dir in path.parents
    assert path.with_suffix(".c").read_text() == ADD
    assert load_library(ADD) is lib


@pytest.mark.cc
def test_second_compile_hits_disk_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _count_runs(monkeypatch)
    first = compile_shared(ADD)
    mtime = first.stat().st_mtime_ns
    cache.clear_memory()  # as if from a new process: must come from disk
    assert compile_shared(ADD) == first
    assert len(calls) == 1 and first.stat().st_mtime_ns == mtime


@pytest.mark.cc
def test_memory_hit_does_not_touch_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    first = compile_shared(ADD)

    def boom(*args: object) -> bool:
        raise AssertionError("disk touched")

    monkeypatch.setattr(cache, "_verify", boom)
    assert compile_shared(ADD) == first


def test_key_depends_on_source_flags_and_compiler() -> None:
    base = cache.cache_key(ADD, "gcc 12", ["-O3"])
    assert base == cache.cache_key(ADD, "gcc 12", ("-O3",))
    others = {cache.cache_key(ADD + " ", "gcc 12", ["-O3"]),
              cache.cache_key(ADD, "gcc 13", ["-O3"]),
              cache.cache_key(ADD, "gcc 12", ["-O2"]),
              cache.cache_key(ADD, "gcc 12", ["-O3", "-g"])}
    assert len(others) == 4 and base not in others


@pytest.mark.cc
def test_flags_and_cflags_give_distinct_objects(monkeypatch: pytest.MonkeyPatch) -> None:
    o1, o2 = compile_shared(ADD, flags=["-O1"]), compile_shared(ADD, flags=["-O2"])
    assert o1 != o2 and o1.is_file() and o2.is_file()  # -fPIC -shared were added
    src = "int value(void) { return VALUE; }\n"
    monkeypatch.setenv("POLYOPT_CFLAGS", "-DVALUE=7")
    assert load_library(src).value() == 7
    monkeypatch.setenv("POLYOPT_CFLAGS", "-DVALUE=8")
    assert load_library(src).value() == 8


@pytest.mark.cc
def test_syntax_error(cache_dir: Path) -> None:
    bad = "int add(int a, int b) { return a + ; }\n"
    with pytest.raises(CompileError) as info:
        compile_shared(bad)
    err = info.value
    assert "error" in err.log and "expected expression" in err.log
    saved = Path(err.source_path)
    assert saved.read_text() == bad and cache_dir / "failed" in saved.parents
    assert str(saved) in err.log  # the log points at the saved copy, not a deleted temp file
    assert not list(cache_dir.glob("c/*/*.so"))


def test_missing_compiler(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CC", "/nonexistent/cc")
    with pytest.raises(CompileError, match=r"/nonexistent/cc.*set CC"):
        compile_shared(ADD)


@pytest.mark.cc
def test_compiler_identity() -> None:
    ident = compiler_identity("cc")
    assert ident == compiler_identity(["cc"]) and os.sep in ident and "|" in ident


@pytest.mark.cc
def test_no_cache_compiles_every_time(monkeypatch: pytest.MonkeyPatch, cache_dir: Path) -> None:
    monkeypatch.setenv("POLYOPT_NO_CACHE", "1")
    calls = _count_runs(monkeypatch)
    a, b = compile_shared(ADD), compile_shared(ADD)
    assert a != b and a.is_file() and b.is_file() and len(calls) == 2
    assert load_library(ADD).add(1, 2) == 3
    assert not (cache_dir / "c").exists()


@pytest.mark.cc
def test_march_native_unsupported_falls_back(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                             caplog: pytest.LogCaptureFixture) -> None:
    fake = tmp_path / "fakecc"
    fake.write_text('#!/bin/sh\nfor a in "$@"; do [ "$a" = -march=native ] && '
                    '{ echo "cc1: error: unknown value \'native\' for \'-march\'" >&2; exit 1; }'
                    '; done\nexec cc "$@"\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("CC", str(fake))
    calls = _count_runs(monkeypatch)
    with caplog.at_level(logging.WARNING, logger="polyopt.runtime"):
        assert load_library(ADD).add(2, 2) == 4
    assert "-march=native" in calls[0] and "-march=native" not in calls[1]
    assert "without it" in caplog.text
    compile_shared(ADD, flags=["-O2", "-march=native"])  # remembered: one run, no retry
    assert len(calls) == 3


@pytest.mark.cc
def test_unusable_cache_dir_falls_back_to_uncached(monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path: Path,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    monkeypatch.setenv("POLYOPT_CACHE_DIR", str(blocker))
    with caplog.at_level(logging.WARNING, logger="polyopt.runtime"):
        assert load_library(ADD).add(5, 6) == 11
    assert "compiling uncached" in caplog.text
    with pytest.raises(CompileError) as info:
        compile_shared("int f( {")
    assert Path(info.value.source_path).read_text() == "int f( {"


