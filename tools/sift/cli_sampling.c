/*
 * cli_sampling.c - llama.cpp's sampling flags (see cli_sampling.h). Names, value forms and
 * meanings follow llama.cpp's common/arg.cpp: --samplers "a;b;c", --sampling-seq letters,
 * --logit-bias TOKEN(+|-)BIAS, --dry-sequence-breaker STR (repeatable; "none" clears the
 * defaults), -s/--seed. Values are checked strictly (the whole value must parse).
 */
#include "cli_sampling.h"
#include "cli_util.h"

#include <errno.h>
#include <stddef.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void cli_sampling_init(cli_sampling *cs)
{
    memset(cs, 0, sizeof *cs);
    cs->params = sift_sampling_default_params();
}

static int bad(const char *flag, const char *value, const char *why)
{
    fprintf(stderr, "sift: %s: %s '%s'\n", flag, why, value ? value : "");
    return -1;
}

/* A value outside libsift's rules: the rule's message, the one the server gives (it names
 * the flag); flag: a prefix for messages that do not. */
static int rule_bad(const char *flag, const char *msg)
{
    if (flag) fprintf(stderr, "sift: %s: %s\n", flag, msg);
    else fprintf(stderr, "sift: %s\n", msg);
    return -1;
}

int cli_sampling_finish(cli_sampling *cs, int32_t n_vocab, int32_t n_ctx)
{
    sift_error err = {0};
    if (sift_sampling_params_validate(&cs->params, n_vocab, &err) != SIFT_OK) {
        fprintf(stderr, "sift: %s\n", err.msg);
        return -1;
    }
    sift_sampling_params_set_context(&cs->params, n_ctx);
    return 0;
}

typedef enum { F_FLOAT, F_INT } kind;

typedef struct flag_def {
    const char *name;
    const char *alt;
    kind k;
    size_t off;
    const char *help;
} flag_def;

#define P(field) offsetof(sift_sampling_params, field)
static const flag_def defs[] = {
    {"--top-k", NULL, F_INT, P(top_k), "top-k sampling (default 40, <= 0 = off)"},
    {"--top-p", NULL, F_FLOAT, P(top_p), "top-p sampling (default 0.95, 1.0 = off)"},
    {"--min-p", NULL, F_FLOAT, P(min_p), "min-p sampling (default 0.05, 0.0 = off)"},
    {"--typical", "--typical-p", F_FLOAT, P(typ_p), "locally typical sampling p (default 1.0 = off)"},
    {"--top-nsigma", "--top-n-sigma", F_FLOAT, P(top_n_sigma), "top-n-sigma (default -1 = off)"},
    {"--xtc-probability", NULL, F_FLOAT, P(xtc_probability), "xtc probability (default 0 = off)"},
    {"--xtc-threshold", NULL, F_FLOAT, P(xtc_threshold), "xtc threshold (default 0.1, > 0.5 = off)"},
    {"--temp", "--temperature", F_FLOAT, P(temp), "temperature (default 0.8)"},
    {"--dynatemp-range", NULL, F_FLOAT, P(dynatemp_range), "dynamic temperature range (default 0 = off)"},
    {"--dynatemp-exp", NULL, F_FLOAT, P(dynatemp_exponent), "dynamic temperature exponent (default 1)"},
    {"--repeat-last-n", NULL, F_INT, P(penalty_last_n), "penalty window (default 64, 0 = off, -1 = context)"},
    {"--repeat-penalty", NULL, F_FLOAT, P(penalty_repeat), "repetition penalty (default 1.0 = off)"},
    {"--presence-penalty", NULL, F_FLOAT, P(penalty_present), "presence penalty (default 0 = off)"},
    {"--frequency-penalty", NULL, F_FLOAT, P(penalty_freq), "frequency penalty (default 0 = off)"},
    {"--dry-multiplier", NULL, F_FLOAT, P(dry_multiplier), "DRY multiplier (default 0 = off)"},
    {"--dry-base", NULL, F_FLOAT, P(dry_base), "DRY base (default 1.75)"},
    {"--dry-allowed-length", NULL, F_INT, P(dry_allowed_length), "DRY allowed length (default 2)"},
    {"--dry-penalty-last-n", NULL, F_INT, P(dry_penalty_last_n), "DRY window (default 64, 0 = off, -1 = context)"},
    {"--mirostat", NULL, F_INT, P(mirostat), "0 = off, 1 = mirostat, 2 = mirostat 2.0"},
    {"--mirostat-lr", NULL, F_FLOAT, P(mirostat_eta), "mirostat learning rate eta (default 0.1)"},
    {"--mirostat-ent", NULL, F_FLOAT, P(mirostat_tau), "mirostat target entropy tau (default 5.0)"},
    {"--min-keep", NULL, F_INT, P(min_keep), "min tokens kept by top-p/min-p/typical/xtc (default 0)"},
    {"--adaptive-target", NULL, F_FLOAT, P(adaptive_target), "adaptive-p target (default -1 = off)"},
    {"--adaptive-decay", NULL, F_FLOAT, P(adaptive_decay), "adaptive-p EMA decay (default 0.9)"},
    {"--n-probs", NULL, F_INT, P(n_probs), "refused: the CLI shows no probabilities (--trace does; the server's n_probs)"},
};
#undef P

int cli_sampling_flag(cli_sampling *cs, int argc, char **argv, int *i)
{
    const char *a = argv[*i];
    const char *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    sift_error err = {0};

    if (!strcmp(a, "--ignore-eos")) {
        cs->params.ignore_eos = true;
        return cs->any = true, 1;
    }
    if (!strcmp(a, "--no-perf")) {
        cs->params.no_perf = true;
        return cs->any = true, 1;
    }

    /* flags with a value */
    bool known = !strcmp(a, "-s") || !strcmp(a, "--seed") || !strcmp(a, "--samplers") || !strcmp(a, "--sampling-seq") ||
                 !strcmp(a, "--sampler-seq") || !strcmp(a, "-l") || !strcmp(a, "--logit-bias") ||
                 !strcmp(a, "--dry-sequence-breaker");
    const flag_def *def = NULL;
    for (size_t k = 0; !known && k < sizeof defs / sizeof *defs; k++)
        if (!strcmp(a, defs[k].name) || (defs[k].alt && !strcmp(a, defs[k].alt))) def = &defs[k];
    if (!known && !def) return 0;
    if (!v) return bad(a, NULL, "missing value");
    (*i)++;
    cs->any = true;

    if (def && def->off == offsetof(sift_sampling_params, n_probs)) /* llama-cli takes it and shows nothing */
        return rule_bad(a, "the CLI does not report probabilities (use --trace; the server's n_probs field does)");
    if (def) {
        /* the type here, the range from libsift's rules (the server's too) */
        const sift_sampling_rule *rule = sift_sampling_rule_find(def->name);
        char *field = (char *)&cs->params + def->off;
        if (def->k == F_FLOAT) {
            float f;
            if (!cli_parse_float(v, &f)) return bad(a, v, "not a number:");
            if (rule && sift_sampling_rule_check(rule, f, &err) != SIFT_OK) return rule_bad(NULL, err.msg);
            memcpy(field, &f, sizeof f);
        } else {
            long n;
            if (!cli_parse_long(v, -2147483647L - 1, 2147483647L, &n)) return bad(a, v, "not an integer:");
            if (rule && sift_sampling_rule_check(rule, (double)n, &err) != SIFT_OK) return rule_bad(NULL, err.msg);
            int32_t n32 = (int32_t)n;
            memcpy(field, &n32, sizeof n32);
        }
        return 1;
    }
    if (!strcmp(a, "-s") || !strcmp(a, "--seed")) {
        long n;
        if (!cli_parse_long(v, -1, 4294967295L, &n)) return bad(a, v, "seed must be an integer in [-1, 2^32):");
        cs->params.seed = n == -1 ? SIFT_DEFAULT_SEED : (uint32_t)n;
        cs->seed_set = true;
        return 1;
    }
    if (!strcmp(a, "--samplers")) {
        if (sift_sampling_set_samplers(&cs->params, v, &err) != SIFT_OK) return rule_bad(a, err.msg); /* it names the value */
        return 1;
    }
    if (!strcmp(a, "--sampling-seq") || !strcmp(a, "--sampler-seq")) {
        if (sift_sampling_set_sampler_chars(&cs->params, v, &err) != SIFT_OK) return rule_bad(a, err.msg);
        return 1;
    }
    if (!strcmp(a, "-l") || !strcmp(a, "--logit-bias")) {
        /* TOKEN(+|-)BIAS, e.g. 15043+1, 15043-1, 2-inf */
        char *end;
        errno = 0;
        long tok = strtol(v, &end, 10);
        float bias;
        if (end == v || tok < 0 || tok > 2147483647L || (*end != '+' && *end != '-') || !cli_parse_float(end, &bias))
            return bad(a, v, "expected TOKEN+BIAS or TOKEN-BIAS, got");
        if (cs->n_bias == CLI_SAMPLING_MAX_BIAS) return bad(a, v, "too many logit biases at");
        cs->bias[cs->n_bias++] = (sift_logit_bias){(sift_token)tok, bias};
        cs->params.logit_bias = cs->bias;
        cs->params.n_logit_bias = cs->n_bias;
        return 1;
    }
    if (!strcmp(a, "--dry-sequence-breaker")) {
        if (!cs->breakers_set) cs->params.n_dry_sequence_breakers = 0; /* the first one replaces the defaults */
        cs->breakers_set = true;
        if (!strcmp(v, "none")) {
            cs->params.n_dry_sequence_breakers = 0;
            return 1;
        }
        if (cs->params.n_dry_sequence_breakers == SIFT_SAMPLING_MAX_BREAKERS) return bad(a, v, "too many breakers at");
        if (strlen(v) >= SIFT_SAMPLING_MAX_BREAKER_LEN) return bad(a, v, "breaker too long:");
        strcpy(cs->params.dry_sequence_breakers[cs->params.n_dry_sequence_breakers++], v);
        return 1;
    }
    return 0;
}

void cli_sampling_help(FILE *f)
{
    fprintf(f, "sampling (llama.cpp flags):\n");
    fprintf(f, "  -s, --seed N              RNG seed (default: random; -1 = random)\n");
    fprintf(f, "  --samplers LIST           sampler order, ';'-separated (default penalties;dry;top_n_sigma;top_k;typ_p;top_p;min_p;xtc;temperature)\n");
    fprintf(f, "  --sampling-seq LETTERS    the same as letters (default edskypmxt)\n");
    for (size_t k = 0; k < sizeof defs / sizeof *defs; k++) {
        char flag[40];
        snprintf(flag, sizeof flag, "%s %s", defs[k].name, defs[k].k == F_INT ? "N" : "F");
        fprintf(f, "  %-25s %s\n", flag, defs[k].help);
    }
    fprintf(f, "  -l, --logit-bias T+B      add B to token T's logit (T-inf bans it); repeatable\n");
    fprintf(f, "  --dry-sequence-breaker S  DRY breaker (repeatable; replaces the defaults; 'none' = no breakers)\n");
    fprintf(f, "  --ignore-eos              ban end-of-generation tokens (needs a model)\n");
}
