/*
 * trie.h - the vocabulary as a byte trie laid out in preorder, for grammar masks.
 *
 * Token texts (llama.cpp's token_to_piece with special = true) are copied from a
 * sift_vocab_view, sorted, and turned into a trie whose nodes are stored in depth-first
 * preorder: node i's subtree is [i, end[i]), its first child (if any) is i + 1 and the next
 * sibling of a child c is end[c]. A walk over the trie is then a forward scan of flat
 * arrays that skips a dead subtree with one jump, and tokens sharing a prefix share the
 * work of matching it (XGrammar's sorted-vocabulary trick, llguidance's token trie).
 *
 * Excluded from the trie: end-of-generation tokens (the grammar allows them exactly when it
 * can end, separately), tokens with an empty text (never allowed, as in llama.cpp) and
 * tokens containing a NUL byte (never allowed: llama.cpp's C-string matching would cut
 * them short).
 *
 * Slices (llguidance's idea, made exact here): a few fixed character sets C_k that grammars
 * spend most of their mask time in - above all the body of a JSON string, where nearly every
 * token of the vocabulary is allowed. For each trie node, bit k of slice_all says that every
 * token below the node continues its text with complete UTF-8 characters of C_k only. A walk
 * (mask.c) at such a node, in a parser state that goes back to itself on every character of
 * C_k, accepts the whole subtree at once - a contiguous range of `sorted` - instead of
 * stepping through it node by node. slice_len bounds how many characters those tokens
 * have below the node, so that a state that is not a loop but a chain (a string with a
 * maxLength: char{0,50}) qualifies too, when the chain is long enough. Nothing in a slice
 * depends on a grammar, so it is built once with the trie. For a grammar's own classes the
 * trie keeps the bytes below each node instead (below_bytes): one set serves every class.
 */
#ifndef SIFT_GRAMMAR_TRIE_H
#define SIFT_GRAMMAR_TRIE_H

#include "grammar/alloc_bits_utf8.h"
#include "sift.h"

#define GX_TOK_EOG 0x1u
#define GX_TOK_EXCLUDED 0x2u /* empty text or a NUL byte: never allowed */

/* One trie node, packed so that a walk reads one sequential stream. */
typedef struct {
    uint32_t end;       /* subtree end (exclusive) */
    uint32_t tok_begin; /* tokens ending here: sorted[tok_begin .. tok_begin + tok_n) */
    uint16_t depth;
    uint16_t tok_n;
    uint8_t byte;       /* the byte leading into the node */
} sift__gx_trie_node;

typedef struct sift__gx_vocab {
    int32_t n_tokens;
    uint32_t n_words;      /* 64-bit words of a token bitset */
    char *bytes;           /* all token texts, concatenated */
    uint32_t *off;         /* [n_tokens + 1] */
    uint8_t *flags;        /* GX_TOK_* */
    uint64_t *normal;      /* bitset: tokens in the trie (not EOG, not excluded) */
    uint32_t *eog;         /* EOG token ids */
    uint32_t n_eog;

    /* the trie; node 0 is the root (empty prefix) */
    uint32_t n_nodes;
    sift__gx_trie_node *node;
    uint32_t *sorted;      /* trie tokens sorted by text */
    uint32_t n_sorted;
    uint32_t max_depth;
    uint8_t *slice_all;    /* [n_nodes]: bit k = every token below continues with C_k characters only */
    uint8_t *slice_len;    /* [n_nodes]: the most characters a token has below the node (255: 255 or more) */
    uint16_t *sorted_chars; /* [n_sorted]: the UTF-8 characters (bytes but continuation bytes) of sorted[q]'s text, at most 65535 */
    /* First-character slices: bit k of slice_first says the node's text is one complete
     * character of C_k, and it is a slice-k node with tokens below. A walk from the root in a
     * state that every C_k character takes to one loop of C_k takes all those subtrees (see
     * walk in mask.c): their tokens are first_bits[k], OR-ed in at once. */
    uint8_t *slice_first;  /* [n_nodes] */
    uint64_t *first_bits;  /* [GX_N_SLICES * n_words] */
    uint32_t *first_nodes; /* the nodes with a slice_first bit, in preorder (their subtrees are disjoint) */
    uint32_t n_first_nodes;
    /* Class slices (mask.c, class_take): the bytes of the token texts strictly below each
     * node, as a 128-bit ASCII set whose bit 0 (NUL, never in the trie) stands for "some
     * byte >= 0x80", and the most bytes a token has below the node (255: 255 or more). With
     * them a walk in a state that loops (or runs a chain) on a grammar's own class - a
     * regex [a-zA-Z0-9_]+ or [0-9a-f]{8} - takes a subtree whole when its bytes are a subset,
     * without a pass over the trie per class. */
    uint64_t (*below_bytes)[2]; /* [n_nodes] */
    /* first_bits[0] by length (mask.c, walk's first-character chain): len_bits[L] holds its
     * tokens of at most L characters (L <= GX_FIRST_LEN_MAX); long_first its longer ones,
     * with their character counts, longest first. */
    uint64_t *len_bits;         /* [(GX_FIRST_LEN_MAX + 1) * n_words] */
    uint32_t *long_first;       /* token, chars, token, chars, ... */
    uint32_t n_long_first;
    uint8_t *below_len;         /* [n_nodes] */
    /* The tokens of C_0 characters only (the last one may be unfinished, as for slice_all),
     * of at least two characters, whatever their first character's node (mask.c, child's
     * first-character chain): c0_len_bits[L] those of at most L characters (L <=
     * GX_FIRST_LEN_MAX), c0_bits all of them, c0_long the longer ones with their character
     * counts, longest first, c0_first the nodes of their first characters (preorder, each
     * once), and c0_node the nodes whose text is one or more C_0 characters. first_bits[0]
     * is the part of them below a slice_first node; the rest lie below first characters
     * that some other token continues with a quote or a backslash. */
    uint64_t *c0_len_bits;      /* [(GX_FIRST_LEN_MAX + 1) * n_words] */
    uint64_t *c0_bits;          /* [n_words] */
    uint32_t *c0_long;          /* token, chars, token, chars, ... */
    uint32_t n_c0_long;
    uint32_t *c0_first;
    uint32_t n_c0_first;
    uint8_t *c0_node;           /* [n_nodes]: 1 = the node's text is one or more complete C_0 characters */
    /* Mask entries that do not depend on the grammar, shared by every engine of this
     * vocabulary (share.h; mutable behind its own lock, unlike the rest). */
    struct sift__gx_share *share;
    /* The root's child for each first byte, 0 where no token starts with it: a level-1 walk
     * for a class of a few characters (a literal's, most of a json_schema grammar's) visits
     * only those children instead of the root's ~250 (mask.c, level1_narrow). */
    uint32_t root_child[256];
} sift__gx_vocab;

/* The slices: sorted, disjoint code point ranges [lo, hi] per slice. */
#define GX_N_SLICES 3 /* C_0 JSON string characters, C_1 the same less U+2028..2029, C_2 [A-Za-z0-9-] (trie.c) */
typedef struct {
    const uint32_t *ranges; /* lo, hi, lo, hi, ... */
    uint32_t n_ranges;
} sift__gx_slice;
extern const sift__gx_slice sift__gx_slices[GX_N_SLICES];

/* Tokens strictly below trie node i: sorted[*lo .. *hi). */
static inline void sift__gx_trie_below(const sift__gx_vocab *v, uint32_t i, uint32_t *lo, uint32_t *hi)
{
    *lo = v->node[i].tok_begin + v->node[i].tok_n;
    *hi = v->node[i].end < v->n_nodes ? v->node[v->node[i].end].tok_begin : v->n_sorted;
}

#define GX_MAX_TOKEN_TEXT 65535u
#define GX_FIRST_LEN_MAX 24u /* a longer token text counts as empty (never allowed) */

/* Build from a view (copies everything it needs). SIFT_OK, SIFT_E_INVAL, SIFT_E_NOMEM. */
int sift__gx_vocab_build(sift__gx_vocab *v, const sift_vocab_view *view, sift_error *err);
void sift__gx_vocab_free(sift__gx_vocab *v);

/* The length token t's text has in a sift__gx_vocab built from `view`. */
static inline uint32_t sift__gx_vocab_view_len(const sift_vocab_view *view, int32_t t)
{
    uint32_t len = view->piece_len[t];
    return len > GX_MAX_TOKEN_TEXT || (len && !view->piece[t]) ? 0 : len;
}

static inline const uint8_t *sift__gx_vocab_text(const sift__gx_vocab *v, uint32_t t, uint32_t *len)
{
    *len = v->off[t + 1] - v->off[t];
    return (const uint8_t *)v->bytes + v->off[t];
}

#endif
