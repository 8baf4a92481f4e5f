/*
 * cmd_json_schema_to_grammar.c - `sift json-schema-to-grammar`: print the GBNF grammar of a
 * JSON schema (llama.cpp's examples/json_schema_to_grammar.py, as a command).
 *
 *   sift json-schema-to-grammar SCHEMA.json        (- or nothing: read stdin)
 *   sift json-schema-to-grammar -e '{"type": "integer", "minimum": 1}'
 *   sift json-schema-to-grammar --lenient ...      ignore keywords a grammar cannot express
 *   sift json-schema-to-grammar --check ...        also parse the grammar (sift_grammar_parse)
 *
 * Exit 0 with the grammar on stdout; 1 with the converter's message (which names the
 * keyword and its JSON pointer) on stderr; 2 for a usage error.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_util.h"
#include "sift.h"

const char sift_cmd_json_schema_to_grammar_help[] = "convert a JSON schema to a GBNF grammar (llama.cpp's converter style)";

static void usage(FILE *f)
{
    fprintf(f, "usage: sift json-schema-to-grammar [--lenient] [--llama] [--draft7] [--check] [SCHEMA.json | - | -e JSON]\n"
               "  --llama     llama.cpp's conventions: required properties first, a missing additionalProperties\n"
               "              is false (default: JSON Schema's: the schema's order, other keys allowed)\n"
               "  --draft7    a schema without $schema is draft-07 ($ref overrides its siblings; default 2020-12)\n"
               "  --lenient   ignore keywords a grammar cannot express (not, uniqueItems, ...) instead of failing\n"
               "  --check     parse the resulting grammar too (exit 1 if it does not parse)\n"
               "  -e JSON     the schema on the command line\n");
}

int sift_cmd_json_schema_to_grammar(int argc, char **argv)
{
    uint32_t flags = 0;
    bool check = false;
    const char *path = NULL, *inline_schema = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--lenient")) {
            flags |= SIFT_JSON_SCHEMA_LENIENT;
        } else if (!strcmp(a, "--llama")) {
            flags |= SIFT_JSON_SCHEMA_LLAMA;
        } else if (!strcmp(a, "--draft7")) {
            flags |= SIFT_JSON_SCHEMA_DRAFT7;
        } else if (!strcmp(a, "--check")) {
            check = true;
        } else if (!strcmp(a, "-e") || !strcmp(a, "--schema")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "sift json-schema-to-grammar: %s needs a value\n", a);
                return 2;
            }
            inline_schema = argv[++i];
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "sift json-schema-to-grammar: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        } else if (!path) {
            path = a;
        } else {
            fprintf(stderr, "sift json-schema-to-grammar: more than one schema file ('%s')\n", a);
            return 2;
        }
    }
    if (path && inline_schema) {
        fprintf(stderr, "sift json-schema-to-grammar: give a file or -e, not both\n");
        return 2;
    }
    size_t len = 0;
    char *text;
    if (inline_schema) {
        len = strlen(inline_schema);
        text = malloc(len + 1);
        if (text) memcpy(text, inline_schema, len + 1);
    } else if (!path || !strcmp(path, "-")) {
        text = cli_read_stream(stdin, &len);
    } else {
        FILE *f = fopen(path, "rb");
        if (!f) {
            fprintf(stderr, "sift json-schema-to-grammar: cannot open '%s': %s\n", path, strerror(errno));
            return 1;
        }
        text = cli_read_stream(f, &len);
        fclose(f);
    }
    if (!text) {
        fprintf(stderr, "sift json-schema-to-grammar: cannot read the schema (read error or out of memory)\n");
        return 1;
    }
    sift_error err = {0};
    char *gbnf = sift_json_schema_to_grammar(text, len, flags, &err);
    free(text);
    if (!gbnf) {
        fprintf(stderr, "sift json-schema-to-grammar: %s\n", err.msg);
        return 1;
    }
    if (check) {
        sift_grammar *g = sift_grammar_parse(gbnf, strlen(gbnf), "root", NULL, &err);
        if (!g) {
            fprintf(stderr, "sift json-schema-to-grammar: the generated grammar does not parse: %s\n", err.msg);
            free(gbnf);
            return 1;
        }
        sift_grammar_free(g);
    }
    fputs(gbnf, stdout);
    free(gbnf);
    return 0;
}
