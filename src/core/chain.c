/*
 * chain.c - a chain of samplers and the candidates they run on.
 *
 * A step is llama.cpp's llama_sampler_sample: fill the candidates from the logits, apply
 * every sampler in order, take candidates[selected] and accept it into every sampler. The
 * chain owns the candidates (and their workspace): they are allocated at the first fill,
 * sized for the vocabulary, and reused for every later step, so a step allocates nothing.
 * A sampler may advance the candidates' array pointers (xtc drops a prefix that way); the
 * candidates' workspace remembers the arrays as allocated and each fill starts from them.
 *
 * Fast step (issue 3). A step never depends on more than "candidates in, token out", so
 * sift_chain_sample() skips the fill when the chain's first sampler that does anything
 * (no-op samplers - disabled parameters - are passed over) is one core/fast.c can run on
 * the caller's logits: greedy, dist, top_k (k <= 128), min_p or top_p. Built-in samplers
 * are recognised by their fast-path descriptor (core/sampler.h), never by name. That
 * sampler's result - the same candidates fill + apply would give, bit for bit - lands in
 * the chain's candidates, and the rest of the chain runs as usual on them (top_k(40)
 * leaves 40 entries, so the default chain costs one pass over the logits plus a few
 * hundred entries of work). When the fast path declines (NaN, infinities, a top_p cut
 * beyond its first 256 entries, ...) the step takes the general path, having consumed
 * nothing.
 *
 * Lazy candidates. When greedy or dist is the only working sampler, the candidates after
 * the step would be the whole vocabulary (plus, for dist, n normalized probabilities):
 * writing them costs more than the sampling. The chain records the pick (and dist's
 * uniform draw) and builds them only when something asks - sift_chain_candidates() or an
 * apply on them - from the logits passed to sift_chain_sample(), which must therefore still
 * be unchanged then (sift.h says so). A step with a trace hook always takes the general
 * path, so the hook sees every stage.
 *
 * Perf counters follow llama.cpp's (samples; time in apply + accept) and add each
 * sampler's own time, so a front end can show where the time goes. They cost two clock
 * reads per sampler per step; params.no_perf turns them off. On a fast step the fused
 * fill + first sampler counts as that sampler's time. The trace hook runs outside the
 * timed regions.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/candidates.h"
#include "core/chain.h"
#include "core/fast.h"
#include "core/perf.h"
#include "core/sampler.h"
#include "core/status.h"

struct sift_chain {
    sift_chain_params params;
    sift_sampler **smpl;
    int64_t *t_smpl_ns; /* per sampler: apply + accept time */
    int32_t n, cap;

    sift_candidates cand; /* allocated at the first fill, grown when n_vocab grows */

    sift_trace_fn trace;
    void *trace_user;

    int64_t n_sample, n_apply, t_total_ns, t_fill_ns;

    const sift__fk *fk;        /* the SIMD kernels of this CPU */
    sift__fast_stats fast;     /* how the certified fast paths went */
    struct {                   /* candidates not built yet (see the top of the file) */
        int kind;              /* 0 = none, SIFT__OP_GREEDY or SIFT__OP_DIST */
        const float *logits;   /* the caller's, as given to sift_chain_sample() */
        size_t n;
        int64_t pick;
        double u;              /* dist's draw */
    } lazy;
};

sift_chain_params sift_chain_default_params(void)
{
    sift_chain_params p = {.no_perf = false};
    return p;
}

sift_chain *sift_chain_new(sift_chain_params params)
{
    sift_chain *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->params = params;
    c->cand.selected = -1;
    c->fk = sift__fk_best();
    return c;
}

void sift_chain_free(sift_chain *chain)
{
    if (!chain) return;
    for (int32_t i = 0; i < chain->n; i++) sift_sampler_free(chain->smpl[i]);
    free(chain->smpl);
    free(chain->t_smpl_ns);
    sift_candidates_free(&chain->cand);
    free(chain);
}

sift_status sift_chain_add(sift_chain *chain, sift_sampler *smpl)
{
    if (!chain || !smpl) return SIFT_E_INVAL;
    if (chain->n == chain->cap) {
        int32_t cap = chain->cap ? chain->cap * 2 : 8;
        sift_sampler **s = realloc(chain->smpl, (size_t)cap * sizeof *s);
        if (!s) return SIFT_E_NOMEM;
        chain->smpl = s;
        int64_t *t = realloc(chain->t_smpl_ns, (size_t)cap * sizeof *t);
        if (!t) return SIFT_E_NOMEM;
        chain->t_smpl_ns = t;
        chain->cap = cap;
    }
    chain->smpl[chain->n] = smpl;
    chain->t_smpl_ns[chain->n] = 0;
    chain->n++;
    return SIFT_OK;
}

int32_t sift_chain_n(const sift_chain *chain) { return chain ? chain->n : 0; }

sift_sampler *sift_chain_get(const sift_chain *chain, int32_t i)
{
    if (!chain || i < 0 || i >= chain->n) return NULL;
    return chain->smpl[i];
}

sift_sampler *sift_chain_remove(sift_chain *chain, int32_t i)
{
    if (!chain || i < 0 || i >= chain->n) return NULL;
    sift_sampler *s = chain->smpl[i];
    memmove(&chain->smpl[i], &chain->smpl[i + 1], (size_t)(chain->n - i - 1) * sizeof *chain->smpl);
    memmove(&chain->t_smpl_ns[i], &chain->t_smpl_ns[i + 1], (size_t)(chain->n - i - 1) * sizeof *chain->t_smpl_ns);
    chain->n--;
    return s;
}

/* ---- the step ----------------------------------------------------------------------- */

static void materialize(sift_chain *chain);

static sift_status ensure_capacity(sift_chain *chain, size_t n, sift_error *err)
{
    const sift_workspace *ws = (const sift_workspace *)chain->cand.ws;
    if (ws && ws->own_cap >= n) return SIFT_OK;
    sift_candidates_free(&chain->cand);
    sift_status st = sift_candidates_init(&chain->cand, n);
    if (st != SIFT_OK) return sift__error_set(err, st, "chain: cannot allocate candidates for %zu tokens", n);
    return SIFT_OK;
}

sift_status sift_chain_fill(sift_chain *chain, const float *logits, int32_t n_vocab, sift_error *err)
{
    if (!chain || !logits || n_vocab < 1)
        return sift__error_set(err, SIFT_E_INVAL, "chain fill: %s", !chain ? "no chain" : !logits ? "no logits" : "n_vocab < 1");
    sift_status st = ensure_capacity(chain, (size_t)n_vocab, err);
    if (st != SIFT_OK) return st;
    chain->lazy.kind = 0;
    const int64_t t0 = chain->params.no_perf ? 0 : sift__now_ns();
    sift_candidates *c = &chain->cand;
    sift_candidates_fill(c, logits, (size_t)n_vocab); /* also undoes pointer moves (xtc) */
    if (!chain->params.no_perf) chain->t_fill_ns += sift__now_ns() - t0;
    if (chain->trace) chain->trace(chain->trace_user, -1, NULL, c);
    return SIFT_OK;
}

sift_token sift_chain_apply(sift_chain *chain, sift_candidates *cand)
{
    if (!chain) return SIFT_TOKEN_NULL;
    if (!cand) cand = &chain->cand;
    if (cand == &chain->cand) materialize(chain);
    /* user candidates without (enough) workspace borrow one for this apply */
    sift_workspace *own = cand->ws, *tmp = NULL;
    if (!own || own->cap < cand->size) {
        tmp = sift__ws_new(cand->size ? cand->size : 1);
        cand->ws = tmp;
    }
    const bool perf = !chain->params.no_perf;
    for (int32_t i = 0; i < chain->n; i++) {
        sift_sampler *s = chain->smpl[i];
        if (perf) {
            const int64_t t0 = sift__now_ns();
            sift__sampler_run(s, cand);
            const int64_t dt = sift__now_ns() - t0;
            chain->t_smpl_ns[i] += dt;
            chain->t_total_ns += dt;
        } else {
            sift__sampler_run(s, cand);
        }
        if (chain->trace) chain->trace(chain->trace_user, i, s, cand);
    }
    chain->n_apply++;
    if (tmp) {
        cand->ws = own;
        sift__ws_free(tmp);
    }
    return sift_candidates_selected(cand);
}

void sift_chain_accept(sift_chain *chain, sift_token token)
{
    if (!chain) return;
    const bool perf = !chain->params.no_perf;
    for (int32_t i = 0; i < chain->n; i++) {
        sift_sampler *s = chain->smpl[i];
        if (!s->iface->accept) continue;
        if (perf) {
            const int64_t t0 = sift__now_ns();
            s->iface->accept(s, token);
            const int64_t dt = sift__now_ns() - t0;
            chain->t_smpl_ns[i] += dt;
            chain->t_total_ns += dt;
        } else {
            s->iface->accept(s, token);
        }
    }
    chain->n_sample++;
}

/* Build the candidates a lazy fast step left unbuilt: the fill, then greedy's pick or
 * dist's arithmetic with the recorded draw (same bits as the general path). */
static void materialize(sift_chain *chain)
{
    if (!chain->lazy.kind) return;
    sift_candidates *c = &chain->cand;
    const size_t n = chain->lazy.n;
    sift_candidates_fill(c, chain->lazy.logits, n);
    if (chain->lazy.kind == SIFT__OP_DIST) {
        c->selected = sift__dist_core(c->logit, n, false, chain->lazy.u, c->p);
        c->flags |= SIFT_CAND_PROBS;
    } else {
        c->selected = chain->lazy.pick;
    }
    c->flags &= ~SIFT_CAND_IDENTITY; /* as greedy's / dist's apply leaves it on the general path */
    chain->lazy.kind = 0;
}

/* The fast step (see the top of the file). Returns false when the step must take the
 * general path (nothing was consumed then); else *tok is the selected token (or
 * SIFT_TOKEN_NULL when no sampler selected one). Does not accept. */
static bool fast_step(sift_chain *chain, const float *logits, size_t n, sift_token *tok)
{
    int32_t i0 = 0;
    while (i0 < chain->n && sift__sampler_is_noop(chain->smpl[i0])) i0++;
    if (i0 == chain->n) return false;
    const sift__op *op = sift__op_of(chain->smpl[i0]);
    if (!op) return false;
    int32_t last = chain->n - 1; /* the last working sampler */
    while (last > i0 && sift__sampler_is_noop(chain->smpl[last])) last--;
    const bool alone = last == i0;
    if ((op->kind == SIFT__OP_GREEDY || op->kind == SIFT__OP_DIST) && !alone) return false;
    if (op->kind == SIFT__OP_DIST && !chain->fk->fast_dist) return false;
    if (op->kind == SIFT__OP_TOP_K && (op->k <= 0 || op->k > 128 || (size_t)op->k >= n)) return false;
    if (op->kind == SIFT__OP_TOP_P && n <= 1024) return false;
    if (ensure_capacity(chain, n, NULL) != SIFT_OK) return false;

    sift_candidates *c = &chain->cand;
    const sift_workspace *ws = (const sift_workspace *)c->ws;
    c->id = ws->own_id, c->logit = ws->own_logit, c->p = ws->own_p, c->capacity = ws->own_cap;
    chain->lazy.kind = 0;
    const bool perf = !chain->params.no_perf;
    const int64_t t0 = perf ? sift__now_ns() : 0;
    int64_t pick = -1;
    double u = 0.0;
    int r = SIFT__FAST_NO;
    switch (op->kind) {
    case SIFT__OP_GREEDY: r = sift__fast_greedy(chain->fk, logits, n, &pick); break;
    case SIFT__OP_DIST: r = sift__fast_dist(chain->fk, logits, n, op->rng, c, &pick, &u, &chain->fast); break;
    case SIFT__OP_TOP_K: r = sift__fast_top_k(chain->fk, logits, n, (size_t)op->k, c); break;
    case SIFT__OP_MIN_P: r = sift__fast_min_p(chain->fk, logits, n, op->p, op->min_keep, c); break;
    case SIFT__OP_TOP_P: r = sift__fast_top_p(chain->fk, logits, n, op->p, op->min_keep, c, &chain->fast); break;
    }
    if (r == SIFT__FAST_NO) return false;
    if (perf) {
        const int64_t dt = sift__now_ns() - t0;
        chain->t_smpl_ns[i0] += dt;
        chain->t_total_ns += dt;
    }
    chain->n_apply++;
    if (r == SIFT__FAST_PICK) { /* greedy / dist alone: the candidates wait */
        chain->lazy.kind = op->kind;
        chain->lazy.logits = logits;
        chain->lazy.n = n;
        chain->lazy.pick = pick;
        chain->lazy.u = u;
        *tok = (sift_token)pick;
        return true;
    }
    for (int32_t i = i0 + 1; i < chain->n; i++) {
        sift_sampler *s = chain->smpl[i];
        if (perf) {
            const int64_t t1 = sift__now_ns();
            sift__sampler_run(s, c);
            const int64_t dt = sift__now_ns() - t1;
            chain->t_smpl_ns[i] += dt;
            chain->t_total_ns += dt;
        } else {
            sift__sampler_run(s, c);
        }
    }
    *tok = sift_candidates_selected(c);
    return true;
}

sift_token sift__chain_pick(sift_chain *chain, const float *logits, int32_t n_vocab)
{
    sift_token tok;
    if (chain && logits && n_vocab >= 1 && !chain->trace && fast_step(chain, logits, (size_t)n_vocab, &tok)) return tok;
    if (sift_chain_fill(chain, logits, n_vocab, NULL) != SIFT_OK) return SIFT_TOKEN_NULL;
    return sift_chain_apply(chain, NULL);
}

float sift__chain_selected_logit(const sift_chain *chain)
{
    if (!chain) return NAN;
    if (chain->lazy.kind) return chain->lazy.pick >= 0 ? chain->lazy.logits[chain->lazy.pick] : NAN;
    const sift_candidates *c = &chain->cand;
    return c->selected >= 0 && (size_t)c->selected < c->size ? c->logit[c->selected] : NAN;
}

void sift__chain_trace(const sift_chain *chain, int32_t index, const sift_sampler *smpl, const sift_candidates *cand)
{
    if (chain && chain->trace) chain->trace(chain->trace_user, index, smpl, cand);
}

sift_token sift_chain_sample(sift_chain *chain, const float *logits, int32_t n_vocab)
{
    const sift_token tok = sift__chain_pick(chain, logits, n_vocab);
    if (tok != SIFT_TOKEN_NULL) sift_chain_accept(chain, tok);
    return tok;
}

/* ---- state ------------------------------------------------------------------------------ */

void sift_chain_reset(sift_chain *chain)
{
    if (!chain) return;
    for (int32_t i = 0; i < chain->n; i++) sift_sampler_reset(chain->smpl[i]);
}

sift_chain *sift_chain_clone(const sift_chain *chain)
{
    if (!chain) return NULL;
    sift_chain *c = sift_chain_new(chain->params);
    if (!c) return NULL;
    for (int32_t i = 0; i < chain->n; i++) {
        sift_sampler *s = sift_sampler_clone(chain->smpl[i]);
        if (!s || sift_chain_add(c, s) != SIFT_OK) {
            sift_sampler_free(s);
            sift_chain_free(c);
            return NULL;
        }
    }
    c->trace = chain->trace;
    c->trace_user = chain->trace_user;
    return c;
}

sift_candidates *sift_chain_candidates(sift_chain *chain)
{
    if (!chain) return NULL;
    materialize(chain);
    return &chain->cand;
}

void sift__chain_fast_stats(const sift_chain *chain, sift__fast_stats *out)
{
    if (chain && out) *out = chain->fast;
}

void sift__chain_set_kernels(sift_chain *chain, const sift__fk *fk)
{
    if (chain && fk) chain->fk = fk;
}

uint32_t sift_chain_get_seed(const sift_chain *chain)
{
    if (!chain) return SIFT_DEFAULT_SEED;
    for (int32_t i = chain->n - 1; i >= 0; i--) {
        uint32_t s = sift_sampler_get_seed(chain->smpl[i]);
        if (s != SIFT_DEFAULT_SEED) return s;
    }
    return SIFT_DEFAULT_SEED;
}

int sift_chain_describe(const sift_chain *chain, char *buf, size_t cap)
{
    size_t used = 0;
    if (cap) buf[0] = 0;
    for (int32_t i = 0; chain && i < chain->n; i++) {
        const char *name = sift_sampler_name(chain->smpl[i]);
        int w = snprintf(used < cap ? buf + used : NULL, used < cap ? cap - used : 0, "%s%s", i ? " -> " : "", name);
        if (w < 0) return w;
        used += (size_t)w;
    }
    return (int)used;
}

void sift_chain_set_trace(sift_chain *chain, sift_trace_fn fn, void *user)
{
    if (!chain) return;
    chain->trace = fn;
    chain->trace_user = fn ? user : NULL;
}

sift_chain_perf sift_chain_get_perf(const sift_chain *chain)
{
    sift_chain_perf p = {0};
    if (!chain) return p;
    p.n_sample = chain->n_sample;
    p.n_apply = chain->n_apply;
    p.t_total_us = (double)chain->t_total_ns * 1e-3;
    p.t_fill_us = (double)chain->t_fill_ns * 1e-3;
    return p;
}

double sift_chain_perf_sampler_us(const sift_chain *chain, int32_t i)
{
    if (!chain || i < 0 || i >= chain->n) return 0.0;
    return (double)chain->t_smpl_ns[i] * 1e-3;
}

void sift_chain_perf_reset(sift_chain *chain)
{
    if (!chain) return;
    chain->n_sample = chain->n_apply = chain->t_total_ns = chain->t_fill_ns = 0;
    for (int32_t i = 0; i < chain->n; i++) chain->t_smpl_ns[i] = 0;
}
