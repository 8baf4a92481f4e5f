/*
 * test_sample_ex.c - sift_chain_sample_ex (the server's sampling call) against the general
 * path it replaces: for chains whose first sampler has a fast step (greedy, dist, top_k,
 * top_p, min_p) and one without (temp first), with and without a grammar (rejection
 * mode, which refuses often on random logits), 300 steps over a 32000-token vocabulary:
 *   - the token and the `refused` flag equal sift_grammar_chain_sample's on a twin chain;
 *   - the raw-logit probabilities (llama-server's default n_probs) equal
 *     sift_candidates_top on a filled candidate array, bit for bit, and p_selected the
 *     softmax of the raw logits at the token;
 *   - the post-sampling probabilities equal sift_candidates_top of the twin's candidates.
 * Also: NULL arguments give SIFT_TOKEN_NULL; probs may be NULL.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "refdata.h"
#include "sift.h"

static sift_model *model;
static sift_vocab_view view;
static int32_t NV;

static int setup(void **state)
{
    (void)state;
    char path[1024];
    model = sift_model_load(ref_model_path("llama-2-tiny-random", path, sizeof path), NULL);
    if (!model) return -1;
    NV = sift_model_n_vocab(model);
    return sift_vocab_view_get(sift_model_vocab(model), &view) == SIFT_OK ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    sift_model_free(model);
    return 0;
}

static uint64_t rng = 88172645463325252ull;
static double u01(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) * 0x1p-53;
}

static void random_logits(float *lg)
{
    for (int32_t i = 0; i < NV; i++) lg[i] = (float)(4.0 * (u01() + u01() + u01() - 1.5));
    for (int k = 0; k < 20; k++) lg[(int32_t)(u01() * NV)] += (float)(6.0 + 6.0 * u01()); /* a head */
}

static void run(const char *spec, const char *gbnf)
{
    sift_chain_env env = {.n_vocab = NV, .vocab = &view, .eot = SIFT_TOKEN_NULL, .default_seed = 42};
    sift_error err = {0};
    sift_chain *a = sift_chain_from_spec(spec, &env, &err), *b = sift_chain_from_spec(spec, &env, &err);
    assert_non_null(a);
    assert_non_null(b);
    sift_sampler *ga = gbnf ? sift_sampler_init_grammar(&view, gbnf, NULL, &err) : NULL;
    sift_sampler *gb = gbnf ? sift_sampler_init_grammar(&view, gbnf, NULL, &err) : NULL;
    if (gbnf) assert_true(ga && gb);
    float *lg = malloc(sizeof(float) * (size_t)NV);
    sift_candidates raw;
    assert_int_equal(sift_candidates_init(&raw, (size_t)NV), SIFT_OK);
    int steps = 0, refusals = 0;
    for (; steps < 300; steps++) {
        random_logits(lg);
        bool ref_a = false;
        const sift_token ta = sift_grammar_chain_sample(ga, a, lg, NV, SIFT_GRAMMAR_REJECTION, &ref_a);
        sift_token ids[8], ids2[8];
        float p[8], p2[8];
        sift_sample_probs pr = {.n = 8, .post_sampling = steps % 2 == 1, .ids = ids, .probs = p};
        const sift_token tb = sift_chain_sample_ex(b, gb, lg, NV, SIFT_GRAMMAR_REJECTION, &pr);
        if (ta != tb) fprintf(stderr, "%s / %s: step %d: %d vs %d\n", spec, gbnf ? gbnf : "-", steps, ta, tb);
        assert_int_equal(ta, tb);
        assert_int_equal(ref_a, pr.refused);
        refusals += pr.refused;
        if (ta == SIFT_TOKEN_NULL) break;
        size_t n2;
        if (pr.post_sampling) {
            n2 = sift_candidates_top(sift_chain_candidates(a), 8, ids2, NULL, p2);
        } else {
            sift_candidates_fill(&raw, lg, (size_t)NV);
            n2 = sift_candidates_top(&raw, 8, ids2, NULL, p2);
            float mx = lg[0];
            for (int32_t i = 1; i < NV; i++) mx = lg[i] > mx ? lg[i] : mx;
            double sum = 0;
            for (int32_t i = 0; i < NV; i++) sum += expf(lg[i] - mx);
            assert_true(pr.p_selected == (float)((double)expf(lg[ta] - mx) / sum));
        }
        assert_int_equal((size_t)pr.n_out, n2);
        assert_memory_equal(ids, ids2, n2 * sizeof *ids);
        assert_memory_equal(p, p2, n2 * sizeof *p);
    }
    printf("  %-36s %-18s %3d steps identical, %d refusals\n", spec, gbnf ? gbnf : "(no grammar)", steps, refusals);
    sift_candidates_free(&raw);
    free(lg);
    sift_sampler_free(ga);
    sift_sampler_free(gb);
    sift_chain_free(a);
    sift_chain_free(b);
}

static void test_same_as_general_path(void **state)
{
    (void)state;
    const char *chains[] = {"greedy()",
                            "dist(7)",
                            "top_k(40);temp(0.8);dist(3)",
                            "top_p(0.9,1);temp(0.7);dist(5)",
                            "min_p(0.05,1);temp(1.2);dist(9)",
                            "temp(0.9);top_k(20);dist(11)"};
    const char *grammars[] = {NULL, "root ::= [a-z ]+", "root ::= \"The \" [a-z]+ ( \" \" [a-z]+ )*"};
    for (size_t c = 0; c < sizeof chains / sizeof *chains; c++)
        for (size_t g = 0; g < sizeof grammars / sizeof *grammars; g++) run(chains[c], grammars[g]);
}

static void test_null_args(void **state)
{
    (void)state;
    sift_chain_env env = {.n_vocab = NV, .vocab = &view, .eot = SIFT_TOKEN_NULL, .default_seed = 42};
    sift_chain *c = sift_chain_from_spec("greedy()", &env, NULL);
    float lg[4] = {0, 3, 1, 2};
    sift_sample_probs pr = {.n = 2};
    assert_int_equal(sift_chain_sample_ex(NULL, NULL, lg, 4, SIFT_GRAMMAR_REJECTION, &pr), SIFT_TOKEN_NULL);
    assert_int_equal(sift_chain_sample_ex(c, NULL, NULL, 4, SIFT_GRAMMAR_REJECTION, NULL), SIFT_TOKEN_NULL);
    assert_int_equal(sift_chain_sample_ex(c, NULL, lg, 0, SIFT_GRAMMAR_REJECTION, NULL), SIFT_TOKEN_NULL);
    assert_int_equal(sift_chain_sample_ex(c, NULL, lg, 4, SIFT_GRAMMAR_REJECTION, NULL), 1);
    assert_int_equal(sift_chain_sample_ex(c, NULL, lg, 4, SIFT_GRAMMAR_REJECTION, &pr), 1); /* ids NULL: no figures */
    assert_int_equal(pr.n_out, 0);
    sift_chain_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_as_general_path),
        cmocka_unit_test(test_null_args),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
