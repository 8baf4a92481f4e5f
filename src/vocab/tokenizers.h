/*
 * tokenizers.h - the entry points of the per-type tokenizer sessions (tokenizer_spm.c,
 * tokenizer_bpe.c, tokenizer_wpm.c) and of the whole tokenize (tokenize.c: special-token
 * partition, dispatch, BOS/EOS). The calls go one way: vocab.c (its newline token) ->
 * tokenize.c -> the sessions -> token_buffers.c; none of them calls back up.
 */
#ifndef SIFT_VOCAB_TOKENIZERS_H
#define SIFT_VOCAB_TOKENIZERS_H

#include "vocab/token_buffers.h"
#include "vocab/vocab.h"

/* Tokenize one raw-text fragment, appending to out; 0 or a SIFT_E_* status. */
int sift__spm_tokenize(const sift_vocab *v, sift__tok_scratch *s, const char *text, size_t len, bool prefix_space,
                      sift__tokbuf *out);
int sift__bpe_tokenize(const sift_vocab *v, sift__tok_scratch *s, const char *text, size_t len, sift__tokbuf *out);
int sift__wpm_tokenize(const sift_vocab *v, sift__tok_scratch *s, const char *text, size_t len, sift__tokbuf *out);

/* The whole of llama.cpp's tokenize (partition + sessions + BOS/EOS) into out;
 * flags are sift_tokenize_ex's SIFT_TOKENIZE_* bits. */
int sift__vocab_tokenize_buf(const sift_vocab *v, const char *text, size_t len, uint32_t flags, sift__tokbuf *out);

#endif
