"""The polyhedral model: domains, accesses, padding split, dependences."""

from __future__ import annotations

import islpy as isl

from polyopt.lang import build_program
from polyopt.poly import build_poly, compute_deps

CONV_SAME = """def conv_same(float(N,C,H,W) I, float(F,C,3,3) Wt) -> (O) {
    O(n,f,h,w) +=! I(n,r_c,h+r_kh-1,w+r_kw-1) * Wt(f,r_c,r_kh,r_kw) where pad I(0,0,1,1)
}"""


def test_padding_splits_into_interior_and_border_in_the_domain() -> None:
    pp = build_poly(build_program(CONV_SAME, "conv_same", {"N": 1, "C": 2, "H": 5, "W": 6,
                                                            "F": 3}))
    names = [s.name for s in pp.stmts]
    assert names == ["O_0_init", "O_0", "O_0_border"]
    inner, border = pp.stmt("O_0"), pp.stmt("O_0_border")
    assert not inner.guarded and border.guarded
    # The two pieces partition the statement's domain.
    assert inner.domain.intersect(border.domain.set_tuple_name("O_0")).is_empty()
    total = inner.domain.count_val().to_python() + border.domain.count_val().to_python()
    assert total == 1 * 3 * 5 * 6 * 2 * 3 * 3


def test_accesses_are_restricted_to_domains_and_deps_are_exact() -> None:
    src = "def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,r_k) * B(r_k,n) }"
    pp = build_poly(build_program(src, "mm"))
    assert pp.reads.domain().is_subset(pp.domain)
    deps = compute_deps(pp)
    # The sum's order is free (TC reductions are unordered): its chain is kept apart, and
    # the fill must precede every update of its element.
    assert "C_0_init[m, n] -> C_0[m' = m, n' = n, r_k]" in str(deps.flow)
    assert "C_0[m, n, r_k] -> C_0" not in str(deps.flow)
    assert deps.reduction is not None and deps.reduction.is_equal(isl.UnionMap(
        "[M, K, N] -> { C_0[m, n, k] -> C_0[m, n, k'] : 0 <= m < M and 0 <= n < N and "
        "0 <= k < k' < K }"))


def test_reduction_chains_keep_one_piece_per_iterator() -> None:
    """Over extents of 2, coalescing the lexicographic order of 8 reduction indices gave a
    few pieces with dozens of constraints each, on which isl's scheduler never finished:
    the chain keeps one plain piece per iterator (equal to the exact dependences)."""
    src = "def s(float(A,B,C,D,E,F,G,H) T) -> (O) { O +=! T(a,b,c,d,e,f,g,h) }"
    sizes = dict.fromkeys("ABCDEFGH", 2)
    pp = build_poly(build_program(src, "s", sizes))
    deps = compute_deps(pp)
    assert deps.reduction is not None
    maps: list[isl.Map] = []
    deps.reduction.foreach_map(maps.append)
    assert [m.n_basic_map() for m in maps] == [8]
    dom = pp.stmt("O_0").domain
    assert maps[0].is_equal(dom.lex_lt_set(dom))  # every earlier update of the one element
