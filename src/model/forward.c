/*
 * forward.c - contexts and the forward pass (sift_context_new, sift_decode, logits).
 *
 * A decode runs the llama block on every token of the batch at once:
 *
 *   x = embed(token)
 *   for each layer:
 *       xn = rmsnorm(x) * attn_norm
 *       q, k, v = xn Wq, xn Wk, xn Wv   (+ bias; per-head rmsnorm of q, k for qwen3)
 *       rope(q, k) at the token's position; k, v -> the cache of each of the token's sequences
 *       x += attention(q, cache of the token's first sequence, cells 0..pos) Wo
 *       x += (silu(rmsnorm(x) * ffn_norm Wgate) * (... Wup)) Wdown
 *       x += control vector of the layer, when one is set (cvec.c)
 *   logits = rmsnorm(x) * output_norm Wout
 *
 * Every step is computed for all tokens of the batch before the next one, so each matrix
 * product is weights × (tokens × features): a dot kernel takes one weight row against up
 * to four tokens, or a gemm kernel a tile of rows × tokens (kernels.h). The keys and values of the whole batch are written before any
 * attention of that layer is computed, so tokens of one sequence in one batch see each
 * other (causally, by position) exactly as if they had been decoded one by one.
 *
 * qwen35's hybrid replaces the attention of most layers by a Gated DeltaNet (deltanet_layer):
 * the projections for the whole batch as above, then a recurrence token by token over each
 * token's sequence's state (context.h), which is why its tokens must be in position order and
 * in one sequence each (check_batch). Its attention layers gate their output by sigmoid(gate).
 *
 * Only the tokens that asked for logits matter after the last layer's keys and values are
 * stored, so the last layer computes queries, attention and the feed-forward block for
 * those tokens only (llama.cpp's inp_out_ids trick, taken one step further).
 *
 * Parallelism: each step splits its rows (matrix products) or its (token, KV head) pairs
 * (attention) over the context's threads; every output value is computed by one thread in
 * a fixed order, so results do not depend on the thread count.
 *
 * Numerics follow ggml where it matters for agreement with llama.cpp: RMSNorm sums squares
 * in double, RoPE angles are built by repeated multiplication in float, the softmax sums in
 * double and scales by the float of 1/sum, F16 weights multiply F16-rounded activations.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/perf.h"
#include "core/status.h"
#include "gguf/ggml_types.h"
#include "model/context.h"

/* ---- small row operations (cheap next to the products; plain C) ---------------------------- */

/* y = x / rms(x) * w, or without a weight when w is NULL (gemma4's V) */
static void rmsnorm(const float *x, const float *w, float *y, int n, float eps)
{
    double sum = 0;
    for (int i = 0; i < n; i++) sum += (double)(x[i] * x[i]);
    const float mean = (float)(sum / n);
    const float scale = 1.0f / sqrtf(mean + eps);
    if (!w) {
        for (int i = 0; i < n; i++) y[i] = x[i] * scale;
        return;
    }
    for (int i = 0; i < n; i++) y[i] = (x[i] * scale) * w[i];
}

/* gate = gelu(gate) * up with ggml's fp16 GELU table (model.c, gelu_table). */
static void geglu(int64_t n, float *g, const float *u, const uint16_t *tbl)
{
    for (int64_t i = 0; i < n; i++) {
        const float x = g[i];
        if (x <= -10.0f) g[i] = 0.0f;
        else if (x >= 10.0f) g[i] = x * u[i];
        else g[i] = sift__fp16_to_fp32(tbl[sift__fp32_to_fp16(x)]) * u[i];
    }
}

/* ggml's YaRN correction dimension: where the rotation of frequency pair i completes
 * n_ctx_orig / beta turns. */
static float yarn_corr_dim(int n_dims, int n_ctx_orig, float beta, float base)
{
    return (float)n_dims * logf((float)n_ctx_orig / (beta * 2 * 3.14159265358979323846f)) / (2 * logf(base));
}

/* llama.cpp's YaRN magnitude (llama_context's yarn_attn_factor, which cancels the factor
 * ggml's rope applies itself, times that factor): 1 + 0.1 ln(factor), or with a log
 * multiplier the ratio of the two mscales times it. */
static float yarn_mscale(const sift__hparams *hp, float freq_scale)
{
    const float factor = 1.0f / freq_scale;
    const float internal = 1.0f + 0.1f * logf(factor); /* ggml: mscale *= 1 + 0.1 ln(1/freq_scale) */
    float a = 1.0f;
    if (hp->yarn_log_mul != 0.0f) {
        const float ms = factor <= 1.0f ? 1.0f : 0.1f * 1.0f * logf(factor) + 1.0f;
        const float ms_all = factor <= 1.0f ? 1.0f : 0.1f * hp->yarn_log_mul * logf(factor) + 1.0f;
        a = ms / ms_all * (1.0f / (1.0f + 0.1f * logf(factor)));
    }
    return a * hp->rope_attn_factor * internal;
}

void sift__rope_cache(const sift_model *m, const float *factors, float p, bool swa, bool magnitude, float *cs)
{
    const sift__hparams *hp = &m->hp;
    const float base = swa ? hp->rope_freq_base_swa : hp->rope_freq_base;
    const float scale = swa ? hp->rope_freq_scale_swa : hp->rope_freq_scale;
    const int n_rot = swa ? hp->n_rot_swa : hp->n_rot;
    const float theta_scale = powf(base, -2.0f / (float)n_rot);
    const bool yarn = hp->rope_yarn && hp->yarn_ext_factor != 0.0f;
    float lo = 0, hi = 0, mscale = hp->rope_attn_factor;
    if (yarn) { /* ggml_rope_yarn_corr_dims */
        lo = fmaxf(0.0f, floorf(yarn_corr_dim(n_rot, hp->n_ctx_orig, hp->yarn_beta_fast, base)));
        hi = fminf((float)(n_rot - 1), ceilf(yarn_corr_dim(n_rot, hp->n_ctx_orig, hp->yarn_beta_slow, base)));
        mscale = yarn_mscale(hp, scale);
    }
    if (!magnitude) mscale = 1.0f;
    float theta = p;
    for (int i = 0; i < n_rot / 2; i++) {
        const float ff = factors ? factors[i] : 1.0f;
        const float extrap = theta / ff;
        float t = scale * extrap;
        if (yarn) { /* between interpolation and extrapolation by a ramp over the pairs */
            const float y = ((float)i - lo) / fmaxf(0.001f, hi - lo);
            const float mix = (1.0f - fminf(1.0f, fmaxf(0.0f, y))) * hp->yarn_ext_factor;
            t = t * (1.0f - mix) + extrap * mix;
        }
        cs[2 * i] = cosf(t) * mscale;
        cs[2 * i + 1] = sinf(t) * mscale;
        theta *= theta_scale;
    }
}

/* Normal mode rotates (x[2i], x[2i+1]); neox mode rotates (x[i], x[i + n_rot/2]). */
void sift__rope_apply(float *x, const float *cs, int n_rot, bool neox)
{
    const int half = n_rot / 2;
    for (int i = 0; i < half; i++) {
        float *a = neox ? &x[i] : &x[2 * i];
        float *b = neox ? &x[i + half] : &x[2 * i + 1];
        const float c = cs[2 * i], s = cs[2 * i + 1], x0 = *a, x1 = *b;
        *a = x0 * c - x1 * s;
        *b = x0 * s + x1 * c;
    }
}

/* ---- matrix products -------------------------------------------------------------------------- */

#define MM_MAX 16      /* weights in a job: q, k, v; or gate and up of up to 8 experts */
#define MM_ROW_BLOCK 16 /* rows kept hot while the token groups go by */
#define SIFT_PAR_MIN_WORK (1 << 18) /* multiply-adds below which a step runs on one thread */

typedef struct mm_job {
    const sift_context *ctx;
    int n_tok;
    int n_w;
    const sift__weight *w[MM_MAX];
    const void *act[MM_MAX]; /* each weight's input in its activation format (F32 for none) */
    size_t act_stride[MM_MAX];
    float *out[MM_MAX];      /* [n_tok][out_stride] */
    int64_t out_stride[MM_MAX];
    const float *bias[MM_MAX];
    int64_t n_rows;          /* sum of the weights' n_out */
} mm_job;

/* out[t * os + r] += bias[r] for the rows [r0, r1) of every token (nothing without a bias) */
static void add_bias_rows(float *out, int64_t os, int n_tok, int64_t r0, int64_t r1, const float *bias)
{
    if (!bias) return;
    for (int t = 0; t < n_tok; t++)
        for (int64_t r = r0; r < r1; r++) out[t * os + r] += bias[r];
}

/* Rows [r0, r1) of weight w against all tokens, with a dot kernel. */
static void mm_rows_kernel(const mm_job *J, int wi, int64_t r0, int64_t r1, sift__dot_fn dot)
{
    const sift__weight *w = J->w[wi];
    const char *act = J->act[wi];
    const size_t as = J->act_stride[wi];
    float *out = J->out[wi];
    const int64_t os = J->out_stride[wi];
    const float *bias = J->bias[wi];
    float s[SIFT_DOT_MAX_COLS];
    const void *x8 = sift__weight_x8(w);
    if (x8) { /* rows in groups (repack.h): one kernel for every token count */
        J->ctx->k->gemm_x8[w->type](w->n_in, x8, w->row_bytes, w->n_out, r0, r1, act, as, J->n_tok, out + r0, os);
        add_bias_rows(out, os, J->n_tok, r0, r1, bias);
        return;
    }
    if (J->n_tok == 1) { /* generation: the row loop lives in the kernel */
        const sift__rows_fn huge = w->huge_pages ? J->ctx->k->rows_huge[w->type] : NULL;
        (huge ? huge : J->ctx->k->rows[w->type])(w->n_in, (const char *)w->data + r0 * w->row_bytes, w->row_bytes, r1 - r0, act,
                                                 out + r0);
        add_bias_rows(out, os, 1, r0, r1, bias);
        return;
    }
    const sift__gemm_fn gemm = J->ctx->k->gemm[w->type];
    if (gemm) { /* the kernel tiles rows x tokens itself */
        gemm(w->n_in, (const char *)w->data + r0 * w->row_bytes, w->row_bytes, r1 - r0, act, as, J->n_tok, out + r0, os);
        add_bias_rows(out, os, J->n_tok, r0, r1, bias);
        return;
    }
    for (int64_t rb = r0; rb < r1; rb += MM_ROW_BLOCK) {
        const int64_t re = rb + MM_ROW_BLOCK < r1 ? rb + MM_ROW_BLOCK : r1;
        for (int t = 0; t < J->n_tok; t += SIFT_DOT_MAX_COLS) {
            const int nc = J->n_tok - t < SIFT_DOT_MAX_COLS ? J->n_tok - t : SIFT_DOT_MAX_COLS;
            for (int64_t r = rb; r < re; r++) {
                dot(w->n_in, (const char *)w->data + r * w->row_bytes, act + t * as, as, nc, s);
                const float b = bias ? bias[r] : 0.0f;
                for (int j = 0; j < nc; j++) out[(t + j) * os + r] = bias ? s[j] + b : s[j];
            }
        }
    }
}

/* The same for a type without a kernel: dequantize each row once, then F32 dots. */
static void mm_rows_generic(const mm_job *J, int wi, int64_t r0, int64_t r1, float *deq)
{
    const sift__weight *w = J->w[wi];
    const sift__type_traits *tr = sift__type_traits_get(w->type);
    const sift__dot_fn dot = J->ctx->k->dot[SIFT_TYPE_F32];
    const size_t xs = J->act_stride[wi];
    float s[SIFT_DOT_MAX_COLS];
    for (int64_t r = r0; r < r1; r++) {
        tr->dequantize((const char *)w->data + r * w->row_bytes, deq, w->n_in);
        for (int t = 0; t < J->n_tok; t += SIFT_DOT_MAX_COLS) {
            const int nc = J->n_tok - t < SIFT_DOT_MAX_COLS ? J->n_tok - t : SIFT_DOT_MAX_COLS;
            dot(w->n_in, deq, (const float *)((const char *)J->act[wi] + t * xs), xs, nc, s);
            for (int j = 0; j < nc; j++)
                J->out[wi][(t + j) * J->out_stride[wi] + r] = s[j] + (J->bias[wi] ? J->bias[wi][r] : 0.0f);
        }
    }
}

/* Rows [a, b) of weight wi of the job, on thread `thread`. */
static void mm_rows(const mm_job *J, int wi, int64_t a, int64_t b, int thread)
{
    sift__dot_fn dot = J->ctx->k->dot[J->w[wi]->type];
    if (dot)
        mm_rows_kernel(J, wi, a, b, dot);
    else
        mm_rows_generic(J, wi, a, b, J->ctx->deq + (size_t)thread * J->ctx->deq_stride);
}

/* Chunk c of the job's rows (boundaries on multiples of 16 rows, so two threads never
 * write the same cache line of an output row). */
static void mm_task(void *arg, int chunk, int n_chunks, int thread)
{
    const mm_job *J = arg;
    const int64_t units = (J->n_rows + 15) / 16;
    int64_t r0 = units * chunk / n_chunks * 16, r1 = units * (chunk + 1) / n_chunks * 16;
    if (r1 > J->n_rows) r1 = J->n_rows;
    int64_t base = 0;
    for (int wi = 0; wi < J->n_w; base += J->w[wi]->n_out, wi++) {
        const int64_t a = r0 > base ? r0 - base : 0;
        const int64_t b = r1 - base < J->w[wi]->n_out ? r1 - base : J->w[wi]->n_out;
        if (a < b) mm_rows(J, wi, a, b, thread);
    }
}

/* How many chunks `units` 16-row units of a job go in: four a thread, and for one token at
 * most MM_GEN_CHUNK units each, since a thread that finishes its last chunk early waits for
 * the others' (with the output matrix in 8 chunks that wait was ~3% of a token). */
#define MM_GEN_CHUNK 16
static int mm_chunks(int64_t units, int nth, int n_tok)
{
    int64_t c = 4 * nth;
    if (nth > 1 && n_tok == 1 && units / MM_GEN_CHUNK > c) c = units / MM_GEN_CHUNK;
    return (int)(units < c ? units : c);
}

/* Runs a filled job: its rows in chunks across the pool (one fork-join for all its weights). */
static void mm_run(sift_context *ctx, int nth, const mm_job *J)
{
    /* below ~256K multiply-adds a second thread costs more than it saves */
    const int64_t work = J->n_rows * J->w[0]->n_in * J->n_tok;
    if (work < SIFT_PAR_MIN_WORK) nth = 1;
    sift__pool_run(ctx->pool, nth, mm_chunks((J->n_rows + 15) / 16, nth, J->n_tok), mm_task, (void *)J);
}

/* out_i = x W_i^T (+ bias_i) for the n_w weights (all taking n_in inputs), x [n_tok][n_in]. */
static void matmul(sift_context *ctx, int nth, int n_tok, const float *x, int n_w, const sift__weight *const *w,
                   float *const *out, const int64_t *out_stride, const float *const *bias)
{
    if (n_tok == 0) return;
    mm_job J = {.ctx = ctx, .n_tok = n_tok, .n_w = n_w};
    const int64_t n_in = w[0]->n_in;
    bool converted[SIFT_ACT_COUNT] = {false};
    for (int i = 0; i < n_w; i++) {
        J.w[i] = w[i];
        J.out[i] = out[i];
        J.out_stride[i] = out_stride[i];
        J.bias[i] = bias ? bias[i] : NULL;
        J.n_rows += w[i]->n_out;
        const sift__act_format f = sift__act_format_of(w[i]->type);
        if (f == SIFT_ACT_F32 || f == SIFT_ACT_NONE) {
            J.act[i] = x;
            J.act_stride[i] = (size_t)n_in * sizeof(float);
            continue;
        }
        /* convert the input once per format (q, k and v usually share one) */
        if (!converted[f]) {
            for (int t = 0; t < n_tok; t++)
                ctx->k->act_convert(f, x + (size_t)t * n_in, (char *)ctx->act[f] + t * ctx->act_stride[f], n_in);
            converted[f] = true;
        }
        J.act[i] = ctx->act[f];
        J.act_stride[i] = ctx->act_stride[f];
    }
    mm_run(ctx, nth, &J);
}

/* One weight, with a bias or none (NULL). */
static void matmul1b(sift_context *ctx, int nth, int n_tok, const float *x, const sift__weight *w, float *out,
                     int64_t out_stride, const float *bias)
{
    matmul(ctx, nth, n_tok, x, 1, &w, &out, &out_stride, &bias);
}

static void matmul1(sift_context *ctx, int nth, int n_tok, const float *x, const sift__weight *w, float *out,
                    int64_t out_stride)
{
    matmul1b(ctx, nth, n_tok, x, w, out, out_stride, NULL);
}

/* ---- mixture of experts ----------------------------------------------------------------------- */

/* Expert e of a stacked expert tensor: its n_out rows, in place. */
static sift__weight expert_view(const sift__weight *w, int e, int64_t n_out)
{
    sift__weight v = *w;
    v.n_out = n_out;
    v.data = (const char *)w->data + (size_t)e * (size_t)n_out * w->row_bytes;
    return v;
}

/* gpt-oss's gate (ggml's swiglu_oai, alpha 1.702, limit 7): the gate clamped from above, the
 * up projection on both sides and shifted by one; g = g * sigmoid(1.702 g) * (u + 1). */
static void swiglu_oai(int64_t n, float *g, const float *u)
{
    const float alpha = 1.702f, limit = 7.0f;
    for (int64_t i = 0; i < n; i++) {
        /* fminf / fmaxf as compares (a NaN gives the limit either way): the libm calls cost */
        const float x = g[i] < limit ? g[i] : limit, uc = u[i] > -limit ? u[i] : -limit, y = uc < limit ? uc : limit;
        g[i] = x / (1.0f + expf(alpha * -x)) * (y + 1.0f);
    }
}

/* The MoE routing of n tokens (router input xr), as llama.cpp's build_moe_ffn with softmax
 * gating: router logits -> softmax -> the n_expert_used most probable experts (descending)
 * -> their probabilities, renormalized when the model says (gpt-oss, its SOFTMAX_WEIGHT: the
 * top k of the biased logits, the softmax of those k). ctx->moe_sel / moe_w get each token's
 * experts and weights. */
static void moe_route(sift_context *ctx, int nth, int n, const sift__layer *L, const float *xr)
{
    const sift__hparams *hp = &ctx->model->hp;
    const int NE = hp->n_expert, K = hp->n_expert_used;
    matmul1b(ctx, nth, n, xr, &L->w_router, ctx->moe_p, NE, L->b_router);
    for (int t = 0; t < n; t++) {
        float *p = ctx->moe_p + (size_t)t * NE;
        if (!hp->moe_oai) { /* softmax over all experts; gpt-oss selects on the logits themselves */
            const double sum = ctx->k->softmax_exp(NE, p, ctx->k->max(NE, p));
            const float inv = (float)(1.0 / sum);
            for (int e = 0; e < NE; e++) p[e] *= inv;
        }
        int32_t *sel = ctx->moe_sel + (size_t)t * K;
        float *w = ctx->moe_w + (size_t)t * K;
        for (int k = 0; k < K; k++) { /* selection: K is small (2..8) */
            int best = -1;
            for (int e = 0; e < NE; e++) {
                bool taken = false;
                for (int j = 0; j < k; j++) taken |= sel[j] == e;
                if (!taken && (best < 0 || p[e] > p[best])) best = e;
            }
            sel[k] = best;
            w[k] = p[best];
        }
        if (hp->moe_oai) { /* gpt-oss: the weights are the softmax of the selected logits */
            const double sum = ctx->k->softmax_exp(K, w, ctx->k->max(K, w));
            const float inv = (float)(1.0 / sum);
            for (int k = 0; k < K; k++) w[k] *= inv;
        }
        if (hp->moe_norm_w) {
            double ws = 0;
            for (int k = 0; k < K; k++) ws += w[k];
            const float wsum = (float)ws;
            for (int k = 0; k < K; k++) w[k] /= wsum;
        }
    }
}

/* Expert e's gate, up and down views (gemma4's merged gate-up stack read as two row ranges). */
static void expert_views(const sift__layer *L, int e, int64_t FE, int64_t E, sift__weight *g, sift__weight *u, sift__weight *d)
{
    *g = expert_view(&L->w_gate_exps, L->gate_up_exps ? 2 * e : e, FE);
    *u = L->gate_up_exps ? expert_view(&L->w_gate_exps, 2 * e + 1, FE) : expert_view(&L->w_up_exps, e, FE);
    *d = expert_view(&L->w_down_exps, e, E);
}

/* The gate of n values of one expert: g = act(g) * u, as the model says. */
static void moe_gate(const sift_context *ctx, int64_t n, float *g, const float *u)
{
    const sift__hparams *hp = &ctx->model->hp;
    if (hp->moe_oai) swiglu_oai(n, g, u);
    else if (hp->gelu) geglu(n, g, u, ctx->model->gelu_f16);
    else ctx->k->swiglu(n, g, u, g);
}

/* Input x (n_in F32 values) of weight i of job J, converted to the weight's activation format
 * into row `row` of that format's buffer (the buffers hold n_batch rows). */
static void mm_set_input(sift_context *ctx, mm_job *J, int i, const float *x, int row)
{
    const int64_t n_in = J->w[i]->n_in;
    const sift__act_format f = sift__act_format_of(J->w[i]->type);
    if (f == SIFT_ACT_F32 || f == SIFT_ACT_NONE) {
        J->act[i] = x;
        J->act_stride[i] = (size_t)n_in * sizeof(float);
        return;
    }
    char *dst = (char *)ctx->act[f] + (size_t)row * ctx->act_stride[f];
    ctx->k->act_convert(f, x, dst, n_in);
    J->act[i] = dst;
    J->act_stride[i] = ctx->act_stride[f];
}

/* The gate-up job of one token's experts: weights 2k and 2k + 1 are expert k's gate and up
 * (FE rows each). A chunk takes the same rows of both and gates them at once, so the gate
 * runs on every thread, not on one after the join. */
typedef struct moe_gu_job {
    mm_job mm;
    int64_t fe, units; /* rows per matrix; 16-row units per expert */
} moe_gu_job;

static void moe_gu_task(void *arg, int chunk, int n_chunks, int thread)
{
    const moe_gu_job *G = arg;
    const int K = G->mm.n_w / 2;
    const int64_t all = G->units * K, u0 = all * chunk / n_chunks, u1 = all * (chunk + 1) / n_chunks;
    for (int k = (int)(u0 / G->units); k < K && (int64_t)k * G->units < u1; k++) {
        const int64_t a = u0 > k * G->units ? (u0 - k * G->units) * 16 : 0;
        int64_t b = (u1 - k * G->units) * 16;
        if (b > G->fe) b = G->fe;
        if (a >= b) continue;
        mm_rows(&G->mm, 2 * k, a, b, thread);
        mm_rows(&G->mm, 2 * k + 1, a, b, thread);
        /* rows on 16-row boundaries: SIMD gates see the same lanes as over the whole row */
        moe_gate(G->mm.ctx, b - a, G->mm.out[2 * k] + a, G->mm.out[2 * k + 1] + a);
    }
}

/* One token's K experts (generation), as moe_experts computes them but in two fork-joins a
 * layer instead of 2K: gate, up and the gate function of every selected expert in one job
 * (moe_gu_task), their down projections (each on its own gated input) in a second. With a
 * small expert (gpt-oss's 1024 x 1024) a join per matrix, and the gate run by one thread,
 * left the second thread idle much of the time. Each row still goes through the same kernel
 * on the same converted input, so the result is the batched path's bit for bit. */
static void moe_experts_tok(sift_context *ctx, int nth, const sift__layer *L, const float *xn, float *out)
{
    const sift__hparams *hp = &ctx->model->hp;
    const int E = hp->n_embd, K = hp->n_expert_used, FE = hp->n_ff_exp;
    sift__weight g[MM_MAX / 2], u[MM_MAX / 2], d[MM_MAX / 2];
    moe_gu_job G = {.mm = {.ctx = ctx, .n_tok = 1, .n_w = 2 * K}, .fe = FE, .units = (FE + 15) / 16};
    mm_job *J = &G.mm;
    for (int k = 0; k < K; k++) {
        const int e = ctx->moe_sel[k];
        expert_views(L, e, FE, E, &g[k], &u[k], &d[k]);
        for (int j = 0; j < 2; j++) {
            const int i = 2 * k + j;
            J->w[i] = j ? &u[k] : &g[k];
            J->out[i] = (j ? ctx->moe_u : ctx->moe_g) + (size_t)k * FE;
            J->out_stride[i] = FE;
            const float *b = j ? L->b_up_exps : L->b_gate_exps;
            J->bias[i] = b ? b + (size_t)e * FE : NULL;
            J->n_rows += FE;
            /* one conversion per format: the weights that share it share the row */
            int same = -1;
            for (int p = 0; p < i && same < 0; p++)
                if (sift__act_format_of(J->w[p]->type) == sift__act_format_of(J->w[i]->type)) same = p;
            if (same >= 0) {
                J->act[i] = J->act[same];
                J->act_stride[i] = J->act_stride[same];
            } else {
                mm_set_input(ctx, J, i, xn, 0);
            }
        }
    }
    {
        const int par = 2LL * K * FE * E < SIFT_PAR_MIN_WORK ? 1 : nth;
        sift__pool_run(ctx->pool, par, mm_chunks(G.units * K, par, 1), moe_gu_task, &G);
    }
    mm_job D = {.ctx = ctx, .n_tok = 1, .n_w = K};
    for (int k = 0; k < K; k++) { /* slot k's output goes to its (token 0, slot k) row */
        D.w[k] = &d[k];
        D.out[k] = ctx->moe_out + (size_t)k * E;
        D.out_stride[k] = E;
        D.bias[k] = L->b_down_exps ? L->b_down_exps + (size_t)ctx->moe_sel[k] * E : NULL;
        D.n_rows += E;
        mm_set_input(ctx, &D, k, ctx->moe_g + (size_t)k * FE, k);
    }
    mm_run(ctx, nth, &D);
    for (int k = 0; k < K; k++) {
        const float s = L->down_exps_scale ? L->down_exps_scale[ctx->moe_sel[k]] : 1.0f, wt = ctx->moe_w[k];
        float *o = ctx->moe_out + (size_t)k * E;
        for (int i = 0; i < E; i++) o[i] = o[i] * s * wt;
    }
    memcpy(out, ctx->moe_out, (size_t)E * sizeof(float));
    for (int k = 1; k < K; k++)
        for (int i = 0; i < E; i++) out[i] += ctx->moe_out[(size_t)k * E + i];
}

/* The routed experts of n tokens (xn in, out [n][E]; out may be xn): each expert runs once
 * over the tokens routed to it (its rows read once per batch, not once per token), gated by
 * SwiGLU, gpt-oss's swiglu_oai (biased experts) or GELU (gemma4, ggml's table; its merged
 * gate-up stack read as two row ranges an expert), its output times the expert's scale
 * (gemma4) and then its weight, as ggml multiplies them; a token's output is the sum over
 * its slots in slot order. */
static void moe_experts(sift_context *ctx, int nth, int n, const sift__layer *L, const float *xn, float *out)
{
    const sift__hparams *hp = &ctx->model->hp;
    const int E = hp->n_embd, NE = hp->n_expert, K = hp->n_expert_used, FE = hp->n_ff_exp;
    if (n == 1 && 2 * K <= MM_MAX && K <= ctx->n_batch) {
        moe_experts_tok(ctx, nth, L, xn, out);
        return;
    }
    for (int e = 0; e < NE; e++) {
        int cnt = 0; /* the (token, slot) pairs routed to e */
        for (int t = 0; t < n; t++)
            for (int k = 0; k < K; k++)
                if (ctx->moe_sel[(size_t)t * K + k] == e) {
                    ctx->moe_tok[cnt] = t * K + k;
                    memcpy(ctx->moe_x + (size_t)cnt * E, xn + (size_t)t * E, (size_t)E * sizeof(float));
                    cnt++;
                }
        if (!cnt) continue;
        sift__weight g, u, d;
        expert_views(L, e, FE, E, &g, &u, &d);
        const sift__weight *w[2] = {&g, &u};
        float *o[2] = {ctx->moe_g, ctx->moe_u};
        const int64_t os[2] = {FE, FE};
        /* gpt-oss's expert biases: expert e's at e * FE (gate, up) and e * E (down) */
        const float *bias[2] = {L->b_gate_exps ? L->b_gate_exps + (size_t)e * FE : NULL,
                                L->b_up_exps ? L->b_up_exps + (size_t)e * FE : NULL};
        matmul(ctx, nth, cnt, ctx->moe_x, 2, w, o, os, bias);
        moe_gate(ctx, (int64_t)cnt * FE, ctx->moe_g, ctx->moe_u);
        matmul1b(ctx, nth, cnt, ctx->moe_g, &d, ctx->moe_o, E, L->b_down_exps ? L->b_down_exps + (size_t)e * E : NULL);
        const float s = L->down_exps_scale ? L->down_exps_scale[e] : 1.0f;
        for (int j = 0; j < cnt; j++) { /* scaled and weighted, into the (token, slot) row */
            const int ts = ctx->moe_tok[j];
            const float wt = ctx->moe_w[ts];
            const float *src = ctx->moe_o + (size_t)j * E;
            float *dst = ctx->moe_out + (size_t)ts * E;
            for (int i = 0; i < E; i++) dst[i] = src[i] * s * wt;
        }
    }
    for (int t = 0; t < n; t++) {
        float *dst = out + (size_t)t * E;
        const float *src = ctx->moe_out + (size_t)t * K * E;
        memcpy(dst, src, (size_t)E * sizeof(float));
        for (int k = 1; k < K; k++)
            for (int i = 0; i < E; i++) dst[i] += src[(size_t)k * E + i];
    }
}

/* ---- attention -------------------------------------------------------------------------------- */

typedef struct attn_job {
    sift_context *ctx;
    int layer;
    int n_tok;
} attn_job;

/* Items are (token, KV head) pairs; each does the n_gqa query heads that share the KV head:
 * scores against cells 0..pos, holes masked, softmax, weighted sum of V. */
static void attn_task(void *arg, int chunk, int n_chunks, int thread)
{
    const attn_job *J = arg;
    sift_context *ctx = J->ctx;
    const sift__kernels *k = ctx->k;
    const sift__hparams *hp = &ctx->model->hp;
    const sift__layer *L = &ctx->model->layers[J->layer];
    const int HD = L->head_dim, NKV = L->n_head_kv, G = hp->n_head / NKV, Q = hp->n_head * HD, cl = L->kv_layer;
    const size_t ld = (size_t)ctx->n_ctx_seq;
    /* gemma scales the queries instead (heads_norm_rope), then the scores by 1 */
    const float scale = hp->q_scale > 0 ? 1.0f : hp->kq_scale > 0 ? hp->kq_scale : 1.0f / sqrtf((float)HD);
    const bool swa = L->swa;
    const float *sinks = L->sinks;
    const float cap = hp->attn_softcap, inv_cap = cap > 0 ? 1.0f / cap : 0;
    float *scores = ctx->scores + (size_t)thread * G * ld;

    const int64_t n_items = (int64_t)J->n_tok * NKV;
    for (int64_t it = n_items * chunk / n_chunks; it < n_items * (chunk + 1) / n_chunks; it++) {
        const int t = (int)(it / NKV), h = (int)(it % NKV);
        const int s = ctx->tok_seq[t], end = ctx->tok_pos[t] + 1;
        /* a sliding-window layer sees cells end - n_swa .. end - 1 (llama.cpp's standard
         * window: masked where pos - cell >= n_swa); the others every cell up to its own */
        const int c0 = swa && end > hp->n_swa ? end - hp->n_swa : 0, n = end - c0;
        const kv_seq *sq = &ctx->seqs[s];
        const float *kt = kv_row(ctx, ctx->k_cache, cl, s, h) + c0;
        const float *vt = kv_row(ctx, ctx->v_cache, cl, s, h) + c0;
        const float *q = ctx->q + (size_t)t * Q + (size_t)h * G * HD;
        float *out = ctx->att + (size_t)t * Q + (size_t)h * G * HD;

        k->attn_scores(n, HD, G, q, kt, ld, scale, scores, ld);
        for (int g = 0; g < G; g++) {
            float *sg = scores + g * ld;
            if (cap > 0) /* gemma2: cap * tanh(score / cap), as three ggml ops */
                for (int c = 0; c < n; c++) sg[c] = tanhf(sg[c] * inv_cap) * cap;
            if (sq->n_holes)
                for (int c = 0; c < n; c++)
                    if (!sq->valid[c0 + c]) sg[c] = -INFINITY;
            /* gpt-oss's sink: one more logit in the row, whose probability goes nowhere (ggml:
             * the max taken over it too, its exp added to the sum) */
            const float sink = sinks ? sinks[h * G + g] : -INFINITY;
            const float mx = fmaxf(k->max(n, sg), sink);
            double sum = k->softmax_exp(n, sg, mx);
            if (sinks) sum += (double)expf(sink - mx);
            const float inv = (float)(1.0 / sum);
            for (int c = 0; c < n; c++) sg[c] *= inv;
        }
        /* out[g][d] = sum_c p_g[c] * V[d][c]: V row d as the "weight row" against the
         * probabilities of up to four heads, so each V row is read once for all of them
         * (the same sums as p_g against V rows: a column's result never depends on its
         * neighbours, and the products are the same) */
        for (int g = 0; g < G; g += SIFT_DOT_MAX_COLS) {
            const int nc = G - g < SIFT_DOT_MAX_COLS ? G - g : SIFT_DOT_MAX_COLS;
            float s4[SIFT_DOT_MAX_COLS];
            for (int d = 0; d < HD; d++) {
                k->dot[SIFT_TYPE_F32](n, vt + d * ld, scores + g * ld, ld * sizeof(float), nc, s4);
                for (int j = 0; j < nc; j++) out[(g + j) * HD + d] = s4[j];
            }
        }
    }
}

/* ---- Gated DeltaNet (qwen35's recurrent layers) ------------------------------------------------ */

static float sigmoidf_(float x) { return 1.0f / (1.0f + expf(-x)); }
static float siluf_(float x) { return x / (1.0f + expf(-x)); }

/* ggml_l2_norm: x / max(|x|, eps), the sum of squares in double. */
static void l2norm(float *x, int n, float eps)
{
    double sum = 0;
    for (int i = 0; i < n; i++) sum += (double)(x[i] * x[i]);
    const float scale = 1.0f / fmaxf(sqrtf((float)sum), eps);
    for (int i = 0; i < n; i++) x[i] *= scale;
}

/* One token of one DeltaNet layer on sequence s's state (llama.cpp's build_layer_attn_linear
 * with build_delta_net_autoregressive; its chunked prompt form is the same recurrence summed
 * in another order). qkv: the token's projection [conv_dim]; z [value_dim] is replaced by the
 * layer's output before ssm_out; b, a: its beta and alpha projections [v heads].
 *   conv: channel c = sum_k w[c][k] * in[t - (d_conv - 1) + k] over the conv state and the token,
 *         then SiLU (ggml_ssm_conv); the state keeps the last d_conv - 1 inputs
 *   q, k L2-normed per head, q / sqrt(d_state); v head h reads q/k head h mod groups (tiled)
 *   per v head, state S [v][k]: S *= exp(g); d = beta (v - S k); S += d k^T; o = S q
 *   o = rmsnorm(o) * ssm_norm * silu(z) per head
 * with beta = sigmoid(b), g = softplus(a + dt_bias) * A (A = -exp(A_log) in the file). */
static void deltanet_token(sift_context *ctx, const sift__layer *L, int s, const float *qkv, float *z, const float *b,
                           const float *a)
{
    const sift__hparams *hp = &ctx->model->hp;
    const int C = hp->ssm_conv_dim, DC = hp->ssm_d_conv, D = hp->ssm_d_state, HK = hp->ssm_n_group, HV = hp->ssm_n_v_heads;
    const size_t r = (size_t)s * hp->n_layer_rs + (size_t)L->rs_layer;
    float *cst = ctx->rs_conv + r * rs_conv_n(hp), *S0 = ctx->rs_ssm + r * rs_ssm_n(hp), *x = ctx->ssm_row;
    for (int c = 0; c < C; c++) {
        const float *w = L->ssm_conv + (size_t)c * DC;
        float sum = 0.0f;
        for (int k = 0; k < DC - 1; k++) sum += cst[(size_t)k * C + c] * w[k];
        sum += qkv[c] * w[DC - 1];
        x[c] = siluf_(sum);
    }
    if (DC > 1) { /* the state moves on by one input */
        memmove(cst, cst + C, (size_t)(DC - 2) * C * sizeof(float));
        memcpy(cst + (size_t)(DC - 2) * C, qkv, (size_t)C * sizeof(float));
    }
    float *q = x, *k = x + (size_t)HK * D, *v = x + (size_t)2 * HK * D;
    const float qs = 1.0f / sqrtf((float)D);
    for (int h = 0; h < HK; h++) {
        l2norm(q + (size_t)h * D, D, hp->rms_eps);
        l2norm(k + (size_t)h * D, D, hp->rms_eps);
        for (int i = 0; i < D; i++) q[(size_t)h * D + i] *= qs;
    }
    for (int h = 0; h < HV; h++) {
        const float *qh = q + (size_t)(h % HK) * D, *kh = k + (size_t)(h % HK) * D, *vh = v + (size_t)h * D;
        const float beta = sigmoidf_(b[h]), xa = a[h] + L->ssm_dt_bias[h];
        const float sp = xa > 20.0f ? xa : log1pf(expf(xa)); /* ggml_softplus */
        const float decay = expf(sp * L->ssm_a[h]);
        float *S = S0 + (size_t)h * D * D, *zh = z + (size_t)h * D;
        float o[SIFT_MAX_HEAD_DIM];
        for (int j = 0; j < D; j++) {
            float *Sj = S + (size_t)j * D;
            float sk = 0.0f;
            for (int i = 0; i < D; i++) {
                Sj[i] *= decay;
                sk += Sj[i] * kh[i];
            }
            const float d = (vh[j] - sk) * beta;
            float oj = 0.0f;
            for (int i = 0; i < D; i++) {
                Sj[i] += kh[i] * d;
                oj += Sj[i] * qh[i];
            }
            o[j] = oj;
        }
        rmsnorm(o, L->ssm_norm, o, D, hp->rms_eps); /* the gated norm */
        for (int j = 0; j < D; j++) zh[j] = o[j] * siluf_(zh[j]);
    }
}

/* A DeltaNet layer over the batch (its normed input in xn): the projections of every token at
 * once, then the recurrence token by token in batch order (a sequence's tokens come in
 * position order: check_batch), then ssm_out into xn. */
static void deltanet_layer(sift_context *ctx, int nth, int n, const sift__layer *L)
{
    const sift__hparams *hp = &ctx->model->hp;
    const int64_t C = hp->ssm_conv_dim, VD = (int64_t)hp->ssm_n_v_heads * hp->ssm_d_state, HV = hp->ssm_n_v_heads;
    {
        const sift__weight *w[3] = {&L->ssm_qkv, &L->ssm_z, &L->ssm_beta};
        float *out[3] = {ctx->ssm_qkv, ctx->ssm_z, ctx->ssm_b};
        const int64_t os[3] = {C, VD, HV};
        matmul(ctx, nth, n, ctx->xn, 3, w, out, os, NULL);
        matmul1(ctx, nth, n, ctx->xn, &L->ssm_alpha, ctx->ssm_a, HV);
    }
    for (int t = 0; t < n; t++)
        deltanet_token(ctx, L, ctx->tok_seq[t], ctx->ssm_qkv + (size_t)t * C, ctx->ssm_z + (size_t)t * VD, ctx->ssm_b + (size_t)t * HV,
                       ctx->ssm_a + (size_t)t * HV);
    matmul1(ctx, nth, n, ctx->ssm_z, &L->ssm_out, ctx->xn, hp->n_embd);
}

void sift__rs_clear(sift_context *ctx, int s)
{
    const sift__hparams *hp = &ctx->model->hp;
    if (!ctx->rs_conv) return;
    memset(ctx->rs_conv + (size_t)s * hp->n_layer_rs * rs_conv_n(hp), 0, (size_t)hp->n_layer_rs * rs_conv_n(hp) * sizeof(float));
    memset(ctx->rs_ssm + (size_t)s * hp->n_layer_rs * rs_ssm_n(hp), 0, (size_t)hp->n_layer_rs * rs_ssm_n(hp) * sizeof(float));
}

/* ---- context ---------------------------------------------------------------------------------- */

sift_context_params sift_context_default_params(void)
{
    return (sift_context_params){
        .n_ctx = 0, .n_batch = 512, .n_seq_max = 1, .n_threads = 4, .n_threads_batch = 0, .isa = SIFT_ISA_AUTO};
}

static int cpus_online(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > SIFT_POOL_MAX_THREADS ? SIFT_POOL_MAX_THREADS : (int)n;
}

static void *xcalloc(size_t n, size_t size, bool *fail)
{
    void *p = n ? calloc(n, size) : NULL;
    if (n && !p) *fail = true;
    return p;
}

/* The K or V cache: zeroed and touched at creation (kv_cache_zero, after the pool exists), as
 * llama.cpp clears its KV buffer when it makes a context, not page by page in the first
 * decodes: the cache is transposed, so a prompt of 32 tokens touched 2 x n_layer x n_head_kv x
 * head_dim fresh pages, one page fault per value row (a tenth of a fresh context's first
 * prompt). Aligned to 2 MiB so that, once zeroed, it can move into 2 MiB pages
 * (sift__pages_huge after kv_cache_zero; asked for before the touch, those pages made the
 * context wait 160-500 ms on a VM right after another process exited: pages.c). Freed with
 * free(). */
static float *kv_cache_alloc(size_t n, bool *fail)
{
    const size_t bytes = n * sizeof(float), huge = (size_t)2 << 20;
    void *p = NULL;
    if (!n) return NULL;
    if (posix_memalign(&p, bytes >= huge ? huge : 64, bytes) != 0) {
        *fail = true;
        return NULL;
    }
    return p;
}

/* Zeroing the cache is the context's largest cost on a VM: a fresh page is backed by the host
 * on first touch (about 1-3 ms per MiB here, the guest waiting, not computing), and the
 * cache is tens of MiB. Those waits overlap across vCPUs, so every thread of the context
 * zeroes its share: 2 MiB chunks over the K then the V cache. */
typedef struct {
    float *cache[2];
    size_t bytes;
} kv_zero_job;

#define KV_ZERO_CHUNK ((size_t)2 << 20)

static void kv_zero_task(void *arg, int chunk, int n_chunks, int thread)
{
    (void)n_chunks, (void)thread;
    const kv_zero_job *J = arg;
    const size_t per = (J->bytes + KV_ZERO_CHUNK - 1) / KV_ZERO_CHUNK; /* chunks per cache */
    const size_t c = (size_t)chunk % per, off = c * KV_ZERO_CHUNK;
    const size_t len = J->bytes - off < KV_ZERO_CHUNK ? J->bytes - off : KV_ZERO_CHUNK;
    memset((char *)J->cache[(size_t)chunk / per] + off, 0, len);
}

static void kv_cache_zero(sift_context *ctx, size_t n)
{
    kv_zero_job J = {{ctx->k_cache, ctx->v_cache}, n * sizeof(float)};
    if (!J.bytes) return;
    const size_t per = (J.bytes + KV_ZERO_CHUNK - 1) / KV_ZERO_CHUNK;
    if (2 * per > INT32_MAX) { /* (more than 2^30 MiB: one thread, whole) */
        memset(J.cache[0], 0, J.bytes), memset(J.cache[1], 0, J.bytes);
        return;
    }
    const int nth = ctx->n_threads > ctx->n_threads_batch ? ctx->n_threads : ctx->n_threads_batch;
    sift__pool_run(ctx->pool, nth, (int)(2 * per), kv_zero_task, &J);
}

void sift_context_free(sift_context *ctx)
{
    if (!ctx) return;
    sift__pool_free(ctx->pool);
    free(ctx->k_cache);
    free(ctx->v_cache);
    if (ctx->seqs)
        for (int s = 0; s < ctx->n_seq; s++) free(ctx->seqs[s].valid);
    free(ctx->seqs);
    free(ctx->x);
    free(ctx->xn);
    free(ctx->q);
    free(ctx->kk);
    free(ctx->vv);
    free(ctx->att);
    free(ctx->ffn_g);
    free(ctx->ffn_u);
    free(ctx->moe_p);
    free(ctx->moe_w);
    free(ctx->moe_x);
    free(ctx->moe_g);
    free(ctx->moe_u);
    free(ctx->moe_o);
    free(ctx->moe_out);
    free(ctx->moe_sel);
    free(ctx->moe_tok);
    free(ctx->rope);
    free(ctx->rope_swa);
    free(ctx->ple);
    free(ctx->ple_row);
    free(ctx->ple_g);
    free(ctx->qg);
    free(ctx->gate);
    free(ctx->ssm_qkv);
    free(ctx->ssm_z);
    free(ctx->ssm_b);
    free(ctx->ssm_a);
    free(ctx->ssm_row);
    free(ctx->rs_conv);
    free(ctx->rs_ssm);
    free(ctx->shexp_out);
    free(ctx->shexp_g);
    for (int f = 0; f < SIFT_ACT_COUNT; f++) free(ctx->act[f]);
    free(ctx->scores);
    free(ctx->deq);
    free(ctx->seq_next);
    free(ctx->tok_seq);
    free(ctx->tok_pos);
    free(ctx->out_ids);
    free(ctx->out_row);
    free(ctx->logits);
    free(ctx->embd_seq);
    free(ctx->embd_seq_ok);
    free(ctx->cvec);
    free(ctx);
}

/* Marks every activation format the model's weights use, with the longest input. */
static void formats_used(const sift_model *m, int64_t max_in[SIFT_ACT_COUNT])
{
    const sift__hparams *hp = &m->hp;
    for (int l = 0; l < hp->n_layer; l++) {
        const sift__layer *L = &m->layers[l];
        const sift__weight *ws[] = {&L->wq,       &L->wk,          &L->wv,        &L->wo,         &L->w_gate,
                                    &L->w_up,     &L->w_down,      &L->w_router,  &L->w_gate_exps, &L->w_up_exps,
                                    &L->w_down_exps, &L->ple_gate,  &L->ple_out,    &L->ssm_qkv,    &L->ssm_z,
                                    &L->ssm_beta, &L->ssm_alpha,   &L->ssm_out,    &L->w_shexp_gate, &L->w_gate_shexp,
                                    &L->w_up_shexp, &L->w_down_shexp};
        for (size_t i = 0; i < sizeof ws / sizeof *ws; i++) {
            const sift__act_format f = sift__act_format_of(ws[i]->type);
            if (ws[i]->n_in > max_in[f]) max_in[f] = ws[i]->n_in;
        }
    }
    const sift__act_format f = sift__act_format_of(m->output.type);
    if (m->output.n_in > max_in[f]) max_in[f] = m->output.n_in;
    const sift__act_format fp = sift__act_format_of(m->ple_proj.type);
    if (m->ple_proj.n_in > max_in[fp]) max_in[fp] = m->ple_proj.n_in;
}

/* (Re)make the pool and the per-thread scratch for max(n_threads, n_threads_batch). */
static int ensure_threads(sift_context *ctx)
{
    const int want = ctx->n_threads > ctx->n_threads_batch ? ctx->n_threads : ctx->n_threads_batch;
    if (ctx->pool && sift__pool_size(ctx->pool) == want && ctx->n_thread_slots >= want) return SIFT_OK;
    sift__pool_free(ctx->pool);
    ctx->pool = NULL;
    if (ctx->n_thread_slots < want) {
        const sift_model *m = ctx->model;
        size_t G = 1; /* the most query heads per KV head of any layer */
        for (int l = 0; l < m->hp.n_layer; l++)
            if ((size_t)(m->hp.n_head / m->layers[l].n_head_kv) > G) G = (size_t)(m->hp.n_head / m->layers[l].n_head_kv);
        float *sc = realloc(ctx->scores, (size_t)want * G * ctx->n_ctx_seq * sizeof(float));
        if (!sc) return SIFT_E_NOMEM;
        ctx->scores = sc;
        float *dq = realloc(ctx->deq, (size_t)want * ctx->deq_stride * sizeof(float));
        if (!dq) return SIFT_E_NOMEM;
        ctx->deq = dq;
        ctx->n_thread_slots = want;
    }
    ctx->pool = sift__pool_new(want);
    return ctx->pool ? SIFT_OK : SIFT_E_NOMEM;
}

sift_context *sift_context_new(const sift_model *m, sift_context_params p, sift_error *err)
{
    if (!m) {
        sift__error_set(err, SIFT_E_INVAL, "context: no model");
        return NULL;
    }
    const sift__hparams *hp = &m->hp;
    const uint32_t n_ctx = p.n_ctx ? p.n_ctx : (uint32_t)hp->n_ctx_train;
    if (p.n_seq_max < 1 || p.n_seq_max > 4096) {
        sift__error_set(err, SIFT_E_INVAL, "context: n_seq_max %u is out of range [1, 4096]", p.n_seq_max);
        return NULL;
    }
    if (n_ctx < p.n_seq_max || n_ctx > (1u << 24)) {
        sift__error_set(err, SIFT_E_INVAL, "context: n_ctx %u is out of range [n_seq_max, 2^24]", n_ctx);
        return NULL;
    }
    if (p.n_batch < 1 || p.n_batch > (1u << 20)) {
        sift__error_set(err, SIFT_E_INVAL, "context: n_batch %u is out of range [1, 2^20]", p.n_batch);
        return NULL;
    }
    if (p.n_threads < 1 || p.n_threads > SIFT_POOL_MAX_THREADS || p.n_threads_batch < 0 ||
        p.n_threads_batch > SIFT_POOL_MAX_THREADS) {
        sift__error_set(err, SIFT_E_INVAL, "context: thread counts must be in [1, %d]", SIFT_POOL_MAX_THREADS);
        return NULL;
    }
    /* auto: the tables measured fastest per weight type at load (choose.c) */
    const sift__kernels *k = p.isa == SIFT_ISA_AUTO ? &m->k_auto : sift__kernels_get(p.isa);
    if (!k) {
        sift__error_set(err, SIFT_E_UNSUPPORTED, "context: this CPU does not support %s", sift_isa_name(p.isa));
        return NULL;
    }
    sift_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx) {
        sift__error_set(err, SIFT_E_NOMEM, "context: out of memory");
        return NULL;
    }
    ctx->model = m;
    ctx->k = k;
    ctx->n_seq = (int32_t)p.n_seq_max;
    ctx->n_ctx_seq = (int32_t)(n_ctx / p.n_seq_max);
    /* llama.cpp's choice (llama_model::get_rope_factors): llama 3.1's divisors, else LongRoPE's
     * long set when a sequence may hold more than the original context, else the short set */
    const int32_t n_ctx_seq_padded = (ctx->n_ctx_seq + 255) / 256 * 256; /* llama.cpp pads it to 256 */
    ctx->rope_factors = m->rope_freqs ? m->rope_freqs : n_ctx_seq_padded > m->hp.n_ctx_orig ? m->rope_long : m->rope_short;
    ctx->rope_factors_swa = m->hp.rope_freqs_full_only ? NULL : ctx->rope_factors;
    ctx->n_ctx = ctx->n_ctx_seq * ctx->n_seq;
    ctx->n_batch = (int32_t)p.n_batch;
    const int cpus = cpus_online();
    ctx->n_threads = p.n_threads < cpus ? p.n_threads : cpus;
    ctx->n_threads_batch = p.n_threads_batch ? (p.n_threads_batch < cpus ? p.n_threads_batch : cpus) : ctx->n_threads;

    const size_t B = (size_t)ctx->n_batch, E = (size_t)hp->n_embd, HD = (size_t)hp->head_dim;
    const size_t Q = (size_t)hp->n_head * HD, KV = (size_t)hp->n_head_kv * HD, F = (size_t)hp->n_ff;
    bool fail = false;
    const size_t cache_n = (size_t)hp->n_layer_kv * ctx->n_seq * KV * ctx->n_ctx_seq;
    ctx->k_cache = kv_cache_alloc(cache_n, &fail);
    ctx->v_cache = kv_cache_alloc(cache_n, &fail);
    ctx->seqs = xcalloc((size_t)ctx->n_seq, sizeof *ctx->seqs, &fail);
    for (int s = 0; !fail && s < ctx->n_seq; s++) ctx->seqs[s].valid = xcalloc((size_t)ctx->n_ctx_seq, 1, &fail);
    ctx->x = xcalloc(B * E, sizeof(float), &fail);
    ctx->xn = xcalloc(B * E, sizeof(float), &fail);
    ctx->q = xcalloc(B * Q, sizeof(float), &fail);
    ctx->kk = xcalloc(B * KV, sizeof(float), &fail);
    ctx->vv = xcalloc(B * KV, sizeof(float), &fail);
    ctx->att = xcalloc(B * Q, sizeof(float), &fail);
    ctx->ffn_g = xcalloc(B * F, sizeof(float), &fail);
    ctx->ffn_u = xcalloc(B * F, sizeof(float), &fail);
    if (hp->n_expert > 0) {
        const size_t NE = (size_t)hp->n_expert, K = (size_t)hp->n_expert_used, FE = (size_t)hp->n_ff_exp;
        ctx->moe_p = xcalloc(B * NE, sizeof(float), &fail);
        ctx->moe_w = xcalloc(B * K, sizeof(float), &fail);
        ctx->moe_sel = xcalloc(B * K, sizeof(int32_t), &fail);
        ctx->moe_tok = xcalloc(B * K, sizeof(int32_t), &fail);
        ctx->moe_x = xcalloc(B * E, sizeof(float), &fail);
        ctx->moe_g = xcalloc(B * FE, sizeof(float), &fail);
        ctx->moe_u = xcalloc(B * FE, sizeof(float), &fail);
        ctx->moe_o = xcalloc(B * E, sizeof(float), &fail);
        ctx->moe_out = xcalloc(B * K * E, sizeof(float), &fail);
    }
    ctx->rope = xcalloc(B * (size_t)(hp->n_rot ? hp->n_rot : 2), sizeof(float), &fail);
    if (hp->rope_freq_base_swa != hp->rope_freq_base || hp->rope_freq_scale_swa != hp->rope_freq_scale ||
        hp->n_rot_swa != hp->n_rot || ctx->rope_factors_swa != ctx->rope_factors)
        ctx->rope_swa = xcalloc(B * (size_t)(hp->n_rot_swa ? hp->n_rot_swa : 2), sizeof(float), &fail);
    if (hp->n_embd_per_layer > 0) {
        const size_t NLPL = (size_t)hp->n_layer * (size_t)hp->n_embd_per_layer;
        ctx->ple = xcalloc(B * NLPL, sizeof(float), &fail);
        ctx->ple_row = xcalloc(NLPL, sizeof(float), &fail);
        ctx->ple_g = xcalloc(B * (size_t)hp->n_embd_per_layer, sizeof(float), &fail);
    }
    bool gated = false;
    for (int l = 0; l < hp->n_layer; l++) gated |= m->layers[l].attn_gated;
    if (gated) {
        ctx->qg = xcalloc(B * 2 * Q, sizeof(float), &fail);
        ctx->gate = xcalloc(B * Q, sizeof(float), &fail);
    }
    if (hp->n_layer_rs > 0) { /* qwen35: the DeltaNet scratch and every sequence's recurrent state (zero: empty) */
        const size_t C = (size_t)hp->ssm_conv_dim, HV = (size_t)hp->ssm_n_v_heads, VD = HV * (size_t)hp->ssm_d_state;
        ctx->ssm_qkv = xcalloc(B * C, sizeof(float), &fail);
        ctx->ssm_z = xcalloc(B * VD, sizeof(float), &fail);
        ctx->ssm_b = xcalloc(B * HV, sizeof(float), &fail);
        ctx->ssm_a = xcalloc(B * HV, sizeof(float), &fail);
        ctx->ssm_row = xcalloc(C, sizeof(float), &fail);
        const size_t per_seq = (size_t)hp->n_layer_rs * (size_t)ctx->n_seq;
        ctx->rs_conv = xcalloc(per_seq * rs_conv_n(hp) + 1, sizeof(float), &fail);
        ctx->rs_ssm = xcalloc(per_seq * rs_ssm_n(hp), sizeof(float), &fail);
        if (hp->n_ff_shexp > 0) {
            ctx->shexp_out = xcalloc(B * E, sizeof(float), &fail);
            ctx->shexp_g = xcalloc(B, sizeof(float), &fail);
        }
    }
    ctx->seq_next = xcalloc((size_t)ctx->n_seq, sizeof(int32_t), &fail);
    ctx->tok_seq = xcalloc(B, sizeof(int32_t), &fail);
    ctx->tok_pos = xcalloc(B, sizeof(int32_t), &fail);
    ctx->out_ids = xcalloc(B, sizeof(int32_t), &fail);
    ctx->out_row = xcalloc(B, sizeof(int32_t), &fail);
    int64_t max_in[SIFT_ACT_COUNT] = {0};
    formats_used(m, max_in);
    for (int f = SIFT_ACT_F16; f < SIFT_ACT_COUNT; f++) {
        if (!max_in[f]) continue;
        ctx->act_stride[f] = sift__act_row_bytes((sift__act_format)f, max_in[f]);
        ctx->act[f] = xcalloc(B, ctx->act_stride[f], &fail);
    }
    ctx->deq_stride = max_in[SIFT_ACT_NONE] ? max_in[SIFT_ACT_NONE] : 1;
    /* logits for up to n_seq_max rows now; more when a batch asks for more */
    ctx->logits_rows = ctx->n_seq < ctx->n_batch ? ctx->n_seq : ctx->n_batch;
    ctx->logits = xcalloc((size_t)ctx->logits_rows * hp->n_vocab, sizeof(float), &fail);
    ctx->embd_seq = xcalloc((size_t)ctx->n_seq * E, sizeof(float), &fail);
    ctx->embd_seq_ok = xcalloc((size_t)ctx->n_seq, 1, &fail);
    if (fail || ensure_threads(ctx) != SIFT_OK) {
        sift_context_free(ctx);
        sift__error_set(err, SIFT_E_NOMEM, "context: out of memory (n_ctx %u, n_batch %u)", n_ctx, p.n_batch);
        return NULL;
    }
    kv_cache_zero(ctx, cache_n);
    sift__pages_huge(ctx->k_cache, cache_n * sizeof(float)); /* populated: 2 MiB pages from now on */
    sift__pages_huge(ctx->v_cache, cache_n * sizeof(float));
    return ctx;
}

const sift_model *sift_context_model(const sift_context *ctx) { return ctx ? ctx->model : NULL; }
uint32_t sift_n_ctx(const sift_context *ctx) { return ctx ? (uint32_t)ctx->n_ctx : 0; }
uint32_t sift_n_ctx_seq(const sift_context *ctx) { return ctx ? (uint32_t)ctx->n_ctx_seq : 0; }
uint32_t sift_n_batch(const sift_context *ctx) { return ctx ? (uint32_t)ctx->n_batch : 0; }
uint32_t sift_n_seq_max(const sift_context *ctx) { return ctx ? (uint32_t)ctx->n_seq : 0; }
sift_isa sift_context_isa(const sift_context *ctx) { return ctx ? ctx->k->isa : SIFT_ISA_AUTO; }

sift_status sift_set_n_threads(sift_context *ctx, int32_t n_threads, int32_t n_threads_batch)
{
    if (!ctx || n_threads < 1 || n_threads > SIFT_POOL_MAX_THREADS || n_threads_batch < 1 ||
        n_threads_batch > SIFT_POOL_MAX_THREADS)
        return SIFT_E_INVAL;
    const int cpus = cpus_online();
    ctx->n_threads = n_threads < cpus ? n_threads : cpus;
    ctx->n_threads_batch = n_threads_batch < cpus ? n_threads_batch : cpus;
    return SIFT_OK;
}

/* ---- decode ----------------------------------------------------------------------------------- */

/* Check the batch against the cache and fill tok_seq / tok_pos / out_ids; touches nothing
 * else, so an error leaves the context as it was. */
static int check_batch(sift_context *ctx, const sift_batch *b, sift_error *err)
{
    const int32_t n = b->n_tokens;
    if (n < 1 || n > ctx->n_batch)
        return sift__error_set(err, SIFT_E_INVAL, "decode: batch of %d tokens (n_batch is %d)", n, ctx->n_batch);
    if (!b->token) return sift__error_set(err, SIFT_E_INVAL, "decode: batch has no tokens array");
    const int32_t n_vocab = ctx->model->hp.n_vocab;
    /* next[s]: the first position sequence s may take next (its n, then past each token) */
    int32_t *next = ctx->seq_next;
    for (int s = 0; s < ctx->n_seq; s++) next[s] = ctx->seqs[s].n;
    int32_t n_out = 0;
    const bool pooled = ctx->embeddings && ctx->pooling != SIFT_POOLING_TYPE_NONE; /* every token, no logits */
    for (int32_t i = 0; i < n; i++) {
        if (b->token[i] < 0 || b->token[i] >= n_vocab)
            return sift__error_set(err, SIFT_E_INVAL, "decode: token %d at batch index %d is not in [0, %d)", b->token[i], i,
                                  n_vocab);
        const int32_t nsid = b->n_seq_id ? b->n_seq_id[i] : 1;
        if (nsid < 1 || (b->n_seq_id && !b->seq_id) || (b->seq_id && !b->seq_id[i]))
            return sift__error_set(err, SIFT_E_INVAL, "decode: batch index %d has %d sequence ids", i, b->seq_id ? nsid : 0);
        if (nsid > 1 && ctx->rs_conv) /* one token, one recurrent state: decode it per sequence, or sift_kv_seq_cp after */
            return sift__error_set(err, SIFT_E_UNSUPPORTED,
                                   "decode: batch index %d is in %d sequences; a recurrent model (%s) takes a token in one "
                                   "sequence only (copy a whole sequence with sift_kv_seq_cp)", i, nsid, ctx->model->hp.arch);
        for (int32_t j = 0; j < nsid; j++) {
            const int32_t s = b->seq_id ? b->seq_id[i][j] : 0;
            if (s < 0 || s >= ctx->n_seq)
                return sift__error_set(err, SIFT_E_INVAL, "decode: sequence id %d at batch index %d is not in [0, %d)", s, i,
                                      ctx->n_seq);
            for (int32_t jj = 0; jj < j; jj++)
                if (b->seq_id[i][jj] == s)
                    return sift__error_set(err, SIFT_E_INVAL, "decode: sequence id %d listed twice at batch index %d", s, i);
        }
        const int32_t s0 = b->seq_id ? b->seq_id[i][0] : 0;
        const int32_t pos = b->pos ? b->pos[i] : next[s0];
        if (pos < 0) return sift__error_set(err, SIFT_E_INVAL, "decode: position %d at batch index %d is negative", pos, i);
        for (int32_t j = 0; j < nsid; j++) {
            const int32_t s = b->seq_id ? b->seq_id[i][j] : 0;
            if (pos >= ctx->n_ctx_seq)
                return sift__error_set(err, SIFT_E_STATE,
                                      "decode: sequence %d is full: position %d needs more than its %d cells (n_ctx / n_seq_max)",
                                      s, pos, ctx->n_ctx_seq);
            if (pos < next[s])
                return sift__error_set(err, SIFT_E_STATE,
                                      "decode: sequence %d: position %d at batch index %d is not after its last position %d "
                                      "(remove positions with sift_kv_seq_rm to rewrite them)",
                                      s, pos, i, next[s] - 1);
            next[s] = pos + 1;
        }
        ctx->tok_seq[i] = s0;
        ctx->tok_pos[i] = pos;
        const bool want = pooled || (b->logits ? b->logits[i] != 0 : i == n - 1);
        if (want) ctx->out_ids[n_out++] = i;
    }
    if (!pooled && n_out > ctx->logits_rows) {
        float *lg = realloc(ctx->logits, (size_t)n_out * ctx->model->hp.n_vocab * sizeof(float));
        if (!lg) return sift__error_set(err, SIFT_E_NOMEM, "decode: out of memory for %d rows of logits", n_out);
        ctx->logits = lg;
        ctx->logits_rows = n_out;
    }
    if (ensure_threads(ctx) != SIFT_OK) return sift__error_set(err, SIFT_E_NOMEM, "decode: cannot start threads");
    ctx->n_outputs = n_out;
    return SIFT_OK;
}

/* Mark the batch's cells valid and move each sequence's end (after the check passed). */
static void commit_cells(sift_context *ctx, const sift_batch *b)
{
    for (int32_t i = 0; i < b->n_tokens; i++) {
        const int32_t nsid = b->n_seq_id ? b->n_seq_id[i] : 1;
        for (int32_t j = 0; j < nsid; j++) {
            kv_seq *sq = &ctx->seqs[b->seq_id ? b->seq_id[i][j] : 0];
            const int32_t pos = ctx->tok_pos[i];
            /* skipped positions become holes */
            if (pos > sq->n) sq->n_holes += pos - sq->n;
            sq->valid[pos] = 1;
            sq->n = pos + 1;
        }
    }
}

/* k, v of every batch token -> the cache of each of its sequences. The cache is transposed
 * (a row per dimension, a cell per position), so the loop runs over dimensions outside and
 * tokens inside: a batch's consecutive positions then fill consecutive cells of one row (a
 * cache line per 16 tokens) instead of each token writing one float into head_dim rows
 * n_ctx_seq floats apart (a cache line and, at 8 KB strides, a page per value: store_kv was
 * 12% of a 32-token prompt). */
static void store_kv(sift_context *ctx, const sift_batch *b, int l)
{
    const sift__layer *L = &ctx->model->layers[l];
    const int HD = L->head_dim, KV = L->n_head_kv * HD, cl = L->kv_layer; /* its own cache layer */
    const size_t ld = (size_t)ctx->n_ctx_seq;
    for (int h = 0; h < L->n_head_kv; h++)
        for (int d = 0; d < HD; d++)
            for (int32_t i = 0; i < b->n_tokens; i++) {
                const int32_t nsid = b->n_seq_id ? b->n_seq_id[i] : 1, pos = ctx->tok_pos[i];
                const float kk = ctx->kk[(size_t)i * KV + h * HD + d], vv = ctx->vv[(size_t)i * KV + h * HD + d];
                for (int32_t j = 0; j < nsid; j++) {
                    const int s = b->seq_id ? b->seq_id[i][j] : 0;
                    kv_row(ctx, ctx->k_cache, cl, s, h)[d * ld + pos] = kk;
                    kv_row(ctx, ctx->v_cache, cl, s, h)[d * ld + pos] = vv;
                }
            }
}

/* Per-head RMSNorm (qwen3, gemma3) and RoPE (rope NULL: none) of n vectors of n_heads heads
 * of layer L's size each, then a scale (gemma's queries; 0: none). */
static void heads_norm_rope(sift_context *ctx, const sift__layer *L, float *v, int n, int n_heads, const float *norm,
                            const float *rope, float scale)
{
    const sift__hparams *hp = &ctx->model->hp;
    const int HD = L->head_dim, n_rot = L->n_rot;
    for (int t = 0; t < n; t++)
        for (int h = 0; h < n_heads; h++) {
            float *x = v + ((size_t)t * n_heads + h) * HD;
            if (norm) rmsnorm(x, norm, x, HD, hp->rms_eps);
            if (n_rot && rope) sift__rope_apply(x, rope + (size_t)t * n_rot, n_rot, hp->rope_neox);
            if (scale > 0)
                for (int d = 0; d < HD; d++) x[d] *= scale;
        }
}

/* Keep only the output tokens' rows (out_ids ascending, so in place is safe). */
static void compact_rows(float *a, int64_t width, const int32_t *ids, int n)
{
    for (int j = 0; j < n; j++)
        if (ids[j] != j) memcpy(a + (size_t)j * width, a + (size_t)ids[j] * width, (size_t)width * sizeof(float));
}

static void compact_outputs(sift_context *ctx)
{
    const sift__hparams *hp = &ctx->model->hp;
    const int n = ctx->n_outputs;
    compact_rows(ctx->x, hp->n_embd, ctx->out_ids, n);
    compact_rows(ctx->xn, hp->n_embd, ctx->out_ids, n);
    compact_rows(ctx->rope, hp->n_rot, ctx->out_ids, n);
    if (ctx->rope_swa) compact_rows(ctx->rope_swa, hp->n_rot_swa, ctx->out_ids, n);
    if (ctx->ple) compact_rows(ctx->ple, (int64_t)hp->n_layer * hp->n_embd_per_layer, ctx->out_ids, n);
    for (int j = 0; j < n; j++) {
        ctx->tok_seq[j] = ctx->tok_seq[ctx->out_ids[j]];
        ctx->tok_pos[j] = ctx->tok_pos[ctx->out_ids[j]];
    }
}

static void add_rows(float *x, const float *y, size_t n)
{
    for (size_t i = 0; i < n; i++) x[i] += y[i];
}

static void scale_rows(float *x, size_t n, float s)
{
    for (size_t i = 0; i < n; i++) x[i] *= s;
}

/* A gated feed-forward of n tokens of width F (in, out [n][E]; out may be in): gate and up,
 * GELU (gemma) or SwiGLU, down. */
static void gated_ffn(sift_context *ctx, int nth, int n, const sift__weight *gate, const sift__weight *up,
                      const sift__weight *down, int64_t F, const float *in, float *out)
{
    const sift__weight *w[2] = {gate, up};
    float *o[2] = {ctx->ffn_g, ctx->ffn_u};
    const int64_t os[2] = {F, F};
    matmul(ctx, nth, n, in, 2, w, o, os, NULL);
    if (ctx->model->hp.gelu) geglu((int64_t)n * F, ctx->ffn_g, ctx->ffn_u, ctx->model->gelu_f16);
    else ctx->k->swiglu((int64_t)n * F, ctx->ffn_g, ctx->ffn_u, ctx->ffn_g);
    matmul1(ctx, nth, n, ctx->ffn_g, down, out, ctx->model->hp.n_embd);
}

/* The layer's dense feed-forward. */
static void dense_ffn(sift_context *ctx, int nth, int n, const sift__layer *L, const float *in, float *out)
{
    gated_ffn(ctx, nth, n, &L->w_gate, &L->w_up, &L->w_down, L->n_ff, in, out);
}

/* qwen35moe's shared expert of the normed input xn, before the routed experts overwrite it:
 * shexp_out = SwiGLU-FFN(xn), shexp_g = xn . ffn_gate_inp_shexp (added by shexp_add). */
static void shexp_ffn(sift_context *ctx, int nth, int n, const sift__layer *L, const float *xn)
{
    gated_ffn(ctx, nth, n, &L->w_gate_shexp, &L->w_up_shexp, &L->w_down_shexp, ctx->model->hp.n_ff_shexp, xn, ctx->shexp_out);
    matmul1(ctx, nth, n, xn, &L->w_shexp_gate, ctx->shexp_g, 1);
}

/* out (the routed experts' sum) += shared expert x sigmoid(its gate), as llama.cpp's qwen35moe graph. */
static void shexp_add(sift_context *ctx, int n, float *out)
{
    const int E = ctx->model->hp.n_embd;
    for (int t = 0; t < n; t++) {
        const float g = 1.0f / (1.0f + expf(-ctx->shexp_g[t]));
        for (int i = 0; i < E; i++) out[(size_t)t * E + i] += ctx->shexp_out[(size_t)t * E + i] * g;
    }
}

/* gemma4's feed-forward with experts (26B-A4B; llama.cpp's gemma4 graph), of the hidden state
 * x after attention, into out: the dense FFN of ffn_norm(x) normed by post_ffw_norm_1, plus
 * the experts of pre_ffw_norm_2(x), routed on rmsnorm(x) (no weight) / sqrt(n_embd) *
 * ffn_gate_inp.scale, normed by post_ffw_norm_2 (ffn_post_norm and the residual follow, as in
 * every gemma layer). moe_x holds the router's input, then (the experts done with it) the
 * dense branch's; the dense output goes to moe_o. */
static void gemma4_moe_ffn(sift_context *ctx, int nth, int n, const sift__layer *L, float *out)
{
    const sift__hparams *hp = &ctx->model->hp;
    const int E = hp->n_embd;
    const float inv = 1.0f / sqrtf((float)E);
    for (int t = 0; t < n; t++) {
        float *r = ctx->moe_x + (size_t)t * E;
        rmsnorm(ctx->x + (size_t)t * E, NULL, r, E, hp->rms_eps);
        for (int i = 0; i < E; i++) r[i] = r[i] * inv * L->router_scale[i]; /* ggml_scale, then ggml_mul */
    }
    moe_route(ctx, nth, n, L, ctx->moe_x);
    for (int t = 0; t < n; t++) rmsnorm(ctx->x + (size_t)t * E, L->ffn_pre_norm_2, out + (size_t)t * E, E, hp->rms_eps);
    moe_experts(ctx, nth, n, L, out, out);
    for (int t = 0; t < n; t++) rmsnorm(out + (size_t)t * E, L->ffn_post_norm_2, out + (size_t)t * E, E, hp->rms_eps);
    for (int t = 0; t < n; t++) rmsnorm(ctx->x + (size_t)t * E, L->ffn_norm, ctx->moe_x + (size_t)t * E, E, hp->rms_eps);
    dense_ffn(ctx, nth, n, L, ctx->moe_x, ctx->moe_o);
    for (int t = 0; t < n; t++) rmsnorm(ctx->moe_o + (size_t)t * E, L->ffn_post_norm_1, ctx->moe_o + (size_t)t * E, E, hp->rms_eps);
    add_rows(out, ctx->moe_o, (size_t)n * E);
}

/* gemma4's per-layer inputs of every token (llama.cpp's build_inp_per_layer and
 * project_per_layer_inputs): the token's per-layer embedding row times sqrt(n_pl), plus the
 * scaled token embedding x projected to n_layer x n_pl, times 1/sqrt(n_embd) and RMS-normed
 * per layer; the sum times 1/sqrt(2). ctx->ple[t][l * n_pl ..] is layer l's. */
static void per_layer_inputs(sift_context *ctx, const sift_batch *b, int nth)
{
    const sift_model *m = ctx->model;
    const sift__hparams *hp = &m->hp;
    const int n = b->n_tokens, NPL = hp->n_embd_per_layer;
    const int64_t NLPL = (int64_t)hp->n_layer * NPL;
    const float proj_scale = 1.0f / sqrtf((float)hp->n_embd), embd_scale = sqrtf((float)NPL), inp_scale = 1.0f / sqrtf(2.0f);
    matmul1(ctx, nth, n, ctx->x, &m->ple_proj, ctx->ple, NLPL);
    const sift__weight *pe = &m->ple_embd;
    for (int t = 0; t < n; t++) {
        float *p = ctx->ple + t * NLPL;
        sift__type_traits_get(pe->type)->dequantize((const char *)pe->data + (size_t)b->token[t] * pe->row_bytes, ctx->ple_row, NLPL);
        for (int64_t i = 0; i < NLPL; i++) p[i] *= proj_scale;
        for (int l = 0; l < hp->n_layer; l++) rmsnorm(p + (size_t)l * NPL, m->ple_proj_norm, p + (size_t)l * NPL, NPL, hp->rms_eps);
        for (int64_t i = 0; i < NLPL; i++) p[i] = (p[i] + ctx->ple_row[i] * embd_scale) * inp_scale;
    }
}

static void run_layers(sift_context *ctx, const sift_batch *b, int nth)
{
    const sift_model *m = ctx->model;
    const sift__hparams *hp = &m->hp;
    const int E = hp->n_embd;
    int n = b->n_tokens;

    for (int t = 0; t < n; t++) {
        const sift__weight *te = &m->tok_embd;
        float *xt = ctx->x + (size_t)t * E;
        sift__type_traits_get(te->type)->dequantize((const char *)te->data + (size_t)b->token[t] * te->row_bytes, xt, E);
        if (hp->embd_mult != 0)
            for (int i = 0; i < E; i++) xt[i] *= hp->embd_mult;
        if (hp->n_rot) sift__rope_cache(m, ctx->rope_factors, (float)ctx->tok_pos[t], false, true, ctx->rope + (size_t)t * hp->n_rot);
        if (hp->n_rot_swa && ctx->rope_swa)
            sift__rope_cache(m, ctx->rope_factors_swa, (float)ctx->tok_pos[t], true, true, ctx->rope_swa + (size_t)t * hp->n_rot_swa);
    }

    if (ctx->ple) per_layer_inputs(ctx, b, nth);

    for (int l = 0; l < hp->n_layer; l++) {
        const sift__layer *L = &m->layers[l];
        const bool last = l == hp->n_layer - 1;
        const int HD = L->head_dim, Q = hp->n_head * HD, KV = L->n_head_kv * HD;
        for (int t = 0; t < n; t++) rmsnorm(ctx->x + (size_t)t * E, L->attn_norm, ctx->xn + (size_t)t * E, E, hp->rms_eps);

        /* keys and values of every token (they go into the cache); queries of the tokens
         * that go on: all of them, except in the last layer. A layer that shares an earlier
         * layer's K/V (gemma4) computes queries only. */
        const bool prune = last && ctx->n_outputs < n;
        if (L->recurrent) { /* qwen35's DeltaNet: every token runs (the state needs them all), then the outputs go on */
            deltanet_layer(ctx, nth, n, L);
            if (prune) {
                compact_outputs(ctx);
                n = ctx->n_outputs;
            }
            if (n == 0) break;
            goto mixed;
        }
        const float *rope = L->nope ? NULL : L->swa && ctx->rope_swa ? ctx->rope_swa : ctx->rope;
        /* qwen35's gated attention: wq gives each head's query and gate side by side (qg) */
        float *const qout = L->attn_gated ? ctx->qg : ctx->q;
        const int64_t QO = L->attn_gated ? 2 * (int64_t)Q : Q;
        if (L->own_kv) {
            const sift__weight *w[3] = {&L->wk, &L->wv, &L->wq};
            float *out[3] = {ctx->kk, ctx->vv, qout};
            const int64_t os[3] = {KV, KV, QO};
            const float *bias[3] = {L->bk, L->bv, L->bq};
            if (L->v_is_k) { /* V is K's projection: one product, copied before K is normed */
                w[1] = &L->wq, out[1] = ctx->q, bias[1] = L->bq;
                matmul(ctx, nth, n, ctx->xn, prune ? 1 : 2, w, out, os + 1, bias);
                memcpy(ctx->vv, ctx->kk, (size_t)n * KV * sizeof(float));
            } else {
                matmul(ctx, nth, n, ctx->xn, prune ? 2 : 3, w, out, os, bias);
            }
            heads_norm_rope(ctx, L, ctx->kk, n, L->n_head_kv, L->k_norm, rope, 0);
            if (L->v_norm)
                for (int i = 0; i < n * L->n_head_kv; i++) rmsnorm(ctx->vv + (size_t)i * HD, NULL, ctx->vv + (size_t)i * HD, HD, hp->rms_eps);
            store_kv(ctx, b, l);
        } else if (!prune) {
            matmul1b(ctx, nth, n, ctx->xn, &L->wq, qout, QO, L->bq);
        }
        if (prune) {
            compact_outputs(ctx);
            n = ctx->n_outputs;
            const sift__weight *w[1] = {&L->wq};
            float *out[1] = {qout};
            const int64_t os[1] = {QO};
            const float *bias[1] = {L->bq};
            matmul(ctx, nth, n, ctx->xn, 1, w, out, os, bias);
        }
        if (n == 0) break;
        if (L->attn_gated) /* head h: query qg[2h HD ..], gate qg[(2h + 1) HD ..] */
            for (int t = 0; t < n; t++)
                for (int h = 0; h < hp->n_head; h++) {
                    const float *src = ctx->qg + (size_t)t * 2 * Q + (size_t)h * 2 * HD;
                    memcpy(ctx->q + (size_t)t * Q + (size_t)h * HD, src, (size_t)HD * sizeof(float));
                    memcpy(ctx->gate + (size_t)t * Q + (size_t)h * HD, src + HD, (size_t)HD * sizeof(float));
                }
        heads_norm_rope(ctx, L, ctx->q, n, hp->n_head, L->q_norm, rope, hp->q_scale);

        attn_job aj = {ctx, l, n};
        {
            int64_t work = 0; /* multiply-adds: two passes over cells 0..pos per head */
            for (int t = 0; t < n; t++) work += 2LL * (ctx->tok_pos[t] + 1) * Q;
            const int items = n * hp->n_head_kv, par = work < SIFT_PAR_MIN_WORK ? 1 : nth;
            sift__pool_run(ctx->pool, par, items < 4 * par ? items : 4 * par, attn_task, &aj);
        }
        if (L->attn_gated)
            for (size_t i = 0; i < (size_t)n * Q; i++) ctx->att[i] *= sigmoidf_(ctx->gate[i]);
        matmul1b(ctx, nth, n, ctx->att, &L->wo, ctx->xn, E, L->bo); /* xn is free again: reuse it */
    mixed:
        if (L->attn_post_norm)
            for (int t = 0; t < n; t++) rmsnorm(ctx->xn + (size_t)t * E, L->attn_post_norm, ctx->xn + (size_t)t * E, E, hp->rms_eps);
        if (hp->residual_scale != 0) scale_rows(ctx->xn, (size_t)n * E, hp->residual_scale);
        add_rows(ctx->x, ctx->xn, (size_t)n * E);

        if (L->router_scale) {
            gemma4_moe_ffn(ctx, nth, n, L, ctx->xn);
        } else {
            for (int t = 0; t < n; t++) rmsnorm(ctx->x + (size_t)t * E, L->ffn_norm, ctx->xn + (size_t)t * E, E, hp->rms_eps);
            if (L->w_router.data) {
                if (L->w_shexp_gate.data) shexp_ffn(ctx, nth, n, L, ctx->xn);
                moe_route(ctx, nth, n, L, ctx->xn);
                moe_experts(ctx, nth, n, L, ctx->xn, ctx->xn); /* the inputs are gathered before out is written */
                if (L->w_shexp_gate.data) shexp_add(ctx, n, ctx->xn);
            } else {
                dense_ffn(ctx, nth, n, L, ctx->xn, ctx->xn);
            }
        }
        if (L->ffn_post_norm)
            for (int t = 0; t < n; t++) rmsnorm(ctx->xn + (size_t)t * E, L->ffn_post_norm, ctx->xn + (size_t)t * E, E, hp->rms_eps);
        if (hp->residual_scale != 0) scale_rows(ctx->xn, (size_t)n * E, hp->residual_scale);
        add_rows(ctx->x, ctx->xn, (size_t)n * E);
        if (L->ple_gate.data) { /* gemma4: x += norm((gelu(x Wgate) * the layer's input) Wproj) */
            const int NPL = hp->n_embd_per_layer;
            const size_t NLPL = (size_t)hp->n_layer * NPL;
            matmul1(ctx, nth, n, ctx->x, &L->ple_gate, ctx->ple_g, NPL);
            for (int t = 0; t < n; t++) geglu(NPL, ctx->ple_g + (size_t)t * NPL, ctx->ple + t * NLPL + (size_t)l * NPL, m->gelu_f16);
            matmul1(ctx, nth, n, ctx->ple_g, &L->ple_out, ctx->xn, E);
            for (int t = 0; t < n; t++) rmsnorm(ctx->xn + (size_t)t * E, L->ple_post_norm, ctx->xn + (size_t)t * E, E, hp->rms_eps);
            add_rows(ctx->x, ctx->xn, (size_t)n * E);
        }
        if (L->out_scale != 0) scale_rows(ctx->x, (size_t)n * E, L->out_scale); /* gemma4's layer_output_scale */
        if (ctx->cvec && l >= ctx->cvec_l0 && l <= ctx->cvec_l1) /* control vector (cvec.c) */
            for (int t = 0; t < n; t++) add_rows(ctx->x + (size_t)t * E, ctx->cvec + (size_t)l * E, (size_t)E);
    }

    /* n == n_outputs here (the last layer kept only them) */
    for (int t = 0; t < n; t++) rmsnorm(ctx->x + (size_t)t * E, m->output_norm, ctx->xn + (size_t)t * E, E, hp->rms_eps);
    if (!ctx->embeddings || ctx->pooling == SIFT_POOLING_TYPE_NONE) {
        matmul1(ctx, nth, n, ctx->xn, &m->output, ctx->logits, hp->n_vocab);
        if (hp->logit_scale != 0) scale_rows(ctx->logits, (size_t)n * hp->n_vocab, 1.0f / hp->logit_scale); /* granite */
        if (hp->final_softcap > 0) { /* gemma2: cap * tanh(logit / cap) */
            const float cap = hp->final_softcap, inv = 1.0f / cap;
            for (size_t i = 0; i < (size_t)n * hp->n_vocab; i++) ctx->logits[i] = tanhf(ctx->logits[i] * inv) * cap;
        }
    }
}

sift_status sift_decode(sift_context *ctx, const sift_batch *batch, sift_error *err)
{
    if (!ctx || !batch) return sift__error_set(err, SIFT_E_INVAL, "decode: NULL argument");
    const int64_t t0 = sift__now_ns();
    int rc = check_batch(ctx, batch, err);
    if (rc != SIFT_OK) return rc;
    const int n = batch->n_tokens;
    for (int32_t i = 0; i < ctx->n_batch_last; i++) ctx->out_row[i] = -1;
    for (int32_t i = 0; i < n; i++) ctx->out_row[i] = -1;
    for (int32_t j = 0; j < ctx->n_outputs; j++) ctx->out_row[ctx->out_ids[j]] = j;
    ctx->n_batch_last = n;
    commit_cells(ctx, batch);
    run_layers(ctx, batch, n == 1 ? ctx->n_threads : ctx->n_threads_batch);
    ctx->embd_valid = ctx->embeddings;
    if (ctx->embeddings) sift__embd_pool(ctx);

    const double ms = (double)(sift__now_ns() - t0) / 1e6;
    if (n > 1) {
        ctx->perf.t_prompt_ms += ms;
        ctx->perf.n_prompt += n;
    } else {
        ctx->perf.t_eval_ms += ms;
        ctx->perf.n_eval += n;
    }
    ctx->perf.n_decode++;
    return SIFT_OK;
}

int32_t sift__output_row(const sift_context *ctx, int32_t i)
{
    if (i < 0) return ctx->n_outputs + i >= 0 ? ctx->n_outputs + i : -1;
    return i < ctx->n_batch_last ? ctx->out_row[i] : -1;
}

float *sift_get_logits_ith(sift_context *ctx, int32_t i)
{
    if (!ctx || (ctx->embd_valid && ctx->pooling != SIFT_POOLING_TYPE_NONE)) return NULL; /* pooled: no head ran */
    const int32_t row = sift__output_row(ctx, i);
    return row < 0 ? NULL : ctx->logits + (size_t)row * ctx->model->hp.n_vocab;
}

float *sift_get_logits(sift_context *ctx)
{
    if (ctx && ctx->embd_valid && ctx->pooling != SIFT_POOLING_TYPE_NONE) return NULL;
    return ctx && ctx->n_outputs ? ctx->logits : NULL;
}

int32_t sift_n_outputs(const sift_context *ctx)
{
    return ctx ? ctx->n_outputs : 0;
}

sift_context_perf sift_context_get_perf(const sift_context *ctx)
{
    return ctx ? ctx->perf : (sift_context_perf){0};
}

void sift_context_perf_reset(sift_context *ctx)
{
    if (ctx) memset(&ctx->perf, 0, sizeof ctx->perf);
}
