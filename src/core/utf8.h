/*
 * utf8.h - UTF-8 for every layer: decode one code point, encode one, the length of a
 * sequence by its first byte.
 *
 * Why one home: the vocabulary (tokenizers), the grammar engine (GBNF text, JSON schema
 * conversion) and the template engine each wrote their own, with two different functions
 * named sift__utf8_len. The forms here are the vocabulary's, which follow llama.cpp's
 * tokenizers (unicode.cpp): decoding is lenient (a bad byte is one U+FFFD and is skipped,
 * never an error: token text is whatever the model has), and the grammar's strict,
 * incremental decoder (alloc_bits_utf8.h, sift__gx_utf8_feed) stays where it is: it answers
 * a different question (can these bytes still become a character?).
 */
#ifndef SIFT_CORE_UTF8_H
#define SIFT_CORE_UTF8_H

#include <stddef.h>
#include <stdint.h>

#define SIFT__UTF8_REPLACEMENT 0xFFFDu

/* Decode one code point at s[0..n) (n >= 1); *adv = bytes consumed (>= 1). A continuation
 * byte, a truncated sequence or F8..FF decode as U+FFFD, consuming one byte. (Overlong forms
 * and surrogates pass, as in llama.cpp.) */
static inline uint32_t sift__utf8_decode(const uint8_t *s, size_t n, size_t *adv)
{
    uint8_t b0 = s[0];
    if (b0 < 0x80) {
        *adv = 1;
        return b0;
    }
    *adv = 1;
    if (!(b0 & 0x40)) return SIFT__UTF8_REPLACEMENT; /* continuation byte */
    if (!(b0 & 0x20)) {
        if (n < 2 || (s[1] & 0xC0) != 0x80) return SIFT__UTF8_REPLACEMENT;
        *adv = 2;
        return ((uint32_t)(b0 & 0x1F) << 6) | (s[1] & 0x3F);
    }
    if (!(b0 & 0x10)) {
        if (n < 3 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80) return SIFT__UTF8_REPLACEMENT;
        *adv = 3;
        return ((uint32_t)(b0 & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
    }
    if (!(b0 & 0x08)) {
        if (n < 4 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80 || (s[3] & 0xC0) != 0x80)
            return SIFT__UTF8_REPLACEMENT;
        *adv = 4;
        return ((uint32_t)(b0 & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) |
               ((uint32_t)(s[2] & 0x3F) << 6) | (s[3] & 0x3F);
    }
    return SIFT__UTF8_REPLACEMENT; /* F8..FF */
}

/* Bytes in a UTF-8 sequence by its first byte, as llama.cpp's unicode_len_utf8 (1 for
 * continuation bytes and F8..FF: no validation; SentencePiece splits text this way). */
static inline size_t sift__utf8_seq_len(uint8_t b0)
{
    static const uint8_t len[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return len[b0 >> 4];
}

/* Encode cp into out[0..4); returns the byte count. Values above 0x10FFFF give U+FFFD. */
size_t sift__utf8_encode(uint32_t cp, char out[4]);

#endif
