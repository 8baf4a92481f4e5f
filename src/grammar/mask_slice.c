/*
 * mask_slice.c - the subtrees a walk takes whole instead of visiting (mask.c: "Slices",
 * "Class slices").
 *
 * Why a file of their own: each rule here is a separate exactness argument (a subtree whose
 * characters all keep the DFA in one loop state, a chain taken up to its length, a grammar's
 * own ASCII class, the vocabulary's first-character slices) and each is entered once per
 * subtree, not per trie node, so calling them across files costs nothing measurable. The
 * walk (mask_walk.c) asks take_slice / class_take at every slice-flagged node and
 * first_loop at a root walk; the entries (mask_entry.c) ask follow_disjoint for their
 * chain rules.
 */
#include "grammar/mask_internal.h"

/* ---- walks --------------------------------------------------------------------------------- */

/* Has FOLLOW set `follow` no symbol of slice k? (1-entry memo per engine: a walk keeps its set) */
bool sift__gx_follow_disjoint(sift__gx_engine *e, const uint64_t *follow, uint32_t k)
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
int sift__gx_take_slice(sift__gx_engine *e, uint32_t i, uint32_t ns, bool esc, const uint64_t *follow)
{
    const sift__gx_vocab *v = e->voc;
    int lp = 0;
    uint32_t lim = UINT32_MAX;
    for (uint32_t k = 0; k < GX_N_SLICES && !lp; k++)
        if (v->slice_all[i] >> k & 1) lp = sift__gx_slice_ok(e, ns, k, v->slice_len[i]);
    if (lp < 0) return lp;
    for (uint32_t k = 0; k < GX_N_SLICES && !lp; k++) {
        if (!(v->slice_all[i] >> k & 1)) continue;
        int j = sift__gx_chain_len(e, ns, k);
        if (j < 0) return -1;
        if (j == CHAIN_NONE) continue;
        if (!sift__gx_follow_disjoint(e, follow, k)) {
            int q = esc ? 0 : sift__gx_chain_quiet(e, ns, k);
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
        int32_t t = sift__gx_dfa_step(e, s, ss->v[q]);
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
int sift__gx_class_take(sift__gx_engine *e, uint32_t i, uint32_t ns, const uint64_t *follow)
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
uint32_t sift__gx_first_loop(sift__gx_engine *e, uint32_t s0, uint32_t k, uint8_t *ex, uint32_t *n_ex)
{
    const sift_grammar *g = e->g;
    uint32_t a, b, L = UNI_NONE;
    sift__gx_syms_in_range(g, 0x80, 0x10FFFF, &a, &b);
    const sift__gx_u32vec *ss = &e->slice_syms[k];
    for (uint32_t q = 0; q < ss->n; q++) {
        if (ss->v[q] < a || ss->v[q] > b) continue; /* ASCII only: below */
        int32_t t = sift__gx_dfa_step(e, s0, ss->v[q]);
        if (t < 0) return UNI_OOM;
        uint32_t ns = (uint32_t)t >> 1;
        if (ns == DEAD || (L != UNI_NONE && ns != L)) return UNI_NONE;
        L = ns;
    }
    if (L == UNI_NONE) return UNI_NONE;
    uint32_t t2 = sift__gx_uni_next(e, L, k);
    if (t2 == UNI_OOM) return UNI_OOM;
    if (t2 != L) return UNI_NONE;
    *n_ex = 0;
    for (uint32_t c = 0; c < 0x80; c++) {
        if (!slice_has(k, c)) continue;
        int32_t t = e->asc[(size_t)s0 * 128 + c];
        if (t < 0 && (t = sift__gx_dfa_step_ascii(e, s0, (uint8_t)c)) < 0) return UNI_OOM;
        if ((uint32_t)t >> 1 == L) continue;
        if (*n_ex == FIRST_EX_MAX) return UNI_NONE;
        ex[(*n_ex)++] = (uint8_t)c;
    }
    return L;
}
