/*
 * llama_grammar_cases.c - llama.cpp's grammar tests, run on sift from their data
 * (tests/data/llama_grammar_tests.json, extracted by tests/scripts/llama_grammar_tests.py from
 * ggml-org/llama.cpp tests/test-grammar-integration.cpp and tests/test-json-schema-to-grammar.cpp).
 *
 * Per case:
 *   grammar          the GBNF builds (root rule `root`, or the case's), every passing string is
 *                    a whole sentence of it and no failing one is;
 *   schema           the same through sift_json_schema_to_grammar with llama.cpp's conventions
 *                    (SIFT_JSON_SCHEMA_LLAMA: their converter's reading);
 *   grammar_fails    the GBNF does not build;
 *   schema_verdict   the schema converts (or is refused) as llama.cpp's converter does.
 * A string with token ids ([text, id, text, ...]) runs through the grammar sampler over a
 * small vocabulary: ids 0..31 control tokens, 32 + b the single byte b; a token must be
 * allowed before it is accepted, and the grammar must be able to end after the last one.
 *
 * Every difference found must be listed in tests/data/llama_grammar_differences.json (case,
 * what differs, why; docs/fidelity.md explains them), and every listed one must still occur:
 * the run fails on an unlisted difference and on a listed one that went away.
 *
 *   llama_grammar_cases [DATA.json [DIFFERENCES.json]]
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar_util.h"
#include "sift.h"

#define N_CTRL 32
#define N_VOCAB (N_CTRL + 256)

typedef struct {
    gt_vocab v;
    char ctrl[N_CTRL][12];
    char bytes[256][2];
    sift_candidates cand;
} tok_env;

static void env_init(tok_env *e)
{
    const char *texts[N_VOCAB];
    int lens[N_VOCAB];
    uint8_t attrs[N_VOCAB];
    for (int i = 0; i < N_CTRL; i++) {
        snprintf(e->ctrl[i], sizeof e->ctrl[i], "<|c%d|>", i);
        texts[i] = e->ctrl[i], lens[i] = -1, attrs[i] = SIFT_TOKEN_ATTR_CONTROL;
    }
    for (int b = 0; b < 256; b++) {
        e->bytes[b][0] = (char)b;
        texts[N_CTRL + b] = e->bytes[b], lens[N_CTRL + b] = 1, attrs[N_CTRL + b] = SIFT_TOKEN_ATTR_NORMAL;
    }
    gt_vocab_make(&e->v, texts, lens, attrs, N_VOCAB);
    /* gt_vocab keeps the text pointers: they live in e */
    if (sift_candidates_init(&e->cand, N_VOCAB) != SIFT_OK) abort();
}

/* one token through the sampler: allowed first (its logit not -inf), then accepted */
static bool feed(tok_env *e, sift_sampler *s, sift_token t)
{
    for (int i = 0; i < N_VOCAB; i++) e->cand.id[i] = i, e->cand.logit[i] = 0.0f;
    e->cand.size = N_VOCAB;
    sift_sampler_apply(s, &e->cand);
    bool ok = false;
    for (size_t i = 0; i < e->cand.size; i++)
        if (e->cand.id[i] == t) ok = e->cand.logit[i] != -INFINITY;
    if (ok) sift_sampler_accept(s, t);
    return ok;
}

/* a string with token ids: a whole sentence of the grammar? */
static bool match_parts(tok_env *e, const char *gbnf, const char *root, const cJSON *parts)
{
    sift_grammar_params p = sift_grammar_default_params();
    p.root = root;
    sift_error err = {0};
    sift_sampler *s = sift_sampler_init_grammar_ex(&e->v.view, gbnf, strlen(gbnf), &p, &err);
    if (!s) return false;
    bool ok = true;
    for (const cJSON *x = parts->child; x && ok; x = x->next) {
        if (cJSON_IsNumber(x)) ok = x->valueint >= 0 && x->valueint < N_CTRL && feed(e, s, (sift_token)x->valueint);
        else
            for (const unsigned char *c = (const unsigned char *)x->valuestring; ok && *c; c++) ok = feed(e, s, (sift_token)(N_CTRL + *c));
    }
    sift_grammar_status st = sift_grammar_sampler_status(s);
    sift_sampler_free(s);
    return ok && (st == SIFT_GRAMMAR_CAN_END || st == SIFT_GRAMMAR_DONE);
}

static bool matches(tok_env *e, const sift_grammar *g, const char *gbnf, const char *root, const cJSON *str)
{
    if (cJSON_IsArray(str)) return match_parts(e, gbnf, root, str);
    return sift_grammar_match(g, str->valuestring, strlen(str->valuestring), NULL) == SIFT_GRAMMAR_COMPLETE;
}

typedef struct {
    cJSON *listed; /* the differences file's array */
    bool *seen;
    int n_listed, unexpected;
} diffs;

/* a difference: listed (and marked seen) or reported */
static void differ(diffs *d, const char *kind, const char *desc, const char *what, const char *detail)
{
    int i = 0;
    for (const cJSON *x = d->listed ? d->listed->child : NULL; x; x = x->next, i++) {
        const cJSON *k = cJSON_GetObjectItemCaseSensitive(x, "kind"), *ds = cJSON_GetObjectItemCaseSensitive(x, "desc"),
                    *w = cJSON_GetObjectItemCaseSensitive(x, "what");
        if (cJSON_IsString(k) && cJSON_IsString(ds) && cJSON_IsString(w) && !strcmp(k->valuestring, kind) && !strcmp(ds->valuestring, desc) &&
            !strcmp(w->valuestring, what)) {
            d->seen[i] = true;
            return;
        }
    }
    d->unexpected++;
    fprintf(stderr, "UNLISTED difference: %s \"%s\": %s%s%s\n", kind, desc, what, detail ? ": " : "", detail ? detail : "");
}

static char *what_of(const char *side, const cJSON *str)
{
    char *txt = cJSON_PrintUnformatted(str);
    size_t n = strlen(side) + (txt ? strlen(txt) : 0) + 2;
    char *w = malloc(n);
    if (w) snprintf(w, n, "%s %s", side, txt ? txt : "?");
    free(txt);
    return w;
}

int main(int argc, char **argv)
{
    char p1[1024], p2[1024];
    const char *data = argc > 1 ? argv[1] : gt_src_path(p1, sizeof p1, "tests/data/llama_grammar_tests.json");
    const char *dpath = argc > 2 ? argv[2] : gt_src_path(p2, sizeof p2, "tests/data/llama_grammar_differences.json");
    size_t n1 = 0, n2 = 0;
    char *t1 = gt_read_file(data, &n1), *t2 = gt_read_file(dpath, &n2);
    cJSON *doc = t1 ? cJSON_ParseWithLength(t1, n1) : NULL, *ddoc = t2 ? cJSON_ParseWithLength(t2, n2) : NULL;
    const cJSON *cases = cJSON_GetObjectItemCaseSensitive(doc, "cases");
    if (!cJSON_IsArray(cases) || !ddoc) {
        fprintf(stderr, "cannot read %s / %s\n", data, dpath);
        return 1;
    }
    diffs d = {cJSON_GetObjectItemCaseSensitive(ddoc, "differences"), NULL, 0, 0};
    d.n_listed = cJSON_GetArraySize(d.listed);
    d.seen = calloc((size_t)d.n_listed + 1, sizeof *d.seen);
    tok_env *e = calloc(1, sizeof *e);
    if (!d.seen || !e) return 1;
    env_init(e);
    int n_cases = 0, n_strings = 0;
    for (const cJSON *c = cases->child; c; c = c->next, n_cases++) {
        const char *kind = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "kind"));
        const char *desc = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "desc"));
        const char *root = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "root"));
        const char *text = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "grammar"));
        const char *schema = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "schema"));
        if (!kind || !desc || (!text && !schema)) {
            fprintf(stderr, "case %d: malformed\n", n_cases);
            return 1;
        }
        sift_error err = {0};
        char *gbnf = NULL;
        if (schema) {
            gbnf = sift_json_schema_to_grammar(schema, strlen(schema), SIFT_JSON_SCHEMA_LLAMA, &err);
            if (!strcmp(kind, "schema_verdict")) {
                bool want = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "converts"));
                if ((gbnf != NULL) != want) differ(&d, kind, desc, want ? "refused" : "converted", gbnf ? NULL : err.msg);
                free(gbnf);
                continue;
            }
            if (!gbnf) {
                differ(&d, kind, desc, "refused", err.msg);
                continue;
            }
            text = gbnf;
        }
        sift_grammar *g = sift_grammar_parse(text, strlen(text), root ? root : "root", NULL, &err);
        if (!strcmp(kind, "grammar_fails")) {
            if (g) differ(&d, kind, desc, "builds", NULL);
            sift_grammar_free(g);
            free(gbnf);
            continue;
        }
        if (!g) {
            differ(&d, kind, desc, "does not build", err.msg);
            free(gbnf);
            continue;
        }
        for (int side = 0; side < 2; side++) {
            const cJSON *list = cJSON_GetObjectItemCaseSensitive(c, side ? "fail" : "pass");
            for (const cJSON *s = list ? list->child : NULL; s; s = s->next, n_strings++)
                if (matches(e, g, text, root ? root : "root", s) == (side == 1)) {
                    char *w = what_of(side ? "accepts" : "rejects", s);
                    differ(&d, kind, desc, w ? w : "?", NULL);
                    free(w);
                }
        }
        sift_grammar_free(g);
        free(gbnf);
    }
    int gone = 0, i = 0;
    for (const cJSON *x = d.listed ? d.listed->child : NULL; x; x = x->next, i++)
        if (!d.seen[i]) {
            gone++;
            char *s = cJSON_PrintUnformatted(x);
            fprintf(stderr, "listed difference no longer occurs (remove it): %s\n", s ? s : "?");
            free(s);
        }
    printf("llama.cpp grammar tests: %d cases, %d strings; %d listed differences, %d unlisted, %d gone\n", n_cases, n_strings, d.n_listed,
           d.unexpected, gone);
    sift_candidates_free(&e->cand);
    gt_vocab_free(&e->v);
    free(e);
    free(d.seen);
    cJSON_Delete(doc);
    cJSON_Delete(ddoc);
    free(t1);
    free(t2);
    return d.unexpected || gone ? 1 : 0;
}
