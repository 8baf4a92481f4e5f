/*
 * bench_spec.c - `sift bench --spec` (also `sift bench --model ... --draft M | --lookup N`):
 * generation speed with speculative decoding, next to the same generation without it and
 * to llama.cpp's plain generation on the same target.
 *
 *   sift bench --model -m TARGET.gguf --draft DRAFT.gguf [-t N] [-n N_GEN] [-r REPS]
 *   sift bench --model -m TARGET.gguf --lookup N [--doc D] [-t N] [-n N_GEN] [-r REPS]
 *       [--draft-max N] [--draft-min N] [--draft-p-min P] [-p TEXT] [--peer PATH | --no-peer]
 *
 * Models and contexts are made once (loading is not what is measured). The prompt is TEXT
 * (default "Once upon a time", BOS first), extended by D tokens of the target's own greedy
 * continuation (--doc; default 0 with a draft model, 512 with lookup), made once, untimed.
 * Why the document for lookup: prompt lookup pays where the answer copies spans of the
 * prompt (extraction, edits, code). A model with random weights (`sift mkmodel`) copies
 * nothing on purpose, but greedy generation settles into cycles, so after D tokens of its
 * own text its continuation repeats spans of its prompt: the "extraction" the verifier sees
 * (one batched decode per draft) is the same work a trained model copying a document would
 * give it. With a real model, pass the document with -p.
 *
 * Each rep, interleaved so that a busy machine disturbs all alike: plain sift (decode the
 * prompt, then N_GEN times: greedy sample, one-token decode), speculative sift (the same
 * prompt, then sift_spec_step until N_GEN tokens: drafting and verification both timed),
 * and llama.cpp's peer_generate with a prompt of the same length (its prompt is BOS and
 * copies of "the"; generation speed hardly depends on the prompt's tokens) and N_GEN.
 * Generation t/s = N_GEN / time after the prompt. The two sift runs must give the same
 * tokens (checked every rep). Printed: medians of the reps, the speed-ups, the acceptance
 * rate (accepted / drafted tokens) and the mean tokens per target pass.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_clock.h"
#include "cli_util.h"
#include "sift.h"

const char sift_bench_spec_help[] = "speculative decoding: tokens/s with a draft model or prompt lookup, without, and llama.cpp's";

#define MAX_REPS 50

typedef struct spec_bench {
    sift_model *model, *dmodel;
    sift_context *ctx;
    sift_draft *draft;
    sift_spec *spec;
    sift_chain *chain;
    sift_batch batch;
    sift_token *prompt, *gen, *gen0, *out;
    int32_t n_prompt, n_vocab;
    int n_gen;
} spec_bench;

static void usage(FILE *f)
{
    fprintf(f, "usage: sift bench --model -m TARGET.gguf (--draft DRAFT.gguf | --lookup N) [-t N] [-n N_GEN] [-r REPS]\n"
               "                  [--doc D] [-p TEXT] [--draft-max N] [--draft-min N] [--draft-p-min P]\n"
               "                  [--peer PATH | --no-peer]   (also: sift bench --spec ...)\n\n"
               "  -m FILE          the target model\n"
               "  --draft FILE     speculative decoding with this draft model (same vocabulary)\n"
               "  --lookup N       speculative decoding with prompt lookup over n-grams of 1..N tokens\n"
               "  -t N             threads (default 2)\n"
               "  -n N             generated tokens per run (default 128)\n"
               "  -r N             reps, interleaved (default 3)\n"
               "  -p TEXT          the prompt (default \"Once upon a time\")\n"
               "  --doc D          extend the prompt by D tokens of the target's own greedy text\n"
               "                   (default 0 with --draft, 512 with --lookup: see bench/bench_spec.c)\n"
               "  --draft-max N, --draft-min N, --draft-p-min P   as sift generate (16, 0, 0.75)\n"
               "  --peer PATH      llama.cpp's peer_generate (default /tmp/sift-peer/peer_generate)\n"
               "  --no-peer        sift only\n");
}

/* Decode the prompt (batches of n_batch, logits for the last token). */
static int decode_prompt(spec_bench *B)
{
    sift_kv_clear(B->ctx);
    const sift_seq_id s0 = 0;
    sift_error err = {0};
    for (int32_t i = 0; i < B->n_prompt;) {
        sift_batch_clear(&B->batch);
        for (; i < B->n_prompt && B->batch.n_tokens < B->batch.capacity; i++)
            sift_batch_add(&B->batch, B->prompt[i], i, &s0, 1, i == B->n_prompt - 1);
        if (sift_decode(B->ctx, &B->batch, &err) != SIFT_OK) {
            fprintf(stderr, "sift bench --spec: prompt: %s\n", err.msg);
            return 1;
        }
    }
    return 0;
}

/* Plain greedy generation of n tokens after the prompt into out; seconds in *t. */
static int run_plain(spec_bench *B, int n, sift_token *out, double *t)
{
    if (decode_prompt(B)) return 1;
    const sift_seq_id s0 = 0;
    sift_error err = {0};
    const double t0 = bench_now_s();
    for (int i = 0; i < n; i++) {
        out[i] = sift_chain_sample(B->chain, sift_get_logits_ith(B->ctx, -1), B->n_vocab);
        if (i == n - 1) break;
        sift_batch_clear(&B->batch);
        sift_batch_add(&B->batch, out[i], B->n_prompt + i, &s0, 1, true);
        if (sift_decode(B->ctx, &B->batch, &err) != SIFT_OK) {
            fprintf(stderr, "sift bench --spec: generation: %s\n", err.msg);
            return 1;
        }
    }
    *t = bench_now_s() - t0;
    return 0;
}

/* The same through sift_spec_step; the stats of this run in *st. */
static int run_spec(spec_bench *B, sift_token *out, double *t, sift_spec_stats *st)
{
    if (decode_prompt(B)) return 1;
    sift_error err = {0};
    sift_draft_reset(B->draft);
    sift_spec_free(B->spec);
    if (!(B->spec = sift_spec_new(B->ctx, 0, B->draft, &err))) {
        fprintf(stderr, "sift bench --spec: %s\n", err.msg);
        return 1;
    }
    const double t0 = bench_now_s();
    out[0] = sift_chain_sample(B->chain, sift_get_logits_ith(B->ctx, -1), B->n_vocab);
    if (sift_draft_push(B->draft, B->prompt, B->n_prompt, &err) != SIFT_OK || sift_draft_push(B->draft, out, 1, &err) != SIFT_OK) {
        fprintf(stderr, "sift bench --spec: %s\n", err.msg);
        return 1;
    }
    const sift_spec_sampling smp = {.chain = B->chain};
    int n = 1;
    while (n < B->n_gen) {
        sift_spec_result r;
        const int32_t room = B->n_gen - n < B->batch.capacity ? B->n_gen - n : B->batch.capacity;
        if (sift_spec_step(B->spec, B->n_prompt + n - 1, out[n - 1], room, &smp, out + n, &r, &err) != SIFT_OK || r.no_token) {
            fprintf(stderr, "sift bench --spec: step: %s\n", r.no_token ? "no token" : err.msg);
            return 1;
        }
        n += r.n_tokens;
    }
    *t = bench_now_s() - t0;
    *st = sift_spec_get_stats(B->spec);
    return 0;
}

static int peer_run(const char *peer, const char *path, int nth, int n_prompt, int n_gen, double *tps)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' -m '%s' -t %d --n-prompt %d -n %d -r 1 --no-header 2>/dev/null", peer, path, nth, n_prompt,
             n_gen);
    FILE *p = popen(cmd, "r");
    if (!p) return 1;
    char line[1024], name[512];
    int ok = 0, th, np, ng;
    double load, pp, tg, su;
    while (fgets(line, sizeof line, p))
        if (!ok && sscanf(line, "%511[^,],%d,%d,%d,%lf,%lf,%lf,%lf", name, &th, &np, &ng, &load, &pp, &tg, &su) == 8) ok = 1, *tps = tg;
    return pclose(p) == 0 && ok ? 0 : 1;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

static int setup(spec_bench *B, const char *target, const char *draft, int lookup, int nth, const char *text, int doc,
                 sift_draft_params dp)
{
    sift_error err = {0};
    if (!(B->model = sift_model_load(target, &err))) return fprintf(stderr, "sift bench --spec: %s: %s\n", target, err.msg), 1;
    sift_model_info info;
    sift_model_get_info(B->model, &info);
    B->n_vocab = info.n_vocab;
    sift_context_params cp = sift_context_default_params();
    cp.n_ctx = info.n_ctx_train < 2048 ? (uint32_t)info.n_ctx_train : 2048;
    cp.n_batch = 512;
    cp.n_threads = cp.n_threads_batch = nth;
    if (!(B->ctx = sift_context_new(B->model, cp, &err))) return fprintf(stderr, "sift bench --spec: %s\n", err.msg), 1;
    if (draft) {
        if (!(B->dmodel = sift_model_load(draft, &err))) return fprintf(stderr, "sift bench --spec: %s: %s\n", draft, err.msg), 1;
        B->draft = sift_draft_model_new(B->dmodel, B->model, cp, dp, &err);
    } else {
        B->draft = sift_draft_lookup_new(lookup, dp, &err);
    }
    if (!B->draft) return fprintf(stderr, "sift bench --spec: %s\n", err.msg), 2;
    sift_chain_env env = {.n_vocab = B->n_vocab, .eot = SIFT_TOKEN_NULL};
    B->chain = sift_chain_from_spec("greedy()", &env, &err);
    const int32_t cap = (int32_t)cp.n_ctx;
    B->prompt = malloc((size_t)cap * sizeof *B->prompt);
    B->out = malloc((size_t)cap * sizeof *B->out);
    B->gen = malloc((size_t)cap * sizeof *B->gen);
    B->gen0 = malloc((size_t)cap * sizeof *B->gen0);
    if (!B->chain || !B->prompt || !B->out || !B->gen || !B->gen0 || sift_batch_init(&B->batch, (int32_t)cp.n_batch, 1) != SIFT_OK)
        return fprintf(stderr, "sift bench --spec: out of memory\n"), 1;
    B->n_prompt = sift_tokenize(sift_model_vocab(B->model), text, strlen(text), B->prompt, cap, true, false);
    if (B->n_prompt < 1 || B->n_prompt + doc + B->n_gen > cap)
        return fprintf(stderr, "sift bench --spec: the prompt (%d tokens), --doc %d and -n %d do not fit the context %d\n",
                       B->n_prompt, doc, B->n_gen, cap), 2;
    if (doc > 0) { /* the document: the target's own greedy text after the prompt */
        double t;
        if (run_plain(B, doc, B->out, &t)) return 1;
        memcpy(B->prompt + B->n_prompt, B->out, (size_t)doc * sizeof *B->out);
        B->n_prompt += doc;
    }
    return 0;
}

static void teardown(spec_bench *B)
{
    sift_spec_free(B->spec);
    sift_draft_free(B->draft);
    sift_chain_free(B->chain);
    sift_batch_free(&B->batch);
    sift_context_free(B->ctx);
    sift_model_free(B->dmodel);
    sift_model_free(B->model);
    free(B->prompt);
    free(B->out);
    free(B->gen);
    free(B->gen0);
}

int sift_bench_spec(int argc, char **argv)
{
    const char *target = NULL, *draft = NULL, *text = "Once upon a time", *peer = "/tmp/sift-peer/peer_generate";
    int lookup = 0, nth = 2, reps = 3, doc = -1, n_gen = 128;
    bool use_peer = true;
    sift_draft_params dp = sift_draft_default_params();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long n = 0;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "-m") && v) {
            target = v, i++;
        } else if (!strcmp(a, "--draft") && v) {
            draft = v, i++;
        } else if (!strcmp(a, "--lookup") && v && cli_parse_long(v, 1, SIFT_LOOKUP_MAX_N, &n)) {
            lookup = (int)n, i++;
        } else if (!strcmp(a, "-t") && v && cli_parse_long(v, 1, 256, &n)) {
            nth = (int)n, i++;
        } else if (!strcmp(a, "-n") && v && cli_parse_long(v, 1, 2000, &n)) {
            n_gen = (int)n, i++;
        } else if (!strcmp(a, "-r") && v && cli_parse_long(v, 1, MAX_REPS, &n)) {
            reps = (int)n, i++;
        } else if (!strcmp(a, "--doc") && v && cli_parse_long(v, 0, 2000, &n)) {
            doc = (int)n, i++;
        } else if (!strcmp(a, "-p") && v) {
            text = v, i++;
        } else if (!strcmp(a, "--draft-max") && v && cli_parse_long(v, 1, 1024, &n)) {
            dp.n_max = (int32_t)n, i++;
        } else if (!strcmp(a, "--draft-min") && v && cli_parse_long(v, 0, 1024, &n)) {
            dp.n_min = (int32_t)n, i++;
        } else if (!strcmp(a, "--draft-p-min") && v && cli_parse_float(v, &dp.p_min)) {
            i++;
        } else if (!strcmp(a, "--peer") && v) {
            peer = v, i++;
        } else if (!strcmp(a, "--no-peer")) {
            use_peer = false;
        } else {
            fprintf(stderr, "sift bench --spec: %s: unknown option or bad value%s%s (try --help)\n", a, v ? " " : "", v ? v : "");
            return 2;
        }
    }
    if (!target || (!draft) == (!lookup)) {
        fprintf(stderr, "sift bench --spec: give -m TARGET and one of --draft FILE, --lookup N\n");
        return 2;
    }
    if (doc < 0) doc = lookup ? 512 : 0;
    if (use_peer && access(peer, X_OK) != 0) {
        fprintf(stderr, "sift bench --spec: llama.cpp's peer_generate not found at %s (make -C ../shared/peer): sift only\n", peer);
        use_peer = false;
    }
    spec_bench B = {.n_gen = n_gen};
    int rc = setup(&B, target, draft, lookup, nth, text, doc, dp);
    double t_plain[MAX_REPS], t_spec[MAX_REPS], t_peer[MAX_REPS], acc[MAX_REPS], tpp[MAX_REPS];
    int n_peer = 0;
    sift_spec_stats st = {0};
    if (!rc) { /* warm-up, and the reference tokens */
        double t;
        rc = run_plain(&B, n_gen, B.gen0, &t);
    }
    for (int r = 0; r < reps && !rc; r++) {
        double t;
        if ((rc = run_plain(&B, n_gen, B.gen, &t)) != 0) break;
        t_plain[r] = n_gen / t;
        if ((rc = run_spec(&B, B.out, &t, &st)) != 0) break;
        t_spec[r] = n_gen / t;
        acc[r] = st.n_drafted ? (double)st.n_accepted / (double)st.n_drafted : 0.0;
        tpp[r] = st.n_steps ? (double)st.n_tokens / (double)st.n_steps : 0.0;
        if (memcmp(B.out, B.gen0, (size_t)n_gen * sizeof *B.out) || memcmp(B.gen, B.gen0, (size_t)n_gen * sizeof *B.gen)) {
            fprintf(stderr, "sift bench --spec: the speculative tokens differ from the plain ones\n");
            rc = 1;
            break;
        }
        if (use_peer && peer_run(peer, target, nth, B.n_prompt, n_gen, &t_peer[n_peer]) == 0) n_peer++;
    }
    if (!rc) {
        const double mp = median(t_plain, reps), ms = median(t_spec, reps), ma = median(acc, reps), mt = median(tpp, reps);
        char how[160];
        if (draft) snprintf(how, sizeof how, "draft %s (p-min %.2f)", base_name(draft), (double)dp.p_min);
        else snprintf(how, sizeof how, "lookup n-grams 1..%d", lookup);
        printf("%s: %s, draft-max %d; prompt %d tokens (--doc %d), %d generated, greedy, -t %d, median of %d reps\n",
               base_name(target), how, dp.n_max, B.n_prompt, doc, n_gen, nth, reps);
        printf("%-34s %10s %10s\n", "engine", "gen t/s", "speed-up");
        printf("%-34s %10.2f %9.2fx\n", "sift", mp, 1.0);
        printf("%-34s %10.2f %9.2fx   acceptance %.1f%%, %.2f tokens per target pass (last rep: %lld passes, "
               "%lld drafted, %lld accepted; drafting %.1f ms, verifying %.1f ms)\n", "sift speculative", ms, ms / mp, 100 * ma, mt,
               (long long)st.n_steps, (long long)st.n_drafted, (long long)st.n_accepted, st.t_draft_ms, st.t_verify_ms);
        if (n_peer) {
            const double pe = median(t_peer, n_peer);
            printf("%-34s %10.2f %9.2fx   (speculative sift / llama.cpp: %.2fx)\n", "llama.cpp (peer_generate, plain)", pe, pe / mp,
                   ms / pe);
        }
        printf("(the speculative tokens equal the plain ones in every rep)\n");
    }
    teardown(&B);
    return rc;
}
