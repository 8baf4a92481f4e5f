/* kernels_avx512.c - AVX-512 kernels (placeholder until written). */
#include "model/kernels.h"

void sift_kernels_init_avx512(sift_kernels *k)
{
    (void)k;
}
