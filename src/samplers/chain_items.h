/*
 * chain_items.h - a chain as data: the list of samplers a chain spec or a set of sampling
 * params describes, each with its typed arguments, before any sampler object exists.
 *
 * Why: three places need a chain's structure, not just the chain. sift_chain_from_spec
 * and sift_chain_from_params build CPU chains; the device chain (src/gpu/plan.c) reads
 * the numbers of the items it runs itself and builds the CPU tail from the others. With
 * one item form, a spec is parsed once (chainspec.c), sampling params' order of samplers
 * exists once (params.c), and a sampler is created from its arguments in one place
 * (chain_items.c) - no item is ever written back to text to be parsed again.
 *
 * An item's arguments are resolved: defaults filled in, seeds decided (a spec's "dist()"
 * already holds env->default_seed, "-1" SIFT_DEFAULT_SEED), ranges checked. What the
 * arguments mean per kind (unused ones are 0):
 *
 *   kind          f[0]        f[1]        f[2]        i[0]            i[1]      seed
 *   greedy
 *   dist                                                                        seed
 *   top_k                                             k
 *   top_p         p                                   min_keep
 *   min_p         p                                   min_keep
 *   typical       p                                   min_keep
 *   temp          t
 *   temp_ext      t           delta       exponent
 *   xtc           probability threshold               min_keep                  seed
 *   top_n_sigma   n
 *   mirostat      tau         eta                     m                         seed
 *   mirostat_v2   tau         eta                                               seed
 *   penalties     repeat      freq        present     last_n
 *   dry           multiplier  base                    allowed_length  last_n    (+ breakers)
 *   logit_bias    (bias, n_bias)
 *   adaptive_p    target      decay                                             seed
 *   infill
 */
#ifndef SIFT_SAMPLERS_CHAIN_ITEMS_H
#define SIFT_SAMPLERS_CHAIN_ITEMS_H

#include <stddef.h>
#include <stdint.h>

#include "sift.h"

#ifdef __cplusplus
extern "C" { /* plan.h, which holds item lists, is compiled by nvcc too */
#endif

typedef enum sift__item_kind {
    SIFT__ITEM_GREEDY,
    SIFT__ITEM_DIST,
    SIFT__ITEM_TOP_K,
    SIFT__ITEM_TOP_P,
    SIFT__ITEM_MIN_P,
    SIFT__ITEM_TYPICAL,
    SIFT__ITEM_TEMP,
    SIFT__ITEM_TEMP_EXT,
    SIFT__ITEM_XTC,
    SIFT__ITEM_TOP_N_SIGMA,
    SIFT__ITEM_MIROSTAT,
    SIFT__ITEM_MIROSTAT_V2,
    SIFT__ITEM_PENALTIES,
    SIFT__ITEM_DRY,
    SIFT__ITEM_LOGIT_BIAS,
    SIFT__ITEM_ADAPTIVE_P,
    SIFT__ITEM_INFILL,
    SIFT__ITEM_COUNT
} sift__item_kind;

typedef struct sift__chain_item {
    sift__item_kind kind;
    size_t col; /* where the item's name starts in its spec (1-based); 0: from sampling params */
    float f[3];
    int32_t i[2];
    uint32_t seed;
    sift_logit_bias *bias; /* logit_bias */
    size_t n_bias;
    int strings; /* dry: breakers are strings (sift_sampler_init_dry), else token sequences */
    char **strs; /* dry: string breakers (their bytes, NUL-terminated) ... */
    size_t n_strs;
    sift_token **seqs; /* ... or token sequence breakers (never both) */
    size_t *lens;
    size_t n_seqs;
} sift__chain_item;

typedef struct sift__chain_items {
    sift__chain_item *v;
    size_t n, cap;
} sift__chain_items;

/* The spec name of a kind ("top_k", "temp_ext", ...). */
const char *sift__item_name(sift__item_kind kind);

/* A new zeroed item at the end of the list (NULL: out of memory). */
sift__chain_item *sift__chain_items_push(sift__chain_items *items, sift__item_kind kind, size_t col);

/* Frees what the items own and empties the list. */
void sift__chain_items_free(sift__chain_items *items);

/* Moves items [from, n) of src to the (empty) list dst; src keeps [0, from). SIFT_E_NOMEM. */
sift_status sift__chain_items_split(sift__chain_items *src, size_t from, sift__chain_items *dst);

/* Parses a chain spec (chainspec.c). Every argument is checked (types, counts, ranges,
 * token ids against env->n_vocab, what needs env->vocab); errors are SIFT_E_PARSE naming
 * the column. env may be NULL. On failure *out is left empty. */
sift_status sift__chain_items_parse(const char *spec, const sift_chain_env *env, sift__chain_items *out, sift_error *err);

/* The items sift_chain_from_params() adds (params.c: the one copy of common_sampler_init's
 * order). SIFT_E_INVAL for params that cannot make a chain. env may be NULL. */
sift_status sift__chain_items_from_params(const sift_sampling_params *params, const sift_chain_env *env,
                                          sift__chain_items *out, sift_error *err);

/* The sampler of one item (NULL with err set: SIFT_E_PARSE naming the column for an item
 * of a spec, SIFT_E_NOMEM for one of sampling params). */
sift_sampler *sift__chain_item_build(const sift__chain_item *item, const sift_chain_env *env, sift_error *err);

/* Adds the samplers of items [from, to) to chain, all or none (the chain ends as it began
 * on failure). */
sift_status sift__chain_add_items(sift_chain *chain, const sift__chain_items *items, size_t from, size_t to,
                                  const sift_chain_env *env, sift_error *err);

#ifdef __cplusplus
}
#endif

#endif
