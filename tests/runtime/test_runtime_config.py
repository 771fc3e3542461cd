"""The environment knobs in polyopt.config are read at call time and validated."""

from __future__ import annotations

from pathlib import Path

import platformdirs
import pytest

from polyopt import config
from polyopt.errors import OptionError


def test_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("POLYOPT_CACHE_DIR", "CC"):
        monkeypatch.delenv(name, raising=False)
    cfg = config.current()
    assert cfg.cache_dir == Path(platformdirs.user_cache_dir("polyopt"))
    assert (cfg.no_cache, cfg.debug, cfg.cc, cfg.cflags) == (False, 0, ("cc",), ())


def test_read_at_call_time(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("POLYOPT_CACHE_DIR", str(tmp_path / "x"))
    assert config.cache_dir() == tmp_path / "x"
    monkeypatch.setenv("CC", "ccache gcc-12")
    monkeypatch.setenv("POLYOPT_CFLAGS", "-DA=1 '-DB=two words'")
    assert config.cc_command() == ("ccache", "gcc-12")
    assert config.extra_cflags() == ("-DA=1", "-DB=two words")


@pytest.mark.parametrize(("value", "expected"),
                         [("1", True), ("TRUE", True), ("on", True), ("0", False), ("", False),
                          ("no", False)])
def test_no_cache_values(monkeypatch: pytest.MonkeyPatch, value: str, expected: bool) -> None:
    monkeypatch.setenv("POLYOPT_NO_CACHE", value)
    assert config.no_cache() is expected


@pytest.mark.parametrize(("name", "value"),
                         [("POLYOPT_NO_CACHE", "maybe"), ("POLYOPT_DEBUG", "5"),
                          ("POLYOPT_DEBUG", "loud"), ("POLYOPT_CFLAGS", "'unclosed")])
def test_bad_values_raise_option_error(monkeypatch: pytest.MonkeyPatch, name: str,
                                       value: str) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(OptionError, match=name):
        config.current()


def test_debug_level(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POLYOPT_DEBUG", " 3 ")
    assert config.debug_level() == 3


def test_scratch_cache_sets_and_restores_the_cache_dir(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POLYOPT_CACHE_DIR", str(tmp_path / "user"))
    with config.scratch_cache() as scratch:
        assert config.cache_dir() == scratch and scratch.is_dir()
        with config.scratch_cache(tmp_path) as inner:
            assert config.cache_dir() == inner and inner.parent == tmp_path
        assert config.cache_dir() == scratch
    assert config.cache_dir() == tmp_path / "user"
    assert not scratch.exists() and inner.is_dir()  # a parent's children are its owner's
