/*
 * stream_text.h - the small text utilities the CLI and the server share (stream_text.c): a
 * growable buffer, UTF-8 checks, the stop-string search of streamed output.
 */
#ifndef SIFT_TOOLS_STREAM_TEXT_H
#define SIFT_TOOLS_STREAM_TEXT_H

#include <stdbool.h>
#include <stddef.h>

/* ---- growable byte buffer (stream_text.c) ------------------------------------------------------- */

typedef struct sbuf {
    char *p;
    size_t n, cap;
    bool oom; /* an allocation failed; the content is truncated */
} sbuf;

void sbuf_free(sbuf *b);
void sbuf_add(sbuf *b, const void *data, size_t n);
void sbuf_adds(sbuf *b, const char *s);
void sbuf_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* NUL-terminated copy of the content (malloc'd; NULL on out of memory). */
char *sbuf_strdup(const sbuf *b);

/* ---- UTF-8 and stop strings (stream_text.c) --------------------------------------------------- */

/* Bytes at the end of s[0..n) that begin a UTF-8 character not complete yet (0..3): held
 * back while streaming, since the next token may complete it. */
size_t utf8_incomplete_tail(const char *s, size_t n);
/* Whether s[0..n) is valid UTF-8 (no overlongs, surrogates or code points > U+10FFFF). */
bool utf8_valid(const char *s, size_t n);
/* The longest prefix of s[0..n) that is valid UTF-8. */
size_t utf8_valid_prefix(const char *s, size_t n);
/* Append s[0..n) to out with every invalid sequence replaced by U+FFFD. */
void utf8_sanitize(sbuf *out, const char *s, size_t n);

/* The first occurrence, at or after byte `from`, of any of the stop strings in text[0..n):
 * its offset, and in *which the index of the stop string; -1 when none occurs. */
long stop_find(const char *text, size_t n, size_t from, char *const *stops, int n_stops, int *which);
/* The longest suffix of text[0..n) that is a proper prefix of some stop string (held back
 * while streaming: the next token may complete the stop string). */
size_t stop_partial(const char *text, size_t n, char *const *stops, int n_stops);

#endif
