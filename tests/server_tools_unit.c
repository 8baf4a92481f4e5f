/*
 * server_tools_unit.c - unit tests of the server's tool calling (tools/server/tool_calls.c;
 * CTest: server_tools_unit, also under valgrind): the format detected from the real
 * templates in ../shared/chat-templates; the request's checks (400s); each format's grammar
 * (it compiles, takes a well-formed call, refuses an unknown function or arguments outside
 * the schema); each format's parser on good, partial and malformed replies (never a crash,
 * a malformed call is content, arguments always an object); what streaming holds back; and
 * the messages the template gets.
 */
#include "sift_test.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"

static const char weather_tools[] =
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather in a city\","
    " \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", \"enum\": [\"Paris\", \"Tokyo\"]},"
    " \"days\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 7}}, \"required\": [\"city\", \"days\"]}}},"
    " {\"type\": \"function\", \"function\": {\"name\": \"get_time\", \"parameters\": {\"type\": \"object\","
    " \"properties\": {\"zone\": {\"type\": \"string\"}}}}}]";

/* A spec for format f from a request body {"tools": ..., <extra>}. */
static tc_spec *spec_for(tc_format f, const char *extra, srv_error *e)
{
    char body[4096];
    snprintf(body, sizeof body, "{\"tools\": %s%s%s}", weather_tools, extra ? ", " : "", extra ? extra : "");
    cJSON *root = cJSON_Parse(body);
    assert_non_null(root);
    tc_spec *t = NULL;
    memset(e, 0, sizeof *e);
    tc_parse_request(f, root, &t, e);
    cJSON_Delete(root);
    return t;
}

static char *read_template(const char *name)
{
    const char *shared = getenv("SIFT_SHARED");
    char path[1024];
    snprintf(path, sizeof path, "%s/chat-templates/templates/%s", shared ? shared : "../shared", name);
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot open %s", path);
    char *buf = calloc(1, 1 << 20);
    size_t n = fread(buf, 1, (1 << 20) - 1, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

static void test_detect(void **state)
{
    (void)state;
    static const struct {
        const char *file;
        tc_format f;
    } cases[] = {
        {"qwen2.5-instruct.jinja", TC_HERMES},
        {"vllm-tool_chat_template_hermes.jinja", TC_HERMES},
        {"vllm-tool_chat_template_llama3.1_json.jinja", TC_LLAMA3},
        {"mistralai-Mistral-Small-3.1-24B-Instruct-2503.jinja", TC_MISTRAL},
        {"chatml.jinja", TC_GENERIC},
        {"llama-2-chat.jinja", TC_GENERIC},
        {"CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja", TC_COMMAND_R7B},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *t = read_template(cases[i].file);
        if (tc_detect(t) != cases[i].f) fail_msg("%s: %s", cases[i].file, tc_format_name(tc_detect(t)));
        free(t);
    }
    assert_int_equal(tc_detect(NULL), TC_GENERIC);
    char *q = read_template("qwen2.5-instruct.jinja");
    cJSON *caps = cJSON_CreateObject();
    tc_caps_json(q, caps);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(caps, "supports_tools")));
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(caps, "supports_tool_calls")));
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(caps, "supports_parallel_tool_calls")));
    assert_string_equal(cJSON_GetObjectItem(caps, "tool_call_format")->valuestring, "hermes");
    cJSON_Delete(caps);
    free(q);
}

static void test_request_errors(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "{\"tools\": {}}",
        "{\"tools\": [1]}",
        "{\"tools\": [{\"type\": \"function\"}]}",
        "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"\"}}]}",
        "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"a b\"}}]}",
        "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": 3}}]}",
        "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}}, {\"type\": \"function\", \"function\": {\"name\": \"f\"}}]}",
        "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}}], \"tool_choice\": \"sometimes\"}",
        "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}}], \"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": \"g\"}}}",
        "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}}], \"tool_choice\": 7}",
        "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}}], \"parallel_tool_calls\": \"yes\"}",
        "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"type\": \"object\", \"properties\": {\"a\": {\"$ref\": \"#/$defs/nowhere\"}}}}}]}",
        "{\"tools\": [], \"tool_choice\": \"required\"}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cJSON *root = cJSON_Parse(bad[i]);
        assert_non_null(root);
        srv_error e = {0};
        tc_spec *t = NULL;
        const int rc = tc_parse_request(TC_HERMES, root, &t, &e);
        if (rc != 400 || t || !e.msg[0]) fail_msg("%s: rc %d", bad[i], rc);
        cJSON_Delete(root);
    }
    /* no tool call can come: no spec, no error */
    static const char *const none[] = {"{}", "{\"tools\": []}", "{\"tools\": null}",
                                       "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}}], \"tool_choice\": \"none\"}"};
    for (size_t i = 0; i < sizeof none / sizeof *none; i++) {
        cJSON *root = cJSON_Parse(none[i]);
        srv_error e = {0};
        tc_spec *t = NULL;
        assert_int_equal(tc_parse_request(TC_HERMES, root, &t, &e), 0);
        assert_null(t);
        cJSON_Delete(root);
    }
}

/* The format's grammar takes `good` whole and refuses every text in bad[]. */
static void check_grammar(const tc_spec *t, const char *good, const char *const *bad, size_t n_bad)
{
    sift_error err = {0};
    sift_grammar *g = sift_grammar_parse(t->gbnf, strlen(t->gbnf), TC_ROOT, NULL, &err);
    if (!g) fail_msg("%s\n%s", err.msg, t->gbnf);
    if (sift_grammar_match(g, good, strlen(good), NULL) != SIFT_GRAMMAR_COMPLETE) fail_msg("refused: %s\n%s", good, t->gbnf);
    for (size_t i = 0; i < n_bad; i++)
        if (sift_grammar_match(g, bad[i], strlen(bad[i]), NULL) != SIFT_GRAMMAR_REJECTED) fail_msg("taken: %s", bad[i]);
    sift_grammar_free(g);
}

/* Parse `text`: n_calls calls (the first named `name` with `args`), content as given (NULL: none). */
static void check_parse(const tc_spec *t, const char *text, int n_calls, const char *name, const char *args, const char *content)
{
    tc_result r;
    assert_true(tc_parse_output(t, text, strlen(text), &r));
    if (r.n_calls != n_calls) fail_msg("%s: %d calls", text, r.n_calls);
    if (n_calls) {
        assert_string_equal(r.calls[0].name, name);
        assert_string_equal(r.calls[0].arguments, args);
        assert_memory_equal(r.calls[0].id, "call_", 5);
        assert_int_equal(strlen(r.calls[0].id), 14);
    }
    if (content) {
        if (!r.content || strcmp(r.content, content)) fail_msg("%s: content [%s]", text, r.content ? r.content : "(null)");
    } else {
        assert_null(r.content);
    }
    tc_result_free(&r);
}

/* Every prefix of a reply parses without a crash; a call that comes out is whole. */
static void check_prefixes(const tc_spec *t, const char *text)
{
    const size_t n = strlen(text);
    for (size_t k = 0; k <= n; k++) {
        tc_result r;
        assert_true(tc_parse_output(t, text, k, &r));
        for (int i = 0; i < r.n_calls; i++) {
            cJSON *a = cJSON_Parse(r.calls[i].arguments);
            assert_true(cJSON_IsObject(a));
            cJSON_Delete(a);
        }
        if (!r.n_calls && k) assert_int_equal(strlen(r.content), k); /* all of it is content */
        tc_result_free(&r);
        (void)tc_content_safe(t, text, k);
    }
}

/* Stream `reply` a byte at a time: content_n bytes of content, then per call a head (index,
 * id, type, name, arguments "") and argument fragments that add up to the arguments of the
 * reply parsed whole; n_calls calls, finish_reason tool_calls. */
static void check_stream(tc_spec *t, const char *reply, int n_calls, size_t content_n)
{
    sbuf content = {0};
    cJSON *all = cJSON_CreateArray();
    int n_frag = 0;
    for (size_t i = 0; reply[i]; i++) {
        cJSON *d = tc_stream_text(t, reply + i, 1, &content);
        while (d && d->child) cJSON_AddItemToArray(all, cJSON_DetachItemViaPointer(d, d->child));
        cJSON_Delete(d);
    }
    n_frag = cJSON_GetArraySize(all);
    const char *finish = "stop";
    cJSON *d = tc_stream_final(t, reply, strlen(reply), &finish);
    while (d && d->child) cJSON_AddItemToArray(all, cJSON_DetachItemViaPointer(d, d->child));
    cJSON_Delete(d);
    assert_string_equal(finish, "tool_calls");
    assert_int_equal(content.n, content_n);
    tc_result r;
    assert_true(tc_parse_output(t, reply, strlen(reply), &r));
    assert_int_equal(r.n_calls, n_calls);
    for (int k = 0; k < n_calls; k++) {
        sbuf args = {0};
        int heads = 0;
        for (cJSON *x = all->child; x; x = x->next) {
            cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(x, "tool_calls"), 0);
            if (!c || cJSON_GetObjectItem(c, "index")->valueint != k) continue;
            cJSON *fn = cJSON_GetObjectItem(c, "function");
            if (cJSON_GetObjectItem(c, "id")) {
                heads++;
                assert_string_equal(cJSON_GetObjectItem(c, "type")->valuestring, "function");
                assert_string_equal(cJSON_GetObjectItem(fn, "name")->valuestring, r.calls[k].name);
                assert_string_equal(cJSON_GetObjectItem(fn, "arguments")->valuestring, "");
                assert_int_equal(args.n, 0);
            } else {
                assert_int_equal(heads, 1);
                sbuf_adds(&args, cJSON_GetObjectItem(fn, "arguments")->valuestring);
            }
        }
        assert_int_equal(heads, 1);
        sbuf_add(&args, "", 1);
        assert_string_equal(args.p, r.calls[k].arguments);
        sbuf_free(&args);
    }
    if (!(n_frag > 2 * n_calls)) fail_msg("%s: %d fragments before the end", reply, n_frag); /* the arguments came in pieces, before the end */
    tc_result_free(&r);
    cJSON_Delete(all);
    sbuf_free(&content);
}

static void test_hermes(void **state)
{
    (void)state;
    srv_error e;
    tc_spec *t = spec_for(TC_HERMES, NULL, &e);
    assert_non_null(t);
    assert_true(t->lazy);
    const char *good = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n</tool_call>";
    static const char *const bad[] = {
        "<tool_call>\n{\"name\": \"get_rain\", \"arguments\": {}}\n</tool_call>",
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\", \"days\": 3}}\n</tool_call>",
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 9}}\n</tool_call>",
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
        "<tool_call>{\"name\": \"get_time\", \"arguments\": {}}</tool_call><tool_call>{\"name\": \"get_time\", \"arguments\": {}}</tool_call>",
    };
    check_grammar(t, good, bad, sizeof bad / sizeof *bad);
    check_parse(t, good, 1, "get_weather", "{\"city\":\"Paris\",\"days\":3}", NULL);
    check_parse(t, "Let me look.\n<tool_call>{\"name\": \"get_time\", \"arguments\": {\"zone\": \"UTC\"}}</tool_call>", 1, "get_time",
                "{\"zone\":\"UTC\"}", "Let me look.");
    /* arguments given as a JSON string are taken too */
    check_parse(t, "<tool_call>{\"name\": \"get_time\", \"arguments\": \"{\\\"zone\\\": \\\"UTC\\\"}\"}</tool_call>", 1, "get_time",
                "{\"zone\":\"UTC\"}", NULL);
    /* malformed: everything is content */
    static const char *const malformed[] = {
        "<tool_call>{\"name\": \"get_time\", \"arguments\": {\"zone\": \"UT",             /* cut off */
        "<tool_call>{\"name\": \"get_time\", \"arguments\": {}}",                          /* no closing tag */
        "<tool_call>{\"name\": \"nope\", \"arguments\": {}}</tool_call>",                  /* unknown function */
        "<tool_call>{\"name\": \"get_time\", \"arguments\": [1]}</tool_call>",             /* arguments not an object */
        "<tool_call>{\"name\": \"get_time\", \"arguments\": \"not json\"}</tool_call>",
        "<tool_call>{\"name\": 7, \"arguments\": {}}</tool_call>",
        "<tool_call>}}}{{{</tool_call>",
        "<tool_call>",
        "no call here",
    };
    for (size_t i = 0; i < sizeof malformed / sizeof *malformed; i++) check_parse(t, malformed[i], 0, NULL, NULL, malformed[i]);
    check_parse(t, "", 0, NULL, NULL, NULL);
    check_prefixes(t, "Sure. <tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Tokyo\", \"days\": 1}}\n</tool_call>");
    /* streaming holds the call and a partial opening back */
    assert_int_equal(tc_content_safe(t, "Hi <tool", 8), 3);
    assert_int_equal(tc_content_safe(t, "Hi <tool_call>{", 15), 3);
    assert_int_equal(tc_content_safe(t, "Hi <b>", 6), 6);
    /* the streamed deltas: the content before the call, then the call's head, then its
     * arguments as they come; the same call as the reply parsed whole */
    const char *reply = "Hi <tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\",\n \"days\": 3}}\n</tool_call>";
    check_stream(t, reply, 1, 3);
    tc_spec_free(t);

    /* parallel: several blocks */
    t = spec_for(TC_HERMES, "\"parallel_tool_calls\": true, \"tool_choice\": \"required\"", &e);
    assert_non_null(t);
    assert_false(t->lazy);
    const char *two = "<tool_call>{\"name\": \"get_time\", \"arguments\": {}}</tool_call>\n<tool_call>{\"name\": \"get_weather\", "
                      "\"arguments\": {\"city\": \"Tokyo\", \"days\": 2}}</tool_call>";
    check_grammar(t, two, NULL, 0);
    check_parse(t, two, 2, "get_time", "{}", NULL);
    /* cut off (max_tokens) in the second call: the first stands */
    check_parse(t, "<tool_call>{\"name\": \"get_time\", \"arguments\": {}}</tool_call>\n<tool_call>{\"name\": \"get_weather\", \"argu",
                1, "get_time", "{}", NULL);
    check_parse(t, "<tool_call>{\"name\": \"get_time\", \"arguments\": {}}</tool_call><tool_call>{\"name\": \"get_time\", \"arguments\": {}}",
                1, "get_time", "{}", NULL);
    check_prefixes(t, two);
    check_stream(t, two, 2, 0);
    tc_spec_free(t);

    /* a named function: only that one */
    t = spec_for(TC_HERMES, "\"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": \"get_time\"}}", &e);
    assert_non_null(t);
    assert_int_equal(t->n_names, 1);
    static const char *const other[] = {"<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 1}}</tool_call>"};
    check_grammar(t, "<tool_call>{\"name\": \"get_time\", \"arguments\": {\"zone\": \"CET\"}}</tool_call>", other, 1);
    tc_spec_free(t);
}

static void test_llama3(void **state)
{
    (void)state;
    /* Llama 4 (<|header_start|>): its JSON template asks for Llama 3.x's {"name", "parameters"} object
     * (tests/data/templates/llama4-json-tools.jinja, written after vLLM's llama4_json one), and
     * the reply parses as llama.cpp reads that template's calls; it fell to the generic format */
    const char *src = getenv("SIFT_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/templates/llama4-json-tools.jinja", src ? src : ".");
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot open %s", path);
    char *l4 = calloc(1, 1 << 16);
    l4[fread(l4, 1, (1 << 16) - 1, f)] = 0;
    fclose(f);
    assert_int_equal(tc_detect(l4), TC_LLAMA3);
    free(l4);
    srv_error e4;
    tc_spec *t4 = spec_for(TC_LLAMA3, "\"tool_choice\": \"required\"", &e4);
    check_parse(t4, "{\"name\": \"get_time\", \"parameters\": {\"zone\": \"UTC\"}}", 1, "get_time", "{\"zone\":\"UTC\"}", NULL);
    check_grammar(t4, "{\"name\": \"get_time\", \"parameters\": {\"zone\": \"UTC\"}}", NULL, 0);
    tc_spec_free(t4);
    srv_error e;
    tc_spec *t = spec_for(TC_LLAMA3, NULL, &e);
    assert_non_null(t);
    const char *good = "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Tokyo\", \"days\": 7}}";
    static const char *const bad[] = {"{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Tokyo\", \"days\": 7}}",
                                      "{\"name\": \"x\", \"parameters\": {}}"};
    check_grammar(t, good, bad, 2);
    check_grammar(t, "<|python_tag|>{\"name\": \"get_time\", \"parameters\": {}}", NULL, 0);
    check_parse(t, good, 1, "get_weather", "{\"city\":\"Tokyo\",\"days\":7}", NULL);
    check_parse(t, "<|python_tag|>{\"name\": \"get_time\", \"parameters\": {\"zone\": \"UTC\"}}", 1, "get_time", "{\"zone\":\"UTC\"}", NULL);
    check_parse(t, "I will check. {\"name\": \"get_time\", \"parameters\": {}}", 1, "get_time", "{}", "I will check.");
    check_parse(t, "{\"name\": \"get_time\", \"parameters\": {", 0, NULL, NULL, "{\"name\": \"get_time\", \"parameters\": {");
    check_parse(t, "{\"nombre\": 1}", 0, NULL, NULL, "{\"nombre\": 1}");
    check_prefixes(t, "Hm {\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"days\": 2}}");
    assert_int_equal(tc_content_safe(t, "ok {\"na", 7), 3);
    /* the whitespace the grammar allows after the brace */
    check_parse(t, "{ \"name\" : \"get_time\" , \"parameters\" : { \"zone\" : \"UTC\" } } ", 1, "get_time", "{\"zone\":\"UTC\"}", NULL);
    check_parse(t, "x {\n  \"name\": \"get_time\", \"parameters\": {}}", 1, "get_time", "{}", "x");
    assert_int_equal(tc_content_safe(t, "ok { ", 5), 3);
    assert_int_equal(tc_content_safe(t, "ok {\n \"nam", 10), 3);
    assert_int_equal(tc_content_safe(t, "ok {x} ", 7), 7);
    assert_int_equal(tc_content_safe(t, "{a} { \"name\"", 13), 4);
    assert_non_null(t->pattern);
    check_stream(t, "Ok. { \"name\" : \"get_weather\" , \"parameters\" : { \"city\" : \"To kyo\" , \"days\" : 2 } }", 1, 4);
    tc_spec_free(t);
}

static void test_mistral(void **state)
{
    (void)state;
    srv_error e;
    tc_spec *t = spec_for(TC_MISTRAL, "\"parallel_tool_calls\": true", &e);
    assert_non_null(t);
    const char *good = "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}, "
                       "{\"name\": \"get_time\", \"arguments\": {}}]";
    static const char *const bad[] = {"[TOOL_CALLS]{\"name\": \"get_time\", \"arguments\": {}}", "[TOOL_CALLS][]"};
    check_grammar(t, good, bad, 2);
    check_parse(t, good, 2, "get_weather", "{\"city\":\"Paris\",\"days\":2}", NULL);
    check_parse(t, "[TOOL_CALLS] [{\"name\": \"get_time\", \"arguments\": {}, \"id\": \"abcdefghi\"}]", 1, "get_time", "{}", NULL);
    check_parse(t, "[TOOL_CALLS][{\"name\": \"get_time\", \"arguments\": {}", 0, NULL, NULL,
                "[TOOL_CALLS][{\"name\": \"get_time\", \"arguments\": {}");
    check_parse(t, "[TOOL_CALLS]\"x\"", 0, NULL, NULL, "[TOOL_CALLS]\"x\"");
    /* parallel, cut off (max_tokens) in the second call: the first stands */
    check_parse(t, "[TOOL_CALLS] [ {\"name\": \"get_time\", \"arguments\": {}} , {\"name\": \"get_ti", 1, "get_time", "{}", NULL);
    check_parse(t, "[TOOL_CALLS] {\"name\": \"get_time\", \"arguments\": {}}", 1, "get_time", "{}", NULL);
    check_prefixes(t, good);
    check_stream(t, good, 2, 0);
    tc_spec_free(t);
}

static void test_generic(void **state)
{
    (void)state;
    srv_error e;
    tc_spec *t = spec_for(TC_GENERIC, NULL, &e);
    assert_non_null(t);
    assert_false(t->lazy); /* the whole reply is JSON */
    const char *good = "{\"tool_call\": {\"name\": \"get_time\", \"arguments\": {\"zone\": \"UTC\"}}}";
    static const char *const bad[] = {"Hello", "{\"tool_call\": {\"name\": \"get_time\", \"arguments\": {\"zone\": 1}}}"};
    check_grammar(t, good, bad, 2);
    check_grammar(t, "{\"response\": \"Hello there\"}", NULL, 0);
    check_parse(t, good, 1, "get_time", "{\"zone\":\"UTC\"}", NULL);
    check_parse(t, "{\"response\": \"Hello there\"}", 0, NULL, NULL, "Hello there");
    check_parse(t, "{\"response\": \"Hel", 0, NULL, NULL, "{\"response\": \"Hel");
    check_parse(t, "plain text", 0, NULL, NULL, "plain text");
    check_prefixes(t, good);
    assert_int_equal(tc_content_safe(t, "{\"resp", 6), 0);
    tc_spec_free(t);
    t = spec_for(TC_GENERIC, "\"tool_choice\": \"required\", \"parallel_tool_calls\": true", &e);
    assert_non_null(t);
    static const char *const no_response[] = {"{\"response\": \"Hello there\"}"};
    check_grammar(t, "{\"tool_calls\": [{\"name\": \"get_time\", \"arguments\": {}}, {\"name\": \"get_time\", \"arguments\": {}}]}",
                  no_response, 1);
    check_parse(t, "{\"tool_calls\": [{\"name\": \"get_time\", \"arguments\": {}}]}", 1, "get_time", "{}", NULL);
    check_parse(t, "{ \"tool_calls\" : [{\"name\": \"get_time\", \"arguments\": {}}, {\"na", 1, "get_time", "{}", NULL);
    check_prefixes(t, "{\"tool_calls\": [{\"name\": \"get_time\", \"arguments\": {}}, {\"name\": \"get_time\", \"arguments\": {}}]}");
    tc_spec_free(t);
}

static void test_template_messages(void **state)
{
    (void)state;
    cJSON *m = cJSON_Parse("[{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": null, \"tool_calls\": "
                           "[{\"id\": \"call_1\", \"type\": \"function\", \"function\": {\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 1}\"}}]},"
                           " {\"role\": \"tool\", \"tool_call_id\": \"call_1\", \"content\": \"2\"}]");
    cJSON *out = tc_template_messages(m, NULL, false); /* as given */
    assert_true(cJSON_IsString(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetArrayItem(out, 1),
                                                  "tool_calls"), 0), "function"), "arguments")));
    cJSON_Delete(out);
    out = tc_template_messages(m, NULL, true);
    cJSON *args = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetArrayItem(out, 1), "tool_calls"), 0),
                                                          "function"),
                                      "arguments");
    assert_true(cJSON_IsObject(args));
    assert_int_equal(cJSON_GetObjectItem(args, "a")->valueint, 1);
    assert_int_equal(cJSON_GetArraySize(out), 3);
    cJSON_Delete(out);
    srv_error e;
    tc_spec *t = spec_for(TC_GENERIC, NULL, &e);
    out = tc_template_messages(m, t, true);
    assert_int_equal(cJSON_GetArraySize(out), 4);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(out, 0), "role")->valuestring, "system");
    cJSON_Delete(out);
    tc_spec_free(t);
    cJSON_Delete(m);
}

/* A vocabulary of the 256 bytes plus an end-of-generation token (256). */
static char byte_piece[256][1];
static const char *byte_pieces[257];
static uint32_t byte_len[257];
static uint8_t byte_attr[257];

static sift_vocab_view byte_vocab(void)
{
    for (int i = 0; i < 256; i++) {
        byte_piece[i][0] = (char)i;
        byte_pieces[i] = byte_piece[i];
        byte_len[i] = 1;
        byte_attr[i] = SIFT_TOKEN_ATTR_NORMAL;
    }
    byte_pieces[256] = "";
    byte_len[256] = 0;
    byte_attr[256] = SIFT_TOKEN_ATTR_CONTROL | SIFT_TOKEN_ATTR_EOG;
    return (sift_vocab_view){.n_tokens = 257, .piece = byte_pieces, .piece_len = byte_len, .attr = byte_attr};
}

/* The grammar sampler as srv_build_samplers makes it for spec t. */
static sift_sampler *spec_sampler(const tc_spec *t, const sift_vocab_view *v)
{
    sift_grammar_params gp = sift_grammar_default_params();
    gp.root = TC_ROOT;
    gp.lazy = t->lazy;
    gp.trigger_words = (const char *const *)t->triggers;
    gp.n_trigger_words = t->lazy ? (size_t)t->n_triggers : 0;
    const char *pat[1] = {t->pattern};
    gp.trigger_patterns = pat;
    gp.n_trigger_patterns = t->lazy && t->pattern ? 1 : 0;
    if (t->lazy && t->think_pattern) { /* as srv_build_samplers */
        pat[0] = t->think_pattern;
        gp.n_trigger_words = 0;
        gp.n_trigger_patterns = 1;
    }
    sift_error err = {0};
    sift_sampler *g = sift_sampler_init_grammar_ex(v, t->gbnf, strlen(t->gbnf), &gp, &err);
    if (!g) fail_msg("%s", err.msg);
    return g;
}

static void feed(sift_sampler *g, const char *text)
{
    for (const char *p = text; *p; p++) {
        if (!sift_grammar_sampler_allows(g, (unsigned char)*p)) fail_msg("refused '%c' in %s", *p, text);
        sift_sampler_accept(g, (unsigned char)*p);
    }
}

/* The lazy grammar: free text until the opening, then only a well-formed call, then the end;
 * tool_choice required binds from the first byte. */
static void test_lazy_grammar(void **state)
{
    (void)state;
    const sift_vocab_view v = byte_vocab();
    srv_error e;
    tc_spec *t = spec_for(TC_HERMES, NULL, &e);
    sift_sampler *g = spec_sampler(t, &v);
    assert_int_equal(sift_grammar_sampler_status(g), SIFT_GRAMMAR_AWAITING_TRIGGER);
    feed(g, "Any text { at all <tool");
    assert_true(sift_grammar_sampler_allows(g, 'x')); /* not triggered yet */
    feed(g, "_call>");
    assert_int_not_equal(sift_grammar_sampler_status(g), SIFT_GRAMMAR_AWAITING_TRIGGER);
    assert_false(sift_grammar_sampler_allows(g, 'x'));
    feed(g, "\n{\"name\": \"get_");
    assert_false(sift_grammar_sampler_allows(g, 'r')); /* get_rain is no tool */
    feed(g, "weather\", \"arguments\": {\"city\": \"");
    assert_false(sift_grammar_sampler_allows(g, 'R')); /* Rome is not in the enum */
    feed(g, "Tokyo\", \"days\": 7}}\n</tool_call>");
    assert_int_equal(sift_grammar_sampler_status(g), SIFT_GRAMMAR_DONE);
    assert_true(sift_grammar_sampler_allows(g, 256));
    sift_sampler_free(g);
    tc_spec_free(t);

    t = spec_for(TC_HERMES, "\"tool_choice\": \"required\"", &e);
    g = spec_sampler(t, &v);
    assert_false(sift_grammar_sampler_allows(g, 'A'));
    assert_true(sift_grammar_sampler_allows(g, '<'));
    sift_sampler_free(g);
    tc_spec_free(t);

    /* Llama 3.x: the pattern, with the whitespace after the brace */
    t = spec_for(TC_LLAMA3, NULL, &e);
    g = spec_sampler(t, &v);
    feed(g, "Sure { x } { \"name\"");
    assert_int_not_equal(sift_grammar_sampler_status(g), SIFT_GRAMMAR_AWAITING_TRIGGER);
    feed(g, ": \"get_time\", \"parameters\": {\"zone\": \"UTC\"}}");
    assert_int_not_equal(sift_grammar_sampler_status(g), SIFT_GRAMMAR_ACTIVE);
    sift_sampler_free(g);
    tc_spec_free(t);

    /* gpt-oss: the recipient in the role's header after a message, at the reply's start, or in the channel's */
    static const char *const hm_replies[][2] = {
        {"<|channel|>analysis<|message|>Weather? to=functions.x<|end|><|start|>assistant", " to=functions.get_time<|channel|>commentary"},
        {"", " to=functions.get_time<|channel|>commentary"},
        {"<|channel|>analysis<|message|>hm<|end|><|start|>assistant", "<|channel|>commentary to=functions.get_time"}};
    for (int k = 0; k < 3; k++) {
        t = spec_for(TC_GPT_OSS, NULL, &e);
        g = spec_sampler(t, &v);
        feed(g, hm_replies[k][0]);
        assert_int_equal(sift_grammar_sampler_status(g), SIFT_GRAMMAR_AWAITING_TRIGGER);
        feed(g, hm_replies[k][1]);
        assert_int_not_equal(sift_grammar_sampler_status(g), SIFT_GRAMMAR_AWAITING_TRIGGER);
        assert_false(sift_grammar_sampler_allows(g, 'x'));
        feed(g, " <|constrain|>json<|message|>{\"zone\": \"UTC\"}");
        assert_true(sift_grammar_sampler_allows(g, 256)); /* the end (<|call|>), after at most the JSON's bounded space */
        assert_false(sift_grammar_sampler_allows(g, 'x'));
        sift_sampler_free(g);
        tc_spec_free(t);
    }

    /* LLM-jp: the same in its dialect (spaces after the special tokens: llama.cpp's LLM-jp
     * triggers); with parallel calls another after <|end|> and the role's opening */
    static const char *const jp_replies[][2] = {
        {"<|channel|> analysis<|message|> Weather? to=functions.x<|end|><|start|> assistant", " to=functions.get_time<|channel|> commentary"},
        {"", " to=functions.get_time<|channel|> commentary"},
        {"<|channel|> analysis<|message|> hm<|end|><|start|> assistant", "<|channel|> commentary to=functions.get_time"}};
    for (int k = 0; k < 3; k++) {
        t = spec_for(TC_LLM_JP, "\"parallel_tool_calls\": true", &e);
        g = spec_sampler(t, &v);
        feed(g, jp_replies[k][0]);
        assert_int_equal(sift_grammar_sampler_status(g), SIFT_GRAMMAR_AWAITING_TRIGGER);
        feed(g, jp_replies[k][1]);
        assert_int_not_equal(sift_grammar_sampler_status(g), SIFT_GRAMMAR_AWAITING_TRIGGER);
        assert_false(sift_grammar_sampler_allows(g, 'x'));
        feed(g, " <|constrain|>  json<|message|> {\"zone\": \"UTC\"}");
        assert_true(sift_grammar_sampler_allows(g, 256));
        feed(g, "<|end|><|start|> assistant to=functions.get_time<|channel|> commentary<|message|> {\"zone\": \"UTC\"}");
        assert_true(sift_grammar_sampler_allows(g, 256));
        sift_sampler_free(g);
        tc_spec_free(t);
    }

    /* Mistral */
    t = spec_for(TC_MISTRAL, NULL, &e);
    g = spec_sampler(t, &v);
    feed(g, "Hm. [TOOL_CALLS]");
    assert_false(sift_grammar_sampler_allows(g, 'x'));
    feed(g, "[{\"name\": \"get_time\", \"arguments\": {}}]");
    assert_int_equal(sift_grammar_sampler_status(g), SIFT_GRAMMAR_DONE);
    sift_sampler_free(g);
    tc_spec_free(t);
}

/* Reasoning and tool_choice auto (issue 27): the lazy grammar's triggers fire only after the
 * thinking (tc_think_trigger): a <tool_call> written while thinking is no call. */
static void test_think_trigger(void **state)
{
    (void)state;
    const sift_vocab_view v = byte_vocab();
    srv_error e;
    for (int forced = 0; forced < 2; forced++) {
        tc_spec *t = spec_for(TC_HERMES, NULL, &e);
        assert_int_equal(tc_think_trigger(t, forced), 0);
        sift_sampler *g = spec_sampler(t, &v);
        feed(g, forced ? "let me call <tool_call> maybe" : "<think>let me call <tool_call> maybe");
        assert_int_equal(sift_grammar_sampler_status(g), SIFT_GRAMMAR_AWAITING_TRIGGER);
        feed(g, "</think>\nSure. <tool_call>");
        assert_int_not_equal(sift_grammar_sampler_status(g), SIFT_GRAMMAR_AWAITING_TRIGGER);
        assert_false(sift_grammar_sampler_allows(g, 'x'));
        feed(g, "{\"name\": \"get_time\", \"arguments\": {}}</tool_call>");
        assert_int_equal(sift_grammar_sampler_status(g), SIFT_GRAMMAR_DONE);
        sift_sampler_free(g);
        tc_spec_free(t);
    }
    /* a reply that does not think: the call anywhere, as without reasoning */
    tc_spec *t = spec_for(TC_MISTRAL, NULL, &e);
    assert_int_equal(tc_think_trigger(t, false), 0);
    sift_sampler *g = spec_sampler(t, &v);
    feed(g, "Hm. [TOOL_CALLS]");
    assert_false(sift_grammar_sampler_allows(g, 'x'));
    sift_sampler_free(g);
    tc_spec_free(t);
    /* Llama 3.x: its `{"name"` pattern after the thinking */
    t = spec_for(TC_LLAMA3, NULL, &e);
    assert_int_equal(tc_think_trigger(t, true), 0);
    g = spec_sampler(t, &v);
    feed(g, "{\"name\" is a key</think> { \"name\"");
    assert_int_not_equal(sift_grammar_sampler_status(g), SIFT_GRAMMAR_AWAITING_TRIGGER);
    feed(g, ": \"get_time\", \"parameters\": {}}");
    sift_sampler_free(g);
    tc_spec_free(t);
}

/* Random replies made of the formats' pieces and stray bytes: every parser, every prefix,
 * never a crash; calls that come out always carry an object of arguments. */
/* issue 26: raw control bytes the model wrote (cJSON takes them inside strings, and any byte
 * up to ' ' as whitespace) never reach a client's arguments: escaped inside strings, dropped
 * outside, the same whole and streamed. */
static void test_control_bytes(void **state)
{
    (void)state;
    srv_error e;
    tc_spec *t = spec_for(TC_HERMES, NULL, &e);
    assert_non_null(t);
    const char *reply = "<tool_call>{\"name\": \"get_time\", \"arguments\": {\x01\"zone\":\x1f \"U\x02T\tC\\n\x7f\"}}</tool_call>";
    check_parse(t, reply, 1, "get_time", "{\"zone\":\"U\\u0002T\\u0009C\\n\x7f\"}", NULL);
    tc_result r;
    assert_true(tc_parse_output(t, reply, strlen(reply), &r));
    for (const char *q = r.calls[0].arguments; *q; q++) assert_true((unsigned char)*q >= 0x20);
    cJSON *a = cJSON_Parse(r.calls[0].arguments);
    assert_string_equal(cJSON_GetObjectItem(a, "zone")->valuestring, "U\x02T\tC\n\x7f");
    cJSON_Delete(a);
    tc_result_free(&r);
    tc_spec_free(t);
    t = spec_for(TC_HERMES, NULL, &e);
    check_stream(t, reply, 1, 0);
    tc_spec_free(t);
}

/* A spec for format f from a request body given whole. */
static tc_spec *spec_body(tc_format f, const char *body)
{
    cJSON *root = cJSON_Parse(body);
    assert_non_null(root);
    tc_spec *t = NULL;
    srv_error e = {0};
    if (tc_parse_request(f, root, &t, &e)) fail_msg("%d %s", e.status, e.msg);
    cJSON_Delete(root);
    assert_non_null(t);
    return t;
}

/* Each tool's schema stands alone (issue 27): two tools that both define "$defs/x" each get
 * their own; "#" and "#/properties/..." inside a tool's parameters mean that tool's parameters. */
static void test_schema_namespaces(void **state)
{
    (void)state;
    tc_spec *t = spec_body(TC_HERMES,
        "{\"tool_choice\": \"required\", \"tools\": ["
        "{\"type\": \"function\", \"function\": {\"name\": \"a\", \"parameters\": {\"type\": \"object\","
        " \"properties\": {\"v\": {\"$ref\": \"#/$defs/x\"}}, \"required\": [\"v\"], \"$defs\": {\"x\": {\"type\": \"integer\"}}}}},"
        "{\"type\": \"function\", \"function\": {\"name\": \"b\", \"parameters\": {\"type\": \"object\","
        " \"properties\": {\"v\": {\"$ref\": \"#/$defs/x\"}}, \"required\": [\"v\"], \"$defs\": {\"x\": {\"type\": \"string\", \"enum\": [\"hi\"]}}}}}]}");
    static const char *const bad[] = {
        "<tool_call>{\"name\": \"a\", \"arguments\": {\"v\": \"hi\"}}</tool_call>",
        "<tool_call>{\"name\": \"b\", \"arguments\": {\"v\": 1}}</tool_call>",
    };
    check_grammar(t, "<tool_call>{\"name\": \"a\", \"arguments\": {\"v\": 12}}</tool_call>", bad, 2);
    check_grammar(t, "<tool_call>{\"name\": \"b\", \"arguments\": {\"v\": \"hi\"}}</tool_call>", NULL, 0);
    tc_spec_free(t);

    /* "#": a recursive tree of the tool's own arguments, not the call object around them */
    t = spec_body(TC_HERMES,
        "{\"tool_choice\": \"required\", \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"tree\", \"parameters\": "
        "{\"type\": \"object\", \"properties\": {\"label\": {\"type\": \"string\"}, \"kids\": {\"type\": \"array\", \"items\": {\"$ref\": \"#\"}}},"
        " \"required\": [\"label\"], \"additionalProperties\": false}}}]}");
    static const char *const bad_tree[] = {
        "<tool_call>{\"name\": \"tree\", \"arguments\": {\"label\": \"r\", \"kids\": [{\"name\": \"tree\", \"arguments\": {\"label\": \"k\"}}]}}</tool_call>",
    };
    check_grammar(t, "<tool_call>{\"name\": \"tree\", \"arguments\": {\"label\": \"r\", \"kids\": [{\"label\": \"k\", \"kids\": []}]}}</tool_call>",
                  bad_tree, 1);
    tc_spec_free(t);

    /* "#/properties/...": a pointer into the tool's own parameters; a "$ref" inside const is data */
    t = spec_body(TC_HERMES,
        "{\"tool_choice\": \"required\", \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"move\", \"parameters\": "
        "{\"type\": \"object\", \"properties\": {\"from\": {\"type\": \"integer\", \"minimum\": 0, \"maximum\": 9}, \"to\": "
        "{\"$ref\": \"#/properties/from\"}, \"tag\": {\"const\": {\"$ref\": \"#\"}}}, \"required\": [\"from\", \"to\"], \"additionalProperties\": false}}}]}");
    static const char *const bad_move[] = {"<tool_call>{\"name\": \"move\", \"arguments\": {\"from\": 1, \"to\": 12}}</tool_call>"};
    check_grammar(t, "<tool_call>{\"name\": \"move\", \"arguments\": {\"from\": 1, \"to\": 2}}</tool_call>", bad_move, 1);
    check_grammar(t, "<tool_call>{\"name\": \"move\", \"arguments\": {\"from\": 1, \"to\": 2, \"tag\": {\"$ref\":\"#\"}}}</tool_call>", NULL, 0);
    tc_spec_free(t);
}

/* Calls that close (issue 27): the whitespace between tokens of a call is bounded (one space,
 * or a newline and at most 4 blanks), the closing markup follows the call directly and the
 * grammar ends there; under tool_choice required, tc_budget holds free strings to a quarter
 * of the token budget (a call then fits, whatever the model writes). */
static void test_calls_close(void **state)
{
    (void)state;
    srv_error e;
    tc_spec *t = spec_for(TC_HERMES, "\"tool_choice\": \"required\"", &e);
    assert_non_null(t);
    static const char *const bad[] = {
        "<tool_call>\n\n{\"name\": \"get_time\", \"arguments\": {}}</tool_call>",               /* two newlines */
        "<tool_call>{\"name\":      \"get_time\", \"arguments\": {}}</tool_call>",             /* a run of blanks */
        "<tool_call>{\"name\": \"get_time\", \"arguments\": {}}\n     </tool_call>",            /* 5 blanks of indent */
        "<tool_call>{\"name\": \"get_time\", \"arguments\": {}}</tool_call> ",                  /* nothing after the call */
        "<tool_call>{\"name\": \"get_time\", \"arguments\": {}}</tool_call><tool_call>",
    };
    check_grammar(t, "<tool_call>\n{\"name\": \"get_time\",\n    \"arguments\": {\"zone\": \"UTC\"}}\n</tool_call>", bad, sizeof bad / sizeof *bad);
    /* no budget (or a large one): strings as long as the model likes */
    char longcall[600];
    snprintf(longcall, sizeof longcall, "<tool_call>{\"name\": \"get_time\", \"arguments\": {\"zone\": \"%0300d\"}}</tool_call>", 7);
    check_grammar(t, longcall, NULL, 0);
    tc_budget(t, TC_BUDGET_FREE);
    check_grammar(t, longcall, NULL, 0);
    /* max_tokens 120: at most 30 characters a string */
    tc_budget(t, 120);
    static const char *const too_long[] = {"<tool_call>{\"name\": \"get_time\", \"arguments\": {\"zone\": \"0123456789012345678901234567890\"}}</tool_call>"};
    check_grammar(t, "<tool_call>{\"name\": \"get_time\", \"arguments\": {\"zone\": \"012345678901234567890123456789\"}}</tool_call>", too_long, 1);
    /* a tiny budget still leaves 8 */
    tc_budget(t, 10);
    check_grammar(t, "<tool_call>{\"name\": \"get_time\", \"arguments\": {\"zone\": \"01234567\"}}</tool_call>", NULL, 0);
    tc_spec_free(t);
    /* tool_choice auto (lazy: the call may start anywhere): no bound */
    t = spec_for(TC_HERMES, NULL, &e);
    tc_budget(t, 120);
    check_grammar(t, longcall, NULL, 0);
    tc_spec_free(t);
    /* Mistral: the array closes right after the last call */
    t = spec_for(TC_MISTRAL, "\"tool_choice\": \"required\"", &e);
    static const char *const bad_m[] = {"[TOOL_CALLS][{\"name\": \"get_time\", \"arguments\": {}}]\n"};
    check_grammar(t, "[TOOL_CALLS] [{\"name\": \"get_time\", \"arguments\": {}} ]", bad_m, 1);
    tc_spec_free(t);
}

/* Reasoning (reasoning.c): the reply split into reasoning and content as llama.cpp's
 * try_parse_reasoning does; the streamed deltas, at every cut of the text into pieces, add up
 * to exactly the final fields; the grammar wrapper starts the grammar after the thinking. */
static void check_split(rs_format f, bool forced, const char *text, const char *reasoning, const char *content)
{
    rs_spec r = {.format = f, .forced_open = forced};
    rs_split sp;
    const size_t n = strlen(text);
    rs_split_text(&r, text, n, false, &sp);
    if (sp.r1 - sp.r0 != strlen(reasoning) || memcmp(text + sp.r0, reasoning, sp.r1 - sp.r0))
        fail_msg("[%s]: reasoning [%.*s]", text, (int)(sp.r1 - sp.r0), text + sp.r0);
    if (sp.c1 - sp.c0 != strlen(content) || memcmp(text + sp.c0, content, sp.c1 - sp.c0))
        fail_msg("[%s]: content [%.*s]", text, (int)(sp.c1 - sp.c0), text + sp.c0);
    /* streamed in pieces of every size: the deltas add up to the same */
    for (size_t step = 1; step <= n; step++) {
        rs_spec st = {.format = f, .forced_open = forced};
        sbuf rr = {0}, cc = {0};
        for (size_t i = 0; i < n; i += step) rs_stream(&st, text + i, i + step <= n ? step : n - i, &rr, &cc);
        rs_stream_final(&st, text, n, &rr, &cc);
        if (rr.n != strlen(reasoning) || (rr.n && memcmp(rr.p, reasoning, rr.n))) fail_msg("[%s] step %zu: streamed reasoning [%.*s]", text, step, (int)rr.n, rr.p);
        if (cc.n != strlen(content) || (cc.n && memcmp(cc.p, content, cc.n))) fail_msg("[%s] step %zu: streamed content [%.*s]", text, step, (int)cc.n, cc.p);
        sbuf_free(&rr);
        sbuf_free(&cc);
        sbuf_free(&st.seen);
    }
}

static void test_reasoning(void **state)
{
    (void)state;
    rs_format f;
    assert_int_equal(rs_format_parse("deepseek", &f), 0);
    assert_int_equal(f, RS_DEEPSEEK);
    assert_int_equal(rs_format_parse("deepseek-legacy", &f), 0);
    assert_int_equal(f, RS_DEEPSEEK_LEGACY);
    assert_int_equal(rs_format_parse("none", &f), 0);
    assert_int_equal(f, RS_NONE);
    assert_int_equal(rs_format_parse("auto", &f), 0);
    assert_int_equal(f, RS_AUTO);
    assert_int_equal(rs_format_parse("r1", &f), -1);
    /* the outputs of llama.cpp's tests/test-chat.cpp (DeepSeek R1 and Hermes with thinking) */
    check_split(RS_DEEPSEEK, false, "<think>I'm\nthinking</think>Hello, world!\nWhat's up?", "I'm\nthinking", "Hello, world!\nWhat's up?");
    check_split(RS_DEEPSEEK, true, "I'm\nthinking</think>Hello, world!\nWhat's up?", "I'm\nthinking", "Hello, world!\nWhat's up?");
    check_split(RS_DEEPSEEK, false, "  <think>\n  Let me see.\n</think>\n\n  The answer is 4.", "Let me see.", "The answer is 4.");
    check_split(RS_AUTO, false, "<think>a < b </thi ok</think>x", "a < b </thi ok", "x");
    /* none: all content, tags and all */
    check_split(RS_NONE, false, "<think>I'm\nthinking</think>Hello", "", "<think>I'm\nthinking</think>Hello");
    /* legacy: reasoning_content, and the whole text stays content */
    check_split(RS_DEEPSEEK_LEGACY, false, "<think>I'm thinking</think>Hello", "I'm thinking", "<think>I'm thinking</think>Hello");
    /* no thinking: all content; thinking later in the reply is content */
    check_split(RS_DEEPSEEK, false, "Hello <think>x</think>", "", "Hello <think>x</think>");
    check_split(RS_DEEPSEEK, false, "<thin", "", "<thin");
    check_split(RS_DEEPSEEK, false, "", "", "");
    /* thinking that never closes (cut off, or never ended): all reasoning, no content (llama.cpp) */
    check_split(RS_DEEPSEEK, false, "<think>I'm thinking and thinking", "I'm thinking and thinking", "");
    check_split(RS_DEEPSEEK, true, "I'm thinking </thi", "I'm thinking </thi", "");
    check_split(RS_DEEPSEEK, true, "</think>", "", "");
    check_split(RS_DEEPSEEK, true, "</think>\n\n{\"a\": 1}", "", "{\"a\": 1}");
    assert_true(rs_prompt_forced_open("<|Assistant|><think>\n", 21));
    assert_false(rs_prompt_forced_open("<think>\n\n</think>\n\n", 19));
    assert_false(rs_prompt_forced_open("", 0));

    /* the grammar after the thinking: free text without "</think>", the tag, then the start rule */
    const char *root = NULL;
    char *g = rs_wrap_grammar("root ::= \"{\" [0-9]+ \"}\"\n", "root", true, &root);
    assert_non_null(g);
    assert_string_equal(root, RS_ROOT);
    sift_error err = {0};
    sift_grammar *gr = sift_grammar_parse(g, strlen(g), root, NULL, &err);
    if (!gr) fail_msg("%s\n%s", err.msg, g);
    static const char *const good[] = {"</think>{1}", "hmm</think>\n{12}", "a < b, </thi</think>{3}", "<<</think>{4}",
                                       "x</think</think>{5}", "</ think></think>{6}"};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++)
        if (sift_grammar_match(gr, good[i], strlen(good[i]), NULL) != SIFT_GRAMMAR_COMPLETE) fail_msg("refused %s", good[i]);
    /* (forced open: "{1}" alone is still thinking) */
    assert_int_equal(sift_grammar_match(gr, "{1}", 3, NULL), SIFT_GRAMMAR_PREFIX);
    static const char *const bad[] = {"a</think>b</think>{1}", "a</think>{x}", "</think>     {1}"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        if (sift_grammar_match(gr, bad[i], strlen(bad[i]), NULL) != SIFT_GRAMMAR_REJECTED) fail_msg("taken %s", bad[i]);
    assert_int_equal(sift_grammar_match(gr, "still thinking <", 16, NULL), SIFT_GRAMMAR_PREFIX);
    sift_grammar_free(gr);
    free(g);
    /* optional thinking (the model may think first, or answer at once) */
    g = rs_wrap_grammar("root ::= \"{\" [0-9]+ \"}\"\n", "root", false, &root);
    gr = sift_grammar_parse(g, strlen(g), root, NULL, &err);
    assert_non_null(gr);
    assert_int_equal(sift_grammar_match(gr, "{1}", 3, NULL), SIFT_GRAMMAR_COMPLETE);
    assert_int_equal(sift_grammar_match(gr, "<think>ok</think>{1}", 20, NULL), SIFT_GRAMMAR_COMPLETE);
    assert_int_equal(sift_grammar_match(gr, "ok</think>{1}", 13, NULL), SIFT_GRAMMAR_REJECTED);
    sift_grammar_free(gr);
    free(g);
}

/* The model outputs of llama.cpp's tests/test-chat.cpp (ggml-org/llama.cpp, the DeepSeek R1,
 * Hermes 2 Pro, Llama 3.1 and Mistral Nemo cases, with its special_function tool): they parse
 * to the tool calls, content and reasoning llama.cpp expects there. */
#define PYTHON_FUNCTION "{\"type\": \"function\", \"function\": {\"name\": \"python\", \"description\": \"an ipython interpreter\"," \
    " \"parameters\": {\"type\": \"object\", \"properties\": {\"code\": {\"type\": \"string\", \"description\": \"Python code to execute.\"}}, \"required\": [\"code\"]}}}"
#define SPECIAL_FUNCTION "{\"type\": \"function\", \"function\": {\"name\": \"special_function\", \"description\": \"I'm special\"," \
    " \"parameters\": {\"type\": \"object\", \"properties\": {\"arg1\": {\"type\": \"integer\", \"description\": \"The arg.\"}}, \"required\": [\"arg1\"]}}}"
static const char r1_call[] = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>special_function\n"
                              "```json\n{\"arg1\": 1}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>";

/* reasoning split (format f, forced open or not), then the tool-call parse of the rest */
static void check_reply(tc_spec *t, rs_format f, bool forced, const char *text, const char *reasoning, const char *content, const char *args)
{
    rs_spec r = {.format = f, .forced_open = forced};
    rs_set_tags(&r, t->format);
    rs_split sp;
    rs_split_text(&r, text, strlen(text), false, &sp);
    if (sp.r1 - sp.r0 != strlen(reasoning) || memcmp(text + sp.r0, reasoning, sp.r1 - sp.r0))
        fail_msg("[%s]: reasoning [%.*s]", text, (int)(sp.r1 - sp.r0), text + sp.r0);
    char *rest = strndup(text + sp.c0, sp.c1 - sp.c0); /* the reply without its thinking, as response.c hands it on */
    check_parse(t, rest, args ? 1 : 0, args ? "special_function" : NULL, args, content);
    free(rest);
}

/* A template from llama.cpp's server tests (../shared/llama-server-tests/models/templates) */
static char *read_server_template(const char *name)
{
    const char *shared = getenv("SIFT_SHARED");
    char path[1024];
    snprintf(path, sizeof path, "%s/llama-server-tests/models/templates/%s", shared ? shared : "../shared", name);
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot open %s", path);
    char *buf = calloc(1, 1 << 20);
    buf[fread(buf, 1, (1 << 20) - 1, f)] = 0;
    fclose(f);
    return buf;
}

/* Forget a spec's streaming state: the next stream starts afresh. */
static void stream_reset(tc_spec *t)
{
    sbuf_free(&t->seen);
    t->sent = 0;
    free(t->streamed);
    t->streamed = NULL;
    t->n_streamed = 0;
}

/* Stream `text` a byte at a time (after the reasoning split of format f): the content and
 * the reasoning that come out, and the number of call heads. */
static void stream_reply(tc_spec *t, rs_format f, const char *text, const char *reasoning, const char *content, int n_heads)
{
    rs_spec r = {.format = f};
    rs_set_tags(&r, t->format);
    stream_reset(t);
    sbuf rr = {0}, cc = {0}, rc = {0};
    int heads = 0;
    const size_t n = strlen(text);
    for (size_t i = 0; i < n; i++) {
        sbuf_free(&rc);
        rs_stream(&r, text + i, 1, &rr, &rc);
        cJSON *d = rc.n ? tc_stream_text(t, rc.p, rc.n, &cc) : NULL;
        for (cJSON *x = d ? d->child : NULL; x; x = x->next) {
            cJSON *id = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(x, "tool_calls"), 0), "id");
            if (id && t->format == TC_COMMAND_R7B) assert_string_equal(id->valuestring, "0"); /* the model's own */
            heads += id != NULL;
        }
        cJSON_Delete(d);
    }
    sbuf_add(&rr, "", 1);
    sbuf_add(&cc, "", 1);
    assert_string_equal(rr.p, reasoning);
    assert_string_equal(cc.p, content);
    assert_int_equal(heads, n_heads);
    sbuf_free(&rr);
    sbuf_free(&cc);
    sbuf_free(&rc);
    sbuf_free(&r.seen);
    stream_reset(t);
}

/* Command R7B and Functionary v3.2: the model outputs of llama.cpp's tests/test-chat.cpp
 * (test_template_output_parsers, the version with COMMON_CHAT_FORMAT_COMMAND_R7B and
 * COMMON_CHAT_FORMAT_FUNCTIONARY_V3_2; the v3.2 ">>>" spellings from its later peg_tester). */
static void test_llama_cpp_outputs_2(void **state)
{
    (void)state;
    char *tm = read_template("CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja");
    assert_int_equal(tc_detect(tm), TC_COMMAND_R7B);
    free(tm);
    tc_spec *t = spec_body(TC_COMMAND_R7B, "{\"tools\": [" SPECIAL_FUNCTION "]}");
    assert_true(t->lazy);
    static const char r7b_call[] = "<|START_ACTION|>[\n"
                                   "    {\"tool_call_id\": \"0\", \"tool_name\": \"special_function\", \"parameters\": {\"arg1\": 1}}\n"
                                   "]<|END_ACTION|>";
    static const char resp[] = "<|START_RESPONSE|>Hello, world!\nWhat's up?<|END_RESPONSE|>";
    static const char think_resp[] = "<|START_THINKING|>I'm thinking<|END_THINKING|><|START_RESPONSE|>Hello, world!\nWhat's up?<|END_RESPONSE|>";
    check_reply(t, RS_NONE, false, "Hello, world!\nWhat's up?", "", "Hello, world!\nWhat's up?", NULL);
    check_reply(t, RS_NONE, false, resp, "", "Hello, world!\nWhat's up?", NULL);
    check_reply(t, RS_DEEPSEEK, false, think_resp, "I'm thinking", "Hello, world!\nWhat's up?", NULL);
    /* message_assist_thoughts_unparsed_r7b */
    check_reply(t, RS_NONE, false, think_resp, "", "<|START_THINKING|>I'm thinking<|END_THINKING|>Hello, world!\nWhat's up?", NULL);
    /* message_assist_thoughts_call_idx: the model's id "0" kept */
    char buf[1024];
    snprintf(buf, sizeof buf, "<|START_THINKING|>I'm\nthinking<|END_THINKING|>%s", r7b_call);
    {
        rs_spec r = {.format = RS_DEEPSEEK};
        rs_set_tags(&r, TC_COMMAND_R7B);
        rs_split sp;
        rs_split_text(&r, buf, strlen(buf), false, &sp);
        assert_int_equal(sp.r1 - sp.r0, strlen("I'm\nthinking"));
        tc_result res;
        assert_true(tc_parse_output(t, buf + sp.c0, strlen(buf + sp.c0), &res));
        assert_int_equal(res.n_calls, 1);
        assert_null(res.content);
        assert_string_equal(res.calls[0].name, "special_function");
        assert_string_equal(res.calls[0].arguments, "{\"arg1\":1}");
        assert_string_equal(res.calls[0].id, "0");
        tc_result_free(&res);
    }
    /* message_assist_thoughts_no_content: cut off inside the call (is_partial), streamed */
    stream_reply(t, RS_DEEPSEEK, "<|START_THINKING|>I'm\nthinking<|END_THINKING|><|START_ACTION|>[\n    {\"tool_call_id\": \"0\", \"tool_name\": \"special",
                 "I'm\nthinking", "", 0);
    stream_reply(t, RS_DEEPSEEK, think_resp, "I'm thinking", "Hello, world!\nWhat's up?", 0);
    stream_reply(t, RS_NONE, resp, "", "Hello, world!\nWhat's up?", 0);
    stream_reply(t, RS_DEEPSEEK, buf, "I'm\nthinking", "", 1);
    tc_spec_free(t);
    /* test_templates: the delta after empty thoughts, from the trigger on, in the grammar (auto and required) */
    for (int req = 0; req < 2; req++) {
        t = spec_body(TC_COMMAND_R7B, req ? "{\"tool_choice\": \"required\", \"tools\": [" SPECIAL_FUNCTION "]}"
                                          : "{\"tools\": [" SPECIAL_FUNCTION "]}");
        static const char *const bad[] = {"<|START_ACTION|>[{\"tool_call_id\": \"x\", \"tool_name\": \"special_function\", \"parameters\": {\"arg1\": 1}}]<|END_ACTION|>",
                                          "<|START_ACTION|>[{\"tool_call_id\": \"0\", \"tool_name\": \"other\", \"parameters\": {\"arg1\": 1}}]<|END_ACTION|>",
                                          "<|START_ACTION|>[{\"tool_call_id\": \"0\", \"tool_name\": \"special_function\", \"parameters\": {\"arg1\": \"1\"}}]<|END_ACTION|>"};
        check_grammar(t, r7b_call, bad, 3);
        check_prefixes(t, r7b_call);
        check_stream(t, r7b_call, 1, 0);
        tc_spec_free(t);
    }

    /* Functionary v3.2 (the prompt ends with ">>>": the reply starts with its recipient) */
    tm = read_server_template("meetkai-functionary-medium-v3.2.jinja");
    assert_int_equal(tc_detect(tm), TC_FUNCTIONARY_V32);
    free(tm);
    t = spec_body(TC_FUNCTIONARY_V32, "{\"tools\": [" SPECIAL_FUNCTION ", " PYTHON_FUNCTION "]}");
    assert_true(t->lazy);
    assert_non_null(t->pattern);
    check_parse(t, "all\nHello, world!\nnono\nWhat's up?\n>>>special_function\n{\"arg1\": 1}\n", 1, "special_function", "{\"arg1\":1}",
                "Hello, world!\nnono\nWhat's up?");
    check_parse(t, "all\nHello, world!\nnono\nWhat's up?>>>special_function\n{\"arg1\": 1}\n", 1, "special_function", "{\"arg1\":1}",
                "Hello, world!\nnono\nWhat's up?");
    check_parse(t, "python\n# This is a program:\nprint('hey')", 1, "python", "{\"code\":\"# This is a program:\\nprint('hey')\"}", NULL);
    check_parse(t, "special_function\n{\"arg1\": 1} \n                    ", 1, "special_function", "{\"arg1\":1}", NULL);
    check_parse(t, "all\nHello, world!\nWhat's up?", 0, NULL, NULL, "Hello, world!\nWhat's up?");
    check_parse(t, ">>>all\nHello, world!\nWhat's up?", 0, NULL, NULL, "Hello, world!\nWhat's up?");
    check_parse(t, ">>>special_function\n{\"arg1\": 1}", 1, "special_function", "{\"arg1\":1}", NULL);
    stream_reply(t, RS_NONE, "all\nHello, world!\nnono\nWhat's up?\n>>>special_function\n{\"arg1\": 1}\n", "", "Hello, world!\nnono\nWhat's up?", 1);
    stream_reply(t, RS_NONE, "all\nHello, world!\nWhat's up?", "", "Hello, world!\nWhat's up?", 0);
    check_prefixes(t, "special_function\n{\"arg1\": 1}");
    check_stream(t, "special_function\n{\"arg1\": 12}", 1, 0);
    /* from the lazy trigger ">>>special_function\n" on */
    check_grammar(t, ">>>special_function\n{\"arg1\": 1}", NULL, 0);
    tc_spec_free(t);
    t = spec_body(TC_FUNCTIONARY_V32, "{\"tool_choice\": \"required\", \"parallel_tool_calls\": true, \"tools\": [" SPECIAL_FUNCTION "]}");
    static const char *const bad32[] = {"all\nHello", "special_function\n{\"arg1\": \"x\"}", "other\n{}"};
    check_grammar(t, "special_function\n{\"arg1\": 1}", bad32, 3);
    check_grammar(t, "special_function\n{\"arg1\": 1}\n>>>special_function\n{\"arg1\": 2}", NULL, 0);
    check_parse(t, "special_function\n{\"arg1\": 1}\n>>>special_function\n{\"arg1\": 2}", 2, "special_function", "{\"arg1\":1}", NULL);
    check_stream(t, "special_function\n{\"arg1\": 1}\n>>>special_function\n{\"arg1\": 2}", 2, 0);
    tc_spec_free(t);
}

static void test_llama_cpp_outputs(void **state)
{
    (void)state;
    char *tm = read_template("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja");
    assert_int_equal(tc_detect(tm), TC_DEEPSEEK_R1);
    free(tm);
    tm = read_template("vllm-tool_chat_template_deepseekv3.jinja");
    assert_int_equal(tc_detect(tm), TC_DEEPSEEK_R1);
    free(tm);
    tc_spec *t = spec_body(TC_DEEPSEEK_R1, "{\"tools\": [" SPECIAL_FUNCTION "]}");
    assert_true(t->lazy);
    /* message_assist_call */
    check_reply(t, RS_NONE, false, r1_call, "", NULL, "{\"arg1\":1}");
    check_reply(t, RS_NONE, false, "<｜tool▁calls｜>function<｜tool▁sep｜>special_function\n```json\n{\"arg1\": 1}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
                "", NULL, "{\"arg1\":1}");
    /* message_assist_call_thoughts_unparsed (reasoning none) and message_assist_call_thoughts (deepseek) */
    char buf[1024];
    snprintf(buf, sizeof buf, "<think>I'm\nthinking</think>\n\n%s", r1_call);
    check_reply(t, RS_NONE, false, buf, "", "<think>I'm\nthinking</think>\n\n", "{\"arg1\":1}");
    check_reply(t, RS_DEEPSEEK, false, buf, "I'm\nthinking", NULL, "{\"arg1\":1}");
    /* message_assist, message_assist_thoughts, _unopened_unparsed, and forced open */
    check_reply(t, RS_DEEPSEEK, false, "Hello, world!\nWhat's up?", "", "Hello, world!\nWhat's up?", NULL);
    check_reply(t, RS_DEEPSEEK, false, "<think>I'm\nthinking</think>Hello, world!\nWhat's up?", "I'm\nthinking", "Hello, world!\nWhat's up?", NULL);
    check_reply(t, RS_NONE, false, "<think>I'm\nthinking</think>Hello, world!\nWhat's up?", "", "<think>I'm\nthinking</think>Hello, world!\nWhat's up?", NULL);
    check_reply(t, RS_DEEPSEEK, false, "I'm\nthinking</think>Hello, world!\nWhat's up?", "", "I'm\nthinking</think>Hello, world!\nWhat's up?", NULL);
    check_reply(t, RS_DEEPSEEK, true, "I'm\nthinking</think>Hello, world!\nWhat's up?", "I'm\nthinking", "Hello, world!\nWhat's up?", NULL);
    check_reply(t, RS_DEEPSEEK, true, "<think>I'm\nthinking</think>Hello, world!\nWhat's up?", "<think>I'm\nthinking", "Hello, world!\nWhat's up?", NULL);
    /* forced open and cut off (is_partial): all reasoning */
    check_reply(t, RS_DEEPSEEK, true, "I need to remember the correct syntax. It starts with <｜tool▁calls▁begin｜> and ends with",
                "I need to remember the correct syntax. It starts with <｜tool▁calls▁begin｜> and ends with", NULL, NULL);
    /* the grammar takes llama.cpp's test_templates output; a call cut off is no call */
    check_grammar(t, r1_call, NULL, 0);
    check_parse(t, "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>special_function\n```json\n{\"arg1\": 1}",
                0, NULL, NULL, "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>special_function\n```json\n{\"arg1\": 1}");
    check_prefixes(t, r1_call);
    check_stream(t, r1_call, 1, 0);
    tc_spec_free(t);
    t = spec_body(TC_DEEPSEEK_R1, "{\"tool_choice\": \"required\", \"tools\": [" SPECIAL_FUNCTION "]}");
    static const char *const bad[] = {"<｜tool▁calls▁begin｜>function<｜tool▁sep｜>special_function\n```json\n{\"arg1\": \"x\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
                                      "<｜tool▁calls▁begin｜>function<｜tool▁sep｜>other\n```json\n{\"arg1\": 1}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
                                      "Hello"};
    check_grammar(t, r1_call, bad, 3);
    tc_spec_free(t);

    /* Functionary v3.1 (llama.cpp's copy of meetkai's template, in ../shared/llama-server-tests) */
    {
        const char *shared = getenv("SIFT_SHARED");
        char path[1024];
        snprintf(path, sizeof path, "%s/llama-server-tests/models/templates/meetkai-functionary-medium-v3.1.jinja", shared ? shared : "../shared");
        FILE *f = fopen(path, "rb");
        if (!f) fail_msg("cannot open %s", path);
        char *fb = calloc(1, 1 << 20);
        fb[fread(fb, 1, (1 << 20) - 1, f)] = 0;
        fclose(f);
        assert_int_equal(tc_detect(fb), TC_FUNCTIONARY_V31);
        free(fb);
    }
    t = spec_body(TC_FUNCTIONARY_V31, "{\"tools\": [" SPECIAL_FUNCTION "]}");
    check_reply(t, RS_NONE, false, "<function=special_function>{\"arg1\": 1}</function>", "", NULL, "{\"arg1\":1}");
    check_reply(t, RS_NONE, false, "Hello, world!\nWhat's up?", "", "Hello, world!\nWhat's up?", NULL);
    check_grammar(t, "<function=special_function>{\"arg1\": 1}</function>", NULL, 0);
    check_prefixes(t, "Sure. <function=special_function>{\"arg1\": 1}</function>");
    check_stream(t, "<function=special_function>{\"arg1\": 12}</function>", 1, 0);
    tc_spec_free(t);
    t = spec_body(TC_FUNCTIONARY_V31, "{\"tool_choice\": \"required\", \"tools\": [" SPECIAL_FUNCTION "]}");
    static const char *const bad31[] = {"<function=special_function>{\"arg1\": \"x\"}</function>", "<function=other>{}</function>"};
    check_grammar(t, "<function=special_function>{\"arg1\": 1}</function>", bad31, 2);
    tc_spec_free(t);

    /* Hermes 2 Pro, Llama 3.1, Mistral Nemo: message_assist_call as those tests write it */
    t = spec_body(TC_HERMES, "{\"tools\": [" SPECIAL_FUNCTION "]}");
    check_reply(t, RS_NONE, false, "<tool_call>\n{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}\n</tool_call>", "", NULL, "{\"arg1\":1}");
    check_reply(t, RS_DEEPSEEK, false, "<think>I'm\nthinking</think><tool_call>\n{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}\n</tool_call>",
                "I'm\nthinking", NULL, "{\"arg1\":1}");
    tc_spec_free(t);
    t = spec_body(TC_LLAMA3, "{\"tools\": [" SPECIAL_FUNCTION "]}");
    check_reply(t, RS_NONE, false, "{\"name\": \"special_function\", \"parameters\": {\"arg1\": 1}}", "", NULL, "{\"arg1\":1}");
    tc_spec_free(t);
    t = spec_body(TC_MISTRAL, "{\"tools\": [" SPECIAL_FUNCTION "]}");
    check_reply(t, RS_NONE, false, "[TOOL_CALLS][{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}, \"id\": \"123456789\"}]", "", NULL,
                "{\"arg1\":1}");
    tc_spec_free(t);
}

static void test_garbage(void **state)
{
    (void)state;
    static const char *const pieces[] = {"<tool_call>", "</tool_call>", "[TOOL_CALLS]", "<|python_tag|>", "{\"name\"", "{",
                                         "}", "[", "]", ",", ":", "\"", "\\", " ", "\n", "\"get_time\"", "\"arguments\"",
                                         "\"parameters\"", "\"tool_call\"", "\"tool_calls\"", "\"response\"", "{}", "1",
                                         "\xff", "\xc3", "null", "\"zone\"",
                                         "<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "function<｜tool▁sep｜>", "get_time\n```json\n",
                                         "```<｜tool▁call▁end｜>", "<｜tool▁calls▁end｜>", "\n", "<function=get_time>", "</function>",
                                         "<|START_ACTION|>", "<|END_ACTION|>", "<|START_RESPONSE|>", "<|END_RESPONSE|>", "\"tool_name\"",
                                         "\"tool_call_id\"", ">>>", "all\n", "get_time\n", ">>>get_weather\n",
                                         "<|tool_calls_section_begin|>", "<|tool_call_begin|>functions.get_time:0", "<|tool_call_argument_begin|>",
                                         "<|tool_call_end|>", "<|tool_calls_section_end|>", ":1", "get_time<｜tool▁sep｜>",
                                         "<tool_call>get_time\n", "<arg_key>zone</arg_key>", "<arg_value>UTC</arg_value>", "<arg_key>", "</arg_value>",
                                         "<function=get_time>", "<parameter=zone>", "</parameter>", "</function>", "<|tool_call|>"};
    const size_t np = sizeof pieces / sizeof *pieces;
    uint64_t x = 42;
    srv_error e;
    for (int f = TC_GENERIC; f <= TC_FORMAT_LAST; f++) {
        for (int par = 0; par < 2; par++) {
            tc_spec *t = spec_for((tc_format)f, par ? "\"parallel_tool_calls\": true" : NULL, &e);
            assert_non_null(t);
            for (int it = 0; it < 400; it++) {
                char buf[512];
                size_t n = 0;
                for (int k = 0; k < 24; k++) {
                    x = x * 6364136223846793005ull + 1442695040888963407ull;
                    const char *p = pieces[(x >> 33) % np];
                    const size_t l = strlen(p);
                    if (n + l >= sizeof buf) break;
                    memcpy(buf + n, p, l);
                    n += l;
                }
                for (size_t k = 0; k <= n; k += 3) {
                    tc_result r;
                    assert_true(tc_parse_output(t, buf, k, &r));
                    for (int i = 0; i < r.n_calls; i++) {
                        cJSON *a = cJSON_Parse(r.calls[i].arguments);
                        assert_true(cJSON_IsObject(a));
                        cJSON_Delete(a);
                    }
                    tc_result_free(&r);
                    assert_true(tc_content_safe(t, buf, k) <= k);
                }
            }
            tc_spec_free(t);
        }
    }
}

/* Reasoning split (format f), then the calls: n of them, named names[i] with args[i] (compact)
 * and the model's ids[i]; content as given (NULL: none). */
static void check_calls(tc_spec *t, rs_format f, const char *text, const char *reasoning, const char *content, int n,
                        const char *const *names, const char *const *args, const char *const *ids)
{
    rs_spec r = {.format = f};
    rs_set_tags(&r, t->format);
    rs_split sp;
    rs_split_text(&r, text, strlen(text), false, &sp);
    if (sp.r1 - sp.r0 != strlen(reasoning) || memcmp(text + sp.r0, reasoning, sp.r1 - sp.r0))
        fail_msg("[%s]: reasoning [%.*s]", text, (int)(sp.r1 - sp.r0), text + sp.r0);
    tc_result res;
    assert_true(tc_parse_output(t, text + sp.c0, sp.c1 - sp.c0, &res));
    if (res.n_calls != n) fail_msg("[%s]: %d calls", text, res.n_calls);
    for (int i = 0; i < n; i++) {
        assert_string_equal(res.calls[i].name, names[i]);
        assert_string_equal(res.calls[i].arguments, args[i]);
        assert_string_equal(res.calls[i].id, ids[i]);
    }
    if (content) assert_string_equal(res.content ? res.content : "", content);
    else assert_null(res.content);
    tc_result_free(&res);
}

#define OPT_FUNCTION "{\"type\": \"function\", \"function\": {\"name\": \"special_function_with_opt\", \"parameters\": {\"type\": \"object\"," \
    " \"properties\": {\"arg1\": {\"type\": \"integer\"}, \"arg2\": {\"type\": \"integer\"}}, \"required\": [\"arg1\"]}}}"

/* Kimi K2: the model outputs of llama.cpp's tests/test-chat.cpp (its Kimi-K2-Thinking peg_tester
 * cases, ids "functions.NAME:IDX" as it expects them). */
static void test_llama_cpp_outputs_kimi(void **state)
{
    (void)state;
    static const char *const kimi_templates[] = {"Kimi-K2-Thinking.jinja", "moonshotai-Kimi-K2-Thinking.jinja"};
    for (size_t i = 0; i < 2; i++) {
        char *tm = read_template(kimi_templates[i]);
        if (tc_detect(tm) != TC_KIMI_K2) fail_msg("%s: %s", kimi_templates[i], tc_format_name(tc_detect(tm)));
        free(tm);
    }
    static const char *const server_kimi[] = {"Kimi-K2-Instruct.jinja", "moonshotai-Kimi-K2.jinja"};
    for (size_t i = 0; i < 2; i++) {
        char *tm = read_server_template(server_kimi[i]);
        if (tc_detect(tm) != TC_KIMI_K2) fail_msg("%s: %s", server_kimi[i], tc_format_name(tc_detect(tm)));
        free(tm);
    }
#define KIMI_ONE "<|tool_calls_section_begin|><|tool_call_begin|>functions.special_function:0<|tool_call_argument_begin|>{\"arg1\": 1}<|tool_call_end|><|tool_calls_section_end|>"
    static const char *const sf[] = {"special_function"}, *const a1[] = {"{\"arg1\":1}"}, *const id0[] = {"functions.special_function:0"};
    tc_spec *t = spec_body(TC_KIMI_K2, "{\"tools\": [" SPECIAL_FUNCTION "]}");
    assert_true(t->lazy);
    check_calls(t, RS_DEEPSEEK, "Hello, world!\nWhat's up?", "", "Hello, world!\nWhat's up?", 0, NULL, NULL, NULL);
    check_calls(t, RS_DEEPSEEK, KIMI_ONE, "", NULL, 1, sf, a1, id0);
    check_calls(t, RS_DEEPSEEK, "<think>I'm thinking about this</think>" KIMI_ONE, "I'm thinking about this", NULL, 1, sf, a1, id0);
    check_calls(t, RS_DEEPSEEK, "Hello, world!\nWhat's up?" KIMI_ONE, "", "Hello, world!\nWhat's up?", 1, sf, a1, id0);
    /* the partial call (streaming): a head, no content */
    stream_reply(t, RS_DEEPSEEK, "<|tool_calls_section_begin|><|tool_call_begin|>functions.special_function:0<|tool_call_argument_begin|>{\"arg1\": ",
                 "", "", 1);
    stream_reply(t, RS_DEEPSEEK, "<think>I'm thinking about this</think>Hi" KIMI_ONE, "I'm thinking about this", "Hi", 1);
    check_grammar(t, KIMI_ONE, NULL, 0);
    check_prefixes(t, KIMI_ONE);
    check_stream(t, KIMI_ONE, 1, 0);
    tc_spec_free(t);

    t = spec_body(TC_KIMI_K2, "{\"parallel_tool_calls\": true, \"tools\": [" SPECIAL_FUNCTION ", " OPT_FUNCTION ", " PYTHON_FUNCTION "]}");
    static const char two[] = "<|tool_calls_section_begin|>"
                              "<|tool_call_begin|>functions.special_function:0<|tool_call_argument_begin|>{\"arg1\": 1}<|tool_call_end|>"
                              "<|tool_call_begin|>functions.special_function_with_opt:1<|tool_call_argument_begin|>{\"arg1\": 1, \"arg2\": 2}<|tool_call_end|>"
                              "<|tool_calls_section_end|>";
    static const char *const n2[] = {"special_function", "special_function_with_opt"}, *const a2[] = {"{\"arg1\":1}", "{\"arg1\":1,\"arg2\":2}"},
                      *const i2[] = {"functions.special_function:0", "functions.special_function_with_opt:1"};
    check_calls(t, RS_DEEPSEEK, two, "", NULL, 2, n2, a2, i2);
    check_grammar(t, two, NULL, 0);
    check_stream(t, two, 2, 0);
    static const char *const np[] = {"special_function", "python"}, *const ap[] = {"{\"arg1\":1}", "{\"code\":\"print('hey')\"}"},
                      *const ip[] = {"functions.special_function:0", "functions.python:1"};
    check_calls(t, RS_DEEPSEEK,
                "<think>I need to call two functions</think><|tool_calls_section_begin|>"
                "<|tool_call_begin|>functions.special_function:0<|tool_call_argument_begin|>{\"arg1\": 1}<|tool_call_end|>"
                "<|tool_call_begin|>functions.python:1<|tool_call_argument_begin|>{\"code\": \"print('hey')\"}<|tool_call_end|>"
                "<|tool_calls_section_end|>",
                "I need to call two functions", NULL, 2, np, ap, ip);
    /* the calls inside the thinking, which never closes: with the section markers, then without any end markers */
    check_calls(t, RS_DEEPSEEK,
                "<think>I need to call two functions<|tool_calls_section_begin|>"
                "<|tool_call_begin|>functions.special_function:0<|tool_call_argument_begin|>{\"arg1\": 1}<|tool_call_end|>"
                "<|tool_call_begin|>functions.python:1<|tool_call_argument_begin|>{\"code\": \"print('hey')\"}<|tool_call_end|>"
                "<|tool_calls_section_end|>",
                "I need to call two functions", NULL, 2, np, ap, ip);
    static const char bare[] = "<think>I need to call two functions"
                               "<|tool_call_begin|>functions.special_function:0<|tool_call_argument_begin|>{\"arg1\": 1}"
                               "<|tool_call_begin|>functions.python:1<|tool_call_argument_begin|>{\"code\": \"print('hey')\"}";
    check_calls(t, RS_DEEPSEEK, bare, "I need to call two functions", NULL, 2, np, ap, ip);
    stream_reply(t, RS_DEEPSEEK, bare, "I need to call two functions", "", 2);
    static const char *const py[] = {"python"}, *const apy[] = {"{\"code\":\"def hello():\\n    print(\\\"Hello, world!\\\")\\n\\nhello()\"}"},
                      *const ipy[] = {"functions.python:0"};
    check_calls(t, RS_DEEPSEEK,
                "<|tool_calls_section_begin|><|tool_call_begin|>functions.python:0<|tool_call_argument_begin|>"
                "{\"code\": \"def hello():\\n    print(\\\"Hello, world!\\\")\\n\\nhello()\"}<|tool_call_end|><|tool_calls_section_end|>",
                "", NULL, 1, py, apy, ipy);
    tc_spec_free(t);

    /* "Real life test - execute_command": no markers around the call, no end */
    t = spec_body(TC_KIMI_K2, "{\"parallel_tool_calls\": true, \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"execute_command\","
                              " \"parameters\": {\"type\": \"object\", \"properties\": {\"command\": {\"type\": \"string\"}, \"cwd\": {\"type\": \"string\"},"
                              " \"timeout\": {\"type\": \"integer\"}}, \"required\": [\"command\"]}}}]}");
    static const char *const ec[] = {"execute_command"}, *const aec[] = {"{\"command\":\"ls -lah\",\"cwd\":\"/home/jarvis/development/exllamav3\",\"timeout\":10}"},
                      *const iec[] = {"functions.execute_command:0"};
    check_calls(t, RS_DEEPSEEK,
                "<|tool_call_begin|>functions.execute_command:0<|tool_call_argument_begin|>{\"command\": \"ls -lah\", \"cwd\": \"/home/jarvis/development/exllamav3\", \"timeout\": 10}",
                "", NULL, 1, ec, aec, iec);
    tc_spec_free(t);

    /* required: the call from the first token, closed */
    t = spec_body(TC_KIMI_K2, "{\"tool_choice\": \"required\", \"tools\": [" SPECIAL_FUNCTION "]}");
    static const char *const badk[] = {
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.special_function:0<|tool_call_argument_begin|>{\"arg1\": 1}<|tool_calls_section_end|>",
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.other:0<|tool_call_argument_begin|>{\"arg1\": 1}<|tool_call_end|><|tool_calls_section_end|>",
        "Hello"};
    check_grammar(t, KIMI_ONE, badk, 3);
    tc_spec_free(t);
#undef KIMI_ONE
}

#define GET_TIME "{\"type\": \"function\", \"function\": {\"name\": \"get_time\", \"parameters\": {\"type\": \"object\"," \
    " \"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}}"
#define GET_WEATHER "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": \"object\"," \
    " \"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}}"

/* DeepSeek V3.1: the model outputs of llama.cpp's tests/test-chat.cpp (its
 * deepseek-ai-DeepSeek-V3.1.jinja peg_tester cases; thinking forced open by the prompt's <think>). */
static void test_llama_cpp_outputs_v31(void **state)
{
    (void)state;
    char *tm = read_server_template("deepseek-ai-DeepSeek-V3.1.jinja");
    assert_int_equal(tc_detect(tm), TC_DEEPSEEK_V31);
    free(tm);
    tc_spec *t = spec_body(TC_DEEPSEEK_V31, "{\"tools\": [" GET_TIME "]}");
    static const char one[] = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{\"city\": \"XYZCITY\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
    static const char *const gt[] = {"get_time"}, *const ax[] = {"{\"city\":\"XYZCITY\"}"};
    tc_result res;
    assert_true(tc_parse_output(t, one, strlen(one), &res));
    assert_int_equal(res.n_calls, 1);
    assert_null(res.content);
    assert_string_equal(res.calls[0].name, gt[0]);
    assert_string_equal(res.calls[0].arguments, ax[0]);
    tc_result_free(&res);
    check_grammar(t, one, NULL, 0);
    check_prefixes(t, one);
    check_stream(t, one, 1, 0);
    /* forced open: the reasoning, then the call */
    {
        static const char txt[] = "REASONING</think><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{\"city\": \"Tokyo\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
        rs_spec r = {.format = RS_DEEPSEEK, .forced_open = true};
        rs_split sp;
        rs_split_text(&r, txt, strlen(txt), false, &sp);
        assert_int_equal(sp.r1 - sp.r0, 9);
        assert_memory_equal(txt + sp.r0, "REASONING", 9);
        assert_true(tc_parse_output(t, txt + sp.c0, strlen(txt + sp.c0), &res));
        assert_int_equal(res.n_calls, 1);
        assert_null(res.content);
        assert_string_equal(res.calls[0].arguments, "{\"city\":\"Tokyo\"}");
        tc_result_free(&res);
    }
    /* "CONTENT", no thinking */
    assert_true(tc_parse_output(t, "CONTENT", 7, &res));
    assert_int_equal(res.n_calls, 0);
    assert_string_equal(res.content, "CONTENT");
    tc_result_free(&res);
    /* "REASONING</think>\nCONTENT": content CONTENT (llama.cpp's newest parser keeps a "\n" at the
     * end of that reasoning, "REASONING\n"; ours strips the whitespace around reasoning as its
     * classic try_parse_reasoning did) */
    {
        rs_spec r = {.format = RS_DEEPSEEK, .forced_open = true};
        rs_split sp;
        rs_split_text(&r, "REASONING</think>\nCONTENT", 25, false, &sp);
        assert_int_equal(sp.c1 - sp.c0, 7);
        assert_int_equal(sp.r1 - sp.r0, 9);
    }
    tc_spec_free(t);
    /* parallel: content, then two calls */
    t = spec_body(TC_DEEPSEEK_V31, "{\"parallel_tool_calls\": true, \"tools\": [" GET_TIME ", " GET_WEATHER "]}");
    static const char two[] = "CONTENT<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{\"city\": \"Paris\"}<｜tool▁call▁end｜>"
                              "<｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Paris\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
    assert_true(tc_parse_output(t, two, strlen(two), &res));
    assert_int_equal(res.n_calls, 2);
    assert_string_equal(res.content, "CONTENT");
    assert_string_equal(res.calls[0].name, "get_time");
    assert_string_equal(res.calls[1].name, "get_weather");
    assert_string_equal(res.calls[1].arguments, "{\"city\":\"Paris\"}");
    tc_result_free(&res);
    check_grammar(t, two + 7, NULL, 0);
    check_stream(t, two, 2, 7);
    tc_spec_free(t);
    t = spec_body(TC_DEEPSEEK_V31, "{\"tool_choice\": \"required\", \"tools\": [" GET_TIME "]}");
    static const char *const bad[] = {
        "<｜tool▁calls▁begin｜>function<｜tool▁sep｜>get_time\n```json\n{\"city\": \"x\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{\"city\": 1}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{\"city\": \"x\"}<｜tool▁calls▁end｜>"};
    check_grammar(t, one, bad, 3);
    tc_spec_free(t);
}

/* GLM 4.5/4.6/4.7: the model outputs of llama.cpp's tests/test-chat.cpp (its GLM-4.6 and
 * GLM-4.7-Flash peg_tester cases; 4.7 writes no newlines between the tags, and its prompt
 * opens the thinking). glm_4_5.jinja's detection too. */
static void test_llama_cpp_outputs_glm(void **state)
{
    (void)state;
    char *tm = read_template("glm_4_5.jinja");
    assert_int_equal(tc_detect(tm), TC_GLM45);
    free(tm);
    static const char *const glm[] = {"GLM-4.6.jinja", "GLM-4.7-Flash.jinja"};
    for (size_t i = 0; i < 2; i++) {
        tm = read_server_template(glm[i]);
        if (tc_detect(tm) != TC_GLM45) fail_msg("%s: %s", glm[i], tc_format_name(tc_detect(tm)));
        free(tm);
    }
    static const char nl[] = "<tool_call>special_function\n<arg_key>arg1</arg_key>\n<arg_value>1</arg_value>\n</tool_call>";
    static const char flat[] = "<tool_call>special_function<arg_key>arg1</arg_key><arg_value>1</arg_value></tool_call>";
    tc_spec *t = spec_body(TC_GLM45, "{\"tools\": [" SPECIAL_FUNCTION "]}");
    assert_true(t->lazy);
    check_reply(t, RS_NONE, false, nl, "", NULL, "{\"arg1\":1}");
    check_reply(t, RS_NONE, false, flat, "", NULL, "{\"arg1\":1}");
    check_reply(t, RS_NONE, false, "Hello, world!\nWhat's up?", "", "Hello, world!\nWhat's up?", NULL);
    check_reply(t, RS_DEEPSEEK, true, "I'm\nthinking</think>Hello, world!\nWhat's up?", "I'm\nthinking", "Hello, world!\nWhat's up?", NULL);
    char buf[512];
    snprintf(buf, sizeof buf, "I'm\nthinking</think>%s", flat);
    check_reply(t, RS_DEEPSEEK, true, buf, "I'm\nthinking", NULL, "{\"arg1\":1}");
    /* a call cut off before </tool_call> is no call */
    check_parse(t, "<tool_call>special_function\n<arg_key>arg1</arg_key>\n<arg_value>1</arg_value>", 0, NULL, NULL,
                "<tool_call>special_function\n<arg_key>arg1</arg_key>\n<arg_value>1</arg_value>");
    check_grammar(t, nl, NULL, 0);
    check_grammar(t, flat, NULL, 0);
    check_prefixes(t, nl);
    /* streamed: the content as it comes, the call whole at the end */
    stream_reply(t, RS_NONE, "Hi\n<tool_call>special_function\n<arg_key>arg1</arg_key>\n<arg_value>12</arg_value>\n</tool_call>", "", "Hi\n", 0);
    {
        const char *finish = "stop";
        cJSON *d = tc_stream_final(t, nl, strlen(nl), &finish);
        assert_int_equal(cJSON_GetArraySize(d), 2); /* the head, then the arguments */
        cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetArrayItem(d, 1), "tool_calls"), 0);
        assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(c, "function"), "arguments")->valuestring, "{\"arg1\":1}");
        assert_string_equal(finish, "tool_calls");
        cJSON_Delete(d);
        stream_reset(t);
    }
    tc_spec_free(t);

    /* parallel, an optional argument */
    t = spec_body(TC_GLM45, "{\"parallel_tool_calls\": true, \"tools\": [" SPECIAL_FUNCTION ", " OPT_FUNCTION "]}");
    static const char two[] = "<tool_call>special_function<arg_key>arg1</arg_key><arg_value>1</arg_value></tool_call>"
                              "<tool_call>special_function_with_opt<arg_key>arg1</arg_key><arg_value>1</arg_value>"
                              "<arg_key>arg2</arg_key><arg_value>2</arg_value></tool_call>";
    static const char *const n2[] = {"special_function", "special_function_with_opt"}, *const a2[] = {"{\"arg1\":1}", "{\"arg1\":1,\"arg2\":2}"},
                      *const i2[] = {NULL, NULL};
    {
        tc_result res;
        assert_true(tc_parse_output(t, two, strlen(two), &res));
        assert_int_equal(res.n_calls, 2);
        for (int i = 0; i < 2; i++) {
            assert_string_equal(res.calls[i].name, n2[i]);
            assert_string_equal(res.calls[i].arguments, a2[i]);
            assert_null(i2[i]);
        }
        tc_result_free(&res);
    }
    check_grammar(t, two, NULL, 0);
    tc_spec_free(t);

    /* a string argument is written raw (digits stay a string), others as JSON; required binds */
    t = spec_body(TC_GLM45, "{\"tool_choice\": \"required\", \"tools\": [" GET_TIME ", " SPECIAL_FUNCTION "]}");
    check_parse(t, "<tool_call>get_time\n<arg_key>city</arg_key>\n<arg_value>123</arg_value>\n</tool_call>", 1, "get_time", "{\"city\":\"123\"}", NULL);
    check_parse(t, "<tool_call>get_time\n<arg_key>city</arg_key>\n<arg_value>Paris \"x\"\nnext</arg_value>\n</tool_call>", 1, "get_time",
                "{\"city\":\"Paris \\\"x\\\"\\nnext\"}", NULL);
    static const char *const badg[] = {
        "<tool_call>special_function\n</tool_call>",                                                    /* arg1 is required */
        "<tool_call>special_function\n<arg_key>arg1</arg_key>\n<arg_value>\"x\"</arg_value>\n</tool_call>", /* an integer */
        "<tool_call>other\n</tool_call>",
        "<tool_call>get_time\n<arg_key>city</arg_key>\n<arg_value>a</arg_value>b</arg_value>\n</tool_call>"};
    check_grammar(t, "<tool_call>get_time\n<arg_key>city</arg_key>\n<arg_value>Paris </arg_value\n</arg_value>\n</tool_call>", badg, 4);
    tc_spec_free(t);
}

/* Qwen3-Coder (and Qwen 3.5's template): the model outputs of llama.cpp's tests/test-chat.cpp
 * (its Qwen3-Coder peg_tester cases). */
static void test_llama_cpp_outputs_qwen3_coder(void **state)
{
    (void)state;
    static const char *const q[] = {"Qwen3-Coder.jinja", "Qwen3.5-4B.jinja"};
    for (size_t i = 0; i < 2; i++) {
        char *tm = read_server_template(q[i]);
        if (tc_detect(tm) != TC_QWEN3_CODER) fail_msg("%s: %s", q[i], tc_format_name(tc_detect(tm)));
        free(tm);
    }
    static const char one[] = "<tool_call>\n<function=special_function>\n<parameter=arg1>\n1\n</parameter>\n</function>\n</tool_call>";
    tc_spec *t = spec_body(TC_QWEN3_CODER, "{\"parallel_tool_calls\": true, \"tools\": [" SPECIAL_FUNCTION ", " OPT_FUNCTION ", " PYTHON_FUNCTION ","
                                           " {\"type\": \"function\", \"function\": {\"name\": \"html\", \"parameters\": {\"type\": \"object\","
                                           " \"properties\": {\"markup\": {\"type\": \"string\"}}, \"required\": [\"markup\"]}}},"
                                           " {\"type\": \"function\", \"function\": {\"name\": \"todo_list\", \"parameters\": {\"type\": \"object\","
                                           " \"properties\": {\"todos\": {\"type\": \"array\", \"items\": {\"type\": \"object\", \"properties\":"
                                           " {\"item\": {\"type\": \"string\"}, \"selected\": {\"type\": \"boolean\"}}}}}, \"required\": [\"todos\"]}}},"
                                           " {\"type\": \"function\", \"function\": {\"name\": \"tool_2req_4opt\", \"parameters\": {\"type\": \"object\","
                                           " \"properties\": {\"req1\": {\"type\": \"string\"}, \"req2\": {\"type\": \"integer\"}, \"opt1\": {\"type\": \"string\"},"
                                           " \"opt2\": {\"type\": \"integer\"}, \"opt3\": {\"type\": \"string\"}, \"opt4\": {\"type\": \"integer\"}},"
                                           " \"required\": [\"req1\", \"req2\"]}}}]}");
    check_reply(t, RS_NONE, false, "Hello, world!\nWhat's up?", "", "Hello, world!\nWhat's up?", NULL);
    check_reply(t, RS_NONE, false, one, "", NULL, "{\"arg1\":1}");
    static const char two[] = "<tool_call>\n<function=special_function>\n<parameter=arg1>\n1\n</parameter>\n</function>\n</tool_call>\n"
                              "<tool_call>\n<function=special_function_with_opt>\n<parameter=arg1>\n1\n</parameter>\n<parameter=arg2>\n2\n</parameter>\n"
                              "</function>\n</tool_call>";
    static const struct {
        const char *text, *name, *args;
    } cases[] = {
        {"<tool_call>\n<function=python>\n<parameter=code>\ndef hello():\n    print(\"Hello, world!\")\n\nhello()\n</parameter>\n</function>\n</tool_call>",
         "python", "{\"code\":\"def hello():\\n    print(\\\"Hello, world!\\\")\\n\\nhello()\"}"},
        {"<tool_call>\n<function=python>\n<parameter=code>\n格\n</parameter>\n</function>\n</tool_call>", "python", "{\"code\":\"格\"}"},
        {"<tool_call>\n<function=html>\n<parameter=markup>\n<html>\n <head>\n  <title>Hello!</title>\n </head>\n</html>\n</parameter>\n</function>\n</tool_call>",
         "html", "{\"markup\":\"<html>\\n <head>\\n  <title>Hello!</title>\\n </head>\\n</html>\"}"},
        {"<tool_call>\n<function=todo_list>\n<parameter=todos>\n[{\"item\": \"Check stuff\", \"selected\": false}, {\"item\": \"Prepare stuff\", \"selected\": true}]\n"
         "</parameter>\n</function>\n</tool_call>",
         "todo_list", "{\"todos\":[{\"item\":\"Check stuff\",\"selected\":false},{\"item\":\"Prepare stuff\",\"selected\":true}]}"},
        {"<tool_call>\n<function=tool_2req_4opt>\n<parameter=req1>\nhello\n</parameter>\n<parameter=req2>\n42\n</parameter>\n"
         "<parameter=opt4>\n100\n</parameter>\n<parameter=opt2>\n200\n</parameter>\n</function>\n</tool_call>",
         "tool_2req_4opt", "{\"req1\":\"hello\",\"req2\":42,\"opt4\":100,\"opt2\":200}"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        check_parse(t, cases[i].text, 1, cases[i].name, cases[i].args, NULL);
        check_grammar(t, cases[i].text, NULL, 0); /* (the optional arguments in any order) */
    }
    {
        tc_result res;
        assert_true(tc_parse_output(t, two, strlen(two), &res));
        assert_int_equal(res.n_calls, 2);
        assert_string_equal(res.calls[1].name, "special_function_with_opt");
        assert_string_equal(res.calls[1].arguments, "{\"arg1\":1,\"arg2\":2}");
        tc_result_free(&res);
    }
    check_grammar(t, two, NULL, 0);
    check_prefixes(t, two);
    stream_reply(t, RS_NONE, "Sure.\n" "<tool_call>\n<function=special_function>\n<parameter=arg1>\n1\n</parameter>\n</function>\n</tool_call>",
                 "", "Sure.\n", 0);
    tc_spec_free(t);
    t = spec_body(TC_QWEN3_CODER, "{\"tool_choice\": \"required\", \"tools\": [" SPECIAL_FUNCTION "]}");
    static const char *const bad[] = {"<tool_call>\n<function=special_function>\n</function>\n</tool_call>",
                                      "<tool_call>\n<function=special_function>\n<parameter=arg1>\nx\n</parameter>\n</function>\n</tool_call>",
                                      "Hello"};
    check_grammar(t, one, bad, 3);
    tc_spec_free(t);
}

/* Granite 3.x: the model outputs of llama.cpp's tests/test-chat.cpp (its
 * ibm-granite-granite-3.3-2B-Instruct cases with COMMON_CHAT_FORMAT_GRANITE). */
static void test_llama_cpp_outputs_granite(void **state)
{
    (void)state;
    char *tm = read_template("granite-3.0-instruct.jinja");
    assert_int_equal(tc_detect(tm), TC_GRANITE);
    free(tm);
    tm = read_server_template("ibm-granite-granite-3.3-2B-Instruct.jinja");
    assert_int_equal(tc_detect(tm), TC_GRANITE);
    free(tm);
    tc_spec *t = spec_body(TC_GRANITE, "{\"tools\": [" SPECIAL_FUNCTION "]}");
    static const char call[] = "<|tool_call|>[{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}]";
    static const char wrapped[] = "<think>I'm\nthinking</think><response>Hello, world!\nWhat's up?</response>";
    check_reply(t, RS_NONE, false, "Hello, world!\nWhat's up?", "", "Hello, world!\nWhat's up?", NULL);
    check_reply(t, RS_DEEPSEEK, false, "<think>I'm\nthinking</think>Hello, world!\nWhat's up?", "I'm\nthinking", "Hello, world!\nWhat's up?", NULL);
    check_reply(t, RS_DEEPSEEK, false, wrapped, "I'm\nthinking", "Hello, world!\nWhat's up?", NULL);
    check_reply(t, RS_NONE, false, wrapped, "", wrapped, NULL);
    check_reply(t, RS_NONE, false, call, "", NULL, "{\"arg1\":1}");
    char buf[512];
    snprintf(buf, sizeof buf, "<think>I'm\nthinking</think>%s", call);
    check_reply(t, RS_DEEPSEEK, false, buf, "I'm\nthinking", NULL, "{\"arg1\":1}");
    /* streamed a byte at a time: the answer inside <response> as it comes ("<think" alone: nothing yet) */
    stream_reply(t, RS_DEEPSEEK, wrapped, "I'm\nthinking", "Hello, world!\nWhat's up?", 0);
    stream_reply(t, RS_DEEPSEEK, "<think>I'm\nthinking</think><response>Hello, world!\nWhat's up?", "I'm\nthinking", "Hello, world!\nWhat's up?", 0);
    stream_reply(t, RS_DEEPSEEK, "<think", "", "", 0);
    stream_reply(t, RS_DEEPSEEK, "<think>I'm\nthinking</think><response", "I'm\nthinking", "", 0);
    check_grammar(t, call, NULL, 0);
    check_prefixes(t, call);
    check_stream(t, call, 1, 0);
    tc_spec_free(t);
    t = spec_body(TC_GRANITE, "{\"tool_choice\": \"required\", \"tools\": [" SPECIAL_FUNCTION "]}");
    static const char *const bad[] = {"[TOOL_CALLS][{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}]",
                                      "<|tool_call|>[{\"name\": \"special_function\", \"arguments\": {\"arg1\": \"1\"}}]"};
    check_grammar(t, call, bad, 2);
    tc_spec_free(t);
}

/* gpt-oss (harmony): the model outputs of llama.cpp's tests/test-chat.cpp, its
 * openai-gpt-oss-120b.jinja cases (the COMMON_CHAT_FORMAT_GPT_OSS ones of
 * test_template_output_parsers, and the later peg_tester "GPT-OSS format tests"): the view of
 * reasoning.c (rs_reply), then the tool-call parse of its content, give the reasoning, content
 * and calls llama.cpp expects; streamed a byte at a time (rs_stream, tc_stream_text), the deltas
 * add up to the same. t NULL: a request without tools (llama.cpp's parse_tool_calls false).
 * hm_fmt: TC_GPT_OSS, or TC_LLM_JP for its dialect; hm_pre: a continued message's start the
 * prompt holds (rs_harmony_prefill), or NULL. */
static int hm_fmt = TC_GPT_OSS;
static char *hm_pre;
static void hm_check(tc_spec *t, rs_format f, const char *text, const char *reasoning, const char *content, int n,
                     const char *const *names, const char *const *args)
{
    rs_spec r = {.format = f, .calls = t != NULL, .pre = hm_pre};
    rs_set_tags(&r, hm_fmt);
    assert_true(r.harmony);
    assert_true(r.spaced == (hm_fmt == TC_LLM_JP));
    const size_t tn = strlen(text);
    sbuf rr = {0}, cc = {0};
    rs_reply(&r, text, tn, false, &rr, &cc);
    sbuf_add(&rr, "", 1);
    sbuf_add(&cc, "", 1);
    if (strcmp(rr.p, reasoning)) fail_msg("[%s]: reasoning [%s]", text, rr.p);
    tc_result res = {0};
    if (t) assert_true(tc_parse_output(t, cc.p, cc.n - 1, &res));
    const char *got = t ? (res.content ? res.content : "") : cc.p;
    if (strcmp(got, content)) fail_msg("[%s]: content [%s]", text, got);
    if (res.n_calls != n) fail_msg("[%s]: %d calls", text, res.n_calls);
    for (int i = 0; i < n; i++) {
        assert_string_equal(res.calls[i].name, names[i]);
        assert_string_equal(res.calls[i].arguments, args[i]);
    }
    tc_result_free(&res);
    /* streamed: the same reasoning and content; a head and the whole arguments per call */
    if (t) stream_reset(t);
    sbuf sr = {0}, sc = {0}, piece = {0}, sargs = {0};
    int heads = 0;
    for (size_t i = 0; i <= tn; i++) {
        sbuf_free(&piece);
        if (i < tn) rs_stream(&r, text + i, 1, &sr, &piece);
        else rs_stream_final(&r, text, tn, &sr, &piece);
        cJSON *d = NULL;
        if (!t) sbuf_add(&sc, piece.p, piece.n);
        else if (i < tn) d = piece.n ? tc_stream_text(t, piece.p, piece.n, &sc) : NULL;
        else {
            const char *finish = "stop";
            if (piece.n) cJSON_Delete(tc_stream_text(t, piece.p, piece.n, &sc));
            d = tc_stream_final(t, cc.p, cc.n - 1, &finish);
            for (cJSON *x = d ? d->child : NULL; x; x = x->next) {
                const cJSON *c = cJSON_GetObjectItem(x, "content");
                if (c) sbuf_adds(&sc, c->valuestring);
            }
            if (n) assert_string_equal(finish, "tool_calls");
        }
        for (cJSON *x = d ? d->child : NULL; x; x = x->next) {
            cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(x, "tool_calls"), 0);
            if (!c) continue;
            heads += cJSON_GetObjectItem(c, "id") != NULL;
            if (n == 1) sbuf_adds(&sargs, cJSON_GetObjectItem(cJSON_GetObjectItem(c, "function"), "arguments")->valuestring);
        }
        cJSON_Delete(d);
    }
    sbuf_add(&sr, "", 1);
    sbuf_add(&sc, "", 1);
    sbuf_add(&sargs, "", 1);
    if (strcmp(sr.p, reasoning)) fail_msg("[%s]: streamed reasoning [%s]", text, sr.p);
    if (strcmp(sc.p, content)) fail_msg("[%s]: streamed content [%s]", text, sc.p);
    if (heads != n) fail_msg("[%s]: %d heads streamed", text, heads);
    if (n == 1) assert_string_equal(sargs.p, args[0]);
    sbuf_free(&sr);
    sbuf_free(&sc);
    sbuf_free(&piece);
    sbuf_free(&sargs);
    sbuf_free(&r.seen);
    sbuf_free(&rr);
    sbuf_free(&cc);
    if (t) stream_reset(t);
}

/* The view of a reply still coming (llama.cpp's is_partial cases): reasoning and content so far;
 * streamed, a call cut off in its arguments has its head out and the arguments so far. */
static void hm_partial(tc_spec *t, const char *text, const char *reasoning, const char *content, const char *args_so_far)
{
    rs_spec r = {.format = RS_AUTO, .calls = t != NULL, .pre = hm_pre};
    rs_set_tags(&r, hm_fmt);
    sbuf rr = {0}, cc = {0};
    rs_reply(&r, text, strlen(text), true, &rr, &cc);
    sbuf_add(&rr, "", 1);
    if (strcmp(rr.p, reasoning)) fail_msg("[%s]: reasoning [%s]", text, rr.p);
    if (t) {
        stream_reset(t);
        sbuf sc = {0}, args = {0};
        int heads = 0;
        cJSON *d = tc_stream_text(t, cc.p ? cc.p : "", cc.n, &sc);
        for (cJSON *x = d ? d->child : NULL; x; x = x->next) {
            cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(x, "tool_calls"), 0);
            heads += cJSON_GetObjectItem(c, "id") != NULL;
            sbuf_adds(&args, cJSON_GetObjectItem(cJSON_GetObjectItem(c, "function"), "arguments")->valuestring);
        }
        cJSON_Delete(d);
        sbuf_add(&sc, "", 1);
        sbuf_add(&args, "", 1);
        assert_string_equal(sc.p, content);
        assert_int_equal(heads, args_so_far ? 1 : 0);
        if (args_so_far) assert_string_equal(args.p, args_so_far);
        sbuf_free(&sc);
        sbuf_free(&args);
        stream_reset(t);
    } else {
        sbuf_add(&cc, "", 1);
        assert_string_equal(cc.p, content);
    }
    sbuf_free(&rr);
    sbuf_free(&cc);
}

static void test_llama_cpp_outputs_harmony(void **state)
{
    (void)state;
    char *tm = read_server_template("openai-gpt-oss-120b.jinja");
    assert_int_equal(tc_detect(tm), TC_GPT_OSS);
    cJSON *caps = cJSON_CreateObject();
    tc_caps_json(tm, caps);
    assert_string_equal(cJSON_GetObjectItem(caps, "tool_call_format")->valuestring, "gpt-oss");
    cJSON_Delete(caps);
    free(tm);
#define HM_THINK "<|channel|>analysis<|message|>I'm\nthinking<|end|>"
#define HM_HELLO "Hello, world!\nWhat's up?"
    static const char *const sf[] = {"special_function"}, *const a1[] = {"{\"arg1\":1}"};
    tc_spec *t = spec_body(TC_GPT_OSS, "{\"tools\": [" SPECIAL_FUNCTION "]}");
    assert_true(t->lazy);
    /* test_template_output_parsers */
    hm_partial(t, "<|channel|>analysis<|message|>I'm\nthink", "I'm\nthink", "", NULL);
    hm_partial(t, HM_THINK, "I'm\nthinking", "", NULL);
    hm_check(t, RS_AUTO, HM_THINK "<|start|>assistant<|channel|>final<|message|>" HM_HELLO, "I'm\nthinking", HM_HELLO, 0, NULL, NULL);
    hm_partial(t, HM_THINK "<|start|>assistant<|channel|>commentary to=functions.special_function <|constrain|>json<|message|>{\"arg1\"",
               "I'm\nthinking", "", "{\"arg1\"");
    hm_partial(t, HM_THINK "<|start|>assistant<|channel|>commentary to=functions.special_function<|message|>{\"arg1\"", "I'm\nthinking", "",
               "{\"arg1\"");
    hm_check(t, RS_AUTO, HM_THINK "<|start|>assistant<|channel|>commentary to=functions.special_function <|constrain|>json<|message|>{\"arg1\": 1}",
             "I'm\nthinking", "", 1, sf, a1);
    hm_check(t, RS_AUTO, HM_THINK "<|start|>assistant<|channel|>analysis to=functions.special_function <|constrain|>json<|message|>{\"arg1\": 1}",
             "I'm\nthinking", "", 1, sf, a1);
    hm_partial(t, HM_THINK "<|start|>assistant<|channel|>commentary<|message|>" HM_HELLO, "I'm\nthinking", HM_HELLO, NULL);
    hm_check(t, RS_AUTO,
             HM_THINK "<|start|>assistant<|channel|>commentary<|message|>" HM_HELLO "<|end|>"
                      "<|start|>assistant<|channel|>commentary to=functions.special_function <|constrain|>json<|message|>{\"arg1\": 1}",
             "I'm\nthinking", HM_HELLO, 1, sf, a1);
    /* parse_tool_calls false: a request without tools; the calls' messages are nobody's */
    hm_check(NULL, RS_AUTO, HM_THINK "<|start|>assistant<|channel|>final<|message|>" HM_HELLO, "I'm\nthinking", HM_HELLO, 0, NULL, NULL);
    hm_partial(NULL, HM_THINK "<|start|>assistant<|channel|>commentary to=functions.special_function<|message|>{\"arg1\"", "I'm\nthinking", "",
               NULL);
    hm_check(NULL, RS_AUTO, HM_THINK "<|start|>assistant<|channel|>commentary to=functions.special_function <|constrain|>json<|message|>{\"arg1\": 1}",
             "I'm\nthinking", "", 0, NULL, NULL);
    /* reasoning format none: the analysis message stays in the content as written */
    hm_check(NULL, RS_NONE, HM_THINK "<|start|>assistant<|channel|>final<|message|>" HM_HELLO, "", HM_THINK HM_HELLO, 0, NULL, NULL);
    hm_check(t, RS_NONE, HM_THINK "<|start|>assistant<|channel|>final<|message|>" HM_HELLO, "", HM_THINK HM_HELLO, 0, NULL, NULL);
    /* (reasoning_in_content: sift's deepseek-legacy, which fills reasoning_content as well) */
    hm_check(NULL, RS_DEEPSEEK_LEGACY, HM_THINK "<|start|>assistant<|channel|>final<|message|>" HM_HELLO, "I'm\nthinking", HM_THINK HM_HELLO, 0,
             NULL, NULL);
    /* the recipient in the role's header */
    hm_check(t, RS_AUTO, " to=functions.special_function<|channel|>commentary <|constrain|>json<|message|>{\"arg1\": 1}", "", "", 1, sf, a1);
    hm_check(t, RS_AUTO, " to=functions.special_function<|channel|>analysis <|constrain|>json<|message|>{\"arg1\": 1}", "", "", 1, sf, a1);
    hm_check(t, RS_AUTO, HM_THINK "<|start|>assistant to=functions.special_function<|channel|>analysis <|constrain|>json<|message|>{\"arg1\": 1}",
             "I'm\nthinking", "", 1, sf, a1);
    /* the peg_tester cases */
    hm_check(NULL, RS_AUTO, "<|channel|>final<|message|>" HM_HELLO, "", HM_HELLO, 0, NULL, NULL);
    hm_check(NULL, RS_AUTO, "<|channel|>commentary<|message|>" HM_HELLO, "", HM_HELLO, 0, NULL, NULL);
    hm_check(t, RS_AUTO, " to=functions.special_function<|channel|>analysis<|message|>{\"arg1\": 1}", "", "", 1, sf, a1);
    hm_check(t, RS_AUTO, "<|channel|>analysis to=functions.special_function<|message|>{\"arg1\": 1}", "", "", 1, sf, a1);
    hm_check(t, RS_AUTO, " to=functions.special_function<|channel|>analysis <|constrain|>json<|message|>{\"arg1\": 1}", "", "", 1, sf, a1);
    hm_check(t, RS_AUTO, "<|channel|>commentary to=functions.special_function<|message|>{\"arg1\": 1}", "", "", 1, sf, a1);
    hm_check(t, RS_AUTO, HM_THINK "<|start|>assistant to=functions.special_function<|channel|>analysis<|message|>{\"arg1\": 1}", "I'm\nthinking",
             "", 1, sf, a1);
    hm_check(NULL, RS_AUTO,
             "<|channel|>analysis<|message|>I need to output the invoice details in JSON<|end|><|start|>assistant<|channel|>final <|constrain|>json"
             "<|message|>{\"amount\": 123.45, \"date\": \"2025-12-03\"}",
             "I need to output the invoice details in JSON", "{\"amount\": 123.45, \"date\": \"2025-12-03\"}", 0, NULL, NULL);
    /* calls nobody offered (container.exec, python): dropped, the content empty */
    hm_check(NULL, RS_AUTO,
             "<|channel|>analysis<|message|>I will execute python to say hello<|end|>"
             "<|start|>assistant to=container.exec<|channel|>commentary<|message|>python3 -c 'print(\"hello\")'",
             "I will execute python to say hello", "", 0, NULL, NULL);
    hm_check(t, RS_AUTO,
             "<|channel|>analysis<|message|>I will execute python to say hello<|end|>"
             "<|start|>assistant<|channel|>commentary to=python <|constrain|>code<|message|>print(\"hello\")",
             "I will execute python to say hello", "", 0, NULL, NULL);
    /* "<|channel|>commentary to=assistant" before the channel */
    hm_check(NULL, RS_AUTO, "<|channel|>commentary to=assistant" HM_THINK "<|start|>assistant<|channel|>final<|message|>" HM_HELLO,
             "I'm\nthinking", HM_HELLO, 0, NULL, NULL);
    hm_check(NULL, RS_AUTO, HM_THINK "<|start|>assistant<|channel|>commentary to=assistant<|channel|>final<|message|>" HM_HELLO, "I'm\nthinking",
             HM_HELLO, 0, NULL, NULL);
    /* a reply with no message header at all (a model that ignores the format): all content */
    hm_check(NULL, RS_AUTO, HM_HELLO, "", HM_HELLO, 0, NULL, NULL);
    hm_check(t, RS_AUTO, HM_HELLO, "", HM_HELLO, 0, NULL, NULL);
    tc_spec_free(t);
    t = spec_body(TC_GPT_OSS, "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"edit\", \"parameters\": {\"type\": \"object\","
                              " \"properties\": {\"oldString\": {\"type\": \"string\"}, \"newString\": {\"type\": \"string\"},"
                              " \"replaceAll\": {\"type\": \"boolean\"}}, \"required\": [\"oldString\", \"newString\"]}}}]}");
    static const char *const ed[] = {"edit"}, *const ea[] = {"{\"oldString\":\"if (part < railCount - 1) {\",\"newString\":\"if (part < 4) {\",\"replaceAll\":false}"};
    hm_check(t, RS_AUTO,
             "<|channel|>analysis<|message|>Thinking about edit...<|end|><|start|>assistant<|channel|>commentary to=functions.edit <|constrain|>json"
             "<|message|>{\"oldString\": \"if (part < railCount - 1) {\", \"newString\": \"if (part < 4) {\", \"replaceAll\": false}",
             "Thinking about edit...", "", 1, ed, ea);
    tc_spec_free(t);
    /* two calls, each a message of its own (and <|call|> as written between them) */
    t = spec_body(TC_GPT_OSS, "{\"tools\": [" SPECIAL_FUNCTION "]}");
    static const char *const sf2[] = {"special_function", "special_function"}, *const a12[] = {"{\"arg1\":1}", "{\"arg1\":2}"};
    hm_check(t, RS_AUTO,
             HM_THINK "<|start|>assistant to=functions.special_function<|channel|>commentary <|constrain|>json<|message|>{\"arg1\": 1}<|call|>"
                      "<|start|>assistant to=functions.special_function<|channel|>commentary <|constrain|>json<|message|>{\"arg1\": 2}",
             "I'm\nthinking", "", 2, sf2, a12);
    /* the grammar: lazy from the call's opening; required from the first token, after an optional analysis */
    static const char *const bad[] = {"<|channel|>commentary to=functions.other<|message|>{\"arg1\": 1}",
                                      " to=functions.special_function<|channel|>final<|message|>{\"arg1\": 1}",
                                      " to=functions.special_function<|channel|>commentary<|message|>{\"arg1\": \"x\"}"};
    check_grammar(t, " to=functions.special_function<|channel|>commentary <|constrain|>json<|message|>{\"arg1\": 1}", bad, 3);
    check_grammar(t, "<|start|>assistant to=functions.special_function<|channel|>analysis<|message|>{\"arg1\": 1}", NULL, 0);
    check_grammar(t, "<|channel|>commentary to=functions.special_function <|constrain|>json<|message|>{\"arg1\": 1}", NULL, 0);
    tc_spec_free(t);
    t = spec_body(TC_GPT_OSS, "{\"tool_choice\": \"required\", \"tools\": [" SPECIAL_FUNCTION "]}");
    assert_false(t->lazy);
    static const char *const bad_r[] = {"<|channel|>final<|message|>Hi", HM_THINK "<|start|>assistant<|channel|>final<|message|>Hi",
                                        "<|start|>assistant to=functions.special_function<|channel|>analysis<|message|>{\"arg1\": 1}"};
    check_grammar(t, HM_THINK "<|start|>assistant<|channel|>commentary to=functions.special_function <|constrain|>json<|message|>{\"arg1\": 1}", bad_r,
                  3);
    check_grammar(t, "<|channel|>analysis<|message|>a < b<|end|><|start|>assistant<|channel|>commentary<|message|>Let me call it.<|end|>"
                     "<|start|>assistant to=functions.special_function<|channel|>commentary<|message|>{\"arg1\": 1}",
                  NULL, 0);
    /* max_tokens 120: the messages before the call hold 30 characters, without '<' */
    tc_budget(t, 120);
    static const char *const too_long[] = {"<|channel|>analysis<|message|>0123456789012345678901234567890<|end|><|start|>assistant"
                                           " to=functions.special_function<|channel|>commentary<|message|>{\"arg1\": 1}"};
    check_grammar(t, "<|channel|>analysis<|message|>012345678901234567890123456789<|end|><|start|>assistant"
                     " to=functions.special_function<|channel|>commentary<|message|>{\"arg1\": 1}",
                  too_long, 1);
    tc_spec_free(t);

    /* the "Continuation tests" of the GPT-OSS cases: the last assistant message continued
     * (continue_final_message), its start in the prompt as llama.cpp's gpt-oss handler writes
     * it (test_template_generation_prompt's generation prompts), the reply read after it */
    sbuf pre = {0};
    rs_harmony_prefill(&pre, "I'm thinking", "Hello, ", false); /* COMMON_CHAT_CONTINUATION_CONTENT */
    sbuf_add(&pre, "", 1);
    assert_string_equal(pre.p,
                        "<|channel|>analysis<|message|>I'm thinking<|end|><|start|>assistant<|channel|>final<|message|>Hello, ");
    hm_pre = pre.p;
    hm_check(NULL, RS_AUTO, "world!\nWhat's up?", "I'm thinking", HM_HELLO, 0, NULL, NULL);
    t = spec_body(TC_GPT_OSS, "{\"tools\": [" SPECIAL_FUNCTION "]}");
    hm_check(t, RS_AUTO, "world!\nWhat's up?", "I'm thinking", HM_HELLO, 0, NULL, NULL);
    /* (and a call after it, in a message of its own) */
    hm_check(t, RS_AUTO, "world!<|end|><|start|>assistant to=functions.special_function<|channel|>commentary<|message|>{\"arg1\": 1}",
             "I'm thinking", "Hello, world!", 1, sf, a1);
    sbuf_free(&pre);
    rs_harmony_prefill(&pre, "I'm", "", true); /* COMMON_CHAT_CONTINUATION_REASONING */
    sbuf_add(&pre, "", 1);
    assert_string_equal(pre.p, "<|channel|>analysis<|message|>I'm");
    hm_pre = pre.p;
    hm_check(NULL, RS_AUTO, " thinking<|end|><|start|>assistant<|channel|>final<|message|>" HM_HELLO, "I'm thinking", HM_HELLO, 0, NULL, NULL);
    hm_check(t, RS_AUTO, " thinking<|end|><|start|>assistant<|channel|>final<|message|>" HM_HELLO, "I'm thinking", HM_HELLO, 0, NULL, NULL);
    hm_partial(t, " thin", "I'm thin", "", NULL);
    /* reasoning format none: the continued analysis stays in the content as written, the prompt's part too */
    hm_check(NULL, RS_NONE, " thinking<|end|><|start|>assistant<|channel|>final<|message|>" HM_HELLO, "",
             "<|channel|>analysis<|message|>I'm thinking<|end|>" HM_HELLO, 0, NULL, NULL);
    hm_pre = NULL;
    sbuf_free(&pre);
    tc_spec_free(t);
}

/* A continued assistant message on a template that thinks in tags (format fmt's, rs_set_tags):
 * its start as the prompt holds it (rs_think_prefill: the opening tag, the prefilled reasoning,
 * and unless the reasoning goes on the closing tag and the prefilled content; `opened`: the
 * generation prompt's own opening tag and newline instead, its thinking left open), then the
 * reply; fmt -1: a template that does not think (the prompt holds the content alone). The view
 * (rs_reply, and streamed a byte at a time) gives the reasoning and content llama.cpp parses. */
static void pf_check(int fmt, rs_format f, bool opened, const char *pre_r, const char *pre_c, bool open, const char *text,
                     const char *reasoning, const char *content)
{
    rs_spec r = {.format = f};
    sbuf pre = {0};
    if (fmt < 0) {
        sbuf_adds(&pre, pre_c);
    } else {
        rs_set_tags(&r, fmt);
        if (opened) sbuf_adds(&pre, r.open ? r.open : "<think>"), sbuf_adds(&pre, "\n");
        rs_think_prefill(&pre, &r, opened, pre_r, pre_c, open);
    }
    sbuf_add(&pre, "", 1);
    r.pre = pre.p;
    const size_t n = strlen(text);
    sbuf rr = {0}, cc = {0};
    rs_reply(&r, text, n, false, &rr, &cc);
    sbuf_add(&rr, "", 1);
    sbuf_add(&cc, "", 1);
    if (strcmp(rr.p, reasoning)) fail_msg("[%s|%s]: reasoning [%s]", pre.p, text, rr.p);
    if (strcmp(cc.p, content)) fail_msg("[%s|%s]: content [%s]", pre.p, text, cc.p);
    sbuf sr = {0}, sc = {0};
    for (size_t i = 0; i < n; i++) rs_stream(&r, text + i, 1, &sr, &sc);
    rs_stream_final(&r, text, n, &sr, &sc);
    sbuf_add(&sr, "", 1);
    sbuf_add(&sc, "", 1);
    if (strcmp(sr.p, reasoning)) fail_msg("[%s|%s]: streamed reasoning [%s]", pre.p, text, sr.p);
    if (strcmp(sc.p, content)) fail_msg("[%s|%s]: streamed content [%s]", pre.p, text, sc.p);
    sbuf_free(&sr);
    sbuf_free(&sc);
    sbuf_free(&rr);
    sbuf_free(&cc);
    sbuf_free(&r.seen);
    sbuf_free(&pre);
}

/* The "Continuation tests" of llama.cpp's tests/test-chat.cpp (test_template_output_peg_parsers),
 * for the templates whose formats sift parses: the request's last assistant message continued
 * (continue_final_message), message_assist_prefill_content ("Hello, " after the reasoning "I'm
 * thinking", COMMON_CHAT_CONTINUATION_CONTENT) or message_assist_prefill_reasoning ("I'm",
 * COMMON_CHAT_CONTINUATION_REASONING); the reply read after the prefill has the prefilled parts. */
/* rs_hm_analysis read a token at a time, each search from where the last stopped (as engine.c's
 * --reasoning-budget does), finds each analysis header at the same length as a whole search from
 * the start: headers cut short at the end are read again, and nothing before is. */
static void test_hm_analysis_resume(void **state)
{
    (void)state;
    static const struct {
        bool spaced;
        const char *text;
    } cases[] = {
        {false, "<|channel|>analysis<|message|>think"},
        {false, "x<|channel|>final<|message|>hi<|end|><|start|>assistant<|channel|>analysis<|message|>t"},
        {false, "<|channel|>analysiz<|message|><|channel|><|channel|>analysis<|message|>"},
        {true, "<|channel|>   analysis<|message|>a"},
        {true, "<|channel|> final<|message|>ok<|end|><|start|>assistant<|channel|>  analysis<|message|>"},
        {true, "<|channel|> <|channel|> analysis<|message|>"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        rs_spec r = {0};
        r.spaced = cases[c].spaced;
        const char *t = cases[c].text;
        const size_t len = strlen(t);
        size_t from = 0, found = 0, want = 0, dummy;
        for (size_t n = 0; n <= len && !found; n++) {
            size_t resume;
            found = rs_hm_analysis(&r, t, from, n, &resume);
            assert_true(resume >= from && resume <= n);
            want = rs_hm_analysis(&r, t, 0, n, &dummy);
            if (want != found) fail_msg("case %zu at %zu bytes: resumed search %zu, whole search %zu", c, n, found, want);
            from = resume;
        }
        assert_true(found > 0);
        assert_true(found >= 19);
        assert_memory_equal(t + found - 19, "analysis<|message|>", 19); /* the header's end */
    }
}

static void test_llama_cpp_continuation(void **state)
{
    (void)state;
    static const char HELLO[] = "Hello, world!\nWhat's up?";
    static const struct {
        const char *src; /* the test-chat.cpp template */
        int fmt;
        rs_format f;
        bool opened;        /* its generation prompt leaves the thinking open */
        const char *reply;  /* the CONTINUATION_REASONING case's model output */
    } think[] = {
        {"Qwen3.5-4B.jinja", TC_QWEN3_CODER, RS_AUTO, true, " thinking\n</think>\n\nHello, world!\nWhat's up?"},
        {"NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja", TC_QWEN3_CODER, RS_AUTO, true, " thinking\n</think>\nHello, world!\nWhat's up?"},
        {"Qwen-QwQ-32B.jinja", TC_HERMES, RS_AUTO, true, " thinking\n</think>\nHello, world!\nWhat's up?"},
        {"ibm-granite-granite-3.3-2B-Instruct.jinja", TC_GRANITE, RS_DEEPSEEK, false, " thinking</think>Hello, world!\nWhat's up?"},
        {"deepseek-ai-DeepSeek-V3.1.jinja", TC_DEEPSEEK_V31, RS_DEEPSEEK, false, " thinking</think>Hello, world!\nWhat's up?"},
        {"GLM-4.7-Flash.jinja", TC_GLM45, RS_DEEPSEEK, true, " thinking</think>Hello, world!\nWhat's up?"},
        {"Kimi-K2-Thinking.jinja", TC_KIMI_K2, RS_AUTO, false, " thinking</think>Hello, world!\nWhat's up?"},
        {"moonshotai-Kimi-K2.jinja", TC_KIMI_K2, RS_AUTO, false, " thinking</think>Hello, world!\nWhat's up?"},
        {"Reka-Edge.jinja", TC_HERMES, RS_AUTO, true, " thinking\n</think>\n\nHello, world!\nWhat's up?"},
        {"Reka-Edge.jinja (deepseek)", TC_HERMES, RS_DEEPSEEK, true, " thinking\n</think>\n\nHello, world!\nWhat's up?"},
        {"deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja", TC_DEEPSEEK_R1, RS_DEEPSEEK, true, " thinking</think>Hello, world!\nWhat's up?"},
        {"llama-cpp-deepseek-r1.jinja", TC_DEEPSEEK_R1, RS_DEEPSEEK, true, " thinking</think>Hello, world!\nWhat's up?"},
        {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", TC_DEEPSEEK_R1, RS_DEEPSEEK, true, " thinking</think>Hello, world!\nWhat's up?"},
        {"StepFun3.5-Flash.jinja", TC_QWEN3_CODER, RS_DEEPSEEK, true, " thinking\n</think>\nHello, world!\nWhat's up?"},
    };
    for (size_t i = 0; i < sizeof think / sizeof *think; i++) {
        print_message("continuation: %s\n", think[i].src);
        /* CONTINUATION_CONTENT: "world!\nWhat's up?" after "Hello, ", the thinking closed in the prompt */
        pf_check(think[i].fmt, think[i].f, think[i].opened, "I'm thinking", "Hello, ", false, "world!\nWhat's up?", "I'm thinking", HELLO);
        /* CONTINUATION_REASONING: the thinking goes on from "I'm" */
        pf_check(think[i].fmt, think[i].f, think[i].opened, "I'm", "", true, think[i].reply, "I'm thinking", HELLO);
    }
    /* Ling 3.0 (inclusionai-ling-3.0-flash.jinja, GLM 4.5's calls): a prefill with only reasoning, its content asked to go on */
    pf_check(TC_GLM45, RS_DEEPSEEK, false, "I'm thinking", "", false, "Hello, world!", "I'm thinking", "Hello, world!");
    pf_check(TC_GLM45, RS_DEEPSEEK, false, "I'm thinking", "", true, " more</think>Hello, world!", "I'm thinking more", "Hello, world!");
    /* templates that do not think (google-gemma-2-2b-it, NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use,
     * ibm-granite-granite-4.0, Qwen3-Coder, CohereForAI-c4ai-command-r-plus-tool_use,
     * mistralai-Mistral-Nemo-Instruct-2407, meetkai-functionary-medium-v3.1 and v3.2, MiMo-VL,
     * NousResearch-Hermes-3-Llama-3.1-8B-tool_use, Qwen-Qwen2.5-7B-Instruct, meta-llama-Llama-3.1-8B,
     * 3.2-3B and 3.3-70B-Instruct): the content alone, continued */
    pf_check(-1, RS_AUTO, false, NULL, "Hello, ", false, "world!\nWhat's up?", "", HELLO);
    /* (Command R7B, its own tags: no continuation case in test-chat.cpp; the same rule) */
    pf_check(TC_COMMAND_R7B, RS_AUTO, false, "I'm", "", true, " thinking<|END_THINKING|>Hello, world!\nWhat's up?", "I'm thinking", HELLO);
    /* reasoning format none: the prefill stays in the content as the prompt holds it */
    pf_check(TC_DEEPSEEK_V31, RS_NONE, false, "I'm", "", true, " thinking</think>Hello", "", "<think>I'm thinking</think>Hello");

    /* where the prefill goes in the rendered prompt (rs_prompt_think_at) */
    rs_spec r = {0};
    bool opened = false;
    static const char forced[] = "<|im_start|>assistant\n<think>\n", off[] = "<|im_start|>assistant\n<think>\n\n</think>\n\n",
                      plain[] = "<|im_start|>assistant\n";
    assert_int_equal(rs_prompt_think_at(&r, forced, strlen(forced), &opened), strlen("<|im_start|>assistant\n"));
    assert_true(opened);
    assert_int_equal(rs_prompt_think_at(&r, off, strlen(off), &opened), strlen("<|im_start|>assistant\n"));
    assert_false(opened);
    assert_int_equal(rs_prompt_think_at(&r, plain, strlen(plain), &opened), strlen(plain));
    assert_false(opened);
    rs_set_tags(&r, TC_COMMAND_R7B);
    static const char r7b[] = "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|><|START_THINKING|><|END_THINKING|>";
    assert_int_equal(rs_prompt_think_at(&r, r7b, strlen(r7b), &opened), strlen("<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>"));
    /* test_template_generation_prompt's generation prompts: Qwen3.5-4B (its opening on a line of its own) */
    sbuf out = {0};
    rs_spec qwen = {0};
    sbuf_adds(&out, forced);
    rs_think_prefill(&out, &qwen, true, "I'm thinking", "Hello, ", false);
    sbuf_add(&out, "", 1);
    assert_string_equal(out.p, "<|im_start|>assistant\n<think>\nI'm thinking\n</think>\n\nHello, ");
    sbuf_free(&out);
    sbuf_adds(&out, forced);
    rs_think_prefill(&out, &qwen, true, "I'm", "", true);
    sbuf_add(&out, "", 1);
    assert_string_equal(out.p, "<|im_start|>assistant\n<think>\nI'm");
    sbuf_free(&out);
    /* moonshotai-Kimi-K2, DeepSeek V3.2 (the tags with nothing between) */
    rs_spec kimi = {0};
    rs_set_tags(&kimi, TC_KIMI_K2);
    sbuf_adds(&out, "<|im_assistant|>assistant<|im_middle|>");
    rs_think_prefill(&out, &kimi, false, "I'm thinking", "Hello, ", false);
    sbuf_add(&out, "", 1);
    assert_string_equal(out.p, "<|im_assistant|>assistant<|im_middle|><think>I'm thinking</think>Hello, ");
    sbuf_free(&out);
    rs_think_prefill(&out, &r, false, "I'm thinking", "Hello, ", false);
    sbuf_add(&out, "", 1);
    assert_string_equal(out.p, "<|START_THINKING|>I'm thinking<|END_THINKING|>Hello, ");
    sbuf_free(&out);
}

/* LLM-jp 4.1 (llama.cpp's tests/test-chat.cpp, "LLM-jp-4.1: GPT-OSS dialect with spaces after
 * special tokens and <|end|>-separated parallel calls", llm-jp-llm-jp-4.1-8b-thinking.jinja): the
 * harmony view in its dialect gives what llama.cpp's llm-jp-harmony parser gives; the grammars
 * (tool calls, json_schema) take its spaces. */
static void test_llama_cpp_outputs_llm_jp(void **state)
{
    (void)state;
    /* its template declares the dialect (llama.cpp detects it so, before gpt-oss's channels) */
    assert_int_equal(tc_detect("{#- chat_format=llm-jp-harmony-v1 -#}\n{{- \"<|start|>assistant<|channel|>final<|message|>\" }}"), TC_LLM_JP);
    assert_string_equal(tc_format_name(TC_LLM_JP), "llm-jp-harmony");
    assert_true(tc_harmony(TC_LLM_JP) && tc_harmony(TC_GPT_OSS) && !tc_harmony(TC_HERMES));
    hm_fmt = TC_LLM_JP;
    static const char *const sf[] = {"special_function"}, *const a1[] = {"{\"arg1\":1}"};
    hm_check(NULL, RS_AUTO, "<|channel|> final<|message|> Hello, world!\nWhat's up?", "", HM_HELLO, 0, NULL, NULL);
    /* one space rule: an intentional leading space survives */
    hm_check(NULL, RS_AUTO, "<|channel|> final<|message|>  padded", "", " padded", 0, NULL, NULL);
    hm_check(NULL, RS_AUTO,
             "<|channel|> analysis<|message|> I'm\nthinking<|end|><|start|> assistant<|channel|> final<|message|> Hello, world!\nWhat's up?",
             "I'm\nthinking", HM_HELLO, 0, NULL, NULL);
    hm_partial(NULL, "<|channel|> analysis<|message|> I'm\nthinking", "I'm\nthinking", "", NULL);
    tc_spec *t = spec_body(TC_LLM_JP, "{\"tools\": [" SPECIAL_FUNCTION "]}");
    assert_true(t->spaced && t->format == TC_GPT_OSS && t->lazy);
    hm_check(t, RS_AUTO,
             "<|channel|> analysis<|message|> I'm\nthinking<|end|>"
             "<|start|> assistant to=functions.special_function<|channel|> commentary <|constrain|>  json<|message|> {\"arg1\": 1}",
             "I'm\nthinking", "", 1, sf, a1);
    hm_check(t, RS_AUTO, "<|channel|> commentary to=functions.special_function<|message|> {\"arg1\": 1}", "", "", 1, sf, a1);
    tc_spec_free(t);
    t = spec_body(TC_LLM_JP, "{\"parallel_tool_calls\": true, \"tools\": [" SPECIAL_FUNCTION "]}");
    static const char *const sf2[] = {"special_function", "special_function"}, *const a12[] = {"{\"arg1\":1}", "{\"arg1\":2}"};
    static const char par[] = "<|channel|> analysis<|message|> I'm\nthinking<|end|>"
                              "<|start|> assistant to=functions.special_function<|channel|> commentary <|constrain|>  json<|message|> {\"arg1\": 1}<|end|>"
                              "<|start|> assistant to=functions.special_function<|channel|> commentary <|constrain|>  json<|message|> {\"arg1\": 2}";
    hm_check(t, RS_AUTO, par, "I'm\nthinking", "", 2, sf2, a12);
    /* the lazy grammar from the trigger (the role's opening), both calls; gpt-oss's form without spaces is taken too */
    check_grammar(t, strstr(par, "<|start|>"), NULL, 0);
    check_grammar(t, "<|channel|> commentary to=functions.special_function<|message|> {\"arg1\": 1}", NULL, 0);
    check_grammar(t, "<|start|>assistant to=functions.special_function<|channel|>commentary<|message|>{\"arg1\": 1}", NULL, 0);
    tc_spec_free(t);
    /* required: from the first token, after an optional analysis */
    t = spec_body(TC_LLM_JP, "{\"tool_choice\": \"required\", \"tools\": [" SPECIAL_FUNCTION "]}");
    static const char *const bad[] = {"<|channel|> final<|message|> Hi", "<|channel|> analysis<|message|> x<|end|><|start|> assistant<|channel|> final<|message|> Hi",
                                      "<|channel|> commentary to=functions.other<|message|> {\"arg1\": 1}"};
    check_grammar(t,
                  "<|channel|> analysis<|message|> I'm\nthinking<|end|><|start|> assistant to=functions.special_function<|channel|> commentary "
                  "<|constrain|>  json<|message|> {\"arg1\": 1}",
                  bad, 3);
    tc_spec_free(t);
    /* structured output: the analysis, then the final channel's JSON; json_schema's grammar wrapped in the dialect */
    static const char inv[] = "<|channel|> analysis<|message|> I need to output the invoice details in JSON<|end|>"
                              "<|start|> assistant<|channel|> final <|constrain|>  json<|message|> {\"amount\": 123.45, \"date\": \"2025-12-03\"}";
    hm_check(NULL, RS_AUTO, inv, "I need to output the invoice details in JSON", "{\"amount\": 123.45, \"date\": \"2025-12-03\"}", 0, NULL, NULL);
    const char *root = NULL;
    char *g = rs_wrap_harmony("root ::= \"{\" [^}]* \"}\"\n", "root", true, RS_HM_REPLY, &root);
    sift_error err = {0};
    sift_grammar *gr = sift_grammar_parse(g, strlen(g), root, NULL, &err);
    if (!gr) fail_msg("%s\n%s", err.msg, g);
    assert_int_equal(sift_grammar_match(gr, inv, strlen(inv), NULL), SIFT_GRAMMAR_COMPLETE);
    assert_int_equal(sift_grammar_match(gr, "<|channel|> final<|message|> {}", 31, NULL), SIFT_GRAMMAR_COMPLETE);
    assert_int_equal(sift_grammar_match(gr, "<|channel|> commentary<|message|> {}", 36, NULL), SIFT_GRAMMAR_REJECTED);
    sift_grammar_free(gr);
    free(g);
    hm_fmt = TC_GPT_OSS;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_detect),       cmocka_unit_test(test_request_errors), cmocka_unit_test(test_hermes),
        cmocka_unit_test(test_llama3),       cmocka_unit_test(test_mistral),        cmocka_unit_test(test_generic),
        cmocka_unit_test(test_template_messages), cmocka_unit_test(test_garbage),
        cmocka_unit_test(test_lazy_grammar), cmocka_unit_test(test_control_bytes),
        cmocka_unit_test(test_schema_namespaces), cmocka_unit_test(test_calls_close), cmocka_unit_test(test_reasoning),
        cmocka_unit_test(test_think_trigger), cmocka_unit_test(test_llama_cpp_outputs), cmocka_unit_test(test_llama_cpp_outputs_2),
        cmocka_unit_test(test_llama_cpp_outputs_kimi), cmocka_unit_test(test_llama_cpp_outputs_v31),
        cmocka_unit_test(test_llama_cpp_outputs_glm), cmocka_unit_test(test_llama_cpp_outputs_qwen3_coder),
        cmocka_unit_test(test_llama_cpp_outputs_granite), cmocka_unit_test(test_llama_cpp_outputs_harmony),
        cmocka_unit_test(test_llama_cpp_outputs_llm_jp),
        cmocka_unit_test(test_llama_cpp_continuation), cmocka_unit_test(test_hm_analysis_resume),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
