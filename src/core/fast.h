/*
 * fast.h - the samplers llama.cpp runs over the whole vocabulary, run instead straight on
 * the caller's `const float *logits` (no candidate array filled), with the same result bit
 * for bit. See fast.c for the design and the exactness argument of each.
 *
 * Each sift__fast_* returns one of:
 *   SIFT__FAST_NO    the fast path does not apply here (NaN, infinities, a cut beyond its
 *                    reach, ...); nothing was consumed (no random number drawn): take the
 *                    general path;
 *   SIFT__FAST_CAND  cand now holds exactly what fill + that sampler would have left
 *                    (ids, logits, p where the general path defines them, size, order,
 *                    flags, selected);
 *   SIFT__FAST_PICK  a selecting sampler picked index *pick of the vocabulary; cand was
 *                    not touched (the chain builds it on demand: sift__fast_materialize).
 */
#ifndef SIFT_CORE_FAST_H
#define SIFT_CORE_FAST_H

#include "core/candidates.h"
#include "core/fast_kernels.h"
#include "core/rng.h"

enum { SIFT__FAST_NO = 0, SIFT__FAST_CAND = 1, SIFT__FAST_PICK = 2 };

/* dist's whole arithmetic (llama.cpp's dist apply) for one uniform draw u on lg[0..n):
 * p[i] = expf(lg[i] - max) as float, double total, the first i whose double running sum
 * reaches total * u, every p divided by the total. Returns the pick (n - 1 when NaNs
 * prevent one). `sorted`: lg is descending (max = lg[0]). */
int64_t sift__dist_core(const float *lg, size_t n, bool sorted, double u, float *p);

/* Counters of how the certified fast paths went (per chain; tests and `sift bench`). */
typedef struct sift__fast_stats {
    uint64_t dist_fast, dist_exact;      /* dist: certified picks / exact re-runs */
    uint64_t top_p_fast, top_p_general;  /* top_p: done here / left to the general path */
} sift__fast_stats;

/* greedy: always applies (falls back to the scalar scan itself when a NaN is present) */
int sift__fast_greedy(const sift__fk *fk, const float *x, size_t n, int64_t *pick);
/* dist: draws one number from rng unless it returns SIFT__FAST_NO; *u receives it. */
int sift__fast_dist(const sift__fk *fk, const float *x, size_t n, sift__rng *rng, sift_candidates *cand, int64_t *pick,
                    double *u, sift__fast_stats *st);
/* top_k(k) for 0 < k <= 128, k < n (llama.cpp's std::partial_sort range) */
int sift__fast_top_k(const sift__fk *fk, const float *x, size_t n, size_t k, sift_candidates *cand);
/* min_p(p, min_keep) with p > 0 on an unsorted array (its stable-filter path) */
int sift__fast_min_p(const sift__fk *fk, const float *x, size_t n, float p, size_t min_keep, sift_candidates *cand);
/* top_p(p, min_keep) with p < 1 on more than 1024 entries (its partial-sort path) */
int sift__fast_top_p(const sift__fk *fk, const float *x, size_t n, float p, size_t min_keep, sift_candidates *cand,
                     sift__fast_stats *st);

/* The exact pieces, for the tests: llama.cpp's dist pick for draw u given the maximum M
 * (starts: scratch for n / 512 + 1 doubles), and its float softmax denominator (cmax: the
 * maxima of the SIFT__CHUNK-entry chunks, or NULL). */
int64_t sift__dist_exact(const sift__fk *fk, const float *x, size_t n, float M, double u, double *starts);
/* dist's fast pick for draw u (certified, else exact) after fk->approx_blocks(x, n, -12,
 * ws->blk, bmax, ws->idx, &M, ...) returned nh (no NaN, M finite). Consumes ws->blk. */
int64_t sift__dist_pick(const sift__fk *fk, const float *x, size_t n, double u, float M, const float *bmax, size_t nh,
                        sift_workspace *ws, sift__fast_stats *st);
float sift__float_sum_exact(const sift__fk *fk, const float *x, size_t n, float M, const float *cmax);

#endif
