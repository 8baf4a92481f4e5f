/*
 * typical.c - locally typical sampling (Meister et al. 2022): keep the tokens whose
 * surprise -log p is closest to the entropy, until their probabilities add up to p.
 *
 * llama.cpp's arithmetic: softmax with a full sort; entropy = sum of -p log p (float, in
 * sorted order); score_i = |-logf(p_i) - entropy|; the indices are std::sort'ed by
 * ascending score (here: libstdc++'s introsort on negated scores, which makes the same
 * moves, so ties land where llama.cpp puts them); float running sum until it exceeds p
 * with at least min_keep kept; the kept tokens in score order. The result is not sorted by
 * logit and p is not renormalized.
 */
#include <math.h>
#include <stdlib.h>

#include "samplers/samplers.h"

typedef struct typical_ctx {
    float p;
    size_t min_keep;
} typical_ctx;

static const char *typical_name(const sift_sampler *smpl)
{
    (void)smpl;
    return "typical";
}

static void typical_apply(sift_sampler *smpl, sift_candidates *cand)
{
    const typical_ctx *ctx = smpl->ctx;
    sift_workspace *ws = sift__ws(cand);
    if (ctx->p >= 1.0f || cand->size == 0 || !ws) return;
    sift__softmax(cand, true);
    const size_t n = cand->size;
    const float *p = cand->p;

    float entropy = 0.0f;
    for (size_t i = 0; i < n; ++i) entropy += -p[i] * logf(p[i]);

    sift__pair *order = ws->pairs;
    for (size_t i = 0; i < n; ++i) order[i] = (sift__pair){sift__sort_key(-fabsf(-logf(p[i]) - entropy)), (uint32_t)i};
    sift__stl_sort(order, n); /* descending -score = ascending score */

    float cum = 0.0f;
    size_t last = n;
    for (size_t i = 0; i < n; ++i) {
        cum += p[order[i].idx];
        if (cum > ctx->p && (ctx->min_keep == 0 || i >= ctx->min_keep - 1)) {
            last = i + 1;
            break;
        }
    }
    sift__gather(cand, order, last, ws);
    sift__truncate(cand, last);
    cand->sorted = false;
}

static sift_sampler *typical_clone(const sift_sampler *smpl)
{
    const typical_ctx *ctx = smpl->ctx;
    return sift_sampler_init_typical(ctx->p, ctx->min_keep);
}

static void typical_free(sift_sampler *smpl) { free(smpl->ctx); }

static const sift_sampler_i typical_iface = {
    .name = typical_name,
    .apply = typical_apply,
    .clone = typical_clone,
    .free = typical_free,
};

sift_sampler *sift_sampler_init_typical(float p, size_t min_keep)
{
    if (p >= 1.0f) return sift__sampler_noop("?typical");
    sift_sampler *s = sift__sampler_new(&typical_iface, sizeof(typical_ctx));
    if (s) *(typical_ctx *)s->ctx = (typical_ctx){p, min_keep};
    return s;
}
