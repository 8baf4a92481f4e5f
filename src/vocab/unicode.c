/*
 * unicode.c - code point classes, case and NFD lookups, UTF-8 and the byte-level BPE
 * alphabet (see unicode.h for the rules and why they are llama.cpp's).
 *
 * Class lookups are on the tokenizer's hot path, once per code point of the input. ASCII,
 * nearly all of real text, is answered from a 128-entry table filled on first use from the
 * generated runs; everything else is a binary search over the ~2300 runs of equal flags
 * (11 steps). The case and NFD tables are small sorted arrays, searched the same way.
 */
#include "vocab/unicode.h"

#include <stdbool.h>

size_t sift__utf8_to_cpts(const char *s, size_t n, uint32_t *cpts)
{
    const uint8_t *p = (const uint8_t *)s;
    size_t i = 0, k = 0;
    while (i < n) {
        if (p[i] < 0x80) { /* ASCII runs are the common case */
            cpts[k++] = p[i++];
            continue;
        }
        size_t adv;
        cpts[k++] = sift__utf8_decode(p + i, n - i, &adv);
        i += adv;
    }
    return k;
}

static uint16_t flags_search(uint32_t cpt)
{
    size_t lo = 0, hi = sift__ucd_n_runs; /* the run containing cpt: last start <= cpt */
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (sift__ucd_run_start[mid] <= cpt) lo = mid;
        else hi = mid;
    }
    return sift__ucd_run_flags[lo];
}

/* The ASCII classes, computed from the generated runs at compile time is not possible in C,
 * so they are spelled out here and checked against the runs by tests/test_unicode.c. */
#define N_ SIFT_U_NUMBER
#define L_ SIFT_U_LETTER
#define P_ SIFT_U_PUNCT
#define S_ SIFT_U_SYMBOL
#define C_ SIFT_U_CONTROL
#define W_ (SIFT_U_CONTROL | SIFT_U_WHITESPACE)
#define SP (SIFT_U_SEPARATOR | SIFT_U_WHITESPACE)
static const uint16_t ascii_flags[128] = {
    C_, C_, C_, C_, C_, C_, C_, C_, C_, W_, W_, W_, W_, W_, C_, C_, /* 00-0F */
    C_, C_, C_, C_, C_, C_, C_, C_, C_, C_, C_, C_, C_, C_, C_, C_, /* 10-1F */
    SP, P_, P_, P_, S_, P_, P_, P_, P_, P_, P_, S_, P_, P_, P_, P_, /*  !"#$%&'()*+,-./ */
    N_, N_, N_, N_, N_, N_, N_, N_, N_, N_, P_, P_, S_, S_, S_, P_, /* 0-9 :;<=>? */
    P_, L_, L_, L_, L_, L_, L_, L_, L_, L_, L_, L_, L_, L_, L_, L_, /* @A-O */
    L_, L_, L_, L_, L_, L_, L_, L_, L_, L_, L_, P_, P_, P_, S_, P_, /* P-Z [\]^_ */
    S_, L_, L_, L_, L_, L_, L_, L_, L_, L_, L_, L_, L_, L_, L_, L_, /* `a-o */
    L_, L_, L_, L_, L_, L_, L_, L_, L_, L_, L_, P_, S_, P_, S_, C_, /* p-z {|}~ DEL */
};
#undef N_
#undef L_
#undef P_
#undef S_
#undef C_
#undef W_
#undef SP

uint16_t sift__unicode_flags(uint32_t cpt)
{
    if (cpt < 128) return ascii_flags[cpt];
    if (cpt > 0x10FFFF) return 0;
    return flags_search(cpt);
}

uint32_t sift__unicode_tolower(uint32_t cpt)
{
    if (cpt < 128) return (cpt >= 'A' && cpt <= 'Z') ? cpt + 32 : cpt;
    size_t lo = 0, hi = sift__ucd_n_lower;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (sift__ucd_lower[mid][0] < cpt) lo = mid + 1;
        else hi = mid;
    }
    return (lo < sift__ucd_n_lower && sift__ucd_lower[lo][0] == cpt) ? sift__ucd_lower[lo][1] : cpt;
}

uint32_t sift__unicode_nfd_head(uint32_t cpt)
{
    if (cpt < 0xC0) return cpt;
    size_t lo = 0, hi = sift__ucd_n_nfd; /* last run with first <= cpt */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (sift__ucd_nfd[mid][0] <= cpt) lo = mid + 1;
        else hi = mid;
    }
    if (lo == 0) return cpt;
    const uint32_t *run = sift__ucd_nfd[lo - 1];
    return cpt <= run[1] ? run[2] : cpt;
}

/* Byte-level BPE alphabet: printable Latin-1 bytes stand for themselves, the rest are
 * numbered from U+0100 in byte order. */
static bool byte_is_printable(unsigned b)
{
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

uint32_t sift__bytelevel_cpt(uint8_t b)
{
    if (byte_is_printable(b)) return b;
    /* rank of b among the non-printable bytes: 0x00-0x20 (33), 0x7F-0xA0 (34), 0xAD (1) */
    if (b <= 0x20) return 0x100u + b;
    if (b <= 0xA0) return 0x100u + 33 + (b - 0x7Fu);
    return 0x100u + 67; /* 0xAD */
}

size_t sift__bytelevel_utf8(uint8_t b, char out[2])
{
    uint32_t c = sift__bytelevel_cpt(b); /* < 0x800: one or two bytes */
    if (c < 0x80) {
        out[0] = (char)c;
        return 1;
    }
    out[0] = (char)(0xC0 | (c >> 6));
    out[1] = (char)(0x80 | (c & 0x3F));
    return 2;
}

int sift__bytelevel_byte(uint32_t cpt)
{
    if (cpt < 0x100) return byte_is_printable(cpt) ? (int)cpt : -1;
    if (cpt < 0x100 + 33) return (int)(cpt - 0x100);
    if (cpt < 0x100 + 67) return (int)(cpt - 0x100 - 33 + 0x7F);
    if (cpt == 0x100 + 67) return 0xAD;
    return -1;
}
