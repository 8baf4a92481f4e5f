/*
 * mask_apply.h - apply a token bitset to a candidates array.
 *
 * Two ways, chosen per call by the grammar sampler (grammar_sampler.c):
 *
 *   remove   the allowed candidates move to the front, in their order, and size shrinks to
 *            their number. Only for the fill's layout (id[i] == i, SIFT_CAND_IDENTITY) and a
 *            sparse mask: the pass then walks the set bits of the mask alone (12.8 KB at
 *            102,400 tokens) and touches one id and one logit per allowed token, where the
 *            in-place pass below must write -inf over most of a 400 KB logit array. Under a
 *            JSON grammar most positions allow a few dozen tokens, and the rest of the chain
 *            then works on those alone.
 *   -inf     every candidate whose id is not in the set gets logit -inf, in place (llama.cpp's
 *            layout, and the cheaper way when most tokens are allowed: an all-ones mask word
 *            writes nothing). This pass has SIMD versions (AVX2, AVX-512; NEON on aarch64) chosen at run time
 *            (core/cpu.h); all give identical results (tests/test_grammar_sampler.c). With
 *            `ident` the caller vouches for the fill's layout and the ids are not read; else
 *            that layout is still detected 64 candidates at a time (one mask word per block),
 *            and any other block looks each id up.
 */
#ifndef SIFT_GRAMMAR_MASK_APPLY_H
#define SIFT_GRAMMAR_MASK_APPLY_H

#include <stddef.h>
#include <stdint.h>

#include "sift.h"

/* Where a masking kernel starts: on a cache line. Their inner loops run 1,600 times a mask,
 * and where they fell relative to 32 / 64-byte boundaries moved with whatever was linked
 * before them: an unrelated change shifted the AVX2 kernel by 112 bytes and MaskBench's TBM
 * p25 from 5.7 to 6.6-8.3 us on Zen 3 (the same code, interleaved runs). */
#define GX_HOT_ALIGN __attribute__((aligned(64)))

/* The -inf pass. ids >= n_tokens (or negative) count as not allowed. `ident`: id[i] == i
 * for every i < size <= n_tokens (then id is not read). Returns the number of candidates
 * that were allowed. */
typedef size_t (*sift__gx_mask_apply_fn)(const sift_token *id, float *logit, size_t size, const uint64_t *mask,
                                   uint32_t n_tokens, bool ident);

size_t sift__gx_mask_apply_scalar(const sift_token *id, float *logit, size_t size, const uint64_t *mask, uint32_t n_tokens,
                                  bool ident);
size_t sift__gx_mask_apply_avx2(const sift_token *id, float *logit, size_t size, const uint64_t *mask, uint32_t n_tokens,
                                bool ident);
size_t sift__gx_mask_apply_avx512(const sift_token *id, float *logit, size_t size, const uint64_t *mask, uint32_t n_tokens,
                                  bool ident);
size_t sift__gx_mask_apply_neon(const sift_token *id, float *logit, size_t size, const uint64_t *mask, uint32_t n_tokens,
                                bool ident);

/* How many of tokens [0, size) the mask allows - or, once that passes `limit`, any number
 * above it (a dense mask stops after a few hundred words). */
typedef size_t (*sift__gx_mask_count_fn)(const uint64_t *mask, size_t size, size_t limit);
/* The removal, for candidates in the fill's layout (id[i] == i for i < size): the allowed
 * ones move to the front in id order (id[j] = t, logit[j] = logit[t]; p is not moved).
 * Returns their number, the new size. */
typedef size_t (*sift__gx_mask_compact_fn)(sift_token *id, float *logit, size_t size, const uint64_t *mask);

/* The three, as one CPU level runs them. count and compact are the portable code below
 * compiled at each level: what they need is POPCNT and TZCNT, which plain x86-64 lacks
 * (there __builtin_popcountll is a libgcc call, ~5 us per 102,400-token mask). */
typedef struct {
    sift__gx_mask_apply_fn apply;
    sift__gx_mask_count_fn count;
    sift__gx_mask_compact_fn compact;
} sift__gx_mask_ops;

/* (the AVX ones exist only in an x86-64 build, the NEON one only in an aarch64 one) */
extern const sift__gx_mask_ops sift__gx_mask_ops_scalar, sift__gx_mask_ops_avx2, sift__gx_mask_ops_avx512;
extern const sift__gx_mask_ops sift__gx_mask_ops_neon;

/* The best version this CPU runs. */
const sift__gx_mask_ops *sift__gx_mask_ops_best(void);

static inline size_t sift__gx_mask_count_impl(const uint64_t *mask, size_t size, size_t limit)
{
    size_t n = 0, w = 0;
    for (; (w + 1) * 64 <= size; w++) {
        n += (size_t)__builtin_popcountll(mask[w]);
        if ((w & 15) == 15 && n > limit) return n;
    }
    if (size & 63) n += (size_t)__builtin_popcountll(mask[w] & (((uint64_t)1 << (size & 63)) - 1));
    return n;
}

static inline size_t sift__gx_mask_compact_impl(sift_token *id, float *logit, size_t size, const uint64_t *mask)
{
    /* t >= j throughout, so moving forward in place never overwrites a logit still to read */
    size_t j = 0;
    for (size_t w = 0; w * 64 < size; w++) {
        uint64_t bits = mask[w];
        if ((w + 1) * 64 > size) bits &= ((uint64_t)1 << (size & 63)) - 1;
        for (; bits; bits &= bits - 1, j++) {
            const size_t t = w * 64 + (size_t)__builtin_ctzll(bits);
            id[j] = (sift_token)t;
            logit[j] = logit[t];
        }
    }
    return j;
}

#endif
