/*
 * history.h - the window of recently accepted tokens kept by penalties and DRY.
 *
 * A ring buffer holding the last `limit` tokens. Its memory follows the history, not the
 * window: it starts at min(limit, SIFT_HISTORY_START) entries and doubles while the history
 * fills, so a huge window (penalty_last_n = 2^30) costs nothing until that many tokens have
 * been accepted. Windows up to SIFT_HISTORY_START tokens (every usual setting) never
 * allocate after creation. If growing fails, the window simply stays at its current size.
 */
#ifndef SIFT_SAMPLERS_HISTORY_H
#define SIFT_SAMPLERS_HISTORY_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "sift.h"

#define SIFT_HISTORY_START 4096

typedef struct sift__history {
    sift_token *buf;
    int32_t cap;   /* allocated entries */
    int32_t limit; /* the window */
    int32_t first; /* oldest entry (only moves once the buffer is full) */
    int32_t count;
} sift__history;

static inline int sift__history_init(sift__history *h, int32_t limit)
{
    memset(h, 0, sizeof *h);
    h->limit = limit;
    h->cap = limit < SIFT_HISTORY_START ? limit : SIFT_HISTORY_START;
    h->buf = malloc((size_t)h->cap * sizeof *h->buf);
    return h->buf ? 0 : -1;
}

static inline void sift__history_free(sift__history *h)
{
    free(h->buf);
    h->buf = NULL;
}

static inline int sift__history_copy(sift__history *dst, const sift__history *src)
{
    *dst = *src;
    dst->buf = malloc((size_t)src->cap * sizeof *dst->buf);
    if (!dst->buf) return -1;
    memcpy(dst->buf, src->buf, (size_t)src->cap * sizeof *dst->buf);
    return 0;
}

static inline void sift__history_clear(sift__history *h) { h->first = h->count = 0; }

/* Append a token. When the window was full, the oldest token leaves: it is stored in
 * *evicted and true is returned. */
static inline bool sift__history_push(sift__history *h, sift_token t, sift_token *evicted)
{
    if (h->count == h->cap && h->cap < h->limit && h->first == 0) {
        /* still filling: the entries are linear, double the buffer */
        int32_t cap = h->cap > h->limit / 2 ? h->limit : h->cap * 2;
        sift_token *b = realloc(h->buf, (size_t)cap * sizeof *b);
        if (b) h->buf = b, h->cap = cap;
    }
    if (h->count == h->cap) { /* full: overwrite the oldest */
        *evicted = h->buf[h->first];
        h->buf[h->first] = t;
        h->first = (h->first + 1) % h->cap;
        return true;
    }
    h->buf[(h->first + h->count) % h->cap] = t;
    h->count++;
    return false;
}

/* the i-th most recent token (0 = newest), i < count */
static inline sift_token sift__history_rat(const sift__history *h, int32_t i)
{
    return h->buf[(h->first + h->count - i - 1) % h->cap];
}

#endif
