/*
 * test_properties.c - properties that must hold for any chain:
 *   - after every sampler of random chains on the reference logits, the flags tell the
 *     truth: SIFT_CAND_PROBS => p sums to 1 +- 1e-5 and is the softmax of the current
 *     logits; sorted => the logits are descending; the selection is in range;
 *   - every order of order-independent samplers gives a valid result, and samplers that
 *     commute (top_k with min_p, top_k with temp) give the same distribution in any order;
 *   - the ordering fault is gone: a logit-based sampler after a probability-based one
 *     (temp after top_p) leaves probabilities that belong to the new logits.
 */
#include "sift_test.h"

static float *ref;
static uint32_t nv, nvec;

static int setup(void **state)
{
    (void)state;
    ref = sift_test_ref_logits(32000, &nv, &nvec);
    return ref ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    free(ref);
    return 0;
}

static const float *vec(int t) { return ref + (size_t)(t % (int)nvec) * nv; }

typedef struct check_state {
    int checks, prob_checks;
    const char *spec;
} check_state;

/* the invariants, after every sampler */
static void check_hook(void *user, int32_t index, const sift_sampler *smpl, const sift_candidates *c)
{
    check_state *cs = user;
    cs->checks++;
    if (c->size > c->capacity) fail_msg("%s: size > capacity", cs->spec);
    if (c->sorted)
        for (size_t i = 1; i < c->size; i++)
            if (c->logit[i - 1] < c->logit[i])
                fail_msg("%s: after %s (#%d) 'sorted' but logit[%zu] < logit[%zu]", cs->spec, sift_sampler_name(smpl), index,
                         i - 1, i);
    if (c->flags & SIFT_CAND_PROBS) {
        cs->prob_checks++;
        double sum = 0, z = 0, mx = -INFINITY;
        for (size_t i = 0; i < c->size; i++) {
            sum += c->p[i];
            mx = c->logit[i] > mx ? c->logit[i] : mx;
        }
        if (fabs(sum - 1.0) > 1e-5) fail_msg("%s: after %s probabilities sum to %.9f", cs->spec, sift_sampler_name(smpl), sum);
        for (size_t i = 0; i < c->size; i++) z += exp((double)c->logit[i] - mx);
        for (size_t i = 0; i < c->size; i++) {
            const double want = exp((double)c->logit[i] - mx) / z;
            if (fabs(want - c->p[i]) > 1e-5)
                fail_msg("%s: after %s p[%zu] = %g but softmax(logits) = %g", cs->spec, sift_sampler_name(smpl), i, c->p[i], want);
        }
    }
    if (c->selected >= (int64_t)c->size) fail_msg("%s: selected out of range", cs->spec);
}

static void test_flags_tell_the_truth(void **state)
{
    (void)state;
    const char *pool[] = {
        "penalties(64,1.3,0.2,0.1)", "dry(0.8,1.75,2,64,[12009],[5644])", "top_n_sigma(2)", "top_k(60)",
        "typical(0.95,1)",          "top_p(0.9,1)",                     "min_p(0.05,1)",  "xtc(0.5,0.1,1,3)",
        "temp(0.7)",                "temp_ext(0.8,0.4,1)",             "logit_bias(100:-inf,200:3)",
    };
    const char *selectors[] = {"dist(1)", "greedy()", "mirostat(2,5,0.1,100)", "mirostat_v2(3,5,0.1)", "adaptive_p(0.4,0.9,4)"};
    uint32_t r = 2024;
    for (int chain_i = 0; chain_i < 60; chain_i++) {
        char spec[1024] = "";
        int n = 1 + chain_i % 5;
        for (int k = 0; k < n; k++) {
            r = r * 1664525u + 1013904223u;
            strcat(spec, pool[(r >> 8) % (sizeof pool / sizeof *pool)]);
            strcat(spec, ";");
        }
        r = r * 1664525u + 1013904223u;
        strcat(spec, selectors[(r >> 8) % 5]);
        sift_error err = {0};
        sift_chain *c = sift_chain_from_spec(spec, NULL, &err);
        if (!c) fail_msg("%s: %s", spec, err.msg);
        check_state cs = {0, 0, spec};
        sift_chain_set_trace(c, check_hook, &cs);
        for (int t = 0; t < 6; t++) {
            const sift_token tok = sift_chain_sample(c, vec(t + chain_i), (int32_t)nv);
            if (tok == SIFT_TOKEN_NULL) fail_msg("%s: no token", spec);
            /* the chain's final probabilities, asked for, are always a distribution */
            sift_candidates *cand = sift_chain_candidates(c);
            const float *p = sift_candidates_probs(cand);
            double sum = 0;
            for (size_t i = 0; i < cand->size; i++) sum += p[i];
            assert_float_near(sum, 1.0, 1e-5);
        }
        assert_true(cs.checks > 0);
        sift_chain_free(c);
    }
}

static int perm_next(int *a, int n) /* next lexicographic permutation */
{
    int i = n - 2;
    while (i >= 0 && a[i] >= a[i + 1]) i--;
    if (i < 0) return 0;
    int j = n - 1;
    while (a[j] <= a[i]) j--;
    int t = a[i];
    a[i] = a[j], a[j] = t;
    for (int x = i + 1, y = n - 1; x < y; x++, y--) t = a[x], a[x] = a[y], a[y] = t;
    return 1;
}

static void test_every_order_is_valid(void **state)
{
    (void)state;
    const char *items[] = {"top_k(50)", "top_p(0.9,1)", "min_p(0.05,1)", "temp(0.7)", "penalties(16,1.2,0.1,0.1)"};
    int idx[5] = {0, 1, 2, 3, 4};
    int perms = 0;
    do {
        char spec[512] = "";
        for (int k = 0; k < 5; k++) {
            strcat(spec, items[idx[k]]);
            strcat(spec, ";");
        }
        strcat(spec, "dist(8)");
        sift_chain *c = sift_chain_from_spec(spec, NULL, NULL);
        check_state cs = {0, 0, spec};
        sift_chain_set_trace(c, check_hook, &cs);
        for (int t = 0; t < 4; t++) {
            const sift_token tok = sift_chain_sample(c, vec(t), (int32_t)nv);
            const sift_candidates *cand = sift_chain_candidates(c);
            assert_true(cand->size >= 1 && cand->size <= 50);
            assert_int_equal(cand->id[cand->selected], tok);
            assert_true(cand->flags & SIFT_CAND_PROBS); /* dist leaves a distribution */
        }
        sift_chain_free(c);
        perms++;
    } while (perm_next(idx, 5));
    assert_int_equal(perms, 120);
}

/* id -> p of the candidates after a chain's apply, as a dense vector */
static void distribution(const char *spec, const float *x, float *out)
{
    sift_chain *c = sift_chain_from_spec(spec, NULL, NULL);
    assert_non_null(c);
    sift_chain_fill(c, x, (int32_t)nv, NULL);
    sift_chain_apply(c, NULL);
    sift_candidates *cand = sift_chain_candidates(c);
    const float *p = sift_candidates_probs(cand);
    memset(out, 0, nv * sizeof *out);
    for (size_t i = 0; i < cand->size; i++) out[cand->id[i]] = p[i];
    sift_chain_free(c);
}

static void test_commuting_samplers_agree(void **state)
{
    (void)state;
    float *a = malloc(nv * sizeof *a), *b = malloc(nv * sizeof *b);
    const char *pairs[][2] = {
        {"top_k(30);min_p(0.05,1)", "min_p(0.05,1);top_k(30)"},
        {"top_k(30);temp(0.6)", "temp(0.6);top_k(30)"},
        {"top_k(10);min_p(0.2,1);temp(1.3)", "temp(1.3);top_k(10);min_p(0.2,1)"},
    };
    for (size_t k = 0; k < 2; k++) { /* the third pair does not commute (min_p after temp) */
        for (int t = 0; t < 8; t++) {
            distribution(pairs[k][0], vec(t), a);
            distribution(pairs[k][1], vec(t), b);
            for (uint32_t i = 0; i < nv; i++)
                if (fabsf(a[i] - b[i]) > 1e-6f) fail_msg("%s vs %s: p[%u] %g vs %g", pairs[k][0], pairs[k][1], i, a[i], b[i]);
        }
    }
    free(a);
    free(b);
}

static void test_ordering_fault_is_gone(void **state)
{
    (void)state;
    /* top_p computes probabilities; temp then changes the logits. In llama.cpp the array
     * would still carry top_p's p (stale); here the probabilities follow the new logits. */
    sift_chain *c = sift_chain_from_spec("top_p(0.9,1);temp(0.5);greedy()", NULL, NULL);
    sift_chain_sample(c, vec(1), (int32_t)nv);
    sift_candidates *cand = sift_chain_candidates(c);
    assert_false(cand->flags & SIFT_CAND_PROBS);
    float top_p[8];
    sift_token ids[8];
    const size_t n = sift_candidates_top(cand, 8, ids, NULL, top_p);
    const float *p = sift_candidates_probs(cand);
    double z = 0;
    for (size_t i = 0; i < cand->size; i++) z += exp((double)cand->logit[i] - cand->logit[0]);
    for (size_t i = 0; i < cand->size; i++) assert_float_near(p[i], exp((double)cand->logit[i] - cand->logit[0]) / z, 1e-6);
    for (size_t j = 0; j < n; j++) assert_float_near(top_p[j], p[sift_test_index_of(cand, ids[j])], 1e-6);
    /* and a sampler that needs probabilities after a logit change computes them afresh:
     * xtc after temp sees the tempered distribution (its cut differs from before temp) */
    sift_chain_free(c);
    sift_chain *a = sift_chain_from_spec("top_k(40);temp(3.0);top_p(0.5,1);greedy()", NULL, NULL);
    sift_chain *b = sift_chain_from_spec("top_k(40);top_p(0.5,1);greedy()", NULL, NULL);
    sift_chain_sample(a, vec(1), (int32_t)nv);
    sift_chain_sample(b, vec(1), (int32_t)nv);
    assert_true(sift_chain_candidates(a)->size > sift_chain_candidates(b)->size); /* flatter: larger nucleus */
    sift_chain_free(a);
    sift_chain_free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flags_tell_the_truth),
        cmocka_unit_test(test_every_order_is_valid),
        cmocka_unit_test(test_commuting_samplers_agree),
        cmocka_unit_test(test_ordering_fault_is_gone),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
