/*
 * bench_model.c - `sift bench --model`: prompt processing and generation speed of the
 * runtime on a GGUF model, next to llama.cpp's in the same run.
 *
 *   sift bench --model [-m MODEL.gguf ...] [-t THREADS] [--n-prompt N] [-n N_GEN] [-r REPS]
 *                      [--peer PATH | --no-peer] [--csv | --json]
 *
 * One rep does exactly what ../shared/peer/peer_generate does with llama.cpp, so the two
 * columns measure the same work: load the model and make a context (load ms; n_ctx =
 * n_batch = min(2048, n_ctx_train), F32 K/V, THREADS threads); decode a prompt of N tokens
 * (BOS, then N-1 copies of the token of "the") in one call with logits for the last
 * position only (prompt tokens/s); then N_GEN times: sample with a greedy chain from the
 * last logits, decode that token at the next position (generation tokens/s = N_GEN /
 * (decode + sampling time); sampling µs per token on its own).
 *
 * The engines alternate, one rep each (sift, llama.cpp, sift, ...), after one untimed
 * warm-up rep of sift (peer_generate makes its own), so a busy machine disturbs both
 * alike; the table shows the median of the reps of each engine and sift's ratio. The peer
 * is /tmp/sift-peer/peer_generate (built by `make -C ../shared/peer`), run once per rep
 * with -r 1; without it only sift's rows are printed.
 *
 * --batch LIST measures something else: what continuous batching gains, i.e. the cost of
 * one generation step for B sequences at once (B single-token sequences in one
 * sift_decode, as `sift serve` does with B busy slots) against B = 1:
 *
 *   sift bench --model -m MODEL.gguf --batch 1,2,4,8,16 [-t 1,2] [--n-prompt P] [-n STEPS] [-r REPS]
 *
 * One context per model and thread count holds the largest B sequences. For each B, the
 * cache is cleared, B different prompts of P tokens are decoded (untimed), then STEPS
 * steps each decode one greedy token for every sequence (positions P .. P+STEPS-1, the
 * same for every B, so attention costs the same per token); only the decode calls are
 * timed. The batch sizes alternate inside each rep (B = 1, 2, 4, ..., then again) after
 * an untimed warm-up (which also faults in the mapped weights), and the table shows the
 * median per B: ms per step, µs per token, tokens/s, and the speed-up per token over B = 1.
 * Sequence 0 has the same prompt for every B, so its greedy tokens must be the same
 * whatever the batch size (the runtime's logits do not depend on the batch): a difference
 * is reported as an error.
 *
 * --depth LIST measures attention at depth: prompt and generation tokens/s with D tokens
 * already in the KV cache (depth_model below), next to llama.cpp doing the same steps in
 * bench/peer_depth.c (built next to sift when the peer library is present; --peer-depth).
 * Without it the llama.cpp column is emulated with peer_generate, which has no depth option
 * (peer_depth_emulated below).
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_clock.h"
#include <unistd.h>

#include "cli_util.h"
#include "sift.h"

const char sift_bench_model_help[] = "prompt and generation tokens/s on GGUF models, next to llama.cpp (peer_generate)";

#define MAX_MODELS 16
#define MAX_REPS 100

typedef struct rep {
    double load_ms, pp_tps, tg_tps, sample_us;
} rep;


static rep median(const rep *r, int n)
{
    double v[MAX_REPS];
    rep m;
#define MED(f)                                   \
    for (int i = 0; i < n; i++) v[i] = r[i].f;   \
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);  \
    m.f = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    MED(load_ms)
    MED(pp_tps)
    MED(tg_tps)
    MED(sample_us)
#undef MED
    return m;
}

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

/* One sift rep (see the top comment); gen receives the generated ids. 0 or an exit code. */
static int sift_rep(const char *path, int n_threads, int n_prompt, int n_gen, sift_token *gen, rep *r)
{
    sift_error err = {0};
    const double t0 = bench_now_s();
    sift_model *model = sift_model_load(path, &err);
    if (!model) {
        fprintf(stderr, "sift bench --model: %s: %s\n", path, err.msg);
        return 1;
    }
    sift_model_info info;
    sift_model_get_info(model, &info);
    sift_context_params cp = sift_context_default_params();
    cp.n_ctx = info.n_ctx_train < 2048 ? (uint32_t)info.n_ctx_train : 2048;
    cp.n_batch = cp.n_ctx;
    cp.n_threads = cp.n_threads_batch = n_threads;
    sift_context *ctx = sift_context_new(model, cp, &err);
    if (!ctx) {
        fprintf(stderr, "sift bench --model: %s: %s\n", path, err.msg);
        sift_model_free(model);
        return 1;
    }
    r->load_ms = (bench_now_s() - t0) * 1e3;
    int rc = 1;
    sift_chain *chain = NULL;
    sift_batch b = {0};
    if ((uint32_t)(n_prompt + n_gen) > cp.n_ctx) {
        fprintf(stderr, "sift bench --model: %d + %d tokens do not fit n_ctx %u\n", n_prompt, n_gen, cp.n_ctx);
        rc = 2;
        goto done;
    }
    /* the prompt: BOS, then copies of the token of "the" (as peer_generate --n-prompt) */
    const sift_vocab *vocab = sift_model_vocab(model);
    sift_token the[16];
    const int32_t nt = sift_tokenize(vocab, "the", 3, the, 16, false, false);
    const sift_token fill = nt > 0 ? the[nt - 1] : info.n_vocab / 2, bos = sift_vocab_bos(vocab);
    if (sift_batch_init(&b, n_prompt, 1) != SIFT_OK) goto done;
    const int s0 = 0;
    for (int i = 0; i < n_prompt; i++) sift_batch_add(&b, i == 0 && bos >= 0 ? bos : fill, i, &s0, 1, i == n_prompt - 1);

    double ta = bench_now_s();
    if (sift_decode(ctx, &b, &err) != SIFT_OK) {
        fprintf(stderr, "sift bench --model: prompt: %s\n", err.msg);
        goto done;
    }
    r->pp_tps = n_prompt / (bench_now_s() - ta);

    sift_chain_env env = {.n_vocab = info.n_vocab, .vocab = NULL, .eot = SIFT_TOKEN_NULL, .default_seed = 42};
    chain = sift_chain_from_spec("greedy()", &env, &err);
    if (!chain) goto done;
    double t_sample = 0, t_decode = 0;
    for (int i = 0; i < n_gen; i++) {
        const double t1 = bench_now_s();
        const sift_token tok = sift_chain_sample(chain, sift_get_logits_ith(ctx, -1), info.n_vocab);
        const double t2 = bench_now_s();
        gen[i] = tok;
        sift_batch_clear(&b);
        sift_batch_add(&b, tok, n_prompt + i, &s0, 1, true);
        if (sift_decode(ctx, &b, &err) != SIFT_OK) {
            fprintf(stderr, "sift bench --model: generation: %s\n", err.msg);
            goto done;
        }
        t_sample += t2 - t1;
        t_decode += bench_now_s() - t2;
    }
    r->tg_tps = n_gen / (t_sample + t_decode);
    r->sample_us = t_sample / n_gen * 1e6;
    rc = 0;
done:
    sift_batch_free(&b);
    sift_chain_free(chain);
    sift_context_free(ctx);
    sift_model_free(model);
    return rc;
}

/* One peer_generate rep: its CSV row "model,threads,n_prompt,n_gen,load_ms,pp_tps,tg_tps,sample_us,rep". */
static int peer_rep(const char *peer, const char *path, int n_threads, int n_prompt, int n_gen, rep *r)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' -m '%s' -t %d --n-prompt %d -n %d -r 1 --no-header 2>/dev/null", peer, path, n_threads,
             n_prompt, n_gen);
    FILE *p = popen(cmd, "r");
    if (!p) return 1;
    char line[1024];
    int ok = 0;
    while (fgets(line, sizeof line, p)) {
        char name[512];
        int th, np, ng;
        if (!ok && sscanf(line, "%511[^,],%d,%d,%d,%lf,%lf,%lf,%lf", name, &th, &np, &ng, &r->load_ms, &r->pp_tps, &r->tg_tps,
                          &r->sample_us) == 8)
            ok = 1;
    }
    const int st = pclose(p);
    return ok && st == 0 ? 0 : 1;
}

/* ---- --batch: the cost of a generation step by batch size ---------------------------------- */

#define MAX_LIST 16   /* entries of --batch and -t */
#define MAX_BATCH 256 /* sequences in one step */

/* Prompt token i of sequence s: a fixed pseudo-random id, so sequences differ from each
 * other but sequence s is the same in every measurement. */
static sift_token prompt_token(int s, int i, int32_t n_vocab)
{
    uint32_t h = (uint32_t)s * 2654435761u ^ (uint32_t)(i + 1) * 2246822519u;
    h ^= h >> 15, h *= 2654435761u, h ^= h >> 13;
    return (sift_token)(h % (uint32_t)n_vocab);
}

static sift_token argmax(const float *x, int32_t n)
{
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* One measurement: B sequences of P prompt tokens (untimed), then `steps` steps of one
 * greedy token per sequence; *secs = the time in the steps' sift_decode calls; seq0[] =
 * sequence 0's generated tokens. 0 or 1. */
static int batch_rep(sift_context *ctx, sift_batch *b, int32_t n_vocab, sift_token bos, int B, int P, int steps,
                     sift_token *seq0, double *secs)
{
    sift_error err = {0};
    int32_t out_idx[MAX_BATCH];
    sift_kv_clear(ctx);
    sift_batch_clear(b);
    for (int s = 0; s < B; s++) {
        for (int i = 0; i < P; i++)
            sift_batch_add(b, i == 0 && bos >= 0 ? bos : prompt_token(s, i, n_vocab), i, &s, 1, i == P - 1);
        out_idx[s] = s * P + P - 1;
    }
    if (sift_decode(ctx, b, &err) != SIFT_OK) {
        fprintf(stderr, "sift bench --model: prompts (batch %d): %s\n", B, err.msg);
        return 1;
    }
    *secs = 0;
    for (int step = 0; step < steps; step++) {
        sift_batch_clear(b);
        for (int s = 0; s < B; s++) {
            const float *lg = sift_get_logits_ith(ctx, out_idx[s]);
            if (!lg) {
                fprintf(stderr, "sift bench --model: no logits for sequence %d\n", s);
                return 1;
            }
            const sift_token t = argmax(lg, n_vocab);
            if (s == 0) seq0[step] = t;
            sift_batch_add(b, t, P + step, &s, 1, true);
            out_idx[s] = s;
        }
        const double t0 = bench_now_s();
        if (sift_decode(ctx, b, &err) != SIFT_OK) {
            fprintf(stderr, "sift bench --model: step %d (batch %d): %s\n", step, B, err.msg);
            return 1;
        }
        *secs += bench_now_s() - t0;
    }
    return 0;
}

typedef struct batch_opts {
    const int *batches, *threads;
    int n_batches, n_threads, n_prompt, steps, reps;
    bool csv, json;
} batch_opts;

static double median_of(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The --batch suite on one model, for every thread count. 0 or an exit code. */
static int batch_model(const char *path, const batch_opts *o, bool *first_json)
{
    sift_error err = {0};
    sift_model *model = sift_model_load(path, &err);
    if (!model) {
        fprintf(stderr, "sift bench --model: %s: %s\n", path, err.msg);
        return 1;
    }
    sift_model_info info;
    sift_model_get_info(model, &info);
    int max_b = 0;
    for (int i = 0; i < o->n_batches; i++) max_b = o->batches[i] > max_b ? o->batches[i] : max_b;
    sift_context_params cp = sift_context_default_params();
    cp.n_seq_max = (uint32_t)max_b;
    cp.n_ctx = (uint32_t)(max_b * (o->n_prompt + o->steps));
    cp.n_batch = (uint32_t)(max_b * o->n_prompt);
    sift_context *ctx = sift_context_new(model, cp, &err);
    sift_batch b = {0};
    sift_token *seq0 = malloc((size_t)o->steps * sizeof *seq0), *ref0 = malloc((size_t)o->steps * sizeof *ref0);
    double *secs = malloc((size_t)o->n_batches * o->reps * sizeof *secs), tmp[MAX_REPS];
    int rc = 1;
    if (!ctx) {
        fprintf(stderr, "sift bench --model: %s: %s\n", path, err.msg);
        goto done;
    }
    if (!seq0 || !ref0 || !secs || sift_batch_init(&b, max_b * o->n_prompt, 1) != SIFT_OK) goto done;
    const char *name = base_name(path);
    const sift_token bos = sift_vocab_bos(sift_model_vocab(model));
    if (!o->csv && !o->json)
        printf("%s: %s, %.1f MB of weights, dim %d, %d layers, %d/%d heads, vocab %d; %d prompt tokens, %d steps, "
               "median of %d reps\n",
               name, sift_type_name(info.main_type), (double)info.n_bytes / 1e6, info.n_embd, info.n_layer, info.n_head,
               info.n_head_kv, info.n_vocab, o->n_prompt, o->steps, o->reps);
    for (int ti = 0; ti < o->n_threads; ti++) {
        const int nth = o->threads[ti];
        sift_set_n_threads(ctx, nth, nth);
        double warm;
        /* warm-up: the smallest and the largest batch, untimed; the reference tokens */
        if (batch_rep(ctx, &b, info.n_vocab, bos, o->batches[0], o->n_prompt, o->steps, ref0, &warm) ||
            batch_rep(ctx, &b, info.n_vocab, bos, max_b, o->n_prompt, o->steps, seq0, &warm))
            goto done;
        bool same = !memcmp(seq0, ref0, (size_t)o->steps * sizeof *seq0);
        for (int r = 0; r < o->reps; r++)
            for (int k = 0; k < o->n_batches; k++) {
                if (batch_rep(ctx, &b, info.n_vocab, bos, o->batches[k], o->n_prompt, o->steps, seq0, &secs[k * o->reps + r]))
                    goto done;
                if (memcmp(seq0, ref0, (size_t)o->steps * sizeof *seq0)) same = false;
            }
        if (!same) {
            fprintf(stderr, "sift bench --model: %s: sequence 0's greedy tokens depend on the batch size\n", name);
            goto done;
        }
        if (!o->csv && !o->json)
            printf("%-30s %7s %6s %10s %10s %10s %16s\n", "model", "threads", "batch", "ms/step", "us/token", "tokens/s",
                   "speed-up/token");
        for (int k = 0; k < o->n_batches; k++) {
            const int B = o->batches[k];
            /* the speed-up within each rep (the batch sizes of a rep ran back to back), then its median */
            for (int r = 0; r < o->reps; r++) tmp[r] = (secs[r] / o->batches[0]) / (secs[k * o->reps + r] / B);
            const double gain = median_of(tmp, o->reps);
            for (int r = 0; r < o->reps; r++) tmp[r] = secs[k * o->reps + r];
            const double s = median_of(tmp, o->reps);
            const double ms_step = s / o->steps * 1e3, us_tok = s / ((double)o->steps * B) * 1e6, tps = (double)o->steps * B / s;
            if (o->csv)
                printf("%s,%d,%d,%d,%d,%.4f,%.2f,%.1f,%.3f,%d\n", name, nth, B, o->n_prompt, o->steps, ms_step, us_tok, tps, gain,
                       o->reps);
            else if (o->json) {
                printf("%s{\"model\":\"%s\",\"threads\":%d,\"batch\":%d,\"n_prompt\":%d,\"steps\":%d,\"ms_per_step\":%.4f,"
                       "\"us_per_token\":%.2f,\"tokens_per_s\":%.1f,\"speedup_per_token\":%.3f,\"reps\":%d}",
                       *first_json ? "" : ",", name, nth, B, o->n_prompt, o->steps, ms_step, us_tok, tps, gain, o->reps);
                *first_json = false;
            } else
                printf("%-30s %7d %6d %10.3f %10.1f %10.1f %15.2fx\n", name, nth, B, ms_step, us_tok, tps, gain);
        }
        fflush(stdout);
    }
    rc = 0;
done:
    free(seq0);
    free(ref0);
    free(secs);
    sift_batch_free(&b);
    sift_context_free(ctx);
    sift_model_free(model);
    return rc;
}

/* ---- --depth: speed with D tokens already in the KV cache ------------------------------------ */

typedef struct depth_opts {
    const int *depths, *threads;
    int n_depths, n_threads, n_prompt, n_gen, reps;
    const char *peer;       /* NULL: sift only */
    const char *peer_depth; /* bench/peer_depth.c's program; NULL: peer_generate, emulated */
    bool csv;
} depth_opts;

/* Decode tok at positions p0 .. p0+n-1 of sequence 0 in chunks of n_batch, logits for the
 * last one only. */
static int decode_run(sift_context *ctx, sift_batch *b, int n_batch, sift_token bos, sift_token fill, int p0, int n)
{
    sift_error err = {0};
    const int s0 = 0;
    for (int at = 0; at < n; at += n_batch) {
        sift_batch_clear(b);
        const int k = n - at < n_batch ? n - at : n_batch;
        for (int i = 0; i < k; i++)
            sift_batch_add(b, p0 + at + i == 0 && bos >= 0 ? bos : fill, p0 + at + i, &s0, 1, at + i == n - 1);
        if (sift_decode(ctx, b, &err) != SIFT_OK) {
            fprintf(stderr, "sift bench --model --depth: decode at %d: %s\n", p0 + at, err.msg);
            return 1;
        }
    }
    return 0;
}

/* peer_generate at depth D, emulated (it has no depth option): run A decodes D + N prompt
 * tokens then generates (its generation runs at depth D + N, as sift's below); run B decodes
 * the D tokens alone; prompt t/s at depth D = N / (time A - time B). Its context is
 * min(2048, n_ctx_train), so deeper runs are not possible (returns 1). */
static int peer_depth_emulated(const char *peer, const char *path, int nth, int D, int N, int n_gen, rep *r)
{
    rep a, b;
    if (peer_rep(peer, path, nth, D + N, n_gen, &a) != 0) return 1;
    r->load_ms = a.load_ms;
    r->tg_tps = a.tg_tps;
    r->sample_us = a.sample_us;
    r->pp_tps = a.pp_tps;
    if (D == 0) return 0;
    if (peer_rep(peer, path, nth, D, 1, &b) != 0) return 1;
    const double t = (D + N) / a.pp_tps - D / b.pp_tps;
    r->pp_tps = t > 0 ? N / t : 0;
    return 0;
}

/* llama.cpp at depth D with bench/peer_depth.c: the same steps as depth_model's, REPS reps
 * after a warm-up, medians in r. */
static int peer_depth_run(const char *prog, const char *path, int nth, int D, int N, int n_gen, int reps, rep *r)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' -m '%s' -t %d -d %d --n-prompt %d -n %d -r %d 2>/dev/null", prog, path, nth, D, N, n_gen,
             reps);
    FILE *p = popen(cmd, "r");
    if (!p) return 1;
    char line[1024];
    int ok = 0;
    while (fgets(line, sizeof line, p)) {
        char name[512];
        int th, d, np, ng;
        if (!ok && sscanf(line, "%511[^,],%d,%d,%d,%d,%lf,%lf", name, &th, &d, &np, &ng, &r->pp_tps, &r->tg_tps) == 7 && d == D)
            ok = 1;
    }
    const int st = pclose(p);
    return ok && st == 0 ? 0 : 1;
}

/* The --depth suite on one model: for each depth D, the KV cache is filled with D tokens
 * (BOS and copies of "the", untimed, once per depth and thread count); each rep removes
 * what follows them, decodes N prompt tokens at positions D .. D+N-1 in one call (prompt
 * t/s at depth D), then N_GEN greedy tokens one by one (generation t/s at depth D+N). */
static int depth_model(const char *path, const depth_opts *o, bool *header)
{
    sift_error err = {0};
    sift_model *model = sift_model_load(path, &err);
    if (!model) {
        fprintf(stderr, "sift bench --model: %s: %s\n", path, err.msg);
        return 1;
    }
    sift_model_info info;
    sift_model_get_info(model, &info);
    int max_d = 0;
    for (int i = 0; i < o->n_depths; i++) max_d = o->depths[i] > max_d ? o->depths[i] : max_d;
    sift_context_params cp = sift_context_default_params();
    cp.n_ctx = (uint32_t)(max_d + o->n_prompt + o->n_gen);
    cp.n_batch = (uint32_t)(o->n_prompt > 512 ? o->n_prompt : 512);
    sift_context *ctx = sift_context_new(model, cp, &err);
    sift_batch b = {0};
    sift_chain *chain = NULL;
    int rc = 1;
    if (!ctx || sift_batch_init(&b, (int32_t)cp.n_batch, 1) != SIFT_OK) {
        fprintf(stderr, "sift bench --model --depth: %s: %s\n", path, err.msg);
        goto done;
    }
    sift_chain_env env = {.n_vocab = info.n_vocab, .vocab = NULL, .eot = SIFT_TOKEN_NULL, .default_seed = 42};
    chain = sift_chain_from_spec("greedy()", &env, &err);
    if (!chain) goto done;
    const sift_vocab *vocab = sift_model_vocab(model);
    sift_token the[16];
    const int32_t nt = sift_tokenize(vocab, "the", 3, the, 16, false, false);
    const sift_token fill = nt > 0 ? the[nt - 1] : info.n_vocab / 2, bos = sift_vocab_bos(vocab);
    const char *name = base_name(path);
    if (*header) {
        if (o->csv) printf("model,engine,threads,depth,n_prompt,n_gen,pp_tps,tg_tps,reps\n");
        else
            printf("%-26s %-10s %7s %6s %8s %6s %12s %12s\n", "model (median of reps)", "engine", "threads", "depth",
                   "n_prompt", "n_gen", "prompt t/s", "gen t/s");
        *header = false;
    }
    for (int ti = 0; ti < o->n_threads; ti++) {
        const int nth = o->threads[ti];
        sift_set_n_threads(ctx, nth, nth);
        for (int di = 0; di < o->n_depths; di++) {
            const int D = o->depths[di], N = o->n_prompt;
            rep rs[MAX_REPS], rp[MAX_REPS];
            int n_peer = 0;
            sift_kv_clear(ctx);
            if (D > 0 && decode_run(ctx, &b, (int)cp.n_batch, bos, fill, 0, D)) goto done;
            for (int r = -1; r < o->reps; r++) { /* r = -1: warm-up */
                if (sift_kv_seq_rm(ctx, 0, D, -1) != SIFT_OK) { /* a recurrent state (qwen35): the depth again */
                    sift_kv_clear(ctx);
                    if (D > 0 && decode_run(ctx, &b, (int)cp.n_batch, bos, fill, 0, D)) goto done;
                }
                double t0 = bench_now_s();
                if (decode_run(ctx, &b, (int)cp.n_batch, bos, fill, D, N)) goto done;
                const double t_pp = bench_now_s() - t0;
                t0 = bench_now_s();
                for (int i = 0; i < o->n_gen; i++) {
                    const sift_token tok = sift_chain_sample(chain, sift_get_logits_ith(ctx, -1), info.n_vocab);
                    sift_batch_clear(&b);
                    const int s0 = 0;
                    sift_batch_add(&b, tok, D + N + i, &s0, 1, true);
                    if (sift_decode(ctx, &b, &err) != SIFT_OK) {
                        fprintf(stderr, "sift bench --model --depth: generation: %s\n", err.msg);
                        goto done;
                    }
                }
                if (r < 0) continue;
                rs[r] = (rep){.pp_tps = N / t_pp, .tg_tps = o->n_gen / (bench_now_s() - t0)};
                if (!o->peer_depth && o->peer && D + N + o->n_gen <= (info.n_ctx_train < 2048 ? info.n_ctx_train : 2048) &&
                    peer_depth_emulated(o->peer, path, nth, D, N, o->n_gen, &rp[n_peer]) == 0)
                    n_peer++;
            }
            if (o->peer_depth) { /* one run of the reps, right after sift's */
                if (peer_depth_run(o->peer_depth, path, nth, D, N, o->n_gen, o->reps, &rp[0]) == 0) n_peer = 1;
                else fprintf(stderr, "sift bench --model --depth: %s failed on %s at depth %d\n", o->peer_depth, path, D);
            }
            const rep ms = median(rs, o->reps);
            if (o->csv) printf("%s,sift,%d,%d,%d,%d,%.1f,%.1f,%d\n", name, nth, D, N, o->n_gen, ms.pp_tps, ms.tg_tps, o->reps);
            else
                printf("%-26s %-10s %7d %6d %8d %6d %12.1f %12.1f\n", name, "sift", nth, D, N, o->n_gen, ms.pp_tps, ms.tg_tps);
            if (n_peer) {
                const rep mp = median(rp, n_peer);
                if (o->csv)
                    printf("%s,llama.cpp,%d,%d,%d,%d,%.1f,%.1f,%d\n", name, nth, D, N, o->n_gen, mp.pp_tps, mp.tg_tps, n_peer);
                else {
                    /* an emulated prompt figure is a difference of two runs: noise can make it meaningless */
                    char pp[32], ratio[32];
                    snprintf(pp, sizeof pp, mp.pp_tps > 0 ? "%.1f" : "n/a", mp.pp_tps);
                    snprintf(ratio, sizeof ratio, mp.pp_tps > 0 ? "%.2fx" : "n/a", ms.pp_tps / mp.pp_tps);
                    printf("%-26s %-10s %7d %6d %8d %6d %12s %12.1f\n", name, "llama.cpp", nth, D, N, o->n_gen, pp, mp.tg_tps);
                    printf("%-26s %-10s %7s %6s %8s %6s %12s %11.2fx\n", name, "sift/llama", "", "", "", "", ratio,
                           ms.tg_tps / mp.tg_tps);
                }
            } else if ((o->peer || o->peer_depth) && !o->csv) {
                printf("%-26s %-10s %7d %6d %8d %6d %12s %12s\n", name, "llama.cpp", nth, D, N, o->n_gen, "n/a", "n/a");
            }
            fflush(stdout);
        }
    }
    rc = 0;
done:
    sift_chain_free(chain);
    sift_batch_free(&b);
    sift_context_free(ctx);
    sift_model_free(model);
    return rc;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: sift bench --model [-m MODEL.gguf ...] [-t THREADS] [--n-prompt N] [-n N_GEN] [-r REPS]\n"
               "                          [--peer PATH | --no-peer] [--csv | --json]\n"
               "       sift bench --model --batch 1,2,4,8,16 [-m MODEL.gguf ...] [-t 1,2] [--n-prompt P] [-n STEPS] [-r REPS]\n"
               "       sift bench --model --depth 0,1024,4096 [-m MODEL.gguf ...] [-t 1,2] [--n-prompt N] [-n N_GEN] [-r REPS]\n\n"
               "  -m FILE        a model (repeatable; default: the shared stories260K and llama-2-tiny-random)\n"
               "  -t N[,N...]    threads, for both engines (default 1); a list runs each in turn\n"
               "  --n-prompt N   prompt tokens (default 512; with --batch: per sequence, default 32)\n"
               "  -n N           generated tokens (default 128; with --batch: steps, default 16)\n"
               "  -r N           reps per engine, interleaved (default 5)\n"
               "  --peer PATH    llama.cpp's peer_generate (default /tmp/sift-peer/peer_generate)\n"
               "  --peer-depth PATH  llama.cpp at depth for --depth (default: bench/peer_depth.c as built next to sift)\n"
               "  --no-peer      sift only\n"
               "  --batch LIST   instead: the cost of one generation step of B sequences in one decode, for each\n"
               "                 B in LIST (1..%d), against the first B (continuous batching's gain)\n"
               "  --depth LIST   instead: prompt and generation t/s with D tokens already in the KV cache, for each\n"
               "                 D in LIST (e.g. 0,1024,4096); llama.cpp's column from peer_depth (the same steps), or\n"
               "                 without it emulated with peer_generate (D + N prompt tokens minus D, n/a past 2048)\n"
               "  --draft FILE, --lookup N  instead: speculative decoding against plain generation (sift bench --spec --help)\n"
               "  --csv, --json  machine-readable output (--depth: --csv only)\n",
            MAX_BATCH);
}

int sift_bench_spec(int argc, char **argv); /* bench_spec.c */

int sift_bench_model(int argc, char **argv)
{
    /* --draft / --lookup: speculative decoding's suite (bench_spec.c) */
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--draft") || !strcmp(argv[i], "--lookup")) return sift_bench_spec(argc, argv);
    const char *models[MAX_MODELS];
    int n_models = 0, n_prompt = 0, n_gen = 0, reps = 5;
    int threads[MAX_LIST] = {1}, n_threads_list = 1, batches[MAX_LIST], n_batches = 0, depths[MAX_LIST], n_depths = 0;
    const char *peer = "/tmp/sift-peer/peer_generate";
#ifdef SIFT_PEER_DEPTH
    const char *peer_depth = SIFT_PEER_DEPTH;
#else
    const char *peer_depth = NULL;
#endif
    bool use_peer = true, csv = false, json = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        long n = v ? strtol(v, &end, 10) : 0;
        const bool num = v && end != v && !*end;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "-m") && v) {
            if (n_models == MAX_MODELS) return fprintf(stderr, "sift bench --model: -m: at most %d models\n", MAX_MODELS), 2;
            models[n_models++] = v, i++;
        } else if (!strcmp(a, "-t") && v && (n_threads_list = cli_parse_list(v, 1, 256, threads, MAX_LIST)) > 0) {
            i++;
        } else if (!strcmp(a, "--batch") && v && (n_batches = cli_parse_list(v, 1, MAX_BATCH, batches, MAX_LIST)) > 0) {
            i++;
        } else if (!strcmp(a, "--depth") && v && (n_depths = cli_parse_list(v, 0, 1 << 20, depths, MAX_LIST)) > 0) {
            i++;
        } else if (!strcmp(a, "--n-prompt") && num && n >= 1 && n <= 2047) {
            n_prompt = (int)n, i++;
        } else if (!strcmp(a, "-n") && num && n >= 1 && n <= 2047) {
            n_gen = (int)n, i++;
        } else if (!strcmp(a, "-r") && num && n >= 1 && n <= MAX_REPS) {
            reps = (int)n, i++;
        } else if (!strcmp(a, "--peer") && v) {
            peer = v, i++;
        } else if (!strcmp(a, "--peer-depth") && v) {
            peer_depth = v, i++;
        } else if (!strcmp(a, "--no-peer")) {
            use_peer = false, peer_depth = NULL;
        } else if (!strcmp(a, "--csv")) {
            csv = true;
        } else if (!strcmp(a, "--json")) {
            json = true;
        } else {
            fprintf(stderr, "sift bench --model: %s: unknown option or bad value%s%s (try --help)\n", a, v ? " " : "", v ? v : "");
            return 2;
        }
    }
    static char defaults[2][1024];
    if (n_models == 0) {
        const char *root = getenv("SIFT_SHARED");
        const char *rel[2] = {"models/stories260K.gguf", "models/llama-2-tiny-random.gguf"};
        for (int i = 0; i < 2; i++) {
            snprintf(defaults[i], sizeof defaults[i], "%s/%s", root ? root : "../shared", rel[i]);
            models[n_models++] = defaults[i];
        }
    }
    if (n_batches > 0) {
        batch_opts o = {.batches = batches, .threads = threads, .n_batches = n_batches, .n_threads = n_threads_list,
                        .n_prompt = n_prompt ? n_prompt : 32, .steps = n_gen ? n_gen : 16, .reps = reps, .csv = csv,
                        .json = json};
        bool first = true;
        if (csv) printf("model,threads,batch,n_prompt,steps,ms_per_step,us_per_token,tokens_per_s,speedup_per_token,reps\n");
        else if (json) printf("[");
        int rc = 0;
        for (int m = 0; m < n_models && rc == 0; m++) rc = batch_model(models[m], &o, &first);
        if (json) printf("]\n");
        else if (!csv && rc == 0)
            printf("(speed-up/token: the first batch size's time per token over this one's, median of the reps' ratios)\n");
        return rc;
    }
    if (!n_prompt) n_prompt = n_depths ? 32 : 512;
    if (!n_gen) n_gen = n_depths ? 16 : 128;
    if (use_peer && access(peer, X_OK) != 0 && !(n_depths > 0 && peer_depth)) {
        fprintf(stderr, "sift bench --model: llama.cpp's peer_generate not found at %s (make -C ../shared/peer): sift only\n",
                peer);
        use_peer = false;
    }
    if (n_depths > 0) {
        if (peer_depth && access(peer_depth, X_OK) != 0) {
            fprintf(stderr, "sift bench --model --depth: %s not found: llama.cpp's column emulated with peer_generate\n",
                    peer_depth);
            peer_depth = NULL;
        }
        if (!peer_depth && use_peer && access(peer, X_OK) != 0) use_peer = false;
        const bool peer_d = peer_depth != NULL;
        depth_opts o = {.depths = depths, .threads = threads, .n_depths = n_depths, .n_threads = n_threads_list,
                        .n_prompt = n_prompt, .n_gen = n_gen, .reps = reps, .peer = use_peer ? peer : NULL,
                        .peer_depth = peer_d ? peer_depth : NULL, .csv = csv};
        bool header = true;
        int rc = 0;
        for (int m = 0; m < n_models && rc == 0; m++) rc = depth_model(models[m], &o, &header);
        if (!csv && rc == 0 && peer_d)
            printf("(llama.cpp at depth D: %s, the same steps as sift's in one process)\n", base_name(peer_depth));
        else if (!csv && rc == 0 && use_peer)
            printf("(llama.cpp at depth D: emulated, peer_generate has no depth option; prompt t/s = N / (time of D+N "
                   "prompt tokens - time of D), generation after D+N)\n");
        return rc;
    }

    if (csv) printf("model,engine,threads,n_prompt,n_gen,load_ms,pp_tps,tg_tps,sample_us,reps\n");
    else if (json) printf("[");
    else
        printf("%-26s %-10s %7s %8s %6s %10s %12s %12s %10s\n", "model (median of reps)", "engine", "threads", "n_prompt",
               "n_gen", "load ms", "prompt t/s", "gen t/s", "sample us");
    sift_token *gen = malloc((size_t)n_gen * sizeof *gen), *gen0 = malloc((size_t)n_gen * sizeof *gen0);
    int rc = 0;
    for (int job = 0; job < n_models * n_threads_list && rc == 0; job++) {
        const int m = job / n_threads_list, n_threads = threads[job % n_threads_list];
        rep rs[MAX_REPS], rp[MAX_REPS], warm;
        int n_peer = 0;
        bool same = true;
        if ((rc = sift_rep(models[m], n_threads, n_prompt, n_gen, gen0, &warm)) != 0) break;
        for (int r = 0; r < reps && rc == 0; r++) {
            rc = sift_rep(models[m], n_threads, n_prompt, n_gen, gen, &rs[r]);
            if (memcmp(gen, gen0, (size_t)n_gen * sizeof *gen) != 0) same = false;
            if (use_peer) {
                if (peer_rep(peer, models[m], n_threads, n_prompt, n_gen, &rp[n_peer]) == 0) n_peer++;
                else fprintf(stderr, "sift bench --model: peer_generate failed on %s\n", models[m]);
            }
        }
        if (rc) break;
        if (!same) fprintf(stderr, "sift bench --model: %s: the reps generated different tokens\n", models[m]);
        const rep ms = median(rs, reps);
        const char *name = base_name(models[m]);
        const rep *mp = NULL;
        rep med_p;
        if (n_peer) med_p = median(rp, n_peer), mp = &med_p;
        if (csv) {
            printf("%s,sift,%d,%d,%d,%.3f,%.1f,%.1f,%.3f,%d\n", name, n_threads, n_prompt, n_gen, ms.load_ms, ms.pp_tps, ms.tg_tps,
                   ms.sample_us, reps);
            if (mp)
                printf("%s,llama.cpp,%d,%d,%d,%.3f,%.1f,%.1f,%.3f,%d\n", name, n_threads, n_prompt, n_gen, mp->load_ms, mp->pp_tps,
                       mp->tg_tps, mp->sample_us, n_peer);
        } else if (json) {
            printf("%s{\"model\":\"%s\",\"threads\":%d,\"n_prompt\":%d,\"n_gen\":%d,\"reps\":%d,"
                   "\"sift\":{\"load_ms\":%.3f,\"pp_tps\":%.1f,\"tg_tps\":%.1f,\"sample_us\":%.3f}",
                   job ? "," : "", name, n_threads, n_prompt, n_gen, reps, ms.load_ms, ms.pp_tps, ms.tg_tps, ms.sample_us);
            if (mp)
                printf(",\"llama.cpp\":{\"load_ms\":%.3f,\"pp_tps\":%.1f,\"tg_tps\":%.1f,\"sample_us\":%.3f},"
                       "\"pp_ratio\":%.3f,\"tg_ratio\":%.3f",
                       mp->load_ms, mp->pp_tps, mp->tg_tps, mp->sample_us, ms.pp_tps / mp->pp_tps, ms.tg_tps / mp->tg_tps);
            printf("}");
        } else {
            printf("%-26s %-10s %7d %8d %6d %10.2f %12.1f %12.1f %10.2f\n", name, "sift", n_threads, n_prompt, n_gen, ms.load_ms,
                   ms.pp_tps, ms.tg_tps, ms.sample_us);
            if (mp) {
                printf("%-26s %-10s %7d %8d %6d %10.2f %12.1f %12.1f %10.2f\n", name, "llama.cpp", n_threads, n_prompt, n_gen,
                       mp->load_ms, mp->pp_tps, mp->tg_tps, mp->sample_us);
                printf("%-26s %-10s %7s %8s %6s %9.2fx %11.2fx %11.2fx %9.2fx\n", name, "sift/llama", "", "", "",
                       mp->load_ms / ms.load_ms, ms.pp_tps / mp->pp_tps, ms.tg_tps / mp->tg_tps, mp->sample_us / ms.sample_us);
            }
        }
        fflush(stdout);
    }
    if (json) printf("]\n");
    else if (!csv && rc == 0)
        printf("(ratios: speed-up of sift, >1 = sift faster; load and sample columns as time ratios llama/sift)\n");
    free(gen);
    free(gen0);
    return rc;
}
