/*
 * radix_select.h - floats as ordered keys and the three radix levels of a selection
 * (top_k, top_p, min_p's fallback): what a level's histogram decides, on the device and in
 * the host reference alike.
 *
 * Selection (top_k, top_p, min_p's fallback). A float's key (sign-flipped bits, -0 folded
 * into +0) orders like the float. Three passes histogram the key's bits 31..21, 20..10 and
 * 9..0 (2048, 2048, 1024 bins) over the elements that match the prefix decided so far; the
 * last block to finish a pass decides the next digit. Every bin carries a count and a
 * mass: the probability exp(l - max) in 64-bit fixed point (2^-43 units), so that sums are
 * integer sums - exact and independent of the order atomics land in, hence deterministic
 * and identical on the host. A criterion is a count target (top_k's k, min_keep) or a mass
 * target (top_p: ceil(p * total)); each level picks the first bin, from the top, where the
 * running total reaches the target. After three levels the exact key at the cut and the
 * number of its ties to keep are known; ties are kept in position (= token id) order.
 * A compaction (count pass, then a write pass at per-block offsets) keeps the elements
 * above the key and the first `need` ties.
 */
#ifndef SIFT_GPU_RADIX_SELECT_H
#define SIFT_GPU_RADIX_SELECT_H

#include "gpu/device_types.h"

/* ---- floats as ordered keys ------------------------------------------------------------------ */

SIFT_HD uint32_t sift__gpu_f2u(float x)
{
#ifdef __CUDA_ARCH__
    return __float_as_uint(x);
#else
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
#endif
}

SIFT_HD float sift__gpu_u2f(uint32_t u)
{
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    float x;
    memcpy(&x, &u, 4);
    return x;
#endif
}

/* Unsigned key that orders like the float (a < b <=> key(a) < key(b) for non-NaN), with
 * -0 and +0 the same key, as they compare equal. */
SIFT_HD uint32_t sift__gpu_key(float x)
{
    uint32_t u = sift__gpu_f2u(x);
    if (u == 0x80000000u) u = 0;
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/* The float of a key (+0 for the folded -0). */
SIFT_HD float sift__gpu_unkey(uint32_t k)
{
    return sift__gpu_u2f((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

/* ---- radix levels -------------------------------------------------------------------------------- */

SIFT_HD int sift__gpu_level_bits(int level) { return level == 2 ? 10 : 11; }
SIFT_HD int sift__gpu_level_shift(int level) { return level == 0 ? 21 : level == 1 ? 10 : 0; }
SIFT_HD int sift__gpu_level_nbins(int level) { return 1 << sift__gpu_level_bits(level); }

/* Does key belong to the level's histogram (its higher bits are the decided prefix)? */
SIFT_HD int sift__gpu_level_match(uint32_t key, int level, uint32_t prefix)
{
    return level == 0 || (key >> (sift__gpu_level_shift(level) + sift__gpu_level_bits(level))) == prefix;
}

SIFT_HD uint32_t sift__gpu_level_digit(uint32_t key, int level)
{
    return (key >> sift__gpu_level_shift(level)) & ((1u << sift__gpu_level_bits(level)) - 1u);
}

/* exp(l - max) in fixed point, rounded to nearest: exact in double (a float times 2^43 is
 * exact, and below 2^53) and the same on host and device. */
SIFT_HD sift__gpu_m64 sift__gpu_mass(float e) { return (sift__gpu_m64)((double)e * SIFT_GPU_MASS_ONE + 0.5); }

/* top_p's target: the smallest mass m with m / total >= p, at least 1 (the top element has
 * mass 2^43), at most the total. */
SIFT_HD sift__gpu_m64 sift__gpu_mass_target(float p, sift__gpu_m64 total)
{
    double t = ceil((double)p * (double)total);
    sift__gpu_m64 m = t <= 1.0 ? 1u : t >= (double)total ? total : (sift__gpu_m64)t;
    return m < total ? m : total;
}

/* Where a criterion is met: the bin and the totals of the bins above it (including what
 * was above the level's range). bin -1: not in the range walked. */
typedef struct sift__gpu_cross {
    int32_t bin;
    uint32_t c_before;
    sift__gpu_m64 m_before;
} sift__gpu_cross;

/* Walk bins hi, hi-1, ..., lo of a level (descending keys) with running totals starting at
 * (c0, m0), and record the first bin at which each criterion of `sel` is reached. The host
 * walks a level's whole range at once; on the device each thread walks its own slice,
 * started at the exclusive prefix sums of the slices above it (integers, so both give the
 * same bins). */
SIFT_HD void sift__gpu_walk(const sift__gpu_sel *sel, const uint32_t *cnt, const sift__gpu_m64 *mass, int hi, int lo,
                           uint32_t c0, sift__gpu_m64 m0, sift__gpu_cross *ck, sift__gpu_cross *cm)
{
    uint32_t c = c0;
    sift__gpu_m64 m = m0;
    for (int b = hi; b >= lo; b--) {
        const uint32_t c1 = c + cnt[b];
        const sift__gpu_m64 m1 = m + mass[b];
        if ((sel->active & SIFT_GPU_SEL_COUNT) && ck->bin < 0 && c < sel->k && c1 >= sel->k) {
            ck->bin = b;
            ck->c_before = c;
            ck->m_before = m;
        }
        if ((sel->active & SIFT_GPU_SEL_MASS) && cm->bin < 0 && m < sel->mass_t && m1 >= sel->mass_t) {
            cm->bin = b;
            cm->c_before = c;
            cm->m_before = m;
        }
        c = c1;
        m = m1;
    }
}

/* Advance a selection by one level from where its active criteria were met (bin -1: never
 * within this level). Returns 1 when nothing is to be cut (a target lies beyond the whole
 * list: keep everything), else 0. After level 2, *thr and *need hold the cut: keep keys
 * above *thr and the first *need entries whose key equals it. cnt/mass are the level's
 * histogram (the final bin's mass / count is the one mass every tie has). */
SIFT_HD int sift__gpu_sel_advance(sift__gpu_sel *s, const sift__gpu_cross *ck, const sift__gpu_cross *cm,
                                 const uint32_t *cnt, const sift__gpu_m64 *mass, uint32_t *thr, int32_t *need)
{
    const int use_k = (s->active & SIFT_GPU_SEL_COUNT) != 0;
    const int use_m = (s->active & SIFT_GPU_SEL_MASS) != 0;
    if ((use_k && ck->bin < 0) || (use_m && cm->bin < 0) || (!use_k && !use_m)) return 1;
    /* the later cut (the lower bin) satisfies both criteria; only those met in it go on */
    const sift__gpu_cross *c = use_k ? ck : cm;
    if (use_k && use_m && cm->bin < ck->bin) c = cm;
    const int b = c->bin;
    uint32_t active = 0;
    if (use_k && ck->bin == b) active |= SIFT_GPU_SEL_COUNT;
    if (use_m && cm->bin == b) active |= SIFT_GPU_SEL_MASS;
    s->active = active;
    s->above = c->c_before;
    s->mass_above = c->m_before;
    s->prefix = (s->prefix << sift__gpu_level_bits(s->level)) | (uint32_t)b;
    s->level++;
    if (s->level < 3) return 0;
    /* the key is exact: how many of its ties are needed */
    const sift__gpu_m64 n_eq = cnt[b];
    sift__gpu_m64 nd = 1;
    if (active & SIFT_GPU_SEL_COUNT) {
        const sift__gpu_m64 want = s->k - s->above; /* >= 1: the count target lies in this bin */
        if (want > nd) nd = want;
    }
    if ((active & SIFT_GPU_SEL_MASS) && n_eq > 0 && mass[b] > 0) {
        const sift__gpu_m64 each = mass[b] / n_eq; /* every tie has the same logit, so the same mass */
        const sift__gpu_m64 want = (s->mass_t - s->mass_above + each - 1) / each;
        if (want > nd) nd = want;
    }
    *thr = s->prefix;
    *need = (int32_t)(nd < n_eq ? nd : n_eq);
    return 0;
}

#endif
