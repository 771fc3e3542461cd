"""Schedule.from_isl / Schedule.to_isl: one's own isl schedule through the public API."""

from __future__ import annotations

import re
from pathlib import Path

import islpy as isl
import numpy as np
import pytest

import polyopt
from polyopt import IllegalScheduleError, Schedule, ScheduleError, schedule_from_json

MM = "def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,r_k) * B(r_k,n) }"
BLUR = "def blur(float(H,W) I) -> (O) { O(i,j) = I(i,j) + I(i+1,j) + I(i,j+1) }"
TWO = """def two(float(N) A) -> (C, B) {
    B(i) = A(i) * 2
    C(i) = B(i) + B(i+1)
}"""

# A Pluto-style interchanged matmul as a hand-written isl schedule tree: n outermost, the
# fill of each column of C ahead of its k loop, m innermost under k.
MM_TREE = """{ domain: "[M, K, N] -> { C_0_init[m, n] : 0 <= m < M and 0 <= n < N;
                                    C_0[m, n, r_k] : 0 <= m < M and 0 <= n < N and 0 <= r_k < K }",
  child: { schedule: "[M, K, N] -> [{ C_0_init[m, n] -> [(n)]; C_0[m, n, r_k] -> [(n)] }]",
  child: { sequence: [
    { filter: "{ C_0_init[m, n] }",
      child: { schedule: "[M, K, N] -> [{ C_0_init[m, n] -> [(m)] }]" } },
    { filter: "{ C_0[m, n, r_k] }",
      child: { mark: "kk",
      child: { schedule: "[M, K, N] -> [{ C_0[m, n, r_k] -> [(r_k)] },
                                         { C_0[m, n, r_k] -> [(m)] }]" } } } ] } } }"""


def _rand(*shape: int) -> np.ndarray:
    return np.random.default_rng(7).random(shape, dtype=np.float32)


# -- round trip -------------------------------------------------------------------------------

@pytest.mark.parametrize(("kernel", "sizes"), [
    ("matmul", {"M": 24, "N": 20, "K": 16}),
    ("softmax", {"N": 6, "D": 10}),
    ("layernorm", {"N": 6, "D": 10}),
    ("conv2d", {"N": 2, "C": 3, "H": 8, "W": 8, "F": 4, "KH": 3, "KW": 3}),
    ("polybench_2mm", {"NI": 8, "NJ": 9, "NK": 10, "NL": 11}),
])
def test_round_trip_keeps_loops_and_c(kernel: str, sizes: dict[str, int]) -> None:
    src = polyopt.kernels.get(kernel)
    sizes = {k: v for k, v in sizes.items() if re.search(rf"\b{k}\b", src)}
    for made in (polyopt.schedule(src, auto="isl", sizes=sizes),
                 polyopt.schedule(src, auto=False, sizes=sizes)):
        back = Schedule.from_isl(src, made.to_isl(), sizes=sizes)
        assert back.loops == made.loops and back.stmts == made.stmts
        assert str(back).splitlines()[1:] == str(made).splitlines()[1:]
        c = polyopt.compile(src, sizes=sizes, schedule=made).source
        assert polyopt.compile(src, sizes=sizes, schedule=back).source == c


def test_round_trip_of_a_transformed_schedule_as_text() -> None:
    made = polyopt.schedule(MM, auto=False).tile(("m2", "n2"), 8).reorder(
        "m2_o", "n2_o", "k", "m2_i", "n2_i")
    back = Schedule.from_isl(MM, made.to_isl().to_str())
    assert back.loops == made.loops
    sizes = {"M": 20, "N": 12, "K": 8}
    assert (polyopt.compile(MM, sizes=sizes, schedule=back).source
            == polyopt.compile(MM, sizes=sizes, schedule=made).source)


def test_to_isl_is_the_tree() -> None:
    s = polyopt.schedule(MM, auto="isl")
    assert isinstance(s.to_isl(), isl.Schedule) and s.to_isl() is s.tree


# -- naming -----------------------------------------------------------------------------------

def test_loops_named_after_indices_skews_marks_and_depth() -> None:
    assert Schedule.from_isl(BLUR, "{ O_0[i, j] -> [i, i + j] }").loops == ("i", "i_j")
    assert Schedule.from_isl(BLUR, "{ O_0[i, j] -> [j + 1, -i] }").loops == ("j", "i_rev")
    tiled = Schedule.from_isl(BLUR, "{ O_0[i, j] -> [floor(i/4), j, i] }")
    assert tiled.loops == ("c0", "j", "i")
    s = Schedule.from_isl(MM, MM_TREE)
    assert s.loops == ("n", "m", "kk", "m2")  # the mark names the k loop; m is taken once
    with pytest.raises(ScheduleError, match="two loops are marked 'x'"):
        Schedule.from_isl(BLUR, '{ domain: "[H, W] -> { O_0[i, j] : 0 <= i < H - 1 and '
                                '0 <= j < W - 1 }", child: { mark: "x", child: { schedule: '
                                '"[{ O_0[i, j] -> [(i)] }]", child: { mark: "loop x", child: '
                                '{ schedule: "[{ O_0[i, j] -> [(j)] }]" } } } } }')


def test_flat_map_constants_become_sequences() -> None:
    s = Schedule.from_isl(MM, "{ C_0_init[m, n] -> [n, m, 0, 0]; C_0[m, n, k] -> [n, m, 1, k] }")
    assert s.loops == ("n", "m", "k")
    assert [line.strip() for line in str(s).splitlines()[1:]] == [
        "for n:", "for m:", "C_0_init", "for k:", "C_0"]


# -- checks -----------------------------------------------------------------------------------

def test_illegal_schedule_names_the_dependence() -> None:
    with pytest.raises(IllegalScheduleError, match="flow dependence from statement B_0 to "
                                                   "statement C_0"):
        Schedule.from_isl(TWO, "{ B_0[i] -> [i, 0]; C_0[i] -> [i, 1] }")
    with pytest.raises(IllegalScheduleError, match="from statement C_0_init to statement C_0"):
        Schedule.from_isl(MM, "{ C_0_init[m, n] -> [1, m, n, 0]; C_0[m, n, k] -> [0, m, n, k] }")
    # Fused with B one step ahead: legal.
    assert Schedule.from_isl(TWO, "{ B_0[i] -> [i, 0]; C_0[i] -> [i + 1, 1] }").loops == ("i",)


@pytest.mark.parametrize(("text", "message"), [
    ("{ B_0[i] -> [i] }", r"leaves out instances of def 'two': .*C_0\[i\]"),
    ("{ B_0[i] -> [i]; X[i] -> [i] }", "has no statement X; its statements: B_0, C_0"),
    ('{ domain: "[N] -> { B_0[i] : 0 <= i < N; C_0[i] : 0 <= i < N }" }',
     r"has instances def 'two' does not: .*C_0\[i"),
    ("{ B_0[i] -> [0]; C_0[i] -> [1] }", "gives several instances of (B_0|C_0) the same time"),
    ("[T] -> { B_0[i] -> [T + i]; C_0[i] -> [i + 1] }", "parameter.* T, which are not sizes"),
    ("{ B_0[i] -> [i]; B_0[i] -> [i + 1]; C_0[i] -> [i + 2] }", "several times"),
])
def test_bad_coverage_refused(text: str, message: str) -> None:
    with pytest.raises(ScheduleError, match=message):
        Schedule.from_isl(TWO, text)


def test_statement_split_between_branches_refused() -> None:
    text = ('{ domain: "[N] -> { B_0[i] : 0 <= i < N; C_0[i] : 0 <= i < N - 1 }", child: '
            '{ sequence: [ { filter: "[N] -> { B_0[i] : i < 3 }" }, { filter: "[N] -> '
            '{ B_0[i] : i >= 3; C_0[i] }", child: { schedule: "[{ B_0[i] -> [(i)]; '
            'C_0[i] -> [(i + 1)] }]" } } ] } }')
    with pytest.raises(ScheduleError, match="statement B_0 is split between branches"):
        Schedule.from_isl(TWO, text)


@pytest.mark.parametrize("text", ["{ B_0[i] -> [i; C_0[i] -> [i] }", "{ domain: \"{ B_0[i] \" }",
                                  "not isl at all"])
def test_bad_text_refused_with_isls_message(text: str) -> None:
    with pytest.raises(ScheduleError, match=r"isl cannot read this .*isl_.*read_from_str"):
        Schedule.from_isl(TWO, text)


def test_not_a_schedule_refused() -> None:
    with pytest.raises(ScheduleError, match=r"takes an isl\.Schedule or its text, not int"):
        Schedule.from_isl(TWO, 42)  # type: ignore[arg-type]


TWO_DOMAIN = '{ domain: "[N] -> { B_0[i] : 0 <= i < N; C_0[i] : 0 <= i < N - 1 }", child: '


@pytest.mark.parametrize(("child", "message"), [
    ('{ sequence: [ { extension: "[N] -> { [] -> X[] }" }, { filter: "{ B_0[i]; C_0[i] }" } '
     '] }', r"child 0 of the sequence node \(at domain > sequence\) is no filter node"),
    ('{ extension: "[N] -> { [] -> B_0[0] }" }',
     r"has an extension node \(at domain > extension\); polyopt reads domain, band, "),
    ('{ contraction: "[N] -> { B_0[i] -> B_0[i]; C_0[i] -> C_0[i] }", expansion: "[N] -> '
     '{ B_0[i] -> B_0[i]; C_0[i] -> C_0[i] }" }', r"has an expansion node"),
    ('{ schedule: "[{ B_0[i] -> [(i)]; C_0[i] -> [(i + 1)] }]", child: { guard: "[N] -> '
     '{ [] : N > 2 }" } }', r"has a guard node \(at domain > band > guard\)"),
])
def test_node_kinds_a_loop_tree_cannot_hold_are_refused(child: str, message: str) -> None:
    """Issue 40: an extension node raised a bare islpy.Error (isl_schedule_get_map)."""
    with pytest.raises(ScheduleError, match=message):
        Schedule.from_isl(TWO, TWO_DOMAIN + child + " }")


# -- replay, verbs, compile -------------------------------------------------------------------

def test_json_replay_rebuilds_the_base_from_its_text() -> None:
    both = MM + "\n" + BLUR
    s = Schedule.from_isl(both, "{ O_0[i, j] -> [i, i + j] }", name="blur")
    s = s.tile(("i", "i_j"), 4)
    text = s.as_json()
    assert '"base": "from_isl"' in text and "i + j" in text
    again = schedule_from_json(text, both)  # the def's name comes from the JSON
    assert again.base == "from_isl" and again.loops == s.loops and again.steps == s.steps
    assert str(again) == str(s)
    with pytest.raises(ScheduleError, match="needs its isl text"):
        schedule_from_json(text.replace('"isl":', '"text":'), both)
    assert "polyopt.Schedule.from_isl(source, '{ O_0[i, j] -> [i, i + j] }'" in s.as_python()


@pytest.mark.cc
def test_skewed_stencil_compiles_and_matches_numpy() -> None:
    s = Schedule.from_isl(BLUR, "[H, W] -> { O_0[i, j] -> [i, i + j] }")
    s = s.tile(("i", "i_j"), 4).parallel("i_o")
    kernel = polyopt.compile(BLUR, schedule=s)
    img = _rand(13, 17)
    want = img[:-1, :-1] + img[1:, :-1] + img[:-1, 1:]
    np.testing.assert_allclose(kernel(img), want, rtol=1e-6)
    assert kernel.schedule.loops == ("i_o", "i_j_o", "i_i", "i_j_i")


@pytest.mark.cc
def test_hand_written_matmul_tree_compiles_and_matches_numpy() -> None:
    s = Schedule.from_isl(MM, MM_TREE, sizes={"M": 33, "N": 17, "K": 29})
    s = s.parallel("n").vectorize("m2")
    kernel = polyopt.compile(MM, sizes={"M": 33, "N": 17, "K": 29}, schedule=s)
    a, b = _rand(33, 29), _rand(29, 17)
    np.testing.assert_allclose(kernel(a, b), a @ b, rtol=1e-5 * 29)
    # Size-generic: one schedule for any shape.
    generic = polyopt.compile(MM, schedule=Schedule.from_isl(MM, MM_TREE))
    a, b = _rand(5, 7), _rand(7, 3)
    np.testing.assert_allclose(generic(a, b), a @ b, rtol=1e-5 * 7)


@pytest.mark.cc
def test_isl_scheduler_output_of_ones_own_constraints() -> None:
    base = polyopt.schedule(TWO, auto=False)
    sc = isl.ScheduleConstraints.on_domain(base.poly.domain).set_context(base.poly.context)
    tree = sc.set_validity(base.deps.all).set_proximity(base.deps.flow).compute_schedule()
    s = Schedule.from_isl(TWO, tree)
    assert s.stmts == ("B_0", "C_0") and s.loops
    c, b = polyopt.compile(TWO, schedule=s)(_rand(9))
    np.testing.assert_allclose(b, _rand(9) * 2, rtol=1e-6)
    np.testing.assert_allclose(c, b[:-1] + b[1:], rtol=1e-6)


@pytest.mark.cc
def test_readme_example_runs() -> None:
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    section = readme.split("## Your own isl schedule", 1)[1].split("\n## ", 1)[0]
    code = re.findall(r"```python\n(.*?)```", section, re.S)
    assert code, "the README section has a python example"
    exec(compile(code[0], "README.md", "exec"), {})  # the README's own text
