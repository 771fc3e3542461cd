"""Measuring the host's memory system (``polyopt machine --calibrate``): the rules that turn
readings into machine fields, on synthetic readings, and one small real calibration."""

from __future__ import annotations

import dataclasses
import os
import tempfile
from pathlib import Path

import pytest

from polyopt.cli import main
from polyopt.costmodel import machine as mm
from polyopt.costmodel.machine import MEASURED, Machine
from polyopt.runtime import probe

MIB = 1 << 20


def test_the_last_level_ends_where_the_rate_falls_halfway_to_memory() -> None:
    reads = {16 * MIB: 16.0, 32 * MIB: 15.5, 64 * MIB: 14.0, 128 * MIB: 7.0, 256 * MIB: 5.0}
    # the geometric mean of 16 and 4 is 8: 64 MiB is the last read faster
    assert probe.last_level_bytes(reads, memory=4.0) == 64 * MIB


def test_a_last_level_no_faster_than_memory_sets_nothing() -> None:
    assert probe.last_level_bytes({16 * MIB: 5.0, 32 * MIB: 4.9}, memory=4.0) is None


def test_streams_beyond_the_prefetchers_fit_their_share() -> None:
    # 4-16 rows at the full rate, then each count as the model's share(p=16, u=0.4) predicts
    base, p, u = 0.1, 16, 0.4
    rows = {n: base for n in (2, 4, 6, 8, 12, 16)}
    rows |= {n: base / (p / n + (1 - p / n) / u) for n in (24, 32, 48, 64)}
    assert probe.prefetched_streams(rows) == (16, pytest.approx(0.4, abs=0.01))


def test_no_drop_keeps_every_count_and_fits_no_share() -> None:
    rows = {n: 0.06 * (0.9 if n == 2 else 1.0) for n in (2, 4, 6, 8, 12, 16, 32, 64)}
    assert probe.prefetched_streams(rows) == (64, None)


@pytest.mark.cc
def test_a_small_calibration_gives_valid_fields() -> None:
    m = Machine(64, 32, cores=1, l2_bytes=1 * MIB, l3_bytes=8 * MIB)
    got = probe.calibrate(m, buffer_bytes=64 * MIB)
    assert set(got.fields) <= MEASURED
    assert {"memory_bytes_per_cycle", "core_memory_share", "prefetch_streams"} <= set(got.fields)
    dataclasses.replace(m, **got.fields)  # each value valid for its field
    assert "memory_bytes_per_cycle" in got.describe()
    assert probe.cycle_seconds(m) < 1e-8


def test_the_command_line_shows_the_model_and_where_its_profile_is(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    path = tmp_path / "none-yet.json"
    monkeypatch.setenv("POLYOPT_PROFILE", str(path))
    assert main(["machine"]) == 0
    out = capsys.readouterr().out
    assert str(path) in out and "none yet" in out and "memory_bytes_per_cycle=" in out
    assert not path.exists()


def test_a_broken_profile_is_an_error_that_says_what_to_do(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('{"fields": {"prefetch_streams": -3}}')
    monkeypatch.setenv("POLYOPT_PROFILE", str(path))
    mm.forget()
    try:
        assert main(["machine"]) == 2
    finally:
        mm.forget()
    err = capsys.readouterr().err
    assert str(path) in err and "prefetch_streams" in err and "--calibrate" in err


def test_the_command_line_names_the_profile_of_the_cache_root_in_use(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path, cache_dir: Path) -> None:
    """A world-writable cache dir is refused: the profile shown (and the one a calibration
    saves) is the private fallback's, never the refused root's."""
    private = tmp_path / "tmp"
    private.mkdir(mode=0o700)
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    monkeypatch.delenv("POLYOPT_PROFILE")
    cache_dir.mkdir(mode=0o777)
    os.chmod(cache_dir, 0o777)
    mm.forget()
    try:
        assert main(["machine"]) == 0
    finally:
        mm.forget()
    (line,) = [s for s in capsys.readouterr().out.splitlines() if s.startswith("profile:")]
    assert line.startswith(f"profile: {private / f'polyopt-{os.geteuid()}' / 'machine'}/")
