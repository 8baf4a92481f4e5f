/*
 * min_p.c - keep tokens whose probability is at least p times the top probability.
 *
 * No softmax is needed: p_i >= p * p_max  <=>  logit_i >= max_logit + logf(p). llama.cpp
 * first tries this on an unsorted array in array order (a stable filter) and uses it when
 * it keeps at least min_keep (and at least one) token; otherwise (or when the array is
 * already sorted) it sorts and cuts the sorted array at the first logit below the bound,
 * never before min_keep. Both paths reproduced; the stable filter collects the survivors in
 * the workspace's spare arrays in one pass and copies them back when enough survived.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "samplers/samplers.h"

typedef struct min_p_ctx {
    sift__op op; /* first: the fast-path descriptor (p, min_keep) */
} min_p_ctx;

static const char *min_p_name(const sift_sampler *smpl)
{
    (void)smpl;
    return "min-p";
}

static void min_p_apply(sift_sampler *smpl, sift_candidates *cand)
{
    const min_p_ctx *ctx = smpl->ctx;
    if (ctx->op.p <= 0.0f || cand->size == 0) return;

    sift_workspace *ws = sift__ws(cand);
    if (!cand->sorted && ws) {
        const size_t n = cand->size;
        const float *lg = cand->logit;
        float max_l = -FLT_MAX;
        for (size_t i = 0; i < n; i++) max_l = max_l < lg[i] ? lg[i] : max_l;
        const float min_l = max_l + logf(ctx->op.p);
        /* the survivors, in array order, into the spare arrays (usually a handful) */
        size_t kept = 0;
        for (size_t i = 0; i < n; i++) {
            if (lg[i] >= min_l) {
                ws->id2[kept] = cand->id[i];
                ws->logit2[kept] = lg[i];
                ws->p2[kept] = cand->p[i];
                kept++;
            }
        }
        if (kept > 0 && kept >= ctx->op.min_keep) {
            memcpy(cand->id, ws->id2, kept * sizeof *cand->id);
            memcpy(cand->logit, ws->logit2, kept * sizeof *cand->logit);
            memcpy(cand->p, ws->p2, kept * sizeof *cand->p);
            sift__truncate(cand, kept);
            return;
        }
    }

    if (!cand->sorted) sift__partial_sort(cand, cand->size);
    const float min_l = cand->logit[0] + logf(ctx->op.p);
    size_t i = 1; /* the first token always stays */
    for (; i < cand->size; ++i)
        if (cand->logit[i] < min_l && i >= ctx->op.min_keep) break;
    sift__truncate(cand, i);
}

static sift_sampler *min_p_clone(const sift_sampler *smpl)
{
    const min_p_ctx *ctx = smpl->ctx;
    return sift_sampler_init_min_p(ctx->op.p, ctx->op.min_keep);
}

static void min_p_free(sift_sampler *smpl) { free(smpl->ctx); }

static const sift_sampler_i min_p_iface = {
    .name = min_p_name,
    .apply = sift__op_apply,
    .clone = min_p_clone,
    .free = min_p_free,
};

sift_sampler *sift_sampler_init_min_p(float p, size_t min_keep)
{
    if (p <= 0.0f) return sift__sampler_noop("?min-p");
    sift_sampler *s = sift__sampler_new(&min_p_iface, sizeof(min_p_ctx));
    if (s) ((min_p_ctx *)s->ctx)->op = (sift__op){.apply = min_p_apply, .kind = SIFT__OP_MIN_P, .p = p, .min_keep = min_keep};
    return s;
}
