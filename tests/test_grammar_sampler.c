/*
 * test_grammar_sampler.c - the grammar sampler on hand-made vocabularies.
 *
 * Semantics (llama.cpp's): which tokens apply leaves, EOG exactly where the grammar can end,
 * accept by bytes with characters split across tokens, token references, the dead state,
 * lazy grammars with word / pattern / token triggers, reset and clone, the rejection
 * strategy. Machinery: the cached token masks of the engine against the reference matcher
 * on every token of synthetic vocabularies along random walks; the SIMD masking passes
 * against the scalar one; and no allocation at all once the caches are warm.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/cpu.h"
#include "grammar/compiler.h"
#include "grammar/mask.h"
#include "grammar/mask_apply.h"
#include "grammar/pos_equiv.h"
#include "grammar_util.h"

/* allowed[i] after applying s to the whole vocabulary (uses the bitset path) and to each
 * token alone (the per-candidate path); both must agree */
static void allowed_set(sift_sampler *s, int n, bool *allowed)
{
    sift_candidates c;
    assert_int_equal(sift_candidates_init(&c, (size_t)(n > 64 ? n : 64)), SIFT_OK);
    /* pad to more than the per-candidate threshold so the bitset path runs */
    size_t size = (size_t)(n > 64 ? n : 64);
    for (size_t i = 0; i < size; i++) {
        c.id[i] = (sift_token)(i % (size_t)n);
        c.logit[i] = 0.0f;
    }
    c.size = size;
    sift_sampler_apply(s, &c);
    for (int i = 0; i < n; i++) allowed[i] = c.logit[i] != -INFINITY;
    for (size_t i = (size_t)n; i < size; i++) assert_int_equal(c.logit[i] != -INFINITY, allowed[i % (size_t)n]);
    sift_candidates one;
    assert_int_equal(sift_candidates_init(&one, 1), SIFT_OK);
    for (int i = 0; i < n; i++) {
        one.id[0] = i;
        one.logit[0] = 1.0f;
        one.size = 1;
        sift_sampler_apply(s, &one);
        if ((one.logit[0] != -INFINITY) != allowed[i]) fail_msg("token %d: bitset path %d, single path %d", i, allowed[i], !allowed[i]);
        assert_int_equal(sift_grammar_sampler_allows(s, i), allowed[i]);
    }
    sift_candidates_free(&one);
    sift_candidates_free(&c);
}

static void expect_allowed(sift_sampler *s, int n, const char *want /* '1'/'0' per token */)
{
    bool a[64];
    allowed_set(s, n, a);
    for (int i = 0; i < n; i++)
        if (a[i] != (want[i] == '1')) fail_msg("token %d: allowed %d, want %c (want %s)", i, a[i], want[i], want);
}

static sift_sampler *make(const gt_vocab *v, const char *gbnf)
{
    sift_error err = {0};
    sift_sampler *s = sift_sampler_init_grammar(&v->view, gbnf, NULL, &err);
    if (!s) fail_msg("init: %s", err.msg);
    return s;
}

static void test_basic_semantics(void **state)
{
    (void)state;
    /*                      0     1     2     3      4      5      6      7    8   9            10       11 */
    const char *t[] = {"{", "}", "a", "ab", "{a", "a}", "}{", "1", "", "x\0y", "</s>", " "};
    const int lens[] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 3, -1, -1};
    uint8_t attr[12];
    for (int i = 0; i < 12; i++) attr[i] = SIFT_TOKEN_ATTR_NORMAL;
    attr[10] = SIFT_TOKEN_ATTR_CONTROL | SIFT_TOKEN_ATTR_EOG;
    gt_vocab v;
    gt_vocab_make(&v, t, lens, attr, 12);
    sift_sampler *s = make(&v, "root ::= \"{\" [a-z]+ \"}\"\n");
    assert_string_equal(sift_sampler_name(s), "grammar");
    assert_int_equal(sift_grammar_sampler_status(s), SIFT_GRAMMAR_ACTIVE);
    expect_allowed(s, 12, "100010000000");
    sift_sampler_accept(s, 0);
    expect_allowed(s, 12, "001101000000");
    sift_sampler_accept(s, 2);
    expect_allowed(s, 12, "011101000000");
    sift_sampler_accept(s, 5); /* "a}": the grammar is complete */
    assert_int_equal(sift_grammar_sampler_status(s), SIFT_GRAMMAR_DONE);
    expect_allowed(s, 12, "000000000010");
    sift_sampler_accept(s, 10); /* EOG where the grammar can end: nothing changes */
    assert_int_equal(sift_grammar_sampler_status(s), SIFT_GRAMMAR_DONE);
    expect_allowed(s, 12, "000000000010");
    /* reset: back to the start */
    sift_sampler_reset(s);
    expect_allowed(s, 12, "100010000000");
    /* a token the grammar cannot take: dead, only EOG allowed (llama.cpp aborts here) */
    sift_sampler_accept(s, 7);
    assert_int_equal(sift_grammar_sampler_status(s), SIFT_GRAMMAR_DEAD);
    expect_allowed(s, 12, "000000000010");
    sift_sampler_reset(s);
    sift_sampler_accept(s, 10); /* EOG where the grammar cannot end: dead too */
    assert_int_equal(sift_grammar_sampler_status(s), SIFT_GRAMMAR_DEAD);
    sift_sampler_free(s);

    /* an empty grammar text: a no-op sampler, as in llama.cpp */
    sift_error err = {0};
    s = sift_sampler_init_grammar(&v.view, "", NULL, &err);
    assert_non_null(s);
    assert_string_equal(sift_sampler_name(s), "?grammar");
    sift_sampler_free(s);
    /* errors */
    assert_null(sift_sampler_init_grammar(NULL, "root ::= \"a\"", NULL, &err));
    assert_int_equal(err.status, SIFT_E_INVAL);
    assert_null(sift_sampler_init_grammar(&v.view, "root ::= x", NULL, &err));
    assert_int_equal(err.status, SIFT_E_PARSE);
    assert_null(sift_sampler_init_grammar(&v.view, "root ::= <[12]>", NULL, &err));
    assert_int_equal(err.status, SIFT_E_PARSE);
    gt_vocab_free(&v);
}

static void test_utf8_across_tokens(void **state)
{
    (void)state;
    /*                    0       1       2           3    4        5       6           7 */
    const char *t[] = {"\xC3", "\xA9", "\xC3\xA9", "!", "\xA9!", "\xC0", "\xED\xA0", "\xE2\x82"};
    gt_vocab v;
    gt_vocab_make(&v, t, NULL, NULL, 8);
    sift_sampler *s = make(&v, "root ::= \"\xC3\xA9\" \"!\"\n");
    expect_allowed(s, 8, "10100000");
    sift_sampler_accept(s, 0);
    expect_allowed(s, 8, "01001000");
    sift_sampler_accept(s, 1);
    expect_allowed(s, 8, "00010000");
    sift_sampler_free(s);
    /* strict UTF-8: overlong leads and surrogates are never text, even for [^a] */
    s = make(&v, "root ::= [^a]*\n");
    expect_allowed(s, 8, "10110001");
    sift_sampler_accept(s, 7); /* an unfinished 3-byte character: only a continuation now */
    expect_allowed(s, 8, "01001000");
    sift_sampler_free(s);
    gt_vocab_free(&v);
}

static void test_token_references(void **state)
{
    (void)state;
    const char *t[] = {"a", "b", "<think>", "</think>", "x", "</s>"};
    uint8_t attr[] = {1, 1, SIFT_TOKEN_ATTR_CONTROL, SIFT_TOKEN_ATTR_CONTROL, 1, SIFT_TOKEN_ATTR_CONTROL | SIFT_TOKEN_ATTR_EOG};
    gt_vocab v;
    gt_vocab_make(&v, t, NULL, attr, 6);
    /* a thinking block: <think> anything-but-</think> </think> then "x" */
    sift_sampler *s = make(&v, "root ::= <think> (!<[3]>)* </think> \"x\"\n");
    expect_allowed(s, 6, "001000");
    sift_sampler_accept(s, 2);
    expect_allowed(s, 6, "111110"); /* any token but </think> (and EOG, governed by the end) */
    sift_sampler_accept(s, 0);
    sift_sampler_accept(s, 2);
    sift_sampler_accept(s, 3);
    expect_allowed(s, 6, "000010");
    sift_sampler_accept(s, 4);
    expect_allowed(s, 6, "000001");
    sift_sampler_free(s);
    /* a text equal to a special token's text does not match the token element */
    s = make(&v, "root ::= \"<think>\"\n");
    expect_allowed(s, 6, "001000"); /* by its text, as llama.cpp: pieces are matched as text */
    sift_sampler_free(s);
    gt_vocab_free(&v);
}

static void test_lazy_triggers(void **state)
{
    (void)state;
    /*                    0        1     2       3     4    5      6          7         8 */
    const char *t[] = {"hello", " CA", "LL[", "12", "]", "x", "<tool>", "{\"a\"", "}"};
    gt_vocab v;
    gt_vocab_make(&v, t, NULL, NULL, 9);
    const char *gbnf = "root ::= \"CALL[\" [0-9]+ \"]\"\n";
    sift_grammar_params p = sift_grammar_default_params();
    p.lazy = true;
    const char *words[] = {"CALL"};
    p.trigger_words = words;
    p.n_trigger_words = 1;
    sift_error err = {0};
    sift_sampler *s = sift_sampler_init_grammar_ex(&v.view, gbnf, strlen(gbnf), &p, &err);
    assert_non_null(s);
    assert_int_equal(sift_grammar_sampler_status(s), SIFT_GRAMMAR_AWAITING_TRIGGER);
    expect_allowed(s, 9, "111111111"); /* no constraint yet */
    sift_sampler_accept(s, 0);
    sift_sampler_accept(s, 1);
    assert_int_equal(sift_grammar_sampler_status(s), SIFT_GRAMMAR_AWAITING_TRIGGER);
    sift_sampler_accept(s, 2); /* "hello CALL[": triggered at "CALL", the rest replayed */
    assert_int_equal(sift_grammar_sampler_status(s), SIFT_GRAMMAR_ACTIVE);
    expect_allowed(s, 9, "000100000");
    sift_sampler_accept(s, 3);
    expect_allowed(s, 9, "000110000");
    sift_sampler_accept(s, 4);
    assert_int_equal(sift_grammar_sampler_status(s), SIFT_GRAMMAR_DONE);
    /* reset: waiting again */
    sift_sampler_reset(s);
    assert_int_equal(sift_grammar_sampler_status(s), SIFT_GRAMMAR_AWAITING_TRIGGER);
    sift_sampler_free(s);

    /* a pattern: the grammar starts at its first capturing group */
    const char *g2 = "root ::= \"{\\\"a\\\"\" \"}\"\n";
    p = sift_grammar_default_params();
    p.lazy = true;
    const char *pats[] = {"<tool>(\\{)"};
    p.trigger_patterns = pats;
    p.n_trigger_patterns = 1;
    s = sift_sampler_init_grammar_ex(&v.view, g2, strlen(g2), &p, &err);
    if (!s) fail_msg("%s", err.msg);
    sift_sampler_accept(s, 5);
    sift_sampler_accept(s, 6);
    assert_int_equal(sift_grammar_sampler_status(s), SIFT_GRAMMAR_AWAITING_TRIGGER);
    sift_sampler_accept(s, 7); /* "x<tool>{"a"": the group starts at '{' */
    assert_int_equal(sift_grammar_sampler_status(s), SIFT_GRAMMAR_ACTIVE);
    expect_allowed(s, 9, "000000001");
    sift_sampler_free(s);

    /* a full pattern (^...$) must match all of the output; a token trigger */
    p = sift_grammar_default_params();
    p.lazy = true;
    const char *full[] = {"^x<tool>$"};
    p.trigger_patterns = full;
    p.n_trigger_patterns = 1;
    const char *g3 = "root ::= \"x<tool>\" \"{\\\"a\\\"\" \"}\"\n";
    s = sift_sampler_init_grammar_ex(&v.view, g3, strlen(g3), &p, &err);
    assert_non_null(s);
    sift_sampler_accept(s, 5);
    assert_int_equal(sift_grammar_sampler_status(s), SIFT_GRAMMAR_AWAITING_TRIGGER);
    sift_sampler_accept(s, 6);
    assert_int_equal(sift_grammar_sampler_status(s), SIFT_GRAMMAR_ACTIVE);
    expect_allowed(s, 9, "000000010");
    sift_sampler_free(s);

    p = sift_grammar_default_params();
    p.lazy = true;
    sift_token tt[] = {6};
    p.trigger_tokens = tt;
    p.n_trigger_tokens = 1;
    s = sift_sampler_init_grammar_ex(&v.view, g3, strlen(g3), &p, &err);
    assert_non_null(s);
    sift_sampler_accept(s, 0);
    sift_sampler_accept(s, 6); /* the trigger token itself is the first token of the grammar */
    assert_int_equal(sift_grammar_sampler_status(s), SIFT_GRAMMAR_DEAD); /* "<tool>" alone does not start "x<tool>" */
    sift_sampler_free(s);

    /* a bad pattern is a parse error naming its offset */
    const char *bad[] = {"(unclosed"};
    p = sift_grammar_default_params();
    p.lazy = true;
    p.trigger_patterns = bad;
    p.n_trigger_patterns = 1;
    assert_null(sift_sampler_init_grammar_ex(&v.view, g3, strlen(g3), &p, &err));
    assert_int_equal(err.status, SIFT_E_PARSE);
    assert_non_null(strstr(err.msg, "pattern 0"));
    gt_vocab_free(&v);
}

static void test_clone_and_chain(void **state)
{
    (void)state;
    const char *t[] = {"a", "b", "c", "</s>"};
    uint8_t attr[] = {1, 1, 1, SIFT_TOKEN_ATTR_EOG | SIFT_TOKEN_ATTR_CONTROL};
    gt_vocab v;
    gt_vocab_make(&v, t, NULL, attr, 4);
    sift_sampler *s = make(&v, "root ::= \"a\" \"b\"{1,3}\n");
    sift_sampler_accept(s, 0);
    sift_sampler *c = sift_sampler_clone(s);
    assert_non_null(c);
    expect_allowed(c, 4, "0100");
    sift_sampler_accept(c, 1);
    expect_allowed(c, 4, "0101");
    expect_allowed(s, 4, "0100"); /* the original did not move */
    sift_sampler_free(c);

    /* rejection vs grammar-first through a chain: same token whenever the first pick is
     * allowed, and always a token the grammar allows */
    for (int mode = 0; mode < 2; mode++) {
        sift_sampler_reset(s);
        sift_chain *chain = sift_chain_new(sift_chain_default_params());
        assert_int_equal(sift_chain_add(chain, sift_sampler_init_dist(7)), SIFT_OK);
        float logits[4] = {0.1f, 3.0f, 0.5f, 2.0f};
        bool refused = false;
        sift_token tok = sift_grammar_chain_sample(s, chain, logits, 4, mode ? SIFT_GRAMMAR_REJECTION : SIFT_GRAMMAR_FIRST, &refused);
        assert_int_equal(tok, 0); /* only "a" is allowed at the start */
        tok = sift_grammar_chain_sample(s, chain, logits, 4, mode ? SIFT_GRAMMAR_REJECTION : SIFT_GRAMMAR_FIRST, &refused);
        assert_int_equal(tok, 1); /* then only "b" */
        for (int k = 0; k < 3; k++) {
            tok = sift_grammar_chain_sample(s, chain, logits, 4, mode ? SIFT_GRAMMAR_REJECTION : SIFT_GRAMMAR_FIRST, &refused);
            assert_true(tok == 1 || tok == 3); /* "b" (up to 3) or the end */
            if (!mode) assert_false(refused);
            if (tok == 3) break;
        }
        sift_chain_free(chain);
    }
    sift_sampler_free(s);
    gt_vocab_free(&v);
}


/* Regression (issue 12): when the grammar and the chain leave no token, nothing is sampled.
 * `root ::= "\x00"` (no token can hold a NUL) used to return an arbitrary token with NaN
 * probabilities; a complete grammar under ignore_eos (EOG biased to -inf) the same. */
static void test_no_allowed_token(void **state)
{
    (void)state;
    const char *t[] = {"x", "y", "z", "</s>"};
    uint8_t attr[] = {1, 1, 1, SIFT_TOKEN_ATTR_EOG | SIFT_TOKEN_ATTR_CONTROL};
    gt_vocab v;
    gt_vocab_make(&v, t, NULL, attr, 4);
    float logits[4] = {0.1f, 3.0f, 0.5f, 2.0f};
    for (int mode = 0; mode < 2; mode++) {
        const sift_grammar_mode m = mode ? SIFT_GRAMMAR_REJECTION : SIFT_GRAMMAR_FIRST;
        /* unsatisfiable: no token at all, the grammar stays active (an error for the caller) */
        sift_sampler *s = make(&v, "root ::= \"\\x00\"\n");
        sift_chain *chain = sift_chain_new(sift_chain_default_params());
        assert_int_equal(sift_chain_add(chain, sift_sampler_init_dist(3)), SIFT_OK);
        assert_int_equal(sift_grammar_chain_sample(s, chain, logits, 4, m, NULL), SIFT_TOKEN_NULL);
        assert_int_equal(sift_grammar_sampler_status(s), SIFT_GRAMMAR_ACTIVE);
        sift_chain_free(chain);
        sift_sampler_free(s);

        /* root ::= "x" | "y" with EOG suppressed: one token, then SIFT_TOKEN_NULL (done) */
        s = make(&v, "root ::= \"x\" | \"y\"\n");
        chain = sift_chain_new(sift_chain_default_params());
        const sift_logit_bias no_eos = {3, -INFINITY};
        assert_int_equal(sift_chain_add(chain, sift_sampler_init_logit_bias(4, 1, &no_eos)), SIFT_OK);
        assert_int_equal(sift_chain_add(chain, sift_sampler_init_dist(3)), SIFT_OK);
        sift_token tok = sift_grammar_chain_sample(s, chain, logits, 4, m, NULL);
        assert_true(tok == 0 || tok == 1);
        for (int k = 0; k < 4; k++) assert_int_equal(sift_grammar_chain_sample(s, chain, logits, 4, m, NULL), SIFT_TOKEN_NULL);
        assert_int_equal(sift_grammar_sampler_status(s), SIFT_GRAMMAR_DONE);
        sift_chain_free(chain);
        sift_sampler_free(s);
    }
    gt_vocab_free(&v);
}


/* The grammar compiler (compiler.c): one GBNF or schema text compiles once and is then a
 * cache hit (the same compiled grammar), samplers over it are independent matchers, the
 * cache keeps the least recently used out first, and the compiler may be freed before the
 * samplers and grammars made with it. */
static void test_compiler(void **state)
{
    (void)state;
    const char *t[] = {"a", "b", "ab", "{", "}", "\"", "x", "</s>"};
    uint8_t attr[] = {1, 1, 1, 1, 1, 1, 1, SIFT_TOKEN_ATTR_EOG | SIFT_TOKEN_ATTR_CONTROL};
    gt_vocab v;
    gt_vocab_make(&v, t, NULL, attr, 8);
    sift_error err = {0};
    sift_grammar_compiler_params p = sift_grammar_compiler_default_params();
    p.cache_grammars = 2;
    sift_grammar_compiler *c = sift_grammar_compiler_new(&v.view, &p, &err);
    assert_non_null(c);
    const char *ab = "root ::= \"a\" \"b\"*\n";
    sift_compiled_grammar *g1 = sift_grammar_compile(c, ab, strlen(ab), NULL, &err);
    sift_compiled_grammar *g2 = sift_grammar_compile(c, ab, strlen(ab), "root", &err);
    assert_non_null(g1);
    assert_ptr_equal(g1, g2);
    sift_grammar_compiler_stats st;
    sift_grammar_compiler_get_stats(c, &st);
    assert_int_equal(st.compiles, 1);
    assert_int_equal(st.cache_hits, 1);
    assert_int_equal(st.cached, 1);
    /* two matchers over one grammar: each has its own parse state */
    sift_sampler *s1 = sift_sampler_init_grammar_compiled(g1, NULL, &err), *s2 = sift_sampler_init_grammar_compiled(g2, NULL, &err);
    assert_non_null(s1);
    assert_non_null(s2);
    expect_allowed(s1, 8, "10100000");
    sift_sampler_accept(s1, 0);
    expect_allowed(s1, 8, "01000001");
    expect_allowed(s2, 8, "10100000");
    /* another root is another key; a JSON schema is keyed by its text and flags */
    const char *two = "root ::= x\nx ::= \"x\"\n";
    sift_compiled_grammar *gx = sift_grammar_compile(c, two, strlen(two), "x", &err);
    assert_non_null(gx);
    assert_ptr_not_equal(gx, g1);
    const char *schema = "{\"type\": \"object\", \"additionalProperties\": false}";
    sift_compiled_grammar *j1 = sift_grammar_compile_json_schema(c, schema, strlen(schema), 0, &err);
    assert_non_null(j1);
    sift_grammar_compiler_get_stats(c, &st);
    assert_int_equal(st.compiles, 3);
    assert_int_equal(st.evictions, 1); /* two slots: the least recently used (ab) left */
    sift_compiled_grammar *j2 = sift_grammar_compile_json_schema(c, schema, strlen(schema), 0, &err);
    assert_ptr_equal(j1, j2);
    sift_compiled_grammar *j3 = sift_grammar_compile_json_schema(c, schema, strlen(schema), SIFT_JSON_SCHEMA_LLAMA, &err);
    assert_non_null(j3);
    assert_ptr_not_equal(j1, j3);
    sift_sampler *sj = sift_sampler_init_grammar_compiled(j1, NULL, &err);
    assert_non_null(sj);
    expect_allowed(sj, 8, "00010000");
    /* errors are values; an evicted grammar lives on in its samplers; the compiler may go first */
    assert_null(sift_grammar_compile(c, "root ::= (", 10, NULL, &err));
    assert_int_equal(err.status, SIFT_E_PARSE);
    assert_null(sift_grammar_compile_json_schema(c, "{", 1, 0, &err));
    /* the compiler's parse is the converter's check: its failures read as the converter's */
    const char *cyc = "{\"anyOf\":[{\"$ref\":\"#\"},{\"type\":\"null\"}]}";
    assert_null(sift_grammar_compile_json_schema(c, cyc, strlen(cyc), 0, &err));
    assert_int_equal(err.status, SIFT_E_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "$ref cycle refers back to itself"));
    const char *big = "{\"type\":\"string\",\"pattern\":\"^(a{0,1000}){0,1000}$\"}";
    assert_null(sift_grammar_compile_json_schema(c, big, strlen(big), 0, &err));
    assert_int_equal(err.status, SIFT_E_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "over a limit of the GBNF parser ("));
    assert_null(sift_grammar_compile(c, "", 0, NULL, &err));
    assert_int_equal(err.status, SIFT_E_INVAL);
    sift_compiled_grammar *g3 = sift_grammar_compile(c, ab, strlen(ab), NULL, &err); /* evicted above: compiled again */
    assert_ptr_not_equal(g3, NULL);
    sift_grammar_compiler_get_stats(c, &st);
    assert_int_equal(st.compiles, 5);
    assert_int_equal(st.cache_hits, 2);
    sift_grammar_compiler_free(c);
    sift_compiled_grammar_free(g1);
    sift_compiled_grammar_free(g2);
    sift_compiled_grammar_free(g3);
    sift_compiled_grammar_free(gx);
    sift_compiled_grammar_free(j1);
    sift_compiled_grammar_free(j2);
    sift_compiled_grammar_free(j3);
    sift_sampler_accept(s1, 1);
    expect_allowed(s1, 8, "01000001");
    sift_sampler *s3 = sift_sampler_clone(s2);
    sift_sampler_free(s1);
    sift_sampler_free(s2);
    sift_sampler_accept(sj, 3);
    expect_allowed(sj, 8, "00001000");
    expect_allowed(s3, 8, "10100000");
    sift_sampler_free(sj);
    sift_sampler_free(s3);
    gt_vocab_free(&v);
}

/* The vocabulary trie is built once per distinct vocabulary and shared (issue 12): equal
 * views (even separate copies) get the same default compiler (vocab_cache.c), a different one its own, and a
 * grammar sampler over a shared one still masks correctly after the others are gone. */
static void test_vocab_shared(void **state)
{
    (void)state;
    const char *t[] = {"a", "b", "ab", "</s>"};
    const char *u[] = {"a", "b", "ba", "</s>"};
    uint8_t attr[] = {1, 1, 1, SIFT_TOKEN_ATTR_EOG | SIFT_TOKEN_ATTR_CONTROL};
    gt_vocab v1, v2, w;
    gt_vocab_make(&v1, t, NULL, attr, 4);
    gt_vocab_make(&v2, t, NULL, attr, 4);
    gt_vocab_make(&w, u, NULL, attr, 4);
    sift_error err = {0};
    sift_grammar_compiler *a = sift__gx_compiler_acquire(&v1.view, &err), *b = sift__gx_compiler_acquire(&v2.view, &err);
    sift_grammar_compiler *c = sift__gx_compiler_acquire(&w.view, &err);
    assert_non_null(a);
    assert_ptr_equal(a, b);
    assert_ptr_not_equal(a, c);
    /* identities (sift_vocab_view.identity): a view naming one is found by it alone, not by
     * its texts - the texts of a named view are not even read (here: w's texts under v2's
     * identity, a view that breaks the contract, to show which one decides) */
    v1.view.identity = 5;
    v2.view.identity = 6;
    sift_grammar_compiler *a5 = sift__gx_compiler_acquire(&v1.view, &err); /* by contents: slot a, now "5" */
    sift_grammar_compiler *a6 = sift__gx_compiler_acquire(&v2.view, &err); /* by contents: slot a, now "6" */
    w.view.identity = 6;
    sift_grammar_compiler *c6 = sift__gx_compiler_acquire(&w.view, &err);
    w.view.identity = 7;
    sift_grammar_compiler *c7 = sift__gx_compiler_acquire(&w.view, &err); /* by contents: slot c */
    assert_ptr_equal(a5, a);
    assert_ptr_equal(a6, a);
    assert_ptr_equal(c6, a);
    assert_ptr_equal(c7, c);
    sift__gx_compiler_release(a5);
    sift__gx_compiler_release(a6);
    sift__gx_compiler_release(c6);
    sift__gx_compiler_release(c7);
    v1.view.identity = v2.view.identity = w.view.identity = 0;
    sift__gx_compiler_release(a);
    sift__gx_compiler_release(b);
    sift__gx_compiler_release(c);
    sift_sampler *s1 = make(&v1, "root ::= \"ab\"\n"), *s2 = make(&v2, "root ::= \"b\"\n");
    sift_sampler_free(s1);
    expect_allowed(s2, 4, "0100");
    sift_sampler_accept(s2, 1);
    expect_allowed(s2, 4, "0001");
    sift_sampler_free(s2);
    gt_vocab_free(&v1);
    gt_vocab_free(&v2);
    gt_vocab_free(&w);
}

/* ---- the engine against the reference matcher ------------------------------------------------ */

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* A vocabulary of n random strings over `alphabet` (UTF-8 pieces are cut at random bytes, so
 * some tokens split characters), plus EOG as the last token. */
/* Tokens that random_vocab puts first, when set (test_mask_slices). */
static const char *const *fixed_tokens;
static int n_fixed_tokens;
static int forced_token = -1; /* taken first in every document, when allowed (test_mask_slices) */

static void random_vocab(gt_vocab *v, char ***store, const char *alphabet, int n, uint64_t seed)
{
    size_t al = strlen(alphabet);
    char **s = calloc((size_t)n, sizeof *s);
    int *lens = calloc((size_t)n, sizeof *lens);
    uint8_t *attr = calloc((size_t)n, 1);
    for (int i = 0; i < n - 1; i++) {
        int len = 1 + (int)(rng_next(&seed) % (i < 200 ? 2 : 7));
        s[i] = malloc((size_t)len + 1);
        size_t start = rng_next(&seed) % al;
        for (int k = 0; k < len; k++) {
            /* mostly runs of the alphabet, so that tokens are plausible text */
            size_t at = (rng_next(&seed) % 4) ? (start + (size_t)k) % al : rng_next(&seed) % al;
            s[i][k] = alphabet[at];
        }
        s[i][len] = 0;
        if (i < n_fixed_tokens) {
            len = (int)strlen(fixed_tokens[i]);
            free(s[i]);
            s[i] = malloc((size_t)len + 1);
            memcpy(s[i], fixed_tokens[i], (size_t)len + 1);
        }
        lens[i] = len;
        attr[i] = SIFT_TOKEN_ATTR_NORMAL;
    }
    s[n - 1] = malloc(5);
    strcpy(s[n - 1], "</s>");
    lens[n - 1] = 4;
    attr[n - 1] = SIFT_TOKEN_ATTR_EOG | SIFT_TOKEN_ATTR_CONTROL;
    gt_vocab_make(v, (const char *const *)s, lens, attr, n);
    *store = s;
    free(lens);
    free(attr);
}

/* stress: 0 = none; 1 = a tiny cache limit (the on-demand entries are dropped at every fill)
 * and the stack arena compacted every 10 steps */
static uint64_t slices_first_total; /* root walks that took first_bits (trie.h), over test_mask_slices */
static uint64_t hosts_slice_total, hosts_loop_first_total; /* over test_mask_host_slice */
static uint64_t root_walks_total, peered_total; /* over test_mask_key_exclusion */
static uint64_t shared_hits_total; /* over every run (test_mask_shared) */
static uint64_t chain_takes_total; /* over test_mask_slices */
static uint64_t class_takes_total, class_chains_total, chain_firsts_total; /* over test_mask_class_slices */
static uint64_t quiet_chains_total, c0_sets_total; /* over test_mask_exact_strings */
static uint64_t narrow_total; /* level-1 walks of an ASCII class from its root children alone, over every run */

static void differential_ex(const char *grammar_name, const char *alphabet, int n_vocab, int steps, uint64_t seed, int stress)
{
    size_t gl = 0;
    char *gtext = gt_grammar_text(grammar_name, &gl);
    assert_non_null(gtext);
    gt_vocab v;
    char **store;
    random_vocab(&v, &store, alphabet, n_vocab, seed);
    sift_error err = {0};
    sift_grammar *g = sift_grammar_parse(gtext, gl, NULL, &v.view, &err);
    if (!g) fail_msg("%s", err.msg);
    sift__gx_engine *e;
    assert_int_equal(sift__gx_engine_new(&e, g, &v.view, &err), SIFT_OK);
    /* half the runs cold (lazy entries only), half precomputed */
    if (seed & 1) assert_int_equal(sift__gx_engine_precompute(e, 1u << 22), SIFT_OK);
    if (stress) sift__gx_engine_set_cache_limit(e, 1);
    const sift__gx_vocab *vo = sift__gx_engine_vocab(e);
    sift__gx_arena ra;
    assert_int_equal(sift__gx_arena_init(&ra, sift__gx_engine_grammar(e)), SIFT_OK);
    sift__gx_state st = {0}, t1 = {0}, t2 = {0}, t3 = {0};
    assert_int_equal(sift__gx_state_start(&ra, &st), SIFT_OK);
    uint64_t *mask = malloc(vo->n_words * sizeof *mask);
    int *allowed = malloc(sizeof(int) * (size_t)n_vocab);
    long checked = 0, docs = 0;
    bool doc_start = true;
    for (int step = 0; step < steps; step++) {
        if (stress && step % 10 == 9) assert_int_equal(sift__gx_state_compact(&ra, &st), SIFT_OK);
        assert_int_equal(sift__gx_engine_fill_mask(e, &ra, &st, mask), SIFT_OK);
        int na = 0;
        for (int tok = 0; tok < n_vocab; tok++) {
            bool m = (mask[tok >> 6] >> (tok & 63)) & 1;
            bool ref;
            const int r = sift__gx_token_verdict(&ra, &st, vo, (uint32_t)tok, &t1, &t2);
            assert_true(r >= 0); /* an out-of-memory is not a verdict */
            ref = r == 1;
            if (m != ref) {
                uint32_t l;
                const uint8_t *b = sift__gx_vocab_text(vo, (uint32_t)tok, &l);
                fail_msg("%s step %d token %d '%.*s': mask %d, reference %d", grammar_name, step, tok, (int)l, b, m, ref);
            }
            if (m) allowed[na++] = tok;
            checked++;
        }
        if (!na) fail_msg("%s step %d: nothing allowed", grammar_name, step);
        int tok = allowed[rng_next(&seed) % (uint64_t)na];
        if (doc_start && forced_token >= 0 && (mask[forced_token >> 6] >> (forced_token & 63) & 1)) tok = forced_token;
        doc_start = false;
        if (vo->flags[tok] & GX_TOK_EOG) {
            doc_start = true;
            docs++;
            assert_int_equal(sift__gx_state_start(&ra, &st), SIFT_OK);
            continue;
        }
        uint32_t l;
        const uint8_t *b = sift__gx_vocab_text(vo, (uint32_t)tok, &l);
        assert_int_equal(sift__gx_state_accept_token(&ra, &st, (uint32_t)tok, b, l, &t1, &t2, &t3), SIFT_OK);
    }
    sift__gx_engine_stats es;
    sift__gx_engine_get_stats(e, &es);
    if (stress) assert_true(es.trims > 0);
    if (!strcmp(grammar_name, "json_strings")) {
        assert_true(es.slice_nodes > 0);      /* the bulk path ran */
        assert_true(es.loop_sets_reused > 0); /* a char* loop took its parent's loop set (mask.c, loop_set) */
        slices_first_total += es.first_slices;
        chain_takes_total += es.chain_takes;
    }
    shared_hits_total += es.shared_hits;
    if (!strcmp(grammar_name, "key_exclusion")) {
        root_walks_total += es.root_walks_reused;
        peered_total += es.peered;
    }
    narrow_total += es.narrow_walks;
    if (!strcmp(grammar_name, "classes")) {
        class_takes_total += es.class_takes;
        class_chains_total += es.chain_takes;
        chain_firsts_total += es.chain_firsts;
    }
    if (!strcmp(grammar_name, "exact_strings")) {
        quiet_chains_total += es.quiet_chains;
        c0_sets_total += es.c0_sets;
    }
    if (!strcmp(grammar_name, "hosts")) {
        hosts_slice_total += es.slice_nodes;
        hosts_loop_first_total += es.loop_sets_first;
    }
    print_message("%-10s %d tokens x %d steps: %ld checks, %ld documents%s\n", grammar_name, n_vocab, steps, checked, docs,
                  stress ? " (cache trimmed at every fill, stacks compacted)" : "");
    free(mask);
    free(allowed);
    sift__gx_state_free(&st);
    sift__gx_state_free(&t1);
    sift__gx_state_free(&t2);
    sift__gx_state_free(&t3);
    sift__gx_arena_free(&ra);
    sift__gx_engine_release(e);
    for (int i = 0; i < n_vocab; i++) free(store[i]);
    free(store);
    gt_vocab_free(&v);
    free(gtext);
}

/* differential_ex over seeds [from, to) with `tokens` first in the vocabulary and the first
 * of them taken at the start of every document (into the rule they were made for). */
static void differential_forced(const char *grammar_name, const char *alphabet, const char *const *tokens, size_t n_tokens,
                                uint64_t from, uint64_t to, int steps)
{
    fixed_tokens = tokens;
    n_fixed_tokens = (int)n_tokens;
    forced_token = 0;
    for (uint64_t seed = from; seed < to; seed++) differential_ex(grammar_name, alphabet, 1500, steps, seed, 0);
    forced_token = -1;
    fixed_tokens = NULL;
    n_fixed_tokens = 0;
}

static void differential(const char *grammar_name, const char *alphabet, int n_vocab, int steps, uint64_t seed)
{
    differential_ex(grammar_name, alphabet, n_vocab, steps, seed, 0);
}

static void test_mask_vs_reference(void **state)
{
    (void)state;
    narrow_total = 0;
    const char *json_chars = "{}[],:\"\\ \n0123456789.-+eEtrufalsn\xC3\xA9\xE2\x82\xAC\x01" "abu";
    differential("json", json_chars, 1500, 120, 1);
    differential("json", json_chars, 1500, 120, 2);
    differential("arithmetic", "0123456789.+-*/^() ,sincoqrtlgexpmaxyz", 1200, 120, 3);
    differential("list", "- \n abcdefXYZ\r", 800, 120, 5);
    differential("c_like", "intflovdwhrue(){};=+-*/%<>!&|\n \"abcxyz0123_,", 2000, 150, 7);
    differential("chess", "12345678. abcdefghKQRBNxO-=+#\n", 1000, 120, 9);
    differential("ambiguous", "- \nabcxyz", 600, 40, 17);
    differential("ambiguous", "- \nabcxyz", 600, 40, 18);
    differential_ex("json", json_chars, 1200, 80, 13, 1);
    differential_ex("c_like", "intflovdwhrue(){};=+-*/%<>!&|\n \"abcxyz0123_,", 1200, 80, 15, 1);
    /* the literals' and ASCII classes' level-1 entries took the root children of their bytes
     * alone (mask.c, level1_narrow), and every mask above still equals the reference */
    print_message("level-1 walks from the class's root children: %llu\n", (unsigned long long)narrow_total);
    assert_true(narrow_total > 0);
}

/* The slices (trie.h): subtrees accepted in bulk inside free strings must be exactly the
 * tokens the reference matcher accepts. The vocabulary is mostly string characters (ASCII,
 * 2- and 3-byte UTF-8, DEL, controls) with some quotes, backslashes and 'z>' so that the
 * trie has many all-slice subtrees next to ones that leave the string. */
static void test_mask_slices(void **state)
{
    (void)state;
    const char *str_chars = "abcdefghijz> \"\\:{},[]'<u0\x7F\x01\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80xyzqrstABC~\xE2\x80\xA8";
    slices_first_total = chain_takes_total = 0;
    for (uint64_t seed = 21; seed < 33; seed++) differential_ex("json_strings", str_chars, 1500, 100, seed, seed == 26);
    print_message("first-character slices taken: %llu\n", (unsigned long long)slices_first_total);
    /* not-s excludes "Q", which the alphabet lacks: these make the "Q" node a first-character
     * slice whose subtree the first-character path must leave out (mask.c, first_loop) */
    static const char *const q_tokens[] = {"{\"k\":y", "Q", "QA", "QAB", "Qrs", "Q\xC3\xA9", "QQ", "Qt"};
    differential_forced("json_strings", str_chars, q_tokens, sizeof q_tokens / sizeof q_tokens[0], 40, 46, 100);
    assert_true(slices_first_total > 0); /* a key-not [^...a] char* took first_bits less its exceptions */
    print_message("subtrees taken up to a chain's length: %llu\n", (unsigned long long)chain_takes_total);
    assert_true(chain_takes_total > 0); /* char{0,3} took the subtrees' tokens of at most 1..3 characters */
}

/* The host name slice (C_2, trie.c) and loop sets made from the first-character slices
 * (mask.c, loop_set) against the reference matcher: letters, digits and '-' (the slice),
 * '.', '@', quotes and a few JSON string characters outside it, so that the trie has
 * host-slice subtrees next to ones that leave a label. */
static void test_mask_host_slice(void **state)
{
    (void)state;
    const char *host_chars = "abcdefghijklmnopqrstuvwxyzQZ0189-.~_@%+\"'<>[],/ \xC3\xA9";
    hosts_slice_total = hosts_loop_first_total = 0;
    for (uint64_t seed = 60; seed < 68; seed++) differential_ex("hosts", host_chars, 1500, 120, seed, seed == 63);
    /* "q" is not in the alphabet: these make its node a first-character slice that is no
     * escape of not-q (loop_set clears its subtree from first_bits) */
    static const char *const q_tokens[] = {"[~", "q", "qa", "qbc", "q~", "qq", "q\xC3\xA9"};
    differential_forced("hosts", host_chars, q_tokens, sizeof q_tokens / sizeof q_tokens[0], 70, 74, 60);
    print_message("hosts: slice nodes %llu, loop sets from first_bits %llu\n", (unsigned long long)hosts_slice_total,
                  (unsigned long long)hosts_loop_first_total);
    assert_true(hosts_slice_total > 0);
    assert_true(hosts_loop_first_total > 0);
}

/* Key exclusions (mask.c, root_walk_take): the root walks of the [^...x] char* classes,
 * made from one remembered walk in their common char* loop less the root children where
 * the class and the loop differ (DEL, the excluded letter), and the levels below them made
 * from the loop's own (mask.c, child_peered), against the reference matcher.
 * The alphabet has the keys' letters, quotes and backslashes (subtrees no slice takes: the
 * walk that is remembered), DEL and non-ASCII characters. */
static void test_mask_key_exclusion(void **state)
{
    (void)state;
    const char *key_chars = "nametypxz\"\"\\:{},[] \x7F\xC3\xA9\xE2\x82\xAC";
    static const char *const key_tokens[] = {"{\"", "\"", "\":", "name", "na", "nap", "ty", "n", "t", "e", "p", "y", "\x7F", "\177a"};
    fixed_tokens = key_tokens;
    n_fixed_tokens = (int)(sizeof key_tokens / sizeof key_tokens[0]);
    root_walks_total = peered_total = 0;
    for (uint64_t seed = 80; seed < 88; seed++) differential_ex("key_exclusion", key_chars, 1500, 120, seed, seed == 83);
    fixed_tokens = NULL;
    n_fixed_tokens = 0;
    print_message("key exclusions: root walks made from a remembered one %llu\n", (unsigned long long)root_walks_total);
    assert_true(root_walks_total > 0);
    /* the classes' child entries were made from their loop's (child_peered) */
    print_message("key exclusions: child entries from a peer %llu\n", (unsigned long long)peered_total);
    assert_true(peered_total > 0);
}

/* The vocabulary's share (share.h): grammars with the same JSON string pieces (their char
 * rule, char* loops, key-exclusion loops) but other rules, rule numbers and symbol
 * partitions run one after another over one vocabulary, so each copies the entries the
 * earlier ones made instead of walking them - against the reference matcher. */
static void test_mask_shared(void **state)
{
    (void)state;
    const char *chars = "abcnametypz \"\\:{},[]u0\x7F\xC3\xA9\xE2\x82\xAC";
    static const char *const grammars[] = {"json_strings", "key_exclusion", "classes", "exact_strings", "hosts"};
    shared_hits_total = 0;
    for (uint64_t seed = 90; seed < 93; seed++)
        for (size_t k = 0; k < sizeof grammars / sizeof grammars[0]; k++) differential_ex(grammars[k], chars, 1200, 60, seed, 0);
    print_message("entries copied from the share: %llu\n", (unsigned long long)shared_hits_total);
    assert_true(shared_hits_total > 0);
}

/* Class slices (mask.c, class_take): subtrees taken whole by a grammar's own loop class or
 * up to a bounded run's length, against the reference matcher. The alphabet has the
 * classes' letters and digits, letters outside the hex class (g, q, X, Z), the delimiters
 * and a non-ASCII character, so that the trie has subtrees of each class next to ones
 * that leave it. */
static void test_mask_class_slices(void **state)
{
    (void)state;
    const char *class_chars = "0123456789abcdefABCDEFgqXZ_-./\"'<>(){}[],`|\xC3\xA9\xE2\x82\xAC\xE2\x80\xA8\x7F";
    class_takes_total = class_chains_total = chain_firsts_total = 0;
    for (uint64_t seed = 90; seed < 98; seed++) differential_ex("classes", class_chars, 1500, 120, seed, seed == 93);
    /* long tokens for char{0,28}: the lengths around the characters left matter */
    /* 'm' is not in the alphabet: its node is a first-character slice with these tokens of
     * 1 to 31 characters below, around the 28 left at the string's start */
    static const char *const long_tokens[] = {"[~\"", "[~\"a", "[~'0123456789", "[~'012345678", "m", "mn", "mnopqrstuvwxyz0123456789ab", "mnopqrstuvwxyz0123456789abc",
                                              "mnopqrstuvwxyz0123456789abcd", "mnopqrstuvwxyz0123456789abcde", "mnopqrstuvwxyz0123456789abcdef",
                                              "mnopqrstuvwxyz0123456789abcdeff", "mnopqrstuvwxyz0123456789abcd\xC3\xA9", "~\"", "\"]", "\",", "\\", "\\u00e9"};
    fixed_tokens = long_tokens;
    n_fixed_tokens = (int)(sizeof long_tokens / sizeof long_tokens[0]);
    for (uint64_t seed = 100; seed < 112; seed++) {
        forced_token = (int)(seed % 4); /* into a string at once (char{0,40}: 30 or 31 characters left) */
        differential_ex("classes", class_chars, 1500, 60, seed, 0);
    }
    forced_token = -1;
    fixed_tokens = NULL;
    n_fixed_tokens = 0;
    print_message("classes: first-character chain sets %llu\n", (unsigned long long)chain_firsts_total);
    assert_true(chain_firsts_total > 0);
    print_message("classes: subtrees taken %llu, up to a run's length %llu\n", (unsigned long long)class_takes_total,
                  (unsigned long long)class_chains_total);
    assert_true(class_takes_total > 0);
    assert_true(class_chains_total > 0);
}

/* Strings with a length bound in the rule that closes them (exact_strings.gbnf): chain
 * takes allowed because the chain never escapes, though FOLLOW holds string characters
 * (mask.c, chain_quiet), and the C_0 tokens of a chain's length taken by child entries at
 * once (c0_len_bits, take_below skipping their subtrees), against the reference matcher.
 * The alphabet has string characters, quotes and backslashes (first characters that are no
 * slice_first: some token goes on with a quote), the closers' 'z', non-ASCII characters,
 * DEL and a control character; the fixed tokens open each string at once, go on after an
 * escape (inner's, pq's) past the chain's length, and have 23 to 33 characters around
 * char{30}'s and char{2,40}'s lengths. */
static void test_mask_exact_strings(void **state)
{
    (void)state;
    const char *chars = "abcdefxyz0189 ,.:{}\"\\u#~<$()\xC3\xA9\xE2\x82\xAC\x7F\x01";
    static const char *const tokens[] = {"{\"", "{#\"", "{~\"", "{<\"", "{$\"", "{(", "{%", "{^", "{&", "\"", "\",", "\"}", "z)",
                                         "abcdez)", "bcdez),", "abz)", "ab,(abcd", "xy,(abcdef", "ab}", "abcde\"", "abcd\",", "q", "qbcdez)",
                                         "qbcdefz)", "qbz)", "qr", "qr,(abcd", "qr,(abcdef", "qrs}", "q,(abcd", "q,(ab",
                                         "mnopqrstuvwxyz0123456789a", "mnopqrstuvwxyz0123456789ab", "mnopqrstuvwxyz0123456789abcdef",
                                         "abcdefghijklmnopqrstuvwxyz0123", "abcdefghijklmnopqrstuvwxyz01234", "abcdefghijklmnopqrstuvwxyz01234\"",
                                         "abcdefghijklmnopqrstuvw", "abcde", "abcdef", "abcd\"", "a\xC3\xA9\xE2\x82\254bcdefghijklmnopqrstuvwxyz012", /* octal: no concatenation */
                                         "0123456789012345678901234567890123", "01234"};
    fixed_tokens = tokens;
    n_fixed_tokens = (int)(sizeof tokens / sizeof tokens[0]);
    quiet_chains_total = c0_sets_total = 0;
    for (uint64_t seed = 120; seed < 138; seed++) {
        forced_token = (int)(seed % 9); /* into one of the strings at once */
        differential_ex("exact_strings", chars, 1500, 80, seed, seed == 125);
    }
    forced_token = -1;
    for (uint64_t seed = 138; seed < 142; seed++) differential_ex("exact_strings", chars, 1500, 120, seed, 0);
    fixed_tokens = NULL;
    n_fixed_tokens = 0;
    print_message("exact strings: quiet chain takes %llu, C_0 sets %llu\n", (unsigned long long)quiet_chains_total,
                  (unsigned long long)c0_sets_total);
    assert_true(quiet_chains_total > 0);
    assert_true(c0_sets_total > 0);
}

/* tests/data/grammars/NAME.gbnf, parsed without a vocabulary */
static sift_grammar *parse_named(const char *name)
{
    size_t gl = 0;
    char *gtext = gt_grammar_text(name, &gl);
    assert_non_null(gtext);
    sift_error err = {0};
    sift_grammar *g = sift_grammar_parse(gtext, gl, NULL, NULL, &err);
    free(gtext);
    if (!g) fail_msg("%s: %s", name, err.msg);
    return g;
}

/* Strings far longer than any token (deep_strings.gbnf): positions deeper than the longest
 * token in a run or a chain of helpers share their entries (pos_equiv.c, deep_map), and
 * every mask must still equal the reference, up to and past the runs' and chains' ends. */
static void test_mask_deep_strings(void **state)
{
    (void)state;
    const char *chars = "abcdefxyz0189 ,.:{}[]()<>~\"\\u#\xC3\xA9\xE2\x82\xAC\x7F\x01";
    /* tokens of the longest length (7 bytes) that close a run or a chain with their last
     * byte: allowed exactly where that many characters are left */
    static const char *const tokens[] = {"abcdef>", "abcdef\"", "abcdef~", "abcdef]", "bcdbcd)", "a1a2b3)", "xyz01~,", "abcde\"}",
                                         "bcdbcdb", "zyxwvut"};
    sift_grammar *g = parse_named("deep_strings");
    uint32_t *r0 = NULL, *r7 = NULL, n0 = 0, n7 = 0;
    assert_int_equal(sift__gx_pos_reps(g, 0, &r0), SIFT_OK);
    assert_int_equal(sift__gx_pos_reps(g, 7, &r7), SIFT_OK);
    for (uint32_t p = 0; p < g->n_elems; p++) n0 += r0[p] == p, n7 += r7[p] == p;
    print_message("deep_strings: %u positions, %u representatives, %u for tokens of 7 bytes\n", g->n_elems, n0, n7);
    assert_true(n7 < n0 / 2);
    sift__gx_free(r0);
    sift__gx_free(r7);
    sift_grammar_free(g);
    fixed_tokens = tokens;
    n_fixed_tokens = (int)(sizeof tokens / sizeof tokens[0]);
    for (uint64_t seed = 150; seed < 158; seed++) differential_ex("deep_strings", chars, 1200, 160, seed, seed == 153);
    fixed_tokens = NULL;
    n_fixed_tokens = 0;
}

/* The first position of rule `name`'s body. */
static uint32_t rule_pos(const sift_grammar *g, const char *name)
{
    for (uint32_t r = 0; r < g->n_rules; r++)
        if (!strcmp(g->rule_name[r], name)) return g->rule_start[r];
    fail_msg("no rule %s", name);
    return 0;
}

/* Position equivalence (pos_equiv.c) on equiv_strings.gbnf, worked by hand: a rule
 * "\"" ch* "\"" is CLASS("), REF(helper of ch*), CLASS("), END. */
static void test_pos_equiv(void **state)
{
    (void)state;
    sift_grammar *g = parse_named("equiv_strings");
    uint32_t *rep = NULL;
    assert_int_equal(sift__gx_pos_reps(g, 0, &rep), SIFT_OK);
    uint32_t a = rule_pos(g, "str-a"), b = rule_pos(g, "str-b"), c = rule_pos(g, "str-c"), d = rule_pos(g, "str-d");
    assert_int_equal(GX_TYPE(g->elems[a + 1]), GX_REF);
    assert_int_equal(GX_TYPE(g->elems[a + 3]), GX_END);
    /* str-a and str-b: followed by "," both, ch-a* and ch-b* equivalent helpers */
    assert_int_equal(rep[b], rep[a]);
    assert_int_equal(rep[b + 1], rep[a + 1]);
    assert_int_equal(rep[b + 2], rep[a + 2]);
    assert_int_equal(rep[b + 3], rep[a + 3]);
    /* str-c: the same body as str-a (ch-a* itself) but followed by "}" */
    assert_int_not_equal(rep[c + 1], rep[a + 1]);
    assert_int_not_equal(rep[c + 2], rep[a + 2]);
    /* str-d: followed by "|", and ch-d differs: its helper position is apart from all */
    assert_int_not_equal(rep[d + 1], rep[a + 1]);
    assert_int_not_equal(rep[d + 1], rep[c + 1]);
    /* the character rules: ch-a ~ ch-b (same bodies, same FOLLOW: their first characters and
     * the closing quote); ch-d's first class differs, its second alternative does not, but
     * its FOLLOW lacks the "q" that ch-a's has */
    uint32_t ca = rule_pos(g, "ch-a"), cb = rule_pos(g, "ch-b"), cd = rule_pos(g, "ch-d");
    assert_int_equal(rep[cb], rep[ca]);
    assert_int_equal(rep[cb + 2], rep[ca + 2]);
    assert_int_not_equal(rep[cd], rep[ca]);
    /* a representative is the first of its class, and represents itself */
    for (uint32_t p = 0; p < g->n_elems; p++) {
        assert_true(rep[p] <= p);
        assert_int_equal(rep[rep[p]], rep[p]);
        assert_true(g->elems[rep[p]] == g->elems[p] || GX_TYPE(g->elems[p]) == GX_REF || sift__gx_is_end(g->elems[p]));
    }
    sift__gx_free(rep);
    sift_grammar_free(g);
    /* the masks over the shared entries, against the reference matcher */
    const char *str_chars = "aq\\n\"\"\",,,}}|:abc{[]() \x7F\xC3\xA9";
    /* every literal character of the grammar as a token, so that no document is stuck */
    static const char *const lit_tokens[] = {"{", "a:", "b:", "c:", "\"", ",", "}", "[", "|", "]", "(", ")", " ", "a", "q", "\\n", "\",", "\"}", "\xA9", "\xC3\xA9", ":"};
    fixed_tokens = lit_tokens;
    n_fixed_tokens = (int)(sizeof lit_tokens / sizeof lit_tokens[0]);
    for (uint64_t seed = 50; seed < 56; seed++) differential_ex("equiv_strings", str_chars, 400, 200, seed, seed == 53);
    fixed_tokens = NULL;
    n_fixed_tokens = 0;
}

/* Position equivalence on a grammar with a long chain (a string with maxLength 1,500: 1,500
 * nested helpers that the refinement splits one level per round): the rounds run on a worklist
 * (pos_equiv.c, refine_classes), so it settles and the two free strings still share their
 * positions - with a full pass per round it gave up (the identity) on such grammars. */
static void test_pos_equiv_long_chain(void **state)
{
    (void)state;
    static const char gtext[] = "root ::= a \",\" b \",\" c\n"
                                "a ::= \"\\\"\" ch-a* \"\\\"\"\n"
                                "b ::= \"\\\"\" ch-b* \"\\\"\"\n"
                                "c ::= \"\\\"\" ch-a{0,1500} \"\\\"\"\n"
                                "ch-a ::= [a-z] | \"\\\\\" [nt]\n"
                                "ch-b ::= [a-z] | \"\\\\\" [nt]\n";
    sift_error err = {0};
    sift_grammar *g = sift_grammar_parse(gtext, sizeof gtext - 1, NULL, NULL, &err);
    if (!g) fail_msg("%s", err.msg);
    assert_true(g->n_rules > 1500);
    uint32_t *rep = NULL;
    assert_int_equal(sift__gx_pos_reps(g, 0, &rep), SIFT_OK);
    uint32_t a = rule_pos(g, "a"), b = rule_pos(g, "b"), ca = rule_pos(g, "ch-a"), cb = rule_pos(g, "ch-b");
    assert_int_equal(rep[b + 1], rep[a + 1]); /* the helpers of ch-a* and ch-b* */
    assert_int_equal(rep[b + 2], rep[a + 2]);
    assert_int_equal(rep[cb], rep[ca]);
    /* the chain's helpers are apart from the loop's and from each other: ch-a{0,1500} is one
     * rule per remaining length, all different */
    uint32_t n_chain_reps = 0;
    for (uint32_t r = 0; r < g->n_rules; r++)
        if (!strncmp(g->rule_name[r], "c_", 2) && rep[g->rule_start[r]] == g->rule_start[r]) n_chain_reps++;
    assert_true(n_chain_reps >= 1499);
    for (uint32_t p = 0; p < g->n_elems; p++) assert_int_equal(rep[rep[p]], rep[p]);
    sift__gx_free(rep);
    /* for tokens of at most 8 bytes, the helpers with more than 11 levels below them share
     * the representatives of the one with 11 (pos_equiv.c, deep_map) */
    assert_int_equal(sift__gx_pos_reps(g, 8, &rep), SIFT_OK);
    n_chain_reps = 0;
    for (uint32_t r = 0; r < g->n_rules; r++)
        if (!strncmp(g->rule_name[r], "c_", 2) && rep[g->rule_start[r]] == g->rule_start[r]) n_chain_reps++;
    assert_true(n_chain_reps >= 10 && n_chain_reps <= 13);
    for (uint32_t p = 0; p < g->n_elems; p++) assert_int_equal(rep[rep[p]], rep[p]);
    assert_int_equal(rep[cb], rep[ca]);
    sift__gx_free(rep);
    sift_grammar_free(g);
}

/* Large states: the shared-walk union (sift__gx_succ_union, used above GX_SUCC_UNION_MIN stacks)
 * equals the merge of the memoized per-stack successor lists. */
static void test_large_state_union(void **state)
{
    (void)state;
    size_t gl = 0;
    char *gtext = gt_grammar_text("ambiguous", &gl);
    assert_non_null(gtext);
    sift_error err = {0};
    sift_grammar *g = sift_grammar_parse(gtext, gl, NULL, NULL, &err);
    if (!g) fail_msg("%s", err.msg);
    sift__gx_arena a;
    assert_int_equal(sift__gx_arena_init(&a, g), SIFT_OK);
    sift__gx_state st = {0}, nx = {0};
    sift__gx_u32vec flat = {0};
    assert_int_equal(sift__gx_state_start(&a, &st), SIFT_OK);
    const char *text = "- ab c\n- zz\n- x";
    size_t big = 0;
    for (const char *c = text; *c; c++) {
        assert_int_equal(sift__gx_state_step(&a, &st, (uint32_t)(uint8_t)*c, &nx), SIFT_OK);
        assert_false(sift__gx_state_dead(&nx));
        if (st.tops.n > GX_SUCC_UNION_MIN) big++;
        /* the flat merge of the same successors */
        uint32_t sym = sift__gx_sym_of(g, (uint32_t)(uint8_t)*c);
        for (uint32_t k = 0; k < st.tops.n; k++) {
            uint32_t cnt;
            bool b;
            if (sift__gx_elem_accepts_sym(g, g->elems[a.pos[st.tops.v[k]]], sym)) assert_non_null(sift__gx_succ(&a, st.tops.v[k], &cnt, &b));
        }
        flat.n = 0;
        bool bot = false;
        sift__gx_mark_begin(&a);
        for (uint32_t k = 0; k < st.tops.n; k++) {
            uint32_t n = st.tops.v[k], cnt;
            bool b;
            if (!sift__gx_elem_accepts_sym(g, g->elems[a.pos[n]], sym)) continue;
            const uint32_t *sc = sift__gx_succ(&a, n, &cnt, &b);
            bot |= b;
            for (uint32_t q = 0; q < cnt; q++)
                if (sift__gx_mark_add(&a, sc[q])) assert_true(sift__gx_u32_push(&flat, sc[q]));
        }
        assert_int_equal(flat.n, nx.tops.n);
        assert_int_equal(bot, nx.can_end);
        sift__gx_mark_begin(&a);
        for (uint32_t k = 0; k < flat.n; k++) sift__gx_mark_add(&a, flat.v[k]);
        for (uint32_t k = 0; k < nx.tops.n; k++) assert_false(sift__gx_mark_add(&a, nx.tops.v[k])); /* same set */
        assert_int_equal(sift__gx_state_copy(&st, &nx), SIFT_OK);
    }
    assert_true(big >= 9); /* every character after a "- " */
    size_t fail = 0;
    assert_int_equal(sift_grammar_match(g, "- ab c\n- zz\n", strlen("- ab c\n- zz\n"), &fail), SIFT_GRAMMAR_COMPLETE);
    sift__gx_u32_free(&flat);
    sift__gx_state_free(&st);
    sift__gx_state_free(&nx);
    sift__gx_arena_free(&a);
    sift_grammar_free(g);
    free(gtext);
}

/* ---- fill_mask's union of dense sets ----------------------------------------------------------- */

static void test_bits_union(void **state)
{
    (void)state;
    /* nine 3-word sets, set k holding bit k of word 0, bit 2k+1 of word 1 and bit 63-k of
     * word 2: any union of the first n is worked out by hand below */
    enum { W = 3, N = 9 };
    uint64_t sets[N][W];
    const uint64_t *src[N];
    for (int k = 0; k < N; k++) {
        sets[k][0] = (uint64_t)1 << k;
        sets[k][1] = (uint64_t)1 << (2 * k + 1);
        sets[k][2] = (uint64_t)1 << (63 - k);
        src[k] = sets[k];
    }
    for (uint32_t n = 0; n <= N; n++) { /* 0, a copy, one pass of 2..4, then passes of three more */
        uint64_t dst[W] = {0xDEAD, 0xBEEF, 0xF00D}; /* overwritten, not OR-ed into */
        sift__gx_bits_union(dst, W, src, n);
        uint64_t want0 = 0, want1 = 0, want2 = 0;
        for (uint32_t k = 0; k < n; k++) {
            want0 |= (uint64_t)1 << k;
            want1 |= (uint64_t)1 << (2 * k + 1);
            want2 |= (uint64_t)1 << (63 - k);
        }
        assert_true(dst[0] == want0 && dst[1] == want1 && dst[2] == want2);
    }
    /* n = 6: words 0 = 0x3F, 1 = 0xAAA (bits 1,3,...,11), 2 = the top six bits */
    uint64_t dst[W];
    sift__gx_bits_union(dst, W, src, 6);
    assert_true(dst[0] == 0x3F && dst[1] == 0xAAA && dst[2] == 0xFC00000000000000ull);
    /* a set named twice counts once */
    const uint64_t *twice[5] = {sets[2], sets[2], sets[5], sets[2], sets[5]};
    sift__gx_bits_union(dst, W, twice, 5);
    assert_true(dst[0] == 0x24 && dst[1] == ((1u << 5) | (1u << 11)) && dst[2] == (((uint64_t)1 << 61) | ((uint64_t)1 << 58)));
}

/* ---- SIMD masking == scalar ---------------------------------------------------------------- */

static void test_mask_apply_variants(void **state)
{
    (void)state;
    uint64_t seed = 42;
    uint32_t n_tokens = 5000;
    uint64_t mask[(5000 + 63) / 64];
    const size_t size = 4099;
    sift_token *id = malloc(size * sizeof *id);
    float *l0 = malloc(size * sizeof *l0), *l1 = malloc(size * sizeof *l1), *l2 = malloc(size * sizeof *l2);
    sift__gx_mask_apply_fn best = sift__gx_mask_ops_best()->apply;
    /* every level this build has and this CPU runs, the portable one first */
    const sift__gx_mask_ops *level[3] = {&sift__gx_mask_ops_scalar};
    int n_levels = 1;
#if defined(__x86_64__)
    if (sift__cpu_runs(SIFT_ISA_AVX2)) level[n_levels++] = &sift__gx_mask_ops_avx2;
    if (sift__cpu_runs(SIFT_ISA_AVX512)) level[n_levels++] = &sift__gx_mask_ops_avx512;
#elif defined(__aarch64__)
    level[n_levels++] = &sift__gx_mask_ops_neon;
#endif
    for (int round = 0; round < 56; round++) {
        for (size_t w = 0; w < sizeof mask / sizeof *mask; w++) {
            uint64_t r = rng_next(&seed);
            /* all ones, all zeros, random, and random words between all-ones words (the
             * 64-wide identity path skips an all-ones word: its neighbours must still count) */
            mask[w] = round % 4 == 0 ? ~(uint64_t)0 : round % 4 == 1 ? 0 : round % 8 == 3 && w % 3 ? ~(uint64_t)0 : r;
        }
        /* layouts: identity from 0, identity from an offset, shuffled blocks, out of range,
         * negative, identity but for two ids swapped inside each 64-block (the SIMD paths
         * take whole 64-blocks of id[i] == i at once), identity running past n_tokens in
         * the middle of a 64-block */
        n_tokens = round % 7 == 6 ? 4070 : 5000;
        for (size_t i = 0; i < size; i++) {
            switch (round % 7) {
            case 0: id[i] = (sift_token)i; break;
            case 1: id[i] = (sift_token)(i + 7); break;
            case 2: id[i] = (sift_token)(rng_next(&seed) % n_tokens); break;
            case 3: id[i] = (sift_token)(i % 16 == 3 ? n_tokens + i : i); break;
            case 4: id[i] = (sift_token)(i % 16 == 5 ? -1 : (int)i); break;
            case 5: id[i] = (sift_token)(i % 64 == 37 ? i + 1 : i % 64 == 38 ? i - 1 : i); break;
            default: id[i] = (sift_token)i; break;
            }
            l0[i] = l1[i] = l2[i] = (float)(rng_next(&seed) % 1000) / 7.0f;
        }
        /* the caller may vouch for the identity layout (SIFT_CAND_IDENTITY): then no id is
         * read, and the result must be the one the ids give */
        const bool ident = round % 7 == 0;
        size_t k0 = sift__gx_mask_apply_scalar(id, l0, size, mask, n_tokens, false);
        size_t k1 = best(id, l1, size, mask, n_tokens, false);
        assert_int_equal(k0, k1);
        assert_memory_equal(l0, l1, size * sizeof *l0);
        for (int v = 0; v < n_levels; v++) {
            sift__gx_mask_apply_fn f = level[v]->apply;
            for (int vi = 0; vi <= (int)ident; vi++) {
                for (size_t i = 0; i < size; i++) l2[i] = l0[i] = (float)i;
                size_t a = sift__gx_mask_apply_scalar(id, l0, size, mask, n_tokens, false);
                size_t b = f(id, l2, size, mask, n_tokens, vi == 1);
                assert_int_equal(a, b);
                assert_memory_equal(l0, l2, size * sizeof *l0);
            }
        }
        if (ident) {
            /* the removal, at each level this CPU runs: the allowed candidates, in order, and
             * their count */
            for (int v = 0; v < n_levels; v++) {
                const sift__gx_mask_ops *ops = level[v];
                for (size_t i = 0; i < size; i++) l2[i] = l0[i] = (float)(i * 3 % 1001);
                sift_token *id2 = malloc(size * sizeof *id2);
                for (size_t i = 0; i < size; i++) id2[i] = (sift_token)i;
                size_t n = ops->compact(id2, l2, size, mask);
                assert_int_equal(n, ops->count(mask, size, size));
                size_t lim = n / 3, c = ops->count(mask, size, lim);
                assert_true(n > lim ? c > lim && c <= n : c == n); /* stops above the limit */
                size_t j = 0;
                for (size_t t = 0; t < size; t++)
                    if ((mask[t >> 6] >> (t & 63)) & 1) {
                        assert_true(j < n);
                        assert_int_equal(id2[j], (sift_token)t);
                        assert_true(l2[j] == l0[t]);
                        j++;
                    }
                assert_int_equal(j, n);
                free(id2);
            }
        }
    }
    free(id);
    free(l0);
    free(l1);
    free(l2);
}

/* ---- the two ways apply bans (mask_apply.h) ------------------------------------------------- */

/* A user's sampler that reverses the candidates (ids and logits): it knows nothing of
 * SIFT_CAND_IDENTITY, so the library must drop the flag after it. */
static void reverse_apply(sift_sampler *smpl, sift_candidates *c)
{
    (void)smpl;
    for (size_t i = 0, j = c->size - 1; i < j; i++, j--) {
        sift_token t = c->id[i];
        c->id[i] = c->id[j];
        c->id[j] = t;
        float l = c->logit[i];
        c->logit[i] = c->logit[j];
        c->logit[j] = l;
    }
}

/* The survivors (id -> logit) of a candidates array, as a dense table (NAN = not there). */
static size_t survivors(const sift_candidates *c, float *tab, int n)
{
    size_t k = 0;
    for (int t = 0; t < n; t++) tab[t] = NAN;
    for (size_t i = 0; i < c->size; i++)
        if (c->logit[i] != -INFINITY) {
            assert_true(isnan(tab[c->id[i]])); /* each token once */
            tab[c->id[i]] = c->logit[i];
            k++;
        }
    return k;
}

/* Removal (default), -inf in place (keep_banned) and a permuted array (ids read one by one)
 * leave the same tokens with the same logits at every step of a JSON walk; the removal keeps
 * id order and happens exactly for masks that allow some but at most 1 in 8 tokens. */
static void test_apply_layouts(void **state)
{
    (void)state;
    enum { N = 3000 };
    size_t gl = 0;
    char *gtext = gt_grammar_text("json", &gl);
    gt_vocab v;
    char **store;
    random_vocab(&v, &store, "{}[],:\"\\ \n0123456789.-+eEtrufalsn\xC3\xA9", N, 17);
    sift_grammar_params p = sift_grammar_default_params();
    sift_error err = {0};
    sift_sampler *g[3];
    for (int k = 0; k < 3; k++) {
        p.keep_banned = k == 1;
        g[k] = sift_sampler_init_grammar_ex(&v.view, gtext, gl, &p, &err);
        assert_non_null(g[k]);
    }
    static const sift_sampler_i rev_iface = {.apply = reverse_apply};
    sift_sampler *rev = sift_sampler_init(&rev_iface, NULL);
    sift_candidates c;
    assert_int_equal(sift_candidates_init(&c, N), SIFT_OK);
    float *logits = malloc(N * sizeof *logits), *tab[3];
    for (int k = 0; k < 3; k++) tab[k] = malloc(N * sizeof *tab[k]);
    uint64_t seed = 9;
    int removed = 0, in_place = 0;
    for (int step = 0; step < 300; step++) {
        for (int i = 0; i < N; i++) logits[i] = (float)(rng_next(&seed) % 1000) / 100.0f;
        size_t n_ok[3];
        for (int k = 0; k < 3; k++) {
            assert_int_equal(sift_candidates_fill(&c, logits, N), SIFT_OK);
            assert_true(c.flags & SIFT_CAND_IDENTITY);
            if (k == 2) {
                sift_sampler_apply(rev, &c);
                assert_false(c.flags & SIFT_CAND_IDENTITY); /* the library dropped it */
            }
            sift_sampler_apply(g[k], &c);
            n_ok[k] = survivors(&c, tab[k], N);
            for (int t = 0; t < N; t++) assert_true(isnan(tab[k][t]) || tab[k][t] == logits[t]);
            if (k == 0) {
                const bool sparse = n_ok[0] > 0 && n_ok[0] <= N / 8;
                if (sparse) { /* removed: only survivors, in id order */
                    removed++;
                    assert_int_equal(c.size, n_ok[0]);
                    for (size_t i = 1; i < c.size; i++) assert_true(c.id[i - 1] < c.id[i]);
                    assert_false(c.flags & SIFT_CAND_IDENTITY);
                } else { /* in place: the fill's layout, still vouched for */
                    in_place++;
                    assert_int_equal(c.size, N);
                    assert_true(c.flags & SIFT_CAND_IDENTITY);
                }
            } else if (k == 1) {
                assert_int_equal(c.size, N);
                for (int i = 0; i < N; i++) assert_int_equal(c.id[i], i);
            }
        }
        assert_int_equal(n_ok[0], n_ok[1]);
        assert_int_equal(n_ok[0], n_ok[2]);
        assert_memory_equal(tab[0], tab[1], N * sizeof *tab[0]);
        assert_memory_equal(tab[0], tab[2], N * sizeof *tab[0]);
        /* go on with a survivor, the same one for all three; restart after the end */
        assert_true(n_ok[0] > 0);
        int pick = -1;
        for (uint64_t r = rng_next(&seed) % n_ok[0]; pick < N - 1;)
            if (!isnan(tab[0][++pick]) && r-- == 0) break;
        for (int k = 0; k < 3; k++) {
            sift_sampler_accept(g[k], pick);
            if (v.attr[pick] & SIFT_TOKEN_ATTR_EOG) sift_sampler_reset(g[k]);
        }
    }
    assert_true(removed > 20 && in_place > 20); /* both ways were exercised */
    for (int k = 0; k < 3; k++) {
        free(tab[k]);
        sift_sampler_free(g[k]);
    }
    free(logits);
    sift_sampler_free(rev);
    sift_candidates_free(&c);
    for (int i = 0; i < N; i++) free(store[i]);
    free(store);
    gt_vocab_free(&v);
    free(gtext);
}

/* ---- no allocation once warm ------------------------------------------------------------------ */

static void test_no_allocation_when_warm(void **state)
{
    (void)state;
    size_t gl = 0;
    char *gtext = gt_grammar_text("json", &gl);
    gt_vocab v;
    char **store;
    random_vocab(&v, &store, "{}[],:\"\\ \n0123456789.-+eEtrufalsn\xC3\xA9", 3000, 11);
    sift_grammar_params p = sift_grammar_default_params();
    sift_error err = {0};
    sift_sampler *s = sift_sampler_init_grammar_ex(&v.view, gtext, gl, &p, &err);
    assert_non_null(s);
    sift_sampler *dist = sift_sampler_init_dist(3);
    sift_candidates c;
    assert_int_equal(sift_candidates_init(&c, 3000), SIFT_OK);
    float *logits = malloc(3000 * sizeof *logits);
    uint64_t seed = 5;
    for (int i = 0; i < 3000; i++) logits[i] = (float)(rng_next(&seed) % 1000) / 100.0f;
    sift_token seq[200];
    /* pass 1 fills the caches; pass 2 replays the same tokens and must not allocate */
    for (int pass = 0; pass < 2; pass++) {
        sift_sampler_reset(s);
        sift_sampler_reset(dist);
        uint64_t before = sift__gx_alloc_count();
        for (int step = 0; step < 200; step++) {
            sift_candidates_fill(&c, logits, 3000);
            sift_sampler_apply(s, &c);
            if (pass == 0) {
                sift_sampler_apply(dist, &c);
                seq[step] = sift_candidates_selected(&c);
            }
            assert_true(sift_grammar_sampler_allows(s, seq[step]));
            sift_sampler_accept(s, seq[step]);
            if (v.attr[seq[step]] & SIFT_TOKEN_ATTR_EOG) sift_sampler_reset(s);
        }
        if (pass == 1) assert_int_equal(sift__gx_alloc_count() - before, 0);
    }
    free(logits);
    sift_candidates_free(&c);
    sift_sampler_free(dist);
    sift_sampler_free(s);
    for (int i = 0; i < 3000; i++) free(store[i]);
    free(store);
    gt_vocab_free(&v);
    free(gtext);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic_semantics),  cmocka_unit_test(test_utf8_across_tokens),
        cmocka_unit_test(test_token_references), cmocka_unit_test(test_lazy_triggers),
        cmocka_unit_test(test_clone_and_chain),  cmocka_unit_test(test_no_allowed_token), cmocka_unit_test(test_vocab_shared), cmocka_unit_test(test_compiler),
        cmocka_unit_test(test_mask_vs_reference), cmocka_unit_test(test_mask_slices), cmocka_unit_test(test_mask_host_slice), cmocka_unit_test(test_pos_equiv),
        cmocka_unit_test(test_mask_key_exclusion), cmocka_unit_test(test_mask_shared), cmocka_unit_test(test_mask_class_slices), cmocka_unit_test(test_mask_exact_strings), cmocka_unit_test(test_mask_deep_strings), cmocka_unit_test(test_pos_equiv_long_chain),
        cmocka_unit_test(test_large_state_union),
        cmocka_unit_test(test_bits_union), cmocka_unit_test(test_mask_apply_variants), cmocka_unit_test(test_apply_layouts),
        cmocka_unit_test(test_no_allocation_when_warm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
