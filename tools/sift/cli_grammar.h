/*
 * cli_grammar.h - llama.cpp's grammar flags for every sift command that samples (generate,
 * replay, serve), and the grammar sampler they ask for.
 *
 *   --grammar GBNF            the grammar text itself
 *   --grammar-file FILE       a .gbnf file
 *   -j, --json-schema JSON    a JSON schema, converted to GBNF (sift_json_schema_to_grammar)
 *   -jf, --json-schema-file FILE
 *   --grammar-first           sift extension: apply the grammar to the whole vocabulary first
 *                             (llama.cpp's grammar_first); the default is llama.cpp's
 *                             rejection strategy (sift_grammar_chain_sample)
 *
 *   cli_grammar cg;
 *   cli_grammar_init(&cg);
 *   for (...) { int r = cli_grammar_flag(&cg, argc, argv, &i); ... }  // 1 taken, 0 not ours, -1 usage error
 *   sift_sampler *grammar = cli_grammar_sampler(&cg, &view, &err);     // NULL and err.status == SIFT_OK: no grammar
 *   ... sift_grammar_chain_sample(grammar, chain, logits, n_vocab, cg.mode, NULL) ...
 *   cli_grammar_free(&cg);
 *
 * Only one of the four sources may be given (a usage error names both flags otherwise).
 */
#ifndef SIFT_CLI_GRAMMAR_H
#define SIFT_CLI_GRAMMAR_H

#include <stdbool.h>
#include <stdio.h>

#include "sift.h"

typedef struct cli_grammar {
    const char *flag;       /* the flag that gave the grammar (for messages), NULL: none */
    const char *value;      /* its value: text, schema or path (borrowed from argv) */
    bool from_file, json;   /* value is a path; value is a JSON schema */
    bool json_llama;        /* --json-schema-llama: llama.cpp's converter conventions */
    sift_grammar_mode mode; /* SIFT_GRAMMAR_REJECTION unless --grammar-first */
} cli_grammar;

void cli_grammar_init(cli_grammar *g);
/* Try argv[*i] (and its value, advancing *i). 1: consumed, 0: not a grammar flag, -1: usage
 * error (a one-line message naming the flag is printed to stderr). */
int cli_grammar_flag(cli_grammar *g, int argc, char **argv, int *i);
/* The flags, one per line, for --help. */
void cli_grammar_help(FILE *f);
/* The GBNF text the flags ask for (malloc'd; free()), or NULL: no grammar given (err->status
 * SIFT_OK) or an error (the file cannot be read, the schema does not convert) in *err. */
char *cli_grammar_text(const cli_grammar *g, sift_error *err);
/* The grammar sampler (not lazy, root "root") over the vocabulary, or NULL: no grammar given
 * (err->status SIFT_OK) or an error in *err (parse errors as "FLAG: line:col: ..."). */
sift_sampler *cli_grammar_sampler(const cli_grammar *g, const sift_vocab_view *vocab, sift_error *err);

#endif
