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
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sift.h"

const char sift_bench_model_help[] = "prompt and generation tokens/s on GGUF models, next to llama.cpp (peer_generate)";

#define MAX_MODELS 16
#define MAX_REPS 100

typedef struct rep {
    double load_ms, pp_tps, tg_tps, sample_us;
} rep;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static rep median(const rep *r, int n)
{
    double v[MAX_REPS];
    rep m;
#define MED(f)                                   \
    for (int i = 0; i < n; i++) v[i] = r[i].f;   \
    qsort(v, (size_t)n, sizeof *v, cmp_double);  \
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
    const double t0 = now_s();
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
    r->load_ms = (now_s() - t0) * 1e3;
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

    double ta = now_s();
    if (sift_decode(ctx, &b, &err) != SIFT_OK) {
        fprintf(stderr, "sift bench --model: prompt: %s\n", err.msg);
        goto done;
    }
    r->pp_tps = n_prompt / (now_s() - ta);

    sift_chain_env env = {.n_vocab = info.n_vocab, .vocab = NULL, .eot = SIFT_TOKEN_NULL, .default_seed = 42};
    chain = sift_chain_from_spec("greedy()", &env, &err);
    if (!chain) goto done;
    double t_sample = 0, t_decode = 0;
    for (int i = 0; i < n_gen; i++) {
        const double t1 = now_s();
        const sift_token tok = sift_chain_sample(chain, sift_get_logits_ith(ctx, -1), info.n_vocab);
        const double t2 = now_s();
        gen[i] = tok;
        sift_batch_clear(&b);
        sift_batch_add(&b, tok, n_prompt + i, &s0, 1, true);
        if (sift_decode(ctx, &b, &err) != SIFT_OK) {
            fprintf(stderr, "sift bench --model: generation: %s\n", err.msg);
            goto done;
        }
        t_sample += t2 - t1;
        t_decode += now_s() - t2;
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

static void usage(FILE *f)
{
    fprintf(f, "usage: sift bench --model [-m MODEL.gguf ...] [-t THREADS] [--n-prompt N] [-n N_GEN] [-r REPS]\n"
               "                          [--peer PATH | --no-peer] [--csv | --json]\n\n"
               "  -m FILE        a model (repeatable; default: the shared stories260K and llama-2-tiny-random)\n"
               "  -t N           threads, for both engines (default 1)\n"
               "  --n-prompt N   prompt tokens (default 512)\n"
               "  -n N           generated tokens (default 128)\n"
               "  -r N           reps per engine, interleaved (default 5)\n"
               "  --peer PATH    llama.cpp's peer_generate (default /tmp/sift-peer/peer_generate)\n"
               "  --no-peer      sift only\n"
               "  --csv, --json  machine-readable output\n");
}

int sift_bench_model(int argc, char **argv)
{
    const char *models[MAX_MODELS];
    int n_models = 0, n_threads = 1, n_prompt = 512, n_gen = 128, reps = 5;
    const char *peer = "/tmp/sift-peer/peer_generate";
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
        } else if (!strcmp(a, "-t") && num && n >= 1 && n <= 256) {
            n_threads = (int)n, i++;
        } else if (!strcmp(a, "--n-prompt") && num && n >= 1 && n <= 2047) {
            n_prompt = (int)n, i++;
        } else if (!strcmp(a, "-n") && num && n >= 1 && n <= 2047) {
            n_gen = (int)n, i++;
        } else if (!strcmp(a, "-r") && num && n >= 1 && n <= MAX_REPS) {
            reps = (int)n, i++;
        } else if (!strcmp(a, "--peer") && v) {
            peer = v, i++;
        } else if (!strcmp(a, "--no-peer")) {
            use_peer = false;
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
    if (use_peer && access(peer, X_OK) != 0) {
        fprintf(stderr, "sift bench --model: llama.cpp's peer_generate not found at %s (make -C ../shared/peer): sift only\n",
                peer);
        use_peer = false;
    }

    if (csv) printf("model,engine,threads,n_prompt,n_gen,load_ms,pp_tps,tg_tps,sample_us,reps\n");
    else if (json) printf("[");
    else
        printf("%-26s %-10s %7s %8s %6s %10s %12s %12s %10s\n", "model (median of reps)", "engine", "threads", "n_prompt",
               "n_gen", "load ms", "prompt t/s", "gen t/s", "sample us");
    sift_token *gen = malloc((size_t)n_gen * sizeof *gen), *gen0 = malloc((size_t)n_gen * sizeof *gen0);
    int rc = 0;
    for (int m = 0; m < n_models && rc == 0; m++) {
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
                   m ? "," : "", name, n_threads, n_prompt, n_gen, reps, ms.load_ms, ms.pp_tps, ms.tg_tps, ms.sample_us);
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
