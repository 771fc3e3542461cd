"""Dependences (poly/deps.py): those of a program relaid out through packed copies of its
inputs, derived from the program's, equal a fresh dataflow analysis; a reduction chain's
dependences on itself are not analysed, and what is kept equals the whole analysis."""

from __future__ import annotations

import itertools

import islpy as isl
import pytest

from polyopt import kernels
from polyopt.lang import build_program, define
from polyopt.poly import build_poly, compute_deps
from polyopt.poly import deps as dep_module
from polyopt.poly.deps import Deps, relaid_deps
from polyopt.poly.relayout import Pack, relayout

MM = "def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,r_k) * B(r_k,n) }"
SOFTMAX = kernels.source("softmax")
CONV = kernels.source("conv2d")
UNPADDED = dict(N=2, C=8, H=9, W=9, F=32, KH=3, KW=3)
STRIDED = dict(UNPADDED, SW=2)
PADDED = dict(UNPADDED, PH=1, PW=1)


def _program(src, sizes):
    return build_program(define(src), sizes=sizes)


@pytest.mark.parametrize("src, sizes, packs", [
    (MM, dict(M=20, N=40, K=30), [Pack("B", 1, 16)]),
    (MM, dict(M=20, N=40, K=30), [Pack("A", 0, 8), Pack("B", 1, 16)]),
    (SOFTMAX, dict(N=6, D=40), [Pack("X", 1, 16)]),
    (CONV, UNPADDED, [Pack("Wt", 0, 16)]),
    (CONV, STRIDED, [Pack("Wt", 0, 16), Pack("I", 3, 2, 3, True)]),
    # A strided 1x1 convolution's input subsampled, its rows before its channels.
    (CONV, dict(UNPADDED, KH=1, KW=1, SH=2, SW=2), [Pack("I", 2, 2, 1, subsample=True)]),
    (CONV, dict(UNPADDED, N=None), [Pack("Wt", 0, 16)]),  # size-generic in N
    # The copy holds the padding: the border pieces join their statements.
    (CONV, PADDED, [Pack("I", 1, 1, 1)]),
    (CONV, PADDED, [Pack("I", 1, 1, 1), Pack("Wt", 0, 16)]),
    (kernels.source("depthwise_conv2d"), dict(N=1, C=16, H=8, W=8, KH=3, KW=3, PH=1, PW=1),
     [Pack("I", 1, 1, 1)]),
    (kernels.source("avgpool2d"), dict(N=1, C=4, H=8, W=8, KH=3, KW=3, SH=1, SW=1, PH=1, PW=1),
     [Pack("I", 1, 1, 1)]),
    (kernels.source("maxpool2d"), dict(N=1, C=4, H=9, W=9, KH=3, KW=3, SH=2, SW=2, PH=1, PW=1),
     [Pack("I", 3, 2, 3, True)]),
    (CONV, dict(PADDED, SW=2), [Pack("I", 3, 2, 3, True), Pack("Wt", 0, 16)]),
])
def test_relaid_dependences_equal_a_fresh_analysis(src, sizes, packs):
    sizes = {k: v for k, v in sizes.items() if v is not None}
    program = _program(src, sizes)
    before = build_poly(program)
    after = build_poly(relayout(program, packs)[0])
    derived = relaid_deps(before, compute_deps(before), after)
    assert derived is not None
    fresh = compute_deps(after)
    for (kind, got), (_, want) in zip(derived.named(), fresh.named(), strict=True):
        assert got.is_equal(want), kind
    assert (derived.reduction is None) == (fresh.reduction is None)
    if fresh.reduction is not None:
        assert derived.reduction.is_equal(fresh.reduction)
    assert not fresh.flow.is_equal(compute_deps(before).flow)  # the copies' flow is there


@pytest.mark.parametrize("src, sizes, packs", [
    (CONV, UNPADDED, [Pack("O", 1, 16, 1)]),  # an output computed in a blocked local
    (CONV, PADDED, [Pack("O", 1, 16, 1), Pack("I", 1, 1, 1)]),
])
def test_other_relayouts_are_left_to_the_analysis(src, sizes, packs):
    program = _program(src, sizes)
    before = build_poly(program)
    after = build_poly(relayout(program, packs)[0])
    assert relaid_deps(before, compute_deps(before), after) is None


def _whole_analysis(pp) -> Deps:
    """compute_deps with every statement's accesses as sources for every sink (chains'
    dependences on themselves analysed, then dropped by _unorder_reductions)."""
    order = pp.program_order
    maps = (dep_module._flow_by_array(pp.reads, pp.writes, None, order),
            dep_module._flow_by_array(pp.writes, None, pp.reads, order, kill=pp.writes),
            dep_module._flow_by_array(pp.writes, pp.writes, None, order))
    return dep_module._unorder_reductions(
        pp, Deps(*(m.intersect_params(pp.context).coalesce() for m in maps)))


@pytest.mark.parametrize("src, sizes", [
    (MM, dict(M=20, N=40, K=30)),
    (SOFTMAX, dict(N=6, D=40)),
    (CONV, UNPADDED),
    (CONV, PADDED),  # a border piece: a second chain on the same output
    (CONV, dict(PADDED, SW=2, N=None)),
    (kernels.source("depthwise_conv2d"), dict(N=1, C=16, H=8, W=8, KH=3, KW=3, PH=1, PW=1)),
    (kernels.source("maxpool2d"), dict(N=1, C=4, H=9, W=9, KH=3, KW=3, SH=2, SW=2, PH=1, PW=1)),
    (kernels.source("layernorm"), None),
    (kernels.source("polybench_3mm"), None),
    (kernels.source("polybench_correlation"), None),
])
def test_chains_apart_give_the_whole_analysis(src, sizes):
    sizes = {k: v for k, v in sizes.items() if v is not None} if sizes else None
    pp = build_poly(_program(src, sizes))
    chains = frozenset(s.name for s in dep_module._chains(pp))
    assert chains
    got, want = compute_deps(pp), _whole_analysis(pp)
    for (kind, a), (_, b) in zip(got.named(), want.named(), strict=True):
        assert a.is_equal(b), kind
    assert got.reduction is not None and want.reduction is not None
    assert got.reduction.is_equal(want.reduction)
    # ... and no chain's dependence on itself was analysed
    flow = dep_module._flow_by_array(pp.reads, pp.writes, None, pp.program_order, chains)
    pairs = {(m.get_tuple_name(isl.dim_type.in_), m.get_tuple_name(isl.dim_type.out))
             for m in dep_module._maps(flow)}
    assert not any(a == b and a in chains for a, b in pairs)


def _updates(n: int) -> str:
    body = ["B(i) = A(i) + 0", *(f"B(i) = B(i) + {k}" for k in range(1, n))]
    return "def upd(float(N) A) -> (B) {\n" + "\n".join(body) + "\n}"


def _statements(umap: isl.UnionMap) -> set[tuple[str, str]]:
    return {(m.get_tuple_name(isl.dim_type.in_), m.get_tuple_name(isl.dim_type.out))
            for m in dep_module._maps(umap)}


def test_a_later_write_kills_anti_and_output_dependences():
    """40 statements updating one array: each write depends on the write and the read just
    before it, not on every earlier one (every pair was 12,700 maps at 160 statements)."""
    pp = build_poly(_program(_updates(40), {"N": 8}))
    deps = compute_deps(pp)
    names = [s.name for s in pp.stmts]
    pairs = set(itertools.pairwise(names))
    assert _statements(deps.output) == pairs
    assert _statements(deps.flow) == pairs
    assert _statements(deps.anti) <= pairs


@pytest.mark.parametrize("src, sizes", [
    (_updates(6), {"N": 5}),
    (kernels.source("layernorm"), {"N": 3, "D": 4}),
    (kernels.source("polybench_correlation"), {"N": 4, "M": 3}),
    (kernels.source("polybench_gemver"), {"N": 4}),
    (kernels.source("polybench_syr2k"), {"N": 4, "M": 3}),
    (kernels.source("avgpool2d"), dict(N=1, C=2, H=5, W=5, KH=3, KW=3, PH=1, PW=1)),
    (kernels.source("conv2d_bias_relu"), dict(N=1, C=2, H=4, W=4, F=2, KH=2, KW=2)),
])
def test_killed_dependences_follow_from_the_kept_ones(src, sizes):
    """Every memory-based dependence (each pair of accesses, no kills) is implied by the
    kept ones: an order that respects those respects it, by transitivity (program-order
    defs with three or more writers of one array, where kills drop some)."""
    pp = build_poly(_program(src, sizes))
    assert not pp.program.value_semantics
    deps = compute_deps(pp)
    order = pp.program_order
    every = [dep_module._flow_by_array(pp.writes, None, pp.reads, order),
             dep_module._flow_by_array(pp.writes, None, pp.writes, order)]
    every = [m.intersect_params(pp.context) for m in every]
    closure, exact = deps.all.transitive_closure()
    assert exact
    for m in every:
        assert m.is_subset(closure)
