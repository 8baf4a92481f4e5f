/*
 * pos_equiv.h - representatives of grammar positions that behave alike for the mask cache
 * (see pos_equiv.c for which positions are merged, and why that is exact).
 */
#ifndef SIFT_GRAMMAR_POS_EQUIV_H
#define SIFT_GRAMMAR_POS_EQUIV_H

#include "grammar/stacks.h"

/* *out := a malloc'd array of n_elems + 1 (sift__gx_free): rep[p] is the first position q
 * with the rest of q's alternative equal to p's (terminals exactly, REFs to equivalent
 * rules) and FOLLOW(rule of q) == FOLLOW(rule of p). A stack frame at p and one at rep[p]
 * accept the same continuations. With max_bytes > 0 (the longest token), positions deeper
 * than that in a run or a chain of helpers (a string's maxLength) are merged too: a frame at
 * p and one at rep[p] then accept the same texts of up to max_bytes bytes, which is all a mask
 * walk reads (pos_equiv.c, deep_map). SIFT_OK or SIFT_E_NOMEM. */
int sift__gx_pos_reps(const sift_grammar *g, uint32_t max_bytes, uint32_t **out);

#endif
