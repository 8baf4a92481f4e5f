/*
 * token_buffers.c - growth of the token buffer and of the sessions' scratch (see
 * token_buffers.h): amortised doubling, so a warm tokenizer allocates nothing.
 */
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "vocab/token_buffers.h"

int sift__tok_reserve(void **p, size_t *cap, size_t n, size_t elem)
{
    if (n <= *cap) return 0;
    size_t nc = *cap ? *cap : 64;
    while (nc < n) nc *= 2;
    void *np = realloc(*p, nc * elem);
    if (!np) return SIFT_E_NOMEM;
    *p = np;
    *cap = nc;
    return 0;
}

int sift__tokbuf_grow(sift__tokbuf *b, size_t need)
{
    if (b->status) return b->status;
    void *p = b->ids;
    if (sift__tok_reserve(&p, &b->cap, need, sizeof *b->ids)) return b->status = SIFT_E_NOMEM;
    b->ids = p;
    return 0;
}

void sift__tok_scratch_free(sift__tok_scratch *s)
{
    free(s->buf);
    free(s->cpts);
    free(s->flags);
    free(s->sym);
    free(s->heap);
    sift__pretok_scratch_free(&s->pre);
    memset(s, 0, sizeof *s);
}
