"""Differential tests of the operator library (polyopt.kernels) against float64 NumPy.

Every def in ``polyopt.kernels.names()`` has an entry in ``REFERENCES``: an input maker and a
NumPy reference, run at two or more shapes (sizes such as 7, 13, 33 that are multiples of
nothing). ``VARIANTS`` adds strided, padded, dilated and grouped convolutions and pools built
with ``polyopt.kernels.get()``. Inputs are float32 (seeded ``np.random.default_rng``); the
references run in float64 on the same values, and the tolerance grows with the reduction size.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polybench_refs
import pytest

import polyopt
from polyopt import PolyoptWarning, kernels

pytestmark = pytest.mark.cc

F32 = np.float32
Arrays = tuple[np.ndarray, ...]
# make(rng, **shape) -> (inputs in signature order, expected outputs, reduction size)
Maker = Callable[..., tuple[Arrays, Arrays, int]]


def rand(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.uniform(-1.0, 1.0, size=shape).astype(F32)


def scalar(rng: np.random.Generator) -> np.ndarray:
    return np.array(rng.uniform(0.5, 1.5), dtype=F32)  # a 0-d input


def f64(*xs: np.ndarray) -> list[np.ndarray]:
    return [np.asarray(x, dtype=np.float64) for x in xs]


def assert_close(got: Any, want: np.ndarray, red: int, what: str = "") -> None:
    """float32 result vs float64 reference; tolerance ~ 1e-5 * sqrt(reduction size). An
    integer reference (nussinov's scores) is matched exactly, dtype included."""
    got = np.asarray(got)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, want {want.shape}"
    if want.dtype.kind in "iu":
        assert got.dtype == want.dtype, f"{what}: dtype {got.dtype}, want {want.dtype}"
        np.testing.assert_array_equal(got, want, err_msg=what)
        return
    assert got.dtype == F32, f"{what}: dtype {got.dtype}, want float32"
    tol = 2e-5 * math.sqrt(max(red, 1))
    scale = max(1.0, float(np.abs(want).max(initial=0.0)))
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * scale, err_msg=what)


# ----------------------------------------------------------------------------- references

def conv_ref(x: np.ndarray, w: np.ndarray, stride: int | tuple[int, int] = 1,
             padding: int | tuple[int, int] = 0, dilation: int | tuple[int, int] = 1,
             groups: int = 1) -> np.ndarray:
    """PyTorch's conv2d (NCHW, weight (F, C // groups, KH, KW), zero padding), in float64."""
    sh, sw = (stride, stride) if isinstance(stride, int) else stride
    ph, pw = (padding, padding) if isinstance(padding, int) else padding
    dh, dw = (dilation, dilation) if isinstance(dilation, int) else dilation
    x, w = f64(x, w)
    n, c, h, wd = x.shape
    f, cg, kh, kw = w.shape
    assert c == cg * groups and f % groups == 0
    fg = f // groups
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    ho = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    wo = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((n, f, ho, wo))
    for g in range(groups):
        xs = xp[:, g * cg:(g + 1) * cg]
        ws = w[g * fg:(g + 1) * fg]
        for i in range(kh):
            for j in range(kw):
                patch = xs[:, :, i * dh:i * dh + sh * (ho - 1) + 1:sh,
                           j * dw:j * dw + sw * (wo - 1) + 1:sw]
                out[:, g * fg:(g + 1) * fg] += np.einsum("nchw,fc->nfhw", patch, ws[:, :, i, j])
    return out


def pool_ref(x: np.ndarray, kind: str, k: int, s: int, p: int) -> np.ndarray:
    """PyTorch's max_pool2d / avg_pool2d (count_include_pad=True, floor mode), in float64."""
    (x,) = f64(x)
    fill = -np.inf if kind == "max" else 0.0
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)), constant_values=fill)
    h, w = x.shape[2:]
    ho, wo = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    wins = [xp[:, :, i:i + s * (ho - 1) + 1:s, j:j + s * (wo - 1) + 1:s]
            for i in range(k) for j in range(k)]
    return np.max(wins, axis=0) if kind == "max" else np.mean(wins, axis=0)


def mm(m: int, k: int, n: int, *, ta: bool = False, tb: bool = False) -> Maker:
    def make(rng: np.random.Generator) -> tuple[Arrays, Arrays, int]:
        a = rand(rng, *((k, m) if ta else (m, k)))
        b = rand(rng, *((n, k) if tb else (k, n)))
        a64, b64 = f64(a, b)
        return (a, b), ((a64.T if ta else a64) @ (b64.T if tb else b64),), k
    return make


@dataclass(frozen=True)
class Case:
    kernel: str
    make: Callable[[np.random.Generator, dict[str, int]], tuple[Arrays, Arrays, int]]
    shapes: tuple[dict[str, int], ...]
    get_kw: dict[str, Any] = field(default_factory=dict)
    sizes: dict[str, int] | None = None
    warns: bool = False  # may warn (unchecked preconditions), e.g. the grouped conv
    bind: bool = False  # compile at each shape's sizes (defs valid only from some sizes on)


def _matmul(rng, s):
    return mm(s["M"], s["K"], s["N"])(rng)


def _matmul_nt(rng, s):
    return mm(s["M"], s["K"], s["N"], tb=True)(rng)


def _matmul_tn(rng, s):
    return mm(s["M"], s["K"], s["N"], ta=True)(rng)


def _batch_matmul(rng, s):
    x, y = rand(rng, s["B"], s["M"], s["K"]), rand(rng, s["B"], s["K"], s["N"])
    return (x, y), (np.matmul(*f64(x, y)),), s["K"]


def _matvec(rng, s):
    a, x = rand(rng, s["M"], s["K"]), rand(rng, s["K"])
    return (a, x), (f64(a)[0] @ f64(x)[0],), s["K"]


def _bias_add(rng, s):
    x, b = rand(rng, s["M"], s["N"]), rand(rng, s["N"])
    x64, b64 = f64(x, b)
    return (x, b), (x64 + b64,), 1


def _relu(rng, s):
    x = rand(rng, s["M"], s["N"])
    return (x,), (np.maximum(f64(x)[0], 0),), 1


def _matmul_bias_relu(rng, s):
    a, b, bias = rand(rng, s["M"], s["K"]), rand(rng, s["K"], s["N"]), rand(rng, s["N"])
    a64, b64, bias64 = f64(a, b, bias)
    return (a, b, bias), (np.maximum(a64 @ b64 + bias64, 0),), s["K"]


def _softmax(rng, s):
    x = rand(rng, s["N"], s["D"]) * 4
    x64 = f64(x)[0]
    e = np.exp(x64 - x64.max(1, keepdims=True))
    return (x,), (e / e.sum(1, keepdims=True),), s["D"]


def _layernorm(rng, s):
    x, g, b = rand(rng, s["N"], s["D"]) + 0.5, rand(rng, s["D"]), rand(rng, s["D"])
    x64, g64, b64 = f64(x, g, b)
    mu, var = x64.mean(1, keepdims=True), x64.var(1, keepdims=True)
    return (x, g, b), (g64 * (x64 - mu) / np.sqrt(var + 1e-5) + b64,), 4 * s["D"]


def _conv_inputs(rng, s, cin=None, cw=None):
    x = rand(rng, s["N"], cin or s["C"], s["H"], s["W"])
    w = rand(rng, s["F"], cw or s["C"], s["KH"], s["KW"])
    return x, w


def conv_case(**kw: Any) -> Callable[..., tuple[Arrays, Arrays, int]]:
    groups = kw.get("groups", 1)

    def make(rng, s):
        x, w = _conv_inputs(rng, s, cin=s["C"], cw=s["C"] // groups)
        ref = conv_ref(x, w, kw.get("stride", 1), kw.get("padding", 0), kw.get("dilation", 1),
                       groups)
        return (x, w), (ref,), w[0].size
    return make


def conv_bias_relu_case(**kw: Any) -> Callable[..., tuple[Arrays, Arrays, int]]:
    def make(rng, s):
        x, w = _conv_inputs(rng, s)
        bias = rand(rng, s["F"])
        ref = conv_ref(x, w, kw.get("stride", 1), kw.get("padding", 0), kw.get("dilation", 1))
        ref = np.maximum(ref + f64(bias)[0][None, :, None, None], 0)
        return (x, w, bias), (ref,), w[0].size
    return make


def depthwise_case(**kw: Any) -> Callable[..., tuple[Arrays, Arrays, int]]:
    def make(rng, s):
        x = rand(rng, s["N"], s["C"], s["H"], s["W"])
        w = rand(rng, s["C"], 1, s["KH"], s["KW"])
        ref = conv_ref(x, w, kw.get("stride", 1), kw.get("padding", 0), kw.get("dilation", 1),
                       groups=s["C"])
        return (x, w), (ref,), s["KH"] * s["KW"]
    return make


def pool_case(kind: str, k: int = 2, s_: int | None = None, p: int = 0):
    def make(rng, s):
        x = rand(rng, s["N"], s["C"], s["H"], s["W"])
        if kind == "max":  # mostly negative, so that a zero-padded max would differ
            x = (x - np.float32(0.75)).astype(F32)
        return (x,), (pool_ref(x, kind, k, k if s_ is None else s_, p),), k * k
    return make


def _pb_gemm(rng, s):
    al, be = scalar(rng), scalar(rng)
    a, b, c = rand(rng, s["NI"], s["NK"]), rand(rng, s["NK"], s["NJ"]), rand(rng, s["NI"], s["NJ"])
    al64, be64, a64, b64, c64 = f64(al, be, a, b, c)
    return (al, be, a, b, c), (al64 * a64 @ b64 + be64 * c64,), s["NK"]


def _pb_2mm(rng, s):
    al, be = scalar(rng), scalar(rng)
    a, b = rand(rng, s["NI"], s["NK"]), rand(rng, s["NK"], s["NJ"])
    c, d = rand(rng, s["NJ"], s["NL"]), rand(rng, s["NI"], s["NL"])
    al64, be64, a64, b64, c64, d64 = f64(al, be, a, b, c, d)
    return (al, be, a, b, c, d), (be64 * d64 + (al64 * a64 @ b64) @ c64,), s["NK"] * s["NJ"]


def _pb_3mm(rng, s):
    a, b = rand(rng, s["NI"], s["NK"]), rand(rng, s["NK"], s["NJ"])
    c, d = rand(rng, s["NJ"], s["NM"]), rand(rng, s["NM"], s["NL"])
    a64, b64, c64, d64 = f64(a, b, c, d)
    red = s["NK"] * s["NJ"] * s["NM"]
    return (a, b, c, d), ((a64 @ b64) @ (c64 @ d64),), red


def _pb_atax(rng, s):
    a, x = rand(rng, s["M"], s["N"]), rand(rng, s["N"])
    a64, x64 = f64(a, x)
    return (a, x), (a64.T @ (a64 @ x64),), s["M"] * s["N"]


def _pb_bicg(rng, s):
    a, r, p = rand(rng, s["N"], s["M"]), rand(rng, s["N"]), rand(rng, s["M"])
    a64, r64, p64 = f64(a, r, p)
    return (a, r, p), (r64 @ a64, a64 @ p64), max(s["N"], s["M"])


def _pb_mvt(rng, s):
    n = s["N"]
    a, x1, x2, y1, y2 = rand(rng, n, n), rand(rng, n), rand(rng, n), rand(rng, n), rand(rng, n)
    a64, x164, x264, y164, y264 = f64(a, x1, x2, y1, y2)
    return (a, x1, x2, y1, y2), (x164 + a64 @ y164, x264 + a64.T @ y264), n


def _pb_gemver(rng, s):
    n = s["N"]
    al, be = scalar(rng), scalar(rng)
    vecs = [rand(rng, n) for _ in range(8)]  # u1 v1 u2 v2 w x y z
    a = rand(rng, n, n)
    al64, be64, a64 = f64(al, be, a)
    u1, v1, u2, v2, w, x, y, z = f64(*vecs)
    ah = a64 + np.outer(u1, v1) + np.outer(u2, v2)
    xo = x + be64 * ah.T @ y + z
    wo = w + al64 * ah @ xo
    return (al, be, a, *vecs), (ah, xo, wo), n * n


def _pb_gesummv(rng, s):
    n = s["N"]
    al, be, a, b, x = scalar(rng), scalar(rng), rand(rng, n, n), rand(rng, n, n), rand(rng, n)
    al64, be64, a64, b64, x64 = f64(al, be, a, b, x)
    return (al, be, a, b, x), (al64 * a64 @ x64 + be64 * b64 @ x64,), n


def _pb_doitgen(rng, s):
    a, c4 = rand(rng, s["NR"], s["NQ"], s["NP"]), rand(rng, s["NP"], s["NP"])
    a64, c64 = f64(a, c4)
    return (a, c4), (np.einsum("rqs,sp->rqp", a64, c64),), s["NP"]


def _pb_syrk(rng, s):
    n, m = s["N"], s["M"]
    al, be, a, c = scalar(rng), scalar(rng), rand(rng, n, m), rand(rng, n, n)
    al64, be64, a64, c64 = f64(al, be, a, c)
    lower = np.tril(np.ones((n, n), dtype=bool))
    co = c64.copy()
    co[lower] = (be64 * c64 + al64 * a64 @ a64.T)[lower]
    return (al, be, a, c), (co,), m


CONV_SHAPES = ({"N": 1, "C": 3, "H": 9, "W": 9, "F": 4, "KH": 3, "KW": 3},
               {"N": 2, "C": 2, "H": 7, "W": 13, "F": 5, "KH": 2, "KW": 3})
GCONV_SHAPES = ({"N": 1, "C": 4, "H": 9, "W": 9, "F": 6, "KH": 3, "KW": 3},
                {"N": 2, "C": 4, "H": 7, "W": 13, "F": 2, "KH": 2, "KW": 3})
POOL_SHAPES = ({"N": 1, "C": 3, "H": 9, "W": 9}, {"N": 2, "C": 2, "H": 7, "W": 13})
MM_SHAPES = ({"M": 33, "K": 17, "N": 29}, {"M": 7, "K": 13, "N": 1}, {"M": 1, "K": 1, "N": 5})

# One entry per def in the library; test_every_kernel_has_a_reference keeps it complete.
REFERENCES: dict[str, Case] = {c.kernel: c for c in (
    Case("matmul", _matmul, MM_SHAPES),
    Case("matmul_nt", _matmul_nt, MM_SHAPES[:2]),
    Case("matmul_tn", _matmul_tn, MM_SHAPES[:2]),
    Case("batch_matmul", _batch_matmul, ({"B": 3, "M": 7, "K": 13, "N": 5},
                                         {"B": 2, "M": 33, "K": 17, "N": 9})),
    Case("matvec", _matvec, ({"M": 33, "K": 17}, {"M": 13, "K": 7})),
    Case("bias_add", _bias_add, ({"M": 7, "N": 13}, {"M": 33, "N": 1})),
    Case("relu", _relu, ({"M": 7, "N": 13}, {"M": 33, "N": 17})),
    Case("matmul_bias_relu", _matmul_bias_relu, MM_SHAPES[:2]),
    Case("softmax", _softmax, ({"N": 7, "D": 13}, {"N": 33, "D": 17})),
    Case("layernorm", _layernorm, ({"N": 7, "D": 13}, {"N": 33, "D": 17})),
    Case("conv2d", conv_case(), CONV_SHAPES),
    Case("conv2d_grouped", conv_case(groups=2), GCONV_SHAPES,
         get_kw={"groups": 2, "in_channels": 4}, warns=True),
    Case("conv2d_bias_relu", conv_bias_relu_case(), CONV_SHAPES),
    Case("depthwise_conv2d", depthwise_case(), CONV_SHAPES),
    Case("maxpool2d", pool_case("max"), POOL_SHAPES),
    Case("avgpool2d", pool_case("avg"), POOL_SHAPES),
    Case("polybench_gemm", _pb_gemm, ({"NI": 20, "NJ": 25, "NK": 30},
                                      {"NI": 7, "NJ": 13, "NK": 33})),
    Case("polybench_2mm", _pb_2mm, ({"NI": 16, "NJ": 18, "NK": 22, "NL": 24},
                                    {"NI": 7, "NJ": 13, "NK": 5, "NL": 9})),
    Case("polybench_3mm", _pb_3mm, ({"NI": 16, "NJ": 18, "NK": 20, "NL": 22, "NM": 24},
                                    {"NI": 7, "NJ": 13, "NK": 5, "NL": 9, "NM": 11})),
    Case("polybench_atax", _pb_atax, ({"M": 38, "N": 42}, {"M": 7, "N": 13})),
    Case("polybench_bicg", _pb_bicg, ({"N": 42, "M": 38}, {"N": 13, "M": 7})),
    Case("polybench_mvt", _pb_mvt, ({"N": 40}, {"N": 7})),
    Case("polybench_gemver", _pb_gemver, ({"N": 40}, {"N": 13})),
    Case("polybench_gesummv", _pb_gesummv, ({"N": 30}, {"N": 7})),
    Case("polybench_doitgen", _pb_doitgen, ({"NR": 10, "NQ": 8, "NP": 12},
                                            {"NR": 3, "NQ": 5, "NP": 7})),
    Case("polybench_syrk", _pb_syrk, ({"N": 30, "M": 20}, {"N": 7, "M": 13}, {"N": 1, "M": 3})),
    # PolyBench's recurrences and datamining kernels, at its MINI and SMALL datasets.
    *(Case(name, make, shapes, bind=True)
      for name, (make, shapes) in polybench_refs.CASES.items()),
)}

# The grouped case gets out_channels from each shape; see _source().
_OUT_CHANNELS_FROM_SHAPE = {"conv2d_grouped"}

S2, P1, D2 = {"stride": 2}, {"padding": 1}, {"dilation": 2}
VARIANTS: dict[str, Case] = {
    "conv2d-s2": Case("conv2d", conv_case(**S2), CONV_SHAPES, get_kw=S2),
    "conv2d-p1": Case("conv2d", conv_case(**P1), CONV_SHAPES, get_kw=P1),
    "conv2d-d2": Case("conv2d", conv_case(**D2), CONV_SHAPES, get_kw=D2),
    "conv2d-s2p1d2": Case("conv2d", conv_case(stride=2, padding=1, dilation=2), CONV_SHAPES,
                          get_kw={"stride": 2, "padding": 1, "dilation": 2, "groups": 1}),
    "conv2d-s21p10": Case("conv2d", conv_case(stride=(2, 1), padding=(1, 0)), CONV_SHAPES[1:],
                          get_kw={"stride": (2, 1), "padding": (1, 0)}),
    "conv2d-g2": Case("conv2d", conv_case(groups=2), GCONV_SHAPES[:1],
                      get_kw={"groups": 2, "in_channels": 4, "out_channels": 6}, warns=True),
    "conv2d-g2s2p1d2": Case("conv2d", conv_case(groups=2, stride=2, padding=1, dilation=2),
                            GCONV_SHAPES[:1],
                            get_kw={"groups": 2, "in_channels": 4, "out_channels": 6,
                                    "stride": 2, "padding": 1, "dilation": 2}, warns=True),
    "conv2d-sizes-SH2": Case("conv2d", conv_case(stride=(2, 1)), CONV_SHAPES[:1],
                             sizes={"SH": 2}),
    "conv2d_bias_relu-s2p1": Case("conv2d_bias_relu", conv_bias_relu_case(stride=2, padding=1),
                                  CONV_SHAPES, get_kw={"stride": 2, "padding": 1}),
    "depthwise_conv2d-s2p1d2": Case("depthwise_conv2d",
                                    depthwise_case(stride=2, padding=1, dilation=2),
                                    CONV_SHAPES, get_kw={"stride": 2, "padding": 1,
                                                         "dilation": 2}),
    "maxpool2d-k3s2p1": Case("maxpool2d", pool_case("max", 3, 2, 1), POOL_SHAPES,
                             get_kw={"kernel_size": 3, "stride": 2, "padding": 1}),
    "avgpool2d-k3s2p1": Case("avgpool2d", pool_case("avg", 3, 2, 1), POOL_SHAPES,
                             get_kw={"kernel_size": 3, "stride": 2, "padding": 1}),
    "avgpool2d-k3": Case("avgpool2d", pool_case("avg", 3), POOL_SHAPES,
                         get_kw={"kernel_size": 3}),
}


def _source(case: Case, shape: dict[str, int]) -> str:
    kw = dict(case.get_kw)
    if case.kernel in _OUT_CHANNELS_FROM_SHAPE:
        kw["out_channels"] = shape["F"]
    return kernels.get(case.kernel, **kw)


@functools.cache
def _compiled(src: str, name: str, sizes: tuple[tuple[str, int], ...], target: str) -> Any:
    return polyopt.compile(src, name, sizes=dict(sizes) or None, target=target)


def run_case(case: Case, shape: dict[str, int], seed: int, target: str = "c") -> None:
    rng = np.random.default_rng(seed)
    inputs, want, red = case.make(rng, shape)
    src = _source(case, shape)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", PolyoptWarning)
        sizes = shape if case.bind else (case.sizes or {})
        kernel = _compiled(src, case.kernel, tuple(sorted(sizes.items())), target)
        got = kernel(*inputs)
    got = got if isinstance(got, tuple) else (got,)
    assert len(got) == len(want), f"{len(got)} outputs, want {len(want)}"
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert_close(g, w, red, f"{case.kernel} output {i} at {shape}")
    if not case.warns:
        unexpected = [str(w.message) for w in caught if issubclass(w.category, PolyoptWarning)]
        assert not unexpected, f"unexpected warnings: {unexpected}"


def _params(cases: dict[str, Case]) -> list[Any]:
    return [pytest.param(key, i, id=f"{key}-{i}")
            for key, case in cases.items() for i in range(len(case.shapes))]


@pytest.mark.parametrize(("key", "i"), _params(REFERENCES))
def test_kernel(key: str, i: int) -> None:
    case = REFERENCES[key]
    run_case(case, case.shapes[i], seed=1000 + i)


@pytest.mark.parametrize(("key", "i"), _params(VARIANTS))
def test_variant(key: str, i: int) -> None:
    case = VARIANTS[key]
    run_case(case, case.shapes[i], seed=2000 + i)


def test_every_kernel_has_a_reference() -> None:
    missing = sorted(set(kernels.names()) - set(REFERENCES))
    stale = sorted(set(REFERENCES) - set(kernels.names()))
    assert not missing, f"kernels without a NumPy reference in REFERENCES: {missing}"
    assert not stale, f"REFERENCES entries for kernels that no longer exist: {stale}"


def test_conv_reference_matches_sliding_window_formula() -> None:
    """conv_ref agrees with the swv formula written above conv2d in conv.tc."""
    rng = np.random.default_rng(7)
    x, w = rand(rng, 2, 3, 11, 10), rand(rng, 4, 3, 3, 2)
    sh, sw, ph, pw, dh, dw = 2, 1, 1, 2, 2, 1
    kh, kw = w.shape[2:]
    xp = np.pad(f64(x)[0], ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    win = np.lib.stride_tricks.sliding_window_view(
        xp, (dh * (kh - 1) + 1, dw * (kw - 1) + 1), axis=(2, 3))[:, :, ::sh, ::sw, ::dh, ::dw]
    want = np.einsum("nchwij,fcij->nfhw", win, f64(w)[0])
    got = conv_ref(x, w, (sh, sw), (ph, pw), (dh, dw))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
