/*
 * alloc_bits_utf8.h - small helpers shared by the grammar layer: counted allocation, growable arrays,
 * bitsets, hashing and strict UTF-8.
 *
 * Every allocation of the grammar layer goes through sift__gx_malloc/sift__gx_realloc/sift__gx_free so that a
 * test can read sift__gx_alloc_count() before and after a generation step and prove that a warm
 * grammar sampler allocates nothing per token (caches are filled on first use only).
 * On Linux, blocks that sift__gx_grow/sift__gx_grow_realloc grow past 256 KiB become anonymous mappings
 * grown by mremap (no copy, huge pages from 2 MiB): see alloc_bits_utf8.c.
 *
 * UTF-8 is decoded strictly (no overlong forms, no surrogates, nothing above U+10FFFF, no
 * stray continuation bytes): a grammar matches code points, and a byte sequence that is not
 * one is not text. llama.cpp decodes without validation and lets such sequences through
 * (see ../shared/peer/README.md, "Not valid UTF-8"); sift does not.
 */
#ifndef SIFT_GRAMMAR_ALLOC_BITS_UTF8_H
#define SIFT_GRAMMAR_ALLOC_BITS_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/utf8.h"

void *sift__gx_malloc(size_t n);
void *sift__gx_calloc(size_t n, size_t size);
void *sift__gx_realloc(void *p, size_t n);
void sift__gx_free(void *p);
/* number of sift__gx_malloc/sift__gx_calloc/sift__gx_realloc calls so far in this process (all threads) */
uint64_t sift__gx_alloc_count(void);
/* Like sift__gx_realloc, but on Linux a block grown to 256 KiB or more moves into its own mapping,
 * grown by mremap (not copied): for arrays that grow while a mask is computed. Such a block must be
 * freed with sift__gx_free (never free()), so it must not leave the library. */
void *sift__gx_grow_realloc(void *p, size_t n);
/* how many such mapped blocks are live now (tests: none left after a free) */
uint32_t sift__gx_big_live(void);

/* Grow *arr (elements of `size` bytes, capacity *cap) to hold at least `need`; false on OOM.
 * Through sift__gx_grow_realloc: free *arr with sift__gx_free only. */
bool sift__gx_grow(void **arr, uint32_t *cap, uint32_t need, size_t size);
#define GX_GROW(arr, cap, need) sift__gx_grow((void **)&(arr), &(cap), (need), sizeof *(arr))

/* A growable array of uint32. */
typedef struct {
    uint32_t *v;
    uint32_t n, cap;
} sift__gx_u32vec;

static inline bool sift__gx_u32_push(sift__gx_u32vec *a, uint32_t x)
{
    if (a->n == a->cap && !GX_GROW(a->v, a->cap, a->n + 1)) return false;
    a->v[a->n++] = x;
    return true;
}
static inline void sift__gx_u32_free(sift__gx_u32vec *a)
{
    sift__gx_free(a->v);
    a->v = NULL;
    a->n = a->cap = 0;
}

/* ---- bitsets ---- */
static inline bool sift__gx_bit(const uint64_t *b, uint32_t i) { return (b[i >> 6] >> (i & 63)) & 1; }
static inline void sift__gx_bit_set(uint64_t *b, uint32_t i) { b[i >> 6] |= (uint64_t)1 << (i & 63); }
static inline uint32_t sift__gx_words(uint32_t nbits) { return (nbits + 63) / 64; }
/* any bit in [lo, hi] (inclusive) set? */
bool sift__gx_bits_any_in(const uint64_t *b, uint32_t lo, uint32_t hi);
bool sift__gx_bits_intersect(const uint64_t *a, const uint64_t *b, uint32_t words);

/* ---- hashing ---- */
static inline uint64_t sift__gx_mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}
static inline uint64_t sift__gx_hash2(uint32_t a, uint32_t b) { return sift__gx_mix64(((uint64_t)a << 32) | b); }
uint64_t sift__gx_hash_u32s(const uint32_t *v, uint32_t n, uint64_t seed);
/* Bytes s[0..n), eight at a time: rule names in schema grammars are JSON paths of 100+
 * characters (Kubernetes), hashed at every definition and reference - bytewise FNV was
 * ~15% of parsing them and a tenth of converting them. */
uint64_t sift__gx_hash_bytes(const char *s, size_t n);

/* ---- strict UTF-8 ----
 * A decoder state holds the bytes of an unfinished code point: `need` continuation bytes
 * still to come, the value so far, and the allowed range of the next byte (narrower than
 * 80..BF right after E0, ED, F0, F4). need == 0 means "between code points". */
typedef struct {
    uint32_t value;
    uint8_t need;  /* continuation bytes still expected (0..3) */
    uint8_t have;  /* bytes consumed so far in this code point (0..3) */
    uint8_t lo, hi; /* allowed range of the next byte */
} sift__gx_utf8;

enum { GX_UTF8_BAD = -1, GX_UTF8_MORE = -2 };

/* Feed one byte. Returns the completed code point, GX_UTF8_MORE when more bytes are needed,
 * or GX_UTF8_BAD when the byte cannot continue valid UTF-8 (state is then undefined). */
static inline int32_t sift__gx_utf8_feed(sift__gx_utf8 *u, uint8_t b)
{
    if (u->need == 0) {
        if (b < 0x80) return b;
        if (b >= 0xC2 && b <= 0xDF) { u->need = 1; u->value = b & 0x1F; u->lo = 0x80; u->hi = 0xBF; }
        else if (b >= 0xE0 && b <= 0xEF) {
            u->need = 2; u->value = b & 0x0F;
            u->lo = b == 0xE0 ? 0xA0 : 0x80;
            u->hi = b == 0xED ? 0x9F : 0xBF;
        } else if (b >= 0xF0 && b <= 0xF4) {
            u->need = 3; u->value = b & 0x07;
            u->lo = b == 0xF0 ? 0x90 : 0x80;
            u->hi = b == 0xF4 ? 0x8F : 0xBF;
        } else return GX_UTF8_BAD;
        u->have = 1;
        return GX_UTF8_MORE;
    }
    if (b < u->lo || b > u->hi) return GX_UTF8_BAD;
    u->value = (u->value << 6) | (b & 0x3F);
    u->lo = 0x80;
    u->hi = 0xBF;
    u->have++;
    if (--u->need == 0) {
        u->have = 0;
        return (int32_t)u->value;
    }
    return GX_UTF8_MORE;
}

/* The smallest and largest code point an unfinished sequence can still complete to. */
static inline void sift__gx_utf8_range(const sift__gx_utf8 *u, uint32_t *lo, uint32_t *hi)
{
    uint32_t shift = 6u * u->need;
    /* the next byte is limited to [u->lo, u->hi]; later ones to 80..BF */
    uint32_t first_lo = (uint32_t)(u->lo & 0x3F), first_hi = (uint32_t)(u->hi & 0x3F);
    uint32_t rest_bits = 6u * (u->need - 1u);
    *lo = (u->value << shift) | (first_lo << rest_bits);
    *hi = (u->value << shift) | (first_hi << rest_bits) | ((1u << rest_bits) - 1u);
}

/* A compact key for a decoder state (0 = between code points). The lead byte (hence the
 * range limits right after it) is implied by `value` and `have`. */
static inline uint32_t sift__gx_utf8_key(const sift__gx_utf8 *u)
{
    if (u->need == 0) return 0;
    return ((uint32_t)u->need << 28) | ((uint32_t)u->have << 24) | (u->value & 0x1FFFFF);
}


#endif
