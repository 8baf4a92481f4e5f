/*
 * row_bookkeeping.h - a row's state (sift__gpu_row) between the passes of a run: the start
 * of a run, a pending temperature, a filter's setup, what a count pass and a compaction
 * leave, the flags a filter leaves. On the device one thread (the row's, or the last block
 * of a pass) runs these; the host reference calls the same functions at the same points.
 */
#ifndef SIFT_GPU_ROW_BOOKKEEPING_H
#define SIFT_GPU_ROW_BOOKKEEPING_H

#include "gpu/radix_select.h"

/* The start of a run: the whole vocabulary, in position order, straight from the input. */
SIFT_HD void sift__gpu_row_begin(sift__gpu_row *r, int32_t n_vocab)
{
    memset(r, 0, sizeof *r);
    r->n = n_vocab;
    r->src = SIFT_GPU_SRC_INPUT;
    r->ids = 1;
    r->mode = n_vocab <= SIFT_GPU_SMALL ? SIFT_GPU_TAIL : SIFT_GPU_FULL;
    r->next_op = 0;
    r->only = -1;
    r->token = -1;
}

/* temp(t > 0) on a long list: one more pending division (the max divides exactly as its
 * element does). t <= 0 needs the position of the first maximum (an argmax pass). */
SIFT_HD void sift__gpu_row_temp(sift__gpu_row *r, float t)
{
    r->div[r->n_div++] = t;
    if (r->has_max) r->max = r->max / t;
    r->flags &= ~SIFT_GPU_PROBS;
}

/* Set up a filter on a long list. Returns the state: F_SELECT (histogram passes follow),
 * F_CUT (the cut is known: min_p's predicate, counted first), F_KEEP (nothing to cut). */
SIFT_HD int sift__gpu_filter_init(sift__gpu_row *r, int kind, const sift__gpu_param *pm)
{
    memset(&r->sel, 0, sizeof r->sel);
    r->pred = 0;
    r->counted = 0;
    r->need = 0x7fffffff;
    const uint32_t n = (uint32_t)r->n;
    if (kind == SIFT_GPU_OP_TOP_K) {
        const uint32_t k = (uint32_t)pm->k;
        r->fstate = k >= n ? SIFT_GPU_F_KEEP : SIFT_GPU_F_SELECT;
        r->sel.active = SIFT_GPU_SEL_COUNT;
        r->sel.k = k;
    } else if (kind == SIFT_GPU_OP_TOP_P) {
        r->fstate = SIFT_GPU_F_SELECT;
        r->sel.active = SIFT_GPU_SEL_MASS | (pm->k > 1 ? SIFT_GPU_SEL_COUNT : 0u);
        r->sel.k = (uint32_t)pm->k;
        r->sel.p = pm->f0;
    } else { /* min_p: count l >= max + logf(p) first */
        r->kmin = pm->k > 1 ? (uint32_t)pm->k : 1u;
        r->thr = sift__gpu_key(r->max + pm->f1);
        r->pred = 1;
        r->fstate = SIFT_GPU_F_CUT;
    }
    return r->fstate;
}

/* After a count pass (totals of entries above and at the cut key). min_p: keep the
 * predicate's set when it holds at least max(min_keep, 1) entries, else fall back to a
 * count selection of that many (the CPU's sorted path). Returns the filter state. */
SIFT_HD int sift__gpu_row_counted(sift__gpu_row *r, uint32_t n_gt, uint32_t n_eq)
{
    r->n_gt = n_gt;
    r->n_eq = n_eq;
    r->counted = 1;
    if (r->pred) {
        r->pred = 0;
        const uint32_t kept = n_gt + n_eq;
        if (kept < r->kmin) {
            if (r->kmin >= (uint32_t)r->n) {
                r->fstate = SIFT_GPU_F_KEEP;
                r->flags |= SIFT_GPU_SORTED;
                return r->fstate;
            }
            memset(&r->sel, 0, sizeof r->sel);
            r->sel.active = SIFT_GPU_SEL_COUNT;
            r->sel.k = r->kmin;
            r->fstate = SIFT_GPU_F_SELECT;
            r->counted = 0;
            r->flags |= SIFT_GPU_SORTED;
        }
    }
    return r->fstate;
}

/* Entries a cut keeps. */
SIFT_HD uint32_t sift__gpu_row_kept(const sift__gpu_row *r)
{
    const uint32_t nd = (uint32_t)r->need;
    return r->n_gt + (r->n_eq < nd ? r->n_eq : nd);
}

/* After a compaction wrote `n` entries (max: the largest) to the other buffer. */
SIFT_HD void sift__gpu_row_compacted(sift__gpu_row *r, int32_t op, int32_t n, float max)
{
    r->n = n;
    r->src = r->src == SIFT_GPU_SRC_BUF0 ? SIFT_GPU_SRC_BUF1 : SIFT_GPU_SRC_BUF0;
    r->ids = 0;
    r->n_div = 0;
    r->only = -1;
    r->has_max = n > 0;
    r->max = max;
    r->flags &= ~(SIFT_GPU_PHYS | SIFT_GPU_PROBS);
    r->fstate = SIFT_GPU_F_NONE;
    if (n <= SIFT_GPU_SMALL) {
        r->mode = SIFT_GPU_TAIL;
        r->next_op = op + 1;
    }
}

/* Flags a filter leaves (the CPU's): top_k and top_p sort; min_p keeps the order it found
 * (its fallback sorts: set by sift__gpu_row_counted). */
SIFT_HD void sift__gpu_row_filtered(sift__gpu_row *r, int kind)
{
    if (kind == SIFT_GPU_OP_TOP_K || kind == SIFT_GPU_OP_TOP_P) r->flags |= SIFT_GPU_SORTED;
    r->flags &= ~SIFT_GPU_PROBS;
}

#endif
