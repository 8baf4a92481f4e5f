/*
 * test_decode_alloc.c - no allocation per token: after the first decode of each shape,
 * decoding (one token, or one token for each of several sequences) and sampling allocate
 * nothing. malloc, calloc and realloc are wrapped at link time (tests/model.cmake passes
 * --wrap), so every allocation libsift makes is counted.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "refdata.h"
#include "sift.h"

static long n_alloc;
void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n)
{
    n_alloc++;
    return __real_malloc(n);
}
void *__wrap_calloc(size_t n, size_t m)
{
    n_alloc++;
    return __real_calloc(n, m);
}
void *__wrap_realloc(void *p, size_t n)
{
    n_alloc++;
    return __real_realloc(p, n);
}

static void run(const char *stem, int n_threads)
{
    char path[1024];
    sift_model *m = sift_model_load(ref_model_path(stem, path, sizeof path), NULL);
    assert_non_null(m);
    sift_context_params cp = sift_context_default_params();
    cp.n_ctx = 512 * 3;
    cp.n_seq_max = 3;
    cp.n_threads = n_threads;
    sift_context *ctx = sift_context_new(m, cp, NULL);
    assert_non_null(ctx);
    sift_chain_env env = {.n_vocab = sift_model_n_vocab(m), .vocab = NULL, .eot = SIFT_TOKEN_NULL, .default_seed = 1};
    sift_chain *chain = sift_chain_from_spec("penalties(64,1.1,0,0);top_k(40);top_p(0.95,1);min_p(0.05,1);temp(0.8);dist(1)", &env, NULL);
    assert_non_null(chain);
    sift_batch b;
    sift_batch_init(&b, 16, 1);
    /* prompts in the three sequences, then one warm-up step of each shape */
    for (int s = 0; s < 3; s++)
        for (int i = 0; i < 4; i++) sift_batch_add(&b, 1 + 10 * s + i, i, &s, 1, i == 3);
    assert_int_equal(sift_decode(ctx, &b, NULL), SIFT_OK);
    int pos = 4;
    sift_token tok = sift_chain_sample(chain, sift_get_logits_ith(ctx, -1), sift_model_n_vocab(m));
    const long before = n_alloc;
    assert_true(before > 0); /* the wrapping works: loading and the context did allocate */
    for (int step = 0; step < 32; step++, pos++) {
        sift_batch_clear(&b);
        /* alternate one sequence and all three (sequences 1 and 2 then skip a position:
         * holes, masked in their attention) */
        const int n_seq = step % 2 ? 3 : 1;
        for (int s = 0; s < n_seq; s++) sift_batch_add(&b, tok, pos, &s, 1, true);
        assert_int_equal(sift_decode(ctx, &b, NULL), SIFT_OK);
        tok = sift_chain_sample(chain, sift_get_logits_ith(ctx, -1), sift_model_n_vocab(m));
    }
    const long during = n_alloc - before;
    printf("  %s, %d thread(s): %ld allocations in 32 decode + sample steps\n", stem, n_threads, during);
    assert_int_equal(during, 0);
    sift_batch_free(&b);
    sift_chain_free(chain);
    sift_context_free(ctx);
    sift_model_free(m);
}

static void test_no_alloc(void **state)
{
    (void)state;
    run("stories260K", 1);
    run("stories260K", 2);
    run("llama-2-tiny-random", 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_no_alloc)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
