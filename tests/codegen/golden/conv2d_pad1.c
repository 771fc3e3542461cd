
#define _GNU_SOURCE
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PO_PI 3.14159265358979323846

/* Floor division and non-negative modulo (TC semantics); division by zero gives 0. */
#define PO_INT_OPS(T, S) \
  static inline T po_div_##S(T a, T b) { \
    if (b == 0) return 0; T q = a / b; return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q; } \
  static inline T po_mod_##S(T a, T b) { \
    if (b == 0) return 0; T r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }
#define PO_UINT_OPS(T, S) \
  static inline T po_div_##S(T a, T b) { return b == 0 ? 0 : a / b; } \
  static inline T po_mod_##S(T a, T b) { return b == 0 ? 0 : a % b; }
#define PO_MINMAX(T, S) \
  static inline T po_min_##S(T a, T b) { return b < a ? b : a; } \
  static inline T po_max_##S(T a, T b) { return b > a ? b : a; }
PO_INT_OPS(int8_t, int8) PO_INT_OPS(int16_t, int16) PO_INT_OPS(int32_t, int32)
PO_INT_OPS(int64_t, int64)
PO_UINT_OPS(bool, bool) PO_UINT_OPS(uint8_t, uint8) PO_UINT_OPS(uint16_t, uint16)
PO_UINT_OPS(uint32_t, uint32) PO_UINT_OPS(uint64_t, uint64)
PO_MINMAX(bool, bool) PO_MINMAX(int8_t, int8) PO_MINMAX(int16_t, int16)
PO_MINMAX(int32_t, int32) PO_MINMAX(int64_t, int64) PO_MINMAX(uint8_t, uint8)
PO_MINMAX(uint16_t, uint16) PO_MINMAX(uint32_t, uint32) PO_MINMAX(uint64_t, uint64)
PO_MINMAX(_Float16, float16) PO_MINMAX(float, float32) PO_MINMAX(double, float64)
static inline double po_fmod_float64(double a, double b) { return a - floor(a / b) * b; }
static inline float po_fmod_float32(float a, float b) { return a - floorf(a / b) * b; }
static inline _Float16 po_fmod_float16(_Float16 a, _Float16 b) {
  return (_Float16)po_fmod_float32((float)a, (float)b); }
static inline long po_floord(long a, long b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

/* CUDA math functions that libm lacks. */
static inline double po_rsqrt(double x) { return 1.0 / sqrt(x); }
static inline double po_rcbrt(double x) { return 1.0 / cbrt(x); }
static inline double po_cospi(double x) { return cos(PO_PI * x); }
static inline double po_sinpi(double x) { return sin(PO_PI * x); }
static inline double po_fdivide(double a, double b) { return a / b; }
static inline double po_rhypot(double a, double b) { return 1.0 / hypot(a, b); }
static inline double po_norm3d(double a, double b, double c) { return sqrt(a*a + b*b + c*c); }
static inline double po_rnorm3d(double a, double b, double c) { return 1.0 / po_norm3d(a, b, c); }
static inline double po_norm4d(double a, double b, double c, double d) {
  return sqrt(a*a + b*b + c*c + d*d); }
static inline double po_rnorm4d(double a, double b, double c, double d) {
  return 1.0 / po_norm4d(a, b, c, d); }
static inline double po_normcdf(double x) { return 0.5 * erfc(-x / sqrt(2.0)); }
static inline double po_erfcx(double x) {
  if (x < 25.0) return exp(x * x) * erfc(x);
  double r = 1.0 / (x * x); /* asymptotic series: exp(x^2) erfc(x) ~ 1/(x sqrt(pi)) (...) */
  return (1.0 - 0.5 * r * (1.0 - 1.5 * r * (1.0 - 2.5 * r))) / (x * sqrt(PO_PI)); }
static inline double po_erfinv(double y) {
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
static inline double po_erfcinv(double y) { return po_erfinv(1.0 - y); }
static inline double po_normcdfinv(double p) { return -sqrt(2.0) * po_erfcinv(2.0 * p); }
static inline double po_cyl_bessel_i0(double x) {
  double t = 1.0, s = 1.0, q = 0.25 * x * x;
  for (int k = 1; k < 1000 && t > 1e-17 * s; k++) { t *= q / ((double)k * k); s += t; }
  return s; }
static inline double po_cyl_bessel_i1(double x) {
  double t = 0.5 * x, s = t, q = 0.25 * x * x;
  for (int k = 1; k < 1000 && fabs(t) > 1e-17 * fabs(s); k++) {
    t *= q / ((double)k * (k + 1)); s += t; }
  return s; }

int polyopt_conv2d(void **bufs, const long *dims, long *err) {
  const float *restrict t_I = (const float *)bufs[0];
  const float *restrict t_Wt = (const float *)bufs[1];
  float *restrict t_O = (float *)bufs[2];
  const long e_I_0 = 1L;
  const long e_I_1 = 3L;
  const long e_I_2 = 8L;
  const long e_I_3 = 8L;
  const long e_Wt_0 = 4L;
  const long e_Wt_1 = 3L;
  const long e_Wt_2 = 3L;
  const long e_Wt_3 = 3L;
  const long e_O_0 = 1L;
  const long e_O_1 = 4L;
  const long e_O_2 = 8L;
  const long e_O_3 = 8L;
#pragma omp parallel for
  for (long c0 = 0L; c0 <= 3L; c0 += 1L) {
    for (long c1 = 0L; c1 <= 7L; c1 += 1L) {
      for (long c2 = 0L; c2 <= 7L; c2 += 1L) {
        { /* O_0_init */
          const long i_n = 0L;
          const long i_f = c0;
          const long i_h = c1;
          const long i_w = c2;
          t_O[((((i_n) * e_O_1 + (i_f)) * e_O_2 + (i_h)) * e_O_3 + (i_w))] = 0.0f;
        }
        for (long c3 = 0L; c3 <= 2L; c3 += 1L) {
          for (long c4 = po_max_int64(0L, ((-c1) + 1L)); c4 <= po_min_int64(2L, ((-c1) + 8L)); c4 += 1L) {
            for (long c5 = po_max_int64(0L, ((-c2) + 1L)); c5 <= po_min_int64(2L, ((-c2) + 8L)); c5 += 1L) {
              { /* O_0 */
                const long i_n = 0L;
                const long i_f = c0;
                const long i_h = c1;
                const long i_w = c2;
                const long i_r_c = c3;
                const long i_r_kh = c4;
                const long i_r_kw = c5;
                t_O[((((i_n) * e_O_1 + (i_f)) * e_O_2 + (i_h)) * e_O_3 + (i_w))] = ((float)(t_O[((((i_n) * e_O_1 + (i_f)) * e_O_2 + (i_h)) * e_O_3 + (i_w))] + ((float)(t_I[((((i_n) * e_I_1 + (i_r_c)) * e_I_2 + ((((1L * i_h) + (1L * i_r_kh)) - 1L))) * e_I_3 + ((((1L * i_w) + (1L * i_r_kw)) - 1L)))] * t_Wt[((((i_f) * e_Wt_1 + (i_r_c)) * e_Wt_2 + (i_r_kh)) * e_Wt_3 + (i_r_kw))]))));
              }
            }
          }
        }
        for (long c3 = 2L; c3 <= 4L; c3 += 1L) {
          if (c1 == 0L) {
            for (long c5 = 0L; c5 <= 2L; c5 += 1L) {
              { /* O_0_border */
                const long i_n = 0L;
                const long i_f = c0;
                const long i_h = 0L;
                const long i_w = c2;
                const long i_r_c = c3 - 2L;
                const long i_r_kh = 0L;
                const long i_r_kw = c5;
                t_O[((((i_n) * e_O_1 + (i_f)) * e_O_2 + (i_h)) * e_O_3 + (i_w))] = ((float)(t_O[((((i_n) * e_O_1 + (i_f)) * e_O_2 + (i_h)) * e_O_3 + (i_w))] + ((float)(((0 <= i_n && i_n < e_I_0 && 0 <= i_r_c && i_r_c < e_I_1 && 0 <= (((1L * i_h) + (1L * i_r_kh)) - 1L) && (((1L * i_h) + (1L * i_r_kh)) - 1L) < e_I_2 && 0 <= (((1L * i_w) + (1L * i_r_kw)) - 1L) && (((1L * i_w) + (1L * i_r_kw)) - 1L) < e_I_3) ? t_I[((((i_n) * e_I_1 + (i_r_c)) * e_I_2 + ((((1L * i_h) + (1L * i_r_kh)) - 1L))) * e_I_3 + ((((1L * i_w) + (1L * i_r_kw)) - 1L)))] : 0.0f) * t_Wt[((((i_f) * e_Wt_1 + (i_r_c)) * e_Wt_2 + (i_r_kh)) * e_Wt_3 + (i_r_kw))]))));
              }
            }
          }
          if (c2 == 0L) {
            for (long c4 = po_max_int64(2L, ((-c1) + 3L)); c4 <= po_min_int64(4L, ((-c1) + 10L)); c4 += 1L) {
              { /* O_0_border */
                const long i_n = 0L;
                const long i_f = c0;
                const long i_h = c1;
                const long i_w = 0L;
                const long i_r_c = c3 - 2L;
                const long i_r_kh = c4 - 2L;
                const long i_r_kw = 0L;
                t_O[((((i_n) * e_O_1 + (i_f)) * e_O_2 + (i_h)) * e_O_3 + (i_w))] = ((float)(t_O[((((i_n) * e_O_1 + (i_f)) * e_O_2 + (i_h)) * e_O_3 + (i_w))] + ((float)(((0 <= i_n && i_n < e_I_0 && 0 <= i_r_c && i_r_c < e_I_1 && 0 <= (((1L * i_h) + (1L * i_r_kh)) - 1L) && (((1L * i_h) + (1L * i_r_kh)) - 1L) < e_I_2 && 0 <= (((1L * i_w) + (1L * i_r_kw)) - 1L) && (((1L * i_w) + (1L * i_r_kw)) - 1L) < e_I_3) ? t_I[((((i_n) * e_I_1 + (i_r_c)) * e_I_2 + ((((1L * i_h) + (1L * i_r_kh)) - 1L))) * e_I_3 + ((((1L * i_w) + (1L * i_r_kw)) - 1L)))] : 0.0f) * t_Wt[((((i_f) * e_Wt_1 + (i_r_c)) * e_Wt_2 + (i_r_kh)) * e_Wt_3 + (i_r_kw))]))));
              }
            }
          } else {
            if (c2 == 7L) {
              for (long c4 = po_max_int64(2L, ((-c1) + 3L)); c4 <= po_min_int64(4L, ((-c1) + 10L)); c4 += 1L) {
                { /* O_0_border */
                  const long i_n = 0L;
                  const long i_f = c0;
                  const long i_h = c1;
                  const long i_w = 7L;
                  const long i_r_c = c3 - 2L;
                  const long i_r_kh = c4 - 2L;
                  const long i_r_kw = 2L;
                  t_O[((((i_n) * e_O_1 + (i_f)) * e_O_2 + (i_h)) * e_O_3 + (i_w))] = ((float)(t_O[((((i_n) * e_O_1 + (i_f)) * e_O_2 + (i_h)) * e_O_3 + (i_w))] + ((float)(((0 <= i_n && i_n < e_I_0 && 0 <= i_r_c && i_r_c < e_I_1 && 0 <= (((1L * i_h) + (1L * i_r_kh)) - 1L) && (((1L * i_h) + (1L * i_r_kh)) - 1L) < e_I_2 && 0 <= (((1L * i_w) + (1L * i_r_kw)) - 1L) && (((1L * i_w) + (1L * i_r_kw)) - 1L) < e_I_3) ? t_I[((((i_n) * e_I_1 + (i_r_c)) * e_I_2 + ((((1L * i_h) + (1L * i_r_kh)) - 1L))) * e_I_3 + ((((1L * i_w) + (1L * i_r_kw)) - 1L)))] : 0.0f) * t_Wt[((((i_f) * e_Wt_1 + (i_r_c)) * e_Wt_2 + (i_r_kh)) * e_Wt_3 + (i_r_kw))]))));
                }
              }
            }
          }
          if (c1 == 7L) {
            for (long c5 = 0L; c5 <= 2L; c5 += 1L) {
              { /* O_0_border */
                const long i_n = 0L;
                const long i_f = c0;
                const long i_h = 7L;
                const long i_w = c2;
                const long i_r_c = c3 - 2L;
                const long i_r_kh = 2L;
                const long i_r_kw = c5;
                t_O[((((i_n) * e_O_1 + (i_f)) * e_O_2 + (i_h)) * e_O_3 + (i_w))] = ((float)(t_O[((((i_n) * e_O_1 + (i_f)) * e_O_2 + (i_h)) * e_O_3 + (i_w))] + ((float)(((0 <= i_n && i_n < e_I_0 && 0 <= i_r_c && i_r_c < e_I_1 && 0 <= (((1L * i_h) + (1L * i_r_kh)) - 1L) && (((1L * i_h) + (1L * i_r_kh)) - 1L) < e_I_2 && 0 <= (((1L * i_w) + (1L * i_r_kw)) - 1L) && (((1L * i_w) + (1L * i_r_kw)) - 1L) < e_I_3) ? t_I[((((i_n) * e_I_1 + (i_r_c)) * e_I_2 + ((((1L * i_h) + (1L * i_r_kh)) - 1L))) * e_I_3 + ((((1L * i_w) + (1L * i_r_kw)) - 1L)))] : 0.0f) * t_Wt[((((i_f) * e_Wt_1 + (i_r_c)) * e_Wt_2 + (i_r_kh)) * e_Wt_3 + (i_r_kw))]))));
              }
            }
          }
        }
      }
    }
  }
  (void)dims; (void)err;
  return 0;
}
