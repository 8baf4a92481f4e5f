/*
 * temp.c - temperature and dynamic temperature (temp_ext).
 *
 * temp(t): logits /= t (a division, as llama.cpp). t <= 0 keeps only the first maximum
 * and sets every other logit to -inf, which makes any later sampler greedy. The order is
 * unchanged either way, so `sorted` stays as it was; the probabilities are stale.
 *
 * temp_ext(t, delta, exponent) with delta > 0 (llama.cpp's dynatemp): softmax with a full
 * sort, entropy over the probabilities (float), normalized by log(size); the temperature
 * is t - delta .. t + delta by (entropy / max_entropy)^exponent; after scaling, the
 * probabilities are recomputed in DOUBLE (exp of the difference to data[0], double sum)
 * and stored, so they are valid afterwards. delta <= 0 is plain temp(t).
 */
#include <math.h>
#include <stdlib.h>

#include "samplers/samplers.h"

typedef struct temp_ctx {
    float temp, delta, exponent;
} temp_ctx;

/* llama_sampler_temp_impl */
static void temp_impl(sift_candidates *cand, float temp)
{
    const size_t n = cand->size;
    float *lg = cand->logit;
    if (n == 0) return;
    if (temp <= 0.0f) {
        size_t max_i = 0;
        float max_l = lg[0];
        for (size_t i = 1; i < n; ++i) {
            if (lg[i] > max_l) {
                lg[max_i] = -INFINITY;
                max_i = i;
                max_l = lg[i];
            } else {
                lg[i] = -INFINITY;
            }
        }
    } else {
        for (size_t i = 0; i < n; ++i) lg[i] /= temp;
    }
    cand->flags &= ~SIFT_CAND_PROBS;
}

static const char *temp_name(const sift_sampler *smpl)
{
    (void)smpl;
    return "temp";
}

static const char *temp_ext_name(const sift_sampler *smpl)
{
    (void)smpl;
    return "temp-ext";
}

static void temp_apply(sift_sampler *smpl, sift_candidates *cand)
{
    temp_impl(cand, ((const temp_ctx *)smpl->ctx)->temp);
}

static void temp_ext_apply(sift_sampler *smpl, sift_candidates *cand)
{
    const temp_ctx *ctx = smpl->ctx;
    if (!(ctx->delta > 0)) {
        temp_impl(cand, ctx->temp);
        return;
    }
    const float min_temp = 0.0f < ctx->temp - ctx->delta ? ctx->temp - ctx->delta : 0.0f; /* std::max */
    const float max_temp = ctx->temp + ctx->delta;
    if (cand->size <= 1) return;

    const float max_entropy = -logf(1.0f / (float)cand->size);
    sift__softmax(cand, true);
    const size_t n = cand->size;
    float *p = cand->p;
    float entropy = 0.0f;
    for (size_t i = 0; i < n; ++i)
        if (p[i] > 0.0f) entropy -= p[i] * logf(p[i]);
    const float normalized = entropy / max_entropy;
    const float dyn_temp = min_temp + (max_temp - min_temp) * powf(normalized, ctx->exponent);

    temp_impl(cand, dyn_temp);

    const float *lg = cand->logit;
    const double max_l = lg[0];
    double sum = 0.0;
    for (size_t i = 0; i < n; ++i) {
        const double e = exp(lg[i] - max_l);
        p[i] = (float)e;
        sum += e;
    }
    for (size_t i = 0; i < n; ++i) p[i] = (float)((double)p[i] / sum);
    cand->flags |= SIFT_CAND_PROBS;
}

static void temp_free(sift_sampler *smpl) { free(smpl->ctx); }

static sift_sampler *temp_clone(const sift_sampler *smpl);
static sift_sampler *temp_ext_clone(const sift_sampler *smpl);

static const sift_sampler_i temp_iface = {
    .name = temp_name,
    .apply = temp_apply,
    .clone = temp_clone,
    .free = temp_free,
};

static const sift_sampler_i temp_ext_iface = {
    .name = temp_ext_name,
    .apply = temp_ext_apply,
    .clone = temp_ext_clone,
    .free = temp_free,
};

static sift_sampler *temp_new(const sift_sampler_i *iface, float t, float delta, float exponent)
{
    sift_sampler *s = sift__sampler_new(iface, sizeof(temp_ctx));
    if (s) *(temp_ctx *)s->ctx = (temp_ctx){t, delta, exponent};
    return s;
}

static sift_sampler *temp_clone(const sift_sampler *smpl)
{
    const temp_ctx *c = smpl->ctx;
    return temp_new(&temp_iface, c->temp, c->delta, c->exponent);
}

static sift_sampler *temp_ext_clone(const sift_sampler *smpl)
{
    const temp_ctx *c = smpl->ctx;
    return temp_new(&temp_ext_iface, c->temp, c->delta, c->exponent);
}

sift_sampler *sift_sampler_init_temp(float t)
{
    if (t == 1.0f) return sift__sampler_noop("?temp");
    return temp_new(&temp_iface, t, 0.0f, 1.0f);
}

sift_sampler *sift_sampler_init_temp_ext(float t, float delta, float exponent)
{
    if (t == 1.0f && delta <= 0.0f) return sift__sampler_noop("?temp-ext");
    return temp_new(&temp_ext_iface, t, delta, exponent);
}
