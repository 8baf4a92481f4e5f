/*
 * mask_apply_neon.c - the masking pass with aarch64 NEON (see mask_apply.h). NEON is part of
 * every aarch64 CPU, so this file needs no flag and no run-time check beyond the level
 * (core/cpu.c); it exists only in an aarch64 build (cmake/layers.cmake).
 *
 * The same shape as the AVX2 version, four lanes at a time: a fresh fill's layout
 * (id[i] == i) is recognised 64 candidates at a time by XOR-ing sixteen id vectors with the
 * vector of the ids they should be (one horizontal max at the end, no scalar load on the
 * path); an all-ones mask word writes nothing, a zero nibble stores four -inf, any other
 * nibble selects -inf into its four logits (BSL) and stores them back. Other blocks look
 * ids up one by one. With `ident` the caller vouches for the layout and no id is read.
 * aarch64 has a population count for 64-bit words (CNT + ADDV), so count and compact are
 * the portable code.
 */
#include <arm_neon.h>
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

size_t sift__gx_mask_apply_neon(const sift_token *id, float *logit, size_t size, const uint64_t *mask, uint32_t n_tokens,
                                bool ident)
{
    static const uint32_t bits4[4] = {1, 2, 4, 8}, lane4[4] = {0, 1, 2, 3};
    const uint32x4_t bitsel = vld1q_u32(bits4), step4 = vdupq_n_u32(4);
    const float32x4_t ninf = vdupq_n_f32(-INFINITY);
    uint32x4_t want = vld1q_u32(lane4); /* i + lane */
    size_t kept = 0, i = 0;
    size_t ident_end = size < n_tokens ? size : n_tokens; /* identity blocks hold valid ids only */
    for (; i + 64 <= ident_end; i += 64) {
        bool block_ident = ident;
        if (!ident) {
            uint32x4_t d = vdupq_n_u32(0), w = want;
            for (size_t j = 0; j < 64; j += 4, w = vaddq_u32(w, step4))
                d = vorrq_u32(d, veorq_u32(vld1q_u32((const uint32_t *)(id + i + j)), w));
            want = w;
            block_ident = vmaxvq_u32(d) == 0;
        }
        if (block_ident) {
            uint64_t bits = mask[i >> 6];
            kept += (size_t)__builtin_popcountll(bits);
            if (bits == ~(uint64_t)0) continue;
            for (size_t j = 0; j < 64; j += 4) {
                uint32_t nib = (uint32_t)(bits >> j) & 0xF;
                if (nib == 0xF) continue;
                if (nib == 0) { /* the usual case under a grammar: all four banned */
                    vst1q_f32(logit + i + j, ninf);
                    continue;
                }
                const uint32x4_t off = vceqq_u32(vandq_u32(vdupq_n_u32(nib), bitsel), vdupq_n_u32(0)); /* lanes to ban */
                vst1q_f32(logit + i + j, vbslq_f32(off, ninf, vld1q_f32(logit + i + j)));
            }
            continue;
        }
        for (size_t k = i; k < i + 64; k++) kept += apply_one(id, logit, k, mask, n_tokens);
    }
    for (; i < size; i++) kept += ident ? apply_ident(logit, i, mask) : apply_one(id, logit, i, mask, n_tokens);
    return kept;
}

static size_t count_neon(const uint64_t *mask, size_t size, size_t limit)
{
    return sift__gx_mask_count_impl(mask, size, limit);
}
static size_t compact_neon(sift_token *id, float *logit, size_t size, const uint64_t *mask)
{
    return sift__gx_mask_compact_impl(id, logit, size, mask);
}
const sift__gx_mask_ops sift__gx_mask_ops_neon = {sift__gx_mask_apply_neon, count_neon, compact_neon};
