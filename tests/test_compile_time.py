"""Compile time for many statements (issue 13, item 4): the batched forms of the analyses
give what the per-statement ones gave. Speed itself is measured by
``polyopt bench compile-time``, never by a test."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import replace

import islpy as isl
import numpy as np
import pytest

import polyopt
from polyopt import kernels as library
from polyopt.lang import build_program, define
from polyopt.lang.flow import compute_flow
from polyopt.poly import build_poly
from polyopt.poly import deps as dep_module
from polyopt.poly.model import PolyProgram
from polyopt.schedules import legality, tree
from polyopt.schedules import transform as tf
from polyopt.schedules.tree import Loop, Sequence, filter_domain, filter_map, path_to, stmts_of

pytestmark = pytest.mark.cc


def chain(n: int) -> str:
    """``T1(i) = A(i) * 2; T2(i) = (T1(i) + T1(i)) * 0.5 + 2; ...;
    O(i) = (T<n-1>(i) + T<n-1>(i)) * 1.5``: ``T<k>(i) = T<k-1>(i) + k`` exactly, each link
    read twice (a local read once would be inlined into its reader)."""
    body = ["T1(i) = A(i) * 2",
            *(f"T{k}(i) = (T{k - 1}(i) + T{k - 1}(i)) * 0.5 + {k}" for k in range(2, n)),
            f"O(i) = (T{n - 1}(i) + T{n - 1}(i)) * 1.5"]
    locals_ = ", ".join(f"T{k}" for k in range(1, n))
    return f"def chain(float(N) A) -> (O) local ({locals_}) {{\n" + "\n".join(body) + "\n}"


def updates(n: int) -> str:
    """``B(i) = A(i) + 0; B(i) = B(i) + 1; ...``: every statement writes (and all but the
    first read) one element: every pair of them conflicts (the issue's 160 overwrites of one
    output, kept live by the reads)."""
    body = ["B(i) = A(i) + 0", *(f"B(i) = B(i) + {k}" for k in range(1, n))]
    return "def upd(float(N) A) -> (B) {\n" + "\n".join(body) + "\n}"


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
    out = {"chain": chain(12), "independent": independent(12), "softmax": SOFTMAX,
           "updates": updates(12)}
    out |= {name: library.source(name) for name in library.names()}
    return out


def _poly_or_skip(src: str) -> PolyProgram:
    """The polyhedral model of ``src``'s def, or a skip where it needs sizes."""
    name = define(src).name if src.count("def ") == 1 else None
    try:
        return build_poly(build_program(src, name))
    except polyopt.PolyoptError:
        pytest.skip("needs sizes")


def _analyses(pp: PolyProgram) -> tuple[tuple[isl.UnionMap | None, ...], ...]:
    """(sink, must, may, kill) of the flow, anti and output analyses ``compute_deps`` runs."""
    return ((pp.reads, pp.writes, None, None), (pp.writes, None, pp.reads, pp.writes),
            (pp.writes, pp.writes, None, None))


@pytest.mark.parametrize("src", list(_programs().values()), ids=list(_programs()))
def test_dataflow_one_array_at_a_time_equals_all_at_once(src: str) -> None:
    """Each statement writes one array, so the dependences per array are those of the whole
    analysis (for the bundled kernels, as sets)."""
    pp = _poly_or_skip(src)
    order = pp.program_order
    for sink, must, may, kill in _analyses(pp):
        whole = dep_module._flow(sink, must, may, order, kill)
        split = dep_module._flow_by_array(sink, must, may, order, kill=kill)
        assert split.is_equal(whole)


@pytest.mark.parametrize("src", list(_programs().values()), ids=list(_programs()))
@pytest.mark.parametrize("width, reach", [(1, 1), (3, 2)])
def test_dataflow_in_windows_equals_all_at_once(src: str, width: int, reach: int) -> None:
    """``flow.compute_flow`` analyses a few statements' sinks at a time against the sources
    just before them, then the sinks left without a must source against all: isl's
    answer for the whole program, must and may dependences alike."""
    pp = _poly_or_skip(src)
    order = pp.program_order
    for sink, must, may, kill in _analyses(pp):
        info = isl.UnionAccessInfo.from_sink(sink)
        info = info.set_must_source(must) if must is not None else info
        info = info.set_may_source(may) if may is not None else info
        info = info.set_kill(kill) if kill is not None else info
        whole = info.set_schedule_map(order).compute_flow()
        got = compute_flow(sink, must, may, kill, order, width=width, reach=reach)
        assert got[0].is_equal(whole.get_must_dependence())
        assert got[1].is_equal(whole.get_may_dependence())


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


# -- many statements: the work per step is counted, never timed (issue 40) -------------------

def pieces(n: int) -> str:
    """One declared output written piecewise, ten elements a statement, each piece reading
    the first (a read of ``B`` before all its writes: value semantics)."""
    body = ["B(i) = A(i) where i in 0:10", *(
        f"B(i) = A(i) + B(i - {10 * k}) where i in {10 * k}:{10 * k + 10}" for k in range(1, n))]
    return (f"def pieces(float({10 * n}) A) -> (float({10 * n}) B) {{\n" + "\n".join(body)
            + "\n}")


def _counting(monkeypatch: pytest.MonkeyPatch, owner: object, name: str) -> list[int]:
    """Count the calls of ``owner.name`` (a module's function: its own recursive calls
    too, since they go through the module's global)."""
    calls = [0]
    original = getattr(owner, name)

    def counted(*args: object, **kwargs: object) -> object:
        calls[0] += 1
        return original(*args, **kwargs)
    monkeypatch.setattr(owner, name, counted)
    return calls


def _pairwise_distributable(root: tree.Node, loop: str, s: polyopt.Schedule) -> bool:
    """``legality.distributable`` as it was: each pair of children, each dependence."""
    lp = tf.find(root, loop)
    assert isinstance(lp.child, Sequence)
    at = [n for n in path_to(root, lp)[:-1] if isinstance(n, Loop)]
    kids = [filter_domain(s.poly.domain, stmts_of(k)) for k in lp.child.children]
    for later, sink in enumerate(kids):
        for source in kids[later + 1:]:
            for _kind, dep in s.deps.named():
                d = dep.intersect_domain(source).intersect_range(sink)
                for outer in at:
                    d = d.eq_at_multi_union_pw_aff(
                        isl.MultiUnionPwAff.from_union_pw_aff(outer.expr))
                if not d.is_empty():
                    return False
    return True


@pytest.mark.parametrize("src", [updates(12), chain(12), SOFTMAX, independent(6)],
                         ids=["updates", "chain", "softmax", "independent"])
def test_distributable_over_the_maps_once_is_the_pairwise_check(src: str) -> None:
    """On the fused nests, and on each with its statements' order reversed (a tree no
    step would make: every dependence then runs backward)."""
    s = polyopt.schedule(src, auto=False, sizes={"N": 8, "M": 8} if "M" in src else {"N": 8})
    with contextlib.suppress(polyopt.PolyoptError):
        s = s.fuse(*s.loops)
    seen = 0
    for lp in tree.loops(s.root):
        if not isinstance(lp.child, Sequence):
            continue
        back = tree.substitute(s.root, lp, replace(
            lp, child=Sequence(tuple(reversed(lp.child.children)))))
        for root in (s.root, back):
            seen += 1
            assert legality.distributable(root, lp.name, s.deps, s.poly.domain) \
                == _pairwise_distributable(root, lp.name, s)
    assert seen or src == SOFTMAX


def test_distributing_160_statements_checks_each_dependence_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A pair of children per check was cubic in the statements (54 s for 160 writes of one
    output); now each kind of dependence is restricted once."""
    s = polyopt.schedule(updates(160), auto=False, sizes={"N": 8})
    s = s.fuse(*s.loops)
    calls = _counting(monkeypatch, isl.UnionMap, "intersect_domain")
    # Every dependence runs forward in the sequence: distribution is proven legal.
    assert legality.distributable(s.root, s.loops[0], s.deps, s.poly.domain)
    assert calls[0] <= 3


@pytest.mark.parametrize("n", [160, 400])
def test_tag_checks_walk_only_the_nests_a_step_changed(n: int,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """``pieces``: one nest per piece, each vectorized. A check of every tagged loop's outer
    loops per step walked the whole tree per loop (cubic in the nests: 66 s of 85 for 500);
    now a path costs its depth."""
    calls = _counting(monkeypatch, tree, "path_to")
    s = polyopt.schedule(pieces(n))
    assert len(tree.loops(s.root)) >= n
    assert calls[0] <= 8 * n


@pytest.mark.parametrize("n", [160, 400])
def test_a_chain_of_locals_asks_isl_about_each_locals_users_only(
        n: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each local's flow check in program order takes its users' times only (2 maps), and a
    loop's iterator is looked up, not scanned for: the whole order per local (56 s for
    2000) and a scan of a loop's pieces per statement (8 s) were quadratic."""
    ordered: list[int] = []
    original = isl.UnionAccessInfo.set_schedule_map

    def counted(info: isl.UnionAccessInfo, order: isl.UnionMap) -> isl.UnionAccessInfo:
        ordered.append(order.n_map())
        return original(info, order)
    monkeypatch.setattr(isl.UnionAccessInfo, "set_schedule_map", counted)
    scanned: list[int] = []
    pieces_of = tree.pieces

    def scan(upa: isl.UnionPwAff) -> list[isl.PwAff]:
        out = pieces_of(upa)
        scanned.append(len(out))
        return out
    monkeypatch.setattr(tree, "pieces", scan)
    s = polyopt.schedule(chain(n), "chain", sizes={"N": 64})
    assert len(s.contractions) == n - 1
    assert sum(ordered) <= 8 * n
    assert sum(scanned) <= 8 * n


@pytest.mark.parametrize("shape", [updates, pieces, chain])
def test_the_issue_shapes_schedule_at_160(shape: Callable[[int], str]) -> None:
    """The three shapes of ``polyopt bench compile-time`` (``updates160``, ``pieces160``,
    ``chain160``) give a schedule; their time is the script's to measure."""
    s = polyopt.schedule(shape(160), sizes={"N": 64} if shape is not pieces else None)
    assert s.loops
