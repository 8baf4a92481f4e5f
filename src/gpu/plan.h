/*
 * plan.h - how a chain becomes a device program and a CPU tail (host logic only; no CUDA
 * needed, unit-tested on the CPU).
 *
 * A plan is made from chain items (samplers/chain_items.h): a spec parsed once by libsift's
 * own parser (sift__gpu_plan_spec, so errors read exactly like a CPU chain's), or sampling
 * params turned into the same items by params.c (sift__chain_items_from_params, then
 * sift__gpu_plan_items). The planner walks the items and keeps the longest prefix the
 * device can run:
 *
 *   logit_bias, penalties   only before the first filter (they are applied to the whole
 *                           vocabulary in position order, as the CPU does on a fresh array);
 *                           penalties only with a window of at most SIFT_GPU_MAX_WINDOW
 *   temp, temp_ext(t,<=0,.) at most SIFT_GPU_MAX_DIV of them
 *   top_k, top_p, min_p
 *   greedy, dist            only as the spec's last item (a selector ends the chain)
 *   any disabled sampler    ("?name": a no-op on the CPU too) is skipped; a disabled
 *                           sampler of a device kind keeps an op slot (off for that row),
 *                           so that a sequence's own spec can turn it on
 *
 * Everything from the first other item on is the CPU tail, kept as items and built into
 * sampler objects per row (sift__gpu_tail_chain). Each row's
 * parameters are a sift__gpu_param per op (plus its logit biases); a row's own spec must have
 * the same items in the device prefix (sift__gpu_plan_row) and may have any tail.
 *
 * sift__gpu_steps() turns a plan (and the rows' host-known parameters) into the list of
 * passes a run launches; the kernels and the host reference both execute that list.
 */
#ifndef SIFT_GPU_PLAN_H
#define SIFT_GPU_PLAN_H

#include "gpu/device_types.h"
#include "samplers/chain_items.h"
#include "sift.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SIFT_GPU_MAX_ITEMS 256

typedef struct sift__gpu_op {
    int32_t kind; /* SIFT_GPU_OP_* */
    int32_t item; /* the spec item it runs */
} sift__gpu_op;

typedef struct sift__gpu_plan {
    int32_t n_items;                   /* items of the base spec */
    int32_t n_dev_items;               /* items [0, n_dev_items) are the device prefix */
    int32_t n_ops;
    sift__gpu_op ops[SIFT_GPU_MAX_OPS];
    int16_t item_op[SIFT_GPU_MAX_ITEMS]; /* device prefix item -> op index, -1 = skipped no-op */
    int8_t item_kind[SIFT_GPU_MAX_ITEMS]; /* sift__item_kind of the device prefix items */
    int32_t selects;                   /* the last op is greedy or dist */
    int32_t window;                    /* penalty window capacity (0 without penalties) */
    int32_t n_vocab;
    int32_t cpu_dist;                  /* a final dist was left to the CPU */
    char desc[512];                    /* "device: top-k -> temp | cpu: mirostat-v2" */
} sift__gpu_plan;

/* One row's parameters. */
typedef struct sift__gpu_rowspec {
    sift__gpu_param prm[SIFT_GPU_MAX_OPS];
    sift__gpu_bias *bias; /* every bias op's entries; an op's start at prm[op].off */
    int32_t n_bias;
    sift__chain_items tail; /* the row's CPU tail (n == 0: none) */
} sift__gpu_rowspec;

void sift__gpu_rowspec_free(sift__gpu_rowspec *row);

/* Split items for a vocabulary of n_vocab: the plan, and the items' parameters as a row;
 * the tail items move from items to row->tail (items keeps the device prefix). env may be
 * NULL (its n_vocab is replaced by n_vocab). cpu_dist: a final dist stays on the CPU
 * (llama.cpp's mt19937 stream) instead of the device's Philox stream. Errors: the CPU
 * samplers' own for items they refuse, SIFT_E_INVAL for a bad n_vocab or a NaN bias. */
sift_status sift__gpu_plan_items(sift__chain_items *items, const sift_chain_env *env, int32_t n_vocab, int cpu_dist,
                                 sift__gpu_plan *plan, sift__gpu_rowspec *row, sift_error *err);

/* sift__gpu_plan_items of a parsed spec: SIFT_E_PARSE with libsift's message for a bad
 * spec. */
sift_status sift__gpu_plan_spec(const char *spec, const sift_chain_env *env, int32_t n_vocab, int cpu_dist,
                                sift__gpu_plan *plan, sift__gpu_rowspec *row, sift_error *err);

/* The CPU tail of a row as a chain of its own (NULL in *out when the row has none). */
sift_status sift__gpu_tail_chain(const sift__gpu_rowspec *row, const sift_chain_env *env, sift_chain **out,
                                 sift_error *err);

/* A row's own spec under an existing plan: same device prefix shape (SIFT_E_INVAL naming
 * the first item that differs), penalty windows within the plan's capacity. */
sift_status sift__gpu_plan_row(const sift__gpu_plan *plan, const char *spec, const sift_chain_env *env,
                               sift__gpu_rowspec *row, sift_error *err);

/* The largest number of candidates a row can hand to its CPU tail: the smallest enabled
 * top_k of the row, else the whole vocabulary. */
int32_t sift__gpu_row_bound(const sift__gpu_plan *plan, const sift__gpu_rowspec *row);

/* The longest list a row can bring into the tail kernel in a run of these rows: what its
 * shared memory must hold (n_vocab for short vocabularies, else at most SIFT_GPU_SMALL). */
int32_t sift__gpu_tail_cap(const sift__gpu_plan *plan, const sift__gpu_rowspec *const *rows, int32_t n_seq);

/* ---- the passes of a run ---------------------------------------------------------------- */

enum {
    SIFT_GPU_STEP_BEGIN = 1, /* rows: a fresh list (the input) */
    SIFT_GPU_STEP_PEN_PREP,  /* block per row: the window's distinct tokens and counts */
    SIFT_GPU_STEP_COPY,      /* chunks: the input (as read) into buffer 0 */
    SIFT_GPU_STEP_BIAS,      /* rows: biases added in order */
    SIFT_GPU_STEP_PEN_APPLY, /* block per row: penalties on the window's tokens */
    SIFT_GPU_STEP_TEMP,      /* rows: t > 0 becomes a pending division */
    SIFT_GPU_STEP_ARGMAX,    /* chunks: first maximum (temp <= 0: keep only it; greedy: the token) */
    SIFT_GPU_STEP_MAX,       /* chunks: the largest logit */
    SIFT_GPU_STEP_HIST,      /* chunks: radix level `level` of a selection */
    SIFT_GPU_STEP_COUNT,     /* chunks: entries above / at the cut; per-block offsets */
    SIFT_GPU_STEP_WRITE,     /* chunks: the kept entries, in order, into the other buffer */
    SIFT_GPU_STEP_DIST,      /* chunks: probability sums; the last block draws */
    SIFT_GPU_STEP_TAIL,      /* block per row: the remaining ops of short lists, in shared memory */
    SIFT_GPU_STEP_FINISH,    /* chunks: long lists into the handoff buffers */
    SIFT_GPU_STEP_OUT,       /* rows: what the host reads back */
    SIFT_GPU_STEP_ACCEPT,    /* rows: the selected token into the penalty windows */
};

typedef struct sift__gpu_step {
    int32_t kind;  /* SIFT_GPU_STEP_* */
    int32_t op;    /* the op it serves, -1 for none */
    int32_t level; /* HIST: 0..2; COUNT: 1 when it starts min_p (its predicate) */
} sift__gpu_step;

#define SIFT_GPU_MAX_STEPS (8 + 12 * SIFT_GPU_MAX_OPS)

/* The passes for rows[0..n_seq) (their parameters decide which passes can be left out:
 * e.g. once every row's top_k keeps at most SIFT_GPU_SMALL entries, every row is in the
 * tail kernel and no later long-list pass is launched). Returns the number of steps. */
int32_t sift__gpu_steps(const sift__gpu_plan *plan, const sift__gpu_rowspec *const *rows, int32_t n_seq,
                        sift__gpu_step *steps);

const char *sift__gpu_step_name(int32_t kind);

#ifdef __cplusplus
}
#endif

#endif
