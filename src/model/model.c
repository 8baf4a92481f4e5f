/*
 * model.c - loading a llama-family model from GGUF (sift_model_load and the getters).
 *
 * Loading is validation: every hyperparameter the forward pass uses is read once, with
 * llama.cpp's defaults where a key is optional, and checked for consistency (heads divide,
 * RoPE dimensions fit a head); every tensor the architecture needs must exist with exactly
 * the shape the hyperparameters imply and a type sift can multiply. A model that loads can
 * be run: the forward pass does no checking of its own. Messages name the key or tensor.
 *
 * Weight matrices point into the file mapping (sift_gguf keeps it alive and has already
 * checked that every tensor's bytes lie inside the file) until weights.c copies them into
 * huge pages at the end of the load. 1-D tensors are converted to F32
 * into one owned arena. The vocabulary is built from the same open file.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "gguf/ggml_types.h"
#include "model/kernels.h"
#include "model/model.h"

typedef struct arch_desc {
    const char *name;
    const char *features; /* for `sift info` (sift_arch_features) */
    bool rope_neox;
    bool qkv_bias;   /* biases required (qwen2); optional for the others */
    bool qk_norm;    /* per-head q/k RMSNorm (qwen3, gemma3) */
    bool gemma;      /* embeddings x sqrt(n_embd), GELU FFN, post-attention and post-FFN norms,
                        queries scaled after RoPE (not gemma4) */
    bool gemma4;     /* per-layer geometry (sliding and full layers' own head size, RoPE, KV heads,
                        FFN width), a bool array of sliding layers, KV shared by the last layers,
                        unscaled scores, V normalized, rope_freqs on full layers, layer_output_scale */
    int swa_pattern; /* layer il slides when il % pattern < pattern - 1 (llama.cpp's
                        set_swa_pattern): every other layer for gemma2, 5 of 6 for gemma3 */
    int size_27b;    /* the block count llama.cpp reads as the 27B model (its query scale differs) */
    bool granite;    /* embedding, residual, attention and logit multipliers */
    bool fused;      /* phi3: attn_qkv (Q, K, V rows in one matrix) and ffn_up holding gate then up;
                        queries scaled by 1/sqrt(head_dim) after RoPE */
    int nope_step;   /* layer il has no RoPE when (il + 1) % step == 0 (smollm3: 4); 0: none */
    bool moe;        /* experts (qwen3moe): a layer with ffn_gate_inp routes each token to
                        expert_used_count of expert_count FFNs, softmax-gated, renormalized */
    bool oai;        /* gpt-oss: Q/K/V/output biases, attention sinks, post_attention_norm before
                        the experts, biased router and experts, softmax over the top-k logits,
                        clamped SwiGLU; the window pattern from the file (default 2) */
    bool qwen35;     /* hybrid: Gated DeltaNet layers with a recurrent state, every interval-th layer gated
                        full attention (query and sigmoid gate from attn_q), partial RoPE; MTP layers skipped */
} arch_desc;

/* Designated, so that a new field cannot shift the others. */
static const arch_desc archs[] = {
    {.name = "llama",
     .features = "RMSNorm, SwiGLU, RoPE (normal; linear, yarn, llama 3.1 rope_freqs), GQA, optional Q/K/V biases"},
    {.name = "qwen2", .rope_neox = true, .qkv_bias = true,
     .features = "llama + Q/K/V biases, neox RoPE"},
    {.name = "qwen3", .rope_neox = true, .qk_norm = true,
     .features = "llama + per-head q/k RMSNorm, neox RoPE, head size apart from n_embd/n_head"},
    {.name = "gemma2", .rope_neox = true, .gemma = true, .swa_pattern = 2, .size_27b = 46,
     .features = "embeddings x sqrt(n_embd), GELU (ggml fp16 table), post-attention and post-FFN norms, sliding window on every other layer, score soft-cap, logit soft-cap, queries scaled after RoPE"},
    {.name = "gemma3", .rope_neox = true, .qk_norm = true, .gemma = true, .swa_pattern = 6, .size_27b = 62,
     .features = "gemma2 without soft-caps + q/k RMSNorm, sliding window on 5 of 6 layers with RoPE base 10000"},
    {.name = "gemma4", .rope_neox = true, .qk_norm = true, .gemma = true, .gemma4 = true,
     .features = "gemma3's block with per-layer geometry (sliding and full layers' own head size, RoPE dims and base, KV heads, "
                 "FFN width), sliding layers from a bool array, the last shared_kv_layers reading earlier layers' K/V, V as K "
                 "where attn_v is absent, V RMS-normalized, unscaled scores, proportional RoPE (rope_freqs) on full layers, "
                 "layer_output_scale, per-layer embeddings (E2B/E4B: a second embedding per token and layer, gated into each "
                 "layer's output), experts (26B-A4B: a dense GELU FFN beside softmax-routed top-k GELU experts, the router "
                 "on the unweighted RMS-normed input / sqrt(n_embd) x ffn_gate_inp.scale, merged or separate gate-up, a scale "
                 "per expert, each branch normed, their sum post-normed)"},
    {.name = "granite", .granite = true,
     .features = "llama + embedding, residual, attention and logit multipliers"},
    {.name = "smollm3", .nope_step = 4,
     .features = "llama without RoPE on every 4th layer"},
    {.name = "phi3", .rope_neox = true, .fused = true,
     .features = "fused attn_qkv and gate-up tensors, neox RoPE, LongRoPE (long/short factors by context size)"},
    {.name = "qwen3moe", .rope_neox = true, .qk_norm = true, .moe = true,
     .features = "qwen3 attention + mixture of experts (softmax router, top-k, renormalized)"},
    {.name = "gpt-oss", .rope_neox = true, .qkv_bias = true, .moe = true, .oai = true, .swa_pattern = 2,
     .features = "Q/K/V/output biases, attention sinks, sliding window on every other layer, neox RoPE (yarn), mixture of experts "
                 "with biases (top-k router logits, softmax over them, clamped SwiGLU), MXFP4 experts"},
    {.name = "qwen35moe", .rope_neox = true, .qk_norm = true, .qwen35 = true, .moe = true,
     .features = "qwen35's hybrid (Gated DeltaNet with a recurrent state, gated full attention every "
                 "full_attention_interval-th layer) with a mixture of experts in every layer (softmax router, top-k, "
                 "renormalized; gate and up merged or apart) plus a shared SwiGLU expert gated by sigmoid(x ffn_gate_inp_shexp). "
                 "Sequences can be removed or copied whole only: no partial removal, shift, speculative decoding or "
                 "state files"},
    {.name = "qwen35", .rope_neox = true, .qk_norm = true, .qwen35 = true,
     .features = "hybrid: Gated DeltaNet linear-attention layers (causal conv1d with a conv state, L2-normed q/k, the delta "
                 "rule over a per-sequence recurrent state, gated RMSNorm) and, every full_attention_interval-th layer, gated "
                 "full attention (q/k RMSNorm, sigmoid gate, partial neox RoPE = M-RoPE for text); MTP layers skipped. "
                 "Sequences can be removed or copied whole only: no partial removal, shift, speculative decoding or "
                 "state files"},
};

const char *sift_arch_features(const char *arch)
{
    for (size_t i = 0; arch && i < sizeof archs / sizeof *archs; i++)
        if (!strcmp(archs[i].name, arch)) return archs[i].features;
    return NULL;
}

/* ---- metadata -------------------------------------------------------------------------- */

typedef struct loader {
    sift_model *m;
    sift_error *err;
    const char *arch;
    float *arena;      /* next free float of the 1-D arena */
    float *arena_end;
    bool rope;         /* RoPE on (granite can turn it off) */
    int swa_pattern;   /* layer il slides when il % swa_pattern < swa_pattern - 1 (0: none) */
    bool per_layer;    /* per-layer arrays accepted for head_count_kv / feed_forward_length (gemma4) */
    int32_t *kv_heads, *ff, *swa; /* [n_layer]: each layer's KV heads, FFN width, sliding flag (gemma4) */
    int32_t head_dim_full, head_dim_swa; /* gemma4's two head sizes */
} loader;

/* "{arch}.suffix" */
static const char *akey(const loader *ld, const char *suffix, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s.%s", ld->arch, suffix);
    return buf;
}

/* An integer key in [lo, hi]; `def` when absent and optional. */
static int get_int(loader *ld, const char *suffix, bool required, int64_t def, int64_t lo, int64_t hi, int32_t *out)
{
    char key[128];
    akey(ld, suffix, key, sizeof key);
    const sift_gguf_value *v = sift_gguf_get(ld->m->gguf, key);
    int64_t x = def;
    if (!v) {
        if (required) return sift__error_set(ld->err, SIFT_E_FORMAT, "model: missing key '%s'", key);
    } else if (sift_gguf_value_type(v) == SIFT_GGUF_ARRAY) {
        return sift__error_set(ld->err, SIFT_E_UNSUPPORTED, "model: key '%s' is an array (per-layer values are not supported)",
                              key);
    } else if (sift_gguf_value_int(v, &x) != SIFT_OK) {
        return sift__error_set(ld->err, SIFT_E_FORMAT, "model: key '%s' is not an integer", key);
    }
    if (x < lo || x > hi)
        return sift__error_set(ld->err, SIFT_E_FORMAT, "model: key '%s' = %" PRId64 " is out of range [%" PRId64 ", %" PRId64 "]",
                              key, x, lo, hi);
    *out = (int32_t)x;
    return SIFT_OK;
}

static int get_float(loader *ld, const char *suffix, bool required, float def, float *out)
{
    char key[128];
    akey(ld, suffix, key, sizeof key);
    const sift_gguf_value *v = sift_gguf_get(ld->m->gguf, key);
    double x = def;
    if (!v) {
        if (required) return sift__error_set(ld->err, SIFT_E_FORMAT, "model: missing key '%s'", key);
    } else if (sift_gguf_value_float(v, &x) != SIFT_OK) {
        return sift__error_set(ld->err, SIFT_E_FORMAT, "model: key '%s' is not a float", key);
    }
    if (!isfinite(x)) return sift__error_set(ld->err, SIFT_E_FORMAT, "model: key '%s' is not finite", key);
    *out = (float)x;
    return SIFT_OK;
}

/* An integer per layer into out[n_layer]: a scalar key gives every layer its value; an array
 * of n_layer integers (or bools) one each, where the architecture takes arrays (gemma4). */
static int get_int_layers(loader *ld, const char *suffix, bool required, int64_t def, int64_t lo, int64_t hi, int32_t *out)
{
    char key[128];
    akey(ld, suffix, key, sizeof key);
    const sift_gguf_value *v = sift_gguf_get(ld->m->gguf, key);
    const int n = ld->m->hp.n_layer;
    if (!v || !ld->per_layer || sift_gguf_value_type(v) != SIFT_GGUF_ARRAY) {
        int32_t x;
        const int rc = get_int(ld, suffix, required, def, lo, hi, &x);
        for (int l = 0; rc == SIFT_OK && l < n; l++) out[l] = x;
        return rc;
    }
    if (sift_gguf_array_n(v) != (uint64_t)n)
        return sift__error_set(ld->err, SIFT_E_FORMAT, "model: key '%s' has %" PRIu64 " values for %d layers", key,
                               sift_gguf_array_n(v), n);
    const void *d = sift_gguf_array_data(v);
    for (int l = 0; l < n; l++) {
        int64_t x;
        switch (sift_gguf_array_type(v)) {
        case SIFT_GGUF_BOOL:
        case SIFT_GGUF_UINT8: x = ((const uint8_t *)d)[l]; break;
        case SIFT_GGUF_INT8: x = ((const int8_t *)d)[l]; break;
        case SIFT_GGUF_UINT16: x = ((const uint16_t *)d)[l]; break;
        case SIFT_GGUF_INT16: x = ((const int16_t *)d)[l]; break;
        case SIFT_GGUF_UINT32: x = ((const uint32_t *)d)[l]; break;
        case SIFT_GGUF_INT32: x = ((const int32_t *)d)[l]; break;
        case SIFT_GGUF_INT64: x = ((const int64_t *)d)[l]; break;
        case SIFT_GGUF_UINT64: x = ((const uint64_t *)d)[l] > INT64_MAX ? -1 : (int64_t)((const uint64_t *)d)[l]; break;
        default: return sift__error_set(ld->err, SIFT_E_FORMAT, "model: key '%s' is not an array of integers", key);
        }
        if (x < lo || x > hi)
            return sift__error_set(ld->err, SIFT_E_FORMAT, "model: key '%s' = %" PRId64 " at layer %d is out of range [%" PRId64 ", %" PRId64 "]",
                                   key, x, l, lo, hi);
        out[l] = (int32_t)x;
    }
    return SIFT_OK;
}

/* A head size (attention.key_length{sfx}), the value size that must equal it, and the RoPE
 * dimensions (rope.dimension_count{sfx}: even, at most the head size; rot_def < 0: the head
 * size), for all layers (sfx "") or gemma4's sliding ones ("_swa"). */
static int read_head(loader *ld, const char *sfx, bool required, int32_t def, int32_t rot_def, int32_t *hd, int32_t *n_rot)
{
    char k[64], v[64], r[64];
    snprintf(k, sizeof k, "attention.key_length%s", sfx);
    snprintf(v, sizeof v, "attention.value_length%s", sfx);
    snprintf(r, sizeof r, "rope.dimension_count%s", sfx);
    int32_t v_len;
    int rc;
    if ((rc = get_int(ld, k, required, def, 1, SIFT_MAX_HEAD_DIM, hd))) return rc;
    if ((rc = get_int(ld, v, false, *hd, 1, 1 << 16, &v_len))) return rc;
    if (v_len != *hd)
        return sift__error_set(ld->err, SIFT_E_UNSUPPORTED, "model: value_length%s %d differs from key_length%s %d", sfx, v_len,
                               sfx, *hd);
    if ((rc = get_int(ld, r, false, rot_def < 0 ? *hd : rot_def, 0, *hd, n_rot))) return rc;
    if (*n_rot % 2) return sift__error_set(ld->err, SIFT_E_FORMAT, "model: %s %d is odd", r, *n_rot);
    return SIFT_OK;
}

static int read_hparams(loader *ld)
{
    sift__hparams *hp = &ld->m->hp;
    int rc;
    const int32_t BIG = 1 << 24;
    if ((rc = get_int(ld, "context_length", true, 0, 1, INT32_MAX, &hp->n_ctx_train))) return rc;
    if ((rc = get_int(ld, "embedding_length", true, 0, 1, BIG, &hp->n_embd))) return rc;
    if ((rc = get_int(ld, "block_count", true, 0, 1, 4096, &hp->n_layer))) return rc;
    ld->kv_heads = calloc((size_t)hp->n_layer, sizeof *ld->kv_heads);
    ld->ff = calloc((size_t)hp->n_layer, sizeof *ld->ff);
    ld->swa = calloc((size_t)hp->n_layer, sizeof *ld->swa);
    if (!ld->kv_heads || !ld->ff || !ld->swa) return sift__error_set(ld->err, SIFT_E_NOMEM, "model: out of memory");
    if ((rc = get_int_layers(ld, "feed_forward_length", true, 0, 1, BIG, ld->ff))) return rc;
    if ((rc = get_int(ld, "attention.head_count", true, 0, 1, 4096, &hp->n_head))) return rc;
    if ((rc = get_int_layers(ld, "attention.head_count_kv", false, hp->n_head, 1, 4096, ld->kv_heads))) return rc;
    /* the scratch and cache take the largest (gemma4 varies them per layer) */
    for (int l = 0; l < hp->n_layer; l++) {
        if (hp->n_head % ld->kv_heads[l])
            return sift__error_set(ld->err, SIFT_E_FORMAT, "model: %d heads are not a multiple of %d KV heads (layer %d)",
                                   hp->n_head, ld->kv_heads[l], l);
        if (ld->ff[l] > hp->n_ff) hp->n_ff = ld->ff[l];
        if (ld->kv_heads[l] > hp->n_head_kv) hp->n_head_kv = ld->kv_heads[l];
    }
    int32_t head_dim_default = hp->n_embd % hp->n_head ? 0 : hp->n_embd / hp->n_head;
    if ((rc = read_head(ld, "", head_dim_default == 0, head_dim_default, -1, &hp->head_dim, &hp->n_rot))) return rc;
    hp->n_rot_swa = hp->n_rot;
    hp->n_layer_kv = hp->n_layer;
    ld->head_dim_full = ld->head_dim_swa = hp->head_dim;
    if ((rc = get_float(ld, "attention.layer_norm_rms_epsilon", true, 0, &hp->rms_eps))) return rc;
    if ((rc = get_float(ld, "rope.freq_base", false, 10000.0f, &hp->rope_freq_base))) return rc;
    if (!(hp->rope_freq_base > 0))
        return sift__error_set(ld->err, SIFT_E_FORMAT, "model: rope.freq_base %g is not positive", hp->rope_freq_base);

    /* RoPE scaling: none, linear (positions divided by the factor), or longrope (per-frequency
     * divisors, a long and a short set, chosen by context size: load_tensors, forward.c). */
    char key[128];
    const char *type = NULL;
    const sift_gguf_value *tv = sift_gguf_get(ld->m->gguf, akey(ld, "rope.scaling.type", key, sizeof key));
    if (tv && !(type = sift_gguf_value_str(tv, NULL)))
        return sift__error_set(ld->err, SIFT_E_FORMAT, "model: key '%s' is not a string", key);
    float factor = 0;
    if ((rc = get_float(ld, "rope.scaling.factor", false, 0.0f, &factor))) return rc;
    if (factor == 0 && (rc = get_float(ld, "rope.scale_linear", false, 0.0f, &factor))) return rc; /* older files */
    hp->rope_freq_scale = 1.0f;
    if (type && strcmp(type, "none") != 0 && strcmp(type, "linear") != 0 && strcmp(type, "longrope") != 0 &&
        strcmp(type, "yarn") != 0)
        return sift__error_set(ld->err, SIFT_E_UNSUPPORTED,
                               "model: rope scaling '%s' is not supported (none, linear, yarn, longrope)", type);
    if ((!type || !strcmp(type, "linear")) && factor != 0) {
        if (!(factor > 0)) return sift__error_set(ld->err, SIFT_E_FORMAT, "model: rope scaling factor %g", factor);
        hp->rope_freq_scale = 1.0f / factor;
    }
    if (type && (!strcmp(type, "longrope") || !strcmp(type, "yarn")) && factor != 0) {
        if (!(factor > 0)) return sift__error_set(ld->err, SIFT_E_FORMAT, "model: rope scaling factor %g", factor);
        hp->rope_freq_scale = 1.0f / factor;
    }
    if (type && !strcmp(type, "yarn")) { /* llama.cpp's defaults: ext 1, beta 32 / 1, no log multiplier */
        hp->rope_yarn = true;
        if ((rc = get_float(ld, "rope.scaling.yarn_ext_factor", false, 1.0f, &hp->yarn_ext_factor))) return rc;
        if ((rc = get_float(ld, "rope.scaling.yarn_beta_fast", false, 32.0f, &hp->yarn_beta_fast))) return rc;
        if ((rc = get_float(ld, "rope.scaling.yarn_beta_slow", false, 1.0f, &hp->yarn_beta_slow))) return rc;
        if ((rc = get_float(ld, "rope.scaling.yarn_log_multiplier", false, 0.0f, &hp->yarn_log_mul))) return rc;
        if (hp->yarn_ext_factor < 0) hp->yarn_ext_factor = 1.0f;
    }
    if ((rc = get_int(ld, "rope.scaling.original_context_length", false, hp->n_ctx_train, 1, INT32_MAX, &hp->n_ctx_orig))) return rc;
    if ((rc = get_float(ld, "rope.scaling.attn_factor", false, 1.0f, &hp->rope_attn_factor))) return rc;
    hp->rope_freq_base_swa = hp->rope_freq_base;
    hp->rope_freq_scale_swa = hp->rope_freq_scale;
    if ((rc = get_float(ld, "rope.freq_base_swa", false, hp->rope_freq_base, &hp->rope_freq_base_swa))) return rc;
    const sift_gguf_value *nv = sift_gguf_get(ld->m->gguf, "general.name");
    hp->name = nv && sift_gguf_value_str(nv, NULL) ? sift_gguf_value_str(nv, NULL) : "";
    return SIFT_OK;
}

/* gemma2 / gemma3, as llama.cpp reads them (llama-model.cpp): gemma2 always slides (window
 * 4096 unless the file says) and soft-caps scores (50) and logits (30); gemma3 slides when
 * the file has a window, with RoPE base 10000 unscaled on those layers, and caps logits
 * only without one. Queries are scaled by 1/sqrt(head_dim), or 1/sqrt(n_embd/n_head) for
 * the 27B models (told apart by their block count, as llama.cpp does). */
static int read_gemma(loader *ld, const arch_desc *ad)
{
    sift__hparams *hp = &ld->m->hp;
    int rc;
    const bool g2 = !strcmp(ad->name, "gemma2");
    char key[128];
    const bool has_swa = sift_gguf_get(ld->m->gguf, akey(ld, "attention.sliding_window", key, sizeof key)) != NULL;
    if ((rc = get_int(ld, "attention.sliding_window", false, g2 ? 4096 : 0, 0, INT32_MAX, &hp->n_swa))) return rc;
    if (!g2 && !(has_swa && hp->n_swa > 0)) hp->n_swa = 0;
    if (g2 && hp->n_swa < 1)
        return sift__error_set(ld->err, SIFT_E_FORMAT, "model: %s is %d (gemma2 slides on every other layer)", key, hp->n_swa);
    if (g2) {
        if ((rc = get_float(ld, "attn_logit_softcapping", false, 50.0f, &hp->attn_softcap))) return rc;
        if ((rc = get_float(ld, "final_logit_softcapping", false, 30.0f, &hp->final_softcap))) return rc;
    } else {
        float cap = 0;
        if ((rc = get_float(ld, "final_logit_softcapping", false, 0.0f, &cap))) return rc;
        hp->final_softcap = hp->n_swa > 0 ? 0 : cap; /* llama.cpp's sliding-window graph does not cap */
        if (hp->n_swa > 0) hp->rope_freq_base_swa = 10000.0f, hp->rope_freq_scale_swa = 1.0f;
    }
    if (hp->attn_softcap < 0 || hp->final_softcap < 0)
        return sift__error_set(ld->err, SIFT_E_FORMAT, "model: a negative logit soft-cap");
    hp->q_scale = hp->n_layer == ad->size_27b ? 1.0f / sqrtf((float)(hp->n_embd / hp->n_head)) : 1.0f / sqrtf((float)hp->head_dim);
    hp->embd_mult = sqrtf((float)hp->n_embd);
    hp->gelu = true;
    return SIFT_OK;
}

/* gemma4, as llama.cpp reads it (llama_model_gemma4::load_arch_hparams and the generic
 * loader): which layers slide is a bool per layer (required); the sliding layers have their
 * own head size (key_length_swa, required), RoPE dimensions (rope.dimension_count_swa,
 * default the full layers') and base (rope.freq_base_swa); KV heads and FFN width may be
 * arrays (read_hparams); the last shared_kv_layers layers compute no K/V and attend over
 * layer n_kv - 2 (sliding) or n_kv - 1 (full), n_kv = n_layer - shared_kv_layers
 * (llama_model::create_memory's reuse rule). Scores are not scaled (f_attention_scale 1:
 * the q/k norms carry it), queries neither; the logits are soft-capped when the file says.
 * With expert_count (26B-A4B), expert_used_count and expert_feed_forward_length are required
 * (llama.cpp would build zero-sized experts without them). */
static int read_gemma4(loader *ld)
{
    sift__hparams *hp = &ld->m->hp;
    int rc, shared = 0, n_pl = 0, n_exp = 0; /* n_pl: per-layer embedding width (E2B/E4B) */
    if ((rc = get_int(ld, "attention.sliding_window", true, 0, 1, INT32_MAX, &hp->n_swa))) return rc;
    if ((rc = get_int_layers(ld, "attention.sliding_window_pattern", true, 0, 0, INT32_MAX, ld->swa))) return rc;
    /* RoPE dimensions by default the full layers' count, which must then fit the sliding heads */
    if ((rc = read_head(ld, "_swa", true, 0, hp->n_rot, &ld->head_dim_swa, &hp->n_rot_swa))) return rc;
    if ((rc = get_int(ld, "attention.shared_kv_layers", false, 0, 0, hp->n_layer - 1, &shared))) return rc;
    if ((rc = get_int(ld, "embedding_length_per_layer_input", true, 0, 0, 1 << 16, &n_pl))) return rc;
    hp->n_embd_per_layer = n_pl;
    if ((rc = get_int(ld, "expert_count", false, 0, 0, 4096, &n_exp))) return rc;
    if (n_exp > 0) { /* 26B-A4B: experts beside each routed layer's dense FFN, softmax, top-k, renormalized */
        hp->n_expert = n_exp;
        if ((rc = get_int(ld, "expert_used_count", true, 0, 1, n_exp, &hp->n_expert_used))) return rc;
        if ((rc = get_int(ld, "expert_feed_forward_length", true, 0, 1, 1 << 24, &hp->n_ff_exp))) return rc;
        hp->moe_norm_w = true;
    }
    if ((rc = get_float(ld, "final_logit_softcapping", false, 0.0f, &hp->final_softcap))) return rc;
    if (hp->final_softcap < 0) return sift__error_set(ld->err, SIFT_E_FORMAT, "model: a negative logit soft-cap");
    hp->n_layer_kv = hp->n_layer - shared;
    for (int l = 0; l < hp->n_layer; l++) ld->swa[l] = ld->swa[l] != 0;
    for (int l = hp->n_layer_kv; l < hp->n_layer; l++) {
        const int src = hp->n_layer_kv - (ld->swa[l] ? 2 : 1);
        if (src < 0)
            return sift__error_set(ld->err, SIFT_E_FORMAT, "model: %d shared KV layers leave no layer for layer %d to share",
                                   shared, l);
        if (ld->swa[src] != ld->swa[l] || ld->kv_heads[src] != ld->kv_heads[l])
            return sift__error_set(ld->err, SIFT_E_FORMAT, "model: layer %d shares the K/V of layer %d, whose kind or KV heads differ",
                                   l, src);
    }
    ld->head_dim_full = hp->head_dim;
    if (ld->head_dim_swa > hp->head_dim) hp->head_dim = ld->head_dim_swa; /* the largest, for the scratch and cache */
    hp->embd_mult = sqrtf((float)hp->n_embd);
    hp->gelu = true;
    hp->kq_scale = 1.0f;
    hp->rope_freqs_full_only = true;
    return SIFT_OK;
}

/* granite's multipliers (llama.cpp: logit_scale required, the others optional; a model
 * whose rope.scaling.finetuned is false runs without RoPE). */
static int read_granite(loader *ld, bool *rope)
{
    sift__hparams *hp = &ld->m->hp;
    int rc;
    if ((rc = get_float(ld, "logit_scale", true, 0, &hp->logit_scale))) return rc;
    if ((rc = get_float(ld, "residual_scale", false, 0, &hp->residual_scale))) return rc;
    if ((rc = get_float(ld, "embedding_scale", false, 0, &hp->embd_mult))) return rc;
    if ((rc = get_float(ld, "attention.scale", false, 0, &hp->kq_scale))) return rc;
    if (hp->logit_scale == 0) return sift__error_set(ld->err, SIFT_E_FORMAT, "model: %s.logit_scale is 0", ld->arch);
    char key[128];
    const sift_gguf_value *v = sift_gguf_get(ld->m->gguf, akey(ld, "rope.scaling.finetuned", key, sizeof key));
    *rope = true;
    if (v && sift_gguf_value_bool(v, rope) != SIFT_OK)
        return sift__error_set(ld->err, SIFT_E_FORMAT, "model: key '%s' is not a bool", key);
    return SIFT_OK;
}

/* gpt-oss, as llama.cpp reads it: the sliding window is required, its pattern optional (2:
 * even layers slide), the sliding layers keep the file's RoPE (rope.freq_base_swa where
 * given); the head size is the RoPE dimension count. */
static int read_oai(loader *ld)
{
    sift__hparams *hp = &ld->m->hp;
    int rc;
    if ((rc = get_int(ld, "attention.sliding_window", true, 0, 1, INT32_MAX, &hp->n_swa))) return rc;
    if ((rc = get_int(ld, "attention.sliding_window_pattern", false, 2, 1, 4096, &ld->swa_pattern))) return rc;
    if (hp->n_rot != hp->head_dim)
        return sift__error_set(ld->err, SIFT_E_FORMAT, "model: rope.dimension_count %d differs from the head size %d (gpt-oss rotates whole heads)",
                               hp->n_rot, hp->head_dim);
    hp->moe_oai = true;
    return SIFT_OK;
}

/* qwen35, as llama.cpp reads it (llama_model_qwen35::load_arch_hparams): the MTP layers
 * (nextn_predict_layers) follow the main stack in block_count and are never run; the recurrent
 * layers are the bool array attention.recurrent_layers, else every layer but each
 * full_attention_interval-th (default 4); the DeltaNet widths (ssm.*) are required, with the
 * v heads a multiple of the q/k heads and their size d_state (llama.cpp reshapes the state
 * square). The M-RoPE sections are required; with a text position in every component, M-RoPE
 * is neox RoPE over rope.dimension_count as long as each rotated pair falls in one of the
 * first three sections (the fourth takes another component), which is checked. */
static int read_qwen35(loader *ld)
{
    sift__hparams *hp = &ld->m->hp;
    int rc, interval = 4, d_inner = 0;
    if ((rc = get_int(ld, "nextn_predict_layers", false, 0, 0, hp->n_layer - 1, &hp->n_layer_nextn))) return rc;
    char key[128];
    int32_t *rec = calloc((size_t)hp->n_layer, sizeof *rec);
    if (!rec) return sift__error_set(ld->err, SIFT_E_NOMEM, "model: out of memory");
    if (sift_gguf_get(ld->m->gguf, akey(ld, "attention.recurrent_layers", key, sizeof key))) {
        ld->per_layer = true;
        rc = get_int_layers(ld, "attention.recurrent_layers", true, 0, 0, 1, rec);
        ld->per_layer = false;
    } else {
        rc = get_int(ld, "full_attention_interval", false, 4, 1, 4096, &interval);
        for (int l = 0; !rc && l < hp->n_layer; l++) rec[l] = (l + 1) % interval != 0;
    }
    hp->n_layer -= hp->n_layer_nextn;
    for (int l = 0; !rc && l < hp->n_layer; l++) ld->swa[l] = rec[l] != 0; /* ld->swa holds the recurrent flags */
    free(rec);
    if (rc) return rc;
    if ((rc = get_int(ld, "ssm.conv_kernel", true, 0, 1, 64, &hp->ssm_d_conv))) return rc;
    if ((rc = get_int(ld, "ssm.state_size", true, 0, 1, SIFT_MAX_HEAD_DIM, &hp->ssm_d_state))) return rc;
    if ((rc = get_int(ld, "ssm.group_count", true, 0, 1, 4096, &hp->ssm_n_group))) return rc;
    if ((rc = get_int(ld, "ssm.time_step_rank", true, 0, 1, 4096, &hp->ssm_n_v_heads))) return rc;
    if ((rc = get_int(ld, "ssm.inner_size", true, 0, 1, 1 << 24, &d_inner))) return rc;
    if (hp->ssm_n_v_heads % hp->ssm_n_group)
        return sift__error_set(ld->err, SIFT_E_FORMAT, "model: %d DeltaNet v heads are not a multiple of %d q/k heads",
                               hp->ssm_n_v_heads, hp->ssm_n_group);
    if (d_inner != hp->ssm_n_v_heads * hp->ssm_d_state)
        return sift__error_set(ld->err, SIFT_E_UNSUPPORTED, "model: ssm.inner_size %d is not %d v heads x state size %d", d_inner,
                               hp->ssm_n_v_heads, hp->ssm_d_state);
    hp->ssm_conv_dim = 2 * hp->ssm_n_group * hp->ssm_d_state + d_inner;
    /* the sections: a pair i of the n_rot / 2 takes component (i mod sum) % 3 of the first three
     * sections while it lies inside 3 x that section (ggml's interleaved M-RoPE) */
    const sift_gguf_value *sv = sift_gguf_get(ld->m->gguf, akey(ld, "rope.dimension_sections", key, sizeof key));
    if (!sv) return sift__error_set(ld->err, SIFT_E_FORMAT, "model: missing key '%s'", key);
    if (sift_gguf_value_type(sv) != SIFT_GGUF_ARRAY || sift_gguf_array_n(sv) < 3 || sift_gguf_array_n(sv) > 4 ||
        (sift_gguf_array_type(sv) != SIFT_GGUF_INT32 && sift_gguf_array_type(sv) != SIFT_GGUF_UINT32))
        return sift__error_set(ld->err, SIFT_E_FORMAT, "model: key '%s' is not an array of 3 or 4 integers", key);
    const int32_t *sec = sift_gguf_array_data(sv);
    int64_t sum = 0;
    for (uint64_t i = 0; i < sift_gguf_array_n(sv); i++) {
        if (sec[i] < 0 || sec[i] > 4096) return sift__error_set(ld->err, SIFT_E_FORMAT, "model: key '%s' has a section of %d", key, sec[i]);
        sum += sec[i];
    }
    for (int i = 0; sum > 0 && i < hp->n_rot / 2; i++) {
        const int sector = (int)(i % sum);
        if (sector >= 3 * sec[sector % 3])
            return sift__error_set(ld->err, SIFT_E_UNSUPPORTED, "model: M-RoPE sections of '%s' put rotated pair %d in the fourth "
                                   "section, which text positions do not fill (not supported)", key, i);
    }
    hp->n_layer_rs = 0;
    for (int l = 0; l < hp->n_layer; l++) hp->n_layer_rs += ld->swa[l] != 0;
    hp->n_layer_kv = hp->n_layer - hp->n_layer_rs;
    if (hp->n_layer_kv == 0) hp->n_layer_kv = 1; /* (the cache's shape wants one layer; never read) */
    return SIFT_OK;
}

/* ggml's GELU as its CPU backend computes it (GGML_GELU_FP16): the input rounded to fp16,
 * a table of fp16 results of the tanh form, 0 below -10 and x itself above 10. */
static uint16_t *gelu_table(void)
{
    uint16_t *t = malloc(65536 * sizeof *t);
    if (!t) return NULL;
    for (uint32_t i = 0; i < 65536; i++) {
        const float x = sift__fp16_to_fp32((uint16_t)i);
        t[i] = sift__fp32_to_fp16(0.5f * x * (1.0f + tanhf(0.79788456080286535587989211986876f * x * (1.0f + 0.044715f * x * x))));
    }
    return t;
}

/* ---- tensors ------------------------------------------------------------------------------- */

static bool type_runnable(sift_tensor_type t)
{
    if (sift__act_format_of(t) != SIFT_ACT_NONE) return true;
    const sift__type_traits *tr = sift__type_traits_get(t);
    return tr && tr->dequantize;
}

static int get_weight(loader *ld, const char *name, int64_t n_in, int64_t n_out, bool required, sift__weight *w)
{
    const sift_gguf_tensor *t = sift_gguf_tensor_by_name(ld->m->gguf, name);
    memset(w, 0, sizeof *w);
    if (!t) return required ? sift__error_set(ld->err, SIFT_E_FORMAT, "model: missing tensor '%s'", name) : SIFT_OK;
    if (t->ne[0] != n_in || t->ne[1] != n_out || t->ne[2] != 1 || t->ne[3] != 1)
        return sift__error_set(ld->err, SIFT_E_FORMAT,
                              "model: tensor '%s' has shape [%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64
                              "], expected [%" PRId64 ", %" PRId64 "]",
                              name, t->ne[0], t->ne[1], t->ne[2], t->ne[3], n_in, n_out);
    if (!type_runnable(t->type))
        return sift__error_set(ld->err, SIFT_E_UNSUPPORTED, "model: tensor '%s' has type %s, which sift cannot multiply", name,
                              sift_type_name(t->type) ? sift_type_name(t->type) : "?");
    w->type = t->type;
    w->n_in = n_in;
    w->n_out = n_out;
    w->row_bytes = (size_t)t->nb[1];
    w->data = t->data;
    w->name = t->name;
    return SIFT_OK;
}

/* A stack of n_exp matrices [n_in x n_out] (ne = n_in, n_out, n_exp) as one weight of
 * n_out * n_exp rows: expert e is rows e * n_out .. (forward.c, expert_view). */
static int get_experts(loader *ld, const char *name, int64_t n_in, int64_t n_out, int64_t n_exp, sift__weight *w)
{
    const sift_gguf_tensor *t = sift_gguf_tensor_by_name(ld->m->gguf, name);
    memset(w, 0, sizeof *w);
    if (!t) return sift__error_set(ld->err, SIFT_E_FORMAT, "model: missing tensor '%s'", name);
    if (t->ne[0] != n_in || t->ne[1] != n_out || t->ne[2] != n_exp || t->ne[3] != 1)
        return sift__error_set(ld->err, SIFT_E_FORMAT,
                               "model: tensor '%s' has shape [%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64
                               "], expected [%" PRId64 ", %" PRId64 ", %" PRId64 "]",
                               name, t->ne[0], t->ne[1], t->ne[2], t->ne[3], n_in, n_out, n_exp);
    if (!type_runnable(t->type))
        return sift__error_set(ld->err, SIFT_E_UNSUPPORTED, "model: tensor '%s' has type %s, which sift cannot multiply", name,
                               sift_type_name(t->type) ? sift_type_name(t->type) : "?");
    if ((size_t)t->nb[2] != (size_t)t->nb[1] * (size_t)n_out)
        return sift__error_set(ld->err, SIFT_E_FORMAT, "model: tensor '%s' is not stored expert after expert", name);
    w->type = t->type;
    w->n_in = n_in;
    w->n_out = n_out * n_exp;
    w->n_part = n_out;
    w->row_bytes = (size_t)t->nb[1];
    w->data = t->data;
    w->name = t->name;
    return SIFT_OK;
}

/* Consecutive row ranges of one matrix as separate weights (phi3's attn_qkv and ffn_up): the
 * rows of part k follow those of part k - 1, n_out[k] each, read in place. */
static int get_fused(loader *ld, const char *name, int64_t n_in, const int64_t *n_out, int n_parts, sift__weight **out)
{
    int64_t total = 0;
    for (int k = 0; k < n_parts; k++) total += n_out[k];
    sift__weight whole;
    int rc = get_weight(ld, name, n_in, total, true, &whole);
    if (rc) return rc;
    int64_t r0 = 0;
    for (int k = 0; k < n_parts; k++) {
        *out[k] = whole;
        out[k]->n_out = n_out[k];
        out[k]->data = (const char *)whole.data + (size_t)r0 * whole.row_bytes;
        r0 += n_out[k];
    }
    return SIFT_OK;
}

/* A 1-D tensor of n values, or a 2-D one of n x n1 (gpt-oss's expert biases, expert after
 * expert), converted to F32 in the arena (NULL when absent and optional). */
static int get_vec2(loader *ld, const char *name, int64_t n, int64_t n1, bool required, const float **out)
{
    *out = NULL;
    const sift_gguf_tensor *t = sift_gguf_tensor_by_name(ld->m->gguf, name);
    if (!t) return required ? sift__error_set(ld->err, SIFT_E_FORMAT, "model: missing tensor '%s'", name) : SIFT_OK;
    if (t->ne[0] != n || t->ne[1] != n1 || t->ne[2] != 1 || t->ne[3] != 1)
        return sift__error_set(ld->err, SIFT_E_FORMAT, "model: tensor '%s' has shape [%" PRId64 ", %" PRId64 "], expected [%" PRId64 ", %" PRId64 "]",
                              name, t->ne[0], t->ne[1], n, n1);
    const int64_t total = n * n1;
    if (ld->arena_end - ld->arena < total)
        return sift__error_set(ld->err, SIFT_E_FORMAT, "model: too many 1-D tensors at '%s'", name);
    if (sift__dequantize_row(t->type, t->data, ld->arena, total) != SIFT_OK)
        return sift__error_set(ld->err, SIFT_E_UNSUPPORTED, "model: tensor '%s' has type %s, which sift cannot read", name,
                              sift_type_name(t->type) ? sift_type_name(t->type) : "?");
    for (int64_t i = 0; i < total; i++)
        if (!isfinite(ld->arena[i]))
            return sift__error_set(ld->err, SIFT_E_FORMAT, "model: tensor '%s' holds a non-finite value at %" PRId64, name, i);
    *out = ld->arena;
    ld->arena += total;
    return SIFT_OK;
}

static int get_vec(loader *ld, const char *name, int64_t n, bool required, const float **out)
{
    return get_vec2(ld, name, n, 1, required, out);
}

/* Layer l's experts' gate and up projections: merged in ffn_gate_up_exps (each expert's gate
 * rows, then its up rows: parts 2e and 2e + 1, which llama-graph's build_moe_ffn splits) or
 * apart in ffn_gate_exps and ffn_up_exps. gemma4's and qwen35moe's files come both ways. */
static int get_gate_up_experts(loader *ld, int l, int64_t E, int64_t FE, int64_t NE, sift__layer *L)
{
    char n[96];
    int rc;
#define NAME(s) (snprintf(n, sizeof n, "blk.%d." s, l), n)
    if (sift_gguf_tensor_by_name(ld->m->gguf, NAME("ffn_gate_up_exps.weight"))) {
        if ((rc = get_experts(ld, n, E, 2 * FE, NE, &L->w_gate_exps))) return rc;
        L->w_gate_exps.n_part = FE;
        L->gate_up_exps = true;
        return SIFT_OK;
    }
    if ((rc = get_experts(ld, NAME("ffn_gate_exps.weight"), E, FE, NE, &L->w_gate_exps))) return rc;
    return get_experts(ld, NAME("ffn_up_exps.weight"), E, FE, NE, &L->w_up_exps);
#undef NAME
}

/* gemma4's experts of layer l (llama_model_gemma4::load_arch_tensors), where the layer has a
 * router (ffn_gate_inp; the layer's dense FFN stays, as the shared expert): the router's input
 * scale, the experts' input norm and the two branches' output norms, the experts' gate and up
 * projections merged (ffn_gate_up_exps: each expert's gate rows, then its up rows; llama-graph's
 * build_moe_ffn splits it there) or apart, their down projections and, optional, a scale per
 * expert on its output. */
static int get_gemma4_experts(loader *ld, int l, sift__layer *L)
{
    const sift_model *m = ld->m;
    const sift__hparams *hp = &m->hp;
    const int64_t E = hp->n_embd, NE = hp->n_expert, FE = hp->n_ff_exp;
    char n[96];
    int rc;
#define NAME(s) (snprintf(n, sizeof n, "blk.%d." s, l), n)
    if (!sift_gguf_tensor_by_name(m->gguf, NAME("ffn_gate_inp.weight"))) return SIFT_OK; /* a dense layer */
    if (NE == 0) return sift__error_set(ld->err, SIFT_E_FORMAT, "model: tensor '%s' without %s.expert_count", n, ld->arch);
    if ((rc = get_weight(ld, n, E, NE, true, &L->w_router))) return rc;
    if ((rc = get_vec(ld, NAME("ffn_gate_inp.scale"), E, true, &L->router_scale))) return rc;
    if ((rc = get_vec(ld, NAME("pre_ffw_norm_2.weight"), E, true, &L->ffn_pre_norm_2))) return rc;
    if ((rc = get_vec(ld, NAME("post_ffw_norm_1.weight"), E, true, &L->ffn_post_norm_1))) return rc;
    if ((rc = get_vec(ld, NAME("post_ffw_norm_2.weight"), E, true, &L->ffn_post_norm_2))) return rc;
    if ((rc = get_gate_up_experts(ld, l, E, FE, NE, L))) return rc;
    if ((rc = get_experts(ld, NAME("ffn_down_exps.weight"), FE, E, NE, &L->w_down_exps))) return rc;
    return get_vec(ld, NAME("ffn_down_exps.scale"), NE, false, &L->down_exps_scale);
#undef NAME
}

/* A qwen35 Gated DeltaNet layer's tensors (llama_model_qwen35::load_arch_tensors): attn_qkv and
 * attn_gate (z) are the separate projections (llama.cpp's fused variant without them is not
 * read), the conv kernel [d_conv, conv_dim] F32 in the arena with dt bias, A and the norm. */
static int get_deltanet(loader *ld, int l, sift__layer *L)
{
    const sift__hparams *hp = &ld->m->hp;
    const int64_t E = hp->n_embd, HV = hp->ssm_n_v_heads, VD = HV * hp->ssm_d_state;
    char n[96];
    int rc;
#define NAME(s) (snprintf(n, sizeof n, "blk.%d." s, l), n)
    if ((rc = get_weight(ld, NAME("attn_qkv.weight"), E, hp->ssm_conv_dim, true, &L->ssm_qkv))) return rc;
    if ((rc = get_weight(ld, NAME("attn_gate.weight"), E, VD, true, &L->ssm_z))) return rc;
    if ((rc = get_weight(ld, NAME("ssm_beta.weight"), E, HV, true, &L->ssm_beta))) return rc;
    if ((rc = get_weight(ld, NAME("ssm_alpha.weight"), E, HV, true, &L->ssm_alpha))) return rc;
    if ((rc = get_weight(ld, NAME("ssm_out.weight"), VD, E, true, &L->ssm_out))) return rc;
    if ((rc = get_vec2(ld, NAME("ssm_conv1d.weight"), hp->ssm_d_conv, hp->ssm_conv_dim, true, &L->ssm_conv))) return rc;
    if ((rc = get_vec(ld, NAME("ssm_dt.bias"), HV, true, &L->ssm_dt_bias))) return rc;
    if ((rc = get_vec(ld, NAME("ssm_a"), HV, true, &L->ssm_a))) return rc;
    return get_vec(ld, NAME("ssm_norm.weight"), hp->ssm_d_state, true, &L->ssm_norm);
#undef NAME
}

static int load_tensors(loader *ld, const arch_desc *ad)
{
    sift_model *m = ld->m;
    const sift__hparams *hp = &m->hp;
    /* the largest per-layer sizes (the arena); each layer's own below */
    const int64_t E = hp->n_embd, V = hp->n_vocab, HDmax = hp->head_dim;
    const int64_t Qmax = (int64_t)hp->n_head * HDmax, KVmax = (int64_t)hp->n_head_kv * HDmax;
    int rc;

    /* per layer: norms, biases, q/k norms, output scale; gpt-oss adds the output bias, sinks, router and expert biases */
    const int64_t oai_n = ad->oai ? E + hp->n_head + (int64_t)hp->n_expert * (1 + 2 * (int64_t)hp->n_ff_exp + E) : 0;
    const int64_t NPL = hp->n_embd_per_layer, NLPL = NPL * hp->n_layer; /* gemma4's per-layer embeddings */
    /* gemma4's experts: the router's input scale, three norms, the experts' output scales */
    const int64_t g4moe_n = ad->gemma4 ? 4 * E + hp->n_expert : 0;
    /* qwen35's DeltaNet layers: the conv kernel, dt bias, A, the gated norm */
    const int64_t rs_n = ad->qwen35 ? (int64_t)hp->ssm_conv_dim * hp->ssm_d_conv + 2 * hp->ssm_n_v_heads + hp->ssm_d_state : 0;
    const int64_t arena_n = E + 3 * (hp->n_rot / 2) + HDmax + NPL +
                            (int64_t)hp->n_layer * (5 * E + Qmax + 2 * KVmax + 2 * HDmax + 1 + oai_n + g4moe_n + rs_n);
    m->f32_arena = malloc((size_t)arena_n * sizeof(float));
    if (!m->f32_arena) return sift__error_set(ld->err, SIFT_E_NOMEM, "model: out of memory");
    ld->arena = m->f32_arena;
    ld->arena_end = m->f32_arena + arena_n;

    if ((rc = get_weight(ld, "token_embd.weight", E, V, true, &m->tok_embd))) return rc;
    if (!sift__type_traits_get(m->tok_embd.type)->dequantize)
        return sift__error_set(ld->err, SIFT_E_UNSUPPORTED, "model: token_embd.weight: type %s cannot be read",
                              sift_type_name(m->tok_embd.type));
    if ((rc = get_vec(ld, "output_norm.weight", E, true, &m->output_norm))) return rc;
    if (NPL > 0) {
        if ((rc = get_weight(ld, "per_layer_token_embd.weight", NLPL, V, true, &m->ple_embd))) return rc;
        if (!sift__type_traits_get(m->ple_embd.type)->dequantize)
            return sift__error_set(ld->err, SIFT_E_UNSUPPORTED, "model: per_layer_token_embd.weight: type %s cannot be read",
                                   sift_type_name(m->ple_embd.type));
        if ((rc = get_weight(ld, "per_layer_model_proj.weight", E, NLPL, true, &m->ple_proj))) return rc;
        if ((rc = get_vec(ld, "per_layer_proj_norm.weight", NPL, true, &m->ple_proj_norm))) return rc;
    }
    if ((rc = get_weight(ld, "output.weight", E, V, false, &m->output))) return rc;
    /* llama 3.1's per-frequency RoPE divisors (theta_i / f_i); gemma4's proportional RoPE on its
     * full layers (1 on the rotated share of pairs, 1e30 beyond), required there by llama.cpp */
    bool any_full = false;
    for (int l = 0; l < hp->n_layer; l++) any_full |= !ld->swa[l];
    if (ad->gemma4 && (rc = get_vec(ld, "rope_freqs.weight", ld->head_dim_full / 2, any_full, &m->rope_freqs))) return rc;
    if (!ad->gemma4 && hp->n_rot > 0 && (rc = get_vec(ld, "rope_freqs.weight", hp->n_rot / 2, false, &m->rope_freqs))) return rc;
    if (hp->n_rot > 0 && (rc = get_vec(ld, "rope_factors_long.weight", hp->n_rot / 2, false, &m->rope_long))) return rc;
    if (hp->n_rot > 0 && (rc = get_vec(ld, "rope_factors_short.weight", hp->n_rot / 2, false, &m->rope_short))) return rc;
    if (sift_gguf_tensor_by_name(m->gguf, "output.bias"))
        return sift__error_set(ld->err, SIFT_E_UNSUPPORTED, "model: tensor 'output.bias' is not supported");
    m->tied_output = m->output.data == NULL;
    if (m->tied_output) m->output = m->tok_embd;

    m->layers = calloc((size_t)hp->n_layer, sizeof *m->layers);
    if (!m->layers) return sift__error_set(ld->err, SIFT_E_NOMEM, "model: out of memory");
    int n_attn = 0, n_rs = 0; /* qwen35: attention and recurrent layers so far */
    for (int l = 0; l < hp->n_layer; l++) {
        sift__layer *L = &m->layers[l];
        char n[96];
#define NAME(s) (snprintf(n, sizeof n, "blk.%d." s, l), n)
        L->swa = ad->gemma4 ? ld->swa[l] != 0
                            : hp->n_swa > 0 && ld->swa_pattern > 0 && l % ld->swa_pattern < ld->swa_pattern - 1;
        L->head_dim = L->swa ? ld->head_dim_swa : ld->head_dim_full;
        L->n_rot = L->swa ? hp->n_rot_swa : hp->n_rot;
        L->n_head_kv = ld->kv_heads[l];
        L->n_ff = ld->ff[l];
        L->own_kv = l < hp->n_layer_kv;
        L->kv_layer = L->own_kv ? l : hp->n_layer_kv - (L->swa ? 2 : 1);
        L->v_norm = ad->gemma4;
        if (ad->qwen35) { /* the attention layers' K/V are the cache's layers in order */
            L->recurrent = ld->swa[l] != 0;
            L->attn_gated = !L->recurrent;
            L->own_kv = !L->recurrent;
            L->kv_layer = L->recurrent ? -1 : n_attn++;
            L->rs_layer = L->recurrent ? n_rs++ : -1;
        }
        const int64_t HD = L->head_dim, Q = (int64_t)hp->n_head * HD, KV = (int64_t)L->n_head_kv * HD, F = L->n_ff;
        if ((rc = get_vec(ld, NAME("attn_norm.weight"), E, true, &L->attn_norm))) return rc;
        if (L->recurrent) {
            if ((rc = get_deltanet(ld, l, L))) return rc;
        } else if (ad->fused && sift_gguf_tensor_by_name(m->gguf, NAME("attn_qkv.weight"))) {
            const int64_t rows[3] = {Q, KV, KV};
            sift__weight *parts[3] = {&L->wq, &L->wk, &L->wv};
            if ((rc = get_fused(ld, n, E, rows, 3, parts))) return rc;
        } else {
            if ((rc = get_weight(ld, NAME("attn_q.weight"), E, L->attn_gated ? 2 * Q : Q, true, &L->wq))) return rc;
            /* gemma4: a layer sharing K/V needs neither (llama.cpp loads them unused); V is the K
             * projection where attn_v is absent */
            if ((rc = get_weight(ld, NAME("attn_k.weight"), E, KV, L->own_kv, &L->wk))) return rc;
            if ((rc = get_weight(ld, NAME("attn_v.weight"), E, KV, !ad->gemma4, &L->wv))) return rc;
            L->v_is_k = ad->gemma4 && !L->wv.data;
        }
        if (!L->recurrent && (rc = get_weight(ld, NAME("attn_output.weight"), Q, E, true, &L->wo))) return rc;
        if (!ad->qwen35 && (rc = get_vec(ld, NAME("attn_q.bias"), Q, ad->qkv_bias, &L->bq))) return rc;
        if (!ad->qwen35 && (rc = get_vec(ld, NAME("attn_k.bias"), KV, ad->qkv_bias, &L->bk))) return rc;
        if (!ad->qwen35 && (rc = get_vec(ld, NAME("attn_v.bias"), KV, ad->qkv_bias, &L->bv))) return rc;
        if (ad->qk_norm && !L->recurrent) {
            if ((rc = get_vec(ld, NAME("attn_q_norm.weight"), HD, true, &L->q_norm))) return rc;
            if ((rc = get_vec(ld, NAME("attn_k_norm.weight"), HD, L->own_kv, &L->k_norm))) return rc;
        }
        if (ad->oai) {
            if ((rc = get_vec(ld, NAME("attn_output.bias"), E, true, &L->bo))) return rc;
            if ((rc = get_vec(ld, NAME("attn_sinks.weight"), hp->n_head, true, &L->sinks))) return rc;
            /* the norm before the experts (llama.cpp's attn_post_norm) */
            if ((rc = get_vec(ld, NAME("post_attention_norm.weight"), E, true, &L->ffn_norm))) return rc;
        } else if ((rc = get_vec(ld, ad->qwen35 ? NAME("post_attention_norm.weight") : NAME("ffn_norm.weight"), E, true,
                                 &L->ffn_norm))) { /* qwen35's pre-FFN norm is named post_attention_norm */
            return rc;
        }
        if (ad->moe && sift_gguf_tensor_by_name(m->gguf, NAME("ffn_gate_inp.weight"))) {
            const int64_t NE = hp->n_expert, FE = hp->n_ff_exp;
            if ((rc = get_weight(ld, NAME("ffn_gate_inp.weight"), E, NE, true, &L->w_router))) return rc;
            if (ad->qwen35) { /* merged or apart, as gemma4's */
                if ((rc = get_gate_up_experts(ld, l, E, FE, NE, L))) return rc;
            } else {
                if ((rc = get_experts(ld, NAME("ffn_gate_exps.weight"), E, FE, NE, &L->w_gate_exps))) return rc;
                if ((rc = get_experts(ld, NAME("ffn_up_exps.weight"), E, FE, NE, &L->w_up_exps))) return rc;
            }
            if (ad->qwen35) { /* the shared expert and its gate (one value per token) */
                const int64_t FS = hp->n_ff_shexp;
                if ((rc = get_weight(ld, NAME("ffn_gate_inp_shexp.weight"), E, 1, true, &L->w_shexp_gate))) return rc;
                if ((rc = get_weight(ld, NAME("ffn_gate_shexp.weight"), E, FS, true, &L->w_gate_shexp))) return rc;
                if ((rc = get_weight(ld, NAME("ffn_up_shexp.weight"), E, FS, true, &L->w_up_shexp))) return rc;
                if ((rc = get_weight(ld, NAME("ffn_down_shexp.weight"), FS, E, true, &L->w_down_shexp))) return rc;
            }
            if ((rc = get_experts(ld, NAME("ffn_down_exps.weight"), FE, E, NE, &L->w_down_exps))) return rc;
            if (ad->oai) {
                if ((rc = get_vec(ld, NAME("ffn_gate_inp.bias"), NE, true, &L->b_router))) return rc;
                if ((rc = get_vec2(ld, NAME("ffn_gate_exps.bias"), FE, NE, true, &L->b_gate_exps))) return rc;
                if ((rc = get_vec2(ld, NAME("ffn_up_exps.bias"), FE, NE, true, &L->b_up_exps))) return rc;
                if ((rc = get_vec2(ld, NAME("ffn_down_exps.bias"), E, NE, true, &L->b_down_exps))) return rc;
            }
        } else if (ad->oai || (ad->qwen35 && ad->moe)) {
            return sift__error_set(ld->err, SIFT_E_FORMAT, "model: missing tensor '%s' (%s routes every layer)", n, ld->arch);
        } else if (ad->fused && !sift_gguf_tensor_by_name(m->gguf, NAME("ffn_gate.weight"))) {
            const int64_t rows[2] = {F, F}; /* ggml_swiglu: silu(first half) * second half */
            sift__weight *parts[2] = {&L->w_gate, &L->w_up};
            if ((rc = get_fused(ld, NAME("ffn_up.weight"), E, rows, 2, parts))) return rc;
        } else {
            if ((rc = get_weight(ld, NAME("ffn_gate.weight"), E, F, true, &L->w_gate))) return rc;
            if ((rc = get_weight(ld, NAME("ffn_up.weight"), E, F, true, &L->w_up))) return rc;
        }
        if (!L->w_router.data && (rc = get_weight(ld, NAME("ffn_down.weight"), F, E, true, &L->w_down))) return rc;
        if (ad->gemma) {
            if ((rc = get_vec(ld, NAME("post_attention_norm.weight"), E, true, &L->attn_post_norm))) return rc;
            if ((rc = get_vec(ld, NAME("post_ffw_norm.weight"), E, true, &L->ffn_post_norm))) return rc;
        }
        if (NPL > 0) {
            if ((rc = get_weight(ld, NAME("inp_gate.weight"), E, NPL, true, &L->ple_gate))) return rc;
            if ((rc = get_weight(ld, NAME("proj.weight"), NPL, E, true, &L->ple_out))) return rc;
            if ((rc = get_vec(ld, NAME("post_norm.weight"), E, true, &L->ple_post_norm))) return rc;
        }
        if (ad->gemma4 && (rc = get_gemma4_experts(ld, l, L))) return rc;
        if (ad->gemma4) {
            const float *os = NULL;
            if ((rc = get_vec(ld, NAME("layer_output_scale.weight"), 1, false, &os))) return rc;
            L->out_scale = os ? os[0] : 0.0f;
        }
        L->nope = !ld->rope || (ad->nope_step > 0 && (l + 1) % ad->nope_step == 0);
        /* biases the forward pass has no place for: refused, never ignored */
        static const char *const unused[] = {"attn_output.bias", "ffn_gate.bias", "ffn_up.bias", "ffn_down.bias", "attn_qkv.weight"};
        for (size_t k = ad->oai ? 1 : 0; k < sizeof unused / sizeof *unused - (ad->fused || L->recurrent ? 1 : 0); k++) {
            snprintf(n, sizeof n, "blk.%d.%s", l, unused[k]);
            if (sift_gguf_tensor_by_name(m->gguf, n))
                return sift__error_set(ld->err, SIFT_E_UNSUPPORTED, "model: tensor '%s' is not supported (separate Q/K/V without "
                                       "output or FFN biases)", n);
        }
#undef NAME
    }
    return SIFT_OK;
}

static void loader_free(loader *ld)
{
    free(ld->kv_heads);
    free(ld->ff);
    free(ld->swa);
}

/* Parameter and byte counts, and the type holding most weight bytes. */
static void count_params(sift_model *m)
{
    uint64_t bytes_by_type[SIFT_TYPE_COUNT] = {0};
    for (int64_t i = 0; i < sift_gguf_n_tensors(m->gguf); i++) {
        const sift_gguf_tensor *t = sift_gguf_tensor_at(m->gguf, i);
        m->n_params += t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
        m->n_bytes += t->size;
        if (t->ne[1] > 1 && (int)t->type < SIFT_TYPE_COUNT) bytes_by_type[t->type] += t->size;
    }
    int best = SIFT_TYPE_F32;
    for (int t = 0; t < SIFT_TYPE_COUNT; t++)
        if (bytes_by_type[t] > bytes_by_type[best]) best = t;
    m->main_type = (sift_tensor_type)best;
}

sift_model *sift_model_load(const char *path, sift_error *err)
{
    if (!path) {
        sift__error_set(err, SIFT_E_INVAL, "model: no path");
        return NULL;
    }
    sift_model *m = calloc(1, sizeof *m);
    if (!m) {
        sift__error_set(err, SIFT_E_NOMEM, "model: out of memory");
        return NULL;
    }
    loader ld = {.m = m, .err = err, .rope = true};
    const arch_desc *ad = NULL;
    if (!(m->gguf = sift_gguf_open(path, err))) goto fail;

    const sift_gguf_value *av = sift_gguf_get(m->gguf, "general.architecture");
    ld.arch = av ? sift_gguf_value_str(av, NULL) : NULL;
    if (!ld.arch) {
        sift__error_set(err, SIFT_E_FORMAT, "model: missing string key 'general.architecture'");
        goto fail;
    }
    for (size_t i = 0; i < sizeof archs / sizeof *archs; i++)
        if (!strcmp(archs[i].name, ld.arch)) ad = &archs[i];
    if (!ad) {
        sift__error_set(err, SIFT_E_UNSUPPORTED, "model: architecture '%s' is not supported (llama, qwen2, qwen3, qwen3moe, qwen35, qwen35moe, gemma2, gemma3, gemma4, "
                        "granite, smollm3, phi3, gpt-oss)",
                        ld.arch);
        goto fail;
    }
    snprintf(m->hp.arch, sizeof m->hp.arch, "%s", ad->name);
    ld.swa_pattern = ad->swa_pattern;
    ld.per_layer = ad->gemma4;
    m->hp.rope_neox = ad->rope_neox;
    if (read_hparams(&ld) != SIFT_OK) goto fail;
    if (ad->gemma4 ? read_gemma4(&ld) != SIFT_OK : ad->gemma && read_gemma(&ld, ad) != SIFT_OK) goto fail;
    if (ad->granite && read_granite(&ld, &ld.rope) != SIFT_OK) goto fail;
    if (ad->oai && read_oai(&ld) != SIFT_OK) goto fail;
    if (ad->qwen35 && read_qwen35(&ld) != SIFT_OK) goto fail;
    if (ad->fused) m->hp.q_scale = 1.0f / sqrtf((float)m->hp.head_dim); /* phi3 scales Q after RoPE */
    if (ad->moe) {
        sift__hparams *hp = &m->hp;
        if (get_int(&ld, "expert_count", true, 0, 1, 4096, &hp->n_expert) ||
            get_int(&ld, "expert_used_count", true, 0, 1, 4096, &hp->n_expert_used) ||
            get_int(&ld, "expert_feed_forward_length", !ad->qwen35, hp->n_ff / (hp->n_expert_used ? hp->n_expert_used : 1), 1,
                    1 << 24, &hp->n_ff_exp))
            goto fail;
        /* qwen35moe's shared expert (llama.cpp's default width: the FFN's) */
        if (ad->qwen35 && get_int(&ld, "expert_shared_feed_forward_length", false, hp->n_ff, 1, 1 << 24, &hp->n_ff_shexp)) goto fail;
        if (hp->n_ff_shexp > hp->n_ff) hp->n_ff = hp->n_ff_shexp; /* (the scratch's width) */
        if (hp->n_expert_used > hp->n_expert) {
            sift__error_set(err, SIFT_E_FORMAT, "model: %d experts used of %d", hp->n_expert_used, hp->n_expert);
            goto fail;
        }
        hp->moe_norm_w = !ad->oai; /* qwen3moe: norm_topk_prob, as llama.cpp builds it; gpt-oss: softmax of the top k */
    }
    if (m->hp.gelu && !(m->gelu_f16 = gelu_table())) {
        sift__error_set(err, SIFT_E_NOMEM, "model: out of memory");
        goto fail;
    }

    if (!(m->vocab = sift_vocab_from_gguf(m->gguf, err))) goto fail;
    m->hp.n_vocab = sift_vocab_n_tokens(m->vocab);
    const sift_gguf_tensor *te = sift_gguf_tensor_by_name(m->gguf, "token_embd.weight");
    if (te && te->ne[1] != m->hp.n_vocab) {
        sift__error_set(err, SIFT_E_FORMAT, "model: token_embd.weight has %" PRId64 " rows but the vocabulary %d tokens",
                       te->ne[1], m->hp.n_vocab);
        goto fail;
    }
    if (load_tensors(&ld, ad) != SIFT_OK) goto fail;
    count_params(m);
    sift__weights_place(m);
    loader_free(&ld);
    return m;
fail:
    loader_free(&ld);
    sift_model_free(m);
    return NULL;
}

void sift_model_free(sift_model *m)
{
    if (!m) return;
    sift__weights_free(m);
    free(m->layers);
    free(m->f32_arena);
    free(m->gelu_f16);
    sift_vocab_free(m->vocab);
    sift_gguf_close(m->gguf);
    free(m);
}

void sift_model_get_info(const sift_model *m, sift_model_info *info)
{
    if (!m || !info) return;
    const sift__hparams *hp = &m->hp;
    *info = (sift_model_info){
        .arch = hp->arch,
        .name = hp->name,
        .n_vocab = hp->n_vocab,
        .n_ctx_train = hp->n_ctx_train,
        .n_embd = hp->n_embd,
        .n_layer = hp->n_layer,
        .n_head = hp->n_head,
        .n_head_kv = hp->n_head_kv,
        .n_ff = hp->n_ff,
        .head_dim = hp->head_dim,
        .n_rot = hp->n_rot,
        .rope_neox = hp->rope_neox,
        .rope_freq_base = hp->rope_freq_base,
        .rope_freq_scale = hp->rope_freq_scale,
        .rms_eps = hp->rms_eps,
        .tied_output = m->tied_output,
        .n_params = m->n_params,
        .n_bytes = m->n_bytes,
        .main_type = m->main_type,
    };
}

const char *sift_model_chat_template(const sift_model *m, const char *name)
{
    if (!m || !m->gguf) return NULL;
    char key[192] = "tokenizer.chat_template";
    if (name && *name && snprintf(key, sizeof key, "tokenizer.chat_template.%s", name) >= (int)sizeof key) return NULL;
    const char *t = NULL;
    return sift_gguf_get_str(m->gguf, key, &t, NULL) == SIFT_OK ? t : NULL;
}

bool sift_model_is_recurrent(const sift_model *m)
{
    return m && m->hp.n_layer_rs > 0;
}

const sift_vocab *sift_model_vocab(const sift_model *m)
{
    return m ? m->vocab : NULL;
}

int32_t sift_model_n_vocab(const sift_model *m)
{
    return m ? m->hp.n_vocab : 0;
}

int sift_model_desc(const sift_model *m, char *buf, size_t cap)
{
    if (!m) return snprintf(buf, cap, "(no model)");
    double n = (double)m->n_params;
    const char *unit = "";
    if (n >= 1e9) n /= 1e9, unit = "B";
    else if (n >= 1e6) n /= 1e6, unit = "M";
    else if (n >= 1e3) n /= 1e3, unit = "K";
    const char *tn = sift_type_name(m->main_type);
    char type[16];
    snprintf(type, sizeof type, "%s", tn ? tn : "?");
    for (char *p = type; *p; p++)
        if (*p >= 'a' && *p <= 'z') *p = (char)(*p - 'a' + 'A');
    return snprintf(buf, cap, "%s %.1f%s %s", m->hp.arch, n, unit, type);
}
