/*
 * bench_grammar.c - `sift bench --grammar`: what the grammar sampler costs per generated
 * token, side by side with llama.cpp's (../shared/peer/peer_grammar) in the same run.
 *
 * The procedure is peer_grammar's, step for step, so the two columns measure the same
 * thing (../shared/peer/README.md, "peer_grammar"):
 *
 *   logits   peer_bench's 16 synthetic vectors (the recipe of peer_gen.h, re-implemented
 *            below: splitmix64, Irwin-Hall normals, a Zipf head), stream seed
 *            0x13198A2E03707344; step t uses vector t mod 16. They ignore the grammar.
 *   full     fill the candidates with the whole vocabulary; [timed] apply the grammar;
 *            dist (llama.cpp's, seed 42) picks; [timed separately] accept into the grammar.
 *   rejection  fill; dist picks on the unconstrained array; [timed] apply the grammar to
 *            the one-element array {pick}; if it refused, fill again, [timed] apply the
 *            grammar to the whole array, dist picks again (common_sampler_sample).
 *   EOG      a picked end-of-generation token completes a document: accept, reset the
 *            grammar (untimed), go on; every run has exactly --steps timed steps.
 *   warm-up  --warmup (32) untimed steps on a separate grammar sampler and dist first.
 *            For sift that sampler has its own caches, so the timed sampler starts with
 *            only what its construction precomputed (init_ms): the honest, cold case.
 *            Steps that had to fill sift's cache (compute entries on first use) are
 *            counted ("fills"), and the maximum over the other steps is reported too
 *            ("warm max"): on a shared machine a few-millisecond step with no cache work
 *            is the scheduler, not the grammar.
 *   cpu      sift's applies are also timed in thread CPU time (CLOCK_THREAD_CPUTIME_ID, read
 *            outside the wall-clock window): "cpu p99" / "cpu max" show what the grammar
 *            work itself costs when the wall clock also counts time the thread was not
 *            running.
 *   reps     --reps N runs each combination N times (sift and llama.cpp alternating) and
 *            reports the median of each statistic over the runs, and the range of the means.
 *
 * Statistics per combination: apply mean / median / p99 (nearest rank: the 3rd largest of
 * 256) / max in microseconds, accept mean, init ms, tokens and documents generated, steps
 * the rejection mode refused, mean number of tokens a whole-array apply left. When the peer
 * runs, its token stream (from its --trace) is compared with sift's: the same grammar
 * decisions and the same llama.cpp-exact dist give the same tokens, step for step.
 *
 *   sift bench --grammar [--vocabs llama-spm,deepseek-llm] [--grammars json,json_schema_person,arith,c_like]
 *              [--modes full,rejection] [--steps 256] [--warmup 32] [--seed 42] [--reps 1]
 *              [--vocab-dir DIR] [--grammar-dir DIR] [--peer PATH | --no-peer] [--csv | --json]
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "grammar/mask.h" /* sift__gx_grammar_sampler_stats: which steps filled the cache */
#include "peer_logits.h"
#include "cli_util.h"
#include "sift.h"

const char sift_bench_grammar_help[] = "grammar sampler µs/token (full mask and rejection) vs llama.cpp's peer_grammar";

#define N_VEC 16

/* ---- helpers ---- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct {
    double mean, median, p99, max, accept_mean, allowed_mean, init_ms, step_mean, warm_max, cpu_mean, cpu_p99, cpu_max;
    long tokens, docs, rejected, steps, fills, preempted;
} stats;

typedef struct {
    double apply, accept, step, cpu;
    long allowed; /* -1: no whole-array apply */
    int eog, rejected, filled;
    sift_token tok;
} step_rec;

static void summarize(const step_rec *rec, long n, stats *s)
{
    double *a = malloc(sizeof *a * (size_t)n);
    double sa = 0, sc = 0, ss = 0, sal = 0;
    long nal = 0;
    s->tokens = s->rejected = s->fills = 0;
    s->warm_max = 0;
    for (long i = 0; i < n; i++) {
        a[i] = rec[i].apply;
        s->fills += rec[i].filled;
        if (!rec[i].filled && rec[i].apply > s->warm_max) s->warm_max = rec[i].apply;
        sa += rec[i].apply;
        sc += rec[i].accept;
        ss += rec[i].step;
        s->tokens += !rec[i].eog;
        s->rejected += rec[i].rejected;
        if (rec[i].allowed >= 0) {
            sal += (double)rec[i].allowed;
            nal++;
        }
    }
    qsort(a, (size_t)n, sizeof *a, cmp_double);
    long k99 = (long)ceil(0.99 * (double)n) - 1;
    if (k99 < 0) k99 = 0;
    double *cpu = malloc(sizeof *cpu * (size_t)n);
    double scpu = 0;
    s->preempted = 0;
    for (long i = 0; i < n; i++) {
        cpu[i] = rec[i].cpu;
        scpu += rec[i].cpu;
        s->preempted += rec[i].apply - rec[i].cpu > 500.0; /* off the CPU for more than 0.5 ms */
    }
    s->cpu_mean = scpu / (double)n;
    qsort(cpu, (size_t)n, sizeof *cpu, cmp_double);
    s->cpu_p99 = cpu[k99];
    s->cpu_max = cpu[n - 1];
    free(cpu);
    s->steps = n;
    s->mean = sa / (double)n;
    s->median = n % 2 ? a[n / 2] : 0.5 * (a[n / 2 - 1] + a[n / 2]);
    s->p99 = a[k99];
    s->max = a[n - 1];
    s->accept_mean = sc / (double)n;
    s->step_mean = ss / (double)n;
    s->allowed_mean = nal ? sal / (double)nal : 0;
    free(a);
}

enum { MODE_FULL, MODE_REJECTION };

static long count_finite(const sift_candidates *c)
{
    long k = 0;
    for (size_t i = 0; i < c->size; i++) k += c->logit[i] != -INFINITY;
    return k;
}

static sift_token pick(sift_sampler *dist, sift_candidates *c)
{
    sift_sampler_apply(dist, c);
    return sift_candidates_selected(c);
}

/* peer_grammar's run(): returns 0, or -1 when the grammar allowed nothing / dist picked a
 * masked token (both bugs). */
static uint32_t cache_entries(const sift_sampler *g)
{
    sift__gx_engine_stats st;
    return sift__gx_grammar_sampler_stats(g, &st) ? st.entries + st.dfa_states : 0;
}

static int run(sift_sampler *g, sift_sampler *dist, const sift_vocab *vocab, const float *logits, int n_vocab,
               int mode, long steps, sift_candidates *cand, sift_candidates *one, step_rec *rec, long *docs)
{
    *docs = 0;
    for (long t = 0; t < steps; t++) {
        const uint32_t entries0 = rec ? cache_entries(g) : 0;
        const float *x = logits + (size_t)(t % N_VEC) * (size_t)n_vocab;
        double apply = 0, ta, tb, ca, cpu = 0;
        long allowed = -1;
        int rejected = 0;
        sift_token tok;
        const double s0 = cli_now_us();
        sift_candidates_fill(cand, x, (size_t)n_vocab);
        if (mode == MODE_FULL) {
            ca = cli_thread_cpu_us();
            ta = cli_now_us();
            sift_sampler_apply(g, cand);
            tb = cli_now_us();
            cpu += cli_thread_cpu_us() - ca;
            apply = tb - ta;
            allowed = count_finite(cand);
            if (!allowed) return -1;
            tok = pick(dist, cand);
            if (tok < 0 || cand->logit[cand->selected] == -INFINITY) return -1;
        } else {
            tok = pick(dist, cand);
            one->id[0] = tok;
            one->logit[0] = 1.0f;
            one->p[0] = 0.0f;
            one->size = 1;
            one->selected = -1;
            one->sorted = false;
            one->flags = 0;
            ca = cli_thread_cpu_us();
            ta = cli_now_us();
            sift_sampler_apply(g, one);
            tb = cli_now_us();
            cpu += cli_thread_cpu_us() - ca;
            apply = tb - ta;
            if (one->logit[0] == -INFINITY) {
                rejected = 1;
                sift_candidates_fill(cand, x, (size_t)n_vocab);
                ca = cli_thread_cpu_us();
                ta = cli_now_us();
                sift_sampler_apply(g, cand);
                tb = cli_now_us();
                cpu += cli_thread_cpu_us() - ca;
                apply += tb - ta;
                allowed = count_finite(cand);
                if (!allowed) return -1;
                tok = pick(dist, cand);
                if (tok < 0 || cand->logit[cand->selected] == -INFINITY) return -1;
            }
        }
        const int eog = sift_vocab_is_eog(vocab, tok);
        const int filled = rec ? cache_entries(g) != entries0 : 0; /* (read outside the timed calls) */
        ta = cli_now_us();
        sift_sampler_accept(g, tok);
        tb = cli_now_us();
        sift_sampler_accept(dist, tok);
        const double s1 = cli_now_us();
        if (rec) rec[t] = (step_rec){apply, tb - ta, s1 - s0, cpu, allowed, eog, rejected, filled, tok};
        if (eog) {
            ++*docs;
            sift_sampler_reset(g);
        }
    }
    return 0;
}

/* Run peer_grammar; fill *s from its CSV and toks[] from its trace. 0 on success. */
static int run_peer(const char *peer, const char *vocab_path, const char *grammar_path, int mode, long steps,
                    long warmup, uint32_t seed, stats *s, sift_token *toks)
{
    char trace[] = "/tmp/sift-bench-grammar-XXXXXX";
    int fd = mkstemp(trace);
    if (fd < 0) return -1;
    close(fd);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' -m '%s' -g '%s' --mode %s --steps %ld --warmup %ld --seed %u --no-header --trace '%s' 2>/dev/null",
             peer, vocab_path, grammar_path, mode == MODE_FULL ? "full" : "rejection", steps, warmup, seed, trace);
    FILE *p = popen(cmd, "r");
    if (!p) {
        unlink(trace);
        return -1;
    }
    char line[2048] = "";
    char *got = fgets(line, sizeof line, p);
    int st = pclose(p);
    int rc = -1;
    if (got && st == 0) {
        char v[256], gname[256], m[32];
        int nv;
        int n = sscanf(line, "%255[^,],%d,%255[^,],%31[^,],%ld,%ld,%ld,%ld,%lf,%lf,%lf,%lf,%lf,%lf,%lf,%lf", v, &nv, gname, m,
                       &s->steps, &s->tokens, &s->docs, &s->rejected, &s->allowed_mean, &s->mean, &s->median, &s->p99,
                       &s->max, &s->accept_mean, &s->step_mean, &s->init_ms);
        if (n == 16) rc = 0;
    }
    FILE *tf = rc == 0 ? fopen(trace, "r") : NULL;
    if (tf) {
        char tl[4096];
        long k = 0;
        if (fgets(tl, sizeof tl, tf)) /* header */
            while (k < steps && fgets(tl, sizeof tl, tf)) {
                long step;
                int vec, tok;
                if (sscanf(tl, "%ld\t%d\t%d", &step, &vec, &tok) == 3 && step == k) toks[k++] = tok;
            }
        fclose(tf);
        if (k != steps) rc = -1;
    }
    unlink(trace);
    return rc;
}

typedef struct {
    const char *vocab, *grammar, *mode;
    int n_vocab;
    stats sift, peer;                 /* medians over the reps */
    double sift_mean_lo, sift_mean_hi, peer_mean_lo, peer_mean_hi;
    bool have_peer;
    long same_tokens; /* the fewest over the reps; -1 unknown */
} result;

static int cmp_dbl(const void *a, const void *b) { return cmp_double(a, b); }

/* field-wise median of n runs (doubles and counts alike) */
static void median_stats(const stats *r, int n, stats *out, double *mean_lo, double *mean_hi)
{
    double v[64];
#define MED(f)                                                   \
    do {                                                         \
        for (int k = 0; k < n; k++) v[k] = (double)r[k].f;       \
        qsort(v, (size_t)n, sizeof *v, cmp_dbl);                 \
        out->f = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]); \
    } while (0)
    MED(mean); MED(median); MED(p99); MED(max); MED(accept_mean); MED(allowed_mean); MED(init_ms);
    MED(step_mean); MED(warm_max); MED(cpu_mean); MED(cpu_p99); MED(cpu_max); MED(preempted); MED(tokens); MED(docs); MED(rejected); MED(steps); MED(fills);
#undef MED
    *mean_lo = *mean_hi = r[0].mean;
    for (int k = 1; k < n; k++) {
        if (r[k].mean < *mean_lo) *mean_lo = r[k].mean;
        if (r[k].mean > *mean_hi) *mean_hi = r[k].mean;
    }
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: sift bench --grammar [options]\n"
            "  --vocabs LIST       vocab names in --vocab-dir (ggml-vocab-NAME.gguf), default llama-spm,deepseek-llm\n"
            "  --grammars LIST     grammar names in --grammar-dir (NAME.gbnf), default json,json_schema_person,arith,c_like\n"
            "  --modes LIST        full,rejection (default both)\n"
            "  --steps N           timed steps per combination (default 256)\n"
            "  --warmup N          untimed warm-up steps on separate samplers (default 32)\n"
            "  --seed S            dist seed (default 42)\n"
            "  --reps N            runs per combination, medians reported (default 1, at most 64)\n"
            "  --vocab-dir DIR     default $SIFT_SHARED/models/vocab or ../shared/models/vocab\n"
            "  --grammar-dir DIR   default $SIFT_SHARED/peer/grammars or ../shared/peer/grammars\n"
            "  --peer PATH         llama.cpp's peer_grammar (default /tmp/sift-peer/peer_grammar)\n"
            "  --no-peer           sift only\n"
            "  --csv | --json      machine-readable output instead of the table\n");
}

static int split_list(char *s, char **out, int max)
{
    int n = 0;
    for (char *tok = strtok(s, ","); tok && n < max; tok = strtok(NULL, ",")) out[n++] = tok;
    return n;
}

int sift_bench_grammar(int argc, char **argv)
{
    char vocabs_s[512] = "llama-spm,deepseek-llm", grammars_s[512] = "json,json_schema_person,arith,c_like",
         modes_s[64] = "full,rejection";
    long steps = 256, warmup = 32, reps = 1;
    uint32_t seed = 42;
    const char *peer = "/tmp/sift-peer/peer_grammar";
    bool use_peer = true, csv = false, json = false;
    char vocab_dir[1024], grammar_dir[1024];
    const char *shared = getenv("SIFT_SHARED");
    snprintf(vocab_dir, sizeof vocab_dir, "%s/models/vocab", shared ? shared : "../shared");
    snprintf(grammar_dir, sizeof grammar_dir, "%s/peer/grammars", shared ? shared : "../shared");
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define TAKE(dst)                                                                        \
    do {                                                                                 \
        if (!v) {                                                                        \
            fprintf(stderr, "sift bench --grammar: %s needs a value\n", a);              \
            return 2;                                                                    \
        }                                                                                \
        snprintf(dst, sizeof dst, "%s", v);                                              \
        i++;                                                                             \
    } while (0)
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--vocabs")) TAKE(vocabs_s);
        else if (!strcmp(a, "--grammars")) TAKE(grammars_s);
        else if (!strcmp(a, "--modes")) TAKE(modes_s);
        else if (!strcmp(a, "--vocab-dir")) TAKE(vocab_dir);
        else if (!strcmp(a, "--grammar-dir")) TAKE(grammar_dir);
        else if (!strcmp(a, "--steps") && v) steps = atol(argv[++i]);
        else if (!strcmp(a, "--warmup") && v) warmup = atol(argv[++i]);
        else if (!strcmp(a, "--reps") && v) reps = atol(argv[++i]);
        else if (!strcmp(a, "--seed") && v) seed = (uint32_t)strtoul(argv[++i], NULL, 0);
        else if (!strcmp(a, "--peer") && v) peer = argv[++i];
        else if (!strcmp(a, "--no-peer")) use_peer = false;
        else if (!strcmp(a, "--csv")) csv = true;
        else if (!strcmp(a, "--json")) json = true;
        else {
            fprintf(stderr, "sift bench --grammar: unknown or incomplete option '%s'\n", a);
            usage(stderr);
            return 2;
        }
#undef TAKE
    }
    if (steps < 1 || warmup < 0 || reps < 1 || reps > 64) {
        fprintf(stderr, "sift bench --grammar: --steps must be >= 1, --warmup >= 0, --reps 1..64\n");
        return 2;
    }
    if (use_peer && access(peer, X_OK) != 0) {
        fprintf(stderr, "sift bench --grammar: %s not found (make -C ../shared/peer); running sift alone\n", peer);
        use_peer = false;
    }
    char *vocabs[16], *grammars[16], *modes[4];
    int nv = split_list(vocabs_s, vocabs, 16), ng = split_list(grammars_s, grammars, 16), nm = split_list(modes_s, modes, 4);
    for (int m = 0; m < nm; m++)
        if (strcmp(modes[m], "full") && strcmp(modes[m], "rejection")) {
            fprintf(stderr, "sift bench --grammar: --modes: unknown mode '%s'\n", modes[m]);
            return 2;
        }

    result *res = calloc((size_t)(nv * ng * nm), sizeof *res);
    step_rec *rec = calloc((size_t)steps, sizeof *rec);
    sift_token *ptoks = calloc((size_t)steps, sizeof *ptoks);
    int nres = 0, rc = 0;
    if (!res || !rec || !ptoks) return 1;
    for (int vi = 0; vi < nv && rc == 0; vi++) {
        char vpath[1200];
        snprintf(vpath, sizeof vpath, "%s/ggml-vocab-%s.gguf", vocab_dir, vocabs[vi]);
        sift_error err = {0};
        sift_vocab *vocab = sift_vocab_load(vpath, &err);
        if (!vocab) {
            fprintf(stderr, "sift bench --grammar: %s: %s\n", vpath, err.msg);
            rc = 1;
            break;
        }
        sift_vocab_view view;
        sift_vocab_view_get(vocab, &view);
        const int n_vocab = sift_vocab_n_tokens(vocab);
        float *logits = malloc(sizeof(float) * (size_t)n_vocab * N_VEC);
        sift_candidates cand, one;
        if (!logits || sift_candidates_init(&cand, (size_t)n_vocab) != SIFT_OK || sift_candidates_init(&one, 1) != SIFT_OK) {
            rc = 1;
            sift_vocab_free(vocab);
            free(logits);
            break;
        }
        for (int k = 0; k < N_VEC; k++) sift_peer_logits(logits + (size_t)k * (size_t)n_vocab, n_vocab, SIFT_PEER_LOGIT_SEED, (uint32_t)k);
        for (int gi = 0; gi < ng && rc == 0; gi++) {
            char gpath[1200];
            snprintf(gpath, sizeof gpath, "%s/%s.gbnf", grammar_dir, grammars[gi]);
            size_t glen;
            char *gtext = cli_read_file(gpath, &glen);
            if (!gtext) {
                fprintf(stderr, "sift bench --grammar: cannot read %s: %s\n", gpath, strerror(errno));
                rc = 1;
                break;
            }
            for (int mi = 0; mi < nm && rc == 0; mi++) {
                const int mode = strcmp(modes[mi], "full") ? MODE_REJECTION : MODE_FULL;
                result *r = &res[nres++];
                r->vocab = vocabs[vi];
                r->grammar = grammars[gi];
                r->mode = modes[mi];
                r->n_vocab = n_vocab;
                r->same_tokens = -1;
                stats sr[64], pr[64];
                int n_peer = 0;
                for (long rep = 0; rep < reps && rc == 0; rep++) {
                    /* interleave: who goes first alternates between combinations and reps */
                    for (int turn = 0; turn < 2 && rc == 0; turn++) {
                        bool peer_turn = (turn == 0) == ((nres + rep) % 2 == 1);
                        if (peer_turn) {
                            if (use_peer && run_peer(peer, vpath, gpath, mode, steps, warmup, seed, &pr[n_peer], ptoks) == 0)
                                n_peer++;
                            continue;
                        }
                        double t0 = cli_now_us();
                        sift_sampler *g = sift_sampler_init_grammar_ex(&view, gtext, glen, NULL, &err);
                        double init_ms = (cli_now_us() - t0) / 1e3;
                        if (!g) {
                            fprintf(stderr, "sift bench --grammar: %s: %s\n", gpath, err.msg);
                            rc = 1;
                            break;
                        }
                        long docs = 0;
                        if (warmup > 0) {
                            sift_sampler *wg = sift_sampler_init_grammar_ex(&view, gtext, glen, NULL, &err);
                            sift_sampler *wd = sift_sampler_init_dist(seed);
                            if (!wg || !wd || run(wg, wd, vocab, logits, n_vocab, mode, warmup, &cand, &one, NULL, &docs) != 0)
                                rc = 1;
                            sift_sampler_free(wg);
                            sift_sampler_free(wd);
                        }
                        sift_sampler *dist = sift_sampler_init_dist(seed);
                        if (rc == 0 && (!dist || run(g, dist, vocab, logits, n_vocab, mode, steps, &cand, &one, rec, &docs) != 0)) {
                            fprintf(stderr, "sift bench --grammar: %s / %s / %s: the grammar allowed nothing or a masked token was picked\n",
                                    vocabs[vi], grammars[gi], modes[mi]);
                            rc = 1;
                        }
                        if (rc == 0) {
                            summarize(rec, steps, &sr[rep]);
                            sr[rep].docs = docs;
                            sr[rep].init_ms = init_ms;
                        }
                        sift_sampler_free(dist);
                        sift_sampler_free(g);
                    }
                    if (rc == 0 && use_peer && n_peer == rep + 1) {
                        long k = 0;
                        while (k < steps && rec[k].tok == ptoks[k]) k++;
                        if (r->same_tokens < 0 || k < r->same_tokens) r->same_tokens = k;
                    }
                }
                if (rc != 0) break;
                median_stats(sr, (int)reps, &r->sift, &r->sift_mean_lo, &r->sift_mean_hi);
                r->have_peer = n_peer > 0;
                if (r->have_peer) median_stats(pr, n_peer, &r->peer, &r->peer_mean_lo, &r->peer_mean_hi);
                if (rc == 0 && !csv && !json)
                    fprintf(stderr, "  %-13s %-19s %-9s sift mean %8.1f us   llama.cpp %s\n", r->vocab, r->grammar, r->mode,
                            r->sift.mean, r->have_peer ? "done" : "-");
            }
            free(gtext);
        }
        sift_candidates_free(&cand);
        sift_candidates_free(&one);
        free(logits);
        sift_vocab_free(vocab);
    }
    if (rc != 0) {
        free(res);
        free(rec);
        free(ptoks);
        return rc;
    }

    if (csv) {
        printf("impl,vocab,n_vocab,grammar,mode,steps,tokens,docs,rejected,allowed_mean,apply_mean_us,apply_median_us,"
               "apply_p99_us,apply_max_us,accept_mean_us,step_mean_us,init_ms,same_tokens,cache_fill_steps,warm_max_us,"
               "mean_lo_us,mean_hi_us,cpu_p99_us,cpu_max_us,cpu_mean_us,preempted_steps\n");
        for (int i = 0; i < nres; i++) {
            const result *r = &res[i];
            for (int w = 0; w < 2; w++) {
                const stats *s = w ? &r->peer : &r->sift;
                if (w && !r->have_peer) continue;
                printf("%s,%s,%d,%s,%s,%ld,%ld,%ld,%ld,%.1f,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%.3f,%ld,%ld,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%ld\n",
                       w ? "llama.cpp" : "sift", r->vocab, r->n_vocab, r->grammar, r->mode, s->steps, s->tokens, s->docs,
                       s->rejected, s->allowed_mean, s->mean, s->median, s->p99, s->max, s->accept_mean, s->step_mean,
                       s->init_ms, r->same_tokens, w ? -1L : s->fills, w ? -1.0 : s->warm_max,
                       w ? r->peer_mean_lo : r->sift_mean_lo, w ? r->peer_mean_hi : r->sift_mean_hi, w ? -1.0 : s->cpu_p99,
                       w ? -1.0 : s->cpu_max, w ? -1.0 : s->cpu_mean, w ? -1L : s->preempted);
            }
        }
    } else if (json) {
        printf("[\n");
        for (int i = 0; i < nres; i++) {
            const result *r = &res[i];
            printf("  {\"vocab\": \"%s\", \"n_vocab\": %d, \"grammar\": \"%s\", \"mode\": \"%s\", \"same_tokens\": %ld", r->vocab,
                   r->n_vocab, r->grammar, r->mode, r->same_tokens);
            for (int w = 0; w < 2; w++) {
                const stats *s = w ? &r->peer : &r->sift;
                if (w && !r->have_peer) continue;
                printf(",\n   \"%s\": {\"steps\": %ld, \"tokens\": %ld, \"docs\": %ld, \"rejected\": %ld, \"allowed_mean\": %.1f, "
                       "\"apply_mean_us\": %.2f, \"apply_median_us\": %.2f, \"apply_p99_us\": %.2f, \"apply_max_us\": %.2f, "
                       "\"accept_mean_us\": %.2f, \"init_ms\": %.3f, \"cache_fill_steps\": %ld, \"warm_max_us\": %.2f}",
                       w ? "llama_cpp" : "sift", s->steps, s->tokens, s->docs, s->rejected, s->allowed_mean, s->mean, s->median,
                       s->p99, s->max, s->accept_mean, s->init_ms, w ? -1L : s->fills, w ? -1.0 : s->warm_max);
            }
            printf("}%s\n", i + 1 < nres ? "," : "");
        }
        printf("]\n");
    } else {
        printf("\ngrammar apply, µs per generated token (%ld steps after %ld warm-up; dist seed %u; logits: peer_bench's recipe;"
               " medians of %ld run%s)\n\n", steps, warmup, seed, reps, reps > 1 ? "s" : "");
        printf("| vocab | grammar | mode | sift mean | median | p99 | max | cpu mean | cpu p99 | cpu max | preempted | fills | accept | init ms | llama.cpp mean | median | p99 | max | accept | speed-up (mean) | tokens/docs sift, llama.cpp | same tokens |\n");
        printf("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |\n");
        for (int i = 0; i < nres; i++) {
            const result *r = &res[i];
            const stats *s = &r->sift, *p = &r->peer;
            printf("| %s %d | %s | %s | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %ld | %ld | %.1f | %.1f", r->vocab, r->n_vocab,
                   r->grammar, r->mode, s->mean, s->median, s->p99, s->max, s->cpu_mean, s->cpu_p99, s->cpu_max, s->preempted,
                   s->fills, s->accept_mean, s->init_ms);
            if (r->have_peer)
                printf(" | %.0f | %.0f | %.0f | %.0f | %.1f | %.0fx | %ld/%ld, %ld/%ld | %ld/%ld |\n", p->mean, p->median, p->p99, p->max,
                       p->accept_mean, s->mean > 0 ? p->mean / s->mean : 0, s->tokens, s->docs, p->tokens, p->docs, r->same_tokens,
                       steps);
            else
                printf(" | - | - | - | - | - | - | %ld/%ld | - |\n", s->tokens, s->docs);
        }
        if (reps > 1) {
            printf("\nrange of the %ld means (µs): ", reps);
            for (int i = 0; i < nres; i++)
                printf("%s%s/%s/%s sift %.1f-%.1f%s", i ? "; " : "", res[i].vocab, res[i].grammar, res[i].mode,
                       res[i].sift_mean_lo, res[i].sift_mean_hi, "");
            printf("\n");
        }
        printf("\ncpu mean / p99 / max: sift's apply in thread CPU time (the wall clock also counts time the thread\n"
               "was off the CPU); preempted: steps whose apply took more than 0.5 ms longer in wall time than in\n"
               "CPU time. fills: steps that computed new cache entries (first use of a parser context).\n"
               "init: parsing, vocabulary trie and mask precompute (llama.cpp: parsing only).\n");
    }
    free(res);
    free(rec);
    free(ptoks);
    return 0;
}
