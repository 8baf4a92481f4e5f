/*
 * bench_sampling.c - `sift bench` (the default suite): µs per sampling step, sift next to
 * llama.cpp measured in the same run.
 *
 *   sift bench [-V 32000,128256,151936,262144] [-c abcdefg] [-r REPS] [-n STEPS]
 *              [--rep-ms MS] [--peer PATH | --no-peer] [--csv | --json]
 *
 * The configurations, logits and step are peer_bench's (../shared/peer/README.md), so the
 * two columns measure the same thing:
 *   a_greedy                      greedy
 *   b_dist                        dist(42)
 *   c_topk40_dist                 top_k(40) -> dist(42)
 *   d_topp095_dist                top_p(0.95, 1) -> dist(42)
 *   e_minp005_dist                min_p(0.05, 1) -> dist(42)
 *   f_default_chain               common_sampler_init's defaults, seed 42 (built here through
 *                                 sift_sampling_params / sift_chain_from_params)
 *   g_topk0_topp095_temp08_dist   top_k(0) -> top_p(0.95, 1) -> temp(0.8) -> dist(42)
 * on 16 synthetic logit vectors (peer_gen.h's recipe, re-implemented below; seed
 * 0x13198A2E03707344, vectors 0..15 used in turn). A sift step is what a decode loop pays:
 * sift_chain_sample(chain, logits, n_vocab) - from the caller's `const float *` to the
 * accepted token; llama.cpp's step fills its candidate array, applies and accepts.
 *
 * Timing: per vocabulary, one untimed warm-up rep per configuration, then REPS rounds; in
 * a round every configuration times one sift rep and, right before or after it
 * (alternating), one peer_bench run of the same vocabulary and configuration (`-c X -r 1
 * -n STEPS`: its own warm-up rep, then one timed rep of STEPS steps), so both see the same
 * machine; then one rep of the max pass (below). A sift rep is STEPS steps, or more when that takes less
 * than --rep-ms (250 ms; sized from the warm-up): on a shared machine a rep of a few
 * milliseconds is either untouched or doubled by one preemption, while llama.cpp's reps
 * of a second average the load - equally long reps see it alike. Reported: median and minimum over the rounds of (rep
 * time / steps), the ratio of the medians (llama.cpp / sift), and `passes` = sift's median
 * divided by the median of one SIMD max pass over the same vectors (the kernel sift's
 * fast paths start with): how close a step is to the cost of reading the logits once.
 * `exact` counts the steps where a certified fast path re-ran llama.cpp's arithmetic (dist)
 * or left the step to the general path (top_p), in percent.
 * Nothing here passes or fails on a time.
 */
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/chain.h"
#include "core/fast_kernels.h"
#include "peer_logits.h"
#include "cli_util.h"
#include "sift.h"

const char sift_bench_sampling_help[] = "sampling µs per step for 7 chains x 4 vocab sizes, next to llama.cpp's (peer_bench)";

#define BENCH_NVEC 16
#define MAX_VOCABS 8
#define MAX_REPS 200

/* ---- configurations ---------------------------------------------------------------------- */

typedef struct cfg {
    char letter;
    const char *name;
    const char *spec; /* NULL: built from sift_sampling_params */
} cfg;

static const cfg CFGS[] = {
    {'a', "a_greedy", "greedy()"},
    {'b', "b_dist", "dist(42)"},
    {'c', "c_topk40_dist", "top_k(40);dist(42)"},
    {'d', "d_topp095_dist", "top_p(0.95,1);dist(42)"},
    {'e', "e_minp005_dist", "min_p(0.05,1);dist(42)"},
    {'f', "f_default_chain", NULL},
    {'g', "g_topk0_topp095_temp08_dist", "top_k(0);top_p(0.95,1);temp(0.8);dist(42)"},
};
#define N_CFGS ((int)(sizeof CFGS / sizeof *CFGS))

static sift_chain *build(const cfg *c, int32_t n_vocab)
{
    if (c->spec) return sift_chain_from_spec(c->spec, NULL, NULL);
    sift_sampling_params p = sift_sampling_default_params();
    p.seed = 42;
    const sift_chain_env env = {.n_vocab = n_vocab, .vocab = NULL, .eot = SIFT_TOKEN_NULL, .default_seed = 42};
    return sift_chain_from_params(&p, &env, NULL);
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(const double *v, int n)
{
    double t[MAX_REPS];
    memcpy(t, v, (size_t)n * sizeof *t);
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

static double minimum(const double *v, int n)
{
    double m = v[0];
    for (int i = 1; i < n; i++) m = v[i] < m ? v[i] : m;
    return m;
}

/* One rep of `steps` sift steps; µs per step. */
static double sift_rep(sift_chain *ch, const float *logits, int32_t nv, long steps, long *next, volatile int32_t *sink)
{
    const double t0 = cli_now_us();
    for (long s = 0; s < steps; s++, (*next)++) *sink ^= sift_chain_sample(ch, logits + (size_t)(*next % BENCH_NVEC) * (size_t)nv, nv);
    return (cli_now_us() - t0) / (double)steps;
}

/* One rep of the max pass: the best SIMD max kernel over the vectors in turn. */
static double max_rep(const float *logits, int32_t nv, long steps, volatile float *sink)
{
    const sift__fk *fk = sift__fk_best();
    const double t0 = cli_now_us();
    for (long s = 0; s < steps; s++) {
        bool nan = false;
        *sink += fk->max(logits + (size_t)(s % BENCH_NVEC) * (size_t)nv, (size_t)nv, -INFINITY, &nan);
    }
    return (cli_now_us() - t0) / (double)steps;
}

/* One peer_bench run (-r 1: its warm-up rep, then one timed rep): fills peer_us[k] for
 * the configurations in `letters`. */
static int peer_rep(const char *peer, int32_t nv, const char *letters, long steps, const int *cfg_of, int n_sel,
                    double *peer_us)
{
    /* room for a PATH_MAX-sized peer path and the arguments; a longer command is refused */
    char cmd[1024 + 128];
    int n = snprintf(cmd, sizeof cmd, "'%s' -V %d -c %s -r 1 -n %ld 2>/dev/null", peer, (int)nv, letters, steps);
    if (n < 0 || (size_t)n >= sizeof cmd) return -1;
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    char line[512];
    int got = 0;
    while (fgets(line, sizeof line, p)) { /* vocab,config,median_us,min_us,steps */
        char name[128];
        int v;
        double med;
        if (sscanf(line, "%d,%127[^,],%lf", &v, name, &med) != 3) continue;
        for (int k = 0; k < n_sel; k++)
            if (!strcmp(name, CFGS[cfg_of[k]].name)) peer_us[k] = med, got++;
    }
    const int rc = pclose(p);
    return rc == 0 && got == n_sel ? 0 : -1;
}

static void read_loadavg(double out[3])
{
    FILE *f = fopen("/proc/loadavg", "r");
    if (!f) return;
    if (fscanf(f, "%lf %lf %lf", &out[0], &out[1], &out[2]) != 3) out[0] = out[1] = out[2] = 0;
    fclose(f);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: sift bench [--sampling] [-V V1,V2,..] [-c abcdefg] [-r REPS] [-n STEPS] [--rep-ms MS]\n"
               "                  [--peer PATH | --no-peer] [--csv | --json]\n"
               "  -V       vocabulary sizes (default 32000,128256,151936,262144)\n"
               "  -c       configurations a..g (default all; see the table's names)\n"
               "  -r       timed rounds (default 7), each: every sift configuration, the max pass, one peer_bench run\n"
               "  -n       steps per rep (default max(200, 64e6 / vocab), as peer_bench)\n"
               "  --rep-ms a sift rep runs at least this long (default 250; more steps, the same vectors in turn)\n"
               "  --peer   peer_bench (default $SIFT_PEER_DIR/peer_bench or /tmp/sift-peer/peer_bench);\n"
               "           --no-peer: sift only\n"
               "  --csv | --json   machine-readable output instead of the table\n"
               "SIFT_FASTK=scalar|avx2 in the environment limits the SIMD level (default: the best this CPU has)\n");
}

typedef struct row {
    int32_t vocab;
    int cfg;
    long steps, sift_steps;
    double med, min, peer_med, peer_min, max_med, exact_pct;
    bool have_peer;
} row;

int sift_bench_sampling(int argc, char **argv)
{
    int vocabs[MAX_VOCABS] = {32000, 128256, 151936, 262144};
    int n_vocabs = 4;
    long reps = 7, steps_opt = 0, rep_ms = 250;
    const char *letters = "abcdefg", *peer = NULL;
    bool no_peer = false, csv = false, json = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const bool hv = i + 1 < argc;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "-V") && hv) {
            if ((n_vocabs = cli_parse_list(argv[++i], 1, 1L << 30, vocabs, MAX_VOCABS)) <= 0) {
                fprintf(stderr, "sift bench: -V: a comma-separated list of 1..%d sizes, each 1..2^30\n", MAX_VOCABS);
                return 2;
            }
        } else if (!strcmp(a, "-c") && hv) {
            letters = argv[++i];
        } else if (!strcmp(a, "-r") && hv) {
            if (!cli_parse_long(argv[++i], 1, MAX_REPS, &reps)) {
                fprintf(stderr, "sift bench: -r: 1..%d\n", MAX_REPS);
                return 2;
            }
        } else if (!strcmp(a, "-n") && hv) {
            if (!cli_parse_long(argv[++i], 1, LONG_MAX, &steps_opt)) {
                fprintf(stderr, "sift bench: -n: a positive number of steps\n");
                return 2;
            }
        } else if (!strcmp(a, "--rep-ms") && hv) {
            if (!cli_parse_long(argv[++i], 0, 60000, &rep_ms)) {
                fprintf(stderr, "sift bench: --rep-ms: 0..60000\n");
                return 2;
            }
        } else if (!strcmp(a, "--peer") && hv) {
            peer = argv[++i];
        } else if (!strcmp(a, "--no-peer")) {
            no_peer = true;
        } else if (!strcmp(a, "--csv")) {
            csv = true;
        } else if (!strcmp(a, "--json")) {
            json = true;
        } else {
            fprintf(stderr, "sift bench: unknown or incomplete option '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    int cfg_of[N_CFGS], n_sel = 0;
    for (const char *p = letters; *p; p++) {
        if (*p == ',') continue;
        int found = -1;
        for (int c = 0; c < N_CFGS; c++)
            if (CFGS[c].letter == *p) found = c;
        for (int k = 0; k < n_sel; k++)
            if (cfg_of[k] == found) found = -2;
        if (found == -1 || n_sel == N_CFGS) {
            fprintf(stderr, "sift bench: -c: unknown configuration '%c' (a..g)\n", *p);
            return 2;
        }
        if (found >= 0) cfg_of[n_sel++] = found;
    }
    if (!n_sel) {
        fprintf(stderr, "sift bench: -c: no configuration\n");
        return 2;
    }
    char peer_buf[1024];
    if (!peer) {
        const char *dir = getenv("SIFT_PEER_DIR");
        snprintf(peer_buf, sizeof peer_buf, "%s/peer_bench", dir && *dir ? dir : "/tmp/sift-peer");
        peer = peer_buf;
    }
    const bool use_peer = !no_peer && access(peer, X_OK) == 0;
    if (!no_peer && !use_peer)
        fprintf(stderr, "sift bench: %s not found: sift only (build it with make -C ../shared/peer)\n", peer);

    double load0[3] = {0}, load1[3] = {0};
    read_loadavg(load0);
    row *rows = calloc((size_t)(n_vocabs * n_sel), sizeof *rows);
    if (!rows) return 1;
    int n_rows = 0, rc = 0;
    volatile int32_t sink = 0;
    volatile float fsink = 0;
    for (int vi = 0; vi < n_vocabs && !rc; vi++) {
        const int32_t nv = (int32_t)vocabs[vi];
        const long steps = steps_opt ? steps_opt : (64000000L / nv > 200 ? 64000000L / nv : 200);
        float *logits = malloc(sizeof(float) * (size_t)nv * BENCH_NVEC);
        sift_chain *ch[N_CFGS] = {0};
        long next[N_CFGS] = {0}, ssteps[N_CFGS], msteps = steps;
        double t_sift[N_CFGS][MAX_REPS], t_peer[N_CFGS][MAX_REPS], t_max[MAX_REPS];
        if (!logits) {
            rc = 1;
            break;
        }
        for (int v = 0; v < BENCH_NVEC; v++) sift_peer_logits(logits + (size_t)v * (size_t)nv, nv, SIFT_PEER_LOGIT_SEED, (uint32_t)v);
        for (int k = 0; k < n_sel && !rc; k++) {
            ch[k] = build(&CFGS[cfg_of[k]], nv);
            if (!ch[k]) {
                fprintf(stderr, "sift bench: cannot build %s\n", CFGS[cfg_of[k]].name);
                rc = 1;
                break;
            }
            if (!csv && !json) {
                char desc[512];
                sift_chain_describe(ch[k], desc, sizeof desc);
                fprintf(stderr, "# vocab %d %-28s chain: %s\n", (int)nv, CFGS[cfg_of[k]].name, desc);
            }
            const double w = sift_rep(ch[k], logits, nv, steps, &next[k], &sink); /* warm-up, sizes the reps */
            ssteps[k] = steps;
            if (w * (double)steps < (double)rep_ms * 1e3) ssteps[k] = (long)ceil((double)rep_ms * 1e3 / w);
        }
        const double wm = max_rep(logits, nv, steps, &fsink);
        if (wm * (double)steps < (double)rep_ms * 1e3) msteps = (long)ceil((double)rep_ms * 1e3 / wm);
        sift__fast_stats st0[N_CFGS];
        for (int k = 0; k < n_sel && !rc; k++) sift__chain_fast_stats(ch[k], &st0[k]);
        for (long r = 0; r < reps && !rc; r++) {
            for (int k = 0; k < n_sel && !rc; k++) { /* sift and llama.cpp back to back, alternating */
                const bool peer_first = (r + k) % 2 == 1;
                char one[2] = {CFGS[cfg_of[k]].letter, 0};
                if (use_peer && peer_first && peer_rep(peer, nv, one, steps, &cfg_of[k], 1, &t_peer[k][r]) != 0) rc = 1;
                t_sift[k][r] = sift_rep(ch[k], logits, nv, ssteps[k], &next[k], &sink);
                if (use_peer && !peer_first && !rc && peer_rep(peer, nv, one, steps, &cfg_of[k], 1, &t_peer[k][r]) != 0) rc = 1;
            }
            t_max[r] = max_rep(logits, nv, msteps, &fsink);
            if (rc) fprintf(stderr, "sift bench: %s failed (vocab %d)\n", peer, (int)nv);
        }
        if (!rc) {
            const double mx = median(t_max, (int)reps);
            for (int k = 0; k < n_sel; k++) {
                sift__fast_stats st;
                sift__chain_fast_stats(ch[k], &st);
                const double fell = (double)(st.dist_exact - st0[k].dist_exact) + (double)(st.top_p_general - st0[k].top_p_general);
                row *w = &rows[n_rows++];
                *w = (row){.vocab = nv, .cfg = cfg_of[k], .steps = steps, .sift_steps = ssteps[k], .med = median(t_sift[k], (int)reps),
                           .min = minimum(t_sift[k], (int)reps), .max_med = mx,
                           .exact_pct = 100.0 * fell / (double)(ssteps[k] * reps), .have_peer = use_peer};
                if (use_peer) w->peer_med = median(t_peer[k], (int)reps), w->peer_min = minimum(t_peer[k], (int)reps);
            }
            if (!csv && !json) fprintf(stderr, "# vocab %d done (max pass %.2f µs)\n", (int)nv, mx);
        }
        for (int k = 0; k < n_sel; k++) sift_chain_free(ch[k]);
        free(logits);
    }
    if (rc) {
        free(rows);
        return rc;
    }

    read_loadavg(load1);
    const sift__fk *fk = sift__fk_best();
    if (csv) {
        printf("vocab,config,steps,sift_steps,sift_median_us,sift_min_us,llama_median_us,llama_min_us,speedup,max_pass_us,passes,exact_pct\n");
        for (int i = 0; i < n_rows; i++) {
            const row *w = &rows[i];
            printf("%d,%s,%ld,%ld,%.3f,%.3f,", (int)w->vocab, CFGS[w->cfg].name, w->steps, w->sift_steps, w->med, w->min);
            if (w->have_peer) printf("%.2f,%.2f,%.2f,", w->peer_med, w->peer_min, w->peer_med / w->med);
            else printf(",,,");
            printf("%.3f,%.2f,%.3f\n", w->max_med, w->med / w->max_med, w->exact_pct);
        }
    } else if (json) {
        printf("{\"simd\": \"%s\", \"exp_exact_vector\": %s, \"reps\": %ld, \"loadavg_start\": %.2f, \"loadavg_end\": %.2f, "
               "\"results\": [\n", fk->name, fk->exp_exact_ok ? "true" : "false", reps, load0[0], load1[0]);
        for (int i = 0; i < n_rows; i++) {
            const row *w = &rows[i];
            printf("  {\"vocab\": %d, \"config\": \"%s\", \"steps\": %ld, \"sift_steps\": %ld, \"sift_median_us\": %.3f, "
                   "\"sift_min_us\": %.3f, ", (int)w->vocab, CFGS[w->cfg].name, w->steps, w->sift_steps, w->med, w->min);
            if (w->have_peer)
                printf("\"llama_median_us\": %.2f, \"llama_min_us\": %.2f, \"speedup\": %.2f, ", w->peer_med, w->peer_min,
                       w->peer_med / w->med);
            else printf("\"llama_median_us\": null, \"llama_min_us\": null, \"speedup\": null, ");
            printf("\"max_pass_us\": %.3f, \"passes\": %.2f, \"exact_pct\": %.3f}%s\n", w->max_med, w->med / w->max_med,
                   w->exact_pct, i + 1 < n_rows ? "," : "");
        }
        printf("]}\n");
    } else {
        printf("\nsampling, µs per step: median of %ld rounds (min), sift %s kernels%s; llama.cpp = peer_bench in the same rounds;\n"
               "load average %.2f at the start, %.2f at the end\n\n",
               reps, fk->name, fk->exp_exact_ok ? " (vector expf)" : " (libm expf)", load0[0], load1[0]);
        printf("| vocab | config | sift median (min) | llama.cpp median (min) | speedup | passes | exact %% |\n");
        printf("| ---: | --- | ---: | ---: | ---: | ---: | ---: |\n");
        for (int i = 0; i < n_rows; i++) {
            const row *w = &rows[i];
            printf("| %d | %s | %.2f (%.2f) | ", (int)w->vocab, CFGS[w->cfg].name, w->med, w->min);
            if (w->have_peer) printf("%.1f (%.1f) | %.1fx | ", w->peer_med, w->peer_min, w->peer_med / w->med);
            else printf("- | - | ");
            printf("%.2f | %.2f |\n", w->med / w->max_med, w->exact_pct);
        }
        printf("\nmax pass (µs): ");
        for (int i = 0; i < n_rows; i++)
            if (i == 0 || rows[i - 1].vocab != rows[i].vocab) printf("%s%d: %.2f", i ? ", " : "", (int)rows[i].vocab, rows[i].max_med);
        printf("\n");
    }
    free(rows);
    return 0;
}
