/*
 * regex_int.h - what the two pattern translators share: regex_to_gbnf.c (a pattern as one
 * GBNF expression) and regex_length.c (a pattern together with minLength / maxLength, as an
 * automaton whose states also count characters). Both read the pattern with the same lexer
 * (escapes, classes, UTF-8) so that they accept the same ECMA-262 subset. Internal to
 * src/schema.
 */
#ifndef SIFT_SCHEMA_REGEX_INT_H
#define SIFT_SCHEMA_REGEX_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "schema/gbnf_writer.h"

/* A set of code points as sorted ranges (for classes). */
typedef struct {
    uint32_t r[2 * 64];
    int n;
    bool neg;
} cpset;

typedef struct {
    const char *s;
    size_t n, i;
    int depth;
    sift_error *err;
    int status;
    /* the last atom read: its text before quantifiers, their number, the last one's bounds */
    sift__gbnf_sbuf last_inner;
    int last_nq;
    long last_mn, last_mx, last_inner_lo, last_inner_hi;
} rx;

bool sift__rx_fail(rx *r, const char *what);
bool sift__rx_char(rx *r, uint32_t *cp);
/* after '\\': a code point (*cp, returns 1) or a class into *cs (returns 2); 0 on error */
int sift__rx_escape(rx *r, uint32_t *cp, cpset *cs);
/* [...] (r->i past '[') */
bool sift__rx_class(rx *r, cpset *cs);
void sift__cps_add(cpset *s, uint32_t lo, uint32_t hi);
bool sift__cps_has(const cpset *cs, uint32_t cp);
/* the JSON-string form of a set of characters, as one GBNF group */
void sift__put_json_chars(sift__gbnf_sbuf *b, const cpset *cs);

#endif
