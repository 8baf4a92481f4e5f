/*
 * stacks.h - parse stacks as hash-consed nodes, and the reference matcher built on them.
 *
 * A parse stack (llama.cpp's llama_grammar_stack) is a list of grammar positions: the top
 * is a terminal (CLASS / TOKEN element) to match next, every entry below it is where to go
 * on when the rule above it ends. llama.cpp copies these vectors on every step; here a
 * stack is a node (pos, parent) in an arena where equal (pos, parent) pairs are the same
 * node, so a stack is one integer, stacks share their bottoms, and comparing two stacks is
 * comparing two ids. Node 0 is the bottom: "nothing below" for real stacks, the "sentinel"
 * (unknown context) for the suffixes the mask engine works on.
 *
 * The two operations a matcher needs are memoized per node:
 *   closure  - execute a position: a REF expands into its alternatives (an empty one pops
 *              to the parent), until only terminals are on top (llama_grammar_advance_stack);
 *   succ(n)  - the stacks after the terminal on top of n has matched a character: the
 *              closure of the next position in n's rule, or of n's parent when it ends.
 * Because the grammar has no left recursion, a closure is finite; nodes already executed in
 * the same closure are skipped, so shared sub-expansions are done once.
 *
 * A matcher state (sift__gx_state) is a set of top nodes, a can_end flag (some stack is empty:
 * llama.cpp's "empty stack") and an unfinished UTF-8 character. Stepping a state by a code
 * point is the union of succ(n) over the tops whose class contains it.
 */
#ifndef SIFT_GRAMMAR_STACKS_H
#define SIFT_GRAMMAR_STACKS_H

#include "grammar/grammar.h"

#define GX_NONE UINT32_MAX

/* The most parse stacks a matcher state may hold (SIFT_GRAMMAR_MAX_STACKS, sift.h). An
 * ambiguous grammar such as a_i ::= a_{i+1} a_{i+1} | [a-z] multiplies its stacks with every
 * character (2^20 for 20 levels: minutes of CPU and gigabytes per token); past this bound a
 * step fails with GX_E_STACKS instead, so one grammar's work per character stays bounded. */
#define GX_MAX_STACKS SIFT_GRAMMAR_MAX_STACKS
#define GX_E_STACKS SIFT_E_UNSUPPORTED

typedef struct sift__gx_arena {
    const sift_grammar *g;
    uint32_t n, cap;      /* nodes [0, n); node 0 is the bottom */
    uint32_t *pos, *parent;
    uint32_t *succ;       /* memo: offset into pool of [count|bottom<<31, ids...], GX_NONE = unknown */
    uint32_t *stamp;      /* closure dedupe */
    uint32_t *mark;       /* set-merge dedupe */
    uint32_t epoch, mark_epoch;
    uint32_t *ht;         /* hash-cons table of node ids (0 = empty slot) */
    uint32_t ht_cap;
    sift__gx_u32vec pool;
    sift__gx_u32vec work;       /* closure work stack */
    sift__gx_u32vec scratch;    /* sift__gx_state_start's closure output */
    uint64_t max_nodes;   /* growth cap; exceeding it is an out-of-memory error */
    /* NULL, or a map of every position to its representative (pos_equiv.h): node (p, parent)
     * is then made as (rep[p], parent). For the mask engine's walk arena only: equivalent
     * frames accept the same continuations, so its stack sets - the walk DFA's states - come
     * out equal for contexts that differ only in rule names. A matcher keeps real positions. */
    const uint32_t *rep;
} sift__gx_arena;

int sift__gx_arena_init(sift__gx_arena *a, const sift_grammar *g);
void sift__gx_arena_free(sift__gx_arena *a);
/* dst := a copy of src (dst initialized or zeroed; its old contents are freed). */
int sift__gx_arena_copy(sift__gx_arena *dst, const sift__gx_arena *src);
/* Drop every node (ids become invalid); keeps the memory. */
void sift__gx_arena_clear(sift__gx_arena *a);


/* The node (pos, parent); GX_NONE when out of memory. */
uint32_t sift__gx_node(sift__gx_arena *a, uint32_t pos, uint32_t parent);

/* Execute position `pos` with parent `parent`: append the terminal-topped nodes to `out`
 * (each once) and set *bottom when the parent chain empties. SIFT_OK or SIFT_E_NOMEM. */
int sift__gx_closure(sift__gx_arena *a, uint32_t pos, uint32_t parent, sift__gx_u32vec *out, bool *bottom);

/* Successors of node n (whose top is a terminal) after that terminal matched: a pointer
 * into the arena's pool (valid until the next arena call), *count ids, *bottom. NULL on OOM. */
const uint32_t *sift__gx_succ(sift__gx_arena *a, uint32_t n, uint32_t *count, bool *bottom);

/* The union of the successors of nodes[0..n) (terminal-topped; the list may live in
 * a->scratch, not in a->work; out is neither) appended to out, each once, in one closure walk
 * whose visited set is shared: linear in the nodes reached, where merging the memoized sift__gx_succ
 * lists costs their total length (quadratic for ambiguous grammars such as x*{1000}, where
 * the lists nest). Used for states with more than GX_SUCC_UNION_MIN stacks. */
#ifndef GX_SUCC_UNION_MIN
#define GX_SUCC_UNION_MIN 64
#endif
int sift__gx_succ_union(sift__gx_arena *a, const uint32_t *nodes, uint32_t n, sift__gx_u32vec *out, bool *bottom);

/* Start of a fresh set merge; then sift__gx_mark_add() returns true the first time it sees a node. */
void sift__gx_mark_begin(sift__gx_arena *a);
static inline bool sift__gx_mark_add(sift__gx_arena *a, uint32_t node)
{
    if (a->mark[node] == a->mark_epoch) return false;
    a->mark[node] = a->mark_epoch;
    return true;
}

/* ---- the reference matcher ---- */
typedef struct sift__gx_state {
    sift__gx_u32vec tops;
    bool can_end;
    sift__gx_utf8 utf8;
} sift__gx_state;

void sift__gx_state_free(sift__gx_state *s);
int sift__gx_state_copy(sift__gx_state *dst, const sift__gx_state *src);
/* The start state of the grammar (its root's alternatives expanded). */
int sift__gx_state_start(sift__gx_arena *a, sift__gx_state *s);
/* out = in after code point cp (out may end up dead: no tops and !can_end). */
int sift__gx_state_step(sift__gx_arena *a, const sift__gx_state *in, uint32_t cp, sift__gx_state *out);
/* Can some top still match a character that the unfinished UTF-8 in s completes to? */
bool sift__gx_state_partial_ok(const sift__gx_arena *a, const sift__gx_state *s);
/* Feed bytes into *s (tmp is scratch). SIFT_OK, or SIFT_E_INVAL with *fail = offset of the
 * first byte that cannot continue (then *s is unchanged), or SIFT_E_NOMEM. */
int sift__gx_state_feed(sift__gx_arena *a, sift__gx_state *s, const uint8_t *bytes, size_t n, sift__gx_state *tmp, sift__gx_state *tmp2, size_t *fail);
/* Accept a whole token: its id against TOKEN tops (when no character is unfinished) and its
 * bytes against everything else; the union. SIFT_E_INVAL (state unchanged) if neither
 * survives. */
int sift__gx_state_accept_token(sift__gx_arena *a, sift__gx_state *s, uint32_t token, const uint8_t *bytes, size_t n, sift__gx_state *t1,
                          sift__gx_state *t2, sift__gx_state *t3);
/* Would accept_token succeed? (no state change) 1: yes, 0: no, or a negative sift_status
 * (SIFT_E_NOMEM: the arena is full, the answer is unknown). */
int sift__gx_state_token_check(sift__gx_arena *a, const sift__gx_state *s, uint32_t token, const uint8_t *bytes, size_t n, sift__gx_state *t1,
                         sift__gx_state *t2);
/* sift__gx_state_token_check() == 1: an unknown answer counts as "no" (the safe side for a mask) */
bool sift__gx_state_token_ok(sift__gx_arena *a, const sift__gx_state *s, uint32_t token, const uint8_t *bytes, size_t n, sift__gx_state *t1,
                       sift__gx_state *t2);
/* Rebuild arena `a` with only the stacks of state `s` (ids in s are rewritten); the memos
 * are recomputed on demand. For matchers whose arena grew large over a long generation. */
int sift__gx_state_compact(sift__gx_arena *a, sift__gx_state *s);
/* The compile-time ambiguity check: from the start state, step `depth` characters, each time
 * by the symbol whose successor state holds the most stacks (every symbol some top can match
 * is tried; `work` bounds the stacks stepped in all). GX_E_STACKS when a step passes
 * GX_MAX_STACKS - some text the grammar reads as a prefix needs more stacks than a matcher
 * may hold, so a generation could fail there - else SIFT_OK (or SIFT_E_NOMEM); *peak is the
 * most stacks seen. Greedy, so it finds the exponential grammars (each step multiplies the
 * stacks whatever the character) and leaves the rest to the run-time bound. */
int sift__gx_stacks_probe(const sift_grammar *g, uint32_t depth, uint64_t work, uint32_t *peak);

static inline bool sift__gx_state_dead(const sift__gx_state *s) { return s->tops.n == 0 && !s->can_end; }
/* The grammar may end here (some stack empty, no unfinished character). */
static inline bool sift__gx_state_can_end(const sift__gx_state *s) { return s->can_end && s->utf8.need == 0; }

#endif
