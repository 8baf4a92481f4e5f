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
 * Rule equivalence: rules are equivalent when their bodies (alternatives in order) are
 * equal with REFs taken by class - a bisimulation, so that recursive helpers
 * (x ::= char x | "") fall into one class whatever their names. The classes are found in one
 * pass over the rules' call graph, callees first (Tarjan's strongly connected components):
 *   - a rule outside any cycle takes the class of its body: a chain of (element code, rest
 *     id) pairs interned in a hash table, so equal bodies get equal ids without comparing
 *     sequences; a REF is coded by its callee's class, already known;
 *   - the rules of a cycle are refined among themselves (partition refinement from "all
 *     alike", a REF into the cycle coded by its local class) until no class splits; a cycle
 *     that ends as one class is keyed by its body with the self-references as one mark, so
 *     that equal helpers in different cycles share a class; otherwise its classes are new.
 *     Each class's body with every REF by global class is then registered too, so that a
 *     rule outside cycles with that body joins it.
 * Every class so made holds rules whose bodies are equal under the classes, which is all
 * exactness needs (it may be finer than the coarsest such partition in rare cases, never
 * coarser). The former way, global rounds of refinement until nothing split, settled one
 * call level per round: dozens of passes over 100k-element schema grammars (tens of ms of
 * compile), and past a work limit it gave up to the identity. A cycle that needs more than
 * MAX_CYCLE_WORK element visits keeps one class per rule (exact too).
 *
 * Deep positions (deep_map). The cache only ever walks one token from a frame, at most
 * `max_bytes` (the vocabulary's longest token) bytes, so what lies further than that from a
 * position cannot change a mask. A string with maxLength is such a case: x{1000} is a run of
 * 1000 equal elements, x{0,n} a chain of n helpers x'(k) ::= x x'(k-1) | "", every position
 * a class of its own, and every typed token landed on a new one, a walk of ~5k trie nodes
 * (MaskBench: a third of the masks over 150 us). Two kinds of positions are merged:
 *   - in a run of equal elements that each take at least a byte (a class, or a REF to a rule
 *     that is not nullable), a position with more than D copies left goes to the one with D
 *     left, D = max_bytes + 3: a token passes at most max_bytes copies, so it never reaches
 *     the run's end from either;
 *   - a rule r whose body is another rule t's element for element (REFs by class, FOLLOW
 *     equal) but for one REF, r's to t and t's to some third rule, with an element that takes
 *     a byte before it in its alternative, is one level of a chain r -> t -> ...; a rule with
 *     more than D levels below it goes, position by position, to the rule of its chain with
 *     D levels: each level costs a byte to enter, so a token never sees the chain's end.
 * A merged position is no longer equivalent to its representative for longer texts, only
 * for walks of one token: the matcher (stacks.c) never uses these representatives.
 */
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "grammar/pos_equiv.h"

#define MAX_CYCLE_WORK (1u << 20)
#define LREF 6u /* element type, in chains only: a REF into the cycle being refined, by local class */

/* A slot holds its key and value together: a lookup is one cache miss, not two (the chain
 * table of a large schema grammar is megabytes, and its lookups were most of pos_reps). */
typedef struct {
    uint64_t key; /* (a << 32 | b) + 1, 0 = empty */
    uint32_t val;
} pair_slot;

typedef struct {
    pair_slot *slot;
    uint32_t cap, n;
} pair_tab;

static bool tab_init(pair_tab *t, uint32_t want)
{
    uint32_t cap = 16;
    while (cap < want * 2u) cap *= 2;
    /* written before it is read: a calloc'd table of this size is fresh zero pages, which
     * the first probe (a read) maps shared and the first insert (a write) faults again */
    t->slot = sift__gx_malloc((size_t)cap * sizeof *t->slot);
    t->cap = cap;
    t->n = 0;
    if (t->slot) memset(t->slot, 0, (size_t)cap * sizeof *t->slot);
    return t->slot != NULL;
}

static void tab_clear(pair_tab *t)
{
    memset(t->slot, 0, (size_t)t->cap * sizeof *t->slot);
    t->n = 0;
}

static void tab_free(pair_tab *t) { sift__gx_free(t->slot); }

static bool tab_grow(pair_tab *t)
{
    pair_tab nt;
    if (!tab_init(&nt, t->cap)) {
        tab_free(&nt);
        return false;
    }
    for (uint32_t q = 0; q < t->cap; q++) {
        if (!t->slot[q].key) continue;
        uint32_t k = (uint32_t)sift__gx_mix64(t->slot[q].key) & (nt.cap - 1);
        while (nt.slot[k].key) k = (k + 1) & (nt.cap - 1);
        nt.slot[k] = t->slot[q];
    }
    nt.n = t->n;
    tab_free(t);
    *t = nt;
    return true;
}

/* The value of pair (a, b); a new pair gets v. GX_NONE when out of memory. */
static uint32_t tab_put(pair_tab *t, uint32_t a, uint32_t b, uint32_t v)
{
    if ((t->n + 1) * 2 > t->cap && !tab_grow(t)) return GX_NONE;
    uint64_t k = (((uint64_t)a << 32) | b) + 1;
    uint32_t q = (uint32_t)sift__gx_mix64(k) & (t->cap - 1);
    for (; t->slot[q].key; q = (q + 1) & (t->cap - 1))
        if (t->slot[q].key == k) return t->slot[q].val;
    t->slot[q] = (pair_slot){k, v};
    t->n++;
    return v;
}

/* The id of pair (a, b): 0, 1, 2, ... in order of first appearance. */
static inline uint32_t tab_intern(pair_tab *t, uint32_t a, uint32_t b) { return tab_put(t, a, b, t->n); }

#define REST_END (GX_NONE - 1) /* the id "after the last element" of a chain (GX_NONE: out of memory) */

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

/* A rule's body with every REF by global class, by its hash; `rule` holds that body (0 =
 * empty slot, else rule + 1). */
typedef struct {
    uint64_t hash;
    uint32_t rule, cls;
} body_slot;

/* The rule classes (see the top of the file). */
typedef struct {
    const sift_grammar *g;
    uint32_t *end;      /* [n_rules]: the END element of each rule */
    uint32_t *cls;      /* [n_rules]: class, GX_NONE until known */
    uint32_t *lcl, *nl; /* [n_rules]: local class inside the cycle being refined (its members only) */
    uint32_t *scc;      /* [n_rules]: id of the cycle a rule is in (its members only), else GX_NONE */
    uint32_t n_cls;
    pair_tab chain;     /* (element code, rest) -> rest id */
    pair_tab body;      /* (1, cycle body rest) -> class */
    body_slot *glob;    /* bodies with every REF by global class -> class (see glob_class) */
    uint32_t glob_cap, glob_n;
    pair_tab sig;       /* (local class, rest) -> new local class */
} classes;

/* The rest id of rule r's body. A REF into cycle `in` (GX_NONE: none) by local class, or,
 * when `self` is a class, as LREF 0 if the callee is of that class; any other by class. */
static uint32_t body_rest(classes *c, uint32_t r, uint32_t in, uint32_t self)
{
    const sift_grammar *g = c->g;
    uint32_t rest = REST_END;
    for (uint32_t p = c->end[r]; p-- > g->rule_start[r] && rest != GX_NONE;) {
        uint32_t el = g->elems[p];
        if (GX_TYPE(el) == GX_REF) {
            uint32_t t = GX_VAL(el);
            if (in == GX_NONE || c->scc[t] != in) el = GX_MAKE(GX_REF, c->cls[t]);
            else if (self == GX_NONE) el = GX_MAKE(LREF, c->lcl[t]);
            else el = c->cls[t] == self ? GX_MAKE(LREF, 0) : GX_MAKE(GX_REF, c->cls[t]);
        }
        rest = tab_intern(&c->chain, el, rest);
    }
    return rest;
}

static inline uint32_t glob_code(const classes *c, uint32_t el)
{
    return GX_TYPE(el) == GX_REF ? GX_MAKE(GX_REF, c->cls[GX_VAL(el)]) : el;
}

/* The class of rule r's body with every REF by global class (its callees all have one): the
 * class of an equal body seen before, else `cl`, filed under this body. One hash of the
 * body and one probe per rule, instead of a chain-table probe per element (body_rest): the
 * bodies outside cycles were most of pos_reps' time. GX_NONE when out of memory. */
static uint32_t glob_class(classes *c, uint32_t r, uint32_t cl)
{
    const sift_grammar *g = c->g;
    const uint32_t s0 = g->rule_start[r], len = c->end[r] - s0;
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ len;
    for (uint32_t k = 0; k < len; k++) h = (h ^ glob_code(c, g->elems[s0 + k])) * 0xFF51AFD7ED558CCDULL;
    h = sift__gx_mix64(h);
    if ((c->glob_n + 1) * 2 > c->glob_cap) {
        uint32_t nc = c->glob_cap ? c->glob_cap * 2 : 64;
        body_slot *nt = sift__gx_calloc(nc, sizeof *nt);
        if (!nt) return GX_NONE;
        for (uint32_t q = 0; q < c->glob_cap; q++) {
            if (!c->glob[q].rule) continue;
            uint32_t k = (uint32_t)c->glob[q].hash & (nc - 1);
            while (nt[k].rule) k = (k + 1) & (nc - 1);
            nt[k] = c->glob[q];
        }
        sift__gx_free(c->glob);
        c->glob = nt;
        c->glob_cap = nc;
    }
    uint32_t q = (uint32_t)h & (c->glob_cap - 1);
    for (; c->glob[q].rule; q = (q + 1) & (c->glob_cap - 1)) {
        if (c->glob[q].hash != h) continue;
        const uint32_t o = c->glob[q].rule - 1, o0 = g->rule_start[o];
        if (c->end[o] - o0 != len) continue;
        uint32_t k = 0;
        while (k < len && glob_code(c, g->elems[o0 + k]) == glob_code(c, g->elems[s0 + k])) k++;
        if (k == len) return c->glob[q].cls;
    }
    c->glob[q] = (body_slot){h, r + 1, cl};
    c->glob_n++;
    return cl;
}

static uint32_t body_work(const classes *c, const uint32_t *m, uint32_t k)
{
    uint64_t w = 0;
    for (uint32_t j = 0; j < k; j++) w += c->end[m[j]] - c->g->rule_start[m[j]] + 1;
    return w > UINT32_MAX ? UINT32_MAX : (uint32_t)w;
}

/* Classes of the rules m[0 .. k), a strongly connected component whose callees outside it
 * all have classes. `cyclic`: it calls itself. SIFT_OK or SIFT_E_NOMEM. */
static int classify_scc(classes *c, const uint32_t *m, uint32_t k, bool cyclic, uint32_t id)
{
    if (!cyclic) {
        uint32_t cl = glob_class(c, m[0], c->n_cls);
        if (cl == GX_NONE) return SIFT_E_NOMEM;
        if (cl == c->n_cls) c->n_cls++;
        c->cls[m[0]] = cl;
        return SIFT_OK;
    }
    for (uint32_t j = 0; j < k; j++) {
        c->scc[m[j]] = id;
        c->lcl[m[j]] = 0;
    }
    uint32_t n_local = 1, rest0 = GX_NONE;
    uint64_t work = 0, per_round = body_work(c, m, k);
    bool settled = false;
    while (!settled) {
        work += per_round;
        if (work > MAX_CYCLE_WORK) break;
        tab_clear(&c->sig);
        for (uint32_t j = 0; j < k; j++) {
            uint32_t rest = body_rest(c, m[j], id, GX_NONE);
            uint32_t s = rest == GX_NONE ? GX_NONE : tab_intern(&c->sig, c->lcl[m[j]], rest);
            if (s == GX_NONE) return SIFT_E_NOMEM;
            c->nl[m[j]] = s;
            if (j == 0) rest0 = rest;
        }
        settled = c->sig.n == n_local;
        n_local = c->sig.n;
        for (uint32_t j = 0; j < k; j++) c->lcl[m[j]] = c->nl[m[j]];
        if (k == 1) settled = true; /* one rule: one class */
    }
    if (!settled) {
        /* one class per rule: exact, and no more work */
        for (uint32_t j = 0; j < k; j++) c->lcl[m[j]] = j;
        n_local = k;
    }
    if (n_local == 1) {
        /* one class: keyed by its body with the self-references marked alike (LREF 0) */
        uint32_t cl = tab_put(&c->body, 1, rest0, c->n_cls);
        if (cl == GX_NONE) return SIFT_E_NOMEM;
        if (cl == c->n_cls) c->n_cls++;
        for (uint32_t j = 0; j < k; j++) c->cls[m[j]] = cl;
    } else {
        for (uint32_t j = 0; j < k; j++) c->cls[m[j]] = c->n_cls + c->lcl[m[j]];
        c->n_cls += n_local;
    }
    /* each class's body by global classes, for the rules outside cycles that have it, and
     * (several classes) with the class's own members as LREF 0, for a later cycle of one
     * class with that body - one member per class: the members' bodies are equal */
    for (uint32_t j = 0; j < k; j++) {
        if (c->lcl[m[j]] == GX_NONE) continue;
        if (glob_class(c, m[j], c->cls[m[j]]) == GX_NONE) return SIFT_E_NOMEM;
        if (n_local > 1) {
            uint32_t rest = body_rest(c, m[j], id, c->cls[m[j]]);
            if (rest == GX_NONE || tab_put(&c->body, 1, rest, c->cls[m[j]]) == GX_NONE) return SIFT_E_NOMEM;
        }
        uint32_t l = c->lcl[m[j]];
        for (uint32_t q = j; q < k; q++)
            if (c->lcl[m[q]] == l) c->lcl[m[q]] = GX_NONE;
    }
    for (uint32_t j = 0; j < k; j++) c->scc[m[j]] = GX_NONE;
    return SIFT_OK;
}

/* Tarjan's strongly connected components over the REF graph, iteratively; each component is
 * classified as it completes (its callees have completed before it). */
static int rule_classes(classes *c)
{
    const sift_grammar *g = c->g;
    uint32_t n = g->n_rules;
    uint32_t *index = sift__gx_malloc(((size_t)n + 1) * sizeof *index);
    uint32_t *low = sift__gx_malloc(((size_t)n + 1) * sizeof *low);
    uint32_t *stk = sift__gx_malloc(((size_t)n + 1) * sizeof *stk);   /* Tarjan's stack */
    uint32_t *fr = sift__gx_malloc(((size_t)n + 1) * sizeof *fr);     /* DFS frames: rule */
    uint32_t *fp = sift__gx_malloc(((size_t)n + 1) * sizeof *fp);     /* DFS frames: next element */
    uint8_t *on = sift__gx_calloc((size_t)n + 1, 1);
    int rc = SIFT_E_NOMEM;
    if (!index || !low || !stk || !fr || !fp || !on) goto done;
    memset(index, 0xFF, (size_t)n * sizeof *index);
    uint32_t next = 0, sp = 0, n_scc = 0;
    rc = SIFT_OK;
    for (uint32_t r0 = 0; r0 < n && rc == SIFT_OK; r0++) {
        if (index[r0] != GX_NONE) continue;
        uint32_t fsp = 0;
        index[r0] = low[r0] = next++;
        stk[sp++] = r0;
        on[r0] = 1;
        fr[fsp] = r0;
        fp[fsp++] = g->rule_start[r0];
        while (fsp && rc == SIFT_OK) {
            uint32_t v = fr[fsp - 1], p = fp[fsp - 1];
            while (p < c->end[v] && GX_TYPE(g->elems[p]) != GX_REF) p++;
            if (p < c->end[v]) {
                fp[fsp - 1] = p + 1;
                uint32_t w = GX_VAL(g->elems[p]);
                if (index[w] == GX_NONE) {
                    index[w] = low[w] = next++;
                    stk[sp++] = w;
                    on[w] = 1;
                    fr[fsp] = w;
                    fp[fsp++] = g->rule_start[w];
                } else if (on[w] && index[w] < low[v]) {
                    low[v] = index[w];
                }
                continue;
            }
            fsp--;
            if (fsp && low[v] < low[fr[fsp - 1]]) low[fr[fsp - 1]] = low[v];
            if (low[v] != index[v]) continue;
            uint32_t top = sp;
            do on[stk[--sp]] = 0;
            while (stk[sp] != v);
            uint32_t k = top - sp;
            bool cyclic = k > 1;
            for (uint32_t q = g->rule_start[v]; !cyclic && q < c->end[v]; q++)
                cyclic = GX_TYPE(g->elems[q]) == GX_REF && GX_VAL(g->elems[q]) == v;
            rc = classify_scc(c, stk + sp, k, cyclic, n_scc++);
        }
    }
done:
    sift__gx_free(index);
    sift__gx_free(low);
    sift__gx_free(stk);
    sift__gx_free(fr);
    sift__gx_free(fp);
    sift__gx_free(on);
    return rc;
}

#define DEEP_WORK_MAX (1u << 20) /* element comparisons deep_map may spend on finding chain links (~1 ms) */

/* Does element el take at least one byte (a class, a REF to a rule that is not nullable)? */
static bool takes_byte(const sift_grammar *g, uint32_t el)
{
    return GX_TYPE(el) == GX_CLASS || (GX_TYPE(el) == GX_REF && !g->rule_nullable[GX_VAL(el)]);
}

/* Is rule r one level of a chain whose next level is t (see the top of the file), through its
 * REF at position h? */
static bool chain_link(const classes *c, const uint32_t *fid, uint32_t r, uint32_t h, uint32_t t, uint64_t *work)
{
    const sift_grammar *g = c->g;
    uint32_t len = c->end[r] - g->rule_start[r], i = h - g->rule_start[r];
    if (t == r || c->end[t] - g->rule_start[t] != len || fid[t] != fid[r]) return false;
    uint32_t th = g->rule_start[t] + i, u = GX_VAL(g->elems[th]);
    if (GX_TYPE(g->elems[th]) != GX_REF || u == t || u == r) return false;
    bool paid = false; /* an element before the REF, in its alternative, takes a byte */
    for (uint32_t q = h; q-- > g->rule_start[r] && GX_TYPE(g->elems[q]) != GX_ALT;) paid |= takes_byte(g, g->elems[q]);
    if (!paid) return false;
    *work += len;
    for (uint32_t j = 0; j <= len; j++) {
        if (j == i) continue;
        uint32_t a = g->elems[g->rule_start[r] + j], b = g->elems[g->rule_start[t] + j];
        if (GX_TYPE(a) == GX_REF && GX_TYPE(b) == GX_REF) {
            if (c->cls[GX_VAL(a)] != c->cls[GX_VAL(b)]) return false;
        } else if (a != b) {
            return false;
        }
    }
    return true;
}

/* map[p] := the position p is merged with as a deep position (itself if none), for tokens of
 * at most max_bytes bytes (see the top of the file). SIFT_OK or SIFT_E_NOMEM. */
static int deep_map(const classes *c, const uint32_t *fid, uint32_t max_bytes, uint32_t *map)
{
    const sift_grammar *g = c->g;
    const uint32_t R = g->n_rules, D = max_bytes + 3;
    for (uint32_t p = 0; p <= g->n_elems; p++) map[p] = p;
    if (!max_bytes || max_bytes > (1u << 16)) return SIFT_OK;
    uint32_t *nxt = sift__gx_malloc((size_t)R * sizeof *nxt), *lv = sift__gx_malloc((size_t)R * sizeof *lv);
    uint32_t *tgt = sift__gx_malloc((size_t)R * sizeof *tgt), *hole = sift__gx_malloc((size_t)R * sizeof *hole);
    sift__gx_u32vec path = {0};
    int rc = SIFT_E_NOMEM;
    if (!nxt || !lv || !tgt || !hole) goto done;
    /* chain links: the first REF of each rule that makes one */
    uint64_t work = 0;
    for (uint32_t r = 0; r < R; r++) {
        nxt[r] = lv[r] = tgt[r] = GX_NONE;
        for (uint32_t h = g->rule_start[r]; h < c->end[r] && work < DEEP_WORK_MAX; h++)
            if (GX_TYPE(g->elems[h]) == GX_REF && chain_link(c, fid, r, h, GX_VAL(g->elems[h]), &work)) {
                nxt[r] = GX_VAL(g->elems[h]);
                hole[r] = h - g->rule_start[r];
                break;
            }
    }
    /* runs of equal elements first: a chain's positions then take their target's */
    for (uint32_t p = 0; p < g->n_elems;) {
        uint32_t el = g->elems[p], e = p + 1;
        if (!takes_byte(g, el)) {
            p++;
            continue;
        }
        while (e < g->n_elems && g->elems[e] == el) e++; /* (an END or ALT ends every run) */
        for (uint32_t q = p; q + D < e; q++) map[q] = e - D;
        p = e;
    }
    /* A chain is one template: a link whose next rule links on through another REF ends
     * the chain before it (r = T[t] and t = T'[u] say nothing of t's level below). */
    for (uint32_t r = 0; r < R; r++)
        if (nxt[r] != GX_NONE && nxt[nxt[r]] != GX_NONE && hole[nxt[r]] != hole[r]) lv[r] = 0;
    /* levels below each rule, and the rule of its chain with D levels below it; the rules on
     * a path into a cycle of links are left alone */
    const uint32_t ON_PATH = GX_NONE - 1;
    for (uint32_t r = 0; r < R; r++) {
        if (lv[r] != GX_NONE) continue;
        path.n = 0;
        uint32_t q = r;
        while (q != GX_NONE && lv[q] == GX_NONE) {
            lv[q] = ON_PATH;
            if (!sift__gx_u32_push(&path, q)) goto done;
            q = nxt[q];
        }
        if (q != GX_NONE && lv[q] == ON_PATH) {
            for (uint32_t k = 0; k < path.n; k++) lv[path.v[k]] = 0;
            continue;
        }
        uint32_t base = q == GX_NONE ? 0 : lv[q] + 1;
        for (uint32_t k = path.n; k-- > 0; base++) {
            uint32_t x = path.v[k];
            lv[x] = base;
            tgt[x] = base == D ? x : base > D ? tgt[nxt[x]] : GX_NONE;
        }
    }
    for (uint32_t r = 0; r < R; r++)
        if (tgt[r] != GX_NONE && tgt[r] != r)
            for (uint32_t p = g->rule_start[r]; p <= c->end[r]; p++) map[p] = map[g->rule_start[tgt[r]] + (p - g->rule_start[r])];
    rc = SIFT_OK;
done:
    sift__gx_free(nxt);
    sift__gx_free(lv);
    sift__gx_free(tgt);
    sift__gx_free(hole);
    sift__gx_u32_free(&path);
    return rc;
}

int sift__gx_pos_reps(const sift_grammar *g, uint32_t max_bytes, uint32_t **out)
{
    *out = NULL;
    size_t nr = (size_t)g->n_rules + 1;
    uint32_t *rep = sift__gx_malloc(((size_t)g->n_elems + 1) * sizeof *rep);
    uint32_t *fid = sift__gx_malloc(nr * sizeof *fid);
    uint32_t *first = NULL, *sid = NULL, *deep = NULL;
    classes c = {.g = g};
    c.end = sift__gx_malloc(nr * sizeof *c.end);
    c.cls = sift__gx_malloc(nr * sizeof *c.cls);
    c.lcl = sift__gx_malloc(nr * sizeof *c.lcl);
    c.nl = sift__gx_malloc(nr * sizeof *c.nl);
    c.scc = sift__gx_malloc(nr * sizeof *c.scc);
    int rc = SIFT_E_NOMEM;
    /* the body table starts small and grows: most rules share their classes (a 17k-rule
     * Snowplow grammar has 1.2k), and a table sized for every rule was mostly empty slots,
     * each probe a cache miss and each page a fault. The chain table is sized for half the
     * elements, about what it ends with (a 57k-element Kubernetes grammar has 15k distinct
     * chains, one of 45k elements after the converter shares equal rules 23k): growing it
     * from 4096 rehashed as much as it inserted (3-8 % of a large grammar's build) */
    if (!rep || !fid || !c.end || !c.cls || !c.lcl || !c.nl || !c.scc || !tab_init(&c.chain, g->n_elems / 2 + 1) ||
        !tab_init(&c.body, g->n_rules < 1024u ? g->n_rules + 1 : 1024u) || !tab_init(&c.sig, 8))
        goto done;
    for (uint32_t p = 0; p < g->n_elems; p++) rep[p] = p;
    for (uint32_t r = 0; r < g->n_rules; r++) {
        uint32_t end = g->rule_start[r];
        while (GX_TYPE(g->elems[end]) != GX_END) end++;
        c.end[r] = end;
        c.cls[r] = GX_NONE;
        c.scc[r] = GX_NONE;
    }
    rc = follow_ids(g, fid);
    if (rc == SIFT_OK) rc = rule_classes(&c);
    if (rc != SIFT_OK) goto done;
    /* rest ids of every position, the end of an alternative coded by its FOLLOW id; the
     * first position with a given id represents it */
    rc = SIFT_E_NOMEM;
    tab_clear(&c.chain);
    first = sift__gx_malloc(((size_t)g->n_elems + 1) * sizeof *first);
    sid = sift__gx_malloc(((size_t)g->n_elems + 1) * sizeof *sid);
    if (!first || !sid) goto done;
    memset(first, 0xFF, ((size_t)g->n_elems + 1) * sizeof *first);
    memset(sid, 0xFF, ((size_t)g->n_elems + 1) * sizeof *sid);
    /* rules of one class with one FOLLOW set have equal coded bodies, so equal rest ids
     * position by position: the first of each (class, FOLLOW) pair is interned, the others
     * copy its ids (most rules of a schema grammar repeat another's shape) */
    tab_clear(&c.sig);
    for (uint32_t r = 0; r < g->n_rules; r++) {
        uint32_t len = c.end[r] - g->rule_start[r], twin = tab_put(&c.sig, c.cls[r], fid[r], r);
        if (twin == GX_NONE) goto done;
        if (twin != r && c.end[twin] - g->rule_start[twin] == len) {
            memcpy(sid + g->rule_start[r], sid + g->rule_start[twin], ((size_t)len + 1) * sizeof *sid);
            continue;
        }
        uint32_t rest = REST_END;
        for (uint32_t p = c.end[r] + 1; p-- > g->rule_start[r];) {
            uint32_t el = g->elems[p];
            if (GX_TYPE(el) == GX_REF) el = GX_MAKE(GX_REF, c.cls[GX_VAL(el)]);
            rest = sift__gx_is_end(el) ? tab_intern(&c.chain, GX_MAKE(GX_END, fid[r]), REST_END) : tab_intern(&c.chain, el, rest);
            if (rest == GX_NONE) goto done;
            sid[p] = rest;
        }
    }
    /* in position order, so that a representative is the first of its class */
    for (uint32_t p = 0; p < g->n_elems; p++) {
        if (sid[p] == GX_NONE) continue; /* not inside a rule: stays itself */
        if (first[sid[p]] == GX_NONE) first[sid[p]] = p;
        rep[p] = first[sid[p]];
    }
    /* deep positions take their target's representative (a target is never deep itself) */
    if (!(deep = sift__gx_malloc(((size_t)g->n_elems + 1) * sizeof *deep)) || deep_map(&c, fid, max_bytes, deep) != SIFT_OK) goto done;
    for (uint32_t p = 0; p < g->n_elems; p++)
        if (deep[p] != p && sid[deep[p]] != GX_NONE) rep[p] = rep[deep[p]];
    *out = rep;
    rep = NULL;
    rc = SIFT_OK;
done:
    sift__gx_free(rep);
    sift__gx_free(fid);
    sift__gx_free(first);
    sift__gx_free(sid);
    sift__gx_free(deep);
    sift__gx_free(c.end);
    sift__gx_free(c.cls);
    sift__gx_free(c.lcl);
    sift__gx_free(c.nl);
    sift__gx_free(c.scc);
    tab_free(&c.chain);
    tab_free(&c.body);
    sift__gx_free(c.glob);
    tab_free(&c.sig);
    return rc;
}
