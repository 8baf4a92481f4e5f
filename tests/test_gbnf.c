/*
 * test_gbnf.c - the GBNF parser: every construct of llama.cpp's syntax, the errors (with
 * line:column and what was expected), the checks (undefined rules, missing root, left
 * recursion) and the limits that keep hostile input bounded.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "grammar/grammar.h" /* n_rules */
#include "grammar_util.h"

static sift_grammar *parse(const char *text, sift_error *err)
{
    return sift_grammar_parse(text, strlen(text), NULL, NULL, err);
}

/* text matches as `want` (SIFT_GRAMMAR_*) */
static void expect_match(const sift_grammar *g, const char *text, size_t len, int want)
{
    size_t off = 0;
    int r = sift_grammar_match(g, text, len, &off);
    if (r != want) fail_msg("'%.*s': got %d (offset %zu), want %d", (int)len, text, r, off, want);
}
#define MATCH(g, s, w) expect_match(g, s, sizeof(s) - 1, w)

static void test_all_grammar_files_parse(void **state)
{
    (void)state;
    const char *mine[] = {"json", "arithmetic", "list", "c_like", "chess"};
    for (size_t i = 0; i < sizeof mine / sizeof *mine; i++) {
        size_t n = 0;
        char *t = gt_grammar_text(mine[i], &n);
        assert_non_null(t);
        sift_error err = {0};
        sift_grammar *g = sift_grammar_parse(t, n, "root", NULL, &err);
        if (!g) fail_msg("%s: %s", mine[i], err.msg);
        sift_grammar_free(g);
        free(t);
    }
    const char *peer[] = {"json", "json_schema_person", "arith", "c_like"};
    for (size_t i = 0; i < sizeof peer / sizeof *peer; i++) {
        char rel[128], path[1024];
        snprintf(rel, sizeof rel, "peer/grammars/%s.gbnf", peer[i]);
        size_t n = 0;
        char *t = gt_read_file(gt_shared_path(path, sizeof path, rel), &n);
        if (!t) fail_msg("missing %s (SIFT_SHARED)", path);
        sift_error err = {0};
        sift_grammar *g = sift_grammar_parse(t, n, NULL, NULL, &err);
        if (!g) fail_msg("%s: %s", path, err.msg);
        sift_grammar_free(g);
        free(t);
    }
}

static void test_literals_and_escapes(void **state)
{
    (void)state;
    sift_error err = {0};
    sift_grammar *g = parse("root ::= \"\\x41\\u00e9\\U0001F600\\t\\n\\r\\\\\\\"\\[\\]\\-\" \"é😀\"\n", &err);
    assert_non_null(g);
    MATCH(g, "A\xC3\xA9\xF0\x9F\x98\x80\t\n\r\\\"[]-\xC3\xA9\xF0\x9F\x98\x80", SIFT_GRAMMAR_COMPLETE);
    MATCH(g, "A\xC3\xA9\xF0\x9F\x98", SIFT_GRAMMAR_PREFIX);
    MATCH(g, "B", SIFT_GRAMMAR_REJECTED);
    sift_grammar_free(g);
}

static void test_classes(void **state)
{
    (void)state;
    sift_error err = {0};
    sift_grammar *g = parse("root ::= [a-cx\\-\\]] [^0-9\\n] [ぁ-ゟ] . [] | \"z\"\n", &err);
    assert_non_null(g);
    MATCH(g, "b#\xE3\x81\x82q", SIFT_GRAMMAR_PREFIX);  /* [] (empty class) never matches */
    MATCH(g, "z", SIFT_GRAMMAR_COMPLETE);
    MATCH(g, "-", SIFT_GRAMMAR_PREFIX);
    MATCH(g, "]", SIFT_GRAMMAR_PREFIX);
    MATCH(g, "d", SIFT_GRAMMAR_REJECTED);
    MATCH(g, "a5", SIFT_GRAMMAR_REJECTED);
    MATCH(g, "a\n", SIFT_GRAMMAR_REJECTED);
    MATCH(g, "a\xC3\xA9\xE3\x82\xA0", SIFT_GRAMMAR_REJECTED); /* U+30A0 is past ゟ (U+309F) */
    sift_grammar_free(g);
    /* negation and '.' cover every code point, 4-byte ones too */
    g = parse("root ::= [^a] .\n", &err);
    assert_non_null(g);
    MATCH(g, "\xF0\x9F\x98\x80\xF4\x8F\xBF\xBF", SIFT_GRAMMAR_COMPLETE);
    MATCH(g, "a.", SIFT_GRAMMAR_REJECTED);
    sift_grammar_free(g);
}

static void test_repetitions(void **state)
{
    (void)state;
    sift_error err = {0};
    sift_grammar *g = parse("root ::= \"a\"{2} \"b\"{1,} \"c\"{0,2} \"d\"* \"e\"+ \"f\"? (\"g\" \"h\"){2,3}\n", &err);
    assert_non_null(g);
    MATCH(g, "aabeghgh", SIFT_GRAMMAR_COMPLETE);
    MATCH(g, "aabbbccddeeefghghgh", SIFT_GRAMMAR_COMPLETE);
    MATCH(g, "abeghgh", SIFT_GRAMMAR_REJECTED);
    MATCH(g, "aabcccegh", SIFT_GRAMMAR_REJECTED);
    MATCH(g, "aabeghghghgh", SIFT_GRAMMAR_REJECTED);
    MATCH(g, "aabegh", SIFT_GRAMMAR_PREFIX);
    sift_grammar_free(g);
    /* spaces inside braces, as llama.cpp allows */
    g = parse("root ::= \"x\"{ 1 , 3 }\n", &err);
    assert_non_null(g);
    MATCH(g, "xxx", SIFT_GRAMMAR_COMPLETE);
    sift_grammar_free(g);
}

static void test_layout(void **state)
{
    (void)state;
    sift_error err = {0};
    /* comments, newlines after '|' and inside parentheses, CRLF, empty alternatives, names
     * with digits and dashes, a rule defined twice (the last one wins, as in llama.cpp) */
    const char *text = "# a comment\r\n"
                       "root ::= (\r\n"
                       "    item-1   # trailing comment\r\n"
                       "    | item-2\r\n"
                       ") tail |\r\n"
                       "  \"\"\r\n"
                       "item-1 ::= \"a\"\r\n"
                       "item-2 ::= \"b\" |\n"
                       "           \"c\"\n"
                       "tail ::= \"x\"\n"
                       "tail ::= \"y\"\n";
    sift_grammar *g = parse(text, &err);
    if (!g) fail_msg("%s", err.msg);
    MATCH(g, "", SIFT_GRAMMAR_COMPLETE);
    MATCH(g, "ay", SIFT_GRAMMAR_COMPLETE);
    MATCH(g, "cy", SIFT_GRAMMAR_COMPLETE);
    MATCH(g, "ax", SIFT_GRAMMAR_REJECTED);
    sift_grammar_free(g);
    /* start rule by name */
    g = sift_grammar_parse("a ::= \"1\"\nb ::= \"2\"\n", 20, "b", NULL, &err);
    assert_non_null(g);
    MATCH(g, "2", SIFT_GRAMMAR_COMPLETE);
    sift_grammar_free(g);
}

static void test_recursion(void **state)
{
    (void)state;
    sift_error err = {0};
    /* right recursion and recursion through nesting are fine */
    sift_grammar *g = parse("root ::= \"(\" root \")\" | \"x\" root | \"\"\n", &err);
    assert_non_null(g);
    MATCH(g, "x((xx))", SIFT_GRAMMAR_COMPLETE);
    MATCH(g, "((x)", SIFT_GRAMMAR_PREFIX);
    MATCH(g, "((xx)x)", SIFT_GRAMMAR_REJECTED); /* nothing may follow "(" root ")" */
    sift_grammar_free(g);
    const char *left[] = {
        "root ::= root \"a\" | \"b\"\n",                                 /* direct */
        "root ::= a\na ::= b \"x\"\nb ::= root | \"y\"\n",              /* indirect */
        "root ::= e \"+\"\ne ::= opt e | \"1\"\nopt ::= \"-\"?\n",       /* through a nullable prefix */
        "root ::= (\"\")* \"a\"\n",                                      /* repetition of the empty string */
    };
    for (size_t i = 0; i < sizeof left / sizeof *left; i++) {
        g = parse(left[i], &err);
        if (g) fail_msg("left recursion not found in %s", left[i]);
        assert_int_equal(err.status, SIFT_E_PARSE);
        assert_non_null(strstr(err.msg, "left recursion"));
    }
}

typedef struct {
    const char *text, *want;
} err_case;

static void test_errors(void **state)
{
    (void)state;
    const err_case cases[] = {
        {"root ::= \"a\" | b\n", "1:16: undefined rule 'b'"},
        {"x ::= \"a\"\n", "no rule named 'root'"},
        {"", "1:1: the grammar has no rules"},
        {"# nothing\n\n", "the grammar has no rules"},
        {"root := \"a\"\n", "1:6: expected '::=' after the rule name 'root'"},
        {"root\n::= \"a\"\n", "1:5: expected '::='"},
        {"root ::= (\"a\"\n", "2:1: expected ')' to close the '(' at 1:10"},
        {"root ::= \"a\" )\n", "1:14: unmatched ')'"},
        {"root ::= \"abc\n", "1:10: unterminated string literal"},
        {"root ::= [a-\n", "1:10: unterminated character class"},
        {"root ::= \"\\q\"\n", "1:11: unknown escape '\\q'"},
        {"root ::= \"\\x4\"\n", "expected 2 hex digits after '\\x'"},
        {"root ::= \"\\u12G4\"\n", "expected 4 hex digits after '\\u'"},
        {"root ::= *\n", "must follow an item"},
        {"root ::= \"a\"{x}\n", "expected a number"},
        {"root ::= \"a\"{2\n", "expected ',' or '}'"},
        {"root ::= \"a\"{2,3\n", "expected '}'"},
        {"root ::= \"a\"{3,2}\n", "maximum is below the minimum"},
        {"root ::= \"a\"{2001}\n", "exceeds 2000"},
        {"root ::= (\"a\"{0,50}){0,50}\n", "nested repetitions expand to 2550 copies"},
        {"root ::= !x\n", "expected '<' after '!'"},
        {"root ::= <think>\n", "needs a vocabulary"},
        {"root ::= <[12\n", "expected ']>'"},
        {"root ::= <abc\n", "unterminated token reference"},
        {"my_rule ::= \"a\"\n", "1:3: rule names may contain only letters, digits and '-'"},
        {"root ::= \"a\"\n| \"b\"\n", "2:1: expected a rule name, got '|'"},
        {"root ::= \"\xC3\x28\"\n", "invalid UTF-8"},
        {"root ::= \"a\" \"b\" @\n", "1:18: expected an item, '|' or the end of the line, got '@'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        sift_error err = {0};
        sift_grammar *g = parse(cases[i].text, &err);
        if (g) fail_msg("case %zu parsed: %s", i, cases[i].text);
        assert_int_equal(err.status, SIFT_E_PARSE);
        if (!strstr(err.msg, cases[i].want)) fail_msg("case %zu: message '%s' lacks '%s'", i, err.msg, cases[i].want);
    }
}

/* Helper rules with equal bodies are one rule (the same repetition or group written in many
 * rules); the language is the same, and the limits still count every copy. */
static void test_shared_helpers(void **state)
{
    (void)state;
    sift_error err = {0};
    sift_grammar *g = parse("root ::= a \",\" b\na ::= \"x\" [0-9]* (\"p\" | \"q\")?\nb ::= \"y\" [0-9]* (\"p\" | \"q\")?\n", &err);
    assert_non_null(g);
    assert_int_equal(g->n_rules, 6); /* root, a, b, and one [0-9]*, one group, one "?" (was 9) */
    MATCH(g, "x12p,y", SIFT_GRAMMAR_COMPLETE);
    MATCH(g, "xq,y3q", SIFT_GRAMMAR_COMPLETE);
    MATCH(g, "x1pp,y", SIFT_GRAMMAR_REJECTED);
    MATCH(g, "x1,y2", SIFT_GRAMMAR_COMPLETE);
    sift_grammar_free(g);
    /* bounded repetitions: the chain of {0,3} helpers is made once */
    g = parse("root ::= a b\na ::= [0-9]{0,3}\nb ::= [0-9]{0,3} \"!\"\n", &err);
    assert_non_null(g);
    assert_int_equal(g->n_rules, 6);
    MATCH(g, "123456!", SIFT_GRAMMAR_COMPLETE);
    MATCH(g, "!", SIFT_GRAMMAR_COMPLETE);
    MATCH(g, "1234567!", SIFT_GRAMMAR_REJECTED);
    sift_grammar_free(g);
    /* the nested-repetition limit counts the shared copies: 101 rules inside x 20 */
    assert_null(parse("root ::= (\"a\"{0,50} \"a\"{0,50}){0,20}\n", &err));
    assert_non_null(strstr(err.msg, "nested repetitions expand to 2020 copies"));
}

static void test_limits(void **state)
{
    (void)state;
    sift_error err = {0};
    /* groups nested deeper than the limit: an error, not a stack overflow */
    size_t n = 5000;
    char *t = malloc(n * 2 + 32);
    strcpy(t, "root ::= ");
    size_t k = strlen(t);
    for (size_t i = 0; i < n; i++) t[k++] = '(';
    t[k++] = '"';
    t[k++] = 'a';
    t[k++] = '"';
    for (size_t i = 0; i < n; i++) t[k++] = ')';
    t[k] = 0;
    assert_null(parse(t, &err));
    assert_non_null(strstr(err.msg, "nested more than"));
    free(t);
    /* {m,n} with n above 2000 means unbounded (llama.cpp) */
    sift_grammar *g = parse("root ::= \"a\"{1,5000}\n", &err);
    assert_non_null(g);
    sift_grammar_free(g);
    /* a grammar that would expand past the element cap is refused (a literal repeated is
     * copied; a repeated group is not) */
    size_t big = 4096;
    t = malloc(big + 64);
    strcpy(t, "root ::= \"");
    k = strlen(t);
    for (size_t i = 0; i < big; i++) t[k++] = 'x';
    strcpy(t + k, "\"{1999}\n");
    g = parse(t, &err);
    assert_null(g);
    assert_non_null(strstr(err.msg, "too large"));
    free(t);
    /* NUL bytes in the text are just bytes that cannot start anything */
    assert_null(sift_grammar_parse("root ::= \"a\"\0", 13, NULL, NULL, &err));
    assert_int_equal(err.status, SIFT_E_PARSE);
}

static void test_token_references(void **state)
{
    (void)state;
    sift_error err = {0};
    /* ids parse without a vocabulary */
    sift_grammar *g = parse("root ::= <[5]> !<[7]> \"a\"\n", &err);
    assert_non_null(g);
    /* a text never matches a token element */
    MATCH(g, "a", SIFT_GRAMMAR_REJECTED);
    MATCH(g, "", SIFT_GRAMMAR_PREFIX);
    sift_grammar_free(g);
    /* <text> through a vocabulary: the token whose text it is (control tokens preferred) */
    const char *texts[] = {"a", "<think>", "</think>", "<think>"};
    uint8_t attrs[] = {SIFT_TOKEN_ATTR_NORMAL, SIFT_TOKEN_ATTR_NORMAL, SIFT_TOKEN_ATTR_CONTROL, SIFT_TOKEN_ATTR_CONTROL};
    gt_vocab v;
    gt_vocab_make(&v, texts, NULL, attrs, 4);
    const char *gt = "root ::= <think> !</think>\n";
    g = sift_grammar_parse(gt, strlen(gt), NULL, &v.view, &err);
    if (!g) fail_msg("%s", err.msg);
    sift_grammar_free(g);
    const char *bad = "root ::= <nothere>\n";
    assert_null(sift_grammar_parse(bad, strlen(bad), NULL, &v.view, &err));
    assert_non_null(strstr(err.msg, "is not a token of the vocabulary"));
    const char *range = "root ::= <[4]>\n";
    assert_null(sift_grammar_parse(range, strlen(range), NULL, &v.view, &err));
    assert_non_null(strstr(err.msg, "not in the vocabulary"));
    gt_vocab_free(&v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_all_grammar_files_parse), cmocka_unit_test(test_literals_and_escapes),
        cmocka_unit_test(test_classes),                 cmocka_unit_test(test_repetitions),
        cmocka_unit_test(test_layout),                  cmocka_unit_test(test_recursion),
        cmocka_unit_test(test_errors),                  cmocka_unit_test(test_limits),
        cmocka_unit_test(test_token_references),       cmocka_unit_test(test_shared_helpers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
