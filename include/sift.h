/*
 * sift.h - the one public header of libsift, an LLM token-sampling engine.
 *
 * sift turns a model's logits into the next token the way llama.cpp's sampling system
 * does (same samplers, same parameters, the same token streams for the same seeds), and
 * carries a small GGUF runtime so sampling can be exercised end to end on real models.
 *
 * Conventions (read once, they hold everywhere):
 *   - Every symbol is prefixed `sift_` / `SIFT_`. Handles are opaque unless a struct is an
 *     extension point users must fill in themselves (sampler vtable, candidates).
 *   - Ownership is explicit: `*_new` / `*_init` return an object the caller frees with the
 *     matching `*_free`; a function that "takes ownership" says so.
 *   - Errors are values: functions return a sift_status (0 = SIFT_OK, negative = error), or
 *     NULL, and fill an optional `sift_error *` with a message that names the field, offset
 *     or line:column. Nothing aborts on bad user input and there is no global error state.
 *   - Thread safety is per object: a chain or a context is used by one thread at a time;
 *     a loaded model (weights, vocabulary) is shared read-only between threads.
 *
 * Sections: basics | candidates & samplers | chain | built-in samplers | chain spec |
 *           vocabulary view | GGUF | vocabulary & tokenizer | model & runtime | grammar
 */
#ifndef SIFT_H
#define SIFT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(SIFT_BUILD)
#define SIFT_API __attribute__((visibility("default")))
#else
#define SIFT_API
#endif

/* ==== basics ============================================================================= */

#define SIFT_VERSION_STRING "0.1.0"
SIFT_API const char *sift_version(void);

typedef int32_t sift_token;
#define SIFT_TOKEN_NULL (-1)
/* A seed of 0xFFFFFFFF (llama.cpp's LLAMA_DEFAULT_SEED) means "pick a random seed". */
#define SIFT_DEFAULT_SEED 0xFFFFFFFFu

typedef enum sift_status {
    SIFT_OK = 0,
    SIFT_E_INVAL = -1,       /* an argument is out of range or inconsistent */
    SIFT_E_NOMEM = -2,       /* an allocation failed */
    SIFT_E_PARSE = -3,       /* malformed text: chain spec, grammar, JSON, flags */
    SIFT_E_FORMAT = -4,      /* malformed or corrupt file (GGUF, logits file) */
    SIFT_E_IO = -5,          /* open/read/mmap failed */
    SIFT_E_UNSUPPORTED = -6, /* valid input this build does not handle (GGUF v1, a tensor type) */
    SIFT_E_STATE = -7,       /* call not valid in the object's current state */
} sift_status;

/* A static English name for a status ("invalid argument", ...). */
SIFT_API const char *sift_status_str(sift_status status);

/* Optional out-parameter of fallible functions: the status again and a one-line message
 * that says where (field, byte offset, line:column) and what. */
#define SIFT_ERROR_MSG_MAX 256
typedef struct sift_error {
    sift_status status;
    char msg[SIFT_ERROR_MSG_MAX];
} sift_error;

/* ==== candidates & samplers ================================================================
 *
 * The candidates array is what samplers work on: struct-of-arrays (ids, logits,
 * probabilities), a size, the selected index, a sorted flag, and `flags` that say what the
 * arrays currently hold. A sampler that modifies logits must clear SIFT_CAND_PROBS (use
 * sift_candidates_logits_changed); a sampler that needs probabilities asks for them with
 * sift_candidates_probs(), which runs a softmax only when they are stale. That is what
 * makes samplers order-independent (llama.cpp's "temperature after top-p" fault cannot
 * happen here: a stale `p` is never mistaken for the distribution of the current logits).
 *
 * The built-in samplers reproduce llama.cpp bit for bit, including where llama.cpp's
 * samplers compute probabilities differently from each other (float or double sums, array
 * or sorted order): each uses the recipe its llama.cpp counterpart uses, and the flags
 * only ever claim what is true of the arrays afterwards.
 *
 * The arrays are owned by whoever made the candidates (normally the chain, sized once for
 * the vocabulary): samplers only permute, shrink and rewrite them, never reallocate. A
 * sampler may drop a prefix by advancing the three array pointers together (and reducing
 * size and capacity), as llama.cpp's xtc does; candidates made by sift_candidates_init()
 * remember their arrays, so the next fill and free work from the originals.
 * `ws` is scratch memory sized with the arrays (sorting keys, gathers), so that no sampler
 * allocates per token; candidates made with sift_candidates_init() have one, and
 * sift_sampler_apply() lends a temporary one to candidates that do not.
 */
/* Scratch memory that belongs to the core (opaque: samplers reach it through the library). */
typedef struct sift_workspace sift_workspace;

typedef struct sift_candidates {
    sift_token *id;    /* token ids                                   [capacity] */
    float *logit;      /* logits (after whatever samplers did to them) [capacity] */
    float *p;          /* probabilities, meaningful when flags say so  [capacity] */
    size_t size;       /* live entries: [0, size) */
    size_t capacity;   /* allocated entries */
    int64_t selected;  /* index into the arrays of the chosen token, -1 = none yet */
    bool sorted;       /* [0, size) is in descending logit order */
    uint32_t flags;    /* SIFT_CAND_* below */
    sift_workspace *ws; /* scratch for samplers, owned by the core; NULL is allowed */
} sift_candidates;

/* p[0..size) holds softmax(logit[0..size)) of the current logits (sums to 1 within 1e-5). */
#define SIFT_CAND_PROBS 0x1u
/* id[i] == i for every i < size: the layout sift_candidates_fill() leaves, which lets the
 * grammar sampler work from its token bitset without reading the 4 bytes per token of ids.
 * Only the fill sets it; the library clears it after any sampler's apply that does not
 * declare the layout kept (the built-in samplers that only rewrite logits may). Code of
 * yours that permutes or rewrites ids between a fill and an apply must clear it too, as it
 * must clear SIFT_CAND_PROBS when it changes logits. */
#define SIFT_CAND_IDENTITY 0x2u

/* Allocate arrays (and workspace) for `capacity` entries; size 0, nothing selected.
 * Free with sift_candidates_free(). Errors: SIFT_E_INVAL (capacity 0), SIFT_E_NOMEM. */
SIFT_API sift_status sift_candidates_init(sift_candidates *cand, size_t capacity);
/* Free what sift_candidates_init() allocated and zero the struct (NULL-safe). */
SIFT_API void sift_candidates_free(sift_candidates *cand);
/* The start of a sampling step: id[i] = i, logit[i] = logits[i] for i < n, size n,
 * unsorted, nothing selected, flags SIFT_CAND_IDENTITY only (no probabilities), and the
 * arrays as allocated, when a sampler advanced them. SIFT_E_INVAL when n > capacity. */
SIFT_API sift_status sift_candidates_fill(sift_candidates *cand, const float *logits, size_t n);
/* Make p[0..size) valid for the current logits (a softmax with a double-precision sum,
 * only when the flags say the probabilities are stale) and return cand->p. */
SIFT_API const float *sift_candidates_probs(sift_candidates *cand);
/* Call after changing logits: the probabilities are no longer valid. `sorted` is left to
 * the caller (clear it unless the change kept the order). */
SIFT_API void sift_candidates_logits_changed(sift_candidates *cand);
/* Sort [0, size) by descending logit (llama.cpp's order, ties included) and set sorted. */
SIFT_API void sift_candidates_sort(sift_candidates *cand);
/* Keep the k highest logits, sorted descending (llama.cpp's partial sort: the same order,
 * ties included); size = min(k, size). */
SIFT_API void sift_candidates_partial_sort(sift_candidates *cand, size_t k);
/* size = min(size, n); drops the probabilities' validity when anything was cut. */
SIFT_API void sift_candidates_truncate(sift_candidates *cand, size_t n);
/* The selected token, or SIFT_TOKEN_NULL when nothing (valid) is selected. */
SIFT_API sift_token sift_candidates_selected(const sift_candidates *cand);
/* The n candidates with the highest logits, best first, with their probabilities under the
 * current logits (cand->p when valid, else computed on the side): for inspection (n_probs,
 * --trace, the server's inspector). Never modifies cand; any output array may be NULL.
 * Returns how many were written (min(n, size)). */
SIFT_API size_t sift_candidates_top(const sift_candidates *cand, size_t n, sift_token *ids, float *logits,
                                    float *probs);

/* A sampler: a vtable plus a context pointer, as in llama.cpp, so users can write their
 * own in C. NULL entries are allowed where the comment says so. */
typedef struct sift_sampler sift_sampler;
typedef struct sift_sampler_i {
    const char *(*name)(const sift_sampler *smpl);               /* may be NULL */
    void (*accept)(sift_sampler *smpl, sift_token token);         /* may be NULL */
    void (*apply)(sift_sampler *smpl, sift_candidates *cand);     /* required */
    void (*reset)(sift_sampler *smpl);                            /* may be NULL */
    sift_sampler *(*clone)(const sift_sampler *smpl);             /* may be NULL if ctx is NULL */
    void (*free)(sift_sampler *smpl);                             /* may be NULL if ctx is NULL */
    uint32_t (*get_seed)(const sift_sampler *smpl);               /* may be NULL: no randomness */
} sift_sampler_i;

struct sift_sampler {
    const sift_sampler_i *iface;
    void *ctx;
};

/* Wrap a vtable and a context into a sampler (heap-allocated; NULL on out of memory or a
 * NULL iface / apply). iface must outlive the sampler; ctx is owned by the sampler and
 * released by iface->free. */
SIFT_API sift_sampler *sift_sampler_init(const sift_sampler_i *iface, void *ctx);
/* The sampler's name ("top-k", "?top-k" for a disabled no-op), "(unnamed)" without one. */
SIFT_API const char *sift_sampler_name(const sift_sampler *smpl);
/* Tell the sampler which token was chosen (penalties, DRY, mirostat, grammar keep state). */
SIFT_API void sift_sampler_accept(sift_sampler *smpl, sift_token token);
/* Run the sampler on the candidates (lends a temporary workspace when cand->ws is NULL). */
SIFT_API void sift_sampler_apply(sift_sampler *smpl, sift_candidates *cand);
/* Back to the state right after creation (RNGs reseeded, histories emptied). */
SIFT_API void sift_sampler_reset(sift_sampler *smpl);
/* An independent copy with the same state (RNG position, history), or NULL (out of memory,
 * or a user sampler with a context and no clone). */
SIFT_API sift_sampler *sift_sampler_clone(const sift_sampler *smpl);
/* Free the sampler and its context (NULL-safe). Do not free a sampler a chain owns. */
SIFT_API void sift_sampler_free(sift_sampler *smpl);
/* The seed a random sampler actually uses (the drawn one when created with
 * SIFT_DEFAULT_SEED), from its vtable's get_seed; SIFT_DEFAULT_SEED for samplers without
 * one (no randomness). */
SIFT_API uint32_t sift_sampler_get_seed(const sift_sampler *smpl);

/* ==== chain ================================================================================
 *
 * A chain owns an ordered list of samplers and the candidates they run on. Per token:
 * sift_chain_sample() fills the candidates from the caller's logits, applies every sampler
 * in order, takes the selected token and accepts it into every sampler (llama.cpp's
 * llama_sampler_sample). The same steps are available one by one (fill / apply / accept),
 * e.g. for grammar-first or rejection sampling, or to apply the chain to candidates the
 * caller owns.
 *
 * Memory: the candidates (and their workspace) are sized at the first fill for the
 * vocabulary and reused; nothing is allocated per token afterwards (a test enforces it).
 *
 * Fast steps: when the chain's first sampler that does anything (disabled ones are passed
 * over) is a built-in greedy, dist, top_k (k <= 128), min_p or top_p, sift_chain_sample()
 * runs it straight on the caller's logits with SIMD kernels instead of filling the whole
 * candidate array first - same token, same candidates afterwards, bit for bit (see
 * docs/performance.md). When greedy or dist is the only working sampler, the candidates
 * (the whole vocabulary) are only built if asked for: sift_chain_candidates() then reads
 * the logits given to sift_chain_sample() again, so inspect them before changing those
 * logits (or use fill / apply / accept, which always build them). A chain with a trace
 * hook always takes the general path.
 *
 * Inspection: after a step, sift_chain_candidates() shows what the samplers left (size,
 * order, selected index); sift_candidates_top() gives the best few with probabilities
 * (n_probs). A trace hook, called after the fill and after every sampler, lets the CLI's
 * --trace, `sift replay --trace` and the server's inspector watch the chain work.
 *
 * Perf: number of samples and total time, and each sampler's own time (its share).
 * A chain is used by one thread at a time.
 */
typedef struct sift_chain sift_chain;

typedef struct sift_chain_params {
    bool no_perf; /* true: do not read the clock (no perf counters) */
} sift_chain_params;

/* { .no_perf = false } */
SIFT_API sift_chain_params sift_chain_default_params(void);
/* An empty chain (NULL on out of memory). Free with sift_chain_free(). */
SIFT_API sift_chain *sift_chain_new(sift_chain_params params);
/* Free the chain, every sampler in it and its buffers (NULL-safe). */
SIFT_API void sift_chain_free(sift_chain *chain);
/* Append a sampler; the chain takes ownership on success (SIFT_OK). On error
 * (SIFT_E_INVAL: NULL argument, SIFT_E_NOMEM) the caller still owns smpl. */
SIFT_API sift_status sift_chain_add(sift_chain *chain, sift_sampler *smpl);
/* Number of samplers. */
SIFT_API int32_t sift_chain_n(const sift_chain *chain);
/* Sampler i (borrowed; the chain still owns it), NULL when i is out of range. */
SIFT_API sift_sampler *sift_chain_get(const sift_chain *chain, int32_t i);
/* Take sampler i out of the chain; the caller owns it now. NULL when out of range. */
SIFT_API sift_sampler *sift_chain_remove(sift_chain *chain, int32_t i);

/* One whole step: fill from logits[0..n_vocab), apply, accept the selected token and
 * return it (or the same through a fast step, above). SIFT_TOKEN_NULL when the step could
 * not run (NULL logits, n_vocab < 1, out of memory) or no sampler selected a token (the
 * last sampler must select: greedy, dist, mirostat, adaptive_p). */
SIFT_API sift_token sift_chain_sample(sift_chain *chain, const float *logits, int32_t n_vocab);
/* Step 1: the chain's candidates <- logits (allocates only when n_vocab grows). */
SIFT_API sift_status sift_chain_fill(sift_chain *chain, const float *logits, int32_t n_vocab, sift_error *err);
/* Step 2: apply every sampler to cand (NULL = the chain's own candidates) and return the
 * selected token, or SIFT_TOKEN_NULL when none was selected. Does not accept. */
SIFT_API sift_token sift_chain_apply(sift_chain *chain, sift_candidates *cand);
/* Step 3: accept a token into every sampler (and count a sample). */
SIFT_API void sift_chain_accept(sift_chain *chain, sift_token token);
/* Reset every sampler (histories, RNGs); perf counters stay (sift_chain_perf_reset). */
SIFT_API void sift_chain_reset(sift_chain *chain);
/* A deep copy: every sampler cloned with its state, same params and trace hook, fresh
 * buffers and perf counters. NULL on out of memory or when a sampler cannot be cloned. */
SIFT_API sift_chain *sift_chain_clone(const sift_chain *chain);
/* The chain's candidates as the last fill / apply left them (borrowed; valid until the
 * next fill or the chain's end). After a fast greedy / dist step they are built here,
 * from that step's logits, which must still be unchanged. */
SIFT_API sift_candidates *sift_chain_candidates(sift_chain *chain);
/* The seed of the last random sampler in the chain (as sift_sampler_get_seed), or
 * SIFT_DEFAULT_SEED when there is none. */
SIFT_API uint32_t sift_chain_get_seed(const sift_chain *chain);
/* "top-k -> temp -> dist" (llama.cpp's names, "?x" for disabled links) into buf;
 * returns the length the full text needs, like snprintf. */
SIFT_API int sift_chain_describe(const sift_chain *chain, char *buf, size_t cap);

/* Trace hook: called with index -1 right after a fill, then after each sampler i with the
 * candidates as that sampler left them. Must not modify cand. NULL fn removes the hook. */
typedef void (*sift_trace_fn)(void *user, int32_t index, const sift_sampler *smpl, const sift_candidates *cand);
SIFT_API void sift_chain_set_trace(sift_chain *chain, sift_trace_fn fn, void *user);

typedef struct sift_chain_perf {
    int64_t n_sample;   /* accepted tokens */
    int64_t n_apply;    /* sift_chain_apply runs (a sample is one apply + one accept) */
    double t_total_us;  /* time in apply + accept (llama.cpp's "samplers time") */
    double t_fill_us;   /* time filling candidates from logits */
} sift_chain_perf;
/* The counters (zero when created with no_perf). */
SIFT_API sift_chain_perf sift_chain_get_perf(const sift_chain *chain);
/* Time spent in sampler i (apply + accept), µs; its share is this / t_total_us. */
SIFT_API double sift_chain_perf_sampler_us(const sift_chain *chain, int32_t i);
SIFT_API void sift_chain_perf_reset(sift_chain *chain);

/* Classifier-free guidance, llama.cpp common's way: both vectors go through a log-softmax,
 * then logits[i] = g[i] + scale * (l[i] - g[i]). logits is modified in place; guidance is
 * only read. SIFT_E_INVAL on NULL arrays or n_vocab < 1. */
SIFT_API sift_status sift_cfg_apply(float *logits, const float *guidance, int32_t n_vocab, float scale);

/* ==== built-in samplers ====================================================================
 *
 * Every llama.cpp sampler, same parameters in the same order as llama_sampler_init_*,
 * same semantics (the token streams of ../shared/reference/sampling are reproduced bit for
 * bit). A disabled parameter value gives a no-op sampler named "?<name>", as in
 * llama.cpp. Seeds: SIFT_DEFAULT_SEED draws a random one. All return NULL on out of memory
 * (and on invalid arguments where noted). llama.cpp's clone bugs (mirostat, penalties,
 * adaptive_p lose state) are not reproduced: a clone continues exactly like its original.
 */
typedef struct sift_vocab_view sift_vocab_view;

typedef struct sift_logit_bias {
    sift_token token;
    float bias; /* added to the logit; -INFINITY bans the token */
} sift_logit_bias;

/* argmax of the logits (first maximum). */
SIFT_API sift_sampler *sift_sampler_init_greedy(void);
/* Sample from softmax(logits) with std::mt19937(seed), llama.cpp's one-pass inverse CDF. */
SIFT_API sift_sampler *sift_sampler_init_dist(uint32_t seed);
/* Keep the k highest logits (k <= 0: no-op). */
SIFT_API sift_sampler *sift_sampler_init_top_k(int32_t k);
/* Nucleus: the smallest prefix (by probability) reaching p, at least min_keep (p >= 1: no-op). */
SIFT_API sift_sampler *sift_sampler_init_top_p(float p, size_t min_keep);
/* Keep tokens with probability >= p * max probability, at least min_keep (p <= 0: no-op). */
SIFT_API sift_sampler *sift_sampler_init_min_p(float p, size_t min_keep);
/* Locally typical sampling (p >= 1: no-op). */
SIFT_API sift_sampler *sift_sampler_init_typical(float p, size_t min_keep);
/* logits /= t; t <= 0 keeps only the first maximum (t == 1: no-op). */
SIFT_API sift_sampler *sift_sampler_init_temp(float t);
/* Dynamic temperature in [t - delta, t + delta] from the normalized entropy (delta <= 0:
 * plain temp; t == 1 and delta <= 0: no-op). */
SIFT_API sift_sampler *sift_sampler_init_temp_ext(float t, float delta, float exponent);
/* Exclude top choices: with probability p, drop every token with probability >= t except
 * the least probable of them (p <= 0 or t > 0.5: no-op). */
SIFT_API sift_sampler *sift_sampler_init_xtc(float p, float t, size_t min_keep, uint32_t seed);
/* Keep logits within n standard deviations of the maximum (n <= 0: no-op). */
SIFT_API sift_sampler *sift_sampler_init_top_n_sigma(float n);
/* Mirostat 1.0 (selects): target surprise tau, learning rate eta, m tokens for s_hat. */
SIFT_API sift_sampler *sift_sampler_init_mirostat(int32_t n_vocab, uint32_t seed, float tau, float eta, int32_t m);
/* Mirostat 2.0 (selects). */
SIFT_API sift_sampler *sift_sampler_init_mirostat_v2(uint32_t seed, float tau, float eta);
/* Repetition / frequency / presence penalties over the last `last_n` accepted tokens
 * (last_n <= 0, or repeat 1, freq 0 and present 0: no-op). */
SIFT_API sift_sampler *sift_sampler_init_penalties(int32_t last_n, float repeat, float freq, float present);
/* DRY ("don't repeat yourself") with string sequence breakers, tokenized through the
 * vocabulary view as llama.cpp does (every token whose text contains a breaker, or starts
 * a breaker's tail). vocab must outlive nothing: it is only used here. Disabled (no-op)
 * unless multiplier != 0, base >= 1 and last_n > 0. NULL when breakers are given without
 * a vocabulary able to tokenize. */
SIFT_API sift_sampler *sift_sampler_init_dry(const sift_vocab_view *vocab, float multiplier, float base,
                                             int32_t allowed_length, int32_t last_n,
                                             const char *const *breakers, size_t n_breakers);
/* DRY with sequence breakers given as token-id sequences (no vocabulary needed):
 * seqs[i][0..lens[i]) for i < n_seqs; empty sequences are skipped. */
SIFT_API sift_sampler *sift_sampler_init_dry_tokens(float multiplier, float base, int32_t allowed_length,
                                                    int32_t last_n, const sift_token *const *seqs,
                                                    const size_t *lens, size_t n_seqs);
/* Add a bias to given tokens' logits (n_bias == 0: no-op). n_vocab is recorded for the
 * name/backends; biases for tokens not among the candidates have no effect. */
SIFT_API sift_sampler *sift_sampler_init_logit_bias(int32_t n_vocab, size_t n_bias, const sift_logit_bias *bias);
/* Fill-in-the-middle: prefer EOG when text tokens are unlikely, merge tokens that are
 * prefixes of each other. Needs the vocabulary view (kept by pointer: it must outlive the
 * sampler) and the token to fall back to (EOT, or EOS when the model has none). */
SIFT_API sift_sampler *sift_sampler_init_infill(const sift_vocab_view *vocab, sift_token eot);
/* Adaptive-p (selects): pick tokens whose probability is near `target`, adapted by an
 * exponential moving average of the chosen tokens' probabilities (decay clamped to
 * [0, 0.99]); target < 0: plain sampling from the distribution. */
SIFT_API sift_sampler *sift_sampler_init_adaptive_p(float target, float decay, uint32_t seed);

/* ==== chain spec ===========================================================================
 *
 * Chains from text, two ways.
 *
 * 1. The explicit chain spec: one sampler per item, ';'-separated, arguments in the order
 *    of the sift_sampler_init_* functions above (= llama.cpp's llama_sampler_init_*):
 *
 *      spec  := item (';' item)*            whitespace anywhere between tokens
 *      item  := name '(' args? ')'
 *      args  := arg (',' arg)*
 *      arg   := number | '-inf' | 'inf' | '[' id* ']' | id ':' number | "string"
 *
 *      greedy()  dist(seed)  top_k(k)  top_p(p,min_keep)  min_p(p,min_keep)
 *      typical(p,min_keep)  temp(t)  temp_ext(t,delta,exponent)  xtc(p,t,min_keep,seed)
 *      top_n_sigma(n)  mirostat(seed,tau,eta,m)  mirostat_v2(seed,tau,eta)
 *      penalties(last_n,repeat,freq,present)  adaptive_p(target,decay,seed)  infill()
 *      dry(mult,base,allowed_length,last_n,[ids],[ids],...)   token-id breakers
 *      dry(mult,base,allowed_length,last_n,"\n",":",...)      string breakers (need a vocab)
 *      logit_bias(id:bias,id:bias,...)
 *
 *    e.g. "penalties(64,1.3,0.2,0.1);top_k(50);dist(5)". Missing trailing arguments are 0,
 *    except seeds, which default to env->default_seed (as ../shared/peer/peer_chainspec.h).
 *    A seed of -1 means SIFT_DEFAULT_SEED (random). Errors name the column and the problem.
 *
 * 2. llama.cpp common's way: sift_sampling_params mirrors common_params_sampling (same
 *    fields, same defaults); sift_chain_from_params() builds exactly what
 *    common_sampler_init() builds: logit biases, the samplers in params.samplers order (or
 *    temp + mirostat), then dist (or adaptive_p). The CLI and the server build their chains
 *    from it; `--samplers` and `--sampling-seq` strings are parsed by the functions below.
 */

/* What a chain builder needs to know about the model. */
typedef struct sift_chain_env {
    int32_t n_vocab;              /* vocabulary size (penalties, mirostat, logit_bias) */
    const sift_vocab_view *vocab; /* token texts, NULL without a model (no string DRY, no infill) */
    sift_token eot;               /* EOT (or EOS) token for infill; SIFT_TOKEN_NULL if unknown */
    uint32_t default_seed;        /* seed of dist() / xtc(...) / mirostat... written without one */
} sift_chain_env;

/* Parse a chain spec into a new chain (default params). NULL on error, with err saying
 * "col N: problem". */
SIFT_API sift_chain *sift_chain_from_spec(const char *spec, const sift_chain_env *env, sift_error *err);
/* Parse a chain spec and append its samplers to chain (all or nothing). */
SIFT_API sift_status sift_chain_add_spec(sift_chain *chain, const char *spec, const sift_chain_env *env,
                                         sift_error *err);

/* llama.cpp's common_sampler_type (same values). */
typedef enum sift_sampler_type {
    SIFT_SAMPLER_NONE = 0,
    SIFT_SAMPLER_DRY = 1,
    SIFT_SAMPLER_TOP_K = 2,
    SIFT_SAMPLER_TOP_P = 3,
    SIFT_SAMPLER_MIN_P = 4,
    SIFT_SAMPLER_TYPICAL_P = 6,
    SIFT_SAMPLER_TEMPERATURE = 7,
    SIFT_SAMPLER_XTC = 8,
    SIFT_SAMPLER_INFILL = 9,
    SIFT_SAMPLER_PENALTIES = 10,
    SIFT_SAMPLER_TOP_N_SIGMA = 11,
    SIFT_SAMPLER_ADAPTIVE_P = 12,
} sift_sampler_type;

#define SIFT_SAMPLING_MAX_SAMPLERS 32
#define SIFT_SAMPLING_MAX_BREAKERS 16
#define SIFT_SAMPLING_MAX_BREAKER_LEN 64

/* common_params_sampling: same fields, same defaults (sift_sampling_default_params). */
typedef struct sift_sampling_params {
    uint32_t seed;             /* SIFT_DEFAULT_SEED = random */
    int32_t n_prev;            /* 64: tokens kept for the prompt/antiprompt history (front ends) */
    int32_t n_probs;           /* 0: how many top probabilities front ends report per token */
    int32_t min_keep;          /* 0: min_keep of top_p / min_p / typical / xtc */
    int32_t top_k;             /* 40   (<= 0: disabled) */
    float top_p;               /* 0.95 (1.0: disabled) */
    float min_p;               /* 0.05 (0.0: disabled) */
    float xtc_probability;     /* 0.0  (disabled) */
    float xtc_threshold;       /* 0.10 (> 0.5: disabled) */
    float typ_p;               /* 1.0  (disabled) */
    float temp;                /* 0.8  (<= 0: greedy-like) */
    float dynatemp_range;      /* 0.0  (disabled) */
    float dynatemp_exponent;   /* 1.0 */
    int32_t penalty_last_n;    /* 64   (0: disabled) */
    float penalty_repeat;      /* 1.0  (disabled) */
    float penalty_freq;        /* 0.0  (disabled) */
    float penalty_present;     /* 0.0  (disabled) */
    float dry_multiplier;      /* 0.0  (disabled) */
    float dry_base;            /* 1.75 */
    int32_t dry_allowed_length;/* 2 */
    int32_t dry_penalty_last_n;/* 64   (<= 0: disabled) */
    float adaptive_target;     /* -1.0 (negative: disabled) */
    float adaptive_decay;      /* 0.90 */
    int32_t mirostat;          /* 0 = off, 1 = mirostat, 2 = mirostat 2.0 */
    float top_n_sigma;         /* -1.0 (disabled) */
    float mirostat_tau;        /* 5.0 */
    float mirostat_eta;        /* 0.1 */
    bool ignore_eos;           /* false: true bans every EOG token (needs the vocab view) */
    bool no_perf;              /* false */
    /* DRY sequence breakers: {"\n", ":", "\"", "*"} by default */
    char dry_sequence_breakers[SIFT_SAMPLING_MAX_BREAKERS][SIFT_SAMPLING_MAX_BREAKER_LEN];
    int32_t n_dry_sequence_breakers;
    /* the order: penalties; dry; top_n_sigma; top_k; typ_p; top_p; min_p; xtc; temperature */
    sift_sampler_type samplers[SIFT_SAMPLING_MAX_SAMPLERS];
    int32_t n_samplers;
    /* logit biases (borrowed: must outlive sift_chain_from_params) */
    const sift_logit_bias *logit_bias;
    size_t n_logit_bias;
} sift_sampling_params;

/* common_params_sampling's defaults. */
SIFT_API sift_sampling_params sift_sampling_default_params(void);
/* --samplers: names separated by ';' (llama.cpp's names and aliases: "top_k", "top-k",
 * "topk", "nucleus", "temp", "typ", ...; case-insensitive). Replaces params->samplers;
 * unknown names are an error (llama.cpp only warns). */
SIFT_API sift_status sift_sampling_set_samplers(sift_sampling_params *params, const char *names, sift_error *err);
/* --sampling-seq: the one-letter form ("edskypmxt"; a = adaptive_p, i = infill). */
SIFT_API sift_status sift_sampling_set_sampler_chars(sift_sampling_params *params, const char *chars,
                                                     sift_error *err);
/* "top_k" and 'k' for a type ("" and '?' for unknown ones). */
SIFT_API const char *sift_sampler_type_name(sift_sampler_type type);
SIFT_API char sift_sampler_type_char(sift_sampler_type type);
/* The chain common_sampler_init() would build (chain params: no_perf from params).
 * env->vocab is needed for DRY string breakers, infill and ignore_eos; env->default_seed is
 * not used (params->seed is). NULL on error (err says which parameter). */
SIFT_API sift_chain *sift_chain_from_params(const sift_sampling_params *params, const sift_chain_env *env,
                                            sift_error *err);
/* ---- the rules for sampling parameters (the CLI's flags and the server's fields alike) ----
 * One rule per numeric field: llama-server's JSON name, llama-cli's flag, the type and the
 * inclusive range (lo_open: lo itself excluded). Messages name both forms, e.g.
 * "'top_p' (--top-p) must be a number in [0, 1], got 2". */
#define SIFT_SAMPLING_MAX_N_PROBS 100
#define SIFT_SAMPLING_MAX_BIAS 1e6f /* |bias| limit; -inf (a ban) is allowed too */
typedef struct sift_sampling_rule {
    const char *name; /* "top_p" */
    const char *flag; /* "--top-p" */
    bool integer;
    bool lo_open;
    double lo, hi;
} sift_sampling_rule;
/* The rule for a JSON name or a flag; NULL if there is none. */
SIFT_API const sift_sampling_rule *sift_sampling_rule_find(const char *name_or_flag);
/* SIFT_OK if v obeys the rule (NaN never does); else SIFT_E_INVAL and the message. */
SIFT_API sift_status sift_sampling_rule_check(const sift_sampling_rule *rule, double v, sift_error *err);
/* Every field against its rule, plus: min_keep <= n_vocab and logit-bias tokens in
 * [0, n_vocab) (n_vocab <= 0: not known yet, those two unchecked), biases finite within
 * +-1e6 or -inf, list lengths. -1 windows are valid (see below). */
SIFT_API sift_status sift_sampling_params_validate(const sift_sampling_params *params, int32_t n_vocab, sift_error *err);
/* -1 in penalty_last_n / dry_penalty_last_n means the whole context, as in llama.cpp: the
 * front end calls this with its context size once it knows it (n_ctx <= 0: no change). */
SIFT_API void sift_sampling_params_set_context(sift_sampling_params *params, int32_t n_ctx);

/* The parameters in llama.cpp's common_params_sampling::print() layout; snprintf-like. */
SIFT_API int sift_sampling_params_print(const sift_sampling_params *params, char *buf, size_t cap);

/* ==== vocabulary view ======================================================================
 *
 * Samplers that need token texts (DRY's string breakers, grammar) get this plain view at
 * creation instead of reaching into the model layer. The model fills one in with
 * sift_vocab_view_get(); tests and other front ends can build their own.
 */
#define SIFT_TOKEN_ATTR_NORMAL  0x01u
#define SIFT_TOKEN_ATTR_CONTROL 0x02u
#define SIFT_TOKEN_ATTR_BYTE    0x04u /* SentencePiece byte-fallback token <0xXX> */
#define SIFT_TOKEN_ATTR_USER    0x08u /* user-defined */
#define SIFT_TOKEN_ATTR_UNKNOWN 0x10u
#define SIFT_TOKEN_ATTR_EOG     0x20u /* ends generation (EOS, EOT, ...) */
#define SIFT_TOKEN_ATTR_SUPPRESS 0x40u /* the model asks that it never be sampled (tokenizer.ggml.suppress_tokens):
                                          sift_chain_from_params bans it, as common_sampler_init does */

typedef struct sift_vocab_view {
    int32_t n_tokens;
    /* piece[i], piece_len[i]: the bytes token i stands for in text, as llama.cpp's
     * token_to_piece(special = true) gives them (SentencePiece "▁" already turned into a
     * space, byte tokens into their byte, BPE byte-level mapping undone). */
    const char *const *piece;
    const uint32_t *piece_len;
    const uint8_t *attr;   /* SIFT_TOKEN_ATTR_* per token */
    /* Tokenize text without special tokens and without BOS; returns the number of tokens
     * (or the negative number needed when cap is too small). May be NULL. */
    int32_t (*tokenize)(void *ctx, const char *text, size_t len, sift_token *out, int32_t cap);
    void *tokenize_ctx;
    /* 0, or a number naming these exact token texts and attributes for the life of the
     * process: no other content ever gets it (sift_vocab_view_get gives each loaded
     * vocabulary its own). Grammar samplers then recognize a vocabulary they have already
     * prepared without comparing every token text. A hand-made view leaves it 0. */
    uint64_t identity;
} sift_vocab_view;

/* ==== GGUF =================================================================================
 *
 * A validating, memory-mapped reader of GGUF v2/v3 files (the format of llama.cpp models).
 * sift_gguf_open() maps the file, checks every byte it will ever hand out (counts against
 * the bytes left, string lengths, nested arrays, tensor shapes, types, row sizes, data
 * offsets, alignment, duplicates) and only then returns a handle; everything after that is
 * a plain lookup that cannot fail on file contents. A bad file gives NULL and a message
 * naming the field and the byte offset, e.g.
 *   "gguf: tensor 6 'blk.0.ffn_down.weight': type q8_0 has 172 elements per row, not a
 *    multiple of block size (32) (at offset 11798)".
 * GGUF v1 and versions above 3 are refused with a message that says so.
 *
 * Ownership: the handle owns the mapping and a copy of the metadata. Metadata strings are
 * copied and NUL-terminated (their length is also given, for strings holding NUL bytes);
 * numeric arrays are copied to aligned native arrays. Tensor data is not copied: tensor
 * data pointers point into the mapping. Every pointer a sift_gguf_* function returns is
 * valid until sift_gguf_close(). A handle is read-only after opening and may be shared
 * between threads.
 *
 * Metadata values are reached as borrowed `const sift_gguf_value *` views, so nested
 * arrays (arrays of arrays, allowed by the spec) are read with the same functions as
 * top-level values. Typed getters check the type exactly (a u64 is not read as a u32);
 * sift_gguf_value_int() accepts any integer type for callers that do not care.
 * Tensor shapes follow ggml: ne[0] is the row length (the fastest-varying dimension),
 * unused dimensions are 1, nb[] are byte strides.
 */
typedef struct sift_gguf sift_gguf;
typedef struct sift_gguf_value sift_gguf_value;

/* Metadata value types; the numbers are the file's. */
typedef enum sift_gguf_type {
    SIFT_GGUF_UINT8 = 0,
    SIFT_GGUF_INT8 = 1,
    SIFT_GGUF_UINT16 = 2,
    SIFT_GGUF_INT16 = 3,
    SIFT_GGUF_UINT32 = 4,
    SIFT_GGUF_INT32 = 5,
    SIFT_GGUF_FLOAT32 = 6,
    SIFT_GGUF_BOOL = 7,
    SIFT_GGUF_STRING = 8,
    SIFT_GGUF_ARRAY = 9,
    SIFT_GGUF_UINT64 = 10,
    SIFT_GGUF_INT64 = 11,
    SIFT_GGUF_FLOAT64 = 12,
    SIFT_GGUF_TYPE_COUNT = 13,
} sift_gguf_type;

/* Tensor element types; the numbers are ggml's (gaps are types ggml removed). sift can
 * dequantize F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K; the reader
 * knows the block layout of all of them, so files holding other types still open. */
typedef enum sift_tensor_type {
    SIFT_TYPE_F32 = 0,
    SIFT_TYPE_F16 = 1,
    SIFT_TYPE_Q4_0 = 2,
    SIFT_TYPE_Q4_1 = 3,
    SIFT_TYPE_Q5_0 = 6,
    SIFT_TYPE_Q5_1 = 7,
    SIFT_TYPE_Q8_0 = 8,
    SIFT_TYPE_Q8_1 = 9,
    SIFT_TYPE_Q2_K = 10,
    SIFT_TYPE_Q3_K = 11,
    SIFT_TYPE_Q4_K = 12,
    SIFT_TYPE_Q5_K = 13,
    SIFT_TYPE_Q6_K = 14,
    SIFT_TYPE_Q8_K = 15,
    SIFT_TYPE_IQ2_XXS = 16,
    SIFT_TYPE_IQ2_XS = 17,
    SIFT_TYPE_IQ3_XXS = 18,
    SIFT_TYPE_IQ1_S = 19,
    SIFT_TYPE_IQ4_NL = 20,
    SIFT_TYPE_IQ3_S = 21,
    SIFT_TYPE_IQ2_S = 22,
    SIFT_TYPE_IQ4_XS = 23,
    SIFT_TYPE_I8 = 24,
    SIFT_TYPE_I16 = 25,
    SIFT_TYPE_I32 = 26,
    SIFT_TYPE_I64 = 27,
    SIFT_TYPE_F64 = 28,
    SIFT_TYPE_IQ1_M = 29,
    SIFT_TYPE_BF16 = 30,
    SIFT_TYPE_TQ1_0 = 34,
    SIFT_TYPE_TQ2_0 = 35,
    SIFT_TYPE_MXFP4 = 39,
    SIFT_TYPE_NVFP4 = 40,
    SIFT_TYPE_Q1_0 = 41,
    SIFT_TYPE_Q2_0 = 42,
    SIFT_TYPE_COUNT = 43,
} sift_tensor_type;

/* ggml's name of a tensor type ("q4_K", "bf16"), or NULL for a number that is no type. */
SIFT_API const char *sift_type_name(int type);
/* Values per block (1 for F32/F16/BF16, 32 for Q8_0, 256 for the K-quants); 0 if unknown. */
SIFT_API int64_t sift_type_block_size(int type);
/* Bytes per block (4 for F32, 34 for Q8_0, 144 for Q4_K); 0 if unknown. */
SIFT_API size_t sift_type_block_bytes(int type);
/* The file's name of a metadata type ("u32", "str", "arr", as gguf-dump), "?" if unknown. */
SIFT_API const char *sift_gguf_type_name(int type);

/* One tensor as the file describes it. Borrowed from the handle. */
typedef struct sift_gguf_tensor {
    const char *name;        /* NUL-terminated, at most 63 bytes */
    sift_tensor_type type;
    uint32_t n_dims;         /* 0..4 as written in the file */
    int64_t ne[4];           /* elements per dimension, ne[0] = row length; unused = 1 */
    uint64_t nb[4];          /* byte strides: nb[0] = block bytes, nb[1] = row bytes, ... */
    uint64_t offset;         /* byte offset from the start of the data section */
    uint64_t file_offset;    /* byte offset from the start of the file */
    uint64_t size;           /* bytes of data */
    const void *data;        /* the data, inside the mapping (aligned to the file's alignment) */
} sift_gguf_tensor;

/* Map and validate a GGUF file. Returns NULL and fills *err (SIFT_E_IO, SIFT_E_FORMAT,
 * SIFT_E_UNSUPPORTED for v1/newer versions, SIFT_E_NOMEM) on failure. Free with
 * sift_gguf_close(). */
SIFT_API sift_gguf *sift_gguf_open(const char *path, sift_error *err);
/* The same over bytes already in memory; the handle borrows them (they must outlive it). */
SIFT_API sift_gguf *sift_gguf_open_buffer(const void *data, size_t size, sift_error *err);
/* Unmap and free; NULL is allowed. Invalidates every pointer obtained from the handle. */
SIFT_API void sift_gguf_close(sift_gguf *g);

SIFT_API uint32_t sift_gguf_version(const sift_gguf *g);      /* 2 or 3 */
SIFT_API uint64_t sift_gguf_file_size(const sift_gguf *g);    /* bytes */
SIFT_API uint32_t sift_gguf_alignment(const sift_gguf *g);    /* general.alignment or 32 */
SIFT_API uint64_t sift_gguf_data_offset(const sift_gguf *g);  /* start of the tensor data */

/* -- metadata -- */
SIFT_API int64_t sift_gguf_n_kv(const sift_gguf *g);
/* Index of `key`, or -1 if absent (a hash lookup). */
SIFT_API int64_t sift_gguf_find_key(const sift_gguf *g, const char *key);
/* Key of pair i (NUL-terminated), NULL if i is out of range. */
SIFT_API const char *sift_gguf_key(const sift_gguf *g, int64_t i);
/* Value of pair i, NULL if out of range. */
SIFT_API const sift_gguf_value *sift_gguf_kv_value(const sift_gguf *g, int64_t i);
/* Value of `key`, NULL if absent. */
SIFT_API const sift_gguf_value *sift_gguf_get(const sift_gguf *g, const char *key);

/* The value's type (SIFT_GGUF_ARRAY for arrays). */
SIFT_API sift_gguf_type sift_gguf_value_type(const sift_gguf_value *v);
/* Exact-type scalar getters: SIFT_OK, or SIFT_E_INVAL (and *out untouched) when the value
 * has another type. */
SIFT_API sift_status sift_gguf_value_u8(const sift_gguf_value *v, uint8_t *out);
SIFT_API sift_status sift_gguf_value_i8(const sift_gguf_value *v, int8_t *out);
SIFT_API sift_status sift_gguf_value_u16(const sift_gguf_value *v, uint16_t *out);
SIFT_API sift_status sift_gguf_value_i16(const sift_gguf_value *v, int16_t *out);
SIFT_API sift_status sift_gguf_value_u32(const sift_gguf_value *v, uint32_t *out);
SIFT_API sift_status sift_gguf_value_i32(const sift_gguf_value *v, int32_t *out);
SIFT_API sift_status sift_gguf_value_u64(const sift_gguf_value *v, uint64_t *out);
SIFT_API sift_status sift_gguf_value_i64(const sift_gguf_value *v, int64_t *out);
SIFT_API sift_status sift_gguf_value_f32(const sift_gguf_value *v, float *out);
SIFT_API sift_status sift_gguf_value_f64(const sift_gguf_value *v, double *out);
SIFT_API sift_status sift_gguf_value_bool(const sift_gguf_value *v, bool *out);
/* Any scalar's bytes as they are laid out in an array of its type (host order; bool as one
 * byte 0/1), e.g. to print or copy a value of any type; NULL for strings and arrays. */
SIFT_API const void *sift_gguf_value_scalar(const sift_gguf_value *v);
/* Any integer type (and bool) as int64; SIFT_E_INVAL for other types or a u64 > INT64_MAX. */
SIFT_API sift_status sift_gguf_value_int(const sift_gguf_value *v, int64_t *out);
/* f32 or f64 as double; SIFT_E_INVAL otherwise. */
SIFT_API sift_status sift_gguf_value_float(const sift_gguf_value *v, double *out);
/* A string value: NUL-terminated, its byte length in *len (may be NULL). NULL if the value
 * is not a string. */
SIFT_API const char *sift_gguf_value_str(const sift_gguf_value *v, size_t *len);

/* Arrays. The element type (SIFT_GGUF_ARRAY for an array of arrays), or -1 if v is not
 * an array. */
SIFT_API int sift_gguf_array_type(const sift_gguf_value *v);
/* Element count, 0 if v is not an array. */
SIFT_API uint64_t sift_gguf_array_n(const sift_gguf_value *v);
/* Arrays of numbers or bools: the n elements as a native, aligned C array (uint8_t,
 * int32_t, float, ..., bool as uint8_t 0/1). NULL for arrays of strings or arrays, for
 * non-arrays, and for empty arrays. */
SIFT_API const void *sift_gguf_array_data(const sift_gguf_value *v);
/* Element i of an array of strings (NUL-terminated, length in *len), NULL if v is not a
 * string array or i >= n. */
SIFT_API const char *sift_gguf_array_str(const sift_gguf_value *v, uint64_t i, size_t *len);
/* Element i of an array of arrays, NULL if v is not one or i >= n. */
SIFT_API const sift_gguf_value *sift_gguf_array_elem(const sift_gguf_value *v, uint64_t i);

/* Key-based conveniences for loaders: SIFT_OK; or SIFT_E_FORMAT with a message naming the
 * key when it is absent or has another type. */
SIFT_API sift_status sift_gguf_get_u32(const sift_gguf *g, const char *key, uint32_t *out, sift_error *err);
SIFT_API sift_status sift_gguf_get_f32(const sift_gguf *g, const char *key, float *out, sift_error *err);
SIFT_API sift_status sift_gguf_get_int(const sift_gguf *g, const char *key, int64_t *out, sift_error *err);
SIFT_API sift_status sift_gguf_get_str(const sift_gguf *g, const char *key, const char **out, sift_error *err);

/* -- tensors -- */
SIFT_API int64_t sift_gguf_n_tensors(const sift_gguf *g);
/* Tensor i in file order, NULL if out of range. */
SIFT_API const sift_gguf_tensor *sift_gguf_tensor_at(const sift_gguf *g, int64_t i);
/* Index of the tensor called `name`, or -1 (a hash lookup). */
SIFT_API int64_t sift_gguf_find_tensor(const sift_gguf *g, const char *name);
/* The tensor called `name`, or NULL. */
SIFT_API const sift_gguf_tensor *sift_gguf_tensor_by_name(const sift_gguf *g, const char *name);

/* ==== vocabulary & tokenizer ===============================================================
 *
 * A model's vocabulary, read from GGUF metadata, and its tokenizer: SentencePiece
 * ("llama": scores, byte fallback <0xXX>, a space added before the text), byte-level BPE
 * ("gpt2": merge ranks, the GPT-2 byte alphabet, the pre-tokenizer named by
 * tokenizer.ggml.pre) and WordPiece ("bert"). Every function reproduces llama.cpp's
 * function of the same name exactly: the same token ids for the same text and flags, the
 * same pieces, the same detokenized text (including its quirks, e.g. BPE vocabularies that
 * "clean up" " ," to "," when detokenizing).
 *
 * Special tokens (control, user-defined, unknown) are cut out of the text before the
 * tokenizer runs, longest first: user-defined tokens always, control tokens only with
 * parse_special = true. add_special adds the BOS/EOS (BERT: CLS/SEP) the vocabulary asks
 * for.
 *
 * A sift_vocab is read-only once loaded: any number of threads may use one at once.
 * Token ids outside [0, n_tokens) are rejected (returns say how), never read.
 */
typedef struct sift_vocab sift_vocab;

typedef enum sift_vocab_type { /* llama.cpp's numbering */
    SIFT_VOCAB_NONE = 0,
    SIFT_VOCAB_SPM = 1, /* SentencePiece, tokenizer.ggml.model = "llama" */
    SIFT_VOCAB_BPE = 2, /* BPE: byte-level ("gpt2"), or over characters, SentencePiece-style ("gemma4") */
    SIFT_VOCAB_WPM = 3, /* WordPiece, "bert" */
} sift_vocab_type;

/* llama.cpp's token attributes (llama_token_attr), as sift_vocab_token_attr returns them.
 * (The compact SIFT_TOKEN_ATTR_* flags of sift_vocab_view are a different, smaller set.) */
#define SIFT_VOCAB_ATTR_UNKNOWN      0x001u
#define SIFT_VOCAB_ATTR_UNUSED       0x002u
#define SIFT_VOCAB_ATTR_NORMAL       0x004u
#define SIFT_VOCAB_ATTR_CONTROL      0x008u
#define SIFT_VOCAB_ATTR_USER_DEFINED 0x010u
#define SIFT_VOCAB_ATTR_BYTE         0x020u
#define SIFT_VOCAB_ATTR_NORMALIZED   0x040u
#define SIFT_VOCAB_ATTR_LSTRIP       0x080u
#define SIFT_VOCAB_ATTR_RSTRIP       0x100u
#define SIFT_VOCAB_ATTR_SINGLE_WORD  0x200u

/* Load the vocabulary of a GGUF file (a model or a vocab-only file). NULL and *err on
 * failure: SIFT_E_IO, SIFT_E_FORMAT (a missing or mistyped tokenizer key, duplicate
 * tokens, ...), SIFT_E_UNSUPPORTED (a tokenizer or pre-tokenizer sift does not implement).
 * Free with sift_vocab_free. */
SIFT_API sift_vocab *sift_vocab_load(const char *path, sift_error *err);
/* The same from an open GGUF file; the vocabulary copies what it needs (the file may be
 * closed afterwards). */
SIFT_API sift_vocab *sift_vocab_from_gguf(const sift_gguf *gguf, sift_error *err);
SIFT_API void sift_vocab_free(sift_vocab *vocab);

SIFT_API sift_vocab_type sift_vocab_get_type(const sift_vocab *vocab);
/* tokenizer.ggml.model and .pre as the file names them ("" when absent). */
SIFT_API const char *sift_vocab_model_name(const sift_vocab *vocab);
SIFT_API const char *sift_vocab_pre_name(const sift_vocab *vocab);
SIFT_API int32_t sift_vocab_n_tokens(const sift_vocab *vocab);
/* Number of BPE merges (0 for other types). */
SIFT_API int64_t sift_vocab_n_merges(const sift_vocab *vocab);

/* Special tokens; SIFT_TOKEN_NULL (-1) when the vocabulary has none. */
SIFT_API sift_token sift_vocab_bos(const sift_vocab *vocab);
SIFT_API sift_token sift_vocab_eos(const sift_vocab *vocab);
SIFT_API sift_token sift_vocab_eot(const sift_vocab *vocab);
SIFT_API sift_token sift_vocab_eom(const sift_vocab *vocab);
SIFT_API sift_token sift_vocab_unk(const sift_vocab *vocab);
SIFT_API sift_token sift_vocab_sep(const sift_vocab *vocab);
SIFT_API sift_token sift_vocab_pad(const sift_vocab *vocab);
SIFT_API sift_token sift_vocab_nl(const sift_vocab *vocab);
/* Fill-in-the-middle tokens (llama.cpp's llama_vocab_fim_*): prefix, suffix, middle, pad,
 * repository and file separator. From tokenizer.ggml.fim_{pre,suf,mid,pad,rep,sep}_token_id,
 * the older prefix/suffix/middle_token_id keys, or else recognised by their text
 * ("<|fim_prefix|>", "<PRE>", "<fim-prefix>", ...). SIFT_TOKEN_NULL when the vocabulary has
 * none: a model without pre, suf and mid cannot infill (llama-server's /infill). */
SIFT_API sift_token sift_vocab_fim_pre(const sift_vocab *vocab);
SIFT_API sift_token sift_vocab_fim_suf(const sift_vocab *vocab);
SIFT_API sift_token sift_vocab_fim_mid(const sift_vocab *vocab);
SIFT_API sift_token sift_vocab_fim_pad(const sift_vocab *vocab);
SIFT_API sift_token sift_vocab_fim_rep(const sift_vocab *vocab);
SIFT_API sift_token sift_vocab_fim_sep(const sift_vocab *vocab);
/* Whether tokenize(add_special = true) adds BOS (CLS) first / EOS last. */
SIFT_API bool sift_vocab_add_bos(const sift_vocab *vocab);
SIFT_API bool sift_vocab_add_eos(const sift_vocab *vocab);
/* The end-of-generation set (EOS, EOT, EOM, <|im_end|>, ... as llama.cpp builds it), sorted
 * ascending; *n receives its size. The array belongs to the vocabulary. */
SIFT_API const sift_token *sift_vocab_eog(const sift_vocab *vocab, int32_t *n);
SIFT_API bool sift_vocab_is_eog(const sift_vocab *vocab, sift_token token);
/* tokenizer.ggml.suppress_tokens: ids the model asks never to be sampled (Gemma 4's image and
 * audio placeholders), in the file's order, ids outside the vocabulary dropped (llama.cpp's
 * llama_vocab_get_suppress_tokens); NULL and *n = 0 when there are none. */
SIFT_API const sift_token *sift_vocab_suppress_tokens(const sift_vocab *vocab, int32_t *n);
SIFT_API bool sift_vocab_is_control(const sift_vocab *vocab, sift_token token);

/* A token's text as stored in the vocabulary (SentencePiece "▁", byte-level "Ġ" and all);
 * NUL-terminated, length in *len (may be NULL). NULL for an id out of range. */
SIFT_API const char *sift_vocab_token_text(const sift_vocab *vocab, sift_token token, size_t *len);
/* Its score (0 when the file has none; NaN for an id out of range). */
SIFT_API float sift_vocab_token_score(const sift_vocab *vocab, sift_token token);
/* Its SIFT_VOCAB_ATTR_* bits (0 for an id out of range). */
SIFT_API uint32_t sift_vocab_token_attr(const sift_vocab *vocab, sift_token token);

/* Tokenize text[0..len) into tokens[0..cap). Returns the number of tokens; if that is more
 * than cap, returns minus the number needed and the contents of tokens are unspecified
 * (call again with a larger buffer). INT32_MIN when the result would not fit in int32_t,
 * when len > INT32_MAX, on an allocation failure, or for NULL vocab/text with len > 0.
 * add_special: add BOS/EOS as sift_vocab_add_bos/add_eos say (BERT: CLS and SEP).
 * parse_special: turn the text of control tokens ("<s>", "<|im_end|>") into those tokens;
 * without it they are tokenized as plain text (user-defined tokens are always matched). */
SIFT_API int32_t sift_tokenize(const sift_vocab *vocab, const char *text, size_t len, sift_token *tokens,
                               int32_t cap, bool add_special, bool parse_special);

/* sift_tokenize with its switches as bits, and one more. */
#define SIFT_TOKENIZE_ADD_SPECIAL 1u   /* add_special */
#define SIFT_TOKENIZE_PARSE_SPECIAL 2u /* parse_special */
/* The text continues earlier text (a model's output after its prompt, an instance checked
 * against a grammar), so it does not start one: SentencePiece vocabularies with
 * add_space_prefix give the first piece no leading space. llama.cpp has no such switch
 * (llama_tokenize always treats its text as a start); other vocabularies ignore it. */
#define SIFT_TOKENIZE_CONTINUATION 4u
/* As sift_tokenize; INT32_MIN also for unknown flag bits. */
SIFT_API int32_t sift_tokenize_ex(const sift_vocab *vocab, const char *text, size_t len, sift_token *tokens,
                                  int32_t cap, uint32_t flags);

/* The text of one token into buf[0..len) (not NUL-terminated). Returns the byte count, or
 * minus the size needed when len is too small; 0 for an id out of range. special = false
 * gives "" for control and unknown tokens; lstrip = n removes up to n leading spaces. */
SIFT_API int32_t sift_token_to_piece(const sift_vocab *vocab, sift_token token, char *buf, int32_t len,
                                     int32_t lstrip, bool special);

/* The text of a token sequence into text[0..cap) (not NUL-terminated): the pieces
 * concatenated, SentencePiece's leading space removed, BPE clean-up applied where the
 * vocabulary asks for it. remove_special drops a leading BOS and a trailing EOS that
 * tokenize would have added; unparse_special renders control tokens as their text.
 * Returns the byte count, or minus the size needed when cap is too small; INT32_MIN for
 * an id out of range or n_tokens < 0. */
SIFT_API int32_t sift_detokenize(const sift_vocab *vocab, const sift_token *tokens, int32_t n_tokens, char *text,
                                 int32_t cap, bool remove_special, bool unparse_special);

/* Fill *view with this vocabulary's pieces (token_to_piece with special = true), compact
 * attributes and a tokenize callback (no special tokens, no BOS). The arrays belong to the
 * vocabulary and live as long as it does. SIFT_E_INVAL for NULL arguments. */
SIFT_API sift_status sift_vocab_view_get(const sift_vocab *vocab, sift_vocab_view *view);

/* ==== model & runtime ======================================================================
 *
 * A small llama-family runtime, enough to drive the samplers end to end on real GGUF models
 * the way llama.cpp's main program does: load a model, decode batches of tokens, read the
 * logits, sample, decode the chosen token, and so on.
 *
 * Objects. A sift_model is the weights (used in place from the memory-mapped file), the
 * hyperparameters and the vocabulary; it is read-only after loading and may be shared by
 * any number of contexts and threads. A sift_context is one user of a model: its KV cache,
 * its thread pool, its scratch buffers and the logits of the last decode; one thread at a
 * time. Everything a context needs is allocated when it is created (the logits buffer
 * grows only when a batch asks for more output rows than any batch before it), so the
 * per-token path allocates nothing.
 *
 * Architectures: llama (llama 1/2/3, mistral, tinyllamas), qwen2 (QKV bias), qwen3 (q/k
 * RMSNorm per head): RMSNorm, RoPE (llama.cpp's "normal" mode for llama, "neox" for the
 * qwens; freq_base and linear scaling from the GGUF), grouped-query attention, SwiGLU,
 * tied or separate output head. Weight types: F32, F16 (activations rounded to F16 before
 * the product, as ggml does), Q8_0, Q4_0 (activations quantized to Q8_0), Q4_K, Q6_K
 * (activations quantized to Q8_K), with AVX2 / AVX-512 dot products chosen at run time and
 * a scalar fallback; other dequantizable types (BF16, Q4_1, Q5_0, Q5_1, Q5_K) run through
 * a slower dequantize-then-dot path.
 *
 * Batches have llama_batch's shape: n_tokens entries of (token, position, sequence ids,
 * "give me logits here"). Several sequences may be decoded in one call (continuous
 * batching); a token listed with several sequence ids is stored in each of them (a shared
 * prompt prefix), its attention uses the first one's history.
 *
 * KV cache. The cache holds n_seq_max independent sequences of n_ctx / n_seq_max cells each
 * (llama.cpp's non-unified cache; llama-server's per-slot context). In a sequence, cell i
 * holds position i, so attention for a token at position p reads cells 0..p in order, and
 * a sequence's logits never depend on which other sequences share the batch or the cache:
 * the same bits alone, batched, or with any thread count. Positions of a sequence must
 * grow: a batch may only add positions after the sequence's last one (remove a tail with
 * sift_kv_seq_rm to rewrite it); gaps are allowed and never attended to.
 *
 * Errors. sift_decode checks the whole batch before touching the cache: on any error
 * (bad token id, sequence id, position, a full sequence) nothing has changed.
 */
typedef struct sift_model sift_model;
typedef struct sift_context sift_context;

/* Load a GGUF model: hyperparameters, every tensor's presence, type and shape checked, the
 * vocabulary. NULL and *err on failure (SIFT_E_IO, SIFT_E_FORMAT naming the key or tensor,
 * SIFT_E_UNSUPPORTED for another architecture or a weight type sift cannot multiply).
 * Free with sift_model_free() after every context using it. */
SIFT_API sift_model *sift_model_load(const char *path, sift_error *err);
SIFT_API void sift_model_free(sift_model *model);

typedef struct sift_model_info {
    const char *arch;       /* general.architecture: "llama", "qwen2", "qwen3" */
    const char *name;       /* general.name or "" */
    int32_t n_vocab;
    int32_t n_ctx_train;
    int32_t n_embd;
    int32_t n_layer;
    int32_t n_head;
    int32_t n_head_kv;
    int32_t n_ff;
    int32_t head_dim;       /* per-head size of q/k/v */
    int32_t n_rot;          /* dimensions RoPE rotates */
    bool rope_neox;         /* RoPE pairs (i, i + n_rot/2) instead of (2i, 2i + 1) */
    float rope_freq_base;
    float rope_freq_scale; /* 1 / linear scaling factor */
    float rms_eps;
    bool tied_output;       /* the output head is token_embd */
    int64_t n_params;       /* weights, all tensors */
    uint64_t n_bytes;       /* bytes of tensor data */
    sift_tensor_type main_type; /* the type most weight bytes have (F32, F16, Q4_K, ...) */
} sift_model_info;
/* The model's hyperparameters (strings borrowed from the model). */
SIFT_API void sift_model_get_info(const sift_model *model, sift_model_info *info);
/* The vocabulary (borrowed: lives as long as the model). */
SIFT_API const sift_vocab *sift_model_vocab(const sift_model *model);
SIFT_API int32_t sift_model_n_vocab(const sift_model *model);
/* The model's chat template, as llama.cpp's llama_model_chat_template: name NULL (or "") the
 * GGUF's tokenizer.chat_template, else tokenizer.chat_template.<name> (a named variant such as
 * "tool_use"). Borrowed: lives as long as the model. NULL when the file has none. */
SIFT_API const char *sift_model_chat_template(const sift_model *model, const char *name);
/* "llama 292.8K F32" (arch, parameter count, main type) into buf; snprintf-like. */
SIFT_API int sift_model_desc(const sift_model *model, char *buf, size_t cap);
/* What sift runs for a general.architecture name ("gemma3": "sliding-window layers (5 of 6,
 * own RoPE base), q/k RMSNorm, ..."), a static string; NULL when sift cannot run it. */
SIFT_API const char *sift_arch_features(const char *arch);
/* Whether the model's sequences carry a recurrent state beside the KV cache (qwen35's Gated
 * DeltaNet layers; llama.cpp's llama_model_is_hybrid). Such a state holds the whole sequence
 * and cannot be edited by position: sift_kv_seq_rm refuses a partial removal
 * (SIFT_E_STATE), sift_kv_seq_add refuses any shift, sift_kv_seq_cp copies whole sequences
 * only, the sequence state files refuse them, and speculative decoding does not start. */
SIFT_API bool sift_model_is_recurrent(const sift_model *model);

/* Which kernels a context uses. AUTO takes the best this CPU supports. The x86-64 levels
 * exist in an x86-64 build, the aarch64 ones in an aarch64 build; SCALAR everywhere. */
typedef enum sift_isa {
    SIFT_ISA_AUTO = 0,
    SIFT_ISA_SCALAR = 1, /* portable C, the reference the SIMD kernels are tested against */
    SIFT_ISA_AVX2 = 2,   /* x86-64: AVX2 + FMA + F16C + BMI2 */
    SIFT_ISA_AVX512 = 3, /* x86-64: AVX-512 F/BW/VL/DQ, and all of AVX2's */
    SIFT_ISA_NEON = 4,   /* aarch64: Advanced SIMD (ARMv8.0, every aarch64 CPU) */
    SIFT_ISA_NEON_DOTPROD = 5, /* aarch64: NEON + SDOT/UDOT (ARMv8.2 dotprod; i8mm used where present) */
} sift_isa;
/* The best ISA this CPU supports, and a name for one ("avx512", "neon-dotprod", ...). */
SIFT_API sift_isa sift_isa_best(void);
SIFT_API const char *sift_isa_name(sift_isa isa);

typedef struct sift_context_params {
    uint32_t n_ctx;          /* KV cells in all: 0 = the model's n_ctx_train */
    uint32_t n_batch;        /* most tokens in one sift_decode call (default 512) */
    uint32_t n_seq_max;      /* sequence ids 0..n_seq_max-1, each with n_ctx / n_seq_max cells (default 1) */
    int32_t n_threads;       /* threads for batches of one token (default 4, capped at the CPUs online) */
    int32_t n_threads_batch; /* threads for larger batches (default: as n_threads) */
    sift_isa isa;            /* kernels (default AUTO) */
} sift_context_params;
SIFT_API sift_context_params sift_context_default_params(void);

/* A context for model (which must outlive it): allocates the KV cache and all scratch
 * memory and starts the threads. NULL and *err on failure (SIFT_E_INVAL for a bad
 * parameter, SIFT_E_UNSUPPORTED for an ISA this CPU lacks, SIFT_E_NOMEM). */
SIFT_API sift_context *sift_context_new(const sift_model *model, sift_context_params params, sift_error *err);
SIFT_API void sift_context_free(sift_context *ctx);
SIFT_API const sift_model *sift_context_model(const sift_context *ctx);
SIFT_API uint32_t sift_n_ctx(const sift_context *ctx);      /* all cells */
SIFT_API uint32_t sift_n_ctx_seq(const sift_context *ctx);  /* cells (positions) per sequence */
SIFT_API uint32_t sift_n_batch(const sift_context *ctx);
SIFT_API uint32_t sift_n_seq_max(const sift_context *ctx);
SIFT_API sift_isa sift_context_isa(const sift_context *ctx); /* the ISA actually used */
/* Change the thread counts (1..256); the pool is resized on the next decode. */
SIFT_API sift_status sift_set_n_threads(sift_context *ctx, int32_t n_threads, int32_t n_threads_batch);

/* -- batches -- */
typedef int32_t sift_pos;
typedef int32_t sift_seq_id;

/* llama_batch's shape. Arrays hold n_tokens entries. pos may be NULL (each sequence goes on
 * after its last position), n_seq_id/seq_id may be NULL (every token in sequence 0), logits
 * may be NULL (only the last token gets logits). A batch made by sift_batch_init owns its
 * arrays; a caller may also point the fields at arrays of its own. */
typedef struct sift_batch {
    int32_t n_tokens;
    sift_token *token;      /* token ids */
    sift_pos *pos;          /* positions */
    int32_t *n_seq_id;      /* how many sequences each token belongs to */
    sift_seq_id **seq_id;   /* seq_id[i][0..n_seq_id[i]) */
    int8_t *logits;         /* nonzero: compute logits for this token */
    int32_t capacity;       /* entries allocated (sift_batch_init), for sift_batch_add */
    int32_t seq_capacity;   /* sequence ids per entry allocated */
} sift_batch;

/* Allocate a batch for n_tokens_max tokens of up to n_seq_max sequence ids each; n_tokens
 * = 0. SIFT_E_INVAL for sizes < 1, SIFT_E_NOMEM. Free with sift_batch_free. */
SIFT_API sift_status sift_batch_init(sift_batch *batch, int32_t n_tokens_max, int32_t n_seq_max);
SIFT_API void sift_batch_free(sift_batch *batch);
/* n_tokens = 0. */
SIFT_API void sift_batch_clear(sift_batch *batch);
/* Append one token (common_batch_add). SIFT_E_INVAL when the batch is full or has no room
 * for n_seq sequence ids. */
SIFT_API sift_status sift_batch_add(sift_batch *batch, sift_token token, sift_pos pos, const sift_seq_id *seq_ids,
                                    int32_t n_seq, bool logits);

/* Run the model on a batch: every token's K/V goes into the cache of each of its sequences,
 * and the logits of the tokens that asked for them are kept until the next decode.
 * SIFT_OK, or an error with nothing changed: SIFT_E_INVAL (empty or too large batch, a
 * token id, sequence id or position out of range), SIFT_E_STATE (a position not after its
 * sequence's last one, or past the sequence's cells: the message says which). */
SIFT_API sift_status sift_decode(sift_context *ctx, const sift_batch *batch, sift_error *err);

/* Logits of batch entry i of the last decode (n_vocab floats, borrowed until the next
 * decode); i < 0 counts from the last output (-1 = the last token that asked for logits).
 * NULL when that entry did not ask for logits or i is out of range. The context owns the
 * buffer; callers may modify it in place (classifier-free guidance does). */
SIFT_API float *sift_get_logits_ith(sift_context *ctx, int32_t i);
/* All output rows of the last decode, in batch order: [sift_n_outputs][n_vocab]. */
SIFT_API float *sift_get_logits(sift_context *ctx);
SIFT_API int32_t sift_n_outputs(const sift_context *ctx);

/* -- embeddings (llama_set_embeddings, llama_get_embeddings_ith / _seq) --
 * With embeddings on, a decode also keeps the final hidden state (after the output norm,
 * the vector the output head multiplies: n_embd floats) of the tokens it outputs.
 * Pooling (llama_pooling_type) combines each sequence's rows of the batch into one vector:
 * NONE keeps the rows of the tokens that asked for logits (sift_get_embeddings_ith); MEAN
 * (their average), CLS (the sequence's first token in the batch) and LAST (its last one)
 * make every token of the batch an output, skip the output head (no logits then) and give
 * one vector per sequence (sift_get_embeddings_seq). A pooled sequence must be decoded in
 * one batch, as in llama.cpp. No normalization: callers normalize (llama-server: L2). */
typedef enum sift_pooling_type {
    SIFT_POOLING_TYPE_UNSPECIFIED = -1,
    SIFT_POOLING_TYPE_NONE = 0,
    SIFT_POOLING_TYPE_MEAN = 1,
    SIFT_POOLING_TYPE_CLS = 2,
    SIFT_POOLING_TYPE_LAST = 3,
    SIFT_POOLING_TYPE_RANK = 4, /* classifier heads: not supported (SIFT_E_UNSUPPORTED) */
} sift_pooling_type;
/* Turn embeddings on or off for the next decodes (llama_set_embeddings), and choose the
 * pooling (llama_context_params.pooling_type; UNSPECIFIED means NONE: a llama-family model
 * declares none). SIFT_E_INVAL for an unknown type, SIFT_E_UNSUPPORTED for RANK. Nothing
 * is allocated: the buffers exist from sift_context_new. */
SIFT_API sift_status sift_set_embeddings(sift_context *ctx, bool embeddings, sift_pooling_type pooling);
SIFT_API bool sift_get_embeddings_enabled(const sift_context *ctx);
SIFT_API sift_pooling_type sift_get_pooling_type(const sift_context *ctx);
/* The hidden state of batch entry i of the last decode (n_embd floats, borrowed until the
 * next decode; i < 0 counts from the last output). NULL without embeddings, or when that
 * entry was not an output. */
SIFT_API float *sift_get_embeddings_ith(sift_context *ctx, int32_t i);
/* The pooled vector of sequence seq in the last decode (n_embd floats). NULL with pooling
 * NONE, without embeddings, or when the last batch had no token of seq. */
SIFT_API float *sift_get_embeddings_seq(sift_context *ctx, sift_seq_id seq);

/* -- KV cache: sequences (llama_memory_seq_*) -- */
/* Remove positions [p0, p1) of sequence seq (seq < 0: of every sequence; p0 < 0: from 0;
 * p1 < 0: to the end). Removing a tail lets the sequence go on from p0. SIFT_E_INVAL for a
 * sequence id out of range. */
SIFT_API sift_status sift_kv_seq_rm(sift_context *ctx, sift_seq_id seq, sift_pos p0, sift_pos p1);
/* Copy positions [p0, p1) of src into dst (p0 < 0: from 0; p1 < 0: to the end),
 * overwriting what dst held there; dst's last position becomes at least src's last copied
 * one. For forking a prompt into several continuations. */
SIFT_API sift_status sift_kv_seq_cp(sift_context *ctx, sift_seq_id src, sift_seq_id dst, sift_pos p0, sift_pos p1);
/* Empty every sequence except seq. */
SIFT_API sift_status sift_kv_seq_keep(sift_context *ctx, sift_seq_id seq);
/* Add delta to the positions [p0, p1) of seq (llama-cli's context shift: remove a middle
 * part, then move the tail back): K is rotated by delta so attention sees the new
 * positions; positions that become negative are removed, cells moved onto are replaced.
 * SIFT_E_STATE when a position would pass the sequence's cells. */
SIFT_API sift_status sift_kv_seq_add(sift_context *ctx, sift_seq_id seq, sift_pos p0, sift_pos p1, sift_pos delta);
/* Empty the whole cache. */
SIFT_API void sift_kv_clear(sift_context *ctx);
/* The sequence's smallest / largest position in the cache, -1 when it is empty. */
SIFT_API sift_pos sift_kv_seq_pos_min(const sift_context *ctx, sift_seq_id seq);
SIFT_API sift_pos sift_kv_seq_pos_max(const sift_context *ctx, sift_seq_id seq);
/* Cells in use, over every sequence. */
SIFT_API int32_t sift_kv_n_used(const sift_context *ctx);

/* -- one sequence's state in a file (llama_state_seq_save_file / _load_file) -- */
/* Write sequence seq's KV cells and the n_tokens token ids they hold (the caller's record,
 * at most sift_n_ctx_seq) to path. Returns the bytes written, 0 on error (err says why). */
SIFT_API size_t sift_state_seq_save_file(sift_context *ctx, const char *path, sift_seq_id seq, const sift_token *tokens,
                                         size_t n_tokens, sift_error *err);
/* Replace sequence seq's cells with a file written by sift_state_seq_save_file for a model of
 * the same shape; its token ids go to tokens_out (room for cap), their count to
 * *n_tokens_out. Returns the bytes read, 0 on error: a file that is not one, from another
 * model, with counts past the context, or of the wrong size leaves the sequence unchanged
 * (SIFT_E_FORMAT; SIFT_E_INVAL for too small a cap); a read error in the cells empties it. */
SIFT_API size_t sift_state_seq_load_file(sift_context *ctx, const char *path, sift_seq_id seq, sift_token *tokens_out, size_t cap,
                                         size_t *n_tokens_out, sift_error *err);

/* -- perf (llama_perf_context) -- */
typedef struct sift_context_perf {
    double t_prompt_ms;  /* time in decodes of more than one token */
    int64_t n_prompt;    /* tokens in those */
    double t_eval_ms;    /* time in decodes of one token */
    int64_t n_eval;      /* tokens in those */
    int64_t n_decode;    /* sift_decode calls that succeeded */
} sift_context_perf;
SIFT_API sift_context_perf sift_context_get_perf(const sift_context *ctx);
SIFT_API void sift_context_perf_reset(sift_context *ctx);

/* -- control vectors -- */
/* Per-layer vectors added to the residual stream after each layer (llama.cpp's control
 * vectors, `--control-vector`). A file is a GGUF whose tensors are `direction.<layer>`, F32,
 * n_embd values each, layer >= 1 (what llama.cpp's cvector-generator writes). Several files,
 * each times its scale (scales NULL: all 1), are summed, as llama.cpp's common code does.
 * Errors: the file's (SIFT_E_IO, SIFT_E_FORMAT), SIFT_E_FORMAT for a tensor that is not a
 * direction, for differing n_embd or non-finite values, SIFT_E_INVAL, SIFT_E_NOMEM. */
typedef struct sift_control_vector sift_control_vector;
SIFT_API sift_status sift_control_vector_load(const char *const *paths, const float *scales, int32_t n,
                                              sift_control_vector **out, sift_error *err);
/* The summed vectors as llama_set_adapter_cvec takes them: layer 1's n_embd values first,
 * then layer 2's, ...; len floats in all (borrowed). */
SIFT_API const float *sift_control_vector_data(const sift_control_vector *cv);
SIFT_API size_t sift_control_vector_len(const sift_control_vector *cv);
SIFT_API int32_t sift_control_vector_n_embd(const sift_control_vector *cv);
SIFT_API void sift_control_vector_free(sift_control_vector *cv);
/* llama_set_adapter_cvec's semantics: data (len floats, layer 1 first as above; copied) is
 * added to the residual stream after layer il for il_start <= il <= il_end (0-based layers;
 * layer 0 never gets one; layers past len get none). data NULL: no vector (the default; it
 * then costs nothing). SIFT_E_INVAL when n_embd is not the model's or a value is not
 * finite. Takes effect from the next sift_decode; the KV cache is not recomputed. */
SIFT_API sift_status sift_context_set_control_vector(sift_context *ctx, const float *data, size_t len, int32_t n_embd,
                                                     int32_t il_start, int32_t il_end, sift_error *err);

/* -- quantization (`sift quantize`) -- */
/* Write a copy of the GGUF model at in_path to out_path with its 2-D weight matrices
 * converted to `type` (F32, F16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K), using
 * llama.cpp's reference quantizers (no importance matrix). Norms, biases and other 1-D
 * tensors stay F32. A matrix whose rows are not a whole number of the type's blocks gets
 * llama.cpp's fallback (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0) and stays F32 when even
 * that does not fit (llama.cpp would use F16). The output head (the token embedding when
 * tied) gets Q6_K when type is a 4/5-bit type, as llama.cpp does, unless keep_output is
 * set. Quantized inputs are dequantized first. general.file_type is updated. *n_converted (may be NULL) receives how many tensors were
 * converted. Errors: as sift_model_load, SIFT_E_INVAL for a type it cannot write, SIFT_E_IO. */
/* llama-quantize's named mixtures (llama_ftype): the base type plus llama_tensor_get_type's
 * per-tensor upgrades. Q4_K_M: Q4_K, with Q6_K for the output head and for attn_v and
 * ffn_down of the layers use_more_bits picks (the first and last eighth, every third
 * between); Q5_K_M the same on Q5_K; Q4_K_S / Q5_K_S: Q5_K for the first four attn_v and
 * (Q4_K_S) the first eighth of ffn_down. SIFT_QUANT_MIX_NONE: `type` for every matrix. */
typedef enum sift_quantize_mix {
    SIFT_QUANT_MIX_NONE = 0,
    SIFT_QUANT_MIX_Q4_K_S,
    SIFT_QUANT_MIX_Q4_K_M,
    SIFT_QUANT_MIX_Q5_K_S,
    SIFT_QUANT_MIX_Q5_K_M,
} sift_quantize_mix;
typedef struct sift_quantize_params {
    sift_tensor_type type;
    bool keep_output;   /* convert output.weight to `type` as well (no Q6_K upgrade) */
    int32_t n_threads;  /* 0 = one per CPU */
    sift_quantize_mix mix; /* NONE (default); otherwise `type` must be the mix's base type */
} sift_quantize_params;
SIFT_API sift_quantize_params sift_quantize_default_params(void); /* Q8_0 */
SIFT_API sift_status sift_model_quantize(const char *in_path, const char *out_path, const sift_quantize_params *params,
                                         int64_t *n_converted, sift_error *err);

/* ==== grammar ==============================================================================
 *
 * Grammar-constrained sampling with llama.cpp's GBNF (its grammars/README.md is the spec:
 * rules `name ::= ...`, alternation, grouping, `* + ? {m} {m,} {m,n}`, literals and
 * character classes with \x \u \U \n \r \t escapes, `.`, comments, token references
 * `<[id]>` / `<text>` and their negations `!<...>`).
 *
 * sift_grammar is the parsed, checked grammar (undefined rules, a missing root and left
 * recursion are errors with line:column). The grammar sampler follows llama.cpp: apply bans
 * every candidate whose text cannot continue the grammar; end-of-
 * generation tokens are allowed exactly when the grammar can end; accept advances the parse
 * by the chosen token's bytes (a UTF-8 character split over tokens is fine). It differs
 * deliberately where llama.cpp is unsafe or inconsistent: text must be valid UTF-8
 * (llama.cpp lets overlong forms, surrogates and bytes F5..FF through); a token containing a
 * NUL byte is never allowed; accepting a token the grammar cannot take (or EOG where it
 * cannot end) leaves the sampler "dead", allowing only EOG, where llama.cpp aborts; a token
 * element matches only at a token boundary (llama.cpp's apply and accept disagree inside a
 * token); `<text>` names the token whose text is exactly "<text>" (a control or user-defined
 * one preferred) rather than going through the tokenizer.
 *
 * How apply bans: llama.cpp sets a banned candidate's logit to -inf. sift does too, except
 * when the candidates are in the fill's layout (SIFT_CAND_IDENTITY) and at most one token
 * in eight is allowed: then it removes the banned ones, keeping the others in their order
 * and shrinking size, which no later sampler can tell from -inf entries (they have
 * probability 0) and which spares writing -inf over the whole vocabulary. Look tokens up
 * through id[], never by position, or set sift_grammar_params.keep_banned for llama.cpp's
 * layout. A mask that allows no candidate at all always leaves them all -inf.
 *
 * Speed: the sampler keeps a byte trie of the vocabulary and caches, per parser stack
 * suffix, the set of tokens that suffix accepts whatever lies below it (XGrammar's
 * "context-independent" tokens, refined level by level); a warm apply is a few bitset ORs
 * plus one pass over the candidates, and allocates nothing. See src/grammar/mask.c. Clones
 * of a grammar sampler, and every sampler over one sift_compiled_grammar, share these caches
 * (thread-safe); sift_sampler_init_grammar* compiles afresh (see the grammar compiler below).
 */
typedef struct sift_grammar sift_grammar;

/* Parse GBNF `text` (`len` bytes, need not be NUL-terminated) with start rule `root` (NULL
 * means "root"). `vocab` may be NULL: it is needed for `<text>` token references and, when
 * given, bounds-checks `<[id]>`. Returns NULL on error: SIFT_E_PARSE with "line:col: what
 * was expected" (or the undefined / left-recursive rule) in err, or SIFT_E_NOMEM. */
SIFT_API sift_grammar *sift_grammar_parse(const char *text, size_t len, const char *root,
                                          const sift_vocab_view *vocab, sift_error *err);
SIFT_API void sift_grammar_free(sift_grammar *g);

/* Result of matching a text against a grammar. */
typedef enum sift_grammar_match_result {
    SIFT_GRAMMAR_ERROR = -1,   /* NULL grammar, out of memory, or more than SIFT_GRAMMAR_MAX_STACKS parse
                                  stacks at once: nothing was decided */
    SIFT_GRAMMAR_REJECTED = 0, /* some byte cannot continue the grammar (see *fail_offset) */
    SIFT_GRAMMAR_PREFIX = 1,   /* valid so far, but the grammar cannot end here */
    SIFT_GRAMMAR_COMPLETE = 2, /* a complete sentence (longer ones may exist too) */
} sift_grammar_match_result;

/* Match `text` from the start rule, byte by byte. On SIFT_GRAMMAR_REJECTED, *fail_offset
 * (if not NULL) is the offset of the first byte that could not be taken (text.len when the
 * text ends inside a UTF-8 character the grammar cannot complete). Token references never
 * match text. SIFT_GRAMMAR_ERROR for a NULL grammar, on allocation failure or past
 * SIFT_GRAMMAR_MAX_STACKS. */
SIFT_API sift_grammar_match_result sift_grammar_match(const sift_grammar *g, const char *text, size_t len, size_t *fail_offset);

/* The grammar sampler. `vocab` gives the token texts (copied: the view need not outlive
 * the sampler). An empty or NULL grammar text gives a no-op sampler ("?grammar"), as in
 * llama.cpp. NULL on error (parse errors as sift_grammar_parse; SIFT_E_INVAL for a missing
 * vocabulary or a token id outside it; SIFT_E_NOMEM). Making it computes what the first mask
 * needs, and a little more (see sift_grammar_params.precompute_budget); the rest is computed
 * on first use and cached. */
SIFT_API sift_sampler *sift_sampler_init_grammar(const sift_vocab_view *vocab, const char *gbnf, const char *root,
                                                 sift_error *err);

typedef struct sift_grammar_params {
    const char *root;                       /* start rule; NULL or "root" */
    bool lazy;                              /* inactive until a trigger appears (llama.cpp grammar_lazy) */
    const char *const *trigger_words;       /* literal texts; the grammar starts at the word */
    size_t n_trigger_words;
    const char *const *trigger_patterns;    /* regexes (PCRE2, byte mode) searched in the output so
                                             * far; "^...$" must match all of it; the grammar starts
                                             * at the first non-empty capturing group (or the match) */
    size_t n_trigger_patterns;
    const sift_token *trigger_tokens;       /* the grammar starts with that token */
    size_t n_trigger_tokens;
    uint64_t precompute_budget;             /* work done ahead of time (trie nodes walked + 64 per
                                             * cache entry) beyond the first mask; 0 = default
                                             * (20Ki: about a millisecond) */
    bool keep_banned;                       /* llama.cpp's layout: forbidden candidates stay, with
                                             * logit -inf, and size never changes (by default a
                                             * sparse mask removes them; see the sampler above) */
} sift_grammar_params;

/* root "root", not lazy, no triggers, default budget */
SIFT_API sift_grammar_params sift_grammar_default_params(void);
/* As sift_sampler_init_grammar, with `len` bytes of GBNF and lazy triggers. Trigger
 * patterns that do not compile are SIFT_E_PARSE errors. */
SIFT_API sift_sampler *sift_sampler_init_grammar_ex(const sift_vocab_view *vocab, const char *gbnf, size_t len,
                                                    const sift_grammar_params *params, sift_error *err);

/* ---- the grammar compiler -------------------------------------------------------------------
 *
 * What a grammar costs before its first mask is compiling it: parsing, and the mask engine's
 * per-grammar caches (see src/grammar/compiler.c). A sift_grammar_compiler, one per
 * vocabulary, owns what every grammar of that vocabulary shares - the token trie (built once,
 * tens of milliseconds at 100k tokens), the grammar-independent mask entries, the precompute
 * budget - and a cache of compiled grammars keyed by (kind, text, options): the same grammar
 * or JSON schema compiled again is a lookup. A sift_compiled_grammar is immutable in what it
 * accepts and is shared by any number of samplers, threads and requests (reference counted;
 * the token sets it learns on the way are cached inside it, behind a lock). The grammar
 * sampler made from it is the per-sequence matcher: parse state, lazy triggers, the mask
 * buffer. (XGrammar's GrammarCompiler / CompiledGrammar / GrammarMatcher and llguidance's
 * ParserFactory have this shape.)
 *
 * Ownership: sift_grammar_compile* returns a reference the caller frees with
 * sift_compiled_grammar_free; a sampler takes its own. sift_grammar_compiler_free drops the
 * caller's handle and the cache; grammars and samplers still alive keep what they use. */
typedef struct sift_grammar_compiler sift_grammar_compiler;
typedef struct sift_compiled_grammar sift_compiled_grammar;

typedef struct sift_grammar_compiler_params {
    uint64_t precompute_budget; /* work done ahead per compiled grammar (as sift_grammar_params.
                                 * precompute_budget); 0 = default (20Ki: about a millisecond) */
    uint32_t cache_grammars;    /* compiled grammars kept for reuse (least recently used leave
                                 * first); 0 = default 32; samplers keep theirs alive regardless */
    bool no_cache;              /* compile every time (nothing kept) */
    uint64_t share_bytes;       /* bound on the mask entries shared across grammars; 0 = default
                                 * (64 MiB) */
    bool no_share;              /* share nothing across grammars (measurements: what the share buys) */
} sift_grammar_compiler_params;

typedef struct sift_grammar_compiler_stats {
    uint64_t compiles;      /* grammars compiled (cache misses that parsed and prepared a grammar) */
    uint64_t cache_hits;    /* sift_grammar_compile* calls answered from the cache */
    uint64_t evictions;     /* compiled grammars dropped from the cache (least recently used) */
    uint32_t cached;        /* compiled grammars in the cache now */
} sift_grammar_compiler_stats;

/* budget 0 (default), cache of 32, sharing on with its default bound */
SIFT_API sift_grammar_compiler_params sift_grammar_compiler_default_params(void);
/* A compiler for `vocab` (its token texts and attributes are copied: the view need not
 * outlive it). params NULL: defaults. NULL on error: SIFT_E_INVAL for an empty view,
 * SIFT_E_NOMEM. Thread-safe: any thread may compile with it at any time. */
SIFT_API sift_grammar_compiler *sift_grammar_compiler_new(const sift_vocab_view *vocab,
                                                          const sift_grammar_compiler_params *params, sift_error *err);
SIFT_API void sift_grammar_compiler_free(sift_grammar_compiler *c);
SIFT_API void sift_grammar_compiler_get_stats(const sift_grammar_compiler *c, sift_grammar_compiler_stats *st);

/* Compile `len` bytes of GBNF with start rule `root` (NULL: "root"), or take it from the
 * cache. NULL on error: as sift_grammar_parse; SIFT_E_INVAL for an empty text or a token id
 * outside the vocabulary; SIFT_E_NOMEM. (JSON schemas: sift_grammar_compile_json_schema.) */
SIFT_API sift_compiled_grammar *sift_grammar_compile(sift_grammar_compiler *c, const char *gbnf, size_t len,
                                                     const char *root, sift_error *err);
SIFT_API void sift_compiled_grammar_free(sift_compiled_grammar *g);
/* Another reference to g (for another owner); g itself. */
SIFT_API sift_compiled_grammar *sift_compiled_grammar_ref(sift_compiled_grammar *g);
/* The GBNF text g was compiled from (a JSON schema's: its conversion); lives as long as g. */
SIFT_API const char *sift_compiled_grammar_gbnf(const sift_compiled_grammar *g);

/* A grammar sampler over a compiled grammar (which it references: the caller may free its
 * own). Of params only lazy, the triggers and keep_banned apply (the root and the budget
 * were the compiler's); NULL: defaults. NULL on error (bad trigger pattern: SIFT_E_PARSE;
 * SIFT_E_NOMEM). Made in microseconds when the grammar's first mask is cached. */
SIFT_API sift_sampler *sift_sampler_init_grammar_compiled(sift_compiled_grammar *g, const sift_grammar_params *params,
                                                          sift_error *err);

/* Would the grammar sampler allow `token` next? (The rejection strategy's check: a few
 * bytes through the parse stacks, no mask.) True for any token while a lazy grammar
 * waits for its trigger, and for a sampler that is not a grammar sampler. */
SIFT_API bool sift_grammar_sampler_allows(sift_sampler *smpl, sift_token token);

typedef enum sift_grammar_status {
    SIFT_GRAMMAR_ACTIVE = 0,           /* constraining; cannot end yet */
    SIFT_GRAMMAR_CAN_END = 1,          /* may end here (EOG allowed) or go on */
    SIFT_GRAMMAR_DONE = 2,             /* complete: only EOG is allowed */
    SIFT_GRAMMAR_AWAITING_TRIGGER = 3, /* lazy, not triggered yet: no constraint */
    SIFT_GRAMMAR_DEAD = 4,             /* a token it could not take was accepted: only EOG is allowed */
    SIFT_GRAMMAR_OVER_LIMIT = 5,       /* its parse stacks outgrew SIFT_GRAMMAR_MAX_STACKS (an exponentially
                                          ambiguous grammar): no token is allowed, the generation must end
                                          with an error that names the limit */
} sift_grammar_status;
/* The most parse stacks a grammar may have alive at once (llama.cpp's stacks: one per way
 * the text so far can be parsed). Unambiguous grammars (JSON, JSON schemas) have a few; an
 * ambiguous one such as x{0,1000} up to about a thousand; a_i ::= a_{i+1} a_{i+1} | [a-z]
 * nested 20 deep 2^20, which would cost minutes per token. */
#define SIFT_GRAMMAR_MAX_STACKS 16384
SIFT_API sift_grammar_status sift_grammar_sampler_status(const sift_sampler *smpl);

/* How a grammar combines with a chain (llama.cpp's grammar_first flag). */
typedef enum sift_grammar_mode {
    SIFT_GRAMMAR_FIRST = 0,     /* apply the grammar to the whole vocabulary, then the chain */
    SIFT_GRAMMAR_REJECTION = 1, /* sample with the chain alone; only if the grammar refuses the
                                 * pick, refill, apply the grammar, sample again (llama.cpp's
                                 * common_sampler_sample default) */
} sift_grammar_mode;

/* One sampling step with a grammar kept outside the chain: fill from logits, sample in the
 * given mode, accept the token into the grammar and the chain, return it (SIFT_TOKEN_NULL
 * when nothing was selected). *refused (may be NULL) says whether the rejection mode had to
 * resample. grammar may be NULL (plain sift_chain_sample). A token the grammar forbids is
 * never returned: when the grammar and the chain together leave no token (a grammar no
 * token of the vocabulary can continue, or a complete grammar whose end-of-generation
 * tokens the chain suppresses, e.g. with ignore_eos), the result is SIFT_TOKEN_NULL and
 * nothing is accepted; sift_grammar_sampler_status() then says SIFT_GRAMMAR_ACTIVE (no
 * token can continue it: an error) or SIFT_GRAMMAR_CAN_END / SIFT_GRAMMAR_DONE (complete:
 * a stop). */
SIFT_API sift_token sift_grammar_chain_sample(sift_sampler *grammar, sift_chain *chain, const float *logits,
                                              int32_t n_vocab, sift_grammar_mode mode, bool *refused);

/* What sift_chain_sample_ex reports besides the token: the n most probable tokens and the
 * probability of the one returned (llama-server's n_probs / completion_probabilities). */
typedef struct sift_sample_probs {
    int32_t n;          /* in: how many to report (0: none; nothing is computed then) */
    bool post_sampling; /* in: true: the distribution the chain (and grammar) left, as
                         * sift_candidates_top gives it; false: softmax of the raw logits
                         * over the whole vocabulary (llama-server's default) */
    sift_token *ids;    /* in: room for n ids, best first */
    float *probs;       /* in: room for n probabilities */
    int32_t n_out;      /* out: entries written */
    float p_selected;   /* out: the returned token's probability in the same distribution */
    bool refused;       /* out: the rejection mode had to resample with the grammar */
} sift_sample_probs;

/* One sampling step, the way a server slot needs it, through the fast path of
 * sift_chain_sample: the chain's fast step on the logits when it applies (no copy of the
 * vocabulary), the grammar (may be NULL) in the given mode as sift_grammar_chain_sample
 * (same tokens: the rejection mode checks the chain's pick and only then fills, applies the
 * grammar and samples again), the accept into grammar and chain, and optionally the
 * probabilities (probs may be NULL). With a trace hook on the chain, the grammar is traced
 * as sampler index sift_chain_n(chain), smpl = grammar, after it is applied. Returns the
 * token, or SIFT_TOKEN_NULL as sift_grammar_chain_sample (nothing accepted then). The
 * logits must stay unchanged until it returns. */
SIFT_API sift_token sift_chain_sample_ex(sift_chain *chain, sift_sampler *grammar, const float *logits, int32_t n_vocab,
                                         sift_grammar_mode mode, sift_sample_probs *probs);

/* Convert a JSON schema to GBNF, in the style of llama.cpp's json-schema-to-grammar (rule
 * `root`, whitespace rule `space`) but with JSON Schema's semantics: an object's properties
 * in the schema's order, a missing additionalProperties allowing other keys (see
 * SIFT_JSON_SCHEMA_LLAMA for llama.cpp's conventions). Supported: type (incl. lists of types), properties,
 * required, additionalProperties, items, prefixItems, minItems/maxItems, enum, const,
 * anyOf/oneOf/allOf, $ref to #/$defs/..., #/definitions/... and #, string formats date,
 * time, date-time, uuid, minLength/maxLength, minimum/maximum/exclusiveMinimum/
 * exclusiveMaximum for integers, pattern (a regex subset: see src/schema/regex_to_gbnf.c).
 * Annotations (title, description, default, examples, $schema, $id, $comment, ...) are
 * ignored. A keyword that would constrain the value but cannot be expressed (not, if/then/
 * else, uniqueItems, multipleOf, number bounds, ...) is an error (SIFT_E_UNSUPPORTED naming
 * the keyword and its JSON pointer) unless SIFT_JSON_SCHEMA_LENIENT is set, in which case
 * it is ignored and the grammar accepts a superset. Returns a NUL-terminated malloc'd
 * string (free() it) or NULL with err set (SIFT_E_PARSE for malformed JSON). */
#define SIFT_JSON_SCHEMA_LENIENT 0x1u
/* llama.cpp's json-schema-to-grammar conventions instead of JSON Schema's, for drop-in users:
 * required properties first (then the optional ones in schema order), and a missing
 * additionalProperties read as false (no keys beyond `properties`). By default an object's
 * properties come in the schema's order and a missing additionalProperties allows any other
 * key, as JSON Schema says. */
#define SIFT_JSON_SCHEMA_LLAMA 0x2u
/* The dialect of a schema without "$schema" (by default: draft 2020-12). With this flag it
 * is draft-07: a $ref overrides the keywords beside it (2019-09 and later apply both),
 * contentMediaType / contentEncoding are assertions (refused in strict mode). A "$schema"
 * naming a draft always decides. */
#define SIFT_JSON_SCHEMA_DRAFT7 0x4u
SIFT_API char *sift_json_schema_to_grammar(const char *schema, size_t len, uint32_t flags, sift_error *err);
/* A JSON schema (`len` bytes of JSON, `flags` as above) compiled with compiler c, or taken
 * from its cache (keyed by the schema text and flags): the conversion, the GBNF parse and the
 * mask engine's preparation happen once per distinct schema. Errors as
 * sift_json_schema_to_grammar. Free with sift_compiled_grammar_free. */
SIFT_API sift_compiled_grammar *sift_grammar_compile_json_schema(sift_grammar_compiler *c, const char *schema, size_t len,
                                                                 uint32_t flags, sift_error *err);

/* ==== speculative decoding ===================================================================
 *
 * Generation reads every weight once per token. Speculative decoding guesses several tokens
 * cheaply (a draft), lets the target model check all of them in one batched decode, and
 * keeps the longest prefix the target's own sampling agrees with, plus the target's token at
 * the first disagreement. llama.cpp: common/speculative.cpp, common_sampler_sample_and_accept_n,
 * llama-lookup.
 *
 * A sift_draft is a draft source. It holds the history of one sequence (the prompt and every
 * token accepted so far, the last one included even while the target has not decoded it
 * yet) and proposes tokens that may follow it. Two kinds:
 *   - prompt lookup: an n-gram index over the history; a draft continues the longest recent
 *     n-gram (n <= N) the way it went on before (extraction, edits, code, JSON repeat spans
 *     of the prompt). No second model.
 *   - a draft model: a second, smaller sift_model with the same vocabulary (checked token by
 *     token at creation), run greedily in a context of its own; drafting stops after a token
 *     whose draft probability is below p_min.
 * Both keep a running per-token acceptance rate a. Alone (sift_draft_propose) a draft is as
 * long as a makes worth it (a^depth >= 0.15, between 1 and n_max). Inside sift_spec_step the
 * depth comes from measured costs instead: the k <= n_max that maximizes expected tokens per
 * pass (1 + a + ... + a^k) over the pass's time (verifying k + 1 tokens, fitted to the
 * steps' own times, plus drafting k), 0 (plain generation, with an occasional probe) when no
 * draft pays; so speculation costs little where it cannot win.
 *
 * A sift_spec verifies drafts on one sequence of a target context. sift_spec_step decodes
 * [last, draft...] in one batch with logits at every entry, then samples position by position
 * with the caller's chain (and grammar) exactly as a plain generation would: one chain step,
 * one RNG draw, per position, in order. It goes on while the sampled token equals the draft's;
 * the first different token (or the one after a fully accepted draft) ends the step. Every
 * sampled token is a token of the output, so penalties, DRY, grammars and every other
 * stateful sampler see exactly the accepted tokens; the rejected tail is removed from the KV
 * cache. A token's logits in a batch are bit for bit those it gets decoded alone (the batch
 * and one-token kernels agree, kernels.h), so a seeded chain gives the same stream with and
 * without speculation (ctest spec_same_tokens).
 */
typedef struct sift_draft sift_draft;
typedef struct sift_spec sift_spec;

#define SIFT_LOOKUP_MAX_N 8 /* the longest n-gram prompt lookup indexes */

typedef struct sift_draft_params {
    int32_t n_max;  /* most tokens in one draft (default 16; llama.cpp's --draft-max) */
    int32_t n_min;  /* a shorter draft is not verified (default 0; --draft-min) */
    float p_min;    /* draft model: stop after a token the draft gives less (default 0.75; --draft-p-min) */
    bool adaptive;  /* choose the depth by acceptance and measured cost (default true); false: n_max */
} sift_draft_params;
SIFT_API sift_draft_params sift_draft_default_params(void);

/* Prompt lookup over n-grams of 1..n tokens (1 <= n <= SIFT_LOOKUP_MAX_N). NULL and *err:
 * SIFT_E_INVAL, SIFT_E_NOMEM. Free with sift_draft_free. */
SIFT_API sift_draft *sift_draft_lookup_new(int32_t n, sift_draft_params params, sift_error *err);
/* A draft model: draft (borrowed: it must outlive the sift_draft) gets a context of its own
 * made with cparams (n_seq_max 1; n_ctx should be the target sequence's). Its vocabulary
 * must be the target's: same size, same token texts and special ids, else SIFT_E_INVAL
 * naming the first difference. Other errors as sift_context_new. */
SIFT_API sift_draft *sift_draft_model_new(const sift_model *draft, const sift_model *target, sift_context_params cparams,
                                          sift_draft_params params, sift_error *err);
SIFT_API void sift_draft_free(sift_draft *d);
/* Forget the history (a new sequence). */
SIFT_API void sift_draft_reset(sift_draft *d);
/* Append tokens to the history (a prompt, input fed between replies). sift_spec_step appends
 * the tokens it returns itself. SIFT_E_INVAL (negative token id or n), SIFT_E_NOMEM. */
SIFT_API sift_status sift_draft_push(sift_draft *d, const sift_token *tokens, int32_t n, sift_error *err);
/* Up to cap tokens that may follow the history (fewer than n_min: none). Returns how many
 * were written, or a negative status (a draft model's decode failing). */
SIFT_API int32_t sift_draft_propose(sift_draft *d, sift_token *out, int32_t cap, sift_error *err);
/* Change a draft's parameters between proposals (a server request's speculative.n_max,
 * n_min, p_min). SIFT_E_INVAL as at creation, SIFT_E_NOMEM; the old ones stay then. */
SIFT_API sift_status sift_draft_set_params(sift_draft *d, sift_draft_params params, sift_error *err);
SIFT_API sift_draft_params sift_draft_get_params(const sift_draft *d);
/* How a proposal fared, for a caller that verifies drafts itself rather than through
 * sift_spec_step (a server checking many sequences' drafts in one decode): of `drafted`
 * tokens, the first `accepted` were the target's. Feeds the adaptive depth. */
SIFT_API void sift_draft_feedback(sift_draft *d, int32_t drafted, int32_t accepted);
/* The running per-token acceptance estimate the adaptive depth uses (0.5 with no data). */
SIFT_API double sift_draft_acceptance(const sift_draft *d);
/* The draft length the adaptive rule allows now (n_max without it). */
SIFT_API int32_t sift_draft_depth(const sift_draft *d);
SIFT_API const char *sift_draft_kind(const sift_draft *d); /* "lookup" or "draft model" */

/* Verifier for sequence seq of target (borrowed), drafting with d (borrowed; NULL: no
 * drafts, every step is a plain one-token step). Allocates its batch for n_batch tokens
 * here and nothing per step. NULL and *err: SIFT_E_INVAL, SIFT_E_NOMEM. */
SIFT_API sift_spec *sift_spec_new(sift_context *target, sift_seq_id seq, sift_draft *d, sift_error *err);
SIFT_API void sift_spec_free(sift_spec *s);

/* Called with each token as it is accepted; returning false ends the step after it (an
 * end-of-generation token, a stop string): later positions are then not sampled at all. */
typedef bool (*sift_spec_token_fn)(void *user, sift_token token);

typedef struct sift_spec_sampling {
    sift_chain *chain;          /* the target's chain (required) */
    sift_sampler *grammar;      /* a grammar kept outside the chain, or NULL */
    sift_grammar_mode mode;     /* as sift_grammar_chain_sample */
    sift_spec_token_fn on_token; /* may be NULL */
    void *user;
} sift_spec_sampling;

typedef struct sift_spec_result {
    int32_t n_tokens;   /* tokens written to out (accepted draft tokens, then the target's own) */
    int32_t n_drafted;  /* draft tokens verified */
    int32_t n_accepted; /* of those, accepted */
    bool stopped;       /* on_token ended the step */
    bool no_token;      /* the chain (and grammar) selected nothing at position n_tokens */
} sift_spec_result;

/* One step. `last` is the newest token of the sequence, not yet decoded, at position pos
 * (the sequence's cache must end before pos). At most room tokens come out (room >= 1; the
 * draft gets room - 1 and what is left of the sequence's cells). out needs room entries.
 * Afterwards the sequence's cache holds the positions before pos + n_tokens: last and every
 * returned token but the final one, which is the new `last` (not decoded) at pos + n_tokens;
 * the draft's history ends with it. When nothing came out (no_token at the first position)
 * the cache is as it was and last is still to be decoded. SIFT_OK (check no_token), or
 * the decode's error (SIFT_E_INVAL, SIFT_E_STATE as sift_decode) with nothing sampled. */
SIFT_API sift_status sift_spec_step(sift_spec *s, sift_pos pos, sift_token last, int32_t room,
                                    const sift_spec_sampling *sampling, sift_token *out, sift_spec_result *res,
                                    sift_error *err);

typedef struct sift_spec_stats {
    int64_t n_steps;    /* target decodes (passes) */
    int64_t n_tokens;   /* tokens accepted */
    int64_t n_drafted;  /* draft tokens verified */
    int64_t n_accepted; /* draft tokens accepted */
    double t_draft_ms;  /* time in sift_draft_propose */
    double t_verify_ms; /* time in the target's decodes and sampling */
} sift_spec_stats;
SIFT_API sift_spec_stats sift_spec_get_stats(const sift_spec *s);

/* ==== chat templates (Jinja) ==================================================================
 *
 * A Jinja engine for chat templates (a GGUF's tokenizer.chat_template): it renders what
 * Hugging Face transformers' apply_chat_template renders, i.e. Python jinja2 with
 * trim_blocks, lstrip_blocks, loop controls, raise_exception(msg), strftime_now(fmt) and a
 * tojson that keeps non-ASCII text (json.dumps with ensure_ascii=False). Output is exact,
 * byte for byte; where jinja2 raises, rendering fails with the message (and the template
 * line). Nothing is global: a parsed template is immutable and may be rendered from several
 * threads at once. Every render is bounded (output bytes, memory, evaluation steps, call
 * depth, and optionally wall-clock time and a memory budget shared with other renders): a
 * hostile template ends with an error, never a hang or a crash. Steps count work, not
 * nodes: each node is a step, and so is each element a comparison visits and each 8 bytes
 * a string operation reads or writes. */
typedef struct sift_template sift_template;

/* A memory budget shared by renders (a server's, so that N renders at once stay under one
 * cap). Thread-safe; free it after the last render that uses it. */
typedef struct sift_template_pool sift_template_pool;
SIFT_API sift_template_pool *sift_template_pool_new(size_t max_bytes);
SIFT_API void sift_template_pool_free(sift_template_pool *pool);
SIFT_API size_t sift_template_pool_used(const sift_template_pool *pool); /* bytes held by renders now */

/* The most keys one JSON object of a render's context may have: a larger one is refused
 * ("context JSON: an object has more than 16384 keys"). */
#define SIFT_TEMPLATE_MAX_KEYS 16384

typedef struct sift_template_options {
    size_t max_output;   /* bytes of output (default 16 MiB) */
    size_t max_memory;   /* bytes of working memory (default 512 MiB) */
    uint64_t max_steps;  /* evaluation steps (default 50 million) */
    int max_depth;       /* nested macro calls and loops (default 100) */
    int64_t now;         /* strftime_now's clock, Unix seconds, shown in UTC; -1 (default): the current
                            time, shown in local time as transformers' datetime.now() */
    /* transformers' call shape: `tools`, `documents` default to None and
     * `add_generation_prompt` to false when the context does not set them */
    bool chat_defaults;
    uint32_t max_time_ms;  /* wall-clock limit, checked inside loops and long operations (default 0: none) */
    /* Polled every few thousand steps (with the clock): returning true abandons the render
     * with SIFT_E_STATE, e.g. when the client that asked for it went away. NULL: never. */
    bool (*abort_cb)(void *data);
    void *abort_data;
    sift_template_pool *pool; /* memory shared with other renders (NULL: only max_memory applies);
                                 when it is spent the render fails with SIFT_E_NOMEM */
} sift_template_options;

/* The defaults above (chat_defaults false). */
SIFT_API void sift_template_options_init(sift_template_options *opts);

/* Parse a template (UTF-8, len bytes). NULL with err set (SIFT_E_PARSE, the message names
 * the line: "template line 3: TemplateSyntaxError: ...") on failure. Unknown filters and
 * tests are parse errors, as in jinja2. */
SIFT_API sift_template *sift_template_parse(const char *src, size_t len, sift_error *err);
SIFT_API void sift_template_free(sift_template *tpl);

/* Render with the variables of a JSON object (context_json, context_len bytes; NULL or 0:
 * none). opts may be NULL (defaults). On success *out is a NUL-terminated malloc'd string
 * (free() it) of *out_len bytes (out_len may be NULL). On failure (SIFT_E_INVAL for what
 * jinja2 raises: raise_exception, undefined attributes of undefined values, type errors,
 * sandbox violations, exceeded limits; SIFT_E_PARSE for malformed context JSON; SIFT_E_NOMEM
 * when max_memory or the pool is spent; SIFT_E_STATE when abort_cb said stop) *out is NULL
 * and err says what and on which template line. */
SIFT_API sift_status sift_template_render(const sift_template *tpl, const char *context_json, size_t context_len,
                                          const sift_template_options *opts, char **out, size_t *out_len,
                                          sift_error *err);

#ifdef __cplusplus
}
#endif

#endif /* SIFT_H */
