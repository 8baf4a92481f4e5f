/*
 * sampler_math.h - the CPU samplers' arithmetic, written once for the device and the host
 * reference: per-element values (penalties, pending temperatures, the tail's sort key) and
 * the sequential loops one thread runs (top_p's running sum, min_p's cut, dist's walk, the
 * block's fixed reduction order, the penalty window). Every sum runs in the CPU sampler's
 * order, so results are bit for bit the CPU's.
 */
#ifndef SIFT_GPU_SAMPLER_MATH_H
#define SIFT_GPU_SAMPLER_MATH_H

#include "gpu/radix_select.h"

/* ---- per-element arithmetic, exactly as the CPU samplers do it --------------------------------- */

/* penalties.c: l *= repeat or l /= repeat, then l -= count * freq + (count > 0) * present.
 * Device code is built with -fmad=false so nothing here is fused. */
SIFT_HD float sift__gpu_penalize(float l, int32_t count, float repeat, float freq, float present)
{
    if (l <= 0) l = l * repeat;
    else l = l / repeat;
    return l - ((float)count * freq + (float)(count > 0) * present);
}

/* The current value of the entry at position pos whose stored logit is l. */
SIFT_HD float sift__gpu_read(const sift__gpu_row *r, int32_t pos, float l)
{
    if (r->only >= 0 && pos != r->only) return -INFINITY;
    for (int i = 0; i < r->n_div; i++) l = l / r->div[i];
    return l;
}

/* Sort key of the tail: descending order of (logit desc, position asc). Positions are in id
 * order whenever a list is sorted, so ties go to the lower token id. */
SIFT_HD uint64_t sift__gpu_sortkey(float l, int32_t pos)
{
    return ((uint64_t)sift__gpu_key(l) << 32) | (uint64_t)(0xFFFFFFFFu - (uint32_t)pos);
}
SIFT_HD int32_t sift__gpu_sortkey_pos(uint64_t k) { return (int32_t)(0xFFFFFFFFu - (uint32_t)k); }

/* ---- sequential pieces (one thread on the device, the same loop on the host) ------------------- */

/* float sum in array order: llama.cpp's softmax denominator (top_p) */
SIFT_HD float sift__gpu_fsum(const float *e, int32_t n)
{
    float s = 0.0f;
    for (int32_t i = 0; i < n; i++) s += e[i];
    return s;
}

/* top_p's cut on probabilities in descending order: the first i with the float running sum
 * >= p and i + 1 >= min_keep gives i + 1; n when never (top_p.c). */
SIFT_HD int32_t sift__gpu_topp_cut(const float *p, int32_t n, float P, int32_t min_keep)
{
    float cum = 0.0f;
    for (int32_t i = 0; i < n; i++) {
        cum += p[i];
        if (cum >= P && i + 1 >= min_keep) return i + 1;
    }
    return n;
}

/* min_p on a list sorted descending, c of whose entries are >= the bound: min_p.c's loop
 * stops at the first i >= max(1, min_keep) below the bound. */
SIFT_HD int32_t sift__gpu_minp_cut_sorted(int32_t c, int32_t kmin, int32_t n)
{
    const int32_t i = c > kmin ? c : kmin;
    return i < n ? i : n;
}

/* The block's fixed reduction order: a[t] += a[t + s] for s = 128, 64, ..., 1. */
SIFT_HD double sift__gpu_tree_sum(double *a)
{
    for (int s = SIFT_GPU_THREADS / 2; s > 0; s >>= 1)
        for (int t = 0; t < s; t++) a[t] += a[t + s];
    return a[0];
}

/* dist's walk: the first i with (running double sum of v[0..i]) >= target; *rem gets
 * target minus the sum before i. None (rounding, NaN): the last i with v[i] > 0, else n-1. */
SIFT_HD int32_t sift__gpu_walk_d(const double *v, int32_t n, double target, double *rem)
{
    double run = 0.0;
    for (int32_t i = 0; i < n; i++) {
        if (run + v[i] >= target) {
            *rem = target - run;
            return i;
        }
        run += v[i];
    }
    int32_t last = n - 1;
    while (last > 0 && !(v[last] > 0.0)) last--;
    *rem = v[last];
    return last;
}

SIFT_HD int32_t sift__gpu_walk_f(const float *v, int32_t n, double target)
{
    double run = 0.0;
    for (int32_t i = 0; i < n; i++) {
        run += (double)v[i];
        if (run >= target) return i;
    }
    int32_t last = n - 1;
    while (last > 0 && !(v[last] > 0.0f)) last--;
    return last;
}

/* penalties.c's window: the newest token in, the oldest out once last_n are held. The
 * counts are recomputed from the window when applied. */
SIFT_HD void sift__gpu_ring_push(int32_t *ring, int32_t *first, int32_t *count, int32_t last_n, int32_t token)
{
    if (last_n <= 0) return;
    if (*count >= last_n) {
        ring[*first] = token;
        *first = (*first + 1) % last_n;
    } else {
        ring[(*first + *count) % last_n] = token;
        (*count)++;
    }
}

#endif
