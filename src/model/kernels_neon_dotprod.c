/*
 * kernels_neon_dotprod.c - the NEON-dotprod table: kernels_neon.h's kernels with SDOT (four
 * 4-byte dot products into four 32-bit lanes, one instruction), compiled with
 * -march=armv8.2-a+dotprod and entered only after core/cpu.c found HWCAP_ASIMDDP
 * (Cortex-A55/A76 and later, Neoverse N1/V1/V2, Apple M1 and later).
 */
#include <arm_neon.h>

#if !defined(__ARM_FEATURE_DOTPROD)
#error "kernels_neon_dotprod.c needs -march=armv8.2-a+dotprod (sift_isa_flags() in cmake/layers.cmake)"
#endif

#define SIFT__NEON_DOT16(acc, a, b) vdotq_s32(acc, a, b)
#define SIFT__NEON_INIT sift__kernels_init_neon_dotprod

#include "model/kernels_neon.h"

void sift__kernels_init_neon_dotprod(sift__kernels *k)
{
    neon_fill(k);
}
