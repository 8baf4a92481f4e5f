/*
 * quantize.c - sift_model_quantize: a GGUF model's weight matrices converted to another
 * type, the way llama.cpp's llama-quantize does it without an importance matrix.
 *
 * Which tensors: every 2-D tensor named "*.weight" (token embedding, attention and
 * feed-forward matrices, output head); 1-D tensors (norms, biases, RoPE factors) are copied
 * unchanged. Which type each gets, following llama_tensor_get_type:
 *
 *   - the requested type, or for a named mixture (sift_quantize_mix: llama-quantize's
 *     Q4_K_S, Q4_K_M, Q5_K_S, Q5_K_M) the upgrades llama_tensor_get_type gives without an
 *     importance matrix: attn_v and ffn_down of the layers use_more_bits picks to Q6_K (the
 *     _M mixes), the first four attn_v to Q5_K and the first eighth of ffn_down to Q5_K
 *     (Q4_K_S). The layers are counted in file order, as llama.cpp counts them;
 *   - the output head (or the token embedding when the head is tied to it) gets Q6_K when
 *     the requested type has 4 or 5 bits, unless keep_output is set;
 *   - rows that are not a whole number of blocks of that type: K-quants fall back to a
 *     32-value type (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0); when even that does not
 *     fit (stories260K's ffn_down has rows of 172) an F16 tensor stays F16 and any other
 *     becomes F32, where llama.cpp would write F16.
 *
 * Each row is dequantized to F32 (a no-op for F32 sources) and quantized with the
 * reference quantizers of ggml_types.c, which are byte-identical to ggml's *_ref functions
 * (no importance matrix), rows split over threads. Metadata is copied pair by pair;
 * general.file_type and general.quantization_version are set as llama-quantize sets them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/status.h"
#include "gguf/ggml_types.h"
#include "gguf/gguf.h"
#include "model/threads.h"

sift_quantize_params sift_quantize_default_params(void)
{
    return (sift_quantize_params){.type = SIFT_TYPE_Q8_0, .keep_output = false, .n_threads = 0, .mix = SIFT_QUANT_MIX_NONE};
}

/* llama.cpp's llama_ftype for a uniform type (the K-quants as their "_S" mixtures, the
 * closest names for "everything in this type"), or for a named mixture. */
static int ftype_of(sift_tensor_type t, sift_quantize_mix mix)
{
    switch (mix) {
    case SIFT_QUANT_MIX_Q4_K_S: return t == SIFT_TYPE_Q4_K ? 14 : -1;
    case SIFT_QUANT_MIX_Q4_K_M: return t == SIFT_TYPE_Q4_K ? 15 : -1;
    case SIFT_QUANT_MIX_Q5_K_S: return t == SIFT_TYPE_Q5_K ? 16 : -1;
    case SIFT_QUANT_MIX_Q5_K_M: return t == SIFT_TYPE_Q5_K ? 17 : -1;
    case SIFT_QUANT_MIX_NONE: break;
    default: return -1;
    }
    switch (t) {
    case SIFT_TYPE_F32: return 0;
    case SIFT_TYPE_F16: return 1;
    case SIFT_TYPE_Q4_0: return 2;
    case SIFT_TYPE_Q4_1: return 3;
    case SIFT_TYPE_Q8_0: return 7;
    case SIFT_TYPE_Q5_0: return 8;
    case SIFT_TYPE_Q5_1: return 9;
    case SIFT_TYPE_Q4_K: return 14;
    case SIFT_TYPE_Q5_K: return 16;
    case SIFT_TYPE_Q6_K: return 18;
    default: return -1;
    }
}

static bool fits(sift_tensor_type t, int64_t ne0)
{
    return ne0 % sift_type_block_size(t) == 0;
}

static sift_tensor_type fallback(sift_tensor_type t)
{
    switch (t) {
    case SIFT_TYPE_Q4_K: return SIFT_TYPE_Q5_0;
    case SIFT_TYPE_Q5_K: return SIFT_TYPE_Q5_1;
    case SIFT_TYPE_Q6_K: return SIFT_TYPE_Q8_0;
    default: return SIFT_TYPE_F32;
    }
}

static bool low_bits(sift_tensor_type t)
{
    return t == SIFT_TYPE_Q4_0 || t == SIFT_TYPE_Q4_1 || t == SIFT_TYPE_Q5_0 || t == SIFT_TYPE_Q5_1 ||
           t == SIFT_TYPE_Q4_K || t == SIFT_TYPE_Q5_K;
}

static bool is_matrix(const sift_gguf_tensor *t)
{
    const size_t len = strlen(t->name);
    return t->n_dims >= 2 && t->ne[1] > 1 && t->ne[2] == 1 && t->ne[3] == 1 && len > 7 &&
           !strcmp(t->name + len - 7, ".weight");
}

/* llama_tensor_get_type's counters: how many attn_v / ffn_down matrices, and how many
 * were seen so far. */
typedef struct mix_state {
    int n_attn_v, i_attn_v, n_ffn_down, i_ffn_down;
} mix_state;

/* llama-quantize's use_more_bits: the first and last eighth of the layers, and every
 * third layer between. */
static bool use_more_bits(int i, int n)
{
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

/* The type of a non-head matrix under a named mixture (llama_tensor_get_type). */
static sift_tensor_type mix_type(const char *name, sift_tensor_type want, sift_quantize_mix mix, mix_state *ms)
{
    const bool m_mix = mix == SIFT_QUANT_MIX_Q4_K_M || mix == SIFT_QUANT_MIX_Q5_K_M;
    if (strstr(name, "attn_v.weight")) {
        if (m_mix && use_more_bits(ms->i_attn_v, ms->n_attn_v)) want = SIFT_TYPE_Q6_K;
        else if (mix == SIFT_QUANT_MIX_Q4_K_S && ms->i_attn_v < 4) want = SIFT_TYPE_Q5_K;
        ms->i_attn_v++;
    } else if (strstr(name, "ffn_down")) {
        const int i = ms->i_ffn_down, n = ms->n_ffn_down;
        if (m_mix && use_more_bits(i, n)) want = SIFT_TYPE_Q6_K;
        else if (mix == SIFT_QUANT_MIX_Q4_K_S && i < n / 8) want = SIFT_TYPE_Q5_K;
        ms->i_ffn_down++;
    }
    return want;
}

/* The type tensor t gets (its own type when it is not a weight matrix). */
static sift_tensor_type choose(const sift_gguf_tensor *t, bool is_head, const sift_quantize_params *p, mix_state *ms)
{
    if (!is_matrix(t)) return t->type;
    sift_tensor_type want = p->type;
    if (is_head && !p->keep_output && low_bits(want)) want = SIFT_TYPE_Q6_K;
    else if (!is_head && p->mix != SIFT_QUANT_MIX_NONE) want = mix_type(t->name, want, p->mix, ms);
    while (!fits(want, t->ne[0]) && want != SIFT_TYPE_F32) want = fallback(want);
    /* no quantized type fits the rows: an F16 matrix stays F16 (as llama-quantize leaves
     * it), rather than doubling to F32 (llama-2-tiny-random's rows of 8: 0.98 -> 1.96 MiB) */
    if (want == SIFT_TYPE_F32 && t->type == SIFT_TYPE_F16) want = SIFT_TYPE_F16;
    return want;
}

typedef struct qjob {
    const sift_gguf_tensor *t;
    sift_tensor_type to;
    uint8_t *out;
    size_t out_row;
    float *scratch; /* [threads][ne0] */
} qjob;

static void quantize_rows(void *arg, int chunk, int n_chunks, int thread)
{
    const qjob *J = arg;
    const sift_gguf_tensor *t = J->t;
    const int64_t rows = t->ne[1], n = t->ne[0];
    float *f = J->scratch + (size_t)thread * n;
    for (int64_t r = rows * chunk / n_chunks; r < rows * (chunk + 1) / n_chunks; r++) {
        sift__dequantize_row(t->type, (const uint8_t *)t->data + r * t->nb[1], f, n);
        sift__quantize_row(J->to, f, J->out + r * J->out_row, n);
    }
}

sift_status sift_model_quantize(const char *in_path, const char *out_path, const sift_quantize_params *params,
                                int64_t *n_converted, sift_error *err)
{
    const sift_quantize_params def = sift_quantize_default_params();
    const sift_quantize_params *p = params ? params : &def;
    if (!in_path || !out_path) return sift__error_set(err, SIFT_E_INVAL, "quantize: no input or output path");
    if (ftype_of(p->type, p->mix) < 0 || !sift__type_traits_get(p->type) || !sift__type_traits_get(p->type)->quantize)
        return sift__error_set(err, SIFT_E_INVAL, "quantize: cannot write type %s%s",
                              sift_type_name(p->type) ? sift_type_name(p->type) : "?",
                              p->mix != SIFT_QUANT_MIX_NONE ? " with that mixture (Q4_K_* need q4_k, Q5_K_* q5_k)" : "");
    int n_threads = p->n_threads > 0 ? p->n_threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (n_threads < 1) n_threads = 1;
    if (n_threads > SIFT_POOL_MAX_THREADS) n_threads = SIFT_POOL_MAX_THREADS;

    sift_gguf *g = sift_gguf_open(in_path, err);
    if (!g) return err ? err->status : SIFT_E_IO;
    sift__gguf_writer *w = sift__gguf_writer_new();
    const int64_t nt = sift_gguf_n_tensors(g);
    uint8_t **bufs = calloc((size_t)nt + 1, sizeof *bufs);
    sift__pool *pool = sift__pool_new(n_threads);
    int rc = SIFT_OK;
    int64_t converted = 0;
    float *scratch = NULL;
    if (!w || !bufs || !pool) {
        rc = sift__error_set(err, SIFT_E_NOMEM, "quantize: out of memory");
        goto done;
    }
    for (int64_t i = 0; i < sift_gguf_n_kv(g) && rc == SIFT_OK; i++)
        if (sift__gguf_writer_set_value(w, sift_gguf_key(g, i), sift_gguf_kv_value(g, i)) != SIFT_OK)
            rc = sift__error_set(err, SIFT_E_NOMEM, "quantize: cannot copy key '%s'", sift_gguf_key(g, i));
    if (rc) goto done;
    sift__gguf_writer_set_u32(w, "general.file_type", (uint32_t)ftype_of(p->type, p->mix));
    if (sift__type_traits_get(p->type)->is_quantized) sift__gguf_writer_set_u32(w, "general.quantization_version", 2);

    const bool has_output = sift_gguf_find_tensor(g, "output.weight") >= 0;
    mix_state ms = {0};
    for (int64_t i = 0; i < nt; i++) {
        const sift_gguf_tensor *t = sift_gguf_tensor_at(g, i);
        if (!is_matrix(t)) continue;
        ms.n_attn_v += strstr(t->name, "attn_v.weight") != NULL;
        ms.n_ffn_down += strstr(t->name, "ffn_down") != NULL;
    }
    for (int64_t i = 0; i < nt && rc == SIFT_OK; i++) {
        const sift_gguf_tensor *t = sift_gguf_tensor_at(g, i);
        const bool is_head = !strcmp(t->name, "output.weight") || (!has_output && !strcmp(t->name, "token_embd.weight"));
        const sift_tensor_type to = choose(t, is_head, p, &ms);
        const void *data = t->data;
        uint64_t size = t->size;
        if (to != t->type) {
            if (!sift__type_traits_get(t->type) || !sift__type_traits_get(t->type)->dequantize) {
                rc = sift__error_set(err, SIFT_E_UNSUPPORTED, "quantize: tensor '%s': cannot read type %s", t->name,
                                    sift_type_name(t->type));
                break;
            }
            const size_t row = (size_t)sift__type_row_bytes(to, t->ne[0]);
            size = (uint64_t)row * (uint64_t)t->ne[1];
            bufs[i] = malloc(size ? size : 1);
            float *sc = realloc(scratch, (size_t)n_threads * (size_t)t->ne[0] * sizeof(float));
            if (!bufs[i] || !sc) {
                if (sc) scratch = sc;
                rc = sift__error_set(err, SIFT_E_NOMEM, "quantize: out of memory at tensor '%s'", t->name);
                break;
            }
            scratch = sc;
            qjob J = {t, to, bufs[i], row, scratch};
            const int64_t rows = t->ne[1];
            const int n_chunks = (int)(rows < 4 * n_threads ? rows : 4 * n_threads);
            sift__pool_run(pool, n_threads, n_chunks, quantize_rows, &J);
            data = bufs[i];
            converted++;
        }
        rc = sift__gguf_writer_add_tensor(w, t->name, to, t->n_dims ? t->n_dims : 1, t->ne, data, size, err);
    }
    if (rc == SIFT_OK) rc = sift__gguf_writer_write_file(w, out_path, err);
    if (rc == SIFT_OK && n_converted) *n_converted = converted;
done:
    if (bufs)
        for (int64_t i = 0; i < nt; i++) free(bufs[i]);
    free(bufs);
    free(scratch);
    sift__pool_free(pool);
    sift__gguf_writer_free(w);
    sift_gguf_close(g);
    return rc;
}
