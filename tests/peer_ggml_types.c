/*
 * peer_ggml_types.c - sift's tensor-type code against ggml itself, bit for bit.
 *
 * Loads libggml-base.so from the peer build (llama.cpp's own library, see
 * ../shared/peer/README.md) with dlopen and compares, on the same inputs:
 *   - the type table (name, block size, block bytes) for every type number;
 *   - fp16 -> fp32 for all 65536 halves, fp32 -> fp16 and fp32 -> bf16 for every 2^32
 *     float bit pattern with --exhaustive (else a 2^24-pattern stride plus edge cases);
 *   - dequantize_row_* on random blocks (every bit pattern is a valid block), and
 *     quantize_row_*_ref on several input distributions, for the 12 types sift computes.
 * Prints one line per check and exits non-zero on the first difference.
 *
 * usage: peer_ggml_types [--exhaustive] [path/to/libggml-base.so]
 * Registered as CTest `ggml_types_peer` only when the peer library exists at configure
 * time (the suite must pass without it).
 */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/ggml_types.h"

typedef const char *(*type_name_fn)(int);
typedef size_t (*type_size_fn)(int);
typedef int64_t (*blck_size_fn)(int);
typedef float (*h2f_fn)(uint16_t);
typedef uint16_t (*f2h_fn)(float);
typedef void (*deq_fn)(const void *, float *, int64_t);
typedef void (*qnt_fn)(const float *, void *, int64_t);

static void *lib;
static void *sym(const char *name)
{
    void *p = dlsym(lib, name);
    if (!p) {
        fprintf(stderr, "peer_ggml_types: %s not found in the peer library\n", name);
        exit(1);
    }
    return p;
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}
static float uniform(void) { return (float)((next() >> 40) * (1.0 / 16777216.0)); }
static float gauss(void)
{
    float u = uniform() + 1e-7f, v = uniform();
    return sqrtf(-2.0f * logf(u)) * cosf(6.2831853f * v);
}

static int failures;

static void check_table(void)
{
    type_name_fn name = (type_name_fn)sym("ggml_type_name");
    type_size_fn size = (type_size_fn)sym("ggml_type_size");
    blck_size_fn blck = (blck_size_fn)sym("ggml_blck_size");
    int known = 0;
    for (int t = 0; t < SIFT_TYPE_COUNT; t++) {
        const sift__type_traits *tr = sift__type_traits_get(t);
        int64_t pb = blck(t);
        if (pb == 0) { /* removed in ggml */
            if (tr) printf("table: type %d is removed in ggml but known to sift\n", t), failures++;
            continue;
        }
        if (!tr || strcmp(tr->name, name(t)) || tr->block_size != pb || tr->block_bytes != size(t)) {
            printf("table: type %d differs: ggml %s/%lld/%zu\n", t, name(t), (long long)pb, size(t));
            failures++;
        }
        known++;
    }
    printf("type table: %d types compared, %s\n", known, failures ? "DIFFERENCES" : "identical");
}

static void check_half(int exhaustive)
{
    h2f_fn h2f = (h2f_fn)sym("ggml_fp16_to_fp32");
    f2h_fn f2h = (f2h_fn)sym("ggml_fp32_to_fp16");
    h2f_fn b2f = (h2f_fn)sym("ggml_bf16_to_fp32");
    f2h_fn f2b = (f2h_fn)sym("ggml_fp32_to_bf16");
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float a = sift__fp16_to_fp32((uint16_t)h), b = h2f((uint16_t)h);
        if (memcmp(&a, &b, 4) && bad++ < 3) {
            uint32_t ua, ub;
            memcpy(&ua, &a, 4), memcpy(&ub, &b, 4);
            printf("  fp16 0x%04x: sift 0x%08x ggml 0x%08x\n", h, ua, ub);
        }
        a = sift__bf16_to_fp32((uint16_t)h), b = b2f((uint16_t)h);
        if (memcmp(&a, &b, 4)) bad++;
    }
    printf("fp16/bf16 -> fp32: all 65536 patterns, %d differences\n", bad);
    failures += bad;
    uint64_t step = exhaustive ? 1 : 251, n = 0;
    int bad16 = 0, bad16nan = 0, badb = 0;
    for (uint64_t u = 0; u < (1ull << 32); u += step, n++) {
        float f;
        uint32_t x = (uint32_t)u;
        memcpy(&f, &x, 4);
        uint16_t a = sift__fp32_to_fp16(f), b = f2h(f);
        if (a != b) {
            if (isnan(f)) bad16nan++; /* NaN payloads: F16C keeps them, ggml's C code does not */
            else if (bad16++ < 5) printf("  fp16(%a = 0x%08x): sift 0x%04x ggml 0x%04x\n", f, x, a, b);
        }
        a = sift__fp32_to_bf16(f), b = f2b(f);
        if (a != b && badb++ < 5) printf("  bf16(%a = 0x%08x): sift 0x%04x ggml 0x%04x\n", f, x, a, b);
    }
    printf("fp32 -> fp16/bf16: %llu patterns, %d fp16 differences (+%d NaN payload differences), %d bf16 "
           "differences\n", (unsigned long long)n, bad16, bad16nan, badb);
    failures += bad16 + badb;
}

typedef struct {
    int type;
    const char *deq, *qnt;
} row_pair;

static void check_rows(void)
{
    static const row_pair pairs[] = {
        {SIFT_TYPE_Q4_0, "dequantize_row_q4_0", "quantize_row_q4_0_ref"},
        {SIFT_TYPE_Q4_1, "dequantize_row_q4_1", "quantize_row_q4_1_ref"},
        {SIFT_TYPE_Q5_0, "dequantize_row_q5_0", "quantize_row_q5_0_ref"},
        {SIFT_TYPE_Q5_1, "dequantize_row_q5_1", "quantize_row_q5_1_ref"},
        {SIFT_TYPE_Q8_0, "dequantize_row_q8_0", "quantize_row_q8_0_ref"},
        {SIFT_TYPE_Q4_K, "dequantize_row_q4_K", "quantize_row_q4_K_ref"},
        {SIFT_TYPE_Q5_K, "dequantize_row_q5_K", "quantize_row_q5_K_ref"},
        {SIFT_TYPE_Q6_K, "dequantize_row_q6_K", "quantize_row_q6_K_ref"},
        {SIFT_TYPE_MXFP4, "dequantize_row_mxfp4", "quantize_row_mxfp4_ref"},
        {SIFT_TYPE_F16, "ggml_fp16_to_fp32_row", "ggml_fp32_to_fp16_row"},
        {SIFT_TYPE_BF16, "ggml_bf16_to_fp32_row", "ggml_fp32_to_bf16_row_ref"},
    };
    enum { N = 256 * 64 };
    float *x = malloc(N * sizeof *x), *ya = malloc(N * sizeof *ya), *yb = malloc(N * sizeof *yb);
    uint8_t *qa = malloc(N * 4), *qb = malloc(N * 4);
    for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++) {
        const sift__type_traits *t = sift__type_traits_get(pairs[p].type);
        deq_fn deq = (deq_fn)sym(pairs[p].deq);
        qnt_fn qnt = (qnt_fn)sym(pairs[p].qnt);
        size_t bytes = (size_t)(N / t->block_size) * t->block_bytes;
        int bad_deq = 0, bad_q = 0, rounds = 0;
        for (int round = 0; round < 40; round++, rounds++) {
            /* dequantize random bytes; keep fp16 scales finite-ish half of the time so the
             * comparison is not all NaN/inf */
            for (size_t i = 0; i < bytes; i++) qa[i] = (uint8_t)next();
            if (round & 1)
                for (size_t i = 1; i < bytes; i += 2) qa[i] &= 0x3F;
            t->dequantize(qa, ya, N);
            deq(qa, yb, N);
            if (memcmp(ya, yb, N * sizeof(float))) bad_deq++;
            /* quantize several distributions: gaussian, uniform, sparse, tiny, huge, constant */
            int kind = round % 8;
            for (int i = 0; i < N; i++) {
                float v = kind == 0 ? gauss()
                        : kind == 1 ? uniform() * 2 - 1
                        : kind == 2 ? (next() % 7 == 0 ? gauss() * 10 : 0.0f)
                        : kind == 3 ? gauss() * 1e-6f
                        : kind == 4 ? gauss() * 3e4f
                        : kind == 5 ? 0.125f
                        : kind == 6 ? uniform() + 0.5f /* all positive: min > 0 paths */
                        : (float)(int)(gauss() * 8);   /* integers: exact ties */
                x[i] = v;
            }
            memset(qa, 0xAB, bytes);
            memset(qb, 0xAB, bytes);
            t->quantize(x, qa, N);
            qnt(x, qb, N);
            if (memcmp(qa, qb, bytes)) {
                if (bad_q++ == 0) {
                    size_t i = 0;
                    while (qa[i] == qb[i]) i++;
                    printf("  %s: first difference at byte %zu (block %zu), distribution %d\n", t->name, i,
                           i / t->block_bytes, kind);
                }
            }
        }
        printf("%-5s: %d rounds of %d values: dequantize %d differing rounds, quantize %d differing rounds\n",
               t->name, rounds, N, bad_deq, bad_q);
        failures += bad_deq + bad_q;
    }
    free(x), free(ya), free(yb), free(qa), free(qb);
}

int main(int argc, char **argv)
{
    int exhaustive = 0;
    const char *path = "/tmp/sift-peer/package/bins/linux-x64/libggml-base.so";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--exhaustive")) exhaustive = 1;
        else path = argv[i];
    }
    lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "peer_ggml_types: cannot load %s: %s\n", path, dlerror());
        return 1;
    }
    check_table();
    check_half(exhaustive);
    check_rows();
    printf("%s\n", failures ? "FAIL" : "all identical to ggml");
    return failures ? 1 : 0;
}
