/*
 * params.c - llama.cpp common's way of building a chain: sift_sampling_params mirrors
 * common_params_sampling (same fields, same defaults), and sift_chain_from_params() makes
 * the chain common_sampler_init() makes:
 *
 *   logit_bias (user biases, plus -inf for every EOG token with ignore_eos and every token the
 *   vocabulary marks SIFT_TOKEN_ATTR_SUPPRESS)
 *   mirostat 0: the samplers of params.samplers in order (penalties; dry; top_n_sigma;
 *               top_k; typ_p; top_p; min_p; xtc; temperature by default), disabled ones as
 *               "?name" no-ops, then adaptive_p if listed (always last), else dist(seed)
 *   mirostat 1: temp(temp), mirostat(n_vocab, seed, tau, eta, 100)
 *   mirostat 2: temp(temp), mirostat_v2(seed, tau, eta)
 *
 * "temperature" is temp_ext(temp, dynatemp_range, dynatemp_exponent); top_p, min_p,
 * typical and xtc get params.min_keep (0 by default), exactly as common passes them.
 * Sampler names for --samplers follow common_sampler_types_from_names (canonical names,
 * their kebab-case and no-underscore forms, "nucleus", "temp", "typ", and the older
 * "typical" / "typical-p"; case-insensitive); the letters of --sampling-seq follow
 * common_sampler_type_to_chr.
 *
 * The chain is made as items first (sift__chain_items_from_params, chain_items.h): this
 * file is the one place that knows the order above, and the device chain (src/gpu/plan.c)
 * plans from the same items that sift_chain_from_params() turns into samplers.
 */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "samplers/chain_items.h"
#include "samplers/samplers.h"

static const sift_sampler_type default_order[] = {
    SIFT_SAMPLER_PENALTIES, SIFT_SAMPLER_DRY,   SIFT_SAMPLER_TOP_N_SIGMA, SIFT_SAMPLER_TOP_K,       SIFT_SAMPLER_TYPICAL_P,
    SIFT_SAMPLER_TOP_P,     SIFT_SAMPLER_MIN_P, SIFT_SAMPLER_XTC,         SIFT_SAMPLER_TEMPERATURE,
};

sift_sampling_params sift_sampling_default_params(void)
{
    sift_sampling_params p;
    memset(&p, 0, sizeof p);
    p.seed = SIFT_DEFAULT_SEED;
    p.n_prev = 64;
    p.n_probs = 0;
    p.min_keep = 0;
    p.top_k = 40;
    p.top_p = 0.95f;
    p.min_p = 0.05f;
    p.xtc_probability = 0.00f;
    p.xtc_threshold = 0.10f;
    p.typ_p = 1.00f;
    p.temp = 0.80f;
    p.dynatemp_range = 0.00f;
    p.dynatemp_exponent = 1.00f;
    p.penalty_last_n = 64;
    p.penalty_repeat = 1.00f;
    p.penalty_freq = 0.00f;
    p.penalty_present = 0.00f;
    p.dry_multiplier = 0.0f;
    p.dry_base = 1.75f;
    p.dry_allowed_length = 2;
    p.dry_penalty_last_n = 64;
    p.adaptive_target = -1.0f;
    p.adaptive_decay = 0.90f;
    p.mirostat = 0;
    p.top_n_sigma = -1.00f;
    p.mirostat_tau = 5.00f;
    p.mirostat_eta = 0.10f;
    p.ignore_eos = false;
    p.no_perf = false;
    static const char *const breakers[] = {"\n", ":", "\"", "*"};
    for (int i = 0; i < 4; i++) strcpy(p.dry_sequence_breakers[i], breakers[i]);
    p.n_dry_sequence_breakers = 4;
    p.n_samplers = (int32_t)(sizeof default_order / sizeof *default_order);
    memcpy(p.samplers, default_order, sizeof default_order);
    return p;
}

/* ---- names ------------------------------------------------------------------------------ */

typedef struct type_info {
    sift_sampler_type type;
    const char *name; /* canonical (common_sampler_type_to_str) */
    char chr;
} type_info;

static const type_info types[] = {
    {SIFT_SAMPLER_DRY, "dry", 'd'},           {SIFT_SAMPLER_TOP_K, "top_k", 'k'},
    {SIFT_SAMPLER_TYPICAL_P, "typ_p", 'y'},   {SIFT_SAMPLER_TOP_P, "top_p", 'p'},
    {SIFT_SAMPLER_TOP_N_SIGMA, "top_n_sigma", 's'}, {SIFT_SAMPLER_MIN_P, "min_p", 'm'},
    {SIFT_SAMPLER_TEMPERATURE, "temperature", 't'}, {SIFT_SAMPLER_XTC, "xtc", 'x'},
    {SIFT_SAMPLER_INFILL, "infill", 'i'},     {SIFT_SAMPLER_PENALTIES, "penalties", 'e'},
    {SIFT_SAMPLER_ADAPTIVE_P, "adaptive_p", 'a'},
};
#define N_TYPES (sizeof types / sizeof *types)

const char *sift_sampler_type_name(sift_sampler_type type)
{
    for (size_t i = 0; i < N_TYPES; i++)
        if (types[i].type == type) return types[i].name;
    return "";
}

char sift_sampler_type_char(sift_sampler_type type)
{
    for (size_t i = 0; i < N_TYPES; i++)
        if (types[i].type == type) return types[i].chr;
    return '?';
}

/* canonical, kebab-case or no-underscore form of a canonical name, or a misc alias */
static sift_sampler_type type_from_name(const char *s, size_t len)
{
    char low[32];
    if (len == 0 || len >= sizeof low) return SIFT_SAMPLER_NONE;
    for (size_t i = 0; i < len; i++) low[i] = (char)tolower((unsigned char)s[i]);
    low[len] = 0;
    static const struct { const char *alias; sift_sampler_type type; } misc[] = {
        {"nucleus", SIFT_SAMPLER_TOP_P},     {"temp", SIFT_SAMPLER_TEMPERATURE},
        {"typ", SIFT_SAMPLER_TYPICAL_P},     {"typical", SIFT_SAMPLER_TYPICAL_P},
        {"typical-p", SIFT_SAMPLER_TYPICAL_P},
    };
    for (size_t i = 0; i < sizeof misc / sizeof *misc; i++)
        if (!strcmp(low, misc[i].alias)) return misc[i].type;
    for (size_t i = 0; i < N_TYPES; i++) {
        const char *c = types[i].name;
        if (!strcmp(low, c)) return types[i].type;
        if (!strchr(c, '_')) continue;
        char kebab[32], nodash[32];
        size_t k = 0, d = 0;
        for (const char *q = c; *q; q++) {
            kebab[k++] = *q == '_' ? '-' : *q;
            if (*q != '_') nodash[d++] = *q;
        }
        kebab[k] = 0, nodash[d] = 0;
        if (!strcmp(low, kebab) || !strcmp(low, nodash)) return types[i].type;
    }
    return SIFT_SAMPLER_NONE;
}

sift_status sift_sampling_set_samplers(sift_sampling_params *params, const char *names, sift_error *err)
{
    if (!params || !names) return sift__error_set(err, SIFT_E_INVAL, "samplers: no %s", !params ? "params" : "names");
    sift_sampler_type out[SIFT_SAMPLING_MAX_SAMPLERS];
    int32_t n = 0;
    for (const char *p = names; *p;) {
        const char *end = strchr(p, ';');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        while (len && isspace((unsigned char)*p)) p++, len--;
        while (len && isspace((unsigned char)p[len - 1])) len--;
        if (len) {
            sift_sampler_type t = type_from_name(p, len);
            if (t == SIFT_SAMPLER_NONE)
                return sift__error_set(err, SIFT_E_PARSE, "samplers: col %zu: unknown sampler '%.*s'",
                                      (size_t)(p - names) + 1, (int)(len < 40 ? len : 40), p);
            if (n == SIFT_SAMPLING_MAX_SAMPLERS)
                return sift__error_set(err, SIFT_E_PARSE, "samplers: more than %d samplers", SIFT_SAMPLING_MAX_SAMPLERS);
            out[n++] = t;
        }
        if (!end) break;
        p = end + 1;
    }
    memcpy(params->samplers, out, (size_t)n * sizeof *out);
    params->n_samplers = n;
    return SIFT_OK;
}

sift_status sift_sampling_set_sampler_chars(sift_sampling_params *params, const char *chars, sift_error *err)
{
    if (!params || !chars) return sift__error_set(err, SIFT_E_INVAL, "sampling-seq: no %s", !params ? "params" : "letters");
    sift_sampler_type out[SIFT_SAMPLING_MAX_SAMPLERS];
    int32_t n = 0;
    for (const char *p = chars; *p; p++) {
        sift_sampler_type t = SIFT_SAMPLER_NONE;
        for (size_t i = 0; i < N_TYPES; i++)
            if (types[i].chr == *p) t = types[i].type;
        if (t == SIFT_SAMPLER_NONE)
            return sift__error_set(err, SIFT_E_PARSE, "sampling-seq: col %zu: unknown sampler letter '%c' (letters: dkypsmtxiea)",
                                  (size_t)(p - chars) + 1, isprint((unsigned char)*p) ? *p : '?');
        if (n == SIFT_SAMPLING_MAX_SAMPLERS)
            return sift__error_set(err, SIFT_E_PARSE, "sampling-seq: more than %d samplers", SIFT_SAMPLING_MAX_SAMPLERS);
        out[n++] = t;
    }
    memcpy(params->samplers, out, (size_t)n * sizeof *out);
    params->n_samplers = n;
    return SIFT_OK;
}

/* ---- the chain ----------------------------------------------------------------------------- */

typedef struct params_ctx {
    const sift_sampling_params *p;
    const sift_chain_env *env;
    sift__chain_items *out;
    sift_error *err;
} params_ctx;

static sift__chain_item *push(params_ctx *c, sift__item_kind kind)
{
    sift__chain_item *it = sift__chain_items_push(c->out, kind, 0);
    if (!it) sift__error_set(c->err, SIFT_E_NOMEM, "sampling params: out of memory");
    return it;
}

/* user biases, plus -inf for every EOG token with ignore_eos, then -inf for every token the
 * model asks never to be sampled (SIFT_TOKEN_ATTR_SUPPRESS: common_sampler_init merges
 * llama_vocab_get_suppress_tokens into the same logit_bias sampler, whatever the params) */
static sift_status add_logit_bias(params_ctx *c)
{
    const sift_sampling_params *p = c->p;
    const sift_chain_env *env = c->env;
    const sift_vocab_view *vv = env->vocab && env->vocab->attr ? env->vocab : NULL;
    size_t n_eog = 0, n_sup = 0;
    if (p->ignore_eos && !vv)
        return sift__error_set(c->err, SIFT_E_INVAL, "sampling params: ignore_eos needs the vocabulary (EOG tokens)");
    for (int32_t t = 0; vv && t < vv->n_tokens; t++) {
        n_eog += p->ignore_eos && (vv->attr[t] & SIFT_TOKEN_ATTR_EOG);
        n_sup += (vv->attr[t] & SIFT_TOKEN_ATTR_SUPPRESS) != 0;
    }
    const size_t n = p->n_logit_bias + n_eog + n_sup;
    if (n == 0) return SIFT_OK;
    if (p->n_logit_bias && !p->logit_bias)
        return sift__error_set(c->err, SIFT_E_INVAL, "sampling params: n_logit_bias > 0 without logit_bias");
    sift__chain_item *it = push(c, SIFT__ITEM_LOGIT_BIAS);
    if (!it || !(it->bias = malloc(n * sizeof *it->bias))) return sift__error_set(c->err, SIFT_E_NOMEM, "sampling params: out of memory");
    if (p->n_logit_bias) memcpy(it->bias, p->logit_bias, p->n_logit_bias * sizeof *it->bias);
    size_t k = p->n_logit_bias;
    for (int32_t t = 0; n_eog && t < vv->n_tokens; t++)
        if (vv->attr[t] & SIFT_TOKEN_ATTR_EOG) it->bias[k++] = (sift_logit_bias){t, -INFINITY};
    for (int32_t t = 0; n_sup && t < vv->n_tokens; t++)
        if (vv->attr[t] & SIFT_TOKEN_ATTR_SUPPRESS) it->bias[k++] = (sift_logit_bias){t, -INFINITY};
    it->n_bias = n;
    return SIFT_OK;
}

static sift_status add_dry(params_ctx *c)
{
    const sift_sampling_params *p = c->p;
    const bool enabled = p->dry_multiplier != 0.0f && p->dry_base >= 1.0f && p->dry_penalty_last_n > 0;
    int32_t nb = p->n_dry_sequence_breakers;
    nb = nb < 0 ? 0 : nb > SIFT_SAMPLING_MAX_BREAKERS ? SIFT_SAMPLING_MAX_BREAKERS : nb;
    if (enabled && nb > 0 && (!c->env->vocab || !c->env->vocab->tokenize))
        return sift__error_set(c->err, SIFT_E_INVAL,
                               "sampling params: DRY sequence breakers need the vocabulary (or use a chain spec with token breakers)");
    sift__chain_item *it = push(c, SIFT__ITEM_DRY);
    if (!it) return SIFT_E_NOMEM;
    it->f[0] = p->dry_multiplier, it->f[1] = p->dry_base;
    it->i[0] = p->dry_allowed_length, it->i[1] = p->dry_penalty_last_n;
    it->strings = 1;
    if (nb && !(it->strs = calloc((size_t)nb, sizeof *it->strs)))
        return sift__error_set(c->err, SIFT_E_NOMEM, "sampling params: out of memory");
    for (int32_t i = 0; i < nb; i++) { /* each breaker is a fixed-size field, maybe without a NUL */
        const char *b = p->dry_sequence_breakers[i];
        const size_t len = strnlen(b, SIFT_SAMPLING_MAX_BREAKER_LEN);
        char *s = malloc(len + 1);
        if (!s) return sift__error_set(c->err, SIFT_E_NOMEM, "sampling params: out of memory");
        memcpy(s, b, len);
        s[len] = 0;
        it->strs[it->n_strs++] = s;
    }
    return SIFT_OK;
}

/* one of params.samplers: its item with its fields of params */
static sift_status add_type(params_ctx *c, sift_sampler_type t)
{
    const sift_sampling_params *p = c->p;
    const int32_t mk = p->min_keep > 0 ? p->min_keep : 0;
    sift__chain_item *it;
    switch (t) {
    case SIFT_SAMPLER_DRY: return add_dry(c);
    case SIFT_SAMPLER_INFILL:
        if (!c->env->vocab) return sift__error_set(c->err, SIFT_E_INVAL, "sampling params: infill needs the vocabulary");
        return push(c, SIFT__ITEM_INFILL) ? SIFT_OK : SIFT_E_NOMEM;
    case SIFT_SAMPLER_TOP_K:
        if (!(it = push(c, SIFT__ITEM_TOP_K))) return SIFT_E_NOMEM;
        it->i[0] = p->top_k;
        return SIFT_OK;
    case SIFT_SAMPLER_TOP_P:
    case SIFT_SAMPLER_MIN_P:
    case SIFT_SAMPLER_TYPICAL_P:
        if (!(it = push(c, t == SIFT_SAMPLER_TOP_P ? SIFT__ITEM_TOP_P : t == SIFT_SAMPLER_MIN_P ? SIFT__ITEM_MIN_P : SIFT__ITEM_TYPICAL)))
            return SIFT_E_NOMEM;
        it->f[0] = t == SIFT_SAMPLER_TOP_P ? p->top_p : t == SIFT_SAMPLER_MIN_P ? p->min_p : p->typ_p;
        it->i[0] = mk;
        return SIFT_OK;
    case SIFT_SAMPLER_TOP_N_SIGMA:
        if (!(it = push(c, SIFT__ITEM_TOP_N_SIGMA))) return SIFT_E_NOMEM;
        it->f[0] = p->top_n_sigma;
        return SIFT_OK;
    case SIFT_SAMPLER_XTC:
        if (!(it = push(c, SIFT__ITEM_XTC))) return SIFT_E_NOMEM;
        it->f[0] = p->xtc_probability, it->f[1] = p->xtc_threshold, it->i[0] = mk, it->seed = p->seed;
        return SIFT_OK;
    case SIFT_SAMPLER_TEMPERATURE:
        if (!(it = push(c, SIFT__ITEM_TEMP_EXT))) return SIFT_E_NOMEM;
        it->f[0] = p->temp, it->f[1] = p->dynatemp_range, it->f[2] = p->dynatemp_exponent;
        return SIFT_OK;
    case SIFT_SAMPLER_PENALTIES:
        if (!(it = push(c, SIFT__ITEM_PENALTIES))) return SIFT_E_NOMEM;
        it->i[0] = p->penalty_last_n;
        it->f[0] = p->penalty_repeat, it->f[1] = p->penalty_freq, it->f[2] = p->penalty_present;
        return SIFT_OK;
    default: return sift__error_set(c->err, SIFT_E_INVAL, "sampling params: unknown sampler type %d", (int)t);
    }
}

/* mirostat 0: params.samplers in order, then the selector (adaptive_p if listed, always
 * last, else dist) */
static sift_status add_samplers(params_ctx *c)
{
    const sift_sampling_params *p = c->p;
    bool adaptive = false;
    for (int32_t i = 0; i < p->n_samplers; i++) {
        if (p->samplers[i] == SIFT_SAMPLER_ADAPTIVE_P) {
            adaptive = true; /* a selector: always added last */
            continue;
        }
        const sift_status st = add_type(c, p->samplers[i]);
        if (st != SIFT_OK) return st;
    }
    sift__chain_item *it = push(c, adaptive ? SIFT__ITEM_ADAPTIVE_P : SIFT__ITEM_DIST);
    if (!it) return SIFT_E_NOMEM;
    if (adaptive) it->f[0] = p->adaptive_target, it->f[1] = p->adaptive_decay;
    it->seed = p->seed;
    return SIFT_OK;
}

/* mirostat 1 and 2: temp(temp), then the mirostat sampler */
static sift_status add_mirostat(params_ctx *c)
{
    const sift_sampling_params *p = c->p;
    sift__chain_item *it = push(c, SIFT__ITEM_TEMP);
    if (!it) return SIFT_E_NOMEM;
    it->f[0] = p->temp;
    if (!(it = push(c, p->mirostat == 1 ? SIFT__ITEM_MIROSTAT : SIFT__ITEM_MIROSTAT_V2))) return SIFT_E_NOMEM;
    it->seed = p->seed, it->f[0] = p->mirostat_tau, it->f[1] = p->mirostat_eta;
    if (p->mirostat == 1) it->i[0] = 100;
    return SIFT_OK;
}

sift_status sift__chain_items_from_params(const sift_sampling_params *params, const sift_chain_env *env,
                                          sift__chain_items *out, sift_error *err)
{
    memset(out, 0, sizeof *out);
    if (!params) return sift__error_set(err, SIFT_E_INVAL, "sampling params: none given");
    const sift_chain_env no_env = {.n_vocab = 0, .vocab = NULL, .eot = SIFT_TOKEN_NULL, .default_seed = 0};
    if (params->n_samplers < 0 || params->n_samplers > SIFT_SAMPLING_MAX_SAMPLERS)
        return sift__error_set(err, SIFT_E_INVAL, "sampling params: n_samplers %d out of range", (int)params->n_samplers);
    params_ctx c = {params, env ? env : &no_env, out, err};
    sift_status st = add_logit_bias(&c);
    if (st == SIFT_OK) {
        if (params->mirostat == 0) st = add_samplers(&c);
        else if (params->mirostat == 1 || params->mirostat == 2) st = add_mirostat(&c);
        else st = sift__error_set(err, SIFT_E_INVAL, "sampling params: mirostat must be 0, 1 or 2, got %d", (int)params->mirostat);
    }
    if (st != SIFT_OK) sift__chain_items_free(out);
    return st;
}

sift_chain *sift_chain_from_params(const sift_sampling_params *params, const sift_chain_env *env, sift_error *err)
{
    sift__chain_items items;
    if (sift__chain_items_from_params(params, env, &items, err) != SIFT_OK) return NULL;
    sift_chain_params cp = sift_chain_default_params();
    cp.no_perf = params->no_perf;
    sift_chain *chain = sift_chain_new(cp);
    if (!chain) {
        sift__error_set(err, SIFT_E_NOMEM, "sampling params: out of memory");
    } else if (sift__chain_add_items(chain, &items, 0, items.n, env, err) != SIFT_OK) {
        sift_chain_free(chain);
        chain = NULL;
    }
    sift__chain_items_free(&items);
    return chain;
}

int sift_sampling_params_print(const sift_sampling_params *p, char *buf, size_t cap)
{
    return snprintf(buf, cap,
                    "\trepeat_last_n = %d, repeat_penalty = %.3f, frequency_penalty = %.3f, presence_penalty = %.3f\n"
                    "\tdry_multiplier = %.3f, dry_base = %.3f, dry_allowed_length = %d, dry_penalty_last_n = %d\n"
                    "\ttop_k = %d, top_p = %.3f, min_p = %.3f, xtc_probability = %.3f, xtc_threshold = %.3f, typical_p = %.3f, "
                    "top_n_sigma = %.3f, temp = %.3f\n"
                    "\tmirostat = %d, mirostat_lr = %.3f, mirostat_ent = %.3f, adaptive_target = %.3f, adaptive_decay = %.3f",
                    p->penalty_last_n, p->penalty_repeat, p->penalty_freq, p->penalty_present, p->dry_multiplier, p->dry_base,
                    p->dry_allowed_length, p->dry_penalty_last_n, p->top_k, p->top_p, p->min_p, p->xtc_probability,
                    p->xtc_threshold, p->typ_p, p->top_n_sigma, p->temp, p->mirostat, p->mirostat_eta, p->mirostat_tau,
                    p->adaptive_target, p->adaptive_decay);
}
