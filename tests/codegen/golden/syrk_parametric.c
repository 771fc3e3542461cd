int polyopt_polybench_syrk(void **bufs, const long *dims, long *err) {
  const float *restrict t_alpha = (const float *)bufs[0];
  const float *restrict t_beta = (const float *)bufs[1];
  const float *restrict t_A = (const float *)bufs[2];
  const float *restrict t_C = (const float *)bufs[3];
  float *restrict t_Co = (float *)bufs[4];
  const long s_N = dims[0];
  const long s_M = dims[1];
  const long e_A_0 = dims[2];
  const long e_A_1 = dims[3];
  const long e_C_0 = dims[4];
  const long e_C_1 = dims[5];
  const long e_Co_0 = dims[6];
  const long e_Co_1 = dims[7];
#pragma omp parallel for
  for (long c0 = 0L; c0 < (s_N - 1L); c0 += 1L) {  /* i */
#pragma omp simd simdlen(16)
    for (long c1 = c0 + 1L; c1 < s_N; c1 += 1L) {  /* j */
      { /* Co_0 */
        const long i_i = c0;
        const long i_j = c1;
        t_Co[((i_i) * e_Co_1 + (i_j))] = t_C[((i_i) * e_C_1 + (i_j))];
      }
    }
  }
#pragma omp parallel for
  for (long c0 = 0L; c0 < s_N; c0 += 1L) {  /* i2 */
    {
      const float po_h0 = t_beta[0];
#pragma omp simd simdlen(8)
    for (long c1 = 0L; c1 <= c0; c1 += 1L) {  /* j2 */
      { /* Co_1 */
        const long i_i = c0;
        const long i_j = c1;
        t_Co[((i_i) * e_Co_1 + (i_j))] = ((float)(po_h0 * t_C[((i_i) * e_C_1 + (i_j))]));
      }
    }
    }
  }
  for (long c0 = 0L; c0 <= po_floord((s_M - 1L), 88L); c0 += 1L) {  /* k_o */
#pragma omp parallel for
    for (long c1 = 0L; c1 <= po_floord((s_N - 1L), 32L); c1 += 1L) {  /* j22_o */
      for (long c2 = (2L * c1) + ((2L * c1) / 7L); c2 <= ((s_N - 1L) / 14L); c2 += 1L) {  /* i22_o */
        for (long c3 = 0L; c3 <= po_min_int64(87L, ((s_M - (88L * c0)) - 1L)); c3 += 1L) {  /* k_i */
          for (long c4 = po_max_int64(0L, ((32L * c1) - (14L * c2))); c4 <= po_min_int64(13L, ((s_N - (14L * c2)) - 1L)); c4 += 1L) {  /* i22_i */
            {
              const float po_h0 = t_alpha[0];
              const float po_h1 = t_A[(((14L * c2 + c4)) * e_A_1 + ((88L * c0 + c3)))];
#pragma omp simd
            for (long c5 = 0L; c5 <= po_min_int64(31L, (((-32L * c1) + (14L * c2)) + c4)); c5 += 1L) {  /* j22_i */
              { /* Co_2 */
                const long i_i = (14L * c2) + c4;
                const long i_j = (32L * c1) + c5;
                const long i_r_k = (88L * c0) + c3;
                t_Co[((i_i) * e_Co_1 + (i_j))] = ((float)(t_Co[((i_i) * e_Co_1 + (i_j))] + ((float)(((float)(po_h0 * po_h1)) * t_A[((i_j) * e_A_1 + (i_r_k))]))));
              }
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
