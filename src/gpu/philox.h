/*
 * philox.h - Philox4x32-10, the counter-based stream dist draws from on the device: a draw
 * is a pure function of (seed, counter), so every row has its own stream, independent of
 * the batch and of the order blocks run in, and the host reference draws the same numbers.
 */
#ifndef SIFT_GPU_PHILOX_H
#define SIFT_GPU_PHILOX_H

#include "gpu/device_types.h"

SIFT_HD void sift__gpu_mulhilo(uint32_t a, uint32_t b, uint32_t *hi, uint32_t *lo)
{
#ifdef __CUDA_ARCH__
    *hi = __umulhi(a, b);
    *lo = a * b;
#else
    const uint64_t p = (uint64_t)a * b;
    *hi = (uint32_t)(p >> 32);
    *lo = (uint32_t)p;
#endif
}

/* ctr <- Philox4x32-10(ctr, key) */
SIFT_HD void sift__gpu_philox(uint32_t ctr[4], const uint32_t key_in[2])
{
    uint32_t k0 = key_in[0], k1 = key_in[1];
    for (int r = 0; r < 10; r++) {
        if (r > 0) {
            k0 += 0x9E3779B9u;
            k1 += 0xBB67AE85u;
        }
        uint32_t hi0, lo0, hi1, lo1;
        sift__gpu_mulhilo(0xD2511F53u, ctr[0], &hi0, &lo0);
        sift__gpu_mulhilo(0xCD9E8D57u, ctr[2], &hi1, &lo1);
        const uint32_t c1 = ctr[1], c3 = ctr[3];
        ctr[0] = hi1 ^ c1 ^ k0;
        ctr[1] = lo1;
        ctr[2] = hi0 ^ c3 ^ k1;
        ctr[3] = lo0;
    }
}

/* Draw number `counter` of the stream `seed`: a double in [0, 1) with 53 random bits. The
 * key is (seed, "dist"), the counter (counter, "sift"); one Philox block per draw. */
SIFT_HD double sift__gpu_uniform(uint32_t seed, uint64_t counter)
{
    uint32_t ctr[4] = {(uint32_t)counter, (uint32_t)(counter >> 32), 0u, 0x73696674u};
    const uint32_t key[2] = {seed, 0x64697374u};
    sift__gpu_philox(ctr, key);
    return ((double)(ctr[0] >> 5) * 67108864.0 + (double)(ctr[1] >> 6)) * (1.0 / 9007199254740992.0);
}

#endif
