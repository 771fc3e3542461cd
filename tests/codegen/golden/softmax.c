int polyopt_softmax(void **bufs, const long *dims, long *err) {
  const float *restrict t_X = (const float *)bufs[0];
  float *restrict t_Y = (float *)bufs[1];
  float *restrict t_mx = (float *)bufs[2];
  float *restrict t_den = (float *)bufs[3];
  const long e_X_0 = 16L;
  const long e_X_1 = 10L;
  const long e_Y_0 = 16L;
  const long e_Y_1 = 10L;
  const long e_mx_0 = 16L;
  const long e_den_0 = 16L;
#pragma omp parallel for simd
  for (long c0 = 0L; c0 <= 15L; c0 += 1L) {  /* n2 */
    { /* mx_0_init */
      const long i_n = c0;
      t_mx[(i_n)] = (-INFINITY);
    }
  }
#pragma omp parallel for
  for (long c0 = 0L; c0 <= 15L; c0 += 1L) {  /* n */
    for (long c1 = 0L; c1 <= 9L; c1 += 1L) {  /* d */
      { /* mx_0 */
        const long i_n = c0;
        const long i_r_d = c1;
        t_mx[(i_n)] = po_max_float32(t_mx[(i_n)], t_X[((i_n) * e_X_1 + (i_r_d))]);
      }
    }
  }
#pragma omp parallel for simd
  for (long c0 = 0L; c0 <= 15L; c0 += 1L) {  /* n3 */
    { /* den_0_init */
      const long i_n = c0;
      t_den[(i_n)] = 0.0f;
    }
  }
#pragma omp parallel for
  for (long c0 = 0L; c0 <= 15L; c0 += 1L) {  /* n4 */
    for (long c1 = 9L; c1 <= 18L; c1 += 1L) {  /* d2 */
      { /* den_0 */
        const long i_n = c0;
        const long i_r_d = c1 - 9L;
        t_den[(i_n)] = ((float)(t_den[(i_n)] + ((float)expf(((float)(((float)(t_X[((i_n) * e_X_1 + (i_r_d))] - t_mx[(i_n)]))))))));
      }
    }
  }
#pragma omp parallel for
  for (long c0 = 0L; c0 <= 15L; c0 += 1L) {  /* n5 */
#pragma omp simd
    for (long c1 = 18L; c1 <= 27L; c1 += 1L) {  /* d3 */
      { /* Y_0 */
        const long i_n = c0;
        const long i_d = c1 - 18L;
        t_Y[((i_n) * e_Y_1 + (i_d))] = ((float)(((float)expf(((float)(((float)(t_X[((i_n) * e_X_1 + (i_d))] - t_mx[(i_n)])))))) / t_den[(i_n)]));
      }
    }
  }
  (void)dims; (void)err;
  return 0;
}
