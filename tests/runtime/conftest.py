"""Shared fixtures for the runtime tests: an isolated cache dir."""

from __future__ import annotations

from pathlib import Path

import pytest

from polyopt.runtime import cache


@pytest.fixture(autouse=True)
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point every test at its own empty cache, with no stray knobs from the caller's shell."""
    root = tmp_path / "cache"
    monkeypatch.setenv("POLYOPT_CACHE_DIR", str(root))
    for name in ("POLYOPT_NO_CACHE", "POLYOPT_CFLAGS", "POLYOPT_DEBUG"):
        monkeypatch.delenv(name, raising=False)
    cache.clear_memory()
    return root
