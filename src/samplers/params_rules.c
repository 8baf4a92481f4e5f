/*
 * params_rules.c - the one set of rules for sampling parameters, shared by every front end:
 * the `sift` CLI checks its flags with them and `sift serve` its JSON fields, so a value one
 * refuses the other refuses too, with the same message. Each rule names the field as
 * llama-server's JSON does ("top_p") and as llama-cli's flag does ("--top-p"); messages
 * name both, so either front end's user recognises the field.
 *
 * The ranges are llama-server's (docs/server.md) with the gaps closed where a value has no
 * meaning: NaN nowhere, a repeat penalty of 0 divides logits by zero (llama.cpp turns every
 * positive logit into inf), so its range is open at 0. Negative temperatures stay valid:
 * llama.cpp reads temp <= 0 as greedy, and so does sift.
 *
 * -1 windows (repeat_last_n, dry_penalty_last_n) mean the context, as in llama.cpp's
 * common_init_from_params: sift_sampling_params_set_context() replaces them once the front
 * end knows its context size.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/status.h"
#include "samplers/samplers.h"

#define P(field) offsetof(sift_sampling_params, field)
#define I32MAX 2147483647.0
#define WIN (double)(1 << 24)
typedef struct rule {
    sift_sampling_rule pub;
    size_t off;
} rule;
static const rule rules[] = {
    {{"temperature", "--temp", false, false, -10, 100}, P(temp)},
    {{"dynatemp_range", "--dynatemp-range", false, false, 0, 100}, P(dynatemp_range)},
    {{"dynatemp_exponent", "--dynatemp-exp", false, false, 0, 100}, P(dynatemp_exponent)},
    {{"top_k", "--top-k", true, false, -1, I32MAX}, P(top_k)},
    {{"top_p", "--top-p", false, false, 0, 1}, P(top_p)},
    {{"min_p", "--min-p", false, false, 0, 1}, P(min_p)},
    {{"typical_p", "--typical", false, false, 0, 1}, P(typ_p)},
    {{"top_n_sigma", "--top-nsigma", false, false, -1, 100}, P(top_n_sigma)},
    {{"xtc_probability", "--xtc-probability", false, false, 0, 1}, P(xtc_probability)},
    {{"xtc_threshold", "--xtc-threshold", false, false, 0, 1}, P(xtc_threshold)},
    {{"repeat_penalty", "--repeat-penalty", false, true, 0, 10}, P(penalty_repeat)},
    {{"repeat_last_n", "--repeat-last-n", true, false, -1, WIN}, P(penalty_last_n)},
    {{"presence_penalty", "--presence-penalty", false, false, -10, 10}, P(penalty_present)},
    {{"frequency_penalty", "--frequency-penalty", false, false, -10, 10}, P(penalty_freq)},
    {{"dry_multiplier", "--dry-multiplier", false, false, 0, 100}, P(dry_multiplier)},
    {{"dry_base", "--dry-base", false, false, 0, 100}, P(dry_base)},
    {{"dry_allowed_length", "--dry-allowed-length", true, false, 0, WIN}, P(dry_allowed_length)},
    {{"dry_penalty_last_n", "--dry-penalty-last-n", true, false, -1, WIN}, P(dry_penalty_last_n)},
    {{"mirostat", "--mirostat", true, false, 0, 2}, P(mirostat)},
    {{"mirostat_tau", "--mirostat-ent", false, false, 0, 100}, P(mirostat_tau)},
    {{"mirostat_eta", "--mirostat-lr", false, false, 0, 10}, P(mirostat_eta)},
    {{"adaptive_target", "--adaptive-target", false, false, -1, 1}, P(adaptive_target)},
    {{"adaptive_decay", "--adaptive-decay", false, false, 0, 1}, P(adaptive_decay)},
    {{"min_keep", "--min-keep", true, false, 0, I32MAX}, P(min_keep)}, /* and <= n_vocab */
    {{"n_probs", "--n-probs", true, false, 0, SIFT_SAMPLING_MAX_N_PROBS}, P(n_probs)},
};
#undef P
#define N_RULES (sizeof rules / sizeof *rules)

const sift_sampling_rule *sift_sampling_rule_find(const char *name)
{
    if (!name) return NULL;
    for (size_t i = 0; i < N_RULES; i++)
        if (!strcmp(name, rules[i].pub.name) || !strcmp(name, rules[i].pub.flag)) return &rules[i].pub;
    return NULL;
}

sift_status sift_sampling_rule_check(const sift_sampling_rule *r, double v, sift_error *err)
{
    if (!r) return sift__error_set(err, SIFT_E_INVAL, "no such sampling parameter");
    const bool in = !isnan(v) && (r->lo_open ? v > r->lo : v >= r->lo) && v <= r->hi;
    if (r->integer && (!in || v != floor(v)))
        return sift__error_set(err, SIFT_E_INVAL, "'%s' (%s) must be an integer in [%.0f, %.0f], got %.17g", r->name,
                               r->flag, r->lo, r->hi, v);
    if (!in)
        return sift__error_set(err, SIFT_E_INVAL, "'%s' (%s) must be a number in %c%g, %g], got %.9g", r->name, r->flag,
                               r->lo_open ? '(' : '[', r->lo, r->hi, v);
    return SIFT_OK;
}

static double field_value(const sift_sampling_params *p, const rule *r)
{
    const char *f = (const char *)p + r->off;
    if (r->pub.integer) {
        int32_t i;
        memcpy(&i, f, sizeof i);
        return i;
    }
    float x;
    memcpy(&x, f, sizeof x);
    return x;
}

sift_status sift_sampling_params_validate(const sift_sampling_params *p, int32_t n_vocab, sift_error *err)
{
    if (!p) return sift__error_set(err, SIFT_E_INVAL, "sampling params: none given");
    for (size_t i = 0; i < N_RULES; i++) {
        const sift_status st = sift_sampling_rule_check(&rules[i].pub, field_value(p, &rules[i]), err);
        if (st != SIFT_OK) return st;
    }
    if (n_vocab > 0 && p->min_keep > n_vocab)
        return sift__error_set(err, SIFT_E_INVAL, "'min_keep' (--min-keep) must be an integer in [0, %d] (the vocabulary), got %d",
                               (int)n_vocab, (int)p->min_keep);
    if (p->n_samplers < 0 || p->n_samplers > SIFT_SAMPLING_MAX_SAMPLERS)
        return sift__error_set(err, SIFT_E_INVAL, "'samplers' (--samplers) has %d entries, more than %d", (int)p->n_samplers,
                               SIFT_SAMPLING_MAX_SAMPLERS);
    if (p->n_dry_sequence_breakers < 0 || p->n_dry_sequence_breakers > SIFT_SAMPLING_MAX_BREAKERS)
        return sift__error_set(err, SIFT_E_INVAL, "'dry_sequence_breakers' (--dry-sequence-breaker) has %d entries, more than %d",
                               (int)p->n_dry_sequence_breakers, SIFT_SAMPLING_MAX_BREAKERS);
    if (p->n_logit_bias && !p->logit_bias)
        return sift__error_set(err, SIFT_E_INVAL, "'logit_bias' (--logit-bias): %zu entries but no array", p->n_logit_bias);
    for (size_t i = 0; i < p->n_logit_bias; i++) {
        const sift_logit_bias b = p->logit_bias[i];
        if (b.token < 0 || (n_vocab > 0 && b.token >= n_vocab))
            return sift__error_set(err, SIFT_E_INVAL, "'logit_bias[%zu]' (--logit-bias): token %d is not in the vocabulary [0, %d)",
                                   i, (int)b.token, (int)n_vocab);
        if (!(b.bias == -INFINITY || fabsf(b.bias) <= SIFT_SAMPLING_MAX_BIAS))
            return sift__error_set(err, SIFT_E_INVAL,
                                   "'logit_bias[%zu]' (--logit-bias): bias must be a number in [-1e6, 1e6] or -inf, got %.9g",
                                   i, (double)b.bias);
    }
    return SIFT_OK;
}

void sift_sampling_params_set_context(sift_sampling_params *p, int32_t n_ctx)
{
    if (!p || n_ctx <= 0) return;
    if (p->penalty_last_n == -1) p->penalty_last_n = n_ctx;
    if (p->dry_penalty_last_n == -1) p->dry_penalty_last_n = n_ctx;
}
