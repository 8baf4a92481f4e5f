/*
 * lookup.c - prompt lookup: drafts from an n-gram index over the history (llama.cpp's
 * llama-lookup and its common_ngram_cache, reduced to one cache that grows with the text).
 *
 * Every history token t at index i is recorded as a continuation of the n-grams that end
 * just before it, hist[i - n .. i) for n = 1..N. A draft extends the history one token at
 * a time: take the longest n whose last n tokens (history tail plus the draft so far) were
 * seen before with a clear favourite continuation, and append that favourite; stop when no
 * n-gram has one. "Clear" means the favourite holds at least half of the n-gram's recorded
 * continuations (n >= 2), or more than half and at least two occurrences for a single token,
 * which is how llama.cpp's lax thresholds keep unigram guesses from drafting noise. Ties
 * go to the most recent continuation: text being copied continues the way it did last.
 *
 * The index is an open-addressing hash table keyed by (n, hash of the n tokens). An entry
 * stores where its key first occurred in the history, not the tokens, and a lookup compares
 * the tokens there, so hash collisions never give a wrong continuation. Each entry keeps at
 * most LK_NEXT continuations; a new one then replaces the rarest. The table doubles at half
 * load: pushing history may allocate (amortized), drafting never does.
 */
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "spec/spec.h"

#define TAB_INIT 4096u

static uint64_t key_hash(const sift_token *t, int32_t n)
{
    uint64_t h = 0x9E3779B97F4A7C15ull * (uint64_t)(n + 1);
    for (int32_t i = 0; i < n; i++) {
        h = (h ^ (uint32_t)t[i]) * 0xBF58476D1CE4E5B9ull;
        h ^= h >> 31;
    }
    return h ? h : 1;
}

/* The slot of key t[0..n) with hash h: its entry, or the empty slot where it would go. */
static lk_entry *find(const sift_draft *d, const sift_token *t, int32_t n, uint64_t h)
{
    const uint32_t mask = d->tab_cap - 1;
    for (uint32_t i = (uint32_t)h & mask;; i = (i + 1) & mask) {
        lk_entry *e = &d->tab[i];
        if (!e->h) return e;
        if (e->h == h && e->n == n && !memcmp(d->hist + e->end - n, t, (size_t)n * sizeof *t)) return e;
    }
}

static sift_status grow(sift_draft *d, sift_error *err)
{
    const uint32_t cap = d->tab_cap ? d->tab_cap * 2 : TAB_INIT;
    lk_entry *old = d->tab, *tab = calloc(cap, sizeof *tab);
    if (!tab) return sift__error_set(err, SIFT_E_NOMEM, "lookup: out of memory for the n-gram index");
    const uint32_t old_cap = d->tab_cap;
    d->tab = tab, d->tab_cap = cap;
    for (uint32_t i = 0; i < old_cap; i++)
        if (old[i].h) {
            uint32_t j = (uint32_t)old[i].h & (cap - 1);
            while (tab[j].h) j = (j + 1) & (cap - 1);
            tab[j] = old[i];
        }
    free(old);
    return SIFT_OK;
}

sift_status sift__lookup_init(sift_draft *d, sift_error *err)
{
    d->scratch = malloc((size_t)(d->ngram + d->p.n_max) * sizeof *d->scratch);
    if (!d->scratch) return sift__error_set(err, SIFT_E_NOMEM, "lookup: out of memory");
    return grow(d, err);
}

void sift__lookup_clear(sift_draft *d)
{
    if (d->tab) memset(d->tab, 0, (size_t)d->tab_cap * sizeof *d->tab);
    d->tab_used = 0;
}

void sift__lookup_free(sift_draft *d)
{
    free(d->tab);
    free(d->scratch);
}

sift_status sift__lookup_add(sift_draft *d, int32_t i, sift_error *err)
{
    const sift_token t = d->hist[i];
    for (int32_t n = 1; n <= d->ngram && n <= i; n++) {
        if ((d->tab_used + 1) * 2 > d->tab_cap) {
            const sift_status st = grow(d, err);
            if (st != SIFT_OK) return st;
        }
        const sift_token *key = d->hist + i - n;
        const uint64_t h = key_hash(key, n);
        lk_entry *e = find(d, key, n, h);
        if (!e->h) {
            *e = (lk_entry){.h = h, .end = i, .n = n};
            d->tab_used++;
        }
        int32_t k = 0;
        while (k < e->n_next && e->next[k] != t) k++;
        if (k == e->n_next) {
            if (e->n_next < LK_NEXT) {
                e->n_next++;
            } else { /* full: the rarest (the oldest among equals) makes room */
                k = 0;
                for (int32_t j = 1; j < LK_NEXT; j++)
                    if (e->cnt[j] < e->cnt[k] || (e->cnt[j] == e->cnt[k] && e->seen[j] < e->seen[k])) k = j;
            }
            e->next[k] = t, e->cnt[k] = 0;
        }
        e->cnt[k]++;
        e->seen[k] = i;
    }
    return SIFT_OK;
}

int32_t sift__lookup_propose(sift_draft *d, sift_token *out, int32_t cap)
{
    /* ctx = the last ngram tokens of the history, then the draft as it grows */
    const int32_t tail = d->n_hist < d->ngram ? d->n_hist : d->ngram;
    sift_token *ctx = d->scratch;
    memcpy(ctx, d->hist + d->n_hist - tail, (size_t)tail * sizeof *ctx);
    int32_t len = tail, k = 0;
    while (k < cap) {
        sift_token best = SIFT_TOKEN_NULL;
        for (int32_t n = len < d->ngram ? len : d->ngram; n >= 1 && best == SIFT_TOKEN_NULL; n--) {
            const sift_token *key = ctx + len - n;
            const lk_entry *e = find(d, key, n, key_hash(key, n));
            if (!e->h) continue;
            int32_t b = 0, total = 0;
            for (int32_t j = 0; j < e->n_next; j++) {
                total += e->cnt[j];
                if (e->cnt[j] > e->cnt[b] || (e->cnt[j] == e->cnt[b] && e->seen[j] > e->seen[b])) b = j;
            }
            const bool clear = n >= 2 ? 2 * e->cnt[b] >= total : 2 * e->cnt[b] > total && e->cnt[b] >= 2;
            if (clear) best = e->next[b];
        }
        if (best == SIFT_TOKEN_NULL) break;
        out[k++] = best;
        ctx[len++] = best;
    }
    return k;
}

sift_draft *sift_draft_lookup_new(int32_t n, sift_draft_params params, sift_error *err)
{
    if (n < 1 || n > SIFT_LOOKUP_MAX_N) {
        sift__error_set(err, SIFT_E_INVAL, "lookup: the n-gram size must be 1..%d (got %d)", SIFT_LOOKUP_MAX_N, n);
        return NULL;
    }
    sift_draft *d = sift__draft_alloc(DRAFT_LOOKUP, params, err);
    if (!d) return NULL;
    d->ngram = n;
    if (sift__lookup_init(d, err) != SIFT_OK) {
        sift_draft_free(d);
        return NULL;
    }
    return d;
}
