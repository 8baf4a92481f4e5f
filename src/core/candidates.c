/*
 * candidates.c - the candidates array: allocation, fill, probabilities, ordering.
 *
 * Design. The array is struct-of-arrays (id[], logit[], p[]) so that the passes samplers
 * make over logits alone (max, threshold, exp) stream through one dense float array, and
 * so that the probabilities have a state of their own: SIFT_CAND_PROBS says p[] is the
 * softmax of the current logits over [0, size). Anything that changes logits or cuts the
 * array drops it; permuting keeps it (the values still belong to their entries).
 * sift_candidates_probs() is the one way user code asks for probabilities; it recomputes
 * only when they are stale.
 *
 * Ordering must be llama.cpp's to the last tie (see stlsort.h): sorts run libstdc++'s
 * algorithms on (logit, position) pairs in the workspace and then gather the three arrays
 * in that order. llama.cpp's full sorts of more than 128 entries go through a 128-bucket
 * histogram over [-10, 10) (bucket = int(6.4f * logit + 64.0f), clamped to [0, 127]);
 * entries are distributed into buckets in array order, the buckets above the one holding
 * the k-th entry are std::sort'ed and that one std::partial_sort'ed - reproduced here.
 */
#include "core/candidates.h"

#include <math.h>
#include <float.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* ---- workspace ---------------------------------------------------------------------- */

sift_workspace *sift__ws_new(size_t cap)
{
    sift_workspace *ws = calloc(1, sizeof *ws); /* own_* stay NULL: set by sift_candidates_init */
    if (!ws) return NULL;
    ws->cap = cap;
    ws->pairs = malloc(cap * sizeof *ws->pairs);
    ws->bucket = malloc(cap);
    ws->id2 = malloc(cap * sizeof *ws->id2);
    ws->logit2 = malloc(cap * sizeof *ws->logit2);
    ws->p2 = malloc(cap * sizeof *ws->p2);
    ws->idx = malloc((cap + 64) * sizeof *ws->idx);
    ws->blk = malloc((cap / SIFT__BLK + 2) * sizeof *ws->blk);
    if (!ws->pairs || !ws->bucket || !ws->id2 || !ws->logit2 || !ws->p2 || !ws->idx || !ws->blk) {
        sift__ws_free(ws);
        return NULL;
    }
    return ws;
}

void sift__ws_free(sift_workspace *ws)
{
    if (!ws) return;
    free(ws->pairs);
    free(ws->bucket);
    free(ws->id2);
    free(ws->logit2);
    free(ws->p2);
    free(ws->idx);
    free(ws->blk);
    free(ws);
}

/* ---- public: lifetime, fill ----------------------------------------------------------- */

sift_status sift_candidates_init(sift_candidates *cand, size_t capacity)
{
    if (!cand || capacity == 0 || capacity > (size_t)INT32_MAX) return SIFT_E_INVAL;
    memset(cand, 0, sizeof *cand);
    cand->selected = -1;
    sift_workspace *ws = sift__ws_new(capacity);
    if (!ws) return SIFT_E_NOMEM;
    ws->own_id = malloc(capacity * sizeof *ws->own_id);
    ws->own_logit = malloc(capacity * sizeof *ws->own_logit);
    ws->own_p = calloc(capacity, sizeof *ws->own_p);
    ws->own_cap = capacity;
    cand->ws = ws;
    if (!ws->own_id || !ws->own_logit || !ws->own_p) {
        sift_candidates_free(cand);
        return SIFT_E_NOMEM;
    }
    cand->id = ws->own_id;
    cand->logit = ws->own_logit;
    cand->p = ws->own_p;
    cand->capacity = capacity;
    return SIFT_OK;
}

void sift_candidates_free(sift_candidates *cand)
{
    if (!cand) return;
    sift_workspace *ws = cand->ws;
    if (ws) {
        free(ws->own_id);
        free(ws->own_logit);
        free(ws->own_p);
        sift__ws_free(ws);
    }
    memset(cand, 0, sizeof *cand);
    cand->selected = -1;
}

sift_status sift_candidates_fill(sift_candidates *cand, const float *logits, size_t n)
{
    if (!cand || !logits) return SIFT_E_INVAL;
    const sift_workspace *ws = (const sift_workspace *)cand->ws;
    if (ws && ws->own_id) { /* back to the arrays as allocated (a sampler may have advanced them) */
        cand->id = ws->own_id;
        cand->logit = ws->own_logit;
        cand->p = ws->own_p;
        cand->capacity = ws->own_cap;
    }
    if (n > cand->capacity) return SIFT_E_INVAL;
    sift_token *id = cand->id;
    size_t i = 0;
#if defined(__SSE2__)
    /* eight ids per step: GCC at -O2 leaves the plain loop scalar, one store per id, which
     * made this half of a 102,400-token fill (~35 us on Zen 3) */
    __m128i a = _mm_setr_epi32(0, 1, 2, 3), b = _mm_setr_epi32(4, 5, 6, 7);
    const __m128i step = _mm_set1_epi32(8);
    for (; i + 8 <= n; i += 8, a = _mm_add_epi32(a, step), b = _mm_add_epi32(b, step)) {
        _mm_storeu_si128((__m128i *)(void *)(id + i), a);
        _mm_storeu_si128((__m128i *)(void *)(id + i + 4), b);
    }
#endif
    for (; i < n; i++) id[i] = (sift_token)i;
    memcpy(cand->logit, logits, n * sizeof *logits);
    cand->size = n;
    cand->selected = -1;
    cand->sorted = false;
    cand->flags = SIFT_CAND_IDENTITY;
    return SIFT_OK;
}

/* ---- probabilities -------------------------------------------------------------------- */

void sift__softmax(sift_candidates *c, bool do_sort)
{
    if (c->size == 0) return;
    if (do_sort && !c->sorted) sift__partial_sort(c, c->size);
    const float *logit = c->logit;
    float *p = c->p;
    const size_t n = c->size;
    float max_l = logit[0];
    if (!c->sorted)
        for (size_t i = 1; i < n; i++) max_l = max_l < logit[i] ? logit[i] : max_l; /* std::max */
    float sum = 0.0f;
    for (size_t i = 0; i < n; i++) {
        float e = expf(logit[i] - max_l);
        p[i] = e;
        sum += e;
    }
    for (size_t i = 0; i < n; i++) p[i] /= sum;
    /* A float running sum of n terms is off by up to (n - 1) * 2^-24 relative, so the
     * probabilities only provably sum to 1 +- 1e-5 for n <= SIFT__SOFTMAX_F32_EXACT_N.
     * Longer arrays keep llama.cpp's values for the sampler that asked, but do not claim
     * validity: sift_candidates_probs() recomputes them with a double sum if asked. */
    if (n <= SIFT__SOFTMAX_F32_EXACT_N) c->flags |= SIFT_CAND_PROBS;
    else c->flags &= ~SIFT_CAND_PROBS;
}

/* The accurate softmax behind sift_candidates_probs(): float exponentials, double sum and
 * division, so the probabilities sum to 1 within a few float roundings at any size. */
double sift__exp_sum_d(const float *lg, size_t n, float max_l, float *p)
{
    double sum = 0.0;
    for (size_t i = 0; i < n; i++) {
        const float e = expf(lg[i] - max_l);
        p[i] = e;
        sum += e;
    }
    return sum;
}

static void softmax_accurate(sift_candidates *c)
{
    const size_t n = c->size;
    if (n == 0) return;
    const float *logit = c->logit;
    float *p = c->p;
    float max_l = logit[0];
    for (size_t i = 1; i < n; i++) max_l = max_l < logit[i] ? logit[i] : max_l;
    const double sum = sift__exp_sum_d(logit, n, max_l, p);
    for (size_t i = 0; i < n; i++) p[i] = (float)((double)p[i] / sum);
    c->flags |= SIFT_CAND_PROBS;
}

const float *sift_candidates_probs(sift_candidates *cand)
{
    if (!cand) return NULL;
    if (!(cand->flags & SIFT_CAND_PROBS)) softmax_accurate(cand);
    return cand->p;
}

void sift_candidates_logits_changed(sift_candidates *cand)
{
    if (cand) cand->flags &= ~SIFT_CAND_PROBS;
}

void sift_candidates_truncate(sift_candidates *cand, size_t n)
{
    if (cand) sift__truncate(cand, n);
}

sift_token sift_candidates_selected(const sift_candidates *cand)
{
    if (!cand || cand->selected < 0 || (size_t)cand->selected >= cand->size) return SIFT_TOKEN_NULL;
    return cand->id[cand->selected];
}

/* ---- ordering ------------------------------------------------------------------------- */

void sift__gather(sift_candidates *c, const sift__pair *order, size_t m, sift_workspace *ws)
{
    for (size_t j = 0; j < m; j++) {
        const uint32_t k = order[j].idx;
        ws->id2[j] = c->id[k];
        ws->logit2[j] = c->logit[k];
        ws->p2[j] = c->p[k];
    }
    memcpy(c->id, ws->id2, m * sizeof *c->id);
    memcpy(c->logit, ws->logit2, m * sizeof *c->logit);
    memcpy(c->p, ws->p2, m * sizeof *c->p);
}

size_t sift__bucket_select(const sift_candidates *c, size_t k, sift_workspace *ws)
{
    enum { NB = 128 };
    const size_t n = c->size;
    const float *logit = c->logit;
    uint8_t *bk = ws->bucket;
    size_t histo[NB] = {0};
    for (size_t i = 0; i < n; i++) {
        uint8_t b = sift__bucket_of(logit[i]);
        bk[i] = b;
        histo[b]++;
    }
    size_t nhave = 0;
    int ib = NB - 1;
    for (; ib >= 0; --ib) {
        nhave += histo[ib];
        if (nhave >= k) break;
    }
    if (ib < 0) ib = 0; /* k > n: cannot happen for callers, but stay in bounds */
    /* bucket start offsets, highest bucket first */
    size_t start[NB];
    size_t off = 0;
    for (int j = NB - 1; j >= ib; --j) {
        start[j] = off;
        off += histo[j];
    }
    sift__pair *out = ws->pairs;
    for (size_t i = 0; i < n; i++) {
        const int j = bk[i];
        if (j >= ib) out[start[j]++] = (sift__pair){sift__sort_key(logit[i]), (uint32_t)i};
    }
    sift__pair *ptr = out;
    size_t ndone = 0;
    for (int j = NB - 1; j > ib; --j) {
        sift__stl_sort(ptr, histo[j]);
        ptr += histo[j];
        ndone += histo[j];
    }
    sift__stl_partial_sort(ptr, k - ndone, histo[ib]);
    return nhave;
}

void sift__partial_sort(sift_candidates *c, size_t k)
{
    if (k > c->size) k = c->size;
    sift_workspace *ws = sift__ws(c);
    if (!ws || k == 0) {
        sift__truncate(c, k);
        return;
    }
    if (k <= 128) {
        sift__stl_partial_sort_keys(c->logit, c->size, k, ws->pairs);
    } else {
        sift__bucket_select(c, k, ws);
    }
    sift__gather(c, ws->pairs, k, ws);
    sift__truncate(c, k);
    c->sorted = true;
}

void sift_candidates_sort(sift_candidates *cand)
{
    if (cand && !cand->sorted) sift__partial_sort(cand, cand->size);
}

void sift_candidates_partial_sort(sift_candidates *cand, size_t k)
{
    if (!cand) return;
    if (cand->sorted) sift__truncate(cand, k);
    else sift__partial_sort(cand, k);
}

/* ---- inspection ------------------------------------------------------------------------ */

size_t sift_candidates_top(const sift_candidates *cand, size_t n, sift_token *ids, float *logits, float *probs)
{
    if (!cand || cand->size == 0 || n == 0) return 0;
    if (n > cand->size) n = cand->size;
    const float *lg = cand->logit;
    /* best n positions, best first (earlier position wins ties) */
    size_t local[64];
    size_t *best = n <= 64 ? local : malloc(n * sizeof *best);
    if (!best) return 0;
    size_t have = 0;
    if (cand->sorted) {
        for (size_t i = 0; i < n; i++) best[i] = i;
        have = n;
    } else {
        for (size_t i = 0; i < cand->size; i++) {
            const float v = lg[i];
            if (have == n && !(v > lg[best[n - 1]])) continue;
            size_t j = have < n ? have++ : n - 1;
            while (j > 0 && v > lg[best[j - 1]]) {
                best[j] = best[j - 1];
                j--;
            }
            best[j] = i;
        }
    }
    float max_l = 0.0f;
    double sum = 0.0;
    const bool valid = (cand->flags & SIFT_CAND_PROBS) != 0;
    if (probs && !valid) {
        max_l = lg[best[0]];
        for (size_t i = 0; i < cand->size; i++) sum += expf(lg[i] - max_l);
    }
    for (size_t j = 0; j < have; j++) {
        const size_t i = best[j];
        if (ids) ids[j] = cand->id[i];
        if (logits) logits[j] = lg[i];
        if (probs) probs[j] = valid ? cand->p[i] : (float)((double)expf(lg[i] - max_l) / sum);
    }
    if (best != local) free(best);
    return have;
}
