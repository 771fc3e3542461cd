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
  for (long c1 = 0L; c1 <= 2L; c1 += 1L) {  /* n2_o */
    for (long c2 = 0L; c2 <= 3L; c2 += 1L) {  /* m2_o */
        { /* register tile of C_0: 16 x 16 */
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
          #pragma GCC unroll 1
          for (long c3 = 0L; c3 <= 31L; c3 += 1L) {
            const float *po_p0 = &t_A[(((16L * c2)) * e_A_1 + ((c3)))];
            const float *po_p1 = &t_B[(((c3)) * e_B_1 + ((16L * c1)))];
            const float x0_0 = *&po_p0[(((0L)) * e_A_1 + ((0L)))];
            const float x0_1 = *&po_p0[(((1L)) * e_A_1 + ((0L)))];
            const float x0_2 = *&po_p0[(((2L)) * e_A_1 + ((0L)))];
            const float x0_3 = *&po_p0[(((3L)) * e_A_1 + ((0L)))];
            const float x0_4 = *&po_p0[(((4L)) * e_A_1 + ((0L)))];
            const float x0_5 = *&po_p0[(((5L)) * e_A_1 + ((0L)))];
            const float x0_6 = *&po_p0[(((6L)) * e_A_1 + ((0L)))];
            const float x0_7 = *&po_p0[(((7L)) * e_A_1 + ((0L)))];
            const float x0_8 = *&po_p0[(((8L)) * e_A_1 + ((0L)))];
            const float x0_9 = *&po_p0[(((9L)) * e_A_1 + ((0L)))];
            const float x0_10 = *&po_p0[(((10L)) * e_A_1 + ((0L)))];
            const float x0_11 = *&po_p0[(((11L)) * e_A_1 + ((0L)))];
            const float x0_12 = *&po_p0[(((12L)) * e_A_1 + ((0L)))];
            const float x0_13 = *&po_p0[(((13L)) * e_A_1 + ((0L)))];
            const float x0_14 = *&po_p0[(((14L)) * e_A_1 + ((0L)))];
            const float x0_15 = *&po_p0[(((15L)) * e_A_1 + ((0L)))];
            po_v16_float32 x1_0; __builtin_memcpy(&x1_0, &po_p1[(((0L)) * e_B_1 + ((0L)))], sizeof x1_0);
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
          }
          __builtin_memcpy(&t_C[(((16L * c2)) * e_C_1 + ((16L * c1)))], &acc_0_0, sizeof acc_0_0);
          __builtin_memcpy(&t_C[(((16L * c2 + 1L)) * e_C_1 + ((16L * c1)))], &acc_1_0, sizeof acc_1_0);
          __builtin_memcpy(&t_C[(((16L * c2 + 2L)) * e_C_1 + ((16L * c1)))], &acc_2_0, sizeof acc_2_0);
          __builtin_memcpy(&t_C[(((16L * c2 + 3L)) * e_C_1 + ((16L * c1)))], &acc_3_0, sizeof acc_3_0);
          __builtin_memcpy(&t_C[(((16L * c2 + 4L)) * e_C_1 + ((16L * c1)))], &acc_4_0, sizeof acc_4_0);
          __builtin_memcpy(&t_C[(((16L * c2 + 5L)) * e_C_1 + ((16L * c1)))], &acc_5_0, sizeof acc_5_0);
          __builtin_memcpy(&t_C[(((16L * c2 + 6L)) * e_C_1 + ((16L * c1)))], &acc_6_0, sizeof acc_6_0);
          __builtin_memcpy(&t_C[(((16L * c2 + 7L)) * e_C_1 + ((16L * c1)))], &acc_7_0, sizeof acc_7_0);
          __builtin_memcpy(&t_C[(((16L * c2 + 8L)) * e_C_1 + ((16L * c1)))], &acc_8_0, sizeof acc_8_0);
          __builtin_memcpy(&t_C[(((16L * c2 + 9L)) * e_C_1 + ((16L * c1)))], &acc_9_0, sizeof acc_9_0);
          __builtin_memcpy(&t_C[(((16L * c2 + 10L)) * e_C_1 + ((16L * c1)))], &acc_10_0, sizeof acc_10_0);
          __builtin_memcpy(&t_C[(((16L * c2 + 11L)) * e_C_1 + ((16L * c1)))], &acc_11_0, sizeof acc_11_0);
          __builtin_memcpy(&t_C[(((16L * c2 + 12L)) * e_C_1 + ((16L * c1)))], &acc_12_0, sizeof acc_12_0);
          __builtin_memcpy(&t_C[(((16L * c2 + 13L)) * e_C_1 + ((16L * c1)))], &acc_13_0, sizeof acc_13_0);
          __builtin_memcpy(&t_C[(((16L * c2 + 14L)) * e_C_1 + ((16L * c1)))], &acc_14_0, sizeof acc_14_0);
          __builtin_memcpy(&t_C[(((16L * c2 + 15L)) * e_C_1 + ((16L * c1)))], &acc_15_0, sizeof acc_15_0);
        }
    }
  }
  (void)dims; (void)err;
  return 0;
}
