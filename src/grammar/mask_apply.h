/*
 * mask_apply.h - apply a token bitset to a candidates array: every candidate whose id is not
 * in the set gets logit -inf.
 *
 * This pass over the candidates is the one O(vocabulary) part of a warm grammar apply, so it
 * has SIMD versions (AVX2, AVX-512) chosen at run time (core/cpu.h). All versions give
 * identical results (tests/test_grammar_sampler.c). The fast path is the common layout right after a fill
 * (id[i] == i), detected 64 candidates at a time: such a block takes one mask word directly
 * (an all-ones word writes nothing); any other block looks each id up. The ids must still be
 * read (a caller may have reordered them), so the pass costs about reading 4 bytes per
 * candidate from cache: ~4-9 us at 102,400 tokens, the largest fixed cost of a warm mask.
 */
#ifndef SIFT_GRAMMAR_MASK_APPLY_H
#define SIFT_GRAMMAR_MASK_APPLY_H

#include <stddef.h>
#include <stdint.h>

#include "sift.h"

/* ids >= n_tokens (or negative) count as not allowed. Returns the number of candidates
 * that were allowed. */
typedef size_t (*sift__gx_mask_apply_fn)(const sift_token *id, float *logit, size_t size, const uint64_t *mask,
                                   uint32_t n_tokens);

size_t sift__gx_mask_apply_scalar(const sift_token *id, float *logit, size_t size, const uint64_t *mask, uint32_t n_tokens);
size_t sift__gx_mask_apply_avx2(const sift_token *id, float *logit, size_t size, const uint64_t *mask, uint32_t n_tokens);
size_t sift__gx_mask_apply_avx512(const sift_token *id, float *logit, size_t size, const uint64_t *mask, uint32_t n_tokens);

/* The best version this CPU runs. */
sift__gx_mask_apply_fn sift__gx_mask_apply_best(void);

#endif
