/*
 * mask_apply_avx2.c - the masking pass with AVX2 (see mask_apply.h). Entered only after a
 * run-time CPU check.
 */
#include <immintrin.h>
#include <math.h>

#include "grammar/mask_apply.h"

size_t sift__gx_mask_apply_avx2(const sift_token *id, float *logit, size_t size, const uint64_t *mask, uint32_t n_tokens)
{
    const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i bitsel = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    const uint8_t *mb = (const uint8_t *)mask;
    size_t kept = 0, i = 0;
    for (; i + 8 <= size; i += 8) {
        __m256i ids = _mm256_loadu_si256((const __m256i *)(id + i));
        uint32_t base = (uint32_t)id[i];
        __m256i want = _mm256_add_epi32(_mm256_set1_epi32((int)base), iota);
        if ((base & 7) == 0 && base + 8 <= n_tokens &&
            _mm256_movemask_epi8(_mm256_cmpeq_epi32(ids, want)) == -1) {
            /* 8 consecutive ids on a byte boundary of the mask */
            uint32_t bits = mb[base >> 3];
            if (bits == 0xFF) {
                kept += 8;
                continue;
            }
            __m256i sel = _mm256_and_si256(_mm256_set1_epi32((int)bits), bitsel);
            __m256i off = _mm256_cmpeq_epi32(sel, _mm256_setzero_si256()); /* lanes to ban */
            _mm256_maskstore_ps(logit + i, off, ninf);
            kept += (size_t)__builtin_popcount(bits);
            continue;
        }
        for (size_t k = i; k < i + 8; k++) {
            uint32_t t = (uint32_t)id[k];
            bool ok = t < n_tokens && ((mask[t >> 6] >> (t & 63)) & 1);
            if (!ok) logit[k] = -INFINITY;
            kept += ok;
        }
    }
    for (; i < size; i++) {
        uint32_t t = (uint32_t)id[i];
        bool ok = t < n_tokens && ((mask[t >> 6] >> (t & 63)) & 1);
        if (!ok) logit[i] = -INFINITY;
        kept += ok;
    }
    return kept;
}
