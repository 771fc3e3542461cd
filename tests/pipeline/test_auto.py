"""The base schedule (polyopt.pipeline.auto): isl's scheduler under an operation budget, past
it one statement's own nest or program order. Work is bounded by counting
scheduler calls and isl operations, never by timing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import polyopt
from polyopt.errors import PolyoptWarning
from polyopt.lang import build_program
from polyopt.pipeline import auto
from polyopt.runtime.interp import evaluate
from polyopt.schedules.limits import CAPS

pytestmark = pytest.mark.cc

EIGHT = "def s(float(A,B,C,D,E,F,G,H) T) -> (O) { O +=! T(a,b,c,d,e,f,g,h) }"
EIGHT_SIZES = dict.fromkeys("ABCDEFGH", 2)


def chain(n: int) -> str:
    """``T1(i) = A(i) * 2; T2(i) = (T1(i) + T1(i)) * 0.5 + 2; ...;
    O(i) = (T<n-1>(i) + T<n-1>(i)) * 1.5``: ``T<k>(i) = T<k-1>(i) + k`` exactly, each link
    read twice (a local read once would be inlined into its reader)."""
    body = ["T1(i) = A(i) * 2",
            *(f"T{k}(i) = (T{k - 1}(i) + T{k - 1}(i)) * 0.5 + {k}" for k in range(2, n)),
            f"O(i) = (T{n - 1}(i) + T{n - 1}(i)) * 1.5"]
    locals_ = ", ".join(f"T{k}" for k in range(1, n))
    return f"def chain(float(N) A) -> (O) local ({locals_}) {{\n" + "\n".join(body) + "\n}"


def chain_value(a: np.ndarray, n: int) -> np.ndarray:
    t = a * np.float32(2)
    for k in range(2, n):
        t = t + np.float32(k)
    return t * np.float32(3)


@pytest.fixture
def no_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """isl's scheduler runs out at once."""
    monkeypatch.setattr(auto, "CAPS", replace(CAPS, max_scheduler_operations=1))


@pytest.mark.parametrize(("src", "sizes"), [
    ("def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,r_k) * B(r_k,n) }",
     {"M": 5, "K": 6, "N": 7}),
    ("def relu(float(M,N) X) -> (Y) { Y(m,n) = fmax(X(m,n), 0) }", {"M": 5, "N": 7}),
    (EIGHT, EIGHT_SIZES),
])
@pytest.mark.usefixtures("no_budget")
def test_one_statement_out_of_budget_is_its_own_nest(src: str, sizes: dict[str, int]) -> None:
    """Past the budget, one statement (and its fill) is one nest over its iterators, fill
    first, without a warning: what isl's scheduler gives it up to loop order."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", PolyoptWarning)
        kernel = polyopt.compile(src, sizes=sizes)
        rng = np.random.default_rng(0)
        args = [rng.random([int(d) for d in t.shape]).astype(np.float32)
                for t in kernel.program.inputs]
        got = kernel(*args)
    if kernel.name == "mm":
        np.testing.assert_allclose(got, args[0] @ args[1], rtol=1e-5)
    elif kernel.name == "relu":
        np.testing.assert_array_equal(got, np.maximum(args[0], 0))
    else:
        np.testing.assert_allclose(got, args[0].sum(dtype=np.float64), rtol=1e-5)


@pytest.mark.usefixtures("no_budget")
def test_fill_then_reduction_loops() -> None:
    s = polyopt.schedule(EIGHT.replace("O +=!", "O(a) +=!"), "s", auto="isl",
                         sizes=EIGHT_SIZES)
    assert str(s).splitlines()[1:4] == ["for a:", "  O_0_init", "  for b:"]
    assert s.base == "isl"


def test_eight_reduction_indices_schedule_within_a_small_budget(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """One statement over 8 reduction indices of extent 2 goes through isl's scheduler
    within 160k operations (while their chain was coalesced, it did not finish)."""
    monkeypatch.setattr(auto, "CAPS", replace(CAPS, max_scheduler_operations=160_000))
    with warnings.catch_warnings():
        warnings.simplefilter("error", PolyoptWarning)
        s = polyopt.schedule(EIGHT, "s", auto="isl", sizes=EIGHT_SIZES)
    assert s.base == "isl"


def test_reductions_over_extents_of_two_schedule_within_a_small_budget(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With an epilogue the def goes to isl's scheduler: its 8 reduction indices of extent 2
    schedule within 160k operations (they take 80k; while their chain was coalesced into
    a few dense pieces, 20k operations took 10 s and the whole did not finish)."""
    monkeypatch.setattr(auto, "CAPS", replace(CAPS, max_scheduler_operations=160_000))
    src = EIGHT.replace("-> (O) {", "-> (O, P) {").replace(" }", "\n P = O * 2 }")
    with warnings.catch_warnings():
        warnings.simplefilter("error", PolyoptWarning)
        s = polyopt.schedule(src, "s", auto="isl", sizes=EIGHT_SIZES)
    assert s.base == "isl"


def test_out_of_budget_falls_back_to_program_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past its budget isl's scheduler gives way to program order, with a warning naming
    the def; the CPU pipeline still fuses the chain into one loop; isl's later calls run
    without the budget."""
    monkeypatch.setattr(auto, "CAPS", replace(CAPS, scheduler_work=40 * 1000))  # 1000 for 40
    with pytest.warns(PolyoptWarning, match=r"budget \(1000 operations\) on def 'chain' "
                                            r"\(40 statements\)"):
        s = polyopt.schedule(chain(40), "chain", sizes={"N": 64})
    assert s.base == "program-order"
    assert s.loops == ("i",)  # one fused loop
    assert s.poly.context.get_ctx().get_max_operations() == 0  # polyopt's context, not isl's
    with pytest.warns(PolyoptWarning, match="budget"):
        kernel = polyopt.compile(chain(40), parametric=True)
    a = np.random.default_rng(1).random(64).astype(np.float32)
    np.testing.assert_allclose(kernel(a), chain_value(a, 40), rtol=1e-6)


PADDED_1D = """def cv(float(C,H) I pad(0, 2), float(F,C,KH) Wt, float(F) bias) -> (O) {
    O(f, h) +=! I(r_c, h + r_kh - 2) * Wt(f, r_c, r_kh)
    O(f, h) = fmax(O(f, h) + bias(f), 0)
}"""


def test_bounded_coefficients_keep_the_scheduler_from_running_away() -> None:
    """At these sizes isl's unbounded integer programs grew for over 10 minutes, past the
    operation budget, which does not count their pivots (found by scripts/dev/fuzz_schedules.py).
    The schedule runs in a child process so that a regression fails here instead of hanging
    the suite; the bound does not outlive the call."""
    code = ("import polyopt\n"
            f"s = polyopt.schedule({PADDED_1D!r}, auto='isl', options={{'fusion': 'smart'}},\n"
            "                    sizes={'C': 1, 'F': 3, 'KH': 2, 'H': 6})\n"
            "print(s.base)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=True)
    assert done.stdout.split() == ["isl"]
    s = polyopt.schedule(PADDED_1D, auto="isl", sizes={"C": 2, "F": 3, "KH": 2, "H": 6})
    assert s.poly.context.get_ctx().get_schedule_max_coefficient() == -1  # polyopt's own


# 2-D recurrences reading planes t-1..t-3 that isl's scheduler never finished (hours, Ctrl-C
# ignored), past the budget and any coefficient or constant-term bound: seeds 38 and 299
# of 700 random ones (about 1 in 70 ran away; issue 40).
RECURRENCE = """def rec<T={T}>(float(3,N,M) A0) -> (B) local (float(T,N,M) A) {{
    A(t,i,j) = A0(t,i,j) where t in 0:3, i in 0:N, j in 0:M
    A(t,i,j) = 0.25 where t in 3:T, i in 0:{lo}, j in 0:M
    A(t,i,j) = 0.25 where t in 3:T, i in N-2:N, j in 0:M
    A(t,i,j) = 0.25 where t in 3:T, i in {lo}:N-2, j in 0:2
    {right}A(t,i,j) = {taps} where t in 3:T, i in {lo}:N-2, j in 2:M-{hi}
    B(i,j) = A(T-1,i,j)
}}"""
RUNAWAYS = [
    (RECURRENCE.format(T=6, lo=2, hi=0, right="", taps=(
        "0.259*A(t-1,i+2,j-1) + 0.286*A(t-2,i-2,j-2) + 0.178*A(t-2,i+1,j) + 0.221*A(t-3,i,j)")),
     {"N": 7, "M": 8}),
    (RECURRENCE.format(T=9, lo=1, hi=2, right="A(t,i,j) = 0.25 where t in 3:T, i in 1:N-2, "
                       "j in M-2:M\n    ", taps=(
                           "0.112*A(t-2,i,j+2) + 0.231*A(t-2,i+2,j+2) + "
                           "0.122*A(t-3,i-1,j-2)")),
     {"N": 9, "M": 9}),
]


@pytest.mark.parametrize(("source", "sizes"), RUNAWAYS)
def test_a_runaway_scheduler_is_abandoned(source: str, sizes: dict[str, int],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The scheduler runs in a child killed past its limit (1 s here, 20 s by default), and
    the def compiles in program order, right."""
    monkeypatch.setattr(auto, "MIN_SECONDS", 1.0)
    monkeypatch.setattr(auto, "OPERATIONS_PER_SECOND", 10**12)
    with pytest.warns(PolyoptWarning, match="did not finish within 1 s"):
        kernel = polyopt.compile(source, sizes=sizes)
    a0 = np.random.default_rng(0).random((3, sizes["N"], sizes["M"])).astype(np.float32)
    (want,) = evaluate(build_program(source, sizes=sizes), [a0], {})
    np.testing.assert_allclose(kernel(a0), want, rtol=1e-5)


def test_every_def_with_a_dependence_is_scheduled_in_a_child(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """isl's uncounted integer programs are on dependences: a def without any stays
    in-process; any other def is scheduled in a child, whose schedule is the one computed
    in-process."""
    forks = []
    real = auto._in_child
    monkeypatch.setattr(auto, "_in_child", lambda *a: forks.append(1) or real(*a))
    polyopt.schedule("def r(float(N) A) -> (B) { B(i) = max(A(i), 0.0) }", auto="isl",
                     sizes={"N": 64})
    assert forks == []
    polyopt.schedule(chain(8), auto="isl", sizes={"N": 64})
    assert forks == [1]
    jacobi = ("def j<T=6>(float(N) A0) -> (B) local (float(T,N) A) {\n"
              "  A(t,i) = A0(i) where t in 0:1, i in 0:N\n"
              "  A(t,i) = A(t-1,i) where t in 1:T, i in 0:1\n"
              "  A(t,i) = A(t-1,i) where t in 1:T, i in N-1:N\n"
              "  A(t,i) = (A(t-1,i-1) + A(t-1,i+1)) / 2.0 where t in 1:T, i in 1:N-1\n"
              "  B(i) = A(T-1,i)\n}")
    forked = polyopt.schedule(jacobi, auto="isl", sizes={"N": 30})
    assert forks == [1, 1]
    monkeypatch.setattr(auto, "isolated", lambda deps: False)
    here = polyopt.schedule(jacobi, auto="isl", sizes={"N": 30})
    assert forked.map.is_equal(here.map)
    assert str(forked.root) == str(here.root)


# A runaway's lowering is recorded with its warning (a warm start loads it without
# scheduling), so its compile must not find an earlier run's record.
UNCACHED = {**os.environ, "POLYOPT_NO_CACHE": "1"}


def _runaway_compile() -> str:
    """A program compiling a runaway recurrence that prints "scheduling" as the scheduler's
    child is about to start."""
    source, sizes = RUNAWAYS[0]
    return ("import sys, polyopt\n"
            "from polyopt.pipeline import auto\n"
            "real = auto._in_child\n"
            "def announced(*a):\n"
            "    print('scheduling', flush=True)\n"
            "    return real(*a)\n"
            "auto._in_child = announced\n"
            f"polyopt.compile({source!r}, sizes={sizes!r})\n")


def test_ctrl_c_interrupts_a_runaway_scheduler() -> None:
    """SIGINT while the scheduler runs (in its child, past isl's reach) raises
    KeyboardInterrupt in the compiling process at once, not after the 20 s limit."""
    code = _runaway_compile()
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=UNCACHED)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "scheduling"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=15)  # under the limit: the interrupt ended it
    finally:
        proc.kill()
    assert proc.returncode != 0
    assert "KeyboardInterrupt" in err


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_killed_compile_leaves_no_scheduler_running() -> None:
    """The scheduler's child dies with its parent: a compile killed outright (SIGKILL, a
    test's timeout) must not leave isl running on a core."""
    code = _runaway_compile()
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                            env=UNCACHED)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "scheduling"
        deadline = time.monotonic() + 10
        children: list[int] = []
        while not children and time.monotonic() < deadline:
            children = _children(proc.pid)
            time.sleep(0.05)
        assert children, "no scheduler child"
    finally:
        proc.kill()
        proc.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(Path(f"/proc/{c}").exists() and
                                              _state(c) != "Z" for c in children):
        time.sleep(0.05)
    assert not any(Path(f"/proc/{c}").exists() and _state(c) != "Z" for c in children)


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        found += [int(c) for c in task.read_text().split()]
    return found


def _state(pid: int) -> str:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "Z"
    return text[text.rindex(")") + 2]
