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
 * happen here).
 *
 * The arrays are owned by whoever made the candidates (normally the chain, sized once for
 * the vocabulary): samplers only permute, shrink and rewrite them, never reallocate.
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
    SIFT_VOCAB_BPE = 2, /* byte-level BPE, "gpt2" */
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
/* Whether tokenize(add_special = true) adds BOS (CLS) first / EOS last. */
SIFT_API bool sift_vocab_add_bos(const sift_vocab *vocab);
SIFT_API bool sift_vocab_add_eos(const sift_vocab *vocab);
/* The end-of-generation set (EOS, EOT, EOM, <|im_end|>, ... as llama.cpp builds it), sorted
 * ascending; *n receives its size. The array belongs to the vocabulary. */
SIFT_API const sift_token *sift_vocab_eog(const sift_vocab *vocab, int32_t *n);
SIFT_API bool sift_vocab_is_eog(const sift_vocab *vocab, sift_token token);
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
SIFT_API int sift_vocab_view_get(const sift_vocab *vocab, sift_vocab_view *view);

#ifdef __cplusplus
}
#endif

#endif /* SIFT_H */
