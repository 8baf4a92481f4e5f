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
