/*
 * xtc.c - "exclude top choices" (Kalomaze / p-e-w): with probability p, remove every
 * token whose probability is at least t except the least probable of them, so the
 * model's most predictable continuations are skipped now and then.
 *
 * llama.cpp: the chance is one std::uniform_real_distribution<float> draw (ONE 32-bit
 * output) per apply, drawn only when the sampler is enabled and at least 2 tokens remain;
 * then softmax with a full sort, find the last index whose p >= t, and drop everything
 * before it (if at least min_keep remain) by advancing the array pointers. The remaining
 * probabilities are not renormalized.
 */
#include <stdlib.h>

#include "samplers/samplers.h"

typedef struct xtc_ctx {
    float probability, threshold;
    size_t min_keep;
    uint32_t seed, seed_cur;
    sift__rng rng;
} xtc_ctx;

static const char *xtc_name(const sift_sampler *smpl)
{
    (void)smpl;
    return "xtc";
}

static void xtc_apply(sift_sampler *smpl, sift_candidates *cand)
{
    xtc_ctx *ctx = smpl->ctx;
    if (ctx->probability <= 0.0f || ctx->threshold > 0.5f || cand->size < 2) return;
    const float chance = sift__rng_uniform_float(&ctx->rng);
    if (chance > ctx->probability) return;

    sift__softmax(cand, true);
    size_t pos_last = 0;
    for (size_t i = 0; i < cand->size; ++i) {
        if (cand->p[i] >= ctx->threshold) pos_last = i;
        else break;
    }
    if (cand->size - pos_last >= ctx->min_keep && pos_last > 0) {
        cand->id += pos_last;
        cand->logit += pos_last;
        cand->p += pos_last;
        cand->size -= pos_last;
        cand->capacity -= pos_last;
        cand->flags &= ~SIFT_CAND_PROBS;
    }
}

static void xtc_reset(sift_sampler *smpl)
{
    xtc_ctx *ctx = smpl->ctx;
    ctx->seed_cur = sift__seed_resolve(ctx->seed);
    sift__rng_seed(&ctx->rng, ctx->seed_cur);
}

static void xtc_free(sift_sampler *smpl) { free(smpl->ctx); }

static sift_sampler *xtc_clone(const sift_sampler *smpl);

static const sift_sampler_i xtc_iface = {
    .name = xtc_name,
    .apply = xtc_apply,
    .reset = xtc_reset,
    .clone = xtc_clone,
    .free = xtc_free,
};

static sift_sampler *xtc_clone(const sift_sampler *smpl)
{
    sift_sampler *s = sift__sampler_new(&xtc_iface, sizeof(xtc_ctx));
    if (s) *(xtc_ctx *)s->ctx = *(const xtc_ctx *)smpl->ctx;
    return s;
}

sift_sampler *sift_sampler_init_xtc(float p, float t, size_t min_keep, uint32_t seed)
{
    if (p <= 0.0f || t > 0.5f) return sift__sampler_noop("?xtc");
    sift_sampler *s = sift__sampler_new(&xtc_iface, sizeof(xtc_ctx));
    if (!s) return NULL;
    xtc_ctx *ctx = s->ctx;
    ctx->probability = p;
    ctx->threshold = t;
    ctx->min_keep = min_keep;
    ctx->seed = seed;
    xtc_reset(s);
    return s;
}
