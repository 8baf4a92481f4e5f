/*
 * json_schema_not.c - the complement of a schema, written as a schema without `not`, exactly
 * or not at all. A grammar is a union and has no "everything but", so `not S` compiles only
 * when S's complement can be spelled with the keywords the converter does compile. It is
 * used for `not` (json_schema_combine.c's sift__js_simplify: S's complement joins the
 * schema's allOf) and for oneOf alternatives that may overlap (json_schema_one_of.c: the
 * piece of alternative i is i and the complement of every j it may share a value with).
 *
 * Why keyword by keyword: a schema holds iff each of its keywords holds, and each keyword
 * only constrains values of its own JSON type, so the complement of S is the union, over
 * S's keywords, of the values that keyword rejects:
 *   type T             the other types (refused when T has integer without number: "the
 *                      numbers that are not integers" is no type)
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
 * Annotations and unknown keywords constrain nothing. Anything else (pattern, format,
 * multipleOf, additionalProperties, oneOf, ...) and nesting deeper than NOT_DEPTH refuse the
 * whole complement (NULL without an error; NULL with the error set means out of memory).
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
#define NOT_PATTERN_MAX 4096

/* ---- strings other than a listed few, as a pattern ---------------------------------------------- */

typedef struct tnode {
    uint32_t cp;
    bool end;
    struct tnode *kids, *next; /* sorted by cp */
} tnode;

static void t_free(tnode *t)
{
    while (t) {
        tnode *n = t->next;
        t_free(t->kids);
        free(t);
        t = n;
    }
}

static tnode *t_child(tnode *p, uint32_t cp)
{
    tnode **pp = &p->kids;
    while (*pp && (*pp)->cp < cp) pp = &(*pp)->next;
    if (*pp && (*pp)->cp == cp) return *pp;
    tnode *n = calloc(1, sizeof *n);
    if (!n) return NULL;
    n->cp = cp;
    n->next = *pp;
    *pp = n;
    return n;
}

/* one code point in a pattern: letters and digits raw, the rest \uHHHH (BMP only) */
static bool put_cp(sift__gbnf_sbuf *b, uint32_t cp)
{
    if (cp > 0xFFFF) return false;
    if ((cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || (cp >= '0' && cp <= '9')) sift__gbnf_sb_printf(b, "%c", (char)cp);
    else sift__gbnf_sb_printf(b, "\\u%04X", (unsigned)cp);
    return true;
}

/* The rest of a string that took the path to t and is none of the listed ones: stop here
 * (t is not a listed string's end), go on with a character no listed string has next, then
 * anything, or follow a child. */
static bool t_pattern(const tnode *t, sift__gbnf_sbuf *b, int depth)
{
    if (depth > 512 || b->n > NOT_PATTERN_MAX) return false;
    sift__gbnf_sb_puts(b, "(?:");
    if (t->kids) {
        sift__gbnf_sb_puts(b, "[^");
        for (const tnode *k = t->kids; k; k = k->next)
            if (!put_cp(b, k->cp)) return false;
        sift__gbnf_sb_puts(b, "](?:\\s|\\S)*");
    } else {
        sift__gbnf_sb_puts(b, "(?:\\s|\\S)+");
    }
    for (const tnode *k = t->kids; k; k = k->next) {
        sift__gbnf_sb_puts(b, "|");
        if (!put_cp(b, k->cp) || !t_pattern(k, b, depth + 1)) return false;
    }
    sift__gbnf_sb_puts(b, t->end ? ")" : ")?");
    return true;
}

/* {"type": "string", "pattern": ...} for the strings that are none of vals' strings; NULL
 * (no error) when a string is beyond the pattern's reach */
static cJSON *other_strings(conv *c, const cJSON *vals, bool single)
{
    tnode root = {0};
    bool ok = true;
    for (const cJSON *v = single ? vals : vals->child; v && ok; v = single ? NULL : v->next) {
        if (!cJSON_IsString(v)) continue;
        tnode *t = &root;
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
            t = t_child(t, cp);
        }
        if (!t) {
            ok = false;
            sift__js_coom(c);
        }
        if (ok) t->end = true;
    }
    sift__gbnf_sbuf b = {0};
    sift__gbnf_sb_puts(&b, "^");
    ok = ok && t_pattern(&root, &b, 0);
    sift__gbnf_sb_puts(&b, "$");
    t_free(root.kids);
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
        if ((t & T_INTEGER) && !(t & T_NUMBER)) return 0;
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
