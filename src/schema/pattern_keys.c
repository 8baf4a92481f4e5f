/*
 * pattern_keys.c - what the JSON schema converter needs to know about a pattern beyond its
 * grammar (regex_to_gbnf.c), for patternProperties: the keys an object may use are the
 * declared names, the keys matching some pattern, and (when additionalProperties allows
 * them) the keys that are none of those. The last set needs the complement of a pattern,
 * which a grammar cannot take in general; two exact special cases cover most real schemas:
 *
 *   literals   ^lit$, ^(a|b|c)$: names (exact), ^lit: a prefix. The converter excludes
 *              them from the additional keys with its name trie (json_schema.c).
 *   one atom   [^]ATOM QUANT[$], ATOM a class, '.', \d \w \s \D \W \S or one plain
 *              character, QUANT none, ?, *, +, {m}, {m,}, {m,n}: the complement is written
 *              from the atom's set A and its complement set B:
 *                ^A{m,n}$   any* B any* | A{0,m-1} | A{n+1} A*
 *                ^A{m,n}    A{0,m-1} (B any*)?              (m = 0: every string matches)
 *                A{m,n}$    (any* B)? A{0,m-1}               (m = 0: likewise)
 *                A{m,n}     B*   when m = 1                  (m = 0: likewise; m > 1 refused)
 *              where `any` is the converter's JSON string character. A and B are written in
 *              canonical JSON encoding by regex_to_gbnf.c, so a key spelled with needless
 *              \u escapes is in neither set: the grammar refuses it (a subset, never a
 *              superset of the valid keys).
 * Everything else is SIFT_E_UNSUPPORTED, and the converter names patternProperties.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "schema/gbnf_writer.h"
#include "grammar/alloc_bits_utf8.h"

static bool is_meta(char ch) { return strchr("\\^$.|?*+()[]{}", ch) != NULL; }

/* One literal alternative s[0..n): plain characters and escaped punctuation, decoded. */
static bool literal_alt(const char *s, size_t n, char *out, size_t cap)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (ch == '\\') {
            if (i + 1 >= n || isalnum((unsigned char)s[i + 1])) return false;
            ch = s[++i];
        } else if (is_meta(ch) || (unsigned char)ch < 0x20 || ch == '"') {
            return false;
        }
        if (ch == '"' || ch == '\\' || (unsigned char)ch < 0x20) return false; /* would need escapes in the key */
        if (k + 1 >= cap) return false;
        out[k++] = ch;
    }
    out[k] = 0;
    return true;
}

int sift__schema_pattern_literals(const char *pat, size_t n, char (*out)[SIFT__PATTERN_LIT_MAX], int cap, bool *prefix)
{
    if (n < 1 || pat[0] != '^') return -1;
    bool end = n >= 2 && pat[n - 1] == '$' && pat[n - 2] != '\\';
    *prefix = !end;
    const char *s = pat + 1;
    size_t m = n - 1 - (end ? 1 : 0);
    /* ^lit.* (no '$'): the ".*" can match nothing, so it is the prefix ^lit */
    if (!end && m >= 2 && s[m - 2] == '.' && s[m - 1] == '*' && !(m >= 3 && s[m - 3] == '\\')) m -= 2;
    /* ^(a|b|c)$ : the group must span the whole pattern */
    if (m >= 2 && s[0] == '(' && s[m - 1] == ')') {
        const char *in = s + 1;
        size_t len = m - 2;
        if (len >= 2 && in[0] == '?' && in[1] == ':') in += 2, len -= 2;
        int k = 0;
        size_t a = 0;
        for (size_t i = 0; i <= len; i++) {
            if (i < len && in[i] == '\\') {
                i++;
                continue;
            }
            if (i < len && in[i] != '|') continue;
            if (k >= cap || !literal_alt(in + a, i - a, out[k], SIFT__PATTERN_LIT_MAX)) return -1;
            k++;
            a = i + 1;
        }
        return k;
    }
    if (cap < 1 || !literal_alt(s, m, out[0], SIFT__PATTERN_LIT_MAX)) return -1;
    return 1;
}

/* The pattern as [^]ATOM QUANT[$]: the atom's text and its complement's, the bounds. */
typedef struct {
    char atom[256], comp[260];
    long min, max; /* max -1: unbounded */
    bool a_start, a_end;
} one_atom;

static bool parse_one_atom(const char *p, size_t n, one_atom *o)
{
    size_t i = 0;
    o->a_start = n && p[0] == '^';
    i += o->a_start;
    o->a_end = n > i && p[n - 1] == '$' && !(n >= 2 && p[n - 2] == '\\');
    size_t e = n - o->a_end;
    if (i >= e) return false;
    size_t a0 = i;
    if (p[i] == '[') {
        size_t j = i + 1;
        if (j < e && p[j] == '^') j++;
        if (j < e && p[j] == ']') return false;
        for (; j < e && p[j] != ']'; j++)
            if (p[j] == '\\') j++;
            else if (p[j] == '[') return false;
        if (j >= e) return false;
        i = j + 1;
        size_t len = i - a0;
        if (len + 2 >= sizeof o->atom) return false;
        memcpy(o->atom, p + a0, len);
        o->atom[len] = 0;
        if (p[a0 + 1] == '^') snprintf(o->comp, sizeof o->comp, "[%.*s", (int)(len - 2), p + a0 + 2);
        else snprintf(o->comp, sizeof o->comp, "[^%.*s", (int)(len - 1), p + a0 + 1);
    } else if (p[i] == '.') {
        strcpy(o->atom, ".");
        strcpy(o->comp, "[\\n\\r\\u2028\\u2029]");
        i++;
    } else if (p[i] == '\\' && i + 1 < e && strchr("dwsDWS", p[i + 1])) {
        snprintf(o->atom, sizeof o->atom, "\\%c", p[i + 1]);
        snprintf(o->comp, sizeof o->comp, "\\%c", isupper((unsigned char)p[i + 1]) ? tolower((unsigned char)p[i + 1]) : toupper((unsigned char)p[i + 1]));
        i += 2;
    } else if (!is_meta(p[i]) && (unsigned char)p[i] >= 0x20 && (unsigned char)p[i] < 0x80) {
        snprintf(o->atom, sizeof o->atom, "%c", p[i]);
        snprintf(o->comp, sizeof o->comp, "[^%s%c]", p[i] == '-' || p[i] == ']' ? "\\" : "", p[i]);
        i++;
    } else {
        return false;
    }
    o->min = 1, o->max = 1;
    if (i < e) {
        if (p[i] == '?') o->min = 0, i++;
        else if (p[i] == '*') o->min = 0, o->max = -1, i++;
        else if (p[i] == '+') o->max = -1, i++;
        else if (p[i] == '{') {
            char *q;
            o->min = strtol(p + i + 1, &q, 10);
            if (q == p + i + 1) return false;
            if (*q == '}') o->max = o->min;
            else if (*q == ',' && q[1] == '}') o->max = -1, q++;
            else if (*q == ',') {
                char *r;
                o->max = strtol(q + 1, &r, 10);
                if (r == q + 1 || *r != '}') return false;
                q = r;
            } else return false;
            i = (size_t)(q - p) + 1;
        } else return false;
        if (i < e && p[i] == '?') i++; /* lazy: the same set */
    }
    return i == e && o->min >= 0 && o->min <= 2000 && o->max <= 2000 && (o->max < 0 || o->max >= o->min);
}

/* item{0,max}, or "" when max is 0 (a repetition of nothing writes nothing) */
static void upto(sift__gbnf_sbuf *b, const char *item, long max)
{
    if (max <= 0) sift__gbnf_sb_puts(b, "\"\"");
    else sift__gbnf_put_repetition(b, item, 0, max, NULL);
}

static char *atom_gbnf(const char *atom, sift_error *err)
{
    bool s, e;
    return sift__schema_regex_to_gbnf(atom, strlen(atom), &s, &e, err);
}

char *sift__schema_pattern_complement(const char *pat, size_t n, const char *any, bool *all, sift_error *err)
{
    *all = false;
    one_atom o;
    if (!parse_one_atom(pat, n, &o)) {
        sift__error_set(err, SIFT_E_UNSUPPORTED, "its complement (for the other keys) cannot be expressed");
        return NULL;
    }
    if (o.min == 0 && !(o.a_start && o.a_end)) {
        *all = true; /* an empty match is found in every string */
        return NULL;
    }
    if (!o.a_start && !o.a_end && o.min > 1) {
        sift__error_set(err, SIFT_E_UNSUPPORTED, "its complement (for the other keys) cannot be expressed");
        return NULL;
    }
    char *A = atom_gbnf(o.atom, err), *B = A ? atom_gbnf(o.comp, err) : NULL;
    if (!A || !B) {
        sift__gx_free(A);
        return NULL;
    }
    sift__gbnf_sbuf b = {0};
    sift__gbnf_sbuf a = {0}; /* "(A)" */
    sift__gbnf_sb_printf(&a, "(%s)", A);
    const char *As = a.s ? a.s : "";
    if (o.a_start && o.a_end) {
        sift__gbnf_sb_printf(&b, "%s* (%s) %s*", any, B, any);
        if (o.min > 0) {
            sift__gbnf_sb_puts(&b, " | ");
            upto(&b, As, o.min - 1);
        }
        if (o.max >= 0) {
            sift__gbnf_sb_puts(&b, " | ");
            sift__gbnf_put_repetition(&b, As, o.max + 1, o.max + 1, NULL);
            sift__gbnf_sb_printf(&b, " %s*", As);
        }
    } else if (o.a_start) {
        sift__gbnf_sb_puts(&b, "( ");
        upto(&b, As, o.min - 1);
        sift__gbnf_sb_printf(&b, " ) ( (%s) %s* )?", B, any);
    } else if (o.a_end) {
        sift__gbnf_sb_printf(&b, "( %s* (%s) )? ( ", any, B);
        upto(&b, As, o.min - 1);
        sift__gbnf_sb_puts(&b, " )");
    } else {
        sift__gbnf_sb_printf(&b, "(%s)*", B);
    }
    sift__gbnf_sb_free(&a);
    sift__gx_free(A);
    sift__gx_free(B);
    char *out = sift__gbnf_sb_take(&b);
    if (!out) sift__error_set(err, SIFT_E_NOMEM, "out of memory");
    return out;
}

bool sift__schema_pattern_one_atom(const char *pat, size_t n, char *atom, size_t cap, long *min, long *max, bool *a_start, bool *a_end)
{
    one_atom o;
    if (!parse_one_atom(pat, n, &o) || strlen(o.atom) + 1 > cap) return false;
    strcpy(atom, o.atom);
    *min = o.min;
    *max = o.max;
    *a_start = o.a_start;
    *a_end = o.a_end;
    return true;
}
