/* kernels_avx2.c - AVX2 kernels (placeholder until written). */
#include "model/kernels.h"

void sift_kernels_init_avx2(sift_kernels *k)
{
    (void)k;
}
