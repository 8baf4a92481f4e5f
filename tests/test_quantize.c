/*
 * test_quantize.c - sift_model_quantize and the quantized forward paths.
 *
 * 1. stories260K (F32) quantized to Q8_0, Q4_0, Q4_K and Q6_K. Its rows are 64 wide
 *    (ffn_down: 172), so the K-quants take llama.cpp's 32-block fallbacks (Q4_K -> Q5_0,
 *    Q6_K -> Q8_0), the output head gets Q6_K -> Q8_0, and ffn_down stays F32; the test
 *    checks every tensor's type. Then, on the five reference prompts, against the F32
 *    model: max |delta| of the prompt logits, greedy ids in common with llama.cpp's 64, and
 *    the perplexity of llama.cpp's own greedy story under each model ("sensible text": a
 *    quantized model must find the F32 model's story about as likely as the F32 model
 *    does). Stated tolerances (logits range about -20..20): Q8_0 (and Q6_K, which is Q8_0
 *    here) rms |delta| over all prompt logits <= 0.12, perplexity within 1%, >= 98% of the
 *    greedy steps agreeing; Q4_K (Q5_0 here) 0.6, 3%, 90%; Q4_0 1.0, 15%, 80%.
 * 2. A self-made llama with 256-wide rows (random weights, stories260K's vocabulary), so
 *    that Q4_K and Q6_K themselves are used end to end: every matrix takes the requested
 *    type. Each quantized model is compared with its twin, the same rounded weights
 *    dequantized back to F32 (`sift quantize ... f32`): what differs is only the kernels'
 *    quantized activations, within 2.5% of the logits' range for every type. Against the
 *    original F32 model (rounding of the weights included, uniform random weights being
 *    the worst case for quantization): Q8_0 2%, Q6_K 4.5%, Q4_K and Q4_0 20%.
 * 3. llama-quantize's mixtures (Q4_K_M, ...) on an 8-layer 256-wide llama: every tensor's
 *    type and general.file_type.
 * 4. llama-2-tiny-random (F16 matrices with rows of 8, no 32-block type fits) to Q8_0: its
 *    F16 matrices stay F16, byte for byte, as llama-quantize leaves them (they became F32,
 *    doubling the file, issue 29); ffn_down (rows of 32) becomes Q8_0; the model still runs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "mkmodel.h"
#include "gguf/gguf.h"
#include "refdata.h"
#include "sift.h"

static char tmpdir[256];

static int setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/sift_test_quantize_XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static sift_context *mkctx(const sift_model *m)
{
    sift_context_params p = sift_context_default_params();
    p.n_ctx = 512;
    p.n_threads = 1;
    sift_context *ctx = sift_context_new(m, p, NULL);
    assert_non_null(ctx);
    return ctx;
}

/* prompt logits at every position -> out[n][n_vocab] */
static void prompt_logits(const sift_model *m, const int32_t *toks, int n, float *out)
{
    sift_context *ctx = mkctx(m);
    sift_batch b;
    sift_batch_init(&b, n, 1);
    int s0 = 0;
    for (int i = 0; i < n; i++) sift_batch_add(&b, toks[i], i, &s0, 1, true);
    assert_int_equal(sift_decode(ctx, &b, NULL), SIFT_OK);
    memcpy(out, sift_get_logits(ctx), (size_t)n * sift_model_n_vocab(m) * 4);
    sift_batch_free(&b);
    sift_context_free(ctx);
}

static int argmax(const float *x, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

/* mean negative log-likelihood of text[0..n) after prompt[0..np) */
static double nll(const sift_model *m, const int32_t *prompt, int np, const int32_t *text, int n)
{
    int32_t all[600];
    memcpy(all, prompt, (size_t)np * 4);
    memcpy(all + np, text, (size_t)n * 4);
    const int nv = sift_model_n_vocab(m), tot = np + n;
    float *lg = malloc((size_t)tot * nv * 4);
    prompt_logits(m, all, tot, lg);
    double s = 0;
    for (int i = np - 1; i < tot - 1; i++) {
        const float *row = lg + (size_t)i * nv;
        double mx = row[0], z = 0;
        for (int v = 1; v < nv; v++) mx = row[v] > mx ? row[v] : mx;
        for (int v = 0; v < nv; v++) z += exp(row[v] - mx);
        s += -(row[all[i + 1]] - mx - log(z));
    }
    free(lg);
    return s / n;
}

static void check_types(const char *path, sift_tensor_type matrices, sift_tensor_type head)
{
    sift_gguf *g = sift_gguf_open(path, NULL);
    assert_non_null(g);
    for (int64_t i = 0; i < sift_gguf_n_tensors(g); i++) {
        const sift_gguf_tensor *t = sift_gguf_tensor_at(g, i);
        sift_tensor_type want = t->ne[1] == 1 ? SIFT_TYPE_F32 : matrices;
        if (strstr(t->name, "ffn_down") && t->ne[0] % 32) want = SIFT_TYPE_F32;
        if (!strcmp(t->name, "output.weight")) want = head;
        if (t->type != want) {
            fprintf(stderr, "%s: %s is %s, expected %s\n", path, t->name, sift_type_name(t->type), sift_type_name(want));
            fail();
        }
    }
    sift_gguf_close(g);
}

static void test_stories_quantized(void **state)
{
    (void)state;
    ref_model R;
    assert_int_equal(ref_load("stories260K", &R), 0);
    char src[1024];
    ref_model_path("stories260K", src, sizeof src);
    sift_model *f32 = sift_model_load(src, NULL);
    assert_non_null(f32);
    const int nv = R.n_vocab;
    const ref_prompt *once = &R.prompts[0];
    const double nll_f32 = nll(f32, once->tokens, once->n_tokens, once->greedy, REF_N_GEN);

    const struct {
        const char *name;
        sift_tensor_type type, matrices, head;
        double tol_rms, tol_ppl, min_agree;
    } cases[] = {
        {"q8_0", SIFT_TYPE_Q8_0, SIFT_TYPE_Q8_0, SIFT_TYPE_Q8_0, 0.12, 0.01, 0.98},
        {"q4_0", SIFT_TYPE_Q4_0, SIFT_TYPE_Q4_0, SIFT_TYPE_Q8_0, 1.00, 0.15, 0.80},
        {"q4_k", SIFT_TYPE_Q4_K, SIFT_TYPE_Q5_0, SIFT_TYPE_Q8_0, 0.60, 0.03, 0.90},
        {"q6_k", SIFT_TYPE_Q6_K, SIFT_TYPE_Q8_0, SIFT_TYPE_Q8_0, 0.12, 0.01, 0.98},
    };
    printf("  stories260K: F32 perplexity of llama.cpp's greedy 'once' story: %.4f\n", exp(nll_f32));
    /* under valgrind: Q4_0 on two prompts (every code path, fewer repetitions) */
    const bool vg = ref_under_valgrind();
    if (vg) R.n_prompts = 2;
    for (size_t c = vg ? 1 : 0; c < (vg ? 2 : sizeof cases / sizeof *cases); c++) {
        char dst[512];
        snprintf(dst, sizeof dst, "%s/stories260K-%s.gguf", tmpdir, cases[c].name);
        sift_quantize_params qp = sift_quantize_default_params();
        qp.type = cases[c].type;
        qp.n_threads = 2;
        int64_t n_conv = 0;
        sift_error err = {0};
        assert_int_equal(sift_model_quantize(src, dst, &qp, &n_conv, &err), SIFT_OK);
        assert_int_equal(n_conv, 32); /* 48 tensors: 11 1-D, 5 ffn_down kept */
        check_types(dst, cases[c].matrices, cases[c].head);
        sift_model *q = sift_model_load(dst, &err);
        assert_non_null(q);
        double dmax = 0, dsq = 0;
        int64_t dn = 0;
        int greedy_same = 0, greedy_total = 0;
        for (int p = 0; p < R.n_prompts; p++) {
            const ref_prompt *rp = &R.prompts[p];
            float *a = malloc((size_t)rp->n_tokens * nv * 4), *b = malloc((size_t)rp->n_tokens * nv * 4);
            prompt_logits(f32, rp->tokens, rp->n_tokens, a);
            prompt_logits(q, rp->tokens, rp->n_tokens, b);
            for (size_t i = 0; i < (size_t)rp->n_tokens * nv; i++, dn++) {
                dmax = fmax(dmax, fabs(a[i] - b[i]));
                dsq += (double)(a[i] - b[i]) * (a[i] - b[i]);
            }
            free(a), free(b);
            /* greedy: teacher-forced on llama.cpp's ids, count the steps whose argmax agrees */
            int32_t all[600];
            memcpy(all, rp->tokens, (size_t)rp->n_tokens * 4);
            memcpy(all + rp->n_tokens, rp->greedy, REF_N_GEN * 4);
            const int tot = rp->n_tokens + REF_N_GEN - 1;
            float *lg = malloc((size_t)tot * nv * 4);
            prompt_logits(q, all, tot, lg);
            for (int s = 0; s < REF_N_GEN; s++, greedy_total++)
                greedy_same += argmax(lg + (size_t)(rp->n_tokens - 1 + s) * nv, nv) == rp->greedy[s];
            free(lg);
        }
        const double nll_q = nll(q, once->tokens, once->n_tokens, once->greedy, REF_N_GEN);
        const double ppl_ratio = exp(nll_q) / exp(nll_f32);
        const double rms = sqrt(dsq / (double)dn);
        printf("  stories260K %-5s (%s matrices, %s head): prompt logits vs F32: rms|delta| %.4f (tolerance %.2f), "
               "max|delta| %.3f; greedy argmax = llama.cpp's id at %d/%d teacher-forced steps (at least %.0f%%); "
               "perplexity of the F32 story %.4f, x%.4f (within %.0f%%)\n",
               cases[c].name, sift_type_name(cases[c].matrices), sift_type_name(cases[c].head), rms, cases[c].tol_rms, dmax,
               greedy_same, greedy_total, 100 * cases[c].min_agree, exp(nll_q), ppl_ratio, 100 * cases[c].tol_ppl);
        if (!vg) { /* the tolerances are for all five prompts (valgrind runs two) */
            assert_true(rms <= cases[c].tol_rms);
            assert_true(fabs(ppl_ratio - 1) <= cases[c].tol_ppl);
            assert_true(greedy_same >= cases[c].min_agree * greedy_total);
        }
        sift_model_free(q);
    }
    sift_model_free(f32);
}

/* ---- a self-made 256-wide llama ------------------------------------------------------------------ */

/* A llama with n_embd 256, n_ff 512, 2 layers, 4 heads (2 KV heads), random weights and
 * stories260K's tokenizer. */
static void write_wide_model(const char *path)
{
    char src[1024];
    const mk_spec sp = {.arch = "llama", .n_embd = 256, .n_ff = 512, .n_layer = 2, .n_head = 4, .n_head_kv = 2,
                        .out_scale = 2.0f, .seed = 0x2545F4914F6CDD1Dull};
    assert_int_equal(mk_write_model(path, ref_model_path("stories260K", src, sizeof src), &sp), 0);
}

static void test_wide_kquants(void **state)
{
    (void)state;
    char f32p[512];
    snprintf(f32p, sizeof f32p, "%s/wide-f32.gguf", tmpdir);
    write_wide_model(f32p);
    sift_model *f32 = sift_model_load(f32p, NULL);
    assert_non_null(f32);
    const int32_t toks[] = {1, 403, 407, 261, 378, 301, 290, 260, 411, 275, 312, 290, 315, 262, 300, 306};
    const int n = 16, nv = 512;
    float *a = malloc((size_t)n * nv * 4), *b = malloc((size_t)n * nv * 4);
    prompt_logits(f32, toks, n, a);
    double lo = a[0], hi = a[0];
    /* (no fmin / fmax in these loops: gcc 12 for aarch64 stops with an internal error vectorising them) */
    for (int i = 0; i < n * nv; i++) lo = a[i] < lo ? a[i] : lo, hi = a[i] > hi ? a[i] : hi;
    const struct {
        const char *name;
        sift_tensor_type type, head;
        double tol_twin, tol; /* of the F32 logits' range */
    } cases[] = {
        {"q8_0", SIFT_TYPE_Q8_0, SIFT_TYPE_Q8_0, 0.025, 0.02},
        {"q6_k", SIFT_TYPE_Q6_K, SIFT_TYPE_Q6_K, 0.025, 0.045},
        {"q4_k", SIFT_TYPE_Q4_K, SIFT_TYPE_Q6_K, 0.025, 0.20},
        {"q4_0", SIFT_TYPE_Q4_0, SIFT_TYPE_Q6_K, 0.025, 0.20},
    };
    for (size_t c = ref_under_valgrind() ? 1 : 0; c < (ref_under_valgrind() ? 3 : sizeof cases / sizeof *cases); c++) {
        char dst[512];
        snprintf(dst, sizeof dst, "%s/wide-%s.gguf", tmpdir, cases[c].name);
        sift_quantize_params qp = sift_quantize_default_params();
        qp.type = cases[c].type;
        int64_t n_conv;
        assert_int_equal(sift_model_quantize(f32p, dst, &qp, &n_conv, NULL), SIFT_OK);
        assert_int_equal(n_conv, 2 + 2 * 7);
        sift_gguf *g = sift_gguf_open(dst, NULL);
        for (int64_t i = 0; i < sift_gguf_n_tensors(g); i++) {
            const sift_gguf_tensor *t = sift_gguf_tensor_at(g, i);
            const sift_tensor_type want = t->ne[1] == 1 ? SIFT_TYPE_F32 : !strcmp(t->name, "output.weight") ? cases[c].head : cases[c].type;
            assert_int_equal(t->type, want);
        }
        sift_gguf_close(g);
        sift_model *q = sift_model_load(dst, NULL);
        assert_non_null(q);
        prompt_logits(q, toks, n, b);
        double d = 0;
        int same = 0;
        for (int i = 0; i < n * nv; i++) d = fabs(a[i] - b[i]) > d ? fabs(a[i] - b[i]) : d;
        for (int t = 0; t < n; t++) same += argmax(a + t * nv, nv) == argmax(b + t * nv, nv);
        /* its twin: the same (rounded) weights dequantized to F32; what is left between the
         * two is the kernels' work on quantized activations */
        char twin_path[600];
        snprintf(twin_path, sizeof twin_path, "%s.f32", dst);
        qp.type = SIFT_TYPE_F32;
        assert_int_equal(sift_model_quantize(dst, twin_path, &qp, NULL, NULL), SIFT_OK);
        sift_model *twin = sift_model_load(twin_path, NULL);
        assert_non_null(twin);
        float *tw = malloc((size_t)n * nv * 4);
        prompt_logits(twin, toks, n, tw);
        double dt = 0;
        for (int i = 0; i < n * nv; i++) dt = fabs(tw[i] - b[i]) > dt ? fabs(tw[i] - b[i]) : dt;
        printf("  wide llama (256-wide rows) %-5s: logits vs its dequantized-F32 twin max|delta| = %.4f = %.2f%% of the range "
               "(tolerance %.1f%%); vs the original F32 %.4f = %.1f%% (tolerance %.0f%%), argmax agrees at %d/%d\n",
               cases[c].name, dt, 100 * dt / (hi - lo), 100 * cases[c].tol_twin, d, 100 * d / (hi - lo), 100 * cases[c].tol, same, n);
        assert_true(dt <= cases[c].tol_twin * (hi - lo));
        assert_true(d <= cases[c].tol * (hi - lo));
        free(tw);
        sift_model_free(twin);
        sift_model_free(q);
    }
    free(a), free(b);
    sift_model_free(f32);
}

/* llama-quantize's mixtures on an 8-layer 256-wide llama: use_more_bits picks layers 0, 3,
 * 6, 7 for Q4_K_M's Q6_K attn_v / ffn_down; Q4_K_S gives attn_v 0..3 and ffn_down 0 Q5_K. */
static void test_quantize_mixes(void **state)
{
    (void)state;
    char src[1024], f32p[512], dst[512];
    const mk_spec sp = {.arch = "llama", .n_embd = 256, .n_ff = 512, .n_layer = 8, .n_head = 4, .n_head_kv = 2,
                        .out_scale = 2.0f, .seed = 5};
    snprintf(f32p, sizeof f32p, "%s/mix-f32.gguf", tmpdir);
    assert_int_equal(mk_write_model(f32p, ref_model_path("stories260K", src, sizeof src), &sp), 0);
    snprintf(dst, sizeof dst, "%s/mix.gguf", tmpdir);
    const struct {
        sift_quantize_mix mix;
        sift_tensor_type base, v_up, down_up;
        const char *v_layers, *down_layers; /* '1' where the layer is upgraded */
        uint32_t ftype;
    } cases[] = {
        {SIFT_QUANT_MIX_Q4_K_M, SIFT_TYPE_Q4_K, SIFT_TYPE_Q6_K, SIFT_TYPE_Q6_K, "10010011", "10010011", 15},
        {SIFT_QUANT_MIX_Q5_K_M, SIFT_TYPE_Q5_K, SIFT_TYPE_Q6_K, SIFT_TYPE_Q6_K, "10010011", "10010011", 17},
        {SIFT_QUANT_MIX_Q4_K_S, SIFT_TYPE_Q4_K, SIFT_TYPE_Q5_K, SIFT_TYPE_Q5_K, "11110000", "10000000", 14},
        {SIFT_QUANT_MIX_Q5_K_S, SIFT_TYPE_Q5_K, SIFT_TYPE_Q5_K, SIFT_TYPE_Q5_K, "00000000", "00000000", 16},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        sift_quantize_params qp = sift_quantize_default_params();
        qp.type = cases[c].base;
        qp.mix = cases[c].mix;
        assert_int_equal(sift_model_quantize(f32p, dst, &qp, NULL, NULL), SIFT_OK);
        sift_gguf *g = sift_gguf_open(dst, NULL);
        assert_non_null(g);
        uint32_t ft = 0;
        assert_int_equal(sift_gguf_value_u32(sift_gguf_get(g, "general.file_type"), &ft), SIFT_OK);
        assert_int_equal(ft, cases[c].ftype);
        for (int64_t i = 0; i < sift_gguf_n_tensors(g); i++) {
            const sift_gguf_tensor *t = sift_gguf_tensor_at(g, i);
            int il = -1;
            sscanf(t->name, "blk.%d.", &il);
            sift_tensor_type want = cases[c].base;
            if (t->ne[1] == 1) want = SIFT_TYPE_F32;
            else if (!strcmp(t->name, "output.weight")) want = SIFT_TYPE_Q6_K;
            else if (strstr(t->name, "attn_v.weight") && cases[c].v_layers[il] == '1') want = cases[c].v_up;
            else if (strstr(t->name, "ffn_down") && cases[c].down_layers[il] == '1') want = cases[c].down_up;
            if (t->type != want) fprintf(stderr, "mix %d: %s is %s, expected %s\n", (int)c, t->name, sift_type_name(t->type), sift_type_name(want));
            assert_int_equal(t->type, want);
        }
        sift_gguf_close(g);
        sift_model *m = sift_model_load(dst, NULL);
        assert_non_null(m);
        sift_model_free(m);
    }
    /* a mixture on another base type is refused */
    sift_quantize_params qp = sift_quantize_default_params();
    qp.type = SIFT_TYPE_Q5_K;
    qp.mix = SIFT_QUANT_MIX_Q4_K_M;
    sift_error err = {0};
    assert_int_equal(sift_model_quantize(f32p, dst, &qp, NULL, &err), SIFT_E_INVAL);
    assert_non_null(strstr(err.msg, "mixture"));
}

static void test_quantize_errors(void **state)
{
    (void)state;
    char src[1024], dst[512];
    ref_model_path("stories260K", src, sizeof src);
    snprintf(dst, sizeof dst, "%s/x.gguf", tmpdir);
    sift_quantize_params qp = sift_quantize_default_params();
    sift_error err = {0};
    qp.type = SIFT_TYPE_Q2_K;
    assert_int_equal(sift_model_quantize(src, dst, &qp, NULL, &err), SIFT_E_INVAL);
    qp.type = SIFT_TYPE_Q8_0;
    assert_int_not_equal(sift_model_quantize("/nonexistent.gguf", dst, &qp, NULL, &err), SIFT_OK);
    assert_int_not_equal(sift_model_quantize(src, "/nonexistent-dir/x.gguf", &qp, NULL, &err), SIFT_OK);
    printf("  errors: %s\n", err.msg);
}

static void test_f16_kept(void **state)
{
    (void)state;
    char src[1024], dst[512];
    ref_model_path("llama-2-tiny-random", src, sizeof src);
    if (access(src, R_OK) != 0) skip();
    snprintf(dst, sizeof dst, "%s/tiny-q8.gguf", tmpdir);
    sift_quantize_params qp = sift_quantize_default_params();
    qp.type = SIFT_TYPE_Q8_0;
    qp.n_threads = 1;
    int64_t n_conv = -1;
    sift_error err = {0};
    assert_int_equal(sift_model_quantize(src, dst, &qp, &n_conv, &err), SIFT_OK);
    sift_gguf *a = sift_gguf_open(src, NULL), *b = sift_gguf_open(dst, NULL);
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(sift_gguf_n_tensors(a), sift_gguf_n_tensors(b));
    int n_f16 = 0, n_q8 = 0;
    for (int64_t i = 0; i < sift_gguf_n_tensors(a); i++) {
        const sift_gguf_tensor *ta = sift_gguf_tensor_at(a, i), *tb = sift_gguf_tensor_at(b, i);
        assert_string_equal(ta->name, tb->name);
        if (ta->type == SIFT_TYPE_F16 && ta->ne[0] % 32) {
            assert_int_equal(tb->type, SIFT_TYPE_F16);
            assert_int_equal(ta->size, tb->size);
            assert_memory_equal(ta->data, tb->data, ta->size);
            n_f16++;
        } else if (ta->type == SIFT_TYPE_F16) {
            assert_int_equal(tb->type, SIFT_TYPE_Q8_0);
            n_q8++;
        } else {
            assert_int_equal(tb->type, ta->type); /* the F32 norms */
        }
    }
    assert_int_equal(n_f16, 8); /* token_embd, attn_q/k/v/output, ffn_gate/up, output */
    assert_int_equal(n_q8, 1);  /* ffn_down: rows of 32 */
    sift_gguf_close(a);
    sift_gguf_close(b);
    sift_model *m = sift_model_load(dst, &err);
    assert_non_null(m);
    sift_model_free(m);
    printf("  llama-2-tiny-random to q8_0: %d F16 matrices kept, %d to Q8_0 (%lld converted)\n", n_f16, n_q8, (long long)n_conv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stories_quantized),
        cmocka_unit_test(test_wide_kquants),
        cmocka_unit_test(test_quantize_mixes),
        cmocka_unit_test(test_quantize_errors),
        cmocka_unit_test(test_f16_kept),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
