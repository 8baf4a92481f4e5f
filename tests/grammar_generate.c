/*
 * grammar_generate.c - generation under a grammar on real vocabularies (CTest: grammar_generate,
 * label slow).
 *
 * For each vocabulary (llama-spm 32000, deepseek-llm 102400) and each grammar (the five of
 * tests/data/grammars, and two JSON schemas converted to GBNF), 200 seeded generations over
 * random logits: 16 random logit vectors per vocabulary (noise of sd ~1.7), step t of a
 * document uses vector (seed + t) mod 16; every step fills the whole vocabulary, applies the
 * grammar sampler, picks by softmax among what it left (inverse CDF over the allowed tokens,
 * with precomputed exponentials), and accepts. Every finished document must be
 * a sentence of the grammar (sift_grammar_match, the independent text matcher); JSON
 * documents must parse with cJSON, and schema documents must validate against their schema
 * (a small validator below, for the keywords these schemas use).
 *
 * Random logits know nothing about the grammar, so a document could wander for long; after
 * 150 tokens the logits of EOG and of tokens containing a closing character ('}', ']', ')',
 * '"', ';', '\n') get +8, and after 600 tokens +30, which ends documents without touching
 * what the grammar allows. A document that still has not ended after 1500 tokens is a
 * failure. CTest runs it with --docs 50 (CI time); the acceptance run is the default, 200.
 *
 * --model FILE: the same with a real model instead of random logits (CTest:
 * grammar_generate_model, ../shared/models/stories260K.gguf). Each document: a fresh KV
 * cache, the prompt "Once upon a time" (BOS first), then the model's logits through a
 * top_k(40) -> dist(seed) chain with the grammar kept outside it (sift_grammar_chain_sample),
 * in llama.cpp's rejection mode for even documents and grammar-first for odd ones; each
 * token is decoded to get the next logits. The same ending bias applies (added to the
 * model's logits).
 *
 *   grammar_generate [--docs N] [--vocab NAME] [--grammar NAME] [--model FILE]
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <cjson/cJSON.h>
#include <math.h>
#include <pcre2.h>
#include <time.h>

#include "grammar_util.h"

typedef struct {
    const char *name;
    const char *schema; /* NULL: a grammar file of tests/data/grammars */
    bool json;
} gcase;

static const char *SCHEMA_PERSON =
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":24},"
    "\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":150},\"pets\":{\"type\":\"array\",\"maxItems\":4,"
    "\"items\":{\"enum\":[\"cat\",\"dog\",\"fish\",\"parrot\"]}}},\"required\":[\"name\",\"age\",\"pets\"],"
    "\"additionalProperties\":false}";

static const char *SCHEMA_ORDER =
    "{\"$defs\":{\"line\":{\"type\":\"object\",\"properties\":{\"sku\":{\"type\":\"string\",\"pattern\":\"^[A-Z]{3}-[0-9]{4}$\"},"
    "\"qty\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":99},\"note\":{\"type\":\"string\",\"maxLength\":12}},"
    "\"required\":[\"sku\",\"qty\"],\"additionalProperties\":false}},"
    "\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"string\",\"format\":\"uuid\"},"
    "\"date\":{\"type\":\"string\",\"format\":\"date\"},\"status\":{\"enum\":[\"new\",\"paid\",\"sent\"]},"
    "\"lines\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/line\"},\"minItems\":1,\"maxItems\":3},"
    "\"gift\":{\"type\":\"boolean\"}},\"required\":[\"id\",\"date\",\"status\",\"lines\"],\"additionalProperties\":false}";

/* ---- a small JSON schema validator (the keywords the schemas above use) ---- */

static const cJSON *resolve(const cJSON *root, const cJSON *s)
{
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(s, "$ref");
    if (!cJSON_IsString(ref) || strncmp(ref->valuestring, "#/$defs/", 8)) return s;
    return cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "$defs"), ref->valuestring + 8);
}

static size_t utf8_chars(const char *s)
{
    size_t n = 0;
    for (; *s; s++) n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

static bool regex_ok(const char *pattern, const char *s)
{
    int ec;
    PCRE2_SIZE eo;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, PCRE2_UTF, &ec, &eo, NULL);
    if (!re) return false;
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    bool ok = pcre2_match(re, (PCRE2_SPTR)s, strlen(s), 0, 0, md, NULL) >= 0;
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    return ok;
}

static bool validate(const cJSON *root, const cJSON *schema, const cJSON *v, char *why, size_t cap)
{
    const cJSON *s = resolve(root, schema);
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(s, "enum");
    if (en) {
        for (const cJSON *e = en->child; e; e = e->next)
            if (cJSON_Compare(e, v, true)) return true;
        snprintf(why, cap, "not in enum");
        return false;
    }
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(s, "type");
    const char *t = cJSON_IsString(type) ? type->valuestring : NULL;
    if (!t) return true;
    if (!strcmp(t, "object")) {
        if (!cJSON_IsObject(v)) return snprintf(why, cap, "not an object"), false;
        const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
        for (const cJSON *r = cJSON_GetObjectItemCaseSensitive(s, "required") ? cJSON_GetObjectItemCaseSensitive(s, "required")->child : NULL; r; r = r->next)
            if (!cJSON_GetObjectItemCaseSensitive(v, r->valuestring)) return snprintf(why, cap, "missing '%s'", r->valuestring), false;
        for (const cJSON *m = v->child; m; m = m->next) {
            const cJSON *ps = cJSON_GetObjectItemCaseSensitive(props, m->string);
            if (!ps) {
                if (cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(s, "additionalProperties")))
                    return snprintf(why, cap, "extra property '%s'", m->string), false;
                continue;
            }
            if (!validate(root, ps, m, why, cap)) return false;
        }
        return true;
    }
    if (!strcmp(t, "array")) {
        if (!cJSON_IsArray(v)) return snprintf(why, cap, "not an array"), false;
        int n = cJSON_GetArraySize(v);
        const cJSON *mn = cJSON_GetObjectItemCaseSensitive(s, "minItems"), *mx = cJSON_GetObjectItemCaseSensitive(s, "maxItems");
        if ((mn && n < mn->valueint) || (mx && n > mx->valueint)) return snprintf(why, cap, "%d items", n), false;
        const cJSON *items = cJSON_GetObjectItemCaseSensitive(s, "items");
        for (const cJSON *e = v->child; e && items; e = e->next)
            if (!validate(root, items, e, why, cap)) return false;
        return true;
    }
    if (!strcmp(t, "string")) {
        if (!cJSON_IsString(v)) return snprintf(why, cap, "not a string"), false;
        size_t n = utf8_chars(v->valuestring);
        const cJSON *mn = cJSON_GetObjectItemCaseSensitive(s, "minLength"), *mx = cJSON_GetObjectItemCaseSensitive(s, "maxLength");
        if ((mn && n < (size_t)mn->valueint) || (mx && n > (size_t)mx->valueint)) return snprintf(why, cap, "length %zu", n), false;
        const cJSON *pat = cJSON_GetObjectItemCaseSensitive(s, "pattern");
        if (pat && !regex_ok(pat->valuestring, v->valuestring)) return snprintf(why, cap, "pattern"), false;
        const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(s, "format");
        if (fmt && !strcmp(fmt->valuestring, "uuid") &&
            !regex_ok("^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$", v->valuestring))
            return snprintf(why, cap, "uuid"), false;
        if (fmt && !strcmp(fmt->valuestring, "date") && !regex_ok("^\\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\\d|3[01])$", v->valuestring))
            return snprintf(why, cap, "date"), false;
        return true;
    }
    if (!strcmp(t, "integer")) {
        if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble)) return snprintf(why, cap, "not an integer"), false;
        const cJSON *mn = cJSON_GetObjectItemCaseSensitive(s, "minimum"), *mx = cJSON_GetObjectItemCaseSensitive(s, "maximum");
        if ((mn && v->valuedouble < mn->valuedouble) || (mx && v->valuedouble > mx->valuedouble)) return snprintf(why, cap, "out of range"), false;
        return true;
    }
    if (!strcmp(t, "boolean")) return cJSON_IsBool(v) || (snprintf(why, cap, "not a boolean"), false);
    return true;
}

/* ---- generation ---- */

/* A finished document must be a sentence of the grammar; JSON must parse and validate. */
static bool check_doc(const char *vocab_name, const gcase *gc, const sift_grammar *g, const cJSON *schema, int d,
                      const char *text, size_t len)
{
    size_t off = 0;
    int m = sift_grammar_match(g, text, len, &off);
    if (m != SIFT_GRAMMAR_COMPLETE) {
        fprintf(stderr, "%s/%s doc %d: the text is not a sentence of the grammar (%d at byte %zu):\n%s\n", vocab_name, gc->name,
                d, m, off, text);
        return false;
    }
    if (!gc->json) return true;
    cJSON *j = cJSON_ParseWithLength(text, len);
    if (!j) {
        fprintf(stderr, "%s/%s doc %d: cJSON cannot parse:\n%s\n", vocab_name, gc->name, d, text);
        return false;
    }
    char why[128] = "";
    bool ok = !schema || validate(schema, schema, j, why, sizeof why);
    if (!ok) fprintf(stderr, "%s/%s doc %d: does not validate (%s):\n%s\n", vocab_name, gc->name, d, why, text);
    cJSON_Delete(j);
    return ok;
}

static uint64_t rng(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}
static double u01(uint64_t *s) { return (double)(rng(s) >> 11) * 0x1p-53; }

static int run_case(const char *vocab_name, const sift_vocab *vocab, const sift_vocab_view *view, const gcase *gc, int n_docs)
{
    size_t glen = 0;
    char *gbnf = NULL;
    sift_error err = {0};
    if (gc->schema) {
        gbnf = sift_json_schema_to_grammar(gc->schema, strlen(gc->schema), 0, &err);
        glen = gbnf ? strlen(gbnf) : 0;
    } else {
        gbnf = gt_grammar_text(gc->name, &glen);
    }
    if (!gbnf) {
        fprintf(stderr, "%s: no grammar: %s\n", gc->name, err.msg);
        return 1;
    }
    cJSON *schema = gc->schema ? cJSON_Parse(gc->schema) : NULL;
    sift_grammar *g = sift_grammar_parse(gbnf, glen, "root", view, &err);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    sift_sampler *s = sift_sampler_init_grammar_ex(view, gbnf, glen, NULL, &err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (!g || !s) {
        fprintf(stderr, "%s: %s\n", gc->name, err.msg);
        return 1;
    }
    const int n = view->n_tokens;
    /* tokens that contain a closing character, for the ending bias */
    bool *closer = calloc((size_t)n, 1);
    for (int t = 0; t < n; t++) {
        const char *p = view->piece[t];
        for (uint32_t k = 0; k < view->piece_len[t]; k++)
            if (strchr("}])\";\n", p[k]) && p[k]) closer[t] = true;
        if (sift_vocab_is_eog(vocab, t)) closer[t] = true;
    }
    sift_candidates c;
    sift_candidates_init(&c, (size_t)n);
    /* 16 noise vectors and their exponentials (the bias multiplies the closers' weights) */
    enum { NV = 16 };
    float *logits = malloc(sizeof(float) * (size_t)n * NV);
    double *ew = malloc(sizeof(double) * (size_t)n * NV);
    uint64_t vseed = 0xABCDEF12345ULL;
    for (size_t k = 0; k < (size_t)n * NV; k++) {
        logits[k] = (float)(3.0 * (u01(&vseed) + u01(&vseed) - 1.0));
        ew[k] = exp((double)logits[k]);
    }
    size_t cap = 1 << 16;
    char *text = malloc(cap);
    int failures = 0, complete = 0;
    long tokens = 0, max_tokens = 0;
    uint64_t seed = 0x5EED0000ULL ^ (uint64_t)(uintptr_t)gc->name[0];
    for (int d = 0; d < n_docs && failures < 5; d++) {
        sift_sampler_reset(s);
        size_t len = 0;
        int steps;
        bool ended = false;
        for (steps = 0; steps < 1500; steps++) {
            const double boost = steps >= 600 ? exp(30.0) : steps >= 150 ? exp(8.0) : 1.0;
            const size_t vec = (size_t)((uint64_t)d * 7 + (uint64_t)steps) % NV;
            const float *x = logits + vec * (size_t)n;
            const double *e = ew + vec * (size_t)n;
            sift_candidates_fill(&c, x, (size_t)n);
            sift_sampler_apply(s, &c);
            /* inverse CDF over what the grammar left (a sparse mask removes the banned
             * candidates, a dense one gives them -inf: go through c.id either way) */
            double sum = 0;
            for (size_t i = 0; i < c.size; i++)
                if (c.logit[i] != -INFINITY) sum += e[c.id[i]] * (closer[c.id[i]] ? boost : 1.0);
            if (sum == 0) {
                fprintf(stderr, "%s/%s doc %d step %d: the grammar allows nothing\n", vocab_name, gc->name, d, steps);
                failures++;
                break;
            }
            double r = u01(&seed) * sum;
            size_t pick = c.size;
            for (size_t i = 0; i < c.size; i++) {
                if (c.logit[i] == -INFINITY) continue;
                pick = i;
                r -= e[c.id[i]] * (closer[c.id[i]] ? boost : 1.0);
                if (r < 0) break;
            }
            sift_token tok = c.id[pick];
            sift_sampler_accept(s, tok);
            if (sift_vocab_is_eog(vocab, tok)) {
                ended = true;
                break;
            }
            uint32_t pl = view->piece_len[tok];
            if (len + pl + 1 > cap) text = realloc(text, cap = (len + pl + 1) * 2);
            memcpy(text + len, view->piece[tok], pl);
            len += pl;
            if (sift_grammar_sampler_status(s) == SIFT_GRAMMAR_DEAD) {
                fprintf(stderr, "%s/%s doc %d: dead after token %d\n", vocab_name, gc->name, d, tok);
                failures++;
                break;
            }
        }
        text[len] = 0;
        tokens += steps;
        if (steps > max_tokens) max_tokens = steps;
        if (!ended) {
            if (steps >= 1500) fprintf(stderr, "%s/%s doc %d: not finished after 1500 tokens\n", vocab_name, gc->name, d);
            failures++;
            continue;
        }
        if (!check_doc(vocab_name, gc, g, schema, d, text, len)) {
            failures++;
            continue;
        }
        complete++;
        if (d == 0) printf("  sample %-10s %.*s%s\n", gc->name, (int)(len > 100 ? 100 : len), text, len > 100 ? "..." : "");
    }
    double init_ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    printf("%-13s %-10s %3d/%d documents accepted%s (%ld tokens, longest %ld; sampler init %.0f ms)\n", vocab_name, gc->name,
           complete - (failures && complete ? 0 : 0), n_docs, gc->json ? (schema ? ", parsed and schema-valid" : ", parsed") : "", tokens,
           max_tokens, init_ms);
    free(text);
    free(ew);
    free(logits);
    free(closer);
    sift_candidates_free(&c);
    sift_sampler_free(s);
    sift_grammar_free(g);
    cJSON_Delete(schema);
    free(gbnf);
    return failures || complete != n_docs;
}

/* The same over a real model: a forward pass per token instead of random logits. */
static int run_case_model(sift_model *model, sift_context *ctx, const gcase *gc, int n_docs)
{
    const sift_vocab *vocab = sift_model_vocab(model);
    sift_vocab_view view;
    sift_vocab_view_get(vocab, &view);
    sift_error err = {0};
    char *gbnf = gc->schema ? sift_json_schema_to_grammar(gc->schema, strlen(gc->schema), 0, &err) : NULL;
    size_t glen = gbnf ? strlen(gbnf) : 0;
    if (!gc->schema) gbnf = gt_grammar_text(gc->name, &glen);
    sift_grammar *g = gbnf ? sift_grammar_parse(gbnf, glen, "root", &view, &err) : NULL;
    sift_sampler *s = g ? sift_sampler_init_grammar_ex(&view, gbnf, glen, NULL, &err) : NULL;
    if (!s) {
        fprintf(stderr, "%s: %s\n", gc->name, err.msg);
        free(gbnf);
        sift_grammar_free(g);
        return 1;
    }
    cJSON *schema = gc->schema ? cJSON_Parse(gc->schema) : NULL;
    const int n = sift_model_n_vocab(model);
    bool *closer = calloc((size_t)n, 1);
    for (int t = 0; t < n; t++) {
        for (uint32_t k = 0; k < view.piece_len[t]; k++)
            if (view.piece[t][k] && strchr("}])\";\n", view.piece[t][k])) closer[t] = true;
        if (sift_vocab_is_eog(vocab, t)) closer[t] = true;
    }
    sift_token prompt[64];
    int32_t np = sift_tokenize(vocab, "Once upon a time", 16, prompt, 64, true, false);
    float *logits = malloc(sizeof(float) * (size_t)n);
    sift_batch batch;
    sift_batch_init(&batch, 64, 1);
    size_t cap = 1 << 16, len;
    char *text = malloc(cap);
    int failures = 0, complete = 0, max_ctx = (int)sift_n_ctx_seq(ctx);
    long tokens = 0, max_tokens = 0, refused = 0;
    for (int d = 0; d < n_docs && failures < 5; d++) {
        sift_sampler_reset(s);
        sift_chain *chain = sift_chain_new(sift_chain_default_params());
        char spec[64];
        snprintf(spec, sizeof spec, "top_k(40);dist(%d)", 1000 + d);
        sift_chain_add_spec(chain, spec, &(sift_chain_env){.n_vocab = n}, &err);
        sift_kv_clear(ctx);
        sift_batch_clear(&batch);
        for (int32_t i = 0; i < np; i++) sift_batch_add(&batch, prompt[i], i, (sift_seq_id[]){0}, 1, i == np - 1);
        int rc = sift_decode(ctx, &batch, &err);
        sift_pos pos = np;
        len = 0;
        int steps;
        bool ended = false;
        for (steps = 0; rc == SIFT_OK && pos < max_ctx && steps < 1500; steps++) {
            const float *out = sift_get_logits_ith(ctx, -1);
            float bias = steps >= 300 ? 30.0f : steps >= 100 ? 8.0f : 0.0f;
            for (int t = 0; t < n; t++) logits[t] = out[t] + (closer[t] ? bias : 0.0f);
            bool was_refused = false;
            sift_grammar_mode mode = d % 2 ? SIFT_GRAMMAR_FIRST : SIFT_GRAMMAR_REJECTION;
            sift_token tok = sift_grammar_chain_sample(s, chain, logits, n, mode, &was_refused);
            refused += was_refused;
            if (tok == SIFT_TOKEN_NULL) {
                fprintf(stderr, "%s doc %d: nothing selected\n", gc->name, d);
                break;
            }
            if (sift_vocab_is_eog(vocab, tok)) {
                ended = true;
                break;
            }
            uint32_t pl = view.piece_len[tok];
            if (len + pl + 1 > cap) text = realloc(text, cap = (len + pl + 1) * 2);
            memcpy(text + len, view.piece[tok], pl);
            len += pl;
            sift_batch_clear(&batch);
            sift_batch_add(&batch, tok, pos++, (sift_seq_id[]){0}, 1, true);
            rc = sift_decode(ctx, &batch, &err);
        }
        sift_chain_free(chain);
        text[len] = 0;
        tokens += steps;
        if (steps > max_tokens) max_tokens = steps;
        if (!ended) {
            fprintf(stderr, "stories260K/%s doc %d: not finished (%d tokens, position %d): %s\n", gc->name, d, steps, pos,
                    rc == SIFT_OK ? "" : err.msg);
            failures++;
            continue;
        }
        if (!check_doc("stories260K", gc, g, schema, d, text, len)) {
            failures++;
            continue;
        }
        complete++;
        if (d == 0) printf("  sample %-10s %.*s%s\n", gc->name, (int)(len > 100 ? 100 : len), text, len > 100 ? "..." : "");
    }
    printf("%-13s %-10s %3d/%d documents accepted%s (%ld tokens, longest %ld; %ld rejection-mode picks refused)\n",
           "stories260K", gc->name, complete, n_docs, gc->json ? (schema ? ", parsed and schema-valid" : ", parsed") : "",
           tokens, max_tokens, refused);
    free(text);
    free(logits);
    free(closer);
    sift_batch_free(&batch);
    sift_sampler_free(s);
    sift_grammar_free(g);
    cJSON_Delete(schema);
    free(gbnf);
    return failures || complete != n_docs;
}

int main(int argc, char **argv)
{
    int n_docs = 200;
    const char *only_vocab = NULL, *only_grammar = NULL, *model_path = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--docs") && i + 1 < argc) n_docs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--vocab") && i + 1 < argc) only_vocab = argv[++i];
        else if (!strcmp(argv[i], "--grammar") && i + 1 < argc) only_grammar = argv[++i];
        else if (!strcmp(argv[i], "--model") && i + 1 < argc) model_path = argv[++i];
        else {
            fprintf(stderr, "usage: grammar_generate [--docs N] [--vocab NAME] [--grammar NAME] [--model FILE]\n");
            return 2;
        }
    }
    const gcase cases[] = {
        {"json", NULL, true},  {"arithmetic", NULL, false}, {"list", NULL, false},       {"c_like", NULL, false},
        {"chess", NULL, false}, {"person", SCHEMA_PERSON, true}, {"order", SCHEMA_ORDER, true},
    };
    int bad = 0;
    if (model_path) {
        char path[1024];
        if (model_path[0] != '/') model_path = gt_shared_path(path, sizeof path, model_path);
        sift_error err = {0};
        sift_model *model = sift_model_load(model_path, &err);
        sift_context_params cp = sift_context_default_params();
        cp.n_threads = 1;
        sift_context *ctx = model ? sift_context_new(model, cp, &err) : NULL;
        if (!ctx) {
            fprintf(stderr, "%s: %s\n", model_path, err.msg);
            sift_model_free(model);
            return 1;
        }
        for (size_t k = 0; k < sizeof cases / sizeof *cases; k++)
            if (!only_grammar || !strcmp(only_grammar, cases[k].name)) bad |= run_case_model(model, ctx, &cases[k], n_docs);
        sift_context_free(ctx);
        sift_model_free(model);
        printf(bad ? "FAILED\n" : "all documents accepted\n");
        return bad;
    }
    const char *vocabs[] = {"llama-spm", "deepseek-llm"};
    for (size_t v = 0; v < 2; v++) {
        if (only_vocab && strcmp(only_vocab, vocabs[v])) continue;
        sift_vocab_view view;
        sift_vocab *vocab = gt_vocab_load_shared(vocabs[v], &view);
        if (!vocab) return 1;
        for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
            if (only_grammar && strcmp(only_grammar, cases[k].name)) continue;
            bad |= run_case(vocabs[v], vocab, &view, &cases[k], n_docs);
        }
        sift_vocab_free(vocab);
    }
    printf(bad ? "FAILED\n" : "all documents accepted\n");
    return bad;
}
