/*
 * model.h - what a loaded model is inside (internal; sift.h has the public side).
 *
 * A sift_model keeps small owned F32 copies of the 1-D tensors (norm weights, biases),
 * which the forward pass reads as plain float arrays whatever type the file stored them
 * in. The weight matrices the forward pass multiplies by are used in place from the file
 * mapping, except those whose chosen kernel reads a repacked layout (Q4_K x8 where the
 * load-time probe finds it faster), which are copied into anonymous memory and repacked
 * (weights.c; SIFT_COPY=1 copies all of them, SIFT_MMAP=1 none). The token embeddings
 * always stay in the file (one row per token). */
#ifndef SIFT_MODEL_MODEL_H
#define SIFT_MODEL_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "model/kernels.h"
#include "sift.h"

#define SIFT_MAX_HEAD_DIM 1024 /* largest head size accepted (real models: 64..256) */

/* A weight matrix: n_out rows of n_in values of `type`, row r at data + r * row_bytes. */
typedef struct sift__weight {
    sift_tensor_type type;
    int64_t n_in;
    int64_t n_out;
    size_t row_bytes;
    const void *data;
    const char *name;
    bool huge_pages; /* data is weights.c's copy (2 MiB pages: at once with SIFT_COPY=1, else in time) */
    bool x8;         /* rows in groups of eight (repack.h): only kernels' gemm_x8 reads it */
    /* the same matrix in the x8 layout, packed after load by weights.c's background thread
     * (data then stays the file's plain rows): NULL until the copy is complete; read with
     * sift__weight_x8 */
    const void *x8_late;
    int64_t n_part;  /* an expert stack: rows per expert (forward.c reads each as a row range; gemma4's merged
                        gate-up: per half of an expert); 0 */
} sift__weight;

/* The matrix in the x8 layout, or NULL where its kernels read the plain rows at data (yet). */
static inline const void *sift__weight_x8(const sift__weight *w)
{
    return w->x8 ? w->data : __atomic_load_n(&w->x8_late, __ATOMIC_ACQUIRE);
}

typedef struct sift__layer {
    const float *attn_norm;          /* [n_embd] */
    sift__weight wq, wk, wv, wo;      /* q: n_embd -> n_head*head_dim, k/v: -> n_head_kv*head_dim */
    const float *bq, *bk, *bv;       /* qwen2 biases, NULL when absent */
    const float *q_norm, *k_norm;    /* qwen3 per-head RMSNorm weights [head_dim], or NULL */
    const float *ffn_norm;           /* [n_embd] */
    sift__weight w_gate, w_up, w_down;
    const float *attn_post_norm;     /* gemma: RMSNorm of the attention output before the residual, or NULL */
    const float *ffn_post_norm;      /* gemma: the same for the feed-forward output, or NULL */
    bool swa;                        /* a sliding-window layer (hp.n_swa cells back; its own RoPE base) */
    bool nope;                       /* no RoPE on this layer (smollm3's every 4th; granite without rope) */
    /* the layer's own shape: the model's everywhere but gemma4, whose sliding and full layers
     * differ in head size, RoPE dimensions, KV heads and FFN width (hp holds the maxima) */
    int32_t head_dim, n_head_kv, n_rot, n_ff;
    int32_t kv_layer;                /* the cache layer its attention reads: its own, or for gemma4's
                                        last shared_kv_layers an earlier layer's (it stores no K/V) */
    bool own_kv;                     /* computes K/V and stores them at cache layer kv_layer == its index */
    bool v_is_k;                     /* gemma4 without attn_v: V is the K projection (before K's norm, RoPE) */
    bool v_norm;                     /* gemma4: V RMS-normalized per head, without a weight */
    float out_scale;                 /* gemma4's layer_output_scale: the hidden state times this after the
                                        layer; 0: none */
    /* gemma4's per-layer embeddings (E2B/E4B; data NULL without): inp_gate [n_embd -> n_pl],
     * proj [n_pl -> n_embd], post_norm [n_embd] */
    sift__weight ple_gate, ple_out;
    const float *ple_post_norm;
    /* mixture of experts (qwen3moe), instead of w_gate/w_up/w_down when w_router.data is set:
     * the router [n_embd -> n_expert], and each expert's matrices as row ranges of one tensor
     * (expert e: rows e*n_ff_exp .. of gate/up, e*n_embd .. of down), read in place */
    sift__weight w_router, w_gate_exps, w_up_exps, w_down_exps;
    /* gpt-oss: the attention output's bias [n_embd], each query head's sink logit [n_head]
     * (a column every softmax row has, with no value), the router's bias [n_expert] and the
     * experts' biases, expert after expert ([n_ff_exp] for gate/up, [n_embd] for down) */
    const float *bo, *sinks;
    const float *b_router, *b_gate_exps, *b_up_exps, *b_down_exps;
    /* gemma4's experts (26B-A4B; router_scale NULL without), beside the layer's dense FFN (the
     * shared expert): the router's input scale [n_embd], the experts' input norm and the dense
     * and expert branches' output norms [n_embd], each expert's output scale [n_expert] (or
     * NULL); gate_up_exps: w_gate_exps is ffn_gate_up_exps, parts of n_ff_exp rows, expert e's
     * gate part 2e and its up part 2e + 1 (w_up_exps unused) */
    const float *router_scale, *ffn_pre_norm_2, *ffn_post_norm_1, *ffn_post_norm_2, *down_exps_scale;
    bool gate_up_exps;
    /* qwen35: a gated full-attention layer has wq of 2 x n_head x head_dim rows, each head's query
     * then its gate (the output times sigmoid(gate) before wo); a recurrent layer (Gated
     * DeltaNet, rs_layer its index in the recurrent state) has no wq/wk/wv/wo but ssm_qkv
     * [n_embd -> 2 key_dim + value_dim], ssm_z [n_embd -> value_dim], ssm_beta and ssm_alpha
     * [n_embd -> v heads], ssm_out [value_dim -> n_embd], the conv kernel [conv_dim][d_conv],
     * dt bias and A (-exp(A_log)) [v heads], the gated norm [head_v] */
    bool attn_gated, recurrent;
    int32_t rs_layer;
    sift__weight ssm_qkv, ssm_z, ssm_beta, ssm_alpha, ssm_out;
    const float *ssm_conv, *ssm_dt_bias, *ssm_a, *ssm_norm;
    /* qwen35moe's shared expert beside the routed ones (data NULL without): its gate [n_embd -> 1]
     * (the expert's output times sigmoid of it) and its SwiGLU FFN of hp.n_ff_shexp */
    sift__weight w_shexp_gate, w_gate_shexp, w_up_shexp, w_down_shexp;
} sift__layer;

typedef struct sift__hparams {
    char arch[32];
    const char *name;
    int32_t n_vocab, n_ctx_train, n_embd, n_layer, n_head, n_head_kv, n_ff, head_dim, n_rot;
    float rms_eps;
    float rope_freq_base;
    float rope_freq_scale;
    bool rope_neox;
    /* gemma2 / gemma3 (0 or false elsewhere) */
    int32_t n_swa;               /* sliding window: a query sees the n_swa positions up to its own */
    float rope_freq_base_swa;    /* the sliding-window layers' RoPE (gemma3: 10000, unscaled) */
    float rope_freq_scale_swa;
    float attn_softcap;          /* scores become cap * tanh(score / cap) before the softmax */
    float final_softcap;         /* the same for the logits */
    float q_scale;               /* queries are multiplied by this after RoPE, and the scores are not
                                    scaled again; 0: the usual 1/sqrt(head_dim) on the scores */
    float embd_mult;             /* token embeddings times this (gemma: sqrt(n_embd); granite:
                                    embedding_scale); 0: not scaled */
    float kq_scale;              /* the scores' scale (granite's attention.scale); 0: 1/sqrt(head_dim) */
    float residual_scale;        /* granite: each block's output times this before the residual add */
    float logit_scale;           /* granite: the logits divided by this; 0: not */
    int32_t n_ctx_orig;          /* rope.scaling.original_context_length (LongRoPE's switch) */
    int32_t n_expert, n_expert_used, n_ff_exp; /* MoE: experts, used per token, their FFN width */
    bool moe_norm_w;             /* the used experts' router probabilities renormalized to sum 1 */
    bool moe_oai;                /* gpt-oss: the top-k taken on the router logits, their softmax the
                                    weights; experts gated by the clamped SwiGLU (swiglu_oai) */
    float rope_attn_factor;      /* rope.scaling.attn_factor: cos and sin times this (LongRoPE); 1 */
    bool rope_yarn;              /* YaRN: frequencies between interpolation and extrapolation by
                                    a ramp over the correction dimensions, magnitude scaled */
    float yarn_ext_factor, yarn_beta_fast, yarn_beta_slow, yarn_log_mul;
    bool gelu;                   /* GELU (tanh form, as ggml's fp16 table) gates the FFN instead of SiLU */
    int32_t n_rot_swa;           /* RoPE dimensions of the sliding-window layers (gemma4's own; n_rot elsewhere) */
    bool rope_freqs_full_only;   /* gemma4: rope_freqs divides the full layers' frequencies only */
    int32_t n_embd_per_layer;    /* gemma4's per-layer embedding width (E2B/E4B); 0: none */
    int32_t n_layer_kv;          /* layers with K/V of their own, the first ones (the cache's layer count):
                                    n_layer but for gemma4's shared_kv_layers; qwen35: its attention layers */
    /* qwen35's Gated DeltaNet layers (n_layer_rs > 0: a hybrid model, whose sequences carry a
     * recurrent state beside the KV cache): conv width, q/k heads (groups) and v heads, the
     * head size of both (d_state), conv channels 2 x groups x d_state + v heads x d_state */
    int32_t n_layer_rs, ssm_d_conv, ssm_d_state, ssm_n_group, ssm_n_v_heads, ssm_conv_dim;
    int32_t n_layer_nextn;       /* qwen35's MTP layers after the main stack (loaded by llama.cpp, never run) */
    int32_t n_ff_shexp;          /* qwen35moe's shared expert's FFN width */
} sift__hparams;

struct sift_model {
    sift_gguf *gguf;      /* owns the mapping the weights point into */
    sift_vocab *vocab;
    sift__hparams hp;
    sift__weight tok_embd; /* n_vocab rows of n_embd */
    const float *output_norm;
    const float *rope_freqs; /* [n_rot/2] frequency divisors (llama 3.1), or NULL */
    const float *rope_long, *rope_short; /* LongRoPE's divisors (phi3): long when a context holds more
                                            than hp.n_ctx_orig positions per sequence, else short */
    sift__weight output;   /* == tok_embd when tied */
    /* gemma4's per-layer embeddings (hp.n_embd_per_layer > 0): per_layer_token_embd (n_vocab rows
     * of n_layer x n_pl, read per token in place like tok_embd), per_layer_model_proj [n_embd ->
     * n_layer x n_pl] and per_layer_proj_norm [n_pl] */
    sift__weight ple_embd, ple_proj;
    const float *ple_proj_norm;
    bool tied_output;
    sift__layer *layers;   /* [n_layer] */
    float *f32_arena;     /* the owned 1-D tensors */
    void *wmem;          /* the anonymous copy of the matrices (weights.c), or NULL */
    void *packer;        /* weights.c's background packing (joined at free), or NULL */
    size_t wmem_size;
    int64_t n_params;
    uint64_t n_bytes;
    sift_tensor_type main_type;
    /* the kernels of contexts with --isa auto: for each weight type, the tables measured
     * fastest on this CPU (choose.c), chosen at load */
    sift__kernels k_auto;
    /* ggml's GELU table for the gelu FFN: for every fp16 input, the fp16 of gelu(x) */
    uint16_t *gelu_f16;
};

/* Choose the kernels (m->k_auto) for the weight types the model uses, then place the
 * matrices: those k_auto wants in the x8 layout are copied into anonymous memory
 * and repacked, the rest are used in place from the file mapping (weights.c). SIFT_MMAP=1
 * maps everything (no repack), SIFT_COPY=1 copies everything (the layout of old). A
 * refused allocation leaves the mapping serving. Frees nothing on failure. */
void sift__weights_place(sift_model *m);
/* n bytes of the file at offset off into dst: pread from fd while it reads (fd < 0: not at
 * all), then from src, the same bytes in the file mapping, for the rest (a short read). */
void sift__weights_read(char *dst, int fd, uint64_t off, const char *src, size_t n);
/* Wait until the packing after load (weights.c) is done: every matrix it packs then has its
 * x8_late (tests; a model needs no wait, its decodes read the plain rows meanwhile). */
void sift__weights_wait(sift_model *m);
/* Release what sift__weights_place took. */
void sift__weights_free(sift_model *m);
/* Ask for transparent huge pages on the 2 MiB pages inside [p, p + n): advice, nothing on a
 * kernel without them. Called once the block is populated, not before (pages.c says why). */
void sift__pages_huge(void *p, size_t n);

#endif
