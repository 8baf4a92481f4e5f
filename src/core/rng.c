/*
 * rng.c - MT19937 and libstdc++'s uniform / discrete distributions (see rng.h for why
 * every detail here matters: the token streams must equal llama.cpp's).
 */
#include "core/rng.h"

#include <math.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "sift.h"

#define MT_M 397
#define MT_MATRIX_A 0x9908b0dfu
#define MT_UPPER 0x80000000u
#define MT_LOWER 0x7fffffffu

void sift__rng_seed(sift__rng *rng, uint32_t seed)
{
    rng->mt[0] = seed;
    for (uint32_t i = 1; i < SIFT_MT_N; i++) {
        uint32_t prev = rng->mt[i - 1];
        rng->mt[i] = 1812433253u * (prev ^ (prev >> 30)) + i;
    }
    rng->idx = SIFT_MT_N;
}

/* Regenerate all 624 words at once (the same result as libstdc++'s _M_gen_rand). */
static void mt_twist(sift__rng *rng)
{
    uint32_t *mt = rng->mt;
    int k;
    for (k = 0; k < SIFT_MT_N - MT_M; k++) {
        uint32_t y = (mt[k] & MT_UPPER) | (mt[k + 1] & MT_LOWER);
        mt[k] = mt[k + MT_M] ^ (y >> 1) ^ ((y & 1u) ? MT_MATRIX_A : 0u);
    }
    for (; k < SIFT_MT_N - 1; k++) {
        uint32_t y = (mt[k] & MT_UPPER) | (mt[k + 1] & MT_LOWER);
        mt[k] = mt[k + (MT_M - SIFT_MT_N)] ^ (y >> 1) ^ ((y & 1u) ? MT_MATRIX_A : 0u);
    }
    uint32_t y = (mt[SIFT_MT_N - 1] & MT_UPPER) | (mt[0] & MT_LOWER);
    mt[SIFT_MT_N - 1] = mt[MT_M - 1] ^ (y >> 1) ^ ((y & 1u) ? MT_MATRIX_A : 0u);
    rng->idx = 0;
}

uint32_t sift__rng_next(sift__rng *rng)
{
    if (rng->idx >= SIFT_MT_N) mt_twist(rng);
    uint32_t y = rng->mt[rng->idx++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

double sift__rng_uniform_double(sift__rng *rng)
{
    /* generate_canonical<double, 53>: k = ceil(53 / 32) = 2 draws, low word first */
    double sum = (double)sift__rng_next(rng);
    sum += (double)sift__rng_next(rng) * 4294967296.0;
    double r = sum / 18446744073709551616.0;
    if (r >= 1.0) r = nextafter(1.0, 0.0);
    return r;
}

float sift__rng_uniform_float(sift__rng *rng)
{
    /* generate_canonical<float, 24>: one draw */
    float r = (float)sift__rng_next(rng) / 4294967296.0f;
    if (r >= 1.0f) r = nextafterf(1.0f, 0.0f);
    return r;
}

size_t sift__rng_discrete(sift__rng *rng, const float *w, size_t n, double *cp)
{
    if (n < 2) return 0; /* libstdc++ clears a one-weight table: no draw */
    double sum = 0.0;
    for (size_t i = 0; i < n; i++) sum += (double)w[i];
    double acc = 0.0;
    for (size_t i = 0; i < n; i++) {
        double q = (double)w[i] / sum;
        acc = i ? acc + q : q;
        cp[i] = acc;
    }
    cp[n - 1] = 1.0;
    const double u = sift__rng_uniform_double(rng);
    /* std::lower_bound: first i with !(cp[i] < u), by the same bisection */
    size_t first = 0, len = n;
    while (len > 0) {
        size_t half = len >> 1;
        if (cp[first + half] < u) {
            first += half + 1;
            len -= half + 1;
        } else {
            len = half;
        }
    }
    return first < n ? first : n - 1; /* only NaN weights get here; llama.cpp would overrun */
}

uint32_t sift__seed_resolve(uint32_t seed)
{
    if (seed != SIFT_DEFAULT_SEED) return seed;
    uint32_t s;
    if (getrandom(&s, sizeof s, GRND_NONBLOCK) == (ssize_t)sizeof s) return s;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint32_t)ts.tv_nsec ^ (uint32_t)ts.tv_sec ^ ((uint32_t)getpid() << 16);
}
