"""The kernel call's extension (runtime/trampoline.py) and the host fast path of
``Kernel.__call__``: the same results and errors as the ctypes call they replace."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import polyopt
from polyopt import BoundsError, ShapeError
from polyopt.runtime import trampoline
from polyopt.runtime.cpu import CpuKernel

MM = "def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,r_k) * B(r_k,n) }"
EMBED = "def embed(float(V,E) Tab, int32(B,L) Idx) -> (Out) { Out(b,l,e) = Tab(Idx(b,l), e) }"
SOFTMAX = """def softmax(float(N,D) X) -> (Y) local (mx, E, s) {
  mx(n) max=! X(n,r_d)
  E(n,d) = exp(X(n,d) - mx(n))
  s(n) +=! E(n,r_d)
  Y(n,d) = E(n,d) / s(n)
}"""

needs_extension = pytest.mark.skipif(trampoline.load() is None,
                                     reason="the extension does not build here (Python.h?)")


@pytest.fixture(params=["extension", "ctypes"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "ctypes":
        monkeypatch.setattr(trampoline, "load", lambda: None)
    elif trampoline.load() is None:
        pytest.skip("the extension does not build here (Python.h?)")
    return str(request.param)


def _rand(*shape: int) -> np.ndarray:
    return np.random.default_rng(len(shape)).random(shape, dtype=np.float32)


def test_results_match_numpy_on_either_path(path: str) -> None:
    a, b = _rand(9, 7), _rand(7, 5)
    k = polyopt.compile(MM)
    for _ in range(2):  # the first call plans, the second takes the fast path
        np.testing.assert_allclose(k(a, b), a @ b, rtol=1e-5)
    assert (k._calls.plans[(a.shape, b.shape)].kernel._call is None) == (path == "ctypes")
    x = _rand(4, 33)
    s = polyopt.compile(SOFTMAX)  # locals: scratch passed by address
    for _ in range(2):
        e = np.exp(x - x.max(1, keepdims=True))
        np.testing.assert_allclose(s(x), e / e.sum(1, keepdims=True), rtol=1e-5)


def test_kernel_errors_come_back_on_either_path(path: str) -> None:
    k = polyopt.compile(EMBED)
    tab = _rand(5, 3)
    idx = np.array([[0, 4]], np.int32)
    np.testing.assert_array_equal(k(tab, idx), tab[idx])
    with pytest.raises(BoundsError, match=r"index 7"):
        k(tab, np.array([[0, 7]], np.int32))  # same shape: the fast path


def test_the_fast_path_leaves_every_unusual_input_to_the_checks() -> None:
    k = polyopt.compile(MM)
    a, b = _rand(6, 4), _rand(4, 3)
    k(a, b)
    strided = np.asfortranarray(a)
    np.testing.assert_allclose(k(strided, b), a @ b, rtol=1e-5)  # copied, not misread
    np.testing.assert_allclose(k(a[:, :], b), a @ b, rtol=1e-5)
    with pytest.raises(ShapeError, match="dtype float32"):
        k(a.astype(np.float64), b)
    with pytest.raises(ShapeError, match="rank 2"):
        k(a[0], b)
    big = a.astype(">f4")  # the same values in the other byte order
    with pytest.raises(ShapeError, match="dtype"):
        k(big, b)


@needs_extension
def test_the_extension_refuses_a_strided_buffer() -> None:
    a, b = _rand(4, 4), _rand(4, 4)
    k = polyopt.compile(MM)
    k(a, b)
    kernel = k._calls.plans[(a.shape, b.shape)].kernel
    call = trampoline.load().call  # type: ignore[union-attr]
    dims = CpuKernel.dims_array([4, 4, 4, 4, 4, 4, 4, 4, 4])
    with pytest.raises(ValueError, match="not C-contiguous"):  # numpy's refusal, before the call
        call(kernel._address, dims, _rand(4, 8)[:, ::2], b, np.empty((4, 4), np.float32))


def test_concurrent_calls_from_threads() -> None:
    k = polyopt.compile(MM)
    a, b = _rand(32, 16), _rand(16, 24)
    want = a @ b
    k(a, b)
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(200):
                np.testing.assert_allclose(k(a, b), want, rtol=1e-5)
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
