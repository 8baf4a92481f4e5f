/*
 * anthropic.c - Anthropic's Messages API (POST /v1/messages, /v1/messages/count_tokens) as a
 * dialect of the chat completions the server already answers.
 *
 * Why an adapter and not a third request path: everything that makes a chat reply right
 * (the chat template, Jinja or built in; tool calling in every model's format with its
 * grammar; the thinking split; stop strings; the sampler fields) lives behind
 * /v1/chat/completions, and a second copy of it would drift. So a Messages request is
 * rewritten, as JSON, into the chat-completions request it means (srv_anth_request, called by
 * request.c for SRV_ANTH_MSG), and the chat reply the server produces is rewritten into
 * Anthropic's shapes: the whole message (srv_anth_json_final, from the OpenAI JSON of the
 * finished task) and the event stream (srv_anth_sse, from the OpenAI chunks of the task's
 * stream). llama-server does the same (server_chat_convert_anthropic_to_oai and its
 * to_json_anthropic* formatters); the mapping below follows its semantics where the API
 * leaves room, and Anthropic's documentation where llama-server is looser.
 *
 * The request:
 *   system (a string, or text blocks, concatenated as llama-server does) -> a system message
 *   (Claude Code's per-request billing hash made constant, so that the prompt cache works);
 *   messages -> chat messages, block by block, in order: text blocks -> text parts; an
 *   assistant's tool_use blocks -> its tool_calls (input -> the arguments' JSON text), its
 *   thinking blocks -> reasoning_content (which templates such as Qwen3's render back);
 *   a user's tool_result blocks -> tool messages (tool_call_id, the result's text) where they
 *   stand, so text around them stays a user message of its own; redacted_thinking is dropped
 *   (nothing to render); images and documents are refused (this server reads text only).
 *   tools (name, description, input_schema) -> function tools; tool_choice auto / any / tool /
 *   none -> "auto" / "required" / that function / "none", disable_parallel_tool_use ->
 *   parallel_tool_calls false; stop_sequences -> stop; thinking {type: enabled|disabled} ->
 *   the template's enable_thinking (unless chat_template_kwargs sets it); metadata is checked
 *   and ignored; max_tokens, temperature, top_p, top_k, stream, model, seed, min_p and
 *   chat_template_kwargs pass through, and request.c checks them under the same names. Other
 *   fields are not passed (a chat field such as "n" would change the reply's shape). An empty
 *   message list is a single empty user turn (llama-server accepts it too).
 *
 * The reply: content blocks thinking (with an empty signature: a local model has nothing to
 * sign), text, then one tool_use per call (input: the arguments parsed, {} when they are not
 * JSON); never empty (one empty text block when the model said nothing, so a client that
 * reads content[0] finds it); stop_reason end_turn / max_tokens / tool_use, and
 * stop_sequence with the stop string that ended the reply; usage input_tokens (the prompt
 * tokens read this time), cache_read_input_tokens (those reused from the slot's cache) and
 * output_tokens. No timings (the API has none).
 *
 * The stream: message_start, then for each block content_block_start, its deltas
 * (thinking_delta, text_delta, input_json_delta) and content_block_stop, with indices 0, 1,
 * ... in the order the blocks open (a thinking block gets a signature_delta before it
 * closes), then message_delta (stop_reason, output_tokens) and message_stop; each event as
 * `event: TYPE` + `data: JSON`. A failure mid-stream is an `error` event.
 *
 * Errors are {"type": "error", "error": {"type", "message"}} with Anthropic's error type for
 * the status (srv_anth_json_error; http.c uses it for every answer on these paths).
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"

/* ---- small helpers ------------------------------------------------------------------------------ */

static const cJSON *get(const cJSON *o, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return v && !cJSON_IsNull(v) ? v : NULL;
}

static char *print_free(cJSON *j)
{
    char *s = j ? cJSON_PrintUnformatted(j) : NULL;
    cJSON_Delete(j);
    return s;
}

/* Copy field `name` of in to out (as is: request.c checks it), when present. */
static bool pass(const cJSON *in, const char *name, cJSON *out)
{
    const cJSON *v = get(in, name);
    if (!v) return true;
    cJSON *d = cJSON_Duplicate(v, true);
    return d && cJSON_AddItemToObject(out, name, d);
}

/* ---- the request -------------------------------------------------------------------------------- */

/* Claude Code starts its system prompt with "x-anthropic-billing-header: ...; cch=XXXXX;", the
 * cch value new on every request: left as it is, no two requests share a prompt prefix and the
 * slot's cache is never reused. The value is made constant (same length) in the system text
 * [p, p + n) that starts with the header, as llama-server does. */
static void billing_header_constant(char *p, size_t n)
{
    static const char head[] = "x-anthropic-billing-header:";
    if (n < sizeof head - 1 || memcmp(p, head, sizeof head - 1)) return;
    for (char *c = p + sizeof head - 1; c + 4 <= p + n; c++) {
        if (memcmp(c, "cch=", 4)) continue;
        char *v = c + 4, *end = v;
        while (end < p + n && *end != ';' && end - v <= 32) end++;
        if (end < p + n && *end == ';') memset(v, 'f', (size_t)(end - v));
        return;
    }
}

/* Append a text (system: the billing header made constant). */
static void add_text(sbuf *out, const char *text, bool system)
{
    const size_t at = out->n;
    sbuf_adds(out, text);
    if (system && !out->oom) billing_header_constant(out->p + at, out->n - at);
}

/* The text of a block list made of text blocks only (system, tool_result content): appended
 * to out. where names the field for the message. */
static int text_blocks(const cJSON *a, const char *where, bool system, sbuf *out, srv_error *e)
{
    int i = 0;
    for (const cJSON *b = a->child; b; b = b->next, i++) {
        const cJSON *type = cJSON_IsObject(b) ? get(b, "type") : NULL;
        const char *t = cJSON_IsString(type) ? type->valuestring : NULL;
        if (!t) return srv_errorf(e, 400, "'%s[%d]' must be a content block (an object with a string 'type')", where, i);
        if (!strcmp(t, "image") || !strcmp(t, "document"))
            return srv_errorf(e, 400, "'%s[%d]': image input is not supported (this server reads text only)", where, i);
        if (strcmp(t, "text")) return srv_errorf(e, 400, "'%s[%d]' must be a text block, got type \"%.32s\"", where, i, t);
        const cJSON *text = get(b, "text");
        if (!cJSON_IsString(text)) return srv_errorf(e, 400, "'%s[%d].text' must be a string, got %s", where, i, text ? srv_jtype(text) : "nothing");
        add_text(out, text->valuestring, system);
    }
    return 0;
}

/* A string, or a list of text blocks, as one text (NULL value: ""). */
static int text_of(const cJSON *v, const char *where, bool system, sbuf *out, srv_error *e)
{
    if (!v) return 0;
    if (cJSON_IsString(v)) {
        add_text(out, v->valuestring, system);
        return 0;
    }
    if (cJSON_IsArray(v)) return text_blocks(v, where, system, out, e);
    return srv_errorf(e, 400, "'%s' must be a string or an array of text blocks, got %s", where, srv_jtype(v));
}

static cJSON *add_message(cJSON *msgs, const char *role)
{
    cJSON *m = cJSON_CreateObject();
    if (!m || !cJSON_AddItemToArray(msgs, m)) {
        cJSON_Delete(m);
        return NULL;
    }
    return cJSON_AddStringToObject(m, "role", role) ? m : NULL;
}

/* A user's text parts so far, as a user message of their own (then a fresh list). */
static bool flush_user(cJSON *msgs, cJSON **parts)
{
    if (!*parts || !(*parts)->child) return true;
    cJSON *m = add_message(msgs, "user");
    if (!m) return false;
    cJSON_AddItemToObject(m, "content", *parts);
    *parts = cJSON_CreateArray();
    return *parts != NULL;
}

/* One tool_result block -> a tool message. */
static int tool_result(const cJSON *b, const char *where, cJSON *msgs, srv_error *e)
{
    const cJSON *id = get(b, "tool_use_id");
    if (!cJSON_IsString(id)) return srv_errorf(e, 400, "'%s.tool_use_id' must be a string, got %s", where, id ? srv_jtype(id) : "nothing");
    const cJSON *err = get(b, "is_error");
    if (err && !cJSON_IsBool(err)) return srv_errorf(e, 400, "'%s.is_error' must be a boolean, got %s", where, srv_jtype(err));
    char w[96];
    snprintf(w, sizeof w, "%s.content", where);
    sbuf text = {0};
    const int rc = text_of(get(b, "content"), w, false, &text, e);
    cJSON *m = rc ? NULL : add_message(msgs, "tool");
    const bool ok = m && cJSON_AddStringToObject(m, "tool_call_id", id->valuestring) &&
                    cJSON_AddStringToObject(m, "content", text.p ? text.p : "") && !text.oom;
    sbuf_free(&text);
    if (rc) return rc;
    return ok ? 0 : srv_errorf(e, 500, "out of memory");
}

/* One tool_use block -> an entry of tool_calls. */
static int tool_use(const cJSON *b, const char *where, cJSON *calls, srv_error *e)
{
    const cJSON *id = get(b, "id"), *name = get(b, "name"), *input = get(b, "input");
    if (id && !cJSON_IsString(id)) return srv_errorf(e, 400, "'%s.id' must be a string, got %s", where, srv_jtype(id));
    if (!cJSON_IsString(name) || !*name->valuestring)
        return srv_errorf(e, 400, "'%s.name' must be a non-empty string, got %s", where, name ? srv_jtype(name) : "nothing");
    if (input && !cJSON_IsObject(input)) return srv_errorf(e, 400, "'%s.input' must be an object, got %s", where, srv_jtype(input));
    char *args = input ? cJSON_PrintUnformatted(input) : strdup("{}");
    cJSON *c = cJSON_CreateObject();
    cJSON *fn = c ? cJSON_CreateObject() : NULL;
    bool ok = args && c && fn && cJSON_AddItemToArray(calls, c);
    if (!ok) cJSON_Delete(c);
    ok = ok && cJSON_AddStringToObject(c, "id", id ? id->valuestring : "") && cJSON_AddStringToObject(c, "type", "function") &&
         cJSON_AddItemToObject(c, "function", fn);
    if (!ok) cJSON_Delete(fn);
    ok = ok && cJSON_AddStringToObject(fn, "name", name->valuestring) && cJSON_AddStringToObject(fn, "arguments", args);
    free(args);
    return ok ? 0 : srv_errorf(e, 500, "out of memory");
}

/* messages[i] with its content as blocks -> one or more chat messages. */
static int message_blocks(const cJSON *content, bool assistant, int i, cJSON *msgs, srv_error *e)
{
    cJSON *parts = cJSON_CreateArray(), *calls = cJSON_CreateArray();
    sbuf reasoning = {0};
    int rc = parts && calls ? 0 : srv_errorf(e, 500, "out of memory");
    int j = 0;
    for (const cJSON *b = content->child; !rc && b; b = b->next, j++) {
        char where[64];
        snprintf(where, sizeof where, "messages[%d].content[%d]", i, j);
        const cJSON *type = cJSON_IsObject(b) ? get(b, "type") : NULL;
        const char *t = cJSON_IsString(type) ? type->valuestring : NULL;
        if (!t) {
            rc = srv_errorf(e, 400, "'%s' must be a content block (an object with a string 'type')", where);
        } else if (!strcmp(t, "text")) {
            const cJSON *text = get(b, "text");
            cJSON *p = cJSON_IsString(text) ? cJSON_CreateObject() : NULL;
            if (!cJSON_IsString(text))
                rc = srv_errorf(e, 400, "'%s.text' must be a string, got %s", where, text ? srv_jtype(text) : "nothing");
            else if (!p || !cJSON_AddItemToArray(parts, p) || !cJSON_AddStringToObject(p, "type", "text") ||
                     !cJSON_AddStringToObject(p, "text", text->valuestring))
                rc = srv_errorf(e, 500, "out of memory");
        } else if (!strcmp(t, "thinking")) {
            const cJSON *th = get(b, "thinking");
            if (!cJSON_IsString(th)) rc = srv_errorf(e, 400, "'%s.thinking' must be a string, got %s", where, th ? srv_jtype(th) : "nothing");
            else sbuf_adds(&reasoning, th->valuestring);
        } else if (!strcmp(t, "redacted_thinking")) {
            /* encrypted by another service: nothing a template could show */
        } else if (!strcmp(t, "tool_use")) {
            rc = assistant ? tool_use(b, where, calls, e)
                           : srv_errorf(e, 400, "'%s' is a tool_use block in a user message (tool calls are the assistant's)", where);
        } else if (!strcmp(t, "tool_result")) {
            if (assistant) rc = srv_errorf(e, 400, "'%s' is a tool_result block in an assistant message (results are the user's)", where);
            else if (!flush_user(msgs, &parts)) rc = srv_errorf(e, 500, "out of memory");
            else rc = tool_result(b, where, msgs, e);
        } else if (!strcmp(t, "image") || !strcmp(t, "document")) {
            rc = srv_errorf(e, 400, "'%s': image input is not supported (this server reads text only: no \"%s\" blocks)", where, t);
        } else {
            rc = srv_errorf(e, 400, "'%s' has an unknown block type \"%.32s\" (text, thinking, tool_use and tool_result are read)", where, t);
        }
    }
    if (!rc && assistant && (parts->child || calls->child || reasoning.n)) {
        cJSON *m = add_message(msgs, "assistant");
        bool ok = m != NULL;
        if (ok && parts->child) {
            cJSON_AddItemToObject(m, "content", parts);
            parts = NULL;
        } else if (ok) {
            ok = cJSON_AddStringToObject(m, "content", "") != NULL;
        }
        if (ok && calls->child) {
            cJSON_AddItemToObject(m, "tool_calls", calls);
            calls = NULL;
        }
        if (ok && reasoning.n) ok = cJSON_AddStringToObject(m, "reasoning_content", reasoning.p) != NULL;
        if (!ok || reasoning.oom) rc = srv_errorf(e, 500, "out of memory");
    } else if (!rc && !assistant && !flush_user(msgs, &parts)) {
        rc = srv_errorf(e, 500, "out of memory");
    }
    cJSON_Delete(parts);
    cJSON_Delete(calls);
    sbuf_free(&reasoning);
    return rc;
}

static int convert_messages(const cJSON *in, cJSON *out, srv_error *e)
{
    cJSON *msgs = cJSON_AddArrayToObject(out, "messages");
    if (!msgs) return srv_errorf(e, 500, "out of memory");
    const cJSON *sys = get(in, "system");
    if (sys) {
        sbuf text = {0};
        const int rc = text_of(sys, "system", true, &text, e);
        cJSON *m = rc ? NULL : add_message(msgs, "system");
        const bool ok = m && cJSON_AddStringToObject(m, "content", text.p ? text.p : "") && !text.oom;
        sbuf_free(&text);
        if (rc) return rc;
        if (!ok) return srv_errorf(e, 500, "out of memory");
    }
    const cJSON *m = get(in, "messages");
    if (!m) return srv_errorf(e, 400, "'messages' is required");
    if (!cJSON_IsArray(m)) return srv_errorf(e, 400, "'messages' must be an array of messages, got %s", srv_jtype(m));
    if (cJSON_GetArraySize(m) > SRV_MAX_MESSAGES)
        return srv_errorf(e, 400, "'messages' has %d messages, more than %d", cJSON_GetArraySize(m), SRV_MAX_MESSAGES);
    int i = 0;
    for (const cJSON *x = m->child; x; x = x->next, i++) {
        const cJSON *role = cJSON_IsObject(x) ? get(x, "role") : NULL, *content = cJSON_IsObject(x) ? get(x, "content") : NULL;
        if (!cJSON_IsObject(x)) return srv_errorf(e, 400, "'messages[%d]' must be an object with 'role' and 'content', got %s", i, srv_jtype(x));
        if (!cJSON_IsString(role) || (strcmp(role->valuestring, "user") && strcmp(role->valuestring, "assistant")))
            return srv_errorf(e, 400, "'messages[%d].role' must be \"user\" or \"assistant\" (the system prompt is the 'system' field)", i);
        const bool assistant = !strcmp(role->valuestring, "assistant");
        if (cJSON_IsString(content)) {
            cJSON *c = add_message(msgs, role->valuestring);
            if (!c || !cJSON_AddStringToObject(c, "content", content->valuestring)) return srv_errorf(e, 500, "out of memory");
        } else if (cJSON_IsArray(content)) {
            const int rc = message_blocks(content, assistant, i, msgs, e);
            if (rc) return rc;
        } else {
            return srv_errorf(e, 400, "'messages[%d].content' must be a string or an array of content blocks, got %s", i,
                              content ? srv_jtype(content) : "nothing");
        }
    }
    if (!msgs->child) { /* nothing to answer: one empty user turn (as llama-server, permissive) */
        cJSON *u = add_message(msgs, "user");
        if (!u || !cJSON_AddStringToObject(u, "content", "")) return srv_errorf(e, 500, "out of memory");
    }
    return 0;
}

bool srv_chat_tool_add(cJSON *tools, const char *name, const char *desc, const cJSON *params)
{
    cJSON *o = cJSON_CreateObject();
    if (!o || !cJSON_AddItemToArray(tools, o)) {
        cJSON_Delete(o);
        return false;
    }
    cJSON *fn = cJSON_AddObjectToObject(o, "function");
    cJSON *p = params ? cJSON_Duplicate(params, true) : cJSON_CreateObject();
    const bool ok = cJSON_AddStringToObject(o, "type", "function") && fn && p && cJSON_AddItemToObject(fn, "parameters", p);
    if (!ok) cJSON_Delete(p);
    return ok && cJSON_AddStringToObject(fn, "name", name) && (!desc || cJSON_AddStringToObject(fn, "description", desc));
}

static int convert_tools(const cJSON *in, cJSON *out, srv_error *e)
{
    const cJSON *tools = get(in, "tools");
    if (tools) {
        if (!cJSON_IsArray(tools)) return srv_errorf(e, 400, "'tools' must be an array of tools, got %s", srv_jtype(tools));
        cJSON *a = cJSON_AddArrayToObject(out, "tools");
        if (!a) return srv_errorf(e, 500, "out of memory");
        int i = 0;
        for (const cJSON *t = tools->child; t; t = t->next, i++) {
            if (!cJSON_IsObject(t)) return srv_errorf(e, 400, "'tools[%d]' must be an object, got %s", i, srv_jtype(t));
            const cJSON *type = get(t, "type"), *name = get(t, "name"), *desc = get(t, "description"), *schema = get(t, "input_schema");
            if (type && (!cJSON_IsString(type) || strcmp(type->valuestring, "custom")))
                return srv_errorf(e, 400, "'tools[%d]' is a server tool (type %.40s%s%s): this server runs client tools only (name, description, input_schema)",
                                  i, cJSON_IsString(type) ? "\"" : "", cJSON_IsString(type) ? type->valuestring : srv_jtype(type), cJSON_IsString(type) ? "\"" : "");
            if (!cJSON_IsString(name) || !*name->valuestring)
                return srv_errorf(e, 400, "'tools[%d].name' must be a non-empty string, got %s", i, name ? srv_jtype(name) : "nothing");
            if (desc && !cJSON_IsString(desc)) return srv_errorf(e, 400, "'tools[%d].description' must be a string, got %s", i, srv_jtype(desc));
            if (schema && !cJSON_IsObject(schema))
                return srv_errorf(e, 400, "'tools[%d].input_schema' must be an object (a JSON schema), got %s", i, srv_jtype(schema));
            if (!srv_chat_tool_add(a, name->valuestring, desc ? desc->valuestring : NULL, schema)) return srv_errorf(e, 500, "out of memory");
        }
    }
    const cJSON *tc = get(in, "tool_choice");
    if (!tc) return 0;
    const cJSON *type = cJSON_IsObject(tc) ? get(tc, "type") : NULL;
    const char *t = cJSON_IsString(type) ? type->valuestring : "";
    const cJSON *dp = cJSON_IsObject(tc) ? get(tc, "disable_parallel_tool_use") : NULL;
    if (dp && !cJSON_IsBool(dp)) return srv_errorf(e, 400, "'tool_choice.disable_parallel_tool_use' must be a boolean, got %s", srv_jtype(dp));
    if (cJSON_IsTrue(dp) && !cJSON_AddFalseToObject(out, "parallel_tool_calls")) return srv_errorf(e, 500, "out of memory");
    bool ok;
    if (!strcmp(t, "auto") || !strcmp(t, "none")) {
        ok = cJSON_AddStringToObject(out, "tool_choice", t) != NULL;
    } else if (!strcmp(t, "any")) {
        ok = cJSON_AddStringToObject(out, "tool_choice", "required") != NULL;
    } else if (!strcmp(t, "tool")) {
        const cJSON *name = get(tc, "name");
        if (!cJSON_IsString(name)) return srv_errorf(e, 400, "'tool_choice.name' must be a string (the tool to call), got %s", name ? srv_jtype(name) : "nothing");
        cJSON *o = cJSON_AddObjectToObject(out, "tool_choice");
        ok = o && cJSON_AddStringToObject(o, "type", "function") && cJSON_AddStringToObject(cJSON_AddObjectToObject(o, "function"), "name", name->valuestring);
    } else {
        return srv_errorf(e, 400, "'tool_choice' must be an object with 'type' \"auto\", \"any\", \"tool\" or \"none\"");
    }
    return ok ? 0 : srv_errorf(e, 500, "out of memory");
}

/* stop_sequences, thinking, metadata and the fields that keep their names. */
static int convert_params(const cJSON *in, bool count_only, cJSON *out, srv_error *e)
{
    const cJSON *ss = get(in, "stop_sequences");
    if (ss) {
        if (!cJSON_IsArray(ss)) return srv_errorf(e, 400, "'stop_sequences' must be an array of strings, got %s", srv_jtype(ss));
        int i = 0;
        for (const cJSON *x = ss->child; x; x = x->next, i++)
            if (!cJSON_IsString(x)) return srv_errorf(e, 400, "'stop_sequences[%d]' must be a string, got %s", i, srv_jtype(x));
        if (!cJSON_AddItemToObject(out, "stop", cJSON_Duplicate(ss, true))) return srv_errorf(e, 500, "out of memory");
    }
    const cJSON *md = get(in, "metadata");
    if (md && !cJSON_IsObject(md)) return srv_errorf(e, 400, "'metadata' must be an object, got %s", srv_jtype(md));
    static const char *const same[] = {"model", "temperature", "top_p", "top_k", "min_p", "seed", "chat_template_kwargs"};
    for (size_t i = 0; i < sizeof same / sizeof *same; i++)
        if (!pass(in, same[i], out)) return srv_errorf(e, 500, "out of memory");
    if (!count_only && (!pass(in, "max_tokens", out) || !pass(in, "stream", out))) return srv_errorf(e, 500, "out of memory");
    const cJSON *th = get(in, "thinking");
    if (!th) return 0;
    const cJSON *type = cJSON_IsObject(th) ? get(th, "type") : NULL;
    const char *t = cJSON_IsString(type) ? type->valuestring : "";
    if (strcmp(t, "enabled") && strcmp(t, "disabled"))
        return srv_errorf(e, 400, "'thinking' must be an object with 'type' \"enabled\" or \"disabled\"");
    const cJSON *budget = get(th, "budget_tokens");
    if (budget && (!cJSON_IsNumber(budget) || budget->valuedouble < 0))
        return srv_errorf(e, 400, "'thinking.budget_tokens' must be a non-negative integer, got %s", srv_jtype(budget));
    /* the template's switch (Qwen3's and others' enable_thinking), unless the client set it */
    cJSON *kw = cJSON_GetObjectItemCaseSensitive(out, "chat_template_kwargs");
    if (kw && !cJSON_IsObject(kw)) return 0; /* request.c names the wrong type */
    if (!kw && !(kw = cJSON_AddObjectToObject(out, "chat_template_kwargs"))) return srv_errorf(e, 500, "out of memory");
    if (!cJSON_GetObjectItemCaseSensitive(kw, "enable_thinking") && !cJSON_AddBoolToObject(kw, "enable_thinking", !strcmp(t, "enabled")))
        return srv_errorf(e, 500, "out of memory");
    return 0;
}

cJSON *srv_anth_request(const cJSON *in, bool count_only, srv_error *e)
{
    cJSON *out = cJSON_CreateObject();
    if (!out) {
        srv_errorf(e, 500, "out of memory");
        return NULL;
    }
    int rc = convert_messages(in, out, e);
    if (!rc) rc = convert_tools(in, out, e);
    if (!rc) rc = convert_params(in, count_only, out, e);
    if (rc) {
        cJSON_Delete(out);
        return NULL;
    }
    return out;
}

/* ---- errors -------------------------------------------------------------------------------------- */

/* Anthropic's error type for an HTTP status (what its SDKs map to exception classes). */
static const char *error_type(int status)
{
    switch (status) {
    case 400: return "invalid_request_error";
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 405: return "invalid_request_error";
    case 413: return "request_too_large";
    case 414: return "invalid_request_error";
    case 429: return "rate_limit_error";
    case 503: return "overloaded_error";
    default: return status >= 400 && status < 500 ? "invalid_request_error" : "api_error";
    }
}

static cJSON *error_obj(const srv_error *e)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "type", "error");
    cJSON *er = cJSON_AddObjectToObject(o, "error");
    cJSON_AddStringToObject(er, "type", error_type(e->status));
    sbuf m = {0};
    utf8_sanitize(&m, e->msg, strlen(e->msg));
    cJSON_AddStringToObject(er, "message", m.p ? m.p : "");
    sbuf_free(&m);
    return o;
}

char *srv_anth_json_error(const srv_error *e) { return print_free(error_obj(e)); }

/* ---- the reply ------------------------------------------------------------------------------------- */

/* "msg_" and the random part of the task's chat id. */
static void message_id(const srv_task *t, char *out, size_t cap)
{
    const char *dash = strchr(t->oai_id, '-');
    snprintf(out, cap, "msg_%s", dash ? dash + 1 : t->oai_id);
}

/* The counts the engine wrote (under the task's lock: a stream reads them while it runs). */
static void counts(srv_task *t, int32_t *n_cached, int32_t *n_decoded)
{
    pthread_mutex_lock(&t->mu);
    *n_cached = t->n_cached;
    *n_decoded = t->n_decoded;
    pthread_mutex_unlock(&t->mu);
}

static void add_usage(cJSON *o, srv_task *t, bool with_output)
{
    int32_t cached, decoded;
    counts(t, &cached, &decoded);
    if (cached > t->req.n_prompt) cached = t->req.n_prompt;
    cJSON *u = cJSON_AddObjectToObject(o, "usage");
    cJSON_AddNumberToObject(u, "input_tokens", t->req.n_prompt - cached);
    cJSON_AddNumberToObject(u, "cache_creation_input_tokens", 0);
    cJSON_AddNumberToObject(u, "cache_read_input_tokens", cached);
    cJSON_AddNumberToObject(u, "output_tokens", with_output ? decoded : 0);
}

/* OpenAI's finish_reason -> stop_reason (and the stop string, for stop_sequence). */
static const char *stop_reason(const srv_task *t, const char *finish, const char **seq)
{
    *seq = NULL;
    if (finish && !strcmp(finish, "tool_calls")) return "tool_use";
    if (finish && !strcmp(finish, "length")) return "max_tokens";
    if (t->stop == SRV_STOP_WORD && t->stop_word >= 0 && t->stop_word < t->req.n_stop) {
        *seq = t->req.stop[t->stop_word];
        return "stop_sequence";
    }
    return "end_turn";
}

static void add_stop(cJSON *o, const srv_task *t, const char *finish)
{
    const char *seq;
    cJSON_AddStringToObject(o, "stop_reason", stop_reason(t, finish, &seq));
    if (seq) cJSON_AddStringToObject(o, "stop_sequence", seq);
    else cJSON_AddNullToObject(o, "stop_sequence");
}

/* A tool_use block from an OpenAI tool call (input: the arguments as an object). */
static cJSON *tool_block(const cJSON *call)
{
    const cJSON *fn = get(call, "function"), *id = get(call, "id");
    const cJSON *name = fn ? get(fn, "name") : NULL, *args = fn ? get(fn, "arguments") : NULL;
    cJSON *b = cJSON_CreateObject();
    cJSON_AddStringToObject(b, "type", "tool_use");
    cJSON_AddStringToObject(b, "id", cJSON_IsString(id) ? id->valuestring : "");
    cJSON_AddStringToObject(b, "name", cJSON_IsString(name) ? name->valuestring : "");
    cJSON *input = cJSON_IsString(args) ? cJSON_Parse(args->valuestring) : NULL;
    if (!cJSON_IsObject(input)) {
        cJSON_Delete(input);
        input = cJSON_CreateObject();
    }
    cJSON_AddItemToObject(b, "input", input);
    return b;
}

cJSON *srv_json_final_parsed(const srv_server *s, srv_task *t, const cJSON **choice, const cJSON **msg)
{
    char *j = srv_json_final(s, t);
    cJSON *oai = j ? cJSON_Parse(j) : NULL;
    free(j);
    *choice = cJSON_GetArrayItem(get(oai, "choices"), 0);
    *msg = *choice ? get(*choice, "message") : NULL;
    if (*msg) return oai;
    cJSON_Delete(oai);
    return NULL;
}

char *srv_anth_json_final(const srv_server *s, srv_task *t)
{
    const cJSON *choice, *msg;
    cJSON *oai = srv_json_final_parsed(s, t, &choice, &msg);
    if (!oai) return NULL; /* out of memory: http.c answers 500 */
    const cJSON *model = get(oai, "model"), *finish = get(choice, "finish_reason");
    const cJSON *reasoning = get(msg, "reasoning_content"), *content = get(msg, "content"), *calls = get(msg, "tool_calls");
    cJSON *o = cJSON_CreateObject();
    char id[64];
    message_id(t, id, sizeof id);
    cJSON_AddStringToObject(o, "id", id);
    cJSON_AddStringToObject(o, "type", "message");
    cJSON_AddStringToObject(o, "role", "assistant");
    cJSON *blocks = cJSON_AddArrayToObject(o, "content");
    if (cJSON_IsString(reasoning) && *reasoning->valuestring) {
        cJSON *b = cJSON_CreateObject();
        cJSON_AddStringToObject(b, "type", "thinking");
        cJSON_AddStringToObject(b, "thinking", reasoning->valuestring);
        cJSON_AddStringToObject(b, "signature", "");
        cJSON_AddItemToArray(blocks, b);
    }
    const bool has_text = cJSON_IsString(content) && *content->valuestring;
    if (has_text || (!blocks->child && !cJSON_GetArraySize(calls))) { /* never an empty content list */
        cJSON *b = cJSON_CreateObject();
        cJSON_AddStringToObject(b, "type", "text");
        cJSON_AddStringToObject(b, "text", has_text ? content->valuestring : "");
        cJSON_AddItemToArray(blocks, b);
    }
    for (const cJSON *c = calls ? calls->child : NULL; c; c = c->next) cJSON_AddItemToArray(blocks, tool_block(c));
    cJSON_AddStringToObject(o, "model", cJSON_IsString(model) ? model->valuestring : s->model_name);
    add_stop(o, t, cJSON_IsString(finish) ? finish->valuestring : NULL);
    add_usage(o, t, true);
    cJSON_Delete(oai);
    return print_free(o);
}

/* ---- the stream ------------------------------------------------------------------------------------ */

enum { BLOCK_NONE = 0, BLOCK_THINKING, BLOCK_TEXT, BLOCK_TOOL };

struct srv_anth_stream {
    sbuf oai;          /* the task's OpenAI chunks not converted yet */
    bool started;      /* message_start went out */
    bool ended;        /* message_stop (or an error) went out */
    int n_blocks;      /* blocks opened: the next one's index */
    int open;          /* the open block's kind (BLOCK_*) */
    int tool_index;    /* the open tool_use block's index among the OpenAI tool calls */
};

srv_anth_stream *srv_anth_stream_new(void) { return calloc(1, sizeof(srv_anth_stream)); }

void srv_anth_stream_free(srv_anth_stream *st)
{
    if (!st) return;
    sbuf_free(&st->oai);
    free(st);
}

sbuf *srv_anth_stream_input(srv_anth_stream *st) { return &st->oai; }

static void emit(sbuf *out, cJSON *o) { srv_sse_event(out, o); }

void srv_sse_event(sbuf *out, cJSON *o)
{
    const cJSON *type = get(o, "type");
    char *j = cJSON_PrintUnformatted(o);
    if (!j || !cJSON_IsString(type)) {
        out->oom = true;
    } else {
        sbuf_printf(out, "event: %s\n", type->valuestring);
        sbuf_adds(out, "data: ");
        sbuf_adds(out, j);
        sbuf_adds(out, "\n\n");
    }
    free(j);
    cJSON_Delete(o);
}

static cJSON *event(const char *type, int index)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "type", type);
    if (index >= 0) cJSON_AddNumberToObject(o, "index", index);
    return o;
}

static void close_block(srv_anth_stream *st, sbuf *out)
{
    if (st->open == BLOCK_NONE) return;
    const int index = st->n_blocks - 1;
    if (st->open == BLOCK_THINKING) { /* Anthropic's clients expect a signature before the end */
        cJSON *o = event("content_block_delta", index);
        cJSON *d = cJSON_AddObjectToObject(o, "delta");
        cJSON_AddStringToObject(d, "type", "signature_delta");
        cJSON_AddStringToObject(d, "signature", "");
        emit(out, o);
    }
    emit(out, event("content_block_stop", index));
    st->open = BLOCK_NONE;
}

/* Open a block of kind k (closing the open one); block is its content_block (consumed). */
static void open_block(srv_anth_stream *st, int k, cJSON *block, sbuf *out)
{
    close_block(st, out);
    cJSON *o = event("content_block_start", st->n_blocks++);
    cJSON_AddItemToObject(o, "content_block", block);
    emit(out, o);
    st->open = k;
}

static cJSON *typed(const char *type, const char *key, const char *value)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "type", type);
    if (key) cJSON_AddStringToObject(o, key, value);
    return o;
}

/* A delta of the open block: {"type": type, key: text}. */
static void block_delta(srv_anth_stream *st, const char *type, const char *key, const char *text, sbuf *out)
{
    cJSON *o = event("content_block_delta", st->n_blocks - 1);
    cJSON_AddItemToObject(o, "delta", typed(type, key, text));
    emit(out, o);
}

static void message_start(const srv_server *s, srv_anth_stream *st, srv_task *t, const char *model, sbuf *out)
{
    cJSON *o = event("message_start", -1);
    cJSON *m = cJSON_AddObjectToObject(o, "message");
    char id[64];
    message_id(t, id, sizeof id);
    cJSON_AddStringToObject(m, "id", id);
    cJSON_AddStringToObject(m, "type", "message");
    cJSON_AddStringToObject(m, "role", "assistant");
    cJSON_AddArrayToObject(m, "content");
    cJSON_AddStringToObject(m, "model", model ? model : t->req.model ? t->req.model : s->model_name);
    cJSON_AddNullToObject(m, "stop_reason");
    cJSON_AddNullToObject(m, "stop_sequence");
    add_usage(m, t, false);
    emit(out, o);
    st->started = true;
}

/* The tool_calls entries of one OpenAI delta: a head (with an id) opens a tool_use block, the
 * arguments that follow are its input_json_delta. */
static void tool_deltas(srv_anth_stream *st, const cJSON *calls, sbuf *out)
{
    for (const cJSON *c = calls->child; c; c = c->next) {
        const cJSON *idx = get(c, "index"), *id = get(c, "id"), *fn = get(c, "function");
        const cJSON *name = fn ? get(fn, "name") : NULL, *args = fn ? get(fn, "arguments") : NULL;
        const int index = cJSON_IsNumber(idx) ? idx->valueint : 0;
        if (cJSON_IsString(id) || st->open != BLOCK_TOOL || st->tool_index != index) {
            cJSON *b = typed("tool_use", "id", cJSON_IsString(id) ? id->valuestring : "");
            cJSON_AddStringToObject(b, "name", cJSON_IsString(name) ? name->valuestring : "");
            cJSON_AddObjectToObject(b, "input");
            open_block(st, BLOCK_TOOL, b, out);
            st->tool_index = index;
        }
        if (cJSON_IsString(args) && *args->valuestring) block_delta(st, "input_json_delta", "partial_json", args->valuestring, out);
    }
}

/* One OpenAI chunk (parsed) -> events. */
static void chunk(const srv_server *s, void *stream, srv_task *t, const cJSON *c, sbuf *out)
{
    srv_anth_stream *st = stream;
    const cJSON *err = get(c, "error");
    if (err) {
        const cJSON *code = get(err, "code"), *msg = get(err, "message");
        srv_error e = {0};
        srv_errorf(&e, cJSON_IsNumber(code) ? code->valueint : 500, "%s", cJSON_IsString(msg) ? msg->valuestring : "error");
        emit(out, error_obj(&e));
        st->ended = true;
        return;
    }
    const cJSON *choice = cJSON_GetArrayItem(get(c, "choices"), 0);
    if (!choice) return; /* a usage chunk */
    if (!st->started) {
        const cJSON *model = get(c, "model");
        message_start(s, st, t, cJSON_IsString(model) ? model->valuestring : NULL, out);
    }
    const cJSON *d = get(choice, "delta"), *finish = get(choice, "finish_reason");
    const cJSON *r = d ? get(d, "reasoning_content") : NULL, *text = d ? get(d, "content") : NULL, *calls = d ? get(d, "tool_calls") : NULL;
    if (cJSON_IsString(r) && *r->valuestring) {
        if (st->open != BLOCK_THINKING) open_block(st, BLOCK_THINKING, typed("thinking", "thinking", ""), out);
        block_delta(st, "thinking_delta", "thinking", r->valuestring, out);
    }
    if (cJSON_IsString(text) && *text->valuestring) {
        if (st->open != BLOCK_TEXT) open_block(st, BLOCK_TEXT, typed("text", "text", ""), out);
        block_delta(st, "text_delta", "text", text->valuestring, out);
    }
    if (cJSON_IsArray(calls)) tool_deltas(st, calls, out);
    if (!cJSON_IsString(finish)) return;
    if (!st->n_blocks) open_block(st, BLOCK_TEXT, typed("text", "text", ""), out); /* as the whole message: never no block */
    close_block(st, out);
    cJSON *o = event("message_delta", -1);
    add_stop(cJSON_AddObjectToObject(o, "delta"), t, finish->valuestring);
    int32_t cached, decoded;
    counts(t, &cached, &decoded);
    cJSON_AddNumberToObject(cJSON_AddObjectToObject(o, "usage"), "output_tokens", decoded);
    emit(out, o);
    emit(out, event("message_stop", -1));
    st->ended = true;
}

/* The chunks "data: JSON\n\n" in in (the server's own chat chunks), parsed, to fn until
 * *ended; in is emptied (a chunk that does not parse: only out of memory fails our JSON). */
void srv_sse_each(sbuf *in, const srv_server *s, void *stream, srv_task *t, srv_chunk_fn fn, const bool *ended, sbuf *out)
{
    const char *p = in->p, *end = p ? p + in->n : NULL;
    while (p && p < end && !*ended) {
        /* (cJSON escapes newlines inside strings, so a blank line ends an event) */
        const char *stop = p;
        while (stop + 1 < end && !(stop[0] == '\n' && stop[1] == '\n')) stop++;
        const char *next = stop + 1 < end ? stop + 2 : end;
        if (end - p > 6 && !memcmp(p, "data: ", 6)) {
            p += 6;
            cJSON *c = stop > p && *p == '{' ? cJSON_ParseWithLength(p, (size_t)(stop - p)) : NULL;
            if (c) fn(s, stream, t, c, out);
            else if (stop > p && *p == '{') out->oom = true;
            cJSON_Delete(c);
        }
        p = next;
    }
    in->n = 0;
    if (in->oom) out->oom = true;
}

void srv_anth_sse(const srv_server *s, srv_anth_stream *st, srv_task *t, sbuf *out)
{
    srv_sse_each(&st->oai, s, st, t, chunk, &st->ended, out);
    st->oai.n = 0;
}

/* ---- /v1/messages/count_tokens ------------------------------------------------------------------------ */

int srv_handle_count_tokens(const srv_server *s, const char *body, size_t len, char **out, srv_error *e)
{
    srv_request r;
    int32_t n = 0;
    int rc = srv_parse_completion(s, SRV_ANTH_COUNT, body, len, &r, e);
    if (!rc) {
        n = r.n_prompt;
        srv_request_free(&r);
    } else if (e->type && !strcmp(e->type, "exceed_context_size_error")) {
        n = e->n_prompt_tokens; /* counting is what a client asks before it trims: the count, not the limit */
        rc = 0;
    }
    if (rc) return rc;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "input_tokens", n);
    *out = print_free(o);
    return *out ? 0 : srv_errorf(e, 500, "out of memory");
}
