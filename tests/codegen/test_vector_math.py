"""Vector math accuracy: each builtin that vectorizes (polyopt.codegen.vmath), applied by a
compiled kernel to a sweep of float32 bit patterns over the whole range, against numpy's
float64 result: within its stated max ULP error, with NaN, infinities and signed zeros exact.
"""

from __future__ import annotations

import math
import os
import platform
import re
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest

import polyopt
from polyopt import config
from polyopt.runtime.compiler import base_link_flags
from polyopt.runtime.cpu import flags_for

GELU = """
def gelu(float(N,M) X) -> (Y) {
    Y(i,j) = 0.5 * X(i,j)
           * (1 + tanh(0.7978845608 * (X(i,j) + 0.044715 * X(i,j)*X(i,j)*X(i,j))))
}"""

# Max ULP error allowed per builtin, as the README states it (above the measured figures).
# libmvec documents 4 ULP; polyopt's own functions round a double result once. sigmoid is
# 1 / (1 + exp(-x)) in the kernel's type: two more roundings on top of exp's error. float64
# is measured against numpy's float64, itself up to 1 ULP off the exact result.
LIBMVEC_ULP = {"exp": 4, "log": 4, "tanh": 4, "erf": 4, "sin": 4, "cos": 4, "pow": 4,
               "expm1": 4, "log1p": 4, "exp2": 4, "log2": 4, "log10": 4,
               "sqrt": 0.5, "rsqrt": 1.5, "sigmoid": 5}
OWN_ULP = {"exp": 0.51, "log": 0.51, "tanh": 0.51, "erf": 0.51, "sigmoid": 2}
EXPRS = {"sigmoid": "1 / (1 + exp(-X(i,j)))", "pow": "pow(X(i,j), P(i,j))"}
REFERENCE = {
    "exp": np.exp, "log": np.log, "tanh": np.tanh, "sin": np.sin, "cos": np.cos,
    "expm1": np.expm1, "log1p": np.log1p, "exp2": np.exp2, "log2": np.log2,
    "log10": np.log10, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x),
    "erf": np.frompyfunc(math.erf, 1, 1),
}


def sweep(dtype: str = "float32", count_bits: int = 20) -> np.ndarray:
    """2^count_bits bit patterns evenly spaced over all of ``dtype``'s (both signs,
    denormals, infinities and NaN), plus the edge cases, in whole rows of 1024."""
    width = 32 if dtype == "float32" else 64
    ints, exponent, quiet = ((np.uint32, 0x7F800000, 0x400000) if width == 32 else
                             (np.uint64, 0x7FF0000000000000, 0x8000000000000))
    bits = (np.arange(1 << count_bits, dtype=np.uint64) << np.uint64(width - count_bits))
    bits = bits.astype(ints)
    # Quiet NaNs only: pow(sNaN, 0) is NaN in glibc (IEEE 754 allows it), 1 for a quiet NaN.
    bits[(bits & ints(exponent)) == ints(exponent)] |= ints(quiet)
    tiny = np.finfo(dtype).smallest_subnormal
    edges = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, tiny, -tiny,
                      np.finfo(dtype).tiny, np.finfo(dtype).max, -np.finfo(dtype).max,
                      88.72283, 88.72284, -87.33654, -103.97208, -103.97209, 9.010913,
                      3.9192059, 0.5, 2.0, 0.0625, 1e-30, 709.78, -745.13], dtype=dtype)
    return np.concatenate([bits.view(dtype), np.resize(edges, 1024)])


def ulp_error(got: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """|got - ref| in ULPs of ``got``'s type at the reference (the denormal ULP below the
    normal range); zero where ``got`` is the reference rounded to an infinity."""
    with np.errstate(over="ignore"):
        rounded = ref.astype(got.dtype)
    top = np.nextafter(np.finfo(got.dtype).max, 0)  # the largest ULP, and spacing is finite
    big = np.minimum(np.abs(rounded), top)
    ulp = np.maximum(np.spacing(big).astype(np.float64),
                     float(np.finfo(got.dtype).smallest_subnormal))
    same = (got == ref) | (np.isinf(got) & (got == rounded))
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.abs(got.astype(np.float64) - ref) / ulp
    return np.where(same, 0.0, np.where(np.isnan(err), np.inf, err))


POWERS = np.array([-3.5, -2, -1, -0.5, 0, 0.5, 1, 2, 3, 7.25], dtype=np.float32)


def kernel_source(names: list[str], dtype: str) -> str:
    """One def applying each builtin. Two-dimensional, so that the inner loop is an
    ``omp simd`` one (GCC does not vectorize a 1-D parallel loop over this many arrays: the
    outlined OpenMP body loses ``restrict``, and the alias checks exceed its limit)."""
    outs = ", ".join(f"Y_{n}" for n in names)
    body = "\n".join(f"    Y_{n}(i,j) = {EXPRS.get(n, f'{n}(X(i,j))')}" for n in names)
    return f"def vm({dtype}(N,M) X, {dtype}(N,M) P) -> ({outs}) {{\n{body}\n}}"


def reference(name: str, x: np.ndarray, p: np.ndarray) -> np.ndarray:
    """numpy's float64 result for the builtin (the kernel computes in ``x``'s type)."""
    wide = x.astype(np.float64)
    with np.errstate(all="ignore"):
        if name == "pow":
            return np.power(wide, p.astype(np.float64))
        if name == "sigmoid":
            # exp(-x) overflows float32 below -88.7, and then the kernel's 1 / (1 + inf) is
            # 0: round it to x's type too, so that the error measured is the vector exp's.
            return 1 / (1 + np.exp(-wide).astype(x.dtype).astype(np.float64))
        return np.asarray(REFERENCE[name](wide), dtype=np.float64)


def class_mismatches(got: np.ndarray, ref: np.ndarray) -> int:
    """Where the exact result is NaN, an infinity or a zero, the kernel's must be too, with
    the same sign."""
    nan, inf, zero = np.isnan(ref), np.isinf(ref), ref == 0
    bad = nan & ~np.isnan(got)
    bad |= inf & (got != ref)
    bad |= zero & ((got != 0) | (np.signbit(got) != np.signbit(ref)))
    bad |= ~nan & np.isnan(got)
    return int(bad.sum())


def measure(names: list[str], dtype: str = "float32",
            cflags: tuple[str, ...] = ()) -> dict[str, tuple[float, int]]:
    """(max ULP error, class mismatches) per builtin, over the sweep of ``dtype``."""
    kernel = polyopt.compile(kernel_source(names, dtype), options={"cflags": list(cflags)})
    x = sweep(dtype)
    p = np.resize(POWERS.astype(dtype), x.shape)
    outs = kernel(x.reshape(-1, 1024), p.reshape(-1, 1024))
    outs = [out.ravel() for out in (outs if isinstance(outs, tuple) else (outs,))]
    result = {}
    for name, got in zip(names, outs, strict=True):
        ref = reference(name, x, p)
        finite = np.isfinite(ref)
        err = ulp_error(got[finite], ref[finite])
        result[name] = (float(err.max()), class_mismatches(got, ref))
    return result


def check(measured: dict[str, tuple[float, int]], bounds: dict[str, float]) -> None:
    for name, (ulp, mismatches) in measured.items():
        assert mismatches == 0, f"{name}: NaN, inf or signed zero differs from numpy's"
        assert ulp <= bounds[name], f"{name}: {ulp:.3f} ULP > {bounds[name]}"


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_vector_math_within_its_stated_error(dtype: str) -> None:
    check(measure(list(LIBMVEC_ULP), dtype), LIBMVEC_ULP)


def test_own_vector_math_rounds_once() -> None:
    """polyopt's own functions, as a system without libmvec uses them."""
    check(measure(list(OWN_ULP), cflags=("-DPOLYOPT_OWN_MATH",)), OWN_ULP)


def vectorized_lines(source: str, cflags: tuple[str, ...]) -> set[int]:
    """Source lines of the loops GCC vectorized, compiling as the runtime does."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "k.c"
        path.write_text(source)
        argv = [*config.current().cc, *flags_for(), *cflags, "-fopt-info-vec-optimized",
                "-S", "-o", os.devnull, str(path), *base_link_flags()]
        log = subprocess.run(argv, capture_output=True, text=True, check=True).stderr
    return {int(m) for m in re.findall(r"k\.c:(\d+):\d+: optimized: loop vectorized", log)}


@pytest.mark.skipif(platform.machine() != "x86_64", reason="GCC on x86-64 (libmvec's ABI)")
@pytest.mark.parametrize("cflags", [(), ("-DPOLYOPT_OWN_MATH",)])
def test_transcendental_loops_vectorize(cflags: tuple[str, ...]) -> None:
    """GELU, and each of the functions polyopt also implements, in a vectorized loop."""
    for source in [GELU, kernel_source(list(OWN_ULP), "float32")]:
        kernel = polyopt.compile(source, options={"cflags": list(cflags)})
        kernel(*[np.ones((4, 64), np.float32)] * (1 if source is GELU else 2))
        lines = kernel.source.splitlines()
        stores = {i + 1 for i, line in enumerate(lines) if re.match(r"\s*t_Y\w*\[.*\] = ", line)}
        assert stores and stores <= vectorized_lines(kernel.source, cflags)


MINMAX = {"hi": "fmax(A(i), B(i))", "lo": "fmin(A(i), B(i))", "relu": "fmax(A(i), 0)"}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_fmax_and_fmin_keep_c_semantics_and_vectorize(dtype: str) -> None:
    """The other operand where one is NaN (numpy.fmax), in loops GCC vectorizes: libm's
    fmaxf kept a ReLU's loop scalar."""
    edges = np.array([np.nan, np.inf, -np.inf, 0.0, 1.5, -2.0, 3e-40, -7.0], dtype)
    a = np.resize(np.repeat(edges, edges.size), 1024)
    b = np.resize(np.tile(edges, edges.size), 1024)
    expected = {"hi": np.fmax(a, b), "lo": np.fmin(a, b), "relu": np.fmax(a, 0)}
    for name, expr in MINMAX.items():
        kernel = polyopt.compile(f"def {name}({dtype}(N) A, {dtype}(N) B) -> (Y) "
                                 f"{{ Y(i) = {expr} }}")
        np.testing.assert_array_equal(kernel(a, b), expected[name], err_msg=name)
        if platform.machine() == "x86_64":
            lines = kernel.source.splitlines()
            stores = {i + 1 for i, line in enumerate(lines) if re.match(r"\s*t_Y\[", line)}
            assert stores and stores <= vectorized_lines(kernel.source, ()), name
