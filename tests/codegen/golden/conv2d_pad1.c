int polyopt_conv2d(void **bufs, const long *dims, long *err) {
  const float *restrict t_I = (const float *)bufs[0];
  const float *restrict t_Wt = (const float *)bufs[1];
  float *restrict t_O = (float *)bufs[2];
  float *restrict t_I_pack = (float *)bufs[3];
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
  const long e_I_pack_0 = 1L;
  const long e_I_pack_1 = 3L;
  const long e_I_pack_2 = 10L;
  const long e_I_pack_3 = 10L;
  const long e_I_pack_4 = 1L;
  for (long c2 = 0L; c2 <= 2L; c2 += 1L) {  /* ip1 */
    for (long c3 = 1L; c3 <= 8L; c3 += 1L) {  /* ip2 */
#pragma omp simd simdlen(8)
      for (long c4 = 1L; c4 <= 8L; c4 += 1L) {  /* ip3 */
        { /* I_pack_0 */
          const long i_ip0 = 0L;
          const long i_ip1 = c2;
          const long i_ip2 = c3;
          const long i_ip3 = c4;
          const long i_ip4 = 0L;
          t_I_pack[(((((i_ip0) * e_I_pack_1 + (i_ip1)) * e_I_pack_2 + (i_ip2)) * e_I_pack_3 + (i_ip3)) * e_I_pack_4 + (i_ip4))] = t_I[((((((1L * i_ip0) + i_ip4)) * e_I_1 + (i_ip1)) * e_I_2 + ((i_ip2 - 1L))) * e_I_3 + ((i_ip3 - 1L)))];
        }
      }
    }
  }
  for (long c2 = 0L; c2 <= 2L; c2 += 1L) {  /* ip12 */
    for (long c3 = 0L; c3 <= 9L; c3 += 1L) {  /* ip22 */
      if ((c3 >= 1L) && (c3 <= 8L)) {
        { /* I_pack_0_border */
          const long i_ip0 = 0L;
          const long i_ip1 = c2;
          const long i_ip2 = c3;
          const long i_ip3 = 0L;
          const long i_ip4 = 0L;
          t_I_pack[(((((i_ip0) * e_I_pack_1 + (i_ip1)) * e_I_pack_2 + (i_ip2)) * e_I_pack_3 + (i_ip3)) * e_I_pack_4 + (i_ip4))] = ((0 <= ((1L * i_ip0) + i_ip4) && ((1L * i_ip0) + i_ip4) < e_I_0 && 0 <= i_ip1 && i_ip1 < e_I_1 && 0 <= (i_ip2 - 1L) && (i_ip2 - 1L) < e_I_2 && 0 <= (i_ip3 - 1L) && (i_ip3 - 1L) < e_I_3) ? t_I[((((((1L * i_ip0) + i_ip4)) * e_I_1 + (i_ip1)) * e_I_2 + ((i_ip2 - 1L))) * e_I_3 + ((i_ip3 - 1L)))] : 0.0f);
        }
        { /* I_pack_0_border */
          const long i_ip0 = 0L;
          const long i_ip1 = c2;
          const long i_ip2 = c3;
          const long i_ip3 = 9L;
          const long i_ip4 = 0L;
          t_I_pack[(((((i_ip0) * e_I_pack_1 + (i_ip1)) * e_I_pack_2 + (i_ip2)) * e_I_pack_3 + (i_ip3)) * e_I_pack_4 + (i_ip4))] = ((0 <= ((1L * i_ip0) + i_ip4) && ((1L * i_ip0) + i_ip4) < e_I_0 && 0 <= i_ip1 && i_ip1 < e_I_1 && 0 <= (i_ip2 - 1L) && (i_ip2 - 1L) < e_I_2 && 0 <= (i_ip3 - 1L) && (i_ip3 - 1L) < e_I_3) ? t_I[((((((1L * i_ip0) + i_ip4)) * e_I_1 + (i_ip1)) * e_I_2 + ((i_ip2 - 1L))) * e_I_3 + ((i_ip3 - 1L)))] : 0.0f);
        }
      } else {
        if (c3 == 9L) {
#pragma omp simd simdlen(8)
          for (long c4 = 0L; c4 <= 9L; c4 += 1L) {  /* ip32 */
            { /* I_pack_0_border */
              const long i_ip0 = 0L;
              const long i_ip1 = c2;
              const long i_ip2 = 9L;
              const long i_ip3 = c4;
              const long i_ip4 = 0L;
              t_I_pack[(((((i_ip0) * e_I_pack_1 + (i_ip1)) * e_I_pack_2 + (i_ip2)) * e_I_pack_3 + (i_ip3)) * e_I_pack_4 + (i_ip4))] = ((0 <= ((1L * i_ip0) + i_ip4) && ((1L * i_ip0) + i_ip4) < e_I_0 && 0 <= i_ip1 && i_ip1 < e_I_1 && 0 <= (i_ip2 - 1L) && (i_ip2 - 1L) < e_I_2 && 0 <= (i_ip3 - 1L) && (i_ip3 - 1L) < e_I_3) ? t_I[((((((1L * i_ip0) + i_ip4)) * e_I_1 + (i_ip1)) * e_I_2 + ((i_ip2 - 1L))) * e_I_3 + ((i_ip3 - 1L)))] : 0.0f);
            }
          }
        } else {
#pragma omp simd simdlen(8)
          for (long c4 = 0L; c4 <= 9L; c4 += 1L) {  /* ip32 */
            { /* I_pack_0_border */
              const long i_ip0 = 0L;
              const long i_ip1 = c2;
              const long i_ip2 = 0L;
              const long i_ip3 = c4;
              const long i_ip4 = 0L;
              t_I_pack[(((((i_ip0) * e_I_pack_1 + (i_ip1)) * e_I_pack_2 + (i_ip2)) * e_I_pack_3 + (i_ip3)) * e_I_pack_4 + (i_ip4))] = ((0 <= ((1L * i_ip0) + i_ip4) && ((1L * i_ip0) + i_ip4) < e_I_0 && 0 <= i_ip1 && i_ip1 < e_I_1 && 0 <= (i_ip2 - 1L) && (i_ip2 - 1L) < e_I_2 && 0 <= (i_ip3 - 1L) && (i_ip3 - 1L) < e_I_3) ? t_I[((((((1L * i_ip0) + i_ip4)) * e_I_1 + (i_ip1)) * e_I_2 + ((i_ip2 - 1L))) * e_I_3 + ((i_ip3 - 1L)))] : 0.0f);
            }
          }
        }
      }
    }
  }
  for (long c0 = 0L; c0 <= 3L; c0 += 1L) {  /* f */
    for (long c1 = 0L; c1 <= 7L; c1 += 1L) {  /* h */
#pragma omp simd simdlen(8)
      for (long c2 = 0L; c2 <= 7L; c2 += 1L) {  /* w */
        { /* O_0_init */
          const long i_n = 0L;
          const long i_f = c0;
          const long i_h = c1;
          const long i_w = c2;
          t_O[((((i_n) * e_O_1 + (i_f)) * e_O_2 + (i_h)) * e_O_3 + (i_w))] = 0.0f;
        }
      }
      for (long c2 = 0L; c2 <= 2L; c2 += 1L) {  /* c */
        for (long c3 = 0L; c3 <= 2L; c3 += 1L) {  /* kh */
          for (long c4 = 0L; c4 <= 2L; c4 += 1L) {  /* kw */
            {
              const float po_h0 = t_Wt[(((((c0)) * e_Wt_1 + ((c2))) * e_Wt_2 + ((c3))) * e_Wt_3 + ((c4)))];
#pragma omp simd simdlen(8)
            for (long c5 = 0L; c5 <= 7L; c5 += 1L) {  /* w2 */
              { /* O_0 */
                const long i_n = 0L;
                const long i_f = c0;
                const long i_h = c1;
                const long i_w = c5;
                const long i_r_c = c2;
                const long i_r_kh = c3;
                const long i_r_kw = c4;
                t_O[((((i_n) * e_O_1 + (i_f)) * e_O_2 + (i_h)) * e_O_3 + (i_w))] = ((float)(t_O[((((i_n) * e_O_1 + (i_f)) * e_O_2 + (i_h)) * e_O_3 + (i_w))] + ((float)(t_I_pack[((((((i_n / 1L)) * e_I_pack_1 + (i_r_c)) * e_I_pack_2 + (((((1L * i_h) + (1L * i_r_kh)) - 1L) + 1L))) * e_I_pack_3 + (((((1L * i_w) + (1L * i_r_kw)) - 1L) + 1L))) * e_I_pack_4 + ((i_n % 1L)))] * po_h0))));
              }
            }
            }
            __asm__ volatile("");  /* carries a dependence */
          }
          __asm__ volatile("");  /* carries a dependence */
        }
        __asm__ volatile("");  /* carries a dependence */
      }
    }
  }
  (void)dims; (void)err;
  return 0;
}
