"""TC's builtin math functions in C, and the helpers generated code relies on.

TC's builtins are CUDA's math library. Those libm has (``expf``/``exp`` ...) map onto it;
the CUDA-only ones (``rsqrt``, ``normcdf``, ``erfinv`` ...) are defined in the prelude, in
double precision, and narrower types call them through a cast.
"""

from __future__ import annotations

from polyopt.errors import CodegenError

# libm functions with a float variant spelled with an ``f`` suffix.
LIBM = frozenset(
    """
acos acosh asin asinh atan atan2 atanh cbrt ceil copysign cos cosh erf erfc exp exp2 exp10
expm1 fabs fdim floor fma fmax fmin fmod hypot lgamma log log10 log1p log2 logb nextafter
pow remainder round sin sinh sqrt tan tanh tgamma trunc j0 j1 y0 y1
""".split()
)

# Defined in PRELUDE as po_<name>(double...).
EXTRA = frozenset(
    """
cospi sinpi cyl_bessel_i0 cyl_bessel_i1 erfcinv erfcx erfinv fdivide norm3d norm4d normcdf
normcdfinv rcbrt rhypot rnorm3d rnorm4d rsqrt
""".split()
)

# Prelude helpers that also have a float version (po_<name>f), so float loops stay float
# (and vectorize: a double round trip per element does not).
FLOAT_EXTRA = frozenset({"rsqrt", "fdivide"})


def c_function(fn: str, dtype: str) -> tuple[str, str]:
    """(C function name, the C type it computes in) for builtin ``fn`` at float ``dtype``."""
    if fn not in LIBM and fn not in EXTRA:
        raise CodegenError(f"no C implementation of builtin '{fn}'")
    if fn in FLOAT_EXTRA and dtype != "float64":
        return f"po_{fn}f", "float"
    if fn in EXTRA:
        return f"po_{fn}", "double"
    if dtype == "float64":
        return fn, "double"
    if dtype == "longdouble":  # C99's long double variants: expl, logl, ...
        return f"{fn}l", "long double"
    return f"{fn}f", "float"


# The helpers below are ``PO_FN`` functions: ``static inline`` in C, device functions in
# CUDA (each dialect defines PO_FN before the prelude).
PRELUDE = r"""
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define PO_PI 3.14159265358979323846

/* Floor division and non-negative modulo (TC semantics); division by zero gives 0, and
   MIN / -1 gives MIN, MIN % -1 gives 0 (numpy's results; C's '/' traps on them). */
#define PO_INT_OPS(T, S) \
  PO_FN T po_div_##S(T a, T b) { \
    if (b == 0) return 0; \
    if (b == -1) return (T)(0 - (uint64_t)a); \
    T q = a / b; return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q; } \
  PO_FN T po_mod_##S(T a, T b) { \
    if (b == 0 || b == -1) return 0; \
    T r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }
#define PO_UINT_OPS(T, S) \
  PO_FN T po_div_##S(T a, T b) { return b == 0 ? 0 : a / b; } \
  PO_FN T po_mod_##S(T a, T b) { return b == 0 ? 0 : a % b; }
#define PO_MINMAX(T, S) \
  PO_FN T po_min_##S(T a, T b) { return b < a ? b : a; } \
  PO_FN T po_max_##S(T a, T b) { return b > a ? b : a; }
/* Floating-point min and max propagate NaN, like numpy.minimum/maximum (fmin/fmax don't). */
#define PO_FMINMAX(T, S) \
  PO_FN T po_min_##S(T a, T b) { return (b < a || b != b) ? b : a; } \
  PO_FN T po_max_##S(T a, T b) { return (b > a || b != b) ? b : a; }
PO_INT_OPS(int8_t, int8) PO_INT_OPS(int16_t, int16) PO_INT_OPS(int32_t, int32)
PO_INT_OPS(int64_t, int64)
PO_UINT_OPS(bool, bool) PO_UINT_OPS(uint8_t, uint8) PO_UINT_OPS(uint16_t, uint16)
PO_UINT_OPS(uint32_t, uint32) PO_UINT_OPS(uint64_t, uint64)
PO_MINMAX(bool, bool) PO_MINMAX(int8_t, int8) PO_MINMAX(int16_t, int16)
PO_MINMAX(int32_t, int32) PO_MINMAX(int64_t, int64) PO_MINMAX(uint8_t, uint8)
PO_MINMAX(uint16_t, uint16) PO_MINMAX(uint32_t, uint32) PO_MINMAX(uint64_t, uint64)
PO_FMINMAX(float, float32) PO_FMINMAX(double, float64)
/* Float to integer conversions saturate and map NaN to 0, as CUDA's cvt.rzi does (C leaves
   an out-of-range conversion undefined). */
#define PO_CVT(D, DS, LO, HI) \
  PO_FN D po_cvt_##DS##_float32(float x) { \
    return x != x ? (D)0 : x <= (float)(LO) ? (D)(LO) : x >= (float)(HI) ? (D)(HI) : (D)x; } \
  PO_FN D po_cvt_##DS##_float64(double x) { \
    return x != x ? (D)0 : x <= (double)(LO) ? (D)(LO) : x >= (double)(HI) ? (D)(HI) : (D)x; }
PO_CVT(int8_t, int8, INT8_MIN, INT8_MAX) PO_CVT(int16_t, int16, INT16_MIN, INT16_MAX)
PO_CVT(int32_t, int32, INT32_MIN, INT32_MAX) PO_CVT(int64_t, int64, INT64_MIN, INT64_MAX)
PO_CVT(uint8_t, uint8, 0, UINT8_MAX) PO_CVT(uint16_t, uint16, 0, UINT16_MAX)
PO_CVT(uint32_t, uint32, 0, UINT32_MAX) PO_CVT(uint64_t, uint64, 0, UINT64_MAX)
PO_FN double po_fmod_float64(double a, double b) { return a - floor(a / b) * b; }
PO_FN float po_fmod_float32(float a, float b) { return a - floorf(a / b) * b; }
#ifndef __cplusplus /* C's _Float16; CUDA's half is another type */
PO_FMINMAX(_Float16, float16)
#define PO_CVT16(D, DS) \
  PO_FN D po_cvt_##DS##_float16(_Float16 x) { return po_cvt_##DS##_float32((float)x); }
PO_CVT16(int8_t, int8) PO_CVT16(int16_t, int16) PO_CVT16(int32_t, int32)
PO_CVT16(int64_t, int64) PO_CVT16(uint8_t, uint8) PO_CVT16(uint16_t, uint16)
PO_CVT16(uint32_t, uint32) PO_CVT16(uint64_t, uint64)
PO_FN _Float16 po_fmod_float16(_Float16 a, _Float16 b) {
  return (_Float16)po_fmod_float32((float)a, (float)b); }
#endif
#ifndef __CUDACC__ /* long double (numpy's longdouble): host C only; CUDA has no such type */
PO_FMINMAX(long double, longdouble)
#define PO_CVTL(D, DS, LO, HI) \
  PO_FN D po_cvt_##DS##_longdouble(long double x) { return x != x ? (D)0 : \
    x <= (long double)(LO) ? (D)(LO) : x >= (long double)(HI) ? (D)(HI) : (D)x; }
PO_CVTL(int8_t, int8, INT8_MIN, INT8_MAX) PO_CVTL(int16_t, int16, INT16_MIN, INT16_MAX)
PO_CVTL(int32_t, int32, INT32_MIN, INT32_MAX) PO_CVTL(int64_t, int64, INT64_MIN, INT64_MAX)
PO_CVTL(uint8_t, uint8, 0, UINT8_MAX) PO_CVTL(uint16_t, uint16, 0, UINT16_MAX)
PO_CVTL(uint32_t, uint32, 0, UINT32_MAX) PO_CVTL(uint64_t, uint64, 0, UINT64_MAX)
PO_FN long double po_fmod_longdouble(long double a, long double b) {
  return a - floorl(a / b) * b; }
#endif
/* 16-bit floats kept as bits (uint16_t) by targets that cannot compute on them: loads widen
   to float exactly, stores round to nearest even (overflow to inf, NaN stays NaN). */
PO_FN uint32_t po_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
PO_FN float po_f32_from(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
PO_FN float po_bfloat16_load(uint16_t h) { return po_f32_from((uint32_t)h << 16); }
PO_FN uint16_t po_bfloat16_store(float f) {
  uint32_t u = po_f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16); }
PO_FN float po_float16_load(uint16_t h) {
  uint32_t u = (uint32_t)(h & 0x7fffu) << 13, exp = u & (0x7c00u << 13);
  u += (127u - 15u) << 23;
  if (exp == 0x7c00u << 13) u += (128u - 16u) << 23;  /* inf, NaN */
  else if (exp == 0) u = po_f32_bits(po_f32_from(u + (1u << 23)) - po_f32_from(113u << 23));
  return po_f32_from(u | ((uint32_t)(h & 0x8000u) << 16)); }
PO_FN uint16_t po_float16_store(float f) {
  uint32_t u = po_f32_bits(f), sign = u & 0x80000000u, o;
  u ^= sign;
  if (u >= (127u + 16u) << 23) o = u > 0x7f800000u ? 0x7e00u : 0x7c00u;  /* NaN, inf */
  else if (u < 113u << 23) {  /* a subnormal half or zero: float addition rounds it */
    float magic = po_f32_from(((127u - 15u) + (23u - 10u) + 1u) << 23);
    o = po_f32_bits(po_f32_from(u) + magic) - po_f32_bits(magic);
  } else o = (u + ((uint32_t)(15 - 127) << 23) + 0xfffu + ((u >> 13) & 1u)) >> 13;
  return (uint16_t)(o | (sign >> 16)); }
PO_FN float po_bfloat16_round(float f) { return po_bfloat16_load(po_bfloat16_store(f)); }
PO_FN float po_float16_round(float f) { return po_float16_load(po_float16_store(f)); }
PO_FN long po_floord(long a, long b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

/* CUDA math functions that libm lacks. */
PO_FN double po_rsqrt(double x) { return 1.0 / sqrt(x); }
PO_FN float po_rsqrtf(float x) { return 1.0f / sqrtf(x); }
PO_FN float po_fdividef(float a, float b) { return a / b; }
PO_FN double po_rcbrt(double x) { return 1.0 / cbrt(x); }
PO_FN double po_cospi(double x) { return cos(PO_PI * x); }
PO_FN double po_sinpi(double x) { return sin(PO_PI * x); }
PO_FN double po_fdivide(double a, double b) { return a / b; }
PO_FN double po_rhypot(double a, double b) { return 1.0 / hypot(a, b); }
PO_FN double po_norm3d(double a, double b, double c) { return sqrt(a*a + b*b + c*c); }
PO_FN double po_rnorm3d(double a, double b, double c) { return 1.0 / po_norm3d(a, b, c); }
PO_FN double po_norm4d(double a, double b, double c, double d) {
  return sqrt(a*a + b*b + c*c + d*d); }
PO_FN double po_rnorm4d(double a, double b, double c, double d) {
  return 1.0 / po_norm4d(a, b, c, d); }
PO_FN double po_normcdf(double x) { return 0.5 * erfc(-x / sqrt(2.0)); }
PO_FN double po_erfcx(double x) {
  if (x < 25.0) return exp(x * x) * erfc(x);
  double r = 1.0 / (x * x); /* asymptotic series: exp(x^2) erfc(x) ~ 1/(x sqrt(pi)) (...) */
  return (1.0 - 0.5 * r * (1.0 - 1.5 * r * (1.0 - 2.5 * r))) / (x * sqrt(PO_PI)); }
PO_FN double po_erfinv(double y) {
  if (y <= -1.0) return y == -1.0 ? -INFINITY : NAN;
  if (y >= 1.0) return y == 1.0 ? INFINITY : NAN;
  double w = -log((1.0 - y) * (1.0 + y)), x; /* Giles' approximation, then Newton steps */
  if (w < 5.0) { w -= 2.5; x = 2.81022636e-08; x = 3.43273939e-07 + x*w; x = -3.5233877e-06 + x*w;
    x = -4.39150654e-06 + x*w; x = 0.00021858087 + x*w; x = -0.00125372503 + x*w;
    x = -0.00417768164 + x*w; x = 0.246640727 + x*w; x = 1.50140941 + x*w; }
  else { w = sqrt(w) - 3.0; x = -0.000200214257; x = 0.000100950558 + x*w;
    x = 0.00134934322 + x*w; x = -0.00367342844 + x*w; x = 0.00573950773 + x*w;
    x = -0.0076224613 + x*w; x = 0.00943887047 + x*w; x = 1.00167406 + x*w;
    x = 2.83297682 + x*w; }
  x *= y;
  for (int k = 0; k < 2; k++) x -= (erf(x) - y) / (2.0 / sqrt(PO_PI) * exp(-x * x));
  return x; }
PO_FN double po_erfcinv(double y) { return po_erfinv(1.0 - y); }
PO_FN double po_normcdfinv(double p) { return -sqrt(2.0) * po_erfcinv(2.0 * p); }
PO_FN double po_cyl_bessel_i0(double x) {
  double t = 1.0, s = 1.0, q = 0.25 * x * x;
  for (int k = 1; k < 1000 && t > 1e-17 * s; k++) { t *= q / ((double)k * k); s += t; }
  return s; }
PO_FN double po_cyl_bessel_i1(double x) {
  double t = 0.5 * x, s = t, q = 0.25 * x * x;
  for (int k = 1; k < 1000 && fabs(t) > 1e-17 * fabs(s); k++) {
    t *= q / ((double)k * (k + 1)); s += t; }
  return s; }
"""
