/*
 * test_samplers.c - every built-in sampler on small hand-worked cases, plus the edge cases
 * (k >= size, p = 1, min_keep > size, all logits equal, -inf logits, n_vocab 1, empty
 * arrays, disabled parameters giving "?name" no-ops).
 */
#include "core/rng.h"
#include "sift_test.h"

#define LN(x) ((float)log(x))

static void run1(sift_sampler *s, sift_candidates *c, const float *x, size_t n)
{
    sift_test_cand(c, x, n);
    sift_test_apply(s, c);
}

/* ---- greedy / dist ------------------------------------------------------------------------ */

static void test_greedy(void **state)
{
    (void)state;
    sift_candidates c;
    const float a[] = {1, 5, 3, 5};
    run1(sift_sampler_init_greedy(), &c, a, 4);
    assert_int_equal(c.selected, 1); /* the first maximum */
    sift_candidates_free(&c);
    const float b[] = {-INFINITY, -INFINITY, 0};
    run1(sift_sampler_init_greedy(), &c, b, 3);
    assert_int_equal(c.selected, 2);
    sift_candidates_free(&c);
    const float one[] = {-3};
    run1(sift_sampler_init_greedy(), &c, one, 1);
    assert_int_equal(c.selected, 0);
    c.size = 0;
    sift_test_apply(sift_sampler_init_greedy(), &c);
    assert_int_equal(c.selected, -1);
    sift_candidates_free(&c);
}

static void test_dist_hand_worked(void **state)
{
    (void)state;
    /* logits {0, ln 3}: p = {1/4, 3/4}; the pick is 0 iff u <= 1/4 */
    const float x[] = {0.0f, LN(3)};
    for (uint32_t seed = 0; seed < 50; seed++) {
        sift__rng r;
        sift__rng_seed(&r, seed);
        const double u = sift__rng_uniform_double(&r);
        sift_candidates c;
        run1(sift_sampler_init_dist(seed), &c, x, 2);
        assert_int_equal(c.selected, u * (4.0 / 3.0) <= 1.0 / 3.0 ? 0 : 1);
        assert_true(c.flags & SIFT_CAND_PROBS);
        assert_float_near(c.p[0], 0.25, 1e-6);
        assert_float_near(c.p[1], 0.75, 1e-6);
        sift_candidates_free(&c);
    }
}

static void test_dist_frequencies_and_inf(void **state)
{
    (void)state;
    const float x[] = {-INFINITY, 0.0f, -INFINITY, LN(3)};
    sift_sampler *s = sift_sampler_init_dist(7);
    sift_candidates c;
    sift_test_cand(&c, x, 4);
    int count[4] = {0};
    for (int i = 0; i < 20000; i++) {
        sift_candidates_fill(&c, x, 4);
        sift_sampler_apply(s, &c);
        count[c.selected]++;
    }
    assert_int_equal(count[0] + count[2], 0); /* -inf never picked */
    assert_float_near(count[3] / 20000.0, 0.75, 0.015);
    /* n = 1 */
    sift_candidates_fill(&c, x + 1, 1);
    sift_sampler_apply(s, &c);
    assert_int_equal(c.selected, 0);
    assert_true(c.p[0] == 1.0f);
    /* empty */
    c.size = 0;
    sift_sampler_apply(s, &c);
    assert_int_equal(c.selected, -1);
    assert_int_equal(sift_sampler_get_seed(s), 7);
    sift_sampler_free(s);
    sift_candidates_free(&c);
    /* SIFT_DEFAULT_SEED draws a seed, reported by get_seed */
    s = sift_sampler_init_dist(SIFT_DEFAULT_SEED);
    (void)sift_sampler_get_seed(s);
    sift_sampler_free(s);
}

/* ---- top_k / top_p / min_p / typical ------------------------------------------------------ */

static void test_top_k(void **state)
{
    (void)state;
    sift_candidates c;
    const float x[] = {1, 4, 2, 8, 5};
    run1(sift_sampler_init_top_k(3), &c, x, 5);
    assert_int_equal(c.size, 3);
    assert_true(c.sorted);
    assert_int_equal(c.id[0], 3);
    assert_int_equal(c.id[1], 4);
    assert_int_equal(c.id[2], 1);
    sift_candidates_free(&c);
    run1(sift_sampler_init_top_k(9), &c, x, 5); /* k >= size: all, sorted */
    assert_int_equal(c.size, 5);
    assert_true(c.sorted);
    assert_int_equal(c.id[4], 0);
    sift_candidates_free(&c);
    sift_sampler *off = sift_sampler_init_top_k(0);
    assert_string_equal(sift_sampler_name(off), "?top-k");
    run1(off, &c, x, 5);
    assert_int_equal(c.size, 5);
    assert_false(c.sorted);
    sift_candidates_free(&c);
    const float eq[] = {1, 1, 1, 1};
    run1(sift_sampler_init_top_k(2), &c, eq, 4);
    assert_int_equal(c.size, 2);
    sift_candidates_free(&c);
    const float inf[] = {-INFINITY, 0, -INFINITY};
    run1(sift_sampler_init_top_k(2), &c, inf, 3);
    assert_int_equal(c.size, 2);
    assert_int_equal(c.id[0], 1);
    sift_candidates_free(&c);
    run1(sift_sampler_init_top_k(1), &c, x, 1);
    assert_int_equal(c.size, 1);
    sift_candidates_free(&c);
}

static void test_top_p(void **state)
{
    (void)state;
    sift_candidates c;
    /* p = .15 .5 .05 .3 (array order) */
    const float x[] = {LN(0.15), LN(0.5), LN(0.05), LN(0.3)};
    run1(sift_sampler_init_top_p(0.6f, 1), &c, x, 4);
    assert_int_equal(c.size, 2);
    assert_int_equal(c.id[0], 1);
    assert_int_equal(c.id[1], 3);
    assert_true(c.sorted);
    assert_false(c.flags & SIFT_CAND_PROBS); /* cut, not renormalized */
    assert_float_near(c.p[0], 0.5, 1e-6);
    sift_candidates_free(&c);
    run1(sift_sampler_init_top_p(0.4f, 1), &c, x, 4);
    assert_int_equal(c.size, 1);
    sift_candidates_free(&c);
    run1(sift_sampler_init_top_p(0.4f, 3), &c, x, 4); /* min_keep */
    assert_int_equal(c.size, 3);
    sift_candidates_free(&c);
    run1(sift_sampler_init_top_p(0.4f, 10), &c, x, 4); /* min_keep > size: everything */
    assert_int_equal(c.size, 4);
    sift_candidates_free(&c);
    sift_sampler *off = sift_sampler_init_top_p(1.0f, 1);
    assert_string_equal(sift_sampler_name(off), "?top-p");
    run1(off, &c, x, 4);
    assert_int_equal(c.size, 4);
    sift_candidates_free(&c);
    const float eq[10] = {0};
    run1(sift_sampler_init_top_p(0.45f, 1), &c, eq, 10); /* 0.1 each: 5 reach 0.45 */
    assert_int_equal(c.size, 5);
    sift_candidates_free(&c);
}

static int cmp_desc(const void *a, const void *b)
{
    const float x = *(const float *)a, y = *(const float *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

static void test_top_p_large_unsorted_path(void **state)
{
    (void)state;
    /* more than 1024 candidates: top-256 first, then the whole array when needed */
    enum { N = 3000 };
    float *x = malloc(N * sizeof *x), *s = malloc(N * sizeof *s);
    uint32_t r = 5;
    for (int i = 0; i < N; i++) {
        r = r * 1664525u + 1013904223u;
        x[i] = (float)(r >> 8) / 16777216.0f * 4.0f; /* flat-ish: the nucleus is large */
    }
    const float ps[] = {0.05f, 0.5f, 0.99f};
    for (size_t t = 0; t < 3; t++) {
        sift_candidates c;
        run1(sift_sampler_init_top_p(ps[t], 1), &c, x, N);
        /* reference: float softmax in array order, then the descending float running sum */
        float mx = x[0], sum = 0;
        for (int i = 1; i < N; i++) mx = mx < x[i] ? x[i] : mx;
        for (int i = 0; i < N; i++) sum += expf(x[i] - mx);
        for (int i = 0; i < N; i++) s[i] = expf(x[i] - mx) / sum;
        qsort(s, N, sizeof *s, cmp_desc);
        float cum = 0;
        size_t want = N;
        for (size_t i = 0; i < N; i++) {
            cum += s[i];
            if (cum >= ps[t]) {
                want = i + 1;
                break;
            }
        }
        assert_int_equal(c.size, want);
        assert_true(want > 256 || t == 0);
        for (size_t i = 1; i < c.size; i++) assert_true(c.logit[i - 1] >= c.logit[i]);
        sift_candidates_free(&c);
    }
    free(x);
    free(s);
}

static void test_min_p(void **state)
{
    (void)state;
    sift_candidates c;
    const float x[] = {LN(0.15), LN(0.5), LN(0.05), LN(0.3)};
    run1(sift_sampler_init_min_p(0.2f, 1), &c, x, 4); /* keep p >= 0.1, array order */
    assert_int_equal(c.size, 3);
    assert_int_equal(c.id[0], 0);
    assert_int_equal(c.id[1], 1);
    assert_int_equal(c.id[2], 3);
    assert_false(c.sorted);
    sift_candidates_free(&c);
    run1(sift_sampler_init_min_p(0.2f, 4), &c, x, 4); /* min_keep not met: sorted path keeps 4 */
    assert_int_equal(c.size, 4);
    assert_true(c.sorted);
    assert_int_equal(c.id[0], 1);
    sift_candidates_free(&c);
    run1(sift_sampler_init_min_p(0.2f, 9), &c, x, 4); /* min_keep > size */
    assert_int_equal(c.size, 4);
    sift_candidates_free(&c);
    sift_candidates_init(&c, 4);
    sift_candidates_fill(&c, x, 4);
    sift_test_apply(sift_sampler_init_top_k(4), &c); /* sorted input: sorted path */
    sift_test_apply(sift_sampler_init_min_p(0.2f, 1), &c);
    assert_int_equal(c.size, 3);
    assert_int_equal(c.id[2], 0);
    sift_candidates_free(&c);
    sift_sampler *off = sift_sampler_init_min_p(0.0f, 1);
    assert_string_equal(sift_sampler_name(off), "?min-p");
    sift_sampler_free(off);
    const float inf[] = {-INFINITY, 0, 0};
    run1(sift_sampler_init_min_p(0.5f, 1), &c, inf, 3);
    assert_int_equal(c.size, 2);
    sift_candidates_free(&c);
}

static void test_typical(void **state)
{
    (void)state;
    /* p = .6 .3 .1: entropy 0.898; |surprise - entropy| = .387 .306 1.405 -> order .3, .6, .1 */
    const float x[] = {LN(0.1), LN(0.6), LN(0.3)};
    sift_candidates c;
    run1(sift_sampler_init_typical(0.5f, 1), &c, x, 3);
    assert_int_equal(c.size, 2);
    assert_int_equal(c.id[0], 2);
    assert_int_equal(c.id[1], 1);
    assert_false(c.sorted);
    sift_candidates_free(&c);
    run1(sift_sampler_init_typical(0.2f, 1), &c, x, 3); /* the most typical is not the most probable */
    assert_int_equal(c.size, 1);
    assert_int_equal(c.id[0], 2);
    sift_candidates_free(&c);
    run1(sift_sampler_init_typical(0.2f, 3), &c, x, 3);
    assert_int_equal(c.size, 3);
    sift_candidates_free(&c);
    sift_sampler *off = sift_sampler_init_typical(1.0f, 0);
    assert_string_equal(sift_sampler_name(off), "?typical");
    sift_sampler_free(off);
}

/* ---- temp / temp_ext / xtc / top_n_sigma --------------------------------------------------- */

static void test_temp(void **state)
{
    (void)state;
    sift_candidates c;
    const float x[] = {1, 2, 4};
    run1(sift_sampler_init_temp(2.0f), &c, x, 3);
    assert_true(c.logit[0] == 0.5f && c.logit[1] == 1.0f && c.logit[2] == 2.0f);
    sift_candidates_free(&c);
    const float t[] = {3, 3, 1};
    run1(sift_sampler_init_temp(0.0f), &c, t, 3); /* greedy-like: the first maximum stays */
    assert_true(c.logit[0] == 3.0f && c.logit[1] == -INFINITY && c.logit[2] == -INFINITY);
    sift_candidates_free(&c);
    sift_sampler *off = sift_sampler_init_temp(1.0f);
    assert_string_equal(sift_sampler_name(off), "?temp");
    sift_sampler_free(off);
    /* the sorted flag survives a temperature (order kept) and probabilities go stale */
    sift_candidates_init(&c, 3);
    sift_candidates_fill(&c, x, 3);
    sift_candidates_sort(&c);
    sift_candidates_probs(&c);
    sift_test_apply(sift_sampler_init_temp(0.5f), &c);
    assert_true(c.sorted);
    assert_false(c.flags & SIFT_CAND_PROBS);
    sift_candidates_free(&c);
}

static void test_temp_ext(void **state)
{
    (void)state;
    sift_candidates c;
    const float x[] = {1, 2, 4};
    run1(sift_sampler_init_temp_ext(2.0f, 0.0f, 1.0f), &c, x, 3); /* delta 0: plain temp */
    assert_true(c.logit[2] == 2.0f);
    sift_candidates_free(&c);
    /* uniform logits: normalized entropy 1, temperature t + delta; probabilities valid */
    const float u[] = {1, 1, 1, 1};
    run1(sift_sampler_init_temp_ext(1.0f, 0.5f, 1.0f), &c, u, 4);
    assert_true(c.flags & SIFT_CAND_PROBS);
    for (int i = 0; i < 4; i++) {
        assert_float_near(c.logit[i], 1.0 / 1.5, 1e-6);
        assert_float_near(c.p[i], 0.25, 1e-6);
    }
    sift_candidates_free(&c);
    /* peaked: the temperature follows (H / Hmax)^exponent between t - delta and t + delta */
    const float pk[] = {0, 10, 0, 0};
    run1(sift_sampler_init_temp_ext(1.0f, 0.5f, 2.0f), &c, pk, 4);
    const double z = exp(10) + 3, p1 = exp(10) / z, p0 = 1 / z;
    const double h = -(p1 * log(p1) + 3 * p0 * log(p0)), temp = 0.5 + 1.0 * pow(h / log(4), 2.0);
    assert_int_equal(c.id[0], 1); /* sorted */
    assert_float_near(c.logit[0], 10.0 / temp, 1e-3);
    sift_candidates_free(&c);
    run1(sift_sampler_init_temp_ext(0.8f, 0.5f, 1.0f), &c, pk, 1); /* one candidate: untouched */
    assert_true(c.logit[0] == 0.0f);
    sift_candidates_free(&c);
    sift_sampler *off = sift_sampler_init_temp_ext(1.0f, 0.0f, 1.0f);
    assert_string_equal(sift_sampler_name(off), "?temp-ext");
    sift_sampler_free(off);
}

static void test_xtc(void **state)
{
    (void)state;
    const float x[] = {LN(0.15), LN(0.5), LN(0.05), LN(0.3)};
    sift_candidates c;
    run1(sift_sampler_init_xtc(1.0f, 0.1f, 1, 1), &c, x, 4); /* .5 .3 .15 above t: all but .15 go */
    assert_int_equal(c.size, 2);
    assert_int_equal(c.id[0], 0);
    assert_int_equal(c.id[1], 2);
    sift_test_apply(sift_sampler_init_greedy(), &c);
    assert_int_equal(sift_candidates_selected(&c), 0);
    /* the pointers moved; the next fill and free start from the arrays as allocated */
    assert_int_equal(c.capacity, 2);
    sift_candidates_fill(&c, x, 4);
    assert_int_equal(c.capacity, 4);
    assert_int_equal(c.id[0], 0);
    sift_test_apply(sift_sampler_init_xtc(1.0f, 0.1f, 1, 1), &c);
    sift_candidates_free(&c); /* with advanced pointers: frees the originals */
    run1(sift_sampler_init_xtc(1.0f, 0.1f, 3, 1), &c, x, 4); /* min_keep 3: nothing removed */
    assert_int_equal(c.size, 4);
    sift_candidates_free(&c);
    run1(sift_sampler_init_xtc(1.0f, 0.4f, 1, 1), &c, x, 4); /* one above t: nothing removed */
    assert_int_equal(c.size, 4);
    sift_candidates_free(&c);
    /* probability 0.5: about half the applications act */
    sift_sampler *s = sift_sampler_init_xtc(0.5f, 0.1f, 1, 3);
    sift_candidates_init(&c, 4);
    int acted = 0;
    for (int i = 0; i < 4000; i++) {
        sift_candidates_fill(&c, x, 4);
        sift_sampler_apply(s, &c);
        acted += c.size == 2;
    }
    assert_float_near(acted / 4000.0, 0.5, 0.03);
    sift_sampler_free(s);
    sift_candidates_free(&c);
    const char *names[2] = {sift_sampler_name(s = sift_sampler_init_xtc(0.0f, 0.1f, 1, 1)), NULL};
    assert_string_equal(names[0], "?xtc");
    sift_sampler_free(s);
    s = sift_sampler_init_xtc(0.5f, 0.6f, 1, 1);
    assert_string_equal(sift_sampler_name(s), "?xtc");
    sift_sampler_free(s);
}

static void test_top_n_sigma(void **state)
{
    (void)state;
    sift_candidates c;
    const float x[] = {0, 0, 0, 10}; /* mean 2.5, sd 4.33: only 10 is within 1 sd of the max */
    run1(sift_sampler_init_top_n_sigma(1.0f), &c, x, 4);
    assert_int_equal(c.size, 4);
    assert_true(c.logit[0] == -INFINITY && c.logit[3] == 10.0f);
    sift_candidates_free(&c);
    run1(sift_sampler_init_top_n_sigma(3.0f), &c, x, 4); /* 3 sd reach down past 0 */
    assert_true(c.logit[0] == 0.0f);
    sift_candidates_free(&c);
    const float inf[] = {-INFINITY, 1, 1, 1};
    run1(sift_sampler_init_top_n_sigma(1.0f), &c, inf, 4); /* -inf ignored; sd 0 keeps the max */
    assert_true(c.logit[1] == 1.0f && c.logit[3] == 1.0f);
    sift_candidates_free(&c);
    sift_sampler *off = sift_sampler_init_top_n_sigma(-1.0f);
    assert_string_equal(sift_sampler_name(off), "?top-n-sigma");
    sift_sampler_free(off);
}

/* ---- mirostat ------------------------------------------------------------------------------ */

static void test_mirostat_v2(void **state)
{
    (void)state;
    /* tau 1 -> mu 2: surprises -log2 p = 1, 1.74, 2.32 -> keep .5 and .3, renormalized */
    const float x[] = {LN(0.2), LN(0.5), LN(0.3)};
    sift_candidates c;
    run1(sift_sampler_init_mirostat_v2(1, 1.0f, 0.1f), &c, x, 3);
    assert_int_equal(c.size, 2);
    assert_float_near(c.p[0], 0.625, 1e-6);
    assert_float_near(c.p[1], 0.375, 1e-6);
    assert_true(c.selected >= 0 && c.selected < 2);
    sift_candidates_free(&c);
    run1(sift_sampler_init_mirostat_v2(1, 0.1f, 0.1f), &c, x, 3); /* mu below every surprise: one kept */
    assert_int_equal(c.size, 1);
    assert_int_equal(c.id[0], 1);
    sift_candidates_free(&c);
}

static void test_mirostat_v1(void **state)
{
    (void)state;
    float x[100];
    for (int i = 0; i < 100; i++) x[i] = -1.1f * logf((float)(i + 1)); /* Zipf, s = 1.1 */
    sift_sampler *s = sift_sampler_init_mirostat(100, 5, 3.0f, 0.1f, 100);
    assert_string_equal(sift_sampler_name(s), "mirostat");
    sift_candidates c;
    sift_test_cand(&c, x, 100);
    for (int step = 0; step < 20; step++) {
        sift_candidates_fill(&c, x, 100);
        sift_sampler_apply(s, &c);
        assert_true(c.size >= 1 && c.size <= 100);
        assert_true(c.selected >= 0 && (size_t)c.selected < c.size);
        sift_sampler_accept(s, c.id[c.selected]);
    }
    assert_int_equal(sift_sampler_get_seed(s), 5);
    sift_sampler_free(s);
    sift_candidates_free(&c);
}

/* ---- penalties / dry / logit_bias ----------------------------------------------------------- */

static void test_penalties(void **state)
{
    (void)state;
    const float x[] = {1, 1, 1, -1};
    sift_candidates c;
    sift_sampler *s = sift_sampler_init_penalties(8, 2.0f, 0.5f, 0.25f);
    sift_sampler_accept(s, 2);
    sift_sampler_accept(s, 2);
    sift_sampler_accept(s, 1);
    sift_sampler_accept(s, 3);
    sift_test_cand(&c, x, 4);
    sift_sampler_apply(s, &c);
    assert_true(c.logit[0] == 1.0f);
    assert_true(c.logit[1] == 1.0f / 2 - (0.5f + 0.25f));     /* once */
    assert_true(c.logit[2] == 1.0f / 2 - (2 * 0.5f + 0.25f)); /* twice */
    assert_true(c.logit[3] == -1.0f * 2 - (0.5f + 0.25f));    /* negative: multiplied */
    assert_false(c.sorted);
    /* the same on a permuted array (found by scanning) */
    const float y[] = {-1, 1, 1, 1};
    sift_candidates_fill(&c, y, 4);
    c.id[0] = 3, c.id[3] = 0;
    sift_sampler_apply(s, &c);
    assert_true(c.logit[0] == -2.75f && c.logit[3] == 1.0f && c.logit[1] == -0.25f);
    /* window: the oldest leaves */
    sift_sampler *w = sift_sampler_init_penalties(2, 2.0f, 0.0f, 0.0f);
    sift_sampler_accept(w, 2);
    sift_sampler_accept(w, 2);
    sift_sampler_accept(w, 1);
    sift_candidates_fill(&c, x, 4);
    sift_sampler_apply(w, &c);
    assert_true(c.logit[2] == 0.5f && c.logit[1] == 0.5f);
    sift_sampler_reset(w);
    sift_candidates_fill(&c, x, 4);
    sift_sampler_apply(w, &c);
    assert_true(c.logit[1] == 1.0f && c.logit[2] == 1.0f);
    sift_sampler_free(w);
    sift_sampler_free(s);
    sift_candidates_free(&c);
    s = sift_sampler_init_penalties(0, 1.3f, 0, 0);
    assert_string_equal(sift_sampler_name(s), "?penalties");
    sift_sampler_free(s);
    s = sift_sampler_init_penalties(64, 1.0f, 0, 0);
    assert_string_equal(sift_sampler_name(s), "?penalties");
    sift_sampler_free(s);
}

static void test_long_windows_grow(void **state)
{
    (void)state;
    /* windows beyond the 4096 tokens allocated up front: the buffers grow with the history */
    enum { V = 50, STEPS = 9000, WIN = 6000 };
    sift_token *hist = malloc(STEPS * sizeof *hist);
    uint32_t r = 77;
    for (int i = 0; i < STEPS; i++) {
        r = r * 1664525u + 1013904223u;
        hist[i] = (sift_token)((r >> 8) % V);
    }
    sift_sampler *s = sift_sampler_init_penalties(WIN, 1.0f, 0.001f, 0.0f);
    sift_sampler *huge = sift_sampler_init_penalties(1 << 30, 1.0f, 0.001f, 0.0f); /* costs nothing up front */
    for (int i = 0; i < STEPS; i++) sift_sampler_accept(s, hist[i]), sift_sampler_accept(huge, hist[i]);
    float x[V] = {0};
    sift_candidates c, d;
    sift_test_cand(&c, x, V);
    sift_test_cand(&d, x, V);
    sift_sampler *cl = sift_sampler_clone(s);
    sift_sampler_apply(cl, &c);
    sift_sampler_apply(huge, &d);
    for (int t = 0; t < V; t++) {
        int n_win = 0, n_all = 0;
        for (int i = 0; i < STEPS; i++) {
            n_all += hist[i] == t;
            n_win += i >= STEPS - WIN && hist[i] == t;
        }
        assert_true(c.logit[t] == 0.0f - (float)n_win * 0.001f);
        assert_true(d.logit[t] == 0.0f - (float)n_all * 0.001f);
    }
    sift_sampler_free(cl);
    sift_sampler_free(s);
    sift_sampler_free(huge);
    /* DRY over a long window: a repeat that started 5000 tokens ago is still seen */
    sift_sampler *dry = sift_sampler_init_dry_tokens(1.0f, 1.1f, 2, 8000, NULL, NULL, 0);
    for (int i = 0; i < 5000; i++) sift_sampler_accept(dry, 10 + i % 30); /* no repeats of length >= 2 ... */
    sift_sampler_accept(dry, 1), sift_sampler_accept(dry, 2), sift_sampler_accept(dry, 3);
    for (int i = 0; i < 4000; i++) sift_sampler_accept(dry, 40);
    sift_sampler_accept(dry, 1), sift_sampler_accept(dry, 2); /* "1 2" again: 3 extends it */
    sift_candidates_fill(&c, x, V);
    sift_sampler *dry2 = sift_sampler_clone(dry);
    sift_sampler_apply(dry2, &c);
    assert_true(c.logit[3] == -1.0f);
    sift_sampler_free(dry);
    sift_sampler_free(dry2);
    sift_candidates_free(&c);
    sift_candidates_free(&d);
    free(hist);
}

static sift_candidates dry_run(sift_sampler *s, const sift_token *hist, size_t n_hist, size_t n_vocab)
{
    float x[16] = {0};
    for (size_t i = 0; i < n_hist; i++) sift_sampler_accept(s, hist[i]);
    sift_candidates c;
    sift_test_cand(&c, x, n_vocab);
    sift_sampler_apply(s, &c);
    sift_sampler_free(s);
    return c;
}

/* accept(-1) (SIFT_TOKEN_NULL, what a front end passes when nothing was selected) is a
 * plain key, as in llama.cpp: it takes a window slot and changes no logit. It was the
 * token-count map's empty marker, and accepting it read a value never written (valgrind:
 * memcheck_samplers). docs/fidelity.md. */
static void test_accept_null_token(void **state)
{
    (void)state;
    const float x[] = {1, 1, 1, 1};
    sift_candidates c;
    sift_test_cand(&c, x, 4);
    sift_sampler *s = sift_sampler_init_penalties(2, 2.0f, 0.0f, 0.0f);
    sift_sampler_accept(s, 1);
    sift_sampler_accept(s, SIFT_TOKEN_NULL);
    sift_sampler_accept(s, SIFT_TOKEN_NULL);
    sift_sampler_apply(s, &c);
    for (int i = 0; i < 4; i++) assert_true(c.logit[i] == 1.0f); /* 1 left the window of 2 */
    sift_sampler_accept(s, 2);
    sift_candidates_fill(&c, x, 4);
    sift_sampler_apply(s, &c);
    assert_true(c.logit[2] == 0.5f && c.logit[0] == 1.0f && c.logit[1] == 1.0f && c.logit[3] == 1.0f);
    sift_sampler_free(s);

    const sift_token h[] = {0, 1, SIFT_TOKEN_NULL, 0, 1};
    sift_sampler *d = sift_sampler_init_dry_tokens(1.0f, 1.1f, 2, 8, NULL, NULL, 0);
    for (int i = 0; i < 5; i++) sift_sampler_accept(d, h[i]);
    sift_candidates_fill(&c, x, 4);
    sift_sampler_apply(d, &c);
    for (int i = 0; i < 4; i++) assert_true(c.logit[i] == 1.0f); /* "0 1" was followed by -1: no candidate */
    sift_sampler_free(d);
    sift_candidates_free(&c);
}

static void test_dry_tokens(void **state)
{
    (void)state;
    /* 0 1 2 0 1: the suffix "0 1" was followed by 2 -> 2 extends a repeat of length 2 */
    const sift_token h1[] = {0, 1, 2, 0, 1};
    sift_candidates c = dry_run(sift_sampler_init_dry_tokens(1.0f, 1.1f, 2, 8, NULL, NULL, 0), h1, 5, 4);
    assert_true(c.logit[2] == -1.0f); /* 1 * 1.1^(2-2) */
    assert_true(c.logit[0] == 0 && c.logit[1] == 0 && c.logit[3] == 0);
    sift_candidates_free(&c);
    /* 0 1 2 3 0 1 2: length 3 -> 1.1^1 on token 3 */
    const sift_token h2[] = {0, 1, 2, 3, 0, 1, 2};
    c = dry_run(sift_sampler_init_dry_tokens(2.0f, 1.1f, 2, 8, NULL, NULL, 0), h2, 7, 4);
    assert_true(c.logit[3] == -(float)(2.0 * pow((double)1.1f, 1.0)));
    sift_candidates_free(&c);
    /* a single-token breaker at the end stops everything */
    const sift_token br1[] = {1};
    const sift_token *seqs[] = {br1};
    const size_t lens[] = {1};
    c = dry_run(sift_sampler_init_dry_tokens(1.0f, 1.1f, 2, 8, seqs, lens, 1), h1, 5, 4);
    for (int i = 0; i < 4; i++) assert_true(c.logit[i] == 0);
    sift_candidates_free(&c);
    /* a two-token breaker (0 then 1) at the end too */
    const sift_token br2[] = {0, 1};
    const sift_token *seqs2[] = {br2};
    const size_t lens2[] = {2};
    c = dry_run(sift_sampler_init_dry_tokens(1.0f, 1.1f, 2, 8, seqs2, lens2, 1), h1, 5, 4);
    for (int i = 0; i < 4; i++) assert_true(c.logit[i] == 0);
    sift_candidates_free(&c);
    /* the window: last_n 3 sees "2 0 1" only: no repeat */
    c = dry_run(sift_sampler_init_dry_tokens(1.0f, 1.1f, 2, 3, NULL, NULL, 0), h1, 5, 4);
    assert_true(c.logit[2] == 0);
    sift_candidates_free(&c);
    /* too short a history */
    c = dry_run(sift_sampler_init_dry_tokens(1.0f, 1.1f, 2, 8, NULL, NULL, 0), h1, 2, 4);
    assert_true(c.logit[2] == 0);
    sift_candidates_free(&c);
    sift_sampler *off = sift_sampler_init_dry_tokens(0.0f, 1.75f, 2, 64, NULL, NULL, 0);
    assert_string_equal(sift_sampler_name(off), "?dry");
    sift_sampler_free(off);
    off = sift_sampler_init_dry_tokens(0.8f, 1.75f, 2, -1, NULL, NULL, 0); /* -1 no longer means "context" */
    assert_string_equal(sift_sampler_name(off), "?dry");
    sift_sampler_free(off);
}

/* a toy vocabulary: pieces and a greedy longest-match tokenizer */
static const char *const toy_piece[] = {"a", "b", "ab", ":", "x:", "cd", "c", "d", "e", "f", "<eos>", "hello", "he", "x"};
#define TOY_N ((int32_t)(sizeof toy_piece / sizeof *toy_piece))
static uint32_t toy_len[TOY_N];
static uint8_t toy_attr[TOY_N];

static int32_t toy_tokenize(void *ctx, const char *text, size_t len, sift_token *out, int32_t cap)
{
    (void)ctx;
    int32_t n = 0;
    size_t pos = 0;
    while (pos < len) {
        int32_t best = -1;
        size_t best_len = 0;
        for (int32_t t = 0; t < TOY_N; t++)
            if (toy_len[t] > best_len && toy_len[t] <= len - pos && !memcmp(toy_piece[t], text + pos, toy_len[t]))
                best = t, best_len = toy_len[t];
        if (best < 0) return 0;
        if (n < cap) out[n] = best;
        n++;
        pos += best_len;
    }
    return n <= cap ? n : -n;
}

static sift_vocab_view toy_vocab(void)
{
    for (int32_t t = 0; t < TOY_N; t++) {
        toy_len[t] = (uint32_t)strlen(toy_piece[t]);
        toy_attr[t] = SIFT_TOKEN_ATTR_NORMAL;
    }
    toy_attr[10] = SIFT_TOKEN_ATTR_CONTROL | SIFT_TOKEN_ATTR_EOG;
    sift_vocab_view v = {TOY_N, toy_piece, toy_len, toy_attr, toy_tokenize, NULL, 0};
    return v;
}

static void test_dry_string_breakers(void **state)
{
    (void)state;
    sift_vocab_view v = toy_vocab();
    const char *br[] = {"ab", ":"};
    /* "ab": token 2 contains it (single-token breaker); token 0 "a" ends with its start:
     * head 0 with tail tokenize("b") = [1]. With allowed 1, history 5 2 5 would penalize
     * token 2 - but 2 is a single-token breaker. */
    const sift_token h1[] = {5, 2, 5};
    sift_candidates c = dry_run(sift_sampler_init_dry(&v, 1.0f, 1.1f, 1, 8, br, 2), h1, 3, 14);
    assert_true(c.logit[2] == 0);
    sift_candidates_free(&c);
    c = dry_run(sift_sampler_init_dry(&v, 1.0f, 1.1f, 1, 8, NULL, 0), h1, 3, 14);
    assert_true(c.logit[2] == -1.0f);
    sift_candidates_free(&c);
    /* "a" then "b" (0 1) at the end completes the breaker: nothing penalized; without the
     * breakers token 7 would be (0 1 repeats, followed by 7 before) */
    const sift_token h2[] = {0, 1, 7, 0, 1};
    c = dry_run(sift_sampler_init_dry(&v, 1.0f, 1.1f, 1, 8, br, 2), h2, 5, 14);
    assert_true(c.logit[7] == 0);
    sift_candidates_free(&c);
    c = dry_run(sift_sampler_init_dry(&v, 1.0f, 1.1f, 1, 8, NULL, 0), h2, 5, 14);
    assert_true(c.logit[7] < 0);
    sift_candidates_free(&c);
    /* ":" makes tokens 3 and 4 breakers */
    const sift_token h3[] = {8, 3, 9, 8, 3};
    c = dry_run(sift_sampler_init_dry(&v, 1.0f, 1.1f, 1, 8, br, 2), h3, 5, 14);
    assert_true(c.logit[9] == 0);
    sift_candidates_free(&c);
    /* string breakers without a tokenizer: refused */
    assert_null(sift_sampler_init_dry(NULL, 1.0f, 1.1f, 1, 8, br, 2));
}

static void test_logit_bias(void **state)
{
    (void)state;
    const float x[] = {0, 0, 0, 0};
    const sift_logit_bias b[] = {{1, 2.0f}, {2, -INFINITY}, {1, 0.5f}, {99, 5.0f}};
    sift_candidates c;
    run1(sift_sampler_init_logit_bias(4, 4, b), &c, x, 4);
    assert_true(c.logit[0] == 0 && c.logit[1] == 2.5f && c.logit[2] == -INFINITY && c.logit[3] == 0);
    sift_candidates_free(&c);
    /* permuted array: found by scanning; the sorted flag drops because order may break */
    sift_candidates_init(&c, 4);
    sift_candidates_fill(&c, x, 4);
    c.id[0] = 2, c.id[2] = 0, c.sorted = true;
    sift_test_apply(sift_sampler_init_logit_bias(4, 2, b), &c);
    assert_true(c.logit[0] == -INFINITY && c.logit[1] == 2.0f);
    assert_false(c.sorted);
    sift_candidates_free(&c);
    sift_sampler *off = sift_sampler_init_logit_bias(4, 0, b);
    assert_string_equal(sift_sampler_name(off), "?logit-bias");
    sift_sampler_free(off);
}

/* ---- infill / adaptive_p ----------------------------------------------------------------------- */

static void test_infill(void **state)
{
    (void)state;
    sift_vocab_view v = toy_vocab();
    float x[TOY_N];
    for (int i = 0; i < TOY_N; i++) x[i] = -INFINITY;
    /* "he" .3, "hello" .5, "x" .15, <eos> .05 */
    x[12] = LN(0.3), x[11] = LN(0.5), x[13] = LN(0.15), x[10] = LN(0.05);
    sift_candidates c;
    sift_test_cand(&c, x, TOY_N);
    sift_test_apply(sift_sampler_init_top_k(4), &c);
    sift_test_apply(sift_sampler_init_infill(&v, 10), &c);
    /* "he" merges into "hello" (.8); "x" < .2 goes; EOG stays: hello .941, eos .059 */
    assert_int_equal(c.size, 2);
    assert_int_equal(c.id[0], 11);
    assert_int_equal(c.id[1], 10);
    assert_float_near(c.p[0], 0.8 / 0.85, 1e-5);
    assert_false(c.flags & SIFT_CAND_PROBS);
    sift_candidates_free(&c);
    /* EOG likely enough (3 * p_eog * n > p_txt): only EOG tokens, renormalized */
    x[10] = LN(0.3), x[11] = LN(0.3), x[12] = LN(0.2), x[13] = LN(0.2);
    sift_test_cand(&c, x, TOY_N);
    sift_test_apply(sift_sampler_init_top_k(4), &c);
    sift_test_apply(sift_sampler_init_infill(&v, 10), &c);
    assert_int_equal(c.size, 1);
    assert_int_equal(c.id[0], 10);
    assert_float_near(c.p[0], 1.0, 1e-6);
    sift_candidates_free(&c);
    /* no text token above the thresholds: the EOT token alone */
    for (int i = 0; i < TOY_N; i++) x[i] = 0;
    x[10] = -INFINITY;
    sift_test_cand(&c, x, TOY_N);
    sift_test_apply(sift_sampler_init_infill(&v, 10), &c);
    assert_int_equal(c.size, 1);
    assert_int_equal(c.id[0], 10);
    sift_candidates_free(&c);
    assert_null(sift_sampler_init_infill(NULL, 10));
}

static void test_adaptive_p(void **state)
{
    (void)state;
    /* p = .7 .2 .1, target .2: the transform favours the .2 token */
    const float x[] = {LN(0.7), LN(0.2), LN(0.1)};
    sift_sampler *s = sift_sampler_init_adaptive_p(0.2f, 0.0f, 11);
    assert_string_equal(sift_sampler_name(s), "adaptive-p");
    sift_candidates c;
    sift_test_cand(&c, x, 3);
    int count[3] = {0};
    for (int i = 0; i < 3000; i++) {
        sift_candidates_fill(&c, x, 3);
        sift_sampler_apply(s, &c);
        count[c.selected]++;
        /* decay 0: the EMA is the last pick's original probability; accept nothing -> stays */
    }
    assert_true(count[1] > count[0] && count[1] > count[2]);
    /* target < 0: plain sampling from the distribution */
    sift_sampler *plain = sift_sampler_init_adaptive_p(-1.0f, 0.9f, 11);
    int c0 = 0;
    for (int i = 0; i < 5000; i++) {
        sift_candidates_fill(&c, x, 3);
        sift_sampler_apply(plain, &c);
        c0 += c.selected == 0;
        sift_sampler_accept(plain, c.id[c.selected]);
    }
    assert_float_near(c0 / 5000.0, 0.7, 0.03);
    assert_int_equal(sift_sampler_get_seed(plain), 11);
    sift_sampler_free(plain);
    sift_sampler_free(s);
    sift_candidates_free(&c);
}

/* ---- every sampler on degenerate inputs ------------------------------------------------------- */

static void test_edge_inputs_every_sampler(void **state)
{
    (void)state;
    sift_vocab_view v = toy_vocab();
    const char *specs[] = {
        "greedy()", "dist(1)", "top_k(40);dist(1)", "top_p(0.9,1);dist(1)", "top_p(0.5,100);dist(1)",
        "min_p(0.1,1);dist(1)", "min_p(0.5,100);dist(1)", "typical(0.9,1);dist(1)", "typical(0.5,100);dist(1)",
        "temp(0.5);dist(1)", "temp(0);dist(1)", "temp_ext(0.8,0.5,1);dist(1)", "xtc(1,0.01,1,1);dist(1)",
        "top_n_sigma(1);dist(1)", "mirostat(1,5,0.1,100)", "mirostat_v2(1,5,0.1)", "penalties(4,1.3,0.2,0.1);dist(1)",
        "dry(0.8,1.75,1,8,[1]);dist(1)", "logit_bias(0:1);dist(1)", "adaptive_p(0.5,0.9,1)", "infill();dist(1)",
        "top_k(3);top_p(0.9,1);min_p(0.05,1);typical(0.9,1);temp(0.8);dist(3)",
    };
    float inputs[4][8] = {
        {0.5f},                                                          /* n_vocab 1 */
        {1, 1, 1, 1, 1, 1, 1, 1},                                        /* all equal */
        {-INFINITY, 2, -INFINITY, 1, -INFINITY, 3, 0, -INFINITY},        /* -inf mixed in */
        {-INFINITY, -INFINITY, 4, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY}, /* one finite */
    };
    const size_t sizes[4] = {1, 8, 8, 8};
    sift_chain_env env = {.n_vocab = TOY_N, .vocab = &v, .eot = 10, .default_seed = 1};
    for (size_t s = 0; s < sizeof specs / sizeof *specs; s++) {
        for (int in = 0; in < 4; in++) {
            sift_error err = {0};
            sift_chain *chain = sift_chain_from_spec(specs[s], &env, &err);
            if (!chain) fail_msg("%s: %s", specs[s], err.msg);
            for (int step = 0; step < 3; step++) {
                const sift_token t = sift_chain_sample(chain, inputs[in], (int32_t)sizes[in]);
                if (t == SIFT_TOKEN_NULL) fail_msg("%s on input %d: nothing selected", specs[s], in);
                if (strncmp(specs[s], "infill", 6) == 0) continue; /* may answer EOT */
                assert_true(t >= 0 && (size_t)t < sizes[in]);
                if (in >= 2 && strncmp(specs[s], "logit_bias", 10) != 0)
                    assert_true(inputs[in][t] != -INFINITY); /* -inf is never picked */
            }
            sift_chain_free(chain);
        }
    }
}

static void test_names(void **state)
{
    (void)state;
    struct { sift_sampler *s; const char *name; } t[] = {
        {sift_sampler_init_greedy(), "greedy"},           {sift_sampler_init_dist(1), "dist"},
        {sift_sampler_init_top_k(1), "top-k"},            {sift_sampler_init_top_p(0.5f, 1), "top-p"},
        {sift_sampler_init_min_p(0.5f, 1), "min-p"},      {sift_sampler_init_typical(0.5f, 1), "typical"},
        {sift_sampler_init_temp(0.5f), "temp"},           {sift_sampler_init_temp_ext(0.5f, 0, 1), "temp-ext"},
        {sift_sampler_init_xtc(0.5f, 0.1f, 1, 1), "xtc"}, {sift_sampler_init_top_n_sigma(1), "top-n-sigma"},
        {sift_sampler_init_mirostat(10, 1, 5, 0.1f, 100), "mirostat"},
        {sift_sampler_init_mirostat_v2(1, 5, 0.1f), "mirostat-v2"},
        {sift_sampler_init_penalties(4, 1.1f, 0, 0), "penalties"},
        {sift_sampler_init_dry_tokens(1, 1.5f, 2, 4, NULL, NULL, 0), "dry"},
        {sift_sampler_init_adaptive_p(0.5f, 0.9f, 1), "adaptive-p"},
    };
    for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
        assert_string_equal(sift_sampler_name(t[i].s), t[i].name);
        sift_sampler_free(t[i].s);
    }
    assert_string_equal(sift_sampler_name(NULL), "(unnamed)");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greedy),          cmocka_unit_test(test_dist_hand_worked),
        cmocka_unit_test(test_dist_frequencies_and_inf), cmocka_unit_test(test_top_k),
        cmocka_unit_test(test_top_p),           cmocka_unit_test(test_top_p_large_unsorted_path),
        cmocka_unit_test(test_min_p),           cmocka_unit_test(test_typical),
        cmocka_unit_test(test_temp),            cmocka_unit_test(test_temp_ext),
        cmocka_unit_test(test_xtc),             cmocka_unit_test(test_top_n_sigma),
        cmocka_unit_test(test_mirostat_v2),     cmocka_unit_test(test_mirostat_v1),
        cmocka_unit_test(test_penalties),       cmocka_unit_test(test_accept_null_token),       cmocka_unit_test(test_long_windows_grow),
        cmocka_unit_test(test_dry_tokens),
        cmocka_unit_test(test_dry_string_breakers), cmocka_unit_test(test_logit_bias),
        cmocka_unit_test(test_infill),          cmocka_unit_test(test_adaptive_p),
        cmocka_unit_test(test_edge_inputs_every_sampler), cmocka_unit_test(test_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
