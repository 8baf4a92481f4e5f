/*
 * vocab_cache.c - one grammar vocabulary (token texts, flags, the preorder trie) per
 * distinct vocabulary in the process, shared read-only by every grammar engine over it.
 *
 * Why: building the trie sorts and walks every token text (25 ms on a 102k vocabulary),
 * which used to be redone for every grammar - most of what a json_schema request cost
 * before its first mask. Nothing in it depends on the grammar, so it is built once: the
 * engines of one vocabulary (in the server, every request of one model) hold references to
 * the same sift__gx_vocab.
 *
 * Identity is by content, not by pointer: a view is matched against a cached vocabulary by
 * comparing its texts and end-of-generation flags (a linear pass, early out on the first
 * difference, sequential when the view's texts are contiguous), so a vocabulary freed and
 * another loaded at the same address can never be confused. A view from sift_vocab_view_get
 * also carries an identity (a number its vocabulary alone has, for the life of the process):
 * a slot remembers the identity it was last seen with, and a view naming it is a hit at once. The most recently used entry keeps one extra reference,
 * so a server between requests (no grammar alive) does not rebuild it for the next one;
 * at most SLOTS distinct vocabularies stay cached, the oldest unreferenced one leaves first.
 */
#include <pthread.h>
#include <stdlib.h>

#include "core/status.h"
#include "grammar/trie.h"

#define SLOTS 4

typedef struct {
    sift__gx_vocab *v;
    int refs;          /* engines holding it, plus one while it is the sticky entry */
    uint64_t stamp;    /* last use */
    uint64_t identity; /* the view identity last seen with these contents (0: none) */
} slot;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static slot slots[SLOTS];
static uint64_t clock_ticks;
static int sticky = -1;

/* The texts of `view` laid out as v->bytes is (token after token, no gaps: what
 * sift_vocab_view_get gives) and equal to it: one sequential pass over three arrays and a
 * single memcmp, instead of a memcmp per token - the per-token compare cost ~10 ms in a
 * freshly forked process with a cold cache (perf, maskbench children). False means "not
 * shown this way", not "different". */
static bool same_texts_contiguous(const sift__gx_vocab *v, const sift_vocab_view *view)
{
    const char *base = view->piece[0];
    if (!base) return false;
    const uintptr_t b = (uintptr_t)base;
    for (int32_t t = 0; t < view->n_tokens; t++) {
        uint32_t len = v->off[t + 1] - v->off[t];
        if (sift__gx_vocab_view_len(view, t) != len) return false;
        /* addresses compared as integers: piece[t] need not point into base's object */
        if (len && (uintptr_t)view->piece[t] != b + v->off[t]) return false;
    }
    return memcmp(v->bytes, base, v->off[view->n_tokens]) == 0;
}

static bool same_vocab(const sift__gx_vocab *v, const sift_vocab_view *view)
{
    if (v->n_tokens != view->n_tokens) return false;
    for (int32_t t = 0; t < view->n_tokens; t++) {
        bool eog = view->attr && (view->attr[t] & SIFT_TOKEN_ATTR_EOG);
        if (eog != ((v->flags[t] & GX_TOK_EOG) != 0)) return false;
    }
    if (same_texts_contiguous(v, view)) return true;
    for (int32_t t = 0; t < view->n_tokens; t++) {
        uint32_t len;
        const uint8_t *b = sift__gx_vocab_text(v, (uint32_t)t, &len);
        uint32_t vl = sift__gx_vocab_view_len(view, t);
        if (vl != len || (len && memcmp(b, view->piece[t], len))) return false;
        bool eog = view->attr && (view->attr[t] & SIFT_TOKEN_ATTR_EOG);
        if (eog != ((v->flags[t] & GX_TOK_EOG) != 0)) return false;
    }
    return true;
}

static void drop(int k)
{
    sift__gx_vocab_free(slots[k].v);
    sift__gx_free(slots[k].v);
    slots[k] = (slot){0};
}

static void make_sticky(int k)
{
    if (sticky == k) return;
    if (sticky >= 0 && --slots[sticky].refs == 0) drop(sticky);
    sticky = k;
    slots[k].refs++;
}

const sift__gx_vocab *sift__gx_vocab_acquire(const sift_vocab_view *view, sift_error *err)
{
    if (!view || view->n_tokens <= 0 || !view->piece || !view->piece_len) {
        sift__error_set(err, SIFT_E_INVAL, "grammar sampler: the vocabulary view is empty");
        return NULL;
    }
    pthread_mutex_lock(&lock);
    /* a view that names its contents (sift_vocab_view.identity) is found without reading
     * them: the comparison below reads every token text, ~330 us per grammar on a 102k
     * vocabulary (MaskBench: an eighth of the median time to first mask) */
    int hit = -1;
    for (int k = 0; k < SLOTS && view->identity && hit < 0; k++)
        if (slots[k].v && slots[k].identity == view->identity && slots[k].v->n_tokens == view->n_tokens) hit = k;
    for (int k = 0; k < SLOTS && hit < 0; k++)
        if (slots[k].v && same_vocab(slots[k].v, view)) {
            hit = k;
            if (view->identity) slots[k].identity = view->identity;
        }
    if (hit >= 0) {
        slots[hit].refs++;
        slots[hit].stamp = ++clock_ticks;
        make_sticky(hit);
        const sift__gx_vocab *v = slots[hit].v;
        pthread_mutex_unlock(&lock);
        return v;
    }
    pthread_mutex_unlock(&lock);
    /* build outside the lock (tens of milliseconds); a racing builder of the same
     * vocabulary only costs a duplicate, the first one stored is kept */
    sift__gx_vocab *nv = sift__gx_calloc(1, sizeof *nv);
    if (!nv) {
        sift__error_set(err, SIFT_E_NOMEM, "out of memory");
        return NULL;
    }
    if (sift__gx_vocab_build(nv, view, err) != SIFT_OK) {
        sift__gx_free(nv);
        return NULL;
    }
    pthread_mutex_lock(&lock);
    int k = -1;
    for (int i = 0; i < SLOTS && k < 0; i++)
        if (!slots[i].v) k = i;
    if (k < 0) { /* evict the least recently used entry no engine holds (only the sticky ref) */
        for (int i = 0; i < SLOTS; i++)
            if (slots[i].refs <= (i == sticky) && (k < 0 || slots[i].stamp < slots[k].stamp)) k = i;
        if (k >= 0) {
            if (k == sticky) sticky = -1;
            drop(k);
        }
    }
    if (k < 0) { /* every slot in use: this one is private to its engine */
        pthread_mutex_unlock(&lock);
        return nv;
    }
    slots[k] = (slot){nv, 1, ++clock_ticks, view->identity};
    make_sticky(k);
    pthread_mutex_unlock(&lock);
    return nv;
}

void sift__gx_vocab_release(const sift__gx_vocab *v)
{
    if (!v) return;
    pthread_mutex_lock(&lock);
    for (int k = 0; k < SLOTS; k++)
        if (slots[k].v == v) {
            if (--slots[k].refs == 0) drop(k);
            pthread_mutex_unlock(&lock);
            return;
        }
    pthread_mutex_unlock(&lock);
    /* a private one */
    sift__gx_vocab *m = (sift__gx_vocab *)v;
    sift__gx_vocab_free(m);
    sift__gx_free(m);
}
