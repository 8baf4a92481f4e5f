/*
 * candidates.h - internal machinery behind sift_candidates: the workspace and the
 * llama.cpp-exact softmax / sort / selection primitives the built-in samplers share.
 *
 * Each primitive is named for the llama.cpp routine whose arithmetic it reproduces, so a
 * sampler can use exactly the recipe its llama.cpp counterpart uses:
 *
 *   sift__softmax             llama_sampler_softmax_impl: max (data[0] when sorted), p =
 *                             expf(logit - max) in array order, FLOAT running sum, p /= sum;
 *                             do_sort first sorts the whole array (exact llama order).
 *                             Claims SIFT_CAND_PROBS only up to SIFT__SOFTMAX_F32_EXACT_N
 *                             entries, where the float sum's rounding provably stays
 *                             within 1e-5 (the public sift_candidates_probs() uses a
 *                             double sum instead and is valid at any size).
 *   sift__partial_sort        llama_token_data_array_partial_sort_inplace: k <= 128 is
 *                             std::partial_sort over the array, larger k the 128-bucket
 *                             histogram partition + std::sort / std::partial_sort.
 *   sift__bucket_select       llama_token_data_array_partial_sort (out of place): the top k
 *                             as (key, index) pairs in the workspace, array left untouched.
 *   sift__gather              rearrange the arrays in the order of a pair list.
 *
 * The workspace (ws) is sized once with the arrays: pairs (sort keys + positions, also
 * reused as the doubles of std::discrete_distribution), one byte per entry for bucket
 * numbers, a spare set of id/logit/p arrays for gathers, and the fast paths' position
 * list and block sums. Nothing here allocates per call.
 */
#ifndef SIFT_CORE_CANDIDATES_H
#define SIFT_CORE_CANDIDATES_H

#include "core/fast_kernels.h"
#include "core/stlsort.h"
#include "sift.h"

/* The candidates' scratch: opaque in sift.h (a user sees only a pointer), defined here. */
struct sift_workspace {
    /* the arrays as sift_candidates_init() allocated them (NULL in a workspace lent for one
     * call): samplers may advance the candidates' pointers (xtc), fill and free use these */
    sift_token *own_id;
    float *own_logit, *own_p;
    size_t own_cap;

    size_t cap;
    sift__pair *pairs;   /* [cap] sort keys + positions; doubles for rng_discrete */
    uint8_t *bucket;    /* [cap] bucket number of each entry (bucket partial sort) */
    sift_token *id2;    /* [cap] spare arrays for gathers */
    float *logit2;
    float *p2;
    uint32_t *idx;      /* [cap + 64] positions the fast paths collect (core/fast.c); the
                         * slack lets SIMD kernels store whole vectors past the last one */
    double *blk;        /* [cap / SIFT__BLK + 2] dist's block sums (core/fast.c) */
};

/* Set by a sampler's apply that left the ids as it found them: the wrapper that called it
 * (sift__sampler_run) then keeps SIFT_CAND_IDENTITY, and clears this bit. Any apply that
 * does not set it loses SIFT_CAND_IDENTITY, so a sampler (a user's too) that knows nothing
 * of the flag can never leave a false claim behind. */
#define SIFT__CAND_IDS_KEPT 0x80000000u

/* Every sampler's apply goes through here (sift_sampler_apply, the chain's loops). */
static inline void sift__sampler_run(sift_sampler *s, sift_candidates *c)
{
    s->iface->apply(s, c);
    if (c->flags & SIFT__CAND_IDS_KEPT) c->flags &= ~SIFT__CAND_IDS_KEPT;
    else c->flags &= ~SIFT_CAND_IDENTITY;
}

sift_workspace *sift__ws_new(size_t cap);
void sift__ws_free(sift_workspace *ws);

/* The candidates' workspace if it can hold `size` entries, else NULL. */
static inline sift_workspace *sift__ws(sift_candidates *c)
{
    sift_workspace *ws = c->ws;
    return ws && ws->cap >= c->size ? ws : NULL;
}

/* size = n and the probabilities' validity dropped when anything was cut. */
static inline void sift__truncate(sift_candidates *c, size_t n)
{
    if (n < c->size) {
        c->size = n;
        c->flags &= ~SIFT_CAND_PROBS;
    }
}

/* llama.cpp's bucket of a logit: int(6.4f * v + 64.0f) clamped to [0, 127]. The int
 * conversion is x86's cvttss2si, which turns NaN and anything outside int range (+inf
 * included) into INT_MIN, i.e. bucket 0 - reproduced so such logits sort the same way. */
static inline uint8_t sift__bucket_of(float v)
{
    const float x = 6.4f * v + 64.0f;
    if (!(x >= 0.0f) || x >= 2147483648.0f) return 0;
    return x >= 127.0f ? 127 : (uint8_t)(int)x;
}

#define SIFT__SOFTMAX_F32_EXACT_N 160
void sift__softmax(sift_candidates *c, bool do_sort);
/* p[i] = expf(lg[i] - max_l) in array order; returns their DOUBLE running sum. The first half
 * of the double-sum softmax that sift_candidates_probs() and dist (sift__dist_core) share. */
double sift__exp_sum_d(const float *lg, size_t n, float max_l, float *p);
void sift__partial_sort(sift_candidates *c, size_t k);
/* The top k (k <= size) in ws->pairs[0..k) sorted descending, as llama.cpp's out-of-place
 * partial sort leaves them; ws->pairs[k..return value) hold the rest of the boundary
 * bucket and the buckets above it, unsorted. */
size_t sift__bucket_select(const sift_candidates *c, size_t k, sift_workspace *ws);
/* c[j] = old c[order[j].idx] for j < m (id, logit and p). */
void sift__gather(sift_candidates *c, const sift__pair *order, size_t m, sift_workspace *ws);

#endif
