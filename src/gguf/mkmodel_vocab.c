/*
 * mkmodel_vocab.c - the vocabulary of a self-made model: another GGUF's tokenizer.* pairs,
 * copied, and on request six fill-in-the-middle (FIM) tokens added to them. None of the
 * shared models has FIM tokens, and the server's /infill (llama-server's code-completion
 * prompt) needs a model that has, so the tests make one.
 *
 * Two styles, the two ways GGUF files carry them: Qwen2.5-Coder's six tokens (<|fim_prefix|>,
 * <|fim_suffix|>, <|fim_middle|>, <|fim_pad|>, <|repo_name|>, <|file_sep|>) named by the
 * tokenizer.ggml.fim_{pre,suf,mid,pad,rep,sep}_token_id keys as llama.cpp's converter writes
 * them today, and CodeLlama's four (▁<PRE>, ▁<SUF>, ▁<MID>, ▁<EOT>) named by the older
 * prefix/suffix/middle/eot_token_id keys. Control tokens appended after the last id, so every id
 * the vocabulary had keeps its meaning. With Qwen's repository tokens /infill builds the
 * repository-level prompt (the extra files each after a <|file_sep|>); with CodeLlama's it
 * separates them with llama-server's snippet line.
 *
 * sift__mkmodel_add_fim does the same to a model that exists (`sift mkmodel --fim --from`):
 * every pair and every tensor is copied as it is, except the token embedding and the output
 * head, which get a row per new token: the mean of the trained rows, in the tensor's own
 * type, as transformers' resize_token_embeddings starts new tokens. A zero row would be
 * simpler, but the model has never seen a zero vector: stories260K then answers an /infill
 * prompt with one letter repeated, while from the mean embedding it goes on writing
 * stories. The mean output row gives each new token the mean logit, never the best one, so
 * the copy writes the original's text for any prompt without the new tokens, logit for
 * logit (test_model's test_fim_copy).
 *
 * sift__mkmodel_gemma4_vocab (`sift mkmodel --tokenizer gemma4`) rewrites a copied SentencePiece
 * vocabulary as Gemma 4's tokenizer model, a BPE over characters: the SentencePiece file already
 * has what that needs ("▁" for spaces, "<0xXX>" byte tokens), so it keeps every token and adds
 * "\n", "\n\n" and "\n\n\n" (no merge makes them: only the newline-run rule takes them), and
 * writes merges made from the tokens: for each normal token of two or more characters, best score
 * first, the split into two tokens with the longest left half. Any merge list is a valid
 * vocabulary; this one gives pieces as long as the tokens.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "gguf/ggml_types.h"
#include "gguf/gguf.h"
#include "gguf/mkmodel.h"

static const sift__mkmodel_fim_token qwen[] = {
    {"<|fim_prefix|>", "tokenizer.ggml.fim_pre_token_id"}, {"<|fim_suffix|>", "tokenizer.ggml.fim_suf_token_id"},
    {"<|fim_middle|>", "tokenizer.ggml.fim_mid_token_id"}, {"<|fim_pad|>", "tokenizer.ggml.fim_pad_token_id"},
    {"<|repo_name|>", "tokenizer.ggml.fim_rep_token_id"},  {"<|file_sep|>", "tokenizer.ggml.fim_sep_token_id"},
};
static const sift__mkmodel_fim_token codellama[] = { /* (SentencePiece's U+2581 before each, as CodeLlama's vocabulary has) */
    {"\xE2\x96\x81<PRE>", "tokenizer.ggml.prefix_token_id"}, {"\xE2\x96\x81<SUF>", "tokenizer.ggml.suffix_token_id"},
    {"\xE2\x96\x81<MID>", "tokenizer.ggml.middle_token_id"}, {"\xE2\x96\x81<EOT>", "tokenizer.ggml.eot_token_id"},
};

const sift__mkmodel_fim_token *sift__mkmodel_fim_tokens(int style, int *n)
{
    *n = style == SIFT__FIM_QWEN ? 6 : style == SIFT__FIM_CODELLAMA ? 4 : 0;
    return style == SIFT__FIM_QWEN ? qwen : style == SIFT__FIM_CODELLAMA ? codellama : NULL;
}

/* Keys that say a vocabulary has FIM tokens already (both styles' and the rest of llama.cpp's) */
static const char *const fim_keys[] = {
    "tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.fim_suf_token_id", "tokenizer.ggml.fim_mid_token_id",
    "tokenizer.ggml.fim_pad_token_id", "tokenizer.ggml.fim_rep_token_id", "tokenizer.ggml.fim_sep_token_id",
    "tokenizer.ggml.prefix_token_id",  "tokenizer.ggml.suffix_token_id",  "tokenizer.ggml.middle_token_id",
};

enum { TOKEN_TYPE_NORMAL = 1, TOKEN_TYPE_CONTROL = 3 }; /* llama.cpp's token types in GGUF files */

/* The arrays of the n-token vocabulary in g, with the style's nf FIM tokens ft after them. */
static int add_fim_tokens(sift__gguf_writer *w, const sift_gguf *g, const sift_gguf_value *tok, int64_t n,
                          const sift__mkmodel_fim_token *ft, int nf, sift_error *err)
{
    for (size_t k = 0; k < sizeof fim_keys / sizeof *fim_keys; k++)
        if (sift_gguf_get(g, fim_keys[k]))
            return sift__error_set(err, SIFT_E_INVAL, "mkmodel: the vocabulary has FIM tokens already (%s)", fim_keys[k]);
    const sift_gguf_value *sc = sift_gguf_get(g, "tokenizer.ggml.scores");
    const sift_gguf_value *tt = sift_gguf_get(g, "tokenizer.ggml.token_type");
    if (sc && (sift_gguf_array_type(sc) != SIFT_GGUF_FLOAT32 || (int64_t)sift_gguf_array_n(sc) != n))
        return sift__error_set(err, SIFT_E_FORMAT, "mkmodel: tokenizer.ggml.scores is not %lld float32 values", (long long)n);
    if (tt && (sift_gguf_array_type(tt) != SIFT_GGUF_INT32 || (int64_t)sift_gguf_array_n(tt) != n))
        return sift__error_set(err, SIFT_E_FORMAT, "mkmodel: tokenizer.ggml.token_type is not %lld int32 values", (long long)n);
    const size_t n2 = (size_t)n + (size_t)nf;
    const char **strs = malloc(n2 * sizeof *strs);
    size_t *lens = malloc(n2 * sizeof *lens);
    float *scores = sc ? malloc(n2 * sizeof *scores) : NULL;
    int32_t *types = malloc(n2 * sizeof *types);
    int rc = SIFT_OK;
    if (!strs || !lens || (sc && !scores) || !types) {
        rc = sift__error_set(err, SIFT_E_NOMEM, "mkmodel: out of memory for %zu tokens", n2);
        goto done;
    }
    for (int64_t i = 0; i < n; i++) {
        strs[i] = sift_gguf_array_str(tok, (uint64_t)i, &lens[i]);
        for (int k = 0; k < nf; k++)
            if (lens[i] == strlen(ft[k].text) && !memcmp(strs[i], ft[k].text, lens[i])) {
                rc = sift__error_set(err, SIFT_E_INVAL, "mkmodel: the vocabulary has %s already (token %lld)", ft[k].text,
                                     (long long)i);
                goto done;
            }
    }
    if (sc) memcpy(scores, sift_gguf_array_data(sc), (size_t)n * sizeof *scores);
    if (tt) memcpy(types, sift_gguf_array_data(tt), (size_t)n * sizeof *types);
    else
        for (int64_t i = 0; i < n; i++) types[i] = TOKEN_TYPE_NORMAL; /* (llama.cpp's default without the array) */
    for (int k = 0; k < nf; k++) {
        const size_t i = (size_t)n + (size_t)k;
        strs[i] = ft[k].text;
        lens[i] = strlen(strs[i]);
        if (scores) scores[i] = 0.0f;
        types[i] = TOKEN_TYPE_CONTROL;
    }
    rc = sift__gguf_writer_set_arr_strn(w, "tokenizer.ggml.tokens", strs, lens, n2);
    if (!rc && scores) rc = sift__gguf_writer_set_arr(w, "tokenizer.ggml.scores", SIFT_GGUF_FLOAT32, scores, n2);
    if (!rc) rc = sift__gguf_writer_set_arr(w, "tokenizer.ggml.token_type", SIFT_GGUF_INT32, types, n2);
    for (int k = 0; k < nf && !rc; k++) rc = sift__gguf_writer_set_u32(w, ft[k].key, (uint32_t)n + (uint32_t)k);
    if (rc) rc = sift__error_set(err, rc, "mkmodel: cannot write the vocabulary (%s)", sift_status_str(rc));
done:
    free(strs);
    free(lens);
    free(scores);
    free(types);
    return rc;
}

int sift__mkmodel_copy_vocab(sift__gguf_writer *w, const sift_gguf *g, int fim, int64_t *n_vocab, sift_error *err)
{
    int nf;
    const sift__mkmodel_fim_token *ft = sift__mkmodel_fim_tokens(fim, &nf);
    if (fim && !ft) return sift__error_set(err, SIFT_E_INVAL, "mkmodel: no FIM style %d", fim);
    const sift_gguf_value *tok = sift_gguf_get(g, "tokenizer.ggml.tokens");
    const int64_t n = tok && sift_gguf_array_type(tok) == SIFT_GGUF_STRING ? (int64_t)sift_gguf_array_n(tok) : 0;
    if (n < 1) return sift__error_set(err, SIFT_E_FORMAT, "mkmodel: the vocabulary's file has no tokenizer.ggml.tokens");
    if (n > INT32_MAX - 8) return sift__error_set(err, SIFT_E_FORMAT, "mkmodel: %lld tokens is too many", (long long)n);
    for (int64_t i = 0; i < sift_gguf_n_kv(g); i++) {
        if (strncmp(sift_gguf_key(g, i), "tokenizer.", 10)) continue;
        const int rc = sift__gguf_writer_set_value(w, sift_gguf_key(g, i), sift_gguf_kv_value(g, i));
        if (rc) return sift__error_set(err, rc, "mkmodel: cannot copy %s (%s)", sift_gguf_key(g, i), sift_status_str(rc));
    }
    *n_vocab = n;
    if (!ft) return SIFT_OK;
    const int rc = add_fim_tokens(w, g, tok, n, ft, nf, err);
    if (!rc) *n_vocab = n + nf;
    return rc;
}

/* ---- a gemma4 vocabulary out of a SentencePiece one ------------------------------------------ */

/* The token texts as an open-addressing set: slot = token index + 1, 0 empty. */
typedef struct {
    const char *const *s;
    const size_t *len;
    int32_t *slot;
    size_t mask;
} text_set;

static uint64_t text_hash(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325u;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 0x100000001b3u;
    return h;
}

static bool text_in(const text_set *t, const char *s, size_t n)
{
    for (size_t i = (size_t)text_hash(s, n) & t->mask;; i = (i + 1) & t->mask) {
        const int32_t k = t->slot[i] - 1;
        if (k < 0) return false;
        if (t->len[k] == n && !memcmp(t->s[k], s, n)) return true;
    }
}

static const float *g4_scores; /* for by_score (qsort has no context argument) */

/* best score first; equal scores: lower id first */
static int by_score(const void *a, const void *b)
{
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    if (g4_scores[x] != g4_scores[y]) return g4_scores[x] > g4_scores[y] ? -1 : 1;
    return (x > y) - (x < y);
}

int sift__mkmodel_gemma4_vocab(sift__gguf_writer *w, const sift_gguf *g, int64_t *n_vocab, sift_error *err)
{
    const sift_gguf_value *tok = sift_gguf_get(g, "tokenizer.ggml.tokens"), *sc = sift_gguf_get(g, "tokenizer.ggml.scores"),
                          *tt = sift_gguf_get(g, "tokenizer.ggml.token_type"), *model = sift_gguf_get(g, "tokenizer.ggml.model");
    const char *mname = model ? sift_gguf_value_str(model, NULL) : NULL;
    const int64_t n = tok && sift_gguf_array_type(tok) == SIFT_GGUF_STRING ? (int64_t)sift_gguf_array_n(tok) : 0;
    if (!mname || strcmp(mname, "llama") || n < 1 || n > INT32_MAX - 8 || !sc || sift_gguf_array_type(sc) != SIFT_GGUF_FLOAT32 ||
        (int64_t)sift_gguf_array_n(sc) != n || !tt || sift_gguf_array_type(tt) != SIFT_GGUF_INT32 || (int64_t)sift_gguf_array_n(tt) != n)
        return sift__error_set(err, SIFT_E_INVAL, "mkmodel: --tokenizer gemma4 needs a SentencePiece vocabulary (\"llama\") with scores and types");
    static const char *const extra[] = {"\n", "\n\n", "\n\n\n"};
    const size_t ne = 3, nt = (size_t)n + ne;
    size_t cap = 16;
    while (cap < 2 * nt) cap *= 2;
    const char **strs = malloc(nt * sizeof *strs);
    size_t *lens = malloc(nt * sizeof *lens);
    float *scores = malloc(nt * sizeof *scores);
    int32_t *types = malloc(nt * sizeof *types), *order = malloc((size_t)n * sizeof *order);
    char **merges = calloc((size_t)n, sizeof *merges);
    text_set set = {strs, lens, calloc(cap, sizeof(int32_t)), cap - 1};
    int rc = SIFT_OK;
    int64_t n_merges = 0;
    if (!strs || !lens || !scores || !types || !order || !merges || !set.slot) {
        rc = sift__error_set(err, SIFT_E_NOMEM, "mkmodel: out of memory for %lld tokens", (long long)n);
        goto done;
    }
    for (size_t i = 0; i < nt; i++) {
        if (i < (size_t)n) {
            strs[i] = sift_gguf_array_str(tok, i, &lens[i]);
            scores[i] = ((const float *)sift_gguf_array_data(sc))[i];
            types[i] = ((const int32_t *)sift_gguf_array_data(tt))[i];
            order[i] = (int32_t)i;
        } else {
            strs[i] = extra[i - (size_t)n], lens[i] = strlen(strs[i]), scores[i] = 0.0f, types[i] = TOKEN_TYPE_NORMAL;
        }
        if (text_in(&set, strs[i], lens[i])) {
            rc = sift__error_set(err, SIFT_E_INVAL, "mkmodel: token %zu (%.*s) is there twice", i, (int)(lens[i] > 32 ? 32 : lens[i]), strs[i]);
            goto done;
        }
        size_t h = (size_t)text_hash(strs[i], lens[i]) & set.mask;
        while (set.slot[h]) h = (h + 1) & set.mask;
        set.slot[h] = (int32_t)i + 1;
    }
    g4_scores = scores;
    qsort(order, (size_t)n, sizeof *order, by_score);
    for (int64_t k = 0; k < n; k++) { /* one merge per normal token: its longest left half that is a token */
        const int32_t t = order[k];
        const char *s = strs[t];
        const size_t len = lens[t];
        if (types[t] != TOKEN_TYPE_NORMAL || memchr(s, ' ', len)) continue; /* (a space would split the merge text) */
        size_t cut = 0;
        for (size_t i = 1; i < len; i++)
            if (((uint8_t)s[i] & 0xC0) != 0x80 && text_in(&set, s, i) && text_in(&set, s + i, len - i)) cut = i;
        if (!cut) continue;
        char *m = malloc(len + 2);
        if (!m) {
            rc = sift__error_set(err, SIFT_E_NOMEM, "mkmodel: out of memory for the merges");
            goto done;
        }
        memcpy(m, s, cut);
        m[cut] = ' ';
        memcpy(m + cut + 1, s + cut, len - cut);
        m[len + 1] = 0;
        merges[n_merges++] = m;
    }
    rc = sift__gguf_writer_set_str(w, "tokenizer.ggml.model", "gemma4");
    sift__gguf_writer_remove(w, "tokenizer.ggml.pre"); /* (llama.cpp names gemma4's itself) */
    if (!rc) rc = sift__gguf_writer_set_arr_strn(w, "tokenizer.ggml.tokens", strs, lens, nt);
    if (!rc) rc = sift__gguf_writer_set_arr(w, "tokenizer.ggml.scores", SIFT_GGUF_FLOAT32, scores, nt);
    if (!rc) rc = sift__gguf_writer_set_arr(w, "tokenizer.ggml.token_type", SIFT_GGUF_INT32, types, nt);
    if (!rc) rc = sift__gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", (const char *const *)merges, (uint64_t)n_merges);
    if (rc) rc = sift__error_set(err, rc, "mkmodel: cannot write the vocabulary (%s)", sift_status_str(rc));
    else *n_vocab = (int64_t)nt;
done:
    for (int64_t i = 0; merges && i < n_merges; i++) free(merges[i]);
    free(merges);
    free(order);
    free(types);
    free(scores);
    free(lens);
    free(strs);
    free(set.slot);
    return rc;
}

/* rows[n_old .. n_new) of a per-token tensor = the mean of rows [0, n_old), in its own type
 * (how transformers' resize_token_embeddings starts new tokens) */
static int mean_rows(const sift_gguf_tensor *t, uint8_t *rows, int64_t n_old, int64_t n_new, sift_error *err)
{
    const int64_t n0 = t->ne[0];
    double *acc = calloc((size_t)n0, sizeof *acc);
    float *row = malloc((size_t)n0 * sizeof *row);
    int rc = acc && row ? SIFT_OK : sift__error_set(err, SIFT_E_NOMEM, "mkmodel: out of memory for %s", t->name);
    for (int64_t r = 0; r < n_old && !rc; r++) {
        if ((rc = sift__dequantize_row(t->type, rows + (size_t)r * t->nb[1], row, n0)))
            rc = sift__error_set(err, rc, "mkmodel: cannot read %s's type %d", t->name, (int)t->type);
        for (int64_t i = 0; i < n0 && !rc; i++) acc[i] += row[i];
    }
    for (int64_t i = 0; i < n0 && !rc; i++) row[i] = (float)(acc[i] / (double)n_old);
    for (int64_t r = n_old; r < n_new && !rc; r++)
        if ((rc = sift__quantize_row(t->type, row, rows + (size_t)r * t->nb[1], n0)))
            rc = sift__error_set(err, rc, "mkmodel: cannot write %s's type %d", t->name, (int)t->type);
    free(acc);
    free(row);
    return rc;
}

/* The token embedding and the output head are the tensors with a row per token. */
static bool per_token(const sift_gguf_tensor *t, int64_t n_vocab)
{
    return (!strcmp(t->name, "token_embd.weight") || !strcmp(t->name, "output.weight")) && t->n_dims == 2 && t->ne[1] == n_vocab;
}

sift_status sift__mkmodel_add_fim(const char *path, const char *src, int fim, sift_error *err)
{
    int nf;
    if (!sift__mkmodel_fim_tokens(fim, &nf)) return sift__error_set(err, SIFT_E_INVAL, "mkmodel: no FIM style %d", fim);
    if (!path || !src) return sift__error_set(err, SIFT_E_INVAL, "mkmodel: NULL argument");
    sift_gguf *g = sift_gguf_open(src, err);
    if (!g) return err ? err->status : SIFT_E_IO;
    sift__gguf_writer *w = sift__gguf_writer_new();
    const int64_t n_t = sift_gguf_n_tensors(g);
    void **bufs = calloc((size_t)n_t + 1, sizeof *bufs); /* the tensors with new rows, alive until the write */
    int rc = SIFT_OK;
    if (!w || !bufs) {
        rc = sift__error_set(err, SIFT_E_NOMEM, "mkmodel: out of memory");
        goto done;
    }
    for (int64_t i = 0; i < sift_gguf_n_kv(g) && !rc; i++)
        if (strncmp(sift_gguf_key(g, i), "tokenizer.", 10))
            if ((rc = sift__gguf_writer_set_value(w, sift_gguf_key(g, i), sift_gguf_kv_value(g, i))))
                rc = sift__error_set(err, rc, "mkmodel: cannot copy %s (%s)", sift_gguf_key(g, i), sift_status_str(rc));
    int64_t n_vocab = 0;
    if (rc || (rc = sift__mkmodel_copy_vocab(w, g, fim, &n_vocab, err))) goto done;
    const int64_t n_old = n_vocab - nf;
    const char *arch = NULL;
    char key[160];
    if (sift_gguf_get_str(g, "general.architecture", &arch, NULL) == SIFT_OK) {
        snprintf(key, sizeof key, "%s.vocab_size", arch);
        if (sift_gguf_get(g, key)) rc = sift__gguf_writer_set_u32(w, key, (uint32_t)n_vocab);
    }
    bool grown = false;
    for (int64_t i = 0; i < n_t && !rc; i++) {
        const sift_gguf_tensor *t = sift_gguf_tensor_at(g, i);
        const void *data = t->data;
        uint64_t size = t->size;
        int64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
        if (per_token(t, n_old)) {
            size = t->nb[1] * (uint64_t)n_vocab;
            if (!(bufs[i] = calloc(1, (size_t)size))) {
                rc = sift__error_set(err, SIFT_E_NOMEM, "mkmodel: out of memory for %s", t->name);
                break;
            }
            memcpy(bufs[i], t->data, (size_t)t->size);
            if ((rc = mean_rows(t, bufs[i], n_old, n_vocab, err))) break;
            data = bufs[i];
            ne[1] = n_vocab;
            grown = true;
        }
        rc = sift__gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, ne, data, size, err);
    }
    if (!rc && !grown)
        rc = sift__error_set(err, SIFT_E_FORMAT, "mkmodel: %s has no token_embd.weight with a row per token (%lld)", src,
                             (long long)n_old);
    if (!rc) rc = sift__gguf_writer_write_file(w, path, err);
done:
    if (bufs)
        for (int64_t i = 0; i < n_t; i++) free(bufs[i]);
    free(bufs);
    sift__gguf_writer_free(w);
    sift_gguf_close(g);
    return rc;
}
