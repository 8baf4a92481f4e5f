/*
 * grammar_util.h - helpers shared by the grammar tests: locating the test grammars and the
 * shared vocabularies, reading files, and building small vocabulary views by hand.
 *
 * Tests find the source tree through SIFT_SOURCE_DIR and the shared models through
 * SIFT_SHARED (both set by CTest). A test whose data is missing fails; it does not pass.
 */
#ifndef SIFT_TESTS_GRAMMAR_UTIL_H
#define SIFT_TESTS_GRAMMAR_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sift.h"

static inline char *gt_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    if (fseek(f, 0, SEEK_END) != 0) {
        fclose(f);
        return NULL;
    }
    long n = ftell(f);
    rewind(f);
    char *b = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    if (b) {
        b[n] = 0;
        if (len) *len = (size_t)n;
    }
    return b;
}

/* $SIFT_SOURCE_DIR/rel (or ./rel) into buf */
static inline const char *gt_src_path(char *buf, size_t cap, const char *rel)
{
    const char *d = getenv("SIFT_SOURCE_DIR");
    snprintf(buf, cap, "%s/%s", d ? d : ".", rel);
    return buf;
}

/* $SIFT_SHARED/rel (or ../shared/rel) into buf */
static inline const char *gt_shared_path(char *buf, size_t cap, const char *rel)
{
    const char *d = getenv("SIFT_SHARED");
    snprintf(buf, cap, "%s/%s", d ? d : "../shared", rel);
    return buf;
}

/* The text of tests/data/grammars/NAME.gbnf (malloc'd), or NULL. */
/* The shared vocabulary ../shared/models/vocab/ggml-vocab-NAME.gguf and its view, or NULL
 * (the reason printed). */
static inline sift_vocab *gt_vocab_load_shared(const char *name, sift_vocab_view *view)
{
    char rel[256], path[1024];
    snprintf(rel, sizeof rel, "models/vocab/ggml-vocab-%s.gguf", name);
    sift_error err = {0};
    sift_vocab *vocab = sift_vocab_load(gt_shared_path(path, sizeof path, rel), &err);
    if (!vocab) fprintf(stderr, "%s: %s\n", path, err.msg);
    else sift_vocab_view_get(vocab, view);
    return vocab;
}

static inline char *gt_grammar_text(const char *name, size_t *len)
{
    char rel[256], path[1024];
    snprintf(rel, sizeof rel, "tests/data/grammars/%s.gbnf", name);
    return gt_read_file(gt_src_path(path, sizeof path, rel), len);
}

/* A hand-made vocabulary: texts[i] (byte strings; lens[i] < 0 means strlen) and attrs. */
typedef struct {
    sift_vocab_view view;
    const char **piece;
    uint32_t *len;
    uint8_t *attr;
} gt_vocab;

static inline void gt_vocab_make(gt_vocab *v, const char *const *texts, const int *lens, const uint8_t *attrs, int n)
{
    v->piece = calloc((size_t)n, sizeof *v->piece);
    v->len = calloc((size_t)n, sizeof *v->len);
    v->attr = calloc((size_t)n, 1);
    for (int i = 0; i < n; i++) {
        v->piece[i] = texts[i];
        v->len[i] = lens && lens[i] >= 0 ? (uint32_t)lens[i] : (uint32_t)strlen(texts[i]);
        v->attr[i] = attrs ? attrs[i] : SIFT_TOKEN_ATTR_NORMAL;
    }
    memset(&v->view, 0, sizeof v->view);
    v->view.n_tokens = n;
    v->view.piece = v->piece;
    v->view.piece_len = v->len;
    v->view.attr = v->attr;
}

static inline void gt_vocab_free(gt_vocab *v)
{
    free(v->piece);
    free(v->len);
    free(v->attr);
}

#endif
