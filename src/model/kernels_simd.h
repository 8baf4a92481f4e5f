/*
 * kernels_simd.h - what the AVX2 and the AVX-512 kernels share: the drivers that turn an
 * inner kernel into a table entry, and the helpers that are the same at both widths.
 * Included only by kernels_avx2.c and kernels_avx512.c, so each copy is compiled with its
 * own file's ISA flags (sift_isa_flags() in cmake/layers.cmake) and entered only after the
 * run-time check of core/cpu.c.
 *
 * The two files differ in their inner kernels (vector width, how blocks are reduced, how
 * tails are masked); the loops around them were the same text twice. A driver is a macro
 * over the inner kernel's name rather than a function taking a kernel pointer because the
 * column and row counts must reach the inner kernel as constants: the always-inline
 * kernels unroll their loops over columns and rows and keep every accumulator in a
 * register only when NC, R and C are compile-time constants. The macros write, in the
 * including file, exactly the functions each file used to write by hand, so the generated
 * code (and every result, bit for bit) is unchanged.
 *
 *   SIFT__DOT_COLS(dot_X)        static void dot_X(n, w, x, xs, ncols, s): one weight row
 *                                against 1..4 activation columns, calling
 *                                dot_X_n(n, w, x, xs, s, NC) with NC = ncols a constant
 *   SIFT__ROWS(dot_X, WT)        static void rows_dot_X(n, w, row_bytes, n_rows, x, out):
 *                                many rows against one column (generation), through dot_X_n
 *   SIFT__GEMM_4X4(X, WBLOCK)    static void gemm_X(...): tiles of 4 weight rows x 4
 *                                activation rows through X_tile(n, a, b, sum, 4, C, pf),
 *                                which leaves pair (i, j) in lane (i*C + j) % 4 of
 *                                sum[(i*C + j) / 4], and prefetches the next four rows from
 *                                pf when it is not NULL
 *   SIFT__GEMM_K(X, WBLOCK, CT)  static void gemm_X(...), dot_X and rows_X for a K-quant
 *                                against Q8_K activations: tiles of 4 weight rows x up to
 *                                CT activation rows through X_tile(n, a, b, sum, R, C, pf)
 *                                (pairs numbered as above); the dot kernel is the tile of one
 *                                row; one row against one column (generation, and the dot
 *                                kernel's one column) is X_one(n, a, b), which reads the row
 *                                front to back: four rows read side by side halved the
 *                                bandwidth from memory that generation lives on, from 4 KiB
 *                                file pages (from weights.c's huge-page copy the tile of four
 *                                rows by one column is faster: kernels_avx512.c's rows_huge)
 */
#ifndef SIFT_MODEL_KERNELS_SIMD_H
#define SIFT_MODEL_KERNELS_SIMD_H

#if !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__)
#error "model/kernels_simd.h is for files compiled with the ISA flags of sift_isa_flags() (kernels_avx2.c, kernels_avx512.c)"
#endif

#include <immintrin.h>
#include <stddef.h>
#include <string.h>

#include "model/kernels.h"

#define FORCE_INLINE static inline __attribute__((always_inline))

/* (the pairs' registers must stay registers: unroll their loops) */
#define UNROLL4 _Pragma("GCC unroll 4")

/* Half -> float with F16C's vcvtph2ps: bit for bit sift__fp16_to_fp32 (NaNs made quiet the
 * same way), but inline, so the kernels' loops make no calls (a call would spill every
 * vector register: that made the Q8_0 kernels three to four times slower). */
static inline float f16c_to_fp32(uint16_t h)
{
    return _cvtsh_ss(h);
}

/* Q4_0: value i of a block is (qs[i] & 15) - 8, value i+16 is (qs[i] >> 4) - 8; the 32
 * values as signed bytes, low nibbles first. */
static inline __m256i unpack_q4_0(const uint8_t *qs)
{
    const __m128i b = _mm_loadu_si128((const __m128i *)qs);
    const __m256i v = _mm256_set_m128i(_mm_srli_epi16(b, 4), b);
    return _mm256_sub_epi8(_mm256_and_si256(v, _mm256_set1_epi8(0x0F)), _mm256_set1_epi8(8));
}

/* Q4_K's twelve packed scale bytes as the eight 6-bit scales and eight 6-bit mins. */
static inline void q4k_scales(const uint8_t *q, int sc[8], int m[8])
{
    for (int j = 0; j < 4; j++) {
        sc[j] = q[j] & 63;
        m[j] = q[j + 4] & 63;
        sc[j + 4] = (q[j + 8] & 0xF) | ((q[j] >> 6) << 4);
        m[j + 4] = (q[j + 8] >> 4) | ((q[j + 4] >> 6) << 4);
    }
}


/* ---- K-quants against Q8_K ------------------------------------------------------------------
 *
 * A (weight row, activation row) pair's dot product is the scalar code's: per 256-value block
 * an exact integer sum (sum_j scale_j * isum_j; Q4_K also sum_j min_j * bsum_j), then one
 * float step, accumulated in block order. The integer work is the vector part; what made the
 * first kernels slow was everything around it, done once per block and per pair: unpacking
 * the scales in scalar code, a horizontal sum, the mins against the activation sums. Here
 * scales are unpacked with a few 32-bit operations per row, the block sums of four pairs
 * are reduced together, and the four pairs' float steps run in the lanes of one register
 * (each lane doing exactly the scalar operations in their order: bit for bit the scalar
 * result). The pairs are a tile of weight rows x activation rows, so a weight row is loaded
 * and unpacked once for all the tile's columns, and a column's scales once for its rows. */

/* Q4_K's twelve packed scale bytes as sixteen: bytes 0-7 the eight 6-bit scales, 8-15 the
 * eight 6-bit mins (the layout of q4k_scales: sc[j] = q[j] & 63 and m[j] = q[j+4] & 63 for
 * j < 4; sc[j+4] takes the low nibble of q[j+8] and the top two bits of q[j], m[j+4] the
 * high nibble of q[j+8] and the top two bits of q[j+4]), in eight vector operations rather
 * than a dozen scalar ones and four inserts (once per row and block: a tenth of a prompt
 * tile's work). The load takes 16 bytes from the 12 scale bytes on: the last four are the
 * block's first qs bytes (inside the block, never used).
 *   a = q[0..3]  q[8..11]  q[4..7]  q[8..11]   (dwords: sc_lo, sc_hi, m_lo, m_hi sources)
 *   b = 0        q[0..3]   0        q[4..7]    (the bytes whose top two bits are sc_hi's, m_hi's)
 *   out = (a >> (0, 0, 0, 4 bits per dword) & (63, 15, 63, 15 per byte)) | ((b >> 2) & 0x30)
 * (a dword shift by 4 brings the next byte's low nibble into a byte's top, which the 15
 * mask drops; b's 16-bit shift by 2 brings the next byte's bits into bits 6-7, which 0x30
 * drops). */
_Static_assert(offsetof(sift_block_q4_K, scales) + 16 <= sizeof(sift_block_q4_K), "q4k_scales_mins reads 16 bytes");
static inline __m128i q4k_scales_mins(const sift_block_q4_K *blk)
{
    const __m128i u = _mm_loadu_si128((const __m128i *)blk->scales);
    const __m128i a = _mm_shuffle_epi8(u, _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11));
    const __m128i b = _mm_shuffle_epi8(u, _mm_setr_epi8(-1, -1, -1, -1, 0, 1, 2, 3, -1, -1, -1, -1, 4, 5, 6, 7));
    const __m128i lo = _mm_and_si128(_mm_srlv_epi32(a, _mm_setr_epi32(0, 0, 0, 4)),
                                     _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f));
    return _mm_or_si128(lo, _mm_and_si128(_mm_srli_epi16(b, 2), _mm_set1_epi8(0x30)));
}

/* The mins of q4k_scales_mins as 16-bit lanes m0 m0 m1 m1 .. m7 m7: vpmaddwd with the sixteen
 * bsums gives eight int32 partial sums of sum_j m_j * (bsums[2j] + bsums[2j+1]). */
static inline __m256i q4k_mins_pairs(__m128i sm)
{
    return _mm256_cvtepu8_epi16(_mm_shuffle_epi8(sm, _mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15)));
}

/* lane i: the sum of p_i's eight int32 lanes */
static inline __m128i reduce4(__m256i p0, __m256i p1, __m256i p2, __m256i p3)
{
    const __m256i c = _mm256_hadd_epi32(_mm256_hadd_epi32(p0, p1), _mm256_hadd_epi32(p2, p3));
    return _mm_add_epi32(_mm256_castsi256_si128(c), _mm256_extracti128_si256(c, 1));
}

/* Four halves as floats. */
static inline __m128 halves4(uint16_t a, uint16_t b, uint16_t c, uint16_t d)
{
    return _mm_cvtph_ps(_mm_setr_epi16((short)a, (short)b, (short)c, (short)d, 0, 0, 0, 0));
}

/* Pair numbering of a tile of R x C pairs: lane l of group g is pair q = 4g + l, row q / C,
 * column q % C (lanes past the last pair use row 0 and column 0; their sums are dropped). */
#define PAIR_ROW(g, l, R, C) (4 * (g) + (l) < (R) * (C) ? (4 * (g) + (l)) / (C) : 0)
#define PAIR_COL(g, l, R, C) (4 * (g) + (l) < (R) * (C) ? (4 * (g) + (l)) % (C) : 0)

/* v[row or column of lane l] for the four lanes of group g (v: one value per row or column) */
#define SPREAD_ROWS(v, g, R, C)                                                                                      \
    _mm_permutevar_ps(v, _mm_setr_epi32(PAIR_ROW(g, 0, R, C), PAIR_ROW(g, 1, R, C), PAIR_ROW(g, 2, R, C), PAIR_ROW(g, 3, R, C)))
#define SPREAD_COLS(v, g, R, C)                                                                                      \
    _mm_permutevar_ps(v, _mm_setr_epi32(PAIR_COL(g, 0, R, C), PAIR_COL(g, 1, R, C), PAIR_COL(g, 2, R, C), PAIR_COL(g, 3, R, C)))

/* The scalar Q4_K float step of four pairs: sum += (dw*dx) * (float)sumi - (dminw*dx) * (float)summ */
static inline __m128 q4k_step(__m128 sum, __m128i sumi, __m128i summ, __m128 dw, __m128 dminw, __m128 dx)
{
    const __m128 d = _mm_mul_ps(dw, dx), dmin = _mm_mul_ps(dminw, dx);
    return _mm_add_ps(sum, _mm_sub_ps(_mm_mul_ps(d, _mm_cvtepi32_ps(sumi)), _mm_mul_ps(dmin, _mm_cvtepi32_ps(summ))));
}

/* The same terms for four consecutive blocks of one pair (X_one): lane l is block l's
 * d*(float)sumi - dmin*(float)summ, which the caller adds in block order. */
static inline __m128 q4k_terms(__m128i sumi, __m128i summ, __m128 dw, __m128 dminw, __m128 dx)
{
    return _mm_sub_ps(_mm_mul_ps(_mm_mul_ps(dw, dx), _mm_cvtepi32_ps(sumi)), _mm_mul_ps(_mm_mul_ps(dminw, dx), _mm_cvtepi32_ps(summ)));
}

/* sum + t[0] + t[1] + ... + t[nt - 1], in that order (the scalar code's float sum over blocks) */
static inline float add_terms(float sum, __m128 t, int nt)
{
    float v[4];
    _mm_storeu_ps(v, t);
    for (int l = 0; l < nt; l++) sum += v[l];
    return sum;
}

/* The scalar Q6_K float step of four pairs: sum += dw * dx * (float)sumi */
static inline __m128 q6k_step(__m128 sum, __m128i sumi, __m128 dw, __m128 dx)
{
    return _mm_add_ps(sum, _mm_mul_ps(_mm_mul_ps(dw, dx), _mm_cvtepi32_ps(sumi)));
}

#ifndef SIFT_PF_DIST
#define SIFT_PF_DIST 2048
#endif
/* Generation streams the weights from memory, a row at a time, from file pages: the
 * hardware prefetcher stops at every 4 KiB page, so the next SIFT_PF_DIST bytes are asked
 * for explicitly, as many lines as are about to be read. */
static inline void prefetch_ahead(const void *p, size_t bytes)
{
    const char *c = (const char *)p + SIFT_PF_DIST;
    for (size_t o = 0; o < bytes; o += 64) _mm_prefetch(c + o, _MM_HINT_T0);
}

/* Prefetch the bytes [k * step, (k + 1) * step) after pf: the next four rows, read at the
 * pace the current four are (four rows read side by side defeat the hardware prefetcher).
 * Always inlined: as a plain static inline, GCC 12 left it a call inside rows_huge_q4_0's and
 * rows_huge_mxfp4's always-inlined row loop, found the function free of side effects (a
 * prefetch has none in its model) and deleted the call, so those loops prefetched nothing.
 * Inlined, the prefetch stays (streaming 96 MiB, ns per row-block of 8 x 2048 on the Zen 3:
 * rows_huge_q4_0 1240-2250 -> 700-740, rows_huge_mxfp4 1220-1460 -> 740-1080). */
FORCE_INLINE void prefetch_span(const char *pf, int64_t k, int64_t step)
{
    if (!pf) return;
    for (int64_t o = (k * step) & ~(int64_t)63; o < (k + 1) * step; o += 64) _mm_prefetch(pf + o, _MM_HINT_T0);
}

#define SIFT__DOT_COLS(NAME)                                                                                         \
    static void NAME(int64_t n, const void *w, const void *x, size_t xs, int ncols, float *s)                        \
    {                                                                                                                \
        switch (ncols) {                                                                                             \
        case 1: NAME##_n(n, w, x, xs, s, 1); break;                                                                  \
        case 2: NAME##_n(n, w, x, xs, s, 2); break;                                                                  \
        case 3: NAME##_n(n, w, x, xs, s, 3); break;                                                                  \
        default: NAME##_n(n, w, x, xs, s, 4); break;                                                                 \
        }                                                                                                            \
    }

#define SIFT__ROWS(NAME, WT)                                                                                         \
    static void rows_##NAME(int64_t n, const void *w, size_t row_bytes, int64_t n_rows, const void *x, float *out)   \
    {                                                                                                                \
        for (int64_t r = 0; r < n_rows; r++) NAME##_n(n, (const WT *)((const char *)w + r * row_bytes), x, 0, out + r, 1); \
    }

/* Fewer than four rows or columns at the edges: the missing rows repeat the last one (their
 * sums are computed and dropped), the missing columns are not computed. The next four rows
 * are prefetched while these are computed: four rows read side by side defeat the hardware
 * prefetcher. */
#define SIFT__GEMM_4X4(NAME, WBLOCK)                                                                                 \
    static void gemm_##NAME(int64_t n, const void *w, size_t row_bytes, int64_t n_rows, const void *x, size_t xs,    \
                            int64_t n_cols, float *out, int64_t os)                                                  \
    {                                                                                                                \
        for (int64_t r = 0; r < n_rows; r += 4) {                                                                    \
            const int nr = n_rows - r < 4 ? (int)(n_rows - r) : 4;                                                   \
            const WBLOCK *a[4];                                                                                      \
            for (int i = 0; i < 4; i++) a[i] = (const WBLOCK *)((const char *)w + (r + (i < nr ? i : nr - 1)) * row_bytes); \
            const char *pf = r + 8 <= n_rows ? (const char *)w + (r + 4) * row_bytes : NULL;                        \
            for (int64_t c = 0; c < n_cols; c += 4) {                                                                \
                const int nc = n_cols - c < 4 ? (int)(n_cols - c) : 4;                                               \
                const sift__block_q8_0 *b[4];                                                                        \
                for (int j = 0; j < nc; j++) b[j] = (const sift__block_q8_0 *)((const char *)x + (c + j) * xs);      \
                __m128 sum[4];                                                                                       \
                switch (nc) {                                                                                        \
                case 1: NAME##_tile(n, a, b, sum, 4, 1, pf); break;                                                  \
                case 2: NAME##_tile(n, a, b, sum, 4, 2, pf); break;                                                  \
                case 3: NAME##_tile(n, a, b, sum, 4, 3, pf); break;                                                  \
                default: NAME##_tile(n, a, b, sum, 4, 4, pf); break;                                                 \
                }                                                                                                    \
                float v[16];                                                                                         \
                for (int g = 0; g < nc; g++) _mm_storeu_ps(v + 4 * g, sum[g]); /* 4 * nc pairs: nc groups */         \
                for (int i = 0; i < nr; i++)                                                                         \
                    for (int j = 0; j < nc; j++) out[(c + j) * os + r + i] = v[i * nc + j];                          \
            }                                                                                                        \
        }                                                                                                            \
    }

/* K-quant tiles: 4 rows x up to CT columns (the last rows repeat as in SIFT__GEMM_4X4), the
 * dot kernel as one row's tile and generation as tiles of 4 rows x 1 column. */
#define SIFT__GEMM_K(NAME, WBLOCK, CT)                                                                               \
    static void gemm_##NAME(int64_t n, const void *w, size_t row_bytes, int64_t n_rows, const void *x, size_t xs,    \
                            int64_t n_cols, float *out, int64_t os)                                                  \
    {                                                                                                                \
        for (int64_t r = 0; r < n_rows; r += 4) {                                                                    \
            const int nr = n_rows - r < 4 ? (int)(n_rows - r) : 4;                                                   \
            const WBLOCK *a[4];                                                                                      \
            for (int i = 0; i < 4; i++) a[i] = (const WBLOCK *)((const char *)w + (r + (i < nr ? i : nr - 1)) * row_bytes); \
            const char *pf = r + 8 <= n_rows ? (const char *)w + (r + 4) * row_bytes : NULL;                        \
            for (int64_t c = 0; c < n_cols; c += CT) {                                                               \
                const int nc = n_cols - c < CT ? (int)(n_cols - c) : CT;                                             \
                const sift_block_q8_K *b[4];                                                                         \
                for (int j = 0; j < nc; j++) b[j] = (const sift_block_q8_K *)((const char *)x + (c + j) * xs);       \
                __m128 sum[4];                                                                                       \
                switch (nc) {                                                                                        \
                case 1: NAME##_tile(n, a, b, sum, 4, 1, pf); break;                                                  \
                case 2: NAME##_tile(n, a, b, sum, 4, 2, pf); break;                                                  \
                case 3: NAME##_tile(n, a, b, sum, 4, CT < 3 ? CT : 3, pf); break;                                    \
                default: NAME##_tile(n, a, b, sum, 4, CT < 4 ? CT : 4, pf); break;                                   \
                }                                                                                                    \
                float v[16];                                                                                         \
                for (int g = 0; g < nc; g++) _mm_storeu_ps(v + 4 * g, sum[g]);                                       \
                for (int i = 0; i < nr; i++)                                                                         \
                    for (int j = 0; j < nc; j++) out[(c + j) * os + r + i] = v[i * nc + j];                          \
            }                                                                                                        \
        }                                                                                                            \
    }                                                                                                                \
    static void dot_##NAME(int64_t n, const void *w, const void *x, size_t xs, int ncols, float *s)                  \
    {                                                                                                                \
        const WBLOCK *a = w;                                                                                         \
        const sift_block_q8_K *b[4];                                                                                 \
        for (int j = 0; j < ncols; j++) b[j] = (const sift_block_q8_K *)((const char *)x + j * xs);                 \
        __m128 sum[1];                                                                                               \
        switch (ncols) {                                                                                             \
        case 1: s[0] = NAME##_one(n, a, b[0]); return;                                                               \
        case 2: NAME##_tile(n, &a, b, sum, 1, 2, NULL); break;                                                       \
        case 3: NAME##_tile(n, &a, b, sum, 1, 3, NULL); break;                                                       \
        default: NAME##_tile(n, &a, b, sum, 1, 4, NULL); break;                                                      \
        }                                                                                                            \
        float v[4];                                                                                                  \
        _mm_storeu_ps(v, sum[0]);                                                                                    \
        for (int j = 0; j < ncols; j++) s[j] = v[j];                                                                 \
    }                                                                                                                \
    static void rows_##NAME(int64_t n, const void *w, size_t row_bytes, int64_t n_rows, const void *x, float *out)   \
    {                                                                                                                \
        for (int64_t r = 0; r < n_rows; r++) out[r] = NAME##_one(n, (const WBLOCK *)((const char *)w + r * row_bytes), x); \
    }

/* The one-column K-quant loops (generation): one row read front to back, four blocks reduced
 * together, their float terms added in block order, so the result is the scalar kernel's.
 * Each ISA file names its block-sum vector type VEC, its zero and REDUCE, the reduction of
 * four VECs to four int32 lanes; block1 / terms / step helpers are the file's own. */
#define SIFT__ONE_Q4_K(VEC, ZERO, REDUCE) SIFT__ONE_KMIN(q4_K, sift_block_q4_K, VEC, ZERO, REDUCE)
/* the same for any type with Q4_K's scales and mins (Q5_K): NAME_block1 gives a block's sums */
#define SIFT__ONE_KMIN(NAME, WBLOCK, VEC, ZERO, REDUCE)                                                             \
    static float NAME##_one(int64_t n, const WBLOCK *a, const sift_block_q8_K *b)                                    \
    {                                                                                                                \
        const int64_t nb = n / SIFT_QK_K;                                                                            \
        float sum = 0;                                                                                               \
        for (int64_t k = 0; k < nb; k += 4) {                                                                        \
            prefetch_ahead(a + k, 4 * sizeof *a);                                                                    \
            const int nk = nb - k < 4 ? (int)(nb - k) : 4;                                                           \
            VEC p[4];                                                                                                \
            __m256i pm[4];                                                                                           \
            uint16_t hd[4] = {0}, hm[4] = {0};                                                                       \
            float dx[4] = {0};                                                                                       \
            for (int l = 0; l < 4; l++) {                                                                            \
                if (l < nk) {                                                                                        \
                    p[l] = NAME##_block1(a + k + l, b + k + l, &pm[l]);                                              \
                    hd[l] = a[k + l].d, hm[l] = a[k + l].dmin, dx[l] = b[k + l].d;                                   \
                } else {                                                                                             \
                    p[l] = ZERO, pm[l] = _mm256_setzero_si256();                                                     \
                }                                                                                                    \
            }                                                                                                        \
            const __m128 t = q4k_terms(REDUCE(p[0], p[1], p[2], p[3]), reduce4(pm[0], pm[1], pm[2], pm[3]),          \
                                       halves4(hd[0], hd[1], hd[2], hd[3]), halves4(hm[0], hm[1], hm[2], hm[3]),     \
                                       _mm_loadu_ps(dx));                                                            \
            sum = add_terms(sum, t, nk);                                                                             \
        }                                                                                                            \
        return sum;                                                                                                  \
    }

#define SIFT__ONE_Q6_K(VEC, ZERO, REDUCE)                                                                           \
    static float q6_K_one(int64_t n, const sift_block_q6_K *a, const sift_block_q8_K *b)                             \
    {                                                                                                                \
        const int64_t nb = n / SIFT_QK_K;                                                                            \
        float sum = 0;                                                                                               \
        for (int64_t k = 0; k < nb; k += 4) {                                                                        \
            prefetch_ahead(a + k, 4 * sizeof *a);                                                                    \
            const int nk = nb - k < 4 ? (int)(nb - k) : 4;                                                           \
            VEC p[4];                                                                                                \
            uint16_t hd[4] = {0};                                                                                    \
            float dx[4] = {0};                                                                                       \
            for (int l = 0; l < 4; l++) {                                                                            \
                if (l < nk) {                                                                                        \
                    p[l] = q6_K_block1(a + k + l, b + k + l);                                                        \
                    hd[l] = a[k + l].d, dx[l] = b[k + l].d;                                                          \
                } else {                                                                                             \
                    p[l] = ZERO;                                                                                     \
                }                                                                                                    \
            }                                                                                                        \
            const __m128 t = q6k_step(_mm_setzero_ps(), REDUCE(p[0], p[1], p[2], p[3]),                              \
                                      halves4(hd[0], hd[1], hd[2], hd[3]), _mm_loadu_ps(dx));                        \
            sum = add_terms(sum, t, nk);                                                                             \
        }                                                                                                            \
        return sum;                                                                                                  \
    }

#endif
