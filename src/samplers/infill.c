/*
 * infill.c - llama.cpp's infill sampler, for fill-in-the-middle: end the infill (EOG)
 * when text tokens are collectively unlikely, and merge tokens that are prefixes of one
 * another so that their probability is not split.
 *
 * Steps (llama.cpp's, float arithmetic): softmax with a full sort; if
 * 3 * p(EOG) * n > p(text), keep only the EOG tokens (renormalized). Otherwise, for every
 * pair where token i0's text is a prefix of token i1's, move the smaller probability into
 * the larger one (the donor gets p = 0, logit = -inf); drop text tokens below 0.2;
 * renormalize; drop text tokens below 1/(n_text + 1); renormalize. If no text token
 * survives, the result is the single `eot` token. Token texts are the vocabulary view's
 * pieces, empty for control and unknown tokens (token_to_piece without special tokens).
 *
 * The probabilities left behind are infill's own distribution, not the softmax of the
 * logits, so the flags do not claim probabilities; `sorted` is set to whatever holds.
 * The prefix merge compares every pair: O(n^2), as in llama.cpp; use it after a
 * truncating sampler (top-k), as llama.cpp's infill examples do.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "samplers/samplers.h"

typedef struct infill_ctx {
    const sift_vocab_view *vocab;
    sift_token eot;
} infill_ctx;

static const char *infill_name(const sift_sampler *smpl)
{
    (void)smpl;
    return "infill";
}

static bool is_eog(const sift_vocab_view *v, sift_token t)
{
    return t >= 0 && t < v->n_tokens && v->attr && (v->attr[t] & SIFT_TOKEN_ATTR_EOG);
}

/* token_to_piece(special = false): control and unknown tokens have no text */
static size_t text_of(const sift_vocab_view *v, sift_token t, const char **out)
{
    if (t < 0 || t >= v->n_tokens) return 0;
    if (v->attr && (v->attr[t] & (SIFT_TOKEN_ATTR_CONTROL | SIFT_TOKEN_ATTR_UNKNOWN))) return 0;
    *out = v->piece[t];
    return v->piece_len[t];
}

static void keep_sorted_flag_honest(sift_candidates *c)
{
    c->sorted = true;
    for (size_t i = 1; i < c->size; i++) {
        if (c->logit[i] > c->logit[i - 1]) {
            c->sorted = false;
            return;
        }
    }
}

/* keep entries with p >= thold or EOG; returns (count of kept text tokens) and their p sum */
static size_t filter(sift_candidates *c, const sift_vocab_view *v, float thold, float *p_sum)
{
    const size_t n = c->size;
    size_t w = 0, n_text = 0;
    float sum = 0.0f;
    for (size_t i = 0; i < n; ++i) {
        const bool eog = is_eog(v, c->id[i]);
        if (c->p[i] < thold && !eog) continue;
        if (!eog) ++n_text;
        sum += c->p[i];
        c->id[w] = c->id[i];
        c->logit[w] = c->logit[i];
        c->p[w] = c->p[i];
        w++;
    }
    c->size = w;
    *p_sum = sum;
    return n_text;
}

static void infill_apply(sift_sampler *smpl, sift_candidates *cand)
{
    const infill_ctx *ctx = smpl->ctx;
    const sift_vocab_view *v = ctx->vocab;
    if (cand->size == 0 || !sift__ws(cand)) return;
    sift__softmax(cand, true);
    cand->flags &= ~SIFT_CAND_PROBS; /* from here on p is infill's, not softmax(logits) */

    float p_txt = 0.0f, p_eog = 0.0f;
    for (size_t i = 0; i < cand->size; ++i) {
        if (is_eog(v, cand->id[i])) p_eog += cand->p[i];
        else p_txt += cand->p[i];
    }

    if (3 * p_eog * (float)cand->size > p_txt) { /* keep just the EOG tokens */
        size_t w = 0;
        float p_sum = 0.0f;
        for (size_t i = 0; i < cand->size; ++i) {
            if (!is_eog(v, cand->id[i])) continue;
            p_sum += cand->p[i];
            cand->id[w] = cand->id[i];
            cand->logit[w] = cand->logit[i];
            cand->p[w] = cand->p[i];
            w++;
        }
        cand->size = w;
        for (size_t i = 0; i < w; ++i) cand->p[i] /= p_sum;
        keep_sorted_flag_honest(cand);
        return;
    }

    /* combine tokens with a common prefix */
    for (size_t i0 = 0; i0 < cand->size; ++i0) {
        for (size_t i1 = 0; i1 < cand->size; ++i1) {
            if (cand->logit[i0] == -INFINITY) break;
            if (i0 == i1 || cand->logit[i1] == -INFINITY) continue;
            const char *t0 = NULL, *t1 = NULL;
            const size_t len0 = text_of(v, cand->id[i0], &t0);
            const size_t len1 = text_of(v, cand->id[i1], &t1);
            if (len0 > 0 && len0 <= len1 && memcmp(t0, t1, len0) == 0) { /* i0 is a prefix of i1 */
                size_t dst = i0, src = i1;
                if (cand->p[i1] > cand->p[i0]) dst = i1, src = i0;
                cand->p[dst] += cand->p[src];
                cand->logit[src] = -INFINITY;
                cand->p[src] = 0.0f;
            }
        }
    }

    float p_sum;
    const size_t n_text = filter(cand, v, 0.2f, &p_sum);
    if (n_text == 0) { /* reduce to the single EOT token */
        if (ctx->eot != SIFT_TOKEN_NULL) {
            cand->size = 1;
            cand->id[0] = ctx->eot;
            cand->logit[0] = 1.0f;
        }
        keep_sorted_flag_honest(cand);
        return;
    }
    for (size_t i = 0; i < cand->size; ++i) cand->p[i] /= p_sum;

    filter(cand, v, (float)(1.0 / (double)(n_text + 1)), &p_sum);
    for (size_t i = 0; i < cand->size; ++i) cand->p[i] /= p_sum;
    keep_sorted_flag_honest(cand);
}

static sift_sampler *infill_clone(const sift_sampler *smpl)
{
    const infill_ctx *ctx = smpl->ctx;
    return sift_sampler_init_infill(ctx->vocab, ctx->eot);
}

static void infill_free(sift_sampler *smpl) { free(smpl->ctx); }

static const sift_sampler_i infill_iface = {
    .name = infill_name,
    .apply = infill_apply,
    .clone = infill_clone,
    .free = infill_free,
};

sift_sampler *sift_sampler_init_infill(const sift_vocab_view *vocab, sift_token eot)
{
    if (!vocab || !vocab->piece || !vocab->piece_len || vocab->n_tokens < 1) return NULL;
    sift_sampler *s = sift__sampler_new(&infill_iface, sizeof(infill_ctx));
    if (s) *(infill_ctx *)s->ctx = (infill_ctx){vocab, eot};
    return s;
}
