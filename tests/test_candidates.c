/*
 * test_candidates.c - the candidates array and the sort machinery under it: libstdc++'s
 * exact std::sort / std::partial_sort (tie order included; expected permutations hashed
 * from a g++ 12 program), llama.cpp's bucket partial sort, softmax, flags, inspection.
 */
#include "core/candidates.h"
#include "core/stlsort.h"
#include "sift_test.h"

/* ---- libstdc++ sort emulation -------------------------------------------------------- */

static uint32_t lcg;
static uint32_t lcg_next(void)
{
    lcg = lcg * 1664525u + 1013904223u;
    return lcg >> 8;
}

static uint64_t fnv(const sift__pair *v, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h ^= v[i].idx;
        h *= 1099511628211ull;
    }
    return h;
}

static void test_stl_sort_tie_order_matches_libstdcxx(void **state)
{
    (void)state;
    /* n, middle, distinct key levels (few levels = many ties), FNV-1a of the resulting
     * index order as std::sort / std::partial_sort leave it (tests/../stlref.cpp in the
     * commit message: keys (lcg % levels) * 0.5 - 3, comparator a.key > b.key) */
    static const struct { size_t n, mid; uint32_t levels; uint64_t hash; } cases[] = {
        {40, 40, 5, 0xdfb2282063ed0cc9ull},       {300, 300, 9, 0xc6482ade25e78f17ull},
        {300, 40, 9, 0x90b8f2e0ea759681ull},      {1000, 1000, 3, 0xe52659d2b1ae2955ull},
        {1000, 128, 50, 0x24cf602760196d19ull},   {5000, 5000, 1000, 0xee6d265ec7d7d631ull},
        {17, 17, 2, 0x1fc1e3115ae61217ull},       {5000, 1, 7, 0x44bd30d473cd0018ull},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        const size_t n = cases[c].n;
        sift__pair *v = malloc(n * sizeof *v);
        assert_non_null(v);
        lcg = 12345 + (uint32_t)n * 7 + cases[c].levels;
        for (size_t i = 0; i < n; i++) v[i] = (sift__pair){(float)(lcg_next() % cases[c].levels) * 0.5f - 3.0f, (uint32_t)i};
        if (cases[c].mid == n) sift__stl_sort(v, n);
        else sift__stl_partial_sort(v, cases[c].mid, n);
        for (size_t i = 1; i < cases[c].mid; i++) assert_true(v[i - 1].key >= v[i].key);
        assert_true(fnv(v, cases[c].mid) == cases[c].hash);
        free(v);
    }
}

static void test_stl_partial_sort_streaming_equals_pairs(void **state)
{
    (void)state;
    /* the streaming heap selection gives the same first k as the one over built pairs,
     * ties and NaN included */
    enum { N = 4000 };
    float *keys = malloc(N * sizeof *keys);
    sift__pair *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b);
    const uint32_t levels[] = {3, 50, 100000};
    const size_t ks[] = {1, 2, 40, 128, N};
    for (size_t l = 0; l < 3; l++) {
        lcg = 7 + (uint32_t)l;
        for (int i = 0; i < N; i++) {
            keys[i] = (float)(lcg_next() % levels[l]) * 0.25f;
            if (i % 97 == 5) keys[i] = NAN;
            if (i % 89 == 3) keys[i] = -INFINITY;
        }
        for (size_t t = 0; t < 5; t++) {
            for (int i = 0; i < N; i++) a[i] = (sift__pair){sift__sort_key(keys[i]), (uint32_t)i};
            sift__stl_partial_sort(a, ks[t], N);
            sift__stl_partial_sort_keys(keys, N, ks[t], b);
            for (size_t i = 0; i < ks[t]; i++) {
                assert_int_equal(a[i].idx, b[i].idx);
                assert_true(a[i].key == b[i].key || (a[i].key != a[i].key && b[i].key != b[i].key));
            }
        }
    }
    free(keys);
    free(a);
    free(b);
}

static void test_stl_sort_small_and_empty(void **state)
{
    (void)state;
    sift__pair v[3] = {{1.0f, 0}, {3.0f, 1}, {2.0f, 2}};
    sift__stl_sort(v, 0);
    sift__stl_sort(v, 1);
    assert_int_equal(v[0].idx, 0);
    sift__stl_sort(v, 3);
    assert_int_equal(v[0].idx, 1);
    assert_int_equal(v[1].idx, 2);
    assert_int_equal(v[2].idx, 0);
    sift__stl_partial_sort(v, 0, 3); /* nothing to do */
}

/* ---- candidates ------------------------------------------------------------------------- */

static void test_init_fill_free(void **state)
{
    (void)state;
    sift_candidates c;
    assert_int_equal(sift_candidates_init(&c, 0), SIFT_E_INVAL);
    assert_int_equal(sift_candidates_init(&c, 4), SIFT_OK);
    const float x[5] = {1, 2, 3, 4, 5};
    assert_int_equal(sift_candidates_fill(&c, x, 5), SIFT_E_INVAL); /* over capacity */
    assert_int_equal(sift_candidates_fill(&c, NULL, 2), SIFT_E_INVAL);
    assert_int_equal(sift_candidates_fill(&c, x, 4), SIFT_OK);
    assert_int_equal(c.size, 4);
    assert_int_equal(c.selected, -1);
    assert_false(c.sorted);
    assert_int_equal(c.flags, SIFT_CAND_IDENTITY); /* id[i] == i, no probabilities */
    for (int i = 0; i < 4; i++) {
        assert_int_equal(c.id[i], i);
        assert_true(c.logit[i] == x[i]);
    }
    assert_int_equal(sift_candidates_selected(&c), SIFT_TOKEN_NULL);
    c.selected = 2;
    assert_int_equal(sift_candidates_selected(&c), 2);
    c.selected = 9;
    assert_int_equal(sift_candidates_selected(&c), SIFT_TOKEN_NULL);
    sift_candidates_free(&c);
    sift_candidates_free(&c); /* twice is harmless */
    sift_candidates_free(NULL);
}

static void test_probs_computed_once_and_valid(void **state)
{
    (void)state;
    const float x[4] = {1.0f, 2.0f, 3.0f, 4.0f};
    sift_candidates c;
    sift_test_cand(&c, x, 4);
    const float *p = sift_candidates_probs(&c);
    assert_true(c.flags & SIFT_CAND_PROBS);
    double sum = 0, z = exp(-3.0) + exp(-2.0) + exp(-1.0) + 1.0;
    for (int i = 0; i < 4; i++) {
        sum += p[i];
        assert_float_near(p[i], exp(x[i] - 4.0) / z, 1e-6);
    }
    assert_float_near(sum, 1.0, 1e-6);
    /* valid probabilities are not recomputed: a marker survives */
    c.p[0] = 0.5f;
    sift_candidates_probs(&c);
    assert_true(c.p[0] == 0.5f);
    /* changing logits makes them stale: recomputed */
    c.logit[3] = 1.0f;
    sift_candidates_logits_changed(&c);
    assert_false(c.flags & SIFT_CAND_PROBS);
    sift_candidates_probs(&c);
    assert_float_near(c.p[0], exp(-2.0) / (2 * exp(-2.0) + exp(-1.0) + 1.0), 1e-6); /* logits 1 2 3 1 */
    sift_candidates_free(&c);
}

static void test_sort_and_partial_sort(void **state)
{
    (void)state;
    enum { N = 3000 };
    float *x = malloc(N * sizeof *x);
    assert_non_null(x);
    lcg = 99;
    for (int i = 0; i < N; i++) x[i] = (float)(lcg_next() % 100000) / 5000.0f - 10.0f; /* spans the buckets */
    sift_candidates c;
    sift_test_cand(&c, x, N);
    sift_candidates_sort(&c);
    assert_true(c.sorted);
    assert_int_equal(c.size, N);
    for (int i = 1; i < N; i++) assert_true(c.logit[i - 1] >= c.logit[i]);
    for (int i = 0; i < N; i++) assert_true(c.logit[i] == x[c.id[i]]); /* entries moved whole */
    /* partial sort, both paths (<= 128: heap selection; > 128: buckets) */
    const size_t ks[] = {1, 40, 128, 129, 500, N};
    for (size_t t = 0; t < sizeof ks / sizeof *ks; t++) {
        sift_candidates_fill(&c, x, N);
        sift_candidates_partial_sort(&c, ks[t]);
        assert_int_equal(c.size, ks[t]);
        assert_true(c.sorted);
        for (size_t i = 1; i < ks[t]; i++) assert_true(c.logit[i - 1] >= c.logit[i]);
        /* the k-th largest: nothing left out is larger */
        size_t larger = 0;
        for (int i = 0; i < N; i++) larger += x[i] > c.logit[ks[t] - 1];
        assert_true(larger < ks[t]);
    }
    /* k >= size keeps everything */
    sift_candidates_fill(&c, x, 10);
    sift_candidates_partial_sort(&c, 50);
    assert_int_equal(c.size, 10);
    /* truncation drops probabilities */
    sift_candidates_probs(&c);
    sift_candidates_truncate(&c, 5);
    assert_int_equal(c.size, 5);
    assert_false(c.flags & SIFT_CAND_PROBS);
    sift_candidates_free(&c);
    free(x);
}

static void test_bucket_of_extremes(void **state)
{
    (void)state;
    /* logits outside [-10, 10), +-inf: llama.cpp's bucket clamp (and +inf in bucket 0) */
    float x[200];
    for (int i = 0; i < 200; i++) x[i] = (float)(i % 23) - 11.0f;
    x[7] = 1e30f;
    x[8] = -INFINITY;
    x[9] = 50.0f;
    sift_candidates c;
    sift_test_cand(&c, x, 200);
    sift_candidates_partial_sort(&c, 150);
    assert_int_equal(c.size, 150);
    /* +inf-like values land in bucket 0 as in llama.cpp and are not at the front */
    assert_true(c.logit[0] == 50.0f);
    sift_candidates_free(&c);
}

static void test_top_inspection(void **state)
{
    (void)state;
    const float x[6] = {0.0f, 3.0f, 1.0f, 3.0f, -INFINITY, 2.0f};
    sift_candidates c;
    sift_test_cand(&c, x, 6);
    sift_token ids[6];
    float lg[6], pr[6];
    assert_int_equal(sift_candidates_top(&c, 3, ids, lg, pr), 3);
    assert_int_equal(ids[0], 1); /* ties: the earlier position first */
    assert_int_equal(ids[1], 3);
    assert_int_equal(ids[2], 5);
    const double z = 1 + exp(3) * 2 + exp(1) + exp(2);
    assert_float_near(pr[0], exp(3) / z, 1e-6);
    assert_float_near(pr[2], exp(2) / z, 1e-6);
    assert_int_equal(c.flags, SIFT_CAND_IDENTITY); /* never modifies */
    assert_int_equal(sift_candidates_top(&c, 100, ids, NULL, NULL), 6);
    assert_int_equal(ids[5], 4);
    /* more than the on-stack buffer */
    float big[300];
    for (int i = 0; i < 300; i++) big[i] = (float)i;
    sift_candidates b;
    sift_test_cand(&b, big, 300);
    sift_token *bid = malloc(300 * sizeof *bid);
    assert_int_equal(sift_candidates_top(&b, 100, bid, NULL, NULL), 100);
    assert_int_equal(bid[0], 299);
    assert_int_equal(bid[99], 200);
    free(bid);
    sift_candidates_free(&b);
    sift_candidates_free(&c);
}

static void test_user_arrays_without_workspace(void **state)
{
    (void)state;
    /* candidates built by hand (no ws): samplers still work through sift_sampler_apply */
    sift_token id[5] = {10, 11, 12, 13, 14};
    float lg[5] = {0.5f, 2.0f, -1.0f, 3.0f, 1.0f};
    float p[5] = {0};
    sift_candidates c = {id, lg, p, 5, 5, -1, false, 0, NULL};
    sift_test_apply(sift_sampler_init_top_k(2), &c);
    assert_int_equal(c.size, 2);
    assert_int_equal(c.id[0], 13);
    assert_int_equal(c.id[1], 11);
    assert_null(c.ws);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stl_sort_tie_order_matches_libstdcxx),
        cmocka_unit_test(test_stl_partial_sort_streaming_equals_pairs),
        cmocka_unit_test(test_stl_sort_small_and_empty),
        cmocka_unit_test(test_init_fill_free),
        cmocka_unit_test(test_probs_computed_once_and_valid),
        cmocka_unit_test(test_sort_and_partial_sort),
        cmocka_unit_test(test_bucket_of_extremes),
        cmocka_unit_test(test_top_inspection),
        cmocka_unit_test(test_user_arrays_without_workspace),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
