/*
 * share.c - the vocabulary's table of grammar-independent mask entries (see share.h).
 *
 * An open-addressing table of record ids, keyed by the full key (hash first, then length
 * and contents). A record is one allocation: key, dense set, extra ids, escapes. Records are
 * only added, so a pointer handed out stays valid until sift__gx_share_free.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/alloc_bits_utf8.h"
#include "grammar/share.h"

#define SHARE_BYTES_LIMIT ((uint64_t)64 << 20)

typedef struct {
    uint64_t hash;
    uint32_t n_key;
    uint32_t *key;
    void *blk; /* the record's one allocation */
    sift__gx_shared e;
} record;

struct sift__gx_share {
    pthread_mutex_t lock;
    uint32_t n_words;
    record *rec;
    uint32_t n_rec, cap_rec;
    uint32_t *ht; /* record id + 1, 0 empty */
    uint32_t ht_cap;
    uint64_t bytes, limit;
};

sift__gx_share *sift__gx_share_new(uint32_t n_words)
{
    sift__gx_share *s = sift__gx_calloc(1, sizeof *s);
    if (!s) return NULL;
    pthread_mutex_init(&s->lock, NULL);
    s->n_words = n_words;
    s->limit = SHARE_BYTES_LIMIT;
    return s;
}

void sift__gx_share_free(sift__gx_share *s)
{
    if (!s) return;
    for (uint32_t k = 0; k < s->n_rec; k++) sift__gx_free(s->rec[k].blk);
    sift__gx_free(s->rec);
    sift__gx_free(s->ht);
    pthread_mutex_destroy(&s->lock);
    sift__gx_free(s);
}

void sift__gx_share_set_limit(sift__gx_share *s, uint64_t bytes)
{
    pthread_mutex_lock(&s->lock);
    s->limit = bytes;
    pthread_mutex_unlock(&s->lock);
}

/* The slot of key (its record id + 1 there, or the empty slot it would go to). */
static uint32_t slot_of(const sift__gx_share *s, uint64_t h, const uint32_t *key, uint32_t n)
{
    uint32_t mask = s->ht_cap - 1;
    for (uint32_t k = (uint32_t)h & mask;; k = (k + 1) & mask) {
        uint32_t id = s->ht[k];
        if (!id) return k;
        const record *r = &s->rec[id - 1];
        if (r->hash == h && r->n_key == n && !memcmp(r->key, key, (size_t)n * sizeof *key)) return k;
    }
}

uint32_t sift__gx_share_find(sift__gx_share *s, const uint32_t *key, uint32_t n, sift__gx_shared *out)
{
    uint32_t found = UINT32_MAX;
    pthread_mutex_lock(&s->lock);
    if (s->ht_cap) {
        uint32_t id = s->ht[slot_of(s, sift__gx_hash_u32s(key, n, 0x5a5a), key, n)];
        if (id) {
            *out = s->rec[id - 1].e;
            found = id - 1;
        }
    }
    pthread_mutex_unlock(&s->lock);
    return found;
}

static bool ht_grow(sift__gx_share *s)
{
    uint32_t cap = s->ht_cap ? s->ht_cap * 2 : 256;
    uint32_t *t = sift__gx_calloc(cap, sizeof *t);
    if (!t) return false;
    for (uint32_t id = 0; id < s->n_rec; id++) {
        uint32_t k = (uint32_t)s->rec[id].hash & (cap - 1);
        while (t[k]) k = (k + 1) & (cap - 1);
        t[k] = id + 1;
    }
    sift__gx_free(s->ht);
    s->ht = t;
    s->ht_cap = cap;
    return true;
}

uint32_t sift__gx_share_put(sift__gx_share *s, const uint32_t *key, uint32_t n, const sift__gx_shared *in)
{
    size_t words = in->dense ? s->n_words : 0;
    size_t size = (size_t)words * 8 + ((size_t)n + in->n_extra + in->n_esc) * 4;
    uint32_t id = UINT32_MAX;
    pthread_mutex_lock(&s->lock);
    if (s->bytes + size > s->limit) goto out;
    if ((uint64_t)(s->n_rec + 1) * 2 > s->ht_cap && !ht_grow(s)) goto out;
    uint64_t h = sift__gx_hash_u32s(key, n, 0x5a5a);
    uint32_t k = slot_of(s, h, key, n);
    if (s->ht[k]) {
        id = s->ht[k] - 1;
        goto out;
    }
    if (!GX_GROW(s->rec, s->cap_rec, s->n_rec + 1)) goto out;
    /* one block: dense words first (8-byte aligned), then key, extra ids, escapes */
    uint64_t *blk = sift__gx_malloc(size ? size : 1);
    if (!blk) goto out;
    uint32_t *u = (uint32_t *)(blk + words);
    record r = {h, n, u, blk, {NULL, NULL, NULL, in->n_extra, in->n_esc, in->work}};
    if (words) {
        memcpy(blk, in->dense, words * 8);
        r.e.dense = blk;
    }
    memcpy(u, key, (size_t)n * 4);
    u += n;
    if (in->n_extra) memcpy(u, in->extra, (size_t)in->n_extra * 4);
    r.e.extra = u;
    u += in->n_extra;
    if (in->n_esc) memcpy(u, in->esc, (size_t)in->n_esc * 4);
    r.e.esc = u;
    s->rec[s->n_rec] = r;
    s->ht[k] = ++s->n_rec;
    s->bytes += size;
    id = s->n_rec - 1;
out:
    pthread_mutex_unlock(&s->lock);
    return id;
}
