/*
 * plan.c - chain spec -> device program + CPU tail; sampling params -> chain spec; the
 * passes of a run. See plan.h for the rules.
 *
 * The spec is parsed twice, on purpose. First libsift builds the CPU chain from it: that
 * validates everything with the CPU's own messages and tells, per item, whether the
 * sampler is a disabled no-op ("?top-k") and which seed a random sampler really uses.
 * Then a small splitter cuts the (now known-good) text into items and reads the numbers of
 * the device items; the CPU tail is the remaining items' text, unchanged.
 */
#include "gpu/plan.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"

/* ---- splitting a valid spec into items ------------------------------------------------- */

typedef struct spec_item {
    char name[32];
    const char *start; /* the item's text: name(args) */
    const char *end;
    const char *args;  /* between the parentheses */
    const char *args_end;
} spec_item;

/* Items of a spec libsift accepted (so: name '(' ... ')' separated by ';'). Quoted strings
 * may hold ';' and parentheses. Returns the count, or -1 if the text is not such a spec. */
static int split_items(const char *spec, spec_item *items, int max)
{
    const char *p = spec;
    int n = 0;
    for (;;) {
        while (isspace((unsigned char)*p) || *p == ';') p++;
        if (!*p) return n;
        if (n == max) return -1;
        spec_item *it = &items[n];
        it->start = p;
        size_t len = 0;
        while (isalnum((unsigned char)*p) || *p == '_') {
            if (len < sizeof it->name - 1) it->name[len++] = *p;
            p++;
        }
        it->name[len] = 0;
        while (isspace((unsigned char)*p)) p++;
        if (len == 0 || *p != '(') return -1;
        it->args = ++p;
        while (*p && *p != ')') {
            if (*p == '"') {
                for (p++; *p && *p != '"'; p++)
                    if (*p == '\\' && p[1]) p++;
                if (!*p) return -1;
            }
            p++;
        }
        if (*p != ')') return -1;
        it->args_end = p;
        it->end = ++p;
        n++;
    }
}

/* The numbers of a device item's arguments: plain numbers and id:value pairs (the only
 * kinds device samplers take). Missing arguments read as 0 (what the CPU parser does). */
typedef struct num_args {
    int n;
    double v[8];
} num_args;

static double read_num(const char **pp)
{
    const char *p = *pp;
    while (isspace((unsigned char)*p)) p++;
    const char *q = p + (*p == '+' || *p == '-');
    if (strncmp(q, "inf", 3) == 0) {
        *pp = q + 3;
        return *p == '-' ? -INFINITY : INFINITY;
    }
    char *end;
    double v = strtod(p, &end);
    *pp = end;
    return v;
}

static void read_args(const spec_item *it, num_args *a)
{
    memset(a, 0, sizeof *a);
    const char *p = it->args;
    while (p < it->args_end && isspace((unsigned char)*p)) p++;
    while (p < it->args_end && a->n < 8) {
        a->v[a->n++] = read_num(&p);
        while (p < it->args_end && *p != ',') p++;
        if (p < it->args_end) p++;
    }
}

/* id:bias pairs of a logit_bias item, appended to row->bias */
static sift_status read_bias(const spec_item *it, sift__gpu_rowspec *row, int32_t *count)
{
    int32_t n = 0;
    for (const char *p = it->args; p < it->args_end; p++) n += *p == ':';
    sift__gpu_bias *b = realloc(row->bias, (size_t)(row->n_bias + n + 1) * sizeof *b);
    if (!b) return SIFT_E_NOMEM;
    row->bias = b;
    const char *p = it->args;
    int32_t k = 0;
    while (p < it->args_end && k < n) {
        const double id = read_num(&p);
        while (p < it->args_end && *p != ':') p++;
        p++;
        const double v = read_num(&p);
        b[row->n_bias + k++] = (sift__gpu_bias){(int32_t)id, (float)v};
        while (p < it->args_end && *p != ',') p++;
        if (p < it->args_end) p++;
    }
    row->n_bias += k;
    *count = k;
    return SIFT_OK;
}

/* ---- classification ----------------------------------------------------------------------- */

enum { C_SKIP = 0, C_CPU = -1 }; /* else an op kind */

static int is_filter(int kind)
{
    return kind == SIFT_GPU_OP_TOP_K || kind == SIFT_GPU_OP_TOP_P || kind == SIFT_GPU_OP_MIN_P;
}

/* What item `it` (whose CPU sampler is smpl) is on the device, and its parameters. */
static int classify(const spec_item *it, const sift_sampler *smpl, sift__gpu_param *pm)
{
    const char *name = sift_sampler_name(smpl);
    const int off = name[0] == '?';
    num_args a;
    read_args(it, &a);
    memset(pm, 0, sizeof *pm);
    pm->on = !off;
    const char *n = it->name;
    if (!strcmp(n, "greedy")) return SIFT_GPU_OP_GREEDY;
    if (!strcmp(n, "dist")) {
        pm->seed = sift_sampler_get_seed(smpl);
        return SIFT_GPU_OP_DIST;
    }
    if (!strcmp(n, "top_k")) {
        pm->k = (int32_t)a.v[0];
        return SIFT_GPU_OP_TOP_K;
    }
    if (!strcmp(n, "top_p") || !strcmp(n, "min_p")) {
        pm->f0 = (float)a.v[0];
        pm->k = (int32_t)a.v[1];
        if (n[0] == 'm') {
            pm->f1 = logf(pm->f0); /* min_p.c: max_l + logf(ctx->p) */
            return SIFT_GPU_OP_MIN_P;
        }
        return SIFT_GPU_OP_TOP_P;
    }
    if (!strcmp(n, "temp")) {
        pm->f0 = (float)a.v[0];
        return SIFT_GPU_OP_TEMP;
    }
    if (!strcmp(n, "temp_ext")) {
        if ((float)a.v[1] > 0.0f) return off ? C_SKIP : C_CPU; /* a dynamic range: CPU only */
        pm->f0 = (float)a.v[0];
        return SIFT_GPU_OP_TEMP;
    }
    if (!strcmp(n, "penalties")) {
        pm->k = (int32_t)a.v[0];
        pm->f0 = (float)a.v[1];
        pm->f1 = (float)a.v[2];
        pm->f2 = (float)a.v[3];
        if (pm->k < 0) pm->k = 0;
        return SIFT_GPU_OP_PENALTIES;
    }
    if (!strcmp(n, "logit_bias")) return SIFT_GPU_OP_BIAS;
    return off ? C_SKIP : C_CPU;
}

/* ---- plans ---------------------------------------------------------------------------------- */

void sift__gpu_rowspec_free(sift__gpu_rowspec *row)
{
    if (!row) return;
    free(row->bias);
    free(row->tail);
    memset(row, 0, sizeof *row);
}

static char *join_items(const spec_item *items, int from, int to)
{
    size_t len = 1;
    for (int i = from; i < to; i++) len += (size_t)(items[i].end - items[i].start) + 1;
    char *s = malloc(len);
    if (!s) return NULL;
    size_t k = 0;
    for (int i = from; i < to; i++) {
        if (k) s[k++] = ';';
        const size_t l = (size_t)(items[i].end - items[i].start);
        memcpy(s + k, items[i].start, l);
        k += l;
    }
    s[k] = 0;
    return s;
}

typedef struct walk_ctx {
    sift_chain *cpu;
    spec_item *items;
    int n_items;
} walk_ctx;

static sift_status walk_open(walk_ctx *w, const char *spec, const sift_chain_env *env, int32_t n_vocab,
                             sift_error *err)
{
    memset(w, 0, sizeof *w);
    sift_chain_env e = {.n_vocab = n_vocab, .vocab = NULL, .eot = SIFT_TOKEN_NULL, .default_seed = 0};
    if (env) {
        e = *env;
        e.n_vocab = n_vocab;
    }
    if (!spec) return sift__error_set(err, SIFT_E_INVAL, "device chain: no spec");
    w->cpu = sift_chain_from_spec(spec, &e, err);
    if (!w->cpu) return err ? err->status : SIFT_E_PARSE;
    w->items = malloc(SIFT_GPU_MAX_ITEMS * sizeof *w->items);
    if (!w->items) {
        sift_chain_free(w->cpu);
        return sift__error_set(err, SIFT_E_NOMEM, "device chain: out of memory");
    }
    w->n_items = split_items(spec, w->items, SIFT_GPU_MAX_ITEMS);
    if (w->n_items != sift_chain_n(w->cpu)) { /* cannot happen for a spec libsift accepted */
        sift_chain_free(w->cpu);
        free(w->items);
        return sift__error_set(err, SIFT_E_PARSE, "device chain: cannot split the spec into samplers");
    }
    return SIFT_OK;
}

static void walk_close(walk_ctx *w)
{
    sift_chain_free(w->cpu);
    free(w->items);
}

static void describe(sift__gpu_plan *plan, const walk_ctx *w)
{
    char *d = plan->desc;
    const size_t cap = sizeof plan->desc;
    size_t k = (size_t)snprintf(d, cap, "device:");
    int first = 1;
    for (int i = 0; i < plan->n_dev_items && k < cap; i++) {
        const char *nm = sift_sampler_name(sift_chain_get(w->cpu, i));
        k += (size_t)snprintf(d + k, cap - k, "%s%s", first ? " " : " -> ", nm);
        first = 0;
    }
    if (first && k < cap) k += (size_t)snprintf(d + k, cap - k, " (none)");
    if (plan->n_dev_items < w->n_items && k < cap) {
        k += (size_t)snprintf(d + k, cap - k, " | cpu:");
        for (int i = plan->n_dev_items; i < w->n_items && k < cap; i++)
            k += (size_t)snprintf(d + k, cap - k, "%s%s", i == plan->n_dev_items ? " " : " -> ",
                                  sift_sampler_name(sift_chain_get(w->cpu, i)));
    }
}

sift_status sift__gpu_plan_spec(const char *spec, const sift_chain_env *env, int32_t n_vocab, int cpu_dist,
                                sift__gpu_plan *plan, sift__gpu_rowspec *row, sift_error *err)
{
    memset(plan, 0, sizeof *plan);
    memset(row, 0, sizeof *row);
    if (n_vocab < 1 || n_vocab > SIFT_GPU_MAX_VOCAB)
        return sift__error_set(err, SIFT_E_INVAL, "device chain: n_vocab %d out of range [1, %d]", (int)n_vocab,
                              SIFT_GPU_MAX_VOCAB);
    walk_ctx w;
    sift_status st = walk_open(&w, spec, env, n_vocab, err);
    if (st != SIFT_OK) return st;
    plan->n_items = w.n_items;
    plan->n_vocab = n_vocab;
    plan->cpu_dist = cpu_dist != 0;
    int seen_filter = 0, n_temp = 0, stop = w.n_items;
    for (int i = 0; i < w.n_items; i++) {
        sift__gpu_param pm;
        const int kind = classify(&w.items[i], sift_chain_get(w.cpu, i), &pm);
        if (kind == C_CPU) {
            stop = i;
            break;
        }
        if (i < SIFT_GPU_MAX_ITEMS) {
            plan->item_op[i] = -1;
            /* the display name, cut to the plan's slot (a bounded precision: no truncation warning) */
            snprintf(plan->item_name[i], sizeof plan->item_name[i], "%.*s", (int)sizeof plan->item_name[i] - 1,
                     w.items[i].name);
        }
        if (kind == C_SKIP) continue;
        if ((kind == SIFT_GPU_OP_BIAS || kind == SIFT_GPU_OP_PENALTIES) && seen_filter) {
            stop = i;
            break;
        }
        if (kind == SIFT_GPU_OP_PENALTIES && pm.on && pm.k > SIFT_GPU_MAX_WINDOW) {
            stop = i;
            break;
        }
        if (kind == SIFT_GPU_OP_TEMP && n_temp == SIFT_GPU_MAX_DIV) {
            stop = i;
            break;
        }
        if ((kind == SIFT_GPU_OP_GREEDY || kind == SIFT_GPU_OP_DIST) && i != w.n_items - 1) {
            stop = i;
            break;
        }
        if (kind == SIFT_GPU_OP_DIST && cpu_dist) {
            stop = i;
            break;
        }
        if (plan->n_ops == SIFT_GPU_MAX_OPS) {
            stop = i;
            break;
        }
        if (kind == SIFT_GPU_OP_BIAS) {
            int32_t cnt = 0;
            pm.off = row->n_bias;
            if ((st = read_bias(&w.items[i], row, &cnt)) != SIFT_OK) goto fail;
            pm.k = cnt;
        }
        if (kind == SIFT_GPU_OP_PENALTIES) {
            const int32_t cap = pm.k < SIFT_GPU_MAX_WINDOW ? pm.k : SIFT_GPU_MAX_WINDOW;
            if (cap > plan->window) plan->window = cap;
        }
        n_temp += kind == SIFT_GPU_OP_TEMP;
        seen_filter |= is_filter(kind);
        plan->item_op[i] = (int16_t)plan->n_ops;
        plan->ops[plan->n_ops] = (sift__gpu_op){kind, i};
        row->prm[plan->n_ops++] = pm;
        plan->selects = kind == SIFT_GPU_OP_GREEDY || kind == SIFT_GPU_OP_DIST;
    }
    plan->n_dev_items = stop;
    row->tail = join_items(w.items, stop, w.n_items);
    if (!row->tail) {
        st = SIFT_E_NOMEM;
        goto fail;
    }
    describe(plan, &w);
    walk_close(&w);
    return SIFT_OK;
fail:
    walk_close(&w);
    sift__gpu_rowspec_free(row);
    return sift__error_set(err, st, "device chain: out of memory");
}

static const char *op_name(int kind)
{
    switch (kind) {
    case SIFT_GPU_OP_BIAS: return "logit_bias";
    case SIFT_GPU_OP_PENALTIES: return "penalties";
    case SIFT_GPU_OP_TEMP: return "temp";
    case SIFT_GPU_OP_TOP_K: return "top_k";
    case SIFT_GPU_OP_TOP_P: return "top_p";
    case SIFT_GPU_OP_MIN_P: return "min_p";
    case SIFT_GPU_OP_GREEDY: return "greedy";
    case SIFT_GPU_OP_DIST: return "dist";
    default: return "?";
    }
}

sift_status sift__gpu_plan_row(const sift__gpu_plan *plan, const char *spec, const sift_chain_env *env,
                               sift__gpu_rowspec *row, sift_error *err)
{
    memset(row, 0, sizeof *row);
    walk_ctx w;
    sift_status st = walk_open(&w, spec, env, plan->n_vocab, err);
    if (st != SIFT_OK) return st;
    if (w.n_items < plan->n_dev_items) {
        st = sift__error_set(err, SIFT_E_INVAL, "device chain: this sequence's spec has %d samplers; the device part of the chain has %d",
                            w.n_items, (int)plan->n_dev_items);
        goto fail;
    }
    for (int i = 0; i < plan->n_dev_items; i++) {
        if (strcmp(w.items[i].name, plan->item_name[i]) != 0) {
            st = sift__error_set(err, SIFT_E_INVAL, "device chain: sampler %d is %s, the chain has %s there", i + 1,
                                w.items[i].name, plan->item_name[i]);
            goto fail;
        }
        sift__gpu_param pm;
        const int kind = classify(&w.items[i], sift_chain_get(w.cpu, i), &pm);
        const int op = plan->item_op[i];
        if (op < 0) { /* skipped in the base: must stay off */
            if (kind != C_SKIP && !(kind > 0 && !pm.on)) {
                st = sift__error_set(err, SIFT_E_INVAL, "device chain: sampler %d (%s) is off in the chain and cannot be turned on per sequence",
                                    i + 1, w.items[i].name);
                goto fail;
            }
            continue;
        }
        const int want = plan->ops[op].kind;
        if (kind != want) {
            st = sift__error_set(err, SIFT_E_INVAL, "device chain: sampler %d (%s) must stay a device %s (e.g. temp_ext without a dynamic range)",
                                i + 1, w.items[i].name, op_name(want));
            goto fail;
        }
        if (kind == SIFT_GPU_OP_PENALTIES && pm.on && pm.k > plan->window) {
            st = sift__error_set(err, SIFT_E_INVAL, "device chain: penalties window %d is longer than the chain's (%d)",
                                (int)pm.k, (int)plan->window);
            goto fail;
        }
        if (kind == SIFT_GPU_OP_BIAS) {
            int32_t cnt = 0;
            pm.off = row->n_bias;
            if ((st = read_bias(&w.items[i], row, &cnt)) != SIFT_OK) {
                st = sift__error_set(err, st, "device chain: out of memory");
                goto fail;
            }
            pm.k = cnt;
        }
        row->prm[op] = pm;
    }
    if (plan->selects && w.n_items > plan->n_dev_items) {
        st = sift__error_set(err, SIFT_E_INVAL, "device chain: the chain ends on the device with %s; this sequence's spec goes on after it",
                            plan->item_name[plan->n_dev_items - 1]);
        goto fail;
    }
    row->tail = join_items(w.items, plan->n_dev_items, w.n_items);
    if (!row->tail) {
        st = sift__error_set(err, SIFT_E_NOMEM, "device chain: out of memory");
        goto fail;
    }
    walk_close(&w);
    return SIFT_OK;
fail:
    walk_close(&w);
    sift__gpu_rowspec_free(row);
    return st;
}

int32_t sift__gpu_tail_cap(const sift__gpu_plan *plan, const sift__gpu_rowspec *const *rows, int32_t n_seq)
{
    if (plan->n_vocab <= SIFT_GPU_SMALL) return plan->n_vocab;
    /* rows enter the tail after a compaction; if the first filter is a top_k every row
     * runs with k <= SIFT_GPU_SMALL, no later list is longer than the largest k */
    for (int32_t j = 0; j < plan->n_ops; j++) {
        const int kind = plan->ops[j].kind;
        if (!is_filter(kind)) continue;
        if (kind != SIFT_GPU_OP_TOP_K) return SIFT_GPU_SMALL;
        int32_t cap = 1;
        for (int32_t r = 0; r < n_seq; r++) {
            const sift__gpu_param *pm = &rows[r]->prm[j];
            if (!pm->on || pm->k <= 0 || pm->k > SIFT_GPU_SMALL) return SIFT_GPU_SMALL;
            cap = pm->k > cap ? pm->k : cap;
        }
        return cap;
    }
    return SIFT_GPU_SMALL;
}

int32_t sift__gpu_row_bound(const sift__gpu_plan *plan, const sift__gpu_rowspec *row)
{
    int32_t b = plan->n_vocab;
    for (int i = 0; i < plan->n_ops; i++)
        if (plan->ops[i].kind == SIFT_GPU_OP_TOP_K && row->prm[i].on && row->prm[i].k > 0 && row->prm[i].k < b)
            b = row->prm[i].k;
    return b;
}

/* ---- sampling params -> spec ------------------------------------------------------------------ */

typedef struct strbuf {
    char *s;
    size_t n, cap;
    int oom;
} strbuf;

__attribute__((format(printf, 2, 3))) static void sb_printf(strbuf *b, const char *fmt, ...)
{
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        const int k = vsnprintf(b->s + b->n, b->cap - b->n, fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->oom = 1;
            return;
        }
        if ((size_t)k < b->cap - b->n) {
            b->n += (size_t)k;
            return;
        }
        const size_t cap = 2 * b->cap + (size_t)k + 64;
        char *s = realloc(b->s, cap);
        if (!s) {
            b->oom = 1;
            return;
        }
        b->s = s;
        b->cap = cap;
    }
}

/* a float that reads back as itself; inf as the parser spells it */
static void sb_float(strbuf *b, float f)
{
    if (isinf(f)) sb_printf(b, f < 0 ? "-inf" : "inf");
    else sb_printf(b, "%.9g", (double)f);
}

static void sb_seed(strbuf *b, uint32_t seed)
{
    if (seed == SIFT_DEFAULT_SEED) sb_printf(b, "-1");
    else sb_printf(b, "%u", (unsigned)seed);
}

/* a DRY breaker as a spec string: "\n" etc. escaped, other bytes as they are */
static void sb_string(strbuf *b, const char *s)
{
    sb_printf(b, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') sb_printf(b, "\\%c", *p);
        else if (*p == '\n') sb_printf(b, "\\n");
        else if (*p == '\t') sb_printf(b, "\\t");
        else if (*p == '\r') sb_printf(b, "\\r");
        else if (*p < 0x20 || *p == 0x7f) sb_printf(b, "\\x%02x", *p);
        else sb_printf(b, "%c", *p);
    }
    sb_printf(b, "\"");
}

sift_status sift__gpu_params_spec(const sift_sampling_params *sp, const sift_chain_env *env, char **out,
                                  sift_error *err)
{
    *out = NULL;
    if (!sp) return sift__error_set(err, SIFT_E_INVAL, "sampling params: none given");
    if (sp->n_samplers < 0 || sp->n_samplers > SIFT_SAMPLING_MAX_SAMPLERS)
        return sift__error_set(err, SIFT_E_INVAL, "sampling params: n_samplers %d out of range", (int)sp->n_samplers);
    if (sp->mirostat < 0 || sp->mirostat > 2)
        return sift__error_set(err, SIFT_E_INVAL, "sampling params: mirostat must be 0, 1 or 2, got %d", (int)sp->mirostat);
    if (sp->n_logit_bias && !sp->logit_bias)
        return sift__error_set(err, SIFT_E_INVAL, "sampling params: n_logit_bias > 0 without logit_bias");
    /* logit biases, then every EOG token banned with ignore_eos (params.c's order) */
    size_t n_eog = 0;
    if (sp->ignore_eos) {
        if (!env || !env->vocab || !env->vocab->attr)
            return sift__error_set(err, SIFT_E_INVAL, "sampling params: ignore_eos needs the vocabulary (EOG tokens)");
        for (int32_t t = 0; t < env->vocab->n_tokens; t++) n_eog += (env->vocab->attr[t] & SIFT_TOKEN_ATTR_EOG) != 0;
    }
    strbuf b = {.s = malloc(256), .n = 0, .cap = 256, .oom = 0};
    if (!b.s) return sift__error_set(err, SIFT_E_NOMEM, "sampling params: out of memory");
    b.s[0] = 0;
    const char *sep = "";
    if (sp->n_logit_bias + n_eog > 0) {
        sb_printf(&b, "logit_bias(");
        for (size_t i = 0; i < sp->n_logit_bias; i++) {
            if (isnan(sp->logit_bias[i].bias)) {
                free(b.s);
                return sift__error_set(err, SIFT_E_INVAL, "sampling params: logit bias %zu is NaN", i);
            }
            sb_printf(&b, "%s%d:", i ? "," : "", (int)sp->logit_bias[i].token);
            sb_float(&b, sp->logit_bias[i].bias);
        }
        for (int32_t t = 0, k = (int32_t)sp->n_logit_bias; n_eog && t < env->vocab->n_tokens; t++)
            if (env->vocab->attr[t] & SIFT_TOKEN_ATTR_EOG) sb_printf(&b, "%s%d:-inf", k++ ? "," : "", (int)t);
        sb_printf(&b, ")");
        sep = ";";
    }
    const int mk = sp->min_keep > 0 ? sp->min_keep : 0;
    if (sp->mirostat == 0) {
        int adaptive = 0;
        for (int32_t i = 0; i < sp->n_samplers; i++) {
            if (sp->samplers[i] == SIFT_SAMPLER_ADAPTIVE_P) { /* a selector: always added last */
                adaptive = 1;
                continue;
            }
            sb_printf(&b, "%s", sep);
            sep = ";";
            switch (sp->samplers[i]) {
            case SIFT_SAMPLER_PENALTIES:
                sb_printf(&b, "penalties(%d,", (int)sp->penalty_last_n);
                sb_float(&b, sp->penalty_repeat);
                sb_printf(&b, ",");
                sb_float(&b, sp->penalty_freq);
                sb_printf(&b, ",");
                sb_float(&b, sp->penalty_present);
                sb_printf(&b, ")");
                break;
            case SIFT_SAMPLER_DRY: {
                sb_printf(&b, "dry(");
                sb_float(&b, sp->dry_multiplier);
                sb_printf(&b, ",");
                sb_float(&b, sp->dry_base);
                sb_printf(&b, ",%d,%d", (int)sp->dry_allowed_length, (int)sp->dry_penalty_last_n);
                int32_t nb = sp->n_dry_sequence_breakers;
                nb = nb < 0 ? 0 : nb > SIFT_SAMPLING_MAX_BREAKERS ? SIFT_SAMPLING_MAX_BREAKERS : nb;
                for (int32_t k = 0; k < nb; k++) {
                    char br[SIFT_SAMPLING_MAX_BREAKER_LEN + 1];
                    memcpy(br, sp->dry_sequence_breakers[k], SIFT_SAMPLING_MAX_BREAKER_LEN);
                    br[SIFT_SAMPLING_MAX_BREAKER_LEN] = 0;
                    if (!br[0]) continue; /* the spec has no empty strings; params.c passes them on, DRY skips them */
                    sb_printf(&b, ",");
                    sb_string(&b, br);
                }
                sb_printf(&b, ")");
                break;
            }
            case SIFT_SAMPLER_TOP_N_SIGMA:
                sb_printf(&b, "top_n_sigma(");
                sb_float(&b, sp->top_n_sigma);
                sb_printf(&b, ")");
                break;
            case SIFT_SAMPLER_TOP_K: sb_printf(&b, "top_k(%d)", (int)sp->top_k); break;
            case SIFT_SAMPLER_TYPICAL_P:
                sb_printf(&b, "typical(");
                sb_float(&b, sp->typ_p);
                sb_printf(&b, ",%d)", mk);
                break;
            case SIFT_SAMPLER_TOP_P:
                sb_printf(&b, "top_p(");
                sb_float(&b, sp->top_p);
                sb_printf(&b, ",%d)", mk);
                break;
            case SIFT_SAMPLER_MIN_P:
                sb_printf(&b, "min_p(");
                sb_float(&b, sp->min_p);
                sb_printf(&b, ",%d)", mk);
                break;
            case SIFT_SAMPLER_XTC:
                sb_printf(&b, "xtc(");
                sb_float(&b, sp->xtc_probability);
                sb_printf(&b, ",");
                sb_float(&b, sp->xtc_threshold);
                sb_printf(&b, ",%d,", mk);
                sb_seed(&b, sp->seed);
                sb_printf(&b, ")");
                break;
            case SIFT_SAMPLER_TEMPERATURE:
                sb_printf(&b, "temp_ext(");
                sb_float(&b, sp->temp);
                sb_printf(&b, ",");
                sb_float(&b, sp->dynatemp_range);
                sb_printf(&b, ",");
                sb_float(&b, sp->dynatemp_exponent);
                sb_printf(&b, ")");
                break;
            case SIFT_SAMPLER_INFILL: sb_printf(&b, "infill()"); break;
            default:
                free(b.s);
                return sift__error_set(err, SIFT_E_INVAL, "sampling params: unknown sampler type %d", (int)sp->samplers[i]);
            }
        }
        sb_printf(&b, "%s", sep);
        if (adaptive) {
            sb_printf(&b, "adaptive_p(");
            sb_float(&b, sp->adaptive_target);
            sb_printf(&b, ",");
            sb_float(&b, sp->adaptive_decay);
            sb_printf(&b, ",");
            sb_seed(&b, sp->seed);
            sb_printf(&b, ")");
        } else {
            sb_printf(&b, "dist(");
            sb_seed(&b, sp->seed);
            sb_printf(&b, ")");
        }
    } else {
        sb_printf(&b, "%stemp(", sep);
        sb_float(&b, sp->temp);
        sb_printf(&b, ");");
        if (sp->mirostat == 1) {
            sb_printf(&b, "mirostat(");
            sb_seed(&b, sp->seed);
            sb_printf(&b, ",");
            sb_float(&b, sp->mirostat_tau);
            sb_printf(&b, ",");
            sb_float(&b, sp->mirostat_eta);
            sb_printf(&b, ",100)");
        } else {
            sb_printf(&b, "mirostat_v2(");
            sb_seed(&b, sp->seed);
            sb_printf(&b, ",");
            sb_float(&b, sp->mirostat_tau);
            sb_printf(&b, ",");
            sb_float(&b, sp->mirostat_eta);
            sb_printf(&b, ")");
        }
    }
    if (b.oom) {
        free(b.s);
        return sift__error_set(err, SIFT_E_NOMEM, "sampling params: out of memory");
    }
    *out = b.s;
    return SIFT_OK;
}

/* ---- the passes of a run ------------------------------------------------------------------- */

const char *sift__gpu_step_name(int32_t kind)
{
    static const char *const names[] = {"?",     "begin", "pen_prep", "copy", "bias",  "pen_apply",
                                        "temp",  "argmax", "max",     "hist", "count", "write",
                                        "dist",  "tail",  "finish",   "out",  "accept"};
    return kind > 0 && kind <= SIFT_GPU_STEP_ACCEPT ? names[kind] : "?";
}

static void push(sift__gpu_step *steps, int32_t *n, int32_t kind, int32_t op, int32_t level)
{
    steps[(*n)++] = (sift__gpu_step){kind, op, level};
}

int32_t sift__gpu_steps(const sift__gpu_plan *plan, const sift__gpu_rowspec *const *rows, int32_t n_seq,
                        sift__gpu_step *steps)
{
    int32_t n = 0;
    /* what may be true of the rows at this point, whatever their data: */
    int may_full = plan->n_vocab > SIFT_GPU_SMALL; /* some row is still a long list */
    int may_tail = !may_full;                      /* some row has moved to the tail kernel */
    int max_known = 0;                             /* every long row knows its max */
    int materialized = 0;                          /* the input was copied to buffer 0 */
    int has_pen = 0;
    push(steps, &n, SIFT_GPU_STEP_BEGIN, -1, 0);
    for (int32_t j = 0; j < plan->n_ops; j++) {
        if (plan->ops[j].kind != SIFT_GPU_OP_PENALTIES) continue;
        int on = 0;
        for (int32_t r = 0; r < n_seq; r++) on |= rows[r]->prm[j].on;
        if (!on) continue; /* a window nobody uses is neither read nor kept */
        has_pen = 1;
        push(steps, &n, SIFT_GPU_STEP_PEN_PREP, j, 0);
    }
    for (int32_t j = 0; j < plan->n_ops; j++) {
        const int kind = plan->ops[j].kind;
        int any_on = 0, any_pos = 0, any_nonpos = 0, all_small = 1;
        for (int32_t r = 0; r < n_seq; r++) {
            const sift__gpu_param *pm = &rows[r]->prm[j];
            any_on |= pm->on;
            if (pm->on && kind == SIFT_GPU_OP_TEMP) {
                any_pos |= pm->f0 > 0.0f;
                any_nonpos |= !(pm->f0 > 0.0f);
            }
            if (!(kind == SIFT_GPU_OP_TOP_K && pm->on && pm->k > 0 && pm->k <= SIFT_GPU_SMALL)) all_small = 0;
        }
        if (!may_full || !any_on) continue; /* only the tail kernel (or nobody) runs this op */
        switch (kind) {
        case SIFT_GPU_OP_BIAS:
        case SIFT_GPU_OP_PENALTIES:
            if (!materialized) push(steps, &n, SIFT_GPU_STEP_COPY, j, 0);
            materialized = 1;
            push(steps, &n, kind == SIFT_GPU_OP_BIAS ? SIFT_GPU_STEP_BIAS : SIFT_GPU_STEP_PEN_APPLY, j, 0);
            max_known = 0;
            break;
        case SIFT_GPU_OP_TEMP:
            if (any_pos) push(steps, &n, SIFT_GPU_STEP_TEMP, j, 0);
            if (any_nonpos) push(steps, &n, SIFT_GPU_STEP_ARGMAX, j, 0);
            break;
        case SIFT_GPU_OP_TOP_K:
        case SIFT_GPU_OP_TOP_P:
        case SIFT_GPU_OP_MIN_P:
            if (kind != SIFT_GPU_OP_TOP_K && !max_known) push(steps, &n, SIFT_GPU_STEP_MAX, j, 0);
            if (kind == SIFT_GPU_OP_MIN_P) push(steps, &n, SIFT_GPU_STEP_COUNT, j, 1);
            for (int32_t l = 0; l < 3; l++) push(steps, &n, SIFT_GPU_STEP_HIST, j, l);
            push(steps, &n, SIFT_GPU_STEP_COUNT, j, 0);
            push(steps, &n, SIFT_GPU_STEP_WRITE, j, 0);
            /* a kept-all list keeps its max; a compacted one knows it */
            max_known = max_known || kind != SIFT_GPU_OP_TOP_K;
            may_tail = 1;
            if (all_small) may_full = 0;
            break;
        case SIFT_GPU_OP_GREEDY: push(steps, &n, SIFT_GPU_STEP_ARGMAX, j, 0); break;
        case SIFT_GPU_OP_DIST:
            if (!max_known) push(steps, &n, SIFT_GPU_STEP_MAX, j, 0);
            push(steps, &n, SIFT_GPU_STEP_DIST, j, 0);
            break;
        default: break;
        }
    }
    if (may_tail) push(steps, &n, SIFT_GPU_STEP_TAIL, -1, 0);
    if (may_full && !plan->selects) push(steps, &n, SIFT_GPU_STEP_FINISH, -1, 0);
    push(steps, &n, SIFT_GPU_STEP_OUT, -1, 0);
    if (has_pen && plan->selects) push(steps, &n, SIFT_GPU_STEP_ACCEPT, -1, 0);
    return n;
}
