/*
 * mask.h - the token-mask engine: which tokens can a parser state take next?
 *
 * See mask.c for the design. In short: the engine owns the compiled grammar, the vocabulary
 * trie and a cache of per-stack-suffix token sets; given a matcher state (stacks.h) it
 * fills a bitset over the vocabulary with the allowed tokens (end-of-generation tokens
 * included when the grammar can end). It is shared (reference counted) by a sampler and its
 * clones; a mutex serializes cache updates, so clones may run in different threads.
 */
#ifndef SIFT_GRAMMAR_MASK_H
#define SIFT_GRAMMAR_MASK_H

#include "grammar/stacks.h"
#include "grammar/trie.h"

typedef struct gx_engine gx_engine;

/* Build an engine for grammar g (the engine takes ownership of g, also on failure) over the
 * vocabulary `view`. Token ids named by the grammar must be < view->n_tokens. */
int gx_engine_new(gx_engine **out, sift_grammar *g, const sift_vocab_view *view, sift_error *err);
void gx_engine_retain(gx_engine *e);
void gx_engine_release(gx_engine *e);

const sift_grammar *gx_engine_grammar(const gx_engine *e);
const gx_vocab *gx_engine_vocab(const gx_engine *e);

/* Precompute the cache entries every parse can need at its first two levels (all terminal
 * positions, and each with every frame that can sit directly below it), until `budget`
 * trie nodes have been walked. Later misses are computed on demand. */
int gx_engine_precompute(gx_engine *e, uint64_t budget);

/* mask[0 .. vocab words) := the tokens state `s` (whose stacks live in arena `ra`) allows. */
int gx_engine_fill_mask(gx_engine *e, gx_arena *ra, const gx_state *s, uint64_t *mask);

/* What the mask's bit for token t must be, found the slow way (one token at a time with the
 * matcher, no cache): end-of-generation tokens follow whether the grammar can end, excluded
 * tokens (empty, NUL inside) are never allowed, the rest must be accepted by state s. 1 yes,
 * 0 no, negative: unknown (the arena ran out of nodes). The sampler's rejection check, and
 * the reference the tests and fuzzers hold the cached masks against. */
int gx_token_verdict(gx_arena *a, const gx_state *s, const gx_vocab *v, uint32_t t, gx_state *t1, gx_state *t2);

typedef struct gx_engine_stats {
    uint32_t entries, dense_sets, dfa_states, walk_arena_nodes, trie_nodes;
    uint64_t trie_nodes_walked, bytes;
    double precompute_ms;
    uint32_t trims; /* times the on-demand entries were dropped (cache size limit) */
} gx_engine_stats;
void gx_engine_get_stats(gx_engine *e, gx_engine_stats *st);
/* Size past which on-demand entries are dropped (default 512 MiB; tests use tiny ones). */
void gx_engine_set_cache_limit(gx_engine *e, uint64_t bytes);

/* The engine statistics of a grammar sampler (benchmarks, tests); false if smpl is not one. */
bool gx_grammar_sampler_stats(const sift_sampler *smpl, gx_engine_stats *st);

#endif
