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
  for (long c0 = 0L; c0 <= 63L; c0 += 1L) {  /* m */
#pragma omp simd
    for (long c1 = 0L; c1 <= 47L; c1 += 1L) {  /* n */
      { /* C_0_init */
        const long i_m = c0;
        const long i_n = c1;
        t_C[((i_m) * e_C_1 + (i_n))] = 0.0f;
      }
    }
  }
  for (long c1 = 0L; c1 <= 1L; c1 += 1L) {  /* n2_o */
#pragma omp parallel for
    for (long c2 = 0L; c2 <= 4L; c2 += 1L) {  /* m2_o */
      if ((po_min_int64(13L, ((-14L * c2) + 63L)) - 0L + 1L) == 14L && (po_min_int64(31L, ((-32L * c1) + 47L)) - 0L + 1L) == 32L) {
        { /* register tile of C_0: 14 x 32 */
          typedef float po_v16_float32 __attribute__((vector_size(64)));
          po_v16_float32 acc_0_0; __builtin_memcpy(&acc_0_0, &t_C[(((14L * c2)) * e_C_1 + ((32L * c1)))], sizeof acc_0_0);
          po_v16_float32 acc_0_1; __builtin_memcpy(&acc_0_1, &t_C[(((14L * c2)) * e_C_1 + ((32L * c1 + 16L)))], sizeof acc_0_1);
          po_v16_float32 acc_1_0; __builtin_memcpy(&acc_1_0, &t_C[(((14L * c2 + 1L)) * e_C_1 + ((32L * c1)))], sizeof acc_1_0);
          po_v16_float32 acc_1_1; __builtin_memcpy(&acc_1_1, &t_C[(((14L * c2 + 1L)) * e_C_1 + ((32L * c1 + 16L)))], sizeof acc_1_1);
          po_v16_float32 acc_2_0; __builtin_memcpy(&acc_2_0, &t_C[(((14L * c2 + 2L)) * e_C_1 + ((32L * c1)))], sizeof acc_2_0);
          po_v16_float32 acc_2_1; __builtin_memcpy(&acc_2_1, &t_C[(((14L * c2 + 2L)) * e_C_1 + ((32L * c1 + 16L)))], sizeof acc_2_1);
          po_v16_float32 acc_3_0; __builtin_memcpy(&acc_3_0, &t_C[(((14L * c2 + 3L)) * e_C_1 + ((32L * c1)))], sizeof acc_3_0);
          po_v16_float32 acc_3_1; __builtin_memcpy(&acc_3_1, &t_C[(((14L * c2 + 3L)) * e_C_1 + ((32L * c1 + 16L)))], sizeof acc_3_1);
          po_v16_float32 acc_4_0; __builtin_memcpy(&acc_4_0, &t_C[(((14L * c2 + 4L)) * e_C_1 + ((32L * c1)))], sizeof acc_4_0);
          po_v16_float32 acc_4_1; __builtin_memcpy(&acc_4_1, &t_C[(((14L * c2 + 4L)) * e_C_1 + ((32L * c1 + 16L)))], sizeof acc_4_1);
          po_v16_float32 acc_5_0; __builtin_memcpy(&acc_5_0, &t_C[(((14L * c2 + 5L)) * e_C_1 + ((32L * c1)))], sizeof acc_5_0);
          po_v16_float32 acc_5_1; __builtin_memcpy(&acc_5_1, &t_C[(((14L * c2 + 5L)) * e_C_1 + ((32L * c1 + 16L)))], sizeof acc_5_1);
          po_v16_float32 acc_6_0; __builtin_memcpy(&acc_6_0, &t_C[(((14L * c2 + 6L)) * e_C_1 + ((32L * c1)))], sizeof acc_6_0);
          po_v16_float32 acc_6_1; __builtin_memcpy(&acc_6_1, &t_C[(((14L * c2 + 6L)) * e_C_1 + ((32L * c1 + 16L)))], sizeof acc_6_1);
          po_v16_float32 acc_7_0; __builtin_memcpy(&acc_7_0, &t_C[(((14L * c2 + 7L)) * e_C_1 + ((32L * c1)))], sizeof acc_7_0);
          po_v16_float32 acc_7_1; __builtin_memcpy(&acc_7_1, &t_C[(((14L * c2 + 7L)) * e_C_1 + ((32L * c1 + 16L)))], sizeof acc_7_1);
          po_v16_float32 acc_8_0; __builtin_memcpy(&acc_8_0, &t_C[(((14L * c2 + 8L)) * e_C_1 + ((32L * c1)))], sizeof acc_8_0);
          po_v16_float32 acc_8_1; __builtin_memcpy(&acc_8_1, &t_C[(((14L * c2 + 8L)) * e_C_1 + ((32L * c1 + 16L)))], sizeof acc_8_1);
          po_v16_float32 acc_9_0; __builtin_memcpy(&acc_9_0, &t_C[(((14L * c2 + 9L)) * e_C_1 + ((32L * c1)))], sizeof acc_9_0);
          po_v16_float32 acc_9_1; __builtin_memcpy(&acc_9_1, &t_C[(((14L * c2 + 9L)) * e_C_1 + ((32L * c1 + 16L)))], sizeof acc_9_1);
          po_v16_float32 acc_10_0; __builtin_memcpy(&acc_10_0, &t_C[(((14L * c2 + 10L)) * e_C_1 + ((32L * c1)))], sizeof acc_10_0);
          po_v16_float32 acc_10_1; __builtin_memcpy(&acc_10_1, &t_C[(((14L * c2 + 10L)) * e_C_1 + ((32L * c1 + 16L)))], sizeof acc_10_1);
          po_v16_float32 acc_11_0; __builtin_memcpy(&acc_11_0, &t_C[(((14L * c2 + 11L)) * e_C_1 + ((32L * c1)))], sizeof acc_11_0);
          po_v16_float32 acc_11_1; __builtin_memcpy(&acc_11_1, &t_C[(((14L * c2 + 11L)) * e_C_1 + ((32L * c1 + 16L)))], sizeof acc_11_1);
          po_v16_float32 acc_12_0; __builtin_memcpy(&acc_12_0, &t_C[(((14L * c2 + 12L)) * e_C_1 + ((32L * c1)))], sizeof acc_12_0);
          po_v16_float32 acc_12_1; __builtin_memcpy(&acc_12_1, &t_C[(((14L * c2 + 12L)) * e_C_1 + ((32L * c1 + 16L)))], sizeof acc_12_1);
          po_v16_float32 acc_13_0; __builtin_memcpy(&acc_13_0, &t_C[(((14L * c2 + 13L)) * e_C_1 + ((32L * c1)))], sizeof acc_13_0);
          po_v16_float32 acc_13_1; __builtin_memcpy(&acc_13_1, &t_C[(((14L * c2 + 13L)) * e_C_1 + ((32L * c1 + 16L)))], sizeof acc_13_1);
          for (long c3 = 0L; c3 <= 31L; c3 += 1L) {
            const float x0_0 = *&t_A[(((14L * c2)) * e_A_1 + ((c3)))];
            const float x0_1 = *&t_A[(((14L * c2 + 1L)) * e_A_1 + ((c3)))];
            const float x0_2 = *&t_A[(((14L * c2 + 2L)) * e_A_1 + ((c3)))];
            const float x0_3 = *&t_A[(((14L * c2 + 3L)) * e_A_1 + ((c3)))];
            const float x0_4 = *&t_A[(((14L * c2 + 4L)) * e_A_1 + ((c3)))];
            const float x0_5 = *&t_A[(((14L * c2 + 5L)) * e_A_1 + ((c3)))];
            const float x0_6 = *&t_A[(((14L * c2 + 6L)) * e_A_1 + ((c3)))];
            const float x0_7 = *&t_A[(((14L * c2 + 7L)) * e_A_1 + ((c3)))];
            const float x0_8 = *&t_A[(((14L * c2 + 8L)) * e_A_1 + ((c3)))];
            const float x0_9 = *&t_A[(((14L * c2 + 9L)) * e_A_1 + ((c3)))];
            const float x0_10 = *&t_A[(((14L * c2 + 10L)) * e_A_1 + ((c3)))];
            const float x0_11 = *&t_A[(((14L * c2 + 11L)) * e_A_1 + ((c3)))];
            const float x0_12 = *&t_A[(((14L * c2 + 12L)) * e_A_1 + ((c3)))];
            const float x0_13 = *&t_A[(((14L * c2 + 13L)) * e_A_1 + ((c3)))];
            po_v16_float32 x1_0; __builtin_memcpy(&x1_0, &t_B[(((c3)) * e_B_1 + ((32L * c1)))], sizeof x1_0);
            po_v16_float32 x1_1; __builtin_memcpy(&x1_1, &t_B[(((c3)) * e_B_1 + ((32L * c1 + 16L)))], sizeof x1_1);
            acc_0_0 += (x0_0 * x1_0);
            acc_0_1 += (x0_0 * x1_1);
            acc_1_0 += (x0_1 * x1_0);
            acc_1_1 += (x0_1 * x1_1);
            acc_2_0 += (x0_2 * x1_0);
            acc_2_1 += (x0_2 * x1_1);
            acc_3_0 += (x0_3 * x1_0);
            acc_3_1 += (x0_3 * x1_1);
            acc_4_0 += (x0_4 * x1_0);
            acc_4_1 += (x0_4 * x1_1);
            acc_5_0 += (x0_5 * x1_0);
            acc_5_1 += (x0_5 * x1_1);
            acc_6_0 += (x0_6 * x1_0);
            acc_6_1 += (x0_6 * x1_1);
            acc_7_0 += (x0_7 * x1_0);
            acc_7_1 += (x0_7 * x1_1);
            acc_8_0 += (x0_8 * x1_0);
            acc_8_1 += (x0_8 * x1_1);
            acc_9_0 += (x0_9 * x1_0);
            acc_9_1 += (x0_9 * x1_1);
            acc_10_0 += (x0_10 * x1_0);
            acc_10_1 += (x0_10 * x1_1);
            acc_11_0 += (x0_11 * x1_0);
            acc_11_1 += (x0_11 * x1_1);
            acc_12_0 += (x0_12 * x1_0);
            acc_12_1 += (x0_12 * x1_1);
            acc_13_0 += (x0_13 * x1_0);
            acc_13_1 += (x0_13 * x1_1);
          }
          __builtin_memcpy(&t_C[(((14L * c2)) * e_C_1 + ((32L * c1)))], &acc_0_0, sizeof acc_0_0);
          __builtin_memcpy(&t_C[(((14L * c2)) * e_C_1 + ((32L * c1 + 16L)))], &acc_0_1, sizeof acc_0_1);
          __builtin_memcpy(&t_C[(((14L * c2 + 1L)) * e_C_1 + ((32L * c1)))], &acc_1_0, sizeof acc_1_0);
          __builtin_memcpy(&t_C[(((14L * c2 + 1L)) * e_C_1 + ((32L * c1 + 16L)))], &acc_1_1, sizeof acc_1_1);
          __builtin_memcpy(&t_C[(((14L * c2 + 2L)) * e_C_1 + ((32L * c1)))], &acc_2_0, sizeof acc_2_0);
          __builtin_memcpy(&t_C[(((14L * c2 + 2L)) * e_C_1 + ((32L * c1 + 16L)))], &acc_2_1, sizeof acc_2_1);
          __builtin_memcpy(&t_C[(((14L * c2 + 3L)) * e_C_1 + ((32L * c1)))], &acc_3_0, sizeof acc_3_0);
          __builtin_memcpy(&t_C[(((14L * c2 + 3L)) * e_C_1 + ((32L * c1 + 16L)))], &acc_3_1, sizeof acc_3_1);
          __builtin_memcpy(&t_C[(((14L * c2 + 4L)) * e_C_1 + ((32L * c1)))], &acc_4_0, sizeof acc_4_0);
          __builtin_memcpy(&t_C[(((14L * c2 + 4L)) * e_C_1 + ((32L * c1 + 16L)))], &acc_4_1, sizeof acc_4_1);
          __builtin_memcpy(&t_C[(((14L * c2 + 5L)) * e_C_1 + ((32L * c1)))], &acc_5_0, sizeof acc_5_0);
          __builtin_memcpy(&t_C[(((14L * c2 + 5L)) * e_C_1 + ((32L * c1 + 16L)))], &acc_5_1, sizeof acc_5_1);
          __builtin_memcpy(&t_C[(((14L * c2 + 6L)) * e_C_1 + ((32L * c1)))], &acc_6_0, sizeof acc_6_0);
          __builtin_memcpy(&t_C[(((14L * c2 + 6L)) * e_C_1 + ((32L * c1 + 16L)))], &acc_6_1, sizeof acc_6_1);
          __builtin_memcpy(&t_C[(((14L * c2 + 7L)) * e_C_1 + ((32L * c1)))], &acc_7_0, sizeof acc_7_0);
          __builtin_memcpy(&t_C[(((14L * c2 + 7L)) * e_C_1 + ((32L * c1 + 16L)))], &acc_7_1, sizeof acc_7_1);
          __builtin_memcpy(&t_C[(((14L * c2 + 8L)) * e_C_1 + ((32L * c1)))], &acc_8_0, sizeof acc_8_0);
          __builtin_memcpy(&t_C[(((14L * c2 + 8L)) * e_C_1 + ((32L * c1 + 16L)))], &acc_8_1, sizeof acc_8_1);
          __builtin_memcpy(&t_C[(((14L * c2 + 9L)) * e_C_1 + ((32L * c1)))], &acc_9_0, sizeof acc_9_0);
          __builtin_memcpy(&t_C[(((14L * c2 + 9L)) * e_C_1 + ((32L * c1 + 16L)))], &acc_9_1, sizeof acc_9_1);
          __builtin_memcpy(&t_C[(((14L * c2 + 10L)) * e_C_1 + ((32L * c1)))], &acc_10_0, sizeof acc_10_0);
          __builtin_memcpy(&t_C[(((14L * c2 + 10L)) * e_C_1 + ((32L * c1 + 16L)))], &acc_10_1, sizeof acc_10_1);
          __builtin_memcpy(&t_C[(((14L * c2 + 11L)) * e_C_1 + ((32L * c1)))], &acc_11_0, sizeof acc_11_0);
          __builtin_memcpy(&t_C[(((14L * c2 + 11L)) * e_C_1 + ((32L * c1 + 16L)))], &acc_11_1, sizeof acc_11_1);
          __builtin_memcpy(&t_C[(((14L * c2 + 12L)) * e_C_1 + ((32L * c1)))], &acc_12_0, sizeof acc_12_0);
          __builtin_memcpy(&t_C[(((14L * c2 + 12L)) * e_C_1 + ((32L * c1 + 16L)))], &acc_12_1, sizeof acc_12_1);
          __builtin_memcpy(&t_C[(((14L * c2 + 13L)) * e_C_1 + ((32L * c1)))], &acc_13_0, sizeof acc_13_0);
          __builtin_memcpy(&t_C[(((14L * c2 + 13L)) * e_C_1 + ((32L * c1 + 16L)))], &acc_13_1, sizeof acc_13_1);
        }
      } else {
        for (long c3 = 0L; c3 <= 31L; c3 += 1L) {  /* k_i */
          for (long c4 = 0L; c4 <= po_min_int64(13L, ((-14L * c2) + 63L)); c4 += 1L) {  /* m2_i */
            {
              const float po_h0 = t_A[(((14L * c2 + c4)) * e_A_1 + ((c3)))];
#pragma omp simd
            for (long c5 = 0L; c5 <= po_min_int64(31L, ((-32L * c1) + 47L)); c5 += 1L) {  /* n2_i */
              { /* C_0 */
                const long i_m = (14L * c2) + c4;
                const long i_n = (32L * c1) + c5;
                const long i_r_k = c3;
                t_C[((i_m) * e_C_1 + (i_n))] = ((float)(t_C[((i_m) * e_C_1 + (i_n))] + ((float)(po_h0 * t_B[((i_r_k) * e_B_1 + (i_n))]))));
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
