"""The compiler self-test: known miscompiles, their remedies, and the verdict's record."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

from polyopt import config
from polyopt.errors import CompileError
from polyopt.runtime import compiler, miscompiles
from polyopt.runtime.miscompiles import REPRODUCERS, Reproducer

EXE_FLAGS = tuple(f for f in compiler.DEFAULT_FLAGS if f not in ("-fPIC", "-shared"))


@pytest.fixture(autouse=True)
def _fresh_verdicts() -> None:
    miscompiles.forget()


def _cc() -> tuple[str, ...]:
    return tuple(config.current().cc)


def _gcc_12_2() -> bool:
    return " 12.2." in compiler.compiler_identity(_cc())


@dataclass(frozen=True)
class _Fake(Reproducer):
    """A reproducer from a literal source."""

    text: str = ""

    def source(self) -> str:
        return self.text


# Right only when compiled with -DPO_FIXED: a miscompile that one flag cures.
_NEEDS_FLAG = "int main(void) {\n#ifdef PO_FIXED\n  return 0;\n#else\n  return 1;\n#endif\n}\n"


@pytest.mark.cc
@pytest.mark.parametrize("reproducer", REPRODUCERS, ids=lambda r: r.name)
def test_reproducers_pass_with_polyopts_flags(reproducer: Reproducer) -> None:
    """polyopt's flags, with what the self-test adds, build every known reproducer right."""
    flags = (*EXE_FLAGS, *miscompiles.remedies(_cc(), compiler.compiler_identity(_cc()),
                                                compiler.DEFAULT_FLAGS, (), None))
    assert miscompiles.run(_cc(), reproducer, flags) in (True, None)


@pytest.mark.cc
def test_split_loops_reproducer_still_reproduces() -> None:
    """Without -fno-split-loops GCC 12.2 gets the skewed jacobi-1d wrong, and the self-test
    then adds the flag back."""
    if not _gcc_12_2():
        pytest.skip("the compiler is not GCC 12.2, where the miscompile was seen")
    plain = tuple(f for f in EXE_FLAGS if f != "-fno-split-loops")
    split = next(r for r in REPRODUCERS if r.name == "gcc_split_loops")
    assert miscompiles.run(_cc(), split, plain) is False
    added = miscompiles.remedies(_cc(), "gcc-12.2 test", plain, (), None)
    assert added == ("-fno-split-loops",)


@pytest.mark.cc
def test_diagonal_reproducer_needs_the_carried_loop_guard(tmp_path: Path) -> None:
    """The guard that ends a loop carrying a dependence is what keeps GCC 12.2's vectorizer
    right on the diagonal recurrence: without it the same C is wrong."""
    if not _gcc_12_2():
        pytest.skip("the compiler is not GCC 12.2, where the miscompile was seen")
    diag = next(r for r in REPRODUCERS if r.name == "gcc_diagonal_vectorizer")
    guard = '__asm__ volatile("");'
    assert guard in diag.source()
    bare = _Fake("bare", "", (), "\n".join(
        line for line in diag.source().splitlines() if guard not in line))
    assert miscompiles.run(_cc(), bare, EXE_FLAGS) is False
    assert miscompiles.run(_cc(), diag, EXE_FLAGS) is True


@pytest.mark.cc
def test_a_failing_reproducer_gets_its_remedy(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _Fake("needs_flag", "a test", (("-DPO_OTHER",), ("-DPO_FIXED",)), _NEEDS_FLAG)
    monkeypatch.setattr(miscompiles, "REPRODUCERS", (fake,))
    assert miscompiles.remedies(_cc(), "test cc", ("-O2",), (), None) == ("-DPO_FIXED",)


@pytest.mark.cc
def test_no_remedy_is_a_compile_error(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _Fake("always_wrong", "a test", (("-O1",),), "int main(void) { return 1; }\n")
    monkeypatch.setattr(miscompiles, "REPRODUCERS", (fake,))
    with pytest.raises(CompileError, match="miscompiles always_wrong"):
        miscompiles.remedies(_cc(), "test cc", ("-O2",), (), None)


@pytest.mark.cc
def test_an_unbuildable_reproducer_judges_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _Fake("broken", "a test", (("-O1",),), "int main(void) { return 1 }\n")
    monkeypatch.setattr(miscompiles, "REPRODUCERS", (fake,))
    assert miscompiles.run(_cc(), fake, ("-O2",)) is None
    assert miscompiles.remedies(_cc(), "test cc", ("-O2",), (), None) == ()


@pytest.mark.cc
def test_the_verdict_is_recorded(monkeypatch: pytest.MonkeyPatch, cache_dir: Path) -> None:
    """A later process reads the verdict instead of building the reproducers again."""
    fake = _Fake("needs_flag", "a test", (("-DPO_FIXED",),), _NEEDS_FLAG)
    monkeypatch.setattr(miscompiles, "REPRODUCERS", (fake,))
    cache_dir.mkdir(mode=0o700)
    assert miscompiles.remedies(_cc(), "test cc", ("-O2",), (), cache_dir) == ("-DPO_FIXED",)
    miscompiles.forget()

    def no_run(*args: object) -> bool:
        raise AssertionError("the recorded verdict was not used")

    monkeypatch.setattr(miscompiles, "run", no_run)
    assert miscompiles.remedies(_cc(), "test cc", ("-O2",), (), cache_dir) == ("-DPO_FIXED",)


@pytest.mark.cc
def test_compiles_carry_the_remedy(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the self-test adds reaches the compiler's command line."""
    fake = _Fake("needs_flag", "a test", (("-DPO_FIXED",),), _NEEDS_FLAG)
    monkeypatch.setattr(miscompiles, "REPRODUCERS", (fake,))
    job = compiler._prepare("int f(void) { return 1; }\n", None)
    assert job.flags[-1] == "-DPO_FIXED", shlex.join(job.flags)
