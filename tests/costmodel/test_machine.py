"""The analytic machine model: cache parsing, host detection, overrides and GEMM blocking."""

from __future__ import annotations

import ast
import ctypes.util
import dataclasses
import inspect
import json
import logging
import math
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from polyopt import api
from polyopt import host as hostinfo
from polyopt.costmodel import machine as mm
from polyopt.costmodel.machine import (
    Blocking,
    Machine,
    cube_tile,
    gemm_blocking,
    host,
    parse_cache_size,
)
from polyopt.errors import OptionError

AVX512 = Machine(vector_bytes=64, vector_registers=32, cores=2, l1d_bytes=48 << 10,
                 l2_bytes=2 << 20, l3_bytes=32 << 20)
AVX2 = Machine(vector_bytes=32, vector_registers=16, cores=8, l1d_bytes=32 << 10,
               l2_bytes=256 << 10, l3_bytes=8 << 20)
NEON = Machine(vector_bytes=16, vector_registers=32, cores=4, l1d_bytes=64 << 10,
               l2_bytes=1 << 20, l3_bytes=0)


@pytest.fixture(autouse=True)
def _fresh_host(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv(mm.ENV_VAR, raising=False)
    yield


@pytest.mark.parametrize(("text", "size"), [
    ("48K", 48 << 10), ("2048K", 2 << 20), ("32M", 32 << 20), ("1G", 1 << 30),
    ("512", 512), ("64K\n", 64 << 10), (" 1 MiB ", 1 << 20), ("32kb", 32 << 10),
])
def test_parse_cache_size(text: str, size: int) -> None:
    assert parse_cache_size(text) == size


@pytest.mark.parametrize("text", ["", "K", "1.5M", "-4K", "12X", "4 K M"])
def test_parse_cache_size_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="not a cache size"):
        parse_cache_size(text)


def test_host_smoke() -> None:
    machine = host()
    for field in dataclasses.fields(machine):
        value = getattr(machine, field.name)
        if field.name in mm.REAL_FIELDS:
            assert isinstance(value, float) and value > 0
            continue
        assert isinstance(value, int)
        assert value >= 0 if field.name == "l3_bytes" else value >= 1
    assert machine.vector_bytes in (16, 32, 64)
    assert host() is machine            # cached
    assert "L1d" in machine.describe()
    assert "\n" not in machine.describe()


def test_env_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(mm.ENV_VAR, "vector_bytes=32, l2_bytes=1048576,l3_bytes=0,l1d_bytes=48K,")
    machine = host()
    assert (machine.vector_bytes, machine.l2_bytes) == (32, 1 << 20)
    assert (machine.l3_bytes, machine.l1d_bytes) == (0, 48 << 10)


def test_env_is_read_at_every_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(mm.ENV_VAR, "l2_bytes=1M")
    assert host().l2_bytes == 1 << 20
    monkeypatch.setenv(mm.ENV_VAR, "l2_bytes=512K")
    assert host().l2_bytes == 512 << 10  # no cache to clear: the next compile sees it


@pytest.mark.parametrize(("spec", "bad"), [
    ("vector_bits=256", "vector_bits"), ("l2_bytes=big", "l2_bytes"),
    ("cores", "cores"), ("fma_units=0", "fma_units"), ("l1d_bytes=-1", "l1d_bytes"),
])
def test_env_override_errors(monkeypatch: pytest.MonkeyPatch, spec: str, bad: str) -> None:
    monkeypatch.setenv(mm.ENV_VAR, spec)
    with pytest.raises(OptionError, match=bad) as info:
        host()
    assert "valid fields: vector_bytes, vector_registers" in str(info.value)


def test_machine_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="vector_registers"):
        Machine(vector_bytes=16, vector_registers=0)
    assert Machine(vector_bytes=16, vector_registers=16, l3_bytes=0).l3_bytes == 0


def test_read_caches_from_fake_sysfs(tmp_path: Path) -> None:
    entries = [(1, "Data", "48K"), (1, "Instruction", "32K"), (2, "Unified", "2048K"),
               (3, "Unified", "32M")]
    for i, (level, kind, size) in enumerate(entries):
        index = tmp_path / f"index{i}"
        index.mkdir()
        for name, text in [("level", level), ("type", kind), ("size", size),
                           ("coherency_line_size", 64), ("ways_of_associativity", 12)]:
            (index / name).write_text(f"{text}\n")
    assert hostinfo.cache_sizes(tmp_path) == {"line_bytes": 64, "l1d_bytes": 48 << 10,
                                         "l1d_ways": 12, "l2_bytes": 2 << 20,
                                         "l3_bytes": 32 << 20}
    (tmp_path / "index3" / "level").write_text("4\n")     # no L3 any more
    assert hostinfo.cache_sizes(tmp_path)["l3_bytes"] == 0
    assert hostinfo.cache_sizes(tmp_path / "missing") == hostinfo.DEFAULT_CACHES


def test_vector_shape() -> None:
    assert mm._vector_shape("x86_64", {"avx", "avx2", "avx512f"}) == (64, 32)
    assert mm._vector_shape("x86_64", {"avx", "avx2"}) == (32, 16)
    assert mm._vector_shape("x86_64", {"avx"}) == (32, 16)
    assert mm._vector_shape("x86_64", {"sse4_2"}) == (16, 16)
    assert mm._vector_shape("aarch64", set()) == (16, 32)


def _check_blocking(machine: Machine, elem: int, b: Blocking) -> None:
    assert b.lanes == machine.vector_bytes // elem
    assert min(b.lanes, b.mr, b.nr, b.kc, b.mc, b.nc) >= 1
    vectors = b.nr // b.lanes
    assert b.nr % b.lanes == 0 and 1 <= vectors <= 4 and 1 <= b.mr <= 16
    assert b.mr * vectors + vectors + 1 <= machine.vector_registers
    assert b.mr * vectors >= machine.fma_latency * machine.fma_units
    assert b.kc % 8 == 0 and 16 <= b.kc <= 512
    assert (b.mr + b.nr) * b.kc * elem <= machine.l1d_bytes // 2
    assert (b.mr + b.nr) * (b.kc + 8) * elem > machine.l1d_bytes // 2 or b.kc == 512
    assert b.mc % b.mr == 0 and b.mr <= b.mc <= 1024
    assert b.mc * b.kc * elem <= machine.l2_bytes // 2
    assert b.nc % b.nr == 0 and b.nr <= b.nc <= 4096
    share = machine.l3_bytes // machine.cores if machine.l3_bytes else machine.l2_bytes
    assert b.kc * b.nc * elem <= share // 2
    assert f"{b.mr}x{b.nr}" in b.describe()


@pytest.mark.parametrize(("machine", "elem", "mr", "nr"), [
    (AVX512, 4, 14, 32), (AVX512, 8, 14, 16), (AVX2, 4, 6, 16), (AVX2, 8, 6, 8),
    (NEON, 4, 9, 12), (NEON, 8, 9, 6),
])
def test_gemm_blocking(machine: Machine, elem: int, mr: int, nr: int) -> None:
    b = gemm_blocking(machine, elem)
    assert (b.mr, b.nr) == (mr, nr)
    _check_blocking(machine, elem, b)


def test_gemm_blocking_avx512_float32_numbers() -> None:
    # (14 + 32) * kc * 4 <= 24 KiB -> kc = 128; 1 MiB / (128*4) = 2048 -> mc = 1022 (73 * 14);
    # 16 MiB per core / 2 / (128*4) = 16384 -> capped at 4096.
    assert gemm_blocking(AVX512, 4) == Blocking(lanes=16, mr=14, nr=32, kc=128, mc=1022, nc=4096)


def test_gemm_blocking_small_elements_and_tiny_caches() -> None:
    for elem in (1, 2):
        _check_blocking(AVX512, elem, gemm_blocking(AVX512, elem))
    tiny = Machine(vector_bytes=16, vector_registers=16, l1d_bytes=1 << 10, l2_bytes=1 << 10,
                   l3_bytes=0)
    b = gemm_blocking(tiny, 8)
    assert b.kc == 16 and b.mc == b.mr and b.nc == b.nr      # floors when nothing fits
    few = Machine(vector_bytes=16, vector_registers=4)       # latency rule cannot be met
    b = gemm_blocking(few, 4)
    assert b.mr * (b.nr // b.lanes) + b.nr // b.lanes + 1 <= 4


@pytest.mark.parametrize("elem", [0, 3, 32])  # 16: long double, a valid element
def test_bad_elem_bytes(elem: int) -> None:
    with pytest.raises(ValueError, match="elem_bytes"):
        gemm_blocking(AVX512, elem)
    with pytest.raises(ValueError, match="elem_bytes"):
        cube_tile(AVX512, elem, 2, 2)


def test_cube_tile() -> None:
    # 2 MiB L2: 3 * T^2 * 4 <= 1 MiB -> T = 256 (capped); 3 * 512^2 * 4 would not fit anyway.
    assert cube_tile(AVX512, 4, 3, 2) == 256
    # 256 KiB L2: 3 * T^2 * 8 <= 128 KiB -> T^2 <= 5461 -> T = 64.
    assert cube_tile(AVX2, 8, 3, 3) == 64
    assert cube_tile(AVX2, 8, 3, 1) == 256                  # 1-d strips are tiny
    tiny = Machine(vector_bytes=16, vector_registers=16, l2_bytes=1 << 10)
    assert cube_tile(tiny, 8, 4, 2) == 8                     # never below 8
    for machine in (AVX512, AVX2, NEON):
        for arrays in (1, 2, 5):
            for dims in (1, 2, 3, 4):
                t = cube_tile(machine, 4, arrays, dims)
                assert 8 <= t <= 256 and t & (t - 1) == 0
                assert t == 8 or arrays * t ** min(dims, 2) * 4 <= machine.l2_bytes // 2
                assert t == 256 or arrays * (2 * t) ** min(dims, 2) * 4 > machine.l2_bytes // 2
    with pytest.raises(ValueError, match="n_arrays"):
        cube_tile(AVX2, 4, 0, 2)


def test_spec_gives_back_the_same_machine() -> None:
    """A tuner's workers get the parent's model as a POLYOPT_MACHINE string."""
    m = Machine(32, 16, fma_latency=5, cores=3, l1d_bytes=1 << 15, l2_bytes=3 << 20, l3_bytes=0)
    assert mm._override(mm.host(), m.spec()) == m


def _cores_in_child(code: str, **env: str | None) -> list[str]:
    """What ``code`` prints in a child process whose environment has ``env`` (None: unset)."""
    child = {k: v for k, v in {**os.environ, **env}.items() if v is not None}
    done = subprocess.run([sys.executable, "-c", code], env=child, capture_output=True,
                          text=True, timeout=300, check=True)
    return done.stdout.split()


CORES = ("import os\nfrom polyopt import host\n"
         "print(len(os.sched_getaffinity(0)), host.usable_cores())\n")
needs_libgomp = pytest.mark.skipif(ctypes.util.find_library("gomp") is None,
                                   reason="no libgomp: the cores come from the affinity")


@needs_libgomp
def test_usable_cores_are_the_openmp_threads() -> None:
    """OMP_NUM_THREADS, and otherwise the CPUs of the process."""
    assert _cores_in_child(CORES, OMP_NUM_THREADS="1")[1] == "1"
    cpus, cores = _cores_in_child(CORES, OMP_NUM_THREADS=None)
    assert cores == cpus


@needs_libgomp
def test_a_runtime_that_pinned_the_main_thread_does_not_shrink_the_cores() -> None:
    """Under OMP_PROC_BIND an OpenMP runtime pins the initial thread to its first place when
    it starts (here polyopt's libgomp, as ``import torch`` does with torch's): the model still
    counts the team's threads, not that thread's one CPU."""
    code = ("import ctypes, ctypes.util, os\n"
            "before = len(os.sched_getaffinity(0))\n"
            "ctypes.CDLL(ctypes.util.find_library('gomp')).omp_get_max_threads()\n"
            "from polyopt.costmodel.machine import host\n"
            "print(before, len(os.sched_getaffinity(0)), host().cores)\n")
    before, pinned, cores = _cores_in_child(code, OMP_PROC_BIND="spread", OMP_NUM_THREADS=None)
    if before == "1":
        pytest.skip("one CPU: nothing to pin")
    assert pinned == "1" and cores == before


# ---- the measured memory system: real-valued fields and the host's profile
def test_memory_fields_take_real_numbers_from_the_environment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(mm.ENV_VAR, "memory_bytes_per_cycle=6.5,core_memory_share=0.5,"
                       "prefetch_streams=32")
    m = host()
    assert (m.memory_bytes_per_cycle, m.core_memory_share, m.prefetch_streams) == (6.5, 0.5, 32)
    assert "6.5 bytes/cycle" in m.describe()
    assert mm._override(AVX2, m.spec()) == m  # spec() round-trips the real fields


@pytest.mark.parametrize("spec, why", [
    ("core_memory_share=1.5", "<= 1"), ("untracked_share=0", "> 0"),
    ("memory_bytes_per_cycle=fast", "not a number"), ("prefetch_streams=2.5", "integer"),
])
def test_bad_memory_fields_are_refused(monkeypatch: pytest.MonkeyPatch, spec: str,
                                       why: str) -> None:
    monkeypatch.setenv(mm.ENV_VAR, spec)
    with pytest.raises(OptionError, match=why):
        host()


def test_a_saved_profile_sets_the_measured_fields(tmp_path: Path) -> None:
    path = tmp_path / "machine" / "host.json"
    mm.save_profile(path, {"memory_bytes_per_cycle": 8.5, "l3_bytes": 96 << 20,
                           "prefetch_streams": 32}, {"cycle_ns": 0.37})
    got = mm.measured(AVX512, path)
    assert (got.memory_bytes_per_cycle, got.l3_bytes, got.prefetch_streams) == \
        (8.5, 96 << 20, 32)
    assert got.l2_bytes == AVX512.l2_bytes and got.untracked_share == AVX512.untracked_share
    assert got.tlb_entries == AVX512.tlb_entries  # a fact of the core no profile holds


# ---- facts of the core the host does not report: defaults, overrides, the rules on them
CORE_FACTS = {"loads_per_cycle": 2, "copy_loads_per_cycle": 2, "store_forward_cycles": 5,
              "l2_bytes_per_cycle": 32.0, "l3_bytes_per_cycle": 16.0, "page_bytes": 4096,
              "l1_tlb_entries": 64, "tlb_entries": 2048, "tlb_miss_cycles": 30.0}


def test_the_core_facts_keep_their_values_and_say_why() -> None:
    m = Machine(64, 32)
    assert {name: getattr(m, name) for name in CORE_FACTS} == CORE_FACTS
    body = ast.parse(inspect.getsource(Machine)).body[0]
    assert isinstance(body, ast.ClassDef)
    documented = {stmt.target.id for stmt, nxt in zip(body.body, body.body[1:], strict=False)
                  if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
                  and isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant)}
    assert set(CORE_FACTS) <= documented  # each field followed by its docstring


def test_the_core_facts_take_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(mm.ENV_VAR, "tlb_entries=1536,l2_bytes_per_cycle=64,page_bytes=16K")
    m = host()
    assert (m.tlb_entries, m.l2_bytes_per_cycle, m.page_bytes) == (1536, 64.0, 16 << 10)
    assert mm._override(AVX2, m.spec()) == m


def test_lanes_are_a_vector_of_elements() -> None:
    assert [AVX512.lanes(e) for e in (1, 2, 4, 8, 16)] == [64, 32, 16, 8, 4]
    assert AVX2.lanes(4) == 8 == gemm_blocking(AVX2, 4).lanes
    with pytest.raises(ValueError):
        AVX2.lanes(3)


def test_parallel_pays_is_the_saving_against_a_fork_and_join() -> None:
    m = Machine(vector_bytes=64, vector_registers=32, cores=4)
    fork = m.fork_join_cycles
    assert m.parallel_pays(fork * 4 / 3 * 1.01)  # 3/4 of it saved: just over
    assert not m.parallel_pays(fork * 4 / 3 * 0.99)
    dearer = dataclasses.replace(m, fork_join_cycles=10 * fork)
    assert not dearer.parallel_pays(fork * 4 / 3 * 1.01)
    one = Machine(vector_bytes=64, vector_registers=32, cores=1)
    assert not one.parallel_pays(1e12)


@pytest.mark.parametrize("text, why", [
    ('{"fields": {"vector_bytes": 32}}', "fields must be some of"),
    ('{"fields": {"core_memory_share": 3}}', "<= 1"),
    ('{"fields": {"l3_bytes": 1.5}}', "integer"),
    ("not json", "Expecting value"),
    ("[]", "indices"),
])
def test_a_bad_profile_is_refused_naming_its_file(tmp_path: Path, text: str, why: str) -> None:
    path = tmp_path / "p.json"
    path.write_text(text)
    with pytest.raises(OptionError, match=why) as err:
        mm.measured(AVX512, path)
    assert str(path) in str(err.value) and "POLYOPT_PROFILE=none" in str(err.value)


def test_the_host_takes_its_profile_unless_told_none(monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    mm.save_profile(path, {"prefetch_streams": 40}, {})
    monkeypatch.setenv("POLYOPT_PROFILE", str(path))
    mm.forget()
    try:
        assert host().prefetch_streams == 40
        assert mm.unmeasured().prefetch_streams == Machine(64, 32).prefetch_streams
        monkeypatch.setenv(mm.ENV_VAR, "prefetch_streams=20")  # the environment wins
        assert host().prefetch_streams == 20
        monkeypatch.setenv("POLYOPT_PROFILE", "none")
        monkeypatch.delenv(mm.ENV_VAR)
        mm.forget()  # read once a process: a later profile needs a new one
        assert host().prefetch_streams == Machine(64, 32).prefetch_streams
    finally:
        mm.forget()


# ---- every field within its bounds (machine.BOUNDS), whatever the source
OUTSIDE: dict[str, tuple[float, ...]] = {  # below, above, and between powers of two
    "vector_bytes": (4, 512, 48),
    "vector_registers": (3, 129),
    "fma_latency": (0, 65),
    "fma_units": (0, 9),
    "cores": (0, 4097),
    "line_bytes": (8, 2048, 96, 1 << 30),  # 1 GiB lines: a 64^3 matmul took 66 s to compile
    "l1d_bytes": (512, 32 << 20),
    "l1d_ways": (0, 65),
    "l2_bytes": (512, 2 << 30),
    "l3_bytes": (512, 1 << 40),  # 1 TiB: the scheduler ran out of memory
    "memory_bytes_per_cycle": (0.0, 5000.0, math.inf, math.nan),
    "core_memory_share": (0.0, 1.5),
    "prefetch_streams": (0, 1025),
    "untracked_share": (0.0, 1.01),
    "fork_join_cycles": (0.0, 2e9, math.inf),
    "loads_per_cycle": (0, 9),
    "copy_loads_per_cycle": (0, 9),
    "store_forward_cycles": (0, 65),
    "l2_bytes_per_cycle": (0.0, 2000.0, math.nan),
    "l3_bytes_per_cycle": (0.0, 2000.0, math.inf),
    "page_bytes": (512, 6000, 2 << 30),
    "l1_tlb_entries": (0, 1 << 17),
    "tlb_entries": (0, 2 << 20),
    "tlb_miss_cycles": (0.0, 2e4),
}
CASES = [(name, value) for name, values in OUTSIDE.items() for value in values]


def test_every_field_has_documented_bounds_that_hold_its_default() -> None:
    assert list(mm.BOUNDS) == [f.name for f in dataclasses.fields(Machine)] == list(OUTSIDE)
    assert all(b.doc for b in mm.BOUNDS.values())
    Machine(64, 32)  # every default inside


def _spec(name: str, value: float) -> str:
    return f"{name}={value}"


def _shown(name: str, value: float) -> str:
    """The value as the error shows it (the field's type, as parsed from text)."""
    return repr(float(value)) if name in mm.REAL_FIELDS else repr(int(value))


@pytest.mark.parametrize(("name", "value"), CASES)
def test_a_field_out_of_bounds_is_refused_from_the_environment(
        monkeypatch: pytest.MonkeyPatch, name: str, value: float) -> None:
    monkeypatch.setenv(mm.ENV_VAR, _spec(name, value))
    with pytest.raises(OptionError) as err:
        host()
    message = str(err.value)
    assert message.startswith(mm.ENV_VAR) and f"Machine.{name}" in message
    assert _shown(name, value) in message and mm.BOUNDS[name].describe() in message


@pytest.mark.parametrize(("name", "value"), CASES)
def test_a_field_out_of_bounds_is_refused_from_the_options(name: str, value: float) -> None:
    options: list[dict[str, float] | str] = [{name: value}, _spec(name, value)]
    for option in options:
        with pytest.raises(OptionError) as err:
            mm.configured(option)
        message = str(err.value)
        assert message.startswith("option machine") and f"Machine.{name}" in message
        assert _shown(name, value) in message and mm.BOUNDS[name].describe() in message


@pytest.mark.parametrize(("name", "value"), [c for c in CASES if c[0] in mm.MEASURED])
def test_a_profile_with_a_field_out_of_bounds_is_refused_naming_its_file(
        tmp_path: Path, name: str, value: float) -> None:
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"fields": {name: value}}))
    with pytest.raises(OptionError) as err:
        mm.measured(AVX512, path)
    message = str(err.value)
    assert str(path) in message and f"Machine.{name}" in message
    assert mm.BOUNDS[name].describe() in message and "POLYOPT_PROFILE=none" in message


def test_the_bounds_themselves_are_accepted() -> None:
    for name, bound in mm.BOUNDS.items():
        kind = float if name in mm.REAL_FIELDS else int
        for value in (bound.low + 0.01 if bound.above_low else bound.low, bound.high):
            assert getattr(mm.configured({name: kind(value)}), name) == kind(value)
    assert mm.configured({"l3_bytes": 0}).l3_bytes == 0  # no L3


MATMUL = "def mm(float(M,K) A, float(K,N) B) -> (C) { C(i,j) +=! A(i,k) * B(k,j) }"


@pytest.mark.parametrize("end", ["low", "high"])
def test_a_matmul_schedules_with_every_field_at_a_bound(end: str) -> None:
    """The class the bounds keep out: a model that makes the scheduler's searches absurd.
    Every field at its bound at once schedules a 64^3 matmul (in some 0.1-0.4 s)."""
    machine: dict[str, float] = {}
    for name, bound in mm.BOUNDS.items():
        value = bound.high if end == "high" else bound.low + 0.01 * bound.above_low
        machine[name] = value if name in mm.REAL_FIELDS else int(value)
    s = api.schedule(MATMUL, sizes={"M": 64, "N": 64, "K": 64}, options={"machine": machine})
    assert s.as_json()  # a schedule, in time


def test_what_the_host_reports_out_of_bounds_takes_the_default(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """A VM's sysfs may say anything: a lie must not fail every compile."""
    sizes = {**hostinfo.DEFAULT_CACHES, "line_bytes": 0, "l2_bytes": 2 << 30}
    monkeypatch.setattr(hostinfo, "cache_sizes", lambda: sizes)
    monkeypatch.setattr(hostinfo, "usable_cores", lambda: 3)
    with caplog.at_level(logging.WARNING, logger="polyopt.runtime"):
        m = mm.unmeasured()
    assert (m.line_bytes, m.l2_bytes, m.cores) == (Machine(64, 32).line_bytes,
                                                   Machine(64, 32).l2_bytes, 3)
    assert "line_bytes = 0" in caplog.text and "l2_bytes = 2147483648" in caplog.text
