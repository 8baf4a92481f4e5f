/*
 * peer_depth - llama.cpp's prompt and generation speed with D tokens already in the KV cache,
 * the llama.cpp column of `sift bench --model --depth` (bench_model.c).
 *
 *   peer_depth -m MODEL.gguf -d D1,D2,... [-t THREADS] [--n-prompt N] [-n N_GEN] [-r REPS]
 *
 * Why a program of our own: ../shared/peer/peer_generate has no depth option, so the column
 * used to be emulated as the difference of two runs (D + N prompt tokens minus D), a small
 * difference of two noisy times, and its generation ran after a prompt of D + N tokens
 * decoded in one batch. This one does what bench_model.c's depth_model does with sift, step
 * for step, through libllama's C API (prebuilt from npm, see ../shared/peer/README.md; the
 * declarations are the peer folder's hand-written, binary-checked ones):
 *   one model load, one context with n_ctx = max(D) + N + N_GEN, n_batch = n_ubatch =
 *   max(N, 512), one sequence, K/V cache F32, flash attention off (peer_generate's settings);
 *   per depth: clear the cache, decode D tokens (BOS, then copies of the token of "the") in
 *   batches of n_batch, untimed; then per rep (after one warm-up rep): remove the cells from
 *   D on, decode N such tokens at positions D .. D+N-1 in one llama_decode (prompt t/s), then
 *   N_GEN greedy tokens one by one (argmax of the last logits; generation t/s, the argmax
 *   timed with the decode as sift's greedy sampler is).
 *
 * stdout: CSV  model,threads,depth,n_prompt,n_gen,pp_tps,tg_tps,reps  (medians), one line per
 * depth. Built by CMake only when the peer library is present (SIFT_PEER_DIR).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_clock.h"

#include "model_ref_api.h"
#include "peer_backend.h"

void llama_synchronize(struct llama_context *ctx);
bool llama_memory_seq_rm(llama_memory_t mem, llama_seq_id seq_id, llama_pos p0, llama_pos p1);

#define MAX_DEPTHS 16
#define MAX_REPS 64

static void log_quiet(int level, const char *text, void *ud)
{
    (void)ud;
    if (level == 4 /* GGML_LOG_LEVEL_ERROR */) fputs(text, stderr);
}


static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static int usage(void)
{
    fprintf(stderr, "usage: peer_depth -m MODEL.gguf -d D1,D2,... [-t THREADS] [--n-prompt N] [-n N_GEN] [-r REPS]\n");
    return 2;
}

/* tokens at positions p0 .. p0+n-1 in one batch (BOS at position 0, else fill), logits for
 * the last one only */
static int decode_range(struct llama_context *ctx, struct llama_batch *b, llama_token bos, llama_token fill, int p0, int n)
{
    b->n_tokens = n;
    for (int i = 0; i < n; i++) {
        b->token[i] = p0 + i == 0 && bos >= 0 ? bos : fill;
        b->pos[i] = p0 + i;
        b->n_seq_id[i] = 1;
        b->seq_id[i][0] = 0;
        b->logits[i] = (int8_t)(i == n - 1);
    }
    if (llama_decode(ctx, *b) != 0) return 1;
    llama_synchronize(ctx);
    return 0;
}

static llama_token argmax(const float *x, int32_t n)
{
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

int main(int argc, char **argv)
{
    const char *path = NULL;
    int depths[MAX_DEPTHS], n_depths = 0, nth = 1, N = 32, G = 16, reps = 3;
    for (int i = 1; i < argc; i += 2) { /* every option takes a value */
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) return usage();
        if (!strcmp(a, "-m")) path = v;
        else if (!strcmp(a, "-t")) nth = atoi(v);
        else if (!strcmp(a, "--n-prompt")) N = atoi(v);
        else if (!strcmp(a, "-n")) G = atoi(v);
        else if (!strcmp(a, "-r")) reps = atoi(v);
        else if (!strcmp(a, "-d")) {
            char *s = (char *)v, *e;
            while (n_depths < MAX_DEPTHS) {
                const long d = strtol(s, &e, 10);
                if (e == s || d < 0) return usage();
                depths[n_depths++] = (int)d;
                if (*e != ',') break;
                s = e + 1;
            }
        } else return usage();
    }
    if (!path || !n_depths || nth < 1 || N < 1 || G < 1 || reps < 1 || reps > MAX_REPS) return usage();

    llama_log_set(log_quiet, NULL);
    if (peer_load_cpu_backend(NULL, NULL) != 0) {
        fprintf(stderr, "peer_depth: no CPU backend plugin could be registered\n");
        return 1;
    }
    llama_backend_init();
    struct llama_model *model = llama_model_load_from_file(path, llama_model_default_params());
    if (!model) {
        fprintf(stderr, "peer_depth: cannot load %s\n", path);
        return 1;
    }
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    const int32_t n_vocab = llama_vocab_n_tokens(vocab);
    int max_d = 0;
    for (int i = 0; i < n_depths; i++) max_d = depths[i] > max_d ? depths[i] : max_d;
    struct llama_context_params cp = llama_context_default_params();
    const uint32_t n_batch = (uint32_t)(N > 512 ? N : 512);
    cp.n_ctx = (uint32_t)(max_d + N + G);
    cp.n_batch = cp.n_ubatch = n_batch;
    cp.n_seq_max = 1;
    cp.n_threads = cp.n_threads_batch = nth;
    cp.flash_attn_type = 0; /* disabled */
    cp.type_k = cp.type_v = MR_GGML_TYPE_F32;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        fprintf(stderr, "peer_depth: cannot create a context of %u cells\n", cp.n_ctx);
        return 1;
    }
    llama_token the[16];
    const int nt = llama_tokenize(vocab, "the", 3, the, 16, false, false);
    const llama_token fill = nt > 0 ? the[nt - 1] : n_vocab / 2, bos = llama_vocab_bos(vocab);
    struct llama_batch b = llama_batch_init((int32_t)n_batch, 0, 1);
    const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    printf("model,threads,depth,n_prompt,n_gen,pp_tps,tg_tps,reps\n");
    int rc = 0;
    for (int di = 0; di < n_depths && !rc; di++) {
        const int D = depths[di];
        double pp[MAX_REPS], tg[MAX_REPS];
        llama_memory_clear(llama_get_memory(ctx), true);
        for (int at = 0; at < D && !rc; at += (int)n_batch)
            rc = decode_range(ctx, &b, bos, fill, at, D - at < (int)n_batch ? D - at : (int)n_batch);
        for (int r = -1; r < reps && !rc; r++) { /* r = -1: warm-up */
            llama_memory_seq_rm(llama_get_memory(ctx), 0, D, -1);
            double t0 = bench_now_s();
            if ((rc = decode_range(ctx, &b, bos, fill, D, N))) break;
            const double t_pp = bench_now_s() - t0;
            t0 = bench_now_s();
            for (int i = 0; i < G; i++) {
                llama_token tok = argmax(llama_get_logits_ith(ctx, -1), n_vocab);
                b.n_tokens = 1;
                b.token[0] = tok, b.pos[0] = D + N + i, b.n_seq_id[0] = 1, b.seq_id[0][0] = 0, b.logits[0] = 1;
                if (llama_decode(ctx, b) != 0) {
                    rc = 1;
                    break;
                }
                llama_synchronize(ctx);
            }
            if (r >= 0) pp[r] = N / t_pp, tg[r] = G / (bench_now_s() - t0);
        }
        if (rc) {
            fprintf(stderr, "peer_depth: llama_decode failed at depth %d\n", D);
            break;
        }
        printf("%s,%d,%d,%d,%d,%.1f,%.1f,%d\n", name, nth, D, N, G, median(pp, reps), median(tg, reps), reps);
        fflush(stdout);
    }
    llama_batch_free(b);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return rc;
}
