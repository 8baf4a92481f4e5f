/*
 * kernels_avx512.c - the AVX-512 kernels (compiled with -mavx512f/bw/vl/dq; entered only
 * after kernels.c has checked CPUID and XCR0). The table starts as a copy of the AVX2 one;
 * this file replaces what gains from 16-lane floats or 64-byte integer vectors.
 *
 * The design rules are those of kernels_avx2.c: per-column accumulators (a column's result
 * never depends on its neighbours), masked tails where a lane's arithmetic must not depend
 * on its position, and integer kernels that reduce every block to its exact integer sum
 * before the scalar code's float multiply-add, so they agree bit for bit with it.
 *
 * Integer kernels work on two 32-value blocks (Q8_0, Q4_0) or 64 values of a K-quant at a
 * time in one 512-bit register; the per-block sums are taken from each 256-bit half.
 */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "model/kernels.h"

#define FORCE_INLINE static inline __attribute__((always_inline))

static inline int hsum_epi32_256(__m256i v)
{
    __m128i lo = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    lo = _mm_add_epi32(lo, _mm_shuffle_epi32(lo, _MM_SHUFFLE(1, 0, 3, 2)));
    lo = _mm_add_epi32(lo, _mm_shuffle_epi32(lo, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(lo);
}

static inline __m512 exp_ps(__m512 x)
{
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-88.3762626647949f)), _mm512_set1_ps(88.3762626647949f));
    __m512 fx = _mm512_fmadd_ps(x, _mm512_set1_ps(1.44269504088896341f), _mm512_set1_ps(0.5f));
    fx = _mm512_roundscale_ps(fx, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    x = _mm512_fnmadd_ps(fx, _mm512_set1_ps(0.693359375f), x);
    x = _mm512_fnmadd_ps(fx, _mm512_set1_ps(-2.12194440e-4f), x);
    __m512 y = _mm512_set1_ps(1.9875691500E-4f);
    y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(1.3981999507E-3f));
    y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(8.3334519073E-3f));
    y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(4.1665795894E-2f));
    y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(1.6666665459E-1f));
    y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(5.0000001201E-1f));
    y = _mm512_fmadd_ps(y, _mm512_mul_ps(x, x), _mm512_add_ps(x, _mm512_set1_ps(1.0f)));
    const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvttps_epi32(fx), _mm512_set1_epi32(127)), 23);
    return _mm512_mul_ps(y, _mm512_castsi512_ps(e));
}

static inline __mmask16 tail16(int n)
{
    return (__mmask16)((1u << n) - 1u);
}

/* ---- F32 -------------------------------------------------------------------------------------- */

FORCE_INLINE void dot_f32_n(int64_t n, const float *w, const char *x, size_t xs, float *s, const int NC)
{
    __m512 acc[SIFT_DOT_MAX_COLS][2];
    for (int j = 0; j < NC; j++) acc[j][0] = acc[j][1] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m512 w0 = _mm512_loadu_ps(w + i), w1 = _mm512_loadu_ps(w + i + 16);
        for (int j = 0; j < NC; j++) {
            const float *xj = (const float *)(x + j * xs);
            acc[j][0] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(xj + i), acc[j][0]);
            acc[j][1] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(xj + i + 16), acc[j][1]);
        }
    }
    for (; i + 16 <= n; i += 16) {
        const __m512 w0 = _mm512_loadu_ps(w + i);
        for (int j = 0; j < NC; j++) acc[j][0] = _mm512_fmadd_ps(w0, _mm512_loadu_ps((const float *)(x + j * xs) + i), acc[j][0]);
    }
    if (i < n) { /* masked: the missing lanes are zeros, which add nothing */
        const __mmask16 mk = tail16((int)(n - i));
        const __m512 w0 = _mm512_maskz_loadu_ps(mk, w + i);
        for (int j = 0; j < NC; j++)
            acc[j][1] = _mm512_fmadd_ps(w0, _mm512_maskz_loadu_ps(mk, (const float *)(x + j * xs) + i), acc[j][1]);
    }
    for (int j = 0; j < NC; j++) s[j] = _mm512_reduce_add_ps(_mm512_add_ps(acc[j][0], acc[j][1]));
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

/* Whole 64-value steps in float lanes; the rest as ggml does it: each product (exact in
 * float: 11-bit mantissas) summed in double, here eight at a time (the sum of so few exact
 * products is itself exact in double, so the order does not matter). */
FORCE_INLINE void dot_f16_n(int64_t n, const uint16_t *w, const char *x, size_t xs, float *s, const int NC)
{
    __m512 acc[SIFT_DOT_MAX_COLS][4];
    __m512d accd[SIFT_DOT_MAX_COLS];
    for (int j = 0; j < NC; j++) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = _mm512_setzero_ps(), accd[j] = _mm512_setzero_pd();
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        __m512 wv[4];
        for (int k = 0; k < 4; k++) wv[k] = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(w + i + 16 * k)));
        for (int j = 0; j < NC; j++) {
            const uint16_t *xj = (const uint16_t *)(x + j * xs);
            for (int k = 0; k < 4; k++)
                acc[j][k] =
                    _mm512_fmadd_ps(wv[k], _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(xj + i + 16 * k))), acc[j][k]);
        }
    }
    for (; i < n; i += 8) {
        const __mmask8 mk = n - i >= 8 ? (__mmask8)0xFF : (__mmask8)((1u << (n - i)) - 1u);
        const __m256 wv = _mm256_cvtph_ps(_mm_maskz_loadu_epi16(mk, w + i));
        for (int j = 0; j < NC; j++) {
            const __m256 xv = _mm256_cvtph_ps(_mm_maskz_loadu_epi16(mk, (const uint16_t *)(x + j * xs) + i));
            accd[j] = _mm512_add_pd(accd[j], _mm512_cvtps_pd(_mm256_mul_ps(wv, xv)));
        }
    }
    for (int j = 0; j < NC; j++) {
        double t = n >= 64 ? _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc[j][0], acc[j][1]), _mm512_add_ps(acc[j][2], acc[j][3])))
                           : 0.0;
        s[j] = (float)(t + _mm512_reduce_add_pd(accd[j]));
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
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(h + i), _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) h[i] = sift_fp32_to_fp16(x[i]);
}

/* ---- Q8_0 and Q4_0 against Q8_0, two blocks per register ------------------------------------------- */

/* The exact sums of the products of signed bytes a and b in each 256-bit half. */
static inline void dot2x32_i8(__m512i a, __m512i b, int *lo, int *hi)
{
    const __m512i p16 = _mm512_maddubs_epi16(_mm512_abs_epi8(a), _mm512_mask_sub_epi8(b, _mm512_movepi8_mask(a),
                                                                                      _mm512_setzero_si512(), b));
    const __m512i p32 = _mm512_madd_epi16(p16, _mm512_set1_epi16(1));
    *lo = hsum_epi32_256(_mm512_castsi512_si256(p32));
    *hi = hsum_epi32_256(_mm512_extracti64x4_epi64(p32, 1));
}

static inline __m512i load2(const int8_t *a, const int8_t *b)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)a)),
                              _mm256_loadu_si256((const __m256i *)b), 1);
}

static inline __m256i unpack_q4_0(const uint8_t *qs)
{
    const __m128i b = _mm_loadu_si128((const __m128i *)qs);
    const __m256i v = _mm256_set_m128i(_mm_srli_epi16(b, 4), b);
    return _mm256_sub_epi8(_mm256_and_si256(v, _mm256_set1_epi8(0x0F)), _mm256_set1_epi8(8));
}

/* Blocks are processed in pairs, the odd last one alone (zero upper half): each block's
 * sum is exact either way, and the float steps are the scalar code's, in block order. */
#define QX_0_KERNEL(NAME, WBLOCK, UNPACK2, UNPACK1)                                                                 \
    FORCE_INLINE void NAME##_n(int64_t n, const WBLOCK *a, const char *x, size_t xs, float *s, const int NC)          \
    {                                                                                                              \
        float sum[SIFT_DOT_MAX_COLS] = {0};                                                                        \
        const int64_t nb = n / 32;                                                                                 \
        for (int64_t k = 0; k < nb; k += 2) {                                                                      \
            const bool two = k + 1 < nb;                                                                           \
            const __m512i qa = two ? UNPACK2 : _mm512_castsi256_si512(UNPACK1);                                    \
            const float da0 = sift_fp16_to_fp32(a[k].d), da1 = two ? sift_fp16_to_fp32(a[k + 1].d) : 0.0f;          \
            for (int j = 0; j < NC; j++) {                                                                         \
                const sift_block_q8_0 *b = (const sift_block_q8_0 *)(x + j * xs) + k;                              \
                const __m512i qb = two ? load2(b[0].qs, b[1].qs)                                                   \
                                       : _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)b[0].qs));      \
                int s0, s1;                                                                                        \
                dot2x32_i8(two ? qa : _mm512_zextsi256_si512(_mm512_castsi512_si256(qa)), qb, &s0, &s1);           \
                sum[j] += (float)s0 * (da0 * sift_fp16_to_fp32(b[0].d));                                           \
                if (two) sum[j] += (float)s1 * (da1 * sift_fp16_to_fp32(b[1].d));                                  \
            }                                                                                                      \
        }                                                                                                          \
        for (int j = 0; j < NC; j++) s[j] = sum[j];                                                                \
    }                                                                                                              \
    static void NAME(int64_t n, const void *w, const void *x, size_t xs, int ncols, float *s)                      \
    {                                                                                                              \
        switch (ncols) {                                                                                           \
        case 1: NAME##_n(n, w, x, xs, s, 1); break;                                                                \
        case 2: NAME##_n(n, w, x, xs, s, 2); break;                                                                \
        case 3: NAME##_n(n, w, x, xs, s, 3); break;                                                                \
        default: NAME##_n(n, w, x, xs, s, 4); break;                                                               \
        }                                                                                                          \
    }

QX_0_KERNEL(dot_q8_0, sift_block_q8_0, load2(a[k].qs, a[k + 1].qs), _mm256_loadu_si256((const __m256i *)a[k].qs))
QX_0_KERNEL(dot_q4_0, sift_block_q4_0,
            _mm512_inserti64x4(_mm512_castsi256_si512(unpack_q4_0(a[k].qs)), unpack_q4_0(a[k + 1].qs), 1),
            unpack_q4_0(a[k].qs))

/* ---- Q4_K and Q6_K against Q8_K: 64 values per register ---------------------------------------------- */

static inline void q4k_scales(const uint8_t *q, int sc[8], int m[8])
{
    for (int j = 0; j < 4; j++) {
        sc[j] = q[j] & 63;
        m[j] = q[j + 4] & 63;
        sc[j + 4] = (q[j + 8] & 0xF) | ((q[j] >> 6) << 4);
        m[j + 4] = (q[j + 8] >> 4) | ((q[j + 4] >> 6) << 4);
    }
}

/* 16-bit lanes of a register holding the scales of the 32-value quarters:
 * lanes 0-3 scale a, 4-7 b, 8-11 c, 12-15 d in each... laid out per 128-bit lane */
static inline __m512i scales4(int a, int b, int c, int d)
{
    return _mm512_inserti64x4(
        _mm512_castsi256_si512(_mm256_set_m128i(_mm_set1_epi16((short)b), _mm_set1_epi16((short)a))),
        _mm256_set_m128i(_mm_set1_epi16((short)d), _mm_set1_epi16((short)c)), 1);
}

FORCE_INLINE void dot_q4_K_n(int64_t n, const sift_block_q4_K *a, const char *x, size_t xs, float *s, const int NC)
{
    float sum[SIFT_DOT_MAX_COLS] = {0};
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    for (int64_t k = 0; k < n / SIFT_QK_K; k++) {
        int sc[8], m[8];
        q4k_scales(a[k].scales, sc, m);
        /* register g holds sub-block 2g (low nibbles of qs[32g..]) then 2g+1 (high nibbles):
         * exactly the activation bytes 64g .. 64g+63 */
        __m512i q[4], scv[4];
        for (int g = 0; g < 4; g++) {
            const __m256i raw = _mm256_loadu_si256((const __m256i *)(a[k].qs + 32 * g));
            const __m512i r2 = _mm512_inserti64x4(_mm512_castsi256_si512(raw), _mm256_srli_epi16(raw, 4), 1);
            q[g] = _mm512_and_si512(r2, m4);
            scv[g] = scales4(sc[2 * g], sc[2 * g], sc[2 * g + 1], sc[2 * g + 1]);
        }
        const float d = sift_fp16_to_fp32(a[k].d), dmin = sift_fp16_to_fp32(a[k].dmin);
        for (int j = 0; j < NC; j++) {
            const sift_block_q8_K *b = (const sift_block_q8_K *)(x + j * xs) + k;
            __m512i acc = _mm512_setzero_si512();
            for (int g = 0; g < 4; g++) {
                const __m512i p = _mm512_maddubs_epi16(q[g], _mm512_loadu_si512((const void *)(b->qs + 64 * g)));
                acc = _mm512_add_epi32(acc, _mm512_madd_epi16(p, scv[g]));
            }
            int32_t summ = 0;
            for (int g = 0; g < 8; g++) summ += m[g] * (b->bsums[2 * g] + b->bsums[2 * g + 1]);
            sum[j] += (d * b->d) * (float)_mm512_reduce_add_epi32(acc) - (dmin * b->d) * (float)summ;
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

/* Half h of a Q6_K block as two registers of 64 six-bit values (0..63) in element order. */
static inline void unpack_q6_K_half(const uint8_t *ql, const uint8_t *qh, __m512i q[2])
{
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x30);
    const __m256i l0 = _mm256_loadu_si256((const __m256i *)ql), l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
    const __m256i h = _mm256_loadu_si256((const __m256i *)qh);
    const __m256i c0 = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(h, 4), m2));
    const __m256i c1 = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(h, 2), m2));
    const __m256i c2 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(h, m2));
    const __m256i c3 =
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4), _mm256_and_si256(_mm256_srli_epi16(h, 2), m2));
    q[0] = _mm512_inserti64x4(_mm512_castsi256_si512(c0), c1, 1);
    q[1] = _mm512_inserti64x4(_mm512_castsi256_si512(c2), c3, 1);
}

FORCE_INLINE void dot_q6_K_n(int64_t n, const sift_block_q6_K *a, const char *x, size_t xs, float *s, const int NC)
{
    float sum[SIFT_DOT_MAX_COLS] = {0};
    for (int64_t k = 0; k < n / SIFT_QK_K; k++) {
        __m512i q[4], scv[4];
        unpack_q6_K_half(a[k].ql, a[k].qh, q);
        unpack_q6_K_half(a[k].ql + 64, a[k].qh + 32, q + 2);
        const int8_t *sc = a[k].scales;
        for (int r = 0; r < 4; r++) scv[r] = scales4(sc[4 * r], sc[4 * r + 1], sc[4 * r + 2], sc[4 * r + 3]);
        const float d = sift_fp16_to_fp32(a[k].d);
        for (int j = 0; j < NC; j++) {
            const sift_block_q8_K *b = (const sift_block_q8_K *)(x + j * xs) + k;
            __m512i acc = _mm512_setzero_si512();
            for (int r = 0; r < 4; r++) {
                const __m512i p = _mm512_maddubs_epi16(q[r], _mm512_loadu_si512((const void *)(b->qs + 64 * r)));
                acc = _mm512_add_epi32(acc, _mm512_madd_epi16(p, scv[r]));
            }
            int32_t off = 0;
            for (int sb = 0; sb < 16; sb++) off += sc[sb] * b->bsums[sb];
            sum[j] += d * b->d * (float)(_mm512_reduce_add_epi32(acc) - 32 * off);
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

/* ---- attention and element-wise ------------------------------------------------------------------------ */

static void attn_scores(int n, int hd, int nq, const float *q, const float *kt, size_t ld, float scale, float *s,
                        size_t s_stride)
{
    const __m512 vs = _mm512_set1_ps(scale);
    for (int g = 0; g < nq; g++) {
        const float *qg = q + g * hd;
        float *sg = s + g * s_stride;
        int c = 0;
        for (; c + 64 <= n; c += 64) {
            __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
            for (int d = 0; d < hd; d++) {
                const __m512 qd = _mm512_set1_ps(qg[d]);
                const float *r = kt + d * ld + c;
                a0 = _mm512_fmadd_ps(qd, _mm512_loadu_ps(r), a0);
                a1 = _mm512_fmadd_ps(qd, _mm512_loadu_ps(r + 16), a1);
                a2 = _mm512_fmadd_ps(qd, _mm512_loadu_ps(r + 32), a2);
                a3 = _mm512_fmadd_ps(qd, _mm512_loadu_ps(r + 48), a3);
            }
            _mm512_storeu_ps(sg + c, _mm512_mul_ps(a0, vs));
            _mm512_storeu_ps(sg + c + 16, _mm512_mul_ps(a1, vs));
            _mm512_storeu_ps(sg + c + 32, _mm512_mul_ps(a2, vs));
            _mm512_storeu_ps(sg + c + 48, _mm512_mul_ps(a3, vs));
        }
        for (; c < n; c += 16) { /* the last lanes masked: the same arithmetic per cell */
            const __mmask16 mk = n - c >= 16 ? (__mmask16)0xFFFF : tail16(n - c);
            __m512 a0 = _mm512_setzero_ps();
            for (int d = 0; d < hd; d++)
                a0 = _mm512_fmadd_ps(_mm512_set1_ps(qg[d]), _mm512_maskz_loadu_ps(mk, kt + d * ld + c), a0);
            _mm512_mask_storeu_ps(sg + c, mk, _mm512_mul_ps(a0, vs));
        }
    }
}

static double softmax_exp(int n, float *s, float max)
{
    const __m512 vm = _mm512_set1_ps(max);
    double sum = 0;
    for (int c = 0; c < n; c += 16) {
        const __mmask16 mk = n - c >= 16 ? (__mmask16)0xFFFF : tail16(n - c);
        const __m512 e = _mm512_maskz_mov_ps(mk, exp_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(mk, s + c), vm)));
        _mm512_mask_storeu_ps(s + c, mk, e);
        sum += _mm512_reduce_add_ps(e);
    }
    return sum;
}

static float vmax(int n, const float *s)
{
    __m512 m = _mm512_set1_ps(-INFINITY);
    for (int c = 0; c < n; c += 16) {
        const __mmask16 mk = n - c >= 16 ? (__mmask16)0xFFFF : tail16(n - c);
        m = _mm512_mask_max_ps(m, mk, m, _mm512_maskz_loadu_ps(mk, s + c));
    }
    return _mm512_reduce_max_ps(m);
}

static void swiglu(int64_t n, const float *g, const float *u, float *out)
{
    const __m512 one = _mm512_set1_ps(1.0f);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 mk = n - i >= 16 ? (__mmask16)0xFFFF : tail16((int)(n - i));
        const __m512 gv = _mm512_maskz_loadu_ps(mk, g + i);
        const __m512 e = exp_ps(_mm512_sub_ps(_mm512_setzero_ps(), gv));
        _mm512_mask_storeu_ps(out + i, mk, _mm512_mul_ps(_mm512_div_ps(gv, _mm512_add_ps(one, e)), _mm512_maskz_loadu_ps(mk, u + i)));
    }
}

void sift_kernels_init_avx512(sift_kernels *k)
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
