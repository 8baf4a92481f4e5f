/*
 * test_template.c - the chat-template (Jinja) engine: rendering cases whose expected text
 * was produced by Python jinja2 3.1 configured as transformers configures it (the
 * environment of shared/chat-templates/render.py), so every expectation is the reference's
 * output, not ours; errors where jinja2 raises, with the template line in the message; and
 * hostile templates (endless loops, runaway recursion, huge output, deep nesting, broken
 * JSON) that must end with an error, not a hang or a crash.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sift.h"

/* template, context JSON, 1 if jinja2 rendered it (then: its output) or 0 (then: its error) */
typedef struct tcase { const char *tpl, *ctx; int ok; const char *want; } tcase;
static const tcase CASES[] = {
    {"{{ 'a' ~ 1 ~ none ~ true }}",
     "{}",
     1, "a1NoneTrue"},
    {"{{ [1, 'x', none, 1.5, {'k': [true]}] }}",
     "{}",
     1, "[1, 'x', None, 1.5, {'k': [True]}]"},
    {"{{ 1.0 }} {{ 1e20 }} {{ 0.0001 }} {{ 1/3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 10 / 4 }}",
     "{}",
     1, "1.0 1e+20 0.0001 0.3333333333333333 3 -4 2 1024 2.5"},
    {"{{ x | tojson }}|{{ x | tojson(indent=2) }}|{{ x|tojson(sort_keys=true) }}",
     "{\"x\": {\"b\": [1, 2.5, \"\\u00e9\\\"\\n\"], \"a\": null, \"c\": {}}}",
     1, "{\"b\": [1, 2.5, \"\303\251\\\"\\n\"], \"a\": null, \"c\": {}}|{\n  \"b\": [\n    1,\n    2.5,\n    \"\303\251\\\"\\n\"\n  ],\n  \"a\": null,\n  \"c\": {}\n}|{\"a\": null, \"b\": [1, 2.5, \"\303\251\\\"\\n\"], \"c\": {}}"},
    {"{% for m in msgs %}{{ loop.index }}/{{ loop.length }}{{ loop.first }}{{ loop.last }}{{ loop.revindex0 }}:{{ m }};{% endfor %}",
     "{\"msgs\": [\"a\", \"b\", \"c\"]}",
     1, "1/3TrueFalse2:a;2/3FalseFalse1:b;3/3FalseTrue0:c;"},
    {"{% for i in range(10) %}{% if i is odd %}{% continue %}{% endif %}{% if i > 6 %}{% break %}{% endif %}{{ i }}{% endfor %}",
     "{}",
     1, "0246"},
    {"{% for k, v in d.items() %}{{ k }}={{ v }},{% endfor %}{% for k in d %}{{ k }}{% endfor %}",
     "{\"d\": {\"z\": 1, \"a\": 2}}",
     1, "z=1,a=2,za"},
    {"{% for x in [] %}x{% else %}empty{% endfor %}",
     "{}",
     1, "empty"},
    {"{% for x in xs if x > 1 %}{{ x }}{{ loop.index }}{% endfor %}",
     "{\"xs\": [1, 2, 3]}",
     1, "2132"},
    {"{% set ns = namespace(n=0) %}{% for i in range(4) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}",
     "{}",
     1, "6"},
    {"{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% endfor %}{{ x }}",
     "{}",
     1, "1"},
    {"{% macro f(a, b='B', c=none) %}[{{ a }}{{ b }}{{ c }}{{ varargs }}{{ kwargs }}]{% endmacro %}{{ f(1) }}{{ f(1, 2, 3, 4) }}{{ f(a=5, z=6) }}",
     "{}",
     1, "[1BNone(){}][123(4,){}][5BNone(){'z': 6}]"},
    {"{% macro wrap(t) %}<{{ caller() }}:{{ t }}>{% endmacro %}{% call wrap('x') %}inner{% endcall %}",
     "{}",
     1, "<inner:x>"},
    {"{% macro m() %}{{ caller(7) }}{% endmacro %}{% call(n) m() %}got {{ n }}{% endcall %}",
     "{}",
     1, "got 7"},
    {"{% filter upper %}hello {{ 'w' }}{% endfilter %}",
     "{}",
     1, "HELLO W"},
    {"{% set b %}  block {{ 1 }}  {% endset %}[{{ b }}]{% set c | trim %}  t  {% endset %}[{{ c }}]",
     "{}",
     1, "[  block 1  ][t]"},
    {"{{ s[1:] }}|{{ s[:-1] }}|{{ s[::-1] }}|{{ s[1:4:2] }}|{{ l[-2:] }}|{{ l[::2] }}|{{ s[0] }}{{ l[-1] }}",
     "{\"s\": \"h\\u00e9llo\", \"l\": [1, 2, 3, 4, 5]}",
     1, "\303\251llo|h\303\251ll|oll\303\251h|\303\251l|[4, 5]|[1, 3, 5]|h5"},
    {"{{ x is defined }}{{ y is defined }}{{ n is none }}{{ s is string }}{{ d is mapping }}{{ l is iterable }}{{ l is sequence }}{{ 3 is odd }}{{ 4 is divisibleby 2 }}{{ s is not string }}{{ 1 is integer }}{{ 1.0 is float }}{{ true is boolean }}{{ 'a' in s }}{{ 'q' not in s }}{{ 1 is number }}{{ x is sameas none }}",
     "{\"x\": null, \"n\": null, \"s\": \"abc\", \"d\": {}, \"l\": [1]}",
     1, "TrueFalseTrueTrueTrueTrueTrueTrueTrueFalseTrueTrueTrueTrueTrueTrueTrue"},
    {"{{ '  a b  '|trim }}|{{ 'xxaxx'|trim('x') }}|{{ ' a '.strip() }}|{{ 'abc'.lstrip('a') }}|{{ 'abc'.rstrip('c') }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a b c'.split(' ', 1) }}",
     "{}",
     1, "a b|a|a|bc|ab|['a', 'b', '', 'c']|['a', 'b']|['a', 'b c']"},
    {"{{ 'Hello'.upper() }}{{ 'Hello'|lower }}{{ 'hello world'|title }}{{ 'hELLO'|capitalize }}{{ 'abc'.startswith('a') }}{{ 'abc'.endswith(('x', 'c')) }}{{ 'aaa'.replace('a', 'b', 2) }}{{ 'abc'|replace('b', 'X') }}",
     "{}",
     1, "HELLOhelloHello WorldHelloTrueTruebbaaXc"},
    {"{{ d.get('a') }}{{ d.get('zz', 'dflt') }}{{ d.keys()|list }}{{ d.values()|list }}{{ d|dictsort }}{{ d|items|list }}",
     "{\"d\": {\"b\": 1, \"a\": 2}}",
     1, "2dflt['b', 'a'][1, 2][('a', 2), ('b', 1)][('b', 1), ('a', 2)]"},
    {"{{ xs|length }}{{ 'h\303\251llo'|length }}{{ xs|join(', ') }}{{ xs|first }}{{ xs|last }}{{ xs|reverse|list }}{{ xs|sort }}{{ xs|sum }}{{ xs|min }}{{ xs|max }}{{ [1,1,2]|unique|list }}",
     "{\"xs\": [3, 1, 2]}",
     1, "353, 1, 232[2, 1, 3][1, 2, 3]613[1, 2]"},
    {"{{ ms|selectattr('role', 'equalto', 'user')|map(attribute='c')|join }}|{{ ms|rejectattr('role', 'eq', 'user')|list|length }}|{{ ms|map(attribute='role')|list }}|{{ ms|selectattr('x')|list }}",
     "{\"ms\": [{\"role\": \"user\", \"c\": \"a\"}, {\"role\": \"bot\", \"c\": \"b\", \"x\": 1}, {\"role\": \"user\", \"c\": \"c\"}]}",
     1, "ac|1|['user', 'bot', 'user']|[{'role': 'bot', 'c': 'b', 'x': 1}]"},
    /* none filtered is an empty sequence, as llama.cpp's engine (Functionary v3.1's none tools) */
    {"{{ n|selectattr('type', 'equalto', 'x')|list|length }}{{ n|rejectattr('t')|list }}{{ n|select|list }}{{ n|map(attribute='a')|list }}",
     "{\"n\": null}",
     1, "0[][][]"},
    {"{{ u|default('D') }}{{ n|default('D') }}{{ ''|default('D', true) }}{{ u|d('E') }}{{ '12'|int + 1 }}{{ 'x'|int }}{{ '1.5'|float }}{{ 3|string + 'a' }}{{ -3|abs }}{{ 2.567|round(2) }}",
     "{\"n\": null}",
     1, "DNoneDE1301.53a32.57"},
    {"{{ 'a' if x else 'b' }}{{ 'c' if not x }}{{ x and 'y' }}{{ x or 'z' }}{{ 1 < 2 < 3 }}{{ 1 == 1.0 }}{{ [1,2] == [1,2] }}{{ 'a' < 'b' }}",
     "{\"x\": 0}",
     1, "bc0zTrueTrueTrueTrue"},
    {"{{ \"it's\" }}{{ 'say \"hi\"' }}{{ 'a\\nb' }}{{ '\\u00e9' }}{{ 'a' 'b' }}",
     "{}",
     1, "it'ssay \"hi\"a\nb\303\251ab"},
    {"{{ ['it\\'s', \"q\\\"\", 'a\\nb', '\303\251'] }}",
     "{}",
     1, "[\"it's\", 'q\"', 'a\\nb', '\303\251']"},
    {"{{ {'a': 1, 'b': none, 'c': [true, 'x']} }}{{ x }}",
     "{\"x\": {\"k\": 1.5}}",
     1, "{'a': 1, 'b': None, 'c': [True, 'x']}{'k': 1.5}"},
    {"  {% if true %}\n  yes\n  {% endif %}\n  {{- ' no' }}\n{# comment #}\nend  \n",
     "{}",
     1, "  yes\n no\nend  "},
    {"a\n{%- if true -%}\n  b  \n{%- endif -%}\nc\n{%+ if true %}d{% endif %}\n  {% if true +%}\ne\n{% endif %}",
     "{}",
     1, "abc\nd\ne\n"},
    {"{% for m in messages %}\n    {% if m.role == 'user' %}\n        U: {{ m.content }}\n    {% endif %}\n{% endfor %}\n",
     "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}",
     1, "        U: hi\n"},
    {"{{ strftime_now('%Y-%m-%d %d %B %b') }}",
     "{}",
     1, "2024-07-26 26 July Jul"},
    {"{{ raise_exception('bad ' ~ 1) }}",
     "{}",
     0, "TemplateError: bad 1"},
    {"{{ u.x }}",
     "{}",
     0, "UndefinedError: 'u' is undefined"},
    {"{{ d.missing.x }}",
     "{\"d\": {}}",
     0, "UndefinedError: 'dict object' has no attribute 'missing'"},
    {"{{ 'a' + 1 }}",
     "{}",
     0, "TypeError: can only concatenate str (not \"int\") to str"},
    {"{% for x in n %}{% endfor %}",
     "{\"n\": null}",
     0, "TypeError: 'NoneType' object is not iterable"},
    {"{% set l = [] %}{{ l.append(1) }}",
     "{}",
     0, "SecurityError: access to attribute 'append' of 'list' object is unsafe."},
    {"{% set d = {} %}{% set d.x = 1 %}",
     "{}",
     0, "TemplateRuntimeError: cannot assign attribute on non-namespace object"},
    {"{% if %}",
     "{}",
     0, "TemplateSyntaxError: Expected an expression, got 'end of statement block'"},
    {"{% for x in y %}",
     "{}",
     0, "TemplateSyntaxError: Unexpected end of template. Jinja was looking for the following tags: 'endfor' or 'else'. The innermost block that needs to be closed is 'for'."},
    {"{% if x %}{% endfor %}",
     "{}",
     0, "TemplateSyntaxError: Encountered unknown tag 'endfor'. Jinja was looking for the following tags: 'elif' or 'else' or 'endif'. The innermost block that needs to be closed is 'if'."},
    {"{{ 1 + }}",
     "{}",
     0, "TemplateSyntaxError: unexpected 'end of print statement'"},
    {"{{ x | nosuchfilter }}",
     "{}",
     0, "TemplateAssertionError: No filter named 'nosuchfilter'."},
    {"{% if false %}{{ x | nosuchfilter }}{% endif %}ok",
     "{}",
     1, "ok"},
    {"{{ 1 / 0 }}",
     "{}",
     0, "ZeroDivisionError: division by zero"},
    {"{{ ns.x }}{% set ns = namespace(x=1) %}{{ ns.x }}",
     "{}",
     0, "UndefinedError: 'ns' is undefined"},
    {"{% macro r(n) %}{% if n > 0 %}{{ n }}{{ r(n - 1) }}{% endif %}{% endmacro %}{{ r(5) }}",
     "{}",
     1, "54321"},
    {"{{ x.0 }}{{ x[1] }}{{ d['k'] }}{{ d.k }}",
     "{\"x\": [\"a\", \"b\"], \"d\": {\"k\": \"v\"}}",
     1, "abvv"},
    {"{{ loop }}",
     "{}",
     1, ""},
    {"{% for a in [1,2] %}{% for b in [3,4] %}{{ loop.index }}{{ a }}{{ b }} {% endfor %}{{ loop.index }}|{% endfor %}",
     "{}",
     1, "113 214 1|123 224 2|"},
    {"{{ '%s-%d' | format('a', 3) }}{{ [1,2,3,4,5]|batch(2)|list }}{{ 'a\nb'|indent(2, true) }}{{ 'one two'|wordcount }}",
     "{}",
     1, "a-3[[1, 2], [3, 4], [5]]  a\n  b2"},
    {"{{ (1, 2) }}{{ () }}{{ [1][0:5] }}{{ 'x' * 3 }}{{ [0] * 2 }}{{ -(3) }}{{ 10 - 2 * 3 }}{{ (10 - 2) * 3 }}{{ 2 ** 3 ** 2 }}",
     "{}",
     1, "(1, 2)()[1]xxx[0, 0]-342464"},
    {"{{ x | tojson(ensure_ascii=true) }}{{ x|tojson(separators=(',', ':')) }}",
     "{\"x\": {\"a\": \"\\u00e9\\ud83d\\ude00\", \"b\": [1, 2]}}",
     1, "{\"a\": \"\\u00e9\\ud83d\\ude00\", \"b\": [1, 2]}{\"a\":\"\303\251\360\237\230\200\",\"b\":[1,2]}"},
    {"{{ 'abc'.find('c') }}{{ 'a-b'.split('-')|join('+') }}{{ 'x'.join(['a','b']) }}{{ 'Ab1'.isalnum() }}{{ '12'.isdigit() }}",
     "{}",
     1, "2a+baxbTrueTrue"},
    {"{% set a, b = [1, 2] %}{{ a }}{{ b }}{% set t = (3, 4) %}{{ t[1] }}",
     "{}",
     1, "124"},
    {"{{ 5 if x is defined }}|{{ none }}|{{ u }}|{{ true }}",
     "{}",
     1, "|None||True"},
    {"{{ '%s and %s' % ('a', 1) }}|{{ 'n=%d' % 3 }}|{{ '%s' % [1] }}|{{ 'hello world2x-y (z'|title }}{{ 'hello world2x'.title() }}",
     "{}",
     1, "a and 1|n=3|[1]|Hello World2x-Y (ZHello World2X"},
    {"{{ '%s %s' % ('a',) }}",
     "{}",
     0, "TypeError: not enough arguments for format string"},
    {"a {% raw %}{{ x }}{% if %}{% endraw %} b\n  {%- raw -%}  r  {%- endraw %}\nc",
     "{}",
     1, "a {{ x }}{% if %} brc"},
    {"{% raw %}never closed",
     "{}",
     0, "TemplateSyntaxError: Missing end of raw directive"},
    /* recursive loops, loop.changed, str.format (with format specs) */
    {"{% for x in [1] recursive %}{{ loop([1]) }}{% endfor %}",
     "{}",
     0, "RecursionError: maximum recursion depth exceeded while calling a Python object"},
    {"{% for x in items recursive %}<{{ x.n }}:{{ loop.depth }}{{ loop.depth0 }}{% if x.c %}{{ loop(x.c) }}{% endif %}>{% endfor %}",
     "{\"items\": [{\"n\": 1, \"c\": [{\"n\": 2, \"c\": [{\"n\": 3}]}]}, {\"n\": 4}]}",
     1, "<1:10<2:21<3:32>>><4:10>"},
    {"{% for x in items if x.k recursive %}{{ x.n }}{{ loop.index }}{% if x.c %}({{ loop(x.c) }}){% endif %}{% else %}-{% endfor %}",
     "{\"items\": [{\"n\": 1, \"k\": 1, \"c\": [{\"n\": 2, \"k\": 0}, {\"n\": 3, \"k\": 1}]}, {\"n\": 5, \"k\": 0}, {\"n\": 6, \"k\": 1, \"c\": []}]}",
     1, "11(31)62"},
    {"{% for x in [1, 1, 2, 3, 3, 1] %}{% if loop.changed(x) %}{{ x }}{% endif %}{% endfor %}|{% for a, b in [[1, 2], [1, 2], [1, 3]] %}{{ loop.changed(a, b) }}{% endfor %}",
     "{}",
     1, "1231|TrueFalseTrue"},
    {"{% for x in [1, 2] %}{{ loop([3]) }}{% endfor %}",
     "{}",
     0, "TypeError: The loop must have the 'recursive' marker to be called recursively."},
    {"{{ '{}+{}={}'.format(1, 2, 'three') }}|{{ '{1}{0}{1}'.format('a', 'b') }}|{{ '{name}!r={name!r} {{x}}'.format(name='n') }}|{{ '{} {}'.format(none, [1, 'x']) }}",
     "{}",
     1, "1+2=three|bab|n!r='n' {x}|None [1, 'x']"},
    {"{{ '[{:>4}|{:<5}|{:^7}|{:*^6}|{:05d}|{:=+6d}|{:.2f}|{:8.3f}|{:+}|{:.3s}|{:.1%}|{:d}|{}]'.format(1, 'ab', 'mid', 'x', 42, 7, 3.14159, 2.5, 3, 'abcdef', 0.333, true, 2.0) }}|{{ '{0!r:>6}{x!s}'.format('q', x=[1]) }}",
     "{}",
     1, "[   1|ab   |  mid  |**x***|00042|+    7|3.14|   2.500|+3|abc|33.3%|1|2.0]|   'q'[1]"},
    {"{{ '{:d}'.format('x') }}",
     "{}",
     0, "ValueError: Unknown format code 'd' for object of type 'str'"},
    {"{{ '{2}'.format(1) }}",
     "{}",
     0, "IndexError: tuple index out of range"},
    {"{{ '}'.format(1) }}",
     "{}",
     0, "ValueError: Single '}' encountered in format string"},
};

/* strftime_now pinned to 2024-07-26 00:00 UTC, as render.py pins it. */
#define TEST_NOW 1721952000

static sift_status render(const char *tpl, const char *ctx, const sift_template_options *o, char **out, sift_error *err)
{
    sift_template *t = sift_template_parse(tpl, strlen(tpl), err);
    if (!t) return err->status;
    sift_status st = sift_template_render(t, ctx, ctx ? strlen(ctx) : 0, o, out, NULL, err);
    sift_template_free(t);
    return st;
}

static void test_cases_match_jinja2(void **state)
{
    (void)state;
    sift_template_options o;
    sift_template_options_init(&o);
    o.now = TEST_NOW;
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        const tcase *c = &CASES[i];
        sift_error err = {0};
        char *out = NULL;
        sift_status st = render(c->tpl, c->ctx, &o, &out, &err);
        if (c->ok) {
            if (st != SIFT_OK) fail_msg("case %zu %s: failed: %s", i, c->tpl, err.msg);
            if (strcmp(out, c->want) != 0) fail_msg("case %zu %s:\n got [%s]\nwant [%s]", i, c->tpl, out, c->want);
        } else {
            if (st == SIFT_OK) fail_msg("case %zu %s: rendered [%s], jinja2 raised %s", i, c->tpl, out, c->want);
            assert_null(out);
            assert_true(strlen(err.msg) > 0);
            /* the kind of error jinja2 raised (TemplateError, UndefinedError, ...) is named */
            char kind[64];
            size_t k = strcspn(c->want, ":");
            snprintf(kind, sizeof kind, "%.*s", (int)k, c->want);
            if (!strstr(err.msg, kind)) fail_msg("case %zu %s: error [%s] does not name %s", i, c->tpl, err.msg, kind);
        }
        free(out);
    }
}

static void test_error_names_line(void **state)
{
    (void)state;
    sift_error err = {0};
    char *out = NULL;
    assert_int_not_equal(render("a\nb\n{{ raise_exception('boom') }}\n", NULL, NULL, &out, &err), SIFT_OK);
    assert_non_null(strstr(err.msg, "line 3"));
    assert_non_null(strstr(err.msg, "boom"));
    assert_int_equal(render("x\n{% if true %}\n{% endfor %}", NULL, NULL, &out, &err), SIFT_E_PARSE);
    assert_non_null(strstr(err.msg, "line 3"));
    assert_non_null(strstr(err.msg, "endfor"));
    assert_int_equal(render("{{ 'unterminated }}", NULL, NULL, &out, &err), SIFT_E_PARSE);
    assert_null(out);
}

static void test_context_json(void **state)
{
    (void)state;
    sift_error err = {0};
    char *out = NULL;
    assert_int_equal(render("{{ a }}", "{\"a\": [1, 2.0, \"\\u00e9\\ud83d\\ude00\", null, true]}", NULL, &out, &err), SIFT_OK);
    assert_string_equal(out, "[1, 2.0, '\xc3\xa9\xf0\x9f\x98\x80', None, True]");
    free(out);
    out = NULL;
    assert_int_equal(render("{{ a }}", "{\"a\": [1, }", NULL, &out, &err), SIFT_E_PARSE);
    assert_non_null(strstr(err.msg, "context JSON"));
    assert_int_equal(render("{{ a }}", "[1]", NULL, &out, &err), SIFT_E_INVAL);
    assert_int_equal(render("{{ a }}", "{\"a\": 1} x", NULL, &out, &err), SIFT_E_PARSE);
    /* no context at all renders with the globals only */
    assert_int_equal(render("{{ range(3)|list }}", NULL, NULL, &out, &err), SIFT_OK);
    assert_string_equal(out, "[0, 1, 2]");
    free(out);
}

static void test_chat_defaults(void **state)
{
    (void)state;
    sift_template_options o;
    sift_template_options_init(&o);
    o.chat_defaults = true;
    sift_error err = {0};
    char *out = NULL;
    assert_int_equal(render("{{ tools is defined }}{{ tools is none }}{{ add_generation_prompt }}{{ documents }}", "{}", &o, &out, &err), SIFT_OK);
    assert_string_equal(out, "TrueTrueFalseNone");
    free(out);
    assert_int_equal(render("{{ tools is defined }}{{ add_generation_prompt }}", "{\"add_generation_prompt\": true}", NULL, &out, &err), SIFT_OK);
    assert_string_equal(out, "FalseTrue");
    free(out);
}

static void expect_limit(const char *tpl, const sift_template_options *o)
{
    sift_error err = {0};
    char *out = NULL;
    sift_status st = render(tpl, NULL, o, &out, &err);
    if (st == SIFT_OK) fail_msg("%s: rendered %zu bytes, wanted a limit error", tpl, strlen(out));
    assert_null(out);
    assert_true(strlen(err.msg) > 0);
}

static void test_hostile_templates_end(void **state)
{
    (void)state;
    sift_template_options o;
    sift_template_options_init(&o);
    o.max_steps = 2000000;
    o.max_output = 1 << 20;
    o.max_memory = 64 << 20;
    expect_limit("{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}", &o);
    expect_limit("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", &o);
    expect_limit("{% for a in range(100000) %}{{ 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx' }}{% endfor %}", &o);
    expect_limit("{{ 'x' * 100000000 }}", &o);
    expect_limit("{{ [1] * 100000000 }}", &o);
    {   /* empty repetitions are instant (the fuzzer found a 10 s '' * 999999999) */
        sift_error err = {0};
        char *out = NULL;
        assert_int_equal(render("{{ '' * 999999999999 }}{{ [] * 999999999999 }}", NULL, &o, &out, &err), SIFT_OK);
        assert_string_equal(out, "[]");
        free(out);
    }
    expect_limit("{{ range(1000000000)|length }}", &o);
    expect_limit("{% set ns = namespace(s='x') %}{% for i in range(60) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}", &o);
    expect_limit("{{ 2 ** 100 }}", &o);
    /* deep nesting: parser and evaluator depth are bounded */
    char *deep = malloc(200000);
    size_t n = 0;
    n += (size_t)sprintf(deep + n, "{{ ");
    for (int i = 0; i < 50000; i++) deep[n++] = '(';
    deep[n++] = '1';
    for (int i = 0; i < 50000; i++) deep[n++] = ')';
    strcpy(deep + n, " }}");
    expect_limit(deep, &o);
    n = (size_t)sprintf(deep, "{{ 1");
    for (int i = 0; i < 30000; i++) n += (size_t)sprintf(deep + n, "+1");
    strcpy(deep + n, " }}");
    expect_limit(deep, &o);
    n = 0;
    for (int i = 0; i < 5000; i++) n += (size_t)sprintf(deep + n, "{%% if true %%}");
    deep[n] = 0;
    expect_limit(deep, &o);
    n = (size_t)sprintf(deep, "{{ 'a'");
    for (int i = 0; i < 20000; i++) n += (size_t)sprintf(deep + n, "|trim");
    strcpy(deep + n, " }}");
    expect_limit(deep, &o);
    free(deep);
}

static void test_api_arguments(void **state)
{
    (void)state;
    sift_error err = {0};
    assert_null(sift_template_parse(NULL, 0, &err));
    assert_int_equal(err.status, SIFT_E_INVAL);
    sift_template *t = sift_template_parse("x", 1, NULL);
    assert_non_null(t);
    assert_int_equal(sift_template_render(t, NULL, 0, NULL, NULL, NULL, &err), SIFT_E_INVAL);
    char *out = NULL;
    size_t len = 99;
    assert_int_equal(sift_template_render(t, NULL, 0, NULL, &out, &len, NULL), SIFT_OK);
    assert_int_equal(len, 1);
    assert_string_equal(out, "x");
    free(out);
    sift_template_free(t);
    sift_template_free(NULL);
    /* an empty template renders the empty string */
    t = sift_template_parse("", 0, &err);
    assert_non_null(t);
    assert_int_equal(sift_template_render(t, "{}", 2, NULL, &out, &len, &err), SIFT_OK);
    assert_int_equal(len, 0);
    free(out);
    sift_template_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cases_match_jinja2),  cmocka_unit_test(test_error_names_line),
        cmocka_unit_test(test_context_json),        cmocka_unit_test(test_chat_defaults),
        cmocka_unit_test(test_hostile_templates_end), cmocka_unit_test(test_api_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
