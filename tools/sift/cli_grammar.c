/*
 * cli_grammar.c - llama.cpp's grammar flags and the grammar sampler they ask for (see
 * cli_grammar.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli_grammar.h"
#include "cli_util.h"

void cli_grammar_init(cli_grammar *g)
{
    memset(g, 0, sizeof *g);
    g->mode = SIFT_GRAMMAR_REJECTION;
}

void cli_grammar_help(FILE *f)
{
    fprintf(f, "grammar (one of):\n"
               "  --grammar GBNF              constrain the output to a GBNF grammar (llama.cpp syntax)\n"
               "  --grammar-file FILE         ... read from a file\n"
               "  -j, --json-schema JSON      ... to a JSON schema (converted to GBNF)\n"
               "  -jf, --json-schema-file FILE\n"
               "  --json-schema-llama         (or --llama-conventions) convert with llama.cpp's conventions (required properties first, a\n"
               "                              missing additionalProperties = false) instead of JSON Schema's\n"
               "  --grammar-first             apply the grammar to the whole vocabulary before the samplers\n"
               "                              (default: llama.cpp's rejection strategy, grammar only when the pick is refused)\n");
}

int cli_grammar_flag(cli_grammar *g, int argc, char **argv, int *i)
{
    const char *a = argv[*i];
    bool file = false, json = false;
    if (!strcmp(a, "--grammar-first")) {
        g->mode = SIFT_GRAMMAR_FIRST;
        return 1;
    }
    if (!strcmp(a, "--json-schema-llama") || !strcmp(a, "--llama-conventions")) {
        g->json_llama = true;
        return 1;
    }
    if (!strcmp(a, "--grammar")) {
    } else if (!strcmp(a, "--grammar-file")) {
        file = true;
    } else if (!strcmp(a, "-j") || !strcmp(a, "--json-schema")) {
        json = true;
    } else if (!strcmp(a, "-jf") || !strcmp(a, "--json-schema-file")) {
        json = file = true;
    } else {
        return 0;
    }
    if (*i + 1 >= argc) {
        fprintf(stderr, "sift: %s needs a value\n", a);
        return -1;
    }
    if (g->flag) {
        fprintf(stderr, "sift: %s and %s exclude each other (give one grammar)\n", g->flag, a);
        return -1;
    }
    g->flag = a;
    g->value = argv[++*i];
    g->from_file = file;
    g->json = json;
    return 1;
}

static void set_err(sift_error *err, int status, const char *msg, const char *path, const char *why)
{
    if (!err) return;
    err->status = status;
    snprintf(err->msg, sizeof err->msg, "%s '%s'%s%s", msg, path, why ? ": " : "", why ? why : "");
}

static char *read_text(const char *path, size_t *len, sift_error *err)
{
    char *b = cli_read_file(path, len);
    if (!b) set_err(err, errno == ENOMEM ? SIFT_E_NOMEM : SIFT_E_IO, errno == ENOMEM || errno == EIO ? "cannot read" : "cannot open",
                    path, strerror(errno));
    return b;
}

char *cli_grammar_text(const cli_grammar *g, sift_error *err)
{
    if (err) {
        err->status = SIFT_OK;
        err->msg[0] = 0;
    }
    if (!g->flag) return NULL;
    size_t len = strlen(g->value);
    char *text = NULL;
    if (g->from_file) {
        text = read_text(g->value, &len, err);
        if (!text) return NULL;
    }
    if (g->json) {
        sift_error e2 = {0};
        char *gbnf = sift_json_schema_to_grammar(text ? text : g->value, len, g->json_llama ? SIFT_JSON_SCHEMA_LLAMA : 0, &e2);
        free(text);
        if (!gbnf && err) {
            err->status = e2.status;
            snprintf(err->msg, sizeof err->msg, "%.40s: %.200s", g->flag, e2.msg);
        }
        return gbnf;
    }
    if (text) return text;
    text = malloc(len + 1);
    if (text) memcpy(text, g->value, len + 1);
    else if (err) {
        err->status = SIFT_E_NOMEM;
        snprintf(err->msg, sizeof err->msg, "out of memory");
    }
    return text;
}

sift_sampler *cli_grammar_sampler(const cli_grammar *g, const sift_vocab_view *vocab, sift_error *err)
{
    char *gbnf = cli_grammar_text(g, err);
    if (!gbnf) return NULL;
    sift_error e2 = {0};
    sift_sampler *s = sift_sampler_init_grammar_ex(vocab, gbnf, strlen(gbnf), NULL, &e2);
    free(gbnf);
    if (!s && err) {
        err->status = e2.status ? e2.status : SIFT_E_INVAL;
        snprintf(err->msg, sizeof err->msg, "%.40s: %.200s", g->flag, e2.msg);
    }
    return s;
}
