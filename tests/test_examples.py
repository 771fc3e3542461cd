"""The 25 examples of the language reference (§4), compiled and checked against their NumPy
equivalents (the comment above each def) at small sizes.

The TC text below is copied verbatim from ``shared/reference/tc-language.md`` §4.
"""

from __future__ import annotations

import functools
import math
import re
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import polyopt
from polyopt import PolyoptWarning

pytestmark = pytest.mark.cc

EXAMPLES_TC = """\
#1 C = A @ B
def matmul(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,r_k)*B(r_k,n) }
#2 C = A @ B.T
def mm_nt(float(M,K) A, float(N,K) B) -> (C) { C(m,n) +=! A(m,r_k)*B(n,r_k) }
#3 Z = X @ Y (batched)
def bmm(float(B,M,K) X, float(B,K,N) Y) -> (Z) { Z(b,m,n) +=! X(b,m,r_k)*Y(b,r_k,n) }
#4 y = alpha * (A @ x) (alpha is 0-d)
def gemv(float(M,K) A, float(K) x, float alpha) -> (y) { y(m) +=! alpha*A(m,r_k)*x(r_k) }
#5 Y = np.maximum(X @ W.T + bias, 0)
def fc_relu(float(B,I) X, float(O,I) W, float(O) bias) -> (Y) {
    Y(b,o) +=! X(b,r_i)*W(o,r_i)
    Y(b,o)  = fmax(Y(b,o) + bias(o), 0)
}
#6 H = np.maximum(X @ W1.T + b1, 0); Y = H @ W2.T + b2 (H must be an output)
def mlp2(float(B,I) X, float(J,I) W1, float(J) b1, float(O,J) W2, float(O) b2) -> (Y, H) {
    H(b,j) +=! X(b,r_i)*W1(j,r_i)
    H(b,j)  = fmax(H(b,j) + b1(j), 0)
    Y(b,o) +=! H(b,r_j)*W2(o,r_j)
    Y(b,o)  = Y(b,o) + b2(o)
}
#7 O = np.einsum('nchwij,fcij->nfhw', swv(I,(KH,KW),axis=(2,3)), Wt)
def conv2d(float(N,C,H,W) I, float(F,C,KH,KW) Wt) -> (O) {
    O(n,f,h,w) +=! I(n,r_c,h+r_kh,w+r_kw)*Wt(f,r_c,r_kh,r_kw)
}
#8 as 7, on swv(I,(KH,KW),axis=(2,3))[:,:,::2,::2] (stride 2)
def conv2d_s2(float(N,C,H,W) I, float(F,C,KH,KW) Wt) -> (O) {
    O(n,f,h,w) +=! I(n,r_c,2*h+r_kh,2*w+r_kw)*Wt(f,r_c,r_kh,r_kw)
}
#9 as 7, on swv(I,(2*KH-1,2*KW-1),axis=(2,3))[...,::2,::2] (dilation 2)
def conv2d_d2(float(N,C,H,W) I, float(F,C,KH,KW) Wt) -> (O) {
    O(n,f,h,w) +=! I(n,r_c,h+2*r_kh,w+2*r_kw)*Wt(f,r_c,r_kh,r_kw)
}
#10 O = np.einsum('ngchwij,gfcij->ngfhw', swv(I,(KH,KW),axis=(3,4)), Wt) (grouped)
def gconv(float(N,G,C,H,W) I, float(G,F,C,KH,KW) Wt) -> (O) {
    O(n,g,f,h,w) +=! I(n,g,r_c,h+r_kh,w+r_kw)*Wt(g,f,r_c,r_kh,r_kw)
}
#11 O = I[:,:,:H//2*2,:W//2*2].reshape(N,C,H//2,2,W//2,2).max((3,5))
def maxpool2(float(N,C,H,W) I) -> (O) {
    O(n,c,h,w) max=! I(n,c,2*h+r_y,2*w+r_x) where r_y in 0:2, r_x in 0:2
}
#12 O = swv(I,(3,3),axis=(2,3)).mean((4,5))
def avgpool3(float(N,C,H,W) I) -> (O) {
    O(n,c,h,w) +=! I(n,c,h+r_y,w+r_x) / 9.0 where r_y in 0:3, r_x in 0:3
}
#13 E = np.exp(X - X.max(1,keepdims=True)); Y = E / E.sum(1,keepdims=True)
def softmax(float(N,D) X) -> (Y, mx, den) {
    mx(n)  max=! X(n,r_d)
    den(n) +=! exp(X(n,r_d) - mx(n))
    Y(n,d)  = exp(X(n,d) - mx(n)) / den(n)
}
#14 Y = g*(X-mu)/np.sqrt(var+1e-5)+b; mu, var: row mean, variance (keepdims)
def layernorm(float(N,D) X, float(D) g, float(D) b) -> (Y, mu, var) {
    mu(n)  +=! X(n,r_d) / D
    var(n) +=! (X(n,r_d) - mu(n))*(X(n,r_d) - mu(n)) / D
    Y(n,d)  = g(d)*xc*rsqrt(var(n) + 1e-5) + b(d) where xc = X(n,d) - mu(n)
}
#15 mean, var = X.mean(1), X.var(1)
def moments(float(N,K) X) -> (mean, var) {
    mean(n) +=! X(n,r_k)
    mean(n)  = mean(n) / K
    var(n)  +=! (X(n,r_k) - mean(n))*(X(n,r_k) - mean(n))
    var(n)   = var(n) / K
}
#16 Z = np.tensordot(X, Y, axes=([1,2],[0,1]))
def tdot(float(A,B,C) X, float(B,C,D) Y) -> (Z) { Z(a,d) +=! X(a,r_b,r_c)*Y(r_b,r_c,d) }
#17 Y = (X.reshape(M,-1) @ np.kron(W0,W1).T).reshape(M,P0,P1)
def kron2(float(P0,Q0) W0, float(P1,Q1) W1, float(M,Q0,Q1) X) -> (Y, T) {
    T(m,q0,p1) +=! X(m,q0,r_q1)*W1(p1,r_q1)
    Y(m,p0,p1) +=! T(m,r_q0,p1)*W0(p0,r_q0)
}
#18 Out = Tab[Idx] (warns: Idx values unchecked)
def embed(float(V,E) Tab, int32(B,L) Idx) -> (Out) { Out(b,l,e) = Tab(Idx(b,l), e) }
#19 Out = Tab[Idx].sum(1) (embedding bag)
def bag(float(V,E) Tab, int32(B,L) Idx) -> (Out) { Out(b,e) +=! Tab(Idx(b,r_l), e) }
#20 idx = X.argmax(1) (first max; index as value)
def argmax(float(N,D) X) -> (mx, idx) {
    mx(n)  max=! X(n,r_d)
    idx(n) min=! (X(n,r_d) == mx(n)) ? r_d : D
}
#21 Out = Img.transpose(2,0,1).astype(np.float32) / 255
def to_chw(uint8(H,W,C) Img) -> (Out) { Out(c,h,w) = float(Img(h,w,c)) / 255.0 }
#22 B = np.full(A.shape, v)
def fill_like(float(N,M) A, float v) -> (B) { B(i,j) = v where exists A(i,j) }
#23 y = x[::-1]
def flip(float(N) x) -> (y) { y(i) = x(N - 1 - i) }
#24 t = np.trace(A) (0-d output; repeated index)
def trace(float(N,M) A) -> (t) { t +=! A(r_i, r_i) }
#25 acc += A.sum(1) (caller's buffer; warns: no !)
def accum(float(N,K) A) -> (acc) { acc(n) += A(n,r_k) }
"""

F32 = np.float32
Arrays = tuple[np.ndarray, ...]
swv = np.lib.stride_tricks.sliding_window_view


def split_examples(text: str) -> dict[str, tuple[int, str]]:
    """def name -> (example number, its text: the ``#N`` comment line and the def)."""
    out: dict[str, tuple[int, str]] = {}
    for chunk in re.split(r"(?m)^(?=#\d+ )", text):
        if chunk.strip():
            num = int(re.match(r"#(\d+)", chunk).group(1))
            name = re.search(r"^def\s+(\w+)", chunk, re.MULTILINE).group(1)
            out[name] = (num, chunk)
    return out


EXAMPLES = split_examples(EXAMPLES_TC)


def rand(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.uniform(-1.0, 1.0, size=shape).astype(F32)


def f64(*xs: np.ndarray) -> list[np.ndarray]:
    return [np.asarray(x, dtype=np.float64) for x in xs]


def assert_close(got: Any, want: np.ndarray, red: int, what: str) -> None:
    got = np.asarray(got)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, want {want.shape}"
    if want.dtype.kind in "iub":
        assert got.dtype == want.dtype, f"{what}: dtype {got.dtype}, want {want.dtype}"
        np.testing.assert_array_equal(got, want, err_msg=what)
        return
    assert got.dtype == F32, f"{what}: dtype {got.dtype}, want float32"
    tol = 2e-5 * math.sqrt(max(red, 1))
    scale = max(1.0, float(np.abs(want).max(initial=0.0)))
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * scale, err_msg=what)


# Each maker: rng -> (inputs in signature order, expected outputs in declared order, reduction size)
Maker = Callable[[np.random.Generator], tuple[Arrays, Arrays, int]]


def ex_matmul(rng):
    a, b = rand(rng, 7, 13), rand(rng, 13, 5)
    return (a, b), (np.matmul(*f64(a, b)),), 13


def ex_mm_nt(rng):
    a, b = rand(rng, 7, 13), rand(rng, 9, 13)
    a64, b64 = f64(a, b)
    return (a, b), (a64 @ b64.T,), 13


def ex_bmm(rng):
    x, y = rand(rng, 3, 5, 7), rand(rng, 3, 7, 4)
    return (x, y), (np.matmul(*f64(x, y)),), 7


def ex_gemv(rng):
    a, x, alpha = rand(rng, 9, 13), rand(rng, 13), np.array(1.5, dtype=F32)
    a64, x64, al64 = f64(a, x, alpha)
    return (a, x, alpha), (al64 * (a64 @ x64),), 13


def ex_fc_relu(rng):
    x, w, bias = rand(rng, 5, 13), rand(rng, 7, 13), rand(rng, 7)
    x64, w64, b64 = f64(x, w, bias)
    return (x, w, bias), (np.maximum(x64 @ w64.T + b64, 0),), 13


def ex_mlp2(rng):
    x, w1, b1 = rand(rng, 5, 13), rand(rng, 9, 13), rand(rng, 9)
    w2, b2 = rand(rng, 3, 9), rand(rng, 3)
    x64, w164, b164, w264, b264 = f64(x, w1, b1, w2, b2)
    h = np.maximum(x64 @ w164.T + b164, 0)
    return (x, w1, b1, w2, b2), (h @ w264.T + b264, h), 13 * 9


def ex_conv2d(rng):
    i, wt = rand(rng, 2, 3, 9, 7), rand(rng, 4, 3, 3, 2)
    i64, w64 = f64(i, wt)
    return (i, wt), (np.einsum("nchwij,fcij->nfhw", swv(i64, (3, 2), axis=(2, 3)), w64),), 18


def ex_conv2d_s2(rng):
    i, wt = rand(rng, 1, 3, 9, 8), rand(rng, 4, 3, 3, 2)
    i64, w64 = f64(i, wt)
    win = swv(i64, (3, 2), axis=(2, 3))[:, :, ::2, ::2]
    return (i, wt), (np.einsum("nchwij,fcij->nfhw", win, w64),), 18


def ex_conv2d_d2(rng):
    i, wt = rand(rng, 1, 3, 9, 8), rand(rng, 4, 3, 3, 2)
    i64, w64 = f64(i, wt)
    win = swv(i64, (2 * 3 - 1, 2 * 2 - 1), axis=(2, 3))[..., ::2, ::2]
    return (i, wt), (np.einsum("nchwij,fcij->nfhw", win, w64),), 18


def ex_gconv(rng):
    i, wt = rand(rng, 1, 2, 3, 7, 6), rand(rng, 2, 4, 3, 3, 2)
    i64, w64 = f64(i, wt)
    win = swv(i64, (3, 2), axis=(3, 4))
    return (i, wt), (np.einsum("ngchwij,gfcij->ngfhw", win, w64),), 18


def ex_maxpool2(rng):
    n, c, h, w = 2, 3, 7, 6
    i = rand(rng, n, c, h, w)
    (i64,) = f64(i)
    o = i64[:, :, :h // 2 * 2, :w // 2 * 2].reshape(n, c, h // 2, 2, w // 2, 2).max((3, 5))
    return (i,), (o,), 4


def ex_avgpool3(rng):
    i = rand(rng, 2, 3, 7, 6)
    return (i,), (swv(f64(i)[0], (3, 3), axis=(2, 3)).mean((4, 5)),), 9


def ex_softmax(rng):
    x = rand(rng, 7, 13) * 4
    (x64,) = f64(x)
    mx = x64.max(1, keepdims=True)
    e = np.exp(x64 - mx)
    den = e.sum(1, keepdims=True)
    return (x,), (e / den, mx[:, 0], den[:, 0]), 13


def ex_layernorm(rng):
    x, g, b = rand(rng, 7, 13) + 0.5, rand(rng, 13), rand(rng, 13)
    x64, g64, b64 = f64(x, g, b)
    mu, var = x64.mean(1, keepdims=True), x64.var(1, keepdims=True)
    y = g64 * (x64 - mu) / np.sqrt(var + 1e-5) + b64
    return (x, g, b), (y, mu[:, 0], var[:, 0]), 4 * 13


def ex_moments(rng):
    x = rand(rng, 7, 13) + 0.5
    (x64,) = f64(x)
    return (x,), (x64.mean(1), x64.var(1)), 13


def ex_tdot(rng):
    x, y = rand(rng, 5, 3, 7), rand(rng, 3, 7, 4)
    return (x, y), (np.tensordot(*f64(x, y), axes=([1, 2], [0, 1])),), 21


def ex_kron2(rng):
    w0, w1, x = rand(rng, 3, 4), rand(rng, 5, 2), rand(rng, 6, 4, 2)
    w064, w164, x64 = f64(w0, w1, x)
    m, p0, p1 = 6, 3, 5
    y = (x64.reshape(m, -1) @ np.kron(w064, w164).T).reshape(m, p0, p1)
    t = np.einsum("mab,pb->map", x64, w164)  # T(m,q0,p1)
    return (w0, w1, x), (y, t), 8


def ex_embed(rng):
    tab, idx = rand(rng, 11, 5), rng.integers(0, 11, size=(3, 4), dtype=np.int32)
    return (tab, idx), (f64(tab)[0][idx],), 1


def ex_bag(rng):
    tab, idx = rand(rng, 11, 5), rng.integers(0, 11, size=(3, 4), dtype=np.int32)
    return (tab, idx), (f64(tab)[0][idx].sum(1),), 4


def ex_argmax(rng):
    x = rand(rng, 7, 13)
    x[2, 3] = x[2, 9] = 2.0  # a tie: the first index wins
    (x64,) = f64(x)
    return (x,), (x64.max(1), x64.argmax(1).astype(np.int32)), 1


def ex_to_chw(rng):
    img = rng.integers(0, 256, size=(5, 7, 3), dtype=np.uint8)
    return (img,), (img.transpose(2, 0, 1).astype(np.float64) / 255,), 1


def ex_fill_like(rng):
    a, v = rand(rng, 5, 7), np.array(0.25, dtype=F32)
    return (a, v), (np.full(a.shape, 0.25),), 1


def ex_flip(rng):
    x = rand(rng, 13)
    return (x,), (f64(x)[0][::-1],), 1


def ex_trace(rng):
    a = rand(rng, 5, 7)
    return (a,), (np.asarray(np.trace(f64(a)[0])),), 5


MAKERS: dict[str, Maker] = {
    "matmul": ex_matmul, "mm_nt": ex_mm_nt, "bmm": ex_bmm, "gemv": ex_gemv,
    "fc_relu": ex_fc_relu, "mlp2": ex_mlp2, "conv2d": ex_conv2d, "conv2d_s2": ex_conv2d_s2,
    "conv2d_d2": ex_conv2d_d2, "gconv": ex_gconv, "maxpool2": ex_maxpool2,
    "avgpool3": ex_avgpool3, "softmax": ex_softmax, "layernorm": ex_layernorm,
    "moments": ex_moments, "tdot": ex_tdot, "kron2": ex_kron2, "embed": ex_embed,
    "bag": ex_bag, "argmax": ex_argmax, "to_chw": ex_to_chw, "fill_like": ex_fill_like,
    "flip": ex_flip, "trace": ex_trace,
    # accum (#25) needs a caller buffer: test_accum_into_caller_buffer.
}
MUST_WARN = {"accum"}  # §3.9: op= without ! on a tensor not yet defined
# Data-dependent indices (§3.6 step 5): TC warns that they go unchecked; polyopt may instead
# check them at call time (BoundsError), so a warning is allowed but not required.
MAY_WARN = {"embed", "bag"}

@functools.cache
def _compiled(name: str) -> Any:
    return polyopt.compile(EXAMPLES[name][1], name)


def _run(name: str, inputs: Arrays, **kw: Any) -> tuple[Any, list[warnings.WarningMessage]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", PolyoptWarning)
        out = _compiled(name)(*inputs, **kw)
    return out, [w for w in caught if issubclass(w.category, PolyoptWarning)]


def test_all_25_examples_present() -> None:
    assert sorted(num for num, _ in EXAMPLES.values()) == list(range(1, 26))
    assert set(MAKERS) | {"accum"} == set(EXAMPLES)


@pytest.mark.parametrize("name", list(MAKERS), ids=lambda n: f"{EXAMPLES[n][0]}-{n}")
def test_example(name: str) -> None:
    inputs, want, red = MAKERS[name](np.random.default_rng(EXAMPLES[name][0]))
    got, warned = _run(name, inputs)
    got = got if isinstance(got, tuple) else (got,)
    assert len(got) == len(want), f"{len(got)} outputs, want {len(want)}"
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert_close(g, w, red, f"#{EXAMPLES[name][0]} {name} output {i}")
    if name not in MUST_WARN | MAY_WARN:
        assert not warned, [str(w.message) for w in warned]


@pytest.mark.parametrize("name", ["embed", "bag"])
def test_gather_index_out_of_range(name: str) -> None:
    """An index value outside the table must not read out of bounds: either a BoundsError at
    call time or, as TC does, a warning at compile/call time that the values go unchecked."""
    inputs, _, _ = MAKERS[name](np.random.default_rng(0))
    tab, idx = inputs
    bad = idx.copy()
    bad[1, 2] = tab.shape[0]  # one past the end
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", PolyoptWarning)
        kernel = polyopt.compile(EXAMPLES[name][1], name)
        try:
            kernel(tab, bad)
        except polyopt.BoundsError:
            return
    assert any(issubclass(w.category, PolyoptWarning) for w in caught), \
        "an out-of-range gather index neither raised BoundsError nor was warned about"


def test_fill_like_numpy_scalar() -> None:
    """#22 with ``v`` given as a numpy scalar rather than a 0-d array."""
    a = rand(np.random.default_rng(22), 4, 3)
    got, _ = _run("fill_like", (a, F32(-1.5)))
    assert_close(got, np.full((4, 3), -1.5), 1, "fill_like")


@pytest.mark.parametrize("shape", [(5, 7), (13, 1)])
def test_accum_into_caller_buffer(shape: tuple[int, int]) -> None:
    """#25: ``acc(n) += A(n,r_k)`` adds into the buffer passed with ``outputs=``."""
    rng = np.random.default_rng(25)
    a, acc = rand(rng, *shape), rand(rng, shape[0])
    want = f64(acc)[0] + f64(a)[0].sum(1)
    buf = acc.copy()
    with pytest.warns(PolyoptWarning):
        kernel = polyopt.compile(EXAMPLES["accum"][1], "accum")
        got = kernel(a, outputs=(buf,))
    assert_close(buf, want, shape[1], "accum buffer")
    assert_close(got, want, shape[1], "accum result")
    # Accumulates again on a second call.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PolyoptWarning)
        kernel(a, outputs=[buf])
    assert_close(buf, want + f64(a)[0].sum(1), shape[1], "accum buffer, twice")


@pytest.mark.parametrize("name", ["trace", "mlp2", "argmax"])
def test_select_def_from_whole_file(name: str) -> None:
    """The whole §4 block is one valid file; compile picks a def by name."""
    inputs, want, red = MAKERS[name](np.random.default_rng(0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PolyoptWarning)
        got = polyopt.compile(EXAMPLES_TC, name)(*inputs)
    got = got if isinstance(got, tuple) else (got,)
    for g, w in zip(got, want, strict=True):
        assert_close(g, w, red, name)
