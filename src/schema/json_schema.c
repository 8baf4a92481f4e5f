/*
 * json_schema.c - JSON schema -> GBNF, in the style of llama.cpp's json-schema-to-grammar.
 *
 * The output looks like llama.cpp's (so grammars can be compared and moved between the
 * two): one rule per schema node, named after its path (`root`, `root-name-kv`, `item`, ...),
 * built-in rules `space`, `string`, `char`, `number`, `integer`, `value`, ... added on
 * demand, every value followed by `space` (at most two newlines and 20 blanks: a model
 * cannot stall in whitespace), rules printed in name order.
 *
 * What is converted (and how):
 *   type                 a name or a list of names (a union)
 *   const, enum          the listed values that validate against the whole schema (type, not,
 *                        allOf, bounds, pattern, ... beside them: value_check.c decides each
 *                        value, else the keyword is refused), also when the enum sits in a
 *                        part of allOf; numbers in every decimal spelling of their value,
 *                        containers with JSON's whitespace
 *   anyOf, oneOf         a union; oneOf only when its alternatives are proven disjoint (kinds,
 *                        values, a required const property), else refused; alternatives that
 *                        match nothing are left out
 *   allOf                objects merged (properties, required, additionalProperties), enums
 *                        intersected; anything else is an error
 *   $ref                 JSON pointers into this document: #, #/$defs/x, #/definitions/x,
 *                        #/properties/..., recursive references become recursive rules
 *   object               JSON Schema's semantics by default: the declared properties in any
 *                        order, each at most once (JSON Schema has no property order), when
 *                        the object declares at most 7 (a rule per set of keys written,
 *                        any_order_object; 1024 such rules per schema at most); bigger
 *                        objects keep the schema's order (a documented departure, as in
 *                        LLGuidance / XGrammar / llama.cpp: valid objects in another order are
 *                        rejected, nothing invalid is accepted). Required ones present,
 *                        optional ones skipped freely (and left out
 *                        when no value fits them); a missing additionalProperties allows
 *                        other keys (any value), anywhere between the declared ones; additionalProperties
 *                        false / true / a schema; extra keys always differ from the declared
 *                        ones; required names that `properties` does not declare are present
 *                        with what additionalProperties allows; patternProperties (pattern keys with their schema,
 *                        the other keys through pattern_keys.c: literal names / prefixes or
 *                        the complement of a one-atom pattern); minProperties / maxProperties
 *                        counted when only other keys are allowed, minProperties 1 beside
 *                        declared ones; additionalProperties beside anyOf alternatives that
 *                        declare other properties applies to those properties too;
 *                        dependentRequired / dependencies (arrays of names) checked with the key
 *                        sets of any order (object_deps: declared names only, objects of at most
 *                        7 properties, else refused).
 *                        SIFT_JSON_SCHEMA_LLAMA: llama.cpp's layout instead (required first,
 *                        optional ones in any subset keeping their order; a missing
 *                        additionalProperties generates no extra keys; undeclared required
 *                        names are an error).
 *   array                items with minItems / maxItems; prefixItems (or draft-07's items
 *                        array) as a tuple, then `items` (additionalItems in draft-07; missing:
 *                        any value); minItems below the tuple's length makes its tail optional
 *   string               minLength / maxLength (characters, an escape counts as one; above
 *                        2000 as 1000-character chunk rules, up to 2,000,000); format date,
 *                        time, date-time, uuid, email, hostname, ipv4, uri (other standard
 *                        formats are refused, non-standard ones are annotations); pattern
 *                        (below), with a length when it is one atom ^A{m,n}$
 *   integer              minimum / maximum / exclusiveMinimum / exclusiveMaximum, exactly,
 *                        digit by digit; unbounded integers have at most 16 digits (llama.cpp)
 *   number               the same bounds on decimals (number_range.c; the exponent form only
 *                        where its sign decides: one bound, 0 on its open side);
 *                        multipleOf 1 means the integers
 *   boolean, null
 * A schema without `type`: its keywords constrain the values of their kind only (properties
 * -> objects, items -> arrays, pattern / minLength / format -> strings, minimum / multipleOf
 * -> numbers), values of the other kinds pass ({"format": "positiveInteger"} is any value,
 * {"properties": {...}} also takes 1 or "x"), as JSON Schema says (visit_untyped).
 * SIFT_JSON_SCHEMA_LLAMA keeps llama.cpp's reading: the type the first such keyword implies.
 * Annotations (title, description, default, examples, $schema, $id, $comment, deprecated,
 * readOnly, writeOnly, content*) and unknown keywords are ignored, as JSON Schema says.
 *
 * Keywords that constrain values but cannot be expressed - not, if/then/else, uniqueItems,
 * contains, multipleOf other than 1, propertyNames, min/maxProperties beside declared
 * properties, dependentSchemas (and dependencies' schemas), unevaluated*, $dynamicRef, ...
 * (object keywords are ignored for values of other types; outside const / enum, where
 * value_check.c decides them) - are errors (SIFT_E_UNSUPPORTED, with the keyword's JSON
 * pointer), so that every text the grammar accepts validates against the schema. With
 * SIFT_JSON_SCHEMA_LENIENT they are ignored and
 * the grammar accepts a superset. Also refused: a $ref cycle that comes back to itself before
 * any value is written ({"$ref": "#"}: the grammar would be left-recursive; the converter
 * parses its own output when it has a $ref cycle, so what it returns always parses), invalid UTF-8, raw control
 * characters in strings, and \u0000 (cJSON keeps strings NUL-terminated).
 *
 * pattern: an ECMA-262 regular expression over the string's characters, translated by
 * regex_to_gbnf.c (the subset and its refusals are described there); '^' / '$' anchor at the
 * ends, an unanchored pattern may be surrounded by any characters (JSON Schema searches
 * patterns). The GBNF text itself is written with gbnf_writer.c.
 */
#include <ctype.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/status.h"
#include "schema/gbnf_writer.h"
#include "grammar/alloc_bits_utf8.h"
#include "sift.h"

#define JS_MAX_DEPTH 256 /* nested schemas */
/* ---- the converter ---------------------------------------------------------------------------- */

typedef struct {
    char *name, *body;
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
    const char *resolving[JS_MAX_DEPTH]; /* $refs being expanded */
    int n_resolving;
    bool ref_cycle; /* a $ref came back to one being expanded: the output may be left-recursive */
    char path[512]; /* JSON pointer of the node being converted */
    size_t path_len;
    int depth;
    bool unsat; /* the error is "this schema matches nothing" (an optional property may then be left out) */
    size_t any_order_states; /* rules spent on objects whose keys come in any order (any_order_object) */
    const cJSON *dep_required; /* dependentRequired (or dependencies' arrays) for the next build_object */
} conv;

__attribute__((format(printf, 3, 4))) static const char *cfail(conv *c, int status, const char *fmt, ...)
{
    if (c->status != SIFT_OK) return NULL;
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    c->status = status;
    sift__error_set(c->err, status, "%s: %s", c->path_len ? c->path : "(root)", msg);
    return NULL;
}
static const char *coom(conv *c) { return cfail(c, SIFT_E_NOMEM, "out of memory"); }

static size_t path_push(conv *c, const char *seg)
{
    size_t old = c->path_len;
    int n = snprintf(c->path + old, sizeof c->path - old, "/%s", seg);
    if (n > 0) c->path_len = old + (size_t)n < sizeof c->path ? old + (size_t)n : sizeof c->path - 1;
    return old;
}
static void path_pop(conv *c, size_t old)
{
    c->path_len = old;
    c->path[old] = 0;
}

/* Rule names: letters, digits and '-' (runs of anything else become one '-'). */
static char *sanitize(const char *name)
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

static uint64_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static jrule *find_rule(conv *c, const char *name)
{
    if (!c->rule_ht_cap) return NULL;
    for (size_t k = name_hash(name) & (c->rule_ht_cap - 1);; k = (k + 1) & (c->rule_ht_cap - 1)) {
        uint32_t i = c->rule_ht[k];
        if (!i) return NULL;
        if (!strcmp(c->rules[i - 1].name, name)) return &c->rules[i - 1];
    }
}

/* Index rules[i] by name (rules are only appended; the final sort comes after the last lookup). */
static bool index_rule(conv *c, size_t i)
{
    if ((i + 1) * 2 > c->rule_ht_cap) {
        size_t nc = c->rule_ht_cap ? c->rule_ht_cap * 2 : 64;
        uint32_t *t = sift__gx_calloc(nc, sizeof *t);
        if (!t) return false;
        sift__gx_free(c->rule_ht);
        c->rule_ht = t;
        c->rule_ht_cap = nc;
        for (size_t j = 0; j < i; j++) {
            size_t k = name_hash(c->rules[j].name) & (nc - 1);
            while (t[k]) k = (k + 1) & (nc - 1);
            t[k] = (uint32_t)j + 1;
        }
    }
    size_t k = name_hash(c->rules[i].name) & (c->rule_ht_cap - 1);
    while (c->rule_ht[k]) k = (k + 1) & (c->rule_ht_cap - 1);
    c->rule_ht[k] = (uint32_t)i + 1;
    return true;
}

/* Add rule `name ::= body`; an existing rule with the same name and body is reused, a
 * different one gets a numbered name. Returns the name used (owned by the table). Takes
 * ownership of body. */
static const char *add_rule(conv *c, const char *name, char *body)
{
    if (!body) return coom(c);
    char *base = sanitize(name);
    if (!base) {
        sift__gx_free(body);
        return coom(c);
    }
    char *cand = base;
    for (int i = 0;; i++) {
        jrule *r = find_rule(c, cand);
        if (!r) break;
        if (!strcmp(r->body, body)) {
            if (cand != base) sift__gx_free(cand);
            sift__gx_free(base);
            sift__gx_free(body);
            return r->name;
        }
        if (cand != base) sift__gx_free(cand);
        size_t n = strlen(base) + 16;
        cand = sift__gx_malloc(n);
        if (!cand) {
            sift__gx_free(base);
            sift__gx_free(body);
            return coom(c);
        }
        snprintf(cand, n, "%s%d", base, i);
    }
    if (cand != base) sift__gx_free(base);
    if (c->n_rules == c->cap_rules) {
        size_t nc = c->cap_rules ? c->cap_rules * 2 : 16;
        jrule *p = sift__gx_realloc(c->rules, nc * sizeof *p);
        if (!p) {
            sift__gx_free(cand);
            sift__gx_free(body);
            return coom(c);
        }
        c->rules = p;
        c->cap_rules = nc;
    }
    c->rules[c->n_rules++] = (jrule){cand, body};
    if (!index_rule(c, c->n_rules - 1)) return coom(c);
    return cand;
}

static char *dupstr(const char *s)
{
    size_t n = strlen(s);
    char *d = sift__gx_malloc(n + 1);
    if (d) memcpy(d, s, n + 1);
    return d;
}

/* ---- built-in rules --------------------------------------------------------------------------- */

typedef struct {
    const char *name, *body, *deps[3];
} builtin;

static const builtin BUILTINS[] = {
    {"space", "| \" \" | \"\\n\"{1,2} [ \\t]{0,20}", {0}},
    {"boolean", "(\"true\" | \"false\") space", {"space"}},
    {"null", "\"null\" space", {"space"}},
    {"decimal-part", "[0-9]{1,16}", {0}},
    {"integral-part", "[0] | [1-9] [0-9]{0,15}", {0}},
    {"number", "(\"-\"? integral-part) (\".\" decimal-part)? ([eE] [-+]? integral-part)? space",
     {"integral-part", "decimal-part", "space"}},
    {"integer", "(\"-\"? integral-part) space", {"integral-part", "space"}},
    /* llama.cpp's char, except that a \u escape is a UTF-16 code unit that is not a surrogate,
     * or a high + low surrogate pair (one character): lone surrogates are refused by strict
     * JSON parsers */
    {"char", "[^\"\\\\\\x7F\\x00-\\x1F] | [\\\\] ([\"\\\\/bfnrt] | \"u\" ([0-9a-cA-Ce-fE-F] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2} | [dD] [89abAB] [0-9a-fA-F]{2} \"\\\\u\" [dD] [c-fC-F] [0-9a-fA-F]{2}))", {0}},
    {"string", "\"\\\"\" char* \"\\\"\" space", {"char", "space"}},
    {"value", "object | array | string | number | boolean | null",
     {"object", "array", "string"}}, /* number, boolean, null: below */
    {"object", "\"{\" space ( string \":\" space value (\",\" space string \":\" space value)* )? \"}\" space",
     {"string", "value", "space"}},
    {"array", "\"[\" space ( value (\",\" space value)* )? \"]\" space", {"value", "space"}},
    {"uuid", "\"\\\"\" [0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{12} \"\\\"\" space",
     {"space"}},
    /* calendar dates only (no 2020-02-31, no year 0000): 31-day months, 30-day months,
     * February to the 28th, and the 29th in leap years (divisible by 4, centuries by 400) */
    {"date", "date-year \"-\" ( ( \"0\" [13578] | \"1\" [02] ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"3\" [01] ) | "
             "( \"0\" [469] | \"11\" ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"30\" ) | \"02-\" ( \"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8] ) ) | "
             "date-leap \"-02-29\"", {"date-year", "date-leap"}},
    {"date-year", "[1-9] [0-9]{3} | \"0\" ( [1-9] [0-9]{2} | \"0\" ( [1-9] [0-9] | \"0\" [1-9] ) )", {0}},
    {"date-leap", "[0-9] [0-9] ( \"0\" [48] | [2468] [048] | [13579] [26] ) | ( \"0\" [48] | [2468] [048] | [13579] [26] ) \"00\"", {0}},
    /* formats as subsets of what every validator accepts (a text the grammar allows is valid;
     * some valid texts, e.g. quoted local parts or IPv6 hosts, are not generated) */
    {"email", "\"\\\"\" email-atom ( \".\" email-atom )* \"@\" host-name \"\\\"\" space", {"email-atom", "host-name", "space"}},
    {"email-atom", "[A-Za-z0-9_%+-]+", {0}},
    {"host-label", "[A-Za-z0-9] ( [A-Za-z0-9-]{0,60} [A-Za-z0-9] )?", {0}},
    {"host-name", "( host-label \".\" ){0,3} [A-Za-z] ( [A-Za-z0-9-]{0,60} [A-Za-z0-9] )?", {"host-label"}},
    {"hostname", "\"\\\"\" host-name \"\\\"\" space", {"host-name", "space"}},
    {"ipv4-octet", "[0-9] | [1-9] [0-9] | \"1\" [0-9] [0-9] | \"2\" [0-4] [0-9] | \"25\" [0-5]", {0}},
    {"ipv4", "\"\\\"\" ipv4-octet \".\" ipv4-octet \".\" ipv4-octet \".\" ipv4-octet \"\\\"\" space", {"ipv4-octet", "space"}},
    {"uri-char", "[A-Za-z0-9._~!$&'()*+,;=:@-] | \"%\" [0-9A-Fa-f] [0-9A-Fa-f]", {0}},
    {"uri", "\"\\\"\" [A-Za-z] [A-Za-z0-9+.-]* \"://\" host-name ( \":\" [0-9]{1,5} )? ( \"/\" uri-char* )* ( \"?\" ( uri-char | \"/\" | \"?\" )* )? "
            "( \"#\" ( uri-char | \"/\" | \"?\" )* )? \"\\\"\" space", {"host-name", "uri-char", "space"}},
    {"time", "([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]{3} )? ( \"Z\" | ( \"+\" | \"-\" ) ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )",
     {0}},
    {"date-time", "date \"T\" time", {"date", "time"}},
    {"date-string", "\"\\\"\" date \"\\\"\" space", {"date", "space"}},
    {"time-string", "\"\\\"\" time \"\\\"\" space", {"time", "space"}},
    {"date-time-string", "\"\\\"\" date-time \"\\\"\" space", {"date-time", "space"}},
};

static const builtin *find_builtin(const char *name)
{
    for (size_t i = 0; i < sizeof BUILTINS / sizeof *BUILTINS; i++)
        if (!strcmp(BUILTINS[i].name, name)) return &BUILTINS[i];
    return NULL;
}

static bool is_reserved(const char *name) { return !strcmp(name, "root") || find_builtin(name) != NULL; }

/* Make sure built-in rule `name` (and what it uses) exists; returns its name. */
static const char *use_builtin(conv *c, const char *name)
{
    jrule *have = find_rule(c, name);
    if (have) return have->name;
    const builtin *b = find_builtin(name);
    if (!b) return cfail(c, SIFT_E_INVAL, "internal: no built-in rule '%s'", name);
    const char *body = b->body;
    /* JSON's exponent is any digits ("1e-06" is valid JSON); llama.cpp's rule spells it as an
     * integral part (no leading zero), which SIFT_JSON_SCHEMA_LLAMA keeps */
    if (!strcmp(name, "number") && !(c->flags & SIFT_JSON_SCHEMA_LLAMA))
        body = "(\"-\"? integral-part) (\".\" decimal-part)? ([eE] [-+]? decimal-part)? space";
    const char *r = add_rule(c, name, dupstr(body));
    if (!r) return NULL;
    for (int k = 0; k < 3 && b->deps[k]; k++)
        if (!use_builtin(c, b->deps[k])) return NULL;
    if (!strcmp(name, "value")) {
        if (!use_builtin(c, "number") || !use_builtin(c, "boolean") || !use_builtin(c, "null")) return NULL;
    }
    return find_rule(c, name)->name;
}

/* The literal of a JSON value's compact text (cJSON's printer, which escapes as JSON does). */
static bool put_json_literal(conv *c, sift__gbnf_sbuf *b, const cJSON *v)
{
    char *txt = cJSON_PrintUnformatted(v);
    if (!txt) return coom(c), false;
    sift__gbnf_put_literal(b, txt, strlen(txt));
    cJSON_free(txt);
    return true;
}

/* The rule body for a string matching `pattern` (regex_to_gbnf.c does the expression). */
static char *pattern_body(conv *c, const char *pat, size_t n)
{
    bool anch_start, anch_end;
    sift_error e2 = {0};
    char *inner = sift__schema_regex_to_gbnf(pat, n, &anch_start, &anch_end, &e2);
    if (!inner) {
        cfail(c, e2.status ? e2.status : SIFT_E_NOMEM, "pattern, %s", e2.msg);
        return NULL;
    }
    sift__gbnf_sbuf b = {0};
    sift__gbnf_sb_puts(&b, "\"\\\"\" ");
    if (!anch_start) sift__gbnf_sb_puts(&b, "char* ");
    sift__gbnf_sb_puts(&b, "(");
    sift__gbnf_sb_puts(&b, inner);
    sift__gbnf_sb_puts(&b, ")");
    if (!anch_end) sift__gbnf_sb_puts(&b, " char*");
    sift__gbnf_sb_puts(&b, " \"\\\"\" space");
    sift__gx_free(inner);
    if ((!anch_start || !anch_end) && !use_builtin(c, "char")) {
        sift__gbnf_sb_free(&b);
        return NULL;
    }
    return sift__gbnf_sb_take(&b);
}

/* ---- keywords ---------------------------------------------------------------------------------- */

static const char *const ANNOTATIONS[] = {
    "title", "description", "default", "examples", "$schema", "$id", "$comment", "deprecated", "readOnly",
    "writeOnly", "contentMediaType", "contentEncoding", "contentSchema", "$defs", "definitions", "$anchor",
    "$vocabulary", "discriminator", "nullable", "example", "id", NULL};
static const char *const UNSUPPORTED[] = {
    "not", "if", "then", "else", "uniqueItems", "contains", "minContains", "maxContains",
    "propertyNames", "dependentRequired",
    "dependentSchemas", "dependencies", "unevaluatedProperties", "unevaluatedItems", "$dynamicRef",
    "$recursiveRef", NULL};

/* Standard formats a validator checks but that have no grammar here: refused, never a
 * plain string (which would accept invalid values). */
static const char *const FORMATS_REFUSED[] = {
    "ipv6", "uri-reference", "iri", "iri-reference", "idn-email", "idn-hostname", "uri-template", "json-pointer",
    "relative-json-pointer", "regex", "duration", NULL};

static bool in_list(const char *const *l, const char *s)
{
    for (; *l; l++)
        if (!strcmp(*l, s)) return true;
    return false;
}

/* dependentRequired, or draft-07's dependencies when every value is an array of names */
static bool dep_arrays(const cJSON *k, const char *key)
{
    if (strcmp(key, "dependentRequired") && strcmp(key, "dependencies")) return false;
    if (!cJSON_IsObject(k)) return false;
    for (const cJSON *e = k->child; e; e = e->next)
        if (!cJSON_IsArray(e)) return false;
    return true;
}

/* strict mode: refuse keywords that constrain values but cannot be expressed */
static bool check_keywords(conv *c, const cJSON *s, const char *type)
{
    if (c->flags & SIFT_JSON_SCHEMA_LENIENT) return true;
    for (const cJSON *k = s->child; k; k = k->next) {
        const char *key = k->string;
        bool bad = in_list(UNSUPPORTED, key);
        bool dep = !strcmp(key, "dependentRequired") || !strcmp(key, "dependencies") || !strcmp(key, "dependentSchemas");
        if (bad && dep && type && strcmp(type, "object")) bad = false; /* they constrain objects only */
        if (bad && type && !strcmp(type, "object") && dep_arrays(k, key)) bad = false; /* build_object decides */
        if (bad) {
            size_t o = path_push(c, key);
            cfail(c, SIFT_E_UNSUPPORTED, "keyword '%s' cannot be expressed in a grammar (SIFT_JSON_SCHEMA_LENIENT ignores it)", key);
            path_pop(c, o);
            return false;
        }
    }
    return true;
}

static const cJSON *resolve_pointer(conv *c, const char *ref);

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
        const cJSON *t = resolve_pointer(c, ref->valuestring);
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
 * when both allow only listed values and share none, or (objects) when one property that
 * both require is a const / enum with no value in common. Otherwise the grammar (a union)
 * would also accept what matches two of them: refused. */
static const cJSON *vc_resolve(void *ctx, const char *ref);

/* a schema that is only a $ref: its target (a few levels), else itself */
static const cJSON *deref(conv *c, const cJSON *s)
{
    for (int i = 0; i < 8 && cJSON_IsObject(s) && cJSON_GetArraySize(s) == 1; i++) {
        const cJSON *ref = cJSON_GetObjectItemCaseSensitive(s, "$ref");
        const cJSON *t = cJSON_IsString(ref) ? vc_resolve(c, ref->valuestring) : NULL;
        if (!t) break;
        s = t;
    }
    return s;
}

static bool disjoint(conv *c, const cJSON *a, const cJSON *b)
{
    a = deref(c, a);
    b = deref(c, b);
    if (!(schema_kinds(c, a, 0) & schema_kinds(c, b, 0))) return true;
    bool sa = false, sb = false;
    const cJSON *va = schema_values(a, &sa), *vb = schema_values(b, &sb);
    if (va && vb && (sa || cJSON_IsArray(va)) && (sb || cJSON_IsArray(vb))) return !values_overlap(va, sa, vb, sb);
    const cJSON *pa = cJSON_GetObjectItemCaseSensitive(a, "properties"), *pb = cJSON_GetObjectItemCaseSensitive(b, "properties");
    const cJSON *ra = cJSON_GetObjectItemCaseSensitive(a, "required"), *rb = cJSON_GetObjectItemCaseSensitive(b, "required");
    if (!(schema_kinds(c, a, 0) & schema_kinds(c, b, 0) & ~K_OBJ) && cJSON_IsObject(pa) && cJSON_IsObject(pb)) {
        for (const cJSON *r = cJSON_IsArray(ra) ? ra->child : NULL; r; r = r->next) {
            if (!cJSON_IsString(r)) continue;
            bool in_b = false;
            for (const cJSON *q = cJSON_IsArray(rb) ? rb->child : NULL; q; q = q->next) in_b |= cJSON_IsString(q) && !strcmp(q->valuestring, r->valuestring);
            if (!in_b) continue;
            const cJSON *xa = deref(c, cJSON_GetObjectItemCaseSensitive(pa, r->valuestring)), *xb = deref(c, cJSON_GetObjectItemCaseSensitive(pb, r->valuestring));
            bool s1 = false, s2 = false;
            const cJSON *v1 = schema_values(xa, &s1), *v2 = schema_values(xb, &s2);
            if (v1 && v2 && (s1 || cJSON_IsArray(v1)) && (s2 || cJSON_IsArray(v2)) && !values_overlap(v1, s1, v2, s2)) return true;
        }
    }
    return false;
}

/* Does a const / enum value have the schema's `type` (a name or a list)? */
static bool value_fits(const cJSON *v, const cJSON *type)
{
    if (!type) return true;
    if (cJSON_IsArray(type)) {
        for (const cJSON *t = type->child; t; t = t->next)
            if (value_fits(v, t)) return true;
        return false;
    }
    if (!cJSON_IsString(type)) return true;
    const char *t = type->valuestring;
    if (!strcmp(t, "integer")) return cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble) && fabs(v->valuedouble) < 9e15;
    return (kind_of_type(t) & kind_of_value(v)) != 0;
}

/* Keywords beside const / enum that would also constrain the listed values: not checked
 * value by value here, so refused rather than ignored. */
static bool values_checked(conv *c, const cJSON *s)
{
    static const char *const CONSTRAINING[] = {
        "minLength", "maxLength", "pattern", "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
        "minItems", "maxItems", "items", "prefixItems", "properties", "required", "additionalProperties", "allOf", NULL};
    if (c->flags & SIFT_JSON_SCHEMA_LENIENT) return true;
    for (const cJSON *k = s->child; k; k = k->next)
        if (in_list(CONSTRAINING, k->string) || (!strcmp(k->string, "enum") && cJSON_GetObjectItemCaseSensitive(s, "const"))) {
            size_t o = path_push(c, k->string);
            cfail(c, SIFT_E_UNSUPPORTED, "keyword '%s' beside const / enum is not checked against the values", k->string);
            path_pop(c, o);
            return false;
        }
    return true;
}

/* Keywords beside anyOf / oneOf that do not constrain the value. */
static bool is_inert(const char *k)
{
    return in_list(ANNOTATIONS, k) || !strcmp(k, "anyOf") || !strcmp(k, "oneOf");
}

/* An alternative together with the keywords beside the anyOf / oneOf (both must hold):
 * the alternative's keywords plus the siblings', properties merged and required lists
 * joined. A keyword both sides give differently (other than those) is refused, and so is
 * additionalProperties on either side when the property sets differ (it would then mean
 * different things). Returns a new cJSON (the caller deletes it) or NULL with the error set. */
static cJSON *with_siblings(conv *c, const cJSON *s, const cJSON *alt)
{
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(alt, "$ref");
    if (cJSON_IsString(ref) && cJSON_GetArraySize(alt) == 1) {
        alt = resolve_pointer(c, ref->valuestring);
        if (!alt) return NULL;
    }
    if (cJSON_IsTrue(alt)) alt = NULL;
    if (alt && !cJSON_IsObject(alt)) return cfail(c, SIFT_E_UNSUPPORTED, "anyOf / oneOf: an alternative beside other keywords must be an object schema"), NULL;
    cJSON *m = alt ? cJSON_Duplicate(alt, 1) : cJSON_CreateObject();
    if (!m) return coom(c), NULL;
    for (const cJSON *k = s->child; k; k = k->next) {
        if (is_inert(k->string)) continue;
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
        if (!strcmp(k->string, "type") && cJSON_IsString(have) && cJSON_IsString(k) &&
            ((!strcmp(have->valuestring, "integer") && !strcmp(k->valuestring, "number")) ||
             (!strcmp(have->valuestring, "number") && !strcmp(k->valuestring, "integer")))) {
            cJSON_ReplaceItemInObjectCaseSensitive(m, "type", cJSON_CreateString("integer"));
            continue;
        }
        cJSON_Delete(m);
        size_t o = path_push(c, k->string);
        cfail(c, SIFT_E_UNSUPPORTED, "keyword '%s' both beside anyOf / oneOf and in an alternative, differently", k->string);
        path_pop(c, o);
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
            return cfail(c, SIFT_E_UNSUPPORTED, "additionalProperties with anyOf / oneOf alternatives that declare other properties"), NULL;
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
                        cfail(c, SIFT_E_INVAL, "required property '%s' is not allowed by additionalProperties: the alternative matches nothing", p->string);
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
    return coom(c), NULL;
}

static const char *visit(conv *c, const cJSON *s, const char *name, const char *force_type);

/* Resolve a $ref (a JSON pointer into the document); returns the schema node or NULL. */
static const cJSON *resolve_pointer(conv *c, const char *ref)
{
    if (ref[0] != '#') return cfail(c, SIFT_E_UNSUPPORTED, "$ref '%s': only references into this document (#...) are supported", ref), NULL;
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
        if (!t) return cfail(c, SIFT_E_INVAL, "$ref '%s' does not resolve", ref), NULL;
    }
    if (*p) return cfail(c, SIFT_E_INVAL, "$ref '%s' is not a JSON pointer", ref), NULL;
    return t;
}

static const char *visit_ref(conv *c, const char *ref)
{
    /* only '#...' pointers name a rule; resolve_pointer() words the error for the rest
     * (and "" must not reach the name below: ref + 1 would be past its end) */
    if (ref[0] != '#') return (void)resolve_pointer(c, ref), NULL;
    /* the rule of a reference is named after it: ref-defs-Name */
    char nm[300];
    snprintf(nm, sizeof nm, "ref%s", ref + 1);
    char *sn = sanitize(nm);
    if (!sn) return coom(c);
    jrule *have = find_rule(c, sn);
    for (int i = 0; i < c->n_resolving; i++)
        if (!strcmp(c->resolving[i], ref)) {
            /* recursion: reference the rule that is being built */
            c->ref_cycle = true;
            const char *out = NULL;
            jrule *r = find_rule(c, sn);
            if (r) out = r->name;
            else {
                /* placeholder, filled in when the outer visit finishes */
                out = add_rule(c, sn, dupstr("\"\""));
            }
            sift__gx_free(sn);
            return out;
        }
    if (have) {
        sift__gx_free(sn);
        return have->name;
    }
    const cJSON *t = resolve_pointer(c, ref);
    if (!t) {
        sift__gx_free(sn);
        return NULL;
    }
    if (c->n_resolving >= JS_MAX_DEPTH) {
        sift__gx_free(sn);
        return cfail(c, SIFT_E_INVAL, "$ref chain too deep");
    }
    c->resolving[c->n_resolving++] = ref;
    const char *inner = visit(c, t, sn, NULL);
    c->n_resolving--;
    if (!inner) {
        sift__gx_free(sn);
        return NULL;
    }
    /* if a placeholder was created for recursion, make it the alias of the real rule */
    jrule *ph = find_rule(c, sn);
    if (ph && strcmp(ph->name, inner)) {
        sift__gx_free(ph->body);
        ph->body = dupstr(inner);
        if (!ph->body) {
            sift__gx_free(sn);
            return coom(c);
        }
        sift__gx_free(sn);
        return ph->name;
    }
    sift__gx_free(sn);
    return inner;
}

static long get_count(conv *c, const cJSON *s, const char *key, long dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, key);
    if (!v) return dflt;
    /* range first: converting an out-of-range double to an integer is undefined */
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0 && v->valuedouble <= 1e9) ||
        v->valuedouble != (double)(long)v->valuedouble) {
        size_t o = path_push(c, key);
        cfail(c, SIFT_E_INVAL, "'%s' must be a non-negative integer", key);
        path_pop(c, o);
        return -2;
    }
    return (long)v->valuedouble;
}

static char *join_name(const char *a, const char *b)
{
    size_t n = strlen(a) + strlen(b) + 2;
    char *s = sift__gx_malloc(n);
    if (s) snprintf(s, n, "%s%s%s", a, *a ? "-" : "", b);
    return s;
}

/* The keys of additional properties must differ from the declared ones: a rule matching
 * the JSON strings that are none of `names` (llama.cpp's _not_strings, over code points,
 * and without its flaw of also excluding every proper prefix of a name). */
typedef struct nsnode {
    uint32_t cp;
    bool end, all; /* all: a prefix, every string below is excluded too */
    struct nsnode *kids, *next; /* children sorted by cp */
} nsnode;

static void ns_free(nsnode *t)
{
    while (t) {
        nsnode *n = t->next;
        ns_free(t->kids);
        sift__gx_free(t);
        t = n;
    }
}

static nsnode *ns_child(nsnode *parent, uint32_t cp)
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
        int n = sift__gx_utf8_encode(k->cp, u);
        sift__gbnf_put_class_char(&rejects, k->cp);
        if (k->all) continue; /* nothing that goes through k is left */
        if (!first) sift__gbnf_sb_puts(&b, " | ");
        first = false;
        sift__gbnf_put_literal(&b, u, (size_t)n);
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
    char *rn = join_name(base, nm);
    const char *r = rn ? add_rule(c, rn, sift__gbnf_sb_take(&b)) : coom(c);
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
        return (c->unsat = c->status == SIFT_OK, cfail(c, SIFT_E_INVAL, "minProperties: no property is allowed: the schema matches nothing"));
    bool all_req = !extra_kv;
    for (size_t k = 0; k < n; k++) all_req &= req[k];
    if (!use_builtin(c, "space")) return NULL;
    if (all_req) { /* a plain sequence */
        sift__gbnf_sb_puts(&b, "\"{\" space ");
        for (size_t k = 0; k < n; k++) sift__gbnf_sb_printf(&b, "%s%s", k ? " \",\" space " : "", kv[k]);
        sift__gbnf_sb_puts(&b, n ? " \"}\" space" : "\"}\" space");
        return add_rule(c, rule_name, sift__gbnf_sb_take(&b));
    }
    if (extra_kv && n == 0) {
        /* only other keys: min/maxProperties count them */
        sift__gbnf_sb_puts(&b, "\"{\" space ");
        if (min_props > 0 || max_props >= 0) sift__gbnf_put_repetition(&b, extra_kv, min_props, max_props, "\",\" space");
        else sift__gbnf_sb_printf(&b, "( %s ( \",\" space %s )* )?", extra_kv, extra_kv);
        sift__gbnf_sb_puts(&b, " \"}\" space");
        return add_rule(c, rule_name, sift__gbnf_sb_take(&b));
    }
    if (extra_kv) {
        sift__gbnf_sb_printf(&b, "( \",\" space %s )*", extra_kv);
        char *rn = join_name(rule_name, "extras");
        ext = rn ? add_rule(c, rn, sift__gbnf_sb_take(&b)) : coom(c);
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
        rn = join_name(rule_name, nm);
        nrest = rn ? add_rule(c, rn, sift__gbnf_sb_take(&b)) : coom(c);
        sift__gx_free(rn);
        sift__gbnf_sb_free(&b);
    first_k:
        sift__gbnf_sb_printf(&b, "%s%s%s%s%s", kv[k], ext ? " " : "", ext ? ext : "", rest ? " " : "", rest ? rest : "");
        if (!req[k] && (first || !nonempty)) sift__gbnf_sb_printf(&b, " | %s", first ? first : "\"\"");
        snprintf(nm, sizeof nm, "p%zu-first", k);
        rn = join_name(rule_name, nm);
        first = rn ? add_rule(c, rn, sift__gbnf_sb_take(&b)) : coom(c);
        sift__gx_free(rn);
        sift__gbnf_sb_free(&b);
        rest = nrest;
    }
    if (c->status != SIFT_OK) return NULL;
    if (ext) sift__gbnf_sb_printf(&b, "\"{\" space ( %s | %s %s%s%s ) \"}\" space", first, extra_kv, ext, rest ? " " : "", rest ? rest : "");
    else sift__gbnf_sb_printf(&b, "\"{\" space %s \"}\" space", first ? first : "");
    return add_rule(c, rule_name, sift__gbnf_sb_take(&b));
}

/* JSON Schema has no property order, so the exact grammar of an object takes its declared
 * keys in any order, each at most once, the required ones all present. A context-free
 * grammar for that needs a state per set of keys already written (the sets are the
 * language's Myhill-Nerode classes: no smaller grammar exists), so it is built only for
 * objects with at most ANY_ORDER_KEYS declared keys, and while the schema's whole budget of
 * ANY_ORDER_STATES states lasts; bigger objects keep the schema's order (ordered_object: a
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
    if (!st || !use_builtin(c, "space")) return sift__gx_free(st), st ? NULL : coom(c);
    if (extra_kv) {
        size_t len = strlen(extra_kv) + 32;
        xs = sift__gx_malloc(len);
        if (!xs) return sift__gx_free(st), coom(c);
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
        char *rn = join_name(rule_name, nm);
        st[S] = rn ? add_rule(c, rn, sift__gbnf_sb_take(&b)) : coom(c);
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
        r = add_rule(c, rule_name, sift__gbnf_sb_take(&b));
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
    if (n == 0) return use_builtin(c, "string");
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
                    cfail(c, SIFT_E_UNSUPPORTED, "property name '%s' (escapes or invalid UTF-8) with additionalProperties", ex[pi].s);
                    ok = false;
                    break;
                }
                continue;
            }
            if (!(nd = ns_child(nd, (uint32_t)cp))) ok = false;
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
        const char *char_rule = use_builtin(c, "char");
        char *kn = join_name(sub, "k");
        if (char_rule && kn && use_builtin(c, "space")) {
            unsigned counter = 0;
            const char *body_rule = not_strings_rule(c, t, kn, char_rule, &counter);
            if (body_rule) {
                sift__gbnf_sbuf b = {0};
                sift__gbnf_sb_printf(&b, "\"\\\"\" %s%s \"\\\"\" space", body_rule, t->end ? "" : "?");
                key_rule = add_rule(c, kn, sift__gbnf_sb_take(&b));
                sift__gbnf_sb_free(&b);
            }
        } else if (!kn) {
            coom(c);
        }
        sift__gx_free(kn);
    } else if (!t) {
        coom(c);
    }
    ns_free(t);
    return key_rule;
}

/* The rule `key ":" value` of the other keys additionalProperties allows: keys that are none
 * of ex[] (or matching key_rule when given), values matching additionalProperties (any value
 * when it is true or missing). *extra_kv stays NULL when no key is left. */
static bool other_keys(conv *c, const cJSON *additional, const keyex *ex, size_t n_ex, const char *key_rule,
                       const char *name, const char **extra_kv)
{
    char *sub = join_name(name, "additional");
    if (!sub) return coom(c), false;
    bool none = false;
    if (!key_rule) key_rule = excluded_keys_rule(c, ex, n_ex, sub, &none);
    const char *value_rule = NULL;
    if (key_rule && cJSON_IsObject(additional)) {
        size_t o = path_push(c, "additionalProperties");
        char *vn = join_name(sub, "value");
        value_rule = vn ? visit(c, additional, vn, NULL) : coom(c);
        sift__gx_free(vn);
        path_pop(c, o);
    } else if (key_rule) {
        value_rule = use_builtin(c, "value");
    }
    if (key_rule && value_rule) {
        sift__gbnf_sbuf b = {0};
        sift__gbnf_sb_printf(&b, "%s \":\" space %s", key_rule, value_rule);
        char *kn = join_name(sub, "kv");
        *extra_kv = kn ? add_rule(c, kn, sift__gbnf_sb_take(&b)) : coom(c);
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
    sift__gbnf_sb_printf(&g, "root ::= %s\nchar ::= %s\nspace ::= %s\n", body, find_builtin("char")->body, find_builtin("space")->body);
    if (g.oom) return sift__gbnf_sb_free(&g), coom(c), false;
    sift_error e2 = {0};
    sift_grammar *gr = sift_grammar_parse(g.s, g.n, "root", NULL, &e2);
    sift__gbnf_sb_free(&g);
    if (!gr) return cfail(c, e2.status ? e2.status : SIFT_E_NOMEM, "patternProperties: %s", e2.msg), false;
    bool m = sift_grammar_match(gr, text, strlen(text), NULL) == SIFT_GRAMMAR_COMPLETE;
    sift_grammar_free(gr);
    return m;
}

static bool is_trivial(const cJSON *s)
{
    if (cJSON_IsTrue(s)) return true;
    if (!cJSON_IsObject(s)) return false;
    for (const cJSON *k = s->child; k; k = k->next)
        if (!in_list(ANNOTATIONS, k->string)) return false;
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
        if (!txt) return coom(c), false;
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
    if (!cJSON_IsObject(pp)) return cfail(c, SIFT_E_INVAL, "'patternProperties' must be an object");
    size_t n = (size_t)cJSON_GetArraySize(pp);
    if (n > PP_MAX) return cfail(c, SIFT_E_UNSUPPORTED, "patternProperties: more than %d patterns", PP_MAX);
    ppat *P = sift__gx_calloc(n, sizeof *P);
    char (*lits)[SIFT__PATTERN_LIT_MAX] = sift__gx_calloc(n * PP_LITS, sizeof *lits);
    keyex *ex = sift__gx_calloc(n_names + n * PP_LITS + 1, sizeof *ex);
    sift__gbnf_sbuf alts = {0};
    const char *ret = NULL;
    size_t o0 = path_push(c, "patternProperties");
    if (!P || !lits || !ex) {
        coom(c);
        goto done;
    }
    bool any_all = false;
    size_t k = 0;
    for (const cJSON *e = pp->child; e && c->status == SIFT_OK; e = e->next, k++) {
        ppat *q = &P[k];
        q->schema = e;
        q->pat = e->string;
        q->lits = lits + k * PP_LITS;
        size_t o = path_push(c, e->string);
        q->body = pattern_body(c, e->string, strlen(e->string));
        if (!q->body) {
            path_pop(c, o);
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
                coom(c);
                break;
            }
            bool m = body_matches(c, q->body, txt);
            cJSON_free(txt);
            if (!m) continue;
            names_hit = true;
            if (!is_trivial(e) && !lenient)
                cfail(c, SIFT_E_UNSUPPORTED, "property '%s' also matches this pattern (both schemas would apply): cannot be expressed", names[j]);
        }
        /* earlier patterns that may match the same keys with another schema */
        for (size_t j = 0; j < k && c->status == SIFT_OK; j++)
            if (!cJSON_Compare(P[j].schema, e, true) && !keys_disjoint(c, &P[j], q) && c->status == SIFT_OK && !lenient)
                cfail(c, SIFT_E_UNSUPPORTED, "patterns '%s' and '%s' may match one key with different schemas: cannot be expressed", P[j].pat, q->pat);
        if (c->status != SIFT_OK) {
            path_pop(c, o);
            break;
        }
        /* the key rule: the pattern, less the declared names it matches */
        char *sub = join_name(name, "pattern");
        char idx[32];
        snprintf(idx, sizeof idx, "%zu", k);
        char *sn = sub ? join_name(sub, idx) : NULL;
        const char *key_rule = NULL;
        if (!sn) coom(c);
        else if (!names_hit) {
            char *kn = join_name(sn, "k");
            key_rule = kn ? add_rule(c, kn, dupstr(q->body)) : coom(c);
            sift__gx_free(kn);
        } else if (q->all) {
            bool none;
            for (size_t j = 0; j < n_names; j++) ex[j] = (keyex){names[j], false};
            key_rule = excluded_keys_rule(c, ex, n_names, sn, &none);
        } else if (!lenient) {
            cfail(c, SIFT_E_UNSUPPORTED, "a declared property matches this pattern: the other keys it matches cannot be expressed");
        }
        char *vn = sn ? join_name(sn, "value") : NULL;
        const char *value_rule = key_rule && vn ? visit(c, e, vn, NULL) : NULL;
        if (key_rule && value_rule) sift__gbnf_sb_printf(&alts, "%s%s \":\" space %s", alts.n ? " | " : "", key_rule, value_rule);
        sift__gx_free(vn);
        sift__gx_free(sn);
        sift__gx_free(sub);
        path_pop(c, o);
    }
    path_pop(c, o0);
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
            const char *any = use_builtin(c, "char");
            char *comp = any ? sift__schema_pattern_complement(P[which].pat, strlen(P[which].pat), any, &all, &e2) : NULL;
            if (comp) {
                sift__gbnf_sbuf b = {0};
                sift__gbnf_sb_printf(&b, "\"\\\"\" (%s) \"\\\"\" space", comp);
                sift__gx_free(comp);
                char *kn = join_name(name, "additional-k");
                key_rule = kn ? add_rule(c, kn, sift__gbnf_sb_take(&b)) : coom(c);
                sift__gx_free(kn);
                sift__gbnf_sb_free(&b);
            } else if (!all && c->status == SIFT_OK && !lenient) {
                size_t o = path_push(c, "patternProperties");
                size_t o2 = path_push(c, P[which].pat);
                cfail(c, e2.status ? e2.status : SIFT_E_NOMEM, "with additionalProperties allowed: %s", e2.msg);
                path_pop(c, o2);
                path_pop(c, o);
            }
            if (all) extra = false;
        } else if (n_other > 0 && !lenient) {
            size_t o = path_push(c, "patternProperties");
            cfail(c, SIFT_E_UNSUPPORTED, "with additionalProperties allowed, the keys that match no pattern and no property cannot be expressed");
            path_pop(c, o);
        }
        if (c->status != SIFT_OK) goto done;
        if (extra) {
            const char *ok_kv = NULL;
            if (!other_keys(c, additional, ex, n_ex, key_rule, name, &ok_kv)) goto done;
            if (ok_kv) sift__gbnf_sb_printf(&alts, "%s%s", alts.n ? " | " : "", ok_kv);
        }
    }
    if (alts.n) {
        char *kn = join_name(name, "extra-kv");
        *extra_kv = kn ? add_rule(c, kn, sift__gbnf_sb_take(&alts)) : coom(c);
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
    size_t o = path_push(c, dr->string ? dr->string : "dependentRequired");
    if (np > ANY_ORDER_KEYS || n_names > ANY_ORDER_KEYS) {
        cfail(c, SIFT_E_UNSUPPORTED, "the object has more than %d properties: the key sets cannot be tracked", ANY_ORDER_KEYS);
        goto out;
    }
    *deps = sift__gx_calloc(np ? np : 1, sizeof **deps);
    if (!*deps) {
        coom(c);
        goto out;
    }
    bool any = false;
    for (const cJSON *e = dr->child; e && c->status == SIFT_OK; e = e->next) {
        int ki = -1;
        for (size_t j = 0; j < n_names && ki < 0; j++)
            if (!strcmp(names[j], e->string)) ki = (int)j;
        if (ki < 0 || !cJSON_IsArray(e)) {
            cfail(c, SIFT_E_UNSUPPORTED, "'%s' is not a declared property: other keys are not tracked", e->string);
            break;
        }
        for (const cJSON *t = e->child; t && c->status == SIFT_OK; t = t->next) {
            int ti = -1;
            for (size_t j = 0; cJSON_IsString(t) && j < n_names && ti < 0; j++)
                if (!strcmp(names[j], t->valuestring)) ti = (int)j;
            if (ti < 0) cfail(c, SIFT_E_UNSUPPORTED, "'%s' depends on a name that is not a declared property", e->string);
            else if (map[ki] >= 0 && map[ti] < 0) cfail(c, SIFT_E_UNSUPPORTED, "'%s' depends on a property no value fits", e->string);
            else if (map[ki] >= 0 && map[ti] != map[ki]) (*deps)[map[ki]] |= 1u << map[ti], any = true;
        }
    }
    if (!any) {
        sift__gx_free(*deps);
        *deps = NULL;
    }
out:
    path_pop(c, o);
    return c->status == SIFT_OK;
}

static const char *build_object(conv *c, const cJSON *props, const cJSON *required, const cJSON *additional,
                                const cJSON *pattern_props, const char *name, const char *rule_name, long min_props, long max_props)
{
    /* kv rule per property; with JSON Schema semantics a required name that `properties`
     * does not declare is a property with any value, after the declared ones */
    const bool llama = (c->flags & SIFT_JSON_SCHEMA_LLAMA) != 0;
    const cJSON *dep_req = c->dep_required; /* taken here, so that no nested object sees it */
    c->dep_required = NULL;
    uint32_t *deps = NULL;
    size_t np = (size_t)cJSON_GetArraySize(props), n_undecl = 0;
    for (const cJSON *r = required ? required->child : NULL; r && !llama; r = r->next)
        if (cJSON_IsString(r) && !cJSON_GetObjectItemCaseSensitive(props, r->valuestring)) n_undecl++;
    size_t n_all = np + n_undecl;
    const char **kv = sift__gx_calloc(n_all ? n_all : 1, sizeof *kv);
    const char **names = sift__gx_calloc(n_all ? n_all : 1, sizeof *names);
    bool *req = sift__gx_calloc(n_all ? n_all : 1, sizeof *req);
    if (!kv || !req || !names) {
        sift__gx_free(kv);
        sift__gx_free(req);
        sift__gx_free(names);
        return coom(c);
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
        n_all = k;
    }
    size_t i = 0;
    const char *result = NULL;
    size_t o0 = path_push(c, "properties");
    for (const cJSON *p = props ? props->child : NULL; p && c->status == SIFT_OK; p = p->next, i++) {
        size_t o = path_push(c, p->string);
        char *pn = join_name(name, p->string);
        for (const cJSON *r = required ? required->child : NULL; r; r = r->next)
            if (cJSON_IsString(r) && !strcmp(r->valuestring, p->string)) req[i] = true;
        sift_error saved = c->err ? *c->err : (sift_error){0};
        const char *vr = pn ? visit(c, p, pn, NULL) : coom(c);
        if (!vr && c->unsat && !req[i]) { /* an optional property no value fits: never present */
            c->status = SIFT_OK;
            c->unsat = false;
            if (c->err) *c->err = saved;
        }
        if (vr) {
            sift__gbnf_sbuf b = {0};
            cJSON *key = cJSON_CreateString(p->string);
            if (!key) coom(c);
            else {
                put_json_literal(c, &b, key);
                cJSON_Delete(key);
                sift__gbnf_sb_printf(&b, " space \":\" space %s", vr);
                char *kn = join_name(name, p->string);
                char *kn2 = kn ? join_name(kn, "kv") : NULL;
                /* join_name inserts '-' only after a non-empty prefix; "kv" always follows */
                kv[i] = kn2 ? add_rule(c, kn2, sift__gbnf_sb_take(&b)) : coom(c);
                sift__gx_free(kn);
                sift__gx_free(kn2);
                if (!use_builtin(c, "space")) break;
            }
            sift__gbnf_sb_free(&b);
        }
        sift__gx_free(pn);
        path_pop(c, o);
    }
    path_pop(c, o0);
    /* required names `properties` does not declare: additional properties, so their value
     * is what additionalProperties allows (false: none, the object matches nothing); a
     * pattern of patternProperties could apply too: refused */
    if (i < n_all && pattern_props && cJSON_GetArraySize(pattern_props) > 0 && !(c->flags & SIFT_JSON_SCHEMA_LENIENT)) {
        size_t o = path_push(c, "required");
        cfail(c, SIFT_E_UNSUPPORTED, "required property '%s' that only patternProperties may declare cannot be expressed", names[i]);
        path_pop(c, o);
    }
    if (i < n_all && cJSON_IsFalse(additional) && !llama) {
        c->unsat = c->status == SIFT_OK;
        size_t o = path_push(c, "required");
        cfail(c, SIFT_E_INVAL, "required property '%s' is not allowed by additionalProperties false: the schema matches nothing", names[i]);
        path_pop(c, o);
    }
    for (; i < n_all && c->status == SIFT_OK; i++) {
        const char *vr;
        if (cJSON_IsObject(additional)) {
            size_t o = path_push(c, "additionalProperties");
            char *vn = join_name(name, "additional-value");
            vr = vn ? visit(c, additional, vn, NULL) : coom(c);
            sift__gx_free(vn);
            path_pop(c, o);
            if (!vr) break;
        } else {
            vr = use_builtin(c, "value");
        }
        cJSON *key = cJSON_CreateString(names[i]);
        sift__gbnf_sbuf b = {0};
        if (!key || !vr) {
            cJSON_Delete(key);
            coom(c);
            break;
        }
        put_json_literal(c, &b, key);
        cJSON_Delete(key);
        sift__gbnf_sb_printf(&b, " space \":\" space %s", vr);
        char *kn = join_name(name, names[i]);
        char *kn2 = kn ? join_name(kn, "kv") : NULL;
        kv[i] = kn2 ? add_rule(c, kn2, sift__gbnf_sb_take(&b)) : coom(c);
        sift__gx_free(kn);
        sift__gx_free(kn2);
        sift__gbnf_sb_free(&b);
        req[i] = true;
        if (!use_builtin(c, "space")) break;
    }
    if (c->status != SIFT_OK) goto done;
    for (const cJSON *r = required ? required->child : NULL; r && llama && !(c->flags & SIFT_JSON_SCHEMA_LENIENT); r = r->next)
        if (cJSON_IsString(r) && !cJSON_GetObjectItemCaseSensitive(props, r->valuestring)) {
            size_t o = path_push(c, "required");
            cfail(c, SIFT_E_UNSUPPORTED, "required property '%s' is not declared in 'properties'", r->valuestring);
            path_pop(c, o);
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
            coom(c);
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
            if (kv[i]) kv[w] = kv[i], req[w] = req[i], w++;
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
            result = cfail(c, SIFT_E_UNSUPPORTED, "dependentRequired / dependencies: the object has more than %d properties (or the schema more than %d key-set rules)",
                           ANY_ORDER_KEYS, ANY_ORDER_STATES);
        else
            result = ordered_object(c, kv, req, np, x, rule_name, min_props, max_props);
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
            result = coom(c);
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
            result = coom(c);
            goto done;
        }
        for (size_t k = m; k-- > 1;) {
            sift__gbnf_sbuf rb = {0};
            bool star = extra && k == m - 1;
            sift__gbnf_sb_printf(&rb, "( \",\" space %s )%s", ok[k], star ? "*" : "?");
            if (rest[k + 1 < m ? k + 1 : m]) sift__gbnf_sb_printf(&rb, " %s", rest[k + 1 < m ? k + 1 : m]);
            char nm[64];
            snprintf(nm, sizeof nm, "%zu-rest", k);
            char *rn = join_name(rule_name, nm);
            rest[k] = rn ? add_rule(c, rn, sift__gbnf_sb_take(&rb)) : coom(c);
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
    if (c->status == SIFT_OK && use_builtin(c, "space")) result = add_rule(c, rule_name, sift__gbnf_sb_take(&b));
    sift__gbnf_sb_free(&b);
done:
    sift__gx_free(kv);
    sift__gx_free(req);
    sift__gx_free(names);
    sift__gx_free(deps);
    return result;
}

/* Is name a key of the object o? */
static bool has_key(const cJSON *o, const char *name) { return o && cJSON_GetObjectItemCaseSensitive(o, name) != NULL; }

/* allOf: every part must hold, so the parts (and the schema's own keywords beside allOf, which
 * are one more part) are merged into one object schema. The merge is exact or refused:
 * - a property declared by several parts with different schemas gets {"allOf": [those]};
 * - required names add up;
 * - a part's additionalProperties covers the keys that part does not declare: false drops
 *   the other parts' properties (a required one makes the schema match nothing), a schema
 *   there is kept only when no other part declares a key outside that part (else refused);
 * - enum (one part) and type object; any other keyword in a part is refused, naming it.
 * llama.cpp's converter merges the parts' properties only; SIFT_JSON_SCHEMA_LLAMA keeps that
 * reading of the schema's own keywords (they are ignored there). */
static const char *visit_all_of(conv *c, const cJSON *s, const char *name, const char *rule_name)
{
    const cJSON *all = cJSON_GetObjectItemCaseSensitive(s, "allOf");
    if (!cJSON_IsArray(all)) return cfail(c, SIFT_E_INVAL, "'allOf' must be an array");
    const bool llama = (c->flags & SIFT_JSON_SCHEMA_LLAMA) != 0;
    const int n_parts = cJSON_GetArraySize(all) + 1;
    const cJSON **parts = calloc((size_t)n_parts, sizeof *parts);
    cJSON *props = cJSON_CreateObject(), *req = cJSON_CreateArray();
    cJSON *additional = NULL;
    bool objectish = true;
    const cJSON *enums = NULL;
    const char *out = NULL;
    int np = 0;
    if (!props || !req || !parts) {
        coom(c);
        goto done;
    }
    for (const cJSON *part = all->child; part && c->status == SIFT_OK; part = part->next) {
        const cJSON *p = part;
        const cJSON *ref = cJSON_GetObjectItemCaseSensitive(p, "$ref");
        if (cJSON_IsString(ref)) p = resolve_pointer(c, ref->valuestring);
        if (!p || !cJSON_IsObject(p)) {
            if (p) cfail(c, SIFT_E_UNSUPPORTED, "allOf: every part must be an object schema");
            break;
        }
        parts[np++] = p;
    }
    /* the schema's own keywords last (allOf skipped below): the parts are usually base
     * schemas, so their properties come first, as a derived class lists its fields */
    if (!llama && c->status == SIFT_OK) parts[np++] = s;
    for (int i = 0; i < np && c->status == SIFT_OK; i++) {
        const cJSON *p = parts[i];
        const bool self = !llama && p == s;
        const cJSON *pp = cJSON_GetObjectItemCaseSensitive(p, "properties");
        if (pp && !cJSON_IsObject(pp)) {
            cfail(c, SIFT_E_INVAL, "allOf: 'properties' must be an object");
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
                    coom(c);
                    break;
                }
            } else if (!(merged = cJSON_Duplicate(q, 1))) {
                coom(c);
                break;
            }
            bool ok = have ? cJSON_ReplaceItemInObjectCaseSensitive(props, q->string, merged)
                           : cJSON_AddItemToObject(props, q->string, merged);
            if (!ok) { /* the item was not taken: it is still ours */
                cJSON_Delete(merged);
                coom(c);
                break;
            }
        }
        const cJSON *rq = cJSON_GetObjectItemCaseSensitive(p, "required");
        for (const cJSON *q = rq ? rq->child : NULL; q; q = q->next)
            if (cJSON_IsString(q)) cJSON_AddItemToArray(req, cJSON_CreateString(q->valuestring));
        const cJSON *en = cJSON_GetObjectItemCaseSensitive(p, "enum");
        if (en) {
            if (enums) {
                cfail(c, SIFT_E_UNSUPPORTED, "allOf with more than one enum");
                break;
            }
            enums = en;
        }
        const cJSON *ty = cJSON_GetObjectItemCaseSensitive(p, "type");
        if (ty && !(cJSON_IsString(ty) && !strcmp(ty->valuestring, "object"))) objectish = false;
        for (const cJSON *k = p->child; k; k = k->next) {
            const char *kw = k->string;
            if (!strcmp(kw, "properties") || !strcmp(kw, "required") || !strcmp(kw, "additionalProperties") ||
                !strcmp(kw, "type") || (!self && !strcmp(kw, "$ref")) || !strcmp(kw, "enum") || in_list(ANNOTATIONS, kw) ||
                (self && !strcmp(kw, "allOf")))
                continue;
            if (!(c->flags & SIFT_JSON_SCHEMA_LENIENT)) {
                cfail(c, SIFT_E_UNSUPPORTED, "allOf: keyword '%s' %s cannot be merged", kw, self ? "beside allOf" : "in a part");
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
                if (pass == 1) {
                    cfail(c, SIFT_E_UNSUPPORTED,
                          "allOf: one part's additionalProperties would also cover property '%s' of another part", q->string);
                    break;
                }
                for (const cJSON *r = req->child; r; r = r->next)
                    if (!strcmp(r->valuestring, q->string)) {
                        c->unsat = true;
                        cfail(c, SIFT_E_INVAL, "allOf: '%s' is required but a part's additionalProperties false forbids it: the schema matches nothing",
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
                cfail(c, SIFT_E_UNSUPPORTED, "allOf: two parts with different additionalProperties schemas");
            }
        }
    }
    if (c->status == SIFT_OK) {
        if (enums && !cJSON_GetArraySize(props)) {
            cJSON *only = cJSON_CreateObject();
            if (only && cJSON_AddItemToObject(only, "enum", cJSON_Duplicate(enums, 1))) out = visit(c, only, name, NULL);
            else coom(c);
            cJSON_Delete(only);
        } else if (!objectish || enums) {
            cfail(c, SIFT_E_UNSUPPORTED, "allOf: only object parts (or one enum) can be merged");
        } else {
            out = build_object(c, props, req, additional, NULL, name, rule_name, 0, -1);
        }
    }
done:
    free(parts);
    cJSON_Delete(props);
    cJSON_Delete(req);
    cJSON_Delete(additional);
    return out;
}

static const char *const TYPED_OBJ[] = {"properties", "additionalProperties", "required", "patternProperties", "minProperties", "maxProperties", NULL};
static const char *const TYPED_ARR[] = {"items", "prefixItems", "minItems", "maxItems", NULL};
static const char *const TYPED_STR[] = {"pattern", "minLength", "maxLength", "format", NULL};
static const char *const TYPED_NUM[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", NULL};

static const char *infer_type(const cJSON *s)
{
    for (const cJSON *k = s->child; k; k = k->next) {
        if (in_list(TYPED_OBJ, k->string)) return "object";
        if (in_list(TYPED_ARR, k->string)) return "array";
        if (in_list(TYPED_STR, k->string)) return "string";
        if (in_list(TYPED_NUM, k->string)) return "number";
    }
    return NULL;
}

/* A schema without `type` whose keywords belong to some kinds of value (properties: objects,
 * items: arrays, pattern / format: strings, minimum: numbers): each keyword constrains values
 * of its kind only, the other kinds pass ({"format": "positiveInteger"} takes 1; {"items":
 * {"properties": {}}} takes ["a"]). The union of each kind's rule, a kind that matches
 * nothing left out. (SIFT_JSON_SCHEMA_LLAMA keeps llama.cpp's reading: the first keyword's
 * kind only.) */
static const char *visit_typed(conv *c, const cJSON *s, const char *name, const char *rule_name, const char *type);

static const char *visit_untyped(conv *c, const cJSON *s, const char *name, const char *rule_name)
{
    static const char *const kinds[] = {"object", "array", "string", "number"};
    const char *const *lists[] = {TYPED_OBJ, TYPED_ARR, TYPED_STR, TYPED_NUM};
    sift__gbnf_sbuf b = {0};
    for (int k = 0; k < 4 && c->status == SIFT_OK; k++) {
        bool has = false;
        for (const cJSON *kw = s->child; kw && !has; kw = kw->next) has = in_list(lists[k], kw->string);
        const char *r = NULL;
        if (!has) {
            r = use_builtin(c, kinds[k]);
        } else {
            char *kn = join_name(rule_name, kinds[k]);
            sift_error saved = c->err ? *c->err : (sift_error){0};
            r = kn ? visit_typed(c, s, name, kn, kinds[k]) : coom(c);
            sift__gx_free(kn);
            if (!r && c->unsat) { /* no value of this kind: the others still pass */
                c->status = SIFT_OK;
                c->unsat = false;
                if (c->err) *c->err = saved;
                continue;
            }
        }
        if (r) sift__gbnf_sb_printf(&b, "%s%s", b.n ? " | " : "", r);
    }
    const char *out = NULL;
    if (c->status == SIFT_OK && use_builtin(c, "boolean") && use_builtin(c, "null")) {
        sift__gbnf_sb_printf(&b, "%sboolean | null", b.n ? " | " : "");
        out = add_rule(c, rule_name, sift__gbnf_sb_take(&b));
    }
    sift__gbnf_sb_free(&b);
    return out;
}

static const char *visit_array_items(conv *c, const cJSON *s, const char *name, const char *rule_name, const cJSON *items,
                                     const cJSON *prefix, long mn, long mx);

static const char *visit_array(conv *c, const cJSON *s, const char *name, const char *rule_name)
{
    long mn = get_count(c, s, "minItems", 0), mx = get_count(c, s, "maxItems", -1);
    if (mn == -2 || mx == -2) return NULL;
    if (mx >= 0 && mx < mn) return (c->unsat = c->status == SIFT_OK, cfail(c, SIFT_E_INVAL, "maxItems is below minItems"));
    /* a grammar repeats an item at most 2000 times (GBNF's limit, llama.cpp's too): name the
     * keyword rather than fail later with a grammar that does not parse */
    if (mn > 2000 || mx > 2000) {
        size_t o = path_push(c, mn > 2000 ? "minItems" : "maxItems");
        cfail(c, SIFT_E_UNSUPPORTED, "%s %ld exceeds the grammar's repetition limit (2000)", mn > 2000 ? "minItems" : "maxItems",
              mn > 2000 ? mn : mx);
        path_pop(c, o);
        return NULL;
    }
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(s, "items");
    const cJSON *prefix = cJSON_GetObjectItemCaseSensitive(s, "prefixItems");
    cJSON *any_item = NULL;
    if (cJSON_IsArray(items) && !prefix) { /* draft-07 tuple form: additionalItems (missing: anything) after it */
        prefix = items;
        items = cJSON_GetObjectItemCaseSensitive(s, "additionalItems");
        if (!items) items = any_item = cJSON_CreateTrue();
        if (!items) return coom(c);
    } else if (prefix && !items) { /* 2020-12: prefixItems without items allows anything after */
        items = any_item = cJSON_CreateTrue();
        if (!items) return coom(c);
    }
    const char *r = visit_array_items(c, s, name, rule_name, items, prefix, mn, mx);
    cJSON_Delete(any_item);
    return r;
}

static const char *visit_array_items(conv *c, const cJSON *s, const char *name, const char *rule_name, const cJSON *items,
                                     const cJSON *prefix, long mn, long mx)
{
    if (!use_builtin(c, "space")) return NULL;
    sift__gbnf_sbuf b = {0};
    sift__gbnf_sb_puts(&b, "\"[\" space ");
    if (prefix) {
        if (!cJSON_IsArray(prefix)) return sift__gbnf_sb_free(&b), cfail(c, SIFT_E_INVAL, "'prefixItems' must be an array");
        long np = cJSON_GetArraySize(prefix);
        const char **tr = sift__gx_calloc((size_t)np + 1, sizeof *tr);
        if (!tr) return sift__gbnf_sb_free(&b), coom(c);
        long k = 0;
        size_t o = path_push(c, "prefixItems");
        for (const cJSON *it = prefix->child; it && c->status == SIFT_OK; it = it->next, k++) {
            char idx[32];
            snprintf(idx, sizeof idx, "%ld", k);
            size_t o2 = path_push(c, idx);
            char tn[48];
            snprintf(tn, sizeof tn, "tuple-%ld", k);
            char *nm = join_name(name, tn);
            tr[k] = nm ? visit(c, it, nm, NULL) : coom(c);
            sift__gx_free(nm);
            path_pop(c, o2);
        }
        path_pop(c, o);
        bool more = items && !cJSON_IsFalse(items) && (mx < 0 || mx > np);
        const char *more_rule = NULL;
        if (c->status == SIFT_OK && more) {
            size_t o3 = path_push(c, "items");
            char *nm = join_name(name, "item");
            more_rule = nm ? visit(c, items, nm, NULL) : coom(c);
            sift__gx_free(nm);
            path_pop(c, o3);
        }
        if (c->status != SIFT_OK) {
            sift__gx_free(tr);
            sift__gbnf_sb_free(&b);
            return NULL;
        }
        /* required prefix: the first min(np, max(mn, np if no minItems)) items */
        long need = cJSON_GetObjectItemCaseSensitive(s, "minItems") ? (mn < np ? mn : np) : np;
        if (mx >= 0 && mx < np) np = mx;
        if (need > np) need = np;
        for (k = 0; k < need; k++) sift__gbnf_sb_printf(&b, "%s%s", k ? " \",\" space " : "", tr[k]);
        /* optional tail of the tuple, then the extra items */
        long opened = 0;
        for (k = need; k < np; k++, opened++) sift__gbnf_sb_printf(&b, " (%s%s", k ? "\",\" space " : "", tr[k]);
        if (more_rule) {
            long extra_min = mn > np ? mn - np : 0;
            long extra_max = mx >= 0 ? mx - np : -1;
            sift__gbnf_sbuf one = {0};
            if (np > 0) sift__gbnf_sb_printf(&one, "(\",\" space %s)", more_rule);
            else sift__gbnf_sb_printf(&one, "%s", more_rule);
            if (np > 0) {
                sift__gbnf_sb_puts(&b, " ");
                sift__gbnf_put_repetition(&b, one.s ? one.s : "", extra_min, extra_max, NULL);
            } else {
                sift__gbnf_sb_puts(&b, " ");
                sift__gbnf_put_repetition(&b, more_rule, extra_min, extra_max, "\",\" space");
            }
            sift__gbnf_sb_free(&one);
        }
        for (k = 0; k < opened; k++) sift__gbnf_sb_puts(&b, ")?");
        sift__gx_free(tr);
    } else {
        const char *item_rule;
        if (items && !cJSON_IsTrue(items)) {
            if (cJSON_IsFalse(items)) {
                if (mn > 0) return sift__gbnf_sb_free(&b), (c->unsat = c->status == SIFT_OK, cfail(c, SIFT_E_INVAL, "items: false with minItems > 0 matches nothing"));
                mx = 0;
                item_rule = "value";
            } else {
                size_t o = path_push(c, "items");
                char *nm = join_name(name, "item");
                item_rule = nm ? visit(c, items, nm, NULL) : coom(c);
                sift__gx_free(nm);
                path_pop(c, o);
            }
        } else {
            item_rule = use_builtin(c, "value");
        }
        if (!item_rule) return sift__gbnf_sb_free(&b), (const char *)NULL;
        sift__gbnf_put_repetition(&b, item_rule, mn, mx, "\",\" space");
    }
    sift__gbnf_sb_puts(&b, " \"]\" space");
    return add_rule(c, rule_name, sift__gbnf_sb_take(&b));
}

/* item{mn,mx} beyond the grammar's 2000 copies, without writing them out: a rule of
 * 1000 items, repeated (max < 0: unbounded; both at most 2,000,000). With Q = r / 1000,
 * item{0,r} is  chunk{0,Q-1} item{0,999} | chunk{Q} item{0,r mod 1000}:  every count once. */
#define JS_CHUNK 1000
static void put_long_repetition(conv *c, sift__gbnf_sbuf *b, const char *item, long mn, long mx)
{
    char nm[64], body[128];
    snprintf(nm, sizeof nm, "%s-%d", item, JS_CHUNK);
    snprintf(body, sizeof body, "%s{%d}", item, JS_CHUNK);
    const char *chunk = add_rule(c, nm, dupstr(body));
    if (!chunk) return;
    /* item{mn} */
    if (mn / JS_CHUNK) sift__gbnf_sb_printf(b, "%s{%ld} ", chunk, mn / JS_CHUNK);
    if (mn % JS_CHUNK) sift__gbnf_sb_printf(b, "%s{%ld} ", item, mn % JS_CHUNK);
    if (mx < 0) {
        sift__gbnf_sb_printf(b, "%s*", item);
        return;
    }
    long r = mx - mn, q = r / JS_CHUNK;
    if (r <= 2000) {
        sift__gbnf_put_repetition(b, item, 0, r, NULL);
        if (r == 0) sift__gbnf_sb_puts(b, "\"\"");
        return;
    }
    sift__gbnf_sb_printf(b, "( %s{0,%ld} %s{0,%d} | %s{%ld}", chunk, q - 1, item, JS_CHUNK - 1, chunk, q);
    if (r % JS_CHUNK) sift__gbnf_sb_printf(b, " %s{0,%ld}", item, r % JS_CHUNK);
    sift__gbnf_sb_puts(b, " )");
}

static const char *visit_string(conv *c, const cJSON *s, const char *rule_name)
{
    const cJSON *pat = cJSON_GetObjectItemCaseSensitive(s, "pattern");
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(s, "format");
    bool has_len = cJSON_GetObjectItemCaseSensitive(s, "minLength") || cJSON_GetObjectItemCaseSensitive(s, "maxLength");
    if (!use_builtin(c, "space")) return NULL;
    if (pat) {
        if (!cJSON_IsString(pat)) return cfail(c, SIFT_E_INVAL, "'pattern' must be a string");
        /* ^A{m,n}$ (one atom) with a length: the atom repeated within both bounds */
        char atom[256];
        long pm, px;
        bool as, ae;
        if (has_len && !fmt && sift__schema_pattern_one_atom(pat->valuestring, strlen(pat->valuestring), atom, sizeof atom, &pm, &px, &as, &ae) &&
            as && ae) {
            long mn = get_count(c, s, "minLength", 0), mx = get_count(c, s, "maxLength", -1);
            if (mn == -2 || mx == -2) return NULL;
            if (pm > mn) mn = pm;
            if (px >= 0 && (mx < 0 || px < mx)) mx = px;
            if (mx >= 0 && mx < mn)
                return (c->unsat = c->status == SIFT_OK, cfail(c, SIFT_E_INVAL, "no string matches both 'pattern' and minLength / maxLength"));
            if (mn > 2000000 || mx > 2000000) return cfail(c, SIFT_E_UNSUPPORTED, "minLength / maxLength above 2,000,000");
            sift_error e2 = {0};
            char *inner = sift__schema_regex_to_gbnf(atom, strlen(atom), &as, &ae, &e2);
            if (!inner) return cfail(c, e2.status ? e2.status : SIFT_E_NOMEM, "pattern, %s", e2.msg);
            char an[300];
            snprintf(an, sizeof an, "%s-atom", rule_name);
            const char *ar = add_rule(c, an, inner);
            if (!ar) return NULL;
            sift__gbnf_sbuf b = {0};
            sift__gbnf_sb_puts(&b, "\"\\\"\" ");
            if (mn <= 2000 && mx <= 2000) sift__gbnf_put_repetition(&b, ar, mn, mx, NULL);
            else put_long_repetition(c, &b, ar, mn, mx);
            if (mx == 0) sift__gbnf_sb_puts(&b, "\"\"");
            sift__gbnf_sb_puts(&b, " \"\\\"\" space");
            return c->status == SIFT_OK ? add_rule(c, rule_name, sift__gbnf_sb_take(&b)) : (sift__gbnf_sb_free(&b), (const char *)NULL);
        }
        if ((has_len || fmt) && !(c->flags & SIFT_JSON_SCHEMA_LENIENT))
            return cfail(c, SIFT_E_UNSUPPORTED, "'pattern' together with minLength / maxLength / format cannot be expressed");
        size_t o = path_push(c, "pattern");
        char *body = pattern_body(c, pat->valuestring, strlen(pat->valuestring));
        path_pop(c, o);
        return body ? add_rule(c, rule_name, body) : NULL;
    }
    if (cJSON_IsString(fmt)) {
        const char *f = fmt->valuestring;
        const char *prim = NULL;
        if (!strncmp(f, "uuid", 4) && (!f[4] || (f[4] >= '1' && f[4] <= '5' && !f[5]))) prim = "uuid";
        else if (!strcmp(f, "date")) prim = "date-string";
        else if (!strcmp(f, "time")) prim = "time-string";
        else if (!strcmp(f, "date-time")) prim = "date-time-string";
        else if (!strcmp(f, "email")) prim = "email";
        else if (!strcmp(f, "hostname")) prim = "hostname";
        else if (!strcmp(f, "ipv4")) prim = "ipv4";
        else if (!strcmp(f, "uri")) prim = "uri";
        else if (in_list(FORMATS_REFUSED, f) && !(c->flags & SIFT_JSON_SCHEMA_LENIENT)) {
            size_t o = path_push(c, "format");
            cfail(c, SIFT_E_UNSUPPORTED, "format '%s' cannot be expressed in a grammar (SIFT_JSON_SCHEMA_LENIENT ignores it)", f);
            path_pop(c, o);
            return NULL;
        }
        if (prim) {
            if (has_len && !(c->flags & SIFT_JSON_SCHEMA_LENIENT))
                return cfail(c, SIFT_E_UNSUPPORTED, "format '%s' together with minLength / maxLength cannot be expressed", f);
            const char *p = use_builtin(c, prim);
            return p ? add_rule(c, rule_name, dupstr(p)) : NULL;
        }
        /* any other format (int32, url, path, ...: none of the standard ones) is an annotation
         * that no validator checks: a plain string */
    }
    long mn = get_count(c, s, "minLength", 0), mx = get_count(c, s, "maxLength", -1);
    if (mn == -2 || mx == -2) return NULL;
    if (mx >= 0 && mx < mn) return (c->unsat = c->status == SIFT_OK, cfail(c, SIFT_E_INVAL, "maxLength is below minLength"));
    if (mn > 2000000 || mx > 2000000)
        return cfail(c, SIFT_E_UNSUPPORTED, "minLength / maxLength above 2,000,000 (1000-character chunks, at most 2000 of them)");
    const char *ch = use_builtin(c, "char");
    if (!ch) return NULL;
    if (!has_len) {
        const char *str = use_builtin(c, "string");
        return str ? add_rule(c, rule_name, dupstr(str)) : NULL;
    }
    sift__gbnf_sbuf b = {0};
    sift__gbnf_sb_puts(&b, "\"\\\"\" ");
    if (mn <= 2000 && mx <= 2000) sift__gbnf_put_repetition(&b, ch, mn, mx, NULL);
    else put_long_repetition(c, &b, ch, mn, mx);
    sift__gbnf_sb_puts(&b, " \"\\\"\" space");
    return c->status == SIFT_OK ? add_rule(c, rule_name, sift__gbnf_sb_take(&b)) : (sift__gbnf_sb_free(&b), (const char *)NULL);
}

static bool get_int_bound(conv *c, const cJSON *s, const char *key, int64_t adjust, bool *has, int64_t *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, key);
    if (!v) return true;
    if (cJSON_IsBool(v)) return true; /* draft-04 boolean exclusive* flags: handled by the caller */
    if (!cJSON_IsNumber(v) || fabs(v->valuedouble) > 9.0e15) {
        size_t o = path_push(c, key);
        cfail(c, SIFT_E_UNSUPPORTED, "'%s' must be a number within +-9e15", key);
        path_pop(c, o);
        return false;
    }
    double d = v->valuedouble;
    /* integer bounds of a possibly fractional limit */
    int64_t k;
    if (adjust > 0) k = (int64_t)floor(d) + 1;       /* exclusiveMinimum: > d */
    else if (adjust < 0) k = (int64_t)ceil(d) - 1;   /* exclusiveMaximum: < d */
    else if (!strcmp(key, "minimum")) k = (int64_t)ceil(d);
    else k = (int64_t)floor(d);
    if (*has) { /* both minimum and exclusiveMinimum: the tighter */
        if (!strncmp(key, "exclusiveMin", 12) || !strcmp(key, "minimum")) k = k > *out ? k : *out;
        else k = k < *out ? k : *out;
    }
    *has = true;
    *out = k;
    return true;
}

static const char *visit_integer(conv *c, const cJSON *s, const char *rule_name)
{
    bool has_min = false, has_max = false;
    int64_t mn = 0, mx = 0;
    if (!get_int_bound(c, s, "minimum", 0, &has_min, &mn) || !get_int_bound(c, s, "exclusiveMinimum", 1, &has_min, &mn) ||
        !get_int_bound(c, s, "maximum", 0, &has_max, &mx) || !get_int_bound(c, s, "exclusiveMaximum", -1, &has_max, &mx))
        return NULL;
    /* draft-04: exclusiveMinimum / exclusiveMaximum as booleans modifying minimum / maximum */
    const cJSON *em = cJSON_GetObjectItemCaseSensitive(s, "exclusiveMinimum");
    const cJSON *eM = cJSON_GetObjectItemCaseSensitive(s, "exclusiveMaximum");
    if (cJSON_IsTrue(em) && has_min) mn++;
    if (cJSON_IsTrue(eM) && has_max) mx--;
    if (!use_builtin(c, "space")) return NULL;
    if (!has_min && !has_max) {
        const char *p = use_builtin(c, "integer");
        return p ? add_rule(c, rule_name, dupstr(p)) : NULL;
    }
    if (has_min && has_max && mn > mx) return (c->unsat = c->status == SIFT_OK, cfail(c, SIFT_E_INVAL, "no integer is within minimum..maximum"));
    sift__gbnf_sbuf b = {0};
    sift__gbnf_sb_puts(&b, "(");
    sift__gbnf_put_int_range(&b, has_min, mn, has_max, mx);
    sift__gbnf_sb_puts(&b, ") space");
    return add_rule(c, rule_name, sift__gbnf_sb_take(&b));
}

/* A bound in plain decimal (the shortest text that reads back as the same double). */
static bool bound_text(double d, char *out, size_t cap)
{
    if (!(fabs(d) < 1e15)) return false;
    for (int p = 1; p <= 17; p++) {
        char t[64];
        snprintf(t, sizeof t, "%.*g", p, d);
        if (strtod(t, NULL) != d) continue;
        int dec = 0;
        const char *e = strchr(t, 'e');
        const char *dot = strchr(t, '.');
        if (!e && !dot) dec = 0;
        else if (!e) dec = (int)strlen(dot + 1);
        else dec = p - 1 - (int)floor(log10(fabs(d)));
        if (dec < 0) dec = 0;
        if (dec > 40) return false;
        snprintf(out, cap, "%.*f", dec, d);
        if (!strcmp(out, "-0")) snprintf(out, cap, "0");
        return strtod(out, NULL) == d;
    }
    return false;
}

/* One side of a number's range: minimum / exclusiveMinimum (draft-04's boolean form too),
 * the tighter of both. */
static bool number_bound(conv *c, const cJSON *s, bool upper, bool *has, double *v, bool *strict)
{
    const cJSON *inc = cJSON_GetObjectItemCaseSensitive(s, upper ? "maximum" : "minimum");
    const cJSON *exc = cJSON_GetObjectItemCaseSensitive(s, upper ? "exclusiveMaximum" : "exclusiveMinimum");
    *has = false;
    *strict = false;
    if (inc) {
        if (!cJSON_IsNumber(inc)) {
            size_t o = path_push(c, inc->string);
            cfail(c, SIFT_E_INVAL, "'%s' must be a number", inc->string);
            path_pop(c, o);
            return false;
        }
        *has = true;
        *v = inc->valuedouble;
        *strict = cJSON_IsTrue(exc);
    }
    if (cJSON_IsNumber(exc)) {
        double x = exc->valuedouble;
        if (!*has || (upper ? x <= *v : x >= *v)) *v = x, *strict = true;
        *has = true;
    } else if (exc && !cJSON_IsBool(exc)) {
        size_t o = path_push(c, exc->string);
        cfail(c, SIFT_E_INVAL, "'%s' must be a number", exc->string);
        path_pop(c, o);
        return false;
    }
    return true;
}

static const char *visit_number(conv *c, const cJSON *s, const char *rule_name)
{
    bool has_lo, has_hi, lo_s, hi_s;
    double lo = 0, hi = 0;
    if (!number_bound(c, s, false, &has_lo, &lo, &lo_s) || !number_bound(c, s, true, &has_hi, &hi, &hi_s)) return NULL;
    if (!use_builtin(c, "space")) return NULL;
    if (!has_lo && !has_hi) {
        const char *p = use_builtin(c, "number");
        return p ? add_rule(c, rule_name, dupstr(p)) : NULL;
    }
    char lt[64], ht[64];
    if ((has_lo && !bound_text(lo, lt, sizeof lt)) || (has_hi && !bound_text(hi, ht, sizeof ht)))
        return cfail(c, SIFT_E_UNSUPPORTED, "minimum / maximum beyond +-1e15 or with more than 40 decimals cannot be expressed");
    sift__gbnf_sbuf b = {0};
    sift__gbnf_sb_puts(&b, "(");
    if (!sift__gbnf_put_number_range(&b, has_lo ? lt : NULL, lo_s, has_hi ? ht : NULL, hi_s)) {
        sift__gbnf_sb_free(&b);
        return (c->unsat = c->status == SIFT_OK, cfail(c, SIFT_E_INVAL, "no number is within minimum..maximum: the schema matches nothing"));
    }
    /* the exponent form where its sign alone decides: a bound on one side only, with 0 on the
     * open side of it ("minimum": 0 takes 1e-06, Python's spelling of 0.000001) */
    bool pos = has_lo && !has_hi && (lo < 0 || (lo == 0 && !lo_s)), neg = has_hi && !has_lo && (hi > 0 || (hi == 0 && !hi_s));
    if ((pos || neg) && !(c->flags & SIFT_JSON_SCHEMA_LLAMA)) {
        if (!use_builtin(c, "integral-part") || !use_builtin(c, "decimal-part")) return sift__gbnf_sb_free(&b), (const char *)NULL;
        sift__gbnf_sb_printf(&b, " | %sintegral-part (\".\" decimal-part)? [eE] [-+]? decimal-part", neg ? "\"-\" " : "");
    }
    sift__gbnf_sb_puts(&b, ") space");
    return add_rule(c, rule_name, sift__gbnf_sb_take(&b));
}

static const char *visit_typed(conv *c, const cJSON *s, const char *name, const char *rule_name, const char *type)
{
    if (!check_keywords(c, s, type)) return NULL;
    if (!type) return use_builtin(c, "value") ? add_rule(c, rule_name, dupstr("value")) : NULL;
    if (!strcmp(type, "object")) {
        const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
        const cJSON *ad = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
        if (props && !cJSON_IsObject(props)) return cfail(c, SIFT_E_INVAL, "'properties' must be an object");
        const cJSON *req = cJSON_GetObjectItemCaseSensitive(s, "required");
        bool must = req && cJSON_GetArraySize(req) > 0 && !(c->flags & SIFT_JSON_SCHEMA_LLAMA);
        const cJSON *pp = cJSON_GetObjectItemCaseSensitive(s, "patternProperties");
        static const cJSON any_schema = {.type = cJSON_True};
        bool counted = cJSON_GetObjectItemCaseSensitive(s, "minProperties") || cJSON_GetObjectItemCaseSensitive(s, "maxProperties");
        const cJSON *dr = cJSON_GetObjectItemCaseSensitive(s, "dependentRequired");
        const cJSON *dd = cJSON_GetObjectItemCaseSensitive(s, "dependencies");
        if (dr && dd && !(c->flags & SIFT_JSON_SCHEMA_LENIENT))
            return cfail(c, SIFT_E_UNSUPPORTED, "dependentRequired and dependencies together cannot be expressed");
        if (!dr) dr = dd;
        if (c->flags & SIFT_JSON_SCHEMA_LENIENT) dr = NULL;
        if (dr && (c->flags & SIFT_JSON_SCHEMA_LLAMA)) {
            size_t o = path_push(c, dr->string);
            cfail(c, SIFT_E_UNSUPPORTED, "keyword '%s' cannot be expressed with llama.cpp's conventions", dr->string);
            path_pop(c, o);
            return NULL;
        }
        if (dr && cJSON_GetArraySize(dr) == 0) dr = NULL;
        if (!props && !ad && !must && !pp && !counted && !dr) { /* any object */
            const char *o = use_builtin(c, "object");
            return o ? add_rule(c, rule_name, dupstr(o)) : NULL;
        }
        long minp = get_count(c, s, "minProperties", 0), maxp = get_count(c, s, "maxProperties", -1);
        if (minp == -2 || maxp == -2) return NULL;
        size_t n_decl = (size_t)(props ? cJSON_GetArraySize(props) : 0) + (size_t)(req ? cJSON_GetArraySize(req) : 0);
        bool only_extras = n_decl == 0 && !pp;
        if (((maxp >= 0 || minp > 1) && !only_extras) || (c->flags & SIFT_JSON_SCHEMA_LLAMA && (minp > 0 || maxp >= 0))) {
            if (!(c->flags & SIFT_JSON_SCHEMA_LENIENT)) {
                const char *kw = maxp >= 0 ? "maxProperties" : "minProperties";
                size_t o = path_push(c, kw);
                cfail(c, SIFT_E_UNSUPPORTED, "keyword '%s' beside declared properties cannot be expressed in a grammar", kw);
                path_pop(c, o);
                return NULL;
            }
            minp = 0, maxp = -1;
        }
        if (minp > 2000 || maxp > 2000) return cfail(c, SIFT_E_UNSUPPORTED, "min/maxProperties above 2000");
        if (only_extras && (minp > 0 || maxp >= 0) && !ad) ad = &any_schema; /* other keys: any value */
        c->dep_required = dr;
        return build_object(c, props, cJSON_GetObjectItemCaseSensitive(s, "required"), ad,
                            cJSON_GetObjectItemCaseSensitive(s, "patternProperties"), name, rule_name, minp, maxp);
    }
    if (!strcmp(type, "array")) return visit_array(c, s, name, rule_name);
    if (!strcmp(type, "string")) return visit_string(c, s, rule_name);
    const cJSON *mul = cJSON_GetObjectItemCaseSensitive(s, "multipleOf");
    if (mul && (!strcmp(type, "number") || !strcmp(type, "integer"))) {
        /* multipleOf 1: the integers (bounds as for integers); other steps are refused */
        if (!(cJSON_IsNumber(mul) && mul->valuedouble == 1.0) && !(c->flags & SIFT_JSON_SCHEMA_LENIENT)) {
            size_t o = path_push(c, "multipleOf");
            cfail(c, SIFT_E_UNSUPPORTED, "keyword 'multipleOf' other than 1 cannot be expressed in a grammar");
            path_pop(c, o);
            return NULL;
        }
        if (cJSON_IsNumber(mul) && mul->valuedouble == 1.0) return visit_integer(c, s, rule_name);
    }
    if (!strcmp(type, "integer")) return visit_integer(c, s, rule_name);
    if (!strcmp(type, "number")) return visit_number(c, s, rule_name);
    if (!strcmp(type, "boolean") || !strcmp(type, "null")) {
        const char *p = use_builtin(c, type);
        return p ? add_rule(c, rule_name, dupstr(p)) : NULL;
    }
    return cfail(c, SIFT_E_INVAL, "unknown type '%s'", type);
}

static const cJSON *vc_resolve(void *ctx, const char *ref)
{
    conv *c = ctx;
    sift_error saved = c->err ? *c->err : (sift_error){0};
    int st = c->status;
    const cJSON *t = resolve_pointer(c, ref);
    c->status = st; /* a probe: a bad $ref is reported where it is converted */
    if (c->err) *c->err = saved;
    return t;
}

/* A JSON value as the grammar of its text: numbers in every decimal spelling of their value
 * (1, 1.0, 1.00), containers with whitespace where JSON allows it (json.dumps writes ", "
 * and ": "), keys in the listed order. */
static bool put_value(conv *c, sift__gbnf_sbuf *b, const cJSON *v)
{
    char t[64];
    if (cJSON_IsNumber(v) && bound_text(v->valuedouble, t, sizeof t)) {
        sift__gbnf_sb_puts(b, "(");
        bool ok = sift__gbnf_put_number_range(b, t, false, t, false);
        sift__gbnf_sb_puts(b, ")");
        return ok || cfail(c, SIFT_E_INVAL, "internal: number %s", t);
    }
    if (cJSON_IsArray(v) || cJSON_IsObject(v)) {
        bool obj = cJSON_IsObject(v);
        sift__gbnf_sb_puts(b, obj ? "\"{\" space" : "\"[\" space");
        for (const cJSON *e = v->child; e; e = e->next) {
            if (e != v->child) sift__gbnf_sb_puts(b, " \",\" space");
            sift__gbnf_sb_puts(b, " ");
            if (obj) {
                cJSON *key = cJSON_CreateString(e->string);
                if (!key) return coom(c), false;
                bool ok = put_json_literal(c, b, key);
                cJSON_Delete(key);
                if (!ok) return false;
                sift__gbnf_sb_puts(b, " space \":\" space ");
            }
            if (!put_value(c, b, e)) return false;
            sift__gbnf_sb_puts(b, " space");
        }
        sift__gbnf_sb_puts(b, obj ? " \"}\"" : " \"]\"");
        return true;
    }
    return put_json_literal(c, b, v);
}

/* enum / const (here or in a part of allOf): the listed values that validate against the
 * whole schema, as literals. false when this does not apply or a value cannot be decided
 * (the other paths then handle the schema); NULL out with the error set on failure. */
static bool finite_values(conv *c, const cJSON *s, const char *rule_name, const char **out)
{
    const cJSON *vals = cJSON_GetObjectItemCaseSensitive(s, "const");
    bool single = vals != NULL;
    if (!vals) vals = cJSON_GetObjectItemCaseSensitive(s, "enum");
    const cJSON *all = cJSON_GetObjectItemCaseSensitive(s, "allOf");
    for (const cJSON *p = cJSON_IsArray(all) ? all->child : NULL; p && !vals; p = p->next) {
        const cJSON *q = p, *ref = cJSON_GetObjectItemCaseSensitive(p, "$ref");
        if (cJSON_IsString(ref)) q = vc_resolve(c, ref->valuestring);
        if (!cJSON_IsObject(q)) continue;
        vals = cJSON_GetObjectItemCaseSensitive(q, "const");
        single = vals != NULL;
        if (!vals) vals = cJSON_GetObjectItemCaseSensitive(q, "enum");
    }
    if (!vals || (!single && (!cJSON_IsArray(vals) || !cJSON_GetArraySize(vals)))) return false;
    bool keep[256];
    int n = 0;
    for (const cJSON *v = single ? vals : vals->child; v; v = single ? NULL : v->next, n++) {
        if (n >= 256) return false;
        int r = sift__schema_value_valid(s, v, vc_resolve, c);
        if (r < 0) return false;
        keep[n] = r == 1;
    }
    *out = NULL;
    if (!use_builtin(c, "space")) return true;
    sift__gbnf_sbuf b = {0};
    sift__gbnf_sb_puts(&b, "(");
    int k = 0, i = 0;
    for (const cJSON *v = single ? vals : vals->child; v && c->status == SIFT_OK; v = single ? NULL : v->next, i++) {
        if (!keep[i]) continue;
        if (k++) sift__gbnf_sb_puts(&b, " | ");
        put_value(c, &b, v);
    }
    sift__gbnf_sb_puts(&b, ") space");
    if (c->status != SIFT_OK) {
        sift__gbnf_sb_free(&b);
        return true;
    }
    if (!k) {
        sift__gbnf_sb_free(&b);
        c->unsat = true;
        cfail(c, SIFT_E_INVAL, "no '%s' value validates against the schema: the schema matches nothing", single ? "const" : "enum");
        return true;
    }
    *out = add_rule(c, rule_name, sift__gbnf_sb_take(&b));
    return true;
}

static const char *visit(conv *c, const cJSON *s, const char *name, const char *force_type)
{
    if (++c->depth > JS_MAX_DEPTH) {
        c->depth--;
        return cfail(c, SIFT_E_INVAL, "schema nested too deep");
    }
    const char *out = NULL;
    char *rule_name = NULL;
    if (cJSON_IsTrue(s)) {
        out = use_builtin(c, "value");
        goto done;
    }
    if (cJSON_IsFalse(s)) {
        out = (c->unsat = c->status == SIFT_OK, cfail(c, SIFT_E_INVAL, "the schema 'false' matches nothing"));
        goto done;
    }
    if (!cJSON_IsObject(s)) {
        out = cfail(c, SIFT_E_INVAL, "a schema must be an object or a boolean");
        goto done;
    }
    if (!*name) rule_name = dupstr("root");
    else if (is_reserved(name)) rule_name = join_name(name, "");
    else rule_name = dupstr(name);
    if (!rule_name) {
        out = coom(c);
        goto done;
    }
    if (!force_type && !(c->flags & SIFT_JSON_SCHEMA_LENIENT) && finite_values(c, s, rule_name, &out)) goto done;
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(s, "$ref");
    const cJSON *any = cJSON_GetObjectItemCaseSensitive(s, "anyOf");
    if (!any) any = cJSON_GetObjectItemCaseSensitive(s, "oneOf");
    const cJSON *type = force_type ? NULL : cJSON_GetObjectItemCaseSensitive(s, "type");
    if (ref) {
        if (!cJSON_IsString(ref)) {
            out = cfail(c, SIFT_E_INVAL, "'$ref' must be a string");
            goto done;
        }
        size_t o = path_push(c, "$ref");
        const char *target = visit_ref(c, ref->valuestring);
        path_pop(c, o);
        out = target ? add_rule(c, rule_name, dupstr(target)) : NULL;
    } else if (any) {
        if (!cJSON_IsArray(any) || !cJSON_GetArraySize(any)) {
            out = cfail(c, SIFT_E_INVAL, "anyOf / oneOf must be a non-empty array");
            goto done;
        }
        sift__gbnf_sbuf b = {0};
        int k = 0;
        const bool one_of = !cJSON_GetObjectItemCaseSensitive(s, "anyOf");
        /* keywords beside the alternatives constrain every one of them */
        bool siblings = false;
        for (const cJSON *kw = s->child; kw; kw = kw->next) siblings |= !is_inert(kw->string);
        if (cJSON_GetObjectItemCaseSensitive(s, "anyOf") && cJSON_GetObjectItemCaseSensitive(s, "oneOf") &&
            !(c->flags & SIFT_JSON_SCHEMA_LENIENT)) {
            out = cfail(c, SIFT_E_UNSUPPORTED, "anyOf and oneOf together cannot be expressed");
            goto done;
        }
        if (siblings && (c->flags & SIFT_JSON_SCHEMA_LENIENT)) siblings = false; /* llama.cpp: the siblings are ignored */
        size_t o = path_push(c, one_of ? "oneOf" : "anyOf");
        cJSON **alts = sift__gx_calloc((size_t)cJSON_GetArraySize(any) + 1, sizeof *alts);
        if (!alts) coom(c);
        for (const cJSON *alt = any->child; alt && c->status == SIFT_OK; alt = alt->next, k++) {
            char idx[32];
            snprintf(idx, sizeof idx, "%d", k);
            size_t o2 = path_push(c, idx);
            const cJSON *use = alt;
            if (siblings) use = alts[k] = with_siblings(c, s, alt);
            if (use && one_of && !(c->flags & SIFT_JSON_SCHEMA_LENIENT)) {
                for (int j = 0; j < k && c->status == SIFT_OK; j++) {
                    const cJSON *prev = siblings ? alts[j] : cJSON_GetArrayItem(any, j);
                    if (!disjoint(c, prev, use))
                        cfail(c, SIFT_E_UNSUPPORTED, "oneOf: alternatives %d and %d may both match (exactly one must): "
                                                     "not expressible as a grammar", j, k);
                }
            }
            char an[48];
            snprintf(an, sizeof an, "%s%d", *name ? "" : "alternative-", k);
            char *nm = *name ? join_name(name, an) : dupstr(an);
            const char *r = !use ? NULL : nm ? visit(c, use, nm, NULL) : coom(c);
            sift__gx_free(nm);
            path_pop(c, o2);
            if (!r && c->unsat) { /* an alternative that matches nothing: left out */
                c->status = SIFT_OK;
                c->unsat = false;
                if (c->err) *c->err = (sift_error){0};
                continue;
            }
            if (r) sift__gbnf_sb_printf(&b, "%s%s", b.n ? " | " : "", r);
        }
        for (int j = 0; alts && j < k; j++) cJSON_Delete(alts[j]);
        sift__gx_free(alts);
        path_pop(c, o);
        if (c->status == SIFT_OK && !b.n) {
            c->unsat = true;
            cfail(c, SIFT_E_INVAL, "no alternative of anyOf / oneOf matches anything: the schema matches nothing");
        }
        out = c->status == SIFT_OK ? add_rule(c, rule_name, sift__gbnf_sb_take(&b)) : NULL;
        sift__gbnf_sb_free(&b);
    } else if (type && cJSON_IsArray(type) && !cJSON_GetObjectItemCaseSensitive(s, "const") &&
               !cJSON_GetObjectItemCaseSensitive(s, "enum")) {
        sift__gbnf_sbuf b = {0};
        int k = 0;
        for (const cJSON *t = type->child; t && c->status == SIFT_OK; t = t->next, k++) {
            if (!cJSON_IsString(t)) {
                cfail(c, SIFT_E_INVAL, "'type' entries must be strings");
                break;
            }
            char *nm = join_name(*name ? name : "root", t->valuestring);
            const char *r = nm ? visit_typed(c, s, name, nm, t->valuestring) : coom(c);
            sift__gx_free(nm);
            if (r) sift__gbnf_sb_printf(&b, "%s%s", k ? " | " : "", r);
        }
        if (!k && c->status == SIFT_OK) cfail(c, SIFT_E_INVAL, "'type' is an empty list");
        out = c->status == SIFT_OK ? add_rule(c, rule_name, sift__gbnf_sb_take(&b)) : NULL;
        sift__gbnf_sb_free(&b);
    } else if (cJSON_GetObjectItemCaseSensitive(s, "const")) {
        if (!check_keywords(c, s, NULL) || !values_checked(c, s)) goto done;
        const cJSON *cv = cJSON_GetObjectItemCaseSensitive(s, "const");
        if (!value_fits(cv, cJSON_GetObjectItemCaseSensitive(s, "type"))) {
            out = (c->unsat = c->status == SIFT_OK, cfail(c, SIFT_E_INVAL, "'const' does not have the schema's type: the schema matches nothing"));
            goto done;
        }
        sift__gbnf_sbuf b = {0};
        if (put_json_literal(c, &b, cv) && use_builtin(c, "space")) {
            sift__gbnf_sb_puts(&b, " space");
            out = add_rule(c, rule_name, sift__gbnf_sb_take(&b));
        }
        sift__gbnf_sb_free(&b);
    } else if (cJSON_GetObjectItemCaseSensitive(s, "enum")) {
        const cJSON *en = cJSON_GetObjectItemCaseSensitive(s, "enum");
        if (!check_keywords(c, s, NULL) || !values_checked(c, s)) goto done;
        if (!cJSON_IsArray(en) || !cJSON_GetArraySize(en)) {
            out = cfail(c, SIFT_E_INVAL, "'enum' must be a non-empty array");
            goto done;
        }
        const cJSON *ty = cJSON_GetObjectItemCaseSensitive(s, "type");
        sift__gbnf_sbuf b = {0};
        sift__gbnf_sb_puts(&b, "(");
        int k = 0;
        for (const cJSON *v = en->child; v; v = v->next) {
            if (!value_fits(v, ty)) continue; /* a value of another type is not valid */
            if (k++) sift__gbnf_sb_puts(&b, " | ");
            if (!put_json_literal(c, &b, v)) break;
        }
        if (!k && c->status == SIFT_OK) {
            sift__gbnf_sb_free(&b);
            out = (c->unsat = c->status == SIFT_OK, cfail(c, SIFT_E_INVAL, "no 'enum' value has the schema's type: the schema matches nothing"));
            goto done;
        }
        sift__gbnf_sb_puts(&b, ") space");
        if (c->status == SIFT_OK && use_builtin(c, "space")) out = add_rule(c, rule_name, sift__gbnf_sb_take(&b));
        sift__gbnf_sb_free(&b);
    } else if (cJSON_GetObjectItemCaseSensitive(s, "allOf")) {
        if (!check_keywords(c, s, NULL)) goto done;
        out = visit_all_of(c, s, name, rule_name);
    } else {
        const char *t = force_type;
        if (!t && type) {
            if (!cJSON_IsString(type)) {
                out = cfail(c, SIFT_E_INVAL, "'type' must be a string or a list of strings");
                goto done;
            }
            t = type->valuestring;
        }
        if (!t) t = infer_type(s);
        if (!force_type && !type && t && !(c->flags & SIFT_JSON_SCHEMA_LLAMA)) {
            out = visit_untyped(c, s, name, rule_name);
            goto done;
        }
        out = visit_typed(c, s, name, rule_name, t);
    }
done:
    sift__gx_free(rule_name);
    c->depth--;
    return c->status == SIFT_OK ? out : NULL;
}

static int cmp_rule(const void *a, const void *b) { return strcmp(((const jrule *)a)->name, ((const jrule *)b)->name); }

char *sift_json_schema_to_grammar(const char *schema, size_t len, uint32_t flags, sift_error *err)
{
    if (!schema) {
        sift__error_set(err, SIFT_E_INVAL, "JSON schema is NULL");
        return NULL;
    }
    /* JSON text is UTF-8 and strings hold no raw control characters (RFC 8259); cJSON would
     * pass both through, and it keeps strings as C strings, so a \u0000 would cut one short
     * (an enum value "a\u0000b" would become "a"): refuse these up front */
    sift__gx_utf8 u = {0};
    bool in_str = false;
    for (size_t i = 0; i < len; i++) {
        uint8_t ch = (uint8_t)schema[i];
        int32_t r = sift__gx_utf8_feed(&u, ch);
        if (r == GX_UTF8_BAD || (r == GX_UTF8_MORE && i + 1 == len)) {
            sift__error_set(err, SIFT_E_PARSE, "JSON schema: invalid UTF-8 at offset %zu", i);
            return NULL;
        }
        if (r == GX_UTF8_MORE) continue;
        u = (sift__gx_utf8){0};
        if (!in_str) {
            in_str = ch == '"';
        } else if (ch == '"') {
            in_str = false;
        } else if (ch < 0x20) {
            sift__error_set(err, SIFT_E_PARSE, "JSON schema: control character 0x%02X inside a string at offset %zu", ch, i);
            return NULL;
        } else if (ch == '\\' && i + 1 < len) {
            if (i + 5 < len && schema[i + 1] == 'u' && !memcmp(schema + i + 2, "0000", 4)) {
                sift__error_set(err, SIFT_E_UNSUPPORTED, "JSON schema: \\u0000 inside a string (offset %zu) is not supported", i);
                return NULL;
            }
            i++; /* the escaped character (a '"' or '\\' does not end or escape anything) */
        }
    }
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(schema, len, &end, false);
    if (!root) {
        size_t off = end && end >= schema && end <= schema + len ? (size_t)(end - schema) : 0;
        sift__error_set(err, SIFT_E_PARSE, "JSON schema: invalid JSON near offset %zu", off);
        return NULL;
    }
    /* only whitespace may follow the value */
    for (const char *p = end; p && p < schema + len; p++)
        if (!isspace((unsigned char)*p)) {
            cJSON_Delete(root);
            sift__error_set(err, SIFT_E_PARSE, "JSON schema: unexpected text after the value at offset %zu", (size_t)(p - schema));
            return NULL;
        }
    conv c = {.root = root, .flags = flags, .err = err, .status = SIFT_OK};
    const char *top = visit(&c, root, "", NULL);
    char *out = NULL;
    if (top && c.status == SIFT_OK) {
        /* the start rule must be called root */
        if (strcmp(top, "root") && !find_rule(&c, "root")) add_rule(&c, "root", dupstr(top));
    }
    if (c.status == SIFT_OK) {
        qsort(c.rules, c.n_rules, sizeof *c.rules, cmp_rule);
        sift__gbnf_sbuf b = {0};
        /* puts, not printf: vfprintf copied the (MB-sized, on big schemas) text slowly */
        for (size_t i = 0; i < c.n_rules; i++) {
            sift__gbnf_sb_puts(&b, c.rules[i].name);
            sift__gbnf_sb_putn(&b, " ::= ", 5);
            sift__gbnf_sb_puts(&b, c.rules[i].body);
            sift__gbnf_sb_putn(&b, "\n", 1);
        }
        out = sift__gbnf_sb_take(&b);
        if (!out) sift__error_set(err, SIFT_E_NOMEM, "out of memory (or a grammar above %u bytes)", SIFT__GBNF_TEXT_MAX);
        /* what this converter returns always parses: the one way it cannot is a $ref cycle
         * that reaches itself before any text ({"$ref": "#"}, {"anyOf": [{"$ref": "#"}, ...]}),
         * a left-recursive rule. So the output is parsed here when there was a $ref cycle
         * (always in builds with assertions): parsing every output was a whole second GBNF
         * parse inside each json_schema request's time to first mask (~10% of it on
         * MaskBench, 20+ ms on Kubernetes schemas). */
        sift_error e2 = {0};
        bool need_check = c.ref_cycle;
#ifndef NDEBUG
        need_check = true;
#endif
        sift_grammar *check = out && need_check ? sift_grammar_parse(out, strlen(out), "root", NULL, &e2) : NULL;
        if (out && need_check && !check) {
            if (e2.status == SIFT_E_PARSE && strstr(e2.msg, "left recursion"))
                sift__error_set(err, SIFT_E_UNSUPPORTED, "JSON schema: a $ref cycle refers back to itself before any value is written (%s)", e2.msg);
            else if (e2.status == SIFT_E_PARSE && (strstr(e2.msg, "nested repetitions") || strstr(e2.msg, "too large") ||
                                                   strstr(e2.msg, "too many") || strstr(e2.msg, "too complex")))
                /* a schema whose counts multiply (maxItems inside maxItems inside maxLength) is
                 * valid, only over the grammar parser's limits: say which, not "internal error" */
                sift__error_set(err, SIFT_E_UNSUPPORTED, "JSON schema: its grammar is over a limit of the GBNF parser (%s)", e2.msg);
            else
                sift__error_set(err, e2.status ? e2.status : SIFT_E_NOMEM, "JSON schema: internal error, the generated grammar does not parse: %s", e2.msg);
            sift__gx_free(out);
            out = NULL;
        }
        sift_grammar_free(check);
    }
    for (size_t i = 0; i < c.n_rules; i++) {
        sift__gx_free(c.rules[i].name);
        sift__gx_free(c.rules[i].body);
    }
    sift__gx_free(c.rules);
    sift__gx_free(c.rule_ht);
    cJSON_Delete(root);
    return out;
}
