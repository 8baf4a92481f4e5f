/*
 * value.c - the template engine's values: arena, strings, lists, dicts, Python's str()/repr(),
 * json.dumps and JSON input.
 *
 * Why Python's rules: a chat template is rendered by jinja2, so `{{ x }}` prints what
 * Python's str(x) prints (None, True, 1.0, ['a', 'b'], {'k': 1}) and `tojson` prints what
 * json.dumps prints (', ' and ': ' separators, floats as repr, non-ASCII kept). JSON input
 * keeps integers and floats apart (1 and 1.0 print differently), which is why the context is
 * read by this file's own parser rather than through doubles.
 */
#include <limits.h>
#include <stdatomic.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/tpl.h"

#define SIFT_STR_(x) #x
#define SIFT_STR(x) SIFT_STR_(x)

struct tpl_chunk { tpl_chunk *next; size_t size, used; max_align_t data[]; };

/* The memory budget every render of a server shares: each arena chunk is reserved here before
 * it is malloc'd and given back when the arena is freed, so N renders at once use at most
 * `limit` bytes together rather than N times the per-render limit. */
struct sift_template_pool { _Atomic size_t used; size_t limit; };

sift_template_pool *sift_template_pool_new(size_t max_bytes)
{
    sift_template_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    atomic_init(&p->used, 0);
    p->limit = max_bytes;
    return p;
}

void sift_template_pool_free(sift_template_pool *p) { free(p); }

size_t sift_template_pool_used(const sift_template_pool *p)
{
    return p ? atomic_load(&((sift_template_pool *)p)->used) : 0;
}

static bool pool_reserve(sift_template_pool *p, size_t n)
{
    size_t u = atomic_load(&p->used);
    do {
        if (n > p->limit || u > p->limit - n) return false;
    } while (!atomic_compare_exchange_weak(&p->used, &u, u + n));
    return true;
}

void *sift__tpl_alloc(tpl_arena *a, tpl_fail *f, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (n == 0) n = 16;
    tpl_chunk *c = a->head;
    if (!c || c->size - c->used < n) {
        size_t size = n > 65536 ? n : 65536;
        if (n > a->limit || a->used + size + sizeof *c > a->limit)
            sift__tpl_fail(f, SIFT_E_NOMEM, "template memory limit (%zu bytes) exceeded", a->limit);
        if (a->pool && !pool_reserve(a->pool, size + sizeof *c))
            sift__tpl_fail(f, SIFT_E_NOMEM, "the server's template memory budget (%zu bytes, shared by all renders) is spent",
                           a->pool->limit);
        c = malloc(sizeof *c + size);
        if (!c) {
            if (a->pool) atomic_fetch_sub(&a->pool->used, size + sizeof *c);
            sift__tpl_fail(f, SIFT_E_NOMEM, "out of memory");
        }
        c->size = size;
        c->used = 0;
        c->next = a->head;
        a->head = c;
        a->used += size + sizeof *c;
    }
    void *p = (char *)c->data + c->used;
    c->used += n;
    return p;
}

void sift__tpl_arena_free(tpl_arena *a)
{
    tpl_chunk *c = a->head;
    while (c) {
        tpl_chunk *n = c->next;
        free(c);
        c = n;
    }
    if (a->pool) atomic_fetch_sub(&a->pool->used, a->used);
    a->head = NULL;
    a->used = 0;
}

void sift__tpl_fail(tpl_fail *f, sift_status st, const char *fmt, ...)
{
    int k = f->line > 0 ? snprintf(f->msg, sizeof f->msg, "template line %d: ", f->line)
                        : snprintf(f->msg, sizeof f->msg, "template: ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->msg + k, sizeof f->msg - (size_t)k, fmt, ap);
    va_end(ap);
    f->status = st;
    longjmp(f->jb, 1);
}

/* ---- strings, lists, dicts ----------------------------------------------------------------- */
tv sift__tv_str(tpl_mem *m, const char *p, size_t n)
{
    sift__tpl_mem_charge_bytes(m, n);
    tstr *s = sift__tpl_alloc(m->arena, m->fail, sizeof *s + n + 1);
    s->n = n;
    if (n) memcpy(s->p, p, n);
    s->p[n] = 0;
    tv v = {.t = TV_STR};
    v.s = s;
    return v;
}

tv sift__tv_cstr(tpl_mem *m, const char *p) { return sift__tv_str(m, p, strlen(p)); }

tv sift__tv_list(tpl_mem *m, size_t cap)
{
    tlist *l = sift__tpl_alloc(m->arena, m->fail, sizeof *l);
    l->n = 0;
    l->tuple = false;
    l->cap = cap ? cap : 4;
    l->v = sift__tpl_alloc(m->arena, m->fail, l->cap * sizeof(tv));
    tv v = {.t = TV_LIST};
    v.l = l;
    return v;
}

tv sift__tv_dict(tpl_mem *m, size_t cap)
{
    tdict *d = sift__tpl_alloc(m->arena, m->fail, sizeof *d);
    memset(d, 0, sizeof *d);
    d->cap = cap ? cap : 4;
    d->k = sift__tpl_alloc(m->arena, m->fail, d->cap * sizeof(tv));
    d->v = sift__tpl_alloc(m->arena, m->fail, d->cap * sizeof(tv));
    d->h = sift__tpl_alloc(m->arena, m->fail, d->cap * sizeof(uint32_t));
    tv v = {.t = TV_DICT};
    v.d = d;
    return v;
}

void sift__tv_push(tpl_mem *m, tv list, tv item)
{
    tlist *l = list.l;
    if (l->n == l->cap) {
        sift__tpl_mem_charge(m, l->n / 4 + 1);
        tv *nv = sift__tpl_alloc(m->arena, m->fail, 2 * l->cap * sizeof(tv));
        memcpy(nv, l->v, l->n * sizeof(tv));
        l->v = nv;
        l->cap *= 2;
    }
    l->v[l->n++] = item;
}

static uint32_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return (uint32_t)x;
}

static uint32_t hash_bytes(const char *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)p[i]) * 0x100000001b3ULL;
    return mix64(h);
}

/* Equal keys hash alike under Python's == (1, 1.0 and True are one key); lists and dicts,
 * which Python cannot hash, share one hash per type and are told apart by ==. */
static uint32_t key_hash(tpl_mem *m, tv k)
{
    switch (k.t) {
    case TV_STR: sift__tpl_mem_charge_bytes(m, k.s->n); return hash_bytes(k.s->p, k.s->n);
    case TV_BOOL: return mix64((uint64_t)k.b);
    case TV_INT: return mix64((uint64_t)k.i);
    case TV_FLOAT:
        if (k.f >= -9.2e18 && k.f <= 9.2e18 && k.f == (double)(int64_t)k.f) return mix64((uint64_t)(int64_t)k.f);
        {
            uint64_t bits;
            memcpy(&bits, &k.f, sizeof bits);
            return mix64(bits ^ 0x5bd1e995u);
        }
    default: return mix64(0x1000u + (uint64_t)k.t);
    }
}

static void index_put(tdict *d, size_t i)
{
    size_t mask = d->nslots - 1, s = d->h[i] & mask;
    while (d->slots[s]) s = (s + 1) & mask;
    d->slots[s] = (uint32_t)(i + 1);
}

static void index_build(tpl_mem *m, tdict *d, size_t nslots)
{
    sift__tpl_mem_charge(m, nslots / 4 + 1);
    d->slots = sift__tpl_alloc(m->arena, m->fail, nslots * sizeof(uint32_t));
    memset(d->slots, 0, nslots * sizeof(uint32_t));
    d->nslots = nslots;
    for (size_t i = 0; i < d->n; i++) index_put(d, i);
}

static tv *dict_find(tpl_mem *m, const tdict *d, tv key, uint32_t h)
{
    if (!d->slots) {
        for (size_t i = 0; i < d->n; i++)
            if (d->h[i] == h && sift__tv_eq(m, d->k[i], key)) return &d->v[i];
        return NULL;
    }
    size_t mask = d->nslots - 1;
    for (size_t s = h & mask; d->slots[s]; s = (s + 1) & mask) {
        size_t i = d->slots[s] - 1;
        if (d->h[i] == h && sift__tv_eq(m, d->k[i], key)) return &d->v[i];
    }
    return NULL;
}

tv *sift__tv_dict_get(tpl_mem *m, const tdict *d, tv key) { return dict_find(m, d, key, key_hash(m, key)); }

tv *sift__tv_dict_getc(const tdict *d, const char *key)
{
    size_t n = strlen(key);
    const uint32_t h = hash_bytes(key, n);
    if (!d->slots) {
        for (size_t i = 0; i < d->n; i++)
            if (d->h[i] == h && d->k[i].t == TV_STR && d->k[i].s->n == n && memcmp(d->k[i].s->p, key, n) == 0)
                return &d->v[i];
        return NULL;
    }
    size_t mask = d->nslots - 1;
    for (size_t s = h & mask; d->slots[s]; s = (s + 1) & mask) {
        size_t i = d->slots[s] - 1;
        if (d->h[i] == h && d->k[i].t == TV_STR && d->k[i].s->n == n && memcmp(d->k[i].s->p, key, n) == 0)
            return &d->v[i];
    }
    return NULL;
}

void sift__tv_dict_set(tpl_mem *m, tdict *d, tv key, tv val)
{
    const uint32_t h = key_hash(m, key);
    tv *old = dict_find(m, d, key, h);
    if (old) {
        *old = val;
        return;
    }
    if (d->n == d->cap) {
        sift__tpl_mem_charge(m, d->n / 2 + 1);
        tv *nk = sift__tpl_alloc(m->arena, m->fail, 2 * d->cap * sizeof(tv));
        tv *nv = sift__tpl_alloc(m->arena, m->fail, 2 * d->cap * sizeof(tv));
        uint32_t *nh = sift__tpl_alloc(m->arena, m->fail, 2 * d->cap * sizeof(uint32_t));
        memcpy(nk, d->k, d->n * sizeof(tv));
        memcpy(nv, d->v, d->n * sizeof(tv));
        memcpy(nh, d->h, d->n * sizeof(uint32_t));
        d->k = nk;
        d->v = nv;
        d->h = nh;
        d->cap *= 2;
    }
    d->k[d->n] = key;
    d->v[d->n] = val;
    d->h[d->n++] = h;
    if (d->slots && d->n * 4 <= d->nslots * 3) index_put(d, d->n - 1);
    else if (d->n >= TDICT_INDEX_MIN) index_build(m, d, d->nslots ? d->nslots * 2 : 32);
}

/* ---- Python semantics ---------------------------------------------------------------------- */
bool sift__tv_is_num(tv v) { return v.t == TV_INT || v.t == TV_FLOAT || v.t == TV_BOOL; }

double sift__tv_num(tv v)
{
    return v.t == TV_FLOAT ? v.f : v.t == TV_INT ? (double)v.i : v.t == TV_BOOL ? (double)v.b : 0.0;
}

bool sift__tv_truthy(tv v)
{
    switch (v.t) {
    case TV_UNDEF: case TV_NONE: return false;
    case TV_BOOL: return v.b;
    case TV_INT: return v.i != 0;
    case TV_FLOAT: return v.f != 0.0;
    case TV_STR: return v.s->n > 0;
    case TV_LIST: return v.l->n > 0;
    case TV_DICT: return v.d->n > 0;
    default: return true;
    }
}

static bool eq_depth(tpl_mem *m, tv a, tv b, int depth);
bool sift__tv_eq(tpl_mem *m, tv a, tv b) { return eq_depth(m, a, b, 0); }

/* Values built at run time can nest without bound ({% set ns.x = [ns.x] %} in a loop):
 * past 400 levels they compare unequal rather than exhaust the stack. Each element visited
 * is a step, so equal-but-distinct structures that share themselves (a DAG of 2^64 paths)
 * end at the step budget; the same object met on both sides is equal without a visit. */
static bool eq_depth(tpl_mem *m, tv a, tv b, int depth)
{
    if (depth > 400) return false;
    sift__tpl_mem_charge(m, 1);
    if (sift__tv_is_num(a) && sift__tv_is_num(b)) {
        if (a.t != TV_FLOAT && b.t != TV_FLOAT)
            return (a.t == TV_BOOL ? a.b : a.i) == (b.t == TV_BOOL ? b.b : b.i);
        return sift__tv_num(a) == sift__tv_num(b);
    }
    if (a.t != b.t) return false;
    switch (a.t) {
    case TV_UNDEF: case TV_NONE: return true;
    case TV_STR:
        if (a.s->n != b.s->n) return false;
        if (a.s == b.s) return true;
        sift__tpl_mem_charge_bytes(m, a.s->n);
        return memcmp(a.s->p, b.s->p, a.s->n) == 0;
    case TV_LIST:
        if (a.l == b.l) return true;
        if (a.l->n != b.l->n) return false;
        for (size_t i = 0; i < a.l->n; i++)
            if (!eq_depth(m, a.l->v[i], b.l->v[i], depth + 1)) return false;
        return true;
    case TV_DICT:
        if (a.d == b.d) return true;
        if (a.d->n != b.d->n) return false;
        for (size_t i = 0; i < a.d->n; i++) {
            tv *o = dict_find(m, b.d, a.d->k[i], a.d->h[i]);
            if (!o || !eq_depth(m, a.d->v[i], *o, depth + 1)) return false;
        }
        return true;
    default: return a.d == b.d;
    }
}

const char *sift__tv_typename(tv v)
{
    static const char *names[] = {"Undefined", "NoneType", "bool", "int", "float", "str", "list", "dict",
                                  "Namespace", "function", "Macro"};
    return names[v.t];
}

static int cmp_depth(tpl_mem *m, tv a, tv b, int depth);
int sift__tv_cmp(tpl_mem *m, tv a, tv b) { return cmp_depth(m, a, b, 0); }

static int cmp_depth(tpl_mem *m, tv a, tv b, int depth)
{
    if (depth > 400) sift__tpl_fail(m->fail, SIFT_E_INVAL, "RecursionError: values nested too deeply to compare");
    sift__tpl_mem_charge(m, 1);
    if (sift__tv_is_num(a) && sift__tv_is_num(b)) {
        if (a.t != TV_FLOAT && b.t != TV_FLOAT) {
            int64_t x = a.t == TV_BOOL ? a.b : a.i, y = b.t == TV_BOOL ? b.b : b.i;
            return (x > y) - (x < y);
        }
        double x = sift__tv_num(a), y = sift__tv_num(b);
        return (x > y) - (x < y);
    }
    if (a.t == TV_STR && b.t == TV_STR) {
        size_t n = a.s->n < b.s->n ? a.s->n : b.s->n;
        sift__tpl_mem_charge_bytes(m, n);
        int c = memcmp(a.s->p, b.s->p, n);
        if (c) return c;
        return (a.s->n > b.s->n) - (a.s->n < b.s->n);
    }
    if (a.t == TV_LIST && b.t == TV_LIST) {
        if (a.l == b.l) return 0;
        for (size_t i = 0; i < a.l->n && i < b.l->n; i++) {
            if (sift__tv_eq(m, a.l->v[i], b.l->v[i])) continue;
            return cmp_depth(m, a.l->v[i], b.l->v[i], depth + 1);
        }
        return (a.l->n > b.l->n) - (a.l->n < b.l->n);
    }
    sift__tpl_fail(m->fail, SIFT_E_INVAL, "TypeError: '<' not supported between instances of '%s' and '%s'",
                   sift__tv_typename(a), sift__tv_typename(b));
}

/* ---- buffers -------------------------------------------------------------------------------- */
void sift__tbuf_put(tpl_mem *m, tbuf *b, const char *p, size_t n)
{
    if (n == 0) return;
    if (b->max && b->n + n > b->max)
        sift__tpl_fail(m->fail, SIFT_E_INVAL, "output longer than the limit (%zu bytes)", b->max);
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        sift__tpl_mem_charge_bytes(m, cap);
        char *np = sift__tpl_alloc(m->arena, m->fail, cap);
        if (b->n) memcpy(np, b->p, b->n);
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
    b->p[b->n] = 0;
}

void sift__tbuf_puts(tpl_mem *m, tbuf *b, const char *s) { sift__tbuf_put(m, b, s, strlen(s)); }

tv sift__tbuf_value(tpl_mem *m, tbuf *b) { return sift__tv_str(m, b->p ? b->p : "", b->n); }

/* ---- str() and repr() ------------------------------------------------------------------------ */
/* Python's float repr: the shortest digits that read back to the same double, in fixed
 * notation for exponents -4..15 and scientific otherwise ('1e-05', '1e+16', '100.0'). */
void sift__tv_float_repr(double f, char out[40])
{
    if (isnan(f)) { strcpy(out, "nan"); return; }
    if (isinf(f)) { strcpy(out, f < 0 ? "-inf" : "inf"); return; }
    if (f == 0) { strcpy(out, signbit(f) ? "-0.0" : "0.0"); return; }
    char e[40];
    int prec;
    for (prec = 0; prec < 17; prec++) {
        snprintf(e, sizeof e, "%.*e", prec, f);
        if (strtod(e, NULL) == f) break;
    }
    /* e = [-]d[.ddd]e[+-]XX */
    char digits[24];
    int nd = 0, neg = e[0] == '-';
    const char *p = e + neg;
    for (; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9') digits[nd++] = *p;
    int exp = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    char *o = out;
    if (neg) *o++ = '-';
    if (exp < -4 || exp >= 16) {
        *o++ = digits[0];
        if (nd > 1) {
            *o++ = '.';
            for (int i = 1; i < nd; i++) *o++ = digits[i];
        }
        sprintf(o, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
        return;
    }
    if (exp < 0) {
        *o++ = '0';
        *o++ = '.';
        for (int i = 0; i < -exp - 1; i++) *o++ = '0';
        for (int i = 0; i < nd; i++) *o++ = digits[i];
    } else {
        for (int i = 0; i <= exp; i++) *o++ = i < nd ? digits[i] : '0';
        *o++ = '.';
        if (nd > exp + 1)
            for (int i = exp + 1; i < nd; i++) *o++ = digits[i];
        else
            *o++ = '0';
    }
    *o = 0;
}

static void write_str_repr(tpl_mem *m, tbuf *b, const tstr *s)
{
    bool sq = memchr(s->p, '\'', s->n) != NULL, dq = memchr(s->p, '"', s->n) != NULL;
    char q = sq && !dq ? '"' : '\'';
    sift__tbuf_put(m, b, &q, 1);
    for (size_t i = 0; i < s->n; i++) {
        unsigned char c = (unsigned char)s->p[i];
        char tmp[8];
        if (c == '\\') sift__tbuf_put(m, b, "\\\\", 2);
        else if (c == (unsigned char)q) { tmp[0] = '\\'; tmp[1] = q; sift__tbuf_put(m, b, tmp, 2); }
        else if (c == '\n') sift__tbuf_put(m, b, "\\n", 2);
        else if (c == '\r') sift__tbuf_put(m, b, "\\r", 2);
        else if (c == '\t') sift__tbuf_put(m, b, "\\t", 2);
        else if (c < 0x20 || c == 0x7f) { snprintf(tmp, sizeof tmp, "\\x%02x", c); sift__tbuf_put(m, b, tmp, 4); }
        else sift__tbuf_put(m, b, (const char *)&s->p[i], 1);
    }
    sift__tbuf_put(m, b, &q, 1);
}

static void write_any(tpl_mem *m, tbuf *b, tv v, bool repr, int depth)
{
    char tmp[48];
    if (depth > 200) sift__tpl_fail(m->fail, SIFT_E_INVAL, "RecursionError: value nested too deeply");
    switch (v.t) {
    case TV_UNDEF: if (repr) sift__tbuf_puts(m, b, "Undefined"); return;
    case TV_NONE: sift__tbuf_puts(m, b, "None"); return;
    case TV_BOOL: sift__tbuf_puts(m, b, v.b ? "True" : "False"); return;
    case TV_INT: snprintf(tmp, sizeof tmp, "%lld", (long long)v.i); sift__tbuf_puts(m, b, tmp); return;
    case TV_FLOAT: sift__tv_float_repr(v.f, tmp); sift__tbuf_puts(m, b, tmp); return;
    case TV_STR:
        if (repr) write_str_repr(m, b, v.s);
        else sift__tbuf_put(m, b, v.s->p, v.s->n);
        return;
    case TV_LIST:
        sift__tbuf_put(m, b, v.l->tuple ? "(" : "[", 1);
        for (size_t i = 0; i < v.l->n; i++) {
            if (i) sift__tbuf_put(m, b, ", ", 2);
            write_any(m, b, v.l->v[i], true, depth + 1);
        }
        if (v.l->tuple && v.l->n == 1) sift__tbuf_put(m, b, ",", 1);
        sift__tbuf_put(m, b, v.l->tuple ? ")" : "]", 1);
        return;
    case TV_DICT: case TV_NS:
        if (v.t == TV_NS) sift__tbuf_puts(m, b, "<Namespace ");
        sift__tbuf_put(m, b, "{", 1);
        for (size_t i = 0; i < v.d->n; i++) {
            if (i) sift__tbuf_put(m, b, ", ", 2);
            write_any(m, b, v.d->k[i], true, depth + 1);
            sift__tbuf_put(m, b, ": ", 2);
            write_any(m, b, v.d->v[i], true, depth + 1);
        }
        sift__tbuf_put(m, b, "}", 1);
        if (v.t == TV_NS) sift__tbuf_puts(m, b, ">");
        return;
    case TV_FUNC: case TV_MACRO:
        snprintf(tmp, sizeof tmp, "<function %.30s>", v.fn->name ? v.fn->name : "?");
        sift__tbuf_puts(m, b, tmp);
        return;
    }
}

void sift__tv_write_str(tpl_mem *m, tbuf *b, tv v) { write_any(m, b, v, false, 0); }
void sift__tv_write_repr(tpl_mem *m, tbuf *b, tv v) { write_any(m, b, v, true, 0); }

tv sift__tv_to_str(tpl_mem *m, tv v)
{
    if (v.t == TV_STR) return v;
    tbuf b = {0};
    write_any(m, &b, v, false, 0);
    return sift__tbuf_value(m, &b);
}

/* ---- UTF-8 ------------------------------------------------------------------------------------ */
size_t sift__utf8_len(tpl_mem *m, const char *p, size_t n)
{
    sift__tpl_mem_charge_bytes(m, n);
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        if (((unsigned char)p[i] & 0xC0) != 0x80) c++;
    return c;
}

size_t sift__utf8_offset(tpl_mem *m, const char *p, size_t n, size_t ci)
{
    size_t c = 0, i = 0;
    for (; i < n; i++) {
        if (((unsigned char)p[i] & 0xC0) != 0x80) {
            if (c == ci) break;
            c++;
        }
    }
    sift__tpl_mem_charge_bytes(m, i);
    return i;
}

static uint32_t utf8_decode(const unsigned char *p, size_t n, size_t *len)
{
    uint32_t c = p[0];
    size_t k = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    if (k > n || c < 0xC0) k = 1;
    *len = k;
    if (k == 1) return c;
    c &= 0xFF >> (k + 1);
    for (size_t i = 1; i < k; i++) c = (c << 6) | (p[i] & 0x3F);
    return c;
}

static size_t utf8_encode(uint32_t c, char *o)
{
    if (c < 0x80) { o[0] = (char)c; return 1; }
    if (c < 0x800) { o[0] = (char)(0xC0 | c >> 6); o[1] = (char)(0x80 | (c & 0x3F)); return 2; }
    if (c < 0x10000) {
        o[0] = (char)(0xE0 | c >> 12); o[1] = (char)(0x80 | ((c >> 6) & 0x3F)); o[2] = (char)(0x80 | (c & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | c >> 18); o[1] = (char)(0x80 | ((c >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((c >> 6) & 0x3F)); o[3] = (char)(0x80 | (c & 0x3F));
    return 4;
}

/* ---- json.dumps -------------------------------------------------------------------------------- */
static void json_string(tpl_mem *m, tbuf *b, const tstr *s, bool ascii)
{
    sift__tbuf_put(m, b, "\"", 1);
    size_t i = 0;
    while (i < s->n) {
        unsigned char c = (unsigned char)s->p[i];
        char tmp[16];
        if (c == '"') sift__tbuf_put(m, b, "\\\"", 2);
        else if (c == '\\') sift__tbuf_put(m, b, "\\\\", 2);
        else if (c == '\n') sift__tbuf_put(m, b, "\\n", 2);
        else if (c == '\r') sift__tbuf_put(m, b, "\\r", 2);
        else if (c == '\t') sift__tbuf_put(m, b, "\\t", 2);
        else if (c == '\b') sift__tbuf_put(m, b, "\\b", 2);
        else if (c == '\f') sift__tbuf_put(m, b, "\\f", 2);
        else if (c < 0x20 || (ascii && c == 0x7f)) {
            snprintf(tmp, sizeof tmp, "\\u%04x", c);
            sift__tbuf_put(m, b, tmp, 6);
        } else if (c >= 0x80 && ascii) {
            size_t k;
            uint32_t cp = utf8_decode((const unsigned char *)s->p + i, s->n - i, &k);
            if (cp >= 0x10000) {
                cp -= 0x10000;
                snprintf(tmp, sizeof tmp, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
                sift__tbuf_put(m, b, tmp, 12);
            } else {
                snprintf(tmp, sizeof tmp, "\\u%04x", cp);
                sift__tbuf_put(m, b, tmp, 6);
            }
            i += k;
            continue;
        } else {
            sift__tbuf_put(m, b, s->p + i, 1);
        }
        i++;
    }
    sift__tbuf_put(m, b, "\"", 1);
}

static void json_newline(tpl_mem *m, tbuf *b, const tjson_opts *o, int level)
{
    sift__tbuf_put(m, b, "\n", 1);
    for (int i = 0; i < o->indent * level; i++) sift__tbuf_put(m, b, " ", 1);
}

static int key_order(tpl_mem *m, const tdict *d, size_t *idx)
{
    /* insertion sort of indices by key (json.dumps sort_keys) */
    for (size_t i = 0; i < d->n; i++) idx[i] = i;
    for (size_t i = 1; i < d->n; i++) {
        size_t x = idx[i], j = i;
        while (j > 0 && sift__tv_cmp(m, d->k[idx[j - 1]], d->k[x]) > 0) {
            idx[j] = idx[j - 1];
            j--;
        }
        idx[j] = x;
    }
    return 0;
}

void sift__tv_write_json(tpl_mem *m, tbuf *b, tv v, const tjson_opts *o, int depth)
{
    char tmp[48];
    if (depth > 200) sift__tpl_fail(m->fail, SIFT_E_INVAL, "RecursionError: value nested too deeply for tojson");
    switch (v.t) {
    case TV_NONE: sift__tbuf_puts(m, b, "null"); return;
    case TV_BOOL: sift__tbuf_puts(m, b, v.b ? "true" : "false"); return;
    case TV_INT: snprintf(tmp, sizeof tmp, "%lld", (long long)v.i); sift__tbuf_puts(m, b, tmp); return;
    case TV_FLOAT:
        if (isnan(v.f)) sift__tbuf_puts(m, b, "NaN");
        else if (isinf(v.f)) sift__tbuf_puts(m, b, v.f < 0 ? "-Infinity" : "Infinity");
        else { sift__tv_float_repr(v.f, tmp); sift__tbuf_puts(m, b, tmp); }
        return;
    case TV_STR: json_string(m, b, v.s, o->ensure_ascii); return;
    case TV_LIST:
        if (v.l->n == 0) { sift__tbuf_puts(m, b, "[]"); return; }
        sift__tbuf_put(m, b, "[", 1);
        for (size_t i = 0; i < v.l->n; i++) {
            if (i) sift__tbuf_puts(m, b, o->item_sep);
            if (o->indent >= 0) json_newline(m, b, o, depth + 1);
            sift__tv_write_json(m, b, v.l->v[i], o, depth + 1);
        }
        if (o->indent >= 0) json_newline(m, b, o, depth);
        sift__tbuf_put(m, b, "]", 1);
        return;
    case TV_DICT: {
        if (v.d->n == 0) { sift__tbuf_puts(m, b, "{}"); return; }
        size_t *idx = sift__tpl_alloc(m->arena, m->fail, v.d->n * sizeof *idx);
        if (o->sort_keys) key_order(m, v.d, idx);
        else for (size_t i = 0; i < v.d->n; i++) idx[i] = i;
        sift__tbuf_put(m, b, "{", 1);
        for (size_t j = 0; j < v.d->n; j++) {
            size_t i = idx[j];
            if (j) sift__tbuf_puts(m, b, o->item_sep);
            if (o->indent >= 0) json_newline(m, b, o, depth + 1);
            tv k = v.d->k[i];
            if (k.t == TV_STR) json_string(m, b, k.s, o->ensure_ascii);
            else if (k.t == TV_INT || k.t == TV_FLOAT || k.t == TV_BOOL || k.t == TV_NONE) {
                tbuf kb = {0};
                sift__tv_write_json(m, &kb, k, o, depth + 1);
                tv ks = sift__tbuf_value(m, &kb);
                json_string(m, b, ks.s, o->ensure_ascii);
            } else
                sift__tpl_fail(m->fail, SIFT_E_INVAL, "TypeError: keys must be str, int, float, bool or None, not %s",
                               sift__tv_typename(k));
            sift__tbuf_puts(m, b, o->key_sep);
            sift__tv_write_json(m, b, v.d->v[i], o, depth + 1);
        }
        if (o->indent >= 0) json_newline(m, b, o, depth);
        sift__tbuf_put(m, b, "}", 1);
        return;
    }
    default:
        sift__tpl_fail(m->fail, SIFT_E_INVAL, "TypeError: Object of type %s is not JSON serializable",
                       sift__tv_typename(v));
    }
}

/* ---- JSON input -------------------------------------------------------------------------------- */
typedef struct jp { tpl_mem *m; const char *start, *p, *end; int depth; } jp;

static _Noreturn void jfail(jp *j, const char *what)
{
    sift__tpl_fail(j->m->fail, SIFT_E_PARSE, "context JSON: %s at byte %td", what, j->p - j->start);
}

static void jws(jp *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r')) j->p++;
}

static int hex4(jp *j)
{
    if (j->end - j->p < 4) jfail(j, "short \\u escape");
    int v = 0;
    for (int i = 0; i < 4; i++) {
        char c = *j->p++;
        v <<= 4;
        if (c >= '0' && c <= '9') v |= c - '0';
        else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
        else jfail(j, "bad \\u escape");
    }
    return v;
}

static tv jstring(jp *j)
{
    tbuf b = {0};
    j->p++; /* opening quote */
    for (;;) {
        if (j->p >= j->end) jfail(j, "unterminated string");
        char c = *j->p++;
        if (c == '"') break;
        if ((unsigned char)c < 0x20) jfail(j, "control character in string");
        if (c != '\\') { sift__tbuf_put(j->m, &b, &c, 1); continue; }
        if (j->p >= j->end) jfail(j, "unterminated escape");
        char e = *j->p++, o[4];
        switch (e) {
        case '"': case '\\': case '/': sift__tbuf_put(j->m, &b, &e, 1); break;
        case 'n': sift__tbuf_put(j->m, &b, "\n", 1); break;
        case 't': sift__tbuf_put(j->m, &b, "\t", 1); break;
        case 'r': sift__tbuf_put(j->m, &b, "\r", 1); break;
        case 'b': sift__tbuf_put(j->m, &b, "\b", 1); break;
        case 'f': sift__tbuf_put(j->m, &b, "\f", 1); break;
        case 'u': {
            uint32_t cp = (uint32_t)hex4(j);
            if (cp >= 0xD800 && cp < 0xDC00 && j->end - j->p >= 6 && j->p[0] == '\\' && j->p[1] == 'u') {
                const char *save = j->p;
                j->p += 2;
                uint32_t lo = (uint32_t)hex4(j);
                if (lo >= 0xDC00 && lo < 0xE000) cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                else j->p = save;
            }
            if (cp >= 0xD800 && cp < 0xE000) cp = 0xFFFD; /* a lone surrogate has no UTF-8 form */
            sift__tbuf_put(j->m, &b, o, utf8_encode(cp, o));
            break;
        }
        default: jfail(j, "bad escape");
        }
    }
    return sift__tbuf_value(j->m, &b);
}

static tv jvalue(jp *j)
{
    jws(j);
    if (j->p >= j->end) jfail(j, "unexpected end");
    if (++j->depth > 500) jfail(j, "nested too deeply");
    tv r;
    char c = *j->p;
    if (c == '{') {
        r = sift__tv_dict(j->m, 4);
        j->p++;
        jws(j);
        if (j->p < j->end && *j->p == '}') j->p++;
        else
            for (;;) {
                jws(j);
                if (j->p >= j->end || *j->p != '"') jfail(j, "expected a key");
                tv k = jstring(j);
                jws(j);
                if (j->p >= j->end || *j->p != ':') jfail(j, "expected ':'");
                j->p++;
                tv v = jvalue(j);
                sift__tv_dict_set(j->m, r.d, k, v);
                if (r.d->n > SIFT_TEMPLATE_MAX_KEYS) jfail(j, "an object has more than " SIFT_STR(SIFT_TEMPLATE_MAX_KEYS) " keys");
                jws(j);
                if (j->p < j->end && *j->p == ',') { j->p++; continue; }
                if (j->p < j->end && *j->p == '}') { j->p++; break; }
                jfail(j, "expected ',' or '}'");
            }
    } else if (c == '[') {
        r = sift__tv_list(j->m, 4);
        j->p++;
        jws(j);
        if (j->p < j->end && *j->p == ']') j->p++;
        else
            for (;;) {
                sift__tv_push(j->m, r, jvalue(j));
                jws(j);
                if (j->p < j->end && *j->p == ',') { j->p++; continue; }
                if (j->p < j->end && *j->p == ']') { j->p++; break; }
                jfail(j, "expected ',' or ']'");
            }
    } else if (c == '"') {
        r = jstring(j);
    } else if (j->end - j->p >= 4 && memcmp(j->p, "true", 4) == 0) {
        j->p += 4; r = tv_bool(true);
    } else if (j->end - j->p >= 5 && memcmp(j->p, "false", 5) == 0) {
        j->p += 5; r = tv_bool(false);
    } else if (j->end - j->p >= 4 && memcmp(j->p, "null", 4) == 0) {
        j->p += 4; r = tv_none();
    } else if (c == '-' || (c >= '0' && c <= '9')) {
        const char *s = j->p;
        bool isf = false;
        if (*j->p == '-') j->p++;
        while (j->p < j->end && ((*j->p >= '0' && *j->p <= '9') || *j->p == '.' || *j->p == 'e' || *j->p == 'E' ||
                                 *j->p == '+' || *j->p == '-')) {
            if (*j->p == '.' || *j->p == 'e' || *j->p == 'E') isf = true;
            j->p++;
        }
        char tmp[64];
        size_t n = (size_t)(j->p - s);
        if (n >= sizeof tmp) jfail(j, "number too long");
        memcpy(tmp, s, n);
        tmp[n] = 0;
        char *e;
        if (!isf) {
            long long v = strtoll(tmp, &e, 10);
            if (*e) jfail(j, "bad number");
            r = tv_int(v);
            if (v == LLONG_MAX || v == LLONG_MIN) r = tv_float(strtod(tmp, NULL));
        } else {
            double d = strtod(tmp, &e);
            if (*e) jfail(j, "bad number");
            r = tv_float(d);
        }
    } else {
        jfail(j, "unexpected character");
    }
    j->depth--;
    return r;
}

tv sift__tv_from_json(tpl_mem *m, const char *p, size_t n)
{
    jp j = {m, p, p, p + n, 0};
    tv v = jvalue(&j);
    jws(&j);
    if (j.p != j.end) jfail(&j, "trailing characters");
    return v;
}
