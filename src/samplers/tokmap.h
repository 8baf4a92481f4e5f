/*
 * tokmap.h - a small fixed-capacity hash map token -> int (open addressing, linear
 * probing, backward-shift deletion), for the per-token counts of penalties and DRY.
 * Sized at creation; sift__tokmap_reserve() grows it (only needed past a few thousand keys,
 * see history.h).
 */
#ifndef SIFT_SAMPLERS_TOKMAP_H
#define SIFT_SAMPLERS_TOKMAP_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sift.h"

/* The empty-slot marker: no token id, not even SIFT_TOKEN_NULL (-1). A sampler may be told
 * to accept -1 (llama.cpp takes it as a plain key); with -1 as the marker, accept(-1) found
 * an "empty" slot holding it and incremented a value never written (valgrind saw it). */
#define SIFT__TOKMAP_EMPTY INT32_MIN

typedef struct sift__tokmap {
    sift_token *key; /* SIFT__TOKMAP_EMPTY = empty slot */
    int32_t *val;
    uint32_t mask;   /* capacity - 1 (capacity is a power of two >= 2 * max keys) */
    uint32_t n;
} sift__tokmap;

static inline int sift__tokmap_init(sift__tokmap *m, size_t max_keys)
{
    size_t cap = 4;
    while (cap < 2 * max_keys) cap <<= 1;
    m->key = malloc(cap * sizeof *m->key);
    m->val = malloc(cap * sizeof *m->val);
    if (!m->key || !m->val) {
        free(m->key), free(m->val);
        m->key = NULL, m->val = NULL;
        return -1;
    }
    m->mask = (uint32_t)(cap - 1);
    m->n = 0;
    for (size_t i = 0; i < cap; i++) m->key[i] = SIFT__TOKMAP_EMPTY;
    return 0;
}

static inline void sift__tokmap_free(sift__tokmap *m)
{
    free(m->key);
    free(m->val);
    m->key = NULL, m->val = NULL;
}

static inline int sift__tokmap_copy(sift__tokmap *dst, const sift__tokmap *src)
{
    const size_t cap = (size_t)src->mask + 1;
    dst->key = malloc(cap * sizeof *dst->key);
    dst->val = malloc(cap * sizeof *dst->val);
    if (!dst->key || !dst->val) {
        free(dst->key), free(dst->val);
        dst->key = NULL, dst->val = NULL;
        return -1;
    }
    memcpy(dst->key, src->key, cap * sizeof *dst->key);
    memcpy(dst->val, src->val, cap * sizeof *dst->val);
    dst->mask = src->mask;
    dst->n = src->n;
    return 0;
}

static inline void sift__tokmap_clear(sift__tokmap *m)
{
    for (uint32_t i = 0; i <= m->mask; i++) m->key[i] = SIFT__TOKMAP_EMPTY;
    m->n = 0;
}

static inline uint32_t sift__tokmap_hash(sift_token t) { return (uint32_t)t * 2654435761u; }

/* slot of key t, or of the empty slot where it would go */
static inline uint32_t sift__tokmap_slot(const sift__tokmap *m, sift_token t)
{
    uint32_t i = sift__tokmap_hash(t) & m->mask;
    while (m->key[i] != SIFT__TOKMAP_EMPTY && m->key[i] != t) i = (i + 1) & m->mask;
    return i;
}

/* pointer to t's value, or NULL */
static inline int32_t *sift__tokmap_find(const sift__tokmap *m, sift_token t)
{
    const uint32_t i = sift__tokmap_slot(m, t);
    return m->key[i] == t ? &m->val[i] : NULL;
}

/* pointer to t's value, inserting it with 0 when absent (the caller guarantees room) */
static inline int32_t *sift__tokmap_get(sift__tokmap *m, sift_token t)
{
    const uint32_t i = sift__tokmap_slot(m, t);
    if (m->key[i] != t) {
        m->key[i] = t;
        m->val[i] = 0;
        m->n++;
    }
    return &m->val[i];
}

/* Make room for `keys` keys (at most half full), rehashing into a larger table when
 * needed. 0 when there is room (also after a failed allocation if the table still has a
 * free slot), -1 when there is none. */
static inline int sift__tokmap_reserve(sift__tokmap *m, size_t keys)
{
    const size_t cap = (size_t)m->mask + 1;
    if (2 * keys <= cap) return 0;
    sift__tokmap bigger;
    if (sift__tokmap_init(&bigger, keys) != 0) return m->n + 1 < cap ? 0 : -1;
    for (size_t i = 0; i < cap; i++) {
        if (m->key[i] == SIFT__TOKMAP_EMPTY) continue;
        const uint32_t j = sift__tokmap_slot(&bigger, m->key[i]);
        bigger.key[j] = m->key[i];
        bigger.val[j] = m->val[i];
        bigger.n++;
    }
    sift__tokmap_free(m);
    *m = bigger;
    return 0;
}

static inline void sift__tokmap_erase(sift__tokmap *m, sift_token t)
{
    uint32_t i = sift__tokmap_slot(m, t);
    if (m->key[i] != t) return;
    /* backward-shift deletion keeps every probe chain intact */
    for (;;) {
        m->key[i] = SIFT__TOKMAP_EMPTY;
        uint32_t j = i;
        for (;;) {
            j = (j + 1) & m->mask;
            if (m->key[j] == SIFT__TOKMAP_EMPTY) {
                m->n--;
                return;
            }
            const uint32_t home = sift__tokmap_hash(m->key[j]) & m->mask;
            /* can the entry at j move to i? only if its home is not in (i, j] */
            if (i <= j ? (home <= i || home > j) : (home <= i && home > j)) break;
        }
        m->key[i] = m->key[j];
        m->val[i] = m->val[j];
        i = j;
    }
}

#endif
