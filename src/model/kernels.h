/*
 * kernels.h - the numeric kernels of the forward pass, one table per instruction set.
 *
 * The forward pass spends its time in three places: weight matrix × activations (dot
 * products of a weight row with activation rows), attention (scores against the cached K,
 * a softmax, a weighted sum of the cached V) and a few element-wise functions (SwiGLU).
 * Each of those is a function pointer in sift__kernels; sift__kernels_get(isa) returns the
 * table for the scalar reference, AVX2 or AVX-512. The SIMD tables start as a copy of the
 * scalar one and override what they implement, so every entry always exists, and
 * tests/test_kernels.c compares every SIMD entry with its scalar counterpart.
 *
 * Weight × activation products work the way ggml's do: activations are first converted,
 * once per matrix product, to the "activation format" of the weight type (F32 stays F32,
 * F16 weights take F16 activations, BF16 BF16, Q8_0 and Q4_0 take Q8_0, the K-quants Q8_K), and
 * the kernel then computes dot products on the two packed forms. That makes the integer
 * kernels exact up to the final float accumulation, and makes sift's logits for a quantized
 * model close to llama.cpp's own (the same rounding of the activations happens in both).
 *
 * A dot kernel computes one weight row against up to SIFT_DOT_MAX_COLS activation rows at
 * once, so a weight row is loaded (and for quantized types unpacked) once per group of
 * tokens: that is what makes a prompt batch a matrix × matrix product instead of a series
 * of matrix × vector products. Each column is accumulated exactly as it would be alone, so
 * a token's result never depends on how many tokens share its group (a test checks it bit
 * for bit): batched and unbatched decoding give the same logits.
 *
 * Where a type's per-token work is more than the weight bytes it reads (Q8_0 and Q4_0:
 * reducing every 32-value block to its exact integer sum; the K-quants: unpacking the
 * scales, reducing each 256-value block, the mins against the activation sums), reusing
 * weight rows is not enough: a batch of 8 tokens would still cost nearly 8 tokens. Those
 * types also have a gemm kernel, which takes a tile of rows x columns and shares the
 * per-block work between the pairs of the tile (see kernels_avx512.c, and kernels_simd.h
 * for the K-quants; BF16 has one too, kernels_avx2.c); its results are the dot kernel's, bit
 * for bit, whatever the tile's shape.
 */
#ifndef SIFT_MODEL_KERNELS_H
#define SIFT_MODEL_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf/ggml_types.h"
#include "sift.h"

#define SIFT_DOT_MAX_COLS 4

/* ggml's block_q8_K: the activation format of the K-quants. bsums[j] is the sum of the 16
 * values qs[16j .. 16j+16), which lets a kernel fold in per-sub-block minimums and offsets
 * without touching the values again. */
typedef struct {
    float d;
    int8_t qs[SIFT_QK_K];
    int16_t bsums[SIFT_QK_K / 16];
} sift_block_q8_K;

typedef enum sift__act_format {
    SIFT_ACT_NONE = 0, /* no direct kernel: dequantize the weight row, then an F32 dot */
    SIFT_ACT_F32,
    SIFT_ACT_F16,
    SIFT_ACT_Q8_0,
    SIFT_ACT_Q8_K,
    SIFT_ACT_BF16,
    SIFT_ACT_COUNT
} sift__act_format;

/* The activation format a weight type's kernel takes (SIFT_ACT_NONE: the generic path). */
sift__act_format sift__act_format_of(sift_tensor_type type);
/* Bytes of one activation row of n values in format f (n a multiple of its block). */
size_t sift__act_row_bytes(sift__act_format f, int64_t n);
/* ggml's quantize_row_q8_K_ref: per 256 values, d = max|x| / 127 (sign of the extreme),
 * q = round(x / d) clamped to 127, bsums. */
void sift_quantize_row_q8_K(const float *x, void *dst, int64_t n);

/* s[j] = dot(weight row w, activation row j) for j < ncols (1..SIFT_DOT_MAX_COLS);
 * activation row j starts x_stride bytes after row j-1; n values per row. */
typedef void (*sift__dot_fn)(int64_t n, const void *w, const void *x, size_t x_stride, int ncols, float *s);

/* out[r] = dot(weight row r, activation row x) for r < n_rows, row r at w + r * row_bytes:
 * the one-token case (generation), where a whole run of rows meets the same activations.
 * Each out[r] equals what the dot kernel gives for that row with one column. */
typedef void (*sift__rows_fn)(int64_t n, const void *w, size_t row_bytes, int64_t n_rows, const void *x, float *out);

/* out[c * out_stride + r] = dot(weight row r, activation row c) for r < n_rows, c < n_cols: a
 * block of a matrix product (weight row r at w + r * row_bytes, activation row c at
 * x + c * x_stride), for the types whose kernels do better on tiles of rows x columns than
 * one row at a time (a tile shares each weight row's unpacking among the columns and each
 * column's scales among the rows). Each out value equals the dot kernel's, bit for bit. */
typedef void (*sift__gemm_fn)(int64_t n, const void *w, size_t row_bytes, int64_t n_rows, const void *x, size_t x_stride,
                             int64_t n_cols, float *out, int64_t out_stride);

/* out[c * out_stride + r - r0] = dot(weight row r, activation row c) for r0 <= r < r1, c < n_cols,
 * over a whole Q4_K matrix of n_out rows in the x8 layout of repack.h (w its first row):
 * the gemm of a matrix whose row groups are interleaved (r0 and r1 need not fall on a group;
 * the last n_out % 8 rows are plain). n_cols == 1 is generation. Each out value equals the
 * dot kernel's on the plain rows, bit for bit. */
typedef void (*sift__gemm_x8_fn)(int64_t n, const void *w, size_t row_bytes, int64_t n_out, int64_t r0, int64_t r1,
                                 const void *x, size_t x_stride, int64_t n_cols, float *out, int64_t out_stride);

typedef struct sift__kernels {
    sift_isa isa;
    /* weight-type kernels, indexed by sift_tensor_type; NULL where the type has none */
    sift__dot_fn dot[SIFT_TYPE_COUNT];
    sift__rows_fn rows[SIFT_TYPE_COUNT];
    sift__gemm_fn gemm[SIFT_TYPE_COUNT]; /* NULL: the forward pass uses dot, a row at a time */
    /* rows for a matrix in huge pages (sift__weight.huge_pages): several rows read side by
     * side, which only pays where the prefetcher is not stopped every 4 KiB; NULL: rows.
     * Each out[r] equals rows'. */
    sift__rows_fn rows_huge[SIFT_TYPE_COUNT];
    /* products with matrices in the x8 layout (repack.h; every table has the Q4_K entry), and
     * the packer the loader makes that layout with when this is the best table of the CPU
     * (NULL: keep the plain layout); each does what sift__q4_K_x8_pack_group does */
    sift__gemm_x8_fn gemm_x8[SIFT_TYPE_COUNT];
    void (*x8_pack[SIFT_TYPE_COUNT])(const void *rows, size_t row_bytes, int64_t nb, void *dst);
    /* activations F32 -> their format (n a multiple of the format's block) */
    void (*act_convert)(sift__act_format f, const float *x, void *dst, int64_t n);
    /* attention scores for nq query heads sharing one KV head:
     *   s[g*s_stride + c] = scale * sum_d q[g*hd + d] * kt[d*ld + c],  c < n, g < nq
     * kt is the transposed K cache of the head (row d = dimension d over the cells). */
    void (*attn_scores)(int n, int hd, int nq, const float *q, const float *kt, size_t ld, float scale, float *s,
                        size_t s_stride);
    /* s[c] = exp(s[c] - max) for c < n; returns the sum of the new s[c] (in double, as ggml) */
    double (*softmax_exp)(int n, float *s, float max);
    /* max of s[0..n) (-INFINITY for n == 0) */
    float (*max)(int n, const float *s);
    /* out[i] = silu(g[i]) * u[i], silu(x) = x / (1 + exp(-x)) */
    void (*swiglu)(int64_t n, const float *g, const float *u, float *out);
} sift__kernels;

/* The table for isa (AUTO = the best this CPU has); NULL when the CPU lacks it or it was
 * not built. The tables are static and immutable once made (thread-safe). */
const sift__kernels *sift__kernels_get(sift_isa isa);

/* The AVX-512 table without the VNNI Q8_0 / Q4_0 entries (the same as sift__kernels_get's
 * where the CPU lacks VNNI), so tests check both; NULL without AVX-512. */
const sift__kernels *sift__kernels_get_avx512_plain(void);

/* Choosing a table per weight type by measurement (choose.c). A way is a table, reading
 * the plain layout or (x8) the x8 layout of repack.h through its gemm_x8. */
typedef struct sift__kernel_way {
    const sift__kernels *k;
    bool x8;
    const char *name;
} sift__kernel_way;

/* The tables chosen for one type: gen (one token), prompt (tiles of tokens), and x8, the
 * table whose gemm_x8 reads a repacked matrix, or NULL where repacking does not pay. */
typedef struct sift__kernel_choice {
    const sift__kernels *gen, *prompt, *x8;
} sift__kernel_choice;

/* The ways type t can run on this CPU, in rising level order (scalar only if asked). */
int sift__kernel_ways(sift_tensor_type t, bool with_scalar, sift__kernel_way *out, int cap);
/* Time every way of type t (rows_huge for generation where huge) on the probe matrix: ns
 * per row-block (8 rows x 2048 values) per token, min of reps runs, into gen[i] and
 * prompt[i]; *choice as the loader would choose (among the SIMD ways). Returns the number
 * of ways (0: the type has no probe). */
int sift__kernel_measure(sift_tensor_type t, bool huge, bool with_scalar, int reps, sift__kernel_way *ways, int cap,
                         double *gen, double *prompt, sift__kernel_choice *choice);
/* The index of the fastest of ways[0..n) with x8 == want_x8 by the times ns (-1: none); ways
 * are in rising level order, and a later one must beat the best so far by 3 % to be
 * taken (equal times keep the lower level). */
int sift__kernel_fastest(const sift__kernel_way *ways, const double *ns, int n, bool want_x8);
/* Is type t's x8 layout repacked only on request (SIFT_PACK_NOW=1 or SIFT_PACK_LATE=1), however
 * the probe measures it (Q8_0: its plain rows stream as fast from memory; choose.c)? */
bool sift__x8_on_request(sift_tensor_type t);
/* *out = the best level's table with, for each type marked in used, the entries of the
 * tables measured fastest for it (measured on the first call per type and process, then
 * remembered); x8_pack[t] is set only where the x8 layout measured faster (and, for the types
 * of sift__x8_on_request, was asked for). */
void sift__kernels_choose(const bool used[SIFT_TYPE_COUNT], bool huge, sift__kernels *out);

/* Filled in by the ISA files (compiled with -mavx2 / -mavx512*); call only after a CPU check.
 * init_avx512vnni replaces some entries of an AVX-512 table (CPUs with AVX512_VNNI). */
void sift__kernels_init_avx2(sift__kernels *k);
void sift__kernels_init_avx512(sift__kernels *k);
void sift__kernels_init_avx512vnni(sift__kernels *k);
/* aarch64: init_neon (ARMv8.0 NEON, every aarch64 CPU) over a copy of the scalar table,
 * init_neon_dotprod (SDOT) over a copy of the NEON one; the latter also takes the i8mm
 * (SMMLA) prompt tiles where the CPU has them and SIFT_NO_I8MM is not set. */
void sift__kernels_init_neon(sift__kernels *k);
void sift__kernels_init_neon_dotprod(sift__kernels *k);

/* Scalar kernels, exposed for the SIMD files' tails and for tests. */
void sift__dot_f32_scalar(int64_t n, const void *w, const void *x, size_t x_stride, int ncols, float *s);
void sift__act_convert_scalar(sift__act_format f, const float *x, void *dst, int64_t n);

#endif
