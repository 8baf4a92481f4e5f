/*
 * bench_kernels.c - `sift bench --kernels`: the weight kernels of every table this CPU runs,
 * timed the way the loader's probe times them (model/choose.c), and the table it chooses.
 *
 * For each weight type and each way to run it (a table, reading the plain layout or the x8
 * one), ns per row-block (8 rows x 2048 values) per token, for generation (one token) and
 * prompts (a tile of 16 tokens), the minimum of -r runs. Then the loader's choice, as a
 * model load makes it (the probe's own few repetitions), and how far the chosen way is
 * from the fastest one measured here with more repetitions: this is the check that the
 * short probe holds up ("chosen within 5 % of the fastest"). The probe's cost is printed
 * too (it runs once per type and process at model load; the budget is 20 ms in all).
 * Tables the CPU cannot run are not built, so they are listed as absent, never run.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/kernels.h"
#include "sift.h"

const char sift_bench_kernels_help[] = "weight kernels: ns per row-block of every table x type, and the table chosen";

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static const sift_tensor_type types[] = {SIFT_TYPE_F32,  SIFT_TYPE_F16,  SIFT_TYPE_BF16, SIFT_TYPE_Q8_0,
                                         SIFT_TYPE_Q4_0, SIFT_TYPE_MXFP4, SIFT_TYPE_Q4_K, SIFT_TYPE_Q5_K, SIFT_TYPE_Q6_K};

static const char *way_of(const sift__kernel_way *ways, int n, const sift__kernels *k, bool x8)
{
    for (int i = 0; i < n; i++)
        if (ways[i].k == k && ways[i].x8 == x8) return ways[i].name;
    /* the AVX-512 table reads x8 with AVX2's entry: name it by the way listed */
    for (int i = 0; i < n; i++)
        if (ways[i].x8 == x8 && x8 && ways[i].k->gemm_x8[SIFT_TYPE_Q4_K] == k->gemm_x8[SIFT_TYPE_Q4_K]) return ways[i].name;
    return "?";
}

/* The index of way (k, x8) in ways, -1 if absent. */
static int index_of(const sift__kernel_way *ways, int n, const sift__kernels *k, bool x8, sift_tensor_type t)
{
    for (int i = 0; i < n; i++)
        if (ways[i].x8 == x8 && (ways[i].k == k || (x8 && ways[i].k->gemm_x8[t] == k->gemm_x8[t]))) return i;
    return -1;
}

int sift_bench_kernels(int argc, char **argv)
{
    int reps = 40;
    bool huge = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-r") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--huge")) huge = true;
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: sift bench --kernels [-r REPS] [--huge]\n"
                   "  -r N     runs per way, min taken (default 40)\n"
                   "  --huge   generation through rows_huge (matrices copied in huge pages, SIFT_COPY=1)\n");
            return 0;
        } else {
            fprintf(stderr, "sift bench --kernels: unknown option '%s'\n", argv[i]);
            return 2;
        }
    }
    if (reps < 1) {
        fprintf(stderr, "sift bench --kernels: -r needs a positive count\n");
        return 2;
    }
    const sift_isa levels[] = {SIFT_ISA_SCALAR, SIFT_ISA_AVX2, SIFT_ISA_AVX512};
    printf("tables built on this CPU:");
    for (size_t i = 0; i < sizeof levels / sizeof *levels; i++)
        printf(" %s%s", sift_isa_name(levels[i]), sift__kernels_get(levels[i]) ? "" : " (absent: the CPU lacks it)");
    printf("\nns per row-block (8 rows x 2048 values) per token, min of %d runs; generation %s, prompt a 16-token tile\n\n",
           reps, huge ? "rows_huge" : "rows (mapped matrices)");
    printf("%-6s %-14s %12s %12s   %s\n", "type", "way", "gen ns", "prompt ns", "chosen for");

    /* the probe as a load makes it, one type at a time (once per process: time it first) */
    bool used[SIFT_TYPE_COUNT] = {false};
    sift__kernels chosen;
    double probe_ms[sizeof types / sizeof *types], probe_all = 0;
    for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
        bool one[SIFT_TYPE_COUNT] = {false};
        one[types[i]] = used[types[i]] = true;
        const double t0 = now_ms();
        sift__kernels_choose(one, huge, &chosen);
        probe_all += probe_ms[i] = now_ms() - t0;
    }
    sift__kernels_choose(used, huge, &chosen); /* all decided: the table only */

    double worst = 1;
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
        const sift_tensor_type t = types[ti];
        sift__kernel_way ways[8];
        double gen[8], prompt[8];
        sift__kernel_choice c;
        const int n = sift__kernel_measure(t, huge, true, reps, ways, 8, gen, prompt, &c);
        if (n == 0) continue;
        /* what the load chose: the composite table's entries name their tables */
        const sift__kernels *cg = NULL, *cp = NULL, *cx = NULL;
        for (int i = 0; i < n; i++) {
            const sift__kernels *k = ways[i].k;
            if (ways[i].x8) {
                if (chosen.x8_pack[t] && chosen.gemm_x8[t] == k->gemm_x8[t] && !cx) cx = k;
                continue;
            }
            if (!cg && chosen.rows[t] == k->rows[t] && chosen.rows_huge[t] == k->rows_huge[t]) cg = k;
            if (!cp && chosen.dot[t] == k->dot[t] && chosen.gemm[t] == k->gemm[t]) cp = k;
        }
        const int ig = cx ? index_of(ways, n, cx, true, t) : cg ? index_of(ways, n, cg, false, t) : -1;
        const int ip = cx ? index_of(ways, n, cx, true, t) : cp ? index_of(ways, n, cp, false, t) : -1;
        double best_g = INFINITY, best_p = INFINITY;
        for (int i = 0; i < n; i++) {
            if (ways[i].k->isa == SIFT_ISA_SCALAR) continue;
            if (gen[i] < best_g) best_g = gen[i];
            if (prompt[i] < best_p) best_p = prompt[i];
        }
        for (int i = 0; i < n; i++)
            printf("%-6s %-14s %12.0f %12.0f   %s%s\n", sift_type_name(t), ways[i].name, gen[i], prompt[i],
                   i == ig ? "gen " : "", i == ip ? "prompt" : "");
        if (ig >= 0 && ip >= 0) {
            const double rg = gen[ig] / best_g, rp = prompt[ip] / best_p;
            if (rg > worst) worst = rg;
            if (rp > worst) worst = rp;
            printf("%-6s chosen: gen %s (%.2fx the fastest), prompt %s (%.2fx)%s\n\n", sift_type_name(t),
                   way_of(ways, n, cx ? cx : cg, cx != NULL), rg, way_of(ways, n, cx ? cx : cp, cx != NULL), rp,
                   cx ? ", x8 layout (repacked at load)" : "");
        }
    }
    printf("probe at load, ms per type (once per process; a model probes only the types it uses):");
    for (size_t i = 0; i < sizeof types / sizeof *types; i++) printf(" %s %.2f", sift_type_name(types[i]), probe_ms[i]);
    printf("; all %.2f\n", probe_all);
    printf("worst chosen/fastest: %.3fx\n", worst);
    return 0;
}
