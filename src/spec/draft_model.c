/*
 * draft_model.c - drafting with a second, smaller model (llama.cpp's common_speculative with
 * --model-draft).
 *
 * The draft model runs greedily in a context of its own: from the history's last token it
 * takes the most probable token, decodes it, and so on, up to the depth asked for, stopping
 * after a token whose probability (softmax of the draft's logits) is below p_min: llama.cpp
 * keeps that last uncertain token too, and so does this. The draft's last token is never
 * decoded (no one needs what follows it).
 *
 * The draft's cache follows the history lazily: `kv` records which token sits at each of
 * its positions, and a proposal first compares it with the history, drops the cache from the
 * first difference (the rejected part of the previous draft, or text fed since) and decodes
 * the history's new tokens in batches. After a fully accepted draft that is two tokens (the
 * last draft token and the target's own); after a rejection, one.
 *
 * Vocabulary check: the draft's tokens are the target's ids, so both vocabularies must be
 * the same: size, every token's text, the special ids and BOS handling. llama.cpp tolerates
 * a size difference of up to 128 tokens; sift asks for equality (a draft id the target does
 * not have could not be verified), and names the first token that differs.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "spec/spec.h"

static sift_status vocab_same(const sift_vocab *a, const sift_vocab *b, sift_error *err)
{
    const int32_t na = sift_vocab_n_tokens(a), nb = sift_vocab_n_tokens(b);
    if (na != nb)
        return sift__error_set(err, SIFT_E_INVAL, "draft model: its vocabulary has %d tokens, the target's %d", na, nb);
    if (sift_vocab_get_type(a) != sift_vocab_get_type(b))
        return sift__error_set(err, SIFT_E_INVAL, "draft model: its tokenizer type differs from the target's");
    if (sift_vocab_bos(a) != sift_vocab_bos(b) || sift_vocab_eos(a) != sift_vocab_eos(b) ||
        sift_vocab_eot(a) != sift_vocab_eot(b) || sift_vocab_add_bos(a) != sift_vocab_add_bos(b))
        return sift__error_set(err, SIFT_E_INVAL, "draft model: its special tokens (BOS/EOS/EOT, add_bos) differ from the target's");
    for (int32_t t = 0; t < na; t++) {
        size_t la = 0, lb = 0;
        const char *ta = sift_vocab_token_text(a, t, &la), *tb = sift_vocab_token_text(b, t, &lb);
        if (la != lb || (la && memcmp(ta, tb, la)))
            return sift__error_set(err, SIFT_E_INVAL, "draft model: token %d differs from the target's ('%.*s' vs '%.*s')", t,
                                   (int)(la > 40 ? 40 : la), ta ? ta : "", (int)(lb > 40 ? 40 : lb), tb ? tb : "");
    }
    return SIFT_OK;
}

sift_draft *sift_draft_model_new(const sift_model *draft, const sift_model *target, sift_context_params cparams,
                                 sift_draft_params params, sift_error *err)
{
    if (!draft || !target) {
        sift__error_set(err, SIFT_E_INVAL, "draft model: NULL model");
        return NULL;
    }
    if (vocab_same(sift_model_vocab(draft), sift_model_vocab(target), err) != SIFT_OK) return NULL;
    if (sift_model_is_recurrent(draft)) { /* its drafts are rolled back with sift_kv_seq_rm */
        sift__error_set(err, SIFT_E_UNSUPPORTED, "draft model: it keeps a recurrent state (qwen35), which cannot roll back");
        return NULL;
    }
    sift_draft *d = sift__draft_alloc(DRAFT_MODEL, params, err);
    if (!d) return NULL;
    cparams.n_seq_max = 1;
    d->dctx = sift_context_new(draft, cparams, err);
    if (!d->dctx) {
        sift_draft_free(d);
        return NULL;
    }
    d->n_ctx = (int32_t)sift_n_ctx_seq(d->dctx);
    d->n_vocab = sift_model_n_vocab(draft);
    d->kv = malloc((size_t)d->n_ctx * sizeof *d->kv);
    if (!d->kv || sift_batch_init(&d->batch, (int32_t)sift_n_batch(d->dctx), 1) != SIFT_OK) {
        sift__error_set(err, SIFT_E_NOMEM, "draft model: out of memory");
        sift_draft_free(d);
        return NULL;
    }
    return d;
}

void sift__dmodel_free(sift_draft *d)
{
    sift_batch_free(&d->batch);
    free(d->kv);
    sift_context_free(d->dctx);
}

/* Decode toks[0..n) at positions n_kv.. (batches of n_batch), logits for the last. */
static sift_status dmodel_feed(sift_draft *d, const sift_token *toks, int32_t n, sift_error *err)
{
    for (int32_t i = 0; i < n;) {
        sift_batch_clear(&d->batch);
        const sift_seq_id s0 = 0;
        for (; i < n && d->batch.n_tokens < d->batch.capacity; i++) {
            sift_batch_add(&d->batch, toks[i], d->n_kv + d->batch.n_tokens, &s0, 1, i == n - 1);
        }
        const sift_status st = sift_decode(d->dctx, &d->batch, err);
        if (st != SIFT_OK) return st;
        memcpy(d->kv + d->n_kv, toks + i - d->batch.n_tokens, (size_t)d->batch.n_tokens * sizeof *toks);
        d->n_kv += d->batch.n_tokens;
    }
    return SIFT_OK;
}

/* argmax of the logits and its softmax probability */
static sift_token top1(const float *l, int32_t n, float *p)
{
    int32_t b = 0;
    for (int32_t i = 1; i < n; i++)
        if (l[i] > l[b]) b = i;
    double sum = 0;
    for (int32_t i = 0; i < n; i++) sum += exp((double)l[i] - (double)l[b]);
    *p = (float)(1.0 / sum);
    return b;
}

int32_t sift__dmodel_propose(sift_draft *d, sift_token *out, int32_t cap, sift_error *err)
{
    if (d->n_hist >= d->n_ctx) return 0;
    if (cap > d->n_ctx - d->n_hist) cap = d->n_ctx - d->n_hist;
    /* keep the cached prefix that is still the history; the last history token is always
     * decoded again unless it is cached (its logits are gone after later decodes) */
    int32_t c = 0;
    while (c < d->n_kv && c < d->n_hist && d->kv[c] == d->hist[c]) c++;
    if (c == d->n_hist) c--;
    sift_kv_seq_rm(d->dctx, 0, c, -1);
    d->n_kv = c;
    sift_status st = dmodel_feed(d, d->hist + c, d->n_hist - c, err);
    if (st != SIFT_OK) return st;
    int32_t k = 0;
    while (k < cap) {
        float p;
        const sift_token t = top1(sift_get_logits_ith(d->dctx, -1), d->n_vocab, &p);
        out[k++] = t;
        if (k == cap || p < d->p.p_min) break;
        if ((st = dmodel_feed(d, &t, 1, err)) != SIFT_OK) return st;
    }
    return k;
}
