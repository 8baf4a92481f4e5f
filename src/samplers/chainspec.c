/*
 * chainspec.c - chains from text: "top_k(40);temp(0.8);dist(1234)".
 *
 * The grammar (see sift.h, "chain spec") is the one ../shared/peer/peer_chainspec.h reads,
 * so the same spec drives llama.cpp (peer_replay) and sift (sift replay), plus
 * adaptive_p(), infill() and DRY string breakers. Parsing is two-level: a small lexer-like
 * reader turns each item into a name and a list of typed arguments (number, [id list],
 * "string", id:number), each remembering its column; then the item's reader checks the
 * argument count, types and ranges and fills in a chain item (samplers/chain_items.h), so
 * a spec is parsed once and its structure is kept: sift_chain_add_spec builds the items'
 * samplers, the device chain (src/gpu/plan.c) plans from the items themselves. Every error
 * names the column (1-based) and what is wrong, and nothing is added to the chain unless
 * the whole spec is valid.
 *
 * This lives with the samplers (not in core) because its items are built by their
 * constructors: the dependency points samplers -> core only.
 */
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "samplers/chain_items.h"
#include "samplers/samplers.h"

typedef enum { ARG_NUM, ARG_LIST, ARG_STR, ARG_PAIR } arg_kind;

typedef struct spec_arg {
    arg_kind kind;
    size_t col;
    double num;       /* ARG_NUM; ARG_PAIR: the bias */
    sift_token id;    /* ARG_PAIR: the token */
    sift_token *list; /* ARG_LIST */
    size_t n_list;
    char *str;        /* ARG_STR (decoded, NUL-terminated) */
} spec_arg;

typedef struct spec_state {
    const char *spec;
    const char *p;
    sift_error *err;
    int status;
    spec_arg *args;
    size_t n_args, cap_args;
} spec_state;

static size_t col_of(const spec_state *st, const char *at) { return (size_t)(at - st->spec) + 1; }

__attribute__((format(printf, 3, 4))) static int fail_at(spec_state *st, size_t col, const char *fmt, ...)
{
    char msg[SIFT_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    st->status = sift__error_set(st->err, SIFT_E_PARSE, "chain spec: col %zu: %s", col, msg);
    return -1;
}

static void skip_ws(spec_state *st)
{
    while (isspace((unsigned char)*st->p)) st->p++;
}

static void free_args(spec_state *st)
{
    for (size_t i = 0; i < st->n_args; i++) {
        free(st->args[i].list);
        free(st->args[i].str);
    }
    st->n_args = 0;
}

static spec_arg *push_arg(spec_state *st, arg_kind kind, size_t col)
{
    if (st->n_args == st->cap_args) {
        size_t cap = st->cap_args ? 2 * st->cap_args : 8;
        spec_arg *a = realloc(st->args, cap * sizeof *a);
        if (!a) {
            st->status = sift__error_set(st->err, SIFT_E_NOMEM, "chain spec: out of memory");
            return NULL;
        }
        st->args = a, st->cap_args = cap;
    }
    spec_arg *a = &st->args[st->n_args++];
    memset(a, 0, sizeof *a);
    a->kind = kind;
    a->col = col;
    return a;
}

/* a number: decimal / exponent form, or inf / -inf / +inf */
static int read_number(spec_state *st, double *out)
{
    const char *s = st->p;
    const char *q = s + (*s == '+' || *s == '-');
    if (!(isdigit((unsigned char)*q) || *q == '.' || strncmp(q, "inf", 3) == 0))
        return fail_at(st, col_of(st, s), "number expected, found %s", *s ? "something else" : "the end");
    if (strncmp(q, "inf", 3) == 0) {
        *out = *s == '-' ? -INFINITY : INFINITY;
        st->p = q + 3;
        return 0;
    }
    char *end;
    *out = strtod(s, &end);
    if (end == s) return fail_at(st, col_of(st, s), "malformed number");
    st->p = end;
    return 0;
}

/* [id id ...] (blanks or commas between ids) */
static int read_list(spec_state *st, spec_arg *a)
{
    size_t cap = 0;
    st->p++; /* '[' */
    for (;;) {
        while (isspace((unsigned char)*st->p) || *st->p == ',') st->p++;
        if (*st->p == ']') {
            st->p++;
            return 0;
        }
        if (!*st->p) return fail_at(st, a->col, "unclosed '['");
        const char *at = st->p;
        if (!isdigit((unsigned char)*at) && *at != '+' && *at != '-')
            return fail_at(st, col_of(st, at), "token id or ']' expected");
        double v;
        if (read_number(st, &v) != 0) return -1;
        if (v != floor(v) || v < 0 || v > 2147483647.0)
            return fail_at(st, col_of(st, at), "token id must be an integer in [0, 2^31), got %g", v);
        if (a->n_list == cap) {
            cap = cap ? 2 * cap : 8;
            sift_token *l = realloc(a->list, cap * sizeof *l);
            if (!l) return fail_at(st, col_of(st, at), "out of memory");
            a->list = l;
        }
        a->list[a->n_list++] = (sift_token)v;
    }
}

static int hexval(int c) { return isdigit(c) ? c - '0' : isxdigit(c) ? (tolower(c) - 'a' + 10) : -1; }

/* "text" with \n \t \r \\ \" \' \0 \xHH escapes */
static int read_string(spec_state *st, spec_arg *a)
{
    const char *s = ++st->p; /* after the quote */
    size_t cap = strlen(s) + 1, n = 0;
    char *out = malloc(cap);
    if (!out) return fail_at(st, a->col, "out of memory");
    a->str = out;
    for (;;) {
        char c = *st->p;
        if (!c) return fail_at(st, a->col, "unterminated string");
        st->p++;
        if (c == '"') break;
        if (c == '\\') {
            const char *at = st->p - 1;
            char e = *st->p++;
            switch (e) {
            case 'n': c = '\n'; break;
            case 't': c = '\t'; break;
            case 'r': c = '\r'; break;
            case '\\': c = '\\'; break;
            case '"': c = '"'; break;
            case '\'': c = '\''; break;
            case 'x': {
                int h = hexval((unsigned char)st->p[0]), l = h >= 0 ? hexval((unsigned char)st->p[1]) : -1;
                if (h < 0 || l < 0) return fail_at(st, col_of(st, at), "\\x needs two hex digits");
                c = (char)(h * 16 + l);
                st->p += 2;
                break;
            }
            default: return fail_at(st, col_of(st, at), "unknown escape '\\%c'", e ? e : '0');
            }
            if (c == 0) return fail_at(st, col_of(st, at), "NUL byte in a string");
        }
        out[n++] = c;
    }
    out[n] = 0;
    if (n == 0) return fail_at(st, a->col, "empty string");
    return 0;
}

/* '(' args ')' after a name */
static int read_args(spec_state *st)
{
    skip_ws(st);
    if (*st->p != '(') return fail_at(st, col_of(st, st->p), "'(' expected after the sampler name");
    st->p++;
    skip_ws(st);
    if (*st->p == ')') {
        st->p++;
        return 0;
    }
    for (;;) {
        skip_ws(st);
        const char *at = st->p;
        spec_arg *a;
        if (*at == '[') {
            if (!(a = push_arg(st, ARG_LIST, col_of(st, at))) || read_list(st, a) != 0) return -1;
        } else if (*at == '"') {
            if (!(a = push_arg(st, ARG_STR, col_of(st, at))) || read_string(st, a) != 0) return -1;
        } else {
            double v;
            if (read_number(st, &v) != 0) return -1;
            skip_ws(st);
            if (*st->p == ':') { /* id:bias */
                st->p++;
                skip_ws(st);
                double b;
                if (read_number(st, &b) != 0) return -1;
                if (v != floor(v) || v < 0 || v > 2147483647.0)
                    return fail_at(st, col_of(st, at), "token id must be an integer in [0, 2^31), got %g", v);
                if (!(a = push_arg(st, ARG_PAIR, col_of(st, at)))) return -1;
                a->id = (sift_token)v;
                a->num = b;
            } else {
                if (!(a = push_arg(st, ARG_NUM, col_of(st, at)))) return -1;
                a->num = v;
            }
        }
        skip_ws(st);
        if (*st->p == ',') {
            st->p++;
            continue;
        }
        if (*st->p == ')') {
            st->p++;
            return 0;
        }
        return fail_at(st, col_of(st, st->p), *st->p ? "',' or ')' expected" : "')' expected before the end");
    }
}

/* ---- argument checks ------------------------------------------------------------------- */

typedef struct item_ctx {
    spec_state *st;
    const char *name;
    size_t col; /* the item's name */
    const sift_chain_env *env;
    sift__chain_item *item; /* what the arguments fill in */
} item_ctx;

static int want_max(item_ctx *it, size_t max)
{
    if (it->st->n_args > max)
        return fail_at(it->st, it->st->args[max].col, "%s takes at most %zu argument%s, got %zu", it->name, max,
                       max == 1 ? "" : "s", it->st->n_args);
    for (size_t i = 0; i < it->st->n_args; i++)
        if (it->st->args[i].kind != ARG_NUM)
            return fail_at(it->st, it->st->args[i].col, "%s: argument %zu must be a number", it->name, i + 1);
    return 0;
}

static float num(item_ctx *it, size_t i) { return i < it->st->n_args ? (float)it->st->args[i].num : 0.0f; }

/* arguments [0, n) as the item's floats f[0..n) (missing ones read as 0) */
static void floats(item_ctx *it, size_t n)
{
    for (size_t i = 0; i < n; i++) it->item->f[i] = num(it, i);
}

static int integer(item_ctx *it, size_t i, const char *what, double lo, double hi, double dflt, double *out)
{
    if (i >= it->st->n_args) {
        *out = dflt;
        return 0;
    }
    const spec_arg *a = &it->st->args[i];
    if (a->num != floor(a->num) || a->num < lo || a->num > hi)
        return fail_at(it->st, a->col, "%s: %s must be an integer in [%.0f, %.0f], got %g", it->name, what, lo, hi, a->num);
    *out = a->num;
    return 0;
}

/* argument i as the item's integer i[slot] */
static int int_arg(item_ctx *it, size_t i, const char *what, double lo, double hi, int slot)
{
    double v = 0;
    if (integer(it, i, what, lo, hi, 0, &v) != 0) return -1;
    it->item->i[slot] = (int32_t)v;
    return 0;
}

#define ANY_INT -2147483648.0, 2147483647.0

static int seed_arg(item_ctx *it, size_t i)
{
    double v = -2;
    if (integer(it, i, "seed", -1, 4294967295.0, -2, &v) != 0) return -1;
    it->item->seed = v == -2 ? it->env->default_seed : v == -1 ? SIFT_DEFAULT_SEED : (uint32_t)v;
    return 0;
}

static int token_in_vocab(item_ctx *it, size_t col, sift_token t)
{
    if (it->env->n_vocab > 0 && t >= it->env->n_vocab)
        return fail_at(it->st, col, "%s: token %d is outside the vocabulary (%d tokens)", it->name, (int)t,
                       (int)it->env->n_vocab);
    return 0;
}

/* ---- one item's arguments ------------------------------------------------------------------ */

/* the breakers of a dry item: its arguments from 4 on, moved from the arguments to the item */
static int dry_breakers(item_ctx *it, size_t n_lists, size_t n_strs)
{
    spec_state *st = it->st;
    sift__chain_item *d = it->item;
    const size_t n = n_lists + n_strs;
    d->strings = n_strs > 0;
    if (n == 0) return 0;
    if (n_strs && !(d->strs = calloc(n, sizeof *d->strs))) return fail_at(st, it->col, "out of memory");
    if (n_lists && (!(d->seqs = calloc(n, sizeof *d->seqs)) || !(d->lens = calloc(n, sizeof *d->lens))))
        return fail_at(st, it->col, "out of memory");
    for (size_t i = 0; i < n; i++) {
        spec_arg *a = &st->args[4 + i];
        if (n_strs) {
            d->strs[d->n_strs++] = a->str;
            a->str = NULL;
        } else {
            d->seqs[d->n_seqs] = a->list;
            d->lens[d->n_seqs++] = a->n_list;
            a->list = NULL;
        }
    }
    return 0;
}

static int read_dry(item_ctx *it)
{
    spec_state *st = it->st;
    if (st->n_args < 4) return fail_at(st, it->col, "dry needs 4 numbers (multiplier, base, allowed_length, last_n)");
    for (size_t i = 0; i < 4; i++)
        if (st->args[i].kind != ARG_NUM) return fail_at(st, st->args[i].col, "dry: argument %zu must be a number", i + 1);
    if (int_arg(it, 2, "allowed_length", ANY_INT, 0) != 0 || int_arg(it, 3, "last_n", ANY_INT, 1) != 0) return -1;
    size_t n_lists = 0, n_strs = 0;
    for (size_t i = 4; i < st->n_args; i++) {
        const spec_arg *a = &st->args[i];
        if (a->kind == ARG_LIST) {
            n_lists++;
            for (size_t k = 0; k < a->n_list; k++)
                if (token_in_vocab(it, a->col, a->list[k]) != 0) return -1;
        } else if (a->kind == ARG_STR) {
            n_strs++;
        } else {
            return fail_at(st, a->col, "dry: sequence breakers are [token ids] or \"strings\"");
        }
    }
    if (n_lists && n_strs) return fail_at(st, it->col, "dry: use either [token id] or \"string\" breakers, not both");
    floats(it, 2);
    if (n_strs) {
        const bool enabled = it->item->f[0] != 0.0f && it->item->f[1] >= 1.0f && it->item->i[1] > 0;
        if (enabled && (!it->env->vocab || !it->env->vocab->tokenize))
            return fail_at(st, st->args[4].col, "dry: string breakers need a vocabulary (use [token ids] without a model)");
        if (n_strs > 64) return fail_at(st, st->args[4 + 64].col, "dry: at most 64 breakers");
    }
    if (n_lists > 256) return fail_at(st, st->args[4 + 256].col, "dry: at most 256 breakers");
    return dry_breakers(it, n_lists, n_strs);
}

static int read_logit_bias(item_ctx *it)
{
    spec_state *st = it->st;
    sift__chain_item *d = it->item;
    d->bias = malloc((st->n_args ? st->n_args : 1) * sizeof *d->bias);
    if (!d->bias) return fail_at(st, it->col, "out of memory");
    for (size_t i = 0; i < st->n_args; i++) {
        const spec_arg *a = &st->args[i];
        if (a->kind != ARG_PAIR) return fail_at(st, a->col, "logit_bias: entries are token:bias");
        if (token_in_vocab(it, a->col, a->id) != 0) return -1;
        d->bias[d->n_bias++] = (sift_logit_bias){a->id, (float)a->num};
    }
    return 0;
}

static const char *const known_names =
    "greedy, dist, top_k, top_p, min_p, typical, temp, temp_ext, xtc, top_n_sigma, mirostat, "
    "mirostat_v2, penalties, dry, logit_bias, adaptive_p, infill";

/* checks the arguments of a known item and fills it in */
static int read_item(item_ctx *it)
{
    switch (it->item->kind) {
    case SIFT__ITEM_DRY: return read_dry(it);
    case SIFT__ITEM_LOGIT_BIAS: return read_logit_bias(it);
    case SIFT__ITEM_GREEDY: return want_max(it, 0);
    case SIFT__ITEM_DIST: return want_max(it, 1) || seed_arg(it, 0);
    case SIFT__ITEM_TOP_K: return want_max(it, 1) || int_arg(it, 0, "k", ANY_INT, 0);
    case SIFT__ITEM_TOP_P:
    case SIFT__ITEM_MIN_P:
    case SIFT__ITEM_TYPICAL:
        if (want_max(it, 2) || int_arg(it, 1, "min_keep", 0, 2147483647.0, 0)) return -1;
        floats(it, 1);
        return 0;
    case SIFT__ITEM_TEMP:
    case SIFT__ITEM_TOP_N_SIGMA:
        if (want_max(it, 1)) return -1;
        floats(it, 1);
        return 0;
    case SIFT__ITEM_TEMP_EXT:
        if (want_max(it, 3)) return -1;
        floats(it, 3);
        return 0;
    case SIFT__ITEM_XTC:
        if (want_max(it, 4) || int_arg(it, 2, "min_keep", 0, 2147483647.0, 0) || seed_arg(it, 3)) return -1;
        floats(it, 2);
        return 0;
    case SIFT__ITEM_MIROSTAT: /* mirostat(seed, tau, eta, m) */
        if (want_max(it, 4) || seed_arg(it, 0) || int_arg(it, 3, "m", ANY_INT, 0)) return -1;
        it->item->f[0] = num(it, 1), it->item->f[1] = num(it, 2);
        return 0;
    case SIFT__ITEM_MIROSTAT_V2: /* mirostat_v2(seed, tau, eta) */
        if (want_max(it, 3) || seed_arg(it, 0)) return -1;
        it->item->f[0] = num(it, 1), it->item->f[1] = num(it, 2);
        return 0;
    case SIFT__ITEM_PENALTIES: /* penalties(last_n, repeat, freq, present) */
        if (want_max(it, 4) || int_arg(it, 0, "last_n", ANY_INT, 0)) return -1;
        for (int i = 0; i < 3; i++) it->item->f[i] = num(it, (size_t)i + 1);
        return 0;
    case SIFT__ITEM_ADAPTIVE_P:
        if (want_max(it, 3) || seed_arg(it, 2)) return -1;
        floats(it, 2);
        return 0;
    case SIFT__ITEM_INFILL:
        if (want_max(it, 0)) return -1;
        if (!it->env->vocab) return fail_at(it->st, it->col, "infill needs a vocabulary (a model)");
        return 0;
    default: return fail_at(it->st, it->col, "unknown sampler '%s' (known: %s)", it->name, known_names);
    }
}

static sift__item_kind kind_of(const char *name)
{
    for (int k = 0; k < SIFT__ITEM_COUNT; k++)
        if (!strcmp(name, sift__item_name((sift__item_kind)k))) return (sift__item_kind)k;
    return SIFT__ITEM_COUNT;
}

/* ---- a spec ---------------------------------------------------------------------------------- */

/* the name at st->p (at most 31 characters kept); 0 when there is none */
static size_t read_name(spec_state *st, char name[32])
{
    size_t n = 0;
    while (isalnum((unsigned char)*st->p) || *st->p == '_') {
        if (n < 31) name[n++] = *st->p;
        st->p++;
    }
    name[n] = 0;
    return n;
}

static int parse_items(spec_state *st, const sift_chain_env *env, sift__chain_items *out)
{
    for (;;) {
        while (isspace((unsigned char)*st->p) || *st->p == ';') st->p++;
        if (!*st->p) return 0;
        const char *name_at = st->p;
        char name[32];
        if (read_name(st, name) == 0) return fail_at(st, col_of(st, name_at), "sampler name expected");
        if (out->n == 256) return fail_at(st, col_of(st, name_at), "too many samplers (at most 256)");
        if (read_args(st) != 0) return -1;
        sift__chain_item *item = sift__chain_items_push(out, kind_of(name), col_of(st, name_at));
        if (!item) return fail_at(st, col_of(st, name_at), "out of memory");
        item_ctx it = {st, name, col_of(st, name_at), env, item};
        const int r = read_item(&it);
        if (item->kind == SIFT__ITEM_COUNT) out->n--; /* unknown: nothing to free */
        free_args(st);
        if (r != 0) return -1;
        skip_ws(st);
        if (*st->p && *st->p != ';') return fail_at(st, col_of(st, st->p), "';' expected between samplers");
    }
}

sift_status sift__chain_items_parse(const char *spec, const sift_chain_env *env, sift__chain_items *out, sift_error *err)
{
    memset(out, 0, sizeof *out);
    if (!spec) return sift__error_set(err, SIFT_E_INVAL, "chain spec: no spec");
    const sift_chain_env no_env = {.n_vocab = 0, .vocab = NULL, .eot = SIFT_TOKEN_NULL, .default_seed = 0};
    spec_state st = {.spec = spec, .p = spec, .err = err, .status = SIFT_OK};
    const int r = parse_items(&st, env ? env : &no_env, out);
    free_args(&st);
    free(st.args);
    if (r == 0) return SIFT_OK;
    sift__chain_items_free(out);
    return st.status != SIFT_OK ? st.status : SIFT_E_PARSE;
}

sift_status sift_chain_add_spec(sift_chain *chain, const char *spec, const sift_chain_env *env, sift_error *err)
{
    if (!chain || !spec) return sift__error_set(err, SIFT_E_INVAL, "chain spec: %s", !chain ? "no chain" : "no spec");
    sift__chain_items items;
    sift_status st = sift__chain_items_parse(spec, env, &items, err);
    if (st != SIFT_OK) return st;
    st = sift__chain_add_items(chain, &items, 0, items.n, env, err);
    sift__chain_items_free(&items);
    return st;
}

sift_chain *sift_chain_from_spec(const char *spec, const sift_chain_env *env, sift_error *err)
{
    sift_chain *chain = sift_chain_new(sift_chain_default_params());
    if (!chain) {
        sift__error_set(err, SIFT_E_NOMEM, "chain spec: out of memory");
        return NULL;
    }
    if (sift_chain_add_spec(chain, spec, env, err) != SIFT_OK) {
        sift_chain_free(chain);
        return NULL;
    }
    return chain;
}
