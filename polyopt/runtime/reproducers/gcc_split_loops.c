/* GCC 12.2 -O3 (loop splitting with loop distribution) miscompiles this nest, which polyopt
   generated for a time-skewed jacobi-1d (kernels/stencil.tc): At(19, 0) is stored, then read
   back as Ao(0) in the same iteration; -O3 gives 0 instead of A(0) = 1. The program has no
   undefined behaviour (po_slice_Bt is cleared, every index is in range). -fno-split-loops
   (in runtime/compiler.py's DEFAULT_FLAGS) fixes it. main exits 0 when Ao(0) is right. */
#include <stdio.h>
#include <string.h>
static int kernel(void **bufs, const long *dims, long *err) {
  const float *restrict t_A = (const float *)bufs[0];
  const float *restrict t_B = (const float *)bufs[1];
  float *restrict t_Ao = (float *)bufs[2];
  float *restrict t_Bo = (float *)bufs[3];
  float *restrict t_At = (float *)bufs[4];
  float *restrict t_Bt = (float *)bufs[5];
  const long e_A_0 = 120L;
  const long e_B_0 = 120L;
  const long e_Ao_0 = 120L;
  const long e_Bo_0 = 120L;
  const long e_At_0 = 20L;
  const long e_At_1 = 120L;
  const long e_Bt_0 = 20L;
  const long e_Bt_1 = 120L;
  for (long c0 = 0L; c0 <= 19L; c0 += 1L) {  /* t */
    float po_slice_Bt[120]; memset(po_slice_Bt,0,sizeof po_slice_Bt);
    if (c0 == 19L) {
      { /* Bo_0 */
        const long i_i = 0L;
        t_Bo[(i_i)] = po_slice_Bt[(i_i)];
      }
    }
    for (long c1 = (2L * c0) + 1L; c1 <= ((2L * c0) + 119L); c1 += 1L) {  /* i */
      if ((c0 >= 1L) && (((2L * c0) + 118L) >= c1)) {
        { /* Bt_3 */
          const long i_t = c0;
          const long i_i = (-2L * c0) + c1;
          po_slice_Bt[(i_i)] = ((float)(0.33333f * ((float)(((float)(t_At[(((i_t - 1L)) * e_At_1 + ((i_i - 1L)))] + t_At[(((i_t - 1L)) * e_At_1 + (i_i))])) + t_At[(((i_t - 1L)) * e_At_1 + ((i_i + 1L)))]))));
        }
      }
      if (c0 == 19L) {
        { /* Bo_0 */
          const long i_i = c1 - 38L;
          t_Bo[(i_i)] = po_slice_Bt[(i_i)];
        }
      }
      if (c1 == ((2L * c0) + 1L)) {
        { /* At_0 */
          const long i_t = c0;
          const long i_i = 0L;
          t_At[((i_t) * e_At_1 + (i_i))] = t_A[(i_i)];
        }
      }
      if ((c0 == 0L) && (c1 <= 118L)) {
        { /* Bt_2 */
          const long i_t = 0L;
          const long i_i = c1;
          po_slice_Bt[(i_i)] = ((float)(0.33333f * ((float)(((float)(t_A[((i_i - 1L))] + t_A[(i_i)])) + t_A[((i_i + 1L))]))));
        }
      }
      if (c1 >= ((2L * c0) + 2L)) {
        { /* At_2 */
          const long i_t = c0;
          const long i_i = ((-2L * c0) + c1) - 1L;
          t_At[((i_t) * e_At_1 + (i_i))] = ((float)(0.33333f * ((float)(((float)(po_slice_Bt[((i_i - 1L))] + po_slice_Bt[(i_i)])) + po_slice_Bt[((i_i + 1L))]))));
        }
      }
      if (c0 == 19L) {
        { /* Ao_0 */
          const long i_i = c1 - 39L;
          t_Ao[(i_i)] = t_At[(((20L - 1L)) * e_At_1 + (i_i))];
        }
      }
      if (c1 == ((2L * c0) + 117L)) {
          } else {
        if (c1 == ((2L * c0) + 118L)) {
          { /* At_1 */
            const long i_t = c0;
            const long i_i = 119L;
            t_At[((i_t) * e_At_1 + (i_i))] = t_A[(i_i)];
          }
        }
      }
    }
    if (c0 == 19L) {
      { /* Ao_0 */
        const long i_i = 119L;
        t_Ao[(i_i)] = t_At[(((20L - 1L)) * e_At_1 + (i_i))];
      }
    }
  }
  (void)dims; (void)err;
  return 0;
}

#include <stdio.h>
int main(void){ static float A[120],B[120],Ao[120],Bo[120],At[20*120],Bt[1]; for(int i=0;i<120;i++){A[i]=i+1;B[i]=i+1;}
 void* bufs[6]={A,B,Ao,Bo,At,Bt}; long dims[16]={0}; long err=0; kernel(bufs,dims,&err); printf("%f\n",Ao[0]); return Ao[0] == 1.0f ? 0 : 1;}
