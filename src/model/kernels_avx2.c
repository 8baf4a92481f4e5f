/*
 * kernels_avx2.c - the AVX2 + FMA + F16C kernels (compiled with -mavx2 -mfma -mf16c -mbmi2;
 * entered only after core/cpu.c has found all of those, and the OS's YMM state).
 *
 * This file holds the inner kernels at 256 bits; the drivers around them (the column-count
 * dispatch, many rows against one column, the 4 x 4 tiles of a matrix product) and the
 * helpers that do not depend on the width are shared with kernels_avx512.c through
 * kernels_simd.h.
 *
 * Float kernels (F32, F16, BF16, attention) keep one vector accumulator set per activation
 * column and never mix columns, so a column's result is the same whether it is computed
 * alone or with three others; tails that do not fill a vector use masked loads where the
 * arithmetic must match the vector lanes (exp), scalar fmaf otherwise.
 *
 * Integer kernels (Q8_0, Q4_0, Q4_K, Q5_K, Q6_K) multiply bytes with vpmaddubsw (unsigned x
 * signed; the signed weights of Q8_0/Q4_0 go through the usual sign trick: |w| x
 * sign(w)*x, or |x| x sign(x)*w in their tiles), widen with vpmaddwd, and reduce each block to its exact integer sum before
 * the one float multiply-add per block the scalar code does: the results are bit for bit
 * those of the scalar kernels, which tests/test_kernels.c checks.
 *
 * Q4_K matrices that the load has regrouped eight rows at a time (repack.h: the table's
 * x8_pack asks for it) go through gemm_x8 for prompts and generation alike: with a row per
 * 32-bit lane there is nothing to reduce across lanes, and a sub-block's products are summed
 * in 16 bits before the one multiply by its scale (9 multiplies per 256 values and pair
 * against the plain tile's 16), which is what AVX2's sixteen registers could not afford in
 * the plain layout's 4 x 2 tiles.
 *
 * exp: Cephes' expf (range reduction by ln 2 in two parts, degree-5 polynomial), within
 * about 1 ulp of libm; inputs below -88.38 give 0, above 88.38 give infinity.
 */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "model/kernels_simd.h"
#include "model/repack.h"

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
/* The first nr (1..8) lanes of sum to out: the eight-row kernels' results, one row per lane. */
static inline void store_rows(float *out, __m256 sum, int nr)
{
    if (nr == 8) {
        _mm256_storeu_ps(out, sum);
        return;
    }
    float v[8];
    _mm256_storeu_ps(v, sum);
    memcpy(out, v, (size_t)nr * sizeof *v);
}

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

SIFT__DOT_COLS(dot_f32)

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
        for (int64_t k = i; k < n; k++) t += (double)(f16c_to_fp32(w[k]) * f16c_to_fp32(xj[k]));
        s[j] = (float)t;
    }
}

SIFT__DOT_COLS(dot_f16)

/* ---- BF16 x BF16 ---------------------------------------------------------------------------------- */

/* A BF16 value is the top half of a float, so sixteen BF16 values in a 256-bit load are two
 * float vectors for one operation each: the odd elements with the low halves masked off,
 * the even ones shifted up 16 bits (no widening shuffle, which F16 needs). A pair's sum is
 * one 8-lane float accumulator over the whole 16-value steps (lane l takes elements 16s+2l
 * then 16s+2l+1), summed across lanes (hsum_ps), then the last n % 16 products (exact in
 * float: 8-bit mantissas) in double. That one accumulator per (row, column) pair is what lets
 * a tile of 4 rows x 3 columns keep every sum in a register and convert each weight and
 * activation vector once for the whole tile; every kernel below does exactly those
 * operations per pair, so a pair's value never depends on the tile, the column count or the
 * row loop it came through. */
FORCE_INLINE __m256 bf16_even(__m256i v)
{
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}
FORCE_INLINE __m256 bf16_odd(__m256i v)
{
    return _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32((int)0xFFFF0000u)));
}

static inline float bf16_fp32(uint16_t h)
{
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* R x C pairs (R <= 4, C <= 3): out[i * C + j] = row a[i] . column b[j] */
FORCE_INLINE void bf16_tile(int64_t n, const uint16_t *const *a, const uint16_t *const *b, float *out, const int R, const int C)
{
    __m256 acc[4][3];
    UNROLL4 for (int i = 0; i < R; i++) UNROLL4 for (int j = 0; j < C; j++) acc[i][j] = _mm256_setzero_ps();
    const int64_t n16 = n & ~(int64_t)15;
    for (int64_t e = 0; e < n16; e += 16) {
        __m256i wr[4];
        UNROLL4 for (int i = 0; i < R; i++) wr[i] = _mm256_loadu_si256((const __m256i *)(a[i] + e));
        UNROLL4 for (int j = 0; j < C; j++) {
            const __m256 xv = bf16_even(_mm256_loadu_si256((const __m256i *)(b[j] + e)));
            UNROLL4 for (int i = 0; i < R; i++) acc[i][j] = _mm256_fmadd_ps(bf16_even(wr[i]), xv, acc[i][j]);
        }
        UNROLL4 for (int j = 0; j < C; j++) {
            const __m256 xv = bf16_odd(_mm256_loadu_si256((const __m256i *)(b[j] + e)));
            UNROLL4 for (int i = 0; i < R; i++) acc[i][j] = _mm256_fmadd_ps(bf16_odd(wr[i]), xv, acc[i][j]);
        }
    }
    UNROLL4 for (int i = 0; i < R; i++) UNROLL4 for (int j = 0; j < C; j++) {
        double t = hsum_ps(acc[i][j]);
        for (int64_t e = n16; e < n; e++) t += (double)(bf16_fp32(a[i][e]) * bf16_fp32(b[j][e]));
        out[i * C + j] = (float)t;
    }
}

static void dot_bf16(int64_t n, const void *w, const void *x, size_t xs, int ncols, float *s)
{
    const uint16_t *a[1] = {w}, *b[4];
    for (int j = 0; j < ncols; j++) b[j] = (const uint16_t *)((const char *)x + j * xs);
    switch (ncols) {
    case 1: bf16_tile(n, a, b, s, 1, 1); break;
    case 2: bf16_tile(n, a, b, s, 1, 2); break;
    case 3: bf16_tile(n, a, b, s, 1, 3); break;
    default: bf16_tile(n, a, b, s, 1, 3), bf16_tile(n, a, b + 3, s + 3, 1, 1); break;
    }
}

/* rows x columns in tiles of 4 x 3 (the edges as smaller tiles); generation is the tile of
 * 4 rows x 1 column: four independent sums in flight */
static void gemm_bf16(int64_t n, const void *w, size_t row_bytes, int64_t n_rows, const void *x, size_t xs, int64_t n_cols,
                      float *out, int64_t os)
{
    for (int64_t r = 0; r < n_rows; r += 4) {
        const int nr = n_rows - r < 4 ? (int)(n_rows - r) : 4;
        const uint16_t *a[4];
        for (int i = 0; i < nr; i++) a[i] = (const uint16_t *)((const char *)w + (r + i) * row_bytes);
        for (int64_t c = 0; c < n_cols; c += 3) {
            const int nc = n_cols - c < 3 ? (int)(n_cols - c) : 3;
            const uint16_t *b[3];
            for (int j = 0; j < nc; j++) b[j] = (const uint16_t *)((const char *)x + (c + j) * xs);
            float v[12];
#define BF16_TILE_CASE(R, C) \
    case (R) * 4 + (C): bf16_tile(n, a, b, v, R, C); break;
            switch (nr * 4 + nc) {
                BF16_TILE_CASE(1, 1) BF16_TILE_CASE(1, 2) BF16_TILE_CASE(1, 3)
                BF16_TILE_CASE(2, 1) BF16_TILE_CASE(2, 2) BF16_TILE_CASE(2, 3)
                BF16_TILE_CASE(3, 1) BF16_TILE_CASE(3, 2) BF16_TILE_CASE(3, 3)
                BF16_TILE_CASE(4, 1) BF16_TILE_CASE(4, 2) BF16_TILE_CASE(4, 3)
            default: break;
            }
#undef BF16_TILE_CASE
            for (int i = 0; i < nr; i++)
                for (int j = 0; j < nc; j++) out[(c + j) * os + r + i] = v[i * nc + j];
        }
    }
}

static void rows_bf16(int64_t n, const void *w, size_t row_bytes, int64_t n_rows, const void *x, float *out)
{
    gemm_bf16(n, w, row_bytes, n_rows, x, 0, 1, out, 0);
}

static void act_convert(sift__act_format f, const float *x, void *dst, int64_t n)
{
    if (f != SIFT_ACT_F16) {
        sift__act_convert_scalar(f, x, dst, n);
        return;
    }
    uint16_t *h = dst;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(h + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) h[i] = sift__fp32_to_fp16(x[i]);
}

/* ---- Q8_0 and Q4_0 against Q8_0 ---------------------------------------------------------------- */

/* Exact sum of the 32 products of signed bytes a (|a| <= 127 or -128) and b. */
static inline int dot32_i8(__m256i a, __m256i b)
{
    const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(a, a), _mm256_sign_epi8(b, a));
    return hsum_epi32(_mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
}

FORCE_INLINE void dot_q8_0_n(int64_t n, const sift__block_q8_0 *a, const char *x, size_t xs, float *s, const int NC)
{
    float sum[SIFT_DOT_MAX_COLS] = {0};
    for (int64_t k = 0; k < n / SIFT_QK8_0; k++) {
        const __m256i qa = _mm256_loadu_si256((const __m256i *)a[k].qs);
        const float da = f16c_to_fp32(a[k].d);
        for (int j = 0; j < NC; j++) {
            const sift__block_q8_0 *b = (const sift__block_q8_0 *)(x + j * xs) + k;
            const int isum = dot32_i8(qa, _mm256_loadu_si256((const __m256i *)b->qs));
            sum[j] += (float)isum * (da * f16c_to_fp32(b->d));
        }
    }
    for (int j = 0; j < NC; j++) s[j] = sum[j];
}

SIFT__DOT_COLS(dot_q8_0)

FORCE_INLINE void dot_q4_0_n(int64_t n, const sift__block_q4_0 *a, const char *x, size_t xs, float *s, const int NC)
{
    float sum[SIFT_DOT_MAX_COLS] = {0};
    for (int64_t k = 0; k < n / SIFT_QK4_0; k++) {
        const __m256i qa = unpack_q4_0(a[k].qs);
        const float da = f16c_to_fp32(a[k].d);
        for (int j = 0; j < NC; j++) {
            const sift__block_q8_0 *b = (const sift__block_q8_0 *)(x + j * xs) + k;
            const int isum = dot32_i8(qa, _mm256_loadu_si256((const __m256i *)b->qs));
            sum[j] += (float)isum * (da * f16c_to_fp32(b->d));
        }
    }
    for (int j = 0; j < NC; j++) s[j] = sum[j];
}

SIFT__DOT_COLS(dot_q4_0)

/* Tiles of weight rows x activation rows: the forward pass's matrix products for batches
 * (gemm) and generation's many rows against one column (rows_huge), AVX2 without VNNI. The
 * scalar code's per-block step is (float)isum * (dw * dx) added to the pair's float sum,
 * so each block of each (row, column) pair must be reduced to its exact integer sum isum
 * before the float step. That reduction, not the byte products, was most of the work: per
 * pair the products are three instructions (vpsignb, vpmaddubsw, vpmaddwd), while the
 * earlier 4 x 4 tile reduced its pairs four at a time with three vphaddd (two cycles each
 * on AMD's Zen 3: as much again as the products), and ran their float steps in 128-bit
 * registers.
 *
 * Generation (rows_huge, for matrices in weights.c's huge-page copy) takes 8 weight rows x
 * the one column: the column's block is loaded once for eight rows, and made |x| once (the
 * unsigned side of vpmaddubsw; each weight row takes the column's signs: one vpsignb per
 * row, not two); the eight registers of partial sums are transposed and added in three
 * levels (reduce8: two unpacks and an add per two registers, no vphaddd), and the eight
 * rows' float steps run in the eight lanes of one register, each lane doing the scalar
 * code's two float operations in its order (bit for bit the scalar result). Prompt tiles
 * fold most of the reduction into the products themselves (below).
 *
 * Where the weights take the signs of the activations (sign(w, x) times |x|: both, but
 * Q4_0's prompt tiles), a weight byte of -128 would overflow. Q8_0 from ggml's (and sift's) quantizer never has one
 * (round(x / (amax / 127)) is within +-127), nor has Q4_0 (-8..7); the activations, from
 * act_convert, are within +-127 too. */

/* The three levels of reduce8. In each 128-bit half: mix32(p, q) -> [p0+p2, q0+q2, p1+p3,
 * q1+q3]; mix64 of two of those -> [p, q, r, s], the half's sums; mix128 -> the low half's
 * four sums from u (its two halves added), the high half's from v. (mix32 and mix64 as two
 * blends, one vpshufd and an add, fewer shuffles, were 5% slower in rows_huge.) */
static inline __m256i mix32(__m256i p, __m256i q)
{
    return _mm256_add_epi32(_mm256_unpacklo_epi32(p, q), _mm256_unpackhi_epi32(p, q));
}
static inline __m256i mix64(__m256i u, __m256i v)
{
    return _mm256_add_epi32(_mm256_unpacklo_epi64(u, v), _mm256_unpackhi_epi64(u, v));
}
static inline __m256i mix128(__m256i u, __m256i v)
{
    return _mm256_add_epi32(_mm256_blend_epi32(u, v, 0xF0), _mm256_permute2x128_si256(u, v, 0x21));
}

/* lane l: the sum of p[l]'s eight int32 lanes */
FORCE_INLINE __m256i reduce8(const __m256i p[8])
{
    return mix128(mix64(mix32(p[0], p[1]), mix32(p[2], p[3])), mix64(mix32(p[4], p[5]), mix32(p[6], p[7])));
}

static inline __m256i w_q8_0(const sift__block_q8_0 *a)
{
    return _mm256_loadu_si256((const __m256i *)a->qs);
}

static inline __m256i w_q4_0(const sift__block_q4_0 *a)
{
    return unpack_q4_0(a->qs);
}

/* Products of few columns (2 to 7 tokens: small batches, speculative drafts), where the
 * prompt tiles below would spend more on preparing their columns and rows' scales than on
 * the products (and a quad of columns holding two): 4 x 4 tiles over the whole rows, each
 * weight row's bytes loaded once for its columns, four pairs' block sums reduced together
 * (reduce4) and their float steps in the four lanes of one register. */
static inline __m128 scales4(uint16_t a, uint16_t b, uint16_t c, uint16_t d)
{
    return _mm_cvtph_ps(_mm_setr_epi16((short)a, (short)b, (short)c, (short)d, 0, 0, 0, 0));
}

/* int32 partial sums of the products of signed bytes w and x (|w| x sign(w)*x) */
static inline __m256i products(__m256i w, __m256i x)
{
    return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w)), _mm256_set1_epi16(1));
}

/* NAME##s_tile (R x C pairs over the whole rows), and gemm_NAME##s, the shared 4 x 4 driver over it */
#define QX_0_GEMM_FEW(NAME, WBLOCK)                                                                                  \
    FORCE_INLINE void NAME##s_tile(int64_t n, const WBLOCK *const *a, const sift__block_q8_0 *const *b, __m128 *sum,   \
                                   const int R, const int C, const char *pf)                                        \
    {                                                                                                                \
        __m128 acc[4] = {_mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps()};                   \
        for (int64_t k = 0; k < n / 32; k++) {                                                                       \
            if (pf) /* the next four rows, 4 x 34 bytes per block: 3 lines */                                       \
                for (int l = 0; l < 3; l++) _mm_prefetch(pf + k * 192 + 64 * l, _MM_HINT_T0);                        \
            __m256i xv[4], wv[4];                                                                                    \
            uint16_t hx[4] = {0}, hw[4] = {0};                                                                       \
            UNROLL4 for (int j = 0; j < C; j++) xv[j] = w_q8_0(b[j] + k), hx[j] = b[j][k].d;                        \
            UNROLL4 for (int i = 0; i < R; i++) wv[i] = w_##NAME(a[i] + k), hw[i] = a[i][k].d;                      \
            const __m128 dxv = scales4(hx[0], hx[1], hx[2], hx[3]), dwv = scales4(hw[0], hw[1], hw[2], hw[3]);       \
            UNROLL4 for (int g = 0; g < (R * C + 3) / 4; g++) {                                                     \
                __m256i p[4];                                                                                        \
                int iw[4], ix[4];                                                                                    \
                UNROLL4 for (int l = 0; l < 4; l++) {                                                               \
                    const int q = 4 * g + l;                                                                         \
                    iw[l] = q < R * C ? q / C : 0, ix[l] = q < R * C ? q % C : 0;                                    \
                    p[l] = q < R * C ? products(wv[q / C], xv[q % C]) : _mm256_setzero_si256();                     \
                }                                                                                                    \
                const __m128 dw = _mm_permutevar_ps(dwv, _mm_setr_epi32(iw[0], iw[1], iw[2], iw[3]));               \
                const __m128 dx = _mm_permutevar_ps(dxv, _mm_setr_epi32(ix[0], ix[1], ix[2], ix[3]));               \
                acc[g] = _mm_add_ps(acc[g], _mm_mul_ps(_mm_cvtepi32_ps(reduce4(p[0], p[1], p[2], p[3])), _mm_mul_ps(dw, dx))); \
            }                                                                                                        \
        }                                                                                                            \
        UNROLL4 for (int g = 0; g < (R * C + 3) / 4; g++) sum[g] = acc[g];                                          \
    }                                                                                                                \
    SIFT__GEMM_4X4(NAME##s, WBLOCK)

QX_0_GEMM_FEW(q8_0, sift__block_q8_0)
QX_0_GEMM_FEW(q4_0, sift__block_q4_0)

/* ---- prompt tiles: the first level of the reduction folded into the products ----------------
 *
 * A block's dot product does not depend on the order of its 32 products, so a row and a
 * column may both be permuted, as long as the same way. sigma_v (v = 0..3) permutes the
 * four 32-bit slots of each 128-bit half: slot s <- slot s ^ v. For a quad of columns
 * x0..x3, mix_v takes slot s of each half from sigma_v(x_s): one register holding, in slot
 * s, four bytes of column s. Against sigma_v(w) (the row, permuted the same way) the
 * products of mix_v, widened to int32, hold in slot s a partial sum of pair (w, x_s), and
 * summed over v = 0..3 every slot of every column has been met once: slot s of each half
 * holds pair (w, x_s)'s sum over that half. So four pairs' block sums come out of the four
 * products' sums with no shuffle of the products at all; mix128 then adds the halves of
 * two rows (one lane shuffle for eight pairs). The permuted and mixed columns, and their
 * absolute values (the unsigned side of vpmaddubsw), are made once per column quad and
 * block and shared by every row; a row's three permutations are three vpshufd, shared by
 * the quad's four columns (Q4_0's, with its unpacking, are made once per row group and
 * block and shared by all the quads: there that was faster, for Q8_0 it was not).
 *
 * Q4_0 needs no vpsignb at all: its stored nibbles q (0..15, the value plus 8) are already
 * the unsigned side of vpmaddubsw (2 x 15 x 127 cannot saturate), and sum (q - 8) x is
 * sum q x - 8 sum x, the column's byte sums made once with the prepared columns.
 *
 * That leaves per pair and block one vpsignb, one vpmaddubsw, one vpmaddwd and one vpaddd
 * (thread CPU time of a 512 x 2048 x 32-column product on Zen 3, per pair and block:
 * Q8_0 1.17 -> 0.81 ns, Q4_0 1.23 -> 0.82 ns, against the 4 x 4 tile with vphaddd). */

/* sigma_v */
FORCE_INLINE __m256i q0_perm(__m256i v, const int p)
{
    switch (p) {
    case 0: return v;
    case 1: return _mm256_shuffle_epi32(v, _MM_SHUFFLE(2, 3, 0, 1));
    case 2: return _mm256_shuffle_epi32(v, _MM_SHUFFLE(1, 0, 3, 2));
    default: return _mm256_shuffle_epi32(v, _MM_SHUFFLE(0, 1, 2, 3));
    }
}

/* A column quad's block, prepared: mix_v and |mix_v| for v = 0..3, and 8 x each column's
 * byte sum in lanes j and 4 + j (Q4_0's offset, below; 288 bytes) */
typedef struct {
    __m256i m[4], a[4], c;
} q0_xprep;

/* The chunk of prepared columns (Q0_KC x Q0_CQ x 288 bytes = 18 KiB on the stack) stays in
 * L1 beside the row group's chunk, and serves Q0_RG groups (128 rows; their sums, 16 KiB)
 * before the next is prepared. Before, 16 blocks (36 KiB: more than L1's 32) served 8
 * groups; thread CPU time of a 32-token prompt of the 2048 x 8 Q8_0 model (min of 5, three
 * runs, alternated) 341-345 -> 325-329 ms, `sift bench --kernels` prompt (in L2, 16 columns)
 * Q8_0 364-367 -> 352-354 ns, Q4_0 347-350 -> 326. The sums of a pair still run over its
 * blocks in order, so every value is unchanged. */
#define Q0_KC 8  /* blocks per chunk of the prepared columns */
#define Q0_CQ 8  /* column quads per chunk */
#define Q0_RG 32 /* row groups of four per row block (the sums kept across the chunks of blocks) */

/* Blocks [k0, k0 + nk) of the column quad at b (missing columns repeat the last one) into
 * xp[0..nk) and their scales into xs[4 * kk + j] (the byte sums c only if sums). */
static void q0_prepare(const sift__block_q8_0 *const *b, int64_t k0, int nk, q0_xprep *xp, float *xs, bool sums)
{
    for (int kk = 0; kk < nk; kk++) {
        const int64_t k = k0 + kk;
        __m256i x[4];
        UNROLL4 for (int j = 0; j < 4; j++) x[j] = _mm256_loadu_si256((const __m256i *)b[j][k].qs), xs[4 * kk + j] = f16c_to_fp32(b[j][k].d);
        UNROLL4 for (int v = 0; v < 4; v++) {
            const __m256i lo = _mm256_blend_epi32(q0_perm(x[0], v), q0_perm(x[1], v), 0x22);
            const __m256i hi = _mm256_blend_epi32(q0_perm(x[2], v), q0_perm(x[3], v), 0x88);
            const __m256i m = _mm256_blend_epi32(lo, hi, 0xCC);
            xp[kk].m[v] = m, xp[kk].a[v] = _mm256_sign_epi8(m, m);
        }
        if (!sums) continue;
        __m256i t[4];
        UNROLL4 for (int j = 0; j < 4; j++) t[j] = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), x[j]), _mm256_set1_epi16(1));
        xp[kk].c = _mm256_broadcastsi128_si256(_mm_slli_epi32(reduce4(t[0], t[1], t[2], t[3]), 3));
    }
}

/* Q4_0's values unsigned (0..15, the stored nibbles: the value plus 8), as unpack_q4_0 lays them out */
static inline __m256i w_q4_0u(const sift__block_q4_0 *a)
{
    const __m128i b = _mm_loadu_si128((const __m128i *)a->qs);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(b, 4), b), _mm256_set1_epi8(0x0F));
}

/* NAME_quad: blocks [0, nk) of 4 rows (a, from block k0) x a prepared column quad (xp, xs)
 * added into acc (acc[0]: rows 0 and 1, acc[1]: rows 2 and 3; lane 4h + j: row 2g + h,
 * column j), with the rows' scales ws[8 * (2 * kk + g) ..] spread to those lanes;
 * (QX_0_ROWS_HUGE: NAME_rows8, blocks of 8 rows x 1 column, and rows_huge_NAME over it.) */
#define QX_0_TILES(NAME, WBLOCK, WPREP, WROW)                                                                                 \
    FORCE_INLINE void NAME##_quad(const WBLOCK *const *a, int64_t k0, const __m256i *wp, int nk, const q0_xprep *xp,  \
                                  const float *xs, const float *ws, __m256 *acc, const bool PREP)                   \
    {                                                                                                                \
        __m256 acc0 = acc[0], acc1 = acc[1];                                                                         \
        for (int kk = 0; kk < nk; kk++) {                                                                            \
            __m256i r[4];                                                                                            \
            UNROLL4 for (int i = 0; i < 4; i++) {                                                                   \
                const __m256i w = PREP ? _mm256_setzero_si256() : w_##NAME(a[i] + k0 + kk);                          \
                __m256i s = _mm256_setzero_si256();                                                                  \
                UNROLL4 for (int v = 0; v < 4; v++) {                                                               \
                    /* Q4_0 (PREP): the unsigned nibbles against the signed activations, no vpsignb */                \
                    const __m256i p = PREP ? _mm256_maddubs_epi16(wp[16 * kk + 4 * i + v], xp[kk].m[v])                 \
                                           : _mm256_maddubs_epi16(xp[kk].a[v], _mm256_sign_epi8(q0_perm(w, v), xp[kk].m[v])); \
                    s = _mm256_add_epi32(s, _mm256_madd_epi16(p, _mm256_set1_epi16(1)));                             \
                }                                                                                                    \
                r[i] = s;                                                                                            \
            }                                                                                                        \
            const __m256 dx = _mm256_broadcast_ps((const __m128 *)(xs + 4 * kk));                                    \
            __m256i i0 = mix128(r[0], r[1]), i1 = mix128(r[2], r[3]);                                                \
            if (PREP) /* sum (q - 8) x = sum q x - 8 sum x */                                                       \
                i0 = _mm256_sub_epi32(i0, xp[kk].c), i1 = _mm256_sub_epi32(i1, xp[kk].c);                            \
            acc0 = _mm256_add_ps(acc0, _mm256_mul_ps(_mm256_cvtepi32_ps(i0), _mm256_mul_ps(_mm256_loadu_ps(ws + 16 * kk), dx))); \
            acc1 = _mm256_add_ps(acc1, _mm256_mul_ps(_mm256_cvtepi32_ps(i1), _mm256_mul_ps(_mm256_loadu_ps(ws + 16 * kk + 8), dx))); \
        }                                                                                                            \
        acc[0] = acc0, acc[1] = acc1;                                                                                \
    }                                                                                                                \
    /* Column chunks of Q0_CQ quads; in each, row blocks of Q0_RG groups of 4 rows; in each, chunks of                \
     * Q0_KC blocks: the columns' chunk prepared once for the row block, then every (row group, quad) tile            \
     * of the block over it. Missing rows repeat the last one, missing columns too (computed, dropped). */           \
    static void gemm_##NAME(int64_t n, const void *w, size_t row_bytes, int64_t n_rows, const void *x, size_t xs,    \
                            int64_t n_cols, float *out, int64_t os)                                                  \
    {                                                                                                                \
        if (n_cols < 8) {                                                                                            \
            gemm_##NAME##s(n, w, row_bytes, n_rows, x, xs, n_cols, out, os);                                         \
            return;                                                                                                  \
        }                                                                                                            \
        const int64_t nb = n / 32;                                                                                   \
        q0_xprep xp[Q0_CQ][Q0_KC];                                                                                   \
        float xsc[Q0_CQ][4 * Q0_KC], ws[16 * Q0_KC];                                                                 \
        __m256i wp[16 * Q0_KC]; /* the row group's four rows, permuted four ways, per block */                       \
        __m256 acc[Q0_RG][Q0_CQ][2];                                                                                 \
        for (int64_t c0 = 0; c0 < n_cols; c0 += 4 * Q0_CQ) {                                                         \
            const int nq = (int)((n_cols - c0 + 3) / 4 < Q0_CQ ? (n_cols - c0 + 3) / 4 : Q0_CQ);                     \
            const sift__block_q8_0 *b[Q0_CQ][4];                                                                     \
            for (int q = 0; q < nq; q++)                                                                             \
                for (int j = 0; j < 4; j++) {                                                                        \
                    const int64_t c = c0 + 4 * q + j < n_cols ? c0 + 4 * q + j : n_cols - 1;                         \
                    b[q][j] = (const sift__block_q8_0 *)((const char *)x + c * xs);                                  \
                }                                                                                                    \
            for (int64_t r0 = 0; r0 < n_rows; r0 += 4 * Q0_RG) {                                                     \
                const int ng = (int)((n_rows - r0 + 3) / 4 < Q0_RG ? (n_rows - r0 + 3) / 4 : Q0_RG);                 \
                for (int g = 0; g < ng; g++)                                                                         \
                    for (int q = 0; q < nq; q++) acc[g][q][0] = acc[g][q][1] = _mm256_setzero_ps();                  \
                for (int64_t k0 = 0; k0 < nb; k0 += Q0_KC) {                                                         \
                    const int nk = (int)(nb - k0 < Q0_KC ? nb - k0 : Q0_KC);                                         \
                    for (int q = 0; q < nq; q++) q0_prepare(b[q], k0, nk, xp[q], xsc[q], WPREP);                            \
                    for (int g = 0; g < ng; g++) {                                                                   \
                        const int64_t r = r0 + 4 * g;                                                                \
                        const WBLOCK *a[4];                                                                          \
                        for (int i = 0; i < 4; i++)                                                                  \
                            a[i] = (const WBLOCK *)((const char *)w + (r + i < n_rows ? r + i : n_rows - 1) * row_bytes); \
                        if (r + 8 <= n_rows) /* this chunk of the next four rows: strided, the prefetcher misses it */ \
                            for (int i = 4; i < 8; i++) {                                                            \
                                const char *p = (const char *)w + (r + i) * row_bytes + k0 * sizeof(WBLOCK);         \
                                for (int64_t o = 0; o < nk * (int64_t)sizeof(WBLOCK) + 63; o += 64) _mm_prefetch(p + o, _MM_HINT_T0); \
                            }                                                                                        \
                        for (int kk = 0; kk < nk; kk++)                                                              \
                            for (int i = 0; i < 4; i++) {                                                            \
                                const float d = f16c_to_fp32(a[i][k0 + kk].d);                                       \
                                for (int l = 0; l < 4; l++) ws[16 * kk + 8 * (i / 2) + 4 * (i % 2) + l] = d;         \
                                if (WPREP) {                                                                         \
                                    const __m256i wv = WROW(a[i] + k0 + kk);                                         \
                                    UNROLL4 for (int v = 0; v < 4; v++) wp[16 * kk + 4 * i + v] = q0_perm(wv, v);   \
                                }                                                                                    \
                            }                                                                                        \
                        for (int q = 0; q < nq; q++) NAME##_quad(a, k0, wp, nk, xp[q], xsc[q], ws, acc[g][q], WPREP); \
                    }                                                                                                \
                }                                                                                                    \
                for (int g = 0; g < ng; g++)                                                                         \
                    for (int q = 0; q < nq; q++) {                                                                   \
                        float v[16];                                                                                 \
                        _mm256_storeu_ps(v, acc[g][q][0]);                                                           \
                        _mm256_storeu_ps(v + 8, acc[g][q][1]);                                                       \
                        for (int i = 0; i < 4 && r0 + 4 * g + i < n_rows; i++)                                       \
                            for (int j = 0; j < 4 && c0 + 4 * q + j < n_cols; j++)                                   \
                                out[(c0 + 4 * q + j) * os + r0 + 4 * g + i] = v[4 * i + j];                          \
                    }                                                                                                \
            }                                                                                                        \
        }                                                                                                            \
    }

/* NAME_rows8 and rows_huge_NAME, eight rows at a time through it (Q4_0; Q8_0 has rows_q8_0, below) */
#define QX_0_ROWS_HUGE(NAME, WBLOCK, WPREP, WROW)                                                                    \
    FORCE_INLINE __m256 NAME##_rows8(int64_t n, const WBLOCK *const *a, const sift__block_q8_0 *b, const char *pf)    \
    {                                                                                                                \
        __m256 sum = _mm256_setzero_ps();                                                                            \
        for (int64_t k = 0; k < n / 32; k++) {                                                                       \
            prefetch_span(pf, k, 8 * (int64_t)sizeof(WBLOCK));                                                       \
            const __m256i xv = w_q8_0(b + k), xa = _mm256_sign_epi8(xv, xv); /* |x|: once for the eight rows */    \
            __m256i p[8];                                                                                            \
            _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++) /* Q4_0: unsigned nibbles x x, as in the tiles */   \
                p[i] = _mm256_madd_epi16(WPREP ? _mm256_maddubs_epi16(WROW(a[i] + k), xv)                            \
                                               : _mm256_maddubs_epi16(xa, _mm256_sign_epi8(w_##NAME(a[i] + k), xv)), \
                                         _mm256_set1_epi16(1));                                                      \
            __m256i is = reduce8(p);                                                                                 \
            if (WPREP) { /* - 8 x the column's byte sum, in every lane */                                           \
                __m256i t = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), xv), _mm256_set1_epi16(1));  \
                t = _mm256_add_epi32(t, _mm256_permute2x128_si256(t, t, 1));                                         \
                t = _mm256_add_epi32(t, _mm256_shuffle_epi32(t, _MM_SHUFFLE(1, 0, 3, 2)));                           \
                t = _mm256_add_epi32(t, _mm256_shuffle_epi32(t, _MM_SHUFFLE(2, 3, 0, 1)));                           \
                is = _mm256_sub_epi32(is, _mm256_slli_epi32(t, 3));                                                  \
            }                                                                                                        \
            const __m256 dw = _mm256_cvtph_ps(_mm_setr_epi16((short)a[0][k].d, (short)a[1][k].d, (short)a[2][k].d,    \
                                                             (short)a[3][k].d, (short)a[4][k].d, (short)a[5][k].d,    \
                                                             (short)a[6][k].d, (short)a[7][k].d));                    \
            const __m256 dx = _mm256_set1_ps(f16c_to_fp32(b[k].d));                                                  \
            sum = _mm256_add_ps(sum, _mm256_mul_ps(_mm256_cvtepi32_ps(is), _mm256_mul_ps(dw, dx)));                  \
        }                                                                                                            \
        return sum;                                                                                                  \
    }                                                                                                                \
    static void rows_huge_##NAME(int64_t n, const void *w, size_t row_bytes, int64_t n_rows, const void *x, float *out) \
    {                                                                                                                \
        for (int64_t r = 0; r < n_rows; r += 8) {                                                                    \
            const int nr = n_rows - r < 8 ? (int)(n_rows - r) : 8;                                                   \
            const WBLOCK *a[8];                                                                                      \
            for (int i = 0; i < 8; i++) a[i] = (const WBLOCK *)((const char *)w + (r + (i < nr ? i : nr - 1)) * row_bytes); \
            const char *pf = r + 16 <= n_rows ? (const char *)w + (r + 8) * row_bytes : NULL;                       \
            const __m256 sum = NAME##_rows8(n, a, x, pf);                                                            \
            store_rows(out + r, sum, nr);                                                                            \
        }                                                                                                            \
    }

QX_0_TILES(q8_0, sift__block_q8_0, false, w_q8_0)
QX_0_TILES(q4_0, sift__block_q4_0, true, w_q4_0u)
QX_0_ROWS_HUGE(q4_0, sift__block_q4_0, true, w_q4_0u)

/* ---- Q8_0 generation from the plain layout -------------------------------------------------------
 *
 * One token against the rows read in place from the file mapping (or weights.c's copy), eight
 * rows at a time: the activation block is loaded once for the eight rows, each row's block is
 * reduced to its exact integer sum (reduce8, no vphaddd), and the eight rows' float steps run
 * in the eight lanes of one register, each the scalar code's two float operations in its
 * order: every value is the dot kernel's, bit for bit. The products are |w| x sign(x, w), as
 * the x8 kernel's: a weight byte of -128 (which no quantizer writes, but a file may hold) is
 * exact, where sign(w, x) x |x| would overflow it; the activations are within +-127.
 *
 * What made the plain rows 3.4x slower than the x8 layout (1240 ns per row-block of 8 x 2048
 * values in L2, against 360) was the old row loop: a row at a time, each block reduced by a
 * horizontal sum of its own. rows_huge's eight-row tile fixed the work (about 490 ns) but not
 * the memory: eight rows read side by side are eight short streams (a 2048-wide row is 2176
 * bytes) that the hardware prefetcher hardly learns before they end, and its software
 * prefetch of the next group (prefetch_span) is compiled to nothing by GCC 12 (the loop of
 * prefetches is dropped as having no effect). So here the next group of rows, which lies
 * right after this one, is prefetched as one linear stream spread over this group's blocks:
 * a fixed five lines per block from the group's share (eight blocks' 272 bytes start at most
 * 48 bytes into a line: five lines cover them; a fixed count keeps the loop branch-free),
 * into L2 only, as into L1 it would evict the group being read (two groups of a 2048-wide
 * matrix are 34 KiB, over L1's 32). Streaming 30000 rows of 2048 from 4 KiB pages on the
 * Zen 3 (ns per row-block, min of 12): the one-row loop 1450-1600, rows_huge's loop
 * 1250-1400, this one 930-1070, the x8 layout 1010-1200; in L2 550 against x8's 356. */
static void rows_q8_0(int64_t n, const void *w, size_t row_bytes, int64_t n_rows, const void *x, float *out)
{
    const int64_t nb = n / SIFT_QK8_0;
    const sift__block_q8_0 *b = x;
    const __m256i ones = _mm256_set1_epi16(1);
    for (int64_t r = 0; r < n_rows; r += 8) {
        const int nr = n_rows - r < 8 ? (int)(n_rows - r) : 8;
        const sift__block_q8_0 *a[8];
        for (int i = 0; i < 8; i++) a[i] = (const sift__block_q8_0 *)((const char *)w + (r + (i < nr ? i : nr - 1)) * row_bytes);
        /* the next group (up to eight rows), pf_step bytes of it per block of this one (a
         * prefetch past its end, or a short one where rows are padded, is only a hint) */
        const int64_t nn = n_rows - r - 8 < 8 ? n_rows - r - 8 : 8;
        const char *pf = nn > 0 ? (const char *)w + (r + 8) * row_bytes : NULL;
        const int64_t pf_step = nn > 0 ? nn * (int64_t)row_bytes / nb : 0;
        __m256 sum = _mm256_setzero_ps();
        for (int64_t k = 0; k < nb; k++) {
            if (pf) {
                const char *q = pf + ((k * pf_step) & ~(int64_t)63);
                _Pragma("GCC unroll 5") for (int l = 0; l < 5; l++) _mm_prefetch(q + 64 * l, _MM_HINT_T1);
            }
            const __m256i xv = w_q8_0(b + k);
            __m256i p[8];
            _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++) {
                const __m256i wv = w_q8_0(a[i] + k);
                p[i] = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(wv), _mm256_sign_epi8(xv, wv)), ones);
            }
            const __m256 dw = _mm256_cvtph_ps(_mm_setr_epi16((short)a[0][k].d, (short)a[1][k].d, (short)a[2][k].d,
                                                             (short)a[3][k].d, (short)a[4][k].d, (short)a[5][k].d,
                                                             (short)a[6][k].d, (short)a[7][k].d));
            const __m256 dx = _mm256_set1_ps(f16c_to_fp32(b[k].d));
            sum = _mm256_add_ps(sum, _mm256_mul_ps(_mm256_cvtepi32_ps(reduce8(p)), _mm256_mul_ps(dw, dx)));
        }
        store_rows(out + r, sum, nr);
    }
}

/* ---- MXFP4 against Q8_0 ------------------------------------------------------------------------
 *
 * A block's 32 codes become their signed byte values (the doubled E2M1 values, -12..12) with
 * one vpshufb into the 16-entry table per half; then Q4_0's path: the exact integer sum of
 * the block (vpsignb, vpmaddubsw, vpmaddwd, reduced), and the scalar code's float step with
 * the block's scale 2^(e - 128) (sift__e8m0_to_fp32_half). Generation from huge pages
 * (rows_huge) takes eight rows at a time against the column (its |x| made once), the eight
 * block sums reduced together (reduce8) and their float steps in the eight lanes of one
 * register, as Q4_0's rows_huge does; from file pages a row at a time (rows), where eight
 * streams side by side would defeat the prefetcher. Every value bit for bit the scalar
 * kernel's. */
static inline __m256i unpack_mxfp4(const uint8_t *qs)
{
    const __m256i tbl = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)sift__kvalues_mxfp4));
    const __m128i b = _mm_loadu_si128((const __m128i *)qs);
    const __m256i v = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(b, 4), b), _mm256_set1_epi8(0x0F));
    return _mm256_shuffle_epi8(tbl, v);
}

FORCE_INLINE void dot_mxfp4_n(int64_t n, const sift__block_mxfp4 *a, const char *x, size_t xs, float *s, const int NC)
{
    float sum[SIFT_DOT_MAX_COLS] = {0};
    for (int64_t k = 0; k < n / SIFT_QK_MXFP4; k++) {
        const __m256i qa = unpack_mxfp4(a[k].qs);
        const float da = sift__e8m0_to_fp32_half(a[k].e);
        for (int j = 0; j < NC; j++) {
            const sift__block_q8_0 *b = (const sift__block_q8_0 *)(x + j * xs) + k;
            const int isum = dot32_i8(qa, _mm256_loadu_si256((const __m256i *)b->qs));
            sum[j] += (float)isum * (da * f16c_to_fp32(b->d));
        }
    }
    for (int j = 0; j < NC; j++) s[j] = sum[j];
}

SIFT__DOT_COLS(dot_mxfp4)

/* lane i: 2^(e_i - 128) for the eight exponents, as sift__e8m0_to_fp32_half */
static inline __m256 e8m0_half8(const uint8_t e[8])
{
    const __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)e));
    const __m256i norm = _mm256_slli_epi32(_mm256_sub_epi32(v, _mm256_set1_epi32(1)), 23);
    const __m256i sub = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), v);
    const __m256i small = _mm256_cmpgt_epi32(_mm256_set1_epi32(2), v);
    return _mm256_castsi256_ps(_mm256_blendv_epi8(norm, sub, small));
}

static void rows_huge_mxfp4(int64_t n, const void *w, size_t row_bytes, int64_t n_rows, const void *x, float *out)
{
    const sift__block_q8_0 *b = x;
    for (int64_t r = 0; r < n_rows; r += 8) {
        const int nr = n_rows - r < 8 ? (int)(n_rows - r) : 8;
        const sift__block_mxfp4 *a[8];
        for (int i = 0; i < 8; i++) a[i] = (const sift__block_mxfp4 *)((const char *)w + (r + (i < nr ? i : nr - 1)) * row_bytes);
        const char *pf = r + 16 <= n_rows ? (const char *)w + (r + 8) * row_bytes : NULL;
        __m256 sum = _mm256_setzero_ps();
        for (int64_t k = 0; k < n / SIFT_QK_MXFP4; k++) {
            prefetch_span(pf, k, 8 * (int64_t)sizeof(sift__block_mxfp4));
            const __m256i xv = _mm256_loadu_si256((const __m256i *)b[k].qs), xa = _mm256_sign_epi8(xv, xv);
            __m256i p[8];
            uint8_t e[8];
            _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++) {
                p[i] = _mm256_madd_epi16(_mm256_maddubs_epi16(xa, _mm256_sign_epi8(unpack_mxfp4(a[i][k].qs), xv)),
                                         _mm256_set1_epi16(1));
                e[i] = a[i][k].e;
            }
            const __m256 dx = _mm256_set1_ps(f16c_to_fp32(b[k].d));
            sum = _mm256_add_ps(sum, _mm256_mul_ps(_mm256_cvtepi32_ps(reduce8(p)), _mm256_mul_ps(e8m0_half8(e), dx)));
        }
        store_rows(out + r, sum, nr);
    }
}

/* MXFP4 in the x8 layout (repack.h): lane r is row r from the first multiply to the float
 * step. The codes go through a table of the values plus 12 (0..24, unsigned: vpmaddubsw's
 * unsigned side, no vpsignb), each 32-bit lane of a step meeting the same four activation
 * bytes (vpbroadcastd); 12 x the block's activation sum comes off afterwards. Two steps'
 * products (at most 2 x 2 x 24 x 127 = 12192 each) are summed in 16 bits per half block
 * before one vpmaddwd. A group's block sums are exact, its eight float steps the scalar
 * code's: every value bit for bit the scalar kernel's. One pass over a group per column:
 * generation reads the matrix as one sequential stream. */
FORCE_INLINE __m256 mxfp4x8_block(const sift_block_mxfp4x8 *a, const sift__block_q8_0 *b, __m256 acc)
{
    static const int8_t shifted[16] = {12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0};
    const __m256i tbl = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)shifted)), m4 = _mm256_set1_epi8(0x0F);
    __m256i half[2];
    UNROLL4 for (int h = 0; h < 2; h++) {
        __m256i s16 = _mm256_setzero_si256();
        UNROLL4 for (int t = 2 * h; t < 2 * h + 2; t++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(a->qs + 32 * t));
            int32_t x0, x1;
            memcpy(&x0, b->qs + 8 * t, 4);
            memcpy(&x1, b->qs + 8 * t + 4, 4);
            const __m256i lo = _mm256_shuffle_epi8(tbl, _mm256_and_si256(q, m4));
            const __m256i hi = _mm256_shuffle_epi8(tbl, _mm256_and_si256(_mm256_srli_epi16(q, 4), m4));
            s16 = _mm256_add_epi16(s16, _mm256_add_epi16(_mm256_maddubs_epi16(lo, _mm256_set1_epi32(x0)),
                                                         _mm256_maddubs_epi16(hi, _mm256_set1_epi32(x1))));
        }
        half[h] = _mm256_madd_epi16(s16, _mm256_set1_epi16(1));
    }
    /* 12 x the activations' sum, in every lane */
    const __m256i xv = _mm256_loadu_si256((const __m256i *)b->qs);
    __m256i t = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(12), xv), _mm256_set1_epi16(1));
    t = _mm256_add_epi32(t, _mm256_permute2x128_si256(t, t, 1));
    t = _mm256_add_epi32(t, _mm256_shuffle_epi32(t, _MM_SHUFFLE(1, 0, 3, 2)));
    t = _mm256_add_epi32(t, _mm256_shuffle_epi32(t, _MM_SHUFFLE(2, 3, 0, 1)));
    const __m256i is = _mm256_sub_epi32(_mm256_add_epi32(half[0], half[1]), t);
    const __m256 dx = _mm256_set1_ps(f16c_to_fp32(b->d));
    return _mm256_add_ps(acc, _mm256_mul_ps(_mm256_cvtepi32_ps(is), _mm256_mul_ps(e8m0_half8(a->e), dx)));
}

static void gemm_x8_mxfp4(int64_t n, const void *w, size_t row_bytes, int64_t n_out, int64_t r0, int64_t r1, const void *x,
                          size_t xs, int64_t n_cols, float *out, int64_t os)
{
    const int64_t nb = n / SIFT_QK_MXFP4, n8 = n_out / 8 * 8;
    for (int64_t c = 0; c < n_cols; c++) {
        const char *xc = (const char *)x + c * xs;
        const sift__block_q8_0 *b = (const sift__block_q8_0 *)xc;
        float *oc = out + c * os; /* row r at oc[r - r0] */
        for (int64_t g = r0 / 8 * 8; g < r1; g += 8) {
            if (g >= n8) { /* the plain rows after the last group */
                for (int64_t r = g > r0 ? g : r0; r < r1; r++) dot_mxfp4_n(n, (const sift__block_mxfp4 *)((const char *)w + r * row_bytes), xc, xs, oc + (r - r0), 1);
                break;
            }
            const sift_block_mxfp4x8 *a = (const sift_block_mxfp4x8 *)((const char *)w + g * row_bytes);
            __m256 acc = _mm256_setzero_ps();
            for (int64_t k = 0; k < nb; k++) acc = mxfp4x8_block(a + k, b + k, acc);
            float v[8];
            _mm256_storeu_ps(v, acc);
            for (int i = 0; i < 8; i++)
                if (g + i >= r0 && g + i < r1) oc[g + i - r0] = v[i];
        }
    }
}

/* ---- Q4_K and Q6_K against Q8_K: tiles (kernels_simd.h) ---------------------------------------------- */

/* 16-bit lanes all holding lane c of a register whose two 128-bit halves both hold eight
 * 16-bit values (vpshufb broadcasts within each half) */
static inline __m256i bcast16(__m256i v, int c)
{
    return _mm256_shuffle_epi8(v, _mm256_set1_epi16((short)(2 * c | (2 * c + 1) << 8)));
}

/* R x C pairs (R, C <= 4) of Q4_K or Q5_K (Q5) rows and Q8_K columns, 32 values (a sub-block)
 * per step: sub-block 2g is the low nibbles of qs[32g..32g+32), 2g+1 the high ones (for Q5_K
 * with bit c of each qh byte as bit 4), against the activation bytes 32c... The two blocks
 * share their header (d, dmin, the twelve scale bytes), so rows are taken as bytes, BB apart
 * per block. */
_Static_assert(offsetof(sift_block_q5_K, d) == offsetof(sift_block_q4_K, d) &&
                   offsetof(sift_block_q5_K, dmin) == offsetof(sift_block_q4_K, dmin) &&
                   offsetof(sift_block_q5_K, scales) == offsetof(sift_block_q4_K, scales),
               "Q4_K and Q5_K blocks share their header");
static inline uint16_t kmin_half(const uint8_t *blk, size_t off)
{
    uint16_t h;
    memcpy(&h, blk + off, sizeof h);
    return h;
}

FORCE_INLINE void kmin_tile(int64_t n, const uint8_t *const *a, const size_t BB, const bool Q5, const sift_block_q8_K *const *b,
                            __m128 *sum, const int R, const int C, const char *pf)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const size_t QS = Q5 ? offsetof(sift_block_q5_K, qs) : offsetof(sift_block_q4_K, qs), D = offsetof(sift_block_q4_K, d),
                 DMIN = offsetof(sift_block_q4_K, dmin);
    UNROLL4 for (int g = 0; g < (R * C + 3) / 4; g++) sum[g] = _mm_setzero_ps();
    for (int64_t k = 0; k < n / SIFT_QK_K; k++) {
        prefetch_span(pf, k, 4 * (int64_t)BB);
        const uint8_t *blk[4];
        UNROLL4 for (int i = 0; i < 4; i++) blk[i] = a[i < R ? i : 0] + k * BB;
        __m256i acc[4][4], sc2[4], mins[4], qh[4];
        UNROLL4 for (int i = 0; i < R; i++) {
            const __m128i sm = q4k_scales_mins((const sift_block_q4_K *)(const void *)blk[i]);
            sc2[i] = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm));
            mins[i] = q4k_mins_pairs(sm);
            if (Q5) qh[i] = _mm256_loadu_si256((const __m256i *)(blk[i] + offsetof(sift_block_q5_K, qh)));
            UNROLL4 for (int j = 0; j < C; j++) acc[i][j] = _mm256_setzero_si256();
        }
        _Pragma("GCC unroll 8") for (int c = 0; c < 8; c++) {
            UNROLL4 for (int i = 0; i < R; i++) {
                const __m256i raw = _mm256_loadu_si256((const __m256i *)(blk[i] + QS + 32 * (c / 2)));
                __m256i q = _mm256_and_si256(c & 1 ? _mm256_srli_epi16(raw, 4) : raw, m4);
                if (Q5) {
                    const __m256i hb = c < 4 ? _mm256_slli_epi16(qh[i], 4 - c) : _mm256_srli_epi16(qh[i], c - 4);
                    q = _mm256_or_si256(q, _mm256_and_si256(hb, _mm256_set1_epi8(0x10)));
                }
                const __m256i s = bcast16(sc2[i], c);
                UNROLL4 for (int j = 0; j < C; j++) {
                    const __m256i xv = _mm256_loadu_si256((const __m256i *)(b[j][k].qs + 32 * c));
                    acc[i][j] = _mm256_add_epi32(acc[i][j], _mm256_madd_epi16(_mm256_maddubs_epi16(q, xv), s));
                }
            }
        }
        const __m128 dw = halves4(kmin_half(blk[0], D), kmin_half(blk[1], D), kmin_half(blk[2], D), kmin_half(blk[3], D));
        const __m128 dmw = halves4(kmin_half(blk[0], DMIN), kmin_half(blk[1], DMIN), kmin_half(blk[2], DMIN), kmin_half(blk[3], DMIN));
        const __m128 dx = _mm_setr_ps(b[0][k].d, b[C > 1][k].d, b[C > 2 ? 2 : 0][k].d, b[C > 3 ? 3 : 0][k].d);
        __m256i bs[4];
        UNROLL4 for (int j = 0; j < C; j++) bs[j] = _mm256_loadu_si256((const __m256i *)b[j][k].bsums);
        UNROLL4 for (int g = 0; g < (R * C + 3) / 4; g++) {
            __m256i pi[4], pm[4];
            UNROLL4 for (int l = 0; l < 4; l++) {
                const int q = 4 * g + l, i = q / C, j = q % C;
                pi[l] = q < R * C ? acc[i][j] : _mm256_setzero_si256();
                pm[l] = q < R * C ? _mm256_madd_epi16(mins[i], bs[j]) : _mm256_setzero_si256();
            }
            sum[g] = q4k_step(sum[g], reduce4(pi[0], pi[1], pi[2], pi[3]), reduce4(pm[0], pm[1], pm[2], pm[3]),
                              SPREAD_ROWS(dw, g, R, C), SPREAD_ROWS(dmw, g, R, C), SPREAD_COLS(dx, g, R, C));
        }
    }
}

FORCE_INLINE void q4_K_tile(int64_t n, const sift_block_q4_K *const *a, const sift_block_q8_K *const *b, __m128 *sum,
                            const int R, const int C, const char *pf)
{
    const uint8_t *rows[4];
    UNROLL4 for (int i = 0; i < R; i++) rows[i] = (const uint8_t *)a[i];
    kmin_tile(n, rows, sizeof(sift_block_q4_K), false, b, sum, R, C, pf);
}

/* One block of one pair: the scale-weighted products (eight int32 partial sums, returned)
 * and the mins against the activation sums (eight, in *pm). */
FORCE_INLINE __m256i q4_K_block1(const sift_block_q4_K *a, const sift_block_q8_K *b, __m256i *pm)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m128i sm = q4k_scales_mins(a);
    const __m256i sc2 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm));
    *pm = _mm256_madd_epi16(q4k_mins_pairs(sm), _mm256_loadu_si256((const __m256i *)b->bsums));
    __m256i acc = _mm256_setzero_si256();
    UNROLL4 for (int g = 0; g < 4; g++) {
        const __m256i raw = _mm256_loadu_si256((const __m256i *)(a->qs + 32 * g));
        const __m256i lo = _mm256_and_si256(raw, m4), hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
        const __m256i x0 = _mm256_loadu_si256((const __m256i *)(b->qs + 64 * g));
        const __m256i x1 = _mm256_loadu_si256((const __m256i *)(b->qs + 64 * g + 32));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(lo, x0), bcast16(sc2, 2 * g)));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(hi, x1), bcast16(sc2, 2 * g + 1)));
    }
    return acc;
}

/* One row against one column (SIFT__ONE_Q4_K in kernels_simd.h). */
SIFT__ONE_Q4_K(__m256i, _mm256_setzero_si256(), reduce4)

SIFT__GEMM_K(q4_K, sift_block_q4_K, 2)

/* Q5_K: Q4_K's layout plus a fifth bit per value, bit c of qh[i] for value i of sub-block c.
 * The values are 0..31, so vpmaddubsw's pairs stay far inside 16 bits (2 x 31 x 128). */

/* sub-block c's 32 values: its nibbles (the low ones of qs[32(c/2)..] for even c, the high
 * ones for odd c) with bit c of each qh byte moved to bit 4 */
static inline __m256i q5_K_values(const sift_block_q5_K *a, __m256i qh, int c)
{
    const __m256i raw = _mm256_loadu_si256((const __m256i *)(a->qs + 32 * (c / 2)));
    const __m256i nib = _mm256_and_si256(c & 1 ? _mm256_srli_epi16(raw, 4) : raw, _mm256_set1_epi8(0x0F));
    const __m256i hb = c < 4 ? _mm256_slli_epi16(qh, 4 - c) : _mm256_srli_epi16(qh, c - 4);
    return _mm256_or_si256(nib, _mm256_and_si256(hb, _mm256_set1_epi8(0x10)));
}

/* R x C pairs of Q5_K rows and Q8_K columns (kmin_tile: q4_K_tile's order of operations, so
 * the float steps are the scalar kernel's) */
FORCE_INLINE void q5_K_tile(int64_t n, const sift_block_q5_K *const *a, const sift_block_q8_K *const *b, __m128 *sum,
                            const int R, const int C, const char *pf)
{
    const uint8_t *rows[4];
    UNROLL4 for (int i = 0; i < R; i++) rows[i] = (const uint8_t *)a[i];
    kmin_tile(n, rows, sizeof(sift_block_q5_K), true, b, sum, R, C, pf);
}

/* One block of one pair, as q4_K_block1. */
FORCE_INLINE __m256i q5_K_block1(const sift_block_q5_K *a, const sift_block_q8_K *b, __m256i *pm)
{
    const __m128i sm = q4k_scales_mins((const sift_block_q4_K *)(const void *)a);
    const __m256i sc2 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm));
    const __m256i qh = _mm256_loadu_si256((const __m256i *)a->qh);
    *pm = _mm256_madd_epi16(q4k_mins_pairs(sm), _mm256_loadu_si256((const __m256i *)b->bsums));
    __m256i acc = _mm256_setzero_si256();
    _Pragma("GCC unroll 8") for (int c = 0; c < 8; c++) {
        const __m256i xv = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * c));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(q5_K_values(a, qh, c), xv), bcast16(sc2, c)));
    }
    return acc;
}

SIFT__ONE_KMIN(q5_K, sift_block_q5_K, __m256i, _mm256_setzero_si256(), reduce4)

SIFT__GEMM_K(q5_K, sift_block_q5_K, 2)

/* ---- Q4_K in the x8 layout (repack.h): eight rows in the eight lanes ----------------------------- */

#ifndef SIFT_X8_CT
#define SIFT_X8_CT 4
#endif
/* Generation streams the groups front to back, one block of eight rows (1152 bytes) per
 * step: asking for the lines two blocks ahead took it from ~12.8 to ~10.1 ns per row-block
 * (huge pages, thread CPU time), near this machine's plain read rate. */
#ifndef SIFT_X8_PF
#define SIFT_X8_PF 2304
#endif

/* The 6-bit scales and mins of an x8 block as bytes 8j + r (row r, sub-block j): sub-blocks
 * 0-3 in *sc03 / *m03, 4-7 in *sc47 / *m47 (sl, ml hold the low four bits, hi the top two). */
FORCE_INLINE void q4kx8_scales(const sift_block_q4_Kx8 *a, __m256i *sc03, __m256i *sc47, __m256i *m03, __m256i *m47)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
    const __m256i l = _mm256_loadu_si256((const __m256i *)a->sl), ml = _mm256_loadu_si256((const __m256i *)a->ml);
    const __m256i h = _mm256_loadu_si256((const __m256i *)a->hi);
    /* (16-bit shifts: the bits carried in from the neighbouring byte fall outside 0x30) */
    *sc03 = _mm256_or_si256(_mm256_and_si256(l, m4), _mm256_and_si256(_mm256_slli_epi16(h, 4), m30));
    *sc47 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l, 4), m4), _mm256_and_si256(_mm256_slli_epi16(h, 2), m30));
    *m03 = _mm256_or_si256(_mm256_and_si256(ml, m4), _mm256_and_si256(h, m30));
    *m47 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ml, 4), m4), _mm256_and_si256(_mm256_srli_epi16(h, 2), m30));
}

/* Sub-block j's scales (j = 4 * (v is sc47) + q) as 32-bit lanes (sc, sc) in 16 bits, row r
 * in lane r: vpmaddwd with a lane's two 16-bit partial sums scales both. */
static inline __m256i q4kx8_scale(__m256i v, int q)
{
    const __m256i rep = _mm256_permutevar8x32_epi32(v, _mm256_setr_epi32(2 * q, 2 * q + 1, 2 * q, 2 * q + 1, 2 * q, 2 * q + 1, 2 * q, 2 * q + 1));
    return _mm256_shuffle_epi8(rep, _mm256_setr_epi8(0, -1, 0, -1, 1, -1, 1, -1, 2, -1, 2, -1, 3, -1, 3, -1, 4, -1, 4, -1, 5, -1, 5,
                                                     -1, 6, -1, 6, -1, 7, -1, 7, -1));
}

/* The mins of sub-blocks 2p and 2p+1 as 32-bit lanes (m[2p][r], m[2p+1][r]) in 16 bits (v is
 * m03 for p < 2, m47 else; h = p % 2), for vpmaddwd with the pair's activation sums. */
static inline __m256i q4kx8_mins(__m256i v, int h)
{
    const int b = 4 * h;
    const __m256i rep = _mm256_permutevar8x32_epi32(v, _mm256_setr_epi32(b, b + 1, b + 2, b + 3, b, b + 1, b + 2, b + 3));
    return _mm256_shuffle_epi8(rep, _mm256_setr_epi8(0, -1, 8, -1, 1, -1, 9, -1, 2, -1, 10, -1, 3, -1, 11, -1, 4, -1, 12, -1, 5, -1, 13,
                                                     -1, 6, -1, 14, -1, 7, -1, 15, -1));
}

/* four activation bytes in every 32-bit lane */
static inline __m256i bcast4(const int8_t *p)
{
    int32_t v;
    memcpy(&v, p, sizeof v);
    return _mm256_set1_epi32(v);
}

/* Eight rows (one group, nb x8 blocks of BB bytes: Q4_K's, or with Q5 Q5_K's) x C columns:
 * sum[j] lane r = row r against column j. Per sub-block and column the eight vpmaddubsw results are summed in 16 bits (each at most
 * 2 * 15 * 128 = 3840 in magnitude, eight of them 30720: exact) before the one vpmaddwd by
 * the scale; the block's integer sums are then the scalar code's, and each lane does the
 * scalar float step. */
FORCE_INLINE void kx8_tile(int64_t nb, const uint8_t *a, const size_t BB, const bool Q5, const sift_block_q8_K *const *b,
                           __m256 *sum, const int C)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F), m10 = _mm256_set1_epi8(0x10);
    UNROLL4 for (int j = 0; j < C; j++) sum[j] = _mm256_setzero_ps();
    for (int64_t k = 0; k < nb; k++) {
        const sift_block_q4_Kx8 *blk = (const sift_block_q4_Kx8 *)(const void *)(a + k * BB);
        const uint8_t *qh = a + k * BB + sizeof *blk; /* (Q5: sift_block_q5_Kx8's qh) */
#if SIFT_X8_PF
        if (C == 1) /* (generation; two blocks ahead) */
            for (int l = 0; l < (int)BB; l += 64)
                _mm_prefetch((const char *)blk + SIFT_X8_PF / sizeof *blk * BB + l, _MM_HINT_T0);
#endif
        __m256i sc03, sc47, m03, m47, acc[4], scv[8];
        q4kx8_scales(blk, &sc03, &sc47, &m03, &m47);
        _Pragma("GCC unroll 8") for (int s = 0; s < 8; s++) scv[s] = q4kx8_scale(s < 4 ? sc03 : sc47, s % 4);
        UNROLL4 for (int j = 0; j < C; j++) acc[j] = _mm256_setzero_si256();
        _Pragma("GCC unroll 1") for (int s = 0; s < 8; s++) {
            __m256i p16[4];
            const __m256i hq = Q5 ? _mm256_loadu_si256((const __m256i *)(qh + 32 * s)) : m4;
            UNROLL4 for (int t = 0; t < 4; t++) {
                const __m256i raw = _mm256_loadu_si256((const __m256i *)(blk->qs + 32 * (4 * s + t)));
                __m256i lo = _mm256_and_si256(raw, m4), hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
                if (Q5) { /* fifth bits: bit t of hq for lo, bit 4 + t for hi, to bit 4 (16-bit shifts: what
                           * crosses from the neighbouring byte falls outside 0x10) */
                    lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16(hq, 4 - t), m10));
                    hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_srli_epi16(hq, t), m10));
                }
                UNROLL4 for (int j = 0; j < C; j++) {
                    const int8_t *xq = b[j][k].qs + 32 * s + 4 * t;
                    const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(lo, bcast4(xq)), _mm256_maddubs_epi16(hi, bcast4(xq + 16)));
                    p16[j] = t % (Q5 ? 2 : 4) ? _mm256_add_epi16(p16[j], p) : p;
                }
                /* Q5_K's values reach 31: two steps (4 x 2 x 31 x 128 = 31744) fit in 16 bits, four not */
                if (Q5 && t == 1)
                    UNROLL4 for (int j = 0; j < C; j++) acc[j] = _mm256_add_epi32(acc[j], _mm256_madd_epi16(p16[j], scv[s]));
            }
            UNROLL4 for (int j = 0; j < C; j++) acc[j] = _mm256_add_epi32(acc[j], _mm256_madd_epi16(p16[j], scv[s]));
        }
        const __m256i mp0 = q4kx8_mins(m03, 0), mp1 = q4kx8_mins(m03, 1), mp2 = q4kx8_mins(m47, 0), mp3 = q4kx8_mins(m47, 1);
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)blk->d));
        const __m256 dmw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)blk->dmin));
        UNROLL4 for (int j = 0; j < C; j++) {
            /* bsums[2i] + bsums[2i+1] for the eight sub-blocks i, then each pair of them in every lane */
            const __m128i bs = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)b[j][k].bsums),
                                              _mm_loadu_si128((const __m128i *)(b[j][k].bsums + 8)));
            const __m256i bsw = _mm256_castsi128_si256(bs);
            __m256i summ = _mm256_madd_epi16(mp0, _mm256_permutevar8x32_epi32(bsw, _mm256_set1_epi32(0)));
            summ = _mm256_add_epi32(summ, _mm256_madd_epi16(mp1, _mm256_permutevar8x32_epi32(bsw, _mm256_set1_epi32(1))));
            summ = _mm256_add_epi32(summ, _mm256_madd_epi16(mp2, _mm256_permutevar8x32_epi32(bsw, _mm256_set1_epi32(2))));
            summ = _mm256_add_epi32(summ, _mm256_madd_epi16(mp3, _mm256_permutevar8x32_epi32(bsw, _mm256_set1_epi32(3))));
            const __m256 dx = _mm256_set1_ps(b[j][k].d);
            const __m256 d = _mm256_mul_ps(dw, dx), dmin = _mm256_mul_ps(dmw, dx);
            sum[j] = _mm256_add_ps(sum[j], _mm256_sub_ps(_mm256_mul_ps(d, _mm256_cvtepi32_ps(acc[j])),
                                                         _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(summ))));
        }
    }
}

FORCE_INLINE void q4_Kx8_tile(int64_t nb, const sift_block_q4_Kx8 *a, const sift_block_q8_K *const *b, __m256 *sum, const int C)
{
    kx8_tile(nb, (const uint8_t *)a, sizeof *a, false, b, sum, C);
}

/* Q5_K's x8 blocks: Q4_K's plus the fifth bits (repack.h), the same steps with the bit or-ed in */
FORCE_INLINE void q5_Kx8_tile(int64_t nb, const sift_block_q5_Kx8 *a, const sift_block_q8_K *const *b, __m256 *sum, const int C)
{
    kx8_tile(nb, (const uint8_t *)a, sizeof *a, true, b, sum, C);
}


/* An 8 x 8 transpose of 32-bit words: w[t] lane r = q[r] lane t (the quants of the x8
 * layouts: word t of the eight rows side by side). */
FORCE_INLINE void transpose8_words(const __m256i q[8], __m256i w[8])
{
    __m256i t[8], u[8];
    for (int r = 0; r < 8; r += 2) {
        t[r] = _mm256_unpacklo_epi32(q[r], q[r + 1]);
        t[r + 1] = _mm256_unpackhi_epi32(q[r], q[r + 1]);
    }
    for (int h = 0; h < 8; h += 4) { /* u[h + i]: words i and 4 + i of rows h .. h+3 */
        u[h] = _mm256_unpacklo_epi64(t[h], t[h + 2]);
        u[h + 1] = _mm256_unpackhi_epi64(t[h], t[h + 2]);
        u[h + 2] = _mm256_unpacklo_epi64(t[h + 1], t[h + 3]);
        u[h + 3] = _mm256_unpackhi_epi64(t[h + 1], t[h + 3]);
    }
    for (int i = 0; i < 4; i++) { /* w[i]: word i of the eight rows; w[4 + i]: word 4 + i */
        w[i] = _mm256_permute2x128_si256(u[i], u[4 + i], 0x20);
        w[4 + i] = _mm256_permute2x128_si256(u[i], u[4 + i], 0x31);
    }
}

/* The packing of repack.h with vector shuffles (the load does it once per model, over every
 * Q4_K weight: the scalar packer tripled the time of a load). Quants: the 32-byte chunk g of
 * the eight rows is an 8 x 8 transpose of 32-bit words (word t of row r to lane r of word
 * t), then nibble moves; scales: q4k_scales_mins per row, then an 8 x 16 byte transpose. */
/* (the Q4_K part of block k of eight Q4_K or Q5_K rows, blocks of BB bytes with their qs at QS) */
FORCE_INLINE void kx8_pack(const void *rows, size_t row_bytes, int64_t k, const size_t BB, const size_t QS, sift_block_q4_Kx8 *o)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(0x03);
    {
        const uint8_t *blk[8];
        const sift_block_q4_K *src[8]; /* (the header only: both types share it) */
        for (int r = 0; r < 8; r++) blk[r] = (const uint8_t *)rows + r * row_bytes + k * BB;
        for (int r = 0; r < 8; r++) src[r] = (const sift_block_q4_K *)(const void *)blk[r];
        for (int r = 0; r < 8; r++) o->d[r] = src[r]->d, o->dmin[r] = src[r]->dmin;
        UNROLL4 for (int g = 0; g < 4; g++) {
            __m256i q[8], w[8];
            for (int r = 0; r < 8; r++) q[r] = _mm256_loadu_si256((const __m256i *)(blk[r] + QS + 32 * g));
            transpose8_words(q, w);
            for (int i = 0; i < 4; i++) { /* sub-block 2g: low nibbles; 2g + 1: high nibbles */
                const __m256i a = w[i], c = w[4 + i];
                const __m256i lo = _mm256_or_si256(_mm256_and_si256(a, m4), _mm256_slli_epi16(_mm256_and_si256(c, m4), 4));
                const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 4), m4), _mm256_andnot_si256(m4, c));
                _mm256_storeu_si256((__m256i *)(o->qs + 32 * (4 * (2 * g) + i)), lo);
                _mm256_storeu_si256((__m256i *)(o->qs + 32 * (4 * (2 * g + 1) + i)), hi);
            }
        }
        /* rows' (sc0..7, m0..7) to bytes 8j + r: byte pairs, then words, then dwords */
        __m128i v[8], a[8], b[8];
        for (int r = 0; r < 8; r++) v[r] = q4k_scales_mins(src[r]);
        for (int r = 0; r < 8; r += 2) {
            a[r] = _mm_unpacklo_epi8(v[r], v[r + 1]);     /* sc_j of rows r, r+1 */
            a[r + 1] = _mm_unpackhi_epi8(v[r], v[r + 1]); /* m_j */
        }
        for (int h = 0; h < 2; h++) { /* h = 0: scales, 1: mins; b[4h + ..]: j 0-3 / 4-7 of rows 0-3 / 4-7 */
            b[4 * h] = _mm_unpacklo_epi16(a[h], a[2 + h]);
            b[4 * h + 1] = _mm_unpackhi_epi16(a[h], a[2 + h]);
            b[4 * h + 2] = _mm_unpacklo_epi16(a[4 + h], a[6 + h]);
            b[4 * h + 3] = _mm_unpackhi_epi16(a[4 + h], a[6 + h]);
        }
        __m256i x03[2], x47[2]; /* [scales, mins]: bytes 8j + r, j 0-3 and 4-7 */
        for (int h = 0; h < 2; h++) {
            x03[h] = _mm256_set_m128i(_mm_unpackhi_epi32(b[4 * h], b[4 * h + 2]), _mm_unpacklo_epi32(b[4 * h], b[4 * h + 2]));
            x47[h] = _mm256_set_m128i(_mm_unpackhi_epi32(b[4 * h + 1], b[4 * h + 3]), _mm_unpacklo_epi32(b[4 * h + 1], b[4 * h + 3]));
        }
        const __m256i sl = _mm256_or_si256(_mm256_and_si256(x03[0], m4), _mm256_slli_epi16(_mm256_and_si256(x47[0], m4), 4));
        const __m256i ml = _mm256_or_si256(_mm256_and_si256(x03[1], m4), _mm256_slli_epi16(_mm256_and_si256(x47[1], m4), 4));
        const __m256i top = _mm256_or_si256(
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(x03[0], 4), m3),
                            _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(x47[0], 4), m3), 2)),
            _mm256_or_si256(_mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(x03[1], 4), m3), 4),
                            _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(x47[1], 4), m3), 6)));
        _mm256_storeu_si256((__m256i *)o->sl, sl);
        _mm256_storeu_si256((__m256i *)o->ml, ml);
        _mm256_storeu_si256((__m256i *)o->hi, top);
    }
}

static void x8_pack_q4_K(const void *rows, size_t row_bytes, int64_t nb, void *dst)
{
    for (int64_t k = 0; k < nb; k++)
        kx8_pack(rows, row_bytes, k, sizeof(sift_block_q4_K), offsetof(sift_block_q4_K, qs), (sift_block_q4_Kx8 *)dst + k);
}

/* Q5_K: the Q4_K part as above; the fifth bits as an 8 x 8 transpose of the rows' qh words
 * (word t' of each row in lane r of w[t']: bytes 4r + u hold h[r][4t' + u] in bit s), then
 * bit s of w[t'] to bit t' of byte 32s + 4r + u (repack.h: t' = 4h + t for value 16h + 4t + u). */
static void x8_pack_q5_K(const void *rows, size_t row_bytes, int64_t nb, void *dst)
{
    const __m256i one = _mm256_set1_epi8(1);
    for (int64_t k = 0; k < nb; k++) {
        sift_block_q5_Kx8 *o = (sift_block_q5_Kx8 *)dst + k;
        kx8_pack(rows, row_bytes, k, sizeof(sift_block_q5_K), offsetof(sift_block_q5_K, qs), &o->q4);
        __m256i q[8], w[8];
        for (int r = 0; r < 8; r++)
            q[r] = _mm256_loadu_si256((const __m256i *)((const sift_block_q5_K *)((const char *)rows + r * row_bytes) + k)->qh);
        transpose8_words(q, w);
        for (int s = 0; s < 8; s++) {
            __m256i v = _mm256_setzero_si256();
            for (int t = 0; t < 8; t++) /* (a 16-bit shift right then bit 0 of each byte: its own bit s) */
                v = _mm256_or_si256(v, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(w[t], s), one), t));
            _mm256_storeu_si256((__m256i *)(o->qh + 32 * s), v);
        }
    }
}

/* Groups of eight rows x SIFT_X8_CT columns (NAME##x8_tile over a group's nb x8 blocks of
 * XBLOCK, columns of XACT); a group cut by r0 or r1 is computed whole and stored in part; the
 * plain rows at the end go to the type's plain tiles (gemm_NAME). */
#define X8_GEMM(NAME, XBLOCK, XACT, QK)                                                                              \
    static void gemm_x8_##NAME(int64_t n, const void *w, size_t row_bytes, int64_t n_out, int64_t r0, int64_t r1,     \
                               const void *x, size_t xs, int64_t n_cols, float *out, int64_t os)                    \
    {                                                                                                                \
        const int64_t nb = n / (QK), n8 = n_out / 8 * 8;                                                             \
        for (int64_t g = r0 / 8 * 8; g < r1 && g < n8; g += 8) {                                                     \
            const XBLOCK *a = (const XBLOCK *)((const char *)w + g * row_bytes);                                     \
            const int lo = g < r0 ? (int)(r0 - g) : 0, hi = g + 8 > r1 ? (int)(r1 - g) : 8;                          \
            for (int64_t c = 0; c < n_cols; c += SIFT_X8_CT) {                                                       \
                const int nc = n_cols - c < SIFT_X8_CT ? (int)(n_cols - c) : SIFT_X8_CT;                             \
                const XACT *b[4];                                                                                    \
                for (int j = 0; j < nc; j++) b[j] = (const XACT *)((const char *)x + (c + j) * xs);                  \
                __m256 sum[4];                                                                                       \
                switch (nc) {                                                                                        \
                case 1: NAME##x8_tile(nb, a, b, sum, 1); break;                                                      \
                case 2: NAME##x8_tile(nb, a, b, sum, SIFT_X8_CT < 2 ? SIFT_X8_CT : 2); break;                        \
                case 3: NAME##x8_tile(nb, a, b, sum, SIFT_X8_CT < 3 ? SIFT_X8_CT : 3); break;                        \
                default: NAME##x8_tile(nb, a, b, sum, SIFT_X8_CT < 4 ? SIFT_X8_CT : 4); break;                       \
                }                                                                                                    \
                for (int j = 0; j < nc; j++) {                                                                       \
                    float *o = out + (c + j) * os;                                                                   \
                    if (lo == 0 && hi == 8) {                                                                        \
                        _mm256_storeu_ps(o + (g - r0), sum[j]);                                                      \
                    } else {                                                                                         \
                        float v[8];                                                                                  \
                        _mm256_storeu_ps(v, sum[j]);                                                                 \
                        for (int i = lo; i < hi; i++) o[g + i - r0] = v[i];                                          \
                    }                                                                                                \
                }                                                                                                    \
            }                                                                                                        \
        }                                                                                                            \
        const int64_t t0 = r0 > n8 ? r0 : n8;                                                                        \
        if (t0 < r1) gemm_##NAME(n, (const char *)w + t0 * row_bytes, row_bytes, r1 - t0, x, xs, n_cols, out + (t0 - r0), os); \
    }

X8_GEMM(q4_K, sift_block_q4_Kx8, sift_block_q8_K, SIFT_QK_K)
X8_GEMM(q5_K, sift_block_q5_Kx8, sift_block_q8_K, SIFT_QK_K)

/* ---- Q8_0 in the x8 layout (repack.h): eight rows in the eight lanes ----------------------------- */

/* Eight rows (one group, nb x8 blocks) x C columns: sum[j] lane r = row r against column j.
 * Per step the 32 bytes hold four values of each row; |w| (the unsigned side of vpmaddubsw,
 * made once for the C columns) against the four activation bytes given w's signs, widened
 * to 32 bits by vpmaddwd (a pair's two products reach 2 x 127 x 128: two pairs no longer fit
 * in 16 bits); eight steps give each lane its row's exact block sum, and the eight float
 * steps are the scalar code's. A weight of -128 is exact (|-128| is 128 unsigned); an
 * activation of -128 is not (act_convert makes none: its values are within +-127). */
FORCE_INLINE void q8_0x8_tile(int64_t nb, const sift_block_q8_0x8 *a, const sift__block_q8_0 *const *b, __m256 *sum, const int C)
{
    const __m256i ones = _mm256_set1_epi16(1);
    UNROLL4 for (int j = 0; j < C; j++) sum[j] = _mm256_setzero_ps();
    for (int64_t k = 0; k < nb; k++) {
        const sift_block_q8_0x8 *blk = a + k;
#if SIFT_X8_PF
        if (C == 1) /* (generation) */
            for (int l = 0; l < (int)sizeof *blk; l += 64) _mm_prefetch((const char *)blk + SIFT_X8_PF + l, _MM_HINT_T0);
#endif
        __m256i acc[4];
        UNROLL4 for (int j = 0; j < C; j++) acc[j] = _mm256_setzero_si256();
        _Pragma("GCC unroll 8") for (int t = 0; t < 8; t++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(blk->qs + 32 * t)), qa = _mm256_abs_epi8(q);
            UNROLL4 for (int j = 0; j < C; j++) {
                const __m256i p = _mm256_maddubs_epi16(qa, _mm256_sign_epi8(bcast4(b[j][k].qs + 4 * t), q));
                acc[j] = _mm256_add_epi32(acc[j], _mm256_madd_epi16(p, ones));
            }
        }
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)blk->d));
        UNROLL4 for (int j = 0; j < C; j++) {
            const __m256 dx = _mm256_set1_ps(f16c_to_fp32(b[j][k].d));
            sum[j] = _mm256_add_ps(sum[j], _mm256_mul_ps(_mm256_cvtepi32_ps(acc[j]), _mm256_mul_ps(dw, dx)));
        }
    }
}

X8_GEMM(q8_0, sift_block_q8_0x8, sift__block_q8_0, SIFT_QK8_0)

/* The packing of repack.h: per block, the eight rows' 32 bytes as an 8 x 8 transpose of
 * 32-bit words. */
static void x8_pack_q8_0(const void *rows, size_t row_bytes, int64_t nb, void *dst)
{
    for (int64_t k = 0; k < nb; k++) {
        sift_block_q8_0x8 *o = (sift_block_q8_0x8 *)dst + k;
        __m256i q[8], w[8];
        for (int r = 0; r < 8; r++) {
            const sift__block_q8_0 *src = (const sift__block_q8_0 *)((const char *)rows + r * row_bytes) + k;
            o->d[r] = src->d;
            q[r] = _mm256_loadu_si256((const __m256i *)src->qs);
        }
        transpose8_words(q, w);
        for (int t = 0; t < 8; t++) _mm256_storeu_si256((__m256i *)(o->qs + 32 * t), w[t]);
    }
}

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

/* sub-block scales 8h..8h+7 of a Q6_K block as 16-bit lanes, in both 128-bit halves; chunk c
 * (32 values) of half h takes lanes 2c (its first 16 values) and 2c+1 */
static inline __m256i q6k_scales_half(const int8_t *sc, int h)
{
    return _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(_mm_loadl_epi64((const __m128i *)(sc + 8 * h))));
}

static inline __m256i q6k_chunk_scales(__m256i s8, int c)
{
    const char a = (char)(4 * c), b = (char)(4 * c + 2);
    return _mm256_shuffle_epi8(s8, _mm256_setr_epi8(a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1, b,
                                                    b + 1, b, b + 1, b, b + 1, b, b + 1, b, b + 1, b, b + 1, b, b + 1, b, b + 1));
}

/* R x C pairs of Q6_K rows and Q8_K columns: chunk c (32 values) spans sub-blocks 2c and
 * 2c+1; the -32 of every value folds in through the activation sums before the reduction. */
FORCE_INLINE void q6_K_tile(int64_t n, const sift_block_q6_K *const *a, const sift_block_q8_K *const *b, __m128 *sum,
                            const int R, const int C, const char *pf)
{
    UNROLL4 for (int g = 0; g < (R * C + 3) / 4; g++) sum[g] = _mm_setzero_ps();
    for (int64_t k = 0; k < n / SIFT_QK_K; k++) {
        prefetch_span(pf, k, 4 * (int64_t)sizeof(sift_block_q6_K));
        __m256i acc[4][4];
        UNROLL4 for (int i = 0; i < R; i++) {
            const __m128i sc = _mm_loadu_si128((const __m128i *)a[i][k].scales);
            const __m256i sc16 = _mm256_cvtepi8_epi16(sc);
            UNROLL4 for (int j = 0; j < C; j++) /* the offset first: acc = -32 * sum_sb sc_sb * bsums_sb */
                acc[i][j] = _mm256_sub_epi32(_mm256_setzero_si256(),
                                             _mm256_slli_epi32(_mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)b[j][k].bsums)), 5));
        }
        UNROLL4 for (int h = 0; h < 2; h++) {
            UNROLL4 for (int i = 0; i < R; i++) {
                __m256i q[4];
                unpack_q6_K_half(a[i][k].ql + 64 * h, a[i][k].qh + 32 * h, q);
                const __m256i s8 = q6k_scales_half(a[i][k].scales, h);
                UNROLL4 for (int c = 0; c < 4; c++) {
                    const __m256i s = q6k_chunk_scales(s8, c);
                    UNROLL4 for (int j = 0; j < C; j++) {
                        const __m256i xv = _mm256_loadu_si256((const __m256i *)(b[j][k].qs + 128 * h + 32 * c));
                        acc[i][j] = _mm256_add_epi32(acc[i][j], _mm256_madd_epi16(_mm256_maddubs_epi16(q[c], xv), s));
                    }
                }
            }
        }
        const __m128 dw = halves4(a[0][k].d, a[R > 1][k].d, a[R > 2 ? 2 : 0][k].d, a[R > 3 ? 3 : 0][k].d);
        const __m128 dx = _mm_setr_ps(b[0][k].d, b[C > 1][k].d, b[C > 2 ? 2 : 0][k].d, b[C > 3 ? 3 : 0][k].d);
        UNROLL4 for (int g = 0; g < (R * C + 3) / 4; g++) {
            __m256i pi[4];
            UNROLL4 for (int l = 0; l < 4; l++) {
                const int q = 4 * g + l;
                pi[l] = q < R * C ? acc[q / C][q % C] : _mm256_setzero_si256();
            }
            sum[g] = q6k_step(sum[g], reduce4(pi[0], pi[1], pi[2], pi[3]), SPREAD_ROWS(dw, g, R, C), SPREAD_COLS(dx, g, R, C));
        }
    }
}

FORCE_INLINE __m256i q6_K_block1(const sift_block_q6_K *a, const sift_block_q8_K *b)
{
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)a->scales));
    __m256i acc = _mm256_sub_epi32(_mm256_setzero_si256(),
                                   _mm256_slli_epi32(_mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)b->bsums)), 5));
    UNROLL4 for (int h = 0; h < 2; h++) {
        __m256i q[4];
        unpack_q6_K_half(a->ql + 64 * h, a->qh + 32 * h, q);
        const __m256i s8 = q6k_scales_half(a->scales, h);
        UNROLL4 for (int c = 0; c < 4; c++) {
            const __m256i xv = _mm256_loadu_si256((const __m256i *)(b->qs + 128 * h + 32 * c));
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(q[c], xv), q6k_chunk_scales(s8, c)));
        }
    }
    return acc;
}

SIFT__ONE_Q6_K(__m256i, _mm256_setzero_si256(), reduce4)

SIFT__GEMM_K(q6_K, sift_block_q6_K, 2)

/* ---- Q6_K in the x8 layout (repack.h): eight rows in the eight lanes ----------------------------- */

/* Sub-block j's scales as 32-bit lanes (sc, sc) in 16 bits, row r in lane r (for vpmaddwd) */
static inline __m256i q6kx8_scale(const int8_t *sc, int j)
{
    const __m128i v = _mm_loadl_epi64((const __m128i *)(sc + 8 * j));
    return _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(v, v));
}

/* Eight rows (one group, nb x8 blocks) x C columns: sum[j] lane r = row r against column j.
 * Per step the 32 bytes of ql hold four values of each row of sub-block 2s (low nibbles) and
 * 2s + 1 (high ones), their top bits from qh; each sub-block's vpmaddubsw results of two
 * steps are summed in 16 bits (each at most 2 x 63 x 128 = 16128 in magnitude: two fit)
 * before the vpmaddwd by its scale. The -32 of every value comes off the block's integer sum
 * through the activation sums (32 x sum_j sc_j bsum_j), so each lane holds the scalar
 * code's exact sumi, and does its float step. */
FORCE_INLINE void q6_Kx8_tile(int64_t nb, const sift_block_q6_Kx8 *a, const sift_block_q8_K *const *b, __m256 *sum, const int C)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
    UNROLL4 for (int j = 0; j < C; j++) sum[j] = _mm256_setzero_ps();
    for (int64_t k = 0; k < nb; k++) {
        const sift_block_q6_Kx8 *blk = a + k;
#if SIFT_X8_PF
        if (C == 1) /* (generation; two blocks ahead) */
            for (int l = 0; l < (int)sizeof *blk; l += 64) _mm_prefetch((const char *)blk + 2 * sizeof *blk + l, _MM_HINT_T0);
#endif
        __m256i acc[4];
        UNROLL4 for (int j = 0; j < C; j++) acc[j] = _mm256_setzero_si256();
        _Pragma("GCC unroll 1") for (int s = 0; s < 8; s++) {
            const __m256i sc_lo = q6kx8_scale(blk->sc, 2 * s), sc_hi = q6kx8_scale(blk->sc, 2 * s + 1);
            UNROLL4 for (int p = 0; p < 2; p++) {
                const __m256i hq = _mm256_loadu_si256((const __m256i *)(blk->qh + 32 * (2 * s + p)));
                __m256i plo[4], phi[4];
                UNROLL4 for (int e = 0; e < 2; e++) {
                    const int t = 2 * p + e;
                    const __m256i raw = _mm256_loadu_si256((const __m256i *)(blk->ql + 32 * (4 * s + t)));
                    /* (16-bit shifts: what crosses from the neighbouring byte falls outside 0x30) */
                    const __m256i lo = _mm256_or_si256(_mm256_and_si256(raw, m4),
                                                       _mm256_and_si256(e ? hq : _mm256_slli_epi16(hq, 4), m30));
                    const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(raw, 4), m4),
                                                       _mm256_and_si256(e ? _mm256_srli_epi16(hq, 2) : _mm256_slli_epi16(hq, 2), m30));
                    UNROLL4 for (int j = 0; j < C; j++) {
                        const int8_t *xq = b[j][k].qs + 32 * s + 4 * t;
                        const __m256i pl = _mm256_maddubs_epi16(lo, bcast4(xq)), ph = _mm256_maddubs_epi16(hi, bcast4(xq + 16));
                        plo[j] = e ? _mm256_add_epi16(plo[j], pl) : pl;
                        phi[j] = e ? _mm256_add_epi16(phi[j], ph) : ph;
                    }
                }
                UNROLL4 for (int j = 0; j < C; j++)
                    acc[j] = _mm256_add_epi32(acc[j], _mm256_add_epi32(_mm256_madd_epi16(plo[j], sc_lo), _mm256_madd_epi16(phi[j], sc_hi)));
            }
        }
        /* sum_j sc_j bsum_j: pairs (sc_2i, sc_2i+1) of each row against (bsum_2i, bsum_2i+1) */
        __m256i scp[8];
        _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++)
            scp[i] = _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(_mm_loadl_epi64((const __m128i *)(blk->sc + 16 * i)),
                                                            _mm_loadl_epi64((const __m128i *)(blk->sc + 16 * i + 8))));
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)blk->d));
        UNROLL4 for (int j = 0; j < C; j++) {
            __m256i summ = _mm256_setzero_si256();
            _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++)
                summ = _mm256_add_epi32(summ, _mm256_madd_epi16(scp[i], bcast4((const int8_t *)(b[j][k].bsums + 2 * i))));
            const __m256i isum = _mm256_sub_epi32(acc[j], _mm256_slli_epi32(summ, 5));
            sum[j] = _mm256_add_ps(sum[j], _mm256_mul_ps(_mm256_mul_ps(dw, _mm256_set1_ps(b[j][k].d)), _mm256_cvtepi32_ps(isum)));
        }
    }
}

X8_GEMM(q6_K, sift_block_q6_Kx8, sift_block_q8_K, SIFT_QK_K)

/* The packing of repack.h: per 32-value group s, the eight rows' values (unpack_q6_K_half) as
 * an 8 x 8 transpose of 32-bit words (word t' of row r to lane r: values 4t' .. 4t' + 3 of the
 * group), then the nibbles and the top bits of words t and t + 4 into ql and qh. */
static void x8_pack_q6_K(const void *rows, size_t row_bytes, int64_t nb, void *dst)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(0x03);
    for (int64_t k = 0; k < nb; k++) {
        const sift_block_q6_K *src[8];
        for (int r = 0; r < 8; r++) src[r] = (const sift_block_q6_K *)((const char *)rows + r * row_bytes) + k;
        sift_block_q6_Kx8 *o = (sift_block_q6_Kx8 *)dst + k;
        for (int r = 0; r < 8; r++) {
            o->d[r] = src[r]->d;
            for (int j = 0; j < 16; j++) o->sc[8 * j + r] = src[r]->scales[j];
        }
        for (int h = 0; h < 2; h++) {
            __m256i v[8][4];
            for (int r = 0; r < 8; r++) unpack_q6_K_half(src[r]->ql + 64 * h, src[r]->qh + 32 * h, v[r]);
            for (int m = 0; m < 4; m++) {
                const int g = 4 * h + m;
                __m256i q[8], w[8];
                for (int r = 0; r < 8; r++) q[r] = v[r][m];
                transpose8_words(q, w);
                for (int t = 0; t < 4; t++)
                    _mm256_storeu_si256((__m256i *)(o->ql + 32 * (4 * g + t)),
                                        _mm256_or_si256(_mm256_and_si256(w[t], m4), _mm256_slli_epi16(_mm256_and_si256(w[t + 4], m4), 4)));
                for (int p = 0; p < 2; p++) {
                    __m256i hb = _mm256_setzero_si256();
                    for (int e = 0; e < 2; e++) { /* (values < 64: the 16-bit shifts move no bit across bytes) */
                        const __m256i lo = _mm256_and_si256(_mm256_srli_epi16(w[2 * p + e], 4), m3);
                        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(w[2 * p + e + 4], 4), m3);
                        hb = _mm256_or_si256(hb, _mm256_slli_epi16(_mm256_or_si256(lo, _mm256_slli_epi16(hi, 2)), 4 * e));
                    }
                    _mm256_storeu_si256((__m256i *)(o->qh + 32 * (2 * g + p)), hb);
                }
            }
        }
    }
}

/* ---- one column, many rows (generation) --------------------------------------------------------- */

SIFT__ROWS(dot_f32, float)
SIFT__ROWS(dot_f16, uint16_t)
SIFT__ROWS(dot_q4_0, sift__block_q4_0)
SIFT__ROWS(dot_mxfp4, sift__block_mxfp4)

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

void sift__kernels_init_avx2(sift__kernels *k)
{
    k->dot[SIFT_TYPE_F32] = dot_f32;
    k->dot[SIFT_TYPE_F16] = dot_f16;
    k->dot[SIFT_TYPE_BF16] = dot_bf16;
    k->dot[SIFT_TYPE_Q8_0] = dot_q8_0;
    k->dot[SIFT_TYPE_Q4_0] = dot_q4_0;
    k->dot[SIFT_TYPE_MXFP4] = dot_mxfp4;
    k->dot[SIFT_TYPE_Q4_K] = dot_q4_K;
    k->dot[SIFT_TYPE_Q5_K] = dot_q5_K;
    k->dot[SIFT_TYPE_Q6_K] = dot_q6_K;
    k->rows[SIFT_TYPE_F32] = rows_dot_f32;
    k->rows[SIFT_TYPE_F16] = rows_dot_f16;
    k->rows[SIFT_TYPE_BF16] = rows_bf16;
    k->gemm[SIFT_TYPE_BF16] = gemm_bf16;
    k->rows[SIFT_TYPE_Q8_0] = rows_q8_0;
    k->rows[SIFT_TYPE_Q4_0] = rows_dot_q4_0;
    k->rows[SIFT_TYPE_MXFP4] = rows_dot_mxfp4;
    k->rows_huge[SIFT_TYPE_MXFP4] = rows_huge_mxfp4;
    k->rows[SIFT_TYPE_Q4_K] = rows_q4_K;
    k->rows[SIFT_TYPE_Q5_K] = rows_q5_K;
    k->rows[SIFT_TYPE_Q6_K] = rows_q6_K;
    k->gemm[SIFT_TYPE_Q8_0] = gemm_q8_0;
    k->gemm[SIFT_TYPE_Q4_0] = gemm_q4_0;
    k->gemm[SIFT_TYPE_Q4_K] = gemm_q4_K;
    k->gemm[SIFT_TYPE_Q5_K] = gemm_q5_K;
    k->gemm[SIFT_TYPE_Q6_K] = gemm_q6_K;
    k->rows_huge[SIFT_TYPE_Q8_0] = rows_q8_0;
    k->rows_huge[SIFT_TYPE_Q4_0] = rows_huge_q4_0;
    k->gemm_x8[SIFT_TYPE_Q4_K] = gemm_x8_q4_K;
    k->x8_pack[SIFT_TYPE_Q4_K] = x8_pack_q4_K;
    k->gemm_x8[SIFT_TYPE_Q5_K] = gemm_x8_q5_K;
    k->x8_pack[SIFT_TYPE_Q5_K] = x8_pack_q5_K;
    k->gemm_x8[SIFT_TYPE_Q6_K] = gemm_x8_q6_K;
    k->x8_pack[SIFT_TYPE_Q6_K] = x8_pack_q6_K;
    k->gemm_x8[SIFT_TYPE_MXFP4] = gemm_x8_mxfp4;
    k->x8_pack[SIFT_TYPE_MXFP4] = sift__mxfp4_x8_pack_group;
    k->gemm_x8[SIFT_TYPE_Q8_0] = gemm_x8_q8_0;
    k->x8_pack[SIFT_TYPE_Q8_0] = x8_pack_q8_0;
    k->act_convert = act_convert;
    k->attn_scores = attn_scores;
    k->softmax_exp = softmax_exp;
    k->max = vmax;
    k->swiglu = swiglu;
}
