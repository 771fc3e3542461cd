"""polyopt.einsum against numpy.einsum: specs, dtypes, out=/dtype=, random contractions, errors."""

from __future__ import annotations

import importlib
import math
import re
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import polyopt
from polyopt.errors import OptionError, ShapeError
from polyopt.subscripts.call import einsum, einsum_plan

_no_compiler = pytest.mark.skipif(not hasattr(polyopt, "compile"),
                                  reason="polyopt.compile is not available yet")


def compiled(test: Any) -> Any:
    """Marks a test that compiles and runs kernels (needs polyopt.compile and cc)."""
    return pytest.mark.cc(_no_compiler(test))


F32 = np.float32
# (subscripts, operand shapes); every spec runs in float32 against np.einsum.
SPECS = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("ij,jk", [(3, 4), (4, 5)]),
    ("ij->ji", [(3, 4)]),
    ("ij", [(3, 4)]),
    ("ii->i", [(4, 4)]),
    ("ii", [(4, 4)]),
    ("iij->j", [(3, 3, 2)]),
    ("ij->", [(3, 4)]),
    ("i,i", [(5,), (5,)]),
    ("i,j->ij", [(3,), (4,)]),
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)]),
    ("...ij,...jk", [(1, 3, 4), (2, 4, 2)]),
    ("...ij,...jk->...ik", [(3, 4), (4, 2)]),
    ("i...->...", [(3, 2, 4)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("ijk,jil->kl", [(3, 2, 4), (2, 3, 5)]),
    ("i,i,i->", [(6,), (6,), (6,)]),
    (",ij->ij", [(), (3, 4)]),
    (",", [(), ()]),
    ("", [()]),
    ("aBc,cBd->ad", [(2, 3, 4), (4, 3, 5)]),
    ("Ba,aB", [(2, 3), (3, 2)]),
    ("ij,ij->ij", [(3, 4), (3, 4)]),
    ("ij,ij->ij", [(3, 1), (3, 4)]),
    ("ii,i->i", [(1, 1), (3,)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
]


def _values(rng: np.random.Generator, shape: tuple[int, ...], dtype: object) -> np.ndarray:
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return rng.standard_normal(shape).astype(dt)
    if dt.kind == "b":
        return rng.random(shape) < 0.5
    return rng.integers(0 if dt.kind == "u" else -3, 4, shape).astype(dt)


def _check(spec: str, ops: list[np.ndarray], got: object, **kw: object) -> None:
    """``got`` has numpy's type, shape and dtype; floats agree within the reduction's error."""
    want = np.einsum(spec, *ops, **kw)
    assert type(got) is type(want)
    assert np.shape(got) == np.shape(want) and got.dtype == want.dtype
    if want.dtype.kind != "f":
        np.testing.assert_array_equal(got, want)
        return
    plan = einsum_plan(spec, *ops)
    reduction = math.prod(plan.sizes.values()) // max(1, math.prod(plan.shape))
    magnitude = np.einsum(spec, *(np.abs(op).astype(np.float64) for op in ops))
    tol = 4 * np.finfo(want.dtype).eps * (reduction + 1) * magnitude + 1e-30
    err = np.abs(np.asarray(got, np.float64) - np.asarray(want, np.float64))
    assert np.all(err <= tol), f"{spec}: max error {err.max()} (tolerance {tol.max()})"


# --- generated TC text (no compiler needed) -----------------------------------------------


# The text is canonical (polyopt.subscripts.tc): operands by rank, labels renamed a, b, c, ...
# in order of first appearance, labels adjacent wherever they appear merged into one.
@pytest.mark.parametrize(("spec", "shapes", "text", "sizes"), [
    ("ij,jk->ik", [(2, 3), (3, 4)],
     "def einsum(float32(N0,N1) T0, float32(N1,N2) T1) -> (O) "
     "{ O(a_,c_) +=! T0(a_,b_) * T1(b_,c_) }", {"N0": 2, "N1": 3, "N2": 4}),
    # order='K' (numpy's default) lays the result out as its operand is, and i, j are
    # adjacent in both: one merged dim, a copy.
    ("ij->ji", [(2, 3)], "def einsum(float32(N0) T0) -> (O) { O(a_) = T0(a_) }", {"N0": 6}),
    ("ii", [(3, 3)], "def einsum(float32(N0,N0) T0) -> (O) { O +=! T0(a_,a_) }", {"N0": 3}),
    (",ij->ij", [(), (2, 3)],
     "def einsum(float32 T0, float32(N0) T1) -> (O) { O(a_) = T0 * T1(a_) }", {"N0": 6}),
    ("...ij,...jk", [(2, 1, 3, 4), (5, 4, 2)],
     "def einsum(float32(N0,N1,N2) T0, float32(N3,1,N4,N1) T1) -> (O) "
     "{ O(d_,a_,e_,c_) +=! T0(a_,b_,c_) * T1(d_,0,e_,b_) }",
     {"N0": 5, "N1": 4, "N2": 2, "N3": 2, "N4": 3}),
    ("aBc,cBd->ad", [(2, 3, 4), (4, 3, 5)],
     "def einsum(float32(N0,N1,N2) T0, float32(N2,N1,N3) T1) -> (O) "
     "{ O(a_,d_) +=! T0(a_,b_,c_) * T1(c_,b_,d_) }", {"N0": 2, "N1": 3, "N2": 4, "N3": 5}),
    ("ij,ij->ij", [(3, 4), (3, 4)],
     "def einsum(float32(N0) T0, float32(N0) T1) -> (O) { O(a_) = T0(a_) * T1(a_) }",
     {"N0": 12}),
])
def test_tc_text(spec: str, shapes: list[tuple[int, ...]], text: str,
                 sizes: dict[str, int]) -> None:
    plan = einsum_plan(spec, *(np.zeros(s, F32) for s in shapes))
    assert plan.text == text
    assert plan.sizes == sizes


def test_tc_text_dtype_and_casts() -> None:
    plan = einsum_plan("i,i", np.ones(3, np.int8), np.ones(3, np.uint8))
    assert plan.text.startswith("def einsum(int16(N0) T0, int16(N0) T1)")
    assert all(op.dtype == np.int16 and op.flags.c_contiguous for op in plan.operands)
    plan = einsum_plan("ij", np.ones((4, 3)).T, dtype=np.float64)
    assert plan.operands[0].flags.c_contiguous
    plan = einsum_plan("ij,jk", np.ones((2, 3), bool), np.ones((3, 4), bool))
    assert plan.text.endswith("{ O(a_,c_) max=! T0(a_,b_) * T1(b_,c_) }")  # OR of ANDs


@pytest.mark.parametrize(("spec", "shapes"), SPECS)
def test_tc_text_parses(spec: str, shapes: list[tuple[int, ...]]) -> None:
    """The front end accepts every generated definition (the full one if it exists yet)."""
    plan = einsum_plan(spec, *(np.zeros(s, F32) for s in shapes))
    lang = importlib.import_module("polyopt.lang")
    if hasattr(lang, "build_program"):
        lang.build_program(plan.text, "einsum", plan.sizes)
        return
    parser = pytest.importorskip("polyopt.lang.parser")
    if not hasattr(parser, "parse"):
        pytest.skip("no TC front end yet")
    (definition,) = parser.parse(plan.text).defs
    assert definition.name == "einsum"


@pytest.mark.parametrize(("spec", "shapes", "shape"), [
    ("ij,jk->ik", [(3, 0), (0, 4)], (3, 4)),
    ("ij,jk->ik", [(0, 3), (3, 4)], (0, 4)),
    ("ij->", [(0, 3)], ()),
    ("ii->i", [(0, 0)], (0,)),
    ("i,i->i", [(0,), (1,)], (0,)),
])
def test_empty_operands(spec: str, shapes: list[tuple[int, ...]], shape: tuple[int, ...]) -> None:
    ops = [np.ones(s, F32) for s in shapes]
    assert einsum_plan(spec, *ops).empty
    got = einsum(spec, *ops)
    _check(spec, ops, got)
    out = np.full(shape, 7.0)
    assert einsum(spec, *ops, out=out) is out
    np.testing.assert_array_equal(out, 0.0)


# --- numerics (need the compiler) ----------------------------------------------------------


@compiled
@pytest.mark.parametrize(("spec", "shapes"), SPECS)
def test_specs(spec: str, shapes: list[tuple[int, ...]]) -> None:
    rng = np.random.default_rng(0)
    ops = [_values(rng, s, F32) for s in shapes]
    _check(spec, ops, einsum(spec, *ops))


@compiled
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float64, np.float16, np.uint8,
                                   np.int8, np.bool_])
@pytest.mark.parametrize(("spec", "shapes"), [("ij,jk->ik", [(3, 4), (4, 5)]),
                                              ("bij,bj->bi", [(2, 3, 4), (2, 4)])])
def test_dtypes(dtype: object, spec: str, shapes: list[tuple[int, ...]]) -> None:
    rng = np.random.default_rng(1)
    ops = [_values(rng, s, dtype) for s in shapes]
    _check(spec, ops, einsum(spec, *ops))


@compiled
def test_mixed_dtypes_and_dtype_argument() -> None:
    rng = np.random.default_rng(2)
    a, b = _values(rng, (3, 4), np.int32), _values(rng, (4,), F32)
    _check("ij,j->i", [a, b], einsum("ij,j->i", a, b))  # result_type: float64
    _check("ij,j->i", [a, b], einsum("ij,j->i", a, b, dtype=np.float64), dtype=np.float64)
    c = _values(rng, (3, 4), np.int8)
    _check("ij->j", [c], einsum("ij->j", c, dtype=np.int64), dtype=np.int64)
    _check("ij,j->i", [a, b], einsum("ij,j->i", a, b, dtype=F32, casting="unsafe"),
           dtype=F32, casting="unsafe")


@compiled
def test_out() -> None:
    rng = np.random.default_rng(3)
    a, b = _values(rng, (3, 4), F32), _values(rng, (4, 5), F32)
    out = np.empty((3, 5), F32)
    assert einsum("ij,jk", a, b, out=out) is out
    _check("ij,jk", [a, b], out, out=np.empty((3, 5), F32))
    wide = np.empty((5, 3), np.float64)  # float32 -> float64 is a safe cast
    assert einsum("ij,jk->ki", a, b, out=wide) is wide
    np.testing.assert_allclose(wide, np.einsum("ij,jk->ki", a, b), rtol=1e-5, atol=1e-5)
    strided = np.zeros((3, 10), F32)[:, ::2]
    einsum("ij,jk", a, b, out=strided)
    np.testing.assert_allclose(strided, np.einsum("ij,jk", a, b), rtol=1e-5, atol=1e-5)
    scalar = np.empty((), F32)
    assert einsum("i,i", a[0], a[0], out=scalar) is scalar


@compiled
def test_interleaved_form() -> None:
    rng = np.random.default_rng(4)
    a, b = _values(rng, (3, 4), F32), _values(rng, (4, 2), F32)
    _check("Ab,bc", [a, b], einsum(a, [0, 27], b, [27, 28]))
    np.testing.assert_allclose(einsum(a, [0, 27], b, [27, 28], [28, 0]),
                               np.einsum(a, [0, 27], b, [27, 28], [28, 0]), rtol=1e-5)


@compiled
def test_never_delegates_to_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(5)
    a, b = _values(rng, (3, 4), F32), _values(rng, (4, 5), F32)
    want = np.einsum("ij,jk", a, b)

    def boom(*args: object, **kwargs: object) -> None:
        raise AssertionError("delegated to numpy")

    for name in ("einsum", "tensordot", "dot", "matmul", "inner", "vdot"):
        monkeypatch.setattr(np, name, boom)
    np.testing.assert_allclose(einsum("ij,jk", a, b), want, rtol=1e-5, atol=1e-5)


@compiled
def test_kernel_cache() -> None:
    """Small problems share the definition's size-generic kernel, compiled once for every
    shape; larger ones get a kernel specialized to their sizes, compiled once per shape."""
    from polyopt.subscripts.call import GENERIC_POINTS, _generic_kernel, _kernel

    a = np.ones((3, 7), F32)
    einsum("ij->j", a)
    before = _generic_kernel.cache_info()
    np.testing.assert_array_equal(einsum("ij->j", a[:2] + 1), np.full(7, 4, F32))
    einsum("ij->j", a.astype(np.float64))  # another dtype: another kernel
    after = _generic_kernel.cache_info()
    assert (after.hits, after.misses) == (before.hits + 1, before.misses + 1)
    big = np.ones((GENERIC_POINTS // 64 + 2, 64), F32)
    einsum("ij->j", big)
    before = _kernel.cache_info()
    np.testing.assert_array_equal(einsum("ij->j", big + 1), np.full(64, 2 * len(big), F32))
    einsum("ij->j", big[1:])  # another shape: another kernel
    assert _kernel.cache_info().misses == before.misses + 1


@compiled
def test_full_reduction_extents_two() -> None:
    ops = [np.ones((2, 2, 2), F32)]
    _check("ijk->", ops, einsum("ijk->", *ops))


@st.composite
def _contractions(draw: st.DrawFn) -> tuple[str, list[tuple[int, ...]], int]:
    """2–3 operands of rank 0–3 over shared letters with extents 1–5, some dims broadcast."""
    letters = "abcD"
    extents = {c: draw(st.integers(1, 5)) for c in letters}
    terms = [draw(st.lists(st.sampled_from(letters), max_size=3))
             for _ in range(draw(st.integers(2, 3)))]
    shapes = []
    for term in terms:
        ones = draw(st.sets(st.sampled_from(term))) if term else set()
        shapes.append(tuple(1 if c in ones else extents[c] for c in term))
    spec = ",".join("".join(t) for t in terms)
    if draw(st.booleans()):
        used = draw(st.permutations(sorted({c for t in terms for c in t})))
        spec += "->" + "".join(used[:draw(st.integers(0, len(used)))])
    return spec, shapes, draw(st.integers(0, 2**32 - 1))


@compiled
@settings(deadline=None, max_examples=30, derandomize=True)
@given(_contractions(), st.sampled_from([np.float64, np.int32]))
def test_random_contractions(case: tuple[str, list[tuple[int, ...]], int], dtype: object) -> None:
    spec, shapes, seed = case
    rng = np.random.default_rng(seed)
    ops = [_values(rng, s, dtype) for s in shapes]
    _check(spec, ops, einsum(spec, *ops))


# --- errors (no compiler needed) -----------------------------------------------------------

A, B = np.ones((2, 3)), np.ones((3, 4))


@pytest.mark.parametrize(("call", "error", "message"), [
    (lambda: einsum("ij,jk", A), ShapeError,
     "einsum subscripts 'ij,jk' name 2 operand(s) but 1 were given"),
    (lambda: einsum("ij", A, B), ShapeError,
     "einsum subscripts 'ij' name 1 operand(s) but 2 were given"),
    (lambda: einsum("ij,jk", A, np.ones((4, 5))), ShapeError,
     "einsum subscript 'j' has extent 4 in operand 1 but 3 in operand 0"),
    (lambda: einsum("ij,ij", np.ones((3, 2)), np.ones((3, 4))), ShapeError,
     "einsum subscript 'j' has extent 4 in operand 1 but 2 in operand 0"),
    (lambda: einsum("ii", A), ShapeError,
     "einsum operand 0 repeats subscript 'i' with extents 2 and 3"),
    (lambda: einsum("ijk", A), ShapeError,
     "einsum operand 0 has 2 dimension(s) but its subscripts 'ijk' name 3"),
    (lambda: einsum("i,ij", A, B), ShapeError,
     "einsum operand 0 has 2 dimension(s) but its subscripts 'i' name 1"),
    (lambda: einsum("...,...", np.ones(3), np.ones(4)), ShapeError,
     "einsum subscript '...' dimension 0 has extent 4 in operand 1 but 3 in operand 0"),
    (lambda: einsum("...i->i", A), ShapeError,
     "einsum operands have 1 broadcast ('...') dimension(s) but the output subscripts 'i' "
     "have no '...'"),
    (lambda: einsum("i1", A), OptionError,
     "einsum subscripts 'i1' have the invalid character '1' in operand 0; "
     "subscripts must be letters"),
    (lambda: einsum("ij->i->", A), OptionError,
     "einsum subscripts 'ij->i->' have the invalid character '-' in the output"),
    (lambda: einsum("i.j", A), OptionError,
     "einsum subscripts 'i.j' have a '.' that is not part of a single ellipsis ('...') "
     "in operand 0"),
    (lambda: einsum("ij,jk->ik", A, B[None]), ShapeError,
     "einsum operand 1 has 3 dimension(s) but its subscripts 'jk' name 2"),
    (lambda: einsum("ij->k", A), OptionError,
     "einsum output subscript 'k' does not appear in any input"),
    (lambda: einsum("ij->ii", A), OptionError,
     "einsum output subscript 'i' appears more than once in 'ii'"),
    (lambda: einsum("ij->", B.astype("U1")), OptionError,
     "einsum does not support dtype <U1 (operand 0)"),
    (lambda: einsum("i->", np.array([1], object)), OptionError,
     "einsum does not support dtype object (operand 0)"),
    (lambda: einsum("i->", np.ones(2), dtype=object), OptionError,
     "einsum does not support dtype object; only bool"),
    (lambda: einsum("i,i", np.ones(2), np.ones(2), dtype=np.int32), ShapeError,
     "einsum operand 0 of dtype float64 cannot be cast to int32 under casting='safe'"),
    (lambda: einsum("ij,jk", A, B, out=np.empty((3, 4))), ShapeError,
     "einsum out= has shape (3, 4) but the result has shape (2, 4)"),
    (lambda: einsum("ij,jk", A, B, out=np.empty((2, 4), F32)), ShapeError,
     "einsum result of dtype float64 cannot be written to out= of dtype float32"),
    (lambda: einsum("ij,jk", A, B, out=[0]), OptionError,
     "einsum out= must be a numpy array, not list"),
    (lambda: einsum("ij,jk", A, B, optimize="bogus"), OptionError,
     "einsum optimize='bogus' is not a path method"),
    (lambda: einsum("ij,jk", A, B, order="W"), OptionError,
     "einsum order='W' is not one of 'C', 'F', 'A' or 'K'"),
    (lambda: einsum("ij,jk", A, B, bogus=1), OptionError,
     "einsum got unexpected keyword argument(s) 'bogus'"),
    (lambda: einsum("ij", A, casting="bogus"), OptionError, "einsum casting='bogus' is not one"),
    (lambda: einsum(A, [0, 99]), OptionError,
     "einsum sublists must hold ints in [0, 52) and Ellipsis, not 99"),
    (lambda: einsum(A, [0, -1]), OptionError, "not -1"),
    (lambda: einsum(A, "ij"), OptionError, "einsum expected a sublist (list of ints), not 'ij'"),
])
def test_errors(call: object, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=re.escape(message)):
        call()  # type: ignore[operator]


def test_errors_are_value_errors() -> None:
    """Code written against numpy, which raises ValueError, still catches ours."""
    with pytest.raises(ValueError):
        einsum("ij,jk", A, np.ones((4, 5)))
    with pytest.raises(ValueError):
        einsum("i$", A)
