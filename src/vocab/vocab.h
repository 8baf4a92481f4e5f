/*
 * vocab.h - the vocabulary object behind sift_vocab (internal).
 *
 * A sift_vocab is built once from a plain description (sift__vocab_spec: the token texts,
 * scores and types, the merges, the special ids and flags, as the GGUF metadata states
 * them) and is read-only afterwards, so any number of threads may tokenize with it at once.
 * Building does what llama.cpp's llama_vocab::impl::load does, in the same order, because
 * several results depend on the order (which special tokens exist when the newline token
 * is computed, which attributes the piece cache sees):
 *
 *   1. type and pre-tokenizer from the model/pre names, with the flags they imply;
 *   2. the tokens (empty texts renamed "[EMPTY_i]", duplicates refused), scores, attributes;
 *   3. the tokenizer tables: interned strings, merge table (BPE), byte tables;
 *   4. the newline token (BPE: tokenize("\n") before any special token is known);
 *   5. special ids: type defaults, then metadata; add_bos/add_eos/add_sep;
 *   6. EOT/EOM/FIM tokens recognised by text, "unused" control tokens, the EOG set and its
 *      workarounds (gpt-oss, harmony, gemma4), each forcing the CONTROL attribute as needed;
 *   7. the special-token list for partitioning text (control, user-defined and unknown
 *      tokens, longest text first), and the special-token trie;
 *   8. the piece of every token (token_to_piece with special = true) in one arena;
 *   9. per-model attribute fixes (phi-3's RSTRIP, jina/modern-bert LSTRIP on the mask).
 *
 * The tokenizers themselves are in tokenizer_spm.c, tokenizer_bpe.c, tokenizer_wpm.c
 * (entry points in tokenizers.h, their buffers in token_buffers.h); tokenize.c partitions
 * text around special tokens and dispatches; pieces and detokenization are in
 * detokenize.c. This header knows none of them: the vocabulary is below its tokenizers.
 */
#ifndef SIFT_VOCAB_VOCAB_H
#define SIFT_VOCAB_VOCAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vocab/pretok.h"
#include "vocab/strtab.h"
#include "sift.h"

/* Special ids named by metadata keys, in llama.cpp's order (the deprecated prefix/suffix/
 * middle keys come last and override fim_pre/fim_suf/fim_mid). */
enum {
    SIFT_VKEY_BOS, SIFT_VKEY_EOS, SIFT_VKEY_EOT, SIFT_VKEY_EOM, SIFT_VKEY_UNK, SIFT_VKEY_SEP,
    SIFT_VKEY_PAD, SIFT_VKEY_MASK, SIFT_VKEY_FIM_PRE, SIFT_VKEY_FIM_SUF, SIFT_VKEY_FIM_MID,
    SIFT_VKEY_FIM_PAD, SIFT_VKEY_FIM_REP, SIFT_VKEY_FIM_SEP, SIFT_VKEY_PREFIX, SIFT_VKEY_SUFFIX,
    SIFT_VKEY_MIDDLE, SIFT_VKEY_COUNT
};
/* Their GGUF keys ("tokenizer.ggml.bos_token_id", ...). */
extern const char *const sift__vocab_id_keys[SIFT_VKEY_COUNT];

/* What the metadata says. Pointers are borrowed for the duration of sift__vocab_build. */
typedef struct sift__vocab_spec {
    const char *model;              /* tokenizer.ggml.model: "llama", "gpt2", "bert" */
    const char *pre;                /* tokenizer.ggml.pre, NULL if absent */
    const char *name;               /* general.name, NULL if absent */
    const char *arch;               /* general.architecture, NULL if absent */
    int64_t n_tokens;
    const char *const *text;        /* [n_tokens] token texts */
    const uint32_t *text_len;       /* [n_tokens] their lengths; NULL = strlen */
    const float *scores;            /* tokenizer.ggml.scores as f32, or NULL */
    const int32_t *iscores;         /* ... as i32, or NULL */
    int64_t n_scores;
    const int32_t *types;           /* tokenizer.ggml.token_type, or NULL */
    int64_t n_types;
    int64_t n_merges;               /* tokenizer.ggml.merges ("a b" strings) */
    const char *const *merges;
    const uint32_t *merge_len;      /* NULL = strlen */
    bool has_merges;
    int64_t ids[SIFT_VKEY_COUNT];   /* special ids; -1 = key absent */
    int8_t add_bos, add_eos, add_sep, add_space_prefix, remove_extra_ws, lowercase, strip_accents; /* -1 = absent */
    const int32_t *suppress;        /* tokenizer.ggml.suppress_tokens, or NULL */
    int64_t n_suppress;
} sift__vocab_spec;

/* A spec with every optional field absent. */
void sift__vocab_spec_init(sift__vocab_spec *spec);
/* Build a vocabulary; NULL and *err (naming the field) on failure. */
sift_vocab *sift__vocab_build(const sift__vocab_spec *spec, sift_error *err);

/* llama.cpp's token attribute bits (llama_token_attr). */
#define SIFT_VATTR_UNKNOWN      0x001u
#define SIFT_VATTR_UNUSED       0x002u
#define SIFT_VATTR_NORMAL       0x004u
#define SIFT_VATTR_CONTROL      0x008u
#define SIFT_VATTR_USER_DEFINED 0x010u
#define SIFT_VATTR_BYTE         0x020u
#define SIFT_VATTR_NORMALIZED   0x040u
#define SIFT_VATTR_LSTRIP       0x080u
#define SIFT_VATTR_RSTRIP       0x100u
#define SIFT_VATTR_SINGLE_WORD  0x200u

/* A node of the special-token trie: children as a sibling list, labels are bytes. */
typedef struct sift__trie_node {
    int32_t child, sibling; /* node indices, -1 = none */
    int32_t token;          /* special token ending here, or -1 */
    uint8_t byte;
} sift__trie_node;

struct sift_vocab {
    sift_vocab_type type;
    char *model, *pre, *name, *arch;
    const sift__pretok_def *pre_def; /* BPE */
    sift__pretok *pretok;            /* BPE */

    int32_t n_tokens;
    sift__strtab strs;  /* ids [0, n_tokens) are the tokens; BPE merge strings follow */
    float *score;
    uint16_t *attr;    /* SIFT_VATTR_* */
    int32_t max_token_len;

    /* token_to_piece(special = true) of every token */
    char *piece_arena;
    uint32_t *piece_off, *piece_len;
    const char **piece_ptr; /* for sift_vocab_view */
    uint8_t *view_attr;     /* SIFT_TOKEN_ATTR_* for sift_vocab_view */
    uint64_t identity;      /* sift_vocab_view.identity: unique per vocabulary built in this process */

    sift_token bos, eos, eot, eom, unk, sep, pad, mask, nl;
    sift_token fim_pre, fim_suf, fim_mid, fim_pad, fim_rep, fim_sep;
    sift_token *eog; /* sorted */
    int32_t n_eog;
    sift_token *suppress; /* tokenizer.ggml.suppress_tokens in the file's order, out-of-range ids dropped */
    int32_t n_suppress;

    bool add_bos, add_eos, add_sep, add_space_prefix, remove_extra_ws, escape_whitespaces,
        clean_spaces, ignore_merges, lowercase, strip_accents;
    bool bpe_chars; /* BPE over raw UTF-8 characters, SentencePiece-style ("gemma4"; SIFT_PRE_CHARS) */

    /* special tokens for partitioning text, in priority order (longest text first) */
    sift_token *special;
    int32_t n_special;
    int32_t *special_rank; /* [n_tokens]: index into special[], -1 if not special */
    sift__trie_node *trie;
    int32_t n_trie;
    int32_t trie_root[256];

    /* BPE */
    sift__pairtab merges;
    int64_t n_merges;
    int32_t byte_sid[256];   /* string id of the byte-level character of each byte, -1 if none */
    sift_token byte1[256];   /* token whose text is exactly that one byte (BPE fallback), -1 */
    /* SPM: token for a raw byte ("<0xXX>", else the one-byte text), -1 if none */
    sift_token byte_token[256];
    /* SPM: no token has "▁" after a character other than "▁", so no merge ever crosses
     * the start of a "▁" run and the text can be merged run by run (tokenizer_spm.c) */
    bool spm_split;
};

static inline bool sift__vocab_valid_id(const sift_vocab *v, sift_token t)
{
    return t >= 0 && t < v->n_tokens;
}

/* Token id of text s[0..n), or -1 (llama.cpp's text_to_token). */
static inline sift_token sift__vocab_find(const sift_vocab *v, const char *s, size_t n)
{
    int32_t id = sift__strtab_find(&v->strs, s, n);
    return id < v->n_tokens ? id : -1;
}

#endif
