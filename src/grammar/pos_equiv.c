/*
 * pos_equiv.c - grammar positions that a mask computation cannot tell apart.
 *
 * Why. The mask cache (mask.c) keys its entries by grammar position: the level-1 entry of a
 * stack top at p, the entry one frame below an entry for a frame at p. A JSON-schema grammar
 * repeats the same shapes under many names: every string property has its own "\"" char* "\""
 * rule, every key-exclusion rule its own char* helper. Each new name made the engine walk the
 * trie again for what it had already computed under another name - the ~3k-node walks that
 * were most of the masks over 200 us on MaskBench (a new string context: resume the escapes
 * of char's level-1 entry in this string's char* helper, then in this string's closing
 * quote). Mapping each position to one representative of its class before the cache lookup
 * makes those computations once per grammar.
 *
 * What may be merged. A stack frame at position p only ever moves forward through the rest
 * of its alternative (elements p .. the alternative's end) and then pops: the other
 * alternatives of its rule are never seen again. A walk from the frame over the unknown
 * "sentinel" below depends on those elements (a REF through the whole referenced rule) and
 * on FOLLOW(rule of p), which mask.c uses to drop escapes early. So p ~ q when
 *   - their alternatives' rests are element by element equal, terminals exactly, a REF
 *     equal when the referenced rules are equivalent, and
 *   - the FOLLOW sets of their rules are equal.
 * Rule equivalence is the coarsest one under which equivalent rules have equal bodies
 * (alternatives in order, REFs by class): a bisimulation, found by partition refinement
 * from "all rules alike", re-classing each rule by (its class, its body under the current
 * classes) until no class splits. Recursive helpers (x ::= char x | "") then fall into one
 * class whatever their names. Each round is linear in the grammar: a body is a chain of
 * (element code, rest id) pairs interned in a hash table, so equal rests get equal ids
 * without comparing sequences. If the refinement has not settled after MAX_ROUNDS, or within
 * MAX_WORK element visits, the mapping is the identity (always exact).
 */
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "grammar/pos_equiv.h"

#define MAX_ROUNDS 256u
/* Rounds cost a pass over the whole grammar each, and a long chain of nested rules settles
 * one level per round: on big schema grammars (100k+ elements, dozens of rounds) that was
 * 100+ ms of compile time, more than the masks it saves. Past this many element visits in
 * all the mapping stays the identity, which is always exact. */
#define MAX_WORK (1u << 21)

typedef struct {
    uint64_t *key; /* (a << 32 | b) + 1, 0 = empty */
    uint32_t *id;
    uint32_t cap, n;
} pair_tab;

static bool tab_init(pair_tab *t, uint32_t want)
{
    uint32_t cap = 1024;
    while (cap < want * 2u) cap *= 2;
    t->key = sift__gx_calloc(cap, sizeof *t->key);
    t->id = sift__gx_malloc((size_t)cap * sizeof *t->id);
    t->cap = cap;
    t->n = 0;
    return t->key && t->id;
}

static void tab_clear(pair_tab *t)
{
    memset(t->key, 0, (size_t)t->cap * sizeof *t->key);
    t->n = 0;
}

static void tab_free(pair_tab *t)
{
    sift__gx_free(t->key);
    sift__gx_free(t->id);
}

/* The id of pair (a, b): 0, 1, 2, ... in order of first appearance. The table is sized
 * for every pair one pass can intern (at most one per element), so it never fills. */
static uint32_t tab_intern(pair_tab *t, uint32_t a, uint32_t b)
{
    uint64_t k = (((uint64_t)a << 32) | b) + 1;
    uint32_t q = (uint32_t)sift__gx_mix64(k) & (t->cap - 1);
    for (; t->key[q]; q = (q + 1) & (t->cap - 1))
        if (t->key[q] == k) return t->id[q];
    t->key[q] = k;
    t->id[q] = t->n;
    return t->n++;
}

#define REST_END GX_NONE /* the id "after the last element" of a chain */

/* The code of element `el` under rule classes `cls`: terminals as they are, a REF by class. */
static inline uint32_t elem_code(uint32_t el, const uint32_t *cls)
{
    return GX_TYPE(el) == GX_REF ? GX_MAKE(GX_REF, cls[GX_VAL(el)]) : el;
}

/* Per rule, an id of its FOLLOW set: equal sets, equal ids. */
static int follow_ids(const sift_grammar *g, uint32_t *fid)
{
    uint32_t W = g->sym_words, cap = 64;
    while (cap < g->n_rules * 2u) cap *= 2;
    uint32_t *slot = sift__gx_malloc((size_t)cap * sizeof *slot); /* a rule with that set, GX_NONE empty */
    if (!slot) return SIFT_E_NOMEM;
    memset(slot, 0xFF, (size_t)cap * sizeof *slot);
    uint32_t n = 0;
    for (uint32_t r = 0; r < g->n_rules; r++) {
        const uint64_t *f = g->rule_follow + (size_t)r * W;
        uint64_t h = 5;
        for (uint32_t w = 0; w < W; w++) h = sift__gx_mix64(h ^ f[w]);
        uint32_t q = (uint32_t)h & (cap - 1);
        for (;; q = (q + 1) & (cap - 1)) {
            if (slot[q] == GX_NONE) {
                slot[q] = r;
                fid[r] = n++;
                break;
            }
            if (!memcmp(g->rule_follow + (size_t)slot[q] * W, f, (size_t)W * sizeof *f)) {
                fid[r] = fid[slot[q]];
                break;
            }
        }
    }
    sift__gx_free(slot);
    return SIFT_OK;
}

/* One refinement round: ncls[r] := id of (cls[r], body of r under cls). Returns the number
 * of classes. */
static uint32_t refine(const sift_grammar *g, const uint32_t *cls, uint32_t *ncls, pair_tab *t, pair_tab *t2)
{
    tab_clear(t);
    tab_clear(t2);
    for (uint32_t r = 0; r < g->n_rules; r++) {
        uint32_t end = g->rule_start[r];
        while (GX_TYPE(g->elems[end]) != GX_END) end++;
        uint32_t rest = REST_END;
        for (uint32_t p = end; p-- > g->rule_start[r];) rest = tab_intern(t, elem_code(g->elems[p], cls), rest);
        ncls[r] = tab_intern(t2, cls[r], rest);
    }
    return t2->n;
}

int sift__gx_pos_reps(const sift_grammar *g, uint32_t **out)
{
    *out = NULL;
    uint32_t *rep = sift__gx_malloc(((size_t)g->n_elems + 1) * sizeof *rep);
    uint32_t *cls = sift__gx_calloc((size_t)g->n_rules + 1, sizeof *cls);
    uint32_t *ncls = sift__gx_malloc(((size_t)g->n_rules + 1) * sizeof *ncls);
    uint32_t *fid = sift__gx_malloc(((size_t)g->n_rules + 1) * sizeof *fid);
    pair_tab t = {0}, t2 = {0};
    int rc = SIFT_E_NOMEM;
    if (!rep || !cls || !ncls || !fid || !tab_init(&t, g->n_elems + 1) || !tab_init(&t2, g->n_rules + 1)) goto done;
    for (uint32_t p = 0; p < g->n_elems; p++) rep[p] = p;
    rc = follow_ids(g, fid);
    if (rc != SIFT_OK) goto done;
    uint32_t n_cls = 1;
    bool settled = false;
    uint64_t work = 0;
    for (uint32_t round = 0; round < MAX_ROUNDS && !settled; round++) {
        work += (uint64_t)g->n_elems + g->n_rules;
        if (work > MAX_WORK) break;
        uint32_t n = refine(g, cls, ncls, &t, &t2);
        settled = n == n_cls;
        n_cls = n;
        memcpy(cls, ncls, (size_t)g->n_rules * sizeof *cls);
    }
    if (settled) {
        /* rest ids of every position, the end of an alternative coded by its FOLLOW id; the
         * first position with a given id represents it */
        tab_clear(&t);
        uint32_t *first = sift__gx_malloc(((size_t)g->n_elems + 1) * sizeof *first);
        if (!first) {
            rc = SIFT_E_NOMEM;
            goto done;
        }
        memset(first, 0xFF, ((size_t)g->n_elems + 1) * sizeof *first);
        uint32_t *sid = sift__gx_malloc(((size_t)g->n_elems + 1) * sizeof *sid);
        if (!sid) {
            sift__gx_free(first);
            rc = SIFT_E_NOMEM;
            goto done;
        }
        memset(sid, 0xFF, ((size_t)g->n_elems + 1) * sizeof *sid);
        for (uint32_t r = 0; r < g->n_rules; r++) {
            uint32_t end = g->rule_start[r];
            while (GX_TYPE(g->elems[end]) != GX_END) end++;
            uint32_t rest = REST_END;
            for (uint32_t p = end + 1; p-- > g->rule_start[r];) {
                uint32_t el = g->elems[p];
                rest = sift__gx_is_end(el) ? tab_intern(&t, GX_MAKE(GX_END, fid[r]), REST_END) : tab_intern(&t, elem_code(el, cls), rest);
                sid[p] = rest;
            }
        }
        /* in position order, so that a representative is the first of its class */
        for (uint32_t p = 0; p < g->n_elems; p++) {
            if (sid[p] == GX_NONE) continue; /* not inside a rule: stays itself */
            if (first[sid[p]] == GX_NONE) first[sid[p]] = p;
            rep[p] = first[sid[p]];
        }
        sift__gx_free(sid);
        sift__gx_free(first);
    }
    *out = rep;
    rep = NULL;
    rc = SIFT_OK;
done:
    sift__gx_free(rep);
    sift__gx_free(cls);
    sift__gx_free(ncls);
    sift__gx_free(fid);
    tab_free(&t);
    tab_free(&t2);
    return rc;
}
