/*
 * test_chain.c - the chain: ownership and the list API, the step split in fill / apply /
 * accept, perf counters and per-sampler shares, the trace hook, reset, clone (mid-stream
 * clones continue identically for every stateful sampler), seeds, describe, and CFG.
 */
#include "sift_test.h"

static float *ref32;
static uint32_t nv32, nvec32;

static int setup(void **state)
{
    (void)state;
    ref32 = sift_test_ref_logits(32000, &nv32, &nvec32);
    return ref32 ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    free(ref32);
    return 0;
}

static const float *vec(int t) { return ref32 + (size_t)(t % (int)nvec32) * nv32; }

static void test_list_api(void **state)
{
    (void)state;
    sift_chain *c = sift_chain_new(sift_chain_default_params());
    assert_int_equal(sift_chain_n(c), 0);
    assert_int_equal(sift_chain_add(c, NULL), SIFT_E_INVAL);
    for (int i = 0; i < 20; i++) assert_int_equal(sift_chain_add(c, sift_sampler_init_top_k(i + 1)), SIFT_OK);
    assert_int_equal(sift_chain_n(c), 20);
    assert_null(sift_chain_get(c, 20));
    assert_null(sift_chain_get(c, -1));
    sift_sampler *s = sift_chain_remove(c, 0);
    assert_non_null(s);
    assert_int_equal(sift_chain_n(c), 19);
    sift_sampler_free(s); /* the caller owns a removed sampler */
    assert_null(sift_chain_remove(c, 19));
    char buf[16];
    int need = sift_chain_describe(c, buf, sizeof buf);
    assert_true(need > 16);
    assert_int_equal(strlen(buf), 15); /* truncated like snprintf */
    sift_chain_free(c);
    sift_chain_free(NULL);
}

static void test_sample_equals_steps(void **state)
{
    (void)state;
    sift_chain *a = sift_chain_from_spec("top_k(40);temp(0.8);dist(1234)", NULL, NULL);
    sift_chain *b = sift_chain_from_spec("top_k(40);temp(0.8);dist(1234)", NULL, NULL);
    for (int t = 0; t < 40; t++) {
        const sift_token ta = sift_chain_sample(a, vec(t), (int32_t)nv32);
        assert_int_equal(sift_chain_fill(b, vec(t), (int32_t)nv32, NULL), SIFT_OK);
        const sift_token tb = sift_chain_apply(b, NULL);
        sift_chain_accept(b, tb);
        assert_int_equal(ta, tb);
        const sift_candidates *cand = sift_chain_candidates(a);
        assert_int_equal(cand->size, 40);
        assert_int_equal(cand->id[cand->selected], ta);
    }
    /* apply to caller-owned candidates (with and without a workspace) */
    sift_candidates own;
    sift_test_cand(&own, vec(3), nv32);
    const sift_token t1 = sift_chain_apply(a, &own);
    assert_true(t1 >= 0);
    sift_token id[3] = {7, 8, 9};
    float lg[3] = {1, 3, 2}, p[3];
    sift_candidates bare = {id, lg, p, 3, 3, -1, false, 0, NULL};
    assert_true(sift_chain_apply(a, &bare) >= 7);
    sift_candidates_free(&own);
    sift_chain_free(a);
    sift_chain_free(b);
}

static void test_errors(void **state)
{
    (void)state;
    sift_chain *c = sift_chain_from_spec("top_k(40)", NULL, NULL); /* no selecting sampler */
    assert_int_equal(sift_chain_sample(c, vec(0), (int32_t)nv32), SIFT_TOKEN_NULL);
    assert_int_equal(sift_chain_sample(c, NULL, 10), SIFT_TOKEN_NULL);
    assert_int_equal(sift_chain_sample(c, vec(0), 0), SIFT_TOKEN_NULL);
    sift_error err = {0};
    assert_int_equal(sift_chain_fill(c, vec(0), -5, &err), SIFT_E_INVAL);
    assert_non_null(strstr(err.msg, "n_vocab"));
    assert_int_equal(sift_chain_sample(NULL, vec(0), 10), SIFT_TOKEN_NULL);
    sift_chain_free(c);
}

static void test_perf_counters(void **state)
{
    (void)state;
    sift_chain *c = sift_chain_from_spec("penalties(64,1.1,0,0);top_k(40);temp(0.8);dist(1)", NULL, NULL);
    for (int t = 0; t < 10; t++) sift_chain_sample(c, vec(t), (int32_t)nv32);
    sift_chain_perf p = sift_chain_get_perf(c);
    assert_int_equal(p.n_sample, 10);
    assert_int_equal(p.n_apply, 10);
    assert_true(p.t_total_us > 0 && p.t_fill_us > 0);
    double sum = 0;
    for (int i = 0; i < sift_chain_n(c); i++) {
        assert_true(sift_chain_perf_sampler_us(c, i) > 0);
        sum += sift_chain_perf_sampler_us(c, i);
    }
    assert_float_near(sum, p.t_total_us, 1e-6 * p.t_total_us + 1e-9); /* the shares add up */
    sift_chain_perf_reset(c);
    p = sift_chain_get_perf(c);
    assert_int_equal(p.n_sample, 0);
    assert_true(p.t_total_us == 0);
    sift_chain_free(c);
    /* no_perf: no clock */
    sift_chain_params np = {.no_perf = true};
    c = sift_chain_new(np);
    sift_chain_add(c, sift_sampler_init_greedy());
    sift_chain_sample(c, vec(0), (int32_t)nv32);
    p = sift_chain_get_perf(c);
    assert_int_equal(p.n_sample, 1);
    assert_true(p.t_total_us == 0);
    sift_chain_free(c);
}

typedef struct trace_log {
    int calls, fills;
    int32_t last_index;
    size_t sizes[8];
} trace_log;

static void hook(void *user, int32_t index, const sift_sampler *smpl, const sift_candidates *cand)
{
    trace_log *log = user;
    log->calls++;
    if (index < 0) {
        log->fills++;
        assert_null(smpl);
    } else {
        assert_non_null(smpl);
        log->sizes[index] = cand->size;
    }
    log->last_index = index;
}

static void test_trace_hook(void **state)
{
    (void)state;
    sift_chain *c = sift_chain_from_spec("top_k(40);top_p(0.9,1);dist(5)", NULL, NULL);
    trace_log log = {0};
    sift_chain_set_trace(c, hook, &log);
    for (int t = 0; t < 5; t++) sift_chain_sample(c, vec(t), (int32_t)nv32);
    assert_int_equal(log.calls, 5 * 4);
    assert_int_equal(log.fills, 5);
    assert_int_equal(log.last_index, 2);
    assert_int_equal(log.sizes[0], 40);
    assert_true(log.sizes[1] <= 40);
    sift_chain_set_trace(c, NULL, NULL);
    sift_chain_sample(c, vec(0), (int32_t)nv32);
    assert_int_equal(log.calls, 20);
    sift_chain_free(c);
}

static void test_reset_replays_the_stream(void **state)
{
    (void)state;
    const char *spec = "penalties(64,1.3,0.2,0.1);dry(0.8,1.75,2,64,[12009]);xtc(0.5,0.1,1,3);top_k(50);dist(5)";
    sift_chain *c = sift_chain_from_spec(spec, NULL, NULL);
    sift_token first[30];
    for (int t = 0; t < 30; t++) first[t] = sift_chain_sample(c, vec(t), (int32_t)nv32);
    sift_chain_reset(c);
    for (int t = 0; t < 30; t++) assert_int_equal(sift_chain_sample(c, vec(t), (int32_t)nv32), first[t]);
    sift_chain_free(c);
}

static void test_clone_mid_stream_every_stateful_sampler(void **state)
{
    (void)state;
    const char *specs[] = {
        "dist(42)",
        "penalties(64,1.3,0.2,0.1);top_k(50);dist(5)",
        "dry(0.8,1.75,2,256,[12009],[5644],[14116],[16941 31217]);dist(42)",
        "xtc(0.5,0.1,1,11);dist(11)",
        "mirostat(17,5,0.1,100)",
        "mirostat_v2(17,5,0.1)",
        "top_k(100);adaptive_p(0.3,0.9,3)",
        "logit_bias(5:-inf,6:2);typical(0.9,1);temp_ext(0.8,0.5,1);min_p(0.05,1);top_n_sigma(2);dist(9)",
    };
    for (size_t s = 0; s < sizeof specs / sizeof *specs; s++) {
        sift_chain *a = sift_chain_from_spec(specs[s], NULL, NULL);
        for (int t = 0; t < 37; t++) sift_chain_sample(a, vec(t), (int32_t)nv32);
        sift_chain *b = sift_chain_clone(a);
        assert_non_null(b);
        for (int t = 37; t < 100; t++) {
            const sift_token ta = sift_chain_sample(a, vec(t), (int32_t)nv32);
            const sift_token tb = sift_chain_sample(b, vec(t), (int32_t)nv32);
            if (ta != tb) fail_msg("%s: clone differs at step %d (%d vs %d)", specs[s], t, ta, tb);
        }
        sift_chain_free(a);
        sift_chain_free(b);
    }
}

static void user_apply(sift_sampler *smpl, sift_candidates *cand)
{
    (void)smpl;
    cand->selected = 0;
}

static void test_user_sampler_without_clone(void **state)
{
    (void)state;
    static int dummy;
    static const sift_sampler_i no_apply = {.name = NULL};
    assert_null(sift_sampler_init(&no_apply, NULL)); /* apply is required */
    /* a user sampler with a context but no clone makes the chain uncloneable */
    static const sift_sampler_i ui = {.apply = user_apply};
    sift_chain *c = sift_chain_new(sift_chain_default_params());
    sift_chain_add(c, sift_sampler_init(&ui, &dummy));
    assert_null(sift_chain_clone(c));
    assert_string_equal(sift_sampler_name(sift_chain_get(c, 0)), "(unnamed)");
    assert_int_equal(sift_chain_sample(c, vec(0), (int32_t)nv32), 0);
    sift_chain_free(c); /* free may be NULL: only the wrapper goes */
    /* a context-less one clones by copying the vtable */
    sift_sampler *s = sift_sampler_init(&ui, NULL);
    sift_sampler *s2 = sift_sampler_clone(s);
    assert_non_null(s2);
    assert_ptr_equal(s2->iface, &ui);
    sift_sampler_free(s);
    sift_sampler_free(s2);
}

static void test_seeds(void **state)
{
    (void)state;
    sift_chain *c = sift_chain_from_spec("top_k(5);dist(77)", NULL, NULL);
    assert_int_equal(sift_chain_get_seed(c), 77);
    sift_chain_free(c);
    c = sift_chain_from_spec("top_k(5);greedy()", NULL, NULL);
    assert_int_equal(sift_chain_get_seed(c), SIFT_DEFAULT_SEED);
    sift_chain_free(c);
    c = sift_chain_from_spec("mirostat_v2(-1,5,0.1)", NULL, NULL); /* random seed, reported */
    assert_int_not_equal(sift_chain_get_seed(c), SIFT_DEFAULT_SEED);
    sift_chain_free(c);
}

static void test_cfg(void **state)
{
    (void)state;
    float l[3] = {1.0f, 2.0f, 3.0f};
    const float g[3] = {3.0f, 2.0f, 1.0f};
    assert_int_equal(sift_cfg_apply(l, g, 3, 1.5f), SIFT_OK);
    /* log-softmax both, then g + 1.5 * (l - g) */
    const double zl = log(exp(-2.0) + exp(-1.0) + 1.0);
    for (int i = 0; i < 3; i++) {
        const double ls = (i + 1.0 - 3.0) - zl, gs = (3.0 - i - 3.0) - zl;
        assert_float_near(l[i], gs + 1.5 * (ls - gs), 1e-5);
    }
    float same[2] = {0.5f, -0.5f};
    assert_int_equal(sift_cfg_apply(same, same, 2, 1.0f), SIFT_OK); /* scale 1 = log-softmax of the logits */
    assert_float_near(same[0] - same[1], 1.0, 1e-6);
    assert_int_equal(sift_cfg_apply(NULL, g, 3, 1.0f), SIFT_E_INVAL);
    assert_int_equal(sift_cfg_apply(l, g, 0, 1.0f), SIFT_E_INVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_list_api),
        cmocka_unit_test(test_sample_equals_steps),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_perf_counters),
        cmocka_unit_test(test_trace_hook),
        cmocka_unit_test(test_reset_replays_the_stream),
        cmocka_unit_test(test_clone_mid_stream_every_stateful_sampler),
        cmocka_unit_test(test_user_sampler_without_clone),
        cmocka_unit_test(test_seeds),
        cmocka_unit_test(test_cfg),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
