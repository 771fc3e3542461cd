"""What a builtin call costs the CPU cost model, in its operations (``Machine.fma_units`` of
them a cycle): per vector of 512, 256 and 128 bits, and per element of scalar code.

Measured with ``scripts/calibrate/bench_call_cost.py`` (``O(i) = f(A(i))`` over 16384 floats in L2,
one thread, against the same loop copying; the median of three rounds' least times), on
an AMD EPYC host (AVX-512, glibc 2.36 with libmvec, GCC 12), 2026-12-04::

    OMP_NUM_THREADS=1 python3 scripts/calibrate/bench_call_cost.py --rounds 3     # --lanes 8, 4
    OMP_NUM_THREADS=1 POLYOPT_NO_CACHE=1 POLYOPT_CFLAGS=-fno-tree-vectorize \\
        python3 scripts/calibrate/bench_call_cost.py --rounds 3 --lanes 1
    (and each with --double: float64, --lanes 8, 4, 2 and 1)

float64's table is its own (``--double``): its vectors cost more than float32's of the same
bits (tanh 57.9 operations a 512-bit vector against 23.3); a scalar libm call costs about
the same in either (acos 54.8 and 55.4 an element).

A function with vector costs has a vector variant in the C kernels (glibc's libmvec or
``codegen/vmath.py``'s own); one without stays a scalar libm call, and a loop calling it
does not vectorize (its 16-lane loop measured 16 scalar calls a vector). What this does
not cover, each a guess stated here: a host whose C library lacks libmvec (another libc,
an older glibc, AArch64) runs ``vmath``'s own float32 exp/log/tanh/erf at about these
costs and the rest scalar, which this table does not know; other elements (16-bit floats,
computed in float32) take float32's; calls cheaper than one operation (fabs, floor, fmax,
copysign, a division, which the copy loop's loads hide) count one, as every other
operation does.
"""

from __future__ import annotations

# name: (512-bit vector, 256-bit vector, 128-bit vector, scalar element), float32.
_VECTOR: dict[str, tuple[float, float, float, float]] = {
    "exp": (23.7, 14.4, 16.1, 10.1),
    "log": (22.5, 13.9, 20.3, 10.0),
    "tanh": (23.3, 31.7, 27.9, 83.3),
    "erf": (42.4, 21.6, 18.8, 69.5),
    "sin": (23.4, 13.1, 21.6, 20.3),
    "cos": (23.4, 14.1, 22.0, 16.5),
    "expm1": (23.9, 27.5, 25.7, 61.0),
    "log1p": (28.0, 23.1, 32.8, 59.0),
    "exp2": (19.2, 11.9, 13.8, 10.1),
    "log2": (15.5, 15.0, 18.6, 10.0),
    "log10": (17.4, 16.9, 20.7, 26.5),
    "sqrt": (4.6, 6.6, 6.9, 7.0),
    "rsqrt": (11.3, 11.6, 11.9, 12.0),
    "pow": (154.4, 119.1, 92.2, 23.1),
    "norm3d": (26.1, 27.7, 27.9, 13.0),
    "norm4d": (26.3, 27.8, 27.5, 13.0),
    "rnorm3d": (46.6, 43.4, 43.6, 20.9),
    "rnorm4d": (45.7, 46.2, 43.6, 21.1),
    "cospi": (69.8, 38.5, 28.1, 86.8),
    "sinpi": (67.0, 37.5, 26.1, 88.0),
}
# The same, float64.
_VECTOR64: dict[str, tuple[float, float, float, float]] = {
    "exp": (31.2, 19.6, 16.3, 19.9),
    "log": (36.7, 27.1, 27.9, 20.9),
    "tanh": (57.9, 61.3, 52.8, 76.8),
    "erf": (58.9, 27.0, 32.0, 68.0),
    "sin": (25.7, 18.3, 31.1, 60.4),
    "cos": (27.8, 19.8, 32.4, 61.7),
    "expm1": (30.0, 24.4, 25.5, 50.4),
    "log1p": (27.8, 39.8, 39.6, 53.7),
    "exp2": (23.9, 17.1, 13.6, 11.6),
    "log2": (24.8, 27.8, 29.0, 19.9),
    "log10": (26.2, 28.9, 29.9, 42.6),
    "sqrt": (10.3, 11.9, 12.9, 13.2),
    "rsqrt": (18.4, 19.9, 20.9, 21.2),
    "pow": (142.8, 120.2, 112.5, 65.7),
    "norm3d": (10.4, 12.0, 12.8, 12.9),
    "norm4d": (10.5, 12.4, 13.0, 12.8),
    "rnorm3d": (18.4, 20.3, 21.0, 20.7),
    "rnorm4d": (18.4, 20.3, 21.0, 20.7),
    "cospi": (29.0, 21.3, 34.5, 83.0),
    "sinpi": (25.3, 18.6, 33.3, 83.8),
}
# Vectorized at about an operation or less a vector (inlined instructions or selects).
CHEAP = frozenset("fabs floor ceil trunc round copysign fma fmax fmin fdivide".split())
# Scalar libm calls (or polyopt's scalar prelude functions): operations per element.
_SCALAR: dict[str, float] = {
    "acos": 55.4, "acosh": 82.5, "asin": 57.9, "asinh": 124.0, "atan": 52.1,
    "atan2": 115.0, "atanh": 61.8, "cbrt": 74.0, "cosh": 30.7, "cyl_bessel_i0": 202.0,
    "cyl_bessel_i1": 188.0, "erfc": 72.0, "erfcinv": 342.0, "erfcx": 120.0,
    "erfinv": 135.0, "exp10": 12.4, "fdim": 22.5, "fmod": 81.0, "hypot": 16.2,
    "j0": 41.0, "j1": 21.3, "lgamma": 66.0, "logb": 10.0, "nextafter": 12.8,
    "normcdf": 58.0, "normcdfinv": 133.0, "rcbrt": 85.0, "remainder": 61.0,
    "rhypot": 63.6, "sinh": 92.5, "tan": 84.8, "tgamma": 181.0, "y0": 90.0, "y1": 90.0,
}


def known() -> frozenset[str]:
    """The builtins this table has measured."""
    return frozenset(_VECTOR) | frozenset(_SCALAR) | CHEAP


def vectorizes(fn: str) -> bool:
    """Does a loop calling builtin ``fn`` vectorize in the C kernels?"""
    return fn not in _SCALAR


def call_ops(fn: str, lanes: int, elem_bytes: int) -> float:
    """Operations one call of ``fn`` costs in a vector of ``lanes`` elements of
    ``elem_bytes`` bytes (one lane: the scalar call; under 128 bits: a 128-bit vector's),
    at least one."""
    if fn in _SCALAR:
        return _SCALAR[fn]
    costs = (_VECTOR64 if elem_bytes == 8 else _VECTOR).get(fn)
    if costs is None:  # CHEAP, or a name this table does not know: one operation
        return 1.0
    v512, v256, v128, scalar = costs
    bits = lanes * elem_bytes * 8
    if lanes == 1:
        return max(1.0, scalar)
    return max(1.0, v512 if bits >= 512 else v256 if bits >= 256 else v128)
