/*
 * share.h - mask entries that do not depend on the grammar, shared by every engine of one
 * vocabulary (the mask engine's cross-grammar cache, mask.c).
 *
 * Why. A new grammar used to compute its JSON string pieces from scratch: the `char` class's
 * level-1 entry (~6.7k trie nodes, 0.4-0.9 ms), its char* loop below it, the root walk of a
 * key-exclusion loop. They are the same in every JSON Schema grammar of a vocabulary - in a
 * server, in nearly every json_schema request of one model - and they were most of the
 * first masks over 500 us (MaskBench).
 *
 * What is shared is an entry's content (accepted tokens, escape trie nodes): both are in
 * the vocabulary's terms. It is keyed by a canonical description of what was walked (mask.c,
 * canon_*): the frames' grammar text with rules numbered in the order they are met, classes as
 * code point ranges, the FOLLOW set as code point ranges - nothing of rule names or of one
 * grammar's symbol numbering. Keys are compared in full, not by hash alone. Records are
 * immutable once made, never freed before the vocabulary, and bounded in total size (past
 * the bound nothing more is added). Thread-safe: one mutex around the table.
 */
#ifndef SIFT_GRAMMAR_SHARE_H
#define SIFT_GRAMMAR_SHARE_H

#include <stdbool.h>
#include <stdint.h>

typedef struct sift__gx_share sift__gx_share;

/* One shared entry; its arrays live as long as the share. dense: n_words words, or NULL. */
typedef struct {
    const uint64_t *dense;
    const uint32_t *extra, *esc;
    uint32_t n_extra, n_esc;
    uint32_t work; /* what computing it cost (trie nodes): a copy still counts it against budgets */
} sift__gx_shared;

sift__gx_share *sift__gx_share_new(uint32_t n_words);
void sift__gx_share_free(sift__gx_share *s);

/* The record of key[0..n): its id (*out filled), or UINT32_MAX when there is none. */
uint32_t sift__gx_share_find(sift__gx_share *s, const uint32_t *key, uint32_t n, sift__gx_shared *out);

/* Add a record (copied); its id, or UINT32_MAX when full or out of memory (then the caller
 * just keeps its own entry). A key already present keeps its first record. */
uint32_t sift__gx_share_put(sift__gx_share *s, const uint32_t *key, uint32_t n, const sift__gx_shared *in);

/* Tests: the byte bound (0 turns sharing off for new records). */
void sift__gx_share_set_limit(sift__gx_share *s, uint64_t bytes);

#endif
