/*
 * kernels_avx512_q0.h - the AVX-512 Q8_0 and Q4_0 kernels (against Q8_0 activations), written
 * once for the two files that instantiate them: kernels_avx512.c (plain AVX-512BW, products
 * by vpmaddubsw + vpmaddwd) and kernels_avx512vnni.c (AVX-512 VNNI, products by vpdpbusd).
 * Everything but the byte products is the same text, so the two are bit for bit the same
 * (and the scalar code's): the products are exact integer sums either way.
 *
 * The including file defines, before including this header, three always-inline functions
 * that say how a pair's 64 byte products become sixteen int32 partial sums (lanes 0-7 the
 * first block's, 8-15 the second's):
 *   __m512i x_prep(__m512i x)       an activation register, prepared once per column and step
 *   __m512i w_aux(__m512i w)        what a weight register needs besides itself, once per row
 *   __m512i pair_products(__m512i w, __m512i aux, __m512i xp)
 * The split exists for VNNI: vpdpbusd multiplies unsigned by signed bytes, so the activations
 * are offset to unsigned once per column (x + 128) and each weight row carries the offset's
 * correction (-128 * its four-byte sums) once for all its columns, leaving one instruction
 * per pair. The plain file's x_prep and w_aux are the identity.
 *
 * Included once per file, after kernels_simd.h; instantiates gemm_q8_0, dot_q8_0,
 * rows_dot_q8_0 and the same for q4_0 (static).
 */
#ifndef SIFT_MODEL_KERNELS_AVX512_Q0_H
#define SIFT_MODEL_KERNELS_AVX512_Q0_H

#if !defined(__AVX512BW__) || !defined(__AVX512VL__)
#error "model/kernels_avx512_q0.h is for the AVX-512 files"
#endif

/* One pair's products from unprepared registers (the one-row kernels, where nothing is shared). */
FORCE_INLINE __m512i products1(__m512i w, __m512i x)
{
    return pair_products(w, w_aux(w), x_prep(x));
}

/* ---- Q8_0 and Q4_0 against Q8_0, two blocks per register ------------------------------------------- */

/* A (weight row, activation row) pair's dot product is, as in the scalar code,
 *     sum over blocks k of  (float)isum_k * (d_w,k * d_x,k),  accumulated in float in block order,
 * where isum_k is the exact integer sum of the block's 32 byte products. The products are
 * cheap (vpmaddubsw + vpmaddwd: one register of 16 int32 partial sums per pair for two
 * blocks); reducing each block to its isum was not: a horizontal sum per block and per
 * pair cost more than everything else. So pairs go four at a time: four registers of
 * partial sums are reduced together (reduce4x2: 8 block sums in 12 instructions), and the
 * float steps of the four pairs run in the four lanes of one register, each lane doing
 * exactly the scalar code's operations in its order (bit for bit the scalar result).
 *
 * The four pairs are one weight row against four activation rows (tokens of a batch: the
 * weight row is loaded and unpacked once for four tokens) or four weight rows against one
 * activation row (generation: the rows kernel). */

/* The two blocks' 64 values as signed bytes (the second block zero when there is none). */
static inline __m512i w2_q8_0(const sift__block_q8_0 *a, int64_t k, bool two)
{
    const __m256i lo = _mm256_loadu_si256((const __m256i *)a[k].qs);
    return two ? _mm512_inserti64x4(_mm512_castsi256_si512(lo), _mm256_loadu_si256((const __m256i *)a[k + 1].qs), 1)
               : _mm512_zextsi256_si512(lo);
}

static inline __m512i w2_q4_0(const sift__block_q4_0 *a, int64_t k, bool two)
{
    const __m256i lo = unpack_q4_0(a[k].qs);
    return two ? _mm512_inserti64x4(_mm512_castsi256_si512(lo), unpack_q4_0(a[k + 1].qs), 1) : _mm512_zextsi256_si512(lo);
}

static inline __m512i x2_q8_0(const sift__block_q8_0 *b, bool two)
{
    return w2_q8_0(b, 0, two);
}

/* The exact block sums of four pairs' partial sums p0..p3: lane i of the result is pair
 * i's first block, lane 4 + i its second. */
static inline __m256i reduce4x2(__m512i p0, __m512i p1, __m512i p2, __m512i p3)
{
    const __m512i a = _mm512_add_epi32(_mm512_unpacklo_epi32(p0, p1), _mm512_unpackhi_epi32(p0, p1));
    const __m512i b = _mm512_add_epi32(_mm512_unpacklo_epi32(p2, p3), _mm512_unpackhi_epi32(p2, p3));
    /* c: in each 128-bit lane L, the four pairs' sums over L; block 1 = L0 + L1, block 2 = L2 + L3 */
    const __m512i c = _mm512_add_epi32(_mm512_unpacklo_epi64(a, b), _mm512_unpackhi_epi64(a, b));
    const __m512i d = _mm512_add_epi32(_mm512_shuffle_i32x4(c, c, _MM_SHUFFLE(3, 1, 2, 0)),
                                       _mm512_shuffle_i32x4(c, c, _MM_SHUFFLE(2, 0, 3, 1)));
    return _mm512_castsi512_si256(d);
}

/* sum += isum * (dw * dx), lanes 0-3 (the first block) then 4-7 (the second, if any): the
 * scalar code's two float operations per block, per lane. */
static inline __m128 accumulate2(__m128 sum, __m256i isum, __m256 dw, __m256 dx, bool two)
{
    const __m256 t = _mm256_mul_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dw, dx));
    sum = _mm_add_ps(sum, _mm256_castps256_ps128(t));
    return two ? _mm_add_ps(sum, _mm256_extractf128_ps(t, 1)) : sum;
}

/* Eight halves (the scales of blocks k and k+1 of four rows: a0 b0 c0 d0 a1 b1 c1 d1) as floats. */
static inline __m256 scales8(uint16_t a0, uint16_t b0, uint16_t c0, uint16_t d0, uint16_t a1, uint16_t b1, uint16_t c1,
                             uint16_t d1)
{
    return _mm256_cvtph_ps(_mm_setr_epi16((short)a0, (short)b0, (short)c0, (short)d0, (short)a1, (short)b1, (short)c1, (short)d1));
}

/* One step (blocks k and k+1, or k alone when !TWO) of the products of R weight rows and C
 * activation rows (R, C <= 4). The R*C pairs are numbered q = i*C + j (row i, column j) and
 * go four to a group: lane l of sum[g] accumulates pair 4g + l. Each weight row's bytes are
 * loaded once for its C pairs, each column's once for its R pairs, and the scales of the
 * rows and of the columns are converted once (one register each) and spread to the pairs'
 * lanes by a permutation. */
#define QX_0_TILE(NAME, WBLOCK)                                                                                      \
    FORCE_INLINE void NAME##_step(const WBLOCK *const *a, const sift__block_q8_0 *const *b, int64_t k, __m128 *sum,    \
                                  const int R, const int C, const bool TWO)                                         \
    {                                                                                                                \
        __m512i xv[4], wv[4], aux[4];                                                                                \
        uint16_t hx[8] = {0}, hw[8] = {0};                                                                           \
        UNROLL4 for (int j = 0; j < C; j++) {                                                                       \
            xv[j] = x_prep(x2_q8_0(b[j] + k, TWO));                                                                  \
            hx[j] = b[j][k].d, hx[4 + j] = TWO ? b[j][k + 1].d : 0;                                                  \
        }                                                                                                            \
        UNROLL4 for (int i = 0; i < R; i++) {                                                                       \
            wv[i] = w2_##NAME(a[i], k, TWO), aux[i] = w_aux(wv[i]);                                                  \
            hw[i] = a[i][k].d, hw[4 + i] = TWO ? a[i][k + 1].d : 0;                                                  \
        }                                                                                                            \
        const __m256 dxv = scales8(hx[0], hx[1], hx[2], hx[3], hx[4], hx[5], hx[6], hx[7]);                         \
        const __m256 dwv = scales8(hw[0], hw[1], hw[2], hw[3], hw[4], hw[5], hw[6], hw[7]);                         \
        UNROLL4 for (int g = 0; g < (R * C + 3) / 4; g++) {                                                         \
            __m512i p[4];                                                                                            \
            int iw[4], ix[4];                                                                                        \
            UNROLL4 for (int l = 0; l < 4; l++) {                                                                   \
                const int q = 4 * g + l;                                                                             \
                iw[l] = q < R * C ? q / C : 0, ix[l] = q < R * C ? q % C : 0;                                        \
                p[l] = q < R * C ? pair_products(wv[q / C], aux[q / C], xv[q % C]) : _mm512_setzero_si512();                         \
            }                                                                                                        \
            const __m256 dw = _mm256_permutevar8x32_ps(                                                              \
                dwv, _mm256_setr_epi32(iw[0], iw[1], iw[2], iw[3], 4 + iw[0], 4 + iw[1], 4 + iw[2], 4 + iw[3]));    \
            const __m256 dx = _mm256_permutevar8x32_ps(                                                              \
                dxv, _mm256_setr_epi32(ix[0], ix[1], ix[2], ix[3], 4 + ix[0], 4 + ix[1], 4 + ix[2], 4 + ix[3]));    \
            sum[g] = accumulate2(sum[g], reduce4x2(p[0], p[1], p[2], p[3]), dw, dx, TWO);                            \
        }                                                                                                            \
    }                                                                                                                \
    /* The whole rows: R x C dot products into lanes of sum[] (numbered as above). */                              \
    FORCE_INLINE void NAME##_tile(int64_t n, const WBLOCK *const *a, const sift__block_q8_0 *const *b, __m128 *sum,    \
                                  const int R, const int C, const char *pf)                                         \
    {                                                                                                                \
        const int64_t nb = n / 32;                                                                                   \
        UNROLL4 for (int g = 0; g < (R * C + 3) / 4; g++) sum[g] = _mm_setzero_ps();                                \
        int64_t k = 0;                                                                                               \
        for (; k + 2 <= nb; k += 2) {                                                                                \
            if (pf) /* the next rows, 4 x 68 bytes per step: 5 lines */                                             \
                for (int l = 0; l < 5; l++) _mm_prefetch(pf + (k / 2) * 320 + 64 * l, _MM_HINT_T0);                 \
            NAME##_step(a, b, k, sum, R, C, true);                                                                   \
        }                                                                                                            \
        if (k < nb) NAME##_step(a, b, k, sum, R, C, false);                                                         \
    }                                                                                                                \
    /* One weight row against one activation row, eight blocks at a time: four block pairs                         \
     * reduced together, their float steps done in order. */                                                        \
    static inline float NAME##_one(int64_t n, const WBLOCK *a, const sift__block_q8_0 *b)                             \
    {                                                                                                                \
        const int64_t nb = n / 32;                                                                                   \
        float sum = 0;                                                                                               \
        int64_t k = 0;                                                                                               \
        for (; k + 8 <= nb; k += 8) {                                                                                \
            __m512i p[4];                                                                                            \
            UNROLL4 for (int i = 0; i < 4; i++) p[i] = products1(w2_##NAME(a, k + 2 * i, true), x2_q8_0(b + k + 2 * i, true)); \
            /* lane i: block k + 2i, lane 4 + i: block k + 2i + 1 */                                                 \
            const __m256 dw = scales8(a[k].d, a[k + 2].d, a[k + 4].d, a[k + 6].d, a[k + 1].d, a[k + 3].d, a[k + 5].d, a[k + 7].d); \
            const __m256 dx = scales8(b[k].d, b[k + 2].d, b[k + 4].d, b[k + 6].d, b[k + 1].d, b[k + 3].d, b[k + 5].d, b[k + 7].d); \
            const __m256 t = _mm256_mul_ps(_mm256_cvtepi32_ps(reduce4x2(p[0], p[1], p[2], p[3])), _mm256_mul_ps(dw, dx)); \
            float tv[8];                                                                                             \
            _mm256_storeu_ps(tv, _mm256_permutevar8x32_ps(t, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));           \
            UNROLL4 for (int i = 0; i < 8; i++) sum += tv[i];                                                        \
        }                                                                                                            \
        for (; k < nb; k += 2) {                                                                                     \
            const bool two = k + 1 < nb;                                                                             \
            const __m256i is = reduce4x2(products1(w2_##NAME(a, k, two), x2_q8_0(b + k, two)), _mm512_setzero_si512(), \
                                         _mm512_setzero_si512(), _mm512_setzero_si512());                            \
            int iv[8];                                                                                               \
            _mm256_storeu_si256((__m256i *)iv, is);                                                                  \
            sum += (float)iv[0] * (f16c_to_fp32(a[k].d) * f16c_to_fp32(b[k].d));                                     \
            if (two) sum += (float)iv[4] * (f16c_to_fp32(a[k + 1].d) * f16c_to_fp32(b[k + 1].d));                    \
        }                                                                                                            \
        return sum;                                                                                                  \
    }                                                                                                                \
    static void dot_##NAME(int64_t n, const void *w, const void *x, size_t xs, int ncols, float *s)                  \
    {                                                                                                                \
        const WBLOCK *a = w;                                                                                         \
        const sift__block_q8_0 *b[4];                                                                                 \
        for (int j = 0; j < ncols; j++) b[j] = (const sift__block_q8_0 *)((const char *)x + j * xs);                \
        __m128 sum;                                                                                                  \
        switch (ncols) {                                                                                             \
        case 1: s[0] = NAME##_one(n, a, b[0]); return;                                                               \
        case 2: NAME##_tile(n, &a, b, &sum, 1, 2, NULL); break;                                                            \
        case 3: NAME##_tile(n, &a, b, &sum, 1, 3, NULL); break;                                                            \
        default: NAME##_tile(n, &a, b, &sum, 1, 4, NULL); break;                                                           \
        }                                                                                                            \
        float out[4];                                                                                                \
        _mm_storeu_ps(out, sum);                                                                                     \
        for (int j = 0; j < ncols; j++) s[j] = out[j];                                                               \
    }                                                                                                                \
    static void rows_dot_##NAME(int64_t n, const void *w, size_t row_bytes, int64_t n_rows, const void *x, float *out) \
    {                                                                                                                \
        for (int64_t r = 0; r < n_rows; r++) out[r] = NAME##_one(n, (const WBLOCK *)((const char *)w + r * row_bytes), x); \
    }                                                                                                                \
    SIFT__GEMM_4X4(NAME, WBLOCK)

QX_0_TILE(q8_0, sift__block_q8_0)
QX_0_TILE(q4_0, sift__block_q4_0)

#endif
