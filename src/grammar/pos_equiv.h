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
 * accept the same continuations. SIFT_OK or SIFT_E_NOMEM. */
int sift__gx_pos_reps(const sift_grammar *g, uint32_t **out);

#endif
