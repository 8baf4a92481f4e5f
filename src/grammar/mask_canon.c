/*
 * mask_canon.c - canonical keys, and entries copied from or given to the vocabulary's share
 * (share.h).
 *
 * Why: an entry that depends only on the grammar text it walked (a JSON string's char class,
 * its char* loop, a key-exclusion loop's root walk and the levels below) is the same in every
 * grammar of one vocabulary; the key describes that text in terms no grammar owns, so two
 * grammars that never saw each other find the same record. Making a key is the price of a
 * lookup, so keys are bounded (CANON_FRAME, CANON_STATES in mask_internal.h) and a frame
 * found too large is remembered (canon_big). The callers are level1 and child
 * (mask_entry.c) and root_walk_take (mask_walk.c).
 */
#include "grammar/mask_internal.h"

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
bool sift__gx_canon_key(sift__gx_engine *e, const uint32_t *head, uint32_t n_head, const uint32_t *nodes, uint32_t n_nodes,
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
uint32_t sift__gx_entry_from_shared(sift__gx_engine *e, const sift__gx_shared *sh, uint32_t sid)
{
    if (!GX_GROW(e->ent, e->cap_ent, e->n_ent + 1)) return GX_NONE;
    sift__gx_entry ne = {-1, 0, 0, 0, 0, 0, 0, 0, {0}, GX_NONE, {0}, sid};
    for (uint32_t k = 0; k < GX_N_SLICES; k++) ne.loop[k] = -1;
    if (sh->dense) {
        int32_t d = sift__gx_new_dense(e);
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
void sift__gx_entry_share(sift__gx_engine *e, uint32_t id, uint64_t work)
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
