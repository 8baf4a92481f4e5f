/*
 * vocab_cache.c - the legacy entry points' grammar compilers: one per distinct vocabulary
 * in the process, kept for the next grammar (sift_sampler_init_grammar*, engines made from
 * a view). Code that controls its memory makes its own compiler (sift_grammar_compiler_new,
 * compiler.c) with its own parameters and cache; this is only what a caller that passes a
 * bare view gets.
 *
 * Why: building the trie sorts and walks every token text (25 ms on a 102k vocabulary),
 * which used to be redone for every grammar - most of what a json_schema request cost
 * before its first mask. Nothing in it depends on the grammar, so it is built once per
 * compiler, and every engine of that compiler holds a reference to it.
 *
 * Identity is by content, not by pointer: a view is matched against a cached vocabulary by
 * comparing its texts and end-of-generation flags (a linear pass, early out on the first
 * difference, sequential when the view's texts are contiguous), so a vocabulary freed and
 * another loaded at the same address can never be confused. A view from sift_vocab_view_get
 * also carries an identity (a number its vocabulary alone has, for the life of the process):
 * a slot remembers the identity it was last seen with, and a view naming it is a hit at once.
 * At most SLOTS compilers are kept; a new vocabulary replaces the least recently used one
 * (whose engines keep it alive as long as they need it).
 */
#include <pthread.h>
#include <stdlib.h>

#include "core/status.h"
#include "grammar/compiler.h"

#define SLOTS 4

typedef struct {
    sift_grammar_compiler *c; /* the slot's reference */
    uint64_t stamp;    /* last use */
    uint64_t identity; /* the view identity last seen with these contents (0: none) */
} slot;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static slot slots[SLOTS];
static uint64_t clock_ticks;

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

sift_grammar_compiler *sift__gx_compiler_acquire(const sift_vocab_view *view, sift_error *err)
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
        if (slots[k].c && slots[k].identity == view->identity && sift__gx_compiler_vocab(slots[k].c)->n_tokens == view->n_tokens)
            hit = k;
    for (int k = 0; k < SLOTS && hit < 0; k++)
        if (slots[k].c && same_vocab(sift__gx_compiler_vocab(slots[k].c), view)) {
            hit = k;
            if (view->identity) slots[k].identity = view->identity;
        }
    if (hit >= 0) {
        slots[hit].stamp = ++clock_ticks;
        sift_grammar_compiler *c = slots[hit].c;
        sift__gx_compiler_retain(c);
        pthread_mutex_unlock(&lock);
        return c;
    }
    pthread_mutex_unlock(&lock);
    /* build outside the lock (tens of milliseconds); a racing builder of the same
     * vocabulary only costs a duplicate. Its grammars are not cached: the legacy entry
     * points compile every grammar, with the caller's budget. */
    sift_grammar_compiler_params p = sift_grammar_compiler_default_params();
    p.no_cache = true;
    sift_grammar_compiler *nc = sift__gx_compiler_make(view, &p, err);
    if (!nc) return NULL;
    pthread_mutex_lock(&lock);
    int k = 0; /* a free slot, or the least recently used one (its users keep their reference) */
    for (int i = 0; i < SLOTS; i++) {
        if (!slots[i].c) {
            k = i;
            break;
        }
        if (slots[i].stamp < slots[k].stamp) k = i;
    }
    sift_grammar_compiler *old = slots[k].c;
    slots[k] = (slot){nc, ++clock_ticks, view->identity};
    sift__gx_compiler_retain(nc); /* the caller's; the slot keeps the first */
    pthread_mutex_unlock(&lock);
    sift__gx_compiler_release(old);
    return nc;
}
