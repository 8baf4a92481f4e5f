/*
 * server_dialect.h - what the unit tests of the server's API dialects (anthropic.c,
 * responses.c: other APIs answered as chat completions) share: JSON compared whole, a chat
 * task set up by hand as their stream converters read it, the chat chunks fed to them, and a
 * converter's SSE output split into its events.
 */
#ifndef SIFT_TEST_SERVER_DIALECT_H
#define SIFT_TEST_SERVER_DIALECT_H

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"

static void assert_json_equal(const char *got, const char *want)
{
    cJSON *a = cJSON_Parse(got), *b = cJSON_Parse(want);
    assert_non_null(a);
    assert_non_null(b);
    if (!cJSON_Compare(a, b, true)) fail_msg("got  %s\nwant %s", got, want);
    cJSON_Delete(a);
    cJSON_Delete(b);
}

/* A request body (JSON text) parsed for a conversion, *e cleared. */
static cJSON *body_json(const char *body, srv_error *e)
{
    cJSON *in = cJSON_Parse(body);
    assert_non_null(in);
    memset(e, 0, sizeof *e);
    return in;
}

/* A conversion's result printed, and freed with its input (NULL: it refused). */
static char *printed(cJSON *in, cJSON *out)
{
    cJSON_Delete(in);
    char *s = out ? cJSON_PrintUnformatted(out) : NULL;
    cJSON_Delete(out);
    return s;
}

/* A refusal as the test of bad bodies wants it: nothing converted, a 400 whose message has word. */
static void assert_refused(const char *body, char *got, const srv_error *e, const char *word)
{
    if (got || e->status != 400 || !strstr(e->msg, word))
        fail_msg("%s: got %s, status %d, \"%s\" (want 400 with \"%s\")", body, got ? got : "NULL", e->status, e->msg, word);
}

/* The server the stream converters see (its model name only), and the chunks (each a JSON
 * object) put into a converter's input as the chat stream writes them. */
static const srv_server *dialect_server(void)
{
    static srv_server s;
    s.model_name = "file.gguf";
    return &s;
}

static void put_chunks(sbuf *in, const char *const *chunks, size_t n)
{
    for (size_t i = 0; i < n; i++) sbuf_printf(in, "data: %s\n\n", chunks[i]);
}

/* A chat task as the stream converter reads it (no engine: the fields set by hand). */
static srv_task *fake_task(int32_t n_prompt, int32_t n_cached, int32_t n_decoded)
{
    srv_task *t = calloc(1, sizeof *t);
    assert_non_null(t);
    pthread_mutex_init(&t->mu, NULL);
    t->req.kind = SRV_OAI_CHAT;
    t->req.n_prompt = n_prompt;
    t->n_cached = n_cached;
    t->n_decoded = n_decoded;
    strcpy(t->oai_id, "chatcmpl-abc123");
    return t;
}

static void free_task(srv_task *t)
{
    for (int i = 0; i < t->req.n_stop; i++) free(t->req.stop[i]);
    free(t->req.stop);
    pthread_mutex_destroy(&t->mu);
    free(t);
}

/* SSE text `event: TYPE\ndata: JSON\n\n`... (freed) -> a JSON array of the data objects, each
 * checked against its event line. */
static char *sse_events(sbuf *out)
{
    assert_false(out->oom);
    cJSON *a = cJSON_CreateArray();
    char *text = sbuf_strdup(out);
    for (char *p = text; p && *p;) {
        char *end = strstr(p, "\n\n");
        assert_non_null(end);
        *end = 0;
        assert_true(!strncmp(p, "event: ", 7));
        char *nl = strchr(p, '\n');
        assert_non_null(nl);
        *nl = 0;
        assert_true(!strncmp(nl + 1, "data: ", 6));
        cJSON *d = cJSON_Parse(nl + 7);
        assert_non_null(d);
        assert_string_equal(cJSON_GetObjectItem(d, "type")->valuestring, p + 7);
        cJSON_AddItemToArray(a, d);
        p = end + 2;
    }
    free(text);
    sbuf_free(out);
    char *s = cJSON_PrintUnformatted(a);
    cJSON_Delete(a);
    return s;
}

/* The chat chunks of one reply that no small model produces, in two batches: thinking, then
 * text, then two tool calls whose arguments arrive in pieces (an empty content delta and a
 * usage chunk among them); and a failure mid-stream. */
static const char *const dialect_part1[] = {
    "{\"choices\": [{\"finish_reason\": null, \"index\": 0, \"delta\": {\"role\": \"assistant\", \"content\": null}}], \"model\": \"m\"}",
    "{\"choices\": [{\"finish_reason\": null, \"index\": 0, \"delta\": {\"reasoning_content\": \"Let me \"}}], \"model\": \"m\"}",
    "{\"choices\": [{\"finish_reason\": null, \"index\": 0, \"delta\": {\"reasoning_content\": \"think.\"}}], \"model\": \"m\"}",
    "{\"choices\": [{\"finish_reason\": null, \"index\": 0, \"delta\": {\"content\": \"Calling.\"}}], \"model\": \"m\"}",
};
static const char *const dialect_part2[] = {
    "{\"choices\": [{\"finish_reason\": null, \"index\": 0, \"delta\": {\"content\": \"\"}}], \"model\": \"m\"}",
    "{\"choices\": [{\"finish_reason\": null, \"index\": 0, \"delta\": {\"tool_calls\": [{\"index\": 0, \"id\": \"c0\", \"type\": \"function\","
    " \"function\": {\"name\": \"f\", \"arguments\": \"\"}}]}}], \"model\": \"m\"}",
    "{\"choices\": [{\"finish_reason\": null, \"index\": 0, \"delta\": {\"tool_calls\": [{\"index\": 0, \"function\": {\"arguments\": \"{\\\"a\\\":\"}}]}}]}",
    "{\"choices\": [{\"finish_reason\": null, \"index\": 0, \"delta\": {\"tool_calls\": [{\"index\": 0, \"function\": {\"arguments\": \"1}\"}}]}}]}",
    "{\"choices\": [{\"finish_reason\": null, \"index\": 0, \"delta\": {\"tool_calls\": [{\"index\": 1, \"id\": \"c1\", \"type\": \"function\","
    " \"function\": {\"name\": \"g\", \"arguments\": \"{}\"}}]}}]}",
    "{\"choices\": [{\"finish_reason\": \"tool_calls\", \"index\": 0, \"delta\": {}}], \"timings\": {}}",
    "{\"choices\": [], \"usage\": {\"completion_tokens\": 7}}",
};
static const char *const dialect_fail[] = {
    "{\"choices\": [{\"finish_reason\": null, \"index\": 0, \"delta\": {\"content\": \"a\"}}]}",
    "{\"error\": {\"code\": 503, \"message\": \"the server is shutting down\", \"type\": \"unavailable_error\"}}",
    "{\"choices\": [{\"finish_reason\": \"stop\", \"index\": 0, \"delta\": {}}]}",
};

#endif
