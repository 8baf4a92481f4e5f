/*
 * test_chainspec.c - chains from text: the chain-spec grammar (every sampler, seeds,
 * breakers, biases, all-or-nothing, errors that name the column), and llama.cpp common's
 * way (sift_sampling_params defaults, --samplers names and aliases, --sampling-seq
 * letters, mirostat / adaptive_p / logit-bias placement, the default chain reproducing the
 * reference default_s42 stream); the chain items both are made of (samplers/chain_items.h).
 */
#include "samplers/chain_items.h"
#include "sift_test.h"

static void describe(const char *spec, const sift_chain_env *env, const char *want)
{
    sift_error err = {0};
    sift_chain *c = sift_chain_from_spec(spec, env, &err);
    if (!c) fail_msg("'%s': %s", spec, err.msg);
    char buf[512];
    sift_chain_describe(c, buf, sizeof buf);
    if (strcmp(buf, want)) fail_msg("'%s' gave '%s', want '%s'", spec, buf, want);
    sift_chain_free(c);
}

static void bad(const char *spec, const sift_chain_env *env, const char *want_substr)
{
    sift_error err = {0};
    sift_chain *c = sift_chain_from_spec(spec, env, &err);
    if (c) fail_msg("'%s' parsed but should not", spec);
    if (!strstr(err.msg, want_substr)) fail_msg("'%s': message '%s' lacks '%s'", spec, err.msg, want_substr);
}

static void test_every_sampler_parses(void **state)
{
    (void)state;
    describe("greedy()", NULL, "greedy");
    describe(" top_k( 40 ) ; temp(0.8);dist(1234) ", NULL, "top-k -> temp -> dist");
    describe("top_p(0.9,1);min_p(0.1,1);typical(0.9,1);temp_ext(0.8,0.5,1.0);xtc(0.5,0.1,1,11);top_n_sigma(1.0);dist(3)",
             NULL, "top-p -> min-p -> typical -> temp-ext -> xtc -> top-n-sigma -> dist");
    describe("penalties(64,1.3,0.2,0.1);mirostat(1,5,0.1,100)", NULL, "penalties -> mirostat");
    describe("mirostat_v2(17,5,0.1)", NULL, "mirostat-v2");
    describe("dry(0.8,1.75,2,256,[12009],[5644],[14116],[16941 31217]);dist(42)", NULL, "dry -> dist");
    describe("dry(0.8,1.75,2,256,[1,2],[3]);dist(42)", NULL, "dry -> dist"); /* commas inside lists too */
    describe("logit_bias(15:-inf,42:2.5);adaptive_p(0.5,0.9,3)", NULL, "logit-bias -> adaptive-p");
    /* the reference's default chain: disabled links become no-ops named ?x */
    describe("penalties(64,1.0,0.0,0.0);top_k(40);typical(1.0,0);top_p(0.95,0);min_p(0.05,0);xtc(0.0,0.1,0,42);"
             "temp_ext(0.8,0.0,1.0);dist(42)",
             NULL, "?penalties -> top-k -> ?typical -> top-p -> min-p -> ?xtc -> temp-ext -> dist");
    describe("top_k();temp(1);top_p(1)", NULL, "?top-k -> ?temp -> ?top-p"); /* missing args are 0 */
    describe("", NULL, "");
    describe(";;", NULL, "");
}

static void test_seeds_from_env(void **state)
{
    (void)state;
    sift_chain_env env = {.n_vocab = 100, .vocab = NULL, .eot = SIFT_TOKEN_NULL, .default_seed = 4321};
    sift_chain *c = sift_chain_from_spec("dist()", &env, NULL);
    assert_int_equal(sift_chain_get_seed(c), 4321);
    sift_chain_free(c);
    c = sift_chain_from_spec("dist(-1)", &env, NULL);
    assert_int_not_equal(sift_chain_get_seed(c), SIFT_DEFAULT_SEED); /* drawn */
    sift_chain_free(c);
    c = sift_chain_from_spec("dist(4294967295)", &env, NULL);
    assert_non_null(c);
    sift_chain_free(c);
}

static void test_errors_name_the_column(void **state)
{
    (void)state;
    sift_chain_env env = {.n_vocab = 32000, .vocab = NULL, .eot = SIFT_TOKEN_NULL, .default_seed = 0};
    bad("top_k(40", &env, "col 9: ')' expected before the end");
    bad("topk(40)", &env, "col 1: unknown sampler 'topk'");
    bad("top_k(40) dist(1)", &env, "col 11: ';' expected between samplers");
    bad("top_k(4.5)", &env, "col 7: top_k: k must be an integer");
    bad("top_k(1,2)", &env, "col 9: top_k takes at most 1 argument, got 2");
    bad("dist(abc)", &env, "col 6: number expected");
    bad("dist(-2)", &env, "col 6: dist: seed must be an integer in [-1, 4294967295]");
    bad("top_p(0.9,-1)", &env, "col 11: top_p: min_keep must be an integer");
    bad("dry(0.8,1.75)", &env, "col 1: dry needs 4 numbers");
    bad("dry(0.8,1.75,2,64,[1 2],\"x\")", &env, "not both");
    bad("dry(0.8,1.75,2,64,\"\\n\")", &env, "col 19: dry: string breakers need a vocabulary");
    bad("dry(0.8,1.75,2,64,[1 99999])", &env, "col 19: dry: token 99999 is outside the vocabulary");
    bad("dry(0.8,1.75,2,64,[1 2)", &env, "col 23: token id or ']' expected");
    bad("dry(0.8,1.75,2,64,[1 2", &env, "col 19: unclosed '['");
    bad("dry(0.8,1.75,2,64,\"abc)", &env, "col 19: unterminated string");
    bad("dry(0.8,1.75,2,64,\"a\\q\")", &env, "col 21: unknown escape");
    bad("logit_bias(5)", &env, "col 12: logit_bias: entries are token:bias");
    bad("logit_bias(99999:1)", &env, "col 12: logit_bias: token 99999 is outside the vocabulary");
    bad("logit_bias(1.5:1)", &env, "col 12: token id must be an integer");
    bad("infill()", &env, "col 1: infill needs a vocabulary");
    bad("(", &env, "col 1: sampler name expected");
    bad("top_k 40", &env, "col 7: '(' expected after the sampler name");
    bad("greedy(1)", &env, "col 8: greedy takes at most 0 arguments");
    bad("temp([1])", &env, "col 6: temp: argument 1 must be a number");
    bad("top_k(40);;dist(1);x", &env, "col 21: '(' expected");
}

static void test_all_or_nothing(void **state)
{
    (void)state;
    sift_chain *c = sift_chain_new(sift_chain_default_params());
    assert_int_equal(sift_chain_add_spec(c, "top_k(5)", NULL, NULL), SIFT_OK);
    sift_error err = {0};
    assert_int_equal(sift_chain_add_spec(c, "top_p(0.9,1);temp(0.5);dist(", NULL, &err), SIFT_E_PARSE);
    assert_int_equal(sift_chain_n(c), 1); /* nothing of the bad spec was added */
    assert_int_equal(sift_chain_add_spec(c, "dist(1)", NULL, NULL), SIFT_OK);
    assert_int_equal(sift_chain_n(c), 2);
    assert_int_equal(sift_chain_add_spec(NULL, "dist(1)", NULL, &err), SIFT_E_INVAL);
    sift_chain_free(c);
}

/* a toy vocabulary for string breakers, infill and ignore_eos */
static const char *const toy_piece[] = {"a", "b", "ab", ":", "\n", "<eos>"};
static uint32_t toy_len[6] = {1, 1, 2, 1, 1, 5};
static uint8_t toy_attr[6] = {1, 1, 1, 1, 1, SIFT_TOKEN_ATTR_CONTROL | SIFT_TOKEN_ATTR_EOG};
static int32_t toy_tokenize(void *ctx, const char *text, size_t len, sift_token *out, int32_t cap)
{
    (void)ctx;
    int32_t n = 0;
    for (size_t i = 0; i < len; i++) {
        sift_token t = -1;
        for (int k = 0; k < 5; k++)
            if (toy_len[k] == 1 && toy_piece[k][0] == text[i]) t = k;
        if (t < 0) return 0;
        if (n < cap) out[n] = t;
        n++;
    }
    return n;
}
static const sift_vocab_view toy = {6, toy_piece, toy_len, toy_attr, toy_tokenize, NULL, 0};

static void test_vocab_items(void **state)
{
    (void)state;
    sift_chain_env env = {.n_vocab = 6, .vocab = &toy, .eot = 5, .default_seed = 1};
    describe("dry(0.8,1.75,2,64,\"\\n\",\":\",\"\\\"\",\"*\",\"ab\");dist(1)", &env, "dry -> dist");
    describe("top_k(3);infill();dist(2)", &env, "top-k -> infill -> dist");
}

/* ---- llama.cpp common's way ------------------------------------------------------------- */

static void params_chain(const sift_sampling_params *p, const sift_chain_env *env, const char *want)
{
    sift_error err = {0};
    sift_chain *c = sift_chain_from_params(p, env, &err);
    if (!c) fail_msg("params: %s", err.msg);
    char buf[512];
    sift_chain_describe(c, buf, sizeof buf);
    if (strcmp(buf, want)) fail_msg("params chain '%s', want '%s'", buf, want);
    sift_chain_free(c);
}

static void test_defaults_match_common(void **state)
{
    (void)state;
    sift_sampling_params p = sift_sampling_default_params();
    assert_int_equal(p.seed, SIFT_DEFAULT_SEED);
    assert_int_equal(p.top_k, 40);
    assert_true(p.top_p == 0.95f && p.min_p == 0.05f && p.temp == 0.8f && p.typ_p == 1.0f);
    assert_true(p.xtc_probability == 0.0f && p.xtc_threshold == 0.1f && p.top_n_sigma == -1.0f);
    assert_int_equal(p.penalty_last_n, 64);
    assert_true(p.penalty_repeat == 1.0f && p.penalty_freq == 0.0f && p.penalty_present == 0.0f);
    assert_true(p.dry_multiplier == 0.0f && p.dry_base == 1.75f);
    assert_int_equal(p.dry_allowed_length, 2);
    assert_int_equal(p.dry_penalty_last_n, 64);
    assert_int_equal(p.n_dry_sequence_breakers, 4);
    assert_string_equal(p.dry_sequence_breakers[0], "\n");
    assert_string_equal(p.dry_sequence_breakers[3], "*");
    assert_true(p.mirostat == 0 && p.mirostat_tau == 5.0f && p.mirostat_eta == 0.1f);
    assert_true(p.adaptive_target == -1.0f && p.adaptive_decay == 0.9f);
    assert_int_equal(p.min_keep, 0);
    assert_int_equal(p.n_samplers, 9);
    char order[16] = "";
    for (int i = 0; i < p.n_samplers; i++) order[i] = sift_sampler_type_char(p.samplers[i]);
    assert_string_equal(order, "edskypmxt");
    params_chain(&p, NULL, "?penalties -> ?dry -> ?top-n-sigma -> top-k -> ?typical -> top-p -> min-p -> ?xtc -> temp-ext -> dist");
    char buf[600];
    sift_sampling_params_print(&p, buf, sizeof buf);
    assert_non_null(strstr(buf, "top_k = 40, top_p = 0.950, min_p = 0.050"));
}

static void test_default_chain_reproduces_reference(void **state)
{
    (void)state;
    uint32_t nv = 0, nvec = 0;
    float *x = sift_test_ref_logits(32000, &nv, &nvec);
    assert_non_null(x);
    const char *shared = getenv("SIFT_SHARED");
    char path[1024];
    snprintf(path, sizeof path, "%s/reference/sampling/v32000/default_s42.txt", shared ? shared : "../shared");
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    sift_sampling_params p = sift_sampling_default_params();
    p.seed = 42;
    sift_chain_env env = {.n_vocab = (int32_t)nv, .vocab = NULL, .eot = SIFT_TOKEN_NULL, .default_seed = 0};
    sift_chain *c = sift_chain_from_params(&p, &env, NULL);
    for (int t = 0; t < 256; t++) {
        int want;
        assert_int_equal(fscanf(f, "%d", &want), 1);
        assert_int_equal(sift_chain_sample(c, x + (size_t)(t % (int)nvec) * nv, (int32_t)nv), want);
    }
    fclose(f);
    sift_chain_free(c);
    free(x);
}

static void test_sampler_names_and_letters(void **state)
{
    (void)state;
    sift_sampling_params p = sift_sampling_default_params();
    sift_error err = {0};
    assert_int_equal(sift_sampling_set_samplers(&p, "TOP-K; nucleus;typ;temp;minp;top_n_sigma;typical-p;penalties;dry;xtc", &err), SIFT_OK);
    char order[16] = "";
    for (int i = 0; i < p.n_samplers; i++) order[i] = sift_sampler_type_char(p.samplers[i]);
    assert_string_equal(order, "kpytmsyedx");
    assert_int_equal(sift_sampling_set_samplers(&p, "top_k;bogus", &err), SIFT_E_PARSE);
    assert_non_null(strstr(err.msg, "col 7: unknown sampler 'bogus'"));
    assert_int_equal(p.n_samplers, 10); /* unchanged on error */
    assert_int_equal(sift_sampling_set_sampler_chars(&p, "kt", &err), SIFT_OK);
    params_chain(&p, NULL, "top-k -> temp-ext -> dist");
    assert_int_equal(sift_sampling_set_sampler_chars(&p, "kz", &err), SIFT_E_PARSE);
    assert_non_null(strstr(err.msg, "col 2: unknown sampler letter 'z'"));
    /* adaptive_p replaces dist and always goes last */
    assert_int_equal(sift_sampling_set_samplers(&p, "adaptive_p;top_k", &err), SIFT_OK);
    params_chain(&p, NULL, "top-k -> adaptive-p");
    assert_string_equal(sift_sampler_type_name(SIFT_SAMPLER_TYPICAL_P), "typ_p");
    assert_string_equal(sift_sampler_type_name((sift_sampler_type)99), "");
}

static void test_mirostat_and_bias_chains(void **state)
{
    (void)state;
    sift_sampling_params p = sift_sampling_default_params();
    p.mirostat = 1;
    params_chain(&p, NULL, "temp -> mirostat");
    p.mirostat = 2;
    params_chain(&p, NULL, "temp -> mirostat-v2");
    p.mirostat = 3;
    sift_error err = {0};
    assert_null(sift_chain_from_params(&p, NULL, &err));
    assert_non_null(strstr(err.msg, "mirostat must be 0, 1 or 2"));
    p = sift_sampling_default_params();
    const sift_logit_bias lb[] = {{3, -INFINITY}};
    p.logit_bias = lb;
    p.n_logit_bias = 1;
    assert_int_equal(sift_sampling_set_samplers(&p, "top_k", NULL), SIFT_OK);
    params_chain(&p, NULL, "logit-bias -> top-k -> dist");
}

/* a spec and sampling params as items: kinds, resolved arguments, seeds, columns */
static void test_chain_items(void **state)
{
    (void)state;
    const sift_chain_env env = {.n_vocab = 100, .vocab = NULL, .eot = SIFT_TOKEN_NULL, .default_seed = 9};
    sift__chain_items items;
    sift_error err = {0};
    assert_int_equal(sift__chain_items_parse(" top_k(40);top_p(0.9);mirostat(-1,5,0.1,100);logit_bias(3:-inf,7:1.5);"
                                             "dry(0.8,1.75,2,64,[1 2],[3]);dist()",
                                             &env, &items, &err),
                     SIFT_OK);
    assert_int_equal(items.n, 6);
    assert_int_equal(items.v[0].kind, SIFT__ITEM_TOP_K);
    assert_int_equal(items.v[0].col, 2);
    assert_int_equal(items.v[0].i[0], 40);
    assert_int_equal(items.v[1].kind, SIFT__ITEM_TOP_P);
    assert_true(items.v[1].f[0] == 0.9f && items.v[1].i[0] == 0); /* min_keep defaults to 0 */
    assert_int_equal(items.v[2].seed, SIFT_DEFAULT_SEED);        /* -1: the default seed */
    assert_true(items.v[2].f[0] == 5.0f && items.v[2].f[1] == 0.1f && items.v[2].i[0] == 100);
    assert_int_equal(items.v[3].n_bias, 2);
    assert_true(items.v[3].bias[0].token == 3 && isinf(items.v[3].bias[0].bias) && items.v[3].bias[1].bias == 1.5f);
    assert_false(items.v[4].strings);
    assert_int_equal(items.v[4].n_seqs, 2);
    assert_true(items.v[4].lens[0] == 2 && items.v[4].seqs[0][1] == 2 && items.v[4].seqs[1][0] == 3);
    assert_int_equal(items.v[5].seed, 9); /* dist(): env->default_seed */
    assert_string_equal(sift__item_name(items.v[5].kind), "dist");
    /* the tail moves out whole */
    sift__chain_items tail;
    assert_int_equal(sift__chain_items_split(&items, 4, &tail), SIFT_OK);
    assert_int_equal(items.n, 4);
    assert_int_equal(tail.n, 2);
    assert_int_equal(tail.v[0].kind, SIFT__ITEM_DRY);
    sift_chain *c = sift_chain_new(sift_chain_default_params());
    assert_int_equal(sift__chain_add_items(c, &tail, 0, tail.n, &env, &err), SIFT_OK);
    char buf[128];
    sift_chain_describe(c, buf, sizeof buf);
    assert_string_equal(buf, "dry -> dist");
    sift_chain_free(c);
    sift__chain_items_free(&tail);
    sift__chain_items_free(&items);

    /* a bad spec leaves no items */
    assert_int_equal(sift__chain_items_parse("top_k(40);top_p(", &env, &items, &err), SIFT_E_PARSE);
    assert_int_equal(items.n, 0);
    assert_null(items.v);
    assert_non_null(strstr(err.msg, "col"));

    /* sampling params: common_sampler_init's order, with the params' own seed */
    sift_sampling_params sp = sift_sampling_default_params();
    sp.seed = 77;
    assert_int_equal(sift__chain_items_from_params(&sp, &env, &items, &err), SIFT_OK);
    static const sift__item_kind want[] = {SIFT__ITEM_PENALTIES, SIFT__ITEM_DRY,   SIFT__ITEM_TOP_N_SIGMA,
                                           SIFT__ITEM_TOP_K,     SIFT__ITEM_TYPICAL, SIFT__ITEM_TOP_P,
                                           SIFT__ITEM_MIN_P,     SIFT__ITEM_XTC,   SIFT__ITEM_TEMP_EXT,
                                           SIFT__ITEM_DIST};
    assert_int_equal(items.n, sizeof want / sizeof *want);
    for (size_t i = 0; i < items.n; i++) {
        assert_int_equal(items.v[i].kind, want[i]);
        assert_int_equal(items.v[i].col, 0);
    }
    assert_true(items.v[1].strings && items.v[1].n_strs == 4);
    assert_int_equal(items.v[7].seed, 77);
    assert_int_equal(items.v[9].seed, 77);
    assert_true(items.v[8].f[0] == 0.8f && items.v[8].f[1] == 0.0f && items.v[8].f[2] == 1.0f);
    sift__chain_items_free(&items);
    sp.mirostat = 1;
    assert_int_equal(sift__chain_items_from_params(&sp, &env, &items, &err), SIFT_OK);
    assert_int_equal(items.n, 2);
    assert_true(items.v[0].kind == SIFT__ITEM_TEMP && items.v[1].kind == SIFT__ITEM_MIROSTAT && items.v[1].i[0] == 100);
    sift__chain_items_free(&items);
    sp.mirostat = 7;
    assert_int_equal(sift__chain_items_from_params(&sp, &env, &items, &err), SIFT_E_INVAL);
    assert_int_equal(items.n, 0);
}

static void test_vocab_dependent_params(void **state)
{
    (void)state;
    sift_sampling_params p = sift_sampling_default_params();
    sift_error err = {0};
    p.ignore_eos = true;
    assert_null(sift_chain_from_params(&p, NULL, &err));
    assert_non_null(strstr(err.msg, "ignore_eos needs the vocabulary"));
    sift_chain_env env = {.n_vocab = 6, .vocab = &toy, .eot = 5, .default_seed = 0};
    sift_chain *c = sift_chain_from_params(&p, &env, &err);
    assert_non_null(c);
    const float x[6] = {0, 0, 0, 0, 0, 20}; /* EOG would win, but is banned */
    for (int t = 0; t < 50; t++) assert_int_not_equal(sift_chain_sample(c, x, 6), 5);
    sift_chain_free(c);
    p = sift_sampling_default_params();
    p.dry_multiplier = 0.8f;
    assert_null(sift_chain_from_params(&p, NULL, &err));
    assert_non_null(strstr(err.msg, "DRY sequence breakers need the vocabulary"));
    params_chain(&p, &env, "?penalties -> dry -> ?top-n-sigma -> top-k -> ?typical -> top-p -> min-p -> ?xtc -> temp-ext -> dist");
    assert_int_equal(sift_sampling_set_samplers(&p, "infill", NULL), SIFT_OK);
    assert_null(sift_chain_from_params(&p, NULL, &err));
    params_chain(&p, &env, "infill -> dist");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_sampler_parses),
        cmocka_unit_test(test_seeds_from_env),
        cmocka_unit_test(test_errors_name_the_column),
        cmocka_unit_test(test_all_or_nothing),
        cmocka_unit_test(test_vocab_items),
        cmocka_unit_test(test_defaults_match_common),
        cmocka_unit_test(test_default_chain_reproduces_reference),
        cmocka_unit_test(test_sampler_names_and_letters),
        cmocka_unit_test(test_mirostat_and_bias_chains),
        cmocka_unit_test(test_vocab_dependent_params),
        cmocka_unit_test(test_chain_items),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
