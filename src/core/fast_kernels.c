/*
 * fast_kernels.c - the portable (scalar) kernels, glibc's expf data, and the run-time choice of
 * a variant (see fast_kernels.h).
 *
 * The scalar kernels define what every SIMD variant must compute; they are written as
 * plain loops in the same order of operations, so a variant can be checked against them
 * bit for bit. The choice is made once per process (pthread_once): the best level the CPU
 * and OS run (core/cpu.c: AVX-512, else AVX2, with the whole flag set each file is compiled
 * with; NEON on aarch64), lowered by SIFT_FASTK=scalar|avx2|neon when set.
 * The chosen variant's exp_exact is then probed against libm's expf; if a single probe
 * differs (another libm, a build without FMA contraction) the variant keeps its other
 * kernels but exp_exact calls expf.
 */
#include "core/fast_kernels.h"

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"

/* glibc's __exp2f_data.tab: 2^(i/32) with i << 47 subtracted from its bits */
const uint64_t sift__exp2f_tab[32] = {
    0x3ff0000000000000ULL, 0x3fefd9b0d3158574ULL, 0x3fefb5586cf9890fULL, 0x3fef9301d0125b51ULL,
    0x3fef72b83c7d517bULL, 0x3fef54873168b9aaULL, 0x3fef387a6e756238ULL, 0x3fef1e9df51fdee1ULL,
    0x3fef06fe0a31b715ULL, 0x3feef1a7373aa9cbULL, 0x3feedea64c123422ULL, 0x3feece086061892dULL,
    0x3feebfdad5362a27ULL, 0x3feeb42b569d4f82ULL, 0x3feeab07dd485429ULL, 0x3feea47eb03a5585ULL,
    0x3feea09e667f3bcdULL, 0x3fee9f75e8ec5f74ULL, 0x3feea11473eb0187ULL, 0x3feea589994cce13ULL,
    0x3feeace5422aa0dbULL, 0x3feeb737b0cdc5e5ULL, 0x3feec49182a3f090ULL, 0x3feed503b23e255dULL,
    0x3feee89f995ad3adULL, 0x3feeff76f2fb5e47ULL, 0x3fef199bdd85529cULL, 0x3fef3720dcef9069ULL,
    0x3fef5818dcfba487ULL, 0x3fef7c97337b9b5fULL, 0x3fefa4afa2a490daULL, 0x3fefd0765b6e4540ULL,
};

/* ---- the approximate exp ------------------------------------------------------------------
 *
 * e^d = 2^y, y = d log2(e) rounded to float; y = k + f with k = round(y) (exact), f in
 * [-1/2, 1/2]; 2^f by a degree-4 minimax polynomial (Horner with FMA; fmaf here, which is
 * correctly rounded, so the SIMD variants give the same bits); k added to the exponent
 * bits. Below -87 the result is 0 (glibc's expf is < 2^-125 there, within
 * SIFT__APPROX_ETA); for k = -126 the exponent trick gives a wrong value below 2^-126,
 * also within SIFT__APPROX_ETA. Inputs are d = x - max <= 0. */
float sift__approx_exp(float d)
{
    if (!(d >= SIFT__AX_LO)) return 0.0f;
    const float y = d * SIFT__AX_LOG2E;
    const float kf = (y + SIFT__AX_MAGIC) - SIFT__AX_MAGIC;
    const float f = y - kf;
    float p = fmaf(SIFT__AX_C4, f, SIFT__AX_C3);
    p = fmaf(p, f, SIFT__AX_C2);
    p = fmaf(p, f, SIFT__AX_C1);
    p = fmaf(p, f, SIFT__AX_C0);
    union {
        float f;
        uint32_t u;
    } v = {p};
    v.u += (uint32_t)(int32_t)kf << 23;
    return v.f;
}

/* ---- scalar kernels --------------------------------------------------------------------- */

static float sc_max(const float *x, size_t n, float init, bool *nan)
{
    float m = init;
    bool any = false;
    for (size_t i = 0; i < n; i++) {
        m = m < x[i] ? x[i] : m;
        any |= x[i] != x[i];
    }
    *nan |= any;
    return m;
}

static size_t sc_argmax(const float *x, size_t n)
{
    size_t best = 0;
    float b = x[0];
    if (b != b) return SIZE_MAX;
    for (size_t i = 1; i < n; i++) {
        if (x[i] != x[i]) return SIZE_MAX;
        if (x[i] > b) {
            b = x[i];
            best = i;
        }
    }
    return best;
}

static size_t sc_count_ge(const float *x, size_t n, float thr)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += x[i] >= thr;
    return k;
}

static size_t sc_next_above(const float *x, size_t from, size_t n, float thr)
{
    for (size_t i = from; i < n; i++)
        if (x[i] > thr) return i;
    return n;
}

static size_t sc_collect_minp(const float *x, size_t n, float lp, uint32_t *idx, float *max_out)
{
    float m = -FLT_MAX;
    size_t k = 0;
    for (size_t g = 0; g < n; g += 64) {
        const size_t e = g + 64 < n ? g + 64 : n;
        const float thr = m + lp;
        for (size_t i = g; i < e; i++)
            if (x[i] >= thr) idx[k++] = (uint32_t)i;
        for (size_t i = g; i < e; i++) m = m < x[i] ? x[i] : m;
    }
    *max_out = m;
    return k;
}

static size_t sc_collect_ge(const float *x, size_t n, float thr, uint32_t *idx, float *max_out, bool *nan, float *cmax)
{
    float m = -INFINITY;
    bool any = false;
    size_t k = 0;
    for (size_t c = 0; c < n; c += SIFT__CHUNK) {
        const size_t e = c + SIFT__CHUNK < n ? c + SIFT__CHUNK : n;
        float cm = -INFINITY;
        for (size_t i = c; i < e; i++) {
            if (x[i] >= thr) idx[k++] = (uint32_t)i;
            cm = cm < x[i] ? x[i] : cm;
            any |= x[i] != x[i];
        }
        if (cmax) cmax[c / SIFT__CHUNK] = cm;
        m = m < cm ? cm : m;
    }
    *max_out = m;
    *nan |= any;
    return k;
}

static size_t sc_approx_blocks(const float *x, size_t n, float dh, double *blk, float *bmax, uint32_t *head, float *max_out,
                               bool *nan)
{
    size_t nh = 0;
    float M = -INFINITY;
    bool any = false;
    for (size_t b = 0; b * SIFT__BLK < n; b++) {
        const size_t e = (b + 1) * SIFT__BLK < n ? (b + 1) * SIFT__BLK : n;
        for (size_t i = b * SIFT__BLK; i < e; i++) {
            M = M < x[i] ? x[i] : M;
            any |= x[i] != x[i];
        }
        bmax[b] = M;
        float lane[16] = {0}; /* as the AVX-512 variant: 16 lanes of 16 terms */
        for (size_t i = b * SIFT__BLK; i < e; i++) {
            const float d = x[i] - M;
            if (d >= dh) head[nh++] = (uint32_t)i;
            else lane[i % 16] += sift__approx_exp(d);
        }
        double s = 0.0;
        for (int l = 0; l < 16; l++) s += lane[l];
        blk[b] = s;
    }
    *max_out = M;
    *nan |= any;
    return nh;
}

static void sc_approx_exp(const float *x, size_t n, float M, float *out)
{
    for (size_t i = 0; i < n; i++) out[i] = sift__approx_exp(x[i] - M);
}

static void sc_exp_exact(const float *x, size_t n, float M, float *out)
{
    for (size_t i = 0; i < n; i++) out[i] = expf(x[i] - M);
}

static size_t sc_compact_d(const float *x, size_t from, size_t to, float M, float dcut, float *d_out)
{
    size_t m = 0;
    for (size_t i = from; i < to; i++) {
        const float d = x[i] - M;
        if (d >= dcut) d_out[m++] = d;
    }
    return m;
}

static bool sc_grid_sum_f(const float *e, size_t m, float u, double *sum)
{
    const float K = 12582912.0f * u, half = 0.5f * u, big = 4194304.0f * u;
    double s = 0.0;
    for (size_t k = 0; k < m; k++) {
        const float v = e[k];
        if (!(v < big)) return false;
        const float r = (v + K) - K;
        if (fabsf(v - r) == half) return false;
        s += r;
    }
    *sum = s;
    return true;
}

static bool sc_exp_grid_f(const float *d, size_t m, float u, float *e, double *sum)
{
    sc_exp_exact(d, m, 0.0f, e);
    return sc_grid_sum_f(e, m, u, sum);
}

static bool sc_grid_sum_d(const float *e, size_t m, double u, double *sum)
{
    const double K = 0x1.8p52 * u, half = 0.5 * u, big = 0x1p51 * u;
    double s = 0.0;
    for (size_t k = 0; k < m; k++) {
        const double v = e[k];
        if (!(v < big)) return false;
        const double r = (v + K) - K;
        if (fabs(v - r) == half) return false;
        s += r;
    }
    *sum = s;
    return true;
}

const sift__fk sift__fk_scalar = {
    .name = "scalar",
    .max = sc_max,
    .argmax = sc_argmax,
    .count_ge = sc_count_ge,
    .next_above = sc_next_above,
    .collect_minp = sc_collect_minp,
    .collect_ge = sc_collect_ge,
    .approx_blocks = sc_approx_blocks,
    .approx_exp = sc_approx_exp,
    .exp_exact = sc_exp_exact,
    .compact_d = sc_compact_d,
    .exp_grid_f = sc_exp_grid_f,
    .grid_sum_f = sc_grid_sum_f,
    .grid_sum_d = sc_grid_sum_d,
    .exp_exact_ok = false,
    .fast_dist = false,
};

/* ---- choosing a variant ----------------------------------------------------------------- */

/* Does a variant's exp_exact give libm's expf bits? Probes: the special values and
 * thresholds of glibc's expf, the one input in [-104, 0] where its FMA and non-FMA builds
 * differ (-0x1.f8cbb2p+5), and a spread of 4096 values over [-104, 0] and (0, 89). */
static bool exp_exact_matches(const sift__fk *v)
{
    enum { N = 4096 + 32 };
    static const float special[] = {
        0.0f, -0.0f, -0x1.f8cbb2p+5f, SIFT__EXPF_UFLOW, SIFT__EXPF_MAYUFLOW, -0x1.9fe366p+6f, -0x1.9d1d9cp+6f,
        -87.0f, -88.0f, -88.5f, -103.0f, -1e-30f, -1e-7f, -0.5f, -1.0f, -20.0f, -INFINITY, -1e30f,
        1.0f, 88.0f, SIFT__EXPF_OFLOW, 0x1.62e430p+6f, 100.0f, INFINITY, -FLT_MIN, -0x1p-149f,
    };
    float *d = malloc(2 * N * sizeof *d);
    if (!d) return false;
    float *out = d + N;
    size_t n = 0;
    for (size_t i = 0; i < sizeof special / sizeof *special; i++) d[n++] = special[i];
    uint32_t s = 0x9E3779B9u;
    while (n < N) {
        s = s * 1664525u + 1013904223u;
        const float u = (float)(s >> 8) * 0x1p-24f;
        const bool positive = (n & 7) == 0; /* one in eight; the rest denser near 0 */
        d[n++] = positive ? 89.0f * u : -104.0f * u * u;
    }
    v->exp_exact(d, N, 0.0f, out);
    bool ok = true;
    for (size_t i = 0; i < N && ok; i++) {
        const float want = expf(d[i]);
        ok = memcmp(&want, &out[i], sizeof want) == 0;
    }
    free(d);
    return ok;
}

static sift__fk chosen;
static pthread_once_t chosen_once = PTHREAD_ONCE_INIT;

/* The variant of a level (the enum's order is the levels' order). */
static const sift__fk *variant_of(sift_isa isa)
{
#if defined(__x86_64__)
    if (isa == SIFT_ISA_AVX512) return &sift__fk_avx512;
    if (isa == SIFT_ISA_AVX2) return &sift__fk_avx2;
#elif defined(__aarch64__)
    if (isa == SIFT_ISA_NEON || isa == SIFT_ISA_NEON_DOTPROD) return &sift__fk_neon; /* (no byte dot products here) */
#endif
    (void)isa;
    return &sift__fk_scalar;
}

static void choose(void)
{
    const sift__fk *best = variant_of(sift__cpu_best_env("SIFT_FASTK"));
    chosen = *best;
    if (best != &sift__fk_scalar && !exp_exact_matches(best)) {
        chosen.exp_exact = sift__fk_scalar.exp_exact;
        chosen.exp_exact_ok = false;
    }
}

const sift__fk *sift__fk_best(void)
{
    pthread_once(&chosen_once, choose);
    return &chosen;
}

int sift__fk_all(const sift__fk **out, int cap)
{
    int n = 0;
#if defined(__x86_64__)
    if (n < cap && sift__cpu_runs(SIFT_ISA_AVX512)) out[n++] = &sift__fk_avx512;
    if (n < cap && sift__cpu_runs(SIFT_ISA_AVX2)) out[n++] = &sift__fk_avx2;
#elif defined(__aarch64__)
    if (n < cap && sift__cpu_runs(SIFT_ISA_NEON)) out[n++] = &sift__fk_neon;
#endif
    if (n < cap) out[n++] = &sift__fk_scalar;
    return n;
}
