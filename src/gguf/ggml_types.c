/*
 * ggml_types.c - the tensor type table, half-precision conversions, and the scalar
 * reference dequantizers and quantizers.
 *
 * Design notes.
 *  - The type table mirrors ggml's type_traits (name, values per block, bytes per block)
 *    for every type number ggml still defines, so the GGUF reader can validate and size any
 *    tensor, including types sift cannot compute with. Removed type numbers (4, 5, 31-33,
 *    36-38) have no entry: a file using one is refused like ggml refuses it.
 *  - Blocks are read and written byte by byte (little-endian loads via memcpy), never
 *    through a cast struct pointer: a GGUF file may declare an alignment of 1, so a block's
 *    fp16 scale can sit at an odd address, and a misaligned uint16_t load is undefined
 *    behaviour. The struct types in ggml_types.h document the layouts and pin the sizes.
 *  - Exactness: each function performs the same floating-point operations in the same
 *    order as ggml's reference C (dequantize_row_*, quantize_row_*_ref, make_qx_quants,
 *    make_qkx2_quants, nearest_int), so results are bit-identical. Where ggml converts a
 *    float to a narrow integer directly (undefined behaviour for NaN or out-of-range values
 *    in C), sift goes through cvt_trunc(), which gives what x86's cvttss2si gives, so
 *    garbage in stays deterministic and sanitizer-clean.
 */
#include <float.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "core/status.h"
#include "gguf/ggml_types.h"

_Static_assert(sizeof(sift__block_q4_0) == 18, "q4_0 block");
_Static_assert(sizeof(sift__block_q4_1) == 20, "q4_1 block");
_Static_assert(sizeof(sift__block_q5_0) == 22, "q5_0 block");
_Static_assert(sizeof(sift__block_q5_1) == 24, "q5_1 block");
_Static_assert(sizeof(sift__block_q8_0) == 34, "q8_0 block");
_Static_assert(sizeof(sift__block_mxfp4) == 17, "mxfp4 block");
_Static_assert(sizeof(sift_block_q4_K) == 144, "q4_K block");
_Static_assert(sizeof(sift_block_q5_K) == 176, "q5_K block");
_Static_assert(sizeof(sift_block_q6_K) == 210, "q6_K block");
_Static_assert(offsetof(sift_block_q6_K, d) == 208, "q6_K layout");
_Static_assert(offsetof(sift_block_q5_K, qs) == 48, "q5_K layout");

/* ---- the type table ----------------------------------------------------------------- */

#define T(id, nm, bs, bb, q, deq, qnt) [id] = {nm, bs, bb, q, deq, qnt}
static const sift__type_traits type_table[SIFT_TYPE_COUNT] = {
    T(SIFT_TYPE_F32, "f32", 1, 4, false, sift__dequantize_row_f32, sift__quantize_row_f32),
    T(SIFT_TYPE_F16, "f16", 1, 2, false, sift__dequantize_row_f16, sift__quantize_row_f16),
    T(SIFT_TYPE_Q4_0, "q4_0", 32, 18, true, sift__dequantize_row_q4_0, sift__quantize_row_q4_0),
    T(SIFT_TYPE_Q4_1, "q4_1", 32, 20, true, sift__dequantize_row_q4_1, sift__quantize_row_q4_1),
    T(SIFT_TYPE_Q5_0, "q5_0", 32, 22, true, sift__dequantize_row_q5_0, sift__quantize_row_q5_0),
    T(SIFT_TYPE_Q5_1, "q5_1", 32, 24, true, sift__dequantize_row_q5_1, sift__quantize_row_q5_1),
    T(SIFT_TYPE_Q8_0, "q8_0", 32, 34, true, sift__dequantize_row_q8_0, sift__quantize_row_q8_0),
    T(SIFT_TYPE_Q8_1, "q8_1", 32, 36, true, NULL, NULL),
    T(SIFT_TYPE_Q2_K, "q2_K", 256, 84, true, NULL, NULL),
    T(SIFT_TYPE_Q3_K, "q3_K", 256, 110, true, NULL, NULL),
    T(SIFT_TYPE_Q4_K, "q4_K", 256, 144, true, sift_dequantize_row_q4_K, sift_quantize_row_q4_K),
    T(SIFT_TYPE_Q5_K, "q5_K", 256, 176, true, sift_dequantize_row_q5_K, sift_quantize_row_q5_K),
    T(SIFT_TYPE_Q6_K, "q6_K", 256, 210, true, sift_dequantize_row_q6_K, sift_quantize_row_q6_K),
    T(SIFT_TYPE_Q8_K, "q8_K", 256, 292, true, NULL, NULL),
    T(SIFT_TYPE_IQ2_XXS, "iq2_xxs", 256, 66, true, NULL, NULL),
    T(SIFT_TYPE_IQ2_XS, "iq2_xs", 256, 74, true, NULL, NULL),
    T(SIFT_TYPE_IQ3_XXS, "iq3_xxs", 256, 98, true, NULL, NULL),
    T(SIFT_TYPE_IQ1_S, "iq1_s", 256, 50, true, NULL, NULL),
    T(SIFT_TYPE_IQ4_NL, "iq4_nl", 32, 18, true, NULL, NULL),
    T(SIFT_TYPE_IQ3_S, "iq3_s", 256, 110, true, NULL, NULL),
    T(SIFT_TYPE_IQ2_S, "iq2_s", 256, 82, true, NULL, NULL),
    T(SIFT_TYPE_IQ4_XS, "iq4_xs", 256, 136, true, NULL, NULL),
    T(SIFT_TYPE_I8, "i8", 1, 1, false, NULL, NULL),
    T(SIFT_TYPE_I16, "i16", 1, 2, false, NULL, NULL),
    T(SIFT_TYPE_I32, "i32", 1, 4, false, NULL, NULL),
    T(SIFT_TYPE_I64, "i64", 1, 8, false, NULL, NULL),
    T(SIFT_TYPE_F64, "f64", 1, 8, false, NULL, NULL),
    T(SIFT_TYPE_IQ1_M, "iq1_m", 256, 56, true, NULL, NULL),
    T(SIFT_TYPE_BF16, "bf16", 1, 2, false, sift__dequantize_row_bf16, sift__quantize_row_bf16),
    T(SIFT_TYPE_TQ1_0, "tq1_0", 256, 54, true, NULL, NULL),
    T(SIFT_TYPE_TQ2_0, "tq2_0", 256, 66, true, NULL, NULL),
    T(SIFT_TYPE_MXFP4, "mxfp4", 32, 17, true, sift__dequantize_row_mxfp4, sift__quantize_row_mxfp4),
    T(SIFT_TYPE_NVFP4, "nvfp4", 64, 36, true, NULL, NULL),
    T(SIFT_TYPE_Q1_0, "q1_0", 128, 18, true, NULL, NULL),
    T(SIFT_TYPE_Q2_0, "q2_0", 64, 18, true, NULL, NULL),
};
#undef T

const sift__type_traits *sift__type_traits_get(int type)
{
    if (type < 0 || type >= SIFT_TYPE_COUNT || type_table[type].name == NULL) return NULL;
    return &type_table[type];
}

const char *sift_type_name(int type)
{
    const sift__type_traits *t = sift__type_traits_get(type);
    return t ? t->name : NULL;
}

int64_t sift_type_block_size(int type)
{
    const sift__type_traits *t = sift__type_traits_get(type);
    return t ? t->block_size : 0;
}

size_t sift_type_block_bytes(int type)
{
    const sift__type_traits *t = sift__type_traits_get(type);
    return t ? t->block_bytes : 0;
}

uint64_t sift__type_row_bytes(int type, int64_t n)
{
    const sift__type_traits *t = sift__type_traits_get(type);
    if (!t || n < 0 || n % t->block_size != 0) return 0;
    uint64_t blocks = (uint64_t)(n / t->block_size);
    if (blocks > UINT64_MAX / t->block_bytes) return 0;
    return blocks * t->block_bytes;
}

int sift__dequantize_row(int type, const void *src, float *dst, int64_t n)
{
    const sift__type_traits *t = sift__type_traits_get(type);
    if (!t || !t->dequantize) return SIFT_E_UNSUPPORTED;
    if (n < 0 || n % t->block_size != 0) return SIFT_E_INVAL;
    t->dequantize(src, dst, n);
    return SIFT_OK;
}

int sift__quantize_row(int type, const float *src, void *dst, int64_t n)
{
    const sift__type_traits *t = sift__type_traits_get(type);
    if (!t || !t->quantize) return SIFT_E_UNSUPPORTED;
    if (n < 0 || n % t->block_size != 0) return SIFT_E_INVAL;
    t->quantize(src, dst, n);
    return SIFT_OK;
}

/* ---- byte access and numeric helpers ------------------------------------------------------ */

static inline uint16_t ld16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static inline uint32_t ld32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static inline void st16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static inline void st32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint32_t f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* float -> int32 truncating toward zero, with x86 cvttss2si's answer (INT32_MIN) for NaN
 * and out-of-range values instead of C's undefined behaviour. */
static inline int32_t cvt_trunc(float v)
{
    if (!(v > -2147483648.0f && v < 2147483648.0f)) return INT32_MIN;
    return (int32_t)v;
}

/* ggml's nearest_int: round to nearest (ties to even) through the float adder, exact for
 * |v| <= 2^22; larger inputs give a deterministic wrong answer, as in ggml. */
static inline int nearest_int(float fval)
{
    float val = fval + 12582912.f;
    int32_t i;
    memcpy(&i, &val, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

#define MAXI(a, b) ((a) > (b) ? (a) : (b))
#define MINI(a, b) ((a) < (b) ? (a) : (b))

/* ---- half precision ---------------------------------------------------------------------- */

float sift__fp16_to_fp32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f) /* inf, or NaN made quiet (as F16C and ggml's table do) */
        return u2f(sign | 0x7f800000u | (m << 13) | (m ? 0x400000u : 0u));
    if (e != 0) return u2f(sign | ((e + 112u) << 23) | (m << 13));
    if (m == 0) return u2f(sign);
    /* subnormal: m * 2^-24, exact in float */
    float f = (float)m * 0x1p-24f;
    return sign ? -f : f;
}

uint16_t sift__fp32_to_fp16(float f)
{
    uint32_t x = f2u(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return sign | 0x7e00u;   /* NaN -> quiet NaN */
    if (ax >= 0x477ff000u) return sign | 0x7c00u;  /* >= 65520 rounds to infinity */
    if (ax >= 0x38800000u) {                       /* normal half: >= 2^-14 */
        ax += 0x0fffu + ((ax >> 13) & 1u);         /* round to nearest even at bit 13 */
        return sign | (uint16_t)((ax - 0x38000000u) >> 13);
    }
    uint32_t e = ax >> 23;
    if (e < 102) return sign; /* < 2^-25: rounds to zero */
    uint32_t m = (ax & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - e; /* 14..24: the half subnormal is m * 2^-shift */
    uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) q++;
    return sign | (uint16_t)q;
}

float sift__bf16_to_fp32(uint16_t h)
{
    return u2f((uint32_t)h << 16);
}

uint16_t sift__fp32_to_bf16(float f)
{
    uint32_t u = f2u(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 64u); /* quiet NaN */
    return (uint16_t)((u + (0x7fffu + ((u >> 16) & 1u))) >> 16);
}

/* ---- float rows ---------------------------------------------------------------------------- */

void sift__dequantize_row_f32(const void *src, float *dst, int64_t n)
{
    memcpy(dst, src, (size_t)n * sizeof(float));
}

void sift__quantize_row_f32(const float *src, void *dst, int64_t n)
{
    memcpy(dst, src, (size_t)n * sizeof(float));
}

void sift__dequantize_row_f16(const void *src, float *dst, int64_t n)
{
    const uint8_t *p = src;
    for (int64_t i = 0; i < n; i++) dst[i] = sift__fp16_to_fp32(ld16(p + 2 * i));
}

void sift__quantize_row_f16(const float *src, void *dst, int64_t n)
{
    uint8_t *p = dst;
    for (int64_t i = 0; i < n; i++) st16(p + 2 * i, sift__fp32_to_fp16(src[i]));
}

void sift__dequantize_row_bf16(const void *src, float *dst, int64_t n)
{
    const uint8_t *p = src;
    for (int64_t i = 0; i < n; i++) dst[i] = sift__bf16_to_fp32(ld16(p + 2 * i));
}

void sift__quantize_row_bf16(const float *src, void *dst, int64_t n)
{
    uint8_t *p = dst;
    for (int64_t i = 0; i < n; i++) st16(p + 2 * i, sift__fp32_to_bf16(src[i]));
}

/* ---- MXFP4 ------------------------------------------------------------------------------- */

const int8_t sift__kvalues_mxfp4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

void sift__dequantize_row_mxfp4(const void *src, float *y, int64_t n)
{
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / SIFT_QK_MXFP4; i++, b += sizeof(sift__block_mxfp4), y += SIFT_QK_MXFP4) {
        const float d = sift__e8m0_to_fp32_half(b[offsetof(sift__block_mxfp4, e)]);
        const uint8_t *qs = b + offsetof(sift__block_mxfp4, qs);
        for (int j = 0; j < SIFT_QK_MXFP4 / 2; j++) {
            y[j] = sift__kvalues_mxfp4[qs[j] & 0x0F] * d;
            y[j + SIFT_QK_MXFP4 / 2] = sift__kvalues_mxfp4[qs[j] >> 4] * d;
        }
    }
}

/* The code whose value times d is nearest x (the first of equals), as ggml's best_index_mxfp4. */
static int mxfp4_best_index(float x, float d)
{
    int best = 0;
    float best_err = fabsf(sift__kvalues_mxfp4[0] * d - x);
    for (int i = 1; i < 16; i++) {
        const float err = fabsf(sift__kvalues_mxfp4[i] * d - x);
        if (err < best_err) best = i, best_err = err;
    }
    return best;
}

/* ggml's quantize_row_mxfp4_ref: e = floor(log2(amax)) - 2 + 127, so the largest magnitude
 * lands in [4, 8) x 2^(e-127) = [8, 16) steps of d (the top code, 12, at most); every value
 * then takes its nearest code. */
void sift__quantize_row_mxfp4(const float *x, void *dst, int64_t n)
{
    uint8_t *b = dst;
    for (int64_t i = 0; i < n / SIFT_QK_MXFP4; i++, b += sizeof(sift__block_mxfp4), x += SIFT_QK_MXFP4) {
        float amax = 0.0f;
        for (int j = 0; j < SIFT_QK_MXFP4; j++)
            if (amax < fabsf(x[j])) amax = fabsf(x[j]);
        /* ggml casts the float to uint8_t directly (undefined below 0); x86 truncates through int32 */
        const uint8_t e = amax > 0.0f ? (uint8_t)cvt_trunc(floorf(log2f(amax)) - 2 + 127) : 0;
        const float d = sift__e8m0_to_fp32_half(e);
        b[offsetof(sift__block_mxfp4, e)] = e;
        uint8_t *qs = b + offsetof(sift__block_mxfp4, qs);
        for (int j = 0; j < SIFT_QK_MXFP4 / 2; j++)
            qs[j] = (uint8_t)(mxfp4_best_index(x[j], d) | mxfp4_best_index(x[j + SIFT_QK_MXFP4 / 2], d) << 4);
    }
}

/* ---- Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0 --------------------------------------------------- */

void sift__dequantize_row_q4_0(const void *src, float *y, int64_t n)
{
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / SIFT_QK4_0; i++, b += sizeof(sift__block_q4_0), y += SIFT_QK4_0) {
        const float d = sift__fp16_to_fp32(ld16(b + offsetof(sift__block_q4_0, d)));
        const uint8_t *qs = b + offsetof(sift__block_q4_0, qs);
        for (int j = 0; j < SIFT_QK4_0 / 2; j++) {
            const int x0 = (qs[j] & 0x0F) - 8;
            const int x1 = (qs[j] >> 4) - 8;
            y[j] = x0 * d;
            y[j + SIFT_QK4_0 / 2] = x1 * d;
        }
    }
}

void sift__quantize_row_q4_0(const float *x, void *dst, int64_t n)
{
    uint8_t *b = dst;
    for (int64_t i = 0; i < n / SIFT_QK4_0; i++, b += sizeof(sift__block_q4_0), x += SIFT_QK4_0) {
        float amax = 0.0f, max = 0.0f; /* largest magnitude, with its sign */
        for (int j = 0; j < SIFT_QK4_0; j++) {
            if (amax < fabsf(x[j])) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        }
        const float d = max / -8;
        const float id = d ? 1.0f / d : 0.0f;
        st16(b + offsetof(sift__block_q4_0, d), sift__fp32_to_fp16(d));
        uint8_t *qs = b + offsetof(sift__block_q4_0, qs);
        for (int j = 0; j < SIFT_QK4_0 / 2; j++) {
            const float x0 = x[j] * id;
            const float x1 = x[j + SIFT_QK4_0 / 2] * id;
            const uint8_t xi0 = (uint8_t)MINI(15, (int8_t)cvt_trunc(x0 + 8.5f));
            const uint8_t xi1 = (uint8_t)MINI(15, (int8_t)cvt_trunc(x1 + 8.5f));
            qs[j] = (uint8_t)(xi0 | (xi1 << 4));
        }
    }
}

void sift__dequantize_row_q4_1(const void *src, float *y, int64_t n)
{
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / SIFT_QK4_1; i++, b += sizeof(sift__block_q4_1), y += SIFT_QK4_1) {
        const float d = sift__fp16_to_fp32(ld16(b + offsetof(sift__block_q4_1, d)));
        const float m = sift__fp16_to_fp32(ld16(b + offsetof(sift__block_q4_1, m)));
        const uint8_t *qs = b + offsetof(sift__block_q4_1, qs);
        for (int j = 0; j < SIFT_QK4_1 / 2; j++) {
            const int x0 = qs[j] & 0x0F;
            const int x1 = qs[j] >> 4;
            y[j] = x0 * d + m;
            y[j + SIFT_QK4_1 / 2] = x1 * d + m;
        }
    }
}

void sift__quantize_row_q4_1(const float *x, void *dst, int64_t n)
{
    uint8_t *b = dst;
    for (int64_t i = 0; i < n / SIFT_QK4_1; i++, b += sizeof(sift__block_q4_1), x += SIFT_QK4_1) {
        float min = FLT_MAX, max = -FLT_MAX;
        for (int j = 0; j < SIFT_QK4_1; j++) {
            if (x[j] < min) min = x[j];
            if (x[j] > max) max = x[j];
        }
        const float d = (max - min) / ((1 << 4) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        st16(b + offsetof(sift__block_q4_1, d), sift__fp32_to_fp16(d));
        st16(b + offsetof(sift__block_q4_1, m), sift__fp32_to_fp16(min));
        uint8_t *qs = b + offsetof(sift__block_q4_1, qs);
        for (int j = 0; j < SIFT_QK4_1 / 2; j++) {
            const float x0 = (x[j] - min) * id;
            const float x1 = (x[j + SIFT_QK4_1 / 2] - min) * id;
            const uint8_t xi0 = (uint8_t)MINI(15, (int8_t)cvt_trunc(x0 + 0.5f));
            const uint8_t xi1 = (uint8_t)MINI(15, (int8_t)cvt_trunc(x1 + 0.5f));
            qs[j] = (uint8_t)(xi0 | (xi1 << 4));
        }
    }
}

void sift__dequantize_row_q5_0(const void *src, float *y, int64_t n)
{
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / SIFT_QK5_0; i++, b += sizeof(sift__block_q5_0), y += SIFT_QK5_0) {
        const float d = sift__fp16_to_fp32(ld16(b + offsetof(sift__block_q5_0, d)));
        const uint32_t qh = ld32(b + offsetof(sift__block_q5_0, qh));
        const uint8_t *qs = b + offsetof(sift__block_q5_0, qs);
        for (int j = 0; j < SIFT_QK5_0 / 2; j++) {
            const uint8_t xh_0 = (uint8_t)(((qh >> (j + 0)) << 4) & 0x10);
            const uint8_t xh_1 = (uint8_t)((qh >> (j + 12)) & 0x10);
            const int32_t x0 = ((qs[j] & 0x0F) | xh_0) - 16;
            const int32_t x1 = ((qs[j] >> 4) | xh_1) - 16;
            y[j] = x0 * d;
            y[j + SIFT_QK5_0 / 2] = x1 * d;
        }
    }
}

void sift__quantize_row_q5_0(const float *x, void *dst, int64_t n)
{
    uint8_t *b = dst;
    for (int64_t i = 0; i < n / SIFT_QK5_0; i++, b += sizeof(sift__block_q5_0), x += SIFT_QK5_0) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < SIFT_QK5_0; j++) {
            if (amax < fabsf(x[j])) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        }
        const float d = max / -16;
        const float id = d ? 1.0f / d : 0.0f;
        st16(b + offsetof(sift__block_q5_0, d), sift__fp32_to_fp16(d));
        uint8_t *qs = b + offsetof(sift__block_q5_0, qs);
        uint32_t qh = 0;
        for (int j = 0; j < SIFT_QK5_0 / 2; j++) {
            const float x0 = x[j] * id;
            const float x1 = x[j + SIFT_QK5_0 / 2] * id;
            const uint8_t xi0 = (uint8_t)MINI(31, (int8_t)cvt_trunc(x0 + 16.5f));
            const uint8_t xi1 = (uint8_t)MINI(31, (int8_t)cvt_trunc(x1 + 16.5f));
            qs[j] = (uint8_t)((xi0 & 0x0F) | ((xi1 & 0x0F) << 4));
            qh |= ((xi0 & 0x10u) >> 4) << (j + 0);
            qh |= ((xi1 & 0x10u) >> 4) << (j + SIFT_QK5_0 / 2);
        }
        st32(b + offsetof(sift__block_q5_0, qh), qh);
    }
}

void sift__dequantize_row_q5_1(const void *src, float *y, int64_t n)
{
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / SIFT_QK5_1; i++, b += sizeof(sift__block_q5_1), y += SIFT_QK5_1) {
        const float d = sift__fp16_to_fp32(ld16(b + offsetof(sift__block_q5_1, d)));
        const float m = sift__fp16_to_fp32(ld16(b + offsetof(sift__block_q5_1, m)));
        const uint32_t qh = ld32(b + offsetof(sift__block_q5_1, qh));
        const uint8_t *qs = b + offsetof(sift__block_q5_1, qs);
        for (int j = 0; j < SIFT_QK5_1 / 2; j++) {
            const uint8_t xh_0 = (uint8_t)(((qh >> (j + 0)) << 4) & 0x10);
            const uint8_t xh_1 = (uint8_t)((qh >> (j + 12)) & 0x10);
            const int x0 = (qs[j] & 0x0F) | xh_0;
            const int x1 = (qs[j] >> 4) | xh_1;
            y[j] = x0 * d + m;
            y[j + SIFT_QK5_1 / 2] = x1 * d + m;
        }
    }
}

void sift__quantize_row_q5_1(const float *x, void *dst, int64_t n)
{
    uint8_t *b = dst;
    for (int64_t i = 0; i < n / SIFT_QK5_1; i++, b += sizeof(sift__block_q5_1), x += SIFT_QK5_1) {
        float min = FLT_MAX, max = -FLT_MAX;
        for (int j = 0; j < SIFT_QK5_1; j++) {
            if (x[j] < min) min = x[j];
            if (x[j] > max) max = x[j];
        }
        const float d = (max - min) / ((1 << 5) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        st16(b + offsetof(sift__block_q5_1, d), sift__fp32_to_fp16(d));
        st16(b + offsetof(sift__block_q5_1, m), sift__fp32_to_fp16(min));
        uint8_t *qs = b + offsetof(sift__block_q5_1, qs);
        uint32_t qh = 0;
        for (int j = 0; j < SIFT_QK5_1 / 2; j++) {
            const float x0 = (x[j] - min) * id;
            const float x1 = (x[j + SIFT_QK5_1 / 2] - min) * id;
            const uint8_t xi0 = (uint8_t)cvt_trunc(x0 + 0.5f);
            const uint8_t xi1 = (uint8_t)cvt_trunc(x1 + 0.5f);
            qs[j] = (uint8_t)((xi0 & 0x0F) | ((xi1 & 0x0F) << 4));
            qh |= ((xi0 & 0x10u) >> 4) << (j + 0);
            qh |= ((xi1 & 0x10u) >> 4) << (j + SIFT_QK5_1 / 2);
        }
        st32(b + offsetof(sift__block_q5_1, qh), qh);
    }
}

void sift__dequantize_row_q8_0(const void *src, float *y, int64_t n)
{
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / SIFT_QK8_0; i++, b += sizeof(sift__block_q8_0), y += SIFT_QK8_0) {
        const float d = sift__fp16_to_fp32(ld16(b + offsetof(sift__block_q8_0, d)));
        const int8_t *qs = (const int8_t *)(b + offsetof(sift__block_q8_0, qs));
        for (int j = 0; j < SIFT_QK8_0; j++) y[j] = qs[j] * d;
    }
}

void sift__quantize_row_q8_0(const float *x, void *dst, int64_t n)
{
    uint8_t *b = dst;
    for (int64_t i = 0; i < n / SIFT_QK8_0; i++, b += sizeof(sift__block_q8_0), x += SIFT_QK8_0) {
        float amax = 0.0f;
        for (int j = 0; j < SIFT_QK8_0; j++) amax = amax > fabsf(x[j]) ? amax : fabsf(x[j]); /* ggml's MAX() */
        const float d = amax / ((1 << 7) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        st16(b + offsetof(sift__block_q8_0, d), sift__fp32_to_fp16(d));
        int8_t *qs = (int8_t *)(b + offsetof(sift__block_q8_0, qs));
        for (int j = 0; j < SIFT_QK8_0; j++) qs[j] = (int8_t)cvt_trunc(roundf(x[j] * id));
    }
}

/* ---- K-quants ------------------------------------------------------------------------------ */

/* The 6-bit scale and min of sub-block j (0..7) of a Q4_K/Q5_K block: sub-blocks 0-3 keep
 * them in the low 6 bits of scales[j] and scales[j+4]; 4-7 split them into a nibble of
 * scales[j+4] and the top 2 bits of scales[j-4] (scale) and scales[j] (min). */
static inline void get_scale_min_k4(int j, const uint8_t *q, uint8_t *d, uint8_t *m)
{
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4));
    }
}

void sift_dequantize_row_q4_K(const void *src, float *y, int64_t n)
{
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / SIFT_QK_K; i++, b += sizeof(sift_block_q4_K)) {
        const float d = sift__fp16_to_fp32(ld16(b + offsetof(sift_block_q4_K, d)));
        const float min = sift__fp16_to_fp32(ld16(b + offsetof(sift_block_q4_K, dmin)));
        const uint8_t *scales = b + offsetof(sift_block_q4_K, scales);
        const uint8_t *q = b + offsetof(sift_block_q4_K, qs);
        int is = 0;
        uint8_t sc, m;
        for (int j = 0; j < SIFT_QK_K; j += 64) {
            get_scale_min_k4(is + 0, scales, &sc, &m);
            const float d1 = d * sc, m1 = min * m;
            get_scale_min_k4(is + 1, scales, &sc, &m);
            const float d2 = d * sc, m2 = min * m;
            for (int l = 0; l < 32; l++) *y++ = d1 * (q[l] & 0xF) - m1;
            for (int l = 0; l < 32; l++) *y++ = d2 * (q[l] >> 4) - m2;
            q += 32;
            is += 2;
        }
    }
}

void sift_dequantize_row_q5_K(const void *src, float *y, int64_t n)
{
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / SIFT_QK_K; i++, b += sizeof(sift_block_q5_K)) {
        const float d = sift__fp16_to_fp32(ld16(b + offsetof(sift_block_q5_K, d)));
        const float min = sift__fp16_to_fp32(ld16(b + offsetof(sift_block_q5_K, dmin)));
        const uint8_t *scales = b + offsetof(sift_block_q5_K, scales);
        const uint8_t *ql = b + offsetof(sift_block_q5_K, qs);
        const uint8_t *qh = b + offsetof(sift_block_q5_K, qh);
        int is = 0;
        uint8_t sc, m;
        uint8_t u1 = 1, u2 = 2;
        for (int j = 0; j < SIFT_QK_K; j += 64) {
            get_scale_min_k4(is + 0, scales, &sc, &m);
            const float d1 = d * sc, m1 = min * m;
            get_scale_min_k4(is + 1, scales, &sc, &m);
            const float d2 = d * sc, m2 = min * m;
            for (int l = 0; l < 32; l++) *y++ = d1 * ((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
            for (int l = 0; l < 32; l++) *y++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
            ql += 32;
            is += 2;
            u1 = (uint8_t)(u1 << 2);
            u2 = (uint8_t)(u2 << 2);
        }
    }
}

void sift_dequantize_row_q6_K(const void *src, float *y, int64_t n)
{
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / SIFT_QK_K; i++, b += sizeof(sift_block_q6_K)) {
        const float d = sift__fp16_to_fp32(ld16(b + offsetof(sift_block_q6_K, d)));
        const uint8_t *ql = b + offsetof(sift_block_q6_K, ql);
        const uint8_t *qh = b + offsetof(sift_block_q6_K, qh);
        const int8_t *sc = (const int8_t *)(b + offsetof(sift_block_q6_K, scales));
        for (int k = 0; k < SIFT_QK_K; k += 128) {
            for (int l = 0; l < 32; l++) {
                const int is = l / 16;
                const int8_t q1 = (int8_t)((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int8_t q2 = (int8_t)((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int8_t q3 = (int8_t)((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int8_t q4 = (int8_t)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l + 0] = d * sc[is + 0] * q1;
                y[l + 32] = d * sc[is + 2] * q2;
                y[l + 64] = d * sc[is + 4] * q3;
                y[l + 96] = d * sc[is + 6] * q4;
            }
            y += 128;
            ql += 64;
            qh += 32;
            sc += 8;
        }
    }
}

/* ggml's make_qkx2_quants: fit x[0..n) ~ scale * L + min with L in [0, nmax], min <= 0,
 * minimizing the weighted squared error over a small grid of scales (nstep + 1 tries
 * around nmax / (max - min)). Returns the scale, stores -min in *the_min. */
static float make_qkx2_quants(int n, int nmax, const float *x, const float *weights, uint8_t *L,
                              float *the_min, uint8_t *Laux, float rmin, float rdelta, int nstep)
{
    float min = x[0], max = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; ++i) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        float w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        *the_min = -min;
        return 0.f;
    }
    float iscale = nmax / (max - min);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; ++i) {
        int l = nearest_int(iscale * (x[i] - min));
        L[i] = (uint8_t)MAXI(0, MINI(nmax, l));
        float diff = scale * L[i] + min - x[i];
        diff = diff * diff;
        best_error += weights[i] * diff;
    }
    for (int is = 0; is <= nstep; ++is) {
        iscale = (rmin + rdelta * is + nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; ++i) {
            int l = nearest_int(iscale * (x[i] - min));
            l = MAXI(0, MINI(nmax, l));
            Laux[i] = (uint8_t)l;
            float w = weights[i];
            sum_l += w * l;
            sum_l2 += w * l * l;
            sum_xl += w * l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0;
            for (int i = 0; i < n; ++i) {
                float diff = this_scale * Laux[i] + this_min - x[i];
                diff = diff * diff;
                cur_error += weights[i] * diff;
            }
            if (cur_error < best_error) {
                for (int i = 0; i < n; ++i) L[i] = Laux[i];
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

/* ggml's make_qx_quants with rmse_type 1 and no importance weights (weights = x^2): fit
 * x ~ scale * (L - nmax), L in [0, 2 nmax), trying 18 scales around -nmax / max. */
static float make_qx_quants_rmse1(int n, int nmax, const float *x, int8_t *L)
{
    float max = 0, amax = 0;
    for (int i = 0; i < n; ++i) {
        float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < 1e-15f) { /* GROUP_MAX_EPS: all zero */
        for (int i = 0; i < n; ++i) L[i] = 0;
        return 0.f;
    }
    float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
        int l = nearest_int(iscale * x[i]);
        l = MAXI(-nmax, MINI(nmax - 1, l));
        L[i] = (int8_t)(l + nmax);
        float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; ++is) {
        if (is == 0) continue;
        iscale = -(nmax + 0.1f * is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; ++i) {
            int l = nearest_int(iscale * x[i]);
            l = MAXI(-nmax, MINI(nmax - 1, l));
            float w = x[i] * x[i];
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; ++i) {
                int l = nearest_int(iscale * x[i]);
                L[i] = (int8_t)(nmax + MAXI(-nmax, MINI(nmax - 1, l)));
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* Shared by Q4_K and Q5_K: per 32-value sub-block scale/min fits, then the 6-bit packing of
 * scales and mins, then the final L[] against the rounded scales. nmax = 15 or 31. */
static void quantize_k_scales(const float *x, uint8_t *blk_d, uint8_t *blk_dmin, uint8_t *scales_out,
                              uint8_t L[SIFT_QK_K], int nmax, float rmin, float rdelta, int nstep)
{
    uint8_t Laux[32];
    float weights[32], mins[SIFT_QK_K / 32], scales[SIFT_QK_K / 32];
    float max_scale = 0, max_min = 0; /* scales are positive since the min is subtracted */
    for (int j = 0; j < SIFT_QK_K / 32; ++j) {
        float sum_x2 = 0;
        for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
        float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; ++l) weights[l] = av_x + fabsf(x[32 * j + l]);
        scales[j] = make_qkx2_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin, rdelta, nstep);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    for (int j = 0; j < SIFT_QK_K / 32; ++j) {
        uint8_t ls = (uint8_t)nearest_int(inv_scale * scales[j]);
        uint8_t lm = (uint8_t)nearest_int(inv_min * mins[j]);
        ls = MINI(63, ls);
        lm = MINI(63, lm);
        if (j < 4) {
            scales_out[j] = ls;
            scales_out[j + 4] = lm;
        } else {
            scales_out[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
            scales_out[j - 4] |= (uint8_t)((ls >> 4) << 6);
            scales_out[j - 0] |= (uint8_t)((lm >> 4) << 6);
        }
    }
    const uint16_t dh = sift__fp32_to_fp16(max_scale / 63.f), dminh = sift__fp32_to_fp16(max_min / 63.f);
    st16(blk_d, dh);
    st16(blk_dmin, dminh);
    uint8_t sc, m;
    for (int j = 0; j < SIFT_QK_K / 32; ++j) {
        get_scale_min_k4(j, scales_out, &sc, &m);
        const float d = sift__fp16_to_fp32(dh) * sc;
        if (!d) continue;
        const float dm = sift__fp16_to_fp32(dminh) * m;
        for (int ii = 0; ii < 32; ++ii) {
            int l = nearest_int((x[32 * j + ii] + dm) / d);
            L[32 * j + ii] = (uint8_t)MAXI(0, MINI(nmax, l));
        }
    }
}

void sift_quantize_row_q4_K(const float *x, void *dst, int64_t n)
{
    uint8_t *b = dst;
    uint8_t L[SIFT_QK_K];
    for (int64_t i = 0; i < n / SIFT_QK_K; i++, b += sizeof(sift_block_q4_K), x += SIFT_QK_K) {
        uint8_t *scales = b + offsetof(sift_block_q4_K, scales);
        memset(scales, 0, SIFT_K_SCALE_SIZE); /* (ggml's ref fully overwrites these too) */
        quantize_k_scales(x, b + offsetof(sift_block_q4_K, d), b + offsetof(sift_block_q4_K, dmin), scales, L,
                          15, -1.f, 0.1f, 20);
        uint8_t *q = b + offsetof(sift_block_q4_K, qs);
        for (int j = 0; j < SIFT_QK_K; j += 64) {
            for (int l = 0; l < 32; ++l) q[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
            q += 32;
        }
    }
}

void sift_quantize_row_q5_K(const float *x, void *dst, int64_t n)
{
    uint8_t *b = dst;
    uint8_t L[SIFT_QK_K];
    for (int64_t i = 0; i < n / SIFT_QK_K; i++, b += sizeof(sift_block_q5_K), x += SIFT_QK_K) {
        uint8_t *scales = b + offsetof(sift_block_q5_K, scales);
        memset(scales, 0, SIFT_K_SCALE_SIZE);
        quantize_k_scales(x, b + offsetof(sift_block_q5_K, d), b + offsetof(sift_block_q5_K, dmin), scales, L,
                          31, -0.5f, 0.1f, 15);
        uint8_t *qh = b + offsetof(sift_block_q5_K, qh);
        uint8_t *ql = b + offsetof(sift_block_q5_K, qs);
        memset(qh, 0, SIFT_QK_K / 8);
        uint8_t m1 = 1, m2 = 2;
        for (int k = 0; k < SIFT_QK_K; k += 64) {
            for (int j = 0; j < 32; ++j) {
                int l1 = L[k + j];
                if (l1 > 15) {
                    l1 -= 16;
                    qh[j] |= m1;
                }
                int l2 = L[k + j + 32];
                if (l2 > 15) {
                    l2 -= 16;
                    qh[j] |= m2;
                }
                ql[j] = (uint8_t)(l1 | (l2 << 4));
            }
            m1 = (uint8_t)(m1 << 2);
            m2 = (uint8_t)(m2 << 2);
            ql += 32;
        }
    }
}

void sift_quantize_row_q6_K(const float *x, void *dst, int64_t n)
{
    uint8_t *b = dst;
    int8_t L[SIFT_QK_K];
    float scales[SIFT_QK_K / 16];
    for (int64_t i = 0; i < n / SIFT_QK_K; i++, b += sizeof(sift_block_q6_K), x += SIFT_QK_K) {
        float max_scale = 0, max_abs_scale = 0;
        for (int ib = 0; ib < SIFT_QK_K / 16; ++ib) {
            const float scale = make_qx_quants_rmse1(16, 32, x + 16 * ib, L + 16 * ib);
            scales[ib] = scale;
            const float abs_scale = fabsf(scale);
            if (abs_scale > max_abs_scale) {
                max_abs_scale = abs_scale;
                max_scale = scale;
            }
        }
        if (max_abs_scale < 1e-15f) {
            memset(b, 0, sizeof(sift_block_q6_K));
            st16(b + offsetof(sift_block_q6_K, d), sift__fp32_to_fp16(0.f));
            continue;
        }
        int8_t *bsc = (int8_t *)(b + offsetof(sift_block_q6_K, scales));
        float iscale = -128.f / max_scale;
        const uint16_t dh = sift__fp32_to_fp16(1 / iscale);
        st16(b + offsetof(sift_block_q6_K, d), dh);
        for (int ib = 0; ib < SIFT_QK_K / 16; ++ib) bsc[ib] = (int8_t)MINI(127, nearest_int(iscale * scales[ib]));
        for (int j = 0; j < SIFT_QK_K / 16; ++j) {
            float d = sift__fp16_to_fp32(dh) * bsc[j];
            if (!d) continue;
            for (int ii = 0; ii < 16; ++ii) {
                int l = nearest_int(x[16 * j + ii] / d);
                l = MAXI(-32, MINI(31, l));
                L[16 * j + ii] = (int8_t)(l + 32);
            }
        }
        uint8_t *ql = b + offsetof(sift_block_q6_K, ql);
        uint8_t *qh = b + offsetof(sift_block_q6_K, qh);
        for (int j = 0; j < SIFT_QK_K; j += 128) {
            for (int l = 0; l < 32; ++l) {
                const uint8_t q1 = L[j + l + 0] & 0xF;
                const uint8_t q2 = L[j + l + 32] & 0xF;
                const uint8_t q3 = L[j + l + 64] & 0xF;
                const uint8_t q4 = L[j + l + 96] & 0xF;
                ql[l + 0] = (uint8_t)(q1 | (q3 << 4));
                ql[l + 32] = (uint8_t)(q2 | (q4 << 4));
                qh[l] = (uint8_t)((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) | ((L[j + l + 64] >> 4) << 4) |
                                  ((L[j + l + 96] >> 4) << 6));
            }
            ql += 64;
            qh += 32;
        }
    }
}
