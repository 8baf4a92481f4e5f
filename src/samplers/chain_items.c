/*
 * chain_items.c - item lists and the one place a sampler is made from an item's
 * arguments (see chain_items.h for why chains are data first).
 *
 * Building is kept apart from parsing so that every producer of items (a spec, sampling
 * params, the device chain's CPU tail) gets the same samplers from the same arguments,
 * and a failure reads like its source: a spec's item names its column (SIFT_E_PARSE, as
 * the parser's own errors do), a params' item says "sampling params" (SIFT_E_NOMEM, the
 * only way a checked params item can fail).
 */
#include "samplers/chain_items.h"

#include <stdlib.h>
#include <string.h>

#include "core/status.h"

static const char *const item_names[SIFT__ITEM_COUNT] = {
    [SIFT__ITEM_GREEDY] = "greedy",        [SIFT__ITEM_DIST] = "dist",
    [SIFT__ITEM_TOP_K] = "top_k",          [SIFT__ITEM_TOP_P] = "top_p",
    [SIFT__ITEM_MIN_P] = "min_p",          [SIFT__ITEM_TYPICAL] = "typical",
    [SIFT__ITEM_TEMP] = "temp",            [SIFT__ITEM_TEMP_EXT] = "temp_ext",
    [SIFT__ITEM_XTC] = "xtc",              [SIFT__ITEM_TOP_N_SIGMA] = "top_n_sigma",
    [SIFT__ITEM_MIROSTAT] = "mirostat",    [SIFT__ITEM_MIROSTAT_V2] = "mirostat_v2",
    [SIFT__ITEM_PENALTIES] = "penalties",  [SIFT__ITEM_DRY] = "dry",
    [SIFT__ITEM_LOGIT_BIAS] = "logit_bias", [SIFT__ITEM_ADAPTIVE_P] = "adaptive_p",
    [SIFT__ITEM_INFILL] = "infill",
};

const char *sift__item_name(sift__item_kind kind)
{
    return kind >= 0 && kind < SIFT__ITEM_COUNT ? item_names[kind] : "?";
}

sift__chain_item *sift__chain_items_push(sift__chain_items *items, sift__item_kind kind, size_t col)
{
    if (items->n == items->cap) {
        const size_t cap = items->cap ? 2 * items->cap : 16;
        sift__chain_item *v = realloc(items->v, cap * sizeof *v);
        if (!v) return NULL;
        items->v = v, items->cap = cap;
    }
    sift__chain_item *it = &items->v[items->n++];
    memset(it, 0, sizeof *it);
    it->kind = kind;
    it->col = col;
    return it;
}

static void item_free(sift__chain_item *it)
{
    free(it->bias);
    for (size_t i = 0; i < it->n_strs; i++) free(it->strs[i]);
    free(it->strs);
    for (size_t i = 0; i < it->n_seqs; i++) free(it->seqs[i]);
    free(it->seqs);
    free(it->lens);
}

void sift__chain_items_free(sift__chain_items *items)
{
    if (!items) return;
    for (size_t i = 0; i < items->n; i++) item_free(&items->v[i]);
    free(items->v);
    memset(items, 0, sizeof *items);
}

sift_status sift__chain_items_split(sift__chain_items *src, size_t from, sift__chain_items *dst)
{
    memset(dst, 0, sizeof *dst);
    if (from >= src->n) return SIFT_OK;
    const size_t n = src->n - from;
    dst->v = malloc(n * sizeof *dst->v);
    if (!dst->v) return SIFT_E_NOMEM;
    memcpy(dst->v, src->v + from, n * sizeof *dst->v); /* ownership moves with the bytes */
    dst->n = dst->cap = n;
    src->n = from;
    return SIFT_OK;
}

static sift_sampler *build_dry(const sift__chain_item *it, const sift_chain_env *env)
{
    if (it->strings)
        return sift_sampler_init_dry(env->vocab, it->f[0], it->f[1], it->i[0], it->i[1], (const char *const *)it->strs,
                                     it->n_strs);
    return sift_sampler_init_dry_tokens(it->f[0], it->f[1], it->i[0], it->i[1], (const sift_token *const *)it->seqs,
                                        it->lens, it->n_seqs);
}

static sift_sampler *build(const sift__chain_item *it, const sift_chain_env *env)
{
    const size_t mk = (size_t)(it->i[0] > 0 ? it->i[0] : 0);
    switch (it->kind) {
    case SIFT__ITEM_GREEDY: return sift_sampler_init_greedy();
    case SIFT__ITEM_DIST: return sift_sampler_init_dist(it->seed);
    case SIFT__ITEM_TOP_K: return sift_sampler_init_top_k(it->i[0]);
    case SIFT__ITEM_TOP_P: return sift_sampler_init_top_p(it->f[0], mk);
    case SIFT__ITEM_MIN_P: return sift_sampler_init_min_p(it->f[0], mk);
    case SIFT__ITEM_TYPICAL: return sift_sampler_init_typical(it->f[0], mk);
    case SIFT__ITEM_TEMP: return sift_sampler_init_temp(it->f[0]);
    case SIFT__ITEM_TEMP_EXT: return sift_sampler_init_temp_ext(it->f[0], it->f[1], it->f[2]);
    case SIFT__ITEM_XTC: return sift_sampler_init_xtc(it->f[0], it->f[1], mk, it->seed);
    case SIFT__ITEM_TOP_N_SIGMA: return sift_sampler_init_top_n_sigma(it->f[0]);
    case SIFT__ITEM_MIROSTAT: return sift_sampler_init_mirostat(env->n_vocab, it->seed, it->f[0], it->f[1], it->i[0]);
    case SIFT__ITEM_MIROSTAT_V2: return sift_sampler_init_mirostat_v2(it->seed, it->f[0], it->f[1]);
    case SIFT__ITEM_PENALTIES: return sift_sampler_init_penalties(it->i[0], it->f[0], it->f[1], it->f[2]);
    case SIFT__ITEM_DRY: return build_dry(it, env);
    case SIFT__ITEM_LOGIT_BIAS: return sift_sampler_init_logit_bias(env->n_vocab, it->n_bias, it->bias);
    case SIFT__ITEM_ADAPTIVE_P: return sift_sampler_init_adaptive_p(it->f[0], it->f[1], it->seed);
    case SIFT__ITEM_INFILL: return sift_sampler_init_infill(env->vocab, env->eot);
    default: return NULL;
    }
}

static sift_status build_failed(const sift__chain_item *item, sift_error *err)
{
    const char *name = sift__item_name(item->kind);
    if (item->col)
        return sift__error_set(err, SIFT_E_PARSE,
                               "chain spec: col %zu: %s: could not create the sampler (out of memory or bad arguments)",
                               item->col, name);
    return sift__error_set(err, SIFT_E_NOMEM, "sampling params: cannot create %s", name);
}

sift_sampler *sift__chain_item_build(const sift__chain_item *item, const sift_chain_env *env, sift_error *err)
{
    const sift_chain_env no_env = {.n_vocab = 0, .vocab = NULL, .eot = SIFT_TOKEN_NULL, .default_seed = 0};
    sift_sampler *s = build(item, env ? env : &no_env);
    if (!s) build_failed(item, err);
    return s;
}

sift_status sift__chain_add_items(sift_chain *chain, const sift__chain_items *items, size_t from, size_t to,
                                  const sift_chain_env *env, sift_error *err)
{
    const sift_chain_env no_env = {.n_vocab = 0, .vocab = NULL, .eot = SIFT_TOKEN_NULL, .default_seed = 0};
    if (!env) env = &no_env;
    const int32_t n0 = sift_chain_n(chain);
    for (size_t i = from; i < to; i++) {
        const sift__chain_item *it = &items->v[i];
        sift_sampler *s = build(it, env);
        sift_status st = SIFT_OK;
        if (!s) {
            st = build_failed(it, err);
        } else if (sift_chain_add(chain, s) != SIFT_OK) {
            sift_sampler_free(s);
            st = sift__error_set(err, SIFT_E_NOMEM, "%s: out of memory", it->col ? "chain spec" : "sampling params");
        }
        if (st != SIFT_OK) { /* undo: the chain must end as it began */
            while (sift_chain_n(chain) > n0) sift_sampler_free(sift_chain_remove(chain, sift_chain_n(chain) - 1));
            return st;
        }
    }
    return SIFT_OK;
}
