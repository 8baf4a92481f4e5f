/*
 * mask_precompute.c - what the engine computes before the first mask, within a budget.
 *
 * Why: a json_schema request should reach its first mask in about a millisecond, and the
 * first masks over a fresh grammar are the dear ones (a level-1 walk of thousands of trie
 * nodes per string-like terminal). The budget (trie nodes walked, 64 per entry; an entry
 * copied from the share still counts the walk it saved) buys the entries dearest on demand
 * first: the level-1 entries of the terminals but the ASCII classes, then those classes
 * with every frame that can sit directly below them (the "B" sets, below_of), then the
 * ASCII classes. Whatever the budget leaves is computed on first use.
 */
#include <time.h>

#include "grammar/mask_internal.h"

/* Frames that can sit directly below a frame of rule r ("B" set), for precompute: position
 * p+1 after every REF r that is not at the end of its alternative; for a REF at the end (a
 * tail call), whatever can be below the calling rule. So B(r) is the union of the direct
 * frames of r and of every rule that reaches r through tail calls.
 *
 * Made per rule on demand, not for every rule up front: precompute asks only for the rules
 * of its non-ASCII classes (a JSON string's char, a pattern's class), a handful, and the
 * budget usually ends before all of them. The sets of every rule, propagated through a hash
 * set of (rule, frame) pairs, were a tenth of a median json_schema compile (MaskBench, perf).
 * The index is two counting sorts over the elements: direct frames by rule, and the reverse
 * tail-call edges (callee -> callers). Each frame is the direct frame of exactly one rule
 * (the REF before it), so the union over distinct rules needs no deduplication: a search
 * marks rules, not frames. */
typedef struct {
    uint32_t *dhead, *dfr;   /* rule r's direct frames: dfr[dhead[r] .. dhead[r + 1]) */
    uint32_t *thead, *tcall; /* the rules that tail-call r: tcall[thead[r] .. thead[r + 1]) */
    uint32_t *mark;          /* per rule: the search that last visited it */
    uint32_t search;
    uint64_t work;           /* rules and frames visited over all searches */
    sift__gx_u32vec todo, out;
} below_index;

#define BELOW_MAX_WORK (1u << 20) /* enough for a warm start; beyond it everything is lazy */

static void below_free(below_index *bi)
{
    sift__gx_free(bi->dhead);
    sift__gx_free(bi->dfr);
    sift__gx_free(bi->thead);
    sift__gx_free(bi->tcall);
    sift__gx_free(bi->mark);
    sift__gx_u32_free(&bi->todo);
    sift__gx_u32_free(&bi->out);
}

static int below_init(const sift_grammar *g, below_index *bi)
{
    memset(bi, 0, sizeof *bi);
    const uint32_t R = g->n_rules;
    bi->dhead = sift__gx_calloc((size_t)R + 1, sizeof *bi->dhead);
    bi->thead = sift__gx_calloc((size_t)R + 1, sizeof *bi->thead);
    bi->mark = sift__gx_calloc((size_t)R + 1, sizeof *bi->mark);
    if (!bi->dhead || !bi->thead || !bi->mark) return SIFT_E_NOMEM;
    uint32_t nd = 0, nt = 0;
    for (uint32_t p = 0; p < g->n_elems; p++) {
        uint32_t el = g->elems[p];
        if (GX_TYPE(el) != GX_REF) continue;
        uint32_t r = GX_VAL(el);
        if (!sift__gx_is_end(g->elems[p + 1])) bi->dhead[r + 1]++, nd++;
        else if (g->rule_of[p] != r) bi->thead[r + 1]++, nt++;
    }
    for (uint32_t r = 0; r < R; r++) bi->dhead[r + 1] += bi->dhead[r], bi->thead[r + 1] += bi->thead[r];
    bi->dfr = sift__gx_malloc(((size_t)nd + 1) * sizeof *bi->dfr);
    bi->tcall = sift__gx_malloc(((size_t)nt + 1) * sizeof *bi->tcall);
    if (!bi->dfr || !bi->tcall) return SIFT_E_NOMEM;
    /* fill in position order (the frames of a rule stay in grammar order); the heads move
     * to each list's end, then back */
    for (uint32_t p = 0; p < g->n_elems; p++) {
        uint32_t el = g->elems[p];
        if (GX_TYPE(el) != GX_REF) continue;
        uint32_t r = GX_VAL(el);
        if (!sift__gx_is_end(g->elems[p + 1])) bi->dfr[bi->dhead[r]++] = p + 1;
        else if (g->rule_of[p] != r) bi->tcall[bi->thead[r]++] = g->rule_of[p];
    }
    for (uint32_t r = R; r > 0; r--) bi->dhead[r] = bi->dhead[r - 1], bi->thead[r] = bi->thead[r - 1];
    bi->dhead[0] = bi->thead[0] = 0;
    return SIFT_OK;
}

/* B(r) into bi->out: r's direct frames, then those of the rules that reach r through tail
 * calls, nearest first. Empty once the work bound is spent. */
static int below_of(below_index *bi, uint32_t r)
{
    bi->out.n = bi->todo.n = 0;
    if (bi->work >= BELOW_MAX_WORK) return SIFT_OK;
    bi->search++;
    bi->mark[r] = bi->search;
    if (!sift__gx_u32_push(&bi->todo, r)) return SIFT_E_NOMEM;
    for (uint32_t k = 0; k < bi->todo.n && bi->work < BELOW_MAX_WORK; k++) {
        uint32_t q = bi->todo.v[k];
        bi->work += 1 + bi->dhead[q + 1] - bi->dhead[q];
        for (uint32_t j = bi->dhead[q]; j < bi->dhead[q + 1]; j++)
            if (!sift__gx_u32_push(&bi->out, bi->dfr[j])) return SIFT_E_NOMEM;
        for (uint32_t j = bi->thead[q]; j < bi->thead[q + 1]; j++) {
            uint32_t c = bi->tcall[j];
            if (bi->mark[c] == bi->search) continue;
            bi->mark[c] = bi->search;
            if (!sift__gx_u32_push(&bi->todo, c)) return SIFT_E_NOMEM;
        }
    }
    return SIFT_OK;
}

/* Does position p hold a class of ASCII characters only (sa..sb: the symbols of U+0080..)?
 * Its level-1 entry is then cheap whenever it is needed (level1_narrow). */
static bool ascii_class(const sift_grammar *g, uint32_t p, uint32_t sa, uint32_t sb)
{
    uint32_t el = g->elems[p];
    return GX_TYPE(el) == GX_CLASS && !sift__gx_bits_any_in(sift__gx_class_bits(g, GX_VAL(el)), sa, sb);
}

/* What the budget buys, most expensive on demand first: the level-1 entries of the
 * terminals but the ASCII classes (a JSON string's char, a key exclusion, a pattern's class:
 * a walk of thousands of trie nodes each, the mask that first needs one costs 0.2-1 ms),
 * then the entries below those classes, then the ASCII classes' level-1 entries (a literal's
 * character: tens of nodes, a few microseconds on demand). In grammar order the literals came
 * first and used most of the budget of a median json_schema grammar (MaskBench: ~56 of them),
 * leaving the expensive entries to the masks. */
int sift__gx_engine_precompute(sift__gx_engine *e, uint64_t budget)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pthread_mutex_lock(&e->lock);
    const sift_grammar *g = e->g;
    sift__gx_utf8 none = {0};
    int rc = SIFT_OK;
    uint64_t start = e->walked + e->root_skipped + e->shared_work;
    /* work = trie nodes walked + 64 per entry made, so that many cheap entries count too */
    uint32_t ent0 = e->n_ent;
    /* (first bytes skipped unread count as walked, and copied entries as the walks they saved:
     * the budget was set when they were walked) */
#define WORK() (e->walked + e->root_skipped + e->shared_work - start + 64ull * (e->n_ent - ent0))
    uint32_t sa, sb;
    sift__gx_syms_in_range(g, 0x80, 0x10FFFF, &sa, &sb);
    for (uint32_t p = 0; p < g->n_elems && rc == SIFT_OK && WORK() < budget; p++)
        if (sift__gx_is_terminal(g->elems[p]) && !ascii_class(g, p, sa, sb) && sift__gx_level1(e, p, &none) == GX_NONE) rc = SIFT_E_NOMEM;
    below_index bi;
    bool have_below = false;
    if (rc == SIFT_OK && WORK() < budget) {
        rc = below_init(g, &bi);
        have_below = true;
    }
    for (uint32_t p = 0; have_below && p < g->n_elems && rc == SIFT_OK && WORK() < budget; p++) {
        if (GX_TYPE(g->elems[p]) != GX_CLASS || ascii_class(g, p, sa, sb)) continue;
        uint32_t id = sift__gx_level1(e, p, &none);
        if (id == GX_NONE) {
            rc = SIFT_E_NOMEM;
            break;
        }
        if (!has_esc(e, id)) continue;
        if ((rc = below_of(&bi, g->rule_of[p])) != SIFT_OK) break;
        for (uint32_t k = 0; k < bi.out.n && WORK() < budget; k++)
            if (sift__gx_child(e, id, bi.out.v[k]) == GX_NONE) {
                rc = SIFT_E_NOMEM;
                break;
            }
    }
    for (uint32_t p = 0; p < g->n_elems && rc == SIFT_OK && WORK() < budget; p++)
        if (ascii_class(g, p, sa, sb) && sift__gx_level1(e, p, &none) == GX_NONE) rc = SIFT_E_NOMEM;
    if (have_below) below_free(&bi);
#undef WORK
    e->pre_ent = e->n_ent;
    e->pre_dense = e->n_dense;
    e->pre_lists = e->lists.n;
    pthread_mutex_unlock(&e->lock);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    e->precompute_ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    return rc;
}
