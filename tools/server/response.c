/*
 * response.c - what the server answers, in llama-server's and OpenAI's shapes.
 *
 *   /completion (native)     {"content", "tokens", "stop", "stop_type", "stopping_word",
 *                            "generation_settings", "timings", "completion_probabilities",
 *                            "tokens_predicted", "tokens_evaluated", "tokens_cached", ...}
 *                            streamed: one `data: {...}` event per token ("content" = the text
 *                            that token released), then a final event with "stop": true.
 *   /v1/completions          {"object": "text_completion", "choices": [{"text", "index",
 *                            "logprobs", "finish_reason"}], "usage", "id", "created", "model"}
 *   /v1/chat/completions     {"object": "chat.completion", "choices": [{"message": {"role",
 *                            "content"}, "finish_reason", "index"}], "usage", ...}; streamed as
 *                            "chat.completion.chunk" deltas: {"role": "assistant"} first, then
 *                            {"content": ...}, then {} with the finish_reason, then (with
 *                            stream_options.include_usage) a chunk with "usage" and no choices,
 *                            then `data: [DONE]`.
 *
 * n_probs follows llama-server: per token {"id", "token", "bytes", "logprob", "top_logprobs"},
 * or with post_sampling_probs {"prob", "top_probs"}, the probabilities after the chain.
 * Our "trace" adds per token {"id", "piece", "stages": [{"name", "n", "selected", "top":
 * [{"id", "piece", "p"}]}]}: the chain inspector (the logits, then each sampler, and the
 * grammar when it had to step in).
 *
 * Several completions in one request (n > 1, several prompts) are tasks of their own, each
 * answered at its "index": /completion gives an array of its objects, the OpenAI shapes one
 * object whose "choices" hold them all and whose "usage" sums them (the prompt counted once
 * per prompt); streamed, the events of all of them interleave, each with its index, and the
 * usage and `[DONE]` close the stream once (srv_sse_final's `last`).
 * /v1/completions adds OpenAI's legacy logprobs ("tokens", "token_logprobs",
 * "top_logprobs" as {token: logprob}, "text_offset") beside llama-server's "content"; with
 * "echo" the prompt text leads each choice (the logprobs cover the generated tokens only).
 *
 * Errors are {"error": {"code", "message", "type"}} (OpenAI's shape, as llama-server).
 * Everything is built with cJSON and printed unformatted.
 */
#include <cjson/cJSON.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"

/* ---- small helpers ----------------------------------------------------------------------------- */

static char *print_free(cJSON *j)
{
    char *s = j ? cJSON_PrintUnformatted(j) : NULL;
    cJSON_Delete(j);
    return s;
}

/* A string value from bytes that may not be valid UTF-8 (invalid sequences -> U+FFFD). */
static cJSON *str_n(const char *s, size_t n)
{
    sbuf b = {0};
    utf8_sanitize(&b, s ? s : "", s ? n : 0);
    cJSON *j = cJSON_CreateString(b.p ? b.p : "");
    sbuf_free(&b);
    return j;
}

/* The token's text with specials rendered, as llama-server's probabilities show it. */
static int32_t piece(const srv_server *s, sift_token t, char *buf, int32_t cap)
{
    const int32_t n = sift_token_to_piece(s->vocab, t, buf, cap, 0, true);
    return n < 0 ? 0 : n;
}

/* {"id", "token", "bytes", "<key>": value} for a token and a probability. */
static cJSON *prob_item(const srv_server *s, sift_token id, float p, bool post)
{
    char buf[512];
    const int32_t n = piece(s, id, buf, sizeof buf);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "id", id);
    /* "token": the valid UTF-8 prefix (as llama-server), "bytes": all of it */
    const size_t ok = utf8_valid_prefix(buf, (size_t)n);
    cJSON_AddItemToObject(o, "token", str_n(buf, ok));
    cJSON *bytes = cJSON_AddArrayToObject(o, "bytes");
    for (int32_t i = 0; i < n; i++) cJSON_AddItemToArray(bytes, cJSON_CreateNumber((unsigned char)buf[i]));
    if (post) cJSON_AddNumberToObject(o, "prob", p);
    else cJSON_AddNumberToObject(o, "logprob", p > 0 ? log(p) : -FLT_MAX); /* JSON has no -inf */
    return o;
}

/* One token's n_probs entry. probs points at the record's own entries. */
static cJSON *probs_json(const srv_server *s, const srv_task *t, const srv_tokrec *r, const srv_prob *probs)
{
    const bool post = t->req.post_sampling_probs;
    cJSON *o = prob_item(s, r->tok, r->p, post);
    cJSON *top = cJSON_AddArrayToObject(o, post ? "top_probs" : "top_logprobs");
    const int32_t shown = t->req.n_probs_shown;
    const uint32_t n = shown >= 0 && (uint32_t)shown < r->n_probs ? (uint32_t)shown : r->n_probs;
    for (uint32_t i = 0; i < n; i++) cJSON_AddItemToArray(top, prob_item(s, probs[i].id, probs[i].p, post));
    return o;
}

/* One token's chain trace. stages/tops point at the record's own entries (tops: base). */
static cJSON *trace_json(const srv_server *s, const srv_task *t, const srv_tokrec *r, const srv_stage *stages,
                         const srv_prob *tops, size_t tops_base)
{
    char buf[512];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "id", r->tok);
    int32_t n = piece(s, r->tok, buf, sizeof buf);
    cJSON_AddItemToObject(o, "piece", str_n(buf, (size_t)n));
    cJSON *arr = cJSON_AddArrayToObject(o, "stages");
    for (uint32_t i = 0; i < r->n_stages; i++) {
        const srv_stage *st = &stages[i];
        cJSON *so = cJSON_CreateObject();
        cJSON_AddStringToObject(so, "name", st->name >= 0 && st->name < t->n_stage_names ? t->stage_names[st->name] : "?");
        cJSON_AddNumberToObject(so, "n", st->n);
        if (st->has_selected) cJSON_AddNumberToObject(so, "selected", st->selected);
        cJSON *top = cJSON_AddArrayToObject(so, "top");
        for (uint32_t k = 0; k < st->n_top; k++) {
            const srv_prob *pr = &tops[st->top_off - tops_base + k];
            cJSON *c = cJSON_CreateObject();
            cJSON_AddNumberToObject(c, "id", pr->id);
            n = piece(s, pr->id, buf, sizeof buf);
            cJSON_AddItemToObject(c, "piece", str_n(buf, (size_t)n));
            cJSON_AddNumberToObject(c, "p", pr->p);
            cJSON_AddItemToArray(top, c);
        }
        cJSON_AddItemToArray(arr, so);
    }
    return o;
}

static const char *stop_type_str(srv_stop s)
{
    switch (s) {
    case SRV_STOP_EOS: return "eos";
    case SRV_STOP_WORD: return "word";
    case SRV_STOP_LIMIT: return "limit";
    default: return "none";
    }
}

static const char *finish_reason(const srv_task *t)
{
    return t->stop == SRV_STOP_EOS || t->stop == SRV_STOP_WORD ? "stop" : "length";
}

static const char *model_of(const srv_server *s, const srv_task *t)
{
    return t && t->req.model && t->req.kind != SRV_NATIVE ? t->req.model : s->model_name;
}

/* ---- generation settings and timings ------------------------------------------------------------- */

static cJSON *settings_json(const srv_server *s, const srv_request *r, const srv_task *t)
{
    const sift_sampling_params *p = &r->sp;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "n_ctx", s->n_ctx_slot);
    cJSON_AddStringToObject(o, "model", s->model_name);
    cJSON_AddNumberToObject(o, "seed", p->seed);
    if (t) cJSON_AddNumberToObject(o, "seed_used", t->seed_used);
    cJSON_AddNumberToObject(o, "temperature", p->temp);
    cJSON_AddNumberToObject(o, "dynatemp_range", p->dynatemp_range);
    cJSON_AddNumberToObject(o, "dynatemp_exponent", p->dynatemp_exponent);
    cJSON_AddNumberToObject(o, "top_k", p->top_k);
    cJSON_AddNumberToObject(o, "top_p", p->top_p);
    cJSON_AddNumberToObject(o, "min_p", p->min_p);
    cJSON_AddNumberToObject(o, "top_n_sigma", p->top_n_sigma);
    cJSON_AddNumberToObject(o, "xtc_probability", p->xtc_probability);
    cJSON_AddNumberToObject(o, "xtc_threshold", p->xtc_threshold);
    cJSON_AddNumberToObject(o, "typical_p", p->typ_p);
    cJSON_AddNumberToObject(o, "repeat_last_n", p->penalty_last_n);
    cJSON_AddNumberToObject(o, "repeat_penalty", p->penalty_repeat);
    cJSON_AddNumberToObject(o, "presence_penalty", p->penalty_present);
    cJSON_AddNumberToObject(o, "frequency_penalty", p->penalty_freq);
    cJSON_AddNumberToObject(o, "dry_multiplier", p->dry_multiplier);
    cJSON_AddNumberToObject(o, "dry_base", p->dry_base);
    cJSON_AddNumberToObject(o, "dry_allowed_length", p->dry_allowed_length);
    cJSON_AddNumberToObject(o, "dry_penalty_last_n", p->dry_penalty_last_n);
    cJSON *br = cJSON_AddArrayToObject(o, "dry_sequence_breakers");
    for (int i = 0; i < p->n_dry_sequence_breakers; i++) cJSON_AddItemToArray(br, cJSON_CreateString(p->dry_sequence_breakers[i]));
    cJSON_AddNumberToObject(o, "mirostat", p->mirostat);
    cJSON_AddNumberToObject(o, "mirostat_tau", p->mirostat_tau);
    cJSON_AddNumberToObject(o, "mirostat_eta", p->mirostat_eta);
    cJSON_AddNumberToObject(o, "adaptive_target", p->adaptive_target);
    cJSON_AddNumberToObject(o, "adaptive_decay", p->adaptive_decay);
    cJSON *stop = cJSON_AddArrayToObject(o, "stop");
    for (int i = 0; i < r->n_stop; i++) cJSON_AddItemToArray(stop, cJSON_CreateString(r->stop[i]));
    cJSON_AddNumberToObject(o, "max_tokens", r->n_predict);
    cJSON_AddNumberToObject(o, "n_predict", r->n_predict);
    cJSON_AddNumberToObject(o, "n_keep", r->n_keep);
    cJSON_AddNumberToObject(o, "n_discard", r->n_discard);
    cJSON_AddBoolToObject(o, "ignore_eos", p->ignore_eos);
    cJSON_AddBoolToObject(o, "stream", r->stream);
    /* -inf is null, as llama-server's JSON writes it; with ignore_eos, every end-of-generation
     * token's -inf too (what the chain applies) */
    cJSON *lb = cJSON_AddArrayToObject(o, "logit_bias");
    for (size_t i = 0; i < r->n_bias; i++) {
        cJSON *b = cJSON_CreateObject();
        if (isinf(r->bias[i].bias)) cJSON_AddNullToObject(b, "bias");
        else cJSON_AddNumberToObject(b, "bias", r->bias[i].bias);
        cJSON_AddNumberToObject(b, "token", r->bias[i].token);
        cJSON_AddItemToArray(lb, b);
    }
    int32_t n_eog = 0;
    const sift_token *eog = p->ignore_eos ? sift_vocab_eog(s->vocab, &n_eog) : NULL;
    for (int32_t i = 0; eog && i < n_eog; i++) {
        cJSON *b = cJSON_CreateObject();
        cJSON_AddNullToObject(b, "bias");
        cJSON_AddNumberToObject(b, "token", eog[i]);
        cJSON_AddItemToArray(lb, b);
    }
    cJSON_AddNumberToObject(o, "n_probs", r->n_probs);
    cJSON_AddNumberToObject(o, "min_keep", p->min_keep);
    cJSON_AddStringToObject(o, "grammar", r->cgrammar ? sift_compiled_grammar_gbnf(r->cgrammar) : "");
    cJSON *sm = cJSON_AddArrayToObject(o, "samplers");
    for (int i = 0; i < p->n_samplers; i++) cJSON_AddItemToArray(sm, cJSON_CreateString(sift_sampler_type_name(p->samplers[i])));
    if (t) {
        char desc[1024];
        sift_chain_describe(t->chain, desc, sizeof desc);
        cJSON_AddStringToObject(o, "chain", desc);
    }
    cJSON_AddBoolToObject(o, "timings_per_token", r->timings_per_token);
    cJSON_AddBoolToObject(o, "post_sampling_probs", r->post_sampling_probs);
    cJSON_AddBoolToObject(o, "cache_prompt", r->cache_prompt);
    cJSON_AddBoolToObject(o, "trace", r->trace);
    cJSON_AddNumberToObject(o, "speculative.n_max", r->spec.n_max);
    cJSON_AddNumberToObject(o, "speculative.n_min", r->spec.n_min);
    cJSON_AddNumberToObject(o, "speculative.p_min", r->spec.p_min);
    return o;
}

/* Whether the server drafts (--model-draft or --lookup). */
static bool speculative(const srv_server *s) { return s->draft_model || s->cfg.lookup > 0; }

static cJSON *timings_json(const srv_task *t)
{
    cJSON *o = cJSON_CreateObject();
    const int32_t pn = t->req.n_prompt - t->n_cached;
    cJSON_AddNumberToObject(o, "cache_n", t->n_cached);
    cJSON_AddNumberToObject(o, "prompt_n", pn);
    cJSON_AddNumberToObject(o, "prompt_ms", t->t_prompt_ms);
    cJSON_AddNumberToObject(o, "prompt_per_token_ms", pn > 0 ? t->t_prompt_ms / pn : 0);
    cJSON_AddNumberToObject(o, "prompt_per_second", t->t_prompt_ms > 0 ? 1e3 * pn / t->t_prompt_ms : 0);
    cJSON_AddNumberToObject(o, "predicted_n", t->n_decoded);
    cJSON_AddNumberToObject(o, "predicted_ms", t->t_gen_ms);
    cJSON_AddNumberToObject(o, "predicted_per_token_ms", t->n_decoded > 0 ? t->t_gen_ms / t->n_decoded : 0);
    cJSON_AddNumberToObject(o, "predicted_per_second", t->t_gen_ms > 0 ? 1e3 * t->n_decoded / t->t_gen_ms : 0);
    if (t->n_drafted > 0) { /* as llama-server, only where drafts were verified */
        cJSON_AddNumberToObject(o, "draft_n", t->n_drafted);
        cJSON_AddNumberToObject(o, "draft_n_accepted", t->n_draft_accepted);
    }
    return o;
}

/* Tokens of the tasks of one request: the completions' sum, each prompt once. */
static cJSON *usage_json_group(srv_task *const *g, int n)
{
    long long comp = 0, prompt = 0, cached = 0;
    for (int i = 0; i < n; i++) {
        comp += g[i]->n_decoded;
        if (g[i]->req.choice == 0) prompt += g[i]->req.n_prompt, cached += g[i]->n_cached;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "completion_tokens", (double)comp);
    cJSON_AddNumberToObject(o, "prompt_tokens", (double)prompt);
    cJSON_AddNumberToObject(o, "total_tokens", (double)(comp + prompt));
    cJSON_AddNumberToObject(cJSON_AddObjectToObject(o, "prompt_tokens_details"), "cached_tokens", (double)cached);
    return o;
}


/* The prompt as text (malloc'd, *n bytes; NULL on out of memory). echo: as the client
 * wrote it (without the BOS the tokenizer added, llama.cpp's remove_special), else as the
 * model read it. */
static char *prompt_text(const srv_server *s, const srv_task *t, size_t *len, bool echo)
{
    if (echo && t->req.echo_text) {
        *len = strlen(t->req.echo_text);
        return strdup(t->req.echo_text);
    }
    int32_t cap = t->req.n_prompt * 8 + 16;
    char *buf = malloc((size_t)cap);
    int32_t n = buf ? sift_detokenize(s->vocab, t->req.prompt, t->req.n_prompt, buf, cap, echo, true) : 0;
    if (n < 0 && n != INT32_MIN && buf) {
        cap = -n;
        char *b2 = realloc(buf, (size_t)cap);
        if (b2) buf = b2, n = sift_detokenize(s->vocab, t->req.prompt, t->req.n_prompt, buf, cap, echo, true);
    }
    *len = n > 0 ? (size_t)n : 0;
    return buf;
}

static void add_prompt_text(const srv_server *s, cJSON *o, const srv_task *t)
{
    size_t n;
    char *buf = prompt_text(s, t, &n, false);
    cJSON_AddItemToObject(o, "prompt", str_n(buf, buf ? n : 0));
    free(buf);
}

/* A text with the prompt before it when the request echoes (/v1/completions). */
static cJSON *echoed(const srv_server *s, const srv_task *t, const char *txt, size_t n, bool with_prompt)
{
    if (!with_prompt || !t->req.echo) return str_n(txt, n);
    size_t pn;
    char *p = prompt_text(s, t, &pn, true);
    if (!p) return str_n(txt, n);
    char *b = malloc(pn + n + 1);
    cJSON *o;
    if (b) {
        memcpy(b, p, pn);
        if (n) memcpy(b + pn, txt, n);
        o = str_n(b, pn + n);
    } else {
        o = str_n(txt, n);
    }
    free(b);
    free(p);
    return o;
}

/* OpenAI's legacy completion logprobs for records [0, n) into lp: tokens, token_logprobs,
 * top_logprobs ({token: logprob}), text_offset (from off0: the echoed prompt's length). */
static void legacy_logprobs(const srv_server *s, const srv_tokrec *recs, size_t n, const srv_prob *probs,
                            size_t probs_from, uint32_t text_from, size_t off0, cJSON *lp)
{
    cJSON *toks = cJSON_AddArrayToObject(lp, "tokens"), *tlp = cJSON_AddArrayToObject(lp, "token_logprobs");
    cJSON *top = cJSON_AddArrayToObject(lp, "top_logprobs"), *off = cJSON_AddArrayToObject(lp, "text_offset");
    char buf[512];
    uint32_t at = text_from;
    for (size_t i = 0; i < n; i++) {
        const srv_tokrec *r = &recs[i];
        int32_t k = piece(s, r->tok, buf, sizeof buf);
        cJSON_AddItemToArray(toks, str_n(buf, utf8_valid_prefix(buf, (size_t)k)));
        cJSON_AddItemToArray(tlp, cJSON_CreateNumber(r->p > 0 ? log(r->p) : -FLT_MAX));
        cJSON *d = cJSON_CreateObject();
        for (uint32_t j = 0; j < r->n_probs; j++) {
            const srv_prob *pr = &probs[r->probs_off - probs_from + j];
            k = piece(s, pr->id, buf, sizeof buf);
            char key[600];
            const size_t kn = utf8_valid_prefix(buf, (size_t)k);
            memcpy(key, buf, kn);
            key[kn] = 0;
            if (!cJSON_GetObjectItemCaseSensitive(d, key)) cJSON_AddNumberToObject(d, key, pr->p > 0 ? log(pr->p) : -FLT_MAX);
        }
        cJSON_AddItemToArray(top, d);
        cJSON_AddItemToArray(off, cJSON_CreateNumber((double)(off0 + at)));
        at = r->text_end;
    }
}

/* Bytes of the echoed prompt before a choice's text (0 without echo). */
static size_t echo_len(const srv_server *s, const srv_task *t)
{
    if (!t->req.echo) return 0;
    size_t n = 0;
    free(prompt_text(s, t, &n, true));
    return n;
}

/* The OpenAI envelope: id, created, model, system_fingerprint, object. */
static void oai_envelope(const srv_server *s, cJSON *o, const srv_task *t, const char *object)
{
    cJSON_AddNumberToObject(o, "created", (double)t->created);
    cJSON_AddStringToObject(o, "model", model_of(s, t));
    cJSON_AddStringToObject(o, "system_fingerprint", "b" SIFT_VERSION_STRING "-sift"); /* llama-server: b<build>-<commit> */
    cJSON_AddStringToObject(o, "object", object);
    cJSON_AddStringToObject(o, "id", t->oai_id);
}

/* ---- errors ---------------------------------------------------------------------------------------- */

static cJSON *error_obj(const srv_error *e)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *er = cJSON_AddObjectToObject(o, "error");
    cJSON_AddNumberToObject(er, "code", e->status);
    cJSON_AddItemToObject(er, "message", str_n(e->msg, strlen(e->msg)));
    cJSON_AddStringToObject(er, "type", e->type ? e->type : "server_error");
    if (e->type && !strcmp(e->type, "exceed_context_size_error")) {
        cJSON_AddNumberToObject(er, "n_prompt_tokens", e->n_prompt_tokens);
        cJSON_AddNumberToObject(er, "n_ctx", e->n_ctx);
    }
    return o;
}

char *srv_json_error(const srv_error *e) { return print_free(error_obj(e)); }

void srv_sse_error(const srv_error *e, sbuf *out)
{
    char *j = srv_json_error(e);
    sbuf_printf(out, "data: %s\n\n", j ? j : "{}");
    free(j);
}

/* ---- whole responses --------------------------------------------------------------------------------- */

/* Arrays over all the records of a finished task (no lock needed: the engine is done). */
static cJSON *all_probs(const srv_server *s, const srv_task *t)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; i < t->n_recs; i++) cJSON_AddItemToArray(a, probs_json(s, t, &t->recs[i], t->probs + t->recs[i].probs_off));
    return a;
}

static cJSON *all_traces(const srv_server *s, const srv_task *t)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; i < t->n_recs; i++)
        cJSON_AddItemToArray(a, trace_json(s, t, &t->recs[i], t->stages + t->recs[i].trace_off, t->tops, 0));
    return a;
}

static cJSON *native_final(const srv_server *s, srv_task *t, bool with_content)
{
    const srv_request *r = &t->req;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "index", r->index);
    if (with_content) cJSON_AddItemToObject(o, "content", str_n(t->text.p, t->text.n));
    else cJSON_AddStringToObject(o, "content", "");
    cJSON *toks = cJSON_AddArrayToObject(o, "tokens");
    if (with_content && r->return_tokens)
        for (size_t i = 0; i < t->n_recs; i++) cJSON_AddItemToArray(toks, cJSON_CreateNumber(t->recs[i].tok));
    cJSON_AddNumberToObject(o, "id_slot", t->id_slot);
    cJSON_AddBoolToObject(o, "stop", true);
    cJSON_AddStringToObject(o, "model", s->model_name);
    cJSON_AddNumberToObject(o, "tokens_predicted", t->n_decoded);
    cJSON_AddNumberToObject(o, "tokens_evaluated", r->n_prompt);
    cJSON_AddItemToObject(o, "generation_settings", settings_json(s, r, t));
    add_prompt_text(s, o, t);
    cJSON_AddBoolToObject(o, "has_new_line", t->text.n && memchr(t->text.p, '\n', t->text.n) != NULL);
    cJSON_AddBoolToObject(o, "truncated", t->truncated);
    cJSON_AddStringToObject(o, "stop_type", stop_type_str(t->stop));
    cJSON_AddStringToObject(o, "stopping_word", t->stop == SRV_STOP_WORD && t->stop_word >= 0 ? r->stop[t->stop_word] : "");
    cJSON_AddNumberToObject(o, "tokens_cached", t->n_cached);
    cJSON_AddItemToObject(o, "timings", timings_json(t));
    if (with_content && r->n_probs > 0) cJSON_AddItemToObject(o, "completion_probabilities", all_probs(s, t));
    if (with_content && r->trace) cJSON_AddItemToObject(o, "trace", all_traces(s, t));
    return o;
}

/* A stream delta {"reasoning_content": text} (llama-server's field). */
static cJSON *reasoning_delta(const char *p, size_t n)
{
    cJSON *d = cJSON_CreateObject();
    cJSON_AddItemToObject(d, "reasoning_content", str_n(p, n));
    return d;
}

/* One OpenAI choice of a finished task. */
static cJSON *oai_choice(const srv_server *s, srv_task *t)
{
    const srv_request *r = &t->req;
    cJSON *c = cJSON_CreateObject();
    if (r->kind == SRV_OAI_CMPL) {
        cJSON_AddItemToObject(c, "text", echoed(s, t, t->text.p, t->text.n, true));
        cJSON_AddNumberToObject(c, "index", r->index);
        if (r->n_probs > 0) {
            cJSON *lp = cJSON_AddObjectToObject(c, "logprobs");
            cJSON_AddItemToObject(lp, "content", all_probs(s, t));
            legacy_logprobs(s, t->recs, t->n_recs, t->probs, 0, 0, echo_len(s, t), lp);
        } else {
            cJSON_AddNullToObject(c, "logprobs");
        }
        cJSON_AddStringToObject(c, "finish_reason", finish_reason(t));
    } else {
        const char *finish = finish_reason(t);
        cJSON *fr = cJSON_AddStringToObject(c, "finish_reason", finish);
        cJSON_AddNumberToObject(c, "index", r->index);
        cJSON *m = cJSON_AddObjectToObject(c, "message");
        cJSON_AddStringToObject(m, "role", "assistant");
        const char *text = t->text.p ? t->text.p : "";
        size_t text_n = t->text.n;
        sbuf rr = {0}, cc = {0};
        if (r->rs) { /* the thinking apart: reasoning_content, and the rest is the reply (reasoning.c) */
            rs_reply(r->rs, text, text_n, false, &rr, &cc);
            if (rr.n) cJSON_AddItemToObject(m, "reasoning_content", str_n(rr.p, rr.n));
            text = cc.p ? cc.p : "";
            text_n = cc.n;
        }
        if (r->tools) { /* content and tool_calls (tool_calls.c) */
            tc_message_json(r->tools, text, text_n, m, &finish);
            cJSON_SetValuestring(fr, finish);
        } else {
            cJSON_AddItemToObject(m, "content", str_n(text, text_n));
        }
        sbuf_free(&rr);
        sbuf_free(&cc);
        if (r->n_probs > 0) cJSON_AddItemToObject(cJSON_AddObjectToObject(c, "logprobs"), "content", all_probs(s, t));
    }
    if (r->trace) cJSON_AddItemToObject(c, "trace", all_traces(s, t));
    return c;
}

/* full with only the fields t's response_fields names, each under its path (llama-server's
 * json_get_nested_values); a path that leads nowhere is left out. Takes full. */
static cJSON *pick_fields(const srv_task *t, cJSON *full)
{
    cJSON *paths = t->req.response_fields ? cJSON_Parse(t->req.response_fields) : NULL;
    if (!paths) return full;
    cJSON *o = cJSON_CreateObject();
    for (const cJSON *p = paths->child; p; p = p->next) {
        const cJSON *at = full;
        char seg[257];
        for (const char *q = p->valuestring; at && *q;) {
            const char *slash = strchr(q, '/');
            const size_t n = slash ? (size_t)(slash - q) : strlen(q);
            memcpy(seg, q, n < sizeof seg ? n : sizeof seg - 1);
            seg[n < sizeof seg ? n : sizeof seg - 1] = 0;
            at = cJSON_IsObject(at) ? cJSON_GetObjectItemCaseSensitive(at, seg) : NULL;
            q = slash ? slash + 1 : q + n;
        }
        if (at && at != full) cJSON_AddItemToObject(o, p->valuestring, cJSON_Duplicate(at, true));
    }
    cJSON_Delete(paths);
    cJSON_Delete(full);
    return o;
}

char *srv_json_final_group(const srv_server *s, srv_task *const *g, int n)
{
    const srv_request *r = &g[0]->req;
    if (r->kind == SRV_NATIVE) {
        if (n == 1 && r->n_prompts == 1 && r->n_cmpl == 1) return print_free(pick_fields(g[0], native_final(s, g[0], true)));
        cJSON *a = cJSON_CreateArray(); /* llama-server: an array of results for several */
        for (int i = 0; i < n; i++) cJSON_AddItemToArray(a, pick_fields(g[i], native_final(s, g[i], true)));
        return print_free(a);
    }
    cJSON *o = cJSON_CreateObject();
    cJSON *choices = cJSON_AddArrayToObject(o, "choices");
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(choices, oai_choice(s, g[i]));
    oai_envelope(s, o, g[0], r->kind == SRV_OAI_CMPL ? "text_completion" : "chat.completion");
    cJSON_AddItemToObject(o, "usage", usage_json_group(g, n));
    cJSON_AddItemToObject(o, "timings", timings_json(g[0]));
    /* (-v) llama-server's debugging copy of the first result in its own shape, with the
     * prompt as the model saw it */
    if (s->cfg.log_requests) cJSON_AddItemToObject(o, "__verbose", native_final(s, g[0], true));
    return print_free(o);
}

char *srv_json_final(const srv_server *s, srv_task *t) { return srv_json_final_group(s, &t, 1); }

/* ---- streaming ------------------------------------------------------------------------------------------ */

static void sse_add(sbuf *out, cJSON *o)
{
    char *j = print_free(o);
    if (!j) {
        out->oom = true;
        return;
    }
    sbuf_adds(out, "data: ");
    sbuf_adds(out, j);
    sbuf_adds(out, "\n\n");
    free(j);
}

static cJSON *chat_chunk(const srv_server *s, const srv_task *t, cJSON *delta, const char *finish)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *choices = cJSON_AddArrayToObject(o, "choices");
    cJSON *c = cJSON_CreateObject();
    if (finish) cJSON_AddStringToObject(c, "finish_reason", finish);
    else cJSON_AddNullToObject(c, "finish_reason");
    cJSON_AddNumberToObject(c, "index", t->req.index);
    cJSON_AddItemToObject(c, "delta", delta);
    cJSON_AddItemToArray(choices, c);
    oai_envelope(s, o, t, "chat.completion.chunk");
    return o;
}

static void chat_role(const srv_server *s, const srv_task *t, bool *role_sent, sbuf *out)
{
    if (*role_sent) return;
    cJSON *d = cJSON_CreateObject();
    cJSON_AddStringToObject(d, "role", "assistant");
    cJSON_AddNullToObject(d, "content");
    sse_add(out, chat_chunk(s, t, d, NULL));
    *role_sent = true;
}

void srv_sse_progress(const srv_server *s, const srv_task *t, const srv_progress *pr, sbuf *out)
{
    cJSON *o = cJSON_CreateObject();
    if (t->req.kind == SRV_NATIVE) {
        cJSON_AddNumberToObject(o, "index", t->req.index);
        cJSON_AddStringToObject(o, "content", "");
        cJSON_AddBoolToObject(o, "stop", false);
    } else {
        cJSON_AddArrayToObject(o, "choices");
        oai_envelope(s, o, t, t->req.kind == SRV_OAI_CHAT ? "chat.completion.chunk" : "text_completion");
    }
    cJSON *p = cJSON_AddObjectToObject(o, "prompt_progress");
    cJSON_AddNumberToObject(p, "total", pr->total);
    cJSON_AddNumberToObject(p, "cache", pr->cache);
    cJSON_AddNumberToObject(p, "processed", pr->processed);
    cJSON_AddNumberToObject(p, "time_ms", pr->ms);
    sse_add(out, o);
}

void srv_sse_tokens(const srv_server *s, srv_task *t, const srv_snapshot *sn, bool *role_sent, sbuf *out)
{
    const srv_request *r = &t->req;
    size_t text_at = sn->text_from;
    for (size_t i = 0; i < sn->n_recs; i++) {
        const srv_tokrec *rec = &sn->recs[i];
        const char *txt = sn->text + (text_at - sn->text_from);
        size_t txt_n = rec->text_end - text_at;
        text_at = rec->text_end;
        const size_t index = sn->rec_from + i;
        cJSON *probs = r->n_probs > 0 ? probs_json(s, t, rec, sn->probs + (rec->probs_off - sn->probs_from)) : NULL;
        cJSON *trace = r->trace ? trace_json(s, t, rec, sn->stages + (rec->trace_off - sn->stages_from), sn->tops, sn->tops_from)
                                : NULL;
        if (r->kind == SRV_NATIVE) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddNumberToObject(o, "index", r->index);
            cJSON_AddItemToObject(o, "content", str_n(txt, txt_n));
            cJSON *toks = cJSON_AddArrayToObject(o, "tokens");
            cJSON_AddItemToArray(toks, cJSON_CreateNumber(rec->tok));
            cJSON_AddBoolToObject(o, "stop", false);
            cJSON_AddNumberToObject(o, "id_slot", t->id_slot);
            cJSON_AddNumberToObject(o, "tokens_predicted", (double)index + 1);
            cJSON_AddNumberToObject(o, "tokens_evaluated", r->n_prompt);
            if (probs) {
                cJSON *a = cJSON_AddArrayToObject(o, "completion_probabilities");
                cJSON_AddItemToArray(a, probs);
            }
            if (trace) cJSON_AddItemToObject(o, "trace", trace);
            sse_add(out, o);
        } else if (r->kind == SRV_OAI_CMPL) {
            cJSON *o = cJSON_CreateObject();
            cJSON *choices = cJSON_AddArrayToObject(o, "choices");
            cJSON *c = cJSON_CreateObject();
            cJSON_AddItemToObject(c, "text", echoed(s, t, txt, txt_n, index == 0));
            cJSON_AddNumberToObject(c, "index", r->index);
            if (probs) {
                cJSON *lp = cJSON_AddObjectToObject(c, "logprobs");
                cJSON *a = cJSON_AddArrayToObject(lp, "content");
                cJSON_AddItemToArray(a, probs);
                legacy_logprobs(s, rec, 1, sn->probs, sn->probs_from, (uint32_t)(text_at - txt_n), echo_len(s, t), lp);
            } else {
                cJSON_AddNullToObject(c, "logprobs");
            }
            cJSON_AddNullToObject(c, "finish_reason");
            if (trace) cJSON_AddItemToObject(c, "trace", trace);
            cJSON_AddItemToArray(choices, c);
            oai_envelope(s, o, t, "text_completion");
            sse_add(out, o);
        } else {
            chat_role(s, t, role_sent, out);
            /* with reasoning: its deltas first, then the reply's text goes on below (reasoning.c) */
            sbuf rs_r = {0}, rs_c = {0};
            if (r->rs) {
                rs_stream(r->rs, txt, txt_n, &rs_r, &rs_c);
                if (rs_r.n) sse_add(out, chat_chunk(s, t, reasoning_delta(rs_r.p, rs_r.n), NULL));
                txt = rs_c.p ? rs_c.p : "";
                txt_n = rs_c.n;
            }
            sbuf held = {0}; /* with tools: only the text that is surely not a call, then the calls' deltas (tool_calls.c) */
            cJSON *calls = r->tools ? tc_stream_text(r->tools, txt, txt_n, &held) : NULL;
            const char *ct = r->tools ? held.p : txt;
            const size_t ct_n = r->tools ? held.n : txt_n;
            if (ct_n == 0 && !probs && !trace) { /* nothing new to say (text held back) */
                sbuf_free(&held);
                sbuf_free(&rs_r);
                sbuf_free(&rs_c);
                while (calls && calls->child) sse_add(out, chat_chunk(s, t, cJSON_DetachItemViaPointer(calls, calls->child), NULL));
                cJSON_Delete(calls);
                continue;
            }
            cJSON *d = cJSON_CreateObject();
            cJSON_AddItemToObject(d, "content", str_n(ct, ct_n));
            sbuf_free(&held);
            sbuf_free(&rs_r);
            sbuf_free(&rs_c);
            cJSON *o = chat_chunk(s, t, d, NULL);
            cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(o, "choices"), 0);
            if (probs) {
                cJSON *a = cJSON_AddArrayToObject(cJSON_AddObjectToObject(c, "logprobs"), "content");
                cJSON_AddItemToArray(a, probs);
            }
            if (trace) cJSON_AddItemToObject(c, "trace", trace);
            sse_add(out, o);
            while (calls && calls->child) sse_add(out, chat_chunk(s, t, cJSON_DetachItemViaPointer(calls, calls->child), NULL));
            cJSON_Delete(calls);
        }
    }
}

void srv_sse_final(const srv_server *s, srv_task *t, bool *role_sent, sbuf *out)
{
    srv_sse_final_group(s, t, role_sent, &t, 1, true, out);
}

void srv_sse_final_group(const srv_server *s, srv_task *t, bool *role_sent, srv_task *const *g, int n, bool last, sbuf *out)
{
    const srv_request *r = &t->req;
    if (t->err.status) {
        srv_sse_error(&t->err, out);
        return;
    }
    if (r->kind == SRV_NATIVE) {
        sse_add(out, native_final(s, t, false));
        return;
    }
    if (r->kind == SRV_OAI_CMPL) {
        cJSON *o = cJSON_CreateObject();
        cJSON *choices = cJSON_AddArrayToObject(o, "choices");
        cJSON *c = cJSON_CreateObject();
        cJSON_AddItemToObject(c, "text", echoed(s, t, "", 0, t->n_recs == 0)); /* nothing generated: echo here */
        cJSON_AddNumberToObject(c, "index", r->index);
        cJSON_AddNullToObject(c, "logprobs");
        cJSON_AddStringToObject(c, "finish_reason", finish_reason(t));
        cJSON_AddItemToArray(choices, c);
        oai_envelope(s, o, t, "text_completion");
        if (last) {
            cJSON_AddItemToObject(o, "usage", usage_json_group(g, n));
            cJSON_AddItemToObject(o, "timings", timings_json(t));
        }
        sse_add(out, o);
    } else {
        chat_role(s, t, role_sent, out);
        const char *finish = finish_reason(t);
        const char *text = t->text.p ? t->text.p : "";
        size_t text_n = t->text.n;
        sbuf view_r = {0}, view_c = {0}; /* the reply without its thinking (rs_reply) */
        if (r->rs) { /* the reasoning held back; the reply's text is what follows it */
            sbuf rr = {0}, cc = {0};
            rs_stream_final(r->rs, text, text_n, &rr, &cc);
            if (rr.n) sse_add(out, chat_chunk(s, t, reasoning_delta(rr.p, rr.n), NULL));
            if (cc.n && !r->tools) {
                cJSON *d = cJSON_CreateObject();
                cJSON_AddItemToObject(d, "content", str_n(cc.p, cc.n));
                sse_add(out, chat_chunk(s, t, d, NULL));
            }
            sbuf_free(&rr);
            sbuf_free(&cc);
            rs_reply(r->rs, text, text_n, false, &view_r, &view_c);
            text = view_c.p ? view_c.p : "";
            text_n = view_c.n;
        }
        if (r->tools) { /* the content held back, then the calls (tool_calls.c) */
            cJSON *deltas = tc_stream_final(r->tools, text, text_n, &finish);
            while (deltas && deltas->child) sse_add(out, chat_chunk(s, t, cJSON_DetachItemViaPointer(deltas, deltas->child), NULL));
            cJSON_Delete(deltas);
        }
        sbuf_free(&view_r);
        sbuf_free(&view_c);
        cJSON *o = chat_chunk(s, t, cJSON_CreateObject(), finish);
        if (!r->include_usage) cJSON_AddItemToObject(o, "timings", timings_json(t));
        sse_add(out, o);
        if (r->include_usage && last) {
            cJSON *u = cJSON_CreateObject();
            cJSON_AddArrayToObject(u, "choices");
            oai_envelope(s, u, t, "chat.completion.chunk");
            cJSON_AddItemToObject(u, "usage", usage_json_group(g, n));
            cJSON_AddItemToObject(u, "timings", timings_json(t));
            sse_add(out, u);
        }
    }
    if (last) sbuf_adds(out, "data: [DONE]\n\n");
}

/* ---- server information -------------------------------------------------------------------------------- */

const char *srv_file_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

char *srv_json_props(const srv_server *s)
{
    srv_request def = {0};
    def.sp = s->cfg.sampling ? *s->cfg.sampling : sift_sampling_default_params(); /* serve's --temp, ... */
    def.n_predict = s->cfg.default_n_predict;
    def.cache_prompt = true;
    def.stream = false;
    def.spec = srv_draft_defaults(&s->cfg);
    srv_engine_stats st;
    srv_engine_stats_get(s->engine, &st, NULL, 0);
    cJSON *o = cJSON_CreateObject();
    cJSON *d = cJSON_AddObjectToObject(o, "default_generation_settings");
    cJSON_AddNumberToObject(d, "id", 0);
    cJSON_AddNumberToObject(d, "id_task", -1);
    cJSON_AddNumberToObject(d, "n_ctx", s->n_ctx_slot);
    cJSON_AddBoolToObject(d, "speculative", speculative(s));
    cJSON_AddBoolToObject(d, "is_processing", false);
    cJSON_AddItemToObject(d, "params", settings_json(s, &def, NULL));
    cJSON_AddStringToObject(d, "prompt", "");
    cJSON_AddNumberToObject(o, "total_slots", s->cfg.n_parallel);
    cJSON_AddStringToObject(o, "model_path", srv_file_name(s->cfg.model_path)); /* never the directories above it */
    cJSON_AddStringToObject(o, "model_alias", s->model_name);
    cJSON_AddStringToObject(o, "model_desc", s->model_desc);
    cJSON_AddItemToObject(o, "chat_template", str_n(s->tmpl_text ? s->tmpl_text : "", s->tmpl_text ? strlen(s->tmpl_text) : 0));
    cJSON_AddStringToObject(o, "chat_template_name", s->jinja && !s->tmpl_fallback ? "jinja" : chat_name(s->tmpl));
    cJSON_AddBoolToObject(o, "chat_template_detected", (s->jinja && !s->tmpl_fallback) || s->tmpl_detected);
    cJSON *caps = cJSON_AddObjectToObject(o, "chat_template_caps");
    if (s->jinja) {
        tc_caps_json(s->tmpl_text, caps); /* detected from the template's text (tool_calls.c) */
        /* these two rendered by probes at load (chat_jinja_probe_caps, minja's way) */
        cJSON_ReplaceItemInObjectCaseSensitive(caps, "supports_system_role", cJSON_CreateBool(s->jinja_system_role));
        cJSON_AddBoolToObject(caps, "requires_typed_content", s->jinja_typed_content);
        cJSON_AddBoolToObject(caps, "requires_object_arguments", s->jinja_object_args);
    }
    cJSON_AddBoolToObject(cJSON_AddObjectToObject(o, "modalities"), "vision", false);
    cJSON_AddStringToObject(o, "build_info", "sift " SIFT_VERSION_STRING);
    cJSON_AddNumberToObject(o, "n_ctx", s->n_ctx_slot * s->cfg.n_parallel);
    cJSON_AddNumberToObject(o, "n_vocab", s->n_vocab);
    cJSON_AddBoolToObject(o, "is_sleeping", false);
    cJSON *lim = cJSON_AddObjectToObject(o, "limits");
    cJSON_AddNumberToObject(lim, "max_body_bytes", (double)s->cfg.max_body);
    cJSON_AddNumberToObject(lim, "max_n_predict", s->cfg.max_n_predict);
    cJSON_AddNumberToObject(lim, "max_prompt_tokens", s->n_ctx_slot - 1);
    cJSON_AddNumberToObject(lim, "max_queue", s->cfg.max_queue);
    cJSON_AddNumberToObject(lim, "max_n_probs", SRV_MAX_N_PROBS);
    cJSON_AddNumberToObject(lim, "max_trace_top", SRV_MAX_TRACE_TOP);
    cJSON_AddNumberToObject(lim, "max_n_cmpl", s->cfg.n_parallel);          /* n / n_cmpl: one per slot */
    cJSON_AddNumberToObject(lim, "max_prompts", SRV_MAX_PROMPTS);            /* prompts x n per request */
    cJSON_AddNumberToObject(lim, "max_embd_inputs", SRV_MAX_EMBD_INPUTS);
    cJSON_AddBoolToObject(o, "embeddings", s->embd != NULL);                 /* --embeddings */
    sift_grammar_compiler_stats gs;
    sift_grammar_compiler_get_stats(s->gcomp, &gs);
    cJSON *gj = cJSON_AddObjectToObject(o, "grammar_compiler");
    cJSON_AddNumberToObject(gj, "compiles", (double)gs.compiles);
    cJSON_AddNumberToObject(gj, "cache_hits", (double)gs.cache_hits);
    cJSON_AddNumberToObject(gj, "evictions", (double)gs.evictions);
    cJSON_AddNumberToObject(gj, "cached", gs.cached);
    cJSON_AddStringToObject(o, "pooling", srv_pooling_name(s->embd ? srv_embd_pooling(s->embd) : 0));
    return print_free(o);
}

char *srv_json_slots(const srv_server *s)
{
    const int n = s->cfg.n_parallel;
    srv_slot_info *info = calloc((size_t)n, sizeof *info);
    if (!info) return NULL;
    srv_engine_stats st;
    srv_engine_stats_get(s->engine, &st, info, n);
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < n; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "id", info[i].id);
        cJSON_AddNumberToObject(o, "id_task", (double)info[i].id_task);
        cJSON_AddNumberToObject(o, "n_ctx", s->n_ctx_slot);
        cJSON_AddBoolToObject(o, "speculative", speculative(s));
        cJSON_AddBoolToObject(o, "is_processing", info[i].busy);
        cJSON_AddNumberToObject(o, "n_prompt_tokens", info[i].n_prompt);
        cJSON_AddNumberToObject(o, "n_cached_tokens", info[i].n_cached_tokens);
        if (speculative(s)) cJSON_AddNumberToObject(o, "draft_acceptance", info[i].draft_acceptance);
        if (info[i].has_run) { /* llama-server: params and next_token of the slot's task or last task, none before */
            cJSON *pj = cJSON_AddObjectToObject(o, "params"); /* (llama-server's holds every setting; these are the slot's own) */
            cJSON_AddNumberToObject(pj, "speculative.n_max", info[i].spec.n_max);
            cJSON_AddNumberToObject(pj, "speculative.n_min", info[i].spec.n_min);
            cJSON_AddNumberToObject(pj, "speculative.p_min", info[i].spec.p_min);
            cJSON *nt = cJSON_AddObjectToObject(o, "next_token");
            cJSON_AddBoolToObject(nt, "has_next_token", info[i].busy);
            cJSON_AddNumberToObject(nt, "n_decoded", info[i].n_decoded);
        }
        cJSON_AddItemToArray(a, o);
    }
    free(info);
    return print_free(a);
}

/* a before b in byte order (a prefix first), for names of lengths na and nb */
static bool name_before(const char *a, size_t na, const char *b, size_t nb)
{
    const int c = memcmp(a, b, na < nb ? na : nb);
    return c < 0 || (c == 0 && na < nb);
}

char *srv_json_slot_action(int slot, srv_slot_action a, const char *file, const srv_slot_result *res)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "id_slot", slot);
    if (a == SRV_SLOT_ERASE) {
        cJSON_AddNumberToObject(o, "n_erased", (double)res->n_tokens);
        return print_free(o);
    }
    const bool save = a == SRV_SLOT_SAVE;
    cJSON_AddStringToObject(o, "filename", file);
    cJSON_AddNumberToObject(o, save ? "n_saved" : "n_restored", (double)res->n_tokens);
    cJSON_AddNumberToObject(o, save ? "n_written" : "n_read", (double)res->n_bytes);
    cJSON_AddNumberToObject(cJSON_AddObjectToObject(o, "timings"), save ? "save_ms" : "restore_ms", res->ms);
    return print_free(o);
}

char *srv_first_name(const char *list)
{
    const char *best = NULL;
    size_t best_n = 0;
    for (const char *p = list;;) {
        const char *c = strchr(p, ',');
        const size_t n = c ? (size_t)(c - p) : strlen(p);
        if (n && (!best || name_before(p, n, best, best_n))) best = p, best_n = n;
        if (!c) break;
        p = c + 1;
    }
    if (!best) best = list, best_n = strlen(list);
    char *r = malloc(best_n + 1);
    if (r) memcpy(r, best, best_n), r[best_n] = 0;
    return r;
}

/* A comma-separated list as a JSON array of its non-empty names. */
static cJSON *name_list(const char *list)
{
    cJSON *a = cJSON_CreateArray();
    for (const char *p = list; p && *p;) {
        const char *c = strchr(p, ',');
        const size_t n = c ? (size_t)(c - p) : strlen(p);
        if (n) cJSON_AddItemToArray(a, str_n(p, n));
        p = c ? c + 1 : p + n;
    }
    return a;
}

char *srv_json_models(const srv_server *s)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "object", "list");
    cJSON *data = cJSON_AddArrayToObject(o, "data");
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "id", s->model_name);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", (double)s->t_start);
    cJSON_AddStringToObject(m, "owned_by", "sift");
    cJSON_AddItemToObject(m, "aliases", name_list(s->cfg.alias ? s->cfg.alias : s->model_name));
    cJSON_AddItemToObject(m, "tags", name_list(s->cfg.tags));
    cJSON *meta = cJSON_AddObjectToObject(m, "meta");
    cJSON_AddNumberToObject(meta, "vocab_type", sift_vocab_get_type(s->vocab));
    cJSON_AddNumberToObject(meta, "n_vocab", s->n_vocab);
    cJSON_AddNumberToObject(meta, "n_ctx_train", s->info.n_ctx_train);
    cJSON_AddNumberToObject(meta, "n_embd", s->info.n_embd);
    cJSON_AddNumberToObject(meta, "n_params", (double)s->info.n_params);
    cJSON_AddNumberToObject(meta, "size", (double)s->info.n_bytes);
    cJSON_AddItemToArray(data, m);
    return print_free(o);
}

/* One gauge or counter as sift_NAME, and as llama-server's llamacpp:LNAME too when lname is
 * given (dashboards built for llama-server keep working). */
static void metric2(sbuf *b, const char *name, const char *lname, const char *type, const char *help, double v)
{
    sbuf_printf(b, "# HELP sift_%s %s\n# TYPE sift_%s %s\nsift_%s %.17g\n", name, help, name, type, name, v);
    if (lname) sbuf_printf(b, "# HELP llamacpp:%s %s\n# TYPE llamacpp:%s %s\nllamacpp:%s %.17g\n", lname, help, lname, type, lname, v);
}

static void metric(sbuf *b, const char *name, const char *type, const char *help, double v) { metric2(b, name, NULL, type, help, v); }

static void histogram(sbuf *b, const char *name, const char *help, const srv_hist *h)
{
    sbuf_printf(b, "# HELP sift_%s %s\n# TYPE sift_%s histogram\n", name, help, name);
    for (int i = 0; i < SRV_HIST_N; i++) sbuf_printf(b, "sift_%s_bucket{le=\"%g\"} %lld\n", name, srv_hist_bounds[i], h->le[i]);
    sbuf_printf(b, "sift_%s_bucket{le=\"+Inf\"} %lld\nsift_%s_sum %.17g\nsift_%s_count %lld\n", name, h->count, name, h->sum, name,
                h->count);
}

char *srv_text_metrics(const srv_server *s)
{
    srv_engine_stats st;
    srv_engine_stats_get(s->engine, &st, NULL, 0);
    const srv_http_stats *h = &s->http;
    srv_conn_stats cs;
    srv_http_conn_stats(s->httpd, &cs);
    const double n_ctx = (double)s->n_ctx_slot * s->cfg.n_parallel;
    sbuf b = {0};
    metric2(&b, "prompt_tokens_total", "prompt_tokens_total", "counter", "Prompt tokens processed (not counting cached ones).",
            (double)st.n_prompt_tokens);
    metric2(&b, "prompt_seconds_total", "prompt_seconds_total", "counter", "Prompt processing time.", st.t_prompt_s);
    metric(&b, "prompt_tokens_shared_total", "counter", "Prompt tokens read once for several choices of a request (n > 1).",
           (double)st.n_prompt_shared);
    metric2(&b, "tokens_predicted_total", "tokens_predicted_total", "counter", "Generated tokens.", (double)st.n_gen_tokens);
    metric2(&b, "tokens_predicted_seconds_total", "tokens_predicted_seconds_total", "counter",
            "Generation time, summed over requests.", st.t_gen_s);
    metric2(&b, "prompt_tokens_seconds", "prompt_tokens_seconds", "gauge", "Average prompt throughput in tokens/s.",
            st.t_prompt_s > 0 ? st.n_prompt_tokens / st.t_prompt_s : 0);
    metric2(&b, "predicted_tokens_seconds", "predicted_tokens_seconds", "gauge",
            "Average generation throughput per request in tokens/s.", st.t_gen_s > 0 ? st.n_gen_tokens / st.t_gen_s : 0);
    metric2(&b, "requests_processing", "requests_processing", "gauge", "Requests in a slot.", st.n_busy);
    metric2(&b, "requests_deferred", "requests_deferred", "gauge", "Requests waiting for a slot.", st.n_queued);
    metric(&b, "slots_total", "gauge", "Slots (-np).", st.n_slots);
    metric2(&b, "n_decode_total", "n_decode_total", "counter", "sift_decode calls.", (double)st.n_decode);
    metric2(&b, "n_busy_slots_per_decode", "n_busy_slots_per_decode", "gauge", "Average busy slots per sift_decode call.",
            st.n_decode > 0 ? (double)st.n_busy_slot_steps / (double)st.n_decode : 0);
    metric2(&b, "n_tokens_max", "n_tokens_max", "counter", "High-water mark of one slot's context use.", (double)st.n_tokens_max);
    metric(&b, "engine_decode_seconds_total", "counter", "Engine thread time in sift_decode.", st.t_decode_s);
    metric(&b, "engine_sample_seconds_total", "counter", "Engine thread time sampling and publishing tokens.", st.t_sample_s);
    metric(&b, "engine_draft_seconds_total", "counter", "Engine thread time drafting (speculative decoding).", st.t_draft_s);
    metric(&b, "sampling_us_per_token", "gauge", "Average time of one slot's sampling call (sift_chain_sample_ex) per token.",
           st.n_sampled > 0 ? st.t_sampling_s * 1e6 / (double)st.n_sampled : 0);
    metric2(&b, "kv_cells_used", "kv_cache_tokens", "gauge", "KV cells in use (all slots; includes cached prompts).", st.kv_used);
    metric2(&b, "kv_cache_usage_ratio", "kv_cache_usage_ratio", "gauge", "KV cells in use over all cells.",
            n_ctx > 0 ? st.kv_used / n_ctx : 0);
    metric2(&b, "n_drafted_total", "n_drafted_total", "counter", "Draft tokens verified (speculative decoding).",
            (double)st.n_drafted);
    metric2(&b, "n_drafted_accepted_total", "n_drafted_accepted_total", "counter",
            "Draft tokens the target accepted (speculative decoding).", (double)st.n_draft_accepted);
    metric2(&b, "draft_acceptance_ratio", "draft_acceptance_ratio", "gauge", "Accepted over verified draft tokens, since the start.",
            st.n_drafted > 0 ? (double)st.n_draft_accepted / (double)st.n_drafted : 0);
    metric(&b, "requests_completed_total", "counter", "Completions that ran to their end.", (double)st.n_tasks_done);
    sift_grammar_compiler_stats gs;
    sift_grammar_compiler_get_stats(s->gcomp, &gs);
    metric(&b, "grammar_compiles_total", "counter", "Grammars and JSON schemas compiled (cache misses).", (double)gs.compiles);
    metric(&b, "grammar_cache_hits_total", "counter", "Grammars and JSON schemas found compiled (repeated, or a request's other choices).",
           (double)gs.cache_hits);
    metric(&b, "grammar_cache_evictions_total", "counter", "Compiled grammars dropped from the cache (least recently used).",
           (double)gs.evictions);
    metric(&b, "grammar_cached", "gauge", "Compiled grammars in the cache.", gs.cached);
    metric(&b, "requests_cancelled_total", "counter", "Completions whose client went away.", (double)st.n_tasks_cancelled);
    metric(&b, "requests_failed_total", "counter", "Completions that failed while generating.", (double)st.n_tasks_failed);
    metric(&b, "requests_rejected_total", "counter", "Completions refused with 503 (queue full).", (double)st.n_rejected);
    histogram(&b, "queue_time_seconds", "Time from a completion's arrival to a slot taking it.", &st.h_queue);
    histogram(&b, "time_to_first_token_seconds", "Time from a completion's arrival to its first token.", &st.h_ttft);
    histogram(&b, "time_per_output_token_seconds", "Generation time per token after the first, per completion.", &st.h_tpot);
    sbuf_printf(&b, "# HELP sift_http_requests_total HTTP requests by status class.\n# TYPE sift_http_requests_total counter\n");
    sbuf_printf(&b, "sift_http_requests_total{code=\"2xx\"} %lld\n", (long long)atomic_load(&h->n_2xx));
    sbuf_printf(&b, "sift_http_requests_total{code=\"400\"} %lld\n", (long long)atomic_load(&h->n_400));
    sbuf_printf(&b, "sift_http_requests_total{code=\"401_403\"} %lld\n", (long long)atomic_load(&h->n_401_403));
    sbuf_printf(&b, "sift_http_requests_total{code=\"404\"} %lld\n", (long long)atomic_load(&h->n_404));
    sbuf_printf(&b, "sift_http_requests_total{code=\"413\"} %lld\n", (long long)atomic_load(&h->n_413));
    sbuf_printf(&b, "sift_http_requests_total{code=\"503\"} %lld\n", (long long)atomic_load(&h->n_429_503));
    sbuf_printf(&b, "sift_http_requests_total{code=\"5xx\"} %lld\n", (long long)atomic_load(&h->n_5xx));
    metric(&b, "http_disconnects_total", "counter", "Clients that closed the connection before the response ended.",
           (double)atomic_load(&h->n_disconnects));
    metric(&b, "connections_open", "gauge", "Client connections open.", cs.n_open);
    metric(&b, "connections_accepted_total", "counter", "Client connections admitted.", (double)cs.n_accepted);
    metric(&b, "connections_refused_total", "counter", "Connections refused at a connection cap (all busy).", (double)cs.n_refused);
    metric(&b, "connections_evicted_total", "counter", "Idle connections closed to admit new ones at a cap.", (double)cs.n_evicted);
    sbuf_printf(&b, "# HELP sift_connections_timed_out_total Connections closed at the header or body deadline, or for a "
                    "body slower than --min-body-rate.\n"
                    "# TYPE sift_connections_timed_out_total counter\n");
    sbuf_printf(&b, "sift_connections_timed_out_total{phase=\"header\"} %lld\n", cs.n_header_timeouts);
    sbuf_printf(&b, "sift_connections_timed_out_total{phase=\"body\"} %lld\n", cs.n_body_timeouts);
    sbuf_printf(&b, "sift_connections_timed_out_total{phase=\"slow_body\"} %lld\n", cs.n_slow_bodies);
    return b.oom ? (sbuf_free(&b), NULL) : b.p;
}
