/*
 * fast_kernels.h - the SIMD kernels behind the chain's fast paths (core/fast.c), with a portable
 * scalar version of each, chosen once per process at run time (AVX-512, AVX2 or scalar on
 * x86-64, NEON or scalar on aarch64, as core/cpu.h finds them; SIFT_FASTK=scalar|avx2|neon
 * in the environment forces a lower level).
 *
 * Every kernel reads a raw `const float *` logit vector (the caller's, never copied) and
 * has one of two kinds of contract:
 *
 *   exact      the result is a pure function of the input, the same for every variant
 *              (tests: each SIMD variant == scalar): max, argmax, count_ge, next_above,
 *              collect_minp, collect_ge, compact_d, exp_exact, exp_grid_f, grid_sum_f,
 *              grid_sum_d.
 *              (max's value is exact; when the maximum is a zero its sign may differ.)
 *   bounded    approx_exp / approx_blocks: an approximation of glibc's expf within a
 *              relative SIFT__APPROX_EPS (plus SIFT__APPROX_ETA absolute for results below
 *              2^-125), checked for every float input by a test; the block sums add those
 *              values in float lanes of at most 32 terms (SIFT__APPROX_SUM_EPS more). Used
 *              only inside certified error bounds (core/fast.c), never as results.
 *
 * exp_exact is glibc 2.27+'s expf as this process's libm computes it on an FMA machine
 * (the __expf_fma variant: double-precision table + cubic, FMA-contracted), vectorised;
 * the chosen variant only keeps it after it reproduced libm's expf on a probe set that
 * includes the input where the FMA and non-FMA builds of glibc differ
 * (sift__fk_best()->exp_exact_ok). Otherwise exp_exact calls expf itself: correct by
 * definition, only slower.
 */
#ifndef SIFT_CORE_FAST_KERNELS_H
#define SIFT_CORE_FAST_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* dist's approximate blocks: this many entries per block sum */
#define SIFT__BLK 256
/* exact-sum chunks (dist's exact path, top_p's float sum) and collect_ge's chunk maxima */
#define SIFT__CHUNK 512
/* relative error bound of approx_exp against glibc expf (the measured maximum is in
 * tests/test_fast.c and docs/performance.md), the absolute bound below 2^-125, and the
 * float accumulation of a block (32 terms a lane at most: 32 * 2^-24 < 2.5e-6) */
#define SIFT__APPROX_EPS 2e-5
#define SIFT__APPROX_ETA 0x1p-124
#define SIFT__APPROX_SUM_EPS 2.5e-6

typedef struct sift__fk {
    const char *name; /* "avx512", "avx2", "neon", "scalar" */

    /* m = init; for each x[i]: m = m < x[i] ? x[i] : m (NaN never wins). *nan |= any NaN. */
    float (*max)(const float *x, size_t n, float init, bool *nan);
    /* greedy's pick: the first index of the maximum (strict `>` scan from x[0]); returns
     * SIZE_MAX when x holds a NaN (the caller then takes the scalar loop). n >= 1. */
    size_t (*argmax)(const float *x, size_t n);
    /* How many x[i] >= thr. */
    size_t (*count_ge)(const float *x, size_t n, float thr);
    /* The first i in [from, n) with x[i] > thr, or n (the heap selection's filter). */
    size_t (*next_above)(const float *x, size_t from, size_t n, float thr);
    /* min-p in one pass: m starts at -FLT_MAX and takes the maximum (as max() above); every
     * i with x[i] >= m_g + lp, where m_g is the maximum of all entries in earlier 64-entry
     * groups, is written to idx (array order). A superset of {i : x[i] >= M + lp} for the
     * final maximum M, which is returned in *max_out. Returns the count. */
    size_t (*collect_minp)(const float *x, size_t n, float lp, uint32_t *idx, float *max_out);
    /* Every i with x[i] >= thr into idx (array order; returns the count), the maximum (from
     * -inf, as max()) into *max_out, *nan |= any NaN; with cmax, also the maximum of each
     * SIFT__CHUNK entries into cmax[i / SIFT__CHUNK]. */
    size_t (*collect_ge)(const float *x, size_t n, float thr, uint32_t *idx, float *max_out, bool *nan, float *cmax);
    /* dist's approximate pass, one read of x: block by block (SIFT__BLK entries), the
     * running maximum m_b = max(m_(b-1), max of block b) (from -inf, as max()) goes to
     * bmax[b]; with d = x[i] - m_b (float), entries with d >= dh are "head": their indices
     * go to head[] (array order, return value = count); every other entry's approx_exp(d)
     * (0 below -87) is summed into blk[b] (see above). *max_out = the final maximum, *nan |=
     * any NaN (the sums are meaningless then). */
    size_t (*approx_blocks)(const float *x, size_t n, float dh, double *blk, float *bmax, uint32_t *head, float *max_out,
                            bool *nan);
    /* out[i] = approx_exp(x[i] - M) (the values approx_blocks adds). */
    void (*approx_exp)(const float *x, size_t n, float M, float *out);
    /* out[i] = expf(x[i] - M) bit for bit (see above); M = 0 gives expf(x[i]). */
    void (*exp_exact)(const float *x, size_t n, float M, float *out);
    /* top-p's scan of x[from, to): d = x[i] - M (float); every d >= dcut into d_out (array
     * order); returns the count. */
    size_t (*compact_d)(const float *x, size_t from, size_t to, float M, float dcut, float *d_out);
    /* e[i] = expf(d[i]) (as exp_exact) and, as grid_sum_f below, the exact sum of the e[i]
     * rounded to multiples of u into *sum; false when grid_sum_f would be (e is complete
     * either way). */
    bool (*exp_grid_f)(const float *d, size_t m, float u, float *e, double *sum);
    /* The exact sum of e[0..m) each rounded to the nearest multiple of u (a power of two) -
     * float addition's rounding onto a running sum whose ulp is u - into *sum. Returns false
     * (leaving *sum undefined) when some e is exactly halfway between two multiples (the
     * rounding then depends on the running sum's last bit) or too large for the rounding
     * trick (e >= 2^22 u for float, 2^51 u for double). */
    bool (*grid_sum_f)(const float *e, size_t m, float u, double *sum);
    bool (*grid_sum_d)(const float *e, size_t m, double u, double *sum);

    bool exp_exact_ok; /* exp_exact is the vector version (else it calls expf) */
    bool fast_dist;    /* dist's certified path pays off (SIMD); the scalar variant leaves dist
                        * to the general path, which is llama.cpp's own loop */
} sift__fk;

/* The best variant this CPU runs (chosen once per process; thread-safe). */
const sift__fk *sift__fk_best(void);
/* Every variant this CPU can run, best first, for tests and benchmarks: fills out[] (up to
 * cap) and returns how many. Their exp_exact is the raw vector version (not probed). */
int sift__fk_all(const sift__fk **out, int cap);

/* The approximation itself (scalar), for the tests. */
float sift__approx_exp(float d);

/* variant tables */
extern const sift__fk sift__fk_scalar;
#if defined(__x86_64__)
extern const sift__fk sift__fk_avx2;
extern const sift__fk sift__fk_avx512;
#elif defined(__aarch64__)
extern const sift__fk sift__fk_neon;
#endif

/* glibc's expf data (e_exp2f_data.c, N = 32) and constants, as used by its __expf_fma */
extern const uint64_t sift__exp2f_tab[32];
#define SIFT__EXPF_INVLN2N 0x1.71547652b82fep+5
#define SIFT__EXPF_SHIFT 0x1.8p+52
#define SIFT__EXPF_C0 0x1.c6af84b912394p-20
#define SIFT__EXPF_C1 0x1.ebfce50fac4f3p-13
#define SIFT__EXPF_C2 0x1.62e42ff0c52d6p-6
/* below UFLOW expf returns 0; in [UFLOW, MAYUFLOW) the smallest subnormal; above OFLOW inf */
#define SIFT__EXPF_UFLOW (-0x1.9fe368p+6f)
#define SIFT__EXPF_MAYUFLOW (-0x1.9d1d9ep+6f)
#define SIFT__EXPF_OFLOW 0x1.62e42ep+6f

/* approx_exp: 2^(d log2 e) = 2^k * 2^f, k = round(d log2 e), f in [-1/2, 1/2], 2^f by a
 * degree-4 minimax polynomial (relative error 2.6e-6), evaluated with FMA */
#define SIFT__AX_LOG2E 1.44269504f
#define SIFT__AX_MAGIC 12582912.0f /* 1.5 * 2^23 */
#define SIFT__AX_LO (-87.0f)
#define SIFT__AX_C4 0.00957010191f
#define SIFT__AX_C3 0.0559178603f
#define SIFT__AX_C2 0.240247448f
#define SIFT__AX_C1 0.693121815f
#define SIFT__AX_C0 0.999999261f

#endif
