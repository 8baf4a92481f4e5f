/*
 * spec.h - speculative decoding inside (internal): what a draft source is, for draft.c
 * (the shared part: history, adaptive depth, dispatch), lookup.c (prompt lookup),
 * draft_model.c (a second model) and verify.c (sift_spec: the target's batched check).
 *
 * A draft source is a small tagged struct rather than a vtable: there are two kinds, both
 * here, and the public handle stays opaque. Every kind keeps the same history array (the
 * sequence's tokens so far, the not yet decoded last one included), so a draft model can
 * find out by comparison which of its cached positions still hold the history, and the
 * lookup index can compare n-gram keys against it.
 */
#ifndef SIFT_SPEC_SPEC_H
#define SIFT_SPEC_SPEC_H

#include <stdint.h>

#include "sift.h"

typedef enum { DRAFT_LOOKUP, DRAFT_MODEL } draft_kind;

/* One n-gram of the lookup index: key = hist[end - n .. end) (its first occurrence), with
 * up to LK_NEXT tokens seen after it, how often, and when last. */
#define LK_NEXT 4
typedef struct lk_entry {
    uint64_t h; /* 0: empty slot */
    int32_t end;
    int32_t n;
    int32_t n_next;
    sift_token next[LK_NEXT];
    int32_t cnt[LK_NEXT];
    int32_t seen[LK_NEXT]; /* history index of the latest occurrence */
} lk_entry;

struct sift_draft {
    draft_kind kind;
    sift_draft_params p;
    sift_token *hist;
    int32_t n_hist, cap_hist;
    /* adaptive depth: decayed counts of accepted draft tokens and of refusals */
    double acc_ok, acc_bad;

    /* lookup */
    int32_t ngram;
    lk_entry *tab;
    uint32_t tab_cap, tab_used; /* cap a power of two */
    sift_token *scratch;        /* [ngram + n_max]: the tail of the history and the draft so far */

    /* draft model */
    sift_context *dctx;
    sift_batch batch;
    sift_token *kv; /* the tokens at the draft cache's positions 0..n_kv */
    int32_t n_kv, n_ctx, n_vocab;
};

/* lookup.c */
sift_status sift__lookup_init(sift_draft *d, sift_error *err);
sift_status sift__lookup_add(sift_draft *d, int32_t i, sift_error *err); /* index hist[i] as a continuation */
int32_t sift__lookup_propose(sift_draft *d, sift_token *out, int32_t cap);
void sift__lookup_free(sift_draft *d);
void sift__lookup_clear(sift_draft *d);

/* draft_model.c */
int32_t sift__dmodel_propose(sift_draft *d, sift_token *out, int32_t cap, sift_error *err);
void sift__dmodel_free(sift_draft *d);

/* draft.c: a verification's outcome, for the adaptive depth */
void sift__draft_feedback(sift_draft *d, int32_t drafted, int32_t accepted);
/* a proposal of up to cap tokens without the depth rule (n_min still applies) */
int32_t sift__draft_propose_n(sift_draft *d, sift_token *out, int32_t cap, sift_error *err);
/* the running per-token acceptance estimate (Laplace prior: 0.5 with no data) */
double sift__draft_acceptance(const sift_draft *d);
/* an empty draft source of a kind (history allocated), or NULL */
sift_draft *sift__draft_alloc(draft_kind kind, sift_draft_params params, sift_error *err);

#endif
