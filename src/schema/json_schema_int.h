/*
 * json_schema_int.h - what the files of the JSON schema converter share: the converter's
 * state (conv), its rule table and built-in rules, and the visitors of each keyword family.
 * json_schema.c is the driver (the rule table, built-ins, keyword checks, visit: the dispatch
 * by type, enum / const); json_schema_combine.c anyOf / oneOf siblings, $ref, allOf;
 * json_schema_one_of.c oneOf's disjointness and pieces; json_schema_not.c complements (for
 * `not` and overlapping oneOf alternatives); json_schema_object.c objects;
 * json_schema_array.c arrays and tuples; json_schema_scalar.c strings, formats, integers and
 * numbers; regex_length.c a pattern with a length. Internal to src/schema.
 */
#ifndef SIFT_SCHEMA_JSON_SCHEMA_INT_H
#define SIFT_SCHEMA_JSON_SCHEMA_INT_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "grammar/alloc_bits_utf8.h"
#include "schema/gbnf_writer.h"
#include "sift.h"

#define JS_MAX_DEPTH 256 /* nested schemas */


typedef struct {
    char *name, *body;
    char *out;     /* the name written in the text (NULL: name); see json_schema_rules.c */
    uint64_t hash; /* sift__gx_hash_bytes of name: found and re-indexed without rehashing the name */
    uint64_t bhash; /* of body as added (short_names: rules shared by body) */
    bool shared;    /* in the body index */
} jrule;

typedef struct {
    const cJSON *root;
    uint32_t flags;
    sift_error *err;
    int status;
    jrule *rules;
    size_t n_rules, cap_rules;
    uint32_t *rule_ht;   /* rule index + 1 by name hash (0 = empty): find_rule was a linear
                          * scan, quadratic in the rules (41 % of a 1.7 MB Kubernetes grammar's
                          * 190 ms conversion, perf) */
    size_t rule_ht_cap;
    uint32_t *body_ht;   /* rule index + 1 by body hash (short_names only) */
    size_t body_ht_cap, body_ht_n;
    struct jref *refs;   /* each $ref's rule, by the reference's own text (json_schema_combine.c):
                          * two references whose rule names read alike ("a.b", "a_b") are two rules */
    size_t n_refs, refs_cap;
    const char *resolving[JS_MAX_DEPTH]; /* $refs being expanded */
    int n_resolving;
    bool ref_cycle; /* a $ref came back to one being expanded: the output may be left-recursive */
    char path[512]; /* JSON pointer of the node being converted */
    size_t path_len;
    int depth;
    bool unsat; /* the error is "this schema matches nothing" (an optional property may then be left out) */
    bool approx; /* a complement left values out (json_schema_not.c): "matches nothing" may be untrue */
    size_t any_order_states; /* rules spent on objects whose keys come in any order (any_order_object) */
    bool ref_overrides;        /* draft-07 and earlier ($schema): $ref overrides the keywords beside it */
    const cJSON *dep_required; /* dependentRequired (or dependencies' arrays) for the next build_object */
    bool short_names; /* the text is only parsed (sift__js_to_gbnf's for_parse): rules written as
                       * r<index> and shared by body (json_schema_rules.c) */
} conv;

typedef struct {
    const char *name, *body, *deps[3];
} builtin;

/* annotations (ignored) and standard formats without a grammar here (refused), NULL-terminated */
extern const char *const sift__js_annotations[];
extern const char *const sift__js_formats_refused[];


/* json_schema_combine.c */
void sift__js_refs_free(conv *c);

/* json_schema.c */
/* sift_json_schema_to_grammar; for_parse: for a caller that parses the text at once (the
 * grammar compiler): the rules unsorted, and no parse of its own when a $ref cycle could
 * make the text left-recursive (the caller's parse fails instead: sift__js_parse_failed
 * words it as this converter would) */
char *sift__js_to_gbnf(const char *schema, size_t len, uint32_t flags, bool for_parse, sift_error *err);
void sift__js_parse_failed(sift_error *err, const sift_error *e2);
__attribute__((format(printf, 3, 4))) const char *sift__js_cfail(conv *c, int status, const char *fmt, ...);
const char *sift__js_coom(conv *c);
size_t sift__js_path_push(conv *c, const char *seg);
void sift__js_path_pop(conv *c, size_t old);
char *sift__js_sanitize(const char *name);
/* json_schema_rules.c: the rule table */
/* the rule whose name (key) is `name` / that add_rule's return value `out` writes */
jrule *sift__js_find_rule(conv *c, const char *name);
jrule *sift__js_rule_written(conv *c, const char *out);
/* Add rule `name ::= body`: returns what to write for it in other rules' bodies */
const char *sift__js_add_rule(conv *c, const char *name, char *body);
/* as sift__js_add_rule, but always a rule of its own (never one that has the same body) */
const char *sift__js_add_rule_new(conv *c, const char *name, char *body);
/* as sift__js_add_rule, but written by its name even with short_names: for rules that other
 * bodies name before they exist (their names are made, not returned) */
const char *sift__js_add_rule_named(conv *c, const char *name, char *body);
void sift__js_rules_free(conv *c);
char *sift__js_dupstr(const char *s);
const builtin *sift__js_find_builtin(const char *name);
const char *sift__js_use_builtin(conv *c, const char *name);
bool sift__js_put_json_literal(conv *c, sift__gbnf_sbuf *b, const cJSON *v);
char *sift__js_pattern_body(conv *c, const char *pat, size_t n);
bool sift__js_in_list(const char *const *l, const char *s);
bool sift__js_is_keyword(const char *k);
const cJSON *sift__js_vc_resolve(void *ctx, const char *ref);
const char *sift__js_visit(conv *c, const cJSON *s, const char *name, const char *force_type);

/* json_schema_one_of.c */
bool sift__js_disjoint(conv *c, const cJSON *a, const cJSON *b);
cJSON *sift__js_one_of_pieces(conv *c, const cJSON *const *alts, int n);
bool sift__js_value_fits(const cJSON *v, const cJSON *type);
bool sift__js_requires_key(const cJSON *s, const char *k);

/* json_schema_not.c: the complement of s as a schema without `not` (a new cJSON: an object,
 * or true / false), or NULL: not expressible (no error set) or out of memory (error set) */
cJSON *sift__js_complement(conv *c, const cJSON *s);

/* json_schema_combine.c */
enum { T_NUMBER = 1u << 4, T_INTEGER = 1u << 6 }; /* bits of sift__js_type_set (sift__js_type_names' order) */
extern const char *const sift__js_type_names[];
bool sift__js_type_set(const cJSON *t, unsigned *out);
cJSON *sift__js_type_meet(conv *c, const cJSON *a, const cJSON *b);
bool sift__js_only_annotations_and(const cJSON *s, const char *key);
bool sift__js_values_checked(conv *c, const cJSON *s);
bool sift__js_is_inert(const char *k);
cJSON *sift__js_with_siblings(conv *c, const cJSON *s, const cJSON *alt);
const cJSON *sift__js_resolve_pointer(conv *c, const char *ref);
const char *sift__js_visit_ref(conv *c, const char *ref);
bool sift__js_ref_has_siblings(const cJSON *s);
cJSON *sift__js_simplify(conv *c, const cJSON *s, bool *unsat);
const char *sift__js_visit_all_of(conv *c, const cJSON *s, const char *name, const char *rule_name);

/* json_schema_object.c */
/* a trie of strings by code point (the keys other keys must not spell; the strings a `not`
 * excludes) */
typedef struct nsnode {
    uint32_t cp;
    bool end, all; /* end: a listed string ends here; all: every string below too (keys) */
    struct nsnode *kids, *next; /* children sorted by cp */
} nsnode;
void sift__js_ns_free(nsnode *t);
nsnode *sift__js_ns_child(nsnode *parent, uint32_t cp); /* found or added; NULL out of memory */
long sift__js_get_count(conv *c, const cJSON *s, const char *key, long dflt);
char *sift__js_join_name(const char *a, const char *b);
const char *sift__js_visit_property_names(conv *c, const cJSON *s, const char *name, const char *rule_name);
const char *sift__js_build_object(conv *c, const cJSON *props, const cJSON *required, const cJSON *additional, const cJSON *pattern_props, const char *name, const char *rule_name, long min_props, long max_props);

/* json_schema_array.c */
const char *sift__js_visit_array(conv *c, const cJSON *s, const char *name, const char *rule_name);

/* json_schema_scalar.c */
const char *sift__js_visit_string(conv *c, const cJSON *s, const char *rule_name);
const char *sift__js_visit_integer(conv *c, const cJSON *s, const char *rule_name);
bool sift__js_bound_text(double d, char *out, size_t cap);
const char *sift__js_visit_number(conv *c, const cJSON *s, const char *rule_name);
const char *sift__js_visit_multiple_of(conv *c, const cJSON *s, const cJSON *mul, bool integer, const char *rule_name);

/* regex_length.c: a pattern with minLength / maxLength (mx < 0: none) as rules counting the
 * characters, a JSON string (quoted) or its inside only; *handled false (and no error) when
 * the pattern or the counts are beyond it */
const char *sift__js_pattern_with_length(conv *c, const char *pat, size_t n, long mn, long mx, const char *rule_name, bool quoted, bool *handled);

#endif
