"""A vector loop's width: the compiler's split of its trip count at each width
(``polyopt.costmodel.lanes``), the model's choice printed as the loop's ``simdlen``, and the
``vectorize(loop, lanes=...)`` verb."""

from __future__ import annotations

import re

import numpy as np
import pytest

import polyopt
from polyopt import schedule_from_json
from polyopt.costmodel import lanes as vl
from polyopt.costmodel.machine import configured
from polyopt.errors import OptionError, ScheduleError
from polyopt.tuning.space import space_for

MACHINE = ("vector_bytes={},vector_registers=32,l1d_bytes=32768,l2_bytes=1048576,"
           "l3_bytes=33554432,cores=2")
SCALE = "def f(float(N,M) A) -> (O) { O(i,j) = A(i,j) * 2 + 1 }"
POOL = "def f(float(N,M) A) -> (O) { O(i,j) = fmax(A(i,2*j), A(i,2*j+1)) }"


def test_split_matches_the_compilers_remainder_scheme() -> None:
    """The splits read from GCC's assembly (the module docstring): a row of 28, and a
    stride-2 row of 64 whose last iteration stays scalar."""
    assert str(vl.split(28, 16)) == "1 x 16 + 8 + 4 scalar"
    assert str(vl.split(28, 8)) == "3 x 8 + 4"
    assert str(vl.split(64, 16, gap=True)) == "3 x 16 + 8 + 8 scalar"
    assert str(vl.split(64, 8, gap=True)) == "7 x 8 + 4 + 4 scalar"
    assert vl.split(64, 16).iterations == 4 and vl.split(5, 8).iterations == 2


def test_choose_takes_the_fewest_iterations_and_the_narrower_on_a_tie() -> None:
    assert vl.choose(1024, 16)[0].lanes == 16
    assert vl.choose(28, 16)[0].lanes == 8      # 4 iterations against 6
    assert vl.choose(64, 16, gap=True)[0].lanes == 8  # 12 against 12
    assert vl.choose(60, 16, gap=True)[0].lanes == 16  # 8 against 11
    assert vl.choose(None, 16)[0].lanes == 16
    assert vl.candidates(8) == (8, 4) and vl.candidates(2) == (2,)


def _simdlens(source: str, sizes: dict[str, int], vector_bytes: int) -> list[int]:
    # loops as written: merged, an elementwise def's rows would be one loop
    k = polyopt.compile(source, sizes=sizes, options={
        "machine": MACHINE.format(vector_bytes), "tuned": False, "knobs": {"merge": False}})
    return [int(n) for n in re.findall(r"simdlen\((\d+)\)", k.source)]


@pytest.mark.parametrize(("cols", "vector_bytes", "want"), [
    (1024, 64, 16), (1024, 32, 8), (28, 64, 8), (30, 32, 8), (4, 64, 8)])
def test_the_printed_width_follows_the_trip_and_the_machine(cols: int, vector_bytes: int,
                                                             want: int) -> None:
    """A row of 4 runs as the 8-lane loop's 4-lane epilogue: one vector iteration."""
    assert _simdlens(SCALE, {"N": 8, "M": cols}, vector_bytes) == [want]


def test_the_width_and_its_reason_are_in_the_notes() -> None:
    s = polyopt.schedule(SCALE, sizes={"N": 8, "M": 28},
                         options={"machine": MACHINE.format(64)})
    why = next(n for n in s.notes if "vector loop" in n)
    assert "8 lanes: 3 x 8 + 4, 6 cycles (against 16 lanes: 1 x 16 + 8 + 4 scalar, 9 cycles)" \
        in why
    assert "vectorize('j', lanes=8)" in s.as_python()


def test_a_strided_read_counts_its_scalar_last_iteration() -> None:
    """64 outputs from a stride-2 read: 16 lanes leave 8 scalar iterations, 8 lanes 4."""
    assert _simdlens(POOL, {"N": 4, "M": 128}, 64) == [8]


FUSED = """def f(float(N,M) A) -> (P, Q) {
    P(i,j) = exp(A(i,j))
    Q(i,j) = P(i,j) * 2 + A(i,j)
}"""


def test_a_loop_over_several_statements_is_the_models_vector_loop_too() -> None:
    """A fused elementwise body gets its width like a single statement (it was left to the
    compiler, with no note), and computes the same."""
    s = polyopt.schedule(FUSED, sizes={"N": 6, "M": 28}, options={
        "machine": MACHINE.format(64), "knobs": {"merge": False}})
    assert "8 lanes: 3 x 8 + 4" in next(n for n in s.notes if "vector loop" in n)
    assert _simdlens(FUSED, {"N": 6, "M": 28}, 64) == [8]
    a = np.random.default_rng(3).standard_normal((6, 28)).astype(np.float32)
    p, q = polyopt.compile(FUSED, sizes={"N": 6, "M": 28})(a)
    np.testing.assert_allclose(p, np.exp(a), rtol=1e-5)
    np.testing.assert_allclose(q, np.exp(a) * 2 + a, rtol=1e-5)


@pytest.mark.parametrize("cols", [37, 64, 1000])
def test_wide_loops_with_remainders_compute_the_same(cols: int) -> None:
    rng = np.random.default_rng(7)
    a = rng.standard_normal((5, 2 * cols)).astype(np.float32)
    for source, want in ((SCALE, a * 2 + 1), (POOL, np.fmax(a[:, 0::2], a[:, 1::2]))):
        k = polyopt.compile(source, sizes={"N": 5, "M": 2 * cols}, options={"tuned": False})
        np.testing.assert_allclose(k(a), want, rtol=1e-6)


def test_the_verb_checks_and_replays_its_lanes() -> None:
    s = polyopt.schedule(SCALE, sizes={"N": 8, "M": 64}, auto=False)
    inner = s.loops[-1]
    wide = s.vectorize(inner, lanes=32)
    assert "32 lanes" in str(wide) and f"vectorize({inner!r}, lanes=32)" in wide.as_python()
    back = schedule_from_json(wide.as_json(), SCALE, sizes={"N": 8, "M": 64})
    assert back.as_python() == wide.as_python()
    narrow = wide.vectorize(inner, lanes=4)  # a second call replaces the width
    assert "4 lanes" in str(narrow) and "32 lanes" not in str(narrow)
    for bad in (3, 0, 128, True):
        with pytest.raises(ScheduleError, match="power of two"):
            s.vectorize(inner, lanes=bad)
    with pytest.raises(ScheduleError, match="'lanes' must be an int"):
        s.vectorize(inner, lanes="8")  # type: ignore[arg-type]


def test_the_lanes_knob_fixes_the_width_and_the_tuner_offers_the_other() -> None:
    sizes = {"N": 8, "M": 1024}
    machine = MACHINE.format(64)
    got = polyopt.compile(SCALE, sizes=sizes, options={
        "machine": machine, "tuned": False, "knobs": {"lanes": 4}})
    assert re.findall(r"simdlen\((\d+)\)", got.source) == ["4"]
    assert "4 lanes (the lanes knob)" in "\n".join(got.schedule.notes)
    with pytest.raises(OptionError, match="power of two"):
        polyopt.compile(SCALE, sizes=sizes, options={"knobs": {"lanes": 12}})
    assert "lanes: None, 8" in str(space_for(SCALE, None, sizes, machine=configured(machine)))
