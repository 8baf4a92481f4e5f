/*
 * test_ggml_types.c - tensor types on hand-made blocks with values worked out by hand.
 *
 * Every dequantizer gets a block whose bytes are written out here and whose expected
 * floats follow from the format's definition (value = d * q, d * q + m, d * sc * q - dmin *
 * m, ...), with small exact numbers so the expectations are exact. The quantizers are
 * checked on inputs whose quantization is known, and by a round trip whose error must stay
 * within the format's step. (Bit-exactness against ggml itself is peer_ggml_types.)
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gguf/ggml_types.h"

#define H_1 0x3C00    /* 1.0 */
#define H_2 0x4000    /* 2.0 */
#define H_0_5 0x3800  /* 0.5 */
#define H_0_25 0x3400 /* 0.25 */
#define H_M1 0xBC00   /* -1.0 */

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static void test_type_table(void **state)
{
    (void)state;
    assert_string_equal(sift_type_name(SIFT_TYPE_Q4_K), "q4_K");
    assert_int_equal(sift_type_block_size(SIFT_TYPE_Q8_0), 32);
    assert_int_equal(sift_type_block_bytes(SIFT_TYPE_Q8_0), 34);
    assert_int_equal(sift_type_block_size(SIFT_TYPE_Q6_K), 256);
    assert_int_equal(sift_type_block_bytes(SIFT_TYPE_Q6_K), 210);
    assert_int_equal(sift_type_block_bytes(SIFT_TYPE_BF16), 2);
    assert_null(sift_type_name(4)); /* removed Q4_2 */
    assert_null(sift_type_name(-1));
    assert_null(sift_type_name(SIFT_TYPE_COUNT));
    assert_int_equal(sift_type_block_size(31), 0);
    assert_int_equal(sift__type_row_bytes(SIFT_TYPE_Q4_K, 512), 288);
    assert_int_equal(sift__type_row_bytes(SIFT_TYPE_Q8_0, 172), 0); /* not whole blocks */
    assert_int_equal(sift__type_row_bytes(SIFT_TYPE_F32, 3), 12);
    float y[32];
    uint8_t q[64] = {0};
    assert_int_equal(sift__dequantize_row(SIFT_TYPE_Q2_K, q, y, 256), SIFT_E_UNSUPPORTED);
    assert_int_equal(sift__dequantize_row(SIFT_TYPE_Q8_0, q, y, 31), SIFT_E_INVAL);
    assert_int_equal(sift__quantize_row(SIFT_TYPE_IQ4_NL, y, q, 32), SIFT_E_UNSUPPORTED);
}

static void test_half(void **state)
{
    (void)state;
    assert_true(sift__fp16_to_fp32(H_1) == 1.0f);
    assert_true(sift__fp16_to_fp32(0xC000) == -2.0f);
    assert_true(sift__fp16_to_fp32(0x7BFF) == 65504.0f);
    assert_true(sift__fp16_to_fp32(0x0400) == 0x1p-14f); /* smallest normal */
    assert_true(sift__fp16_to_fp32(0x0001) == 0x1p-24f); /* smallest subnormal */
    assert_true(sift__fp16_to_fp32(0x83FF) == -1023 * 0x1p-24f);
    assert_true(isinf(sift__fp16_to_fp32(0x7C00)));
    assert_true(isnan(sift__fp16_to_fp32(0x7C01)));
    assert_true(signbit(sift__fp16_to_fp32(0x8000)));

    assert_int_equal(sift__fp32_to_fp16(1.0f), H_1);
    assert_int_equal(sift__fp32_to_fp16(-0.0f), 0x8000);
    assert_int_equal(sift__fp32_to_fp16(65504.0f), 0x7BFF);
    assert_int_equal(sift__fp32_to_fp16(65519.0f), 0x7BFF); /* below the halfway point 65520 */
    assert_int_equal(sift__fp32_to_fp16(65520.0f), 0x7C00); /* ties to even: overflows */
    assert_int_equal(sift__fp32_to_fp16(1e10f), 0x7C00);
    assert_int_equal(sift__fp32_to_fp16(1.0f + 0x1p-11f), H_1);        /* tie -> even (down) */
    assert_int_equal(sift__fp32_to_fp16(1.0f + 3 * 0x1p-11f), 0x3C02); /* tie -> even (up) */
    assert_int_equal(sift__fp32_to_fp16(1.0f + 0x1p-11f + 0x1p-20f), 0x3C01);
    assert_int_equal(sift__fp32_to_fp16(0x1p-25f), 0x0000);          /* tie between 0 and 2^-24 */
    assert_int_equal(sift__fp32_to_fp16(0x1p-25f * 1.5f), 0x0001);
    assert_int_equal(sift__fp32_to_fp16(3 * 0x1p-25f), 0x0002);      /* tie 1.5 ulp -> even */
    assert_int_equal(sift__fp32_to_fp16(0x1p-14f - 0x1p-26f), 0x0400); /* rounds up into the normals */
    assert_int_equal(sift__fp32_to_fp16(NAN) & 0x7E00, 0x7E00);
    /* every finite half survives half -> float -> half */
    for (uint32_t h = 0; h < 65536; h++) {
        if ((h & 0x7C00) == 0x7C00 && (h & 0x3FF)) continue;
        assert_int_equal(sift__fp32_to_fp16(sift__fp16_to_fp32((uint16_t)h)), h);
    }

    assert_int_equal(sift__fp32_to_bf16(1.0f), 0x3F80);
    assert_int_equal(sift__fp32_to_bf16(1.0f + 0x1p-8f), 0x3F80);     /* tie -> even */
    assert_int_equal(sift__fp32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3F82); /* tie -> even (up) */
    assert_int_equal(sift__fp32_to_bf16(-2.5f), 0xC020);
    assert_int_equal(sift__fp32_to_bf16(NAN) & 0x7FC0, 0x7FC0);
    assert_true(sift__bf16_to_fp32(0x3F80) == 1.0f);
    assert_true(sift__bf16_to_fp32(0xC020) == -2.5f);
}

static void test_float_rows(void **state)
{
    (void)state;
    uint8_t b[8];
    float y[4];
    put16(b, H_1), put16(b + 2, 0xC000), put16(b + 4, 0x3555), put16(b + 6, 0x0001);
    sift__dequantize_row_f16(b, y, 4);
    assert_true(y[0] == 1.0f && y[1] == -2.0f && y[2] == 0.333251953125f && y[3] == 0x1p-24f);
    put16(b, 0x3F80), put16(b + 2, 0xC020), put16(b + 4, 0x0000), put16(b + 6, 0x4049);
    sift__dequantize_row_bf16(b, y, 4);
    assert_true(y[0] == 1.0f && y[1] == -2.5f && y[2] == 0.0f && y[3] == 3.140625f);
    const float x[3] = {1.5f, -7.0f, 0.1f};
    float back[3];
    uint8_t raw[12];
    sift__quantize_row_f32(x, raw, 3);
    sift__dequantize_row_f32(raw, back, 3);
    assert_memory_equal(x, back, sizeof x);
}

static void test_q8_0(void **state)
{
    (void)state;
    uint8_t b[2 * 34];
    put16(b, H_0_5); /* block 0: d = 0.5, q = j - 16 */
    for (int j = 0; j < 32; j++) b[2 + j] = (uint8_t)(int8_t)(j - 16);
    put16(b + 34, H_M1); /* block 1: d = -1, q = -128 and 127 alternating */
    for (int j = 0; j < 32; j++) b[36 + j] = (uint8_t)(j & 1 ? 127 : -128);
    float y[64];
    sift__dequantize_row_q8_0(b, y, 64);
    for (int j = 0; j < 32; j++) assert_true(y[j] == (j - 16) * 0.5f);
    for (int j = 0; j < 32; j++) assert_true(y[32 + j] == (j & 1 ? -127.0f : 128.0f));

    /* quantize: amax 127 gives d = 1 and q = round(x) exactly */
    float x[32];
    for (int j = 0; j < 32; j++) x[j] = (float)(j * 8 - 127) + (j == 5 ? 0.4f : 0.0f);
    x[31] = 127.0f;
    uint8_t q[34];
    sift__quantize_row_q8_0(x, q, 32);
    assert_int_equal(q[0] | (q[1] << 8), H_1);
    for (int j = 0; j < 32; j++) assert_int_equal((int8_t)q[2 + j], (int)roundf(x[j]));
}

static void test_q4_0(void **state)
{
    (void)state;
    uint8_t b[18];
    put16(b, H_2);
    for (int j = 0; j < 16; j++) b[2 + j] = (uint8_t)((j & 0xF) | ((15 - j) << 4));
    float y[32];
    sift__dequantize_row_q4_0(b, y, 32);
    for (int j = 0; j < 16; j++) {
        assert_true(y[j] == (j - 8) * 2.0f);           /* low nibbles: values 0..15 */
        assert_true(y[j + 16] == ((15 - j) - 8) * 2.0f); /* high nibbles: values 16..31 */
    }
    /* quantize: max-magnitude value -16 gives d = 2 and q = x / 2 + 8 */
    float x[32];
    for (int j = 0; j < 32; j++) x[j] = (float)(2 * ((j % 16) - 8));
    x[0] = -16.0f;
    uint8_t q[18];
    sift__quantize_row_q4_0(x, q, 32);
    assert_int_equal(q[0] | (q[1] << 8), H_2);
    for (int j = 0; j < 16; j++) {
        assert_int_equal(q[2 + j] & 0xF, (int)(x[j] / 2 + 8));
        assert_int_equal(q[2 + j] >> 4, (int)(x[j + 16] / 2 + 8));
    }
}

static void test_q4_1(void **state)
{
    (void)state;
    uint8_t b[20];
    put16(b, H_0_25), put16(b + 2, H_M1);
    for (int j = 0; j < 16; j++) b[4 + j] = (uint8_t)(j | (j << 4));
    float y[32];
    sift__dequantize_row_q4_1(b, y, 32);
    for (int j = 0; j < 16; j++) assert_true(y[j] == j * 0.25f - 1.0f && y[j + 16] == y[j]);
    /* quantize: min -1, max 2.75 -> d = 0.25, q = (x + 1) / 0.25 */
    float x[32];
    for (int j = 0; j < 32; j++) x[j] = (j % 16) * 0.25f - 1.0f;
    uint8_t q[20];
    sift__quantize_row_q4_1(x, q, 32);
    assert_int_equal(q[0] | (q[1] << 8), H_0_25);
    assert_int_equal(q[2] | (q[3] << 8), H_M1);
    for (int j = 0; j < 16; j++) assert_int_equal(q[4 + j], j | (j << 4));
}

static void test_q5_0_q5_1(void **state)
{
    (void)state;
    uint8_t b[22];
    put16(b, H_1);
    const uint32_t qh = 0xF0F0A5A5u; /* bit j = 5th bit of value j */
    for (int i = 0; i < 4; i++) b[2 + i] = (uint8_t)(qh >> (8 * i));
    for (int j = 0; j < 16; j++) b[6 + j] = (uint8_t)(j | ((j ^ 5) << 4));
    float y[32];
    sift__dequantize_row_q5_0(b, y, 32);
    for (int j = 0; j < 16; j++) {
        assert_true(y[j] == (float)((j | (int)((qh >> j) & 1) << 4) - 16));
        assert_true(y[j + 16] == (float)(((j ^ 5) | (int)((qh >> (j + 16)) & 1) << 4) - 16));
    }
    uint8_t c[24];
    put16(c, H_0_5), put16(c + 2, H_2);
    memcpy(c + 4, b + 2, 20);
    sift__dequantize_row_q5_1(c, y, 32);
    for (int j = 0; j < 16; j++) {
        assert_true(y[j] == (float)(j | (int)((qh >> j) & 1) << 4) * 0.5f + 2.0f);
        assert_true(y[j + 16] == (float)((j ^ 5) | (int)((qh >> (j + 16)) & 1) << 4) * 0.5f + 2.0f);
    }
    /* quantize q5_0: max-magnitude -16 -> d = 1, q = x + 16, 5th bits into qh */
    float x[32];
    for (int j = 0; j < 32; j++) x[j] = (float)((j * 7) % 32 - 16);
    x[3] = -16.0f;
    uint8_t q[22];
    sift__quantize_row_q5_0(x, q, 32);
    sift__dequantize_row_q5_0(q, y, 32);
    assert_memory_equal(x, y, sizeof x);
    /* quantize q5_1: min 0, max 31 -> d = 1, exact */
    for (int j = 0; j < 32; j++) x[j] = (float)((j * 13) % 32);
    uint8_t q1[24];
    sift__quantize_row_q5_1(x, q1, 32);
    sift__dequantize_row_q5_1(q1, y, 32);
    assert_memory_equal(x, y, sizeof x);
}

/* Pack 6-bit scales/mins of the 8 sub-blocks of a Q4_K/Q5_K block (the format's layout,
 * written out independently of the library's decoder). */
static void pack_k_scales(uint8_t s[12], const uint8_t sc[8], const uint8_t mn[8])
{
    for (int j = 0; j < 4; j++) {
        s[j] = (uint8_t)((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
        s[j + 4] = (uint8_t)((mn[j] & 63) | ((mn[j + 4] >> 4) << 6));
        s[j + 8] = (uint8_t)((sc[j + 4] & 15) | ((mn[j + 4] & 15) << 4));
    }
}

static const uint8_t ksc[8] = {1, 2, 3, 4, 17, 33, 48, 63};
static const uint8_t kmn[8] = {0, 1, 5, 63, 16, 20, 32, 47};

static void test_q4_K(void **state)
{
    (void)state;
    uint8_t b[144];
    put16(b, H_0_5), put16(b + 2, H_0_25); /* d = 0.5, dmin = 0.25 */
    pack_k_scales(b + 4, ksc, kmn);
    for (int i = 0; i < 128; i++) b[16 + i] = (uint8_t)(i * 37);
    float y[256];
    sift_dequantize_row_q4_K(b, y, 256);
    /* values 64c..64c+31 are the low nibbles of qs[32c..32c+31] (sub-block 2c),
     * 64c+32..64c+63 their high nibbles (sub-block 2c+1) */
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
            uint8_t q = (uint8_t)((32 * c + l) * 37);
            int s0 = 2 * c, s1 = 2 * c + 1;
            assert_true(y[64 * c + l] == 0.5f * ksc[s0] * (q & 15) - 0.25f * kmn[s0]);
            assert_true(y[64 * c + 32 + l] == 0.5f * ksc[s1] * (q >> 4) - 0.25f * kmn[s1]);
        }
    assert_true(y[0] == 0.0f);          /* sub-block 0: scale 1, min 0, q = 0 */
    assert_true(y[255] == 0.5f * 63 * (uint8_t)(127 * 37 >> 4 & 15) - 0.25f * 47);
}

static void test_q5_K(void **state)
{
    (void)state;
    uint8_t b[176];
    put16(b, H_1), put16(b + 2, H_0_5);
    pack_k_scales(b + 4, ksc, kmn);
    for (int i = 0; i < 32; i++) b[16 + i] = (uint8_t)(i * 91 + 7); /* qh */
    for (int i = 0; i < 128; i++) b[48 + i] = (uint8_t)(i * 53 + 1); /* qs */
    float y[256];
    sift_dequantize_row_q5_K(b, y, 256);
    /* value 64c + l (l < 32): low nibble of qs[32c + l] plus 16 * bit 2c of qh[l];
     * value 64c + 32 + l: high nibble plus 16 * bit 2c+1 of qh[l] */
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
            uint8_t q = (uint8_t)((32 * c + l) * 53 + 1), h = (uint8_t)(l * 91 + 7);
            int lo = (q & 15) + ((h >> (2 * c)) & 1) * 16, hi = (q >> 4) + ((h >> (2 * c + 1)) & 1) * 16;
            assert_true(y[64 * c + l] == 1.0f * ksc[2 * c] * lo - 0.5f * kmn[2 * c]);
            assert_true(y[64 * c + 32 + l] == 1.0f * ksc[2 * c + 1] * hi - 0.5f * kmn[2 * c + 1]);
        }
}

static void test_q6_K(void **state)
{
    (void)state;
    uint8_t b[210];
    for (int i = 0; i < 128; i++) b[i] = (uint8_t)(i * 29 + 3);        /* ql */
    for (int i = 0; i < 64; i++) b[128 + i] = (uint8_t)(i * 71 + 11);  /* qh */
    for (int i = 0; i < 16; i++) b[192 + i] = (uint8_t)(int8_t)(i % 2 ? -(i + 1) : i + 1); /* scales */
    put16(b + 208, H_0_25);
    float y[256];
    sift_dequantize_row_q6_K(b, y, 256);
    /* half h (128 values) uses ql[64h..], qh[32h..], scales[8h..]; within it, value
     * 32k + l takes 4 bits from ql (low nibble of ql[l] / ql[l+32] for k = 0/1, high
     * nibble for k = 2/3) and 2 bits 2k..2k+1 of qh[l]; scale index 2k + l/16 */
    for (int h = 0; h < 2; h++)
        for (int k = 0; k < 4; k++)
            for (int l = 0; l < 32; l++) {
                const uint8_t *ql = b + 64 * h, *qh = b + 128 + 32 * h;
                const int8_t *sc = (const int8_t *)(b + 192 + 8 * h);
                int low = k == 0 ? ql[l] & 15 : k == 1 ? ql[l + 32] & 15 : k == 2 ? ql[l] >> 4 : ql[l + 32] >> 4;
                int q = (low | (((qh[l] >> (2 * k)) & 3) << 4)) - 32;
                float want = 0.25f * sc[2 * k + l / 16] * q;
                assert_true(y[128 * h + 32 * k + l] == want);
            }
}

/* Round trips: the error of each value stays within the format's step for that block. */
static void test_round_trips(void **state)
{
    (void)state;
    enum { N = 256 * 8 };
    static float x[N], y[N];
    static uint8_t q[N * 4];
    uint32_t s = 12345;
    for (int i = 0; i < N; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = ((float)(s >> 8) / 16777216.0f - 0.5f) * (i % 512 < 256 ? 2.0f : 0.02f);
    }
    const struct {
        int type;
        float rel; /* max error / (block max - block min) */
    } cases[] = {
        {SIFT_TYPE_Q8_0, 1.0f / 254 + 1e-3f}, {SIFT_TYPE_Q4_0, 1.0f / 15 + 1e-3f}, {SIFT_TYPE_Q4_1, 1.0f / 30 + 1e-3f},
        {SIFT_TYPE_Q5_0, 1.0f / 31 + 1e-3f},  {SIFT_TYPE_Q5_1, 1.0f / 62 + 1e-3f},  {SIFT_TYPE_Q4_K, 0.08f},
        {SIFT_TYPE_Q5_K, 0.04f},              {SIFT_TYPE_Q6_K, 0.02f},              {SIFT_TYPE_F16, 1e-3f},
        {SIFT_TYPE_BF16, 8e-3f},
        /* MXFP4: the block max is in [8, 16) steps d and the codes 0..12 steps apart by up
         * to 4 (8 -> 12), so an error of up to a quarter of the max */
        {SIFT_TYPE_MXFP4, 0.25f + 1e-3f},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int64_t bs = sift_type_block_size(cases[c].type) < 32 ? 32 : sift_type_block_size(cases[c].type);
        assert_int_equal(sift__quantize_row(cases[c].type, x, q, N), SIFT_OK);
        assert_int_equal(sift__dequantize_row(cases[c].type, q, y, N), SIFT_OK);
        for (int64_t b0 = 0; b0 < N; b0 += bs) {
            float lo = x[b0], hi = x[b0];
            for (int64_t i = b0; i < b0 + bs; i++) lo = fminf(lo, x[i]), hi = fmaxf(hi, x[i]);
            for (int64_t i = b0; i < b0 + bs; i++)
                if (fabsf(x[i] - y[i]) > cases[c].rel * (hi - lo))
                    fail_msg("%s: value %lld: %g -> %g (block range %g)", sift_type_name(cases[c].type),
                             (long long)i, x[i], y[i], hi - lo);
        }
    }
    /* all-zero input quantizes to zeros (and no NaN from 0/0) */
    memset(x, 0, sizeof x);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        sift__quantize_row(cases[c].type, x, q, N);
        sift__dequantize_row(cases[c].type, q, y, N);
        for (int i = 0; i < N; i++) assert_true(y[i] == 0.0f);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_type_table), cmocka_unit_test(test_half),  cmocka_unit_test(test_float_rows),
        cmocka_unit_test(test_q8_0),       cmocka_unit_test(test_q4_0),  cmocka_unit_test(test_q4_1),
        cmocka_unit_test(test_q5_0_q5_1),  cmocka_unit_test(test_q4_K),  cmocka_unit_test(test_q5_K),
        cmocka_unit_test(test_q6_K),       cmocka_unit_test(test_round_trips),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
