/*
 * test_json_schema.c - JSON schema -> GBNF: the grammar's text for a known schema, then what
 * the grammars mean: valid instances accepted and invalid ones rejected, integer ranges
 * checked exhaustively, patterns checked against PCRE2 on many strings, and the errors
 * (unsupported keywords with their JSON pointer, malformed JSON with its offset).
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "grammar_util.h"
#include "schema/gbnf_writer.h"

/* Every schema is also converted as the grammar compiler converts it (rules written r<index>
 * and shared by body, json_schema_rules.c), and every instance is checked against both
 * grammars: the twin of each grammar convert() returns, freed with it. */
char *sift__js_to_gbnf(const char *schema, size_t len, uint32_t flags, bool for_parse, sift_error *err);
static struct {
    sift_grammar *g, *twin;
} twins[16];

static sift_grammar *twin_of(const sift_grammar *g)
{
    for (size_t i = 0; i < sizeof twins / sizeof *twins; i++)
        if (twins[i].g == g) return twins[i].twin;
    return NULL;
}

static void free_both(sift_grammar *g)
{
    for (size_t i = 0; g && i < sizeof twins / sizeof *twins; i++)
        if (twins[i].g == g) {
            sift_grammar_free(twins[i].twin);
            twins[i].g = twins[i].twin = NULL;
        }
    sift_grammar_free(g);
}

static sift_grammar *convert(const char *schema, uint32_t flags)
{
    sift_error err = {0};
    char *gbnf = sift_json_schema_to_grammar(schema, strlen(schema), flags, &err);
    if (!gbnf) fail_msg("convert %s: %s", schema, err.msg);
    sift_grammar *g = sift_grammar_parse(gbnf, strlen(gbnf), "root", NULL, &err);
    if (!g) fail_msg("the grammar of %s does not parse: %s\n%s", schema, err.msg, gbnf);
    free(gbnf);
    char *text = sift__js_to_gbnf(schema, strlen(schema), flags, true, &err);
    if (!text) fail_msg("convert %s for the compiler: %s", schema, err.msg);
    sift_grammar *twin = sift_grammar_parse(text, strlen(text), "root", NULL, &err);
    if (!twin) fail_msg("the compiler's grammar of %s does not parse: %s\n%s", schema, err.msg, text);
    free(text);
    size_t i = 0;
    while (i < sizeof twins / sizeof *twins && twins[i].g) i++;
    if (i == sizeof twins / sizeof *twins) fail_msg("more than %zu grammars alive", i);
    twins[i].g = g;
    twins[i].twin = twin;
    return g;
}
#define sift_grammar_free(g) free_both(g)

static void expect(sift_grammar *g, const char *instance, bool valid)
{
    int r = sift_grammar_match(g, instance, strlen(instance), NULL);
    if ((r == SIFT_GRAMMAR_COMPLETE) != valid) fail_msg("'%s': got %d, want %s", instance, r, valid ? "accepted" : "rejected");
    const sift_grammar *t = twin_of(g);
    r = t ? sift_grammar_match(t, instance, strlen(instance), NULL) : SIFT_GRAMMAR_COMPLETE;
    if ((r == SIFT_GRAMMAR_COMPLETE) != valid) fail_msg("'%s' (the compiler's grammar): got %d, want %s", instance, r, valid ? "accepted" : "rejected");
}

/* The compiler's text: rules written r<index> (and root, built-ins), equal bodies one rule -
 * here the two objects' identical parts, which the readable text writes under both paths. */
static void test_compiler_text(void **state)
{
    (void)state;
    const char *schema = "{\"type\":\"object\",\"properties\":{"
                         "\"first\":{\"type\":\"object\",\"properties\":{\"street\":{\"type\":\"string\"},\"city\":{\"type\":\"string\"}}},"
                         "\"second\":{\"type\":\"object\",\"properties\":{\"street\":{\"type\":\"string\"},\"city\":{\"type\":\"string\"}}}}}";
    sift_error err = {0};
    char *readable = sift_json_schema_to_grammar(schema, strlen(schema), 0, &err);
    char *text = sift__js_to_gbnf(schema, strlen(schema), 0, true, &err);
    assert_non_null(readable);
    assert_non_null(text);
    size_t n_readable = 0, n_text = 0;
    for (const char *p = readable; *p; p++) n_readable += *p == '\n';
    for (const char *line = text; *line; n_text++) {
        size_t n = strcspn(line, " ");
        bool short_name = line[0] == 'r' && n > 1 && strspn(line + 1, "0123456789") == n - 1;
        bool kept = false; /* the start rule and the built-ins keep their names */
        for (const char *const *k = (const char *const[]){"root", "space", "char", "string", "value", "object", "array", "number",
                                                          "integral-part", "decimal-part", "boolean", "null", NULL};
             *k; k++)
            kept |= strlen(*k) == n && !strncmp(line, *k, n);
        if (!short_name && !kept) fail_msg("rule '%.*s' in the compiler's text", (int)n, line);
        line += strcspn(line, "\n");
        line += *line == '\n';
    }
    assert_non_null(strstr(readable, "first-street-kv"));
    assert_non_null(strstr(readable, "second-street-kv"));
    if (n_text + 4 > n_readable) fail_msg("%zu rules, %zu in the readable text:\n%s", n_text, n_readable, text);
    free(readable);
    free(text);
    sift_grammar *g = convert(schema, 0);
    expect(g, "{\"first\": {\"street\": \"a\", \"city\": \"b\"}, \"second\": {\"city\": \"c\"}}", true);
    expect(g, "{\"second\": {\"street\": 1}}", false);
    expect(g, "{\"first\": {\"town\": [1, {}]}, \"other\": null}", true);
    sift_grammar_free(g);
}

static void test_golden_person(void **state)
{
    (void)state;
    const char *schema =
        "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":40},"
        "\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":999},\"pets\":{\"type\":\"array\",\"maxItems\":8,"
        "\"items\":{\"enum\":[\"cat\",\"dog\",\"fish\"]}}},\"required\":[\"name\",\"age\",\"pets\"],\"additionalProperties\":false}";
    const char *want =
        "age ::= ([0-9] | ([1-9] [0-9]) | ([1-9] [0-9]{2})) space\n"
        "age-kv ::= \"\\\"age\\\"\" space \":\" space age\n"
        "char ::= [^\"\\\\\\x7F\\x00-\\x1F] | [\\\\] ([\"\\\\/bfnrt] | \"u\" ([0-9a-cA-Ce-fE-F] [0-9a-fA-F]{3} | "
        "[dD] [0-7] [0-9a-fA-F]{2} | [dD] [89abAB] [0-9a-fA-F]{2} \"\\\\u\" [dD] [c-fC-F] [0-9a-fA-F]{2}))\n"
        "name ::= \"\\\"\" char{1,40} \"\\\"\" space\n"
        "name-kv ::= \"\\\"name\\\"\" space \":\" space name\n"
        "pets ::= \"[\" space (pets-item (\",\" space pets-item){0,7})? \"]\" space\n"
        "pets-item ::= (\"\\\"cat\\\"\" | \"\\\"dog\\\"\" | \"\\\"fish\\\"\") space\n"
        "pets-kv ::= \"\\\"pets\\\"\" space \":\" space pets\n"
        /* any key order, each key once: a rule per set of keys written (bits 1 name, 2 age, 4 pets) */
        "root ::= \"{\" space ( name-kv root-s1 | age-kv root-s2 | pets-kv root-s4 ) \"}\" space\n"
        "root-s1 ::= ( \",\" space age-kv root-s3 | \",\" space pets-kv root-s5 )\n"
        "root-s2 ::= ( \",\" space name-kv root-s3 | \",\" space pets-kv root-s6 )\n"
        "root-s3 ::= ( \",\" space pets-kv )\n"
        "root-s4 ::= ( \",\" space name-kv root-s5 | \",\" space age-kv root-s6 )\n"
        "root-s5 ::= ( \",\" space age-kv )\n"
        "root-s6 ::= ( \",\" space name-kv )\n"
        "space ::= | \" \" | \"\\n\"{1,2} [ \\t]{0,20}\n";
    sift_error err = {0};
    char *gbnf = sift_json_schema_to_grammar(schema, strlen(schema), 0, &err);
    assert_non_null(gbnf);
    assert_string_equal(gbnf, want);
    free(gbnf);
    sift_grammar *g = convert(schema, 0);
    expect(g, "{\"name\": \"Tom\", \"age\": 42, \"pets\": [\"cat\", \"dog\"]}", true);
    expect(g, "{\"name\":\"T\",\"age\":0,\"pets\":[]}", true);
    expect(g, "{ \"name\": \"a\\\"b\", \"age\": 999, \"pets\": [ \"fish\" ] }\n", true);
    expect(g, "{\"name\": \"\", \"age\": 1, \"pets\": []}", false);          /* minLength 1 */
    expect(g, "{\"name\": \"T\", \"age\": 1000, \"pets\": []}", false);      /* maximum */
    expect(g, "{\"name\": \"T\", \"age\": 01, \"pets\": []}", false);        /* not JSON */
    expect(g, "{\"name\": \"T\", \"age\": 42.0, \"pets\": []}", false);    /* valid, but not generated (see docs/fidelity.md) */
    expect(g, "{\"name\": \"T\", \"age\": 42.5, \"pets\": []}", false);
    expect(g, "{\"age\": 1, \"name\": \"T\", \"pets\": []}", true);          /* JSON Schema has no order */
    expect(g, "{\"pets\": [], \"age\": 1, \"name\": \"T\"}", true);
    expect(g, "{\"age\": 1, \"name\": \"T\", \"age\": 2, \"pets\": []}", false); /* a key twice */
    expect(g, "{\"age\": 1, \"pets\": []}", false);                          /* required */
    expect(g, "{\"name\": \"T\", \"age\": 1}", false);                       /* required */
    expect(g, "{\"name\": \"T\", \"age\": 1, \"pets\": [\"cow\"]}", false);  /* enum */
    expect(g, "{\"name\": \"T\", \"age\": 1, \"pets\": [], \"x\": 1}", false); /* additionalProperties */
    expect(g, "{\"name\": \"\\u00e9\\ud83d\\ude00\", \"age\": 1, \"pets\": []}", true); /* a pair is one character */
    expect(g, "{\"name\": \"\\udedd\", \"age\": 1, \"pets\": []}", false);               /* a lone surrogate */
    sift_grammar_free(g);
}

static void test_types(void **state)
{
    (void)state;
    sift_grammar *g = convert("{\"type\": [\"string\", \"null\", \"boolean\", \"number\"]}", 0);
    expect(g, "\"x\"", true);
    expect(g, "null", true);
    expect(g, "false", true);
    expect(g, "-1.5e+10", true);
    expect(g, "[]", false);
    sift_grammar_free(g);
    g = convert("{}", 0); /* anything */
    expect(g, "{\"a\": [1, {\"b\": null}], \"c\": \"d\"}", true);
    expect(g, "tru", false);
    sift_grammar_free(g);
    g = convert("true", 0);
    expect(g, "[1, 2]", true);
    sift_grammar_free(g);
    g = convert("{\"const\": {\"a\": [1, \"\\u00e9\\\"\"]}}", 0);
    expect(g, "{\"a\":[1,\"\xC3\xA9\\\"\"]}", true);
    expect(g, "{\"a\":[2,\"\xC3\xA9\\\"\"]}", false);
    sift_grammar_free(g);
    g = convert("{\"enum\": [\"red\", 3, null, [true]]}", 0);
    expect(g, "\"red\"", true);
    expect(g, "3", true);
    expect(g, "null", true);
    expect(g, "[true]", true);
    expect(g, "\"blue\"", false);
    sift_grammar_free(g);
    /* no type: a keyword constrains the values of its kind only, the other kinds pass
     * (MaskBench Github_easy---o63378: {"format": "positiveInteger"} with the value 1) */
    g = convert("{\"format\": \"positiveInteger\"}", 0);
    expect(g, "1", true);
    expect(g, "\"x\"", true);
    expect(g, "{\"a\": [null]}", true);
    sift_grammar_free(g);
    g = convert("{\"format\": \"date\"}", 0);
    expect(g, "\"2024-02-29\"", true);
    expect(g, "\"2023-02-29\"", false);
    expect(g, "\"x\"", false);
    expect(g, "17", true);
    expect(g, "[\"x\"]", true);
    expect(g, "null", true);
    sift_grammar_free(g);
    /* Github_medium---o7200: items {"properties": {}} with string items */
    g = convert("{\"type\": \"array\", \"items\": {\"required\": [], \"properties\": {}}}", 0);
    expect(g, "[\"reading\", {}, 3]", true);
    sift_grammar_free(g);
    g = convert("{\"properties\": {\"a\": {\"type\": \"integer\"}}, \"required\": [\"a\"], \"minLength\": 2}", 0);
    expect(g, "{\"a\": 1}", true);
    expect(g, "{\"a\": \"x\"}", false);
    expect(g, "{}", false);
    expect(g, "\"ab\"", true);
    expect(g, "\"a\"", false);
    expect(g, "2.5", true);
    expect(g, "true", true);
    sift_grammar_free(g);
    /* a kind that matches nothing is left out, the others still pass */
    g = convert("{\"minLength\": 3, \"maxLength\": 2, \"pattern\": \"^a+$\"}", 0);
    expect(g, "\"aa\"", false);
    expect(g, "1", true);
    sift_grammar_free(g);
    /* llama.cpp's reading under SIFT_JSON_SCHEMA_LLAMA: the implied type only */
    g = convert("{\"properties\": {\"a\": {\"type\": \"integer\"}}}", SIFT_JSON_SCHEMA_LLAMA);
    expect(g, "{\"a\": 1}", true);
    expect(g, "1", false);
    sift_grammar_free(g);
}

static void test_formats(void **state)
{
    (void)state;
    sift_grammar *g = convert("{\"type\":\"object\",\"properties\":{\"d\":{\"type\":\"string\",\"format\":\"date\"},"
                              "\"t\":{\"type\":\"string\",\"format\":\"time\"},\"dt\":{\"type\":\"string\",\"format\":\"date-time\"},"
                              "\"u\":{\"type\":\"string\",\"format\":\"uuid\"},\"e\":{\"type\":\"string\",\"format\":\"email\"}},"
                              "\"required\":[\"d\",\"t\",\"dt\",\"u\",\"e\"]}",
                              0);
    expect(g,
           "{\"d\": \"2024-02-29\", \"t\": \"23:59:01Z\", \"dt\": \"1999-12-31T00:00:00.123+05:30\", "
           "\"u\": \"123e4567-e89b-12d3-a456-426614174000\", \"e\": \"a@b.co\"}",
           true);
    expect(g,
           "{\"d\": \"2024-13-01\", \"t\": \"23:59:01Z\", \"dt\": \"1999-12-31T00:00:00Z\", "
           "\"u\": \"123e4567-e89b-12d3-a456-426614174000\", \"e\": \"x@y.z\"}",
           false);
    expect(g,
           "{\"d\": \"2024-01-01\", \"t\": \"24:00:00Z\", \"dt\": \"1999-12-31T00:00:00Z\", "
           "\"u\": \"123e4567-e89b-12d3-a456-426614174000\", \"e\": \"x@y.z\"}",
           false);
    expect(g,
           "{\"d\": \"2024-01-01\", \"t\": \"12:00:00Z\", \"dt\": \"1999-12-31T00:00:00Z\", "
           "\"u\": \"123e4567e89b-12d3-a456-426614174000\", \"e\": \"x@y.z\"}",
           false);
    sift_grammar_free(g);
}

static void test_objects(void **state)
{
    (void)state;
    /* JSON Schema semantics (the default): the declared keys in any order, each at most once,
     * required ones present, optional ones skipped freely; a missing additionalProperties
     * allows other keys (anywhere), never a declared key again */
    sift_grammar *g = convert("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"integer\"},"
                              "\"c\":{\"type\":\"integer\"}},\"required\":[\"b\"]}",
                              0);
    expect(g, "{\"b\": 1}", true);
    expect(g, "{\"a\": 1, \"b\": 2}", true);
    expect(g, "{\"b\": 2, \"c\": 3}", true);
    expect(g, "{\"a\": 1, \"b\": 2, \"c\": 3}", true);
    expect(g, "{\"a\": 1, \"b\": 2, \"c\": 3, \"d\": [null], \"e\": {}}", true);
    expect(g, "{\"b\": 2, \"x\": 3}", true);
    expect(g, "{}", false);
    expect(g, "{\"a\": 1}", false);
    expect(g, "{\"a\": 1, \"c\": 3}", false);
    expect(g, "{\"b\": 2, \"a\": 1}", true);         /* any order */
    expect(g, "{\"c\": 3, \"a\": 1, \"b\": 2}", true);
    expect(g, "{\"x\": 0, \"c\": 3, \"y\": 1, \"b\": 2, \"z\": 2}", true); /* other keys anywhere */
    expect(g, "{\"b\": 2, \"b\": 3}", false);        /* a declared key twice */
    expect(g, "{\"a\": 1, \"b\": 2, \"a\": 3}", false);
    expect(g, "{\"c\": 3, \"x\": 1, \"a\": 1}", false); /* b is required */
    expect(g, "{\"b\": 2, \"c\": \"x\"}", false);    /* its schema */
    expect(g, "{\"b\": 2, \"x\": 1, \"c\": 3}", true);
    sift_grammar_free(g);
    /* required names `properties` does not declare: present, with what additionalProperties
     * allows (false: nothing, so the schema matches nothing) */
    g = convert("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\",\"id\"],"
                "\"additionalProperties\":{\"type\":\"string\"}}",
                0);
    expect(g, "{\"a\": 1, \"id\": \"x\"}", true);
    expect(g, "{\"a\": 1, \"id\": 2}", false);
    expect(g, "{\"a\": 1}", false);
    expect(g, "{\"a\": 1, \"id\": \"x\", \"z\": 3}", false);
    sift_grammar_free(g);
    {
        sift_error e = {0};
        const char *s2 = "{\"type\":\"object\",\"properties\":{\"a\":{}},\"required\":[\"id\"],\"additionalProperties\":false}";
        char *x = sift_json_schema_to_grammar(s2, strlen(s2), 0, &e);
        assert_null(x);
        assert_non_null(strstr(e.msg, "matches nothing"));
    }
    g = convert("{\"type\":\"object\",\"required\":[\"id\"]}", 0);
    expect(g, "{\"id\": 1}", true);
    expect(g, "{\"id\": 1, \"k\": 2}", true);
    expect(g, "{}", false);
    expect(g, "{\"k\": 2}", false);
    sift_grammar_free(g);
    /* a 2,000-property object converts (chained rules, no nesting) */
    {
        sift__gbnf_sbuf big = {0};
        sift__gbnf_sb_puts(&big, "{\"type\":\"object\",\"properties\":{");
        for (int i = 0; i < 2000; i++) sift__gbnf_sb_printf(&big, "%s\"p%d\":{\"type\":\"integer\"}", i ? "," : "", i);
        sift__gbnf_sb_puts(&big, "}}");
        g = convert(big.s, 0);
        expect(g, "{\"p0\": 1, \"p1999\": 2, \"zz\": 3}", true);
        expect(g, "{\"p1999\": 1, \"p0\": 2}", false); /* too many keys for any order: the schema's */
        expect(g, "{\"zz\": 3, \"p0\": 1, \"yy\": 4, \"p1999\": 2}", true); /* other keys anywhere */
        expect(g, "{\"p0\": 1, \"zz\": 3, \"p0\": 2}", false);
        sift_grammar_free(g);
        sift__gbnf_sb_free(&big);
    }

    /* SIFT_JSON_SCHEMA_LLAMA: required properties first, then any subset of the optional ones
     * in schema order, no other keys (llama.cpp's layout) */
    g = convert("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"integer\"},"
                "\"c\":{\"type\":\"integer\"}},\"required\":[\"b\"]}",
                SIFT_JSON_SCHEMA_LLAMA);
    expect(g, "{\"b\": 2, \"x\": 3}", false);
    expect(g, "{\"b\": 1}", true);
    expect(g, "{\"b\": 2, \"a\": 1}", true);
    expect(g, "{\"b\": 2, \"c\": 3}", true);
    expect(g, "{\"b\": 2, \"a\": 1, \"c\": 3}", true);
    expect(g, "{}", false);
    expect(g, "{\"a\": 1, \"b\": 2}", false);
    expect(g, "{\"b\": 2, \"c\": 3, \"a\": 1}", false);
    sift_grammar_free(g);
    g = convert("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"integer\"}}}", SIFT_JSON_SCHEMA_LLAMA);
    expect(g, "{}", true);
    expect(g, "{\"b\": 2}", true);
    expect(g, "{\"a\": 1, \"b\": 2}", true);
    sift_grammar_free(g);
    /* additional properties: any key but the declared ones (proper prefixes of them are fine) */
    g = convert("{\"type\":\"object\",\"properties\":{\"ab\":{\"type\":\"integer\"}},\"required\":[\"ab\"],"
                "\"additionalProperties\":{\"type\":\"string\"}}",
                0);
    expect(g, "{\"ab\": 1}", true);
    expect(g, "{\"ab\": 1, \"a\": \"x\", \"abc\": \"y\", \"b\": \"z\", \"\": \"e\"}", true);
    expect(g, "{\"ab\": 1, \"ab\": \"x\"}", false);
    expect(g, "{\"ab\": 1, \"c\": 2}", false);
    sift_grammar_free(g);
    g = convert("{\"type\":\"object\",\"additionalProperties\":true}", 0);
    expect(g, "{\"k\": [1, \"v\"]}", true);
    sift_grammar_free(g);
    /* allOf merges object parts */
    g = convert("{\"allOf\":[{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]},"
                "{\"properties\":{\"b\":{\"const\":true}},\"required\":[\"b\"]}]}",
                0);
    expect(g, "{\"a\": 1, \"b\": true}", true);
    expect(g, "{\"a\": 1}", false);
    sift_grammar_free(g);
}

/* Refused with a message containing `why`. */
static void expect_refused(const char *schema, const char *why)
{
    sift_error err = {0};
    char *gbnf = sift_json_schema_to_grammar(schema, strlen(schema), 0, &err);
    if (gbnf) fail_msg("%s converted, should be refused (%s):\n%s", schema, why, gbnf);
    if (!strstr(err.msg, why)) fail_msg("%s: message [%s] does not say %s", schema, err.msg, why);
}

/* allOf is exact: the schema's own keywords beside it hold too, a property declared twice must
 * satisfy both schemas, and a part's additionalProperties covers the keys it does not declare
 * (MaskBench found the first two accepting invalid objects). */
static void test_all_of_exact(void **state)
{
    (void)state;
    /* required beside allOf, the properties in a $ref'd part (Github_easy o65361) */
    sift_grammar *g = convert("{\"definitions\":{\"e\":{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},"
                              "\"code\":{\"type\":\"number\"}}}},\"id\":\"x#\",\"type\":\"object\",\"allOf\":[{\"$ref\":\"#/definitions/e\"}],"
                              "\"required\":[\"name\",\"code\"]}",
                              0);
    expect(g, "{\"name\": \"n\", \"code\": 500}", true);
    expect(g, "{\"name\": \"n\"}", false);
    expect(g, "{\"name\": \"n\", \"code\": 1, \"more\": 2}", true); /* additionalProperties absent: allowed */
    sift_grammar_free(g);
    /* properties beside allOf, after the part's (coffeelint's braces_spacing) */
    g = convert("{\"allOf\":[{\"properties\":{\"level\":{\"enum\":[\"error\",\"warn\"]}}}],"
                "\"properties\":{\"spaces\":{\"type\":\"integer\",\"enum\":[0,1]}}}",
                0);
    expect(g, "{\"level\": \"error\", \"spaces\": 1}", true);
    expect(g, "{\"level\": \"error\", \"spaces\": 2}", false);
    expect(g, "{\"level\": \"fatal\"}", false);
    sift_grammar_free(g);
    /* the same property in two parts: both schemas hold */
    g = convert("{\"allOf\":[{\"properties\":{\"a\":{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"integer\"}},\"required\":[\"x\"]}}},"
                "{\"properties\":{\"a\":{\"type\":\"object\",\"properties\":{\"y\":{\"type\":\"string\"}},\"required\":[\"y\"]}}}]}",
                0);
    expect(g, "{\"a\": {\"x\": 1, \"y\": \"s\"}}", true);
    expect(g, "{\"a\": {\"x\": 1}}", false);
    expect(g, "{\"a\": {\"y\": \"s\"}}", false);
    sift_grammar_free(g);
    /* a property whose two schemas have no value in common cannot appear */
    g = convert("{\"allOf\":[{\"properties\":{\"a\":{\"type\":\"string\"}}},{\"properties\":{\"a\":{\"type\":\"number\"}}}]}", 0);
    expect(g, "{\"a\": \"s\"}", false);
    expect(g, "{\"a\": 1}", false);
    expect(g, "{\"b\": 1}", true);
    expect(g, "\"any other value\"", true);
    sift_grammar_free(g);
    /* additionalProperties false in one part: the other parts' properties are not allowed */
    g = convert("{\"allOf\":[{\"properties\":{\"a\":{\"type\":\"string\"}},\"additionalProperties\":false},"
                "{\"properties\":{\"b\":{\"type\":\"number\"}}}]}",
                0);
    expect(g, "{\"a\": \"s\"}", true);
    expect(g, "{\"b\": 1}", false);
    expect(g, "{\"a\": \"s\", \"c\": 1}", false);
    sift_grammar_free(g);
    expect_refused("{\"allOf\":[{\"properties\":{\"a\":{\"type\":\"string\"}},\"additionalProperties\":false},"
                   "{\"properties\":{\"b\":{\"type\":\"number\"}},\"required\":[\"b\"]}]}",
                   "matches nothing");
    /* a part's additionalProperties schema holds for the other parts' properties too (the
     * held-back MaskBench invalidation error: the declared type was lost) */
    g = convert("{\"allOf\":[{\"properties\":{\"a\":{\"type\":\"string\"}},\"additionalProperties\":{\"type\":\"number\"}},"
                "{\"properties\":{\"b\":{\"type\":\"string\"},\"c\":{\"type\":\"integer\"}}}]}",
                0);
    expect(g, "{\"a\": \"s\", \"b\": \"x\"}", false);
    expect(g, "{\"a\": \"s\", \"c\": 2.5}", false);
    expect(g, "{\"a\": \"s\", \"c\": 2, \"z\": 1.5}", true);
    expect(g, "{\"z\": \"t\"}", false);
    sift_grammar_free(g);
    /* a schema in additionalProperties that covers no other part's key is kept */
    g = convert("{\"allOf\":[{\"properties\":{\"a\":{\"type\":\"string\"}},\"additionalProperties\":{\"type\":\"number\"}},"
                "{\"required\":[\"a\"]}]}",
                0);
    expect(g, "{\"a\": \"s\", \"z\": 2}", true);
    expect(g, "{\"a\": \"s\", \"z\": \"t\"}", false);
    sift_grammar_free(g);
    /* JSON's exponent may have leading zeros (BFCL_multiple_40: "mu0": 1.256e-06) */
    g = convert("{\"type\":\"number\"}", 0);
    expect(g, "1.256e-06", true);
    expect(g, "2E+00", true);
    expect(g, "1e", false);
    expect(g, "01", false);
    sift_grammar_free(g);
    /* keywords beside allOf that cannot be merged are named */
    expect_refused("{\"allOf\":[{\"properties\":{\"a\":{}}}],\"minProperties\":2}", "'minProperties' beside declared properties");
    /* {"allOf": [{}]} is any value */
    g = convert("{\"allOf\":[{}]}", 0);
    expect(g, "1", true);
    expect(g, "[\"x\", {}]", true);
    sift_grammar_free(g);
    /* a part that is a $ref to a $ref: the final target's keywords, not "any object" */
    g = convert("{\"$defs\":{\"a\":{\"$ref\":\"#/$defs/b\"},\"b\":{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"integer\"}},"
                "\"required\":[\"x\"]}},\"allOf\":[{\"$ref\":\"#/$defs/a\"}]}",
                0);
    expect(g, "{\"x\": 1}", true);
    expect(g, "{\"y\": 1}", false);
    expect(g, "{\"x\": \"s\"}", false);
    sift_grammar_free(g);
    /* keywords of other kinds merge keyword by keyword: bounds take the tighter one, types meet */
    g = convert("{\"allOf\":[{\"type\":[\"number\",\"string\"],\"maximum\":10},{\"type\":\"integer\",\"maximum\":5}]}", 0);
    expect(g, "5", true);
    expect(g, "6", false);
    expect(g, "4.5", false);
    expect(g, "\"s\"", false);
    sift_grammar_free(g);
}

/* ECMA-262's \\s takes every Unicode space (JSON-Schema-Test-Suite optional/ecmascript-regex);
 * format hostname generates no A-label ("xn--...": its IDNA rules are not a grammar) and
 * keeps the lengths (optional/format/hostname). */
static void test_ecma_space_hostname(void **state)
{
    (void)state;
    sift_grammar *g = convert("{\"type\":\"string\",\"pattern\":\"^\\\\S$\"}", 0);
    static const char *const spaces[] = {" ", "\t", "\u00a0", "\u1680", "\u2003", "\u200a", "\u2029", "\u202f", "\u205f", "\u3000", "\ufeff"};
    for (size_t i = 0; i < sizeof spaces / sizeof *spaces; i++) {
        char text[32];
        snprintf(text, sizeof text, "\"%s\"", spaces[i]);
        expect(g, text, false);
    }
    expect(g, "\"\u2013\"", true);
    expect(g, "\"x\"", true);
    sift_grammar_free(g);
    g = convert("{\"type\":\"string\",\"format\":\"hostname\"}", 0);
    expect(g, "\"www.example.com\"", true);
    expect(g, "\"a--b.com\"", true);
    expect(g, "\"xn--X\"", false);
    expect(g, "\"XN--aa---o47jg78q\"", false);
    expect(g, "\"ab--c.com\"", false);
    expect(g, "\"-host\"", false);
    sift_grammar_free(g);
    /* numbers beyond a double keep their decimal text (const 9007199254740992 accepts itself,
     * with ".0" too, and not its neighbour or a rounded exponent form) */
    g = convert("{\"const\":9007199254740992}", 0);
    expect(g, "9007199254740992", true);
    expect(g, "9007199254740992.0", true);
    expect(g, "9007199254740993", false);
    expect(g, "9007199254740991", false);
    expect(g, "9.00719925474099e+15", false);
    sift_grammar_free(g);
    g = convert("{\"enum\":[12345678901234567890, 1e400]}", 0);
    expect(g, "12345678901234567890", true);
    expect(g, "12345678901234567891", false);
    expect(g, "null", false);
    expect(g, "\"host-\"", false);
    sift_grammar_free(g);
}

/* Keywords rewritten before the visit: no-ops (uniqueItems false, if alone, then / else
 * alone) and the forms of `not` that are other keywords (JSON-Schema-Test-Suite not.json,
 * if-then-else.json, uniqueItems.json, dependentRequired.json). */
static void test_simplified_keywords(void **state)
{
    (void)state;
    sift_grammar *g = convert("{\"not\":{\"type\":[\"number\",\"boolean\"]}}", 0);
    expect(g, "\"s\"", true);
    expect(g, "null", true);
    expect(g, "{}", true);
    expect(g, "1", false);
    expect(g, "1.5", false);
    expect(g, "true", false);
    sift_grammar_free(g);
    g = convert("{\"type\":[\"string\",\"integer\"],\"not\":{\"type\":\"string\"}}", 0);
    expect(g, "1", true);
    expect(g, "\"s\"", false);
    sift_grammar_free(g);
    g = convert("{\"not\":{\"not\":{\"type\":\"string\"}}}", 0);
    expect(g, "\"s\"", true);
    expect(g, "1", false);
    sift_grammar_free(g);
    expect_refused("{\"not\":{}}", "matches nothing");
    /* the non-integers are no type: a complement leaves them out, and nothing left is a
     * refusal, not "matches nothing" (test_complement has not integer alone) */
    expect_refused("{\"type\":\"number\",\"not\":{\"type\":\"integer\"}}", "non-integer numbers");
    g = convert("{\"uniqueItems\":false,\"if\":{\"const\":0},\"type\":\"array\"}", 0);
    expect(g, "[1, 1]", true);
    sift_grammar_free(g);
    g = convert("{\"properties\":{\"foo\":{},\"bar\":{}},\"dependentRequired\":{\"bar\":[\"foo\"]}}", 0);
    expect(g, "{\"foo\": 1, \"bar\": 2}", true);
    expect(g, "{\"bar\": 2}", false);
    expect(g, "[\"bar\"]", true);
    sift_grammar_free(g);
}

/* $ref beside other keywords: from 2019-09 on (and by default) both hold; in draft-07 and
 * earlier ($schema says which) the $ref overrides them (JSON-Schema-Test-Suite ref.json). */
static void test_ref_siblings(void **state)
{
    (void)state;
    sift_grammar *g = convert("{\"$defs\":{\"r\":{\"type\":\"array\"}},\"properties\":{\"foo\":{\"$ref\":\"#/$defs/r\",\"maxItems\":2}}}", 0);
    expect(g, "{\"foo\": []}", true);
    expect(g, "{\"foo\": [1, 2, 3]}", false);
    expect(g, "{\"foo\": \"string\"}", false);
    sift_grammar_free(g);
    g = convert("{\"$schema\":\"http://json-schema.org/draft-07/schema#\",\"definitions\":{\"r\":{\"type\":\"array\"}},"
                "\"properties\":{\"foo\":{\"$ref\":\"#/definitions/r\",\"maxItems\":2}}}",
                0);
    expect(g, "{\"foo\": [1, 2, 3]}", true); /* draft-07: maxItems beside $ref is ignored */
    expect(g, "{\"foo\": \"string\"}", false);
    sift_grammar_free(g);
    /* a keyword beside $ref that cannot be expressed is refused, not dropped */
    expect_refused("{\"$ref\":\"#/$defs/bar\",\"prefixItems\":[{\"type\":\"string\"}],\"unevaluatedItems\":false,"
                   "\"$defs\":{\"bar\":{\"prefixItems\":[true,{\"type\":\"string\"}]}}}",
                   "unevaluatedItems");
}

/* Each $ref has its own rule, whatever its name sanitizes to: "a.b" and "a_b" (and two long
 * names alike in their first 300 bytes) both become ref-...-a-b, and the second reference
 * once got the first one's rule (a string accepted for an integer). Also through a recursion
 * between two such names, where each placeholder must stay its own. */
static void test_ref_names(void **state)
{
    (void)state;
    sift_grammar *g = convert("{\"definitions\":{\"a.b\":{\"type\":\"string\"},\"a_b\":{\"type\":\"integer\"}},\"type\":\"object\","
                              "\"properties\":{\"x\":{\"$ref\":\"#/definitions/a.b\"},\"y\":{\"$ref\":\"#/definitions/a_b\"}},"
                              "\"required\":[\"x\",\"y\"],\"additionalProperties\":false}",
                              0);
    expect(g, "{\"x\": \"s\", \"y\": 1}", true);
    expect(g, "{\"x\": \"s\", \"y\": \"t\"}", false);
    expect(g, "{\"x\": 1, \"y\": 1}", false);
    sift_grammar_free(g);
    g = convert("{\"$defs\":{\"a.b\":{\"type\":\"object\",\"properties\":{\"n\":{\"$ref\":\"#/$defs/a_b\"}},"
                "\"additionalProperties\":false},\"a_b\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/a.b\"}}},"
                "\"$ref\":\"#/$defs/a.b\"}",
                0);
    expect(g, "{\"n\": [{\"n\": []}, {}]}", true);
    expect(g, "{\"n\": {\"n\": []}}", false);
    expect(g, "{\"n\": [[]]}", false);
    sift_grammar_free(g);
    char long_name[400];
    memset(long_name, 'k', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = 0;
    char schema[4096];
    snprintf(schema, sizeof schema,
             "{\"$defs\":{\"%s1\":{\"type\":\"string\"},\"%s2\":{\"type\":\"boolean\"}},\"type\":\"array\","
             "\"prefixItems\":[{\"$ref\":\"#/$defs/%s1\"},{\"$ref\":\"#/$defs/%s2\"}],\"items\":false,\"minItems\":2}",
             long_name, long_name, long_name, long_name);
    g = convert(schema, 0);
    expect(g, "[\"s\", true]", true);
    expect(g, "[\"s\", \"t\"]", false);
    sift_grammar_free(g);
}

static void test_arrays(void **state)
{
    (void)state;
    sift_grammar *g = convert("{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":2,\"maxItems\":3}", 0);
    expect(g, "[1, 2]", true);
    expect(g, "[1,2,3]", true);
    expect(g, "[1]", false);
    expect(g, "[1, 2, 3, 4]", false);
    expect(g, "[1, \"a\"]", false);
    sift_grammar_free(g);
    g = convert("{\"type\":\"array\",\"prefixItems\":[{\"type\":\"string\"},{\"type\":\"integer\"}]}", 0);
    expect(g, "[\"a\", 1]", true);
    expect(g, "[\"a\", 1, 2, {}]", true); /* 2020-12: prefixItems alone allows anything after */
    expect(g, "[\"a\"]", true);           /* a tuple may end early (no minItems) */
    expect(g, "[]", true);
    expect(g, "[1]", false);
    sift_grammar_free(g);
    /* an item that matches nothing ends the array before it */
    g = convert("{\"type\":\"array\",\"prefixItems\":[true,false]}", 0);
    expect(g, "[1]", true);
    expect(g, "[]", true);
    expect(g, "[1, \"foo\"]", false);
    sift_grammar_free(g);
    expect_refused("{\"type\":\"array\",\"prefixItems\":[true,false],\"minItems\":2}", "matches nothing");
    /* draft-07: items as a tuple, additionalItems after it */
    g = convert("{\"type\":\"array\",\"items\":[{\"type\":\"string\"}],\"additionalItems\":{\"type\":\"integer\"}}", 0);
    expect(g, "[\"a\", 1, 2]", true);
    expect(g, "[\"a\", \"b\"]", false);
    sift_grammar_free(g);
    g = convert("{\"type\":\"array\",\"items\":[{\"type\":\"string\"}],\"additionalItems\":false}", 0);
    expect(g, "[\"a\"]", true);
    expect(g, "[\"a\", 1]", false);
    sift_grammar_free(g);
    g = convert("{\"type\":\"array\",\"items\":[{\"type\":\"string\"}]}", 0);
    expect(g, "[\"a\", null]", true);
    sift_grammar_free(g);
    g = convert("{\"type\":\"array\",\"prefixItems\":[{\"type\":\"string\"},{\"type\":\"integer\"}],\"minItems\":1,"
                "\"items\":{\"type\":\"boolean\"}}",
                0);
    expect(g, "[\"a\"]", true);
    expect(g, "[\"a\", 1]", true);
    expect(g, "[\"a\", 1, true, false]", true);
    expect(g, "[\"a\", true]", false);
    expect(g, "[]", false);
    sift_grammar_free(g);
}

static void test_refs(void **state)
{
    (void)state;
    /* a recursive linked list through $defs */
    sift_grammar *g = convert("{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},"
                              "\"next\":{\"anyOf\":[{\"$ref\":\"#/$defs/node\"},{\"type\":\"null\"}]}},\"required\":[\"v\",\"next\"]}},"
                              "\"$ref\":\"#/$defs/node\"}",
                              0);
    expect(g, "{\"v\": 1, \"next\": {\"v\": 2, \"next\": {\"v\": 3, \"next\": null}}}", true);
    expect(g, "{\"v\": 1, \"next\": {\"v\": 2}}", false);
    sift_grammar_free(g);
    /* "#" is the document itself; definitions and JSON pointers with escapes */
    g = convert("{\"type\":\"object\",\"properties\":{\"kids\":{\"type\":\"array\",\"items\":{\"$ref\":\"#\"}}},"
                "\"required\":[\"kids\"]}",
                0);
    expect(g, "{\"kids\": [{\"kids\": []}, {\"kids\": [{\"kids\": []}]}]}", true);
    sift_grammar_free(g);
    g = convert("{\"definitions\":{\"a/b\":{\"type\":\"boolean\"}},\"$ref\":\"#/definitions/a~1b\"}", 0);
    expect(g, "true", true);
    expect(g, "1", false);
    sift_grammar_free(g);
}

/* every integer of a window: accepted exactly when within [min, max] */
static void check_int_range(bool has_min, long min, bool has_max, long max, long lo, long hi)
{
    char schema[256];
    int n = snprintf(schema, sizeof schema, "{\"type\":\"integer\"");
    if (has_min) n += snprintf(schema + n, sizeof schema - (size_t)n, ",\"minimum\":%ld", min);
    if (has_max) n += snprintf(schema + n, sizeof schema - (size_t)n, ",\"maximum\":%ld", max);
    snprintf(schema + n, sizeof schema - (size_t)n, "}");
    sift_grammar *g = convert(schema, 0);
    for (long v = lo; v <= hi; v++) {
        char txt[32];
        snprintf(txt, sizeof txt, "%ld", v);
        bool in = (!has_min || v >= min) && (!has_max || v <= max);
        int r = sift_grammar_match(g, txt, strlen(txt), NULL);
        if ((r == SIFT_GRAMMAR_COMPLETE) != in) fail_msg("%s: %ld %s", schema, v, in ? "rejected" : "accepted");
    }
    expect(g, "-0", false);
    expect(g, "007", false);
    sift_grammar_free(g);
}

static void test_integer_ranges(void **state)
{
    (void)state;
    check_int_range(true, 0, true, 999, -1100, 1100);
    check_int_range(true, -15, true, 1234, -2000, 2000);
    check_int_range(true, -999, true, -100, -1200, 100);
    check_int_range(true, 17, true, 17, -10, 40);
    check_int_range(true, 5, false, 0, -20, 3000);
    check_int_range(false, 0, true, 305, -3000, 3000);
    check_int_range(false, 0, true, -42, -3000, 100);
    check_int_range(true, -7, false, 0, -3000, 3000);
    check_int_range(true, 10990, true, 20109, 10000, 21000);
    /* exclusive bounds (2020-12 numbers, draft-04 booleans) and fractional limits */
    sift_grammar *g = convert("{\"type\":\"integer\",\"exclusiveMinimum\":2.5,\"exclusiveMaximum\":6}", 0);
    expect(g, "2", false);
    expect(g, "3", true);
    expect(g, "5", true);
    expect(g, "6", false);
    sift_grammar_free(g);
    g = convert("{\"type\":\"integer\",\"minimum\":1,\"exclusiveMinimum\":true,\"maximum\":3,\"exclusiveMaximum\":true}", 0);
    expect(g, "1", false);
    expect(g, "2", true);
    expect(g, "3", false);
    sift_grammar_free(g);
}

static uint64_t rng(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* pattern (with minLength / maxLength when min_kw / max_kw >= 0): the grammar accepts "<s>" (as
 * a JSON string) exactly when PCRE2 matches s and its length is within them */
static void check_pattern_len(const char *pattern, const char *alphabet, int max_len, int tries, const char *const *pos, long min_kw, long max_kw)
{
    char schema[512];
    char esc[256];
    size_t k = 0;
    for (const char *p = pattern; *p && k < sizeof esc - 2; p++) {
        if (*p == '\\' || *p == '"') esc[k++] = '\\';
        esc[k++] = *p;
    }
    esc[k] = 0;
    int sn = snprintf(schema, sizeof schema, "{\"type\":\"string\",\"pattern\":\"%s\"", esc);
    if (min_kw >= 0) sn += snprintf(schema + sn, sizeof schema - (size_t)sn, ",\"minLength\":%ld", min_kw);
    if (max_kw >= 0) sn += snprintf(schema + sn, sizeof schema - (size_t)sn, ",\"maxLength\":%ld", max_kw);
    snprintf(schema + sn, sizeof schema - (size_t)sn, "}");
    sift_grammar *g = convert(schema, 0);
    int ec;
    PCRE2_SIZE eo;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, PCRE2_UTF, &ec, &eo, NULL);
    assert_non_null(re);
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    uint64_t seed = 1234;
    size_t al = strlen(alphabet);
    int matched = 0;
    for (int t = 0; t < tries; t++) {
        char s[64];
        int len;
        if (pos && pos[0] && (t & 1)) {
            /* a known positive example with up to two random edits: near misses */
            size_t np = 0;
            while (pos[np]) np++;
            const char *p0 = pos[rng(&seed) % np];
            len = (int)strlen(p0);
            memcpy(s, p0, (size_t)len);
            for (int e = (int)(rng(&seed) % 3); e > 0; e--) {
                int at = len ? (int)(rng(&seed) % (uint64_t)len) : 0;
                int op = (int)(rng(&seed) % 3);
                if (op == 0 && len > 0) { /* delete */
                    memmove(s + at, s + at + 1, (size_t)(len - at - 1));
                    len--;
                } else if (op == 1 && len < 60) { /* insert */
                    memmove(s + at + 1, s + at, (size_t)(len - at));
                    s[at] = alphabet[rng(&seed) % al];
                    len++;
                } else if (len > 0) { /* replace */
                    s[at] = alphabet[rng(&seed) % al];
                }
            }
        } else {
            len = (int)(rng(&seed) % (uint64_t)(max_len + 1));
            for (int i = 0; i < len; i++) s[i] = alphabet[rng(&seed) % al];
        }
        s[len] = 0;
        bool want = pcre2_match(re, (PCRE2_SPTR)s, (size_t)len, 0, 0, md, NULL) >= 0 && len >= min_kw && (max_kw < 0 || len <= max_kw);
        /* the instance: s as a JSON string (escape '"' and '\\') */
        char inst[512];
        size_t q = 0;
        inst[q++] = '"';
        for (int i = 0; i < len; i++) {
            /* the canonical encoding, which is what the grammar generates: short escapes
             * where JSON has them, \u00XX for the other control characters */
            const char *short_esc = s[i] == '\t' ? "\\t" : s[i] == '\n' ? "\\n" : s[i] == '\r' ? "\\r" : NULL;
            if (short_esc) {
                q += (size_t)snprintf(inst + q, sizeof inst - q, "%s", short_esc);
                continue;
            }
            if ((unsigned char)s[i] < 0x20) {
                q += (size_t)snprintf(inst + q, sizeof inst - q, "\\u%04x", (unsigned char)s[i]);
                continue;
            }
            if (s[i] == '"' || s[i] == '\\') inst[q++] = '\\';
            inst[q++] = s[i];
        }
        inst[q++] = '"';
        inst[q] = 0;
        int r = sift_grammar_match(g, inst, q, NULL);
        if ((r == SIFT_GRAMMAR_COMPLETE) != want) fail_msg("pattern /%s/ on '%s': pcre2 %d, grammar %d", pattern, s, want, r);
        matched += want;
    }
    print_message("/%s/ (length %ld..%ld): %d of %d random strings match\n", pattern, min_kw, max_kw, matched, tries);
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    sift_grammar_free(g);
}

static void check_pattern(const char *pattern, const char *alphabet, int max_len, int tries, const char *const *pos)
{
    check_pattern_len(pattern, alphabet, max_len, tries, pos, -1, -1);
}

/* a pattern with one repeated character beside minLength / maxLength: that repetition takes
 * what the length leaves (sift__schema_regex_bounded), exactly */
static void test_pattern_bounded(void **state)
{
    (void)state;
    const char *p1[] = {"ab1", "ab12", "ab123", NULL};
    check_pattern_len("^ab[0-9]+$", "ab019x", 8, 4000, p1, 3, 5);
    const char *p2[] = {"x", "xyz", "x__", NULL};
    check_pattern_len("^[a-z][^ ]*$", "xyz_ 0", 9, 4000, p2, 2, 6);
    const char *p3[] = {"aa", "a-b", NULL};
    check_pattern_len("^([a-z-]*)$", "ab-_", 7, 3000, p3, 1, 4);
    check_pattern_len("^(q(w)[0-9]{2,})$", "qw09", 8, 3000, NULL, 0, 5);
    expect_refused("{\"type\":\"string\",\"pattern\":\"^ab[0-9]+$\",\"maxLength\":2}", "no string matches");
    check_pattern_len("^a+b+$", "abc", 6, 3000, NULL, -1, 4); /* two repetitions: regex_length.c */
}

/* pattern with minLength / maxLength that no single repetition can take (regex_length.c: an
 * automaton of the pattern whose states count characters), against PCRE2 */
static void test_pattern_length_automaton(void **state)
{
    (void)state;
    /* four groups share the length: a:b::c (6) fits 8, abc:de:f:gh (11) does not */
    const char *p1[] = {"a:b::c", "ab:c.d:e:f", "a1:-.:x:y", NULL};
    check_pattern_len("^([a-z0-9-]+):([a-z0-9\\.-]+):([a-z0-9-]+)?:([a-z0-9-]+)$", "ab1:.-", 12, 6000, p1, 0, 8);
    /* unanchored: ten digits somewhere, and exactly ten characters in all */
    const char *p2[] = {"0123456789", "01234567a9", NULL};
    check_pattern_len("[0-9]{10,10}", "0123456789a", 12, 6000, p2, 10, 10);
    /* a minimum only: the counter stops at 3 ("3 or more") */
    const char *p3[] = {"ab", "ab-c", "abc-d0", NULL};
    check_pattern_len("^[a-z]+(?:-[a-z0-9]+)*$", "ab-0", 9, 6000, p3, 3, -1);
    /* top-level alternatives with their own anchors, and a nullable loop */
    check_pattern_len("^a|b$", "abc", 6, 3000, NULL, 2, 4);
    check_pattern_len("^(a*b*)*$", "abc", 7, 3000, NULL, 1, 5);
    check_pattern_len("^(?:\\S+\\s+){0,3}\\S+$", "ab \t", 14, 6000, NULL, 0, 10);
    check_pattern_len("\\d{2}-?\\d{0,4}", "01-x", 9, 6000, NULL, 2, 6);
    check_pattern_len("^(ab|c)x?$", "abcx", 5, 3000, NULL, 2, -1);
    check_pattern_len("^ab", "abc", 11, 3000, NULL, -1, 9);
    /* a loop over something that can match nothing: no left recursion in the automaton */
    const char *p4[] = {"a.bc", "http://a.bc/x y/z", "ab.cd/", NULL};
    check_pattern("^(|ab)+$", "abc", 7, 2000, NULL);
    check_pattern("^(https?://)?([a-z.-]+)\\.([a-z.]{2,6})([/\\w .-]*)*/?$", "ab.:/ xhtp", 14, 8000, p4);
    /* no string has both: the schema matches nothing */
    expect_refused("{\"type\":\"string\",\"pattern\":\"^(ab|cd)+$\",\"minLength\":3,\"maxLength\":3}", "no string matches");
    /* formats with a length: said nothing more when every string of the format fits it */
    sift_grammar *g = convert("{\"type\":\"string\",\"format\":\"date-time\",\"minLength\":1,\"maxLength\":40}", 0);
    expect(g, "\"2024-02-29T23:59:59.123+01:00\"", true);
    expect(g, "\"2023-02-29T23:59:59Z\"", false);
    sift_grammar_free(g);
    /* email with maxLength 318 or more: the local part is kept to RFC 5321's 64 characters */
    char mail[200], local65[70];
    memset(local65, 'a', 65);
    local65[65] = 0;
    g = convert("{\"type\":\"string\",\"format\":\"email\",\"maxLength\":1024}", 0);
    expect(g, "\"first.last+tag@example.com\"", true);
    expect(g, "\"a@b\"", true);
    expect(g, "\"first..last@example.com\"", false);
    expect(g, "\".a@example.com\"", false);
    snprintf(mail, sizeof mail, "\"%.64s@example.com\"", local65);
    expect(g, mail, true);
    snprintf(mail, sizeof mail, "\"%s@example.com\"", local65);
    expect(g, mail, false);
    sift_grammar_free(g);
    expect_refused("{\"type\":\"string\",\"format\":\"email\",\"maxLength\":100}", "format 'email' together with minLength");
    expect_refused("{\"type\":\"string\",\"format\":\"uri\",\"minLength\":7}", "format 'uri' together with minLength");
    /* anchors inside groups: '^' only where nothing was read, nothing read after '$' */
    check_pattern_len("^$|(^a+$)", "ab", 6, 3000, NULL, -1, 3);
    check_pattern("^(/?((\\.{2})|([a-z0-9-]*))($|/))*$", "a./-", 9, 20000, NULL);
    check_pattern("^([^,]|$)", "a,", 4, 2000, NULL);
    check_pattern("(a|^b)c", "abc", 5, 3000, NULL);
}

static void test_patterns(void **state)
{
    (void)state;
    const char *p1[] = {"AB-1", "CC-012x", "BA-999yz", NULL};
    check_pattern("^[A-C]{2}-\\d{1,3}(x|yz)?$", "ABC-0123xyz", 9, 20000, p1);
    const char *p2[] = {"c", "abac", "aabccc", NULL};
    check_pattern("^(ab|a)*c+$", "abc", 8, 20000, p2);
    check_pattern("^[^a-c\"]\\w?.$", "abcxyz_\"\\ 9", 4, 20000, NULL);
    const char *p4[] = {"a.\\", "a.b\"", NULL};
    check_pattern("^a\\.b?[\\\\\"]$", "a.b\\\"x", 5, 20000, p4);
    check_pattern("b{2,}", "ab", 6, 5000, NULL); /* unanchored: anywhere in the string */
    check_pattern("^x{0}y$", "xy", 3, 2000, NULL);
    check_pattern("^(?:\\s|\\S){2}$", " a\t", 3, 3000, NULL);
    check_pattern("^[\\^a-]x?\\^$", "^a-x", 4, 3000, NULL); /* '^' and '-' inside classes */
    const char *p8[] = {"2024-01-31", "1999-12-01", NULL};
    check_pattern("^\\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\\d|3[01])$", "0123456789-", 10, 20000, p8);
    /* anchors bind to one top-level alternative: ^ab|c$ is (^ab)|(c$) (MaskBench
     * Github_medium---o21850: ^(x\..)|(y\..)|('.*')+$ took only "x.C") */
    const char *p9[] = {"abzzz", "zzc", "ab", "c", NULL};
    check_pattern("^ab|c$", "abcz", 5, 20000, p9);
    check_pattern("^a$|^b|c|d$", "abcdx", 4, 20000, NULL);
    check_pattern("^(i\\.h\\..)|(i\\.b\\..)|('.*')+$", "ihb.'C", 8, 20000, NULL);
    check_pattern("[|]x|^y", "|xy", 4, 5000, NULL);
}

/* anyOf / oneOf (issue 12): keywords beside the alternatives hold for each of them (they
 * used to be dropped: any object passed); oneOf converts only when no instance can match two
 * alternatives, otherwise it is refused (a union would accept such an instance). */
static void test_alternatives(void **state)
{
    (void)state;
    sift_grammar *g = convert("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"string\"}},"
                              "\"anyOf\":[{\"required\":[\"a\"]},{\"required\":[\"b\"]}]}",
                              0);
    expect(g, "{\"a\": 1}", true);
    expect(g, "{\"b\": \"x\"}", true);
    expect(g, "{\"a\": 1, \"b\": \"x\"}", true);
    expect(g, "{}", false);
    expect(g, "{\"a\": \"x\"}", false);
    expect(g, "{\"c\": 1}", false);
    sift_grammar_free(g);
    g = convert("{\"oneOf\":[{\"type\":\"string\"},{\"type\":\"integer\"}]}", 0);
    expect(g, "\"x\"", true);
    expect(g, "1", true);
    expect(g, "null", false);
    sift_grammar_free(g);
    g = convert("{\"oneOf\":[{\"const\":\"a\"},{\"enum\":[\"b\",1]}]}", 0);
    expect(g, "\"a\"", true);
    expect(g, "1", true);
    sift_grammar_free(g);
    g = convert("{\"oneOf\":[{\"type\":\"object\",\"properties\":{\"k\":{\"const\":\"x\"}},\"required\":[\"k\"]},"
                "{\"type\":\"object\",\"properties\":{\"k\":{\"const\":\"y\"},\"v\":{}},\"required\":[\"k\"]}]}",
                0);
    expect(g, "{\"k\": \"y\", \"v\": 2}", true);
    sift_grammar_free(g);
    /* enum / const with a type (issue 12): only the values of that type; none is an error */
    g = convert("{\"type\":\"string\",\"enum\":[\"a\",1,null]}", 0);
    expect(g, "\"a\"", true);
    expect(g, "1", false);
    expect(g, "null", false);
    sift_grammar_free(g);
    g = convert("{\"type\":[\"integer\",\"null\"],\"enum\":[1,1.5,\"x\",null]}", 0);
    expect(g, "1", true);
    expect(g, "null", true);
    expect(g, "1.5", false);
    expect(g, "\"x\"", false);
    sift_grammar_free(g);
    {
        sift_error err = {0};
        const char *none = "{\"type\":\"object\",\"enum\":[\"MODIFIABLE\",\"DELETABLE\"]}";
        assert_null(sift_json_schema_to_grammar(none, strlen(none), 0, &err));
        assert_non_null(strstr(err.msg, "matches nothing"));
    }
    const char *overlap[] = {"{\"oneOf\":[{\"type\":\"integer\"},{\"type\":\"number\"}]}",
                             "{\"oneOf\":[{\"type\":\"string\",\"pattern\":\"a\"},{\"type\":\"string\",\"pattern\":\"b\"}]}"};
    /* listed values: those that match exactly one alternative (value_check.c decides) */
    sift_grammar *ge = convert("{\"oneOf\":[{\"enum\":[1,2,\"x\"]},{\"enum\":[2,3]},{\"type\":\"boolean\"}]}", 0);
    expect(ge, "1", true);
    expect(ge, "3", true);
    expect(ge, "2", false);
    expect(ge, "\"x\"", true);
    expect(ge, "true", true);
    sift_grammar_free(ge);
    /* arrays whose items cannot overlap share only [] */
    ge = convert("{\"oneOf\":[{\"type\":\"array\",\"items\":{\"type\":\"number\"}},{\"type\":\"array\",\"items\":{\"type\":\"string\"}}]}", 0);
    expect(ge, "[1, 2]", true);
    expect(ge, "[\"a\"]", true);
    expect(ge, "[]", false);
    expect(ge, "[1, \"a\"]", false);
    sift_grammar_free(ge);
    for (int i = 0; i < 2; i++) {
        sift_error err = {0};
        char *gb = sift_json_schema_to_grammar(overlap[i], strlen(overlap[i]), 0, &err);
        if (gb) fail_msg("converted %s:\n%s", overlap[i], gb);
        assert_int_equal(err.status, SIFT_E_UNSUPPORTED);
        assert_non_null(strstr(err.msg, i ? "oneOf" : "non-integer numbers"));
    }
}

typedef struct {
    const char *format, *value;
    bool valid;
} fmt_case;

/* Formats with their real constraints (issue 12): calendar dates (leap years, no 02-31),
 * and email / uri / hostname / ipv4 as subsets of what validators accept; a standard format
 * without a grammar is refused, never a plain string. */
static void test_format_constraints(void **state)
{
    (void)state;
    const fmt_case cases[] = {
        {"date", "2020-02-29", true},  {"date", "2021-02-29", false}, {"date", "1900-02-29", false},
        {"date", "2000-02-29", true},  {"date", "2020-02-31", false}, {"date", "2024-02-30", false},
        {"date", "2020-04-31", false}, {"date", "2020-12-31", true},  {"date", "0000-01-01", false},
        {"date", "0001-01-01", true},  {"date", "2020-1-01", false},  {"date", "2020-00-10", false},
        {"date-time", "2020-02-29T10:00:00Z", true}, {"date-time", "2022-02-31T10:00:00Z", false},
        {"email", "a@b.com", true}, {"email", "a.b+c@x-y.example.org", true}, {"email", "invalid_email", false},
        {"email", "a..b@x.com", false}, {"email", "@x.com", false}, {"email", "a@b", true},
        {"ipv4", "1.2.3.4", true}, {"ipv4", "255.255.255.255", true}, {"ipv4", "256.1.1.1", false},
        {"ipv4", "01.1.1.1", false}, {"ipv4", "1.2.3", false},
        {"uri", "http://example.com", true}, {"uri", "https://a.b/c?d=e#f", true}, {"uri", "not a url", false},
        {"uri", "file:example.km", false}, {"uri", ".", false},
        {"hostname", "example.com", true}, {"hostname", "a-b.c", true}, {"hostname", "-a.com", false},
        {"hostname", "a b", false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char schema[128], inst[128];
        snprintf(schema, sizeof schema, "{\"type\":\"string\",\"format\":\"%s\"}", cases[i].format);
        snprintf(inst, sizeof inst, "\"%s\"", cases[i].value);
        sift_grammar *g = convert(schema, 0);
        int r = sift_grammar_match(g, inst, strlen(inst), NULL);
        if ((r == SIFT_GRAMMAR_COMPLETE) != cases[i].valid)
            fail_msg("format %s, %s: got %d, want %s", cases[i].format, inst, r, cases[i].valid ? "accepted" : "rejected");
        sift_grammar_free(g);
    }
    sift_error err = {0};
    const char *ipv6 = "{\"type\":\"string\",\"format\":\"ipv6\"}";
    assert_null(sift_json_schema_to_grammar(ipv6, strlen(ipv6), 0, &err));
    assert_non_null(strstr(err.msg, "/format: format 'ipv6'"));
    const char *other = "{\"type\":\"string\",\"format\":\"int32\"}"; /* not a standard format: an annotation */
    char *gb = sift_json_schema_to_grammar(other, strlen(other), 0, &err);
    assert_non_null(gb);
    free(gb);
}

typedef struct {
    const char *schema, *want; /* want: substring of the error message */
    int status;
} err_case;

static void test_errors(void **state)
{
    (void)state;
    const err_case cases[] = {
        {"{\"type\":\"array\",\"uniqueItems\":true}", "/uniqueItems: keyword 'uniqueItems'", SIFT_E_UNSUPPORTED},
        {"{\"properties\":{\"a\":{\"not\":{\"pattern\":\"x\"}}}}", "/properties/a/not:", SIFT_E_UNSUPPORTED},
        /* issue 12: a limit the grammar cannot meet names its keyword (it used to be "internal
         * error, the generated grammar does not parse") */
        {"{\"type\":\"array\",\"minItems\":1000000}", "/minItems: minItems 1000000 exceeds the grammar's repetition limit", SIFT_E_UNSUPPORTED},
        {"{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"maxItems\":5000}", "/maxItems: maxItems 5000 exceeds", SIFT_E_UNSUPPORTED},
        {"{\"type\":\"string\",\"pattern\":\"^(a)\\\\1$\"}", "backreferences", SIFT_E_UNSUPPORTED},
        {"{\"type\":\"string\",\"pattern\":\"^(?=a)a$\"}", "lookaround", SIFT_E_UNSUPPORTED},
        {"{\"type\":\"string\",\"pattern\":\"^\\\\p{L}$\"}", "Unicode property classes", SIFT_E_UNSUPPORTED},
        {"{\"enum\":[\"\xff\"]}", "invalid UTF-8 at offset 10", SIFT_E_PARSE},
        {"{\"$ref\":\"#/$defs/missing\"}", "does not resolve", SIFT_E_INVAL},
        {"{\"$ref\":\"https://example.com/s.json\"}", "only references into this document", SIFT_E_UNSUPPORTED},
        {"{\"type\":\"array\",\"items\":{\"$ref\":\"\"}}", "only references into this document", SIFT_E_UNSUPPORTED}, /* fuzz: read past "" */
        {"{\"type\":\"integer\",\"minimum\":5,\"maximum\":4}", "no integer", SIFT_E_INVAL},
        {"{\"type\":\"wat\"}", "unknown type 'wat'", SIFT_E_INVAL},
        {"{\"allOf\":[{\"type\":\"object\",\"properties\":[\"b\"]}]}", "'properties' must be an object", SIFT_E_INVAL}, /* fuzz: leaked */
        {"false", "matches nothing", SIFT_E_INVAL},
        {"{\"type\":\"string\",\"maxLength\":-1}", "non-negative integer", SIFT_E_INVAL},
        {"{\"type\": \"string\",}", "invalid JSON near offset", SIFT_E_PARSE},
        {"{} {}", "unexpected text after the value", SIFT_E_PARSE},
        {"{\"$ref\":\"#\"}", "$ref cycle", SIFT_E_UNSUPPORTED},                                   /* fuzz */
        {"{\"anyOf\":[{\"$ref\":\"#\"},{\"type\":\"null\"}]}", "$ref cycle", SIFT_E_UNSUPPORTED},
        {"{\"$defs\":{\"a\":{\"$ref\":\"#/$defs/b\"},\"b\":{\"$ref\":\"#/$defs/a\"}},\"$ref\":\"#/$defs/a\"}", "$ref cycle", SIFT_E_UNSUPPORTED},
        /* issue 26: nested repetitions the GBNF parser refuses are a limit, not an "internal error" */
        {"{\"properties\":{\"x\":{\"$ref\":\"#\"},\"s\":{\"type\":\"string\",\"pattern\":\"^(a{0,1000}){0,1000}$\"}}}",
         "over a limit of the GBNF parser (", SIFT_E_UNSUPPORTED},
        {"{\"enum\":[\"a\\u0000b\"]}", "\\u0000", SIFT_E_UNSUPPORTED},
        {"{\"const\":\"a\tb\"}", "control character 0x09", SIFT_E_PARSE},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        sift_error err = {0};
        char *g = sift_json_schema_to_grammar(cases[i].schema, strlen(cases[i].schema), 0, &err);
        if (g) fail_msg("case %zu converted: %s", i, cases[i].schema);
        if (err.status != cases[i].status || !strstr(err.msg, cases[i].want))
            fail_msg("case %zu: status %d message '%s' (want %d, '%s')", i, err.status, err.msg, cases[i].status, cases[i].want);
    }
    /* lenient: the same schemas convert, ignoring what cannot be expressed */
    sift_grammar *g = convert("{\"type\":\"array\",\"uniqueItems\":true,\"items\":{\"type\":\"number\",\"minimum\":0}}",
                              SIFT_JSON_SCHEMA_LENIENT);
    expect(g, "[1, 1]", true); /* uniqueItems ignored (the bound on numbers is enforced since issue 12) */
    sift_grammar_free(g);
}

/* patternProperties (issue 12): pattern keys take the pattern's schema; the other keys take
 * additionalProperties, written as the pattern's complement or as a name/prefix trie. */
static void test_pattern_properties(void **state)
{
    (void)state;
    /* one class pattern, other keys allowed (a missing additionalProperties) */
    sift_grammar *g = convert("{\"type\":\"object\",\"patternProperties\":{\"^[a-z_]+$\":{\"type\":\"integer\"}}}", 0);
    expect(g, "{\"ab_c\": 1, \"x\": 2}", true);
    expect(g, "{\"ab_c\": \"s\"}", false);        /* a pattern key: integer */
    expect(g, "{\"Ab\": \"s\", \"\": [1]}", true); /* other keys: anything */
    expect(g, "{\"a b\": null}", true);
    expect(g, "{\"a\\nb\": null, \"b\": 1}", true);
    sift_grammar_free(g);
    /* additionalProperties false, a declared property the pattern does not match */
    g = convert("{\"type\":\"object\",\"properties\":{\"Id\":{\"type\":\"string\"}},\"required\":[\"Id\"],"
                "\"patternProperties\":{\"^x-\":{\"type\":\"boolean\"}},\"additionalProperties\":false}", 0);
    expect(g, "{\"Id\": \"a\", \"x-1\": true, \"x-\": false}", true);
    expect(g, "{\"Id\": \"a\", \"x-1\": 1}", false);
    expect(g, "{\"Id\": \"a\", \"y\": true}", false);
    expect(g, "{\"x-1\": true}", false);
    sift_grammar_free(g);
    /* a prefix with other keys allowed: those keys must not start with it */
    g = convert("{\"type\":\"object\",\"properties\":{\"a\":{}},\"patternProperties\":{\"^x-\":{\"type\":\"boolean\"}}}", 0);
    expect(g, "{\"a\": 1, \"x\": 1, \"x_\": 2, \"y-1\": 3, \"x-b\": true}", true);
    expect(g, "{\"x-b\": 1}", false);
    sift_grammar_free(g);
    /* .* matches every key: no other keys, every value an integer */
    g = convert("{\"type\":\"object\",\"patternProperties\":{\".*\":{\"type\":\"integer\"}}}", 0);
    expect(g, "{\"\": 1, \"a b\": 2}", true);
    expect(g, "{\"a\": \"x\"}", false);
    sift_grammar_free(g);
    /* ^.+$: other keys are "" or hold a line break */
    g = convert("{\"type\":\"object\",\"patternProperties\":{\"^.+$\":{\"type\":\"null\"}}}", 0);
    expect(g, "{\"a\": null, \"\": 1, \"a\\nb\": 2}", true);
    expect(g, "{\"a\": 1}", false);
    sift_grammar_free(g);
    /* bounded: ^[a-z]{1,3}$ */
    g = convert("{\"type\":\"object\",\"patternProperties\":{\"^[a-z]{2,3}$\":{\"type\":\"null\"}}}", 0);
    expect(g, "{\"ab\": null, \"abc\": null, \"a\": 1, \"abcd\": 2, \"\": 3, \"aB\": 4}", true);
    expect(g, "{\"abc\": 1}", false);
    sift_grammar_free(g);
    /* literal patterns with different schemas: disjoint keys */
    g = convert("{\"type\":\"object\",\"patternProperties\":{\"^a$\":{\"type\":\"null\"},\"^(b|c)$\":{\"type\":\"boolean\"}},"
                "\"additionalProperties\":{\"type\":\"integer\"}}", 0);
    expect(g, "{\"a\": null, \"b\": true, \"c\": false, \"d\": 1, \"ab\": 2}", true);
    expect(g, "{\"a\": 1}", false);
    expect(g, "{\"c\": 1}", false);
    expect(g, "{\"d\": null}", false);
    sift_grammar_free(g);
    /* prefixes written ^lit.* are disjoint literals too */
    g = convert("{\"type\":\"object\",\"patternProperties\":{\"^a_.*\":{\"type\":\"null\"},\"^b_.*\":{\"type\":\"boolean\"}},"
                "\"additionalProperties\":false}", 0);
    expect(g, "{\"a_1\": null, \"b_\": true}", true);
    expect(g, "{\"a_1\": true}", false);
    expect(g, "{\"c\": null}", false);
    sift_grammar_free(g);
    /* an optional property that no value fits is left out, and stays excluded from the others */
    g = convert("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"enum\":[1]},\"b\":{}}}", 0);
    expect(g, "{\"b\": 1, \"c\": 2}", true);
    expect(g, "{\"a\": 1}", false);
    sift_grammar_free(g);
    /* what cannot be expressed names the keyword */
    const char *bad[] = {
        "{\"type\":\"object\",\"properties\":{\"ab\":{\"type\":\"string\"}},\"patternProperties\":{\"^[a-z]+$\":{\"type\":\"integer\"}}}",
        "{\"type\":\"object\",\"patternProperties\":{\"^a\":{\"type\":\"integer\"},\"b\":{\"type\":\"string\"}}}",
        "{\"type\":\"object\",\"patternProperties\":{\"^[a-z]+[0-9]$\":{\"type\":\"integer\"}}}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        sift_error err = {0};
        char *gb = sift_json_schema_to_grammar(bad[i], strlen(bad[i]), 0, &err);
        if (gb) fail_msg("case %zu converted: %s\n%s", i, bad[i], gb);
        if (err.status != SIFT_E_UNSUPPORTED || !strstr(err.msg, "patternProperties"))
            fail_msg("case %zu: status %d message '%s'", i, err.status, err.msg);
    }
}

static void expect_number_minus_zero(void)
{
    sift_grammar *g = convert("{\"type\":\"number\",\"exclusiveMaximum\":0}", 0);
    expect(g, "-0", false);
    expect(g, "-0.0", false);
    expect(g, "-0.01", true);
    sift_grammar_free(g);
}

/* minimum / maximum / exclusive* on numbers (issue 12): every bound pair against many
 * decimal texts, the grammar's verdict equal to strtod's comparison */
static void test_number_ranges(void **state)
{
    (void)state;
    expect_number_minus_zero();
    const char *bounds[] = {"0", "1", "0.5", "-0.5", "-1", "10", "2.25", "-2.25", "0.05", "99.9", "-100", "0.1", "3", NULL};
    const char *texts[] = {"0", "-0", "0.0", "0.5", "0.50", "0.49", "0.51", "0.05", "0.050", "0.04", "0.06", "1", "1.0", "1.5",
                           "2", "2.2", "2.25", "2.250", "2.26", "2.3", "3", "3.0", "3.01", "9", "10", "10.0", "10.01", "11",
                           "99.8", "99.9", "99.90", "99.91", "100", "0.1", "0.09", "0.11", "0.10", "-0.5", "-0.50", "-0.49",
                           "-0.51", "-1", "-1.0", "-1.5", "-2.25", "-2.26", "-2.24", "-3", "-10", "-99.9", "-100", "-100.0",
                           "-100.5", "-101", "0.001", "-0.001", "1234.5", "-1234.5", "0.9999", NULL};
    char schema[256];
    for (int i = 0; bounds[i]; i++)
        for (int j = -1; bounds[j < 0 ? 0 : j]; j++)
            for (int mode = 0; mode < 6; mode++) {
                /* mode: 0 [lo,hi] 1 (lo,hi) 2 lo only 3 hi only 4 exclusive lo only 5 draft-04 exclusive max */
                double lo = strtod(bounds[i], NULL), hi = j >= 0 ? strtod(bounds[j], NULL) : 0;
                if (mode < 2 || mode == 5) {
                    if (j < 0 || lo > hi) continue;
                } else if (j >= 0) continue;
                switch (mode) {
                case 0: snprintf(schema, sizeof schema, "{\"type\":\"number\",\"minimum\":%s,\"maximum\":%s}", bounds[i], bounds[j]); break;
                case 1: snprintf(schema, sizeof schema, "{\"type\":\"number\",\"exclusiveMinimum\":%s,\"exclusiveMaximum\":%s}", bounds[i], bounds[j]); break;
                case 2: snprintf(schema, sizeof schema, "{\"type\":\"number\",\"minimum\":%s}", bounds[i]); break;
                case 3: snprintf(schema, sizeof schema, "{\"type\":\"number\",\"maximum\":%s}", bounds[i]); break;
                case 4: snprintf(schema, sizeof schema, "{\"type\":\"number\",\"exclusiveMinimum\":%s}", bounds[i]); break;
                default: snprintf(schema, sizeof schema, "{\"type\":\"number\",\"minimum\":%s,\"maximum\":%s,\"exclusiveMaximum\":true}", bounds[i], bounds[j]); break;
                }
                sift_error err = {0};
                char *gbnf = sift_json_schema_to_grammar(schema, strlen(schema), 0, &err);
                bool empty = mode == 1 || mode == 5 ? lo >= hi : false;
                if (!gbnf) {
                    if (empty && strstr(err.msg, "matches nothing")) continue;
                    fail_msg("convert %s: %s", schema, err.msg);
                }
                sift_grammar *g = sift_grammar_parse(gbnf, strlen(gbnf), "root", NULL, &err);
                if (!g) fail_msg("%s: %s\n%s", schema, err.msg, gbnf);
                for (int k = 0; texts[k]; k++) {
                    double x = strtod(texts[k], NULL);
                    if (texts[k][0] == '-' && x == 0) continue; /* "-0": accepted or not, both are right */
                    bool want;
                    switch (mode) {
                    case 0: want = x >= lo && x <= hi; break;
                    case 1: want = x > lo && x < hi; break;
                    case 2: want = x >= lo; break;
                    case 3: want = x <= lo; break;
                    case 4: want = x > lo; break;
                    default: want = x >= lo && x < hi; break;
                    }
                    int r = sift_grammar_match(g, texts[k], strlen(texts[k]), NULL);
                    if ((r == SIFT_GRAMMAR_COMPLETE) != want) fail_msg("%s: '%s' got %d, want %d\n%s", schema, texts[k], r, want, gbnf);
                }
                sift_grammar_free(g);
                free(gbnf);
            }
    /* the exponent form where the sign decides (MaskBench Github_hard---o57716: "evalue": 1e-06
     * with "minimum": 0) */
    {
        sift_grammar *g2 = convert("{\"type\": \"number\", \"minimum\": 0}", 0);
        expect(g2, "1e-06", true);
        expect(g2, "2.5E+300", true);
        expect(g2, "0e5", true);
        expect(g2, "-1e-06", false);
        expect(g2, "0.5", true);
        sift_grammar_free(g2);
        g2 = convert("{\"type\": \"number\", \"exclusiveMinimum\": 0}", 0);
        expect(g2, "1e-06", false); /* 0e5 would be 0: not offered */
        expect(g2, "0.5", true);
        sift_grammar_free(g2);
        g2 = convert("{\"type\": \"number\", \"maximum\": 3}", 0);
        expect(g2, "-1.5e+20", true);
        expect(g2, "1e2", false);
        expect(g2, "2.5", true);
        sift_grammar_free(g2);
        g2 = convert("{\"type\": \"number\", \"minimum\": 0, \"maximum\": 1}", 0);
        expect(g2, "1e-06", false); /* both bounds: no exponent form (a documented subset) */
        sift_grammar_free(g2);
    }
}

/* enum / const: the listed values that validate against the whole schema (issue 12) */
static void test_finite_values(void **state)
{
    (void)state;
    sift_grammar *g = convert("{\"allOf\":[{\"enum\":[1, \"a\", null, 2.5]},{\"not\":{\"type\":\"string\"}},{\"not\":{\"maximum\":2}}]}", 0);
    expect(g, "2.5", true);
    expect(g, "2.50", true); /* the same number */
    expect(g, "1", false);
    expect(g, "\"a\"", false);
    expect(g, "null", false); /* {maximum: 2} holds for null (numbers only), so its not fails */
    sift_grammar_free(g);
    g = convert("{\"type\":\"object\",\"enum\":[{\"a\":[1, 2]}, \"x\", {\"b\":1}],\"required\":[\"a\"]}", 0);
    expect(g, "{\"a\": [1, 2]}", true);
    expect(g, "{\"a\":[1,2]}", true);
    expect(g, "{\"b\": 1}", false);
    expect(g, "\"x\"", false);
    sift_grammar_free(g);
    g = convert("{\"type\":\"string\",\"enum\":[\"ab\",\"abc\",\"b\"],\"pattern\":\"^a\",\"maxLength\":2}", 0);
    expect(g, "\"ab\"", true);
    expect(g, "\"abc\"", false);
    expect(g, "\"b\"", false);
    sift_grammar_free(g);
    g = convert("{\"const\":3,\"multipleOf\":1.5,\"type\":\"integer\"}", 0);
    expect(g, "3", true);
    expect(g, "3.0", true);
    sift_grammar_free(g);
    sift_error err = {0};
    const char *none = "{\"type\":\"object\",\"properties\":{\"a\":{\"const\":1,\"not\":{\"const\":1}}},\"required\":[\"a\"]}";
    char *gb = sift_json_schema_to_grammar(none, strlen(none), 0, &err);
    assert_null(gb);
    assert_non_null(strstr(err.msg, "matches nothing"));
}

/* minLength / maxLength above the grammar's 2000 copies: 1000-character chunks (issue 12) */
static void test_long_strings(void **state)
{
    (void)state;
    const char *schemas[] = {"{\"type\":\"string\",\"minLength\":2500,\"maxLength\":7200}", "{\"type\":\"string\",\"maxLength\":5000}",
                             "{\"type\":\"string\",\"minLength\":3001}"};
    const long lens[][6] = {{0, 2499, 2500, 7200, 7201, 4000}, {0, 5000, 5001, 1, 2999, 3000}, {3000, 3001, 9000, 0, 1, 2000}};
    const bool want[][6] = {{false, false, true, true, false, true}, {true, true, false, true, true, true}, {false, true, true, false, false, false}};
    char *buf = malloc(9100);
    assert_non_null(buf);
    for (int i = 0; i < 3; i++) {
        sift_grammar *g = convert(schemas[i], 0);
        for (int k = 0; k < 6; k++) {
            long n = lens[i][k];
            buf[0] = '"';
            for (long j = 0; j < n; j++) buf[1 + j] = (char)(j % 7 ? 'a' : 'x');
            buf[1 + n] = '"';
            buf[2 + n] = 0;
            expect(g, buf, want[i][k]);
        }
        sift_grammar_free(g);
    }
    free(buf);
}

/* pattern ^A{m,n}$ (one atom) together with minLength / maxLength (issue 12) */
static void test_pattern_length(void **state)
{
    (void)state;
    sift_grammar *g = convert("{\"type\":\"string\",\"pattern\":\"^[a-z0-9-]+$\",\"minLength\":2,\"maxLength\":4}", 0);
    expect(g, "\"ab\"", true);
    expect(g, "\"a-9z\"", true);
    expect(g, "\"a\"", false);
    expect(g, "\"abcde\"", false);
    expect(g, "\"aB\"", false);
    sift_grammar_free(g);
    g = convert("{\"type\":\"string\",\"pattern\":\"^\\\\d{3,8}$\",\"maxLength\":5}", 0);
    expect(g, "\"123\"", true);
    expect(g, "\"12345\"", true);
    expect(g, "\"123456\"", false);
    expect(g, "\"12\"", false);
    sift_grammar_free(g);
    /* one repeated character takes what the length leaves (test_pattern_bounded) */
    g = convert("{\"type\":\"string\",\"pattern\":\"^a+b$\",\"maxLength\":5}", 0);
    expect(g, "\"aaaab\"", true);
    expect(g, "\"aaaaab\"", false);
    expect(g, "\"b\"", false);
    sift_grammar_free(g);
    /* two repetitions share the length: the counting automaton (regex_length.c) */
    g = convert("{\"type\":\"string\",\"pattern\":\"^a+b+$\",\"maxLength\":5}", 0);
    expect(g, "\"aabbb\"", true);
    expect(g, "\"ab\"", true);
    expect(g, "\"aabbbb\"", false);
    expect(g, "\"aa\"", false);
    sift_grammar_free(g);
}

/* minProperties / maxProperties (issue 12): counted when only other keys are allowed;
 * minProperties 1 beside declared properties: not empty; the rest names the keyword */
static void test_property_counts(void **state)
{
    (void)state;
    sift_grammar *g = convert("{\"type\":\"object\",\"minProperties\":1,\"maxProperties\":2,\"additionalProperties\":{\"type\":\"string\"}}", 0);
    expect(g, "{}", false);
    expect(g, "{\"a\": \"x\"}", true);
    expect(g, "{\"a\": \"x\", \"b\": \"y\"}", true);
    expect(g, "{\"a\": \"x\", \"b\": \"y\", \"c\": \"z\"}", false);
    expect(g, "{\"a\": 1}", false);
    sift_grammar_free(g);
    g = convert("{\"minProperties\":2}", 0);
    expect(g, "{\"a\": 1, \"b\": [2]}", true);
    expect(g, "{\"a\": 1}", false);
    sift_grammar_free(g);
    g = convert("{\"type\":\"object\",\"minProperties\":1,\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"integer\"}},"
                "\"additionalProperties\":false}", 0);
    expect(g, "{}", false);
    expect(g, "{\"a\": 1}", true);
    expect(g, "{\"b\": 1}", true);
    expect(g, "{\"a\": 1, \"b\": 2}", true);
    sift_grammar_free(g);
    g = convert("{\"type\":\"object\",\"minProperties\":1,\"properties\":{\"a\":{\"type\":\"integer\"}}}", 0);
    expect(g, "{}", false);
    expect(g, "{\"z\": 1}", true);
    sift_grammar_free(g);
    /* multipleOf 1: the integers; other steps name the keyword */
    g = convert("{\"type\":[\"number\",\"null\"],\"multipleOf\":1.0,\"minimum\":0}", 0);
    expect(g, "3", true);
    expect(g, "null", true);
    expect(g, "2.5", false);
    expect(g, "-1", false);
    sift_grammar_free(g);
    /* other steps beside a bound are refused (test_multiple_of: on their own) */
    const char *bad[] = {"{\"multipleOf\":2,\"maximum\":9}", "{\"type\":\"integer\",\"multipleOf\":3,\"minimum\":1}"};
    for (int i = 0; i < 2; i++) {
        sift_error e = {0};
        char *x = sift_json_schema_to_grammar(bad[i], strlen(bad[i]), 0, &e);
        assert_null(x);
        assert_non_null(strstr(e.msg, "multipleOf"));
    }
    sift_error err = {0};
    const char *s2 = "{\"type\":\"object\",\"maxProperties\":1,\"properties\":{\"a\":{}}}";
    char *gb = sift_json_schema_to_grammar(s2, strlen(s2), 0, &err);
    assert_null(gb);
    assert_non_null(strstr(err.msg, "maxProperties"));
    /* dependentRequired / dependencies (arrays): tracked with the key sets of any order */
    g = convert("{\"type\":\"object\",\"properties\":{\"a\":{},\"b\":{},\"c\":{}},\"dependentRequired\":{\"a\":[\"b\"]}}", 0);
    expect(g, "{}", true);
    expect(g, "{\"b\": 1}", true);
    expect(g, "{\"a\": 1, \"b\": 2}", true);
    expect(g, "{\"b\": 2, \"c\": 3, \"a\": 1}", true);
    expect(g, "{\"a\": 1}", false);
    expect(g, "{\"a\": 1, \"c\": 3}", false);
    expect(g, "{\"c\": 3, \"x\": 0, \"a\": 1}", false);
    expect(g, "{\"c\": 3, \"x\": 0, \"a\": 1, \"b\": null}", true);
    sift_grammar_free(g);
    g = convert("{\"type\":\"object\",\"properties\":{\"a\":{},\"b\":{}},\"dependencies\":{\"a\":[\"b\"],\"b\":[\"a\"]},"
                "\"additionalProperties\":false}", 0);
    expect(g, "{}", true);
    expect(g, "{\"b\": 1, \"a\": 2}", true);
    expect(g, "{\"a\": 1}", false);
    expect(g, "{\"b\": 1}", false);
    sift_grammar_free(g);
    /* not a string's keyword: ignored for other types */
    g = convert("{\"type\":\"string\",\"dependencies\":{\"a\":{\"required\":[\"b\"]}}}", 0);
    expect(g, "\"x\"", true);
    sift_grammar_free(g);
    /* names it mentions that `properties` does not declare: tracked as optional additional
     * properties (their value: additionalProperties'), every other key still allowed */
    g = convert("{\"type\":\"object\",\"properties\":{\"a\":{}},\"dependencies\":{\"a\":[\"z\"]},"
                "\"additionalProperties\":{\"type\":\"integer\"}}", 0);
    expect(g, "{}", true);
    expect(g, "{\"z\": 1, \"q\": 2}", true);
    expect(g, "{\"a\": \"s\", \"z\": 1}", true);
    expect(g, "{\"q\": 2, \"a\": null}", false);
    expect(g, "{\"a\": 1, \"z\": \"s\"}", false);
    sift_grammar_free(g);
    g = convert("{\"dependentRequired\":{\"quux\":[\"foo\",\"bar\"]}}", 0);
    expect(g, "{\"foo\": 1, \"quux\": 2, \"bar\": 3}", true);
    expect(g, "{\"foo\": 1, \"quux\": 2}", false);
    expect(g, "[\"quux\"]", true);
    sift_grammar_free(g);
    expect_refused("{\"type\":\"object\",\"properties\":{\"a\":{}},\"dependencies\":{\"a\":{\"required\":[\"b\"]}}}", "dependencies");
    expect_refused("{\"type\":\"object\",\"properties\":{\"a\":{},\"b\":{},\"c\":{},\"d\":{},\"e\":{},\"f\":{},\"g\":{},\"h\":{}},"
                   "\"dependentRequired\":{\"a\":[\"b\"],\"b\":[\"c\"],\"c\":[\"d\"],\"d\":[\"e\"]}}", "more than 7");
    {
        sift_error e = {0};
        const char *s3 = "{\"type\":\"object\",\"properties\":{\"a\":{},\"b\":{}},\"dependentRequired\":{\"a\":[\"b\"]}}";
        char *x = sift_json_schema_to_grammar(s3, strlen(s3), SIFT_JSON_SCHEMA_LLAMA, &e);
        assert_null(x);
        assert_non_null(strstr(e.msg, "dependentRequired"));
    }
}

/* additionalProperties beside anyOf alternatives that declare other properties (issue 12) */
static void test_any_of_additional(void **state)
{
    (void)state;
    sift_grammar *g = convert("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"additionalProperties\":false,"
                              "\"anyOf\":[{\"properties\":{\"b\":{\"type\":\"string\"}}},{\"required\":[\"a\"]}]}", 0);
    expect(g, "{\"a\": 1}", true);
    expect(g, "{}", true);
    expect(g, "{\"a\": 1, \"b\": \"x\"}", false); /* b is an additional property of the outer schema */
    sift_grammar_free(g);
    g = convert("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"additionalProperties\":{\"type\":\"string\"},"
                "\"oneOf\":[{\"properties\":{\"k\":{\"const\":\"x\"}},\"required\":[\"k\"]},{\"properties\":{\"k\":{\"const\":\"y\"}},\"required\":[\"k\"]}]}", 0);
    expect(g, "{\"k\": \"x\", \"a\": 1}", true); /* the alternative's properties first */
    expect(g, "{\"k\": \"y\", \"z\": \"s\"}", true);
    expect(g, "{\"k\": \"z\"}", false);
    expect(g, "{\"k\": \"y\", \"z\": 1}", false);
    sift_grammar_free(g);
    /* every alternative impossible: an error, not an empty grammar */
    sift_error err = {0};
    const char *s2 = "{\"type\":\"object\",\"additionalProperties\":false,\"anyOf\":[{\"properties\":{\"b\":{}},\"required\":[\"b\"]}]}";
    char *gb = sift_json_schema_to_grammar(s2, strlen(s2), 0, &err);
    assert_null(gb);
    assert_non_null(strstr(err.msg, "matches nothing"));
}

/* propertyNames: the keys through the (string) schema, the values through additionalProperties;
 * refused beside declared properties (the key sets would need intersecting). */
static void test_property_names(void **state)
{
    (void)state;
    /* {}: any JSON value (JSON Schema), anywhere; llama.cpp's conventions read it as an object */
    sift_grammar *ge = convert("{}", 0);
    expect(ge, "1", true);
    expect(ge, "[\"x\", {}]", true);
    expect(ge, "{\"a\": null}", true);
    sift_grammar_free(ge);
    ge = convert("{\"type\":\"array\",\"items\":{\"description\":\"anything\"}}", SIFT_JSON_SCHEMA_LLAMA);
    expect(ge, "[{}, {\"a\": 1}]", true);
    expect(ge, "[1]", false);
    sift_grammar_free(ge);
    /* pattern with lengths its strings always have: the lengths say nothing more */
    sift_grammar *gp = convert("{\"type\":\"string\",\"pattern\":\"^(ab|c)x?$\",\"minLength\":1,\"maxLength\":3}", 0);
    expect(gp, "\"abx\"", true);
    expect(gp, "\"c\"", true);
    expect(gp, "\"abxx\"", false);
    sift_grammar_free(gp);
    sift_grammar *g = convert("{\"type\":\"object\",\"propertyNames\":{\"maxLength\":3},\"additionalProperties\":{\"type\":\"integer\"}}", 0);
    expect(g, "{}", true);
    expect(g, "{\"abc\": 1, \"\\n\": 2}", true);
    expect(g, "{\"abcd\": 1}", false);
    expect(g, "{\"ab\": \"x\"}", false);
    sift_grammar_free(g);
    /* untyped: objects are checked, the other kinds pass; a key no string fits leaves {} */
    g = convert("{\"propertyNames\":{\"const\":5}}", 0);
    expect(g, "{}", true);
    expect(g, "[1]", true);
    expect(g, "{\"5\": 1}", false);
    sift_grammar_free(g);
    g = convert("{\"propertyNames\":{\"enum\":[\"a\",\"bb\"]}}", 0);
    expect(g, "{\"bb\": [], \"a\": null}", true);
    expect(g, "{\"b\": 1}", false);
    sift_grammar_free(g);
    expect_refused("{\"properties\":{\"a\":{}},\"propertyNames\":{\"maxLength\":1}}", "propertyNames beside 'properties'");
}

/* multipleOf: random decimal texts against exact integer arithmetic (x = N / 10^f is a
 * multiple of q = M / 10^s when N 10^s is divisible by M 10^f); integers need x whole. */
static void test_multiple_of(void **state)
{
    (void)state;
    static const struct {
        const char *q;
        long long m;
        int s;
    } qs[] = {{"2", 2, 0}, {"1.5", 15, 1}, {"0.25", 25, 2}, {"7", 7, 0}, {"0.01", 1, 2}, {"12", 12, 0}};
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    for (size_t qi = 0; qi < sizeof qs / sizeof *qs; qi++)
        for (int integer = 0; integer < 2; integer++) {
            char schema[96];
            snprintf(schema, sizeof schema, "{\"type\":\"%s\",\"multipleOf\":%s}", integer ? "integer" : "number", qs[qi].q);
            sift_grammar *g = convert(schema, 0);
            int n_valid = 0;
            for (int it = 0; it < 3000; it++) {
                rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
                long long ip = (long long)(rng % 100000) >> (rng >> 40 & 15), fr = (long long)(rng >> 20 & 0xfffff) % 1000;
                int nf = (int)(rng >> 50 & 3); /* decimals: 0..3, leading zeros kept */
                char txt[48];
                long long nn = ip, p10 = 1;
                for (int k = 0; k < nf; k++) nn *= 10, p10 *= 10;
                long long fv = fr % p10;
                nn += fv;
                if (nf) snprintf(txt, sizeof txt, "%s%lld.%0*lld", rng >> 63 ? "-" : "", ip, nf, fv);
                else snprintf(txt, sizeof txt, "%s%lld", rng >> 63 ? "-" : "", ip);
                long long s10 = 1;
                for (int k = 0; k < qs[qi].s; k++) s10 *= 10;
                bool valid = (nn * s10) % (qs[qi].m * p10) == 0 && (!integer || !nf);
                n_valid += valid;
                expect(g, txt, valid);
            }
            assert_true(n_valid > 20); /* the valid side was exercised too */
            expect(g, "1e2", false); /* no exponent form is generated */
            sift_grammar_free(g);
        }
    expect_refused("{\"multipleOf\":2,\"minimum\":1}", "beside 'minimum'");
    expect_refused("{\"multipleOf\":2,\"minimum\":0,\"maximum\":9}", "beside 'maximum'");
    sift_grammar *g = convert("{\"type\":\"number\",\"multipleOf\":0.01,\"minimum\":0}", 0); /* money */
    expect(g, "12.34", true);
    expect(g, "0.5", true);
    expect(g, "7", true);
    expect(g, "1.234", false);
    expect(g, "-1.5", false);
    sift_grammar_free(g);
    expect_refused("{\"multipleOf\":0.123456789}", "more than 2048");
}

/* contains / minContains: n witnesses among items that all match `items`; refused beside
 * maxContains / maxItems (counting or a complement). */
static void test_contains(void **state)
{
    (void)state;
    sift_grammar *g = convert("{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"contains\":{\"minimum\":5}}", 0);
    expect(g, "[5]", true);
    expect(g, "[1, 2, 7, 3]", true);
    expect(g, "[]", false);
    expect(g, "[1, 2]", false);
    expect(g, "[1, 6.5]", false); /* the witness must be an item too */
    sift_grammar_free(g);
    g = convert("{\"contains\":{\"const\":\"x\"},\"minContains\":2}", 0);
    expect(g, "[\"x\", 1, \"x\"]", true);
    expect(g, "[\"x\", 1]", false);
    expect(g, "{\"a\": 1}", true); /* not an array: contains says nothing */
    sift_grammar_free(g);
    g = convert("{\"type\":\"array\",\"contains\":{\"const\":1},\"minContains\":0}", 0);
    expect(g, "[]", true);
    sift_grammar_free(g);
    g = convert("{\"type\":\"array\",\"maxContains\":1}", 0); /* without contains: nothing */
    expect(g, "[1, 1]", true);
    sift_grammar_free(g);
    expect_refused("{\"type\":\"array\",\"contains\":{\"const\":1},\"maxContains\":2}", "maxContains");
    expect_refused("{\"type\":\"array\",\"contains\":{\"const\":1},\"maxItems\":2}", "beside 'maxItems'");
}

/* unevaluatedProperties / unevaluatedItems without an in-place applicator are additionalProperties
 * / items; beside one, the keys another part evaluates must not be lost (refused or stricter). */
static void test_unevaluated(void **state)
{
    (void)state;
    sift_grammar *g = convert("{\"properties\":{\"a\":{}},\"patternProperties\":{\"^x\":{}},\"unevaluatedProperties\":{\"type\":\"integer\"}}", 0);
    expect(g, "{\"a\": \"s\", \"xy\": \"s\", \"b\": 1}", true);
    expect(g, "{\"b\": \"s\"}", false);
    sift_grammar_free(g);
    g = convert("{\"type\":\"array\",\"prefixItems\":[{\"type\":\"string\"}],\"unevaluatedItems\":false}", 0);
    expect(g, "[\"s\"]", true);
    expect(g, "[\"s\", 1]", false);
    sift_grammar_free(g);
    /* a part's unevaluatedProperties sees only its own part: {"a": 1} is invalid here */
    sift_error err = {0};
    const char *s1 = "{\"allOf\":[{\"unevaluatedProperties\":false},{\"properties\":{\"a\":{}}}]}";
    char *gb = sift_json_schema_to_grammar(s1, strlen(s1), 0, &err);
    if (gb) {
        sift_grammar *g2 = sift_grammar_parse(gb, strlen(gb), "root", NULL, &err);
        assert_non_null(g2);
        expect(g2, "{\"a\": 1}", false);
        sift_grammar_free(g2);
        free(gb);
    }
}

/* oneOf told apart: untyped object-only alternatives are objects (every other value matches
 * them all), a key one requires and the other forbids, literal patterns, and alternatives that
 * only require keys taken away from the others (the key absent); else refused. */
static void test_one_of_apart(void **state)
{
    (void)state;
    sift_grammar *g = convert("{\"oneOf\":[{\"required\":[\"a\",\"c\"]},{\"required\":[\"b\"]}]}", 0);
    expect(g, "{\"a\": 1, \"c\": 2}", true);
    expect(g, "{\"b\": 1, \"x\": 2}", true);
    expect(g, "{\"b\": 1, \"a\": 2}", true); /* c is missing: only the second matches */
    expect(g, "{\"a\": 1, \"b\": 2, \"c\": 3}", false);
    expect(g, "{}", false);
    expect(g, "\"s\"", false); /* matches both */
    sift_grammar_free(g);
    g = convert("{\"type\":\"object\",\"oneOf\":[{\"properties\":{\"t\":{\"type\":\"string\",\"pattern\":\"^ALIAS$\"},\"v\":{}},\"required\":[\"t\"]},"
                "{\"properties\":{\"t\":{\"type\":\"string\",\"pattern\":\"^BLANK$\"}},\"required\":[\"t\"]}]}", 0);
    expect(g, "{\"t\": \"ALIAS\", \"v\": 1}", true);
    expect(g, "{\"t\": \"BLANK\"}", true);
    expect(g, "{\"t\": \"OTHER\"}", false);
    sift_grammar_free(g);
    g = convert("{\"oneOf\":[{\"type\":\"object\",\"properties\":{\"x\":{}},\"additionalProperties\":false},"
                "{\"type\":\"object\",\"required\":[\"y\"]}]}", 0);
    expect(g, "{\"x\": 1}", true);
    expect(g, "{\"y\": 1, \"x\": 1}", true);
    expect(g, "{}", true);
    sift_grammar_free(g);
    /* b declares a key a leaves free, with types only: a's values with that key of another
     * type do not match b (hand-worked: {"l": "x"} matches the first only, as l is no string
     * for the second) */
    g = convert("{\"oneOf\":[{\"properties\":{\"f\":{\"type\":\"string\"}},\"required\":[\"f\"]},"
                "{\"properties\":{\"l\":{\"type\":\"string\"}},\"required\":[\"l\"]}]}", 0);
    expect(g, "{\"f\": \"a\"}", true);
    expect(g, "{\"l\": \"b\"}", true);
    expect(g, "{\"f\": \"a\", \"l\": \"b\"}", false); /* both */
    expect(g, "{\"f\": \"a\", \"l\": 1}", true);     /* l is no string: the second fails */
    expect(g, "{\"f\": 1, \"l\": \"b\"}", true);     /* f is no string: the first fails */
    expect(g, "{\"f\": 1, \"l\": 2}", false);          /* neither */
    expect(g, "{\"f\": \"a\", \"l\": null}", true);
    expect(g, "{}", false);
    expect(g, "\"s\"", false); /* not an object: matches both */
    sift_grammar_free(g);
    /* three alternatives: the type pieces of one key meet (number excludes integer too) */
    g = convert("{\"type\":\"object\",\"oneOf\":[{\"required\":[\"a\"]},{\"properties\":{\"a\":{\"type\":\"number\"}},\"required\":[\"b\"]},"
                "{\"properties\":{\"a\":{\"type\":[\"string\",\"null\"]}},\"required\":[\"c\"]}]}", 0);
    expect(g, "{\"a\": true}", true);              /* first only */
    expect(g, "{\"a\": true, \"b\": 1}", true);    /* first; a is no number for the second */
    expect(g, "{\"a\": \"s\", \"b\": 1}", true);   /* first; the same */
    expect(g, "{\"a\": 5, \"c\": 1}", true);       /* first; a is no string or null for the third */
    expect(g, "{\"a\": 5, \"b\": 1}", false);      /* first and second */
    expect(g, "{\"a\": 5.5, \"b\": 1}", false);    /* first and second */
    expect(g, "{\"a\": null, \"c\": 1}", false);   /* first and third */
    expect(g, "{\"b\": 1}", true);                  /* second only */
    expect(g, "{\"c\": 1}", true);                  /* third only */
    expect(g, "{\"b\": 1, \"c\": 1}", false);      /* second and third */
    expect(g, "{\"c\": 1, \"a\": [1]}", true);     /* first; a is no string or null for the third */
    sift_grammar_free(g);
    /* not {"required": [...]}: an object without one of the keys */
    g = convert("{\"not\":{\"required\":[\"a\",\"b\"]},\"properties\":{\"a\":{\"type\":\"integer\"}}}", 0);
    expect(g, "{\"a\": 1}", true);
    expect(g, "{\"b\": \"x\", \"c\": 2}", true);
    expect(g, "{\"a\": 1, \"b\": 2}", false);
    expect(g, "3", false);
    sift_grammar_free(g);
    g = convert("{\"type\":\"object\",\"properties\":{\"r\":{\"type\":\"number\"},\"l\":{\"type\":\"number\"}},"
                "\"oneOf\":[{\"not\":{\"required\":[\"r\"]},\"required\":[\"l\"]},{\"not\":{\"required\":[\"l\"]},\"required\":[\"r\"]}]}", 0);
    expect(g, "{\"l\": 1}", true);
    expect(g, "{\"r\": 1}", true);
    expect(g, "{\"r\": 1, \"l\": 2}", false);
    expect(g, "{}", false);
    sift_grammar_free(g);
    /* siblings merged into both: what they add is said by both, so the key test is exact */
    g = convert("{\"type\":\"object\",\"properties\":{\"p\":{\"type\":\"string\"},\"q\":{\"type\":\"integer\"}},"
                "\"oneOf\":[{\"required\":[\"p\"]},{\"required\":[\"q\"]}]}", 0);
    expect(g, "{\"p\": \"s\"}", true);
    expect(g, "{\"q\": 1, \"z\": 0}", true);
    expect(g, "{\"p\": \"s\", \"q\": 1}", false);
    expect(g, "{\"p\": 1}", false);
    sift_grammar_free(g);
    /* a type beside the oneOf meets each alternative's; one with none in common is left out */
    g = convert("{\"type\":[\"object\",\"null\"],\"oneOf\":[{\"type\":\"string\"},{\"type\":[\"object\",\"string\"],\"required\":[\"a\"]}]}", 0);
    expect(g, "{\"a\": 1}", true);
    expect(g, "\"s\"", false);
    expect(g, "null", false);
    sift_grammar_free(g);
    /* a discriminator both declare but neither requires: present, it tells them apart */
    g = convert("{\"type\":\"object\",\"properties\":{\"r\":{\"type\":\"number\"},\"l\":{\"type\":\"number\"},\"w\":{\"type\":\"number\"}},"
                "\"oneOf\":[{\"properties\":{\"shape\":{\"enum\":[\"circle\"]}},\"required\":[\"r\"]},"
                "{\"properties\":{\"shape\":{\"enum\":[\"rect\"]}},\"required\":[\"l\",\"w\"]}]}", 0);
    expect(g, "{\"r\": 1}", true);
    expect(g, "{\"r\": 1, \"l\": 2, \"w\": 3}", false);
    expect(g, "{\"r\": 1, \"l\": 2, \"w\": 3, \"shape\": \"circle\"}", true);
    expect(g, "{\"l\": 2, \"shape\": \"rect\", \"w\": 3}", true);
    expect(g, "{\"shape\": \"circle\"}", false);
    expect(g, "{\"r\": 1, \"shape\": \"rect\"}", false);
    sift_grammar_free(g);
    expect_refused("{\"oneOf\":[{\"type\":\"string\"},{\"type\":\"string\",\"pattern\":\"b\"}]}", "may both match");
    /* the second leaves a free, the first names its type: a's other types go to the second */
    g = convert("{\"oneOf\":[{\"required\":[\"a\"],\"properties\":{\"a\":{\"type\":\"string\"}}},{\"required\":[\"b\"]}]}", 0);
    expect(g, "{\"a\": \"x\"}", true);
    expect(g, "{\"b\": 1}", true);
    expect(g, "{\"a\": \"x\", \"b\": 1}", false); /* both */
    expect(g, "{\"a\": 1, \"b\": 1}", true);     /* a is no string: the second only */
    expect(g, "{\"a\": 1}", false);              /* neither */
    expect(g, "\"s\"", false);                    /* not an object: both */
    sift_grammar_free(g);
    /* dependencies on an object too large for key sets: one object per choice of present keys */
    g = convert("{\"type\":\"object\",\"additionalProperties\":false,\"dependencies\":{\"b\":[\"a\"],\"c\":[\"b\",\"d\"]},"
                "\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{},\"c\":{},\"d\":{},\"e\":{},\"f\":{},\"g\":{},\"h\":{}}}", 0);
    expect(g, "{}", true);
    expect(g, "{\"e\": 1, \"a\": 2}", true);
    expect(g, "{\"b\": 1}", false);                          /* b needs a */
    expect(g, "{\"a\": 2, \"b\": 1}", true);
    expect(g, "{\"b\": 3, \"c\": 1, \"d\": 2}", false);    /* b needs a */
    expect(g, "{\"a\": 4, \"b\": 3, \"c\": 1, \"d\": 2}", true); /* (big objects: in the schema's order) */
    expect(g, "{\"a\": 4, \"b\": 3, \"c\": 1}", false);    /* c needs d */
    expect(g, "{\"z\": 1}", false);
    sift_grammar_free(g);
    /* allOf over a part's anyOf: anyOf of the merged parts (exact); an unknown keyword is an
     * annotation, also inside allOf */
    g = convert("{\"allOf\":[{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"x-doc\":\"hi\"},"
                "{\"anyOf\":[{\"required\":[\"a\"]},{\"required\":[\"b\"]}]}]}", 0);
    expect(g, "{\"a\": 1}", true);
    expect(g, "{\"b\": \"x\"}", true);
    expect(g, "{\"a\": \"x\"}", false); /* a must be an integer */
    expect(g, "{\"c\": 1}", false);     /* neither a nor b */
    expect(g, "[]", false);
    sift_grammar_free(g);
    /* allOf over a part's oneOf: oneOf of the merged parts, whose pieces are then told apart */
    g = convert("{\"allOf\":[{\"type\":\"object\"},{\"oneOf\":[{\"required\":[\"a\"]},{\"required\":[\"b\"]}]}]}", 0);
    expect(g, "{\"a\": 1}", true);
    expect(g, "{\"b\": 1}", true);
    expect(g, "{\"a\": 1, \"b\": 2}", false); /* both */
    expect(g, "{}", false);
    sift_grammar_free(g);
    /* a discriminator no alternative requires: present, its value picks the alternative;
     * absent, the rest decides (hand-worked: without k, both match unless x is no string) */
    g = convert("{\"oneOf\":[{\"properties\":{\"k\":{\"enum\":[\"a\",\"b\"]},\"x\":{\"type\":\"string\"}},\"required\":[\"u\"]},"
                "{\"properties\":{\"k\":{\"const\":\"c\"}},\"required\":[\"u\"]}]}", 0);
    expect(g, "{\"k\": \"a\", \"u\": 1}", true);
    expect(g, "{\"k\": \"c\", \"u\": 1, \"x\": 5}", true);  /* x is free in the second */
    expect(g, "{\"k\": \"a\", \"u\": 1, \"x\": 5}", false); /* x must be a string in the first */
    expect(g, "{\"k\": \"d\", \"u\": 1}", false);           /* neither */
    expect(g, "{\"u\": 1}", false);                           /* both */
    expect(g, "{\"u\": 1, \"x\": \"s\"}", false);           /* both */
    expect(g, "{\"u\": 1, \"x\": 5}", true);                  /* the second only */
    expect(g, "{\"k\": \"a\"}", false);                     /* u missing */
    expect(g, "1", false);                                      /* both */
    sift_grammar_free(g);
    /* absent, the alternatives still differ: their pieces go on without the key */
    g = convert("{\"type\":\"object\",\"oneOf\":[{\"properties\":{\"k\":{\"const\":1}},\"required\":[\"a\"]},"
                "{\"properties\":{\"k\":{\"const\":2}},\"required\":[\"b\"]}]}", 0);
    expect(g, "{\"k\": 1, \"a\": 0, \"b\": 0}", true); /* k picks the first */
    expect(g, "{\"k\": 2, \"b\": 0}", true);
    expect(g, "{\"a\": 0}", true);                   /* no k: only the first */
    expect(g, "{\"a\": 0, \"b\": 0}", false);        /* no k: both */
    expect(g, "{\"k\": 2, \"a\": 0}", false);        /* k picks the second, b missing */
    sift_grammar_free(g);
    /* a pattern has no complement here: refused */
    expect_refused("{\"oneOf\":[{\"required\":[\"a\"],\"properties\":{\"a\":{\"type\":\"string\",\"pattern\":\"x\"}}},{\"required\":[\"b\"]}]}",
                   "may both match");
}

/* `not` and overlapping oneOf alternatives by complement (json_schema_not.c): the rejected
 * values of each keyword, exactly; hand-checked instances, prefixes included. */
static void expect_prefix(sift_grammar *g, const char *text, bool viable)
{
    int r = sift_grammar_match(g, text, strlen(text), NULL);
    if ((r != SIFT_GRAMMAR_REJECTED) != viable) fail_msg("prefix '%s': got %d, want %s", text, r, viable ? "viable" : "rejected");
}

static void test_complement(void **state)
{
    (void)state;
    /* not enum: every other value; strings other than the listed ones by their trie */
    sift_grammar *g = convert("{\"not\":{\"enum\":[\"ab\",\"ac\",true]}}", 0);
    expect(g, "\"ab\"", false);
    expect(g, "\"ac\"", false);
    expect(g, "true", false);
    expect(g, "\"a\"", true);
    expect(g, "\"\"", true);
    expect(g, "\"abc\"", true);
    expect(g, "\"b\"", true);
    expect(g, "\"a b\"", true);
    expect(g, "\"x\\nb\"", true);   /* left the list at x: anything after */
    expect(g, "\"a\\nb\"", false);  /* leaves it by an escape: the documented subset */
    expect(g, "false", true);
    expect(g, "null", true);
    expect(g, "1.5", true);
    expect(g, "{\"x\": 1}", true);
    expect(g, "[1]", true);
    expect_prefix(g, "\"ab", true);    /* "abc" may follow */
    expect_prefix(g, "\"ab\"", false); /* closed on a listed string */
    expect_prefix(g, "tr", false);
    sift_grammar_free(g);
    g = convert("{\"type\":\"string\",\"not\":{\"enum\":[\"\",\"a\",\"ab\"]}}", 0);
    expect(g, "\"\"", false);
    expect(g, "\"a\"", false);
    expect(g, "\"ab\"", false);
    expect(g, "\"b\"", true);
    expect(g, "\"aa\"", true);
    expect(g, "\"abc\"", true);
    expect(g, "\"ba\"", true);
    sift_grammar_free(g);
    g = convert("{\"type\":\"string\",\"not\":{\"const\":\"\u00e9t\u00e9\"}}", 0);
    expect(g, "\"\u00e9t\u00e9\"", false);
    expect(g, "\"\u00e9t\"", true);
    expect(g, "\"\"", true);
    sift_grammar_free(g);
    /* not allOf of required: an object without one of them (non-objects match required) */
    g = convert("{\"not\":{\"allOf\":[{\"required\":[\"cmd\"]},{\"required\":[\"args\"]}]}}", 0);
    expect(g, "{\"cmd\": 1}", true);
    expect(g, "{\"args\": 1}", true);
    expect(g, "{}", true);
    expect(g, "{\"cmd\": 1, \"args\": 2}", false);
    expect(g, "\"s\"", false);
    expect(g, "1", false);
    expect_prefix(g, "{\"cmd\": 1, \"args\"", false);
    sift_grammar_free(g);
    /* not anyOf: none of them holds */
    g = convert("{\"type\":\"object\",\"not\":{\"anyOf\":[{\"required\":[\"ref\"]},{\"required\":[\"err\"]}]}}", 0);
    expect(g, "{\"x\": 1}", true);
    expect(g, "{\"ref\": 1}", false);
    expect(g, "{\"err\": 1}", false);
    sift_grammar_free(g);
    /* not of properties and required: a key missing, or a value the property rejects */
    g = convert("{\"type\":\"object\",\"not\":{\"properties\":{\"f\":{\"type\":\"string\"},\"l\":{\"type\":\"string\"}},"
                "\"required\":[\"f\",\"l\"]}}", 0);
    expect(g, "{\"f\": \"a\", \"l\": \"b\"}", false);
    expect(g, "{\"f\": \"a\"}", true);
    expect(g, "{\"f\": \"a\", \"l\": 2}", true);
    expect(g, "{\"f\": null, \"l\": \"b\"}", true);
    expect(g, "{}", true);
    sift_grammar_free(g);
    /* counts and bounds: the values beyond them, of their own type only */
    g = convert("{\"not\":{\"maxItems\":0,\"minimum\":3}}", 0);
    expect(g, "[]", false);
    expect(g, "[1]", true);
    expect(g, "2.5", true);
    expect(g, "3", false);
    expect(g, "3.0", false);
    expect(g, "\"s\"", false);
    expect(g, "{}", false);
    sift_grammar_free(g);
    g = convert("{\"not\":{\"propertyNames\":false}}", 0);
    expect(g, "{}", false);
    expect(g, "{\"a\": 1}", true);
    expect(g, "1", false);
    sift_grammar_free(g);
    /* items: an array with an item the schema rejects */
    g = convert("{\"not\":{\"items\":{\"type\":\"string\"}}}", 0);
    expect(g, "[\"a\", 1]", true);
    expect(g, "[\"a\"]", false);
    expect(g, "[]", false);
    expect(g, "1", false);
    sift_grammar_free(g);
    /* not oneOf: none or two of them */
    g = convert("{\"type\":\"object\",\"not\":{\"oneOf\":[{\"required\":[\"a\"]},{\"required\":[\"b\"]}]}}", 0);
    expect(g, "{}", true);
    expect(g, "{\"a\": 1, \"b\": 2}", true);
    expect(g, "{\"a\": 1}", false);
    expect(g, "{\"b\": 1}", false);
    sift_grammar_free(g);
    /* oneOf whose alternatives overlap, by complement: untyped properties (MaskBench's
     * display_name): only objects can match one alone */
    g = convert("{\"oneOf\":[{\"properties\":{\"type\":{\"enum\":[\"callback\"]},\"value\":{\"type\":\"string\"}}},"
                "{\"properties\":{\"type\":{\"enum\":[\"field\",\"value\"]},\"value\":{\"type\":[\"string\",\"null\",\"number\"]}}}]}", 0);
    expect(g, "{\"type\": \"callback\", \"value\": \"x\"}", true);
    expect(g, "{\"type\": \"field\", \"value\": 1}", true);
    expect(g, "{\"value\": 1}", true);              /* only the second takes a number */
    expect(g, "{\"value\": \"x\"}", false);         /* both */
    expect(g, "{}", false);                          /* both */
    expect(g, "\"s\"", false);                       /* both */
    expect(g, "{\"type\": \"callback\", \"value\": 1}", false); /* neither */
    expect_prefix(g, "{\"value\": \"x\"}", false);
    sift_grammar_free(g);
    /* a string enum beside the plain type: the listed one matches both */
    g = convert("{\"oneOf\":[{\"enum\":[\"linux\"]},{\"type\":\"string\"}]}", 0);
    expect(g, "\"linux\"", false);
    expect(g, "\"osx\"", true);
    expect(g, "\"linuxx\"", true);
    expect(g, "1", false);
    sift_grammar_free(g);
    /* an object, or anything without a (which includes every non-object) */
    g = convert("{\"oneOf\":[{\"type\":\"object\"},{\"properties\":{\"a\":{}}}]}", 0);
    expect(g, "\"s\"", true);
    expect(g, "1", true);
    expect(g, "{}", false);
    expect(g, "{\"a\": 1}", false);
    sift_grammar_free(g);
    /* strings match all three; objects with exactly one of a, b */
    g = convert("{\"oneOf\":[{\"type\":\"string\"},{\"required\":[\"a\"]},{\"required\":[\"b\"]}]}", 0);
    expect(g, "\"s\"", false);
    expect(g, "1", false);
    expect(g, "{\"a\": 1}", true);
    expect(g, "{\"b\": 1}", true);
    expect(g, "{\"a\": 1, \"b\": 1}", false);
    expect(g, "{}", false);
    sift_grammar_free(g);
    /* a property schema beyond types: its complement (other types, or a shorter string) */
    g = convert("{\"oneOf\":[{\"required\":[\"a\"],\"properties\":{\"a\":{\"type\":\"string\",\"minLength\":2}}},{\"required\":[\"b\"]}]}", 0);
    expect(g, "{\"a\": \"xy\"}", true);
    expect(g, "{\"a\": \"xy\", \"b\": 1}", false);
    expect(g, "{\"a\": \"x\", \"b\": 1}", true);
    expect(g, "{\"a\": 1, \"b\": 1}", true);
    expect(g, "{\"a\": \"x\"}", false);
    sift_grammar_free(g);
    /* not integer: the non-integer numbers are no type and are left out (a subset) */
    g = convert("{\"not\":{\"type\":\"integer\"}}", 0);
    expect(g, "\"s\"", true);
    expect(g, "null", true);
    expect(g, "1", false);
    expect(g, "1.0", false);
    expect(g, "1.5", false); /* valid, rejected: the documented subset */
    sift_grammar_free(g);
    /* oneOf by complement through it: a number alone matches both, a string the first only */
    g = convert("{\"oneOf\":[{\"properties\":{\"exact\":{\"type\":\"integer\"}}},{\"properties\":{\"min\":{\"type\":\"integer\"}}}]}", 0);
    expect(g, "{\"exact\": 1, \"min\": \"x\"}", true);
    expect(g, "{\"exact\": \"x\", \"min\": 1}", true);
    expect(g, "{\"exact\": 1, \"min\": 1}", false);
    expect(g, "{\"exact\": 1}", false);
    expect(g, "{}", false);
    expect(g, "7", false);
    sift_grammar_free(g);
    /* a format outside the standard ones is an annotation: on strings the alternatives are
     * apart by length, every other value matches both */
    g = convert("{\"oneOf\":[{\"maxLength\":0},{\"format\":\"html-selector\",\"minLength\":1}]}", 0);
    expect(g, "\"\"", true);
    expect(g, "\"a b\"", true);
    expect(g, "1", false);
    expect(g, "null", false);
    sift_grammar_free(g);
    /* a run of one class: the strings with a character outside it (and "" for +) */
    g = convert("{\"not\":{\"pattern\":\"^[a-z\\\\s]+$\"}}", 0);
    expect(g, "\"\"", true);
    expect(g, "\"ab1\"", true);
    expect(g, "\"1\"", true);
    expect(g, "\"ab c\"", false);
    expect(g, "\"abc\"", false);
    expect(g, "1", false); /* not a string: the pattern holds */
    sift_grammar_free(g);
    g = convert("{\"type\":\"string\",\"not\":{\"pattern\":\"^[^0-9]*$\"}}", 0);
    expect(g, "\"\"", false);
    expect(g, "\"ab\"", false);
    expect(g, "\"a1b\"", true);
    expect(g, "\"7\"", true);
    sift_grammar_free(g);
    /* no complement: patterns, formats, numbers in a list */
    expect_refused("{\"not\":{\"format\":\"email\"}}", "'not'");
    expect_refused("{\"not\":{\"pattern\":\"^a[b]+$\"}}", "'not'");
    expect_refused("{\"not\":{\"enum\":[1,2]}}", "'not'");
}

/* objects beyond any order (more than 7 declared keys): the schema's order, or the required
 * keys first in `required`'s order and the rest in the schema's order; no other order */
static void test_two_orders(void **state)
{
    (void)state;
    sift_grammar *g = convert("{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"h\",\"b\"],\"properties\":{"
                              "\"a\":{},\"b\":{},\"c\":{},\"d\":{},\"e\":{},\"f\":{},\"g\":{},\"h\":{}}}", 0);
    expect(g, "{\"a\": 1, \"b\": 2, \"c\": 3, \"h\": 4}", true); /* the schema's order */
    expect(g, "{\"h\": 4, \"b\": 2, \"a\": 1, \"c\": 3}", true); /* required first */
    expect(g, "{\"b\": 2, \"h\": 4}", true);
    expect(g, "{\"h\": 4, \"b\": 2}", true);
    expect(g, "{\"h\": 4, \"a\": 1, \"b\": 2}", false);           /* neither order */
    expect(g, "{\"c\": 3, \"a\": 1, \"b\": 2, \"h\": 4}", false);
    expect(g, "{\"h\": 4}", false);                                 /* b missing */
    expect(g, "{\"h\": 4, \"b\": 2, \"h\": 4}", false);           /* a key twice */
    expect(g, "{\"h\": 4, \"b\": 2, \"z\": 0}", false);           /* not declared */
    expect_prefix(g, "{\"h\": 4, \"b\": 2, \"a\"", true);
    expect_prefix(g, "{\"h\": 4, \"a\"", false);
    sift_grammar_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden_person), cmocka_unit_test(test_types),          cmocka_unit_test(test_formats),
        cmocka_unit_test(test_objects),       cmocka_unit_test(test_arrays),         cmocka_unit_test(test_refs),
        cmocka_unit_test(test_integer_ranges), cmocka_unit_test(test_patterns),      cmocka_unit_test(test_format_constraints), cmocka_unit_test(test_alternatives), cmocka_unit_test(test_errors),
        cmocka_unit_test(test_pattern_properties), cmocka_unit_test(test_number_ranges), cmocka_unit_test(test_finite_values), cmocka_unit_test(test_long_strings), cmocka_unit_test(test_pattern_length), cmocka_unit_test(test_property_counts), cmocka_unit_test(test_any_of_additional), cmocka_unit_test(test_all_of_exact),
        cmocka_unit_test(test_ref_siblings), cmocka_unit_test(test_ref_names), cmocka_unit_test(test_ecma_space_hostname),
        cmocka_unit_test(test_simplified_keywords), cmocka_unit_test(test_property_names), cmocka_unit_test(test_multiple_of), cmocka_unit_test(test_contains), cmocka_unit_test(test_unevaluated), cmocka_unit_test(test_one_of_apart), cmocka_unit_test(test_pattern_bounded),
        cmocka_unit_test(test_pattern_length_automaton), cmocka_unit_test(test_complement),
        cmocka_unit_test(test_two_orders), cmocka_unit_test(test_compiler_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
