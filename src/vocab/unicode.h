/*
 * unicode.h - the Unicode facts the tokenizers need, exactly as llama.cpp sees them.
 *
 * Tokenizers are only as exact as their idea of "a letter", "a digit", "whitespace" and
 * "a valid UTF-8 sequence". llama.cpp answers those with its own rules, and we copy the
 * rules, not an approximation:
 *
 *   - UTF-8 is decoded leniently (sift__utf8_decode): overlong forms and surrogates are
 *     accepted as the code point they spell, 4-byte forms up to 0x1FFFFF; anything else
 *     (a stray continuation byte, F8..FF, a truncated sequence) becomes U+FFFD and consumes
 *     exactly one byte. Encoding (sift__utf8_encode) writes U+FFFD for values above 0x10FFFF
 *     (where llama.cpp throws and aborts the process).
 *   - Every code point has one class: number, letter, separator, mark, punctuation, symbol,
 *     control (Cc/Cf/Cs/Co) or undefined (unassigned, Cn), plus a whitespace bit for
 *     llama.cpp's whitespace set (Unicode White_Space, 25 code points). The table is
 *     generated from Unicode 15.1 (scripts/gen_unicode_data.mjs), the version llama.cpp's
 *     table was built from; tests/test_unicode.c pins a few values of it.
 *   - Byte-level BPE (GPT-2) maps every byte to a printable code point: '!'..'~', '¡'..'¬'
 *     and '®'..'ÿ' map to themselves, the other 68 bytes to U+0100.. in byte order.
 */
#ifndef SIFT_VOCAB_UNICODE_H
#define SIFT_VOCAB_UNICODE_H

#include <stddef.h>
#include <stdint.h>

#include "core/utf8.h"

#define SIFT_U_NUMBER     0x001u /* \p{N} */
#define SIFT_U_LETTER     0x002u /* \p{L} */
#define SIFT_U_SEPARATOR  0x004u /* \p{Z} */
#define SIFT_U_MARK       0x008u /* \p{M} (llama.cpp: "accent mark") */
#define SIFT_U_PUNCT      0x010u /* \p{P} */
#define SIFT_U_SYMBOL     0x020u /* \p{S} */
#define SIFT_U_CONTROL    0x040u /* \p{C} without Cn */
#define SIFT_U_WHITESPACE 0x080u /* llama.cpp's whitespace set */
#define SIFT_U_UNDEFINED  0x100u /* unassigned (Cn) */
/* A code point above 0x10FFFF (or a position outside the text) has flags 0. */

/* UTF-8 decode / encode / sequence length: core/utf8.h (one home for every layer). */
#define SIFT_UNICODE_REPLACEMENT SIFT__UTF8_REPLACEMENT

/* Decode all of s[0..n) with sift__utf8_decode into cpts (room for n values); returns the count. */
size_t sift__utf8_to_cpts(const char *s, size_t n, uint32_t *cpts);

/* SIFT_U_* flags of a code point. */
uint16_t sift__unicode_flags(uint32_t cpt);
/* Simple lowercase mapping (cpt itself when there is none). */
uint32_t sift__unicode_tolower(uint32_t cpt);
/* First code point of the NFD decomposition (cpt itself when it does not decompose). */
uint32_t sift__unicode_nfd_head(uint32_t cpt);

/* Byte-level BPE: the code point byte b stands for, and its UTF-8 form (1 or 2 bytes). */
uint32_t sift__bytelevel_cpt(uint8_t b);
size_t sift__bytelevel_utf8(uint8_t b, char out[2]);
/* The byte a code point stands for in byte-level BPE, or -1 if it stands for none. */
int sift__bytelevel_byte(uint32_t cpt);

/* Generated tables (unicode_data.c). */
extern const uint32_t sift__ucd_run_start[];
extern const uint16_t sift__ucd_run_flags[];
extern const size_t sift__ucd_n_runs;
extern const uint32_t sift__ucd_lower[][2];
extern const size_t sift__ucd_n_lower;
extern const uint32_t sift__ucd_nfd[][3];
extern const size_t sift__ucd_n_nfd;

#endif
