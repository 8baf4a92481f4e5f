/*
 * penalties.c - repetition, frequency and presence penalties over the last `last_n`
 * accepted tokens (llama.cpp's penalties sampler).
 *
 * For every candidate seen c > 0 times in the window: logit *= repeat if logit <= 0 else
 * logit /= repeat; then logit -= c * freq + present (float arithmetic as llama.cpp). The
 * window is a ring buffer and the counts a hash map (history.h, tokmap.h), sized for the
 * window up to 4096 tokens at creation and grown only for longer histories.
 *
 * Instead of looking every candidate up in the map (llama.cpp's way: one hash lookup per
 * vocabulary entry), the sampler walks the few distinct tokens of the window and finds
 * each candidate directly when the array is still in vocabulary order (id[t] == t, as a
 * fresh fill leaves it); only tokens not found that way cost a scan. Each logit gets the
 * same arithmetic either way. The array is marked unsorted afterwards, as llama.cpp does.
 * Clone copies window and counts (llama.cpp's clone forgets the counts - not reproduced).
 */
#include <stdlib.h>
#include <string.h>

#include "samplers/history.h"
#include "samplers/samplers.h"
#include "samplers/tokmap.h"

typedef struct penalties_ctx {
    int32_t last_n;
    float repeat, freq, present;
    sift__history hist;
    sift__tokmap counts;
} penalties_ctx;

static const char *penalties_name(const sift_sampler *smpl)
{
    (void)smpl;
    return "penalties";
}

static void penalties_accept(sift_sampler *smpl, sift_token token)
{
    penalties_ctx *ctx = smpl->ctx;
    if (sift__tokmap_reserve(&ctx->counts, ctx->counts.n + 1) == 0) (*sift__tokmap_get(&ctx->counts, token))++;
    sift_token old;
    if (sift__history_push(&ctx->hist, token, &old)) { /* the window was full: the oldest leaves */
        int32_t *c = sift__tokmap_find(&ctx->counts, old);
        if (c && --*c == 0) sift__tokmap_erase(&ctx->counts, old);
    }
}

static inline void penalize(const penalties_ctx *ctx, float *logit, int32_t count)
{
    float l = *logit;
    if (l <= 0) l *= ctx->repeat;
    else l /= ctx->repeat;
    l -= (float)count * ctx->freq + (float)(count > 0) * ctx->present;
    *logit = l;
}

static void penalties_apply(sift_sampler *smpl, sift_candidates *cand)
{
    penalties_ctx *ctx = smpl->ctx;
    const sift__tokmap *m = &ctx->counts;
    bool missed = false, changed = false;
    for (uint32_t s = 0; s <= m->mask; s++) {
        const sift_token t = m->key[s];
        if (t == SIFT__TOKMAP_EMPTY) continue;
        if (t >= 0 && (size_t)t < cand->size && cand->id[t] == t) {
            penalize(ctx, &cand->logit[t], m->val[s]);
            changed = true;
        } else {
            missed = true;
        }
    }
    if (missed) { /* the array is not in vocabulary order: find the rest by scanning */
        for (size_t i = 0; i < cand->size; i++) {
            const sift_token t = cand->id[i];
            if (t >= 0 && (size_t)t < cand->size && cand->id[t] == t) continue; /* done above */
            const int32_t *c = sift__tokmap_find(m, t);
            if (c) {
                penalize(ctx, &cand->logit[i], *c);
                changed = true;
            }
        }
    }
    if (changed) cand->flags &= ~SIFT_CAND_PROBS;
    cand->sorted = false;
}

static void penalties_reset(sift_sampler *smpl)
{
    penalties_ctx *ctx = smpl->ctx;
    sift__history_clear(&ctx->hist);
    sift__tokmap_clear(&ctx->counts);
}

static void penalties_free(sift_sampler *smpl)
{
    penalties_ctx *ctx = smpl->ctx;
    if (!ctx) return;
    sift__history_free(&ctx->hist);
    sift__tokmap_free(&ctx->counts);
    free(ctx);
}

static const sift_sampler_i penalties_iface;

static sift_sampler *penalties_clone(const sift_sampler *smpl)
{
    const penalties_ctx *src = smpl->ctx;
    sift_sampler *s = sift__sampler_new(&penalties_iface, sizeof(penalties_ctx));
    if (!s) return NULL;
    penalties_ctx *ctx = s->ctx;
    *ctx = *src;
    ctx->hist.buf = NULL;
    ctx->counts.key = NULL, ctx->counts.val = NULL;
    if (sift__history_copy(&ctx->hist, &src->hist) != 0 || sift__tokmap_copy(&ctx->counts, &src->counts) != 0) {
        sift_sampler_free(s);
        return NULL;
    }
    return s;
}

static const sift_sampler_i penalties_iface = {
    .name = penalties_name,
    .accept = penalties_accept,
    .apply = penalties_apply,
    .reset = penalties_reset,
    .clone = penalties_clone,
    .free = penalties_free,
};

sift_sampler *sift_sampler_init_penalties(int32_t last_n, float repeat, float freq, float present)
{
    if (last_n < 0) last_n = 0;
    if (last_n == 0 || (repeat == 1.0f && freq == 0.0f && present == 0.0f)) return sift__sampler_noop("?penalties");
    sift_sampler *s = sift__sampler_new(&penalties_iface, sizeof(penalties_ctx));
    if (!s) return NULL;
    penalties_ctx *ctx = s->ctx;
    ctx->last_n = last_n;
    ctx->repeat = repeat;
    ctx->freq = freq;
    ctx->present = present;
    const size_t keys = (size_t)(last_n < SIFT_HISTORY_START ? last_n : SIFT_HISTORY_START) + 1;
    if (sift__history_init(&ctx->hist, last_n) != 0 || sift__tokmap_init(&ctx->counts, keys) != 0) {
        sift_sampler_free(s);
        return NULL;
    }
    return s;
}
