/*
 * peer_model_arch.c - the architectures and options the shared models do not exercise,
 * checked against llama.cpp itself: small random models (tests/mkmodel.h) are written,
 * llama.cpp's model_ref (../shared/peer) computes their prompt logits and greedy
 * continuations, and sift must agree.
 *
 *   qwen2  QKV biases, neox RoPE, freq_base 1e6, tied output head
 *   qwen3  per-head q/k RMSNorm, head size 32 decoupled from n_embd / n_head (key_length)
 *   llama  8 query heads on 2 KV heads, freq_base 5e5, linear RoPE scaling x4, tied head,
 *          llama 3.1's rope_freqs.weight (per-frequency divisors)
 *   gemma2 embeddings x sqrt(dim), GELU, post norms, a sliding window of 8 on every other
 *          layer, score soft-cap 50 and logit soft-cap 30 (llama.cpp's defaults), head size
 *          decoupled
 *   gemma3 q/k norms, a window of 8 on 5 layers of 6 with RoPE base 10000 there, base 1e6
 *          with linear scaling x8 on the global layer
 *   gemma4 per-layer geometry: sliding layers (window 8) of head size 16 with 2 KV heads and
 *          RoPE base 10000 over 16 dims, full ones of head size 32 with 1 KV head, base 1e6,
 *          proportional RoPE (rope_freqs: 4 of 16 pairs rotate) and V as K (no attn_v); the
 *          last 2 layers read earlier layers' K/V (FFN twice as wide there); V normalized,
 *          unscaled scores, layer_output_scale, logit soft-cap 30. gemma4 on 4 layers (S F S F,
 *          tied head), gemma4b on 8 (5 sliding : 1 full, the last full; layers 6, 7 share 4's
 *          and 5's K/V; its own output.weight), gemma4e on 6 (5 : 1, layers 4, 5 sharing
 *          2's and 3's... as the reuse rule has it) with per-layer embeddings of width 16 (E2B's
 *          second embedding table, projected and gated into every layer's output); gemma4m
 *          gemma4 on 4 layers with 26B-A4B's experts: 16 of width 32, 4 used, beside each
 *          layer's dense GELU FFN (router on the unweighted norm / sqrt(dim) x its scale,
 *          softmax, top-4, renormalized; GELU experts, a scale per expert; gate and up merged
 *          in ffn_gate_up_exps on layers 0 and 2, apart on 1 and 3)
 *   granite embedding x12, residual x0.22, score scale 1/64, logits / 8
 *   smollm3 no RoPE on every 4th layer
 *   phi3   fused attn_qkv and gate-up, queries scaled after RoPE; LongRoPE with its long
 *          factors (the context is over the original 256) and attn_factor 1.19
 *   phi3s  the same with the short factors (original context 4096: the context is under it)
 *   yarn   qwen2 with YaRN x4 (original context 256, llama.cpp's defaults: ext 1, beta 32/1)
 *   qwen3moe 8 experts of width 48, 2 used per token (softmax router, top-2, renormalized)
 *   gptoss gpt-oss: Q/K/V/output biases, a sink logit per head, a window of 8 on even layers,
 *          YaRN x4, head size 32 apart from n_embd / n_head, 16 experts of width 64, 4 used
 *          (top-4 of the biased router logits, their softmax), biased experts through the
 *          clamped SwiGLU; F32 experts
 *   qwen35 hybrid: Gated DeltaNet layers (conv1d with its state, L2-normed q/k tiled from 2 to 4
 *          heads, the delta rule, gated RMSNorm) and on every 4th layer gated full attention
 *          (q/k norms, sigmoid gate, 4 of 16 dims rotated by neox = text M-RoPE); one MTP layer
 *          appended, which both engines load and skip. qwen35b: 6 layers, attention every 3rd,
 *          1 q/k head tiled to 2 v heads of size 24, head size 32, tied head
 *   qwen35moe qwen35's hybrid with 8 experts of width 48, 2 used (softmax router, top-2,
 *          renormalized; gate and up merged on even layers, apart on odd ones) plus a shared
 *          SwiGLU expert of width 96 times sigmoid(x . ffn_gate_inp_shexp); one MTP layer
 *   gptossmx the same with the experts in MXFP4, as gpt-oss's own files have them (both
 *          engines multiply them against Q8_0-rounded activations)
 *
 * Checks per model and prompt: prompt logits max |delta| <= 1e-4 (F32 weights: the
 * stories260K tolerance), and the greedy ids: decoding llama.cpp's continuation
 * (teacher-forced) must give llama.cpp's id at every step whose top-2 margin is above
 * 1e-4; steps closer than that are near-ties and only reported.
 *
 * GELU models (gemma) get a looser logit check, for a reason that is ggml's: its GELU looks
 * the input up after rounding it to fp16 (a table of 65536 results), so an input that lies
 * within the ~1e-7 by which two engines' sums differ of an fp16 rounding boundary comes out
 * one fp16 step (~5e-4 relative) apart. sift uses the same table, so most rows agree to
 * 1e-6, and a row that holds such a flip differs by about 1e-4 .. 1e-3; the longer the
 * prompt, the more flips (exact GELU instead of the table is 1e-3 off on every row). So:
 * at least 90 % of the rows within 1e-4, none beyond 5e-3, and the greedy ids as above.
 *
 * MXFP4 experts (gptossmx) get a looser logit check too, for a reason that is the format's:
 * both engines multiply MXFP4 rows by the activations rounded to Q8_0 (ggml's vec_dot_type
 * for it), and rounding is not continuous. sift's activations differ from ggml's by ~1e-7
 * (the F32 model agrees to 1e-5), so a value that lies that close to a rounding boundary
 * (x * 127 / amax within ~1e-5 of k + 0.5; a few hundred of the expert inputs of these three
 * prompts lie within 2e-4 of one) comes out one Q8_0 step apart. One such step moved the
 * logits of "lily" by 0.029 at position 3 (positions 0-2 within 4e-6) and, through
 * attention, later rows by ~1e-3. The F32 model of the same seed holds the architecture to
 * 1e-4, ggml_types_peer holds the MXFP4 dequantizer to ggml's bit for bit and test_kernels
 * its dot products to the scalar one; so here: none beyond 0.05 and the greedy ids as above.
 *
 * The qwen35 models (TOL_RECURRENT) get a looser logit check too, for a reason of the DeltaNet
 * layer's: a head's output o = S q is a sum of terms of both signs, and the gated RMSNorm after
 * it scales it back to unit size, so where the sum nearly cancels, the two engines' rounding
 * (ggml's fused op and sift's loop: the same recurrence token by token, summed differently)
 * grows with it; llama.cpp's own CPU builds (haswell, x64, sse42) differ from each other by up
 * to 3.9e-4 on qwen35moe's "lily" (docs/models.md). Most rows agree to 1e-5 .. 7e-5; single
 * rows of some shapes reach 1e-4 .. 1.7e-4 (qwen35moe's "lily": 2 of 14). Dropping any part of
 * the layer is off by 3 .. 23 (the attention gate, the conv state, the gated norm's SiLU, the
 * decay, the q/k tiling, the shared expert's gate: docs/models.md). So: at least 75 % of the
 * rows within 1e-4, none beyond 1e-3, and the greedy ids as above.
 *
 * usage: peer_model_arch PATH/TO/model_ref     (needs the peer build; registered by
 * tests/model.cmake only when model_ref exists; label "peer")
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mkmodel.h"
#include "refdata.h"

static int failures;

static int argmax(const float *x, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

typedef enum { TOL_EXACT, TOL_GELU_TABLE, TOL_Q8_ACT, TOL_RECURRENT } tolerance;

static void check_model(const char *dir, const char *stem, const char *path, tolerance tol)
{
    ref_model R;
    if (ref_load_dir(dir, stem, &R) != 0) {
        printf("FAIL %s: model_ref wrote no reference (see %s/model_ref.log)\n", stem, dir);
        failures++;
        return;
    }
    sift_error err = {0};
    sift_model *m = sift_model_load(path, &err);
    if (!m) {
        printf("FAIL %s: %s\n", stem, err.msg);
        failures++;
        return;
    }
    const int nv = sift_model_n_vocab(m);
    for (int p = 0; p < R.n_prompts; p++) {
        const ref_prompt *rp = &R.prompts[p];
        int rv, rows;
        float *ref = ref_slog_dir(dir, stem, rp->id, "prompt", &rv, &rows);
        /* one batch: the prompt and llama.cpp's greedy continuation, logits everywhere */
        const int n = rp->n_tokens + rp->n_gen - 1;
        sift_context_params cp = sift_context_default_params();
        cp.n_ctx = 1024;
        cp.n_batch = 1024;
        cp.n_threads = 1;
        sift_context *ctx = sift_context_new(m, cp, NULL);
        sift_batch b;
        sift_batch_init(&b, n, 1);
        const int s0 = 0;
        for (int i = 0; i < n; i++)
            sift_batch_add(&b, i < rp->n_tokens ? rp->tokens[i] : rp->greedy[i - rp->n_tokens], i, &s0, 1, true);
        if (!ref || rv != nv || sift_decode(ctx, &b, &err) != SIFT_OK) {
            printf("FAIL %s/%s: no reference logits or decode failed (%s)\n", stem, rp->id, err.msg);
            failures++;
        } else {
            double d = 0;
            int n_rows = 0, rows_over = 0, first_over = -1;
            for (int pos = rp->logits_first; pos <= rp->logits_last; pos++) {
                const float *lg = sift_get_logits_ith(ctx, pos), *rr = ref + (size_t)(pos - rp->logits_first) * nv;
                double dr = 0;
                for (int v = 0; v < nv; v++) dr = fmax(dr, fabs((double)lg[v] - rr[v]));
                d = fmax(d, dr);
                n_rows++;
                rows_over += dr > 1e-4;
                if (dr > 1e-4 && first_over < 0) first_over = pos;
                if (getenv("SIFT_PEER_ROWS")) printf("  %s/%s pos %d: max|delta| %.3g\n", stem, rp->id, pos, dr);
            }
            int same = 0, ties = 0, wrong = 0;
            for (int s = 0; s < rp->n_gen; s++) {
                const int got = argmax(sift_get_logits_ith(ctx, rp->n_tokens - 1 + s), nv);
                if (got == rp->greedy[s]) same++;
                else if (rp->greedy_margin[s] < 1e-4) ties++;
                else wrong++;
            }
            const bool logits_ok = tol == TOL_RECURRENT ? d <= 1e-3 && rows_over * 4 <= n_rows
                                                        : d <= (tol == TOL_GELU_TABLE ? 5e-3 : tol == TOL_Q8_ACT ? 5e-2 : 1e-4);
            const bool ok = logits_ok && wrong == 0;
            printf("%s %-8s %-5s %3d tokens: prompt logits max|delta| %.3g (%d/%d rows over 1e-4", ok ? "ok  " : "FAIL", stem,
                   rp->id, rp->n_tokens, d, rows_over, n_rows);
            if (first_over >= 0) printf(", the first at position %d", first_over);
            printf("); greedy %d/%d ids identical (%d near-ties)\n", same, rp->n_gen, ties);
            failures += !ok;
        }
        free(ref);
        sift_batch_free(&b);
        sift_context_free(ctx);
    }
    sift_model_free(m);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: peer_model_arch PATH/TO/model_ref\n");
        return 2;
    }
    char dir[] = "/tmp/sift_peer_model_arch_XXXXXX";
    if (!mkdtemp(dir)) return 1;
    char vocab[1024];
    ref_model_path("stories260K", vocab, sizeof vocab);
    const struct {
        const char *stem;
        mk_spec spec;
        tolerance tol; /* ggml's fp16 GELU table, Q8_0-rounded activations: the looser logit checks (above) */
    } models[] = {
        {"qwen2", {.arch = "qwen2", .n_embd = 64, .n_ff = 128, .n_layer = 2, .n_head = 4, .n_head_kv = 2, .freq_base = 1e6f,
                   .bias = true, .tied = true, .out_scale = 4, .seed = 11}, TOL_EXACT},
        {"qwen3", {.arch = "qwen3", .n_embd = 64, .n_ff = 96, .n_layer = 2, .n_head = 4, .n_head_kv = 2, .head_dim = 32,
                   .freq_base = 1e6f, .qk_norm = true, .out_scale = 4, .seed = 12}, TOL_EXACT},
        {"llama", {.arch = "llama", .n_embd = 64, .n_ff = 128, .n_layer = 2, .n_head = 8, .n_head_kv = 2, .freq_base = 5e5f,
                   .rope_linear = 4, .tied = true, .rope_freqs = true, .out_scale = 4, .seed = 13}, TOL_EXACT},
        {"gemma2", {.arch = "gemma2", .n_embd = 64, .n_ff = 128, .n_layer = 2, .n_head = 4, .n_head_kv = 2, .head_dim = 24,
                    .n_swa = 8, .tied = true, .out_scale = 4, .seed = 14}, TOL_GELU_TABLE},
        {"gemma3", {.arch = "gemma3", .n_embd = 64, .n_ff = 128, .n_layer = 6, .n_head = 4, .n_head_kv = 1, .head_dim = 32,
                    .freq_base = 1e6f, .rope_linear = 8, .n_swa = 8, .tied = true, .out_scale = 4, .seed = 15}, TOL_GELU_TABLE},
        {"gemma4", {.arch = "gemma4", .n_embd = 64, .n_ff = 128, .n_layer = 4, .n_head = 4, .n_head_kv = 2, .head_dim = 16,
                    .freq_base = 1e6f, .n_swa = 8, .tied = true, .out_scale = 4, .seed = 24}, TOL_GELU_TABLE},
        {"gemma4b", {.arch = "gemma4", .n_embd = 64, .n_ff = 96, .n_layer = 8, .n_head = 4, .n_head_kv = 2, .head_dim = 16,
                     .freq_base = 1e6f, .n_swa = 8, .out_scale = 1.5f, .seed = 25}, TOL_GELU_TABLE},
        {"gemma4e", {.arch = "gemma4", .n_embd = 64, .n_ff = 128, .n_layer = 6, .n_head = 4, .n_head_kv = 2, .head_dim = 16,
                     .freq_base = 1e6f, .n_swa = 8, .n_embd_per_layer = 16, .tied = true, .out_scale = 4, .seed = 26},
         TOL_GELU_TABLE},
        {"gemma4m", {.arch = "gemma4", .n_embd = 64, .n_ff = 96, .n_layer = 4, .n_head = 4, .n_head_kv = 2, .head_dim = 16,
                     .freq_base = 1e6f, .n_swa = 8, .n_expert = 16, .n_expert_used = 4, .n_ff_exp = 32, .tied = true,
                     .out_scale = 4, .seed = 27}, TOL_GELU_TABLE},
        {"granite", {.arch = "granite", .n_embd = 64, .n_ff = 128, .n_layer = 2, .n_head = 4, .n_head_kv = 2, .freq_base = 1e4f,
                     .tied = true, .out_scale = 4, .seed = 16}, TOL_EXACT},
        {"smollm3", {.arch = "smollm3", .n_embd = 64, .n_ff = 128, .n_layer = 4, .n_head = 4, .n_head_kv = 1, .freq_base = 5e6f,
                     .out_scale = 4, .seed = 17}, TOL_EXACT},
        {"phi3", {.arch = "phi3", .n_embd = 64, .n_ff = 128, .n_layer = 2, .n_head = 4, .n_head_kv = 4, .freq_base = 1e4f,
                  .longrope_orig = 256, .out_scale = 4, .seed = 18}, TOL_EXACT},
        {"phi3s", {.arch = "phi3", .n_embd = 64, .n_ff = 128, .n_layer = 2, .n_head = 4, .n_head_kv = 2, .freq_base = 1e4f,
                   .longrope_orig = 4096, .tied = true, .out_scale = 4, .seed = 19}, TOL_EXACT},
        {"yarn", {.arch = "qwen2", .n_embd = 64, .n_ff = 128, .n_layer = 2, .n_head = 4, .n_head_kv = 2, .freq_base = 1e6f,
                  .rope_yarn = 4, .tied = true, .out_scale = 4, .seed = 21}, TOL_EXACT},
        {"qwen3moe", {.arch = "qwen3moe", .n_embd = 64, .n_ff = 96, .n_layer = 2, .n_head = 4, .n_head_kv = 2, .head_dim = 32,
                      .freq_base = 1e6f, .n_expert = 8, .n_expert_used = 2, .n_ff_exp = 48, .out_scale = 4, .seed = 20}, TOL_EXACT},
        {"gptoss", {.arch = "gpt-oss", .n_embd = 64, .n_ff = 128, .n_layer = 4, .n_head = 4, .n_head_kv = 2, .head_dim = 32,
                    .freq_base = 1.5e5f, .rope_yarn = 4, .n_swa = 8, .n_expert = 16, .n_expert_used = 4, .n_ff_exp = 64,
                    .out_scale = 4, .seed = 23}, TOL_EXACT},
        {"gptossmx", {.arch = "gpt-oss", .n_embd = 64, .n_ff = 128, .n_layer = 4, .n_head = 4, .n_head_kv = 2, .head_dim = 32,
                      .freq_base = 1.5e5f, .rope_yarn = 4, .n_swa = 8, .n_expert = 16, .n_expert_used = 4, .n_ff_exp = 64,
                      .exp_type = SIFT_TYPE_MXFP4, .out_scale = 4, .seed = 23}, TOL_Q8_ACT},
        {"qwen35", {.arch = "qwen35", .n_embd = 64, .n_ff = 128, .n_layer = 4, .n_head = 4, .n_head_kv = 2, .head_dim = 16,
                    .freq_base = 1e7f, .n_nextn = 1, .out_scale = 4, .seed = 29}, TOL_RECURRENT},
        {"qwen35b", {.arch = "qwen35", .n_embd = 64, .n_ff = 96, .n_layer = 6, .n_head = 4, .n_head_kv = 1, .head_dim = 32,
                     .attn_interval = 3, .ssm_groups = 1, .ssm_v_heads = 2, .ssm_state = 24, .tied = true, .out_scale = 4,
                     .seed = 30}, TOL_RECURRENT},
        {"qwen35moe", {.arch = "qwen35moe", .n_embd = 64, .n_ff = 96, .n_layer = 4, .n_head = 4, .n_head_kv = 2, .head_dim = 16,
                       .freq_base = 1e7f, .n_expert = 8, .n_expert_used = 2, .n_ff_exp = 48, .n_nextn = 1, .out_scale = 4,
                       .seed = 31}, TOL_RECURRENT},
    };
    enum { N_MODELS = sizeof models / sizeof *models };
    char cmd[8192];
    int off = snprintf(cmd, sizeof cmd, "'%s' --no-vocab --n-gen 32 --out '%s'", argv[1], dir);
    char paths[N_MODELS][1100];
    for (int i = 0; i < N_MODELS; i++) {
        snprintf(paths[i], sizeof paths[i], "%s/%s.gguf", dir, models[i].stem);
        if (mk_write_model(paths[i], vocab, &models[i].spec) != 0) {
            fprintf(stderr, "cannot write %s\n", paths[i]);
            return 1;
        }
        off += snprintf(cmd + off, sizeof cmd - (size_t)off, " --model '%s'", paths[i]);
    }
    char prompts[1100];
    snprintf(prompts, sizeof prompts, "%s/prompts.txt", dir);
    FILE *f = fopen(prompts, "w");
    fprintf(f, "once\tOnce upon a time\nlily\tLily and Ben went to the park. They\nlong\t@150\t");
    for (int i = 0; i < 20; i++) fprintf(f, "Tom and his mom went to the store to buy some milk and bread. ");
    fprintf(f, "\n");
    fclose(f);
    snprintf(cmd + off, sizeof cmd - (size_t)off, " --prompts '%s' > '%s/model_ref.log' 2>&1", prompts, dir);
    if (system(cmd) != 0) {
        fprintf(stderr, "model_ref failed: %s\n", cmd);
        return 1;
    }
    for (int i = 0; i < N_MODELS; i++) check_model(dir, models[i].stem, paths[i], models[i].tol);
    if (!failures) {
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0) return 1;
    } else {
        printf("files kept in %s\n", dir);
    }
    printf("%s\n", failures ? "FAILED" : "all agree with llama.cpp");
    return failures ? 1 : 0;
}
