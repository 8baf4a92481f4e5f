/*
 * detokenize.c - token ids back to text, as llama.cpp's token_to_piece and detokenize do.
 *
 * A token's piece is precomputed at load (vocab.c): the raw text of control, unknown and
 * user-defined tokens; the "▁"-to-space text of SentencePiece/WordPiece tokens; the byte
 * of a <0xXX> token; the bytes behind the GPT-2 alphabet for byte-level BPE. special = false
 * hides control and unknown tokens; lstrip removes leading spaces.
 *
 * detokenize concatenates pieces, removing one leading space from the first piece when the
 * vocabulary adds one while tokenizing (SentencePiece), unless a BOS was removed first -
 * llama.cpp's order of operations, kept so the round trip matches it. Then, for
 * vocabularies with clean_spaces (most BPE ones, WordPiece), three passes in place: drop the
 * space before " ? ! . ,", drop the spaces around a lone apostrophe " ' ", and drop the space
 * before "'s", "'m", "'re", "'ve". So detokenize(tokenize(s)) is not s for such texts in
 * those vocabularies, in llama.cpp as here.
 */
#include <string.h>

#include "vocab/vocab.h"

int32_t sift_token_to_piece(const sift_vocab *v, sift_token token, char *buf, int32_t len, int32_t lstrip,
                            bool special)
{
    if (!v || !sift__vocab_valid_id(v, token)) return 0;
    if (!special && (v->attr[token] & (SIFT_VATTR_UNKNOWN | SIFT_VATTR_CONTROL))) return 0;
    const char *piece = v->piece_ptr[token];
    int32_t size = (int32_t)v->piece_len[token];
    for (int32_t i = 0; i < lstrip && size && *piece == ' '; i++) {
        piece++;
        size--;
    }
    if (len < size || (!buf && size)) return -size;
    if (size) memcpy(buf, piece, (size_t)size);
    return size;
}

/* The three clean-up passes over text[0..total); returns the new length. */
static int32_t clean_spaces(char *text, int32_t total)
{
    /* 1: " ?", " !", " .", " ," lose the space */
    int32_t t1 = total;
    total = total ? 1 : 0;
    for (int32_t i = 1; i < t1; i++) {
        char x = text[i];
        if (text[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) total--;
        text[total++] = x;
    }
    /* 2: " ' " loses both spaces */
    int32_t t2 = total;
    total = total ? 1 : 0;
    for (int32_t i = 1; i < t2; i++) {
        char x = text[i];
        if (x == '\'' && i + 1 < t2 && text[i - 1] == ' ' && text[i + 1] == ' ') {
            total--;
            text[++i] = '\0';
        }
        text[total++] = x;
    }
    /* 3: " 's", " 'm", " 're", " 've" lose the space (" 't", " 'd", " 'll" keep it) */
    int32_t t3 = total;
    total = total ? 1 : 0;
    for (int32_t i = 1; i < t3; i++) {
        char x = text[i];
        if (text[i - 1] == ' ' && x == '\'' && i + 1 < t3) {
            char x1 = text[i + 1];
            if (x1 == 's' || x1 == 'm') {
                total--;
            } else if (x1 != 't' && x1 != 'd' && i + 2 < t3) {
                char x2 = text[i + 2];
                if ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) total--;
            }
        }
        text[total++] = x;
    }
    return total;
}

int32_t sift_detokenize(const sift_vocab *v, const sift_token *tokens, int32_t n_tokens, char *text, int32_t cap,
                        bool remove_special, bool unparse_special)
{
    if (!v || n_tokens < 0 || (!tokens && n_tokens) || cap < 0 || (!text && cap)) return INT32_MIN;
    for (int32_t i = 0; i < n_tokens; i++)
        if (!sift__vocab_valid_id(v, tokens[i])) return INT32_MIN;
    int32_t avail = cap;
    int64_t total = 0;
    bool remove_space = v->add_space_prefix;
    if (remove_special && v->add_bos && n_tokens > 0 && tokens[0] == v->bos) {
        remove_space = false;
        n_tokens--;
        tokens++;
    }
    if (remove_special && v->add_eos && n_tokens > 0 && tokens[n_tokens - 1] == v->eos) n_tokens--;
    char *out = text;
    for (int32_t i = 0; i < n_tokens; i++) {
        int32_t n = sift_token_to_piece(v, tokens[i], out, avail, remove_space, unparse_special);
        remove_space = false;
        if (n < 0) {
            avail = 0;
            total -= n;
        } else if (n > 0) {
            avail -= n;
            out += n;
            total += n;
        }
        if (total > INT32_MAX) return INT32_MIN;
    }
    if (total > cap) return -(int32_t)total;
    int32_t t = (int32_t)total;
    if (v->clean_spaces) t = clean_spaces(text, t);
    return t;
}
