/*
 * mirostat.c - Mirostat 1.0 and 2.0 (Basu et al. 2021), selecting samplers that steer
 * the surprise (-log2 p of the pick) towards tau by adapting mu after every pick.
 *
 * Both follow llama.cpp exactly: softmax with a full sort (float sums), the truncation,
 * a second softmax, then std::discrete_distribution over the float probabilities (see
 * rng.h: doubles, partial sums, lower_bound; no draw for a single candidate).
 *   v1: estimate the Zipf exponent s_hat from the top m probabilities, derive k, keep
 *       the top k (at least 1).
 *   v2: keep the sorted prefix whose surprise is <= mu (at least 1).
 * The state is mu and the RNG; clone copies both (llama.cpp's v1 clone writes them into
 * the source instead - not reproduced).
 */
#include <math.h>
#include <stdlib.h>

#include "samplers/samplers.h"

static const sift_sampler_i mirostat_v2_iface;

static const sift_sampler_i mirostat_iface;

typedef struct mirostat_ctx {
    int32_t n_vocab; /* v1 only */
    uint32_t seed, seed_cur;
    float tau, eta;
    int32_t m; /* v1 only */
    float mu;
    sift__rng rng;
} mirostat_ctx;

static const char *mirostat_name(const sift_sampler *smpl)
{
    (void)smpl;
    return "mirostat";
}

static const char *mirostat_v2_name(const sift_sampler *smpl)
{
    (void)smpl;
    return "mirostat-v2";
}

/* sample from the (sorted, softmaxed) candidates and update mu */
static void pick_and_update(mirostat_ctx *ctx, sift_candidates *cand, sift_workspace *ws)
{
    const size_t idx = sift__rng_discrete(&ctx->rng, cand->p, cand->size, (double *)ws->pairs);
    cand->selected = (int64_t)idx;
    const float observed = -log2f(cand->p[idx]);
    const float e = observed - ctx->tau;
    ctx->mu = ctx->mu - ctx->eta * e;
}

static void mirostat_apply(sift_sampler *smpl, sift_candidates *cand)
{
    mirostat_ctx *ctx = smpl->ctx;
    sift_workspace *ws = sift__ws(cand);
    if (cand->size == 0 || !ws) return;
    sift__softmax(cand, true);
    const float *p = cand->p;

    /* estimate s_hat from the most probable m tokens */
    float sum_ti_bi = 0.0f, sum_ti_sq = 0.0f;
    const size_t m1 = (size_t)(ctx->m - 1); /* as llama.cpp: m = 0 wraps around */
    for (size_t i = 0; i < m1 && i < cand->size - 1; ++i) {
        const float t_i = logf((float)(i + 2) / (float)(i + 1));
        const float b_i = logf(p[i] / p[i + 1]);
        sum_ti_bi += t_i * b_i;
        sum_ti_sq += t_i * t_i;
    }
    const float s_hat = sum_ti_bi / sum_ti_sq;

    /* k from s_hat and the target surprise */
    const float epsilon_hat = s_hat - 1;
    const float k = powf((epsilon_hat * powf(2, ctx->mu)) / (1 - powf((float)ctx->n_vocab, -epsilon_hat)), 1 / s_hat);
    int ki = sift__float_to_int(k);
    if (ki < 1) ki = 1;
    if ((size_t)ki < cand->size) sift__truncate(cand, (size_t)ki); /* sorted: top-k is a cut */

    sift__softmax(cand, true);
    pick_and_update(ctx, cand, ws);
}

static void mirostat_v2_apply(sift_sampler *smpl, sift_candidates *cand)
{
    mirostat_ctx *ctx = smpl->ctx;
    sift_workspace *ws = sift__ws(cand);
    if (cand->size == 0 || !ws) return;
    sift__softmax(cand, true);

    /* truncate the words with surprise values greater than mu */
    size_t n = 0;
    while (n < cand->size && !(-log2f(cand->p[n]) > ctx->mu)) n++;
    sift__truncate(cand, n ? n : 1);

    sift__softmax(cand, true);
    pick_and_update(ctx, cand, ws);
}

static void mirostat_reset(sift_sampler *smpl)
{
    mirostat_ctx *ctx = smpl->ctx;
    ctx->mu = 2.0f * ctx->tau;
    ctx->seed_cur = sift__seed_resolve(ctx->seed);
    sift__rng_seed(&ctx->rng, ctx->seed_cur);
}

static void mirostat_free(sift_sampler *smpl) { free(smpl->ctx); }

static sift_sampler *mirostat_clone(const sift_sampler *smpl)
{
    sift_sampler *s = sift__sampler_new(smpl->iface, sizeof(mirostat_ctx));
    if (s) *(mirostat_ctx *)s->ctx = *(const mirostat_ctx *)smpl->ctx;
    return s;
}

/* sift_sampler_get_seed(): the seed in use (the drawn one for SIFT_DEFAULT_SEED) */
static uint32_t mirostat_get_seed(const sift_sampler *smpl) { return ((const mirostat_ctx *)smpl->ctx)->seed_cur; }

static const sift_sampler_i mirostat_iface = {
    .get_seed = mirostat_get_seed,
    .name = mirostat_name,
    .apply = mirostat_apply,
    .reset = mirostat_reset,
    .clone = mirostat_clone,
    .free = mirostat_free,
};

/* sift_sampler_get_seed(): the seed in use (the drawn one for SIFT_DEFAULT_SEED) */
static uint32_t mirostat_v2_get_seed(const sift_sampler *smpl) { return ((const mirostat_ctx *)smpl->ctx)->seed_cur; }

static const sift_sampler_i mirostat_v2_iface = {
    .get_seed = mirostat_v2_get_seed,
    .name = mirostat_v2_name,
    .apply = mirostat_v2_apply,
    .reset = mirostat_reset,
    .clone = mirostat_clone,
    .free = mirostat_free,
};


static sift_sampler *mirostat_new(const sift_sampler_i *iface, int32_t n_vocab, uint32_t seed, float tau, float eta,
                                  int32_t m)
{
    sift_sampler *s = sift__sampler_new(iface, sizeof(mirostat_ctx));
    if (!s) return NULL;
    mirostat_ctx *ctx = s->ctx;
    ctx->n_vocab = n_vocab;
    ctx->seed = seed;
    ctx->tau = tau;
    ctx->eta = eta;
    ctx->m = m;
    mirostat_reset(s);
    return s;
}

sift_sampler *sift_sampler_init_mirostat(int32_t n_vocab, uint32_t seed, float tau, float eta, int32_t m)
{
    return mirostat_new(&mirostat_iface, n_vocab, seed, tau, eta, m);
}

sift_sampler *sift_sampler_init_mirostat_v2(uint32_t seed, float tau, float eta)
{
    return mirostat_new(&mirostat_v2_iface, 0, seed, tau, eta, 0);
}
