/*
 * cli_compat.h - llama.cpp's command-line spellings that sift takes without a code path of
 * its own, shared by `sift generate` (llama-cli) and `sift serve` (llama-server), so that a
 * command line copied from llama.cpp's READMEs runs instead of stopping at `unknown option`.
 *
 * Two things live here:
 *   - cli_compat_normalize: llama.cpp's parser reads '_' in a long option as '-'
 *     (--repeat_penalty = --repeat-penalty); applied to the option word before matching.
 *   - one table of the flags that mean nothing here (GPU offload, mmap, KV types, web UI,
 *     HTTP threads, ...): each is taken with its value and a one-line note on stderr saying
 *     why it changes nothing. The table is the single list both commands consult (and their
 *     --help prints from it).
 */
#ifndef SIFT_CLI_COMPAT_H
#define SIFT_CLI_COMPAT_H

#include <stdio.h>

/* which command a flag is accepted by */
#define CLI_COMPAT_GENERATE 1u
#define CLI_COMPAT_SERVE 2u

/* In place: a long option ("--x_y") gets its '_' read as '-', up to an '=' if any. Short
 * options and values are left alone. */
void cli_compat_normalize(char *arg);

/* argv[*i] a flag of the table for `which`: its value (if it takes one) consumed, *i
 * advanced, the note printed as "TOOL: note: FLAG ignored (WHY)"; 1. 0: not in the table
 * (nothing printed), -1: it needs a value and none follows (message printed). */
int cli_compat_flag(const char *tool, unsigned which, int argc, char **argv, int *i);

/* The flags `which` takes without effect, for --help (wrapped, indented lines). */
void cli_compat_help(FILE *f, unsigned which);

#endif
