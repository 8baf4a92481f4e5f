/*
 * test_fidelity.c - one test per place where sift deliberately differs from llama.cpp
 * (docs/fidelity.md lists them with the reasons). Each test shows sift's behaviour on a
 * case where llama.cpp's would differ; everything else is the same token for token
 * (tests/replay.cmake, scripts/peer_diff.py).
 */
#include <math.h>
#include <string.h>

#include "sift_test.h"

enum { NV = 64 };

static void ramp(float *x, int n)
{
    for (int i = 0; i < n; i++) x[i] = (float)((i * 29) % n) * 0.1f;
}

static int argmax(const float *x, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

/* 1. logit_bias clears `sorted`: a bias can reorder the array (a ban moves the top to the
 *    bottom). llama.cpp keeps the stale flag, and a later dist then reads data[0] as the
 *    maximum (all 7 of the 627 seeded comparisons that differed). */
static void test_logit_bias_clears_sorted(void **state)
{
    (void)state;
    float x[NV];
    ramp(x, NV);
    const int top = argmax(x, NV);
    sift_candidates c;
    sift_test_cand(&c, x, NV);
    sift_test_apply(sift_sampler_init_top_k(8), &c);
    assert_true(c.sorted && c.id[0] == top);
    const sift_logit_bias ban = {top, -INFINITY};
    sift_test_apply(sift_sampler_init_logit_bias(NV, 1, &ban), &c);
    assert_false(c.sorted);
    /* the sampler after it sees the real maximum, not the stale data[0] */
    sift_test_apply(sift_sampler_init_greedy(), &c);
    assert_true(c.selected >= 0 && c.id[c.selected] != top);
    sift_candidates_free(&c);
}

/* 2. adaptive_p clears `sorted` too (it rewrites every logit). */
static void test_adaptive_p_clears_sorted(void **state)
{
    (void)state;
    float x[NV];
    ramp(x, NV);
    sift_candidates c;
    sift_test_cand(&c, x, NV);
    sift_test_apply(sift_sampler_init_top_k(16), &c);
    assert_true(c.sorted);
    sift_test_apply(sift_sampler_init_adaptive_p(0.5f, 0.9f, 3), &c);
    assert_false(c.sorted);
    assert_true(c.selected >= 0);
    sift_candidates_free(&c);
}

/* 3. NaN logits sort as -inf: a sort or a top-k never keeps one ahead of a number
 *    (llama.cpp's comparisons with NaN give an order that depends on where the NaN sits). */
static void test_nan_sorts_as_minus_inf(void **state)
{
    (void)state;
    const float x[] = {NAN, 1.0f, 3.0f, NAN, 2.0f, 0.5f};
    sift_candidates c;
    sift_test_cand(&c, x, 6);
    sift_test_apply(sift_sampler_init_top_k(3), &c);
    assert_int_equal(c.size, 3);
    assert_true(c.id[0] == 2 && c.id[1] == 4 && c.id[2] == 1);
    /* a full sort too: the NaNs go last (greedy's scan, not a sort, stays llama.cpp's) */
    sift_candidates_fill(&c, x, 6);
    sift_candidates_sort(&c);
    assert_true(c.id[0] == 2 && c.id[3] == 5 && isnan(c.logit[4]) && isnan(c.logit[5]));
    sift_candidates_free(&c);
}

/* 4. Clones continue exactly like their original (llama.cpp: the penalties clone forgets
 *    the counts, mirostat v1's clone writes its state into the source, adaptive_p's clone
 *    reseeds the RNG). The chain is cloned mid-stream; both then sample the same tokens as
 *    a chain that was never cloned. */
static void clone_continues(const char *spec)
{
    sift_error err;
    const sift_chain_env env = {.n_vocab = NV, .vocab = NULL, .eot = SIFT_TOKEN_NULL, .default_seed = 7};
    sift_chain *a = sift_chain_from_spec(spec, &env, &err);
    sift_chain *ref = sift_chain_from_spec(spec, &env, &err);
    assert_non_null(a);
    assert_non_null(ref);
    float x[NV];
    for (int step = 0; step < 40; step++) {
        for (int i = 0; i < NV; i++) x[i] = (float)(((i + 3) * (step + 7) * 13) % NV) * 0.05f;
        assert_int_equal(sift_chain_sample(a, x, NV), sift_chain_sample(ref, x, NV));
    }
    sift_chain *b = sift_chain_clone(a);
    assert_non_null(b);
    for (int step = 40; step < 80; step++) {
        for (int i = 0; i < NV; i++) x[i] = (float)(((i + 3) * (step + 7) * 13) % NV) * 0.05f;
        const sift_token want = sift_chain_sample(ref, x, NV);
        if (sift_chain_sample(a, x, NV) != want || sift_chain_sample(b, x, NV) != want)
            fail_msg("%s: clone or original left the reference stream at step %d", spec, step);
    }
    sift_chain_free(a);
    sift_chain_free(b);
    sift_chain_free(ref);
}

static void test_clones_continue(void **state)
{
    (void)state;
    clone_continues("penalties(16,1.5,0.3,0.2);top_k(20);dist(5)");
    clone_continues("mirostat(11,5.0,0.1,100)");
    clone_continues("adaptive_p(0.5,0.9,13)");
}

/* 5. Grammars take valid UTF-8 only: overlong forms, surrogates and bytes F5..FF are
 *    rejected where llama.cpp's decoder lets them through. */
static void test_grammar_rejects_invalid_utf8(void **state)
{
    (void)state;
    const char *gbnf = "root ::= [^\"]*";
    sift_error err;
    sift_grammar *g = sift_grammar_parse(gbnf, strlen(gbnf), NULL, NULL, &err);
    assert_non_null(g);
    size_t off = 99;
    assert_int_equal(sift_grammar_match(g, "caf\xc3\xa9", 5, &off), SIFT_GRAMMAR_COMPLETE);
    assert_int_equal(sift_grammar_match(g, "a\xc0\x80", 3, &off), SIFT_GRAMMAR_REJECTED);         /* overlong NUL */
    assert_int_equal(off, 1);
    assert_int_equal(sift_grammar_match(g, "\xed\xa0\x80", 3, &off), SIFT_GRAMMAR_REJECTED);      /* surrogate */
    assert_int_equal(sift_grammar_match(g, "ab\xf5\x80\x80\x80", 6, &off), SIFT_GRAMMAR_REJECTED); /* F5 */
    assert_int_equal(off, 2);
    sift_grammar_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_logit_bias_clears_sorted), cmocka_unit_test(test_adaptive_p_clears_sorted),
        cmocka_unit_test(test_nan_sorts_as_minus_inf),   cmocka_unit_test(test_clones_continue),
        cmocka_unit_test(test_grammar_rejects_invalid_utf8),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
