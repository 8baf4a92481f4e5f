/*
 * request.c - completion requests: JSON -> srv_request, with every field checked.
 *
 * The three completion endpoints share one parser. Field names and meanings are
 * llama-server's (tools/server/README.md: temperature, top_k, ..., samplers, logit_bias,
 * grammar, json_schema, n_probs, ...), plus OpenAI's where they differ (max_tokens,
 * logprobs/top_logprobs, response_format, stream_options, messages) and our `trace`.
 *
 * Where llama-server quietly falls back to a default on a wrong type (its json_value
 * helper logs and goes on), sift answers 400 with a message that names the field, its
 * expected type or range, and what it got: a client that misspells a value should find
 * out. JSON null means "not given" (OpenAI clients send nulls for unset fields), and
 * unknown fields are ignored (clients send many). The ranges are in docs/server.md.
 *
 * Everything here runs on the connection's thread, before the request reaches the queue:
 * parsing, tokenizing, the chat template, JSON schema -> GBNF, and building the sampler
 * chain and grammar sampler (srv_build_samplers). A request that fails any step is answered
 * without ever touching a slot.
 */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"

void srv_request_free(srv_request *r)
{
    free(r->bias);
    for (int i = 0; i < r->n_stop; i++) free(r->stop[i]);
    free(r->stop);
    sift_compiled_grammar_free(r->cgrammar);
    free(r->prompt);
    free(r->model);
    free(r->echo_text);
    tc_spec_free(r->tools);
    rs_spec_free(r->rs);
    free(r->gbnf_pending);
    free(r->response_fields);
    memset(r, 0, sizeof *r);
}

/* ---- typed field access ----------------------------------------------------------------------- */

const char *srv_jtype(const cJSON *v)
{
    if (cJSON_IsString(v)) return "a string";
    if (cJSON_IsNumber(v)) return "a number";
    if (cJSON_IsBool(v)) return "a boolean";
    if (cJSON_IsArray(v)) return "an array";
    if (cJSON_IsObject(v)) return "an object";
    if (cJSON_IsNull(v)) return "null";
    return "an invalid value";
}

/* The field, or NULL when absent or null. */
static const cJSON *field(const cJSON *obj, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
    return v && !cJSON_IsNull(v) ? v : NULL;
}

static bool is_int(const cJSON *v) { return cJSON_IsNumber(v) && isfinite(v->valuedouble) && v->valuedouble == floor(v->valuedouble); }

/* 0: absent or set; else 400 with e filled. */
static int get_int(const cJSON *o, const char *name, double lo, double hi, long long *out, srv_error *e)
{
    const cJSON *v = field(o, name);
    if (!v) return 0;
    if (!is_int(v) || v->valuedouble < lo || v->valuedouble > hi) {
        if (cJSON_IsNumber(v))
            return srv_errorf(e, 400, "'%s' must be an integer in [%.0f, %.0f], got %.17g", name, lo, hi, v->valuedouble);
        return srv_errorf(e, 400, "'%s' must be an integer in [%.0f, %.0f], got %s", name, lo, hi, srv_jtype(v));
    }
    *out = (long long)v->valuedouble;
    return 0;
}

static int get_i32(const cJSON *o, const char *name, double lo, double hi, int32_t *out, srv_error *e)
{
    long long x = *out;
    const int r = get_int(o, name, lo, hi, &x, e);
    if (!r) *out = (int32_t)x;
    return r;
}

static int get_bool(const cJSON *o, const char *name, bool *out, srv_error *e)
{
    const cJSON *v = field(o, name);
    if (!v) return 0;
    if (!cJSON_IsBool(v)) return srv_errorf(e, 400, "'%s' must be a boolean, got %s", name, srv_jtype(v));
    *out = cJSON_IsTrue(v);
    return 0;
}

/* A number in [lo, hi]: 0 (absent or set), else 400. */
static int get_unit(const cJSON *o, const char *name, double lo, double hi, float *out, srv_error *e)
{
    const cJSON *v = field(o, name);
    if (!v) return 0;
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo && v->valuedouble <= hi))
        return cJSON_IsNumber(v) ? srv_errorf(e, 400, "'%s' must be a number in [%g, %g], got %.17g", name, lo, hi, v->valuedouble)
                                 : srv_errorf(e, 400, "'%s' must be a number in [%g, %g], got %s", name, lo, hi, srv_jtype(v));
    *out = (float)v->valuedouble;
    return 0;
}

static int get_string(const cJSON *o, const char *name, const char **out, srv_error *e)
{
    const cJSON *v = field(o, name);
    if (!v) return 0;
    if (!cJSON_IsString(v)) return srv_errorf(e, 400, "'%s' must be a string, got %s", name, srv_jtype(v));
    *out = v->valuestring;
    return 0;
}

#define TRY(x)                 \
    do {                       \
        const int r_ = (x);    \
        if (r_) return r_;     \
    } while (0)

/* ---- JSON -------------------------------------------------------------------------------------- */

/* Parse a request body as a JSON object. NULL with a 400 on error. */
static cJSON *parse_object(const char *body, size_t len, srv_error *e)
{
    if (len == 0) {
        srv_errorf(e, 400, "empty request body: expected a JSON object");
        return NULL;
    }
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(body, len, &end, false);
    if (!root) {
        const size_t off = end && end >= body && end <= body + len ? (size_t)(end - body) : 0;
        srv_errorf(e, 400, "invalid JSON at byte offset %zu", off);
        return NULL;
    }
    while (end && end < body + len && (*end == ' ' || *end == '\t' || *end == '\r' || *end == '\n')) end++;
    if (end && end < body + len) {
        srv_errorf(e, 400, "invalid JSON: unexpected data after the value at byte offset %zu", (size_t)(end - body));
        cJSON_Delete(root);
        return NULL;
    }
    if (!cJSON_IsObject(root)) {
        srv_errorf(e, 400, "the request body must be a JSON object, got %s", srv_jtype(root));
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

/* ---- tokens ------------------------------------------------------------------------------------- */

sift_token *srv_tokenize(const srv_server *s, const char *text, size_t len, bool add_special, bool parse_special,
                         int32_t *n_out)
{
    if (len > (size_t)INT32_MAX / 2) return NULL;
    int32_t cap = (int32_t)len + 8;
    sift_token *t = malloc((size_t)cap * sizeof *t);
    if (!t) return NULL;
    int32_t n = sift_tokenize(s->vocab, text, len, t, cap, add_special, parse_special);
    if (n < 0 && n != INT32_MIN) {
        cap = -n;
        sift_token *t2 = realloc(t, (size_t)cap * sizeof *t);
        if (!t2) {
            free(t);
            return NULL;
        }
        t = t2;
        n = sift_tokenize(s->vocab, text, len, t, cap, add_special, parse_special);
    }
    if (n < 0) {
        free(t);
        return NULL;
    }
    *n_out = n;
    return t;
}

typedef struct tokvec {
    sift_token *p;
    int32_t n, cap;
} tokvec;

static bool tv_add(tokvec *v, const sift_token *t, int32_t n)
{
    if (v->n + n > v->cap) {
        int32_t cap = v->cap ? v->cap : 64;
        while (cap < v->n + n) cap *= 2;
        sift_token *p = realloc(v->p, (size_t)cap * sizeof *p);
        if (!p) return false;
        v->p = p;
        v->cap = cap;
    }
    memcpy(v->p + v->n, t, (size_t)n * sizeof *t);
    v->n += n;
    return true;
}

int srv_tokenize_field(const srv_server *s, const char *name, const char *text, size_t len, bool add_special,
                       bool parse_special, sift_token **out, int32_t *n_out, srv_error *e)
{
    if (!utf8_valid(text, len)) return srv_errorf(e, 400, "'%s' is not valid UTF-8", name);
    *n_out = 0;
    *out = srv_tokenize(s, text, len, add_special, parse_special, n_out);
    return *out ? 0 : srv_errorf(e, 500, "'%s': cannot tokenize (out of memory)", name);
}

/* Tokenize a prompt text into v; the field name is for messages. */
static int add_text(const srv_server *s, tokvec *v, const char *name, const char *text, size_t len, bool add_special,
                    srv_error *e)
{
    int32_t n;
    sift_token *t;
    TRY(srv_tokenize_field(s, name, text, len, add_special, true, &t, &n, e));
    const bool ok = tv_add(v, t, n);
    free(t);
    return ok ? 0 : srv_errorf(e, 500, "out of memory");
}

/* One prompt in llama-server's forms: a string, or one sequence of token ids and strings
 * mixed ([12, 34, "text", 56]); a BOS is added when the prompt starts with text. name is
 * the field for messages ("prompt", "prompt[2]", "input"). */
static int parse_one_prompt(const srv_server *s, const cJSON *p, const char *name, tokvec *v, srv_error *e)
{
    if (cJSON_IsObject(p)) { /* llama-server's multimodal form: {"prompt_string": ..., "multimodal_data": [...]} */
        const cJSON *ps = field(p, "prompt_string"), *mm = field(p, "multimodal_data");
        if (mm && !cJSON_IsNull(mm) && !(cJSON_IsArray(mm) && !mm->child))
            return srv_errorf(e, 400, "'%s': multimodal_data given, but this server has no multimodal input, only text", name);
        if (!cJSON_IsString(ps)) return srv_errorf(e, 400, "'%s': an object prompt needs a string 'prompt_string'", name);
        return add_text(s, v, name, ps->valuestring, strlen(ps->valuestring), true, e);
    }
    if (cJSON_IsString(p)) return add_text(s, v, name, p->valuestring, strlen(p->valuestring), true, e);
    if (!cJSON_IsArray(p))
        return srv_errorf(e, 400, "'%s' must be a string, {\"prompt_string\": ...} or an array of token ids and strings, got %s",
                          name, srv_jtype(p));
    if (!p->child) return srv_errorf(e, 400, "'%s' is an empty array", name);
    int i = 0;
    for (const cJSON *x = p->child; x; x = x->next, i++) {
        if (cJSON_IsNumber(x)) {
            if (!is_int(x) || x->valuedouble < 0 || x->valuedouble >= s->n_vocab)
                return srv_errorf(e, 400, "'%s[%d]' must be a token id in [0, %d), got %.17g", name, i, s->n_vocab, x->valuedouble);
            const sift_token t = (sift_token)x->valuedouble;
            if (!tv_add(v, &t, 1)) return srv_errorf(e, 500, "out of memory");
        } else if (cJSON_IsString(x)) {
            char where[80];
            snprintf(where, sizeof where, "%s[%d]", name, i);
            TRY(add_text(s, v, where, x->valuestring, strlen(x->valuestring), i == 0, e));
        } else {
            return srv_errorf(e, 400, "'%s[%d]' must be a token id or a string, got %s", name, i, srv_jtype(x));
        }
    }
    return 0;
}

int srv_prompt_count(const cJSON *p, const char *name, int max, srv_error *e)
{
    if (cJSON_IsString(p) || cJSON_IsObject(p)) return 1;
    if (!cJSON_IsArray(p))
        return -srv_errorf(e, 400, "'%s' must be a string, an array of token ids and strings, or an array of prompts, got %s",
                           name, srv_jtype(p));
    const int n = cJSON_GetArraySize(p);
    if (n == 0) return -srv_errorf(e, 400, "'%s' is an empty array", name);
    bool any_number = false;
    for (const cJSON *x = p->child; x; x = x->next) any_number |= cJSON_IsNumber(x);
    if (any_number) return 1; /* one prompt of ids (and strings) */
    int i = 0;
    for (const cJSON *x = p->child; x; x = x->next, i++)
        if (!cJSON_IsString(x) && !cJSON_IsArray(x) && !cJSON_IsObject(x))
            return -srv_errorf(e, 400, "'%s[%d]' must be a prompt (a string, {\"prompt_string\": ...} or an array of token ids "
                               "and strings), got %s", name, i, srv_jtype(x));
    if (n > max) return -srv_errorf(e, 400, "'%s': at most %d prompts in one request, got %d", name, max, n);
    return n;
}

int srv_prompt_at(const srv_server *s, const cJSON *p, const char *name, int index, sift_token **out, int32_t *n_out,
                  srv_error *e)
{
    *out = NULL;
    *n_out = 0;
    tokvec v = {0};
    int rc;
    bool any_number = false;
    if (cJSON_IsArray(p))
        for (const cJSON *x = p->child; x; x = x->next) any_number |= cJSON_IsNumber(x);
    if (!cJSON_IsArray(p) || any_number) {
        rc = parse_one_prompt(s, p, name, &v, e);
    } else {
        char where[64];
        snprintf(where, sizeof where, "%s[%d]", name, index);
        const cJSON *x = cJSON_GetArrayItem(p, index);
        rc = x ? parse_one_prompt(s, x, where, &v, e) : srv_errorf(e, 500, "'%s': no prompt %d", name, index);
    }
    if (rc) {
        free(v.p);
        return rc;
    }
    *out = v.p;
    *n_out = v.n;
    return 0;
}

/* ---- chat messages --------------------------------------------------------------------------------- */

/* The model's Jinja template: messages are passed as given (objects with a string role;
 * contents, tool calls and the request's tools are the template's to read). */
static int chat_prompt_jinja(const srv_server *s, const cJSON *root, const cJSON *m, bool add_gen, const tc_spec *spec,
                             srv_error *e, sbuf *out)
{
    int i = 0;
    for (const cJSON *x = m->child; x; x = x->next, i++) {
        const cJSON *role = cJSON_IsObject(x) ? field(x, "role") : NULL;
        if (!cJSON_IsObject(x)) return srv_errorf(e, 400, "'messages[%d]' must be an object with a 'role', got %s", i, srv_jtype(x));
        if (!role || !cJSON_IsString(role) || !*role->valuestring)
            return srv_errorf(e, 400, "'messages[%d].role' must be a non-empty string, got %s", i, role ? srv_jtype(role) : "nothing");
        const cJSON *content = field(x, "content"); /* (an object is the template's to read) */
        if (cJSON_IsNumber(content) || cJSON_IsBool(content))
            return srv_errorf(e, 400, "'messages[%d].content' must be a string, an array of content parts or null, got %s", i,
                              srv_jtype(content));
    }
    const cJSON *tools = field(root, "tools");
    if (tools && !cJSON_IsArray(tools) && !cJSON_IsNull(tools))
        return srv_errorf(e, 400, "'tools' must be an array, got %s", srv_jtype(tools));
    const cJSON *kwargs = field(root, "chat_template_kwargs");
    if (kwargs && !cJSON_IsObject(kwargs) && !cJSON_IsNull(kwargs))
        return srv_errorf(e, 400, "'chat_template_kwargs' must be an object of template variables, got %s", srv_jtype(kwargs));
    /* content parts flattened (chat_jinja.c), tool calls' arguments as objects, the generic
     * format's instructions (tool_calls.c), then the system role's fallback */
    cJSON *flat = cJSON_Duplicate(m, true);
    if (!flat) return srv_errorf(e, 500, "out of memory");
    int rc = chat_jinja_flatten(s, flat, e);
    cJSON *msgs = rc ? NULL : tc_template_messages(flat, spec, chat_jinja_object_args(s));
    cJSON_Delete(flat);
    if (rc) return rc;
    if (!msgs || (!s->jinja_system_role && chat_jinja_system_fallback(msgs))) {
        cJSON_Delete(msgs);
        return srv_errorf(e, 500, "out of memory");
    }
    rc = chat_apply_jinja(s, msgs, tools && cJSON_IsArray(tools) ? tools : NULL, cJSON_IsObject(kwargs) ? kwargs : NULL,
                          add_gen, out, e);
    cJSON_Delete(msgs);
    return rc;
}

/* The chat template applied to the n messages m (into out), with the assistant's opening
 * after them when add_gen. */
static int chat_prompt_msgs(const srv_server *s, const cJSON *root, const cJSON *m, int n, bool add_gen, const tc_spec *spec,
                            sbuf *out, srv_error *e)
{
    if (s->jinja) return chat_prompt_jinja(s, root, m, add_gen, spec, e, out);
    chat_msg *msgs = calloc((size_t)(n ? n : 1), sizeof *msgs);
    sbuf *parts = calloc((size_t)(n ? n : 1), sizeof *parts); /* contents given as arrays of text parts */
    int rc = 0, i = 0;
    if (!msgs || !parts) {
        rc = srv_errorf(e, 500, "out of memory");
        goto done;
    }
    for (const cJSON *x = m->child; x; x = x->next, i++) {
        if (!cJSON_IsObject(x)) {
            rc = srv_errorf(e, 400, "'messages[%d]' must be an object with 'role' and 'content', got %s", i, srv_jtype(x));
            goto done;
        }
        const cJSON *role = field(x, "role"), *content = field(x, "content");
        if (!role || !cJSON_IsString(role) || !*role->valuestring) {
            rc = srv_errorf(e, 400, "'messages[%d].role' must be a non-empty string, got %s", i, role ? srv_jtype(role) : "nothing");
            goto done;
        }
        msgs[i].role = role->valuestring;
        if (!content) {
            msgs[i].content = "";
        } else if (cJSON_IsString(content)) {
            msgs[i].content = content->valuestring;
        } else if (cJSON_IsArray(content)) {
            if ((rc = chat_content_text(content, i, &parts[i], e))) goto done;
            msgs[i].content = parts[i].p ? parts[i].p : "";
        } else {
            rc = srv_errorf(e, 400, "'messages[%d].content' must be a string or an array of text parts, got %s", i, srv_jtype(content));
            goto done;
        }
        if (!utf8_valid(msgs[i].content, strlen(msgs[i].content)) || !utf8_valid(msgs[i].role, strlen(msgs[i].role))) {
            rc = srv_errorf(e, 400, "'messages[%d]' is not valid UTF-8", i);
            goto done;
        }
    }
    chat_apply(s->tmpl, msgs, (size_t)n, add_gen, out);
    if (out->oom) rc = srv_errorf(e, 500, "out of memory");
done:
    for (int k = 0; parts && k < n; k++) sbuf_free(&parts[k]);
    free(parts);
    free(msgs);
    return rc;
}

static bool is_role(const cJSON *msg, const char *role)
{
    const cJSON *r = cJSON_IsObject(msg) ? field(msg, "role") : NULL;
    return cJSON_IsString(r) && !strcmp(r->valuestring, role);
}

/* The chat template applied to 'messages' (into out). As llama-server does, a last assistant
 * message is the start of the reply (a prefill): the messages before it are rendered with
 * the assistant's opening, and its text follows as it is. continue_final_message (vLLM's
 * name; llama-server's also takes "content" or "reasoning_content", which part goes on)
 * says the same and excludes add_generation_prompt (default true). On a harmony template
 * the prefill is written as llama.cpp's gpt-oss handler writes it (rs_harmony_prefill): the
 * message's reasoning_content as an open analysis message, and when the content goes on (the
 * default unless the message has reasoning and no content) the final message with the content
 * so far. On a template that thinks in tags, as llama.cpp's handlers write it (rs_think_prefill):
 * the opening tag (the generation prompt's own when it left the thinking open; an empty thinking
 * block it ended with is replaced), the reasoning, and when the content goes on the closing tag
 * and the content. *pre_out gets the continued message's text (the reply's start, for the view:
 * r->rs->pre) and *open_out whether the reasoning goes on. */
static int chat_prompt(const srv_server *s, const cJSON *root, const tc_spec *spec, sbuf *out, sbuf *pre_out, bool *open_out,
                       srv_error *e)
{
    const cJSON *m = field(root, "messages");
    if (!m) return srv_errorf(e, 400, "'messages' is required");
    if (!cJSON_IsArray(m)) return srv_errorf(e, 400, "'messages' must be an array of messages, got %s", srv_jtype(m));
    const int n = cJSON_GetArraySize(m);
    if (n == 0) return srv_errorf(e, 400, "'messages' must not be empty");
    if (n > SRV_MAX_MESSAGES) return srv_errorf(e, 400, "'messages' has %d messages, more than %d", n, SRV_MAX_MESSAGES);
    const cJSON *agp = field(root, "add_generation_prompt"), *cfm = field(root, "continue_final_message");
    if (agp && !cJSON_IsBool(agp)) return srv_errorf(e, 400, "'add_generation_prompt' must be a boolean, got %s", srv_jtype(agp));
    const bool cfm_part = cJSON_IsString(cfm) && (!strcmp(cfm->valuestring, "content") || !strcmp(cfm->valuestring, "reasoning_content"));
    if (cfm && !cJSON_IsBool(cfm) && !cfm_part)
        return srv_errorf(e, 400, "'continue_final_message' must be a boolean, \"content\" or \"reasoning_content\", got %s",
                          cJSON_IsString(cfm) ? "another string" : srv_jtype(cfm));
    if (cJSON_IsTrue(agp) && (cJSON_IsTrue(cfm) || cfm_part))
        return srv_errorf(e, 400, "'continue_final_message' and 'add_generation_prompt' cannot both be true");
    const cJSON *last = cJSON_GetArrayItem(m, n - 1);
    if (!is_role(last, "assistant")) return chat_prompt_msgs(s, root, m, n, !cJSON_IsFalse(agp), spec, out, e);
    if (n >= 2 && is_role(cJSON_GetArrayItem(m, n - 2), "assistant"))
        return srv_errorf(e, 400, "'messages' ends with 2 assistant messages: only the last may be a prefill of the reply");
    const cJSON *content = field(last, "content"), *rc_ = field(last, "reasoning_content");
    if (rc_ && !cJSON_IsString(rc_) && !cJSON_IsNull(rc_))
        return srv_errorf(e, 400, "'messages[%d].reasoning_content' must be a string, got %s", n - 1, srv_jtype(rc_));
    sbuf pre = {0};
    int rc = 0;
    if (cJSON_IsArray(content) && !(rc = chat_content_text(content, n - 1, NULL, e))) /* (checked) */
        for (const cJSON *part = content->child; part; part = part->next) /* a prefill's parts join without a separator */
            sbuf_adds(&pre, cJSON_GetObjectItemCaseSensitive(part, "text")->valuestring);
    else if (cJSON_IsString(content)) sbuf_adds(&pre, content->valuestring);
    else if (content && !cJSON_IsNull(content))
        rc = srv_errorf(e, 400, "'messages[%d].content' must be a string or an array of text parts, got %s", n - 1, srv_jtype(content));
    cJSON *head = rc ? NULL : cJSON_Duplicate(m, true);
    if (!rc && !head) rc = srv_errorf(e, 500, "out of memory");
    if (!rc) {
        cJSON_DeleteItemFromArray(head, n - 1);
        rc = chat_prompt_msgs(s, root, head, n - 1, true, spec, out, e);
    }
    const tc_format tf = s->jinja ? s->tc_fmt : TC_GENERIC;
    rs_spec tags = {0}; /* the template's thinking tags (rs_set_tags) */
    rs_set_tags(&tags, tf);
    /* (Kimi K2 thinks in tags its older template does not write: llama.cpp's handler writes them) */
    const bool thinks = !tags.harmony && s->jinja && s->tmpl_text && (tf == TC_KIMI_K2 || strstr(s->tmpl_text, tags.open ? tags.open : "<think>"));
    const char *reasoning = cJSON_IsString(rc_) ? rc_->valuestring : "";
    /* which part goes on: as asked, else (true or no field) the reasoning when there is only reasoning */
    const bool open = (tags.harmony || thinks) && (cfm_part ? !strcmp(cfm->valuestring, "reasoning_content") : *reasoning && !pre.n);
    size_t at0 = out->n;
    sbuf_add(&pre, "", 1); /* (a string now) */
    if (!rc && !pre.oom && tags.harmony) { /* the continued message, in its channels */
        rs_harmony_prefill(out, reasoning, pre.p, open);
    } else if (!rc && !pre.oom && thinks && out->p) { /* in the template's thinking tags */
        bool opened = false;
        at0 = rs_prompt_think_at(&tags, out->p, out->n, &opened);
        if (!opened) out->n = at0; /* (an empty thinking block the prompt ended with: replaced) */
        rs_think_prefill(out, &tags, opened, reasoning, pre.p, open);
    } else if (!rc && pre.n > 1) {
        sbuf_add(out, pre.p, pre.n - 1);
    }
    if (!rc && pre_out && out->p && !out->oom) sbuf_add(pre_out, out->p + at0, out->n - at0);
    if (open_out) *open_out = open;
    if (!rc && (pre.oom || out->oom || (pre_out && pre_out->oom))) rc = srv_errorf(e, 500, "out of memory");
    cJSON_Delete(head);
    sbuf_free(&pre);
    return rc;
}

static int parse_messages(const srv_server *s, const cJSON *root, srv_request *r, tokvec *v, srv_error *e)
{
    sbuf prompt = {0}, pre = {0};
    bool open = false;
    int rc = chat_prompt(s, root, r->tools, &prompt, &pre, &open, e);
    /* a prompt that ends inside <think> (DeepSeek R1's generation prompt): the reply starts thinking;
     * a continued message: its reasoning goes on (harmony: a continued analysis message) */
    if (!rc && prompt.p) r->think_forced_open = pre.n ? open : rs_prompt_forced_open(prompt.p, prompt.n);
    /* (the view of a continued message in tags reads its opening tag in r->rs->pre) */
    if (!rc && r->rs) r->rs->forced_open = r->think_forced_open && !(pre.n && !r->rs->harmony);
    if (!rc && pre.n && r->rs && !(r->rs->pre = sbuf_strdup(&pre))) rc = srv_errorf(e, 500, "out of memory");
    sbuf_free(&pre);
    if (r->rs) r->rs->calls = r->tools != NULL; /* (harmony: the calls' messages go on to the tool-call parser) */
    if (!rc) rc = add_text(s, v, "messages", prompt.p ? prompt.p : "", prompt.n, true, e);
    sbuf_free(&prompt);
    return rc;
}

/* response_fields (llama-server's /completion): the answer keeps only these fields, each a
 * path into it ("generation_settings/n_predict"), under the path as its key. Kept as the
 * array's JSON text; response.c applies it. */
#define SRV_MAX_RESPONSE_FIELDS 64
static int parse_response_fields(const cJSON *o, srv_request *r, srv_error *e)
{
    const cJSON *f = field(o, "response_fields");
    if (!f || cJSON_IsNull(f)) return 0;
    if (!cJSON_IsArray(f)) return srv_errorf(e, 400, "'response_fields' must be an array of field paths, got %s", srv_jtype(f));
    const int n = cJSON_GetArraySize(f);
    if (n > SRV_MAX_RESPONSE_FIELDS)
        return srv_errorf(e, 400, "'response_fields' has %d entries, more than %d", n, SRV_MAX_RESPONSE_FIELDS);
    int i = 0;
    for (const cJSON *x = f->child; x; x = x->next, i++)
        if (!cJSON_IsString(x) || strlen(x->valuestring) > 256)
            return srv_errorf(e, 400, "'response_fields[%d]' must be a field path of at most 256 bytes", i);
    if (n && !(r->response_fields = cJSON_PrintUnformatted(f))) return srv_errorf(e, 500, "out of memory");
    return 0;
}

/* ---- sampling fields -------------------------------------------------------------------------------- */

static int add_bias(srv_request *r, sift_token t, float b, srv_error *e)
{
    if (r->n_bias == SRV_MAX_LOGIT_BIAS) return srv_errorf(e, 400, "'logit_bias' has more than %d entries", SRV_MAX_LOGIT_BIAS);
    if (!r->bias && !(r->bias = malloc(SRV_MAX_LOGIT_BIAS * sizeof *r->bias))) return srv_errorf(e, 500, "out of memory");
    r->bias[r->n_bias++] = (sift_logit_bias){t, b};
    return 0;
}

/* A bias value: a number, or false (= -inf, the token is banned). */
static int bias_value(const cJSON *v, const char *where, float *out, srv_error *e)
{
    if (cJSON_IsFalse(v)) {
        *out = -INFINITY;
        return 0;
    }
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || fabs(v->valuedouble) > 1e6)
        return srv_errorf(e, 400, "'%s' must be a number in [-1e6, 1e6] or false, got %s", where, srv_jtype(v));
    *out = (float)v->valuedouble;
    return 0;
}

/* A bias key: a token id, or a text whose every token gets the bias (llama-server's forms). */
static int bias_target(const srv_server *s, srv_request *r, const cJSON *k, const char *key_text, const char *where,
                       float b, srv_error *e)
{
    if (k && cJSON_IsNumber(k)) {
        if (!is_int(k) || k->valuedouble < 0 || k->valuedouble >= s->n_vocab)
            return srv_errorf(e, 400, "'%s' must be a token id in [0, %d), got %.17g", where, s->n_vocab, k->valuedouble);
        return add_bias(r, (sift_token)k->valuedouble, b, e);
    }
    const char *text = k ? (cJSON_IsString(k) ? k->valuestring : NULL) : key_text;
    if (!text) return srv_errorf(e, 400, "'%s' must be a token id or a string, got %s", where, srv_jtype(k));
    char *end;
    const long id = strtol(text, &end, 10);
    if (*text && !*end) { /* "15043": a token id written as a string (OpenAI's form) */
        if (id < 0 || id >= s->n_vocab) return srv_errorf(e, 400, "'%s' must be a token id in [0, %d), got %ld", where, s->n_vocab, id);
        return add_bias(r, (sift_token)id, b, e);
    }
    if (!utf8_valid(text, strlen(text))) return srv_errorf(e, 400, "'%s' is not valid UTF-8", where);
    int32_t n = 0;
    sift_token *t = srv_tokenize(s, text, strlen(text), false, false, &n);
    if (!t) return srv_errorf(e, 500, "out of memory");
    int rc = 0;
    for (int32_t i = 0; i < n && !rc; i++) rc = add_bias(r, t[i], b, e);
    free(t);
    return rc;
}

static int parse_logit_bias(const srv_server *s, const cJSON *root, srv_request *r, srv_error *e)
{
    const cJSON *lb = field(root, "logit_bias");
    if (!lb) return 0;
    char where[64];
    if (cJSON_IsArray(lb)) { /* [[token or text, bias or false], ...] */
        int i = 0;
        for (const cJSON *x = lb->child; x; x = x->next, i++) {
            if (!cJSON_IsArray(x) || cJSON_GetArraySize(x) != 2)
                return srv_errorf(e, 400, "'logit_bias[%d]' must be a pair [token id or text, bias], got %s%s", i, srv_jtype(x),
                                  cJSON_IsArray(x) ? " of another length" : "");
            float b = 0;
            snprintf(where, sizeof where, "logit_bias[%d][1]", i);
            TRY(bias_value(x->child->next, where, &b, e));
            snprintf(where, sizeof where, "logit_bias[%d][0]", i);
            TRY(bias_target(s, r, x->child, NULL, where, b, e));
        }
    } else if (cJSON_IsObject(lb)) { /* {"token id or text": bias, ...} (OpenAI's form) */
        for (const cJSON *x = lb->child; x; x = x->next) {
            float b = 0;
            snprintf(where, sizeof where, "logit_bias.%.40s", x->string);
            TRY(bias_value(x, where, &b, e));
            TRY(bias_target(s, r, NULL, x->string, where, b, e));
        }
    } else {
        return srv_errorf(e, 400, "'logit_bias' must be an array of [token, bias] pairs or an object, got %s", srv_jtype(lb));
    }
    r->sp.logit_bias = r->bias;
    r->sp.n_logit_bias = r->n_bias;
    return 0;
}

static int parse_samplers(const cJSON *root, srv_request *r, srv_error *e)
{
    const cJSON *v = field(root, "samplers");
    if (!v) return 0;
    sift_error se = {0};
    if (cJSON_IsString(v)) { /* the one-letter form, "kt" */
        if (sift_sampling_set_sampler_chars(&r->sp, v->valuestring, &se) != SIFT_OK)
            return srv_errorf(e, 400, "'samplers': %s", se.msg);
        return 0;
    }
    if (!cJSON_IsArray(v)) return srv_errorf(e, 400, "'samplers' must be an array of sampler names, got %s", srv_jtype(v));
    const int n = cJSON_GetArraySize(v);
    if (n > SIFT_SAMPLING_MAX_SAMPLERS) return srv_errorf(e, 400, "'samplers' has %d entries, more than %d", n, SIFT_SAMPLING_MAX_SAMPLERS);
    sift_sampler_type types[SIFT_SAMPLING_MAX_SAMPLERS];
    int i = 0;
    for (const cJSON *x = v->child; x; x = x->next, i++) {
        if (!cJSON_IsString(x)) return srv_errorf(e, 400, "'samplers[%d]' must be a sampler name, got %s", i, srv_jtype(x));
        sift_sampling_params one = sift_sampling_default_params();
        if (!*x->valuestring || strchr(x->valuestring, ';') ||
            sift_sampling_set_samplers(&one, x->valuestring, &se) != SIFT_OK || one.n_samplers != 1)
            return srv_errorf(e, 400, "'samplers[%d]': unknown sampler '%.64s' (known: penalties, dry, top_n_sigma, top_k, typ_p, top_p, min_p, xtc, temperature, infill, adaptive_p)",
                              i, x->valuestring);
        types[i] = one.samplers[0];
    }
    memcpy(r->sp.samplers, types, (size_t)n * sizeof *types);
    r->sp.n_samplers = n;
    return 0;
}

static int parse_breakers(const cJSON *root, srv_request *r, srv_error *e)
{
    const cJSON *v = field(root, "dry_sequence_breakers");
    if (!v) return 0;
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) == 0)
        return srv_errorf(e, 400, "'dry_sequence_breakers' must be a non-empty array of strings, got %s%s", srv_jtype(v),
                          cJSON_IsArray(v) ? " (empty)" : "");
    const int n = cJSON_GetArraySize(v);
    if (n > SIFT_SAMPLING_MAX_BREAKERS) return srv_errorf(e, 400, "'dry_sequence_breakers' has %d entries, more than %d", n, SIFT_SAMPLING_MAX_BREAKERS);
    int i = 0;
    for (const cJSON *x = v->child; x; x = x->next, i++) {
        if (!cJSON_IsString(x) || !*x->valuestring || strlen(x->valuestring) >= SIFT_SAMPLING_MAX_BREAKER_LEN)
            return srv_errorf(e, 400, "'dry_sequence_breakers[%d]' must be a non-empty string of at most %d bytes, got %s", i,
                              SIFT_SAMPLING_MAX_BREAKER_LEN - 1, srv_jtype(x));
        strcpy(r->sp.dry_sequence_breakers[i], x->valuestring);
    }
    r->sp.n_dry_sequence_breakers = n;
    return 0;
}

static int add_stop(srv_request *r, const cJSON *x, const char *where, srv_error *e)
{
    if (!cJSON_IsString(x)) return srv_errorf(e, 400, "'%s' must be a string, got %s", where, srv_jtype(x));
    const size_t len = strlen(x->valuestring);
    if (len == 0) return 0; /* llama-server skips empty stop strings */
    if (len > SRV_MAX_STOP_LEN) return srv_errorf(e, 400, "'%s' is longer than %d bytes", where, SRV_MAX_STOP_LEN);
    if (r->n_stop == SRV_MAX_STOP) return srv_errorf(e, 400, "'stop' has more than %d strings", SRV_MAX_STOP);
    if (!r->stop && !(r->stop = calloc(SRV_MAX_STOP, sizeof *r->stop))) return srv_errorf(e, 500, "out of memory");
    if (!(r->stop[r->n_stop] = strdup(x->valuestring))) return srv_errorf(e, 500, "out of memory");
    r->n_stop++;
    return 0;
}

static int parse_stop(const cJSON *root, srv_request *r, srv_error *e)
{
    const cJSON *v = field(root, "stop");
    if (!v) return 0;
    if (cJSON_IsString(v)) return add_stop(r, v, "stop", e); /* OpenAI allows one string */
    if (!cJSON_IsArray(v)) return srv_errorf(e, 400, "'stop' must be an array of strings, got %s", srv_jtype(v));
    int i = 0;
    char where[32];
    for (const cJSON *x = v->child; x; x = x->next, i++) {
        snprintf(where, sizeof where, "stop[%d]", i);
        TRY(add_stop(r, x, where, e));
    }
    return 0;
}

/* tools / tool_choice / parallel_tool_calls (tool_calls.c): r->tools, whose grammar
 * srv_build_samplers makes lazy for tool_choice auto. */
static int parse_tools(const srv_server *s, const cJSON *o, srv_request *r, srv_error *e)
{
    const cJSON *tools = field(o, "tools");
    if (!s->jinja && cJSON_IsArray(tools) && cJSON_GetArraySize(tools) > 0)
        return srv_errorf(e, 400, "'tools' need a Jinja chat template (the model's, or --chat-template-file); "
                                  "the built-in template %s has no tool calls", chat_name(s->tmpl));
    TRY(tc_parse_request(s->tc_fmt, o, &r->tools, e));
    if (r->tools) r->tools->no_system = !s->jinja_system_role;
    tc_budget(r->tools, r->n_predict);
    if (r->tools && (r->cgrammar || r->gbnf_pending))
        return srv_errorf(e, 400, "'tools' cannot be combined with 'grammar', 'json_schema' or 'response_format' "
                                  "(the tool calls have their grammar)");
    return 0;
}

/* A JSON schema node, compiled into r->cgrammar by the server's compiler. Its text is made
 * once (cJSON -> text: the compiler's cache key); a schema seen before (another request, or
 * this request's other choices) is a cache hit and is not converted again, and on a miss the
 * converter's GBNF is parsed once, by the compiler - no text goes through a second parse. */
static int schema_grammar(const srv_server *s, const cJSON *schema, const char *name, srv_request *r, srv_error *e)
{
    /* "json_schema_llama": true converts with llama.cpp's conventions (required properties
     * first, a missing additionalProperties = false) for drop-in clients; the default is
     * JSON Schema's (the schema's property order, other keys allowed) */
    uint32_t flags = r->json_schema_llama ? SIFT_JSON_SCHEMA_LLAMA : 0;
    if (!cJSON_IsObject(schema) && !cJSON_IsTrue(schema))
        return srv_errorf(e, 400, "'%s' must be a JSON schema object, got %s", name, srv_jtype(schema));
    char *text = cJSON_PrintUnformatted(schema);
    if (!text) return srv_errorf(e, 500, "out of memory");
    sift_error se = {0};
    srv_prio_background(); /* the client sets the cost of what follows (prio.c) */
    if (r->rs) { /* a chat that may think: GBNF now, compiled once the prompt is known (finish_grammar) */
        r->gbnf_pending = sift_json_schema_to_grammar(text, strlen(text), flags, &se);
        free(text);
        if (!r->gbnf_pending) return srv_errorf(e, se.status == SIFT_E_NOMEM ? 500 : 400, "'%s': %s", name, se.msg);
        r->grammar_from_schema = true;
        return 0;
    }
    r->cgrammar = sift_grammar_compile_json_schema(s->gcomp, text, strlen(text), flags, &se);
    free(text);
    if (!r->cgrammar) return srv_errorf(e, se.status == SIFT_E_NOMEM ? 500 : 400, "'%s': %s", name, se.msg);
    r->grammar_from_schema = true;
    return 0;
}

static int parse_grammar(const srv_server *s, const cJSON *root, srv_kind kind, srv_request *r, srv_error *e)
{
    const cJSON *g = field(root, "grammar"), *js = field(root, "json_schema");
    const cJSON *jl = field(root, "json_schema_llama");
    if (jl && !cJSON_IsBool(jl)) return srv_errorf(e, 400, "'json_schema_llama' must be a boolean, got %s", srv_jtype(jl));
    r->json_schema_llama = cJSON_IsTrue(jl);
    if (g) { /* as llama-server: grammar wins over json_schema */
        if (!cJSON_IsString(g)) return srv_errorf(e, 400, "'grammar' must be a GBNF string, got %s", srv_jtype(g));
        if (!*g->valuestring) return 0;
        if (r->rs) { /* compiled once the prompt is known (finish_grammar) */
            if (!(r->gbnf_pending = strdup(g->valuestring))) return srv_errorf(e, 500, "out of memory");
            return 0;
        }
        sift_error se = {0};
        srv_prio_background();
        r->cgrammar = sift_grammar_compile(s->gcomp, g->valuestring, strlen(g->valuestring), "root", &se);
        if (!r->cgrammar) return srv_errorf(e, se.status == SIFT_E_NOMEM ? 500 : 400, "'grammar': %s", se.msg);
        return 0;
    }
    if (js) return schema_grammar(s, js, "json_schema", r, e);
    const cJSON *rf = kind != SRV_NATIVE ? field(root, "response_format") : NULL;
    if (!rf) return 0;
    if (!cJSON_IsObject(rf)) return srv_errorf(e, 400, "'response_format' must be an object, got %s", srv_jtype(rf));
    const char *type = "text";
    TRY(get_string(rf, "type", &type, e));
    if (!strcmp(type, "text")) return 0;
    if (!strcmp(type, "json_object")) {
        const cJSON *schema = field(rf, "schema");
        if (schema) return schema_grammar(s, schema, "response_format.schema", r, e);
        /* OpenAI's json_object mode means a JSON object (llama-server accepts any value; a client
         * that asked for an object and parses one must get one) */
        cJSON *obj = cJSON_CreateObject();
        if (obj && !cJSON_AddStringToObject(obj, "type", "object")) cJSON_Delete(obj), obj = NULL;
        const int rc = obj ? schema_grammar(s, obj, "response_format", r, e) : srv_errorf(e, 500, "out of memory");
        cJSON_Delete(obj);
        return rc;
    }
    if (!strcmp(type, "json_schema")) {
        const cJSON *wrap = field(rf, "json_schema");
        const cJSON *schema = wrap && cJSON_IsObject(wrap) ? field(wrap, "schema") : NULL;
        if (!schema) return srv_errorf(e, 400, "'response_format.json_schema.schema' is required for type json_schema");
        return schema_grammar(s, schema, "response_format.json_schema.schema", r, e);
    }
    return srv_errorf(e, 400, "'response_format.type' must be \"text\", \"json_object\" or \"json_schema\", got \"%.32s\"", type);
}

/* A sampling field: its JSON type checked here, its range from libsift's rules (the CLI's
 * too, sift_sampling_rule_find), so both front ends refuse the same values with one message. */
static int sp_rule_error(const sift_sampling_rule *rule, double v, srv_error *e)
{
    sift_error se = {0};
    if (sift_sampling_rule_check(rule, v, &se) != SIFT_OK) return srv_errorf(e, 400, "%s", se.msg);
    return 0;
}

static int sp_float(const cJSON *o, const char *name, float *out, srv_error *e)
{
    const sift_sampling_rule *rule = sift_sampling_rule_find(name);
    const cJSON *v = field(o, name);
    if (!v) return 0;
    if (!cJSON_IsNumber(v))
        return srv_errorf(e, 400, "'%s' must be a number in %c%g, %g], got %s", name, rule->lo_open ? '(' : '[', rule->lo,
                          rule->hi, srv_jtype(v));
    TRY(sp_rule_error(rule, v->valuedouble, e));
    *out = (float)v->valuedouble;
    return 0;
}

static int sp_i32(const cJSON *o, const char *name, int32_t *out, srv_error *e)
{
    const sift_sampling_rule *rule = sift_sampling_rule_find(name);
    const cJSON *v = field(o, name);
    if (!v) return 0;
    if (!cJSON_IsNumber(v))
        return srv_errorf(e, 400, "'%s' must be an integer in [%.0f, %.0f], got %s", name, rule->lo, rule->hi, srv_jtype(v));
    TRY(sp_rule_error(rule, v->valuedouble, e));
    *out = (int32_t)v->valuedouble;
    return 0;
}

static int parse_sampling(const srv_server *s, const cJSON *o, srv_request *r, srv_error *e)
{
    sift_sampling_params *p = &r->sp;
    const double ctx = s->n_ctx_slot;
    TRY(sp_float(o, "temperature", &p->temp, e));
    TRY(sp_float(o, "dynatemp_range", &p->dynatemp_range, e));
    TRY(sp_float(o, "dynatemp_exponent", &p->dynatemp_exponent, e));
    TRY(sp_i32(o, "top_k", &p->top_k, e));
    TRY(sp_float(o, "top_p", &p->top_p, e));
    TRY(sp_float(o, "min_p", &p->min_p, e));
    TRY(sp_float(o, "typical_p", &p->typ_p, e));
    TRY(sp_float(o, "top_n_sigma", &p->top_n_sigma, e));
    TRY(sp_float(o, "xtc_probability", &p->xtc_probability, e));
    TRY(sp_float(o, "xtc_threshold", &p->xtc_threshold, e));
    TRY(sp_float(o, "repeat_penalty", &p->penalty_repeat, e));
    TRY(sp_i32(o, "repeat_last_n", &p->penalty_last_n, e));
    TRY(sp_float(o, "presence_penalty", &p->penalty_present, e));
    TRY(sp_float(o, "frequency_penalty", &p->penalty_freq, e));
    TRY(sp_float(o, "dry_multiplier", &p->dry_multiplier, e));
    TRY(sp_float(o, "dry_base", &p->dry_base, e));
    TRY(sp_i32(o, "dry_allowed_length", &p->dry_allowed_length, e));
    TRY(sp_i32(o, "dry_penalty_last_n", &p->dry_penalty_last_n, e));
    TRY(sp_i32(o, "mirostat", &p->mirostat, e));
    TRY(sp_float(o, "mirostat_tau", &p->mirostat_tau, e));
    TRY(sp_float(o, "mirostat_eta", &p->mirostat_eta, e));
    TRY(sp_float(o, "adaptive_target", &p->adaptive_target, e));
    TRY(sp_float(o, "adaptive_decay", &p->adaptive_decay, e));
    TRY(sp_i32(o, "min_keep", &p->min_keep, e));
    TRY(get_bool(o, "ignore_eos", &p->ignore_eos, e));
    long long seed = p->seed == SIFT_DEFAULT_SEED ? -1 : (long long)p->seed; /* the server's --seed unless given */
    TRY(get_int(o, "seed", -1, 4294967295.0, &seed, e));
    p->seed = seed < 0 ? SIFT_DEFAULT_SEED : (uint32_t)seed;
    /* a DRY base below 1 means the default (llama-server) */
    if (p->dry_base < 1.0f) p->dry_base = sift_sampling_default_params().dry_base;
    TRY(parse_breakers(o, r, e));
    TRY(parse_samplers(o, r, e));
    TRY(parse_logit_bias(s, o, r, e));
    /* the whole set against libsift's rules (min_keep against the vocabulary), then -1
     * windows become the slot's context */
    sift_error se = {0};
    if (sift_sampling_params_validate(p, s->n_vocab, &se) != SIFT_OK) return srv_errorf(e, 400, "%s", se.msg);
    sift_sampling_params_set_context(p, (int32_t)ctx);
    return 0;
}

/* ---- the request --------------------------------------------------------------------------------- */

static int check_prompt_size(const srv_server *s, int32_t n, const char *name, srv_error *e)
{
    if (n == 0) return srv_errorf(e, 400, "'%s' is empty (and the vocabulary adds no BOS)", name);
    if (n >= s->n_ctx_slot) {
        srv_errorf(e, 400, "the request exceeds the available context size: %d prompt tokens in '%s', %d per slot (one must be left to generate)",
                   n, name, s->n_ctx_slot);
        e->type = "exceed_context_size_error";
        e->n_prompt_tokens = n;
        e->n_ctx = s->n_ctx_slot;
        return 400;
    }
    return 0;
}

/* reasoning_format (the server's --reasoning-format unless the request says), for chats:
 * r->rs, the reply's split into reasoning_content and content (reasoning.c). */
static int parse_reasoning(const srv_server *s, const cJSON *o, srv_request *r, srv_error *e)
{
    rs_format f = (rs_format)s->cfg.reasoning_format;
    const char *name = NULL;
    TRY(get_string(o, "reasoning_format", &name, e));
    if (name && rs_format_parse(name, &f))
        return srv_errorf(e, 400, "'reasoning_format' must be \"none\", \"deepseek\", \"deepseek-legacy\" or \"auto\", got \"%.32s\"", name);
    r->reasoning_budget = s->cfg.reasoning_budget;
    const tc_format tf = s->jinja ? s->tc_fmt : TC_GENERIC;
    if (f == RS_NONE && !tc_harmony(tf)) return 0; /* (gpt-oss's channels are read even then: rs_reply) */
    if (!(r->rs = calloc(1, sizeof *r->rs))) return srv_errorf(e, 500, "out of memory");
    r->rs->format = f;
    rs_set_tags(r->rs, tf); /* Command R7B thinks in its own tags, gpt-oss in channels */
    return 0;
}

/* May the reply think before its answer? The prompt left the thinking open, or the template
 * knows the <think> tag. */
static bool may_think(const srv_server *s, const srv_request *r)
{
    return r->rs && (r->rs->harmony || r->think_forced_open || (s->tmpl_text && strstr(s->tmpl_text, "<think>")));
}

/* Once the prompt is known: a grammar (tools, grammar, json_schema) that starts after the
 * thinking when the reply may think (rs_wrap_grammar), else as given. */
static int finish_grammar(const srv_server *s, srv_request *r, srv_error *e)
{
    const bool think = may_think(s, r), harmony = r->rs && r->rs->harmony; /* (gpt-oss's call grammar has its channels) */
    if (r->tools && think && !harmony && !r->tools->lazy) r->tools_after_think = true;
    if (r->tools && think && !harmony && r->tools->lazy && tc_think_trigger(r->tools, r->think_forced_open))
        return srv_errorf(e, 500, "out of memory");
    if (!r->gbnf_pending) return 0;
    const char *root = "root";
    /* harmony, a continued message (r->rs->pre): its content goes on in the answer's grammar; an
     * analysis, closed first */
    const bool hm_in_content = harmony && r->rs->pre && !r->think_forced_open;
    char *text = !think || hm_in_content ? NULL
                 : harmony ? rs_wrap_harmony(r->gbnf_pending, "root", r->rs->spaced,
                                             r->rs->pre ? RS_HM_IN_ANALYSIS : RS_HM_REPLY, &root)
                           : rs_wrap_grammar(r->gbnf_pending, "root", r->think_forced_open, &root);
    if (think && !hm_in_content && !text) return srv_errorf(e, 500, "out of memory");
    const char *g = text ? text : r->gbnf_pending;
    sift_error se = {0};
    srv_prio_background();
    r->cgrammar = sift_grammar_compile(s->gcomp, g, strlen(g), root, &se);
    free(text);
    if (!r->cgrammar)
        return srv_errorf(e, se.status == SIFT_E_NOMEM ? 500 : 400, "'%s': %s", r->grammar_from_schema ? "json_schema" : "grammar", se.msg);
    return 0;
}

/* speculative.n_max / n_min / p_min: llama-server reads them as flat keys with a dot in the
 * name; an object "speculative": {"n_max": ...} is taken too. n_max 0 turns drafting off for
 * the request; n_min above n_max is lowered to it, as llama-server does. */
static int parse_speculative(const srv_config *cfg, const cJSON *o, srv_request *r, srv_error *e)
{
    r->spec = srv_draft_defaults(cfg);
    TRY(get_i32(o, "speculative.n_max", 0, SRV_MAX_DRAFT, &r->spec.n_max, e));
    TRY(get_i32(o, "speculative.n_min", 0, SRV_MAX_DRAFT, &r->spec.n_min, e));
    TRY(get_unit(o, "speculative.p_min", 0, 1, &r->spec.p_min, e));
    const cJSON *so = field(o, "speculative");
    if (so) {
        if (!cJSON_IsObject(so)) return srv_errorf(e, 400, "'speculative' must be an object, got %s", srv_jtype(so));
        const int rc = get_i32(so, "n_max", 0, SRV_MAX_DRAFT, &r->spec.n_max, e) || get_i32(so, "n_min", 0, SRV_MAX_DRAFT, &r->spec.n_min, e) ||
                       get_unit(so, "p_min", 0, 1, &r->spec.p_min, e);
        if (rc) { /* name the field as the flat key would */
            char msg[sizeof e->msg];
            snprintf(msg, sizeof msg, "%s", e->msg);
            return srv_errorf(e, 400, "'speculative.%s", msg + (msg[0] == '\''));
        }
    }
    if (r->spec.n_min > r->spec.n_max) r->spec.n_min = r->spec.n_max;
    return 0;
}

static int parse_fields(const srv_server *s, srv_kind kind, const cJSON *o, srv_request *r, srv_error *e)
{
    const srv_config *cfg = &s->cfg;
    r->kind = kind;
    r->sp = cfg->sampling ? *cfg->sampling : sift_sampling_default_params();
    r->n_predict = cfg->default_n_predict;
    r->cache_prompt = true;
    r->id_slot = -1;
    r->trace_top = 10;

    const char *model = NULL;
    TRY(get_string(o, "model", &model, e));
    if (model && !(r->model = strdup(model))) return srv_errorf(e, 500, "out of memory");

    TRY(get_bool(o, "stream", &r->stream, e));
    TRY(get_bool(o, "cache_prompt", &r->cache_prompt, e));
    TRY(get_bool(o, "return_tokens", &r->return_tokens, e));
    TRY(get_bool(o, "timings_per_token", &r->timings_per_token, e));
    TRY(get_bool(o, "return_progress", &r->return_progress, e));
    /* n_probs reports llama-server's logprob / top_logprobs of the model's distribution by
     * default (as current llama-server does, so that scripts written for it read the same
     * fields); "post_sampling_probs": true gives prob / top_probs after the chain instead. */
    r->post_sampling_probs = false;
    TRY(get_bool(o, "post_sampling_probs", &r->post_sampling_probs, e));
    TRY(get_bool(o, "trace", &r->trace, e));
    TRY(get_i32(o, "trace_top", 1, SRV_MAX_TRACE_TOP, &r->trace_top, e));
    TRY(get_i32(o, "id_slot", -1, cfg->n_parallel - 1, &r->id_slot, e));
    const cJSON *so = field(o, "stream_options");
    if (so) {
        if (!cJSON_IsObject(so)) return srv_errorf(e, 400, "'stream_options' must be an object, got %s", srv_jtype(so));
        TRY(get_bool(so, "include_usage", &r->include_usage, e));
    }

    /* tokens to predict: n_predict (llama-server), max_tokens / max_completion_tokens (OpenAI) */
    const double maxp = cfg->max_n_predict;
    TRY(get_i32(o, "max_tokens", -1, maxp, &r->n_predict, e));
    TRY(get_i32(o, "max_completion_tokens", -1, maxp, &r->n_predict, e));
    TRY(get_i32(o, "n_predict", -1, maxp, &r->n_predict, e));

    TRY(parse_response_fields(o, r, e));
    TRY(get_i32(o, "n_keep", -1, maxp, &r->n_keep, e));
    TRY(get_i32(o, "n_discard", 0, maxp, &r->n_discard, e));
    TRY(parse_speculative(cfg, o, r, e));

    /* probabilities: n_probs (llama-server), logprobs / top_logprobs (OpenAI) */
    TRY(get_i32(o, "n_probs", 0, SRV_MAX_N_PROBS, &r->sp.n_probs, e));
    const cJSON *lp = field(o, "logprobs");
    r->n_probs_shown = -1;
    if (lp && kind == SRV_OAI_CHAT) {
        if (!cJSON_IsBool(lp)) return srv_errorf(e, 400, "'logprobs' must be a boolean, got %s", srv_jtype(lp));
        if (cJSON_IsTrue(lp)) {
            /* OpenAI: logprobs alone is the chosen token's logprob, top_logprobs: [] (the
             * engine still needs one candidate to compute it) */
            int32_t top = 0;
            TRY(get_i32(o, "top_logprobs", 0, 20, &top, e));
            if (!field(o, "n_probs")) {
                r->sp.n_probs = top > 0 ? top : 1;
                r->n_probs_shown = top;
            }
        } else if (field(o, "top_logprobs")) {
            return srv_errorf(e, 400, "'top_logprobs' requires 'logprobs' to be true");
        }
    } else if (kind == SRV_OAI_CHAT && field(o, "top_logprobs")) {
        return srv_errorf(e, 400, "'top_logprobs' requires 'logprobs' to be true");
    } else if (lp) {
        int32_t n = 0;
        TRY(get_i32(o, "logprobs", 0, SRV_MAX_N_PROBS, &n, e));
        if (!field(o, "n_probs")) r->sp.n_probs = n;
    }
    r->n_probs = r->sp.n_probs;

    /* n choices per prompt: OpenAI's n, llama-server's n_cmpl (which wins); each is a
     * task of its own, so at most one per slot */
    r->n_cmpl = 1;
    {
        const double max_n = cfg->n_parallel;
        const cJSON *nc = field(o, "n_cmpl") ? field(o, "n_cmpl") : field(o, "n");
        const char *nm = field(o, "n_cmpl") ? "n_cmpl" : "n";
        if (nc && !cJSON_IsNumber(nc))
            return srv_errorf(e, 400, "'%s' must be an integer in [1, %d] (one completion per slot, -np), got %s", nm,
                              cfg->n_parallel, srv_jtype(nc));
        if (nc && (!is_int(nc) || nc->valuedouble < 1 || nc->valuedouble > max_n))
            return srv_errorf(e, 400, "'%s' must be an integer in [1, %d] (one completion per slot, -np), got %.17g", nm,
                              cfg->n_parallel, nc->valuedouble);
        if (nc) r->n_cmpl = (int32_t)nc->valuedouble;
    }
    if (kind == SRV_OAI_CMPL) TRY(get_bool(o, "echo", &r->echo, e));
    if (kind != SRV_NATIVE) {
        if (kind == SRV_OAI_CHAT && field(o, "echo")) {
            bool echo = false;
            TRY(get_bool(o, "echo", &echo, e));
            if (echo) return srv_errorf(e, 400, "'echo' is only for /v1/completions");
        }
        const char *suffix = NULL;
        TRY(get_string(o, "suffix", &suffix, e));
        if (suffix && *suffix) return srv_errorf(e, 400, "'suffix' is not supported");
        const cJSON *tools = field(o, "tools");
        if (kind == SRV_OAI_CMPL && tools && (!cJSON_IsArray(tools) || cJSON_GetArraySize(tools) > 0))
            return srv_errorf(e, 400, "'tools' are for /v1/chat/completions");
    }

    TRY(parse_sampling(s, o, r, e));
    TRY(parse_stop(o, r, e));
    if (kind == SRV_OAI_CHAT) TRY(parse_reasoning(s, o, r, e));
    TRY(parse_grammar(s, o, kind, r, e));
    if (kind == SRV_OAI_CHAT) TRY(parse_tools(s, o, r, e));

    /* the prompt last: the most expensive part. Several prompts: the first parse (prompt 0)
     * checks them all, so that a bad one fails the request before any task is queued. */
    if (r->infill) { /* /infill: one prompt, built from input_prefix, input_suffix, input_extra (infill.c) */
        TRY(srv_infill_prompt(s, o, &r->prompt, &r->n_prompt, e));
        r->n_prompts = 1;
        return check_prompt_size(s, r->n_prompt, "input_prefix", e);
    }
    if (kind == SRV_OAI_CHAT) {
        tokvec v = {0};
        const int rc = parse_messages(s, o, r, &v, e);
        r->prompt = v.p;
        r->n_prompt = v.n;
        r->n_prompts = 1;
        if (rc) return rc;
        TRY(finish_grammar(s, r, e));
        return check_prompt_size(s, r->n_prompt, "messages", e);
    }
    const cJSON *p = field(o, "prompt");
    if (!p) return srv_errorf(e, 400, "'prompt' is required");
    const int np = srv_prompt_count(p, "prompt", SRV_MAX_PROMPTS, e);
    if (np < 0) return -np;
    r->n_prompts = np;
    if (r->prompt_index >= np) return srv_errorf(e, 500, "'prompt': no prompt %d", r->prompt_index);
    if (np > 1 && np * r->n_cmpl > SRV_MAX_PROMPTS)
        return srv_errorf(e, 400, "%d prompts x 'n' %d = %d completions, more than %d in one request", np, r->n_cmpl,
                          np * r->n_cmpl, SRV_MAX_PROMPTS);
    for (int i = r->prompt_index == 0 ? 0 : r->prompt_index; i < (r->prompt_index == 0 ? np : r->prompt_index + 1); i++) {
        sift_token *t;
        int32_t n;
        TRY(srv_prompt_at(s, p, "prompt", i, &t, &n, e));
        char name[32] = "prompt";
        if (np > 1) snprintf(name, sizeof name, "prompt[%d]", i);
        const int rc = check_prompt_size(s, n, name, e);
        if (rc || i != r->prompt_index) free(t);
        else r->prompt = t, r->n_prompt = n;
        if (rc) return rc;
    }
    /* echo gives a text prompt back as written (detokenizing would add the BOS or the
     * tokenizer's leading space) */
    const cJSON *pt = np > 1 ? cJSON_GetArrayItem(p, r->prompt_index) : p;
    if (r->echo && cJSON_IsString(pt) && !(r->echo_text = strdup(pt->valuestring))) return srv_errorf(e, 500, "out of memory");
    return 0;
}

int srv_parse_completion_at(const srv_server *s, srv_kind kind, const char *body, size_t len, int prompt_index, int choice,
                            srv_request *r, srv_error *e)
{
    memset(r, 0, sizeof *r);
    if (kind == SRV_INFILL) { /* checked before the body, as llama-server does */
        TRY(srv_infill_supported(s, e));
        r->infill = true;
        kind = SRV_NATIVE;
    }
    cJSON *root = parse_object(body, len, e);
    if (!root) return e->status;
    if (kind == SRV_ANTH_MSG || kind == SRV_ANTH_COUNT) { /* Anthropic's Messages API: the chat it means (anthropic.c) */
        cJSON *chat = srv_anth_request(root, kind == SRV_ANTH_COUNT, e);
        cJSON_Delete(root);
        if (!(root = chat)) return e->status;
        kind = SRV_OAI_CHAT;
    }
    if (kind == SRV_RESP) { /* OpenAI's Responses API: the chat it means (responses.c) */
        cJSON *chat = srv_resp_request(root, e);
        cJSON_Delete(root);
        if (!(root = chat)) return e->status;
        kind = SRV_OAI_CHAT;
    }
    r->prompt_index = prompt_index;
    const int rc = parse_fields(s, kind, root, r, e);
    cJSON_Delete(root);
    if (rc) {
        srv_request_free(r);
        return rc;
    }
    r->choice = choice;
    r->index = prompt_index * r->n_cmpl + choice;
    /* choice i of a seeded request samples with seed + i: the same seed would give n copies
     * of one completion */
    if (choice > 0 && r->sp.seed != SIFT_DEFAULT_SEED) r->sp.seed = (uint32_t)(r->sp.seed + (uint32_t)choice);
    return 0;
}

int srv_parse_completion(const srv_server *s, srv_kind kind, const char *body, size_t len, srv_request *r, srv_error *e)
{
    return srv_parse_completion_at(s, kind, body, len, 0, 0, r, e);
}

int srv_build_samplers(const srv_server *s, const srv_request *r, sift_chain **chain, sift_sampler **grammar, srv_error *e)
{
    *chain = NULL;
    *grammar = NULL;
    sift_error se = {0};
    const sift_chain_env env = {.n_vocab = s->n_vocab, .vocab = &s->view, .eot = s->eot, .default_seed = SIFT_DEFAULT_SEED};
    *chain = sift_chain_from_params(&r->sp, &env, &se);
    if (!*chain) return srv_errorf(e, se.status == SIFT_E_NOMEM ? 500 : 400, "sampling parameters: %s", se.msg);
    if (r->tools) { /* the tool calls' grammar: lazy (waiting for the call's opening) for tool_choice auto */
        sift_grammar_params gp = sift_grammar_default_params();
        gp.root = TC_ROOT;
        gp.lazy = r->tools->lazy;
        gp.trigger_words = (const char *const *)r->tools->triggers;
        gp.n_trigger_words = r->tools->lazy ? (size_t)r->tools->n_triggers : 0;
        const char *pat[1] = {r->tools->pattern};
        gp.trigger_patterns = pat;
        gp.n_trigger_patterns = r->tools->lazy && r->tools->pattern ? 1 : 0;
        if (r->tools->lazy && r->tools->think_pattern) { /* (reasoning) one pattern past the thinking */
            pat[0] = r->tools->think_pattern;
            gp.n_trigger_words = 0;
            gp.n_trigger_patterns = 1;
        }
        /* (reasoning) a call from the first token, after the thinking; harmony: after the message
         * the prompt's prefill left open */
        const bool hm_open = r->rs && r->rs->harmony && r->rs->pre && !r->tools->lazy;
        char *wrapped = r->tools_after_think ? rs_wrap_grammar(r->tools->gbnf, TC_ROOT, r->think_forced_open, &gp.root)
                        : hm_open ? rs_wrap_harmony(r->tools->gbnf, TC_ROOT, r->rs->spaced, RS_HM_IN_MESSAGE, &gp.root)
                                  : NULL;
        if ((r->tools_after_think || hm_open) && !wrapped) {
            sift_chain_free(*chain);
            *chain = NULL;
            return srv_errorf(e, 500, "out of memory");
        }
        const char *gt = wrapped ? wrapped : r->tools->gbnf;
        srv_prio_background();
        sift_compiled_grammar *cg = sift_grammar_compile(s->gcomp, gt, strlen(gt), gp.root, &se);
        free(wrapped);
        *grammar = cg ? sift_sampler_init_grammar_compiled(cg, &gp, &se) : NULL;
        sift_compiled_grammar_free(cg);
        if (!*grammar) {
            sift_chain_free(*chain);
            *chain = NULL;
            return srv_errorf(e, se.status == SIFT_E_NOMEM ? 500 : 400, "'tools': %s", se.msg);
        }
    } else if (r->cgrammar) {
        *grammar = sift_sampler_init_grammar_compiled(r->cgrammar, NULL, &se);
        if (!*grammar) {
            sift_chain_free(*chain);
            *chain = NULL;
            return srv_errorf(e, se.status == SIFT_E_NOMEM ? 500 : 400, "'%s': %s",
                              r->grammar_from_schema ? "json_schema" : "grammar", se.msg);
        }
    }
    return 0;
}

/* ---- POST /slots/N?action=save|restore: the file name ------------------------------------------ */

/* A name for a file in --slot-save-path: letters, digits, '.', '_' and '-', not starting
 * with a dot, at most 200 bytes: nothing that reaches another directory. */
static bool slot_file_name_ok(const char *n)
{
    const size_t len = strlen(n);
    if (!len || len > 200 || n[0] == '.') return false;
    for (const char *p = n; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '.' && *p != '_' && *p != '-') return false;
    return true;
}

int srv_parse_slot_file(const char *body, size_t len, char *out, size_t cap, srv_error *e)
{
    cJSON *root = parse_object(body, len, e);
    if (!root) return e->status;
    const cJSON *fn = field(root, "filename");
    const bool ok = cJSON_IsString(fn) && slot_file_name_ok(fn->valuestring) && strlen(fn->valuestring) < cap;
    if (ok) snprintf(out, cap, "%s", fn->valuestring);
    cJSON_Delete(root);
    if (!ok)
        return srv_errorf(e, 400, "'filename' must be a file name of letters, digits, '.', '_' and '-' (no directory), "
                                  "not starting with '.'");
    return 0;
}

/* ---- /tokenize, /detokenize, /apply-template --------------------------------------------------------- */

int srv_handle_tokenize(const srv_server *s, const char *body, size_t len, char **out, srv_error *e)
{
    cJSON *root = parse_object(body, len, e);
    if (!root) return e->status;
    const char *content = NULL;
    bool add_special = false, parse_special = true, with_pieces = false;
    int rc = get_string(root, "content", &content, e);
    if (!rc && !content) rc = srv_errorf(e, 400, "'content' is required");
    if (!rc) rc = get_bool(root, "add_special", &add_special, e);
    if (!rc) rc = get_bool(root, "parse_special", &parse_special, e);
    if (!rc) rc = get_bool(root, "with_pieces", &with_pieces, e);
    if (!rc && !utf8_valid(content, strlen(content))) rc = srv_errorf(e, 400, "'content' is not valid UTF-8");
    int32_t n = 0;
    sift_token *t = NULL;
    if (!rc && !(t = srv_tokenize(s, content, strlen(content), add_special, parse_special, &n)))
        rc = srv_errorf(e, 500, "cannot tokenize (out of memory)");
    if (!rc) {
        cJSON *o = cJSON_CreateObject();
        cJSON *a = cJSON_AddArrayToObject(o, "tokens");
        for (int32_t i = 0; i < n; i++) {
            if (!with_pieces) {
                cJSON_AddItemToArray(a, cJSON_CreateNumber(t[i]));
                continue;
            }
            char buf[512];
            int32_t m = sift_token_to_piece(s->vocab, t[i], buf, sizeof buf, 0, true);
            if (m < 0) m = 0;
            cJSON *p = cJSON_CreateObject();
            cJSON_AddNumberToObject(p, "id", t[i]);
            if (utf8_valid(buf, (size_t)m)) { /* a string when valid UTF-8, else its bytes (llama-server) */
                buf[m < (int32_t)sizeof buf ? m : (int32_t)sizeof buf - 1] = 0;
                cJSON_AddStringToObject(p, "piece", buf);
            } else {
                cJSON *bytes = cJSON_AddArrayToObject(p, "piece");
                for (int32_t k = 0; k < m; k++) cJSON_AddItemToArray(bytes, cJSON_CreateNumber((unsigned char)buf[k]));
            }
            cJSON_AddItemToArray(a, p);
        }
        *out = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
        if (!*out) rc = srv_errorf(e, 500, "out of memory");
    }
    free(t);
    cJSON_Delete(root);
    return rc;
}

int srv_handle_detokenize(const srv_server *s, const char *body, size_t len, char **out, srv_error *e)
{
    cJSON *root = parse_object(body, len, e);
    if (!root) return e->status;
    int rc = 0;
    const cJSON *toks = field(root, "tokens");
    sbuf text = {0};
    if (!toks) rc = srv_errorf(e, 400, "'tokens' is required");
    else if (!cJSON_IsArray(toks)) rc = srv_errorf(e, 400, "'tokens' must be an array of token ids, got %s", srv_jtype(toks));
    int i = 0;
    for (const cJSON *x = toks ? toks->child : NULL; !rc && x; x = x->next, i++) {
        if (!is_int(x) || x->valuedouble < 0 || x->valuedouble >= s->n_vocab) {
            rc = srv_errorf(e, 400, "'tokens[%d]' must be a token id in [0, %d)", i, s->n_vocab);
            break;
        }
        char buf[512];
        const int32_t m = sift_token_to_piece(s->vocab, (sift_token)x->valuedouble, buf, sizeof buf, 0, true);
        if (m > 0) sbuf_add(&text, buf, (size_t)m);
    }
    if (!rc) {
        sbuf clean = {0};
        utf8_sanitize(&clean, text.p ? text.p : "", text.n);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "content", clean.p ? clean.p : "");
        *out = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
        sbuf_free(&clean);
        if (!*out) rc = srv_errorf(e, 500, "out of memory");
    }
    sbuf_free(&text);
    cJSON_Delete(root);
    return rc;
}

int srv_handle_apply_template(const srv_server *s, const char *body, size_t len, char **out, srv_error *e)
{
    cJSON *root = parse_object(body, len, e);
    if (!root) return e->status;
    sbuf prompt = {0};
    tc_spec *spec = NULL; /* the prompt a chat request with these tools would get */
    int rc = s->jinja ? tc_parse_request(s->tc_fmt, root, &spec, e) : 0;
    if (spec) spec->no_system = !s->jinja_system_role;
    if (!rc) rc = chat_prompt(s, root, spec, &prompt, NULL, NULL, e);
    tc_spec_free(spec);
    if (!rc) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "prompt", prompt.p ? prompt.p : "");
        *out = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
        if (!*out) rc = srv_errorf(e, 500, "out of memory");
    }
    sbuf_free(&prompt);
    cJSON_Delete(root);
    return rc;
}
