"""Compile time for many statements (issue 13, item 4): the batched forms of the analyses
give what the per-statement ones gave. Speed itself is measured by
``scripts/compile_time.py``, never by a test."""

from __future__ import annotations

import islpy as isl
import numpy as np
import pytest

import polyopt
from polyopt import kernels as library
from polyopt.lang import build_program, define
from polyopt.poly import build_poly
from polyopt.poly import deps as dep_module
from polyopt.schedule import transform as tf
from polyopt.schedule.tree import filter_map, stmts_of

pytestmark = pytest.mark.cc


def chain(n: int) -> str:
    """``T1(i) = A(i) * 2; T2(i) = T1(i) + 2; ...; O(i) = T<n-1>(i) * 3``."""
    body = ["T1(i) = A(i) * 2", *(f"T{k}(i) = T{k - 1}(i) + {k}" for k in range(2, n)),
            f"O(i) = T{n - 1}(i) * 3"]
    locals_ = ", ".join(f"T{k}" for k in range(1, n))
    return f"def chain(float(N) A) -> (O) local ({locals_}) {{\n" + "\n".join(body) + "\n}"


def independent(n: int) -> str:
    outs = ", ".join(f"O{k}" for k in range(n))
    body = [f"O{k}(i) = A(i) * {k + 1}" for k in range(n)]
    return f"def indep(float(N) A) -> ({outs}) {{\n" + "\n".join(body) + "\n}"


SOFTMAX = """def softmax(float(N,M) X) -> (Y) local (mx, E, s) {
    mx(n) max=! X(n,r_m)
    E(n,m) = exp(X(n,m) - mx(n))
    s(n) +=! E(n,r_m)
    Y(n,m) = E(n,m) / s(n)
}"""


def _programs() -> dict[str, str]:
    out = {"chain": chain(12), "independent": independent(12), "softmax": SOFTMAX}
    out |= {name: library.source(name) for name in library.names()}
    return out


@pytest.mark.parametrize("src", list(_programs().values()), ids=list(_programs()))
def test_dataflow_one_array_at_a_time_equals_all_at_once(src: str) -> None:
    """Each statement writes one array, so the dependences per array are those of the whole
    analysis (for the bundled kernels, as sets)."""
    name = define(src).name if src.count("def ") == 1 else None
    try:
        pp = build_poly(build_program(src, name))
    except polyopt.PolyoptError:
        pytest.skip("needs sizes")
    order = pp.program_order
    for sink, must, may in ((pp.reads, pp.writes, None), (pp.writes, None, pp.reads),
                            (pp.writes, None, pp.writes)):
        whole = dep_module._flow(sink, must, may, order)
        split = dep_module._flow_by_array(sink, must, may, order)
        assert split.is_equal(whole)


def test_a_long_chain_fuses_into_one_loop_with_every_local_contracted() -> None:
    """200 statements through locals: one fused loop, every local a slice of it (each
    contraction checked on its users' times alone)."""
    s = polyopt.schedule(chain(200), "chain", sizes={"N": 64})
    assert s.loops == ("i",)
    assert {t for t, _, _ in s.contractions} == {f"T{k}" for k in range(1, 200)}


def test_many_independent_outputs_fuse_and_compute() -> None:
    kernel = polyopt.compile(independent(60), sizes={"N": 64})
    a = np.random.default_rng(0).random(64).astype(np.float32)
    outs = kernel(a)
    for k in (0, 31, 59):
        np.testing.assert_allclose(outs[k], a * np.float32(k + 1), rtol=1e-6)


def test_fusing_several_loops_is_fusing_them_one_by_one() -> None:
    s = polyopt.schedule(independent(5), "indep", auto=False, sizes={"N": 8})
    names = s.loops
    at_once = s.fuse(*names)
    one_by_one = s
    for other in names[1:]:
        one_by_one = one_by_one.fuse(names[0], other)
    assert str(at_once).splitlines()[1:] == str(one_by_one).splitlines()[1:]
    assert at_once.map.is_equal(one_by_one.map)


def test_contract_keeps_the_tree_and_its_map() -> None:
    s = polyopt.schedule(chain(4), "chain", auto=False, sizes={"N": 8})
    s = s.fuse(*s.loops)
    contracted = s.contract("T1", "i")
    assert contracted.tree is s.tree and contracted.map is s.map


def test_filter_map_keeps_the_statements_asked() -> None:
    s = polyopt.schedule(independent(6), "indep", auto=False, sizes={"N": 8})
    some = filter_map(s.map, {"O1_0", "O4_0", "missing"})
    want = s.map.intersect_domain(isl.UnionSet("[N] -> { O1_0[i]; O4_0[i] }").intersect_params(
        s.poly.context))
    assert some.is_equal(want)
    assert set(stmts_of(tf.find(s.root, s.loops[0]))) == {"O0_0"}
