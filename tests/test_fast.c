/*
 * test_fast.c - the chain's fast paths (core/fast.c) and their SIMD kernels (core/fast_kernels.h).
 *
 *   - every kernel variant this CPU runs gives the scalar kernel's results (exact kernels:
 *     the same values; the approximation: the same bits; block sums: within rounding), on
 *     random, tied and special inputs, at every alignment and short length;
 *   - exp_exact is libm's expf bit for bit on a dense sample of [-104, 89] (the exhaustive
 *     check of every float is tests/fast.cmake's slow test), and the approximation stays
 *     within SIFT__APPROX_EPS of expf on a dense sample (exhaustively: the slow test);
 *   - grid sums and the exact float / double sums equal llama.cpp's one-by-one additions;
 *   - sift_chain_sample (fast paths) leaves the same token AND the same candidates (ids,
 *     logits, probabilities where defined, size, order, flags, selection) as fill + apply +
 *     accept (the general path), step after step, for many chains on many inputs (the
 *     reference logits, peer_bench-like vectors at 128256/262144, ties, -inf masks, NaN,
 *     +inf, flat and tiny vocabularies, around top_p's 1024 cut), with every kernel variant;
 *   - the lazy candidates of greedy / dist are built on demand and equal the general ones.
 */
#include "sift_test.h"

#include <float.h>

/* Under valgrind and in sanitizer builds the long loops are cut short (every path still
 * runs); the normal build runs them in full. */
#if defined(__SANITIZE_ADDRESS__)
#define FT_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FT_SANITIZED 1
#endif
#endif
#ifndef FT_SANITIZED
#define FT_SANITIZED 0
#endif
#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define FT_SLOW() (FT_SANITIZED || RUNNING_ON_VALGRIND)
#endif
#endif
#ifndef FT_SLOW
#define FT_SLOW() FT_SANITIZED
#endif

#include "core/chain.h"
#include "core/fast.h"
#include "core/fast_kernels.h"

static const sift__fk *variants[4];
static int n_variants;
static float *ref32, *ref152;
static uint32_t nv32, nvec32, nv152, nvec152;

static int setup(void **state)
{
    (void)state;
    n_variants = sift__fk_all(variants, 4);
    ref32 = sift_test_ref_logits(32000, &nv32, &nvec32);
    ref152 = sift_test_ref_logits(151936, &nv152, &nvec152);
    return ref32 && ref152 ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    free(ref32);
    free(ref152);
    return 0;
}

/* ---- inputs ------------------------------------------------------------------------------- */

static uint64_t rng_state = 0x2545F4914F6CDD1DULL;
static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}
static double unif(void) { return (double)(rnd() >> 11) * 0x1p-53; }
static double gauss(void)
{
    double s = 0;
    for (int i = 0; i < 4; i++) s += unif();
    return (s - 2.0) * 1.7320508075688772;
}

enum { IN_GAUSS, IN_HEAD, IN_TIES, IN_MASKED, IN_FLAT, IN_NAN, IN_PINF, IN_ASC, IN_EQUAL, IN_HUGE, IN_KINDS };

/* A logit vector of kind k: LM-like (noise + a Zipf head), heavy ties, -inf masks, flat,
 * one NaN, one +inf, ascending order, all equal, huge magnitudes. */
static void make_input(float *x, size_t n, int kind)
{
    for (size_t i = 0; i < n; i++) x[i] = (float)(2.0 * gauss());
    const size_t H = 3 + rnd() % 150;
    const double top = log((double)n + 1) + 2.0 + 3.0 + 6.0 * unif();
    if (kind != IN_FLAT && kind != IN_EQUAL)
        for (size_t r = 0; r < H; r++) x[rnd() % n] = (float)(top - (0.6 + 1.4 * unif()) * log((double)r + 1.0) + 0.5 * gauss());
    switch (kind) {
    case IN_TIES:
        for (size_t i = 0; i < n; i++) x[i] = roundf(x[i] * 2.0f) / 2.0f;
        break;
    case IN_MASKED:
        for (size_t i = 0; i < n; i++)
            if (rnd() % 3 == 0) x[i] = -INFINITY;
        break;
    case IN_FLAT:
        for (size_t i = 0; i < n; i++) x[i] = (float)(0.05 * gauss());
        break;
    case IN_NAN:
        x[rnd() % n] = NAN;
        break;
    case IN_PINF:
        x[rnd() % n] = INFINITY;
        break;
    case IN_ASC:
        for (size_t i = 0; i < n; i++) x[i] = (float)i * 1e-3f - 5.0f;
        break;
    case IN_EQUAL:
        for (size_t i = 0; i < n; i++) x[i] = 1.5f;
        break;
    case IN_HUGE:
        for (size_t i = 0; i < n; i++) x[i] *= 1e6f;
        break;
    default: break;
    }
}

/* peer_bench-like vectors for the larger vocabularies */
static float *synth(size_t n, int count)
{
    float *x = malloc(n * (size_t)count * sizeof *x);
    for (int v = 0; v < count; v++) make_input(x + (size_t)v * n, n, IN_HEAD);
    return x;
}

/* ---- kernels: every variant == scalar --------------------------------------------------- */

static void test_kernels_agree(void **state)
{
    (void)state;
    const sift__fk *sc = &sift__fk_scalar;
    const size_t sizes[] = {1, 2, 3, 7, 15, 16, 17, 31, 33, 63, 64, 65, 100, 255, 256, 257, 1000, 4099, 40000};
    float *buf = malloc((40000 + 64) * sizeof *buf);
    uint32_t *ia = malloc((40000 + 64) * sizeof *ia), *ib = malloc((40000 + 64) * sizeof *ib);
    float *fa = malloc((40000 + 64) * sizeof *fa), *fb = malloc((40000 + 64) * sizeof *fb);
    double *ba = malloc((40000 / SIFT__BLK + 4) * sizeof *ba), *bb = malloc((40000 / SIFT__BLK + 4) * sizeof *bb);
    const size_t n_sizes = sizeof sizes / sizeof *sizes - (FT_SLOW() ? 2 : 0);
    for (int v = 0; v < n_variants; v++) {
        const sift__fk *fk = variants[v];
        for (size_t si = 0; si < n_sizes; si++) {
            for (int kind = 0; kind < IN_KINDS; kind++) {
                const size_t n = sizes[si], off = rnd() % 8; /* misaligned starts */
                float *x = buf + off;
                make_input(x, n, kind);
                /* max */
                bool na = false, nb = false;
                const float ma = sc->max(x, n, -INFINITY, &na), mb = fk->max(x, n, -INFINITY, &nb);
                assert_true(ma == mb || (ma != ma && mb != mb));
                assert_int_equal(na, nb);
                /* argmax, count_ge */
                assert_int_equal(sc->argmax(x, n), fk->argmax(x, n));
                for (int r = 0; r < 3; r++) {
                    const float thr = x[rnd() % n];
                    assert_int_equal(sc->count_ge(x, n, thr), fk->count_ge(x, n, thr));
                }
                /* next_above from several starts and thresholds */
                for (int r = 0; r < 4; r++) {
                    const size_t from = n ? rnd() % n : 0;
                    const float thr = x[rnd() % n];
                    assert_int_equal(sc->next_above(x, from, n, thr), fk->next_above(x, from, n, thr));
                }
                /* collect_minp */
                float mxa, mxb;
                const float lp = logf(0.05f + 0.9f * (float)unif());
                size_t ka = sc->collect_minp(x, n, lp, ia, &mxa), kb = fk->collect_minp(x, n, lp, ib, &mxb);
                assert_int_equal(ka, kb);
                assert_memory_equal(ia, ib, ka * sizeof *ia);
                assert_true(mxa == mxb);
                /* collect_ge */
                const float thr = x[rnd() % n] - 0.5f;
                na = nb = false;
                float ca[100], cb[100];
                ka = sc->collect_ge(x, n, thr, ia, &mxa, &na, ca);
                kb = fk->collect_ge(x, n, thr, ib, &mxb, &nb, cb);
                assert_int_equal(ka, kb);
                assert_memory_equal(ia, ib, ka * sizeof *ia);
                assert_true(mxa == mxb || (mxa != mxa && mxb != mxb));
                assert_int_equal(na, nb);
                for (size_t c = 0; c * SIFT__CHUNK < n; c++) assert_true(ca[c] == cb[c] || (ca[c] != ca[c] && cb[c] != cb[c]));
                if (kind == IN_NAN || kind == IN_PINF || kind == IN_HUGE || kind == IN_MASKED) continue;
                /* approx_exp: the same bits; approx_blocks: same heads, sums within rounding */
                sc->approx_exp(x, n, ma, fa);
                fk->approx_exp(x, n, ma, fb);
                assert_memory_equal(fa, fb, n * sizeof *fa);
                {
                    float bma[200], bmb[200], Ma, Mb;
                    bool xa = false, xb = false;
                    ka = sc->approx_blocks(x, n, -3.0f, ba, bma, ia, &Ma, &xa);
                    kb = fk->approx_blocks(x, n, -3.0f, bb, bmb, ib, &Mb, &xb);
                    assert_int_equal(ka, kb);
                    assert_memory_equal(ia, ib, ka * sizeof *ia);
                    assert_true(Ma == Mb && Ma == ma && xa == xb);
                    for (size_t b = 0; b * SIFT__BLK < n; b++) {
                        assert_true(bma[b] == bmb[b]);
                        assert_true(fabs(ba[b] - bb[b]) <= 1e-5 * ba[b] + 1e-30);
                    }
                }
                /* compact_d */
                ka = sc->compact_d(x, 0, n, ma, -4.0f, fa);
                kb = fk->compact_d(x, 0, n, ma, -4.0f, fb);
                assert_int_equal(ka, kb);
                assert_memory_equal(fa, fb, ka * sizeof *fa);
                /* exp_exact == expf */
                fk->exp_exact(x, n, ma, fb);
                for (size_t i = 0; i < n; i++) {
                    const float want = expf(x[i] - ma);
                    if (memcmp(&want, &fb[i], sizeof want)) fail_msg("%s exp_exact(%a) = %a, expf %a", fk->name, x[i] - ma, fb[i], want);
                }
                /* exp + grid sum in one */
                {
                    double sa = 0, sb = 0;
                    for (size_t i = 0; i < n; i++) fa[i] = x[i] - ma;
                    const bool ga = sc->exp_grid_f(fa, n, 0x1p-20f, fb, &sa);
                    float *eb = malloc((n + 16) * sizeof *eb);
                    const bool gb = fk->exp_grid_f(fa, n, 0x1p-20f, eb, &sb);
                    assert_int_equal(ga, gb);
                    assert_memory_equal(fb, eb, n * sizeof *eb);
                    if (ga) assert_true(sa == sb);
                    free(eb);
                    fk->exp_exact(x, n, ma, fb);
                }
                /* grid sums */
                for (int e = -30; e <= 4; e += 17) {
                    double sa = 0, sb = 0;
                    const bool ga = sc->grid_sum_f(fb, n, ldexpf(1.0f, e), &sa), gb = fk->grid_sum_f(fb, n, ldexpf(1.0f, e), &sb);
                    assert_int_equal(ga, gb);
                    if (ga) assert_true(sa == sb);
                    const bool da = sc->grid_sum_d(fb, n, ldexp(1.0, e - 29), &sa), db = fk->grid_sum_d(fb, n, ldexp(1.0, e - 29), &sb);
                    assert_int_equal(da, db);
                    if (da) assert_true(sa == sb);
                }
            }
        }
    }
    free(buf);
    free(ia);
    free(ib);
    free(fa);
    free(fb);
    free(ba);
    free(bb);
}

/* exp_exact on a dense sample, specials, and the FMA-discriminating input */
static void test_exp_exact_is_expf(void **state)
{
    (void)state;
    enum { N = 1 << 16 };
    float *d = malloc(N * sizeof *d), *out = malloc(N * sizeof *out);
    for (int v = 0; v < n_variants; v++) {
        const sift__fk *fk = variants[v];
        long checked = 0;
        const uint32_t starts = FT_SLOW() ? 2 : 64;
        for (uint32_t start = 0; start < starts; start++) {
            for (int i = 0; i < N; i++) {
                /* a stride through the bit patterns of [-104, 0] and (0, 89] */
                const uint32_t bits = (uint32_t)((0x80000000u + start * 7919u + (uint32_t)i * 32771u) & 0xFFFFFFFFu);
                memcpy(&d[i], &bits, sizeof bits);
                if (i % 9 == 0) d[i] = -d[i];
                if (i == 0) d[i] = -0x1.f8cbb2p+5f;
                if (i == 1) d[i] = SIFT__EXPF_UFLOW;
                if (i == 2) d[i] = SIFT__EXPF_MAYUFLOW;
                if (i == 3) d[i] = -INFINITY;
                if (i == 4) d[i] = NAN;
            }
            fk->exp_exact(d, N, 0.0f, out);
            for (int i = 0; i < N; i++) {
                const float want = expf(d[i]);
                if (memcmp(&want, &out[i], sizeof want) && !(want != want && out[i] != out[i]))
                    fail_msg("%s: exp_exact(%a) = %a, libm %a", fk->name, d[i], out[i], want);
                checked++;
            }
        }
        assert_true(checked >= (long)starts * N);
    }
    printf("kernels: %s, exp_exact %s\n", sift__fk_best()->name, sift__fk_best()->exp_exact_ok ? "vector" : "libm");
    free(d);
    free(out);
}

static void test_approx_error_bound(void **state)
{
    (void)state;
    double worst = 0;
    float at = 0;
    long n = 0;
    /* every 61st float in [-87, 0] (every 6101st under valgrind) */
    const uint32_t stride = FT_SLOW() ? 6101 : 61;
    for (uint32_t bits = 0x80000000u; bits <= 0xC2AE0000u; bits += stride) {
        float d;
        memcpy(&d, &bits, sizeof d);
        const float e = expf(d), a = sift__approx_exp(d);
        const double err = fabs((double)a - (double)e);
        if (e >= 0x1p-125f) {
            const double rel = err / e;
            if (rel > worst) worst = rel, at = d;
        } else {
            assert_true(err <= SIFT__APPROX_ETA);
        }
        n++;
    }
    printf("approx_exp: max relative error %.3g at %a (%ld inputs)\n", worst, at, n);
    assert_true(worst <= SIFT__APPROX_EPS / 2);
    /* below -87: 0, and expf is below eta */
    assert_true(sift__approx_exp(-87.5f) == 0.0f && expf(-87.5f) <= SIFT__APPROX_ETA);
    assert_true(sift__approx_exp(-INFINITY) == 0.0f);
}

/* the exact sums against one-by-one additions */
static void test_exact_sums(void **state)
{
    (void)state;
    const size_t n = FT_SLOW() ? 3000 : 20000;
    float *x = malloc(n * sizeof *x);
    double *starts = malloc((n / 512 + 2) * sizeof *starts);
    for (int v = 0; v < n_variants; v++) {
        for (int kind = 0; kind < IN_KINDS; kind++) {
            if (kind == IN_NAN || kind == IN_PINF) continue;
            for (int rep = 0; rep < (FT_SLOW() ? 1 : 3); rep++) {
                make_input(x, n, kind);
                bool nan = false;
                const float M = sift__fk_scalar.max(x, n, -INFINITY, &nan);
                if (!isfinite(M)) continue;
                float sf = 0.0f;
                for (size_t i = 0; i < n; i++) sf += expf(x[i] - M);
                float cmax[64], mm;
                bool nn = false;
                uint32_t *scratch = malloc((n + 64) * sizeof *scratch);
                variants[v]->collect_ge(x, n, INFINITY, scratch, &mm, &nn, cmax);
                free(scratch);
                for (int withmax = 0; withmax < 2; withmax++) {
                    const float got = sift__float_sum_exact(variants[v], x, n, M, withmax ? cmax : NULL);
                    if (memcmp(&got, &sf, sizeof sf)) fail_msg("%s kind %d: float sum %a, one by one %a", variants[v]->name, kind, got, sf);
                }
                /* the exact dist pick for many draws, against dist's own arithmetic */
                float *p = malloc(n * sizeof *p);
                for (int k = 0; k < 20; k++) {
                    const double u = k < 2 ? (double)k * 0.999999999 : unif();
                    const int64_t want = sift__dist_core(x, n, false, u, p);
                    assert_int_equal(sift__dist_exact(variants[v], x, n, M, u, starts), want);
                }
                free(p);
            }
        }
    }
    free(x);
    free(starts);
}

/* dist's certified pick when the draw lands exactly on, or next to, a boundary of the
 * running sum (where an uncertified approximation would pick the neighbour) */
static void test_dist_pick_at_boundaries(void **state)
{
    (void)state;
    const size_t n = 151936;
    float *p = malloc(n * sizeof *p);
    sift_candidates c;
    assert_int_equal(sift_candidates_init(&c, n), SIFT_OK);
    for (int v = 0; v < n_variants; v++) {
        sift__fast_stats st = {0};
        for (int vec = 0; vec < (FT_SLOW() ? 1 : 6); vec++) {
            const float *x = ref152 + (size_t)vec * n;
            bool nan = false;
            const float M = sift__fk_scalar.max(x, n, -INFINITY, &nan);
            /* the running sums as llama.cpp forms them */
            double S = 0;
            for (size_t i = 0; i < n; i++) S += expf(x[i] - M);
            for (int k = 0; k < (FT_SLOW() ? 6 : 40); k++) {
                const size_t target = k % 2 == 0 ? rnd() % n : rnd() % 64; /* anywhere; the start */
                double R = 0;
                for (size_t i = 0; i <= target; i++) R += expf(x[i] - M);
                double u = R / S;
                for (int d = -2; d <= 2; d++) {
                    double w = u;
                    for (int s = 0; s < abs(d); s++) w = nextafter(w, d < 0 ? 0.0 : 1.0);
                    if (!(w < 1.0)) continue;
                    const int64_t want = sift__dist_core(x, n, false, w, p);
                    sift_workspace *ws = (sift_workspace *)c.ws;
                    float Mk, *bmax = ws->p2;
                    bool nk = false;
                    const size_t nh = variants[v]->approx_blocks(x, n, -12.0f, ws->blk, bmax, ws->idx, &Mk, &nk);
                    assert_true(Mk == M && !nk);
                    const int64_t got = sift__dist_pick(variants[v], x, n, w, M, bmax, nh, ws, &st);
                    if (got != want) fail_msg("%s: u = %a: pick %lld, llama.cpp's %lld", variants[v]->name, w, (long long)got, (long long)want);
                }
            }
        }
        assert_true(st.dist_exact > 0); /* the boundaries did need the exact path */
    }
    sift_candidates_free(&c);
    free(p);
}

/* ---- the fast step against the general path --------------------------------------------- */

static void same_candidates(const char *what, const sift_candidates *a, const sift_candidates *b)
{
    if (a->size != b->size) fail_msg("%s: size %zu vs %zu", what, a->size, b->size);
    if (a->selected != b->selected) fail_msg("%s: selected %lld vs %lld", what, (long long)a->selected, (long long)b->selected);
    if (a->sorted != b->sorted) fail_msg("%s: sorted %d vs %d", what, a->sorted, b->sorted);
    if (a->flags != b->flags) fail_msg("%s: flags %u vs %u", what, a->flags, b->flags);
    if (memcmp(a->id, b->id, a->size * sizeof *a->id)) fail_msg("%s: ids differ", what);
    if (memcmp(a->logit, b->logit, a->size * sizeof *a->logit)) fail_msg("%s: logits differ", what);
    if (a->flags & SIFT_CAND_PROBS)
        if (memcmp(a->p, b->p, a->size * sizeof *a->p)) fail_msg("%s: probabilities differ", what);
}

static sift_chain *chain_of(const char *spec)
{
    sift_error err = {0};
    sift_chain *c = strcmp(spec, "DEFAULT") ? sift_chain_from_spec(spec, NULL, &err) : NULL;
    if (!strcmp(spec, "DEFAULT")) {
        sift_sampling_params p = sift_sampling_default_params();
        p.seed = 42;
        c = sift_chain_from_params(&p, NULL, &err);
    }
    if (!c) fail_msg("%s: %s", spec, err.msg);
    return c;
}

/* run `steps` steps of spec over the vectors: fast (sample) vs general (fill/apply/accept) */
static void fast_equals_general(const char *spec, const float *vecs, size_t n, int nvec, int steps, const sift__fk *fk)
{
    sift_chain *a = chain_of(spec), *b = chain_of(spec);
    sift__chain_set_kernels(a, fk);
    char what[256];
    for (int t = 0; t < steps; t++) {
        const float *x = vecs + (size_t)(t % nvec) * n;
        const sift_token ta = sift_chain_sample(a, x, (int32_t)n);
        assert_int_equal(sift_chain_fill(b, x, (int32_t)n, NULL), SIFT_OK);
        const sift_token tb = sift_chain_apply(b, NULL);
        if (tb != SIFT_TOKEN_NULL) sift_chain_accept(b, tb);
        snprintf(what, sizeof what, "%s [%s] n=%zu step %d", spec, fk->name, n, t);
        if (ta != tb) fail_msg("%s: token %d vs %d", what, ta, tb);
        same_candidates(what, sift_chain_candidates(a), sift_chain_candidates(b));
    }
    sift_chain_free(a);
    sift_chain_free(b);
}

static const char *const specs[] = {
    "greedy()",
    "dist(42)",
    "top_k(1);dist(3)",
    "top_k(40);dist(42)",
    "top_k(128);temp(0.7);dist(5)",
    "top_k(129);dist(5)",
    "top_p(0.95,1);dist(42)",
    "top_p(0.5,0);greedy()",
    "top_p(0.999,1);dist(9)",
    "top_p(0.9,300);dist(9)",
    "top_p(0.95,1);temp(0.8);top_k(10);dist(11)",
    "min_p(0.05,1);dist(42)",
    "min_p(0.3,0);temp(1.5);dist(7)",
    "min_p(0.001,50);dist(7)",
    "min_p(0.99,3);dist(7)",
    "top_k(0);top_p(0.95,1);temp(0.8);dist(42)",
    "temp(1.0);top_k(0);dist(8)",
    "top_k(40);top_p(0.95,0);min_p(0.05,0);temp(0.8);dist(42)",
    "DEFAULT",
    "temp(0.7);dist(3)",
    "penalties(64,1.3,0.2,0.1);top_k(50);dist(5)",
    "dist(1);greedy()",
};
#define N_SPECS (sizeof specs / sizeof *specs)

static void test_fast_equals_general_reference(void **state)
{
    (void)state;
    const bool slow = FT_SLOW();
    for (int v = 0; v < n_variants; v++)
        for (size_t s = 0; s < N_SPECS; s++) {
            fast_equals_general(specs[s], ref32, nv32, (int)nvec32, slow ? 3 : 40, variants[v]);
            if (!slow || s % 4 == 0) fast_equals_general(specs[s], ref152, nv152, (int)nvec152, slow ? 1 : v == 0 ? 24 : 6, variants[v]);
        }
}

static void test_fast_equals_general_large(void **state)
{
    (void)state;
    const size_t sizes[] = {128256, 262144};
    for (size_t k = 0; k < 2; k++) {
        float *x = synth(sizes[k], 4);
        for (size_t s = 0; s < N_SPECS; s++)
            if (!FT_SLOW() || s % 5 == 0) fast_equals_general(specs[s], x, sizes[k], 4, FT_SLOW() ? 1 : 8, variants[0]);
        free(x);
    }
}

static void test_fast_equals_general_adversarial(void **state)
{
    (void)state;
    const size_t sizes[] = {1, 2, 5, 40, 129, 1000, 1024, 1025, 1100, 3000, 50000};
    const size_t n_sizes = sizeof sizes / sizeof *sizes - (FT_SLOW() ? 1 : 0);
    for (size_t si = 0; si < n_sizes; si++) {
        const size_t n = sizes[si];
        float *x = malloc(n * 4 * sizeof *x);
        for (int kind = 0; kind < IN_KINDS; kind++) {
            for (int v = 0; v < 4; v++) make_input(x + (size_t)v * n, n, kind);
            for (int fv = 0; fv < n_variants; fv++)
                for (size_t s = 0; s < N_SPECS; s++) fast_equals_general(specs[s], x, n, 4, FT_SLOW() ? 2 : 6, variants[fv]);
        }
        free(x);
    }
}

/* top_k with ties exactly at the boundary (or inside the top k): the heap's own order */
static void test_top_k_boundary_ties(void **state)
{
    (void)state;
    const size_t n = 20000;
    float *x = malloc(n * 4 * sizeof *x), *sorted = malloc(n * sizeof *sorted);
    const int ks[] = {1, 2, 5, 40, 128};
    for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++) {
        for (int v = 0; v < 4; v++) {
            float *y = x + (size_t)v * n;
            make_input(y, n, IN_HEAD);
            memcpy(sorted, y, n * sizeof *y);
            /* the k-th (v odd) or a middle one of the top k (v even), copied to 1..3 places */
            for (size_t i = 0; i < n; i++) /* partial selection sort is enough for k <= 128 */
                for (size_t j = i + 1; i < (size_t)ks[ki] && j < n; j++)
                    if (sorted[j] > sorted[i]) { const float t = sorted[i]; sorted[i] = sorted[j]; sorted[j] = t; }
            const float dup = sorted[v % 2 ? ks[ki] - 1 : ks[ki] / 2];
            for (int c = 0; c < 1 + v % 3; c++) y[rnd() % n] = dup;
        }
        char spec[64];
        snprintf(spec, sizeof spec, "top_k(%d);dist(%d)", ks[ki], ks[ki]);
        for (int fv = 0; fv < n_variants; fv++) fast_equals_general(spec, x, n, 4, 8, variants[fv]);
    }
    free(x);
    free(sorted);
}

/* the pieces the fast paths are made of agree with llama.cpp's reference streams too */
static void test_fast_paths_taken(void **state)
{
    (void)state;
    float *x = synth(151936, 4);
    const char *const fast_specs[] = {"dist(42)", "top_p(0.95,1);dist(42)"};
    for (int k = 0; k < 2; k++) {
        sift_chain *c = chain_of(fast_specs[k]);
        const uint64_t steps = FT_SLOW() ? 4 : 32;
        for (uint64_t t = 0; t < steps; t++) sift_chain_sample(c, x + (size_t)(t % 4) * 151936, 151936);
        sift__fast_stats st;
        sift__chain_fast_stats(c, &st);
        if (k == 0) assert_true(st.dist_fast + st.dist_exact == steps && st.dist_fast >= steps * 3 / 4);
        else assert_true(st.top_p_fast == steps);
        sift_chain_free(c);
    }
    free(x);
}

/* lazy candidates: built on demand, equal to the general ones; apply after sample works */
static void test_lazy_candidates(void **state)
{
    (void)state;
    for (int k = 0; k < 2; k++) {
        const char *spec = k ? "dist(7)" : "greedy()";
        sift_chain *a = chain_of(spec), *b = chain_of(spec);
        for (int t = 0; t < 8; t++) {
            const float *x = ref32 + (size_t)(t % nvec32) * nv32;
            const sift_token ta = sift_chain_sample(a, x, (int32_t)nv32);
            sift_chain_fill(b, x, (int32_t)nv32, NULL);
            const sift_token tb = sift_chain_apply(b, NULL);
            sift_chain_accept(b, tb);
            assert_int_equal(ta, tb);
            if (t % 2) continue; /* every other step: never asked for */
            const sift_candidates *ca = sift_chain_candidates(a);
            same_candidates(spec, ca, sift_chain_candidates(b));
            assert_int_equal(ca->id[ca->selected], ta);
            if (k) { /* dist's probabilities are a distribution */
                double sum = 0;
                for (size_t i = 0; i < ca->size; i++) sum += ca->p[i];
                assert_float_near(sum, 1.0, 1e-4);
            }
        }
        /* an apply on the chain's own candidates after a lazy step starts from them */
        const float *x = ref32;
        sift_chain_sample(a, x, (int32_t)nv32);
        sift_chain_sample(b, x, (int32_t)nv32);
        const sift_token ra = sift_chain_apply(a, NULL), rb = sift_chain_apply(b, NULL);
        assert_int_equal(ra, rb);
        sift_chain_free(a);
        sift_chain_free(b);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kernels_agree),
        cmocka_unit_test(test_exp_exact_is_expf),
        cmocka_unit_test(test_approx_error_bound),
        cmocka_unit_test(test_exact_sums),
        cmocka_unit_test(test_dist_pick_at_boundaries),
        cmocka_unit_test(test_fast_equals_general_reference),
        cmocka_unit_test(test_fast_equals_general_large),
        cmocka_unit_test(test_fast_equals_general_adversarial),
        cmocka_unit_test(test_top_k_boundary_ties),
        cmocka_unit_test(test_fast_paths_taken),
        cmocka_unit_test(test_lazy_candidates),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
