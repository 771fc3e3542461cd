"""The thread governor (runtime/governor.py): kernels take the cores other processes leave.

Each check runs in a child process of its own, so that the OpenMP runtime and the
governor's first look start there, next to a competitor the test controls."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from polyopt.runtime import trampoline

pytestmark = [pytest.mark.cc, pytest.mark.skipif(
    trampoline.load() is None, reason="the extension does not build here (Python.h?)")]

_CHILD = textwrap.dedent("""
    import subprocess, sys, time
    import numpy as np, polyopt
    from polyopt import host
    from polyopt.runtime import trampoline
    tramp, gomp = trampoline.load(), host._libgomp()
    k = polyopt.compile("def f(float(N) A) -> (B) { B(i) = A(i) * 2.0 }", sizes={"N": 4096})
    x = np.ones(4096, np.float32)
    before = gomp.omp_get_max_threads()
    competitors = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                   for _ in range(int(sys.argv[1]))]
    try:
        k(x)
        for _ in range(8):  # four looks at the load, 0.1 s apart
            time.sleep(0.06)
            assert (k(x) == 2.0).all()
        print(tramp.threads(), before, gomp.omp_get_max_threads())
    finally:
        for c in competitors:
            c.kill()
""")


def _run(competitors: int, **env: str) -> tuple[int, int, int]:
    out = subprocess.run([sys.executable, "-c", _CHILD, str(competitors)],
                         env={**os.environ, **env}, capture_output=True, text=True,
                         timeout=120, check=True)
    threads, before, after = map(int, out.stdout.split())
    return threads, before, after


def _cores() -> int:
    return os.cpu_count() or 1


@pytest.mark.skipif(_cores() < 2, reason="one CPU: nothing to govern")
def test_a_busy_core_is_left_to_its_process() -> None:
    """With CPU-bound competitors on all cores but one, a kernel gets one thread; the
    calling thread's own OpenMP count is back after each call."""
    threads, before, after = _run(_cores() - 1)
    assert threads == 1
    assert after == before  # set for the kernel's call alone


def test_omp_dynamic_false_turns_the_governor_off() -> None:
    threads, before, _ = _run(max(1, _cores() - 1), OMP_DYNAMIC="false")
    assert threads == before


def test_the_thread_count_stays_within_omp_num_threads() -> None:
    threads, before, _ = _run(0, OMP_NUM_THREADS="1")
    assert threads == before == 1
