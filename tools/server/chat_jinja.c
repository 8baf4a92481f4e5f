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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

void chat_jinja_free_kwargs(srv_server *s)
{
    cJSON_Delete(s->template_kwargs);
    s->template_kwargs = NULL;
}

int chat_jinja_set_kwargs(srv_server *s, const char *json, int reasoning)
{
    cJSON_Delete(s->template_kwargs);
    s->template_kwargs = NULL;
    cJSON *k = json ? cJSON_Parse(json) : cJSON_CreateObject();
    if (!cJSON_IsObject(k)) {
        fprintf(stderr, "sift serve: --chat-template-kwargs: expected a JSON object, got %.64s\n", json ? json : "");
        cJSON_Delete(k);
        return -1;
    }
    /* --reasoning on|off|auto: the template's enable_thinking, as llama-server sets it: true
     * unless thinking is off (auto leaves thinking to the model, and a template such as
     * DeepSeek R1's closes the thought at once when the variable is missing) */
    if (!cJSON_HasObjectItem(k, "enable_thinking") || reasoning >= 0) {
        cJSON_DeleteItemFromObjectCaseSensitive(k, "enable_thinking");
        cJSON_AddBoolToObject(k, "enable_thinking", reasoning != 0);
    }
    s->template_kwargs = k;
    return 0;
}

/* What llama.cpp's chat code adds to the context of some templates (common/chat.cpp): Llama
 * 3.x's date_string, Firefunction v2's datetime and functions; today in local time, as
 * llama.cpp's format_time. Set before the kwargs, which may override them. */
static void add_format_context(const srv_server *s, cJSON *ctx, const cJSON *tools)
{
    const char *t = s->tmpl_text;
    if (!t || (!strstr(t, "date_string") && !strstr(t, " functools["))) return;
    const time_t now = time(NULL);
    struct tm tm;
    char buf[64];
    if (!localtime_r(&now, &tm)) return;
    if (strstr(t, " functools[")) {
        strftime(buf, sizeof buf, "%b %d %Y %H:%M:%S GMT", &tm);
        cJSON_AddStringToObject(ctx, "datetime", buf);
        char *fn = tools && cJSON_GetArraySize(tools) > 0 ? cJSON_Print(tools) : NULL;
        /* as llama.cpp's tools.dump(2): cJSON indents with tabs and writes ":\t"; a raw tab is
         * never inside a JSON string (it is escaped there) */
        sbuf d = {0};
        for (const char *c = fn; c && *c; c++)
            if (*c != '\t') sbuf_add(&d, c, 1);
            else sbuf_adds(&d, c > fn && c[-1] == ':' ? " " : "  ");
        cJSON_AddStringToObject(ctx, "functions", d.p && !d.oom ? d.p : "");
        sbuf_free(&d);
        free(fn);
    } else if (s->tc_fmt == TC_LLAMA3) {
        strftime(buf, sizeof buf, "%d %b %Y", &tm);
        cJSON_AddStringToObject(ctx, "date_string", buf);
    }
}

/* The variables of kw set at the top of the template's context (over what is there). */
static void add_kwargs(cJSON *ctx, const cJSON *kw)
{
    for (const cJSON *k = kw ? kw->child : NULL; k; k = k->next) {
        cJSON_DeleteItemFromObjectCaseSensitive(ctx, k->string);
        cJSON_AddItemToObject(ctx, k->string, cJSON_Duplicate(k, true));
    }
}

int chat_apply_jinja(const srv_server *s, const cJSON *messages, const cJSON *tools, const cJSON *kwargs, bool add_assistant,
                     sbuf *out, srv_error *e)
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
    add_format_context(s, ctx, tools);
    /* chat_template_kwargs: the server's (--chat-template-kwargs, --reasoning), then the request's */
    add_kwargs(ctx, s->template_kwargs);
    add_kwargs(ctx, kwargs);
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

/* Render a probe context under the probe's budget: the output (the caller frees it), or NULL
 * when the template raised. Takes ctx. */
static char *probe_render(const srv_server *s, cJSON *ctx)
{
    cJSON_AddStringToObject(ctx, "bos_token", "");
    cJSON_AddStringToObject(ctx, "eos_token", "");
    char *json = cJSON_PrintUnformatted(ctx);
    cJSON_Delete(ctx);
    if (!json) return NULL;
    sift_template_options o;
    render_ctl ctl;
    render_options(s, &o, &ctl, PROBE_TIMEOUT_MS);
    char *text = NULL;
    size_t n = 0;
    sift_error err = {0};
    const bool ok = sift_template_render(s->jinja, json, strlen(json), &o, &text, &n, &err) == SIFT_OK;
    free(json);
    if (!ok) {
        free(text);
        return NULL;
    }
    return text ? text : strdup("");
}

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
    char *text = probe_render(s, ctx);
    const int shows = !text ? -1 : strstr(text, "{\"code\": \"print") != NULL;
    free(text);
    return shows;
}

/* A message {"role": role, "content": text}, the content as a list of one text part when typed. */
static cJSON *probe_msg(const char *role, const char *text, bool typed)
{
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", role);
    if (typed) {
        cJSON *part = cJSON_CreateObject();
        cJSON_AddStringToObject(part, "type", "text");
        cJSON_AddStringToObject(part, "text", text);
        cJSON_AddItemToArray(cJSON_AddArrayToObject(m, "content"), part);
    } else {
        cJSON_AddStringToObject(m, "content", text);
    }
    return m;
}

/* Does the output of [system: sys?, user] show `needle` (the user's text, or the system's)? */
static bool probe_shows(const srv_server *s, const char *sys, bool typed, const char *needle)
{
    cJSON *ctx = cJSON_CreateObject();
    cJSON *m = cJSON_AddArrayToObject(ctx, "messages");
    if (sys) cJSON_AddItemToArray(m, probe_msg("system", sys, typed));
    cJSON_AddItemToArray(m, probe_msg("user", "<User Needle>", typed));
    cJSON_AddBoolToObject(ctx, "add_generation_prompt", false);
    char *text = probe_render(s, ctx);
    const bool shows = text && strstr(text, needle);
    free(text);
    return shows;
}

void chat_jinja_probe_caps(srv_server *s)
{
    s->jinja_object_args = chat_jinja_probe_object_args(s);
    if (!s->jinja) return;
    /* minja's chat template capabilities, found the same way: a template requires typed
     * content when a string content does not come out and a list of text parts does; it
     * supports the system role when a system message's text comes out */
    s->jinja_typed_content = !probe_shows(s, NULL, false, "<User Needle>") && probe_shows(s, NULL, true, "<User Needle>");
    s->jinja_system_role = probe_shows(s, "<System Needle>", s->jinja_typed_content, "<System Needle>");
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

/* ---- the messages as the template gets them ---------------------------------------------------- */

int chat_content_text(const cJSON *content, int i, sbuf *out, srv_error *e)
{
    int j = 0;
    for (const cJSON *part = content->child; part; part = part->next, j++) {
        const cJSON *type = cJSON_IsObject(part) ? cJSON_GetObjectItemCaseSensitive(part, "type") : NULL;
        const cJSON *text = cJSON_IsObject(part) ? cJSON_GetObjectItemCaseSensitive(part, "text") : NULL;
        if (!cJSON_IsString(type))
            return srv_errorf(e, 400, "'messages[%d].content[%d]' must be a content part {\"type\": \"text\", \"text\": \"...\"}", i, j);
        const char *t = type->valuestring;
        if (!strcmp(t, "image_url") || !strcmp(t, "image") || !strcmp(t, "input_image"))
            return srv_errorf(e, 400, "'messages[%d].content[%d]' is an image part (\"%s\"): this server has no image input, only text parts", i, j, t);
        if (!strcmp(t, "input_audio") || !strcmp(t, "audio"))
            return srv_errorf(e, 400, "'messages[%d].content[%d]' is an audio part (\"%s\"): this server has no audio input, only text parts", i, j, t);
        if (strcmp(t, "text") != 0)
            return srv_errorf(e, 400, "'messages[%d].content[%d]' has type \"%.32s\": only text parts are supported", i, j, t);
        if (!cJSON_IsString(text))
            return srv_errorf(e, 400, "'messages[%d].content[%d].text' must be a string", i, j);
        /* llama.cpp joins the text parts with a newline */
        if (out && j) sbuf_adds(out, "\n");
        if (out) sbuf_adds(out, text->valuestring);
    }
    return 0;
}

int chat_jinja_flatten(const srv_server *s, cJSON *msgs, srv_error *e)
{
    int i = 0;
    const bool harmony = tc_harmony(s->tc_fmt);
    for (cJSON *x = msgs->child; x; x = x->next, i++) {
        cJSON *content = cJSON_GetObjectItemCaseSensitive(x, "content");
        /* gpt-oss's template shows an earlier call's analysis from "thinking": a reasoning_content
         * beside tool_calls goes there, as llama.cpp's gpt-oss handler does */
        const cJSON *rc_ = cJSON_GetObjectItemCaseSensitive(x, "reasoning_content");
        if (harmony && cJSON_IsString(rc_) && cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(x, "tool_calls")) &&
            !cJSON_GetObjectItemCaseSensitive(x, "thinking") && !cJSON_AddStringToObject(x, "thinking", rc_->valuestring))
            return srv_errorf(e, 500, "out of memory");
        /* a template that iterates over parts keeps the list (checked all the same), and a
         * string becomes a list of one text part (as minja gives it) */
        const bool keep = s->jinja_typed_content;
        if (keep && cJSON_IsString(content)) {
            cJSON *list = cJSON_CreateArray(), *part = cJSON_CreateObject();
            cJSON_AddStringToObject(part, "type", "text");
            cJSON_AddStringToObject(part, "text", content->valuestring);
            cJSON_AddItemToArray(list, part);
            if (!cJSON_ReplaceItemInObjectCaseSensitive(x, "content", list)) {
                cJSON_Delete(list);
                return srv_errorf(e, 500, "out of memory");
            }
            continue;
        }
        if (!cJSON_IsArray(content)) continue;
        sbuf b = {0};
        int rc = chat_content_text(content, i, keep ? NULL : &b, e);
        if (!rc && !keep) {
            cJSON *str = cJSON_CreateString(b.p ? b.p : "");
            if (b.oom || !str || !cJSON_ReplaceItemInObjectCaseSensitive(x, "content", str)) {
                cJSON_Delete(str);
                rc = srv_errorf(e, 500, "out of memory");
            }
        }
        sbuf_free(&b);
        if (rc) return rc;
    }
    return 0;
}

/* The text of a message's content (a string, or a list's text parts), appended to b. */
static void content_text(const cJSON *content, sbuf *b)
{
    if (cJSON_IsString(content)) sbuf_adds(b, content->valuestring);
    else if (cJSON_IsArray(content)) {
        srv_error e; /* the parts were checked before */
        chat_content_text(content, 0, b, &e);
    }
}

/* A new message {"role": "user", "content": text}. */
static cJSON *user_msg(const char *text)
{
    cJSON *u = cJSON_CreateObject();
    cJSON_AddStringToObject(u, "role", "user");
    cJSON_AddStringToObject(u, "content", text);
    return u;
}

int chat_jinja_system_fallback(cJSON *msgs)
{
    /* minja's polyfill: system texts (newline-joined) go before the next user message's text,
     * after a newline; when another role comes first, they become a user message of their own */
    sbuf sys = {0};
    bool pending = false;
    int i = 0;
    for (cJSON *x = msgs->child; x; i++) {
        cJSON *next = x->next;
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(x, "role");
        const char *r = cJSON_IsString(role) ? role->valuestring : "";
        if (!strcmp(r, "system")) {
            if (pending) sbuf_adds(&sys, "\n");
            content_text(cJSON_GetObjectItemCaseSensitive(x, "content"), &sys);
            pending = true;
            cJSON_Delete(cJSON_DetachItemViaPointer(msgs, x));
            i--;
        } else if (pending) {
            const char *st = sys.p ? sys.p : "";
            cJSON *content = cJSON_GetObjectItemCaseSensitive(x, "content");
            if (!strcmp(r, "user") && cJSON_IsArray(content)) { /* a typed-content template: a text part in front */
                cJSON *part = cJSON_CreateObject();
                cJSON_AddStringToObject(part, "type", "text");
                cJSON_AddStringToObject(part, "text", st);
                cJSON_InsertItemInArray(content, 0, part);
            } else if (!strcmp(r, "user")) {
                if (cJSON_IsString(content) && *content->valuestring) {
                    sbuf_adds(&sys, "\n");
                    sbuf_adds(&sys, content->valuestring);
                    st = sys.p ? sys.p : "";
                }
                cJSON *text = cJSON_CreateString(st);
                /* no "content" to replace (a message without one): add it, never leak it */
                if (text && (content ? !cJSON_ReplaceItemInObjectCaseSensitive(x, "content", text)
                                     : !cJSON_AddItemToObject(x, "content", text)))
                    cJSON_Delete(text);
            } else {
                cJSON_InsertItemInArray(msgs, i, user_msg(st));
                i++;
            }
            sys.n = 0;
            if (sys.p) sys.p[0] = 0;
            pending = false;
        }
        x = next;
    }
    if (pending) cJSON_AddItemToArray(msgs, user_msg(sys.p ? sys.p : "")); /* only system messages */
    const bool oom = sys.oom;
    sbuf_free(&sys);
    return oom ? -1 : 0;
}
