/*
 * token_buffers.h - the growable token buffer a tokenize call writes to, and the per-call
 * scratch its sessions share (so a warm tokenizer reuses its memory call after call).
 * Below the tokenizers and independent of the vocabulary object.
 */
#ifndef SIFT_VOCAB_TOKEN_BUFFERS_H
#define SIFT_VOCAB_TOKEN_BUFFERS_H

#include <stddef.h>
#include <stdint.h>

#include "sift.h"
#include "vocab/pretok.h"

/* A growable token buffer; a tokenize call's output. */
typedef struct sift__tokbuf {
    sift_token *ids;
    size_t n, cap;
    int status; /* sticky SIFT_E_NOMEM */
} sift__tokbuf;

int sift__tokbuf_grow(sift__tokbuf *b, size_t need);
static inline void sift__tokbuf_push(sift__tokbuf *b, sift_token t)
{
    if (b->n == b->cap && sift__tokbuf_grow(b, b->n + 1)) return;
    b->ids[b->n++] = t;
}

/* Per-call scratch shared by the sessions; freed by sift__tok_scratch_free. */
typedef struct sift__tok_scratch {
    char *buf;          /* escaped text (SPM) / a byte-encoded word (BPE) / words (WPM) */
    size_t cap_buf;
    uint32_t *cpts;
    uint16_t *flags;
    size_t cap_cpts;
    void *sym;          /* symbol arrays of the merge loops */
    size_t cap_sym;
    void *heap;
    size_t cap_heap;
    sift__pretok_scratch pre;
} sift__tok_scratch;

void sift__tok_scratch_free(sift__tok_scratch *s);
int sift__tok_reserve(void **p, size_t *cap, size_t n, size_t elem);

#endif
