/*
 * host_reference.h - the host reference of the device program: every pass of a run
 * (plan.h's step list) executed sequentially on the CPU, block by block, with the same
 * shared functions the CUDA kernels call (radix_select.h, philox.h, sampler_math.h,
 * row_bookkeeping.h). It exists so that the kernels' logic - radix levels, tie counts,
 * compaction offsets, the tail kernel's order of operations, dist's sums and Philox
 * draws - is tested against the CPU samplers on machines without a GPU, and so that
 * device results can be compared with it where a GPU exists.
 *
 * What it cannot reproduce is the device's own floating-point library: expf() on the
 * device may differ from glibc's in the last bit, which moves a probability by an ulp.
 * Everything else (the order of every sum, every comparison) is the kernels'.
 */
#ifndef SIFT_GPU_HOST_REFERENCE_H
#define SIFT_GPU_HOST_REFERENCE_H

#include "gpu/philox.h"
#include "gpu/plan.h"
#include "gpu/radix_select.h"
#include "gpu/row_bookkeeping.h"
#include "gpu/sampler_math.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sift__gpu_ref {
    const sift__gpu_plan *plan;
    int32_t n_seq, n_vocab, cap, n_chunks;
    /* per row, kept between runs */
    uint64_t *rng;          /* [n_seq] draws made by dist */
    int32_t *ring;          /* [n_seq][window] accepted tokens */
    int32_t *ring_first, *ring_count;
    /* per run */
    sift__gpu_row *rows;     /* [n_seq] */
    int32_t *list_id[2];    /* [n_seq][n_vocab] */
    float *list_lg[2];
    uint32_t *hist_cnt;     /* [NBINS] (one row at a time here) */
    sift__gpu_m64 *hist_mass;
    uint32_t *part_a, *part_b; /* [n_chunks] per-block counts / offsets */
    double *part_d;         /* [n_chunks] per-block sums */
    uint64_t *part_k;       /* [n_chunks] per-block max keys */
    int32_t *pen_tok, *pen_cnt, *pen_n; /* [n_seq][window], [n_seq] */
    /* results (what the host reads back) */
    sift__gpu_out *out;      /* [n_seq] */
    int32_t *hid;           /* [n_seq][cap] */
    float *hlg, *hp;
    struct sift__gpu_tail_list *tail; /* the tail kernel's shared memory */
    int32_t tail_overflow;  /* a list longer than sift__gpu_tail_cap entered the tail (a bug) */
} sift__gpu_ref;

/* Buffers for n_seq rows and a handoff capacity of cap candidates per row. */
sift_status sift__gpu_ref_init(sift__gpu_ref *ref, const sift__gpu_plan *plan, int32_t n_seq, int32_t cap);
void sift__gpu_ref_free(sift__gpu_ref *ref);

/* One run over rows 0..n_seq-1 of logits (row r at logits + r * ld), with these rows'
 * parameters. As on the device, a selected token is accepted into the penalty windows. */
void sift__gpu_ref_run(sift__gpu_ref *ref, const sift__gpu_rowspec *const *rows, int32_t n_seq, const float *logits,
                       int64_t ld);

/* Accept tokens chosen elsewhere (by CPU tails) into the penalty windows of rows 0..n_seq-1
 * (negative entries are skipped). */
void sift__gpu_ref_accept(sift__gpu_ref *ref, const sift__gpu_rowspec *const *rows, int32_t n_seq,
                          const int32_t *tokens);

/* Forget row r's window and stream position. */
void sift__gpu_ref_reset_row(sift__gpu_ref *ref, int32_t r);

#ifdef __cplusplus
}
#endif

#endif
