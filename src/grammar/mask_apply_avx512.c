/*
 * mask_apply_avx512.c - the masking pass with AVX-512 (F, BW, VL; see mask_apply.h). Entered
 * only after a run-time CPU check.
 */
#include <immintrin.h>
#include <math.h>

#include "grammar/mask_apply.h"

size_t sift__gx_mask_apply_avx512(const sift_token *id, float *logit, size_t size, const uint64_t *mask, uint32_t n_tokens)
{
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    const uint16_t *mw = (const uint16_t *)mask;
    size_t kept = 0, i = 0;
    for (; i + 16 <= size; i += 16) {
        __m512i ids = _mm512_loadu_si512((const void *)(id + i));
        uint32_t base = (uint32_t)id[i];
        __m512i want = _mm512_add_epi32(_mm512_set1_epi32((int)base), iota);
        if ((base & 15) == 0 && base + 16 <= n_tokens && _mm512_cmpeq_epi32_mask(ids, want) == 0xFFFF) {
            __mmask16 bits = (__mmask16)mw[base >> 4];
            _mm512_mask_storeu_ps(logit + i, (__mmask16)~bits, ninf);
            kept += (size_t)__builtin_popcount(bits);
            continue;
        }
        /* general layout: gather the 32-bit mask words of the 16 ids */
        __m512i in_range = _mm512_set1_epi32((int)n_tokens);
        __mmask16 valid = _mm512_cmplt_epu32_mask(ids, in_range);
        __m512i word = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), valid, _mm512_srli_epi32(ids, 5),
                                                   (const void *)mask, 4);
        __m512i bit = _mm512_srlv_epi32(word, _mm512_and_si512(ids, _mm512_set1_epi32(31)));
        __mmask16 ok = _mm512_mask_test_epi32_mask(valid, bit, _mm512_set1_epi32(1));
        _mm512_mask_storeu_ps(logit + i, (__mmask16)~ok, ninf);
        kept += (size_t)__builtin_popcount(ok);
    }
    for (; i < size; i++) {
        uint32_t t = (uint32_t)id[i];
        bool ok = t < n_tokens && ((mask[t >> 6] >> (t & 63)) & 1);
        if (!ok) logit[i] = -INFINITY;
        kept += ok;
    }
    return kept;
}
