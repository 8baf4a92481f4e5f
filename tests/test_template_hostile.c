/*
 * test_template_hostile.c - chat templates and contexts written by an attacker (a GGUF's
 * tokenizer.chat_template, a client's chat request) end with an error within 1 s of CPU
 * and 64 MiB of render memory, under the default step budget: the engine charges work, not
 * nodes (issue 26). Each test is one reproducer from the issue:
 *   - a list that shares itself 64 levels deep compared with ==, sort, unique, in,
 *     loop.changed (2^64 comparisons before);
 *   - str.rfind (quadratic before);
 *   - |length, s[-1], in, == on a large string in a loop (O(length) for one step before);
 *   - a message with 131k extra keys (quadratic dict building: 61 s of CPU before);
 * and the budgets a server puts around a render: wall clock, an abort callback, a memory
 * pool shared by all renders. Memory is held to 64 MiB by giving each render a pool of that
 * size: a render that needed more would fail with SIFT_E_NOMEM, not the step error wanted.
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

#include "sift.h"
#include "slow.h"

/* The acceptance bounds (sanitizer and valgrind runs check the outcome, not the clock). */
#define MAX_CPU_S 1.0
#define MAX_MEM ((size_t)64 << 20)

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Render tpl with ctx under the default budgets and a MAX_MEM pool; returns the status, the
 * output (or NULL) in *out and the message in err. Fails the test past MAX_CPU_S. */
static sift_status bounded(const char *tpl, const char *ctx, char **out, sift_error *err)
{
    sift_template *t = sift_template_parse(tpl, strlen(tpl), err);
    assert_non_null(t);
    sift_template_pool *pool = sift_template_pool_new(MAX_MEM);
    assert_non_null(pool);
    sift_template_options o;
    sift_template_options_init(&o);
    o.pool = pool;
    const double t0 = cpu_now();
    sift_status st = sift_template_render(t, ctx, ctx ? strlen(ctx) : 0, &o, out, NULL, err);
    const double cpu = cpu_now() - t0;
    print_message("  %.3f s CPU: %s\n", cpu, st == SIFT_OK ? "rendered" : err->msg);
    if (!SLOW() && cpu > MAX_CPU_S) fail_msg("%s: %.2f s of CPU, more than %.1f", tpl, cpu, MAX_CPU_S);
    assert_int_equal(sift_template_pool_used(pool), 0); /* the render gave its memory back */
    sift_template_pool_free(pool);
    sift_template_free(t);
    return st;
}

/* The render must fail with a message containing want. */
static void expect_error(const char *tpl, const char *ctx, const char *want)
{
    sift_error err = {0};
    char *out = NULL;
    sift_status st = bounded(tpl, ctx, &out, &err);
    if (st == SIFT_OK) fail_msg("%s: rendered %zu bytes, wanted an error", tpl, strlen(out));
    assert_null(out);
    if (!strstr(err.msg, want)) fail_msg("%s: error '%s', wanted '%s'", tpl, err.msg, want);
}

static void expect_output(const char *tpl, const char *ctx, const char *want)
{
    sift_error err = {0};
    char *out = NULL;
    sift_status st = bounded(tpl, ctx, &out, &err);
    if (st != SIFT_OK) fail_msg("%s: %s", tpl, err.msg);
    assert_string_equal(out, want);
    free(out);
}

#define DEEP_AB "{% set ns = namespace(a=[1], b=[1]) %}{% for i in range(64) %}" \
                "{% set ns.a = [ns.a, ns.a] %}{% set ns.b = [ns.b, ns.b] %}{% endfor %}"

/* Two equal lists, each sharing itself 64 levels deep: 2^64 element pairs. */
static void test_self_sharing_list_compare(void **state)
{
    (void)state;
    expect_error(DEEP_AB "{{ ns.a == ns.b }}", NULL, "steps");
    expect_error(DEEP_AB "{{ ns.a != ns.b }}", NULL, "steps");
    expect_error(DEEP_AB "{{ [ns.a, ns.b]|sort|length }}", NULL, "steps");
    expect_error(DEEP_AB "{{ [ns.a, ns.b]|unique|list|length }}", NULL, "steps");
    expect_error(DEEP_AB "{{ ns.a in [ns.b] }}", NULL, "steps");
    expect_error(DEEP_AB "{{ [ns.b].index(ns.a) }}", NULL, "steps");
    expect_error(DEEP_AB "{% for x in [ns.a, ns.b] %}{{ loop.changed(x) }}{% endfor %}", NULL, "steps");
    expect_error(DEEP_AB "{{ ns.a is eq(ns.b) }}", NULL, "steps");
    /* the same object is equal to itself at once (Python's identity rule for containers) */
    expect_output(DEEP_AB "{{ ns.a == ns.a }} {{ [ns.a, ns.a]|unique|list|length }} {{ ns.a in [ns.a] }}"
                          "{% for x in [ns.a, ns.a] %}{{ loop.changed(x) }}{% endfor %}",
                  NULL, "True 1 TrueTrueFalse");
}

static void test_rfind_linear(void **state)
{
    (void)state;
    /* a 1 MB text and a 500 kB needle that almost matches everywhere: 2.5e11 byte compares before */
    expect_output("{% set s = 'a' * 1000000 %}{{ s.rfind('a' * 500000 ~ 'b') }} {{ s.rfind('a' * 500000) }}", NULL,
                  "-1 500000");
    expect_output("{{ 'abcabc'.rfind('bc') }} {{ 'abc'.rfind('') }} {{ 'abc'.rfind('abcd') }} {{ 'aaa'.rfind('aa') }}"
                  " {{ 'xé€yé€'.rfind('é€') }}",
                  NULL, "4 3 -1 1 4");
}

/* O(length) operations on a 16 MB string, 100000 times: each costs its length (two such strings
 * fit the 64 MiB pool: a repetition is built at its size). */
static void test_long_string_operations_charged(void **state)
{
    (void)state;
#define BIG "{% set s = 'x' * 16000000 %}{% set t = 'x' * 16000000 %}{% for i in range(100000) %}"
    expect_error(BIG "{% if s|length > 0 %}{% endif %}{% endfor %}", NULL, "steps");
    expect_error(BIG "{% if s[-1] == 'y' %}{% endif %}{% endfor %}", NULL, "steps");
    expect_error(BIG "{% if 'y' in s %}{% endif %}{% endfor %}", NULL, "steps");
    expect_error(BIG "{% if s == t %}{% endif %}{% endfor %}", NULL, "steps");
    expect_error(BIG "{% if s < t %}{% endif %}{% endfor %}", NULL, "steps");
    expect_error(BIG "{% if s.count('y') %}{% endif %}{% endfor %}", NULL, "steps");
    expect_error(BIG "{% if s.endswith(t) %}{% endif %}{% endfor %}", NULL, "steps");
#undef BIG
}

/* A context JSON of one message with `extra` keys besides role and content. */
static char *wide_message(int extra)
{
    size_t cap = 64 + (size_t)extra * 24;
    char *j = malloc(cap);
    size_t n = (size_t)snprintf(j, cap, "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"");
    for (int i = 0; i < extra; i++) n += (size_t)snprintf(j + n, cap - n, ", \"k%d\": %d", i, i);
    snprintf(j + n, cap - n, "}], \"add_generation_prompt\": true}");
    return j;
}

#define CHATML "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + " \
               "'<|im_end|>' + '\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"

static void test_many_keys(void **state)
{
    (void)state;
    /* 131k extra keys: over the documented limit, refused */
    char *j = wide_message(131072);
    expect_error(CHATML, j, "more than 16384 keys");
    free(j);
    /* at the limit: hashed, so a linear render */
    j = wide_message(SIFT_TEMPLATE_MAX_KEYS - 2);
    expect_output(CHATML, j, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
    free(j);
    expect_output("{{ message.k16000 }} {{ message|length }} {{ 'k9' in message }} {{ message.get('k3') }}",
                  "{\"message\": {\"k16000\": 1, \"k9\": 2, \"k3\": 3, \"a\": 0, \"b\": 0, \"c\": 0, \"d\": 0, \"e\": 0, "
                  "\"f\": 0, \"g\": 0}}",
                  "1 10 True 3");
    /* 1, 1.0 and True are one key, in a hashed dict as in a small one */
    expect_output("{% set d = {1: 'a', 2: 'b', 3: 'c', 4: 'd', 5: 'e', 6: 'f', 7: 'g', 8: 'h', 9: 'i'} %}"
                  "{{ d[1.0] }}{{ d[true] }}{{ d[9] }}{{ {1: 'x', true: 'y'} }}",
                  NULL, "aai{1: 'y'}");
    /* context variables (hashed too) override the globals */
    expect_output("{{ range }}", "{\"range\": 5}", "5");
}

static void test_wall_clock(void **state)
{
    (void)state;
    sift_template_options o;
    sift_template_options_init(&o);
    o.max_steps = UINT64_MAX;
    o.max_time_ms = 50;
    char *out = NULL;
    sift_error err = {0};
    const char *loop = "{% for a in range(100000) %}{% for b in range(100000) %}{% if a == b %}{% endif %}"
                       "{% endfor %}{% endfor %}";
    sift_template *t = sift_template_parse(loop, strlen(loop), &err);
    assert_non_null(t);
    o.max_memory = (size_t)4 << 30;
    sift_template_pool *pool = sift_template_pool_new((size_t)64 << 20);
    o.pool = pool;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    sift_status st = sift_template_render(t, NULL, 0, &o, &out, NULL, &err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    const double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-6;
    print_message("  %.1f ms: %s\n", ms, err.msg);
    assert_int_not_equal(st, SIFT_OK);
    /* either the clock or the pool ends it; with 64 MiB the clock comes first */
    assert_non_null(strstr(err.msg, "longer than 50 ms"));
    if (!SLOW()) assert_true(ms < 500);
    sift_template_pool_free(pool);
    sift_template_free(t);
}

typedef struct abort_state { int calls, stop_at; } abort_state;

static bool stop_after(void *data)
{
    abort_state *a = data;
    return ++a->calls >= a->stop_at;
}

static void test_abort_callback(void **state)
{
    (void)state;
    const char *loop = "{% for a in range(100000) %}{% if a == 3 %}{% endif %}{% endfor %}done";
    sift_error err = {0};
    sift_template *t = sift_template_parse(loop, strlen(loop), &err);
    assert_non_null(t);
    sift_template_options o;
    sift_template_options_init(&o);
    abort_state a = {0, 3};
    o.abort_cb = stop_after;
    o.abort_data = &a;
    char *out = NULL;
    assert_int_equal(sift_template_render(t, NULL, 0, &o, &out, NULL, &err), SIFT_E_STATE);
    assert_null(out);
    assert_non_null(strstr(err.msg, "abandoned"));
    assert_int_equal(a.calls, 3);
    /* a callback that never says stop changes nothing */
    a = (abort_state){0, 1 << 30};
    assert_int_equal(sift_template_render(t, NULL, 0, &o, &out, NULL, &err), SIFT_OK);
    assert_string_equal(out, "done");
    assert_true(a.calls > 0);
    free(out);
    sift_template_free(t);
}

/* A pool caps what all renders hold together; each gives its memory back at the end. */
static void test_shared_pool(void **state)
{
    (void)state;
    const char *grow = "{% set ns = namespace(s='x') %}{% for i in range(30) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}"
                       "{{ ns.s|length }}";
    sift_error err = {0};
    sift_template *t = sift_template_parse(grow, strlen(grow), &err);
    assert_non_null(t);
    sift_template_pool *pool = sift_template_pool_new((size_t)16 << 20);
    sift_template_options o;
    sift_template_options_init(&o);
    o.pool = pool;
    char *out = NULL;
    assert_int_equal(sift_template_render(t, NULL, 0, &o, &out, NULL, &err), SIFT_E_NOMEM);
    assert_non_null(strstr(err.msg, "budget"));
    assert_int_equal(sift_template_pool_used(pool), 0);
    /* a small render fits, and returns everything */
    sift_template *small = sift_template_parse("{{ 'ok' }}", 10, &err);
    assert_int_equal(sift_template_render(small, NULL, 0, &o, &out, NULL, &err), SIFT_OK);
    assert_string_equal(out, "ok");
    free(out);
    assert_int_equal(sift_template_pool_used(pool), 0);
    sift_template_free(small);
    sift_template_pool_free(pool);
    sift_template_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_self_sharing_list_compare),
        cmocka_unit_test(test_rfind_linear),
        cmocka_unit_test(test_long_string_operations_charged),
        cmocka_unit_test(test_many_keys),
        cmocka_unit_test(test_wall_clock),
        cmocka_unit_test(test_abort_callback),
        cmocka_unit_test(test_shared_pool),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
