/*
 * top_p.c - nucleus sampling: keep the smallest set of most probable tokens whose
 * probabilities add up to p (and at least min_keep).
 *
 * llama.cpp's arithmetic, kept exactly: softmax without sorting (float sum in array
 * order); the probabilities are summed in FLOAT in descending order until the sum
 * reaches p. The order comes from an adaptive partial sort: an unsorted array of more
 * than 1024 entries first gets only its top 256 sorted (out of place, bucket partition);
 * if the cut is not found among them the whole array is sorted and the scan goes on.
 * Smaller unsorted arrays are sorted in place. The kept prefix is written back sorted;
 * p is not renormalized (so the probabilities' validity is dropped when anything is cut).
 */
#include <stdlib.h>

#include "samplers/samplers.h"

typedef struct top_p_ctx {
    sift__op op; /* first: the fast-path descriptor (p, min_keep) */
} top_p_ctx;

static const char *top_p_name(const sift_sampler *smpl)
{
    (void)smpl;
    return "top-p";
}

static void top_p_apply(sift_sampler *smpl, sift_candidates *cand)
{
    const top_p_ctx *ctx = smpl->ctx;
    sift_workspace *ws = sift__ws(cand);
    if (ctx->op.p >= 1.0f || cand->size == 0 || !ws) return;
    sift__softmax(cand, false);

    const size_t n = cand->size;
    const float *p = cand->p;
    const sift__pair *order = NULL; /* descending order when the array itself is not sorted */
    size_t k = n;
    if (!cand->sorted && n > 1024) {
        k = n < 256 ? n : 256;
        sift__bucket_select(cand, k, ws);
        order = ws->pairs;
    } else if (!cand->sorted) {
        sift__partial_sort(cand, n);
    }

    float cum = 0.0f;
    size_t last = n;
    for (size_t i = 0; i < n; ++i) {
        cum += order ? p[order[i].idx] : p[i];
        if (cum >= ctx->op.p && i + 1 >= ctx->op.min_keep) {
            last = i + 1;
            break;
        }
        if (order && i == k - 1 && k < n) { /* not within the top k: sort everything, go on */
            k = n;
            sift__bucket_select(cand, n, ws);
        }
    }
    if (order) {
        sift__gather(cand, ws->pairs, last, ws);
        cand->sorted = true;
    }
    sift__truncate(cand, last);
}

static sift_sampler *top_p_clone(const sift_sampler *smpl)
{
    const top_p_ctx *ctx = smpl->ctx;
    return sift_sampler_init_top_p(ctx->op.p, ctx->op.min_keep);
}

static void top_p_free(sift_sampler *smpl) { free(smpl->ctx); }

static const sift_sampler_i top_p_iface = {
    .name = top_p_name,
    .apply = sift__op_apply,
    .clone = top_p_clone,
    .free = top_p_free,
};

sift_sampler *sift_sampler_init_top_p(float p, size_t min_keep)
{
    if (p >= 1.0f) return sift__sampler_noop("?top-p");
    sift_sampler *s = sift__sampler_new(&top_p_iface, sizeof(top_p_ctx));
    if (s) ((top_p_ctx *)s->ctx)->op = (sift__op){.apply = top_p_apply, .kind = SIFT__OP_TOP_P, .p = p, .min_keep = min_keep};
    return s;
}
