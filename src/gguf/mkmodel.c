/*
 * mkmodel.c - sift__mkmodel_write: a random llama-family model as a GGUF file (see
 * mkmodel.h for what the weights look like and why).
 *
 * The tensors are added in llama.cpp's usual order (embedding, output norm, RoPE factors,
 * output head, then each layer's attention and feed-forward tensors), each one generated
 * from the running xorshift64 state, converted to its final type at once, and handed to
 * the GGUF writer, which borrows the bytes until the file is written.
 */
#include "gguf/mkmodel.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "gguf/ggml_types.h"
#include "gguf/gguf.h"

/* xorshift64, uniform in [-1, 1) */
static float mk_rand(uint64_t *s)
{
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return (float)((double)(*s >> 11) * 0x1p-53 * 2 - 1);
}

/* What a tensor holds (its distribution). */
typedef enum { MK_MATRIX, MK_NORM, MK_BIAS, MK_HEAD, MK_ROPE_FREQS, MK_ROPE_PROP, MK_SINK, MK_EXPERTS, MK_CONV, MK_SSM_A } mk_kind;

typedef struct mk_state {
    const sift__mkmodel_spec *sp;
    sift__gguf_writer *w;
    uint64_t seed;
    void **bufs; /* every tensor's bytes, alive until the file is written */
    char (*names)[SIFT_GGUF_MAX_NAME];
    int n, cap;
    sift_error *err;
} mk_state;

/* An n0 x n1 tensor, or a stack of n2 of them (experts: ne = n0, n1, n2). */
static int mk_tensor3(mk_state *S, const char *name, int64_t n0, int64_t n1, int64_t n2, mk_kind kind)
{
    if (S->n == S->cap) return sift__error_set(S->err, SIFT_E_INVAL, "mkmodel: too many tensors");
    const size_t n = (size_t)(n0 * n1 * n2);
    float *d = malloc(n * sizeof(float));
    if (!d) return sift__error_set(S->err, SIFT_E_NOMEM, "mkmodel: out of memory for %s (%zu values)", name, n);
    const float sc = 1.7f / sqrtf((float)n0), out_scale = S->sp->out_scale;
    for (size_t i = 0; i < n; i++) {
        switch (kind) {
        case MK_MATRIX:
        case MK_EXPERTS: d[i] = mk_rand(&S->seed) * sc; break;
        case MK_SINK: d[i] = 1.0f + 2.0f * mk_rand(&S->seed); break; /* sink logits in [-1, 3) */
        case MK_NORM: d[i] = 1.0f + 0.2f * mk_rand(&S->seed); break;
        case MK_BIAS: d[i] = 0.3f * mk_rand(&S->seed); break;
        case MK_ROPE_FREQS: d[i] = 4.5f + 3.5f * mk_rand(&S->seed); break; /* divisors in [1, 8) */
        /* gemma4's proportional RoPE: the first quarter of the pairs rotate, the rest by ~0 */
        case MK_ROPE_PROP: d[i] = i < n / 4 ? 1.0f : 1e30f; break;
        case MK_HEAD: d[i] = mk_rand(&S->seed) * sc * out_scale; break;
        case MK_CONV: d[i] = mk_rand(&S->seed) * sc; break; /* qwen35's conv kernel: F32 whatever the type */
        case MK_SSM_A: d[i] = -(0.55f + 0.45f * mk_rand(&S->seed)); break; /* -exp(A_log) in (-1, -0.1) */
        }
    }
    /* matrices in the requested type when their rows are whole blocks of it */
    sift_tensor_type type = SIFT_TYPE_F32;
    void *data = d;
    uint64_t size = (uint64_t)n * sizeof(float);
    const sift_tensor_type want = kind == MK_EXPERTS && S->sp->exp_type != SIFT_TYPE_F32 ? S->sp->exp_type : S->sp->type;
    const uint64_t row_bytes = sift__type_row_bytes(want, n0);
    const int64_t rows = n1 * n2;
    if ((kind == MK_MATRIX || kind == MK_HEAD || kind == MK_EXPERTS) && n1 > 1 && want != SIFT_TYPE_F32 && row_bytes) {
        char *q = malloc((size_t)(row_bytes * (uint64_t)rows));
        if (!q) {
            free(d);
            return sift__error_set(S->err, SIFT_E_NOMEM, "mkmodel: out of memory for %s", name);
        }
        for (int64_t r = 0; r < rows; r++) {
            const int rc = sift__quantize_row(want, d + r * n0, q + (size_t)(r * (int64_t)row_bytes), n0);
            if (rc != SIFT_OK) {
                free(q);
                free(d);
                return sift__error_set(S->err, rc, "mkmodel: cannot write %s as type %d", name, (int)want);
            }
        }
        free(d);
        data = q, type = want, size = row_bytes * (uint64_t)rows;
    }
    S->bufs[S->n] = data;
    snprintf(S->names[S->n], SIFT_GGUF_MAX_NAME, "%s", name);
    const int64_t ne[3] = {n0, n1, n2};
    S->n++;
    return sift__gguf_writer_add_tensor(S->w, S->names[S->n - 1], type, n2 > 1 ? 3 : n1 == 1 ? 1 : 2, ne, data, size, S->err);
}

static int mk_tensor(mk_state *S, const char *name, int64_t n0, int64_t n1, mk_kind kind)
{
    return mk_tensor3(S, name, n0, n1, 1, kind);
}

/* gemma4's layer shapes (mkmodel.h, n_kv_shared). */
static bool is_g4(const sift__mkmodel_spec *sp) { return !strcmp(sp->arch, "gemma4"); }
static bool g4_swa(const sift__mkmodel_spec *sp, int l)
{
    const int period = sp->n_layer < 6 ? 2 : 6;
    return l != sp->n_layer - 1 && (l + 1) % period != 0;
}
/* The layers with K/V of their own (the first ones); the rest read layer n_kv - 2 (sliding) or
 * n_kv - 1 (full), as llama.cpp's reuse rule has it. */
static int g4_n_kv(const sift__mkmodel_spec *sp)
{
    if (sp->n_kv_shared < 0) return sp->n_layer;
    if (sp->n_kv_shared > 0) return sp->n_layer - sp->n_kv_shared;
    for (int k = (sp->n_layer + 1) / 2; k <= sp->n_layer; k++)
        if (k >= 2 && !g4_swa(sp, k - 1) && g4_swa(sp, k - 2)) return k;
    return sp->n_layer;
}
typedef struct mk_layer {
    int hd, kv_heads, ff;
    bool swa, own_kv;
} mk_layer;
static mk_layer layer_shape(const sift__mkmodel_spec *sp, int l)
{
    const int hd = sp->head_dim ? sp->head_dim : sp->n_embd / sp->n_head;
    if (!is_g4(sp)) return (mk_layer){hd, sp->n_head_kv, sp->n_ff, false, true};
    const bool swa = g4_swa(sp, l), own = l < g4_n_kv(sp);
    return (mk_layer){swa ? hd : 2 * hd, swa || sp->n_head_kv < 2 ? sp->n_head_kv : sp->n_head_kv / 2, own ? sp->n_ff : 2 * sp->n_ff,
                      swa, own};
}

static int check_spec(const sift__mkmodel_spec *sp, sift_error *err)
{
    static const char *const known[] = {"llama", "qwen2", "qwen3", "qwen3moe", "qwen35", "qwen35moe", "gemma2", "gemma3", "gemma4", "granite", "smollm3", "phi3", "gpt-oss"};
    bool ok = false;
    for (size_t i = 0; sp->arch && i < sizeof known / sizeof *known; i++) ok |= !strcmp(sp->arch, known[i]);
    if (!ok)
        return sift__error_set(err, SIFT_E_INVAL, "mkmodel: arch '%s' is not llama, qwen2, qwen3, qwen3moe, qwen35, qwen35moe, gemma2, gemma3, gemma4, granite, smollm3, phi3 or gpt-oss",
                              sp->arch ? sp->arch : "(null)");
#define RANGE(f, lo, hi)                                                                                           \
    if (sp->f < (lo) || sp->f > (hi))                                                                              \
        return sift__error_set(err, SIFT_E_INVAL, "mkmodel: " #f " %d is not in [%d, %d]", sp->f, (int)(lo), (int)(hi));
    RANGE(n_embd, 1, 1 << 16)
    RANGE(n_ff, 1, 1 << 18)
    RANGE(n_layer, 1, 1024)
    RANGE(n_head, 1, 1024)
    RANGE(n_head_kv, 1, 1024)
    RANGE(head_dim, 0, 1 << 12)
    RANGE(n_ctx_train, 0, 1 << 24)
    RANGE(n_embd_per_layer, 0, 1 << 12)
#undef RANGE
    if (sp->n_head % sp->n_head_kv)
        return sift__error_set(err, SIFT_E_INVAL, "mkmodel: n_head %d is not a multiple of n_head_kv %d", sp->n_head,
                              sp->n_head_kv);
    if (!sp->head_dim && sp->n_embd % sp->n_head)
        return sift__error_set(err, SIFT_E_INVAL, "mkmodel: n_embd %d is not a multiple of n_head %d", sp->n_embd, sp->n_head);
    const int hd = sp->head_dim ? sp->head_dim : sp->n_embd / sp->n_head;
    if (hd % 2) return sift__error_set(err, SIFT_E_INVAL, "mkmodel: the head size %d is odd (RoPE rotates pairs)", hd);
    if (!strcmp(sp->arch, "gemma4") && sp->n_kv_shared > 0) {
        const int k = sp->n_layer - sp->n_kv_shared;
        if (k < 2 || g4_swa(sp, k - 1) || !g4_swa(sp, k - 2))
            return sift__error_set(err, SIFT_E_INVAL, "mkmodel: %d shared KV layers leave layers %d (full) and %d (sliding) "
                                   "for them to read, which this layer pattern does not have", sp->n_kv_shared, k - 1, k - 2);
    }
    const sift__type_traits *tr = sift__type_traits_get(sp->type), *te = sift__type_traits_get(sp->exp_type);
    if (!tr || !tr->quantize)
        return sift__error_set(err, SIFT_E_UNSUPPORTED, "mkmodel: type %d cannot be written", (int)sp->type);
    if (!te || !te->quantize)
        return sift__error_set(err, SIFT_E_UNSUPPORTED, "mkmodel: expert type %d cannot be written", (int)sp->exp_type);
    return SIFT_OK;
}

/* The optional tensors an architecture requires (llama.cpp refuses the file without them). */
static bool is_oai(const sift__mkmodel_spec *sp) { return !strcmp(sp->arch, "gpt-oss"); }
static bool wants_bias(const sift__mkmodel_spec *sp) { return sp->bias || !strcmp(sp->arch, "qwen2") || is_oai(sp); }
static bool wants_qk_norm(const sift__mkmodel_spec *sp)
{
    return sp->qk_norm || !strcmp(sp->arch, "qwen3") || !strcmp(sp->arch, "qwen3moe") || !strcmp(sp->arch, "gemma3") || is_g4(sp);
}
static bool is_moe(const sift__mkmodel_spec *sp)
{
    return !strcmp(sp->arch, "qwen3moe") || !strcmp(sp->arch, "qwen35moe") || is_oai(sp);
}
/* gemma4 with experts (26B-A4B's shape) when n_expert is given: beside each layer's dense FFN */
static bool g4_moe(const sift__mkmodel_spec *sp) { return is_g4(sp) && sp->n_expert > 0; }
static bool wants_post_norms(const sift__mkmodel_spec *sp) { return !strncmp(sp->arch, "gemma", 5); }

/* qwen35's shape (mkmodel.h): its widths with their defaults, and which layers recur. */
typedef struct mk_q35 {
    int interval, groups, v_heads, state, d_conv, n_rot, conv_dim;
} mk_q35;
static bool is_q35(const sift__mkmodel_spec *sp) { return !strcmp(sp->arch, "qwen35") || !strcmp(sp->arch, "qwen35moe"); }
static mk_q35 q35_shape(const sift__mkmodel_spec *sp)
{
    const int hd = sp->head_dim ? sp->head_dim : sp->n_embd / sp->n_head;
    mk_q35 q = {sp->attn_interval > 0 ? sp->attn_interval : 4, sp->ssm_groups > 0 ? sp->ssm_groups : sp->n_head_kv,
                sp->ssm_v_heads > 0 ? sp->ssm_v_heads : sp->n_head, sp->ssm_state > 0 ? sp->ssm_state : hd, 4,
                hd / 4 / 2 * 2 > 0 ? hd / 4 / 2 * 2 : 2, 0};
    q.conv_dim = 2 * q.groups * q.state + q.v_heads * q.state;
    return q;
}
static bool q35_recurrent(const sift__mkmodel_spec *sp, int l) { return l < sp->n_layer && (l + 1) % q35_shape(sp).interval != 0; }

/* One qwen35 block l: gated full attention (l >= n_layer: an MTP block, with its nextn tensors)
 * or Gated DeltaNet, then the pre-FFN norm (post_attention_norm) and the SwiGLU FFN. */
static int q35_layer(mk_state *S, int l)
{
    const sift__mkmodel_spec *sp = S->sp;
    const mk_q35 q = q35_shape(sp);
    const int E = sp->n_embd, hd = sp->head_dim ? sp->head_dim : sp->n_embd / sp->n_head;
    const int Q = sp->n_head * hd, KV = sp->n_head_kv * hd, VD = q.v_heads * q.state;
    char n[SIFT_GGUF_MAX_NAME];
    int rc;
#define N(s) (snprintf(n, sizeof n, "blk.%d." s, l), n)
#define T(NAME, NE0, NE1, KIND)                                                                                    \
    if ((rc = mk_tensor(S, NAME, NE0, NE1, KIND)) != SIFT_OK) return rc;
    T(N("attn_norm.weight"), E, 1, MK_NORM)
    if (q35_recurrent(sp, l)) {
        T(N("attn_qkv.weight"), E, q.conv_dim, MK_MATRIX)
        T(N("attn_gate.weight"), E, VD, MK_MATRIX)
        T(N("ssm_conv1d.weight"), q.d_conv, q.conv_dim, MK_CONV)
        T(N("ssm_dt.bias"), q.v_heads, 1, MK_BIAS)
        T(N("ssm_a"), q.v_heads, 1, MK_SSM_A)
        T(N("ssm_beta.weight"), E, q.v_heads, MK_MATRIX)
        T(N("ssm_alpha.weight"), E, q.v_heads, MK_MATRIX)
        T(N("ssm_norm.weight"), q.state, 1, MK_NORM)
        T(N("ssm_out.weight"), VD, E, MK_MATRIX)
    } else {
        T(N("attn_q.weight"), E, 2 * Q, MK_MATRIX) /* each head's query, then its gate */
        T(N("attn_k.weight"), E, KV, MK_MATRIX)
        T(N("attn_v.weight"), E, KV, MK_MATRIX)
        T(N("attn_q_norm.weight"), hd, 1, MK_NORM)
        T(N("attn_k_norm.weight"), hd, 1, MK_NORM)
        T(N("attn_output.weight"), Q, E, MK_MATRIX)
    }
    T(N("post_attention_norm.weight"), E, 1, MK_NORM)
    if (is_moe(sp)) { /* qwen35moe: routed experts (gate and up merged on even layers, apart on odd ones), shared expert */
        const int NE = sp->n_expert > 0 ? sp->n_expert : 8, FE = sp->n_ff_exp > 0 ? sp->n_ff_exp : sp->n_ff;
        T(N("ffn_gate_inp.weight"), E, NE, MK_MATRIX)
        if (l % 2 == 0) {
            if ((rc = mk_tensor3(S, N("ffn_gate_up_exps.weight"), E, 2 * FE, NE, MK_EXPERTS)) != SIFT_OK) return rc;
        } else {
            if ((rc = mk_tensor3(S, N("ffn_gate_exps.weight"), E, FE, NE, MK_EXPERTS)) != SIFT_OK) return rc;
            if ((rc = mk_tensor3(S, N("ffn_up_exps.weight"), E, FE, NE, MK_EXPERTS)) != SIFT_OK) return rc;
        }
        if ((rc = mk_tensor3(S, N("ffn_down_exps.weight"), FE, E, NE, MK_EXPERTS)) != SIFT_OK) return rc;
        T(N("ffn_gate_inp_shexp.weight"), E, 1, MK_MATRIX)
        T(N("ffn_gate_shexp.weight"), E, sp->n_ff, MK_MATRIX)
        T(N("ffn_up_shexp.weight"), E, sp->n_ff, MK_MATRIX)
        T(N("ffn_down_shexp.weight"), sp->n_ff, E, MK_MATRIX)
    } else {
        T(N("ffn_gate.weight"), E, sp->n_ff, MK_MATRIX)
        T(N("ffn_up.weight"), E, sp->n_ff, MK_MATRIX)
        T(N("ffn_down.weight"), sp->n_ff, E, MK_MATRIX)
    }
    if (l >= sp->n_layer) { /* the MTP block's own tensors */
        T(N("nextn.eh_proj.weight"), 2 * E, E, MK_MATRIX)
        T(N("nextn.enorm.weight"), E, 1, MK_NORM)
        T(N("nextn.hnorm.weight"), E, 1, MK_NORM)
    }
#undef T
#undef N
    return SIFT_OK;
}

/* qwen35's keys: the DeltaNet widths, the interval, partial RoPE and its M-RoPE sections (the
 * rotated pairs split into three interleaved sections, as Qwen 3.5's [11, 11, 10, 0]). */
static void q35_keys(sift__gguf_writer *w, const sift__mkmodel_spec *sp)
{
    const mk_q35 q = q35_shape(sp);
    char key[128];
#define KEY(s) (snprintf(key, sizeof key, "%s." s, sp->arch), key)
    sift__gguf_writer_set_u32(w, KEY("ssm.conv_kernel"), (uint32_t)q.d_conv);
    sift__gguf_writer_set_u32(w, KEY("ssm.state_size"), (uint32_t)q.state);
    sift__gguf_writer_set_u32(w, KEY("ssm.group_count"), (uint32_t)q.groups);
    sift__gguf_writer_set_u32(w, KEY("ssm.time_step_rank"), (uint32_t)q.v_heads);
    sift__gguf_writer_set_u32(w, KEY("ssm.inner_size"), (uint32_t)(q.v_heads * q.state));
    sift__gguf_writer_set_u32(w, KEY("full_attention_interval"), (uint32_t)q.interval);
    sift__gguf_writer_set_u32(w, KEY("rope.dimension_count"), (uint32_t)q.n_rot);
    if (sp->n_nextn > 0) sift__gguf_writer_set_u32(w, KEY("nextn_predict_layers"), (uint32_t)sp->n_nextn);
    const int half = q.n_rot / 2;
    const int32_t sec[4] = {(half + 2) / 3, (half + 1) / 3, half / 3, 0};
    sift__gguf_writer_set_arr(w, KEY("rope.dimension_sections"), SIFT_GGUF_INT32, sec, 4);
    if (is_moe(sp)) sift__gguf_writer_set_u32(w, KEY("expert_shared_feed_forward_length"), (uint32_t)sp->n_ff);
#undef KEY
}
static bool always_tied(const sift__mkmodel_spec *sp) { return wants_post_norms(sp) && !is_g4(sp); }

uint64_t sift__mkmodel_tensor_bytes(const sift__mkmodel_spec *sp, int64_t n_vocab)
{
    const int64_t E = sp->n_embd, F = sp->n_ff, HD = sp->head_dim ? sp->head_dim : sp->n_embd / (sp->n_head ? sp->n_head : 1);
    const int64_t Q = sp->n_head * HD, KV = sp->n_head_kv * HD;
    /* bytes of an n0 x n1 matrix in the requested type, or F32 where rows are not whole blocks */
#define MAT_T(t, n0, n1) ((sift__type_row_bytes((t), (n0)) ? sift__type_row_bytes((t), (n0)) : (uint64_t)(n0) * 4) * (uint64_t)(n1))
#define MAT(n0, n1) MAT_T(sp->type, n0, n1)
    const sift_tensor_type et = sp->exp_type != SIFT_TYPE_F32 ? sp->exp_type : sp->type;
    uint64_t b = MAT(E, n_vocab) + (uint64_t)E * 4 + ((sp->tied && !is_oai(sp)) || always_tied(sp) ? 0 : MAT(E, n_vocab));
    if (sp->rope_freqs) b += (uint64_t)HD / 2 * 4;
    if (sp->longrope_orig > 0) b += (uint64_t)HD * 4;
    const int64_t NE = sp->n_expert > 0 ? sp->n_expert : 8, FE = sp->n_ff_exp > 0 ? sp->n_ff_exp : F;
    const uint64_t ffn = is_moe(sp) ? MAT(E, NE) * 1 + (2 * MAT_T(et, E, FE) + MAT_T(et, FE, E)) * (uint64_t)NE : 2 * MAT(E, F) + MAT(F, E);
    /* gpt-oss: output bias, sinks, router and expert biases (F32) */
    const uint64_t oai = is_oai(sp) ? (uint64_t)(E + sp->n_head + NE * (1 + 2 * FE + E)) * 4 : 0;
    const uint64_t per_layer = MAT(E, Q) + 2 * MAT(E, KV) + MAT(Q, E) + ffn + (uint64_t)E * 8 +
                               (wants_bias(sp) ? (uint64_t)(Q + 2 * KV) * 4 : 0) + (wants_qk_norm(sp) ? (uint64_t)HD * 8 : 0) +
                               (wants_post_norms(sp) ? (uint64_t)E * 8 : 0) + oai;
    if (is_q35(sp)) { /* gated attention or DeltaNet, then the FFN; the MTP layers are attention ones with nextn.* */
        const mk_q35 q = q35_shape(sp);
        const int64_t VD = (int64_t)q.v_heads * q.state;
        for (int l = 0; l < sp->n_layer + sp->n_nextn; l++) {
            b += (is_moe(sp) ? ffn + MAT(E, 1) + 2 * MAT(E, F) + MAT(F, E) : 2 * MAT(E, F) + MAT(F, E)) + (uint64_t)E * 8;
            if (q35_recurrent(sp, l))
                b += MAT(E, q.conv_dim) + MAT(E, VD) + 2 * MAT(E, q.v_heads) + MAT(VD, E) +
                     (uint64_t)(q.d_conv * q.conv_dim + 2 * q.v_heads + q.state) * 4;
            else
                b += MAT(E, 2 * Q) + 2 * MAT(E, KV) + MAT(Q, E) + (uint64_t)HD * 8;
            if (l >= sp->n_layer) b += MAT(2 * E, E) + (uint64_t)E * 8;
        }
        return b;
    }
    if (is_g4(sp)) { /* each layer its own shape: q, k (own K/V), v (sliding), output, FFN, norms, scale */
        b += (uint64_t)HD * 4; /* rope_freqs (full head / 2) */
        const int64_t npl = sp->n_embd_per_layer, nlpl = npl * sp->n_layer;
        if (npl > 0) b += MAT(nlpl, n_vocab) + MAT(E, nlpl) + (uint64_t)npl * 4 + (MAT(E, npl) + MAT(npl, E) + (uint64_t)E * 4) * (uint64_t)sp->n_layer;
        for (int l = 0; l < sp->n_layer; l++) {
            const mk_layer s = layer_shape(sp, l);
            const int64_t q = (int64_t)sp->n_head * s.hd, kv = (int64_t)s.kv_heads * s.hd;
            b += MAT(E, q) + MAT(q, E) + (s.own_kv ? MAT(E, kv) * (s.swa ? 2 : 1) + (uint64_t)s.hd * 4 : 0) + 2 * MAT(E, s.ff) +
                 MAT(s.ff, E) + (uint64_t)E * 16 + (uint64_t)s.hd * 4 + 4;
            /* experts: router, its scale, three norms, gate and up (merged or not, the same bytes), down, scales */
            if (g4_moe(sp)) b += MAT(E, NE) + (uint64_t)(4 * E + NE) * 4 + (2 * MAT_T(et, E, FE) + MAT_T(et, FE, E)) * (uint64_t)NE;
        }
        return b;
    }
#undef MAT
#undef MAT_T
    return b + per_layer * (uint64_t)sp->n_layer;
}

sift_status sift__mkmodel_write(const char *path, const char *vocab_src, const sift__mkmodel_spec *sp, sift_error *err)
{
    if (!path || !vocab_src || !sp) return sift__error_set(err, SIFT_E_INVAL, "mkmodel: NULL argument");
    int rc = check_spec(sp, err);
    if (rc != SIFT_OK) return rc;
    if (is_q35(sp)) {
        const mk_q35 q = q35_shape(sp);
        if (q.v_heads % q.groups || sp->n_nextn < 0 || sp->n_nextn > 4 || q.state > 1024)
            return sift__error_set(err, SIFT_E_INVAL, "mkmodel: qwen35: %d v heads are not a multiple of %d groups, or %d MTP "
                                   "layers are not in [0, 4], or state size %d is over 1024", q.v_heads, q.groups, sp->n_nextn, q.state);
    }
    sift_gguf *g = sift_gguf_open(vocab_src, err);
    if (!g) return err ? err->status : SIFT_E_IO;
    int64_t n_vocab = 0;

    mk_state S = {.sp = sp, .seed = sp->seed ? sp->seed : 1, .cap = 8 + 32 * (sp->n_layer + (is_q35(sp) ? sp->n_nextn : 0)), .err = err};
    S.w = sift__gguf_writer_new();
    S.bufs = calloc((size_t)S.cap, sizeof *S.bufs);
    S.names = calloc((size_t)S.cap, sizeof *S.names);
    if (!S.w || !S.bufs || !S.names) {
        rc = sift__error_set(err, SIFT_E_NOMEM, "mkmodel: out of memory");
        goto done;
    }
    sift__gguf_writer *w = S.w;
    char key[128];
    sift__gguf_writer_set_str(w, "general.architecture", sp->arch);
    sift__gguf_writer_set_str(w, "general.name", "sift test model");
#define KEY(s) (snprintf(key, sizeof key, "%s." s, sp->arch), key)
    sift__gguf_writer_set_u32(w, KEY("context_length"), (uint32_t)(sp->n_ctx_train ? sp->n_ctx_train : 1024));
    sift__gguf_writer_set_u32(w, KEY("embedding_length"), (uint32_t)sp->n_embd);
    sift__gguf_writer_set_u32(w, KEY("block_count"), (uint32_t)(sp->n_layer + (is_q35(sp) ? sp->n_nextn : 0)));
    if (is_q35(sp)) q35_keys(w, sp);
    sift__gguf_writer_set_u32(w, KEY("feed_forward_length"), (uint32_t)sp->n_ff);
    sift__gguf_writer_set_u32(w, KEY("attention.head_count"), (uint32_t)sp->n_head);
    sift__gguf_writer_set_u32(w, KEY("attention.head_count_kv"), (uint32_t)sp->n_head_kv);
    sift__gguf_writer_set_f32(w, KEY("attention.layer_norm_rms_epsilon"), 1e-6f);
    if (sp->head_dim) {
        sift__gguf_writer_set_u32(w, KEY("attention.key_length"), (uint32_t)sp->head_dim);
        sift__gguf_writer_set_u32(w, KEY("attention.value_length"), (uint32_t)sp->head_dim);
    }
    if (sp->freq_base > 0) sift__gguf_writer_set_f32(w, KEY("rope.freq_base"), sp->freq_base);
    if (sp->rope_linear > 0) {
        sift__gguf_writer_set_str(w, KEY("rope.scaling.type"), "linear");
        sift__gguf_writer_set_f32(w, KEY("rope.scaling.factor"), sp->rope_linear);
    }
    if (sp->n_swa > 0 || is_oai(sp) || is_g4(sp))
        sift__gguf_writer_set_u32(w, KEY("attention.sliding_window"), (uint32_t)(sp->n_swa > 0 ? sp->n_swa : 128));
    if (sp->attn_softcap > 0) sift__gguf_writer_set_f32(w, KEY("attn_logit_softcapping"), sp->attn_softcap);
    if (sp->final_softcap > 0) sift__gguf_writer_set_f32(w, KEY("final_logit_softcapping"), sp->final_softcap);
    if (sp->rope_yarn > 0) {
        sift__gguf_writer_set_str(w, KEY("rope.scaling.type"), "yarn");
        sift__gguf_writer_set_f32(w, KEY("rope.scaling.factor"), sp->rope_yarn);
        sift__gguf_writer_set_u32(w, KEY("rope.scaling.original_context_length"),
                                  (uint32_t)((sp->n_ctx_train ? sp->n_ctx_train : 1024) / sp->rope_yarn));
    }
    if (sp->longrope_orig > 0) {
        sift__gguf_writer_set_str(w, KEY("rope.scaling.type"), "longrope");
        sift__gguf_writer_set_u32(w, KEY("rope.scaling.original_context_length"), (uint32_t)sp->longrope_orig);
        sift__gguf_writer_set_f32(w, KEY("rope.scaling.attn_factor"), 1.19f);
    }
    const int n_exp = sp->n_expert > 0 ? sp->n_expert : 8, n_used = sp->n_expert_used > 0 ? sp->n_expert_used : 2;
    const int n_ff_exp = sp->n_ff_exp > 0 ? sp->n_ff_exp : sp->n_ff;
    if (is_moe(sp) || g4_moe(sp)) {
        sift__gguf_writer_set_u32(w, KEY("expert_count"), (uint32_t)n_exp);
        sift__gguf_writer_set_u32(w, KEY("expert_used_count"), (uint32_t)n_used);
        sift__gguf_writer_set_u32(w, KEY("expert_feed_forward_length"), (uint32_t)n_ff_exp);
    }
    if (!strcmp(sp->arch, "granite")) { /* multipliers of granite-3.x's order (its 2B: 12, 0.22, 1/64, 8) */
        sift__gguf_writer_set_f32(w, KEY("embedding_scale"), 12.0f);
        sift__gguf_writer_set_f32(w, KEY("residual_scale"), 0.22f);
        sift__gguf_writer_set_f32(w, KEY("attention.scale"), 0.015625f);
        sift__gguf_writer_set_f32(w, KEY("logit_scale"), 8.0f);
    }
    if (is_g4(sp)) { /* per-layer arrays, the two head sizes, the shared layers (mkmodel.h) */
        uint8_t pat[1024];
        uint32_t kvh[1024], ffw[1024];
        for (int l = 0; l < sp->n_layer; l++) {
            const mk_layer ls = layer_shape(sp, l);
            pat[l] = ls.swa, kvh[l] = (uint32_t)ls.kv_heads, ffw[l] = (uint32_t)ls.ff;
        }
        const uint32_t hd = (uint32_t)(sp->head_dim ? sp->head_dim : sp->n_embd / sp->n_head);
        sift__gguf_writer_set_arr(w, KEY("attention.sliding_window_pattern"), SIFT_GGUF_BOOL, pat, (uint64_t)sp->n_layer);
        sift__gguf_writer_set_arr(w, KEY("attention.head_count_kv"), SIFT_GGUF_UINT32, kvh, (uint64_t)sp->n_layer);
        sift__gguf_writer_set_arr(w, KEY("feed_forward_length"), SIFT_GGUF_UINT32, ffw, (uint64_t)sp->n_layer);
        sift__gguf_writer_set_u32(w, KEY("attention.key_length"), 2 * hd);
        sift__gguf_writer_set_u32(w, KEY("attention.value_length"), 2 * hd);
        sift__gguf_writer_set_u32(w, KEY("attention.key_length_swa"), hd);
        sift__gguf_writer_set_u32(w, KEY("attention.value_length_swa"), hd);
        sift__gguf_writer_set_u32(w, KEY("rope.dimension_count"), 2 * hd);
        sift__gguf_writer_set_u32(w, KEY("rope.dimension_count_swa"), hd);
        if (!(sp->freq_base > 0)) sift__gguf_writer_set_f32(w, KEY("rope.freq_base"), 1e6f);
        sift__gguf_writer_set_f32(w, KEY("rope.freq_base_swa"), 10000.0f);
        sift__gguf_writer_set_u32(w, KEY("attention.shared_kv_layers"), (uint32_t)(sp->n_layer - g4_n_kv(sp)));
        sift__gguf_writer_set_u32(w, KEY("embedding_length_per_layer_input"), (uint32_t)sp->n_embd_per_layer);
        if (!(sp->final_softcap > 0)) sift__gguf_writer_set_f32(w, KEY("final_logit_softcapping"), 30.0f);
    }
#undef KEY
    if ((rc = sift__mkmodel_copy_vocab(w, g, sp->fim, &n_vocab, err)) != SIFT_OK) goto done;
    if (sp->gemma4_vocab && (sp->fim || (rc = sift__mkmodel_gemma4_vocab(w, g, &n_vocab, err)) != SIFT_OK)) {
        if (sp->fim) rc = sift__error_set(err, SIFT_E_INVAL, "mkmodel: --tokenizer gemma4 and --fim do not go together");
        goto done;
    }

    const int E = sp->n_embd, HD0 = sp->head_dim ? sp->head_dim : sp->n_embd / sp->n_head;
#define T(NAME, NE0, NE1, KIND)                                                                                    \
    if ((rc = mk_tensor(&S, NAME, NE0, NE1, KIND)) != SIFT_OK) goto done;
    T("token_embd.weight", E, n_vocab, MK_MATRIX)
    T("output_norm.weight", E, 1, MK_NORM)
    if (is_g4(sp) && sp->n_embd_per_layer > 0) { /* per-layer embeddings: a second table, its projection */
        const int64_t nlpl = (int64_t)sp->n_embd_per_layer * sp->n_layer;
        T("per_layer_token_embd.weight", nlpl, n_vocab, MK_MATRIX)
        T("per_layer_model_proj.weight", E, nlpl, MK_MATRIX)
        T("per_layer_proj_norm.weight", sp->n_embd_per_layer, 1, MK_NORM)
    }
    if (is_g4(sp)) {
        T("rope_freqs.weight", HD0, 1, MK_ROPE_PROP) /* the full layers' head (2 HD0) / 2 */
    } else if (sp->rope_freqs) {
        T("rope_freqs.weight", HD0 / 2, 1, MK_ROPE_FREQS)
    }
    if (sp->longrope_orig > 0) {
        T("rope_factors_long.weight", HD0 / 2, 1, MK_ROPE_FREQS)
        T("rope_factors_short.weight", HD0 / 2, 1, MK_ROPE_FREQS)
    }
    const bool fused = !strcmp(sp->arch, "phi3");
    /* gemma2/3: always tied (llama.cpp reads no output.weight; gemma4 does); gpt-oss: never (llama.cpp
     * requires output.weight) */
    if ((!sp->tied || is_oai(sp)) && !always_tied(sp)) T("output.weight", E, n_vocab, MK_HEAD)
    for (int l = 0; is_q35(sp) && l < sp->n_layer + sp->n_nextn; l++)
        if ((rc = q35_layer(&S, l)) != SIFT_OK) goto done;
    for (int l = 0; l < sp->n_layer && !is_q35(sp); l++) {
        char n[SIFT_GGUF_MAX_NAME];
#define N(s) (snprintf(n, sizeof n, "blk.%d." s, l), n)
        /* the layer's own shape (gemma4's vary; the others' are the model's) */
        const mk_layer ls = layer_shape(sp, l);
        const int HD = ls.hd, Q = sp->n_head * HD, KV = ls.kv_heads * HD, F = ls.ff;
        T(N("attn_norm.weight"), E, 1, MK_NORM)
        if (fused) {
            T(N("attn_qkv.weight"), E, Q + 2 * KV, MK_MATRIX)
        } else {
            T(N("attn_q.weight"), E, Q, MK_MATRIX)
            if (ls.own_kv) T(N("attn_k.weight"), E, KV, MK_MATRIX)
            if (ls.own_kv && (!is_g4(sp) || ls.swa)) T(N("attn_v.weight"), E, KV, MK_MATRIX) /* gemma4's full layers: V is K */
        }
        if (wants_bias(sp)) {
            T(N("attn_q.bias"), Q, 1, MK_BIAS)
            T(N("attn_k.bias"), KV, 1, MK_BIAS)
            T(N("attn_v.bias"), KV, 1, MK_BIAS)
        }
        if (wants_qk_norm(sp)) {
            T(N("attn_q_norm.weight"), HD, 1, MK_NORM)
            if (ls.own_kv) T(N("attn_k_norm.weight"), HD, 1, MK_NORM)
        }
        T(N("attn_output.weight"), Q, E, MK_MATRIX)
        if (is_oai(sp)) { /* the norm before the experts is llama.cpp's attn_post_norm */
            T(N("attn_output.bias"), E, 1, MK_BIAS)
            T(N("attn_sinks.weight"), sp->n_head, 1, MK_SINK)
            T(N("post_attention_norm.weight"), E, 1, MK_NORM)
        } else {
            T(N("ffn_norm.weight"), E, 1, MK_NORM)
        }
        if (is_moe(sp)) {
            T(N("ffn_gate_inp.weight"), E, n_exp, MK_MATRIX)
            if ((rc = mk_tensor3(&S, N("ffn_gate_exps.weight"), E, n_ff_exp, n_exp, MK_EXPERTS)) != SIFT_OK) goto done;
            if ((rc = mk_tensor3(&S, N("ffn_up_exps.weight"), E, n_ff_exp, n_exp, MK_EXPERTS)) != SIFT_OK) goto done;
            if ((rc = mk_tensor3(&S, N("ffn_down_exps.weight"), n_ff_exp, E, n_exp, MK_EXPERTS)) != SIFT_OK) goto done;
            if (is_oai(sp)) { /* the experts' biases, expert after expert */
                T(N("ffn_gate_inp.bias"), n_exp, 1, MK_BIAS)
                T(N("ffn_gate_exps.bias"), n_ff_exp, n_exp, MK_BIAS)
                T(N("ffn_up_exps.bias"), n_ff_exp, n_exp, MK_BIAS)
                T(N("ffn_down_exps.bias"), E, n_exp, MK_BIAS)
            }
        } else if (fused) {
            T(N("ffn_up.weight"), E, 2 * F, MK_MATRIX) /* gate rows, then up rows */
        } else {
            T(N("ffn_gate.weight"), E, F, MK_MATRIX)
            T(N("ffn_up.weight"), E, F, MK_MATRIX)
        }
        if (!is_moe(sp)) T(N("ffn_down.weight"), F, E, MK_MATRIX)
        if (wants_post_norms(sp)) {
            T(N("post_attention_norm.weight"), E, 1, MK_NORM)
            T(N("post_ffw_norm.weight"), E, 1, MK_NORM)
        }
        if (g4_moe(sp)) { /* the experts beside the dense FFN; gate and up merged on even layers, apart on odd ones */
            T(N("ffn_gate_inp.weight"), E, n_exp, MK_MATRIX)
            T(N("ffn_gate_inp.scale"), E, 1, MK_NORM)
            T(N("pre_ffw_norm_2.weight"), E, 1, MK_NORM)
            T(N("post_ffw_norm_1.weight"), E, 1, MK_NORM)
            T(N("post_ffw_norm_2.weight"), E, 1, MK_NORM)
            if (l % 2 == 0) {
                if ((rc = mk_tensor3(&S, N("ffn_gate_up_exps.weight"), E, 2 * n_ff_exp, n_exp, MK_EXPERTS)) != SIFT_OK) goto done;
            } else {
                if ((rc = mk_tensor3(&S, N("ffn_gate_exps.weight"), E, n_ff_exp, n_exp, MK_EXPERTS)) != SIFT_OK) goto done;
                if ((rc = mk_tensor3(&S, N("ffn_up_exps.weight"), E, n_ff_exp, n_exp, MK_EXPERTS)) != SIFT_OK) goto done;
            }
            if ((rc = mk_tensor3(&S, N("ffn_down_exps.weight"), n_ff_exp, E, n_exp, MK_EXPERTS)) != SIFT_OK) goto done;
            T(N("ffn_down_exps.scale"), n_exp, 1, MK_NORM)
        }
        if (is_g4(sp)) T(N("layer_output_scale.weight"), 1, 1, MK_NORM)
        if (is_g4(sp) && sp->n_embd_per_layer > 0) {
            T(N("inp_gate.weight"), E, sp->n_embd_per_layer, MK_MATRIX)
            T(N("proj.weight"), sp->n_embd_per_layer, E, MK_MATRIX)
            T(N("post_norm.weight"), E, 1, MK_NORM)
        }
#undef N
    }
#undef T
    rc = sift__gguf_writer_write_file(w, path, err);
done:
    for (int i = 0; i < S.n; i++) free(S.bufs[i]);
    free(S.bufs);
    free(S.names);
    sift__gguf_writer_free(S.w);
    sift_gguf_close(g);
    return rc;
}
