/*
 * test_decode_batch.c - batched decoding gives every sequence the logits it gets alone, bit
 * for bit, for every weight type (the shared models are F32 and F16 only; the quantized
 * types go through other kernels: the tiled products of kernels.h's gemm for Q8_0 and Q4_0).
 *
 * Self-made models (src/gguf/mkmodel.h: 256 wide, 2 layers, GQA, stories260K's vocabulary)
 * in F32, F16, Q8_0, Q4_0, Q4_K and Q6_K. Six sequences with prompts of 2 to 12 tokens:
 *
 *   - alone: each in its own context, the prompt in one batch, then greedy token by token;
 *   - together: all prompts in one batch (every token of the batch through the tiles,
 *     edges included), then every step one batch of six tokens (a full tile of four
 *     columns and an edge of two), with 1 and 2 threads, and once more with one prompt
 *     still being read in chunks while the others generate (as `sift serve` mixes them).
 *
 * The logits of every sequence at every step must be bitwise those of its run alone, and
 * the runs alone the same with the matrices left in the file mapping (SIFT_MMAP=1) as with
 * the load's copy (where Q4_K's rows are regrouped for the AVX2 kernels, model/repack.h).
 *
 * Under valgrind only Q8_0 and Q4_0 run (the gemm kernels; the other types' paths are the
 * shared models' and test_model's), and fewer sampling steps.
 *
 * Also the generator's promise for benchmarks: a deeper model (16 layers) at the default
 * output scale has finite logits with a standard deviation of order 1, and seeded sampling
 * gives varied tokens.
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
#include "refdata.h"
#include "sift.h"

enum { NSEQ = 6, NSTEP = 6, MAXP = 12 };

static char tmpdir[] = "/tmp/sift_test_decode_batch_XXXXXX";
static char vocab[1024];

static int setup(void **state)
{
    (void)state;
    if (!mkdtemp(tmpdir)) return -1;
    ref_model_path("stories260K", vocab, sizeof vocab);
    return access(vocab, R_OK) == 0 ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static sift_model *make_model(const char *name, const mk_spec *sp)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s.gguf", tmpdir, name);
    assert_int_equal(mk_write_model(path, vocab, sp), 0);
    sift_error err = {0};
    sift_model *m = sift_model_load(path, &err);
    if (!m) fprintf(stderr, "load %s: %s\n", path, err.msg);
    assert_non_null(m);
    return m;
}

static sift_context *mkctx(const sift_model *m, int n_seq, int n_threads)
{
    sift_context_params p = sift_context_default_params();
    p.n_ctx = 64u * (uint32_t)n_seq;
    p.n_batch = 128;
    p.n_seq_max = (uint32_t)n_seq;
    p.n_threads = p.n_threads_batch = n_threads;
    sift_context *ctx = sift_context_new(m, p, NULL);
    assert_non_null(ctx);
    return ctx;
}

static int prompt_len(int s)
{
    return 2 + (s * 5) % (MAXP - 1);
}

static sift_token prompt_tok(int s, int i)
{
    return i == 0 ? 1 : (sift_token)(3 + (s * 97 + i * 31) % 500);
}

static int argmax(const float *x, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* logits[s][step][vocab] of each sequence decoded alone; the greedy tokens in toks[s][step] */
static void run_alone(const sift_model *m, int nv, float *logits, sift_token toks[NSEQ][NSTEP])
{
    sift_batch b;
    assert_int_equal(sift_batch_init(&b, MAXP, 1), SIFT_OK);
    for (int s = 0; s < NSEQ; s++) {
        sift_context *ctx = mkctx(m, 1, 1);
        const int seq = 0, n = prompt_len(s);
        sift_batch_clear(&b);
        for (int i = 0; i < n; i++) sift_batch_add(&b, prompt_tok(s, i), i, &seq, 1, i == n - 1);
        assert_int_equal(sift_decode(ctx, &b, NULL), SIFT_OK);
        for (int t = 0; t < NSTEP; t++) {
            const float *lg = sift_get_logits_ith(ctx, -1);
            memcpy(logits + ((size_t)s * NSTEP + t) * nv, lg, (size_t)nv * sizeof(float));
            toks[s][t] = argmax(lg, nv);
            sift_batch_clear(&b);
            sift_batch_add(&b, toks[s][t], n + t, &seq, 1, true);
            assert_int_equal(sift_decode(ctx, &b, NULL), SIFT_OK);
        }
        sift_context_free(ctx);
    }
    sift_batch_free(&b);
}

/* All sequences in one context, stepping together. chunked: sequence NSEQ-1 reads its
 * prompt three tokens per step while the others already generate. Returns the number of
 * (sequence, step) logits that differ from alone[]. */
static int run_together(const sift_model *m, int nv, int n_threads, bool chunked, const float *alone,
                        sift_token toks[NSEQ][NSTEP])
{
    sift_context *ctx = mkctx(m, NSEQ, n_threads);
    sift_batch b;
    assert_int_equal(sift_batch_init(&b, NSEQ * MAXP, 1), SIFT_OK);
    int idx[NSEQ], read[NSEQ], step[NSEQ], diffs = 0;
    for (int s = 0; s < NSEQ; s++) read[s] = 0, step[s] = 0;
    for (int round = 0;; round++) {
        sift_batch_clear(&b);
        bool any = false;
        for (int s = 0; s < NSEQ; s++) {
            const int n = prompt_len(s);
            idx[s] = -1;
            if (read[s] < n) { /* prompt: all of it, or a chunk of three */
                const int end = chunked && s == NSEQ - 1 && read[s] + 3 < n ? read[s] + 3 : n;
                for (int i = read[s]; i < end; i++) {
                    if (i == n - 1) idx[s] = b.n_tokens;
                    sift_batch_add(&b, prompt_tok(s, i), i, &s, 1, i == n - 1);
                }
                read[s] = end;
                any = true;
            } else if (step[s] < NSTEP) { /* the token chosen at the previous step */
                idx[s] = b.n_tokens;
                sift_batch_add(&b, toks[s][step[s] - 1], n + step[s] - 1, &s, 1, true);
                any = true;
            }
        }
        if (!any) break;
        assert_int_equal(sift_decode(ctx, &b, NULL), SIFT_OK);
        for (int s = 0; s < NSEQ; s++) {
            if (idx[s] < 0) continue;
            const float *lg = sift_get_logits_ith(ctx, idx[s]);
            assert_non_null(lg);
            if (memcmp(lg, alone + ((size_t)s * NSTEP + step[s]) * nv, (size_t)nv * sizeof(float)) != 0) diffs++;
            step[s]++;
        }
        assert_true(round < 100);
    }
    sift_batch_free(&b);
    sift_context_free(ctx);
    return diffs;
}

static void test_batched_equals_alone(void **state)
{
    (void)state;
    const struct {
        const char *name;
        sift_tensor_type type;
    } types[] = {{"f32", SIFT_TYPE_F32},   {"f16", SIFT_TYPE_F16},   {"q8_0", SIFT_TYPE_Q8_0},
                 {"q4_0", SIFT_TYPE_Q4_0}, {"q4_k", SIFT_TYPE_Q4_K}, {"q6_k", SIFT_TYPE_Q6_K}};
    for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
        if (ref_under_valgrind() && types[t].type != SIFT_TYPE_Q8_0 && types[t].type != SIFT_TYPE_Q4_0) continue;
        const mk_spec sp = {.arch = "llama", .n_embd = 256, .n_ff = 512, .n_layer = 2, .n_head = 4, .n_head_kv = 2,
                            .out_scale = 2.0f, .seed = 7, .type = types[t].type};
        sift_model *m = make_model(types[t].name, &sp);
        sift_model_info info;
        sift_model_get_info(m, &info);
        assert_int_equal(info.main_type, types[t].type);
        const int nv = info.n_vocab;
        float *alone = malloc((size_t)NSEQ * NSTEP * nv * sizeof(float));
        sift_token toks[NSEQ][NSTEP];
        run_alone(m, nv, alone, toks);
        /* the copied matrices (Q4_K's rearranged into row groups where the CPU's kernels
         * ask for it, model/repack.h) against the file's own bytes: the same logits */
        setenv("SIFT_MMAP", "1", 1);
        sift_model *mm = make_model(types[t].name, &sp);
        unsetenv("SIFT_MMAP");
        float *mapped = malloc((size_t)NSEQ * NSTEP * nv * sizeof(float));
        sift_token mtoks[NSEQ][NSTEP];
        run_alone(mm, nv, mapped, mtoks);
        const bool same = memcmp(mapped, alone, (size_t)NSEQ * NSTEP * nv * sizeof(float)) == 0;
        printf("  %-5s copied vs file-mapped weights: %s\n", types[t].name, same ? "bitwise identical" : "DIFFER");
        assert_true(same);
        free(mapped);
        sift_model_free(mm);
        const int d1 = run_together(m, nv, 1, false, alone, toks);
        const int d2 = run_together(m, nv, 2, false, alone, toks);
        const int dc = run_together(m, nv, 2, true, alone, toks);
        printf("  %-5s %d sequences x %d steps: batched, 1 thread: %d differ; 2 threads: %d; prompt chunks mixed in: %d\n",
               types[t].name, NSEQ, NSTEP, d1, d2, dc);
        assert_int_equal(d1, 0);
        assert_int_equal(d2, 0);
        assert_int_equal(dc, 0);
        free(alone);
        sift_model_free(m);
    }
}

/* The benchmark models' promise: finite, spread logits through many layers, varied samples. */
static void test_generator_scale(void **state)
{
    (void)state;
    const mk_spec sp = {.arch = "llama", .n_embd = 128, .n_ff = 352, .n_layer = 16, .n_head = 4, .n_head_kv = 1,
                        .out_scale = 1.5f, .seed = 3, .type = SIFT_TYPE_Q8_0};
    sift_model *m = make_model("deep", &sp);
    const int nv = 512;
    sift_context *ctx = mkctx(m, 1, 1);
    sift_chain_env env = {.n_vocab = nv, .vocab = NULL, .eot = SIFT_TOKEN_NULL, .default_seed = 1};
    sift_chain *chain = sift_chain_from_spec("top_k(40);temp(0.8);dist(1)", &env, NULL);
    assert_non_null(chain);
    sift_batch b;
    assert_int_equal(sift_batch_init(&b, 1, 1), SIFT_OK);
    const int seq = 0, n = ref_under_valgrind() ? 24 : 48;
    sift_token tok = 1;
    int seen[512] = {0}, distinct = 0;
    double sd_min = 1e9, sd_max = 0;
    for (int i = 0; i < n; i++) {
        sift_batch_clear(&b);
        sift_batch_add(&b, tok, i, &seq, 1, true);
        assert_int_equal(sift_decode(ctx, &b, NULL), SIFT_OK);
        const float *lg = sift_get_logits_ith(ctx, -1);
        double s = 0, s2 = 0;
        for (int v = 0; v < nv; v++) {
            assert_true(isfinite(lg[v]));
            s += lg[v], s2 += (double)lg[v] * lg[v];
        }
        const double sd = sqrt(s2 / nv - (s / nv) * (s / nv));
        sd_min = fmin(sd_min, sd), sd_max = fmax(sd_max, sd);
        tok = sift_chain_sample(chain, lg, nv);
        if (!seen[tok]++) distinct++;
    }
    printf("  16 layers: logits' standard deviation %.2f .. %.2f over %d steps; %d distinct sampled tokens\n", sd_min, sd_max,
           n, distinct);
    assert_true(sd_min > 0.3 && sd_max < 10);
    assert_true(distinct >= n / 3);
    sift_batch_free(&b);
    sift_chain_free(chain);
    sift_context_free(ctx);
    sift_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batched_equals_alone),
        cmocka_unit_test(test_generator_scale),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
