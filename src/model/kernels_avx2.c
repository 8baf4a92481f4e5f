/*
 * kernels_avx2.c - the AVX2 + FMA + F16C kernels (compiled with -mavx2 -mfma -mf16c; entered
 * only after kernels.c has checked CPUID).
 *
 * Float kernels (F32, F16, attention) keep one vector accumulator set per activation
 * column and never mix columns, so a column's result is the same whether it is computed
 * alone or with three others; tails that do not fill a vector use masked loads where the
 * arithmetic must match the vector lanes (exp), scalar fmaf otherwise.
 *
 * Integer kernels (Q8_0, Q4_0, Q4_K, Q6_K) multiply bytes with vpmaddubsw (unsigned x
 * signed; the signed weights of Q8_0/Q4_0 go through the usual sign trick: |w| x
 * sign(w)*x), widen with vpmaddwd, and reduce each block to its exact integer sum before
 * the one float multiply-add per block the scalar code does: the results are bit for bit
 * those of the scalar kernels, which tests/test_kernels.c checks.
 *
 * exp: Cephes' expf (range reduction by ln 2 in two parts, degree-5 polynomial), within
 * about 1 ulp of libm; inputs below -88.38 give 0, above 88.38 give infinity.
 */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "model/kernels.h"

/* ---- helpers ------------------------------------------------------------------------------ */

static inline float hsum_ps(__m256 v)
{
    __m128 lo = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
    return _mm_cvtss_f32(lo);
}

static inline int hsum_epi32(__m256i v)
{
    __m128i lo = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    lo = _mm_add_epi32(lo, _mm_shuffle_epi32(lo, _MM_SHUFFLE(1, 0, 3, 2)));
    lo = _mm_add_epi32(lo, _mm_shuffle_epi32(lo, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(lo);
}

/* lanes < n set (0 <= n <= 8), for vmaskmov */
static inline __m256i tail_mask(int n)
{
    static const int32_t m[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
    return _mm256_loadu_si256((const __m256i *)(m + 8 - n));
}

static inline __m256 exp_ps(__m256 x)
{
    const __m256 hi = _mm256_set1_ps(88.3762626647949f), lo = _mm256_set1_ps(-88.3762626647949f);
    x = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
    __m256 fx = _mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), _mm256_set1_ps(0.5f));
    fx = _mm256_floor_ps(fx);
    x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), x);
    x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), x);
    __m256 y = _mm256_set1_ps(1.9875691500E-4f);
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.3981999507E-3f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(8.3334519073E-3f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(4.1665795894E-2f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.6666665459E-1f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(5.0000001201E-1f));
    y = _mm256_fmadd_ps(y, _mm256_mul_ps(x, x), _mm256_add_ps(x, _mm256_set1_ps(1.0f)));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(fx), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
}

#define FORCE_INLINE static inline __attribute__((always_inline))

/* ---- F32 -------------------------------------------------------------------------------------- */

FORCE_INLINE void dot_f32_n(int64_t n, const float *w, const char *x, size_t xs, float *s, const int NC)
{
    __m256 acc[SIFT_DOT_MAX_COLS][2];
    for (int j = 0; j < NC; j++) acc[j][0] = acc[j][1] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256 w0 = _mm256_loadu_ps(w + i), w1 = _mm256_loadu_ps(w + i + 8);
        for (int j = 0; j < NC; j++) {
            const float *xj = (const float *)(x + j * xs);
            acc[j][0] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xj + i), acc[j][0]);
            acc[j][1] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(xj + i + 8), acc[j][1]);
        }
    }
    for (; i + 8 <= n; i += 8) {
        const __m256 w0 = _mm256_loadu_ps(w + i);
        for (int j = 0; j < NC; j++) acc[j][0] = _mm256_fmadd_ps(w0, _mm256_loadu_ps((const float *)(x + j * xs) + i), acc[j][0]);
    }
    for (int j = 0; j < NC; j++) {
        const float *xj = (const float *)(x + j * xs);
        float t = hsum_ps(_mm256_add_ps(acc[j][0], acc[j][1]));
        for (int64_t k = i; k < n; k++) t = fmaf(w[k], xj[k], t);
        s[j] = t;
    }
}

static void dot_f32(int64_t n, const void *w, const void *x, size_t xs, int ncols, float *s)
{
    switch (ncols) {
    case 1: dot_f32_n(n, w, x, xs, s, 1); break;
    case 2: dot_f32_n(n, w, x, xs, s, 2); break;
    case 3: dot_f32_n(n, w, x, xs, s, 3); break;
    default: dot_f32_n(n, w, x, xs, s, 4); break;
    }
}

/* ---- F16 x F16 ------------------------------------------------------------------------------------ */

/* Whole 32-value steps in float lanes; the rest as ggml does it: each product (exact in
 * float: 11-bit mantissas) summed in double, here four at a time (the sum of so few exact
 * products is itself exact in double, so the order does not matter). */
FORCE_INLINE void dot_f16_n(int64_t n, const uint16_t *w, const char *x, size_t xs, float *s, const int NC)
{
    __m256 acc[SIFT_DOT_MAX_COLS][4];
    __m256d accd[SIFT_DOT_MAX_COLS];
    for (int j = 0; j < NC; j++) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = _mm256_setzero_ps(), accd[j] = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256 wv[4];
        for (int k = 0; k < 4; k++) wv[k] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + i + 8 * k)));
        for (int j = 0; j < NC; j++) {
            const uint16_t *xj = (const uint16_t *)(x + j * xs);
            for (int k = 0; k < 4; k++)
                acc[j][k] = _mm256_fmadd_ps(wv[k], _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(xj + i + 8 * k))), acc[j][k]);
        }
    }
    for (; i + 8 <= n; i += 8) {
        const __m256 wv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + i)));
        for (int j = 0; j < NC; j++) {
            const __m256 p = _mm256_mul_ps(wv, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)(x + j * xs) + i))));
            accd[j] = _mm256_add_pd(accd[j], _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(p)),
                                                           _mm256_cvtps_pd(_mm256_extractf128_ps(p, 1))));
        }
    }
    for (int j = 0; j < NC; j++) {
        const uint16_t *xj = (const uint16_t *)(x + j * xs);
        double t = n >= 32 ? hsum_ps(_mm256_add_ps(_mm256_add_ps(acc[j][0], acc[j][1]), _mm256_add_ps(acc[j][2], acc[j][3]))) : 0.0;
        __m128d d2 = _mm_add_pd(_mm256_castpd256_pd128(accd[j]), _mm256_extractf128_pd(accd[j], 1));
        t += _mm_cvtsd_f64(_mm_add_sd(d2, _mm_unpackhi_pd(d2, d2)));
        for (int64_t k = i; k < n; k++) t += (double)(sift_fp16_to_fp32(w[k]) * sift_fp16_to_fp32(xj[k]));
        s[j] = (float)t;
    }
}

static void dot_f16(int64_t n, const void *w, const void *x, size_t xs, int ncols, float *s)
{
    switch (ncols) {
    case 1: dot_f16_n(n, w, x, xs, s, 1); break;
    case 2: dot_f16_n(n, w, x, xs, s, 2); break;
    case 3: dot_f16_n(n, w, x, xs, s, 3); break;
    default: dot_f16_n(n, w, x, xs, s, 4); break;
    }
}

static void act_convert(sift_act_format f, const float *x, void *dst, int64_t n)
{
    if (f != SIFT_ACT_F16) {
        sift_act_convert_scalar(f, x, dst, n);
        return;
    }
    uint16_t *h = dst;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(h + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) h[i] = sift_fp32_to_fp16(x[i]);
}

/* ---- Q8_0 and Q4_0 against Q8_0 ---------------------------------------------------------------- */

/* Exact sum of the 32 products of signed bytes a (|a| <= 127 or -128) and b. */
static inline int dot32_i8(__m256i a, __m256i b)
{
    const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(a, a), _mm256_sign_epi8(b, a));
    return hsum_epi32(_mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
}

FORCE_INLINE void dot_q8_0_n(int64_t n, const sift_block_q8_0 *a, const char *x, size_t xs, float *s, const int NC)
{
    float sum[SIFT_DOT_MAX_COLS] = {0};
    for (int64_t k = 0; k < n / SIFT_QK8_0; k++) {
        const __m256i qa = _mm256_loadu_si256((const __m256i *)a[k].qs);
        const float da = sift_fp16_to_fp32(a[k].d);
        for (int j = 0; j < NC; j++) {
            const sift_block_q8_0 *b = (const sift_block_q8_0 *)(x + j * xs) + k;
            const int isum = dot32_i8(qa, _mm256_loadu_si256((const __m256i *)b->qs));
            sum[j] += (float)isum * (da * sift_fp16_to_fp32(b->d));
        }
    }
    for (int j = 0; j < NC; j++) s[j] = sum[j];
}

static void dot_q8_0(int64_t n, const void *w, const void *x, size_t xs, int ncols, float *s)
{
    switch (ncols) {
    case 1: dot_q8_0_n(n, w, x, xs, s, 1); break;
    case 2: dot_q8_0_n(n, w, x, xs, s, 2); break;
    case 3: dot_q8_0_n(n, w, x, xs, s, 3); break;
    default: dot_q8_0_n(n, w, x, xs, s, 4); break;
    }
}

/* the 32 values of a Q4_0 block as signed bytes: low nibbles (values 0..15), then high */
static inline __m256i unpack_q4_0(const uint8_t *qs)
{
    const __m128i b = _mm_loadu_si128((const __m128i *)qs);
    const __m256i v = _mm256_set_m128i(_mm_srli_epi16(b, 4), b);
    return _mm256_sub_epi8(_mm256_and_si256(v, _mm256_set1_epi8(0x0F)), _mm256_set1_epi8(8));
}

FORCE_INLINE void dot_q4_0_n(int64_t n, const sift_block_q4_0 *a, const char *x, size_t xs, float *s, const int NC)
{
    float sum[SIFT_DOT_MAX_COLS] = {0};
    for (int64_t k = 0; k < n / SIFT_QK4_0; k++) {
        const __m256i qa = unpack_q4_0(a[k].qs);
        const float da = sift_fp16_to_fp32(a[k].d);
        for (int j = 0; j < NC; j++) {
            const sift_block_q8_0 *b = (const sift_block_q8_0 *)(x + j * xs) + k;
            const int isum = dot32_i8(qa, _mm256_loadu_si256((const __m256i *)b->qs));
            sum[j] += (float)isum * (da * sift_fp16_to_fp32(b->d));
        }
    }
    for (int j = 0; j < NC; j++) s[j] = sum[j];
}

static void dot_q4_0(int64_t n, const void *w, const void *x, size_t xs, int ncols, float *s)
{
    switch (ncols) {
    case 1: dot_q4_0_n(n, w, x, xs, s, 1); break;
    case 2: dot_q4_0_n(n, w, x, xs, s, 2); break;
    case 3: dot_q4_0_n(n, w, x, xs, s, 3); break;
    default: dot_q4_0_n(n, w, x, xs, s, 4); break;
    }
}

/* ---- Q4_K against Q8_K -------------------------------------------------------------------------------- */

static inline void q4k_scales(const uint8_t *q, int sc[8], int m[8])
{
    for (int j = 0; j < 4; j++) {
        sc[j] = q[j] & 63;
        m[j] = q[j + 4] & 63;
        sc[j + 4] = (q[j + 8] & 0xF) | ((q[j] >> 6) << 4);
        m[j + 4] = (q[j + 8] >> 4) | ((q[j + 4] >> 6) << 4);
    }
}

FORCE_INLINE void dot_q4_K_n(int64_t n, const sift_block_q4_K *a, const char *x, size_t xs, float *s, const int NC)
{
    float sum[SIFT_DOT_MAX_COLS] = {0};
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int64_t k = 0; k < n / SIFT_QK_K; k++) {
        int sc[8], m[8];
        q4k_scales(a[k].scales, sc, m);
        __m256i lo[4], hi[4];
        for (int g = 0; g < 4; g++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(a[k].qs + 32 * g));
            lo[g] = _mm256_and_si256(q, m4);
            hi[g] = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
        }
        const float d = sift_fp16_to_fp32(a[k].d), dmin = sift_fp16_to_fp32(a[k].dmin);
        for (int j = 0; j < NC; j++) {
            const sift_block_q8_K *b = (const sift_block_q8_K *)(x + j * xs) + k;
            __m256i acc = _mm256_setzero_si256();
            for (int g = 0; g < 4; g++) {
                const __m256i p0 = _mm256_maddubs_epi16(lo[g], _mm256_loadu_si256((const __m256i *)(b->qs + 64 * g)));
                const __m256i p1 = _mm256_maddubs_epi16(hi[g], _mm256_loadu_si256((const __m256i *)(b->qs + 64 * g + 32)));
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p0, _mm256_set1_epi16((short)sc[2 * g])));
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p1, _mm256_set1_epi16((short)sc[2 * g + 1])));
            }
            int32_t summ = 0;
            for (int g = 0; g < 8; g++) summ += m[g] * (b->bsums[2 * g] + b->bsums[2 * g + 1]);
            sum[j] += (d * b->d) * (float)hsum_epi32(acc) - (dmin * b->d) * (float)summ;
        }
    }
    for (int j = 0; j < NC; j++) s[j] = sum[j];
}

static void dot_q4_K(int64_t n, const void *w, const void *x, size_t xs, int ncols, float *s)
{
    switch (ncols) {
    case 1: dot_q4_K_n(n, w, x, xs, s, 1); break;
    case 2: dot_q4_K_n(n, w, x, xs, s, 2); break;
    case 3: dot_q4_K_n(n, w, x, xs, s, 3); break;
    default: dot_q4_K_n(n, w, x, xs, s, 4); break;
    }
}

/* ---- Q6_K against Q8_K -------------------------------------------------------------------------------- */

/* The 4 x 32 six-bit values (0..63) of half h of a Q6_K block, in element order:
 * q[c] holds elements 32c .. 32c+31 of the half. */
static inline void unpack_q6_K_half(const uint8_t *ql, const uint8_t *qh, __m256i q[4])
{
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x30);
    const __m256i l0 = _mm256_loadu_si256((const __m256i *)ql), l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
    const __m256i h = _mm256_loadu_si256((const __m256i *)qh);
    q[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(h, 4), m2));
    q[1] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(h, 2), m2));
    q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(h, m2));
    q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4), _mm256_and_si256(_mm256_srli_epi16(h, 2), m2));
}

FORCE_INLINE void dot_q6_K_n(int64_t n, const sift_block_q6_K *a, const char *x, size_t xs, float *s, const int NC)
{
    float sum[SIFT_DOT_MAX_COLS] = {0};
    for (int64_t k = 0; k < n / SIFT_QK_K; k++) {
        __m256i q[8], scv[8];
        unpack_q6_K_half(a[k].ql, a[k].qh, q);
        unpack_q6_K_half(a[k].ql + 64, a[k].qh + 32, q + 4);
        /* chunk c (32 elements) spans sub-blocks 2c (its low 16) and 2c+1 (its high 16) */
        for (int c = 0; c < 8; c++)
            scv[c] = _mm256_set_m128i(_mm_set1_epi16(a[k].scales[2 * c + 1]), _mm_set1_epi16(a[k].scales[2 * c]));
        const float d = sift_fp16_to_fp32(a[k].d);
        for (int j = 0; j < NC; j++) {
            const sift_block_q8_K *b = (const sift_block_q8_K *)(x + j * xs) + k;
            __m256i acc = _mm256_setzero_si256();
            for (int c = 0; c < 8; c++) {
                const __m256i p = _mm256_maddubs_epi16(q[c], _mm256_loadu_si256((const __m256i *)(b->qs + 32 * c)));
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, scv[c]));
            }
            int32_t off = 0; /* the -32 of every value, through the activation sums */
            for (int sb = 0; sb < 16; sb++) off += a[k].scales[sb] * b->bsums[sb];
            sum[j] += d * b->d * (float)(hsum_epi32(acc) - 32 * off);
        }
    }
    for (int j = 0; j < NC; j++) s[j] = sum[j];
}

static void dot_q6_K(int64_t n, const void *w, const void *x, size_t xs, int ncols, float *s)
{
    switch (ncols) {
    case 1: dot_q6_K_n(n, w, x, xs, s, 1); break;
    case 2: dot_q6_K_n(n, w, x, xs, s, 2); break;
    case 3: dot_q6_K_n(n, w, x, xs, s, 3); break;
    default: dot_q6_K_n(n, w, x, xs, s, 4); break;
    }
}

/* ---- one column, many rows (generation) --------------------------------------------------------- */

#define ROWS(NAME, WT)                                                                                               \
    static void rows_##NAME(int64_t n, const void *w, size_t row_bytes, int64_t n_rows, const void *x, float *out)   \
    {                                                                                                                \
        for (int64_t r = 0; r < n_rows; r++) NAME##_n(n, (const WT *)((const char *)w + r * row_bytes), x, 0, out + r, 1); \
    }
ROWS(dot_f32, float)
ROWS(dot_f16, uint16_t)
ROWS(dot_q8_0, sift_block_q8_0)
ROWS(dot_q4_0, sift_block_q4_0)
ROWS(dot_q4_K, sift_block_q4_K)
ROWS(dot_q6_K, sift_block_q6_K)
#undef ROWS

/* ---- attention and element-wise ---------------------------------------------------------------------- */

static void attn_scores(int n, int hd, int nq, const float *q, const float *kt, size_t ld, float scale, float *s,
                        size_t s_stride)
{
    const __m256 vs = _mm256_set1_ps(scale);
    for (int g = 0; g < nq; g++) {
        const float *qg = q + g * hd;
        float *sg = s + g * s_stride;
        int c = 0;
        for (; c + 32 <= n; c += 32) {
            __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
            for (int d = 0; d < hd; d++) {
                const __m256 qd = _mm256_set1_ps(qg[d]);
                const float *r = kt + d * ld + c;
                a0 = _mm256_fmadd_ps(qd, _mm256_loadu_ps(r), a0);
                a1 = _mm256_fmadd_ps(qd, _mm256_loadu_ps(r + 8), a1);
                a2 = _mm256_fmadd_ps(qd, _mm256_loadu_ps(r + 16), a2);
                a3 = _mm256_fmadd_ps(qd, _mm256_loadu_ps(r + 24), a3);
            }
            _mm256_storeu_ps(sg + c, _mm256_mul_ps(a0, vs));
            _mm256_storeu_ps(sg + c + 8, _mm256_mul_ps(a1, vs));
            _mm256_storeu_ps(sg + c + 16, _mm256_mul_ps(a2, vs));
            _mm256_storeu_ps(sg + c + 24, _mm256_mul_ps(a3, vs));
        }
        for (; c + 8 <= n; c += 8) {
            __m256 a0 = _mm256_setzero_ps();
            for (int d = 0; d < hd; d++) a0 = _mm256_fmadd_ps(_mm256_set1_ps(qg[d]), _mm256_loadu_ps(kt + d * ld + c), a0);
            _mm256_storeu_ps(sg + c, _mm256_mul_ps(a0, vs));
        }
        for (; c < n; c++) {
            float a = 0;
            for (int d = 0; d < hd; d++) a = fmaf(qg[d], kt[d * ld + c], a);
            sg[c] = a * scale;
        }
    }
}

static double softmax_exp(int n, float *s, float max)
{
    const __m256 vm = _mm256_set1_ps(max);
    double sum = 0;
    int c = 0;
    for (; c + 8 <= n; c += 8) {
        const __m256 e = exp_ps(_mm256_sub_ps(_mm256_loadu_ps(s + c), vm));
        _mm256_storeu_ps(s + c, e);
        sum += hsum_ps(e);
    }
    if (c < n) {
        const __m256i mk = tail_mask(n - c);
        const __m256 e = _mm256_and_ps(exp_ps(_mm256_sub_ps(_mm256_maskload_ps(s + c, mk), vm)), _mm256_castsi256_ps(mk));
        _mm256_maskstore_ps(s + c, mk, e);
        sum += hsum_ps(e);
    }
    return sum;
}

static float vmax(int n, const float *s)
{
    __m256 m = _mm256_set1_ps(-INFINITY);
    int c = 0;
    for (; c + 8 <= n; c += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(s + c));
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    float r = _mm_cvtss_f32(h);
    for (; c < n; c++) r = s[c] > r ? s[c] : r;
    return r;
}

static void swiglu(int64_t n, const float *g, const float *u, float *out)
{
    const __m256 one = _mm256_set1_ps(1.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 gv = _mm256_loadu_ps(g + i);
        const __m256 e = exp_ps(_mm256_sub_ps(_mm256_setzero_ps(), gv));
        _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_div_ps(gv, _mm256_add_ps(one, e)), _mm256_loadu_ps(u + i)));
    }
    if (i < n) {
        const __m256i mk = tail_mask((int)(n - i));
        const __m256 gv = _mm256_maskload_ps(g + i, mk);
        const __m256 e = exp_ps(_mm256_sub_ps(_mm256_setzero_ps(), gv));
        _mm256_maskstore_ps(out + i, mk, _mm256_mul_ps(_mm256_div_ps(gv, _mm256_add_ps(one, e)), _mm256_maskload_ps(u + i, mk)));
    }
}

void sift_kernels_init_avx2(sift_kernels *k)
{
    k->dot[SIFT_TYPE_F32] = dot_f32;
    k->dot[SIFT_TYPE_F16] = dot_f16;
    k->dot[SIFT_TYPE_Q8_0] = dot_q8_0;
    k->dot[SIFT_TYPE_Q4_0] = dot_q4_0;
    k->dot[SIFT_TYPE_Q4_K] = dot_q4_K;
    k->dot[SIFT_TYPE_Q6_K] = dot_q6_K;
    k->rows[SIFT_TYPE_F32] = rows_dot_f32;
    k->rows[SIFT_TYPE_F16] = rows_dot_f16;
    k->rows[SIFT_TYPE_Q8_0] = rows_dot_q8_0;
    k->rows[SIFT_TYPE_Q4_0] = rows_dot_q4_0;
    k->rows[SIFT_TYPE_Q4_K] = rows_dot_q4_K;
    k->rows[SIFT_TYPE_Q6_K] = rows_dot_q6_K;
    k->act_convert = act_convert;
    k->attn_scores = attn_scores;
    k->softmax_exp = softmax_exp;
    k->max = vmax;
    k->swiglu = swiglu;
}
