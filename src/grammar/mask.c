/*
 * mask.c - the token-mask engine: the set of vocabulary tokens a parser state allows, fast.
 *
 * The problem. llama.cpp decides token by token: for every candidate it decodes the text and
 * runs it through every parse stack (llama_grammar_reject_candidates), which costs O(vocab)
 * per step even when almost nothing is allowed - milliseconds at 100k tokens. XGrammar's
 * observation is that for most tokens the answer depends only on the top of a stack:
 * starting inside a rule, a token either ends inside that rule (accepted whatever is below:
 * "context-independent"), dies inside it (rejected whatever is below), or runs off its end
 * (context-dependent: needs the frames below). Precompute the first two per grammar
 * position; check only the third at run time.
 *
 * The design here generalizes that to every depth, with one cache:
 *
 *   A stack is frames f_n (top, a terminal) ... f_1 (bottom). A cache entry describes the
 *   suffix (f_n .. f_j) with an unknown "sentinel" below it: walking every token through
 *   that suffix, it stores the tokens accepted (they consumed all their bytes without
 *   needing anything below - including ending exactly when the suffix is used up) and the
 *   escapes: trie nodes where some path used the suffix up with bytes still to come. The
 *   entry for (f_n .. f_{j-1}) is computed from the entry for (f_n .. f_j) by resuming only
 *   its escapes at frame f_{j-1}: the frames above are gone at that point, so the resumed
 *   walk starts from f_{j-1} alone. Accepted sets are cumulative down the levels, so the
 *   mask of a whole stack is one entry's set: follow the stack down, level by level, until
 *   an entry has no escapes (or the stack ends; left-over escapes are then rejected).
 *   Entries are keyed (parent entry, frame position) and are shared by every stack with
 *   the same top frames, in any context - which is why they keep paying off. The position
 *   is first mapped to its representative (pos_equiv.c): positions whose rest of
 *   alternative and FOLLOW are equal up to rule names (every string property's own
 *   "\"" char* "\"" rule) share entries, so a new string context costs a few lookups
 *   instead of ~3k trie nodes walked per name.
 *
 *   An escape needs a next byte that can follow the rule being left: FOLLOW(rule of the
 *   bottom frame), computed from the grammar (grammar.h). Escapes failing it are dropped at
 *   once, which keeps the lists short (inside a JSON string only prefixes followed by '"'
 *   escape the string's repetition rule, not every prefix).
 *
 * Walking. Tokens are visited through the preorder trie (trie.h), so a shared prefix is
 * matched once and a dead prefix skips its whole subtree. The parser state during a walk is
 * a set of suffix stacks over the sentinel (nodes of a private sift__gx_arena); these sets are
 * interned as the states of a lazily built DFA over "symbols" (grammar.h), with memoized
 * transitions, so stepping a trie node is one table lookup. UTF-8 is decoded on the way;
 * a lead byte that no live class can complete prunes its subtree.
 *
 * Slices (trie.h). Inside a JSON string nearly every token is allowed, and walking them one
 * node at a time was most of what compile and the worst masks cost (perf on MaskBench: one
 * 211k-node walk per string context). A trie node flagged for slice C_k (the JSON string
 * character class) has only C_k characters below it; when the DFA state there steps to
 * one live state on every C_k character, for as many characters as the subtree's tokens
 * have (a loop for char*, a chain for char{0,n}), every token below is accepted: they are a
 * contiguous range of `sorted`, taken into a bitset without visiting the subtree.
 * Taking thousands of such subtrees bit by bit (through the `sorted` permutation) was itself
 * a few hundred microseconds per new string context, so two unions are taken whole: a
 * char* loop resumed at its parent's escapes ORs a loop set cached per parent entry
 * (loop_set), and a walk from the trie root whose every slice character but a few ASCII
 * ones leads to one loop ORs the vocabulary's first-character slices (first_loop, trie.h).
 * What is left of such a mask is walking the non-slice nodes (~8k, cache-miss bound); when
 * the root state is a key-exclusion class that steps to a loop L on all but a few first
 * characters, that walk is made once per L and taken less those characters' subtrees
 * (root_walk_take; the walk arena names frames by representative, so L is one state). Such
 * an entry keeps only its own escapes, below those characters, and names L's walk as its
 * peer: each level below it is the one below L's, made once, less and plus those subtrees
 * (child_peered). A walk from the root reads only the first bytes its state can take.
 * There are three slices (trie.c): C_0 the converters' JSON string character, C_1 the same less
 * U+2028..2029, the class a regex "." becomes in a string pattern, C_2 host name characters.
 * A string with maxLength is a chain of C_0: its child entries take their first-character
 * tokens of at most the characters left as one AND of the loop set with a by-length copy of
 * first_bits (child), not ~95k tokens tested one by one after every typed token. When the
 * parent's escapes hold every first character, the set is wider: all C_0 tokens of the
 * characters left (c0_len_bits, trie.h), and the walks below the other first characters
 * find those subtrees taken. The chain rules need no FOLLOW condition when the chain never
 * escapes (chain_quiet: an exact-length string, whose rule ends only at its closing quote).
 *
 * Class slices (class_take). A regex `pattern` loops over its own class ([a-zA-Z0-9_]+,
 * [^/]*) or runs a bounded one ([0-9a-f]{8}); no fixed slice covers those. The trie keeps the
 * bytes below each node (trie.h), and each DFA state learns lazily which ASCII bytes step it
 * to itself: a subtree whose bytes all do (non-ASCII ones through the C_0 / C_1 flags) is
 * taken whole, and a uniform chain takes its tokens up to the chain's length. Nothing is
 * computed per class or per grammar up front.
 *
 * Storage. An accepted set is a dense bitset (shared by the entries below it) plus a short
 * list of extra token ids, whichever is smaller; escapes are lists of trie nodes. The start
 * state's entries, then entries for terminal positions and (position, frame below) pairs,
 * the dearest on demand first (sift__gx_engine_precompute), are computed when the sampler
 * is made, up to a small budget (a json_schema request should
 * reach its first mask in about a millisecond); the rest are computed on first use
 * (typically tens of microseconds: they resume few escapes). A warm fill_mask is: per stack a few hash lookups,
 * OR one bitset (deduplicated), set a few bits. Nothing is allocated once warm. Memory is
 * bounded: past 512 MiB the on-demand entries are dropped (the precomputed ones stay), and
 * the walk DFA is rebuilt when it passes its own limit.
 *
 * Sharing (share.h). Entries that depend on nothing but the vocabulary and the grammar text
 * they walked - a JSON string's char class, its char* loop, a key-exclusion loop's root walk
 * and the levels below them - are found by a canonical key in the vocabulary's share, made
 * by the first engine that needed them and copied by every later one (canon_*).
 *
 * Concurrency: one mutex per engine around cache reads and updates; clones of a sampler
 * share the engine. The matcher state stays in the sampler.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "core/status.h"
#include "grammar/compiler.h"
#include "grammar/mask_internal.h"

/* ---- public (internal) API ----------------------------------------------------------------- */

static void engine_destroy(sift__gx_engine *e)
{
    if (!e) return;
    sift_grammar_free(e->g);
    sift__gx_free(e->rep);
    sift__gx_compiler_release(e->comp);
    sift__gx_arena_free(&e->wa);
    sift__gx_free(e->asc);
    sift__gx_root_walks_free(e);
    sift__gx_free(e->rw);
    sift__gx_free(e->st);
    sift__gx_u32_free(&e->sets);
    sift__gx_free(e->live);
    sift__gx_free(e->trans);
    sift__gx_free(e->st_ht);
    sift__gx_free(e->ent);
    sift__gx_u32_free(&e->lists);
    for (uint32_t k = 0; k < e->n_chunks; k++) sift__gx_free(e->dense[k]);
    sift__gx_free(e->dense);
    sift__gx_free(e->et);
    sift__gx_free(e->wf);
    sift__gx_free(e->seen_bits);
    sift__gx_free(e->bulk_bits);
    sift__gx_free(e->node_stamp);
    sift__gx_free(e->c0_memo);
    sift__gx_free(e->wl_at);
    sift__gx_u32_free(&e->wl);
    sift__gx_u32_free(&e->acc);
    sift__gx_u32_free(&e->esc);
    sift__gx_u32_free(&e->tmp);
    sift__gx_u32_free(&e->ck);
    sift__gx_u32_free(&e->cq);
    sift__gx_u32_free(&e->cbuf);
    sift__gx_u32_free(&e->coff);
    sift__gx_free(e->crule);
    sift__gx_free(e->canon_big);
    sift__gx_free((void *)e->fill_src);
    sift__gx_u32_free(&e->fill_extra);
    for (uint32_t k = 0; k < GX_N_SLICES; k++) sift__gx_u32_free(&e->slice_syms[k]);
    pthread_mutex_destroy(&e->lock);
    sift__gx_free(e);
}

int sift__gx_engine_new(sift__gx_engine **out, sift_grammar *g, const sift_vocab_view *view, sift_error *err)
{
    *out = NULL;
    sift_grammar_compiler *c = sift__gx_compiler_acquire(view, err);
    if (!c) {
        sift_grammar_free(g);
        return err && err->status ? err->status : SIFT_E_NOMEM;
    }
    int rc = sift__gx_engine_new_in(out, g, c, err);
    sift__gx_compiler_release(c);
    return rc;
}

int sift__gx_engine_new_in(sift__gx_engine **out, sift_grammar *g, sift_grammar_compiler *comp, sift_error *err)
{
    *out = NULL;
    sift__gx_engine *e = sift__gx_calloc(1, sizeof *e);
    if (!e) {
        sift_grammar_free(g);
        return sift__error_set(err, SIFT_E_NOMEM, "out of memory");
    }
    atomic_init(&e->refs, 1);
    pthread_mutex_init(&e->lock, NULL);
    e->mops = sift__gx_mask_ops_best();
    e->cache_limit = CACHE_BYTES_LIMIT;
    e->g = g;
    int rc = SIFT_OK;
    sift__gx_compiler_retain(comp);
    e->comp = comp;
    e->voc = sift__gx_compiler_vocab(comp);
    if (g->has_tokens && (int64_t)g->max_token >= e->voc->n_tokens) {
        rc = sift__error_set(err, SIFT_E_INVAL, "grammar names token %u but the vocabulary has %d tokens", g->max_token,
                            e->voc->n_tokens);
        goto fail;
    }
    rc = sift__gx_arena_init(&e->wa, g);
    if (rc != SIFT_OK) goto nomem;
    if (sift__gx_pos_reps(g, e->voc->max_depth, &e->rep) != SIFT_OK) goto nomem;
    if (!(e->crule = sift__gx_calloc(g->n_rules + 1, sizeof *e->crule))) goto nomem;
    if (!(e->canon_big = sift__gx_calloc(g->n_elems + 1, 1))) goto nomem;
    e->wa.rep = e->rep;
    uint32_t depth = e->voc->max_depth + 2;
    e->wf = sift__gx_malloc(depth * sizeof *e->wf);
    e->seen_bits = sift__gx_calloc(e->voc->n_words, sizeof *e->seen_bits);
    e->bulk_bits = sift__gx_calloc(e->voc->n_words, sizeof *e->bulk_bits);
    e->node_stamp = sift__gx_calloc(e->voc->n_nodes, sizeof *e->node_stamp);
    e->et_cap = 1024;
    e->et = sift__gx_malloc((size_t)e->et_cap * sizeof *e->et);
    if (!e->wf || !e->seen_bits || !e->node_stamp || !e->et || !e->bulk_bits)
        goto nomem;
    for (uint32_t k = 0; k < e->et_cap; k++) e->et[k].id = GX_NONE;
    e->node_epoch = 1;
    for (uint32_t b = 0xC2; b <= 0xF4; b++) {
        sift__gx_utf8 u = {0};
        sift__gx_utf8_feed(&u, (uint8_t)b);
        uint32_t lo, hi;
        sift__gx_utf8_range(&u, &lo, &hi);
        sift__gx_syms_in_range(g, lo, hi, &e->lead_lo[b], &e->lead_hi[b]);
    }
    for (uint32_t k = 0; k < GX_N_SLICES; k++) {
        const sift__gx_slice *sl = &sift__gx_slices[k];
        uint32_t last = GX_NONE;
        for (uint32_t r = 0; r < sl->n_ranges; r++) {
            uint32_t s0, s1;
            sift__gx_syms_in_range(g, sl->ranges[2 * r], sl->ranges[2 * r + 1], &s0, &s1);
            for (uint32_t q = s0; q <= s1; q++)
                if (q != last && !sift__gx_u32_push(&e->slice_syms[k], last = q)) goto nomem;
        }
    }
    /* the pools are never NULL, so that empty sets are still valid pointers */
    if (!GX_GROW(e->sets.v, e->sets.cap, 64) || !GX_GROW(e->lists.v, e->lists.cap, 64) ||
        !GX_GROW(e->acc.v, e->acc.cap, 64) || !GX_GROW(e->esc.v, e->esc.cap, 64))
        goto nomem;
    if (sift__gx_dfa_intern(e, NULL, 0) != DEAD) goto nomem;
    *out = e;
    return SIFT_OK;
nomem:
    rc = sift__error_set(err, SIFT_E_NOMEM, "out of memory building the grammar sampler");
fail:
    engine_destroy(e);
    return rc;
}

void sift__gx_engine_retain(sift__gx_engine *e) { atomic_fetch_add(&e->refs, 1); }

void sift__gx_engine_release(sift__gx_engine *e)
{
    if (e && atomic_fetch_sub(&e->refs, 1) == 1) engine_destroy(e);
}

const sift_grammar *sift__gx_engine_grammar(const sift__gx_engine *e) { return e->g; }
const sift__gx_vocab *sift__gx_engine_vocab(const sift__gx_engine *e) { return e->voc; }

int sift__gx_token_verdict(sift__gx_arena *a, const sift__gx_state *s, const sift__gx_vocab *v, uint32_t t, sift__gx_state *t1, sift__gx_state *t2)
{
    if (v->flags[t] & GX_TOK_EOG) return sift__gx_state_can_end(s);
    if (v->flags[t] & GX_TOK_EXCLUDED) return 0;
    uint32_t len;
    const uint8_t *b = sift__gx_vocab_text(v, t, &len);
    return sift__gx_state_token_check(a, s, t, b, len, t1, t2);
}

void sift__gx_bits_union(uint64_t *restrict dst, uint32_t W, const uint64_t *const *src, uint32_t n)
{
    if (n == 0) {
        memset(dst, 0, (size_t)W * sizeof *dst);
        return;
    }
    if (n == 1) {
        memcpy(dst, src[0], (size_t)W * sizeof *dst);
        return;
    }
    /* a missing source repeats the first: OR is idempotent */
    const uint64_t *s0 = src[0], *s1 = src[1], *s2 = n > 2 ? src[2] : s0, *s3 = n > 3 ? src[3] : s0;
    for (uint32_t w = 0; w < W; w++) dst[w] = s0[w] | s1[w] | s2[w] | s3[w];
    for (uint32_t k = 4; k < n; k += 3) {
        s0 = src[k];
        s1 = k + 1 < n ? src[k + 1] : s0;
        s2 = k + 2 < n ? src[k + 2] : s0;
        for (uint32_t w = 0; w < W; w++) dst[w] |= s0[w] | s1[w] | s2[w];
    }
}

int sift__gx_engine_fill_mask(sift__gx_engine *e, sift__gx_arena *ra, const sift__gx_state *s, uint64_t *mask)
{
    pthread_mutex_lock(&e->lock);
    sift__gx_cache_maybe_trim(e);
    int rc = SIFT_OK;
    /* first every stack's entry (their distinct dense sets, and those with extra tokens),
     * then the mask written once from them */
    e->n_fill_src = e->fill_extra.n = 0;
    for (uint32_t k = 0; k < s->tops.n; k++) {
        uint32_t n = s->tops.v[k];
        uint32_t id = sift__gx_level1(e, ra->pos[n], &s->utf8);
        for (uint32_t f = ra->parent[n]; id != GX_NONE && has_esc(e, id) && f; f = ra->parent[f])
            id = sift__gx_child(e, id, ra->pos[f]);
        if (id == GX_NONE) {
            rc = SIFT_E_NOMEM;
            break;
        }
        const sift__gx_entry *en = &e->ent[id];
        if (en->dense >= 0) {
            const uint64_t *d = dense_bits(e, en->dense);
            bool seen = false;
            for (uint32_t q = 0; q < e->n_fill_src && !seen; q++) seen = e->fill_src[q] == d;
            if (!seen) {
                if (!GX_GROW(e->fill_src, e->cap_fill_src, e->n_fill_src + 1)) {
                    rc = SIFT_E_NOMEM;
                    break;
                }
                e->fill_src[e->n_fill_src++] = d;
            }
        }
        if (en->extra_n && !sift__gx_u32_push(&e->fill_extra, id)) {
            rc = SIFT_E_NOMEM;
            break;
        }
    }
    sift__gx_bits_union(mask, e->voc->n_words, e->fill_src, e->n_fill_src);
    for (uint32_t q = 0; q < e->fill_extra.n; q++) {
        const sift__gx_entry *en = &e->ent[e->fill_extra.v[q]];
        const uint32_t *x = e->lists.v + en->extra_off;
        for (uint32_t j = 0; j < en->extra_n; j++) sift__gx_bit_set(mask, x[j]);
    }
    pthread_mutex_unlock(&e->lock);
    if (sift__gx_state_can_end(s))
        for (uint32_t k = 0; k < e->voc->n_eog; k++) sift__gx_bit_set(mask, e->voc->eog[k]);
    return rc;
}

void sift__gx_engine_set_cache_limit(sift__gx_engine *e, uint64_t bytes)
{
    pthread_mutex_lock(&e->lock);
    e->cache_limit = bytes;
    pthread_mutex_unlock(&e->lock);
}

void sift__gx_engine_get_stats(sift__gx_engine *e, sift__gx_engine_stats *st)
{
    pthread_mutex_lock(&e->lock);
    st->entries = e->n_ent;
    st->dense_sets = e->n_dense;
    st->dfa_states = e->n_st;
    st->walk_arena_nodes = e->wa.n;
    st->trie_nodes = e->voc->n_nodes;
    st->trie_nodes_walked = e->walked;
    st->bytes = (uint64_t)e->n_dense * e->voc->n_words * 8 + (uint64_t)e->lists.cap * 4 + (uint64_t)e->cap_ent * sizeof(sift__gx_entry) +
                (uint64_t)e->sets.cap * 4 + (uint64_t)e->trans_cap * 4 + (uint64_t)e->live_cap * 8 +
                (uint64_t)e->voc->n_nodes * sizeof(sift__gx_trie_node) + (uint64_t)e->wa.cap * 20 + (uint64_t)e->asc_cap * 4;
    st->precompute_ms = e->precompute_ms;
    st->trims = e->trims;
    st->slice_nodes = e->bulk;
    st->loop_sets_reused = e->loop_reused;
    st->loop_sets_first = e->loop_first;
    st->first_slices = e->first_taken;
    st->root_walks_reused = e->rw_reused;
    st->chain_takes = e->chain_taken;
    st->class_takes = e->class_taken;
    st->chain_firsts = e->chain_first;
    st->peered = e->peered;
    st->shared_hits = e->shared_hits;
    st->shared_puts = e->shared_puts;
    st->quiet_chains = e->quiet_taken;
    st->c0_sets = e->c0_taken;
    st->narrow_walks = e->narrow;
    pthread_mutex_unlock(&e->lock);
}
