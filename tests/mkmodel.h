/*
 * mkmodel.h - small random llama-family models for tests, written with sift's GGUF writer:
 * the architectures and options the shared models do not cover (qwen2's QKV biases and
 * neox RoPE, qwen3's per-head q/k norms and decoupled head size, a tied output head,
 * freq_base, linear RoPE scaling, 256-wide rows for the K-quants). The vocabulary is
 * stories260K's (its tokenizer.* metadata copied), so the models tokenize real text.
 * Weights are uniform random scaled by 1/sqrt(fan-in), deterministic per seed.
 */
#ifndef SIFT_TESTS_MKMODEL_H
#define SIFT_TESTS_MKMODEL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gguf.h"
#include "sift.h"

typedef struct mk_spec {
    const char *arch;        /* "llama", "qwen2", "qwen3" */
    int n_embd, n_ff, n_layer, n_head, n_head_kv;
    int head_dim;            /* 0: n_embd / n_head (no key_length key) */
    float freq_base;         /* 0: key absent (10000) */
    float rope_linear;       /* 0: no scaling key; else rope.scaling.type linear, factor */
    bool bias;               /* attn_q/k/v.bias */
    bool qk_norm;            /* attn_q_norm / attn_k_norm */
    bool tied;               /* no output.weight */
    bool rope_freqs;         /* a rope_freqs.weight tensor (llama 3.1's per-frequency divisors) */
    float out_scale;         /* multiplies the output head's weights (logit spread) */
    uint64_t seed;
} mk_spec;

static inline float mk_rand(uint64_t *s)
{
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return (float)((double)(*s >> 11) * 0x1p-53 * 2 - 1);
}

/* Write the model to path; vocab_src is a GGUF whose tokenizer.* keys are copied. 0 on success. */
static inline int mk_write_model(const char *path, const char *vocab_src, const mk_spec *sp)
{
    sift_gguf *g = sift_gguf_open(vocab_src, NULL);
    if (!g) return -1;
    const int64_t n_vocab = sift_gguf_array_n(sift_gguf_get(g, "tokenizer.ggml.tokens"));
    sift_gguf_writer *w = sift_gguf_writer_new();
    char key[128];
    sift_gguf_writer_set_str(w, "general.architecture", sp->arch);
    sift_gguf_writer_set_str(w, "general.name", "sift test model");
#define KEY(s) (snprintf(key, sizeof key, "%s." s, sp->arch), key)
    sift_gguf_writer_set_u32(w, KEY("context_length"), 1024);
    sift_gguf_writer_set_u32(w, KEY("embedding_length"), (uint32_t)sp->n_embd);
    sift_gguf_writer_set_u32(w, KEY("block_count"), (uint32_t)sp->n_layer);
    sift_gguf_writer_set_u32(w, KEY("feed_forward_length"), (uint32_t)sp->n_ff);
    sift_gguf_writer_set_u32(w, KEY("attention.head_count"), (uint32_t)sp->n_head);
    sift_gguf_writer_set_u32(w, KEY("attention.head_count_kv"), (uint32_t)sp->n_head_kv);
    sift_gguf_writer_set_f32(w, KEY("attention.layer_norm_rms_epsilon"), 1e-6f);
    if (sp->head_dim) {
        sift_gguf_writer_set_u32(w, KEY("attention.key_length"), (uint32_t)sp->head_dim);
        sift_gguf_writer_set_u32(w, KEY("attention.value_length"), (uint32_t)sp->head_dim);
    }
    if (sp->freq_base > 0) sift_gguf_writer_set_f32(w, KEY("rope.freq_base"), sp->freq_base);
    if (sp->rope_linear > 0) {
        sift_gguf_writer_set_str(w, KEY("rope.scaling.type"), "linear");
        sift_gguf_writer_set_f32(w, KEY("rope.scaling.factor"), sp->rope_linear);
    }
#undef KEY
    for (int64_t i = 0; i < sift_gguf_n_kv(g); i++)
        if (!strncmp(sift_gguf_key(g, i), "tokenizer.", 10)) sift_gguf_writer_set_value(w, sift_gguf_key(g, i), sift_gguf_kv_value(g, i));

    const int E = sp->n_embd, F = sp->n_ff, HD = sp->head_dim ? sp->head_dim : sp->n_embd / sp->n_head;
    const int Q = sp->n_head * HD, KV = sp->n_head_kv * HD;
    uint64_t seed = sp->seed ? sp->seed : 1;
    /* every tensor's data stays alive until the file is written */
    float **bufs = calloc(64 + 16 * (size_t)sp->n_layer, sizeof *bufs);
    int nb = 0, rc = 0;
    char names[64 + 16 * 64][64];
#define TENSOR(NAME, NE0, NE1, KIND)                                                                           \
    do {                                                                                                       \
        const int64_t n0 = (NE0), n1 = (NE1);                                                                  \
        float *d = bufs[nb] = malloc((size_t)(n0 * n1) * sizeof(float));                                       \
        const float sc = 1.7f / sqrtf((float)n0);                                                              \
        for (int64_t i = 0; i < n0 * n1; i++)                                                                  \
            d[i] = (KIND) == 0   ? mk_rand(&seed) * sc                                                       \
                   : (KIND) == 1 ? 1.0f + 0.2f * mk_rand(&seed)                                                \
                   : (KIND) == 2 ? 0.3f * mk_rand(&seed)                                                       \
                   : (KIND) == 4 ? 4.5f + 3.5f * mk_rand(&seed)                                                \
                                 : mk_rand(&seed) * sc * sp->out_scale;                                        \
        snprintf(names[nb], 64, "%s", NAME);                                                                   \
        const int64_t ne[2] = {n0, n1};                                                                        \
        if (sift_gguf_writer_add_tensor(w, names[nb], SIFT_TYPE_F32, n1 == 1 ? 1 : 2, ne, d,                   \
                                        (uint64_t)(n0 * n1) * sizeof(float), NULL) != SIFT_OK)                 \
            rc = -1;                                                                                           \
        nb++;                                                                                                  \
    } while (0)
    /* kind: 0 matrix, 1 norm (around 1), 2 bias, 3 output head, 4 RoPE frequency divisors */
    TENSOR("token_embd.weight", E, n_vocab, 0);
    TENSOR("output_norm.weight", E, 1, 1);
    if (sp->rope_freqs) TENSOR("rope_freqs.weight", HD / 2, 1, 4); /* divisors in [1, 8) */
    if (!sp->tied) TENSOR("output.weight", E, n_vocab, 3);
    for (int l = 0; l < sp->n_layer; l++) {
        char n[64];
#define N(s) (snprintf(n, sizeof n, "blk.%d." s, l), n)
        TENSOR(N("attn_norm.weight"), E, 1, 1);
        TENSOR(N("attn_q.weight"), E, Q, 0);
        TENSOR(N("attn_k.weight"), E, KV, 0);
        TENSOR(N("attn_v.weight"), E, KV, 0);
        if (sp->bias) {
            TENSOR(N("attn_q.bias"), Q, 1, 2);
            TENSOR(N("attn_k.bias"), KV, 1, 2);
            TENSOR(N("attn_v.bias"), KV, 1, 2);
        }
        if (sp->qk_norm) {
            TENSOR(N("attn_q_norm.weight"), HD, 1, 1);
            TENSOR(N("attn_k_norm.weight"), HD, 1, 1);
        }
        TENSOR(N("attn_output.weight"), Q, E, 0);
        TENSOR(N("ffn_norm.weight"), E, 1, 1);
        TENSOR(N("ffn_gate.weight"), E, F, 0);
        TENSOR(N("ffn_up.weight"), E, F, 0);
        TENSOR(N("ffn_down.weight"), F, E, 0);
#undef N
    }
#undef TENSOR
    if (rc == 0) rc = sift_gguf_writer_write_file(w, path, NULL) == SIFT_OK ? 0 : -1;
    for (int i = 0; i < nb; i++) free(bufs[i]);
    free(bufs);
    sift_gguf_writer_free(w);
    sift_gguf_close(g);
    return rc;
}

#endif
