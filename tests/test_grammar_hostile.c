/*
 * test_grammar_hostile.c - a 478-byte grammar whose parse stacks multiply with every
 * character (a_i ::= a_{i+1} a_{i+1} | [a-z], 20 levels: 2^20 ways to parse a text) ends
 * with an error that names SIFT_GRAMMAR_MAX_STACKS within 1 s of CPU (issue 26; before, a
 * generation of 64 tokens took 12 minutes of CPU and 2 GB): refused when it is compiled, and
 * where the compile-time probe cannot see it (behind a long literal), at run time. Ambiguous grammars under the
 * limit (x{0,1000}-like, up to about a thousand stacks) still work.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "grammar_util.h"
#include "sift.h"
#include "slow.h"

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* a_0 .. a_{levels}: a_i ::= a_{i+1} a_{i+1} | [a-z] */
static char *exponential(int levels)
{
    char *g = malloc(64 + (size_t)levels * 48);
    size_t n = (size_t)sprintf(g, "root ::= a0\n");
    for (int i = 0; i < levels; i++) n += (size_t)sprintf(g + n, "a%d ::= a%d a%d | [a-z]\n", i, i + 1, i + 1);
    sprintf(g + n, "a%d ::= [a-z]\n", levels);
    return g;
}

static void test_match_bounded(void **state)
{
    (void)state;
    char *text = exponential(20);
    assert_int_equal(strlen(text), 478);
    sift_error err = {0};
    sift_grammar *g = sift_grammar_parse(text, strlen(text), "root", NULL, &err);
    assert_non_null(g);
    char s[65];
    memset(s, 'a', 64);
    s[64] = 0;
    const double t0 = cpu_now();
    assert_int_equal(sift_grammar_match(g, s, 64, NULL), SIFT_GRAMMAR_ERROR); /* over the limit: undecided */
    const double cpu = cpu_now() - t0;
    print_message("  match of 64 bytes: %.3f s CPU\n", cpu);
    if (!SLOW()) assert_true(cpu < 1.0);
    /* short texts are still decided */
    assert_int_equal(sift_grammar_match(g, "ab", 2, NULL), SIFT_GRAMMAR_COMPLETE);
    assert_int_equal(sift_grammar_match(g, "a1", 2, NULL), SIFT_GRAMMAR_REJECTED);
    sift_grammar_free(g);
    free(text);
    /* an ambiguous grammar under the limit: x? eight times, then y */
    const char *opt = "root ::= \"x\"? \"x\"? \"x\"? \"x\"? \"x\"? \"x\"? \"x\"? \"x\"? \"y\"\n";
    g = sift_grammar_parse(opt, strlen(opt), "root", NULL, &err);
    assert_non_null(g);
    assert_int_equal(sift_grammar_match(g, "xxxy", 4, NULL), SIFT_GRAMMAR_COMPLETE);
    sift_grammar_free(g);
}

/* Six tokens: letters up to eight long, and an end-of-generation one. */
static void letters_vocab(gt_vocab *v)
{
    static const char *t[] = {"a", "b", "ab", "abcd", "abcdefgh", "</s>"};
    uint8_t attr[6] = {SIFT_TOKEN_ATTR_NORMAL, SIFT_TOKEN_ATTR_NORMAL, SIFT_TOKEN_ATTR_NORMAL, SIFT_TOKEN_ATTR_NORMAL,
                       SIFT_TOKEN_ATTR_NORMAL, SIFT_TOKEN_ATTR_CONTROL | SIFT_TOKEN_ATTR_EOG};
    gt_vocab_make(v, t, NULL, attr, 6);
}

/* The compile-time probe (sift__gx_stacks_probe): the exponential grammar is refused when it
 * is compiled - before a slot is taken, in milliseconds - with an error naming the limit. */
static void test_refused_at_compile(void **state)
{
    (void)state;
    gt_vocab v;
    letters_vocab(&v);
    char *text = exponential(20);
    sift_error err = {0};
    const double t0 = cpu_now();
    sift_sampler *s = sift_sampler_init_grammar(&v.view, text, "root", &err);
    const double cpu = cpu_now() - t0;
    print_message("  refused in %.4f s CPU: %s\n", cpu, err.msg);
    assert_null(s);
    assert_int_equal(err.status, SIFT_E_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "SIFT_GRAMMAR_MAX_STACKS"));
    if (!SLOW()) assert_true(cpu < 0.25);
    /* the same through a compiler */
    sift_grammar_compiler *comp = sift_grammar_compiler_new(&v.view, NULL, &err);
    assert_non_null(comp);
    memset(&err, 0, sizeof err);
    assert_null(sift_grammar_compile(comp, text, strlen(text), "root", &err));
    assert_non_null(strstr(err.msg, "SIFT_GRAMMAR_MAX_STACKS"));
    /* ambiguity under the limit compiles: x? eight times, then y */
    const char *opt = "root ::= \"x\"? \"x\"? \"x\"? \"x\"? \"x\"? \"x\"? \"x\"? \"x\"? \"y\"\n";
    sift_compiled_grammar *cg = sift_grammar_compile(comp, opt, strlen(opt), "root", &err);
    assert_non_null(cg);
    sift_compiled_grammar_free(cg);
    sift_grammar_compiler_free(comp);
    free(text);
    gt_vocab_free(&v);
}

/* Sampling, the run-time bound: behind a literal longer than the probe looks (72 letters),
 * the stacks outgrow the limit after a few more letters; the sampler then allows nothing and
 * says SIFT_GRAMMAR_OVER_LIMIT (the server answers 400 naming the limit). */
static void test_sampler_over_limit(void **state)
{
    (void)state;
    gt_vocab v;
    letters_vocab(&v);
    char *exp = exponential(20);
    char *text = malloc(strlen(exp) + 128);
    sprintf(text, "root ::= \"abcdefghabcdefghabcdefghabcdefghabcdefghabcdefghabcdefghabcdefghabcdefgh\" a0\n%s",
            exp + strlen("root ::= a0\n"));
    free(exp);
    sift_error err = {0};
    const double t0 = cpu_now();
    sift_sampler *s = sift_sampler_init_grammar(&v.view, text, "root", &err);
    assert_non_null(s);
    sift_grammar_status st = SIFT_GRAMMAR_ACTIVE;
    int steps = 0;
    for (; steps < 64; steps++) {
        st = sift_grammar_sampler_status(s);
        if (st == SIFT_GRAMMAR_OVER_LIMIT) break;
        /* what the sampler allows now (the mask path: all six candidates) */
        sift_candidates c;
        assert_int_equal(sift_candidates_init(&c, 6), SIFT_OK);
        const float logits[6] = {0, 0, 0, 0, 0, 0};
        assert_int_equal(sift_candidates_fill(&c, logits, 6), SIFT_OK);
        sift_sampler_apply(s, &c);
        sift_candidates_free(&c);
        if (sift_grammar_sampler_status(s) == SIFT_GRAMMAR_OVER_LIMIT) continue;
        sift_sampler_accept(s, 4); /* eight more letters */
    }
    const double cpu = cpu_now() - t0;
    print_message("  over the limit after %d tokens, %.3f s CPU\n", steps, cpu);
    assert_int_equal(st, SIFT_GRAMMAR_OVER_LIMIT);
    if (!SLOW()) assert_true(cpu < 1.0);
    /* over the limit, nothing is allowed, not even the end */
    for (int k = 0; k < 6; k++) assert_false(sift_grammar_sampler_allows(s, k));
    /* reset starts afresh */
    sift_sampler_reset(s);
    assert_int_equal(sift_grammar_sampler_status(s), SIFT_GRAMMAR_ACTIVE);
    assert_true(sift_grammar_sampler_allows(s, 0));
    sift_sampler_free(s);
    free(text);
    gt_vocab_free(&v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_match_bounded),
        cmocka_unit_test(test_refused_at_compile),
        cmocka_unit_test(test_sampler_over_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
