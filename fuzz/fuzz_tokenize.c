/*
 * fuzz_tokenize.c - libFuzzer target for the tokenizers: arbitrary bytes -> tokenize ->
 * pieces -> detokenize -> tokenize again, on real vocabularies of every kind.
 *
 * Input layout: byte 0 picks the vocabulary (stories260K SentencePiece, gpt-2, deepseek-llm,
 * falcon and mpt byte-level BPE - custom splitter, PCRE2 8- and 32-bit paths, user-defined
 * space tokens -, phi-3 SentencePiece with RSTRIP specials, bert-bge WordPiece); byte 1 holds
 * the flags (add_special, parse_special, remove_special, unparse_special, a small output
 * buffer); the rest is the text. Vocabularies are loaded once, from $SIFT_SHARED (default
 * ../shared) - a missing file is skipped, not an error.
 *
 * Checked on every input: no crash, no sanitizer report; tokenize returns n >= 0 or, with a
 * small buffer, exactly -n; every id is in range; detokenize with a too-small buffer
 * returns minus the size it then fills exactly; every piece has the size token_to_piece
 * reports; and tokenizing the detokenized text succeeds.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sift.h"

static const char *const vocab_files[] = {
    "models/stories260K.gguf",
    "models/vocab/ggml-vocab-gpt-2.gguf",
    "models/vocab/ggml-vocab-deepseek-llm.gguf",
    "models/vocab/ggml-vocab-falcon.gguf",
    "models/vocab/ggml-vocab-mpt.gguf",
    "models/vocab/ggml-vocab-phi-3.gguf",
    "models/vocab/ggml-vocab-bert-bge.gguf",
};
#define N_VOCABS (sizeof vocab_files / sizeof vocab_files[0])
static sift_vocab *vocabs[N_VOCABS];

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *root = getenv("SIFT_SHARED");
    for (size_t i = 0; i < N_VOCABS; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", root && *root ? root : "../shared", vocab_files[i]);
        sift_error err = {0};
        vocabs[i] = sift_vocab_load(path, &err);
        if (!vocabs[i]) fprintf(stderr, "fuzz_tokenize: skipping %s: %s\n", path, err.msg);
    }
    return 0;
}

#define CHECK(cond)                                                                        \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "fuzz_tokenize: check failed: %s (line %d)\n", #cond, __LINE__); \
            abort();                                                                       \
        }                                                                                  \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2 || size > 1 << 16) return 0;
    const sift_vocab *v = vocabs[data[0] % N_VOCABS];
    if (!v) return 0;
    bool add_special = data[1] & 1, parse_special = data[1] & 2, remove_special = data[1] & 4,
         unparse_special = data[1] & 8, small = data[1] & 16;
    const char *text = (const char *)data + 2;
    size_t len = size - 2;

    int32_t cap = 3 * (int32_t)len + 8; /* an invalid byte becomes U+FFFD: up to 3 byte tokens */
    sift_token *ids = malloc(sizeof *ids * (size_t)cap);
    CHECK(ids);
    int32_t n = sift_tokenize(v, text, len, ids, small ? 1 : cap, add_special, parse_special);
    if (small && n < 0) {
        int32_t need = -n;
        CHECK(need > 1 && need <= cap);
        n = sift_tokenize(v, text, len, ids, need, add_special, parse_special);
        CHECK(n == need);
    }
    CHECK(n >= 0 && n <= cap);
    int32_t nt = sift_vocab_n_tokens(v);
    size_t total = 0;
    for (int32_t i = 0; i < n; i++) {
        CHECK(ids[i] >= 0 && ids[i] < nt);
        char piece[8];
        int32_t k = sift_token_to_piece(v, ids[i], piece, sizeof piece, 0, unparse_special);
        if (k < 0) {
            char *big = malloc((size_t)-k);
            CHECK(big);
            CHECK(sift_token_to_piece(v, ids[i], big, -k, 0, unparse_special) == -k);
            free(big);
            k = -k;
        }
        total += (size_t)k;
    }

    int32_t dcap = (int32_t)total + 1;
    char *out = malloc((size_t)dcap);
    CHECK(out);
    int32_t d = sift_detokenize(v, ids, n, out, small ? 0 : dcap, remove_special, unparse_special);
    if (small && d < 0) {
        CHECK(-d <= dcap);
        int32_t d2 = sift_detokenize(v, ids, n, out, -d, remove_special, unparse_special);
        CHECK(d2 >= 0 && d2 <= -d); /* the clean-up passes only ever shorten */
        d = d2;
    }
    CHECK(d >= 0 && (size_t)d <= total);

    int32_t n2 = sift_tokenize(v, out, (size_t)d, NULL, 0, false, false);
    CHECK(n2 <= 0 && n2 != INT32_MIN);
    free(out);
    free(ids);
    return 0;
}
