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
 *
 * The probe's matrix sits in L2; a model's generation streams its weights from memory. For
 * the types whose x8 layout is repacked only on request (Q8_0: sift__x8_on_request), the
 * rule is that the plain rows, read in place, stream as fast as the packed ones: "gen
 * stream" times the chosen rows kernel and gemm_x8 over a matrix of STREAM_BYTES in 4 KiB
 * pages (a file mapping's), larger than the caches, and the choice for such a type is
 * checked against the plain ways only (its x8 ways are listed, and what they would give).
 */
#include <sys/mman.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gguf/ggml_types.h"
#include "model/kernels.h"
#include "model/repack.h"
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

#define STREAM_BYTES ((size_t)96 << 20)
#define STREAM_IN 2048

/* ns per row-block (8 rows x STREAM_IN) of one token through rows (plain) and gemm_x8 (the
 * same rows packed) over STREAM_BYTES of type t, min of reps; false if not measured. */
static bool stream_times(sift_tensor_type t, const sift__kernels *k, int reps, double *plain, double *x8)
{
    const sift__x8_pack_fn pack = k->x8_pack[t] ? k->x8_pack[t] : sift__x8_pack_ref(t);
    const sift__act_format f = sift__act_format_of(t);
    const size_t rb = (size_t)sift__type_row_bytes(t, STREAM_IN), ab = sift__act_row_bytes(f, STREAM_IN);
    const sift__type_traits *tr = sift__type_traits_get(t);
    if (!pack || !k->gemm_x8[t] || !k->rows[t] || !rb || !tr) return false;
    const int64_t rows = (int64_t)(STREAM_BYTES / rb) / 8 * 8;
    char *w = mmap(NULL, STREAM_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char *w8 = mmap(NULL, STREAM_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    float *out = malloc((size_t)rows * sizeof *out), x[STREAM_IN];
    void *act = malloc(ab);
    bool ok = w != MAP_FAILED && w8 != MAP_FAILED && out && act;
    if (ok) {
#ifdef MADV_NOHUGEPAGE
        madvise(w, STREAM_BYTES, MADV_NOHUGEPAGE); /* 4 KiB pages, as a file mapping's */
        madvise(w8, STREAM_BYTES, MADV_NOHUGEPAGE);
#endif
        uint32_t r = 7;
        for (int i = 0; i < STREAM_IN; i++) x[i] = (float)((r = r * 1664525u + 1013904223u) >> 8) / 16777216.f * 2 - 1;
        ok = sift__quantize_row(t, x, w, STREAM_IN) == SIFT_OK;
        for (int64_t i = 1; ok && i < rows; i++) memcpy(w + i * rb, w, rb); /* the values do not change the time */
        for (int64_t g = 0; ok && g < rows; g += 8) pack(w + g * rb, rb, STREAM_IN / tr->block_size, w8 + g * rb);
        k->act_convert(f, x, act, STREAM_IN);
    }
    *plain = *x8 = INFINITY;
    for (int i = 0; ok && i < reps; i++) {
        double t0 = now_ms();
        k->rows[t](STREAM_IN, w, rb, rows, act, out);
        const double a = (now_ms() - t0) * 1e6 / (rows / 8.0);
        t0 = now_ms();
        k->gemm_x8[t](STREAM_IN, w8, rb, rows, 0, rows, act, ab, 1, out, rows);
        const double b = (now_ms() - t0) * 1e6 / (rows / 8.0);
        if (a < *plain) *plain = a;
        if (b < *x8) *x8 = b;
    }
    if (w != MAP_FAILED) munmap(w, STREAM_BYTES);
    if (w8 != MAP_FAILED) munmap(w8, STREAM_BYTES);
    free(out);
    free(act);
    return ok;
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
        const bool on_request = sift__x8_on_request(t) && !cx; /* x8 not repacked: the plain ways compete */
        for (int i = 0; i < n; i++) {
            if (ways[i].k->isa == SIFT_ISA_SCALAR || (on_request && ways[i].x8)) continue;
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
            double sp, sx;
            if (sift__x8_on_request(t) && stream_times(t, cx ? cx : cg, reps < 5 ? reps : 5, &sp, &sx))
                printf("%-6s x8 layout %s; gen stream (%zu MiB, 4 KiB pages): plain rows %.0f, x8 %.0f (%.2fx)\n\n",
                       sift_type_name(t), cx ? "repacked on request" : "repacked only on request (SIFT_PACK_NOW=1, SIFT_PACK_LATE=1)",
                       STREAM_BYTES >> 20, sp, sx, sp / sx);
        }
    }
    printf("probe at load, ms per type (once per process; a model probes only the types it uses):");
    for (size_t i = 0; i < sizeof types / sizeof *types; i++) printf(" %s %.2f", sift_type_name(types[i]), probe_ms[i]);
    printf("; all %.2f\n", probe_all);
    printf("worst chosen/fastest: %.3fx\n", worst);
    return 0;
}
