/*
 * strtab.h - interned byte strings and pair tables: the lookups tokenizers live on.
 *
 * sift__strtab gives every distinct byte string a dense id (0, 1, 2, ... in insertion order)
 * and finds the id of a string in O(1): an open-addressing table of (32-bit hash, id) slots
 * with linear probing, the bytes kept once in an arena. The vocabulary interns its token
 * texts first, so a token's string id is its token id; byte-level BPE then interns the
 * merge operands and results after them, and merges run on ids instead of strings.
 *
 * sift__pairtab maps an ordered pair of ids to (rank, result id): the BPE merge table.
 *
 * Both are built once while loading and are read-only afterwards (safe to share between
 * threads). Strings may hold any bytes, NUL included; each is stored NUL-terminated as well.
 */
#ifndef SIFT_VOCAB_STRTAB_H
#define SIFT_VOCAB_STRTAB_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* A fast 64-bit hash of n bytes (multiply-xorshift over 8-byte words). */
static inline uint64_t sift__hash_bytes(const void *p, size_t n)
{
    const uint8_t *s = (const uint8_t *)p;
    uint64_t h = 0x9E3779B97F4A7C15ull ^ ((uint64_t)n * 0xFF51AFD7ED558CCDull);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
        h ^= h >> 29;
        s += 8;
        n -= 8;
    }
    uint64_t w = 0;
    for (size_t i = 0; i < n; i++) w |= (uint64_t)s[i] << (8 * i);
    h = (h ^ w) * 0x94D049BB133111EBull;
    h ^= h >> 31;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 29;
    return h;
}

typedef struct sift__strtab {
    char *arena;       /* all strings, back to back, each followed by a NUL */
    size_t arena_len, arena_cap;
    uint32_t *off;     /* [n] start of string id in arena */
    uint32_t *len;     /* [n] its length */
    int32_t n, cap;
    uint64_t *slots;   /* (hash32 << 32) | (id + 1); 0 = empty */
    size_t mask;       /* slots - 1 (power of two) */
} sift__strtab;

/* An empty table with room for about n strings of total_bytes bytes (both may grow). */
int sift__strtab_init(sift__strtab *t, int32_t n, size_t total_bytes);
void sift__strtab_free(sift__strtab *t);
/* Id of s[0..n), or -1. */
int32_t sift__strtab_find(const sift__strtab *t, const char *s, size_t n);
/* Id of s[0..n), adding it if new; *added (may be NULL) says which. -1 when out of memory
 * or past 2^31 strings / 4 GiB of bytes. */
int32_t sift__strtab_intern(sift__strtab *t, const char *s, size_t n, int *added);
static inline const char *sift__strtab_str(const sift__strtab *t, int32_t id, size_t *len)
{
    if (len) *len = t->len[id];
    return t->arena + t->off[id];
}

typedef struct sift__pair_slot {
    uint64_t key; /* (left << 32) | right; UINT64_MAX = empty */
    int32_t rank;
    int32_t result;
} sift__pair_slot;

typedef struct sift__pairtab {
    sift__pair_slot *slots;
    size_t mask;
    size_t n;
} sift__pairtab;

int sift__pairtab_init(sift__pairtab *t, size_t n);
void sift__pairtab_free(sift__pairtab *t);
/* Insert (left, right) -> (rank, result) unless the pair is present (the first one wins,
 * as with llama.cpp's emplace). Returns 1 if inserted, 0 if present, -1 when out of memory. */
int sift__pairtab_add(sift__pairtab *t, int32_t left, int32_t right, int32_t rank, int32_t result);

static inline uint64_t sift__pair_hash(uint64_t key)
{
    key ^= key >> 33;
    key *= 0xFF51AFD7ED558CCDull;
    key ^= key >> 33;
    return key;
}

/* The slot of (left, right), or NULL. */
static inline const sift__pair_slot *sift__pairtab_find(const sift__pairtab *t, int32_t left, int32_t right)
{
    uint64_t key = ((uint64_t)(uint32_t)left << 32) | (uint32_t)right;
    for (size_t i = sift__pair_hash(key) & t->mask;; i = (i + 1) & t->mask) {
        const sift__pair_slot *s = &t->slots[i];
        if (s->key == key) return s;
        if (s->key == UINT64_MAX) return NULL;
    }
}

#endif
