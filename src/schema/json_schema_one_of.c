/*
 * json_schema_one_of.c - oneOf for the JSON schema converter: a grammar is a union and cannot
 * say "exactly one", so a oneOf compiles only as a union of pieces that no value matches
 * twice. First the proofs that two alternatives cannot both match (their JSON kinds, listed
 * values, literal patterns, a key one requires and the other forbids, ... : sift__js_disjoint),
 * then, where they may overlap, the rewriting of an alternative into pieces that exclude the
 * other (sift__js_one_of_pieces): exact, or refused, never loosened. Split from
 * json_schema_combine.c (the other combinators) by job; see json_schema.c for the design.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schema/json_schema_int.h"

/* ---- anyOf / oneOf ---------------------------------------------------------------------------- */

enum { K_OBJ = 1, K_ARR = 2, K_STR = 4, K_NUM = 8, K_BOOL = 16, K_NULL = 32, K_ALL = 63 };

static unsigned kind_of_value(const cJSON *v)
{
    if (cJSON_IsObject(v)) return K_OBJ;
    if (cJSON_IsArray(v)) return K_ARR;
    if (cJSON_IsString(v)) return K_STR;
    if (cJSON_IsNumber(v)) return K_NUM;
    if (cJSON_IsBool(v)) return K_BOOL;
    return K_NULL;
}

static unsigned kind_of_type(const char *t)
{
    if (!strcmp(t, "object")) return K_OBJ;
    if (!strcmp(t, "array")) return K_ARR;
    if (!strcmp(t, "string")) return K_STR;
    if (!strcmp(t, "number") || !strcmp(t, "integer")) return K_NUM;
    if (!strcmp(t, "boolean")) return K_BOOL;
    if (!strcmp(t, "null")) return K_NULL;
    return K_ALL;
}

/* The JSON kinds a schema can match, by JSON Schema's meaning (a schema without `type`
 * matches every kind, whatever its other keywords suggest): an over-approximation. */
static unsigned schema_kinds(conv *c, const cJSON *s, int depth)
{
    if (!cJSON_IsObject(s) || depth > 16) return cJSON_IsFalse(s) ? 0 : K_ALL;
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(s, "$ref");
    unsigned k = K_ALL;
    if (cJSON_IsString(ref) && ref->valuestring[0] == '#') {
        sift_error saved = c->err ? *c->err : (sift_error){0};
        int st = c->status;
        const cJSON *t = sift__js_resolve_pointer(c, ref->valuestring);
        c->status = st; /* only a probe: a bad $ref is reported where it is converted */
        if (c->err) *c->err = saved;
        if (t) k &= schema_kinds(c, t, depth + 1);
    }
    const cJSON *ty = cJSON_GetObjectItemCaseSensitive(s, "type");
    if (cJSON_IsString(ty)) k &= kind_of_type(ty->valuestring);
    else if (cJSON_IsArray(ty)) {
        unsigned u = 0;
        for (const cJSON *t = ty->child; t; t = t->next) u |= cJSON_IsString(t) ? kind_of_type(t->valuestring) : K_ALL;
        k &= u;
    }
    const cJSON *cst = cJSON_GetObjectItemCaseSensitive(s, "const");
    if (cst) k &= kind_of_value(cst);
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(s, "enum");
    if (cJSON_IsArray(en)) {
        unsigned u = 0;
        for (const cJSON *v = en->child; v; v = v->next) u |= kind_of_value(v);
        k &= u;
    }
    /* alternatives: the kinds of any of them; allOf: of all its parts */
    for (const char *const *kw = (const char *const[]){"anyOf", "oneOf", NULL}; *kw; kw++) {
        const cJSON *alts = cJSON_GetObjectItemCaseSensitive(s, *kw);
        if (!cJSON_IsArray(alts) || !alts->child) continue;
        unsigned u = 0;
        for (const cJSON *a = alts->child; a; a = a->next) u |= schema_kinds(c, a, depth + 1);
        k &= u;
    }
    const cJSON *all = cJSON_GetObjectItemCaseSensitive(s, "allOf");
    for (const cJSON *a = cJSON_IsArray(all) ? all->child : NULL; a; a = a->next) k &= schema_kinds(c, a, depth + 1);
    return k;
}

/* The finite set of values a schema allows (its const, or its enum), or NULL. */
static const cJSON *schema_values(const cJSON *s, bool *single)
{
    *single = false;
    if (!cJSON_IsObject(s)) return NULL;
    const cJSON *cst = cJSON_GetObjectItemCaseSensitive(s, "const");
    *single = cst != NULL;
    const cJSON *v = cst ? cst : cJSON_GetObjectItemCaseSensitive(s, "enum");
    const cJSON *all = cJSON_GetObjectItemCaseSensitive(s, "allOf");
    for (const cJSON *p = cJSON_IsArray(all) ? all->child : NULL; p && !v; p = p->next) v = schema_values(p, single);
    return v; /* a part's values bound the whole allOf */
}

static bool values_overlap(const cJSON *a, bool sa, const cJSON *b, bool sb)
{
    for (const cJSON *x = sa ? a : a->child; x; x = sa ? NULL : x->next)
        for (const cJSON *y = sb ? b : b->child; y; y = sb ? NULL : y->next)
            if (cJSON_Compare(x, y, true)) return true;
    return false;
}

/* Can no instance match two alternatives of a oneOf? Proven when their kinds are disjoint,
 * when both allow only listed values (or, strings only, literal patterns ^a$) and share none,
 * or (objects only) when one requires a key the other forbids, or one property that both
 * require has values that cannot overlap (the same question, a few levels down). Otherwise
 * the grammar (a union) would also accept what matches two of them (sift__js_one_of_pieces
 * may still tell them apart). */

/* a schema that is only a $ref: its target (a few levels), else itself */
static const cJSON *deref(conv *c, const cJSON *s)
{
    for (int i = 0; i < 8 && cJSON_IsObject(s) && cJSON_GetArraySize(s) == 1; i++) {
        const cJSON *ref = cJSON_GetObjectItemCaseSensitive(s, "$ref");
        const cJSON *t = cJSON_IsString(ref) ? sift__js_vc_resolve(c, ref->valuestring) : NULL;
        if (!t) break;
        s = t;
    }
    return s;
}

/* a requires key k / forbids it (declared false, or additionalProperties false without
 * declaring it and without patternProperties) */
bool sift__js_requires_key(const cJSON *s, const char *k)
{
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(s, "required");
    for (const cJSON *q = cJSON_IsArray(r) ? r->child : NULL; q; q = q->next)
        if (cJSON_IsString(q) && !strcmp(q->valuestring, k)) return true;
    return false;
}

static bool forbids_key(const cJSON *s, const char *k)
{
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(s, "properties");
    const cJSON *x = cJSON_IsObject(p) ? cJSON_GetObjectItemCaseSensitive(p, k) : NULL;
    if (x) return cJSON_IsFalse(x);
    const cJSON *pp = cJSON_GetObjectItemCaseSensitive(s, "patternProperties");
    return cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(s, "additionalProperties")) && !(cJSON_IsObject(pp) && pp->child);
}

/* the strings a pattern ^lit$ (or ^(a|b)$) allows, decoded: their count, -1 when not that form */
static int literal_strings(const cJSON *s, char (*out)[SIFT__PATTERN_LIT_MAX], int cap)
{
    const cJSON *pat = cJSON_GetObjectItemCaseSensitive(s, "pattern");
    bool prefix = true;
    if (!cJSON_IsString(pat)) return -1;
    int n = sift__schema_pattern_literals(pat->valuestring, strlen(pat->valuestring), out, cap, &prefix);
    return n < 0 || prefix ? -1 : n;
}

static bool nonempty_array(const cJSON *s)
{
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(s, "minItems");
    return cJSON_IsNumber(m) && m->valuedouble >= 1;
}

static bool disjoint_d(conv *c, const cJSON *a, const cJSON *b, int depth)
{
    a = deref(c, a);
    b = deref(c, b);
    unsigned both = schema_kinds(c, a, 0) & schema_kinds(c, b, 0);
    if (!both) return true;
    bool sa = false, sb = false;
    const cJSON *va = schema_values(a, &sa), *vb = schema_values(b, &sb);
    if (va && vb && (sa || cJSON_IsArray(va)) && (sb || cJSON_IsArray(vb))) return !values_overlap(va, sa, vb, sb);
    /* listed values that validate against the other schema (as value_check.c decides): none */
    for (int side = 0; side < 2; side++) {
        const cJSON *v = side ? vb : va, *self = side ? b : a, *other = side ? a : b;
        bool single = side ? sb : sa, apart = v && (single || cJSON_IsArray(v));
        for (const cJSON *x = !apart ? NULL : single ? v : v->child; x && apart; x = single ? NULL : x->next)
            apart = sift__schema_value_valid(self, x, sift__js_vc_resolve, c) == 0 || sift__schema_value_valid(other, x, sift__js_vc_resolve, c) == 0;
        if (apart) return true;
    }
    /* arrays only, each with at least one item, whose items cannot overlap */
    const cJSON *ia = cJSON_GetObjectItemCaseSensitive(a, "items"), *ib = cJSON_GetObjectItemCaseSensitive(b, "items");
    if (both == K_ARR && cJSON_IsObject(ia) && cJSON_IsObject(ib) && nonempty_array(a) && nonempty_array(b) &&
        !cJSON_GetObjectItemCaseSensitive(a, "prefixItems") &&
        !cJSON_GetObjectItemCaseSensitive(b, "prefixItems") && depth <= 4 && disjoint_d(c, ia, ib, depth + 1))
        return true;
    if (both == K_STR) { /* strings only: two literal patterns with no string in common */
        char la[8][SIFT__PATTERN_LIT_MAX], lb[8][SIFT__PATTERN_LIT_MAX];
        int na = literal_strings(a, la, 8), nb = na < 0 ? -1 : literal_strings(b, lb, 8);
        bool common = na < 0 || nb < 0;
        for (int i = 0; i < na && !common; i++)
            for (int j = 0; j < nb && !common; j++) common = !strcmp(la[i], lb[j]);
        if (!common) return true;
    }
    if (both != K_OBJ || depth > 4) return false;
    /* objects: a key one requires and the other forbids, or one both require whose values
     * cannot overlap */
    const cJSON *ra = cJSON_GetObjectItemCaseSensitive(a, "required"), *rb = cJSON_GetObjectItemCaseSensitive(b, "required");
    for (const cJSON *r = cJSON_IsArray(ra) ? ra->child : NULL; r; r = r->next)
        if (cJSON_IsString(r) && forbids_key(b, r->valuestring)) return true;
    for (const cJSON *r = cJSON_IsArray(rb) ? rb->child : NULL; r; r = r->next)
        if (cJSON_IsString(r) && forbids_key(a, r->valuestring)) return true;
    const cJSON *pa = cJSON_GetObjectItemCaseSensitive(a, "properties"), *pb = cJSON_GetObjectItemCaseSensitive(b, "properties");
    /* a key one of them requires: its value must fit both property schemas */
    for (int side = 0; side < 2 && cJSON_IsObject(pa) && cJSON_IsObject(pb); side++)
        for (const cJSON *r = cJSON_IsArray(side ? rb : ra) ? (side ? rb : ra)->child : NULL; r; r = r->next) {
            if (!cJSON_IsString(r)) continue;
            const cJSON *xa = cJSON_GetObjectItemCaseSensitive(pa, r->valuestring), *xb = cJSON_GetObjectItemCaseSensitive(pb, r->valuestring);
            if (xa && xb && disjoint_d(c, xa, xb, depth + 1)) return true;
        }
    return false;
}

bool sift__js_disjoint(conv *c, const cJSON *a, const cJSON *b) { return disjoint_d(c, a, b, 0); }

/* Does a const / enum value have the schema's `type` (a name or a list)? */
bool sift__js_value_fits(const cJSON *v, const cJSON *type)
{
    if (!type) return true;
    if (cJSON_IsArray(type)) {
        for (const cJSON *t = type->child; t; t = t->next)
            if (sift__js_value_fits(v, t)) return true;
        return false;
    }
    if (!cJSON_IsString(type)) return true;
    const char *t = type->valuestring;
    if (!strcmp(t, "integer")) return cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble) && fabs(v->valuedouble) < 9e15;
    return (kind_of_type(t) & kind_of_value(v)) != 0;
}

/* ---- oneOf: alternatives told apart ------------------------------------------------------------ */

static bool is_type_object(const cJSON *s)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(s, "type");
    return cJSON_IsString(t) && !strcmp(t->valuestring, "object");
}

/* untyped, with object keywords only: every value that is not an object matches it */
static bool untyped_object_only(const cJSON *s)
{
    static const char *const obj[] = {"properties", "required", "additionalProperties", "patternProperties", "minProperties",
                                      "maxProperties", "dependentRequired", "propertyNames", NULL};
    if (!cJSON_IsObject(s) || !s->child) return false;
    for (const cJSON *k = s->child; k; k = k->next)
        if (!sift__js_in_list(obj, k->string) && sift__js_is_keyword(k->string)) return false;
    return true;
}

/* only `type` (a name or a list) and annotations, and `not` of it is a set of types: the
 * complement of a type set is one unless it would be "numbers that are not integers" */
static bool type_only(const cJSON *p)
{
    unsigned t = 0;
    if (!cJSON_IsObject(p) || !sift__js_only_annotations_and(p, "type") || !sift__js_type_set(cJSON_GetObjectItemCaseSensitive(p, "type"), &t)) return false;
    if (t & T_NUMBER) t |= T_INTEGER;
    return !((t & T_INTEGER) && !(t & T_NUMBER));
}

/* an entry of `present`: key k present, with a value of none of not_of's types when given */
static bool add_present(cJSON *present, const char *k, const cJSON *not_of)
{
    cJSON *e = cJSON_CreateObject();
    if (!e || !cJSON_AddStringToObject(e, "k", k) || !cJSON_AddItemToArray(present, e)) return cJSON_Delete(e), false;
    if (!not_of) return true;
    unsigned t = 0;
    sift__js_type_set(cJSON_GetObjectItemCaseSensitive(not_of, "type"), &t);
    if (t & T_NUMBER) t |= T_INTEGER;
    cJSON *n = cJSON_AddObjectToObject(e, "s"), *other = n ? cJSON_AddArrayToObject(n, "type") : NULL;
    for (int i = 0; other && sift__js_type_names[i]; i++)
        if (!(t & (1u << i)) && !cJSON_AddItemToArray(other, cJSON_CreateString(sift__js_type_names[i]))) return false;
    return other != NULL;
}

/* piece d gets key k present with the types of sch (an entry of `present`): met with what d
 * already says of k (a type list from an earlier entry, or false: then d is empty, *empty) */
static bool piece_types(conv *c, cJSON *d, const char *k, const cJSON *sch, bool *empty)
{
    *empty = false;
    cJSON *pr = cJSON_GetObjectItemCaseSensitive(d, "properties");
    if (!pr) pr = cJSON_AddObjectToObject(d, "properties");
    if (!pr) return false;
    const cJSON *had = cJSON_GetObjectItemCaseSensitive(pr, k);
    cJSON *t = NULL;
    if (cJSON_IsFalse(had)) return *empty = true;
    if (had) { /* only type lists are put there (by this function) */
        t = sift__js_type_meet(c, cJSON_GetObjectItemCaseSensitive(had, "type"), cJSON_GetObjectItemCaseSensitive(sch, "type"));
        if (!t) return false;
        if (cJSON_IsArray(t) && !t->child) return cJSON_Delete(t), *empty = true;
    }
    cJSON *v = cJSON_CreateObject();
    if (!v || !cJSON_AddItemToObject(v, "type", t ? t : cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(sch, "type"), 1))) {
        cJSON_Delete(v);
        return false;
    }
    cJSON_DeleteItemFromObjectCaseSensitive(pr, k);
    return cJSON_AddItemToObject(pr, k, v) || (cJSON_Delete(v), false);
}

/* b is "object, these keys are required" and whatever else it says, a says too (the same
 * keyword, the same property schema, or a property schema that says nothing), but for
 * properties whose values in a never fit b (their names go to `present`), and properties a
 * leaves free (no additionalProperties / patternProperties in a) where b only names types
 * (to `present` with "not" those types): among a's values, those not matching b are exactly
 * those where one of b's required keys is absent or one of those properties is present
 * (with a value of another type, for the second kind) */
static bool excludable(conv *c, const cJSON *a, const cJSON *b, cJSON *present)
{
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(b, "required");
    if (!is_type_object(a) || !is_type_object(b) || !cJSON_IsArray(r) || !r->child || cJSON_GetArraySize(r) > 4) return false;
    for (const cJSON *q = r->child; q; q = q->next)
        if (!cJSON_IsString(q)) return false;
    const cJSON *pa = cJSON_GetObjectItemCaseSensitive(a, "properties");
    for (const cJSON *k = b->child; k; k = k->next) {
        if (!strcmp(k->string, "type") || !strcmp(k->string, "required") || !sift__js_is_keyword(k->string)) continue;
        if (!strcmp(k->string, "properties") && cJSON_IsObject(k)) {
            for (const cJSON *p = k->child; p; p = p->next) {
                bool trivial = cJSON_IsTrue(p) || (cJSON_IsObject(p) && !p->child);
                const cJSON *x = cJSON_IsObject(pa) ? cJSON_GetObjectItemCaseSensitive(pa, p->string) : NULL;
                if (trivial || (x && cJSON_Compare(x, p, true))) continue;
                /* a leaves it free and b names its types: present with another type */
                if (!x && type_only(p) && !cJSON_GetObjectItemCaseSensitive(a, "additionalProperties") &&
                    !cJSON_GetObjectItemCaseSensitive(a, "patternProperties")) {
                    if (!add_present(present, p->string, p)) return false;
                    continue;
                }
                /* a's values for it never fit b's: present, it takes a's value away from b */
                if (!x || !disjoint_d(c, x, p, 1) || !add_present(present, p->string, NULL)) return false;
            }
            continue;
        }
        const cJSON *same = cJSON_GetObjectItemCaseSensitive(a, k->string);
        if (!same || !cJSON_Compare(same, k, true)) return false;
        /* additionalProperties covers the keys b does not declare: a must declare no others */
        if (!strcmp(k->string, "additionalProperties")) {
            const cJSON *pb = cJSON_GetObjectItemCaseSensitive(b, "properties");
            for (const cJSON *p = cJSON_IsObject(pa) ? pa->child : NULL; p; p = p->next)
                if (!cJSON_IsObject(pb) || !cJSON_GetObjectItemCaseSensitive(pb, p->string)) return false;
        }
        if (!strcmp(k->string, "patternProperties")) return false;
    }
    return true;
}

/* i lists its values (const / enum): its piece is those that validate against it and against
 * no other alternative (value_check.c decides each). 1 when done (out has the piece, or
 * nothing when no value is left), 0 when this does not apply or a value is not decided,
 * -1 out of memory. */
static int finite_piece(conv *c, cJSON *const *cur, int n, int i, cJSON *out)
{
    bool single = false;
    const cJSON *vals = schema_values(cur[i], &single);
    if (!vals || (!single && !cJSON_IsArray(vals))) return 0;
    cJSON *keep = cJSON_CreateArray();
    if (!keep) return -1;
    for (const cJSON *v = single ? vals : vals->child; v; v = single ? NULL : v->next) {
        int r = sift__schema_value_valid(cur[i], v, sift__js_vc_resolve, c);
        for (int j = 0; j < n && r == 1; j++)
            if (j != i && cur[j]) {
                int rj = sift__schema_value_valid(cur[j], v, sift__js_vc_resolve, c);
                r = rj == 0 ? 1 : rj == 1 ? 0 : -1;
            }
        if (r < 0) return cJSON_Delete(keep), 0;
        if (r == 1 && !cJSON_AddItemToArray(keep, cJSON_Duplicate(v, 1))) return cJSON_Delete(keep), -1;
    }
    if (!keep->child) return cJSON_Delete(keep), 1;
    cJSON *piece = cJSON_CreateObject();
    if (!piece || !cJSON_AddItemToObject(piece, "enum", keep)) {
        cJSON_Delete(piece);
        cJSON_Delete(keep);
        return -1;
    }
    return cJSON_AddItemToArray(out, piece) ? 1 : (cJSON_Delete(piece), -1);
}

/* arrays only on both sides, items that cannot overlap, b taking []: [] is all they share */
static bool empty_array_only(conv *c, const cJSON *a, const cJSON *b)
{
    const cJSON *ia = cJSON_GetObjectItemCaseSensitive(a, "items"), *ib = cJSON_GetObjectItemCaseSensitive(b, "items");
    static const char *const tuple[] = {"prefixItems", "contains", "minContains", NULL};
    for (const char *const *k = tuple; *k; k++)
        if (cJSON_GetObjectItemCaseSensitive(a, *k) || cJSON_GetObjectItemCaseSensitive(b, *k)) return false;
    return schema_kinds(c, a, 0) == K_ARR && schema_kinds(c, b, 0) == K_ARR && cJSON_IsObject(ia) && cJSON_IsObject(ib) && !nonempty_array(b) &&
           sift__js_disjoint(c, ia, ib);
}

/* A key d every alternative is an object declaring, with listed values (const / enum) no two
 * alternatives share: present, d's value leaves at most one alternative that can match; absent,
 * the alternatives without d decide (split_on_key). Its name, or NULL. */
static const char *discriminator(conv *c, cJSON *const *cur, int n)
{
    int first = -1;
    for (int i = 0; i < n; i++)
        if (cur[i]) {
            if (!is_type_object(cur[i])) return NULL;
            if (first < 0) first = i;
        }
    const cJSON *p0 = first < 0 ? NULL : cJSON_GetObjectItemCaseSensitive(cur[first], "properties");
    for (const cJSON *d = cJSON_IsObject(p0) ? p0->child : NULL; d; d = d->next) {
        bool ok = true, all_required = true;
        for (int i = first; i < n && ok; i++) {
            if (!cur[i]) continue;
            const cJSON *pi = cJSON_GetObjectItemCaseSensitive(cur[i], "properties");
            const cJSON *xi = deref(c, cJSON_GetObjectItemCaseSensitive(pi, d->string));
            bool si = false;
            const cJSON *vi = xi ? schema_values(xi, &si) : NULL;
            ok = vi && (si || cJSON_IsArray(vi));
            all_required &= sift__js_requires_key(cur[i], d->string);
            for (int j = first; j < i && ok; j++) {
                if (!cur[j]) continue;
                bool sj = false;
                const cJSON *vj = schema_values(deref(c, cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(cur[j], "properties"), d->string)), &sj);
                ok = !values_overlap(vi, si, vj, sj);
            }
        }
        if (ok && !all_required) return d->string; /* all required: sift__js_disjoint proves it */
    }
    return NULL;
}

/* oneOf split on key d (discriminator): with d present, alternative i as it is, d required;
 * with d absent, the oneOf of the alternatives with d declared false (those that require d
 * drop out), recursively. The two halves are disjoint; out gets both. */
static bool split_on_key(conv *c, cJSON *const *cur, int n, const char *d, cJSON *out)
{
    const cJSON **absent = calloc((size_t)n, sizeof *absent);
    bool ok = absent != NULL;
    for (int i = 0; ok && i < n; i++) {
        if (!cur[i]) continue;
        cJSON *p = cJSON_Duplicate(cur[i], 1), *rq = p ? cJSON_GetObjectItemCaseSensitive(p, "required") : NULL;
        if (p && !rq) rq = cJSON_AddArrayToObject(p, "required");
        if (!rq || (!sift__js_requires_key(p, d) && !cJSON_AddItemToArray(rq, cJSON_CreateString(d))) || !cJSON_AddItemToArray(out, p)) {
            if (!rq) cJSON_Delete(p);
            ok = false;
            break;
        }
        if (sift__js_requires_key(cur[i], d)) continue; /* matches nothing without d */
        cJSON *a = cJSON_Duplicate(cur[i], 1), *pr = a ? cJSON_GetObjectItemCaseSensitive(a, "properties") : NULL;
        if (pr) cJSON_DeleteItemFromObjectCaseSensitive(pr, d);
        if (!pr || !cJSON_AddItemToObject(pr, d, cJSON_CreateFalse())) {
            cJSON_Delete(a);
            ok = false;
            break;
        }
        absent[i] = a;
    }
    if (!ok) sift__js_coom(c);
    cJSON *rest = ok ? sift__js_one_of_pieces(c, absent, n) : NULL;
    while (rest && rest->child) cJSON_AddItemToArray(out, cJSON_DetachItemViaPointer(rest, rest->child));
    cJSON_Delete(rest);
    for (int i = 0; absent && i < n; i++) cJSON_Delete((cJSON *)absent[i]);
    free(absent);
    return c->status == SIFT_OK;
}

#define ONE_OF_PIECES 16
/* oneOf as a union of pieces that no value matches twice, exactly, or NULL with the error:
 * - two or more alternatives, all untyped with object keywords only: every other value
 *   matches them all, so only objects can match exactly one: each gets "type": "object";
 * - alternatives i and j proven disjoint (sift__js_disjoint) stay as they are;
 * - else, when j is "these keys are required" and says nothing else that i does not say
 *   (excludable), i's values that match j are taken away: i becomes one piece per key of
 *   j, with that key absent (declared false);
 *   beyond ONE_OF_PIECES pieces, or when neither holds: refused.
 * alts[] are the alternatives (with the keywords beside the oneOf already merged in). */
static cJSON *one_of_pieces_rewritten(conv *c, const cJSON *const *alts, int n)
{
    cJSON *out = cJSON_CreateArray(), **cur = calloc((size_t)n + 1, sizeof *cur);
    bool *same = calloc((size_t)n + 1, sizeof *same); /* cur[i] says what alts[i] says, as written */
    int untyped = 0, n_some = 0; /* a NULL alternative matches nothing */
    for (int i = 0; i < n; i++) untyped += alts[i] && untyped_object_only(deref(c, alts[i])), n_some += alts[i] != NULL;
    for (int i = 0; out && cur && same && i < n; i++) {
        if (!alts[i]) continue;
        const cJSON *a = deref(c, alts[i]);
        cur[i] = cJSON_Duplicate(a, 1);
        if (!cur[i]) goto nomem;
        bool wrap = untyped == n_some && n_some >= 2;
        if (wrap && !cJSON_AddStringToObject(cur[i], "type", "object")) goto nomem;
        bool none = false; /* simplified first (a `not` that says "key absent"), so that they compare */
        cJSON *sm = sift__js_simplify(c, cur[i], &none);
        if (c->status != SIFT_OK) goto fail;
        if (sm || none) cJSON_Delete(cur[i]), cur[i] = sm; /* NULL: matches nothing, left out */
        same[i] = !wrap && !sm && !none;
    }
    if (!out || !cur || !same) goto nomem;
    const char *disc = discriminator(c, cur, n);
    if (disc) {
        if (!split_on_key(c, cur, n, disc, out)) goto fail;
        for (int i = 0; i < n; i++) cJSON_Delete(cur[i]);
        free(cur);
        free(same);
        return out;
    }
    for (int i = 0; i < n && c->status == SIFT_OK; i++) {
        if (!cur[i]) continue;
        bool twin = false; /* another alternative says exactly the same: every value of i matches both */
        for (int j = 0; j < n && !twin; j++) twin = j != i && cur[j] && cJSON_Compare(cur[i], cur[j], true);
        if (twin) continue;
        int fv = finite_piece(c, cur, n, i, out);
        if (fv < 0) goto nomem;
        if (fv) continue;
        cJSON *pieces = cJSON_CreateArray();
        if (!pieces || !cJSON_AddItemToArray(pieces, cJSON_Duplicate(cur[i], 1))) {
            cJSON_Delete(pieces);
            goto nomem;
        }
        bool touched = false; /* untouched: the alternative as written (a $ref stays one, for recursion) */
        for (int j = 0; j < n && c->status == SIFT_OK; j++) {
            if (j == i || !cur[j] || sift__js_disjoint(c, cur[i], cur[j])) continue;
            touched = true;
            if (empty_array_only(c, cur[i], cur[j])) { /* both take [], nothing else: i's pieces do not */
                for (cJSON *p = pieces->child; p; p = p->next)
                    if (!nonempty_array(p) && !(cJSON_DeleteItemFromObjectCaseSensitive(p, "minItems"), cJSON_AddNumberToObject(p, "minItems", 1)))
                        goto nomem_pieces;
                continue;
            }
            const cJSON *req = cJSON_GetObjectItemCaseSensitive(cur[j], "required");
            cJSON *present = cJSON_CreateArray();
            if (!present) goto nomem_pieces;
            if (!excludable(c, cur[i], cur[j], present) ||
                cJSON_GetArraySize(pieces) * (cJSON_GetArraySize(req) + cJSON_GetArraySize(present)) > ONE_OF_PIECES) {
                cJSON_Delete(present);
                sift__js_cfail(c, SIFT_E_UNSUPPORTED, "oneOf: alternatives %d and %d may both match (exactly one must): not expressible as a grammar",
                               i < j ? i : j, i < j ? j : i);
                break;
            }
            cJSON *next = cJSON_CreateArray();
            for (const cJSON *p = pieces->child; next && p; p = p->next) {
                bool apart = false; /* p requires one whose values never fit: never matches j */
                for (const cJSON *q = present->child; q && !apart; q = q->next)
                    apart = !cJSON_GetObjectItemCaseSensitive(q, "s") && sift__js_requires_key(p, cJSON_GetObjectItemCaseSensitive(q, "k")->valuestring);
                if (apart) {
                    if (!cJSON_AddItemToArray(next, cJSON_Duplicate(p, 1))) cJSON_Delete(next), next = NULL;
                    continue;
                }
                for (const cJSON *q = present->child; next && q; q = q->next) { /* one of them present */
                    const char *k = cJSON_GetObjectItemCaseSensitive(q, "k")->valuestring;
                    const cJSON *sch = cJSON_GetObjectItemCaseSensitive(q, "s");
                    cJSON *d = cJSON_Duplicate(p, 1), *rq = d ? cJSON_GetObjectItemCaseSensitive(d, "required") : NULL;
                    bool empty = false, typed = true;
                    if (d && !rq) rq = cJSON_AddArrayToObject(d, "required");
                    if (rq && sch) typed = piece_types(c, d, k, sch, &empty);
                    if (typed && empty) { /* no value left: no piece */
                        cJSON_Delete(d);
                        continue;
                    }
                    if (!typed && c->status == SIFT_OK) { /* k there already says more than types: not met here */
                        cJSON_Delete(d);
                        cJSON_Delete(next);
                        next = NULL;
                        sift__js_cfail(c, SIFT_E_UNSUPPORTED, "oneOf: alternatives %d and %d may both match (exactly one must): not expressible as a grammar",
                                       i < j ? i : j, i < j ? j : i);
                        break;
                    }
                    if (!rq || !typed || (!sift__js_requires_key(d, k) && !cJSON_AddItemToArray(rq, cJSON_CreateString(k))) || !cJSON_AddItemToArray(next, d)) {
                        cJSON_Delete(d);
                        cJSON_Delete(next);
                        next = NULL;
                    }
                }
                for (const cJSON *k = req->child; next && k; k = k->next) {
                    if (sift__js_requires_key(p, k->valuestring)) continue; /* it matches j whenever it matches */
                    cJSON *q = cJSON_Duplicate(p, 1), *props = q ? cJSON_GetObjectItemCaseSensitive(q, "properties") : NULL;
                    if (q && !props) props = cJSON_AddObjectToObject(q, "properties");
                    if (props) cJSON_DeleteItemFromObjectCaseSensitive(props, k->valuestring);
                    if (!props || !cJSON_AddItemToObject(props, k->valuestring, cJSON_CreateFalse()) || !cJSON_AddItemToArray(next, q)) {
                        cJSON_Delete(q);
                        cJSON_Delete(next);
                        next = NULL;
                    }
                }
            }
            cJSON_Delete(present);
            cJSON_Delete(pieces);
            pieces = next;
            if (!pieces) goto nomem;
        }
        if (pieces && !touched && same[i] && c->status == SIFT_OK) {
            cJSON_Delete(pieces);
            pieces = cJSON_CreateArray();
            if (!pieces || !cJSON_AddItemToArray(pieces, cJSON_Duplicate(alts[i], 1))) goto nomem_pieces;
        }
        while (pieces && pieces->child) cJSON_AddItemToArray(out, cJSON_DetachItemViaPointer(pieces, pieces->child));
        cJSON_Delete(pieces);
        continue;
    nomem_pieces:
        cJSON_Delete(pieces);
        goto nomem;
    }
    for (int i = 0; i < n; i++) cJSON_Delete(cur[i]);
    free(cur);
    free(same);
    if (c->status != SIFT_OK) return cJSON_Delete(out), NULL;
    return out;
nomem:
    sift__js_coom(c);
fail:
    for (int i = 0; cur && i < n; i++) cJSON_Delete(cur[i]);
    free(cur);
    free(same);
    cJSON_Delete(out);
    return NULL;
}

/* The last resort for alternatives the rewriting above cannot tell apart: alternative i's
 * piece is {"allOf": [i, the complement of each j that may share a value with i]}
 * (json_schema_not.c), exact when every such complement can be written; a piece whose
 * complement part is empty (j matches everything) is left out. The allOf then merges as any
 * other (json_schema_combine.c), or is refused there. */
static cJSON *one_of_by_complement(conv *c, const cJSON *const *alts, int n)
{
    cJSON *out = cJSON_CreateArray();
    if (!out) return sift__js_coom(c), NULL;
    for (int i = 0; i < n; i++) {
        if (!alts[i]) continue;
        cJSON *piece = cJSON_CreateObject(), *all = piece ? cJSON_AddArrayToObject(piece, "allOf") : NULL;
        bool empty = false;
        if (!all || !cJSON_AddItemToArray(all, cJSON_Duplicate(alts[i], 1))) goto nomem_piece;
        for (int j = 0; j < n && !empty; j++) {
            if (j == i || !alts[j] || sift__js_disjoint(c, alts[i], alts[j])) continue;
            cJSON *cj = sift__js_complement(c, alts[j]);
            if (!cj) {
                cJSON_Delete(piece);
                cJSON_Delete(out);
                return NULL; /* not expressible (or out of memory: the error is set) */
            }
            if (cJSON_IsFalse(cj) || cJSON_IsTrue(cj)) { /* j matches everything: i has no piece / nothing: no part */
                empty = cJSON_IsFalse(cj);
                cJSON_Delete(cj);
                continue;
            }
            if (!cJSON_AddItemToArray(all, cj)) {
                cJSON_Delete(cj);
                goto nomem_piece;
            }
        }
        if (empty) {
            cJSON_Delete(piece);
            continue;
        }
        if (cJSON_GetArraySize(all) == 1) { /* apart from every other: as written (a $ref stays one) */
            cJSON *one = cJSON_DetachItemFromArray(all, 0);
            cJSON_Delete(piece);
            piece = one;
        }
        if (!cJSON_AddItemToArray(out, piece)) goto nomem_piece;
        continue;
    nomem_piece:
        cJSON_Delete(piece);
        cJSON_Delete(out);
        return sift__js_coom(c), NULL;
    }
    return out;
}

/* oneOf as a union of pieces that no value matches twice (one_of_pieces_rewritten), else by
 * complements (one_of_by_complement); when neither applies, the first one's refusal stands. */
cJSON *sift__js_one_of_pieces(conv *c, const cJSON *const *alts, int n)
{
    cJSON *r = one_of_pieces_rewritten(c, alts, n);
    if (r || c->status != SIFT_E_UNSUPPORTED) return r;
    sift_error saved = c->err ? *c->err : (sift_error){0};
    const int st = c->status;
    c->status = SIFT_OK;
    if (c->err) *c->err = (sift_error){0};
    r = one_of_by_complement(c, alts, n);
    if (!r && c->status == SIFT_OK) {
        c->status = st;
        if (c->err) *c->err = saved;
    }
    return r;
}
