/*
 * json_schema_scalar.c - strings and numbers for the JSON schema converter: strings with
 * min/maxLength (long ones through chunk rules), formats (exact grammars or refused by name)
 * and patterns (regex_to_gbnf.c); integers digit by digit within their bounds
 * (gbnf_writer.c's integer ranges) and decimals within theirs (number_range.c).
 * These keywords leave the grammar's structure alone and only shape one value's text, so
 * they share a file; see json_schema.c for the whole converter's design.
 */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schema/json_schema_int.h"

/* item{mn,mx} beyond the grammar's 2000 copies, without writing them out: a rule of
 * 1000 items, repeated (max < 0: unbounded; both at most 2,000,000). With Q = r / 1000,
 * item{0,r} is  chunk{0,Q-1} item{0,999} | chunk{Q} item{0,r mod 1000}:  every count once. */
#define JS_CHUNK 1000
static void put_long_repetition(conv *c, sift__gbnf_sbuf *b, const char *item, long mn, long mx)
{
    char nm[64], body[128];
    snprintf(nm, sizeof nm, "%s-%d", item, JS_CHUNK);
    snprintf(body, sizeof body, "%s{%d}", item, JS_CHUNK);
    const char *chunk = sift__js_add_rule(c, nm, sift__js_dupstr(body));
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

/* The lengths (in characters) of the strings each format's grammar generates (the builtins of
 * json_schema.c), -1: unbounded. Email's is bounded by taking its local part to at most 64
 * characters (RFC 5321's limit), when a maxLength asks: still a subset of what every
 * validator accepts, as the formats are. */
static const struct {
    const char *prim;
    long lo, hi;
} FORMAT_LENGTHS[] = {
    {"uuid", 36, 36},          {"date-string", 10, 10},     {"time-string", 9, 18}, /* 00:00:00Z .. 23:59:59.999+23:59 */
    {"date-time-string", 20, 29}, {"hostname", 1, 253},     {"ipv4", 7, 15},
    {"email", 3, 64 + 1 + 253}, {"uri", 5, -1},
};

/* format with minLength / maxLength: exact when the format's strings all have lengths within
 * both (then they say nothing more), refused otherwise */
static const char *format_with_length(conv *c, const cJSON *s, const char *f, const char *prim, const char *rule_name)
{
    long mn = sift__js_get_count(c, s, "minLength", 0), mx = sift__js_get_count(c, s, "maxLength", -1);
    if (mn == -2 || mx == -2) return NULL;
    for (size_t i = 0; i < sizeof FORMAT_LENGTHS / sizeof *FORMAT_LENGTHS; i++) {
        if (strcmp(FORMAT_LENGTHS[i].prim, prim)) continue;
        long lo = FORMAT_LENGTHS[i].lo, hi = FORMAT_LENGTHS[i].hi;
        if (mn > lo || (mx >= 0 && (hi < 0 || hi > mx))) break;
        if (strcmp(prim, "email") || mx < 0) {
            const char *p = sift__js_use_builtin(c, prim);
            return p ? sift__js_add_rule(c, rule_name, sift__js_dupstr(p)) : NULL;
        }
        /* email: the local part within 64 characters, counted (regex_length.c) */
        bool handled = false;
        static const char local[] = "^[A-Za-z0-9_%+-]+(\\.[A-Za-z0-9_%+-]+)*$";
        const char *lp = sift__js_pattern_with_length(c, local, sizeof local - 1, 1, 64, "email-local", false, &handled);
        if (!lp || !sift__js_use_builtin(c, "host-name") || !sift__js_use_builtin(c, "space")) return handled || c->status != SIFT_OK ? NULL : sift__js_coom(c);
        sift__gbnf_sbuf b = {0};
        sift__gbnf_sb_printf(&b, "\"\\\"\" %s \"@\" host-name \"\\\"\" space", lp);
        return b.oom ? (sift__gbnf_sb_free(&b), sift__js_coom(c)) : sift__js_add_rule(c, rule_name, sift__gbnf_sb_take(&b));
    }
    return sift__js_cfail(c, SIFT_E_UNSUPPORTED, "format '%s' together with minLength / maxLength cannot be expressed", f);
}

const char *sift__js_visit_string(conv *c, const cJSON *s, const char *rule_name)
{
    const cJSON *pat = cJSON_GetObjectItemCaseSensitive(s, "pattern");
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(s, "format");
    bool has_len = cJSON_GetObjectItemCaseSensitive(s, "minLength") || cJSON_GetObjectItemCaseSensitive(s, "maxLength");
    if (!sift__js_use_builtin(c, "space")) return NULL;
    if (pat) {
        if (!cJSON_IsString(pat)) return sift__js_cfail(c, SIFT_E_INVAL, "'pattern' must be a string");
        /* ^A{m,n}$ (one atom) with a length: the atom repeated within both bounds */
        char atom[256];
        long pm, px;
        bool as, ae;
        if (has_len && !fmt && sift__schema_pattern_one_atom(pat->valuestring, strlen(pat->valuestring), atom, sizeof atom, &pm, &px, &as, &ae) &&
            as && ae) {
            long mn = sift__js_get_count(c, s, "minLength", 0), mx = sift__js_get_count(c, s, "maxLength", -1);
            if (mn == -2 || mx == -2) return NULL;
            if (pm > mn) mn = pm;
            if (px >= 0 && (mx < 0 || px < mx)) mx = px;
            if (mx >= 0 && mx < mn)
                return (c->unsat = c->status == SIFT_OK, sift__js_cfail(c, SIFT_E_INVAL, "no string matches both 'pattern' and minLength / maxLength"));
            if (mn > 2000000 || mx > 2000000) return sift__js_cfail(c, SIFT_E_UNSUPPORTED, "minLength / maxLength above 2,000,000");
            sift_error e2 = {0};
            char *inner = sift__schema_regex_to_gbnf(atom, strlen(atom), &as, &ae, &e2);
            if (!inner) return sift__js_cfail(c, e2.status ? e2.status : SIFT_E_NOMEM, "pattern, %s", e2.msg);
            char an[300];
            snprintf(an, sizeof an, "%s-atom", rule_name);
            const char *ar = sift__js_add_rule(c, an, inner);
            if (!ar) return NULL;
            sift__gbnf_sbuf b = {0};
            sift__gbnf_sb_puts(&b, "\"\\\"\" ");
            if (mn <= 2000 && mx <= 2000) sift__gbnf_put_repetition(&b, ar, mn, mx, NULL);
            else put_long_repetition(c, &b, ar, mn, mx);
            if (mx == 0) sift__gbnf_sb_puts(&b, "\"\"");
            sift__gbnf_sb_puts(&b, " \"\\\"\" space");
            return c->status == SIFT_OK ? sift__js_add_rule(c, rule_name, sift__gbnf_sb_take(&b)) : (sift__gbnf_sb_free(&b), (const char *)NULL);
        }
        /* lengths the pattern's own strings always have say nothing more */
        long plo, phi;
        if (has_len && !fmt && sift__schema_pattern_lengths(pat->valuestring, strlen(pat->valuestring), &plo, &phi)) {
            long mn = sift__js_get_count(c, s, "minLength", 0), mx = sift__js_get_count(c, s, "maxLength", -1);
            if (mn == -2 || mx == -2) return NULL;
            if (plo >= mn && (mx < 0 || (phi >= 0 && phi <= mx))) has_len = false;
            /* else one repeated character of the pattern may take what the length leaves */
            sift_error e3 = {0};
            char *bounded = has_len ? sift__schema_regex_bounded(pat->valuestring, strlen(pat->valuestring), mn, mx, &e3) : NULL;
            if (bounded) {
                sift__gbnf_sbuf b = {0};
                sift__gbnf_sb_printf(&b, "\"\\\"\" (%s) \"\\\"\" space", bounded);
                sift__gx_free(bounded);
                return b.oom ? (sift__gbnf_sb_free(&b), sift__js_coom(c)) : sift__js_add_rule(c, rule_name, sift__gbnf_sb_take(&b));
            }
            if (e3.status == SIFT_E_INVAL) return (c->unsat = c->status == SIFT_OK, sift__js_cfail(c, SIFT_E_INVAL, "pattern, %s", e3.msg));
            if (e3.status && e3.status != SIFT_E_UNSUPPORTED) return sift__js_cfail(c, e3.status, "pattern, %s", e3.msg);
        }
        /* else an automaton of the pattern that counts characters (regex_length.c) */
        if (has_len && !fmt) {
            long mn = sift__js_get_count(c, s, "minLength", 0), mx = sift__js_get_count(c, s, "maxLength", -1);
            if (mn == -2 || mx == -2) return NULL;
            bool handled = false;
            const char *r = sift__js_pattern_with_length(c, pat->valuestring, strlen(pat->valuestring), mn, mx, rule_name, true, &handled);
            if (handled || c->status != SIFT_OK) return r;
        }
        if ((has_len || fmt) && !(c->flags & SIFT_JSON_SCHEMA_LENIENT))
            return sift__js_cfail(c, SIFT_E_UNSUPPORTED, "'pattern' together with minLength / maxLength / format cannot be expressed");
        size_t o = sift__js_path_push(c, "pattern");
        char *body = sift__js_pattern_body(c, pat->valuestring, strlen(pat->valuestring));
        sift__js_path_pop(c, o);
        if (!body && c->status == SIFT_E_UNSUPPORTED && !has_len && !fmt) {
            /* X* with X able to match nothing (a left-recursive rule as one GBNF expression)
             * is a loop like any other in the automaton of regex_length.c */
            sift_error saved = c->err ? *c->err : (sift_error){0};
            c->status = SIFT_OK;
            if (c->err) *c->err = (sift_error){0};
            bool handled = false;
            const char *r = sift__js_pattern_with_length(c, pat->valuestring, strlen(pat->valuestring), 0, -1, rule_name, true, &handled);
            if (handled || c->status != SIFT_OK) return r;
            c->status = SIFT_E_UNSUPPORTED;
            if (c->err) *c->err = saved;
        }
        return body ? sift__js_add_rule(c, rule_name, body) : NULL;
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
        else if (sift__js_in_list(sift__js_formats_refused, f) && !(c->flags & SIFT_JSON_SCHEMA_LENIENT)) {
            size_t o = sift__js_path_push(c, "format");
            sift__js_cfail(c, SIFT_E_UNSUPPORTED, "format '%s' cannot be expressed in a grammar (SIFT_JSON_SCHEMA_LENIENT ignores it)", f);
            sift__js_path_pop(c, o);
            return NULL;
        }
        if (prim && has_len && !(c->flags & SIFT_JSON_SCHEMA_LENIENT)) return format_with_length(c, s, f, prim, rule_name);
        if (prim) {
            const char *p = sift__js_use_builtin(c, prim);
            return p ? sift__js_add_rule(c, rule_name, sift__js_dupstr(p)) : NULL;
        }
        /* any other format (int32, url, path, ...: none of the standard ones) is an annotation
         * that no validator checks: a plain string */
    }
    long mn = sift__js_get_count(c, s, "minLength", 0), mx = sift__js_get_count(c, s, "maxLength", -1);
    if (mn == -2 || mx == -2) return NULL;
    if (mx >= 0 && mx < mn) return (c->unsat = c->status == SIFT_OK, sift__js_cfail(c, SIFT_E_INVAL, "maxLength is below minLength"));
    if (mn > 2000000 || mx > 2000000)
        return sift__js_cfail(c, SIFT_E_UNSUPPORTED, "minLength / maxLength above 2,000,000 (1000-character chunks, at most 2000 of them)");
    const char *ch = sift__js_use_builtin(c, "char");
    if (!ch) return NULL;
    if (!has_len) {
        const char *str = sift__js_use_builtin(c, "string");
        return str ? sift__js_add_rule(c, rule_name, sift__js_dupstr(str)) : NULL;
    }
    sift__gbnf_sbuf b = {0};
    sift__gbnf_sb_puts(&b, "\"\\\"\" ");
    if (mn <= 2000 && mx <= 2000) sift__gbnf_put_repetition(&b, ch, mn, mx, NULL);
    else put_long_repetition(c, &b, ch, mn, mx);
    sift__gbnf_sb_puts(&b, " \"\\\"\" space");
    return c->status == SIFT_OK ? sift__js_add_rule(c, rule_name, sift__gbnf_sb_take(&b)) : (sift__gbnf_sb_free(&b), (const char *)NULL);
}

static bool get_int_bound(conv *c, const cJSON *s, const char *key, int64_t adjust, bool *has, int64_t *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, key);
    if (!v) return true;
    if (cJSON_IsBool(v)) return true; /* draft-04 boolean exclusive* flags: handled by the caller */
    if (!cJSON_IsNumber(v) || fabs(v->valuedouble) > 9.0e15) {
        size_t o = sift__js_path_push(c, key);
        sift__js_cfail(c, SIFT_E_UNSUPPORTED, "'%s' must be a number within +-9e15", key);
        sift__js_path_pop(c, o);
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

const char *sift__js_visit_integer(conv *c, const cJSON *s, const char *rule_name)
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
    if (!sift__js_use_builtin(c, "space")) return NULL;
    if (!has_min && !has_max) {
        const char *p = sift__js_use_builtin(c, "integer");
        return p ? sift__js_add_rule(c, rule_name, sift__js_dupstr(p)) : NULL;
    }
    if (has_min && has_max && mn > mx) return (c->unsat = c->status == SIFT_OK, sift__js_cfail(c, SIFT_E_INVAL, "no integer is within minimum..maximum"));
    sift__gbnf_sbuf b = {0};
    sift__gbnf_sb_puts(&b, "(");
    sift__gbnf_put_int_range(&b, has_min, mn, has_max, mx);
    sift__gbnf_sb_puts(&b, ") space");
    return sift__js_add_rule(c, rule_name, sift__gbnf_sb_take(&b));
}

/* A bound in plain decimal (the shortest text that reads back as the same double). */
bool sift__js_bound_text(double d, char *out, size_t cap)
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
            size_t o = sift__js_path_push(c, inc->string);
            sift__js_cfail(c, SIFT_E_INVAL, "'%s' must be a number", inc->string);
            sift__js_path_pop(c, o);
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
        size_t o = sift__js_path_push(c, exc->string);
        sift__js_cfail(c, SIFT_E_INVAL, "'%s' must be a number", exc->string);
        sift__js_path_pop(c, o);
        return false;
    }
    return true;
}

const char *sift__js_visit_number(conv *c, const cJSON *s, const char *rule_name)
{
    bool has_lo, has_hi, lo_s, hi_s;
    double lo = 0, hi = 0;
    if (!number_bound(c, s, false, &has_lo, &lo, &lo_s) || !number_bound(c, s, true, &has_hi, &hi, &hi_s)) return NULL;
    if (!sift__js_use_builtin(c, "space")) return NULL;
    if (!has_lo && !has_hi) {
        const char *p = sift__js_use_builtin(c, "number");
        return p ? sift__js_add_rule(c, rule_name, sift__js_dupstr(p)) : NULL;
    }
    char lt[64], ht[64];
    if ((has_lo && !sift__js_bound_text(lo, lt, sizeof lt)) || (has_hi && !sift__js_bound_text(hi, ht, sizeof ht)))
        return sift__js_cfail(c, SIFT_E_UNSUPPORTED, "minimum / maximum beyond +-1e15 or with more than 40 decimals cannot be expressed");
    sift__gbnf_sbuf b = {0};
    sift__gbnf_sb_puts(&b, "(");
    if (!sift__gbnf_put_number_range(&b, has_lo ? lt : NULL, lo_s, has_hi ? ht : NULL, hi_s)) {
        sift__gbnf_sb_free(&b);
        return (c->unsat = c->status == SIFT_OK, sift__js_cfail(c, SIFT_E_INVAL, "no number is within minimum..maximum: the schema matches nothing"));
    }
    /* the exponent form where its sign alone decides: a bound on one side only, with 0 on the
     * open side of it ("minimum": 0 takes 1e-06, Python's spelling of 0.000001) */
    bool pos = has_lo && !has_hi && (lo < 0 || (lo == 0 && !lo_s)), neg = has_hi && !has_lo && (hi > 0 || (hi == 0 && !hi_s));
    if ((pos || neg) && !(c->flags & SIFT_JSON_SCHEMA_LLAMA)) {
        if (!sift__js_use_builtin(c, "integral-part") || !sift__js_use_builtin(c, "decimal-part")) return sift__gbnf_sb_free(&b), (const char *)NULL;
        sift__gbnf_sb_printf(&b, " | %sintegral-part (\".\" decimal-part)? [eE] [-+]? decimal-part", neg ? "\"-\" " : "");
    }
    sift__gbnf_sb_puts(&b, ") space");
    return sift__js_add_rule(c, rule_name, sift__gbnf_sb_take(&b));
}

/* multipleOf q (no bounds beside it but "minimum": 0): q = M / 10^s in lowest terms, and x is a multiple of q
 * when V = x * 10^s is an integer with V mod M = 0. The digits of x feed V's residue mod M
 * one at a time (r -> 10 r + d), through the integer part and the first s decimals; later
 * decimals must be 0, and a text that stops after k < s decimals ends when r * 10^(s-k) is
 * 0 mod M. A right-linear grammar with a rule per (decimals read, residue) that can still
 * reach an end (the others are left out: no dead ends). Integers (`integer`) need x itself
 * whole: the multiples of M / gcd(M, 10^s), without a fraction (as integers are written
 * here). No exponent form is generated (a subset). At most JS_MULT_STATES rules, else
 * refused. */
#define JS_MULT_STATES 2048

typedef struct {
    size_t M, S;
    unsigned char *live; /* per state k * M + r: 0 dead, 1 live, 2 live and may end */
} mult;

/* the steps out of state (k, r) to live states, as "[digits] P<state>" alternatives */
static int mult_steps(const mult *m, sift__gbnf_sbuf *b, size_t k, size_t r, size_t to_k, const char *lead, const char *pfx, int alts)
{
    for (size_t tg = 0; tg < m->M; tg++) {
        if (!m->live[to_k * m->M + tg]) continue;
        char cls[11];
        size_t nc = 0;
        for (int d = 0; d < 10; d++)
            if ((r * 10 + (size_t)d) % m->M == tg) cls[nc++] = (char)('0' + d);
        cls[nc] = 0;
        if (nc) sift__gbnf_sb_printf(b, "%s%s[%s] %s%zu", alts++ ? " | " : "", lead, cls, pfx, to_k * m->M + tg);
    }
    (void)k;
    return alts;
}

const char *sift__js_visit_multiple_of(conv *c, const cJSON *s, const cJSON *mul, bool integer, const char *rule_name)
{
    static const char *const bounds[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", NULL};
    size_t o = sift__js_path_push(c, "multipleOf");
    const char *out = NULL;
    char t[64];
    /* "minimum": 0 alone: the same texts without a sign (a "-0" is left out, a subset) */
    const cJSON *lo0 = cJSON_GetObjectItemCaseSensitive(s, "minimum");
    const bool unsigned_only = cJSON_IsNumber(lo0) && lo0->valuedouble == 0;
    for (const char *const *k = bounds; *k; k++)
        if (cJSON_GetObjectItemCaseSensitive(s, *k) && !(unsigned_only && !strcmp(*k, "minimum"))) {
            sift__js_cfail(c, SIFT_E_UNSUPPORTED, "multipleOf other than 1 beside '%s' cannot be expressed in a grammar", *k);
            goto out;
        }
    if (!cJSON_IsNumber(mul) || !(mul->valuedouble > 0)) {
        sift__js_cfail(c, SIFT_E_INVAL, "'multipleOf' must be a number above 0");
        goto out;
    }
    unsigned long long mm = 0;
    long sc = 0;
    bool frac = false, big = !sift__js_bound_text(mul->valuedouble, t, sizeof t);
    for (const char *p = t; !big && *p; p++) {
        if (*p == '.') frac = true;
        else if (mm > 100000000ull) big = true;
        else mm = mm * 10 + (unsigned long long)(*p - '0'), sc += frac;
    }
    while (!big && sc > 0 && mm % 10 == 0) mm /= 10, sc--;
    for (; integer && sc > 0; sc--) mm /= mm % 10 == 0 ? 10 : mm % 5 == 0 ? 5 : mm % 2 == 0 ? 2 : 1; /* / gcd(M, 10^s) */
    if (big || mm == 0 || (unsigned long long)(sc + 1) * mm > JS_MULT_STATES) {
        sift__js_cfail(c, SIFT_E_UNSUPPORTED, "multipleOf %s needs more than %d grammar rules", big ? "" : t, JS_MULT_STATES);
        goto out;
    }
    mult m = {(size_t)mm, (size_t)sc, NULL};
    const size_t n = (m.S + 1) * m.M;
    m.live = sift__gx_calloc(n, 1);
    sift__gbnf_sbuf b = {0};
    char pfx[300], nm[340];
    if (!m.live || !sift__js_use_builtin(c, "space")) goto done;
    /* a fresh rule-name prefix, so that add_rule keeps the names the rules refer to */
    for (int i = 0;; i++) {
        snprintf(pfx, sizeof pfx, i ? "%s-m%d-" : "%s-m", rule_name, i);
        snprintf(nm, sizeof nm, "%s0", pfx);
        if (!sift__js_find_rule(c, nm)) break;
    }
    for (size_t k = 0; k <= m.S; k++)
        for (size_t r = 0; r < m.M; r++) {
            size_t v = r;
            for (size_t j = k; j < m.S; j++) v = v * 10 % m.M;
            m.live[k * m.M + r] = v == 0 ? 2 : 0;
        }
    for (bool more = true; more;) { /* live: some step reaches a live state */
        more = false;
        for (size_t st = 0; st < n; st++) {
            size_t k = st / m.M, r = st % m.M;
            if (m.live[st] || (k == m.S && k > 0)) continue; /* after s decimals: zeros only */
            for (int d = 0; d < 10 && !m.live[st]; d++) {
                size_t r2 = (r * 10 + (size_t)d) % m.M;
                if ((k == 0 && m.live[r2]) || (k < m.S && m.live[(k + 1) * m.M + r2])) m.live[st] = 1;
            }
            more |= m.live[st] != 0;
        }
    }
    for (size_t st = 0; st < n && c->status == SIFT_OK; st++) {
        if (!m.live[st]) continue;
        size_t k = st / m.M, r = st % m.M;
        b.n = 0;
        int alts = 0;
        if (k == m.S && k > 0) alts = (sift__gbnf_sb_puts(&b, "[0]*"), 1);
        else alts = mult_steps(&m, &b, k, r, k ? k + 1 : 0, "", pfx, 0);
        if (k == 0 && !integer && m.S > 0) alts = mult_steps(&m, &b, k, r, 1, "\".\" ", pfx, alts);
        if (k == 0 && !integer && m.S == 0 && r == 0) sift__gbnf_sb_printf(&b, "%s\".\" [0]+", alts++ ? " | " : "");
        if (m.live[st] == 2 && !(k == m.S && k > 0)) sift__gbnf_sb_printf(&b, "%s\"\"", alts++ ? " | " : "");
        snprintf(nm, sizeof nm, "%s%zu", pfx, st);
        if (b.oom) sift__js_coom(c);
        else sift__js_add_rule_named(c, nm, sift__js_dupstr(b.s ? b.s : "\"\"")); /* named: the states above name each other */
    }
    /* the sign, then 0 (residue 0, no more integer digits: its decimals only) or 1-9 */
    b.n = 0;
    sift__gbnf_sb_puts(&b, unsigned_only ? "(\"0\"" : "\"-\"? (\"0\"");
    if (!integer) {
        sift__gbnf_sbuf z = {0};
        int za = m.S > 0 ? mult_steps(&m, &z, 0, 0, 1, "\".\" ", pfx, 0) : (sift__gbnf_sb_puts(&z, "\".\" [0]+"), 1);
        if (za && z.s) sift__gbnf_sb_printf(&b, " (%s)?", z.s);
        if (z.oom) b.oom = true;
        sift__gbnf_sb_free(&z);
    }
    for (int d = 1; d < 10; d++)
        if (m.live[(size_t)d % m.M]) sift__gbnf_sb_printf(&b, " | \"%d\" %s%zu", d, pfx, (size_t)d % m.M);
    sift__gbnf_sb_puts(&b, ") space");
    if (b.oom) sift__js_coom(c);
    else if (c->status == SIFT_OK) out = sift__js_add_rule(c, rule_name, sift__gbnf_sb_take(&b));
done:
    if (!m.live && c->status == SIFT_OK) sift__js_coom(c);
    sift__gx_free(m.live);
    sift__gbnf_sb_free(&b);
out:
    sift__js_path_pop(c, o);
    return c->status == SIFT_OK ? out : NULL;
}
