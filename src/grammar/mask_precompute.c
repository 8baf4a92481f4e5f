/*
 * mask_precompute.c - what the engine computes before the first mask, within a budget.
 *
 * Why: a json_schema request should reach its first mask in about a millisecond, and the
 * first masks over a fresh grammar are the dear ones (a level-1 walk of thousands of trie
 * nodes per string-like terminal). The budget (trie nodes walked, 64 per entry; an entry
 * copied from the share still counts the walk it saved) buys the entries dearest on demand
 * first: the level-1 entries of the terminals but the ASCII classes, then those classes
 * with every frame that can sit directly below them (the "B" sets, below_sets), then the
 * ASCII classes. Whatever the budget leaves is computed on first use.
 */
#include <time.h>

#include "grammar/mask_internal.h"

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
        if (sift__gx_is_terminal(g->elems[p]) && !ascii_class(g, p, sa, sb) && sift__gx_level1(e, p, &none) == GX_NONE) rc = SIFT_E_NOMEM;
    sift__gx_u32vec *below = NULL;
    if (rc == SIFT_OK && WORK() < budget) rc = below_sets(g, &below);
    for (uint32_t p = 0; below && p < g->n_elems && rc == SIFT_OK && WORK() < budget; p++) {
        if (GX_TYPE(g->elems[p]) != GX_CLASS || ascii_class(g, p, sa, sb)) continue;
        uint32_t id = sift__gx_level1(e, p, &none);
        if (id == GX_NONE) {
            rc = SIFT_E_NOMEM;
            break;
        }
        if (!has_esc(e, id)) continue;
        const sift__gx_u32vec *bs = &below[g->rule_of[p]];
        for (uint32_t k = 0; k < bs->n && WORK() < budget; k++)
            if (sift__gx_child(e, id, bs->v[k]) == GX_NONE) {
                rc = SIFT_E_NOMEM;
                break;
            }
    }
    for (uint32_t p = 0; p < g->n_elems && rc == SIFT_OK && WORK() < budget; p++)
        if (ascii_class(g, p, sa, sb) && sift__gx_level1(e, p, &none) == GX_NONE) rc = SIFT_E_NOMEM;
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
