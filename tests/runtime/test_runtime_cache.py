"""The on-disk cache: corruption is detected and rebuilt; processes share it safely."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from polyopt.runtime import cache, compiler
from polyopt.runtime.compiler import compile_shared, load_library

ADD = "int add(int a, int b) { return a + b; }\n"

CHILD = """
import pathlib, sys, time
from polyopt.runtime.compiler import load_library
root, me, src = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3]
(root / f"ready-{me}").touch()
while not (root / "go").exists():
    time.sleep(0.001)
print(load_library(src).add(20, 22))
"""


def _entry(cache_dir: Path) -> Path:
    (so,) = cache_dir.glob("c/*/*.so")
    return so


def _runs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = compiler._run
    monkeypatch.setattr(compiler, "_run", lambda *a: calls.append(1) or real(*a))
    return calls


@pytest.mark.cc
def test_truncated_object_is_rebuilt(monkeypatch: pytest.MonkeyPatch, cache_dir: Path) -> None:
    so = compile_shared(ADD)
    good = so.read_bytes()
    so.write_bytes(good[:100])
    cache.clear_memory()
    calls = _runs(monkeypatch)
    assert compile_shared(ADD) == so and len(calls) == 1
    assert so.stat().st_size == len(good)
    assert load_library(ADD).add(1, 1) == 2


@pytest.mark.cc
def test_unloadable_object_with_valid_checksum_is_rebuilt(monkeypatch: pytest.MonkeyPatch,
                                                          cache_dir: Path) -> None:
    so = compile_shared(ADD)
    garbage = b"not an ELF file at all"
    so.write_bytes(garbage)
    meta_path = so.with_suffix(".json")
    meta = json.loads(meta_path.read_text())
    meta.update(size=len(garbage), sha256=hashlib.sha256(garbage).hexdigest())
    meta_path.write_text(json.dumps(meta))
    cache.clear_memory()
    calls = _runs(monkeypatch)
    assert load_library(ADD).add(3, 4) == 7 and len(calls) == 1


@pytest.mark.cc
def test_garbage_metadata_is_rebuilt(monkeypatch: pytest.MonkeyPatch, cache_dir: Path) -> None:
    so = compile_shared(ADD)
    so.with_suffix(".json").write_text("{trunc")
    cache.clear_memory()
    calls = _runs(monkeypatch)
    assert compile_shared(ADD) == so and len(calls) == 1
    assert cache.lookup(cache_dir, so.stem) == so


@pytest.mark.cc
def test_concurrent_processes_share_one_entry(tmp_path: Path, cache_dir: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    n = 3
    monkeypatch.setenv("POLYOPT_DEBUG", "1")  # children print each compiler command
    procs = [subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path), str(i), ADD],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(n)]
    deadline = time.monotonic() + 10
    while len(list(tmp_path.glob("ready-*"))) < n and time.monotonic() < deadline:
        time.sleep(0.005)
    (tmp_path / "go").touch()
    compiles = 0
    for proc in procs:
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        assert out.strip() == "42"
        compiles += err.count("[polyopt] cc ")
    assert compiles == 1  # the others waited on the key's lock, then hit the cache
    so = _entry(cache_dir)
    cache.clear_memory()
    assert cache.lookup(cache_dir, so.stem) == so
    assert not list(cache_dir.rglob("*.tmp"))


def test_atomic_write_leaves_no_temp_on_failure(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "f.bin"
    cache.atomic_write(target, b"one")

    def fail(src: str, dst: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(cache.os, "replace", fail)
    with pytest.raises(OSError):
        cache.atomic_write(target, b"two")
    assert target.read_bytes() == b"one" and list(tmp_path.iterdir()) == [target]
