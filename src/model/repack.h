/*
 * repack.h - Q4_K, Q5_K, Q6_K and MXFP4 matrices in groups of eight rows (the "x8" layout), made at load.
 *
 * In the file's layout a Q4_K row is a run of 144-byte blocks, and a kernel working on one
 * row at a time must reduce every block's products horizontally, unpack the packed scales
 * of each row in turn, and (for prompts) can keep only a 4 x 2 tile of (row, token) sums
 * in AVX2's sixteen registers. In the x8 layout block k of rows 8g .. 8g+7 is one
 * 1152-byte sift_block_q4_Kx8 (the same bytes as the eight blocks, rearranged): every
 * 32-byte load of quants holds four consecutive values of each of the eight rows, so one
 * vector lane is one row from the first multiply to the final float step: no horizontal
 * sums, the eight rows' float steps in one register, the scales of eight rows unpacked by
 * a dozen vector operations, and a sub-block's eight partial products summed in 16 bits
 * before the one multiply by its scale (llama.cpp's AVX2 path repacks Q4_K for the same
 * reasons, into its block_q4_Kx8).
 *
 * A matrix keeps its size and its row_bytes: the first n_out / 8 * 8 rows are groups,
 * group g at data + 8g * row_bytes holding its n_in / 256 x8 blocks in order; the last
 * n_out % 8 rows stay as they were. Only weights.c's private copy is repacked, and only
 * where the load-time probe measures the layout faster (model/choose.c sets the model's
 * k_auto.x8_pack); every table has a
 * gemm_x8 entry reading the layout (the scalar one through sift__q4_K_x8_get), so contexts
 * of any ISA share the model. Results are bit for bit those of the plain layout.
 */
#ifndef SIFT_MODEL_REPACK_H
#define SIFT_MODEL_REPACK_H

#include <stddef.h>
#include <stdint.h>

#include "gguf/ggml_types.h"

/* Block k of eight Q4_K rows. With sc[j][r] / m[j][r] the 6-bit scale / min of sub-block j
 * (32 values) of row r, and q[r][i] the 4-bit value i of row r's block:
 *   sl[8j + r] = (sc[j][r] & 15) | (sc[j + 4][r] & 15) << 4       (j < 4)
 *   ml[8j + r] = the same for the mins
 *   hi[8j + r] = sc[j][r] >> 4 | (sc[j + 4][r] >> 4) << 2 | (m[j][r] >> 4) << 4 | (m[j + 4][r] >> 4) << 6
 *   qs[32 (4s + t) + 4r + u] = q[r][32s + 4t + u] | q[r][32s + 16 + 4t + u] << 4   (s < 8, t, u < 4)
 * so the low nibbles of the 32 bytes at qs + 32 (4s + t) are values 4t .. 4t+3 of sub-block
 * s of the eight rows, four to a 32-bit lane, and the high nibbles values 16 + 4t .. 19 + 4t. */
typedef struct {
    uint16_t d[8], dmin[8];
    uint8_t sl[32], ml[32], hi[32];
    uint8_t qs[1024];
} sift_block_q4_Kx8;

_Static_assert(sizeof(sift_block_q4_Kx8) == 8 * sizeof(sift_block_q4_K), "an x8 block is eight blocks rearranged");

/* Block k of rows 8g .. 8g+7 (src[r] the rows' k-th blocks) into the x8 block dst. */
void sift__q4_K_x8_pack(const sift_block_q4_K *const src[8], sift_block_q4_Kx8 *dst);
/* Row r's block back out of an x8 block (the exact inverse of the packing). */
void sift__q4_K_x8_get(const sift_block_q4_Kx8 *src, int r, sift_block_q4_K *dst);
/* Eight rows of nb blocks each (row r at rows + r * row_bytes) as nb x8 blocks at dst (not
 * overlapping them): the reference for the kernel tables' x8_pack. */
void sift__q4_K_x8_pack_group(const void *rows, size_t row_bytes, int64_t nb, void *dst);

/* Q5_K in the x8 layout: Q4_K's x8 block of the eight rows' d, dmin, scales and low four
 * bits, then their fifth bits rearranged to match (256 bytes, one byte per sub-block s, row r
 * and u < 4), with h[r][i] bit s of row r's qh[i] (the fifth bit of value i of sub-block s):
 *   qh[32s + 4r + u] bit t = h[r][4t + u], bit 4 + t = h[r][16 + 4t + u]      (t < 4)
 * so the one 32-byte load of sub-block s holds the fifth bits of all its 32 x 8 values, for
 * the four low-nibble and the four high-nibble steps of qs, each by one shift within its
 * byte. The plain one-row kernels spend most of a block on those bits and the horizontal
 * sums (the Q5_K plain kernel measured 2.5x Q4_K's x8 one per row-block). */
typedef struct {
    sift_block_q4_Kx8 q4;
    uint8_t qh[256];
} sift_block_q5_Kx8;

_Static_assert(sizeof(sift_block_q5_Kx8) == 8 * sizeof(sift_block_q5_K), "an x8 block is eight blocks rearranged");

/* Eight Q5_K rows of nb blocks (row r at rows + r * row_bytes) as nb x8 blocks at dst. */
void sift__q5_K_x8_pack_group(const void *rows, size_t row_bytes, int64_t nb, void *dst);
/* Row r's block back out of an x8 block (the exact inverse of the packing). */
void sift__q5_K_x8_get(const sift_block_q5_Kx8 *src, int r, sift_block_q5_K *dst);

/* Q6_K in the x8 layout: with q[r][i] the 6-bit value i (0..63, before the -32) of row r's
 * block and sc[j][r] its int8 scale of sub-block j (16 values), for s < 8, t, u < 4, p < 2:
 *   d[r] = row r's d, sc[8j + r] = sc[j][r]
 *   ql[32 (4s + t) + 4r + u] = q[r][32s + 4t + u] & 15 | (q[r][32s + 16 + 4t + u] & 15) << 4
 *   qh[32 (2s + p) + 4r + u] = the top two bits of q[r][32s + 4t + u] at bit 4e and of
 *                              q[r][32s + 16 + 4t + u] at bit 4e + 2, for t = 2p + e (e < 2)
 * so a 32-byte load of ql holds four values of each row of sub-block 2s (low nibbles) and
 * of 2s + 1 (high nibbles), as Q4_K's x8 qs does, and one load of qh the top bits of two
 * such steps, each moved into place by one shift within its byte. */
typedef struct {
    uint16_t d[8];
    int8_t sc[128];
    uint8_t ql[1024];
    uint8_t qh[512];
} sift_block_q6_Kx8;

_Static_assert(sizeof(sift_block_q6_Kx8) == 8 * sizeof(sift_block_q6_K), "an x8 block is eight blocks rearranged");

/* Eight Q6_K rows of nb blocks (row r at rows + r * row_bytes) as nb x8 blocks at dst. */
void sift__q6_K_x8_pack_group(const void *rows, size_t row_bytes, int64_t nb, void *dst);
/* Row r's block back out of an x8 block (the exact inverse of the packing). */
void sift__q6_K_x8_get(const sift_block_q6_Kx8 *src, int r, sift_block_q6_K *dst);

/* MXFP4 in the same x8 layout idea (gpt-oss's experts; llama.cpp's AVX2 path repacks them
 * into its block_mxfp4x8 for the same reasons): block k of rows 8g .. 8g+7 is 136 bytes, the
 * eight rows' exponents, then 128 bytes of codes, with c[r][j] the 4-bit code of value j of
 * row r's block (value j < 16 in the low nibble of qs[j], j >= 16 in the high of qs[j - 16]):
 *   e[r] = row r's exponent
 *   qs[32t + 4r + u] = c[r][8t + u] | c[r][8t + 4 + u] << 4      (t, u < 4)
 * so the low nibbles of the 32 bytes at qs + 32t are values 8t .. 8t+3 of the eight rows,
 * four to a 32-bit lane, and the high nibbles values 8t+4 .. 8t+7: the same activation
 * bytes for every lane, each row's exact block sum in its own lane. */
typedef struct {
    uint8_t e[8];
    uint8_t qs[128];
} sift_block_mxfp4x8;

_Static_assert(sizeof(sift_block_mxfp4x8) == 8 * sizeof(sift__block_mxfp4), "an x8 block is eight blocks rearranged");

/* Q8_0 in the same layout: block k of rows 8g .. 8g+7 is 272 bytes, the eight rows' scales,
 * then their 256 values, with q[r][i] value i of row r's block:
 *   d[r] = row r's scale
 *   qs[32t + 4r + u] = q[r][4t + u]      (t < 8, u < 4)
 * so the 32 bytes at qs + 32t are values 4t .. 4t+3 of the eight rows, four to a 32-bit
 * lane: every lane of a step meets the same four activation bytes, and each row's exact
 * block sum builds up in its own lane. The plain layout's one-row kernels reduce every
 * block's products across the lanes of a register before its float step (the scalar
 * order); here there is nothing to reduce, and the eight float steps run in one register. */
typedef struct {
    uint16_t d[8];
    int8_t qs[256];
} sift_block_q8_0x8;

_Static_assert(sizeof(sift_block_q8_0x8) == 8 * sizeof(sift__block_q8_0), "an x8 block is eight blocks rearranged");

/* Eight Q8_0 rows of nb blocks (row r at rows + r * row_bytes) as nb x8 blocks at dst. */
void sift__q8_0_x8_pack_group(const void *rows, size_t row_bytes, int64_t nb, void *dst);
/* Row r's block back out of an x8 block (the inverse of the packing). */
void sift__q8_0_x8_get(const sift_block_q8_0x8 *src, int r, sift__block_q8_0 *dst);

typedef void (*sift__x8_pack_fn)(const void *rows, size_t row_bytes, int64_t nb, void *dst);
/* The reference packer of type t's x8 layout (Q4_K, Q5_K, Q6_K, MXFP4, Q8_0), or NULL where it has none. */
sift__x8_pack_fn sift__x8_pack_ref(sift_tensor_type t);

/* Eight MXFP4 rows of nb blocks (row r at rows + r * row_bytes) as nb x8 blocks at dst. */
void sift__mxfp4_x8_pack_group(const void *rows, size_t row_bytes, int64_t nb, void *dst);
/* The 4-bit code of value j (< 32) of row r in an x8 block (the inverse of the packing). */
static inline int sift__mxfp4_x8_code(const sift_block_mxfp4x8 *b, int r, int j)
{
    const int t = j / 8, u = j % 4, hi = j % 8 >= 4;
    const uint8_t byte = b->qs[32 * t + 4 * r + u];
    return hi ? byte >> 4 : byte & 15;
}

#endif
