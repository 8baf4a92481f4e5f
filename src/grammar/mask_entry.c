/*
 * mask_entry.c - the cache entries: the table keyed (parent entry, frame position, aux), their
 * storage (dense bitsets in stable chunks, extra-token and escape lists), and the three ways
 * an entry is made: level1 (a walk from the trie root at a terminal position), child (the
 * parent's escapes resumed at the frame below) and child_peered (a peered parent's child
 * made from its peer's). mask.c has the design; this file is where each entry kind argues
 * why its shortcut is exact (loop_set, c0_parent, walk_list, the chain rules in child).
 *
 * Why here and not in the walk: an entry decides *what* to walk and what to copy (the share,
 * a peer, a cached loop set), the walk (mask_walk.c) only *how*. Memory is bounded here too:
 * past the cache limit the on-demand entries are dropped (cache_maybe_trim) back to the
 * watermarks precompute left.
 */
#include "grammar/mask_internal.h"

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

bool sift__gx_et_put(sift__gx_engine *e, uint32_t parent, uint32_t pos, uint32_t aux, uint32_t id)
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
void sift__gx_cache_maybe_trim(sift__gx_engine *e)
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

int32_t sift__gx_new_dense(sift__gx_engine *e)
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
uint32_t sift__gx_make_entry(sift__gx_engine *e, uint32_t parent)
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
        int32_t d = sift__gx_new_dense(e);
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
        if (t < 0 && (t = sift__gx_dfa_step_ascii(e, s0, (uint8_t)b)) < 0) return -1;
        uint32_t ns = (uint32_t)t >> 1;
        bool nesc = t & 1;
        if (ns == DEAD && !nesc) continue;
        const sift__gx_trie_node *nd = &v->node[c];
        for (uint32_t k = 0; k < nd->tok_n; k++)
            if (!sift__gx_u32_push(&e->acc, v->sorted[nd->tok_begin + k])) return -1;
        sift__gx_utf8 none = {0};
        if (sift__gx_walk(e, c, ns, nesc, none, follow) != SIFT_OK) return -1;
    }
    e->narrow++;
    return 1;
}

/* The level-1 entry of a stack whose top is at `pos`, with unfinished UTF-8 `u`. */
uint32_t sift__gx_level1(sift__gx_engine *e, uint32_t pos, const sift__gx_utf8 *u)
{
    pos = e->rep[pos];
    uint32_t key = sift__gx_utf8_key(u);
    uint32_t id = et_find(e, GX_NONE, pos, key);
    if (id != GX_NONE) return id;
    if (sift__gx_dfa_maybe_reset(e) != SIFT_OK) return GX_NONE;
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
        if (node != GX_NONE && !sift__gx_canon_key(e, head, 2, &node, 1, follow)) {
            e->canon_big[pos] = 1;
            node = GX_NONE;
        }
        if (node != GX_NONE && (sid = sift__gx_share_find(e->voc->share, e->ck.v, e->ck.n, &sh)) != UINT32_MAX) {
            id = sift__gx_entry_from_shared(e, &sh, sid);
            return id != GX_NONE && sift__gx_et_put(e, GX_NONE, pos, key, id) ? id : GX_NONE;
        }
        uint32_t s0 = sift__gx_dfa_intern(e, &nd, 1);
        if (s0 == GX_NONE) return GX_NONE;
        int nr = u->need == 0 ? level1_narrow(e, s0, follow) : 0;
        if (nr < 0 || (!nr && sift__gx_walk(e, 0, s0, false, *u, follow) != SIFT_OK)) return GX_NONE;
    } else if (u->need == 0) {
        uint32_t t = GX_VAL(el);
        if (GX_TYPE(el) == GX_TOKEN) {
            if ((int64_t)t < e->voc->n_tokens && sift__gx_bit(e->voc->normal, t) && !sift__gx_u32_push(&e->acc, t)) return GX_NONE;
        } else { /* TOKEN_NOT: every trie token but t, as a dense set */
            if (!GX_GROW(e->ent, e->cap_ent, e->n_ent + 1)) return GX_NONE;
            int32_t d = sift__gx_new_dense(e);
            if (d < 0) return GX_NONE;
            uint64_t *bits = dense_bits_w(e, d);
            memcpy(bits, e->voc->normal, (size_t)e->voc->n_words * sizeof *bits);
            if ((int64_t)t < e->voc->n_tokens) bits[t >> 6] &= ~((uint64_t)1 << (t & 63));
            e->ent[e->n_ent] = (sift__gx_entry){d, 0, 0, 0, 0, 0, 0, 0, {0}, GX_NONE, {0}, GX_NONE};
            for (uint32_t k = 0; k < GX_N_SLICES; k++) e->ent[e->n_ent].loop[k] = -1;
            id = e->n_ent++;
            return sift__gx_et_put(e, GX_NONE, pos, key, id) ? id : GX_NONE;
        }
    }
    id = sift__gx_make_entry(e, GX_NONE);
    if (id == GX_NONE || !sift__gx_et_put(e, GX_NONE, pos, key, id)) return GX_NONE;
    if (e->rw_peer != GX_NONE) { /* made from a root walk in a loop (root_walk_take) */
        e->ent[id].peer = e->rw_peer;
        memcpy(e->ent[id].dbytes, e->rw_dbytes, sizeof e->rw_dbytes);
    } else if (node != GX_NONE && sift__gx_canon_key(e, head, 2, &node, 1, follow)) { /* (a root walk's key may have replaced it) */
        sift__gx_entry_share(e, id, e->walked + e->root_skipped - e->comp_work0);
    }
    return id;
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
    int32_t d = sift__gx_new_dense(e);
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
    uint32_t pc = sift__gx_child(e, e->ent[parent].peer, pos);
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
    uint32_t s0 = sift__gx_dfa_intern(e, e->tmp.v, e->tmp.n);
    if (s0 == GX_NONE) return GX_NONE;
    const uint64_t *follow = g->rule_follow + (size_t)g->rule_of[pos] * g->sym_words;
    sift__gx_utf8 none = {0};
    for (uint32_t k = 0; k < e->ent[parent].esc_n; k++) { /* X's own escapes: all below D */
        uint32_t node = e->lists.v[e->ent[parent].esc_off + k];
        if (tn[node].end == node + 1) continue; /* a leaf: nothing below */
        if (sift__gx_walk(e, node, s0, bottom, none, follow) != SIFT_OK) return GX_NONE;
    }
    if (!GX_GROW(e->ent, e->cap_ent, e->n_ent + 1)) return GX_NONE;
    int32_t d = sift__gx_new_dense(e);
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
    if (!sift__gx_et_put(e, parent, pos, 0, id)) return GX_NONE;
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
uint32_t sift__gx_child(sift__gx_engine *e, uint32_t parent, uint32_t pos)
{
    pos = e->rep[pos];
    uint32_t id = et_find(e, parent, pos, 0);
    if (id != GX_NONE) return id;
    if (sift__gx_dfa_maybe_reset(e) != SIFT_OK) return GX_NONE;
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
        if (!sift__gx_canon_key(e, head, 2, &fnode, 1, follow)) {
            e->canon_big[pos] = 1;
            fnode = GX_NONE;
        } else if ((sid = sift__gx_share_find(e->voc->share, e->ck.v, e->ck.n, &sh)) != UINT32_MAX) {
            id = sift__gx_entry_from_shared(e, &sh, sid);
            return id != GX_NONE && sift__gx_et_put(e, parent, pos, 0, id) ? id : GX_NONE;
        }
    }
    if (e->tmp.n > 1) qsort(e->tmp.v, e->tmp.n, sizeof *e->tmp.v, cmp_u32);
    uint32_t s0 = sift__gx_dfa_intern(e, e->tmp.v, e->tmp.n);
    if (s0 == GX_NONE) return GX_NONE;
    sift__gx_utf8 none = {0};
    /* s0 a loop of slice k (a char* inside a string): every escape that is a slice-k node
     * with children is taken whole (walk's root case: slice_ok is true at once for a loop),
     * whatever the loop. Their union depends on the parent alone, so it is made once per
     * parent (loop_set) and OR-ed in, instead of thousands of subtrees and ~95k bits set
     * one by one in every new string context (MaskBench: most masks over 200 us). */
    uint32_t lk = GX_N_SLICES;
    for (uint32_t k = 0; k < GX_N_SLICES && lk == GX_N_SLICES && s0 != DEAD; k++) {
        uint32_t t = sift__gx_uni_next(e, s0, k);
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
        int all = maxc <= 255 ? sift__gx_slice_ok(e, s0, 0, maxc - 1) : 0;
        int j = all ? CHAIN_NONE : sift__gx_chain_len(e, s0, 0);
        if (all < 0 || j < 0) return GX_NONE;
        if (j != CHAIN_NONE && !sift__gx_follow_disjoint(e, follow, 0)) { /* or a quiet chain (take_slice) */
            int q = bottom ? 0 : sift__gx_chain_quiet(e, s0, 0);
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
                int ac = cmax <= 255 ? sift__gx_slice_ok(e, s0, 0, cmax - 1) : 0;
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
        if (sift__gx_walk(e, e->wl.v[wl_off + k], s0, bottom, none, follow) != SIFT_OK) return GX_NONE;
    e->c0_epoch = 0; /* the C_0 set is this entry's only */
    id = sift__gx_make_entry(e, parent);
    if (id == GX_NONE || !sift__gx_et_put(e, parent, pos, 0, id)) return GX_NONE;
    if (fnode != GX_NONE && sift__gx_canon_key(e, head, 2, &fnode, 1, follow)) sift__gx_entry_share(e, id, e->walked + e->root_skipped - e->comp_work0);
    return id;
}
