/*
 * gbnf_writer.c - writing GBNF text (see gbnf_writer.h): the growing string, literals, class
 * characters, llama.cpp's repetition shapes, and integer ranges as digit-by-digit
 * alternatives (for JSON schema minimum / maximum).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "schema/gbnf_writer.h"
#include "grammar/alloc_bits_utf8.h"

/* ---- the growing string ------------------------------------------------------------------------ */

void sift__gbnf_sb_putn(sift__gbnf_sbuf *b, const char *s, size_t n)
{
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 128;
        while (nc < b->n + n + 1) nc *= 2;
        char *p = nc > SIFT__GBNF_TEXT_MAX ? NULL : sift__gx_realloc(b->s, nc);
        if (!p) {
            b->oom = true;
            return;
        }
        b->s = p;
        b->cap = nc;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
}
void sift__gbnf_sb_puts(sift__gbnf_sbuf *b, const char *s) { sift__gbnf_sb_putn(b, s, strlen(s)); }
/* A format of text, "%s" and "%%" only (nearly every one the converter writes): its
 * strings appended as they are - vsnprintf was ~10% of converting a schema. Not when an
 * argument lies in b's own text (appending could move it). */
static bool sb_cat(sift__gbnf_sbuf *b, const char *fmt, va_list ap)
{
    enum { MAX_ARGS = 16 };
    const char *arg[MAX_ARGS];
    uint32_t n_arg = 0;
    for (const char *f = fmt; *f; f++) {
        if (*f != '%') continue;
        if (f[1] == '%') {
            f++;
            continue;
        }
        if (f[1] != 's' || n_arg == MAX_ARGS) return false;
        f++;
        n_arg++;
    }
    va_list aq;
    va_copy(aq, ap);
    for (uint32_t k = 0; k < n_arg; k++) {
        const char *a = va_arg(aq, const char *);
        arg[k] = a ? a : "(null)";
        if (b->s && arg[k] >= b->s && arg[k] < b->s + b->cap) {
            va_end(aq);
            return false;
        }
    }
    va_end(aq);
    uint32_t k = 0;
    const char *run = fmt;
    for (const char *f = fmt; *f; f++) {
        if (*f != '%') continue;
        sift__gbnf_sb_putn(b, run, (size_t)(f - run));
        if (f[1] == '%') sift__gbnf_sb_putn(b, "%", 1);
        else sift__gbnf_sb_puts(b, arg[k++]);
        run = ++f + 1;
    }
    sift__gbnf_sb_putn(b, run, strlen(run));
    return true;
}

void sift__gbnf_sb_printf(sift__gbnf_sbuf *b, const char *fmt, ...)
{
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    if (sb_cat(b, fmt, ap)) {
        va_end(ap);
        return;
    }
    va_end(ap);
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof tmp) {
        sift__gbnf_sb_putn(b, tmp, (size_t)n);
        return;
    }
    char *big = sift__gx_malloc((size_t)n + 1);
    if (!big) {
        b->oom = true;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    sift__gbnf_sb_putn(b, big, (size_t)n);
    sift__gx_free(big);
}
void sift__gbnf_sb_free(sift__gbnf_sbuf *b)
{
    sift__gx_free(b->s);
    memset(b, 0, sizeof *b);
}
char *sift__gbnf_sb_take(sift__gbnf_sbuf *b)
{
    if (b->oom) {
        sift__gbnf_sb_free(b);
        return NULL;
    }
    if (!b->s) sift__gbnf_sb_putn(b, "", 0);
    char *s = b->s;
    memset(b, 0, sizeof *b);
    return s;
}

/* ---- literals ---------------------------------------------------------------------------------- */

/* GBNF literal "..." for raw bytes s[0..n) */
void sift__gbnf_put_literal(sift__gbnf_sbuf *b, const char *s, size_t n)
{
    sift__gbnf_sb_putn(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"') sift__gbnf_sb_puts(b, "\\\"");
        else if (ch == '\\') sift__gbnf_sb_puts(b, "\\\\");
        else if (ch == '\n') sift__gbnf_sb_puts(b, "\\n");
        else if (ch == '\r') sift__gbnf_sb_puts(b, "\\r");
        else if (ch == '\t') sift__gbnf_sb_puts(b, "\\t");
        else if (ch < 0x20) sift__gbnf_sb_printf(b, "\\x%02X", ch);
        else sift__gbnf_sb_putn(b, (const char *)&ch, 1);
    }
    sift__gbnf_sb_putn(b, "\"", 1);
}

void sift__gbnf_put_class_char(sift__gbnf_sbuf *b, uint32_t cp)
{
    if (cp == ']' || cp == '[' || cp == '\\' || cp == '-' || cp == '"') sift__gbnf_sb_printf(b, "\\%c", (char)cp);
    else if (cp == '^') sift__gbnf_sb_puts(b, "\\x5E"); /* GBNF has no \^; a leading ^ would negate */
    else if (cp < 0x20 || cp == 0x7F) sift__gbnf_sb_printf(b, "\\x%02X", cp);
    else if (cp < 0x80) sift__gbnf_sb_printf(b, "%c", (char)cp);
    else if (cp < 0x10000) sift__gbnf_sb_printf(b, "\\u%04X", cp);
    else sift__gbnf_sb_printf(b, "\\U%08X", cp);
}


/* ---- repetition ---------------------------------------------------------------------------------- */

/* item{min,max} with optional separator between items (max < 0: unbounded), llama.cpp's
 * build_repetition. */
void sift__gbnf_put_repetition(sift__gbnf_sbuf *b, const char *item, long min, long max, const char *sep)
{
    bool has_max = max >= 0;
    if (has_max && max == 0) return;
    if (!sep) {
        if (min == 0 && max == 1) sift__gbnf_sb_printf(b, "%s?", item);
        else if (min == 1 && !has_max) sift__gbnf_sb_printf(b, "%s+", item);
        else if (min == 0 && !has_max) sift__gbnf_sb_printf(b, "%s*", item);
        else if (has_max && min == max) sift__gbnf_sb_printf(b, "%s{%ld}", item, min);
        else if (has_max) sift__gbnf_sb_printf(b, "%s{%ld,%ld}", item, min, max);
        else sift__gbnf_sb_printf(b, "%s{%ld,}", item, min);
        return;
    }
    if (min == 0) sift__gbnf_sb_puts(b, "(");
    sift__gbnf_sb_printf(b, "%s ", item);
    sift__gbnf_sbuf rep = {0};
    sift__gbnf_sb_printf(&rep, "(%s %s)", sep, item);
    sift__gbnf_put_repetition(b, rep.s ? rep.s : "", min == 0 ? 0 : min - 1, has_max ? max - 1 : -1, NULL);
    sift__gbnf_sb_free(&rep);
    if (min == 0) sift__gbnf_sb_puts(b, ")?");
}

#define GX_INT_DIGITS 16 /* unbounded integers: at most this many digits (llama.cpp) */

/* ---- integer ranges ------------------------------------------------------------------------------ */

static void digit_class(sift__gbnf_sbuf *b, char lo, char hi)
{
    if (lo == hi) sift__gbnf_sb_printf(b, "[%c]", lo);
    else sift__gbnf_sb_printf(b, "[%c-%c]", lo, hi);
}

static void any_digits(sift__gbnf_sbuf *b, size_t n)
{
    if (n == 1) sift__gbnf_sb_puts(b, "[0-9]");
    else if (n > 1) sift__gbnf_sb_printf(b, "[0-9]{%zu}", n);
}

/* Decimal strings lo..hi of the same length n (lo <= hi), as alternatives. */
static void same_len_range(sift__gbnf_sbuf *b, const char *lo, const char *hi, size_t n)
{
    size_t i = 0;
    while (i < n && lo[i] == hi[i]) i++;
    if (i) sift__gbnf_put_literal(b, lo, i);
    if (i == n) return;
    if (i) sift__gbnf_sb_puts(b, " ");
    size_t rest = n - i - 1;
    if (rest == 0) {
        digit_class(b, lo[i], hi[i]);
        return;
    }
    bool lo_zero = true, hi_nine = true;
    for (size_t k = i + 1; k < n; k++) {
        lo_zero &= lo[k] == '0';
        hi_nine &= hi[k] == '9';
    }
    char first = lo_zero ? lo[i] : (char)(lo[i] + 1);
    char last = hi_nine ? hi[i] : (char)(hi[i] - 1);
    sift__gbnf_sb_puts(b, "(");
    bool any = false;
    if (!lo_zero) {
        sift__gbnf_sb_printf(b, "[%c] (", lo[i]);
        char nines[32];
        memset(nines, '9', rest);
        same_len_range(b, lo + i + 1, nines, rest);
        sift__gbnf_sb_puts(b, ")");
        any = true;
    }
    if (first <= last) {
        if (any) sift__gbnf_sb_puts(b, " | ");
        digit_class(b, first, last);
        sift__gbnf_sb_puts(b, " ");
        any_digits(b, rest);
        any = true;
    }
    if (!hi_nine) {
        if (any) sift__gbnf_sb_puts(b, " | ");
        sift__gbnf_sb_printf(b, "[%c] (", hi[i]);
        char zeros[32];
        memset(zeros, '0', rest);
        same_len_range(b, zeros, hi + i + 1, rest);
        sift__gbnf_sb_puts(b, ")");
    }
    sift__gbnf_sb_puts(b, ")");
}

/* Non-negative integers in [lo, hi] (hi < 0: no upper bound, at most GX_INT_DIGITS digits). */
static void nonneg_range(sift__gbnf_sbuf *b, uint64_t lo, int64_t hi_s)
{
    char los[32], his[32];
    uint64_t hi = hi_s < 0 ? 0 : (uint64_t)hi_s;
    size_t ll = (size_t)snprintf(los, sizeof los, "%llu", (unsigned long long)lo);
    size_t hl = hi_s < 0 ? GX_INT_DIGITS : (size_t)snprintf(his, sizeof his, "%llu", (unsigned long long)hi);
    if (hl < ll) hl = ll;
    bool first = true;
    for (size_t len = ll; len <= hl; len++) {
        char a[32], z[32];
        if (len == ll) memcpy(a, los, len);
        else {
            a[0] = '1';
            memset(a + 1, '0', len - 1);
        }
        if (hi_s >= 0 && len == hl) memcpy(z, his, len);
        else memset(z, '9', len);
        a[len] = z[len] = 0;
        if (!first) sift__gbnf_sb_puts(b, " | ");
        first = false;
        same_len_range(b, a, z, len);
    }
}

/* Integers in [min, max]; has_min / has_max say which bounds exist. */
void sift__gbnf_put_int_range(sift__gbnf_sbuf *b, bool has_min, int64_t min, bool has_max, int64_t max)
{
    /* negative part: "-" then the magnitudes, positive part: 0.. */
    bool neg = !has_min || min < 0, pos = !has_max || max >= 0;
    bool first = true;
    if (neg) {
        /* magnitudes [m_lo, m_hi] = [-(min(max, -1)), -min] */
        int64_t top = has_max && max < -1 ? max : -1;
        uint64_t m_lo = (uint64_t)(-(top + 0)); /* top <= -1 */
        int64_t m_hi = has_min ? (min == INT64_MIN ? INT64_MAX : -min) : -1;
        sift__gbnf_sb_puts(b, "\"-\" (");
        nonneg_range(b, m_lo, m_hi);
        sift__gbnf_sb_puts(b, ")");
        first = false;
    }
    if (pos) {
        uint64_t lo = has_min && min > 0 ? (uint64_t)min : 0;
        if (!first) sift__gbnf_sb_puts(b, " | ");
        nonneg_range(b, lo, has_max ? max : -1);
    }
}
