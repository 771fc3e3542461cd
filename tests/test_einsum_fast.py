"""einsum's fast path (a call keyed like an earlier one runs its memoized plan): the same
results, dtypes and errors as the full path, whatever the operands' layout."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from polyopt.subscripts import call as einsum_module
from polyopt.subscripts.call import einsum

pytestmark = pytest.mark.cc

RNG = np.random.default_rng(7)


def _full_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(einsum_module, "_fast_call", lambda *args: None)


def _outcome(subscripts: str, *ops: Any, **kwargs: Any) -> Any:
    try:
        r = einsum(subscripts, *ops, **kwargs)
    except Exception as e:  # compared between the two paths
        return type(e).__name__, str(e)
    return type(r).__name__, np.asarray(r).dtype.str, np.shape(r), np.asarray(r).tobytes()


F32, F64, I32 = np.float32, np.float64, np.int32
A, B = RNG.random((4, 5)).astype(F32), RNG.random((5, 3)).astype(F32)
CASES: list[tuple[Any, ...]] = [
    ("ij,jk->ik", A, B),
    ("ij,jk->ik", np.asfortranarray(A), B),  # copied by the kernel, as the plan's cast would
    ("ij,jk->ik", A[:, ::-1], B),
    ("ij,jk->ik", A.astype(F64), B),  # a cast of one operand
    ("ij,jk->ik", A.astype(I32), B.astype(I32)),
    ("ij,jk->ik", A.astype(">f4"), B),  # the other byte order: cast
    ("ij,ij->", A, A),  # a 0-d result: a numpy scalar
    ("ii->i", RNG.random((3, 3)).astype(F32)),
    ("...j,j->...", RNG.random((2, 3, 4)).astype(F32), RNG.random(4).astype(F32)),
    ("ij,jk->ik", np.zeros((0, 5), F32), B),  # empty: zeros, nothing compiled
    ("ij,jk->ik", A, A),  # bad shapes: the full path's error, every time
    ("ij,jk->ik", A),
    ("ij,jk,->ik", A, B),
    ("ij,jk->ik", A, B, {"dtype": F64}),
    ("ij,jk->ik", A.astype(F64), B, {"casting": "no"}),
    ("ij,jk->ik", A.tolist(), B),  # not an ndarray: the full path
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_the_fast_path_agrees_with_the_full_path(case: int,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    subscripts, *ops = CASES[case]
    kwargs = ops.pop() if ops and isinstance(ops[-1], dict) else {}
    fast = [_outcome(subscripts, *ops, **kwargs) for _ in range(3)]  # plans, then memoized
    _full_path(monkeypatch)
    assert fast == [_outcome(subscripts, *ops, **kwargs)] * 3


def test_a_repeated_call_does_not_parse_again(monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = RNG.random((3, 6)).astype(F32), RNG.random((6, 2)).astype(F32)
    want = einsum("ij,jk->ik", a, b)
    monkeypatch.setattr(einsum_module, "contraction", None)  # would fail if called
    np.testing.assert_array_equal(einsum("ij,jk->ik", a + 0, b), want)
    with pytest.raises(TypeError):  # another shape plans again
        einsum("ij,jk->ik", a[:2], b)


def test_out_and_optimize_take_the_full_path() -> None:
    out = np.empty((4, 3), F32)
    assert einsum("ij,jk->ik", A, B, out=out) is out
    np.testing.assert_allclose(out, A @ B, rtol=1e-5)
    C = np.arange(6, dtype=F32).reshape(3, 2)
    want = A @ B @ C
    np.testing.assert_allclose(einsum("ij,jk,kl->il", A, B, C, optimize="optimal"), want,
                               rtol=1e-5)
    np.testing.assert_allclose(einsum("ij,jk,kl->il", A, B, C, optimize=False), want,
                               rtol=1e-5)
