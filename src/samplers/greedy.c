/*
 * greedy.c - argmax: the first candidate with the highest logit (llama.cpp's strict `>`
 * scan, so the first of tied maxima wins). Stateless; sets `selected` only. Its context
 * is a constant fast-path descriptor (core/sampler.h), so a chain starting with greedy
 * runs the SIMD argmax on the caller's logits (core/fast.c).
 */
#include "samplers/samplers.h"

static const char *greedy_name(const sift_sampler *smpl)
{
    (void)smpl;
    return "greedy";
}

static void greedy_apply(sift_sampler *smpl, sift_candidates *cand)
{
    (void)smpl;
    if (cand->size == 0) {
        cand->selected = -1;
        return;
    }
    const float *lg = cand->logit;
    if (cand->size >= 64) { /* the SIMD scan (same answer; NULL when a NaN is present) */
        const size_t i = sift__fk_best()->argmax(lg, cand->size);
        if (i != SIZE_MAX) {
            cand->selected = (int64_t)i;
            return;
        }
    }
    size_t best = 0;
    float best_l = lg[0];
    for (size_t i = 1; i < cand->size; i++) {
        if (lg[i] > best_l) {
            best_l = lg[i];
            best = i;
        }
    }
    cand->selected = (int64_t)best;
}

static const sift__op greedy_op = {.apply = greedy_apply, .kind = SIFT__OP_GREEDY};

static sift_sampler *greedy_clone(const sift_sampler *smpl);

static const sift_sampler_i greedy_iface = {
    .name = greedy_name,
    .apply = sift__op_apply,
    .clone = greedy_clone, /* the context is static: nothing to free */
};

static sift_sampler *greedy_clone(const sift_sampler *smpl)
{
    (void)smpl;
    return sift_sampler_init_greedy();
}

sift_sampler *sift_sampler_init_greedy(void) { return sift_sampler_init(&greedy_iface, (void *)&greedy_op); }
