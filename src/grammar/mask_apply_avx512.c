/*
 * mask_apply_avx512.c - the masking pass with AVX-512 (F, BW, VL; see mask_apply.h). Entered
 * only after a run-time CPU check.
 *
 * The common layout is a fresh fill: id[i] == i over the whole array. That case is taken 64
 * candidates at a time, against one 64-bit mask word: four id loads XOR-ed with the ids they
 * should be (i, i+1, ...; a running vector, so no scalar load sits on the path) and one test
 * say whether the block is in that layout; then a mask word of all ones (inside a JSON
 * string, most words) writes nothing, and any other word does four masked stores of -inf.
 * This pass reads the 400 KB of ids of a 100k vocabulary, so it is a fixed cost of every
 * grammar mask: per 16 ids a scalar load, a compare and a branch made it ~9 us (MaskBench,
 * half the median TBM); the 64-wide loop streams the ids at close to the cache's rate.
 * Any other block (sorted, truncated or shifted arrays) looks each id up with a gather.
 * With `ident` the caller vouches for the fill's layout and no id is read at all.
 */
#include <immintrin.h>
#include <math.h>

#include "grammar/mask_apply.h"

/* 16 candidates in any layout: gather the 32-bit mask words of their ids. */
static inline size_t apply16_any(const sift_token *id, float *logit, const uint64_t *mask, uint32_t n_tokens)
{
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    __m512i ids = _mm512_loadu_si512((const void *)id);
    __mmask16 valid = _mm512_cmplt_epu32_mask(ids, _mm512_set1_epi32((int)n_tokens));
    __m512i word = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), valid, _mm512_srli_epi32(ids, 5), (const void *)mask, 4);
    __m512i bit = _mm512_srlv_epi32(word, _mm512_and_si512(ids, _mm512_set1_epi32(31)));
    __mmask16 ok = _mm512_mask_test_epi32_mask(valid, bit, _mm512_set1_epi32(1));
    _mm512_mask_storeu_ps(logit, (__mmask16)~ok, ninf);
    return (size_t)__builtin_popcount(ok);
}

GX_HOT_ALIGN size_t sift__gx_mask_apply_avx512(const sift_token *id, float *logit, size_t size, const uint64_t *mask, uint32_t n_tokens,
                                  bool ident)
{
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    const __m512i step16 = _mm512_set1_epi32(16), step64 = _mm512_set1_epi32(64);
    __m512i want = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15); /* i + lane */
    size_t kept = 0, i = 0;
    /* identity blocks lie below n_tokens (i + 64 <= n_tokens), so every id there is valid */
    size_t ident_end = size < n_tokens ? size : n_tokens;
    for (; i + 64 <= ident_end; i += 64, want = _mm512_add_epi32(want, step64)) {
        bool block_ident = ident;
        if (!ident) {
            __m512i w1 = _mm512_add_epi32(want, step16), w2 = _mm512_add_epi32(w1, step16), w3 = _mm512_add_epi32(w2, step16);
            __m512i d0 = _mm512_xor_si512(_mm512_loadu_si512((const void *)(id + i)), want);
            __m512i d1 = _mm512_xor_si512(_mm512_loadu_si512((const void *)(id + i + 16)), w1);
            __m512i d2 = _mm512_xor_si512(_mm512_loadu_si512((const void *)(id + i + 32)), w2);
            __m512i d3 = _mm512_xor_si512(_mm512_loadu_si512((const void *)(id + i + 48)), w3);
            __m512i d = _mm512_or_si512(_mm512_or_si512(d0, d1), _mm512_or_si512(d2, d3));
            block_ident = _mm512_test_epi32_mask(d, d) == 0;
        }
        if (block_ident) {
            uint64_t bits = mask[i >> 6];
            kept += (size_t)__builtin_popcountll(bits);
            if (bits == ~(uint64_t)0) continue;
            uint64_t off = ~bits;
            _mm512_mask_storeu_ps(logit + i, (__mmask16)off, ninf);
            _mm512_mask_storeu_ps(logit + i + 16, (__mmask16)(off >> 16), ninf);
            _mm512_mask_storeu_ps(logit + i + 32, (__mmask16)(off >> 32), ninf);
            _mm512_mask_storeu_ps(logit + i + 48, (__mmask16)(off >> 48), ninf);
            continue;
        }
        for (size_t k = i; k < i + 64; k += 16) kept += apply16_any(id + k, logit + k, mask, n_tokens);
    }
    if (!ident)
        for (; i + 16 <= size; i += 16) kept += apply16_any(id + i, logit + i, mask, n_tokens);
    for (; i < size; i++) {
        uint32_t t = ident ? (uint32_t)i : (uint32_t)id[i];
        bool ok = t < n_tokens && ((mask[t >> 6] >> (t & 63)) & 1);
        if (!ok) logit[i] = -INFINITY;
        kept += ok;
    }
    return kept;
}

GX_HOT_ALIGN static size_t count_avx512(const uint64_t *mask, size_t size, size_t limit)
{
    return sift__gx_mask_count_impl(mask, size, limit);
}
GX_HOT_ALIGN static size_t compact_avx512(sift_token *id, float *logit, size_t size, const uint64_t *mask)
{
    return sift__gx_mask_compact_impl(id, logit, size, mask);
}
const sift__gx_mask_ops sift__gx_mask_ops_avx512 = {sift__gx_mask_apply_avx512, count_avx512, compact_avx512};
