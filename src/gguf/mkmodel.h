/*
 * mkmodel.h - self-made llama-family models with random weights, written with sift's GGUF
 * writer: for tests (the architectures and options the shared models do not cover) and for
 * `sift mkmodel` (models of realistic shape for benchmarks, whose weights do not fit in
 * the CPU caches the way the shared models' do). Internal: not part of sift.h.
 *
 * The vocabulary is copied from another GGUF (every tokenizer.* pair), so the models
 * tokenize and detokenize real text: stories260K's 512 tokens for small test models,
 * llama-2-tiny-random's 32000-token SPM vocabulary for realistic ones.
 *
 * Weights are uniform random in [-1.7/sqrt(fan_in), 1.7/sqrt(fan_in)] (standard deviation
 * about 1/sqrt(fan_in)), so every matrix product keeps its input's scale: activations stay
 * of order 1 through any number of layers (RMSNorm before each block, residual sums that
 * grow like sqrt(layers)), and the logits have a standard deviation of about out_scale, so
 * sampling stays varied (no token takes all the mass) without being uniform. Norm weights
 * are 1 ± 0.2, biases ± 0.3. The values come from a xorshift64 stream seeded by `seed`,
 * tensor by tensor in file order: the same spec gives the same file, byte for byte, and a
 * spec that only changes `type` gives the same weights before quantization.
 *
 * `type` quantizes the 2-D matrices (token embedding, attention, feed-forward, output
 * head) with the reference quantizers (as llama-quantize would without an importance
 * matrix); a matrix whose rows are not whole blocks of that type stays F32. Each tensor is
 * generated in F32 and converted at once, so the peak memory is the output file plus one
 * F32 tensor.
 */
#ifndef SIFT_GGUF_MKMODEL_H
#define SIFT_GGUF_MKMODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "gguf/gguf.h"
#include "sift.h"

typedef struct sift__mkmodel_spec {
    const char *arch;        /* "llama", "qwen2", "qwen3", "gemma2", "gemma3", "granite" (with fixed
                                multipliers), "smollm3", "phi3" (fused attn_qkv and gate-up), "qwen3moe",
                                "gpt-oss" (biases everywhere, attention sinks, a window of n_swa
                                (default 128) on even layers, every layer routed), "gemma4" (see
                                n_kv_shared) (the tensors an
                                architecture requires are written whatever the flags below say:
                                qwen2's biases, qwen3's and gemma3's q/k norms, gemma's post norms) */
    int n_embd, n_ff, n_layer, n_head, n_head_kv;
    int head_dim;            /* 0: n_embd / n_head (no key_length key) */
    int n_ctx_train;         /* <arch>.context_length; 0: 1024 */
    float freq_base;         /* 0: key absent (10000) */
    float rope_linear;       /* 0: no scaling key; else rope.scaling.type linear, factor */
    bool bias;               /* attn_q/k/v.bias */
    bool qk_norm;            /* attn_q_norm / attn_k_norm */
    bool tied;               /* no output.weight */
    bool rope_freqs;         /* a rope_freqs.weight tensor (llama 3.1's per-frequency divisors) */
    float out_scale;         /* multiplies the output head's weights (logit spread) */
    uint64_t seed;           /* 0: 1 */
    sift_tensor_type type;   /* the matrices' type (SIFT_TYPE_F32 = 0 by default) */
    int n_swa;               /* <arch>.attention.sliding_window; 0: key absent */
    float attn_softcap;      /* <arch>.attn_logit_softcapping; 0: key absent */
    float final_softcap;     /* <arch>.final_logit_softcapping; 0: key absent */
    int n_expert, n_expert_used, n_ff_exp; /* qwen3moe: experts (default 8), used per token (2), their
                                FFN width (n_ff); every layer routed. gemma4: experts only when
                                n_expert > 0 (26B-A4B), beside every layer's dense FFN, with
                                ffn_gate_up_exps on even layers, gate and up apart on odd ones */
    float rope_yarn;         /* > 0: rope.scaling.type yarn with this factor, original context
                                n_ctx_train / factor */
    int longrope_orig;       /* > 0: LongRoPE (rope.scaling.type longrope, this original context,
                                attn_factor 1.19, rope_factors_long/short tensors) */
    sift_tensor_type exp_type; /* the expert stacks' type (MoE); SIFT_TYPE_F32 (0): as `type`.
                                gpt-oss's own files have them in MXFP4 */
    int n_kv_shared;         /* gemma4: the last layers that read earlier layers' K/V; 0: from about half the
                                layers on (where layer n_kv - 1 is full and n_kv - 2 slides), < 0: none.
                                gemma4's shape: a window of n_swa (default 128) on every layer but each 6th
                                (2nd below 6 layers) and the last; sliding layers with head size head_dim
                                (or n_embd / n_head) and n_head_kv heads, full ones with twice the head size,
                                half the KV heads (at least 1), no attn_v (V is K) and proportional RoPE
                                (rope_freqs: a quarter of the pairs rotated); the shared layers' FFN twice
                                as wide (E2B's double-wide MLP); a layer_output_scale per layer */
    int n_embd_per_layer;    /* gemma4: per-layer embeddings of this width (E2B/E4B: 256); 0: none (31B) */
    int fim;                 /* sift__mkmodel_fim: fill-in-the-middle tokens after the copied vocabulary
                                (mkmodel_vocab.c); 0: none */
    bool gemma4_vocab;       /* the copied SentencePiece vocabulary rewritten as a "gemma4" one
                                (sift__mkmodel_gemma4_vocab) */
    /* qwen35: every attn_interval-th layer (default 4) gated full attention (q/k norms, a quarter of
     * the head rotated, M-RoPE sections over it), the others Gated DeltaNet with ssm_groups q/k heads
     * (default n_head_kv), ssm_v_heads v heads (default n_head) of size ssm_state (default the head
     * size) and a conv of width 4; n_nextn MTP layers appended (llama.cpp loads them, nobody runs them) */
    int attn_interval, ssm_groups, ssm_v_heads, ssm_state, n_nextn;
} sift__mkmodel_spec;

/* Write the model to path; vocab_src is a GGUF whose tokenizer.* pairs are copied.
 * SIFT_E_INVAL for a shape that is not a valid model (named in err), SIFT_E_IO / the
 * reader's codes for the files, SIFT_E_NOMEM. */
sift_status sift__mkmodel_write(const char *path, const char *vocab_src, const sift__mkmodel_spec *spec, sift_error *err);

/* The fill-in-the-middle tokens `fim` appends (mkmodel_vocab.c), control tokens after the
 * vocabulary's last id, each with the metadata key that names it:
 *   SIFT__FIM_QWEN       Qwen2.5-Coder's six: <|fim_prefix|>, <|fim_suffix|>, <|fim_middle|>,
 *                        <|fim_pad|>, <|repo_name|>, <|file_sep|> (tokenizer.ggml.fim_*_token_id)
 *   SIFT__FIM_CODELLAMA  CodeLlama's four: "▁<PRE>", "▁<SUF>", "▁<MID>", "▁<EOT>" with the older
 *                        keys (tokenizer.ggml.prefix/suffix/middle/eot_token_id): no repository tokens */
typedef enum sift__mkmodel_fim { SIFT__FIM_NONE = 0, SIFT__FIM_QWEN = 1, SIFT__FIM_CODELLAMA = 2 } sift__mkmodel_fim;
typedef struct sift__mkmodel_fim_token {
    const char *text, *key;
} sift__mkmodel_fim_token;
/* The tokens of a style and *n their count; NULL (n 0) for SIFT__FIM_NONE or an unknown style. */
const sift__mkmodel_fim_token *sift__mkmodel_fim_tokens(int style, int *n);

/* Copy g's tokenizer.* pairs into w; with a FIM style, its tokens are appended to the tokens,
 * scores and token types, and their keys name them (a vocabulary that has FIM tokens already
 * is refused). *n_vocab: the written vocabulary's size. */
int sift__mkmodel_copy_vocab(sift__gguf_writer *w, const sift_gguf *g, int fim, int64_t *n_vocab, sift_error *err);
/* Over the tokenizer.* pairs w has from g's SentencePiece vocabulary ("llama", with scores and
 * types), write a "gemma4" one: g's tokens plus "\n", "\n\n", "\n\n\n", and merges made from the
 * tokens (mkmodel_vocab.c). *n_vocab: its size. SIFT_E_INVAL for another kind of vocabulary. */
int sift__mkmodel_gemma4_vocab(sift__gguf_writer *w, const sift_gguf *g, int64_t *n_vocab, sift_error *err);

/* Write to path a copy of the model at src, weights and metadata as they are, with the FIM
 * style's tokens added: token_embd.weight and output.weight get a row for each, the mean of
 * their trained rows. */
sift_status sift__mkmodel_add_fim(const char *path, const char *src, int fim, sift_error *err);

/* Bytes the tensors of the model will take (the file is this plus metadata and padding);
 * n_vocab is the vocabulary's size. */
uint64_t sift__mkmodel_tensor_bytes(const sift__mkmodel_spec *spec, int64_t n_vocab);

#endif
