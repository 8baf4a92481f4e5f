/*
 * mask_internal.h - what the mask engine's files share (mask.c, mask_walk.c, mask_slice.c,
 * mask_canon.c, mask_entry.c, mask_precompute.c): the engine struct, the entry and DFA state
 * records, their small inline accessors, and the functions one file calls in another.
 *
 * Why one struct seen by six files: the engine is one object with one lock; its concerns
 * (walks, slices, canonical keys, entries, precompute) were split into files for reading,
 * not into objects, so that nothing on the hot path gains an indirection. Nothing outside
 * these files includes this header: the engine's interface is mask.h.
 */
#ifndef SIFT_GRAMMAR_MASK_INTERNAL_H
#define SIFT_GRAMMAR_MASK_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

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
    sift_grammar_compiler *comp; /* held: it owns the vocabulary (compiler.c) */
    const sift__gx_vocab *voc; /* the compiler's, shared by every engine of it */
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

#define FIRST_EX_MAX 32u /* excepted ASCII characters of first_loop (mask_slice.c) */
/* canonical keys: see mask_canon.c */
#define CANON_FRAME 256u
#define CANON_STATES 1024u
#define SHARE_CLASS_MIN 128u /* code points of a class whose level-1 entry is shared */
enum { CK_LEVEL1 = 0xC0DE0001u, CK_CHILD, CK_ROOTWALK };
enum { CT_REF = 0xC7000001u, CT_CLASS, CT_TOKEN, CT_TOKEN_NOT, CT_END, CT_RULE, CT_FRAME, CT_FOLLOW, CT_STACK };

/* ---- across the files ---------------------------------------------------------------------- */

/* mask_walk.c: the DFA and the walk */
uint32_t sift__gx_dfa_intern(sift__gx_engine *e, const uint32_t *v, uint32_t n);
int32_t sift__gx_dfa_step(sift__gx_engine *e, uint32_t s, uint32_t sym);
int32_t sift__gx_dfa_step_ascii(sift__gx_engine *e, uint32_t s, uint8_t b);
uint32_t sift__gx_uni_next(sift__gx_engine *e, uint32_t s, uint32_t k);
int sift__gx_slice_ok(sift__gx_engine *e, uint32_t s, uint32_t k, uint32_t len);
int sift__gx_chain_len(sift__gx_engine *e, uint32_t s, uint32_t k);
int sift__gx_chain_quiet(sift__gx_engine *e, uint32_t s, uint32_t k);
void sift__gx_root_walks_free(sift__gx_engine *e);
int sift__gx_dfa_maybe_reset(sift__gx_engine *e);
int sift__gx_walk(sift__gx_engine *e, uint32_t root, uint32_t s0, bool esc0, sift__gx_utf8 u0, const uint64_t *follow);

/* mask_slice.c: subtrees taken whole */
bool sift__gx_follow_disjoint(sift__gx_engine *e, const uint64_t *follow, uint32_t k);
int sift__gx_take_slice(sift__gx_engine *e, uint32_t i, uint32_t ns, bool esc, const uint64_t *follow);
int sift__gx_class_take(sift__gx_engine *e, uint32_t i, uint32_t ns, const uint64_t *follow);
uint32_t sift__gx_first_loop(sift__gx_engine *e, uint32_t s0, uint32_t k, uint8_t *ex, uint32_t *n_ex);

/* mask_canon.c: canonical keys and the share */
bool sift__gx_canon_key(sift__gx_engine *e, const uint32_t *head, uint32_t n_head, const uint32_t *nodes, uint32_t n_nodes,
                      const uint64_t *follow);
uint32_t sift__gx_entry_from_shared(sift__gx_engine *e, const sift__gx_shared *sh, uint32_t sid);
void sift__gx_entry_share(sift__gx_engine *e, uint32_t id, uint64_t work);

/* mask_entry.c: the entries */
bool sift__gx_et_put(sift__gx_engine *e, uint32_t parent, uint32_t pos, uint32_t aux, uint32_t id);
void sift__gx_cache_maybe_trim(sift__gx_engine *e);
int32_t sift__gx_new_dense(sift__gx_engine *e);
uint32_t sift__gx_make_entry(sift__gx_engine *e, uint32_t parent);
uint32_t sift__gx_level1(sift__gx_engine *e, uint32_t pos, const sift__gx_utf8 *u);
uint32_t sift__gx_child(sift__gx_engine *e, uint32_t parent, uint32_t pos);

/* ---- small helpers, inline in every file ---------------------------------------------------- */

static inline int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static inline uint64_t *dense_bits_w(const sift__gx_engine *e, int32_t d)
{
    return e->dense[(uint32_t)d / DENSE_CHUNK] + (size_t)((uint32_t)d % DENSE_CHUNK) * e->voc->n_words;
}

static inline const uint64_t *dense_bits(const sift__gx_engine *e, int32_t d)
{
    return e->dense[(uint32_t)d / DENSE_CHUNK] + (size_t)((uint32_t)d % DENSE_CHUNK) * e->voc->n_words;
}

static inline bool live_any(const sift__gx_engine *e, uint32_t s, uint32_t s0, uint32_t s1)
{
    return sift__gx_bits_any_in(e->live + e->st[s].live_off, s0, s1);
}

static inline bool follow_ok(const sift__gx_engine *e, const uint64_t *follow, uint8_t b)
{
    if (b < 0x80) return sift__gx_bit(follow, e->g->ascii_sym[b]);
    if (b >= 0xC2 && b <= 0xF4) return sift__gx_bits_any_in(follow, e->lead_lo[b], e->lead_hi[b]);
    return false;
}

/* The ASCII transition of state s on byte b (memoized in the byte row); -1 out of memory. */
static inline int32_t step_ascii(sift__gx_engine *e, uint32_t s, uint32_t b)
{
    int32_t t = e->asc[(size_t)s * 128 + b];
    return t >= 0 ? t : sift__gx_dfa_step_ascii(e, s, (uint8_t)b);
}

/* Has entry id escapes, its own or (peered) its peer's? */
static inline bool has_esc(const sift__gx_engine *e, uint32_t id)
{
    const sift__gx_entry *en = &e->ent[id];
    return en->esc_n || (en->peer != GX_NONE && e->ent[en->peer].esc_n);
}

/* Is escape node r taken whole by a walk from any loop state of slice k? (walk's root case) */
static inline bool loop_root(const sift__gx_vocab *v, uint32_t r, uint32_t k)
{
    return (v->slice_all[r] >> k & 1) && v->node[r].end > r + 1;
}

#endif
