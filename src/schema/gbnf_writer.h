/*
 * gbnf_writer.h - writing GBNF text: a growing string, literals, class characters, repetitions
 * and integer ranges. Shared by the JSON schema converter (json_schema.c) and the pattern
 * translator (regex_to_gbnf.c); everything here produces text sift_grammar_parse reads back.
 */
#ifndef SIFT_SCHEMA_GBNF_WRITER_H
#define SIFT_SCHEMA_GBNF_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sift.h"

#define SIFT__GBNF_TEXT_MAX (64u << 20) /* a generated grammar larger than this is an out-of-memory error */

/* A growing NUL-terminated string; `oom` latches the first allocation failure. */
typedef struct {
    char *s;
    size_t n, cap;
    bool oom;
} sift__gbnf_sbuf;

void sift__gbnf_sb_putn(sift__gbnf_sbuf *b, const char *s, size_t n);
void sift__gbnf_sb_puts(sift__gbnf_sbuf *b, const char *s);
void sift__gbnf_sb_printf(sift__gbnf_sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sift__gbnf_sb_free(sift__gbnf_sbuf *b);
/* The string (malloc'd, "" when empty), or NULL after an allocation failure; b is reset. */
char *sift__gbnf_sb_take(sift__gbnf_sbuf *b);

/* "..." for raw bytes s[0..n), with GBNF escapes */
void sift__gbnf_put_literal(sift__gbnf_sbuf *b, const char *s, size_t n);
/* one code point inside [...] */
void sift__gbnf_put_class_char(sift__gbnf_sbuf *b, uint32_t cp);
/* item{min,max}, with `sep` between items when not NULL (max < 0: unbounded); llama.cpp's
 * build_repetition */
void sift__gbnf_put_repetition(sift__gbnf_sbuf *b, const char *item, long min, long max, const char *sep);
/* the decimal integers within [min, max] (a missing bound: at most 16 digits that way),
 * digit by digit, no leading zeros, no "-0" */
void sift__gbnf_put_int_range(sift__gbnf_sbuf *b, bool has_min, int64_t min, bool has_max, int64_t max);

/* The GBNF expression of a JSON-schema pattern (ECMA-262 regex subset) over the string's
 * characters in their canonical JSON encoding; see regex_to_gbnf.c. *anch_start / *anch_end:
 * the pattern began with '^' / ended with '$'. Returns malloc'd text, or NULL with err
 * (SIFT_E_UNSUPPORTED "offset N: what", SIFT_E_NOMEM). */
char *sift__schema_regex_to_gbnf(const char *pattern, size_t n, bool *anch_start, bool *anch_end, sift_error *err);
/* The lengths (characters) of the strings a pattern matches, as a whole string: lo..hi (hi < 0:
 * unbounded; an unanchored end makes it unbounded); false when the pattern is not converted. */
bool sift__schema_pattern_lengths(const char *pattern, size_t n, long *lo, long *hi);
/* An anchored pattern with one variable-length atom, a repeated character, with a length lo..hi:
 * the GBNF of the strings of both (regex_to_gbnf.c); NULL without an error when not that form. */
char *sift__schema_regex_bounded(const char *pattern, size_t n, long lo, long hi, sift_error *err);

/* The JSON numbers x with lo <= x <= hi (< with *_strict; NULL: no bound), the bounds in
 * plain decimal ("-12.5"), no exponent form (number_range.c); false when none is. */
bool sift__gbnf_put_number_range(sift__gbnf_sbuf *b, const char *lo, bool lo_strict, const char *hi, bool hi_strict);

/* Does `value` validate against `schema` (value_check.c)? 1 yes, 0 no, -1 not decided here.
 * resolve: a $ref's target in the document, or NULL. */
struct cJSON;
typedef const struct cJSON *(*sift__schema_resolve_fn)(void *ctx, const char *ref);
int sift__schema_value_valid(const struct cJSON *schema, const struct cJSON *value, sift__schema_resolve_fn resolve, void *ctx);

/* patternProperties (pattern_keys.c). The literals of a pattern ^lit$ / ^(a|b|c)$ (exact,
 * *prefix false) or ^lit (a prefix, *prefix true), decoded, at most `cap` of them: their
 * count, or -1 when the pattern is not of that form. */
#define SIFT__PATTERN_LIT_MAX 256
int sift__schema_pattern_literals(const char *pat, size_t n, char (*out)[SIFT__PATTERN_LIT_MAX], int cap, bool *prefix);
/* The GBNF expression of the JSON string contents a pattern does not match, `any` naming the
 * rule of one JSON string character; NULL with *all set when the pattern matches every
 * string, NULL with err (SIFT_E_UNSUPPORTED, SIFT_E_NOMEM) when it cannot be written. */
/* The pattern as [^]ATOM QUANT[$] (pattern_keys.c): the atom's text, its bounds (max -1:
 * unbounded) and anchors; false for any other form. */
bool sift__schema_pattern_one_atom(const char *pat, size_t n, char *atom, size_t cap, long *min, long *max, bool *a_start, bool *a_end);
char *sift__schema_pattern_complement(const char *pat, size_t n, const char *any, bool *all, sift_error *err);

#endif
