/*
 * chain.h - internal access to a chain, for tests and benchmarks.
 */
#ifndef SIFT_CORE_CHAIN_H
#define SIFT_CORE_CHAIN_H

#include "core/fast.h"
#include "sift.h"

/* How the chain's certified fast paths went so far (core/fast.h). */
void sift__chain_fast_stats(const sift_chain *chain, sift__fast_stats *out);
/* Run this chain's fast paths with the given kernel variant (tests: every variant against
 * the general path). */
void sift__chain_set_kernels(sift_chain *chain, const sift__fk *fk);

/* One step without the accept: the fast step when it applies (as sift_chain_sample), else
 * fill + apply. The selected token or SIFT_TOKEN_NULL. logits must stay unchanged until
 * the candidates have been read (a lazy fast step builds them from logits on demand). */
sift_token sift__chain_pick(sift_chain *chain, const float *logits, int32_t n_vocab);
/* The logit the last pick selected: from the lazy fast step's logits or the candidates;
 * NAN when nothing is selected. Builds nothing. */
float sift__chain_selected_logit(const sift_chain *chain);
/* Call the chain's trace hook, if any, as if sampler `index` had left cand. */
void sift__chain_trace(const sift_chain *chain, int32_t index, const sift_sampler *smpl, const sift_candidates *cand);

#endif
