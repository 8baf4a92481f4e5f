/*
 * logit_bias.c - add fixed biases to chosen tokens' logits (-INFINITY bans a token).
 *
 * llama.cpp's lookup: a bias whose token sits at its own index (the array is still in
 * vocabulary order there) is applied directly; the rest are searched for in one scan.
 * Biases are applied in the order given, so repeated tokens add up the same way.
 * Unlike llama.cpp (which leaves the flag alone), changing logits of a sorted array clears
 * `sorted`, so a later sampler never trusts an order that no longer holds.
 */
#include <stdlib.h>
#include <string.h>

#include "samplers/samplers.h"

typedef struct logit_bias_ctx {
    int32_t n_vocab;
    size_t n;
    sift_logit_bias *bias;  /* [n] */
    sift_logit_bias *search; /* [n] scratch: biases not found at their index */
} logit_bias_ctx;

static const char *logit_bias_name(const sift_sampler *smpl)
{
    (void)smpl;
    return "logit-bias";
}

static void logit_bias_apply(sift_sampler *smpl, sift_candidates *cand)
{
    logit_bias_ctx *ctx = smpl->ctx;
    size_t n_search = 0;
    bool changed = false;
    for (size_t b = 0; b < ctx->n; b++) {
        const sift_logit_bias lb = ctx->bias[b];
        if (lb.token >= 0 && cand->size > (size_t)lb.token && cand->id[lb.token] == lb.token) {
            cand->logit[lb.token] += lb.bias;
            changed = true;
        } else {
            ctx->search[n_search++] = lb;
        }
    }
    if (n_search) {
        for (size_t i = 0; i < cand->size; i++) {
            for (size_t b = 0; b < n_search; b++) {
                if (cand->id[i] == ctx->search[b].token) {
                    cand->logit[i] += ctx->search[b].bias;
                    changed = true;
                    break;
                }
            }
        }
    }
    if (changed) {
        cand->flags &= ~SIFT_CAND_PROBS;
        cand->sorted = false;
    }
}

static void logit_bias_free(sift_sampler *smpl)
{
    logit_bias_ctx *ctx = smpl->ctx;
    if (!ctx) return;
    free(ctx->bias);
    free(ctx->search);
    free(ctx);
}

static sift_sampler *logit_bias_clone(const sift_sampler *smpl)
{
    const logit_bias_ctx *ctx = smpl->ctx;
    return sift_sampler_init_logit_bias(ctx->n_vocab, ctx->n, ctx->bias);
}

static const sift_sampler_i logit_bias_iface = {
    .name = logit_bias_name,
    .apply = logit_bias_apply,
    .clone = logit_bias_clone,
    .free = logit_bias_free,
};

sift_sampler *sift_sampler_init_logit_bias(int32_t n_vocab, size_t n_bias, const sift_logit_bias *bias)
{
    if (n_bias == 0 || !bias) return sift__sampler_noop("?logit-bias");
    sift_sampler *s = sift__sampler_new(&logit_bias_iface, sizeof(logit_bias_ctx));
    if (!s) return NULL;
    logit_bias_ctx *ctx = s->ctx;
    ctx->n_vocab = n_vocab;
    ctx->n = n_bias;
    ctx->bias = malloc(n_bias * sizeof *ctx->bias);
    ctx->search = malloc(n_bias * sizeof *ctx->search);
    if (!ctx->bias || !ctx->search) {
        sift_sampler_free(s);
        return NULL;
    }
    memcpy(ctx->bias, bias, n_bias * sizeof *bias);
    return s;
}
