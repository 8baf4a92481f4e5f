/*
 * fast.c - greedy, dist, top_k, min_p and top_p straight on the caller's logits, with
 * llama.cpp's results bit for bit (the chain uses these when one of them is its first
 * working sampler; see chain.c).
 *
 * What llama.cpp pays per token is dominated by work on the whole vocabulary: filling a
 * 12-byte {id, logit, p} entry per token, then an expf per token (dist, top_p), or a
 * partial sort. Each path below touches the vocabulary once or twice with SIMD kernels
 * (fast_kernels.h) and does the llama.cpp arithmetic only on the few entries that matter.
 *
 * greedy   one SIMD pass keeping, per lane, the first maximum and its position; the
 *          smallest position holding the overall maximum is llama.cpp's strict-`>` pick.
 *
 * top_k    (k <= 128) llama.cpp runs std::partial_sort, i.e. libstdc++'s heap selection;
 *          its arrangement only matters for ties. Without ties among the k+1 largest the
 *          result is those k in descending order: a threshold below the (k+1)-th largest
 *          (estimated from a prefix), one SIMD pass collecting the entries above it, and
 *          libstdc++'s partial sort of that short list, checked strictly decreasing. With
 *          ties, stlsort.c's step-for-step heap, whose top only grows, so a SIMD scan jumps
 *          from one entry that beats it to the next (about k ln(n/k) of them).
 *
 * min_p    the stable filter {i : x_i >= max + logf(p)} in array order. One SIMD pass
 *          keeps a running maximum and collects every i with x_i >= (running max of the
 *          earlier 64-entry groups) + logf(p): the running maximum never exceeds the final
 *          one and float addition is monotone, so this is a superset; the final bound then
 *          filters the few collected entries.
 *
 * dist     llama.cpp: e_i = expf(x_i - M) (float), S = double running sum in array order,
 *          t = S * u, pick = first i whose running sum R_i reaches t. Exactly that costs
 *          an exact expf and a dependent double add per token. Instead, one read of the
 *          logits, block by block (SIFT__BLK entries, in L1 for the second look): a running
 *          maximum m_b; the head (x_i - m_b >= -12) is collected for exact expf values
 *          (the vector emulation of glibc's expf); every other entry gets an approximation
 *          within a relative SIFT__APPROX_EPS of glibc's value, summed per block in SIMD
 *          lanes and later scaled by e^(m_b - M). From the block sums the pick is located
 *          and then CERTIFIED: with E bounding every |R^_i - R_i| (the approximation and
 *          subtraction-rounding error on the tail plus the rounding of any order of
 *          summation, gamma_n = n 2^-53 / (1 - n 2^-53) relative, for sums of non-negative
 *          terms) and E_t bounding |t^ - t|, the pick i is llama.cpp's if
 *          R^_i >= t^ + E + E_t and R^_(i-1) < t^ - E - E_t (R is non-decreasing). Margins
 *          twice that are used. Otherwise (the draw fell within ~1e-9 relative of a
 *          boundary, which happens when it lands in a dense low-probability tail) the pick
 *          is recomputed exactly (below) with the same draw. The candidates (all n, with p)
 *          are built only when asked for (chain.c).
 *
 * top_p    llama.cpp: softmax with a FLOAT running sum S_f in array order, the top 256 by
 *          its bucket partial sort, then a float cumulative sum of p_i = e_i / S_f in that
 *          order until it reaches p. The float sum cannot be certified from an
 *          approximation (it drops every term below half an ulp of the running sum: a
 *          systematic error), so it is reproduced EXACTLY, cheaply:
 *            - while S_f is in binade [2^E, 2^(E+1)), a term e changes it only if
 *              e >= ulp(S_f)/2 = 2^(E-24); entries with x_i - M below log(2^(E-24)) (minus
 *              a margin covering expf's error) are skipped - exact, since S_f only grows;
 *            - the others (compacted per chunk of 512) get exact expf values, and as long
 *              as S_f stays in one binade fl(S + e) = S + round(e / ulp) * ulp, so the chunk
 *              adds the exact sum of the rounded terms (any order is exact: they are
 *              integers times ulp) - unless a term is exactly halfway (the tie then
 *              depends on S's last bit) or the chunk leaves the binade: then its terms are
 *              added one by one, as llama.cpp does.
 *          A threshold below the 256th largest logit (estimated from a prefix) is used by
 *          a first pass collecting the entries above it (with the maximum, NaNs and the
 *          chunk maxima); the boundary bucket ib follows from their bucket counts, and the
 *          list is checked to hold every entry of the buckets >= ib (else a lower
 *          threshold, another pass). llama.cpp's bucket partition + std::sort /
 *          std::partial_sort then run on that list exactly as on the full array (they
 *          never look at the lower buckets). A cut not within the top 256 (llama.cpp then
 *          sorts everything) goes to the general path, as do NaN, infinities and ib = 0.
 */
#include "core/fast.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "core/stlsort.h"

/* ---- dist's arithmetic ------------------------------------------------------------------- */

int64_t sift__dist_core(const float *lg, size_t n, bool sorted, double u, float *p)
{
    float max_l = lg[0];
    if (!sorted)
        for (size_t i = 1; i < n; i++) max_l = max_l < lg[i] ? lg[i] : max_l;
    const double sum = sift__exp_sum_d(lg, n, max_l, p);
    const double target = sum * u;
    double run = 0.0;
    int64_t pick = -1;
    size_t i = 0;
    for (; i < n; i++) {
        run += p[i];
        p[i] = (float)((double)p[i] / sum);
        if (run >= target) {
            pick = (int64_t)i++;
            break;
        }
    }
    for (; i < n; i++) p[i] = (float)((double)p[i] / sum);
    return pick >= 0 ? pick : (int64_t)n - 1; /* NaN logits only */
}

/* ---- greedy -------------------------------------------------------------------------------- */

int sift__fast_greedy(const sift__fk *fk, const float *x, size_t n, int64_t *pick)
{
    size_t best = fk->argmax(x, n);
    if (best == SIZE_MAX) { /* NaN somewhere: llama.cpp's loop, NaN never wins (unless first) */
        float b = x[0];
        best = 0;
        for (size_t i = 1; i < n; i++)
            if (x[i] > b) b = x[i], best = i;
    }
    *pick = (int64_t)best;
    return SIFT__FAST_PICK;
}

/* ---- dist ---------------------------------------------------------------------------------- */

#define DIST_HEAD (-12.0f) /* x - M at or above: exact expf (e >= 6.1e-6) */
#define CHUNK SIFT__CHUNK  /* entries per exact-sum chunk (dist's exact path, top_p) */

/* llama.cpp's pick for draw u, exactly, from vector kernels: the double running sum of
 * e_i = expf(x_i - M) is reproduced chunk by chunk. While S stays in one binade
 * [2^E, 2^(E+1)), fl(S + e) = S + round(e / ulp) * ulp (ulp = 2^(E-52)), so a chunk adds
 * the exact sum of its rounded terms (grid_sum_d), unless a term is a tie or the chunk
 * leaves the binade: then its terms are added one by one. The chunk starts are kept, the
 * crossing chunk is found and walked term by term. */
/* S += e[0..m) in double, one by one as llama.cpp adds them, but whole runs at a time
 * where the grid argument (top of the file) makes that exact; a run that leaves the binade
 * or holds a tie is split in halves, down to single additions. */
static double add_run_d(const sift__fk *fk, double S, const float *e, size_t m)
{
    if (m > 8 && S >= 0x1p-900) {
        const int E = ilogb(S);
        double T;
        if (fk->grid_sum_d(e, m, ldexp(1.0, E - 52), &T) && S + T < ldexp(1.0, E + 1)) return S + T;
        S = add_run_d(fk, S, e, m / 2);
        return add_run_d(fk, S, e + m / 2, m - m / 2);
    }
    for (size_t k = 0; k < m; k++) S += e[k];
    return S;
}

/* The same for llama.cpp's float sum. */
static float add_run_f(const sift__fk *fk, float s, const float *e, size_t m)
{
    if (m > 8 && s >= 0x1p-60f) {
        const int E = ilogbf(s);
        double T;
        if (fk->grid_sum_f(e, m, ldexpf(1.0f, E - 23), &T) && (double)s + T < ldexp(1.0, E + 1)) return (float)((double)s + T);
        s = add_run_f(fk, s, e, m / 2);
        return add_run_f(fk, s, e + m / 2, m - m / 2);
    }
    for (size_t k = 0; k < m; k++) s += e[k];
    return s;
}

/* llama.cpp's pick for draw u, exactly, from vector kernels: the double running sum of
 * e_i = expf(x_i - M) chunk by chunk (add_run_d), the chunk starts kept; then the chunk
 * where the running sum reaches t = S u is walked term by term. */
int64_t sift__dist_exact(const sift__fk *fk, const float *x, size_t n, float M, double u, double *starts)
{
    float e[CHUNK];
    double S = 0.0;
    const size_t nc = (n + CHUNK - 1) / CHUNK;
    for (size_t c = 0; c < nc; c++) {
        const size_t from = c * CHUNK, m = from + CHUNK < n ? CHUNK : n - from;
        starts[c] = S;
        fk->exp_exact(x + from, m, M, e);
        S = add_run_d(fk, S, e, m);
    }
    const double t = S * u;
    size_t c = 0;
    while (c + 1 < nc && starts[c + 1] < t) c++; /* the first chunk whose end reaches t */
    const size_t from = c * CHUNK, m = from + CHUNK < n ? CHUNK : n - from;
    fk->exp_exact(x + from, m, M, e);
    double R = starts[c];
    for (size_t k = 0; k < m; k++) {
        R += e[k];
        if (R >= t) return (int64_t)(from + k);
    }
    return (int64_t)n - 1; /* not reached: R at the end is S >= t */
}

/* The rounding of x - m in float, for |x - m| <= 104 (beyond, expf is 0 or the
 * approximation is 0 and both are below SIFT__APPROX_ETA), twice (x - m_b and x - M),
 * relative on e^d; plus glibc's 0.502 ulp. */
#define DIST_SUB_EPS (2.0 * 104.0 * 0x1p-24 * 1.01 + 1.2e-7)

int64_t sift__dist_pick(const sift__fk *fk, const float *x, size_t n, double u, float M, const float *bmax, size_t nh,
                        sift_workspace *ws, sift__fast_stats *st)
{
    double *blk = ws->blk;
    const uint32_t *head = ws->idx;
    float *eh = ws->logit2; /* exact values of the head: gathered logits, then the vector expf */
    for (size_t j = 0; j < nh; j++) eh[j] = x[head[j]];
    fk->exp_exact(eh, nh, M, eh);

    /* blocks summed against a running maximum m_b < M: times e^(m_b - M) (m_b - M is exact in
     * double; the running maximum changes a few dozen times, so exp is cached) */
    const size_t nb = (n + SIFT__BLK - 1) / SIFT__BLK;
    float last_m = M;
    double last_f = 1.0;
    double tail = 0.0, total = 0.0;
    for (size_t b = 0, h = 0; b < nb; b++) {
        if (bmax[b] != M) {
            if (bmax[b] != last_m) last_m = bmax[b], last_f = exp((double)bmax[b] - (double)M);
            blk[b] *= last_f;
        }
        double tb = blk[b];
        tail += blk[b];
        for (; h < nh && head[h] < (b + 1) * SIFT__BLK; h++) tb += eh[h];
        total += tb;
    }
    /* error bounds (see the top of the file): E on every running sum, Et on the target */
    const double gam = (double)(n + 64) * 0x1p-53 / (1.0 - (double)(n + 64) * 0x1p-53);
    const double eps = SIFT__APPROX_EPS + SIFT__APPROX_SUM_EPS + DIST_SUB_EPS + 1e-12;
    const double E = 2.0 * gam * total * 1.01 + eps * tail / (1.0 - eps) * 1.01 + (double)n * SIFT__APPROX_ETA;
    const double Et = E + 0x1p-51 * total;
    const double margin = 2.0 * (E + Et);
    const double t = total * u;

    /* the block where the running sum reaches t, then its entries one by one */
    double C = 0.0;
    size_t b = 0, h = 0;
    for (; b < nb; b++) {
        double tb = blk[b];
        size_t h2 = h;
        for (; h2 < nh && head[h2] < (b + 1) * SIFT__BLK; h2++) tb += eh[h2];
        if (C + tb >= t || b + 1 == nb) break;
        C += tb;
        h = h2;
    }
    const size_t from = b * SIFT__BLK, to = from + SIFT__BLK < n ? from + SIFT__BLK : n;
    float v[SIFT__BLK];
    fk->approx_exp(x + from, to - from, M, v);
    for (size_t h2 = h; h2 < nh && head[h2] < to; h2++) v[head[h2] - from] = eh[h2];
    double R = C, Rprev = C;
    size_t i = from;
    for (; i < to; i++) {
        Rprev = R;
        R += v[i - from];
        if (R >= t) break;
    }
    if (i < to && R >= t + margin && (i == 0 || Rprev < t - margin)) {
        if (st) st->dist_fast++;
        return (int64_t)i;
    }
    /* not certain: llama.cpp's arithmetic itself, with the same draw */
    if (st) st->dist_exact++;
    return sift__dist_exact(fk, x, n, M, u, blk);
}

int sift__fast_dist(const sift__fk *fk, const float *x, size_t n, sift__rng *rng, sift_candidates *cand, int64_t *pick,
                    double *u, sift__fast_stats *st)
{
    sift_workspace *ws = cand->ws;
    if (!ws || ws->cap < n) return SIFT__FAST_NO;
    bool nan = false;
    float M;
    float *bmax = ws->p2; /* n / SIFT__BLK + 1 <= cap */
    const size_t nh = fk->approx_blocks(x, n, DIST_HEAD, ws->blk, bmax, ws->idx, &M, &nan);
    if (nan || !isfinite(M)) return SIFT__FAST_NO; /* llama.cpp's NaN / inf arithmetic: general path */
    *u = sift__rng_uniform_double(rng);
    *pick = sift__dist_pick(fk, x, n, *u, M, bmax, nh, ws, st);
    return SIFT__FAST_PICK;
}

/* ---- top_k --------------------------------------------------------------------------------- */

/* A threshold with roughly `above` entries of x at or above it, estimated from the first
 * n/div entries (at least min(n, 4096); contiguous, so they stay cached for the pass that
 * follows): bisection, to 1/16 nat (at most 12 halvings), on the count of the prefix at or
 * above t between its maximum and `span` below. -inf when the prefix has no finite maximum. */
static float estimate_threshold(const sift__fk *fk, const float *x, size_t n, size_t above, size_t div, float span)
{
    const size_t ns = n / div > 4096 ? n / div : (n < 4096 ? n : 4096);
    const double want = (double)above * (double)ns / (double)n;
    bool nan = false;
    const float mx = fk->max(x, ns, -INFINITY, &nan);
    if (!isfinite(mx)) return -INFINITY;
    float lo = mx - span, hi = mx; /* count(hi) < want or hi = max; count(lo) >= want or lo = max - span */
    for (int it = 0; it < 12 && hi - lo > 0.0625f; it++) { /* 12: logits so large that floats are coarser */
        const float mid = 0.5f * (lo + hi);
        if (mid == lo || mid == hi) break;
        if ((double)fk->count_ge(x, ns, mid) >= want) lo = mid;
        else hi = mid;
    }
    return lo;
}

int sift__fast_top_k(const sift__fk *fk, const float *x, size_t n, size_t k, sift_candidates *cand)
{
    sift_workspace *ws = cand->ws;
    if (k == 0 || k > 128 || k >= n || !ws || ws->cap < n) return SIFT__FAST_NO;
    sift__pair *pairs = ws->pairs;
    /* Without ties among the k+1 largest, the heap selection can only end in plain descending
     * order: collect the entries above a threshold below the (k+1)-th largest, take their
     * k+1 largest, and check. With ties (or NaN), the heap itself, step for step. */
    if (n >= 4096) {
        const float thr = estimate_threshold(fk, x, n, 4 * k + 64, 32, 16.0f) - 0.25f;
        float M;
        bool nan = false;
        const size_t nc = isfinite(thr) ? fk->collect_ge(x, n, thr, ws->idx, &M, &nan, NULL) : 0;
        if (!nan && nc > k) {
            for (size_t j = 0; j < nc; j++) pairs[j] = (sift__pair){x[ws->idx[j]], ws->idx[j]};
            sift__stl_partial_sort(pairs, k + 1, nc);
            bool ties = false;
            for (size_t j = 0; j < k && !ties; j++) ties = !(pairs[j].key > pairs[j + 1].key);
            if (!ties) goto write;
        }
    }
    sift__stl_partial_sort_keys(x, n, k, pairs);
write:
    for (size_t j = 0; j < k; j++) {
        const uint32_t i = pairs[j].idx;
        cand->id[j] = (sift_token)i;
        cand->logit[j] = x[i];
    }
    cand->size = k;
    cand->sorted = true;
    cand->flags = 0;
    cand->selected = -1;
    return SIFT__FAST_CAND;
}

/* ---- min_p --------------------------------------------------------------------------------- */

int sift__fast_min_p(const sift__fk *fk, const float *x, size_t n, float p, size_t min_keep, sift_candidates *cand)
{
    sift_workspace *ws = cand->ws;
    if (!(p > 0.0f) || !ws || ws->cap < n) return SIFT__FAST_NO;
    const float lp = logf(p);
    float M;
    const size_t m = fk->collect_minp(x, n, lp, ws->idx, &M);
    const float min_l = M + lp;
    size_t kept = 0;
    for (size_t j = 0; j < m; j++) {
        const uint32_t i = ws->idx[j];
        if (x[i] >= min_l) {
            cand->id[kept] = (sift_token)i;
            cand->logit[kept] = x[i];
            kept++;
        }
    }
    if (kept == 0 || kept < min_keep) return SIFT__FAST_NO; /* llama.cpp then sorts: general path */
    cand->size = kept;
    cand->sorted = false;
    cand->flags = 0;
    cand->selected = -1;
    return SIFT__FAST_CAND;
}

/* ---- top_p --------------------------------------------------------------------------------- */

#define TOPP_K 256    /* llama.cpp's first partial sort */
#define TOPP_ABOVE 400  /* the collection threshold: about this many entries above it */

/* The largest float d_cut with expf(d) < 2^(E-24) for every d < d_cut: log(2^(E-24)) less
 * 1e-4 (expf is within 0.502 ulp of exp, far inside that), rounded down. */
static float skip_below(int E)
{
    const double v = (double)(E - 24) * 0.69314718055994530942 - 1e-4;
    float f = (float)v;
    if ((double)f > v) f = nextafterf(f, -INFINITY);
    return f;
}

/* llama.cpp's float softmax denominator: s = 0; s += expf(x_i - M) in array order; exact
 * (see the top of the file). */
float sift__float_sum_exact(const sift__fk *fk, const float *x, size_t n, float M, const float *cmax)
{
    float s = 0.0f;
    float dc[CHUNK + 16], ec[CHUNK + 16];
    int cut_e = INT32_MIN;
    float dcut = -FLT_MAX;
    for (size_t i = 0; i < n; i += CHUNK) {
        const size_t to = i + CHUNK < n ? i + CHUNK : n;
        if (s >= 0x1p-60f) { /* skip what cannot change s (no binade reasoning lower down) */
            const int E = ilogbf(s);
            if (E != cut_e) cut_e = E, dcut = skip_below(E);
            if (cmax && cmax[i / CHUNK] - M < dcut) continue; /* d = x - M is monotone in x */
        } else {
            dcut = -FLT_MAX, cut_e = INT32_MIN;
        }
        const size_t m = fk->compact_d(x, i, to, M, dcut, dc);
        double T;
        if (s >= 0x1p-60f && fk->exp_grid_f(dc, m, ldexpf(1.0f, cut_e - 23), ec, &T) && (double)s + T < ldexp(1.0, cut_e + 1)) {
            s = (float)((double)s + T); /* exact: a multiple of ulp(s) in the same binade */
        } else {
            if (s < 0x1p-60f) fk->exp_exact(dc, m, 0.0f, ec);
            s = add_run_f(fk, s, ec, m);
        }
    }
    return s;
}

int sift__fast_top_p(const sift__fk *fk, const float *x, size_t n, float p, size_t min_keep, sift_candidates *cand,
                     sift__fast_stats *st)
{
    sift_workspace *ws = cand->ws;
    if (!(p < 1.0f) || n <= 1024 || min_keep > TOPP_K || !ws || ws->cap < n) return SIFT__FAST_NO;

    /* A threshold a little below the 256th largest logit, estimated from the first entries.
     * A wrong guess costs another pass, never a wrong result: pass 1 is checked to hold all
     * it needs. */
    sift__pair *pairs = ws->pairs; /* pass 1's partition */
    float thr = estimate_threshold(fk, x, n, TOPP_ABOVE, 16, 32.0f) - 0.16f; /* a bucket (1/6.4) of margin */

    uint32_t *bl = ws->idx;
    float *cmax = ws->p2; /* chunk maxima, n / CHUNK + 1 <= cap */
    size_t histo[128], nc = 0;
    float M = 0.0f;
    int ib = 0;
    for (int attempt = 0;; attempt++) {
        if (attempt == 3 || !isfinite(thr)) goto general;
        /* pass 1: the maximum, NaNs, and every entry >= thr in array order */
        bool nan = false;
        nc = fk->collect_ge(x, n, thr, bl, &M, &nan, cmax);
        if (nan || !isfinite(M)) goto general;
        if (nc < TOPP_K) { /* too high: lower */
            thr -= 1.0f;
            continue;
        }
        /* llama.cpp's bucket partition (sift__bucket_select's steps) on the collected
         * entries: it needs every entry of the buckets >= ib, which all lie above thr when
         * the bucket just below thr is lower than ib */
        memset(histo, 0, sizeof histo);
        for (size_t j = 0; j < nc; j++) histo[sift__bucket_of(x[bl[j]])]++;
        size_t nhave = 0;
        for (ib = 127; ib >= 0; ib--) {
            nhave += histo[ib];
            if (nhave >= TOPP_K) break;
        }
        if (ib <= 0) goto general;
        if (sift__bucket_of(nextafterf(thr, -INFINITY)) < ib) break;
        thr = ((float)ib - 64.0f) / 6.4f - 0.2f; /* below bucket ib's lower edge */
    }
    size_t start[128], off = 0;
    for (int j = 127; j >= ib; j--) start[j] = off, off += histo[j];
    for (size_t j = 0; j < nc; j++) {
        const uint32_t i = bl[j];
        const int b = sift__bucket_of(x[i]);
        if (b >= ib) pairs[start[b]++] = (sift__pair){x[i], i};
    }
    sift__pair *ptr = pairs;
    size_t ndone = 0;
    for (int j = 127; j > ib; j--) {
        sift__stl_sort(ptr, histo[j]);
        ptr += histo[j];
        ndone += histo[j];
    }
    sift__stl_partial_sort(ptr, TOPP_K - ndone, histo[ib]);

    /* pass 2: the float denominator; then the cut: float cumulative sum of p = e / S */
    const float S = sift__float_sum_exact(fk, x, n, M, cmax);
    float cum = 0.0f;
    size_t last = 0;
    for (size_t j = 0; j < TOPP_K; j++) {
        const uint32_t i = pairs[j].idx;
        const float pj = expf(x[i] - M) / S;
        cand->id[j] = (sift_token)i;
        cand->logit[j] = x[i];
        cand->p[j] = pj;
        cum += pj;
        if (cum >= p && j + 1 >= min_keep) {
            last = j + 1;
            break;
        }
    }
    if (last == 0) goto general; /* llama.cpp would now sort the whole array */
    cand->size = last;
    cand->sorted = true;
    cand->flags = 0;
    cand->selected = -1;
    if (st) st->top_p_fast++;
    return SIFT__FAST_CAND;
general:
    if (st) st->top_p_general++;
    return SIFT__FAST_NO;
}
