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
  for (long c1 = 0L; c1 <= 2L; c1 += 1L) {  /* n2_o */
    for (long c2 = 0L; c2 <= 2L; c2 += 1L) {  /* m2_o */
      if ((po_min_int64(27L, ((-28L * c2) + 63L)) - 0L + 1L) == 28L && (15L - 0L + 1L) == 16L) {
        { /* register tile of C_0: 28 x 16 */
          typedef float po_v16_float32 __attribute__((vector_size(64)));
          po_v16_float32 acc_0_0 = {0};
          po_v16_float32 acc_1_0 = {0};
          po_v16_float32 acc_2_0 = {0};
          po_v16_float32 acc_3_0 = {0};
          po_v16_float32 acc_4_0 = {0};
          po_v16_float32 acc_5_0 = {0};
          po_v16_float32 acc_6_0 = {0};
          po_v16_float32 acc_7_0 = {0};
          po_v16_float32 acc_8_0 = {0};
          po_v16_float32 acc_9_0 = {0};
          po_v16_float32 acc_10_0 = {0};
          po_v16_float32 acc_11_0 = {0};
          po_v16_float32 acc_12_0 = {0};
          po_v16_float32 acc_13_0 = {0};
          po_v16_float32 acc_14_0 = {0};
          po_v16_float32 acc_15_0 = {0};
          po_v16_float32 acc_16_0 = {0};
          po_v16_float32 acc_17_0 = {0};
          po_v16_float32 acc_18_0 = {0};
          po_v16_float32 acc_19_0 = {0};
          po_v16_float32 acc_20_0 = {0};
          po_v16_float32 acc_21_0 = {0};
          po_v16_float32 acc_22_0 = {0};
          po_v16_float32 acc_23_0 = {0};
          po_v16_float32 acc_24_0 = {0};
          po_v16_float32 acc_25_0 = {0};
          po_v16_float32 acc_26_0 = {0};
          po_v16_float32 acc_27_0 = {0};
          for (long c3 = 0L; c3 <= 31L; c3 += 1L) {
            const float x0_0 = *&t_A[(((28L * c2)) * e_A_1 + ((c3)))];
            const float x0_1 = *&t_A[(((28L * c2 + 1L)) * e_A_1 + ((c3)))];
            const float x0_2 = *&t_A[(((28L * c2 + 2L)) * e_A_1 + ((c3)))];
            const float x0_3 = *&t_A[(((28L * c2 + 3L)) * e_A_1 + ((c3)))];
            const float x0_4 = *&t_A[(((28L * c2 + 4L)) * e_A_1 + ((c3)))];
            const float x0_5 = *&t_A[(((28L * c2 + 5L)) * e_A_1 + ((c3)))];
            const float x0_6 = *&t_A[(((28L * c2 + 6L)) * e_A_1 + ((c3)))];
            const float x0_7 = *&t_A[(((28L * c2 + 7L)) * e_A_1 + ((c3)))];
            const float x0_8 = *&t_A[(((28L * c2 + 8L)) * e_A_1 + ((c3)))];
            const float x0_9 = *&t_A[(((28L * c2 + 9L)) * e_A_1 + ((c3)))];
            const float x0_10 = *&t_A[(((28L * c2 + 10L)) * e_A_1 + ((c3)))];
            const float x0_11 = *&t_A[(((28L * c2 + 11L)) * e_A_1 + ((c3)))];
            const float x0_12 = *&t_A[(((28L * c2 + 12L)) * e_A_1 + ((c3)))];
            const float x0_13 = *&t_A[(((28L * c2 + 13L)) * e_A_1 + ((c3)))];
            const float x0_14 = *&t_A[(((28L * c2 + 14L)) * e_A_1 + ((c3)))];
            const float x0_15 = *&t_A[(((28L * c2 + 15L)) * e_A_1 + ((c3)))];
            const float x0_16 = *&t_A[(((28L * c2 + 16L)) * e_A_1 + ((c3)))];
            const float x0_17 = *&t_A[(((28L * c2 + 17L)) * e_A_1 + ((c3)))];
            const float x0_18 = *&t_A[(((28L * c2 + 18L)) * e_A_1 + ((c3)))];
            const float x0_19 = *&t_A[(((28L * c2 + 19L)) * e_A_1 + ((c3)))];
            const float x0_20 = *&t_A[(((28L * c2 + 20L)) * e_A_1 + ((c3)))];
            const float x0_21 = *&t_A[(((28L * c2 + 21L)) * e_A_1 + ((c3)))];
            const float x0_22 = *&t_A[(((28L * c2 + 22L)) * e_A_1 + ((c3)))];
            const float x0_23 = *&t_A[(((28L * c2 + 23L)) * e_A_1 + ((c3)))];
            const float x0_24 = *&t_A[(((28L * c2 + 24L)) * e_A_1 + ((c3)))];
            const float x0_25 = *&t_A[(((28L * c2 + 25L)) * e_A_1 + ((c3)))];
            const float x0_26 = *&t_A[(((28L * c2 + 26L)) * e_A_1 + ((c3)))];
            const float x0_27 = *&t_A[(((28L * c2 + 27L)) * e_A_1 + ((c3)))];
            po_v16_float32 x1_0; __builtin_memcpy(&x1_0, &t_B[(((c3)) * e_B_1 + ((16L * c1)))], sizeof x1_0);
            acc_0_0 += (x0_0 * x1_0);
            acc_1_0 += (x0_1 * x1_0);
            acc_2_0 += (x0_2 * x1_0);
            acc_3_0 += (x0_3 * x1_0);
            acc_4_0 += (x0_4 * x1_0);
            acc_5_0 += (x0_5 * x1_0);
            acc_6_0 += (x0_6 * x1_0);
            acc_7_0 += (x0_7 * x1_0);
            acc_8_0 += (x0_8 * x1_0);
            acc_9_0 += (x0_9 * x1_0);
            acc_10_0 += (x0_10 * x1_0);
            acc_11_0 += (x0_11 * x1_0);
            acc_12_0 += (x0_12 * x1_0);
            acc_13_0 += (x0_13 * x1_0);
            acc_14_0 += (x0_14 * x1_0);
            acc_15_0 += (x0_15 * x1_0);
            acc_16_0 += (x0_16 * x1_0);
            acc_17_0 += (x0_17 * x1_0);
            acc_18_0 += (x0_18 * x1_0);
            acc_19_0 += (x0_19 * x1_0);
            acc_20_0 += (x0_20 * x1_0);
            acc_21_0 += (x0_21 * x1_0);
            acc_22_0 += (x0_22 * x1_0);
            acc_23_0 += (x0_23 * x1_0);
            acc_24_0 += (x0_24 * x1_0);
            acc_25_0 += (x0_25 * x1_0);
            acc_26_0 += (x0_26 * x1_0);
            acc_27_0 += (x0_27 * x1_0);
          }
          __builtin_memcpy(&t_C[(((28L * c2)) * e_C_1 + ((16L * c1)))], &acc_0_0, sizeof acc_0_0);
          __builtin_memcpy(&t_C[(((28L * c2 + 1L)) * e_C_1 + ((16L * c1)))], &acc_1_0, sizeof acc_1_0);
          __builtin_memcpy(&t_C[(((28L * c2 + 2L)) * e_C_1 + ((16L * c1)))], &acc_2_0, sizeof acc_2_0);
          __builtin_memcpy(&t_C[(((28L * c2 + 3L)) * e_C_1 + ((16L * c1)))], &acc_3_0, sizeof acc_3_0);
          __builtin_memcpy(&t_C[(((28L * c2 + 4L)) * e_C_1 + ((16L * c1)))], &acc_4_0, sizeof acc_4_0);
          __builtin_memcpy(&t_C[(((28L * c2 + 5L)) * e_C_1 + ((16L * c1)))], &acc_5_0, sizeof acc_5_0);
          __builtin_memcpy(&t_C[(((28L * c2 + 6L)) * e_C_1 + ((16L * c1)))], &acc_6_0, sizeof acc_6_0);
          __builtin_memcpy(&t_C[(((28L * c2 + 7L)) * e_C_1 + ((16L * c1)))], &acc_7_0, sizeof acc_7_0);
          __builtin_memcpy(&t_C[(((28L * c2 + 8L)) * e_C_1 + ((16L * c1)))], &acc_8_0, sizeof acc_8_0);
          __builtin_memcpy(&t_C[(((28L * c2 + 9L)) * e_C_1 + ((16L * c1)))], &acc_9_0, sizeof acc_9_0);
          __builtin_memcpy(&t_C[(((28L * c2 + 10L)) * e_C_1 + ((16L * c1)))], &acc_10_0, sizeof acc_10_0);
          __builtin_memcpy(&t_C[(((28L * c2 + 11L)) * e_C_1 + ((16L * c1)))], &acc_11_0, sizeof acc_11_0);
          __builtin_memcpy(&t_C[(((28L * c2 + 12L)) * e_C_1 + ((16L * c1)))], &acc_12_0, sizeof acc_12_0);
          __builtin_memcpy(&t_C[(((28L * c2 + 13L)) * e_C_1 + ((16L * c1)))], &acc_13_0, sizeof acc_13_0);
          __builtin_memcpy(&t_C[(((28L * c2 + 14L)) * e_C_1 + ((16L * c1)))], &acc_14_0, sizeof acc_14_0);
          __builtin_memcpy(&t_C[(((28L * c2 + 15L)) * e_C_1 + ((16L * c1)))], &acc_15_0, sizeof acc_15_0);
          __builtin_memcpy(&t_C[(((28L * c2 + 16L)) * e_C_1 + ((16L * c1)))], &acc_16_0, sizeof acc_16_0);
          __builtin_memcpy(&t_C[(((28L * c2 + 17L)) * e_C_1 + ((16L * c1)))], &acc_17_0, sizeof acc_17_0);
          __builtin_memcpy(&t_C[(((28L * c2 + 18L)) * e_C_1 + ((16L * c1)))], &acc_18_0, sizeof acc_18_0);
          __builtin_memcpy(&t_C[(((28L * c2 + 19L)) * e_C_1 + ((16L * c1)))], &acc_19_0, sizeof acc_19_0);
          __builtin_memcpy(&t_C[(((28L * c2 + 20L)) * e_C_1 + ((16L * c1)))], &acc_20_0, sizeof acc_20_0);
          __builtin_memcpy(&t_C[(((28L * c2 + 21L)) * e_C_1 + ((16L * c1)))], &acc_21_0, sizeof acc_21_0);
          __builtin_memcpy(&t_C[(((28L * c2 + 22L)) * e_C_1 + ((16L * c1)))], &acc_22_0, sizeof acc_22_0);
          __builtin_memcpy(&t_C[(((28L * c2 + 23L)) * e_C_1 + ((16L * c1)))], &acc_23_0, sizeof acc_23_0);
          __builtin_memcpy(&t_C[(((28L * c2 + 24L)) * e_C_1 + ((16L * c1)))], &acc_24_0, sizeof acc_24_0);
          __builtin_memcpy(&t_C[(((28L * c2 + 25L)) * e_C_1 + ((16L * c1)))], &acc_25_0, sizeof acc_25_0);
          __builtin_memcpy(&t_C[(((28L * c2 + 26L)) * e_C_1 + ((16L * c1)))], &acc_26_0, sizeof acc_26_0);
          __builtin_memcpy(&t_C[(((28L * c2 + 27L)) * e_C_1 + ((16L * c1)))], &acc_27_0, sizeof acc_27_0);
        }
      } else {
        for (long c3 = 0L; c3 <= 31L; c3 += 1L) {  /* k_i */
#pragma omp parallel for
          for (long c4 = 0L; c4 <= po_min_int64(27L, ((-28L * c2) + 63L)); c4 += 1L) {  /* m2_i */
            {
              const float po_h0 = t_A[(((28L * c2 + c4)) * e_A_1 + ((c3)))];
#pragma omp simd
            for (long c5 = 0L; c5 <= 15L; c5 += 1L) {  /* n2_i */
              { /* C_0 */
                const long i_m = (28L * c2) + c4;
                const long i_n = (16L * c1) + c5;
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
