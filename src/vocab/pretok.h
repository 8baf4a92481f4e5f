/*
 * pretok.h - the pre-tokenizers of byte-level BPE: text -> words, as llama.cpp splits it.
 *
 * A byte-level BPE vocabulary never merges across word boundaries; the words come from a
 * list of regular expressions chosen by the GGUF key `tokenizer.ggml.pre`. Each expression
 * splits every piece the previous ones produced into "matches and the text between them"
 * (nothing is dropped), and the final pieces are the words. See pretok.c for how each
 * expression runs so that the splits are llama.cpp's, byte for byte.
 *
 * A sift__pretok is compiled once per vocabulary and is read-only afterwards; the per-call
 * state (buffers, PCRE2 match data) lives in a sift__pretok_scratch owned by the caller.
 */
#ifndef SIFT_VOCAB_PRETOK_H
#define SIFT_VOCAB_PRETOK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sift.h"

/* Vocabulary settings a pre-tokenizer name implies (llama.cpp sets them by name). */
#define SIFT_PRE_KEEP_SPACES   0x01u /* clean_spaces = false */
#define SIFT_PRE_IGNORE_MERGES 0x02u /* a word that is a whole token is taken as is */
#define SIFT_PRE_ADD_BOS       0x04u /* add_bos defaults to true */
#define SIFT_PRE_NO_BOS        0x08u /* no default BOS id */
#define SIFT_PRE_ADD_SEP       0x10u /* add_sep defaults to true */
/* SentencePiece-style BPE (llama.cpp's byte_encode = false, escape_whitespaces = true): spaces
 * become "▁" before the split, merges run over raw UTF-8 characters, a piece that is no token
 * falls back to "<0xXX>" byte tokens, and a word of newlines only that is a token is taken whole */
#define SIFT_PRE_CHARS         0x20u

typedef struct sift__pretok_def {
    const char *names;             /* the tokenizer.ggml.pre values, '|'-separated */
    const char *const *regexes;    /* NULL-terminated, applied in order */
    unsigned flags;                /* SIFT_PRE_* */
} sift__pretok_def;

/* The definition for a tokenizer.ggml.pre value ("" or NULL = llama.cpp's "default"), or
 * NULL if llama.cpp would refuse the name or sift does not implement it. */
const sift__pretok_def *sift__pretok_find(const char *pre);
/* Every definition, NULL-terminated (for `sift info` and tests). */
extern const sift__pretok_def *const sift__pretok_defs[];
/* The pre-tokenizer of the "gemma4" tokenizer model, whatever tokenizer.ggml.pre says (llama.cpp
 * sets the name itself): newline runs apart from the rest, SIFT_PRE_CHARS, BOS added. */
extern const sift__pretok_def sift__pretok_gemma4;

typedef struct sift__pretok sift__pretok;

/* Compile the expressions; NULL and *err on failure (a bad expression names itself). */
sift__pretok *sift__pretok_new(const char *const *regexes, sift_error *err);
void sift__pretok_free(sift__pretok *p);

typedef struct sift__pretok_scratch {
    uint8_t *collapsed;   /* one byte per code point, classes folded (see pretok.c) */
    uint32_t *wide;       /* code points, non-ASCII whitespace folded to 0x0B */
    size_t cap_text;
    uint32_t *pieces, *next; /* piece lengths in code points, ping-pong */
    size_t cap_pieces, cap_next;
    void *md8, *md32;     /* PCRE2 match data */
    void *jit8, *jit32;   /* PCRE2 JIT stacks, made on demand */
    void *mctx8, *mctx32; /* match contexts holding them */
} sift__pretok_scratch;

void sift__pretok_scratch_free(sift__pretok_scratch *s);

/* Split cpts[0..n) (with their SIFT_U_* flags) into words. On success *pieces points at
 * *n_pieces word lengths in code points (inside *s, valid until its next use) and 0 is
 * returned; SIFT_E_NOMEM or SIFT_E_INVAL (a regex engine failure) otherwise. */
int sift__pretok_split(const sift__pretok *p, sift__pretok_scratch *s, const uint32_t *cpts,
                      const uint16_t *flags, size_t n, const uint32_t **pieces, size_t *n_pieces);

#endif
