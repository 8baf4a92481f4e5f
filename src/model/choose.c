/*
 * choose.c - which kernel table runs each weight type, chosen by measuring on this CPU.
 *
 * Why measure: a higher instruction-set level is not always faster. On an AVX-512 Zen 4
 * the AVX-512 Q4_K table generated at half the speed of the AVX2 one (issue 25): 512-bit
 * operations that are split in two halves, a plain layout against AVX2's x8 one
 * (repack.h), frequency. No rule written on one CPU holds on the next, so at the first
 * load of each weight type the process times every table this CPU runs, for generation
 * (one token: the rows / rows_huge entries, or gemm_x8 for the x8 layout) and for prompts
 * (a tile of PROBE_TOK tokens: gemm, or the dot kernel row by row), and a model's contexts
 * with --isa auto use the fastest table for each (sift_model.k_auto). --isa names one
 * table for everything and bypasses the choice.
 *
 * The probe: a matrix of PROBE_ROWS x PROBE_IN values (the shape of one row-block run of
 * a 2048-wide model; tens of KiB for the quantized types, so it sits in L2 and measures the
 * kernel's work, which is what differs between tables: the memory a generation streams is
 * the same bytes whatever the table), made by quantizing one 256-value block of random
 * values and repeating it. Each candidate runs PROBE_REPS times, the candidates interleaved
 * (a burst of noise from another process hits all of them, not one), and keeps its
 * minimum: noise only ever adds time. A higher level must beat the one below by
 * PROBE_MARGIN to be preferred, so two tables that measure the same keep the lower, which
 * runs at full clock on every CPU. Tables the CPU cannot run are never built
 * (sift__kernels_get returns NULL for them: core/cpu.c checks CPUID and XGETBV), so the
 * probe never executes an instruction the CPU lacks. The whole probe costs a few ms per
 * type and runs once per type per process (decisions are kept, under a mutex).
 *
 * The x8 layout (Q4_K, MXFP4): the probe also decides whether repacking pays on this CPU. The
 * repacked layout is read by gemm_x8 for every token count, so it is chosen when the mean
 * of its generation and prompt times, each relative to the best plain table's, is below
 * 1 - PROBE_MARGIN; the loader then repacks (repack.c).
 *
 * Q8_0's x8 layout is repacked only on request (SIFT_PACK_NOW=1: during the load, or
 * SIFT_PACK_LATE=1: after it; sift__x8_on_request). The probe's matrix sits in L2, where
 * the x8 kernels are faster (generation 360 against 550 ns per row-block, prompts 290
 * against 360 on the Zen 3), but a model's generation streams its weights from memory, and
 * there AVX2's rows_q8_0 reads the plain rows in place as fast as gemm_x8 reads packed ones
 * (930-1070 against 1010-1200 ns: `sift bench --kernels`, "gen stream"). What repacking
 * buys is then prompt compute, and it costs a copy of the largest weights per parameter
 * (8.5 bits: 626 MiB for the 2048 x 8 model, more than llama.cpp's whole load) and a second
 * resident copy; packed after the load, the packer took the cores and the memory bandwidth
 * from the first decodes (q8_0 at t=1: load, prompt and generation 0.67-0.70x llama.cpp,
 * against 1.40-1.52x read in place, at load average 7-9).
 *
 * Results: every entry of one table gives the same numbers bit for bit (a token's logits do
 * not depend on its batch), and tables of different levels agree within rounding
 * (tests/test_kernels.c). So generation and prompts take different tables only where the
 * two give the same numbers on the probe, bit for bit; otherwise one table serves both, the
 * best over the two. The x8 layout is read by one gemm_x8 for every token count.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/cpu.h"
#include "gguf/ggml_types.h"
#include "model/kernels.h"
#include "model/model.h"
#include "model/repack.h"

#define PROBE_IN 2048
#define PROBE_ROWS 64
#define PROBE_TOK 16
#define PROBE_REPS 5
#define PROBE_GEN_ITERS 4 /* one generation pass is a few µs: time a few per repetition */
#define PROBE_MARGIN 0.03

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* the levels of this architecture, lowest first (a table the CPU cannot run is absent) */
#if defined(__aarch64__)
static const sift_isa isa_levels[] = {SIFT_ISA_SCALAR, SIFT_ISA_NEON, SIFT_ISA_NEON_DOTPROD};
#else
static const sift_isa isa_levels[] = {SIFT_ISA_SCALAR, SIFT_ISA_AVX2, SIFT_ISA_AVX512};
#endif

static const char *x8_name(sift_isa isa)
{
    switch (isa) {
    case SIFT_ISA_SCALAR: return "scalar-x8";
    case SIFT_ISA_AVX2: return "avx2-x8";
    case SIFT_ISA_AVX512: return "avx512-x8";
    case SIFT_ISA_NEON: return "neon-x8";
    case SIFT_ISA_NEON_DOTPROD: return "neon-dotprod-x8";
    default: return "x8";
    }
}

int sift__kernel_ways(sift_tensor_type t, bool with_scalar, sift__kernel_way *out, int cap)
{
    int n = 0;
    if (t < 0 || t >= SIFT_TYPE_COUNT) return 0;
    for (size_t i = 0; i < sizeof isa_levels / sizeof *isa_levels; i++) {
        const sift__kernels *k = sift__kernels_get(isa_levels[i]);
        if (!k || !k->dot[t]) continue;
        if (isa_levels[i] == SIFT_ISA_SCALAR && !with_scalar) continue;
        const sift__kernels *plain = isa_levels[i] == SIFT_ISA_AVX512 ? sift__kernels_get_avx512_plain() : NULL;
        /* AVX-512 without its VNNI entries is a way of its own where they differ */
        if (plain && plain != k && (plain->dot[t] != k->dot[t] || plain->rows[t] != k->rows[t]) && n < cap)
            out[n++] = (sift__kernel_way){plain, false, "avx512-novnni"};
        if (n < cap) out[n++] = (sift__kernel_way){k, false, sift_isa_name(isa_levels[i])};
        /* the x8 layout through this table's gemm_x8, where the table has its own (the
         * AVX-512 table reads the layout with AVX2's entry: timing it again says nothing) */
        const sift__kernels *below = i > 0 ? sift__kernels_get(isa_levels[i - 1]) : NULL;
        if (k->gemm_x8[t] && (!below || below->gemm_x8[t] != k->gemm_x8[t]) && n < cap)
            out[n++] = (sift__kernel_way){k, true, x8_name(isa_levels[i])};
    }
    return n;
}

/* The probe's operands for type t: a weight matrix (x8-packed too, where the type has the
 * layout) and PROBE_TOK activation rows in the type's format. */
typedef struct probe_data {
    sift_tensor_type t;
    size_t row_bytes, act_stride;
    void *w, *w8, *act;
    float *out;
} probe_data;

static void probe_free(probe_data *d)
{
    free(d->w);
    free(d->w8);
    free(d->act);
    free(d->out);
    memset(d, 0, sizeof *d);
}

static uint32_t lcg(uint32_t *s)
{
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

static bool probe_make(sift_tensor_type t, probe_data *d)
{
    memset(d, 0, sizeof *d);
    d->t = t;
    const sift__type_traits *tr = sift__type_traits_get(t);
    const sift__act_format f = sift__act_format_of(t);
    const uint64_t rb = sift__type_row_bytes(t, PROBE_IN);
    if (!tr || !tr->quantize || !rb || f == SIFT_ACT_NONE || rb % (uint64_t)(tr->block_bytes * (256 / tr->block_size)))
        return false;
    d->row_bytes = (size_t)rb;
    d->act_stride = sift__act_row_bytes(f, PROBE_IN);
    float x[PROBE_IN];
    uint32_t s = 12345;
    for (int i = 0; i < PROBE_IN; i++) x[i] = (float)(lcg(&s) % 2001) / 1000.f - 1.f;
    d->w = aligned_alloc(64, PROBE_ROWS * d->row_bytes);
    d->act = aligned_alloc(64, PROBE_TOK * d->act_stride + 64);
    d->out = malloc((size_t)PROBE_ROWS * PROBE_TOK * sizeof(float));
    if (!d->w || !d->act || !d->out) goto fail;
    /* one 256-value piece quantized, repeated over the matrix (quantizing the whole
     * matrix would cost more than the probe) */
    const size_t piece = tr->block_bytes * (size_t)(256 / tr->block_size);
    if (sift__quantize_row(t, x, d->w, 256) != SIFT_OK) goto fail;
    for (size_t o = piece; o < PROBE_ROWS * d->row_bytes; o += piece) memcpy((char *)d->w + o, d->w, piece);
    for (int c = 0; c < PROBE_TOK; c++) sift__act_convert_scalar(f, x, (char *)d->act + c * d->act_stride, PROBE_IN);
    const sift__kernels *k = sift__kernels_get(SIFT_ISA_SCALAR);
    const sift__x8_pack_fn pack = sift__x8_pack_ref(t);
    if (k->gemm_x8[t] && pack) {
        if (!(d->w8 = aligned_alloc(64, PROBE_ROWS * d->row_bytes))) goto fail;
        for (int g = 0; g < PROBE_ROWS; g += 8)
            pack((char *)d->w + g * d->row_bytes, d->row_bytes, PROBE_IN / tr->block_size, (char *)d->w8 + g * d->row_bytes);
    }
    return true;
fail:
    probe_free(d);
    return false;
}

/* One run of way w on the probe (prompt: a PROBE_TOK tile; else PROBE_GEN_ITERS tokens). */
static void probe_run(const probe_data *d, const sift__kernel_way *w, bool prompt, bool huge)
{
    const sift__kernels *k = w->k;
    const sift_tensor_type t = d->t;
    if (w->x8) {
        for (int it = 0; it < (prompt ? 1 : PROBE_GEN_ITERS); it++)
            k->gemm_x8[t](PROBE_IN, d->w8, d->row_bytes, PROBE_ROWS, 0, PROBE_ROWS, d->act, d->act_stride,
                          prompt ? PROBE_TOK : 1, d->out, PROBE_ROWS);
        return;
    }
    if (!prompt) {
        const sift__rows_fn rows = huge && k->rows_huge[t] ? k->rows_huge[t] : k->rows[t];
        for (int it = 0; it < PROBE_GEN_ITERS; it++) rows(PROBE_IN, d->w, d->row_bytes, PROBE_ROWS, d->act, d->out);
        return;
    }
    if (k->gemm[t]) {
        k->gemm[t](PROBE_IN, d->w, d->row_bytes, PROBE_ROWS, d->act, d->act_stride, PROBE_TOK, d->out, PROBE_ROWS);
        return;
    }
    float s[SIFT_DOT_MAX_COLS];
    for (int r = 0; r < PROBE_ROWS; r++)
        for (int c = 0; c < PROBE_TOK; c += SIFT_DOT_MAX_COLS) {
            k->dot[t](PROBE_IN, (const char *)d->w + r * d->row_bytes, (const char *)d->act + c * d->act_stride,
                      d->act_stride, SIFT_DOT_MAX_COLS, s);
            d->out[c * PROBE_ROWS + r] = s[0];
        }
}

/* ns per row-block (8 rows x PROBE_IN values) per token, min over reps, for each way:
 * gen[i] and prompt[i] (either may be NULL). */
static void probe_times(const probe_data *d, const sift__kernel_way *ways, int n, bool huge, int reps, double *gen,
                        double *prompt)
{
    const double blocks = PROBE_ROWS / 8.0;
    for (int i = 0; i < n; i++) {
        if (gen) gen[i] = INFINITY;
        if (prompt) prompt[i] = INFINITY;
        if (gen) probe_run(d, &ways[i], false, huge); /* warm: code, data, clock */
    }
    for (int r = 0; r < reps; r++)
        for (int i = 0; i < n; i++) {
            if (gen) {
                const double t0 = now_ns();
                probe_run(d, &ways[i], false, huge);
                const double ns = (now_ns() - t0) / (blocks * PROBE_GEN_ITERS);
                if (ns < gen[i]) gen[i] = ns;
            }
            if (prompt) {
                const double t0 = now_ns();
                probe_run(d, &ways[i], true, huge);
                const double ns = (now_ns() - t0) / (blocks * PROBE_TOK);
                if (ns < prompt[i]) prompt[i] = ns;
            }
        }
}

int sift__kernel_fastest(const sift__kernel_way *ways, const double *ns, int n, bool want_x8)
{
    int best = -1;
    for (int i = 0; i < n; i++) {
        if (ways[i].x8 != want_x8 || !isfinite(ns[i])) continue;
        if (best < 0 || ns[i] < ns[best] * (1 - PROBE_MARGIN)) best = i;
    }
    return best;
}

/* Do ways a (generation) and b (prompt) give the same numbers, bit for bit, on the probe?
 * Within a table every entry does (kernels.h); across tables the float sums may be
 * ordered differently, and a token must not get other logits when it comes in a batch. */
static bool same_results(const probe_data *d, const sift__kernel_way *a, const sift__kernel_way *b)
{
    float ga[PROBE_ROWS];
    probe_run(d, a, false, false);
    memcpy(ga, d->out, sizeof ga);
    probe_run(d, b, true, false);
    return memcmp(ga, d->out, sizeof ga) == 0; /* column 0 of the tile: the same activations */
}

int sift__kernel_measure(sift_tensor_type t, bool huge, bool with_scalar, int reps, sift__kernel_way *ways, int cap,
                         double *gen, double *prompt, sift__kernel_choice *choice)
{
    probe_data d;
    const int n = sift__kernel_ways(t, with_scalar, ways, cap);
    if (n == 0 || !probe_make(t, &d)) return 0;
    probe_times(&d, ways, n, huge, reps, gen, prompt);
    /* the choice is made among the SIMD tables: scalar only where nothing else runs */
    int first = 0;
    while (first < n - 1 && ways[first].k->isa == SIFT_ISA_SCALAR) first++;
    int g = first + sift__kernel_fastest(ways + first, gen + first, n - first, false);
    int p = first + sift__kernel_fastest(ways + first, prompt + first, n - first, false);
    if (g != p && !same_results(&d, &ways[g], &ways[p])) {
        /* one table for both, the best over the two (relative to each's fastest) */
        int one = -1;
        double best = INFINITY;
        for (int i = first; i < n; i++) {
            const double rel = gen[i] / gen[g] + prompt[i] / prompt[p];
            if (!ways[i].x8 && rel < best) best = rel, one = i;
        }
        g = p = one;
    }
    probe_free(&d);
    const int x = sift__kernel_fastest(ways + first, gen + first, n - first, true);
    *choice = (sift__kernel_choice){.gen = ways[g].k, .prompt = ways[p].k};
    if (x >= 0) {
        /* the x8 way's table for both; the best x8 prompt is among the same tables */
        const int xi = first + x, xp = first + sift__kernel_fastest(ways + first, prompt + first, n - first, true);
        const double rel = (gen[xi] / gen[g] + prompt[xp] / prompt[p]) / 2;
        if (rel < 1 - PROBE_MARGIN) choice->x8 = ways[xi].k;
    }
    return n;
}

/* ---- the per-process decisions and a model's table ------------------------------------------- */

bool sift__x8_on_request(sift_tensor_type t)
{
    return t == SIFT_TYPE_Q8_0;
}

static pthread_mutex_t decided_lock = PTHREAD_MUTEX_INITIALIZER;
static bool decided[SIFT_TYPE_COUNT][2];
static sift__kernel_choice decision[SIFT_TYPE_COUNT][2];

void sift__kernels_choose(const bool used[SIFT_TYPE_COUNT], bool huge, sift__kernels *out)
{
    const sift__kernels *best = sift__kernels_get(SIFT_ISA_AUTO);
    *out = *best; /* attention, activations, element-wise: the best level's */
    memset(out->x8_pack, 0, sizeof out->x8_pack); /* repacked only where measured faster, below */
    pthread_mutex_lock(&decided_lock);
    for (int t = 0; t < SIFT_TYPE_COUNT; t++) {
        if (!used[t] || !best->dot[t]) continue;
        if (!decided[t][huge]) {
            sift__kernel_way ways[8];
            double gen[8], prompt[8];
            sift__kernel_choice c = {best, best, NULL};
            if (sift__kernel_measure((sift_tensor_type)t, huge, false, PROBE_REPS, ways, 8, gen, prompt, &c) == 0)
                c = (sift__kernel_choice){best, best, NULL};
            decision[t][huge] = c;
            decided[t][huge] = true;
        }
        const sift__kernel_choice *c = &decision[t][huge];
        out->rows[t] = c->gen->rows[t];
        out->rows_huge[t] = c->gen->rows_huge[t];
        out->dot[t] = c->prompt->dot[t];
        out->gemm[t] = c->prompt->gemm[t];
        if (c->x8 && (!sift__x8_on_request((sift_tensor_type)t) || sift__env_on("SIFT_PACK_NOW") || sift__env_on("SIFT_PACK_LATE"))) {
            out->gemm_x8[t] = c->x8->gemm_x8[t];
            out->x8_pack[t] = c->x8->x8_pack[t] ? c->x8->x8_pack[t] : best->x8_pack[t];
            if (!out->x8_pack[t]) out->x8_pack[t] = sift__x8_pack_ref((sift_tensor_type)t);
        }
    }
    pthread_mutex_unlock(&decided_lock);
}
