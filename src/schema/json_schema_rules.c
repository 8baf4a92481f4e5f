/*
 * json_schema_rules.c - the converter's rule table: rules by name, and what other bodies
 * write for each.
 *
 * A rule's name is made from its schema path (root-spec-containers-item-kv, ...) and is the
 * key it is found by: the same name with the same body is the same rule (a node visited
 * twice), the same name with another body gets a number.
 *
 * When the text is only parsed (conv.short_names, the grammar compiler's path), two more
 * things, both for the time to the first mask of large schemas:
 *   - a rule is written "r<index>", not by its name: the names grow with the path
 *     (ref-definitions-https-kubernetesjsonschema-dev-master-defs-json-defs-io-k8s-apimachinery-
 *     pkg-apis-meta-v1-ObjectMeta-additional-k-15) and a Kubernetes schema's 2.5 MB of text
 *     was 90 % names, written into bodies, copied, then scanned and hashed again by the parser
 *     at every reference. Rules that other bodies name before they exist (built-ins, root,
 *     multipleOf's states) are added `named` and written by their names.
 *   - a rule whose body is already another rule's body is that rule: a body names only rules,
 *     so equal texts are equal languages. The pieces of a schema repeat under different
 *     paths (the key-exclusion tries of objects with the same keys, the same definition
 *     inlined in many places), and every rule the parser does not see is one less to parse,
 *     number and classify. Bodies are written after the rules they use, so sharing goes up
 *     from the leaves. Rules made to be filled in later (add_rule_new) are never shared.
 * json-schema-to-grammar's text (for people) keeps its names and one rule per path.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schema/json_schema_int.h"

/* Rule names: letters, digits and '-' (runs of anything else become one '-'). */
char *sift__js_sanitize(const char *name)
{
    size_t n = strlen(name);
    char *s = sift__gx_malloc(n + 1);
    if (!s) return NULL;
    size_t k = 0;
    bool dash = false;
    for (size_t i = 0; i < n; i++) {
        char ch = name[i];
        if (isalnum((unsigned char)ch) || ch == '-') {
            s[k++] = ch;
            dash = false;
        } else if (!dash) {
            s[k++] = '-';
            dash = true;
        }
    }
    s[k] = 0;
    if (!k) {
        sift__gx_free(s);
        s = sift__gx_malloc(2);
        if (s) strcpy(s, "x");
    }
    return s;
}

static uint64_t text_hash(const char *s) { return sift__gx_hash_bytes(s, strlen(s)); }

static uint64_t key_of(const jrule *r, bool by_body) { return by_body ? r->bhash : r->hash; }

/* Put rule i into an open-addressing index of rule index + 1 (0 = empty), by name hash or by
 * body hash; *n counts its entries. A grown table is refilled from the rules in order (a
 * sequential read, where the old table's slots point all over them). */
static bool index_put(const conv *c, uint32_t **ht, size_t *cap, size_t *n, bool by_body, size_t i)
{
    if ((*n + 1) * 2 > *cap) {
        size_t nc = *cap ? *cap * 2 : 64;
        uint32_t *t = sift__gx_calloc(nc, sizeof *t);
        if (!t) return false;
        for (size_t j = 0; j < i; j++) {
            if (by_body && !c->rules[j].shared) continue;
            size_t k = key_of(&c->rules[j], by_body) & (nc - 1);
            while (t[k]) k = (k + 1) & (nc - 1);
            t[k] = (uint32_t)j + 1;
        }
        sift__gx_free(*ht);
        *ht = t;
        *cap = nc;
    }
    size_t k = key_of(&c->rules[i], by_body) & (*cap - 1);
    while ((*ht)[k]) k = (k + 1) & (*cap - 1);
    (*ht)[k] = (uint32_t)i + 1;
    (*n)++;
    return true;
}

/* The rule indexed under hash h whose name (by_body: body) is s, or NULL. */
static jrule *index_find(const conv *c, const uint32_t *ht, size_t cap, bool by_body, const char *s, uint64_t h)
{
    if (!cap) return NULL;
    for (size_t k = h & (cap - 1);; k = (k + 1) & (cap - 1)) {
        uint32_t i = ht[k];
        if (!i) return NULL;
        jrule *r = &c->rules[i - 1];
        if (key_of(r, by_body) == h && !strcmp(by_body ? r->body : r->name, s)) return r;
    }
}

jrule *sift__js_find_rule(conv *c, const char *name) { return index_find(c, c->rule_ht, c->rule_ht_cap, false, name, text_hash(name)); }

static const char *written(const jrule *r) { return r->out ? r->out : r->name; }

static const char *add_fail(conv *c, char *a, char *b)
{
    sift__gx_free(a);
    sift__gx_free(b);
    return sift__js_coom(c);
}

/* Add rule `name ::= body`; with reuse, an existing rule with the same name and body is
 * reused; otherwise the name, if taken, gets a number. Returns what other bodies write for it
 * (owned by the table). Takes ownership of body. */
static const char *add_rule(conv *c, const char *name, char *body, bool reuse, bool named)
{
    if (!body) return sift__js_coom(c);
    const bool share = c->short_names && reuse && !named;
    const uint64_t bh = share ? text_hash(body) : 0;
    if (share) {
        jrule *same = index_find(c, c->body_ht, c->body_ht_cap, true, body, bh);
        if (same) return sift__gx_free(body), written(same);
    }
    char *base = sift__js_sanitize(name);
    if (!base) return add_fail(c, body, NULL);
    char *cand = base;
    uint64_t h;
    for (int i = 0;; i++) {
        h = text_hash(cand);
        jrule *r = index_find(c, c->rule_ht, c->rule_ht_cap, false, cand, h);
        if (!r) break;
        if (reuse && !strcmp(r->body, body)) {
            if (cand != base) sift__gx_free(cand);
            sift__gx_free(base);
            sift__gx_free(body);
            return written(r);
        }
        if (cand != base) sift__gx_free(cand);
        size_t n = strlen(base) + 16;
        if (!(cand = sift__gx_malloc(n))) return add_fail(c, base, body);
        snprintf(cand, n, "%s%d", base, i);
    }
    if (cand != base) sift__gx_free(base);
    if (c->n_rules == c->cap_rules) {
        size_t nc = c->cap_rules ? c->cap_rules * 2 : 16;
        jrule *p = sift__gx_realloc(c->rules, nc * sizeof *p);
        if (!p) return add_fail(c, cand, body);
        c->rules = p;
        c->cap_rules = nc;
    }
    char *out = NULL;
    if (c->short_names && !named && strcmp(cand, "root")) { /* the start rule keeps its name */
        if (!(out = sift__gx_malloc(24))) return add_fail(c, cand, body);
        char d[24];
        size_t nd = 0;
        for (size_t v = c->n_rules; nd == 0 || v; v /= 10) d[nd++] = (char)('0' + v % 10);
        out[0] = 'r';
        for (size_t k = 0; k < nd; k++) out[1 + k] = d[nd - 1 - k];
        out[1 + nd] = 0;
    }
    const size_t i = c->n_rules++;
    c->rules[i] = (jrule){cand, body, out, h, bh, share};
    size_t n_named = i;
    if (!index_put(c, &c->rule_ht, &c->rule_ht_cap, &n_named, false, i)) return sift__js_coom(c);
    if (share && !index_put(c, &c->body_ht, &c->body_ht_cap, &c->body_ht_n, true, i)) return sift__js_coom(c);
    return written(&c->rules[i]);
}

const char *sift__js_add_rule(conv *c, const char *name, char *body) { return add_rule(c, name, body, true, false); }
const char *sift__js_add_rule_new(conv *c, const char *name, char *body) { return add_rule(c, name, body, false, false); }
const char *sift__js_add_rule_named(conv *c, const char *name, char *body) { return add_rule(c, name, body, true, true); }

jrule *sift__js_rule_written(conv *c, const char *out)
{
    size_t i = 0;
    const char *d = out[0] == 'r' ? out + 1 : "";
    while (*d >= '0' && *d <= '9' && i < c->n_rules) i = i * 10 + (size_t)(*d++ - '0');
    if (d > out + 1 && !*d && i < c->n_rules && c->rules[i].out && !strcmp(c->rules[i].out, out)) return &c->rules[i];
    return sift__js_find_rule(c, out);
}

void sift__js_rules_free(conv *c)
{
    for (size_t i = 0; i < c->n_rules; i++) {
        if (c->rules[i].out != c->rules[i].name) sift__gx_free(c->rules[i].out);
        sift__gx_free(c->rules[i].name);
        sift__gx_free(c->rules[i].body);
    }
    sift__gx_free(c->rules);
    sift__gx_free(c->rule_ht);
    sift__gx_free(c->body_ht);
    c->rules = NULL;
    c->rule_ht = c->body_ht = NULL;
    c->n_rules = c->cap_rules = c->rule_ht_cap = c->body_ht_cap = c->body_ht_n = 0;
}
