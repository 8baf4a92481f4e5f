/*
 * gpu_testutil.h - what the device chain tests share: the reference logits and token
 * streams of ../shared/reference/sampling, the CPU side of a comparison, and exact
 * (double precision) top_p cuts for telling apart "the device is wrong" from "llama.cpp's
 * float sums round the cut elsewhere".
 */
#ifndef SIFT_GPU_TESTUTIL_H
#define SIFT_GPU_TESTUTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sift.h"

/* Under valgrind and in sanitizer builds (-O0 + ASan) the long differential loops are cut
 * short: every code path still runs, on fewer rows and steps. */
#if defined(__SANITIZE_ADDRESS__)
#define GT_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GT_SANITIZED 1
#endif
#endif
#ifndef GT_SANITIZED
#define GT_SANITIZED 0
#endif
#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define GT_SLOW_HOST() (GT_SANITIZED || RUNNING_ON_VALGRIND)
#endif
#endif
#ifndef GT_SLOW_HOST
#define GT_SLOW_HOST() GT_SANITIZED
#endif

#define GT_STEPS 256

typedef struct gt_logits {
    uint32_t n_vocab, n_rows;
    float *x; /* [n_rows][n_vocab] */
} gt_logits;

static inline const char *gt_shared(void)
{
    const char *s = getenv("SIFT_SHARED");
    return s ? s : "../shared";
}

/* logits_v<V>.bin: uint32 n_vocab, uint32 n_vectors, float[n_vectors][n_vocab] */
static inline int gt_load_logits(uint32_t V, gt_logits *out)
{
    char path[1024];
    memset(out, 0, sizeof *out);
    snprintf(path, sizeof path, "%s/reference/sampling/logits_v%u.bin", gt_shared(), (unsigned)V);
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s (set SIFT_SHARED)\n", path);
        return -1;
    }
    uint32_t h[2];
    int ok = fread(h, 4, 2, f) == 2 && h[0] == V && h[1] > 0 && h[1] <= 1024;
    if (ok) {
        out->n_vocab = h[0];
        out->n_rows = h[1];
        out->x = malloc((size_t)h[0] * h[1] * sizeof(float));
        ok = out->x && fread(out->x, sizeof(float), (size_t)h[0] * h[1], f) == (size_t)h[0] * h[1];
    }
    fclose(f);
    if (!ok) fprintf(stderr, "%s: malformed\n", path);
    return ok ? 0 : -1;
}

static inline const float *gt_row(const gt_logits *L, uint32_t r) { return L->x + (size_t)(r % L->n_rows) * L->n_vocab; }

/* v<V>/<name>.txt: one token per line, GT_STEPS of them */
static inline int gt_load_stream(uint32_t V, const char *name, int32_t *tokens)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/reference/sampling/v%u/%s.txt", gt_shared(), (unsigned)V, name);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int n = 0;
    while (n < GT_STEPS && fscanf(f, "%d", &tokens[n]) == 1) n++;
    fclose(f);
    return n == GT_STEPS ? 0 : -1;
}

/* The reference chains (README.md of reference/): name, spec for V=32000, for V=151936. */
typedef struct gt_chain {
    const char *name;
    const char *spec32k;
    const char *spec152k;
} gt_chain;

static const gt_chain gt_chains[] = {
    {"greedy", "greedy()", NULL},
    {"dist_s42", "dist(42)", NULL},
    {"topk40_temp08_dist_s1234", "top_k(40);temp(0.8);dist(1234)", NULL},
    {"topp09_dist_s7", "top_p(0.9,1);dist(7)", NULL},
    {"minp01_temp15_dist_s99", "min_p(0.1,1);temp(1.5);dist(99)", NULL},
    {"penalties_topk50_dist_s5", "penalties(64,1.3,0.2,0.1);top_k(50);dist(5)", NULL},
    {"typical09_dist_s3", "typical(0.9,1);dist(3)", NULL},
    {"xtc_dist_s11", "xtc(0.5,0.1,1,11);dist(11)", NULL},
    {"topnsigma1_dist_s13", "top_n_sigma(1.0);dist(13)", NULL},
    {"mirostat2_s17", "mirostat_v2(17,5,0.1)", NULL},
    {"tempext_dist_s19", "temp_ext(0.8,0.5,1.0);dist(19)", NULL},
    {"dry_dist_s42", "dry(0.8,1.75,2,256,[12009],[5644],[14116],[16941 31217]);dist(42)",
     "dry(0.8,1.75,2,256,[101475],[30689],[20632],[58181 33492]);dist(42)"},
    {"default_s42",
     "penalties(64,1.0,0.0,0.0);top_k(40);typical(1.0,0);top_p(0.95,0);min_p(0.05,0);xtc(0.0,0.1,0,42);"
     "temp_ext(0.8,0.0,1.0);dist(42)",
     NULL},
};
#define GT_N_CHAINS (sizeof gt_chains / sizeof *gt_chains)

/* The CPU tails of the hybrid case, "top_k(256);temp(0.8);<tail>": samplers the
 * device chain does not run, so the candidates cross to the host before them. */
static const char *const gt_hybrid_tails[] = {
    "mirostat_v2(17,5,0.1)",
    "typical(0.9,1);dist(3)",
    "xtc(0.5,0.1,1,11);dist(11)",
    "top_n_sigma(1.0);dist(13)",
    "dry(0.8,1.75,2,256,[12009],[5644],[14116],[16941 31217]);dist(42)",
    "temp_ext(1.0,0.5,1.0);dist(19)",
};
#define GT_N_HYBRID_TAILS (sizeof gt_hybrid_tails / sizeof *gt_hybrid_tails)

static inline const char *gt_spec(const gt_chain *c, uint32_t V) { return V != 32000 && c->spec152k ? c->spec152k : c->spec32k; }

/* The candidates a CPU chain built from spec leaves on a fresh fill of logits (no accept). */
static inline int gt_cpu_apply(const char *spec, uint32_t V, const float *logits, sift_candidates *cand)
{
    sift_chain_env env = {.n_vocab = (int32_t)V, .vocab = NULL, .eot = SIFT_TOKEN_NULL, .default_seed = 0};
    sift_error err;
    sift_chain *ch = sift_chain_from_spec(spec, &env, &err);
    if (!ch) {
        fprintf(stderr, "%s: %s\n", spec, err.msg);
        return -1;
    }
    sift_candidates_fill(cand, logits, V);
    sift_chain_apply(ch, cand);
    sift_chain_free(ch);
    return 0;
}

static int gt_cmp_desc_d(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* top_p(p, min_keep) on the whole row in exact arithmetic (double exp, long double sums): how
 * many candidates it keeps. */
static inline size_t gt_exact_top_p(const float *logits, uint32_t V, float p, size_t min_keep)
{
    double *e = malloc(V * sizeof *e);
    if (!e) return 0;
    float mx = -INFINITY;
    for (uint32_t i = 0; i < V; i++) mx = logits[i] > mx ? logits[i] : mx;
    long double tot = 0;
    for (uint32_t i = 0; i < V; i++) {
        e[i] = exp((double)logits[i] - (double)mx);
        tot += e[i];
    }
    qsort(e, V, sizeof *e, gt_cmp_desc_d);
    long double cum = 0;
    size_t k = V;
    for (size_t i = 0; i < V; i++) {
        cum += e[i];
        if (cum / tot >= (long double)p && i + 1 >= min_keep) {
            k = i + 1;
            break;
        }
    }
    free(e);
    return k;
}

#endif
