/*
 * mask.c - the token-mask engine: the set of vocabulary tokens a parser state allows, fast.
 *
 * The problem. llama.cpp decides token by token: for every candidate it decodes the text and
 * runs it through every parse stack (llama_grammar_reject_candidates), which costs O(vocab)
 * per step even when almost nothing is allowed - milliseconds at 100k tokens. XGrammar's
 * observation is that for most tokens the answer depends only on the top of a stack:
 * starting inside a rule, a token either ends inside that rule (accepted whatever is below:
 * "context-independent"), dies inside it (rejected whatever is below), or runs off its end
 * (context-dependent: needs the frames below). Precompute the first two per grammar
 * position; check only the third at run time.
 *
 * The design here generalizes that to every depth, with one cache:
 *
 *   A stack is frames f_n (top, a terminal) ... f_1 (bottom). A cache entry describes the
 *   suffix (f_n .. f_j) with an unknown "sentinel" below it: walking every token through
 *   that suffix, it stores the tokens accepted (they consumed all their bytes without
 *   needing anything below - including ending exactly when the suffix is used up) and the
 *   escapes: trie nodes where some path used the suffix up with bytes still to come. The
 *   entry for (f_n .. f_{j-1}) is computed from the entry for (f_n .. f_j) by resuming only
 *   its escapes at frame f_{j-1}: the frames above are gone at that point, so the resumed
 *   walk starts from f_{j-1} alone. Accepted sets are cumulative down the levels, so the
 *   mask of a whole stack is one entry's set: follow the stack down, level by level, until
 *   an entry has no escapes (or the stack ends; left-over escapes are then rejected).
 *   Entries are keyed (parent entry, frame position) and are shared by every stack with
 *   the same top frames, in any context - which is why they keep paying off. The position
 *   is first mapped to its representative (pos_equiv.c): positions whose rest of
 *   alternative and FOLLOW are equal up to rule names (every string property's own
 *   "\"" char* "\"" rule) share entries, so a new string context costs a few lookups
 *   instead of ~3k trie nodes walked per name.
 *
 *   An escape needs a next byte that can follow the rule being left: FOLLOW(rule of the
 *   bottom frame), computed from the grammar (grammar.h). Escapes failing it are dropped at
 *   once, which keeps the lists short (inside a JSON string only prefixes followed by '"'
 *   escape the string's repetition rule, not every prefix).
 *
 * Walking. Tokens are visited through the preorder trie (trie.h), so a shared prefix is
 * matched once and a dead prefix skips its whole subtree. The parser state during a walk is
 * a set of suffix stacks over the sentinel (nodes of a private sift__gx_arena); these sets are
 * interned as the states of a lazily built DFA over "symbols" (grammar.h), with memoized
 * transitions, so stepping a trie node is one table lookup. UTF-8 is decoded on the way;
 * a lead byte that no live class can complete prunes its subtree.
 *
 * Slices (trie.h). Inside a JSON string nearly every token is allowed, and walking them one
 * node at a time was most of what compile and the worst masks cost (perf on MaskBench: one
 * 211k-node walk per string context). A trie node flagged for slice C_k (the JSON string
 * character class) has only C_k characters below it; when the DFA state there steps to
 * one live state on every C_k character, for as many characters as the subtree's tokens
 * have (a loop for char*, a chain for char{0,n}), every token below is accepted: they are a
 * contiguous range of `sorted`, taken into a bitset without visiting the subtree.
 * Taking thousands of such subtrees bit by bit (through the `sorted` permutation) was itself
 * a few hundred microseconds per new string context, so two unions are taken whole: a
 * char* loop resumed at its parent's escapes ORs a loop set cached per parent entry
 * (loop_set), and a walk from the trie root whose every slice character but a few ASCII
 * ones leads to one loop ORs the vocabulary's first-character slices (first_loop, trie.h).
 * What is left of such a mask is walking the non-slice nodes (~8k, cache-miss bound); when
 * the root state is a key-exclusion class that steps to a loop L on all but a few first
 * characters, that walk is made once per L and taken less those characters' subtrees
 * (root_walk_take; the walk arena names frames by representative, so L is one state). Such
 * an entry keeps only its own escapes, below those characters, and names L's walk as its
 * peer: each level below it is the one below L's, made once, less and plus those subtrees
 * (child_peered). A walk from the root reads only the first bytes its state can take.
 * There are three slices (trie.c): C_0 the converters' JSON string character, C_1 the same less
 * U+2028..2029, the class a regex "." becomes in a string pattern, C_2 host name characters.
 * A string with maxLength is a chain of C_0: its child entries take their first-character
 * tokens of at most the characters left as one AND of the loop set with a by-length copy of
 * first_bits (child), not ~95k tokens tested one by one after every typed token. When the
 * parent's escapes hold every first character, the set is wider: all C_0 tokens of the
 * characters left (c0_len_bits, trie.h), and the walks below the other first characters
 * find those subtrees taken. The chain rules need no FOLLOW condition when the chain never
 * escapes (chain_quiet: an exact-length string, whose rule ends only at its closing quote).
 *
 * Class slices (class_take). A regex `pattern` loops over its own class ([a-zA-Z0-9_]+,
 * [^/]*) or runs a bounded one ([0-9a-f]{8}); no fixed slice covers those. The trie keeps the
 * bytes below each node (trie.h), and each DFA state learns lazily which ASCII bytes step it
 * to itself: a subtree whose bytes all do (non-ASCII ones through the C_0 / C_1 flags) is
 * taken whole, and a uniform chain takes its tokens up to the chain's length. Nothing is
 * computed per class or per grammar up front.
 *
 * Storage. An accepted set is a dense bitset (shared by the entries below it) plus a short
 * list of extra token ids, whichever is smaller; escapes are lists of trie nodes. The start
 * state's entries, then entries for terminal positions and (position, frame below) pairs,
 * the dearest on demand first (sift__gx_engine_precompute), are computed when the sampler
 * is made, up to a small budget (a json_schema request should
 * reach its first mask in about a millisecond); the rest are computed on first use
 * (typically tens of microseconds: they resume few escapes). A warm fill_mask is: per stack a few hash lookups,
 * OR one bitset (deduplicated), set a few bits. Nothing is allocated once warm. Memory is
 * bounded: past 512 MiB the on-demand entries are dropped (the precomputed ones stay), and
 * the walk DFA is rebuilt when it passes its own limit.
 *
 * Sharing (share.h). Entries that depend on nothing but the vocabulary and the grammar text
 * they walked - a JSON string's char class, its char* loop, a key-exclusion loop's root walk
 * and the levels below them - are found by a canonical key in the vocabulary's share, made
 * by the first engine that needed them and copied by every later one (canon_*).
 *
 * Concurrency: one mutex per engine around cache reads and updates; clones of a sampler
 * share the engine. The matcher state stays in the sampler.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "core/status.h"
#include "grammar/mask.h"
#include "grammar/mask_apply.h"
#include "grammar/pos_equiv.h"
#include "grammar/share.h"

#define DEAD 0u                  /* DFA state of the empty stack set */
#define DENSE_CHUNK 16u          /* dense bitsets per allocation (205 KB at 102k tokens) */
#define UNI_UNKNOWN 0xFFFFFFFFu  /* uni_next not computed yet */
#define UNI_NONE 0xFFFFFFFEu     /* the slice's characters lead to different states, or to DEAD */
#define UNI_OOM 0xFFFFFFFDu
#define CHAIN_UNKNOWN 0xFF       /* dfa_state.chain not computed yet */
#define CHAIN_NONE 0xFE          /* not a chain of slice characters that ends dead */
#ifndef GX_DFA_UNION_MIN
#define GX_DFA_UNION_MIN GX_SUCC_UNION_MIN /* see sift__gx_succ_union */
#endif
#define DFA_BYTES_LIMIT ((uint64_t)512 << 20)
/* Entries computed on demand are dropped (back to what precompute made) when the cache
 * passes this size: a very long generation in ever new contexts cannot grow it forever. */
#define CACHE_BYTES_LIMIT ((uint64_t)512 << 20)

typedef struct {
    int32_t dense;               /* dense bitset id, or -1 */
    uint32_t extra_off, extra_n; /* token ids in `lists` */
    uint32_t esc_off, esc_n;     /* trie nodes in `lists` */
    uint32_t key_parent, key_pos, key_aux; /* its key in `et` (to rebuild the table after a trim) */
    int32_t loop[GX_N_SLICES];   /* dense bitset: the slice-k subtrees of its escapes (see loop_set), -1 not yet */
    /* A peered entry (see child_peered) equals entry `peer` outside the trie subtrees of the
     * first bytes in `dbytes`; its own escapes (esc_*) are those inside them only. */
    uint32_t peer;               /* GX_NONE: none */
    uint64_t dbytes[4];
    uint32_t sid;                /* its record in the vocabulary's share (share.h), GX_NONE: none */
} sift__gx_entry;

typedef struct {
    uint32_t set_off, set_n;     /* walk-arena node ids in `sets` */
    uint32_t live_off;           /* symbols some CLASS top accepts, in `live` */
    uint32_t trans_off;          /* n_syms transitions in `trans` (GX_NONE until first used) */
    uint32_t uni[GX_N_SLICES];   /* per slice (trie.h): the one state every C_k character leads to (see uni_next) */
    uint8_t chain[GX_N_SLICES];  /* per slice: its chain length (chain_len), CHAIN_UNKNOWN / CHAIN_NONE */
    uint64_t loop_in[2], loop_out[2]; /* ASCII bytes known to step the state to itself / elsewhere (class_take) */
    uint8_t hi_known, hi_loop;   /* bit k: known / true that every non-ASCII character of C_k steps it to itself */
    uint8_t quiet_known, quiet;  /* bit k: known / true that its chain of C_k never escapes (chain_quiet) */
} dfa_state;

/* A walk's state at one trie depth. */
typedef struct {
    uint32_t state, node;
    sift__gx_utf8 u;
    uint8_t esc, rec;
} wframe;

typedef struct {
    uint32_t parent, pos, aux, id; /* id == GX_NONE: empty slot */
} ent_slot;

/* A walk from the trie root in a loop state L, remembered (see root_walk_take). */
typedef struct {
    uint32_t state;         /* L */
    const uint64_t *follow; /* the FOLLOW set its escapes passed (compared by content) */
    uint32_t ent;           /* the walk as an entry (unkeyed: a peer, see child_peered); its escapes in preorder */
} root_walk;
#define ROOT_WALKS_MAX 64u  /* per DFA */
#define PEER_KEY_POS 0xFFFFFFFEu /* the table key (GX_NONE, PEER_KEY_POS, id) of a root walk's entry */

struct sift__gx_engine {
    _Atomic int refs;
    pthread_mutex_t lock;
    sift_grammar *g;
    const sift__gx_vocab *voc; /* shared by every engine of this vocabulary (vocab_cache.c) */
    uint32_t *rep;             /* [n_elems]: the position entries are keyed and computed by (pos_equiv.h) */

    /* walk machinery: suffix stacks over the sentinel, and the DFA over their sets */
    sift__gx_arena wa;
    dfa_state *st;
    uint32_t n_st, cap_st;
    sift__gx_u32vec sets;
    uint64_t *live;
    uint32_t live_n, live_cap;
    int32_t *trans;
    uint32_t trans_n, trans_cap;
    int32_t *asc;                /* [state * 128 + byte]: transitions by ASCII byte (-1 unknown) */
    uint32_t asc_cap;            /* in entries */
    uint32_t *st_ht;
    uint32_t st_ht_cap;
    uint32_t lead_lo[256], lead_hi[256];
    sift__gx_u32vec slice_syms[GX_N_SLICES]; /* the grammar symbols that meet each slice */
    uint64_t first_taken;        /* root walks that took first_bits (walk) */
    uint64_t loop_reused;        /* child computations that took a cached loop set (loop_set) */
    uint64_t loop_first;         /* loop sets made from first_bits (loop_set) */
    uint64_t bulk;               /* trie nodes accepted in bulk (slices) instead of walked */
    root_walk *rw;               /* root walks remembered (root_walk_take), valid with the DFA */
    uint32_t n_rw, cap_rw;
    bool rw_building;
    uint32_t rw_peer;            /* set by root_walk_take for level1: the entry the walk is peered to */
    uint64_t rw_dbytes[4];       /* and the first bytes walked on their own */
    uint64_t peered;             /* child entries made from their peer's (child_peered) */
    uint64_t root_skipped;       /* first bytes a root walk skipped unread (walk) */
    sift__gx_u32vec ck, cq, cbuf, coff; /* canon_*: the key, its rule queue, per-stack buffers */
    uint32_t canon_max;                 /* the size bound of the key being made */
    uint8_t *canon_big;                 /* [n_elems]: 1 = the frame at this position is too large to share */
    uint32_t *crule;                    /* [n_rules]: canonical number + 1 of a rule met (0: not yet) */
    uint64_t shared_hits, shared_puts;
    uint64_t shared_work;               /* the work of the entries copied (precompute's budget counts it) */
    uint64_t comp_work0;                /* walked + root_skipped when the current computation began */
    uint32_t rootl[256], n_rootl;   /* root_children_make */
    uint8_t rootb[256];
    bool rootc_ok;
    uint64_t rw_reused;          /* root walks that took a remembered one */
    uint64_t chain_taken;        /* subtrees taken up to a chain's length (take_slice) */
    const uint64_t *fd_follow;   /* follow_disjoint's memo: the set, and bit k: no C_k symbol in it */
    uint8_t fd_bits;
    const uint64_t *fa_follow;   /* follow_ascii's memo: the set, and its ASCII bytes */
    uint64_t fa_bytes[2];
    uint64_t class_taken;        /* subtrees taken by a grammar class (class_take) */
    uint64_t chain_first;        /* child entries that took first-character chain tokens at once (child) */
    uint8_t *c0_memo;            /* per entry id: 0 unknown, 1 / 2 its escapes do / do not cover c0_first (c0_parent) */
    uint32_t c0_memo_cap, c0_memo_trims;
    uint64_t quiet_taken, c0_taken; /* takes by a quiet chain (chain_quiet), C_0 sets taken (child) */
    struct { uint32_t off[GX_N_SLICES + 2], n[GX_N_SLICES + 2]; } *wl_at; /* per entry id: walk_list's lists (off GX_NONE: not made) */
    uint32_t wl_cap, wl_trims;
    sift__gx_u32vec wl;
    uint32_t c0_lim, c0_epoch;   /* C_0 tokens of 2..c0_lim characters in bulk_bits while node_epoch == c0_epoch (take_below) */

    /* the cache */
    sift__gx_entry *ent;
    uint32_t n_ent, cap_ent;
    sift__gx_u32vec lists;
    uint64_t **dense;            /* chunks of DENSE_CHUNK bitsets: growing never moves (copies) them */
    uint32_t n_dense, n_chunks, cap_chunks;
    ent_slot *et;
    uint32_t et_cap;

    /* scratch of one entry computation */
    wframe *wf;
    uint32_t *node_stamp, node_epoch; /* escapes recorded, per trie node */
    uint64_t *seen_bits;              /* make_entry's dedupe of accepted tokens (all zero between uses) */
    uint64_t *bulk_bits;              /* tokens accepted in bulk (slices), as a token bitset */
    bool bulk_used;
    sift__gx_u32vec acc, esc, tmp;

    /* scratch of one fill_mask: the distinct dense sets, the entries with extra tokens */
    const uint64_t **fill_src;
    uint32_t n_fill_src, cap_fill_src;
    sift__gx_u32vec fill_extra;

    uint64_t walked;
    double precompute_ms;
    uint32_t pre_ent, pre_dense, pre_lists; /* watermarks after precompute */
    uint32_t trims;
    uint64_t cache_limit;                   /* CACHE_BYTES_LIMIT (tests lower it) */
    const sift__gx_mask_ops *mops;          /* its count: make_entry's small bulk sets */
    uint64_t narrow;                        /* level-1 walks that visited only their class's root children (level1_narrow) */
};

/* ---- small pools --------------------------------------------------------------------------- */

static inline uint64_t *dense_bits_w(const sift__gx_engine *e, int32_t d)
{
    return e->dense[(uint32_t)d / DENSE_CHUNK] + (size_t)((uint32_t)d % DENSE_CHUNK) * e->voc->n_words;
}

static inline const uint64_t *dense_bits(const sift__gx_engine *e, int32_t d)
{
    return e->dense[(uint32_t)d / DENSE_CHUNK] + (size_t)((uint32_t)d % DENSE_CHUNK) * e->voc->n_words;
}

/* ---- the DFA over suffix-stack sets -------------------------------------------------------- */

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static bool st_ht_insert(sift__gx_engine *e, uint32_t id)
{
    const dfa_state *s = &e->st[id];
    uint64_t h = sift__gx_hash_u32s(e->sets.v + s->set_off, s->set_n, 11);
    uint32_t k = (uint32_t)h & (e->st_ht_cap - 1);
    while (e->st_ht[k] != GX_NONE) k = (k + 1) & (e->st_ht_cap - 1);
    e->st_ht[k] = id;
    return true;
}

static bool st_ht_grow(sift__gx_engine *e)
{
    uint32_t ncap = e->st_ht_cap ? e->st_ht_cap * 2 : 1024;
    uint32_t *t = sift__gx_malloc((size_t)ncap * sizeof *t);
    if (!t) return false;
    memset(t, 0xFF, (size_t)ncap * sizeof *t);
    sift__gx_free(e->st_ht);
    e->st_ht = t;
    e->st_ht_cap = ncap;
    for (uint32_t id = 0; id < e->n_st; id++) st_ht_insert(e, id);
    return true;
}

/* Intern the sorted node set v[0..n); returns the state id or GX_NONE on OOM. */
static uint32_t dfa_intern(sift__gx_engine *e, const uint32_t *v, uint32_t n)
{
    static const uint32_t no_nodes[1] = {0};
    if (!v) v = no_nodes; /* the empty set may come as NULL: memcmp/memcpy need a pointer (UBSan) */
    const sift_grammar *g = e->g;
    uint64_t h = sift__gx_hash_u32s(v, n, 11);
    if (e->st_ht_cap) {
        for (uint32_t k = (uint32_t)h & (e->st_ht_cap - 1);; k = (k + 1) & (e->st_ht_cap - 1)) {
            uint32_t id = e->st_ht[k];
            if (id == GX_NONE) break;
            const dfa_state *s = &e->st[id];
            if (s->set_n == n && (n == 0 || !memcmp(e->sets.v + s->set_off, v, (size_t)n * sizeof *v))) return id;
        }
    }
    if (!GX_GROW(e->st, e->cap_st, e->n_st + 1)) return GX_NONE;
    /* + 1: sets.v is never NULL, even when the first set interned is empty (UBSan: NULL + 0) */
    if (!GX_GROW(e->sets.v, e->sets.cap, e->sets.n + n + 1)) return GX_NONE;
    if (!GX_GROW(e->live, e->live_cap, e->live_n + g->sym_words)) return GX_NONE;
    if (!GX_GROW(e->asc, e->asc_cap, (e->n_st + 1) * 128)) return GX_NONE;
    uint32_t id = e->n_st;
    memset(e->asc + (size_t)id * 128, 0xFF, 128 * sizeof *e->asc);
    dfa_state *s = &e->st[id];
    s->set_off = e->sets.n;
    s->set_n = n;
    if (n) memcpy(e->sets.v + e->sets.n, v, (size_t)n * sizeof *v);
    e->sets.n += n;
    s->live_off = e->live_n;
    uint64_t *live = e->live + e->live_n;
    memset(live, 0, (size_t)g->sym_words * sizeof *live);
    e->live_n += g->sym_words;
    for (uint32_t k = 0; k < n; k++) {
        uint32_t el = g->elems[e->wa.pos[v[k]]];
        if (GX_TYPE(el) == GX_CLASS) {
            const uint64_t *cb = sift__gx_class_bits(g, GX_VAL(el));
            for (uint32_t w = 0; w < g->sym_words; w++) live[w] |= cb[w];
        }
    }
    s->trans_off = GX_NONE;
    for (uint32_t k = 0; k < GX_N_SLICES; k++) {
        s->uni[k] = UNI_UNKNOWN;
        s->chain[k] = CHAIN_UNKNOWN;
    }
    s->loop_in[0] = s->loop_in[1] = s->loop_out[0] = s->loop_out[1] = 0;
    s->hi_known = s->hi_loop = 0;
    s->quiet_known = s->quiet = 0;
    e->n_st++;
    if ((uint64_t)e->n_st * 2 > e->st_ht_cap) {
        if (!st_ht_grow(e)) return GX_NONE;
    } else {
        st_ht_insert(e, id);
    }
    return id;
}

/* Transition of DFA state s on symbol sym: (next state << 1) | escaped, or -1 on OOM. */
static int32_t dfa_step(sift__gx_engine *e, uint32_t s, uint32_t sym)
{
    if (e->st[s].trans_off != GX_NONE) {
        int32_t t = e->trans[e->st[s].trans_off + sym];
        if (t >= 0) return t;
    } else {
        uint32_t ns = e->g->n_syms;
        if (!GX_GROW(e->trans, e->trans_cap, e->trans_n + ns)) return -1;
        e->st[s].trans_off = e->trans_n;
        memset(e->trans + e->trans_n, 0xFF, (size_t)ns * sizeof *e->trans);
        e->trans_n += ns;
    }
    const sift_grammar *g = e->g;
    sift__gx_arena *a = &e->wa;
    bool bottom = false;
    e->tmp.n = 0;
    if (e->st[s].set_n > GX_DFA_UNION_MIN) {
        sift__gx_u32vec *acc = &a->scratch;
        acc->n = 0;
        for (uint32_t k = 0; k < e->st[s].set_n; k++) {
            uint32_t n = e->sets.v[e->st[s].set_off + k];
            if (sift__gx_elem_accepts_sym(g, g->elems[a->pos[n]], sym) && !sift__gx_u32_push(acc, n)) return -1;
        }
        if (sift__gx_succ_union(a, acc->v, acc->n, &e->tmp, &bottom) != SIFT_OK) return -1;
        goto intern;
    }
    /* memoize successor lists first (sift__gx_succ may run closures and move the pool) */
    for (uint32_t k = 0; k < e->st[s].set_n; k++) {
        uint32_t n = e->sets.v[e->st[s].set_off + k];
        if (sift__gx_elem_accepts_sym(g, g->elems[a->pos[n]], sym)) {
            uint32_t c;
            bool b;
            if (!sift__gx_succ(a, n, &c, &b)) return -1;
        }
    }
    sift__gx_mark_begin(a);
    for (uint32_t k = 0; k < e->st[s].set_n; k++) {
        uint32_t n = e->sets.v[e->st[s].set_off + k];
        if (!sift__gx_elem_accepts_sym(g, g->elems[a->pos[n]], sym)) continue;
        uint32_t c;
        bool b;
        const uint32_t *sc = sift__gx_succ(a, n, &c, &b);
        bottom |= b;
        for (uint32_t q = 0; q < c; q++)
            if (sift__gx_mark_add(a, sc[q]) && !sift__gx_u32_push(&e->tmp, sc[q])) return -1;
    }
intern:
    if (e->tmp.n > 1) qsort(e->tmp.v, e->tmp.n, sizeof *e->tmp.v, cmp_u32);
    uint32_t id = dfa_intern(e, e->tmp.v, e->tmp.n);
    if (id == GX_NONE) return -1;
    int32_t t = (int32_t)((id << 1) | (uint32_t)bottom);
    e->trans[e->st[s].trans_off + sym] = t;
    return t;
}

/* The transition on ASCII byte b, remembered in the state's byte row. */
static int32_t dfa_step_ascii(sift__gx_engine *e, uint32_t s, uint8_t b)
{
    int32_t t = dfa_step(e, s, e->g->ascii_sym[b]);
    if (t >= 0) e->asc[(size_t)s * 128 + b] = t;
    return t;
}

/* Fill state s's transitions on the symbols of slice k, one dfa_step per distinct set of
 * its stacks that accept the symbol: 0, -1 out of memory. A transition depends on nothing
 * else (dfa_step unions the successors of exactly those stacks), and inside a string every
 * stack of a state accepts all of C_k's ~30-60 symbols or none of them - so a chain of new
 * states (a string with maxLength 255: ~100 of them, run by slice_ok and chain_len at
 * the first token of the string) costs one step per state, not one per symbol (MaskBench:
 * ~1 ms at such a first token). States of more than 64 stacks step symbol by symbol. */
static int slice_row(sift__gx_engine *e, uint32_t s, uint32_t k)
{
    const sift__gx_u32vec *ss = &e->slice_syms[k];
    if (e->st[s].set_n > 64 || ss->n < 2) return 0;
    enum { SIG_MAX = 8 };
    uint64_t sig[SIG_MAX];
    int32_t to[SIG_MAX];
    uint32_t n_sig = 0;
    for (uint32_t q = 0; q < ss->n; q++) {
        const uint32_t sym = ss->v[q];
        if (e->st[s].trans_off != GX_NONE && e->trans[e->st[s].trans_off + sym] >= 0) continue;
        uint64_t m = 0;
        const uint32_t *set = e->sets.v + e->st[s].set_off;
        for (uint32_t x = 0; x < e->st[s].set_n; x++)
            if (sift__gx_elem_accepts_sym(e->g, e->g->elems[e->wa.pos[set[x]]], sym)) m |= (uint64_t)1 << x;
        uint32_t f = 0;
        while (f < n_sig && sig[f] != m) f++;
        if (f < n_sig) {
            e->trans[e->st[s].trans_off + sym] = to[f]; /* the row exists: made by to[f]'s step */
            continue;
        }
        int32_t t = dfa_step(e, s, sym);
        if (t < 0) return -1;
        if (n_sig < SIG_MAX) {
            sig[n_sig] = m;
            to[n_sig++] = t;
        }
    }
    return 0;
}

/* The state that every character of slice k leads to from state s, when it is one live
 * state whatever the character (escaping or not), else UNI_NONE; memoized per state.
 * UNI_OOM on out of memory. Exact: every such character lies in a symbol that meets C_k,
 * and the DFA steps by symbol. */
static uint32_t uni_next(sift__gx_engine *e, uint32_t s, uint32_t k)
{
    if (e->st[s].uni[k] != UNI_UNKNOWN) return e->st[s].uni[k];
    if (s != DEAD && slice_row(e, s, k) < 0) return UNI_OOM;
    uint32_t to = s == DEAD ? UNI_NONE : UNI_UNKNOWN;
    const sift__gx_u32vec *ss = &e->slice_syms[k];
    for (uint32_t q = 0; q < ss->n && to != UNI_NONE; q++) {
        int32_t t = dfa_step(e, s, ss->v[q]);
        if (t < 0) return UNI_OOM;
        uint32_t ns = (uint32_t)t >> 1;
        to = ns == DEAD || (to != UNI_UNKNOWN && to != ns) ? UNI_NONE : ns;
    }
    if (to == UNI_UNKNOWN) to = UNI_NONE; /* a slice no symbol meets: never used */
    e->st[s].uni[k] = to;
    return to;
}

/* Is every string of at most `len` characters of slice k accepted from state s (each
 * prefix leaves a live state)? Then so is every token of a subtree whose slice_len is len
 * (see walk). len 255 means "255 or more": only a chain that closes into a loop qualifies.
 * 1 yes, 0 no, -1 out of memory. */
static int slice_ok(sift__gx_engine *e, uint32_t s, uint32_t k, uint32_t len)
{
    for (uint32_t j = 0; j < len || len == 255; j++) {
        uint32_t t = uni_next(e, s, k);
        if (t == UNI_OOM) return -1;
        if (t == UNI_NONE || j >= 255) return 0;
        if (t == s) return 1; /* a loop: every length */
        s = t;
    }
    return 1;
}

/* The length j of the chain of slice k from state s: a string of C_k characters is accepted
 * from s exactly when it has at most j characters - uni_next steps to live states, and at
 * the chain's end every C_k character either dies (DEAD) or, every one, uses the suffix up
 * and then dies (one more then) - a string with maxLength, j characters before its end. CHAIN_NONE
 * when s is not such a chain (a loop, a fork, longer than 253), -1 out of memory. Memoized
 * per state (every state along the chain gets its own). */
static int chain_len(sift__gx_engine *e, uint32_t s, uint32_t k)
{
    uint32_t path[256], n = 0, t = s;
    int r = CHAIN_NONE;
    for (;;) {
        if (e->st[t].chain[k] != CHAIN_UNKNOWN) {
            r = e->st[t].chain[k];
            break;
        }
        if (n == 254 || t == DEAD) break; /* too long, or dead already: none */
        path[n++] = t;
        uint32_t u = uni_next(e, t, k);
        if (u == UNI_OOM) return -1;
        if (u == t) break; /* a loop: slice_ok takes it */
        if (u == UNI_NONE) { /* the end of the chain: every C_k character dies here, or every one ends it */
            const sift__gx_u32vec *ss = &e->slice_syms[k];
            bool die = ss->n > 0, end = ss->n > 0;
            for (uint32_t q = 0; q < ss->n && (die || end); q++) {
                int32_t x = dfa_step(e, t, ss->v[q]);
                if (x < 0) return -1;
                die &= x == (int32_t)(DEAD << 1);    /* a token with this character is rejected */
                end &= x == (int32_t)(DEAD << 1 | 1); /* accepted if it ends with it (the suffix used up) */
            }
            if (die || end) {
                r = end;
                e->st[t].chain[k] = (uint8_t)r;
                n--;
            }
            break;
        }
        t = u;
    }
    /* path[q] is n - q steps before a state of chain length r */
    for (uint32_t q = n; q-- > 0;) {
        if (r != CHAIN_NONE) r = r + 1 < CHAIN_NONE ? r + 1 : CHAIN_NONE;
        e->st[path[q]].chain[k] = (uint8_t)r;
    }
    return e->st[s].chain[k];
}

/* Is state s the head of a chain of slice k (chain_len) none of whose steps, on any C_k
 * symbol, uses the suffix up - down to and including its end, where every C_k character must
 * then die (chain length r = 0 there, not "ends it": that one escapes)? 1 yes, 0 no, -1 out
 * of memory. Memoized per state, like chain_len (every state along the chain gets its own).
 *
 * Why. The chain rules (take_slice, child's first-character chain) ignore the escapes inside
 * the subtree they take, which is exact only if no escape there can lead anywhere; they
 * asked that FOLLOW have no C_k character. An exact-length string puts its whole text,
 * closing quote included, in one rule (token ::= "\"" char char ... "\"" space): FOLLOW
 * holds ',' and '}', but the rule cannot end before the quote, so no C_k character there
 * ever escapes - and every typed token landed on a new chain position that walked 3k-25k
 * nodes (MaskBench: 400-900 us per mask). With a quiet chain no frame below the subtree's
 * root has the escape bit (walk records an escape only at a frame that has it), the tokens
 * of at most j characters are accepted at this level, and the longer ones die at their
 * (j+1)-th character with no escape: nothing is lost, whatever FOLLOW. The root's own
 * escape bit is the caller's to check. */
static int chain_quiet(sift__gx_engine *e, uint32_t s, uint32_t k)
{
    uint32_t path[256], n = 0, t = s;
    int r = 0;
    int j = chain_len(e, s, k);
    if (j < 0) return -1;
    if (j == CHAIN_NONE) return 0;
    const sift__gx_u32vec *ss = &e->slice_syms[k];
    for (;;) {
        if (e->st[t].quiet_known >> k & 1) {
            r = e->st[t].quiet >> k & 1;
            break;
        }
        path[n++] = t;
        bool q = true;
        for (uint32_t x = 0; x < ss->n && q; x++) {
            int32_t y = dfa_step(e, t, ss->v[x]);
            if (y < 0) return -1;
            q = !(y & 1);
        }
        if (!q) break; /* r = 0: an escape at t */
        uint32_t u = uni_next(e, t, k);
        if (u == UNI_OOM) return -1;
        if (u == UNI_NONE) { /* the chain's end, where every C_k character died (no escape bit) */
            r = 1;
            break;
        }
        if (n == 255 || u == t) break; /* not a chain (chain_len said it is: not reached) */
        t = u;
    }
    /* every state on the path is quiet exactly when the rest of the chain is */
    for (uint32_t q = 0; q < n; q++) {
        e->st[path[q]].quiet_known |= (uint8_t)(1u << k);
        e->st[path[q]].quiet |= (uint8_t)((unsigned)r << k);
    }
    return r;
}

static inline bool live_any(const sift__gx_engine *e, uint32_t s, uint32_t s0, uint32_t s1)
{
    return sift__gx_bits_any_in(e->live + e->st[s].live_off, s0, s1);
}

static bool partial_possible(const sift__gx_engine *e, uint32_t s, const sift__gx_utf8 *u)
{
    uint32_t lo, hi, s0, s1;
    sift__gx_utf8_range(u, &lo, &hi);
    sift__gx_syms_in_range(e->g, lo, hi, &s0, &s1);
    return live_any(e, s, s0, s1);
}

static void root_walks_free(sift__gx_engine *e) { e->n_rw = 0; }

/* Drop the DFA and the walk arena (between entry computations) when they grow too big. */
static int dfa_maybe_reset(sift__gx_engine *e)
{
    uint64_t bytes = (uint64_t)e->sets.cap * 4 + (uint64_t)e->trans_cap * 4 + (uint64_t)e->live_cap * 8 +
                     (uint64_t)e->wa.cap * 20 + (uint64_t)e->wa.pool.cap * 4 + (uint64_t)e->asc_cap * 4;
    if (bytes < DFA_BYTES_LIMIT) return SIFT_OK;
    sift__gx_arena_clear(&e->wa);
    root_walks_free(e); /* keyed by DFA states */
    e->n_st = 0;
    e->sets.n = e->live_n = e->trans_n = 0;
    memset(e->st_ht, 0xFF, (size_t)e->st_ht_cap * sizeof *e->st_ht);
    return dfa_intern(e, NULL, 0) == DEAD ? SIFT_OK : SIFT_E_NOMEM;
}

/* ---- walks --------------------------------------------------------------------------------- */

static inline bool follow_ok(const sift__gx_engine *e, const uint64_t *follow, uint8_t b)
{
    if (b < 0x80) return sift__gx_bit(follow, e->g->ascii_sym[b]);
    if (b >= 0xC2 && b <= 0xF4) return sift__gx_bits_any_in(follow, e->lead_lo[b], e->lead_hi[b]);
    return false;
}

/* Has FOLLOW set `follow` no symbol of slice k? (1-entry memo per engine: a walk keeps its set) */
static bool follow_disjoint(sift__gx_engine *e, const uint64_t *follow, uint32_t k)
{
    if (e->fd_follow != follow) {
        e->fd_follow = follow;
        e->fd_bits = 0;
        for (uint32_t j = 0; j < GX_N_SLICES; j++) {
            bool dis = true;
            for (uint32_t q = 0; q < e->slice_syms[j].n && dis; q++) dis = !sift__gx_bit(follow, e->slice_syms[j].v[q]);
            e->fd_bits |= (uint8_t)(dis << j);
        }
    }
    return e->fd_bits >> k & 1;
}

/* Are the tokens below trie node i of at most lim characters (all: UINT32_MAX) in the C_0
 * set child put in bulk_bits (c0_lim, see child)? They are when they are C_0 tokens of 2
 * to c0_lim characters: every token below i continues with C_0 characters (slice_all),
 * node i's own text is one or more complete C_0 characters, and they have at most c0_lim. */
static bool c0_covered(const sift__gx_engine *e, uint32_t i, uint32_t lim)
{
    const sift__gx_vocab *v = e->voc;
    if (e->c0_epoch != e->node_epoch || !(v->slice_all[i] & 1) || !v->c0_node[i]) return false;
    if (e->c0_lim == UINT32_MAX) return true;
    if (lim != UINT32_MAX) return lim <= e->c0_lim;
    if (v->slice_len[i] == 255) return false;
    uint32_t len, n = 0; /* node i's characters, as sorted_chars counts them */
    const uint8_t *t = sift__gx_vocab_text(v, v->sorted[v->node[i].tok_begin], &len);
    for (uint32_t d = 0; d < v->node[i].depth; d++) n += (t[d] & 0xC0) != 0x80;
    return n + v->slice_len[i] <= e->c0_lim;
}

#define TAKE_LIST_MAX 32u /* take_below: subtrees of at most this many tokens go to the list */

/* Take the tokens below trie node i into bulk_bits: all of them, or (lim != UINT32_MAX)
 * those of at most lim characters (sorted_chars). Nothing to do when child's C_0 set has
 * them already (c0_covered): inside a string with maxLength that was ~50k tokens set one
 * by one per chain position, below the first characters that are not slice_first. */
static void take_below(sift__gx_engine *e, uint32_t i, uint32_t lim)
{
    const sift__gx_vocab *v = e->voc;
    if (c0_covered(e, i, lim)) {
        e->bulk += v->node[i].end - i - 1;
        e->chain_taken += lim != UINT32_MAX;
        return;
    }
    uint32_t lo, hi;
    sift__gx_trie_below(v, i, &lo, &hi);
    if (hi - lo <= TAKE_LIST_MAX && GX_GROW(e->acc.v, e->acc.cap, e->acc.n + (hi - lo))) {
        /* a few tokens: into the list, so that an entry that takes nothing more stays a
         * list over its parent's set (bulk_bits makes it a dense set of its own, which
         * fill_mask then ORs too - the chains inside keys of a key-exclusion rule) */
        for (uint32_t q = lo; q < hi; q++)
            if (lim == UINT32_MAX || v->sorted_chars[q] <= lim) e->acc.v[e->acc.n++] = v->sorted[q];
    } else if (lim == UINT32_MAX) {
        for (uint32_t q = lo; q < hi; q++) sift__gx_bit_set(e->bulk_bits, v->sorted[q]);
        e->bulk_used = true;
    } else {
        for (uint32_t q = lo; q < hi; q++)
            if (v->sorted_chars[q] <= lim) sift__gx_bit_set(e->bulk_bits, v->sorted[q]);
        e->bulk_used = true;
    }
    e->bulk += v->node[i].end - i - 1;
    e->chain_taken += lim != UINT32_MAX;
}

/* If the whole subtree below trie node i can be taken at once from state ns (a slice, see
 * walk), take it: 1 taken, 0 not, -1 out of memory.
 *
 * A chain shorter than the subtree's tokens (a string with maxLength, j characters before
 * its end: chain_len) takes the subtree's tokens of at most j characters below i: each of
 * their prefixes leaves a live state, and a longer token dies at its (j+1)-th character.
 * Only when FOLLOW has no C_k character: an escape inside the subtree (the string may end
 * there) could then lead nowhere, so none is recorded. Or when no escape can happen inside
 * the subtree at all: the chain is quiet (chain_quiet: an exact-length string, which ends
 * only at its closing quote) and node i itself did not use the suffix up (esc, the escape
 * bit of the step into i: walk would record i as an escape before one of its children).
 * One pass over the subtree's tokens (their character counts, trie.h) instead of walking
 * its nodes - short maxLength strings walked 50k-140k nodes per mask (MaskBench: most of
 * the masks over 1 ms). */
static int take_slice(sift__gx_engine *e, uint32_t i, uint32_t ns, bool esc, const uint64_t *follow)
{
    const sift__gx_vocab *v = e->voc;
    int lp = 0;
    uint32_t lim = UINT32_MAX;
    for (uint32_t k = 0; k < GX_N_SLICES && !lp; k++)
        if (v->slice_all[i] >> k & 1) lp = slice_ok(e, ns, k, v->slice_len[i]);
    if (lp < 0) return lp;
    for (uint32_t k = 0; k < GX_N_SLICES && !lp; k++) {
        if (!(v->slice_all[i] >> k & 1)) continue;
        int j = chain_len(e, ns, k);
        if (j < 0) return -1;
        if (j == CHAIN_NONE) continue;
        if (!follow_disjoint(e, follow, k)) {
            int q = esc ? 0 : chain_quiet(e, ns, k);
            if (q < 0) return -1;
            if (!q) continue;
            e->quiet_taken++;
        }
        /* the characters of node i's text: those of a token below, to depth(i) */
        uint32_t len;
        const uint8_t *t = sift__gx_vocab_text(v, v->sorted[v->node[i].tok_begin], &len);
        lim = (uint32_t)j;
        for (uint32_t d = 0; d < v->node[i].depth; d++) lim += (t[d] & 0xC0) != 0x80;
        lp = 1;
    }
    if (lp <= 0) return lp;
    take_below(e, i, lim);
    return 1;
}

/* The ASCII bytes that FOLLOW set `follow` lets an escape continue with (1-entry memo). */
static const uint64_t *follow_ascii(sift__gx_engine *e, const uint64_t *follow)
{
    if (e->fa_follow != follow) {
        e->fa_follow = follow;
        e->fa_bytes[0] = e->fa_bytes[1] = 0;
        for (uint32_t b = 1; b < 0x80; b++)
            if (sift__gx_bit(follow, e->g->ascii_sym[b])) e->fa_bytes[b >> 6] |= (uint64_t)1 << (b & 63);
    }
    return e->fa_bytes;
}

/* The ASCII transition of state s on byte b (memoized in the byte row); -1 out of memory. */
static inline int32_t step_ascii(sift__gx_engine *e, uint32_t s, uint32_t b)
{
    int32_t t = e->asc[(size_t)s * 128 + b];
    return t >= 0 ? t : dfa_step_ascii(e, s, (uint8_t)b);
}

/* Does every non-ASCII character of slice k step state s to itself? 1 yes, 0 no, -1 out of
 * memory; memoized per state. Exact: such a character lies in a symbol that meets C_k. */
static int hi_loops(sift__gx_engine *e, uint32_t s, uint32_t k)
{
    if (e->st[s].hi_known >> k & 1) return e->st[s].hi_loop >> k & 1;
    uint32_t a, b;
    sift__gx_syms_in_range(e->g, 0x80, 0x10FFFF, &a, &b);
    bool yes = true;
    const sift__gx_u32vec *ss = &e->slice_syms[k];
    for (uint32_t q = 0; q < ss->n && yes; q++) {
        if (ss->v[q] < a || ss->v[q] > b) continue;
        int32_t t = dfa_step(e, s, ss->v[q]);
        if (t < 0) return -1;
        yes = (uint32_t)t >> 1 == s;
    }
    e->st[s].hi_known |= (uint8_t)(1u << k);
    e->st[s].hi_loop |= (uint8_t)((unsigned)yes << k);
    return yes;
}

#define CLASS_CHAIN_MIN 16u /* subtree nodes below which class_take does not try a chain */

/* Class slices: take the whole subtree below trie node i from state ns when the grammar's
 * own character class lets every token below through - 1 taken, 0 not, -1 out of memory.
 *
 * Why. The fixed slices (trie.h) cover the JSON string and host name classes only; a regex
 * `pattern` becomes a GBNF loop over its own class ([a-zA-Z0-9_]+, [a-z0-9._-]*) or a
 * bounded run ([0-9a-fA-F]{8}), and a walk in such a state stepped through every
 * alphanumeric token of the trie (MaskBench: 30k-1M nodes per mask, most masks over 1 ms).
 * The vocabulary knows the bytes below each node (below_bytes, one set for any class), so
 * no pass per class is needed: ns's loop bytes (those that step it to itself) are learnt
 * lazily per DFA state, and a subtree whose bytes are all ASCII loop bytes is accepted whole
 * - every prefix of every token below stays in ns. Escapes inside it are not recorded, as
 * for the slices: they would only let lower levels accept tokens of the subtree.
 *
 * Otherwise, a chain: every byte below steps ns to one state, and that state to one
 * state, ... (a bounded repetition). If the chain loops, or outlasts the subtree's longest
 * token, every token is accepted; if after j steps every byte below dies (or every one
 * uses the suffix up and then dies: j + 1), the tokens of at most j characters below are.
 * Only when FOLLOW has none of those bytes: an escape inside the subtree could then lead
 * nowhere, so ignoring escapes loses no token (take_slice's chain rule). Exact. */
static int class_take(sift__gx_engine *e, uint32_t i, uint32_t ns, const uint64_t *follow)
{
    const sift__gx_vocab *v = e->voc;
    const uint64_t b0 = v->below_bytes[i][0] & ~(uint64_t)1, b1 = v->below_bytes[i][1];
    const bool high = v->below_bytes[i][0] & 1; /* a byte >= 0x80 below */
    dfa_state *st = &e->st[ns];
    bool loop = !((b0 & st->loop_out[0]) | (b1 & st->loop_out[1]));
    if (high) {
        /* non-ASCII below: a loop only, over characters that are well formed and of C_0 (or
         * C_1) by the slice flags, each of which steps ns to itself (hi_loops) */
        int h = 0;
        for (uint32_t k = 0; k < 2 && loop && h == 0; k++)
            if (v->slice_all[i] >> k & 1) h = hi_loops(e, ns, k);
        if (h < 0) return -1;
        if (!h) return 0;
    }
    for (uint32_t w = 0; w < 2 && loop; w++) {
        uint64_t rem = (w ? b1 : b0) & ~e->st[ns].loop_in[w];
        for (; rem && loop; rem &= rem - 1) {
            uint32_t b = w * 64 + (uint32_t)__builtin_ctzll(rem);
            int32_t t = step_ascii(e, ns, b);
            if (t < 0) return -1;
            st = &e->st[ns]; /* dfa_step may have moved the states */
            loop = (uint32_t)t >> 1 == ns;
            if (loop) st->loop_in[w] |= (uint64_t)1 << (b & 63);
            else st->loop_out[w] |= (uint64_t)1 << (b & 63);
        }
    }
    uint32_t lim = UINT32_MAX;
    if (!loop && high) return 0;
    if (!loop) {
        const sift__gx_trie_node *nd = &v->node[i];
        const uint64_t *fa = follow_ascii(e, follow);
        if (nd->end - i < CLASS_CHAIN_MIN || (b0 & fa[0]) || (b1 & fa[1])) return 0;
        uint32_t s = ns, j = 0;
        for (; j < v->below_len[i] && j < 255; j++) {
            int32_t common = -1;
            for (uint32_t w = 0; w < 2; w++) {
                for (uint64_t rem = w ? b1 : b0; rem; rem &= rem - 1) {
                    int32_t t = step_ascii(e, s, w * 64 + (uint32_t)__builtin_ctzll(rem));
                    if (t < 0) return -1;
                    if ((uint32_t)t >> 1 != DEAD) t &= ~1; /* escapes lead nowhere (FOLLOW checked) */
                    if (common >= 0 && t != common) return 0;
                    common = t;
                }
            }
            if (common < 0) return 0;
            if ((uint32_t)common >> 1 == DEAD) {
                lim = j + ((uint32_t)common & 1);
                break;
            }
            if ((uint32_t)common >> 1 == s) break; /* a loop: every token */
            s = (uint32_t)common >> 1;
        }
        if (j == 255) return 0;
        if (lim != UINT32_MAX) { /* count node i's own characters, as sorted_chars does */
            uint32_t len;
            const uint8_t *t = sift__gx_vocab_text(v, v->sorted[nd->tok_begin], &len);
            for (uint32_t d = 0; d < nd->depth; d++) lim += (t[d] & 0xC0) != 0x80;
        }
    }
    take_below(e, i, lim);
    e->class_taken++;
    return 1;
}

#define FIRST_EX_MAX 32u /* excepted ASCII characters of first_loop */

static bool slice_has(uint32_t k, uint32_t cp)
{
    const sift__gx_slice *sl = &sift__gx_slices[k];
    for (uint32_t r = 0; r < sl->n_ranges; r++)
        if (cp >= sl->ranges[2 * r] && cp <= sl->ranges[2 * r + 1]) return true;
    return false;
}

/* The loop L of slice k (uni_next(L) == L) that state s0 steps to on every character of
 * C_k except the ASCII ones listed in ex[0..*n_ex); UNI_NONE when there is none (or more
 * than FIRST_EX_MAX exceptions, or a non-ASCII character goes elsewhere), UNI_OOM. */
static uint32_t first_loop(sift__gx_engine *e, uint32_t s0, uint32_t k, uint8_t *ex, uint32_t *n_ex)
{
    const sift_grammar *g = e->g;
    uint32_t a, b, L = UNI_NONE;
    sift__gx_syms_in_range(g, 0x80, 0x10FFFF, &a, &b);
    const sift__gx_u32vec *ss = &e->slice_syms[k];
    for (uint32_t q = 0; q < ss->n; q++) {
        if (ss->v[q] < a || ss->v[q] > b) continue; /* ASCII only: below */
        int32_t t = dfa_step(e, s0, ss->v[q]);
        if (t < 0) return UNI_OOM;
        uint32_t ns = (uint32_t)t >> 1;
        if (ns == DEAD || (L != UNI_NONE && ns != L)) return UNI_NONE;
        L = ns;
    }
    if (L == UNI_NONE) return UNI_NONE;
    uint32_t t2 = uni_next(e, L, k);
    if (t2 == UNI_OOM) return UNI_OOM;
    if (t2 != L) return UNI_NONE;
    *n_ex = 0;
    for (uint32_t c = 0; c < 0x80; c++) {
        if (!slice_has(k, c)) continue;
        int32_t t = e->asc[(size_t)s0 * 128 + c];
        if (t < 0 && (t = dfa_step_ascii(e, s0, (uint8_t)c)) < 0) return UNI_OOM;
        if ((uint32_t)t >> 1 == L) continue;
        if (*n_ex == FIRST_EX_MAX) return UNI_NONE;
        ex[(*n_ex)++] = (uint8_t)c;
    }
    return L;
}

static int walk(sift__gx_engine *e, uint32_t root, uint32_t s0, bool esc0, sift__gx_utf8 u0, const uint64_t *follow);
static uint32_t make_entry(sift__gx_engine *e, uint32_t parent);
static int32_t new_dense(sift__gx_engine *e);

/* ---- sharing across grammars (share.h) ------------------------------------------------------ */

/* A key describes what an entry's walk depends on, in terms no grammar owns: the frames'
 * rest of alternative and every rule they reach (rules numbered in the order met, classes
 * as their code point ranges, tokens by id), and the FOLLOW set that kept escapes, as code
 * point ranges - a walk reads a grammar only through these (its symbols and DFA states
 * are its own way of stepping through them). A stack set (a DFA state) is its stacks'
 * descriptions, each numbered on its own, sorted. Too large a description (a frame that
 * reaches a whole schema) is not shared: past CANON_FRAME words for one frame (a string's
 * char* loop and its char rule take ~80), CANON_STATES for a root walk's stack set; a frame
 * found too large is remembered (canon_big), so that it costs its description once. */
#define CANON_FRAME 256u
#define CANON_STATES 1024u
#define SHARE_CLASS_MIN 128u /* code points of a class whose level-1 entry is shared */
enum { CK_LEVEL1 = 0xC0DE0001u, CK_CHILD, CK_ROOTWALK };
enum { CT_REF = 0xC7000001u, CT_CLASS, CT_TOKEN, CT_TOKEN_NOT, CT_END, CT_RULE, CT_FRAME, CT_FOLLOW, CT_STACK };

static bool canon_put(sift__gx_engine *e, sift__gx_u32vec *o, uint32_t x)
{
    (void)e;
    return o->n < e->canon_max && sift__gx_u32_push(o, x);
}

/* The rest of an alternative from position p, into o; rules met are queued. */
static bool canon_elems(sift__gx_engine *e, sift__gx_u32vec *o, uint32_t p)
{
    const sift_grammar *g = e->g;
    for (;; p++) {
        uint32_t el = g->elems[p], v = GX_VAL(el);
        switch (GX_TYPE(el)) {
        case GX_END:
        case GX_ALT:
            return canon_put(e, o, CT_END);
        case GX_REF:
            if (!e->crule[v]) {
                if (!sift__gx_u32_push(&e->cq, v)) return false;
                e->crule[v] = e->cq.n;
            }
            if (!canon_put(e, o, CT_REF) || !canon_put(e, o, e->crule[v] - 1)) return false;
            break;
        case GX_CLASS: {
            uint32_t lo = g->class_off[v], hi = g->class_off[v + 1];
            if (!canon_put(e, o, CT_CLASS) || !canon_put(e, o, hi - lo)) return false;
            for (uint32_t k = lo; k < hi; k++)
                if (!canon_put(e, o, g->ranges[k])) return false;
            break;
        }
        default:
            if (!canon_put(e, o, GX_TYPE(el) == GX_TOKEN ? CT_TOKEN : CT_TOKEN_NOT) || !canon_put(e, o, v)) return false;
        }
    }
}

/* Every rule queued (and those they queue), whole, into o; then the numbering is reset. */
static bool canon_rules(sift__gx_engine *e, sift__gx_u32vec *o)
{
    const sift_grammar *g = e->g;
    bool ok = true;
    for (uint32_t q = 0; q < e->cq.n && ok; q++) {
        uint32_t r = e->cq.v[q], p = g->rule_start[r];
        ok = canon_put(e, o, CT_RULE) && canon_put(e, o, q);
        for (;;) {
            if (!ok || !(ok = canon_elems(e, o, p))) break;
            while (!sift__gx_is_end(g->elems[p])) p++;
            if (GX_TYPE(g->elems[p]) == GX_END) break;
            p++;
        }
    }
    for (uint32_t q = 0; q < e->cq.n; q++) e->crule[e->cq.v[q]] = 0;
    e->cq.n = 0;
    return ok;
}

/* One suffix stack (walk-arena node n down to the sentinel), numbered on its own, into o. */
static bool canon_stack(sift__gx_engine *e, sift__gx_u32vec *o, uint32_t n)
{
    bool ok = canon_put(e, o, CT_STACK);
    for (; ok && n; n = e->wa.parent[n]) ok = canon_put(e, o, CT_FRAME) && canon_elems(e, o, e->wa.pos[n]);
    if (!ok) { /* reset the numbering */
        for (uint32_t q = 0; q < e->cq.n; q++) e->crule[e->cq.v[q]] = 0;
        e->cq.n = 0;
        return false;
    }
    return canon_rules(e, o);
}

/* FOLLOW set `follow` as merged code point ranges, into e->ck. */
static bool canon_follow(sift__gx_engine *e, const uint64_t *follow)
{
    const sift_grammar *g = e->g;
    if (!canon_put(e, &e->ck, CT_FOLLOW)) return false;
    uint32_t lo = UINT32_MAX, hi = 0;
    for (uint32_t q = 0; q < g->n_syms; q++) {
        if (!sift__gx_bit(follow, q)) continue;
        uint32_t a = g->sym_lo[q], b = g->sym_lo[q + 1] - 1;
        if (lo != UINT32_MAX && a == hi + 1) {
            hi = b;
            continue;
        }
        if (lo != UINT32_MAX && (!canon_put(e, &e->ck, lo) || !canon_put(e, &e->ck, hi))) return false;
        lo = a;
        hi = b;
    }
    if (lo != UINT32_MAX && (!canon_put(e, &e->ck, lo) || !canon_put(e, &e->ck, hi))) return false;
    return canon_put(e, &e->ck, CT_END);
}

/* Stack descriptions (offset, length) pairs a and b in base: a < b? */
static bool stack_less(const uint32_t *base, const uint32_t *a, const uint32_t *b)
{
    for (uint32_t k = 0; k < a[1] && k < b[1]; k++)
        if (base[a[0] + k] != base[b[0] + k]) return base[a[0] + k] < base[b[0] + k];
    return a[1] < b[1];
}

/* The key of a walk from the stacks of `nodes` (walk-arena ids) with FOLLOW `follow`, after
 * `head` (tag, then what the caller adds: the unfinished UTF-8 key, the parent's record),
 * into e->ck; false when it is too large to share. */
static bool canon_key(sift__gx_engine *e, const uint32_t *head, uint32_t n_head, const uint32_t *nodes, uint32_t n_nodes,
                      const uint64_t *follow)
{
    e->canon_max = n_nodes == 1 ? CANON_FRAME : CANON_STATES;
    e->ck.n = e->cbuf.n = e->coff.n = 0;
    for (uint32_t k = 0; k < n_head; k++)
        if (!canon_put(e, &e->ck, head[k])) return false;
    for (uint32_t k = 0; k < n_nodes; k++) {
        uint32_t at = e->cbuf.n;
        if (!canon_stack(e, &e->cbuf, nodes[k])) return false;
        if (!sift__gx_u32_push(&e->coff, at) || !sift__gx_u32_push(&e->coff, e->cbuf.n - at)) return false;
    }
    for (uint32_t k = 1; k < n_nodes; k++) /* (a few stacks: insertion sort) */
        for (uint32_t j = k; j > 0 && stack_less(e->cbuf.v, e->coff.v + 2 * j, e->coff.v + 2 * (j - 1)); j--) {
            uint32_t t0 = e->coff.v[2 * j], t1 = e->coff.v[2 * j + 1];
            e->coff.v[2 * j] = e->coff.v[2 * j - 2];
            e->coff.v[2 * j + 1] = e->coff.v[2 * j - 1];
            e->coff.v[2 * j - 2] = t0;
            e->coff.v[2 * j - 1] = t1;
        }
    for (uint32_t k = 0; k < n_nodes; k++)
        for (uint32_t q = 0; q < e->coff.v[2 * k + 1]; q++)
            if (!canon_put(e, &e->ck, e->cbuf.v[e->coff.v[2 * k] + q])) return false;
    return canon_follow(e, follow);
}

/* A new entry holding a shared record's content; GX_NONE on out of memory. */
static uint32_t entry_from_shared(sift__gx_engine *e, const sift__gx_shared *sh, uint32_t sid)
{
    if (!GX_GROW(e->ent, e->cap_ent, e->n_ent + 1)) return GX_NONE;
    sift__gx_entry ne = {-1, 0, 0, 0, 0, 0, 0, 0, {0}, GX_NONE, {0}, sid};
    for (uint32_t k = 0; k < GX_N_SLICES; k++) ne.loop[k] = -1;
    if (sh->dense) {
        int32_t d = new_dense(e);
        if (d < 0) return GX_NONE;
        memcpy(dense_bits_w(e, d), sh->dense, (size_t)e->voc->n_words * sizeof(uint64_t));
        ne.dense = d;
    }
    if (!GX_GROW(e->lists.v, e->lists.cap, e->lists.n + sh->n_extra + sh->n_esc)) return GX_NONE;
    ne.extra_off = e->lists.n;
    ne.extra_n = sh->n_extra;
    if (sh->n_extra) memcpy(e->lists.v + e->lists.n, sh->extra, (size_t)sh->n_extra * sizeof(uint32_t));
    e->lists.n += sh->n_extra;
    ne.esc_off = e->lists.n;
    ne.esc_n = sh->n_esc;
    if (sh->n_esc) memcpy(e->lists.v + e->lists.n, sh->esc, (size_t)sh->n_esc * sizeof(uint32_t));
    e->lists.n += sh->n_esc;
    e->ent[e->n_ent] = ne;
    e->shared_hits++;
    e->shared_work += sh->work;
    return e->n_ent++;
}

/* Share entry id (made from nothing but the walk e->ck describes) under e->ck. */
static void entry_share(sift__gx_engine *e, uint32_t id, uint64_t work)
{
    const sift__gx_entry *en = &e->ent[id];
    if (en->peer != GX_NONE) return; /* its escapes are not all its own */
    sift__gx_shared sh = {en->dense >= 0 ? dense_bits(e, en->dense) : NULL, e->lists.v + en->extra_off, e->lists.v + en->esc_off,
                          en->extra_n, en->esc_n, (uint32_t)(work < UINT32_MAX ? work : UINT32_MAX)};
    uint32_t sid = sift__gx_share_put(e->voc->share, e->ck.v, e->ck.n, &sh);
    if (sid != UINT32_MAX) {
        e->ent[id].sid = sid;
        e->shared_puts++;
    }
}
static bool et_put(sift__gx_engine *e, uint32_t parent, uint32_t pos, uint32_t aux, uint32_t id);

/* The root's children (the vocabulary's first bytes) in preorder, with their bytes, made on
 * first use from root_child (trie.h): the root's children are in byte order. */
static void root_children_make(sift__gx_engine *e)
{
    if (e->rootc_ok) return;
    e->n_rootl = 0;
    for (uint32_t b = 0; b < 256; b++) {
        if (!e->voc->root_child[b]) continue;
        e->rootb[e->n_rootl] = (uint8_t)b;
        e->rootl[e->n_rootl++] = e->voc->root_child[b];
    }
    e->rootc_ok = true;
}

static void next_node_epoch(sift__gx_engine *e)
{
    if (++e->node_epoch == 0) {
        memset(e->node_stamp, 0, (size_t)e->voc->n_nodes * sizeof *e->node_stamp);
        e->node_epoch = 1;
    }
}

/* The walk from the trie root in state s0, when s0 steps to loop L on nearly every first
 * character, made from a remembered walk in L: 1 done (cov[b]: the root children of first
 * byte b it covered, for walk to skip), 0 not, -1 out of memory.
 *
 * Why. A key-exclusion rule (json_schema.c: "any key but the declared ones") is a chain of
 * small rules, each "one declared key's next character, or any other character then
 * char*": a class like [^"\\\x00-\x1FC] followed by a loop. Every such class is a new
 * level-1 entry, walked from the root: ~6.6k trie nodes (the tokens holding a quote or a
 * backslash, which no slice takes) for what is, but for one excluded first character, the
 * same walk each time - and each new key character of a generated key met a new one
 * (MaskBench: the largest group of masks over 300 us). Since the walk arena names frames by
 * representative (stacks.h), those loops are one DFA state L, so the walk in L is made once
 * per (L, FOLLOW) and each class takes it less the subtrees where s0 and L differ.
 *
 * Exact: below a root child of first byte b, a walk depends only on the state, escape flag
 * and UTF-8 left after b, i.e. on the transition on b; where s0's equals L's (every ASCII b
 * compared, the non-ASCII symbols all at once: a lead byte leaves the state as it is until
 * the character completes), the subtree's tokens and escapes are L's. The other children
 * are cleared from the copy and walked from s0 (walk skips the covered ones). */
static int root_walk_take(sift__gx_engine *e, uint32_t s0, uint32_t L, const uint64_t *follow, bool *cov)
{
    const sift__gx_vocab *v = e->voc;
    const sift_grammar *g = e->g;
    const sift__gx_trie_node *tn = v->node;
    uint32_t a, b;
    sift__gx_syms_in_range(g, 0x80, 0x10FFFF, &a, &b);
    for (uint32_t q = a; q <= b; q++) {
        int32_t t0 = dfa_step(e, s0, q), t1 = dfa_step(e, L, q);
        if (t0 < 0 || t1 < 0) return -1;
        if (t0 != t1) return 0;
    }
    uint64_t uncovered = 0;
    for (uint32_t c = 1; c < v->n_nodes; c = tn[c].end) {
        uint8_t by = tn[c].byte;
        bool same = true;
        if (by < 0x80) {
            int32_t t0 = e->asc[(size_t)s0 * 128 + by], t1 = e->asc[(size_t)L * 128 + by];
            if (t0 < 0 && (t0 = dfa_step_ascii(e, s0, by)) < 0) return -1;
            if (t1 < 0 && (t1 = dfa_step_ascii(e, L, by)) < 0) return -1;
            same = t0 == t1;
        }
        cov[by] = same;
        if (!same) uncovered += tn[c].end - c;
    }
    if (uncovered * 4 > v->n_nodes) return 0; /* mostly a walk of its own */
    uint32_t sw = g->sym_words;
    root_walk *rw = NULL;
    for (uint32_t k = 0; k < e->n_rw && !rw; k++)
        if (e->rw[k].state == L && (e->rw[k].follow == follow || !memcmp(e->rw[k].follow, follow, (size_t)sw * sizeof *follow)))
            rw = &e->rw[k];
    if (!rw) {
        if (e->n_rw == ROOT_WALKS_MAX || !GX_GROW(e->rw, e->cap_rw, e->n_rw + 1)) return e->n_rw == ROOT_WALKS_MAX ? 0 : -1;
        /* the computation has nothing yet (walk checked): make L's walk in its place, as an
         * entry of its own (escapes in preorder), then start the computation over */
        const uint32_t head = CK_ROOTWALK;
        bool keyed = canon_key(e, &head, 1, e->sets.v + e->st[L].set_off, e->st[L].set_n, follow);
        sift__gx_shared sh;
        uint32_t sid = keyed ? sift__gx_share_find(e->voc->share, e->ck.v, e->ck.n, &sh) : UINT32_MAX, id;
        if (sid != UINT32_MAX) {
            id = entry_from_shared(e, &sh, sid);
        } else {
            sift__gx_utf8 none = {0};
            uint64_t w0 = e->walked + e->root_skipped;
            e->rw_building = true;
            int rc = walk(e, 0, L, false, none, follow);
            e->rw_building = false;
            if (rc != SIFT_OK) return -1;
            id = make_entry(e, GX_NONE);
            if (id != GX_NONE && keyed) entry_share(e, id, e->walked + e->root_skipped - w0);
        }
        if (id == GX_NONE || !et_put(e, GX_NONE, PEER_KEY_POS, id, id)) return -1;
        e->acc.n = e->esc.n = 0;
        next_node_epoch(e);
        e->rw[e->n_rw++] = (root_walk){L, follow, id};
        rw = &e->rw[e->n_rw - 1];
    }
    e->rw_reused++;
    /* the computation is L's walk but below the uncovered first bytes (walked from s0 by
     * the caller): its tokens here, its escapes left with L's entry (a peer: child_peered) */
    const sift__gx_entry *B = &e->ent[rw->ent];
    if (B->dense >= 0) memcpy(e->bulk_bits, dense_bits(e, B->dense), (size_t)v->n_words * sizeof *e->bulk_bits);
    else memset(e->bulk_bits, 0, (size_t)v->n_words * sizeof *e->bulk_bits);
    for (uint32_t k = 0; k < B->extra_n; k++) sift__gx_bit_set(e->bulk_bits, e->lists.v[B->extra_off + k]);
    e->bulk_used = true;
    memset(e->rw_dbytes, 0, sizeof e->rw_dbytes);
    for (uint32_t c = 1; c < v->n_nodes; c = tn[c].end) {
        if (cov[tn[c].byte]) continue;
        /* the tokens of c's subtree (c's own too) are walked from s0 instead */
        uint32_t lo, hi;
        sift__gx_trie_below(v, c, &lo, &hi);
        for (uint32_t t = tn[c].tok_begin; t < hi; t++) e->bulk_bits[v->sorted[t] >> 6] &= ~((uint64_t)1 << (v->sorted[t] & 63));
        e->rw_dbytes[tn[c].byte >> 6] |= (uint64_t)1 << (tn[c].byte & 63);
    }
    e->rw_peer = rw->ent;
    return 1;
}

/* Walk the trie below node `root` from DFA state s0 (esc0: the suffix was already used up
 * at the root; u0: unfinished UTF-8 at the root). Accepted tokens go to e->acc, escape
 * nodes to e->esc (both deduplicated by the current stamps). */
static int walk(sift__gx_engine *e, uint32_t root, uint32_t s0, bool esc0, sift__gx_utf8 u0, const uint64_t *follow)
{
    const sift__gx_vocab *v = e->voc;
    const sift_grammar *g = e->g;
    const sift__gx_trie_node *tn = v->node;
    wframe *wf = e->wf;
    uint32_t d0 = tn[root].depth;
    wf[d0] = (wframe){s0, root, u0, esc0, 0};
    uint32_t i = root + 1, stop = tn[root].end;
    /* the root itself may be a slice: a walk resumed at an escape (child()) then takes its
     * subtree without visiting even its children - thousands of roots inside a string */
    if (s0 != DEAD && u0.need == 0 && stop > i) {
        int lp = v->slice_all[root] ? take_slice(e, root, s0, esc0, follow) : 0;
        if (!lp) lp = class_take(e, root, s0, follow);
        if (lp < 0) return SIFT_E_NOMEM;
        if (lp) return SIFT_OK;
    }
    /* From the root, in a state that takes every C_k character but a few ASCII ones (the
     * first letters of declared keys, in a "key but" rule) to one loop L of C_k: every
     * first-character slice node of C_k reached in L is taken by take_slice (slice_ok is
     * true at once for a loop). Their tokens are the vocabulary's first_bits less the
     * subtrees of the excepted characters, OR-ed in here; the walk skips those nodes.
     * Exact, and ~95k bits set one by one less in each such context (MaskBench: most of
     * the masks over 200 us). Only while bulk_bits holds nothing else: the exceptions are
     * cleared from it. */
    uint32_t first = 0, first_state = DEAD;
    bool cov[256], memo = false;
    if (root == 0 && u0.need == 0 && s0 != DEAD && !esc0 && !e->bulk_used) {
        for (uint32_t k = 0; k < GX_N_SLICES && !first && !memo; k++) {
            uint8_t ex[FIRST_EX_MAX];
            uint32_t n_ex = 0;
            uint32_t L = first_loop(e, s0, k, ex, &n_ex);
            if (L == UNI_OOM) return SIFT_E_NOMEM;
            if (L == UNI_NONE) continue;
            if (L != s0 && !e->rw_building) { /* a key-exclusion class: L's walk, remembered */
                int r = root_walk_take(e, s0, L, follow, cov);
                if (r < 0) return SIFT_E_NOMEM;
                wf[d0] = (wframe){s0, root, u0, esc0, 0}; /* L's walk, if made now, used the frames */
                if (r > 0) {
                    memo = true;
                    break;
                }
            }
            const uint64_t *fb = v->first_bits + (size_t)k * v->n_words;
            for (uint32_t w = 0; w < v->n_words; w++) e->bulk_bits[w] |= fb[w];
            for (uint32_t c = 1; c < v->n_nodes; c = tn[c].end) { /* the root's children */
                bool excepted = false;
                for (uint32_t q = 0; q < n_ex && !excepted; q++) excepted = tn[c].byte == ex[q];
                if (!excepted || !(v->slice_first[c] >> k & 1)) continue;
                uint32_t lo, hi;
                sift__gx_trie_below(v, c, &lo, &hi);
                for (uint32_t q = lo; q < hi; q++) e->bulk_bits[v->sorted[q] >> 6] &= ~((uint64_t)1 << (v->sorted[q] & 63));
            }
            e->bulk_used = true;
            e->first_taken++;
            first = 1u << k;
            first_state = L;
        }
    }
    /* From the root, the first bytes s0 cannot take are skipped without reading their nodes:
     * one cache miss each, and a class as small as a literal's first character would read
     * all ~260 of them (most level-1 entries: TTFM's precompute, the ~100 key positions of a
     * large object's first mask). Exact: a byte no top class of s0 accepts steps to DEAD
     * without an escape (dfa_step), and a lead byte no live class can complete is pruned
     * the same way below. */
    uint32_t q_rc = UINT32_MAX;
    bool rlive[256];
    if (root == 0 && !esc0 && u0.need == 0 && s0 != DEAD) {
        root_children_make(e);
        const uint64_t *live = e->live + e->st[s0].live_off;
        for (uint32_t q = 0; q < e->n_rootl; q++) {
            uint8_t b = e->rootb[q];
            rlive[q] = b < 0x80 ? sift__gx_bit(live, g->ascii_sym[b]) : b >= 0xC2 && b <= 0xF4 && live_any(e, s0, e->lead_lo[b], e->lead_hi[b]);
        }
        q_rc = 0;
    }
    uint64_t visited = 0;
    while (i < stop) {
        if (q_rc < e->n_rootl && i == e->rootl[q_rc]) { /* a first byte */
            if (!rlive[q_rc++]) {
                e->root_skipped++;
                i = q_rc < e->n_rootl ? e->rootl[q_rc] : stop;
                continue;
            }
        }
        visited++;
        const sift__gx_trie_node nd = tn[i];
        const uint32_t d = nd.depth;
        const uint8_t b = nd.byte;
        if (memo && d == 1 && cov[b]) { /* taken from L's walk (root_walk_take) */
            i = nd.end;
            continue;
        }
        wframe *pf = &wf[d - 1];
        if (pf->esc && !pf->rec && follow_ok(e, follow, b)) {
            pf->rec = 1;
            if (e->node_stamp[pf->node] != e->node_epoch) {
                e->node_stamp[pf->node] = e->node_epoch;
                if (!sift__gx_u32_push(&e->esc, pf->node)) return SIFT_E_NOMEM;
            }
        }
        const uint32_t s = pf->state;
        if (s == DEAD) {
            /* a dead frame's children only matter for its escape: once it is recorded (or
             * cannot be) the other children are skipped at once - after a one-character
             * class (char's level-1 entry) that is ~10k second-level nodes less */
            i = pf->esc && !pf->rec ? nd.end : tn[pf->node].end;
            continue;
        }
        sift__gx_utf8 u = pf->u;
        uint32_t ns;
        bool nesc = false;
        if (u.need == 0 && b < 0x80) {
            int32_t t = e->asc[(size_t)s * 128 + b];
            if (t < 0 && (t = dfa_step_ascii(e, s, b)) < 0) return SIFT_E_NOMEM;
            ns = (uint32_t)t >> 1;
            nesc = t & 1;
        } else {
            const int32_t r = sift__gx_utf8_feed(&u, b);
            if (r == GX_UTF8_BAD) {
                i = nd.end;
                continue;
            }
            if (r == GX_UTF8_MORE) {
                bool possible = u.have == 1 ? live_any(e, s, e->lead_lo[b], e->lead_hi[b]) : partial_possible(e, s, &u);
                if (!possible) {
                    i = nd.end;
                    continue;
                }
                ns = s;
            } else {
                int32_t t = dfa_step(e, s, sift__gx_sym_of(g, (uint32_t)r));
                if (t < 0) return SIFT_E_NOMEM;
                ns = (uint32_t)t >> 1;
                nesc = t & 1;
            }
        }
        if (ns == DEAD && !nesc) {
            i = nd.end;
            continue;
        }
        /* tokens ending here are accepted: a live path (or one that just used the suffix up)
         * consumed all their bytes; an unfinished character was checked above */
        /* (two walks of one computation may both reach a node: make_entry drops the repeats,
         * rather than a stamp per trie node here - a vocabulary-sized array per grammar, and
         * a cache miss per node in a walk) */
        if (nd.tok_n) {
            for (uint32_t k = 0; k < nd.tok_n; k++)
                if (!sift__gx_u32_push(&e->acc, v->sorted[nd.tok_begin + k])) return SIFT_E_NOMEM;
        }
        /* a slice: every token below continues with at most slice_len C_k characters, along
         * which ns only reaches live states, so each is accepted: take the subtree's
         * tokens as they lie in `sorted`, straight into a bitset (they are many: the entry
         * will be dense). Escapes inside the subtree are not recorded, and need not be: an
         * escape only lets the levels below accept tokens of its own subtree, which are all
         * accepted here already (accepted sets are cumulative down the levels). */
        if (v->slice_all[i] && ns != DEAD && u.need == 0 && nd.end > i + 1) {
            if ((v->slice_first[i] & first) && ns == first_state) { /* in first_bits, taken above */
                e->bulk += nd.end - i - 1;
                i = nd.end;
                continue;
            }
            int lp = take_slice(e, i, ns, nesc, follow);
            if (lp < 0) return SIFT_E_NOMEM;
            if (lp) {
                i = nd.end;
                continue;
            }
        }
        if (ns != DEAD && u.need == 0 && nd.end > i + 1) { /* a grammar class (class_take) */
            int lp = class_take(e, i, ns, follow);
            if (lp < 0) return SIFT_E_NOMEM;
            if (lp) {
                i = nd.end;
                continue;
            }
        }
        wf[d] = (wframe){ns, i, u, nesc, 0};
        i++;
    }
    e->walked += visited;
    return SIFT_OK;
}

/* ---- entries ------------------------------------------------------------------------------- */

static uint32_t et_find(const sift__gx_engine *e, uint32_t parent, uint32_t pos, uint32_t aux)
{
    uint32_t mask = e->et_cap - 1;
    uint32_t k = (uint32_t)sift__gx_mix64(((uint64_t)parent << 32) ^ ((uint64_t)pos << 7) ^ aux) & mask;
    for (;; k = (k + 1) & mask) {
        const ent_slot *sl = &e->et[k];
        if (sl->id == GX_NONE) return GX_NONE;
        if (sl->parent == parent && sl->pos == pos && sl->aux == aux) return sl->id;
    }
}

static bool et_put(sift__gx_engine *e, uint32_t parent, uint32_t pos, uint32_t aux, uint32_t id)
{
    if ((uint64_t)(e->n_ent + 1) * 2 > e->et_cap) {
        uint32_t ncap = e->et_cap * 2;
        ent_slot *t = sift__gx_malloc((size_t)ncap * sizeof *t);
        if (!t) return false;
        for (uint32_t k = 0; k < ncap; k++) t[k].id = GX_NONE;
        for (uint32_t k = 0; k < e->et_cap; k++) {
            ent_slot sl = e->et[k];
            if (sl.id == GX_NONE) continue;
            uint32_t q = (uint32_t)sift__gx_mix64(((uint64_t)sl.parent << 32) ^ ((uint64_t)sl.pos << 7) ^ sl.aux) & (ncap - 1);
            while (t[q].id != GX_NONE) q = (q + 1) & (ncap - 1);
            t[q] = sl;
        }
        sift__gx_free(e->et);
        e->et = t;
        e->et_cap = ncap;
    }
    uint32_t mask = e->et_cap - 1;
    uint32_t k = (uint32_t)sift__gx_mix64(((uint64_t)parent << 32) ^ ((uint64_t)pos << 7) ^ aux) & mask;
    while (e->et[k].id != GX_NONE) k = (k + 1) & mask;
    e->et[k] = (ent_slot){parent, pos, aux, id};
    e->ent[id].key_parent = parent;
    e->ent[id].key_pos = pos;
    e->ent[id].key_aux = aux;
    return true;
}

/* Past CACHE_BYTES_LIMIT: forget the entries computed on demand (only between fills, when no
 * entry id is held). */
static void cache_maybe_trim(sift__gx_engine *e)
{
    uint64_t bytes = (uint64_t)e->n_dense * e->voc->n_words * 8 + (uint64_t)e->lists.n * 4 + (uint64_t)e->n_ent * sizeof(sift__gx_entry);
    if (bytes < e->cache_limit) return;
    e->n_ent = e->pre_ent;
    e->n_dense = e->pre_dense;
    e->lists.n = e->pre_lists;
    /* a precomputed entry may have got its loop set on demand: it is dropped with the rest */
    for (uint32_t id = 0; id < e->n_ent; id++)
        for (uint32_t k = 0; k < GX_N_SLICES; k++)
            if (e->ent[id].loop[k] >= (int32_t)e->pre_dense) e->ent[id].loop[k] = -1;
    for (uint32_t k = 0; k < e->et_cap; k++) e->et[k].id = GX_NONE;
    e->n_rw = 0; /* their entries may be gone */
    for (uint32_t id = 0; id < e->n_ent; id++) {
        const sift__gx_entry *en = &e->ent[id];
        uint32_t mask = e->et_cap - 1;
        uint32_t k = (uint32_t)sift__gx_mix64(((uint64_t)en->key_parent << 32) ^ ((uint64_t)en->key_pos << 7) ^ en->key_aux) & mask;
        while (e->et[k].id != GX_NONE) k = (k + 1) & mask;
        e->et[k] = (ent_slot){en->key_parent, en->key_pos, en->key_aux, id};
    }
    e->trims++;
}

/* The computation's escapes (e->esc) become entry ne's, in `lists`; false on out of memory. */
static bool keep_escapes(sift__gx_engine *e, sift__gx_entry *ne)
{
    if (!e->esc.n) return true;
    if (!GX_GROW(e->lists.v, e->lists.cap, e->lists.n + e->esc.n)) return false;
    ne->esc_off = e->lists.n;
    memcpy(e->lists.v + e->lists.n, e->esc.v, (size_t)e->esc.n * sizeof(uint32_t));
    e->lists.n += e->esc.n;
    ne->esc_n = e->esc.n;
    return true;
}

/* Has entry id escapes, its own or (peered) its peer's? */
static inline bool has_esc(const sift__gx_engine *e, uint32_t id)
{
    const sift__gx_entry *en = &e->ent[id];
    return en->esc_n || (en->peer != GX_NONE && e->ent[en->peer].esc_n);
}

static int32_t new_dense(sift__gx_engine *e)
{
    /* one chunk at a time: a pool grown by realloc copied megabytes inside a single mask
     * (a TBM tail of milliseconds) */
    if (e->n_dense == e->n_chunks * DENSE_CHUNK) {
        if (!GX_GROW(e->dense, e->cap_chunks, e->n_chunks + 1)) return -1;
        e->dense[e->n_chunks] = sift__gx_malloc((size_t)DENSE_CHUNK * e->voc->n_words * sizeof(uint64_t));
        if (!e->dense[e->n_chunks]) return -1;
        e->n_chunks++;
    }
    int32_t d = (int32_t)e->n_dense++;
    memset(dense_bits_w(e, d), 0, (size_t)e->voc->n_words * sizeof(uint64_t));
    return d;
}

/* Make an entry from e->acc / e->esc on top of `parent` (GX_NONE for a level-1 entry). */
static uint32_t make_entry(sift__gx_engine *e, uint32_t parent)
{
    if (!GX_GROW(e->ent, e->cap_ent, e->n_ent + 1)) return GX_NONE;
    sift__gx_entry pe = parent == GX_NONE ? (sift__gx_entry){-1, 0, 0, 0, 0, 0, 0, 0, {0}, GX_NONE, {0}, GX_NONE} : e->ent[parent];
    /* new tokens not already in the parent's dense set, each once */
    uint32_t n_new = 0;
    for (uint32_t k = 0; k < e->acc.n; k++) {
        uint32_t t = e->acc.v[k];
        if (pe.dense >= 0 && sift__gx_bit(dense_bits(e, pe.dense), t)) continue;
        if (sift__gx_bit(e->seen_bits, t)) continue;
        sift__gx_bit_set(e->seen_bits, t);
        e->acc.v[n_new++] = t;
    }
    for (uint32_t k = 0; k < n_new; k++) e->seen_bits[e->acc.v[k] >> 6] = 0;
    sift__gx_entry ne = {pe.dense, 0, 0, 0, 0, 0, 0, 0, {0}, GX_NONE, {0}, GX_NONE};
    for (uint32_t k = 0; k < GX_N_SLICES; k++) ne.loop[k] = -1;
    uint64_t extras = (uint64_t)pe.extra_n + n_new;
    /* A bulk set of a few tokens (a class_take or chain of a handful, a key-exclusion
     * literal's subtree) is listed, not kept dense: fill_mask ORs every dense set of a
     * position in full (12.8 KB each at 102k tokens), and an object's key position has
     * dozens of such entries (MaskBench: most of the union time). */
    uint32_t n_bulk = 0;
    const uint32_t W = e->voc->n_words, list_max = W / 2;
    bool bulk_listed = false;
    if (e->bulk_used && pe.dense < 0 && extras <= list_max) {
        n_bulk = (uint32_t)e->mops->count(e->bulk_bits, (size_t)W * 64, list_max);
        bulk_listed = extras + n_bulk <= list_max;
    }
    if (!bulk_listed && (extras > 2ull * W || e->bulk_used)) {
        int32_t d = new_dense(e);
        if (d < 0) return GX_NONE;
        uint64_t *bits = dense_bits_w(e, d);
        if (pe.dense >= 0) memcpy(bits, dense_bits(e, pe.dense), (size_t)W * sizeof *bits);
        if (e->bulk_used) {
            for (uint32_t w = 0; w < W; w++) bits[w] |= e->bulk_bits[w];
            memset(e->bulk_bits, 0, (size_t)W * sizeof *e->bulk_bits);
            e->bulk_used = false;
        }
        for (uint32_t k = 0; k < pe.extra_n; k++) sift__gx_bit_set(bits, e->lists.v[pe.extra_off + k]);
        for (uint32_t k = 0; k < n_new; k++) sift__gx_bit_set(bits, e->acc.v[k]);
        ne.dense = d;
    } else if (extras || n_bulk) {
        /* (a bulk token may be listed twice, once from acc: fill_mask sets its bit twice) */
        if (!GX_GROW(e->lists.v, e->lists.cap, e->lists.n + (uint32_t)extras + n_bulk)) return GX_NONE;
        ne.extra_off = e->lists.n;
        uint32_t *x = e->lists.v + e->lists.n;
        if (pe.extra_n) memcpy(x, e->lists.v + pe.extra_off, (size_t)pe.extra_n * sizeof(uint32_t));
        if (n_new) memcpy(x + pe.extra_n, e->acc.v, (size_t)n_new * sizeof(uint32_t));
        uint32_t n = (uint32_t)extras;
        for (uint32_t w = 0; w < W && n < extras + n_bulk; w++) {
            for (uint64_t b = e->bulk_bits[w]; b; b &= b - 1) x[n++] = w * 64 + (uint32_t)__builtin_ctzll(b);
            e->bulk_bits[w] = 0;
        }
        e->bulk_used = false; /* (the words past the last token were zero) */
        e->lists.n += n;
        ne.extra_n = n;
    }
    if (!keep_escapes(e, &ne)) return GX_NONE;
    e->ent[e->n_ent] = ne;
    return e->n_ent++;
}

static void begin_computation(sift__gx_engine *e)
{
    e->acc.n = e->esc.n = 0;
    e->rw_peer = GX_NONE;
    e->comp_work0 = e->walked + e->root_skipped;
    if (e->bulk_used) { /* left over by a computation that failed */
        memset(e->bulk_bits, 0, (size_t)e->voc->n_words * sizeof *e->bulk_bits);
        e->bulk_used = false;
    }
    if (++e->node_epoch == 0) {
        memset(e->node_stamp, 0, (size_t)e->voc->n_nodes * sizeof *e->node_stamp);
        e->node_epoch = 1;
    }
}

/* walk(e, 0, s0, false, none, follow) for s0 a class that no lead byte can start, visiting
 * only the root's children whose byte the class holds: 1 done, 0 not such a class, -1 out
 * of memory.
 *
 * Why. A json_schema grammar is mostly literals (keys, punctuation), one single-character
 * class per position, and its level-1 entries were most of the precompute (MaskBench, the
 * median schema: ~56 such entries of ~15 us, ~0.85 ms of its ~1.7 ms to the first mask).
 * Each walked the root's ~250 children, a cold trie node and a DFA step each, to find the
 * one or two that live. Exact: from the root a byte the class does not hold steps s0 to
 * DEAD without using the frame up (walk skips its subtree at once), and with no lead byte
 * live the root is the plain loop of walk (first_loop needs C_k's non-ASCII characters
 * live); a kept child is processed as walk's loop does it, and walk resumed there does the
 * rest (its root case is the loop's slice case). Children are visited in byte order, the
 * trie's: the same tokens and escapes, in the same order. */
static int level1_narrow(sift__gx_engine *e, uint32_t s0, const uint64_t *follow)
{
    const sift__gx_vocab *v = e->voc;
    const sift_grammar *g = e->g;
    for (uint32_t b = 0xC2; b <= 0xF4; b++)
        if (live_any(e, s0, e->lead_lo[b], e->lead_hi[b])) return 0;
    for (uint32_t b = 1; b < 0x80; b++) {
        uint32_t c = v->root_child[b];
        /* (the live sets move as states are made: read through e each time) */
        if (!c || !sift__gx_bit(e->live + e->st[s0].live_off, g->ascii_sym[b])) continue;
        e->walked++;
        int32_t t = e->asc[(size_t)s0 * 128 + b];
        if (t < 0 && (t = dfa_step_ascii(e, s0, (uint8_t)b)) < 0) return -1;
        uint32_t ns = (uint32_t)t >> 1;
        bool nesc = t & 1;
        if (ns == DEAD && !nesc) continue;
        const sift__gx_trie_node *nd = &v->node[c];
        for (uint32_t k = 0; k < nd->tok_n; k++)
            if (!sift__gx_u32_push(&e->acc, v->sorted[nd->tok_begin + k])) return -1;
        sift__gx_utf8 none = {0};
        if (walk(e, c, ns, nesc, none, follow) != SIFT_OK) return -1;
    }
    e->narrow++;
    return 1;
}

/* The level-1 entry of a stack whose top is at `pos`, with unfinished UTF-8 `u`. */
static uint32_t level1(sift__gx_engine *e, uint32_t pos, const sift__gx_utf8 *u)
{
    pos = e->rep[pos];
    uint32_t key = sift__gx_utf8_key(u);
    uint32_t id = et_find(e, GX_NONE, pos, key);
    if (id != GX_NONE) return id;
    if (dfa_maybe_reset(e) != SIFT_OK) return GX_NONE;
    const sift_grammar *g = e->g;
    uint32_t el = g->elems[pos];
    begin_computation(e);
    uint32_t node = GX_NONE;
    const uint64_t *follow = g->rule_follow + (size_t)g->rule_of[pos] * g->sym_words;
    const uint32_t head[2] = {CK_LEVEL1, key};
    if (GX_TYPE(el) == GX_CLASS) {
        uint32_t nd = sift__gx_node(&e->wa, pos, 0);
        if (nd == GX_NONE) return GX_NONE;
        /* only a large class is worth a key: a literal's walk is one first byte's subtree
         * (the root skip in walk), cheaper than describing its rule (to the whole schema) */
        uint64_t cps = 0;
        for (uint32_t k = g->class_off[GX_VAL(el)]; k < g->class_off[GX_VAL(el) + 1]; k += 2) cps += g->ranges[k + 1] - g->ranges[k] + 1;
        if (cps >= SHARE_CLASS_MIN && !e->canon_big[pos]) node = nd;
        sift__gx_shared sh;
        uint32_t sid;
        if (node != GX_NONE && !canon_key(e, head, 2, &node, 1, follow)) {
            e->canon_big[pos] = 1;
            node = GX_NONE;
        }
        if (node != GX_NONE && (sid = sift__gx_share_find(e->voc->share, e->ck.v, e->ck.n, &sh)) != UINT32_MAX) {
            id = entry_from_shared(e, &sh, sid);
            return id != GX_NONE && et_put(e, GX_NONE, pos, key, id) ? id : GX_NONE;
        }
        uint32_t s0 = dfa_intern(e, &nd, 1);
        if (s0 == GX_NONE) return GX_NONE;
        int nr = u->need == 0 ? level1_narrow(e, s0, follow) : 0;
        if (nr < 0 || (!nr && walk(e, 0, s0, false, *u, follow) != SIFT_OK)) return GX_NONE;
    } else if (u->need == 0) {
        uint32_t t = GX_VAL(el);
        if (GX_TYPE(el) == GX_TOKEN) {
            if ((int64_t)t < e->voc->n_tokens && sift__gx_bit(e->voc->normal, t) && !sift__gx_u32_push(&e->acc, t)) return GX_NONE;
        } else { /* TOKEN_NOT: every trie token but t, as a dense set */
            if (!GX_GROW(e->ent, e->cap_ent, e->n_ent + 1)) return GX_NONE;
            int32_t d = new_dense(e);
            if (d < 0) return GX_NONE;
            uint64_t *bits = dense_bits_w(e, d);
            memcpy(bits, e->voc->normal, (size_t)e->voc->n_words * sizeof *bits);
            if ((int64_t)t < e->voc->n_tokens) bits[t >> 6] &= ~((uint64_t)1 << (t & 63));
            e->ent[e->n_ent] = (sift__gx_entry){d, 0, 0, 0, 0, 0, 0, 0, {0}, GX_NONE, {0}, GX_NONE};
            for (uint32_t k = 0; k < GX_N_SLICES; k++) e->ent[e->n_ent].loop[k] = -1;
            id = e->n_ent++;
            return et_put(e, GX_NONE, pos, key, id) ? id : GX_NONE;
        }
    }
    id = make_entry(e, GX_NONE);
    if (id == GX_NONE || !et_put(e, GX_NONE, pos, key, id)) return GX_NONE;
    if (e->rw_peer != GX_NONE) { /* made from a root walk in a loop (root_walk_take) */
        e->ent[id].peer = e->rw_peer;
        memcpy(e->ent[id].dbytes, e->rw_dbytes, sizeof e->rw_dbytes);
    } else if (node != GX_NONE && canon_key(e, head, 2, &node, 1, follow)) { /* (a root walk's key may have replaced it) */
        entry_share(e, id, e->walked + e->root_skipped - e->comp_work0);
    }
    return id;
}

/* Is escape node r taken whole by a walk from any loop state of slice k? (walk's root case) */
static inline bool loop_root(const sift__gx_vocab *v, uint32_t r, uint32_t k)
{
    return (v->slice_all[r] >> k & 1) && v->node[r].end > r + 1;
}

/* The dense bitset of the tokens below parent's escapes that are loop roots of slice k,
 * made on first use; -1 on out of memory.
 *
 * The escapes of a one-character class (the JSON string's char, at level 1) are the
 * vocabulary's first characters, and most of them are first-character slice nodes
 * (slice_first, trie.h): their subtrees are disjoint and their union is first_bits[k].
 * Setting their ~95k bits one by one, through the `sorted` permutation, was ~0.5 ms in the
 * first string of every grammar (MaskBench: one mask per schema, a large part of TBM p99).
 * When cheaper, the set is made the other way round: first_bits[k], less the subtrees of
 * the first-character nodes that are not escapes, plus the loop-root escapes that are not
 * first-character nodes. Exact either way. */
static int32_t loop_set(sift__gx_engine *e, uint32_t parent, uint32_t k)
{
    if (e->ent[parent].loop[k] >= 0) return e->ent[parent].loop[k];
    int32_t d = new_dense(e);
    if (d < 0) return -1;
    uint64_t *bits = dense_bits_w(e, d);
    const sift__gx_vocab *v = e->voc;
    const uint32_t *esc = e->lists.v + e->ent[parent].esc_off, n_esc = e->ent[parent].esc_n;
    /* tokens set one by one either way: all loop-root escapes' subtrees (direct), or the
     * excepted first nodes' and the other loop roots' (complement) */
    uint64_t direct = 0, other = 0, excepted = 0, n_first_esc = 0, nodes = 0;
    for (uint32_t q = 0; q < n_esc; q++) {
        uint32_t r = esc[q];
        if (!loop_root(v, r, k)) continue;
        uint32_t lo, hi;
        sift__gx_trie_below(v, r, &lo, &hi);
        direct += hi - lo;
        nodes += v->node[r].end - r - 1;
        if (v->slice_first[r] >> k & 1) n_first_esc++;
        else other += hi - lo;
    }
    bool complement = false;
    if (n_first_esc * 4 > v->n_first_nodes && direct > other + v->n_words) {
        /* mark the escapes (an epoch of their own: the entry being made has recorded none yet) */
        if (++e->node_epoch == 0) {
            memset(e->node_stamp, 0, (size_t)v->n_nodes * sizeof *e->node_stamp);
            e->node_epoch = 1;
        }
        for (uint32_t q = 0; q < n_esc; q++) e->node_stamp[esc[q]] = e->node_epoch;
        for (uint32_t q = 0; q < v->n_first_nodes && excepted <= direct; q++) {
            uint32_t c = v->first_nodes[q], lo, hi;
            if (!(v->slice_first[c] >> k & 1) || e->node_stamp[c] == e->node_epoch) continue;
            sift__gx_trie_below(v, c, &lo, &hi);
            excepted += hi - lo;
        }
        complement = excepted + other + v->n_words < direct;
    }
    if (complement) {
        e->loop_first++;
        memcpy(bits, v->first_bits + (size_t)k * v->n_words, (size_t)v->n_words * sizeof *bits);
        for (uint32_t q = 0; q < v->n_first_nodes; q++) {
            uint32_t c = v->first_nodes[q], lo, hi;
            if (!(v->slice_first[c] >> k & 1) || e->node_stamp[c] == e->node_epoch) continue;
            sift__gx_trie_below(v, c, &lo, &hi);
            for (uint32_t t = lo; t < hi; t++) bits[v->sorted[t] >> 6] &= ~((uint64_t)1 << (v->sorted[t] & 63));
        }
    }
    for (uint32_t q = 0; q < n_esc; q++) {
        uint32_t r = esc[q];
        if (!loop_root(v, r, k) || (complement && (v->slice_first[r] >> k & 1))) continue;
        uint32_t lo, hi;
        sift__gx_trie_below(v, r, &lo, &hi);
        for (uint32_t t = lo; t < hi; t++) sift__gx_bit_set(bits, v->sorted[t]);
    }
    if (complement && ++e->node_epoch == 0) { /* the marks are not escapes of the new entry */
        memset(e->node_stamp, 0, (size_t)v->n_nodes * sizeof *e->node_stamp);
        e->node_epoch = 1;
    }
    e->bulk += nodes;
    e->ent[parent].loop[k] = d;
    return d;
}

static uint32_t child(sift__gx_engine *e, uint32_t parent, uint32_t pos);

/* child() of a peered parent X (peer P, first bytes D).
 *
 * Why. A key-exclusion class (root_walk_take) is a level-1 entry that is its loop L's walk
 * but below a few first bytes, so it held L's ~6.6k escapes (the tokens holding a quote)
 * with them; each of the entries below it resumed them all again (~150 us a level), for
 * every class - every new character of a generated key. Now such an entry keeps only its
 * own escapes, below D, and names L's walk (an entry too) as its peer.
 *
 * Exact, by locality: resuming an escape x walks x's subtree only, so what a child entry
 * holds below a first byte b (its tokens and escapes there) depends only on what its parent
 * holds below b, and on pos. X equals P outside D's subtrees, so child(X, pos) equals
 * child(P, pos) there - computed once, shared by every class peered to P - and is walked
 * below D from X's own escapes. The result is peered to child(P, pos) with the same D, level
 * after level (a peer has no peer itself: child(P, pos) takes the normal path). */
static uint32_t child_peered(sift__gx_engine *e, uint32_t parent, uint32_t pos)
{
    uint32_t pc = child(e, e->ent[parent].peer, pos);
    if (pc == GX_NONE) return GX_NONE;
    const sift_grammar *g = e->g;
    const sift__gx_vocab *v = e->voc;
    const sift__gx_trie_node *tn = v->node;
    /* child(P) used the scratch: set up this computation again */
    begin_computation(e);
    bool bottom = false;
    e->tmp.n = 0;
    if (sift__gx_closure(&e->wa, pos, 0, &e->tmp, &bottom) != SIFT_OK) return GX_NONE;
    if (e->tmp.n > 1) qsort(e->tmp.v, e->tmp.n, sizeof *e->tmp.v, cmp_u32);
    uint32_t s0 = dfa_intern(e, e->tmp.v, e->tmp.n);
    if (s0 == GX_NONE) return GX_NONE;
    const uint64_t *follow = g->rule_follow + (size_t)g->rule_of[pos] * g->sym_words;
    sift__gx_utf8 none = {0};
    for (uint32_t k = 0; k < e->ent[parent].esc_n; k++) { /* X's own escapes: all below D */
        uint32_t node = e->lists.v[e->ent[parent].esc_off + k];
        if (tn[node].end == node + 1) continue; /* a leaf: nothing below */
        if (walk(e, node, s0, bottom, none, follow) != SIFT_OK) return GX_NONE;
    }
    if (!GX_GROW(e->ent, e->cap_ent, e->n_ent + 1)) return GX_NONE;
    int32_t d = new_dense(e);
    if (d < 0) return GX_NONE;
    uint64_t *bits = dense_bits_w(e, d);
    const sift__gx_entry pe = e->ent[parent], ce = e->ent[pc];
    const uint32_t W = v->n_words;
    /* child(P)'s tokens, X's below D instead (accepted sets are cumulative), then the new */
    if (ce.dense >= 0) memcpy(bits, dense_bits(e, ce.dense), (size_t)W * sizeof *bits);
    for (uint32_t k = 0; k < ce.extra_n; k++) sift__gx_bit_set(bits, e->lists.v[ce.extra_off + k]);
    const uint32_t *rc = v->root_child;
    const uint64_t *xb = pe.dense >= 0 ? dense_bits(e, pe.dense) : NULL;
    for (uint32_t b = 0; b < 256; b++) {
        if (!(pe.dbytes[b >> 6] >> (b & 63) & 1) || !rc[b]) continue;
        uint32_t lo, hi;
        sift__gx_trie_below(v, rc[b], &lo, &hi);
        for (uint32_t q = tn[rc[b]].tok_begin; q < hi; q++) {
            uint32_t t = v->sorted[q];
            if (xb && sift__gx_bit(xb, t)) sift__gx_bit_set(bits, t);
            else bits[t >> 6] &= ~((uint64_t)1 << (t & 63));
        }
    }
    for (uint32_t k = 0; k < pe.extra_n; k++) { /* X's listed tokens: below D, or in child(P)'s already */
        uint32_t t = e->lists.v[pe.extra_off + k], len;
        const uint8_t *txt = sift__gx_vocab_text(v, t, &len);
        if (len && (pe.dbytes[txt[0] >> 6] >> (txt[0] & 63) & 1)) sift__gx_bit_set(bits, t);
    }
    if (e->bulk_used) {
        for (uint32_t w = 0; w < W; w++) bits[w] |= e->bulk_bits[w];
        memset(e->bulk_bits, 0, (size_t)W * sizeof *e->bulk_bits);
        e->bulk_used = false;
    }
    for (uint32_t k = 0; k < e->acc.n; k++) sift__gx_bit_set(bits, e->acc.v[k]);
    sift__gx_entry ne = {d, 0, 0, 0, 0, 0, 0, 0, {0}, pc, {0}, GX_NONE};
    for (uint32_t k = 0; k < GX_N_SLICES; k++) ne.loop[k] = -1;
    memcpy(ne.dbytes, pe.dbytes, sizeof ne.dbytes);
    if (!keep_escapes(e, &ne)) return GX_NONE;
    e->ent[e->n_ent] = ne;
    uint32_t id = e->n_ent++;
    e->peered++;
    if (!et_put(e, parent, pos, 0, id)) return GX_NONE;
    return id;
}

/* Is every first-character node of the vocabulary's C_0 tokens (c0_first, trie.h) an escape
 * of entry `parent`? 1 yes, 0 no, -1 out of memory; memoized per entry (the memo is dropped
 * with the entries, cache_maybe_trim). True of a JSON string's char class at level 1, whose
 * escapes are every first character its FOLLOW (more characters) lets go on. */
static int c0_parent(sift__gx_engine *e, uint32_t parent)
{
    if (e->c0_memo_trims != e->trims) {
        if (e->c0_memo) memset(e->c0_memo, 0, e->c0_memo_cap);
        e->c0_memo_trims = e->trims;
    }
    if (parent >= e->c0_memo_cap) {
        uint32_t old = e->c0_memo_cap;
        if (!GX_GROW(e->c0_memo, e->c0_memo_cap, parent + 1)) return -1;
        memset(e->c0_memo + old, 0, e->c0_memo_cap - old);
    }
    if (e->c0_memo[parent]) return e->c0_memo[parent] == 1;
    const sift__gx_vocab *v = e->voc;
    const uint32_t *esc = e->lists.v + e->ent[parent].esc_off, n_esc = e->ent[parent].esc_n;
    bool all = n_esc >= v->n_c0_first;
    if (all) { /* mark the escapes, an epoch of their own (as loop_set: none is recorded yet) */
        if (++e->node_epoch == 0) {
            memset(e->node_stamp, 0, (size_t)v->n_nodes * sizeof *e->node_stamp);
            e->node_epoch = 1;
        }
        for (uint32_t q = 0; q < n_esc; q++) e->node_stamp[esc[q]] = e->node_epoch;
        for (uint32_t q = 0; q < v->n_c0_first && all; q++) all = e->node_stamp[v->c0_first[q]] == e->node_epoch;
        if (++e->node_epoch == 0) {
            memset(e->node_stamp, 0, (size_t)v->n_nodes * sizeof *e->node_stamp);
            e->node_epoch = 1;
        }
    }
    e->c0_memo[parent] = all ? 1 : 2;
    return all;
}

/* The escapes of entry `parent` that child walks in mode m, as wl.v[*off .. *off + *n):
 * m < GX_N_SLICES a loop of slice m (the loop roots are in the loop set), m == GX_N_SLICES
 * a first-character chain (the slice_first[0] escapes are taken at once), m ==
 * GX_N_SLICES + 1 neither; leaves never (nothing below them to walk: most escapes of a
 * one-character class are, 2.2k in a JSON string's char). 0, -1 out of memory. Made once
 * per parent and mode (dropped with the entries, cache_maybe_trim): filtering the escapes
 * read three flags of ~2.2k scattered trie nodes, cache misses all, in every child entry
 * of a string (MaskBench: ~100 us of a maxLength chain position's entry). */
static int walk_list(sift__gx_engine *e, uint32_t parent, uint32_t m, uint32_t *off, uint32_t *n)
{
    if (e->wl_trims != e->trims) {
        if (e->wl_at) memset(e->wl_at, 0xFF, (size_t)e->wl_cap * sizeof *e->wl_at);
        e->wl.n = 0;
        e->wl_trims = e->trims;
    }
    if (parent >= e->wl_cap) {
        uint32_t old = e->wl_cap;
        if (!GX_GROW(e->wl_at, e->wl_cap, parent + 1)) return -1;
        memset(e->wl_at + old, 0xFF, (size_t)(e->wl_cap - old) * sizeof *e->wl_at);
    }
    if (e->wl_at[parent].off[m] == GX_NONE) {
        const sift__gx_vocab *v = e->voc;
        const uint32_t n_esc = e->ent[parent].esc_n;
        if (!GX_GROW(e->wl.v, e->wl.cap, e->wl.n + n_esc + 1)) return -1;
        const uint32_t *esc = e->lists.v + e->ent[parent].esc_off;
        uint32_t at = e->wl.n;
        for (uint32_t k = 0; k < n_esc; k++) {
            uint32_t node = esc[k];
            if (m < GX_N_SLICES && loop_root(v, node, m)) continue;
            if (m == GX_N_SLICES && (v->slice_first[node] & 1)) continue;
            if (v->node[node].end == node + 1) continue;
            e->wl.v[e->wl.n++] = node;
        }
        e->wl_at[parent].off[m] = at;
        e->wl_at[parent].n[m] = e->wl.n - at;
    }
    *off = e->wl_at[parent].off[m];
    *n = e->wl_at[parent].n[m];
    return 0;
}

/* The entry one level below `parent`, whose next frame is at position `pos`. */
static uint32_t child(sift__gx_engine *e, uint32_t parent, uint32_t pos)
{
    pos = e->rep[pos];
    uint32_t id = et_find(e, parent, pos, 0);
    if (id != GX_NONE) return id;
    if (dfa_maybe_reset(e) != SIFT_OK) return GX_NONE;
    if (e->ent[parent].peer != GX_NONE) return child_peered(e, parent, pos);
    const sift_grammar *g = e->g;
    begin_computation(e);
    /* the frame alone over the sentinel */
    bool bottom = false;
    e->tmp.n = 0;
    if (sift__gx_closure(&e->wa, pos, 0, &e->tmp, &bottom) != SIFT_OK) return GX_NONE;
    /* below a shared entry, the frame alone decides: look for it in the share */
    uint32_t head[2] = {CK_CHILD, e->ent[parent].sid}, fnode = GX_NONE;
    const uint64_t *follow = g->rule_follow + (size_t)g->rule_of[pos] * g->sym_words;
    if (head[1] != GX_NONE && !e->canon_big[pos]) {
        fnode = sift__gx_node(&e->wa, pos, 0);
        if (fnode == GX_NONE) return GX_NONE;
        sift__gx_shared sh;
        uint32_t sid;
        if (!canon_key(e, head, 2, &fnode, 1, follow)) {
            e->canon_big[pos] = 1;
            fnode = GX_NONE;
        } else if ((sid = sift__gx_share_find(e->voc->share, e->ck.v, e->ck.n, &sh)) != UINT32_MAX) {
            id = entry_from_shared(e, &sh, sid);
            return id != GX_NONE && et_put(e, parent, pos, 0, id) ? id : GX_NONE;
        }
    }
    if (e->tmp.n > 1) qsort(e->tmp.v, e->tmp.n, sizeof *e->tmp.v, cmp_u32);
    uint32_t s0 = dfa_intern(e, e->tmp.v, e->tmp.n);
    if (s0 == GX_NONE) return GX_NONE;
    sift__gx_utf8 none = {0};
    /* s0 a loop of slice k (a char* inside a string): every escape that is a slice-k node
     * with children is taken whole (walk's root case: slice_ok is true at once for a loop),
     * whatever the loop. Their union depends on the parent alone, so it is made once per
     * parent (loop_set) and OR-ed in, instead of thousands of subtrees and ~95k bits set
     * one by one in every new string context (MaskBench: most masks over 200 us). */
    uint32_t lk = GX_N_SLICES;
    for (uint32_t k = 0; k < GX_N_SLICES && lk == GX_N_SLICES && s0 != DEAD; k++) {
        uint32_t t = uni_next(e, s0, k);
        if (t == UNI_OOM) return GX_NONE;
        if (t == s0) lk = k;
    }
    if (lk < GX_N_SLICES) {
        int32_t d = loop_set(e, parent, lk);
        if (d < 0) return GX_NONE;
        const uint64_t *lb = dense_bits(e, d);
        for (uint32_t w = 0; w < e->voc->n_words; w++) e->bulk_bits[w] |= lb[w];
        e->bulk_used = true;
        e->loop_reused++;
    }
    /* s0 the head of a chain of C_0 (a string with maxLength: char{0,n}, j characters
     * left), FOLLOW disjoint from C_0 or the chain quiet and s0 not escaped (take_slice's
     * rule; `bottom` is the escape bit every escape root is walked with): below each
     * first-character escape (slice_first, one
     * character), take_slice would take the tokens of at most j + 1 characters - ~95k
     * tokens tested one by one at every chain position, i.e. after every token typed in such
     * a string (MaskBench: most masks of 500-800 us). They are the parent's loop set (its
     * loop-root escapes' subtrees, cached) with first_bits[0] of at most j + 1 characters
     * (len_bits, or less the longer tokens of long_first), OR-ed in at once. That is exact
     * for the first-character escapes, which are then not walked, and a subset of what the
     * other escapes accept (below a deeper escape a token may have j + its depth's
     * characters), which are walked as before. A chain longer than every first-character
     * token (maxLength 256: chain_len gives up past 253) takes all of them, whatever FOLLOW
     * (slice_ok, as take_slice's first rule). */
    bool chain_first = false;
    /* s0 a loop of C_0 (char*): every C_0 token whose first character is an escape of the
     * parent is accepted, not only those below loop-root escapes (the loop set). When the
     * escapes hold every such first character (c0_parent), c0_bits is OR-ed in too, and
     * the walks below the first characters that are not slice_first (some token goes on
     * with a quote or a backslash) find their C_0 subtrees taken already (take_below,
     * c0_covered) - ~50k tokens set one by one less in every new free-string context
     * (MaskBench: ~100-200 us of most child entries of a string's char*). */
    if (lk == 0) {
        int c0 = c0_parent(e, parent);
        if (c0 < 0) return GX_NONE;
        if (c0) {
            const sift__gx_vocab *v = e->voc;
            for (uint32_t w = 0; w < v->n_words; w++) e->bulk_bits[w] |= v->c0_bits[w];
            e->c0_lim = UINT32_MAX;
            e->c0_epoch = e->node_epoch;
            e->c0_taken++;
        }
    }
    if (lk == GX_N_SLICES && s0 != DEAD) {
        const uint32_t maxc = e->voc->n_long_first ? e->voc->long_first[1] : GX_FIRST_LEN_MAX;
        int all = maxc <= 255 ? slice_ok(e, s0, 0, maxc - 1) : 0;
        int j = all ? CHAIN_NONE : chain_len(e, s0, 0);
        if (all < 0 || j < 0) return GX_NONE;
        if (j != CHAIN_NONE && !follow_disjoint(e, follow, 0)) { /* or a quiet chain (take_slice) */
            int q = bottom ? 0 : chain_quiet(e, s0, 0);
            if (q < 0) return GX_NONE;
            if (!q) j = CHAIN_NONE;
            else e->quiet_taken++;
        }
        /* Wider, when the parent's escapes hold every first character of a C_0 token
         * (c0_parent): all the vocabulary's C_0 tokens of 2 to j + 1 characters (c0_len_bits,
         * trie.h), first_bits[0]'s and those below first characters that are not slice_first
         * ('a' is not: some token goes on a" or a\\). Each of them is accepted from its first
         * character's escape, as above; the walks below the other first characters then
         * find the C_0 subtrees they reach at depth j + 1 taken already (take_below,
         * c0_covered: ~50k tokens set one by one less per chain position). */
        uint32_t clim = 0;
        if (all || j != CHAIN_NONE) {
            int c0 = c0_parent(e, parent);
            if (c0 < 0) return GX_NONE;
            const sift__gx_vocab *v = e->voc;
            if (c0 && j != CHAIN_NONE) {
                clim = (uint32_t)j + 1;
            } else if (c0) {
                const uint32_t cmax = v->n_c0_long ? v->c0_long[1] : GX_FIRST_LEN_MAX;
                int ac = cmax <= 255 ? slice_ok(e, s0, 0, cmax - 1) : 0;
                if (ac < 0) return GX_NONE;
                if (ac) clim = UINT32_MAX;
            }
        }
        if (clim) {
            const sift__gx_vocab *v = e->voc;
            uint32_t W = v->n_words;
            const uint64_t *cb = clim <= GX_FIRST_LEN_MAX ? v->c0_len_bits + (size_t)clim * W : v->c0_bits;
            if (clim >= 2) { /* (one character: no C_0 token; the entry may stay a list) */
                for (uint32_t w = 0; w < W; w++) e->bulk_bits[w] |= cb[w];
                e->bulk_used = true;
            }
            for (uint32_t q = 0; clim > GX_FIRST_LEN_MAX && q < v->n_c0_long && v->c0_long[2 * q + 1] > clim; q++) {
                uint32_t t = v->c0_long[2 * q];
                e->bulk_bits[t >> 6] &= ~((uint64_t)1 << (t & 63)); /* no other set is in bulk_bits yet */
            }
            e->c0_lim = clim;
            e->c0_epoch = e->node_epoch;
            e->c0_taken++;
            e->chain_taken++;
            e->chain_first++;
            chain_first = true;
        } else if (all || j != CHAIN_NONE) {
            uint32_t lim = all ? maxc + 1 : (uint32_t)j + 1; /* all: nothing is cleared below */
            int32_t d = loop_set(e, parent, 0);
            if (d < 0) return GX_NONE;
            const sift__gx_vocab *v = e->voc;
            const uint64_t *lb = dense_bits(e, d);
            uint32_t W = v->n_words;
            const uint64_t *fb = lim <= GX_FIRST_LEN_MAX ? v->len_bits + (size_t)lim * W : v->first_bits;
            for (uint32_t w = 0; w < W; w++) e->bulk_bits[w] |= lb[w] & fb[w];
            for (uint32_t q = 0; lim > GX_FIRST_LEN_MAX && q < v->n_long_first && v->long_first[2 * q + 1] > lim; q++) {
                uint32_t t = v->long_first[2 * q];
                e->bulk_bits[t >> 6] &= ~((uint64_t)1 << (t & 63)); /* no other set is in bulk_bits yet */
            }
            e->bulk_used = true;
            e->chain_taken++;
            e->chain_first++;
            chain_first = true;
        }
    }
    /* the escapes to walk: those walk_list keeps for this mode (none of them is in the
     * loop set or taken above, none is a leaf) */
    uint32_t wl_off, wl_n;
    if (walk_list(e, parent, lk < GX_N_SLICES ? lk : chain_first ? GX_N_SLICES : GX_N_SLICES + 1, &wl_off, &wl_n) < 0) return GX_NONE;
    for (uint32_t k = 0; k < wl_n; k++)
        if (walk(e, e->wl.v[wl_off + k], s0, bottom, none, follow) != SIFT_OK) return GX_NONE;
    e->c0_epoch = 0; /* the C_0 set is this entry's only */
    id = make_entry(e, parent);
    if (id == GX_NONE || !et_put(e, parent, pos, 0, id)) return GX_NONE;
    if (fnode != GX_NONE && canon_key(e, head, 2, &fnode, 1, follow)) entry_share(e, id, e->walked + e->root_skipped - e->comp_work0);
    return id;
}

/* ---- public (internal) API ----------------------------------------------------------------- */

static void engine_destroy(sift__gx_engine *e)
{
    if (!e) return;
    sift_grammar_free(e->g);
    sift__gx_free(e->rep);
    sift__gx_vocab_release(e->voc);
    sift__gx_arena_free(&e->wa);
    sift__gx_free(e->asc);
    root_walks_free(e);
    sift__gx_free(e->rw);
    sift__gx_free(e->st);
    sift__gx_u32_free(&e->sets);
    sift__gx_free(e->live);
    sift__gx_free(e->trans);
    sift__gx_free(e->st_ht);
    sift__gx_free(e->ent);
    sift__gx_u32_free(&e->lists);
    for (uint32_t k = 0; k < e->n_chunks; k++) sift__gx_free(e->dense[k]);
    sift__gx_free(e->dense);
    sift__gx_free(e->et);
    sift__gx_free(e->wf);
    sift__gx_free(e->seen_bits);
    sift__gx_free(e->bulk_bits);
    sift__gx_free(e->node_stamp);
    sift__gx_free(e->c0_memo);
    sift__gx_free(e->wl_at);
    sift__gx_u32_free(&e->wl);
    sift__gx_u32_free(&e->acc);
    sift__gx_u32_free(&e->esc);
    sift__gx_u32_free(&e->tmp);
    sift__gx_u32_free(&e->ck);
    sift__gx_u32_free(&e->cq);
    sift__gx_u32_free(&e->cbuf);
    sift__gx_u32_free(&e->coff);
    sift__gx_free(e->crule);
    sift__gx_free(e->canon_big);
    sift__gx_free((void *)e->fill_src);
    sift__gx_u32_free(&e->fill_extra);
    for (uint32_t k = 0; k < GX_N_SLICES; k++) sift__gx_u32_free(&e->slice_syms[k]);
    pthread_mutex_destroy(&e->lock);
    sift__gx_free(e);
}

int sift__gx_engine_new(sift__gx_engine **out, sift_grammar *g, const sift_vocab_view *view, sift_error *err)
{
    *out = NULL;
    sift__gx_engine *e = sift__gx_calloc(1, sizeof *e);
    if (!e) {
        sift_grammar_free(g);
        return sift__error_set(err, SIFT_E_NOMEM, "out of memory");
    }
    atomic_init(&e->refs, 1);
    pthread_mutex_init(&e->lock, NULL);
    e->mops = sift__gx_mask_ops_best();
    e->cache_limit = CACHE_BYTES_LIMIT;
    e->g = g;
    int rc = SIFT_OK;
    if (!(e->voc = sift__gx_vocab_acquire(view, err))) {
        rc = err && err->status ? err->status : SIFT_E_NOMEM;
        goto fail;
    }
    if (g->has_tokens && (int64_t)g->max_token >= e->voc->n_tokens) {
        rc = sift__error_set(err, SIFT_E_INVAL, "grammar names token %u but the vocabulary has %d tokens", g->max_token,
                            e->voc->n_tokens);
        goto fail;
    }
    rc = sift__gx_arena_init(&e->wa, g);
    if (rc != SIFT_OK) goto nomem;
    if (sift__gx_pos_reps(g, &e->rep) != SIFT_OK) goto nomem;
    if (!(e->crule = sift__gx_calloc(g->n_rules + 1, sizeof *e->crule))) goto nomem;
    if (!(e->canon_big = sift__gx_calloc(g->n_elems + 1, 1))) goto nomem;
    e->wa.rep = e->rep;
    uint32_t depth = e->voc->max_depth + 2;
    e->wf = sift__gx_malloc(depth * sizeof *e->wf);
    e->seen_bits = sift__gx_calloc(e->voc->n_words, sizeof *e->seen_bits);
    e->bulk_bits = sift__gx_calloc(e->voc->n_words, sizeof *e->bulk_bits);
    e->node_stamp = sift__gx_calloc(e->voc->n_nodes, sizeof *e->node_stamp);
    e->et_cap = 1024;
    e->et = sift__gx_malloc((size_t)e->et_cap * sizeof *e->et);
    if (!e->wf || !e->seen_bits || !e->node_stamp || !e->et || !e->bulk_bits)
        goto nomem;
    for (uint32_t k = 0; k < e->et_cap; k++) e->et[k].id = GX_NONE;
    e->node_epoch = 1;
    for (uint32_t b = 0xC2; b <= 0xF4; b++) {
        sift__gx_utf8 u = {0};
        sift__gx_utf8_feed(&u, (uint8_t)b);
        uint32_t lo, hi;
        sift__gx_utf8_range(&u, &lo, &hi);
        sift__gx_syms_in_range(g, lo, hi, &e->lead_lo[b], &e->lead_hi[b]);
    }
    for (uint32_t k = 0; k < GX_N_SLICES; k++) {
        const sift__gx_slice *sl = &sift__gx_slices[k];
        uint32_t last = GX_NONE;
        for (uint32_t r = 0; r < sl->n_ranges; r++) {
            uint32_t s0, s1;
            sift__gx_syms_in_range(g, sl->ranges[2 * r], sl->ranges[2 * r + 1], &s0, &s1);
            for (uint32_t q = s0; q <= s1; q++)
                if (q != last && !sift__gx_u32_push(&e->slice_syms[k], last = q)) goto nomem;
        }
    }
    /* the pools are never NULL, so that empty sets are still valid pointers */
    if (!GX_GROW(e->sets.v, e->sets.cap, 64) || !GX_GROW(e->lists.v, e->lists.cap, 64) ||
        !GX_GROW(e->acc.v, e->acc.cap, 64) || !GX_GROW(e->esc.v, e->esc.cap, 64))
        goto nomem;
    if (dfa_intern(e, NULL, 0) != DEAD) goto nomem;
    *out = e;
    return SIFT_OK;
nomem:
    rc = sift__error_set(err, SIFT_E_NOMEM, "out of memory building the grammar sampler");
fail:
    engine_destroy(e);
    return rc;
}

void sift__gx_engine_retain(sift__gx_engine *e) { atomic_fetch_add(&e->refs, 1); }

void sift__gx_engine_release(sift__gx_engine *e)
{
    if (e && atomic_fetch_sub(&e->refs, 1) == 1) engine_destroy(e);
}

const sift_grammar *sift__gx_engine_grammar(const sift__gx_engine *e) { return e->g; }
const sift__gx_vocab *sift__gx_engine_vocab(const sift__gx_engine *e) { return e->voc; }

/* Frames that can sit directly below a frame of each rule ("B" sets), for precompute:
 * position p+1 after every REF r that is not at the end of its alternative; for a REF at
 * the end (a tail call), whatever can be below the calling rule. A hash set of (rule,
 * frame) pairs keeps the propagation linear in the pairs. */
typedef struct {
    uint64_t *slot; /* (rule << 32 | frame) + 1, 0 = empty */
    uint32_t cap, n;
} pair_set;

static bool pair_add(pair_set *ps, uint32_t rule, uint32_t frame, bool *added)
{
    if ((uint64_t)(ps->n + 1) * 2 > ps->cap) {
        uint32_t ncap = ps->cap ? ps->cap * 2 : 1024;
        uint64_t *t = sift__gx_calloc(ncap, sizeof *t);
        if (!t) return false;
        for (uint32_t k = 0; k < ps->cap; k++) {
            if (!ps->slot[k]) continue;
            uint32_t q = (uint32_t)sift__gx_mix64(ps->slot[k]) & (ncap - 1);
            while (t[q]) q = (q + 1) & (ncap - 1);
            t[q] = ps->slot[k];
        }
        sift__gx_free(ps->slot);
        ps->slot = t;
        ps->cap = ncap;
    }
    uint64_t key = (((uint64_t)rule << 32) | frame) + 1;
    uint32_t q = (uint32_t)sift__gx_mix64(key) & (ps->cap - 1);
    for (; ps->slot[q]; q = (q + 1) & (ps->cap - 1))
        if (ps->slot[q] == key) {
            *added = false;
            return true;
        }
    ps->slot[q] = key;
    ps->n++;
    *added = true;
    return true;
}

#define BELOW_MAX_PAIRS (1u << 20) /* enough for a warm start; beyond it everything is lazy */

static int below_sets(const sift_grammar *g, sift__gx_u32vec **out)
{
    sift__gx_u32vec *b = sift__gx_calloc(g->n_rules, sizeof *b);
    if (!b) return SIFT_E_NOMEM;
    sift__gx_u32vec tail_from = {0}, tail_to = {0}, work_r = {0}, work_f = {0};
    pair_set seen = {0};
    int rc = SIFT_OK;
    bool added;
    for (uint32_t p = 0; p < g->n_elems && rc == SIFT_OK; p++) {
        uint32_t el = g->elems[p];
        if (GX_TYPE(el) != GX_REF) continue;
        uint32_t r = GX_VAL(el);
        if (!sift__gx_is_end(g->elems[p + 1])) {
            if (!pair_add(&seen, r, p + 1, &added)) rc = SIFT_E_NOMEM;
            else if (added && (!sift__gx_u32_push(&b[r], p + 1) || !sift__gx_u32_push(&work_r, r) || !sift__gx_u32_push(&work_f, p + 1)))
                rc = SIFT_E_NOMEM;
        } else if (g->rule_of[p] != r) {
            if (!sift__gx_u32_push(&tail_from, g->rule_of[p]) || !sift__gx_u32_push(&tail_to, r)) rc = SIFT_E_NOMEM;
        }
    }
    /* tail-call edges by source rule (counting sort), then a worklist of new (rule, frame) pairs */
    uint32_t *head = rc == SIFT_OK ? sift__gx_calloc((size_t)g->n_rules + 1, sizeof *head) : NULL;
    uint32_t *adj = rc == SIFT_OK ? sift__gx_malloc(((size_t)tail_from.n + 1) * sizeof *adj) : NULL;
    if (rc == SIFT_OK && (!head || !adj)) rc = SIFT_E_NOMEM;
    if (rc == SIFT_OK) {
        /* head[r] .. head[r + 1]: the rules r tail-calls */
        for (uint32_t k = 0; k < tail_from.n; k++) head[tail_from.v[k] + 1]++;
        for (uint32_t r = 0; r < g->n_rules; r++) head[r + 1] += head[r];
        uint32_t *fill = sift__gx_malloc(((size_t)g->n_rules + 1) * sizeof *fill);
        if (!fill) {
            rc = SIFT_E_NOMEM;
        } else {
            memcpy(fill, head, ((size_t)g->n_rules + 1) * sizeof *fill);
            for (uint32_t k = 0; k < tail_from.n; k++) adj[fill[tail_from.v[k]]++] = tail_to.v[k];
            sift__gx_free(fill);
        }
    }
    for (uint32_t w = 0; rc == SIFT_OK && w < work_r.n && seen.n < BELOW_MAX_PAIRS; w++) {
        uint32_t q = work_r.v[w], f = work_f.v[w];
        for (uint32_t k = head[q]; k < head[q + 1] && rc == SIFT_OK; k++) {
            uint32_t r = adj[k];
            if (!pair_add(&seen, r, f, &added)) rc = SIFT_E_NOMEM;
            else if (added && (!sift__gx_u32_push(&b[r], f) || !sift__gx_u32_push(&work_r, r) || !sift__gx_u32_push(&work_f, f)))
                rc = SIFT_E_NOMEM;
        }
    }
    sift__gx_free(head);
    sift__gx_free(adj);
    sift__gx_free(seen.slot);
    sift__gx_u32_free(&tail_from);
    sift__gx_u32_free(&tail_to);
    sift__gx_u32_free(&work_r);
    sift__gx_u32_free(&work_f);
    if (rc != SIFT_OK) {
        for (uint32_t r = 0; r < g->n_rules; r++) sift__gx_u32_free(&b[r]);
        sift__gx_free(b);
        return rc;
    }
    *out = b;
    return SIFT_OK;
}

/* Does position p hold a class of ASCII characters only (sa..sb: the symbols of U+0080..)?
 * Its level-1 entry is then cheap whenever it is needed (level1_narrow). */
static bool ascii_class(const sift_grammar *g, uint32_t p, uint32_t sa, uint32_t sb)
{
    uint32_t el = g->elems[p];
    return GX_TYPE(el) == GX_CLASS && !sift__gx_bits_any_in(sift__gx_class_bits(g, GX_VAL(el)), sa, sb);
}

/* What the budget buys, most expensive on demand first: the level-1 entries of the
 * terminals but the ASCII classes (a JSON string's char, a key exclusion, a pattern's class:
 * a walk of thousands of trie nodes each, the mask that first needs one costs 0.2-1 ms),
 * then the entries below those classes, then the ASCII classes' level-1 entries (a literal's
 * character: tens of nodes, a few microseconds on demand). In grammar order the literals came
 * first and used most of the budget of a median json_schema grammar (MaskBench: ~56 of them),
 * leaving the expensive entries to the masks. */
int sift__gx_engine_precompute(sift__gx_engine *e, uint64_t budget)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pthread_mutex_lock(&e->lock);
    const sift_grammar *g = e->g;
    sift__gx_utf8 none = {0};
    int rc = SIFT_OK;
    uint64_t start = e->walked + e->root_skipped + e->shared_work;
    /* work = trie nodes walked + 64 per entry made, so that many cheap entries count too */
    uint32_t ent0 = e->n_ent;
    /* (first bytes skipped unread count as walked, and copied entries as the walks they saved:
     * the budget was set when they were walked) */
#define WORK() (e->walked + e->root_skipped + e->shared_work - start + 64ull * (e->n_ent - ent0))
    uint32_t sa, sb;
    sift__gx_syms_in_range(g, 0x80, 0x10FFFF, &sa, &sb);
    for (uint32_t p = 0; p < g->n_elems && rc == SIFT_OK && WORK() < budget; p++)
        if (sift__gx_is_terminal(g->elems[p]) && !ascii_class(g, p, sa, sb) && level1(e, p, &none) == GX_NONE) rc = SIFT_E_NOMEM;
    sift__gx_u32vec *below = NULL;
    if (rc == SIFT_OK && WORK() < budget) rc = below_sets(g, &below);
    for (uint32_t p = 0; below && p < g->n_elems && rc == SIFT_OK && WORK() < budget; p++) {
        if (GX_TYPE(g->elems[p]) != GX_CLASS || ascii_class(g, p, sa, sb)) continue;
        uint32_t id = level1(e, p, &none);
        if (id == GX_NONE) {
            rc = SIFT_E_NOMEM;
            break;
        }
        if (!has_esc(e, id)) continue;
        const sift__gx_u32vec *bs = &below[g->rule_of[p]];
        for (uint32_t k = 0; k < bs->n && WORK() < budget; k++)
            if (child(e, id, bs->v[k]) == GX_NONE) {
                rc = SIFT_E_NOMEM;
                break;
            }
    }
    for (uint32_t p = 0; p < g->n_elems && rc == SIFT_OK && WORK() < budget; p++)
        if (ascii_class(g, p, sa, sb) && level1(e, p, &none) == GX_NONE) rc = SIFT_E_NOMEM;
    if (below) {
        for (uint32_t r = 0; r < g->n_rules; r++) sift__gx_u32_free(&below[r]);
        sift__gx_free(below);
    }
#undef WORK
    e->pre_ent = e->n_ent;
    e->pre_dense = e->n_dense;
    e->pre_lists = e->lists.n;
    pthread_mutex_unlock(&e->lock);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    e->precompute_ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    return rc;
}

int sift__gx_token_verdict(sift__gx_arena *a, const sift__gx_state *s, const sift__gx_vocab *v, uint32_t t, sift__gx_state *t1, sift__gx_state *t2)
{
    if (v->flags[t] & GX_TOK_EOG) return sift__gx_state_can_end(s);
    if (v->flags[t] & GX_TOK_EXCLUDED) return 0;
    uint32_t len;
    const uint8_t *b = sift__gx_vocab_text(v, t, &len);
    return sift__gx_state_token_check(a, s, t, b, len, t1, t2);
}

void sift__gx_bits_union(uint64_t *restrict dst, uint32_t W, const uint64_t *const *src, uint32_t n)
{
    if (n == 0) {
        memset(dst, 0, (size_t)W * sizeof *dst);
        return;
    }
    if (n == 1) {
        memcpy(dst, src[0], (size_t)W * sizeof *dst);
        return;
    }
    /* a missing source repeats the first: OR is idempotent */
    const uint64_t *s0 = src[0], *s1 = src[1], *s2 = n > 2 ? src[2] : s0, *s3 = n > 3 ? src[3] : s0;
    for (uint32_t w = 0; w < W; w++) dst[w] = s0[w] | s1[w] | s2[w] | s3[w];
    for (uint32_t k = 4; k < n; k += 3) {
        s0 = src[k];
        s1 = k + 1 < n ? src[k + 1] : s0;
        s2 = k + 2 < n ? src[k + 2] : s0;
        for (uint32_t w = 0; w < W; w++) dst[w] |= s0[w] | s1[w] | s2[w];
    }
}

int sift__gx_engine_fill_mask(sift__gx_engine *e, sift__gx_arena *ra, const sift__gx_state *s, uint64_t *mask)
{
    pthread_mutex_lock(&e->lock);
    cache_maybe_trim(e);
    int rc = SIFT_OK;
    /* first every stack's entry (their distinct dense sets, and those with extra tokens),
     * then the mask written once from them */
    e->n_fill_src = e->fill_extra.n = 0;
    for (uint32_t k = 0; k < s->tops.n; k++) {
        uint32_t n = s->tops.v[k];
        uint32_t id = level1(e, ra->pos[n], &s->utf8);
        for (uint32_t f = ra->parent[n]; id != GX_NONE && has_esc(e, id) && f; f = ra->parent[f])
            id = child(e, id, ra->pos[f]);
        if (id == GX_NONE) {
            rc = SIFT_E_NOMEM;
            break;
        }
        const sift__gx_entry *en = &e->ent[id];
        if (en->dense >= 0) {
            const uint64_t *d = dense_bits(e, en->dense);
            bool seen = false;
            for (uint32_t q = 0; q < e->n_fill_src && !seen; q++) seen = e->fill_src[q] == d;
            if (!seen) {
                if (!GX_GROW(e->fill_src, e->cap_fill_src, e->n_fill_src + 1)) {
                    rc = SIFT_E_NOMEM;
                    break;
                }
                e->fill_src[e->n_fill_src++] = d;
            }
        }
        if (en->extra_n && !sift__gx_u32_push(&e->fill_extra, id)) {
            rc = SIFT_E_NOMEM;
            break;
        }
    }
    sift__gx_bits_union(mask, e->voc->n_words, e->fill_src, e->n_fill_src);
    for (uint32_t q = 0; q < e->fill_extra.n; q++) {
        const sift__gx_entry *en = &e->ent[e->fill_extra.v[q]];
        const uint32_t *x = e->lists.v + en->extra_off;
        for (uint32_t j = 0; j < en->extra_n; j++) sift__gx_bit_set(mask, x[j]);
    }
    pthread_mutex_unlock(&e->lock);
    if (sift__gx_state_can_end(s))
        for (uint32_t k = 0; k < e->voc->n_eog; k++) sift__gx_bit_set(mask, e->voc->eog[k]);
    return rc;
}

void sift__gx_engine_set_cache_limit(sift__gx_engine *e, uint64_t bytes)
{
    pthread_mutex_lock(&e->lock);
    e->cache_limit = bytes;
    pthread_mutex_unlock(&e->lock);
}

void sift__gx_engine_get_stats(sift__gx_engine *e, sift__gx_engine_stats *st)
{
    pthread_mutex_lock(&e->lock);
    st->entries = e->n_ent;
    st->dense_sets = e->n_dense;
    st->dfa_states = e->n_st;
    st->walk_arena_nodes = e->wa.n;
    st->trie_nodes = e->voc->n_nodes;
    st->trie_nodes_walked = e->walked;
    st->bytes = (uint64_t)e->n_dense * e->voc->n_words * 8 + (uint64_t)e->lists.cap * 4 + (uint64_t)e->cap_ent * sizeof(sift__gx_entry) +
                (uint64_t)e->sets.cap * 4 + (uint64_t)e->trans_cap * 4 + (uint64_t)e->live_cap * 8 +
                (uint64_t)e->voc->n_nodes * sizeof(sift__gx_trie_node) + (uint64_t)e->wa.cap * 20 + (uint64_t)e->asc_cap * 4;
    st->precompute_ms = e->precompute_ms;
    st->trims = e->trims;
    st->slice_nodes = e->bulk;
    st->loop_sets_reused = e->loop_reused;
    st->loop_sets_first = e->loop_first;
    st->first_slices = e->first_taken;
    st->root_walks_reused = e->rw_reused;
    st->chain_takes = e->chain_taken;
    st->class_takes = e->class_taken;
    st->chain_firsts = e->chain_first;
    st->peered = e->peered;
    st->shared_hits = e->shared_hits;
    st->shared_puts = e->shared_puts;
    st->quiet_chains = e->quiet_taken;
    st->c0_sets = e->c0_taken;
    st->narrow_walks = e->narrow;
    pthread_mutex_unlock(&e->lock);
}
