int polyopt_matmul(void **bufs, const long *dims, long *err) {
  const float *restrict t_A = (const float *)bufs[0];
  const float *restrict t_B = (const float *)bufs[1];
  float *restrict t_C = (float *)bufs[2];
  const long e_A_0 = 64L;
  const long e_A_1 = 32L;
  const long e_B_0 = 32L;
  const long e_B_1 = 48L;
  const long e_C_0 = 64L;
  const long e_C_1 = 48L;
#pragma omp parallel for
  for (long c0 = 0L; c0 <= 63L; c0 += 1L) {
    for (long c1 = 0L; c1 <= 47L; c1 += 1L) {
      { /* C_0_init */
        const long i_m = c0;
        const long i_n = c1;
        t_C[((i_m) * e_C_1 + (i_n))] = 0.0f;
      }
      for (long c2 = 0L; c2 <= 31L; c2 += 1L) {
        { /* C_0 */
          const long i_m = c0;
          const long i_n = c1;
          const long i_r_k = c2;
          t_C[((i_m) * e_C_1 + (i_n))] = ((float)(t_C[((i_m) * e_C_1 + (i_n))] + ((float)(t_A[((i_m) * e_A_1 + (i_r_k))] * t_B[((i_r_k) * e_B_1 + (i_n))]))));
        }
      }
    }
  }
  (void)dims; (void)err;
  return 0;
}
