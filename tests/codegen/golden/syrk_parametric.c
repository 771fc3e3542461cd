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
  for (long c0 = 0L; c0 < s_N; c0 += 1L) {  /* i */
#pragma omp simd
    for (long c1 = 0L; c1 < s_N; c1 += 1L) {  /* j */
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
#pragma omp simd
    for (long c1 = 0L; c1 <= c0; c1 += 1L) {  /* j2 */
      { /* Co_1 */
        const long i_i = c0;
        const long i_j = c1;
        t_Co[((i_i) * e_Co_1 + (i_j))] = ((float)(po_h0 * t_C[((i_i) * e_C_1 + (i_j))]));
      }
    }
    }
  }
#pragma omp parallel for
  for (long c0 = 0L; c0 < s_N; c0 += 1L) {  /* i3 */
    for (long c1 = 0L; c1 <= c0; c1 += 1L) {  /* j3 */
      { /* reduction of Co_2 */
        const long i_i = c0;
        const long i_j = c1;
        float po_acc = t_Co[((i_i) * e_Co_1 + (i_j))];
      #pragma omp simd reduction(+:po_acc)
        for (long c2 = 0L; c2 < s_M; c2 += 1L) {
          { /* Co_2 */
            const long i_r_k = c2;
            po_acc = ((float)(po_acc + ((float)(((float)(t_alpha[0] * t_A[((i_i) * e_A_1 + (i_r_k))])) * t_A[((i_j) * e_A_1 + (i_r_k))]))));
          }
        }
        t_Co[((i_i) * e_Co_1 + (i_j))] = po_acc;
      }
    }
  }
  (void)dims; (void)err;
  return 0;
}
