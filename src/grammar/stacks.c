/*
 * stacks.c - hash-consed parse stacks, closures and the reference matcher (see stacks.h).
 *
 * This is the exact, simple matcher: llama.cpp's algorithm (advance_stack / accept over code
 * points) with shared stacks and memoized successors. It decides what accept() does and is
 * the oracle the fast token-mask engine (mask.c) is tested against, token by token.
 */
#include <stdlib.h>

#include "grammar/stacks.h"

#define ARENA_DEFAULT_MAX_NODES (1u << 26)

static bool arena_reserve(sift__gx_arena *a, uint32_t need)
{
    if (need <= a->cap) return true;
    if (need > a->max_nodes) return false;
    uint32_t ncap = a->cap ? a->cap : 256;
    while (ncap < need) ncap *= 2;
    uint32_t *p;
#define GROW_FIELD(f, fill)                                                   \
    p = sift__gx_grow_realloc(a->f, (size_t)ncap * sizeof *p);                      \
    if (!p) return false;                                                     \
    for (uint32_t k = a->cap; k < ncap; k++) p[k] = (fill);                   \
    a->f = p;
    GROW_FIELD(pos, 0)
    GROW_FIELD(parent, 0)
    GROW_FIELD(succ, GX_NONE)
    GROW_FIELD(stamp, 0)
    GROW_FIELD(mark, 0)
#undef GROW_FIELD
    a->cap = ncap;
    return true;
}

static bool ht_resize(sift__gx_arena *a, uint32_t ncap)
{
    uint32_t *t = sift__gx_calloc(ncap, sizeof *t);
    if (!t) return false;
    for (uint32_t id = 1; id < a->n; id++) {
        uint32_t k = (uint32_t)sift__gx_hash2(a->pos[id], a->parent[id]) & (ncap - 1);
        while (t[k]) k = (k + 1) & (ncap - 1);
        t[k] = id;
    }
    sift__gx_free(a->ht);
    a->ht = t;
    a->ht_cap = ncap;
    return true;
}

int sift__gx_arena_init(sift__gx_arena *a, const sift_grammar *g)
{
    memset(a, 0, sizeof *a);
    a->g = g;
    a->max_nodes = ARENA_DEFAULT_MAX_NODES;
    if (!arena_reserve(a, 256) || !ht_resize(a, 512)) {
        sift__gx_arena_free(a);
        return SIFT_E_NOMEM;
    }
    a->n = 1; /* the bottom */
    a->epoch = a->mark_epoch = 1;
    return SIFT_OK;
}

void sift__gx_arena_free(sift__gx_arena *a)
{
    sift__gx_free(a->pos);
    sift__gx_free(a->parent);
    sift__gx_free(a->succ);
    sift__gx_free(a->stamp);
    sift__gx_free(a->mark);
    sift__gx_free(a->ht);
    sift__gx_u32_free(&a->pool);
    sift__gx_u32_free(&a->work);
    sift__gx_u32_free(&a->scratch);
    memset(a, 0, sizeof *a);
}

int sift__gx_arena_copy(sift__gx_arena *dst, const sift__gx_arena *src)
{
    sift__gx_arena_free(dst);
    dst->g = src->g;
    dst->max_nodes = src->max_nodes;
    dst->rep = src->rep;
    if (!arena_reserve(dst, src->cap) || !(dst->ht = sift__gx_malloc((size_t)src->ht_cap * sizeof *dst->ht))) {
        sift__gx_arena_free(dst);
        return SIFT_E_NOMEM;
    }
    dst->n = src->n;
    dst->ht_cap = src->ht_cap;
    size_t nb = (size_t)src->n * sizeof(uint32_t);
    memcpy(dst->pos, src->pos, nb);
    memcpy(dst->parent, src->parent, nb);
    memcpy(dst->succ, src->succ, nb);
    memcpy(dst->stamp, src->stamp, nb);
    memcpy(dst->mark, src->mark, nb);
    memcpy(dst->ht, src->ht, (size_t)src->ht_cap * sizeof *dst->ht);
    dst->epoch = src->epoch;
    dst->mark_epoch = src->mark_epoch;
    if (src->pool.n) {
        if (!GX_GROW(dst->pool.v, dst->pool.cap, src->pool.n)) {
            sift__gx_arena_free(dst);
            return SIFT_E_NOMEM;
        }
        memcpy(dst->pool.v, src->pool.v, (size_t)src->pool.n * sizeof *dst->pool.v);
        dst->pool.n = src->pool.n;
    }
    return SIFT_OK;
}

void sift__gx_arena_clear(sift__gx_arena *a)
{
    for (uint32_t k = 0; k < a->n; k++) {
        a->succ[k] = GX_NONE;
        a->stamp[k] = a->mark[k] = 0;
    }
    memset(a->ht, 0, (size_t)a->ht_cap * sizeof *a->ht);
    a->n = 1;
    a->pool.n = 0;
    a->epoch = a->mark_epoch = 1;
}

int sift__gx_state_compact(sift__gx_arena *a, sift__gx_state *s)
{
    sift__gx_arena fresh;
    int rc = sift__gx_arena_init(&fresh, a->g);
    if (rc != SIFT_OK) return rc;
    fresh.rep = a->rep;
    fresh.max_nodes = a->max_nodes;
    sift__gx_u32vec chain = {0};
    for (uint32_t k = 0; k < s->tops.n && rc == SIFT_OK; k++) {
        chain.n = 0;
        for (uint32_t n = s->tops.v[k]; n && rc == SIFT_OK; n = a->parent[n])
            if (!sift__gx_u32_push(&chain, a->pos[n])) rc = SIFT_E_NOMEM;
        uint32_t id = 0;
        for (uint32_t q = chain.n; q-- > 0 && rc == SIFT_OK;)
            if ((id = sift__gx_node(&fresh, chain.v[q], id)) == GX_NONE) rc = SIFT_E_NOMEM;
        if (rc == SIFT_OK) s->tops.v[k] = id;
    }
    sift__gx_u32_free(&chain);
    if (rc != SIFT_OK) {
        sift__gx_arena_free(&fresh);
        return rc; /* the old arena and ids are untouched only if nothing was rewritten */
    }
    sift__gx_arena_free(a);
    *a = fresh;
    return SIFT_OK;
}

uint32_t sift__gx_node(sift__gx_arena *a, uint32_t pos, uint32_t parent)
{
    if (a->rep) pos = a->rep[pos];
    uint32_t mask = a->ht_cap - 1;
    uint32_t k = (uint32_t)sift__gx_hash2(pos, parent) & mask;
    for (uint32_t id; (id = a->ht[k]) != 0; k = (k + 1) & mask)
        if (a->pos[id] == pos && a->parent[id] == parent) return id;
    if (!arena_reserve(a, a->n + 1)) return GX_NONE;
    uint32_t id = a->n++;
    a->pos[id] = pos;
    a->parent[id] = parent;
    a->succ[id] = GX_NONE;
    a->stamp[id] = a->mark[id] = 0;
    a->ht[k] = id;
    if ((uint64_t)a->n * 2 > a->ht_cap && !ht_resize(a, a->ht_cap * 2)) {
        a->n--;
        a->ht[k] = 0;
        return GX_NONE;
    }
    return id;
}

static void next_epoch(uint32_t *epoch, uint32_t *arr, uint32_t n)
{
    if (++*epoch == 0) { /* wrapped: clear the stamps once every 2^32 uses */
        memset(arr, 0, (size_t)n * sizeof *arr);
        *epoch = 1;
    }
}

void sift__gx_mark_begin(sift__gx_arena *a) { next_epoch(&a->mark_epoch, a->mark, a->n); }

/* push "execute node c" or, for the bottom, record that the stack emptied */
static inline bool push_exec(sift__gx_arena *a, uint32_t c, bool *bottom)
{
    if (c == 0) {
        *bottom = true;
        return true;
    }
    return sift__gx_u32_push(&a->work, c);
}

/* Run the closure work list: every node on a->work is executed once per epoch; terminal-topped
 * nodes go to out (each once), an emptied parent chain sets *bottom. */
static int closure_run(sift__gx_arena *a, sift__gx_u32vec *out, bool *bottom)
{
    const sift_grammar *g = a->g;
    while (a->work.n) {
        uint32_t n = a->work.v[--a->work.n];
        if (a->stamp[n] == a->epoch) continue;
        a->stamp[n] = a->epoch;
        uint32_t p = a->pos[n];
        uint32_t e = g->elems[p];
        if (sift__gx_is_terminal(e)) {
            if (!sift__gx_u32_push(out, n)) return SIFT_E_NOMEM;
            continue;
        }
        /* a REF: continue after it in this rule (or return to the parent), then expand */
        uint32_t cont = sift__gx_is_end(g->elems[p + 1]) ? a->parent[n] : sift__gx_node(a, p + 1, a->parent[n]);
        if (cont == GX_NONE) return SIFT_E_NOMEM;
        uint32_t alt = g->rule_start[GX_VAL(e)];
        for (;;) {
            if (sift__gx_is_end(g->elems[alt])) {
                if (!push_exec(a, cont, bottom)) return SIFT_E_NOMEM;
            } else {
                uint32_t c = sift__gx_node(a, alt, cont);
                if (c == GX_NONE || !sift__gx_u32_push(&a->work, c)) return SIFT_E_NOMEM;
            }
            while (!sift__gx_is_end(g->elems[alt])) alt++;
            if (GX_TYPE(g->elems[alt]) == GX_END) break;
            alt++;
        }
    }
    return SIFT_OK;
}

int sift__gx_closure(sift__gx_arena *a, uint32_t pos, uint32_t parent, sift__gx_u32vec *out, bool *bottom)
{
    next_epoch(&a->epoch, a->stamp, a->n);
    uint32_t start = sift__gx_node(a, pos, parent);
    if (start == GX_NONE) return SIFT_E_NOMEM;
    a->work.n = 0;
    if (!sift__gx_u32_push(&a->work, start)) return SIFT_E_NOMEM;
    return closure_run(a, out, bottom);
}

int sift__gx_succ_union(sift__gx_arena *a, const uint32_t *nodes, uint32_t n, sift__gx_u32vec *out, bool *bottom)
{
    const sift_grammar *g = a->g;
    next_epoch(&a->epoch, a->stamp, a->n);
    a->work.n = 0;
    for (uint32_t k = 0; k < n; k++) {
        uint32_t m = nodes[k], p = a->pos[m], c;
        if (sift__gx_is_end(g->elems[p + 1])) {
            c = a->parent[m]; /* the node of the parent frame is its continuation */
        } else if ((c = sift__gx_node(a, p + 1, a->parent[m])) == GX_NONE) {
            return SIFT_E_NOMEM;
        }
        if (!push_exec(a, c, bottom)) return SIFT_E_NOMEM;
    }
    return closure_run(a, out, bottom);
}

const uint32_t *sift__gx_succ(sift__gx_arena *a, uint32_t n, uint32_t *count, bool *bottom)
{
    if (a->succ[n] == GX_NONE) {
        const sift_grammar *g = a->g;
        uint32_t p = a->pos[n];
        uint32_t off = a->pool.n;
        if (!sift__gx_u32_push(&a->pool, 0)) return NULL;
        bool bot = false;
        int rc;
        if (sift__gx_is_end(g->elems[p + 1])) {
            uint32_t par = a->parent[n];
            if (par == 0) {
                bot = true;
                rc = SIFT_OK;
            } else {
                rc = sift__gx_closure(a, a->pos[par], a->parent[par], &a->pool, &bot);
            }
        } else {
            rc = sift__gx_closure(a, p + 1, a->parent[n], &a->pool, &bot);
        }
        if (rc != SIFT_OK) {
            a->pool.n = off;
            return NULL;
        }
        a->pool.v[off] = (a->pool.n - off - 1) | ((uint32_t)bot << 31);
        a->succ[n] = off;
    }
    uint32_t h = a->pool.v[a->succ[n]];
    *count = h & 0x7FFFFFFFu;
    *bottom = h >> 31;
    return a->pool.v + a->succ[n] + 1;
}

/* ---- states -------------------------------------------------------------------------------- */

void sift__gx_state_free(sift__gx_state *s) { sift__gx_u32_free(&s->tops); }

int sift__gx_state_copy(sift__gx_state *dst, const sift__gx_state *src)
{
    if (!GX_GROW(dst->tops.v, dst->tops.cap, src->tops.n)) return SIFT_E_NOMEM;
    if (src->tops.n) memcpy(dst->tops.v, src->tops.v, (size_t)src->tops.n * sizeof *src->tops.v);
    dst->tops.n = src->tops.n;
    dst->can_end = src->can_end;
    dst->utf8 = src->utf8;
    return SIFT_OK;
}

int sift__gx_state_start(sift__gx_arena *a, sift__gx_state *s)
{
    const sift_grammar *g = a->g;
    s->tops.n = 0;
    s->can_end = false;
    memset(&s->utf8, 0, sizeof s->utf8);
    uint32_t alt = g->rule_start[g->root];
    sift__gx_mark_begin(a);
    sift__gx_u32vec *tmp = &a->scratch;
    int rc = SIFT_OK;
    for (;;) {
        if (sift__gx_is_end(g->elems[alt])) {
            s->can_end = true;
        } else {
            tmp->n = 0;
            rc = sift__gx_closure(a, alt, 0, tmp, &s->can_end);
            if (rc != SIFT_OK) break;
            for (uint32_t k = 0; k < tmp->n; k++)
                if (sift__gx_mark_add(a, tmp->v[k]) && !sift__gx_u32_push(&s->tops, tmp->v[k])) {
                    rc = SIFT_E_NOMEM;
                    break;
                }
            if (rc != SIFT_OK) break;
        }
        while (!sift__gx_is_end(g->elems[alt])) alt++;
        if (GX_TYPE(g->elems[alt]) == GX_END) break;
        alt++;
    }
    if (rc == SIFT_OK && s->tops.n > GX_MAX_STACKS) rc = GX_E_STACKS;
    return rc;
}

int sift__gx_state_step(sift__gx_arena *a, const sift__gx_state *in, uint32_t cp, sift__gx_state *out)
{
    const sift_grammar *g = a->g;
    uint32_t sym = sift__gx_sym_of(g, cp);
    out->tops.n = 0;
    out->can_end = false;
    memset(&out->utf8, 0, sizeof out->utf8);
    if (in->tops.n > GX_SUCC_UNION_MIN) {
        sift__gx_u32vec *acc = &a->scratch;
        acc->n = 0;
        for (uint32_t k = 0; k < in->tops.n; k++)
            if (sift__gx_elem_accepts_sym(g, g->elems[a->pos[in->tops.v[k]]], sym) && !sift__gx_u32_push(acc, in->tops.v[k]))
                return SIFT_E_NOMEM;
        int rc = sift__gx_succ_union(a, acc->v, acc->n, &out->tops, &out->can_end);
        return rc == SIFT_OK && out->tops.n > GX_MAX_STACKS ? GX_E_STACKS : rc;
    }
    /* compute (memoize) the successor lists first: sift__gx_succ may run closures */
    for (uint32_t k = 0; k < in->tops.n; k++) {
        uint32_t n = in->tops.v[k];
        if (sift__gx_elem_accepts_sym(g, g->elems[a->pos[n]], sym)) {
            uint32_t c;
            bool b;
            if (!sift__gx_succ(a, n, &c, &b)) return SIFT_E_NOMEM;
        }
    }
    sift__gx_mark_begin(a);
    for (uint32_t k = 0; k < in->tops.n; k++) {
        uint32_t n = in->tops.v[k];
        if (!sift__gx_elem_accepts_sym(g, g->elems[a->pos[n]], sym)) continue;
        uint32_t c;
        bool b;
        const uint32_t *s = sift__gx_succ(a, n, &c, &b);
        out->can_end |= b;
        for (uint32_t q = 0; q < c; q++)
            if (sift__gx_mark_add(a, s[q]) && !sift__gx_u32_push(&out->tops, s[q])) return SIFT_E_NOMEM;
    }
    return out->tops.n > GX_MAX_STACKS ? GX_E_STACKS : SIFT_OK;
}

bool sift__gx_state_partial_ok(const sift__gx_arena *a, const sift__gx_state *s)
{
    if (s->utf8.need == 0) return true;
    const sift_grammar *g = a->g;
    uint32_t lo, hi, s0, s1;
    sift__gx_utf8_range(&s->utf8, &lo, &hi);
    sift__gx_syms_in_range(g, lo, hi, &s0, &s1);
    for (uint32_t k = 0; k < s->tops.n; k++) {
        uint32_t e = g->elems[a->pos[s->tops.v[k]]];
        if (GX_TYPE(e) == GX_CLASS && sift__gx_bits_any_in(sift__gx_class_bits(g, GX_VAL(e)), s0, s1)) return true;
    }
    return false;
}

/* Feed bytes to a copy of *s in tmp/tmp2; *result is whichever holds the final state. */
static int feed_into(sift__gx_arena *a, const sift__gx_state *s, const uint8_t *bytes, size_t n, sift__gx_state *tmp, sift__gx_state *tmp2,
                     size_t *fail, sift__gx_state **result)
{
    int rc = sift__gx_state_copy(tmp, s);
    if (rc != SIFT_OK) return rc;
    sift__gx_state *cur = tmp, *nxt = tmp2;
    for (size_t k = 0; k < n; k++) {
        sift__gx_utf8 u = cur->utf8;
        int32_t r = sift__gx_utf8_feed(&u, bytes[k]);
        if (r == GX_UTF8_BAD) {
            *fail = k;
            return SIFT_E_INVAL;
        }
        if (r == GX_UTF8_MORE) {
            cur->utf8 = u;
            if (!sift__gx_state_partial_ok(a, cur)) {
                *fail = k;
                return SIFT_E_INVAL;
            }
            continue;
        }
        rc = sift__gx_state_step(a, cur, (uint32_t)r, nxt);
        if (rc != SIFT_OK) return rc;
        if (sift__gx_state_dead(nxt)) {
            *fail = k;
            return SIFT_E_INVAL;
        }
        sift__gx_state *t = cur;
        cur = nxt;
        nxt = t;
    }
    *result = cur;
    return SIFT_OK;
}

int sift__gx_state_feed(sift__gx_arena *a, sift__gx_state *s, const uint8_t *bytes, size_t n, sift__gx_state *tmp, sift__gx_state *tmp2, size_t *fail)
{
    sift__gx_state *res;
    int rc = feed_into(a, s, bytes, n, tmp, tmp2, fail, &res);
    if (rc != SIFT_OK) return rc;
    return sift__gx_state_copy(s, res);
}

/* Step `in` by a whole token id: successors of the TOKEN / TOKEN_NOT tops it matches. */
static int step_token_id(sift__gx_arena *a, const sift__gx_state *in, uint32_t token, sift__gx_state *out)
{
    const sift_grammar *g = a->g;
    out->tops.n = 0;
    out->can_end = false;
    memset(&out->utf8, 0, sizeof out->utf8);
    if (in->utf8.need) return SIFT_OK;
    for (uint32_t pass = 0; pass < 2; pass++) {
        if (pass) sift__gx_mark_begin(a);
        for (uint32_t k = 0; k < in->tops.n; k++) {
            uint32_t n = in->tops.v[k];
            uint32_t e = g->elems[a->pos[n]];
            bool ok = (GX_TYPE(e) == GX_TOKEN && GX_VAL(e) == token) || (GX_TYPE(e) == GX_TOKEN_NOT && GX_VAL(e) != token);
            if (!ok) continue;
            uint32_t c;
            bool b;
            const uint32_t *s = sift__gx_succ(a, n, &c, &b);
            if (!s) return SIFT_E_NOMEM;
            if (!pass) continue;
            out->can_end |= b;
            for (uint32_t q = 0; q < c; q++)
                if (sift__gx_mark_add(a, s[q]) && !sift__gx_u32_push(&out->tops, s[q])) return SIFT_E_NOMEM;
        }
    }
    return SIFT_OK;
}

int sift__gx_state_accept_token(sift__gx_arena *a, sift__gx_state *s, uint32_t token, const uint8_t *bytes, size_t n, sift__gx_state *t1,
                          sift__gx_state *t2, sift__gx_state *t3)
{
    const sift_grammar *g = a->g;
    int rc;
    bool by_id = false;
    if (g->has_tokens) {
        rc = step_token_id(a, s, token, t3);
        if (rc != SIFT_OK) return rc;
        by_id = !sift__gx_state_dead(t3);
    }
    size_t fail;
    rc = n ? sift__gx_state_feed(a, s, bytes, n, t1, t2, &fail) : SIFT_E_INVAL;
    if (rc != SIFT_OK && rc != SIFT_E_INVAL) return rc; /* out of memory, too many stacks */
    bool by_text = rc == SIFT_OK;
    if (!by_text && !by_id) return SIFT_E_INVAL;
    /* A text that ends inside a character and an id match would disagree on the UTF-8
     * state of the union; that needs a special token whose text ends mid-character, and
     * then the id match alone is kept. */
    if (by_id && by_text && s->utf8.need) return sift__gx_state_copy(s, t3);
    if (by_id && by_text) { /* union: s (after text) + t3 (after id) */
        sift__gx_mark_begin(a);
        for (uint32_t k = 0; k < s->tops.n; k++) sift__gx_mark_add(a, s->tops.v[k]);
        for (uint32_t k = 0; k < t3->tops.n; k++)
            if (sift__gx_mark_add(a, t3->tops.v[k]) && !sift__gx_u32_push(&s->tops, t3->tops.v[k])) return SIFT_E_NOMEM;
        s->can_end |= t3->can_end;
        return SIFT_OK;
    }
    if (by_id) return sift__gx_state_copy(s, t3);
    return SIFT_OK;
}

int sift__gx_state_token_check(sift__gx_arena *a, const sift__gx_state *s, uint32_t token, const uint8_t *bytes, size_t n, sift__gx_state *t1,
                         sift__gx_state *t2)
{
    const sift_grammar *g = a->g;
    if (g->has_tokens && s->utf8.need == 0) {
        for (uint32_t k = 0; k < s->tops.n; k++) {
            uint32_t e = g->elems[a->pos[s->tops.v[k]]];
            if ((GX_TYPE(e) == GX_TOKEN && GX_VAL(e) == token) || (GX_TYPE(e) == GX_TOKEN_NOT && GX_VAL(e) != token))
                return 1;
        }
    }
    if (!n) return 0;
    size_t fail;
    sift__gx_state *res;
    int rc = feed_into(a, s, bytes, n, t1, t2, &fail, &res);
    return rc == SIFT_OK ? 1 : rc == SIFT_E_INVAL ? 0 : rc;
}

bool sift__gx_state_token_ok(sift__gx_arena *a, const sift__gx_state *s, uint32_t token, const uint8_t *bytes, size_t n, sift__gx_state *t1,
                       sift__gx_state *t2)
{
    return sift__gx_state_token_check(a, s, token, bytes, n, t1, t2) == 1;
}

/* ---- whole-text matching (public) --------------------------------------------------------- */

sift_grammar_match_result sift_grammar_match(const sift_grammar *g, const char *text, size_t len, size_t *fail_offset)
{
    sift__gx_arena a;
    if (!g || sift__gx_arena_init(&a, g) != SIFT_OK) return SIFT_GRAMMAR_ERROR;
    sift__gx_state s = {0}, t1 = {0}, t2 = {0};
    sift_grammar_match_result result;
    int rc = sift__gx_state_start(&a, &s);
    size_t fail = 0;
    if (rc == SIFT_OK) rc = sift__gx_state_feed(&a, &s, (const uint8_t *)text, len, &t1, &t2, &fail);
    if (rc == SIFT_E_NOMEM || rc == GX_E_STACKS) {
        result = SIFT_GRAMMAR_ERROR;
    } else if (rc != SIFT_OK) {
        result = SIFT_GRAMMAR_REJECTED;
        if (fail_offset) *fail_offset = fail;
    } else if (s.utf8.need && !sift__gx_state_partial_ok(&a, &s)) {
        result = SIFT_GRAMMAR_REJECTED;
        if (fail_offset) *fail_offset = len;
    } else {
        result = sift__gx_state_can_end(&s) ? SIFT_GRAMMAR_COMPLETE : SIFT_GRAMMAR_PREFIX;
    }
    sift__gx_state_free(&s);
    sift__gx_state_free(&t1);
    sift__gx_state_free(&t2);
    sift__gx_arena_free(&a);
    return result;
}

/* ---- the compile-time ambiguity probe ---- */

/* Does top k of s hold symbol sym (a top at a class that has it)? */
static inline bool top_holds(const sift_grammar *g, const sift__gx_arena *a, const sift__gx_state *s, uint32_t k, uint32_t sym)
{
    const uint32_t e = g->elems[a->pos[s->tops.v[k]]];
    return GX_TYPE(e) == GX_CLASS && sift__gx_bit(sift__gx_class_bits(g, GX_VAL(e)), sym);
}

/* A hash of the tops of s that hold symbol sym. */
static uint64_t probe_members(const sift_grammar *g, const sift__gx_arena *a, const sift__gx_state *s, uint32_t sym)
{
    uint64_t h = 0x9E3779B97F4A7C15ULL;
    for (uint32_t k = 0; k < s->tops.n; k++)
        if (top_holds(g, a, s, k, sym)) h = sift__gx_mix64(h ^ k);
    return h;
}

/* Do the same tops of s hold symbols x and y? */
static bool probe_same(const sift_grammar *g, const sift__gx_arena *a, const sift__gx_state *s, uint32_t x, uint32_t y)
{
    for (uint32_t k = 0; k < s->tops.n; k++)
        if (top_holds(g, a, s, k, x) != top_holds(g, a, s, k, y)) return false;
    return true;
}

int sift__gx_stacks_probe(const sift_grammar *g, uint32_t depth, uint64_t work, uint32_t *peak)
{
    sift__gx_arena a;
    sift__gx_state cur = {0}, next = {0}, best = {0};
    uint64_t *syms = NULL;
    *peak = 0;
    if (sift__gx_arena_init(&a, g) != SIFT_OK) return SIFT_E_NOMEM;
    int rc = sift__gx_state_start(&a, &cur);
    if (rc == SIFT_OK && !(syms = sift__gx_calloc(g->sym_words ? g->sym_words : 1, sizeof *syms))) rc = SIFT_E_NOMEM;
    /* the symbols stepped at this depth, one per group of symbols held by the same tops */
    uint64_t *rep_hash = sift__gx_malloc(((size_t)g->n_syms + 1) * sizeof *rep_hash);
    uint32_t *rep_sym = sift__gx_malloc(((size_t)g->n_syms + 1) * sizeof *rep_sym);
    uint32_t n_rep = 0;
    if (!rep_hash || !rep_sym) rc = SIFT_E_NOMEM;
    *peak = cur.tops.n;
    for (uint32_t d = 0; rc == SIFT_OK && d < depth && cur.tops.n > 0 && work > 0; d++) {
        /* the symbols some top can match; each stands for its first code point */
        memset(syms, 0, (size_t)g->sym_words * sizeof *syms);
        for (uint32_t k = 0; k < cur.tops.n; k++) {
            const uint32_t e = g->elems[a.pos[cur.tops.v[k]]];
            if (GX_TYPE(e) != GX_CLASS) continue;
            const uint64_t *bits = sift__gx_class_bits(g, GX_VAL(e));
            for (uint32_t w = 0; w < g->sym_words; w++) syms[w] |= bits[w];
        }
        best.tops.n = 0;
        n_rep = 0;
        for (uint32_t w = 0; rc == SIFT_OK && w < g->sym_words; w++)
            for (uint64_t m = syms[w]; m && rc == SIFT_OK; m &= m - 1) {
                const uint32_t s = w * 64 + (uint32_t)__builtin_ctzll(m);
                const uint32_t cp = g->sym_lo[s];
                if (cp >= 0xD800 && cp < 0xE000) continue; /* no surrogate is a character */
                work = work > cur.tops.n ? work - cur.tops.n : 0;
                /* A step keeps the tops whose class holds the character and nothing else:
                 * symbols held by the same tops lead to the same successor. Only the first
                 * of each such group is stepped (the same greedy choice, the same peak); the
                 * others are charged above as before, so the work bound cuts where it did.
                 * JSON grammars: a string's class holds most symbols, ~60 steps became ~5. */
                const uint64_t h = probe_members(g, &a, &cur, s);
                bool seen = false;
                for (uint32_t q = 0; q < n_rep && !seen; q++)
                    seen = rep_hash[q] == h && probe_same(g, &a, &cur, s, rep_sym[q]);
                if (!seen) {
                    rep_hash[n_rep] = h;
                    rep_sym[n_rep++] = s;
                    rc = sift__gx_state_step(&a, &cur, cp, &next);
                    if (next.tops.n > *peak) *peak = next.tops.n;
                    if (rc == SIFT_OK && next.tops.n > best.tops.n) rc = sift__gx_state_copy(&best, &next);
                }
                if (work == 0) break;
            }
        sift__gx_state swap = cur; /* the most ambiguous successor goes on */
        cur = best;
        best = swap;
    }
    sift__gx_free(syms);
    sift__gx_free(rep_hash);
    sift__gx_free(rep_sym);
    sift__gx_state_free(&cur);
    sift__gx_state_free(&next);
    sift__gx_state_free(&best);
    sift__gx_arena_free(&a);
    return rc;
}
