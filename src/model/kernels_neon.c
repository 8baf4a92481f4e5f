/*
 * kernels_neon.c - the NEON table (ARMv8.0 Advanced SIMD, every aarch64 CPU): the kernels of
 * kernels_neon.h with the byte products done by SMULL / SMULL2 and pairwise widening adds,
 * since SDOT is an ARMv8.2 option (Cortex-A53/A72, the Raspberry Pi 3 and 4, lack it).
 */
#include <arm_neon.h>

/* four 32-bit sums of a[4i..4i+4) * b[4i..4i+4): two widening multiplies of eight byte pairs,
 * each pair of 16-bit products added into a 32-bit lane */
static inline int32x4_t neon_dot16(int32x4_t acc, int8x16_t a, int8x16_t b)
{
    const int16x8_t lo = vmull_s8(vget_low_s8(a), vget_low_s8(b)), hi = vmull_high_s8(a, b);
    return vpadalq_s16(vpadalq_s16(acc, lo), hi);
}
#define SIFT__NEON_DOT16(acc, a, b) neon_dot16(acc, a, b)
#define SIFT__NEON_INIT sift__kernels_init_neon

#include "model/kernels_neon.h"

void sift__kernels_init_neon(sift__kernels *k)
{
    neon_fill(k);
}
