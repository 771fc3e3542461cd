"""Vector math for C kernels: transcendental builtins inside ``omp simd`` loops vectorize.

A loop that calls scalar ``tanhf`` runs one element per call; GCC vectorizes it only when
the function has a vector variant. Two sources, in order:

- glibc's libmvec (x86-64): the prelude declares the functions it has ``simd``, and the
  compiler links ``-lmvec`` (``polyopt.runtime.compiler``). exp, log, sin, cos and pow are
  there since glibc 2.22; the others in :data:`MVEC_235` since 2.35.
- otherwise polyopt's own float32 exp, log, tanh and erf (:data:`OWN`), defined below:
  branch-free, computed in double (so range reduction, denormal results and rounding need
  no special cases) and rounded once to float, inlined by GCC into the vectorized loop.
  float64 and the other functions stay scalar libm calls then.

fmax and fmin (a ReLU is ``fmax(x, 0)``) are always polyopt's own, for float and double:
GCC vectorizes no loop that calls libm's (their NaN rule has no single x86 instruction), and
a select does.

The measured accuracy of each (max ULP error against float64, over the whole float range)
is in the README's "Arithmetic semantics" and checked by tests/codegen/test_vector_math.py.
This is C only: CUDA kernels and the CUDA emulator keep CUDA's math library. Compiling with
``-DPOLYOPT_SCALAR_MATH`` turns all of it off (scalar libm calls, as before), and
``-DPOLYOPT_OWN_MATH`` leaves libmvec out, as on a system without it (tests).
"""

from __future__ import annotations

# libmvec's functions, by the glibc release that added them (each also has a float variant).
MVEC_222 = ("exp", "log", "sin", "cos", "pow")
MVEC_235 = ("tanh", "erf", "expm1", "log1p", "exp2", "log2", "log10")
MVEC = MVEC_222 + MVEC_235
# polyopt's own float32 implementations, used where libmvec lacks the function.
OWN = ("exp", "log", "tanh", "erf")


def no_builtin_flags() -> tuple[str, ...]:
    """GCC flags that keep libmvec's functions from being treated as builtins: GCC would
    otherwise scalarize their calls (its own vectorization of builtins has no AVX-512 exp)
    instead of calling libmvec's simd variants."""
    return tuple(f"-fno-builtin-{f}{s}" for f in MVEC for s in ("", "f"))


def _declarations(names: tuple[str, ...]) -> str:
    return " ".join("PO_MVEC2(pow)" if f == "pow" else f"PO_MVEC({f})" for f in names)


# Declared pure (we compile with -fno-math-errno), so GCC may also share repeated calls and
# hoist loop-invariant ones.
_MVEC_C = f"""
#if defined(POLYOPT_LIBMVEC) && !defined(POLYOPT_SCALAR_MATH) && !defined(POLYOPT_OWN_MATH) \\
    && defined(__GNUC__) && !defined(__clang__)
#define PO_SIMD __attribute__((const, simd("notinbranch")))
#define PO_MVEC(F) float F##f(float) PO_SIMD; double F(double) PO_SIMD;
#define PO_MVEC2(F) float F##f(float, float) PO_SIMD; double F(double, double) PO_SIMD;
#define PO_VECTOR_EXP_LOG
{_declarations(MVEC_222)}
#if defined(__GLIBC_PREREQ)
#if __GLIBC_PREREQ(2, 35)
#define PO_VECTOR_TANH_ERF
{_declarations(MVEC_235)}
#endif
#endif
#endif
"""

# exp(d) for a double d in [-150, 129] (callers clamp: beyond, the float result is 0 or inf):
# d = n ln2 + r with |r| <= ln2/2, 2^n built in the exponent bits (n read from the low bits
# of d/ln2 + 1.5*2^52, which needs no float-to-integer conversion), e^r by its Taylor
# series to r^8 (relative error < 2.1e-10, far below a float's 6e-8).
_OWN_C = r"""
#if !defined(POLYOPT_SCALAR_MATH)
PO_FN double po_vm_exp(double d) {
  double t = d * 0x1.71547652b82fep0 + 0x1.8p52, n = t - 0x1.8p52;
  double r = (d - n * 0x1.62e42fee00000p-1) - n * 0x1.a39ef35793c76p-33;
  double p = 1.0 + r * (1.0 + r * (1.0 / 2 + r * (1.0 / 6 + r * (1.0 / 24 + r * (1.0 / 120
      + r * (1.0 / 720 + r * (1.0 / 5040 + r * (1.0 / 40320))))))));
  uint64_t u; memcpy(&u, &t, 8); u = (u + 1023u) << 52;
  double s; memcpy(&s, &u, 8);
  return p * s; }
#ifndef PO_VECTOR_EXP_LOG
#pragma omp declare simd notinbranch
PO_FN float po_expf(float x) {
  return (float)po_vm_exp(x < -150.0f ? -150.0f : x > 129.0f ? 129.0f : x); }
/* log(x) = e ln2 + log(m), m in [sqrt(1/2), sqrt(2)); log(m) = 2 atanh(f / (2 + f)), f = m - 1,
   by its series (relative error < 5e-11). Denormals are scaled into the normal range. */
#pragma omp declare simd notinbranch
PO_FN float po_logf(float x) {
  bool sub = x < 0x1p-126f;
  uint32_t u = po_f32_bits(x * (sub ? 0x1p25f : 1.0f));
  int32_t e = (int32_t)(u >> 23) - (sub ? 127 + 25 : 127);
  float m = po_f32_from((u & 0x7fffffu) | 0x3f800000u);
  bool big = m > 1.41421356f;
  double f = (double)(m * (big ? 0.5f : 1.0f)) - 1.0, z = f / (2.0 + f), w = z * z;
  double l = (e + big) * 0x1.62e42fefa39efp-1 + 2.0 * z * (1.0 + w * (1.0 / 3 + w * (1.0 / 5
      + w * (1.0 / 7 + w * (1.0 / 9 + w * (1.0 / 11 + w * (1.0 / 13)))))));
  float r = (float)l;
  return x == 0.0f ? -INFINITY : !(x >= 0.0f) ? NAN : x == INFINITY ? x : r; }
#define expf po_expf
#define logf po_logf
#endif
#ifndef PO_VECTOR_TANH_ERF
/* tanh: an odd Taylor polynomial below 1/16 (relative error < 1e-14), (e - 1) / (e + 1) with
   e = exp(2|x|) above; the sign restored last, so tanh(-0) = -0. */
#pragma omp declare simd notinbranch
PO_FN float po_tanhf(float x) {
  double d = fabs((double)x), w = d * d, e = po_vm_exp(d > 64.0 ? 128.0 : 2.0 * d);
  double small = d + d * w * (-1.0 / 3 + w * (2.0 / 15 + w * (-17.0 / 315 + w * (62.0 / 2835))));
  return copysignf((float)(d < 0.0625 ? small : (e - 1.0) / (e + 1.0)), x); }
/* erf: x P(x^2) below 1, 1 - exp(-x^2) Q(1/x) on [1, 4] (Q fits erfcx, relative error
   3e-9), and 1 beyond (erf(4) rounds to 1 in float). Chebyshev fits, in double. */
#pragma omp declare simd notinbranch
PO_FN float po_erff(float x) {
  double d = fabs((double)x), w = d * d;
  double small = d * (1.128379167094694 + w * (-0.3761263888987573 + w * (0.11283791313590968
      + w * (-0.026866133629947664 + w * (0.005223785018961085 + w * (-0.0008542670743534182
      + w * (0.00011956948150857603 + w * (-1.3911705142503937e-05
      + w * 1.05952762376286e-06))))))));
  double c = d < 1.0 ? 1.0 : d > 4.0 ? 4.0 : d, t = 1.0 / c;
  double q = 3.4381221482360225e-05 + t * (0.5635483219202174 + t * (0.004533485927823655
      + t * (-0.2929573709433486 + t * (-0.043866033050876885 + t * (0.8440410696513723
      + t * (-1.4421421936624035 + t * (1.343036181801787 + t * (-0.7592916963433451
      + t * (0.24581342652964014 + t * -0.035165997604543635)))))))));
  double big = 1.0 - po_vm_exp(-c * c) * q;
  return copysignf((float)(d < 1.0 ? small : big), x); }
/* Kernel code after the prelude calls these for the libm names. */
#define tanhf po_tanhf
#define erff po_erff
#endif
#endif
"""

# C99's fmax/fmin as selects: the other operand when one is NaN, and for equal operands
# (+0 against -0) the second, as glibc's x86-64 fmaxf/fminf (maxss/minss) return.
_MINMAX_C = r"""
#if !defined(POLYOPT_SCALAR_MATH)
#define PO_C99_FMAXMIN(T, S) \
  PO_FN T po_fmax##S(T a, T b) { return (a > b || b != b) ? a : b; } \
  PO_FN T po_fmin##S(T a, T b) { return (a < b || b != b) ? a : b; }
PO_C99_FMAXMIN(float, f) PO_C99_FMAXMIN(double, )
#define fmaxf po_fmaxf
#define fminf po_fminf
#define fmax po_fmax
#define fmin po_fmin
#endif
"""

C_PRELUDE = "\n/* Vector math (polyopt.codegen.vmath). */" + _MVEC_C + _OWN_C + _MINMAX_C
