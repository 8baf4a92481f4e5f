/*
 * tokenizer_bpe.c - byte-level BPE tokenization, as llama.cpp's llm_tokenizer_bpe_session
 * does it.
 *
 * The fragment is decoded to code points (invalid UTF-8 -> U+FFFD), split into words by
 * the pre-tokenizer (pretok.c), and each word is re-encoded as UTF-8 and written in the
 * GPT-2 byte alphabet (every byte becomes one printable character). Then, per word,
 * starting from those characters, the adjacent pair with the lowest merge rank is merged -
 * ties go to the leftmost pair - until no adjacent pair has a rank. Each remaining piece is
 * emitted as its token; a piece that is not a token (only possible with inconsistent
 * merges or a character missing from the vocabulary) is emitted as the tokens of its single
 * bytes, where such tokens exist. With ignore_merges (Llama 3 style), a word that is a
 * token as a whole is taken directly.
 *
 * Strings become ids once, when the vocabulary is loaded: every token text, merge operand
 * and merge result is interned, and the merge table maps (left id, right id) to (rank,
 * result id). A merge step is then one hash probe on two integers; the initial characters'
 * ids come from a 256-entry table. The string comparison llama.cpp uses to spot stale
 * queue entries becomes an id comparison: ids are strings, one to one.
 *
 * Short words (nearly all) are merged by rescanning the few pair ranks for the minimum;
 * long ones (runs of punctuation, whitespace, digits) use a binary heap (merge_heap.h, shared
 * with tokenizer_spm.c), as llama.cpp does.
 * Both choose the same pair at every step: the minimum (rank, position).
 *
 * SentencePiece-style BPE (v->bpe_chars: the "gemma4" tokenizer model, llama.cpp's
 * byte_encode = false) runs the same merges over other symbols: every space is "▁" (U+2581)
 * before the split, a word's first symbols are its UTF-8 characters as they are (a character
 * no merge or token names has no string id, so it never merges), and a piece that is not a
 * token falls back to the "<0xXX>" tokens of its bytes. A word of newlines only that is a
 * token is taken whole (llama.cpp's Gemma 4 fix), so "\n\n" stays one token where the
 * merges would not build it.
 */
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vocab/merge_heap.h"
#include "vocab/unicode.h"
#include "vocab/tokenizers.h"

typedef struct {
    int32_t sid;    /* interned string id of the piece, -1 if not interned */
    uint32_t start; /* bytes of the encoded word */
    uint32_t n;     /* 0 once merged into its left neighbour */
    int32_t prev, next;
    int32_t rank;   /* rank of the pair (this, next), INT32_MAX if none (scan path) */
    int32_t result; /* its result id */
} bpe_sym;

typedef struct {
    int32_t rank, left, right, lsid, rsid;
} bpe_pair;

static inline void pair_rank(const sift_vocab *v, bpe_sym *sym, int32_t i)
{
    int32_t j = sym[i].next;
    sym[i].rank = INT32_MAX;
    if (j < 0 || sym[i].sid < 0 || sym[j].sid < 0) return;
    const sift__pair_slot *m = sift__pairtab_find(&v->merges, sym[i].sid, sym[j].sid);
    if (m) {
        sym[i].rank = m->rank;
        sym[i].result = m->result;
    }
}

static inline void merge_into_left(bpe_sym *sym, int32_t l, int32_t result)
{
    int32_t r = sym[l].next;
    sym[l].sid = result;
    sym[l].n += sym[r].n;
    sym[r].n = 0;
    sym[l].next = sym[r].next;
    if (sym[r].next >= 0) sym[sym[r].next].prev = l;
}

/* Few symbols: find the minimum pair rank by scanning. */
static void merge_scan(const sift_vocab *v, bpe_sym *sym, int32_t n)
{
    for (int32_t i = 0; i < n; i++) pair_rank(v, sym, i);
    for (;;) {
        int32_t best = -1, best_rank = INT32_MAX;
        for (int32_t i = 0; i >= 0; i = sym[i].next)
            if (sym[i].rank < best_rank) {
                best_rank = sym[i].rank;
                best = i;
            }
        if (best < 0) return;
        merge_into_left(sym, best, sym[best].result);
        pair_rank(v, sym, best);
        if (sym[best].prev >= 0) pair_rank(v, sym, sym[best].prev);
    }
}

static inline int pair_before(const bpe_pair *a, const bpe_pair *b)
{
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

SIFT__MERGE_HEAP(bpe_heap, bpe_pair, pair_before)

static int push_pair(const sift_vocab *v, const bpe_sym *sym, int32_t l, bpe_heap *h)
{
    if (l < 0) return 0;
    int32_t r = sym[l].next;
    if (r < 0 || sym[l].sid < 0 || sym[r].sid < 0) return 0;
    const sift__pair_slot *m = sift__pairtab_find(&v->merges, sym[l].sid, sym[r].sid);
    if (!m) return 0;
    return bpe_heap_push(h, (bpe_pair){m->rank, l, r, sym[l].sid, sym[r].sid});
}

/* Many symbols: llama.cpp's priority queue, stale entries skipped when popped. */
static int merge_heap(const sift_vocab *v, bpe_sym *sym, int32_t n, sift__tok_scratch *s)
{
    bpe_heap h = {s->heap, 0, s->cap_heap};
    int rc = 0;
    for (int32_t i = 0; i + 1 < n && !rc; i++) rc = push_pair(v, sym, i, &h);
    while (h.n && !rc) {
        bpe_pair p = bpe_heap_pop(&h);
        if (sym[p.left].n == 0 || sym[p.right].n == 0 || sym[p.left].next != p.right || sym[p.left].sid != p.lsid ||
            sym[p.right].sid != p.rsid)
            continue;
        const sift__pair_slot *m = sift__pairtab_find(&v->merges, p.lsid, p.rsid);
        merge_into_left(sym, p.left, m->result);
        rc = push_pair(v, sym, sym[p.left].prev, &h);
        if (!rc) rc = push_pair(v, sym, p.left, &h);
    }
    s->heap = h.a;
    s->cap_heap = h.cap;
    return rc;
}

#define SCAN_MAX 48 /* words up to this many bytes use merge_scan */

static bool all_newlines(const char *w, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (w[i] != '\n') return false;
    return true;
}

/* The "<0xXX>" token of byte b, or -1 (only that form: llama.cpp's fallback for byte_encode = false) */
static sift_token hex_byte_token(const sift_vocab *v, uint8_t b)
{
    char hex[7];
    snprintf(hex, sizeof hex, "<0x%02X>", b);
    return sift__vocab_find(v, hex, 6);
}

int sift__bpe_tokenize(const sift_vocab *v, sift__tok_scratch *s, const char *text, size_t len, sift__tokbuf *out)
{
    if (!len) return 0;
    void *p = s->cpts;
    size_t cap = s->cap_cpts;
    if (sift__tok_reserve(&p, &cap, len, sizeof *s->cpts)) return SIFT_E_NOMEM;
    s->cpts = p;
    p = s->flags;
    size_t cap2 = s->cap_cpts;
    if (sift__tok_reserve(&p, &cap2, len, sizeof *s->flags)) return SIFT_E_NOMEM;
    s->flags = p;
    s->cap_cpts = cap;
    size_t n = sift__utf8_to_cpts(text, len, s->cpts);
    if (v->bpe_chars)
        for (size_t i = 0; i < n; i++)
            if (s->cpts[i] == ' ') s->cpts[i] = 0x2581; /* escape_whitespaces */
    for (size_t i = 0; i < n; i++) s->flags[i] = sift__unicode_flags(s->cpts[i]);

    const uint32_t *pieces;
    size_t n_pieces;
    int rc = sift__pretok_split(v->pretok, &s->pre, s->cpts, s->flags, n, &pieces, &n_pieces);
    if (rc) return rc;

    size_t pos = 0;
    for (size_t w = 0; w < n_pieces; w++) {
        size_t wn = pieces[w];
        /* the word's bytes (re-encoded: invalid input became U+FFFD), then the byte alphabet */
        size_t nbytes = 0;
        char u8[4];
        for (size_t i = pos; i < pos + wn; i++) nbytes += sift__utf8_encode(s->cpts[i], u8);
        p = s->buf;
        if (sift__tok_reserve(&p, &s->cap_buf, nbytes * 2, 1)) return SIFT_E_NOMEM;
        s->buf = p;
        p = s->sym;
        if (sift__tok_reserve(&p, &s->cap_sym, nbytes, sizeof(bpe_sym))) return SIFT_E_NOMEM;
        s->sym = p;
        bpe_sym *sym = s->sym;
        char *word = s->buf;
        size_t wl = 0;
        int32_t ns = 0;
        for (size_t i = pos; i < pos + wn; i++) {
            size_t k = sift__utf8_encode(s->cpts[i], u8);
            if (v->bpe_chars) { /* one symbol per character, its UTF-8 as it is */
                memcpy(word + wl, u8, k);
                sym[ns] = (bpe_sym){sift__strtab_find(&v->strs, u8, k), (uint32_t)wl, (uint32_t)k, ns - 1, ns + 1, INT32_MAX, -1};
                wl += k;
                ns++;
                continue;
            }
            for (size_t j = 0; j < k; j++) {
                uint8_t b = (uint8_t)u8[j];
                size_t cl = sift__bytelevel_utf8(b, word + wl);
                sym[ns] = (bpe_sym){v->byte_sid[b], (uint32_t)wl, (uint32_t)cl, ns - 1, ns + 1, INT32_MAX, -1};
                wl += cl;
                ns++;
            }
        }
        pos += wn;
        if (ns == 0) continue;
        sym[ns - 1].next = -1;

        if (v->bpe_chars && all_newlines(word, wl)) {
            sift_token t = sift__vocab_find(v, word, wl);
            if (t >= 0) {
                sift__tokbuf_push(out, t);
                continue;
            }
        }

        if (v->ignore_merges) {
            sift_token t = sift__vocab_find(v, word, wl);
            if (t >= 0) {
                sift__tokbuf_push(out, t);
                continue;
            }
        }
        if (ns <= SCAN_MAX) merge_scan(v, sym, ns);
        else if ((rc = merge_heap(v, sym, ns, s))) return rc;

        for (int32_t i = 0; i >= 0; i = sym[i].next) {
            if (sym[i].sid >= 0 && sym[i].sid < v->n_tokens) {
                sift__tokbuf_push(out, sym[i].sid);
                continue;
            }
            for (uint32_t j = 0; j < sym[i].n; j++) { /* not a token: its single bytes, if tokens */
                const uint8_t b = (uint8_t)word[sym[i].start + j];
                sift_token t = v->bpe_chars ? hex_byte_token(v, b) : v->byte1[b];
                if (t >= 0) sift__tokbuf_push(out, t);
            }
        }
    }
    return out->status;
}
