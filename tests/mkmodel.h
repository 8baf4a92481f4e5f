/*
 * mkmodel.h - small random llama-family models for tests: the names the tests use for
 * src/gguf/mkmodel.h (sift__mkmodel_write, also behind `sift mkmodel`). The architectures
 * and options the shared models do not cover (qwen2's QKV biases and neox RoPE, qwen3's
 * per-head q/k norms and decoupled head size, a tied output head, freq_base, linear RoPE
 * scaling, 256-wide rows for the K-quants), with stories260K's vocabulary.
 */
#ifndef SIFT_TESTS_MKMODEL_H
#define SIFT_TESTS_MKMODEL_H

#include <stdio.h>

#include "gguf/mkmodel.h"

typedef sift__mkmodel_spec mk_spec;

/* Write the model to path; vocab_src is a GGUF whose tokenizer.* keys are copied. 0 on success. */
static inline int mk_write_model(const char *path, const char *vocab_src, const mk_spec *sp)
{
    sift_error err = {0};
    if (sift__mkmodel_write(path, vocab_src, sp, &err) == SIFT_OK) return 0;
    fprintf(stderr, "mk_write_model: %s\n", err.msg);
    return -1;
}

#endif
