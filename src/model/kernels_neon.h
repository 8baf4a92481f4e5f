/*
 * kernels_neon.h - the aarch64 NEON kernels, written once for two tables: kernels_neon.c
 * (ARMv8.0, every aarch64 CPU) and kernels_neon_dotprod.c (compiled with
 * -march=armv8.2-a+dotprod, entered only after core/cpu.c found SDOT). The only difference
 * is how sixteen signed byte products become four 32-bit sums: SIFT__NEON_DOT16(acc, a, b)
 * is one SDOT in the dotprod file, and SMULL + SMULL2 + two SADALP without it (ggml's
 * fallback too). The including file defines SIFT__NEON_DOT16 and SIFT__NEON_SUFFIX first.
 * Each copy's functions are static, so the two never mix.
 *
 * The shape mirrors the x86 files (kernels_avx2.c): float kernels keep their own
 * accumulators per activation column and never mix columns (a column's value does not
 * depend on how many columns share the call); integer kernels reduce each block to its
 * exact integer sum, then do the scalar kernel's float operations per block, in its order
 * (kernels.c), so the results are the scalar ones bit for bit (tests/test_kernels.c). A
 * weight block is unpacked into signed bytes once and used by every column of the call.
 *
 * Products of int8 are at most 128 * 127 in magnitude (the activations are quantized to
 * [-127, 127]), so an SMULL's 16-bit lanes never overflow and SADALP widens them before two
 * are added.
 *
 * exp (softmax, SwiGLU): Cephes' expf as kernels_avx2.c has it (range reduction by ln 2 in
 * two parts, degree-5 polynomial, FMA), within about 1 ulp of libm.
 */
#ifndef SIFT_MODEL_KERNELS_NEON_H
#define SIFT_MODEL_KERNELS_NEON_H

#if !defined(__aarch64__) || !defined(SIFT__NEON_DOT16) || !defined(SIFT__NEON_INIT)
#error "model/kernels_neon.h is included by kernels_neon.c and kernels_neon_dotprod.c, after SIFT__NEON_DOT16 and SIFT__NEON_INIT"
#endif

#include <arm_neon.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "model/kernels.h"

#define NFORCE_INLINE static inline __attribute__((always_inline))
/* (a block's unpacked bytes must stay in registers: unroll the loops over its parts, which
 * -O2 leaves rolled, spilling the vectors to the stack) */
#define NUNROLL _Pragma("GCC unroll 16")

/* Half -> float with the scalar FCVT (ARMv8.0; __fp16 is the ACLE's storage type): bit for
 * bit sift__fp16_to_fp32, one instruction after the 16-bit load. */
static inline float neon_f16_f32(uint16_t h)
{
    __fp16 f;
    memcpy(&f, &h, sizeof f);
    return (float)f;
}

static inline float neon_bf16_f32(uint16_t h)
{
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* The exact sum of the 32 products of a[0..32) and b[0..32) (signed bytes). */
NFORCE_INLINE int32_t dot32(int8x16_t a0, int8x16_t a1, const int8_t *b)
{
    int32x4_t acc = vdupq_n_s32(0);
    acc = SIFT__NEON_DOT16(acc, a0, vld1q_s8(b));
    acc = SIFT__NEON_DOT16(acc, a1, vld1q_s8(b + 16));
    return vaddvq_s32(acc);
}

/* ---- F32 ---------------------------------------------------------------------------------- */

/* Per column: four 4-lane accumulators over 16-value steps (16 partial sums), then the
 * rest with fmaf. */
NFORCE_INLINE void dot_f32_n(int64_t n, const float *w, const char *x, size_t xs, float *s, const int NC)
{
    float32x4_t acc[SIFT_DOT_MAX_COLS][4];
    for (int j = 0; j < NC; j++) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = vdupq_n_f32(0);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const float32x4_t w0 = vld1q_f32(w + i), w1 = vld1q_f32(w + i + 4), w2 = vld1q_f32(w + i + 8), w3 = vld1q_f32(w + i + 12);
        for (int j = 0; j < NC; j++) {
            const float *xj = (const float *)(x + j * xs) + i;
            acc[j][0] = vfmaq_f32(acc[j][0], w0, vld1q_f32(xj));
            acc[j][1] = vfmaq_f32(acc[j][1], w1, vld1q_f32(xj + 4));
            acc[j][2] = vfmaq_f32(acc[j][2], w2, vld1q_f32(xj + 8));
            acc[j][3] = vfmaq_f32(acc[j][3], w3, vld1q_f32(xj + 12));
        }
    }
    for (int j = 0; j < NC; j++) {
        const float *xj = (const float *)(x + j * xs);
        float t = vaddvq_f32(vaddq_f32(vaddq_f32(acc[j][0], acc[j][1]), vaddq_f32(acc[j][2], acc[j][3])));
        for (int64_t k = i; k < n; k++) t = fmaf(w[k], xj[k], t);
        s[j] = t;
    }
}

/* ---- F16 x F16 and BF16 x BF16 ------------------------------------------------------------- */

/* Whole 32-value steps in float lanes (eight 4-lane accumulators: 32 partial sums, as the
 * AVX2 kernel's four 8-lane ones); the rest as ggml does it, each product (exact in float)
 * summed in double. */
NFORCE_INLINE void dot_f16_n(int64_t n, const uint16_t *w, const char *x, size_t xs, float *s, const int NC)
{
    float32x4_t acc[SIFT_DOT_MAX_COLS][8];
    for (int j = 0; j < NC; j++)
        for (int k = 0; k < 8; k++) acc[j][k] = vdupq_n_f32(0);
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        float32x4_t wv[8];
        for (int k = 0; k < 4; k++) {
            const float16x8_t h = vreinterpretq_f16_u16(vld1q_u16(w + i + 8 * k));
            wv[2 * k] = vcvt_f32_f16(vget_low_f16(h));
            wv[2 * k + 1] = vcvt_high_f32_f16(h);
        }
        for (int j = 0; j < NC; j++) {
            const uint16_t *xj = (const uint16_t *)(x + j * xs) + i;
            for (int k = 0; k < 4; k++) {
                const float16x8_t h = vreinterpretq_f16_u16(vld1q_u16(xj + 8 * k));
                acc[j][2 * k] = vfmaq_f32(acc[j][2 * k], wv[2 * k], vcvt_f32_f16(vget_low_f16(h)));
                acc[j][2 * k + 1] = vfmaq_f32(acc[j][2 * k + 1], wv[2 * k + 1], vcvt_high_f32_f16(h));
            }
        }
    }
    for (int j = 0; j < NC; j++) {
        const uint16_t *xj = (const uint16_t *)(x + j * xs);
        float32x4_t a = vaddq_f32(vaddq_f32(vaddq_f32(acc[j][0], acc[j][1]), vaddq_f32(acc[j][2], acc[j][3])),
                                  vaddq_f32(vaddq_f32(acc[j][4], acc[j][5]), vaddq_f32(acc[j][6], acc[j][7])));
        double t = n >= 32 ? vaddvq_f32(a) : 0.0;
        for (int64_t k = i; k < n; k++) t += (double)(neon_f16_f32(w[k]) * neon_f16_f32(xj[k]));
        s[j] = (float)t;
    }
}

/* A BF16 value is the top half of a float: eight of them are two float vectors, the even
 * elements shifted up 16 bits and the odd ones with the low halves cleared (as on AVX2).
 * 16-value steps into two 4-lane accumulators per column; the last n % 16 products
 * (exact in float) in double. */
NFORCE_INLINE void dot_bf16_n(int64_t n, const uint16_t *w, const char *x, size_t xs, float *s, const int NC)
{
    float32x4_t acc[SIFT_DOT_MAX_COLS][2];
    for (int j = 0; j < NC; j++) acc[j][0] = acc[j][1] = vdupq_n_f32(0);
    const uint32x4_t hi = vdupq_n_u32(0xFFFF0000u);
    const int64_t n16 = n & ~(int64_t)15;
    for (int64_t e = 0; e < n16; e += 8) {
        const uint32x4_t wr = vreinterpretq_u32_u16(vld1q_u16(w + e));
        const float32x4_t we = vreinterpretq_f32_u32(vshlq_n_u32(wr, 16)), wo = vreinterpretq_f32_u32(vandq_u32(wr, hi));
        for (int j = 0; j < NC; j++) {
            const uint32x4_t xr = vreinterpretq_u32_u16(vld1q_u16((const uint16_t *)(x + j * xs) + e));
            acc[j][0] = vfmaq_f32(acc[j][0], we, vreinterpretq_f32_u32(vshlq_n_u32(xr, 16)));
            acc[j][1] = vfmaq_f32(acc[j][1], wo, vreinterpretq_f32_u32(vandq_u32(xr, hi)));
        }
    }
    for (int j = 0; j < NC; j++) {
        const uint16_t *xj = (const uint16_t *)(x + j * xs);
        double t = vaddvq_f32(vaddq_f32(acc[j][0], acc[j][1]));
        for (int64_t e = n16; e < n; e++) t += (double)(neon_bf16_f32(w[e]) * neon_bf16_f32(xj[e]));
        s[j] = (float)t;
    }
}

/* ---- Q8_0 and Q4_0 against Q8_0 ------------------------------------------------------------- */

/* Q8_0, Q4_0 and MXFP4. Per block: the 32 weights as signed bytes (unpacked once for every column), each
 * column's exact integer sum, then the scalar kernel's sum += isum * (d_w * d_x). */
/* kind: 0 Q8_0, 1 Q4_0, 2 MXFP4 (the codes through ggml's doubled E2M1 table, TBL; the
 * scale 2^(e - 128)) */
NFORCE_INLINE void dot_q0_n(int64_t n, const void *w, const char *x, size_t xs, float *s, const int NC, const int kind)
{
    const int64_t nb = n / SIFT_QK8_0;
    float sum[SIFT_DOT_MAX_COLS] = {0};
    for (int64_t k = 0; k < nb; k++) {
        int8x16_t a0, a1;
        float fw;
        if (kind == 2) {
            const sift__block_mxfp4 *a = (const sift__block_mxfp4 *)w + k;
            const uint8x16_t b = vld1q_u8(a->qs);
            const int8x16_t tbl = vld1q_s8(sift__kvalues_mxfp4);
            a0 = vqtbl1q_s8(tbl, vandq_u8(b, vdupq_n_u8(15)));
            a1 = vqtbl1q_s8(tbl, vshrq_n_u8(b, 4));
            fw = sift__e8m0_to_fp32_half(a->e);
        } else if (kind == 1) {
            const sift__block_q4_0 *a = (const sift__block_q4_0 *)w + k;
            const uint8x16_t b = vld1q_u8(a->qs);
            a0 = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(b, vdupq_n_u8(15))), vdupq_n_s8(8));
            a1 = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(b, 4)), vdupq_n_s8(8));
            fw = neon_f16_f32(a->d);
        } else {
            const sift__block_q8_0 *a = (const sift__block_q8_0 *)w + k;
            a0 = vld1q_s8(a->qs);
            a1 = vld1q_s8(a->qs + 16);
            fw = neon_f16_f32(a->d);
        }
        for (int j = 0; j < NC; j++) {
            const sift__block_q8_0 *b = (const sift__block_q8_0 *)(x + j * xs) + k;
            const int32_t isum = dot32(a0, a1, b->qs);
            sum[j] += (float)isum * (fw * neon_f16_f32(b->d));
        }
    }
    for (int j = 0; j < NC; j++) s[j] = sum[j];
}

NFORCE_INLINE void dot_q8_0_n(int64_t n, const void *w, const char *x, size_t xs, float *s, const int NC)
{
    dot_q0_n(n, w, x, xs, s, NC, 0);
}
NFORCE_INLINE void dot_q4_0_n(int64_t n, const void *w, const char *x, size_t xs, float *s, const int NC)
{
    dot_q0_n(n, w, x, xs, s, NC, 1);
}
NFORCE_INLINE void dot_mxfp4_n(int64_t n, const void *w, const char *x, size_t xs, float *s, const int NC)
{
    dot_q0_n(n, w, x, xs, s, NC, 2);
}

/* ---- K-quants against Q8_K ---------------------------------------------------------------- */

/* Q4_K's twelve packed scale bytes as the eight 6-bit scales and eight 6-bit mins. */
static inline void neon_q4k_scales(const uint8_t *q, int sc[8], int m[8])
{
    NUNROLL for (int j = 0; j < 4; j++) {
        sc[j] = q[j] & 63;
        m[j] = q[j + 4] & 63;
        sc[j + 4] = (q[j + 8] & 0xF) | ((q[j] >> 6) << 4);
        m[j + 4] = (q[j + 8] >> 4) | ((q[j + 4] >> 6) << 4);
    }
}

/* Q4_K / Q5_K: sub-block 2g holds the low nibbles of qs[32g..32g+32), 2g+1 the high ones;
 * Q5_K adds bit j of qh[i] as bit 4 of value i of sub-block j. v[2j], v[2j+1]: sub-block
 * j's 32 values (0..15 or 0..31) as bytes. */
NFORCE_INLINE void unpack_kmin(const uint8_t *qs, const uint8_t *qh, int8x16_t v[16])
{
    const uint8x16_t m4 = vdupq_n_u8(15);
    NUNROLL for (int g = 0; g < 4; g++) {
        const uint8x16_t b0 = vld1q_u8(qs + 32 * g), b1 = vld1q_u8(qs + 32 * g + 16);
        uint8x16_t l0 = vandq_u8(b0, m4), l1 = vandq_u8(b1, m4), h0 = vshrq_n_u8(b0, 4), h1 = vshrq_n_u8(b1, 4);
        if (qh) {
            /* bit 2g of qh[i] for the low sub-block, bit 2g+1 for the high one, moved to bit 4 */
            const uint8x16_t q0 = vld1q_u8(qh), q1 = vld1q_u8(qh + 16), bl = vdupq_n_u8((uint8_t)(1u << (2 * g))),
                             bh = vdupq_n_u8((uint8_t)(2u << (2 * g))), b4 = vdupq_n_u8(16);
            l0 = vorrq_u8(l0, vandq_u8(vtstq_u8(q0, bl), b4));
            l1 = vorrq_u8(l1, vandq_u8(vtstq_u8(q1, bl), b4));
            h0 = vorrq_u8(h0, vandq_u8(vtstq_u8(q0, bh), b4));
            h1 = vorrq_u8(h1, vandq_u8(vtstq_u8(q1, bh), b4));
        }
        v[4 * g] = vreinterpretq_s8_u8(l0);
        v[4 * g + 1] = vreinterpretq_s8_u8(l1);
        v[4 * g + 2] = vreinterpretq_s8_u8(h0);
        v[4 * g + 3] = vreinterpretq_s8_u8(h1);
    }
}

/* The scalar kernel's per-block terms: d_w d_x sum_j(sc_j isum_j) - dmin_w d_x sum_j(m_j bsum_j). */
NFORCE_INLINE void dot_kmin_n(int64_t n, const uint8_t *w, size_t block_bytes, bool q5, const char *x, size_t xs, float *s,
                              const int NC)
{
    const int64_t nb = n / SIFT_QK_K;
    float sum[SIFT_DOT_MAX_COLS] = {0};
    for (int64_t k = 0; k < nb; k++) {
        const uint8_t *blk = w + k * block_bytes;
        uint16_t d, dmin;
        memcpy(&d, blk + offsetof(sift_block_q4_K, d), sizeof d);
        memcpy(&dmin, blk + offsetof(sift_block_q4_K, dmin), sizeof dmin);
        int sc[8], m[8];
        neon_q4k_scales(blk + offsetof(sift_block_q4_K, scales), sc, m);
        int8x16_t v[16];
        if (q5) {
            const sift_block_q5_K *a = (const sift_block_q5_K *)blk;
            unpack_kmin(a->qs, a->qh, v);
        } else {
            unpack_kmin(((const sift_block_q4_K *)blk)->qs, NULL, v);
        }
        const float fd = neon_f16_f32(d), fdmin = neon_f16_f32(dmin);
        for (int c = 0; c < NC; c++) {
            const sift_block_q8_K *b = (const sift_block_q8_K *)(x + c * xs) + k;
            int32_t sumi = 0, summ = 0;
            NUNROLL for (int j = 0; j < 8; j++) {
                sumi += sc[j] * dot32(v[2 * j], v[2 * j + 1], b->qs + 32 * j);
                summ += m[j] * (b->bsums[2 * j] + b->bsums[2 * j + 1]);
            }
            sum[c] += fd * b->d * (float)sumi - fdmin * b->d * (float)summ;
        }
    }
    for (int c = 0; c < NC; c++) s[c] = sum[c];
}

NFORCE_INLINE void dot_q4_K_n(int64_t n, const void *w, const char *x, size_t xs, float *s, const int NC)
{
    dot_kmin_n(n, w, sizeof(sift_block_q4_K), false, x, xs, s, NC);
}
NFORCE_INLINE void dot_q5_K_n(int64_t n, const void *w, const char *x, size_t xs, float *s, const int NC)
{
    dot_kmin_n(n, w, sizeof(sift_block_q5_K), true, x, xs, s, NC);
}

/* Q6_K: value = 4 bits of ql | 2 bits of qh << 4, minus 32 (folded into the activation
 * sums); sixteen sub-blocks of 16 values, each with a signed 8-bit scale. v[i]: values
 * 16i..16i+16 as bytes 0..63. */
NFORCE_INLINE void unpack_q6_K(const sift_block_q6_K *a, int8x16_t v[16])
{
    const uint8x16_t m4 = vdupq_n_u8(15), m2 = vdupq_n_u8(3 << 4);
    NUNROLL for (int h = 0; h < 2; h++) {
        const uint8_t *ql = a->ql + 64 * h, *qh = a->qh + 32 * h;
        int8x16_t *o = v + 8 * h;
        NUNROLL for (int l = 0; l < 2; l++) {
            const uint8x16_t l0 = vld1q_u8(ql + 16 * l), l1 = vld1q_u8(ql + 32 + 16 * l), hb = vld1q_u8(qh + 16 * l);
            o[l] = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(l0, m4), vandq_u8(vshlq_n_u8(hb, 4), m2)));
            o[2 + l] = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(l1, m4), vandq_u8(vshlq_n_u8(hb, 2), m2)));
            o[4 + l] = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(l0, 4), vandq_u8(hb, m2)));
            o[6 + l] = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(l1, 4), vandq_u8(vshrq_n_u8(hb, 2), m2)));
        }
    }
}

NFORCE_INLINE void dot_q6_K_n(int64_t n, const void *w, const char *x, size_t xs, float *s, const int NC)
{
    const sift_block_q6_K *a = w;
    const int64_t nb = n / SIFT_QK_K;
    float sum[SIFT_DOT_MAX_COLS] = {0};
    for (int64_t k = 0; k < nb; k++) {
        int8x16_t v[16];
        unpack_q6_K(&a[k], v);
        const float fd = neon_f16_f32(a[k].d);
        for (int c = 0; c < NC; c++) {
            const sift_block_q8_K *b = (const sift_block_q8_K *)(x + c * xs) + k;
            int32_t sumi = 0;
            NUNROLL for (int sb = 0; sb < 16; sb++) {
                const int32_t isum = vaddvq_s32(SIFT__NEON_DOT16(vdupq_n_s32(0), v[sb], vld1q_s8(b->qs + 16 * sb)));
                sumi += a[k].scales[sb] * (isum - 32 * b->bsums[sb]);
            }
            sum[c] += fd * b->d * (float)sumi;
        }
    }
    for (int c = 0; c < NC; c++) s[c] = sum[c];
}

/* ---- drivers: the column count as a constant, and the one-column row loop ----------------- */

#define SIFT__NEON_DOT(NAME, WT)                                                                                    \
    static void NAME(int64_t n, const void *w, const void *x, size_t xs, int ncols, float *s)                        \
    {                                                                                                                \
        switch (ncols) {                                                                                             \
        case 1: NAME##_n(n, (const WT *)w, x, xs, s, 1); break;                                                       \
        case 2: NAME##_n(n, (const WT *)w, x, xs, s, 2); break;                                                       \
        case 3: NAME##_n(n, (const WT *)w, x, xs, s, 3); break;                                                       \
        default: NAME##_n(n, (const WT *)w, x, xs, s, 4); break;                                                      \
        }                                                                                                            \
    }                                                                                                                \
    static void rows_##NAME(int64_t n, const void *w, size_t row_bytes, int64_t n_rows, const void *x, float *out)   \
    {                                                                                                                \
        for (int64_t r = 0; r < n_rows; r++) NAME##_n(n, (const WT *)((const char *)w + r * row_bytes), x, 0, out + r, 1); \
    }

SIFT__NEON_DOT(dot_f32, float)
SIFT__NEON_DOT(dot_f16, uint16_t)
SIFT__NEON_DOT(dot_bf16, uint16_t)
SIFT__NEON_DOT(dot_q8_0, void)
SIFT__NEON_DOT(dot_q4_0, void)
SIFT__NEON_DOT(dot_mxfp4, void)
SIFT__NEON_DOT(dot_q4_K, void)
SIFT__NEON_DOT(dot_q5_K, void)
SIFT__NEON_DOT(dot_q6_K, void)

/* ---- activations, attention and element-wise ---------------------------------------------- */

/* F32 -> F16 with FCVTN (round to nearest even, as sift__fp32_to_fp16). */
static void act_convert(sift__act_format f, const float *x, void *dst, int64_t n)
{
    if (f != SIFT_ACT_F16) {
        sift__act_convert_scalar(f, x, dst, n);
        return;
    }
    uint16_t *h = dst;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1_u16(h + i, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(x + i))));
    for (; i < n; i++) h[i] = sift__fp32_to_fp16(x[i]);
}

static inline float32x4_t exp_f32x4(float32x4_t x)
{
    x = vminq_f32(vmaxq_f32(x, vdupq_n_f32(-88.3762626647949f)), vdupq_n_f32(88.3762626647949f));
    float32x4_t fx = vrndmq_f32(vfmaq_f32(vdupq_n_f32(0.5f), x, vdupq_n_f32(1.44269504088896341f)));
    x = vfmsq_f32(x, fx, vdupq_n_f32(0.693359375f));
    x = vfmsq_f32(x, fx, vdupq_n_f32(-2.12194440e-4f));
    float32x4_t y = vdupq_n_f32(1.9875691500E-4f);
    y = vfmaq_f32(vdupq_n_f32(1.3981999507E-3f), y, x);
    y = vfmaq_f32(vdupq_n_f32(8.3334519073E-3f), y, x);
    y = vfmaq_f32(vdupq_n_f32(4.1665795894E-2f), y, x);
    y = vfmaq_f32(vdupq_n_f32(1.6666665459E-1f), y, x);
    y = vfmaq_f32(vdupq_n_f32(5.0000001201E-1f), y, x);
    y = vfmaq_f32(vaddq_f32(x, vdupq_n_f32(1.0f)), y, vmulq_f32(x, x));
    const int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(fx), vdupq_n_s32(127)), 23);
    return vmulq_f32(y, vreinterpretq_f32_s32(e));
}

/* The tail of a vector loop (n < 4 values) through the same vector code, so every value
 * goes through the same arithmetic. */
static inline float32x4_t load_tail(const float *p, int n, float fill)
{
    float t[4] = {fill, fill, fill, fill};
    memcpy(t, p, (size_t)n * sizeof *t);
    return vld1q_f32(t);
}

static void attn_scores(int n, int hd, int nq, const float *q, const float *kt, size_t ld, float scale, float *s,
                        size_t s_stride)
{
    for (int g = 0; g < nq; g++) {
        const float *qg = q + g * hd;
        float *sg = s + g * s_stride;
        int c = 0;
        for (; c + 16 <= n; c += 16) {
            float32x4_t a0 = vdupq_n_f32(0), a1 = a0, a2 = a0, a3 = a0;
            for (int d = 0; d < hd; d++) {
                const float32x4_t qd = vdupq_n_f32(qg[d]);
                const float *r = kt + d * ld + c;
                a0 = vfmaq_f32(a0, qd, vld1q_f32(r));
                a1 = vfmaq_f32(a1, qd, vld1q_f32(r + 4));
                a2 = vfmaq_f32(a2, qd, vld1q_f32(r + 8));
                a3 = vfmaq_f32(a3, qd, vld1q_f32(r + 12));
            }
            vst1q_f32(sg + c, vmulq_n_f32(a0, scale));
            vst1q_f32(sg + c + 4, vmulq_n_f32(a1, scale));
            vst1q_f32(sg + c + 8, vmulq_n_f32(a2, scale));
            vst1q_f32(sg + c + 12, vmulq_n_f32(a3, scale));
        }
        for (; c + 4 <= n; c += 4) {
            float32x4_t a0 = vdupq_n_f32(0);
            for (int d = 0; d < hd; d++) a0 = vfmaq_f32(a0, vdupq_n_f32(qg[d]), vld1q_f32(kt + d * ld + c));
            vst1q_f32(sg + c, vmulq_n_f32(a0, scale));
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
    const float32x4_t vm = vdupq_n_f32(max);
    double sum = 0;
    int c = 0;
    for (; c + 4 <= n; c += 4) {
        const float32x4_t e = exp_f32x4(vsubq_f32(vld1q_f32(s + c), vm));
        vst1q_f32(s + c, e);
        sum += vaddvq_f32(e);
    }
    if (c < n) {
        float t[4];
        vst1q_f32(t, exp_f32x4(vsubq_f32(load_tail(s + c, n - c, -INFINITY), vm)));
        for (int i = 0; i < n - c; i++) s[c + i] = t[i];
        sum += vaddvq_f32(vld1q_f32(t)); /* the padding lanes are exp(-inf) = 0 */
    }
    return sum;
}

static float vmax(int n, const float *s)
{
    float32x4_t m = vdupq_n_f32(-INFINITY);
    int c = 0;
    for (; c + 4 <= n; c += 4) m = vmaxq_f32(m, vld1q_f32(s + c));
    float r = vmaxvq_f32(m);
    for (; c < n; c++) r = s[c] > r ? s[c] : r;
    return r;
}

static void swiglu(int64_t n, const float *g, const float *u, float *out)
{
    const float32x4_t one = vdupq_n_f32(1.0f);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float32x4_t gv = vld1q_f32(g + i);
        const float32x4_t e = exp_f32x4(vnegq_f32(gv));
        vst1q_f32(out + i, vmulq_f32(vdivq_f32(gv, vaddq_f32(one, e)), vld1q_f32(u + i)));
    }
    if (i < n) {
        const int r = (int)(n - i);
        const float32x4_t gv = load_tail(g + i, r, 0), uv = load_tail(u + i, r, 0);
        float t[4];
        vst1q_f32(t, vmulq_f32(vdivq_f32(gv, vaddq_f32(one, exp_f32x4(vnegq_f32(gv)))), uv));
        for (int k = 0; k < r; k++) out[i + k] = t[k];
    }
}

/* The table entries this file implements (the rest stay the table's it was copied from). */
static void neon_fill(sift__kernels *k)
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
    k->rows[SIFT_TYPE_BF16] = rows_dot_bf16;
    k->rows[SIFT_TYPE_Q8_0] = rows_dot_q8_0;
    k->rows[SIFT_TYPE_Q4_0] = rows_dot_q4_0;
    k->rows[SIFT_TYPE_MXFP4] = rows_dot_mxfp4;
    k->rows[SIFT_TYPE_Q4_K] = rows_dot_q4_K;
    k->rows[SIFT_TYPE_Q5_K] = rows_dot_q5_K;
    k->rows[SIFT_TYPE_Q6_K] = rows_dot_q6_K;
    k->act_convert = act_convert;
    k->attn_scores = attn_scores;
    k->softmax_exp = softmax_exp;
    k->max = vmax;
    k->swiglu = swiglu;
}

#endif
