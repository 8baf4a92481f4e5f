/*
 * handoff.c - device candidates -> sift_candidates for a CPU tail (see handoff.h).
 */
#include "gpu/handoff.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_desc(const void *a, const void *b)
{
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

sift_status sift__gpu_handoff_unpack(const sift__gpu_out *out, const int32_t *ids, const float *logits,
                                     const float *probs, uint64_t *scratch, sift_candidates *cand)
{
    if (!out || !cand || out->token >= 0 || out->n < 0 || (size_t)out->n > cand->capacity) return SIFT_E_INVAL;
    const int32_t n = out->n;
    const int with_p = (out->flags & SIFT_GPU_PROBS) && probs;
    if ((out->flags & SIFT_GPU_SORTED) && !(out->flags & SIFT_GPU_PHYS) && n > 1) {
        /* the device kept id order; the CPU chain holds this sorted */
        for (int32_t i = 0; i < n; i++) scratch[i] = sift__gpu_sortkey(logits[i], i);
        qsort(scratch, (size_t)n, sizeof *scratch, cmp_desc);
        for (int32_t i = 0; i < n; i++) {
            const int32_t pos = sift__gpu_sortkey_pos(scratch[i]);
            cand->id[i] = ids[pos];
            cand->logit[i] = logits[pos];
            if (with_p) cand->p[i] = probs[pos];
        }
    } else {
        memcpy(cand->id, ids, (size_t)n * sizeof *ids);
        memcpy(cand->logit, logits, (size_t)n * sizeof *logits);
        if (with_p) memcpy(cand->p, probs, (size_t)n * sizeof *probs);
    }
    cand->size = (size_t)n;
    cand->selected = -1;
    cand->sorted = (out->flags & SIFT_GPU_SORTED) != 0;
    cand->flags = with_p ? SIFT_CAND_PROBS : 0u;
    return SIFT_OK;
}

int sift__gpu_candidates_same(const sift_candidates *a, const sift_candidates *b, char *msg, size_t cap)
{
    if (a->size != b->size) return snprintf(msg, cap, "size %zu vs %zu", a->size, b->size), 0;
    if (a->sorted != b->sorted) return snprintf(msg, cap, "sorted %d vs %d", a->sorted, b->sorted), 0;
    const uint32_t pa = a->flags & SIFT_CAND_PROBS, pb = b->flags & SIFT_CAND_PROBS;
    if (pa != pb) return snprintf(msg, cap, "probabilities valid %d vs %d", pa != 0, pb != 0), 0;
    for (size_t i = 0; i < a->size; i++) {
        if (a->id[i] != b->id[i])
            return snprintf(msg, cap, "[%zu]: id %d vs %d", i, (int)a->id[i], (int)b->id[i]), 0;
        if (memcmp(&a->logit[i], &b->logit[i], sizeof(float)) != 0)
            return snprintf(msg, cap, "[%zu] id %d: logit %.9g vs %.9g", i, (int)a->id[i], (double)a->logit[i],
                            (double)b->logit[i]),
                   0;
        if (pa && memcmp(&a->p[i], &b->p[i], sizeof(float)) != 0)
            return snprintf(msg, cap, "[%zu] id %d: p %.9g vs %.9g", i, (int)a->id[i], (double)a->p[i], (double)b->p[i]),
                   0;
    }
    if (cap) msg[0] = 0;
    return 1;
}

typedef struct idl {
    int32_t id;
    float logit;
} idl;

static int cmp_id(const void *a, const void *b)
{
    const idl *x = a, *y = b;
    return (x->id > y->id) - (x->id < y->id);
}

int sift__gpu_candidates_same_set(const sift_candidates *a, const sift_candidates *b, char *msg, size_t cap)
{
    if (a->size != b->size) return snprintf(msg, cap, "size %zu vs %zu", a->size, b->size), 0;
    idl *x = malloc((a->size + 1) * sizeof *x), *y = malloc((b->size + 1) * sizeof *y);
    int same = x && y;
    if (!same) snprintf(msg, cap, "out of memory");
    for (size_t i = 0; same && i < a->size; i++) {
        x[i] = (idl){a->id[i], a->logit[i]};
        y[i] = (idl){b->id[i], b->logit[i]};
    }
    if (same) {
        qsort(x, a->size, sizeof *x, cmp_id);
        qsort(y, b->size, sizeof *y, cmp_id);
    }
    for (size_t i = 0; same && i < a->size; i++) {
        if (x[i].id != y[i].id) {
            snprintf(msg, cap, "id %d vs %d (in id order, entry %zu)", (int)x[i].id, (int)y[i].id, i);
            same = 0;
        } else if (memcmp(&x[i].logit, &y[i].logit, sizeof(float)) != 0) {
            snprintf(msg, cap, "id %d: logit %.9g vs %.9g", (int)x[i].id, (double)x[i].logit, (double)y[i].logit);
            same = 0;
        }
    }
    free(x);
    free(y);
    if (same && cap) msg[0] = 0;
    return same;
}
