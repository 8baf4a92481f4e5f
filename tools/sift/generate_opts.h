/*
 * generate_opts.h - the options of `sift generate` (llama-cli's flags) and their parser,
 * apart from the command itself (cmd_generate.c) so that each stays readable.
 */
#ifndef SIFT_GENERATE_OPTS_H
#define SIFT_GENERATE_OPTS_H

#include <stdbool.h>

#include "cli_cvec.h"
#include "cli_grammar.h"
#include "cli_sampling.h"
#include "sift.h"

typedef struct gen_opts {
    const char *model;
    char *prompt;          /* owned (after -f / escapes) */
    const char *neg_prompt; /* --cfg-negative-prompt */
    char *neg_owned;
    float cfg_scale;
    long n_predict;
    long n_ctx;
    long n_batch;
    long n_keep;
    int n_threads, n_threads_batch;
    bool escape, display_prompt, log, trace, context_shift;
    int trace_top;
    const char *chain_spec;
    sift_isa isa;
    cli_grammar grammar; /* --grammar, -j, ... (cli_grammar.h); the sampler is made in make_grammar */
    cli_cvec cvec;       /* --control-vector, ... (cli_cvec.h) */
    /* interaction (llama-cli's flags) */
    int conversation;          /* -cnv 1, -no-cnv 0, -1: when there is a chat template */
    bool interactive, interactive_first, in_prefix_bos, color;
    bool single_turn;          /* -st: one reply in conversation mode, then exit */
    bool special;              /* -sp: special tokens' texts are printed */
    bool color_off;            /* --color off: no colour, not even the thinking's faint text on a terminal */
    int reasoning_format;      /* --reasoning-format (rs_format): auto shows the thinking apart, none as written */
    bool verbose_prompt;       /* --verbose-prompt: each turn's text fed to the model, on stderr */
    const char *system_prompt; /* -sys */
    char *sys_owned;
    const char *chat_template, *chat_template_file;
    const char *in_prefix, *in_suffix;
    const char **rprompts;     /* -r, repeatable */
    int n_rprompts;
    /* speculative decoding (llama.cpp's --model-draft etc.; --lookup: prompt lookup's n-gram size) */
    const char *model_draft;
    long draft_max, draft_min, lookup;
    float draft_p_min;
    bool draft_fixed;          /* --draft-fixed: no adaptive depth (sift_draft_params.adaptive = false) */
} gen_opts;

/* Parse argv into *o (and the sampling flags into *cs; *sampling_flags: any besides --seed,
 * --ignore-eos). 0: go on; -1: --help was printed; 2: a usage error, said on stderr. The
 * owned strings (prompt, neg_owned, sys_owned, rprompts) are freed with gen_opts_free, also
 * after an error. */
int gen_parse_args(int argc, char **argv, gen_opts *o, cli_sampling *cs, bool *sampling_flags);
void gen_opts_free(gen_opts *o);

/* llama.cpp's string_process_escapes, in place: \n \t \r \\ \' \" \xHH. */
void gen_process_escapes(char *s);

#endif
