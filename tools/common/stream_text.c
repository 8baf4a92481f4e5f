/*
 * stream_text.c - the small text utilities of the server and the CLI: a growable buffer, UTF-8
 * checks, the stop-string search of streamed output.
 *
 * Streaming text is released token by token, but two things can only be decided later:
 *   - a token may end in the middle of a UTF-8 character (byte-fallback tokens, or BPE
 *     tokens that split a character): those trailing bytes wait for the next token
 *     (utf8_incomplete_tail), as llama-server's validate_utf8 does;
 *   - the text may end with the beginning of a stop string ("\n\nUs" of "\n\nUser:"): that
 *     suffix waits until it either completes the stop string (and is cut with it) or
 *     diverges (stop_partial).
 * The engine releases text[0 .. n - max(both holds)) after every token and flushes the
 * rest when generation ends, so a client never sees a stop string or half a character.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stream_text.h"

/* ---- sbuf ---------------------------------------------------------------------------------- */

void sbuf_free(sbuf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

static bool sbuf_reserve(sbuf *b, size_t extra)
{
    if (b->oom) return false;
    if (b->n + extra + 1 <= b->cap) return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + extra + 1) {
        if (cap > ((size_t)-1) / 2) {
            b->oom = true;
            return false;
        }
        cap *= 2;
    }
    char *p = realloc(b->p, cap);
    if (!p) {
        b->oom = true;
        return false;
    }
    b->p = p;
    b->cap = cap;
    return true;
}

void sbuf_add(sbuf *b, const void *data, size_t n)
{
    if (!sbuf_reserve(b, n)) return;
    if (n) memcpy(b->p + b->n, data, n);
    b->n += n;
    b->p[b->n] = 0;
}

void sbuf_adds(sbuf *b, const char *s) { sbuf_add(b, s, strlen(s)); }

void sbuf_printf(sbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char small[256];
    const int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof small) {
        sbuf_add(b, small, (size_t)n);
        return;
    }
    if (!sbuf_reserve(b, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->n, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)n;
}

char *sbuf_strdup(const sbuf *b)
{
    char *s = malloc(b->n + 1);
    if (!s) return NULL;
    if (b->n) memcpy(s, b->p, b->n);
    s[b->n] = 0;
    return s;
}

/* ---- UTF-8 ----------------------------------------------------------------------------------- */

/* Length of the valid UTF-8 character at s[0..n): 1..4, 0 when invalid, and -k when the
 * bytes are a valid beginning cut short after k bytes. */
static int utf8_char(const unsigned char *s, size_t n)
{
    const unsigned char c = s[0];
    if (c < 0x80) return 1;
    int len;
    unsigned lo = 0x80, hi = 0xBF; /* range of the second byte */
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c == 0xE0) len = 3, lo = 0xA0;
    else if (c >= 0xE1 && c <= 0xEC) len = 3;
    else if (c == 0xED) len = 3, hi = 0x9F; /* no surrogates */
    else if (c >= 0xEE && c <= 0xEF) len = 3;
    else if (c == 0xF0) len = 4, lo = 0x90;
    else if (c >= 0xF1 && c <= 0xF3) len = 4;
    else if (c == 0xF4) len = 4, hi = 0x8F;
    else return 0;
    for (int i = 1; i < len; i++) {
        if ((size_t)i >= n) return -i;
        const unsigned char d = s[i];
        if (i == 1 ? (d < lo || d > hi) : (d < 0x80 || d > 0xBF)) return 0;
    }
    return len;
}

size_t utf8_incomplete_tail(const char *s, size_t n)
{
    /* a character starts at most 3 bytes before the end */
    for (size_t k = 1; k <= 3 && k <= n; k++) {
        const unsigned char c = (unsigned char)s[n - k];
        if ((c & 0xC0) == 0x80) continue; /* continuation byte: look further back */
        const int r = utf8_char((const unsigned char *)s + n - k, k);
        return r < 0 ? k : 0;
    }
    return 0;
}

bool utf8_valid(const char *s, size_t n) { return utf8_valid_prefix(s, n) == n; }

size_t utf8_valid_prefix(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        const int r = utf8_char((const unsigned char *)s + i, n - i);
        if (r <= 0) break;
        i += (size_t)r;
    }
    return i;
}

void utf8_sanitize(sbuf *out, const char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        const size_t ok = utf8_valid_prefix(s + i, n - i);
        sbuf_add(out, s + i, ok);
        i += ok;
        if (i < n) {
            sbuf_add(out, "\xEF\xBF\xBD", 3);
            /* skip the bad sequence: its lead byte and continuation bytes that follow */
            i++;
            while (i < n && ((unsigned char)s[i] & 0xC0) == 0x80) i++;
        }
    }
}

/* ---- stop strings ------------------------------------------------------------------------------ */

long stop_find(const char *text, size_t n, size_t from, char *const *stops, int n_stops, int *which)
{
    long best = -1;
    for (int k = 0; k < n_stops; k++) {
        const size_t m = strlen(stops[k]);
        if (m == 0 || m > n) continue;
        for (size_t i = from; i + m <= n; i++) {
            if (best >= 0 && (long)i >= best) break;
            if (text[i] == stops[k][0] && memcmp(text + i, stops[k], m) == 0) {
                best = (long)i;
                if (which) *which = k;
                break;
            }
        }
    }
    return best;
}

size_t stop_partial(const char *text, size_t n, char *const *stops, int n_stops)
{
    size_t best = 0;
    for (int k = 0; k < n_stops; k++) {
        const size_t m = strlen(stops[k]);
        if (m == 0) continue;
        /* suffixes of length L < m that equal the stop string's first L bytes */
        for (size_t L = (m - 1 < n ? m - 1 : n); L > best; L--) {
            if (memcmp(text + n - L, stops[k], L) == 0) {
                best = L;
                break;
            }
        }
    }
    return best;
}
