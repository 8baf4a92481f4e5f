/*
 * json_schema_not.c - the complement of a schema, written as a schema without `not`: exact,
 * or a documented subset (below), or not at all. A grammar is a union and has no "everything but", so `not S` compiles only
 * when S's complement can be spelled with the keywords the converter does compile. It is
 * used for `not` (json_schema_combine.c's sift__js_simplify: S's complement joins the
 * schema's allOf) and for oneOf alternatives that may overlap (json_schema_one_of.c: the
 * piece of alternative i is i and the complement of every j it may share a value with).
 *
 * Why keyword by keyword: a schema holds iff each of its keywords holds, and each keyword
 * only constrains values of its own JSON type, so the complement of S is the union, over
 * S's keywords, of the values that keyword rejects:
 *   type T             the other types; when T has integer without number, "the numbers
 *                      that are not integers" are no type and are left out
 *   enum / const       the kinds no listed value has, and per listed kind the other values
 *                      of it: strings by a pattern that matches every string but the listed
 *                      ones (from their trie), the other boolean; numbers, objects, arrays
 *                      in the list are refused
 *   required [k..]     an object without k, for each k
 *   properties {k: P}  an object with k whose value is in P's complement, for each k
 *   min/maxItems, min/maxLength, min/maxProperties, minimum / maximum, exclusive bounds
 *                      the values of that type beyond the bound
 *   items P            an array that contains an item of P's complement
 *   propertyNames false  a non-empty object
 *   $ref               the target's complement; `not T` is T; anyOf: every part's
 *                      complement (allOf); allOf: any part's (anyOf); oneOf: no part holds,
 *                      or two do
 *   pattern ^[C]+$     the strings with a character outside C (and "" for +; ^[C]*$ alike)
 * Leaving values out of a complement is sound (never less, only more, rejected): every
 * user takes the complement positively (`not S` is an allOf part, oneOf's pieces are "i and
 * not j", a complement's parts are unions and intersections of complements), none
 * complements it again. Annotations, unknown keywords and formats outside the standard ones
 * (annotations in json_schema_scalar.c too) constrain nothing. Anything else (other patterns,
 * a checked format, multipleOf, additionalProperties, a oneOf of more than ONE_OF_MAX, ...) and
 * nesting deeper than NOT_DEPTH refuse the whole complement (NULL without an error; NULL with
 * the error set means out of memory).
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/utf8.h"
#include "schema/json_schema_int.h"

#define NOT_DEPTH 8   /* nested complements ($ref chains, properties, anyOf parts) */
#define NOT_PIECES 24 /* alternatives of one complement */
#define NOT_PATTERN_MAX 16384

/* ---- strings other than a listed few, as a pattern ---------------------------------------------- */

/* one code point in a pattern: letters and digits raw, the rest \uHHHH (BMP only) */
static bool put_cp(sift__gbnf_sbuf *b, uint32_t cp)
{
    if (cp > 0xFFFF) return false;
    if ((cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || (cp >= '0' && cp <= '9')) sift__gbnf_sb_printf(b, "%c", (char)cp);
    else sift__gbnf_sb_printf(b, "\\u%04X", (unsigned)cp);
    return true;
}

/* A string that is none of the listed ones, walked down their trie, either stops at a node
 * where no listed string ends (T_END), or leaves the trie: by a character no listed string
 * has next at a node with children (T_MID), then anything, or past a leaf (T_LEAF), then at
 * least one more character. Each of the three is a trie of literals; "anything" is written
 * once per kind, not once per node (the class of every JSON string character is large). The
 * character that leaves the list at a node is a printable BMP one other than '"' and '\':
 * a string that leaves it by a control character, a quote, a backslash or an astral
 * character is rejected (a subset of the complement, never more). */
enum { T_END, T_MID, T_LEAF };

static bool t_self(const nsnode *t, int mode) { return mode == T_END ? !t->end : mode == T_MID ? t->kids != NULL : t->kids == NULL; }

static bool t_has(const nsnode *t, int mode, int depth)
{
    if (t_self(t, mode)) return true;
    for (const nsnode *k = t->kids; k && depth < 512; k = k->next)
        if (t_has(k, mode, depth + 1)) return true;
    return false;
}

/* the paths below t of one kind (t_has(t, mode) holds); "" when t itself is the only one */
static bool t_emit(const nsnode *t, int mode, sift__gbnf_sbuf *b, int depth)
{
    if (depth > 512 || b->n > NOT_PATTERN_MAX) return false;
    bool self = t_self(t, mode), first = true;
    int n = mode == T_MID && self;
    for (const nsnode *k = t->kids; k; k = k->next) n += t_has(k, mode, depth + 1);
    if (!n) return true;
    sift__gbnf_sb_puts(b, "(?:");
    if (mode == T_MID && self) { /* the printable BMP characters but the children's */
        uint32_t lo = 0x20;
        sift__gbnf_sb_puts(b, "[");
        for (const nsnode *k = t->kids;; k = k->next) {
            uint32_t cut = k ? k->cp : 0x10000;
            /* '"', '\' and the surrogates are never taken: they would leave a class of
             * their JSON escapes at every node (a string leaving the list there is rejected) */
            static const uint32_t never[][2] = {{0x22, 0x22}, {0x5C, 0x5C}, {0xD800, 0xDFFF}};
            for (size_t i = 0; i < 3; i++)
                if (never[i][0] >= lo && never[i][1] < cut) {
                    if (never[i][0] > lo) sift__gbnf_sb_printf(b, "\\u%04X-\\u%04X", (unsigned)lo, (unsigned)never[i][0] - 1);
                    lo = never[i][1] + 1;
                }
            if (cut > lo) sift__gbnf_sb_printf(b, "\\u%04X-\\u%04X", (unsigned)lo, (unsigned)cut - 1);
            if (!k) break;
            if (k->cp >= lo) lo = k->cp + 1;
        }
        sift__gbnf_sb_puts(b, "]");
        first = false;
    }
    for (const nsnode *k = t->kids; k; k = k->next) {
        if (!t_has(k, mode, depth + 1)) continue;
        if (!first) sift__gbnf_sb_puts(b, "|");
        first = false;
        if (!put_cp(b, k->cp) || !t_emit(k, mode, b, depth + 1)) return false;
    }
    sift__gbnf_sb_puts(b, self && mode != T_MID ? ")?" : ")");
    return true;
}

/* the whole pattern: ^(?:end|mid ANY*|leaf ANY+)$ (the parts that exist; "?" when the empty
 * string is one of them on its own) */
static bool t_pattern(const nsnode *root, sift__gbnf_sbuf *b)
{
    static const char *const tail[] = {"", "(?:\\s|\\S)*", "(?:\\s|\\S)+"};
    sift__gbnf_sbuf end = {0};
    bool ok = true, any = false, empty_end = false;
    if (t_has(root, T_END, 0)) {
        ok = t_emit(root, T_END, &end, 0);
        empty_end = ok && end.n == 0; /* only the empty string */
    }
    sift__gbnf_sb_puts(b, "^(?:");
    if (ok && end.n) sift__gbnf_sb_putn(b, end.s, end.n), any = true;
    sift__gbnf_sb_free(&end);
    for (int mode = T_MID; ok && mode <= T_LEAF; mode++) {
        if (!t_has(root, mode, 0)) continue;
        if (any) sift__gbnf_sb_puts(b, "|");
        any = true;
        ok = t_emit(root, mode, b, 0);
        sift__gbnf_sb_puts(b, tail[mode]);
    }
    sift__gbnf_sb_puts(b, empty_end ? ")?$" : ")$");
    return ok && any && !b->oom && b->n <= NOT_PATTERN_MAX;
}

/* {"type": "string", "pattern": ...} for the strings that are none of vals' strings; NULL
 * (no error) when a string is beyond the pattern's reach */
static cJSON *other_strings(conv *c, const cJSON *vals, bool single)
{
    nsnode root = {0};
    bool ok = true;
    for (const cJSON *v = single ? vals : vals->child; v && ok; v = single ? NULL : v->next) {
        if (!cJSON_IsString(v)) continue;
        nsnode *t = &root;
        const unsigned char *s = (const unsigned char *)v->valuestring;
        size_t n = strlen(v->valuestring), i = 0;
        while (i < n && t) {
            size_t l = 1;
            uint32_t cp = sift__utf8_decode(s + i, n - i, &l);
            if (cp == SIFT__UTF8_REPLACEMENT) { /* U+FFFD itself, or bad UTF-8: refused */
                ok = false;
                break;
            }
            i += l;
            t = sift__js_ns_child(t, cp);
        }
        if (!t) {
            ok = false;
            sift__js_coom(c);
        }
        if (ok) t->end = true;
    }
    sift__gbnf_sbuf b = {0};
    ok = ok && t_pattern(&root, &b);
    sift__js_ns_free(root.kids);
    char *pat = ok ? sift__gbnf_sb_take(&b) : NULL;
    sift__gbnf_sb_free(&b);
    if (!pat) return NULL;
    cJSON *o = cJSON_CreateObject();
    bool fine = o && cJSON_AddStringToObject(o, "type", "string") && cJSON_AddStringToObject(o, "pattern", pat);
    sift__gx_free(pat);
    if (!fine) return cJSON_Delete(o), sift__js_coom(c), NULL;
    return o;
}

/* ---- the complement ----------------------------------------------------------------------------- */

static bool add(conv *c, cJSON *arr, cJSON *x);

/* pattern ^[C]+$ or ^[C]*$ (one class, a run of it): the strings that are not such a run are
 * those with a character outside C, written with the first such one as the split point (one
 * parse): ^(?:[C]*[^C](?:\s|\S)*)?$ (the "?" for + : the empty string too). 1 done, 0 not
 * that form, -1 out of memory. */
static int class_run_complement(conv *c, const char *pat, cJSON *pieces)
{
    size_t n = strlen(pat), i = 2;
    if (n < 6 || pat[0] != '^' || pat[1] != '[' || pat[n - 1] != '$' || (pat[n - 2] != '+' && pat[n - 2] != '*')) return 0;
    while (i < n - 2 && pat[i] != ']') i += pat[i] == '\\' ? 2 : 1;
    if (i != n - 3) return 0; /* the class must end right before the quantifier */
    bool neg = pat[2] == '^';
    const char *inner = pat + (neg ? 3 : 2);
    size_t in = (size_t)(pat + i - inner);
    if (!in) return 0;
    sift__gbnf_sbuf b = {0};
    sift__gbnf_sb_printf(&b, "^(?:[%s%.*s]*[%s%.*s](?:\\s|\\S)*)%s$", neg ? "^" : "", (int)in, inner, neg ? "" : "^", (int)in, inner,
                         pat[n - 2] == '+' ? "?" : "");
    char *np = sift__gbnf_sb_take(&b);
    sift__gbnf_sb_free(&b);
    cJSON *o = np ? cJSON_CreateObject() : NULL;
    bool ok = o && cJSON_AddStringToObject(o, "type", "string") && cJSON_AddStringToObject(o, "pattern", np);
    sift__gx_free(np);
    if (!ok) return cJSON_Delete(o), sift__js_coom(c), -1;
    return add(c, pieces, o) ? 1 : -1;
}

static bool add(conv *c, cJSON *arr, cJSON *x)
{
    if (x && cJSON_AddItemToArray(arr, x)) return true;
    cJSON_Delete(x);
    sift__js_coom(c);
    return false;
}

/* {"type": t, key: num} */
static cJSON *typed_bound(const char *t, const char *key, double num)
{
    cJSON *o = cJSON_CreateObject();
    if (!o || !cJSON_AddStringToObject(o, "type", t) || !cJSON_AddNumberToObject(o, key, num)) return cJSON_Delete(o), NULL;
    return o;
}

/* adds {"type": [the types none of `have` covers]} (sift__js_type_names bits, integer
 * within number), nothing when it covers them all; false out of memory */
static bool add_other_types(conv *c, cJSON *pieces, unsigned have)
{
    if (have & T_NUMBER) have |= T_INTEGER;
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; arr && sift__js_type_names[i]; i++) {
        if ((have >> i & 1) || (1u << i) == T_INTEGER) continue; /* integer: within number */
        if (!cJSON_AddItemToArray(arr, cJSON_CreateString(sift__js_type_names[i]))) cJSON_Delete(arr), arr = NULL;
    }
    if (arr && !arr->child) return cJSON_Delete(arr), true;
    cJSON *o = arr ? cJSON_CreateObject() : NULL;
    if (!o || !cJSON_AddItemToObject(o, "type", arr)) {
        cJSON_Delete(o);
        cJSON_Delete(arr);
        return sift__js_coom(c), false;
    }
    return add(c, pieces, o);
}

static unsigned type_bit(const char *name)
{
    for (int i = 0; sift__js_type_names[i]; i++)
        if (!strcmp(sift__js_type_names[i], name)) return 1u << i;
    return 0;
}

/* enum / const: 1 done (pieces added), 0 refused, -1 out of memory */
static int values_complement(conv *c, const cJSON *vals, bool single, cJSON *pieces)
{
    unsigned kinds = 0;
    bool t = false, f = false;
    for (const cJSON *v = single ? vals : vals->child; v; v = single ? NULL : v->next) {
        if (cJSON_IsString(v)) kinds |= type_bit("string");
        else if (cJSON_IsNull(v)) kinds |= type_bit("null");
        else if (cJSON_IsBool(v)) kinds |= type_bit("boolean"), t |= cJSON_IsTrue(v), f |= cJSON_IsFalse(v);
        else return 0; /* numbers, objects, arrays: their complements are not spelled here */
    }
    if (!kinds) return 0; /* an empty enum: malformed, refused where it is visited */
    if (!add_other_types(c, pieces, kinds)) return -1;
    if (kinds & type_bit("string")) {
        cJSON *o = other_strings(c, vals, single);
        if (!o) return c->status == SIFT_OK ? 0 : -1;
        if (!add(c, pieces, o)) return -1;
    }
    if ((kinds & type_bit("boolean")) && !(t && f)) {
        cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddBoolToObject(o, "const", !t)) return cJSON_Delete(o), sift__js_coom(c), -1;
        if (!add(c, pieces, o)) return -1;
    }
    return 1;
}

static bool is_everything(const cJSON *s) { return cJSON_IsTrue(s) || (cJSON_IsObject(s) && sift__js_only_annotations_and(s, NULL)); }

static cJSON *complement_d(conv *c, const cJSON *s, int depth);

/* {"type": "object", "required": [k], "properties": {k: v}} (v taken) */
static cJSON *key_with(const char *k, cJSON *v, bool require)
{
    cJSON *o = cJSON_CreateObject(), *p = o ? cJSON_CreateObject() : NULL, *r = NULL;
    if (!o || !p || !cJSON_AddStringToObject(o, "type", "object")) goto no;
    if (require) {
        r = cJSON_AddArrayToObject(o, "required");
        if (!r || !cJSON_AddItemToArray(r, cJSON_CreateString(k))) goto no;
    }
    if (!cJSON_AddItemToObject(p, k, v)) {
        v = NULL;
        goto no;
    }
    v = NULL;
    if (!cJSON_AddItemToObject(o, "properties", p)) {
        p = NULL;
        goto no;
    }
    return o;
no:
    cJSON_Delete(v);
    cJSON_Delete(p);
    cJSON_Delete(o);
    return NULL;
}

/* oneOf [A1..An] fails when no Ai holds or when two do: allOf [the complements] and, for
 * each pair that may overlap (sift__js_disjoint), allOf [Ai, Aj]. At most ONE_OF_MAX. */
#define ONE_OF_MAX 4
static int one_of_complement(conv *c, const cJSON *k, cJSON *pieces, int depth)
{
    int n = cJSON_IsArray(k) ? cJSON_GetArraySize(k) : 0;
    if (n < 1 || n > ONE_OF_MAX) return 0;
    cJSON *none = cJSON_CreateArray();
    bool none_empty = false;
    if (!none) return sift__js_coom(c), -1;
    for (const cJSON *a = k->child; a; a = a->next) {
        cJSON *ca = complement_d(c, a, depth + 1);
        if (!ca) return cJSON_Delete(none), c->status == SIFT_OK ? 0 : -1;
        if (cJSON_IsFalse(ca)) none_empty = true; /* a matches everything */
        if (cJSON_IsTrue(ca) || cJSON_IsFalse(ca)) {
            cJSON_Delete(ca);
            continue;
        }
        if (!add(c, none, ca)) return cJSON_Delete(none), -1;
    }
    if (!none_empty) {
        cJSON *o = none->child ? cJSON_CreateObject() : cJSON_CreateTrue(); /* every Ai false: everything */
        if (!o || (none->child && !cJSON_AddItemToObject(o, "allOf", none))) return cJSON_Delete(o), cJSON_Delete(none), sift__js_coom(c), -1;
        if (!none->child) cJSON_Delete(none);
        if (!add(c, pieces, o)) return -1;
    } else {
        cJSON_Delete(none);
    }
    for (const cJSON *a = k->child; a; a = a->next)
        for (const cJSON *b = a->next; b; b = b->next) {
            if (sift__js_disjoint(c, a, b)) continue;
            cJSON *o = cJSON_CreateObject(), *all = o ? cJSON_AddArrayToObject(o, "allOf") : NULL;
            if (!all || !cJSON_AddItemToArray(all, cJSON_Duplicate(a, 1)) || !cJSON_AddItemToArray(all, cJSON_Duplicate(b, 1)))
                return cJSON_Delete(o), sift__js_coom(c), -1;
            if (!add(c, pieces, o)) return -1;
        }
    return 1;
}

/* the pieces of one keyword: 1 done, 0 refused, -1 out of memory */
static int keyword_complement(conv *c, const cJSON *s, const cJSON *k, cJSON *pieces, int depth)
{
    const char *kw = k->string;
    static const char *const counts[][3] = {{"minItems", "array", "maxItems"},           {"maxItems", "array", "minItems"},
                                            {"minLength", "string", "maxLength"},        {"maxLength", "string", "minLength"},
                                            {"minProperties", "object", "maxProperties"}, {"maxProperties", "object", "minProperties"},
                                            {"minimum", "number", "exclusiveMaximum"},   {"maximum", "number", "exclusiveMinimum"},
                                            {"exclusiveMinimum", "number", "maximum"},   {"exclusiveMaximum", "number", "minimum"}};
    for (size_t i = 0; i < sizeof counts / sizeof *counts; i++) {
        if (strcmp(kw, counts[i][0])) continue;
        if (!cJSON_IsNumber(k) || !isfinite(k->valuedouble)) return 0;
        double v = k->valuedouble;
        if (i < 6) { /* counts: whole, and min 0 rejects nothing */
            if (v < 0 || v != floor(v) || v > 1e9) return 0;
            if (i % 2 == 0 && v == 0) return 1;
            v = i % 2 == 0 ? v - 1 : v + 1;
        }
        cJSON *o = typed_bound(counts[i][1], counts[i][2], v);
        return o ? (add(c, pieces, o) ? 1 : -1) : (sift__js_coom(c), -1);
    }
    if (!strcmp(kw, "type")) {
        unsigned t = 0;
        if (!sift__js_type_set(k, &t)) return 0;
        /* integer without number: the non-integer numbers are no type; they are left out (a
         * subset of the complement: see the design comment) */
        if ((t & T_INTEGER) && !(t & T_NUMBER)) t |= T_NUMBER, c->approx = true;
        return add_other_types(c, pieces, t) ? 1 : -1;
    }
    if (!strcmp(kw, "enum") || !strcmp(kw, "const")) {
        bool single = !strcmp(kw, "const");
        if (!single && !cJSON_IsArray(k)) return 0;
        return values_complement(c, k, single, pieces);
    }
    if (!strcmp(kw, "required")) {
        if (!cJSON_IsArray(k)) return 0;
        for (const cJSON *q = k->child; q; q = q->next)
            if (!cJSON_IsString(q) || !add(c, pieces, key_with(q->valuestring, cJSON_CreateFalse(), false))) return cJSON_IsString(q) ? -1 : 0;
        return 1;
    }
    if (!strcmp(kw, "properties")) {
        if (!cJSON_IsObject(k)) return 0;
        for (const cJSON *p = k->child; p; p = p->next) {
            if (is_everything(p)) continue;
            cJSON *cp = complement_d(c, p, depth + 1);
            if (!cp) return c->status == SIFT_OK ? 0 : -1;
            if (cJSON_IsFalse(cp)) { /* p matches everything */
                cJSON_Delete(cp);
                continue;
            }
            if (cJSON_IsTrue(cp)) cJSON_Delete(cp), cp = cJSON_CreateObject(); /* p false: any value there */
            if (!add(c, pieces, key_with(p->string, cp, true))) return -1;
        }
        return 1;
    }
    if (!strcmp(kw, "items")) {
        if (!cJSON_IsObject(k) && !cJSON_IsBool(k)) return 0; /* a tuple (draft 7) */
        if (cJSON_GetObjectItemCaseSensitive(s, "prefixItems")) return 0;
        cJSON *cp = complement_d(c, k, depth + 1);
        if (!cp) return c->status == SIFT_OK ? 0 : -1;
        if (cJSON_IsFalse(cp)) return cJSON_Delete(cp), 1;
        if (cJSON_IsTrue(cp)) { /* items false: a non-empty array */
            cJSON_Delete(cp);
            cJSON *o = typed_bound("array", "minItems", 1);
            return o ? (add(c, pieces, o) ? 1 : -1) : (sift__js_coom(c), -1);
        }
        cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddStringToObject(o, "type", "array") || !cJSON_AddItemToObject(o, "contains", cp)) {
            if (o && !cJSON_GetObjectItemCaseSensitive(o, "contains")) cJSON_Delete(cp);
            cJSON_Delete(o);
            return sift__js_coom(c), -1;
        }
        return add(c, pieces, o) ? 1 : -1;
    }
    if (!strcmp(kw, "propertyNames")) {
        if (!cJSON_IsFalse(k)) return 0;
        cJSON *o = typed_bound("object", "minProperties", 1);
        return o ? (add(c, pieces, o) ? 1 : -1) : (sift__js_coom(c), -1);
    }
    if (!strcmp(kw, "pattern")) return cJSON_IsString(k) ? class_run_complement(c, k->valuestring, pieces) : 0;
    if (!strcmp(kw, "format")) { /* one the converter checks (json_schema_scalar.c): refused; any other is an annotation */
        static const char *const checked[] = {"date", "time", "date-time", "email", "hostname", "ipv4", "uri", NULL};
        const char *f = cJSON_IsString(k) ? k->valuestring : NULL;
        if (!f || sift__js_in_list(checked, f) || sift__js_in_list(sift__js_formats_refused, f) || !strncmp(f, "uuid", 4)) return 0;
        return 1;
    }
    if (!strcmp(kw, "not")) return add(c, pieces, cJSON_Duplicate(k, 1)) ? 1 : -1;
    if (!strcmp(kw, "$ref")) {
        const cJSON *t = cJSON_IsString(k) ? sift__js_vc_resolve(c, k->valuestring) : NULL;
        if (!t) return 0;
        cJSON *cp = complement_d(c, t, depth + 1);
        if (!cp) return c->status == SIFT_OK ? 0 : -1;
        if (cJSON_IsFalse(cp)) return cJSON_Delete(cp), 1;
        return add(c, pieces, cp) ? 1 : -1;
    }
    if (!strcmp(kw, "oneOf")) return one_of_complement(c, k, pieces, depth);
    if (!strcmp(kw, "allOf") || !strcmp(kw, "anyOf")) {
        if (!cJSON_IsArray(k) || !k->child) return 0;
        bool any = !strcmp(kw, "anyOf");
        cJSON *all = any ? cJSON_CreateArray() : NULL;
        if (any && !all) return sift__js_coom(c), -1;
        for (const cJSON *p = k->child; p; p = p->next) {
            cJSON *cp = complement_d(c, p, depth + 1);
            if (!cp) return cJSON_Delete(all), c->status == SIFT_OK ? 0 : -1;
            if (cJSON_IsFalse(cp)) { /* a part that matches everything */
                cJSON_Delete(cp);
                if (any) return cJSON_Delete(all), 1; /* the anyOf matches everything */
                continue;
            }
            if (!add(c, any ? all : pieces, cp)) return cJSON_Delete(all), -1;
        }
        if (!any) return 1;
        cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddItemToObject(o, "allOf", all)) return cJSON_Delete(o), cJSON_Delete(all), sift__js_coom(c), -1;
        return add(c, pieces, o) ? 1 : -1;
    }
    return 0;
}

static cJSON *complement_d(conv *c, const cJSON *s, int depth)
{
    if (depth > NOT_DEPTH) return NULL;
    if (cJSON_IsTrue(s)) return cJSON_CreateFalse();
    if (cJSON_IsFalse(s)) return cJSON_CreateTrue();
    if (!cJSON_IsObject(s)) return NULL;
    const bool ref_only = c->ref_overrides && cJSON_GetObjectItemCaseSensitive(s, "$ref");
    cJSON *pieces = cJSON_CreateArray();
    if (!pieces) return sift__js_coom(c), NULL;
    for (const cJSON *k = s->child; k; k = k->next) {
        if (ref_only && strcmp(k->string, "$ref")) continue; /* draft 7: $ref alone counts */
        if (!sift__js_is_keyword(k->string)) continue;       /* annotations, unknown keywords */
        int r = keyword_complement(c, s, k, pieces, depth);
        if (r <= 0 || cJSON_GetArraySize(pieces) > NOT_PIECES) {
            if (r < 0 && c->status == SIFT_OK) sift__js_coom(c);
            cJSON_Delete(pieces);
            return NULL;
        }
    }
    /* a true piece (the complement of a false part) makes the union everything */
    for (const cJSON *p = pieces->child; p; p = p->next)
        if (cJSON_IsTrue(p)) return cJSON_Delete(pieces), cJSON_CreateTrue();
    int n = cJSON_GetArraySize(pieces);
    if (n == 0) return cJSON_Delete(pieces), cJSON_CreateFalse(); /* s matches everything */
    if (n == 1) {
        cJSON *one = cJSON_DetachItemFromArray(pieces, 0);
        cJSON_Delete(pieces);
        return one;
    }
    cJSON *o = cJSON_CreateObject();
    if (!o || !cJSON_AddItemToObject(o, "anyOf", pieces)) {
        cJSON_Delete(o);
        cJSON_Delete(pieces);
        return sift__js_coom(c), NULL;
    }
    return o;
}

cJSON *sift__js_complement(conv *c, const cJSON *s) { return complement_d(c, s, 0); }
