/*
 * test_spec_same_tokens.c - speculative decoding gives the tokens plain generation gives
 * (issue 30's acceptance: "Same tokens").
 *
 * Targets: stories260K, llama-2-tiny-random (../shared/models) and a mkmodel Q8_0 model
 * (256 wide, 2 layers, stories260K's vocabulary). Draft models: stories260K converted to Q8_0
 * (sift_model_quantize; the 172-wide rows stay F32), llama-2-tiny-random converted to F16 (8
 * wide: no block type fits its rows), the Q4_0 model of the same seed for the Q8_0 one. The
 * sampled chains make the target refuse many drafts, so rollbacks run all the time. Prompt
 * lookup: n = 3.
 *
 * For each target, draft source, chain (greedy; top_k(40);top_p(0.95);temp(0.8);dist(S);
 * and the same with penalties(64,1.3,0.1,0.1) and dry(0.8,1.75,2,64) first, whose states
 * must see only accepted tokens) and 5 prompts: 256 tokens from plain generation (decode one
 * token, sift_chain_sample, repeat) and from sift_spec_step must be identical, and for each
 * target and source speculation must actually have accepted draft tokens (else the test would
 * pass by never speculating; llama-2-tiny-random's sampled streams are near-uniform over
 * 32000 tokens and give prompt lookup nothing to accept, its greedy ones a lot).
 *
 * Also the premise, checked directly: the logits of every entry of a batch of 8 tokens are
 * bit for bit those of the same tokens decoded one at a time.
 *
 * Under valgrind or a sanitizer: 2 prompts, 48 tokens (the normal pass checks the streams).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "mkmodel.h"
#include "refdata.h"
#include "slow.h"
#include "sift.h"

enum { N_GEN_MAX = 256, N_CTX = 512 };

static char tmpdir[] = "/tmp/sift_test_spec_XXXXXX";
static const char *prompts[5] = {
    "Once upon a time, there was a little girl named Lily. She loved to play outside.",
    "The cat sat on the mat. The cat sat on the mat. The dog",
    "Tom and Sue went to the park. Tom said, \"Let's play ball!\" Sue said,",
    "One day, a big bird flew over the house and saw a small",
    "{\"name\": \"Ann\", \"age\": 7, \"pets\": [\"cat\", \"dog\"], \"name\": \"",
};

static int setup(void **state)
{
    (void)state;
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static sift_model *load(const char *path)
{
    sift_error err = {0};
    sift_model *m = sift_model_load(path, &err);
    if (!m) fprintf(stderr, "load %s: %s\n", path, err.msg);
    assert_non_null(m);
    return m;
}

static sift_model *load_shared(const char *stem)
{
    char path[1024];
    return load(ref_model_path(stem, path, sizeof path));
}

static sift_model *make(const char *name, const char *vocab_stem, sift_tensor_type type, uint64_t seed)
{
    char path[1024], vocab[1024];
    snprintf(path, sizeof path, "%s/%s.gguf", tmpdir, name);
    mk_spec sp = {.arch = "llama", .n_embd = 256, .n_ff = 512, .n_layer = 2, .n_head = 4, .n_head_kv = 2,
                  .seed = seed, .type = type, .out_scale = 4.0f};
    assert_int_equal(mk_write_model(path, ref_model_path(vocab_stem, vocab, sizeof vocab), &sp), 0);
    return load(path);
}

/* The shared model `stem` converted to type (what fits: rows that are not whole blocks stay F32). */
static sift_model *quantized(const char *stem, sift_tensor_type type)
{
    char in[1024], out[1024];
    snprintf(out, sizeof out, "%s/%s-%d.gguf", tmpdir, stem, (int)type);
    sift_quantize_params qp = sift_quantize_default_params();
    qp.type = type;
    qp.keep_output = true;
    sift_error err = {0};
    const sift_status st = sift_model_quantize(ref_model_path(stem, in, sizeof in), out, &qp, NULL, &err);
    if (st != SIFT_OK) fprintf(stderr, "quantize %s: %s\n", stem, err.msg);
    assert_int_equal(st, SIFT_OK);
    return load(out);
}

static sift_context *mkctx(const sift_model *m)
{
    sift_context_params p = sift_context_default_params();
    p.n_ctx = N_CTX;
    p.n_batch = 64;
    p.n_threads = p.n_threads_batch = 2;
    sift_error err = {0};
    sift_context *c = sift_context_new(m, p, &err);
    if (!c) fprintf(stderr, "context: %s\n", err.msg);
    assert_non_null(c);
    return c;
}

static sift_chain *mkchain(const sift_model *m, int which, uint32_t seed)
{
    static const char *specs[3] = {
        "greedy()",
        "top_k(40);top_p(0.95,1);temp(0.8);dist(%u)",
        "penalties(64,1.3,0.1,0.1);dry(0.8,1.75,2,64,\"\\n\",\".\");top_k(40);top_p(0.95,1);temp(0.8);dist(%u)",
    };
    char spec[256];
    snprintf(spec, sizeof spec, specs[which], seed);
    sift_vocab_view view;
    sift_vocab_view_get(sift_model_vocab(m), &view);
    sift_chain_env env = {.n_vocab = sift_model_n_vocab(m), .vocab = &view, .eot = SIFT_TOKEN_NULL};
    sift_error err = {0};
    sift_chain *c = sift_chain_from_spec(spec, &env, &err);
    if (!c) fprintf(stderr, "chain %s: %s\n", spec, err.msg);
    assert_non_null(c);
    return c;
}

static int32_t tokenize(const sift_model *m, const char *text, sift_token *out, int32_t cap)
{
    const int32_t n = sift_tokenize(sift_model_vocab(m), text, strlen(text), out, cap, true, false);
    assert_true(n > 0 && n < cap);
    return n;
}

static void decode_prompt(sift_context *ctx, const sift_token *p, int32_t n)
{
    sift_batch b;
    assert_int_equal(sift_batch_init(&b, n, 1), SIFT_OK);
    const sift_seq_id s0 = 0;
    for (int32_t i = 0; i < n; i++) sift_batch_add(&b, p[i], i, &s0, 1, i == n - 1);
    assert_int_equal(sift_decode(ctx, &b, NULL), SIFT_OK);
    sift_batch_free(&b);
}

/* Plain generation: the prompt, then decode one token and sample, n_gen times. */
static void gen_plain(sift_context *ctx, sift_chain *chain, const sift_token *p, int32_t np, int32_t n_gen, sift_token *out)
{
    const int32_t nv = sift_model_n_vocab(sift_context_model(ctx));
    sift_kv_clear(ctx);
    decode_prompt(ctx, p, np);
    for (int32_t i = 0; i < np; i++) sift_chain_accept(chain, p[i]);
    sift_batch b;
    assert_int_equal(sift_batch_init(&b, 1, 1), SIFT_OK);
    const sift_seq_id s0 = 0;
    for (int32_t i = 0; i < n_gen; i++) {
        out[i] = sift_chain_sample(chain, sift_get_logits_ith(ctx, -1), nv);
        assert_int_not_equal(out[i], SIFT_TOKEN_NULL);
        if (i == n_gen - 1) break;
        sift_batch_clear(&b);
        sift_batch_add(&b, out[i], np + i, &s0, 1, true);
        assert_int_equal(sift_decode(ctx, &b, NULL), SIFT_OK);
    }
    sift_batch_free(&b);
}

/* The same through sift_spec_step with draft source d; returns the draft tokens accepted. */
static int64_t gen_spec(sift_context *ctx, sift_chain *chain, sift_draft *d, const sift_token *p, int32_t np, int32_t n_gen,
                        sift_token *out)
{
    const int32_t nv = sift_model_n_vocab(sift_context_model(ctx));
    sift_kv_clear(ctx);
    decode_prompt(ctx, p, np);
    for (int32_t i = 0; i < np; i++) sift_chain_accept(chain, p[i]);
    out[0] = sift_chain_sample(chain, sift_get_logits_ith(ctx, -1), nv);
    sift_draft_reset(d);
    assert_int_equal(sift_draft_push(d, p, np, NULL), SIFT_OK);
    assert_int_equal(sift_draft_push(d, out, 1, NULL), SIFT_OK);
    sift_error err = {0};
    sift_spec *s = sift_spec_new(ctx, 0, d, &err);
    assert_non_null(s);
    const sift_spec_sampling smp = {.chain = chain};
    int32_t n = 1;
    while (n < n_gen) {
        sift_spec_result r;
        const sift_status st = sift_spec_step(s, np + n - 1, out[n - 1], n_gen - n, &smp, out + n, &r, &err);
        if (st != SIFT_OK) fprintf(stderr, "step: %s\n", err.msg);
        assert_int_equal(st, SIFT_OK);
        assert_false(r.no_token);
        assert_true(r.n_tokens >= 1 && r.n_tokens <= r.n_drafted + 1 && r.n_accepted <= r.n_drafted);
        assert_true(r.n_accepted == r.n_tokens - 1 || r.n_accepted == r.n_tokens);
        n += r.n_tokens;
        /* the cache ends just before the new last token */
        assert_int_equal(sift_kv_seq_pos_max(ctx, 0), np + n - 2);
    }
    assert_int_equal(n, n_gen);
    const sift_spec_stats stats = sift_spec_get_stats(s);
    assert_int_equal(stats.n_tokens, n_gen - 1);
    sift_spec_free(s);
    return stats.n_accepted;
}

typedef struct target {
    const char *name;
    sift_model *m, *draft;
} target;

static void run_target(const target *t)
{
    const bool vg = SLOW() || ref_under_valgrind();
    const int n_prompts = vg ? 2 : 5, n_gen = vg ? 48 : N_GEN_MAX;
    sift_context *ctx = mkctx(t->m);
    sift_context_params dp = sift_context_default_params();
    dp.n_ctx = N_CTX, dp.n_batch = 64, dp.n_threads = dp.n_threads_batch = 2;
    /* a fixed depth: the cost model (verify.c) would draft little on these small, compute-
     * bound models, and this test wants every draft verified and mostly refused or cut */
    sift_draft_params par = sift_draft_default_params();
    par.adaptive = false;
    par.n_max = 8;
    sift_error err = {0};
    sift_draft *src[2] = {sift_draft_model_new(t->draft, t->m, dp, par, &err), sift_draft_lookup_new(3, par, &err)};
    if (!src[0] || !src[1]) fprintf(stderr, "draft: %s\n", err.msg);
    assert_non_null(src[0]);
    assert_non_null(src[1]);
    for (int k = 0; k < 2; k++) {
        int64_t acc_all = 0;
        for (int c = 0; c < 3; c++) {
            int64_t acc = 0;
            for (int pi = 0; pi < n_prompts; pi++) {
                sift_token prompt[256], a[N_GEN_MAX], b[N_GEN_MAX];
                const int32_t np = tokenize(t->m, prompts[pi], prompt, 256);
                const uint32_t seed = 1000u + (uint32_t)pi;
                sift_chain *ca = mkchain(t->m, c, seed), *cb = mkchain(t->m, c, seed);
                gen_plain(ctx, ca, prompt, np, n_gen, a);
                acc += gen_spec(ctx, cb, src[k], prompt, np, n_gen, b);
                int32_t first = -1;
                for (int32_t i = 0; i < n_gen && first < 0; i++)
                    if (a[i] != b[i]) first = i;
                if (first >= 0)
                    fprintf(stderr, "%s, %s, chain %d, prompt %d: token %d differs (%d vs %d)\n", t->name,
                            sift_draft_kind(src[k]), c, pi, first, a[first], b[first]);
                assert_int_equal(first, -1);
                sift_chain_free(ca);
                sift_chain_free(cb);
            }
            printf("  %-22s %-11s chain %d: %d prompts x %d tokens identical; %lld of them accepted draft tokens\n",
                   t->name, sift_draft_kind(src[k]), c, n_prompts, n_gen, (long long)acc);
            acc_all += acc;
        }
        /* a flat random model's sampled tokens give nothing to accept; greedy ones do */
        assert_true(acc_all > 0);
    }
    sift_draft_free(src[0]);
    sift_draft_free(src[1]);
    sift_context_free(ctx);
}

/* A batch's rows against one-token decodes, bit for bit. */
static void check_batch_logits(const sift_model *m, const char *name)
{
    sift_context *a = mkctx(m), *b = mkctx(m);
    sift_token p[256];
    const int32_t np = tokenize(m, prompts[0], p, 256);
    const int32_t nv = sift_model_n_vocab(m);
    decode_prompt(a, p, np - 8);
    decode_prompt(b, p, np - 8);
    sift_batch batch;
    assert_int_equal(sift_batch_init(&batch, 8, 1), SIFT_OK);
    const sift_seq_id s0 = 0;
    for (int32_t i = 0; i < 8; i++) sift_batch_add(&batch, p[np - 8 + i], np - 8 + i, &s0, 1, true);
    assert_int_equal(sift_decode(a, &batch, NULL), SIFT_OK);
    int differ = 0;
    for (int32_t i = 0; i < 8; i++) {
        sift_batch_clear(&batch);
        sift_batch_add(&batch, p[np - 8 + i], np - 8 + i, &s0, 1, true);
        assert_int_equal(sift_decode(b, &batch, NULL), SIFT_OK);
        differ += memcmp(sift_get_logits_ith(a, i), sift_get_logits_ith(b, 0), (size_t)nv * sizeof(float)) != 0;
    }
    printf("  %-22s batch of 8 vs one at a time: %d rows differ\n", name, differ);
    assert_int_equal(differ, 0);
    sift_batch_free(&batch);
    sift_context_free(a);
    sift_context_free(b);
}

static void test_stories(void **state)
{
    (void)state;
    target t = {"stories260K", load_shared("stories260K"), quantized("stories260K", SIFT_TYPE_Q8_0)};
    check_batch_logits(t.m, t.name);
    run_target(&t);
    sift_model_free(t.draft);
    sift_model_free(t.m);
}

static void test_tiny_random(void **state)
{
    (void)state;
    target t = {"llama-2-tiny-random", load_shared("llama-2-tiny-random"), quantized("llama-2-tiny-random", SIFT_TYPE_F16)};
    check_batch_logits(t.m, t.name);
    run_target(&t);
    sift_model_free(t.draft);
    sift_model_free(t.m);
}

static void test_mkmodel_q8_0(void **state)
{
    (void)state;
    target t = {"mkmodel q8_0 (q4_0)", make("q8_0", "stories260K", SIFT_TYPE_Q8_0, 3), make("q4_0", "stories260K", SIFT_TYPE_Q4_0, 3)};
    check_batch_logits(t.m, t.name);
    run_target(&t);
    sift_model_free(t.draft);
    sift_model_free(t.m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stories),
        cmocka_unit_test(test_tiny_random),
        cmocka_unit_test(test_mkmodel_q8_0),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
