/*
 * compile.c - a JSON schema through the grammar compiler (sift_grammar_compile_json_schema).
 *
 * Why here: the compiler (src/grammar/compiler.c) caches compiled grammars by key, but the
 * grammar layer cannot convert a schema - the converter is this layer, above it. So the
 * schema's own text and flags are the key (looked up before anything is converted: a repeated
 * schema costs a hash and a compare), and on a miss the schema is converted, its GBNF parsed
 * once (the converter neither sorts its rules for reading nor parses the text to check it:
 * a failed parse here is worded as the converter's own check would), and the grammar filed
 * under the schema's key, not under its GBNF.
 */
#include <stdlib.h>

#include "core/status.h"
#include "grammar/compiler.h"
#include "schema/json_schema_int.h"

sift_compiled_grammar *sift_grammar_compile_json_schema(sift_grammar_compiler *c, const char *schema, size_t len,
                                                        uint32_t flags, sift_error *err)
{
    if (!c || !schema || !len) {
        sift__error_set(err, SIFT_E_INVAL, "JSON schema compile: %s", c ? "the schema text is empty" : "no compiler");
        return NULL;
    }
    sift_compiled_grammar *cg = sift__gx_compiler_find(c, GX_KIND_JSON_SCHEMA, flags, NULL, schema, len);
    if (cg) return cg;
    char *gbnf = sift__js_to_gbnf(schema, len, flags, true, err);
    if (!gbnf) return NULL;
    const size_t n = strlen(gbnf);
    sift_error e2 = {0};
    sift_grammar *g = sift_grammar_parse(gbnf, n, "root", sift__gx_compiler_view(c), &e2);
    if (!g) sift__js_parse_failed(err, &e2);
    cg = g ? sift__gx_compiler_build(c, g, gbnf, n, 0, err) : NULL;
    free(gbnf);
    if (!cg) return NULL;
    return sift__gx_compiler_keep(c, GX_KIND_JSON_SCHEMA, flags, NULL, schema, len, cg);
}
