/*
 * value_check.c - does one JSON value validate against a schema? For the finite value sets of
 * `enum` / `const`: the converter keeps the listed values that validate against the whole
 * schema (type, not, allOf, minimum, pattern, ... beside them) and writes those as literals,
 * which is exact whatever the other keywords are, as long as each one can be decided here.
 *
 * Three-valued: 1 valid, 0 invalid, -1 not decided (a keyword this file does not evaluate,
 * a pattern regex_to_gbnf.c refuses, a format, a $ref that does not resolve, too deep); the
 * converter then falls back to its other paths (which refuse what they cannot express).
 * Keywords follow JSON Schema 2020-12 with the draft-04..07 spellings (boolean exclusive*,
 * items as an array, additionalItems, dependencies). Unknown keywords are annotations.
 */
#include <math.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "schema/gbnf_writer.h"
#include "grammar/alloc_bits_utf8.h"

#define VC_MAX_DEPTH 64

typedef struct {
    sift__schema_resolve_fn resolve;
    void *ctx;
} vctx;

static int vc(const vctx *x, const cJSON *s, const cJSON *v, int depth);

/* three-valued and / or */
static int v_and(int a, int b) { return (!a || !b) ? 0 : (a < 0 || b < 0) ? -1 : 1; }
static int v_or(int a, int b) { return (a == 1 || b == 1) ? 1 : (a < 0 || b < 0) ? -1 : 0; }

static bool is_int_value(const cJSON *v) { return cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble); }

static bool type_is(const cJSON *v, const char *t)
{
    if (!strcmp(t, "object")) return cJSON_IsObject(v);
    if (!strcmp(t, "array")) return cJSON_IsArray(v);
    if (!strcmp(t, "string")) return cJSON_IsString(v);
    if (!strcmp(t, "number")) return cJSON_IsNumber(v);
    if (!strcmp(t, "integer")) return is_int_value(v);
    if (!strcmp(t, "boolean")) return cJSON_IsBool(v);
    if (!strcmp(t, "null")) return cJSON_IsNull(v);
    return false;
}

static size_t utf8_len(const char *s)
{
    size_t n = 0;
    for (; *s; s++) n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

/* Does string value `str` match the ECMA-262 pattern (a search, as JSON Schema means)? */
static int pattern_matches(const char *pat, const char *str)
{
    bool as, ae;
    sift_error e = {0};
    char *inner = sift__schema_regex_to_gbnf(pat, strlen(pat), &as, &ae, &e);
    if (!inner) return -1;
    static const char CHAR[] =
        "[^\"\\\\\\x7F\\x00-\\x1F] | [\\\\] ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})";
    sift__gbnf_sbuf g = {0};
    sift__gbnf_sb_printf(&g, "root ::= \"\\\"\" %s(%s)%s \"\\\"\"\nchar ::= %s\n", as ? "" : "char* ", inner, ae ? "" : " char*", CHAR);
    sift__gx_free(inner);
    cJSON *js = cJSON_CreateString(str);
    char *txt = js ? cJSON_PrintUnformatted(js) : NULL;
    cJSON_Delete(js);
    int r = -1;
    sift_grammar *gr = g.s && txt ? sift_grammar_parse(g.s, g.n, "root", NULL, &e) : NULL;
    if (gr) {
        sift_grammar_match_result m = sift_grammar_match(gr, txt, strlen(txt), NULL);
        r = m == SIFT_GRAMMAR_COMPLETE ? 1 : m == SIFT_GRAMMAR_ERROR ? -1 : 0;
    }
    sift_grammar_free(gr);
    cJSON_free(txt);
    sift__gbnf_sb_free(&g);
    return r;
}

static int check_number(const cJSON *s, const char *k, const cJSON *kw, const cJSON *v)
{
    if (!cJSON_IsNumber(v)) return 1;
    double x = v->valuedouble;
    if (cJSON_IsBool(kw)) return 1; /* draft-04 exclusive flags: read with minimum / maximum */
    if (!cJSON_IsNumber(kw)) return -1;
    double b = kw->valuedouble;
    if (!strcmp(k, "minimum")) return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(s, "exclusiveMinimum")) ? x > b : x >= b;
    if (!strcmp(k, "maximum")) return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(s, "exclusiveMaximum")) ? x < b : x <= b;
    if (!strcmp(k, "exclusiveMinimum")) return x > b;
    if (!strcmp(k, "exclusiveMaximum")) return x < b;
    /* multipleOf */
    if (b <= 0) return -1;
    double q = x / b;
    return fabs(q - round(q)) < 1e-9 * (fabs(q) > 1 ? fabs(q) : 1);
}

static bool in_required(const cJSON *obj, const cJSON *names)
{
    for (const cJSON *r = names ? names->child : NULL; r; r = r->next)
        if (cJSON_IsString(r) && !cJSON_GetObjectItemCaseSensitive(obj, r->valuestring)) return false;
    return true;
}

static int check_object(const vctx *x, const cJSON *s, const cJSON *v, int depth)
{
    int r = 1;
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
    const cJSON *pp = cJSON_GetObjectItemCaseSensitive(s, "patternProperties");
    const cJSON *ap = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
    const cJSON *pn = cJSON_GetObjectItemCaseSensitive(s, "propertyNames");
    int n = 0;
    for (const cJSON *m = v->child; m && r; m = m->next, n++) {
        bool matched = false;
        const cJSON *ps = props ? cJSON_GetObjectItemCaseSensitive(props, m->string) : NULL;
        if (ps) matched = true, r = v_and(r, vc(x, ps, m, depth + 1));
        for (const cJSON *p = pp ? pp->child : NULL; p && r; p = p->next) {
            int hit = pattern_matches(p->string, m->string);
            if (hit < 0) return -1;
            if (hit) matched = true, r = v_and(r, vc(x, p, m, depth + 1));
        }
        if (!matched && ap) r = v_and(r, vc(x, ap, m, depth + 1));
        if (pn) {
            cJSON *key = cJSON_CreateString(m->string);
            if (!key) return -1;
            r = v_and(r, vc(x, pn, key, depth + 1));
            cJSON_Delete(key);
        }
    }
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(s, "required");
    if (cJSON_IsArray(req) && !in_required(v, req)) r = 0;
    const cJSON *mn = cJSON_GetObjectItemCaseSensitive(s, "minProperties"), *mx = cJSON_GetObjectItemCaseSensitive(s, "maxProperties");
    if (cJSON_IsNumber(mn) && n < mn->valuedouble) r = 0;
    if (cJSON_IsNumber(mx) && n > mx->valuedouble) r = 0;
    const cJSON *dr = cJSON_GetObjectItemCaseSensitive(s, "dependentRequired");
    const cJSON *ds = cJSON_GetObjectItemCaseSensitive(s, "dependentSchemas");
    const cJSON *dep = cJSON_GetObjectItemCaseSensitive(s, "dependencies");
    for (int pass = 0; pass < 3 && r; pass++) {
        const cJSON *d = pass == 0 ? dr : pass == 1 ? ds : dep;
        for (const cJSON *e = d ? d->child : NULL; e && r; e = e->next) {
            if (!cJSON_GetObjectItemCaseSensitive(v, e->string)) continue;
            if (cJSON_IsArray(e)) r = in_required(v, e) ? r : 0;
            else r = v_and(r, vc(x, e, v, depth + 1));
        }
    }
    return r;
}

static int check_array(const vctx *x, const cJSON *s, const cJSON *v, int depth)
{
    int r = 1;
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(s, "items");
    const cJSON *prefix = cJSON_GetObjectItemCaseSensitive(s, "prefixItems");
    const cJSON *addl = cJSON_GetObjectItemCaseSensitive(s, "additionalItems");
    const cJSON *rest = items;
    if (cJSON_IsArray(items) && !prefix) prefix = items, rest = addl;
    int n = 0, n_prefix = cJSON_IsArray(prefix) ? cJSON_GetArraySize(prefix) : 0;
    for (const cJSON *e = v->child; e && r; e = e->next, n++) {
        if (n < n_prefix) r = v_and(r, vc(x, cJSON_GetArrayItem(prefix, n), e, depth + 1));
        else if (rest) r = v_and(r, vc(x, rest, e, depth + 1));
    }
    const cJSON *mn = cJSON_GetObjectItemCaseSensitive(s, "minItems"), *mx = cJSON_GetObjectItemCaseSensitive(s, "maxItems");
    if (cJSON_IsNumber(mn) && n < mn->valuedouble) r = 0;
    if (cJSON_IsNumber(mx) && n > mx->valuedouble) r = 0;
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(s, "uniqueItems")))
        for (const cJSON *a = v->child; a && r; a = a->next)
            for (const cJSON *b = a->next; b && r; b = b->next)
                if (cJSON_Compare(a, b, true)) r = 0;
    const cJSON *contains = cJSON_GetObjectItemCaseSensitive(s, "contains");
    if (contains && r) {
        if (cJSON_GetObjectItemCaseSensitive(s, "minContains") || cJSON_GetObjectItemCaseSensitive(s, "maxContains")) return -1;
        int any = 0;
        for (const cJSON *e = v->child; e; e = e->next) any = v_or(any, vc(x, contains, e, depth + 1));
        r = v_and(r, any);
    }
    return r;
}

static int vc(const vctx *x, const cJSON *s, const cJSON *v, int depth)
{
    if (cJSON_IsTrue(s)) return 1;
    if (cJSON_IsFalse(s)) return 0;
    if (!cJSON_IsObject(s) || depth > VC_MAX_DEPTH) return -1;
    static const char *const UNDECIDED[] = {"$dynamicRef", "$recursiveRef", "unevaluatedProperties", "unevaluatedItems", "format", NULL};
    int r = 1;
    for (const cJSON *k = s->child; k && r; k = k->next) {
        const char *key = k->string;
        for (int i = 0; UNDECIDED[i]; i++)
            if (!strcmp(key, UNDECIDED[i]) && (strcmp(key, "format") || cJSON_IsString(v))) return -1; /* format: strings only */
        if (!strcmp(key, "$ref")) {
            const cJSON *t = cJSON_IsString(k) ? x->resolve(x->ctx, k->valuestring) : NULL;
            r = v_and(r, t ? vc(x, t, v, depth + 1) : -1);
        } else if (!strcmp(key, "type")) {
            bool ok = false;
            if (cJSON_IsString(k)) ok = type_is(v, k->valuestring);
            else if (cJSON_IsArray(k))
                for (const cJSON *t = k->child; t; t = t->next) ok |= cJSON_IsString(t) && type_is(v, t->valuestring);
            else return -1;
            r = ok ? r : 0;
        } else if (!strcmp(key, "enum")) {
            bool ok = false;
            for (const cJSON *e = cJSON_IsArray(k) ? k->child : NULL; e && !ok; e = e->next) ok = cJSON_Compare(e, v, true);
            r = ok ? r : 0;
        } else if (!strcmp(key, "const")) {
            r = cJSON_Compare(k, v, true) ? r : 0;
        } else if (!strcmp(key, "not")) {
            int t = vc(x, k, v, depth + 1);
            r = v_and(r, t < 0 ? -1 : !t);
        } else if (!strcmp(key, "allOf") || !strcmp(key, "anyOf") || !strcmp(key, "oneOf")) {
            if (!cJSON_IsArray(k)) return -1;
            int acc = key[0] == 'a' && key[1] == 'l' ? 1 : 0, hits = 0;
            bool unknown = false;
            for (const cJSON *p = k->child; p; p = p->next) {
                int t = vc(x, p, v, depth + 1);
                if (key[1] == 'l') acc = v_and(acc, t);
                else if (key[0] == 'a') acc = v_or(acc, t);
                else unknown |= t < 0, hits += t == 1;
            }
            if (key[0] == 'o') acc = unknown ? -1 : hits == 1;
            r = v_and(r, acc);
        } else if (!strcmp(key, "if")) {
            int t = vc(x, k, v, depth + 1);
            if (t < 0) return -1;
            const cJSON *br = cJSON_GetObjectItemCaseSensitive(s, t ? "then" : "else");
            if (br) r = v_and(r, vc(x, br, v, depth + 1));
        } else if (!strcmp(key, "minimum") || !strcmp(key, "maximum") || !strcmp(key, "exclusiveMinimum") ||
                   !strcmp(key, "exclusiveMaximum") || !strcmp(key, "multipleOf")) {
            r = v_and(r, check_number(s, key, k, v));
        } else if (!strcmp(key, "minLength") || !strcmp(key, "maxLength")) {
            if (!cJSON_IsString(v)) continue;
            if (!cJSON_IsNumber(k)) return -1;
            size_t n = utf8_len(v->valuestring);
            r = (key[1] == 'i' ? n >= k->valuedouble : n <= k->valuedouble) ? r : 0;
        } else if (!strcmp(key, "pattern")) {
            if (!cJSON_IsString(v)) continue;
            if (!cJSON_IsString(k)) return -1;
            r = v_and(r, pattern_matches(k->valuestring, v->valuestring));
        }
    }
    if (r && cJSON_IsObject(v)) r = v_and(r, check_object(x, s, v, depth));
    if (r && cJSON_IsArray(v)) r = v_and(r, check_array(x, s, v, depth));
    return r;
}

int sift__schema_value_valid(const cJSON *schema, const cJSON *value, sift__schema_resolve_fn resolve, void *ctx)
{
    vctx x = {resolve, ctx};
    return vc(&x, schema, value, 0);
}
