"""Known miscompiles of C compilers, and the self-test that keeps polyopt clear of them.

A kernel is only as right as the compiler that builds its C. polyopt defends in two ways:
- its C leaves the compiler few of its own decisions to get wrong: a loop that carries a
  dependence ends in a guard that keeps the loop vectorizer off it
  (``codegen.dialect.Dialect.carried_loop_guard``), and polyopt's own vector loops are
  ``omp simd``, proven independent by isl's exact analysis;
- at the first compile with a compiler and flags, it builds and runs the reproducers of the
  miscompiles it knows (``reproducers/*.c``: polyopt's own C for the nest, with a ``main``
  that exits 0 when the answer is right). When one fails, polyopt adds the first of its
  remedies (flags) with which every reproducer passes, and warns once; when none does,
  compiling raises :class:`CompileError` naming the compiler and the reproducer. A
  reproducer the compiler cannot build or run (a cross compiler, say) judges nothing.

The verdict is kept per process and as a cache record per compiler stamp and flags, so the
self-test (about 0.3 s) runs once per compiler. ``tests/runtime/test_miscompiles.py`` checks
that each reproducer still reproduces where the compiler is the one it was seen on.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from polyopt.errors import CompileError
from polyopt.runtime import records, tempdirs

logger = logging.getLogger("polyopt.cache")

# Flags of a shared object that an executable must not have.
_SHARED_ONLY = frozenset({"-shared", "-fPIC"})
_RUN_TIMEOUT_S = 20


@dataclass(frozen=True)
class Reproducer:
    """A program some compiler got wrong; ``remedies``: flag sets that fixed it, best first
    (each measured on the compiler it was seen on)."""

    name: str
    seen: str
    remedies: tuple[tuple[str, ...], ...]

    def source(self) -> str:
        return resources.files(__package__).joinpath("reproducers", f"{self.name}.c").read_text()


REPRODUCERS: tuple[Reproducer, ...] = (
    Reproducer("gcc_split_loops", "GCC 12.2 -O3: loop splitting with loop distribution "
               "reorders a load after the store it reads (a skewed jacobi-1d)",
               (("-fno-split-loops",), ("-fno-tree-loop-distribution",), ("-O2",))),
    Reproducer("gcc_diagonal_vectorizer", "GCC 12.2 -O3: the loop vectorizer vectorizes "
               "the loop that carries S(i,j) = f(S(i-1,j-1))",
               (("-fno-tree-loop-vectorize",), ("-O1",))),
)


@dataclass(frozen=True)
class Verdict:
    """What the self-test found: the flags it adds, and the reproducers that failed."""

    added: tuple[str, ...] = ()
    failed: tuple[str, ...] = ()


_VERDICTS: dict[tuple[str, tuple[str, ...]], Verdict] = {}


def remedies(cc: Sequence[str], identity: str, flags: Sequence[str], link: Sequence[str],
             root: Path | None) -> tuple[str, ...]:
    """The flags to add to ``flags`` so that ``cc`` builds every known reproducer right
    (usually none). ``identity`` names the compiler (its path and version); ``root``: the
    cache root that keeps the verdict across processes (None: this process only)."""
    memo = (identity, tuple(flags))
    verdict = _VERDICTS.get(memo)
    if verdict is None:
        verdict = _recorded(root, memo)
        if verdict is None:
            verdict = _self_test(cc, tuple(flags), tuple(link), identity)
            _record(root, memo, verdict)
        if verdict.failed:
            logger.warning("%s miscompiles %s with %s; polyopt adds %s", identity,
                           ", ".join(verdict.failed), " ".join(flags), " ".join(verdict.added))
        _VERDICTS[memo] = verdict
    return verdict.added


def forget() -> None:
    """Drop this process's verdicts (tests)."""
    _VERDICTS.clear()


def _self_test(cc: Sequence[str], flags: tuple[str, ...], link: tuple[str, ...],
               identity: str) -> Verdict:
    failed = tuple(r.name for r in REPRODUCERS if run(cc, r, flags, link) is False)
    if not failed:
        return Verdict()
    for extra in _candidates(failed):
        if all(run(cc, r, (*flags, *extra), link) is not False for r in REPRODUCERS):
            return Verdict(extra, failed)
    raise CompileError(
        f"the C compiler {identity} miscompiles {', '.join(failed)} (polyopt's known "
        f"reproducers: {', '.join(r.seen for r in REPRODUCERS if r.name in failed)}) with "
        f"{' '.join(flags)}, and no known remedy fixes it; set CC to another compiler",
        "\n".join(f"{r.name}: {r.seen}" for r in REPRODUCERS if r.name in failed))


def _candidates(failed: tuple[str, ...]) -> list[tuple[str, ...]]:
    """Remedy sets to try, the failed reproducers' own first, then their unions."""
    own = [rem for r in REPRODUCERS if r.name in failed for rem in r.remedies]
    firsts = tuple(f for r in REPRODUCERS if r.name in failed for f in r.remedies[0])
    return [*dict.fromkeys([*own, firsts])]


def run(cc: Sequence[str], reproducer: Reproducer, flags: Sequence[str],
        link: Sequence[str] = ()) -> bool | None:
    """Whether ``cc`` with ``flags`` builds ``reproducer`` into a program that gets it right;
    None when it cannot be built or run here (nothing is judged)."""
    exe_flags = [f for f in flags if f not in _SHARED_ONLY]
    with tempdirs.private_tempdir("polyopt-selftest-") as tmp:
        src, exe = tmp / f"{reproducer.name}.c", tmp / reproducer.name
        src.write_text(reproducer.source())
        try:
            built = subprocess.run([*cc, *exe_flags, "-o", str(exe), str(src), *link, "-lm"],
                                   capture_output=True, text=True, cwd=tmp,
                                   timeout=_RUN_TIMEOUT_S * 3, check=False)
            if built.returncode != 0:
                logger.debug("self-test %s not built: %s", reproducer.name, built.stderr[-400:])
                return None
            ran = subprocess.run([str(exe)], capture_output=True, text=True, cwd=tmp,
                                 timeout=_RUN_TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            logger.debug("self-test %s not run: %s", reproducer.name, exc)
            return None
    if ran.returncode not in (0, 1):
        return None  # a crash or a signal: not the answer it checks
    return ran.returncode == 0


def _reproducers_digest() -> str:
    return hashlib.sha256("".join(r.source() for r in REPRODUCERS).encode()).hexdigest()


def _record_key(memo: tuple[str, tuple[str, ...]]) -> str:
    return records.key_of("miscompiles", _reproducers_digest(), memo[0], list(memo[1]))


def _recorded(root: Path | None, memo: tuple[str, tuple[str, ...]]) -> Verdict | None:
    if root is None:
        return None
    try:
        found = records.read(root, "compilers", _record_key(memo))
    except OSError:
        return None
    added, failed = (found or {}).get("added"), (found or {}).get("failed")
    known = {f for r in REPRODUCERS for rem in r.remedies for f in rem}
    if not (isinstance(added, list) and isinstance(failed, list) and set(added) <= known
            and all(isinstance(f, str) for f in failed)):
        return None  # only flags polyopt itself could have chosen
    return Verdict(tuple(added), tuple(failed))


def _record(root: Path | None, memo: tuple[str, tuple[str, ...]], verdict: Verdict) -> None:
    if root is None:
        return
    with contextlib.suppress(OSError):  # a verdict not kept is only found again
        records.write(root, "compilers", _record_key(memo),
                      {"added": list(verdict.added), "failed": list(verdict.failed)})
