/*
 * cli_sampling.h - llama.cpp's sampling command-line flags (llama-cli / llama-server
 * spelling) into a sift_sampling_params, for every sift command that samples (replay,
 * generate, serve).
 *
 *   cli_sampling cs;
 *   cli_sampling_init(&cs);
 *   for (int i = 1; i < argc; i++) {
 *       int r = cli_sampling_flag(&cs, argc, argv, &i);   // 1: taken, 0: not ours, -1: usage error
 *       ...
 *   }
 *   if (cli_sampling_finish(&cs, n_vocab, n_ctx)) ...                 // the rules, -1 = context
 *   sift_chain *chain = sift_chain_from_params(&cs.params, &env, &err);
 *
 * The struct owns the storage the params point into (logit biases), so keep it alive
 * while the params are used.
 */
#ifndef SIFT_CLI_SAMPLING_H
#define SIFT_CLI_SAMPLING_H

#include <stdbool.h>
#include <stdio.h>

#include "sift.h"

#define CLI_SAMPLING_MAX_BIAS 1024

typedef struct cli_sampling {
    sift_sampling_params params;
    sift_logit_bias bias[CLI_SAMPLING_MAX_BIAS];
    size_t n_bias;
    bool seed_set;  /* -s / --seed was given */
    bool breakers_set; /* --dry-sequence-breaker was given (the defaults are replaced) */
    bool any;       /* any sampling flag was given */
} cli_sampling;

void cli_sampling_init(cli_sampling *cs);
/* Try argv[*i] (and its value, advancing *i). 1: consumed, 0: not a sampling flag,
 * -1: bad value (a one-line message naming the flag is printed to stderr). */
int cli_sampling_flag(cli_sampling *cs, int argc, char **argv, int *i);
/* After the flags, once the vocabulary and context sizes are known: the whole set against
 * libsift's rules (min_keep and logit-bias tokens against n_vocab; n_vocab <= 0 skips
 * those), then -1 windows become n_ctx. -1 with the message printed on a bad value. */
int cli_sampling_finish(cli_sampling *cs, int32_t n_vocab, int32_t n_ctx);
/* The flags, one per line, for --help. */
void cli_sampling_help(FILE *f);

#endif
