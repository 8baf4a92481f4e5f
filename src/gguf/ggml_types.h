/*
 * ggml_types.h - tensor element types: block layouts, half-precision conversions, and the
 * scalar reference (de)quantizers.
 *
 * Every ggml tensor type stores its values in blocks: `block_size` values packed into
 * `block_bytes` bytes (1 value in 4 bytes for F32; 32 values in 34 bytes for Q8_0; 256
 * values in 144 bytes for Q4_K). A row of n values (n a multiple of block_size) takes
 * n / block_size * block_bytes bytes. The numbers and the bit layouts below are ggml's,
 * so that sift reads and writes the same files llama.cpp does.
 *
 * The dequantize_row functions are the scalar reference: plain C, one block at a time,
 * written to give bit for bit the floats ggml's dequantize_row_* give (same operation
 * order, no fused multiply-add: the build uses -ffp-contract=off). The runtime's fast
 * dot products are checked against them. The quantize_row functions reproduce ggml's
 * quantize_row_*_ref (what llama-quantize does without an importance matrix), so a file
 * quantized by `sift quantize` is byte-identical to one quantized by llama.cpp.
 *
 * All row functions take n = number of values, which must be a multiple of the type's
 * block size (callers check; the GGUF reader already guarantees it for tensor rows).
 */
#ifndef SIFT_GGUF_GGML_TYPES_H
#define SIFT_GGUF_GGML_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sift.h"

#define SIFT_QK4_0 32
#define SIFT_QK4_1 32
#define SIFT_QK5_0 32
#define SIFT_QK5_1 32
#define SIFT_QK8_0 32
#define SIFT_QK_MXFP4 32
#define SIFT_QK_K 256
#define SIFT_K_SCALE_SIZE 12

/* Block layouts (all little-endian; fp16 fields are raw IEEE half bits). The static
 * asserts in ggml_types.c pin the sizes to ggml's. */
typedef struct {
    uint16_t d;                  /* scale */
    uint8_t qs[SIFT_QK4_0 / 2];  /* value j in the low nibble of qs[j], j+16 in the high */
} sift__block_q4_0;

typedef struct {
    uint16_t d, m;               /* scale, minimum */
    uint8_t qs[SIFT_QK4_1 / 2];
} sift__block_q4_1;

typedef struct {
    uint16_t d;
    uint8_t qh[4];               /* 5th bit of value j is bit j of this 32-bit word */
    uint8_t qs[SIFT_QK5_0 / 2];
} sift__block_q5_0;

typedef struct {
    uint16_t d, m;
    uint8_t qh[4];
    uint8_t qs[SIFT_QK5_1 / 2];
} sift__block_q5_1;

typedef struct {
    uint16_t d;
    int8_t qs[SIFT_QK8_0];
} sift__block_q8_0;

/* Q4_K: 8 sub-blocks of 32 values; 6-bit scale and min per sub-block packed in scales[12],
 * value = d * scale * q - dmin * min. */
typedef struct {
    uint16_t d, dmin;
    uint8_t scales[SIFT_K_SCALE_SIZE];
    uint8_t qs[SIFT_QK_K / 2];
} sift_block_q4_K;

/* Q5_K: as Q4_K plus a 5th bit per value in qh. */
typedef struct {
    uint16_t d, dmin;
    uint8_t scales[SIFT_K_SCALE_SIZE];
    uint8_t qh[SIFT_QK_K / 8];
    uint8_t qs[SIFT_QK_K / 2];
} sift_block_q5_K;

/* Q6_K: 16 sub-blocks of 16 values; 4 low bits in ql, 2 high bits in qh, an int8 scale per
 * sub-block; value = d * scale * (q - 32). */
typedef struct {
    uint8_t ql[SIFT_QK_K / 2];
    uint8_t qh[SIFT_QK_K / 4];
    int8_t scales[SIFT_QK_K / 16];
    uint16_t d;
} sift_block_q6_K;

/* MXFP4 (OCP microscaling FP4, gpt-oss's expert weights): 32 E2M1 values sharing one E8M0
 * exponent. ggml stores each 4-bit code as an index into sift__kvalues_mxfp4 (the E2M1
 * values doubled, so they are integers: 0, 1, 2, 3, 4, 6, 8, 12 and their negatives) and
 * halves the scale instead: value = kvalues[code] * 2^(e - 128). Value j in the low nibble
 * of qs[j], j+16 in the high (Q4_0's order). */
typedef struct {
    uint8_t e;                      /* E8M0 exponent */
    uint8_t qs[SIFT_QK_MXFP4 / 2];
} sift__block_mxfp4;

extern const int8_t sift__kvalues_mxfp4[16];

/* ggml's GGML_E8M0_TO_FP32_HALF: 2^(e - 128) (e 0 and 1: the subnormals 2^-128, 2^-127). */
static inline float sift__e8m0_to_fp32_half(uint8_t e)
{
    const uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    union {
        uint32_t u;
        float f;
    } v = {.u = bits};
    return v.f;
}

typedef void (*sift__dequantize_fn)(const void *src, float *dst, int64_t n);
typedef void (*sift__quantize_fn)(const float *src, void *dst, int64_t n);

typedef struct sift__type_traits {
    const char *name;              /* ggml's name */
    int64_t block_size;            /* values per block */
    size_t block_bytes;            /* bytes per block */
    bool is_quantized;
    sift__dequantize_fn dequantize; /* NULL where sift has none */
    sift__quantize_fn quantize;     /* NULL where sift has none */
} sift__type_traits;

/* Traits of `type`, or NULL for a number that is not a (still supported) ggml type. */
const sift__type_traits *sift__type_traits_get(int type);

/* Bytes of a row of n values; 0 if the type is unknown or n is not a whole number of
 * blocks (n >= 0). */
uint64_t sift__type_row_bytes(int type, int64_t n);

/* Dequantize n values (a multiple of the block size) of `type`; SIFT_E_UNSUPPORTED if sift
 * cannot, SIFT_E_INVAL if n is not a whole number of blocks. */
int sift__dequantize_row(int type, const void *src, float *dst, int64_t n);
/* Quantize n values into `type` as ggml's reference quantizer does; errors as above. */
int sift__quantize_row(int type, const float *src, void *dst, int64_t n);

/* IEEE half and bfloat16 <-> float. fp32 -> fp16 rounds to nearest even (as F16C's
 * vcvtps2ph and ggml's scalar code; NaN -> quiet NaN); fp32 -> bf16 rounds to nearest
 * even (NaN -> quiet NaN), as ggml. The reverse conversions are exact. */
float sift__fp16_to_fp32(uint16_t h);
uint16_t sift__fp32_to_fp16(float f);
float sift__bf16_to_fp32(uint16_t h);
uint16_t sift__fp32_to_bf16(float f);

/* The reference rows, one per type (src/dst as the block arrays above). */
void sift__dequantize_row_f32(const void *src, float *dst, int64_t n);
void sift__dequantize_row_f16(const void *src, float *dst, int64_t n);
void sift__dequantize_row_bf16(const void *src, float *dst, int64_t n);
void sift__dequantize_row_q4_0(const void *src, float *dst, int64_t n);
void sift__dequantize_row_q4_1(const void *src, float *dst, int64_t n);
void sift__dequantize_row_q5_0(const void *src, float *dst, int64_t n);
void sift__dequantize_row_q5_1(const void *src, float *dst, int64_t n);
void sift__dequantize_row_q8_0(const void *src, float *dst, int64_t n);
void sift_dequantize_row_q4_K(const void *src, float *dst, int64_t n);
void sift_dequantize_row_q5_K(const void *src, float *dst, int64_t n);
void sift_dequantize_row_q6_K(const void *src, float *dst, int64_t n);
void sift__dequantize_row_mxfp4(const void *src, float *dst, int64_t n);

void sift__quantize_row_f32(const float *src, void *dst, int64_t n);
void sift__quantize_row_f16(const float *src, void *dst, int64_t n);
void sift__quantize_row_bf16(const float *src, void *dst, int64_t n);
void sift__quantize_row_q4_0(const float *src, void *dst, int64_t n);
void sift__quantize_row_q4_1(const float *src, void *dst, int64_t n);
void sift__quantize_row_q5_0(const float *src, void *dst, int64_t n);
void sift__quantize_row_q5_1(const float *src, void *dst, int64_t n);
void sift__quantize_row_q8_0(const float *src, void *dst, int64_t n);
void sift_quantize_row_q4_K(const float *src, void *dst, int64_t n);
void sift_quantize_row_q5_K(const float *src, void *dst, int64_t n);
void sift_quantize_row_q6_K(const float *src, void *dst, int64_t n);
void sift__quantize_row_mxfp4(const float *src, void *dst, int64_t n);

#endif
