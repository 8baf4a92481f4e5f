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
 */
#ifndef SIFT_MODEL_KERNELS_SIMD_H
#define SIFT_MODEL_KERNELS_SIMD_H

#if !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__)
#error "model/kernels_simd.h is for files compiled with the ISA flags of sift_isa_flags() (kernels_avx2.c, kernels_avx512.c)"
#endif

#include <immintrin.h>

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

#endif
