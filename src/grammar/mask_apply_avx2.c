/*
 * mask_apply_avx2.c - the masking pass with AVX2 (see mask_apply.h). Entered only after a
 * run-time CPU check.
 *
 * As the AVX-512 version: a fresh fill's layout (id[i] == i) is taken 64 candidates at a
 * time against one 64-bit mask word (eight id loads compared with a running vector of the
 * ids they should be, no scalar load on the path); an all-ones word writes nothing, an
 * all-zero mask byte stores eight -inf, any other byte blends -inf into its eight logits
 * and stores them back. Not vmaskmovps: on AMD's Zen cores a masked store is microcoded,
 * about ten cycles each, and with 12,800 of them per 102,400-token mask it was most of a
 * mask's time (MaskBench TBM p50 65 us on Zen 3). Other blocks look ids up one by one.
 * With `ident` the caller vouches for the fill's layout and no id is read at all.
 */
#include <immintrin.h>
#include <math.h>

#include "grammar/mask_apply.h"

static inline size_t apply_one(const sift_token *id, float *logit, size_t k, const uint64_t *mask, uint32_t n_tokens)
{
    uint32_t t = (uint32_t)id[k];
    bool ok = t < n_tokens && ((mask[t >> 6] >> (t & 63)) & 1);
    if (!ok) logit[k] = -INFINITY;
    return ok;
}

static inline size_t apply_ident(float *logit, size_t k, const uint64_t *mask)
{
    bool ok = (mask[k >> 6] >> (k & 63)) & 1;
    if (!ok) logit[k] = -INFINITY;
    return ok;
}

/* The kernels start on a cache line (GX_HOT_ALIGN, mask_apply.h): their loops then sit the
 * same way whatever code is linked before them. */
GX_HOT_ALIGN size_t sift__gx_mask_apply_avx2(const sift_token *id, float *logit, size_t size, const uint64_t *mask, uint32_t n_tokens,
                                bool ident)
{
    const __m256i bitsel = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    const __m256i step8 = _mm256_set1_epi32(8);
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    __m256i want = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7); /* i + lane */
    size_t kept = 0, i = 0;
    size_t ident_end = size < n_tokens ? size : n_tokens; /* identity blocks hold valid ids only */
    for (; i + 64 <= ident_end; i += 64) {
        bool block_ident = ident;
        if (!ident) {
            __m256i d = _mm256_setzero_si256(), w = want;
            for (size_t j = 0; j < 64; j += 8, w = _mm256_add_epi32(w, step8))
                d = _mm256_or_si256(d, _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(id + i + j)), w));
            want = w;
            block_ident = _mm256_testz_si256(d, d);
        }
        if (block_ident) {
            uint64_t bits = mask[i >> 6];
            kept += (size_t)__builtin_popcountll(bits);
            if (bits == ~(uint64_t)0) continue;
            for (size_t j = 0; j < 64; j += 8) {
                uint32_t byte = (uint32_t)(bits >> j) & 0xFF;
                if (byte == 0xFF) continue;
                if (byte == 0) { /* the usual case under a grammar: all eight banned */
                    _mm256_storeu_ps(logit + i + j, ninf);
                    continue;
                }
                __m256i sel = _mm256_and_si256(_mm256_set1_epi32((int)byte), bitsel);
                __m256i off = _mm256_cmpeq_epi32(sel, _mm256_setzero_si256()); /* lanes to ban */
                _mm256_storeu_ps(logit + i + j, _mm256_blendv_ps(_mm256_loadu_ps(logit + i + j), ninf, _mm256_castsi256_ps(off)));
            }
            continue;
        }
        for (size_t k = i; k < i + 64; k++) kept += apply_one(id, logit, k, mask, n_tokens);
    }
    for (; i < size; i++) kept += ident ? apply_ident(logit, i, mask) : apply_one(id, logit, i, mask, n_tokens);
    return kept;
}

GX_HOT_ALIGN static size_t count_avx2(const uint64_t *mask, size_t size, size_t limit)
{
    return sift__gx_mask_count_impl(mask, size, limit);
}
GX_HOT_ALIGN static size_t compact_avx2(sift_token *id, float *logit, size_t size, const uint64_t *mask)
{
    return sift__gx_mask_compact_impl(id, logit, size, mask);
}
const sift__gx_mask_ops sift__gx_mask_ops_avx2 = {sift__gx_mask_apply_avx2, count_avx2, compact_avx2};
