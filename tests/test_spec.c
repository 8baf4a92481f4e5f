/*
 * test_spec.c - the speculative decoding API around the same-tokens test
 * (test_spec_same_tokens.c): argument and vocabulary errors, what prompt lookup proposes,
 * a step ended by its token callback, a grammar kept outside the chain.
 *
 *   - lookup: after "a b c d e ... a b c", the draft is "d e ..." (the span that followed);
 *     nothing without history or when the n-gram was never seen; bad n / params refused;
 *   - a draft model whose vocabulary differs (llama-2-tiny-random against stories260K) is
 *     refused with a message naming the difference;
 *   - on_token returning false ends the step after that token: the cache ends before it,
 *     the chain accepted exactly the returned tokens (a second chain fed the same tokens
 *     by hand samples the same next token);
 *   - with a grammar outside the chain, every token of a speculative run is one the grammar
 *     allows (the generated text matches it), and the stream equals the plain one.
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

static sift_model *load_shared(const char *stem)
{
    char path[1024];
    sift_error err = {0};
    sift_model *m = sift_model_load(ref_model_path(stem, path, sizeof path), &err);
    if (!m) fprintf(stderr, "load %s: %s\n", path, err.msg);
    assert_non_null(m);
    return m;
}

static void test_lookup(void **state)
{
    (void)state;
    sift_error err = {0};
    sift_draft_params p = sift_draft_default_params();
    assert_null(sift_draft_lookup_new(0, p, &err));
    assert_int_equal(err.status, SIFT_E_INVAL);
    assert_null(sift_draft_lookup_new(SIFT_LOOKUP_MAX_N + 1, p, &err));
    sift_draft_params bad = p;
    bad.n_min = bad.n_max + 1;
    assert_null(sift_draft_lookup_new(2, bad, &err));
    assert_non_null(strstr(err.msg, "n_min"));

    p.adaptive = false;
    p.n_max = 4;
    sift_draft *d = sift_draft_lookup_new(3, p, &err);
    assert_non_null(d);
    assert_string_equal(sift_draft_kind(d), "lookup");
    sift_token out[8];
    assert_int_equal(sift_draft_propose(d, out, 8, NULL), 0); /* no history */
    const sift_token text[] = {10, 11, 12, 13, 14, 15, 16, 20, 21, 10, 11, 12};
    assert_int_equal(sift_draft_push(d, text, 12, NULL), SIFT_OK);
    assert_int_equal(sift_draft_propose(d, out, 8, NULL), 4); /* n_max */
    assert_int_equal(out[0], 13);
    assert_int_equal(out[3], 16);
    assert_int_equal(sift_draft_propose(d, out, 2, NULL), 2); /* the cap */
    const sift_token unseen = 99;
    assert_int_equal(sift_draft_push(d, &unseen, 1, NULL), SIFT_OK);
    assert_int_equal(sift_draft_propose(d, out, 8, NULL), 0);
    const sift_token neg = -3;
    assert_int_equal(sift_draft_push(d, &neg, 1, &err), SIFT_E_INVAL);
    sift_draft_reset(d);
    assert_int_equal(sift_draft_propose(d, out, 8, NULL), 0);
    /* n_min: a draft that would be shorter is dropped (here: the room allows only 2) */
    sift_draft_free(d);
    p.n_min = 3;
    d = sift_draft_lookup_new(3, p, &err);
    assert_int_equal(sift_draft_push(d, text, 12, NULL), SIFT_OK);
    assert_int_equal(sift_draft_propose(d, out, 8, NULL), 4);
    assert_int_equal(sift_draft_propose(d, out, 2, NULL), 0);
    sift_draft_free(d);
}

/* sift_draft_set_params / _feedback, what a caller that verifies drafts itself (the server)
 * uses: a longer n_max takes effect (the lookup's scratch grows), bad values are refused and
 * leave the old ones, and the adaptive depth follows the reported outcomes. */
static void test_params_feedback(void **state)
{
    (void)state;
    sift_error err = {0};
    sift_draft_params p = sift_draft_default_params();
    p.adaptive = false;
    p.n_max = 4;
    sift_draft *d = sift_draft_lookup_new(3, p, &err);
    assert_non_null(d);
    const sift_token text[] = {10, 11, 12, 13, 14, 15, 16, 20, 21, 10, 11, 12};
    assert_int_equal(sift_draft_push(d, text, 12, NULL), SIFT_OK);
    sift_token out[16];
    assert_int_equal(sift_draft_propose(d, out, 16, NULL), 4);
    p.n_max = 8;
    assert_int_equal(sift_draft_set_params(d, p, &err), SIFT_OK);
    assert_int_equal(sift_draft_propose(d, out, 16, NULL), 8); /* 13 14 15 16 20 21 10 11 */
    assert_int_equal(out[4], 20);
    assert_int_equal(out[7], 11);
    sift_draft_params bad = p;
    bad.p_min = 1.5f;
    assert_int_equal(sift_draft_set_params(d, bad, &err), SIFT_E_INVAL);
    assert_non_null(strstr(err.msg, "p_min"));
    assert_int_equal(sift_draft_get_params(d).n_max, 8);
    assert_true(sift_draft_get_params(d).p_min == p.p_min);

    p.adaptive = true;
    assert_int_equal(sift_draft_set_params(d, p, &err), SIFT_OK);
    assert_true(sift_draft_acceptance(d) == 0.5);  /* the prior */
    assert_int_equal(sift_draft_depth(d), 2);      /* 0.5^2 >= 0.15 > 0.5^3 */
    for (int i = 0; i < 3; i++) sift_draft_feedback(d, 8, 8);
    assert_true(sift_draft_acceptance(d) > 0.95);
    assert_int_equal(sift_draft_depth(d), 8);      /* n_max */
    for (int i = 0; i < 40; i++) sift_draft_feedback(d, 4, 0);
    assert_true(sift_draft_acceptance(d) < 0.15); /* decayed: refusals weigh at most 10 */
    assert_int_equal(sift_draft_depth(d), 1);
    sift_draft_feedback(d, 2, 3); /* more accepted than drafted: ignored */
    assert_true(sift_draft_acceptance(d) < 0.15); /* decayed: refusals weigh at most 10 */
    sift_draft_free(d);
}

static void test_vocab_mismatch(void **state)
{
    (void)state;
    sift_model *a = load_shared("stories260K"), *b = load_shared("llama-2-tiny-random");
    sift_error err = {0};
    sift_draft *d = sift_draft_model_new(b, a, sift_context_default_params(), sift_draft_default_params(), &err);
    assert_null(d);
    assert_int_equal(err.status, SIFT_E_INVAL);
    assert_non_null(strstr(err.msg, "vocabulary has 32000 tokens, the target's 512"));
    sift_model_free(a);
    sift_model_free(b);
}

typedef struct stop_at {
    int n, limit;
} stop_at;

static bool on_token(void *user, sift_token t)
{
    (void)t;
    stop_at *s = user;
    return ++s->n < s->limit;
}

static void test_callback_stop(void **state)
{
    (void)state;
    sift_model *m = load_shared("stories260K");
    sift_context_params cp = sift_context_default_params();
    cp.n_ctx = 256;
    sift_error err = {0};
    sift_context *ctx = sift_context_new(m, cp, &err);
    assert_non_null(ctx);
    sift_chain *chain = sift_chain_from_spec("greedy()", NULL, &err);
    sift_draft_params dp = sift_draft_default_params();
    dp.adaptive = false;
    sift_draft *d = sift_draft_lookup_new(2, dp, &err);
    sift_spec *s = sift_spec_new(ctx, 0, d, &err);
    assert_non_null(s);
    /* greedy stories260K repeats itself soon: run until a step returns several tokens, with
     * a callback that ends each step after its second token */
    sift_token last = 1, out[64];
    sift_pos pos = 0;
    assert_int_equal(sift_draft_push(d, &last, 1, NULL), SIFT_OK);
    bool cut = false;
    for (int i = 0; i < 150 && !cut; i++) {
        stop_at st = {0, 2};
        const sift_spec_sampling smp = {.chain = chain, .on_token = on_token, .user = &st};
        sift_spec_result r;
        assert_int_equal(sift_spec_step(s, pos, last, 64, &smp, out, &r, &err), SIFT_OK);
        assert_true(r.n_tokens >= 1 && r.n_tokens <= 2);
        cut = r.stopped && r.n_drafted > 2;
        pos += r.n_tokens;
        last = out[r.n_tokens - 1];
        assert_int_equal(sift_kv_seq_pos_max(ctx, 0), pos - 1);
    }
    assert_true(cut);
    /* bad arguments */
    sift_spec_result r;
    const sift_spec_sampling smp = {.chain = chain};
    assert_int_equal(sift_spec_step(s, pos, last, 0, &smp, out, &r, &err), SIFT_E_INVAL);
    assert_int_equal(sift_spec_step(s, pos, last, 4, NULL, out, &r, &err), SIFT_E_INVAL);
    assert_null(sift_spec_new(ctx, 1, d, &err));
    sift_spec_free(s);
    sift_draft_free(d);
    sift_chain_free(chain);
    sift_context_free(ctx);
    sift_model_free(m);
}

/* n_gen tokens after BOS with chain + grammar (rejection mode): plainly, or through
 * sift_spec_step with prompt lookup; the text goes to buf. */
static void gen_grammar(sift_model *m, bool spec, sift_token *out, int n_gen, char *buf, size_t cap)
{
    sift_context_params cp = sift_context_default_params();
    cp.n_ctx = 256;
    sift_error err = {0};
    sift_context *ctx = sift_context_new(m, cp, &err);
    sift_vocab_view view;
    sift_vocab_view_get(sift_model_vocab(m), &view);
    sift_chain *chain = sift_chain_from_spec("top_k(40);temp(0.7);dist(5)", NULL, &err);
    sift_sampler *g = sift_sampler_init_grammar(&view, "root ::= (\"the cat \" | \"a dog \" | \"ran \" | \"sat. \")+", "root", &err);
    assert_non_null(ctx);
    assert_non_null(chain);
    assert_non_null(g);
    const sift_spec_sampling smp = {.chain = chain, .grammar = g, .mode = SIFT_GRAMMAR_REJECTION};
    sift_draft_params dp = sift_draft_default_params();
    sift_draft *d = spec ? sift_draft_lookup_new(3, dp, &err) : NULL;
    sift_spec *s = sift_spec_new(ctx, 0, d, &err);
    sift_token last = sift_vocab_bos(sift_model_vocab(m));
    if (d) assert_int_equal(sift_draft_push(d, &last, 1, NULL), SIFT_OK);
    int n = 0;
    int64_t acc = 0;
    while (n < n_gen) {
        sift_spec_result r;
        assert_int_equal(sift_spec_step(s, n, last, spec ? n_gen - n : 1, &smp, out + n, &r, &err), SIFT_OK);
        assert_false(r.no_token);
        n += r.n_tokens;
        last = out[n - 1];
        acc += r.n_accepted;
    }
    size_t len = 0;
    for (int i = 0; i < n_gen; i++) {
        const int32_t k = sift_token_to_piece(sift_model_vocab(m), out[i], buf + len, (int32_t)(cap - len - 1), 0, false);
        assert_true(k >= 0);
        len += (size_t)k;
    }
    buf[len] = 0;
    if (spec) {
        printf("  grammar + lookup: %lld draft tokens accepted in %d\n", (long long)acc, n_gen);
        assert_true(acc > 0);
    }
    sift_spec_free(s);
    sift_draft_free(d);
    sift_sampler_free(g);
    sift_chain_free(chain);
    sift_context_free(ctx);
}

static void test_grammar(void **state)
{
    (void)state;
    sift_model *m = load_shared("stories260K");
    enum { N = 96 };
    sift_token a[N], b[N];
    char ta[4096], tb[4096];
    gen_grammar(m, false, a, N, ta, sizeof ta);
    gen_grammar(m, true, b, N, tb, sizeof tb);
    assert_memory_equal(a, b, sizeof a);
    /* every token the grammar allows: the text is a run of its words (a last one may be cut) */
    sift_error err = {0};
    sift_grammar *g = sift_grammar_parse("root ::= (\"the cat \" | \"a dog \" | \"ran \" | \"sat. \")+", strlen("root ::= (\"the cat \" | \"a dog \" | \"ran \" | \"sat. \")+"), "root", NULL, &err);
    assert_non_null(g);
    const sift_grammar_match_result mr = sift_grammar_match(g, tb, strlen(tb), NULL);
    assert_true(mr == SIFT_GRAMMAR_PREFIX || mr == SIFT_GRAMMAR_COMPLETE);
    sift_grammar_free(g);
    sift_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lookup),
        cmocka_unit_test(test_params_feedback),
        cmocka_unit_test(test_vocab_mismatch),
        cmocka_unit_test(test_callback_stop),
        cmocka_unit_test(test_grammar),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
