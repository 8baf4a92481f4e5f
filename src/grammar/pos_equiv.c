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
 * class whatever their names. A body is a chain of (element code, rest id) pairs interned
 * in a hash table, so equal rests get equal ids without comparing sequences; the rounds
 * re-examine only the rules whose callees changed class (refine_classes). If the refinement
 * has not settled within MAX_WORK element visits, the mapping is the identity (always exact).
 */
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "grammar/pos_equiv.h"

/* A long chain of nested rules settles one level per round. Full rounds (a pass over the
 * whole grammar each) made that 100+ ms of compile time on big schema grammars, so they
 * stopped at this many element visits - and most grammars with a maxLength string got the
 * identity (MaskBench, every 10th schema: 15 of 491, those with the most slow masks). The
 * worklist rounds cost what changes; the bound stays, for pathological grammars. */
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

static bool tab_grow(pair_tab *t)
{
    pair_tab n = {0};
    if (!tab_init(&n, t->cap)) {
        tab_free(&n);
        return false;
    }
    for (uint32_t q = 0; q < t->cap; q++) {
        if (!t->key[q]) continue;
        uint32_t r = (uint32_t)sift__gx_mix64(t->key[q]) & (n.cap - 1);
        while (n.key[r]) r = (r + 1) & (n.cap - 1);
        n.key[r] = t->key[q];
        n.id[r] = t->id[q];
    }
    n.n = t->n;
    tab_free(t);
    *t = n;
    return true;
}

/* The id of pair (a, b): 0, 1, 2, ... in order of first appearance; GX_NONE when out of
 * memory (the table grows: the refinement keeps its pairs across rounds). */
static uint32_t tab_intern(pair_tab *t, uint32_t a, uint32_t b)
{
    if ((uint64_t)(t->n + 1) * 2 > t->cap && !tab_grow(t)) return GX_NONE;
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

/* *id := the rest id of rule r's body (alternatives in order, REFs by class) under `cls`:
 * equal bodies, equal ids (REST_END for an empty body). False when out of memory. */
static bool body_id(const sift_grammar *g, uint32_t r, const uint32_t *cls, pair_tab *t, uint64_t *work, uint32_t *id)
{
    uint32_t end = g->rule_start[r];
    while (GX_TYPE(g->elems[end]) != GX_END) end++;
    *work += end - g->rule_start[r] + 1;
    uint32_t rest = REST_END;
    for (uint32_t p = end; p-- > g->rule_start[r];)
        if ((rest = tab_intern(t, elem_code(g->elems[p], cls), rest)) == GX_NONE) return false;
    *id = rest;
    return true;
}

/* The coarsest rule equivalence (see the top): Moore's partition refinement, run on a
 * worklist. A class keeps its id while its members' bodies stay equal to the body it was
 * formed with (csig); a round re-examines only the rules that refer to a rule whose class
 * changed in the round before, and moves those whose body differs now into new classes
 * (one per old class and new body). The same fixpoint as refining every rule every round,
 * in work proportional to what changes: a string with maxLength 1,000 is a chain of 1,000
 * nested helpers that splits one level per round (~1,000 rounds), which the full rounds
 * could not afford and gave up on - leaving every string of such grammars unshared.
 * SIFT_OK with *settled, or SIFT_E_NOMEM. */
static int refine_classes(const sift_grammar *g, uint32_t *cls, bool *settled)
{
    *settled = false;
    const uint32_t R = g->n_rules;
    uint32_t *head = sift__gx_calloc((size_t)R + 2, sizeof *head); /* callers of each rule (CSR) */
    sift__gx_u32vec csig = {0}; /* per class id: the body of its members (see the rounds) */
    sift__gx_u32vec cnt = {0}, dcnt = {0}; /* per class id: members, members in this round */
    uint32_t *stamp = sift__gx_calloc((size_t)R + 1, sizeof *stamp);
    uint32_t *body = sift__gx_malloc(((size_t)R + 1) * sizeof *body);
    sift__gx_u32vec dirty = {0}, next = {0}, moved = {0};
    uint32_t *adj = NULL, n_edges = 0;
    pair_tab t = {0}, split = {0};
    int rc = SIFT_E_NOMEM;
    if (!head || !stamp || !body || !tab_init(&t, g->n_elems + 1) || !tab_init(&split, 64)) goto done;
    for (uint32_t p = 0; p < g->n_elems; p++)
        if (GX_TYPE(g->elems[p]) == GX_REF && GX_VAL(g->elems[p]) < R) head[GX_VAL(g->elems[p]) + 2]++, n_edges++;
    for (uint32_t r = 0; r < R; r++) head[r + 2] += head[r + 1];
    adj = sift__gx_malloc(((size_t)n_edges + 1) * sizeof *adj);
    if (!adj) goto done;
    for (uint32_t r = 0; r < R; r++) {
        for (uint32_t p = g->rule_start[r]; GX_TYPE(g->elems[p]) != GX_END; p++)
            if (GX_TYPE(g->elems[p]) == GX_REF && GX_VAL(g->elems[p]) < R) adj[head[GX_VAL(g->elems[p]) + 1]++] = r;
    }
    /* now callers of x are adj[head[x] .. head[x + 1]) */
    uint32_t epoch = 0;
    /* every rule starts in class 0 */
    if (!sift__gx_u32_push(&csig, GX_NONE - 1) || !sift__gx_u32_push(&cnt, R) || !sift__gx_u32_push(&dcnt, 0)) goto done;
    for (uint32_t r = 0; r < R; r++) {
        cls[r] = 0;
        if (!sift__gx_u32_push(&dirty, r)) goto done;
    }
    uint64_t work = 0;
    while (dirty.n) {
        if (work > MAX_WORK) {
            rc = SIFT_OK; /* not settled: the caller keeps the identity */
            goto done;
        }
        /* bodies under the classes as they were at the start of the round */
        for (uint32_t k = 0; k < dirty.n; k++)
            if (!body_id(g, dirty.v[k], cls, &t, &work, &body[dirty.v[k]])) goto done;
        /* the body a class keeps: its untouched members' (csig, unchanged since: none of their
         * callees moved), or when every member is in the round, the first one's */
        for (uint32_t k = 0; k < dirty.n; k++) dcnt.v[cls[dirty.v[k]]]++;
        for (uint32_t k = 0; k < dirty.n; k++) {
            uint32_t r = dirty.v[k], c = cls[r];
            if (dcnt.v[c] == cnt.v[c]) {
                csig.v[c] = body[r];
                dcnt.v[c] = 0; /* set once: the next member sees 0 != cnt */
            }
        }
        for (uint32_t k = 0; k < dirty.n; k++) dcnt.v[cls[dirty.v[k]]] = 0;
        /* then the moves: a rule whose body is not its class's joins the class of (old class,
         * body), made this round */
        split.n = 0;
        memset(split.key, 0, (size_t)split.cap * sizeof *split.key);
        moved.n = 0;
        uint32_t base = csig.n;
        for (uint32_t k = 0; k < dirty.n; k++) {
            uint32_t r = dirty.v[k];
            if (body[r] == csig.v[cls[r]]) continue;
            uint32_t nc = tab_intern(&split, cls[r], body[r]);
            if (nc == GX_NONE) goto done;
            nc += base;
            if (nc == csig.n && (!sift__gx_u32_push(&csig, body[r]) || !sift__gx_u32_push(&cnt, 0) || !sift__gx_u32_push(&dcnt, 0)))
                goto done;
            cnt.v[cls[r]]--;
            cnt.v[nc]++;
            cls[r] = nc;
            if (!sift__gx_u32_push(&moved, r)) goto done;
        }
        next.n = 0;
        epoch++;
        for (uint32_t k = 0; k < moved.n; k++) {
            uint32_t x = moved.v[k];
            for (uint32_t q = head[x]; q < head[x + 1]; q++) {
                uint32_t c = adj[q];
                if (stamp[c] == epoch) continue;
                stamp[c] = epoch;
                if (!sift__gx_u32_push(&next, c)) goto done;
            }
            work += head[x + 1] - head[x];
        }
        sift__gx_u32vec tmp = dirty;
        dirty = next;
        next = tmp;
    }
    *settled = true;
    rc = SIFT_OK;
done:
    sift__gx_free(head);
    sift__gx_u32_free(&csig);
    sift__gx_u32_free(&cnt);
    sift__gx_u32_free(&dcnt);
    sift__gx_free(stamp);
    sift__gx_free(body);
    sift__gx_free(adj);
    sift__gx_u32_free(&dirty);
    sift__gx_u32_free(&next);
    sift__gx_u32_free(&moved);
    tab_free(&t);
    tab_free(&split);
    return rc;
}

int sift__gx_pos_reps(const sift_grammar *g, uint32_t **out)
{
    *out = NULL;
    uint32_t *rep = sift__gx_malloc(((size_t)g->n_elems + 1) * sizeof *rep);
    uint32_t *cls = sift__gx_calloc((size_t)g->n_rules + 1, sizeof *cls);
    uint32_t *fid = sift__gx_malloc(((size_t)g->n_rules + 1) * sizeof *fid);
    pair_tab t = {0};
    int rc = SIFT_E_NOMEM;
    if (!rep || !cls || !fid || !tab_init(&t, g->n_elems + 1)) goto done;
    for (uint32_t p = 0; p < g->n_elems; p++) rep[p] = p;
    rc = follow_ids(g, fid);
    if (rc != SIFT_OK) goto done;
    bool settled = false;
    rc = refine_classes(g, cls, &settled);
    if (rc != SIFT_OK) goto done;
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
                if (rest == GX_NONE) { /* out of memory (the table is sized for every pair: never) */
                    sift__gx_free(sid);
                    sift__gx_free(first);
                    rc = SIFT_E_NOMEM;
                    goto done;
                }
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
    sift__gx_free(fid);
    tab_free(&t);
    return rc;
}
