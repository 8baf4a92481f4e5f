/*
 * kernels_avx512.c - the AVX-512 kernels (compiled with -mavx512f/bw/vl/dq on top of the
 * AVX2 flags; entered only after core/cpu.c has found all of those, and the OS's opmask and
 * ZMM state). The table starts as a copy of the AVX2 one; this file replaces what gains
 * from 16-lane floats or 64-byte integer vectors. The drivers around the inner kernels and
 * the width-independent helpers are kernels_avx2.c's, shared through kernels_simd.h.
 *
 * The design rules are those of kernels_avx2.c: per-column accumulators (a column's result
 * never depends on its neighbours), masked tails where a lane's arithmetic must not depend
 * on its position, and integer kernels that reduce every block to its exact integer sum
 * before the scalar code's float multiply-add, so they agree bit for bit with it.
 *
 * Integer kernels work on two 32-value blocks (Q8_0, Q4_0) or 64 values of a K-quant at a
 * time in one 512-bit register. For Q8_0 and Q4_0 the per-block integer sums of four
 * (weight row, activation row) pairs are reduced together and their float steps run in the
 * lanes of one register: tiles of 4 rows x 4 columns for batches (gemm), eight blocks of
 * one row at a time for generation (rows), still bit for bit the scalar code.
 *
 * Halves are converted with F16C inline (f16c_to_fp32), never by calling
 * sift__fp16_to_fp32: a call inside a kernel's loop spills every vector register, which made
 * the Q8_0 kernels three to four times slower.
 */
#include <cpuid.h>
#include <immintrin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "model/kernels_simd.h"

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

SIFT__DOT_COLS(dot_f32)

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

SIFT__DOT_COLS(dot_f16)

static void act_convert(sift__act_format f, const float *x, void *dst, int64_t n)
{
    if (f != SIFT_ACT_F16) {
        sift__act_convert_scalar(f, x, dst, n);
        return;
    }
    uint16_t *h = dst;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(h + i), _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) h[i] = sift__fp32_to_fp16(x[i]);
}

/* ---- Q8_0 and Q4_0 against Q8_0, two blocks per register (kernels_avx512_q0.h) -------------------- */

/* int32 partial sums of the products of signed bytes w and x: lanes 0-7 the first block's,
 * 8-15 the second's (|w| x sign(w)*x; |w| <= 128 and |x| <= 127 keep vpmaddubsw exact). */
static inline __m512i products(__m512i w, __m512i x)
{
    const __m512i sx = _mm512_mask_sub_epi8(x, _mm512_movepi8_mask(w), _mm512_setzero_si512(), x);
    return _mm512_madd_epi16(_mm512_maddubs_epi16(_mm512_abs_epi8(w), sx), _mm512_set1_epi16(1));
}

FORCE_INLINE __m512i x_prep(__m512i x)
{
    return x;
}

FORCE_INLINE __m512i w_aux(__m512i w)
{
    return w;
}

FORCE_INLINE __m512i pair_products(__m512i w, __m512i aux, __m512i x)
{
    (void)aux;
    return products(w, x);
}

#include "model/kernels_avx512_q0.h"

/* ---- Q4_K and Q6_K against Q8_K: tiles of 64 values per register (kernels_simd.h) ------------------ */

/* The exact sums of four pairs' sixteen int32 lanes: lane i of the result is p_i's. */
static inline __m128i reduce4x16(__m512i p0, __m512i p1, __m512i p2, __m512i p3)
{
    const __m512i a = _mm512_add_epi32(_mm512_unpacklo_epi32(p0, p1), _mm512_unpackhi_epi32(p0, p1));
    const __m512i b = _mm512_add_epi32(_mm512_unpacklo_epi32(p2, p3), _mm512_unpackhi_epi32(p2, p3));
    const __m512i c = _mm512_add_epi32(_mm512_unpacklo_epi64(a, b), _mm512_unpackhi_epi64(a, b));
    const __m256i d = _mm256_add_epi32(_mm512_castsi512_si256(c), _mm512_extracti64x4_epi64(c, 1));
    return _mm_add_epi32(_mm256_castsi256_si128(d), _mm256_extracti128_si256(d, 1));
}

/* 16-bit lanes 0-15 = lane lo of v, 16-31 = lane hi (v: 16 16-bit values) */
static inline __m512i spread16(__m256i v, int lo, int hi)
{
    const __m512i idx = _mm512_cvtepu8_epi16(_mm256_set_m128i(_mm_set1_epi8((char)hi), _mm_set1_epi8((char)lo)));
    return _mm512_permutexvar_epi16(idx, _mm512_castsi256_si512(v));
}

/* acc + the pairwise products of the 16-bit lanes of p and s, summed in pairs (vpmaddwd then
 * vpaddd). With VNNI, vpdpwssd does both in one instruction, without saturation: the same
 * exact int32 sums. It is written in asm so that this file needs no -mavx512vnni (whose
 * intrinsic could not be inlined into the kernels compiled without it); the table enters
 * the VNNI kernels only after a run-time check (use_vnni). */
FORCE_INLINE __m512i madd_acc(__m512i acc, __m512i p, __m512i s, const bool VNNI)
{
    if (!VNNI) return _mm512_add_epi32(acc, _mm512_madd_epi16(p, s));
    __asm__("vpdpwssd %2, %1, %0" : "+v"(acc) : "v"(p), "v"(s));
    return acc;
}

/* Whether the Q4_K kernels may use AVX512-VNNI: the CPU has it (CPUID 7.0 ECX bit 11; the
 * AVX-512 state is already checked by core/cpu.c) and SIFT_NO_VNNI is not set (for
 * comparisons). */
static bool use_vnni(void)
{
    if (sift__env_on("SIFT_NO_VNNI")) return false;
    unsigned a, b, c, d;
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) && ((c >> 11) & 1);
}

/* R x C pairs (R, C <= 4) of Q4_K rows and Q8_K columns. Register g of a row holds sub-block
 * 2g (the low nibbles of qs[32g..32g+32)) then 2g+1 (the high ones): exactly the activation
 * bytes 64g .. 64g+63. */
FORCE_INLINE void q4_K_tile_v(int64_t n, const sift_block_q4_K *const *a, const sift_block_q8_K *const *b, __m128 *sum,
                              const int R, const int C, const char *pf, const bool VNNI)
{
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    UNROLL4 for (int g = 0; g < (R * C + 3) / 4; g++) sum[g] = _mm_setzero_ps();
    for (int64_t k = 0; k < n / SIFT_QK_K; k++) {
        prefetch_span(pf, k, 4 * (int64_t)sizeof(sift_block_q4_K));
        __m512i acc[4][4];
        __m256i sc16[4], mins[4];
        UNROLL4 for (int i = 0; i < R; i++) {
            const __m128i sm = q4k_scales_mins(&a[i][k]);
            sc16[i] = _mm256_cvtepu8_epi16(sm);
            mins[i] = q4k_mins_pairs(sm);
            UNROLL4 for (int j = 0; j < C; j++) acc[i][j] = _mm512_setzero_si512();
        }
        UNROLL4 for (int g = 0; g < 4; g++) {
            __m512i xv[4];
            UNROLL4 for (int j = 0; j < C; j++) xv[j] = _mm512_loadu_si512((const void *)(b[j][k].qs + 64 * g));
            UNROLL4 for (int i = 0; i < R; i++) {
                const __m256i raw = _mm256_loadu_si256((const __m256i *)(a[i][k].qs + 32 * g));
                const __m512i q = _mm512_and_si512(_mm512_inserti64x4(_mm512_castsi256_si512(raw), _mm256_srli_epi16(raw, 4), 1), m4);
                const __m512i s = spread16(sc16[i], 2 * g, 2 * g + 1);
                UNROLL4 for (int j = 0; j < C; j++)
                    acc[i][j] = madd_acc(acc[i][j], _mm512_maddubs_epi16(q, xv[j]), s, VNNI);
            }
        }
        const __m128 dw = halves4(a[0][k].d, a[R > 1][k].d, a[R > 2 ? 2 : 0][k].d, a[R > 3 ? 3 : 0][k].d);
        const __m128 dmw = halves4(a[0][k].dmin, a[R > 1][k].dmin, a[R > 2 ? 2 : 0][k].dmin, a[R > 3 ? 3 : 0][k].dmin);
        const __m128 dx = _mm_setr_ps(b[0][k].d, b[C > 1][k].d, b[C > 2 ? 2 : 0][k].d, b[C > 3 ? 3 : 0][k].d);
        __m256i bs[4];
        UNROLL4 for (int j = 0; j < C; j++) bs[j] = _mm256_loadu_si256((const __m256i *)b[j][k].bsums);
        UNROLL4 for (int g = 0; g < (R * C + 3) / 4; g++) {
            __m512i pi[4];
            __m256i pm[4];
            UNROLL4 for (int l = 0; l < 4; l++) {
                const int q = 4 * g + l, i = q / C, j = q % C;
                pi[l] = q < R * C ? acc[i][j] : _mm512_setzero_si512();
                pm[l] = q < R * C ? _mm256_madd_epi16(mins[i], bs[j]) : _mm256_setzero_si256();
            }
            sum[g] = q4k_step(sum[g], reduce4x16(pi[0], pi[1], pi[2], pi[3]), reduce4(pm[0], pm[1], pm[2], pm[3]),
                              SPREAD_ROWS(dw, g, R, C), SPREAD_ROWS(dmw, g, R, C), SPREAD_COLS(dx, g, R, C));
        }
    }
}

/* One block of one pair: the scale-weighted products (sixteen int32 partial sums, returned)
 * and the mins against the activation sums (eight, in *pm). */
FORCE_INLINE __m512i q4_K_block1_v(const sift_block_q4_K *a, const sift_block_q8_K *b, __m256i *pm, const bool VNNI)
{
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m128i sm = q4k_scales_mins(a);
    const __m256i sc16 = _mm256_cvtepu8_epi16(sm);
    *pm = _mm256_madd_epi16(q4k_mins_pairs(sm), _mm256_loadu_si256((const __m256i *)b->bsums));
    __m512i acc = _mm512_setzero_si512();
    UNROLL4 for (int g = 0; g < 4; g++) {
        const __m256i raw = _mm256_loadu_si256((const __m256i *)(a->qs + 32 * g));
        const __m512i q = _mm512_and_si512(_mm512_inserti64x4(_mm512_castsi256_si512(raw), _mm256_srli_epi16(raw, 4), 1), m4);
        const __m512i xv = _mm512_loadu_si512((const void *)(b->qs + 64 * g));
        acc = madd_acc(acc, _mm512_maddubs_epi16(q, xv), spread16(sc16, 2 * g, 2 * g + 1), VNNI);
    }
    return acc;
}

/* The kernels twice: with vpmaddwd + vpaddd, and with AVX512-VNNI's vpdpwssd in their place
 * (the table takes the second where the CPU has VNNI). Each pair of names below is what
 * kernels_simd.h's drivers call; the drivers are expanded once per variant. */
FORCE_INLINE void q4_K_tile(int64_t n, const sift_block_q4_K *const *a, const sift_block_q8_K *const *b, __m128 *sum,
                            const int R, const int C, const char *pf)
{
    q4_K_tile_v(n, a, b, sum, R, C, pf, false);
}
FORCE_INLINE __m512i q4_K_block1(const sift_block_q4_K *a, const sift_block_q8_K *b, __m256i *pm)
{
    return q4_K_block1_v(a, b, pm, false);
}

/* One row against one column (SIFT__ONE_Q4_K in kernels_simd.h). */
SIFT__ONE_Q4_K(__m512i, _mm512_setzero_si512(), reduce4x16)

SIFT__GEMM_K(q4_K, sift_block_q4_K, 4)

/* The VNNI variant: the same drivers over the vpdpwssd kernels, under the names _vnni. */
#define q4_K_one q4_K_vnni_one
#define q4_K_block1 q4_K_vnni_block1
FORCE_INLINE void q4_K_vnni_tile(int64_t n, const sift_block_q4_K *const *a, const sift_block_q8_K *const *b, __m128 *sum,
                                 const int R, const int C, const char *pf)
{
    q4_K_tile_v(n, a, b, sum, R, C, pf, true);
}
FORCE_INLINE __m512i q4_K_vnni_block1(const sift_block_q4_K *a, const sift_block_q8_K *b, __m256i *pm)
{
    return q4_K_block1_v(a, b, pm, true);
}
SIFT__ONE_Q4_K(__m512i, _mm512_setzero_si512(), reduce4x16)
#undef q4_K_one
#undef q4_K_block1

SIFT__GEMM_K(q4_K_vnni, sift_block_q4_K, 4)

/* Generation from huge pages (rows_huge): tiles of four rows against the one column. Per
 * row and block a third less work than q4_K_one (the activation loads, the mins' sums and
 * the reduction shared by four rows); from 2 MiB pages the four streams cost nothing, from
 * 4 KiB file pages they did (q4_K_one reads one row at a time for those). */
static void rows_huge_q4_K(int64_t n, const void *w, size_t row_bytes, int64_t n_rows, const void *x, float *out)
{
    gemm_q4_K(n, w, row_bytes, n_rows, x, 0, 1, out, 0);
}
static void rows_huge_q4_K_vnni(int64_t n, const void *w, size_t row_bytes, int64_t n_rows, const void *x, float *out)
{
    gemm_q4_K_vnni(n, w, row_bytes, n_rows, x, 0, 1, out, 0);
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

/* 16-bit lanes 8s .. 8s+7 = lane 4r+s of v (s < 4): the scales of register r's four sub-blocks */
static inline __m512i spread16x4(__m256i v, int r)
{
    const int64_t one = 0x0101010101010101LL;
    const __m512i idx = _mm512_cvtepu8_epi16(_mm256_setr_epi64x(one * (4 * r), one * (4 * r + 1), one * (4 * r + 2), one * (4 * r + 3)));
    return _mm512_permutexvar_epi16(idx, _mm512_castsi256_si512(v));
}

/* R x C pairs of Q6_K rows and Q8_K columns; the -32 of every value folds in through the
 * activation sums before the reduction. */
FORCE_INLINE void q6_K_tile(int64_t n, const sift_block_q6_K *const *a, const sift_block_q8_K *const *b, __m128 *sum,
                            const int R, const int C, const char *pf)
{
    UNROLL4 for (int g = 0; g < (R * C + 3) / 4; g++) sum[g] = _mm_setzero_ps();
    for (int64_t k = 0; k < n / SIFT_QK_K; k++) {
        prefetch_span(pf, k, 4 * (int64_t)sizeof(sift_block_q6_K));
        __m512i acc[4][4];
        __m256i sc16[4];
        UNROLL4 for (int i = 0; i < R; i++) {
            sc16[i] = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)a[i][k].scales));
            UNROLL4 for (int j = 0; j < C; j++) /* acc = -32 * sum_sb sc_sb * bsums_sb to start with */
                acc[i][j] = _mm512_zextsi256_si512(_mm256_sub_epi32(
                    _mm256_setzero_si256(), _mm256_slli_epi32(_mm256_madd_epi16(sc16[i], _mm256_loadu_si256((const __m256i *)b[j][k].bsums)), 5)));
        }
        UNROLL4 for (int h = 0; h < 2; h++) {
            UNROLL4 for (int i = 0; i < R; i++) {
                __m512i q[2];
                unpack_q6_K_half(a[i][k].ql + 64 * h, a[i][k].qh + 32 * h, q);
                UNROLL4 for (int r = 0; r < 2; r++) {
                    const __m512i s = spread16x4(sc16[i], 2 * h + r);
                    UNROLL4 for (int j = 0; j < C; j++) {
                        const __m512i xv = _mm512_loadu_si512((const void *)(b[j][k].qs + 128 * h + 64 * r));
                        acc[i][j] = _mm512_add_epi32(acc[i][j], _mm512_madd_epi16(_mm512_maddubs_epi16(q[r], xv), s));
                    }
                }
            }
        }
        const __m128 dw = halves4(a[0][k].d, a[R > 1][k].d, a[R > 2 ? 2 : 0][k].d, a[R > 3 ? 3 : 0][k].d);
        const __m128 dx = _mm_setr_ps(b[0][k].d, b[C > 1][k].d, b[C > 2 ? 2 : 0][k].d, b[C > 3 ? 3 : 0][k].d);
        UNROLL4 for (int g = 0; g < (R * C + 3) / 4; g++) {
            __m512i pi[4];
            UNROLL4 for (int l = 0; l < 4; l++) {
                const int q = 4 * g + l;
                pi[l] = q < R * C ? acc[q / C][q % C] : _mm512_setzero_si512();
            }
            sum[g] = q6k_step(sum[g], reduce4x16(pi[0], pi[1], pi[2], pi[3]), SPREAD_ROWS(dw, g, R, C), SPREAD_COLS(dx, g, R, C));
        }
    }
}

FORCE_INLINE __m512i q6_K_block1(const sift_block_q6_K *a, const sift_block_q8_K *b)
{
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)a->scales));
    __m512i acc = _mm512_zextsi256_si512(_mm256_sub_epi32(
        _mm256_setzero_si256(), _mm256_slli_epi32(_mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)b->bsums)), 5)));
    UNROLL4 for (int h = 0; h < 2; h++) {
        __m512i q[2];
        unpack_q6_K_half(a->ql + 64 * h, a->qh + 32 * h, q);
        UNROLL4 for (int r = 0; r < 2; r++) {
            const __m512i xv = _mm512_loadu_si512((const void *)(b->qs + 128 * h + 64 * r));
            acc = _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_maddubs_epi16(q[r], xv), spread16x4(sc16, 2 * h + r)));
        }
    }
    return acc;
}

SIFT__ONE_Q6_K(__m512i, _mm512_setzero_si512(), reduce4x16)

SIFT__GEMM_K(q6_K, sift_block_q6_K, 4)

/* ---- one column, many rows (generation) --------------------------------------------------------- */

SIFT__ROWS(dot_f32, float)
SIFT__ROWS(dot_f16, uint16_t)

/* ---- attention and element-wise ------------------------------------------------------------------------ */

/* The scores of NG (<= 4) query heads in one pass over the head's K rows: each row chunk is
 * loaded once for all of them (attention at depth reads n_head / n_head_kv times less K).
 * Every score is the same sum as one head alone would compute: over d in order, then
 * times scale. */
FORCE_INLINE void attn_scores_g(int n, int hd, const float *q, const float *kt, size_t ld, __m512 vs, float *s,
                                size_t s_stride, const int NG)
{
    int c = 0;
    for (; c + 64 <= n; c += 64) {
        __m512 a[4][4];
        UNROLL4 for (int g = 0; g < NG; g++) UNROLL4 for (int u = 0; u < 4; u++) a[g][u] = _mm512_setzero_ps();
        for (int d = 0; d < hd; d++) {
            const float *r = kt + d * ld + c;
            const __m512 k0 = _mm512_loadu_ps(r), k1 = _mm512_loadu_ps(r + 16), k2 = _mm512_loadu_ps(r + 32),
                         k3 = _mm512_loadu_ps(r + 48);
            UNROLL4 for (int g = 0; g < NG; g++) {
                const __m512 qd = _mm512_set1_ps(q[g * hd + d]);
                a[g][0] = _mm512_fmadd_ps(qd, k0, a[g][0]);
                a[g][1] = _mm512_fmadd_ps(qd, k1, a[g][1]);
                a[g][2] = _mm512_fmadd_ps(qd, k2, a[g][2]);
                a[g][3] = _mm512_fmadd_ps(qd, k3, a[g][3]);
            }
        }
        UNROLL4 for (int g = 0; g < NG; g++) UNROLL4 for (int u = 0; u < 4; u++)
            _mm512_storeu_ps(s + g * s_stride + c + 16 * u, _mm512_mul_ps(a[g][u], vs));
    }
    for (; c < n; c += 16) { /* the last lanes masked: the same arithmetic per cell */
        const __mmask16 mk = n - c >= 16 ? (__mmask16)0xFFFF : tail16(n - c);
        __m512 a[4];
        UNROLL4 for (int g = 0; g < NG; g++) a[g] = _mm512_setzero_ps();
        for (int d = 0; d < hd; d++) {
            const __m512 kv = _mm512_maskz_loadu_ps(mk, kt + d * ld + c);
            UNROLL4 for (int g = 0; g < NG; g++) a[g] = _mm512_fmadd_ps(_mm512_set1_ps(q[g * hd + d]), kv, a[g]);
        }
        UNROLL4 for (int g = 0; g < NG; g++) _mm512_mask_storeu_ps(s + g * s_stride + c, mk, _mm512_mul_ps(a[g], vs));
    }
}

static void attn_scores(int n, int hd, int nq, const float *q, const float *kt, size_t ld, float scale, float *s,
                        size_t s_stride)
{
    const __m512 vs = _mm512_set1_ps(scale);
    for (int g = 0; g < nq; g += 4) {
        const float *qg = q + (size_t)g * hd;
        float *sg = s + g * s_stride;
        switch (nq - g < 4 ? nq - g : 4) {
        case 1: attn_scores_g(n, hd, qg, kt, ld, vs, sg, s_stride, 1); break;
        case 2: attn_scores_g(n, hd, qg, kt, ld, vs, sg, s_stride, 2); break;
        case 3: attn_scores_g(n, hd, qg, kt, ld, vs, sg, s_stride, 3); break;
        default: attn_scores_g(n, hd, qg, kt, ld, vs, sg, s_stride, 4); break;
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

void sift__kernels_init_avx512(sift__kernels *k)
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
    k->rows[SIFT_TYPE_Q4_K] = rows_q4_K;
    k->rows[SIFT_TYPE_Q6_K] = rows_q6_K;
    k->gemm[SIFT_TYPE_Q8_0] = gemm_q8_0;
    k->gemm[SIFT_TYPE_Q4_0] = gemm_q4_0;
    k->gemm[SIFT_TYPE_Q4_K] = gemm_q4_K;
    k->gemm[SIFT_TYPE_Q6_K] = gemm_q6_K;
    k->rows_huge[SIFT_TYPE_Q4_K] = rows_huge_q4_K;
    if (use_vnni()) {
        k->dot[SIFT_TYPE_Q4_K] = dot_q4_K_vnni;
        k->rows[SIFT_TYPE_Q4_K] = rows_q4_K_vnni;
        k->gemm[SIFT_TYPE_Q4_K] = gemm_q4_K_vnni;
        k->rows_huge[SIFT_TYPE_Q4_K] = rows_huge_q4_K_vnni;
    }
    k->act_convert = act_convert;
    k->attn_scores = attn_scores;
    k->softmax_exp = softmax_exp;
    k->max = vmax;
    k->swiglu = swiglu;
}
