"""A fuzz of Schedule.from_isl over isl schedule-tree node kinds (issue 40: an extension
node raised a bare islpy.Error): random trees of band, sequence, set, filter, mark,
context, guard, extension and expansion nodes over a def's statements must be read or
refused with a PolyoptError; a tree read and accepted must compile to the def's values."""

from __future__ import annotations

import random

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polyopt
from polyopt import PolyoptError, Schedule

TWO = """def two(float(N) A) -> (C, B) {
    B(i) = A(i) * 2
    C(i) = B(i) + B(i+1)
}"""
# statement -> its iterators (polyopt's names; print(polyopt.schedule(TWO).poly) shows them)
STMTS = {"B_0": ("i",), "C_0": ("i",)}
DOMAIN = "[N] -> { B_0[i] : 0 <= i < N; C_0[i] : 0 <= i < N - 1 }"
KINDS = ("band", "band", "sequence", "set", "filter", "mark", "context", "guard", "extension",
         "expansion", "leaf")
MARKS = ("loop x", "x", "kk", "loop i", "1bad", "loop", "", "loop x y")


def _set(stmts: list[str]) -> str:
    return "{ " + "; ".join(f"{s}[{', '.join(STMTS[s])}]" for s in stmts) + " }"


def _value(rng: random.Random, stmt: str) -> str:
    i = STMTS[stmt][0]
    return rng.choice([i, f"{i} + 1", f"-{i}", f"2{i}", "0", "1", "N", f"floor({i}/2)",
                       f"{i} - N"])


def _node(rng: random.Random, stmts: list[str], depth: int) -> str:
    kind = "leaf" if depth > 3 or not stmts else rng.choice(KINDS)
    below = "" if kind == "leaf" else _child(rng, stmts, depth)
    if kind == "band":
        members = ["{ " + "; ".join(f"{s}[{STMTS[s][0]}] -> [({_value(rng, s)})]" for s in stmts)
                   + " }" for _ in range(rng.randint(1, 2))]
        return f'{{ schedule: "[N] -> [{", ".join(members)}]"{below} }}'
    if kind in ("sequence", "set"):
        rng.shuffle(stmts := list(stmts))
        cut = rng.randint(0, len(stmts))
        parts = [p for p in (stmts[:cut], stmts[cut:]) if p or rng.random() < 0.2]
        kids = [f'{{ filter: "{_set(p)}"{_child(rng, p, depth)} }}' if rng.random() < 0.9
                else _node(rng, p, depth + 1) for p in parts]
        return f"{{ {kind}: [ {', '.join(kids)} ] }}"
    if kind == "filter":
        kept = [s for s in stmts if rng.random() < 0.8]
        return f'{{ filter: "[N] -> {_set(kept)}"{_child(rng, kept, depth)} }}'
    if kind == "mark":
        return f'{{ mark: "{rng.choice(MARKS)}"{_child(rng, stmts, depth, True)} }}'
    if kind in ("context", "guard"):
        return f'{{ {kind}: "[N] -> {{ [] : N >= {rng.randint(0, 3)} }}"{below} }}'
    if kind == "extension":
        s = rng.choice([*stmts, "X"])
        return f'{{ extension: "[N] -> {{ [] -> {s}[0] }}"{below} }}'
    if kind == "expansion":
        ident = "; ".join(f"{s}[i] -> {s}[i]" for s in stmts)
        return (f'{{ contraction: "[N] -> {{ {ident} }}", expansion: "[N] -> {{ {ident} }}"'
                f"{below} }}")
    return _band_leaf(rng, stmts)


def _band_leaf(rng: random.Random, stmts: list[str]) -> str:
    """A last band scanning each statement's index, or nothing below."""
    if not stmts or rng.random() < 0.3:
        return '{ schedule: "[N] -> [{ B_0[i] -> [(i)]; C_0[i] -> [(i)] }]" }'
    members = "; ".join(f"{s}[i] -> [(i)]" for s in stmts)
    return f'{{ schedule: "[N] -> [{{ {members} }}]" }}'


def _child(rng: random.Random, stmts: list[str], depth: int, needed: bool = False) -> str:
    if not needed and rng.random() < 0.25:
        return ""
    return f", child: {_node(rng, stmts, depth + 1)}"


def draw_tree(rng: random.Random) -> str:
    return f'{{ domain: "{DOMAIN}", child: {_node(rng, list(STMTS), 0)} }}'


def _check(text: str) -> str:
    """'' when ``text`` is read (and then compiles to the def's values) or refused with a
    PolyoptError; else what was raised."""
    try:
        s = Schedule.from_isl(TWO, text, sizes={"N": 6})
    except PolyoptError:
        return ""
    except Exception as e:
        return f"{type(e).__name__}: {e}"
    a = np.arange(6, dtype=np.float32)
    c, b = polyopt.compile(TWO, schedule=s, sizes={"N": 6})(a)
    np.testing.assert_allclose(b, 2 * a)
    np.testing.assert_allclose(c, 2 * a[:-1] + 2 * a[1:])
    return ""


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.randoms(use_true_random=False))
def test_random_trees_are_read_or_refused_with_polyopt_errors(rng: random.Random) -> None:
    text = draw_tree(rng)
    assert _check(text) == "", text


def test_each_kind_reaches_from_isl() -> None:
    """The generator writes every node kind isl reads (the kinds, not one instance)."""
    rng = random.Random(0)
    texts = " ".join(draw_tree(rng) for _ in range(300))
    for key in ("schedule:", "sequence:", "set:", "filter:", "mark:", "context:", "guard:",
                "extension:", "expansion:"):
        assert key in texts, key
