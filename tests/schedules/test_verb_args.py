"""The schedule verbs' argument checks (polyopt.schedules.verb_args): malformed arguments,
called directly and replayed from JSON, raise a PolyoptError naming the verb, the argument
and the valid kinds, never another exception (issue 40: merge(["m2", "n2"], 4) raised
TypeError: unhashable type: 'list')."""

from __future__ import annotations

import json
import random

import pytest
from fuzz_verbs import HOSTILE, check_malformed, draw_malformed
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polyopt
from polyopt import Schedule, schedule_from_json
from polyopt.errors import ScheduleArgumentError, ScheduleError
from polyopt.schedules.schedule import VERBS
from polyopt.schedules.verb_args import SIGNATURES

MM = "def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,r_k) * B(r_k,n) }"
CHAIN = """def ml(float(N,M) a0, float(M,K) a1) -> (t2) local (t0) {
    t0(i, j) = exp(a0(i, j))
    t2(i, k) +=! t0(i, r_j) * a1(r_j, k)
}"""
BASES = [(MM, {"M": 4, "K": 3, "N": 5}, False), (MM, None, "isl"),
         (CHAIN, {"N": 3, "M": 4, "K": 2}, False)]


@pytest.fixture(scope="module")
def schedules() -> list[Schedule]:
    return [polyopt.schedule(src, auto=auto, sizes=sizes) for src, sizes, auto in BASES]


def test_every_verb_has_a_signature() -> None:
    assert set(SIGNATURES) == set(VERBS)


@settings(max_examples=80, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.randoms(use_true_random=False))
def test_malformed_arguments_raise_polyopt_errors(schedules: list[Schedule],
                                                   rng: random.Random) -> None:
    s = rng.choice(schedules)
    step = draw_malformed(s, rng)
    assert check_malformed(s, step) == ""


@pytest.mark.parametrize(("verb", "args", "message"), [
    ("split", ("m", 10**30), r"split: argument 'factor' must be an int \(\|n\| < 2\*\*31\), "
                             r"not int 10{30}; split\(loop: a name \(str\), factor: an int"),
    ("split", (["m"], 2), r"argument 'loop' must be a name \(str\), not list \['m'\]"),
    ("tile", ({"m2": 1}, 4), r"argument 'loops' must be a name or a list or tuple of names"),
    ("tile", (("m2",), None), r"argument 'sizes' must be an int or a list or tuple of ints"),
    ("reorder", (["m2", "n2"],), r"argument 'order' must be a name \(str\), not list"),
    ("skew", ("m2", "n2", None), r"argument 'factor' must be an int"),
    ("gpu_tile", ("m2", None), r"argument 'regs' must be a pair of ints"),
    ("distribute", ({},), r"argument 'loop' must be a name \(str\), not dict \{\}"),
    ("pack", (["B"], 1, 4), r"pack: argument 'tensor' must be a name \(str\), not list"),
    ("split", ("m", 2, [1, 2]), r"argument 'names' must be a list or tuple of names or None"),
    ("hyperplanes", (("m2", "n2"), ((1, 0), (0, 1.5))), r"argument 'rows' must be a list"),
    ("split", ("m",), r"split: missing a required argument: 'factor'"),
    ("parallel", ("m2",), None),
])
def test_each_kind_of_bad_argument_is_named(verb: str, args: tuple, message: str | None
                                            ) -> None:
    s = polyopt.schedule(MM, auto=False, sizes={"M": 4, "K": 3, "N": 5})
    if message is None:
        getattr(s, verb)(*args)  # well formed: the checks let it through
        return
    with pytest.raises(ScheduleArgumentError, match=message):
        getattr(s, verb)(*args)
    text = json.dumps({"def": "mm", "base": "program-order",
                       "steps": [{"verb": verb, "args": list(args)}]})
    with pytest.raises(ScheduleError, match=message.split(";")[0]):
        schedule_from_json(text, MM, sizes={"M": 4, "K": 3, "N": 5})


def test_a_verbs_own_message_words_a_float_factor() -> None:
    """A float where an int goes: the verb's own, more specific message is kept."""
    s = polyopt.schedule(MM, auto=False)
    with pytest.raises(ScheduleError, match=r"split factor of k must be a positive integer, "
                                            r"not 2\.5"):
        s.split("k", 2.5)


def test_the_hostile_values_are_json() -> None:
    assert json.loads(json.dumps(list(HOSTILE)))
