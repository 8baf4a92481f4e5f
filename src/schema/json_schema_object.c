/*
 * json_schema_object.c - objects for the JSON schema converter: properties in any order
 * (small objects) or the schema's order or required-first (big ones), required / optional keys, the keys beside
 * the declared ones (additionalProperties, patternProperties: extra keys never spell a
 * declared name, so each text has one parse), min/maxProperties and dependentRequired.
 * The largest keyword family, and the one whose grammars grow fastest, so it is kept apart
 * from the driver; see json_schema.c for the whole converter's design.
 */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schema/json_schema_int.h"

long sift__js_get_count(conv *c, const cJSON *s, const char *key, long dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, key);
    if (!v) return dflt;
    /* range first: converting an out-of-range double to an integer is undefined */
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0 && v->valuedouble <= 1e9) ||
        v->valuedouble != (double)(long)v->valuedouble) {
        size_t o = sift__js_path_push(c, key);
        sift__js_cfail(c, SIFT_E_INVAL, "'%s' must be a non-negative integer", key);
        sift__js_path_pop(c, o);
        return -2;
    }
    return (long)v->valuedouble;
}

char *sift__js_join_name(const char *a, const char *b)
{
    /* memcpy, not snprintf: names here are 100+ characters, and snprintf was most of it */
    size_t na = strlen(a), nb = strlen(b), d = na ? 1 : 0;
    char *s = sift__gx_malloc(na + d + nb + 1);
    if (!s) return NULL;
    memcpy(s, a, na);
    s[na] = '-';
    memcpy(s + na + d, b, nb + 1);
    return s;
}

/* The keys of additional properties must differ from the declared ones: a rule matching
 * the JSON strings that are none of `names` (llama.cpp's _not_strings, over code points,
 * and without its flaw of also excluding every proper prefix of a name). */
void sift__js_ns_free(nsnode *t)
{
    while (t) {
        nsnode *n = t->next;
        sift__js_ns_free(t->kids);
        sift__gx_free(t);
        t = n;
    }
}

nsnode *sift__js_ns_child(nsnode *parent, uint32_t cp)
{
    nsnode **pp = &parent->kids;
    while (*pp && (*pp)->cp < cp) pp = &(*pp)->next;
    if (*pp && (*pp)->cp == cp) return *pp;
    nsnode *n = sift__gx_calloc(1, sizeof *n);
    if (!n) return NULL;
    n->cp = cp;
    n->next = *pp;
    *pp = n;
    return n;
}

/* The rule for JSON string contents that do not spell a name of the subtree below t (given
 * that the prefix leading to t matched): continue into a child (its own rule, so nothing
 * nests however long the names are), or with a character no child has. A child that is a
 * whole name must continue; one that is only a prefix may also stop. */
static const char *not_strings_rule(conv *c, const nsnode *t, const char *base, const char *char_rule, unsigned *counter)
{
    sift__gbnf_sbuf b = {0}, rejects = {0};
    bool first = true;
    for (const nsnode *k = t->kids; k && c->status == SIFT_OK; k = k->next) {
        char u[8];
        const size_t n = sift__utf8_encode(k->cp, u); /* core/utf8.h */
        sift__gbnf_put_class_char(&rejects, k->cp);
        if (k->all) continue; /* nothing that goes through k is left */
        if (!first) sift__gbnf_sb_puts(&b, " | ");
        first = false;
        sift__gbnf_put_literal(&b, u, n);
        if (k->kids) {
            const char *sub = not_strings_rule(c, k, base, char_rule, counter);
            if (!sub) break;
            sift__gbnf_sb_printf(&b, " %s%s", sub, k->end ? "" : "?");
        } else {
            sift__gbnf_sb_printf(&b, " %s+", char_rule);
        }
    }
    sift__gbnf_sb_printf(&b, "%s[^\"\\\\\\x00-\\x1F%s] %s*", first ? "" : " | ", rejects.s ? rejects.s : "", char_rule);
    sift__gbnf_sb_free(&rejects);
    if (c->status != SIFT_OK) {
        sift__gbnf_sb_free(&b);
        return NULL;
    }
    char nm[64];
    snprintf(nm, sizeof nm, "%u", (*counter)++);
    char *rn = sift__js_join_name(base, nm);
    const char *r = rn ? sift__js_add_rule(c, rn, sift__gbnf_sb_take(&b)) : sift__js_coom(c);
    sift__gx_free(rn);
    sift__gbnf_sb_free(&b);
    return r;
}

/* JSON Schema's object, in the schema's property order (what MaskBench and the other
 * engines generate), for objects too big for any_order_object: every property in its place,
 * the required ones present, optional ones skipped freely, other keys (when allowed)
 * anywhere between them. Two rules per position keep the commas right without nesting (a
 * 2,000-property schema is 4,000 small rules, not one expression); with E = ( "," x )* the
 * other keys after a declared one:
 *   first_k  nothing written yet, properties k.. to come:  kv_k E rest_k+1 (| first_k+1 if optional)
 *   rest_k   something written:  "," kv_k E rest_k+1  (optional: ( "," kv_k E )? rest_k+1)
 *   object   "{" ( first_0 | x E rest_0 ) "}"   (x: the other keys first)
 * Other keys never spell a declared one, so each text has one parse. Without declared
 * properties: ( x ("," x)* )?, or counted by min/maxProperties. */
static const char *ordered_object(conv *c, const char **kv, const bool *req, size_t n, const char *extra_kv,
                                  const char *rule_name, long min_props, long max_props)
{
    const char *first = NULL, *rest = NULL, *ext = NULL;
    sift__gbnf_sbuf b = {0};
    char nm[64];
    /* min_props at most 1 beside declared properties (max_props unset): "not empty" */
    bool nonempty = min_props > 0;
    for (size_t k = 0; k < n; k++) nonempty &= !req[k];
    if (nonempty && !extra_kv && n == 0)
        return (c->unsat = c->status == SIFT_OK, sift__js_cfail(c, SIFT_E_INVAL, "minProperties: no property is allowed: the schema matches nothing"));
    bool all_req = !extra_kv;
    for (size_t k = 0; k < n; k++) all_req &= req[k];
    if (!sift__js_use_builtin(c, "space")) return NULL;
    if (all_req) { /* a plain sequence */
        sift__gbnf_sb_puts(&b, "\"{\" space ");
        for (size_t k = 0; k < n; k++) sift__gbnf_sb_printf(&b, "%s%s", k ? " \",\" space " : "", kv[k]);
        sift__gbnf_sb_puts(&b, n ? " \"}\" space" : "\"}\" space");
        return sift__js_add_rule(c, rule_name, sift__gbnf_sb_take(&b));
    }
    if (extra_kv && n == 0) {
        /* only other keys: min/maxProperties count them */
        sift__gbnf_sb_puts(&b, "\"{\" space ");
        if (min_props > 0 || max_props >= 0) sift__gbnf_put_repetition(&b, extra_kv, min_props, max_props, "\",\" space");
        else sift__gbnf_sb_printf(&b, "( %s ( \",\" space %s )* )?", extra_kv, extra_kv);
        sift__gbnf_sb_puts(&b, " \"}\" space");
        return sift__js_add_rule(c, rule_name, sift__gbnf_sb_take(&b));
    }
    if (extra_kv) {
        sift__gbnf_sb_printf(&b, "( \",\" space %s )*", extra_kv);
        char *rn = sift__js_join_name(rule_name, "extras");
        ext = rn ? sift__js_add_rule(c, rn, sift__gbnf_sb_take(&b)) : sift__js_coom(c);
        sift__gx_free(rn);
        sift__gbnf_sb_free(&b);
    }
    for (size_t k = n; k-- > 0 && c->status == SIFT_OK;) {
        /* rest_k, also for k = 0 when other keys may come first */
        const char *nrest = NULL;
        char *rn;
        if (k == 0 && !ext) goto first_k;
        if (req[k]) sift__gbnf_sb_printf(&b, "\",\" space %s%s%s%s%s", kv[k], ext ? " " : "", ext ? ext : "", rest ? " " : "", rest ? rest : "");
        else sift__gbnf_sb_printf(&b, "( \",\" space %s%s%s )?%s%s", kv[k], ext ? " " : "", ext ? ext : "", rest ? " " : "", rest ? rest : "");
        snprintf(nm, sizeof nm, "p%zu-rest", k);
        rn = sift__js_join_name(rule_name, nm);
        nrest = rn ? sift__js_add_rule(c, rn, sift__gbnf_sb_take(&b)) : sift__js_coom(c);
        sift__gx_free(rn);
        sift__gbnf_sb_free(&b);
    first_k:
        sift__gbnf_sb_printf(&b, "%s%s%s%s%s", kv[k], ext ? " " : "", ext ? ext : "", rest ? " " : "", rest ? rest : "");
        if (!req[k] && (first || !nonempty)) sift__gbnf_sb_printf(&b, " | %s", first ? first : "\"\"");
        snprintf(nm, sizeof nm, "p%zu-first", k);
        rn = sift__js_join_name(rule_name, nm);
        first = rn ? sift__js_add_rule(c, rn, sift__gbnf_sb_take(&b)) : sift__js_coom(c);
        sift__gx_free(rn);
        sift__gbnf_sb_free(&b);
        rest = nrest;
    }
    if (c->status != SIFT_OK) return NULL;
    if (ext) sift__gbnf_sb_printf(&b, "\"{\" space ( %s | %s %s%s%s ) \"}\" space", first, extra_kv, ext, rest ? " " : "", rest ? rest : "");
    else sift__gbnf_sb_printf(&b, "\"{\" space %s \"}\" space", first ? first : "");
    return sift__js_add_rule(c, rule_name, sift__gbnf_sb_take(&b));
}

/* An object too big for any order (any_order_object) takes two: the schema's, or its
 * required keys first (in `required`'s order) and the others in the schema's order, the way
 * people and models often write them (MaskBench's valid instances: 6 of its 26 objects
 * rejected for their order were in this one). Each is a subset of the exact language, so the
 * union is too; the same as the schema's order: one. kn[] are kv[]'s names. */
static const char *two_orders(conv *c, const char **kv, const bool *req, const char **kn, size_t n, const char *x, const cJSON *required,
                              const char *rule_name, long min_props, long max_props)
{
    size_t *ord = sift__gx_calloc(n + 1, sizeof *ord), m = 0;
    bool *used = sift__gx_calloc(n + 1, sizeof *used), same = true;
    const char **kv2 = sift__gx_calloc(n + 1, sizeof *kv2);
    bool *req2 = sift__gx_calloc(n + 1, sizeof *req2);
    const char *r = NULL;
    if (!ord || !used || !kv2 || !req2) {
        r = sift__js_coom(c);
        goto done;
    }
    for (const cJSON *q = required ? required->child : NULL; q; q = q->next)
        for (size_t j = 0; j < n && cJSON_IsString(q); j++)
            if (!used[j] && req[j] && kn[j] && !strcmp(kn[j], q->valuestring)) {
                used[j] = true, ord[m++] = j;
                break;
            }
    for (size_t j = 0; j < n; j++)
        if (!used[j]) ord[m++] = j;
    for (size_t j = 0; j < n; j++) same &= ord[j] == j, kv2[j] = kv[ord[j]], req2[j] = req[ord[j]];
    if (same || n < 2) {
        r = ordered_object(c, kv, req, n, x, rule_name, min_props, max_props);
        goto done;
    }
    char *n1 = sift__js_join_name(rule_name, "schema-order"), *n2 = sift__js_join_name(rule_name, "required-first");
    const char *r1 = n1 && n2 ? ordered_object(c, kv, req, n, x, n1, min_props, max_props) : NULL;
    const char *r2 = r1 ? ordered_object(c, kv2, req2, n, x, n2, min_props, max_props) : NULL;
    sift__gx_free(n1);
    sift__gx_free(n2);
    if (r2) {
        sift__gbnf_sbuf b = {0};
        sift__gbnf_sb_printf(&b, "%s | %s", r1, r2);
        r = sift__js_add_rule(c, rule_name, sift__gbnf_sb_take(&b));
        sift__gbnf_sb_free(&b);
    } else if (c->status == SIFT_OK) {
        r = sift__js_coom(c);
    }
done:
    sift__gx_free(ord);
    sift__gx_free(used);
    sift__gx_free(kv2);
    sift__gx_free(req2);
    return r;
}

/* JSON Schema has no property order, so the exact grammar of an object takes its declared
 * keys in any order, each at most once, the required ones all present. A context-free
 * grammar for that needs a state per set of keys already written (the sets are the
 * language's Myhill-Nerode classes: no smaller grammar exists), so it is built only for
 * objects with at most ANY_ORDER_KEYS declared keys, and while the schema's whole budget of
 * ANY_ORDER_STATES states lasts; bigger objects take two orders (two_orders, ordered_object: a
 * documented departure that rejects, never accepts, more). One rule per set S (a bitmask):
 *   s_S  something written, the keys of S among them:
 *        x* ( "," kv_i s_{S+i}  for each i not in S, in the schema's order )  -- "?" when S can end
 * where x* is ( "," extra )* when other keys are allowed (they differ from every declared
 * key, so they never repeat one). S can end when it holds every required key and, for each
 * key in it, the keys its dependentRequired names (deps[i], a bitmask; NULL: none). The
 * object is "{" ( kv_i s_{i} | extra s_0 )? "}", the "?" when the empty object is allowed.
 * The schema's order comes first among the alternatives. */
/* measured on every 20th MaskBench schema (278): 8 keys / 4096 states made the grammars'
 * text 1.88x as long in all (the worst 16x), 7 / 1024 1.56x (worst 4.5x), 6 / 1024 1.50x
 * (worst 2.9x); 7 keeps 3 more of the 47 schemas whose valid instances were rejected */
#define ANY_ORDER_KEYS 7
#define ANY_ORDER_STATES 1024

static bool any_order_fits(conv *c, size_t n)
{
    if (n > ANY_ORDER_KEYS || c->any_order_states + ((size_t)1 << n) > ANY_ORDER_STATES) return false;
    c->any_order_states += (size_t)1 << n;
    return true;
}

static const char *any_order_object(conv *c, const char **kv, const bool *req, size_t n, const char *extra_kv,
                                    const uint32_t *deps, const char *rule_name, bool nonempty)
{
    const uint32_t full = (uint32_t)((1u << n) - 1);
    uint32_t need = 0;
    for (size_t i = 0; i < n; i++)
        if (req[i]) need |= 1u << i;
    const char **st = sift__gx_calloc((size_t)full + 1, sizeof *st);
    char *xs = NULL;
    if (!st || !sift__js_use_builtin(c, "space")) return sift__gx_free(st), st ? NULL : sift__js_coom(c);
    if (extra_kv) {
        size_t len = strlen(extra_kv) + 32;
        xs = sift__gx_malloc(len);
        if (!xs) return sift__gx_free(st), sift__js_coom(c);
        snprintf(xs, len, "( \",\" space %s )* ", extra_kv);
    }
    /* s_S refers to s_{S+i} > S: built from the full set down */
    for (uint32_t S = full + 1; S-- > 0 && c->status == SIFT_OK;) {
        bool can_end = (S & need) == need;
        for (size_t i = 0; i < n && can_end && deps; i++)
            if (S >> i & 1) can_end = (S & deps[i]) == deps[i];
        sift__gbnf_sbuf b = {0};
        sift__gbnf_sb_puts(&b, xs ? xs : "");
        bool any = false;
        for (size_t i = 0; i < n; i++) {
            if (S >> i & 1) continue;
            const char *next = st[S | 1u << i];
            sift__gbnf_sb_printf(&b, "%s\",\" space %s%s%s", any ? " | " : "( ", kv[i], next ? " " : "", next ? next : "");
            any = true;
        }
        if (any) sift__gbnf_sb_puts(&b, can_end ? " )?" : " )");
        if ((!any || S == 0) && !xs) { /* nothing more can come, or s_0 unused: no rule */
            sift__gbnf_sb_free(&b);
            continue;
        }
        char nm[32];
        snprintf(nm, sizeof nm, "s%x", (unsigned)S);
        char *rn = sift__js_join_name(rule_name, nm);
        st[S] = rn ? sift__js_add_rule(c, rn, sift__gbnf_sb_take(&b)) : sift__js_coom(c);
        sift__gx_free(rn);
        sift__gbnf_sb_free(&b);
    }
    const char *r = NULL;
    if (c->status == SIFT_OK) {
        bool empty_ok = !need && !nonempty;
        sift__gbnf_sbuf b = {0};
        sift__gbnf_sb_puts(&b, "\"{\" space ( ");
        for (size_t i = 0; i < n; i++) {
            const char *next = st[1u << i];
            sift__gbnf_sb_printf(&b, "%s%s%s%s", i ? " | " : "", kv[i], next ? " " : "", next ? next : "");
        }
        if (extra_kv) sift__gbnf_sb_printf(&b, "%s%s %s", n ? " | " : "", extra_kv, st[0]);
        sift__gbnf_sb_printf(&b, " )%s \"}\" space", empty_ok ? "?" : "");
        r = sift__js_add_rule(c, rule_name, sift__gbnf_sb_take(&b));
        sift__gbnf_sb_free(&b);
    }
    sift__gx_free(xs);
    sift__gx_free(st);
    return r;
}


/* ---- the keys beside the declared properties ---------------------------------------------------- */

typedef struct {
    const char *s;
    bool prefix; /* every key that starts with s */
} keyex;

/* The rule of the JSON string keys that are none of ex[0..n) (`string` when n is 0); NULL
 * with *none set when no key is left (an empty prefix), NULL with the error set otherwise. */
static const char *excluded_keys_rule(conv *c, const keyex *ex, size_t n, const char *sub, bool *none)
{
    *none = false;
    if (n == 0) return sift__js_use_builtin(c, "string");
    nsnode *t = sift__gx_calloc(1, sizeof *t);
    bool ok = t != NULL;
    for (size_t pi = 0; pi < n && ok; pi++) {
        nsnode *nd = t;
        sift__gx_utf8 u = {0};
        for (const unsigned char *q = (const unsigned char *)ex[pi].s; *q && ok; q++) {
            int32_t cp = sift__gx_utf8_feed(&u, *q);
            if (cp == GX_UTF8_MORE) continue;
            if (cp == GX_UTF8_BAD || cp < 0x20 || cp == '"' || cp == '\\') {
                if (!(c->flags & SIFT_JSON_SCHEMA_LENIENT)) {
                    sift__js_cfail(c, SIFT_E_UNSUPPORTED, "property name '%s' (escapes or invalid UTF-8) with additionalProperties", ex[pi].s);
                    ok = false;
                    break;
                }
                continue;
            }
            if (!(nd = sift__js_ns_child(nd, (uint32_t)cp))) ok = false;
        }
        if (ok) {
            nd->end = true;
            nd->all |= ex[pi].prefix;
        }
    }
    const char *key_rule = NULL;
    if (ok && t->all) {
        *none = true;
    } else if (ok) {
        const char *char_rule = sift__js_use_builtin(c, "char");
        char *kn = sift__js_join_name(sub, "k");
        if (char_rule && kn && sift__js_use_builtin(c, "space")) {
            unsigned counter = 0;
            const char *body_rule = not_strings_rule(c, t, kn, char_rule, &counter);
            if (body_rule) {
                sift__gbnf_sbuf b = {0};
                sift__gbnf_sb_printf(&b, "\"\\\"\" %s%s \"\\\"\" space", body_rule, t->end ? "" : "?");
                key_rule = sift__js_add_rule(c, kn, sift__gbnf_sb_take(&b));
                sift__gbnf_sb_free(&b);
            }
        } else if (!kn) {
            sift__js_coom(c);
        }
        sift__gx_free(kn);
    } else if (!t) {
        sift__js_coom(c);
    }
    sift__js_ns_free(t);
    return key_rule;
}

/* The rule `key ":" value` of the other keys additionalProperties allows: keys that are none
 * of ex[] (or matching key_rule when given), values matching additionalProperties (any value
 * when it is true or missing). *extra_kv stays NULL when no key is left. */
static bool other_keys(conv *c, const cJSON *additional, const keyex *ex, size_t n_ex, const char *key_rule,
                       const char *name, const char **extra_kv)
{
    char *sub = sift__js_join_name(name, "additional");
    if (!sub) return sift__js_coom(c), false;
    bool none = false;
    if (!key_rule) key_rule = excluded_keys_rule(c, ex, n_ex, sub, &none);
    const char *value_rule = NULL;
    if (key_rule && cJSON_IsObject(additional)) {
        size_t o = sift__js_path_push(c, "additionalProperties");
        char *vn = sift__js_join_name(sub, "value");
        value_rule = vn ? sift__js_visit(c, additional, vn, NULL) : sift__js_coom(c);
        sift__gx_free(vn);
        sift__js_path_pop(c, o);
    } else if (key_rule) {
        value_rule = sift__js_use_builtin(c, "value");
    }
    if (key_rule && value_rule) {
        sift__gbnf_sbuf b = {0};
        sift__gbnf_sb_printf(&b, "%s \":\" space %s", key_rule, value_rule);
        char *kn = sift__js_join_name(sub, "kv");
        *extra_kv = kn ? sift__js_add_rule(c, kn, sift__gbnf_sb_take(&b)) : sift__js_coom(c);
        sift__gx_free(kn);
        sift__gbnf_sb_free(&b);
    }
    sift__gx_free(sub);
    (void)none;
    return c->status == SIFT_OK;
}

/* Does the rule body (a JSON string, as pattern_body writes it) match the JSON text? */
static bool body_matches(conv *c, const char *body, const char *text)
{
    sift__gbnf_sbuf g = {0};
    sift__gbnf_sb_printf(&g, "root ::= %s\nchar ::= %s\nspace ::= %s\n", body, sift__js_find_builtin("char")->body, sift__js_find_builtin("space")->body);
    if (g.oom) return sift__gbnf_sb_free(&g), sift__js_coom(c), false;
    sift_error e2 = {0};
    sift_grammar *gr = sift_grammar_parse(g.s, g.n, "root", NULL, &e2);
    sift__gbnf_sb_free(&g);
    if (!gr) return sift__js_cfail(c, e2.status ? e2.status : SIFT_E_NOMEM, "patternProperties: %s", e2.msg), false;
    bool m = sift_grammar_match(gr, text, strlen(text), NULL) == SIFT_GRAMMAR_COMPLETE;
    sift_grammar_free(gr);
    return m;
}

static bool is_trivial(const cJSON *s)
{
    if (cJSON_IsTrue(s)) return true;
    if (!cJSON_IsObject(s)) return false;
    for (const cJSON *k = s->child; k; k = k->next)
        if (!sift__js_in_list(sift__js_annotations, k->string)) return false;
    return true;
}

static bool starts_with(const char *s, const char *p) { return !strncmp(s, p, strlen(p)); }

#define PP_MAX 64  /* patterns per object */
#define PP_LITS 32 /* literals per pattern */

typedef struct {
    const cJSON *schema;
    const char *pat;
    char *body;     /* the key rule's body (pattern_body) */
    int n_lits;     /* -1: not literals */
    bool prefix;    /* the literals are prefixes */
    bool all;       /* matches every key */
    char (*lits)[SIFT__PATTERN_LIT_MAX];
} ppat;

/* Can no key match both patterns? Proven for literals (names and prefixes that exclude
 * each other) and for names that the other pattern does not match. */
static bool keys_disjoint(conv *c, const ppat *a, const ppat *b)
{
    if (a->n_lits >= 0 && b->n_lits >= 0) {
        for (int i = 0; i < a->n_lits; i++)
            for (int j = 0; j < b->n_lits; j++) {
                const char *x = a->lits[i], *y = b->lits[j];
                if (!strcmp(x, y) || (a->prefix && starts_with(y, x)) || (b->prefix && starts_with(x, y))) return false;
            }
        return true;
    }
    if (a->n_lits < 0 && b->n_lits < 0) return false;
    const ppat *l = a->n_lits >= 0 ? a : b, *o = a->n_lits >= 0 ? b : a;
    if (l->prefix) return false;
    for (int i = 0; i < l->n_lits; i++) {
        cJSON *js = cJSON_CreateString(l->lits[i]);
        char *txt = js ? cJSON_PrintUnformatted(js) : NULL;
        cJSON_Delete(js);
        if (!txt) return sift__js_coom(c), false;
        bool m = body_matches(c, o->body, txt);
        cJSON_free(txt);
        if (m || c->status != SIFT_OK) return false;
    }
    return true;
}

/* patternProperties: a key that matches a pattern takes that pattern's value; the other
 * keys (none of the declared names, matching no pattern) take additionalProperties. Exact,
 * or refused naming the keyword: a declared name that a pattern matches (both schemas
 * would apply) unless that pattern's schema allows anything; two patterns with different
 * schemas that may match one key; other keys whose set has no grammar (pattern_keys.c). */
static const char *pattern_extras(conv *c, const cJSON *pp, const cJSON *additional, const char **names, size_t n_names,
                                  const char *name, const char **extra_kv)
{
    const bool lenient = (c->flags & SIFT_JSON_SCHEMA_LENIENT) != 0;
    if (!cJSON_IsObject(pp)) return sift__js_cfail(c, SIFT_E_INVAL, "'patternProperties' must be an object");
    size_t n = (size_t)cJSON_GetArraySize(pp);
    if (n > PP_MAX) return sift__js_cfail(c, SIFT_E_UNSUPPORTED, "patternProperties: more than %d patterns", PP_MAX);
    ppat *P = sift__gx_calloc(n, sizeof *P);
    char (*lits)[SIFT__PATTERN_LIT_MAX] = sift__gx_calloc(n * PP_LITS, sizeof *lits);
    keyex *ex = sift__gx_calloc(n_names + n * PP_LITS + 1, sizeof *ex);
    sift__gbnf_sbuf alts = {0};
    const char *ret = NULL;
    size_t o0 = sift__js_path_push(c, "patternProperties");
    if (!P || !lits || !ex) {
        sift__js_coom(c);
        goto done;
    }
    bool any_all = false;
    size_t k = 0;
    for (const cJSON *e = pp->child; e && c->status == SIFT_OK; e = e->next, k++) {
        ppat *q = &P[k];
        q->schema = e;
        q->pat = e->string;
        q->lits = lits + k * PP_LITS;
        size_t o = sift__js_path_push(c, e->string);
        q->body = sift__js_pattern_body(c, e->string, strlen(e->string));
        if (!q->body) {
            sift__js_path_pop(c, o);
            break;
        }
        q->n_lits = sift__schema_pattern_literals(e->string, strlen(e->string), q->lits, PP_LITS, &q->prefix);
        if (q->n_lits == 1 && q->prefix && !q->lits[0][0]) q->n_lits = -1; /* "^" */
        size_t pl = strlen(e->string);
        bool a_s = pl && e->string[0] == '^', a_e = pl > (size_t)a_s && e->string[pl - 1] == '$' && !(pl >= 2 && e->string[pl - 2] == '\\');
        q->all = !(a_s && a_e) && body_matches(c, q->body, "\"\"");
        any_all |= q->all;
        /* declared names this pattern matches: both schemas apply */
        bool names_hit = false;
        for (size_t j = 0; j < n_names && c->status == SIFT_OK; j++) {
            cJSON *js = cJSON_CreateString(names[j]);
            char *txt = js ? cJSON_PrintUnformatted(js) : NULL;
            cJSON_Delete(js);
            if (!txt) {
                sift__js_coom(c);
                break;
            }
            bool m = body_matches(c, q->body, txt);
            cJSON_free(txt);
            if (!m) continue;
            names_hit = true;
            if (!is_trivial(e) && !lenient)
                sift__js_cfail(c, SIFT_E_UNSUPPORTED, "property '%s' also matches this pattern (both schemas would apply): cannot be expressed", names[j]);
        }
        /* earlier patterns that may match the same keys with another schema */
        for (size_t j = 0; j < k && c->status == SIFT_OK; j++)
            if (!cJSON_Compare(P[j].schema, e, true) && !keys_disjoint(c, &P[j], q) && c->status == SIFT_OK && !lenient)
                sift__js_cfail(c, SIFT_E_UNSUPPORTED, "patterns '%s' and '%s' may match one key with different schemas: cannot be expressed", P[j].pat, q->pat);
        if (c->status != SIFT_OK) {
            sift__js_path_pop(c, o);
            break;
        }
        /* the key rule: the pattern, less the declared names it matches */
        char *sub = sift__js_join_name(name, "pattern");
        char idx[32];
        snprintf(idx, sizeof idx, "%zu", k);
        char *sn = sub ? sift__js_join_name(sub, idx) : NULL;
        const char *key_rule = NULL;
        if (!sn) sift__js_coom(c);
        else if (!names_hit) {
            char *kn = sift__js_join_name(sn, "k");
            key_rule = kn ? sift__js_add_rule(c, kn, sift__js_dupstr(q->body)) : sift__js_coom(c);
            sift__gx_free(kn);
        } else if (q->all) {
            bool none;
            for (size_t j = 0; j < n_names; j++) ex[j] = (keyex){names[j], false};
            key_rule = excluded_keys_rule(c, ex, n_names, sn, &none);
        } else if (!lenient) {
            sift__js_cfail(c, SIFT_E_UNSUPPORTED, "a declared property matches this pattern: the other keys it matches cannot be expressed");
        }
        char *vn = sn ? sift__js_join_name(sn, "value") : NULL;
        const char *value_rule = key_rule && vn ? sift__js_visit(c, e, vn, NULL) : NULL;
        if (key_rule && value_rule) sift__gbnf_sb_printf(&alts, "%s%s \":\" space %s", alts.n ? " | " : "", key_rule, value_rule);
        sift__gx_free(vn);
        sift__gx_free(sn);
        sift__gx_free(sub);
        sift__js_path_pop(c, o);
    }
    sift__js_path_pop(c, o0);
    o0 = c->path_len;
    if (c->status != SIFT_OK) goto done;
    /* the other keys */
    bool extra = additional ? (cJSON_IsTrue(additional) || cJSON_IsObject(additional)) : !(c->flags & SIFT_JSON_SCHEMA_LLAMA);
    if (extra && !any_all) {
        size_t n_ex = 0, n_other = 0, which = 0;
        for (size_t j = 0; j < n_names; j++) ex[n_ex++] = (keyex){names[j], false};
        for (size_t j = 0; j < n; j++) {
            if (P[j].n_lits < 0) {
                n_other++;
                which = j;
                continue;
            }
            for (int l = 0; l < P[j].n_lits; l++) ex[n_ex++] = (keyex){P[j].lits[l], P[j].prefix};
        }
        const char *key_rule = NULL;
        if (n_other == 1 && n_ex == 0) {
            bool all = false;
            sift_error e2 = {0};
            const char *any = sift__js_use_builtin(c, "char");
            char *comp = any ? sift__schema_pattern_complement(P[which].pat, strlen(P[which].pat), any, &all, &e2) : NULL;
            if (comp) {
                sift__gbnf_sbuf b = {0};
                sift__gbnf_sb_printf(&b, "\"\\\"\" (%s) \"\\\"\" space", comp);
                sift__gx_free(comp);
                char *kn = sift__js_join_name(name, "additional-k");
                key_rule = kn ? sift__js_add_rule(c, kn, sift__gbnf_sb_take(&b)) : sift__js_coom(c);
                sift__gx_free(kn);
                sift__gbnf_sb_free(&b);
            } else if (!all && c->status == SIFT_OK && !lenient) {
                size_t o = sift__js_path_push(c, "patternProperties");
                size_t o2 = sift__js_path_push(c, P[which].pat);
                sift__js_cfail(c, e2.status ? e2.status : SIFT_E_NOMEM, "with additionalProperties allowed: %s", e2.msg);
                sift__js_path_pop(c, o2);
                sift__js_path_pop(c, o);
            }
            if (all) extra = false;
        } else if (n_other > 0 && !lenient) {
            size_t o = sift__js_path_push(c, "patternProperties");
            sift__js_cfail(c, SIFT_E_UNSUPPORTED, "with additionalProperties allowed, the keys that match no pattern and no property cannot be expressed");
            sift__js_path_pop(c, o);
        }
        if (c->status != SIFT_OK) goto done;
        if (extra) {
            const char *ok_kv = NULL;
            if (!other_keys(c, additional, ex, n_ex, key_rule, name, &ok_kv)) goto done;
            if (ok_kv) sift__gbnf_sb_printf(&alts, "%s%s", alts.n ? " | " : "", ok_kv);
        }
    }
    if (alts.n) {
        char *kn = sift__js_join_name(name, "extra-kv");
        *extra_kv = kn ? sift__js_add_rule(c, kn, sift__gbnf_sb_take(&alts)) : sift__js_coom(c);
        sift__gx_free(kn);
    }
    ret = c->status == SIFT_OK ? "" : NULL;
done:
    c->path_len = o0;
    c->path[o0] = 0;
    for (size_t j = 0; P && j < n; j++) sift__gx_free(P[j].body);
    sift__gx_free(P);
    sift__gx_free(lits);
    sift__gx_free(ex);
    sift__gbnf_sb_free(&alts);
    return c->status == SIFT_OK ? ret : NULL;
}

/* dependentRequired (or dependencies' arrays) {"k": ["a", ...]}: when key k is present, so are
 * a, ...; as bitmasks over the kept properties (map: declared index -> kept index, -1 when no
 * value fits it), for any_order_object, which checks them where the object may end. Exact or
 * refused: every name must be a declared property (other keys are not tracked) and the object
 * must be small enough for any order; a key that depends on a property no value fits is
 * refused (it could never be written, a dead end). *deps stays NULL when nothing is left. */
static bool object_deps(conv *c, const cJSON *dr, const char **names, size_t n_names, const int *map, size_t np, uint32_t **deps)
{
    size_t o = sift__js_path_push(c, dr->string ? dr->string : "dependentRequired");
    if (np > ANY_ORDER_KEYS || n_names > ANY_ORDER_KEYS) {
        sift__js_cfail(c, SIFT_E_UNSUPPORTED, "the object has more than %d properties: the key sets cannot be tracked", ANY_ORDER_KEYS);
        goto out;
    }
    *deps = sift__gx_calloc(np ? np : 1, sizeof **deps);
    if (!*deps) {
        sift__js_coom(c);
        goto out;
    }
    bool any = false;
    for (const cJSON *e = dr->child; e && c->status == SIFT_OK; e = e->next) {
        int ki = -1;
        for (size_t j = 0; j < n_names && ki < 0; j++)
            if (!strcmp(names[j], e->string)) ki = (int)j;
        if (ki < 0 || !cJSON_IsArray(e)) {
            sift__js_cfail(c, SIFT_E_UNSUPPORTED, "'%s' is not a declared property: other keys are not tracked", e->string);
            break;
        }
        for (const cJSON *t = e->child; t && c->status == SIFT_OK; t = t->next) {
            int ti = -1;
            for (size_t j = 0; cJSON_IsString(t) && j < n_names && ti < 0; j++)
                if (!strcmp(names[j], t->valuestring)) ti = (int)j;
            if (ti < 0) sift__js_cfail(c, SIFT_E_UNSUPPORTED, "'%s' depends on a name that is not a declared property", e->string);
            else if (map[ki] >= 0 && map[ti] < 0) sift__js_cfail(c, SIFT_E_UNSUPPORTED, "'%s' depends on a property no value fits", e->string);
            else if (map[ki] >= 0 && map[ti] != map[ki]) (*deps)[map[ki]] |= 1u << map[ti], any = true;
        }
    }
    if (!any) {
        sift__gx_free(*deps);
        *deps = NULL;
    }
out:
    sift__js_path_pop(c, o);
    return c->status == SIFT_OK;
}

/* dependentRequired on an object too large to track its key sets (ANY_ORDER_KEYS): with at
 * most DEP_SPLIT_KEYS entries, one object per choice of which of their keys are present, the
 * others declared false (absent), the present ones required with what they depend on: the
 * choices are disjoint and together exactly the objects the entries allow. Each choice is a
 * copy of the object's rules, so objects of more than DEP_SPLIT_PROPS properties are left
 * refused (they are also those whose keys must come in the schema's order, ordered_object).
 * NULL without an error when this does not apply (the caller goes on as before). */
#define DEP_SPLIT_KEYS 3
#define DEP_SPLIT_PROPS 16
static const char *object_dep_split(conv *c, const cJSON *dr, const cJSON *props, const cJSON *required, const cJSON *additional,
                                    const cJSON *pattern_props, const char *name, const char *rule_name, long min_props, long max_props,
                                    bool *applies)
{
    *applies = false;
    int k = cJSON_GetArraySize(dr);
    int np = cJSON_GetArraySize(props);
    if (!cJSON_IsObject(dr) || k < 1 || k > DEP_SPLIT_KEYS || np <= ANY_ORDER_KEYS || np > DEP_SPLIT_PROPS) return NULL;
    for (const cJSON *d = dr->child; d; d = d->next) {
        if (!cJSON_IsArray(d)) return NULL;
        for (const cJSON *q = d->child; q; q = q->next)
            if (!cJSON_IsString(q)) return NULL;
    }
    *applies = true;
    sift__gbnf_sbuf alts = {0};
    for (int mask = 0; mask < (1 << k) && c->status == SIFT_OK; mask++) {
        cJSON *p = props ? cJSON_Duplicate(props, 1) : cJSON_CreateObject();
        cJSON *r = required ? cJSON_Duplicate(required, 1) : cJSON_CreateArray();
        bool empty = false;
        int i = 0;
        for (int pass = 0; pass < 2; pass++, i = 0) /* the absent keys first: a present one may need one */
        for (const cJSON *d = dr->child; d && p && r && !empty; d = d->next, i++) {
            if (!(mask & (1 << i)) != !pass) continue;
            if (mask & (1 << i)) { /* present, and what it depends on */
                for (const cJSON *q = d; q; q = q == d ? d->child : q->next) {
                    const char *key = q == d ? d->string : q->valuestring;
                    const cJSON *decl = cJSON_GetObjectItemCaseSensitive(p, key);
                    empty |= cJSON_IsFalse(decl) || (!decl && cJSON_IsFalse(additional) && !pattern_props);
                    bool have = false;
                    for (const cJSON *x = r->child; x && !have; x = x->next) have = cJSON_IsString(x) && !strcmp(x->valuestring, key);
                    if (!have && !cJSON_AddItemToArray(r, cJSON_CreateString(key))) goto nomem;
                }
                continue;
            }
            for (const cJSON *x = r->child; x && !empty; x = x->next) empty = cJSON_IsString(x) && !strcmp(x->valuestring, d->string);
            cJSON_DeleteItemFromObjectCaseSensitive(p, d->string);
            if (!cJSON_AddItemToObject(p, d->string, cJSON_CreateFalse())) goto nomem;
        }
        if (!p || !r) goto nomem;
        if (!empty) {
            char suf[16];
            snprintf(suf, sizeof suf, "dep%d", mask);
            char *vn = sift__js_join_name(rule_name, suf);
            const char *v = vn ? sift__js_build_object(c, p, r, additional, pattern_props, name, vn, min_props, max_props) : sift__js_coom(c);
            sift__gx_free(vn);
            if (v) sift__gbnf_sb_printf(&alts, "%s%s", alts.n ? " | " : "", v);
        }
        cJSON_Delete(p);
        cJSON_Delete(r);
        continue;
    nomem:
        cJSON_Delete(p);
        cJSON_Delete(r);
        sift__js_coom(c);
    }
    if (c->status != SIFT_OK) return sift__gbnf_sb_free(&alts), (const char *)NULL;
    if (!alts.n) {
        sift__gbnf_sb_free(&alts);
        c->unsat = true;
        return sift__js_cfail(c, SIFT_E_INVAL, "dependentRequired: no object has every key it requires: the schema matches nothing");
    }
    return alts.oom ? (sift__gbnf_sb_free(&alts), sift__js_coom(c)) : sift__js_add_rule(c, rule_name, sift__gbnf_sb_take(&alts));
}

const char *sift__js_build_object(conv *c, const cJSON *props, const cJSON *required, const cJSON *additional,
                                const cJSON *pattern_props, const char *name, const char *rule_name, long min_props, long max_props)
{
    if (c->dep_required) {
        const cJSON *dr = c->dep_required;
        c->dep_required = NULL;
        bool applies = false;
        const char *r = object_dep_split(c, dr, props, required, additional, pattern_props, name, rule_name, min_props, max_props, &applies);
        if (applies) return r;
        c->dep_required = dr;
    }
    /* kv rule per property; with JSON Schema semantics a required name that `properties`
     * does not declare is a property with any value, after the declared ones */
    const bool llama = (c->flags & SIFT_JSON_SCHEMA_LLAMA) != 0;
    const cJSON *dep_req = c->dep_required; /* taken here, so that no nested object sees it */
    c->dep_required = NULL;
    uint32_t *deps = NULL;
    size_t np = (size_t)cJSON_GetArraySize(props), n_undecl = 0;
    for (const cJSON *r = required ? required->child : NULL; r && !llama; r = r->next)
        if (cJSON_IsString(r) && !cJSON_GetObjectItemCaseSensitive(props, r->valuestring)) n_undecl++;
    for (const cJSON *e = dep_req ? dep_req->child : NULL; e && !llama; e = e->next)
        n_undecl += 1 + (size_t)cJSON_GetArraySize(e);
    size_t n_all = np + n_undecl, n_named_req;
    const char **kv = sift__gx_calloc(n_all ? n_all : 1, sizeof *kv);
    const char **names = sift__gx_calloc(n_all ? n_all : 1, sizeof *names);
    const char **kv_names = sift__gx_calloc(n_all ? n_all : 1, sizeof *kv_names); /* kv's names once compacted */
    bool *req = sift__gx_calloc(n_all ? n_all : 1, sizeof *req);
    if (!kv || !req || !names || !kv_names) {
        sift__gx_free(kv);
        sift__gx_free(req);
        sift__gx_free(names);
        sift__gx_free(kv_names);
        return sift__js_coom(c);
    }
    {
        size_t k = 0;
        for (const cJSON *p = props ? props->child : NULL; p; p = p->next) names[k++] = p->string;
        for (const cJSON *r = required ? required->child : NULL; r && !llama; r = r->next)
            if (cJSON_IsString(r) && !cJSON_GetObjectItemCaseSensitive(props, r->valuestring)) {
                bool dup = false;
                for (size_t q = np; q < k; q++) dup |= !strcmp(names[q], r->valuestring);
                if (!dup) names[k++] = r->valuestring;
            }
        n_named_req = k;
        /* names dependentRequired mentions that neither `properties` nor `required` has:
         * optional additional properties, tracked like declared ones (their value is what
         * additionalProperties allows), so that the key sets can be checked */
        for (const cJSON *e = dep_req ? dep_req->child : NULL; e && !llama; e = e->next)
            for (const cJSON *t = e; t; t = t == e ? e->child : t->next) {
                const char *nm = t == e ? e->string : cJSON_IsString(t) ? t->valuestring : NULL;
                bool dup = !nm;
                for (size_t q = 0; q < k && !dup; q++) dup = !strcmp(names[q], nm);
                if (!dup) names[k++] = nm;
            }
        n_all = k;
    }
    size_t i = 0;
    const char *result = NULL;
    size_t o0 = sift__js_path_push(c, "properties");
    for (const cJSON *p = props ? props->child : NULL; p && c->status == SIFT_OK; p = p->next, i++) {
        size_t o = sift__js_path_push(c, p->string);
        char *pn = sift__js_join_name(name, p->string);
        for (const cJSON *r = required ? required->child : NULL; r; r = r->next)
            if (cJSON_IsString(r) && !strcmp(r->valuestring, p->string)) req[i] = true;
        sift_error saved = c->err ? *c->err : (sift_error){0};
        const char *vr = pn ? sift__js_visit(c, p, pn, NULL) : sift__js_coom(c);
        if (!vr && c->unsat && !req[i]) { /* an optional property no value fits: never present */
            c->status = SIFT_OK;
            c->unsat = false;
            if (c->err) *c->err = saved;
        }
        if (vr) {
            sift__gbnf_sbuf b = {0};
            cJSON *key = cJSON_CreateString(p->string);
            if (!key) sift__js_coom(c);
            else {
                sift__js_put_json_literal(c, &b, key);
                cJSON_Delete(key);
                sift__gbnf_sb_printf(&b, " space \":\" space %s", vr);
                char *kn = sift__js_join_name(name, p->string);
                char *kn2 = kn ? sift__js_join_name(kn, "kv") : NULL;
                /* join_name inserts '-' only after a non-empty prefix; "kv" always follows */
                kv[i] = kn2 ? sift__js_add_rule(c, kn2, sift__gbnf_sb_take(&b)) : sift__js_coom(c);
                sift__gx_free(kn);
                sift__gx_free(kn2);
                if (!sift__js_use_builtin(c, "space")) break;
            }
            sift__gbnf_sb_free(&b);
        }
        sift__gx_free(pn);
        sift__js_path_pop(c, o);
    }
    sift__js_path_pop(c, o0);
    /* required names `properties` does not declare: additional properties, so their value
     * is what additionalProperties allows (false: none, the object matches nothing); a
     * pattern of patternProperties could apply too: refused */
    if (i < n_all && pattern_props && cJSON_GetArraySize(pattern_props) > 0 && !(c->flags & SIFT_JSON_SCHEMA_LENIENT)) {
        size_t o = sift__js_path_push(c, i < n_named_req ? "required" : "dependentRequired");
        sift__js_cfail(c, SIFT_E_UNSUPPORTED, "property '%s' that only patternProperties may declare cannot be expressed", names[i]);
        sift__js_path_pop(c, o);
    }
    if (i < n_named_req && cJSON_IsFalse(additional) && !llama) {
        c->unsat = c->status == SIFT_OK;
        size_t o = sift__js_path_push(c, "required");
        sift__js_cfail(c, SIFT_E_INVAL, "required property '%s' is not allowed by additionalProperties false: the schema matches nothing", names[i]);
        sift__js_path_pop(c, o);
    }
    for (; i < n_all && c->status == SIFT_OK; i++) {
        const char *vr;
        if (i >= n_named_req && cJSON_IsFalse(additional)) continue; /* a dependency name no key may be */
        if (cJSON_IsObject(additional)) {
            size_t o = sift__js_path_push(c, "additionalProperties");
            char *vn = sift__js_join_name(name, "additional-value");
            vr = vn ? sift__js_visit(c, additional, vn, NULL) : sift__js_coom(c);
            sift__gx_free(vn);
            sift__js_path_pop(c, o);
            if (!vr) break;
        } else {
            vr = sift__js_use_builtin(c, "value");
        }
        cJSON *key = cJSON_CreateString(names[i]);
        sift__gbnf_sbuf b = {0};
        if (!key || !vr) {
            cJSON_Delete(key);
            sift__js_coom(c);
            break;
        }
        sift__js_put_json_literal(c, &b, key);
        cJSON_Delete(key);
        sift__gbnf_sb_printf(&b, " space \":\" space %s", vr);
        char *kn = sift__js_join_name(name, names[i]);
        char *kn2 = kn ? sift__js_join_name(kn, "kv") : NULL;
        kv[i] = kn2 ? sift__js_add_rule(c, kn2, sift__gbnf_sb_take(&b)) : sift__js_coom(c);
        sift__gx_free(kn);
        sift__gx_free(kn2);
        sift__gbnf_sb_free(&b);
        req[i] = i < n_named_req;
        if (!sift__js_use_builtin(c, "space")) break;
    }
    if (c->status != SIFT_OK) goto done;
    for (const cJSON *r = required ? required->child : NULL; r && llama && !(c->flags & SIFT_JSON_SCHEMA_LENIENT); r = r->next)
        if (cJSON_IsString(r) && !cJSON_GetObjectItemCaseSensitive(props, r->valuestring)) {
            size_t o = sift__js_path_push(c, "required");
            sift__js_cfail(c, SIFT_E_UNSUPPORTED, "required property '%s' is not declared in 'properties'", r->valuestring);
            sift__js_path_pop(c, o);
            goto done;
        }

    /* additional properties (and patternProperties) */
    const char *extra_kv = NULL;
    np = n_all;
    bool extra;
    if (pattern_props && cJSON_GetArraySize(pattern_props) > 0) {
        if (!pattern_extras(c, pattern_props, additional, names, np, name, &extra_kv)) goto done;
        extra = extra_kv != NULL;
    } else {
        /* JSON Schema: a missing additionalProperties allows any other key (llama.cpp's
         * converter reads it as false) */
        extra = additional ? (cJSON_IsTrue(additional) || cJSON_IsObject(additional)) : !llama;
        keyex *ex = extra ? sift__gx_calloc(np + 1, sizeof *ex) : NULL;
        if (extra && !ex) {
            sift__js_coom(c);
            goto done;
        }
        for (size_t q = 0; extra && q < np; q++) ex[q] = (keyex){names[q], false};
        bool ok = !extra || other_keys(c, additional, ex, np, NULL, name, &extra_kv);
        sift__gx_free(ex);
        if (!ok) goto done;
    }
    /* optional properties that no value fits are left out */
    {
        size_t w = 0, np0 = np;
        int map[ANY_ORDER_KEYS + 1];
        for (i = 0; i < np; i++) {
            if (i <= ANY_ORDER_KEYS) map[i] = kv[i] ? (int)w : -1;
            if (kv[i]) kv_names[w] = names[i], kv[w] = kv[i], req[w] = req[i], w++;
        }
        np = w;
        if (dep_req && !llama && !object_deps(c, dep_req, names, np0, map, np, &deps)) goto done;
    }

    if (!llama) {
        /* any order where it is bounded (min/maxProperties counting only other keys stays ordered) */
        const char *x = extra ? extra_kv : NULL;
        bool nonempty = min_props > 0;
        for (i = 0; i < np; i++) nonempty &= !req[i];
        if ((np >= 2 || (np == 1 && x)) && max_props < 0 && min_props <= 1 && any_order_fits(c, np))
            result = any_order_object(c, kv, req, np, x, deps, rule_name, nonempty);
        else if (deps && !(c->flags & SIFT_JSON_SCHEMA_LENIENT))
            result = sift__js_cfail(c, SIFT_E_UNSUPPORTED, "dependentRequired / dependencies: the object has more than %d properties (or the schema more than %d key-set rules)",
                           ANY_ORDER_KEYS, ANY_ORDER_STATES);
        else
            result = two_orders(c, kv, req, kv_names, np, x, required, rule_name, min_props, max_props);
        goto done;
    }
    /* llama.cpp's order: "{" required, then optional ones (any subset, in order), then extras */
    sift__gbnf_sbuf b = {0};
    sift__gbnf_sb_puts(&b, "\"{\" space ");
    size_t n_req = 0, n_opt = 0;
    for (i = 0; i < np; i++) {
        if (!req[i]) {
            n_opt++;
            continue;
        }
        if (n_req++) sift__gbnf_sb_puts(&b, " \",\" space ");
        sift__gbnf_sb_puts(&b, kv[i]);
    }
    if (n_opt || extra) {
        /* optional keys [o0, o1, ...] (+ "*"): alternatives "start at ok, then any of the rest" */
        const char **ok = sift__gx_calloc(n_opt + 1, sizeof *ok);
        if (!ok) {
            sift__gbnf_sb_free(&b);
            result = sift__js_coom(c);
            goto done;
        }
        size_t m = 0;
        for (i = 0; i < np; i++)
            if (!req[i]) ok[m++] = kv[i];
        if (extra) ok[m++] = extra_kv;
        /* rest rules, built from the back: rest_k ::= ( "," space ok[k+1] )? rest_{k+1} */
        const char **rest = sift__gx_calloc(m + 1, sizeof *rest);
        if (!rest) {
            sift__gx_free(ok);
            sift__gbnf_sb_free(&b);
            result = sift__js_coom(c);
            goto done;
        }
        for (size_t k = m; k-- > 1;) {
            sift__gbnf_sbuf rb = {0};
            bool star = extra && k == m - 1;
            sift__gbnf_sb_printf(&rb, "( \",\" space %s )%s", ok[k], star ? "*" : "?");
            if (rest[k + 1 < m ? k + 1 : m]) sift__gbnf_sb_printf(&rb, " %s", rest[k + 1 < m ? k + 1 : m]);
            char nm[64];
            snprintf(nm, sizeof nm, "%zu-rest", k);
            char *rn = sift__js_join_name(rule_name, nm);
            rest[k] = rn ? sift__js_add_rule(c, rn, sift__gbnf_sb_take(&rb)) : sift__js_coom(c);
            sift__gx_free(rn);
            sift__gbnf_sb_free(&rb);
            if (!rest[k]) break;
        }
        if (c->status == SIFT_OK) {
            sift__gbnf_sb_puts(&b, n_req ? " ( \",\" space ( " : " ( ");
            for (size_t k = 0; k < m; k++) {
                if (k) sift__gbnf_sb_puts(&b, " | ");
                bool star = extra && k == m - 1;
                sift__gbnf_sb_puts(&b, ok[k]);
                if (star) sift__gbnf_sb_printf(&b, " ( \",\" space %s )*", ok[k]);
                if (k + 1 < m && rest[k + 1]) sift__gbnf_sb_printf(&b, " %s", rest[k + 1]);
            }
            sift__gbnf_sb_puts(&b, n_req ? " ) )?" : " )?");
        }
        sift__gx_free(ok);
        sift__gx_free(rest);
    }
    sift__gbnf_sb_puts(&b, " \"}\" space");
    if (c->status == SIFT_OK && sift__js_use_builtin(c, "space")) result = sift__js_add_rule(c, rule_name, sift__gbnf_sb_take(&b));
    sift__gbnf_sb_free(&b);
done:
    sift__gx_free(kv);
    sift__gx_free(req);
    sift__gx_free(names);
    sift__gx_free(kv_names);
    sift__gx_free(deps);
    return result;
}

/* propertyNames: every key validates against its schema (keys are strings, so the schema is
 * read as {"allOf": [{"type": "string"}, propertyNames]}: a const 5 or {"minimum": 1} says
 * nothing a key could satisfy or break); the key rule then replaces `string` in the object,
 * values as additionalProperties says. Exact on its own; beside declared properties,
 * patternProperties, required, dependentRequired or min/maxProperties (which would need the
 * key set intersected with the pattern) it is refused. Keys that validate against no string
 * schema leave the empty object. */
const char *sift__js_visit_property_names(conv *c, const cJSON *s, const char *name, const char *rule_name)
{
    static const char *const beside[] = {"properties", "patternProperties", "required", "dependentRequired", "dependencies",
                                         "minProperties", "maxProperties", NULL};
    const cJSON *pn = cJSON_GetObjectItemCaseSensitive(s, "propertyNames");
    const cJSON *ad = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
    for (const char *const *k = beside; *k; k++)
        if (cJSON_GetObjectItemCaseSensitive(s, *k)) {
            size_t o = sift__js_path_push(c, "propertyNames");
            sift__js_cfail(c, SIFT_E_UNSUPPORTED, "propertyNames beside '%s' cannot be expressed in a grammar", *k);
            sift__js_path_pop(c, o);
            return NULL;
        }
    if (!sift__js_use_builtin(c, "space")) return NULL;
    const char *key = NULL, *val = NULL;
    char *kn = sift__js_join_name(name, "key"), *vn = sift__js_join_name(name, "additional-value");
    cJSON *wrap = cJSON_CreateObject(), *list = wrap ? cJSON_AddArrayToObject(wrap, "allOf") : NULL;
    cJSON *str = cJSON_CreateObject(), *dup = cJSON_Duplicate(pn, 1);
    bool taken = kn && vn && str && dup && list && cJSON_AddStringToObject(str, "type", "string") && cJSON_AddItemToArray(list, str);
    if (!taken) cJSON_Delete(str); /* list owns it once added */
    if (!taken || !cJSON_AddItemToArray(list, dup)) {
        cJSON_Delete(dup);
        sift__js_coom(c);
        goto out;
    }
    size_t o = sift__js_path_push(c, "propertyNames");
    sift_error saved = c->err ? *c->err : (sift_error){0};
    key = sift__js_visit(c, wrap, kn, NULL);
    sift__js_path_pop(c, o);
    if (!key && c->unsat) { /* no key validates: only {} */
        c->status = SIFT_OK;
        c->unsat = false;
        if (c->err) *c->err = saved;
    }
    if (c->status != SIFT_OK) goto out;
    if (key && !cJSON_IsFalse(ad)) {
        o = sift__js_path_push(c, "additionalProperties");
        val = cJSON_IsObject(ad) ? sift__js_visit(c, ad, vn, NULL) : sift__js_use_builtin(c, "value");
        sift__js_path_pop(c, o);
        if (!val && c->unsat) { /* no value fits: no key can be written */
            c->status = SIFT_OK;
            c->unsat = false;
            if (c->err) *c->err = saved;
        }
        if (c->status != SIFT_OK) goto out;
    }
    sift__gbnf_sbuf b = {0};
    if (key && val)
        sift__gbnf_sb_printf(&b, "\"{\" space ( %s \":\" space %s (\",\" space %s \":\" space %s)* )? \"}\" space", key, val, key, val);
    else
        sift__gbnf_sb_puts(&b, "\"{\" space \"}\" space");
    key = sift__js_add_rule(c, rule_name, sift__gbnf_sb_take(&b));
    sift__gbnf_sb_free(&b);
out:
    cJSON_Delete(wrap);
    sift__gx_free(kn);
    sift__gx_free(vn);
    return c->status == SIFT_OK ? key : NULL;
}
