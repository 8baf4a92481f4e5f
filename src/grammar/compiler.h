/*
 * compiler.h - the grammar compiler's inside (compiler.c), for the files that build on it:
 * the mask engine (an engine holds its compiler, for the vocabulary), the grammar sampler,
 * the legacy entry points' default compilers (vocab_cache.c) and the schema layer's
 * json_schema compile (which converts, then files the grammar under the schema's key).
 */
#ifndef SIFT_GRAMMAR_COMPILER_H
#define SIFT_GRAMMAR_COMPILER_H

#include "grammar/mask.h"

/* What a cache key's text is. */
enum { GX_KIND_GBNF = 1, GX_KIND_JSON_SCHEMA = 2 };

/* The vocabulary every engine of compiler c walks, and the view over it GBNF is parsed with
 * (token texts as the trie has them, the caller's attributes). Both live as long as c. */
const sift__gx_vocab *sift__gx_compiler_vocab(const sift_grammar_compiler *c);
const sift_vocab_view *sift__gx_compiler_view(const sift_grammar_compiler *c);
uint64_t sift__gx_compiler_budget(const sift_grammar_compiler *c);
void sift__gx_compiler_retain(sift_grammar_compiler *c);
void sift__gx_compiler_release(sift_grammar_compiler *c);

/* The cached grammar of key (kind, flags, root, text[0..len)): a new reference (a hit is
 * counted), or NULL (not counted: the caller compiles and files it with _keep). */
sift_compiled_grammar *sift__gx_compiler_find(sift_grammar_compiler *c, int kind, uint32_t flags, const char *root,
                                              const char *text, size_t len);
/* Compile the parsed grammar g (taken, also on failure): engine, precompute with `budget` (0:
 * the compiler's), and a copy of its text gbnf[0..len) when not NULL. Not cached; counted as
 * a compile. NULL with err. */
sift_compiled_grammar *sift__gx_compiler_build(sift_grammar_compiler *c, sift_grammar *g, const char *gbnf, size_t len,
                                               uint64_t budget, sift_error *err);
/* File cg (its reference taken) under the key and return a reference to what the cache
 * holds for it: cg, or the grammar another thread filed first (cg is then dropped). */
sift_compiled_grammar *sift__gx_compiler_keep(sift_grammar_compiler *c, int kind, uint32_t flags, const char *root,
                                              const char *text, size_t len, sift_compiled_grammar *cg);
sift__gx_engine *sift__gx_compiled_engine(const sift_compiled_grammar *cg);

/* sift_grammar_compiler_new (vocab_cache.c builds its slots with it). */
sift_grammar_compiler *sift__gx_compiler_make(const sift_vocab_view *view, const sift_grammar_compiler_params *p, sift_error *err);
/* The legacy entry points' compiler for `view` (sift_sampler_init_grammar*, engines made
 * from a view): one per distinct vocabulary in the process, a few kept (vocab_cache.c). A
 * reference; release with sift__gx_compiler_release. NULL with err. */
sift_grammar_compiler *sift__gx_compiler_acquire(const sift_vocab_view *view, sift_error *err);

#endif
