/*
 * mask_apply.h - apply a token bitset to a candidates array: every candidate whose id is not
 * in the set gets logit -inf.
 *
 * This pass over the candidates is the one O(vocabulary) part of a warm grammar apply, so it
 * has SIMD versions (AVX2, AVX-512) chosen at run time (core/cpu.h). All versions give
 * identical results (tests/test_grammar_sampler.c). The fast path is the common layout right after a fill
 * (id[i] == i), detected block by block: such a block takes its 8 or 16 mask bits directly;
 * any other block looks each id up.
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
