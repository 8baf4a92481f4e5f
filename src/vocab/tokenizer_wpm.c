/*
 * tokenizer_wpm.c - WordPiece (BERT) tokenization, as llama.cpp's llm_tokenizer_wpm_session
 * does it.
 *
 * Normalization (BertNormalizer, as llama.cpp implements it): decode to code points
 * (invalid UTF-8 -> U+FFFD); with strip_accents, map each code point to the first code
 * point of its NFD decomposition and drop marks (\p{M}); drop NUL, U+FFFD and control
 * characters; lowercase when asked; whitespace separates words; punctuation, ASCII symbols
 * and CJK ideographs are words of their own.
 *
 * Each word, prefixed with "▁" (the GGUF conversion writes word-initial pieces that way and
 * continuation pieces without the "##"), is cut greedily from the left into the longest
 * vocabulary tokens, scanning byte offsets; if some position matches nothing, the whole
 * word becomes the unknown token.
 */
#include <stdlib.h>
#include <string.h>

#include "vocab/unicode.h"
#include "vocab/tokenizers.h"

static bool is_chinese_char(uint32_t c)
{
    return (c >= 0x04E00 && c <= 0x09FFF) || (c >= 0x03400 && c <= 0x04DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) ||
           (c >= 0x2B920 && c <= 0x2CEAF) || /* sic: 0x2B820 in Unicode, 0x2B920 in HF and llama.cpp */
           (c >= 0x0F900 && c <= 0x0FAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

/* Tokenize one normalized word word[0..n) (which starts with "▁"). */
static void wpm_word(const sift_vocab *v, const char *word, size_t n, sift__tokbuf *out)
{
    size_t first = out->n;
    for (size_t i = 0; i < n; i++) {
        bool match = false;
        size_t j = i + (size_t)v->max_token_len + 1;
        if (j > n) j = n;
        for (; j > i; j--) {
            sift_token t = sift__vocab_find(v, word + i, j - i);
            if (t >= 0) {
                sift__tokbuf_push(out, t);
                match = true;
                i = j - 1;
                break;
            }
        }
        if (!match) {
            out->n = first;
            break;
        }
    }
    if (out->n == first && v->unk >= 0) sift__tokbuf_push(out, v->unk);
}

int sift__wpm_tokenize(const sift_vocab *v, sift__tok_scratch *s, const char *text, size_t len, sift__tokbuf *out)
{
    if (!len) return 0;
    void *p = s->cpts;
    if (sift__tok_reserve(&p, &s->cap_cpts, len, sizeof *s->cpts)) return SIFT_E_NOMEM;
    s->cpts = p;
    size_t n = sift__utf8_to_cpts(text, len, s->cpts);
    /* a word is "▁" + at most 4 bytes per code point */
    p = s->buf;
    if (sift__tok_reserve(&p, &s->cap_buf, 3 + 4 * n + 4, 1)) return SIFT_E_NOMEM;
    s->buf = p;
    char *word = s->buf;
    memcpy(word, "\xE2\x96\x81", 3);
    size_t wl = 3; /* bytes in word, "▁" included */
#define FLUSH()                                        \
    do {                                               \
        if (wl > 3) wpm_word(v, word, wl, out);        \
        wl = 3;                                        \
    } while (0)
    for (size_t i = 0; i < n; i++) {
        uint32_t cpt = s->cpts[i];
        if (v->strip_accents) cpt = sift__unicode_nfd_head(cpt);
        uint16_t f = sift__unicode_flags(cpt);
        if (f & SIFT_U_WHITESPACE) {
            FLUSH();
            continue;
        }
        if (cpt == 0 || cpt == 0xFFFD || (f & SIFT_U_CONTROL)) continue;
        if (v->strip_accents && (f & SIFT_U_MARK)) continue;
        char u8[4];
        size_t k = sift__utf8_encode(v->lowercase ? sift__unicode_tolower(cpt) : cpt, u8);
        if ((f & SIFT_U_PUNCT) || (cpt < 0x7F && (f & SIFT_U_SYMBOL)) || is_chinese_char(cpt)) {
            FLUSH();
            memcpy(word + 3, u8, k);
            wl = 3 + k;
            FLUSH();
        } else {
            memcpy(word + wl, u8, k);
            wl += k;
        }
    }
    FLUSH();
#undef FLUSH
    return out->status;
}
