/*
 * device_types.h - the sizes, op kinds, flags and structs the device program is made of,
 * shared by the CUDA kernels (kernels.cu), their host reference (host_reference.c), the
 * planner (plan.c) and the handoff (handoff.c); compiled by nvcc and by the host C compiler.
 *
 * The device chain's algorithms are written once, as small functions of plain values
 * (radix_select.h, philox.h, sampler_math.h, row_bookkeeping.h). The kernels run them in
 * parallel; the host reference runs the very same functions sequentially, pass for pass
 * and chunk for chunk, so that the logic of every kernel is checked against the CPU
 * samplers on machines without a GPU. SIFT_HD marks them: __host__ __device__ under nvcc,
 * static inline for C.
 *
 * Representation. A row's candidates are a list in device memory (static capacity n_vocab)
 * whose entries keep their order: at first the caller's logits themselves (ids are the
 * positions), after a filter a compacted copy in one of two ping-pong buffers. Filters
 * never reorder; each records what the CPU chain would know about its array (sorted, or
 * in position order), and the order is made physical only where it matters: when a short
 * list moves to the "tail" kernel (one block per row, everything in shared memory) and
 * when candidates are handed to a CPU tail. Temperatures are not written back: they are
 * pending divisions applied on every read (exactly the CPU's l / t, in order), and a
 * compaction writes the transformed values.
 */
#ifndef SIFT_GPU_DEVICE_TYPES_H
#define SIFT_GPU_DEVICE_TYPES_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define SIFT_HD __host__ __device__ __forceinline__
#else
#define SIFT_HD static inline
#endif

/* ---- sizes -------------------------------------------------------------------------------- */

#define SIFT_GPU_THREADS 256                      /* threads per block, every kernel */
#define SIFT_GPU_PER_THREAD 16                    /* elements per thread in a chunk */
#define SIFT_GPU_CHUNK (SIFT_GPU_THREADS * SIFT_GPU_PER_THREAD) /* elements per block: 4096 */
#define SIFT_GPU_SMALL 4096                       /* lists this short go to the tail kernel */
#define SIFT_GPU_NBINS 2048                       /* bins of the widest radix level */
#define SIFT_GPU_BINS_PER_THREAD (SIFT_GPU_NBINS / SIFT_GPU_THREADS)
#define SIFT_GPU_MAX_DIV 4                        /* temperatures in one device prefix */
#define SIFT_GPU_MAX_OPS 32                       /* samplers in one device prefix */
#define SIFT_GPU_MAX_WINDOW 8192                  /* longest penalty window on the device */
#define SIFT_GPU_MAX_VOCAB ((1 << 21) - 1)        /* keeps fixed-point mass sums below 2^64 */
#define SIFT_GPU_MASS_ONE 8796093022208.0         /* 2^43: fixed-point probability 1 */

/* Fixed-point masses and their sums: unsigned long long (not uint64_t, which is unsigned
 * long on LP64 hosts) because that is the type CUDA's 64-bit atomics take. */
typedef unsigned long long sift__gpu_m64;

/* ---- ops, row modes, flags ----------------------------------------------------------------- */

enum {
    SIFT_GPU_OP_BIAS = 1,  /* logit_bias: add biases, in order, to listed tokens */
    SIFT_GPU_OP_PENALTIES, /* repetition / frequency / presence over the row's window */
    SIFT_GPU_OP_TEMP,      /* l / t; t <= 0 keeps the first maximum only */
    SIFT_GPU_OP_TOP_K,
    SIFT_GPU_OP_TOP_P,
    SIFT_GPU_OP_MIN_P,
    SIFT_GPU_OP_GREEDY,
    SIFT_GPU_OP_DIST,
};

enum { SIFT_GPU_FULL = 0, SIFT_GPU_TAIL = 1, SIFT_GPU_DONE = 2 };        /* row modes */
enum { SIFT_GPU_SRC_INPUT = -1, SIFT_GPU_SRC_BUF0 = 0, SIFT_GPU_SRC_BUF1 = 1 };
enum { SIFT_GPU_F_NONE = 0, SIFT_GPU_F_SELECT, SIFT_GPU_F_CUT, SIFT_GPU_F_KEEP }; /* filter states */

#define SIFT_GPU_SORTED 0x1u /* the CPU chain would hold this list sorted (descending) */
#define SIFT_GPU_PHYS 0x2u   /* the list IS in that order (else: in position = id order) */
#define SIFT_GPU_PROBS 0x4u  /* probabilities of the current logits are valid (tail only) */

#define SIFT_GPU_SEL_COUNT 0x1u
#define SIFT_GPU_SEL_MASS 0x2u

/* One op's parameters for one row. */
typedef struct sift__gpu_param {
    int32_t on;   /* 0: this row skips the op (a disabled value, e.g. top_k(0)) */
    int32_t k;    /* top_k: k; top_p, min_p: min_keep; penalties: last_n; bias: entries */
    int32_t off;  /* bias: first entry in the bias pool */
    float f0;     /* top_p, min_p: p; temp: t; penalties: repeat */
    float f1;     /* min_p: logf(p) (the host's logf, as the CPU sampler computes it); penalties: freq */
    float f2;     /* penalties: present */
    uint32_t seed;/* dist */
    int32_t pad;
} sift__gpu_param;

typedef struct sift__gpu_bias {
    int32_t token;
    float bias;
} sift__gpu_bias;

/* A selection in progress (radix_select.h). */
typedef struct sift__gpu_sel {
    uint32_t prefix;     /* key bits decided by the levels so far */
    int32_t level;       /* the level the next histogram pass builds: 0, 1, 2 */
    uint32_t active;     /* SIFT_GPU_SEL_COUNT | SIFT_GPU_SEL_MASS */
    uint32_t k;          /* count target */
    float p;             /* top_p's p: the mass target is ceil(p * total) */
    uint32_t above;      /* elements whose key is above the decided prefix */
    sift__gpu_m64 mass_t;     /* mass target (fixed point), set when level 0 is decided */
    sift__gpu_m64 mass_above; /* their mass */
} sift__gpu_sel;

/* Everything the device knows about a row during a run (device memory, one per row). */
typedef struct sift__gpu_row {
    int32_t n;         /* entries in the current list */
    int32_t src;       /* SIFT_GPU_SRC_* */
    int32_t ids;       /* 1: an entry's id is its position (no id array) */
    int32_t mode;      /* SIFT_GPU_FULL / TAIL / DONE */
    int32_t next_op;   /* TAIL: the first op the tail kernel runs */
    uint32_t flags;    /* SIFT_GPU_SORTED | PHYS | PROBS */
    int32_t n_div;     /* pending temperatures, divided in this order on every read */
    float div[SIFT_GPU_MAX_DIV];
    int32_t only;      /* >= 0: every other position reads as -inf (temp <= 0) */
    int32_t has_max;   /* max holds the largest current logit */
    float max;
    int32_t fstate;    /* SIFT_GPU_F_*: the filter in progress */
    int32_t pred;      /* min_p: the cut being counted is the predicate l >= bound */
    int32_t counted;   /* the count pass for the current cut has run (offsets are ready) */
    sift__gpu_sel sel;
    uint32_t thr;      /* the cut: keep key > thr, and the first `need` entries with key == thr */
    int32_t need;
    uint32_t kmin;     /* min_p: max(min_keep, 1) */
    uint32_t n_gt, n_eq; /* totals of the last count pass */
    uint32_t done;     /* blocks of the current kernel that have finished */
    int32_t token;     /* the selected token, -1 = none */
} sift__gpu_row;

/* What the host gets back per row. */
typedef struct sift__gpu_out {
    int32_t n;      /* candidates handed over (0 when the device selected) */
    uint32_t flags; /* SIFT_GPU_SORTED | PHYS | PROBS of the handed-over list */
    int32_t token;  /* selected token, -1 = none */
    int32_t pad;
} sift__gpu_out;

#endif
