/* GCC 12.2's loop vectorizer (Debian 12, -O3; -O2 in 4 of 60 shapes) gets a diagonal
   recurrence wrong: S(i,j) = 0.46 * S(i-1,j-1), borders 0.25, in program order. After the j
   loop is peeled completely (or written out), it vectorizes the i loop, which carries the
   dependence, and S comes out 0.0529 or garbage where 0.25 * 0.46^min(i,j) is right.
   These are polyopt's kernels for it (polyopt.compile(..., schedule="program-order",
   sizes=...)): the loop that carries the dependence ends in the volatile asm that keeps the
   vectorizer off it (codegen.dialect.Dialect.carried_loop_guard). Without that line the
   compiler must still get it right, or polyopt must not use the compiler as configured.
   main exits 0 when every element is right, 1 otherwise. No undefined behaviour. */
#include <math.h>
#include <stdio.h>

static int diag_8x16(void **bufs, const long *dims, long *err) {
  const float *restrict t_B = (const float *)bufs[0];
  float *restrict t_S = (float *)bufs[1];
  const long e_B_0 = 8L;
  const long e_B_1 = 16L;
  const long e_S_0 = 8L;
  const long e_S_1 = 16L;
  for (long c0 = 0L; c0 <= 15L; c0 += 1L) {  /* j */
    { /* S_0 */
      const long i_i = 0L;
      const long i_j = c0;
      t_S[((i_i) * e_S_1 + (i_j))] = t_B[((i_i) * e_B_1 + (i_j))];
    }
  }
  for (long c0 = 1L; c0 <= 7L; c0 += 1L) {  /* i */
    { /* S_1 */
      const long i_i = c0;
      const long i_j = 0L;
      t_S[((i_i) * e_S_1 + (i_j))] = t_B[((i_i) * e_B_1 + (i_j))];
    }
  }
  for (long c0 = 1L; c0 <= 7L; c0 += 1L) {  /* i2 */
    for (long c1 = 1L; c1 <= 15L; c1 += 1L) {  /* j2 */
      { /* S_2 */
        const long i_i = c0;
        const long i_j = c1;
        t_S[((i_i) * e_S_1 + (i_j))] = ((float)(0.46f * t_S[(((i_i - 1L)) * e_S_1 + ((i_j - 1L)))]));
      }
    }
    __asm__ volatile("");  /* carries a dependence */
  }
  (void)dims; (void)err;
  return 0;
}

static int diag_12x13(void **bufs, const long *dims, long *err) {
  const float *restrict t_B = (const float *)bufs[0];
  float *restrict t_S = (float *)bufs[1];
  const long e_B_0 = 12L;
  const long e_B_1 = 13L;
  const long e_S_0 = 12L;
  const long e_S_1 = 13L;
  for (long c0 = 0L; c0 <= 12L; c0 += 1L) {  /* j */
    { /* S_0 */
      const long i_i = 0L;
      const long i_j = c0;
      t_S[((i_i) * e_S_1 + (i_j))] = t_B[((i_i) * e_B_1 + (i_j))];
    }
  }
  for (long c0 = 1L; c0 <= 11L; c0 += 1L) {  /* i */
    { /* S_1 */
      const long i_i = c0;
      const long i_j = 0L;
      t_S[((i_i) * e_S_1 + (i_j))] = t_B[((i_i) * e_B_1 + (i_j))];
    }
  }
  for (long c0 = 1L; c0 <= 11L; c0 += 1L) {  /* i2 */
    for (long c1 = 1L; c1 <= 12L; c1 += 1L) {  /* j2 */
      { /* S_2 */
        const long i_i = c0;
        const long i_j = c1;
        t_S[((i_i) * e_S_1 + (i_j))] = ((float)(0.46f * t_S[(((i_i - 1L)) * e_S_1 + ((i_j - 1L)))]));
      }
    }
    __asm__ volatile("");  /* carries a dependence */
  }
  (void)dims; (void)err;
  return 0;
}

static int diag_8x3(void **bufs, const long *dims, long *err) {
  const float *restrict t_B = (const float *)bufs[0];
  float *restrict t_S = (float *)bufs[1];
  const long e_B_0 = 8L;
  const long e_B_1 = 3L;
  const long e_S_0 = 8L;
  const long e_S_1 = 3L;
  for (long c0 = 0L; c0 <= 2L; c0 += 1L) {  /* j */
    { /* S_0 */
      const long i_i = 0L;
      const long i_j = c0;
      t_S[((i_i) * e_S_1 + (i_j))] = t_B[((i_i) * e_B_1 + (i_j))];
    }
  }
  for (long c0 = 1L; c0 <= 7L; c0 += 1L) {  /* i */
    { /* S_1 */
      const long i_i = c0;
      const long i_j = 0L;
      t_S[((i_i) * e_S_1 + (i_j))] = t_B[((i_i) * e_B_1 + (i_j))];
    }
  }
  for (long c0 = 1L; c0 <= 7L; c0 += 1L) {  /* i2 */
    for (long c1 = 1L; c1 <= 2L; c1 += 1L) {  /* j2 */
      { /* S_2 */
        const long i_i = c0;
        const long i_j = c1;
        t_S[((i_i) * e_S_1 + (i_j))] = ((float)(0.46f * t_S[(((i_i - 1L)) * e_S_1 + ((i_j - 1L)))]));
      }
    }
    __asm__ volatile("");  /* carries a dependence */
  }
  (void)dims; (void)err;
  return 0;
}

static int diag_16x8(void **bufs, const long *dims, long *err) {
  const float *restrict t_B = (const float *)bufs[0];
  float *restrict t_S = (float *)bufs[1];
  const long e_B_0 = 16L;
  const long e_B_1 = 8L;
  const long e_S_0 = 16L;
  const long e_S_1 = 8L;
  for (long c0 = 0L; c0 <= 7L; c0 += 1L) {  /* j */
    { /* S_0 */
      const long i_i = 0L;
      const long i_j = c0;
      t_S[((i_i) * e_S_1 + (i_j))] = t_B[((i_i) * e_B_1 + (i_j))];
    }
  }
  for (long c0 = 1L; c0 <= 15L; c0 += 1L) {  /* i */
    { /* S_1 */
      const long i_i = c0;
      const long i_j = 0L;
      t_S[((i_i) * e_S_1 + (i_j))] = t_B[((i_i) * e_B_1 + (i_j))];
    }
  }
  for (long c0 = 1L; c0 <= 15L; c0 += 1L) {  /* i2 */
    for (long c1 = 1L; c1 <= 7L; c1 += 1L) {  /* j2 */
      { /* S_2 */
        const long i_i = c0;
        const long i_j = c1;
        t_S[((i_i) * e_S_1 + (i_j))] = ((float)(0.46f * t_S[(((i_i - 1L)) * e_S_1 + ((i_j - 1L)))]));
      }
    }
    __asm__ volatile("");  /* carries a dependence */
  }
  (void)dims; (void)err;
  return 0;
}

static int diag_64x15(void **bufs, const long *dims, long *err) {
  const float *restrict t_B = (const float *)bufs[0];
  float *restrict t_S = (float *)bufs[1];
  const long e_B_0 = 64L;
  const long e_B_1 = 15L;
  const long e_S_0 = 64L;
  const long e_S_1 = 15L;
  for (long c0 = 0L; c0 <= 14L; c0 += 1L) {  /* j */
    { /* S_0 */
      const long i_i = 0L;
      const long i_j = c0;
      t_S[((i_i) * e_S_1 + (i_j))] = t_B[((i_i) * e_B_1 + (i_j))];
    }
  }
  for (long c0 = 1L; c0 <= 63L; c0 += 1L) {  /* i */
    { /* S_1 */
      const long i_i = c0;
      const long i_j = 0L;
      t_S[((i_i) * e_S_1 + (i_j))] = t_B[((i_i) * e_B_1 + (i_j))];
    }
  }
  for (long c0 = 1L; c0 <= 63L; c0 += 1L) {  /* i2 */
    for (long c1 = 1L; c1 <= 14L; c1 += 1L) {  /* j2 */
      { /* S_2 */
        const long i_i = c0;
        const long i_j = c1;
        t_S[((i_i) * e_S_1 + (i_j))] = ((float)(0.46f * t_S[(((i_i - 1L)) * e_S_1 + ((i_j - 1L)))]));
      }
    }
    __asm__ volatile("");  /* carries a dependence */
  }
  (void)dims; (void)err;
  return 0;
}

typedef int (*kernel_fn)(void **, const long *, long *);

static int run(kernel_fn fn, long n, long m) {
  static float b[64 * 16], s[64 * 16];
  for (long x = 0; x < n * m; x++) { b[x] = 0.25f; s[x] = -1.0f; }
  void *bufs[2] = {b, s};
  long err = 0;
  fn(bufs, 0, &err);
  for (long i = 0; i < n; i++)
    for (long j = 0; j < m; j++) {
      double want = 0.25 * pow(0.46, (double)(i < j ? i : j));
      double got = s[i * m + j];
      if (!(fabs(got - want) <= 1e-6 * want)) {
        printf("S(%ld,%ld) = %g at N=%ld M=%ld, want %g\n", i, j, got, n, m, want);
        return 1;
      }
    }
  return 0;
}

int main(void) {
  int bad = 0;
  bad += run(diag_8x16, 8, 16);
  bad += run(diag_12x13, 12, 13);
  bad += run(diag_8x3, 8, 3);
  bad += run(diag_16x8, 16, 8);
  bad += run(diag_64x15, 64, 15);
  return bad != 0;
}
