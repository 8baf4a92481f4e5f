/*
 * server_dialect.h - what the unit tests of the server's API dialects (anthropic.c,
 * responses.c: other APIs answered as chat completions) share: JSON compared whole, a chat
 * task set up by hand as their stream converters read it, and a converter's SSE output
 * split into its events.
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

/* SSE text `event: TYPE\ndata: JSON\n\n`... -> a JSON array of the data objects, each checked
 * against its event line. */
static char *sse_events(const sbuf *out)
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
    char *s = cJSON_PrintUnformatted(a);
    cJSON_Delete(a);
    return s;
}

#endif
