/*
 * mask_apply.c - the portable version of the masking pass and the run-time dispatch (see
 * mask_apply.h). The dispatch asks core/cpu.h, whose levels are the flag sets the
 * *_avx2.c / *_avx512.c files are compiled with.
 */
#include <math.h>

#include "core/cpu.h"
#include "grammar/mask_apply.h"

size_t sift__gx_mask_apply_scalar(const sift_token *id, float *logit, size_t size, const uint64_t *mask, uint32_t n_tokens)
{
    size_t kept = 0;
    for (size_t i = 0; i < size; i++) {
        uint32_t t = (uint32_t)id[i];
        bool ok = t < n_tokens && ((mask[t >> 6] >> (t & 63)) & 1);
        if (!ok) logit[i] = -INFINITY;
        kept += ok;
    }
    return kept;
}

sift__gx_mask_apply_fn sift__gx_mask_apply_best(void)
{
    switch (sift__cpu_get()->best) {
    case SIFT_ISA_AVX512: return sift__gx_mask_apply_avx512;
    case SIFT_ISA_AVX2: return sift__gx_mask_apply_avx2;
    default: return sift__gx_mask_apply_scalar;
    }
}
