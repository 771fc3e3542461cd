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
  for (long c0 = 0L; c0 <= 3L; c0 += 1L) {  /* f */
    for (long c1 = 0L; c1 <= 7L; c1 += 1L) {  /* h */
#pragma omp simd
      for (long c2 = 0L; c2 <= 7L; c2 += 1L) {  /* w */
        { /* O_0_init */
          const long i_n = 0L;
          const long i_f = c0;
          const long i_h = c1;
          const long i_w = c2;
          t_O[((((i_n) * e_O_1 + (i_f)) * e_O_2 + (i_h)) * e_O_3 + (i_w))] = 0.0f;
        }
      }
    }
  }
#pragma omp parallel for
  for (long c0 = 0L; c0 <= 3L; c0 += 1L) {  /* f3 */
    for (long c1 = 0L; c1 <= 7L; c1 += 1L) {  /* h3 */
      for (long c2 = 0L; c2 <= 7L; c2 += 1L) {  /* w3 */
        for (long c3 = 0L; c3 <= 2L; c3 += 1L) {  /* c */
          for (long c4 = po_max_int64(0L, ((-c1) + 1L)); c4 <= po_min_int64(2L, ((-c1) + 8L)); c4 += 1L) {  /* kh */
            { /* reduction of O_0 */
              const long i_n = 0L;
              const long i_f = c0;
              const long i_h = c1;
              const long i_w = c2;
              float po_acc = t_O[((((i_n) * e_O_1 + (i_f)) * e_O_2 + (i_h)) * e_O_3 + (i_w))];
            #pragma omp simd reduction(+:po_acc)
              for (long c5 = po_max_int64(0L, ((-c2) + 1L)); c5 <= po_min_int64(2L, ((-c2) + 8L)); c5 += 1L) {
                { /* O_0 */
                  const long i_r_c = c3;
                  const long i_r_kh = c4;
                  const long i_r_kw = c5;
                  po_acc = ((float)(po_acc + ((float)(t_I[((((i_n) * e_I_1 + (i_r_c)) * e_I_2 + ((((1L * i_h) + (1L * i_r_kh)) - 1L))) * e_I_3 + ((((1L * i_w) + (1L * i_r_kw)) - 1L)))] * t_Wt[((((i_f) * e_Wt_1 + (i_r_c)) * e_Wt_2 + (i_r_kh)) * e_Wt_3 + (i_r_kw))]))));
                }
              }
              t_O[((((i_n) * e_O_1 + (i_f)) * e_O_2 + (i_h)) * e_O_3 + (i_w))] = po_acc;
            }
          }
        }
      }
    }
  }
#pragma omp parallel for
  for (long c0 = 0L; c0 <= 3L; c0 += 1L) {  /* f2 */
    for (long c1 = 0L; c1 <= 7L; c1 += 1L) {  /* h2 */
      if (c1 <= 6L) {
        for (long c3 = 0L; c3 <= 2L; c3 += 1L) {  /* c2 */
          for (long c4 = 0L; c4 <= 2L; c4 += 1L) {  /* kh2 */
            if ((c1 + c4) >= 1L) {
              { /* O_0_border */
                const long i_n = 0L;
                const long i_f = c0;
                const long i_h = c1;
                const long i_w = 0L;
                const long i_r_c = c3;
                const long i_r_kh = c4;
                const long i_r_kw = 0L;
                t_O[((((i_n) * e_O_1 + (i_f)) * e_O_2 + (i_h)) * e_O_3 + (i_w))] = ((float)(t_O[((((i_n) * e_O_1 + (i_f)) * e_O_2 + (i_h)) * e_O_3 + (i_w))] + ((float)(((0 <= i_n && i_n < e_I_0 && 0 <= i_r_c && i_r_c < e_I_1 && 0 <= (((1L * i_h) + (1L * i_r_kh)) - 1L) && (((1L * i_h) + (1L * i_r_kh)) - 1L) < e_I_2 && 0 <= (((1L * i_w) + (1L * i_r_kw)) - 1L) && (((1L * i_w) + (1L * i_r_kw)) - 1L) < e_I_3) ? t_I[((((i_n) * e_I_1 + (i_r_c)) * e_I_2 + ((((1L * i_h) + (1L * i_r_kh)) - 1L))) * e_I_3 + ((((1L * i_w) + (1L * i_r_kw)) - 1L)))] : 0.0f) * t_Wt[((((i_f) * e_Wt_1 + (i_r_c)) * e_Wt_2 + (i_r_kh)) * e_Wt_3 + (i_r_kw))]))));
              }
            } else {
              { /* reduction of O_0_border */
                const long i_n = 0L;
                const long i_f = c0;
                const long i_h = 0L;
                const long i_w = 0L;
                float po_acc = t_O[((((i_n) * e_O_1 + (i_f)) * e_O_2 + (i_h)) * e_O_3 + (i_w))];
              #pragma omp simd reduction(+:po_acc)
                for (long c5 = 0L; c5 <= 2L; c5 += 1L) {
                  { /* O_0_border */
                    const long i_r_c = c3;
                    const long i_r_kh = 0L;
                    const long i_r_kw = c5;
                    po_acc = ((float)(po_acc + ((float)(((0 <= i_n && i_n < e_I_0 && 0 <= i_r_c && i_r_c < e_I_1 && 0 <= (((1L * i_h) + (1L * i_r_kh)) - 1L) && (((1L * i_h) + (1L * i_r_kh)) - 1L) < e_I_2 && 0 <= (((1L * i_w) + (1L * i_r_kw)) - 1L) && (((1L * i_w) + (1L * i_r_kw)) - 1L) < e_I_3) ? t_I[((((i_n) * e_I_1 + (i_r_c)) * e_I_2 + ((((1L * i_h) + (1L * i_r_kh)) - 1L))) * e_I_3 + ((((1L * i_w) + (1L * i_r_kw)) - 1L)))] : 0.0f) * t_Wt[((((i_f) * e_Wt_1 + (i_r_c)) * e_Wt_2 + (i_r_kh)) * e_Wt_3 + (i_r_kw))]))));
                  }
                }
                t_O[((((i_n) * e_O_1 + (i_f)) * e_O_2 + (i_h)) * e_O_3 + (i_w))] = po_acc;
              }
            }
          }
        }
        if (c1 == 0L) {
          for (long c2 = 1L; c2 <= 6L; c2 += 1L) {  /* w2 */
            for (long c3 = 0L; c3 <= 2L; c3 += 1L) {  /* c2 */
              { /* reduction of O_0_border */
                const long i_n = 0L;
                const long i_f = c0;
                const long i_h = 0L;
                const long i_w = c2;
                float po_acc = t_O[((((i_n) * e_O_1 + (i_f)) * e_O_2 + (i_h)) * e_O_3 + (i_w))];
              #pragma omp simd reduction(+:po_acc)
                for (long c5 = 0L; c5 <= 2L; c5 += 1L) {
                  { /* O_0_border */
                    const long i_r_c = c3;
                    const long i_r_kh = 0L;
                    const long i_r_kw = c5;
                    po_acc = ((float)(po_acc + ((float)(((0 <= i_n && i_n < e_I_0 && 0 <= i_r_c && i_r_c < e_I_1 && 0 <= (((1L * i_h) + (1L * i_r_kh)) - 1L) && (((1L * i_h) + (1L * i_r_kh)) - 1L) < e_I_2 && 0 <= (((1L * i_w) + (1L * i_r_kw)) - 1L) && (((1L * i_w) + (1L * i_r_kw)) - 1L) < e_I_3) ? t_I[((((i_n) * e_I_1 + (i_r_c)) * e_I_2 + ((((1L * i_h) + (1L * i_r_kh)) - 1L))) * e_I_3 + ((((1L * i_w) + (1L * i_r_kw)) - 1L)))] : 0.0f) * t_Wt[((((i_f) * e_Wt_1 + (i_r_c)) * e_Wt_2 + (i_r_kh)) * e_Wt_3 + (i_r_kw))]))));
                  }
                }
                t_O[((((i_n) * e_O_1 + (i_f)) * e_O_2 + (i_h)) * e_O_3 + (i_w))] = po_acc;
              }
            }
          }
        }
      } else {
        for (long c2 = 0L; c2 <= 6L; c2 += 1L) {  /* w2 */
          for (long c3 = 0L; c3 <= 2L; c3 += 1L) {  /* c2 */
            if (c2 == 0L) {
              for (long c4 = 0L; c4 <= 1L; c4 += 1L) {  /* kh2 */
                { /* O_0_border */
                  const long i_n = 0L;
                  const long i_f = c0;
                  const long i_h = 7L;
                  const long i_w = 0L;
                  const long i_r_c = c3;
                  const long i_r_kh = c4;
                  const long i_r_kw = 0L;
                  t_O[((((i_n) * e_O_1 + (i_f)) * e_O_2 + (i_h)) * e_O_3 + (i_w))] = ((float)(t_O[((((i_n) * e_O_1 + (i_f)) * e_O_2 + (i_h)) * e_O_3 + (i_w))] + ((float)(((0 <= i_n && i_n < e_I_0 && 0 <= i_r_c && i_r_c < e_I_1 && 0 <= (((1L * i_h) + (1L * i_r_kh)) - 1L) && (((1L * i_h) + (1L * i_r_kh)) - 1L) < e_I_2 && 0 <= (((1L * i_w) + (1L * i_r_kw)) - 1L) && (((1L * i_w) + (1L * i_r_kw)) - 1L) < e_I_3) ? t_I[((((i_n) * e_I_1 + (i_r_c)) * e_I_2 + ((((1L * i_h) + (1L * i_r_kh)) - 1L))) * e_I_3 + ((((1L * i_w) + (1L * i_r_kw)) - 1L)))] : 0.0f) * t_Wt[((((i_f) * e_Wt_1 + (i_r_c)) * e_Wt_2 + (i_r_kh)) * e_Wt_3 + (i_r_kw))]))));
                }
              }
            }
            { /* reduction of O_0_border */
              const long i_n = 0L;
              const long i_f = c0;
              const long i_h = 7L;
              const long i_w = c2;
              float po_acc = t_O[((((i_n) * e_O_1 + (i_f)) * e_O_2 + (i_h)) * e_O_3 + (i_w))];
            #pragma omp simd reduction(+:po_acc)
              for (long c5 = 0L; c5 <= 2L; c5 += 1L) {
                { /* O_0_border */
                  const long i_r_c = c3;
                  const long i_r_kh = 2L;
                  const long i_r_kw = c5;
                  po_acc = ((float)(po_acc + ((float)(((0 <= i_n && i_n < e_I_0 && 0 <= i_r_c && i_r_c < e_I_1 && 0 <= (((1L * i_h) + (1L * i_r_kh)) - 1L) && (((1L * i_h) + (1L * i_r_kh)) - 1L) < e_I_2 && 0 <= (((1L * i_w) + (1L * i_r_kw)) - 1L) && (((1L * i_w) + (1L * i_r_kw)) - 1L) < e_I_3) ? t_I[((((i_n) * e_I_1 + (i_r_c)) * e_I_2 + ((((1L * i_h) + (1L * i_r_kh)) - 1L))) * e_I_3 + ((((1L * i_w) + (1L * i_r_kw)) - 1L)))] : 0.0f) * t_Wt[((((i_f) * e_Wt_1 + (i_r_c)) * e_Wt_2 + (i_r_kh)) * e_Wt_3 + (i_r_kw))]))));
                }
              }
              t_O[((((i_n) * e_O_1 + (i_f)) * e_O_2 + (i_h)) * e_O_3 + (i_w))] = po_acc;
            }
          }
        }
      }
      for (long c3 = 0L; c3 <= 2L; c3 += 1L) {  /* c2 */
        for (long c4 = 0L; c4 <= 2L; c4 += 1L) {  /* kh2 */
          if (((c1 + c4) >= 1L) && ((c1 + c4) <= 8L)) {
            { /* O_0_border */
              const long i_n = 0L;
              const long i_f = c0;
              const long i_h = c1;
              const long i_w = 7L;
              const long i_r_c = c3;
              const long i_r_kh = c4;
              const long i_r_kw = 2L;
              t_O[((((i_n) * e_O_1 + (i_f)) * e_O_2 + (i_h)) * e_O_3 + (i_w))] = ((float)(t_O[((((i_n) * e_O_1 + (i_f)) * e_O_2 + (i_h)) * e_O_3 + (i_w))] + ((float)(((0 <= i_n && i_n < e_I_0 && 0 <= i_r_c && i_r_c < e_I_1 && 0 <= (((1L * i_h) + (1L * i_r_kh)) - 1L) && (((1L * i_h) + (1L * i_r_kh)) - 1L) < e_I_2 && 0 <= (((1L * i_w) + (1L * i_r_kw)) - 1L) && (((1L * i_w) + (1L * i_r_kw)) - 1L) < e_I_3) ? t_I[((((i_n) * e_I_1 + (i_r_c)) * e_I_2 + ((((1L * i_h) + (1L * i_r_kh)) - 1L))) * e_I_3 + ((((1L * i_w) + (1L * i_r_kw)) - 1L)))] : 0.0f) * t_Wt[((((i_f) * e_Wt_1 + (i_r_c)) * e_Wt_2 + (i_r_kh)) * e_Wt_3 + (i_r_kw))]))));
            }
          } else {
            if ((c1 == 7L) && (c4 == 2L)) {
              { /* reduction of O_0_border */
                const long i_n = 0L;
                const long i_f = c0;
                const long i_h = 7L;
                const long i_w = 7L;
                float po_acc = t_O[((((i_n) * e_O_1 + (i_f)) * e_O_2 + (i_h)) * e_O_3 + (i_w))];
              #pragma omp simd reduction(+:po_acc)
                for (long c5 = 0L; c5 <= 2L; c5 += 1L) {
                  { /* O_0_border */
                    const long i_r_c = c3;
                    const long i_r_kh = 2L;
                    const long i_r_kw = c5;
                    po_acc = ((float)(po_acc + ((float)(((0 <= i_n && i_n < e_I_0 && 0 <= i_r_c && i_r_c < e_I_1 && 0 <= (((1L * i_h) + (1L * i_r_kh)) - 1L) && (((1L * i_h) + (1L * i_r_kh)) - 1L) < e_I_2 && 0 <= (((1L * i_w) + (1L * i_r_kw)) - 1L) && (((1L * i_w) + (1L * i_r_kw)) - 1L) < e_I_3) ? t_I[((((i_n) * e_I_1 + (i_r_c)) * e_I_2 + ((((1L * i_h) + (1L * i_r_kh)) - 1L))) * e_I_3 + ((((1L * i_w) + (1L * i_r_kw)) - 1L)))] : 0.0f) * t_Wt[((((i_f) * e_Wt_1 + (i_r_c)) * e_Wt_2 + (i_r_kh)) * e_Wt_3 + (i_r_kw))]))));
                  }
                }
                t_O[((((i_n) * e_O_1 + (i_f)) * e_O_2 + (i_h)) * e_O_3 + (i_w))] = po_acc;
              }
            } else {
              { /* reduction of O_0_border */
                const long i_n = 0L;
                const long i_f = c0;
                const long i_h = 0L;
                const long i_w = 7L;
                float po_acc = t_O[((((i_n) * e_O_1 + (i_f)) * e_O_2 + (i_h)) * e_O_3 + (i_w))];
              #pragma omp simd reduction(+:po_acc)
                for (long c5 = 0L; c5 <= 2L; c5 += 1L) {
                  { /* O_0_border */
                    const long i_r_c = c3;
                    const long i_r_kh = 0L;
                    const long i_r_kw = c5;
                    po_acc = ((float)(po_acc + ((float)(((0 <= i_n && i_n < e_I_0 && 0 <= i_r_c && i_r_c < e_I_1 && 0 <= (((1L * i_h) + (1L * i_r_kh)) - 1L) && (((1L * i_h) + (1L * i_r_kh)) - 1L) < e_I_2 && 0 <= (((1L * i_w) + (1L * i_r_kw)) - 1L) && (((1L * i_w) + (1L * i_r_kw)) - 1L) < e_I_3) ? t_I[((((i_n) * e_I_1 + (i_r_c)) * e_I_2 + ((((1L * i_h) + (1L * i_r_kh)) - 1L))) * e_I_3 + ((((1L * i_w) + (1L * i_r_kw)) - 1L)))] : 0.0f) * t_Wt[((((i_f) * e_Wt_1 + (i_r_c)) * e_Wt_2 + (i_r_kh)) * e_Wt_3 + (i_r_kw))]))));
                  }
                }
                t_O[((((i_n) * e_O_1 + (i_f)) * e_O_2 + (i_h)) * e_O_3 + (i_w))] = po_acc;
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
