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

typedef struct sift__gx_engine sift__gx_engine;

/* Build an engine for grammar g (the engine takes ownership of g, also on failure) over the
 * vocabulary of compiler c (compiler.h; the engine holds c). Token ids named by the grammar
 * must be < its n_tokens. */
int sift__gx_engine_new_in(sift__gx_engine **out, sift_grammar *g, sift_grammar_compiler *c, sift_error *err);
/* The same over the process's default compiler for `view` (tests, fuzzers). */
int sift__gx_engine_new(sift__gx_engine **out, sift_grammar *g, const sift_vocab_view *view, sift_error *err);
void sift__gx_engine_retain(sift__gx_engine *e);
void sift__gx_engine_release(sift__gx_engine *e);

const sift_grammar *sift__gx_engine_grammar(const sift__gx_engine *e);
const sift__gx_vocab *sift__gx_engine_vocab(const sift__gx_engine *e);

/* Precompute the cache entries every parse can need at its first two levels (the terminal
 * positions but ASCII classes, each class of those with every frame that can sit directly
 * below it, then the ASCII classes: the dearest on demand first), until `budget` work (trie
 * nodes walked, 64 per entry) is spent. Later misses are computed on demand. */
int sift__gx_engine_precompute(sift__gx_engine *e, uint64_t budget);

/* mask[0 .. vocab words) := the tokens state `s` (whose stacks live in arena `ra`) allows. */
int sift__gx_engine_fill_mask(sift__gx_engine *e, sift__gx_arena *ra, const sift__gx_state *s, uint64_t *mask);

/* dst[0 .. W) := the union of the n bitsets src[0 .. n) (all zero when n is 0), written once
 * (one pass per four sources) rather than cleared and OR-ed set by set: fill_mask's last
 * step, a fixed cost of every mask. */
void sift__gx_bits_union(uint64_t *restrict dst, uint32_t W, const uint64_t *const *src, uint32_t n);

/* What the mask's bit for token t must be, found the slow way (one token at a time with the
 * matcher, no cache): end-of-generation tokens follow whether the grammar can end, excluded
 * tokens (empty, NUL inside) are never allowed, the rest must be accepted by state s. 1 yes,
 * 0 no, negative: unknown (the arena ran out of nodes). The sampler's rejection check, and
 * the reference the tests and fuzzers hold the cached masks against. */
int sift__gx_token_verdict(sift__gx_arena *a, const sift__gx_state *s, const sift__gx_vocab *v, uint32_t t, sift__gx_state *t1, sift__gx_state *t2);

typedef struct sift__gx_engine_stats {
    uint32_t entries, dense_sets, dfa_states, walk_arena_nodes, trie_nodes;
    uint64_t trie_nodes_walked, bytes;
    double precompute_ms;
    uint32_t trims; /* times the on-demand entries were dropped (cache size limit) */
    uint64_t slice_nodes; /* trie nodes accepted in bulk by the slices (trie.h) instead of walked */
    uint64_t first_slices;     /* root walks that took the vocabulary's first-character slices (trie.h) */
    uint64_t loop_sets_reused; /* child entries that took their parent's cached loop set (mask.c, loop_set) */
    uint64_t loop_sets_first;  /* loop sets made from the first-character slices, less exceptions (mask.c, loop_set) */
    uint64_t root_walks_reused; /* root walks made from a remembered one in their loop state (mask.c, root_walk_take) */
    uint64_t chain_takes;       /* subtrees taken up to a maxLength chain's length (mask.c, take_slice) */
    uint64_t chain_firsts;      /* child entries that took a maxLength chain's first-character tokens at once (mask.c, child) */
    uint64_t class_takes;       /* subtrees taken whole by a grammar's own character class (mask.c, class_take) */
    uint64_t peered;            /* child entries made from a peer's (key exclusions: mask.c, child_peered) */
    uint64_t shared_hits;       /* entries copied from the vocabulary's share (share.h) instead of walked */
    uint64_t shared_puts;       /* entries this engine added to it */
    uint64_t quiet_chains;      /* chain takes allowed by a chain that never escapes, FOLLOW meeting C_k (mask.c, chain_quiet) */
    uint64_t c0_sets;           /* child entries that took the vocabulary's C_0 tokens by length (mask.c, child, c0_len_bits) */
    uint64_t narrow_walks;      /* level-1 walks of an ASCII class that visited only its root children (mask.c, level1_narrow) */
} sift__gx_engine_stats;
void sift__gx_engine_get_stats(sift__gx_engine *e, sift__gx_engine_stats *st);
/* Size past which on-demand entries are dropped (default 512 MiB; tests use tiny ones). */
void sift__gx_engine_set_cache_limit(sift__gx_engine *e, uint64_t bytes);

/* The engine statistics of a grammar sampler (benchmarks, tests); false if smpl is not one. */
bool sift__gx_grammar_sampler_stats(const sift_sampler *smpl, sift__gx_engine_stats *st);

/* One line about a grammar sampler's matcher state (stack count, top frames by rule name)
 * into buf; false if smpl is not one. Diagnostics only. */
bool sift__gx_grammar_sampler_describe(const sift_sampler *smpl, char *buf, size_t cap);

/* Is the chain's pick `tok` one the grammar really allows? False when the selected logit is
 * -inf (the grammar and the chain left no token: the pick was arbitrary) or the grammar
 * refuses it. */
bool sift__gx_pick_allowed(sift_sampler *grammar, const sift_candidates *cand, sift_token tok);

#endif
