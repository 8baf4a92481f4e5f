/*
 * render.c - the tree-walking renderer and the public sift_template_* API.
 *
 * Scoping follows jinja2 where templates can tell: a `for` body, a macro call and a call
 * block get their own scope (a `set` inside a loop does not leak out, which is why templates
 * use namespace()); `if` does not. Loop controls travel as the return value of exec().
 *
 * Every statement and expression node costs one step; steps, output bytes, arena bytes and
 * call depth are bounded by the options, so a hostile template ends with an error message.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "template/tpl.h"

struct tscope {
    tscope *parent;
    int n, cap;
    const char **names;
    tv *vals;
};

struct sift_template { tpl_parsed parsed; };

typedef enum { FLOW_NORMAL, FLOW_BREAK, FLOW_CONTINUE } flow;

static tv eval(tpl_render *r, tscope *s, const tnode *n);
static flow exec(tpl_render *r, tscope *s, const tnode *n);

static _Noreturn void rfail(tpl_render *r, const char *fmt, const char *a, const char *b)
{
    sift__tpl_fail(&r->fail, SIFT_E_INVAL, fmt, a ? a : "", b ? b : "");
}

/* ---- scopes ------------------------------------------------------------------------------- */
static tscope *scope_new(tpl_render *r, tscope *parent)
{
    tscope *s = sift__tpl_alloc(&r->arena, &r->fail, sizeof *s);
    memset(s, 0, sizeof *s);
    s->parent = parent;
    return s;
}

void sift__tpl_scope_set(tpl_render *r, tscope *s, const char *name, tv v)
{
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->names[i], name)) {
            s->vals[i] = v;
            return;
        }
    if (s->n == s->cap) {
        int cap = s->cap ? s->cap * 2 : 8;
        const char **nn = sift__tpl_alloc(&r->arena, &r->fail, (size_t)cap * sizeof *nn);
        tv *nv = sift__tpl_alloc(&r->arena, &r->fail, (size_t)cap * sizeof *nv);
        if (s->n) {
            memcpy(nn, s->names, (size_t)s->n * sizeof *nn);
            memcpy(nv, s->vals, (size_t)s->n * sizeof *nv);
        }
        s->names = nn;
        s->vals = nv;
        s->cap = cap;
    }
    s->names[s->n] = name;
    s->vals[s->n++] = v;
}

static tv *scope_find(const tpl_render *r, tscope *s, const char *name)
{
    for (; s; s = s->parent) {
        if (s == r->globals && r->ctx) { /* the context's variables, hashed: it may have many */
            tv *v = sift__tv_dict_getc(r->ctx, name);
            if (v) return v;
        }
        for (int i = s->n - 1; i >= 0; i--)
            if (!strcmp(s->names[i], name)) return &s->vals[i];
    }
    return NULL;
}

/* The clock and the abort callback are looked at every POLL_STEPS steps: often enough that a
 * deadline or a cancel ends a render within a millisecond or so, rarely enough to cost nothing. */
#define POLL_STEPS 4096

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void __attribute__((noinline)) poll_limits(tpl_render *r)
{
    if (r->steps > r->max_steps)
        sift__tpl_fail(&r->fail, SIFT_E_INVAL, "template ran more than %llu steps", (unsigned long long)r->max_steps);
    r->next_poll = r->steps + POLL_STEPS < r->max_steps + 1 ? r->steps + POLL_STEPS : r->max_steps + 1;
    if (r->abort_cb && r->abort_cb(r->abort_data))
        sift__tpl_fail(&r->fail, SIFT_E_STATE, "render abandoned (its request was cancelled)");
    if (r->deadline_ns && now_ns() > r->deadline_ns)
        sift__tpl_fail(&r->fail, SIFT_E_INVAL, "template ran longer than %u ms", (unsigned)r->max_time_ms);
}

static void step(tpl_render *r, const tnode *n)
{
    r->fail.line = n->line;
    if (++r->steps >= r->next_poll) poll_limits(r);
}

void sift__tpl_charge(tpl_render *r, uint64_t k)
{
    r->steps += k;
    if (r->steps >= r->next_poll) poll_limits(r);
}

void sift__tpl_mem_charge(tpl_mem *m, uint64_t k)
{
    if (m->r) sift__tpl_charge(m->r, k);
}

tv sift__tpl_undefined_error(tpl_render *r, tv u)
{
    sift__tpl_fail(&r->fail, SIFT_E_INVAL, "UndefinedError: %s", u.why ? u.why : "undefined value");
}

/* ---- expressions --------------------------------------------------------------------------- */
static tv eval_args(tpl_render *r, tscope *s, const tnode *call, targs *a, int first_extra)
{
    /* first_extra: slots reserved before the positional arguments (a filter's input) */
    int np = first_extra, nk = 0;
    for (int i = 0; i < call->nkids; i++) call->kids[i]->kind == N_KWARG ? nk++ : np++;
    a->pos = sift__tpl_alloc(&r->arena, &r->fail, (size_t)(np + 1) * sizeof(tv));
    a->kw = sift__tpl_alloc(&r->arena, &r->fail, (size_t)(nk + 1) * sizeof(tv));
    a->kname = sift__tpl_alloc(&r->arena, &r->fail, (size_t)(nk + 1) * sizeof(char *));
    a->np = first_extra;
    a->nk = 0;
    for (int i = 0; i < call->nkids; i++) {
        const tnode *k = call->kids[i];
        if (k->kind == N_KWARG) {
            a->kname[a->nk] = k->name;
            a->kw[a->nk++] = eval(r, s, k->a);
        } else {
            a->pos[a->np++] = eval(r, s, k);
        }
    }
    return tv_none();
}

static int64_t checked_int(tpl_render *r, __int128 v)
{
    if (v > INT64_MAX || v < INT64_MIN) rfail(r, "OverflowError: integer result out of range%s%s", NULL, NULL);
    return (int64_t)v;
}

static tv arith(tpl_render *r, int op, tv a, tv b)
{
    tpl_mem *m = &r->m;
    if (op == OP_CONCAT) {
        tbuf buf = {0};
        sift__tv_write_str(m, &buf, a);
        sift__tv_write_str(m, &buf, b);
        return sift__tbuf_value(m, &buf);
    }
    if (a.t == TV_UNDEF) sift__tpl_undefined_error(r, a);
    if (b.t == TV_UNDEF) sift__tpl_undefined_error(r, b);
    if (op == OP_ADD && a.t == TV_STR && b.t == TV_STR) {
        tbuf buf = {0};
        sift__tbuf_put(m, &buf, a.s->p, a.s->n);
        sift__tbuf_put(m, &buf, b.s->p, b.s->n);
        return sift__tbuf_value(m, &buf);
    }
    if (op == OP_MOD && a.t == TV_STR) return sift__tpl_percent(r, a, b);
    if (op == OP_ADD && a.t == TV_LIST && b.t == TV_LIST) {
        tv l = sift__tv_list(m, a.l->n + b.l->n + 1);
        for (size_t i = 0; i < a.l->n; i++) sift__tv_push(m, l, a.l->v[i]);
        for (size_t i = 0; i < b.l->n; i++) sift__tv_push(m, l, b.l->v[i]);
        return l;
    }
    if (op == OP_MUL && ((a.t == TV_STR || a.t == TV_LIST) && (b.t == TV_INT || b.t == TV_BOOL))) {
        int64_t k = b.t == TV_BOOL ? b.b : b.i;
        size_t unit = a.t == TV_STR ? a.s->n : a.l->n;
        if (k < 0 || unit == 0) k = 0; /* '' * 10**9 is '' at once, not a billion empty copies */
        if (k > 0 && (uint64_t)k > (uint64_t)(r->max_output / unit + 1))
            rfail(r, "repetition longer than the output limit%s%s", NULL, NULL);
        sift__tpl_charge(r, (uint64_t)k);
        if (a.t == TV_STR) { /* built at its size: a 16 MiB result holds 16 MiB, not a doubling buffer and a copy */
            const size_t n = unit * (size_t)k;
            sift__tpl_mem_charge_bytes(m, n);
            tstr *t = sift__tpl_alloc(&r->arena, &r->fail, sizeof *t + n + 1);
            t->n = n;
            for (int64_t i = 0; i < k; i++) memcpy(t->p + (size_t)i * unit, a.s->p, unit);
            t->p[n] = 0;
            tv v = {.t = TV_STR};
            v.s = t;
            return v;
        }
        tv l = sift__tv_list(m, 4);
        for (int64_t i = 0; i < k; i++)
            for (size_t j = 0; j < a.l->n; j++) sift__tv_push(m, l, a.l->v[j]);
        return l;
    }
    if (!sift__tv_is_num(a) || !sift__tv_is_num(b)) {
        static const char *sym[] = {"", "+", "-", "*", "/", "//", "%", "**"};
        char tmp[160];
        snprintf(tmp, sizeof tmp, "unsupported operand type(s) for %s: '%s' and '%s'", sym[op <= OP_POW ? op : 0],
                 sift__tv_typename(a), sift__tv_typename(b));
        if (op == OP_ADD && a.t == TV_STR)
            snprintf(tmp, sizeof tmp, "can only concatenate str (not \"%s\") to str", sift__tv_typename(b));
        else if (op == OP_ADD && a.t == TV_LIST)
            snprintf(tmp, sizeof tmp, "can only concatenate list (not \"%s\") to list", sift__tv_typename(b));
        rfail(r, "TypeError: %s%s", tmp, NULL);
    }
    bool ints = a.t != TV_FLOAT && b.t != TV_FLOAT;
    int64_t x = a.t == TV_BOOL ? a.b : a.i, y = b.t == TV_BOOL ? b.b : b.i;
    double fx = sift__tv_num(a), fy = sift__tv_num(b);
    switch (op) {
    case OP_ADD: return ints ? tv_int(checked_int(r, (__int128)x + y)) : tv_float(fx + fy);
    case OP_SUB: return ints ? tv_int(checked_int(r, (__int128)x - y)) : tv_float(fx - fy);
    case OP_MUL: return ints ? tv_int(checked_int(r, (__int128)x * y)) : tv_float(fx * fy);
    case OP_DIV:
        if (fy == 0) rfail(r, "ZeroDivisionError: division by zero%s%s", NULL, NULL);
        return tv_float(fx / fy);
    case OP_FLOORDIV:
    case OP_MOD:
        if (ints) {
            if (y == 0) rfail(r, "ZeroDivisionError: integer division or modulo by zero%s%s", NULL, NULL);
            if (x == INT64_MIN && y == -1) rfail(r, "OverflowError: integer result out of range%s%s", NULL, NULL);
            int64_t q = x / y, rem = x % y;
            if (rem != 0 && ((rem < 0) != (y < 0))) { q--; rem += y; }
            return tv_int(op == OP_MOD ? rem : q);
        } else {
            if (fy == 0) rfail(r, "ZeroDivisionError: float division by zero%s%s", NULL, NULL);
            double q = floor(fx / fy), rem = fmod(fx, fy);
            if (rem != 0 && ((rem < 0) != (fy < 0))) rem += fy;
            return tv_float(op == OP_MOD ? rem : q);
        }
    case OP_POW:
        if (ints && y >= 0) {
            __int128 acc = 1;
            for (int64_t i = 0; i < y; i++) {
                acc *= x;
                checked_int(r, acc);
                if (acc == 0 || acc == 1) break;
                if (acc == -1) { acc = (y - i - 1) % 2 ? -acc : acc; break; }
            }
            return tv_int((int64_t)acc);
        }
        return tv_float(pow(fx, fy));
    }
    return tv_none();
}

static bool contains(tpl_render *r, tv hay, tv needle)
{
    switch (hay.t) {
    case TV_STR:
        if (needle.t != TV_STR) rfail(r, "TypeError: 'in <string>' requires string as left operand, not %s", sift__tv_typename(needle), NULL);
        if (needle.s->n == 0) return true;
        sift__tpl_charge(r, hay.s->n / TPL_BYTES_PER_STEP + 1);
        return memmem(hay.s->p, hay.s->n, needle.s->p, needle.s->n) != NULL;
    case TV_LIST:
        for (size_t i = 0; i < hay.l->n; i++)
            if (sift__tv_eq(&r->m, hay.l->v[i], needle)) return true;
        return false;
    case TV_DICT: case TV_NS: return sift__tv_dict_get(&r->m, hay.d, needle) != NULL;
    case TV_UNDEF: return false;
    default: rfail(r, "TypeError: argument of type '%s' is not iterable%s", sift__tv_typename(hay), NULL);
    }
}

static bool compare(tpl_render *r, int op, tv a, tv b)
{
    switch (op) {
    case OP_EQ: return sift__tv_eq(&r->m, a, b);
    case OP_NE: return !sift__tv_eq(&r->m, a, b);
    case OP_IN: return contains(r, b, a);
    case OP_NOTIN: return !contains(r, b, a);
    default: break;
    }
    if (a.t == TV_UNDEF) sift__tpl_undefined_error(r, a);
    if (b.t == TV_UNDEF) sift__tpl_undefined_error(r, b);
    int c = sift__tv_cmp(&r->m, a, b);
    return op == OP_LT ? c < 0 : op == OP_LE ? c <= 0 : op == OP_GT ? c > 0 : c >= 0;
}

static int64_t to_index(tpl_render *r, tv v, const char *what)
{
    if (v.t == TV_INT) return v.i;
    if (v.t == TV_BOOL) return v.b;
    rfail(r, "TypeError: %s indices must be integers, not %s", what, sift__tv_typename(v));
}

static tv subscript(tpl_render *r, tv obj, tv key)
{
    tpl_mem *m = &r->m;
    char why[160];
    if (obj.t == TV_UNDEF) sift__tpl_undefined_error(r, obj);
    if (obj.t == TV_DICT || obj.t == TV_NS) {
        tv *v = sift__tv_dict_get(&r->m, obj.d, key);
        if (v) return *v;
        if (key.t == TV_STR && obj.t == TV_DICT) return sift__tpl_getattr(r, obj, key.s->p);
        tbuf b = {0};
        sift__tbuf_puts(m, &b, "'dict object' has no attribute ");
        sift__tv_write_repr(m, &b, key);
        return tv_undef(b.p);
    }
    if (obj.t == TV_LIST || obj.t == TV_STR) {
        if (key.t == TV_STR) return sift__tpl_getattr(r, obj, key.s->p);
        int64_t n = obj.t == TV_LIST ? (int64_t)obj.l->n : (int64_t)sift__utf8_len(&r->m, obj.s->p, obj.s->n);
        int64_t i = to_index(r, key, obj.t == TV_LIST ? "list" : "string");
        if (i < 0) i += n;
        if (i < 0 || i >= n) {
            snprintf(why, sizeof why, "'%s object' has no element %lld", sift__tv_typename(obj), (long long)key.i);
            char *w = sift__tpl_alloc(&r->arena, &r->fail, strlen(why) + 1);
            strcpy(w, why);
            return tv_undef(w);
        }
        if (obj.t == TV_LIST) return obj.l->v[i];
        size_t a = sift__utf8_offset(&r->m, obj.s->p, obj.s->n, (size_t)i), b = sift__utf8_offset(&r->m, obj.s->p, obj.s->n, (size_t)i + 1);
        return sift__tv_str(m, obj.s->p + a, b - a);
    }
    tbuf b = {0};
    sift__tbuf_puts(m, &b, obj.t == TV_NONE ? "'None'" : "'");
    if (obj.t != TV_NONE) { sift__tbuf_puts(m, &b, sift__tv_typename(obj)); sift__tbuf_puts(m, &b, " object'"); }
    sift__tbuf_puts(m, &b, " has no attribute ");
    sift__tv_write_repr(m, &b, key);
    return tv_undef(b.p);
}

static tv slice(tpl_render *r, tscope *s, tv obj, const tnode *sl)
{
    tpl_mem *m = &r->m;
    if (obj.t == TV_UNDEF) sift__tpl_undefined_error(r, obj);
    if (obj.t != TV_LIST && obj.t != TV_STR) rfail(r, "TypeError: '%s' object is not subscriptable%s", sift__tv_typename(obj), NULL);
    int64_t n = obj.t == TV_LIST ? (int64_t)obj.l->n : (int64_t)sift__utf8_len(&r->m, obj.s->p, obj.s->n);
    tv vs = sl->a ? eval(r, s, sl->a) : tv_none(), ve = sl->b ? eval(r, s, sl->b) : tv_none(), vt = sl->c ? eval(r, s, sl->c) : tv_none();
    int64_t st = vt.t == TV_NONE ? 1 : to_index(r, vt, "slice");
    if (st == 0) rfail(r, "ValueError: slice step cannot be zero%s%s", NULL, NULL);
    int64_t lo, hi;
    if (st > 0) {
        lo = vs.t == TV_NONE ? 0 : to_index(r, vs, "slice");
        hi = ve.t == TV_NONE ? n : to_index(r, ve, "slice");
        if (lo < 0) lo = lo + n < 0 ? 0 : lo + n;
        if (hi < 0) hi = hi + n < 0 ? 0 : hi + n;
        if (lo > n) lo = n;
        if (hi > n) hi = n;
    } else {
        lo = vs.t == TV_NONE ? n - 1 : to_index(r, vs, "slice");
        hi = ve.t == TV_NONE ? -1 : to_index(r, ve, "slice");
        if (lo < 0) lo = lo + n < 0 ? -1 : lo + n;
        if (lo >= n) lo = n - 1;
        if (ve.t != TV_NONE) {
            if (hi < 0) hi = hi + n < 0 ? -1 : hi + n;
            if (hi >= n) hi = n - 1;
        }
    }
    if (obj.t == TV_LIST) {
        tv l = sift__tv_list(m, 4);
        for (__int128 i = lo; st > 0 ? i < hi : i > hi; i += st) sift__tv_push(m, l, obj.l->v[(size_t)i]);
        return l;
    }
    tbuf b = {0};
    size_t *off = sift__tpl_alloc(&r->arena, &r->fail, ((size_t)n + 1) * sizeof *off); /* character starts */
    for (size_t i = 0, c = 0; i < obj.s->n; i++)
        if (((unsigned char)obj.s->p[i] & 0xC0) != 0x80) off[c++] = i;
    off[n] = obj.s->n;
    for (__int128 i = lo; st > 0 ? i < hi : i > hi; i += st)
        sift__tbuf_put(m, &b, obj.s->p + off[(size_t)i], off[(size_t)i + 1] - off[(size_t)i]);
    return sift__tbuf_value(m, &b);
}

static tv apply_filter(tpl_render *r, tscope *s, const tnode *f, tv input)
{
    tpl_builtin_fn fn = sift__tpl_filter(f->name);
    if (!fn) rfail(r, "TemplateRuntimeError: No filter named '%s' found.%s", f->name, NULL);
    targs a;
    eval_args(r, s, f, &a, 1);
    a.pos[0] = input;
    return fn(r, tv_none(), &a);
}

/* A filter chain: a node's input is its `a` expression, or, where `a` is NULL (the innermost
 * filter of a {% filter %} block or a {% set x | f %}), the given input. */
static tv eval_filter(tpl_render *r, tscope *s, const tnode *f, tv input)
{
    if (++r->edepth > 1500) rfail(r, "RecursionError: filters chained too deeply%s%s", NULL, NULL);
    tv in = !f->a ? input : f->a->kind == N_FILTER ? eval_filter(r, s, f->a, input) : eval(r, s, f->a);
    tv v = apply_filter(r, s, f, in);
    r->edepth--;
    return v;
}

static tv eval_node(tpl_render *r, tscope *s, const tnode *n);

/* Long operator and attribute chains (`a+a+...`, `x|f|f|...`) nest evaluation without
 * nesting the parser, so the C stack is bounded here. */
static tv eval(tpl_render *r, tscope *s, const tnode *n)
{
    if (++r->edepth > 1500) rfail(r, "RecursionError: expression nested too deeply%s%s", NULL, NULL);
    tv v = eval_node(r, s, n);
    r->edepth--;
    return v;
}

static tv __attribute__((noinline)) ev_lit(tpl_render *r, tscope *s, const tnode *n)
{
    return n->lit;
}

static tv __attribute__((noinline)) ev_name(tpl_render *r, tscope *s, const tnode *n)
{
    tpl_mem *m = &r->m;
    tv *v = scope_find(r, s, n->name);
    if (v) return *v;
    tbuf b = {0};
    sift__tbuf_puts(m, &b, "'");
    sift__tbuf_puts(m, &b, n->name);
    sift__tbuf_puts(m, &b, "' is undefined");
    return tv_undef(b.p);
}

static tv __attribute__((noinline)) ev_list(tpl_render *r, tscope *s, const tnode *n)
{
    tpl_mem *m = &r->m;
    tv l = sift__tv_list(m, (size_t)n->nkids + 1);
    for (int i = 0; i < n->nkids; i++) sift__tv_push(m, l, eval(r, s, n->kids[i]));
    l.l->tuple = n->kind == N_TUPLE;
    return l;
}

static tv __attribute__((noinline)) ev_dict(tpl_render *r, tscope *s, const tnode *n)
{
    tpl_mem *m = &r->m;
    tv d = sift__tv_dict(m, (size_t)n->nkids / 2 + 1);
    for (int i = 0; i + 1 < n->nkids; i += 2) {
        tv k = eval(r, s, n->kids[i]);
        if (k.t == TV_LIST || k.t == TV_DICT || k.t == TV_UNDEF)
            rfail(r, "TypeError: unhashable type: '%s'%s", sift__tv_typename(k), NULL);
        sift__tv_dict_set(m, d.d, k, eval(r, s, n->kids[i + 1]));
    }
    return d;
}

static tv __attribute__((noinline)) ev_attr(tpl_render *r, tscope *s, const tnode *n)
{
    return sift__tpl_getattr(r, eval(r, s, n->a), n->name);
}

static tv __attribute__((noinline)) ev_item(tpl_render *r, tscope *s, const tnode *n)
{
    tv obj = eval(r, s, n->a);
    if (n->b->kind == N_SLICE) return slice(r, s, obj, n->b);
    return subscript(r, obj, eval(r, s, n->b));
}

static tv __attribute__((noinline)) ev_call(tpl_render *r, tscope *s, const tnode *n)
{
    tv fn = eval(r, s, n->a);
    targs a;
    eval_args(r, s, n, &a, 0);
    return sift__tpl_call(r, fn, &a);
}

static tv __attribute__((noinline)) ev_filter(tpl_render *r, tscope *s, const tnode *n)
{
    return eval_filter(r, s, n, tv_none());
}

static tv __attribute__((noinline)) ev_test(tpl_render *r, tscope *s, const tnode *n)
{
    tv v = eval(r, s, n->a);
    targs a;
    eval_args(r, s, n, &a, 0);
    if (n->op & 2) rfail(r, "TemplateRuntimeError: No test named '%s' found.%s", n->name, NULL);
    bool res = sift__tpl_test(r, n->name, v, &a);
    return tv_bool(n->op & 1 ? !res : res);
}

static tv __attribute__((noinline)) ev_unary(tpl_render *r, tscope *s, const tnode *n)
{
    tv v = eval(r, s, n->a);
    if (v.t == TV_UNDEF) sift__tpl_undefined_error(r, v);
    if (!sift__tv_is_num(v)) rfail(r, "TypeError: bad operand type for unary %s: '%s'", n->op == OP_NEG ? "-" : "+", sift__tv_typename(v));
    if (n->op == OP_POS) return v.t == TV_BOOL ? tv_int(v.b) : v;
    if (v.t == TV_FLOAT) return tv_float(-v.f);
    int64_t x = v.t == TV_BOOL ? v.b : v.i;
    return tv_int(checked_int(r, -(__int128)x));
}

static tv __attribute__((noinline)) ev_binop(tpl_render *r, tscope *s, const tnode *n)
{
    return arith(r, n->op, eval(r, s, n->a), eval(r, s, n->b));
}

static tv __attribute__((noinline)) ev_and(tpl_render *r, tscope *s, const tnode *n)
{
    tv a = eval(r, s, n->a);
    return sift__tv_truthy(a) ? eval(r, s, n->b) : a;
}

static tv __attribute__((noinline)) ev_or(tpl_render *r, tscope *s, const tnode *n)
{
    tv a = eval(r, s, n->a);
    return sift__tv_truthy(a) ? a : eval(r, s, n->b);
}

static tv __attribute__((noinline)) ev_not(tpl_render *r, tscope *s, const tnode *n)
{
    return tv_bool(!sift__tv_truthy(eval(r, s, n->a)));
}

static tv __attribute__((noinline)) ev_cond(tpl_render *r, tscope *s, const tnode *n)
{
    if (sift__tv_truthy(eval(r, s, n->b))) return eval(r, s, n->a);
    return n->c ? eval(r, s, n->c) : tv_undef("the inline if-expression evaluated to false and no else section was defined.");
}

static tv __attribute__((noinline)) ev_compare(tpl_render *r, tscope *s, const tnode *n)
{
    tv left = eval(r, s, n->a);
    for (int i = 0; i < n->nkids; i++) {
        tv right = eval(r, s, n->kids[i]->b);
        if (!compare(r, n->kids[i]->op, left, right)) return tv_bool(false);
        left = right;
    }
    return tv_bool(true);
}

/* One small dispatch frame per level of nesting: the work (and its locals) lives in the
 * functions above, so deep expressions cost little stack even in unoptimised builds. */
static tv eval_node(tpl_render *r, tscope *s, const tnode *n)
{
    step(r, n);
    switch (n->kind) {
    case N_LIT: return ev_lit(r, s, n);
    case N_NAME: return ev_name(r, s, n);
    case N_LIST: case N_TUPLE: return ev_list(r, s, n);
    case N_DICT: return ev_dict(r, s, n);
    case N_ATTR: return ev_attr(r, s, n);
    case N_ITEM: return ev_item(r, s, n);
    case N_CALL: return ev_call(r, s, n);
    case N_FILTER: return ev_filter(r, s, n);
    case N_TEST: return ev_test(r, s, n);
    case N_UNARY: return ev_unary(r, s, n);
    case N_BINOP: return ev_binop(r, s, n);
    case N_AND: return ev_and(r, s, n);
    case N_OR: return ev_or(r, s, n);
    case N_NOT: return ev_not(r, s, n);
    case N_COND: return ev_cond(r, s, n);
    case N_COMPARE: return ev_compare(r, s, n);
    default: rfail(r, "internal: cannot evaluate this node%s%s", NULL, NULL);
    }
}

/* ---- macros ----------------------------------------------------------------------------------- */
static tv render_body_to_string(tpl_render *r, tscope *s, const tnode *body)
{
    tbuf buf = {0}, *saved = r->out;
    buf.max = r->max_output;
    r->out = &buf;
    flow f = exec(r, s, body);
    r->out = saved;
    if (f != FLOW_NORMAL) rfail(r, "TemplateSyntaxError: break/continue outside a loop%s%s", NULL, NULL);
    return sift__tbuf_value(&r->m, &buf);
}

/* Call a macro (or a call block's caller): bind parameters, render the body. */
static tv call_macro(tpl_render *r, tfunc *fn, const tnode *params, const tnode *body, tscope *closure, const targs *a)
{
    if (++r->depth > r->max_depth) rfail(r, "RecursionError: macro calls nested more than the limit%s%s", NULL, NULL);
    tscope *s = scope_new(r, closure);
    int np = params ? params->nkids : 0;
    tv varargs = sift__tv_list(&r->m, 4), kwargs = sift__tv_dict(&r->m, 4);
    varargs.l->tuple = true;
    for (int i = 0; i < a->np; i++) {
        if (i < np) sift__tpl_scope_set(r, s, params->kids[i]->name, a->pos[i]);
        else sift__tv_push(&r->m, varargs, a->pos[i]);
    }
    for (int k = 0; k < a->nk; k++) {
        bool found = false;
        for (int i = 0; i < np; i++)
            if (!strcmp(params->kids[i]->name, a->kname[k])) {
                if (i < a->np) rfail(r, "TypeError: macro '%s' got multiple values for argument '%s'", fn->name, a->kname[k]);
                sift__tpl_scope_set(r, s, params->kids[i]->name, a->kw[k]);
                found = true;
            }
        if (!found) sift__tv_dict_set(&r->m, kwargs.d, sift__tv_cstr(&r->m, a->kname[k]), a->kw[k]);
    }
    for (int i = a->np; i < np; i++) {
        const tnode *prm = params->kids[i];
        bool given = false;
        for (int k = 0; k < a->nk; k++) given |= !strcmp(prm->name, a->kname[k]);
        if (given) continue;
        if (prm->a) sift__tpl_scope_set(r, s, prm->name, eval(r, s, prm->a));
        else {
            tbuf b = {0};
            sift__tbuf_puts(&r->m, &b, "parameter '");
            sift__tbuf_puts(&r->m, &b, prm->name);
            sift__tbuf_puts(&r->m, &b, "' was not provided");
            sift__tpl_scope_set(r, s, prm->name, tv_undef(b.p));
        }
    }
    sift__tpl_scope_set(r, s, "varargs", varargs);
    sift__tpl_scope_set(r, s, "kwargs", kwargs);
    if (fn->caller_body) {
        tfunc *c = sift__tpl_alloc(&r->arena, &r->fail, sizeof *c);
        memset(c, 0, sizeof *c);
        c->name = "caller";
        c->macro = fn->caller_body;
        c->closure = fn->caller_scope;
        c->caller_params = fn->caller_params;
        tv cv = {.t = TV_MACRO};
        cv.fn = c;
        sift__tpl_scope_set(r, s, "caller", cv);
    }
    tv out = render_body_to_string(r, s, body);
    r->depth--;
    return out;
}

tv sift__tpl_call(tpl_render *r, tv fn, const targs *a)
{
    if (fn.t == TV_UNDEF) sift__tpl_undefined_error(r, fn);
    if (fn.t == TV_FUNC) return fn.fn->fn(r, fn.fn->self, a);
    if (fn.t == TV_MACRO) {
        tfunc *f = fn.fn;
        if (f->caller_params)
            return call_macro(r, &(tfunc){.name = "caller"}, f->caller_params, f->macro, f->closure, a);
        return call_macro(r, f, f->macro, f->macro->b, f->closure, a);
    }
    if (fn.t == TV_DICT) { /* a loop object: loop(items) in a recursive for */
        tv *call = sift__tv_dict_getc(fn.d, "()");
        if (call && call->t == TV_FUNC) return call->fn->fn(r, call->fn->self, a);
    }
    rfail(r, "TypeError: '%s' object is not callable%s", sift__tv_typename(fn), NULL);
}

/* ---- statements ------------------------------------------------------------------------------- */
static void output(tpl_render *r, tv v)
{
    if (v.t == TV_STR) sift__tbuf_put(&r->m, r->out, v.s->p, v.s->n);
    else sift__tv_write_str(&r->m, r->out, v);
}

static void assign(tpl_render *r, tscope *s, const tnode *target, tv v)
{
    if (target->kind == N_NAME) {
        sift__tpl_scope_set(r, s, target->name, v);
    } else if (target->kind == N_ATTR) {
        tv obj = eval(r, s, target->a);
        if (obj.t != TV_NS) rfail(r, "TemplateRuntimeError: cannot assign attribute on non-namespace object%s%s", NULL, NULL);
        sift__tv_dict_set(&r->m, obj.d, sift__tv_cstr(&r->m, target->name), v);
    } else { /* tuple unpacking */
        tv items = sift__tpl_iterable(r, v);
        if ((int)items.l->n != target->nkids) {
            char tmp[64];
            snprintf(tmp, sizeof tmp, "expected %d, got %zu", target->nkids, items.l->n);
            rfail(r, "ValueError: wrong number of values to unpack (%s)%s", tmp, NULL);
        }
        for (int i = 0; i < target->nkids; i++) assign(r, s, target->kids[i], items.l->v[i]);
    }
}

static tv loop_cycle(tpl_render *r, tv self, const targs *a)
{
    if (a->np == 0) rfail(r, "TypeError: no items for cycling given%s%s", NULL, NULL);
    tv *idx = sift__tv_dict_getc(self.d, "index0");
    return a->pos[idx->i % a->np];
}

/* loop.changed(*values): true on the first call and whenever the values differ from the
 * previous call's. self is a one-item list shared by every iteration of the loop, holding
 * the last values (empty until the first call), so the state outlives each loop dict. */
static tv loop_changed(tpl_render *r, tv self, const targs *a)
{
    tv now = sift__tv_list(&r->m, (size_t)a->np + 1);
    for (int i = 0; i < a->np; i++) sift__tv_push(&r->m, now, a->pos[i]);
    if (self.l->n == 1 && sift__tv_eq(&r->m, self.l->v[0], now)) return tv_bool(false);
    if (self.l->n == 1) self.l->v[0] = now;
    else sift__tv_push(&r->m, self, now);
    return tv_bool(true);
}

static tv bound_fn(tpl_render *r, const char *name, tpl_builtin_fn fn, tv self)
{
    tfunc *f = sift__tpl_alloc(&r->arena, &r->fail, sizeof *f);
    memset(f, 0, sizeof *f);
    f->name = name;
    f->fn = fn;
    f->self = self;
    tv v = {.t = TV_FUNC};
    v.fn = f;
    return v;
}

static flow run_for(tpl_render *r, tscope *s, const tnode *n, tv seq, int depth);

/* loop(items) inside a recursive loop: the same body over items, one level deeper, rendered
 * to a string (jinja2 returns the markup rather than writing it in place). self is the list
 * [this function, depth]: the function carries the for node and the scope the loop was
 * entered from, as jinja2's closure does. */
static tv loop_recurse(tpl_render *r, tv self, const targs *a)
{
    if (a->np != 1 || a->nk) rfail(r, "TypeError: loop() takes exactly one argument%s%s", NULL, NULL);
    const tnode *n = self.l->v[0].fn->macro;
    tscope *s = self.l->v[0].fn->closure;
    if (++r->depth > r->max_depth) rfail(r, "RecursionError: recursive loop nested more than the limit%s%s", NULL, NULL);
    tbuf buf = {0}, *saved = r->out;
    buf.max = r->max_output;
    r->out = &buf;
    run_for(r, s, n, a->pos[0], (int)self.l->v[1].i + 1);
    r->out = saved;
    r->depth--;
    return sift__tbuf_value(&r->m, &buf);
}

static tv loop_not_recursive(tpl_render *r, tv self, const targs *a)
{
    (void)self;
    (void)a;
    rfail(r, "TypeError: The loop must have the 'recursive' marker to be called recursively.%s%s", NULL, NULL);
}

static flow exec_for(tpl_render *r, tscope *s, const tnode *n)
{
    return run_for(r, s, n, eval(r, s, n->a), 1);
}

static flow run_for(tpl_render *r, tscope *s, const tnode *n, tv seq, int depth)
{
    if (seq.t == TV_NONE || (seq.t != TV_UNDEF && seq.t != TV_LIST && seq.t != TV_DICT && seq.t != TV_STR && seq.t != TV_NS))
        rfail(r, "TypeError: '%s' object is not iterable%s", sift__tv_typename(seq), NULL);
    tv items = sift__tpl_iterable(r, seq);
    tscope *ls = scope_new(r, s);
    if (n->op & 1) { /* {% for x in xs if cond %}: filter first, so loop.* counts what is kept */
        tv kept = sift__tv_list(&r->m, items.l->n + 1);
        for (size_t i = 0; i < items.l->n; i++) {
            assign(r, ls, n->d, items.l->v[i]);
            if (sift__tv_truthy(eval(r, ls, n->kids[0]))) sift__tv_push(&r->m, kept, items.l->v[i]);
        }
        items = kept;
    }
    size_t len = items.l->n;
    tpl_mem *m = &r->m;
    tv changed = bound_fn(r, "changed", loop_changed, sift__tv_list(m, 1));
    tv call;
    if (n->op & 2) {
        call = bound_fn(r, "loop", loop_recurse, sift__tv_list(m, 2));
        call.fn->macro = n;
        call.fn->closure = s;
        sift__tv_push(m, call.fn->self, call);
        sift__tv_push(m, call.fn->self, tv_int(depth));
    } else {
        call = bound_fn(r, "loop", loop_not_recursive, tv_none());
    }
    for (size_t i = 0; i < len; i++) {
        tv loop = sift__tv_dict(m, 16);
        sift__tv_dict_set(m, loop.d, sift__tv_cstr(m, "index"), tv_int((int64_t)i + 1));
        sift__tv_dict_set(m, loop.d, sift__tv_cstr(m, "index0"), tv_int((int64_t)i));
        sift__tv_dict_set(m, loop.d, sift__tv_cstr(m, "revindex"), tv_int((int64_t)(len - i)));
        sift__tv_dict_set(m, loop.d, sift__tv_cstr(m, "revindex0"), tv_int((int64_t)(len - i - 1)));
        sift__tv_dict_set(m, loop.d, sift__tv_cstr(m, "first"), tv_bool(i == 0));
        sift__tv_dict_set(m, loop.d, sift__tv_cstr(m, "last"), tv_bool(i + 1 == len));
        sift__tv_dict_set(m, loop.d, sift__tv_cstr(m, "length"), tv_int((int64_t)len));
        sift__tv_dict_set(m, loop.d, sift__tv_cstr(m, "depth"), tv_int(depth));
        sift__tv_dict_set(m, loop.d, sift__tv_cstr(m, "depth0"), tv_int(depth - 1));
        sift__tv_dict_set(m, loop.d, sift__tv_cstr(m, "previtem"), i ? items.l->v[i - 1] : tv_undef("there is no previous item"));
        sift__tv_dict_set(m, loop.d, sift__tv_cstr(m, "nextitem"), i + 1 < len ? items.l->v[i + 1] : tv_undef("there is no next item"));
        sift__tv_dict_set(m, loop.d, sift__tv_cstr(m, "cycle"), bound_fn(r, "cycle", loop_cycle, loop));
        sift__tv_dict_set(m, loop.d, sift__tv_cstr(m, "changed"), changed);
        /* "()" is not a name, so templates reach it only by calling loop(...). */
        sift__tv_dict_set(m, loop.d, sift__tv_cstr(m, "()"), call);
        sift__tpl_scope_set(r, ls, "loop", loop);
        assign(r, ls, n->d, items.l->v[i]);
        flow f = exec(r, ls, n->b);
        if (f == FLOW_BREAK) break;
    }
    if (len == 0 && n->c) return exec(r, s, n->c);
    return FLOW_NORMAL;
}

static flow exec_node(tpl_render *r, tscope *s, const tnode *n);

/* Statements share the expression depth budget: macros nest bodies inside expressions. */
static flow exec(tpl_render *r, tscope *s, const tnode *n)
{
    if (++r->edepth > 1500) rfail(r, "RecursionError: statements nested too deeply%s%s", NULL, NULL);
    flow f = exec_node(r, s, n);
    r->edepth--;
    return f;
}

static flow exec_node(tpl_render *r, tscope *s, const tnode *n)
{
    step(r, n);
    switch (n->kind) {
    case N_BODY:
        for (int i = 0; i < n->nkids; i++) {
            flow f = exec(r, s, n->kids[i]);
            if (f != FLOW_NORMAL) return f;
        }
        return FLOW_NORMAL;
    case N_TEXT: output(r, n->lit); return FLOW_NORMAL;
    case N_OUTPUT: output(r, eval(r, s, n->a)); return FLOW_NORMAL;
    case N_IF:
        if (sift__tv_truthy(eval(r, s, n->a))) return exec(r, s, n->b);
        return n->c ? exec(r, s, n->c) : FLOW_NORMAL;
    case N_FOR: {
        if (++r->depth > r->max_depth) rfail(r, "RecursionError: loops nested more than the limit%s%s", NULL, NULL);
        flow f = exec_for(r, s, n);
        r->depth--;
        return f;
    }
    case N_SET: assign(r, s, n->d, eval(r, s, n->a)); return FLOW_NORMAL;
    case N_SETBLOCK: {
        tv v = render_body_to_string(r, s, n->b);
        if (n->c) v = eval_filter(r, s, n->c, v);
        assign(r, s, n->d, v);
        return FLOW_NORMAL;
    }
    case N_FILTERBLOCK: output(r, eval_filter(r, s, n->c, render_body_to_string(r, s, n->b))); return FLOW_NORMAL;
    case N_MACRO: {
        tfunc *f = sift__tpl_alloc(&r->arena, &r->fail, sizeof *f);
        memset(f, 0, sizeof *f);
        f->name = n->name;
        f->macro = n;
        f->closure = s;
        tv v = {.t = TV_MACRO};
        v.fn = f;
        sift__tpl_scope_set(r, s, n->name, v);
        return FLOW_NORMAL;
    }
    case N_CALLBLOCK: {
        const tnode *call = n->a;
        tv fn = eval(r, s, call->a);
        if (fn.t != TV_MACRO) rfail(r, "TypeError: {%% call %%} needs a macro, got '%s'%s", sift__tv_typename(fn), NULL);
        targs a;
        eval_args(r, s, call, &a, 0);
        tfunc with = *fn.fn;
        with.caller_body = n->b;
        with.caller_scope = s;
        with.caller_params = n;
        output(r, call_macro(r, &with, with.macro, with.macro->b, with.closure, &a));
        return FLOW_NORMAL;
    }
    case N_BREAK: return FLOW_BREAK;
    case N_CONTINUE: return FLOW_CONTINUE;
    default: output(r, eval(r, s, n)); return FLOW_NORMAL;
    }
}

/* ---- public API ----------------------------------------------------------------------------- */
sift_template *sift_template_parse(const char *src, size_t len, sift_error *err)
{
    if (!src) {
        if (err) { err->status = SIFT_E_INVAL; snprintf(err->msg, sizeof err->msg, "template: NULL source"); }
        return NULL;
    }
    sift_template *t = malloc(sizeof *t);
    if (!t) {
        if (err) { err->status = SIFT_E_NOMEM; snprintf(err->msg, sizeof err->msg, "template: out of memory"); }
        return NULL;
    }
    if (sift__tpl_parse(&t->parsed, src, len, err) != SIFT_OK) {
        free(t);
        return NULL;
    }
    return t;
}

void sift_template_free(sift_template *t)
{
    if (!t) return;
    sift__tpl_arena_free(&t->parsed.arena);
    free(t);
}

void sift_template_options_init(sift_template_options *o)
{
    memset(o, 0, sizeof *o);
    o->max_output = (size_t)16 << 20;
    o->max_memory = (size_t)512 << 20;
    o->max_steps = 50000000;
    o->max_depth = 100;
    o->now = -1;
}

/* The part of a render that may fail: everything after the setjmp of sift_template_render. */
static void render_run(tpl_render *r, const sift_template *t, const char *context_json, size_t context_len,
                       bool chat_defaults, char **out, size_t *out_len)
{
    tscope *globals = scope_new(r, NULL);
    r->globals = globals;
    sift__tpl_define_globals(r, globals);
    if (chat_defaults) {
        sift__tpl_scope_set(r, globals, "tools", tv_none());
        sift__tpl_scope_set(r, globals, "documents", tv_none());
        sift__tpl_scope_set(r, globals, "add_generation_prompt", tv_bool(false));
    }
    if (context_json && context_len) {
        tv ctx = sift__tv_from_json(&r->m, context_json, context_len);
        if (ctx.t != TV_DICT) rfail(r, "context JSON: not an object%s%s", NULL, NULL);
        r->ctx = ctx.d; /* looked up before the globals, as if set over them */
    }
    tscope *top = scope_new(r, globals);
    tbuf buf = {0};
    buf.max = r->max_output;
    r->out = &buf;
    flow f = exec(r, top, t->parsed.root);
    if (f != FLOW_NORMAL) rfail(r, "TemplateSyntaxError: break/continue outside a loop%s%s", NULL, NULL);
    char *res = malloc(buf.n + 1);
    if (!res) rfail(r, "out of memory%s%s", NULL, NULL);
    if (buf.n) memcpy(res, buf.p, buf.n);
    res[buf.n] = 0;
    *out = res;
    if (out_len) *out_len = buf.n;
}

sift_status sift_template_render(const sift_template *t, const char *context_json, size_t context_len,
                                 const sift_template_options *opts, char **out, size_t *out_len, sift_error *err)
{
    if (out) *out = NULL;
    if (out_len) *out_len = 0;
    if (!t || !out) {
        if (err) { err->status = SIFT_E_INVAL; snprintf(err->msg, sizeof err->msg, "template: NULL argument"); }
        return SIFT_E_INVAL;
    }
    sift_template_options o;
    if (opts) o = *opts;
    else sift_template_options_init(&o);
    tpl_render *r = calloc(1, sizeof *r);
    if (!r) {
        if (err) { err->status = SIFT_E_NOMEM; snprintf(err->msg, sizeof err->msg, "template: out of memory"); }
        return SIFT_E_NOMEM;
    }
    r->arena.limit = o.max_memory ? o.max_memory : (size_t)512 << 20;
    r->m.arena = &r->arena;
    r->m.fail = &r->fail;
    r->m.r = r;
    r->arena.pool = o.pool;
    r->abort_cb = o.abort_cb;
    r->abort_data = o.abort_data;
    r->max_time_ms = o.max_time_ms;
    if (o.max_time_ms) r->deadline_ns = now_ns() + (uint64_t)o.max_time_ms * 1000000u;
    r->max_steps = o.max_steps ? o.max_steps : 50000000;
    r->next_poll = POLL_STEPS < r->max_steps + 1 ? POLL_STEPS : r->max_steps + 1;
    r->max_depth = o.max_depth > 0 ? o.max_depth : 100;
    r->max_output = o.max_output ? o.max_output : (size_t)16 << 20;
    r->now = o.now >= 0 ? o.now : (int64_t)time(NULL);
    r->now_local = o.now < 0;
    r->fail.err = err;
    if (setjmp(r->fail.jb)) {
        sift_status st = r->fail.status;
        if (err) {
            err->status = st;
            snprintf(err->msg, sizeof err->msg, "%s", r->fail.msg);
        }
        sift__tpl_arena_free(&r->arena);
        free(r);
        return st;
    }
    render_run(r, t, context_json, context_len, o.chat_defaults, out, out_len);
    sift__tpl_arena_free(&r->arena);
    free(r);
    return SIFT_OK;
}
