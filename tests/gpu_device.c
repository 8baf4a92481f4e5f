/*
 * gpu_device.c - the device chain on a CUDA GPU (issue 7's acceptance tests).
 *
 * Without a device it checks that the API refuses cleanly (SIFT_E_UNSUPPORTED, a message
 * that says so) and exits 77, which CTest reports as skipped. With one:
 *
 *  - masks: greedy, top_k, top_p and min_p over every row of the reference logits in ONE
 *    batch; each row's surviving candidates (ids, logits, order, flags) against the CPU
 *    sampler's array, and against the host reference of the kernels (host_reference.c). A
 *    difference from the CPU is only allowed where test_gpu_host explains it: tied logits ordered
 *    differently, or top_p where llama.cpp's float sums cut elsewhere than exact
 *    arithmetic (the device must then agree with the exact cut).
 *  - dist: 10^6 draws from the device, chi-square against the CPU probabilities
 *    (p > 0.001), for the long-list and the tail kernel; reproducible for a seed.
 *  - hybrid: top_k(256);temp(0.8);<CPU sampler>: the CPU tail receives exactly the
 *    all-CPU chain's candidates, and the token streams are the all-CPU chain's.
 *  - llama.cpp's 13 reference streams with dist left on the CPU; device-selected greedy
 *    with penalties matches the CPU chain; per-sequence parameters in one batch; a run
 *    captured in a CUDA graph gives the same tokens; errors.
 *
 * compute-sanitizer: `compute-sanitizer --tool memcheck build/tests/gpu_device` (and
 * --tool racecheck / synccheck / initcheck); the program frees everything it allocates.
 *
 * Built as gpu_emu (SIFT_GPU_EMU) it runs against the CUDA emulator of tests/cuda_emu, on
 * smaller inputs (EMU_OR below): fewer samplers, rows, steps and draws.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <cuda_runtime_api.h>

#include "gpu/handoff.h"
#include "gpu/plan.h"
#include "gpu/host_reference.h"
#include "gpu_testutil.h"
#include "sift-cuda.h"

#ifdef SIFT_GPU_EMU
#define EMU_OR(emu, gpu) (emu)
#else
#define EMU_OR(emu, gpu) (gpu)
#endif

#define CK(x)                                                                                                         \
    do {                                                                                                              \
        const cudaError_t e_ = (x);                                                                                   \
        if (e_ != cudaSuccess) fail_msg("%s: %s", #x, cudaGetErrorString(e_));                                       \
    } while (0)

/* the reference logits of one vocabulary on the device, rows back to back */
typedef struct dev_logits {
    gt_logits host;
    float *d;
} dev_logits;

static void dl_load(dev_logits *dl, uint32_t V)
{
    assert_int_equal(gt_load_logits(V, &dl->host), 0);
    const size_t bytes = (size_t)dl->host.n_rows * V * sizeof(float);
    CK(cudaMalloc((void **)&dl->d, bytes));
    CK(cudaMemcpy(dl->d, dl->host.x, bytes, cudaMemcpyHostToDevice));
}

static void dl_free(dev_logits *dl)
{
    cudaFree(dl->d);
    free(dl->host.x);
}

static sift_cuda_chain *mk(const char *spec, uint32_t V, int32_t n_seq, int cpu_dist)
{
    sift_cuda_params p = sift_cuda_default_params();
    p.n_vocab = (int32_t)V;
    p.n_seq_max = n_seq;
    p.cpu_dist = cpu_dist;
    sift_chain_env env = {.n_vocab = (int32_t)V, .vocab = NULL, .eot = SIFT_TOKEN_NULL, .default_seed = 0};
    sift_error err;
    sift_cuda_chain *c = sift_cuda_chain_from_spec(spec, &env, &p, &err);
    if (!c) fail_msg("%s: %s", spec, err.msg);
    return c;
}

static void run_ok(sift_cuda_chain *c, const float *d, int64_t ld, int32_t n, sift_token *tokens)
{
    sift_error err;
    if (sift_cuda_chain_sample(c, d, ld, n, NULL, tokens, &err) != SIFT_OK) fail_msg("%s", err.msg);
}

static int tie_permutation(const sift_candidates *a, const sift_candidates *b)
{
    char msg[256];
    if (!sift__gpu_candidates_same_set(a, b, msg, sizeof msg)) return 0;
    for (size_t i = 0; i < a->size; i++)
        if (a->logit[i] != b->logit[i]) return 0;
    return 1;
}

/* ---- without a device ------------------------------------------------------------------------ */

static int no_device_checks(void)
{
    sift_cuda_params p = sift_cuda_default_params();
    p.n_vocab = 32000;
    sift_error err = {0};
    sift_cuda_chain *c = sift_cuda_chain_from_spec("top_k(40);dist(1)", NULL, &p, &err);
    if (c || err.status != SIFT_E_UNSUPPORTED || !strstr(err.msg, "no CUDA device")) {
        fprintf(stderr, "without a device: expected SIFT_E_UNSUPPORTED, got %d '%s'\n", err.status, err.msg);
        sift_cuda_chain_free(c);
        return 1;
    }
    char name[64];
    sift_cuda_device_name(0, name, sizeof name);
    if (name[0]) return 1;
    printf("no CUDA device: the constructors refuse with \"%s\"; device tests skipped\n", err.msg);
    return 0;
}

/* ---- masks --------------------------------------------------------------------------------- */

static void test_masks(void **state)
{
    (void)state;
    static const char *const specs[] = {
        "greedy()",      "top_k(1)",      "top_k(40)",     "top_k(256)",    "top_k(3000)",   "top_k(4096)",
        "top_k(5000)",   "top_k(31999)",  "top_k(32000)",  "top_p(0.5,1)",  "top_p(0.9,1)",  "top_p(0.95,0)",
        "top_p(0.99,1)", "top_p(0.999,1)", "top_p(0.9,200)", "top_p(0.0,1)", "min_p(0.05,0)", "min_p(0.1,1)",
        "min_p(0.5,1)",  "min_p(0.001,0)", "min_p(0.5,4500)", "min_p(1.5,0)", "min_p(0.9,50)",
    };
    const uint32_t vocabs[2] = {32000, 151936};
    for (int v = 0; v < 2; v++) {
        dev_logits dl;
        dl_load(&dl, vocabs[v]);
        const uint32_t V = vocabs[v], R = EMU_OR(v ? 1u : 3u, dl.host.n_rows);
        sift_candidates cpu, dev;
        assert_int_equal(sift_candidates_init(&cpu, V), SIFT_OK);
        for (size_t s = 0; s < sizeof specs / sizeof *specs; s++) {
            if (EMU_OR(s % 3 != 0, 0)) continue; /* under emulation: every third sampler */
            sift_cuda_chain *c = mk(specs[s], V, (int32_t)R, 0);
            /* the host reference of the same program, for the same rows */
            sift__gpu_plan plan;
            sift__gpu_rowspec row;
            sift_error err;
            assert_int_equal(sift__gpu_plan_spec(specs[s], NULL, (int32_t)V, 0, &plan, &row, &err), SIFT_OK);
            const sift__gpu_rowspec **rows = malloc(R * sizeof *rows);
            for (uint32_t r = 0; r < R; r++) rows[r] = &row;
            sift__gpu_ref ref;
            const int32_t cap = plan.selects ? 1 : sift__gpu_row_bound(&plan, &row);
            assert_int_equal(sift__gpu_ref_init(&ref, &plan, (int32_t)R, cap), SIFT_OK);
            sift__gpu_ref_run(&ref, rows, (int32_t)R, dl.host.x, V);

            sift_token *tok = malloc(R * sizeof *tok);
            run_ok(c, dl.d, V, (int32_t)R, tok);
            int same = 0, rounding = 0, ties = 0, like_ref = 0;
            for (uint32_t r = 0; r < R; r++) {
                const float *x = gt_row(&dl.host, r);
                assert_int_equal(gt_cpu_apply(specs[s], V, x, &cpu), 0);
                if (plan.selects) {
                    assert_int_equal(tok[r], sift_candidates_selected(&cpu));
                    like_ref += tok[r] == ref.out[r].token;
                    same++;
                    continue;
                }
                assert_int_equal(sift_cuda_chain_candidates(c, (int32_t)r, &dev), SIFT_OK);
                /* device == host reference (up to the device's expf) */
                sift_candidates rc;
                assert_int_equal(sift_candidates_init(&rc, (size_t)cap), SIFT_OK);
                uint64_t *scratch = malloc((size_t)cap * sizeof *scratch);
                sift__gpu_handoff_unpack(&ref.out[r], ref.hid + (size_t)r * (size_t)cap, ref.hlg + (size_t)r * (size_t)cap,
                                         ref.hp + (size_t)r * (size_t)cap, scratch, &rc);
                char msg[256];
                like_ref += sift__gpu_candidates_same(&dev, &rc, msg, sizeof msg);
                free(scratch);
                sift_candidates_free(&rc);
                if (sift__gpu_candidates_same(&dev, &cpu, msg, sizeof msg)) {
                    same++;
                    continue;
                }
                float p = 0;
                unsigned mk_ = 0;
                if (sscanf(specs[s], "top_p(%f,%u)", &p, &mk_) == 2 && dev.size != cpu.size &&
                    dev.size == gt_exact_top_p(x, V, p, mk_)) {
                    rounding++;
                    continue;
                }
                if (tie_permutation(&dev, &cpu)) {
                    ties++;
                    continue;
                }
                fail_msg("%s V=%u row %u: %s", specs[s], V, r, msg);
            }
            printf("  %-16s V=%-6u %2d/%u rows identical to the CPU", specs[s], V, same, R);
            if (rounding) printf(", %d at llama.cpp's float-rounded top_p cut", rounding);
            if (ties) printf(", %d tied logits in another order", ties);
            printf("; %d/%u identical to the host reference\n", like_ref, R);
            free(tok);
            free(rows);
            sift__gpu_ref_free(&ref);
            sift__gpu_rowspec_free(&row);
            sift_cuda_chain_free(c);
        }
        sift_candidates_free(&cpu);
        dl_free(&dl);
    }
}

/* ---- dist ---------------------------------------------------------------------------------- */

static void chi_square(const char *spec, uint32_t V, const float *x_host, int n_draws)
{
    const int32_t B = EMU_OR(8, 1000); /* rows per run, each with its own seed */
    float *d = NULL;
    CK(cudaMalloc((void **)&d, (size_t)B * V * sizeof(float)));
    for (int32_t r = 0; r < B; r++) CK(cudaMemcpy(d + (size_t)r * V, x_host, V * sizeof(float), cudaMemcpyHostToDevice));
    sift_cuda_chain *c = mk(spec, V, B, 0);
    sift_cuda_chain *c2 = mk(spec, V, B, 0);
    for (int32_t r = 0; r < B; r++) {
        assert_int_equal(sift_cuda_chain_set_seed(c, r, 1000u + (uint32_t)r), SIFT_OK);
        assert_int_equal(sift_cuda_chain_set_seed(c2, r, 1000u + (uint32_t)r), SIFT_OK);
    }
    int *hits = calloc(V, sizeof *hits);
    sift_token *tok = malloc((size_t)B * sizeof *tok), *tok2 = malloc((size_t)B * sizeof *tok2);
    int runs = (n_draws + B - 1) / B;
    for (int i = 0; i < runs; i++) {
        run_ok(c, d, V, B, tok);
        for (int32_t r = 0; r < B; r++) {
            assert_true(tok[r] >= 0 && (uint32_t)tok[r] < V);
            hits[tok[r]]++;
        }
        if (i < 3) { /* the same seeds draw the same tokens */
            run_ok(c2, d, V, B, tok2);
            assert_memory_equal(tok, tok2, (size_t)B * sizeof *tok);
        }
    }
    /* the CPU's probabilities after the same filters */
    sift_candidates cand;
    assert_int_equal(sift_candidates_init(&cand, V), SIFT_OK);
    char filters[256];
    snprintf(filters, sizeof filters, "%s", spec);
    char *last = strrchr(filters, ';');
    if (last) *last = 0;
    else filters[0] = 0;
    if (filters[0]) assert_int_equal(gt_cpu_apply(filters, V, x_host, &cand), 0);
    else sift_candidates_fill(&cand, x_host, V);
    const float *p = sift_candidates_probs(&cand);
    const double n = (double)runs * B;
    double chi = 0, rest_e = 0, rest_o = 0, outside = 0;
    int df = 0;
    int *seen = calloc(V, sizeof *seen);
    for (size_t i = 0; i < cand.size; i++) {
        const int32_t t = cand.id[i];
        seen[t] = 1;
        const double e = (double)p[i] * n;
        if (e >= 20) {
            chi += (hits[t] - e) * (hits[t] - e) / e;
            df++;
        } else {
            rest_e += e;
            rest_o += hits[t];
        }
    }
    for (uint32_t t = 0; t < V; t++)
        if (!seen[t]) outside += hits[t];
    if (rest_e > 0) {
        chi += (rest_o - rest_e) * (rest_o - rest_e) / rest_e;
        df++;
    }
    df -= 1;
    const double z = 3.0902, k = df;
    const double q999 = k * pow(1 - 2 / (9 * k) + z * sqrt(2 / (9 * k)), 3);
    if (df >= 1)
        printf("  %-30s V=%-6u %.0f draws: chi2 = %.1f, df = %d (p > 0.001 needs < %.1f); draws outside the set: %.0f\n", spec,
               V, n, chi, df, q999, outside);
    else
        printf("  %-30s V=%-6u %.0f draws (too few for a chi-square); draws outside the set: %.0f\n", spec, V, n, outside);
    assert_true(outside == 0);
    if (n >= 100000) { /* a test with power (the emulator only draws a few hundred) */
        assert_true(df >= 3);
        assert_true(chi < q999);
    }
    free(seen);
    free(hits);
    free(tok);
    free(tok2);
    sift_candidates_free(&cand);
    sift_cuda_chain_free(c);
    sift_cuda_chain_free(c2);
    cudaFree(d);
}

static void test_dist(void **state)
{
    (void)state;
    gt_logits L;
    assert_int_equal(gt_load_logits(32000, &L), 0);
    /* long lists: the whole vocabulary (scaled flatter, so that many bins count) */
    float *x = malloc(32000 * sizeof *x);
    for (int i = 0; i < 32000; i++) x[i] = gt_row(&L, 3)[i] * 0.5f;
    const int n = EMU_OR(160, 1000000);
    chi_square("dist(1)", 32000, x, n);
    chi_square("top_k(5000);dist(1)", 32000, x, n); /* compacted long list */
    /* the tail kernel */
    chi_square("top_k(40);temp(0.8);dist(1)", 32000, gt_row(&L, 5), n);
    chi_square("dist(1)", 2000, x, n);
    free(x);
    free(L.x);
}

/* ---- hybrid ---------------------------------------------------------------------------------- */

static void test_hybrid(void **state)
{
    (void)state;
    dev_logits dl;
    dl_load(&dl, 32000);
    const uint32_t V = 32000, R = EMU_OR(3u, dl.host.n_rows);
    const int steps_want = EMU_OR(6, 128);
    sift_candidates cpu;
    assert_int_equal(sift_candidates_init(&cpu, V), SIFT_OK);
    for (size_t t = 0; t < GT_N_HYBRID_TAILS; t++) {
        char spec[512];
        snprintf(spec, sizeof spec, "top_k(256);temp(0.8);%s", gt_hybrid_tails[t]);
        sift_cuda_chain *c = mk(spec, V, (int32_t)R, 0);
        assert_int_equal(sift_cuda_chain_n_device(c), 2);
        /* one step over the whole batch: the candidates each row's CPU part receives */
        sift_error err;
        assert_int_equal(sift_cuda_chain_run(c, dl.d, V, (int32_t)R, NULL, &err), SIFT_OK);
        assert_int_equal(sift_cuda_chain_fetch(c, NULL, &err), SIFT_OK);
        CK(cudaStreamSynchronize(NULL));
        int identical = 0;
        for (uint32_t r = 0; r < R; r++) {
            sift_candidates dev;
            assert_int_equal(sift_cuda_chain_candidates(c, (int32_t)r, &dev), SIFT_OK);
            assert_int_equal(gt_cpu_apply("top_k(256);temp(0.8)", V, gt_row(&dl.host, r), &cpu), 0);
            char msg[256];
            if (sift__gpu_candidates_same(&dev, &cpu, msg, sizeof msg)) identical++;
            else if (!tie_permutation(&dev, &cpu)) fail_msg("%s row %u: %s", spec, r, msg);
        }
        sift_token *tok = malloc(R * sizeof *tok);
        assert_int_equal(sift_cuda_chain_finish(c, NULL, tok, &err), SIFT_OK);
        sift_cuda_chain_free(c);
        free(tok);
        /* the token stream of one sequence, step by step, against the all-CPU chain */
        c = mk(spec, V, 1, 0);
        sift_chain *ref = sift_chain_from_spec(spec, &(sift_chain_env){.n_vocab = (int32_t)V}, NULL);
        assert_non_null(ref);
        int steps = 0;
        for (; steps < steps_want; steps++) {
            sift_token a;
            run_ok(c, dl.d + (size_t)(steps % dl.host.n_rows) * V, V, 1, &a);
            const sift_token b = sift_chain_sample(ref, gt_row(&dl.host, (uint32_t)steps), (int32_t)V);
            if (a != b) break;
        }
        printf("  %-64s candidates identical on %d/%u rows (rest: ties); %d/%d tokens as the CPU chain\n", spec, identical, R,
               steps, steps_want);
        assert_int_equal(steps, steps_want);
        sift_chain_free(ref);
        sift_cuda_chain_free(c);
    }
    sift_candidates_free(&cpu);
    dl_free(&dl);
}

/* llama.cpp's streams, with dist on the CPU (cpu_dist) */
static void test_reference_streams(void **state)
{
    (void)state;
    const uint32_t vocabs[2] = {32000, 151936};
    for (int v = 0; v < EMU_OR(1, 2); v++) {
        dev_logits dl;
        dl_load(&dl, vocabs[v]);
        for (size_t k = 0; k < GT_N_CHAINS; k++) {
            int32_t want[GT_STEPS];
            assert_int_equal(gt_load_stream(vocabs[v], gt_chains[k].name, want), 0);
            sift_cuda_chain *c = mk(gt_spec(&gt_chains[k], vocabs[v]), vocabs[v], 1, 1);
            char desc[256];
            sift_cuda_chain_describe(c, desc, sizeof desc);
            const int steps = EMU_OR(4, v ? 64 : GT_STEPS);
            int t = 0;
            for (; t < steps; t++) {
                sift_token tok;
                run_ok(c, dl.d + (size_t)(t % dl.host.n_rows) * vocabs[v], vocabs[v], 1, &tok);
                if (tok != want[t]) break;
            }
            printf("  %-26s V=%-6u %3d/%d tokens as llama.cpp (%s)\n", gt_chains[k].name, vocabs[v], t, steps, desc);
            if (t < steps && strcmp(gt_chains[k].name, "topp09_dist_s7") != 0)
                fail_msg("%s V=%u: step %d differs", gt_chains[k].name, vocabs[v], t);
            sift_cuda_chain_free(c);
        }
        dl_free(&dl);
    }
}

/* greedy selected on the device, penalty windows kept there: the CPU chain's tokens */
static void test_device_greedy(void **state)
{
    (void)state;
    static const char *const specs[] = {
        "penalties(64,1.3,0.2,0.1);top_k(50);greedy()",
        "logit_bias(25590:-inf,19910:-2);penalties(16,1.5,0.5,0.5);temp(0.7);greedy()",
        "penalties(64,1.3,0.2,0.1);top_p(0.9,1);min_p(0.05,0);greedy()",
    };
    dev_logits dl;
    dl_load(&dl, 32000);
    for (size_t s = 0; s < sizeof specs / sizeof *specs; s++) {
        sift_cuda_chain *c = mk(specs[s], 32000, 1, 0);
        assert_true(sift_cuda_chain_selects(c));
        sift_chain *cpu = sift_chain_from_spec(specs[s], &(sift_chain_env){.n_vocab = 32000}, NULL);
        for (int t = 0; t < EMU_OR(10, GT_STEPS); t++) {
            sift_token a;
            run_ok(c, dl.d + (size_t)(t % dl.host.n_rows) * 32000, 32000, 1, &a);
            const sift_token b = sift_chain_sample(cpu, gt_row(&dl.host, (uint32_t)t), 32000);
            if (a != b) fail_msg("%s step %d: device %d, cpu %d", specs[s], t, a, b);
        }
        sift_chain_free(cpu);
        sift_cuda_chain_free(c);
    }
    dl_free(&dl);
}

/* Device dist against the host reference of the kernels: the same draws, token for token
 * (a difference would need a draw within an ulp of a boundary: expf on device vs host). */
static void test_device_vs_ref(void **state)
{
    (void)state;
    static const char *const specs[] = {
        "top_k(40);top_p(0.95,0);min_p(0.05,0);temp(0.8);dist(42)",
        "dist(7)",
        "top_p(0.9,1);temp(1.2);dist(3)",
        "penalties(64,1.3,0.2,0.1);min_p(0.02,1);dist(5)",
    };
    dev_logits dl;
    dl_load(&dl, 32000);
    const uint32_t R = EMU_OR(2u, dl.host.n_rows);
    for (size_t s = 0; s < sizeof specs / sizeof *specs; s++) {
        sift_cuda_chain *c = mk(specs[s], 32000, (int32_t)R, 0);
        sift__gpu_plan plan;
        sift__gpu_rowspec rs;
        assert_int_equal(sift__gpu_plan_spec(specs[s], NULL, 32000, 0, &plan, &rs, NULL), SIFT_OK);
        const sift__gpu_rowspec **rows = malloc(R * sizeof *rows);
        for (uint32_t r = 0; r < R; r++) rows[r] = &rs;
        sift__gpu_ref ref;
        assert_int_equal(sift__gpu_ref_init(&ref, &plan, (int32_t)R, 1), SIFT_OK);
        sift_token *tok = malloc(R * sizeof *tok);
        int differ = 0;
        const int steps = EMU_OR(3, 32);
        for (int t = 0; t < steps; t++) {
            run_ok(c, dl.d, 32000, (int32_t)R, tok);
            sift__gpu_ref_run(&ref, rows, (int32_t)R, dl.host.x, 32000);
            for (uint32_t r = 0; r < R; r++) differ += tok[r] != ref.out[r].token;
        }
        printf("  %-56s device vs host reference: %d of %u draws differ\n", specs[s], differ, (unsigned)steps * R);
        assert_int_equal(differ, 0);
        free(tok);
        free(rows);
        sift__gpu_ref_free(&ref);
        sift__gpu_rowspec_free(&rs);
        sift_cuda_chain_free(c);
    }
    dl_free(&dl);
}

/* per-sequence parameters in one batch: each row as its own CPU chain */
static void test_per_sequence(void **state)
{
    (void)state;
    const char *const per[4] = {
        "penalties(64,1.0,0,0);top_k(40);top_p(0.95,0);temp(0.8);greedy()",
        "penalties(32,1.3,0.2,0.1);top_k(5000);top_p(0.5,1);temp(1.3);greedy()",
        "penalties(64,1.0,0,0);top_k(0);top_p(0.99,0);temp(0);greedy()",
        "penalties(64,1.2,0,0);top_k(3);top_p(1.0,0);temp(1.0);greedy()",
    };
    dev_logits dl;
    dl_load(&dl, 32000);
    sift_cuda_chain *c = mk(per[0], 32000, 4, 0);
    sift_chain *cpu[4];
    sift_error err;
    for (int r = 0; r < 4; r++) {
        if (sift_cuda_chain_set_seq(c, r, per[r], NULL, &err) != SIFT_OK) fail_msg("%s", err.msg);
        cpu[r] = sift_chain_from_spec(per[r], &(sift_chain_env){.n_vocab = 32000}, NULL);
    }
    float *d = NULL;
    CK(cudaMalloc((void **)&d, 4 * 32000 * sizeof(float)));
    for (int t = 0; t < EMU_OR(6, 64); t++) {
        for (int r = 0; r < 4; r++)
            CK(cudaMemcpy(d + r * 32000, gt_row(&dl.host, (uint32_t)(t + 7 * r)), 32000 * sizeof(float), cudaMemcpyHostToDevice));
        sift_token tok[4];
        run_ok(c, d, 32000, 4, tok);
        for (int r = 0; r < 4; r++) {
            const sift_token want = sift_chain_sample(cpu[r], gt_row(&dl.host, (uint32_t)(t + 7 * r)), 32000);
            if (tok[r] != want) fail_msg("step %d row %d: %d vs %d", t, r, tok[r], want);
        }
    }
    /* shapes that do not fit are refused */
    assert_int_equal(sift_cuda_chain_set_seq(c, 0, "top_k(40);greedy()", NULL, &err), SIFT_E_INVAL);
    assert_int_equal(sift_cuda_chain_set_seq(c, 9, per[0], NULL, &err), SIFT_E_INVAL);
    for (int r = 0; r < 4; r++) sift_chain_free(cpu[r]);
    cudaFree(d);
    sift_cuda_chain_free(c);
    dl_free(&dl);
}

/* run + fetch captured in a CUDA graph: the same tokens as plain runs */
static void test_graph(void **state)
{
    (void)state;
    dev_logits dl;
    dl_load(&dl, EMU_OR(32000, 151936));
    const uint32_t V = EMU_OR(32000, 151936), R = EMU_OR(2u, dl.host.n_rows);
    const char *spec = "top_k(40);top_p(0.95,0);min_p(0.05,0);temp(0.8);dist(42)";
    sift_cuda_chain *a = mk(spec, V, (int32_t)R, 0), *b = mk(spec, V, (int32_t)R, 0);
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    sift_error err;
    /* parameters are uploaded at the first run; capture a later one */
    sift_token ta[64], tb[64];
    run_ok(a, dl.d, V, (int32_t)R, ta);
    assert_int_equal(sift_cuda_chain_sample(b, dl.d, V, (int32_t)R, (sift_cuda_stream)st, tb, &err), SIFT_OK);
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    assert_int_equal(sift_cuda_chain_run(b, dl.d, V, (int32_t)R, (sift_cuda_stream)st, &err), SIFT_OK);
    assert_int_equal(sift_cuda_chain_fetch(b, (sift_cuda_stream)st, &err), SIFT_OK);
    CK(cudaStreamEndCapture(st, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    for (int t = 0; t < EMU_OR(3, 16); t++) {
        run_ok(a, dl.d, V, (int32_t)R, ta);
        CK(cudaGraphLaunch(ge, st));
        assert_int_equal(sift_cuda_chain_finish(b, (sift_cuda_stream)st, tb, &err), SIFT_OK);
        assert_memory_equal(ta, tb, R * sizeof *ta);
    }
    cudaGraphExecDestroy(ge);
    cudaGraphDestroy(g);
    cudaStreamDestroy(st);
    sift_cuda_chain_free(a);
    sift_cuda_chain_free(b);
    dl_free(&dl);
}

static void test_errors(void **state)
{
    (void)state;
    sift_cuda_params p = sift_cuda_default_params();
    sift_error err;
    p.n_vocab = 0;
    assert_null(sift_cuda_chain_from_spec("greedy()", NULL, &p, &err));
    assert_int_equal(err.status, SIFT_E_INVAL);
    p.n_vocab = 100;
    assert_null(sift_cuda_chain_from_spec("top_k(", NULL, &p, &err));
    assert_int_equal(err.status, SIFT_E_PARSE);
    p.device = 1000;
    assert_null(sift_cuda_chain_from_spec("greedy()", NULL, &p, &err));
    assert_int_equal(err.status, SIFT_E_INVAL);
    p.device = 0;
    p.n_seq_max = 0;
    assert_null(sift_cuda_chain_from_spec("greedy()", NULL, &p, &err));
    p.n_seq_max = 2;
    sift_cuda_chain *c = sift_cuda_chain_from_spec("top_k(10);mirostat_v2(1,5,0.1)", NULL, &p, &err);
    assert_non_null(c);
    float *d = NULL;
    CK(cudaMalloc((void **)&d, 2 * 100 * sizeof(float)));
    CK(cudaMemset(d, 0, 2 * 100 * sizeof(float)));
    assert_int_equal(sift_cuda_chain_run(c, d, 100, 3, NULL, &err), SIFT_E_INVAL);
    assert_int_equal(sift_cuda_chain_run(c, d, 99, 1, NULL, &err), SIFT_E_INVAL);
    assert_int_equal(sift_cuda_chain_run(c, NULL, 100, 1, NULL, &err), SIFT_E_INVAL);
    assert_int_equal(sift_cuda_chain_finish(c, NULL, NULL, &err), SIFT_E_STATE);
    sift_candidates v;
    assert_int_equal(sift_cuda_chain_candidates(c, 0, &v), SIFT_E_STATE);
    /* a top_k larger than the chain's handoff capacity */
    assert_int_equal(sift_cuda_chain_set_seq(c, 1, "top_k(50);mirostat_v2(1,5,0.1)", NULL, &err), SIFT_E_INVAL);
    assert_non_null(strstr(err.msg, "handoff_cap"));
    /* all-equal logits: every cut is a tie; still runs, keeps 10 */
    sift_token tok[2];
    assert_int_equal(sift_cuda_chain_sample(c, d, 100, 2, NULL, tok, &err), SIFT_OK);
    assert_int_equal(sift_cuda_chain_candidates(c, 0, &v), SIFT_OK);
    assert_int_equal(v.size, 10);
    for (int i = 0; i < 10; i++) assert_int_equal(v.id[i], i);
    cudaFree(d);
    sift_cuda_chain_free(c);
}

int main(void)
{
    if (sift_cuda_device_count() == 0) return no_device_checks() ? 1 : 77;
    char name[256];
    sift_cuda_device_name(0, name, sizeof name);
    printf("device 0: %s\n", name);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_masks),
        cmocka_unit_test(test_dist),
        cmocka_unit_test(test_hybrid),
        cmocka_unit_test(test_reference_streams),
        cmocka_unit_test(test_device_greedy),
        cmocka_unit_test(test_device_vs_ref),
        cmocka_unit_test(test_per_sequence),
        cmocka_unit_test(test_graph),
    };
    if (getenv("SIFT_TEST_FILTER")) cmocka_set_test_filter(getenv("SIFT_TEST_FILTER"));
    const int rc = cmocka_run_group_tests(tests, NULL, NULL);
#ifdef SIFT_GPU_EMU
    unsigned long long launches, blocks, barriers;
    sift_emu_stats(&launches, &blocks, &barriers);
    printf("emulated: %llu kernel launches, %llu blocks, %llu barriers\n", launches, blocks, barriers);
#endif
    return rc;
}
