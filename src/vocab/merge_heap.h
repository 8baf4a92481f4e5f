/*
 * merge_heap.h - the binary heap of candidate merges, written once for the two tokenizers
 * that merge adjacent pieces best pair first: byte-level BPE (tokenizer_bpe.c: lowest
 * rank first) and SentencePiece (tokenizer_spm.c: highest score first). Both follow
 * llama.cpp's priority queues: push the new neighbour pairs after each merge, skip stale
 * entries as they come up.
 *
 * Why a macro that writes the heap for one item type and one order, and not one function
 * over `void *` items with a comparison callback: the push and pop loops are the hot part
 * of tokenizing long words, and an indirect call per comparison plus byte copies of the
 * items would slow them down. SIFT__MERGE_HEAP(name, item, before) defines, in the
 * including file,
 *
 *   typedef struct { item *a; size_t n, cap; } name;
 *   static int  name_push(name *h, item p);    0, or SIFT_E_NOMEM (the heap is unchanged)
 *   static item name_pop(name *h);             the first item in `before` order; h->n > 0
 *
 * where before(const item *x, const item *y) is nonzero when x must come out before y;
 * it must be a strict order that breaks every tie (both tokenizers break ties by the
 * pair's position), so the pops are deterministic. The array grows through
 * sift__tok_reserve and is owned by the caller (the tokenizer keeps it in its scratch
 * between calls, so a warm tokenizer allocates nothing).
 */
#ifndef SIFT_VOCAB_MERGE_HEAP_H
#define SIFT_VOCAB_MERGE_HEAP_H

#include <stddef.h>

#include "vocab/vocab.h"

#define SIFT__MERGE_HEAP(NAME, ITEM, BEFORE)                                                                          \
    typedef struct {                                                                                                 \
        ITEM *a;                                                                                                     \
        size_t n, cap;                                                                                               \
    } NAME;                                                                                                          \
                                                                                                                     \
    static int NAME##_push(NAME *h, ITEM p)                                                                          \
    {                                                                                                                \
        if (h->n == h->cap) {                                                                                        \
            void *q = h->a;                                                                                          \
            if (sift__tok_reserve(&q, &h->cap, h->n + 1, sizeof *h->a)) return SIFT_E_NOMEM;                         \
            h->a = q;                                                                                                \
        }                                                                                                            \
        size_t i = h->n++; /* sift up from the new last leaf */                                                      \
        while (i > 0) {                                                                                              \
            size_t parent = (i - 1) / 2;                                                                             \
            if (!BEFORE(&p, &h->a[parent])) break;                                                                   \
            h->a[i] = h->a[parent];                                                                                  \
            i = parent;                                                                                              \
        }                                                                                                            \
        h->a[i] = p;                                                                                                 \
        return 0;                                                                                                    \
    }                                                                                                                \
                                                                                                                     \
    static ITEM NAME##_pop(NAME *h)                                                                                  \
    {                                                                                                                \
        ITEM top = h->a[0], last = h->a[--h->n]; /* sift the last leaf down from the root */                        \
        size_t i = 0;                                                                                                \
        for (;;) {                                                                                                   \
            size_t c = 2 * i + 1;                                                                                    \
            if (c >= h->n) break;                                                                                    \
            if (c + 1 < h->n && BEFORE(&h->a[c + 1], &h->a[c])) c++;                                                 \
            if (!BEFORE(&h->a[c], &last)) break;                                                                     \
            h->a[i] = h->a[c];                                                                                       \
            i = c;                                                                                                   \
        }                                                                                                            \
        if (h->n) h->a[i] = last;                                                                                    \
        return top;                                                                                                  \
    }

#endif
