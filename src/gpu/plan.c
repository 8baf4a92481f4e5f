/*
 * plan.c - chain items -> device program + CPU tail; the passes of a run. See plan.h for
 * the rules.
 *
 * A spec is parsed once, by libsift's own parser (samplers/chain_items.h), and sampling
 * params become the same items through params.c, so the plan never reads or writes text.
 * The items are first built into a CPU chain: that checks everything with the CPU's own
 * messages and tells, per item, whether the sampler is a disabled no-op ("?top-k") and
 * which seed a random sampler really uses. The device program takes its numbers from the
 * items of the prefix it runs; the remaining items are the row's CPU tail, built into
 * sampler objects by sift__gpu_tail_chain().
 */
#include "gpu/plan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"

/* ---- classification ----------------------------------------------------------------------- */

enum { C_SKIP = 0, C_CPU = -1 }; /* else an op kind */

static int is_filter(int kind)
{
    return kind == SIFT_GPU_OP_TOP_K || kind == SIFT_GPU_OP_TOP_P || kind == SIFT_GPU_OP_MIN_P;
}

/* What item `it` (whose CPU sampler is smpl) is on the device, and its parameters. */
static int classify(const sift__chain_item *it, const sift_sampler *smpl, sift__gpu_param *pm)
{
    const int off = sift_sampler_name(smpl)[0] == '?';
    memset(pm, 0, sizeof *pm);
    pm->on = !off;
    switch (it->kind) {
    case SIFT__ITEM_GREEDY: return SIFT_GPU_OP_GREEDY;
    case SIFT__ITEM_DIST: pm->seed = sift_sampler_get_seed(smpl); return SIFT_GPU_OP_DIST;
    case SIFT__ITEM_TOP_K: pm->k = it->i[0]; return SIFT_GPU_OP_TOP_K;
    case SIFT__ITEM_TOP_P:
    case SIFT__ITEM_MIN_P:
        pm->f0 = it->f[0];
        pm->k = it->i[0];
        if (it->kind == SIFT__ITEM_TOP_P) return SIFT_GPU_OP_TOP_P;
        pm->f1 = logf(pm->f0); /* min_p.c: max_l + logf(ctx->p) */
        return SIFT_GPU_OP_MIN_P;
    case SIFT__ITEM_TEMP: pm->f0 = it->f[0]; return SIFT_GPU_OP_TEMP;
    case SIFT__ITEM_TEMP_EXT:
        if (it->f[1] > 0.0f) return off ? C_SKIP : C_CPU; /* a dynamic range: CPU only */
        pm->f0 = it->f[0];
        return SIFT_GPU_OP_TEMP;
    case SIFT__ITEM_PENALTIES:
        pm->k = it->i[0] < 0 ? 0 : it->i[0];
        pm->f0 = it->f[0], pm->f1 = it->f[1], pm->f2 = it->f[2];
        return SIFT_GPU_OP_PENALTIES;
    case SIFT__ITEM_LOGIT_BIAS: return SIFT_GPU_OP_BIAS;
    default: return off ? C_SKIP : C_CPU;
    }
}

/* a logit_bias item's entries, appended to row->bias */
static sift_status add_bias(const sift__chain_item *it, sift__gpu_rowspec *row, sift__gpu_param *pm)
{
    sift__gpu_bias *b = realloc(row->bias, (row->n_bias + it->n_bias + 1) * sizeof *b);
    if (!b) return SIFT_E_NOMEM;
    row->bias = b;
    for (size_t i = 0; i < it->n_bias; i++) b[row->n_bias + i] = (sift__gpu_bias){it->bias[i].token, it->bias[i].bias};
    pm->off = row->n_bias;
    pm->k = (int32_t)it->n_bias;
    row->n_bias += (int32_t)it->n_bias;
    return SIFT_OK;
}

/* ---- plans ---------------------------------------------------------------------------------- */

void sift__gpu_rowspec_free(sift__gpu_rowspec *row)
{
    if (!row) return;
    free(row->bias);
    sift__chain_items_free(&row->tail);
    memset(row, 0, sizeof *row);
}

sift_status sift__gpu_tail_chain(const sift__gpu_rowspec *row, const sift_chain_env *env, sift_chain **out,
                                 sift_error *err)
{
    *out = NULL;
    if (row->tail.n == 0) return SIFT_OK;
    sift_chain *tail = sift_chain_new(sift_chain_default_params());
    if (!tail) return sift__error_set(err, SIFT_E_NOMEM, "device chain: out of memory");
    const sift_status st = sift__chain_add_items(tail, &row->tail, 0, row->tail.n, env, err);
    if (st != SIFT_OK) {
        sift_chain_free(tail);
        return st;
    }
    *out = tail;
    return SIFT_OK;
}

/* The items' samplers, built as a CPU chain: every item checked as the CPU checks it, and
 * the samplers' own view of being a no-op and of their seed. env's n_vocab is the plan's. */
static sift_status cpu_chain(const sift__chain_items *items, const sift_chain_env *env, int32_t n_vocab,
                             sift_chain **out, sift_error *err)
{
    sift_chain_env e = env ? *env : (sift_chain_env){.n_vocab = 0, .vocab = NULL, .eot = SIFT_TOKEN_NULL, .default_seed = 0};
    e.n_vocab = n_vocab;
    *out = sift_chain_new(sift_chain_default_params());
    if (!*out) return sift__error_set(err, SIFT_E_NOMEM, "device chain: out of memory");
    const sift_status st = sift__chain_add_items(*out, items, 0, items->n, &e, err);
    if (st != SIFT_OK) {
        sift_chain_free(*out);
        *out = NULL;
    }
    return st;
}

static void describe(sift__gpu_plan *plan, const sift_chain *cpu)
{
    char *d = plan->desc;
    const size_t cap = sizeof plan->desc;
    size_t k = (size_t)snprintf(d, cap, "device:");
    int first = 1;
    for (int i = 0; i < plan->n_dev_items && k < cap; i++) {
        const char *nm = sift_sampler_name(sift_chain_get(cpu, i));
        k += (size_t)snprintf(d + k, cap - k, "%s%s", first ? " " : " -> ", nm);
        first = 0;
    }
    if (first && k < cap) k += (size_t)snprintf(d + k, cap - k, " (none)");
    if (plan->n_dev_items < plan->n_items && k < cap) {
        k += (size_t)snprintf(d + k, cap - k, " | cpu:");
        for (int i = plan->n_dev_items; i < plan->n_items && k < cap; i++)
            k += (size_t)snprintf(d + k, cap - k, "%s%s", i == plan->n_dev_items ? " " : " -> ",
                                  sift_sampler_name(sift_chain_get(cpu, i)));
    }
}

/* Where the device prefix must end before item i of kind `kind` (1: stop here). */
static int ends_prefix(const sift__gpu_plan *plan, int i, int n_items, int kind, const sift__gpu_param *pm,
                       int seen_filter, int n_temp, int cpu_dist)
{
    if ((kind == SIFT_GPU_OP_BIAS || kind == SIFT_GPU_OP_PENALTIES) && seen_filter) return 1;
    if (kind == SIFT_GPU_OP_PENALTIES && pm->on && pm->k > SIFT_GPU_MAX_WINDOW) return 1;
    if (kind == SIFT_GPU_OP_TEMP && n_temp == SIFT_GPU_MAX_DIV) return 1;
    if ((kind == SIFT_GPU_OP_GREEDY || kind == SIFT_GPU_OP_DIST) && i != n_items - 1) return 1;
    if (kind == SIFT_GPU_OP_DIST && cpu_dist) return 1;
    return plan->n_ops == SIFT_GPU_MAX_OPS;
}

/* The device prefix of the items (their CPU samplers in cpu): plan->ops and row->prm. */
static sift_status plan_prefix(const sift__chain_items *items, const sift_chain *cpu, int cpu_dist,
                               sift__gpu_plan *plan, sift__gpu_rowspec *row)
{
    const int n_items = (int)items->n;
    int seen_filter = 0, n_temp = 0, stop = n_items;
    for (int i = 0; i < n_items; i++) {
        const sift__chain_item *it = &items->v[i];
        sift__gpu_param pm;
        const int kind = classify(it, sift_chain_get(cpu, i), &pm);
        if (kind == C_CPU) {
            stop = i;
            break;
        }
        plan->item_op[i] = -1;
        plan->item_kind[i] = (int8_t)it->kind;
        if (kind == C_SKIP) continue;
        if (ends_prefix(plan, i, n_items, kind, &pm, seen_filter, n_temp, cpu_dist)) {
            stop = i;
            break;
        }
        if (kind == SIFT_GPU_OP_BIAS && add_bias(it, row, &pm) != SIFT_OK) return SIFT_E_NOMEM;
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
    return SIFT_OK;
}

sift_status sift__gpu_plan_items(sift__chain_items *items, const sift_chain_env *env, int32_t n_vocab, int cpu_dist,
                                 sift__gpu_plan *plan, sift__gpu_rowspec *row, sift_error *err)
{
    memset(plan, 0, sizeof *plan);
    memset(row, 0, sizeof *row);
    if (n_vocab < 1 || n_vocab > SIFT_GPU_MAX_VOCAB)
        return sift__error_set(err, SIFT_E_INVAL, "device chain: n_vocab %d out of range [1, %d]", (int)n_vocab,
                               SIFT_GPU_MAX_VOCAB);
    if (items->n > SIFT_GPU_MAX_ITEMS)
        return sift__error_set(err, SIFT_E_INVAL, "device chain: %zu samplers (at most %d)", items->n, SIFT_GPU_MAX_ITEMS);
    /* a NaN bias has no place among the radix keys; only sampling params can hold one (the
     * spec grammar has no NaN), and the device chain has always refused it */
    for (size_t i = 0; i < items->n; i++)
        for (size_t k = 0; items->v[i].kind == SIFT__ITEM_LOGIT_BIAS && k < items->v[i].n_bias; k++)
            if (isnan(items->v[i].bias[k].bias))
                return sift__error_set(err, SIFT_E_INVAL, "sampling params: logit bias %zu is NaN", k);
    sift_chain *cpu;
    sift_status st = cpu_chain(items, env, n_vocab, &cpu, err);
    if (st != SIFT_OK) return st;
    plan->n_items = (int32_t)items->n;
    plan->n_vocab = n_vocab;
    plan->cpu_dist = cpu_dist != 0;
    st = plan_prefix(items, cpu, cpu_dist, plan, row);
    if (st == SIFT_OK) st = sift__chain_items_split(items, (size_t)plan->n_dev_items, &row->tail);
    if (st == SIFT_OK) describe(plan, cpu);
    sift_chain_free(cpu);
    if (st == SIFT_OK) return SIFT_OK;
    sift__gpu_rowspec_free(row);
    return sift__error_set(err, st, "device chain: out of memory");
}

sift_status sift__gpu_plan_spec(const char *spec, const sift_chain_env *env, int32_t n_vocab, int cpu_dist,
                                sift__gpu_plan *plan, sift__gpu_rowspec *row, sift_error *err)
{
    memset(plan, 0, sizeof *plan);
    memset(row, 0, sizeof *row);
    if (!spec) return sift__error_set(err, SIFT_E_INVAL, "device chain: no spec");
    if (n_vocab < 1 || n_vocab > SIFT_GPU_MAX_VOCAB)
        return sift__error_set(err, SIFT_E_INVAL, "device chain: n_vocab %d out of range [1, %d]", (int)n_vocab,
                               SIFT_GPU_MAX_VOCAB);
    sift_chain_env e = env ? *env : (sift_chain_env){.n_vocab = 0, .vocab = NULL, .eot = SIFT_TOKEN_NULL, .default_seed = 0};
    e.n_vocab = n_vocab;
    sift__chain_items items;
    sift_status st = sift__chain_items_parse(spec, &e, &items, err);
    if (st != SIFT_OK) return st;
    st = sift__gpu_plan_items(&items, &e, n_vocab, cpu_dist, plan, row, err);
    sift__chain_items_free(&items);
    return st;
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

/* Item i of a row's spec under the plan: its parameters into row->prm (SIFT_E_INVAL when
 * it does not fit the plan's op there). */
static sift_status row_item(const sift__gpu_plan *plan, int i, const sift__chain_item *it, const sift_sampler *smpl,
                            sift__gpu_rowspec *row, sift_error *err)
{
    const char *name = sift__item_name(it->kind);
    if (it->kind != (sift__item_kind)plan->item_kind[i])
        return sift__error_set(err, SIFT_E_INVAL, "device chain: sampler %d is %s, the chain has %s there", i + 1, name,
                               sift__item_name((sift__item_kind)plan->item_kind[i]));
    sift__gpu_param pm;
    const int kind = classify(it, smpl, &pm);
    const int op = plan->item_op[i];
    if (op < 0) { /* skipped in the base: must stay off */
        if (kind != C_SKIP && !(kind > 0 && !pm.on))
            return sift__error_set(err, SIFT_E_INVAL,
                                   "device chain: sampler %d (%s) is off in the chain and cannot be turned on per sequence",
                                   i + 1, name);
        return SIFT_OK;
    }
    const int want = plan->ops[op].kind;
    if (kind != want)
        return sift__error_set(err, SIFT_E_INVAL,
                               "device chain: sampler %d (%s) must stay a device %s (e.g. temp_ext without a dynamic range)",
                               i + 1, name, op_name(want));
    if (kind == SIFT_GPU_OP_PENALTIES && pm.on && pm.k > plan->window)
        return sift__error_set(err, SIFT_E_INVAL, "device chain: penalties window %d is longer than the chain's (%d)",
                               (int)pm.k, (int)plan->window);
    if (kind == SIFT_GPU_OP_BIAS && add_bias(it, row, &pm) != SIFT_OK)
        return sift__error_set(err, SIFT_E_NOMEM, "device chain: out of memory");
    row->prm[op] = pm;
    return SIFT_OK;
}

sift_status sift__gpu_plan_row(const sift__gpu_plan *plan, const char *spec, const sift_chain_env *env,
                               sift__gpu_rowspec *row, sift_error *err)
{
    memset(row, 0, sizeof *row);
    if (!spec) return sift__error_set(err, SIFT_E_INVAL, "device chain: no spec");
    sift_chain_env e = env ? *env : (sift_chain_env){.n_vocab = 0, .vocab = NULL, .eot = SIFT_TOKEN_NULL, .default_seed = 0};
    e.n_vocab = plan->n_vocab;
    sift__chain_items items;
    sift_status st = sift__chain_items_parse(spec, &e, &items, err);
    if (st != SIFT_OK) return st;
    sift_chain *cpu;
    if ((st = cpu_chain(&items, &e, plan->n_vocab, &cpu, err)) != SIFT_OK) {
        sift__chain_items_free(&items);
        return st;
    }
    const int n_items = (int)items.n;
    if (n_items < plan->n_dev_items)
        st = sift__error_set(err, SIFT_E_INVAL, "device chain: this sequence's spec has %d samplers; the device part of the chain has %d",
                             n_items, (int)plan->n_dev_items);
    for (int i = 0; st == SIFT_OK && i < plan->n_dev_items; i++)
        st = row_item(plan, i, &items.v[i], sift_chain_get(cpu, i), row, err);
    if (st == SIFT_OK && plan->selects && n_items > plan->n_dev_items)
        st = sift__error_set(err, SIFT_E_INVAL, "device chain: the chain ends on the device with %s; this sequence's spec goes on after it",
                             sift__item_name((sift__item_kind)plan->item_kind[plan->n_dev_items - 1]));
    if (st == SIFT_OK && sift__chain_items_split(&items, (size_t)plan->n_dev_items, &row->tail) != SIFT_OK)
        st = sift__error_set(err, SIFT_E_NOMEM, "device chain: out of memory");
    sift_chain_free(cpu);
    sift__chain_items_free(&items);
    if (st != SIFT_OK) sift__gpu_rowspec_free(row);
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
