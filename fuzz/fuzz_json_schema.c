/*
 * fuzz_json_schema.c - libFuzzer target for the JSON schema -> GBNF converter.
 *
 * One input: a JSON schema (the first byte's low bit picks strict or lenient mode, and the
 * byte is kept: it is usually '{' or ' ' anyway). The converter must return a grammar or an
 * error with a message; a grammar it returns must parse (sift_grammar_parse) - a converter
 * that writes broken GBNF is a bug, so that aborts - and is then matched against a few JSON
 * texts, which must not crash the matcher.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sift.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint32_t flags = size && (data[0] & 1) ? SIFT_JSON_SCHEMA_LENIENT : 0;
    sift_error err = {0};
    char *gbnf = sift_json_schema_to_grammar((const char *)data, size, flags, &err);
    if (!gbnf) {
        if (err.status == SIFT_OK || !err.msg[0]) abort(); /* errors must say what */
        return 0;
    }
    sift_grammar *g = sift_grammar_parse(gbnf, strlen(gbnf), "root", NULL, &err);
    if (!g) {
        if (err.status == SIFT_E_NOMEM) {
            free(gbnf);
            return 0;
        }
        fprintf(stderr, "the converter wrote a grammar that does not parse: %s\n%s\n", err.msg, gbnf);
        abort();
    }
    static const char *texts[] = {"{}", "[]", "null", "0", "-12", "1.5e3", "\"\"", "\"a\\\"b\"", "true",
                                  "{\"a\": 1}", "[1, \"x\", null]", "{\"a\": {\"b\": [true]}}"};
    for (size_t k = 0; k < sizeof texts / sizeof *texts; k++) sift_grammar_match(g, texts[k], strlen(texts[k]), NULL);
    sift_grammar_free(g);
    free(gbnf);
    return 0;
}
