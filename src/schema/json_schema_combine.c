/*
 * json_schema_combine.c - the combinators of the JSON schema converter: anyOf / oneOf (a
 * union; oneOf only when its alternatives are proven disjoint, since a union cannot say
 * "exactly one"), $ref (JSON pointers into this document, recursive references as recursive
 * rules) and allOf (the parts merged into one object schema, exactly or refused).
 * They live together because each rewrites schemas into other schemas before the keyword
 * visitors see them (with_siblings, the allOf merge, deref): the soundness rules of those
 * rewrites must be read side by side. See json_schema.c for the whole converter's design.
 */
#include <cjson/cJSON.h>
#include <ctype.h>
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
static bool requires_key(const cJSON *s, const char *k)
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

/* Keywords beside const / enum that would also constrain the listed values: not checked
 * value by value here, so refused rather than ignored. */
bool sift__js_values_checked(conv *c, const cJSON *s)
{
    static const char *const CONSTRAINING[] = {
        "minLength", "maxLength", "pattern", "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
        "minItems", "maxItems", "items", "prefixItems", "properties", "required", "additionalProperties", "allOf", NULL};
    if (c->flags & SIFT_JSON_SCHEMA_LENIENT) return true;
    for (const cJSON *k = s->child; k; k = k->next)
        if (sift__js_in_list(CONSTRAINING, k->string) || (!strcmp(k->string, "enum") && cJSON_GetObjectItemCaseSensitive(s, "const"))) {
            size_t o = sift__js_path_push(c, k->string);
            sift__js_cfail(c, SIFT_E_UNSUPPORTED, "keyword '%s' beside const / enum is not checked against the values", k->string);
            sift__js_path_pop(c, o);
            return false;
        }
    return true;
}

/* Keywords beside anyOf / oneOf that do not constrain the value. */
bool sift__js_is_inert(const char *k)
{
    return sift__js_in_list(sift__js_annotations, k) || !strcmp(k, "anyOf") || !strcmp(k, "oneOf");
}

/* An alternative together with the keywords beside the anyOf / oneOf (both must hold):
 * the alternative's keywords plus the siblings', properties merged, required lists joined,
 * types met. A keyword both sides give differently (other than those) is refused, and so is
 * additionalProperties on either side when the property sets differ (it would then mean
 * different things). Returns a new cJSON (the caller deletes it) or NULL with the error set. */
static cJSON *type_meet(conv *c, const cJSON *a, const cJSON *b);

cJSON *sift__js_with_siblings(conv *c, const cJSON *s, const cJSON *alt)
{
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(alt, "$ref");
    if (cJSON_IsString(ref) && cJSON_GetArraySize(alt) == 1) {
        alt = sift__js_resolve_pointer(c, ref->valuestring);
        if (!alt) return NULL;
    }
    if (cJSON_IsTrue(alt)) alt = NULL;
    if (alt && !cJSON_IsObject(alt)) return sift__js_cfail(c, SIFT_E_UNSUPPORTED, "anyOf / oneOf: an alternative beside other keywords must be an object schema"), NULL;
    cJSON *m = alt ? cJSON_Duplicate(alt, 1) : cJSON_CreateObject();
    if (!m) return sift__js_coom(c), NULL;
    for (const cJSON *k = s->child; k; k = k->next) {
        if (sift__js_is_inert(k->string)) continue;
        cJSON *have = cJSON_GetObjectItemCaseSensitive(m, k->string);
        if (!have) {
            if (!cJSON_AddItemToObject(m, k->string, cJSON_Duplicate(k, 1))) goto nomem;
            continue;
        }
        if (cJSON_Compare(have, k, true)) continue;
        if (!strcmp(k->string, "properties") && cJSON_IsObject(have) && cJSON_IsObject(k)) {
            for (const cJSON *p = k->child; p; p = p->next) {
                cJSON *q = cJSON_GetObjectItemCaseSensitive(have, p->string);
                if (!q) {
                    if (!cJSON_AddItemToObject(have, p->string, cJSON_Duplicate(p, 1))) goto nomem;
                } else if (!cJSON_Compare(q, p, true)) {
                    cJSON *both = cJSON_CreateObject(), *arr = cJSON_CreateArray();
                    if (!both || !arr) goto nomem;
                    cJSON_AddItemToArray(arr, cJSON_Duplicate(p, 1));
                    cJSON_AddItemToArray(arr, cJSON_Duplicate(q, 1));
                    cJSON_AddItemToObject(both, "allOf", arr);
                    cJSON_ReplaceItemInObjectCaseSensitive(have, p->string, both);
                }
            }
            continue;
        }
        if (!strcmp(k->string, "required") && cJSON_IsArray(have) && cJSON_IsArray(k)) {
            for (const cJSON *r = k->child; r; r = r->next) cJSON_AddItemToArray(have, cJSON_Duplicate(r, 1));
            continue;
        }
        if (!strcmp(k->string, "type")) { /* both hold: the types in common (none: nothing matches) */
            cJSON *t = type_meet(c, have, k);
            if (t && !t->child) {
                cJSON_Delete(t);
                cJSON_Delete(m);
                c->unsat = true;
                return sift__js_cfail(c, SIFT_E_INVAL, "the alternative has no type in common with the keywords beside it: it matches nothing"), NULL;
            }
            if (t && cJSON_ReplaceItemInObjectCaseSensitive(m, "type", t)) continue;
            cJSON_Delete(t);
        }
        cJSON_Delete(m);
        size_t o = sift__js_path_push(c, k->string);
        sift__js_cfail(c, SIFT_E_UNSUPPORTED, "keyword '%s' both beside anyOf / oneOf and in an alternative, differently", k->string);
        sift__js_path_pop(c, o);
        return NULL;
    }
    /* additionalProperties on either side applies to that side's properties only */
    const cJSON *sp = cJSON_GetObjectItemCaseSensitive(s, "properties"), *ap = alt ? cJSON_GetObjectItemCaseSensitive(alt, "properties") : NULL;
    const cJSON *sa = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
    const cJSON *aa = alt ? cJSON_GetObjectItemCaseSensitive(alt, "additionalProperties") : NULL;
    int nsp = sp ? cJSON_GetArraySize(sp) : 0, nap = ap ? cJSON_GetArraySize(ap) : 0;
    bool differ = (sp || ap) && !(sp && ap && cJSON_Compare(sp, ap, true)) && (nsp || nap);
    if (differ && ((sa && !cJSON_IsTrue(sa)) || (aa && !cJSON_IsTrue(aa)))) {
        /* a property one side declares is an additional one for the other side: it must
         * satisfy that side's additionalProperties too (false: it cannot be present); keys
         * neither declares satisfy both, which is expressed when one of them allows anything */
        bool s_any = !sa || cJSON_IsTrue(sa), a_any = !aa || cJSON_IsTrue(aa);
        bool pat = cJSON_GetObjectItemCaseSensitive(s, "patternProperties") || (alt && cJSON_GetObjectItemCaseSensitive(alt, "patternProperties"));
        if ((!s_any && !a_any && !cJSON_Compare(sa, aa, true)) || pat) {
            cJSON_Delete(m);
            return sift__js_cfail(c, SIFT_E_UNSUPPORTED, "additionalProperties with anyOf / oneOf alternatives that declare other properties"), NULL;
        }
        cJSON *mp = cJSON_GetObjectItemCaseSensitive(m, "properties");
        cJSON *mr = cJSON_GetObjectItemCaseSensitive(m, "required");
        for (cJSON *p = mp ? mp->child : NULL; p;) {
            cJSON *next = p->next;
            bool in_s = sp && cJSON_GetObjectItemCaseSensitive(sp, p->string), in_a = ap && cJSON_GetObjectItemCaseSensitive(ap, p->string);
            const cJSON *extra = in_a && !in_s && !s_any ? sa : in_s && !in_a && !a_any ? aa : NULL;
            if (cJSON_IsFalse(extra)) {
                for (const cJSON *r = cJSON_IsArray(mr) ? mr->child : NULL; r; r = r->next)
                    if (cJSON_IsString(r) && !strcmp(r->valuestring, p->string)) {
                        c->unsat = true; /* the message first: p is m's */
                        sift__js_cfail(c, SIFT_E_INVAL, "required property '%s' is not allowed by additionalProperties: the alternative matches nothing", p->string);
                        cJSON_Delete(m);
                        return NULL;
                    }
                /* by pointer: mp may hold two items of one name, and by name the first goes */
                cJSON_Delete(cJSON_DetachItemViaPointer(mp, p));
            } else if (extra) {
                cJSON *both = cJSON_CreateObject(), *arr = cJSON_CreateArray();
                if (!both || !arr) {
                    cJSON_Delete(both);
                    cJSON_Delete(arr);
                    goto nomem;
                }
                cJSON_AddItemToArray(arr, cJSON_Duplicate(p, 1));
                cJSON_AddItemToArray(arr, cJSON_Duplicate(extra, 1));
                cJSON_AddItemToObject(both, "allOf", arr);
                const size_t kl = strlen(p->string) + 1;
                if (!(both->string = cJSON_malloc(kl))) {
                    cJSON_Delete(both);
                    goto nomem;
                }
                memcpy(both->string, p->string, kl);
                cJSON_ReplaceItemViaPointer(mp, p, both);
            }
            p = next;
        }
        cJSON_DeleteItemFromObjectCaseSensitive(m, "additionalProperties");
        if (!s_any || !a_any) cJSON_AddItemToObject(m, "additionalProperties", cJSON_Duplicate(!s_any ? sa : aa, 1));
    }
    return m;
nomem:
    cJSON_Delete(m);
    return sift__js_coom(c), NULL;
}


/* Resolve a $ref (a JSON pointer into the document); returns the schema node or NULL. */
const cJSON *sift__js_resolve_pointer(conv *c, const char *ref)
{
    if (ref[0] != '#') return sift__js_cfail(c, SIFT_E_UNSUPPORTED, "$ref '%s': only references into this document (#...) are supported", ref), NULL;
    const cJSON *t = c->root;
    const char *p = ref + 1;
    while (*p == '/') {
        p++;
        char seg[256];
        size_t k = 0;
        while (*p && *p != '/' && k < sizeof seg - 1) {
            if (p[0] == '~' && p[1] == '0') {
                seg[k++] = '~';
                p += 2;
            } else if (p[0] == '~' && p[1] == '1') {
                seg[k++] = '/';
                p += 2;
            } else if (p[0] == '%' && isxdigit((unsigned char)p[1]) && isxdigit((unsigned char)p[2])) {
                char h[3] = {p[1], p[2], 0};
                seg[k++] = (char)strtol(h, NULL, 16);
                p += 3;
            } else {
                seg[k++] = *p++;
            }
        }
        seg[k] = 0;
        if (cJSON_IsArray(t)) {
            char *end;
            long idx = strtol(seg, &end, 10);
            t = (*seg && !*end && idx >= 0) ? cJSON_GetArrayItem(t, (int)idx) : NULL;
        } else if (cJSON_IsObject(t)) {
            t = cJSON_GetObjectItemCaseSensitive(t, seg);
        } else {
            t = NULL;
        }
        if (!t) return sift__js_cfail(c, SIFT_E_INVAL, "$ref '%s' does not resolve", ref), NULL;
    }
    if (*p) return sift__js_cfail(c, SIFT_E_INVAL, "$ref '%s' is not a JSON pointer", ref), NULL;
    return t;
}

const char *sift__js_visit_ref(conv *c, const char *ref)
{
    /* only '#...' pointers name a rule; resolve_pointer() words the error for the rest
     * (and "" must not reach the name below: ref + 1 would be past its end) */
    if (ref[0] != '#') return (void)sift__js_resolve_pointer(c, ref), NULL;
    /* the rule of a reference is named after it: ref-defs-Name */
    char nm[300];
    snprintf(nm, sizeof nm, "ref%s", ref + 1);
    char *sn = sift__js_sanitize(nm);
    if (!sn) return sift__js_coom(c);
    jrule *have = sift__js_find_rule(c, sn);
    for (int i = 0; i < c->n_resolving; i++)
        if (!strcmp(c->resolving[i], ref)) {
            /* recursion: reference the rule that is being built */
            c->ref_cycle = true;
            const char *out = NULL;
            jrule *r = sift__js_find_rule(c, sn);
            if (r) out = r->name;
            else {
                /* placeholder, filled in when the outer visit finishes */
                out = sift__js_add_rule(c, sn, sift__js_dupstr("\"\""));
            }
            sift__gx_free(sn);
            return out;
        }
    if (have) {
        sift__gx_free(sn);
        return have->name;
    }
    const cJSON *t = sift__js_resolve_pointer(c, ref);
    if (!t) {
        sift__gx_free(sn);
        return NULL;
    }
    if (c->n_resolving >= JS_MAX_DEPTH) {
        sift__gx_free(sn);
        return sift__js_cfail(c, SIFT_E_INVAL, "$ref chain too deep");
    }
    c->resolving[c->n_resolving++] = ref;
    const char *inner = sift__js_visit(c, t, sn, NULL);
    c->n_resolving--;
    if (!inner) {
        sift__gx_free(sn);
        return NULL;
    }
    /* if a placeholder was created for recursion, make it the alias of the real rule */
    jrule *ph = sift__js_find_rule(c, sn);
    if (ph && strcmp(ph->name, inner)) {
        sift__gx_free(ph->body);
        ph->body = sift__js_dupstr(inner);
        if (!ph->body) {
            sift__gx_free(sn);
            return sift__js_coom(c);
        }
        sift__gx_free(sn);
        return ph->name;
    }
    sift__gx_free(sn);
    return inner;
}

/* Is name a key of the object o? */
static bool has_key(const cJSON *o, const char *name) { return o && cJSON_GetObjectItemCaseSensitive(o, name) != NULL; }

/* ---- allOf, and $ref beside other keywords ------------------------------------------------------ */

/* Does s have keywords beside $ref that constrain values? From 2019-09 on, $ref is an
 * applicator like the others ({"$ref": "#/$defs/a", "maxItems": 2} means both), so such a
 * schema is converted as the allOf of its target and its own keywords. */
bool sift__js_ref_has_siblings(const cJSON *s)
{
    for (const cJSON *k = s->child; k; k = k->next)
        if (strcmp(k->string, "$ref") && !sift__js_in_list(sift__js_annotations, k->string)) return true;
    return false;
}

#define FLAT_MAX 64   /* atomic parts of one allOf */
#define FLAT_DEPTH 16 /* $ref / allOf steps followed while flattening */

/* The atomic parts of schema p (every one must hold), appended to parts[*n]: the parts of
 * its allOf, then its $ref's target (followed through chains: a part that is only a $ref
 * to a $ref is its final target's keywords, not "anything"), then p itself when `own` and
 * it has keywords of its own (the merge skips its $ref and allOf). In draft-07 and earlier
 * a $ref overrides the keywords beside it, so p then stands for its target alone. `true`
 * adds nothing; `false` makes the schema match nothing. */
static bool flatten(conv *c, const cJSON *p, const cJSON **parts, int *n, bool own, int depth)
{
    if (depth > FLAT_DEPTH) return sift__js_cfail(c, SIFT_E_UNSUPPORTED, "allOf / $ref nested too deep to merge"), false;
    if (cJSON_IsTrue(p)) return true;
    if (cJSON_IsFalse(p)) {
        c->unsat = c->status == SIFT_OK;
        return sift__js_cfail(c, SIFT_E_INVAL, "allOf: a part is 'false': the schema matches nothing"), false;
    }
    if (!cJSON_IsObject(p)) return sift__js_cfail(c, SIFT_E_INVAL, "allOf: every part must be a schema"), false;
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(p, "$ref");
    if (ref && !cJSON_IsString(ref)) return sift__js_cfail(c, SIFT_E_INVAL, "'$ref' must be a string"), false;
    if (ref && c->ref_overrides) {
        const cJSON *t = sift__js_resolve_pointer(c, ref->valuestring);
        return t && flatten(c, t, parts, n, true, depth + 1);
    }
    const cJSON *all = cJSON_GetObjectItemCaseSensitive(p, "allOf");
    if (all && (!cJSON_IsArray(all) || !all->child)) return sift__js_cfail(c, SIFT_E_INVAL, "'allOf' must be a non-empty array"), false;
    for (const cJSON *q = all ? all->child : NULL; q; q = q->next)
        if (!flatten(c, q, parts, n, true, depth + 1)) return false;
    if (ref) {
        const cJSON *t = sift__js_resolve_pointer(c, ref->valuestring);
        if (!t || !flatten(c, t, parts, n, true, depth + 1)) return false;
    }
    if (!own) return true;
    for (const cJSON *k = p->child; k; k = k->next) {
        if (!strcmp(k->string, "$ref") || !strcmp(k->string, "allOf") || sift__js_in_list(sift__js_annotations, k->string)) continue;
        if (*n == FLAT_MAX) return sift__js_cfail(c, SIFT_E_UNSUPPORTED, "allOf: more than %d parts", FLAT_MAX), false;
        parts[(*n)++] = p;
        break;
    }
    return true;
}

/* Keywords whose meaning depends on others beside them: when one part has a dependent one
 * (FAM_*_DEP), no other part may have any of its family, else the plain merge would change
 * its meaning (additionalProperties covers the keys *its* schema does not declare; items
 * follows *its* prefixItems). The object merge (below) handles additionalProperties. */
static const char *const FAM_OBJ[] = {"properties", "patternProperties", "additionalProperties", "unevaluatedProperties", NULL};
static const char *const FAM_OBJ_DEP[] = {"patternProperties", "additionalProperties", "unevaluatedProperties", NULL};
static const char *const FAM_ARR[] = {"prefixItems", "items", "additionalItems", "unevaluatedItems", "contains", "minContains", "maxContains", NULL};
static const char *const FAM_ARR_DEP[] = {"items", "additionalItems", "unevaluatedItems", "minContains", "maxContains", NULL};
static const char *const LOWER[] = {"minLength", "minItems", "minProperties", "minimum", "exclusiveMinimum", NULL};
static const char *const UPPER[] = {"maxLength", "maxItems", "maxProperties", "maximum", "exclusiveMaximum", NULL};
static const char *const TYPE_NAMES[] = {"null", "boolean", "object", "array", "number", "string", "integer", NULL};
enum { T_NUMBER = 1u << 4, T_INTEGER = 1u << 6 };

static bool part_has(const cJSON *p, const char *const *l)
{
    for (const cJSON *k = p->child; k; k = k->next)
        if (sift__js_in_list(l, k->string)) return true;
    return false;
}

/* A type keyword as a set of TYPE_NAMES bits; false when it is not a valid one. */
static bool type_set(const cJSON *t, unsigned *out)
{
    *out = 0;
    const cJSON *one = cJSON_IsString(t) ? t : NULL;
    if (!one && !cJSON_IsArray(t)) return false;
    for (const cJSON *e = one ? one : t->child; e; e = one ? NULL : e->next) {
        int i = 0;
        while (TYPE_NAMES[i] && (!cJSON_IsString(e) || strcmp(TYPE_NAMES[i], e->valuestring))) i++;
        if (!TYPE_NAMES[i]) return false;
        *out |= 1u << i;
    }
    return true;
}

/* Both type keywords as one (integer is within number); NULL when a is not valid. */
static cJSON *type_meet(conv *c, const cJSON *a, const cJSON *b)
{
    unsigned x, y;
    if (!type_set(a, &x) || !type_set(b, &y)) return NULL;
    unsigned m = x & y;
    if (((x & T_NUMBER) && (y & T_INTEGER)) || ((y & T_NUMBER) && (x & T_INTEGER))) m |= T_INTEGER;
    if (m & T_NUMBER) m &= ~T_INTEGER;
    cJSON *out = cJSON_CreateArray();
    for (int i = 0; out && TYPE_NAMES[i]; i++)
        if ((m & (1u << i)) && !cJSON_AddItemToArray(out, cJSON_CreateString(TYPE_NAMES[i]))) {
            cJSON_Delete(out);
            out = NULL;
        }
    if (!out) sift__js_coom(c);
    return out;
}

/* The parts as one schema, when each keyword comes from one part or merges exactly: equal
 * values; type (the intersection; empty: nothing matches); required (the union); lower
 * bounds (the largest) and upper ones (the smallest); properties ({"allOf": [both]} per
 * name). NULL without an error when some keyword does not merge so (the object merge
 * below then decides), NULL with one on a failure. */
static cJSON *merge_flat(conv *c, const cJSON **parts, int n)
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            if (i != j && ((part_has(parts[i], FAM_OBJ_DEP) && part_has(parts[j], FAM_OBJ)) ||
                           (part_has(parts[i], FAM_ARR_DEP) && part_has(parts[j], FAM_ARR))))
                return NULL;
    cJSON *m = cJSON_CreateObject();
    if (!m) return sift__js_coom(c), NULL;
    for (int i = 0; i < n; i++) {
        for (const cJSON *k = parts[i]->child; k; k = k->next) {
            const char *kw = k->string;
            if (!strcmp(kw, "$ref") || !strcmp(kw, "allOf") || sift__js_in_list(sift__js_annotations, kw)) continue;
            /* draft-04's boolean exclusiveMinimum / exclusiveMaximum change the minimum /
             * maximum beside them: only within one part */
            if (n > 1 && (!strcmp(kw, "exclusiveMinimum") || !strcmp(kw, "exclusiveMaximum")) && cJSON_IsBool(k)) goto no;
            cJSON *have = cJSON_GetObjectItemCaseSensitive(m, kw);
            cJSON *nv = NULL;
            if (!have) {
                nv = cJSON_Duplicate(k, 1);
                if (!nv || !cJSON_AddItemToObject(m, kw, nv)) goto nomem;
                continue;
            }
            if (cJSON_Compare(have, k, true)) continue;
            if (!strcmp(kw, "type")) {
                if (!(nv = type_meet(c, have, k))) goto no;
                if (!nv->child) {
                    cJSON_Delete(nv);
                    cJSON_Delete(m);
                    c->unsat = c->status == SIFT_OK;
                    return sift__js_cfail(c, SIFT_E_INVAL, "allOf: the parts have no type in common: the schema matches nothing"), NULL;
                }
            } else if (!strcmp(kw, "required") && cJSON_IsArray(have) && cJSON_IsArray(k)) {
                for (const cJSON *r = k->child; r; r = r->next) {
                    bool dup = false;
                    for (const cJSON *h = have->child; h && !dup; h = h->next) dup = cJSON_Compare(h, r, true);
                    if (!dup && !cJSON_AddItemToArray(have, cJSON_Duplicate(r, 1))) goto nomem;
                }
                continue;
            } else if ((sift__js_in_list(LOWER, kw) || sift__js_in_list(UPPER, kw)) && cJSON_IsNumber(have) && cJSON_IsNumber(k)) {
                bool lower = sift__js_in_list(LOWER, kw);
                if (lower ? k->valuedouble > have->valuedouble : k->valuedouble < have->valuedouble) nv = cJSON_Duplicate(k, 1);
                else continue;
            } else if (!strcmp(kw, "properties") && cJSON_IsObject(have) && cJSON_IsObject(k)) {
                for (const cJSON *q = k->child; q; q = q->next) {
                    cJSON *hq = cJSON_GetObjectItemCaseSensitive(have, q->string);
                    if (hq && cJSON_Compare(hq, q, true)) continue;
                    cJSON *pv = NULL;
                    if (hq) {
                        pv = cJSON_CreateObject();
                        cJSON *list = pv ? cJSON_AddArrayToObject(pv, "allOf") : NULL;
                        if (!list || !cJSON_AddItemToArray(list, cJSON_Duplicate(hq, 1)) || !cJSON_AddItemToArray(list, cJSON_Duplicate(q, 1))) {
                            cJSON_Delete(pv);
                            goto nomem;
                        }
                    } else if (!(pv = cJSON_Duplicate(q, 1))) {
                        goto nomem;
                    }
                    if (!(hq ? cJSON_ReplaceItemInObjectCaseSensitive(have, q->string, pv) : cJSON_AddItemToObject(have, q->string, pv))) {
                        cJSON_Delete(pv);
                        goto nomem;
                    }
                }
                continue;
            } else {
                goto no;
            }
            if (!nv || !cJSON_ReplaceItemInObjectCaseSensitive(m, kw, nv)) {
                cJSON_Delete(nv);
                goto nomem;
            }
        }
    }
    return m;
nomem:
    cJSON_Delete(m);
    return sift__js_coom(c), NULL;
no:
    cJSON_Delete(m);
    return NULL;
}

/* ---- rewrites before the visit: keywords that are no-ops, or another keyword in disguise ------- */

static bool only_annotations_and(const cJSON *s, const char *key)
{
    for (const cJSON *k = s->child; k; k = k->next)
        if ((!key || strcmp(k->string, key)) && !sift__js_in_list(sift__js_annotations, k->string)) return false;
    return true;
}

/* s rewritten without keywords that say nothing or say what another keyword says, or NULL
 * when nothing applies (s is then visited as it is); *unsat when s matches nothing:
 * - uniqueItems false; if without then / else; then / else without if: no constraint;
 * - unevaluatedProperties / unevaluatedItems without an in-place applicator beside them:
 *   additionalProperties / items (nothing else evaluates those keys / items; dropped when
 *   that keyword is there, which evaluates every other one);
 * - not: `not false` nothing; `not true` / `not {}` everything (the schema matches nothing);
 *   `not {"not": S}` is S (an allOf part); `not {"type": T}` the other types (a type
 *   keyword beside it meets them), unless T excludes integers but not numbers (the
 *   non-integers are no type); `not {"required": [k, ...]}` an object without one of the
 *   keys (not_required). Any other `not` stays (and is refused). */
/* a non-empty list of at most 4 names */
static bool required_keys(const cJSON *nt)
{
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(nt, "required");
    if (!cJSON_IsArray(r) || !r->child || cJSON_GetArraySize(r) > 4) return false;
    for (const cJSON *q = r->child; q; q = q->next)
        if (!cJSON_IsString(q)) return false;
    return true;
}

/* m's `not {"required": [k, ...]}` (non-objects match the required list, so the not takes
 * them away): an object where one of the keys is absent, the key declared false (one key),
 * or anyOf one piece per key. */
static bool not_required(conv *c, cJSON *m, bool *unsat)
{
    cJSON *sub = cJSON_DetachItemFromObjectCaseSensitive(m, "not");
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(sub, "required");
    const cJSON *have = cJSON_GetObjectItemCaseSensitive(m, "type");
    cJSON *obj = cJSON_CreateString("object"), *t = !obj ? NULL : have ? type_meet(c, have, obj) : cJSON_CreateString("object");
    cJSON_Delete(obj);
    bool ok = t != NULL;
    if (ok && cJSON_IsArray(t) && !t->child) *unsat = true, ok = false;
    if (ok && !(have ? cJSON_ReplaceItemInObjectCaseSensitive(m, "type", t) : cJSON_AddItemToObject(m, "type", t))) ok = false;
    else t = NULL;
    cJSON *alts = ok && cJSON_GetArraySize(r) > 1 ? cJSON_AddArrayToObject(m, "anyOf") : NULL;
    for (const cJSON *q = ok ? r->child : NULL; q && ok; q = q->next) {
        cJSON *piece = alts ? cJSON_CreateObject() : m;
        cJSON *props = piece ? cJSON_GetObjectItemCaseSensitive(piece, "properties") : NULL;
        if (piece && !props) props = cJSON_AddObjectToObject(piece, "properties");
        if (props) cJSON_DeleteItemFromObjectCaseSensitive(props, q->valuestring);
        ok = props && cJSON_AddItemToObject(props, q->valuestring, cJSON_CreateFalse()) && (!alts || cJSON_AddItemToArray(alts, piece));
        if (!ok && alts) cJSON_Delete(piece);
        if (!alts && requires_key(m, q->valuestring)) *unsat = true, ok = false;
    }
    if (!ok && !*unsat && c->status == SIFT_OK) sift__js_coom(c);
    cJSON_Delete(t);
    cJSON_Delete(sub);
    return ok;
}

cJSON *sift__js_simplify(conv *c, const cJSON *s, bool *unsat)
{
    *unsat = false;
    const cJSON *uq = cJSON_GetObjectItemCaseSensitive(s, "uniqueItems");
    const cJSON *iff = cJSON_GetObjectItemCaseSensitive(s, "if");
    const cJSON *thn = cJSON_GetObjectItemCaseSensitive(s, "then"), *els = cJSON_GetObjectItemCaseSensitive(s, "else");
    const cJSON *nt = cJSON_GetObjectItemCaseSensitive(s, "not");
    bool drop_uq = cJSON_IsFalse(uq), drop_if = iff && !thn && !els, drop_te = !iff && (thn || els);
    bool not_ok = false, not_req = false;
    unsigned tset = 0;
    if (nt) {
        if (cJSON_IsFalse(nt)) not_ok = true;
        else if (cJSON_IsTrue(nt) || (cJSON_IsObject(nt) && only_annotations_and(nt, NULL))) return *unsat = true, NULL;
        else if (cJSON_IsObject(nt) && only_annotations_and(nt, "not") && cJSON_GetObjectItemCaseSensitive(nt, "not")) not_ok = true;
        else if (cJSON_IsObject(nt) && only_annotations_and(nt, "required") && required_keys(nt) && !cJSON_GetObjectItemCaseSensitive(s, "anyOf") &&
                 !cJSON_GetObjectItemCaseSensitive(s, "oneOf"))
            not_req = true;
        else if (cJSON_IsObject(nt) && only_annotations_and(nt, "type") && type_set(cJSON_GetObjectItemCaseSensitive(nt, "type"), &tset)) {
            if (tset & T_NUMBER) tset |= T_INTEGER;
            not_ok = !((tset & T_INTEGER) && !(tset & T_NUMBER));
        }
    }
    /* unevaluatedProperties / unevaluatedItems with no in-place applicator beside them: the
     * keys (items) nothing else evaluated are exactly additionalProperties' (items') */
    static const char *const applicators[] = {"allOf", "anyOf", "oneOf", "not", "if", "then", "else", "$ref", "$dynamicRef",
                                              "$recursiveRef", "dependentSchemas", "dependencies", NULL};
    bool in_place = c->ref_overrides; /* draft-07 and earlier: unevaluated* is no keyword (refused) */
    for (const cJSON *k = s->child; k && !in_place; k = k->next) in_place = sift__js_in_list(applicators, k->string);
    bool ue_p = !in_place && cJSON_GetObjectItemCaseSensitive(s, "unevaluatedProperties");
    bool ue_i = !in_place && cJSON_GetObjectItemCaseSensitive(s, "unevaluatedItems") && !cJSON_GetObjectItemCaseSensitive(s, "contains");
    if (!drop_uq && !drop_if && !drop_te && !not_ok && !ue_p && !ue_i && !not_req) return NULL;
    cJSON *m = cJSON_Duplicate(s, 1);
    if (!m) return sift__js_coom(c), NULL;
    if (not_req && !not_required(c, m, unsat)) {
        cJSON_Delete(m);
        return NULL; /* unsat, or out of memory (the error is set) */
    }
    if (ue_p) {
        cJSON *u = cJSON_DetachItemFromObjectCaseSensitive(m, "unevaluatedProperties");
        if (cJSON_GetObjectItemCaseSensitive(m, "additionalProperties")) cJSON_Delete(u);
        else cJSON_AddItemToObject(m, "additionalProperties", u);
    }
    if (ue_i) { /* after a tuple (prefixItems, or 2019-09's items array): the items past it */
        cJSON *u = cJSON_DetachItemFromObjectCaseSensitive(m, "unevaluatedItems");
        const char *into = cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(m, "items")) ? "additionalItems" : "items";
        if (cJSON_GetObjectItemCaseSensitive(m, into)) cJSON_Delete(u);
        else cJSON_AddItemToObject(m, into, u);
    }
    if (drop_uq) cJSON_DeleteItemFromObjectCaseSensitive(m, "uniqueItems");
    if (drop_if) cJSON_DeleteItemFromObjectCaseSensitive(m, "if");
    if (drop_te) cJSON_DeleteItemFromObjectCaseSensitive(m, "then"), cJSON_DeleteItemFromObjectCaseSensitive(m, "else");
    if (not_ok) {
        cJSON *sub = cJSON_DetachItemFromObjectCaseSensitive(m, "not");
        if (cJSON_IsObject(sub) && cJSON_GetObjectItemCaseSensitive(sub, "not")) {
            cJSON *inner = cJSON_DetachItemFromObjectCaseSensitive(sub, "not");
            cJSON *all = cJSON_GetObjectItemCaseSensitive(m, "allOf");
            if (!all) all = cJSON_AddArrayToObject(m, "allOf");
            if (!cJSON_IsArray(all) || !cJSON_AddItemToArray(all, inner)) {
                cJSON_Delete(inner);
                cJSON_Delete(sub);
                cJSON_Delete(m);
                return sift__js_coom(c), NULL;
            }
        } else if (cJSON_IsObject(sub)) {
            cJSON *other = cJSON_CreateArray();
            for (int i = 0; other && TYPE_NAMES[i]; i++)
                if (!(tset & (1u << i)) && !cJSON_AddItemToArray(other, cJSON_CreateString(TYPE_NAMES[i]))) {
                    cJSON_Delete(other);
                    other = NULL;
                }
            const cJSON *have = cJSON_GetObjectItemCaseSensitive(m, "type");
            cJSON *t = !other ? NULL : have ? type_meet(c, have, other) : cJSON_Duplicate(other, 1);
            cJSON_Delete(other);
            if (!t) {
                cJSON_Delete(sub);
                cJSON_Delete(m);
                return have ? NULL : (sift__js_coom(c), NULL); /* an invalid type beside: visited as it is */
            }
            if (!t->child) {
                cJSON_Delete(t);
                cJSON_Delete(sub);
                cJSON_Delete(m);
                return *unsat = true, NULL;
            }
            if (!(have ? cJSON_ReplaceItemInObjectCaseSensitive(m, "type", t) : cJSON_AddItemToObject(m, "type", t))) {
                cJSON_Delete(t);
                cJSON_Delete(sub);
                cJSON_Delete(m);
                return sift__js_coom(c), NULL;
            }
        }
        cJSON_Delete(sub);
    }
    return m;
}

/* allOf (and $ref beside other keywords): every part must hold. The parts are flattened
 * (flatten) and merged into one schema: first keyword by keyword (merge_flat), else as
 * objects, exactly or refused:
 * - a property declared by several parts with different schemas gets {"allOf": [those]};
 * - required names add up;
 * - a part's additionalProperties covers the keys that part does not declare: false drops
 *   the other parts' properties (a required one makes the schema match nothing), a schema
 *   there also holds for the other parts' properties ({"allOf": [theirs, it]});
 * - enum (one part) and type object; any other keyword in a part is refused, naming it.
 * llama.cpp's converter merges the parts' properties only; SIFT_JSON_SCHEMA_LLAMA keeps that
 * reading of the schema's own keywords (they are ignored there). */
const char *sift__js_visit_all_of(conv *c, const cJSON *s, const char *name, const char *rule_name)
{
    const bool llama = (c->flags & SIFT_JSON_SCHEMA_LLAMA) != 0;
    const cJSON **parts = calloc(FLAT_MAX, sizeof *parts);
    cJSON *props = cJSON_CreateObject(), *req = cJSON_CreateArray();
    cJSON *additional = NULL;
    bool objectish = true;
    const cJSON *enums = NULL;
    const char *out = NULL;
    int np = 0;
    if (!props || !req || !parts) {
        sift__js_coom(c);
        goto done;
    }
    /* the schema's own keywords last: the parts are usually base schemas, so their
     * properties come first, as a derived class lists its fields */
    if (!flatten(c, s, parts, &np, !llama, 0)) goto done;
    cJSON *flat = merge_flat(c, parts, np);
    if (flat) {
        out = sift__js_visit(c, flat, name, NULL);
        cJSON_Delete(flat);
        goto done;
    }
    for (int i = 0; i < np && c->status == SIFT_OK; i++) {
        const cJSON *p = parts[i];
        const bool self = p == s;
        const cJSON *pp = cJSON_GetObjectItemCaseSensitive(p, "properties");
        if (pp && !cJSON_IsObject(pp)) {
            sift__js_cfail(c, SIFT_E_INVAL, "allOf: 'properties' must be an object");
            break;
        }
        for (const cJSON *q = pp ? pp->child : NULL; q && c->status == SIFT_OK; q = q->next) {
            cJSON *have = cJSON_GetObjectItemCaseSensitive(props, q->string);
            if (have && cJSON_Compare(have, q, true)) continue; /* the same schema twice */
            cJSON *merged;
            if (have) { /* both must hold: {"allOf": [earlier, this]} */
                merged = cJSON_CreateObject();
                cJSON *list = merged ? cJSON_AddArrayToObject(merged, "allOf") : NULL;
                if (!list || !cJSON_AddItemToArray(list, cJSON_Duplicate(have, 1)) || !cJSON_AddItemToArray(list, cJSON_Duplicate(q, 1))) {
                    cJSON_Delete(merged);
                    sift__js_coom(c);
                    break;
                }
            } else if (!(merged = cJSON_Duplicate(q, 1))) {
                sift__js_coom(c);
                break;
            }
            bool ok = have ? cJSON_ReplaceItemInObjectCaseSensitive(props, q->string, merged)
                           : cJSON_AddItemToObject(props, q->string, merged);
            if (!ok) { /* the item was not taken: it is still ours */
                cJSON_Delete(merged);
                sift__js_coom(c);
                break;
            }
        }
        const cJSON *rq = cJSON_GetObjectItemCaseSensitive(p, "required");
        for (const cJSON *q = rq ? rq->child : NULL; q; q = q->next)
            if (cJSON_IsString(q)) cJSON_AddItemToArray(req, cJSON_CreateString(q->valuestring));
        const cJSON *en = cJSON_GetObjectItemCaseSensitive(p, "enum");
        if (en) {
            if (enums) {
                sift__js_cfail(c, SIFT_E_UNSUPPORTED, "allOf with more than one enum");
                break;
            }
            enums = en;
        }
        const cJSON *ty = cJSON_GetObjectItemCaseSensitive(p, "type");
        if (ty && !(cJSON_IsString(ty) && !strcmp(ty->valuestring, "object"))) objectish = false;
        for (const cJSON *k = p->child; k; k = k->next) {
            const char *kw = k->string;
            if (!strcmp(kw, "properties") || !strcmp(kw, "required") || !strcmp(kw, "additionalProperties") ||
                !strcmp(kw, "type") || !strcmp(kw, "$ref") || !strcmp(kw, "enum") || sift__js_in_list(sift__js_annotations, kw) ||
                !strcmp(kw, "allOf"))
                continue;
            if (!(c->flags & SIFT_JSON_SCHEMA_LENIENT)) {
                sift__js_cfail(c, SIFT_E_UNSUPPORTED, "allOf: keyword '%s' %s cannot be merged", kw, self ? "beside allOf" : "in a part");
                break;
            }
        }
    }
    /* additionalProperties, part by part: first the closed parts (false), which take away
     * every key they do not declare, then the parts with a schema there. */
    for (int pass = 0; pass < 2 && c->status == SIFT_OK; pass++) {
        for (int i = 0; i < np && c->status == SIFT_OK; i++) {
            const cJSON *ad = cJSON_GetObjectItemCaseSensitive(parts[i], "additionalProperties");
            if (!ad || cJSON_IsTrue(ad) || (cJSON_IsObject(ad) && !ad->child)) continue; /* anything */
            if (cJSON_IsFalse(ad) != (pass == 0)) continue;
            const cJSON *own = cJSON_GetObjectItemCaseSensitive(parts[i], "properties");
            for (cJSON *q = props->child, *next; q && c->status == SIFT_OK; q = next) {
                next = q->next;
                if (has_key(own, q->string)) continue;
                if (pass == 1) { /* that part's additionalProperties holds for this key too */
                    cJSON *both = cJSON_CreateObject();
                    cJSON *list = both ? cJSON_AddArrayToObject(both, "allOf") : NULL;
                    if (!list || !cJSON_AddItemToArray(list, cJSON_Duplicate(q, 1)) || !cJSON_AddItemToArray(list, cJSON_Duplicate(ad, 1)) ||
                        !cJSON_ReplaceItemInObjectCaseSensitive(props, q->string, both)) {
                        cJSON_Delete(both);
                        sift__js_coom(c);
                    }
                    continue;
                }
                for (const cJSON *r = req->child; r; r = r->next)
                    if (!strcmp(r->valuestring, q->string)) {
                        c->unsat = true;
                        sift__js_cfail(c, SIFT_E_INVAL, "allOf: '%s' is required but a part's additionalProperties false forbids it: the schema matches nothing",
                              q->string);
                        break;
                    }
                cJSON_DeleteItemFromObjectCaseSensitive(props, q->string);
            }
            if (c->status != SIFT_OK) break;
            if (pass == 0) {
                cJSON_Delete(additional);
                additional = cJSON_CreateFalse();
            } else if (!additional) {
                additional = cJSON_Duplicate(ad, 1);
            } else if (!cJSON_IsFalse(additional) && !cJSON_Compare(additional, ad, true)) {
                sift__js_cfail(c, SIFT_E_UNSUPPORTED, "allOf: two parts with different additionalProperties schemas");
            }
        }
    }
    if (c->status == SIFT_OK) {
        if (enums && !cJSON_GetArraySize(props)) {
            cJSON *only = cJSON_CreateObject();
            if (only && cJSON_AddItemToObject(only, "enum", cJSON_Duplicate(enums, 1))) out = sift__js_visit(c, only, name, NULL);
            else sift__js_coom(c);
            cJSON_Delete(only);
        } else if (!objectish || enums) {
            sift__js_cfail(c, SIFT_E_UNSUPPORTED, "allOf: only object parts (or one enum) can be merged");
        } else {
            out = sift__js_build_object(c, props, req, additional, NULL, name, rule_name, 0, -1);
        }
    }
done:
    free(parts);
    cJSON_Delete(props);
    cJSON_Delete(req);
    cJSON_Delete(additional);
    return out;
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
        if (!sift__js_in_list(obj, k->string) && !sift__js_in_list(sift__js_annotations, k->string)) return false;
    return true;
}

/* only `type` (a name or a list) and annotations, and `not` of it is a set of types: the
 * complement of a type set is one unless it would be "numbers that are not integers" */
static bool type_only(const cJSON *p)
{
    unsigned t = 0;
    if (!cJSON_IsObject(p) || !only_annotations_and(p, "type") || !type_set(cJSON_GetObjectItemCaseSensitive(p, "type"), &t)) return false;
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
    type_set(cJSON_GetObjectItemCaseSensitive(not_of, "type"), &t);
    if (t & T_NUMBER) t |= T_INTEGER;
    cJSON *n = cJSON_AddObjectToObject(e, "s"), *other = n ? cJSON_AddArrayToObject(n, "type") : NULL;
    for (int i = 0; other && TYPE_NAMES[i]; i++)
        if (!(t & (1u << i)) && !cJSON_AddItemToArray(other, cJSON_CreateString(TYPE_NAMES[i]))) return false;
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
        t = type_meet(c, cJSON_GetObjectItemCaseSensitive(had, "type"), cJSON_GetObjectItemCaseSensitive(sch, "type"));
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
        if (!strcmp(k->string, "type") || !strcmp(k->string, "required") || sift__js_in_list(sift__js_annotations, k->string)) continue;
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
cJSON *sift__js_one_of_pieces(conv *c, const cJSON *const *alts, int n)
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
    for (int i = 0; i < n && c->status == SIFT_OK; i++) {
        if (!cur[i]) continue;
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
                    apart = !cJSON_GetObjectItemCaseSensitive(q, "s") && requires_key(p, cJSON_GetObjectItemCaseSensitive(q, "k")->valuestring);
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
                    if (!rq || !typed || (!requires_key(d, k) && !cJSON_AddItemToArray(rq, cJSON_CreateString(k))) || !cJSON_AddItemToArray(next, d)) {
                        cJSON_Delete(d);
                        cJSON_Delete(next);
                        next = NULL;
                    }
                }
                for (const cJSON *k = req->child; next && k; k = k->next) {
                    if (requires_key(p, k->valuestring)) continue; /* it matches j whenever it matches */
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
