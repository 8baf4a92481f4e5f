/*
 * gbnf_sets.c - the sets the GBNF parser computes over a parsed grammar (grammar.h): which
 * rules can match the empty text, and each rule's FIRST and FOLLOW symbols, which the mask
 * engine prunes with.
 *
 * Why apart from gbnf.c: the parser reads text; these are analyses of the grammar it made,
 * between its left-recursion check (which gives FIRST its order) and the engine. They only
 * need the compiled sift_grammar, not the parser's state.
 */
#include <string.h>

#include "core/status.h"
#include "grammar/grammar.h"

int sift__gx_compute_nullable(sift_grammar *g, sift_error *err)
{
    g->rule_nullable = sift__gx_calloc(g->n_rules, 1);
    if (!g->rule_nullable) return sift__error_set(err, SIFT_E_NOMEM, "out of memory");
    /* iterate to a fixpoint; each pass is linear and every pass but the last marks a rule,
     * but passes are cut short by processing rules in reverse definition order first
     * (helper rules are usually referenced by rules defined before them) */
    bool changed = true;
    while (changed) {
        changed = false;
        for (uint32_t rr = g->n_rules; rr-- > 0;) {
            if (g->rule_nullable[rr]) continue;
            uint32_t pos = g->rule_start[rr];
            for (;;) {
                bool all = true;
                for (; !sift__gx_is_end(g->elems[pos]); pos++) {
                    uint32_t e = g->elems[pos];
                    if (GX_TYPE(e) != GX_REF || !g->rule_nullable[GX_VAL(e)]) all = false;
                }
                if (all) {
                    g->rule_nullable[rr] = 1;
                    changed = true;
                    break;
                }
                if (GX_TYPE(g->elems[pos]) == GX_END) break;
                pos++;
            }
        }
    }
    return SIFT_OK;
}

/* FIRST in left-corner post-order (each rule after the rules it can start with), then
 * FOLLOW by a worklist (FOLLOW(r) includes FOLLOW(q) when r can end q). */
int sift__gx_compute_first_follow(sift_grammar *g, const uint32_t *order, sift_error *err)
{
    uint32_t W = g->sym_words;
    g->rule_first = sift__gx_calloc((size_t)g->n_rules * W, sizeof(uint64_t));
    g->rule_follow = sift__gx_calloc((size_t)g->n_rules * W, sizeof(uint64_t));
    if (!g->rule_first || !g->rule_follow) return sift__error_set(err, SIFT_E_NOMEM, "out of memory");
    for (uint32_t k = 0; k < g->n_rules; k++) {
        uint32_t r = order[k];
        uint64_t *f = g->rule_first + (size_t)r * W;
        uint32_t pos = g->rule_start[r];
        for (;;) {
            for (; !sift__gx_is_end(g->elems[pos]); pos++) {
                uint32_t e = g->elems[pos];
                if (GX_TYPE(e) == GX_CLASS) {
                    const uint64_t *cb = sift__gx_class_bits(g, GX_VAL(e));
                    for (uint32_t w = 0; w < W; w++) f[w] |= cb[w];
                    break;
                }
                if (GX_TYPE(e) != GX_REF) break; /* token: matches no character mid-token */
                const uint64_t *sf = g->rule_first + (size_t)GX_VAL(e) * W;
                for (uint32_t w = 0; w < W; w++) f[w] |= sf[w];
                if (!g->rule_nullable[GX_VAL(e)]) break;
            }
            while (!sift__gx_is_end(g->elems[pos])) pos++;
            if (GX_TYPE(g->elems[pos]) == GX_END) break;
            pos++;
        }
    }
    /* base FOLLOW sets and the "r ends q" edges */
    sift__gx_u32vec edge_from = {0}, edge_to = {0};
    int rc = SIFT_OK;
    for (uint32_t q = 0; q < g->n_rules && rc == SIFT_OK; q++) {
        for (uint32_t pos = g->rule_start[q]; GX_TYPE(g->elems[pos]) != GX_END; pos++) {
            uint32_t e = g->elems[pos];
            if (GX_TYPE(e) != GX_REF) continue;
            uint32_t r = GX_VAL(e);
            uint64_t *fr = g->rule_follow + (size_t)r * W;
            uint32_t k = pos + 1;
            for (; !sift__gx_is_end(g->elems[k]); k++) {
                uint32_t e2 = g->elems[k];
                if (GX_TYPE(e2) == GX_CLASS) {
                    const uint64_t *cb = sift__gx_class_bits(g, GX_VAL(e2));
                    for (uint32_t w = 0; w < W; w++) fr[w] |= cb[w];
                    break;
                }
                if (GX_TYPE(e2) != GX_REF) break;
                const uint64_t *sf = g->rule_first + (size_t)GX_VAL(e2) * W;
                for (uint32_t w = 0; w < W; w++) fr[w] |= sf[w];
                if (!g->rule_nullable[GX_VAL(e2)]) break;
            }
            if (sift__gx_is_end(g->elems[k]) && q != r) {
                if (!sift__gx_u32_push(&edge_from, q) || !sift__gx_u32_push(&edge_to, r)) rc = sift__error_set(err, SIFT_E_NOMEM, "out of memory");
            }
        }
    }
    if (rc == SIFT_OK && edge_from.n) {
        /* adjacency by source rule (counting sort), then a worklist */
        uint32_t *head = sift__gx_calloc((size_t)g->n_rules + 1, sizeof *head);
        uint32_t *adj = sift__gx_malloc((size_t)edge_from.n * sizeof *adj);
        uint32_t *work = sift__gx_malloc((size_t)g->n_rules * sizeof *work);
        uint8_t *queued = sift__gx_calloc(g->n_rules, 1);
        if (!head || !adj || !work || !queued) {
            rc = sift__error_set(err, SIFT_E_NOMEM, "out of memory");
        } else {
            for (uint32_t k = 0; k < edge_from.n; k++) head[edge_from.v[k] + 1]++;
            for (uint32_t r = 0; r < g->n_rules; r++) head[r + 1] += head[r];
            uint32_t *fill = sift__gx_malloc((size_t)g->n_rules * sizeof *fill);
            if (!fill) {
                rc = sift__error_set(err, SIFT_E_NOMEM, "out of memory");
            } else {
                memcpy(fill, head, (size_t)g->n_rules * sizeof *fill);
                for (uint32_t k = 0; k < edge_from.n; k++) adj[fill[edge_from.v[k]]++] = edge_to.v[k];
                sift__gx_free(fill);
                uint32_t nw = 0;
                for (uint32_t r = 0; r < g->n_rules; r++)
                    if (head[r + 1] > head[r]) {
                        work[nw++] = r;
                        queued[r] = 1;
                    }
                while (nw) {
                    uint32_t q = work[--nw];
                    queued[q] = 0;
                    const uint64_t *fq = g->rule_follow + (size_t)q * W;
                    for (uint32_t k = head[q]; k < head[q + 1]; k++) {
                        uint32_t r = adj[k];
                        uint64_t *fr = g->rule_follow + (size_t)r * W;
                        bool grew = false;
                        for (uint32_t w = 0; w < W; w++) {
                            uint64_t nv = fr[w] | fq[w];
                            if (nv != fr[w]) {
                                fr[w] = nv;
                                grew = true;
                            }
                        }
                        if (grew && !queued[r] && head[r + 1] > head[r]) {
                            work[nw++] = r;
                            queued[r] = 1;
                        }
                    }
                }
            }
        }
        sift__gx_free(head);
        sift__gx_free(adj);
        sift__gx_free(work);
        sift__gx_free(queued);
    }
    sift__gx_u32_free(&edge_from);
    sift__gx_u32_free(&edge_to);
    return rc;
}
