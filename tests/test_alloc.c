/*
 * test_alloc.c - no allocation per token. The test is linked with
 * -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=free (tests/alloc.cmake), so
 * every allocation libsift makes goes through the counters below (cmocka, being a shared
 * library, is not counted). Each chain takes one step (which may size its buffers), then
 * 64 more steps must not allocate or free anything - fast steps (core/fast.c) included,
 * and building the candidates a fast greedy / dist step left unbuilt.
 */
#include "sift_test.h"

static long n_alloc, n_free;

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t s);
void *__real_realloc(void *p, size_t n);
void __real_free(void *p);

void *__wrap_malloc(size_t n)
{
    n_alloc++;
    return __real_malloc(n);
}
void *__wrap_calloc(size_t n, size_t s)
{
    n_alloc++;
    return __real_calloc(n, s);
}
void *__wrap_realloc(void *p, size_t n)
{
    n_alloc++;
    return __real_realloc(p, n);
}
void __wrap_free(void *p)
{
    if (p) n_free++;
    __real_free(p);
}

static void steady_state(const char *spec, const float *x, uint32_t nv, uint32_t nvec)
{
    sift_error err = {0};
    sift_chain *c = sift_chain_from_spec(spec, NULL, &err);
    if (!c) fail_msg("%s: %s", spec, err.msg);
    sift_chain_sample(c, x, (int32_t)nv); /* the first step sizes the buffers */
    const long a0 = n_alloc, f0 = n_free;
    for (int t = 1; t <= 64; t++) {
        const sift_token tok = sift_chain_sample(c, x + (size_t)(t % (int)nvec) * nv, (int32_t)nv);
        if (tok == SIFT_TOKEN_NULL) fail_msg("%s: no token at step %d", spec, t);
        if (t % 2) sift_candidates_top(sift_chain_candidates(c), 5, NULL, NULL, NULL); /* builds lazy candidates */
    }
    if (n_alloc != a0 || n_free != f0)
        fail_msg("%s: %ld allocations and %ld frees in 64 steps", spec, n_alloc - a0, n_free - f0);
    sift_chain_free(c);
}

static void test_no_allocation_per_token(void **state)
{
    (void)state;
    uint32_t nv = 0, nvec = 0;
    float *x = sift_test_ref_logits(32000, &nv, &nvec);
    assert_non_null(x);
    const char *specs[] = {
        "greedy()",
        "dist(42)",
        "top_k(40);temp(0.8);dist(1234)",
        "top_p(0.9,1);dist(7)",                       /* top-256 then whole-array bucket sorts */
        "top_k(0);top_p(0.999,1);temp(0.8);dist(7)",  /* full-vocabulary top-p */
        "min_p(0.1,1);temp(1.5);dist(99)",
        "penalties(64,1.3,0.2,0.1);top_k(50);dist(5)",
        "typical(0.9,1);dist(3)",                     /* full sort + index sort */
        "xtc(0.5,0.1,1,11);dist(11)",
        "top_n_sigma(1.0);dist(13)",
        "mirostat(17,5,0.1,100)",
        "mirostat_v2(17,5,0.1)",
        "temp_ext(0.8,0.5,1.0);dist(19)",
        "dry(0.8,1.75,2,256,[12009],[5644],[14116],[16941 31217]);dist(42)",
        "logit_bias(15:-inf,42:2.5);adaptive_p(0.5,0.9,3)",
        ("penalties(64,1.0,0.0,0.0);top_k(40);typical(1.0,0);top_p(0.95,0);min_p(0.05,0);xtc(0.0,0.1,0,42);"
         "temp_ext(0.8,0.0,1.0);dist(42)"),
    };
    for (size_t i = 0; i < sizeof specs / sizeof *specs; i++) steady_state(specs[i], x, nv, nvec);
    /* the separate steps and the common-params chain too */
    sift_sampling_params p = sift_sampling_default_params();
    p.seed = 1;
    p.penalty_repeat = 1.1f;
    sift_chain *c = sift_chain_from_params(&p, NULL, NULL);
    sift_chain_fill(c, x, (int32_t)nv, NULL);
    sift_chain_accept(c, sift_chain_apply(c, NULL));
    const long a0 = n_alloc;
    for (int t = 1; t <= 64; t++) {
        sift_chain_fill(c, x + (size_t)(t % (int)nvec) * nv, (int32_t)nv, NULL);
        sift_chain_accept(c, sift_chain_apply(c, NULL));
        sift_candidates_top(sift_chain_candidates(c), 10, NULL, NULL, NULL);
    }
    assert_int_equal(n_alloc, a0);
    sift_chain_free(c);
    /* the counters do see libsift's allocations */
    const long before = n_alloc;
    sift_chain_free(sift_chain_new(sift_chain_default_params()));
    assert_true(n_alloc > before);
    free(x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_allocation_per_token),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
