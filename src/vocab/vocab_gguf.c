/*
 * vocab_gguf.c - reading a vocabulary description out of GGUF metadata (the tokenizer.*
 * keys) into a sift__vocab_spec, then building the vocabulary from it.
 *
 * Types are checked as llama.cpp checks them: the token list must be an array of strings,
 * scores an array of f32 or i32, token types an array of i32, merges an array of strings;
 * flags (add_bos_token, ...) must be bools. Special token ids are accepted as any integer
 * type (llama.cpp wants u32; other integer types are read, not refused); an id outside the
 * vocabulary is ignored, as llama.cpp ignores it ("bad special token"), and the type's
 * default stays. Errors name the key.
 */
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "vocab/vocab.h"

static int get_str(const sift_gguf *g, const char *key, const char **out, sift_error *err)
{
    const sift_gguf_value *val = sift_gguf_get(g, key);
    *out = NULL;
    if (!val) return 0;
    if (!(*out = sift_gguf_value_str(val, NULL)))
        return sift__error_set(err, SIFT_E_FORMAT, "%s: expected a string, found %s", key,
                              sift_gguf_type_name(sift_gguf_value_type(val)));
    return 0;
}

static int get_bool(const sift_gguf *g, const char *key, int8_t *out, sift_error *err)
{
    const sift_gguf_value *val = sift_gguf_get(g, key);
    bool b;
    if (!val) return 0;
    if (sift_gguf_value_bool(val, &b) != SIFT_OK)
        return sift__error_set(err, SIFT_E_FORMAT, "%s: expected a bool, found %s", key,
                              sift_gguf_type_name(sift_gguf_value_type(val)));
    *out = b;
    return 0;
}

/* An array of `want` elements (SIFT_GGUF_STRING, ...), or NULL when absent. */
static int get_array(const sift_gguf *g, const char *key, int want, int want2, const sift_gguf_value **out,
                     sift_error *err)
{
    const sift_gguf_value *val = sift_gguf_get(g, key);
    *out = NULL;
    if (!val) return 0;
    int t = sift_gguf_array_type(val);
    if (t != want && t != want2)
        return sift__error_set(err, SIFT_E_FORMAT, "%s: expected an array of %s, found %s%s%s", key,
                              sift_gguf_type_name(want), sift_gguf_type_name(sift_gguf_value_type(val)),
                              t >= 0 ? " of " : "", t >= 0 ? sift_gguf_type_name(t) : "");
    *out = val;
    return 0;
}

/* The strings of an array as pointer + length arrays (borrowed from g). */
static int string_array(const sift_gguf_value *arr, const char ***text, uint32_t **len, int64_t *n, const char *key,
                        sift_error *err)
{
    uint64_t count = sift_gguf_array_n(arr);
    if (count > (uint64_t)INT32_MAX) return sift__error_set(err, SIFT_E_FORMAT, "%s: %llu entries is too many", key,
                                                           (unsigned long long)count);
    *text = malloc(sizeof **text * (count ? count : 1));
    *len = malloc(sizeof **len * (count ? count : 1));
    if (!*text || !*len) return sift__error_set(err, SIFT_E_NOMEM, "out of memory");
    for (uint64_t i = 0; i < count; i++) {
        size_t l;
        (*text)[i] = sift_gguf_array_str(arr, i, &l);
        if (!(*text)[i] || l > UINT32_MAX)
            return sift__error_set(err, SIFT_E_FORMAT, "%s: entry %llu is not a usable string", key,
                                  (unsigned long long)i);
        (*len)[i] = (uint32_t)l;
    }
    *n = (int64_t)count;
    return 0;
}

sift_vocab *sift_vocab_from_gguf(const sift_gguf *g, sift_error *err)
{
    if (!g) {
        sift__error_set(err, SIFT_E_INVAL, "no GGUF file");
        return NULL;
    }
    sift__vocab_spec spec;
    sift__vocab_spec_init(&spec);
    const char **tok_text = NULL, **merge_text = NULL;
    uint32_t *tok_len = NULL, *merge_len = NULL;
    sift_vocab *v = NULL;
    const sift_gguf_value *tokens, *scores, *types, *merges, *suppress;

    if (get_str(g, "tokenizer.ggml.model", &spec.model, err) || get_str(g, "tokenizer.ggml.pre", &spec.pre, err) ||
        get_str(g, "general.name", &spec.name, err) || get_str(g, "general.architecture", &spec.arch, err))
        goto done;
    if (!spec.model) {
        sift__error_set(err, SIFT_E_FORMAT, "tokenizer.ggml.model: missing (the file has no tokenizer)");
        goto done;
    }
    if (get_array(g, "tokenizer.ggml.tokens", SIFT_GGUF_STRING, -2, &tokens, err) ||
        get_array(g, "tokenizer.ggml.scores", SIFT_GGUF_FLOAT32, SIFT_GGUF_INT32, &scores, err) ||
        get_array(g, "tokenizer.ggml.token_type", SIFT_GGUF_INT32, -2, &types, err) ||
        get_array(g, "tokenizer.ggml.merges", SIFT_GGUF_STRING, -2, &merges, err) ||
        get_array(g, "tokenizer.ggml.suppress_tokens", SIFT_GGUF_INT32, -2, &suppress, err))
        goto done;
    if (!tokens) {
        sift__error_set(err, SIFT_E_FORMAT, "tokenizer.ggml.tokens: missing (cannot find the vocabulary)");
        goto done;
    }
    if (string_array(tokens, &tok_text, &tok_len, &spec.n_tokens, "tokenizer.ggml.tokens", err)) goto done;
    spec.text = tok_text;
    spec.text_len = tok_len;
    if (scores && (int64_t)sift_gguf_array_n(scores) < spec.n_tokens) {
        sift__error_set(err, SIFT_E_FORMAT, "tokenizer.ggml.scores: %llu scores for %lld tokens",
                       (unsigned long long)sift_gguf_array_n(scores), (long long)spec.n_tokens);
        goto done;
    }
    if (types && (int64_t)sift_gguf_array_n(types) < spec.n_tokens) {
        sift__error_set(err, SIFT_E_FORMAT, "tokenizer.ggml.token_type: %llu types for %lld tokens",
                       (unsigned long long)sift_gguf_array_n(types), (long long)spec.n_tokens);
        goto done;
    }
    if (scores) {
        spec.n_scores = (int64_t)sift_gguf_array_n(scores);
        if (sift_gguf_array_type(scores) == SIFT_GGUF_FLOAT32) spec.scores = sift_gguf_array_data(scores);
        else spec.iscores = sift_gguf_array_data(scores);
    }
    if (types) {
        spec.n_types = (int64_t)sift_gguf_array_n(types);
        spec.types = sift_gguf_array_data(types);
    }
    if (suppress) {
        spec.n_suppress = (int64_t)sift_gguf_array_n(suppress);
        spec.suppress = sift_gguf_array_data(suppress);
    }
    if (merges) {
        spec.has_merges = true;
        if (string_array(merges, &merge_text, &merge_len, &spec.n_merges, "tokenizer.ggml.merges", err)) goto done;
        spec.merges = merge_text;
        spec.merge_len = merge_len;
    }
    for (int k = 0; k < SIFT_VKEY_COUNT; k++) {
        const sift_gguf_value *val = sift_gguf_get(g, sift__vocab_id_keys[k]);
        int64_t id;
        if (!val) continue;
        if (sift_gguf_value_int(val, &id) != SIFT_OK) {
            sift__error_set(err, SIFT_E_FORMAT, "%s: expected an integer, found %s", sift__vocab_id_keys[k],
                           sift_gguf_type_name(sift_gguf_value_type(val)));
            goto done;
        }
        spec.ids[k] = id < 0 ? INT64_MAX : id; /* out of range: ignored, as llama.cpp does */
    }
    if (get_bool(g, "tokenizer.ggml.add_bos_token", &spec.add_bos, err) ||
        get_bool(g, "tokenizer.ggml.add_eos_token", &spec.add_eos, err) ||
        get_bool(g, "tokenizer.ggml.add_sep_token", &spec.add_sep, err) ||
        get_bool(g, "tokenizer.ggml.add_space_prefix", &spec.add_space_prefix, err) ||
        get_bool(g, "tokenizer.ggml.remove_extra_whitespaces", &spec.remove_extra_ws, err) ||
        get_bool(g, "tokenizer.ggml.normalizer.lowercase", &spec.lowercase, err) ||
        get_bool(g, "tokenizer.ggml.normalizer.strip_accents", &spec.strip_accents, err))
        goto done;
    v = sift__vocab_build(&spec, err);
done:
    free(tok_text);
    free(tok_len);
    free(merge_text);
    free(merge_len);
    return v;
}

sift_vocab *sift_vocab_load(const char *path, sift_error *err)
{
    if (!path) {
        sift__error_set(err, SIFT_E_INVAL, "no path");
        return NULL;
    }
    sift_gguf *g = sift_gguf_open(path, err);
    if (!g) return NULL;
    sift_vocab *v = sift_vocab_from_gguf(g, err);
    sift_gguf_close(g);
    return v;
}
