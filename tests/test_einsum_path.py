"""polyopt.einsum_path and einsum(optimize=) against numpy: paths, reports, results, errors."""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
import pytest

import polyopt
from polyopt import einsum
from polyopt.errors import (
    EinsumPathError,
    IncompletePathError,
    OptionError,
    PathIndexError,
    PathNameError,
    PathTypeError,
    ShapeError,
)
from polyopt.subscripts import call as einsum_call
from polyopt.subscripts.path import contraction_path, greedy_path, optimal_path

# numpy's test extents (numpy/_core/tests/test_einsum.py, global_size_dict).
EXTENTS = dict(zip("abcdefghijklmnopqABC",
                   [2, 3, 4, 5, 4, 3, 2, 6, 5, 4, 3, 2, 5, 7, 4, 3, 2, 3, 4, 9], strict=True))
# Networks from opt_einsum's and numpy's path tests: index transformations, long
# contractions, collapses, outer products, and cases that once failed there.
NETWORKS = [
    "ij,jk,kl->il", "a,ab,abc->abc", "a,b,ab->ab",
    "ea,fb,gc,hd,abcd->efgh", "ea,fb,abcd,gc,hd->efgh", "abcd,ea,fb,gc,hd->efgh",
    "acdf,jbje,gihb,hfac,gfac,gifabc,hfac", "cd,bdhe,aidb,hgca,gc,hgibcd,hgac",
    "abhe,hidj,jgba,hiab,gab", "bde,cdh,agdb,hica,ibd,hgicd,hiac",
    "chd,bde,agbc,hiad,hgc,hgi,hiad", "chd,bde,agbc,hiad,bdi,cgh,agdb",
    "bdhe,acad,hiab,agac,hibd",
    "ab,ab,c->", "ab,ab,cd,cd->ac", "ab,ab,cd,cd,ef,ef->", "ab,cd,ef->acdf", "ab,cd,de->be",
    "ab,bcd,cd->abd", "eb,cb,fb->cef", "dd,fb,be,cdb->cef", "bca,cdb,dbf,afc->",
    "dcc,fce,ea,dbf->ab", "fdf,cdd,ccd,afe->ae", "bd,db,eac->ace", "efc,dbc,acf,fd->abe",
    "aab,fa,df,ecc->bde", "bcb,bb,fc,fff->", "dba,ead,cad->bce", "abcd,ad", "ab,bc",
]
METHODS: list[Any] = ["greedy", "optimal", True, False, ("greedy", 0), ("optimal", 60),
                      ("greedy", 1e9)]


def shapes_of(expr: str, extents: dict[str, int] = EXTENTS) -> list[tuple[int, ...]]:
    return [tuple(extents[c] for c in t) for t in expr.split("->")[0].split(",")]


def flops(report: str) -> list[str]:
    return re.findall(r"FLOP count:\s+(\S+)", report)


# --- paths and reports (no compiler needed) -----------------------------------------------


@pytest.mark.parametrize("optimize", METHODS, ids=str)
@pytest.mark.parametrize("expr", NETWORKS)
def test_path_and_report_match_numpy(expr: str, optimize: Any) -> None:
    """Greedy is numpy's algorithm, so its path and report are numpy's, character for
    character; 'optimal' may break ties otherwise, so its flop counts are compared."""
    ops = [np.empty(s) for s in shapes_of(expr)]
    want_path, want_report = np.einsum_path(expr, *ops, optimize=optimize)
    path, report = polyopt.einsum_path(expr, *ops, optimize=optimize)
    assert flops(report) == flops(want_report)
    if "optimal" not in str(optimize):
        assert path == want_path
        assert report == want_report
    if path == want_path:
        assert report == want_report


@pytest.mark.parametrize(("expr", "extents", "optimize", "path"), [
    # numpy's TestEinsumPath: memory limits, long paths, edge cases.
    ("a,b,c->abc", EXTENTS, ("greedy", 0), [(0, 1, 2)]),
    ("a,b,c->abc", EXTENTS, ("optimal", 0), [(0, 1, 2)]),
    ("acdf,jbje,gihb,hfac", EXTENTS, ("optimal", 0), [(0, 1, 2, 3)]),
    ("acdf,jbje,gihb,hfac,gfac,gifabc,hfac", EXTENTS, "optimal",
     [(3, 6), (3, 4), (2, 4), (2, 3), (0, 2), (0, 1)]),
    ("chd,bde,agbc,hiad,bdi,cgh,agdb", EXTENTS, "greedy",
     [(3, 4), (0, 3), (3, 4), (1, 3), (1, 2), (0, 1)]),
    ("chd,bde,agbc,hiad,bdi,cgh,agdb", EXTENTS, "optimal",
     [(0, 5), (1, 4), (3, 4), (1, 3), (1, 2), (0, 1)]),
    ("dcc,fce,ea,dbf->ab", EXTENTS, "greedy", [(1, 2), (0, 1), (0, 1)]),
    ("dcc,fce,ea,dbf->ab", EXTENTS, "optimal", [(1, 2), (0, 2), (0, 1)]),
    ("a,ac,ab,ad,cd,bd,bc->", dict.fromkeys("abcd", 20), "greedy", [(0, 1), (0, 1, 2, 3, 4, 5)]),
    ("a,ac,ab,ad,cd,bd,bc->", dict.fromkeys("abcd", 20), "optimal",
     [(0, 1), (0, 1, 2, 3, 4, 5)]),
])
def test_numpy_path_cases(expr: str, extents: dict[str, int], optimize: Any,
                          path: list[tuple[int, ...]]) -> None:
    got = contraction_path(expr, shapes_of(expr, extents), optimize)
    assert got.as_list() == ["einsum_path", *path]


def test_report_layout() -> None:
    ops = [np.empty(s) for s in shapes_of("ea,fb,abcd,gc,hd->efgh")]
    _, report = polyopt.einsum_path("ea,fb,abcd,gc,hd->efgh", *ops)
    lines = report.splitlines()
    assert lines[0] == "  Complete contraction:  ea,fb,abcd,gc,hd->efgh"
    assert lines[7] == "-" * 74 and lines[9] == "-" * 74
    assert lines[8] == "scaling" + " " * 18 + "current" + " " * 32 + "remaining"
    assert lines[10] == "   5" + " " * 15 + "gc,abcd->agbd" + " " * 22 + "ea,fb,hd,agbd->efgh"


def test_explicit_paths_and_sublists() -> None:
    ops = [np.empty(s) for s in shapes_of("dcc,fce,ea,dbf->ab")]
    given = ["einsum_path", (0, 2), (0, 2), (0, 1)]
    assert polyopt.einsum_path("dcc,fce,ea,dbf->ab", *ops, optimize=given)[0] == given
    assert polyopt.einsum_path("dcc,fce,ea,dbf->ab", *ops, optimize=tuple(given))[0] == given
    trace = [np.empty((2, 3, 4)), np.empty((2, 5, 5))]
    trace_first = ["einsum_path", (1,), (0, 1)]
    as_lists = ["einsum_path", [1], [0, 1]]
    path, report = polyopt.einsum_path("cab,cdd->ab", *trace, optimize=as_lists)
    assert path == trace_first
    assert report == np.einsum_path("cab,cdd->ab", *trace, optimize=trace_first)[1]
    a, b, c = np.empty((2, 3)), np.empty((3, 4)), np.empty((4, 5))
    assert polyopt.einsum_path(a, [0, 1], b, [1, 2], c, [2, 3], [0, 3])[0] == \
        np.einsum_path(a, [0, 1], b, [1, 2], c, [2, 3], [0, 3])[0]


def test_ellipsis_paths() -> None:
    """numpy names '...' dims with letters picked from a set (their order varies with the
    hash seed), so only the costs and the shape of the path are compared."""
    expr = "...ab,...bc,...cd->...ad"
    shapes = [(3, 2, 4, 5), (2, 5, 6), (1, 6, 2)]
    ops = [np.empty(s) for s in shapes]
    want_path, want = np.einsum_path(expr, *ops, optimize="greedy")
    path, report = polyopt.einsum_path(expr, *ops, optimize="greedy")
    assert path == want_path and flops(report) == flops(want)
    assert contraction_path(expr, shapes).output[-2:] == "ad"


def test_memory_limit_bounds_every_intermediate() -> None:
    expr = "ab,cd,ef,ac,ce->bdf"
    sizes = dict.fromkeys("abcdef", 6)
    for limit in (36, 216, 1296):
        for method in ("greedy", "optimal"):
            path = contraction_path(expr, shapes_of(expr, sizes), (method, limit))
            assert all(s.size <= limit for s in path.steps[:-1] if len(s.operands) == 2)


def test_optimal_is_never_worse_than_greedy() -> None:
    rng = np.random.default_rng(0)
    for _ in range(25):
        letters = "abcdefg"
        terms = ["".join(rng.choice(list(letters), rng.integers(1, 4), replace=False))
                 for _ in range(rng.integers(3, 6))]
        sizes = {c: int(rng.integers(1, 8)) for c in letters}
        expr = ",".join(terms)
        shapes = shapes_of(expr, sizes)
        greedy = contraction_path(expr, shapes, ("greedy", math.inf))
        best = contraction_path(expr, shapes, ("optimal", math.inf))
        assert best.optimized_flops <= greedy.optimized_flops
        assert flops(best.report()) == flops(np.einsum_path(
            expr, *[np.empty(s) for s in shapes], optimize=("optimal", 10**9))[1])


def test_search_functions_directly() -> None:
    sets = [frozenset("abd"), frozenset("ac"), frozenset("bdc")]
    sizes = {"a": 1, "b": 2, "c": 3, "d": 4}
    assert greedy_path(sets, frozenset(), sizes, 5000) == [(0, 2), (0, 1)]
    assert optimal_path(sets, frozenset(), sizes, 5000) == [(0, 2), (0, 1)]


def test_paths_are_cached() -> None:
    shapes = shapes_of("ij,jk,kl->il")
    assert contraction_path("ij,jk,kl->il", shapes, ["einsum_path", (0, 1), (0, 1)]) is \
        contraction_path("ij,jk,kl->il", shapes, ("einsum_path", (0, 1), (0, 1)))


# --- errors (no compiler needed) -----------------------------------------------------------

FOUR = [np.ones((2, 3)), np.ones((3, 4)), np.ones((4, 5)), np.ones((5, 2))]


@pytest.mark.parametrize(("optimize", "error", "builtin", "message"), [
    ("bogus", PathNameError, KeyError,
     "einsum optimize='bogus' is not a path method; the methods are 'greedy', 'optimal'"),
    (5, PathTypeError, TypeError, "einsum did not understand the path optimize=5"),
    (1, PathTypeError, TypeError, "optimize=1"),  # not True, though equal to it
    ([(0, 1)], PathTypeError, TypeError, "einsum did not understand the path optimize=[(0, 1)]"),
    (("greedy", "big"), PathTypeError, TypeError, "did not understand the path"),
    (("bogus", 10), PathNameError, KeyError, "einsum optimize='bogus' is not a path method"),
    (["einsum_path", 0], PathTypeError, TypeError,
     "einsum path step 0 is 0, not a tuple of operand positions"),
    (["einsum_path", (0, 4), (0, 1), (0, 1)], PathIndexError, IndexError,
     "einsum path step 0 (0, 4) position 4 is not in [0, 4): 4 operand(s) are left"),
    (["einsum_path", (0, 1), (2, 3)], PathIndexError, IndexError,
     "einsum path step 1 (2, 3) position 3 is not in [0, 3)"),
    (["einsum_path", (1, 1), (0, 1), (0, 1)], PathIndexError, IndexError,
     "einsum path step 0 (1, 1) repeats an operand"),
    (["einsum_path", (), (0, 1)], PathIndexError, IndexError, "names no operand"),
    (["einsum_path", (2, 3), (0, 1)], IncompletePathError, RuntimeError,
     "Invalid einsum_path is specified: 1 more operands has to be contracted"),
    (["einsum_path"], IncompletePathError, RuntimeError, "3 more operands"),
])
def test_bad_paths(optimize: Any, error: type[Exception], builtin: type[Exception],
                   message: str) -> None:
    """numpy's exception types (TypeError, KeyError, IndexError, RuntimeError), as
    EinsumPathError subclasses; einsum refuses them before computing anything."""
    for call in (polyopt.einsum_path, polyopt.einsum):
        with pytest.raises(error, match=re.escape(message)) as info:
            call("ab,bc,cd,da->", *FOUR, optimize=optimize)
        assert isinstance(info.value, EinsumPathError) and isinstance(info.value, builtin)
        assert isinstance(info.value, polyopt.PolyoptError)


def test_numpy_incomplete_path_cases() -> None:
    """numpy's test_path_type_input_invalid, both through einsum and einsum_path."""
    ops = [np.ones(s) for s in shapes_of("ab,bc,cd,de->ae")]
    three = [np.ones(3)] * 3
    for call in (polyopt.einsum, polyopt.einsum_path):
        with pytest.raises(RuntimeError):
            call("ab,bc,cd,de->ae", *ops, optimize=["einsum_path", (2, 3), (0, 1)])
        with pytest.raises(RuntimeError):
            call("a,a,a->a", *three, optimize=["einsum_path", (1,), (0, 1)])


@pytest.mark.parametrize(("subscripts", "shapes", "error", "message"), [
    ("ab,bc,c%", [(2, 3), (3, 4), (4,)], OptionError, "have the invalid character '%'"),
    ("ab,bc,c->a->c", [(2, 3), (3, 4), (4,)], OptionError, "may hold one '->'"),
    ("ab,bc,cd", [(2, 3), (3, 4)], ShapeError, "name 3 operand(s) but 2 were given"),
    ("ab,bc,cd", [(2, 3), (3, 4), (5, 6)], ShapeError,
     "einsum subscript 'c' has extent 5 in operand 2 but 4 in operand 1"),
    ("ab,bc,cde", [(2, 3), (3, 4), (4, 5)], ShapeError,
     "einsum operand 2 has 2 dimension(s) but its subscripts 'cde' name 3"),
    ("a..b,bc,c", [(2, 3), (3, 4), (4,)], OptionError, "not part of a single ellipsis"),
    ("ab...,bc,c", [(2,), (3, 4), (4,)], ShapeError, "has 1 dimension(s)"),
    ("ab,bc,c->ad", [(2, 3), (3, 4), (4,)], OptionError,
     "einsum output subscript 'd' does not appear in any input"),
    ("ab,bc,c->aa", [(2, 3), (3, 4), (4,)], OptionError, "appears more than once"),
    ("...ab,bc,c->a", [(5, 2, 3), (3, 4), (4,)], ShapeError,
     "einsum operands have 1 broadcast ('...') dimension(s) but the output subscripts 'a'"),
    ("...a,...a,a", [(3, 2), (4, 2), (2,)], ShapeError,
     "einsum subscript '...' dimension 0 has extent 4 in operand 1 but 3 in operand 0"),
])
def test_bad_subscripts(subscripts: str, shapes: list[tuple[int, ...]], error: type[Exception],
                        message: str) -> None:
    ops = [np.ones(s) for s in shapes]
    for call in (polyopt.einsum_path, polyopt.einsum):
        with pytest.raises(error, match=re.escape(message)):
            call(subscripts, *ops)
    with pytest.raises(ValueError):  # what numpy raises for each of these
        np.einsum(subscripts, *ops)


# --- results (compile and run kernels) -----------------------------------------------------


def check(expr: str, ops: list[np.ndarray], got: Any, **kw: Any) -> None:
    """``got`` is numpy's result, within the error of its longest reduction."""
    want = np.einsum(expr, *ops, **kw)
    assert type(got) is type(want)
    assert np.shape(got) == np.shape(want) and got.dtype == want.dtype
    if want.dtype.kind != "f":
        np.testing.assert_array_equal(got, want)
        return
    every = dict(contraction_path(expr, [op.shape for op in ops]).sizes)
    reduction = math.prod(every.values()) // max(1, np.size(want))
    magnitude = np.einsum(expr, *(np.abs(op).astype(np.float64) for op in ops))
    tol = 4 * np.finfo(want.dtype).eps * (reduction + 1) * magnitude + 1e-30
    err = np.abs(np.asarray(got, np.float64) - np.asarray(want, np.float64))
    assert np.all(err <= tol), f"{expr}: max error {err.max()} (tolerance {tol.max()})"


RUN = ["ij,jk,kl->il", "ea,fb,abcd,gc,hd->efgh", "acdf,jbje,gihb,hfac,gfac,gifabc,hfac",
       "abhe,hidj,jgba,hiab,gab", "dd,fb,be,cdb->cef", "bca,cdb,dbf,afc->", "ab,cd,ef->acdf",
       "bd,db,eac->ace"]


@pytest.mark.cc
@pytest.mark.parametrize("expr", RUN)
def test_results_match_numpy(expr: str) -> None:
    rng = np.random.default_rng(sum(map(ord, expr)))
    ops = [rng.standard_normal(s) for s in shapes_of(expr)]
    check(expr, ops, einsum(expr, *ops))  # the default: a greedy path


@pytest.mark.cc
@pytest.mark.parametrize("optimize", [
    False, None, True, "greedy", "optimal", ("greedy", 0), ("optimal", 40), ("greedy", 1e9),
    ["einsum_path", (0, 2), (0, 2), (0, 1)], ("einsum_path", (2, 3), (1, 2), (0, 1)),
    ["einsum_path", (0, 1, 2, 3)], ["einsum_path", (0,), (1, 2), (0, 1, 2)],
], ids=str)
def test_every_optimize_form(optimize: Any) -> None:
    expr = "dcc,fce,ea,dbf->ab"
    rng = np.random.default_rng(7)
    ops = [rng.standard_normal(s).astype(np.float32) for s in shapes_of(expr)]
    check(expr, ops, einsum(expr, *ops, optimize=optimize))


@pytest.mark.cc
def test_path_steps_and_one_nest(monkeypatch: pytest.MonkeyPatch) -> None:
    """Three or more operands take the path by default, as one kernel when every step is
    small and a kernel per step otherwise; False and None keep one nest."""
    module = einsum_call
    runs: list[str] = []
    for name in ("_run_path", "_generic_text_kernel"):
        real = getattr(module, name)
        monkeypatch.setattr(module, name, lambda p, *a, name=name, real=real:
                            runs.append(name) or real(p, *a))
    ops = [np.ones(s, np.float32) for s in shapes_of("ij,jk,kl->il")]
    einsum("ij,jk,kl->il", *ops)
    einsum("ij,jk,kl->il", *ops, optimize=False)
    einsum("ij,jk,kl->il", *ops, optimize=None)
    einsum("ij,jk", *ops[:2])
    assert runs == ["_generic_text_kernel"]
    big = [np.ones(s, np.float32) for s in ((16, 32), (32, 16), (16, 8))]
    np.testing.assert_allclose(einsum("ij,jk,kl->il", *big), big[0] @ big[1] @ big[2])
    assert runs == ["_generic_text_kernel", "_run_path"]  # 16*32*16 points: a kernel a step


@pytest.mark.cc
def test_out_dtype_casting_and_scalars() -> None:
    rng = np.random.default_rng(3)
    expr = "ea,fb,abcd,gc,hd->efgh"
    ops = [rng.standard_normal(s).astype(np.float32) for s in shapes_of(expr)]
    out = np.empty((4, 3, 2, 6), np.float32)
    assert einsum(expr, *ops, out=out) is out
    check(expr, ops, out)
    check(expr, ops, einsum(expr, *ops, dtype=np.float64), dtype=np.float64)
    ints = [rng.integers(-3, 4, s).astype(np.int32) for s in shapes_of("ab,bc,ca->")]
    check("ab,bc,ca->", ints, einsum("ab,bc,ca->", *ints))  # a numpy scalar, int32
    mixed = [ops[0], ops[1].astype(np.float64), ops[2].astype(np.int16), ops[3], ops[4]]
    check(expr, mixed, einsum(expr, *mixed))  # float64 throughout, as numpy's result type
    with pytest.raises(ShapeError, match="cannot be cast"):
        einsum(expr, *mixed, casting="no")


@pytest.mark.cc
def test_interleaved_broadcast_and_empty() -> None:
    rng = np.random.default_rng(11)
    a, b, c = (rng.standard_normal(s) for s in [(2, 3), (3, 4), (4, 5)])
    np.testing.assert_allclose(einsum(a, [0, 1], b, [1, 2], c, [2, 3], [0, 3]), a @ b @ c)
    ops = [rng.standard_normal(s) for s in [(3, 2, 4), (4, 5), (1, 5, 2)]]
    expr = "...ab,...bc,...cd->...ad"
    check(expr, ops, einsum(expr, *ops))
    empty = [np.ones((2, 0)), np.ones((0, 3)), np.ones((3, 4))]
    check("ab,bc,cd->ad", empty, einsum("ab,bc,cd->ad", *empty))
