/*
 * top_k.c - keep the k highest logits.
 *
 * llama.cpp: k = min(k, size); an unsorted array is partially sorted (std::partial_sort
 * for k <= 128, the bucket partition above), a sorted one is just cut. The result is
 * sorted. k <= 0 is the no-op "?top-k".
 */
#include <stdlib.h>

#include "samplers/samplers.h"

typedef struct top_k_ctx {
    sift__op op; /* first: the fast-path descriptor (k) */
} top_k_ctx;

static const char *top_k_name(const sift_sampler *smpl)
{
    (void)smpl;
    return "top-k";
}

/* llama_sampler_top_k_impl (mirostat uses the same cut) */
static void top_k_apply(sift_sampler *smpl, sift_candidates *cand)
{
    const top_k_ctx *ctx = smpl->ctx;
    if (ctx->op.k <= 0) return;
    const size_t k = (size_t)ctx->op.k < cand->size ? (size_t)ctx->op.k : cand->size;
    if (!cand->sorted) sift__partial_sort(cand, k);
    sift__truncate(cand, k);
}

static sift_sampler *top_k_clone(const sift_sampler *smpl)
{
    return sift_sampler_init_top_k(((const top_k_ctx *)smpl->ctx)->op.k);
}

static void top_k_free(sift_sampler *smpl) { free(smpl->ctx); }

static const sift_sampler_i top_k_iface = {
    .name = top_k_name,
    .apply = sift__op_apply,
    .clone = top_k_clone,
    .free = top_k_free,
};

sift_sampler *sift_sampler_init_top_k(int32_t k)
{
    if (k <= 0) return sift__sampler_noop("?top-k");
    sift_sampler *s = sift__sampler_new(&top_k_iface, sizeof(top_k_ctx));
    if (s) ((top_k_ctx *)s->ctx)->op = (sift__op){.apply = top_k_apply, .kind = SIFT__OP_TOP_K, .k = k};
    return s;
}
