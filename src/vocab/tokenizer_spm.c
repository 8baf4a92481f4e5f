/*
 * tokenizer_spm.c - SentencePiece (BPE-by-score) tokenization, as llama.cpp's
 * llm_tokenizer_spm_session does it.
 *
 * The fragment's spaces become "▁" (U+2581), with one more "▁" in front when the caller
 * asks for the leading space. The text is cut into UTF-8 characters by their first byte
 * alone (no validation: a stray continuation byte is a character of its own, a truncated
 * sequence at the end is shortened). Then, repeatedly, the adjacent pair whose
 * concatenation is a vocabulary token with the highest score is merged - ties go to the
 * leftmost pair - until no adjacent pair forms a token. Each remaining piece is emitted as
 * its token, or, if it is not one (a character missing from the vocabulary), as the byte
 * tokens <0xXX> of its bytes.
 *
 * llama.cpp drives this with a priority queue of candidate pairs, pushing the two new pairs
 * after every merge and skipping stale entries when they come up; the queue then always
 * holds every current adjacent token pair, so each pop is the global best pair. We do the
 * same with a binary heap over a flat array (merge_heap.h, shared with tokenizer_bpe.c).
 * Pairs are contiguous in the escaped text, so the lookup hashes the bytes in place;
 * nothing is copied or allocated per pair.
 *
 * (llama.cpp also keeps a "rev_merge" map to re-split pieces that are not tokens; it only
 * ever records pairs that are tokens, so that path never splits anything and is not needed.
 * A byte without a <0xXX> token, where llama.cpp would throw, gives the unknown token.)
 */
#include <stdlib.h>
#include <string.h>

#include "vocab/merge_heap.h"
#include "vocab/unicode.h"
#include "vocab/tokenizers.h"

typedef struct {
    uint32_t start, n; /* bytes of the escaped text; n = 0 once merged into its left neighbour */
    int32_t prev, next;
} spm_sym;

typedef struct {
    float score;
    int32_t left, right;
    uint32_t size;
} spm_pair;

/* heap order: higher score first, then the leftmost pair */
static inline int pair_before(const spm_pair *a, const spm_pair *b)
{
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

SIFT__MERGE_HEAP(spm_heap, spm_pair, pair_before)

static int try_pair(const sift_vocab *v, const char *text, const spm_sym *sym, int32_t l, int32_t r, spm_heap *h)
{
    if (l < 0 || r < 0) return 0;
    uint32_t size = sym[l].n + sym[r].n;
    sift_token t = sift__vocab_find(v, text + sym[l].start, size);
    if (t < 0) return 0;
    return spm_heap_push(h, (spm_pair){v->score[t], l, r, size});
}

static bool is_space_mark(const char *text, const spm_sym *sym)
{
    return sym->n == 3 && !memcmp(text + sym->start, "\xE2\x96\x81", 3);
}

/* Merge the best pair until none is left, within symbols [first, end). */
static int merge_segment(const sift_vocab *v, const char *e, spm_sym *sym, int32_t first, int32_t end, spm_heap *h)
{
    int rc = 0;
    h->n = 0;
    for (int32_t i = first + 1; i < end && !rc; i++) rc = try_pair(v, e, sym, i - 1, i, h);
    while (h->n && !rc) {
        spm_pair bp = spm_heap_pop(h);
        spm_sym *l = &sym[bp.left], *r = &sym[bp.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != bp.size) continue; /* stale */
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) sym[r->next].prev = bp.left;
        rc = try_pair(v, e, sym, l->prev, bp.left, h);
        if (!rc) rc = try_pair(v, e, sym, bp.left, l->next, h);
    }
    return rc;
}

/* Each piece as its token, or its bytes as byte tokens. */
static void emit_segment(const sift_vocab *v, const char *e, const spm_sym *sym, int32_t first, sift__tokbuf *out)
{
    for (int32_t i = first; i != -1; i = sym[i].next) {
        sift_token t = sift__vocab_find(v, e + sym[i].start, sym[i].n);
        if (t >= 0) {
            sift__tokbuf_push(out, t);
            continue;
        }
        for (uint32_t j = 0; j < sym[i].n; j++) {
            sift_token b = v->byte_token[(uint8_t)e[sym[i].start + j]];
            if (b < 0) b = v->unk;
            if (b >= 0) sift__tokbuf_push(out, b);
        }
    }
}

int sift__spm_tokenize(const sift_vocab *v, sift__tok_scratch *s, const char *text, size_t len, bool prefix_space,
                      sift__tokbuf *out)
{
    /* escape: ' ' -> "▁" */
    size_t spaces = 0;
    for (size_t i = 0; i < len; i++) spaces += text[i] == ' ';
    size_t elen = len + 2 * spaces + (prefix_space ? 3 : 0);
    if (elen > UINT32_MAX) return SIFT_E_INVAL;
    void *p = s->buf;
    if (sift__tok_reserve(&p, &s->cap_buf, elen ? elen : 1, 1)) return SIFT_E_NOMEM;
    s->buf = p;
    char *e = s->buf;
    size_t k = 0;
    if (prefix_space) {
        memcpy(e, "\xE2\x96\x81", 3);
        k = 3;
    }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(e + k, "\xE2\x96\x81", 3);
            k += 3;
        } else {
            e[k++] = text[i];
        }
    }
    if (!elen) return 0;

    /* characters */
    p = s->sym;
    if (sift__tok_reserve(&p, &s->cap_sym, elen, sizeof(spm_sym))) return SIFT_E_NOMEM;
    s->sym = p;
    spm_sym *sym = s->sym;
    int32_t n = 0;
    for (size_t off = 0; off < elen;) {
        size_t cl = sift__utf8_seq_len((uint8_t)e[off]);
        if (cl > elen - off) cl = elen - off;
        sym[n] = (spm_sym){(uint32_t)off, (uint32_t)cl, n - 1, off + cl == elen ? -1 : n + 1};
        off += cl;
        n++;
    }

    /* Segments that no merge crosses (see spm_split in vocab.h): a new one starts at each
     * "▁" that follows another character. Without that property, one segment. */
    spm_heap h = {s->heap, 0, s->cap_heap};
    int rc = 0;
    for (int32_t first = 0; first < n && !rc;) {
        int32_t end = first + 1;
        if (v->spm_split)
            while (end < n && !(is_space_mark(e, &sym[end]) && !is_space_mark(e, &sym[end - 1]))) end++;
        else
            end = n;
        sym[first].prev = -1;
        sym[end - 1].next = -1;
        rc = merge_segment(v, e, sym, first, end, &h);
        if (!rc) emit_segment(v, e, sym, first, out);
        first = end;
    }
    s->heap = h.a;
    s->cap_heap = h.cap;
    return rc ? rc : out->status;
}
