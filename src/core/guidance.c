/*
 * guidance.c - classifier-free guidance, llama.cpp common's way (the former
 * llama_sample_apply_guidance): log-softmax both logit vectors, then
 * l = scale * (l - g) + g. The log-softmax is llama.cpp's llama_log_softmax: max, then
 * p = expf(x - max) with a float running sum, then logf(p / sum) - recomputed on the fly
 * here (the same floats) so the guidance vector stays untouched.
 */
#include <math.h>

#include "sift.h"

static void max_and_sum(const float *x, int32_t n, float *max_out, float *sum_out)
{
    float m = x[0];
    for (int32_t i = 1; i < n; i++) m = m < x[i] ? x[i] : m; /* std::max_element: first max */
    float s = 0.0f;
    for (int32_t i = 0; i < n; i++) s += expf(x[i] - m);
    *max_out = m;
    *sum_out = s;
}

sift_status sift_cfg_apply(float *logits, const float *guidance, int32_t n_vocab, float scale)
{
    if (!logits || !guidance || n_vocab < 1) return SIFT_E_INVAL;
    float lm, ls, gm, gs;
    max_and_sum(logits, n_vocab, &lm, &ls);
    max_and_sum(guidance, n_vocab, &gm, &gs);
    for (int32_t i = 0; i < n_vocab; i++) {
        const float l = logf(expf(logits[i] - lm) / ls);
        const float g = logf(expf(guidance[i] - gm) / gs);
        logits[i] = scale * (l - g) + g;
    }
    return SIFT_OK;
}
