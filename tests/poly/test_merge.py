"""Merging loops that every access walks as one run (polyopt.poly.merge): which merge, what
the program becomes, and that merged kernels compute what the def says."""

from __future__ import annotations

import json

import numpy as np
import pytest

import polyopt
from polyopt import kernels, lang
from polyopt.errors import ScheduleArgumentError, ScheduleError
from polyopt.poly.merge import Merge, merge_program, mergeable

CONV = kernels.get("conv2d", stride=1, padding=0)
SIZES_1X1 = {"N": 1, "C": 8, "H": 7, "W": 5, "F": 6, "KH": 1, "KW": 1}


def _program(src: str, sizes: dict[str, int], name: str | None = None):
    return lang.build_program(src, name, sizes)


def test_a_1x1_convolution_merges_its_pixels() -> None:
    """h, w of O and I walk one run of 35 pixels; the filter's taps are one point."""
    p = _program(CONV, SIZES_1X1, "conv2d")
    found = mergeable(p)
    assert found and found[0].dim == 2 and found[0].tensor in ("I", "O")
    merged = merge_program(p, found[0])
    assert merged.tensors["I"].shape == ("1", "8", "35")
    assert merged.tensors["O"].shape == ("1", "6", "35")
    assert merged.tensors["Wt"].shape == p.tensors["Wt"].shape
    (s,) = merged.stmts
    assert len(s.lhs) == 3 and "0 <= hw <= 34" in s.domain
    assert mergeable(merged) == ()


@pytest.mark.parametrize("sizes", [{**SIZES_1X1, "KH": 3, "KW": 3, "H": 9, "W": 9}])
def test_a_3x3_window_does_not_merge(sizes: dict[str, int]) -> None:
    assert mergeable(_program(CONV, sizes, "conv2d")) == ()


def test_what_does_not_merge() -> None:
    cases = [
        # a transpose: O's (i, j) is I's (j, i)
        ("def t(float(M,N) I) -> (O) { O(i,j) = I(j,i) }", {"M": 4, "N": 5}),
        # a triangle is no box
        ("def t(float(N,N) I) -> (O) { O(i,j) = I(i,j) where j in 0:i+1 }", {"N": 5}),
        # an index used as a value
        ("def t(float(M,N) I) -> (O) { O(i,j) = I(i,j) * j }", {"M": 4, "N": 5}),
        # a part of a wider tensor's rows: j does not span its dimension
        ("def t(float(M,N) I) -> (O) { O(i,j) = I(i,j) where j in 0:N-1 }",
         {"M": 4, "N": 6}),
    ]
    for src, sizes in cases:
        assert mergeable(_program(src, sizes)) == (), src


def test_unbound_sizes_do_not_merge() -> None:
    p = lang.build_program("def t(float(M,N) I) -> (O) { O(i,j) = I(i,j) + 1 }", None, None)
    assert mergeable(p) == ()
    with pytest.raises(ScheduleError, match="unbound sizes"):
        merge_program(p, Merge("O", 0))


def test_a_merge_that_does_not_apply_is_refused() -> None:
    p = _program("def t(float(M,N) I) -> (O) { O(i,j) = I(j,i) }", {"M": 4, "N": 4})
    with pytest.raises(ScheduleError, match="one run"):
        merge_program(p, Merge("O", 0))


ELEMENTWISE = """def t(float(N,C,H,W) X, float(C) b) -> (Y) {
    Y(n,c,h,w) = fmax(X(n,c,h,w) + b(c), 0.0)
}"""
POOL = "def gap(float(N,C,H,W) I) -> (O) { O(n,c) +=! I(n,c,r_h,r_w) / (H * W) }"


@pytest.mark.cc
@pytest.mark.parametrize("case", [
    (CONV, "conv2d", SIZES_1X1),
    (CONV, "conv2d", {"N": 2, "C": 19, "H": 14, "W": 14, "F": 33, "KH": 1, "KW": 1}),
    (ELEMENTWISE, None, {"N": 2, "C": 3, "H": 7, "W": 9}),
    (POOL, None, {"N": 2, "C": 5, "H": 7, "W": 7}),
], ids=["conv-7x5", "conv-14x14-n2", "bias-relu", "global-pool"])
def test_merged_kernels_compute_the_def(case: tuple) -> None:
    """Merged (the knob forces it) and not, against the float64 interpreter's answer."""
    src, name, sizes = case
    rng = np.random.default_rng(7)
    program = _program(src, sizes, name)
    inputs = [rng.standard_normal([int(e) for e in t.shape]).astype(np.float32)
              for t in program.inputs]
    outs = {}
    for merge in (True, False):
        k = polyopt.compile(src, name, sizes=sizes,
                            options={"knobs": {"merge": merge}, "tuned": False})
        assert any(st.verb == "merge" for st in k.schedule.steps) == merge
        outs[merge] = k(*inputs)
        assert outs[merge].shape == tuple(int(e) for e in program.outputs[0].shape)
    np.testing.assert_allclose(outs[True], outs[False], rtol=1e-5, atol=1e-5)


def test_a_merged_schedule_replays() -> None:
    """As JSON and as the verb: the merge is the schedule's first step."""
    sizes = {**SIZES_1X1, "H": 14, "W": 14}
    s = polyopt.schedule(CONV, "conv2d", sizes=sizes, options={"knobs": {"merge": True}})
    assert s.steps[0].verb == "merge"
    again = polyopt.schedule_from_json(s.as_json(), CONV, "conv2d", sizes=sizes)
    assert again.steps == s.steps
    by_hand = polyopt.schedule(CONV, "conv2d", sizes=sizes, auto=False).merge(
        *s.steps[0].args)
    assert len(by_hand.poly.stmts[0].stmt.lhs) == 3
    with pytest.raises(ScheduleError, match="before other"):
        polyopt.schedule(CONV, "conv2d", sizes=sizes, auto=False).split("n", 1).merge(
            *s.steps[0].args)


def test_the_model_decides_and_says_why() -> None:
    """Left to the model, a mergeable def's schedule notes the merge decision."""
    s = polyopt.schedule(CONV, "conv2d", sizes={**SIZES_1X1, "H": 56, "W": 56, "C": 64,
                                                "F": 64})
    assert any(n.startswith("merge:") for n in s.notes)


MM = "def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,r_k) * B(r_k,n) }"
MM_SIZES = {"M": 4, "K": 3, "N": 5}


@pytest.mark.parametrize(("args", "message"), [
    ((["m2", "n2"], 4), r"merge: argument 'tensor' must be a name \(str\), not list "
                        r"\['m2', 'n2'\]; merge\(tensor: a name \(str\), dim: an int"),
    (("C", 1.5), r"argument 'dim' must be an int .*not float 1.5"),
    (("C", None), r"argument 'dim' must be an int .*not NoneType None"),
    (("C", 10**30), r"argument 'dim' must be an int .*not int 1000000000000000000000000000000"),
])
def test_merge_of_malformed_arguments_names_them(args: tuple, message: str) -> None:
    """Issue 40: merge(["m2", "n2"], 4) raised TypeError: unhashable type: 'list', called
    directly and replayed from hand-edited JSON alike."""
    s = polyopt.schedule(MM, auto=False, sizes=MM_SIZES)
    with pytest.raises(ScheduleArgumentError, match=message):
        s.merge(*args)
    text = json.dumps({"def": "mm", "base": "program-order",
                       "steps": [{"verb": "merge", "args": list(args)}]})
    with pytest.raises(ScheduleError, match=message.split(";")[0]):
        polyopt.schedule_from_json(text, MM, sizes=MM_SIZES)
    with pytest.raises(ScheduleArgumentError, match="merge: argument"):
        Merge(*args)
