"""The loop knobs (order, vector, parallel, split_k): each changes the schedule as asked,
an impossible value falls back to the model's choice with a note, and no value changes a
result."""

from __future__ import annotations

import numpy as np
import pytest

import polyopt

COLSUM = "def colsum(float(M,N) A) -> (S) { S(n) +=! A(m,n) }"
TRANSPOSE = "def tr(float(M,N) A) -> (B) { B(n,m) = A(m,n) }"
DOT = "def dot(float(N) a, float(N) b) -> (s) { s +=! a(r_n) * b(r_n) }"
ROWSUM = "def rs(float(M,N) A) -> (S) { S(m) +=! A(m,n) }"
SIZES = {"M": 64, "N": 96}


def steps(source: str, knobs: dict, sizes: dict | None = None) -> str:
    return polyopt.schedule(source, sizes=sizes or SIZES,
                            options={"knobs": knobs}).as_python()


def test_order_takes_the_candidate_of_that_rank() -> None:
    assert "s.reorder" not in steps(TRANSPOSE, {})
    code = steps(TRANSPOSE, {"order": 1})
    assert "order knob 1: order m, n" in code and "s.reorder('m', 'n')" in code


def test_an_order_rank_past_the_candidates_falls_back_with_a_note() -> None:
    code = steps(TRANSPOSE, {"order": 9})
    assert "order knob 9: not among the 2 candidates" in code
    assert code.split("\n", 1)[1].replace(code.splitlines()[1] + "\n", "") == \
        steps(TRANSPOSE, {}).split("\n", 1)[1]


def test_vector_moves_its_loop_innermost() -> None:
    assert "vectorize('m_i', lanes=" in steps(TRANSPOSE, {}, {"M": 256, "N": 256})
    code = steps(TRANSPOSE, {"vector": "n"}, {"M": 256, "N": 256})
    assert "vector knob: n innermost" in code and "vectorize('n_i', lanes=" in code


def test_a_vector_loop_that_is_not_there_falls_back_with_a_note() -> None:
    code = steps(ROWSUM, {"vector": "m"})  # m holds the init and the n loop: no perfect nest
    assert "vector knob m: no such loop" in code and "s.vectorize('n', lanes=" in code


def test_a_column_sum_runs_its_rows_outside_the_vector_loop() -> None:
    """Its init split off (a few more lines written, predicted faster from cache), the sum
    over the rows runs outside the unit-stride column loop, which vectorizes."""
    code = steps(COLSUM, {})
    assert "s.distribute('n')" in code and "s.reorder('m', 'n2')" in code
    assert "s.vectorize('n2', lanes=" in code and "cycles from cache by" in code
    a = np.random.default_rng(0).standard_normal((64, 96)).astype(np.float32)
    got = polyopt.compile(COLSUM, sizes=SIZES)(a)
    np.testing.assert_allclose(got, a.sum(0), rtol=1e-5, atol=1e-5)


def test_parallel_picks_the_loop_and_a_reduction_loop_splits() -> None:
    assert "s.parallel('m')" in steps(ROWSUM, {}, {"M": 64, "N": 1024})
    code = steps(ROWSUM, {"parallel": "n"})
    assert "parallel reduction n: the parallel knob" in code and "s.parallel('n')" in code


def test_split_k_splits_a_few_outputs_reduction_and_false_never_splits() -> None:
    sizes = {"M": 4, "N": 1 << 16}
    code = steps(ROWSUM, {"split_k": True}, sizes)
    assert "split-K: parallel reduction n_o: the split_k knob" in code
    assert "split-K" in steps(DOT, {}, {"N": 1 << 16})
    assert "parallel" not in steps(DOT, {"split_k": False}, {"N": 1 << 16}).split(
        "\n", 1)[1].replace("# n: no dependence-free loop: one thread (split_k knob False)", "")


def test_split_k_where_nothing_splits_says_so() -> None:
    assert "split_k knob: no reduction loop splits here" in steps(
        TRANSPOSE, {"split_k": True}, {"M": 256, "N": 256})


@pytest.mark.parametrize("knobs", [{"order": "1"}, {"vector": 3}, {"parallel": "a b"},
                                   {"split_k": 1}])
def test_bad_loop_knobs_are_reported(knobs: dict) -> None:
    with pytest.raises(polyopt.OptionError, match="option knobs"):
        polyopt.compile(TRANSPOSE, sizes=SIZES, options={"knobs": knobs})


CASES = {
    "colsum": (COLSUM, SIZES, lambda a: a.sum(0)),
    "transpose": (TRANSPOSE, SIZES, lambda a: a.T),
    "rowsum": (ROWSUM, {"M": 4, "N": 1 << 14}, lambda a: a.sum(1)),
}
KNOBS = [{"order": 1}, {"order": 0}, {"vector": "m"}, {"vector": "n"}, {"parallel": "m"},
         {"parallel": "n"}, {"split_k": True}, {"split_k": False},
         {"order": 1, "vector": "m", "parallel": "n"}]


@pytest.mark.cc
@pytest.mark.parametrize("case", sorted(CASES))
def test_every_loop_knob_computes_the_same(case: str) -> None:
    source, sizes, ref = CASES[case]
    a = np.random.default_rng(0).standard_normal((sizes["M"], sizes["N"]), np.float32)
    for knobs in KNOBS:
        k = polyopt.compile(source, sizes=sizes, options={"knobs": knobs})
        np.testing.assert_allclose(k(a), ref(a), rtol=1e-4, atol=1e-3, err_msg=str(knobs))


@pytest.mark.cc
def test_split_dot_products_compute_the_same() -> None:
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal(1 << 14, np.float32), rng.standard_normal(1 << 14, np.float32)
    for knobs in [{}, {"split_k": True}, {"split_k": False}, {"parallel": "r_n"},
                  {"parallel": "n"}]:
        k = polyopt.compile(DOT, sizes={"N": 1 << 14}, options={"knobs": knobs})
        np.testing.assert_allclose(k(a, b), a.astype(np.float64) @ b, rtol=1e-3, atol=1e-2)
