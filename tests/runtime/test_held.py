"""Constant inputs (the ``constants`` option, ``schedules.constants``, ``runtime.held``): the
packed copies of inputs declared constant are made by the kernel's ``once`` function when the
constants are new, kept for every thread and shape, and never made at each call."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

import polyopt
from polyopt import OptionError, driver, kernels, lang
from polyopt.runtime import cache, cpu, held

pytestmark = pytest.mark.cc

LINEAR = """def lin(float(M,K) X, float(N,K) W, float(N) B) -> (Y) {
  Y(i,j) +=! X(i,k) * W(j,k)
  Y(i,j) = Y(i,j) + B(j)
}"""
SIZES = {"M": 24, "K": 40, "N": 70}  # partial register tiles and panels both ways


def _inputs(seed: int, m: int = 24, k: int = 40, n: int = 70) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((m, k), np.float32), rng.standard_normal((n, k), np.float32),
            rng.standard_normal(n, np.float32))


def _want(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (x.astype(np.float64) @ w.T.astype(np.float64) + b).astype(np.float32)


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Record each kernel run: True for a ``once`` function's."""
    runs: list[bool] = []
    real = cpu.CpuKernel.run

    def spy(self, buffers, dims, addresses=(), *, once=False):  # type: ignore[no-untyped-def]
        runs.append(once)
        return real(self, buffers, dims, addresses, once=once)
    monkeypatch.setattr(cpu.CpuKernel, "run", spy)
    return runs


@pytest.mark.parametrize("knobs", [{}, {"pack": True}])
def test_a_constant_is_packed_once_and_a_new_one_again(knobs: dict[str, bool],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    kernel = polyopt.compile(LINEAR, sizes=SIZES,
                             options={"constants": ["W", "B"], "knobs": knobs})
    source = kernel.lowered().source
    assert source.held == ("W_pack",) and source.once == "polyopt_lin_once"
    assert f"int {source.once}(" in kernel.source
    x, w, b = _inputs(0)
    runs = _counting(monkeypatch)
    for seed in (1, 2, 3):  # new activations each call, the same weights
        x = _inputs(seed)[0]
        np.testing.assert_allclose(kernel(x, w, b), _want(x, w, b), rtol=1e-5, atol=1e-4)
    assert runs.count(True) == 1
    w2 = w * 2  # another array (another layer's weights): copies of its own
    for weights in (w2, w2, w, w2):
        np.testing.assert_allclose(kernel(x, weights, b), _want(x, weights, b), rtol=1e-5,
                                   atol=1e-4)
    assert runs.count(True) == 2
    out = np.empty((24, 70), np.float32)  # the checked path keeps them too
    kernel(x, w2, b, outputs=[out])
    np.testing.assert_allclose(out, _want(x, w2, b), rtol=1e-5, atol=1e-4)
    assert runs.count(True) == 2


def test_past_the_most_sets_the_oldest_is_made_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(held, "MAX_SETS", 2)
    kernel = polyopt.compile(LINEAR, sizes=SIZES, options={"constants": ["W"]})
    x, w, b = _inputs(9)
    weights = [w, w + 1, w + 2]
    runs = _counting(monkeypatch)
    for k in (0, 1, 2, 2, 0):  # 0 was dropped for 2
        np.testing.assert_allclose(kernel(x, weights[k], b), _want(x, weights[k], b),
                                   rtol=1e-5, atol=1e-4)
    assert runs.count(True) == 4


BUNDLED = [("matmul", {}, {"M": 70, "K": 90, "N": 100}),
           ("conv2d", {"padding": 1}, {"N": 1, "C": 16, "H": 20, "W": 20, "F": 32, "KH": 3,
                                       "KW": 3}),
           # its input's copy is one slice per image, made in the image's loop: per call
           ("conv2d", {"padding": 1, "stride": 2}, {"N": 2, "C": 8, "H": 21, "W": 21, "F": 24,
                                                    "KH": 3, "KW": 3}),
           ("conv2d_bias_relu", {}, {"N": 1, "C": 16, "H": 18, "W": 18, "F": 48, "KH": 1,
                                     "KW": 1}),
           ("depthwise_conv2d", {}, {"N": 1, "C": 32, "H": 20, "W": 20, "KH": 3, "KW": 3}),
           ("batch_matmul", {}, {"B": 3, "M": 40, "K": 70, "N": 50}),
           ("polybench_gemm", {}, {"NI": 60, "NJ": 70, "NK": 80})]


@pytest.mark.parametrize("name, params, sizes", BUNDLED,
                         ids=[f"{n}{'-' if p else ''}{'-'.join(map(str, p.values()))}"
                              for n, p, _ in BUNDLED])
def test_every_input_constant_computes_what_the_plain_kernel_does(
        name: str, params: dict[str, int], sizes: dict[str, int]) -> None:
    """Whatever the schedule made of the copies (whole, or a slice per iteration), declaring
    every input constant changes no result, at the first call, the next and with new
    arrays."""
    source = kernels.get(name, **params)
    decls = lang.define(source, None).syntax.inputs
    rng = np.random.default_rng(11)

    def arrays() -> list[np.ndarray]:
        return [rng.standard_normal([d.value if d.name is None else sizes[d.name]
                                     for d in decl.type.dims]).astype(np.float32)
                for decl in decls]
    plain = polyopt.compile(source, sizes=sizes)
    held = polyopt.compile(source, sizes=sizes,
                           options={"constants": [decl.name for decl in decls]})
    first = arrays()
    for args in (first, first, arrays()):
        np.testing.assert_allclose(held(*args), plain(*args), rtol=1e-5, atol=1e-4)


def test_without_constants_the_kernel_packs_at_each_call() -> None:
    source = polyopt.compile(LINEAR, sizes=SIZES).lowered().source
    assert source.held == () and source.once is None and "_once" not in source.text


def test_a_copy_of_a_varying_input_is_made_at_each_call() -> None:
    # W is constant, X is not: X's copy stays in the per-call function
    kernel = polyopt.compile(LINEAR, sizes=SIZES,
                             options={"constants": ["W"], "knobs": {"pack": True}})
    assert kernel.lowered().schedule.buffers == ("X_pack", "W_pack")
    assert kernel.lowered().source.held == ("W_pack",)
    x, w, b = _inputs(4)
    for seed in (5, 6):
        x = _inputs(seed)[0]
        np.testing.assert_allclose(kernel(x, w, b), _want(x, w, b), rtol=1e-5, atol=1e-4)


def test_size_generic_kernels_keep_a_copy_per_shape() -> None:
    kernel = polyopt.compile(LINEAR, options={"constants": ["W"]})
    for m, k, n in ((24, 40, 70), (5, 33, 17), (24, 40, 70)):
        x, w, b = _inputs(m + k + n, m, k, n)
        np.testing.assert_allclose(kernel(x, w, b), _want(x, w, b), rtol=1e-5, atol=1e-4)


def test_threads_share_the_copies() -> None:
    kernel = polyopt.compile(LINEAR, sizes=SIZES, options={"constants": ["W"]})
    _, w, b = _inputs(7)
    errors: list[BaseException] = []

    def work(seed: int) -> None:
        try:
            for s in range(5):
                x = _inputs(seed * 10 + s)[0]
                np.testing.assert_allclose(kernel(x, w, b), _want(x, w, b), rtol=1e-5,
                                           atol=1e-4)
        except BaseException as e:
            errors.append(e)
    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_a_warm_start_keeps_the_once_function(cache_dir: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    first = polyopt.compile(LINEAR, sizes=SIZES, options={"constants": ["W"]}).build()
    cache.clear_memory()  # as if in a new process
    lowered: list[int] = []
    real = driver.lower_program
    monkeypatch.setattr(driver, "lower_program",
                        lambda *a, **k: lowered.append(1) or real(*a, **k))
    second = polyopt.compile(LINEAR, sizes=SIZES, options={"constants": ["W"]}).build()
    assert not lowered and second.source == first.source
    x, w, b = _inputs(8)
    np.testing.assert_allclose(second(x, w, b), _want(x, w, b), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("constants, message", [
    (["V"], "option constants names V, not an input of def 'lin'; its inputs: X, W, B"),
    ("W", "option constants must be a list of input names"),
    ([1], "option constants must be a list of input names")])
def test_constants_that_are_not_input_names_are_refused(constants: object,
                                                        message: str) -> None:
    with pytest.raises(OptionError, match=message):
        polyopt.compile(LINEAR, sizes=SIZES, options={"constants": constants})
