/*
 * responses.c - OpenAI's Responses API (POST /v1/responses) as a dialect of the chat
 * completions the server already answers.
 *
 * Why an adapter (as anthropic.c is for /v1/messages): everything that makes a chat reply
 * right (the template, tool calling in every model's format with its grammar, the thinking
 * split, the sampler fields) lives behind /v1/chat/completions. So a Responses request is
 * rewritten, as JSON, into the chat-completions request it means (srv_resp_request, called
 * by request.c for SRV_RESP), and the chat reply is rewritten into a `response` object
 * (srv_resp_json_final, from the OpenAI JSON of the finished task) and into the Responses
 * event stream (srv_resp_sse, from the chat chunks of the task's stream). llama-server does
 * the same (it converts /v1/responses to a chat-completions request and formats the result).
 *
 * The request:
 *   instructions -> a system message first; input: a string (one user message) or a list of
 *   items, in order: messages (role user / assistant / system / developer, the last as system;
 *   content a string or input_text / output_text parts) -> chat messages; function_call
 *   items -> tool_calls of an assistant message (consecutive calls share one), their
 *   call_id the call's id; function_call_output -> a tool message (with the called
 *   function's name when an earlier function_call has its call_id: some templates need it); reasoning items -> the
 *   reasoning_content of the assistant message that follows (templates render it back).
 *   Images and files are refused (this server reads text only), and so are
 *   previous_response_id, conversation and item_reference: this server keeps no responses
 *   (stateless, as llama-server), so a client sends the whole conversation in `input`.
 *   tools: the flat function tools {type: "function", name, description, parameters} ->
 *   chat tools (built-in tools such as web_search are refused); tool_choice "auto" / "none" /
 *   "required" / {type: "function", name}; max_output_tokens -> max_tokens; text.format
 *   (text / json_object / json_schema with name, schema, strict) -> response_format;
 *   model, temperature, top_p, top_k, min_p, seed, stream, parallel_tool_calls and
 *   chat_template_kwargs pass through (request.c checks them). store, metadata, user,
 *   reasoning, truncation, include, service_tier and stream_options are accepted and have no
 *   effect here (background: true is refused: nothing would keep the result).
 *
 * The reply: {id "resp_...", object "response", created_at, status "completed", or
 * "incomplete" with incomplete_details {reason "max_output_tokens"} when the token limit
 * ended it, model, output: [a reasoning item when the model thought (its text as content
 * and as summary, as llama-server does), a message item
 * {content: [{type "output_text", text, annotations []}]} when it said something (or called
 * nothing), one function_call item {call_id, name, arguments} per call], usage
 * {input_tokens (cached ones in input_tokens_details), output_tokens, total_tokens}}.
 *
 * The stream: response.created and response.in_progress, then per output item
 * response.output_item.added, its part / deltas / done events (reasoning_text.*,
 * content_part.added + output_text.delta + output_text.done + content_part.done,
 * function_call_arguments.delta + .done) and response.output_item.done, then
 * response.completed (or response.incomplete) with the whole response; every event as
 * `event: TYPE` + `data: JSON` with a sequence_number from 0. A failure mid-stream is an
 * `error` event. Errors otherwise are OpenAI's, as on every other OpenAI path.
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

static bool pass_as(const cJSON *in, const char *name, const char *as, cJSON *out)
{
    const cJSON *v = get(in, name);
    if (!v) return true;
    cJSON *d = cJSON_Duplicate(v, true);
    return d && cJSON_AddItemToObject(out, as, d);
}

static const char *type_of(const cJSON *o)
{
    const cJSON *t = cJSON_IsObject(o) ? get(o, "type") : NULL;
    return cJSON_IsString(t) ? t->valuestring : NULL;
}

static cJSON *add_message(cJSON *msgs, const char *role, const char *content)
{
    cJSON *m = cJSON_CreateObject();
    if (!m || !cJSON_AddItemToArray(msgs, m)) {
        cJSON_Delete(m);
        return NULL;
    }
    if (!cJSON_AddStringToObject(m, "role", role)) return NULL;
    return !content || cJSON_AddStringToObject(m, "content", content) ? m : NULL;
}

/* ---- the request -------------------------------------------------------------------------------- */

/* A message's content (a string or a list of text parts) as one text, appended to out. */
static int content_text(const cJSON *c, const char *where, sbuf *out, srv_error *e)
{
    if (cJSON_IsString(c)) {
        sbuf_adds(out, c->valuestring);
        return 0;
    }
    if (!cJSON_IsArray(c)) return srv_errorf(e, 400, "'%s' must be a string or an array of content parts, got %s", where, c ? srv_jtype(c) : "nothing");
    int i = 0;
    for (const cJSON *p = c->child; p; p = p->next, i++) {
        const char *t = type_of(p);
        if (!t) return srv_errorf(e, 400, "'%s[%d]' must be a content part (an object with a string 'type')", where, i);
        if (!strcmp(t, "input_image") || !strcmp(t, "input_file") || !strcmp(t, "input_audio"))
            return srv_errorf(e, 400, "'%s[%d]': %s is not supported (this server reads text only)", where, i, t);
        if (strcmp(t, "input_text") && strcmp(t, "output_text") && strcmp(t, "text") && strcmp(t, "refusal"))
            return srv_errorf(e, 400, "'%s[%d]' has an unknown part type \"%.32s\" (input_text and output_text are read)", where, i, t);
        const cJSON *text = get(p, strcmp(t, "refusal") ? "text" : "refusal");
        if (!cJSON_IsString(text)) return srv_errorf(e, 400, "'%s[%d].text' must be a string, got %s", where, i, text ? srv_jtype(text) : "nothing");
        sbuf_adds(out, text->valuestring);
    }
    return 0;
}

/* The assistant message that function_call items (and pending reasoning) join: the last
 * message when it is the assistant's and the next item continues it, else a new one. */
static cJSON *assistant_for(cJSON *msgs, bool join)
{
    cJSON *last = cJSON_GetArrayItem(msgs, cJSON_GetArraySize(msgs) - 1);
    const cJSON *role = last ? get(last, "role") : NULL;
    if (join && cJSON_IsString(role) && !strcmp(role->valuestring, "assistant")) return last;
    return add_message(msgs, "assistant", "");
}

static int function_call(const cJSON *it, const char *where, cJSON *msgs, bool join, srv_error *e)
{
    const cJSON *id = get(it, "call_id"), *name = get(it, "name"), *args = get(it, "arguments");
    if (!cJSON_IsString(id)) return srv_errorf(e, 400, "'%s.call_id' must be a string, got %s", where, id ? srv_jtype(id) : "nothing");
    if (!cJSON_IsString(name) || !*name->valuestring)
        return srv_errorf(e, 400, "'%s.name' must be a non-empty string, got %s", where, name ? srv_jtype(name) : "nothing");
    if (args && !cJSON_IsString(args)) return srv_errorf(e, 400, "'%s.arguments' must be a string (JSON text), got %s", where, srv_jtype(args));
    cJSON *m = assistant_for(msgs, join);
    cJSON *calls = m ? cJSON_GetObjectItemCaseSensitive(m, "tool_calls") : NULL;
    if (m && !calls) calls = cJSON_AddArrayToObject(m, "tool_calls");
    cJSON *c = calls ? cJSON_CreateObject() : NULL;
    if (!c || !cJSON_AddItemToArray(calls, c)) {
        cJSON_Delete(c);
        return srv_errorf(e, 500, "out of memory");
    }
    cJSON *fn = cJSON_AddObjectToObject(c, "function");
    const bool ok = cJSON_AddStringToObject(c, "id", id->valuestring) && cJSON_AddStringToObject(c, "type", "function") && fn &&
                    cJSON_AddStringToObject(fn, "name", name->valuestring) &&
                    cJSON_AddStringToObject(fn, "arguments", args ? args->valuestring : "{}");
    return ok ? 0 : srv_errorf(e, 500, "out of memory");
}

/* A reasoning item's text (its content's reasoning_text parts, else its summary's). */
static int reasoning_text(const cJSON *it, const char *where, sbuf *out, srv_error *e)
{
    const cJSON *c = get(it, "content");
    if (!cJSON_GetArraySize(c)) c = get(it, "summary");
    if (!c) return 0;
    if (!cJSON_IsArray(c)) return srv_errorf(e, 400, "'%s.summary' must be an array, got %s", where, srv_jtype(c));
    for (const cJSON *p = c->child; p; p = p->next) {
        const cJSON *text = cJSON_IsObject(p) ? get(p, "text") : NULL;
        if (!cJSON_IsString(text)) return srv_errorf(e, 400, "'%s': a reasoning part must have a string 'text'", where);
        sbuf_adds(out, text->valuestring);
    }
    return 0;
}

/* Pending reasoning text onto assistant message m (after any it has: reasoning, call,
 * reasoning, call is one turn), then none pending. */
static bool take_reasoning(cJSON *m, sbuf *reasoning)
{
    if (!reasoning->n) return true;
    cJSON *old = cJSON_GetObjectItemCaseSensitive(m, "reasoning_content");
    bool ok;
    if (cJSON_IsString(old)) {
        sbuf both = {0};
        sbuf_adds(&both, old->valuestring);
        sbuf_add(&both, reasoning->p, reasoning->n);
        ok = !both.oom && cJSON_ReplaceItemInObjectCaseSensitive(m, "reasoning_content", cJSON_CreateString(both.p));
        sbuf_free(&both);
    } else {
        ok = cJSON_AddStringToObject(m, "reasoning_content", reasoning->p) != NULL;
    }
    reasoning->n = 0;
    return ok;
}

/* One input item -> chat messages. *reasoning: reasoning text waiting for the assistant
 * message that follows; *joins: the previous item left an assistant message that this
 * item's function calls continue. */
/* The name of the function call_id called, from the tool calls before it (NULL: none). */
static const char *called_name(const cJSON *msgs, const char *call_id)
{
    for (const cJSON *m = msgs->child; m; m = m->next)
        for (const cJSON *c = get(m, "tool_calls") ? get(m, "tool_calls")->child : NULL; c; c = c->next)
            if (!strcmp(get(c, "id")->valuestring, call_id)) return get(get(c, "function"), "name")->valuestring;
    return NULL;
}

static int input_item(const cJSON *it, int i, cJSON *msgs, sbuf *reasoning, bool *joins, srv_error *e)
{
    char where[48];
    snprintf(where, sizeof where, "input[%d]", i);
    if (!cJSON_IsObject(it)) return srv_errorf(e, 400, "'%s' must be an object (an input item), got %s", where, srv_jtype(it));
    const char *t = type_of(it);
    const cJSON *role = get(it, "role");
    const bool join = *joins;
    *joins = false;
    if (!t && role) t = "message";
    if (!t) return srv_errorf(e, 400, "'%s' must have a string 'type' (message, function_call, function_call_output) or a 'role'", where);
    if (!strcmp(t, "message")) {
        const char *r = cJSON_IsString(role) ? role->valuestring : "";
        if (strcmp(r, "user") && strcmp(r, "assistant") && strcmp(r, "system") && strcmp(r, "developer"))
            return srv_errorf(e, 400, "'%s.role' must be \"user\", \"assistant\", \"system\" or \"developer\"", where);
        char w[64];
        snprintf(w, sizeof w, "%s.content", where);
        sbuf text = {0};
        int rc = content_text(get(it, "content"), w, &text, e);
        cJSON *m = rc ? NULL : add_message(msgs, strcmp(r, "developer") ? r : "system", text.p ? text.p : "");
        if (!rc && (!m || text.oom)) rc = srv_errorf(e, 500, "out of memory");
        sbuf_free(&text);
        if (!rc && !strcmp(r, "assistant")) {
            *joins = true;
            if (!take_reasoning(m, reasoning)) rc = srv_errorf(e, 500, "out of memory");
        }
        return rc;
    }
    if (!strcmp(t, "function_call")) {
        int rc = function_call(it, where, msgs, join, e);
        if (!rc && !take_reasoning(cJSON_GetArrayItem(msgs, cJSON_GetArraySize(msgs) - 1), reasoning)) rc = srv_errorf(e, 500, "out of memory");
        *joins = true;
        return rc;
    }
    if (!strcmp(t, "function_call_output")) {
        const cJSON *id = get(it, "call_id");
        if (!cJSON_IsString(id)) return srv_errorf(e, 400, "'%s.call_id' must be a string, got %s", where, id ? srv_jtype(id) : "nothing");
        char w[64];
        snprintf(w, sizeof w, "%s.output", where);
        sbuf text = {0};
        int rc = content_text(get(it, "output"), w, &text, e);
        cJSON *m = rc ? NULL : add_message(msgs, "tool", text.p ? text.p : "");
        /* the function's name too: templates such as vLLM's Hermes one require it on a tool message */
        const char *name = rc ? NULL : called_name(msgs, id->valuestring);
        if (!rc && (!m || text.oom || !cJSON_AddStringToObject(m, "tool_call_id", id->valuestring) ||
                    (name && !cJSON_AddStringToObject(m, "name", name))))
            rc = srv_errorf(e, 500, "out of memory");
        sbuf_free(&text);
        return rc;
    }
    if (!strcmp(t, "reasoning")) {
        *joins = join;
        return reasoning_text(it, where, reasoning, e);
    }
    if (!strcmp(t, "item_reference"))
        return srv_errorf(e, 400, "'%s': item_reference is not supported: this server is stateless and keeps no items; send the items themselves", where);
    if (!strcmp(t, "input_image") || !strcmp(t, "input_file"))
        return srv_errorf(e, 400, "'%s': %s is not supported (this server reads text only)", where, t);
    return srv_errorf(e, 400, "'%s' has an unsupported item type \"%.32s\" (message, function_call, function_call_output and reasoning are read)", where, t);
}

static int convert_input(const cJSON *in, cJSON *out, srv_error *e)
{
    cJSON *msgs = cJSON_AddArrayToObject(out, "messages");
    if (!msgs) return srv_errorf(e, 500, "out of memory");
    const cJSON *ins = get(in, "instructions");
    if (ins && !cJSON_IsString(ins)) return srv_errorf(e, 400, "'instructions' must be a string, got %s", srv_jtype(ins));
    if (ins && !add_message(msgs, "system", ins->valuestring)) return srv_errorf(e, 500, "out of memory");
    const cJSON *input = get(in, "input");
    if (!input) return srv_errorf(e, 400, "'input' is required (a string, or an array of input items)");
    if (cJSON_IsString(input)) return add_message(msgs, "user", input->valuestring) ? 0 : srv_errorf(e, 500, "out of memory");
    if (!cJSON_IsArray(input)) return srv_errorf(e, 400, "'input' must be a string or an array of input items, got %s", srv_jtype(input));
    if (cJSON_GetArraySize(input) > SRV_MAX_MESSAGES)
        return srv_errorf(e, 400, "'input' has %d items, more than %d", cJSON_GetArraySize(input), SRV_MAX_MESSAGES);
    sbuf reasoning = {0};
    bool joins = false;
    int rc = 0, i = 0;
    for (const cJSON *it = input->child; !rc && it; it = it->next, i++) rc = input_item(it, i, msgs, &reasoning, &joins, e);
    if (!rc && reasoning.oom) rc = srv_errorf(e, 500, "out of memory");
    sbuf_free(&reasoning);
    if (!rc && !msgs->child && !add_message(msgs, "user", "")) rc = srv_errorf(e, 500, "out of memory");
    return rc;
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
            const char *type = type_of(t);
            if (!type || strcmp(type, "function"))
                return srv_errorf(e, 400, "'tools[%d]' must be a function tool ({type: \"function\", name, parameters}); built-in tools (%.32s) are not supported",
                                  i, type ? type : "no type");
            const cJSON *name = get(t, "name"), *desc = get(t, "description"), *params = get(t, "parameters"), *strict = get(t, "strict");
            if (!cJSON_IsString(name) || !*name->valuestring)
                return srv_errorf(e, 400, "'tools[%d].name' must be a non-empty string, got %s", i, name ? srv_jtype(name) : "nothing");
            if (desc && !cJSON_IsString(desc)) return srv_errorf(e, 400, "'tools[%d].description' must be a string, got %s", i, srv_jtype(desc));
            if (params && !cJSON_IsObject(params))
                return srv_errorf(e, 400, "'tools[%d].parameters' must be an object (a JSON schema), got %s", i, srv_jtype(params));
            if (strict && !cJSON_IsBool(strict)) return srv_errorf(e, 400, "'tools[%d].strict' must be a boolean, got %s", i, srv_jtype(strict));
            if (!srv_chat_tool_add(a, name->valuestring, desc ? desc->valuestring : NULL, params)) return srv_errorf(e, 500, "out of memory");
        }
    }
    const cJSON *tc = get(in, "tool_choice");
    if (!tc) return 0;
    if (cJSON_IsString(tc)) {
        if (strcmp(tc->valuestring, "auto") && strcmp(tc->valuestring, "none") && strcmp(tc->valuestring, "required"))
            return srv_errorf(e, 400, "'tool_choice' must be \"auto\", \"none\", \"required\" or {type: \"function\", name}, got \"%.32s\"", tc->valuestring);
        return pass_as(in, "tool_choice", "tool_choice", out) ? 0 : srv_errorf(e, 500, "out of memory");
    }
    const char *t = type_of(tc);
    const cJSON *name = cJSON_IsObject(tc) ? get(tc, "name") : NULL;
    if (!t || strcmp(t, "function") || !cJSON_IsString(name))
        return srv_errorf(e, 400, "'tool_choice' must be \"auto\", \"none\", \"required\" or {type: \"function\", name: string}");
    cJSON *o = cJSON_AddObjectToObject(out, "tool_choice");
    cJSON *fn = o ? cJSON_AddObjectToObject(o, "function") : NULL;
    return fn && cJSON_AddStringToObject(o, "type", "function") && cJSON_AddStringToObject(fn, "name", name->valuestring)
               ? 0 : srv_errorf(e, 500, "out of memory");
}

/* text.format -> response_format. */
static int convert_format(const cJSON *in, cJSON *out, srv_error *e)
{
    const cJSON *text = get(in, "text");
    if (!text) return 0;
    if (!cJSON_IsObject(text)) return srv_errorf(e, 400, "'text' must be an object, got %s", srv_jtype(text));
    const cJSON *f = get(text, "format");
    if (!f) return 0;
    const char *t = type_of(f);
    if (!t) return srv_errorf(e, 400, "'text.format' must be an object with a string 'type'");
    if (!strcmp(t, "text")) return 0;
    cJSON *rf = cJSON_AddObjectToObject(out, "response_format");
    if (!rf || !cJSON_AddStringToObject(rf, "type", t)) return srv_errorf(e, 500, "out of memory");
    if (!strcmp(t, "json_object")) return 0;
    if (strcmp(t, "json_schema")) return srv_errorf(e, 400, "'text.format.type' must be \"text\", \"json_object\" or \"json_schema\", got \"%.32s\"", t);
    cJSON *js = cJSON_AddObjectToObject(rf, "json_schema");
    if (!js || !pass_as(f, "name", "name", js) || !pass_as(f, "schema", "schema", js) || !pass_as(f, "strict", "strict", js))
        return srv_errorf(e, 500, "out of memory");
    return 0;
}

static int convert_params(const cJSON *in, cJSON *out, srv_error *e)
{
    if (get(in, "previous_response_id"))
        return srv_errorf(e, 400, "'previous_response_id' is not supported: this server is stateless and keeps no responses; "
                                  "send the whole conversation in 'input'");
    if (get(in, "conversation"))
        return srv_errorf(e, 400, "'conversation' is not supported: this server is stateless; send the whole conversation in 'input'");
    if (cJSON_IsTrue(get(in, "background")))
        return srv_errorf(e, 400, "'background' is not supported: this server keeps no responses to poll");
    static const char *const same[] = {"model", "temperature", "top_p", "top_k", "min_p", "seed", "stream",
                                       "parallel_tool_calls", "chat_template_kwargs"};
    for (size_t i = 0; i < sizeof same / sizeof *same; i++)
        if (!pass_as(in, same[i], same[i], out)) return srv_errorf(e, 500, "out of memory");
    const cJSON *mo = get(in, "max_output_tokens"); /* (checked here: request.c would name it max_tokens) */
    if (mo && (!cJSON_IsNumber(mo) || mo->valuedouble < 0 || mo->valuedouble > 2147483647.0 || mo->valuedouble != (double)(long)mo->valuedouble))
        return srv_errorf(e, 400, "'max_output_tokens' must be a non-negative integer, got %s", srv_jtype(mo));
    return pass_as(in, "max_output_tokens", "max_tokens", out) ? 0 : srv_errorf(e, 500, "out of memory");
}

cJSON *srv_resp_request(const cJSON *in, srv_error *e)
{
    cJSON *out = cJSON_CreateObject();
    if (!out) {
        srv_errorf(e, 500, "out of memory");
        return NULL;
    }
    int rc = convert_params(in, out, e);
    if (!rc) rc = convert_input(in, out, e);
    if (!rc) rc = convert_tools(in, out, e);
    if (!rc) rc = convert_format(in, out, e);
    if (rc) {
        cJSON_Delete(out);
        return NULL;
    }
    return out;
}

/* ---- the reply ------------------------------------------------------------------------------------- */

/* prefix, the random part of the task's chat id ("chatcmpl-XXXX" -> "resp_XXXX") and the
 * item's output index n (n < 0: none, the response's own id). */
static void item_id(const srv_task *t, const char *prefix, int n, char *out, size_t cap)
{
    const char *dash = strchr(t->oai_id, '-');
    if (n >= 0) snprintf(out, cap, "%s_%s_%d", prefix, dash ? dash + 1 : t->oai_id, n);
    else snprintf(out, cap, "%s_%s", prefix, dash ? dash + 1 : t->oai_id);
}

static void add_usage(cJSON *o, srv_task *t)
{
    pthread_mutex_lock(&t->mu);
    int32_t cached = t->n_cached, decoded = t->n_decoded;
    pthread_mutex_unlock(&t->mu);
    if (cached > t->req.n_prompt) cached = t->req.n_prompt;
    cJSON *u = cJSON_AddObjectToObject(o, "usage");
    cJSON_AddNumberToObject(u, "input_tokens", t->req.n_prompt);
    cJSON_AddNumberToObject(cJSON_AddObjectToObject(u, "input_tokens_details"), "cached_tokens", cached);
    cJSON_AddNumberToObject(u, "output_tokens", decoded);
    cJSON_AddNumberToObject(cJSON_AddObjectToObject(u, "output_tokens_details"), "reasoning_tokens", 0);
    cJSON_AddNumberToObject(u, "total_tokens", t->req.n_prompt + decoded);
}

/* The response object; output is consumed; finish NULL: still in progress (no usage). */
static cJSON *response_obj(const srv_server *s, srv_task *t, const char *model, const char *finish, cJSON *output)
{
    cJSON *o = cJSON_CreateObject();
    char id[64];
    item_id(t, "resp", -1, id, sizeof id);
    cJSON_AddStringToObject(o, "id", id);
    cJSON_AddStringToObject(o, "object", "response");
    cJSON_AddNumberToObject(o, "created_at", (double)t->created);
    const bool length = finish && !strcmp(finish, "length");
    cJSON_AddStringToObject(o, "status", !finish ? "in_progress" : length ? "incomplete" : "completed");
    cJSON_AddNullToObject(o, "error");
    if (length) cJSON_AddStringToObject(cJSON_AddObjectToObject(o, "incomplete_details"), "reason", "max_output_tokens");
    else cJSON_AddNullToObject(o, "incomplete_details");
    cJSON_AddStringToObject(o, "model", model ? model : t->req.model ? t->req.model : s->model_name);
    cJSON_AddItemToObject(o, "output", output ? output : cJSON_CreateArray());
    if (finish) add_usage(o, t);
    else cJSON_AddNullToObject(o, "usage");
    return o;
}

static cJSON *reasoning_item(const char *id, const char *text, bool done)
{
    cJSON *it = cJSON_CreateObject();
    cJSON_AddStringToObject(it, "id", id);
    cJSON_AddStringToObject(it, "type", "reasoning");
    /* the text both as content and as summary: OpenAI defines both, and some clients
     * (@ai-sdk/openai) keep only the summary when they send the conversation back */
    cJSON *sum = cJSON_AddArrayToObject(it, "summary"), *c = cJSON_AddArrayToObject(it, "content");
    if (text) {
        cJSON *p = cJSON_CreateObject();
        cJSON_AddStringToObject(p, "type", "reasoning_text");
        cJSON_AddStringToObject(p, "text", text);
        cJSON_AddItemToArray(c, p);
        p = cJSON_CreateObject();
        cJSON_AddStringToObject(p, "type", "summary_text");
        cJSON_AddStringToObject(p, "text", text);
        cJSON_AddItemToArray(sum, p);
    }
    cJSON_AddStringToObject(it, "status", done ? "completed" : "in_progress");
    return it;
}

static cJSON *text_part(const char *text)
{
    cJSON *p = cJSON_CreateObject();
    cJSON_AddStringToObject(p, "type", "output_text");
    cJSON_AddStringToObject(p, "text", text);
    cJSON_AddArrayToObject(p, "annotations");
    return p;
}

/* The message item (text NULL: just opened, no part yet). */
static cJSON *message_item(const char *id, const char *text, bool done)
{
    cJSON *it = cJSON_CreateObject();
    cJSON_AddStringToObject(it, "id", id);
    cJSON_AddStringToObject(it, "type", "message");
    cJSON_AddStringToObject(it, "status", done ? "completed" : "in_progress");
    cJSON_AddStringToObject(it, "role", "assistant");
    cJSON *c = cJSON_AddArrayToObject(it, "content");
    if (text) cJSON_AddItemToArray(c, text_part(text));
    return it;
}

static cJSON *call_item(const char *id, const char *call_id, const char *name, const char *args, bool done)
{
    cJSON *it = cJSON_CreateObject();
    cJSON_AddStringToObject(it, "id", id);
    cJSON_AddStringToObject(it, "type", "function_call");
    cJSON_AddStringToObject(it, "status", done ? "completed" : "in_progress");
    cJSON_AddStringToObject(it, "call_id", call_id);
    cJSON_AddStringToObject(it, "name", name);
    cJSON_AddStringToObject(it, "arguments", args);
    return it;
}

static const char *str_or(const cJSON *v, const char *def) { return cJSON_IsString(v) ? v->valuestring : def; }

char *srv_resp_json_final(const srv_server *s, srv_task *t)
{
    const cJSON *choice, *msg;
    cJSON *oai = srv_json_final_parsed(s, t, &choice, &msg);
    if (!oai) return NULL; /* out of memory: http.c answers 500 */
    const cJSON *reasoning = get(msg, "reasoning_content"), *content = get(msg, "content"), *calls = get(msg, "tool_calls");
    cJSON *output = cJSON_CreateArray();
    char id[96];
    if (cJSON_IsString(reasoning) && *reasoning->valuestring) {
        item_id(t, "rs", cJSON_GetArraySize(output), id, sizeof id);
        cJSON_AddItemToArray(output, reasoning_item(id, reasoning->valuestring, true));
    }
    const bool has_text = cJSON_IsString(content) && *content->valuestring;
    if (has_text || !cJSON_GetArraySize(calls)) { /* a message item, even empty, when nothing was called */
        item_id(t, "msg", cJSON_GetArraySize(output), id, sizeof id);
        cJSON_AddItemToArray(output, message_item(id, has_text ? content->valuestring : "", true));
    }
    for (const cJSON *c = calls ? calls->child : NULL; c; c = c->next) {
        const cJSON *fn = get(c, "function");
        item_id(t, "fc", cJSON_GetArraySize(output), id, sizeof id);
        cJSON_AddItemToArray(output, call_item(id, str_or(get(c, "id"), ""), str_or(fn ? get(fn, "name") : NULL, ""),
                                               str_or(fn ? get(fn, "arguments") : NULL, "{}"), true));
    }
    cJSON *o = response_obj(s, t, str_or(get(oai, "model"), NULL), str_or(get(choice, "finish_reason"), "stop"), output);
    cJSON_Delete(oai);
    char *j = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return j;
}

/* ---- the stream ------------------------------------------------------------------------------------ */

enum { ITEM_NONE = 0, ITEM_REASONING, ITEM_MESSAGE, ITEM_CALL };

struct srv_resp_stream {
    sbuf oai;          /* the task's OpenAI chunks not converted yet */
    bool started;      /* response.created went out */
    bool ended;        /* response.completed (or an error) went out */
    int seq;           /* the next event's sequence_number */
    cJSON *items;      /* the output items closed so far (for the final response) */
    int open;          /* the open item's kind (ITEM_*) */
    char id[96];       /* the open item's id */
    char call_id[96], name[256]; /* the open function call's (tool names are at most 64 bytes in OpenAI's API) */
    int tool_index;    /* the open function call's index among the chat tool calls */
    int n_calls;
    sbuf text;         /* the open item's text (reasoning, message) or arguments */
    char *model;
};

srv_resp_stream *srv_resp_stream_new(void)
{
    srv_resp_stream *st = calloc(1, sizeof *st);
    if (st && !(st->items = cJSON_CreateArray())) {
        free(st);
        st = NULL;
    }
    return st;
}

void srv_resp_stream_free(srv_resp_stream *st)
{
    if (!st) return;
    sbuf_free(&st->oai);
    sbuf_free(&st->text);
    cJSON_Delete(st->items);
    free(st->model);
    free(st);
}

sbuf *srv_resp_stream_input(srv_resp_stream *st) { return &st->oai; }

/* One event: `event: TYPE` and its data, with the next sequence_number (o is consumed). */
static void emit(srv_resp_stream *st, sbuf *out, cJSON *o)
{
    cJSON_AddNumberToObject(o, "sequence_number", st->seq++);
    srv_sse_event(out, o);
}

static cJSON *event(const char *type, int output_index, const char *item_id_, int content_index)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "type", type);
    if (item_id_) cJSON_AddStringToObject(o, "item_id", item_id_);
    if (output_index >= 0) cJSON_AddNumberToObject(o, "output_index", output_index);
    if (content_index >= 0) cJSON_AddNumberToObject(o, "content_index", content_index);
    return o;
}

static void item_event(srv_resp_stream *st, const char *type, cJSON *item, sbuf *out)
{
    cJSON *o = event(type, cJSON_GetArraySize(st->items), NULL, -1);
    cJSON_AddItemToObject(o, "item", item);
    emit(st, out, o);
}

static void close_item(srv_resp_stream *st, sbuf *out)
{
    if (st->open == ITEM_NONE) return;
    const int at = cJSON_GetArraySize(st->items);
    const char *text = st->text.p ? st->text.p : "";
    cJSON *item = NULL;
    if (st->open == ITEM_REASONING) {
        cJSON *o = event("response.reasoning_text.done", at, st->id, 0);
        cJSON_AddStringToObject(o, "text", text);
        emit(st, out, o);
        item = reasoning_item(st->id, text, true);
    } else if (st->open == ITEM_MESSAGE) {
        cJSON *o = event("response.output_text.done", at, st->id, 0);
        cJSON_AddStringToObject(o, "text", text);
        cJSON_AddArrayToObject(o, "logprobs");
        emit(st, out, o);
        o = event("response.content_part.done", at, st->id, 0);
        cJSON_AddItemToObject(o, "part", text_part(text));
        emit(st, out, o);
        item = message_item(st->id, text, true);
    } else {
        cJSON *o = event("response.function_call_arguments.done", at, st->id, -1);
        cJSON_AddStringToObject(o, "name", st->name);
        cJSON_AddStringToObject(o, "arguments", text);
        emit(st, out, o);
        item = call_item(st->id, st->call_id, st->name, text, true);
    }
    item_event(st, "response.output_item.done", cJSON_Duplicate(item, true), out);
    cJSON_AddItemToArray(st->items, item);
    st->open = ITEM_NONE;
    st->text.n = 0;
}

/* Open an item of kind k (closing the open one): its added event (and, for a message, its
 * content part's). */
static void open_item(srv_resp_stream *st, srv_task *t, int k, sbuf *out)
{
    close_item(st, out);
    const int at = cJSON_GetArraySize(st->items);
    st->open = k;
    st->text.n = 0;
    if (st->text.p) st->text.p[0] = '\0';
    if (k == ITEM_REASONING) {
        item_id(t, "rs", at, st->id, sizeof st->id);
        item_event(st, "response.output_item.added", reasoning_item(st->id, NULL, false), out);
    } else if (k == ITEM_MESSAGE) {
        item_id(t, "msg", at, st->id, sizeof st->id);
        item_event(st, "response.output_item.added", message_item(st->id, NULL, false), out);
        cJSON *o = event("response.content_part.added", at, st->id, 0);
        cJSON_AddItemToObject(o, "part", text_part(""));
        emit(st, out, o);
    } else {
        item_id(t, "fc", at, st->id, sizeof st->id);
        item_event(st, "response.output_item.added", call_item(st->id, st->call_id, st->name, "", false), out);
    }
}

static void delta(srv_resp_stream *st, const char *type, int content_index, const char *text, sbuf *out)
{
    cJSON *o = event(type, cJSON_GetArraySize(st->items), st->id, content_index);
    cJSON_AddStringToObject(o, "delta", text);
    if (st->open == ITEM_MESSAGE) cJSON_AddArrayToObject(o, "logprobs");
    emit(st, out, o);
    sbuf_adds(&st->text, text);
    if (st->text.oom) out->oom = true;
}

static void lifecycle(const srv_server *s, srv_resp_stream *st, srv_task *t, const char *type, const char *finish, sbuf *out)
{
    cJSON *o = event(type, -1, NULL, -1);
    cJSON_AddItemToObject(o, "response", response_obj(s, t, st->model, finish, finish ? cJSON_Duplicate(st->items, true) : NULL));
    emit(st, out, o);
}

static void tool_deltas(srv_resp_stream *st, srv_task *t, const cJSON *calls, sbuf *out)
{
    for (const cJSON *c = calls->child; c; c = c->next) {
        const cJSON *idx = get(c, "index"), *id = get(c, "id"), *fn = get(c, "function");
        const cJSON *name = fn ? get(fn, "name") : NULL, *args = fn ? get(fn, "arguments") : NULL;
        const int index = cJSON_IsNumber(idx) ? idx->valueint : 0;
        if (cJSON_IsString(id) || st->open != ITEM_CALL || st->tool_index != index) {
            close_item(st, out); /* (before the new call's id and name replace the open one's) */
            snprintf(st->call_id, sizeof st->call_id, "%s", str_or(id, ""));
            snprintf(st->name, sizeof st->name, "%s", str_or(name, ""));
            open_item(st, t, ITEM_CALL, out);
            st->tool_index = index;
            st->n_calls++;
        }
        if (cJSON_IsString(args) && *args->valuestring) delta(st, "response.function_call_arguments.delta", -1, args->valuestring, out);
    }
}

/* One chat chunk (parsed) -> events. */
static void chunk(const srv_server *s, void *stream, srv_task *t, const cJSON *c, sbuf *out)
{
    srv_resp_stream *st = stream;
    const cJSON *err = get(c, "error");
    if (err) {
        const cJSON *code = get(err, "code"), *msg = get(err, "message"), *type = get(err, "type");
        cJSON *o = event("error", -1, NULL, -1);
        cJSON_AddStringToObject(o, "code", str_or(type, "server_error"));
        cJSON_AddStringToObject(o, "message", str_or(msg, "error"));
        cJSON_AddNullToObject(o, "param");
        if (cJSON_IsNumber(code)) cJSON_AddNumberToObject(o, "status", code->valuedouble);
        emit(st, out, o);
        st->ended = true;
        return;
    }
    const cJSON *choice = cJSON_GetArrayItem(get(c, "choices"), 0);
    if (!choice) return; /* a usage chunk */
    if (!st->started) {
        const char *model = str_or(get(c, "model"), NULL);
        st->model = model ? strdup(model) : NULL;
        lifecycle(s, st, t, "response.created", NULL, out);
        lifecycle(s, st, t, "response.in_progress", NULL, out);
        st->started = true;
    }
    const cJSON *d = get(choice, "delta"), *finish = get(choice, "finish_reason");
    const cJSON *r = d ? get(d, "reasoning_content") : NULL, *text = d ? get(d, "content") : NULL, *calls = d ? get(d, "tool_calls") : NULL;
    if (cJSON_IsString(r) && *r->valuestring) {
        if (st->open != ITEM_REASONING) open_item(st, t, ITEM_REASONING, out);
        delta(st, "response.reasoning_text.delta", 0, r->valuestring, out);
    }
    if (cJSON_IsString(text) && *text->valuestring) {
        if (st->open != ITEM_MESSAGE) open_item(st, t, ITEM_MESSAGE, out);
        delta(st, "response.output_text.delta", 0, text->valuestring, out);
    }
    if (cJSON_IsArray(calls)) tool_deltas(st, t, calls, out);
    if (!cJSON_IsString(finish)) return;
    bool has_message = st->open == ITEM_MESSAGE;
    for (const cJSON *it = st->items->child; it; it = it->next) has_message |= !strcmp(str_or(get(it, "type"), ""), "message");
    if (!has_message && !st->n_calls) open_item(st, t, ITEM_MESSAGE, out); /* as the whole response: a message when nothing was called */
    close_item(st, out);
    const bool length = !strcmp(finish->valuestring, "length");
    lifecycle(s, st, t, length ? "response.incomplete" : "response.completed", finish->valuestring, out);
    st->ended = true;
}

void srv_resp_sse(const srv_server *s, srv_resp_stream *st, srv_task *t, sbuf *out)
{
    srv_sse_each(&st->oai, s, st, t, chunk, &st->ended, out);
    st->oai.n = 0;
}
