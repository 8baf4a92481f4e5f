/*
 * greedy.c - argmax: the first candidate with the highest logit (llama.cpp's strict `>`
 * scan, so the first of tied maxima wins). Stateless; sets `selected` only.
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

static const sift_sampler_i greedy_iface = {
    .name = greedy_name,
    .apply = greedy_apply,
};

sift_sampler *sift_sampler_init_greedy(void) { return sift_sampler_init(&greedy_iface, NULL); }
