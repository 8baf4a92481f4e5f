/*
 * chainspec.c - chains from text: "top_k(40);temp(0.8);dist(1234)".
 *
 * The grammar (see sift.h, "chain spec") is the one ../shared/peer/peer_chainspec.h reads,
 * so the same spec drives llama.cpp (peer_replay) and sift (sift replay), plus
 * adaptive_p(), infill() and DRY string breakers. Parsing is two-level: a small lexer-like
 * reader turns each item into a name and a list of typed arguments (number, [id list],
 * "string", id:number), each remembering its column; then the item's builder checks the
 * argument count and types and calls the sift_sampler_init_* function. Every error names
 * the column (1-based) and what is wrong, and nothing is added to the chain unless the
 * whole spec is valid.
 *
 * This lives with the samplers (not in core) because it calls their constructors: the
 * dependency points samplers -> core only.
 */
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
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

static int seed_arg(item_ctx *it, size_t i, uint32_t *out)
{
    double v = -2;
    if (integer(it, i, "seed", -1, 4294967295.0, -2, &v) != 0) return -1;
    *out = v == -2 ? it->env->default_seed : v == -1 ? SIFT_DEFAULT_SEED : (uint32_t)v;
    return 0;
}

static int token_in_vocab(item_ctx *it, size_t col, sift_token t)
{
    if (it->env->n_vocab > 0 && t >= it->env->n_vocab)
        return fail_at(it->st, col, "%s: token %d is outside the vocabulary (%d tokens)", it->name, (int)t,
                       (int)it->env->n_vocab);
    return 0;
}

/* ---- one item ------------------------------------------------------------------------- */

static sift_sampler *build_dry(item_ctx *it)
{
    spec_state *st = it->st;
    if (st->n_args < 4) return fail_at(st, it->col, "dry needs 4 numbers (multiplier, base, allowed_length, last_n)"), NULL;
    for (size_t i = 0; i < 4; i++)
        if (st->args[i].kind != ARG_NUM) return fail_at(st, st->args[i].col, "dry: argument %zu must be a number", i + 1), NULL;
    double allowed = 0, last_n = 0;
    if (integer(it, 2, "allowed_length", -2147483648.0, 2147483647.0, 0, &allowed) != 0 ||
        integer(it, 3, "last_n", -2147483648.0, 2147483647.0, 0, &last_n) != 0)
        return NULL;
    size_t n_lists = 0, n_strs = 0;
    for (size_t i = 4; i < st->n_args; i++) {
        const spec_arg *a = &st->args[i];
        if (a->kind == ARG_LIST) {
            n_lists++;
            for (size_t k = 0; k < a->n_list; k++)
                if (token_in_vocab(it, a->col, a->list[k]) != 0) return NULL;
        } else if (a->kind == ARG_STR) {
            n_strs++;
        } else {
            return fail_at(st, a->col, "dry: sequence breakers are [token ids] or \"strings\""), NULL;
        }
    }
    if (n_lists && n_strs) return fail_at(st, it->col, "dry: use either [token id] or \"string\" breakers, not both"), NULL;
    const float mult = num(it, 0), base = num(it, 1);
    if (n_strs) {
        const bool enabled = mult != 0.0f && base >= 1.0f && last_n > 0;
        if (enabled && (!it->env->vocab || !it->env->vocab->tokenize))
            return fail_at(st, st->args[4].col, "dry: string breakers need a vocabulary (use [token ids] without a model)"), NULL;
        const char *strs[64];
        if (n_strs > 64) return fail_at(st, st->args[4 + 64].col, "dry: at most 64 breakers"), NULL;
        for (size_t i = 0; i < n_strs; i++) strs[i] = st->args[4 + i].str;
        return sift_sampler_init_dry(it->env->vocab, mult, base, (int32_t)allowed, (int32_t)last_n, strs, n_strs);
    }
    const sift_token *seqs[256];
    size_t lens[256];
    if (n_lists > 256) return fail_at(st, st->args[4 + 256].col, "dry: at most 256 breakers"), NULL;
    for (size_t i = 0; i < n_lists; i++) {
        seqs[i] = st->args[4 + i].list;
        lens[i] = st->args[4 + i].n_list;
    }
    return sift_sampler_init_dry_tokens(mult, base, (int32_t)allowed, (int32_t)last_n, seqs, lens, n_lists);
}

static sift_sampler *build_logit_bias(item_ctx *it)
{
    spec_state *st = it->st;
    sift_logit_bias *lb = malloc((st->n_args ? st->n_args : 1) * sizeof *lb);
    if (!lb) return fail_at(st, it->col, "out of memory"), NULL;
    for (size_t i = 0; i < st->n_args; i++) {
        const spec_arg *a = &st->args[i];
        if (a->kind != ARG_PAIR) {
            free(lb);
            return fail_at(st, a->col, "logit_bias: entries are token:bias"), NULL;
        }
        if (token_in_vocab(it, a->col, a->id) != 0) {
            free(lb);
            return NULL;
        }
        lb[i] = (sift_logit_bias){a->id, (float)a->num};
    }
    sift_sampler *s = sift_sampler_init_logit_bias(it->env->n_vocab, st->n_args, lb);
    free(lb);
    return s;
}

static const char *const known_names =
    "greedy, dist, top_k, top_p, min_p, typical, temp, temp_ext, xtc, top_n_sigma, mirostat, "
    "mirostat_v2, penalties, dry, logit_bias, adaptive_p, infill";

static sift_sampler *build_item(item_ctx *it)
{
    const char *n = it->name;
    double a = 0, b = 0;
    uint32_t seed = 0;
    if (!strcmp(n, "dry")) return build_dry(it);
    if (!strcmp(n, "logit_bias")) return build_logit_bias(it);
    if (!strcmp(n, "greedy")) return want_max(it, 0) ? NULL : sift_sampler_init_greedy();
    if (!strcmp(n, "dist")) return want_max(it, 1) || seed_arg(it, 0, &seed) ? NULL : sift_sampler_init_dist(seed);
    if (!strcmp(n, "top_k"))
        return want_max(it, 1) || integer(it, 0, "k", -2147483648.0, 2147483647.0, 0, &a) ? NULL
                                                                                          : sift_sampler_init_top_k((int32_t)a);
    if (!strcmp(n, "top_p") || !strcmp(n, "min_p") || !strcmp(n, "typical")) {
        if (want_max(it, 2) || integer(it, 1, "min_keep", 0, 2147483647.0, 0, &a)) return NULL;
        return n[0] == 't' && n[1] == 'o' ? sift_sampler_init_top_p(num(it, 0), (size_t)a)
               : n[0] == 'm'              ? sift_sampler_init_min_p(num(it, 0), (size_t)a)
                                          : sift_sampler_init_typical(num(it, 0), (size_t)a);
    }
    if (!strcmp(n, "temp")) return want_max(it, 1) ? NULL : sift_sampler_init_temp(num(it, 0));
    if (!strcmp(n, "temp_ext")) return want_max(it, 3) ? NULL : sift_sampler_init_temp_ext(num(it, 0), num(it, 1), num(it, 2));
    if (!strcmp(n, "xtc"))
        return want_max(it, 4) || integer(it, 2, "min_keep", 0, 2147483647.0, 0, &a) || seed_arg(it, 3, &seed)
                   ? NULL
                   : sift_sampler_init_xtc(num(it, 0), num(it, 1), (size_t)a, seed);
    if (!strcmp(n, "top_n_sigma")) return want_max(it, 1) ? NULL : sift_sampler_init_top_n_sigma(num(it, 0));
    if (!strcmp(n, "mirostat"))
        return want_max(it, 4) || seed_arg(it, 0, &seed) || integer(it, 3, "m", -2147483648.0, 2147483647.0, 0, &b)
                   ? NULL
                   : sift_sampler_init_mirostat(it->env->n_vocab, seed, num(it, 1), num(it, 2), (int32_t)b);
    if (!strcmp(n, "mirostat_v2"))
        return want_max(it, 3) || seed_arg(it, 0, &seed) ? NULL : sift_sampler_init_mirostat_v2(seed, num(it, 1), num(it, 2));
    if (!strcmp(n, "penalties"))
        return want_max(it, 4) || integer(it, 0, "last_n", -2147483648.0, 2147483647.0, 0, &a)
                   ? NULL
                   : sift_sampler_init_penalties((int32_t)a, num(it, 1), num(it, 2), num(it, 3));
    if (!strcmp(n, "adaptive_p"))
        return want_max(it, 3) || seed_arg(it, 2, &seed) ? NULL : sift_sampler_init_adaptive_p(num(it, 0), num(it, 1), seed);
    if (!strcmp(n, "infill")) {
        if (want_max(it, 0)) return NULL;
        if (!it->env->vocab) return fail_at(it->st, it->col, "infill needs a vocabulary (a model)"), NULL;
        return sift_sampler_init_infill(it->env->vocab, it->env->eot);
    }
    return fail_at(it->st, it->col, "unknown sampler '%s' (known: %s)", n, known_names), NULL;
}

sift_status sift_chain_add_spec(sift_chain *chain, const char *spec, const sift_chain_env *env, sift_error *err)
{
    if (!chain || !spec) return sift__error_set(err, SIFT_E_INVAL, "chain spec: %s", !chain ? "no chain" : "no spec");
    const sift_chain_env no_env = {.n_vocab = 0, .vocab = NULL, .eot = SIFT_TOKEN_NULL, .default_seed = 0};
    if (!env) env = &no_env;
    spec_state st = {.spec = spec, .p = spec, .err = err, .status = SIFT_OK};
    sift_sampler *built[256];
    size_t n_built = 0;
    for (;;) {
        while (isspace((unsigned char)*st.p) || *st.p == ';') st.p++;
        if (!*st.p) break;
        const char *name_at = st.p;
        char name[32];
        size_t n = 0;
        while (isalnum((unsigned char)*st.p) || *st.p == '_') {
            if (n < sizeof name - 1) name[n++] = *st.p;
            st.p++;
        }
        name[n] = 0;
        if (n == 0) {
            fail_at(&st, col_of(&st, name_at), "sampler name expected");
            goto fail;
        }
        if (n_built == sizeof built / sizeof *built) {
            fail_at(&st, col_of(&st, name_at), "too many samplers (at most 256)");
            goto fail;
        }
        if (read_args(&st) != 0) goto fail;
        item_ctx it = {&st, name, col_of(&st, name_at), env};
        sift_sampler *s = build_item(&it);
        free_args(&st);
        if (!s) {
            if (st.status == SIFT_OK)
                fail_at(&st, col_of(&st, name_at), "%s: could not create the sampler (out of memory or bad arguments)", name);
            goto fail;
        }
        built[n_built++] = s;
        skip_ws(&st);
        if (*st.p && *st.p != ';') {
            fail_at(&st, col_of(&st, st.p), "';' expected between samplers");
            goto fail;
        }
    }
    for (size_t i = 0; i < n_built; i++) {
        if (sift_chain_add(chain, built[i]) != SIFT_OK) {
            /* undo: the chain must end as it began */
            for (size_t j = 0; j < i; j++) sift_sampler_free(sift_chain_remove(chain, sift_chain_n(chain) - 1));
            for (size_t j = i; j < n_built; j++) sift_sampler_free(built[j]);
            free(st.args);
            return sift__error_set(err, SIFT_E_NOMEM, "chain spec: out of memory");
        }
    }
    free(st.args);
    return SIFT_OK;
fail:
    free_args(&st);
    free(st.args);
    for (size_t i = 0; i < n_built; i++) sift_sampler_free(built[i]);
    return st.status != SIFT_OK ? st.status : SIFT_E_PARSE;
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
