/*
 * cli_cvec.h - llama.cpp's control-vector flags for the commands that run a model:
 *
 *   --control-vector FILE                  add FILE's directions (scale 1)
 *   --control-vector-scaled FILE SCALE     add them times SCALE (both repeatable: summed)
 *   --control-vector-layer-range START END the layers they are added after (default 1 .. n_layer)
 *
 *   cli_cvec cv = {0};
 *   for (...) { int r = cli_cvec_flag(&cv, "sift generate", argc, argv, &i); ... } // 1 taken, 0 not ours, -1 usage error
 *   if (cli_cvec_apply(&cv, ctx, "sift generate") != 0) ...                        // loads, checks, sets; message printed
 */
#ifndef SIFT_CLI_CVEC_H
#define SIFT_CLI_CVEC_H

#include <stdio.h>

#include "sift.h"

#define CLI_CVEC_MAX 16

typedef struct cli_cvec {
    const char *paths[CLI_CVEC_MAX];
    float scales[CLI_CVEC_MAX];
    int n;
    long layer_start, layer_end; /* <= 0: llama.cpp's defaults (1, n_layer) */
} cli_cvec;

int cli_cvec_flag(cli_cvec *c, const char *cmd, int argc, char **argv, int *i);
/* No files: nothing (0). Else load, set on ctx; 0, or -1 with the message on stderr. */
int cli_cvec_apply(const cli_cvec *c, sift_context *ctx, const char *cmd);
void cli_cvec_help(FILE *f);

#endif
