/*
 * top_n_sigma.c - keep the logits within n standard deviations of the maximum
 * (Tang et al. 2024, "Top-nσ"), masking the rest to -inf. The array keeps its order and
 * size (llama.cpp at the reference commit 0ad4a86 neither sorts nor computes
 * probabilities here; later versions append a sorted softmax).
 *
 * llama.cpp's arithmetic: max, sum and count over the finite (not -inf) logits in float;
 * the variance accumulates pow(logit - mean, 2) in DOUBLE into a FLOAT accumulator (C++
 * promotes pow(float, int) to double); std = sqrt(acc / count).
 */
#include <math.h>
#include <stdlib.h>

#include "samplers/samplers.h"

typedef struct top_n_sigma_ctx {
    float n;
} top_n_sigma_ctx;

static const char *top_n_sigma_name(const sift_sampler *smpl)
{
    (void)smpl;
    return "top-n-sigma";
}

static void top_n_sigma_apply(sift_sampler *smpl, sift_candidates *cand)
{
    const top_n_sigma_ctx *ctx = smpl->ctx;
    if (ctx->n <= 0.0f || cand->size <= 1) return;
    const size_t n = cand->size;
    float *lg = cand->logit;

    float max = lg[0];
    float sum = 0.0f;
    size_t valid = 0;
    for (size_t i = 0; i < n; ++i) {
        if (lg[i] != -INFINITY) {
            max = max < lg[i] ? lg[i] : max;
            sum += lg[i];
            valid++;
        }
    }
    const float mean = valid > 0 ? sum / (float)valid : 0;
    float acc = 0;
    for (size_t i = 0; i < n; ++i) {
        if (lg[i] != -INFINITY) {
            const double d = (double)(lg[i] - mean);
            acc = (float)((double)acc + d * d);
        }
    }
    const float sd = valid > 0 ? sqrtf(acc / (float)valid) : 0;

    const float bound = max - (ctx->n * sd);
    for (size_t i = 0; i < n; ++i)
        if (lg[i] < bound) lg[i] = -INFINITY;
    cand->flags &= ~SIFT_CAND_PROBS;
}

static sift_sampler *top_n_sigma_clone(const sift_sampler *smpl)
{
    return sift_sampler_init_top_n_sigma(((const top_n_sigma_ctx *)smpl->ctx)->n);
}

static void top_n_sigma_free(sift_sampler *smpl) { free(smpl->ctx); }

static const sift_sampler_i top_n_sigma_iface = {
    .name = top_n_sigma_name,
    .apply = top_n_sigma_apply,
    .clone = top_n_sigma_clone,
    .free = top_n_sigma_free,
};

sift_sampler *sift_sampler_init_top_n_sigma(float n)
{
    if (n <= 0.0f) return sift__sampler_noop("?top-n-sigma");
    sift_sampler *s = sift__sampler_new(&top_n_sigma_iface, sizeof(top_n_sigma_ctx));
    if (s) ((top_n_sigma_ctx *)s->ctx)->n = n;
    return s;
}
