/*
 * cli_cvec.c - the control-vector flags (cli_cvec.h): parsed here once for every command,
 * with llama.cpp's defaults for the layer range (common_init_from_params: start <= 0 -> 1,
 * end <= 0 -> n_layer).
 */
#include "cli_cvec.h"

#include <string.h>

#include "cli_util.h"

int cli_cvec_flag(cli_cvec *c, const char *cmd, int argc, char **argv, int *i)
{
    const char *a = argv[*i];
    const bool plain = !strcmp(a, "--control-vector"), scaled = !strcmp(a, "--control-vector-scaled"),
               range = !strcmp(a, "--control-vector-layer-range");
    if (!plain && !scaled && !range) return 0;
    const int need = plain ? 1 : 2;
    if (*i + need >= argc) {
        fprintf(stderr, "%s: %s: missing value (%s)\n", cmd, a, plain ? "FILE" : scaled ? "FILE SCALE" : "START END");
        return -1;
    }
    const char *v1 = argv[*i + 1], *v2 = need == 2 ? argv[*i + 2] : NULL;
    if (range) {
        if (!cli_parse_long(v1, 0, 1L << 20, &c->layer_start) || !cli_parse_long(v2, 0, 1L << 20, &c->layer_end)) {
            fprintf(stderr, "%s: %s: expected two layer numbers >= 0, got '%s' '%s'\n", cmd, a, v1, v2);
            return -1;
        }
    } else {
        float s = 1.0f;
        if (scaled && !cli_parse_float(v2, &s)) {
            fprintf(stderr, "%s: %s: SCALE: expected a number, got '%s'\n", cmd, a, v2);
            return -1;
        }
        if (c->n == CLI_CVEC_MAX) {
            fprintf(stderr, "%s: %s: at most %d control vectors\n", cmd, a, CLI_CVEC_MAX);
            return -1;
        }
        c->paths[c->n] = v1;
        c->scales[c->n++] = s;
    }
    *i += need;
    return 1;
}

int cli_cvec_apply(const cli_cvec *c, sift_context *ctx, const char *cmd)
{
    if (!c->n) return 0;
    sift_error err = {0};
    sift_control_vector *cv = NULL;
    if (sift_control_vector_load(c->paths, c->scales, c->n, &cv, &err) != SIFT_OK) {
        fprintf(stderr, "%s: %s\n", cmd, err.msg);
        return -1;
    }
    sift_model_info mi;
    sift_model_get_info(sift_context_model(ctx), &mi);
    const int32_t l0 = c->layer_start > 0 ? (int32_t)c->layer_start : 1;
    const int32_t l1 = c->layer_end > 0 ? (int32_t)c->layer_end : mi.n_layer;
    const sift_status rc = sift_context_set_control_vector(ctx, sift_control_vector_data(cv), sift_control_vector_len(cv),
                                                           sift_control_vector_n_embd(cv), l0, l1, &err);
    sift_control_vector_free(cv);
    if (rc != SIFT_OK) {
        fprintf(stderr, "%s: %s\n", cmd, err.msg);
        return -1;
    }
    return 0;
}

void cli_cvec_help(FILE *f)
{
    fprintf(f, "  --control-vector FILE     add a control vector (llama.cpp's GGUF, direction.<layer>) to the\n"
               "                            residual stream after each layer (repeatable: summed)\n"
               "  --control-vector-scaled FILE SCALE   the same, times SCALE\n"
               "  --control-vector-layer-range START END   layers it is added after (default 1 .. n_layer)\n");
}
