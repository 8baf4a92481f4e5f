/*
 * kernels.h - the one entry point into kernels.cu: run a list of passes (plan.h's steps)
 * on a stream, over the device buffers a chain owns. C interface, so that the chain's host
 * code (chain.c) is plain C.
 */
#ifndef SIFT_GPU_KERNELS_H
#define SIFT_GPU_KERNELS_H

#include "gpu/plan.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Device pointers and sizes (all device memory unless noted). Row r of a [n_seq_max][...]
 * array starts at r times its stride. */
typedef struct sift__gpu_dev {
    /* the caller's logits for this run */
    const float *in;
    int64_t ld;
    int32_t in_vec;            /* rows are 16-byte aligned: vector loads */
    int32_t n_seq;             /* rows in this run */
    /* sizes */
    int32_t n_vocab, n_seq_max, n_chunks, n_ops;
    int64_t stride;            /* row stride of the list buffers (n_vocab rounded up to 4) */
    int32_t window;            /* penalty window capacity */
    int32_t cap;               /* handoff entries per row */
    int32_t tail_cap;          /* longest list the tail kernel gets in this run (its shared memory) */
    int8_t kinds[SIFT_GPU_MAX_OPS];
    /* state */
    sift__gpu_row *rows;        /* [n_seq_max] */
    const sift__gpu_param *prm; /* [n_ops][n_seq_max] */
    const sift__gpu_bias *bias; /* the bias pool (prm.off indexes it) */
    int32_t *lid[2];           /* [n_seq_max][stride] list buffers */
    float *llg[2];
    uint32_t *hcnt;            /* [n_seq_max][SIFT_GPU_NBINS] */
    unsigned long long *hmass;
    uint32_t *pa, *pb;         /* [n_seq_max][n_chunks] per-block partials */
    double *pd;
    unsigned long long *pk;
    int32_t *ring, *ring_first, *ring_count; /* [n_seq_max][window], [n_seq_max] */
    int32_t *pen_tok, *pen_cnt, *pen_n;      /* [n_seq_max][window], [n_seq_max] */
    unsigned long long *rng;   /* [n_seq_max] dist draws made */
    /* results */
    int32_t *hid;              /* [n_seq_max][cap] */
    float *hlg, *hp;
    sift__gpu_out *out;         /* [n_seq_max] */
    int32_t *tokens;           /* [n_seq_max] */
    const int32_t *accept;     /* [n_seq_max] tokens to accept (sift__gpu_accept) */
} sift__gpu_dev;

/* Launch the steps on stream (a cudaStream_t). Returns a cudaError_t (0 = success). */
int sift__gpu_launch(const sift__gpu_dev *dev, const sift__gpu_step *steps, int32_t n_steps, void *stream);
/* Accept dev->accept[0..n_seq) into the penalty windows (negative entries skipped). */
int sift__gpu_accept(const sift__gpu_dev *dev, void *stream);
/* Allow the tail kernel its largest shared memory (once per device). */
int sift__gpu_prepare(void);
/* Dynamic shared memory of the tail kernel for lists of up to cap entries. */
size_t sift__gpu_tail_smem(int32_t cap);

#ifdef __cplusplus
}
#endif

#endif
