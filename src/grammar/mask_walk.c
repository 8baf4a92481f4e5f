/*
 * mask_walk.c - the mask engine's walks: the lazily built DFA over suffix-stack sets, and the
 * trie walk that computes one cache entry (mask.c has the whole design).
 *
 * Why one file for both: a walk steps one DFA transition per trie node (sift__gx_dfa_step_ascii,
 * its byte row), the hottest loop of the engine; keeping the steps and the loop in one
 * translation unit lets the compiler inline them as it did when they were all in mask.c.
 * The slices a walk takes whole are in mask_slice.c, the entries it fills in mask_entry.c.
 *
 * A DFA state is a set of suffix stacks over the sentinel (walk-arena nodes), interned by
 * content; its transitions (per grammar symbol, and per ASCII byte in a byte row) are
 * memoized, and per slice it learns lazily the one state every slice character leads to
 * (uni_next) and how long a chain of them runs (chain_len, chain_quiet). The root walks
 * remembered per loop state (root_walk_take) live with the DFA: they are keyed by its states.
 */
#include "grammar/mask_internal.h"

/* ---- the DFA over suffix-stack sets -------------------------------------------------------- */

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
uint32_t sift__gx_dfa_intern(sift__gx_engine *e, const uint32_t *v, uint32_t n)
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
int32_t sift__gx_dfa_step(sift__gx_engine *e, uint32_t s, uint32_t sym)
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
    uint32_t id = sift__gx_dfa_intern(e, e->tmp.v, e->tmp.n);
    if (id == GX_NONE) return -1;
    int32_t t = (int32_t)((id << 1) | (uint32_t)bottom);
    e->trans[e->st[s].trans_off + sym] = t;
    return t;
}

/* The transition on ASCII byte b, remembered in the state's byte row. */
int32_t sift__gx_dfa_step_ascii(sift__gx_engine *e, uint32_t s, uint8_t b)
{
    int32_t t = sift__gx_dfa_step(e, s, e->g->ascii_sym[b]);
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
        int32_t t = sift__gx_dfa_step(e, s, sym);
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
uint32_t sift__gx_uni_next(sift__gx_engine *e, uint32_t s, uint32_t k)
{
    if (e->st[s].uni[k] != UNI_UNKNOWN) return e->st[s].uni[k];
    if (s != DEAD && slice_row(e, s, k) < 0) return UNI_OOM;
    uint32_t to = s == DEAD ? UNI_NONE : UNI_UNKNOWN;
    const sift__gx_u32vec *ss = &e->slice_syms[k];
    for (uint32_t q = 0; q < ss->n && to != UNI_NONE; q++) {
        int32_t t = sift__gx_dfa_step(e, s, ss->v[q]);
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
int sift__gx_slice_ok(sift__gx_engine *e, uint32_t s, uint32_t k, uint32_t len)
{
    for (uint32_t j = 0; j < len || len == 255; j++) {
        uint32_t t = sift__gx_uni_next(e, s, k);
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
int sift__gx_chain_len(sift__gx_engine *e, uint32_t s, uint32_t k)
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
        uint32_t u = sift__gx_uni_next(e, t, k);
        if (u == UNI_OOM) return -1;
        if (u == t) break; /* a loop: slice_ok takes it */
        if (u == UNI_NONE) { /* the end of the chain: every C_k character dies here, or every one ends it */
            const sift__gx_u32vec *ss = &e->slice_syms[k];
            bool die = ss->n > 0, end = ss->n > 0;
            for (uint32_t q = 0; q < ss->n && (die || end); q++) {
                int32_t x = sift__gx_dfa_step(e, t, ss->v[q]);
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
int sift__gx_chain_quiet(sift__gx_engine *e, uint32_t s, uint32_t k)
{
    uint32_t path[256], n = 0, t = s;
    int r = 0;
    int j = sift__gx_chain_len(e, s, k);
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
            int32_t y = sift__gx_dfa_step(e, t, ss->v[x]);
            if (y < 0) return -1;
            q = !(y & 1);
        }
        if (!q) break; /* r = 0: an escape at t */
        uint32_t u = sift__gx_uni_next(e, t, k);
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

static bool partial_possible(const sift__gx_engine *e, uint32_t s, const sift__gx_utf8 *u)
{
    uint32_t lo, hi, s0, s1;
    sift__gx_utf8_range(u, &lo, &hi);
    sift__gx_syms_in_range(e->g, lo, hi, &s0, &s1);
    return live_any(e, s, s0, s1);
}

void sift__gx_root_walks_free(sift__gx_engine *e) { e->n_rw = 0; }

/* Drop the DFA and the walk arena (between entry computations) when they grow too big. */
int sift__gx_dfa_maybe_reset(sift__gx_engine *e)
{
    uint64_t bytes = (uint64_t)e->sets.cap * 4 + (uint64_t)e->trans_cap * 4 + (uint64_t)e->live_cap * 8 +
                     (uint64_t)e->wa.cap * 20 + (uint64_t)e->wa.pool.cap * 4 + (uint64_t)e->asc_cap * 4;
    if (bytes < DFA_BYTES_LIMIT) return SIFT_OK;
    sift__gx_arena_clear(&e->wa);
    sift__gx_root_walks_free(e); /* keyed by DFA states */
    e->n_st = 0;
    e->sets.n = e->live_n = e->trans_n = 0;
    memset(e->st_ht, 0xFF, (size_t)e->st_ht_cap * sizeof *e->st_ht);
    return sift__gx_dfa_intern(e, NULL, 0) == DEAD ? SIFT_OK : SIFT_E_NOMEM;
}

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
        int32_t t0 = sift__gx_dfa_step(e, s0, q), t1 = sift__gx_dfa_step(e, L, q);
        if (t0 < 0 || t1 < 0) return -1;
        if (t0 != t1) return 0;
    }
    uint64_t uncovered = 0;
    for (uint32_t c = 1; c < v->n_nodes; c = tn[c].end) {
        uint8_t by = tn[c].byte;
        bool same = true;
        if (by < 0x80) {
            int32_t t0 = e->asc[(size_t)s0 * 128 + by], t1 = e->asc[(size_t)L * 128 + by];
            if (t0 < 0 && (t0 = sift__gx_dfa_step_ascii(e, s0, by)) < 0) return -1;
            if (t1 < 0 && (t1 = sift__gx_dfa_step_ascii(e, L, by)) < 0) return -1;
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
        bool keyed = sift__gx_canon_key(e, &head, 1, e->sets.v + e->st[L].set_off, e->st[L].set_n, follow);
        sift__gx_shared sh;
        uint32_t sid = keyed ? sift__gx_share_find(e->voc->share, e->ck.v, e->ck.n, &sh) : UINT32_MAX, id;
        if (sid != UINT32_MAX) {
            id = sift__gx_entry_from_shared(e, &sh, sid);
        } else {
            sift__gx_utf8 none = {0};
            uint64_t w0 = e->walked + e->root_skipped;
            e->rw_building = true;
            int rc = sift__gx_walk(e, 0, L, false, none, follow);
            e->rw_building = false;
            if (rc != SIFT_OK) return -1;
            id = sift__gx_make_entry(e, GX_NONE);
            if (id != GX_NONE && keyed) sift__gx_entry_share(e, id, e->walked + e->root_skipped - w0);
        }
        if (id == GX_NONE || !sift__gx_et_put(e, GX_NONE, PEER_KEY_POS, id, id)) return -1;
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
int sift__gx_walk(sift__gx_engine *e, uint32_t root, uint32_t s0, bool esc0, sift__gx_utf8 u0, const uint64_t *follow)
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
        int lp = v->slice_all[root] ? sift__gx_take_slice(e, root, s0, esc0, follow) : 0;
        if (!lp) lp = sift__gx_class_take(e, root, s0, follow);
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
            uint32_t L = sift__gx_first_loop(e, s0, k, ex, &n_ex);
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
            if (t < 0 && (t = sift__gx_dfa_step_ascii(e, s, b)) < 0) return SIFT_E_NOMEM;
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
                int32_t t = sift__gx_dfa_step(e, s, sift__gx_sym_of(g, (uint32_t)r));
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
            int lp = sift__gx_take_slice(e, i, ns, nesc, follow);
            if (lp < 0) return SIFT_E_NOMEM;
            if (lp) {
                i = nd.end;
                continue;
            }
        }
        if (ns != DEAD && u.need == 0 && nd.end > i + 1) { /* a grammar class (class_take) */
            int lp = sift__gx_class_take(e, i, ns, follow);
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
