/*
 * context.h - what a sift_context is inside (internal): the KV cache, the scratch buffers
 * of one decode, the logits, the thread pool. forward.c runs decodes on it, kv.c edits the
 * cache's sequences.
 *
 * KV cache layout. Every sequence s owns n_ctx_seq cells, and cell c of a sequence holds
 * position c. K and V are stored transposed, one row per (layer, sequence, KV head,
 * dimension) holding that dimension over all cells:
 *
 *     k_cache[((l * n_seq + s) * n_head_kv + h) * head_dim + d][c]
 *
 * for the n_layer_kv layers that store K/V (all but gemma4's shared ones, which read an
 * earlier layer's: sift__layer.kv_layer), with the model's largest n_head_kv and head_dim
 * (gemma4's sliding layers use the first heads and dimensions of their rows).
 *
 * so the attention of a token at position p reads, per head dimension, the contiguous run
 * of cells 0..p: the scores q.K and the weighted sum of V are long unit-stride loops the
 * SIMD kernels like, for any head size (stories260K's heads have 8 dimensions). This is the
 * transposed layout llama.cpp uses for V without flash attention, used for K as well.
 *
 * A sequence's state is `n` (one past its last position, 0 when empty) and `valid[c]`:
 * removed or skipped positions below n are holes (valid 0), masked out of attention;
 * n_holes counts them so that the common case (none) skips the mask. Invariant: valid[c]
 * is 0 for every c >= n.
 */
#ifndef SIFT_MODEL_CONTEXT_H
#define SIFT_MODEL_CONTEXT_H

#include <stdbool.h>
#include <stdint.h>

#include "model/kernels.h"
#include "model/model.h"
#include "model/threads.h"
#include "sift.h"

typedef struct kv_seq {
    int32_t n;       /* one past the last position in the cache */
    int32_t n_holes; /* positions < n without valid K/V */
    uint8_t *valid;  /* [n_ctx_seq] */
} kv_seq;

struct sift_context {
    const sift_model *model;
    const sift__kernels *k;
    int32_t n_ctx, n_ctx_seq, n_seq, n_batch;
    int32_t n_threads, n_threads_batch;
    sift__pool *pool;

    /* KV cache */
    float *k_cache, *v_cache;
    kv_seq *seqs;

    /* scratch for one decode, [n_batch][...] */
    float *x;          /* residual stream [E] */
    float *xn;         /* normed input of the current block [E] */
    float *q;          /* queries [n_head * head_dim] */
    float *kk, *vv;    /* new keys and values [n_head_kv * head_dim] */
    float *att;        /* attention output [n_head * head_dim] */
    float *ffn_g, *ffn_u; /* [n_ff] */
    /* MoE scratch (NULL for dense models): router probabilities [n_batch][n_expert], each
     * token's chosen experts and weights [n_batch][n_expert_used], an expert's gathered
     * inputs [n_batch][n_embd] and outputs per (token, slot) [n_batch][n_expert_used][n_embd] */
    float *moe_p, *moe_w, *moe_x, *moe_g, *moe_u, *moe_o, *moe_out;
    int32_t *moe_sel, *moe_tok;
    float *rope;       /* cos, sin per rotated pair [n_rot] */
    float *rope_swa;   /* the same with the sliding-window layers' base, scale and n_rot_swa (gemma3, gemma4), or NULL */
    /* gemma4's per-layer embeddings (NULL without): each token's inputs of every layer
     * [n_batch][n_layer * n_pl], one token's embedding row [n_layer * n_pl], the gate [n_batch][n_pl] */
    float *ple, *ple_row, *ple_g;
    /* qwen35 (NULL elsewhere): the gated attention's query-and-gate rows [n_batch][2 n_head
     * head_dim] and gates [n_batch][n_head head_dim]; the DeltaNet layers' projections (qkv
     * [n_batch][conv_dim], z then the gated output [n_batch][value_dim], beta and alpha
     * [n_batch][v heads]), one token's conv output [conv_dim]; and the recurrent state of
     * every sequence (rs_conv: [n_seq][n_layer_rs][d_conv - 1][conv_dim], the last inputs
     * oldest first; rs_ssm: [n_seq][n_layer_rs][v heads][d_state (v)][d_state (k)]), which
     * stands for all of the sequence's tokens (kv.c says what may be done to it) */
    float *qg, *gate;
    float *ssm_qkv, *ssm_z, *ssm_b, *ssm_a, *ssm_row;
    float *rs_conv, *rs_ssm;
    float *shexp_out, *shexp_g; /* qwen35moe's shared expert: its output [n_batch][n_embd], its gate [n_batch] */
    const float *rope_factors; /* the model's RoPE divisors for this context's size (llama 3.1's, or
                                  LongRoPE's long or short set), or NULL */
    const float *rope_factors_swa; /* the sliding layers' (the same, but NULL for gemma4: full layers only) */
    void *act[SIFT_ACT_COUNT];    /* activations converted per sift__act_format (NULL where unused) */
    size_t act_stride[SIFT_ACT_COUNT];
    int32_t n_thread_slots; /* per-thread scratch below exists for this many threads */
    float *scores;     /* [threads][n_gqa * n_ctx_seq] */
    float *deq;        /* [threads][max n_in]: a dequantized weight row (types without a kernel) */
    int64_t deq_stride;

    /* per token of the current decode (after the last layer's compaction, per output) */
    int32_t *tok_seq;  /* the sequence whose history the token attends to (seq_id[0]) */
    int32_t *tok_pos;
    int32_t *out_ids;  /* batch indices of the tokens that want logits, ascending */
    int32_t *seq_next; /* [n_seq] scratch of the batch check */

    /* results of the last decode */
    float *logits;     /* [n_outputs][n_vocab] */
    int32_t logits_rows; /* rows allocated */
    int32_t n_outputs;
    int32_t n_batch_last;  /* n_tokens of the last decode */
    int32_t *out_row;      /* [n_batch]: batch index -> logits row, -1 */

    /* embeddings (sift_set_embeddings): the outputs' hidden states are xn's rows after a
     * decode (xn holds the output-normed rows the head multiplied); pooled ones per sequence */
    bool embeddings;
    int pooling;           /* sift_pooling_type, never UNSPECIFIED */
    bool embd_valid;       /* the last decode ran with embeddings on */
    float *embd_seq;       /* [n_seq][n_embd] */
    uint8_t *embd_seq_ok;  /* [n_seq]: the last batch had tokens of the sequence */

    sift_context_perf perf;

    /* control vector (cvec.c): [n_layer][E], row 0 zero; NULL when none */
    float *cvec;
    int32_t cvec_l0, cvec_l1; /* layers it is added after, inclusive */
};

/* K or V row of (layer, seq, kv head, dim 0): head_dim rows of n_ctx_seq cells follow. */
static inline float *kv_row(const sift_context *ctx, float *cache, int l, int s, int h)
{
    const sift__hparams *hp = &ctx->model->hp;
    return cache + ((((size_t)l * ctx->n_seq + s) * hp->n_head_kv + h) * hp->head_dim) * ctx->n_ctx_seq;
}

/* Floats of one sequence's recurrent state (conv, then ssm) in one recurrent layer. */
static inline size_t rs_conv_n(const sift__hparams *hp)
{
    return (size_t)(hp->ssm_d_conv - 1) * hp->ssm_conv_dim;
}
static inline size_t rs_ssm_n(const sift__hparams *hp)
{
    return (size_t)hp->ssm_n_v_heads * hp->ssm_d_state * hp->ssm_d_state;
}
/* Zero sequence s's recurrent state (an emptied sequence starts from nothing); no-op without one. */
void sift__rs_clear(sift_context *ctx, int s);

/* RoPE of one head vector x[0..head_dim) by the cos/sin pairs cs[0..n_rot) (kv.c uses it
 * to re-rotate shifted keys). */
void sift__rope_apply(float *x, const float *cs, int n_rot, bool neox);
/* The cos/sin pairs of position p, computed as ggml's rope cache does; swa: with the
 * sliding-window layers' base and scale; factors: per-frequency divisors or NULL;
 * magnitude: times the YaRN / LongRoPE attention factor (a rotation of cached keys by a
 * position delta must not scale them again). */
void sift__rope_cache(const sift_model *m, const float *factors, float p, bool swa, bool magnitude, float *cs);
/* The output row of batch token i of the last decode (i < 0: from the end, as llama.cpp's
 * getters), or -1 when it has none; the logits and the embeddings getters share it. */
int32_t sift__output_row(const sift_context *ctx, int32_t i);
/* After the forward pass of a decode with embeddings on (embd.c): pool per sequence. */
void sift__embd_pool(sift_context *ctx);

#endif
