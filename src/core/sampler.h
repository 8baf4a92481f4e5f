/*
 * sampler.h - internal helpers for writing built-in samplers, and the descriptor through
 * which the chain's fast paths (core/fast.c) recognise the ones they can run.
 */
#ifndef SIFT_CORE_SAMPLER_H
#define SIFT_CORE_SAMPLER_H

#include "core/rng.h"
#include "sift.h"

/* A do-nothing sampler named `name` (a static string such as "?top-k"): what a disabled
 * parameter value gives, as llama.cpp's llama_sampler_init_empty. */
sift_sampler *sift__sampler_noop(const char *name);
/* Is smpl such a no-op? (The fast paths skip them.) */
bool sift__sampler_is_noop(const sift_sampler *smpl);

/* Allocate a zeroed context of `size` bytes and wrap it with iface; NULL (nothing leaked)
 * on out of memory. The iface's free must release the context with free(). */
sift_sampler *sift__sampler_new(const sift_sampler_i *iface, size_t size);

/* ---- fast-path descriptors ----------------------------------------------------------------
 *
 * The chain can run greedy, dist, top_k, top_p and min_p straight on the caller's logits
 * when one of them is the first sampler that does anything (core/fast.c). It must know
 * which sampler is which, and their parameters, without the core depending on the sampler
 * files: such a sampler's context STARTS with a sift__op, and its vtable's apply is
 * sift__op_apply, which calls op->apply. Comparing iface->apply with sift__op_apply is a
 * test any sampler (a user's too) can be put through safely.
 */
typedef enum sift__op_kind {
    SIFT__OP_GREEDY = 1,
    SIFT__OP_DIST,
    SIFT__OP_TOP_K,
    SIFT__OP_TOP_P,
    SIFT__OP_MIN_P,
} sift__op_kind;

typedef struct sift__op {
    void (*apply)(sift_sampler *smpl, sift_candidates *cand); /* the sampler's own apply */
    sift__op_kind kind;
    int32_t k;       /* top_k */
    float p;         /* top_p, min_p */
    size_t min_keep; /* top_p, min_p */
    sift__rng *rng;   /* dist: its generator (inside the same context) */
} sift__op;

void sift__op_apply(sift_sampler *smpl, sift_candidates *cand);

/* The descriptor of a sampler built that way, else NULL. */
static inline const sift__op *sift__op_of(const sift_sampler *smpl)
{
    return smpl && smpl->iface->apply == sift__op_apply ? (const sift__op *)smpl->ctx : NULL;
}

#endif
