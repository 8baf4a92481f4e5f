/*
 * adaptive_p.c - adaptive-p (llama.cpp PR 17927), a selecting sampler that prefers tokens
 * whose probability is near a target, adapting the target so that the average probability
 * of the picks tracks it.
 *
 * Per step (llama.cpp's arithmetic): softmax without sorting (float sums; data[0] taken as
 * the max when the array says it is sorted); adapted = clamp(2 * target - weighted_sum /
 * total_weight, 0, 1); every finite logit becomes 5 - 10 d^2 / (1 + d) with
 * d = |p - adapted| / 0.3; softmax again; std::discrete_distribution picks. At accept, the
 * picked token's ORIGINAL probability enters the exponential moving average:
 * weighted_sum = p + decay * weighted_sum, total_weight = 1 + decay * total_weight.
 * A negative target just samples the distribution.
 *
 * Only the pick's original probability is kept (llama.cpp keeps the whole vector); the
 * workspace holds the vector during apply. Clone copies everything, the RNG included
 * (llama.cpp's clone reseeds the RNG - not reproduced).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "samplers/samplers.h"

static const sift_sampler_i adaptive_p_iface;

#define DISTRIBUTION_WIDTH 0.3f
#define PEAK_LOGIT_VALUE 5.0f
#define SHARPNESS 10.0f

typedef struct adaptive_p_ctx {
    float target, decay;
    uint32_t seed, seed_cur;
    sift__rng rng;
    float weighted_sum, total_weight;
    sift_token pending_id; /* the token apply picked, until accept */
    float pending_p;       /* its probability before the transform */
} adaptive_p_ctx;

static inline float clampf(float v, float lo, float hi) { return v < lo ? lo : hi < v ? hi : v; } /* std::clamp */

static const char *adaptive_p_name(const sift_sampler *smpl)
{
    (void)smpl;
    return "adaptive-p";
}

static void adaptive_p_apply(sift_sampler *smpl, sift_candidates *cand)
{
    adaptive_p_ctx *ctx = smpl->ctx;
    sift_workspace *ws = sift__ws(cand);
    if (cand->size == 0 || !ws) return;
    sift__softmax(cand, false);
    const size_t n = cand->size;

    if (ctx->target < 0.0f) {
        cand->selected = (int64_t)sift__rng_discrete(&ctx->rng, cand->p, n, (double *)ws->pairs);
        return;
    }

    memcpy(ws->p2, cand->p, n * sizeof *cand->p); /* the original probabilities */

    const float target = clampf(ctx->target, 0.0f, 1.0f);
    const float adapted =
        clampf(ctx->total_weight == 0.0f ? target : 2.0f * target - (ctx->weighted_sum / ctx->total_weight), 0.0f, 1.0f);
    const float inv_width = 1.0f / DISTRIBUTION_WIDTH;
    float *lg = cand->logit;
    for (size_t i = 0; i < n; i++) {
        if (lg[i] == -INFINITY) continue;
        const float d = fabsf((cand->p[i] - adapted) * inv_width);
        lg[i] = PEAK_LOGIT_VALUE - SHARPNESS * d * d / (1.0f + d);
    }
    /* llama.cpp's second softmax still trusts the sorted flag (max = data[0]); keep its
     * arithmetic, then tell the truth: the transformed logits are not in order */
    sift__softmax(cand, false);
    cand->sorted = false;

    const size_t idx = sift__rng_discrete(&ctx->rng, cand->p, n, (double *)ws->pairs);
    cand->selected = (int64_t)idx;
    ctx->pending_id = cand->id[idx];
    ctx->pending_p = ws->p2[idx];
}

static void adaptive_p_accept(sift_sampler *smpl, sift_token token)
{
    adaptive_p_ctx *ctx = smpl->ctx;
    if (ctx->pending_id != SIFT_TOKEN_NULL && ctx->pending_id == token) {
        ctx->weighted_sum = ctx->pending_p + ctx->decay * ctx->weighted_sum;
        ctx->total_weight = 1.0f + ctx->decay * ctx->total_weight;
    }
    ctx->pending_id = SIFT_TOKEN_NULL;
}

static void adaptive_p_reset(sift_sampler *smpl)
{
    adaptive_p_ctx *ctx = smpl->ctx;
    ctx->weighted_sum = ctx->target / (1.0f - ctx->decay);
    ctx->total_weight = 1.0f / (1.0f - ctx->decay);
    ctx->pending_id = SIFT_TOKEN_NULL;
    ctx->pending_p = 0.0f;
    ctx->seed_cur = sift__seed_resolve(ctx->seed);
    sift__rng_seed(&ctx->rng, ctx->seed_cur);
}

static sift_sampler *adaptive_p_clone(const sift_sampler *smpl)
{
    sift_sampler *s = sift__sampler_new(&adaptive_p_iface, sizeof(adaptive_p_ctx));
    if (s) *(adaptive_p_ctx *)s->ctx = *(const adaptive_p_ctx *)smpl->ctx;
    return s;
}

static void adaptive_p_free(sift_sampler *smpl) { free(smpl->ctx); }

/* sift_sampler_get_seed(): the seed in use (the drawn one for SIFT_DEFAULT_SEED) */
static uint32_t adaptive_p_get_seed(const sift_sampler *smpl) { return ((const adaptive_p_ctx *)smpl->ctx)->seed_cur; }

static const sift_sampler_i adaptive_p_iface = {
    .get_seed = adaptive_p_get_seed,
    .name = adaptive_p_name,
    .accept = adaptive_p_accept,
    .apply = adaptive_p_apply,
    .reset = adaptive_p_reset,
    .clone = adaptive_p_clone,
    .free = adaptive_p_free,
};


sift_sampler *sift_sampler_init_adaptive_p(float target, float decay, uint32_t seed)
{
    sift_sampler *s = sift__sampler_new(&adaptive_p_iface, sizeof(adaptive_p_ctx));
    if (!s) return NULL;
    adaptive_p_ctx *ctx = s->ctx;
    ctx->target = target;
    ctx->decay = clampf(decay, 0.0f, 0.99f);
    ctx->seed = seed;
    adaptive_p_reset(s);
    return s;
}
