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

#endif
