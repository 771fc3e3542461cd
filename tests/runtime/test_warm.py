"""Warm starts (runtime/warm.py, driver.lower_or_load): a process with a warm cache calls
kernels without lowering them, through records whose keys cover what the lowering reads,
and a record that is corrupt or untrusted is lowered again, never used."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import polyopt
from polyopt import BoundsError, ShapeError, driver, lang, variants
from polyopt.driver import check_options
from polyopt.runtime import cache, compiler, records, warm
from polyopt.tuning import db

pytestmark = pytest.mark.cc

MM = "def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,r_k) * B(r_k,n) }"
EMBED = "def embed(float(V,E) Tab, int32(B,L) Idx) -> (Out) { Out(b,l,e) = Tab(Idx(b,l), e) }"
SOFTMAX = """def softmax(float(N,D) X) -> (Y) local (mx, E, s) {
  mx(n) max=! X(n,r_d)
  E(n,d) = exp(X(n,d) - mx(n))
  s(n) +=! E(n,r_d)
  Y(n,d) = E(n,d) / s(n)
}"""
TWO = "def two(double(N) X) -> (S, P) { S(i) = X(i) + 1.0\n P(i) = X(i) * 2.0 }"

# The child of a fresh-process run: counts every lowering, bounds check and compiler run,
# calls each kernel, and prints the results and sources.
CHILD = r"""
import json, sys
import numpy as np
import polyopt
from polyopt import driver
from polyopt.runtime import compiler

counts = {"lower": 0, "model": 0, "identity": 0, "cc": 0}

def counting(name, real):
    def spy(*args, **kwargs):
        counts[name] += 1
        return real(*args, **kwargs)
    return spy

driver.lower_program = counting("lower", driver.lower_program)  # every lowering's last step
driver.model_of = counting("model", driver.model_of)
compiler._identity = counting("identity", compiler._identity)
compiler._run = counting("cc", compiler._run)

rng = np.random.default_rng(0)
a, b = rng.random((8, 5), np.float32), rng.random((5, 3), np.float32)
mm, par = polyopt.compile(sys.argv[1]), polyopt.compile(sys.argv[1], parametric=True)
fixed = polyopt.compile(sys.argv[1], sizes={"M": 8, "K": 5, "N": 3})
out = {"einsum": polyopt.einsum("ij,jk->ik", a, b).tolist(), "mm": mm(a, b).tolist(),
       "par": par(a, b).tolist(), "fixed": fixed(a, b).tolist(),
       "sources": [par.source, fixed.source]}
out["counts"] = dict(counts)
out["schedule"] = str(fixed.schedule)  # needs the lowering: made on first access
out["lowered_after"] = counts["lower"]
print(json.dumps(out))
"""


def _child(cache_dir: Path) -> dict[str, Any]:
    env = {**os.environ, "POLYOPT_CACHE_DIR": str(cache_dir),
           "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    proc = subprocess.run([sys.executable, "-c", CHILD, MM], capture_output=True, text=True,
                          env=env, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])  # type: ignore[no-any-return]


def test_a_fresh_process_with_a_warm_cache_does_not_lower(cache_dir: Path) -> None:
    cold = _child(cache_dir)
    assert cold["counts"]["lower"] >= 3 and cold["counts"]["identity"] >= 1
    warm_ = _child(cache_dir)
    assert warm_["counts"] == {"lower": 0, "model": 0, "identity": 0, "cc": 0}
    for name in ("einsum", "mm", "par", "fixed", "sources", "schedule"):
        assert warm_[name] == cold[name], name  # the same bits, sources and schedule
    assert warm_["lowered_after"] == 1  # the schedule alone lowered, when asked for
    rng = np.random.default_rng(0)  # the child's draws
    a, b = rng.random((8, 5), np.float32), rng.random((5, 3), np.float32)
    for name in ("einsum", "mm", "par", "fixed"):
        np.testing.assert_allclose(np.asarray(warm_[name], np.float32), a @ b, rtol=1e-5)


def _count_lowerings(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = driver.lower_program
    monkeypatch.setattr(driver, "lower_program",
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    return calls


def _fresh() -> None:
    """As if in a new process: nothing remembered in memory (dlopened libraries aside)."""
    cache.clear_memory()


def _outcome(fn: Callable[[], Any]) -> Any:
    """The result of ``fn()`` as plain data, or its exception's type and message."""
    try:
        result = fn()
    except Exception as e:  # compared between the two paths
        return (type(e).__name__, str(e))
    results = result if isinstance(result, tuple) else (result,)
    return [(r.dtype.str, r.shape, r.tobytes()) for r in results]


def _calls(source: str) -> list[tuple[Any, ...]]:
    rng = np.random.default_rng(3)
    f32 = np.float32
    if source == MM:
        a, b = rng.random((9, 7), f32), rng.random((7, 5), f32)
        return [(a, b), (a, b), (a, b), (np.asfortranarray(a), b), (a.astype(np.float64), b),
                (a[0], b), (a,), (a, rng.random((6, 5), f32)), (a.astype(">f4"), b)]
    if source == EMBED:
        tab, idx = rng.random((5, 3), f32), np.array([[0, 4], [2, 1]], np.int32)
        bad = np.array([[0, 7], [2, 1]], np.int32)
        return [(tab, idx), (tab, idx), (tab, bad), (tab, idx), (tab, bad)]
    if source == SOFTMAX:
        x = rng.random((4, 33), f32)
        return [(x,), (x,), (x[:, :16],), (x.T.copy(),)]
    x = rng.random(6)
    return [(x,), (x,), (x[::2],), (x.astype(np.float32),)]


KERNELS = {"mm": (MM, {}), "mm-sized": (MM, {"sizes": {"M": 9, "K": 7, "N": 5}}),
           "mm-parametric": (MM, {"parametric": True}), "embed": (EMBED, {}),
           "softmax": (SOFTMAX, {}), "two": (TWO, {})}


@pytest.mark.parametrize("case", list(KERNELS))
def test_warm_and_freshly_lowered_kernels_agree(case: str,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    source, kwargs = KERNELS[case]
    calls = _calls(source)
    lowered = _count_lowerings(monkeypatch)
    kernels = []

    def run() -> list[Any]:
        k = polyopt.compile(source, **kwargs)
        kernels.append(k)
        return [_outcome(lambda args=args: k(*args)) for args in calls]  # type: ignore[misc]

    slow = run()
    first = len(lowered)
    assert first >= 1
    _fresh()
    fast = run()
    assert len(lowered) == first  # nothing lowered the second time
    assert fast == slow  # the same bits, and the same errors for bad inputs
    old, new = kernels
    assert (new.name, repr(new), new.source) == (old.name, repr(old), old.source)


def test_lazy_properties_lower_and_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    sizes = {"M": 6, "K": 4, "N": 3}
    slow = polyopt.compile(MM, sizes=sizes)
    want = (slow.source, str(slow.schedule), str(slow.program), slow.launch)
    _fresh()
    lowered = _count_lowerings(monkeypatch)
    fast = polyopt.compile(MM, sizes=sizes)
    assert not lowered and fast.source == want[0]
    assert (fast.source, str(fast.schedule), str(fast.program), fast.launch) == want
    assert len(lowered) == 1  # on first access to the schedule


def _program(source: str = MM, **sizes: int) -> Any:
    return lang.build_program(lang.define(source, None), sizes=sizes or {"M": 4, "K": 3, "N": 2})


def test_the_variant_key_changes_with_each_of_its_components(
        monkeypatch: pytest.MonkeyPatch) -> None:
    opts = check_options(None, "c")
    base = warm.variant_key(_program(), opts, "tuning=-")
    assert base == warm.variant_key(_program(), check_options(None, "c"), "tuning=-")
    variants = {
        "sizes": warm.variant_key(_program(M=5, K=3, N=2), opts, "tuning=-"),
        "dtype": warm.variant_key(_program(MM.replace("float(", "double(")), opts, "tuning=-"),
        "name": warm.variant_key(_program(MM.replace("def mm", "def mm2")), opts, "tuning=-"),
        "body": warm.variant_key(_program(MM.replace("+=!", "max=!")), opts, "tuning=-"),
        "openmp": warm.variant_key(_program(), check_options({"openmp": False}, "c"),
                                   "tuning=-"),
        "cflags": warm.variant_key(_program(), check_options({"cflags": ["-g"]}, "c"),
                                   "tuning=-"),
        "machine": warm.variant_key(_program(), check_options({"machine": "vector_bytes=16"},
                                                              "c"), "tuning=-"),
        "knobs": warm.variant_key(_program(), check_options({"knobs": {"mr": 2}}, "c"),
                                  "tuning=-"),
        "fusion": warm.variant_key(_program(), check_options({"fusion": "max"}, "c"),
                                   "tuning=-"),
        "target": warm.variant_key(_program(), check_options(None, "cuda-emulated"),
                                   "tuning=-"),
        "schedule": warm.variant_key(_program(), opts, "schedule=program-order"),
        "tuning": warm.variant_key(_program(), opts, "tuning=other"),
    }
    monkeypatch.setattr(warm, "code_stamp", lambda: "another polyopt")
    variants["code"] = warm.variant_key(_program(), opts, "tuning=-")
    assert base not in variants.values() and len(set(variants.values())) == len(variants)


def test_the_code_stamp_follows_the_source_files_and_versions(tmp_path: Path) -> None:
    stamp = warm.code_stamp()
    assert stamp == warm.code_stamp() and len(stamp) == 64
    files: list[tuple[str, int, int]] = []
    warm._stat_sources(str(Path(warm.__file__).parent.parent), "", files)
    assert ("runtime/warm.py", os.path.getsize(warm.__file__),
            os.stat(warm.__file__).st_mtime_ns) in files
    assert all(name.endswith(".py") and "__pycache__" not in name for name, _, _ in files)


def test_the_object_record_key_follows_the_compiler_and_flags(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from polyopt import config

    cfg = config.current()
    base = compiler._stamp_key(cfg, "int f;", None, ())
    assert base is not None and base == compiler._stamp_key(cfg, "int f;", None, ())
    others = {compiler._stamp_key(cfg, "int g;", None, ()),
              compiler._stamp_key(cfg, "int f;", ["-O1"], ()),
              compiler._stamp_key(cfg, "int f;", None, ("-lstdc++",))}
    monkeypatch.setenv("POLYOPT_CFLAGS", "-DX=1")
    others.add(compiler._stamp_key(config.current(), "int f;", None, ()))
    monkeypatch.delenv("POLYOPT_CFLAGS")
    monkeypatch.setattr(compiler, "compiler_stamp", lambda argv: "cc, upgraded")
    others.add(compiler._stamp_key(cfg, "int f;", None, ()))
    assert base not in others and len(others) == 5


def test_the_compiler_stamp_changes_when_the_compiler_does(tmp_path: Path) -> None:
    fake = tmp_path / "mycc"
    fake.write_text("#!/bin/sh\nexec cc \"$@\"\n")
    fake.chmod(0o700)
    before = compiler.compiler_stamp((str(fake), "-m64"))
    compiler.compiler_stamp.cache_clear()
    fake.write_text("#!/bin/sh\n# upgraded\nexec cc \"$@\"\n")
    after = compiler.compiler_stamp((str(fake), "-m64"))
    assert before is not None and after is not None and before != after
    assert str(fake) in after and after.endswith(" -m64")
    assert compiler.compiler_stamp(("/nonexistent/cc",)) is None


def test_the_tuning_state_changes_with_the_database(cache_dir: Path) -> None:
    empty = db.state()
    assert empty.endswith("- | -")  # no database, no log
    database = db.Database(db.default_path())
    database.close()
    created = db.state()
    assert created != empty and db.state() == created
    assert variants.database_state is db.state  # what compile keys warm starts on


def _record_of(cache_dir: Path, kind: str = "kernels") -> Path:
    found = sorted(cache_dir.glob(f"{kind}/*/*.json"))
    assert len(found) == 1, found
    return found[0]


def _tamper_json(path: Path, change: Callable[[dict[str, Any]], None], reseal: bool) -> None:
    body = json.loads(path.read_text())
    change(body["payload"])
    if reseal:  # a well-formed record of the wrong shape: the checksum holds
        body["sha256"] = records._digest(body["payload"])
    path.write_text(json.dumps(body))


TAMPERINGS: dict[str, Callable[[Path], None]] = {
    "truncated": lambda p: p.write_bytes(p.read_bytes()[:50]),
    "not json": lambda p: p.write_text("{not json"),
    "edited": lambda p: _tamper_json(
        p, lambda d: d["source"].update(buffers=d["source"]["buffers"][::-1]), reseal=False),
    "wrong types": lambda p: _tamper_json(
        p, lambda d: d["signature"].update(tensors=[[1, 2, 3, 4]]), reseal=True),
    "wrong roles": lambda p: _tamper_json(
        p, lambda d: [t.__setitem__(3, "scratch") for t in d["signature"]["tensors"]],
        reseal=True),
    "another key": lambda p: p.write_text(p.read_text().replace(p.stem, "0" * 64)),
    "group-writable": lambda p: p.chmod(0o660),
}


@pytest.mark.parametrize("how", list(TAMPERINGS))
def test_a_corrupt_or_untrusted_record_is_lowered_again(how: str, cache_dir: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    sizes = {"M": 5, "K": 4, "N": 3}
    a, b = np.ones((5, 4), np.float32), np.ones((4, 3), np.float32)
    k = polyopt.compile(MM, sizes=sizes)
    want = k(a, b)
    path = _record_of(cache_dir)
    good = json.loads(path.read_text())
    TAMPERINGS[how](path)
    _fresh()
    lowered = _count_lowerings(monkeypatch)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a refused record is logged, not warned
        again = polyopt.compile(MM, sizes=sizes)
    assert len(lowered) == 1
    np.testing.assert_array_equal(again(a, b), want)
    assert json.loads(path.read_text()) == good  # rewritten
    assert path.stat().st_mode & 0o077 == 0
    assert records.read(cache_dir, "kernels", path.stem) == good["payload"]


def test_a_corrupt_object_record_runs_the_compiler_identity_again(
        cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = "int add(int a, int b) { return a + b; }\n"
    assert compiler.load_library(src).add(2, 3) == 5
    path = _record_of(cache_dir, "objects")
    path.write_text("{}")
    _fresh()
    prepared: list[int] = []
    real = compiler._prepare
    monkeypatch.setattr(compiler, "_prepare", lambda *a: prepared.append(1) or real(*a))
    assert compiler.compile_shared(src).is_file() and len(prepared) == 1
    assert records.read(cache_dir, "objects", path.stem) is not None  # rewritten
    _fresh()
    assert compiler.compile_shared(src).is_file() and len(prepared) == 1  # found by stamp


def test_a_record_whose_object_is_gone_compiles_it_again(cache_dir: Path) -> None:
    sizes = {"M": 3, "K": 2, "N": 2}
    k = polyopt.compile(MM, sizes=sizes)
    a, b = np.ones((3, 2), np.float32), np.ones((2, 2), np.float32)
    want = k(a, b)
    for so in cache_dir.glob("c/*/*.so"):
        so.with_suffix(".json").unlink()
        so.unlink()
    _fresh()
    compiler._LIBS.clear()
    np.testing.assert_array_equal(polyopt.compile(MM, sizes=sizes)(a, b), want)


def test_no_records_without_a_disk_cache_or_with_debug_output(
        cache_dir: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("POLYOPT_NO_CACHE", "1")
    polyopt.compile(MM, sizes={"M": 2, "K": 2, "N": 2})
    assert not list(cache_dir.glob("kernels/*/*.json"))
    monkeypatch.delenv("POLYOPT_NO_CACHE")
    polyopt.compile(MM, sizes={"M": 2, "K": 2, "N": 2})
    assert len(list(cache_dir.glob("kernels/*/*.json"))) == 1
    _fresh()
    monkeypatch.setenv("POLYOPT_DEBUG", "4")
    polyopt.compile(MM, sizes={"M": 2, "K": 2, "N": 2})
    assert "--- polyopt mm: c ---" in capsys.readouterr().err  # the stages, lowered again


def test_a_lowering_that_warns_is_recorded_with_its_warning(
        cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A warm start says polyopt's warnings again (isl's scheduler out of its budget would
    otherwise cost every process the budget's seconds); a warning of another kind keeps the
    def unrecorded, so it is lowered, and said, again."""
    real = driver.lower_program
    lowered = []

    def warning(*args: Any, **kwargs: Any) -> Any:
        lowered.append(1)
        warnings.warn("a warning of the lowering", polyopt.PolyoptWarning, stacklevel=1)
        return real(*args, **kwargs)

    monkeypatch.setattr(driver, "lower_program", warning)
    for _ in range(2):
        with pytest.warns(polyopt.PolyoptWarning, match="of the lowering"):
            polyopt.compile(MM, sizes={"M": 2, "K": 3, "N": 2})
        _fresh()
    assert len(lowered) == 1 and len(list(cache_dir.glob("kernels/*/*.json"))) == 1

    def foreign(*args: Any, **kwargs: Any) -> Any:
        lowered.append(1)
        warnings.warn("another library's warning", UserWarning, stacklevel=1)
        return real(*args, **kwargs)

    monkeypatch.setattr(driver, "lower_program", foreign)
    for _ in range(2):
        with pytest.warns(UserWarning, match="another library"):
            polyopt.compile(MM, sizes={"M": 3, "K": 3, "N": 2})
        _fresh()
    assert len(lowered) == 3 and len(list(cache_dir.glob("kernels/*/*.json"))) == 1


def test_what_a_failing_lowering_said_is_still_said(monkeypatch: pytest.MonkeyPatch) -> None:
    def failing(*args: Any, **kwargs: Any) -> Any:
        warnings.warn("said before failing", polyopt.PolyoptWarning, stacklevel=1)
        raise polyopt.ScheduleError("the lowering failed")

    monkeypatch.setattr(driver, "lower_program", failing)
    with pytest.warns(polyopt.PolyoptWarning, match="before failing"), \
            pytest.raises(polyopt.ScheduleError, match="lowering failed"):
        polyopt.compile(MM, sizes={"M": 2, "K": 2, "N": 2})


def test_a_user_schedule_is_lowered_every_time(cache_dir: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    sizes = {"M": 4, "K": 4, "N": 4}
    sched = polyopt.schedule(MM, sizes=sizes)
    lowered = _count_lowerings(monkeypatch)
    for _ in range(2):
        polyopt.compile(MM, sizes=sizes, schedule=sched)
        _fresh()
    assert len(lowered) == 2 and not list(cache_dir.glob("kernels/*/*.json"))


def test_the_bounds_check_of_a_size_generic_def_is_recorded(
        monkeypatch: pytest.MonkeyPatch) -> None:
    checks: list[int] = []
    real = driver.model_of
    monkeypatch.setattr(driver, "model_of", lambda p: checks.append(1) or real(p))
    polyopt.compile(MM)
    _fresh()
    polyopt.compile(MM)
    assert len(checks) == 1
    bad = "def bad(float(N) X) -> (Y) { Y(i) = X(i + 1) where i in 0:N }"
    for _ in range(2):  # never recorded: raised every time
        with pytest.raises(BoundsError):
            polyopt.compile(bad)
        _fresh()


def test_the_hot_call_checks_what_the_fast_path_checked() -> None:
    k = polyopt.compile(MM)
    rng = np.random.default_rng(1)
    a, b = rng.random((6, 4), np.float32), rng.random((4, 3), np.float32)
    for _ in range(3):
        np.testing.assert_allclose(k(a, b), a @ b, rtol=1e-5)
    assert k._calls.hot is not None  # the C-bound call of the last plan
    np.testing.assert_allclose(k(a[:5], b), a[:5] @ b, rtol=1e-5)  # another shape
    np.testing.assert_allclose(k(np.asfortranarray(a), b), a @ b, rtol=1e-5)
    np.testing.assert_allclose(k(a, b), a @ b, rtol=1e-5)

    class Sub(np.ndarray):
        pass

    np.testing.assert_allclose(k(a.view(Sub), b), a @ b, rtol=1e-5)
    with pytest.raises(ShapeError, match="dtype"):
        k(a.astype(">f4"), b)
    with pytest.raises(ShapeError, match="rank 2"):
        k(a[0], b)
    with pytest.raises(ShapeError, match="takes 2 input"):
        k(a)


def test_the_hot_call_raises_the_kernels_errors() -> None:
    k = polyopt.compile(EMBED)
    tab = np.arange(15, dtype=np.float32).reshape(5, 3)
    good, bad = np.array([[0, 4]], np.int32), np.array([[0, 9]], np.int32)
    for _ in range(3):
        np.testing.assert_array_equal(k(tab, good), tab[good])
    assert k._calls.hot is not None
    for _ in range(2):
        with pytest.raises(BoundsError, match="index 9"):
            k(tab, bad)
        np.testing.assert_array_equal(k(tab, good), tab[good])


def test_the_hot_call_returns_every_output() -> None:
    k = polyopt.compile(TWO)
    x = np.arange(4.0)
    for _ in range(3):
        s, p = k(x)
        np.testing.assert_array_equal(s, x + 1)
        np.testing.assert_array_equal(p, x * 2)
