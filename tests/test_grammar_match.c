/*
 * test_grammar_match.c - accepted and rejected texts for the test grammars (JSON, arithmetic,
 * lists, a C-like language, chess moves), checked byte by byte: a rejected text must fail
 * at exactly the expected byte, every shorter prefix must still be viable, and every prefix
 * of an accepted text must be viable.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "grammar_util.h"

enum { REJ = SIFT_GRAMMAR_REJECTED, PRE = SIFT_GRAMMAR_PREFIX, OK = SIFT_GRAMMAR_COMPLETE };

typedef struct {
    const char *text;
    int want;
    size_t fail_at; /* for REJ */
} mcase;

static sift_grammar *load(const char *name)
{
    size_t n = 0;
    char *t = gt_grammar_text(name, &n);
    if (!t) fail_msg("missing tests/data/grammars/%s.gbnf (SIFT_SOURCE_DIR)", name);
    sift_error err = {0};
    sift_grammar *g = sift_grammar_parse(t, n, "root", NULL, &err);
    free(t);
    if (!g) fail_msg("%s: %s", name, err.msg);
    return g;
}

static void check_cases(const char *name, const mcase *cases, size_t n)
{
    sift_grammar *g = load(name);
    for (size_t i = 0; i < n; i++) {
        const char *s = cases[i].text;
        size_t len = strlen(s);
        size_t off = 0;
        int r = sift_grammar_match(g, s, len, &off);
        if (r != cases[i].want || (r == REJ && off != cases[i].fail_at))
            fail_msg("%s case %zu '%s': got %d at %zu, want %d at %zu", name, i, s, r, off, cases[i].want, cases[i].fail_at);
        /* byte by byte: prefixes before the failing byte are viable, longer ones fail there */
        for (size_t k = 0; k <= len; k++) {
            size_t o2 = 0;
            int rk = sift_grammar_match(g, s, k, &o2);
            bool must_fail = cases[i].want == REJ && k > cases[i].fail_at;
            if (must_fail ? (rk != REJ || o2 != cases[i].fail_at) : rk == REJ)
                fail_msg("%s case %zu: prefix of %zu bytes gave %d at %zu", name, i, k, rk, o2);
        }
    }
    sift_grammar_free(g);
}

static void test_json(void **state)
{
    (void)state;
    const mcase c[] = {
        {"{\"a\": [1, 2.5e3, \"x\\u00e9y\", true, null]}", OK, 0},
        {"{\"k\":\n  {\"n\": -0.5e-3, \"e\": {}, \"l\": []}}", OK, 0},
        {"\"caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80\"", OK, 0},
        {"[\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"]", OK, 0},
        {"0", OK, 0},
        {"\"abc", PRE, 0},
        {"{\"a\": [1,", PRE, 0},
        {"1.", PRE, 0},
        {"tru", PRE, 0},
        {"\"\xC3", PRE, 0},                      /* a character split across the end */
        {"{\"a\" 1}", REJ, 5},                   /* ':' expected */
        {"[1,2,]", REJ, 5},                      /* a value after ',' */
        {"01", REJ, 1},                          /* no leading zeros; nothing after the value */
        {"{\"k\":\"v\"} ", REJ, 9},              /* nothing after the outermost value */
        {"\"\\q\"", REJ, 2},                     /* unknown escape */
        {"\"\\u12g4\"", REJ, 5},
        {"\"\\ud83d\\ude00\"", OK, 0},            /* a surrogate pair */
        {"\"\\udc00\"", REJ, 4},                  /* a lone low surrogate */
        {"\"\\ud83dx\"", REJ, 7},                 /* a high one must be followed by \\u + low */
        {"1.e5", REJ, 2},
        {"trux", REJ, 3},
        {"\"aaaaaaaaaaaaaaaaaaaaaaaaa\"", REJ, 25}, /* 25th character: strings hold at most 24 */
        {"\"a\nb\"", REJ, 2},                    /* raw control character */
        {"\"\xC3\x28\"", REJ, 2},                /* 0x28 cannot continue a UTF-8 character */
        {"\"\xC0\xAF\"", REJ, 1},                /* overlong form */
        {"\"\xED\xA0\x80\"", REJ, 2},            /* UTF-16 surrogate */
        {"\"\xF5\x80\x80\x80\"", REJ, 1},        /* beyond U+10FFFF */
        {"[\n         1]", REJ, 10},             /* at most 8 blanks after a line break */
    };
    check_cases("json", c, sizeof c / sizeof *c);
}

static void test_arithmetic(void **state)
{
    (void)state;
    const mcase c[] = {
        {"1 + 2*3", OK, 0},
        {"-(x1 + sqrt(2)) ^ 2", OK, 0},
        {"max(a, b) / 3.25 - --7", OK, 0},
        {"((1))", OK, 0},
        {"1 +", PRE, 0},
        {"((1)", PRE, 0},
        {"sin(", PRE, 0},
        {"1 ++ 2", REJ, 3},
        {"abcdefg", REJ, 6},  /* names have at most 6 characters */
        {"sin x", REJ, 4},    /* "sin" alone is a name; then an operator is needed */
        {"2^3^4", REJ, 3},    /* one power per factor */
        {"1  + 2", REJ, 2},   /* at most one blank */
        {"(1))", REJ, 3},
        {"1.", PRE, 0},       /* a fraction digit must follow */
        {"1.x", REJ, 2},
    };
    check_cases("arithmetic", c, sizeof c / sizeof *c);
}

static void test_list(void **state)
{
    (void)state;
    const mcase c[] = {
        {"- apples\n- pears\n  - green\n  - yellow\n", OK, 0},
        {"- one item only\n", OK, 0},
        {"- apples", PRE, 0},
        {"- apples\n  ", PRE, 0},
        {"-apples\n", REJ, 1},
        {"- \n", REJ, 2},
        {"- a\n  - b\n    - c\n", REJ, 12}, /* no third level */
        {"- --\n", REJ, 2},                  /* text cannot start with '-' */
        {"  - sub first\n", REJ, 0},
    };
    check_cases("list", c, sizeof c / sizeof *c);
}

static void test_c_like(void **state)
{
    (void)state;
    const mcase c[] = {
        {"int x = 3;\nx += 1;\n", OK, 0},
        {"while (a < b) {\n  a += f(a, 2);\n}\n", OK, 0},
        {"if (x == 1 && !y) {\n  return x;\n} else {\n}\n", OK, 0},
        {"print(\"hello world\");\n", OK, 0},
        {"int x = 3;", PRE, 0},
        {"whil", PRE, 0},
        {"int 3x;\n", REJ, 4},
        {"return x\n", REJ, 8},
        {"if (a) {\n}\nelse {\n}\n", REJ, 16}, /* "else" must follow the block on its line */
        {"x = 1 + + 2;\n", REJ, 8},
        {"float y;;\n", REJ, 8},
    };
    check_cases("c_like", c, sizeof c / sizeof *c);
}

static void test_chess(void **state)
{
    (void)state;
    const mcase c[] = {
        {"1. e4 e5\n2. Nf3 Nc6\n3. Bb5 a6\n", OK, 0},
        {"1. O-O-O Kxe2#\n", OK, 0},
        {"1. e8=Q+ exd1=N\n", OK, 0},
        {"1. Nbd7 R1xa8\n", OK, 0},
        {"1. e4 e5\n2.", PRE, 0},
        {"1. e4\n", REJ, 5},
        {"1. e9 e5\n", REJ, 4},
        {"0. e4 e5\n", REJ, 0},
        {"1. Pe4 e5\n", REJ, 3},
        {"1. O-O-O-O e5\n", REJ, 8},
        {"1. e4 e5\n02. d4 d5\n", REJ, 9},
    };
    check_cases("chess", c, sizeof c / sizeof *c);
}

/* Regression (issue 12): errors are distinguishable from results. sift_grammar_match used to
 * return -SIFT_E_NOMEM, which equals SIFT_GRAMMAR_COMPLETE (2), and a NULL grammar read as
 * "complete" too. */
static void test_match_errors(void **state)
{
    (void)state;
    size_t off = 77;
    assert_int_equal(sift_grammar_match(NULL, "x", 1, &off), SIFT_GRAMMAR_ERROR);
    assert_int_equal(sift_grammar_match(NULL, "", 0, NULL), SIFT_GRAMMAR_ERROR);
    assert_true(SIFT_GRAMMAR_ERROR != SIFT_GRAMMAR_COMPLETE && SIFT_GRAMMAR_ERROR != SIFT_GRAMMAR_PREFIX &&
                SIFT_GRAMMAR_ERROR != SIFT_GRAMMAR_REJECTED);
    assert_true((int)SIFT_GRAMMAR_ERROR < 0);
    sift_error err = {0};
    sift_grammar *g = sift_grammar_parse("root ::= \"x\"\n", 13, "root", NULL, &err);
    assert_non_null(g);
    assert_int_equal(sift_grammar_match(g, "x", 1, NULL), SIFT_GRAMMAR_COMPLETE);
    assert_int_equal(sift_grammar_match(g, "y", 1, &off), SIFT_GRAMMAR_REJECTED);
    sift_grammar_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json), cmocka_unit_test(test_arithmetic), cmocka_unit_test(test_list),
        cmocka_unit_test(test_c_like), cmocka_unit_test(test_chess), cmocka_unit_test(test_match_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
