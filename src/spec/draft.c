/*
 * draft.c - what every draft source shares: the history, the adaptive depth, and the public
 * entry points that dispatch to prompt lookup (lookup.c) or a draft model (draft_model.c).
 *
 * Adaptive depth. A draft token is worth verifying when the chance that the target accepts
 * it, given that it accepts all before it, times the pass it saves, beats what it costs to
 * draft and to verify. With a per-token acceptance rate a, the i-th token is reached with
 * probability a^i; drafts stop where that falls below DEPTH_Q. a is estimated from decayed
 * counts (each verification: accepted tokens count as successes, a refusal as one failure;
 * older verifications weigh DECAY times less per step), with a Laplace prior, so a fresh
 * source starts at depth 2 and reaches n_max after a few fully accepted drafts, and a
 * source the target keeps refusing drafts one token. llama.cpp has a fixed depth plus
 * p_min; p_min is kept for the draft model (draft_model.c), on top of this.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "spec/spec.h"

#define DEPTH_Q 0.15
#define DECAY 0.9

sift_draft_params sift_draft_default_params(void)
{
    return (sift_draft_params){.n_max = 16, .n_min = 0, .p_min = 0.75f, .adaptive = true};
}

static bool params_ok(sift_draft_params params, sift_error *err)
{
    if (params.n_max < 1 || params.n_max > 1024 || params.n_min < 0 || params.n_min > params.n_max ||
        !(params.p_min >= 0.0f && params.p_min <= 1.0f)) {
        sift__error_set(err, SIFT_E_INVAL, "draft: n_max must be 1..1024, n_min 0..n_max, p_min 0..1 (got %d, %d, %g)",
                        params.n_max, params.n_min, (double)params.p_min);
        return false;
    }
    return true;
}

sift_draft *sift__draft_alloc(draft_kind kind, sift_draft_params params, sift_error *err)
{
    if (!params_ok(params, err)) return NULL;
    sift_draft *d = calloc(1, sizeof *d);
    if (d) {
        d->cap_hist = 1024;
        d->hist = malloc((size_t)d->cap_hist * sizeof *d->hist);
    }
    if (!d || !d->hist) {
        free(d);
        sift__error_set(err, SIFT_E_NOMEM, "draft: out of memory");
        return NULL;
    }
    d->kind = kind;
    d->p = params;
    return d;
}

void sift_draft_free(sift_draft *d)
{
    if (!d) return;
    if (d->kind == DRAFT_LOOKUP) sift__lookup_free(d);
    else sift__dmodel_free(d);
    free(d->hist);
    free(d);
}

void sift_draft_reset(sift_draft *d)
{
    if (!d) return;
    d->n_hist = 0;
    d->acc_ok = d->acc_bad = 0;
    if (d->kind == DRAFT_LOOKUP) sift__lookup_clear(d);
    /* a draft model's cache is matched against the history at the next proposal */
}

sift_status sift_draft_push(sift_draft *d, const sift_token *tokens, int32_t n, sift_error *err)
{
    if (!d || n < 0 || (n && !tokens)) return sift__error_set(err, SIFT_E_INVAL, "draft push: bad arguments");
    for (int32_t i = 0; i < n; i++)
        if (tokens[i] < 0) return sift__error_set(err, SIFT_E_INVAL, "draft push: token %d is negative", tokens[i]);
    if (d->n_hist > INT32_MAX / 2 - n) return sift__error_set(err, SIFT_E_INVAL, "draft push: history too long");
    if (d->n_hist + n > d->cap_hist) {
        int32_t cap = d->cap_hist;
        while (cap < d->n_hist + n) cap *= 2;
        sift_token *h = realloc(d->hist, (size_t)cap * sizeof *h);
        if (!h) return sift__error_set(err, SIFT_E_NOMEM, "draft push: out of memory");
        d->hist = h, d->cap_hist = cap;
    }
    for (int32_t i = 0; i < n; i++) {
        d->hist[d->n_hist++] = tokens[i];
        if (d->kind == DRAFT_LOOKUP) {
            const sift_status st = sift__lookup_add(d, d->n_hist - 1, err);
            if (st != SIFT_OK) return st;
        }
    }
    return SIFT_OK;
}

sift_status sift_draft_set_params(sift_draft *d, sift_draft_params params, sift_error *err)
{
    if (!d) return sift__error_set(err, SIFT_E_INVAL, "draft: NULL");
    if (!params_ok(params, err)) return err ? err->status : SIFT_E_INVAL;
    if (d->kind == DRAFT_LOOKUP && params.n_max > d->p.n_max) { /* the proposal's scratch holds ngram + n_max */
        sift_token *s = realloc(d->scratch, (size_t)(d->ngram + params.n_max) * sizeof *s);
        if (!s) return sift__error_set(err, SIFT_E_NOMEM, "draft: out of memory");
        d->scratch = s;
    }
    d->p = params;
    return SIFT_OK;
}

sift_draft_params sift_draft_get_params(const sift_draft *d)
{
    return d ? d->p : sift_draft_default_params();
}

void sift_draft_feedback(sift_draft *d, int32_t drafted, int32_t accepted)
{
    if (!d || drafted < 1 || accepted < 0 || accepted > drafted) return;
    sift__draft_feedback(d, drafted, accepted);
}

double sift_draft_acceptance(const sift_draft *d)
{
    return d ? sift__draft_acceptance(d) : 0.0;
}

int32_t sift_draft_depth(const sift_draft *d)
{
    if (!d) return 0;
    if (!d->p.adaptive) return d->p.n_max;
    const double a = sift__draft_acceptance(d);
    const double depth = floor(log(DEPTH_Q) / log(a));
    return depth >= d->p.n_max ? d->p.n_max : depth < 1 ? 1 : (int32_t)depth;
}

int32_t sift__draft_propose_n(sift_draft *d, sift_token *out, int32_t cap, sift_error *err)
{
    if (cap < 1 || cap < d->p.n_min || d->n_hist == 0) return 0;
    const int32_t n = d->kind == DRAFT_LOOKUP ? sift__lookup_propose(d, out, cap) : sift__dmodel_propose(d, out, cap, err);
    return n >= 0 && n < d->p.n_min ? 0 : n;
}

int32_t sift_draft_propose(sift_draft *d, sift_token *out, int32_t cap, sift_error *err)
{
    if (!d || cap < 0 || (cap && !out)) return sift__error_set(err, SIFT_E_INVAL, "draft propose: bad arguments");
    const int32_t depth = sift_draft_depth(d);
    return sift__draft_propose_n(d, out, cap < depth ? cap : depth, err);
}

double sift__draft_acceptance(const sift_draft *d)
{
    return (d->acc_ok + 1.0) / (d->acc_ok + d->acc_bad + 2.0);
}

void sift__draft_feedback(sift_draft *d, int32_t drafted, int32_t accepted)
{
    if (!d || drafted < 1) return;
    d->acc_ok = DECAY * d->acc_ok + accepted;
    d->acc_bad = DECAY * d->acc_bad + (accepted < drafted ? 1 : 0);
}

const char *sift_draft_kind(const sift_draft *d)
{
    return !d ? "none" : d->kind == DRAFT_LOOKUP ? "lookup" : "draft model";
}
