/*
 * strtab.c - interned strings and pair tables (see strtab.h).
 *
 * Tables are kept at most half full, so a lookup probes one or two slots on average.
 */
#include "vocab/strtab.h"

#include <stdlib.h>

static size_t pow2_at_least(size_t n)
{
    size_t p = 16;
    while (p < n) p <<= 1;
    return p;
}

int sift__strtab_init(sift__strtab *t, int32_t n, size_t total_bytes)
{
    memset(t, 0, sizeof *t);
    t->cap = n > 16 ? n : 16;
    t->arena_cap = total_bytes > 64 ? total_bytes : 64;
    t->mask = pow2_at_least((size_t)t->cap * 2) - 1;
    t->off = malloc(sizeof *t->off * (size_t)t->cap);
    t->len = malloc(sizeof *t->len * (size_t)t->cap);
    t->arena = malloc(t->arena_cap);
    t->slots = calloc(t->mask + 1, sizeof *t->slots);
    if (!t->off || !t->len || !t->arena || !t->slots) {
        sift__strtab_free(t);
        return -1;
    }
    return 0;
}

void sift__strtab_free(sift__strtab *t)
{
    free(t->off);
    free(t->len);
    free(t->arena);
    free(t->slots);
    memset(t, 0, sizeof *t);
}

int32_t sift__strtab_find(const sift__strtab *t, const char *s, size_t n)
{
    uint64_t h = sift__hash_bytes(s, n);
    uint32_t h32 = (uint32_t)(h >> 32);
    for (size_t i = h & t->mask;; i = (i + 1) & t->mask) {
        uint64_t slot = t->slots[i];
        if (!slot) return -1;
        if ((uint32_t)(slot >> 32) == h32) {
            int32_t id = (int32_t)(uint32_t)slot - 1;
            if (t->len[id] == n && memcmp(t->arena + t->off[id], s, n) == 0) return id;
        }
    }
}

static int grow_slots(sift__strtab *t)
{
    size_t nmask = (t->mask + 1) * 2 - 1;
    uint64_t *ns = calloc(nmask + 1, sizeof *ns);
    if (!ns) return -1;
    for (int32_t id = 0; id < t->n; id++) {
        uint64_t h = sift__hash_bytes(t->arena + t->off[id], t->len[id]);
        size_t i = h & nmask;
        while (ns[i]) i = (i + 1) & nmask;
        ns[i] = ((h >> 32) << 32) | (uint64_t)(id + 1);
    }
    free(t->slots);
    t->slots = ns;
    t->mask = nmask;
    return 0;
}

int32_t sift__strtab_intern(sift__strtab *t, const char *s, size_t n, int *added)
{
    if (added) *added = 0;
    int32_t id = sift__strtab_find(t, s, n);
    if (id >= 0) return id;
    if (t->n == INT32_MAX - 1 || n >= UINT32_MAX || t->arena_len + n + 1 > UINT32_MAX) return -1;
    if (t->n == t->cap) {
        int32_t ncap = t->cap > INT32_MAX / 2 ? INT32_MAX - 1 : t->cap * 2;
        uint32_t *no = realloc(t->off, sizeof *no * (size_t)ncap);
        if (!no) return -1;
        t->off = no;
        uint32_t *nl = realloc(t->len, sizeof *nl * (size_t)ncap);
        if (!nl) return -1;
        t->len = nl;
        t->cap = ncap;
    }
    if (t->arena_len + n + 1 > t->arena_cap) {
        size_t ncap = t->arena_cap * 2;
        while (ncap < t->arena_len + n + 1) ncap *= 2;
        char *na = realloc(t->arena, ncap);
        if (!na) return -1;
        t->arena = na;
        t->arena_cap = ncap;
    }
    if ((size_t)(t->n + 1) * 2 > t->mask + 1 && grow_slots(t) != 0) return -1;
    id = t->n++;
    if (n) memcpy(t->arena + t->arena_len, s, n);
    t->arena[t->arena_len + n] = 0; /* every string is NUL-terminated too */
    t->off[id] = (uint32_t)t->arena_len;
    t->len[id] = (uint32_t)n;
    t->arena_len += n + 1;
    uint64_t h = sift__hash_bytes(s, n);
    size_t i = h & t->mask;
    while (t->slots[i]) i = (i + 1) & t->mask;
    t->slots[i] = ((h >> 32) << 32) | (uint64_t)(id + 1);
    if (added) *added = 1;
    return id;
}

int sift__pairtab_init(sift__pairtab *t, size_t n)
{
    t->n = 0;
    t->mask = pow2_at_least(n * 2 + 1) - 1;
    t->slots = malloc(sizeof *t->slots * (t->mask + 1));
    if (!t->slots) return -1;
    for (size_t i = 0; i <= t->mask; i++) t->slots[i].key = UINT64_MAX;
    return 0;
}

void sift__pairtab_free(sift__pairtab *t)
{
    free(t->slots);
    t->slots = NULL;
    t->mask = 0;
    t->n = 0;
}

int sift__pairtab_add(sift__pairtab *t, int32_t left, int32_t right, int32_t rank, int32_t result)
{
    if ((t->n + 1) * 2 > t->mask + 1) { /* keep it at most half full */
        sift__pairtab bigger;
        if (sift__pairtab_init(&bigger, (t->mask + 1)) != 0) return -1;
        for (size_t i = 0; i <= t->mask; i++) {
            sift__pair_slot s = t->slots[i];
            if (s.key == UINT64_MAX) continue;
            size_t j = sift__pair_hash(s.key) & bigger.mask;
            while (bigger.slots[j].key != UINT64_MAX) j = (j + 1) & bigger.mask;
            bigger.slots[j] = s;
            bigger.n++;
        }
        sift__pairtab_free(t);
        *t = bigger;
    }
    uint64_t key = ((uint64_t)(uint32_t)left << 32) | (uint32_t)right;
    size_t i = sift__pair_hash(key) & t->mask;
    for (;; i = (i + 1) & t->mask) {
        if (t->slots[i].key == key) return 0;
        if (t->slots[i].key == UINT64_MAX) break;
    }
    t->slots[i].key = key;
    t->slots[i].rank = rank;
    t->slots[i].result = result;
    t->n++;
    return 1;
}
