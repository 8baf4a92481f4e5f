/*
 * regex_to_gbnf.c - a JSON schema "pattern" (an ECMA-262 regular expression) as a GBNF
 * expression over the characters of a JSON string.
 *
 * Supported: literals, escapes (\d \w \s \D \W \S, \t \n \r \f \v \0, \xHH, \uHHHH, escaped
 * punctuation), classes [...] / [^...] with ranges, '.', groups ( ) and (?: ), alternation,
 * quantifiers * + ? {m} {m,} {m,n} (lazy forms mean the same set; a '{' that starts no
 * quantifier is a literal). Refused, with the offset: backreferences, lookaround, \b, named
 * groups, \p{...}, '^' / '$' anywhere but at the ends of the pattern or of a top-level
 * alternative (the caller handles the pattern's; ^a|b$ is (^a)|(b$)), and an
 * unbounded repetition of something that can match the empty string (it would be a
 * left-recursive rule).
 *
 * Beside the grammar, the conversion measures the lengths the pattern's strings can have
 * (rxlen), so that minLength / maxLength are either implied (sift__schema_pattern_lengths) or
 * folded into the one repeated character of an anchored pattern (sift__schema_regex_bounded).
 *
 * Characters are written in their canonical JSON encoding: a set of characters becomes the
 * class of those that appear raw in a JSON string plus the escapes of '"', '\' and the
 * control characters it contains (\t, \n, ... or \u00XX). The grammar accepts what a JSON
 * writer produces, not every equivalent spelling.
 */
#include <ctype.h>
#include <string.h>

#include "core/status.h"
#include "schema/gbnf_writer.h"
#include "grammar/alloc_bits_utf8.h"
#include "schema/regex_int.h"

#define RX_MAX_DEPTH 256 /* nested groups */

/* The lengths (in characters) an expression can match: lo..hi, hi < 0 unbounded; lo == 0 is
 * "nullable". Capped far above any length a schema names. */
typedef struct {
    long lo, hi;
} rxlen;
#define RX_LEN_CAP 1000000000L

static long len_add(long a, long b) { return a < 0 || b < 0 ? -1 : a + b > RX_LEN_CAP ? RX_LEN_CAP : a + b; }
static long len_mul(long a, long m) { return a < 0 || m < 0 ? (a == 0 ? 0 : -1) : a * m > RX_LEN_CAP ? RX_LEN_CAP : a * m; }

void sift__cps_add(cpset *s, uint32_t lo, uint32_t hi)
{
    if (s->n < 64) {
        s->r[2 * s->n] = lo;
        s->r[2 * s->n + 1] = hi;
        s->n++;
    }
}

bool sift__cps_has(const cpset *cs, uint32_t cp)
{
    bool in = false;
    for (int k = 0; k < cs->n && !in; k++) in = cs->r[2 * k] <= cp && cp <= cs->r[2 * k + 1];
    return in != cs->neg;
}

/* The JSON-string form of a set of characters: the characters that appear raw in a JSON
 * string, plus the escaped forms of '"', '\' and the control characters in the set. */
void sift__put_json_chars(sift__gbnf_sbuf *b, const cpset *cs)
{
    sift__gbnf_sb_puts(b, "(");
    /* raw part: the set minus '"', '\\', 0x00-0x1F */
    sift__gbnf_sb_puts(b, cs->neg ? "[^\"\\\\\\x00-\\x1F" : "[");
    for (int k = 0; k < cs->n; k++) {
        uint32_t lo = cs->r[2 * k], hi = cs->r[2 * k + 1];
        if (!cs->neg) {
            if (lo < 0x20) lo = 0x20;
            if (lo > hi) continue;
            /* split around '"' (0x22) and '\\' (0x5C) */
            uint32_t cuts[2] = {0x22, 0x5C};
            uint32_t a = lo;
            for (int q = 0; q < 2; q++) {
                if (cuts[q] < a || cuts[q] > hi) continue;
                if (a < cuts[q]) {
                    sift__gbnf_put_class_char(b, a);
                    if (cuts[q] - 1 > a) {
                        sift__gbnf_sb_puts(b, "-");
                        sift__gbnf_put_class_char(b, cuts[q] - 1);
                    }
                }
                a = cuts[q] + 1;
            }
            if (a <= hi) {
                sift__gbnf_put_class_char(b, a);
                if (hi > a) {
                    sift__gbnf_sb_puts(b, "-");
                    sift__gbnf_put_class_char(b, hi);
                }
            }
        } else {
            sift__gbnf_put_class_char(b, lo);
            if (hi > lo) {
                sift__gbnf_sb_puts(b, "-");
                sift__gbnf_put_class_char(b, hi);
            }
        }
    }
    sift__gbnf_sb_puts(b, "]");
    /* escaped part */
    static const struct {
        uint32_t cp;
        const char *esc;
    } E[] = {{'"', "\"\\\\\\\"\""}, {'\\', "\"\\\\\\\\\""}, {'\n', "\"\\\\n\""}, {'\r', "\"\\\\r\""}, {'\t', "\"\\\\t\""},
             {'\b', "\"\\\\b\""}, {'\f', "\"\\\\f\""}};
    for (size_t k = 0; k < sizeof E / sizeof *E; k++)
        if (sift__cps_has(cs, E[k].cp)) sift__gbnf_sb_printf(b, " | %s", E[k].esc);
    for (uint32_t cp = 0; cp < 0x20; cp++) {
        if (cp == '\n' || cp == '\r' || cp == '\t' || cp == '\b' || cp == '\f') continue;
        if (sift__cps_has(cs, cp)) sift__gbnf_sb_printf(b, " | \"\\\\u%04x\"", cp);
    }
    sift__gbnf_sb_puts(b, ")");
}

bool sift__rx_fail(rx *r, const char *what)
{
    if (r->status == SIFT_OK) r->status = sift__error_set(r->err, SIFT_E_UNSUPPORTED, "offset %zu: %s", r->i, what);
    return false;
}

static int rx_hex(rx *r, int nd, uint32_t *out)
{
    uint32_t v = 0;
    for (int k = 0; k < nd; k++) {
        if (r->i >= r->n || !isxdigit((unsigned char)r->s[r->i])) return sift__rx_fail(r, "bad hex escape");
        char ch = r->s[r->i++];
        v = v * 16 + (uint32_t)(isdigit((unsigned char)ch) ? ch - '0' : (tolower((unsigned char)ch) - 'a' + 10));
    }
    *out = v;
    return true;
}

/* One UTF-8 character of the pattern text. */
bool sift__rx_char(rx *r, uint32_t *cp)
{
    sift__gx_utf8 u = {0};
    size_t start = r->i;
    while (r->i < r->n) {
        int32_t v = sift__gx_utf8_feed(&u, (uint8_t)r->s[r->i++]);
        if (v == GX_UTF8_BAD) break;
        if (v >= 0) {
            *cp = (uint32_t)v;
            return true;
        }
    }
    r->i = start;
    return sift__rx_fail(r, "invalid UTF-8");
}

/* ECMA-262's \s: WhiteSpace (TAB, VT, FF, ZWNBSP and every Unicode Zs space: U+0020,
 * U+00A0, U+1680, U+2000..U+200A, U+202F, U+205F, U+3000) and LineTerminator (LF, CR,
 * U+2028, U+2029). */
static void add_space(cpset *cs)
{
    static const uint32_t r[][2] = {{'\t', '\r'},     {' ', ' '},       {0xA0, 0xA0},     {0x1680, 0x1680}, {0x2000, 0x200A},
                                    {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};
    for (size_t i = 0; i < sizeof r / sizeof r[0]; i++) sift__cps_add(cs, r[i][0], r[i][1]);
}

/* An escape after '\' (r->i past the backslash): a single code point (*cp, returns 1) or a
 * class into *cs (returns 2); 0 on error. */
int sift__rx_escape(rx *r, uint32_t *cp, cpset *cs)
{
    if (r->i >= r->n) return sift__rx_fail(r, "pattern ends with '\\'");
    char e = r->s[r->i++];
    switch (e) {
    case 'd': sift__cps_add(cs, '0', '9'); return 2;
    case 'D': cs->neg = true; sift__cps_add(cs, '0', '9'); return 2;
    case 'w': sift__cps_add(cs, '0', '9'); sift__cps_add(cs, 'A', 'Z'); sift__cps_add(cs, '_', '_'); sift__cps_add(cs, 'a', 'z'); return 2;
    case 'W': cs->neg = true; sift__cps_add(cs, '0', '9'); sift__cps_add(cs, 'A', 'Z'); sift__cps_add(cs, '_', '_'); sift__cps_add(cs, 'a', 'z'); return 2;
    case 's': add_space(cs); return 2;
    case 'S': cs->neg = true; add_space(cs); return 2;
    case 't': *cp = '\t'; return 1;
    case 'n': *cp = '\n'; return 1;
    case 'r': *cp = '\r'; return 1;
    case 'f': *cp = '\f'; return 1;
    case 'v': *cp = '\v'; return 1;
    case '0': *cp = 0; return 1;
    case 'x': return rx_hex(r, 2, cp) ? 1 : 0;
    case 'u': return rx_hex(r, 4, cp) ? 1 : 0;
    case 'b': case 'B': return sift__rx_fail(r, "word boundaries (\\b, \\B) are not supported");
    case 'p': case 'P': return sift__rx_fail(r, "Unicode property classes (\\p{...}) are not supported");
    case 'k': return sift__rx_fail(r, "named backreferences are not supported");
    default:
        if (e >= '1' && e <= '9') return sift__rx_fail(r, "backreferences are not supported");
        if (isalnum((unsigned char)e)) return sift__rx_fail(r, "unknown escape");
        *cp = (uint32_t)(unsigned char)e;
        return 1;
    }
}

static bool rx_alt(rx *r, sift__gbnf_sbuf *out, rxlen *len);

/* [...] (r->i past '[') */
bool sift__rx_class(rx *r, cpset *cs)
{
    if (r->i < r->n && r->s[r->i] == '^') {
        cs->neg = true;
        r->i++;
    }
    bool first = true;
    while (r->i < r->n && (r->s[r->i] != ']' || first)) {
        first = false;
        uint32_t lo;
        if (r->s[r->i] == '\\') {
            r->i++;
            cpset sub = {0};
            int k = sift__rx_escape(r, &lo, &sub);
            if (!k) return false;
            if (k == 2) {
                if (sub.neg) return sift__rx_fail(r, "negated escapes (\\D \\W \\S) inside [...] are not supported");
                for (int q = 0; q < sub.n; q++) sift__cps_add(cs, sub.r[2 * q], sub.r[2 * q + 1]);
                continue;
            }
        } else if (!sift__rx_char(r, &lo)) {
            return false;
        }
        uint32_t hi = lo;
        if (r->i + 1 < r->n && r->s[r->i] == '-' && r->s[r->i + 1] != ']') {
            r->i++;
            if (r->s[r->i] == '\\') {
                r->i++;
                cpset sub = {0};
                int k = sift__rx_escape(r, &hi, &sub);
                if (!k) return false;
                if (k == 2) return sift__rx_fail(r, "a class escape cannot end a range");
            } else if (!sift__rx_char(r, &hi)) {
                return false;
            }
            if (hi < lo) return sift__rx_fail(r, "range out of order");
        }
        if (cs->n >= 64) return sift__rx_fail(r, "character class too large");
        sift__cps_add(cs, lo, hi);
    }
    if (r->i >= r->n) return sift__rx_fail(r, "unterminated [");
    r->i++;
    return true;
}

/* one atom with its quantifier, appended to out; *nullable: it can match the empty string */
static bool rx_atom(rx *r, sift__gbnf_sbuf *out, rxlen *len)
{
    sift__gbnf_sbuf atom = {0};
    char ch = r->s[r->i];
    bool ok = true;
    *len = (rxlen){1, 1};
    if (ch == '(') {
        r->i++;
        if (r->i < r->n && r->s[r->i] == '?') {
            if (r->i + 1 < r->n && r->s[r->i + 1] == ':') r->i += 2;
            else return sift__rx_fail(r, "lookaround and named groups are not supported");
        }
        if (++r->depth > RX_MAX_DEPTH) return sift__rx_fail(r, "groups nested too deep");
        sift__gbnf_sb_puts(&atom, "(");
        ok = rx_alt(r, &atom, len);
        r->depth--;
        if (ok && (r->i >= r->n || r->s[r->i] != ')')) ok = sift__rx_fail(r, "missing ')'");
        if (ok) r->i++;
        sift__gbnf_sb_puts(&atom, ")");
    } else if (ch == '[') {
        r->i++;
        cpset cs = {0};
        ok = sift__rx_class(r, &cs);
        if (ok) sift__put_json_chars(&atom, &cs);
    } else if (ch == '.') {
        r->i++;
        cpset cs = {.neg = true};
        sift__cps_add(&cs, '\n', '\n');
        sift__cps_add(&cs, '\r', '\r');
        sift__cps_add(&cs, 0x2028, 0x2029);
        sift__put_json_chars(&atom, &cs);
    } else if (ch == '\\') {
        r->i++;
        uint32_t cp;
        cpset cs = {0};
        int k = sift__rx_escape(r, &cp, &cs);
        if (!k) ok = false;
        else if (k == 2) sift__put_json_chars(&atom, &cs);
        else {
            cpset one = {0};
            sift__cps_add(&one, cp, cp);
            sift__put_json_chars(&atom, &one);
        }
    } else if (ch == '*' || ch == '+' || ch == '?') {
        return sift__rx_fail(r, "a quantifier without anything to repeat");
    } else {
        uint32_t cp;
        if (!sift__rx_char(r, &cp)) ok = false;
        else {
            cpset one = {0};
            sift__cps_add(&one, cp, cp);
            sift__put_json_chars(&atom, &one);
        }
    }
    if (!ok) {
        sift__gbnf_sb_free(&atom);
        return false;
    }
    /* quantifiers (several may follow: a{2}{3}); lazy '?' is the same language */
    int nq = 0;
    long q_mn = 1, q_mx = 1;
    rxlen inner_len = *len;
    sift__gbnf_sbuf inner = {0};
    sift__gbnf_sb_putn(&inner, atom.s ? atom.s : "", atom.n);
    while (r->i < r->n) {
        char q = r->s[r->i];
        long mn, mx;
        if (q == '*') mn = 0, mx = -1;
        else if (q == '+') mn = 1, mx = -1;
        else if (q == '?') mn = 0, mx = 1;
        else if (q == '{') {
            size_t j = r->i + 1;
            if (j >= r->n || !isdigit((unsigned char)r->s[j])) break; /* a literal '{' in ECMA-262 */
            mn = 0;
            while (j < r->n && isdigit((unsigned char)r->s[j]) && mn < 100000) mn = mn * 10 + (r->s[j++] - '0');
            mx = mn;
            if (j < r->n && r->s[j] == ',') {
                j++;
                if (j < r->n && isdigit((unsigned char)r->s[j])) {
                    mx = 0;
                    while (j < r->n && isdigit((unsigned char)r->s[j]) && mx < 100000) mx = mx * 10 + (r->s[j++] - '0');
                } else {
                    mx = -1;
                }
            }
            if (j >= r->n || r->s[j] != '}') break;
            if (mn > 2000 || mx > 2000) {
                sift__gbnf_sb_free(&atom);
                sift__gbnf_sb_free(&inner);
                return sift__rx_fail(r, "repetition count above 2000");
            }
            if (mx >= 0 && mx < mn) {
                sift__gbnf_sb_free(&atom);
                sift__gbnf_sb_free(&inner);
                return sift__rx_fail(r, "repetition {m,n} with n < m");
            }
            r->i = j;
        } else break;
        r->i++;
        if (r->i < r->n && r->s[r->i] == '?') r->i++;
        if (mx < 0 && len->lo == 0) {
            /* X* with X able to match nothing would be a left-recursive grammar rule */
            sift__gbnf_sb_free(&atom);
            sift__gbnf_sb_free(&inner);
            return sift__rx_fail(r, "unbounded repetition of an expression that can match the empty string");
        }
        *len = (rxlen){len_mul(len->lo, mn), len_mul(len->hi, mx)};
        nq++, q_mn = mn, q_mx = mx;
        sift__gbnf_sbuf rep = {0};
        sift__gbnf_sbuf grp = {0};
        sift__gbnf_sb_puts(&grp, "(");
        sift__gbnf_sb_putn(&grp, atom.s ? atom.s : "", atom.n);
        sift__gbnf_sb_puts(&grp, ")");
        sift__gbnf_put_repetition(&rep, grp.s ? grp.s : "()", mn, mx, NULL);
        sift__gbnf_sb_free(&grp);
        sift__gbnf_sb_free(&atom);
        atom = rep;
    }
    sift__gbnf_sb_putn(out, atom.s ? atom.s : "", atom.n);
    bool oom = atom.oom || inner.oom;
    sift__gbnf_sb_free(&atom);
    sift__gbnf_sb_free(&r->last_inner);
    r->last_inner = inner;
    r->last_nq = nq, r->last_mn = q_mn, r->last_mx = q_mx, r->last_inner_lo = inner_len.lo, r->last_inner_hi = inner_len.hi;
    if (oom) {
        if (r->status == SIFT_OK) r->status = sift__error_set(r->err, SIFT_E_NOMEM, "out of memory");
        return false;
    }
    return true;
}

static bool rx_seq(rx *r, sift__gbnf_sbuf *out, rxlen *len)
{
    bool first = true;
    *len = (rxlen){0, 0};
    while (r->i < r->n && r->s[r->i] != '|' && r->s[r->i] != ')') {
        if (r->s[r->i] == '^' || r->s[r->i] == '$') return sift__rx_fail(r, "'^' / '$' are only supported at the ends of the pattern");
        if (!first) sift__gbnf_sb_puts(out, " ");
        first = false;
        rxlen al;
        if (!rx_atom(r, out, &al)) return false;
        *len = (rxlen){len_add(len->lo, al.lo), len_add(len->hi, al.hi)};
    }
    if (first) sift__gbnf_sb_puts(out, "\"\"");
    return true;
}

static bool rx_alt(rx *r, sift__gbnf_sbuf *out, rxlen *len)
{
    if (!rx_seq(r, out, len)) return false;
    while (r->i < r->n && r->s[r->i] == '|') {
        r->i++;
        sift__gbnf_sb_puts(out, " | ");
        rxlen sl;
        if (!rx_seq(r, out, &sl)) return false;
        if (sl.lo < len->lo) len->lo = sl.lo;
        if (len->hi >= 0 && (sl.hi < 0 || sl.hi > len->hi)) len->hi = sl.hi;
    }
    return true;
}

/* The ends of the top-level alternatives of p[0..n) (outside groups and classes): ends[k] is
 * where alternative k stops (at a '|' or n); returns their number, 0 when there are more
 * than cap. */
static size_t top_alternatives(const char *p, size_t n, size_t *ends, size_t cap)
{
    size_t k = 0;
    int depth = 0;
    bool cls = false;
    for (size_t i = 0; i < n; i++) {
        char ch = p[i];
        if (ch == '\\') {
            i++;
        } else if (cls) {
            cls = ch != ']';
        } else if (ch == '[') {
            cls = true;
            if (i + 1 < n && p[i + 1] == '^') i++;
            if (i + 1 < n && p[i + 1] == ']') i++; /* a ']' first is a member */
        } else if (ch == '(') {
            depth++;
        } else if (ch == ')') {
            depth--;
        } else if (ch == '|' && depth == 0) {
            if (k == cap) return 0;
            ends[k++] = i;
        }
    }
    if (k == cap) return 0;
    ends[k++] = n;
    return k;
}

static bool ends_with_dollar(const char *p, size_t n) { return n && p[n - 1] == '$' && !(n >= 2 && p[n - 2] == '\\'); }

/* ECMA-262 anchors bind to one alternative: ^a|b$ is (^a)|(b$), not ^(a|b)$. With top-level
 * alternatives and an anchor at an end of one of them, each alternative is translated with
 * its own anchors, an unanchored end taking any characters; the whole is then anchored. */
static char *per_alternative_anchors(const char *pattern, size_t n, sift_error *err, rxlen *whole)
{
    size_t ends[64];
    size_t k = top_alternatives(pattern, n, ends, 64);
    if (k < 2) return NULL;
    bool anchored = false;
    for (size_t a = 0, st = 0; a < k; st = ends[a] + 1, a++)
        anchored |= (ends[a] > st && pattern[st] == '^') || ends_with_dollar(pattern + st, ends[a] - st);
    if (!anchored) return NULL;
    sift__gbnf_sbuf any = {0}, out = {0};
    cpset all = {.neg = true};
    sift__put_json_chars(&any, &all);
    sift__gbnf_sb_puts(&any, "*");
    bool ok = !any.oom;
    for (size_t a = 0, st = 0; a < k && ok; st = ends[a] + 1, a++) {
        size_t len = ends[a] - st;
        bool as = len && pattern[st] == '^';
        bool ae = len > (size_t)as && ends_with_dollar(pattern + st, len);
        rx r = {.s = pattern + st + as, .n = len - as - ae, .err = err, .status = SIFT_OK};
        sift__gbnf_sbuf inner = {0};
        rxlen al;
        ok = rx_alt(&r, &inner, &al);
        sift__gbnf_sb_free(&r.last_inner);
        if (ok && r.i < r.n) ok = sift__rx_fail(&r, "unmatched ')'");
        if (!(as && ae)) al.hi = -1; /* any characters at an open end */
        if (a == 0 || al.lo < whole->lo) whole->lo = al.lo;
        if (a == 0 || (whole->hi >= 0 && (al.hi < 0 || al.hi > whole->hi))) whole->hi = al.hi;
        if (ok) sift__gbnf_sb_printf(&out, "%s(%s%s(%s)%s%s)", a ? " | " : "", as ? "" : any.s, as ? "" : " ", inner.s ? inner.s : "\"\"",
                                     ae ? "" : " ", ae ? "" : any.s);
        sift__gbnf_sb_free(&inner);
    }
    sift__gbnf_sb_free(&any);
    if (ok && out.oom) {
        sift__error_set(err, SIFT_E_NOMEM, "out of memory");
        ok = false;
    }
    if (!ok) {
        sift__gbnf_sb_free(&out);
        if (!err->status) sift__error_set(err, SIFT_E_INVAL, "pattern");
        return NULL;
    }
    return sift__gbnf_sb_take(&out);
}

static char *convert(const char *pattern, size_t n, bool *anch_start, bool *anch_end, sift_error *err, rxlen *len)
{
    sift_error e0 = {0};
    char *per = per_alternative_anchors(pattern, n, err ? err : &e0, len);
    if (per) {
        *anch_start = *anch_end = true;
        return per;
    }
    if (err ? err->status : e0.status) return NULL;
    *anch_start = n && pattern[0] == '^';
    *anch_end = n && pattern[n - 1] == '$' && !(n >= 2 && pattern[n - 2] == '\\') && !(n == 1 && *anch_start);
    rx r = {.s = pattern + *anch_start, .n = n - *anch_start - *anch_end, .err = err, .status = SIFT_OK};
    sift__gbnf_sbuf out = {0};
    bool ok = rx_alt(&r, &out, len);
    sift__gbnf_sb_free(&r.last_inner);
    if (ok && r.i < r.n) ok = sift__rx_fail(&r, "unmatched ')'");
    if (!*anch_start || !*anch_end) len->hi = -1; /* a match inside a longer string */
    if (ok && out.oom) {
        sift__error_set(err, SIFT_E_NOMEM, "out of memory");
        ok = false;
    }
    if (!ok) {
        sift__gbnf_sb_free(&out);
        return NULL;
    }
    return sift__gbnf_sb_take(&out);
}

char *sift__schema_regex_to_gbnf(const char *pattern, size_t n, bool *anch_start, bool *anch_end, sift_error *err)
{
    rxlen len;
    return convert(pattern, n, anch_start, anch_end, err, &len);
}

bool sift__schema_pattern_lengths(const char *pattern, size_t n, long *lo, long *hi)
{
    rxlen len = {0, -1};
    bool as, ae;
    sift_error e = {0};
    char *g = convert(pattern, n, &as, &ae, &e, &len);
    bool ok = g != NULL;
    sift__gx_free(g);
    *lo = len.lo, *hi = len.hi;
    return ok;
}

/* An anchored pattern ^...$ whose atoms (at the top, inside one enclosing group) all have a
 * fixed length but one, a single character repeated (X{m,n}, X*, X+), together with a length
 * lo..hi (hi < 0: none): that atom's count takes what the length leaves, the rest as written:
 * the strings of both, exactly. NULL without an error when the pattern is not of that form,
 * NULL with one when no string fits (SIFT_E_INVAL) or on a failure. */
char *sift__schema_regex_bounded(const char *pattern, size_t n, long lo, long hi, sift_error *err)
{
    if (n < 2 || pattern[0] != '^' || !ends_with_dollar(pattern, n)) return NULL;
    const char *b = pattern + 1;
    size_t bn = n - 2;
    size_t ends[2];
    if (top_alternatives(b, bn, ends, 2) != 1) return NULL;
    /* one group around everything: its inside (a top-level '|' in it would mean alternatives) */
    while (bn >= 2 && b[0] == '(' && b[bn - 1] == ')' && !(bn >= 3 && b[1] == '?')) {
        int depth = 0;
        size_t k = 0;
        for (; k < bn; k++) {
            if (b[k] == '\\') k++;
            else if (b[k] == '[') { /* skip a class */
                for (k++; k < bn && b[k] != ']'; k++)
                    if (b[k] == '\\') k++;
            } else if (b[k] == '(') depth++;
            else if (b[k] == ')' && --depth == 0) break;
        }
        if (k != bn - 1 || top_alternatives(b + 1, bn - 2, ends, 2) != 1) break;
        b++, bn -= 2;
    }
    rx r = {.s = b, .n = bn, .err = err, .status = SIFT_OK};
    sift__gbnf_sbuf out = {0}, var_inner = {0};
    long fixed = 0, var_mn = 0, var_mx = 0;
    int n_var = 0, at = -1, k = 0;
    bool ok = true;
    char **texts = NULL;
    size_t cap = 0;
    for (; ok && r.i < r.n; k++) {
        if (r.s[r.i] == '^' || r.s[r.i] == '$' || r.s[r.i] == '|' || r.s[r.i] == ')') {
            ok = false;
            break;
        }
        sift__gbnf_sbuf one = {0};
        rxlen al;
        if (!rx_atom(&r, &one, &al)) {
            sift__gbnf_sb_free(&one);
            ok = false;
            break;
        }
        if ((size_t)k == cap) {
            char **t2 = sift__gx_realloc(texts, (cap = cap ? cap * 2 : 8) * sizeof *texts);
            if (!t2) {
                sift__gbnf_sb_free(&one);
                ok = false;
                break;
            }
            texts = t2;
        }
        texts[k] = sift__gbnf_sb_take(&one);
        if (al.lo == al.hi) {
            fixed = len_add(fixed, al.lo);
        } else if (++n_var == 1 && r.last_nq == 1 && r.last_inner_lo == 1 && r.last_inner_hi == 1) {
            at = k, var_mn = r.last_mn, var_mx = r.last_mx;
            sift__gbnf_sb_free(&var_inner);
            var_inner = r.last_inner;
            r.last_inner = (sift__gbnf_sbuf){0};
        } else {
            ok = false;
        }
    }
    sift__gbnf_sb_free(&r.last_inner);
    char *res = NULL;
    if (ok && n_var == 1 && at >= 0 && err && !err->status) {
        long mn = lo - fixed > var_mn ? lo - fixed : var_mn;
        long mx = hi < 0 ? var_mx : var_mx < 0 || hi - fixed < var_mx ? hi - fixed : var_mx;
        if ((hi >= 0 && hi - fixed < 0) || (mx >= 0 && mx < mn)) { /* hi - fixed < 0 is no room, not "unbounded" */
            sift__error_set(err, SIFT_E_INVAL, "no string matches both the pattern and the length");
        } else if (mn > 2000 || mx > 2000) {
            sift__error_set(err, SIFT_E_UNSUPPORTED, "the pattern's repetition with the length needs more than 2000 copies");
        } else {
            for (int i = 0; i < k; i++) {
                if (i) sift__gbnf_sb_puts(&out, " ");
                if (i != at) {
                    sift__gbnf_sb_puts(&out, texts[i] ? texts[i] : "");
                    continue;
                }
                sift__gbnf_sbuf grp = {0};
                sift__gbnf_sb_printf(&grp, "(%s)", var_inner.s ? var_inner.s : "");
                sift__gbnf_put_repetition(&out, grp.s ? grp.s : "()", mn, mx, NULL);
                if (mx == 0) sift__gbnf_sb_puts(&out, "\"\"");
                sift__gbnf_sb_free(&grp);
            }
            if (out.oom) sift__error_set(err, SIFT_E_NOMEM, "out of memory");
            else res = sift__gbnf_sb_take(&out);
        }
    } else if (err && err->status == SIFT_E_NOMEM) {
        res = NULL;
    } else if (err) {
        *err = (sift_error){0}; /* not of this form: the caller refuses the pattern with its length */
    }
    for (int i = 0; i < k; i++) sift__gx_free(texts ? texts[i] : NULL);
    sift__gx_free(texts);
    sift__gbnf_sb_free(&out);
    sift__gbnf_sb_free(&var_inner);
    return res;
}
