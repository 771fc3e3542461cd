"""Differential testing of schedules (Csmith-style): random programs of each family
(tests/fuzz_programs.py) under random verb sequences (tests/fuzz_verbs.py). Refused verbs
are skipped; every accepted schedule is compiled, run and compared with the float64
interpreter. A wrong answer or a crash fails with a runnable reproducer.

Hypothesis draws the programs and verbs (derandomized: CI sees the same pairs every run);
``scripts/dev/fuzz_schedules.py`` runs the same checks in long seeded campaigns.
"""

from __future__ import annotations

import collections
import random

import numpy as np
import pytest
from fuzz_programs import FAMILIES, draw_program
from fuzz_verbs import Outcome, _compare, check_pair, reference
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.cc

PROGRAMS_PER_FAMILY = 18  # 540 pairs: above the floor, inside CI's 10 minutes
SCHEDULES_PER_PROGRAM = 6
PAIR_FLOOR = 500  # the minimum of program x schedule pairs per CI run
SETTINGS = settings(max_examples=PROGRAMS_PER_FAMILY, deadline=None, derandomize=True,
                    database=None, suppress_health_check=[HealthCheck.too_slow])

TALLY: collections.Counter[str] = collections.Counter()  # statuses, over the module
FAMILIES_RUN: set[str] = set()
VERBS: collections.Counter[str] = collections.Counter()  # accepted, by verb


def _report(failures: list[Outcome]) -> str:
    return "\n\n".join(f"{o.status}: {o.message}\n{o.reproducer}" for o in failures)


@pytest.mark.parametrize("family", FAMILIES)
def test_accepted_schedules_match_the_interpreter(family: str) -> None:
    @given(st.randoms(use_true_random=False))
    @SETTINGS
    def check(rng: random.Random) -> None:
        prog = draw_program(rng, family)
        inputs = prog.arrays(0)
        want = reference(prog, inputs)
        failures = []
        for _ in range(SCHEDULES_PER_PROGRAM):
            out = check_pair(prog, inputs, want, rng)
            TALLY[out.status] += 1
            TALLY["verbs tried"] += out.verbs_tried
            TALLY["verbs refused"] += out.verbs_refused
            VERBS.update(out.accepted)
            if out.status in ("wrong", "crash"):
                failures.append(out)
        assert not failures, _report(failures)

    check()
    FAMILIES_RUN.add(family)


def test_enough_pairs_were_checked() -> None:
    """Runs last in this module: the floor holds over every family's test."""
    if set(FAMILIES) != FAMILIES_RUN:
        pytest.skip(f"counts only when every family ran (ran: {sorted(FAMILIES_RUN)})")
    tried = sum(TALLY[s] for s in ("ok", "refused", "compile-refused", "wrong", "crash"))
    accepted = TALLY["ok"] + TALLY["wrong"]
    print(f"\nfuzzed pairs: {tried} tried, {accepted} accepted, {TALLY['refused']} with "
          f"every verb refused, {TALLY['compile-refused']} refused at compile; verbs: "
          f"{TALLY['verbs tried']} tried, {TALLY['verbs refused']} refused; accepted: "
          f"{dict(sorted(VERBS.items()))}")
    assert tried >= PAIR_FLOOR
    assert accepted >= tried // 2  # most pairs must reach the comparison


def test_a_reference_beyond_the_outputs_range_wants_its_infinity() -> None:
    """A product of 575 float32s near 1 is 4.9e81 in the float64 interpreter: a float32
    output holds only +inf there (seed 3136, program 52), and a finite value is wrong."""
    want = [np.array(4.88821135953274e+81)]
    assert _compare((np.array(np.inf, np.float32),), want, False) == ""
    assert "differ" in _compare((np.array(3e38, np.float32),), want, False)
    assert "differ" in _compare((np.array(-np.inf, np.float32),), want, False)
    assert _compare((np.array([1.0, 2.0], np.float32),), [np.array([1.0, 2.0005])], False) == ""
