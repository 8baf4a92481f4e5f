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
 *                        values, a required const property), rewritten apart, or each taken
 *                        with the complements of the others (json_schema_one_of.c,
 *                        json_schema_not.c), else refused; alternatives that match nothing
 *                        are left out
 *   allOf                the parts flattened through $ref chains and nested allOf, then merged
 *                        keyword by keyword (types meet, bounds tighten, required joins,
 *                        properties per name) or as objects (additionalProperties per part),
 *                        enums intersected; anything else is an error (json_schema_combine.c)
 *   $ref                 JSON pointers into this document: #, #/$defs/x, #/definitions/x,
 *                        #/properties/..., recursive references become recursive rules; beside
 *                        other keywords it is one more allOf part (2019-09 on, the default), or
 *                        overrides them ("$schema" draft-07 or earlier, SIFT_JSON_SCHEMA_DRAFT7)
 *   not, uniqueItems, if rewritten when they are no-ops or another keyword (sift__js_simplify);
 *                        any other `not S`: S's complement as an allOf part (json_schema_not.c)
 *   object               JSON Schema's semantics by default: the declared properties in any
 *                        order, each at most once (JSON Schema has no property order), when
 *                        the object declares at most 7 (a rule per set of keys written,
 *                        any_order_object; 1024 such rules per schema at most); bigger
 *                        objects take the schema's order or required-first (two_orders: a
 *                        documented departure, as LLGuidance / XGrammar / llama.cpp take one
 *                        order: valid objects in another order are rejected, nothing invalid
 *                        is accepted). Required ones present,
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
 *                        sets of any order (object_deps: names `properties` does not declare
 *                        are tracked as optional additional properties; objects of at most 7
 *                        tracked properties, else refused); propertyNames (the key rule,
 *                        on its own: sift__js_visit_property_names).
 *                        SIFT_JSON_SCHEMA_LLAMA: llama.cpp's layout instead (required first,
 *                        optional ones in any subset keeping their order; a missing
 *                        additionalProperties generates no extra keys; undeclared required
 *                        names are an error).
 *   array                items with minItems / maxItems; prefixItems (or draft-07's items
 *                        array) as a tuple, then `items` (additionalItems in draft-07; missing:
 *                        any value); minItems below the tuple's length makes its tail optional;
 *                        contains / minContains as witnesses among the items (visit_contains)
 *   string               minLength / maxLength (characters, an escape counts as one; above
 *                        2000 as 1000-character chunk rules, up to 2,000,000); format date,
 *                        time, date-time, uuid, email, hostname, ipv4, uri (other standard
 *                        formats are refused, non-standard ones are annotations); pattern
 *                        (below), with a length when it is one atom ^A{m,n}$, when its strings
 *                        always have that length, or when one repeated character of an anchored
 *                        pattern can take what the length leaves (sift__schema_regex_bounded)
 *   integer              minimum / maximum / exclusiveMinimum / exclusiveMaximum, exactly,
 *                        digit by digit; unbounded integers have at most 16 digits (llama.cpp);
 *                        no ".0" fraction is generated (valid, but clients read a float)
 *   numbers in const / enum  from their text when a double cannot hold them (attach_number_texts)
 *   number               the same bounds on decimals (number_range.c; the exponent form only
 *                        where its sign decides: one bound, 0 on its open side);
 *                        multipleOf 1 means the integers; other steps without bounds digit by
 *                        digit, the residue mod the step (sift__js_visit_multiple_of)
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
 * maxContains, contains beside maxItems / a tuple, multipleOf other than 1 beside bounds, propertyNames beside declared properties, min/maxProperties beside declared
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
#include <cjson/cJSON.h>
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schema/json_schema_int.h"

__attribute__((format(printf, 3, 4))) const char *sift__js_cfail(conv *c, int status, const char *fmt, ...)
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
const char *sift__js_coom(conv *c) { return sift__js_cfail(c, SIFT_E_NOMEM, "out of memory"); }

size_t sift__js_path_push(conv *c, const char *seg)
{
    size_t old = c->path_len;
    int n = snprintf(c->path + old, sizeof c->path - old, "/%s", seg);
    if (n > 0) c->path_len = old + (size_t)n < sizeof c->path ? old + (size_t)n : sizeof c->path - 1;
    return old;
}
void sift__js_path_pop(conv *c, size_t old)
{
    c->path_len = old;
    c->path[old] = 0;
}

char *sift__js_dupstr(const char *s)
{
    size_t n = strlen(s);
    char *d = sift__gx_malloc(n + 1);
    if (d) memcpy(d, s, n + 1);
    return d;
}

/* ---- built-in rules --------------------------------------------------------------------------- */


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
    /* host names: LDH labels of at most 63 characters, no hyphen first or last, and none with
     * "--" in its 3rd and 4th characters (RFC 5891 reserves those for A-labels, "xn--...",
     * whose IDNA rules no grammar can check: they are not generated); at most 4 labels, the
     * last starting with a letter and at most 61 long, so the name has at most 253 */
    {"host-label", "[A-Za-z0-9] ( [A-Za-z0-9] | [A-Za-z0-9-] host-tail )?", {"host-tail"}},
    {"host-tail", "[A-Za-z0-9] ( [A-Za-z0-9-]{0,59} [A-Za-z0-9] )? | \"-\" [A-Za-z0-9] ( [A-Za-z0-9-]{0,58} [A-Za-z0-9] )?", {0}},
    {"host-top", "[A-Za-z] ( [A-Za-z0-9] | [A-Za-z0-9-] host-top-tail )?", {"host-top-tail"}},
    {"host-top-tail", "[A-Za-z0-9] ( [A-Za-z0-9-]{0,57} [A-Za-z0-9] )? | \"-\" [A-Za-z0-9] ( [A-Za-z0-9-]{0,56} [A-Za-z0-9] )?", {0}},
    {"host-name", "( host-label \".\" ){0,3} host-top", {"host-label", "host-top"}},
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

const builtin *sift__js_find_builtin(const char *name)
{
    for (size_t i = 0; i < sizeof BUILTINS / sizeof *BUILTINS; i++)
        if (!strcmp(BUILTINS[i].name, name)) return &BUILTINS[i];
    return NULL;
}

static bool is_reserved(const char *name) { return !strcmp(name, "root") || sift__js_find_builtin(name) != NULL; }

/* Make sure built-in rule `name` (and what it uses) exists; returns its name. */
const char *sift__js_use_builtin(conv *c, const char *name)
{
    jrule *have = sift__js_find_rule(c, name);
    if (have) return have->name; /* built-ins are added named */
    const builtin *b = sift__js_find_builtin(name);
    if (!b) return sift__js_cfail(c, SIFT_E_INVAL, "internal: no built-in rule '%s'", name);
    const char *body = b->body;
    /* JSON's exponent is any digits ("1e-06" is valid JSON); llama.cpp's rule spells it as an
     * integral part (no leading zero), which SIFT_JSON_SCHEMA_LLAMA keeps */
    if (!strcmp(name, "number") && !(c->flags & SIFT_JSON_SCHEMA_LLAMA))
        body = "(\"-\"? integral-part) (\".\" decimal-part)? ([eE] [-+]? decimal-part)? space";
    const char *r = sift__js_add_rule_named(c, name, sift__js_dupstr(body));
    if (!r) return NULL;
    for (int k = 0; k < 3 && b->deps[k]; k++)
        if (!sift__js_use_builtin(c, b->deps[k])) return NULL;
    if (!strcmp(name, "value")) {
        if (!sift__js_use_builtin(c, "number") || !sift__js_use_builtin(c, "boolean") || !sift__js_use_builtin(c, "null")) return NULL;
    }
    return sift__js_find_rule(c, name)->name;
}

/* The literal of a JSON value's compact text (cJSON's printer, which escapes as JSON does). */
bool sift__js_put_json_literal(conv *c, sift__gbnf_sbuf *b, const cJSON *v)
{
    char *txt = cJSON_PrintUnformatted(v);
    if (!txt) return sift__js_coom(c), false;
    sift__gbnf_put_literal(b, txt, strlen(txt));
    cJSON_free(txt);
    return true;
}

/* The rule body for a string matching `pattern` (regex_to_gbnf.c does the expression). */
char *sift__js_pattern_body(conv *c, const char *pat, size_t n)
{
    bool anch_start, anch_end;
    sift_error e2 = {0};
    char *inner = sift__schema_regex_to_gbnf(pat, n, &anch_start, &anch_end, &e2);
    if (!inner) {
        sift__js_cfail(c, e2.status ? e2.status : SIFT_E_NOMEM, "pattern, %s", e2.msg);
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
    if ((!anch_start || !anch_end) && !sift__js_use_builtin(c, "char")) {
        sift__gbnf_sb_free(&b);
        return NULL;
    }
    return sift__gbnf_sb_take(&b);
}

/* ---- keywords ---------------------------------------------------------------------------------- */

const char *const sift__js_annotations[] = {
    "title", "description", "default", "examples", "$schema", "$id", "$comment", "deprecated", "readOnly",
    "writeOnly", "contentMediaType", "contentEncoding", "contentSchema", "$defs", "definitions", "$anchor",
    "$vocabulary", "discriminator", "nullable", "example", "id", NULL};
static const char *const UNSUPPORTED[] = {
    "not", "if", "then", "else", "uniqueItems", "maxContains",
    "dependentRequired",
    "dependentSchemas", "dependencies", "unevaluatedProperties", "unevaluatedItems", "$dynamicRef",
    "$recursiveRef", NULL};

/* Standard formats a validator checks but that have no grammar here: refused, never a
 * plain string (which would accept invalid values). */
const char *const sift__js_formats_refused[] = {
    "ipv6", "uri-reference", "iri", "iri-reference", "idn-email", "idn-hostname", "uri-template", "json-pointer",
    "relative-json-pointer", "regex", "duration", NULL};

/* The keywords of JSON Schema's validation and applicator vocabularies (2020-12, 2019-09 and
 * draft-07): any other keyword is an annotation (2020-12, section 4.3.1: unknown keywords
 * are collected, never validated), whatever its name. */
bool sift__js_is_keyword(const char *k)
{
    static const char *const KEYWORDS[] = {
        "type", "enum", "const", "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum", "maxLength",
        "minLength", "pattern", "format", "maxItems", "minItems", "uniqueItems", "maxContains", "minContains", "maxProperties",
        "minProperties", "required", "dependentRequired", "properties", "patternProperties", "additionalProperties",
        "propertyNames", "items", "prefixItems", "additionalItems", "contains", "unevaluatedItems", "unevaluatedProperties",
        "allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentSchemas", "dependencies", "$ref", "$dynamicRef",
        "$recursiveRef", NULL};
    return sift__js_in_list(KEYWORDS, k) && !sift__js_in_list(sift__js_annotations, k);
}

bool sift__js_in_list(const char *const *l, const char *s)
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
        bool bad = sift__js_in_list(UNSUPPORTED, key);
        bool dep = !strcmp(key, "dependentRequired") || !strcmp(key, "dependencies") || !strcmp(key, "dependentSchemas");
        if (bad && dep && type && strcmp(type, "object")) bad = false; /* they constrain objects only */
        if (bad && type && !strcmp(type, "object") && dep_arrays(k, key)) bad = false; /* build_object decides */
        if (bad && !strcmp(key, "maxContains") && !cJSON_GetObjectItemCaseSensitive(s, "contains")) bad = false; /* says nothing alone */
        /* draft-07 and earlier let validators check contentMediaType / contentEncoding (the
         * suite's optional tests do); later drafts made them annotations */
        if (c->ref_overrides && (!strcmp(key, "contentMediaType") || !strcmp(key, "contentEncoding"))) bad = true;
        if (bad) {
            size_t o = sift__js_path_push(c, key);
            sift__js_cfail(c, SIFT_E_UNSUPPORTED, "keyword '%s' cannot be expressed in a grammar (SIFT_JSON_SCHEMA_LENIENT ignores it)", key);
            sift__js_path_pop(c, o);
            return false;
        }
    }
    return true;
}


static const char *const TYPED_OBJ[] = {"properties", "additionalProperties", "required", "patternProperties", "minProperties",
                                        "maxProperties", "dependentRequired", "dependencies", "propertyNames", NULL};
static const char *const TYPED_ARR[] = {"items", "prefixItems", "minItems", "maxItems", "contains", NULL};
static const char *const TYPED_STR[] = {"pattern", "minLength", "maxLength", "format", NULL};
static const char *const TYPED_NUM[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", NULL};

static const char *infer_type(const cJSON *s)
{
    for (const cJSON *k = s->child; k; k = k->next) {
        if (sift__js_in_list(TYPED_OBJ, k->string)) return "object";
        if (sift__js_in_list(TYPED_ARR, k->string)) return "array";
        if (sift__js_in_list(TYPED_STR, k->string)) return "string";
        if (sift__js_in_list(TYPED_NUM, k->string)) return "number";
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
        for (const cJSON *kw = s->child; kw && !has; kw = kw->next) has = sift__js_in_list(lists[k], kw->string);
        const char *r = NULL;
        if (!has) {
            r = sift__js_use_builtin(c, kinds[k]);
        } else {
            char *kn = sift__js_join_name(rule_name, kinds[k]);
            sift_error saved = c->err ? *c->err : (sift_error){0};
            r = kn ? visit_typed(c, s, name, kn, kinds[k]) : sift__js_coom(c);
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
    if (c->status == SIFT_OK && sift__js_use_builtin(c, "boolean") && sift__js_use_builtin(c, "null")) {
        sift__gbnf_sb_printf(&b, "%sboolean | null", b.n ? " | " : "");
        out = sift__js_add_rule(c, rule_name, sift__gbnf_sb_take(&b));
    }
    sift__gbnf_sb_free(&b);
    return out;
}

static const char *visit_typed(conv *c, const cJSON *s, const char *name, const char *rule_name, const char *type)
{
    if (!check_keywords(c, s, type)) return NULL;
    if (!type) {
        /* {} is any value (JSON Schema); llama.cpp's converter reads a schema without keywords as
         * an object, and so does SIFT_JSON_SCHEMA_LLAMA */
        bool bare = true;
        for (const cJSON *k = s->child; k && bare; k = k->next) bare = sift__js_in_list(sift__js_annotations, k->string);
        const char *any = (c->flags & SIFT_JSON_SCHEMA_LLAMA) && bare ? "object" : "value";
        const char *r = sift__js_use_builtin(c, any);
        return r ? sift__js_add_rule(c, rule_name, sift__js_dupstr(r)) : NULL;
    }
    if (!strcmp(type, "object")) {
        const cJSON *pnames = cJSON_GetObjectItemCaseSensitive(s, "propertyNames");
        if (pnames && !cJSON_IsTrue(pnames) && !(cJSON_IsObject(pnames) && !pnames->child) && !(c->flags & SIFT_JSON_SCHEMA_LENIENT))
            return sift__js_visit_property_names(c, s, name, rule_name);
        const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
        const cJSON *ad = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
        if (props && !cJSON_IsObject(props)) return sift__js_cfail(c, SIFT_E_INVAL, "'properties' must be an object");
        const cJSON *req = cJSON_GetObjectItemCaseSensitive(s, "required");
        bool must = req && cJSON_GetArraySize(req) > 0 && !(c->flags & SIFT_JSON_SCHEMA_LLAMA);
        const cJSON *pp = cJSON_GetObjectItemCaseSensitive(s, "patternProperties");
        static const cJSON any_schema = {.type = cJSON_True};
        bool counted = cJSON_GetObjectItemCaseSensitive(s, "minProperties") || cJSON_GetObjectItemCaseSensitive(s, "maxProperties");
        const cJSON *dr = cJSON_GetObjectItemCaseSensitive(s, "dependentRequired");
        const cJSON *dd = cJSON_GetObjectItemCaseSensitive(s, "dependencies");
        if (dr && dd && !(c->flags & SIFT_JSON_SCHEMA_LENIENT))
            return sift__js_cfail(c, SIFT_E_UNSUPPORTED, "dependentRequired and dependencies together cannot be expressed");
        if (!dr) dr = dd;
        if (c->flags & SIFT_JSON_SCHEMA_LENIENT) dr = NULL;
        if (dr && (c->flags & SIFT_JSON_SCHEMA_LLAMA)) {
            size_t o = sift__js_path_push(c, dr->string);
            sift__js_cfail(c, SIFT_E_UNSUPPORTED, "keyword '%s' cannot be expressed with llama.cpp's conventions", dr->string);
            sift__js_path_pop(c, o);
            return NULL;
        }
        if (dr && cJSON_GetArraySize(dr) == 0) dr = NULL;
        if (!props && !ad && !must && !pp && !counted && !dr) { /* any object */
            const char *o = sift__js_use_builtin(c, "object");
            return o ? sift__js_add_rule(c, rule_name, sift__js_dupstr(o)) : NULL;
        }
        long minp = sift__js_get_count(c, s, "minProperties", 0), maxp = sift__js_get_count(c, s, "maxProperties", -1);
        if (minp == -2 || maxp == -2) return NULL;
        size_t n_decl = (size_t)(props ? cJSON_GetArraySize(props) : 0) + (size_t)(req ? cJSON_GetArraySize(req) : 0);
        bool only_extras = n_decl == 0 && !pp;
        if (((maxp >= 0 || minp > 1) && !only_extras) || (c->flags & SIFT_JSON_SCHEMA_LLAMA && (minp > 0 || maxp >= 0))) {
            if (!(c->flags & SIFT_JSON_SCHEMA_LENIENT)) {
                const char *kw = maxp >= 0 ? "maxProperties" : "minProperties";
                size_t o = sift__js_path_push(c, kw);
                sift__js_cfail(c, SIFT_E_UNSUPPORTED, "keyword '%s' beside declared properties cannot be expressed in a grammar", kw);
                sift__js_path_pop(c, o);
                return NULL;
            }
            minp = 0, maxp = -1;
        }
        if (minp > 2000 || maxp > 2000) return sift__js_cfail(c, SIFT_E_UNSUPPORTED, "min/maxProperties above 2000");
        if (only_extras && (minp > 0 || maxp >= 0) && !ad) ad = &any_schema; /* other keys: any value */
        c->dep_required = dr;
        return sift__js_build_object(c, props, cJSON_GetObjectItemCaseSensitive(s, "required"), ad,
                            cJSON_GetObjectItemCaseSensitive(s, "patternProperties"), name, rule_name, minp, maxp);
    }
    if (!strcmp(type, "array")) return sift__js_visit_array(c, s, name, rule_name);
    if (!strcmp(type, "string")) return sift__js_visit_string(c, s, rule_name);
    const cJSON *mul = cJSON_GetObjectItemCaseSensitive(s, "multipleOf");
    if (mul && (!strcmp(type, "number") || !strcmp(type, "integer"))) {
        /* multipleOf 1: the integers (bounds as for integers); other steps digit by digit */
        if (!(cJSON_IsNumber(mul) && mul->valuedouble == 1.0) && !(c->flags & SIFT_JSON_SCHEMA_LENIENT))
            return sift__js_visit_multiple_of(c, s, mul, !strcmp(type, "integer"), rule_name);
        if (cJSON_IsNumber(mul) && mul->valuedouble == 1.0) return sift__js_visit_integer(c, s, rule_name);
    }
    if (!strcmp(type, "integer")) return sift__js_visit_integer(c, s, rule_name);
    if (!strcmp(type, "number")) return sift__js_visit_number(c, s, rule_name);
    if (!strcmp(type, "boolean") || !strcmp(type, "null")) {
        const char *p = sift__js_use_builtin(c, type);
        return p ? sift__js_add_rule(c, rule_name, sift__js_dupstr(p)) : NULL;
    }
    return sift__js_cfail(c, SIFT_E_INVAL, "unknown type '%s'", type);
}

const cJSON *sift__js_vc_resolve(void *ctx, const char *ref)
{
    conv *c = ctx;
    sift_error saved = c->err ? *c->err : (sift_error){0};
    int st = c->status;
    const cJSON *t = sift__js_resolve_pointer(c, ref);
    c->status = st; /* a probe: a bad $ref is reported where it is converted */
    if (c->err) *c->err = saved;
    return t;
}

/* A JSON value as the grammar of its text: numbers in every decimal spelling of their value
 * (1, 1.0, 1.00), containers with whitespace where JSON allows it (json.dumps writes ", "
 * and ": "), keys in the listed order. */
/* A number of more than 15 significant digits (a double cannot hold it) from its text,
 * exactly: the plain decimal of its value, an integer also with ".0..." (JSON Schema: the
 * same number), a fraction also with trailing zeros. No exponent form is written (a
 * subset). Also for any number when `always` (one whose double has no plain decimal: 1e400).
 * Returns 0 when the text is not such a number, -1 on an error. */
static int put_exact_number(conv *c, sift__gbnf_sbuf *b, const char *t, bool always)
{
    const bool neg = *t == '-';
    if (neg) t++;
    char digs[512];
    size_t nd = 0;
    long pt = -1; /* the decimal point's place among digs */
    for (; *t && *t != 'e' && *t != 'E'; t++) {
        if (*t == '.') pt = (long)nd;
        else if (nd + 1 < sizeof digs) digs[nd++] = *t;
        else return sift__js_cfail(c, SIFT_E_UNSUPPORTED, "a number of more than %zu digits", sizeof digs - 1), -1;
    }
    if (pt < 0) pt = (long)nd;
    if (*t) {
        char *end;
        long x = strtol(t + 1, &end, 10);
        if (*end || x > 400 || x < -400) return sift__js_cfail(c, SIFT_E_UNSUPPORTED, "a number's exponent beyond 400"), -1;
        pt += x;
    }
    size_t lo = 0, hi = nd; /* drop leading and trailing zeros */
    while (lo < hi && digs[lo] == '0') lo++, pt--;
    while (hi > lo && digs[hi - 1] == '0') hi--;
    if (hi - lo <= 15 && !always) return 0;
    if (lo == hi) pt = 1, lo = hi = 0; /* zero */
    char out[1400];
    size_t o = 0;
    if (neg) out[o++] = '-';
    long n = (long)(hi - lo);
    if (pt <= 0) {
        out[o++] = '0';
        out[o++] = '.';
        for (long i = 0; i < -pt; i++) out[o++] = '0';
        for (long i = 0; i < n; i++) out[o++] = digs[lo + (size_t)i];
    } else {
        for (long i = 0; i < pt; i++) out[o++] = i < n ? digs[lo + (size_t)i] : '0';
        if (pt < n) {
            out[o++] = '.';
            for (long i = pt; i < n; i++) out[o++] = digs[lo + (size_t)i];
        }
    }
    sift__gbnf_sb_puts(b, "(");
    sift__gbnf_put_literal(b, out, o);
    sift__gbnf_sb_puts(b, pt < n ? " \"0\"*)" : " (\".\" \"0\"+)?)");
    return 1;
}

static bool put_value(conv *c, sift__gbnf_sbuf *b, const cJSON *v)
{
    char t[64];
    const bool plain = cJSON_IsNumber(v) && sift__js_bound_text(v->valuedouble, t, sizeof t);
    if (cJSON_IsNumber(v) && v->valuestring) { /* beyond a double (or its plain decimal): the text */
        int r = put_exact_number(c, b, v->valuestring, !plain);
        if (r) return r > 0;
    }
    if (cJSON_IsNumber(v) && !plain) return sift__js_cfail(c, SIFT_E_UNSUPPORTED, "a number value without its exact text");
    if (plain) {
        sift__gbnf_sb_puts(b, "(");
        bool ok = sift__gbnf_put_number_range(b, t, false, t, false);
        sift__gbnf_sb_puts(b, ")");
        return ok || sift__js_cfail(c, SIFT_E_INVAL, "internal: number %s", t);
    }
    if (cJSON_IsArray(v) || cJSON_IsObject(v)) {
        bool obj = cJSON_IsObject(v);
        sift__gbnf_sb_puts(b, obj ? "\"{\" space" : "\"[\" space");
        for (const cJSON *e = v->child; e; e = e->next) {
            if (e != v->child) sift__gbnf_sb_puts(b, " \",\" space");
            sift__gbnf_sb_puts(b, " ");
            if (obj) {
                cJSON *key = cJSON_CreateString(e->string);
                if (!key) return sift__js_coom(c), false;
                bool ok = sift__js_put_json_literal(c, b, key);
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
    return sift__js_put_json_literal(c, b, v);
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
        if (cJSON_IsString(ref)) q = sift__js_vc_resolve(c, ref->valuestring);
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
        int r = sift__schema_value_valid(s, v, sift__js_vc_resolve, c);
        if (r < 0) return false;
        keep[n] = r == 1;
    }
    *out = NULL;
    if (!sift__js_use_builtin(c, "space")) return true;
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
        sift__js_cfail(c, SIFT_E_INVAL, "no '%s' value validates against the schema: the schema matches nothing", single ? "const" : "enum");
        return true;
    }
    *out = sift__js_add_rule(c, rule_name, sift__gbnf_sb_take(&b));
    return true;
}

const char *sift__js_visit(conv *c, const cJSON *s, const char *name, const char *force_type)
{
    if (++c->depth > JS_MAX_DEPTH) {
        c->depth--;
        return sift__js_cfail(c, SIFT_E_INVAL, "schema nested too deep");
    }
    const char *out = NULL;
    char *rule_name = NULL;
    if (cJSON_IsTrue(s)) {
        out = sift__js_use_builtin(c, "value");
        goto done;
    }
    if (cJSON_IsFalse(s)) {
        out = (c->unsat = c->status == SIFT_OK, sift__js_cfail(c, SIFT_E_INVAL, "the schema 'false' matches nothing"));
        goto done;
    }
    if (!cJSON_IsObject(s)) {
        out = sift__js_cfail(c, SIFT_E_INVAL, "a schema must be an object or a boolean");
        goto done;
    }
    bool unsat = false; /* lenient: llama.cpp's reading, where these keywords are ignored */
    cJSON *simple = (c->flags & SIFT_JSON_SCHEMA_LENIENT) ? NULL : sift__js_simplify(c, s, &unsat);
    if (unsat) {
        out = (c->unsat = c->status == SIFT_OK, sift__js_cfail(c, SIFT_E_INVAL, "'not' of a schema that matches everything: the schema matches nothing"));
        goto done;
    }
    if (simple) {
        c->depth--;
        out = sift__js_visit(c, simple, name, force_type);
        cJSON_Delete(simple);
        return out;
    }
    if (c->status != SIFT_OK) goto done;
    if (!*name) rule_name = sift__js_dupstr("root");
    else if (is_reserved(name)) rule_name = sift__js_join_name(name, "");
    else rule_name = sift__js_dupstr(name);
    if (!rule_name) {
        out = sift__js_coom(c);
        goto done;
    }
    if (!force_type && !(c->flags & SIFT_JSON_SCHEMA_LENIENT) && finite_values(c, s, rule_name, &out)) goto done;
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(s, "$ref");
    const cJSON *any = cJSON_GetObjectItemCaseSensitive(s, "anyOf");
    if (!any) any = cJSON_GetObjectItemCaseSensitive(s, "oneOf");
    const cJSON *type = force_type ? NULL : cJSON_GetObjectItemCaseSensitive(s, "type");
    const bool ref_alone = ref && (c->ref_overrides || (c->flags & SIFT_JSON_SCHEMA_LENIENT) || !sift__js_ref_has_siblings(s));
    if (ref && !ref_alone) {
        /* 2019-09 and later: the target and the keywords beside $ref must all hold */
        if (check_keywords(c, s, NULL)) out = sift__js_visit_all_of(c, s, name, rule_name);
    } else if (ref) {
        if (!cJSON_IsString(ref)) {
            out = sift__js_cfail(c, SIFT_E_INVAL, "'$ref' must be a string");
            goto done;
        }
        size_t o = sift__js_path_push(c, "$ref");
        const char *target = sift__js_visit_ref(c, ref->valuestring);
        sift__js_path_pop(c, o);
        out = target ? sift__js_add_rule(c, rule_name, sift__js_dupstr(target)) : NULL;
    } else if (any) {
        if (!cJSON_IsArray(any) || !cJSON_GetArraySize(any)) {
            out = sift__js_cfail(c, SIFT_E_INVAL, "anyOf / oneOf must be a non-empty array");
            goto done;
        }
        sift__gbnf_sbuf b = {0};
        int k = 0;
        const bool one_of = !cJSON_GetObjectItemCaseSensitive(s, "anyOf");
        /* keywords beside the alternatives constrain every one of them */
        bool siblings = false;
        for (const cJSON *kw = s->child; kw; kw = kw->next) siblings |= !sift__js_is_inert(kw->string);
        if (cJSON_GetObjectItemCaseSensitive(s, "anyOf") && cJSON_GetObjectItemCaseSensitive(s, "oneOf") &&
            !(c->flags & SIFT_JSON_SCHEMA_LENIENT)) {
            out = sift__js_cfail(c, SIFT_E_UNSUPPORTED, "anyOf and oneOf together cannot be expressed");
            goto done;
        }
        if (siblings && (c->flags & SIFT_JSON_SCHEMA_LENIENT)) siblings = false; /* llama.cpp: the siblings are ignored */
        size_t o = sift__js_path_push(c, one_of ? "oneOf" : "anyOf");
        int n_alt = cJSON_GetArraySize(any);
        cJSON **alts = sift__gx_calloc((size_t)n_alt + 1, sizeof *alts);
        if (!alts) sift__js_coom(c);
        cJSON *pieces = NULL; /* oneOf: as a union of pieces no value matches twice */
        if (one_of && alts && !(c->flags & SIFT_JSON_SCHEMA_LENIENT)) {
            const cJSON **uses = sift__gx_calloc((size_t)n_alt + 1, sizeof *uses);
            if (!uses) sift__js_coom(c);
            for (const cJSON *alt = any->child; uses && alt && c->status == SIFT_OK; alt = alt->next, k++) {
                uses[k] = siblings ? (alts[k] = sift__js_with_siblings(c, s, alt)) : alt;
                if (!uses[k] && c->unsat) { /* matches nothing with the keywords beside it: left out */
                    c->status = SIFT_OK;
                    c->unsat = false;
                    if (c->err) *c->err = (sift_error){0};
                }
            }
            if (uses && c->status == SIFT_OK) pieces = sift__js_one_of_pieces(c, uses, n_alt);
            sift__gx_free(uses);
            siblings = false; /* merged into the pieces */
            k = 0;
        }
        for (const cJSON *alt = pieces ? pieces->child : any->child; alt && c->status == SIFT_OK; alt = alt->next, k++) {
            char idx[32];
            snprintf(idx, sizeof idx, "%d", k);
            size_t o2 = sift__js_path_push(c, idx);
            const cJSON *use = alt;
            if (siblings) use = alts[k] = sift__js_with_siblings(c, s, alt);
            char an[48];
            snprintf(an, sizeof an, "%s%d", *name ? "" : "alternative-", k);
            char *nm = *name ? sift__js_join_name(name, an) : sift__js_dupstr(an);
            const char *r = !use ? NULL : nm ? sift__js_visit(c, use, nm, NULL) : sift__js_coom(c);
            sift__gx_free(nm);
            sift__js_path_pop(c, o2);
            if (!r && c->unsat) { /* an alternative that matches nothing: left out */
                c->status = SIFT_OK;
                c->unsat = false;
                if (c->err) *c->err = (sift_error){0};
                continue;
            }
            if (r) sift__gbnf_sb_printf(&b, "%s%s", b.n ? " | " : "", r);
        }
        for (int j = 0; alts && j < n_alt; j++) cJSON_Delete(alts[j]);
        sift__gx_free(alts);
        cJSON_Delete(pieces);
        sift__js_path_pop(c, o);
        if (c->status == SIFT_OK && !b.n) {
            c->unsat = true;
            sift__js_cfail(c, SIFT_E_INVAL, "no alternative of anyOf / oneOf matches anything: the schema matches nothing");
        }
        out = c->status == SIFT_OK ? sift__js_add_rule(c, rule_name, sift__gbnf_sb_take(&b)) : NULL;
        sift__gbnf_sb_free(&b);
    } else if (type && cJSON_IsArray(type) && !cJSON_GetObjectItemCaseSensitive(s, "const") &&
               !cJSON_GetObjectItemCaseSensitive(s, "enum")) {
        sift__gbnf_sbuf b = {0};
        int k = 0;
        for (const cJSON *t = type->child; t && c->status == SIFT_OK; t = t->next, k++) {
            if (!cJSON_IsString(t)) {
                sift__js_cfail(c, SIFT_E_INVAL, "'type' entries must be strings");
                break;
            }
            char *nm = sift__js_join_name(*name ? name : "root", t->valuestring);
            const char *r = nm ? visit_typed(c, s, name, nm, t->valuestring) : sift__js_coom(c);
            sift__gx_free(nm);
            if (r) sift__gbnf_sb_printf(&b, "%s%s", k ? " | " : "", r);
        }
        if (!k && c->status == SIFT_OK) sift__js_cfail(c, SIFT_E_INVAL, "'type' is an empty list");
        out = c->status == SIFT_OK ? sift__js_add_rule(c, rule_name, sift__gbnf_sb_take(&b)) : NULL;
        sift__gbnf_sb_free(&b);
    } else if (cJSON_GetObjectItemCaseSensitive(s, "const")) {
        if (!check_keywords(c, s, NULL) || !sift__js_values_checked(c, s)) goto done;
        const cJSON *cv = cJSON_GetObjectItemCaseSensitive(s, "const");
        if (!sift__js_value_fits(cv, cJSON_GetObjectItemCaseSensitive(s, "type"))) {
            out = (c->unsat = c->status == SIFT_OK, sift__js_cfail(c, SIFT_E_INVAL, "'const' does not have the schema's type: the schema matches nothing"));
            goto done;
        }
        sift__gbnf_sbuf b = {0};
        if (sift__js_put_json_literal(c, &b, cv) && sift__js_use_builtin(c, "space")) {
            sift__gbnf_sb_puts(&b, " space");
            out = sift__js_add_rule(c, rule_name, sift__gbnf_sb_take(&b));
        }
        sift__gbnf_sb_free(&b);
    } else if (cJSON_GetObjectItemCaseSensitive(s, "enum")) {
        const cJSON *en = cJSON_GetObjectItemCaseSensitive(s, "enum");
        if (!check_keywords(c, s, NULL) || !sift__js_values_checked(c, s)) goto done;
        if (!cJSON_IsArray(en) || !cJSON_GetArraySize(en)) {
            out = sift__js_cfail(c, SIFT_E_INVAL, "'enum' must be a non-empty array");
            goto done;
        }
        const cJSON *ty = cJSON_GetObjectItemCaseSensitive(s, "type");
        sift__gbnf_sbuf b = {0};
        sift__gbnf_sb_puts(&b, "(");
        int k = 0;
        for (const cJSON *v = en->child; v; v = v->next) {
            if (!sift__js_value_fits(v, ty)) continue; /* a value of another type is not valid */
            if (k++) sift__gbnf_sb_puts(&b, " | ");
            if (!sift__js_put_json_literal(c, &b, v)) break;
        }
        if (!k && c->status == SIFT_OK) {
            sift__gbnf_sb_free(&b);
            out = (c->unsat = c->status == SIFT_OK, sift__js_cfail(c, SIFT_E_INVAL, "no 'enum' value has the schema's type: the schema matches nothing"));
            goto done;
        }
        sift__gbnf_sb_puts(&b, ") space");
        if (c->status == SIFT_OK && sift__js_use_builtin(c, "space")) out = sift__js_add_rule(c, rule_name, sift__gbnf_sb_take(&b));
        sift__gbnf_sb_free(&b);
    } else if (cJSON_GetObjectItemCaseSensitive(s, "allOf")) {
        if (!check_keywords(c, s, NULL)) goto done;
        out = sift__js_visit_all_of(c, s, name, rule_name);
    } else {
        const char *t = force_type;
        if (!t && type) {
            if (!cJSON_IsString(type)) {
                out = sift__js_cfail(c, SIFT_E_INVAL, "'type' must be a string or a list of strings");
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

/* cJSON keeps numbers as doubles: 9007199254740993 and 9007199254740992 are one double. The
 * exact text of each number is kept in its node's (otherwise unused) valuestring, which
 * cJSON_Duplicate copies and cJSON_Delete frees: the schema's numbers come in document
 * order both in the text and in a depth-first walk of the tree. */
static const char *next_number(const char *p, const char *e, size_t *n)
{
    while (p < e) {
        if (*p == '"') {
            for (p++; p < e && *p != '"'; p++)
                if (*p == '\\') p++;
            p++;
        } else if (*p == '-' || (*p >= '0' && *p <= '9')) {
            const char *q = p;
            while (q < e && strchr("+-.eE0123456789", *q)) q++;
            *n = (size_t)(q - p);
            return p;
        } else {
            p++;
        }
    }
    return NULL;
}

static bool attach_walk(cJSON *v, const char **p, const char *e)
{
    for (; v; v = v->next) {
        if (cJSON_IsNumber(v)) {
            size_t n = 0;
            const char *t = next_number(*p, e, &n);
            if (!t) return true; /* cannot happen for text cJSON parsed; then no exact text */
            *p = t + n;
            if (!(v->valuestring = malloc(n + 1))) return false;
            memcpy(v->valuestring, t, n);
            v->valuestring[n] = 0;
        } else if ((cJSON_IsArray(v) || cJSON_IsObject(v)) && !attach_walk(v->child, p, e)) {
            return false;
        }
    }
    return true;
}

static bool attach_number_texts(cJSON *root, const char *text, size_t len)
{
    const char *p = text;
    return attach_walk(root, &p, text + len);
}

static int cmp_rule(const void *a, const void *b) { return strcmp(((const jrule *)a)->name, ((const jrule *)b)->name); }

/* The converter's output that does not parse (the parser said e2): why, in the schema's words. */
void sift__js_parse_failed(sift_error *err, const sift_error *e2)
{
    if (e2->status == SIFT_E_PARSE && strstr(e2->msg, "left recursion"))
        sift__error_set(err, SIFT_E_UNSUPPORTED, "JSON schema: a $ref cycle refers back to itself before any value is written (%s)", e2->msg);
    else if (e2->status == SIFT_E_PARSE && (strstr(e2->msg, "nested repetitions") || strstr(e2->msg, "too large") ||
                                            strstr(e2->msg, "too many") || strstr(e2->msg, "too complex")))
        /* a schema whose counts multiply (maxItems inside maxItems inside maxLength) is
         * valid, only over the grammar parser's limits: say which, not "internal error" */
        sift__error_set(err, SIFT_E_UNSUPPORTED, "JSON schema: its grammar is over a limit of the GBNF parser (%s)", e2->msg);
    else
        sift__error_set(err, e2->status ? e2->status : SIFT_E_NOMEM, "JSON schema: internal error, the generated grammar does not parse: %s", e2->msg);
}

char *sift_json_schema_to_grammar(const char *schema, size_t len, uint32_t flags, sift_error *err)
{
    return sift__js_to_gbnf(schema, len, flags, false, err);
}

char *sift__js_to_gbnf(const char *schema, size_t len, uint32_t flags, bool for_parse, sift_error *err)
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
    if (!attach_number_texts(root, schema, len)) {
        cJSON_Delete(root);
        sift__error_set(err, SIFT_E_NOMEM, "out of memory");
        return NULL;
    }
    conv c = {.root = root, .flags = flags, .err = err, .status = SIFT_OK, .short_names = for_parse};
    /* the dialect decides what $ref means beside other keywords: draft-07 and earlier
     * ignore them, 2019-09 and later (the default) apply them too */
    const cJSON *dialect = cJSON_GetObjectItemCaseSensitive(root, "$schema");
    if (cJSON_IsString(dialect))
        for (const char *const *d = (const char *const[]){"draft-03", "draft-04", "draft-06", "draft-07", NULL}; *d; d++)
            c.ref_overrides |= strstr(dialect->valuestring, *d) != NULL;
    else c.ref_overrides = (flags & SIFT_JSON_SCHEMA_DRAFT7) != 0;
    const char *top = sift__js_visit(&c, root, "", NULL);
    char *out = NULL;
    if (!top && c.status == SIFT_E_INVAL && c.unsat && c.approx) {
        /* nothing left after a complement that left the non-integer numbers out: refused
         * (what is left out may have matched), not "matches nothing" */
        c.status = SIFT_E_UNSUPPORTED;
        if (err) {
            char msg[SIFT_ERROR_MSG_MAX];
            snprintf(msg, sizeof msg, "%s", err->msg);
            sift__error_set(err, SIFT_E_UNSUPPORTED, "%.160s (or only non-integer numbers, which a complement here leaves out: not expressible)", msg);
        }
    }
    if (top && c.status == SIFT_OK) {
        /* the start rule must be called root */
        if (strcmp(top, "root") && !sift__js_find_rule(&c, "root")) sift__js_add_rule_named(&c, "root", sift__js_dupstr(top));
    }
    if (c.status == SIFT_OK) {
        /* name order is for people reading the text; a caller that only parses it skips the
         * sort (strcmp over names that share 100-character prefixes) and takes the rules
         * newest first: a rule is made after the rules it refers to, so this is users
         * before what they use, as the name order mostly is (a parent's name is a prefix of
         * its parts'), the order the parser's fixpoints are fastest in (in the order made,
         * pantsbuild's TTFM was 1.25x) */
        if (!for_parse) qsort(c.rules, c.n_rules, sizeof *c.rules, cmp_rule);
        /* one allocation of the exact size, filled by memcpy: growing it by doubling copied
         * the (MB-sized, on big schemas) text again at every step and faulted in its pages
         * twice (vfprintf, before that, was slower still) */
        size_t total = 1;
        for (size_t i = 0; i < c.n_rules; i++) {
            if (!c.rules[i].out) c.rules[i].out = c.rules[i].name; /* (freed once, below) */
            total += strlen(c.rules[i].out) + strlen(c.rules[i].body) + 6;
        }
        out = total > SIFT__GBNF_TEXT_MAX ? NULL : sift__gx_malloc(total);
        for (size_t k = 0, at = 0; out && k < c.n_rules; k++) {
            const size_t i = for_parse ? c.n_rules - 1 - k : k;
            size_t nn = strlen(c.rules[i].out), nb = strlen(c.rules[i].body);
            memcpy(out + at, c.rules[i].out, nn);
            memcpy(out + at + nn, " ::= ", 5);
            memcpy(out + at + nn + 5, c.rules[i].body, nb);
            at += nn + 5 + nb;
            out[at++] = '\n';
            out[at] = 0;
        }
        if (out && !c.n_rules) out[0] = 0;
        if (!out) sift__error_set(err, SIFT_E_NOMEM, "out of memory (or a grammar above %u bytes)", SIFT__GBNF_TEXT_MAX);
        /* what this converter returns always parses: the one way it cannot is a $ref cycle
         * that reaches itself before any text ({"$ref": "#"}, {"anyOf": [{"$ref": "#"}, ...]}),
         * a left-recursive rule. So the output is parsed here when there was a $ref cycle
         * (always in builds with assertions): parsing every output was a whole second GBNF
         * parse inside each json_schema request's time to first mask (~10% of it on
         * MaskBench, 20+ ms on Kubernetes schemas). A caller that parses the text itself
         * (for_parse: the grammar compiler) words its own failure with sift__js_parse_failed,
         * and the cycle's check would be the same parse twice. */
        sift_error e2 = {0};
        bool need_check = c.ref_cycle && !for_parse;
#ifndef NDEBUG
        need_check = true;
#endif
        sift_grammar *check = out && need_check ? sift_grammar_parse(out, strlen(out), "root", NULL, &e2) : NULL;
        if (out && need_check && !check) {
            sift__js_parse_failed(err, &e2);
            sift__gx_free(out);
            out = NULL;
        }
        sift_grammar_free(check);
    }
    sift__js_rules_free(&c);
    sift__js_refs_free(&c);
    cJSON_Delete(root);
    return out;
}
