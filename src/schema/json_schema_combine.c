/*
 * json_schema_combine.c - the combinators of the JSON schema converter: anyOf / oneOf's
 * alternatives with the keywords beside them (with_siblings), $ref (JSON pointers into this
 * document, recursive references as recursive rules) and allOf (the parts merged into one
 * object schema, or distributed over a part's anyOf / oneOf, exactly or refused), and the
 * rewrites of keywords that are no-ops or another keyword in disguise (simplify).
 * They live together because each rewrites schemas into other schemas before the keyword
 * visitors see them: the soundness rules of those rewrites must be read side by side. Which
 * oneOf alternatives may overlap, and the pieces that keep them apart, are in
 * json_schema_one_of.c. See json_schema.c for the whole converter's design.
 */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schema/json_schema_int.h"

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
            cJSON *t = sift__js_type_meet(c, have, k);
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
    char *seg = sift__gx_malloc(strlen(p) + 1); /* a segment, unescaped (never longer than the text) */
    if (!seg) return sift__js_coom(c), NULL;
    while (*p == '/' && t) {
        p++;
        size_t k = 0;
        while (*p && *p != '/') {
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
    }
    sift__gx_free(seg);
    if (!t) return sift__js_cfail(c, SIFT_E_INVAL, "$ref '%s' does not resolve", ref), NULL;
    if (*p) return sift__js_cfail(c, SIFT_E_INVAL, "$ref '%s' is not a JSON pointer", ref), NULL;
    return t;
}

/* ---- $ref: one rule per reference ---------------------------------------------------------- */

/* The rule of each $ref, found by the reference's own text. Rule names are sanitized (every
 * run of punctuation becomes one '-'), so "#/definitions/a.b" and "#/definitions/a_b" both
 * want ref-definitions-a-b: looked up by that name, the second reference would get the first
 * one's rule, a string where an integer was asked for (a false accept). An open-addressing
 * table keyed by the reference's text, with the rule name it got. */
struct jref {
    char *ref;        /* NULL: an empty slot */
    const char *rule; /* owned by the rule table */
    uint64_t hash;
};

static struct jref *ref_slot(const conv *c, const char *ref, uint64_t h)
{
    for (size_t k = h & (c->refs_cap - 1);; k = (k + 1) & (c->refs_cap - 1)) {
        struct jref *e = &c->refs[k];
        if (!e->ref || (e->hash == h && !strcmp(e->ref, ref))) return e;
    }
}

static const char *ref_rule(const conv *c, const char *ref, uint64_t h)
{
    return c->refs_cap ? ref_slot(c, ref, h)->rule : NULL;
}

/* Record (or change) ref's rule; false on OOM. */
static bool ref_put(conv *c, const char *ref, uint64_t h, const char *rule)
{
    if ((c->n_refs + 1) * 2 > c->refs_cap) {
        const size_t nc = c->refs_cap ? c->refs_cap * 2 : 32;
        struct jref *t = sift__gx_calloc(nc, sizeof *t), *old = c->refs;
        if (!t) return false;
        const size_t oc = c->refs_cap;
        c->refs = t;
        c->refs_cap = nc;
        for (size_t i = 0; i < oc; i++)
            if (old[i].ref) *ref_slot(c, old[i].ref, old[i].hash) = old[i];
        sift__gx_free(old);
    }
    struct jref *e = ref_slot(c, ref, h);
    if (!e->ref) {
        if (!(e->ref = sift__js_dupstr(ref))) return false;
        e->hash = h;
        c->n_refs++;
    }
    e->rule = rule;
    return true;
}

void sift__js_refs_free(conv *c)
{
    for (size_t i = 0; i < c->refs_cap; i++) sift__gx_free(c->refs[i].ref);
    sift__gx_free(c->refs);
    c->refs = NULL;
    c->n_refs = c->refs_cap = 0;
}

const char *sift__js_visit_ref(conv *c, const char *ref)
{
    /* only '#...' pointers name a rule; resolve_pointer() words the error for the rest
     * (and "" must not reach the name below: ref + 1 would be past its end) */
    if (ref[0] != '#') return (void)sift__js_resolve_pointer(c, ref), NULL;
    const uint64_t h = sift__gx_hash_bytes(ref, strlen(ref));
    const char *have = ref_rule(c, ref, h); /* its rule, or the placeholder of a recursion */
    for (int i = 0; i < c->n_resolving; i++)
        if (!strcmp(c->resolving[i], ref)) {
            /* recursion: reference the rule that is being built, through a placeholder of
             * its own (never shared with another reference's), filled in when the outer
             * visit finishes */
            c->ref_cycle = true;
            if (have) return have;
            char nm[300];
            snprintf(nm, sizeof nm, "ref%s", ref + 1);
            const char *ph = sift__js_add_rule_new(c, nm, sift__js_dupstr("\"\""));
            if (ph && !ref_put(c, ref, h, ph)) return sift__js_coom(c);
            return ph;
        }
    if (have) return have;
    const cJSON *t = sift__js_resolve_pointer(c, ref);
    if (!t) return NULL;
    if (c->n_resolving >= JS_MAX_DEPTH) return sift__js_cfail(c, SIFT_E_INVAL, "$ref chain too deep");
    /* the rule of a reference is named after it: ref-defs-Name (numbered where taken) */
    char nm[300];
    snprintf(nm, sizeof nm, "ref%s", ref + 1);
    char *sn = sift__js_sanitize(nm);
    if (!sn) return sift__js_coom(c);
    c->resolving[c->n_resolving++] = ref;
    const char *inner = sift__js_visit(c, t, sn, NULL);
    c->n_resolving--;
    sift__gx_free(sn);
    if (!inner) return NULL;
    /* a placeholder made for a recursion becomes the alias of the real rule */
    const char *ph = ref_rule(c, ref, h);
    if (ph && strcmp(ph, inner)) {
        jrule *r = sift__js_rule_written(c, ph);
        sift__gx_free(r->body);
        if (!(r->body = sift__js_dupstr(inner))) return sift__js_coom(c);
        return ph;
    }
    if (!ref_put(c, ref, h, inner)) return sift__js_coom(c);
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
const char *const sift__js_type_names[] = {"null", "boolean", "object", "array", "number", "string", "integer", NULL};

static bool part_has(const cJSON *p, const char *const *l)
{
    for (const cJSON *k = p->child; k; k = k->next)
        if (sift__js_in_list(l, k->string)) return true;
    return false;
}

/* A type keyword as a set of sift__js_type_names bits; false when it is not a valid one. */
bool sift__js_type_set(const cJSON *t, unsigned *out)
{
    *out = 0;
    const cJSON *one = cJSON_IsString(t) ? t : NULL;
    if (!one && !cJSON_IsArray(t)) return false;
    for (const cJSON *e = one ? one : t->child; e; e = one ? NULL : e->next) {
        int i = 0;
        while (sift__js_type_names[i] && (!cJSON_IsString(e) || strcmp(sift__js_type_names[i], e->valuestring))) i++;
        if (!sift__js_type_names[i]) return false;
        *out |= 1u << i;
    }
    return true;
}

/* Both type keywords as one (integer is within number); NULL when a is not valid. */
cJSON *sift__js_type_meet(conv *c, const cJSON *a, const cJSON *b)
{
    unsigned x, y;
    if (!sift__js_type_set(a, &x) || !sift__js_type_set(b, &y)) return NULL;
    unsigned m = x & y;
    if (((x & T_NUMBER) && (y & T_INTEGER)) || ((y & T_NUMBER) && (x & T_INTEGER))) m |= T_INTEGER;
    if (m & T_NUMBER) m &= ~T_INTEGER;
    cJSON *out = cJSON_CreateArray();
    for (int i = 0; out && sift__js_type_names[i]; i++)
        if ((m & (1u << i)) && !cJSON_AddItemToArray(out, cJSON_CreateString(sift__js_type_names[i]))) {
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
                if (!(nv = sift__js_type_meet(c, have, k))) goto no;
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

bool sift__js_only_annotations_and(const cJSON *s, const char *key)
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
    cJSON *obj = cJSON_CreateString("object"), *t = !obj ? NULL : have ? sift__js_type_meet(c, have, obj) : cJSON_CreateString("object");
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
        if (!alts && sift__js_requires_key(m, q->valuestring)) *unsat = true, ok = false;
    }
    if (!ok && !*unsat && c->status == SIFT_OK) sift__js_coom(c);
    cJSON_Delete(t);
    cJSON_Delete(sub);
    return ok;
}

/* any other `not S`: S's complement (json_schema_not.c), when it can be written, as an allOf
 * part beside the rest of the schema; NULL (visited as it is, and refused) when it cannot */
static cJSON *not_by_complement(conv *c, const cJSON *s, const cJSON *nt, bool *unsat)
{
    cJSON *comp = sift__js_complement(c, nt);
    if (!comp) return NULL;
    if (cJSON_IsFalse(comp)) return cJSON_Delete(comp), *unsat = true, NULL;
    cJSON *rest = cJSON_Duplicate(s, 1);
    if (rest) cJSON_DeleteItemFromObjectCaseSensitive(rest, "not");
    if (rest && cJSON_IsTrue(comp)) return cJSON_Delete(comp), rest; /* S matches nothing */
    if (rest && sift__js_only_annotations_and(rest, NULL)) return cJSON_Delete(rest), comp;
    cJSON *m = rest ? cJSON_CreateObject() : NULL, *all = m ? cJSON_AddArrayToObject(m, "allOf") : NULL;
    if (!all || !cJSON_AddItemToArray(all, rest)) {
        cJSON_Delete(m);
        cJSON_Delete(rest);
        cJSON_Delete(comp);
        return sift__js_coom(c), NULL;
    }
    if (!cJSON_AddItemToArray(all, comp)) {
        cJSON_Delete(m);
        cJSON_Delete(comp);
        return sift__js_coom(c), NULL;
    }
    return m;
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
        else if (cJSON_IsTrue(nt) || (cJSON_IsObject(nt) && sift__js_only_annotations_and(nt, NULL))) return *unsat = true, NULL;
        else if (cJSON_IsObject(nt) && sift__js_only_annotations_and(nt, "not") && cJSON_GetObjectItemCaseSensitive(nt, "not")) not_ok = true;
        else if (cJSON_IsObject(nt) && sift__js_only_annotations_and(nt, "required") && required_keys(nt) && !cJSON_GetObjectItemCaseSensitive(s, "anyOf") &&
                 !cJSON_GetObjectItemCaseSensitive(s, "oneOf"))
            not_req = true;
        else if (cJSON_IsObject(nt) && sift__js_only_annotations_and(nt, "type") && sift__js_type_set(cJSON_GetObjectItemCaseSensitive(nt, "type"), &tset)) {
            if (tset & T_NUMBER) tset |= T_INTEGER;
            not_ok = !((tset & T_INTEGER) && !(tset & T_NUMBER));
        }
        if (!not_ok && !not_req) return not_by_complement(c, s, nt, unsat);
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
            for (int i = 0; other && sift__js_type_names[i]; i++)
                if (!(tset & (1u << i)) && !cJSON_AddItemToArray(other, cJSON_CreateString(sift__js_type_names[i]))) {
                    cJSON_Delete(other);
                    other = NULL;
                }
            const cJSON *have = cJSON_GetObjectItemCaseSensitive(m, "type");
            cJSON *t = !other ? NULL : have ? sift__js_type_meet(c, have, other) : cJSON_Duplicate(other, 1);
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
/* A part with anyOf (or oneOf) [B1, ..., Bm]: the allOf is anyOf (oneOf) [allOf [the other
 * parts, the part without it, Bj] for each j], exactly (A and exactly one Bj holds iff exactly
 * one of A-and-Bj does), and each of those merges on its own. The parts come flattened: their
 * own allOf / $ref are parts already, so the copies drop them. At most DIST_MAX alternatives. */
#define DIST_MAX 16
static const char *distribute(conv *c, const cJSON *const *parts, int np, const char *name, bool *applies)
{
    *applies = false;
    int at = -1;
    const char *kw = NULL;
    for (int i = 0; i < np && at < 0; i++)
        for (const char *const *k = (const char *const[]){"anyOf", "oneOf", NULL}; *k && at < 0; k++) {
            const cJSON *a = cJSON_GetObjectItemCaseSensitive(parts[i], *k);
            if (cJSON_IsArray(a) && a->child && cJSON_GetArraySize(a) <= DIST_MAX) at = i, kw = *k;
        }
    if (at < 0) return NULL;
    *applies = true;
    cJSON *top = cJSON_CreateObject(), *alts = top ? cJSON_AddArrayToObject(top, kw) : NULL;
    for (const cJSON *b = alts ? cJSON_GetObjectItemCaseSensitive(parts[at], kw)->child : NULL; b; b = b->next) {
        cJSON *one = cJSON_CreateObject(), *list = one ? cJSON_AddArrayToObject(one, "allOf") : NULL;
        for (int i = 0; list && i < np; i++) {
            cJSON *d = cJSON_Duplicate(parts[i], 1);
            if (d) {
                cJSON_DeleteItemFromObjectCaseSensitive(d, "allOf");
                cJSON_DeleteItemFromObjectCaseSensitive(d, "$ref");
                if (i == at) cJSON_DeleteItemFromObjectCaseSensitive(d, kw);
            }
            if (!d || !cJSON_AddItemToArray(list, d)) cJSON_Delete(d), list = NULL;
        }
        cJSON *bj = list ? cJSON_Duplicate(b, 1) : NULL;
        if (!bj || !cJSON_AddItemToArray(list, bj) || !cJSON_AddItemToArray(alts, one)) {
            if (!list || !bj) cJSON_Delete(bj);
            cJSON_Delete(one);
            alts = NULL;
            break;
        }
    }
    const char *out = alts ? sift__js_visit(c, top, name, NULL) : sift__js_coom(c);
    cJSON_Delete(top);
    return out;
}

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
    if (c->status == SIFT_OK && !llama && !(c->flags & SIFT_JSON_SCHEMA_LENIENT)) {
        bool applies = false;
        out = distribute(c, parts, np, name, &applies);
        if (applies) goto done;
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
                !strcmp(kw, "type") || !strcmp(kw, "$ref") || !strcmp(kw, "enum") || !sift__js_is_keyword(kw) || !strcmp(kw, "allOf"))
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

