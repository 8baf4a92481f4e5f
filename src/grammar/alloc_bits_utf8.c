/*
 * alloc_bits_utf8.c - counted allocation, bitset and hashing helpers of the grammar layer (see alloc_bits_utf8.h).
 */
#include <stdatomic.h>
#include <stdlib.h>

#include "grammar/alloc_bits_utf8.h"

static _Atomic uint64_t g_allocs;

void *sift__gx_malloc(size_t n)
{
    atomic_fetch_add_explicit(&g_allocs, 1, memory_order_relaxed);
    return malloc(n ? n : 1);
}

void *sift__gx_calloc(size_t n, size_t size)
{
    atomic_fetch_add_explicit(&g_allocs, 1, memory_order_relaxed);
    return calloc(n ? n : 1, size ? size : 1);
}

void *sift__gx_realloc(void *p, size_t n)
{
    atomic_fetch_add_explicit(&g_allocs, 1, memory_order_relaxed);
    return realloc(p, n ? n : 1);
}

void sift__gx_free(void *p) { free(p); }

uint64_t sift__gx_alloc_count(void) { return atomic_load_explicit(&g_allocs, memory_order_relaxed); }

bool sift__gx_grow(void **arr, uint32_t *cap, uint32_t need, size_t size)
{
    if (need <= *cap) return true;
    uint64_t ncap = *cap ? (uint64_t)*cap * 2 : 16;
    while (ncap < need) ncap *= 2;
    if (ncap > UINT32_MAX) ncap = UINT32_MAX;
    if (ncap < need || ncap * size > (uint64_t)SIZE_MAX / 2) return false;
    void *p = sift__gx_realloc(*arr, (size_t)ncap * size);
    if (!p) return false;
    *arr = p;
    *cap = (uint32_t)ncap;
    return true;
}

bool sift__gx_bits_any_in(const uint64_t *b, uint32_t lo, uint32_t hi)
{
    if (lo > hi) return false;
    uint32_t wl = lo >> 6, wh = hi >> 6;
    uint64_t ml = ~(uint64_t)0 << (lo & 63);
    uint64_t mh = ~(uint64_t)0 >> (63 - (hi & 63));
    if (wl == wh) return (b[wl] & ml & mh) != 0;
    if (b[wl] & ml) return true;
    for (uint32_t w = wl + 1; w < wh; w++)
        if (b[w]) return true;
    return (b[wh] & mh) != 0;
}

bool sift__gx_bits_intersect(const uint64_t *a, const uint64_t *b, uint32_t words)
{
    for (uint32_t i = 0; i < words; i++)
        if (a[i] & b[i]) return true;
    return false;
}

uint64_t sift__gx_hash_u32s(const uint32_t *v, uint32_t n, uint64_t seed)
{
    uint64_t h = seed ^ (0x9E3779B97F4A7C15ULL * (n + 1));
    for (uint32_t i = 0; i < n; i++) h = sift__gx_mix64(h ^ (v[i] + 0x632BE59BD9B4E019ULL * (i + 1)));
    return h;
}

int sift__gx_utf8_encode(uint32_t cp, char *out)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}
