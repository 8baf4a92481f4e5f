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
SIFT_API const char *sift_status_str(int status);

/* Optional out-parameter of fallible functions: the status again and a one-line message
 * that says where (field, byte offset, line:column) and what. */
#define SIFT_ERROR_MSG_MAX 256
typedef struct sift_error {
    int status;
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
 * size and capacity), as llama.cpp's xtc does; the owner keeps the original pointers.
 * `ws` is scratch memory sized with the arrays (sorting keys, gathers), so that no sampler
 * allocates per token; candidates made with sift_candidates_init() have one, and
 * sift_sampler_apply() lends a temporary one to candidates that do not.
 */
typedef struct sift_candidates {
    sift_token *id;    /* token ids                                   [capacity] */
    float *logit;      /* logits (after whatever samplers did to them) [capacity] */
    float *p;          /* probabilities, meaningful when flags say so  [capacity] */
    size_t size;       /* live entries: [0, size) */
    size_t capacity;   /* allocated entries */
    int64_t selected;  /* index into the arrays of the chosen token, -1 = none yet */
    bool sorted;       /* [0, size) is in descending logit order */
    uint32_t flags;    /* SIFT_CAND_* below */
    void *ws;          /* internal workspace (scratch for samplers); owned by the core */
} sift_candidates;

/* p[0..size) holds softmax(logit[0..size)) of the current logits (sums to 1). */
#define SIFT_CAND_PROBS 0x1u

/* Allocate arrays (and workspace) for `capacity` entries; size 0, nothing selected.
 * Free with sift_candidates_free(). Errors: SIFT_E_INVAL (capacity 0), SIFT_E_NOMEM. */
SIFT_API sift_status sift_candidates_init(sift_candidates *cand, size_t capacity);
/* Free what sift_candidates_init() allocated and zero the struct (NULL-safe). */
SIFT_API void sift_candidates_free(sift_candidates *cand);
/* The start of a sampling step: id[i] = i, logit[i] = logits[i] for i < n, size n,
 * unsorted, nothing selected, no probabilities. SIFT_E_INVAL when n > capacity. */
SIFT_API sift_status sift_candidates_fill(sift_candidates *cand, const float *logits, size_t n);
/* Make p[0..size) valid for the current logits (a softmax in array order, only when the
 * flags say the probabilities are stale) and return cand->p. */
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
 * SIFT_DEFAULT_SEED); SIFT_DEFAULT_SEED for samplers without randomness. */
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
 * return it. SIFT_TOKEN_NULL when the step could not run (NULL logits, n_vocab < 1, out of
 * memory) or no sampler selected a token (the last sampler must select: greedy, dist,
 * mirostat, adaptive_p). */
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
 * next fill or the chain's end). */
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
} sift_vocab_view;

/* ==== grammar ==============================================================================
 *
 * Grammar-constrained sampling with llama.cpp's GBNF (its grammars/README.md is the spec:
 * rules `name ::= ...`, alternation, grouping, `* + ? {m} {m,} {m,n}`, literals and
 * character classes with \x \u \U \n \r \t escapes, `.`, comments, token references
 * `<[id]>` / `<text>` and their negations `!<...>`).
 *
 * sift_grammar is the parsed, checked grammar (undefined rules, a missing root and left
 * recursion are errors with line:column). The grammar sampler follows llama.cpp: apply sets
 * the logit of every candidate whose text cannot continue the grammar to -inf; end-of-
 * generation tokens are allowed exactly when the grammar can end; accept advances the parse
 * by the chosen token's bytes (a UTF-8 character split over tokens is fine). It differs in
 * two deliberate ways: text must be valid UTF-8 (llama.cpp lets overlong forms, surrogates
 * and bytes F5..FF through), and a token that contains a NUL byte is never allowed.
 *
 * Speed: the sampler keeps a byte trie of the vocabulary and caches, per parser stack
 * suffix, the set of tokens that suffix accepts whatever lies below it (XGrammar's
 * "context-independent" tokens, refined level by level); a warm apply is a few bitset ORs
 * plus one pass over the candidates, and allocates nothing. See src/grammar/mask.c.
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
    SIFT_GRAMMAR_REJECTED = 0, /* some byte cannot continue the grammar (see *fail_offset) */
    SIFT_GRAMMAR_PREFIX = 1,   /* valid so far, but the grammar cannot end here */
    SIFT_GRAMMAR_COMPLETE = 2, /* a complete sentence (longer ones may exist too) */
} sift_grammar_match_result;

/* Match `text` from the start rule, byte by byte. On SIFT_GRAMMAR_REJECTED, *fail_offset
 * (if not NULL) is the offset of the first byte that could not be taken (text.len when the
 * text ends inside a UTF-8 character the grammar cannot complete). Token references never
 * match text. Returns -SIFT_E_NOMEM on allocation failure. */
SIFT_API int sift_grammar_match(const sift_grammar *g, const char *text, size_t len, size_t *fail_offset);

/* The grammar sampler. `vocab` gives the token texts (copied: the view need not outlive
 * the sampler). An empty or NULL grammar text gives a no-op sampler ("?grammar"), as in
 * llama.cpp. NULL on error (parse errors as sift_grammar_parse; SIFT_E_INVAL for a missing
 * vocabulary or a token id outside it; SIFT_E_NOMEM). Making it precomputes the masks the
 * first two parse levels need (see sift_grammar_params.precompute_budget). */
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
    uint64_t precompute_budget;             /* trie nodes walked ahead of time; 0 = default (64Mi) */
} sift_grammar_params;

/* root "root", not lazy, no triggers, default budget */
SIFT_API sift_grammar_params sift_grammar_default_params(void);
/* As sift_sampler_init_grammar, with `len` bytes of GBNF and lazy triggers. Trigger
 * patterns that do not compile are SIFT_E_PARSE errors. */
SIFT_API sift_sampler *sift_sampler_init_grammar_ex(const sift_vocab_view *vocab, const char *gbnf, size_t len,
                                                    const sift_grammar_params *params, sift_error *err);

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
} sift_grammar_status;
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
 * resample. grammar may be NULL (plain sift_chain_sample). */
SIFT_API sift_token sift_grammar_chain_sample(sift_sampler *grammar, sift_chain *chain, const float *logits,
                                              int32_t n_vocab, sift_grammar_mode mode, bool *refused);

/* Convert a JSON schema to GBNF, in the style of llama.cpp's json-schema-to-grammar (rule
 * `root`, whitespace rule `space`). Supported: type (incl. lists of types), properties,
 * required, additionalProperties, items, prefixItems, minItems/maxItems, enum, const,
 * anyOf/oneOf/allOf, $ref to #/$defs/..., #/definitions/... and #, string formats date,
 * time, date-time, uuid, minLength/maxLength, minimum/maximum/exclusiveMinimum/
 * exclusiveMaximum for integers, pattern (a regex subset: see src/grammar/json_schema.c).
 * Annotations (title, description, default, examples, $schema, $id, $comment, ...) are
 * ignored. A keyword that would constrain the value but cannot be expressed (not, if/then/
 * else, uniqueItems, multipleOf, number bounds, ...) is an error (SIFT_E_UNSUPPORTED naming
 * the keyword and its JSON pointer) unless SIFT_JSON_SCHEMA_LENIENT is set, in which case
 * it is ignored and the grammar accepts a superset. Returns a NUL-terminated malloc'd
 * string (free() it) or NULL with err set (SIFT_E_PARSE for malformed JSON). */
#define SIFT_JSON_SCHEMA_LENIENT 0x1u
SIFT_API char *sift_json_schema_to_grammar(const char *schema, size_t len, uint32_t flags, sift_error *err);

#ifdef __cplusplus
}
#endif

#endif /* SIFT_H */
