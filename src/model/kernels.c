/*
 * kernels.c - the scalar kernels (the reference every SIMD kernel is tested against), the
 * activation converters, and the run-time choice of a kernel table.
 *
 * Scalar code is written for clarity first: one loop per idea, integer sums where the
 * packed formats allow them (they are exact, so the SIMD versions can reorder them freely),
 * float accumulation in a fixed order. Where ggml's own scalar code accumulates in double
 * (F16 dot products, the softmax sum), so does this, which keeps sift within a rounding of
 * llama.cpp on the F16 test model, whose greedy margins go down to 5e-6.
 *
 * Choosing a table: sift__kernels_get() builds the tables once (pthread_once). The AVX2 and
 * AVX-512 tables (x86-64), and the NEON and NEON-dotprod ones (aarch64), are copies of the
 * table below them with the entries their files implement replaced; they are only built
 * when core/cpu.c says the CPU and OS run every instruction of the file's flag set, because
 * the compiler may use those instructions anywhere in the *_avx2.c / *_avx512.c /
 * *_neon_dotprod.c files.
 */
#include "model/kernels.h"

#include <math.h>
#include <stddef.h>
#include <pthread.h>
#include <string.h>

#include "core/cpu.h"
#include "model/repack.h"

/* ---- activation formats -------------------------------------------------------------- */

sift__act_format sift__act_format_of(sift_tensor_type type)
{
    switch (type) {
    case SIFT_TYPE_F32: return SIFT_ACT_F32;
    case SIFT_TYPE_F16: return SIFT_ACT_F16;
    case SIFT_TYPE_BF16: return SIFT_ACT_BF16;
    case SIFT_TYPE_Q8_0:
    case SIFT_TYPE_Q4_0:
    case SIFT_TYPE_MXFP4: return SIFT_ACT_Q8_0;
    case SIFT_TYPE_Q4_K:
    case SIFT_TYPE_Q5_K:
    case SIFT_TYPE_Q6_K: return SIFT_ACT_Q8_K;
    default: return SIFT_ACT_NONE;
    }
}

size_t sift__act_row_bytes(sift__act_format f, int64_t n)
{
    switch (f) {
    case SIFT_ACT_F32: return (size_t)n * sizeof(float);
    case SIFT_ACT_F16:
    case SIFT_ACT_BF16: return (size_t)n * sizeof(uint16_t);
    case SIFT_ACT_Q8_0: return (size_t)(n / SIFT_QK8_0) * sizeof(sift__block_q8_0);
    case SIFT_ACT_Q8_K: return (size_t)(n / SIFT_QK_K) * sizeof(sift_block_q8_K);
    default: return (size_t)n * sizeof(float);
    }
}

/* Round to nearest, ties to even, through the float adder (ggml's nearest_int); exact for
 * |v| <= 2^22, which quantized values always are. */
static inline int nearest_int(float v)
{
    float t = v + 12582912.f;
    int32_t i;
    memcpy(&i, &t, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

void sift_quantize_row_q8_K(const float *x, void *dst, int64_t n)
{
    sift_block_q8_K *y = dst;
    for (int64_t b = 0; b < n / SIFT_QK_K; b++, x += SIFT_QK_K) {
        float max = 0, amax = 0;
        for (int j = 0; j < SIFT_QK_K; j++) {
            float ax = fabsf(x[j]);
            if (ax > amax) {
                amax = ax;
                max = x[j];
            }
        }
        if (amax == 0) {
            memset(&y[b], 0, sizeof y[b]);
            continue;
        }
        /* -127/max, not 127/amax: the extreme value maps to -127 exactly whatever its sign */
        const float iscale = -127.f / max;
        for (int j = 0; j < SIFT_QK_K; j++) {
            int v = nearest_int(iscale * x[j]);
            y[b].qs[j] = (int8_t)(v < 127 ? v : 127);
        }
        for (int j = 0; j < SIFT_QK_K / 16; j++) {
            int sum = 0;
            for (int i = 0; i < 16; i++) sum += y[b].qs[16 * j + i];
            y[b].bsums[j] = (int16_t)sum;
        }
        y[b].d = 1 / iscale;
    }
}

/* Q8_0 activations as ggml-cpu's x86 quantize_row_q8_0 makes them (not the reference
 * quantizer): the inverse scale is 127/amax and rounding is to nearest even. */
static void quantize_act_q8_0(const float *x, void *dst, int64_t n)
{
    sift__block_q8_0 *y = dst;
    for (int64_t b = 0; b < n / SIFT_QK8_0; b++, x += SIFT_QK8_0) {
        float amax = 0;
        for (int j = 0; j < SIFT_QK8_0; j++) { /* fmaxf as a compare (a NaN keeps amax either way): no libm call */
            const float v = fabsf(x[j]);
            amax = v > amax ? v : amax;
        }
        const float d = amax / 127.f;
        const float id = amax != 0 ? 127.f / amax : 0.f;
        y[b].d = sift__fp32_to_fp16(d);
        for (int j = 0; j < SIFT_QK8_0; j++) y[b].qs[j] = (int8_t)nearest_int(x[j] * id);
    }
}

void sift__act_convert_scalar(sift__act_format f, const float *x, void *dst, int64_t n)
{
    switch (f) {
    case SIFT_ACT_F16: {
        uint16_t *h = dst;
        for (int64_t i = 0; i < n; i++) h[i] = sift__fp32_to_fp16(x[i]);
        break;
    }
    case SIFT_ACT_BF16: sift__quantize_row_bf16(x, dst, n); break;
    case SIFT_ACT_Q8_0: quantize_act_q8_0(x, dst, n); break;
    case SIFT_ACT_Q8_K: sift_quantize_row_q8_K(x, dst, n); break;
    default: memcpy(dst, x, (size_t)n * sizeof(float)); break;
    }
}

/* ---- dot products ------------------------------------------------------------------------ */

/* F32: eight running sums (a fixed order the compiler can vectorize), then the tail. */
static float dot_f32_row(int64_t n, const float *a, const float *b)
{
    float acc[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) acc[k] += a[i + k] * b[i + k];
    float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

void sift__dot_f32_scalar(int64_t n, const void *w, const void *x, size_t x_stride, int ncols, float *s)
{
    for (int j = 0; j < ncols; j++) s[j] = dot_f32_row(n, w, (const float *)((const char *)x + j * x_stride));
}

/* F16 x F16 and BF16 x BF16 (ggml converts a BF16 matrix's activations to BF16 too): each
 * product is exact in float (11- and 8-bit mantissas); summed in double as ggml's scalar
 * path does. */
static void dot_half(int64_t n, const void *w, const void *x, size_t x_stride, int ncols, float *s, float (*cvt)(uint16_t))
{
    const uint16_t *a = w;
    for (int j = 0; j < ncols; j++) {
        const uint16_t *b = (const uint16_t *)((const char *)x + j * x_stride);
        double sum = 0;
        for (int64_t i = 0; i < n; i++) sum += (double)(cvt(a[i]) * cvt(b[i]));
        s[j] = (float)sum;
    }
}

static void dot_f16(int64_t n, const void *w, const void *x, size_t x_stride, int ncols, float *s)
{
    dot_half(n, w, x, x_stride, ncols, s, sift__fp16_to_fp32);
}

static void dot_bf16(int64_t n, const void *w, const void *x, size_t x_stride, int ncols, float *s)
{
    dot_half(n, w, x, x_stride, ncols, s, sift__bf16_to_fp32);
}

static void dot_q8_0(int64_t n, const void *w, const void *x, size_t x_stride, int ncols, float *s)
{
    const sift__block_q8_0 *a = w;
    const int64_t nb = n / SIFT_QK8_0;
    for (int j = 0; j < ncols; j++) {
        const sift__block_q8_0 *b = (const sift__block_q8_0 *)((const char *)x + j * x_stride);
        float sum = 0;
        for (int64_t k = 0; k < nb; k++) {
            int isum = 0;
            for (int i = 0; i < SIFT_QK8_0; i++) isum += a[k].qs[i] * b[k].qs[i];
            sum += (float)isum * (sift__fp16_to_fp32(a[k].d) * sift__fp16_to_fp32(b[k].d));
        }
        s[j] = sum;
    }
}

/* Q4_0: value i of a block is (qs[i] & 15) - 8, value i+16 is (qs[i] >> 4) - 8. */
static void dot_q4_0(int64_t n, const void *w, const void *x, size_t x_stride, int ncols, float *s)
{
    const sift__block_q4_0 *a = w;
    const int64_t nb = n / SIFT_QK4_0;
    for (int j = 0; j < ncols; j++) {
        const sift__block_q8_0 *b = (const sift__block_q8_0 *)((const char *)x + j * x_stride);
        float sum = 0;
        for (int64_t k = 0; k < nb; k++) {
            int isum = 0;
            for (int i = 0; i < SIFT_QK4_0 / 2; i++) {
                isum += ((a[k].qs[i] & 15) - 8) * b[k].qs[i];
                isum += ((a[k].qs[i] >> 4) - 8) * b[k].qs[i + 16];
            }
            sum += (float)isum * (sift__fp16_to_fp32(a[k].d) * sift__fp16_to_fp32(b[k].d));
        }
        s[j] = sum;
    }
}

/* MXFP4 against Q8_0 (ggml's vec_dot_type for it): value i of a block is kvalues[qs[i] & 15],
 * value i+16 kvalues[qs[i] >> 4] (the doubled E2M1 values), the block's scale 2^(e - 128).
 * Per block the exact integer sum, then one float step, (float)isum * (dw * dx): dw is a
 * power of two, so dw * dx is exact and the step is ggml's d * sumi with d = dx * dw. */
static void dot_mxfp4(int64_t n, const void *w, const void *x, size_t x_stride, int ncols, float *s)
{
    const sift__block_mxfp4 *a = w;
    const int64_t nb = n / SIFT_QK_MXFP4;
    for (int j = 0; j < ncols; j++) {
        const sift__block_q8_0 *b = (const sift__block_q8_0 *)((const char *)x + j * x_stride);
        float sum = 0;
        for (int64_t k = 0; k < nb; k++) {
            int isum = 0;
            for (int i = 0; i < SIFT_QK_MXFP4 / 2; i++) {
                isum += sift__kvalues_mxfp4[a[k].qs[i] & 15] * b[k].qs[i];
                isum += sift__kvalues_mxfp4[a[k].qs[i] >> 4] * b[k].qs[i + 16];
            }
            sum += (float)isum * (sift__e8m0_to_fp32_half(a[k].e) * sift__fp16_to_fp32(b[k].d));
        }
        s[j] = sum;
    }
}

/* The 6-bit scale and min of sub-block j of a Q4_K block (see ggml_types.c). */
static inline void q4k_scale_min(int j, const uint8_t *q, int *sc, int *m)
{
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

/* Q4_K and Q5_K: 8 sub-blocks of 32 values, sub-block j with a 6-bit scale sc_j and min m_j;
 * value = d*sc*q - dmin*m. The min part only needs the activation sums (bsums), so per
 * block: d_w*d_x*sum(sc_j*isum_j) - dmin_w*d_x*sum(m_j*bsum_j). Both blocks start with d,
 * dmin and the twelve scale bytes; unpack gives a block's 256 unsigned values (0..15, or
 * 0..31 for Q5_K) in element order. */
_Static_assert(offsetof(sift_block_q5_K, d) == offsetof(sift_block_q4_K, d) &&
                   offsetof(sift_block_q5_K, dmin) == offsetof(sift_block_q4_K, dmin) &&
                   offsetof(sift_block_q5_K, scales) == offsetof(sift_block_q4_K, scales),
               "Q4_K and Q5_K blocks share their header");
typedef void (*kmin_unpack_fn)(const void *blk, uint8_t q[SIFT_QK_K]);

static void dot_kmin(int64_t n, const void *w, size_t block_bytes, kmin_unpack_fn unpack, const void *x, size_t x_stride,
                     int ncols, float *s)
{
    const int64_t nb = n / SIFT_QK_K;
    for (int c = 0; c < ncols; c++) {
        const sift_block_q8_K *b = (const sift_block_q8_K *)((const char *)x + c * x_stride);
        float sum = 0;
        for (int64_t k = 0; k < nb; k++) {
            const uint8_t *blk = (const uint8_t *)w + k * block_bytes;
            uint16_t d, dmin;
            memcpy(&d, blk + offsetof(sift_block_q4_K, d), sizeof d);
            memcpy(&dmin, blk + offsetof(sift_block_q4_K, dmin), sizeof dmin);
            uint8_t q[SIFT_QK_K];
            unpack(blk, q);
            int32_t sumi = 0, summ = 0;
            for (int j = 0; j < 8; j++) {
                int sc, m, isum = 0;
                q4k_scale_min(j, blk + offsetof(sift_block_q4_K, scales), &sc, &m);
                for (int i = 0; i < 32; i++) isum += q[32 * j + i] * b[k].qs[32 * j + i];
                sumi += sc * isum;
                summ += m * (b[k].bsums[2 * j] + b[k].bsums[2 * j + 1]);
            }
            sum += sift__fp16_to_fp32(d) * b[k].d * (float)sumi - sift__fp16_to_fp32(dmin) * b[k].d * (float)summ;
        }
        s[c] = sum;
    }
}

/* Q4_K: sub-block 2g holds the low nibbles of qs[32g..32g+32), 2g+1 the high ones. */
static void unpack_q4_K(const void *blk, uint8_t q[SIFT_QK_K])
{
    const sift_block_q4_K *a = blk;
    for (int e = 0; e < SIFT_QK_K; e++) q[e] = (uint8_t)((a->qs[32 * (e / 64) + e % 32] >> (e % 64 >= 32 ? 4 : 0)) & 15);
}

/* Q5_K: Q4_K's nibbles plus a fifth bit, bit j of qh[i] for value i of sub-block j. */
static void unpack_q5_K(const void *blk, uint8_t q[SIFT_QK_K])
{
    const sift_block_q5_K *a = blk;
    for (int e = 0; e < SIFT_QK_K; e++)
        q[e] = (uint8_t)(((a->qs[32 * (e / 64) + e % 32] >> (e % 64 >= 32 ? 4 : 0)) & 15) | (((a->qh[e % 32] >> (e / 32)) & 1) << 4));
}

static void dot_q4_K(int64_t n, const void *w, const void *x, size_t x_stride, int ncols, float *s)
{
    dot_kmin(n, w, sizeof(sift_block_q4_K), unpack_q4_K, x, x_stride, ncols, s);
}

static void dot_q5_K(int64_t n, const void *w, const void *x, size_t x_stride, int ncols, float *s)
{
    dot_kmin(n, w, sizeof(sift_block_q5_K), unpack_q5_K, x, x_stride, ncols, s);
}

/* Q4_K in the x8 layout (repack.h): each row's block taken back out of its group, then the
 * block's dot product as above. The scalar code's sum over blocks starts at 0 and adds each
 * block's term; a term computed alone is 0 + term, which equals term except that -0 becomes
 * +0, and adding +0 or -0 to a sum that starts at +0 gives the same sums: bit for bit. */
#define K_GEMM_X8(NAME, BLOCK, XBLOCK)                                                                                \
    static void gemm_x8_##NAME(int64_t n, const void *w, size_t row_bytes, int64_t n_out, int64_t r0, int64_t r1,       \
                               const void *x, size_t xs, int64_t n_cols, float *out, int64_t os)                      \
    {                                                                                                                  \
        const int64_t nb = n / SIFT_QK_K, n8 = n_out / 8 * 8;                                                          \
        for (int64_t r = r0; r < r1; r++) {                                                                            \
            const char *row = (const char *)w + r * row_bytes;                                                         \
            for (int64_t c = 0; c < n_cols; c += SIFT_DOT_MAX_COLS) {                                                  \
                const int nc = n_cols - c < SIFT_DOT_MAX_COLS ? (int)(n_cols - c) : SIFT_DOT_MAX_COLS;                 \
                const char *xc = (const char *)x + c * xs;                                                             \
                float s[SIFT_DOT_MAX_COLS];                                                                            \
                if (r >= n8) {                                                                                         \
                    dot_##NAME(n, row, xc, xs, nc, s);                                                                 \
                } else {                                                                                               \
                    const XBLOCK *grp = (const XBLOCK *)((const char *)w + r / 8 * 8 * row_bytes);                     \
                    for (int j = 0; j < nc; j++) s[j] = 0;                                                             \
                    for (int64_t k = 0; k < nb; k++) {                                                                 \
                        BLOCK blk;                                                                                     \
                        float t[SIFT_DOT_MAX_COLS];                                                                    \
                        sift__##NAME##_x8_get(grp + k, (int)(r % 8), &blk);                                            \
                        dot_##NAME(SIFT_QK_K, &blk, xc + k * sizeof(sift_block_q8_K), xs, nc, t);                      \
                        for (int j = 0; j < nc; j++) s[j] += t[j];                                                     \
                    }                                                                                                  \
                }                                                                                                      \
                for (int j = 0; j < nc; j++) out[(c + j) * os + r - r0] = s[j];                                        \
            }                                                                                                          \
        }                                                                                                              \
    }

K_GEMM_X8(q4_K, sift_block_q4_K, sift_block_q4_Kx8)
/* Q5_K in its x8 layout (repack.h), the same way. */
K_GEMM_X8(q5_K, sift_block_q5_K, sift_block_q5_Kx8)

/* Q8_0 in the x8 layout (repack.h): each row's block taken back out of its group, then the
 * block's integer sum and float step as dot_q8_0 does them, in its order: bit for bit. */
static void gemm_x8_q8_0(int64_t n, const void *w, size_t row_bytes, int64_t n_out, int64_t r0, int64_t r1, const void *x,
                         size_t xs, int64_t n_cols, float *out, int64_t os)
{
    const int64_t nb = n / SIFT_QK8_0, n8 = n_out / 8 * 8;
    for (int64_t r = r0; r < r1; r++) {
        const char *row = (const char *)w + r * row_bytes;
        for (int64_t c = 0; c < n_cols; c++) {
            const sift__block_q8_0 *b = (const sift__block_q8_0 *)((const char *)x + c * xs);
            float s = 0;
            if (r >= n8) {
                dot_q8_0(n, row, b, xs, 1, &s);
            } else {
                const sift_block_q8_0x8 *grp = (const sift_block_q8_0x8 *)((const char *)w + r / 8 * 8 * row_bytes);
                for (int64_t k = 0; k < nb; k++) {
                    sift__block_q8_0 blk;
                    sift__q8_0_x8_get(grp + k, (int)(r % 8), &blk);
                    int isum = 0;
                    for (int i = 0; i < SIFT_QK8_0; i++) isum += blk.qs[i] * b[k].qs[i];
                    s += (float)isum * (sift__fp16_to_fp32(blk.d) * sift__fp16_to_fp32(b[k].d));
                }
            }
            out[c * os + r - r0] = s;
        }
    }
}

/* MXFP4 in the x8 layout (repack.h): each row's codes read out of its group, the block's
 * integer sum and float step as dot_mxfp4 does them, in its order: bit for bit. */
static void gemm_x8_mxfp4(int64_t n, const void *w, size_t row_bytes, int64_t n_out, int64_t r0, int64_t r1, const void *x,
                          size_t xs, int64_t n_cols, float *out, int64_t os)
{
    const int64_t nb = n / SIFT_QK_MXFP4, n8 = n_out / 8 * 8;
    for (int64_t r = r0; r < r1; r++) {
        const char *row = (const char *)w + r * row_bytes;
        for (int64_t c = 0; c < n_cols; c++) {
            const sift__block_q8_0 *b = (const sift__block_q8_0 *)((const char *)x + c * xs);
            float s = 0;
            if (r >= n8) {
                dot_mxfp4(n, row, b, xs, 1, &s);
            } else {
                const sift_block_mxfp4x8 *grp = (const sift_block_mxfp4x8 *)((const char *)w + r / 8 * 8 * row_bytes);
                for (int64_t k = 0; k < nb; k++) {
                    int isum = 0;
                    for (int j = 0; j < SIFT_QK_MXFP4; j++)
                        isum += sift__kvalues_mxfp4[sift__mxfp4_x8_code(grp + k, (int)(r % 8), j)] * b[k].qs[j];
                    s += (float)isum * (sift__e8m0_to_fp32_half(grp[k].e[r % 8]) * sift__fp16_to_fp32(b[k].d));
                }
            }
            out[c * os + r - r0] = s;
        }
    }
}

/* Q6_K: value e = d * scales[e/16] * (q - 32), q = 4 bits of ql | 2 bits of qh << 4 (see
 * ggml_types.c for the layout); -32 folds into the activation sums. */
static void dot_q6_K(int64_t n, const void *w, const void *x, size_t x_stride, int ncols, float *s)
{
    const sift_block_q6_K *a = w;
    const int64_t nb = n / SIFT_QK_K;
    for (int j = 0; j < ncols; j++) {
        const sift_block_q8_K *b = (const sift_block_q8_K *)((const char *)x + j * x_stride);
        float sum = 0;
        for (int64_t k = 0; k < nb; k++) {
            int8_t q[SIFT_QK_K];
            for (int h = 0; h < 2; h++) {
                const uint8_t *ql = a[k].ql + 64 * h, *qh = a[k].qh + 32 * h;
                int8_t *o = q + 128 * h;
                for (int l = 0; l < 32; l++) {
                    o[l] = (int8_t)((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4));
                    o[l + 32] = (int8_t)((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4));
                    o[l + 64] = (int8_t)((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4));
                    o[l + 96] = (int8_t)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4));
                }
            }
            int32_t sumi = 0;
            for (int sb = 0; sb < SIFT_QK_K / 16; sb++) {
                int isum = 0;
                for (int i = 0; i < 16; i++) isum += q[16 * sb + i] * b[k].qs[16 * sb + i];
                sumi += a[k].scales[sb] * (isum - 32 * b[k].bsums[sb]);
            }
            sum += sift__fp16_to_fp32(a[k].d) * b[k].d * (float)sumi;
        }
        s[j] = sum;
    }
}

/* Q6_K in its x8 layout (repack.h), as Q4_K's: each row's block back out, the block's term. */
K_GEMM_X8(q6_K, sift_block_q6_K, sift_block_q6_Kx8)

/* The one-column row loops, one per type, so the compiler can inline the dot into it. */
#define ROWS(T)                                                                                                      \
    static void rows_##T(int64_t n, const void *w, size_t row_bytes, int64_t n_rows, const void *x, float *out)      \
    {                                                                                                                \
        for (int64_t r = 0; r < n_rows; r++) dot_##T(n, (const char *)w + r * row_bytes, x, 0, 1, out + r);          \
    }
ROWS(f16)
ROWS(bf16)
ROWS(q8_0)
ROWS(q4_0)
ROWS(mxfp4)
ROWS(q4_K)
ROWS(q5_K)
ROWS(q6_K)
#undef ROWS
static void rows_f32(int64_t n, const void *w, size_t row_bytes, int64_t n_rows, const void *x, float *out)
{
    for (int64_t r = 0; r < n_rows; r++) out[r] = dot_f32_row(n, (const float *)((const char *)w + r * row_bytes), x);
}

/* ---- attention and element-wise ------------------------------------------------------------ */

static void attn_scores_scalar(int n, int hd, int nq, const float *q, const float *kt, size_t ld, float scale,
                               float *s, size_t s_stride)
{
    for (int g = 0; g < nq; g++) {
        float *sg = s + g * s_stride;
        const float *qg = q + g * hd;
        for (int c = 0; c < n; c++) sg[c] = 0;
        for (int d = 0; d < hd; d++) {
            const float qd = qg[d], *row = kt + d * ld;
            for (int c = 0; c < n; c++) sg[c] += qd * row[c];
        }
        for (int c = 0; c < n; c++) sg[c] *= scale;
    }
}

static double softmax_exp_scalar(int n, float *s, float max)
{
    double sum = 0;
    for (int c = 0; c < n; c++) {
        s[c] = expf(s[c] - max);
        sum += s[c];
    }
    return sum;
}

static float max_scalar(int n, const float *s)
{
    float m = -INFINITY;
    for (int c = 0; c < n; c++) m = s[c] > m ? s[c] : m;
    return m;
}

static void swiglu_scalar(int64_t n, const float *g, const float *u, float *out)
{
    for (int64_t i = 0; i < n; i++) out[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

/* ---- the tables -------------------------------------------------------------------------------- */

#define N_ISA (SIFT_ISA_NEON_DOTPROD + 1)
static sift__kernels tables[N_ISA];
static bool table_ok[N_ISA];
static sift__kernels avx512_plain; /* the AVX-512 table before the VNNI entries (tests) */
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static void init_scalar(sift__kernels *k)
{
    memset(k, 0, sizeof *k);
    k->isa = SIFT_ISA_SCALAR;
    k->dot[SIFT_TYPE_F32] = sift__dot_f32_scalar;
    k->dot[SIFT_TYPE_F16] = dot_f16;
    k->dot[SIFT_TYPE_BF16] = dot_bf16;
    k->dot[SIFT_TYPE_Q8_0] = dot_q8_0;
    k->dot[SIFT_TYPE_Q4_0] = dot_q4_0;
    k->dot[SIFT_TYPE_MXFP4] = dot_mxfp4;
    k->dot[SIFT_TYPE_Q4_K] = dot_q4_K;
    k->dot[SIFT_TYPE_Q5_K] = dot_q5_K;
    k->dot[SIFT_TYPE_Q6_K] = dot_q6_K;
    k->rows[SIFT_TYPE_F32] = rows_f32;
    k->rows[SIFT_TYPE_F16] = rows_f16;
    k->rows[SIFT_TYPE_BF16] = rows_bf16;
    k->rows[SIFT_TYPE_Q8_0] = rows_q8_0;
    k->rows[SIFT_TYPE_Q4_0] = rows_q4_0;
    k->rows[SIFT_TYPE_MXFP4] = rows_mxfp4;
    k->rows[SIFT_TYPE_Q4_K] = rows_q4_K;
    k->rows[SIFT_TYPE_Q5_K] = rows_q5_K;
    k->rows[SIFT_TYPE_Q6_K] = rows_q6_K;
    k->gemm_x8[SIFT_TYPE_Q4_K] = gemm_x8_q4_K;
    k->gemm_x8[SIFT_TYPE_Q5_K] = gemm_x8_q5_K;
    k->gemm_x8[SIFT_TYPE_Q6_K] = gemm_x8_q6_K;
    k->gemm_x8[SIFT_TYPE_MXFP4] = gemm_x8_mxfp4;
    k->gemm_x8[SIFT_TYPE_Q8_0] = gemm_x8_q8_0;
    k->act_convert = sift__act_convert_scalar;
    k->attn_scores = attn_scores_scalar;
    k->softmax_exp = softmax_exp_scalar;
    k->max = max_scalar;
    k->swiglu = swiglu_scalar;
}

static void init_tables(void)
{
    init_scalar(&tables[SIFT_ISA_SCALAR]);
    table_ok[SIFT_ISA_SCALAR] = true;
#if defined(__x86_64__)
    if (sift__cpu_runs(SIFT_ISA_AVX2)) {
        tables[SIFT_ISA_AVX2] = tables[SIFT_ISA_SCALAR];
        tables[SIFT_ISA_AVX2].isa = SIFT_ISA_AVX2;
        sift__kernels_init_avx2(&tables[SIFT_ISA_AVX2]);
        table_ok[SIFT_ISA_AVX2] = true;
    }
    if (sift__cpu_runs(SIFT_ISA_AVX512)) {
        tables[SIFT_ISA_AVX512] = tables[SIFT_ISA_AVX2];
        tables[SIFT_ISA_AVX512].isa = SIFT_ISA_AVX512;
        sift__kernels_init_avx512(&tables[SIFT_ISA_AVX512]);
        /* its Q4_K kernels are tuned for the plain layout (and read the x8 one with AVX2's) */
        tables[SIFT_ISA_AVX512].x8_pack[SIFT_TYPE_Q4_K] = NULL;
        table_ok[SIFT_ISA_AVX512] = true;
        avx512_plain = tables[SIFT_ISA_AVX512];
        /* VNNI is no level of its own (every AVX-512 CPU since Ice Lake has it, Skylake-X
         * has not): it replaces the Q8_0 / Q4_0 entries when the CPU has it */
        if (sift__cpu_get()->avx512vnni) sift__kernels_init_avx512vnni(&tables[SIFT_ISA_AVX512]);
    }
#elif defined(__aarch64__)
    if (sift__cpu_runs(SIFT_ISA_NEON)) {
        tables[SIFT_ISA_NEON] = tables[SIFT_ISA_SCALAR];
        tables[SIFT_ISA_NEON].isa = SIFT_ISA_NEON;
        sift__kernels_init_neon(&tables[SIFT_ISA_NEON]);
        table_ok[SIFT_ISA_NEON] = true;
    }
    if (sift__cpu_runs(SIFT_ISA_NEON_DOTPROD)) {
        tables[SIFT_ISA_NEON_DOTPROD] = tables[SIFT_ISA_NEON];
        tables[SIFT_ISA_NEON_DOTPROD].isa = SIFT_ISA_NEON_DOTPROD;
        sift__kernels_init_neon_dotprod(&tables[SIFT_ISA_NEON_DOTPROD]);
        table_ok[SIFT_ISA_NEON_DOTPROD] = true;
    }
#endif
}

sift_isa sift_isa_best(void)
{
    pthread_once(&tables_once, init_tables);
    for (int i = N_ISA - 1; i > SIFT_ISA_SCALAR; i--)
        if (table_ok[i]) return (sift_isa)i;
    return SIFT_ISA_SCALAR;
}

const char *sift_isa_name(sift_isa isa)
{
    switch (isa) {
    case SIFT_ISA_AUTO: return "auto";
    case SIFT_ISA_SCALAR: return "scalar";
    case SIFT_ISA_AVX2: return "avx2";
    case SIFT_ISA_AVX512: return "avx512";
    case SIFT_ISA_NEON: return "neon";
    case SIFT_ISA_NEON_DOTPROD: return "neon-dotprod";
    }
    return "?";
}

const sift__kernels *sift__kernels_get_avx512_plain(void)
{
    pthread_once(&tables_once, init_tables);
    return table_ok[SIFT_ISA_AVX512] ? &avx512_plain : NULL;
}

const sift__kernels *sift__kernels_get(sift_isa isa)
{
    pthread_once(&tables_once, init_tables);
    if (isa == SIFT_ISA_AUTO) isa = sift_isa_best();
    if ((int)isa < 1 || (int)isa >= N_ISA || !table_ok[isa]) return NULL;
    return &tables[isa];
}
