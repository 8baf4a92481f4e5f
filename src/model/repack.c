/*
 * repack.c - the x8 layouts of Q4_K, Q5_K, Q6_K, MXFP4 and Q8_0 matrices (repack.h): packing at load, and one row's
 * block back out of a group (for the scalar kernels and the tests).
 *
 * The packing runs once per model load, inside weights.c's copy: each group of eight rows
 * is read from the file into a small buffer and packed from there into its place, so the
 * layout costs no pass over memory beyond the copy itself.
 */
#include <stdlib.h>
#include <string.h>

#include "model/kernels.h"
#include "model/repack.h"

/* The 6-bit scale and min of sub-block j of a block (ggml's get_scale_min_k4). */
static void scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *m)
{
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

static uint32_t load32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

void sift__q4_K_x8_pack(const sift_block_q4_K *const src[8], sift_block_q4_Kx8 *dst)
{
    for (int r = 0; r < 8; r++) {
        const sift_block_q4_K *b = src[r];
        dst->d[r] = b->d;
        dst->dmin[r] = b->dmin;
        uint8_t sc[8], m[8];
        for (int j = 0; j < 8; j++) scale_min(j, b->scales, &sc[j], &m[j]);
        for (int j = 0; j < 4; j++) {
            dst->sl[8 * j + r] = (uint8_t)((sc[j] & 15) | (sc[j + 4] & 15) << 4);
            dst->ml[8 * j + r] = (uint8_t)((m[j] & 15) | (m[j + 4] & 15) << 4);
            dst->hi[8 * j + r] = (uint8_t)(sc[j] >> 4 | (sc[j + 4] >> 4) << 2 | (m[j] >> 4) << 4 | (m[j + 4] >> 4) << 6);
        }
        /* sub-block s = 2g + h is nibble h of qs[32g .. 32g+32): the four values 4t.. of the
         * x8 word are nibble h of bytes 32g + 4t.., the four values 16 + 4t.. of bytes
         * 32g + 16 + 4t.. (four bytes at a time, in 32-bit words) */
        for (int s = 0; s < 8; s++)
            for (int t = 0; t < 4; t++) {
                const uint32_t a = load32(b->qs + 32 * (s / 2) + 4 * t), c = load32(b->qs + 32 * (s / 2) + 16 + 4 * t);
                const uint32_t v = s % 2 ? ((a >> 4) & 0x0F0F0F0Fu) | (c & 0xF0F0F0F0u) : (a & 0x0F0F0F0Fu) | (c & 0x0F0F0F0Fu) << 4;
                memcpy(dst->qs + 32 * (4 * s + t) + 4 * r, &v, sizeof v);
            }
    }
}

void sift__q4_K_x8_get(const sift_block_q4_Kx8 *src, int r, sift_block_q4_K *dst)
{
    dst->d = src->d[r];
    dst->dmin = src->dmin[r];
    uint8_t sc[8], m[8];
    for (int j = 0; j < 4; j++) {
        const uint8_t h = src->hi[8 * j + r];
        sc[j] = (uint8_t)((src->sl[8 * j + r] & 15) | (h & 3) << 4);
        sc[j + 4] = (uint8_t)((src->sl[8 * j + r] >> 4) | (h >> 2 & 3) << 4);
        m[j] = (uint8_t)((src->ml[8 * j + r] & 15) | (h >> 4 & 3) << 4);
        m[j + 4] = (uint8_t)((src->ml[8 * j + r] >> 4) | (h >> 6) << 4);
    }
    for (int j = 0; j < 4; j++) { /* the inverse of scale_min: every bit of the 12 bytes is set */
        dst->scales[j] = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
        dst->scales[j + 4] = (uint8_t)(m[j] | (m[j + 4] >> 4) << 6);
        dst->scales[j + 8] = (uint8_t)((sc[j + 4] & 15) | (m[j + 4] & 15) << 4);
    }
    uint8_t v[SIFT_QK_K];
    for (int s = 0; s < 8; s++)
        for (int t = 0; t < 4; t++)
            for (int u = 0; u < 4; u++) {
                const uint8_t byte = src->qs[32 * (4 * s + t) + 4 * r + u];
                v[32 * s + 4 * t + u] = byte & 15;
                v[32 * s + 16 + 4 * t + u] = byte >> 4;
            }
    for (int g = 0; g < 4; g++)
        for (int i = 0; i < 32; i++) dst->qs[32 * g + i] = (uint8_t)(v[64 * g + i] | v[64 * g + 32 + i] << 4);
}

void sift__q4_K_x8_pack_group(const void *rows, size_t row_bytes, int64_t nb, void *dst)
{
    for (int64_t k = 0; k < nb; k++) {
        const sift_block_q4_K *src[8];
        for (int r = 0; r < 8; r++) src[r] = (const sift_block_q4_K *)((const char *)rows + r * row_bytes) + k;
        sift__q4_K_x8_pack(src, (sift_block_q4_Kx8 *)dst + k);
    }
}

/* The Q4_K part of a Q5_K block (the same header and low nibbles). */
static void q5_K_low(const sift_block_q5_K *b, sift_block_q4_K *q4)
{
    q4->d = b->d;
    q4->dmin = b->dmin;
    memcpy(q4->scales, b->scales, sizeof q4->scales);
    memcpy(q4->qs, b->qs, sizeof q4->qs);
}

void sift__q5_K_x8_pack_group(const void *rows, size_t row_bytes, int64_t nb, void *dst)
{
    for (int64_t k = 0; k < nb; k++) {
        sift_block_q4_K low[8];
        const sift_block_q4_K *src[8];
        sift_block_q5_Kx8 *o = (sift_block_q5_Kx8 *)dst + k;
        memset(o->qh, 0, sizeof o->qh);
        for (int r = 0; r < 8; r++) {
            const sift_block_q5_K *b = (const sift_block_q5_K *)((const char *)rows + r * row_bytes) + k;
            q5_K_low(b, &low[r]);
            src[r] = &low[r];
            for (int s = 0; s < 8; s++)
                for (int i = 0; i < 32; i++) /* value i = 16h + 4t + u: bit 4h + t of byte 32s + 4r + u */
                    o->qh[32 * s + 4 * r + i % 4] |= (uint8_t)(((b->qh[i] >> s) & 1) << (4 * (i / 16) + i % 16 / 4));
        }
        sift__q4_K_x8_pack(src, &o->q4);
    }
}

void sift__q5_K_x8_get(const sift_block_q5_Kx8 *src, int r, sift_block_q5_K *dst)
{
    sift_block_q4_K low;
    sift__q4_K_x8_get(&src->q4, r, &low);
    dst->d = low.d;
    dst->dmin = low.dmin;
    memcpy(dst->scales, low.scales, sizeof dst->scales);
    memcpy(dst->qs, low.qs, sizeof dst->qs);
    for (int i = 0; i < 32; i++) {
        uint8_t h = 0;
        for (int s = 0; s < 8; s++) h |= (uint8_t)(((src->qh[32 * s + 4 * r + i % 4] >> (4 * (i / 16) + i % 16 / 4)) & 1) << s);
        dst->qh[i] = h;
    }
}

/* A Q6_K block's 256 values 0..63 in element order (ggml's layout: halves of 128 values,
 * value 32m + l of a half from ql[l + 32 (m & 1)] nibble m >> 1 and qh[l] bits 2m, 2m + 1),
 * and back. */
static void q6_K_values(const sift_block_q6_K *b, uint8_t q[SIFT_QK_K])
{
    for (int h = 0; h < 2; h++)
        for (int m = 0; m < 4; m++)
            for (int l = 0; l < 32; l++)
                q[128 * h + 32 * m + l] = (uint8_t)(((b->ql[64 * h + 32 * (m & 1) + l] >> (4 * (m >> 1))) & 15) |
                                                    ((b->qh[32 * h + l] >> (2 * m)) & 3) << 4);
}

static void q6_K_from_values(const uint8_t q[SIFT_QK_K], sift_block_q6_K *b)
{
    memset(b->ql, 0, sizeof b->ql);
    memset(b->qh, 0, sizeof b->qh);
    for (int h = 0; h < 2; h++)
        for (int m = 0; m < 4; m++)
            for (int l = 0; l < 32; l++) {
                const uint8_t v = q[128 * h + 32 * m + l];
                b->ql[64 * h + 32 * (m & 1) + l] |= (uint8_t)((v & 15) << (4 * (m >> 1)));
                b->qh[32 * h + l] |= (uint8_t)((v >> 4) << (2 * m));
            }
}

void sift__q6_K_x8_pack_group(const void *rows, size_t row_bytes, int64_t nb, void *dst)
{
    for (int64_t k = 0; k < nb; k++) {
        sift_block_q6_Kx8 *o = (sift_block_q6_Kx8 *)dst + k;
        memset(o->qh, 0, sizeof o->qh);
        for (int r = 0; r < 8; r++) {
            const sift_block_q6_K *b = (const sift_block_q6_K *)((const char *)rows + r * row_bytes) + k;
            uint8_t q[SIFT_QK_K];
            q6_K_values(b, q);
            o->d[r] = b->d;
            for (int j = 0; j < 16; j++) o->sc[8 * j + r] = b->scales[j];
            for (int s = 0; s < 8; s++)
                for (int t = 0; t < 4; t++)
                    for (int u = 0; u < 4; u++) {
                        const uint8_t lo = q[32 * s + 4 * t + u], hi = q[32 * s + 16 + 4 * t + u];
                        o->ql[32 * (4 * s + t) + 4 * r + u] = (uint8_t)((lo & 15) | (hi & 15) << 4);
                        o->qh[32 * (2 * s + t / 2) + 4 * r + u] |= (uint8_t)(((lo >> 4) | (hi >> 4) << 2) << (4 * (t % 2)));
                    }
        }
    }
}

void sift__q6_K_x8_get(const sift_block_q6_Kx8 *src, int r, sift_block_q6_K *dst)
{
    uint8_t q[SIFT_QK_K];
    for (int s = 0; s < 8; s++)
        for (int t = 0; t < 4; t++)
            for (int u = 0; u < 4; u++) {
                const uint8_t l = src->ql[32 * (4 * s + t) + 4 * r + u], h = (uint8_t)(src->qh[32 * (2 * s + t / 2) + 4 * r + u] >> (4 * (t % 2)));
                q[32 * s + 4 * t + u] = (uint8_t)((l & 15) | (h & 3) << 4);
                q[32 * s + 16 + 4 * t + u] = (uint8_t)((l >> 4) | (h >> 2 & 3) << 4);
            }
    q6_K_from_values(q, dst);
    for (int j = 0; j < 16; j++) dst->scales[j] = src->sc[8 * j + r];
    dst->d = src->d[r];
}

void sift__mxfp4_x8_pack_group(const void *rows, size_t row_bytes, int64_t nb, void *dst)
{
    for (int64_t k = 0; k < nb; k++) {
        sift_block_mxfp4x8 *o = (sift_block_mxfp4x8 *)dst + k;
        uint8_t c[8][SIFT_QK_MXFP4];
        for (int r = 0; r < 8; r++) {
            const sift__block_mxfp4 *b = (const sift__block_mxfp4 *)((const char *)rows + r * row_bytes) + k;
            o->e[r] = b->e;
            for (int j = 0; j < SIFT_QK_MXFP4 / 2; j++) c[r][j] = b->qs[j] & 15, c[r][j + 16] = b->qs[j] >> 4;
        }
        for (int t = 0; t < 4; t++)
            for (int r = 0; r < 8; r++)
                for (int u = 0; u < 4; u++) o->qs[32 * t + 4 * r + u] = (uint8_t)(c[r][8 * t + u] | c[r][8 * t + 4 + u] << 4);
    }
}

void sift__q8_0_x8_pack_group(const void *rows, size_t row_bytes, int64_t nb, void *dst)
{
    for (int64_t k = 0; k < nb; k++) {
        sift_block_q8_0x8 *o = (sift_block_q8_0x8 *)dst + k;
        for (int r = 0; r < 8; r++) {
            const sift__block_q8_0 *b = (const sift__block_q8_0 *)((const char *)rows + r * row_bytes) + k;
            o->d[r] = b->d;
            for (int t = 0; t < SIFT_QK8_0 / 4; t++) memcpy(o->qs + 32 * t + 4 * r, b->qs + 4 * t, 4);
        }
    }
}

void sift__q8_0_x8_get(const sift_block_q8_0x8 *src, int r, sift__block_q8_0 *dst)
{
    dst->d = src->d[r];
    for (int t = 0; t < SIFT_QK8_0 / 4; t++) memcpy(dst->qs + 4 * t, src->qs + 32 * t + 4 * r, 4);
}

sift__x8_pack_fn sift__x8_pack_ref(sift_tensor_type t)
{
    switch (t) {
    case SIFT_TYPE_Q4_K: return sift__q4_K_x8_pack_group;
    case SIFT_TYPE_Q5_K: return sift__q5_K_x8_pack_group;
    case SIFT_TYPE_Q6_K: return sift__q6_K_x8_pack_group;
    case SIFT_TYPE_MXFP4: return sift__mxfp4_x8_pack_group;
    case SIFT_TYPE_Q8_0: return sift__q8_0_x8_pack_group;
    default: return NULL;
    }
}
