/*
 * test_embeddings.c - sift_set_embeddings / sift_get_embeddings_ith / _seq on stories260K:
 *
 *   - off by default: no embeddings, logits as always;
 *   - pooling NONE: one row per output token, and turning embeddings on changes no logit
 *     (bitwise);
 *   - MEAN / CLS / LAST equal the average / first / last of the NONE rows of the same
 *     prompt (all tokens output), and no logits come with them;
 *   - two sequences in one batch pool separately, each as if alone (bitwise);
 *   - bad arguments: RANK unsupported, unknown types, a sequence absent from the batch.
 *
 * llama.cpp's own embeddings are compared in tests/peer_embeddings.c (when the peer is built).
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
static int32_t n_embd, n_vocab;
static sift_token toks[64];
static int32_t n_toks;

static int setup(void **state)
{
    (void)state;
    char path[1024];
    sift_error err = {0};
    model = sift_model_load(ref_model_path("stories260K", path, sizeof path), &err);
    if (!model) {
        fprintf(stderr, "cannot load %s: %s\n", path, err.msg);
        return -1;
    }
    sift_model_info info;
    sift_model_get_info(model, &info);
    n_embd = info.n_embd;
    n_vocab = info.n_vocab;
    const char *text = "Once upon a time, there was a little girl";
    n_toks = sift_tokenize(sift_model_vocab(model), text, strlen(text), toks, 64, true, false);
    return n_toks > 2 ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    sift_model_free(model);
    return 0;
}

static sift_context *new_ctx(int n_seq)
{
    sift_context_params p = sift_context_default_params();
    p.n_ctx = 256 * (uint32_t)n_seq;
    p.n_seq_max = (uint32_t)n_seq;
    p.n_batch = 256;
    p.n_threads = 1;
    sift_context *ctx = sift_context_new(model, p, NULL);
    assert_non_null(ctx);
    return ctx;
}

/* the prompt in sequence seq of b (all outputs when all) */
static void add_prompt(sift_batch *b, sift_seq_id seq, bool all)
{
    for (int32_t i = 0; i < n_toks; i++) assert_int_equal(sift_batch_add(b, toks[i], i, &seq, 1, all || i == n_toks - 1), SIFT_OK);
}

static void test_off_by_default_and_none(void **state)
{
    (void)state;
    sift_batch b;
    assert_int_equal(sift_batch_init(&b, 256, 2), SIFT_OK);
    sift_context *ctx = new_ctx(1);
    assert_false(sift_get_embeddings_enabled(ctx));
    add_prompt(&b, 0, true);
    assert_int_equal(sift_decode(ctx, &b, NULL), SIFT_OK);
    assert_null(sift_get_embeddings_ith(ctx, 0));
    float *plain = malloc((size_t)n_toks * n_vocab * sizeof(float));
    memcpy(plain, sift_get_logits(ctx), (size_t)n_toks * n_vocab * sizeof(float));

    assert_int_equal(sift_set_embeddings(ctx, true, SIFT_POOLING_TYPE_UNSPECIFIED), SIFT_OK);
    assert_int_equal(sift_get_pooling_type(ctx), SIFT_POOLING_TYPE_NONE);
    sift_kv_clear(ctx);
    assert_int_equal(sift_decode(ctx, &b, NULL), SIFT_OK);
    assert_memory_equal(sift_get_logits(ctx), plain, (size_t)n_toks * n_vocab * sizeof(float));
    for (int32_t i = 0; i < n_toks; i++) {
        const float *e = sift_get_embeddings_ith(ctx, i);
        assert_non_null(e);
        double ss = 0;
        for (int32_t d = 0; d < n_embd; d++) {
            assert_true(isfinite(e[d]));
            ss += (double)e[d] * e[d];
        }
        assert_true(ss > 0);
    }
    assert_ptr_equal(sift_get_embeddings_ith(ctx, -1), sift_get_embeddings_ith(ctx, n_toks - 1));
    assert_null(sift_get_embeddings_ith(ctx, n_toks));
    assert_null(sift_get_embeddings_seq(ctx, 0)); /* NONE: no pooled vector */

    /* only the last token asked: only it has a row */
    sift_kv_clear(ctx);
    sift_batch_clear(&b);
    add_prompt(&b, 0, false);
    assert_int_equal(sift_decode(ctx, &b, NULL), SIFT_OK);
    assert_null(sift_get_embeddings_ith(ctx, 0));
    assert_non_null(sift_get_embeddings_ith(ctx, n_toks - 1));
    free(plain);
    sift_batch_free(&b);
    sift_context_free(ctx);
}

static void test_pooling(void **state)
{
    (void)state;
    sift_batch b;
    assert_int_equal(sift_batch_init(&b, 256, 2), SIFT_OK);
    sift_context *ctx = new_ctx(2);
    assert_int_equal(sift_set_embeddings(ctx, true, SIFT_POOLING_TYPE_NONE), SIFT_OK);
    add_prompt(&b, 0, true);
    assert_int_equal(sift_decode(ctx, &b, NULL), SIFT_OK);
    float *rows = malloc((size_t)n_toks * n_embd * sizeof(float));
    for (int32_t i = 0; i < n_toks; i++) memcpy(rows + (size_t)i * n_embd, sift_get_embeddings_ith(ctx, i), (size_t)n_embd * sizeof(float));

    const sift_pooling_type types[3] = {SIFT_POOLING_TYPE_MEAN, SIFT_POOLING_TYPE_CLS, SIFT_POOLING_TYPE_LAST};
    for (int k = 0; k < 3; k++) {
        assert_int_equal(sift_set_embeddings(ctx, true, types[k]), SIFT_OK);
        sift_kv_clear(ctx);
        sift_batch_clear(&b);
        add_prompt(&b, 0, false); /* pooling makes every token an output anyway */
        assert_int_equal(sift_decode(ctx, &b, NULL), SIFT_OK);
        assert_null(sift_get_logits_ith(ctx, -1)); /* no head ran */
        assert_null(sift_get_embeddings_seq(ctx, 1)); /* not in the batch */
        const float *e = sift_get_embeddings_seq(ctx, 0);
        assert_non_null(e);
        double maxd = 0;
        for (int32_t d = 0; d < n_embd; d++) {
            double want;
            if (types[k] == SIFT_POOLING_TYPE_MEAN) {
                want = 0;
                for (int32_t i = 0; i < n_toks; i++) want += rows[(size_t)i * n_embd + d];
                want /= n_toks;
            } else {
                want = rows[(size_t)(types[k] == SIFT_POOLING_TYPE_CLS ? 0 : n_toks - 1) * n_embd + d];
            }
            const double dd = fabs(e[d] - want);
            if (dd > maxd) maxd = dd;
        }
        printf("pooling %d: max |delta| vs the NONE rows %.3g\n", (int)types[k], maxd);
        assert_true(maxd < 1e-5);

        /* two sequences in one batch: each as if alone */
        float alone[1024];
        assert_true(n_embd <= 1024);
        memcpy(alone, e, (size_t)n_embd * sizeof(float));
        sift_kv_clear(ctx);
        sift_batch_clear(&b);
        add_prompt(&b, 0, false);
        add_prompt(&b, 1, false);
        assert_int_equal(sift_decode(ctx, &b, NULL), SIFT_OK);
        assert_memory_equal(sift_get_embeddings_seq(ctx, 0), alone, (size_t)n_embd * sizeof(float));
        assert_memory_equal(sift_get_embeddings_seq(ctx, 1), alone, (size_t)n_embd * sizeof(float));
    }
    /* off again: logits come back */
    assert_int_equal(sift_set_embeddings(ctx, false, SIFT_POOLING_TYPE_MEAN), SIFT_OK);
    sift_kv_clear(ctx);
    sift_batch_clear(&b);
    add_prompt(&b, 0, false);
    assert_int_equal(sift_decode(ctx, &b, NULL), SIFT_OK);
    assert_non_null(sift_get_logits_ith(ctx, -1));
    assert_null(sift_get_embeddings_seq(ctx, 0));
    assert_null(sift_get_embeddings_ith(ctx, -1));
    free(rows);
    sift_batch_free(&b);
    sift_context_free(ctx);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    sift_context *ctx = new_ctx(1);
    assert_int_equal(sift_set_embeddings(ctx, true, SIFT_POOLING_TYPE_RANK), SIFT_E_UNSUPPORTED);
    assert_int_equal(sift_set_embeddings(ctx, true, (sift_pooling_type)7), SIFT_E_INVAL);
    assert_int_equal(sift_set_embeddings(ctx, true, (sift_pooling_type)-2), SIFT_E_INVAL);
    assert_false(sift_get_embeddings_enabled(ctx)); /* unchanged by the errors */
    assert_int_equal(sift_set_embeddings(NULL, true, SIFT_POOLING_TYPE_NONE), SIFT_E_INVAL);
    assert_null(sift_get_embeddings_seq(ctx, -1));
    assert_null(sift_get_embeddings_seq(ctx, 5));
    assert_null(sift_get_embeddings_ith(NULL, 0));
    sift_context_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_off_by_default_and_none),
        cmocka_unit_test(test_pooling),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
