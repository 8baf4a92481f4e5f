/*
 * infill.c - POST /infill: llama-server's code completion (fill in the middle). The request
 * gives the text before the cursor (input_prefix), after it (input_suffix), optionally other
 * files of the project (input_extra: [{"filename", "text"}]) and the start of the line being
 * typed (prompt); the model writes what goes between. Everything else (sampling fields,
 * stream, n_probs, the answer) is /completion's: this file only builds the prompt's tokens.
 *
 * The prompt is llama-server's (format_prompt_infill), token for token, so that a client
 * written for it (llama.vim, llama.vscode) gets the same completion:
 *
 *   [extra]  [BOS]  FIM_PRE prefix prompt  FIM_SUF suffix  FIM_MID
 *
 * where [extra] is, when the vocabulary has the repository tokens (Qwen2.5-Coder's
 * <|repo_name|> and <|file_sep|>),
 *
 *   FIM_REP "myproject\n"  (FIM_SEP filename "\n" text)...  FIM_SEP "filename\n"
 *
 * and without FIM_SEP each file's text after a "\n\n--- snippet ---\n\n" line (the project
 * and file names are llama-server's own fixed words). With --spm-infill the suffix part
 * comes first (suffix-prefix-middle), as some models are trained.
 *
 * The parts are cut as llama-server cuts them, from the server's settings and not the
 * request's: the prefix keeps its last 3/4 of -b (n_batch) tokens, the suffix its first
 * n_batch/4 - 2 - (prompt's tokens), and the extra context its last
 * n_ctx_slot - n_batch - 2 * (-n) tokens (-n being -1 by default, as there). Prefix, suffix and
 * extra texts are tokenized without special-token parsing (a file that contains
 * "<|fim_prefix|>" is text, not a token); the prompt is tokenized as /completion's prompts
 * are. input_prefix and input_suffix may also be arrays of token ids and strings (llama-server's
 * tokenize_mixed).
 *
 * A model without the prefix, suffix and middle tokens gets 501 not_supported_error, as
 * llama-server answers. `sift mkmodel --fim` makes a model that has them (tests).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "server/server.h"

/* The tokens of text[0..len) appended to out (no BOS, special tokens as the flag says). */
static int add_tokens(const srv_server *s, sbuf *out, const char *name, const char *text, size_t len, bool parse_special,
                      srv_error *e)
{
    int32_t n;
    sift_token *t;
    const int rc = srv_tokenize_field(s, name, text, len, false, parse_special, &t, &n, e);
    if (rc) return rc;
    sbuf_add(out, t, (size_t)n * sizeof *t);
    free(t);
    return out->oom ? srv_errorf(e, 500, "out of memory") : 0;
}

static int add_token(sbuf *out, sift_token t, srv_error *e)
{
    sbuf_add(out, &t, sizeof t);
    return out->oom ? srv_errorf(e, 500, "out of memory") : 0;
}

/* input_prefix / input_suffix: a string, or an array of token ids and strings (llama-server's
 * tokenize_mixed: no BOS, no special-token parsing) */
static int mixed_tokens(const srv_server *s, const cJSON *o, const char *name, sbuf *out, srv_error *e)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!v || cJSON_IsNull(v)) return srv_errorf(e, 400, "'%s' is required", name);
    if (cJSON_IsString(v)) return add_tokens(s, out, name, v->valuestring, strlen(v->valuestring), false, e);
    if (!cJSON_IsArray(v)) return srv_errorf(e, 400, "'%s' must be a string or an array of token ids and strings, got %s", name, srv_jtype(v));
    int i = 0;
    for (const cJSON *x = v->child; x; x = x->next, i++) {
        char where[48];
        snprintf(where, sizeof where, "%s[%d]", name, i);
        int rc;
        if (cJSON_IsString(x)) {
            rc = add_tokens(s, out, where, x->valuestring, strlen(x->valuestring), false, e);
        } else if (cJSON_IsNumber(x) && isfinite(x->valuedouble) && x->valuedouble == floor(x->valuedouble) &&
                   x->valuedouble >= 0 && x->valuedouble < s->n_vocab) {
            rc = add_token(out, (sift_token)x->valuedouble, e);
        } else {
            rc = srv_errorf(e, 400, "'%s' must be a token id in [0, %d) or a string, got %s", where, s->n_vocab, srv_jtype(x));
        }
        if (rc) return rc;
    }
    return 0;
}

/* input_extra's checks (llama-server's: an array of objects with a string "text" and an
 * optional string "filename") and its tokens, before the prefix */
static int extra_tokens(const srv_server *s, const cJSON *o, sbuf *out, srv_error *e)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, "input_extra");
    if (x && !cJSON_IsNull(x) && !cJSON_IsArray(x))
        return srv_errorf(e, 400, "'input_extra' must be an array of {\"filename\": string, \"text\": string}, got %s", srv_jtype(x));
    const sift_token rep = sift_vocab_fim_rep(s->vocab), sep = sift_vocab_fim_sep(s->vocab);
    int rc = 0;
    if (rep != SIFT_TOKEN_NULL && ((rc = add_token(out, rep, e)) || (rc = add_tokens(s, out, "input_extra", "myproject\n", 10, false, e))))
        return rc;
    int i = 0;
    for (const cJSON *c = x && cJSON_IsArray(x) ? x->child : NULL; c; c = c->next, i++) {
        const cJSON *text = cJSON_IsObject(c) ? cJSON_GetObjectItemCaseSensitive(c, "text") : NULL;
        const cJSON *fn = cJSON_IsObject(c) ? cJSON_GetObjectItemCaseSensitive(c, "filename") : NULL;
        if (!cJSON_IsObject(c)) return srv_errorf(e, 400, "'input_extra[%d]' must be an object {\"filename\", \"text\"}, got %s", i, srv_jtype(c));
        if (!cJSON_IsString(text))
            return srv_errorf(e, 400, "'input_extra[%d].text' must be a string, got %s", i, text ? srv_jtype(text) : "nothing");
        if (fn && !cJSON_IsString(fn)) return srv_errorf(e, 400, "'input_extra[%d].filename' must be a string, got %s", i, srv_jtype(fn));
        char where[48];
        snprintf(where, sizeof where, "input_extra[%d]", i);
        if (sep != SIFT_TOKEN_NULL) {
            const char *name = fn ? fn->valuestring : "tmp";
            const size_t n = strlen(name);
            char *line = malloc(n + 2);
            if (!line) return srv_errorf(e, 500, "out of memory");
            memcpy(line, name, n);
            line[n] = '\n', line[n + 1] = 0;
            rc = add_token(out, sep, e);
            if (!rc) rc = add_tokens(s, out, where, line, n + 1, false, e);
            free(line);
        } else {
            static const char snippet[] = "\n\n--- snippet ---\n\n";
            rc = add_tokens(s, out, where, snippet, sizeof snippet - 1, false, e);
        }
        if (rc || (rc = add_tokens(s, out, where, text->valuestring, strlen(text->valuestring), false, e))) return rc;
    }
    if (sep != SIFT_TOKEN_NULL && ((rc = add_token(out, sep, e)) || (rc = add_tokens(s, out, "input_extra", "filename\n", 9, false, e))))
        return rc;
    return 0;
}

int srv_infill_supported(const srv_server *s, srv_error *e)
{
    char missing[96] = "";
    if (sift_vocab_fim_pre(s->vocab) == SIFT_TOKEN_NULL) strcat(missing, ", prefix");
    if (sift_vocab_fim_suf(s->vocab) == SIFT_TOKEN_NULL) strcat(missing, ", suffix");
    if (sift_vocab_fim_mid(s->vocab) == SIFT_TOKEN_NULL) strcat(missing, ", middle");
    if (!*missing) return 0;
    srv_errorf(e, 501, "infill is not supported by this model: its vocabulary has no fill-in-the-middle %s token "
                       "(tokenizer.ggml.fim_pre/suf/mid_token_id)", missing + 2);
    e->type = "not_supported_error";
    return 501;
}

#define NTOK(b) ((int32_t)((b).n / sizeof(sift_token)))

/* count tokens of src from token `from` on, appended to dst */
static void add_range(sbuf *dst, const sbuf *src, long long from, long long count)
{
    if (count > 0) sbuf_add(dst, src->p + (size_t)from * sizeof(sift_token), (size_t)count * sizeof(sift_token));
}

int srv_infill_prompt(const srv_server *s, const cJSON *o, sift_token **out, int32_t *n_out, srv_error *e)
{
    *out = NULL;
    *n_out = 0;
    sbuf pre = {0}, suf = {0}, extra = {0}, prompt = {0}, all = {0};
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(o, "prompt");
    int rc = 0;
    if (p && !cJSON_IsNull(p) && !cJSON_IsString(p)) rc = srv_errorf(e, 400, "'prompt' must be a string, got %s", srv_jtype(p));
    if (!rc) rc = mixed_tokens(s, o, "input_prefix", &pre, e);
    if (!rc) rc = mixed_tokens(s, o, "input_suffix", &suf, e);
    if (!rc) rc = extra_tokens(s, o, &extra, e);
    if (!rc && cJSON_IsString(p)) rc = add_tokens(s, &prompt, "prompt", p->valuestring, strlen(p->valuestring), true, e);
    if (rc) goto done;

    /* llama-server's cut: the prefix 3/4 of a batch, the suffix what is left of the last
     * quarter after the prompt and two FIM tokens, the extra context what the slot holds
     * beyond a batch and twice the server's -n */
    const long long n_batch = s->cfg.n_batch, n_predict = s->cfg.default_n_predict;
    long long take_pre = 3 * (n_batch / 4), take_suf = n_batch / 4 - (2 + (long long)NTOK(prompt));
    long long take_extra = (long long)s->n_ctx_slot - n_batch - 2 * n_predict;
    if (take_pre > NTOK(pre)) take_pre = NTOK(pre);
    if (take_suf < 0) take_suf = 0;
    if (take_suf > NTOK(suf)) take_suf = NTOK(suf);
    if (take_extra < 0) take_extra = 0;
    if (take_extra > NTOK(extra)) take_extra = NTOK(extra);

    sbuf first = {0}, second = {0}; /* prefix part, suffix part (in that order, or swapped with --spm-infill) */
    sbuf *fp = s->cfg.spm_infill ? &second : &first, *sp = s->cfg.spm_infill ? &first : &second;
    add_token(fp, sift_vocab_fim_pre(s->vocab), e);
    add_range(fp, &pre, NTOK(pre) - take_pre, take_pre);
    add_range(fp, &prompt, 0, NTOK(prompt));
    add_token(sp, sift_vocab_fim_suf(s->vocab), e);
    add_range(sp, &suf, 0, take_suf);

    add_range(&all, &extra, NTOK(extra) - take_extra, take_extra);
    if (sift_vocab_add_bos(s->vocab)) add_token(&all, sift_vocab_bos(s->vocab), e);
    add_range(&all, &first, 0, NTOK(first));
    add_range(&all, &second, 0, NTOK(second));
    add_token(&all, sift_vocab_fim_mid(s->vocab), e);
    const bool oom = first.oom || second.oom || all.oom;
    sbuf_free(&first);
    sbuf_free(&second);
    if (oom) {
        rc = srv_errorf(e, 500, "out of memory");
        goto done;
    }
    *n_out = NTOK(all);
    *out = (sift_token *)(void *)all.p;
    all.p = NULL;
done:
    sbuf_free(&pre);
    sbuf_free(&suf);
    sbuf_free(&extra);
    sbuf_free(&prompt);
    sbuf_free(&all);
    return rc;
}
