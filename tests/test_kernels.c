/*
 * test_kernels.c - every SIMD kernel against the scalar one, and the scalar ones against
 * the formats' definitions.
 *
 *   - dot products for F32, F16, BF16, Q8_0, Q4_0, MXFP4, Q4_K, Q5_K, Q6_K: weights made by the reference
 *     quantizers, activations by the kernels' converters, many row lengths (tails
 *     included), 1..4 columns. The scalar kernel must match a double-precision dot of the
 *     dequantized rows; the integer kernels (Q8_0, Q4_0, MXFP4, Q4_K, Q5_K, Q6_K) of every ISA must
 *     equal the scalar result bit for bit, the float ones (F32, F16, BF16) within a few float
 *     roundings of the row's magnitude;
 *   - column independence: a column's result is bitwise the same with 1 or 4 columns
 *     (what makes batched decoding give the same logits as token-by-token);
 *   - the one-column row loops (rows, and rows_huge for matrices in huge pages) and the tiled products (gemm, rows x columns, the
 *     edges of the tiles included): every value bitwise the dot kernel's for its pair, and
 *     for the integer types bitwise the scalar kernel's; and big products (75 x 70, past the
 *     chunks a gemm kernel blocks its rows, columns and row length in);
 *   - attention scores, softmax exp and sum, max, SwiGLU, F16 conversion;
 *   - the Q8_K activation quantizer against its definition;
 *   - MXFP4 rows of arbitrary bytes (every exponent, the subnormal scales 0 and 1 included)
 *     through every ISA's dot, rows and rows_huge, bitwise the scalar kernel's; MXFP4's x8
 *     layout (packing, and gemm_x8 against the scalar dot).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gguf/ggml_types.h"
#include "model/kernels.h"
#include "model/repack.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static double urand(void) /* [0, 1) */
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) * 0x1p-53;
}
static float frand(float scale) { return (float)((urand() * 2 - 1) * scale); }

static const sift_tensor_type types[] = {SIFT_TYPE_F32, SIFT_TYPE_F16, SIFT_TYPE_BF16, SIFT_TYPE_Q8_0, SIFT_TYPE_Q4_0, SIFT_TYPE_MXFP4, SIFT_TYPE_Q4_K, SIFT_TYPE_Q5_K, SIFT_TYPE_Q6_K};

/* The SIMD levels of this build's architecture, lower first (either may be missing on this CPU). */
#if defined(__aarch64__)
static const sift_isa simd_isas[2] = {SIFT_ISA_NEON, SIFT_ISA_NEON_DOTPROD};
#else
static const sift_isa simd_isas[2] = {SIFT_ISA_AVX2, SIFT_ISA_AVX512};
#endif

/* The tables to check: scalar, the two SIMD levels (AVX-512 as used, with the VNNI Q8_0 /
 * Q4_0 entries where the CPU has them) and the plain AVX-512 one; NULL where the CPU lacks
 * one, or where the plain table is the one in use. */
enum { N_TABLES = 4 };
static const sift__kernels *table_at(int i)
{
    if (i == 0) return sift__kernels_get(SIFT_ISA_SCALAR);
    if (i < 3) return sift__kernels_get(simd_isas[i - 1]);
    const sift__kernels *plain = sift__kernels_get_avx512_plain(), *used = sift__kernels_get(SIFT_ISA_AVX512);
    return plain && used && memcmp(plain, used, sizeof *plain) != 0 ? plain : NULL;
}
static const char *table_name(int i)
{
    return i == 0 ? "scalar" : i < 3 ? sift_isa_name(simd_isas[i - 1]) : "avx512-plain";
}

static bool is_int_kernel(sift_tensor_type t)
{
    return t != SIFT_TYPE_F32 && t != SIFT_TYPE_F16 && t != SIFT_TYPE_BF16;
}

/* dequantized activation row (the format's definition) */
static void act_dequant(sift__act_format f, const void *a, float *out, int64_t n)
{
    switch (f) {
    case SIFT_ACT_F32: memcpy(out, a, (size_t)n * 4); break;
    case SIFT_ACT_F16: sift__dequantize_row_f16(a, out, n); break;
    case SIFT_ACT_BF16: sift__dequantize_row_bf16(a, out, n); break;
    case SIFT_ACT_Q8_0: sift__dequantize_row_q8_0(a, out, n); break;
    case SIFT_ACT_Q8_K: {
        const sift_block_q8_K *b = a;
        for (int64_t i = 0; i < n; i++) out[i] = b[i / 256].d * b[i / 256].qs[i % 256];
        break;
    }
    default: fail();
    }
}

static void test_dot(void **state)
{
    (void)state;
    const sift__kernels *sc = sift__kernels_get(SIFT_ISA_SCALAR);
    assert_non_null(sc);
    const int lens_f[] = {1, 3, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 172, 255, 256, 1000, 4096, 4099};
    const int lens_q[] = {32, 64, 96, 160, 256, 512, 768, 2048, 4096};
    /* K-quants: 1 to 3 blocks, and 5 and 7 (the one-column kernels reduce four blocks at a
     * time: tails of every length) */
    const int lens_k[] = {256, 512, 768, 1280, 1792, 2048, 4096};
    int checked = 0, gemm_checked = 0;
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
        const sift_tensor_type t = types[ti];
        const sift__act_format af = sift__act_format_of(t);
        const int *lens = !is_int_kernel(t) ? lens_f : t == SIFT_TYPE_Q4_K || t == SIFT_TYPE_Q5_K || t == SIFT_TYPE_Q6_K ? lens_k : lens_q;
        const int nl = !is_int_kernel(t) ? 20 : t == SIFT_TYPE_Q4_K || t == SIFT_TYPE_Q5_K || t == SIFT_TYPE_Q6_K ? 7 : 9;
        for (int li = 0; li < nl; li++) {
            const int64_t n = lens[li];
            float *wf = malloc((size_t)n * 4), *xf = malloc((size_t)n * 4 * 4), *wd = malloc((size_t)n * 4), *xd = malloc((size_t)n * 4);
            const size_t wb = sift__type_row_bytes(t, n), ab = sift__act_row_bytes(af, n);
            void *w = malloc(wb), *x = malloc(ab * 4);
            for (int64_t i = 0; i < n; i++) wf[i] = frand(1.0f) * (i % 37 == 0 ? 8.0f : 1.0f);
            for (int64_t i = 0; i < 4 * n; i++) xf[i] = frand(2.0f);
            assert_int_equal(sift__quantize_row(t, wf, w, n), SIFT_OK);
            assert_int_equal(sift__dequantize_row(t, w, wd, n), SIFT_OK);
            for (int j = 0; j < 4; j++) sc->act_convert(af, xf + j * n, (char *)x + j * ab, n);

            float ref4[4];
            sc->dot[t](n, w, x, ab, 4, ref4);
            for (int j = 0; j < 4; j++) {
                /* scalar kernel vs the definition, in double */
                act_dequant(af, (char *)x + j * ab, xd, n);
                double exact = 0, mag = 0;
                for (int64_t i = 0; i < n; i++) exact += (double)wd[i] * xd[i], mag += fabs((double)wd[i] * xd[i]);
                if (fabs(ref4[j] - exact) > 1e-6 * mag + 1e-30) {
                    fprintf(stderr, "%s n=%lld col %d: scalar %.9g, exact %.9g\n", sift_type_name(t), (long long)n, j, ref4[j], exact);
                    fail();
                }
            }
            for (int isa = 0; isa < N_TABLES; isa++) {
                const sift__kernels *k = table_at(isa);
                if (!k) continue;
                float s4[4], s1[4];
                k->dot[t](n, w, x, ab, 4, s4);
                for (int j = 0; j < 4; j++) {
                    k->dot[t](n, w, (char *)x + j * ab, ab, 1, &s1[j]);
                    if (memcmp(&s1[j], &s4[j], 4) != 0) {
                        fprintf(stderr, "%s %s n=%lld col %d: ncols 1 %.9g vs 4 %.9g\n", table_name(isa), sift_type_name(t),
                                (long long)n, j, s1[j], s4[j]);
                        fail();
                    }
                    float s2[2], s3[3];
                    if (j < 2) k->dot[t](n, w, x, ab, 2, s2), assert_memory_equal(&s2[j], &s4[j], 4);
                    if (j < 3) k->dot[t](n, w, x, ab, 3, s3), assert_memory_equal(&s3[j], &s4[j], 4);
                    act_dequant(af, (char *)x + j * ab, xd, n);
                    double mag = 0;
                    for (int64_t i = 0; i < n; i++) mag += fabs((double)wd[i] * xd[i]);
                    const bool ok = is_int_kernel(t) ? memcmp(&s4[j], &ref4[j], 4) == 0 : fabs(s4[j] - ref4[j]) <= 4e-7 * mag;
                    if (!ok) {
                        fprintf(stderr, "%s %s n=%lld col %d: %.9g vs scalar %.9g (magnitude %.3g)\n", table_name(isa),
                                sift_type_name(t), (long long)n, j, s4[j], ref4[j], mag);
                        fail();
                    }
                    checked++;
                }
            }
            /* the one-column row loop: eleven rows (kernels that go four rows at a time have a
             * tail), each bitwise the dot kernel's answer */
            enum { NR = 11, NC = 4 };
            char *w3 = malloc(NR * wb);
            for (int r = 0; r < NR; r++) {
                for (int64_t i = 0; i < n; i++) wf[i] = frand(1.0f);
                sift__quantize_row(t, wf, w3 + r * wb, n);
            }
            for (int isa = 0; isa < N_TABLES; isa++) {
                const sift__kernels *k = table_at(isa);
                if (!k) continue;
                float out[NR], one, ref;
                k->rows[t](n, w3, wb, NR, x, out);
                for (int r = 0; r < NR; r++) {
                    k->dot[t](n, w3 + r * wb, x, ab, 1, &one);
                    assert_memory_equal(&one, &out[r], 4);
                }
                /* the huge-page row loop (rows_huge), every row count up to eleven: rows' values */
                if (k->rows_huge[t])
                    for (int nr = 1; nr <= NR; nr++) {
                        float hu[NR + 1];
                        hu[nr] = -1.0f;
                        k->rows_huge[t](n, w3, wb, nr, x, hu);
                        assert_memory_equal(hu, out, (size_t)nr * 4);
                        assert_true(hu[nr] == -1.0f);
                    }
                /* tiles: every (rows, columns) shape up to 11 x 4, each value the dot kernel's
                 * (and the scalar kernel's, for the integer types); out has a stride of NR + 2 */
                if (!k->gemm[t]) continue;
                float g[NC * (NR + 2)];
                for (int nr = 1; nr <= NR; nr++)
                    for (int nc = 1; nc <= NC; nc++) {
                        for (int i = 0; i < NC * (NR + 2); i++) g[i] = -1.0f;
                        k->gemm[t](n, w3, wb, nr, x, ab, nc, g, NR + 2);
                        for (int c = 0; c < NC; c++)
                            for (int r = 0; r < NR + 2; r++) {
                                if (c >= nc || r >= nr) { /* untouched */
                                    assert_true(g[c * (NR + 2) + r] == -1.0f);
                                    continue;
                                }
                                k->dot[t](n, w3 + r * wb, (char *)x + c * ab, ab, 1, &one);
                                sc->dot[t](n, w3 + r * wb, (char *)x + c * ab, ab, 1, &ref);
                                if (memcmp(&one, &g[c * (NR + 2) + r], 4) != 0 ||
                                    (is_int_kernel(t) && memcmp(&ref, &one, 4) != 0)) {
                                    fprintf(stderr, "%s %s n=%lld gemm %dx%d: (%d, %d) %.9g, dot %.9g, scalar %.9g\n",
                                            table_name(isa), sift_type_name(t), (long long)n, nr, nc, r, c,
                                            g[c * (NR + 2) + r], one, ref);
                                    fail();
                                }
                                gemm_checked++;
                            }
                    }
            }
            free(w3);
            free(wf), free(xf), free(wd), free(xd), free(w), free(x);
        }
    }
    printf("  dot products: %d (ISA, type, length, column) results checked; tiled products: %d\n", checked, gemm_checked);
}

static void test_attention_and_elementwise(void **state)
{
    (void)state;
    const sift__kernels *sc = sift__kernels_get(SIFT_ISA_SCALAR);
    const int ns[] = {1, 5, 8, 15, 16, 17, 31, 33, 64, 65, 100, 513};
    const int hds[] = {4, 8, 64, 128};
    for (int li = 0; li < 2; li++) {
        const int isa = (int)simd_isas[li];
        const sift__kernels *k = sift__kernels_get((sift_isa)isa);
        if (!k) {
            printf("  %s: not supported by this CPU, skipped\n", sift_isa_name((sift_isa)isa));
            continue;
        }
        for (size_t a = 0; a < sizeof ns / sizeof *ns; a++)
            for (size_t b = 0; b < sizeof hds / sizeof *hds; b++) {
                const int n = ns[a], hd = hds[b], nq = 3;
                const size_t ld = (size_t)n + 7;
                float *q = malloc((size_t)nq * hd * 4), *kt = malloc(hd * ld * 4);
                float *s0 = malloc((size_t)nq * ld * 4), *s1 = malloc((size_t)nq * ld * 4);
                for (int i = 0; i < nq * hd; i++) q[i] = frand(1);
                for (size_t i = 0; i < hd * ld; i++) kt[i] = frand(1);
                sc->attn_scores(n, hd, nq, q, kt, ld, 0.125f, s0, ld);
                k->attn_scores(n, hd, nq, q, kt, ld, 0.125f, s1, ld);
                for (int g = 0; g < nq; g++)
                    for (int c = 0; c < n; c++) {
                        double mag = 0;
                        for (int d = 0; d < hd; d++) mag += fabs(q[g * hd + d] * kt[d * ld + c]) * 0.125;
                        assert_true(fabs(s0[g * ld + c] - s1[g * ld + c]) <= 4e-7 * mag + 1e-30);
                    }
                /* max, softmax exp and its sum */
                assert_true(sc->max(n, s0) == k->max(n, s0));
                const float mx = sc->max(n, s0);
                memcpy(s1, s0, (size_t)n * 4);
                const double sum0 = sc->softmax_exp(n, s0, mx), sum1 = k->softmax_exp(n, s1, mx);
                for (int c = 0; c < n; c++) assert_true(fabs(s0[c] - s1[c]) <= 4e-7 * s0[c]);
                assert_true(fabs(sum0 - sum1) <= 1e-6 * sum0);
                free(q), free(kt), free(s0), free(s1);
            }
        /* SwiGLU over a wide range, exp extremes included */
        float g[203], u[203], o0[203], o1[203];
        for (int i = 0; i < 203; i++) g[i] = frand(30), u[i] = frand(3);
        g[0] = -200, g[1] = 200, g[2] = 0, g[3] = -88.5f, g[4] = 88.5f;
        for (int n = 0; n <= 203; n += 29) {
            sc->swiglu(n, g, u, o0);
            k->swiglu(n, g, u, o1);
            for (int i = 0; i < n; i++) {
                /* below -87 silu is a denormal-sized -|g| e^g; there the SIMD exp saturates earlier */
                const float tol = g[i] < -87.0f ? 1e-35f : 2e-6f * fabsf(o0[i]) + 1e-37f;
                if (!(fabsf(o0[i] - o1[i]) <= tol)) {
                    fprintf(stderr, "swiglu(%g, %g): scalar %.9g, %s %.9g\n", g[i], u[i], o0[i], sift_isa_name((sift_isa)isa), o1[i]);
                    fail();
                }
            }
        }
        /* exp at the edges through the softmax: exp(-inf) = 0, exp(0) = 1 */
        float e[20];
        for (int i = 0; i < 20; i++) e[i] = i % 2 ? -INFINITY : -150.0f + 3 * i; /* exp(-96) and below: 0 */
        e[19] = 0;
        k->softmax_exp(20, e, 0.0f);
        for (int i = 0; i < 19; i++) assert_true(e[i] >= 0 && e[i] < 1e-30f);
        assert_true(e[19] == 1.0f);
        /* F16 conversion: bitwise the scalar one (round to nearest even) */
        float xf[77];
        uint16_t h0[77], h1[77];
        for (int i = 0; i < 77; i++) xf[i] = frand(70000);
        xf[5] = 1e-8f, xf[6] = 65519.0f, xf[7] = -65520.0f, xf[8] = 3e-5f;
        sc->act_convert(SIFT_ACT_F16, xf, h0, 77);
        k->act_convert(SIFT_ACT_F16, xf, h1, 77);
        assert_memory_equal(h0, h1, sizeof h0);
        printf("  %s: attention scores, softmax, max, swiglu, f16 conversion agree with scalar\n", sift_isa_name((sift_isa)isa));
    }
}

static void test_q8_K(void **state)
{
    (void)state;
    float x[512];
    sift_block_q8_K b[2];
    for (int i = 0; i < 512; i++) x[i] = frand(3);
    x[100] = -9.0f;                        /* block 0's extreme is negative */
    for (int i = 256; i < 512; i++) x[i] = 0; /* block 1 is all zero */
    sift_quantize_row_q8_K(x, b, 512);
    assert_true(fabsf(b[0].d - 9.0f / 127) < 1e-7f);
    assert_int_equal(b[0].qs[100], -127);
    for (int j = 0; j < 16; j++) {
        int s = 0;
        for (int i = 0; i < 16; i++) s += b[0].qs[16 * j + i];
        assert_int_equal(s, b[0].bsums[j]);
    }
    for (int i = 0; i < 256; i++) assert_true(fabsf(b[0].d * b[0].qs[i] - x[i]) <= 0.5f * b[0].d + 1e-6f);
    assert_true(b[1].d == 0.0f);
    for (int i = 0; i < 256; i++) assert_int_equal(b[1].qs[i], 0);
}

/* Q4_K's packed 6-bit scales, checked by hand and on raw bytes: the SIMD kernels unpack all
 * twelve bytes at once (kernels_simd.h's q4k_scales_mins), the quantizer only makes some of
 * the bit patterns, so random bytes in scales[] and qs[] must give, in every kernel of every
 * ISA (dot with 1..4 columns, rows, gemm), the scalar result bit for bit. */
static void q4k_block(sift_block_q4_K *blk, const uint8_t scales[12], uint8_t qs, float d, float dmin)
{
    blk->d = sift__fp32_to_fp16(d);
    blk->dmin = sift__fp32_to_fp16(dmin);
    memcpy(blk->scales, scales, 12);
    memset(blk->qs, qs, sizeof blk->qs);
}

static void test_q4_K_scales(void **state)
{
    (void)state;
    /* every value 1 (qs bytes 0x11) against activations of 1 (d = 1, bsums 16):
     *   block 0, scale bytes all 0xFF: every scale and min is 63:
     *     sumi = 63 * 256 = 16128, summ = 63 * 256 = 16128, 1 * 16128 - 0.5 * 16128 = 8064;
     *   block 1, the bytes below: sc = 1 2 3 4 26 44 62 0 (sc[4] = 0x9A & 15 | (0x41 >> 6) << 4
     *     = 10 | 16, ...), m = 5 6 7 8 9 27 45 63 (m[7] = 0xF0 >> 4 | (0xC8 >> 6) << 4 = 15 | 48):
     *     sumi = 32 * 142 = 4544, summ = 32 * 170 = 5440, 4544 - 0.5 * 5440 = 1824. */
    const uint8_t ff[12] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
    const uint8_t mixed[12] = {0x41, 0x82, 0xC3, 0x04, 0x05, 0x46, 0x87, 0xC8, 0x9A, 0xBC, 0xDE, 0xF0};
    sift_block_q4_K w[2];
    q4k_block(&w[0], ff, 0x11, 1.0f, 0.5f);
    q4k_block(&w[1], mixed, 0x11, 1.0f, 0.5f);
    sift_block_q8_K x[2];
    for (int k = 0; k < 2; k++) {
        x[k].d = 1.0f;
        memset(x[k].qs, 1, sizeof x[k].qs);
        for (int j = 0; j < 16; j++) x[k].bsums[j] = 16;
    }
    for (int li = -1; li < 2; li++) {
        const int isa = li < 0 ? (int)SIFT_ISA_SCALAR : (int)simd_isas[li];
        const sift__kernels *k = sift__kernels_get((sift_isa)isa);
        if (!k) continue;
        float s[2];
        k->dot[SIFT_TYPE_Q4_K](256, &w[0], &x[0], 0, 1, &s[0]);
        k->dot[SIFT_TYPE_Q4_K](256, &w[1], &x[1], 0, 1, &s[1]);
        assert_true(s[0] == 8064.0f);
        assert_true(s[1] == 1824.0f);
        k->dot[SIFT_TYPE_Q4_K](512, w, x, 0, 1, &s[0]);
        assert_true(s[0] == 8064.0f + 1824.0f);
    }

    /* random bytes: 5 rows of 3 blocks (a tile and a tail), 4 columns */
    enum { NB = 3, N = NB * 256, ROWS = 5, COLS = 4 };
    sift_block_q4_K rw[ROWS][NB];
    sift_block_q8_K rx[COLS][NB];
    for (int r = 0; r < ROWS; r++)
        for (int b = 0; b < NB; b++) {
            uint8_t sc[12];
            for (int i = 0; i < 12; i++) sc[i] = (uint8_t)(urand() * 256);
            q4k_block(&rw[r][b], sc, 0, (float)(0.01 + urand() * 0.02), (float)(0.01 + urand() * 0.02));
            for (int i = 0; i < 128; i++) rw[r][b].qs[i] = (uint8_t)(urand() * 256);
        }
    float xf[N];
    for (int c = 0; c < COLS; c++) {
        for (int i = 0; i < N; i++) xf[i] = frand(2);
        sift_quantize_row_q8_K(xf, rx[c], N);
    }
    const sift__kernels *ref = sift__kernels_get(SIFT_ISA_SCALAR);
    float want[COLS][ROWS];
    for (int r = 0; r < ROWS; r++) {
        float s[COLS];
        ref->dot[SIFT_TYPE_Q4_K](N, rw[r], rx, sizeof rx[0], COLS, s);
        for (int c = 0; c < COLS; c++) want[c][r] = s[c];
    }
    for (int li = 0; li < 2; li++) {
        const int isa = (int)simd_isas[li];
        const sift__kernels *k = sift__kernels_get((sift_isa)isa);
        if (!k) continue;
        for (int r = 0; r < ROWS; r++)
            for (int nc = 1; nc <= COLS; nc++) {
                float s[COLS];
                k->dot[SIFT_TYPE_Q4_K](N, rw[r], rx, sizeof rx[0], nc, s);
                for (int c = 0; c < nc; c++) assert_memory_equal(&s[c], &want[c][r], 4);
            }
        float out[COLS][ROWS];
        k->rows[SIFT_TYPE_Q4_K](N, rw, sizeof rw[0], ROWS, rx[0], out[0]);
        assert_memory_equal(out[0], want[0], sizeof out[0]);
        if (k->rows_huge[SIFT_TYPE_Q4_K]) {
            memset(out, 0, sizeof out);
            k->rows_huge[SIFT_TYPE_Q4_K](N, rw, sizeof rw[0], ROWS, rx[0], out[0]);
            assert_memory_equal(out[0], want[0], sizeof out[0]);
        }
        if (k->gemm[SIFT_TYPE_Q4_K]) {
            memset(out, 0, sizeof out);
            k->gemm[SIFT_TYPE_Q4_K](N, rw, sizeof rw[0], ROWS, rx, sizeof rx[0], COLS, out[0], ROWS);
            assert_memory_equal(out, want, sizeof out);
        }
    }
}

/* Big tiled products: the gemm kernels may block rows, columns and the row length in chunks
 * of their own (the AVX2 Q8_0 / Q4_0 one: 32 rows, 32 columns and 16 blocks at a time, its
 * sums carried across the blocks' chunks), which the shapes of test_dot (up to 11 x 4) do
 * not reach. 75 rows x 70 columns of 17, 33 and 50 blocks (every chunk boundary with a
 * tail) and a few smaller windows, every value bitwise the dot kernel's for its pair (and
 * the scalar one's). */
static void test_gemm_big(void **state)
{
    (void)state;
    const sift__kernels *sc = sift__kernels_get(SIFT_ISA_SCALAR);
    enum { NR = 75, NC = 70, OS = NR + 3 };
    const int64_t lens[] = {17 * 32, 33 * 32, 50 * 32};
    int checked = 0;
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
        const sift_tensor_type t = types[ti];
        if (t != SIFT_TYPE_Q8_0 && t != SIFT_TYPE_Q4_0) continue; /* (the K-quants' rows are 256 long) */
        const sift__act_format af = sift__act_format_of(t);
        for (size_t li = 0; li < sizeof lens / sizeof *lens; li++) {
            const int64_t n = lens[li];
            const size_t wb = sift__type_row_bytes(t, n), ab = sift__act_row_bytes(af, n);
            char *w = malloc(NR * wb), *x = malloc(NC * ab);
            float *f = malloc((size_t)n * sizeof *f), *g = malloc((size_t)NC * OS * sizeof *g);
            for (int r = 0; r < NR; r++) {
                for (int64_t i = 0; i < n; i++) f[i] = frand(1.0f) * (i % 29 == 0 ? 6.0f : 1.0f);
                sift__quantize_row(t, f, w + r * wb, n);
            }
            for (int c = 0; c < NC; c++) {
                for (int64_t i = 0; i < n; i++) f[i] = frand(2.0f);
                sc->act_convert(af, f, x + c * ab, n);
            }
            for (int isa = 0; isa < N_TABLES; isa++) {
                const sift__kernels *k = table_at(isa);
                if (!k || !k->gemm[t]) continue;
                /* the whole, an inner window (rows 5.., columns 3..) with its own edges, and
                 * fewer rows than a tile with just enough columns for the big tiles (8, 9) */
                static const int wins[4][4] = {{0, 0, NR, NC}, {5, 3, 61, 66}, {7, 1, 3, 9}, {2, 4, 1, 8}};
                for (int win = 0; win < 4; win++) {
                    const int r0 = wins[win][0], c0 = wins[win][1], nr = wins[win][2], nc = wins[win][3];
                    for (int i = 0; i < NC * OS; i++) g[i] = -1.0f;
                    k->gemm[t](n, w + r0 * wb, wb, nr, x + c0 * ab, ab, nc, g, OS);
                    for (int c = 0; c < NC; c++)
                        for (int r = 0; r < OS; r++) {
                            const float v = g[c * OS + r];
                            if (c >= nc || r >= nr) {
                                assert_true(v == -1.0f);
                                continue;
                            }
                            float one, ref;
                            k->dot[t](n, w + (r0 + r) * wb, x + (c0 + c) * ab, ab, 1, &one);
                            sc->dot[t](n, w + (r0 + r) * wb, x + (c0 + c) * ab, ab, 1, &ref);
                            if (memcmp(&one, &v, 4) != 0 || memcmp(&ref, &v, 4) != 0) {
                                fprintf(stderr, "%s %s n=%lld gemm %dx%d: (%d, %d) %.9g, dot %.9g, scalar %.9g\n", table_name(isa),
                                        sift_type_name(t), (long long)n, nr, nc, r, c, v, one, ref);
                                fail();
                            }
                            checked++;
                        }
                }
            }
            free(w), free(x), free(f), free(g);
        }
    }
    printf("  big tiled products: %d values checked\n", checked);
}

/* Every table's gemm_x8 for `type` on the x8-packed matrix (rows rows of rb bytes) against
 * want[c * rows + r] (the scalar dot kernel on the plain rows), bit for bit: row ranges that
 * start and end inside groups and in the plain tail, 1..cols columns, and nothing written
 * outside the range. How many results were checked. */
static int check_gemm_x8(int type, const char *name, int n, const void *packed, size_t rb, int rows, const void *x, size_t xs,
                         int cols, const float *want)
{
    enum { MAX_ROWS = 19, MAX_COLS = 9 };
    assert_true(rows <= MAX_ROWS && cols <= MAX_COLS);
    int checked = 0;
    for (int isa = 0; isa < N_TABLES; isa++) {
        const sift__kernels *k = table_at(isa);
        if (!k) continue;
        assert_non_null(k->gemm_x8[type]);
        const int r0s[] = {0, 3, 8, 11, 16, 17};
        for (size_t ri = 0; ri < sizeof r0s / sizeof *r0s; ri++)
            for (int r1 = r0s[ri] + 1; r1 <= rows; r1++)
                for (int nc = 1; nc <= cols; nc += (r1 == rows ? 1 : 4)) {
                    const int r0 = r0s[ri], os = rows + 2;
                    float out[MAX_COLS * (MAX_ROWS + 2)];
                    for (int i = 0; i < cols * os; i++) out[i] = -1.0f;
                    k->gemm_x8[type](n, packed, rb, rows, r0, r1, x, xs, nc, out, os);
                    for (int c = 0; c < cols; c++)
                        for (int i = 0; i < os; i++) {
                            const float v = out[c * os + i], *w = &want[c * rows + r0 + i];
                            if (c >= nc || i >= r1 - r0) {
                                assert_true(v == -1.0f);
                            } else if (memcmp(&v, w, 4) != 0) {
                                fprintf(stderr, "%s %s x8 n=%d rows [%d, %d) x %d: (%d, %d) %.9g, scalar %.9g\n", table_name(isa),
                                        name, n, r0, r1, nc, r0 + i, c, v, *w);
                                fail();
                            } else {
                                checked++;
                            }
                        }
                }
    }
    return checked;
}

/* A K-quant's x8 layout (Q4_K, Q5_K, Q6_K; model/repack.h): the packing undone by the type's
 * get, every table's packer making the reference's bytes, and every table's gemm_x8, for every
 * row range (groups cut at either end, the plain rows after the last group) and column count,
 * the scalar dot kernel's value on the plain rows bit for bit, writing nothing else. The weights are random bytes (every scale, min and top bit) with d and
 * dmin in range, rows 5 and 6 set by fill (the extremes), column 2 every activation -128 (with
 * row 5, the 16-bit partial sums at their bound). */
typedef struct {
    int type;
    size_t bb, d_at, dmin_at; /* block bytes; offsets of d and dmin (dmin_at 0: none) */
    void (*pack)(const void *rows, size_t row_bytes, int64_t nb, void *dst);
    void (*get)(const void *x8, int r, void *dst); /* row r's block out of the x8 block x8 */
    void (*fill)(int r, uint8_t *blk);              /* rows 5 and 6 */
} kx8_case;

static void check_kx8(const kx8_case *T, const char *name)
{
    enum { ROWS = 19, COLS = 9, MAXNB = 5, MAXBB = 256 };
    const int nbs[] = {1, 3, 5};
    const sift__kernels *ref = sift__kernels_get(SIFT_ISA_SCALAR);
    static uint8_t plain[ROWS][MAXNB * MAXBB], packed[ROWS * MAXNB * MAXBB], again[ROWS * MAXNB * MAXBB];
    static sift_block_q8_K x[COLS][MAXNB];
    assert_true(T->bb <= MAXBB);
    int checked = 0;
    for (size_t ni = 0; ni < sizeof nbs / sizeof *nbs; ni++) {
        const int nb = nbs[ni], n = nb * 256;
        const size_t rb = (size_t)nb * T->bb, xs = sizeof x[0];
        for (int r = 0; r < ROWS; r++)
            for (int b = 0; b < nb; b++) {
                uint8_t *p = plain[r] + b * T->bb;
                for (size_t i = 0; i < T->bb; i++) p[i] = (uint8_t)(urand() * 256);
                const uint16_t d = sift__fp32_to_fp16((float)(0.001 + urand() * 0.01)), dm = sift__fp32_to_fp16((float)(0.001 + urand() * 0.01));
                memcpy(p + T->d_at, &d, 2);
                if (T->dmin_at) memcpy(p + T->dmin_at, &dm, 2);
                if (r == 5 || r == 6) T->fill(r, p);
            }
        float xf[MAXNB * 256];
        for (int c = 0; c < COLS; c++) {
            for (int i = 0; i < n; i++) xf[i] = frand(2);
            sift_quantize_row_q8_K(xf, x[c], n);
        }
        for (int b = 0; b < nb; b++) { /* column 2: every activation -128 */
            x[2][b].d = 0.01f;
            memset(x[2][b].qs, 0x80, sizeof x[2][b].qs);
            for (int j = 0; j < 16; j++) x[2][b].bsums[j] = -2048;
        }
        for (int r = 0; r < ROWS; r++) memcpy(packed + r * rb, plain[r], rb);
        for (int g = 0; g + 8 <= ROWS; g += 8) T->pack(plain[g], sizeof plain[0], nb, packed + g * rb);
        for (int g = 0; g + 8 <= ROWS; g += 8)
            for (int b = 0; b < nb; b++)
                for (int r = 0; r < 8; r++) {
                    uint8_t back[MAXBB];
                    T->get(packed + g * rb + 8 * b * T->bb, r, back);
                    assert_memory_equal(back, plain[g + r] + b * T->bb, T->bb);
                }
        for (int isa = 0; isa < N_TABLES; isa++) {
            const sift__kernels *k = table_at(isa);
            if (!k || !k->x8_pack[T->type]) continue;
            for (int r = 0; r < ROWS; r++) memcpy(again + r * rb, plain[r], rb);
            for (int g = 0; g + 8 <= ROWS; g += 8) k->x8_pack[T->type](plain[g], sizeof plain[0], nb, again + g * rb);
            assert_memory_equal(again, packed, ROWS * rb);
        }
        float want[COLS][ROWS];
        for (int r = 0; r < ROWS; r++)
            for (int c = 0; c < COLS; c++) ref->dot[T->type](n, plain[r], x[c], xs, 1, &want[c][r]);
        checked += check_gemm_x8(T->type, name, n, packed, rb, ROWS, x, xs, COLS, &want[0][0]);
    }
    printf("  %s x8 layout: %d results checked\n", name, checked);
    assert_true(checked > 0);
}

static void q4_K_get(const void *x8, int r, void *dst)
{
    sift__q4_K_x8_get(x8, r, dst);
}

/* row 5: all-15 values, the largest scales and mins; row 6: all-0 values, the same scales
 * (every product the min's) */
static void q4_K_fill(int r, uint8_t *blk)
{
    sift_block_q4_K *b = (sift_block_q4_K *)blk;
    memset(b->scales, 0xFF, sizeof b->scales);
    memset(b->qs, r == 5 ? 0xFF : 0, sizeof b->qs);
}

static void test_q4_K_x8(void **state)
{
    (void)state;
    const kx8_case T = {SIFT_TYPE_Q4_K, sizeof(sift_block_q4_K), offsetof(sift_block_q4_K, d), offsetof(sift_block_q4_K, dmin),
                        sift__q4_K_x8_pack_group, q4_K_get, q4_K_fill};
    check_kx8(&T, "Q4_K");
}

static void q5_K_get(const void *x8, int r, void *dst)
{
    sift__q5_K_x8_get(x8, r, dst);
}

/* row 5: all-31 values, the largest scales; row 6: no fifth bits */
static void q5_K_fill(int r, uint8_t *blk)
{
    sift_block_q5_K *b = (sift_block_q5_K *)blk;
    if (r == 5) memset(b->scales, 0xFF, sizeof b->scales), memset(b->qs, 0xFF, sizeof b->qs), memset(b->qh, 0xFF, sizeof b->qh);
    else memset(b->qh, 0, sizeof b->qh);
}

static void test_q5_K_x8(void **state)
{
    (void)state;
    const kx8_case T = {SIFT_TYPE_Q5_K, sizeof(sift_block_q5_K), offsetof(sift_block_q5_K, d), offsetof(sift_block_q5_K, dmin),
                        sift__q5_K_x8_pack_group, q5_K_get, q5_K_fill};
    check_kx8(&T, "Q5_K");
}

static void q6_K_get(const void *x8, int r, void *dst)
{
    sift__q6_K_x8_get(x8, r, dst);
}

/* row 5: all-63 values, scales -128 (the 16-bit partial sums of two steps at 2 x 2 x 63 x 128);
 * row 6: all-0 values (-32 each), scales 127 */
static void q6_K_fill(int r, uint8_t *blk)
{
    sift_block_q6_K *b = (sift_block_q6_K *)blk;
    memset(b->ql, r == 5 ? 0xFF : 0, sizeof b->ql);
    memset(b->qh, r == 5 ? 0xFF : 0, sizeof b->qh);
    memset(b->scales, r == 5 ? 0x80 : 0x7F, sizeof b->scales);
}

static void test_q6_K_x8(void **state)
{
    (void)state;
    const kx8_case T = {SIFT_TYPE_Q6_K, sizeof(sift_block_q6_K), offsetof(sift_block_q6_K, d), 0, sift__q6_K_x8_pack_group,
                        q6_K_get, q6_K_fill};
    check_kx8(&T, "Q6_K");
}

/* The choice by measurement (model/choose.c). The rule, on made-up times: a higher level is
 * taken only when it measures at least 3 % faster, so an AVX-512 table that is slower (as
 * the AVX-512 Q4_K one was on Zen 4) or merely as fast stays out; x8 ways are chosen among
 * themselves. Then the probe on this CPU: every type has ways, only tables the CPU runs,
 * and each choice names one of them. */
static void test_choice(void **state)
{
    (void)state;
    sift__kernels lo = {.isa = SIFT_ISA_AVX2}, hi = {.isa = SIFT_ISA_AVX512};
    const sift__kernel_way ways[] = {{&lo, false, "avx2"}, {&lo, true, "avx2-x8"}, {&hi, false, "avx512"}};
    const double slower[] = {100, 50, 200}, same[] = {100, 50, 98}, faster[] = {100, 50, 90}, inf[] = {100, 50, INFINITY};
    assert_int_equal(sift__kernel_fastest(ways, slower, 3, false), 0);
    assert_int_equal(sift__kernel_fastest(ways, same, 3, false), 0);
    assert_int_equal(sift__kernel_fastest(ways, faster, 3, false), 2);
    assert_int_equal(sift__kernel_fastest(ways, inf, 3, false), 0);
    assert_int_equal(sift__kernel_fastest(ways, faster, 3, true), 1);
    assert_int_equal(sift__kernel_fastest(ways, faster, 1, true), -1);

    bool used[SIFT_TYPE_COUNT] = {false};
    for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
        sift__kernel_way w[8];
        double gen[8], prompt[8];
        sift__kernel_choice c = {NULL, NULL, NULL};
        const int n = sift__kernel_measure(types[i], false, true, 2, w, 8, gen, prompt, &c);
        assert_true(n >= 1);
        for (int j = 0; j < n; j++) {
            assert_ptr_equal(sift__kernels_get(w[j].k->isa) == NULL, false);
            assert_true(gen[j] > 0 && prompt[j] > 0);
        }
        assert_non_null(c.gen);
        assert_non_null(c.prompt);
        assert_non_null(sift__kernels_get(c.gen->isa));
        assert_non_null(sift__kernels_get(c.prompt->isa));
        used[types[i]] = true;
    }
    sift__kernels k;
    sift__kernels_choose(used, false, &k);
    for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
        assert_non_null(k.rows[types[i]]);
        assert_non_null(k.dot[types[i]]);
    }
}


/* MXFP4 blocks of random bytes: any byte is a valid code pair and any exponent a scale
 * (0 and 1 are the subnormal 2^-128 and 2^-127, which the SIMD scale conversion handles
 * apart). Every ISA's dot (1..4 columns) and rows must give the scalar kernel's bits. */
static void test_mxfp4_any_bytes(void **state)
{
    (void)state;
    const sift__kernels *sc = sift__kernels_get(SIFT_ISA_SCALAR);
    enum { N = 256, NR = 13, NB = N / SIFT_QK_MXFP4 };
    const size_t wb = sift__type_row_bytes(SIFT_TYPE_MXFP4, N), ab = sift__act_row_bytes(SIFT_ACT_Q8_0, N);
    static uint8_t w[NR * NB * 17];
    static char x[4 * 8 * 34];
    float xf[4 * N];
    assert_int_equal(wb, NB * 17);
    assert_true(ab * 4 <= sizeof x);
    int checked = 0;
    for (int round = 0; round < 64; round++) {
        for (size_t i = 0; i < sizeof w; i++) w[i] = (uint8_t)(urand() * 256);
        /* exponents: mostly near 1 (2^-1 .. 2^1), some anywhere below 2^40, every row one of 0, 1, 2 */
        for (int r = 0; r < NR; r++)
            for (int b = 0; b < NB; b++) {
                uint8_t *e = &w[r * wb + (size_t)b * 17];
                *e = b == r % NB ? (uint8_t)(r % 3) : urand() < 0.8 ? (uint8_t)(127 + (int)(urand() * 3)) : (uint8_t)(urand() * 168);
            }
        for (int i = 0; i < 4 * N; i++) xf[i] = frand(3.0f);
        for (int j = 0; j < 4; j++) sc->act_convert(SIFT_ACT_Q8_0, xf + j * N, x + j * ab, N);
        float ref[NR][4], rows_ref[NR];
        for (int r = 0; r < NR; r++) sc->dot[SIFT_TYPE_MXFP4](N, w + r * wb, x, ab, 4, ref[r]);
        sc->rows[SIFT_TYPE_MXFP4](N, w, wb, NR, x, rows_ref);
        for (int r = 0; r < NR; r++) assert_memory_equal(&rows_ref[r], &ref[r][0], 4);
        for (int isa = 0; isa < N_TABLES; isa++) {
            const sift__kernels *k = table_at(isa);
            if (!k) continue;
            float got[4], rows_got[NR];
            for (int r = 0; r < NR; r++) {
                for (int nc = 1; nc <= 4; nc++) {
                    k->dot[SIFT_TYPE_MXFP4](N, w + r * wb, x, ab, nc, got);
                    if (memcmp(got, ref[r], (size_t)nc * 4) != 0) {
                        fprintf(stderr, "%s mxfp4 row %d ncols %d: %.9g vs scalar %.9g\n", table_name(isa), r, nc, got[0], ref[r][0]);
                        fail();
                    }
                    checked++;
                }
            }
            for (int huge = 0; huge < 2; huge++) {
                const sift__rows_fn rows = huge ? k->rows_huge[SIFT_TYPE_MXFP4] : k->rows[SIFT_TYPE_MXFP4];
                if (!rows) continue;
                rows(N, w, wb, NR, x, rows_got);
                for (int r = 0; r < NR; r++)
                    if (memcmp(&rows_got[r], &rows_ref[r], 4) != 0) {
                        fprintf(stderr, "%s mxfp4 rows%s %d: %.9g vs scalar %.9g\n", table_name(isa), huge ? "_huge" : "", r,
                                rows_got[r], rows_ref[r]);
                        fail();
                    }
            }
        }
    }
    assert_true(checked > 0);
}

/* MXFP4 in the x8 layout: the packing is undone by sift__mxfp4_x8_code (the exponents in
 * place), every table's packer makes the reference's bytes, and every table's gemm_x8 gives
 * the scalar dot kernel's value on the plain rows bit for bit, for row ranges that start
 * and end inside groups and in the plain tail, and 1..9 columns. */
static void test_mxfp4_x8(void **state)
{
    (void)state;
    enum { ROWS = 19, COLS = 9, MAXNB = 5 };
    const int nbs[] = {1, 3, 5};
    const sift__kernels *ref = sift__kernels_get(SIFT_ISA_SCALAR);
    static sift__block_mxfp4 plain[ROWS][MAXNB], packed[ROWS * MAXNB], again[ROWS * MAXNB];
    static sift__block_q8_0 x[COLS][MAXNB];
    int checked = 0;
    for (size_t ni = 0; ni < sizeof nbs / sizeof *nbs; ni++) {
        const int nb = nbs[ni], n = nb * 32;
        const size_t rb = (size_t)nb * sizeof(sift__block_mxfp4), xs = sizeof x[0];
        for (int r = 0; r < ROWS; r++)
            for (int b = 0; b < nb; b++) {
                uint8_t *p = (uint8_t *)&plain[r][b];
                for (size_t i = 0; i < sizeof plain[r][b]; i++) p[i] = (uint8_t)(urand() * 256);
                plain[r][b].e = (uint8_t)(r == 4 ? b % 3 : 120 + (int)(urand() * 12)); /* row 4: the subnormal scales */
                if (r == 5) memset(plain[r][b].qs, 0x77, sizeof plain[r][b].qs); /* every value +12 */
            }
        float xf[MAXNB * 32];
        for (int c = 0; c < COLS; c++) {
            for (int i = 0; i < n; i++) xf[i] = frand(2);
            ref->act_convert(SIFT_ACT_Q8_0, xf, x[c], n);
        }
        for (int b = 0; b < nb; b++) memset(x[2][b].qs, 0x81, sizeof x[2][b].qs); /* column 2: every activation -127 */
        memcpy(packed, plain, sizeof packed);
        for (int g = 0; g + 8 <= ROWS; g += 8) sift__mxfp4_x8_pack_group(plain[g], sizeof plain[0], nb, packed + g * nb);
        for (int r = ROWS / 8 * 8; r < ROWS; r++) memcpy(packed + r * nb, plain[r], rb);
        for (int g = 0; g + 8 <= ROWS; g += 8)
            for (int b = 0; b < nb; b++)
                for (int r = 0; r < 8; r++) {
                    const sift_block_mxfp4x8 *xb = (const sift_block_mxfp4x8 *)(packed + g * nb) + b;
                    assert_int_equal(xb->e[r], plain[g + r][b].e);
                    for (int j = 0; j < 16; j++) {
                        assert_int_equal(sift__mxfp4_x8_code(xb, r, j), plain[g + r][b].qs[j] & 15);
                        assert_int_equal(sift__mxfp4_x8_code(xb, r, j + 16), plain[g + r][b].qs[j] >> 4);
                    }
                }
        for (int isa = 0; isa < N_TABLES; isa++) {
            const sift__kernels *k = table_at(isa);
            if (!k || !k->x8_pack[SIFT_TYPE_MXFP4]) continue;
            memcpy(again, plain, sizeof again);
            for (int g = 0; g + 8 <= ROWS; g += 8) k->x8_pack[SIFT_TYPE_MXFP4](plain[g], sizeof plain[0], nb, again + g * nb);
            for (int r = ROWS / 8 * 8; r < ROWS; r++) memcpy(again + r * nb, plain[r], rb);
            assert_memory_equal(again, packed, ROWS * rb);
        }
        float want[COLS][ROWS];
        for (int r = 0; r < ROWS; r++)
            for (int c = 0; c < COLS; c++) ref->dot[SIFT_TYPE_MXFP4](n, plain[r], x[c], xs, 1, &want[c][r]);
        checked += check_gemm_x8(SIFT_TYPE_MXFP4, "MXFP4", n, packed, rb, ROWS, x, xs, COLS, &want[0][0]);
    }
    assert_true(checked > 0);
}

/* Q8_0 in the x8 layout: the packing is undone by sift__q8_0_x8_get, every table's packer
 * makes the reference's bytes, and every table's gemm_x8 gives the scalar dot kernel's value
 * on the plain rows bit for bit, for row ranges that start and end inside groups and in the
 * plain tail, and 1..9 columns. The weights are random bytes (-128 included), one row all
 * -128 and one all 127 meet columns of all -127 and all 127 activations (the 16-bit pair
 * sums at their bound). */
static void test_q8_0_x8(void **state)
{
    (void)state;
    enum { ROWS = 19, COLS = 9, MAXNB = 5 };
    const int nbs[] = {1, 3, 5};
    const sift__kernels *ref = sift__kernels_get(SIFT_ISA_SCALAR);
    static sift__block_q8_0 plain[ROWS][MAXNB], packed[ROWS * MAXNB], again[ROWS * MAXNB], x[COLS][MAXNB];
    int checked = 0;
    for (size_t ni = 0; ni < sizeof nbs / sizeof *nbs; ni++) {
        const int nb = nbs[ni], n = nb * 32;
        const size_t rb = (size_t)nb * sizeof(sift__block_q8_0), xs = sizeof x[0];
        for (int r = 0; r < ROWS; r++)
            for (int b = 0; b < nb; b++) {
                for (int i = 0; i < 32; i++) plain[r][b].qs[i] = (int8_t)(int)(urand() * 256 - 128);
                if (r == 5) memset(plain[r][b].qs, 0x80, sizeof plain[r][b].qs);
                if (r == 6) memset(plain[r][b].qs, 0x7F, sizeof plain[r][b].qs);
                plain[r][b].d = sift__fp32_to_fp16(frand(0.01f));
            }
        float xf[MAXNB * 32];
        for (int c = 0; c < COLS; c++) {
            for (int i = 0; i < n; i++) xf[i] = frand(2);
            ref->act_convert(SIFT_ACT_Q8_0, xf, x[c], n);
        }
        for (int b = 0; b < nb; b++) memset(x[2][b].qs, 0x81, sizeof x[2][b].qs); /* column 2: every activation -127 */
        for (int b = 0; b < nb; b++) memset(x[3][b].qs, 0x7F, sizeof x[3][b].qs); /* column 3: every activation 127 */
        memcpy(packed, plain, sizeof packed);
        for (int g = 0; g + 8 <= ROWS; g += 8) sift__q8_0_x8_pack_group(plain[g], sizeof plain[0], nb, packed + g * nb);
        for (int r = ROWS / 8 * 8; r < ROWS; r++) memcpy(packed + r * nb, plain[r], rb);
        for (int g = 0; g + 8 <= ROWS; g += 8)
            for (int b = 0; b < nb; b++)
                for (int r = 0; r < 8; r++) {
                    sift__block_q8_0 back;
                    sift__q8_0_x8_get((const sift_block_q8_0x8 *)(packed + g * nb) + b, r, &back);
                    assert_memory_equal(&back, &plain[g + r][b], sizeof back);
                }
        for (int isa = 0; isa < N_TABLES; isa++) {
            const sift__kernels *k = table_at(isa);
            if (!k || !k->x8_pack[SIFT_TYPE_Q8_0]) continue;
            memcpy(again, plain, sizeof again);
            for (int g = 0; g + 8 <= ROWS; g += 8) k->x8_pack[SIFT_TYPE_Q8_0](plain[g], sizeof plain[0], nb, again + g * nb);
            for (int r = ROWS / 8 * 8; r < ROWS; r++) memcpy(again + r * nb, plain[r], rb);
            assert_memory_equal(again, packed, ROWS * rb);
        }
        float want[COLS][ROWS];
        for (int r = 0; r < ROWS; r++)
            for (int c = 0; c < COLS; c++) ref->dot[SIFT_TYPE_Q8_0](n, plain[r], x[c], xs, 1, &want[c][r]);
        checked += check_gemm_x8(SIFT_TYPE_Q8_0, "Q8_0", n, packed, rb, ROWS, x, xs, COLS, &want[0][0]);
    }
    assert_true(checked > 0);
}

/* Q8_0's generation loops (rows, rows_huge: AVX2's eight-row kernel with its prefetch of the
 * next group) against the scalar dot kernel, bit for bit: every row count from 1 to 21 (whole
 * groups of eight, a partial last group, a partial next group to prefetch), row lengths of
 * 1, 2, 3, 7, 64 and 65 blocks, rows padded apart (a stride longer than the row, and odd),
 * weights of random bytes with -128 included (one row all -128 and one all 127 meet
 * activations of all -127 and all 127), and no value written past the last row. */
static void test_q8_0_rows(void **state)
{
    (void)state;
    enum { ROWS = 21, MAXNB = 65, PAD = 6, COLS = 4 };
    const int nbs[] = {1, 2, 3, 7, 64, 65};
    const sift__kernels *ref = sift__kernels_get(SIFT_ISA_SCALAR);
    const size_t stride = MAXNB * sizeof(sift__block_q8_0) + PAD;
    static unsigned char w[ROWS * (MAXNB * sizeof(sift__block_q8_0) + PAD)];
    static sift__block_q8_0 x[COLS][MAXNB];
    int checked = 0;
    for (size_t ni = 0; ni < sizeof nbs / sizeof *nbs; ni++) {
        const int nb = nbs[ni], n = nb * 32;
        for (int r = 0; r < ROWS; r++)
            for (int b = 0; b < nb; b++) {
                sift__block_q8_0 blk;
                for (int i = 0; i < 32; i++) blk.qs[i] = (int8_t)(int)(urand() * 256 - 128);
                if (r == 5) memset(blk.qs, 0x80, sizeof blk.qs);
                if (r == 6) memset(blk.qs, 0x7F, sizeof blk.qs);
                blk.d = sift__fp32_to_fp16(frand(0.01f));
                memcpy(w + r * stride + b * sizeof blk, &blk, sizeof blk);
            }
        float xf[MAXNB * 32];
        for (int c = 0; c < COLS; c++) {
            for (int i = 0; i < n; i++) xf[i] = frand(2);
            ref->act_convert(SIFT_ACT_Q8_0, xf, x[c], n);
        }
        for (int b = 0; b < nb; b++) memset(x[2][b].qs, 0x81, sizeof x[2][b].qs); /* every activation -127 */
        for (int b = 0; b < nb; b++) memset(x[3][b].qs, 0x7F, sizeof x[3][b].qs); /* every activation 127 */
        for (int c = 0; c < COLS; c++) {
            float want[ROWS];
            for (int r = 0; r < ROWS; r++) ref->dot[SIFT_TYPE_Q8_0](n, w + r * stride, x[c], sizeof x[c], 1, &want[r]);
            for (int isa = 0; isa < N_TABLES; isa++) {
                const sift__kernels *k = table_at(isa);
                if (!k) continue;
                const sift__rows_fn fns[2] = {k->rows[SIFT_TYPE_Q8_0], k->rows_huge[SIFT_TYPE_Q8_0]};
                for (int f = 0; f < 2; f++) {
                    if (!fns[f]) continue;
                    for (int nr = 1; nr <= ROWS; nr++) {
                        float got[ROWS + 1];
                        got[nr] = -1.0f;
                        fns[f](n, w, stride, nr, x[c], got);
                        for (int r = 0; r < nr; r++)
                            if (memcmp(&got[r], &want[r], 4) != 0) {
                                fprintf(stderr, "%s Q8_0 %s n=%d rows=%d col %d: row %d %.9g, scalar %.9g\n", table_name(isa),
                                        f ? "rows_huge" : "rows", n, nr, c, r, got[r], want[r]);
                                fail();
                            }
                        assert_true(got[nr] == -1.0f);
                        checked++;
                    }
                }
            }
        }
    }
    assert_true(checked > 0);
}

int main(void)
{
    printf("  best ISA on this CPU: %s\n", sift_isa_name(sift_isa_best()));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dot),
        cmocka_unit_test(test_attention_and_elementwise),
        cmocka_unit_test(test_q8_K),
        cmocka_unit_test(test_q4_K_scales),
        cmocka_unit_test(test_mxfp4_any_bytes),
        cmocka_unit_test(test_mxfp4_x8),
        cmocka_unit_test(test_q8_0_x8),
        cmocka_unit_test(test_q8_0_rows),
        cmocka_unit_test(test_gemm_big),
        cmocka_unit_test(test_q4_K_x8),
        cmocka_unit_test(test_q5_K_x8),
        cmocka_unit_test(test_q6_K_x8),
        cmocka_unit_test(test_choice),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
