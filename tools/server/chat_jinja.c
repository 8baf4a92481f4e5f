/*
 * chat_jinja.c - the model's own chat template, rendered by libsift's Jinja engine.
 *
 * llama-server's --jinja renders tokenizer.chat_template with the request's messages (and
 * tools) as they came, add_generation_prompt, and the BOS/EOS texts; so does this. It is a
 * file of its own, apart from chat.c's built-in templates, because it needs the request's
 * JSON and the server's error type, which chat.c (also linked into server_unit) does not.
 *
 * A template comes with a downloaded model, so it is treated as hostile: every render runs
 * under the server's budgets (--template-timeout wall clock, --template-memory shared by all
 * renders at once), is abandoned when its client goes away (the connection the HTTP thread
 * names with chat_jinja_set_client) or the drain gives up, and holds no lock, so a slow
 * render stalls only its own request.
 */
#include <cjson/cJSON.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"

/* The text of a special token ("" when the vocabulary has none). */
static void token_text(const srv_server *s, sift_token t, char *buf, size_t size)
{
    buf[0] = 0;
    if (t == SIFT_TOKEN_NULL) return;
    int32_t n = sift_token_to_piece(s->vocab, t, buf, (int32_t)size - 1, 0, true);
    buf[n > 0 && n < (int32_t)size ? n : 0] = 0;
}

/* The connection of the request this thread is parsing (-1: none). Thread-local because the
 * render runs on the HTTP thread that parses the request, deep below the handler that knows
 * the connection; the handler sets it around the parse. A render stops when that client goes
 * away (polled with the other limits, every few thousand steps), at a second signal, or at the
 * drain's deadline. */
static _Thread_local int tls_client_fd = -1;

void chat_jinja_set_client(int fd) { tls_client_fd = fd; }

typedef struct render_ctl { const srv_server *s; int fd; } render_ctl;

static bool render_abort(void *data)
{
    const render_ctl *c = data;
    return atomic_load(&c->s->drain_abort) || atomic_load(&c->s->stop_work) || srv_client_gone(c->fd);
}

/* The server's budgets on a render (time: timeout_ms, or the configured one when 0). */
static void render_options(const srv_server *s, sift_template_options *o, render_ctl *ctl, uint32_t timeout_ms)
{
    sift_template_options_init(o);
    o->chat_defaults = true;
    o->max_time_ms = timeout_ms ? timeout_ms : (uint32_t)s->cfg.template_timeout_ms;
    o->pool = s->tpool;
    if (s->cfg.template_memory && o->max_memory > s->cfg.template_memory) o->max_memory = s->cfg.template_memory;
    ctl->s = s;
    ctl->fd = tls_client_fd;
    o->abort_cb = render_abort;
    o->abort_data = ctl;
}

/* A failed render's HTTP status: over a memory budget 413, abandoned 503, else what the
 * template raised (or a limit it ran into) 400. */
static int render_status(sift_status st) { return st == SIFT_E_NOMEM ? 413 : st == SIFT_E_STATE ? 503 : 400; }

int chat_apply_jinja(const srv_server *s, const cJSON *messages, const cJSON *tools, bool add_assistant, sbuf *out,
                     srv_error *e)
{
    char bos[256], eos[256];
    token_text(s, sift_vocab_bos(s->vocab), bos, sizeof bos);
    token_text(s, sift_vocab_eos(s->vocab), eos, sizeof eos);
    cJSON *ctx = cJSON_CreateObject();
    if (!ctx) return srv_errorf(e, 500, "out of memory");
    cJSON_AddItemToObject(ctx, "messages", cJSON_Duplicate(messages, true));
    if (tools) cJSON_AddItemToObject(ctx, "tools", cJSON_Duplicate(tools, true));
    cJSON_AddBoolToObject(ctx, "add_generation_prompt", add_assistant);
    cJSON_AddStringToObject(ctx, "bos_token", bos);
    cJSON_AddStringToObject(ctx, "eos_token", eos);
    char *json = cJSON_PrintUnformatted(ctx);
    cJSON_Delete(ctx);
    if (!json) return srv_errorf(e, 500, "out of memory");
    sift_template_options o;
    render_ctl ctl;
    render_options(s, &o, &ctl, 0);
    char *text = NULL;
    size_t n = 0;
    sift_error err = {0};
    sift_status st = sift_template_render(s->jinja, json, strlen(json), &o, &text, &n, &err);
    free(json);
    if (st != SIFT_OK) return srv_errorf(e, render_status(st), "chat template: %s", err.msg);
    /* the template writes BOS itself; the tokenizer would add a second one (llama.cpp drops it too) */
    size_t skip = 0, bl = strlen(bos);
    if (bl && sift_vocab_add_bos(s->vocab) && n >= bl && memcmp(text, bos, bl) == 0) skip = bl;
    sbuf_add(out, text + skip, n - skip);
    free(text);
    return out->oom ? srv_errorf(e, 500, "out of memory") : 0;
}

/* The probe renders a two-message chat: a template that needs longer is hostile or broken,
 * and the server should start without waiting on it. */
#define PROBE_TIMEOUT_MS 1000

/* Render the probe: an assistant tool call whose arguments are the JSON text `args` given as
 * a string (obj false) or as an object. 1: the output shows the arguments as JSON; 0: it
 * does not; -1: the template raised. */
static int probe_args(const srv_server *s, bool obj)
{
    static const char args[] = "{\"code\": \"print('Hello, World!')\"}";
    cJSON *ctx = cJSON_CreateObject();
    cJSON *m = cJSON_AddArrayToObject(ctx, "messages");
    cJSON *u = cJSON_CreateObject();
    cJSON_AddStringToObject(u, "role", "user");
    cJSON_AddStringToObject(u, "content", "Hey");
    cJSON_AddItemToArray(m, u);
    cJSON *a = cJSON_CreateObject();
    cJSON_AddStringToObject(a, "role", "assistant");
    cJSON_AddStringToObject(a, "content", "");
    cJSON *c = cJSON_CreateObject();
    cJSON_AddStringToObject(c, "id", "call_1___");
    cJSON_AddStringToObject(c, "type", "function");
    cJSON *fn = cJSON_AddObjectToObject(c, "function");
    cJSON_AddStringToObject(fn, "name", "ipython");
    cJSON_AddItemToObject(fn, "arguments", obj ? cJSON_Parse(args) : cJSON_CreateString(args));
    cJSON_AddItemToArray(cJSON_AddArrayToObject(a, "tool_calls"), c);
    cJSON_AddItemToArray(m, a);
    /* the tool too: some templates iterate `tools` unguarded */
    cJSON *tools = cJSON_Parse("[{\"type\": \"function\", \"function\": {\"name\": \"ipython\", \"description\": \"Runs code.\", "
                               "\"parameters\": {\"type\": \"object\", \"properties\": {\"code\": {\"type\": \"string\"}}, "
                               "\"required\": [\"code\"]}}}]");
    if (tools) cJSON_AddItemToObject(ctx, "tools", tools);
    cJSON_AddBoolToObject(ctx, "add_generation_prompt", false);
    cJSON_AddStringToObject(ctx, "bos_token", "");
    cJSON_AddStringToObject(ctx, "eos_token", "");
    char *json = cJSON_PrintUnformatted(ctx);
    cJSON_Delete(ctx);
    if (!json) return -1;
    sift_template_options o;
    render_ctl ctl;
    render_options(s, &o, &ctl, PROBE_TIMEOUT_MS);
    char *text = NULL;
    size_t n = 0;
    sift_error err = {0};
    const bool ok = sift_template_render(s->jinja, json, strlen(json), &o, &text, &n, &err) == SIFT_OK;
    free(json);
    const int shows = !ok ? -1 : text && strstr(text, "{\"code\": \"print") != NULL;
    free(text);
    return shows;
}

bool chat_jinja_probe_object_args(const srv_server *s)
{
    /* what minja's chat template capabilities call requires_object_arguments, found once per
     * template (at load) by rendering a probe both ways: objects when they render and strings
     * raise (a template that says "parse JSON before..."), or only objects come out as JSON */
    if (!s->jinja) return false;
    const int str = probe_args(s, false), obj = probe_args(s, true);
    return obj >= 0 && (str < 0 || (str == 0 && obj == 1));
}

bool chat_jinja_object_args(const srv_server *s) { return s->jinja && s->jinja_object_args; }
