/*
 * mask_apply.c - the portable version of the masking pass and the run-time dispatch (see
 * mask_apply.h). The dispatch asks core/cpu.h, whose levels are the flag sets the
 * *_avx2.c / *_avx512.c files are compiled with.
 */
#include <math.h>

#include "core/cpu.h"
#include "grammar/mask_apply.h"

size_t sift__gx_mask_apply_scalar(const sift_token *id, float *logit, size_t size, const uint64_t *mask, uint32_t n_tokens,
                                  bool ident)
{
    size_t kept = 0;
    for (size_t i = 0; i < size; i++) {
        uint32_t t = ident ? (uint32_t)i : (uint32_t)id[i];
        bool ok = t < n_tokens && ((mask[t >> 6] >> (t & 63)) & 1);
        if (!ok) logit[i] = -INFINITY;
        kept += ok;
    }
    return kept;
}

static size_t count_scalar(const uint64_t *mask, size_t size, size_t limit)
{
    return sift__gx_mask_count_impl(mask, size, limit);
}
static size_t compact_scalar(sift_token *id, float *logit, size_t size, const uint64_t *mask)
{
    return sift__gx_mask_compact_impl(id, logit, size, mask);
}
const sift__gx_mask_ops sift__gx_mask_ops_scalar = {sift__gx_mask_apply_scalar, count_scalar, compact_scalar};

const sift__gx_mask_ops *sift__gx_mask_ops_best(void)
{
    switch (sift__cpu_get()->best) {
#if defined(__x86_64__)
    case SIFT_ISA_AVX512: return &sift__gx_mask_ops_avx512;
    case SIFT_ISA_AVX2: return &sift__gx_mask_ops_avx2;
#elif defined(__aarch64__)
    case SIFT_ISA_NEON:
    case SIFT_ISA_NEON_DOTPROD: return &sift__gx_mask_ops_neon;
#endif
    default: return &sift__gx_mask_ops_scalar;
    }
}
