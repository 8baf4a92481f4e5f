/*
 * fuzz_tool_calls.c - libFuzzer target for the server's tool calling (tools/server/tool_calls.c):
 * the request side (tools, tool_choice -> a spec and its grammar) and the reply side (a
 * model's text -> content and calls, whole and streamed).
 *
 * One input. Its first byte picks the format (hermes, llama3, mistral, generic, deepseek-r1,
 * functionary v3.1, command-r7b, functionary v3.2, kimi-k2, deepseek-v3.1, glm-4.5, qwen3-coder, granite, gpt-oss) and whether
 * calls may come in parallel; the rest is
 *   - a request body when it starts with '{': parsed by tc_parse_request, which must accept
 *     (then its grammar must parse) or refuse with a 4xx and a message;
 *   - else a model's reply, parsed against a fixed two-tool spec: every call's arguments
 *     must be a JSON object with no raw control byte (what a client's parser refuses); the
 *     text judged surely content never exceeds the text; streamed a few bytes at a time,
 *     the argument fragments hold no raw control byte either. gpt-oss's reply goes through the
 *     harmony view first (reasoning.c's rs_reply): streamed a few bytes at a time, its
 *     reasoning and content must add up to the whole reply's (what was sent is never taken back).
 */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"

static const char TOOLS[] =
    "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": \"object\","
    " \"properties\": {\"city\": {\"type\": \"string\"}, \"days\": {\"type\": \"integer\"}}, \"required\": [\"city\"]}}},"
    " {\"type\": \"function\", \"function\": {\"name\": \"get_time\", \"parameters\": {\"type\": \"object\","
    " \"properties\": {\"zone\": {\"type\": \"string\"}}}}}]%s}";

static void check_args(const char *args)
{
    for (const char *q = args; *q; q++)
        if ((unsigned char)*q < 0x20) abort(); /* a raw control byte: invalid JSON text */
    cJSON *a = cJSON_Parse(args);
    if (!cJSON_IsObject(a)) abort();
    cJSON_Delete(a);
}

static void request(tc_format f, const char *body, size_t n)
{
    cJSON *root = cJSON_ParseWithLength(body, n);
    if (!root) return;
    tc_spec *t = NULL;
    srv_error e = {0};
    const int rc = tc_parse_request(f, root, &t, &e);
    cJSON_Delete(root);
    if (rc) {
        if (rc < 400 || rc >= 500 || !e.msg[0] || t) abort(); /* a refusal is the client's, and says why */
        return;
    }
    if (t && t->gbnf) {
        sift_error err = {0};
        sift_grammar *g = sift_grammar_parse(t->gbnf, strlen(t->gbnf), TC_ROOT, NULL, &err);
        /* a grammar over the parser's limits is refused with a message; any other is a bug */
        if (!g && (!err.msg[0] || (!strstr(err.msg, "too") && !strstr(err.msg, "limit")))) abort();
        sift_grammar_free(g);
    }
    tc_spec_free(t);
}

/* Append each call's argument fragments in the deltas d to args[index]; frees d. */
static void collect(cJSON *d, sbuf *args, int n_calls)
{
    for (cJSON *x = d ? d->child : NULL; x; x = x->next) {
        cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(x, "tool_calls"), 0);
        cJSON *fn = c ? cJSON_GetObjectItem(c, "function") : NULL;
        cJSON *a = fn ? cJSON_GetObjectItem(fn, "arguments") : NULL;
        cJSON *ix = c ? cJSON_GetObjectItem(c, "index") : NULL;
        const int idx = cJSON_IsNumber(ix) ? ix->valueint : -1;
        if (cJSON_IsString(a) && idx >= 0 && idx < n_calls) sbuf_adds(&args[idx], a->valuestring);
    }
    cJSON_Delete(d);
}

/* gpt-oss (or LLM-jp's dialect): the harmony view of text, whole and streamed in pieces of 1..7
 * bytes: the same reasoning and content (the view only ever grows while the reply comes). Its
 * content -> *view. pre: a continued message's start, read before the text (or NULL). */
static void harmony(tc_format f, const char *pre, const char *text, size_t n, sbuf *view)
{
    rs_spec r = {.format = (text[0] & 1) ? RS_AUTO : RS_NONE, .calls = true, .pre = (char *)pre};
    rs_set_tags(&r, f);
    sbuf rr = {0}, sr = {0}, sc = {0};
    rs_reply(&r, text, n, false, &rr, view);
    for (size_t i = 0; i < n;) {
        size_t k = 1 + (unsigned char)text[i] % 7;
        if (k > n - i) k = n - i;
        rs_stream(&r, text + i, k, &sr, &sc);
        i += k;
    }
    rs_stream_final(&r, text, n, &sr, &sc);
    if (rr.n != sr.n || (rr.n && memcmp(rr.p, sr.p, rr.n)) || view->n != sc.n || (sc.n && memcmp(view->p, sc.p, sc.n))) abort();
    sbuf_free(&rr);
    sbuf_free(&sr);
    sbuf_free(&sc);
    sbuf_free(&r.seen);
}

static void reply(tc_format f, bool parallel, int cont, const char *text, size_t n)
{
    sbuf view = {0}, pre = {0};
    if (tc_harmony(f) && n) { /* the tool-call parser sees the view's content */
        if (cont) { /* a continued message: its reasoning goes on (1), or its content (2) */
            rs_harmony_prefill(&pre, "I'm", cont == 2 ? "Hello, " : "", cont == 1);
            sbuf_add(&pre, "", 1);
            if (pre.oom) abort();
        }
        harmony(f, pre.p, text, n, &view);
        sbuf_free(&pre);
        if (view.oom) abort();
        text = view.p ? view.p : "";
        n = view.n;
    }
    char body[2048];
    snprintf(body, sizeof body, TOOLS, parallel ? ", \"parallel_tool_calls\": true" : "");
    cJSON *root = cJSON_Parse(body);
    tc_spec *t = NULL;
    srv_error e = {0};
    if (!root || tc_parse_request(f, root, &t, &e) || !t) abort();
    cJSON_Delete(root);
    tc_result r;
    if (!tc_parse_output(t, text, n, &r)) abort();
    for (int i = 0; i < r.n_calls; i++) check_args(r.calls[i].arguments);
    if (tc_content_safe(t, text, n) > n) abort();
    /* streamed in pieces of 1..7 bytes (the lengths from the text itself) */
    sbuf content = {0}, *args = calloc((size_t)r.n_calls + 1, sizeof *args);
    for (size_t i = 0; i < n;) {
        size_t k = 1 + (unsigned char)text[i] % 7;
        if (k > n - i) k = n - i;
        collect(tc_stream_text(t, text + i, k, &content), args, r.n_calls);
        i += k;
    }
    const char *finish = "stop";
    collect(tc_stream_final(t, text, n, &finish), args, r.n_calls);
    /* what was streamed holds no raw control byte (a fragment is a JSON string's text) */
    for (int i = 0; i < r.n_calls; i++) {
        for (size_t k = 0; k < args[i].n; k++)
            if ((unsigned char)args[i].p[k] < 0x20) abort();
        sbuf_free(&args[i]);
    }
    free(args);
    sbuf_free(&content);
    tc_result_free(&r);
    tc_spec_free(t);
    sbuf_free(&view);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 1 << 16) return 0;
    const tc_format formats[] = {TC_HERMES,      TC_LLAMA3,          TC_MISTRAL,     TC_GENERIC,         TC_DEEPSEEK_R1,
                                 TC_FUNCTIONARY_V31, TC_COMMAND_R7B, TC_FUNCTIONARY_V32, TC_KIMI_K2, TC_DEEPSEEK_V31,
                                 TC_GLM45, TC_QWEN3_CODER, TC_GRANITE, TC_GPT_OSS, TC_LLM_JP};
    /* bits 0-1: the first four; with both set and bit 4, bits 5-7 pick R1, Functionary v3.1,
     * Command R7B, Functionary v3.2, Kimi K2, DeepSeek V3.1, GLM 4.5 or Qwen3-Coder; with both
     * set, bit 4 clear and bit 7 set, Granite; bit 7 clear and bit 6 set, gpt-oss, or with bit 5
     * too LLM-jp's dialect of it (a reply: bit 3 a continued message, bit 2 which part) */
    const int both = (data[0] & 3) == 3, hi = (data[0] & 0x10) != 0;
    const tc_format f = formats[!both ? data[0] & 3
                                : hi ? 4 + ((data[0] >> 5) & 7)
                                : (data[0] & 0x80) ? 12
                                : (data[0] & 0x40) ? ((data[0] & 0x20) ? 14 : 13)
                                                   : 3];
    const bool parallel = (data[0] >> 2) & 1;
    const char *text = (const char *)data + 1;
    const size_t n = size - 1;
    if (n && text[0] == '{' && (data[0] & 8)) request(f, text, n);
    else reply(f, parallel, (data[0] & 8) ? 1 + parallel : 0, text, n);
    return 0;
}
