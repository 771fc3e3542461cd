"""Shared fixtures for the runtime tests: an isolated cache dir and the ``cc`` skip."""

from __future__ import annotations

import os
import shlex
import shutil
from pathlib import Path

import pytest

from polyopt.runtime import cache


def have_cc() -> bool:
    """Whether the compiler the runtime would use (``CC`` or ``cc``) is on PATH."""
    words = shlex.split(os.environ.get("CC", "")) or ["cc"]
    return shutil.which(words[0]) is not None


@pytest.fixture(autouse=True)
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point every test at its own empty cache, with no stray knobs from the caller's shell."""
    root = tmp_path / "cache"
    monkeypatch.setenv("POLYOPT_CACHE_DIR", str(root))
    for name in ("POLYOPT_NO_CACHE", "POLYOPT_CFLAGS", "POLYOPT_DEBUG"):
        monkeypatch.delenv(name, raising=False)
    cache.clear_memory()
    return root


@pytest.fixture(autouse=True)
def _skip_without_cc(request: pytest.FixtureRequest) -> None:
    if request.node.get_closest_marker("cc") and not have_cc():
        pytest.skip("needs the system C compiler: `cc` (or $CC) is not on PATH")
