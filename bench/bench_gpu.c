/*
 * bench_gpu.c - `sift bench --gpu`: latency of the device chain per batch.
 *
 * For every vocabulary size x batch size x chain (greedy; top_k 40 / 256 -> dist;
 * top_p 0.95 -> dist; min_p 0.05 -> dist; llama.cpp's default chain) it prints:
 *   run     one sift_cuda_chain_run (the kernels of the device program), replayed from a
 *           CUDA graph, timed with CUDA events: the median over --iters replays
 *   step    run + fetch + finish, host-synchronous (what a decode loop waits for)
 *   hbm     the HBM read limit: the batch's logits (batch x vocab x 4 bytes) over the
 *           device-to-device copy bandwidth measured at the start (bytes read + written)
 *   torch   (--torch) the same sampling in PyTorch in the same session (bench/gpu_torch.py):
 *           the sort-based top-k/top-p path vLLM falls back to, and torch.topk
 * The logits are LM-shaped (Gaussian noise plus a Zipf-like head, 8 distinct rows tiled over
 * the batch), the same for both. The CSV/JSON outputs carry every figure.
 *
 * Without a CUDA device (or in a build without CUDA) it says so and exits 0.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sift.h"

const char sift_bench_gpu_help[] = "device chain latency per batch (CUDA), next to PyTorch and the HBM read limit";

#ifndef SIFT_HAVE_CUDA

int sift_bench_gpu(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    printf("sift bench --gpu: no CUDA device: this sift was built without CUDA (nvcc not found at configure time)\n");
    return 0;
}

#else

#include <cuda_runtime_api.h>

#include "sift-cuda.h"
#include "cli_util.h"

#ifndef SIFT_SOURCE_DIR
#define SIFT_SOURCE_DIR "."
#endif

#define MAXL 16
#define N_BASE 8

typedef struct bench_chain {
    const char *name;
    const char *spec; /* NULL: llama.cpp's default chain (sift_sampling_default_params) */
} bench_chain;

static const bench_chain chains[] = {
    {"greedy", "greedy()"},
    {"topk40", "top_k(40);dist(1)"},
    {"topk256", "top_k(256);dist(1)"},
    {"topp0.95", "top_p(0.95,1);dist(1)"},
    {"minp0.05", "min_p(0.05,1);dist(1)"},
    {"default", NULL},
};
#define N_CHAINS (sizeof chains / sizeof *chains)

typedef struct row_result {
    int vocab, batch;
    const char *chain;
    double run_us, step_us, hbm_us, torch_sort_us, torch_topk_us;
} row_result;

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* LM-shaped logits: N(0, 2) noise, plus a head of 64 tokens at 8 + 12 / sqrt(rank) */
static void make_logits(float *x, int V, int row)
{
    uint64_t s = 0x243F6A8885A308D3ull ^ ((uint64_t)row << 32) ^ (uint64_t)V;
    for (int i = 0; i < V; i += 2) {
        const double u1 = ((double)(splitmix(&s) >> 11) + 0.5) / 9007199254740992.0;
        const double u2 = (double)(splitmix(&s) >> 11) / 9007199254740992.0;
        const double r = sqrt(-2.0 * log(u1)) * 2.0;
        x[i] = (float)(r * cos(6.283185307179586 * u2));
        if (i + 1 < V) x[i + 1] = (float)(r * sin(6.283185307179586 * u2));
    }
    for (int k = 1; k <= 64; k++) x[splitmix(&s) % (uint64_t)V] = (float)(8.0 + 12.0 / sqrt((double)k));
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* device-to-device copy bandwidth, bytes read + written per second */
static double copy_bandwidth(void)
{
    const size_t bytes = (size_t)1 << 30;
    void *a = NULL, *b = NULL;
    if (cudaMalloc(&a, bytes) != cudaSuccess || cudaMalloc(&b, bytes) != cudaSuccess) {
        cudaFree(a);
        (void)cudaGetLastError();
        return 0;
    }
    cudaMemset(a, 1, bytes);
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    double best = 1e30;
    for (int i = 0; i < 12; i++) {
        cudaEventRecord(e0, NULL);
        cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, NULL);
        cudaEventRecord(e1, NULL);
        cudaEventSynchronize(e1);
        float ms;
        cudaEventElapsedTime(&ms, e0, e1);
        if (i >= 2 && ms < best) best = ms;
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cudaFree(a);
    cudaFree(b);
    return 2.0 * (double)bytes / (best * 1e-3);
}

/* median run time over iters graph replays, and the mean host-synchronous step */
static int time_chain(const bench_chain *bc, int V, int B, const float *d_logits, int iters, double *run_us, double *step_us)
{
    sift_cuda_params p = sift_cuda_default_params();
    p.n_vocab = V;
    p.n_seq_max = B;
    sift_error err;
    sift_cuda_chain *c;
    if (bc->spec) {
        c = sift_cuda_chain_from_spec(bc->spec, NULL, &p, &err);
    } else {
        sift_sampling_params sp = sift_sampling_default_params();
        sp.seed = 1;
        c = sift_cuda_chain_from_params(&sp, NULL, &p, &err);
    }
    if (!c) {
        fprintf(stderr, "sift bench --gpu: %s V=%d B=%d: %s\n", bc->name, V, B, err.msg);
        return -1;
    }
    cudaStream_t st;
    cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
    sift_token *tok = malloc((size_t)B * sizeof *tok);
    int rc = -1;
    /* warm-up (uploads parameters), then capture one run */
    for (int i = 0; i < 3; i++)
        if (sift_cuda_chain_sample(c, d_logits, V, B, (sift_cuda_stream)st, tok, &err) != SIFT_OK) goto out;
    cudaGraph_t g = NULL;
    cudaGraphExec_t ge = NULL;
    if (cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal) != cudaSuccess) goto out;
    const sift_status s = sift_cuda_chain_run(c, d_logits, V, B, (sift_cuda_stream)st, &err);
    if (cudaStreamEndCapture(st, &g) != cudaSuccess || s != SIFT_OK || cudaGraphInstantiate(&ge, g, 0) != cudaSuccess) {
        if (s == SIFT_OK) snprintf(err.msg, sizeof err.msg, "graph capture failed");
        goto out_graph;
    }
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    double *t = malloc((size_t)iters * sizeof *t);
    for (int i = 0; i < 5; i++) cudaGraphLaunch(ge, st);
    for (int i = 0; i < iters; i++) {
        cudaEventRecord(e0, st);
        cudaGraphLaunch(ge, st);
        cudaEventRecord(e1, st);
        cudaEventSynchronize(e1);
        float ms;
        cudaEventElapsedTime(&ms, e0, e1);
        t[i] = ms * 1000.0;
    }
    qsort(t, (size_t)iters, sizeof *t, cmp_double);
    *run_us = t[iters / 2];
    free(t);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    /* the whole step, host-synchronous: run + fetch + wait + CPU tails, back to back */
    {
        cudaEventCreate(&e0);
        cudaEventCreate(&e1);
        cudaEventRecord(e0, st);
        const int n = iters < 20 ? iters : 20;
        int ok = 1;
        for (int i = 0; i < n && ok; i++) ok = sift_cuda_chain_sample(c, d_logits, V, B, (sift_cuda_stream)st, tok, &err) == SIFT_OK;
        cudaEventRecord(e1, st);
        cudaEventSynchronize(e1);
        float ms;
        cudaEventElapsedTime(&ms, e0, e1);
        *step_us = ms * 1000.0 / n;
        cudaEventDestroy(e0);
        cudaEventDestroy(e1);
        if (!ok) goto out_graph;
    }
    rc = (cudaGetLastError() == cudaSuccess) ? 0 : -1;
out_graph:
    if (ge) cudaGraphExecDestroy(ge);
    if (g) cudaGraphDestroy(g);
out:
    if (rc) fprintf(stderr, "sift bench --gpu: %s V=%d B=%d: %s\n", bc->name, V, B, err.msg);
    free(tok);
    cudaStreamDestroy(st);
    sift_cuda_chain_free(c);
    return rc;
}

/* PyTorch's figures for the same grid (bench/gpu_torch.py prints CSV lines) */
static void run_torch(const char *logits_dir, const char *vocabs, const char *batches, int iters, row_result *res, int n_res)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "python3 %s/bench/gpu_torch.py --logits-dir %s --vocab %s --batch %s --iters %d 2>&1",
             SIFT_SOURCE_DIR, logits_dir, vocabs, batches, iters);
    FILE *f = popen(cmd, "r");
    if (!f) {
        fprintf(stderr, "sift bench --gpu: cannot run %s\n", cmd);
        return;
    }
    char line[512];
    while (fgets(line, sizeof line, f)) {
        int V, B;
        char chain[32], impl[32];
        double us;
        if (sscanf(line, "torch,%d,%d,%31[^,],%31[^,],%lf", &V, &B, chain, impl, &us) != 5) {
            fputs(line, stderr); /* the script's own messages */
            continue;
        }
        for (int i = 0; i < n_res; i++)
            if (res[i].vocab == V && res[i].batch == B && !strcmp(res[i].chain, chain)) {
                if (!strcmp(impl, "sort")) res[i].torch_sort_us = us;
                else if (!strcmp(impl, "topk")) res[i].torch_topk_us = us;
            }
    }
    pclose(f);
}

int sift_bench_gpu(int argc, char **argv)
{
    int vocab[MAXL] = {32000, 131072, 151936, 262144}, n_vocab = 4;
    int batch[MAXL] = {1, 8, 64, 128, 512}, n_batch = 5;
    const char *only = NULL;
    const char *vocab_s = "32000,131072,151936,262144", *batch_s = "1,8,64,128,512";
    int iters = 100, csv = 0, json = 0, torch = 0, device = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf("usage: sift bench --gpu [--vocab LIST] [--batch LIST] [--chain NAME] [--iters N] [--torch] [--device N] [--csv|--json]\n"
                   "  chains: greedy topk40 topk256 topp0.95 minp0.05 default\n"
                   "  --torch  also time PyTorch (python3 with torch and CUDA) in the same run\n");
            return 0;
        } else if (!strcmp(a, "--vocab") && v) {
            if ((n_vocab = cli_parse_list(v, 1, 1 << 24, vocab, MAXL)) <= 0) return fprintf(stderr, "sift bench --gpu: --vocab: a list like 32000,131072\n"), 2;
            vocab_s = v, i++;
        } else if (!strcmp(a, "--batch") && v) {
            if ((n_batch = cli_parse_list(v, 1, 1 << 24, batch, MAXL)) <= 0) return fprintf(stderr, "sift bench --gpu: --batch: a list like 1,8,64\n"), 2;
            batch_s = v, i++;
        } else if (!strcmp(a, "--chain") && v) {
            only = v, i++;
        } else if (!strcmp(a, "--iters") && v) {
            iters = atoi(v), i++;
            if (iters < 1) return fprintf(stderr, "sift bench --gpu: --iters must be >= 1\n"), 2;
        } else if (!strcmp(a, "--device") && v) {
            device = atoi(v), i++;
        } else if (!strcmp(a, "--torch")) {
            torch = 1;
        } else if (!strcmp(a, "--csv")) {
            csv = 1;
        } else if (!strcmp(a, "--json")) {
            json = 1;
        } else {
            fprintf(stderr, "sift bench --gpu: unknown option '%s'\n", a);
            return 2;
        }
    }
    if (sift_cuda_device_count() == 0) {
        printf("sift bench --gpu: no CUDA device (or no driver): nothing to measure\n");
        return 0;
    }
    if (cudaSetDevice(device) != cudaSuccess) {
        fprintf(stderr, "sift bench --gpu: --device %d: no such device\n", device);
        return 2;
    }
    char name[256];
    sift_cuda_device_name(device, name, sizeof name);
    const double bw = copy_bandwidth();
    if (!csv && !json) printf("device %d: %s; device-to-device copy %.0f GB/s (read + write)\n", device, name, bw / 1e9);

    /* the base rows of every vocabulary, on the host (and in files for PyTorch) */
    char dir[] = "/tmp/sift-bench-gpu-XXXXXX";
    if (torch && !mkdtemp(dir)) torch = 0;
    const int n_res_max = n_vocab * n_batch * (int)N_CHAINS;
    row_result *res = calloc((size_t)n_res_max, sizeof *res);
    int n_res = 0;
    for (int vi = 0; vi < n_vocab; vi++) {
        const int V = vocab[vi];
        float *base = malloc((size_t)N_BASE * (size_t)V * sizeof *base);
        for (int r = 0; r < N_BASE; r++) make_logits(base + (size_t)r * V, V, r);
        if (torch) {
            char path[512];
            snprintf(path, sizeof path, "%s/logits_%d.f32", dir, V);
            FILE *f = fopen(path, "wb");
            if (f) {
                fwrite(base, sizeof *base, (size_t)N_BASE * (size_t)V, f);
                fclose(f);
            }
        }
        for (int bi = 0; bi < n_batch; bi++) {
            const int B = batch[bi];
            float *d = NULL;
            if (cudaMalloc((void **)&d, (size_t)B * (size_t)V * sizeof *d) != cudaSuccess) {
                fprintf(stderr, "sift bench --gpu: V=%d B=%d: out of device memory\n", V, B);
                (void)cudaGetLastError();
                continue;
            }
            for (int r = 0; r < B; r++)
                cudaMemcpy(d + (size_t)r * V, base + (size_t)(r % N_BASE) * V, (size_t)V * sizeof *d, cudaMemcpyHostToDevice);
            for (size_t ci = 0; ci < N_CHAINS; ci++) {
                if (only && strcmp(only, chains[ci].name)) continue;
                row_result *rr = &res[n_res];
                *rr = (row_result){V, B, chains[ci].name, NAN, NAN, (double)B * V * 4.0 / bw * 1e6, NAN, NAN};
                if (time_chain(&chains[ci], V, B, d, iters, &rr->run_us, &rr->step_us) == 0) n_res++;
            }
            cudaFree(d);
        }
        free(base);
    }
    if (torch) run_torch(dir, vocab_s, batch_s, iters, res, n_res);

    if (json) {
        printf("{\"device\": \"%s\", \"copy_gbps\": %.1f, \"results\": [\n", name, bw / 1e9);
        for (int i = 0; i < n_res; i++)
            printf("  {\"vocab\": %d, \"batch\": %d, \"chain\": \"%s\", \"run_us\": %.2f, \"step_us\": %.2f, \"hbm_us\": %.2f, "
                   "\"torch_sort_us\": %.2f, \"torch_topk_us\": %.2f}%s\n",
                   res[i].vocab, res[i].batch, res[i].chain, res[i].run_us, res[i].step_us, res[i].hbm_us,
                   isnan(res[i].torch_sort_us) ? -1.0 : res[i].torch_sort_us,
                   isnan(res[i].torch_topk_us) ? -1.0 : res[i].torch_topk_us, i + 1 < n_res ? "," : "");
        printf("]}\n");
    } else if (csv) {
        printf("vocab,batch,chain,run_us,step_us,hbm_us,torch_sort_us,torch_topk_us\n");
        for (int i = 0; i < n_res; i++)
            printf("%d,%d,%s,%.2f,%.2f,%.2f,%.2f,%.2f\n", res[i].vocab, res[i].batch, res[i].chain, res[i].run_us, res[i].step_us,
                   res[i].hbm_us, res[i].torch_sort_us, res[i].torch_topk_us);
    } else {
        printf("%7s %5s %-9s %10s %10s %9s %12s %12s %8s\n", "vocab", "batch", "chain", "run µs", "step µs", "hbm µs",
               "torch sort", "torch topk", "x sort");
        for (int i = 0; i < n_res; i++) {
            const row_result *r = &res[i];
            printf("%7d %5d %-9s %10.1f %10.1f %9.1f", r->vocab, r->batch, r->chain, r->run_us, r->step_us, r->hbm_us);
            if (isnan(r->torch_sort_us)) printf(" %12s", "-");
            else printf(" %12.1f", r->torch_sort_us);
            if (isnan(r->torch_topk_us)) printf(" %12s", "-");
            else printf(" %12.1f", r->torch_topk_us);
            if (isnan(r->torch_sort_us)) printf(" %8s\n", "-");
            else printf(" %7.1fx\n", r->torch_sort_us / r->run_us);
        }
        /* the goals, for the reader (benchmarks never fail on a time) */
        printf("\ngoals (H100): top_k 256 -> dist, batch 64: <= 30 us at V=131072, <= 49 us at V=262144; "
               "top_p 0.95 -> dist, batch 128, V=131072: <= 70 us; every row >= 5x the PyTorch sort path\n");
        for (int i = 0; i < n_res; i++) {
            const row_result *r = &res[i];
            double goal = 0;
            if (!strcmp(r->chain, "topk256") && r->batch == 64 && r->vocab == 131072) goal = 30;
            if (!strcmp(r->chain, "topk256") && r->batch == 64 && r->vocab == 262144) goal = 49;
            if (!strcmp(r->chain, "topp0.95") && r->batch == 128 && r->vocab == 131072) goal = 70;
            if (goal > 0) printf("  %-9s B=%-4d V=%-7d %.1f us (goal %.0f us): %s\n", r->chain, r->batch, r->vocab, r->run_us, goal,
                                 r->run_us <= goal ? "met" : "NOT met");
        }
    }
    if (torch) {
        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        if (system(cmd) != 0) fprintf(stderr, "sift bench --gpu: could not remove %s\n", dir);
    }
    free(res);
    return 0;
}

#endif
