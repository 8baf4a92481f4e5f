/*
 * tokenize.c - sift_tokenize: special tokens cut out of the text, then the vocabulary's
 * tokenizer on each remaining piece, as llama.cpp's llama_vocab::impl::tokenize does.
 *
 * Special tokens first (llama.cpp's tokenizer_st_partition). The text starts as one raw
 * fragment. For each special token in priority order (longest text first), every raw
 * fragment is searched left to right for the token's text; each occurrence splits the
 * fragment into "left raw, the token, right raw", and the search continues in the right
 * part. A token with LSTRIP/RSTRIP also swallows ASCII whitespace on that side. Control
 * and unknown tokens take part only with parse_special; user-defined ones always do.
 *
 * Done literally that is O(special tokens x text) - 2400 memmem passes for deepseek-llm,
 * most of llama.cpp's tokenizing time on such vocabularies. We first scan the text once
 * with a trie of all special texts to learn which tokens occur at all, and run the same
 * splitting loop for those only. A token that does not occur in the text cannot occur in
 * a fragment of it, so the fragments are identical.
 *
 * Then per fragment: a token fragment is emitted as is; raw text goes to the SentencePiece
 * session (with a leading space when add_space_prefix is set and the fragment starts the
 * text or follows a special token, unless SIFT_TOKENIZE_CONTINUATION says the text goes on
 * from earlier text), the BPE session or the WordPiece session.
 * add_special adds BOS/EOS as the vocabulary says (WordPiece: always CLS ... SEP).
 */
#include <stdlib.h>
#include <string.h>

#include "vocab/tokenizers.h"

/* ---- special-token partition -------------------------------------------------------------- */

typedef struct {
    uint32_t off, len;
    sift_token tok; /* -1: raw text */
} frag;

typedef struct {
    frag *a;
    size_t n, cap;
} frag_list;

static int frag_push(frag_list *l, uint32_t off, uint32_t len, sift_token tok)
{
    void *p = l->a;
    if (sift__tok_reserve(&p, &l->cap, l->n + 1, sizeof *l->a)) return SIFT_E_NOMEM;
    l->a = p;
    l->a[l->n++] = (frag){off, len, tok};
    return 0;
}

static inline int ascii_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

static bool special_allowed(const sift_vocab *v, sift_token t, bool parse_special)
{
    return parse_special || !(v->attr[t] & (SIFT_VATTR_CONTROL | SIFT_VATTR_UNKNOWN));
}

/* Which special tokens (by rank) occur in text; returns how many, ranks in *ranks sorted. */
static int occurring_specials(const sift_vocab *v, const char *text, size_t len, bool parse_special,
                              int32_t **ranks, size_t *n_ranks)
{
    *ranks = NULL;
    *n_ranks = 0;
    uint8_t *seen = calloc((size_t)v->n_special, 1);
    if (!seen) return SIFT_E_NOMEM;
    const uint8_t *s = (const uint8_t *)text;
    size_t count = 0;
    for (size_t i = 0; i < len; i++) {
        int32_t node = v->trie_root[s[i]];
        for (size_t j = i + 1; node >= 0;) {
            sift_token t = v->trie[node].token;
            if (t >= 0 && !seen[v->special_rank[t]] && special_allowed(v, t, parse_special)) {
                seen[v->special_rank[t]] = 1;
                count++;
            }
            if (j >= len) break;
            uint8_t c = s[j++];
            int32_t ch = v->trie[node].child;
            while (ch >= 0 && v->trie[ch].byte != c) ch = v->trie[ch].sibling;
            node = ch;
        }
    }
    if (count) {
        *ranks = malloc(sizeof **ranks * count);
        if (!*ranks) {
            free(seen);
            return SIFT_E_NOMEM;
        }
        for (int32_t r = 0; r < v->n_special; r++)
            if (seen[r]) (*ranks)[(*n_ranks)++] = r;
    }
    free(seen);
    return 0;
}

/* Split every raw fragment of *cur at the occurrences of special token t, into *next. */
static int split_on_special(const sift_vocab *v, const char *text, sift_token t, const frag_list *cur, frag_list *next)
{
    size_t tlen;
    const char *ttext = sift__strtab_str(&v->strs, t, &tlen);
    uint16_t attr = v->attr[t];
    next->n = 0;
    for (size_t i = 0; i < cur->n; i++) {
        frag f = cur->a[i];
        if (f.tok >= 0) {
            if (frag_push(next, f.off, f.len, f.tok)) return SIFT_E_NOMEM;
            continue;
        }
        size_t base = f.off, blen = f.len;
        for (;;) {
            const char *m = blen >= tlen ? memmem(text + base, blen, ttext, tlen) : NULL;
            if (!m) {
                if (blen && frag_push(next, (uint32_t)base, (uint32_t)blen, -1)) return SIFT_E_NOMEM;
                break;
            }
            size_t match = (size_t)(m - text);
            if (match > base) {
                size_t left = match - base;
                if (attr & SIFT_VATTR_LSTRIP)
                    while (left > 0 && ascii_space(text[base + left - 1])) left--;
                if (left && frag_push(next, (uint32_t)base, (uint32_t)left, -1)) return SIFT_E_NOMEM;
            }
            if (frag_push(next, (uint32_t)match, (uint32_t)tlen, t)) return SIFT_E_NOMEM;
            size_t roff = match + tlen, rlen = base + blen - roff;
            if (attr & SIFT_VATTR_RSTRIP)
                while (rlen > 0 && ascii_space(text[roff])) {
                    roff++;
                    rlen--;
                }
            base = roff;
            blen = rlen;
        }
    }
    return 0;
}

static int partition(const sift_vocab *v, const char *text, size_t len, bool parse_special, frag_list *out)
{
    out->n = 0;
    if (!len) return 0;
    if (frag_push(out, 0, (uint32_t)len, -1)) return SIFT_E_NOMEM;
    if (!v->n_special) return 0;
    int32_t *ranks;
    size_t n_ranks;
    if (occurring_specials(v, text, len, parse_special, &ranks, &n_ranks)) return SIFT_E_NOMEM;
    frag_list other = {0};
    int rc = 0;
    for (size_t k = 0; k < n_ranks && !rc; k++) {
        rc = split_on_special(v, text, v->special[ranks[k]], out, &other);
        frag_list t = *out;
        *out = other;
        other = t;
    }
    free(other.a);
    free(ranks);
    return rc;
}

/* ---- dispatch ----------------------------------------------------------------------------- */

int sift__vocab_tokenize_buf(const sift_vocab *v, const char *text, size_t len, uint32_t flags, sift__tokbuf *out)
{
    const bool add_special = flags & SIFT_TOKENIZE_ADD_SPECIAL, parse_special = flags & SIFT_TOKENIZE_PARSE_SPECIAL;
    frag_list frags = {0};
    sift__tok_scratch s = {0};
    int rc = partition(v, text, len, parse_special, &frags);
    if (rc) goto done;
    switch (v->type) {
    case SIFT_VOCAB_SPM: {
        /* the first fragment gets the leading space, unless the text continues earlier text */
        bool prev_special = !(flags & SIFT_TOKENIZE_CONTINUATION);
        if (add_special && v->add_bos) sift__tokbuf_push(out, v->bos);
        for (size_t i = 0; i < frags.n && !rc; i++) {
            const frag *f = &frags.a[i];
            if (f->tok >= 0) {
                sift__tokbuf_push(out, f->tok);
                prev_special = true;
            } else {
                rc = sift__spm_tokenize(v, &s, text + f->off, f->len, v->add_space_prefix && prev_special, out);
                prev_special = false;
            }
        }
        if (add_special && v->add_eos) sift__tokbuf_push(out, v->eos);
        break;
    }
    case SIFT_VOCAB_BPE:
        if (add_special && v->add_bos) sift__tokbuf_push(out, v->bos);
        for (size_t i = 0; i < frags.n && !rc; i++) {
            const frag *f = &frags.a[i];
            if (f->tok >= 0) sift__tokbuf_push(out, f->tok);
            else rc = sift__bpe_tokenize(v, &s, text + f->off, f->len, out);
        }
        if (add_special && v->add_eos) sift__tokbuf_push(out, v->eos);
        break;
    case SIFT_VOCAB_WPM:
        if (add_special && v->bos >= 0) sift__tokbuf_push(out, v->bos);
        for (size_t i = 0; i < frags.n && !rc; i++) {
            const frag *f = &frags.a[i];
            if (f->tok >= 0) sift__tokbuf_push(out, f->tok);
            else rc = sift__wpm_tokenize(v, &s, text + f->off, f->len, out);
        }
        if (add_special && v->sep >= 0) sift__tokbuf_push(out, v->sep);
        break;
    default:
        rc = SIFT_E_INVAL;
    }
done:
    free(frags.a);
    sift__tok_scratch_free(&s);
    return rc ? rc : out->status;
}

int32_t sift_tokenize(const sift_vocab *v, const char *text, size_t len, sift_token *tokens, int32_t cap,
                      bool add_special, bool parse_special)
{
    return sift_tokenize_ex(v, text, len, tokens, cap,
                            (add_special ? SIFT_TOKENIZE_ADD_SPECIAL : 0u) | (parse_special ? SIFT_TOKENIZE_PARSE_SPECIAL : 0u));
}

int32_t sift_tokenize_ex(const sift_vocab *v, const char *text, size_t len, sift_token *tokens, int32_t cap, uint32_t flags)
{
    if (!v || (!text && len) || len > INT32_MAX || cap < 0 || (!tokens && cap > 0)) return INT32_MIN;
    if (flags & ~(uint32_t)(SIFT_TOKENIZE_ADD_SPECIAL | SIFT_TOKENIZE_PARSE_SPECIAL | SIFT_TOKENIZE_CONTINUATION)) return INT32_MIN;
    sift__tokbuf out = {0};
    int rc = sift__vocab_tokenize_buf(v, text ? text : "", len, flags, &out);
    int32_t result;
    if (rc || out.n >= (size_t)INT32_MAX) {
        result = INT32_MIN;
    } else if (out.n > (size_t)cap) {
        result = -(int32_t)out.n;
    } else {
        if (out.n) memcpy(tokens, out.ids, sizeof *tokens * out.n);
        result = (int32_t)out.n;
    }
    free(out.ids);
    return result;
}
