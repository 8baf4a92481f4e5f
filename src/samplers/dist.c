/*
 * dist.c - sample from softmax(logits): llama.cpp's dist sampler, bit for bit.
 *
 * One uniform double u = generate_canonical<double,53>(mt19937) per step. Then, in array
 * order (no sorting): max (data[0] when sorted), p_i = expf(logit_i - max) stored as
 * float, total in DOUBLE; the pick is the first i whose double running sum of p reaches
 * total * u; every p_i is divided by the total in the same pass, so afterwards p holds the
 * normalized distribution (flags say so). A single candidate still costs a draw (the
 * llama.cpp build of the reference has no shortcut for it); none leaves nothing selected.
 * The arithmetic is sift__dist_core (core/fast.c), shared with the chain's fast path,
 * which runs dist on the caller's logits when it is the chain's only working sampler.
 */
#include <stdlib.h>

#include "core/fast.h"
#include "samplers/samplers.h"

static const sift_sampler_i dist_iface;

typedef struct dist_ctx {
    sift__op op;       /* first: the fast-path descriptor (op.rng = &rng) */
    uint32_t seed;     /* as given (SIFT_DEFAULT_SEED = random) */
    uint32_t seed_cur; /* as used */
    sift__rng rng;
} dist_ctx;

static const char *dist_name(const sift_sampler *smpl)
{
    (void)smpl;
    return "dist";
}

static void dist_apply(sift_sampler *smpl, sift_candidates *cand)
{
    dist_ctx *ctx = smpl->ctx;
    const size_t n = cand->size;
    if (n == 0) {
        cand->selected = -1;
        return;
    }
    cand->selected = sift__dist_core(cand->logit, n, cand->sorted, sift__rng_uniform_double(&ctx->rng), cand->p);
    cand->flags |= SIFT_CAND_PROBS;
}

static void dist_reset(sift_sampler *smpl)
{
    dist_ctx *ctx = smpl->ctx;
    ctx->seed_cur = sift__seed_resolve(ctx->seed);
    sift__rng_seed(&ctx->rng, ctx->seed_cur);
}

static sift_sampler *dist_clone(const sift_sampler *smpl)
{
    sift_sampler *s = sift__sampler_new(&dist_iface, sizeof(dist_ctx));
    if (s) {
        dist_ctx *c = s->ctx;
        *c = *(const dist_ctx *)smpl->ctx;
        c->op.rng = &c->rng;
    }
    return s;
}

static void dist_free(sift_sampler *smpl) { free(smpl->ctx); }

/* sift_sampler_get_seed(): the seed in use (the drawn one for SIFT_DEFAULT_SEED) */
static uint32_t dist_get_seed(const sift_sampler *smpl) { return ((const dist_ctx *)smpl->ctx)->seed_cur; }

static const sift_sampler_i dist_iface = {
    .get_seed = dist_get_seed,
    .name = dist_name,
    .apply = sift__op_apply,
    .reset = dist_reset,
    .clone = dist_clone,
    .free = dist_free,
};


sift_sampler *sift_sampler_init_dist(uint32_t seed)
{
    sift_sampler *s = sift__sampler_new(&dist_iface, sizeof(dist_ctx));
    if (!s) return NULL;
    dist_ctx *ctx = s->ctx;
    ctx->op = (sift__op){.apply = dist_apply, .kind = SIFT__OP_DIST, .rng = &ctx->rng};
    ctx->seed = seed;
    dist_reset(s);
    return s;
}
