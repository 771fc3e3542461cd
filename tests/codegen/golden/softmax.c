int polyopt_softmax(void **bufs, const long *dims, long *err) {
  const float *restrict t_X = (const float *)bufs[0];
  float *restrict t_Y = (float *)bufs[1];
  float *restrict t_mx = (float *)bufs[2];
  float *restrict t_E = (float *)bufs[3];
  float *restrict t_den = (float *)bufs[4];
  const long e_X_0 = 16L;
  const long e_X_1 = 10L;
  const long e_Y_0 = 16L;
  const long e_Y_1 = 10L;
  const long e_mx_0 = 16L;
  const long e_E_0 = 16L;
  const long e_E_1 = 10L;
  const long e_den_0 = 16L;
  for (long c0 = 0L; c0 <= 15L; c0 += 1L) {  /* n */
    float po_slice_mx[1];
    float po_slice_E[10];
    float po_slice_den[1];
    { /* mx_0_init */
      const long i_n = c0;
      po_slice_mx[0] = (-INFINITY);
    }
    { /* reduction of mx_0 */
      const long i_n = c0;
      float po_acc = po_slice_mx[0];
      int po_nan = po_acc != po_acc;
    #pragma omp simd reduction(max:po_acc) reduction(|:po_nan) simdlen(8)
      for (long c1 = 0L; c1 <= 9L; c1 += 1L) {
        { /* mx_0 */
          const long i_r_d = c1;
          const float po_x = t_X[((i_n) * e_X_1 + (i_r_d))];
          po_acc = po_x > po_acc ? po_x : po_acc;
          po_nan |= po_x != po_x;
        }
      }
      po_slice_mx[0] = po_nan ? (float)NAN : po_acc;
    }
    {
      const float po_h0 = po_slice_mx[0];
#pragma omp simd simdlen(8)
    for (long c1 = 0L; c1 <= 9L; c1 += 1L) {  /* d2 */
      { /* E_0 */
        const long i_n = c0;
        const long i_d = c1;
        po_slice_E[(i_d)] = ((float)expf(((float)(((float)(t_X[((i_n) * e_X_1 + (i_d))] - po_h0))))));
      }
    }
    }
    { /* den_0_init */
      const long i_n = c0;
      po_slice_den[0] = 0.0f;
    }
    { /* reduction of den_0 */
      const long i_n = c0;
      float po_acc = po_slice_den[0];
    #pragma omp simd reduction(+:po_acc) simdlen(8)
      for (long c1 = 0L; c1 <= 9L; c1 += 1L) {
        { /* den_0 */
          const long i_r_d = c1;
          po_acc = ((float)(po_acc + po_slice_E[(i_r_d)]));
        }
      }
      po_slice_den[0] = po_acc;
    }
    {
      const float po_h0 = po_slice_den[0];
#pragma omp simd simdlen(8)
    for (long c1 = 0L; c1 <= 9L; c1 += 1L) {  /* d4 */
      { /* Y_0 */
        const long i_n = c0;
        const long i_d = c1;
        t_Y[((i_n) * e_Y_1 + (i_d))] = ((float)(po_slice_E[(i_d)] / po_h0));
      }
    }
    }
  }
  (void)dims; (void)err;
  return 0;
}
