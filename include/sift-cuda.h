/*
 * sift-cuda.h - the device chain: sift's sampler chain run on a CUDA GPU, where the logits
 * already are, over a batch of sequences at once (llama.cpp's "backend sampling").
 *
 * Only the chosen tokens - or, when the chain ends in a sampler that has to run on the CPU
 * (grammar, DRY, mirostat, typical, xtc, ...), a short list of surviving candidates - cross
 * to the host. Link the `sift_cuda` library (built when nvcc is found); libsift itself never
 * depends on CUDA. This header needs no CUDA header: streams are passed as
 * `struct CUstream_st *`, which is what cudaStream_t is.
 *
 * The chain is described as a CPU chain is (a chain spec, or sift_sampling_params as
 * llama.cpp common builds it; both become the same sampler items). It is split once, at
 * creation:
 *
 *   device prefix  the longest prefix made of samplers the device runs: logit_bias and
 *                  penalties (before the first filter only), temp (and temp_ext without a
 *                  dynamic range), top_k, top_p, min_p, and greedy or dist as the chain's
 *                  last sampler. Disabled samplers ("?top-k") are skipped wherever they are.
 *   CPU tail       everything from the first other sampler on: one ordinary sift_chain
 *                  per sequence, which receives the device's surviving candidates (ids,
 *                  logits, and probabilities when they are valid) in the order and with the
 *                  `sorted` flag the all-CPU chain would have had there.
 *
 * Per sequence: each row of the batch has its own parameters (and dist seed) for the same
 * device samplers (sift_cuda_chain_set_seq with a spec of the same shape, e.g. another k,
 * p or seed, or a disabled value), and its own CPU tail, which may be any chain.
 *
 * On the device, shapes are static: every buffer is sized at creation for n_seq_max rows of
 * n_vocab logits; filters mark and compact candidates and keep the counts in device memory;
 * nothing inside sift_cuda_chain_run() waits for the host, so a run can be captured in a
 * CUDA graph. top_k accepts any k up to the whole vocabulary (a three-level radix select,
 * not a sort limited by shared memory); top_p finds its cut on mass histograms of the same
 * radix levels. Penalties keep each sequence's window of accepted tokens on the device.
 *
 * Results are those of the CPU samplers: the same candidates in the same order (tied
 * logits are ordered by token id, where llama.cpp's order follows its sort), except that
 * top_p over more than 4096 candidates cuts where exact arithmetic does (llama.cpp's float
 * sum over the whole vocabulary can move the cut at p >= 0.99), and that dist draws from
 * Philox4x32-10 keyed by the sequence's seed (reproducible for a seed, the same
 * distribution, not the numbers of the CPU's mt19937; cpu_dist keeps those). docs/gpu.md
 * says exactly where results can differ and why.
 *
 * Errors are values (sift_status + sift_error), as everywhere in sift. Without a CUDA
 * device (or driver) the constructors fail with SIFT_E_UNSUPPORTED and a message saying so;
 * sift_cuda_device_count() tells beforehand. A chain is used by one thread at a time.
 */
#ifndef SIFT_CUDA_H
#define SIFT_CUDA_H

#include "sift.h"

#ifdef __cplusplus
extern "C" {
#endif

/* cudaStream_t without including CUDA headers; NULL is the legacy default stream. */
typedef struct CUstream_st *sift_cuda_stream;

typedef struct sift_cuda_chain sift_cuda_chain;

typedef struct sift_cuda_params {
    int32_t n_vocab;     /* logits per row (required, 1 .. 2^21 - 1) */
    int32_t n_seq_max;   /* most rows a run takes (default 1) */
    int32_t device;      /* CUDA device ordinal the chain's memory lives on (default 0) */
    int32_t handoff_cap; /* candidates per row the CPU tail can receive; 0 = the bound the
                            device prefix implies (top_k's k), else n_vocab */
    bool cpu_dist;       /* leave a final dist to the CPU: llama.cpp's mt19937 stream, token
                            for token, at the cost of handing the candidates over (default
                            false: the device draws from its Philox stream) */
} sift_cuda_params;

/* { n_vocab 0 (must be set), n_seq_max 1, device 0, handoff_cap 0, cpu_dist false } */
SIFT_API sift_cuda_params sift_cuda_default_params(void);

/* Number of CUDA devices usable by this process; 0 without a device or a driver (never an
 * error). */
SIFT_API int sift_cuda_device_count(void);
/* The name of device `device` into buf (snprintf-like); "" when there is none. */
SIFT_API int sift_cuda_device_name(int device, char *buf, size_t cap);

/* A device chain from a chain spec (see sift.h, "chain spec"); env as for
 * sift_chain_from_spec (env->n_vocab is ignored: params->n_vocab is used). Every row starts
 * with the spec's parameters. NULL on error: SIFT_E_PARSE (the spec, as libsift reports
 * it), SIFT_E_INVAL (params), SIFT_E_UNSUPPORTED (no device), SIFT_E_NOMEM (host or device
 * memory). */
SIFT_API sift_cuda_chain *sift_cuda_chain_from_spec(const char *spec, const sift_chain_env *env,
                                                    const sift_cuda_params *params, sift_error *err);
/* The same from llama.cpp-style sampling parameters: the chain sift_chain_from_params()
 * builds (logit biases, params->samplers in order, then dist or adaptive_p; mirostat). */
SIFT_API sift_cuda_chain *sift_cuda_chain_from_params(const sift_sampling_params *sp, const sift_chain_env *env,
                                                      const sift_cuda_params *params, sift_error *err);
/* Free the chain, its device and pinned memory and its CPU tails (NULL-safe). Waits for
 * work in flight on the chain's buffers to finish. */
SIFT_API void sift_cuda_chain_free(sift_cuda_chain *chain);

/* -- shape (no device work) -- */
/* Samplers of the spec run on the device (disabled ones included) / on the CPU. */
SIFT_API int32_t sift_cuda_chain_n_device(const sift_cuda_chain *chain);
SIFT_API int32_t sift_cuda_chain_n_cpu(const sift_cuda_chain *chain);
/* Whether the device selects the token itself (the chain ends in greedy or dist on it). */
SIFT_API bool sift_cuda_chain_selects(const sift_cuda_chain *chain);
/* "device: top-k -> temp | cpu: mirostat-v2" into buf; snprintf-like. */
SIFT_API int sift_cuda_chain_describe(const sift_cuda_chain *chain, char *buf, size_t cap);

/* -- per sequence -- */
/* Give row `seq` its own parameters: a spec with the same samplers in the same places as
 * the chain's device prefix (values may differ; a disabled value turns a sampler off for
 * this row) followed by any CPU tail. Resets the row's history and random stream.
 * SIFT_E_PARSE for a bad spec, SIFT_E_INVAL for a different shape (the message names the
 * sampler) or a value the chain's buffers cannot hold (a larger penalty window or top_k
 * than at creation). */
SIFT_API sift_status sift_cuda_chain_set_seq(sift_cuda_chain *chain, int32_t seq, const char *spec,
                                             const sift_chain_env *env, sift_error *err);
/* Reseed row seq's device dist (SIFT_DEFAULT_SEED draws a random seed) and restart its
 * stream. The CPU tail's random samplers keep the seeds their spec gave them (use
 * sift_cuda_chain_set_seq to change those). SIFT_E_INVAL if seq is out of range. */
SIFT_API sift_status sift_cuda_chain_set_seed(sift_cuda_chain *chain, int32_t seq, uint32_t seed);
/* Forget row seq's history: penalty window, random stream position, CPU tail state. */
SIFT_API sift_status sift_cuda_chain_reset_seq(sift_cuda_chain *chain, int32_t seq);

/* -- running --
 * A step of the batch is: run (device, asynchronous) -> finish (waits for the stream,
 * runs the CPU tails, accepts the tokens everywhere) -> tokens. sift_cuda_chain_sample()
 * does all three. */

/* Enqueue the device prefix on `stream` for rows 0..n_seq-1 of logits (device memory,
 * row r at d_logits + r * ld floats, ld >= n_vocab). Nothing waits for the host, so the
 * call can be captured in a CUDA graph (re-capture after changing per-sequence parameters).
 * d_logits is only read. When the device selects, the tokens are in device memory
 * afterwards (sift_cuda_chain_tokens_device) and the device-side state (penalty windows,
 * random streams) has already accepted them. SIFT_E_INVAL (arguments), SIFT_E_STATE (a
 * CUDA error, named in the message). */
SIFT_API sift_status sift_cuda_chain_run(sift_cuda_chain *chain, const float *d_logits, int64_t ld, int32_t n_seq,
                                         sift_cuda_stream stream, sift_error *err);
/* Enqueue the copy of the run's results (tokens, counts, surviving candidates) into
 * pinned host memory on `stream`; asynchronous, capturable. */
SIFT_API sift_status sift_cuda_chain_fetch(sift_cuda_chain *chain, sift_cuda_stream stream, sift_error *err);
/* Wait for `stream`, then for every row: the CPU tail on the device's candidates (if the
 * chain has one), the token accepted into the tail and (for tokens chosen on the CPU) into
 * the device state. tokens[0..n_seq) receives the tokens (SIFT_TOKEN_NULL when the chain
 * selects none); may be NULL. Calls fetch itself when the run was not fetched. Call it
 * once per run (also after replaying a graph that captured run + fetch): a second call
 * would run the CPU tails again on the same results. */
SIFT_API sift_status sift_cuda_chain_finish(sift_cuda_chain *chain, sift_cuda_stream stream, sift_token *tokens,
                                            sift_error *err);
/* run + fetch + finish. */
SIFT_API sift_status sift_cuda_chain_sample(sift_cuda_chain *chain, const float *d_logits, int64_t ld, int32_t n_seq,
                                            sift_cuda_stream stream, sift_token *tokens, sift_error *err);

/* Device array [n_seq_max] of the tokens the last run selected on the device (-1 where it
 * selected none); valid until the next run. Feed it to the next forward pass without a
 * host round trip. */
SIFT_API const int32_t *sift_cuda_chain_tokens_device(const sift_cuda_chain *chain);
/* After finish (or after fetch and a stream sync): the candidates the device handed to row
 * seq's CPU tail, as the tail received them (before it ran: ids, logits, size, sorted,
 * and p when flags say so). Borrowed: valid until the next fetch. SIFT_E_INVAL for a bad
 * seq, SIFT_E_STATE when nothing was fetched or the device selected the token itself.
 * The view uses memory the chain owns: valid until the next call, fetch or free. */
SIFT_API sift_status sift_cuda_chain_candidates(sift_cuda_chain *chain, int32_t seq, sift_candidates *view);
/* Accept externally chosen tokens (host array [n_seq]) into the device state of rows
 * 0..n_seq-1 (penalty windows); enqueued on stream. finish() does this itself for tokens
 * its CPU tails chose; use it when you pick tokens another way. SIFT_TOKEN_NULL entries
 * are skipped. */
SIFT_API sift_status sift_cuda_chain_accept(sift_cuda_chain *chain, const sift_token *tokens, int32_t n_seq,
                                            sift_cuda_stream stream, sift_error *err);

#ifdef __cplusplus
}
#endif

#endif /* SIFT_CUDA_H */
